/* tests/vm/vmtest.c: what the VM tier runs in its guests (and, for comparison, on the host). */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ntbfab/backend.h"
#include "ntbfab/config.h"
#include "ntbfab/device.h"
#include "ntbfab/error.h"
#include "nvme_drv.h"

/*
 * docs/vm.md says what each mode proves. Results go to stdout as lines the harness
 * (tests/vm/vmtier.py) reads from the serial log:
 *
 *   RESULT <name> ok|FAIL <detail>
 *   FIGURE <name> <value> <unit>
 *
 * The NVMe driver is tests/integration/nvme_drv.c, which knows nothing of fabrics: it gets
 * a BAR0 pointer and a DMA range (pointer plus device address). Everything fabric- or
 * VFIO-specific is the device API's (struct nv below), so that the distributed NVMe driver
 * of issue 6 can take nvme_drv's place without touching the rest.
 *
 * Modes:
 *   nvme BDF           identify, MSI-X, 1,000 random 4 KiB blocks, a 1 MiB PRP-list
 *                      transfer, QD1 read latency, the IOMMU stopping DMA to an unmapped IOVA
 *   share BDF          a manager owning the admin queue and three client processes with
 *                      queue pairs of their own; one client is killed
 *   window BDF         guest A: shared-memory copies into guest B through the ivshmem
 *                      backend, and the NVMe writing into guest B's memory by DMA (p2p)
 *   window-peer        guest B: the other end of `window`
 *   identify BDF NAME  bring-up and identify only, reported as result NAME
 *   sim BDF            on the host: identify and QD1 latency on the simulated NVMe
 */

static int failures;

static void result(const char *name, bool ok, const char *fmt, ...) NTBF_PRINTF(3, 4);
static void result(const char *name, bool ok, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        printf("RESULT %s %s %s\n", name, ok ? "ok" : "FAIL", msg);
        fflush(stdout);
        if (!ok)
                failures++;
}

static void figure(const char *name, double v, const char *unit)
{
        printf("FIGURE %s %.3f %s\n", name, v, unit);
        fflush(stdout);
}

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

/* Median and 99th percentile of n samples (sorted in place), in microseconds. */
static void pct(uint64_t *v, size_t n, double *med, double *p99)
{
        qsort(v, n, sizeof(*v), cmp_u64);
        *med = (double)v[n / 2] / 1000.0;
        *p99 = (double)v[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1] / 1000.0;
}

/* A deterministic pattern: block b of a run seeded by seed. */
static void fill(void *buf, size_t len, uint64_t seed)
{
        uint64_t x = seed * 0x9e3779b97f4a7c15u + 1;
        uint64_t *p = buf;
        for (size_t i = 0; i < len / 8; i++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                p[i] = x;
        }
}

static bool check(const void *buf, size_t len, uint64_t seed)
{
        uint64_t x = seed * 0x9e3779b97f4a7c15u + 1;
        const uint64_t *p = buf;
        for (size_t i = 0; i < len / 8; i++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if (p[i] != x)
                        return false;
        }
        return true;
}

/* ---- the NVMe through the device API ------------------------------------------------------- */

/* What nvme_drv is given: BAR0 and DMA memory, from the device API (local, VFIO or sim). */
struct nv {
        struct ntbf_ctx *ctx;
        struct ntbf_dev *dev;
        struct ntbf_dev_info info;
        void *bar0;
        void *mem;
        uint64_t io;
        struct nvme_dma dma;
        struct nvme_ctrl c;
        struct nvme_queue q;
        uint64_t bs; /* 4 KiB in LBAs */
};

static int nv_fail(const char *what, struct nv *n, int r)
{
        result(what, false, "%s (%s)", ntbf_ctx_error(n ? n->ctx : NULL), ntbf_strerror(r));
        return r;
}

static int nv_open(struct nv *n, const char *bdf, size_t mem, const char *what)
{
        memset(n, 0, sizeof(*n));
        int r = ntbf_ctx_open(NULL, NULL, &n->ctx);
        if (r)
                return nv_fail(what, NULL, r);
        uint32_t cmd;
        size_t len;
        if ((r = ntbf_dev_open_bdf(n->ctx, bdf, &n->dev)) ||
            (r = ntbf_dev_info(n->dev, &n->info)) ||
            (r = ntbf_dev_cfg_read(n->dev, 0x04, 2, &cmd)) ||
            (r = ntbf_dev_cfg_write(n->dev, 0x04, 2, cmd | 0x6)) || /* memory, bus master */
            (r = ntbf_dev_map_bar(n->dev, 0, &n->bar0, &len)) ||
            (r = ntbf_dma_alloc(n->ctx, mem, 0, &n->mem)) ||
            (r = ntbf_dev_dma_map(n->dev, n->mem, mem, &n->io)))
                return nv_fail(what, n, r);
        n->dma = (struct nvme_dma){n->mem, n->io, mem, 0};
        nvme_wait_default(&n->c.wait);
        return 0;
}

static void nv_close(struct nv *n)
{
        if (n->ctx)
                ntbf_ctx_close(n->ctx); /* closes the device: unmaps, frees vectors */
        memset(n, 0, sizeof(*n));
}

