/* memcpy_bw.c: memcpy bandwidth into a mapped remote segment, next to the same into local memory.
 */
/*
 * Usage: memcpy_bw -rn NODE_ID [-server] [-size BYTES] [-rounds N] [-a ADAPTER] [-json]
 *
 * The server offers a segment; the client maps it and copies a buffer into it with plain
 * memcpy (stores through the mapping: no library call on the way), interleaved piece by piece
 * with the same copy into a local segment of the same size, and prints both bandwidths (the
 * medians of the rounds) and the median of the rounds' ratios.
 * With NTBs the mapping is a window onto the remote memory: the ratio is what the
 * interconnect costs for CPU stores.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sisci_api.h"

#define NO_FLAGS    0
#define NO_CALLBACK NULL
#define NO_ARG      NULL

#define SERVER_SEGMENT 0x700
#define LOCAL_SEGMENT  0x701

static sci_error_t error;

static void check(const char *what)
{
        if (error != SCI_ERR_OK) {
                fprintf(stderr, "memcpy_bw: %s failed: %s (0x%x)\n", what, SCIGetErrorString(error),
                        error);
                exit(1);
        }
}

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
        unsigned remote_node = 0, adapter = 0, rounds = 9;
        size_t size = 16u << 20;
        int server = 0, json = 0;
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "-rn") && i + 1 < argc)
                        remote_node = (unsigned)strtoul(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-a") && i + 1 < argc)
                        adapter = (unsigned)strtoul(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-size") && i + 1 < argc)
                        size = strtoull(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-rounds") && i + 1 < argc)
                        rounds = (unsigned)strtoul(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-server"))
                        server = 1;
                else if (!strcmp(argv[i], "-json"))
                        json = 1;
                else {
                        fprintf(stderr, "usage: memcpy_bw -rn NODE_ID [-server] [-size BYTES] "
                                        "[-rounds N] [-a ADAPTER] [-json]\n");
                        return 2;
                }
        }
        if (!rounds || size < 4096)
                return 2;
        sci_desc_t sd;
        sci_local_segment_t seg;
        SCIInitialize(NO_FLAGS, &error);
        check("SCIInitialize");
        SCIOpen(&sd, NO_FLAGS, &error);
        check("SCIOpen");
        if (server) {
                SCICreateSegment(sd, &seg, SERVER_SEGMENT, size, NO_CALLBACK, NO_ARG, NO_FLAGS,
                                 &error);
                check("SCICreateSegment");
                SCIPrepareSegment(seg, adapter, NO_FLAGS, &error);
                check("SCIPrepareSegment");
                SCISetSegmentAvailable(seg, adapter, NO_FLAGS, &error);
                check("SCISetSegmentAvailable");
                /* Serve until the client has connected and gone. */
                int connected = 0;
                for (;;) {
                        unsigned node, ad;
                        sci_segment_cb_reason_t r = SCIWaitForLocalSegmentEvent(
                            seg, &node, &ad, SCI_INFINITE_TIMEOUT, NO_FLAGS, &error);
                        check("SCIWaitForLocalSegmentEvent");
                        if (r == SCI_CB_CONNECT)
                                connected = 1;
                        if (r == SCI_CB_DISCONNECT && connected)
                                break;
                }
                SCIRemoveSegment(seg, NO_FLAGS, &error);
                check("SCIRemoveSegment");
                SCIClose(sd, NO_FLAGS, &error);
                SCITerminate();
                return 0;
        }
        sci_remote_segment_t remote;
        sci_map_t rmap, lmap;
        SCIConnectSegment(sd, &remote, remote_node, SERVER_SEGMENT, adapter, NO_CALLBACK, NO_ARG,
                          20000, NO_FLAGS, &error);
        check("SCIConnectSegment");
        void *rp =
            (void *)(uintptr_t)SCIMapRemoteSegment(remote, &rmap, 0, size, NULL, NO_FLAGS, &error);
        check("SCIMapRemoteSegment");
        SCICreateSegment(sd, &seg, LOCAL_SEGMENT, size, NO_CALLBACK, NO_ARG, NO_FLAGS, &error);
        check("SCICreateSegment");
        void *lp = SCIMapLocalSegment(seg, &lmap, 0, size, NULL, NO_FLAGS, &error);
        check("SCIMapLocalSegment");
        uint8_t *src = malloc(size);
        double *rt = calloc(rounds, sizeof(*rt)), *lt = calloc(rounds, sizeof(*lt));
        if (!src || !rt || !lt)
                return 1;
        for (size_t k = 0; k < size; k++)
                src[k] = (uint8_t)(k * 7);
        memcpy(rp, src, size); /* both destinations touched once before timing */
        memcpy(lp, src, size);
        /*
         * Each round copies the whole buffer to both, in 8 MiB pieces taken in turns (which
         * one goes first alternates), so that whatever else the machine does at a moment
         * slows both alike: the ratio is what it measures.
         */
        const size_t piece = size < (8u << 20) ? size : (8u << 20);
        for (unsigned r = 0; r < rounds; r++) {
                /* A fresh source each round: how its pages fall against the destinations'
                 * in the caches otherwise favours one of them for the whole run. */
                free(src);
                src = malloc(size);
                if (!src)
                        return 1;
                for (size_t k = 0; k < size; k++)
                        src[k] = (uint8_t)(k * 7);
                rt[r] = lt[r] = 0;
                for (size_t off = 0; off < size; off += piece) {
                        size_t n = size - off < piece ? size - off : piece;
                        for (int k = 0; k < 2; k++) {
                                int to_remote = (int)((r + off / piece + (size_t)k) % 2);
                                uint8_t *dst = (uint8_t *)(to_remote ? rp : lp) + off;
                                double t0 = now_s();
                                memcpy(dst, src + off, n);
                                (to_remote ? rt : lt)[r] += now_s() - t0;
                        }
                }
        }
        if (memcmp(rp, src, size)) {
                fprintf(stderr, "memcpy_bw: the remote segment does not hold what was copied\n");
                return 1;
        }
        /* The ratio of each round (both copies saw the same moments), then the medians. */
        double *ratio = calloc(rounds, sizeof(*ratio));
        if (!ratio)
                return 1;
        for (unsigned r = 0; r < rounds; r++)
                ratio[r] = lt[r] / rt[r];
        qsort(ratio, rounds, sizeof(*ratio), cmp);
        qsort(rt, rounds, sizeof(*rt), cmp);
        qsort(lt, rounds, sizeof(*lt), cmp);
        double rbw = size / rt[rounds / 2] / 1e6, lbw = size / lt[rounds / 2] / 1e6;
        double med_ratio = ratio[rounds / 2];
        free(ratio);
        if (json)
                printf("{\"bytes\": %zu, \"rounds\": %u, \"remote_MBps\": %.1f, \"local_MBps\": "
                       "%.1f, \"ratio\": %.3f}\n",
                       size, rounds, rbw, lbw, med_ratio);
        else
                printf("memcpy of %zu bytes (median of %u): remote segment %.0f MB/s, local %.0f "
                       "MB/s, ratio %.3f\n",
                       size, rounds, rbw, lbw, med_ratio);
        free(src);
        free(rt);
        free(lt);
        SCIUnmapSegment(lmap, NO_FLAGS, &error);
        check("SCIUnmapSegment");
        SCIRemoveSegment(seg, NO_FLAGS, &error);
        check("SCIRemoveSegment");
        SCIUnmapSegment(rmap, NO_FLAGS, &error);
        check("SCIUnmapSegment");
        SCIDisconnectSegment(remote, NO_FLAGS, &error);
        check("SCIDisconnectSegment");
        SCIClose(sd, NO_FLAGS, &error);
        check("SCIClose");
        SCITerminate();
        return 0;
}
