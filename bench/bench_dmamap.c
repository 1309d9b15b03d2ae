/* bench/bench_dmamap.c: DMA map+unmap through the device API, 1 to 1,000,000 live mappings. */
#include <getopt.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntbfab/device.h"
#include "ntbfab/error.h"
#include "bench.h"
#include "fakedaemon.h"

/*
 * The driver-side cost of Device Lending's DMA mapping (article 4.3, 7.1.1): a borrowed
 * device's buffer is mapped with an IOVA of the handle's share and an entry in the
 * borrower's IOMMU, and unmapped again, with no daemon and no lender involved. Three handles
 * of one borrowed accelerator, each with its own IOVA share (4.25 GiB: room for a million
 * pages), hold 1, 1,000 and 1,000,000 live mappings; rounds alternate between them so that
 * the three figures are measured side by side under the same machine noise. Each sample is
 * the mean of BATCH map+unmap pairs timed together (one clock read per batch). The fabric
 * is programmed by hand (tests/unit/fakedaemon.c answers device.open); the lender's window
 * is 16 GiB so that a 13 GiB DMA window fits.
 */

static const char *yaml =
    "cluster: {name: bench-dmamap, backend: sim}\n"
    "nodes:\n"
    "  - name: lender\n"
    "    id: 4\n"
    "    address: 127.0.0.1:7700\n"
    "    ram: 1GiB\n"
    "    adapters:\n"
    "      - {name: ntb0, model: pxh830, window: 16GiB}\n"
    "    devices:\n"
    "      - {name: acc0, bdf: \"0000:04:00.0\", lend: true, sim: {model: accel, memory: 4MiB}}\n"
    "  - name: borrower\n"
    "    id: 8\n"
    "    address: 127.0.0.2:7700\n"
    "    ram: 1GiB\n"
    "    adapters:\n"
    "      - {name: ntb0, model: pxh830, window: 1GiB}\n"
    "links:\n"
    "  - [lender.ntb0, borrower.ntb0]\n";

#define PAGE  4096u
#define BATCH 16
#define BURST 256
#define NLIVE 3

static const uint64_t live_counts[NLIVE] = {1, 1000, 1000000};

static int die(struct ntbf_ctx *ctx, const char *what, int r)
{
        fprintf(stderr, "bench_dmamap: %s: %s (%s)\n", what, ntbf_strerror(r),
                ctx ? ntbf_ctx_error(ctx) : ntbf_ctx_error(NULL));
        return 1;
}