/* Enable the controller and identify it; fills the model number. */
static int nv_start(struct nv *n, char mn[41], const char *what)
{
        static uint8_t ctrl[4096];
        int r = nvme_ctrl_enable(&n->c, n->bar0, &n->dma, 32);
        if (!r)
                r = nvme_ctrl_identify(&n->c, ctrl, NULL);
        if (r) {
                result(what, false, "controller bring-up or identify: %d", r);
                return r ? r : -EIO;
        }
        memcpy(mn, ctrl + NTBF_NVME_IDC_MN, 40);
        mn[40] = 0;
        for (int i = 39; i >= 0 && mn[i] == ' '; i--)
                mn[i] = 0;
        n->bs = 4096 >> n->c.lba_shift;
        return 0;
}

static int nv_ioq(struct nv *n, uint16_t qid, uint32_t entries)
{
        int r = nvme_queue_alloc(&n->dma, entries, &n->q);
        if (!r)
                r = nvme_create_qpair(&n->c, qid, entries, n->q.sq_dev, n->q.cq_dev);
        if (!r)
                nvme_queue_bind(&n->q, n->bar0, qid);
        return r;
}

/* One Read or Write of len bytes at 4 KiB block blk, data at device address dev. */
static int nv_rw(struct nv *n, uint8_t opc, uint64_t blk, uint64_t len, uint64_t dev)
{
        return nvme_rw(&n->c, &n->q, opc, blk * 4096, len, dev);
}

/* ---- mode nvme ------------------------------------------------------------------------------ */

#define BLOCKS   1000
#define LAT_N    2000
#define IDENT_N  200
#define PRP_LEN  (UINT64_C(1) << 20)
#define PRP_BLK  8192 /* where the 1 MiB transfer goes (block 8192: 32 MiB in) */
#define NEG_SEED 777

static uint64_t verified;

static void mode_identify(struct nv *n)
{
        /* Latency of an admin round trip: the smallest complete command. */
        uint64_t t[IDENT_N];
        for (int i = 0; i < IDENT_N; i++) {
                uint64_t t0 = now_ns();
                int r = nvme_identify(&n->c, NTBF_NVME_CNS_CTRL, 0);
                t[i] = now_ns() - t0;
                if (r) {
                        result("identify-latency", false, "identify %d: %d", i, r);
                        return;
                }
        }
        double med, p99;
        pct(t, IDENT_N, &med, &p99);
        figure("identify_median_us", med, "us");
        figure("identify_p99_us", p99, "us");
}

static void mode_msix(struct nv *n)
{
        int efd, r = ntbf_dev_irq_enable(n->dev, 0, &efd);
        if (r) {
                nv_fail("msix", n, r);
                return;
        }
        /* The admin completion queue signals vector 0. */
        r = nvme_identify(&n->c, NTBF_NVME_CNS_CTRL, 0);
        struct pollfd p = {efd, POLLIN, 0};
        int ready = poll(&p, 1, 2000);
        uint64_t count = 0;
        if (ready == 1 && read(efd, &count, sizeof(count)) != sizeof(count))
                count = 0;
        result("msix-eventfd", !r && count > 0,
               "an admin command's completion signalled vector 0's eventfd %" PRIu64 " time(s)",
               count);
        ntbf_dev_irq_disable(n->dev, 0);
}

static void mode_blocks(struct nv *n)
{
        /* 1,000 distinct random 4 KiB blocks below the 1 MiB transfer's place. */
        static uint32_t blk[BLOCKS];
        uint64_t x = 88172645463325252u;
        for (int i = 0; i < BLOCKS; i++) {
                for (;;) {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        uint32_t b = (uint32_t)(x % PRP_BLK);
                        bool seen = false;
                        for (int k = 0; k < i && !seen; k++)
                                seen = blk[k] == b;
                        if (!seen) {
                                blk[i] = b;
                                break;
                        }
                }
        }
        /* Each I/O maps its buffer and unmaps it after, as a driver using a DMA API would. */
        void *buf;
        int r = ntbf_dma_alloc(n->ctx, 4096, 0, &buf);
        if (r) {
                nv_fail("blocks", n, r);
                return;
        }
        int bad = 0, st = 0;
        for (int pass = 0; pass < 2 && !st; pass++) {
                for (int i = 0; i < BLOCKS && !st; i++) {
                        uint64_t io;
                        if (pass == 0)
                                fill(buf, 4096, blk[i]);
                        else
                                memset(buf, 0, 4096);
                        r = ntbf_dev_dma_map(n->dev, buf, 4096, &io);
                        if (r) {
                                nv_fail("blocks", n, r);
                                return;
                        }
                        st = nv_rw(n, pass ? NTBF_NVME_CMD_READ : NTBF_NVME_CMD_WRITE, blk[i], 4096,
                                   io);
                        r = ntbf_dev_dma_unmap(n->dev, io, 4096);
                        if (r) {
                                nv_fail("blocks", n, r);
                                return;
                        }
                        if (pass && !st) {
                                if (check(buf, 4096, blk[i]))
                                        verified += 4096;
                                else
                                        bad++;
                        }
                }
        }
        ntbf_dma_free(n->ctx, buf);
        result("blocks-4k", !st && !bad,
               "%d random 4 KiB blocks written then read back: %d differ, status %d, %d "
               "map+unmap pairs through VFIO",
               BLOCKS, bad, st, 2 * BLOCKS);
}

