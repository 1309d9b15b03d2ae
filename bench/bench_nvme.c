/* bench/bench_nvme.c: the simulated NVMe's 4 KiB random-read latency at queue depth 1, queues in
 * the borrower's RAM across the NTB against queues local to the lender, side by side. */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ntbfab/config.h"
#include "ntbfab/error.h"
#include "ntbfab/sim.h"
#include "bench.h"
#include "devmodel.h"
#include "lendhand.h"
#include "nvme_drv.h"

/*
 * What is measured. One process plays every part (the simulated fabric does not care which
 * process issues a store): it creates a two-host fabric (lender with nvme0, borrower with an
 * IOMMU, PXH830 back to back), runs the device host, lends nvme0 by hand
 * (tests/integration/lendhand.h) and drives it with the test driver
 * (tests/integration/nvme_drv.h), polling for completions. Two I/O queue pairs on the same
 * controller:
 *
 *   remote  SQ, CQ and data buffer in the borrower's RAM, reached by the controller through
 *           the lender's DMA window and the borrower's IOMMU; doorbells written by the CPU
 *           through the borrower's window (the article's 7.4.1 "SQ in local RAM" case);
 *   local   the same in the lender's RAM, doorbells through the lender's own BAR mapping.
 *
 * Each sample is one 4 KiB read of a random 4 KiB block at queue depth 1, timed by the
 * submitter from before the SQE is written until its completion is seen in the CQ (the
 * article's "command completion latency"). The two queues take turns in rounds, so both see
 * the same machine. Printed per queue: median, p99, max of the completion latency, and
 *
 *   model      time spent inside the NVMe model's poll per command, the median over the
 *              polls that did work (a wrapper around the built-in model times every poll):
 *              the simulator's own cost of fetching, executing (a pread of the image file)
 *              and completing a command. It is most of the completion latency; the rest is
 *              the submitter's SQE write and doorbell and the two threads seeing each
 *              other's stores. The remote - local difference of the medians, also printed,
 *              is what the NTB path costs inside the simulator (window, IOMMU look-ups);
 *   modeled    the latency a real PCIe fabric would add on this path, from the route
 *              traces (ntbf_sim_write/read): the doorbell write, the SQE fetch (a read:
 *              round trip), the data write and the completion write, summed hop by hop
 *              (adapters 132 ns each for the PXH830's PEX8733, cables 0). The simulator does
 *              not sleep to match it: it is reported, not added to the measured latency.
 *
 * and the ratio remote/local of the medians. In the simulator the NTB costs what a few
 * table look-ups and one IOMMU walk per page cost (tens of ns), so the ratio is close to 1:
 * the wall-clock figures measure the model and the host, the modeled figure is what a
 * fabric would add on top.
 *
 * Polling and backoff (docs/sim.md): the model's thread spins for 50 us after its last
 * command, then naps 1 us doubling to 1 ms. At queue depth 1 back to back the next command
 * arrives within the spin window, so the measured latency is the model's work plus the
 * time for a spinning thread to see a store from another CPU: no nap is in it. This needs
 * two free CPUs (the submitter and the model both spin); on a loaded machine a sample
 * includes whatever the scheduler takes. The "after idle" line shows the other regime:
 * commands 5 ms apart find the model napping and wait up to its 1 ms nap. The DMA engines
 * and the reaper are not started (nothing here uses them), so no other device host thread
 * wakes during the run; the wrapper's two clock reads per poll are included in every figure.
 * The warm-up lasts at least 500 ms: before that the scheduler may keep both spinning
 * threads on one CPU, which shows as a p99 several times the steady one.
 */

#define MiB      (UINT64_C(1) << 20)
#define CAPACITY (64 * MiB)
#define BLOCKS   (CAPACITY / 4096)
#define IOVA     UINT64_C(0x40000000)
#define WSLOT    128u
#define QDEPTH   64u