int main(int argc, char **argv)
{
        const char *json_path = NULL;
        uint64_t rounds = 400, per_round = 1024;
        static const struct option longopts[] = {{"json", required_argument, NULL, 'j'},
                                                 {"rounds", required_argument, NULL, 'r'},
                                                 {NULL, 0, NULL, 0}};
        for (int c; (c = getopt_long(argc, argv, "j:r:", longopts, NULL)) != -1;) {
                if (c == 'j')
                        json_path = optarg;
                else if (c == 'r')
                        rounds = strtoull(optarg, NULL, 0);
                else
                        return 2;
        }
        if (!rounds)
                rounds = 1;
        struct fk_fabric f;
        struct fakedaemon fk;
        if (fk_fabric_up(&f, yaml, false) || fk_start(&fk, &f, "borrower"))
                return 1;
        const uint64_t share = 4352 * NTBF_MiB; /* 4.25 GiB: 1,114,112 pages */
        struct fk_dev *x = fk_borrow(&fk, "lender", "acc0", 0, 3 * share, share);
        if (!x)
                return 1;
        struct ntbf_ctx *ctx;
        int r = ntbf_ctx_open(f.dir, "borrower", &ctx);
        if (r)
                return die(NULL, "ntbf_ctx_open", r);
        struct ntbf_dev *dev[NLIVE];
        for (int i = 0; i < NLIVE; i++)
                if ((r = ntbf_dev_open(ctx, x->fdid, &dev[i])))
                        return die(ctx, "ntbf_dev_open", r);
        /* 256 pages of DMA memory; live mappings reuse them (an IOMMU maps a page many times). */
        const unsigned bufpages = 256;
        uint8_t *buf;
        if ((r = ntbf_dma_alloc(ctx, (size_t)bufpages * PAGE, 0, (void **)&buf)))
                return die(ctx, "ntbf_dma_alloc", r);
        double establish_ms = 0;
        for (int i = 0; i < NLIVE; i++) {
                uint64_t t0 = bench_now_ns(), io;
                for (uint64_t k = 0; k < live_counts[i]; k++)
                        if ((r = ntbf_dev_dma_map(dev[i], buf + PAGE * (k % bufpages), PAGE, &io)))
                                return die(ctx, "establishing live mappings", r);
                if (live_counts[i] == 1000000)
                        establish_ms = (double)(bench_now_ns() - t0) / 1e6;
        }
        uint64_t samples = rounds * per_round / BATCH;
        uint64_t *ns[NLIVE];
        for (int i = 0; i < NLIVE; i++) {
                ns[i] = calloc(samples, sizeof(uint64_t));
                if (!ns[i])
                        return 1;
        }
        /* Warm up every handle, then alternate. */
        uint64_t io;
        for (int i = 0; i < NLIVE; i++)
                for (int k = 0; k < 10000; k++)
                        if (ntbf_dev_dma_map(dev[i], buf, PAGE, &io) ||
                            ntbf_dev_dma_unmap(dev[i], io, PAGE))
                                return die(ctx, "warm-up", -EIO);
        uint64_t n = 0;
        for (uint64_t round = 0; round < rounds; round++) {
                for (int i = 0; i < NLIVE; i++) {
                        struct ntbf_dev *d = dev[(i + round) % NLIVE];
                        uint64_t *out = ns[(i + round) % NLIVE] + n;
                        for (uint64_t b = 0; b < per_round / BATCH; b++) {
                                uint64_t t0 = bench_now_ns();
                                for (int k = 0; k < BATCH; k++) {
                                        r = ntbf_dev_dma_map(d, buf + PAGE * (k & 7), PAGE, &io);
                                        r |= ntbf_dev_dma_unmap(d, io, PAGE);
                                }
                                out[b] = bench_now_ns() - t0;
                                if (r)
                                        return die(ctx, "map+unmap", r);
                        }
                }
                n += per_round / BATCH;
        }
        /*
         * Bursts: BURST maps, then the BURST unmaps (a deep I/O queue's pattern). More pages
         * than the allocator's single-page cache holds go back through the buddy lists.
         */
        uint64_t *burst_ns[NLIVE], bursts = rounds * 4;
        uint64_t *bio = calloc(BURST, sizeof(uint64_t));
        for (int i = 0; i < NLIVE; i++)
                if (!(burst_ns[i] = calloc(bursts, sizeof(uint64_t))) || !bio)
                        return 1;
        for (uint64_t round = 0; round < rounds; round++) {
                for (int i = 0; i < NLIVE; i++) {
                        int h = (int)((i + round) % NLIVE);
                        for (int b = 0; b < 4; b++) {
                                uint64_t t0 = bench_now_ns();
                                r = 0;
                                for (int k = 0; k < BURST; k++)
                                        r |= ntbf_dev_dma_map(dev[h], buf + PAGE * (k % bufpages),
                                                              PAGE, &bio[k]);
                                for (int k = 0; k < BURST; k++)
                                        r |= ntbf_dev_dma_unmap(dev[h], bio[k], PAGE);
                                burst_ns[h][round * 4 + (uint64_t)b] = bench_now_ns() - t0;
                                if (r)
                                        return die(ctx, "burst", r);
                        }
                }
        }
        free(bio);
        double med[NLIVE], p99[NLIVE], lo = 1e18, hi = 0;
        printf("DMA map + unmap of one 4 KiB page, borrowed device, borrower IOMMU "
               "(%llu pairs per figure, batches of %d)\n",
               (unsigned long long)(samples * BATCH), BATCH);
        printf("  %-10s %10s %10s\n", "live", "median ns", "p99 ns");
        for (int i = 0; i < NLIVE; i++) {
                med[i] = (double)bench_percentile(ns[i], samples, 50) / BATCH;
                p99[i] = (double)bench_percentile(ns[i], samples, 99) / BATCH;
                lo = med[i] < lo ? med[i] : lo;
                hi = med[i] > hi ? med[i] : hi;
                printf("  %-10llu %10.1f %10.1f\n", (unsigned long long)live_counts[i], med[i],
                       p99[i]);
        }
        printf("  flatness (max median / min median): %.2f\n", hi / lo);
        double bmed[NLIVE], bp99[NLIVE], blo = 1e18, bhi = 0;
        printf("In bursts of %d maps then %d unmaps (%llu bursts per figure), per pair:\n", BURST,
               BURST, (unsigned long long)bursts);
        printf("  %-10s %10s %10s\n", "live", "median ns", "p99 ns");
        for (int i = 0; i < NLIVE; i++) {
                bmed[i] = (double)bench_percentile(burst_ns[i], bursts, 50) / BURST;
                bp99[i] = (double)bench_percentile(burst_ns[i], bursts, 99) / BURST;
                blo = bmed[i] < blo ? bmed[i] : blo;
                bhi = bmed[i] > bhi ? bmed[i] : bhi;
                printf("  %-10llu %10.1f %10.1f\n", (unsigned long long)live_counts[i], bmed[i],
                       bp99[i]);
        }
        printf("  flatness (max median / min median): %.2f\n", bhi / blo);
        /* A million pages in establish_ms milliseconds: as many nanoseconds a page. */
        printf("  establishing 1,000,000 live mappings: %.1f ms (%.1f ns a page)\n", establish_ms,
               establish_ms);
        if (json_path) {
                struct json_object *o = json_object_new_object(), *rows = json_object_new_array();
                json_object_object_add(o, "bench", json_object_new_string("dmamap"));
                json_object_object_add(o, "batch", json_object_new_int(BATCH));
                json_object_object_add(o, "pairs_per_figure",
                                       json_object_new_int64((int64_t)(samples * BATCH)));
                for (int i = 0; i < NLIVE; i++) {
                        struct json_object *row = json_object_new_object();
                        json_object_object_add(row, "live",
                                               json_object_new_int64((int64_t)live_counts[i]));
                        json_object_object_add(row, "median_ns", json_object_new_double(med[i]));
                        json_object_object_add(row, "p99_ns", json_object_new_double(p99[i]));
                        json_object_array_add(rows, row);
                }
                json_object_object_add(o, "rows", rows);
                struct json_object *brows = json_object_new_array();
                for (int i = 0; i < NLIVE; i++) {
                        struct json_object *row = json_object_new_object();
                        json_object_object_add(row, "live",
                                               json_object_new_int64((int64_t)live_counts[i]));
                        json_object_object_add(row, "median_ns", json_object_new_double(bmed[i]));
                        json_object_object_add(row, "p99_ns", json_object_new_double(bp99[i]));
                        json_object_array_add(brows, row);
                }
                json_object_object_add(o, "burst", json_object_new_int(BURST));
                json_object_object_add(o, "burst_rows", brows);
                json_object_object_add(o, "burst_flatness", json_object_new_double(bhi / blo));
                json_object_object_add(o, "flatness", json_object_new_double(hi / lo));
                json_object_object_add(o, "establish_1m_ms", json_object_new_double(establish_ms));
                if (json_object_to_file_ext(json_path, o, JSON_C_TO_STRING_PRETTY))
                        fprintf(stderr, "bench_dmamap: cannot write %s\n", json_path);
                json_object_put(o);
        }
        for (int i = 0; i < NLIVE; i++) {
                free(ns[i]);
                free(burst_ns[i]);
                ntbf_dev_close(dev[i]);
        }
        ntbf_dma_free(ctx, buf);
        ntbf_ctx_close(ctx);
        fk_kill(&fk);
        fk_fabric_down(&f);
        return 0;
}