static void mode_prp(struct nv *n)
{
        if (n->c.max_xfer < PRP_LEN) {
                result("prp-1m", false, "the controller takes %" PRIu64 " bytes per command",
                       n->c.max_xfer);
                return;
        }
        void *w, *rd;
        uint64_t wio, rio;
        int r;
        if ((r = ntbf_dma_alloc(n->ctx, PRP_LEN, 0, &w)) ||
            (r = ntbf_dma_alloc(n->ctx, PRP_LEN, 0, &rd)) ||
            (r = ntbf_dev_dma_map(n->dev, w, PRP_LEN, &wio)) ||
            (r = ntbf_dev_dma_map(n->dev, rd, PRP_LEN, &rio))) {
                nv_fail("prp-1m", n, r);
                return;
        }
        fill(w, PRP_LEN, 0x1111);
        /* One command each way: PRP1 and a list of 255 entries (nvme_rw_prep). */
        int s1 = nv_rw(n, NTBF_NVME_CMD_WRITE, PRP_BLK, PRP_LEN, wio);
        int s2 = nv_rw(n, NTBF_NVME_CMD_READ, PRP_BLK, PRP_LEN, rio);
        bool ok = !s1 && !s2 && check(rd, PRP_LEN, 0x1111);
        if (ok)
                verified += PRP_LEN;
        result("prp-1m", ok, "1 MiB in one command each way (PRP list): status %d/%d, data %s", s1,
               s2, ok ? "equal" : "differs");
        ntbf_dev_dma_unmap(n->dev, wio, PRP_LEN);
        ntbf_dev_dma_unmap(n->dev, rio, PRP_LEN);
        ntbf_dma_free(n->ctx, w);
        ntbf_dma_free(n->ctx, rd);
}

/* QD1 4 KiB reads: one command in flight, each timed from submission to completion. */
static void latency(struct nv *n, const char *prefix)
{
        void *buf;
        uint64_t io;
        int r = ntbf_dma_alloc(n->ctx, 4096, 0, &buf);
        if (!r)
                r = ntbf_dev_dma_map(n->dev, buf, 4096, &io);
        if (r) {
                nv_fail("latency", n, r);
                return;
        }
        static uint64_t t[LAT_N];
        uint64_t x = 2463534242u;
        int st = 0;
        for (int i = 0; i < LAT_N && !st; i++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                uint64_t t0 = now_ns();
                st = nv_rw(n, NTBF_NVME_CMD_READ, x % PRP_BLK, 4096, io);
                t[i] = now_ns() - t0;
        }
        ntbf_dev_dma_unmap(n->dev, io, 4096);
        ntbf_dma_free(n->ctx, buf);
        if (st) {
                result("latency", false, "a read failed: %d", st);
                return;
        }
        double med, p99;
        pct(t, LAT_N, &med, &p99);
        char name[64];
        snprintf(name, sizeof(name), "%s_read4k_qd1_median_us", prefix);
        figure(name, med, "us");
        snprintf(name, sizeof(name), "%s_read4k_qd1_p99_us", prefix);
        figure(name, p99, "us");
}

/* The IOMMU stops the device from writing where nothing is mapped for it (article 4.3). */
static void mode_iommu(struct nv *n)
{
        void *buf;
        uint64_t io, io2;
        int r = ntbf_dma_alloc(n->ctx, 4096, 0, &buf);
        if (r) {
                nv_fail("iommu-negative", n, r);
                return;
        }
        /* A block with known contents the buffer does not have. */
        void *src;
        uint64_t sio;
        if ((r = ntbf_dma_alloc(n->ctx, 4096, 0, &src)) ||
            (r = ntbf_dev_dma_map(n->dev, src, 4096, &sio))) {
                nv_fail("iommu-negative", n, r);
                return;
        }
        fill(src, 4096, NEG_SEED);
        int s0 = nv_rw(n, NTBF_NVME_CMD_WRITE, PRP_BLK - 1, 4096, sio);
        memset(buf, 0x5a, 4096);
        if ((r = ntbf_dev_dma_map(n->dev, buf, 4096, &io)) ||
            (r = ntbf_dev_dma_unmap(n->dev, io, 4096))) {
                nv_fail("iommu-negative", n, r);
                return;
        }
        /* Read into the IOVA that was just unmapped: the controller's write faults in the
         * IOMMU. QEMU 7.2's model completes the command anyway, so the data is the proof. */
        int s1 = nv_rw(n, NTBF_NVME_CMD_READ, PRP_BLK - 1, 4096, io);
        bool untouched = true;
        for (int i = 0; i < 4096 && untouched; i++)
                untouched = ((uint8_t *)buf)[i] == 0x5a;
        /* Control: the same read through a mapping does land. */
        int s2 = -1;
        bool landed = false;
        if (!ntbf_dev_dma_map(n->dev, buf, 4096, &io2)) {
                s2 = nv_rw(n, NTBF_NVME_CMD_READ, PRP_BLK - 1, 4096, io2);
                landed = check(buf, 4096, NEG_SEED);
                ntbf_dev_dma_unmap(n->dev, io2, 4096);
        }
        result("iommu-blocks-unmapped", !s0 && untouched && !s2 && landed,
               "a read into unmapped IOVA 0x%" PRIx64 " completed with status 0x%x and the "
               "buffer is %s; the same read through a mapping %s",
               io, (unsigned)s1, untouched ? "untouched" : "CHANGED",
               landed ? "filled it" : "did not fill it");
        ntbf_dev_dma_unmap(n->dev, sio, 4096);
        ntbf_dma_free(n->ctx, src);
        ntbf_dma_free(n->ctx, buf);
}