static const char *cluster = "cluster: {name: bench-nvme, backend: sim}\n"
                             "nodes:\n"
                             "  - name: lender\n"
                             "    id: 4\n"
                             "    address: 127.0.0.1:7700\n"
                             "    ram: 256MiB\n"
                             "    iommu: false\n"
                             "    adapters:\n"
                             "      - {name: ntb0, model: pxh830}\n"
                             "    devices:\n"
                             "      - {name: nvme0, bdf: \"0000:03:00.0\", lend: true,\n"
                             "         sim: {model: nvme, capacity: 64MiB, queues: 16}}\n"
                             "  - name: borrower\n"
                             "    id: 8\n"
                             "    address: 127.0.0.2:7700\n"
                             "    ram: 256MiB\n"
                             "    iommu: true\n"
                             "    adapters:\n"
                             "      - {name: ntb0, model: pxh830}\n"
                             "links:\n"
                             "  - [lender.ntb0, borrower.ntb0]\n";

/* ---- the model, timed --------------------------------------------------------------------- */

static const struct ntbf_sim_model_ops *inner;
/* Duration of every poll that did work, written by the model's thread only. */
#define MLOG (1u << 20)
static uint64_t *mlog;
static _Atomic uint64_t mlen, idle_polls;

static int w_create(const struct ntbf_sim_devenv *env, void **state)
{
        return inner->create(env, state);
}

static int w_poll(void *state, uint64_t now_ns)
{
        uint64_t t0 = bench_now_ns();
        int n = inner->poll(state, now_ns);
        uint64_t dt = bench_now_ns() - t0;
        if (n > 0) {
                uint64_t i = mlen;
                if (i < MLOG)
                        mlog[i] = dt;
                mlen = i + 1;
        } else {
                idle_polls++;
        }
        return n;
}

static void w_reset(void *state)
{
        inner->reset(state);
}

static void w_destroy(void *state)
{
        inner->destroy(state);
}

static const struct ntbf_sim_model_ops timed = {"nvme-timed", w_create, w_poll, w_reset, w_destroy};

static const struct ntbf_sim_model_ops *model_for(const struct ntbf_device *d)
{
        const struct ntbf_sim_model_ops *o = ntbf_sim_builtin_model(d);
        if (!o || strcmp(o->name, "nvme"))
                return NULL;
        inner = o;
        return &timed;
}

/* ---- one queue ----------------------------------------------------------------------------- */

struct side {
        const char *name;
        struct nvme_dma dma;
        struct nvme_queue q;
        volatile uint8_t *regs;
        uint8_t *buf;
        uint64_t buf_dev;
        uint64_t *lat;
        size_t n;
        uint64_t median;
        uint64_t *model; /* durations of the model's busy polls during this side's reads */
        size_t nmodel;
        struct ntbf_sim_trace tr_db, tr_sqe, tr_data, tr_cqe;
};