static int run_nvme(const char *bdf)
{
        struct nv n;
        char mn[41];
        if (nv_open(&n, bdf, 1 << 20, "open") || nv_start(&n, mn, "identify"))
                return 1;
        result("identify", !strcmp(mn, "QEMU NVMe Ctrl"),
               "model '%s', vendor %04x, %u-byte blocks, %" PRIu64 " bytes per command, BAR0 "
               "mapped through VFIO, DMA at IOVA 0x%" PRIx64,
               mn, n.info.vendor_id, 1u << n.c.lba_shift, n.c.max_xfer, n.io);
        mode_identify(&n);
        mode_msix(&n);
        if (nv_ioq(&n, 1, 64)) {
                result("io-queue", false, "cannot create I/O queue pair 1");
                nv_close(&n);
                return 1;
        }
        mode_blocks(&n);
        mode_prp(&n);
        latency(&n, "vfio");
        mode_iommu(&n);
        figure("bytes_verified", (double)verified, "bytes");
        nvme_delete_qpair(&n.c, 1);
        nvme_ctrl_disable(&n.c);
        nv_close(&n);
        return failures ? 1 : 0;
}

/* Bring-up and identify only: is the device usable through the daemon right now? */
static int run_identify(const char *bdf, const char *name)
{
        struct nv n;
        char mn[41];
        if (nv_open(&n, bdf, 1 << 20, name) || nv_start(&n, mn, name))
                return 1;
        result(name, !strcmp(mn, "QEMU NVMe Ctrl"), "opened through the daemon: model '%s'", mn);
        nvme_ctrl_disable(&n.c);
        nv_close(&n);
        return failures ? 1 : 0;
}

/* The same driver on the simulated NVMe, on the host (docs/vm.md, "Figures"). */
static int run_sim(const char *bdf)
{
        struct nv n;
        char mn[41];
        if (nv_open(&n, bdf, 1 << 20, "sim-open") || nv_start(&n, mn, "sim-identify"))
                return 1;
        result("sim-identify", true, "model '%s'", mn);
        uint64_t t[IDENT_N];
        for (int i = 0; i < IDENT_N; i++) {
                uint64_t t0 = now_ns();
                nvme_identify(&n.c, NTBF_NVME_CNS_CTRL, 0);
                t[i] = now_ns() - t0;
        }
        double med, p99;
        pct(t, IDENT_N, &med, &p99);
        figure("sim_identify_median_us", med, "us");
        figure("sim_identify_p99_us", p99, "us");
        if (nv_ioq(&n, 1, 64)) {
                result("sim-io-queue", false, "cannot create I/O queue pair 1");
                return 1;
        }
        latency(&n, "sim");
        nvme_delete_qpair(&n.c, 1);
        nvme_ctrl_disable(&n.c);
        nv_close(&n);
        return failures ? 1 : 0;
}

/* ---- mode share: queue-level sharing between processes (article 6.2) ---------------------- */

#define SHARE_SOCK "/run/vmtest-manager.sock"
#define CLIENTS    3
#define CLIENT_BLK 64 /* blocks each client writes and verifies, at its own place */

/* A line over a stream socket (requests and answers are one line each). */
static int send_line(int fd, const char *fmt, ...) NTBF_PRINTF(2, 3);
static int send_line(int fd, const char *fmt, ...)
{
        char buf[256];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
        va_end(ap);
        buf[n++] = '\n';
        return write(fd, buf, (size_t)n) == n ? 0 : -EIO;
}

static int recv_line(int fd, char *buf, size_t len, int timeout_ms)
{
        size_t n = 0;
        while (n + 1 < len) {
                struct pollfd p = {fd, POLLIN, 0};
                if (poll(&p, 1, timeout_ms) != 1)
                        return -ETIMEDOUT;
                ssize_t r = read(fd, buf + n, 1);
                if (r <= 0)
                        return -EPIPE;
                if (buf[n] == '\n')
                        break;
                n++;
        }
        buf[n] = 0;
        return 0;
}

/* A client: its own handle (fds from the daemon), memory and queue pair; admin by the manager. */
static int client_fail(int k, const char *what, int r)
{
        char name[32];
        snprintf(name, sizeof(name), "share-client-%d", k + 1);
        result(name, false, "%s: %d (%s)", what, r, r < 0 ? ntbf_strerror(r) : "NVMe status");
        return 1;
}

static int run_client(int k)
{
        struct nv n;
        char name[32];
        snprintf(name, sizeof(name), "share-client-%d", k + 1);
        const char *bdf = getenv("VMTEST_BDF");
        if (!bdf || nv_open(&n, bdf, 1 << 20, name))
                return 1;
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", SHARE_SOCK);
        if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)))
                return client_fail(k, "connect to the manager", -errno);
        /* The controller is the manager's: only the queue pair is set up here. */
        n.c.regs = n.bar0;
        n.c.max_xfer = 4096;
        int r = nvme_queue_alloc(&n.dma, 32, &n.q);
        if (r)
                return client_fail(k, "queue memory", r);
        char line[128];
        send_line(s, "qp %d %" PRIu64 " %" PRIu64 " 32", k, n.q.sq_dev, n.q.cq_dev);
        unsigned qid = 0, lba_shift = 0;
        if ((r = recv_line(s, line, sizeof(line), 10000)) ||
            sscanf(line, "qid %u %u", &qid, &lba_shift) != 2 || !qid)
                return client_fail(k, "the manager's answer", r ? r : -EPROTO);
        n.c.lba_shift = lba_shift;
        nvme_queue_bind(&n.q, n.bar0, (uint16_t)qid);
        void *buf;
        uint64_t io;
        if ((r = nvme_dma_alloc(&n.dma, 4096, 4096, &buf, &io)))
                return client_fail(k, "data buffer", r);
        /* Its own blocks, written then verified, round after round until told to stop. */
        uint64_t base = 12000 + (uint64_t)k * CLIENT_BLK, rounds = 0, bad = 0;
        bool told_ready = false;
        int st = 0;
        for (;;) {
                for (uint64_t b = 0; b < CLIENT_BLK && !bad; b++) {
                        fill(buf, 4096, base + b + rounds);
                        if ((st = nv_rw(&n, NTBF_NVME_CMD_WRITE, base + b, 4096, io)))
                                bad++;
                        memset(buf, 0, 4096);
                        if (!bad && ((st = nv_rw(&n, NTBF_NVME_CMD_READ, base + b, 4096, io)) ||
                                     !check(buf, 4096, base + b + rounds)))
                                bad++;
                }
                rounds++;
                if (bad)
                        break;
                if (!told_ready) {
                        /* n.io is the first IOVA of this handle's share. */
                        send_line(s, "ready %" PRIx64, n.io);
                        told_ready = true;
                }
                struct pollfd p = {s, POLLIN, 0};
                if (poll(&p, 1, 0) == 1) {
                        if (recv_line(s, line, sizeof(line), 1000) || !strcmp(line, "stop"))
                                break;
                }
        }
        if (bad)
                client_fail(k, "I/O on its queue pair", st ? st : -EIO);
        send_line(s, "done %s %" PRIu64 " %" PRIu64, bad ? "bad" : "good", rounds,
                  (rounds - (bad ? 1 : 0)) * CLIENT_BLK * 4096);
        recv_line(s, line, sizeof(line), 10000); /* the manager deleted the queue pair */
        close(s);
        nv_close(&n);
        return bad ? 1 : 0;
}

struct peer {
        int fd;
        pid_t pid;
        unsigned qid;
        uint64_t iova;
        bool ready, done, good;
        uint64_t bytes;
};

static pid_t spawn_client(int k, const char *bdf)
{
        pid_t p = fork();
        if (p == 0) {
                char ks[8];
                snprintf(ks, sizeof(ks), "%d", k);
                setenv("VMTEST_BDF", bdf, 1);
                execl("/proc/self/exe", "ntbfab-vmtest", "share-client", ks, (char *)NULL);
                _exit(127);
        }
        return p;
}