static uint64_t rnd(uint64_t *s)
{
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

static char dir[] = "/dev/shm/ntbfab-bench-nvme-XXXXXX";

/* Remove the instance and the namespace image. */
static void cleanup(void)
{
        ntbf_sim_fabric_destroy(dir);
        char p[sizeof(dir) + 64];
        snprintf(p, sizeof(p), "%s/images/lender-nvme0.img", dir);
        unlink(p);
        snprintf(p, sizeof(p), "%s/images", dir);
        rmdir(p);
        rmdir(dir);
}

_Noreturn static void die(const char *what, int r)
{
        fprintf(stderr, "bench_nvme: %s: %s\n", what, r < 0 ? ntbf_strerror(r) : "NVMe status");
        cleanup();
        exit(1);
}

/* One QD1 read of a random block; returns ns from the SQE write to the completion. */
static uint64_t read_one(struct nvme_ctrl *c, struct side *s, uint64_t *seed,
                         const struct nvme_wait *w)
{
        uint64_t blk = rnd(seed) % BLOCKS;
        struct ntbf_nvme_sqe cmd;
        int r = nvme_rw_prep(c, &s->q, &cmd, NTBF_NVME_CMD_READ, blk * 8, 8, s->buf_dev, 0);
        if (r)
                die("prep", r);
        struct ntbf_nvme_cqe e;
        uint64_t t0 = bench_now_ns();
        int cid = nvme_submit(&s->q, &cmd);
        r = cid < 0 ? cid : nvme_wait_cid(&s->q, w, (uint16_t)cid, &e);
        uint64_t t1 = bench_now_ns();
        if (r || nvme_cqe_status(&e))
                die("read", r ? r : nvme_cqe_status(&e));
        uint64_t stamp;
        memcpy(&stamp, s->buf, 8);
        if (stamp != blk + 1) {
                fprintf(stderr, "bench_nvme: block %llu read back as %llu\n",
                        (unsigned long long)blk, (unsigned long long)stamp);
                exit(1);
        }
        return t1 - t0;
}

static void run(struct nvme_ctrl *c, struct side *s, size_t n, uint64_t *seed, bool keep)
{
        struct nvme_wait w = {.timeout_ms = 5000, .spin_ns = UINT32_MAX, .nap_ns = 0};
        uint64_t m0 = mlen;
        for (size_t i = 0; i < n; i++) {
                uint64_t dt = read_one(c, s, seed, &w);
                if (keep)
                        s->lat[s->n++] = dt;
        }
        if (keep) {
                /* Only the model's thread appends; the poll that completed the last read may
                 * still be finishing: its duration then counts for the next run. */
                for (uint64_t i = m0, m1 = mlen; i < m1 && i < MLOG && s->nmodel < (size_t)MLOG;
                     i++)
                        s->model[s->nmodel++] = mlog[i];
        }
}

/* The modeled fabric latency of one command's transactions (traces, before any I/O). */
static void trace(struct ntbf_backend *b, const struct ntbf_topo *t, uint32_t cpu_node,
                  uint64_t db_addr, uint32_t dev_node, uint32_t dev, struct side *s)
{
        uint8_t zero[4096] = {0};
        uint16_t rid = (uint16_t)ntbf_device_rid(&t->devices[dev], 0);
        /* The SQ tail doorbell of a queue that does not exist: the same path, no effect. */
        ntbf_sim_write(b, cpu_node, NTBF_NONE, NTBF_SIM_RID_CPU, db_addr, zero, 4, &s->tr_db);
        ntbf_sim_read(b, dev_node, dev, rid, s->q.sq_dev, zero, 64, &s->tr_sqe);
        memset(zero, 0, sizeof(zero));
        ntbf_sim_write(b, dev_node, dev, rid, s->buf_dev, zero, 4096, &s->tr_data);
        ntbf_sim_write(b, dev_node, dev, rid, s->q.cq_dev, zero, 16, &s->tr_cqe);
        if (s->tr_db.status || s->tr_sqe.status || s->tr_data.status || s->tr_cqe.status) {
                fprintf(stderr, "bench_nvme: a %s trace was dropped\n", s->name);
                exit(1);
        }
}

static uint32_t modeled_ns(const struct side *s)
{
        return s->tr_db.latency_ns + s->tr_sqe.latency_ns + s->tr_data.latency_ns +
               s->tr_cqe.latency_ns;
}

static void path_str(const struct ntbf_topo *t, const struct ntbf_path *p, char *out, size_t len)
{
        size_t o = 0;
        out[0] = 0;
        for (uint32_t i = 0; i < p->nhops && o < len; i++) {
                char hb[128];
                o += (size_t)snprintf(out + o, len - o, "%s%s", i ? " > " : "",
                                      ntbf_hop_name(t, &p->hops[i], hb, sizeof(hb)));
        }
}

static json_object *report(const struct ntbf_topo *t, struct side *s)
{
        uint64_t med = bench_percentile(s->lat, s->n, 50), p99 = bench_percentile(s->lat, s->n, 99);
        uint64_t mx = s->lat[s->n - 1];
        s->median = med;
        double model = s->nmodel ? (double)bench_percentile(s->model, s->nmodel, 50) : 0;
        char path[512];
        path_str(t, &s->tr_sqe.path, path, sizeof(path));
        printf("%-6s queues: median %6.2f us  p99 %6.2f us  max %8.2f us  (%zu reads)\n", s->name,
               med / 1e3, p99 / 1e3, mx / 1e3, s->n);
        printf("       in the model's poll: %.2f us per command (median); modeled fabric latency "
               "%u ns "
               "(doorbell %u + SQE fetch %u + data %u + completion %u)\n",
               model / 1e3, modeled_ns(s), s->tr_db.latency_ns, s->tr_sqe.latency_ns,
               s->tr_data.latency_ns, s->tr_cqe.latency_ns);
        printf("       SQE fetch path: %s\n", path);
        json_object *o = json_object_new_object();
        json_object_object_add(o, "reads", json_object_new_int64((int64_t)s->n));
        json_object_object_add(o, "median_us", json_object_new_double(med / 1e3));
        json_object_object_add(o, "p99_us", json_object_new_double(p99 / 1e3));
        json_object_object_add(o, "max_us", json_object_new_double(mx / 1e3));
        json_object_object_add(o, "model_poll_median_us", json_object_new_double(model / 1e3));
        json_object_object_add(o, "modeled_fabric_ns", json_object_new_int((int)modeled_ns(s)));
        json_object *m = json_object_new_object();
        json_object_object_add(m, "doorbell", json_object_new_int((int)s->tr_db.latency_ns));
        json_object_object_add(m, "sqe_fetch", json_object_new_int((int)s->tr_sqe.latency_ns));
        json_object_object_add(m, "data", json_object_new_int((int)s->tr_data.latency_ns));
        json_object_object_add(m, "completion", json_object_new_int((int)s->tr_cqe.latency_ns));
        json_object_object_add(o, "modeled_fabric_parts_ns", m);
        json_object_object_add(o, "sqe_fetch_path", json_object_new_string(path));
        return o;
}

int main(int argc, char **argv)
{
        const char *json_path = NULL;
        long reads = 20000, warmup = 2000, warmup_ms = 500, rounds = 4, idle = 50;
        static const struct option longopts[] = {{"json", required_argument, NULL, 'j'},
                                                 {"reads", required_argument, NULL, 'n'},
                                                 {"warmup", required_argument, NULL, 'w'},
                                                 {"rounds", required_argument, NULL, 'r'},
                                                 {"idle", required_argument, NULL, 'i'},
                                                 {"warmup-ms", required_argument, NULL, 'W'},
                                                 {NULL, 0, NULL, 0}};
        for (int c; (c = getopt_long(argc, argv, "j:n:w:W:r:i:", longopts, NULL)) != -1;) {
                switch (c) {
                case 'j':
                        json_path = optarg;
                        break;
                case 'n':
                        reads = atol(optarg);
                        break;
                case 'w':
                        warmup = atol(optarg);
                        break;
                case 'W':
                        warmup_ms = atol(optarg);
                        break;
                case 'r':
                        rounds = atol(optarg);
                        break;
                case 'i':
                        idle = atol(optarg);
                        break;
                default:
                        fprintf(stderr, "usage: bench_nvme [--json FILE] [--reads N] [--warmup N] "
                                        "[--warmup-ms MS] [--rounds N] [--idle N]\n");
                        return 2;
                }
        }
        if (reads < 100 || rounds < 1 || rounds > reads || warmup < 0 || warmup_ms < 0 || idle < 0)
                return 2;

        /* The fabric. */
        struct ntbf_topo *t;
        struct ntbf_diags dg;
        ntbf_diags_init(&dg);
        if (ntbf_config_load_mem("bench-nvme.yaml", cluster, strlen(cluster), &t, &dg)) {
                ntbf_diags_print(&dg, stderr);
                return 1;
        }
        ntbf_diags_free(&dg);
        char why[512];
        if (!mkdtemp(dir) || ntbf_sim_fabric_create(t, dir, why, sizeof(why))) {
                fprintf(stderr, "bench_nvme: cannot create a fabric in %s: %s\n", dir, why);
                rmdir(dir);
                return 1;
        }
        const struct ntbf_backend_ops *ops = ntbf_backend_find("sim");
        struct ntbf_backend *be;
        struct ntbf_adapter_h *hl = NULL, *hb = NULL;
        struct ntbf_backend_env env = {t, dir, NTBF_NONE};
        uint32_t ln = ntbf_topo_find_node(t, "lender"), bn = ntbf_topo_find_node(t, "borrower");
        uint32_t la = t->nodes[ln].adapters[0], ba = t->nodes[bn].adapters[0];
        uint32_t dev = ntbf_topo_find_device(t, ln, "nvme0");
        const struct ntbf_device *d = &t->devices[dev];
        uint64_t bar0 = ntbf_device_bar_addr(d, 0, 0);
        if (ops->open(&env, &be, NULL, 0) || ops->probe(be, la, &hl) || ops->probe(be, ba, &hb))
                die("attach", -EIO);

        /* Lent by hand: requester ID and DMA window (lender), BAR0 mapping and IOMMU-backed
         * memory (borrower). */
        uint64_t win_dev;
        struct lh_pool pool;
        struct lh_map map;
        int r = lh_rid_add(ops, hl, t, dev);
        if (!r)
                r = lh_dma_window(ops, hl, t, la, WSLOT, 8, ba, IOVA, &win_dev);
        if (!r)
                r = lh_pool_new(ops, hb, 8 * MiB, MiB, IOVA, win_dev, &pool);
        if (!r)
                r = lh_map_remote(ops, hb, t, ba, 0, la, bar0, ntbf_device_bar_size(d, 0, 0), &map);
        if (r)
                die("lending", r);
        struct ntbf_mem lmem;
        void *lregs;
        if ((r = ops->mem_alloc(hl, 8 * MiB, 0, &lmem)) ||
            (r = ntbf_sim_phys_ptr(be, ln, bar0, NTBF_NVME_BAR0_SIZE, &lregs)))
                die("lender memory", r);
        lh_cfg_enable(ntbf_sim_cfg(be, dev, 0));

        mlog = calloc(MLOG, sizeof(*mlog));
        if (!mlog)
                die("memory", -ENOMEM);
        struct ntbf_sim_devhost_opts o = {
            .model_for = model_for, .no_dma = true, .no_reaper = true};
        struct ntbf_sim_devhost *dh;
        if (ntbf_sim_devhost_start(be, &o, &dh, why, sizeof(why))) {
                fprintf(stderr, "bench_nvme: %s\n", why);
                cleanup();
                return 1;
        }

        /* The controller, managed from the borrower (admin queues in its RAM). */
        struct side rem = {.name = "remote"}, loc = {.name = "local"};
        rem.dma = (struct nvme_dma){pool.va, pool.dev, pool.size, 0};
        loc.dma = (struct nvme_dma){lmem.addr, lmem.bus_addr, lmem.size, 0};
        rem.regs = map.addr;
        loc.regs = lregs;
        struct nvme_ctrl c = {0};
        nvme_wait_default(&c.wait);
        if ((r = nvme_ctrl_enable(&c, rem.regs, &rem.dma, 16)) ||
            (r = nvme_ctrl_identify(&c, NULL, NULL)))
                die("enable", r);
        struct side *sides[2] = {&rem, &loc};
        for (int i = 0; i < 2; i++) {
                struct side *s = sides[i];
                void *va = NULL;
                if ((r = nvme_queue_alloc(&s->dma, QDEPTH, &s->q)) ||
                    (r = nvme_dma_alloc(&s->dma, 256 * 1024, 4096, &va, &s->buf_dev)))
                        die("queue memory", r);
                s->buf = va;
                /* Remote: the borrower's window slot 0 maps BAR0's slot-sized block. */
                uint64_t e = t->adapters[ba].lut_entry_size;
                uint64_t db = i ? bar0 : t->adapters[ba].window_base + bar0 % e;
                trace(be, t, i ? ln : bn, db + NTBF_NVME_SQ_TDBL(3), ln, dev, s);
                if ((r = nvme_create_qpair(&c, (uint16_t)(1 + i), QDEPTH, s->q.sq_dev,
                                           s->q.cq_dev)))
                        die("create queues", r);
                nvme_queue_bind(&s->q, s->regs, (uint16_t)(1 + i));
                s->lat = calloc((size_t)reads, sizeof(*s->lat));
                s->model = calloc(MLOG, sizeof(*s->model));
                if (!s->lat || !s->model)
                        die("memory", -ENOMEM);
        }

        /* Every block stamped with its number + 1, written in 128 KiB commands. */
        for (uint64_t pos = 0; pos < CAPACITY; pos += 131072) {
                for (uint64_t k = 0; k < 32; k++) {
                        uint64_t stamp = pos / 4096 + k + 1;
                        memset(rem.buf + k * 4096, (int)(stamp & 0xff), 4096);
                        memcpy(rem.buf + k * 4096, &stamp, 8);
                }
                if ((r = nvme_rw(&c, &rem.q, NTBF_NVME_CMD_WRITE, pos, 131072, rem.buf_dev)))
                        die("prefill", r);
        }

        uint64_t seed = UINT64_C(0x2545f4914f6cdd1d);
        struct ntbf_sim_devhost_stats st0, st1;
        /* Warm up for at least warmup reads per queue and warmup_ms: until then the scheduler
         * may still run the submitter and the model's thread on one CPU, and the tail of the
         * first measured round shows it (p99 of 8-10 us instead of 2-3 us on a 2-CPU VM). */
        uint64_t w0 = bench_now_ns();
        for (long done = 0; done < warmup || bench_now_ns() - w0 < (uint64_t)warmup_ms * 1000000;
             done += 1000) {
                run(&c, &rem, 1000, &seed, false);
                run(&c, &loc, 1000, &seed, false);
        }
        uint64_t warmup_ns = bench_now_ns() - w0;
        ntbf_sim_devhost_stats(dh, &st0);
        for (long k = 0; k < rounds; k++) {
                size_t n = (size_t)(reads / rounds + (k < reads % rounds));
                run(&c, &rem, n, &seed, true);
                run(&c, &loc, n, &seed, true);
        }
        ntbf_sim_devhost_stats(dh, &st1);

        /* Commands far apart: the model is napping when each arrives. */
        uint64_t *iv = calloc((size_t)(idle ? idle : 1), sizeof(*iv));
        struct nvme_wait yw = {.timeout_ms = 5000, .spin_ns = 0, .nap_ns = 0};
        for (long i = 0; i < idle; i++) {
                struct timespec ts = {0, 5000000};
                nanosleep(&ts, NULL);
                iv[i] = read_one(&c, &rem, &seed, &yw);
        }

        printf("bench_nvme: 4 KiB random reads, queue depth 1, %ld reads per queue after a "
               "warm-up of %.0f ms, %ld alternating rounds, %ld CPUs\n",
               reads, (double)warmup_ns / 1e6, rounds, sysconf(_SC_NPROCESSORS_ONLN));
        json_object *root = json_object_new_object();
        json_object_object_add(root, "bench", json_object_new_string("nvme"));
        json_object_object_add(root, "cpus",
                               json_object_new_int((int)sysconf(_SC_NPROCESSORS_ONLN)));
        json_object_object_add(root, "remote", report(t, &rem));
        json_object_object_add(root, "local", report(t, &loc));
        double ratio = (double)rem.median / (double)loc.median;
        double diff = ((double)rem.median - (double)loc.median) / 1e3;
        printf("remote/local median: %.3f (difference %+.2f us)\n", ratio, diff);
        json_object_object_add(root, "ratio_median", json_object_new_double(ratio));
        json_object_object_add(root, "median_difference_us", json_object_new_double(diff));
        uint64_t cmds = (uint64_t)reads * 2;
        double polls = (double)(st1.polls - st0.polls) / (double)cmds;
        printf("device host: %.1f model polls per command, %llu naps during the measured reads\n",
               polls, (unsigned long long)(st1.naps - st0.naps));
        json_object_object_add(root, "polls_per_cmd", json_object_new_double(polls));
        json_object_object_add(root, "naps_during_run",
                               json_object_new_int64((int64_t)(st1.naps - st0.naps)));
        if (idle) {
                uint64_t med = bench_percentile(iv, (size_t)idle, 50);
                uint64_t mx = iv[idle - 1];
                printf("after idle (5 ms between reads, remote): median %.1f us, max %.1f us "
                       "(%ld reads)\n",
                       med / 1e3, mx / 1e3, idle);
                json_object *ai = json_object_new_object();
                json_object_object_add(ai, "reads", json_object_new_int64(idle));
                json_object_object_add(ai, "median_us", json_object_new_double(med / 1e3));
                json_object_object_add(ai, "max_us", json_object_new_double(mx / 1e3));
                json_object_object_add(root, "after_idle", ai);
        }
        if (json_path && json_object_to_file_ext(json_path, root, JSON_C_TO_STRING_PRETTY))
                fprintf(stderr, "bench_nvme: cannot write %s\n", json_path);
        json_object_put(root);

        ntbf_sim_devhost_stop(dh);
        free(iv);
        free(rem.lat);
        free(rem.model);
        free(loc.model);
        free(mlog);
        free(loc.lat);
        lh_unmap_remote(ops, hb, &map);
        lh_pool_free(ops, hb, &pool);
        ops->mem_free(hl, &lmem);
        ops->release(hl);
        ops->release(hb);
        ops->close(be);
        cleanup();
        ntbf_topo_free(t);
        return 0;
}