static int run_share(const char *bdf)
{
        struct nv n;
        char mn[41];
        if (nv_open(&n, bdf, 1 << 20, "share-manager") || nv_start(&n, mn, "share-manager"))
                return 1;
        unlink(SHARE_SOCK);
        int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", SHARE_SOCK);
        if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 8))
                return 1;
        struct peer c[CLIENTS] = {0};
        for (int k = 0; k < CLIENTS; k++)
                c[k].fd = -1;
        /* Clients 0 and 1 first; 1 is killed once both are busy; 2 then takes its place. */
        c[0].pid = spawn_client(0, bdf);
        c[1].pid = spawn_client(1, bdf);
        int started = 2;
        bool killed = false, stopping = false;
        unsigned next_qid = 1;
        uint64_t t_end = now_ns() + UINT64_C(90) * 1000000000u;
        while (now_ns() < t_end) {
                struct pollfd p[CLIENTS + 1];
                int np = 0, who[CLIENTS + 1];
                p[np] = (struct pollfd){ls, POLLIN, 0};
                who[np++] = -1;
                for (int k = 0; k < CLIENTS; k++)
                        if (c[k].fd >= 0) {
                                p[np] = (struct pollfd){c[k].fd, POLLIN, 0};
                                who[np++] = k;
                        }
                if (poll(p, (nfds_t)np, 200) < 0)
                        break;
                for (int i = 0; i < np; i++) {
                        if (!p[i].revents)
                                continue;
                        char line[128];
                        uint64_t sq, cq;
                        unsigned ent;
                        int k;
                        if (who[i] < 0) {
                                /* A client says who it is with its first line: its queue
                                 * pair's memory (device addresses in its own IOVA share). */
                                int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
                                if (fd < 0)
                                        continue;
                                if (recv_line(fd, line, sizeof(line), 5000) ||
                                    sscanf(line, "qp %d %" SCNu64 " %" SCNu64 " %u", &k, &sq, &cq,
                                           &ent) != 4 ||
                                    k < 0 || k >= started || c[k].fd >= 0) {
                                        close(fd);
                                        continue;
                                }
                                c[k].fd = fd;
                                c[k].qid = next_qid++;
                                int r = nvme_create_qpair(&n.c, (uint16_t)c[k].qid, ent, sq, cq);
                                if (r)
                                        printf("share: creating queue pair %u: %d\n", c[k].qid, r);
                                send_line(fd, "qid %u %u", r ? 0 : c[k].qid, n.c.lba_shift);
                                continue;
                        }
                        struct peer *x = &c[who[i]];
                        if (recv_line(x->fd, line, sizeof(line), 1000)) {
                                /* Gone: its queue pair goes (it died; its mappings are the
                                 * daemon's to clear). */
                                if (x->qid)
                                        nvme_delete_qpair(&n.c, (uint16_t)x->qid);
                                close(x->fd);
                                x->fd = -1;
                                x->done = true;
                                continue;
                        }
                        if (sscanf(line, "ready %" SCNx64, &x->iova) == 1) {
                                x->ready = true;
                        } else if (!strncmp(line, "done ", 5)) {
                                unsigned long long r, b;
                                char how[16];
                                if (sscanf(line, "done %15s %llu %llu", how, &r, &b) == 3) {
                                        x->good = !strcmp(how, "good");
                                        x->bytes = b;
                                }
                                nvme_delete_qpair(&n.c, (uint16_t)x->qid);
                                send_line(x->fd, "bye");
                        }
                }
                if (!killed && c[0].ready && c[1].ready) {
                        kill(c[1].pid, SIGKILL);
                        killed = true;
                        printf("share: killed client 2 (pid %d) in the middle of its I/O\n",
                               (int)c[1].pid);
                }
                if (killed && c[1].done && started == 2) {
                        c[2].pid = spawn_client(2, bdf);
                        started = 3;
                }
                if (!stopping && started == 3 && c[2].ready) {
                        send_line(c[0].fd, "stop");
                        send_line(c[2].fd, "stop");
                        stopping = true;
                }
                if (stopping && c[0].done && c[2].done)
                        break;
        }
        for (int k = 0; k < started; k++) {
                int st = 0;
                if (c[k].pid > 0 && waitpid(c[k].pid, &st, WNOHANG) == 0) {
                        kill(c[k].pid, SIGKILL);
                        waitpid(c[k].pid, &st, 0);
                }
        }
        result("share-queue-pairs", c[0].good && c[2].good && c[0].bytes && c[2].bytes,
               "the manager owns the admin queue; clients 1 and 3 each did verified I/O on a "
               "queue pair of their own (%" PRIu64 " and %" PRIu64 " bytes) with the VFIO fds "
               "the daemon passed them",
               c[0].bytes, c[2].bytes);
        result("share-client-death",
               killed && c[1].ready && c[2].ready && c[2].iova == c[1].iova && c[0].good,
               "client 2 (first IOVA 0x%" PRIx64 ") was killed mid-I/O; client 3 mapped its memory "
               "at 0x%" PRIx64 " (the dead client's IOVA share, so its mappings were gone) and "
               "client 1 went on unharmed",
               c[1].iova, c[2].iova);
        verified += c[0].bytes + c[2].bytes;
        figure("share_bytes_verified", (double)(c[0].bytes + c[2].bytes), "bytes");
        close(ls);
        unlink(SHARE_SOCK);
        nvme_ctrl_disable(&n.c);
        nv_close(&n);
        return failures ? 1 : 0;
}

/* ---- modes window and window-peer: two guests through the ivshmem backend ------------------ */

#define SEG_SIZE     (UINT64_C(4) << 20)
#define P2P_LEN      (UINT64_C(1) << 20)
#define READY        0x5eadu
#define DB_COPY      1u
#define DB_P2P       2u
#define COPY_ROUNDS  16
#define SPAD_BUS_LO  0
#define SPAD_BUS_HI  1
#define SPAD_READY   3
#define SPAD_SEED    4
#define SPAD_ACK     5
#define P2P_SEED     0x2222
#define WAIT_PEER_MS 120000

struct fab {
        struct ntbf_topo *t;
        const struct ntbf_backend_ops *ops;
        struct ntbf_backend *b;
        struct ntbf_adapter_h *h;
        uint32_t adapter, peer;
};

/* The node's first adapter, through the backend vtable (as libsisci will use it). */
static int fab_open(struct fab *f, const char *what)
{
        memset(f, 0, sizeof(*f));
        const char *dir = getenv("NTBFAB_DIR"), *node = getenv("NTBFAB_NODE");
        char path[512];
        snprintf(path, sizeof(path), "%s/cluster.yaml", dir ? dir : ".");
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        int r = ntbf_config_load(path, &f->t, &d);
        ntbf_diags_free(&d);
        uint32_t n = r ? NTBF_NONE : ntbf_topo_find_node(f->t, node ? node : "");
        if (n == NTBF_NONE || !f->t->nodes[n].nadapters) {
                result(what, false, "cannot load %s or find node %s with an adapter", path,
                       node ? node : "(NTBFAB_NODE unset)");
                return -EINVAL;
        }
        f->adapter = f->t->nodes[n].adapters[0];
        uint32_t l = f->t->adapters[f->adapter].link[0];
        struct ntbf_port_ref o = ntbf_link_peer(
            &f->t->links[l], (struct ntbf_port_ref){NTBF_PORT_ADAPTER, f->adapter, 0});
        f->peer = o.obj;
        f->ops = ntbf_backend_find(f->t->backend);
        struct ntbf_backend_env env = {f->t, dir, n};
        if (!f->ops || (r = f->ops->open(&env, &f->b, NULL, 0)) ||
            (r = f->ops->probe(f->b, f->adapter, &f->h))) {
                result(what, false, "cannot open adapter %s of the %s backend: %s",
                       f->t->adapters[f->adapter].name, f->t->backend, ntbf_strerror(r));
                return r ? r : -EINVAL;
        }
        return 0;
}

static void fab_close(struct fab *f)
{
        if (f->h)
                f->ops->release(f->h);
        if (f->b)
                f->ops->close(f->b);
        ntbf_topo_free(f->t);
}

/* Wait for doorbell bit, polling (ivshmem-plain has no interrupts); clear it. */
static bool wait_db(struct fab *f, uint64_t bit, unsigned ms)
{
        for (uint64_t t0 = now_ns(); now_ns() - t0 < (uint64_t)ms * 1000000u; sleep_ms(1)) {
                uint64_t bits = 0;
                f->ops->db_read(f->h, &bits);
                if (bits & bit) {
                        f->ops->db_clear(f->h, bit);
                        return true;
                }
        }
        return false;
}

static int run_window_peer(void)
{
        struct fab f;
        if (fab_open(&f, "peer-open"))
                return 1;
        struct ntbf_mem seg;
        int r = f.ops->mem_alloc(f.h, SEG_SIZE, 0, &seg);
        if (r) {
                result("peer-segment", false, "mem_alloc: %s", ntbf_strerror(r));
                return 1;
        }
        f.ops->spad_write(f.h, SPAD_BUS_LO, (uint32_t)seg.bus_addr);
        f.ops->spad_write(f.h, SPAD_BUS_HI, (uint32_t)(seg.bus_addr >> 32));
        f.ops->spad_write(f.h, SPAD_READY, READY);
        printf("peer: exported 4 MiB at bus address 0x%" PRIx64 "\n", seg.bus_addr);
        fflush(stdout);
        /* 1. A's CPU copies through its window. */
        bool got = wait_db(&f, DB_COPY, WAIT_PEER_MS);
        uint32_t seed = 0;
        f.ops->spad_read(f.h, SPAD_SEED, &seed);
        bool ok = got && check(seg.addr, SEG_SIZE, seed);
        result("shm-copy-into-peer", ok,
               "4 MiB guest A wrote through its window %s in this guest's memory (seed %u)",
               !got ? "never arrived"
               : ok ? "are"
                    : "differ",
               seed);
        uint64_t seen = ok ? SEG_SIZE : 0;
        f.ops->spad_write(f.h, SPAD_ACK, ok ? 1 : 2);
        f.ops->peer_db_set(f.h, f.peer, DB_COPY);
        /* 2. A's NVMe writes by DMA through A's IOMMU into the window. */
        got = wait_db(&f, DB_P2P, WAIT_PEER_MS);
        ok = got && check(seg.addr, P2P_LEN, P2P_SEED);
        seen += ok ? P2P_LEN : 0;
        figure("peer_bytes_verified", (double)seen, "bytes");
        result("p2p-nvme-into-peer", ok,
               "1 MiB guest A's NVMe read from its disk by DMA into its window %s here",
               !got ? "never arrived"
               : ok ? "is"
                    : "differs");
        f.ops->spad_write(f.h, SPAD_ACK, ok ? 3 : 4);
        f.ops->peer_db_set(f.h, f.peer, DB_P2P);
        sleep_ms(200); /* let A see the bell before this side goes */
        f.ops->mem_free(f.h, &seg);
        fab_close(&f);
        return failures ? 1 : 0;
}

static int run_window(const char *bdf)
{
        struct fab f;
        if (fab_open(&f, "window-open"))
                return 1;
        /* The peer exports a segment and says where (scratchpads). */
        uint32_t ready = 0, lo = 0, hi = 0;
        bool up = false;
        for (uint64_t t0 = now_ns(); now_ns() - t0 < (uint64_t)WAIT_PEER_MS * 1000000u;
             sleep_ms(5)) {
                f.ops->link_state(f.h, 0, &up);
                if (up && !f.ops->peer_spad_read(f.h, f.peer, SPAD_READY, &ready) && ready == READY)
                        break;
        }
        if (!up || ready != READY) {
                result("window-link", false, "guest B never came up (link %s)", up ? "up" : "down");
                return 1;
        }
        f.ops->peer_spad_read(f.h, f.peer, SPAD_BUS_LO, &lo);
        f.ops->peer_spad_read(f.h, f.peer, SPAD_BUS_HI, &hi);
        uint64_t bus = (uint64_t)hi << 32 | lo;
        struct ntbf_caps caps;
        f.ops->caps(f.h, &caps);
        /* Program the window's first slots to the peer's segment (what the daemon does for
         * a segment connection), then map them for the CPU. */
        const struct ntbf_adapter *a = &f.t->adapters[f.peer];
        uint64_t E = caps.windows[0].slot_size;
        for (uint32_t s = 0; s < SEG_SIZE / E; s++) {
                struct ntbf_xlat x = {a->node, f.peer, bus + s * E, NTBF_NONE, E};
                int r = f.ops->xlat_set(f.h, s, &x);
                if (r) {
                        result("window-xlat", false, "slot %u: %s", s, ntbf_strerror(r));
                        return 1;
                }
        }
        void *w;
        int r = f.ops->map_window(f.h, 0, 0, SEG_SIZE, 0, &w);
        if (r) {
                result("window-map", false, "map_window: %s", ntbf_strerror(r));
                return 1;
        }
        /* Bandwidth: CPU copies through the window, each way. */
        uint8_t *src = malloc(SEG_SIZE), *dst = malloc(SEG_SIZE);
        fill(src, SEG_SIZE, 5);
        uint64_t t0 = now_ns();
        for (int i = 0; i < COPY_ROUNDS; i++)
                memcpy(w, src, SEG_SIZE);
        double wsec = (double)(now_ns() - t0) / 1e9;
        t0 = now_ns();
        for (int i = 0; i < COPY_ROUNDS; i++)
                memcpy(dst, w, SEG_SIZE);
        double rsec = (double)(now_ns() - t0) / 1e9;
        figure("ivshmem_window_write_MBps", COPY_ROUNDS * (double)SEG_SIZE / wsec / 1e6, "MB/s");
        figure("ivshmem_window_read_MBps", COPY_ROUNDS * (double)SEG_SIZE / rsec / 1e6, "MB/s");
        bool back = !memcmp(dst, src, SEG_SIZE);
        figure("window_bytes_verified", back ? (double)SEG_SIZE : 0, "bytes");
        result("shm-window-readback", back,
               "4 MiB copied %d times into guest B's segment through the window and read back",
               COPY_ROUNDS);
        uint32_t seed = 4242;
        fill(w, SEG_SIZE, seed);
        f.ops->peer_spad_write(f.h, f.peer, SPAD_SEED, seed);
        f.ops->peer_db_set(f.h, f.peer, DB_COPY);
        uint32_t ack = 0;
        bool got = wait_db(&f, DB_COPY, 30000);
        f.ops->peer_spad_read(f.h, f.peer, SPAD_ACK, &ack);
        result("shm-copy-acked", got && ack == 1, "guest B %s the data (ack %u)",
               got ? "checked" : "never answered about", ack);

        /* Peer-to-peer: the NVMe's DMA into the window, through this guest's IOMMU. */
        struct nv n;
        char mn[41];
        if (nv_open(&n, bdf, 2 << 20, "p2p-open") || nv_start(&n, mn, "p2p-identify") ||
            nv_ioq(&n, 1, 16)) {
                result("p2p", false, "NVMe bring-up failed");
                return 1;
        }
        void *buf;
        uint64_t io, wio;
        if (nvme_dma_alloc(&n.dma, P2P_LEN, 4096, &buf, &io))
                return 1;
        fill(buf, P2P_LEN, P2P_SEED);
        int s1 = nv_rw(&n, NTBF_NVME_CMD_WRITE, PRP_BLK + 512, P2P_LEN, io);
        r = ntbf_dev_map_window(n.dev, f.adapter, 0, 0, P2P_LEN, &wio);
        if (r) {
                nv_fail("p2p-map-window", &n, r);
                return 1;
        }
        int s2 = nv_rw(&n, NTBF_NVME_CMD_READ, PRP_BLK + 512, P2P_LEN, wio);
        bool seen = check(w, P2P_LEN, P2P_SEED);
        result("p2p-nvme-window", !s1 && !s2 && seen,
               "the NVMe read 1 MiB by DMA to IOVA 0x%" PRIx64 " (the window, mapped for it "
               "with ntbf_dev_map_window): status %d/%d; this CPU sees it through the window: %s",
               wio, s1, s2, seen ? "yes" : "no");
        f.ops->peer_db_set(f.h, f.peer, DB_P2P);
        got = wait_db(&f, DB_P2P, 30000);
        f.ops->peer_spad_read(f.h, f.peer, SPAD_ACK, &ack);
        result("p2p-acked", got && ack == 3, "guest B %s the NVMe's data (ack %u)",
               got ? "checked" : "never answered about", ack);
        ntbf_dev_unmap_window(n.dev, wio);
        nvme_ctrl_disable(&n.c);
        nv_close(&n);
        f.ops->unmap_window(f.h, w, SEG_SIZE);
        free(src);
        free(dst);
        fab_close(&f);
        return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
        setvbuf(stdout, NULL, _IOLBF, 0);
        const char *mode = argc > 1 ? argv[1] : "";
        const char *arg = argc > 2 ? argv[2] : NULL;
        if (!strcmp(mode, "nvme") && arg)
                return run_nvme(arg);
        if (!strcmp(mode, "sim") && arg)
                return run_sim(arg);
        if (!strcmp(mode, "identify") && arg && argc > 3)
                return run_identify(arg, argv[3]);
        if (!strcmp(mode, "share") && arg)
                return run_share(arg);
        if (!strcmp(mode, "share-client") && arg)
                return run_client(atoi(arg));
        if (!strcmp(mode, "window") && arg)
                return run_window(arg);
        if (!strcmp(mode, "window-peer"))
                return run_window_peer();
        fprintf(stderr, "usage: ntbfab-vmtest nvme|share|window|sim BDF | window-peer\n"
                        "(the VM tier's guest programs: docs/vm.md)\n");
        return 2;
}
