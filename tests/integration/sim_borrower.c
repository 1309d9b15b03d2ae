/* tests/integration/sim_borrower.c: a borrower process of the device tests, driving a lent NVMe or
 * accelerator through the NTB, one command line at a time on stdin. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ntbfab/config.h"
#include "ntbfab/error.h"
#include "ntbfab/sim.h"
#include "accel.h"
#include "cfgspace.h"
#include "lendhand.h"
#include "nvme_drv.h"

/*
 * Usage: sim_borrower DIR CLUSTER_YAML. The process attaches to the fabric in DIR as node
 * "borrower", probes its adapter and answers each command with one line: "ok [values]",
 * "bad ..." (a check failed) or "err ..." (a call failed). Addresses it is told (the DMA
 * window's device-side address, BAR addresses) come from the test, as SmartIO's services
 * would hand them to a borrower. Numbers may be decimal or 0x hexadecimal.
 *
 *   pool SIZE CHUNK IOVA DEV        DMA memory (lendhand.h lh_pool_new); its first MiB holds
 *                                   queues, PRP lists and Identify data, the rest data buffers
 *   mapbar KEY SLOT ADDR SIZE       map lender address ADDR (a BAR) through the window from
 *                                   SLOT on: KEY 0 NVMe BAR0, 1 accelerator BAR0, 2 its BAR2
 *   cfgon DEVICE                    Memory Space and Bus Master Enable of a lender device
 *   flr DEVICE                      Function Level Reset by a config write; waits for it
 *   nvme-enable ADMIN_ENTRIES       reset, admin queues in the pool, enable, identify
 *   idctrl | idns                   -> ok STATUS PHYS (the data, at PHYS in this host)
 *   qalloc ENTRIES                  queue memory only -> ok SQ_DEV CQ_DEV
 *   qcreate QID ENTRIES SQ CQ       (manager) create a pair on another process's memory
 *   qbind QID                       use the memory of qalloc as pair QID
 *   qown QID ENTRIES [CQ_ENTRIES]   qalloc + qcreate + qbind
 *   qreset                          delete the current pair, clear it, create it again
 *   geom [LBA_SHIFT MAX_XFER]       the namespace geometry (set: as the manager found it)
 *   timeout MS                      command timeout
 *   buf OFF LEN                     the current data buffer, pool[OFF, +LEN) -> ok DEV PHYS
 *   fill SEED POS | fillb BYTE      fill it: pattern of namespace position POS, or a byte
 *   check SEED POS | checkb BYTE    check it -> ok | bad INDEX VALUE
 *   io OPC POS                      read/write it at namespace byte POS -> ok STATUS
 *   flush | shutdown                -> ok STATUS
 *   run POS LEN SEED NPROC          write and read back [POS, +LEN) with varied sizes and
 *                                   page offsets after a barrier of NPROC processes
 *                                   -> ok COMMANDS T0_NS T1_NS
 *   verify POS LEN SEED             read [POS, +LEN) back and check every byte
 *   burst POS N QD SEED             N 4 KiB writes then reads with QD in flight
 *                                   -> ok MOST_OUTSTANDING STRAYS
 *   acc-enable                      -> ok ID MEMSIZE MEM_ADDR
 *   acc-copy SRC DST LEN            one descriptor, waited for
 *                                   -> ok STATUS HEAD COMPLETED ERRORS LAST_ERROR BYTES
 *   pfill|pcheck OFF LEN SEED       pool memory (this host's RAM): pattern from 0
 *   pfillb|pcheckb OFF LEN BYTE
 *   mfill|mcheck OFF LEN SEED       the accelerator's BAR2 through the window
 *   quit                            unmap, free, detach, exit 0
 */

#define QMEM   (UINT64_C(1) << 20) /* the pool's first MiB: queues, PRP lists, Identify data */
#define NMAPS  4
#define RUNBUF (UINT64_C(256) << 10)

static const struct ntbf_backend_ops *ops;
static struct ntbf_backend *be;
static struct ntbf_topo *topo;
static struct ntbf_adapter_h *h;
static uint32_t ba = NTBF_NONE, la = NTBF_NONE;
static const char *dir;
static struct lh_pool pool;
static struct lh_map maps[NMAPS];
static struct nvme_dma dma;
static struct nvme_ctrl ctrl;
static struct nvme_queue q, qnew;
static uint64_t buf_off, buf_len;

static void reply(const char *fmt, ...) NTBF_PRINTF(1, 2);
static void reply(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
        fflush(stdout);
}

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void nap_us(unsigned us)
{
        struct timespec ts = {0, (long)us * 1000};
        nanosleep(&ts, NULL);
}

static void check_reply(int64_t at, const uint8_t *p)
{
        if (at < 0)
                reply("ok");
        else
                reply("bad %lld 0x%02x", (long long)at, p[at]);
}

static uint8_t *pool_at(uint64_t off, uint64_t len)
{
        return off <= pool.size && len <= pool.size - off ? pool.va + off : NULL;
}

/* ---- NVMe ---------------------------------------------------------------------------------- */

static volatile uint8_t *nvme_regs(void)
{
        return maps[0].addr;
}

static int dma_init(void)
{
        if (!pool.va)
                return -EINVAL;
        if (!dma.va)
                dma = (struct nvme_dma){pool.va, pool.dev, QMEM, 0};
        return 0;
}

static int io(uint8_t opc, uint64_t pos)
{
        return nvme_rw(&ctrl, &q, opc, pos, buf_len, pool.dev + buf_off);
}

/* All nproc runners wait here, so their I/O overlaps. */
static int barrier(unsigned nproc)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/barrier", dir);
        int fd = open(path, O_RDWR);
        if (fd < 0)
                return -errno;
        uint32_t *cnt = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (cnt == MAP_FAILED)
                return -errno;
        __atomic_add_fetch(cnt, 1, __ATOMIC_ACQ_REL);
        int r = -ETIMEDOUT;
        for (uint64_t t0 = now_ns(); now_ns() - t0 < UINT64_C(20000000000);) {
                if (__atomic_load_n(cnt, __ATOMIC_ACQUIRE) >= nproc) {
                        r = 0;
                        break;
                }
                nap_us(50);
        }
        munmap(cnt, 4096);
        return r;
}

/*
 * Write [pos, pos + len) of the namespace with stream seed in commands of varied sizes from
 * buffers at varied page offsets, then read it back in other sizes and check every byte.
 */
static void run(uint64_t pos, uint64_t len, uint64_t seed, unsigned nproc)
{
        static const uint64_t wsz[] = {4096, 8192, 131072, 16384, 65536, 512, 102400, 32768};
        static const uint64_t rsz[] = {131072, 4096, 24576, 65536, 1024, 131072, 8192};
        static const uint64_t offs[] = {0, 0x200, 0x7c4, 0x1000, 0xffc};
        uint64_t base = QMEM, cmds = 0;
        uint8_t *b = pool_at(base, RUNBUF + 0x2000);
        if (!b || len % 512) {
                reply("err bad run");
                return;
        }
        int r = nproc > 1 ? barrier(nproc) : 0;
        if (r) {
                reply("err barrier %d", r);
                return;
        }
        uint64_t t0 = now_ns();
        for (uint64_t done = 0, i = 0; done < len; i++) {
                uint64_t n = wsz[i % 8] < len - done ? wsz[i % 8] : len - done;
                uint64_t o = offs[i % 5];
                lh_pattern(seed, pos + done, b + o, n);
                r = nvme_rw(&ctrl, &q, NTBF_NVME_CMD_WRITE, pos + done, n, pool.dev + base + o);
                if (r) {
                        reply("err write at %llu: %d", (unsigned long long)(pos + done), r);
                        return;
                }
                done += n;
                cmds++;
        }
        for (uint64_t done = 0, i = 0; done < len; i++) {
                uint64_t n = rsz[i % 7] < len - done ? rsz[i % 7] : len - done;
                uint64_t o = offs[(i + 2) % 5];
                memset(b + o, 0xa5, n);
                r = nvme_rw(&ctrl, &q, NTBF_NVME_CMD_READ, pos + done, n, pool.dev + base + o);
                if (r) {
                        reply("err read at %llu: %d", (unsigned long long)(pos + done), r);
                        return;
                }
                int64_t at = lh_pattern_check(seed, pos + done, b + o, n);
                if (at >= 0) {
                        reply("bad %llu 0x%02x", (unsigned long long)(pos + done + (uint64_t)at),
                              b[o + (uint64_t)at]);
                        return;
                }
                done += n;
                cmds++;
        }
        uint64_t t1 = now_ns();
        reply("ok %llu %llu %llu", (unsigned long long)cmds, (unsigned long long)t0,
              (unsigned long long)t1);
}

/* Read [pos, pos + len) back in 128 KiB commands and check it against stream seed. */
static void verify(uint64_t pos, uint64_t len, uint64_t seed)
{
        uint64_t chunk = ctrl.max_xfer < 131072 ? ctrl.max_xfer : 131072;
        uint8_t *b = pool_at(QMEM, chunk);
        if (!b || !chunk) {
                reply("err no buffer");
                return;
        }
        for (uint64_t done = 0; done < len;) {
                uint64_t n = chunk < len - done ? chunk : len - done;
                memset(b, 0xa5, n);
                int r = nvme_rw(&ctrl, &q, NTBF_NVME_CMD_READ, pos + done, n, pool.dev + QMEM);
                if (r) {
                        reply("err read at %llu: %d", (unsigned long long)(pos + done), r);
                        return;
                }
                int64_t at = lh_pattern_check(seed, pos + done, b, n);
                if (at >= 0) {
                        reply("bad %llu 0x%02x", (unsigned long long)(pos + done + (uint64_t)at),
                              b[at]);
                        return;
                }
                done += n;
        }
        reply("ok");
}

/*
 * Write n 4 KiB blocks from pos with up to qd commands outstanding (reaping only when qd are
 * outstanding or all are submitted), then read them back the same way and check every byte.
 * Answers "ok MOST STRAYS": the most commands that were outstanding, completions for no
 * command.
 */
static void burst(uint64_t pos, unsigned n, unsigned qd, uint64_t seed)
{
        static int16_t idx[65536];
        bool done_map[128];
        if (n > 128 || !qd || !ctrl.lba_shift || (pos & 4095)) {
                reply("err bad burst");
                return;
        }
        uint8_t *base = pool_at(QMEM, (uint64_t)n * 4096);
        uint64_t dev = pool.dev + QMEM;
        uint32_t nlb = 4096u >> ctrl.lba_shift;
        unsigned most = 0;
        for (int pass = 0; pass < 2; pass++) {
                uint8_t opc = pass ? NTBF_NVME_CMD_READ : NTBF_NVME_CMD_WRITE;
                for (unsigned i = 0; i < n; i++) {
                        if (pass)
                                memset(base + i * 4096, 0xa5, 4096);
                        else
                                lh_pattern(seed, pos + i * 4096, base + i * 4096, 4096);
                }
                memset(done_map, 0, sizeof(done_map));
                unsigned sub = 0, done = 0;
                while (done < n) {
                        while (sub < n && sub - done < qd) {
                                struct ntbf_nvme_sqe cmd;
                                uint64_t slba = (pos >> ctrl.lba_shift) + (uint64_t)sub * nlb;
                                int r = nvme_rw_prep(&ctrl, &q, &cmd, opc, slba, nlb,
                                                     dev + (uint64_t)sub * 4096, 0);
                                int cid = r ? r : nvme_submit(&q, &cmd);
                                if (cid == -EBUSY)
                                        break;
                                if (cid < 0) {
                                        reply("err submit %d", cid);
                                        return;
                                }
                                idx[cid] = (int16_t)sub++;
                        }
                        most = sub - done > most ? sub - done : most;
                        struct ntbf_nvme_cqe e;
                        uint64_t t0 = now_ns();
                        while (!nvme_reap(&q, &e)) {
                                if (now_ns() - t0 > (uint64_t)ctrl.wait.timeout_ms * 1000000u) {
                                        reply("err timeout with %u of %u done", done, n);
                                        return;
                                }
                                nap_us(10);
                        }
                        int i = e.cid == 0xffff ? -1 : idx[e.cid];
                        if (i < 0 || i >= (int)sub || done_map[i] || nvme_cqe_status(&e)) {
                                reply("err completion cid %u status 0x%x", e.cid,
                                      nvme_cqe_status(&e));
                                return;
                        }
                        done_map[i] = true;
                        done++;
                }
        }
        int64_t at = lh_pattern_check(seed, pos, base, (uint64_t)n * 4096);
        if (at >= 0) {
                reply("bad %lld 0x%02x", (long long)at, base[at]);
                return;
        }
        reply("ok %u %llu", most, (unsigned long long)q.stray);
}

/* ---- accelerator --------------------------------------------------------------------------- */

static volatile uint8_t *acc_regs(void)
{
        return maps[1].addr;
}

static uint32_t acc_r32(uint32_t off)
{
        return __atomic_load_n((volatile uint32_t *)(acc_regs() + off), __ATOMIC_ACQUIRE);
}

static uint64_t acc_r64(uint32_t off)
{
        return __atomic_load_n((volatile uint64_t *)(acc_regs() + off), __ATOMIC_ACQUIRE);
}

static void acc_w32(uint32_t off, uint32_t v)
{
        __atomic_store_n((volatile uint32_t *)(acc_regs() + off), v, __ATOMIC_RELEASE);
}

static void acc_enable(void)
{
        if (!acc_regs()) {
                reply("err accelerator BAR0 not mapped");
                return;
        }
        uint32_t id = acc_r32(NTBF_ACCEL_REG_ID);
        acc_w32(NTBF_ACCEL_REG_CTRL, NTBF_ACCEL_CTRL_ENABLE);
        for (uint64_t t0 = now_ns(); now_ns() - t0 < UINT64_C(2000000000);) {
                if (acc_r32(NTBF_ACCEL_REG_STATUS) & NTBF_ACCEL_STATUS_READY) {
                        reply("ok 0x%x %llu 0x%llx", id,
                              (unsigned long long)acc_r64(NTBF_ACCEL_REG_MEMSIZE),
                              (unsigned long long)acc_r64(NTBF_ACCEL_REG_MEM_ADDR));
                        return;
                }
                nap_us(20);
        }
        reply("err not ready (status 0x%x, id 0x%x)", acc_r32(NTBF_ACCEL_REG_STATUS), id);
}

/* One descriptor: post it at TAIL, ring, wait for its status. */
static void acc_copy(uint64_t src, uint64_t dst, uint64_t len)
{
        uint32_t tail = acc_r32(NTBF_ACCEL_REG_TAIL);
        if (tail >= NTBF_ACCEL_RING_SIZE ||
            (tail + 1) % NTBF_ACCEL_RING_SIZE == acc_r32(NTBF_ACCEL_REG_HEAD) || len > UINT32_MAX) {
                reply("err ring");
                return;
        }
        volatile struct ntbf_accel_desc *d =
            (volatile struct ntbf_accel_desc *)(acc_regs() + NTBF_ACCEL_RING_OFF +
                                                (size_t)tail * sizeof(struct ntbf_accel_desc));
        d->src = src;
        d->dst = dst;
        d->len = (uint32_t)len;
        d->flags = 0;
        d->status = 0;
        d->cookie = tail;
        acc_w32(NTBF_ACCEL_REG_TAIL, (tail + 1) % NTBF_ACCEL_RING_SIZE);
        uint32_t st = 0;
        for (uint64_t t0 = now_ns(); now_ns() - t0 < UINT64_C(10000000000);) {
                st = __atomic_load_n(&d->status, __ATOMIC_ACQUIRE);
                if (st)
                        break;
                nap_us(20);
        }
        /* The registers follow the descriptor status within the same poll. */
        for (uint64_t t0 = now_ns(); st && now_ns() - t0 < UINT64_C(1000000000) &&
                                     acc_r32(NTBF_ACCEL_REG_HEAD) != (tail + 1) % 256;)
                nap_us(20);
        reply("ok 0x%x %u %u %u 0x%x %llu", st, acc_r32(NTBF_ACCEL_REG_HEAD),
              acc_r32(NTBF_ACCEL_REG_COMPLETED), acc_r32(NTBF_ACCEL_REG_ERRORS),
              acc_r32(NTBF_ACCEL_REG_LAST_ERROR),
              (unsigned long long)acc_r64(NTBF_ACCEL_REG_BYTES));
}

/* ---- the command loop ---------------------------------------------------------------------- */

static void quit(void)
{
        for (int i = 0; i < NMAPS; i++)
                lh_unmap_remote(ops, h, &maps[i]);
        if (pool.va)
                lh_pool_free(ops, h, &pool);
        ops->release(h);
        ops->close(be);
        ntbf_topo_free(topo);
        reply("ok");
        exit(0);
}

static void command(char *line)
{
        char cmd[32] = "";
        unsigned long long v[6] = {0};
        int n = sscanf(line, "%31s %lli %lli %lli %lli %lli %lli", cmd, &v[0], &v[1], &v[2], &v[3],
                       &v[4], &v[5]);
        int r = 0;
        if (n < 1)
                return;
        if (!strcmp(cmd, "pool")) {
                r = lh_pool_new(ops, h, v[0], v[1], v[2], v[3], &pool);
        } else if (!strcmp(cmd, "mapbar")) {
                if (v[0] >= NMAPS) {
                        reply("err key");
                        return;
                }
                r = lh_map_remote(ops, h, topo, ba, (uint32_t)v[1], la, v[2], v[3], &maps[v[0]]);
        } else if (!strcmp(cmd, "cfgon")) {
                uint8_t *cfg = ntbf_sim_cfg(be, (uint32_t)v[0], 0);
                if (!cfg) {
                        reply("err no such device");
                        return;
                }
                lh_cfg_enable(cfg);
        } else if (!strcmp(cmd, "flr")) {
                /* The config write a borrower's kernel forwards to the lender (article 4.2). */
                uint8_t *cfg = ntbf_sim_cfg(be, (uint32_t)v[0], 0);
                uint32_t e = cfg ? ntbf_sim_cfg_find_cap(cfg, NTBF_PCI_CAP_ID_EXP) : 0;
                if (!e ||
                    ntbf_sim_cfg_write(cfg, e + NTBF_PCI_EXP_DEVCTL, NTBF_PCI_EXP_DEVCTL_FLR, 2)) {
                        reply("err no FLR");
                        return;
                }
                uint64_t t0 = now_ns();
                while (ntbf_sim_cfg_flr_pending(cfg) && now_ns() - t0 < UINT64_C(2000000000))
                        nap_us(50);
                r = ntbf_sim_cfg_flr_pending(cfg) ? -ETIMEDOUT : 0;
        } else if (!strcmp(cmd, "nvme-enable")) {
                r = dma_init();
                if (!r)
                        r = nvme_ctrl_enable(&ctrl, nvme_regs(), &dma, (uint32_t)v[0]);
                if (!r)
                        r = nvme_ctrl_identify(&ctrl, NULL, NULL);
        } else if (!strcmp(cmd, "idctrl") || !strcmp(cmd, "idns")) {
                bool c = !strcmp(cmd, "idctrl");
                r = nvme_identify(&ctrl, c ? NTBF_NVME_CNS_CTRL : NTBF_NVME_CNS_NS, c ? 0 : 1);
                if (r >= 0) {
                        reply(
                            "ok %d 0x%llx", r,
                            (unsigned long long)lh_pool_phys(&pool, (uint64_t)(ctrl.id - pool.va)));
                        return;
                }
        } else if (!strcmp(cmd, "qalloc")) {
                r = dma_init();
                if (!r)
                        r = nvme_queue_alloc(&dma, (uint32_t)v[0], &qnew);
                if (!r) {
                        reply("ok 0x%llx 0x%llx", (unsigned long long)qnew.sq_dev,
                              (unsigned long long)qnew.cq_dev);
                        return;
                }
        } else if (!strcmp(cmd, "qcreate")) {
                r = nvme_create_qpair(&ctrl, (uint16_t)v[0], (uint32_t)v[1], v[2], v[3]);
                if (r >= 0) {
                        reply("ok %d", r);
                        return;
                }
        } else if (!strcmp(cmd, "qbind")) {
                q = qnew;
                nvme_queue_bind(&q, nvme_regs(), (uint16_t)v[0]);
        } else if (!strcmp(cmd, "qown") || !strcmp(cmd, "qreset")) {
                bool own = !strcmp(cmd, "qown");
                if (own) {
                        uint32_t cqe = n > 3 ? (uint32_t)v[2] : (uint32_t)v[1];
                        r = nvme_queue_alloc_cq(&dma, (uint32_t)v[1], cqe, &q);
                        if (!r)
                                nvme_queue_bind(&q, nvme_regs(), (uint16_t)v[0]);
                } else {
                        r = nvme_delete_qpair(&ctrl, q.qid);
                        nvme_queue_clear(&q);
                }
                if (!r)
                        r = nvme_create_qpair_cq(&ctrl, q.qid, q.entries, q.cq_entries, q.sq_dev,
                                                 q.cq_dev);
                if (r >= 0) {
                        reply("ok %d", r);
                        return;
                }
        } else if (!strcmp(cmd, "geom")) {
                /* The namespace as the manager identified it: LBA shift, bytes per command. */
                if (n == 3) {
                        ctrl.lba_shift = (uint32_t)v[0];
                        ctrl.max_xfer = v[1];
                }
                reply("ok %u %llu", ctrl.lba_shift, (unsigned long long)ctrl.max_xfer);
                return;
        } else if (!strcmp(cmd, "timeout")) {
                ctrl.wait.timeout_ms = (uint32_t)v[0];
        } else if (!strcmp(cmd, "buf")) {
                if (!pool_at(v[0], v[1])) {
                        reply("err outside the pool");
                        return;
                }
                buf_off = v[0];
                buf_len = v[1];
                reply("ok 0x%llx 0x%llx", (unsigned long long)(pool.dev + buf_off),
                      (unsigned long long)lh_pool_phys(&pool, buf_off));
                return;
        } else if (!strcmp(cmd, "fill")) {
                lh_pattern(v[0], v[1], pool.va + buf_off, buf_len);
        } else if (!strcmp(cmd, "fillb")) {
                memset(pool.va + buf_off, (int)v[0], buf_len);
        } else if (!strcmp(cmd, "check")) {
                check_reply(lh_pattern_check(v[0], v[1], pool.va + buf_off, buf_len),
                            pool.va + buf_off);
                return;
        } else if (!strcmp(cmd, "checkb")) {
                check_reply(lh_bytes_check(pool.va + buf_off, (uint8_t)v[0], buf_len),
                            pool.va + buf_off);
                return;
        } else if (!strcmp(cmd, "io")) {
                r = io((uint8_t)v[0], v[1]);
                reply("ok %d", r);
                return;
        } else if (!strcmp(cmd, "flush")) {
                reply("ok %d", nvme_flush(&ctrl, &q));
                return;
        } else if (!strcmp(cmd, "run")) {
                run(v[0], v[1], v[2], (unsigned)v[3]);
                return;
        } else if (!strcmp(cmd, "burst")) {
                burst(v[0], (unsigned)v[1], (unsigned)v[2], v[3]);
                return;
        } else if (!strcmp(cmd, "verify")) {
                verify(v[0], v[1], v[2]);
                return;
        } else if (!strcmp(cmd, "shutdown")) {
                reply("ok %d", nvme_ctrl_shutdown(&ctrl));
                return;
        } else if (!strcmp(cmd, "acc-enable")) {
                acc_enable();
                return;
        } else if (!strcmp(cmd, "acc-copy")) {
                acc_copy(v[0], v[1], v[2]);
                return;
        } else if (!strcmp(cmd, "pfill") || !strcmp(cmd, "pcheck") || !strcmp(cmd, "pfillb") ||
                   !strcmp(cmd, "pcheckb") || !strcmp(cmd, "mfill") || !strcmp(cmd, "mcheck")) {
                /* pool (borrower RAM) or BAR2 memory (through the window): OFF LEN SEED|BYTE */
                bool m = cmd[0] == 'm';
                uint8_t *p = pool_at(v[0], v[1]);
                if (m) {
                        uint8_t *a = (uint8_t *)maps[2].addr,
                                *end = (uint8_t *)maps[2].base + maps[2].size;
                        p = a && v[0] <= (uint64_t)(end - a) && v[1] <= (uint64_t)(end - a) - v[0]
                                ? a + v[0]
                                : NULL;
                }
                if (!p) {
                        reply("err range");
                        return;
                }
                if (strstr(cmd, "fillb")) {
                        memset(p, (int)v[2], v[1]);
                } else if (strstr(cmd, "fill")) {
                        lh_pattern(v[2], 0, p, v[1]);
                } else {
                        bool b = strstr(cmd, "checkb");
                        check_reply(b ? lh_bytes_check(p, (uint8_t)v[2], v[1])
                                      : lh_pattern_check(v[2], 0, p, v[1]),
                                    p);
                        return;
                }
        } else if (!strcmp(cmd, "quit")) {
                quit();
        } else {
                reply("err unknown command %s", cmd);
                return;
        }
        if (r)
                reply("err %d %s", r, r < 0 ? ntbf_strerror(r) : "nvme status");
        else
                reply("ok");
}

int main(int argc, char **argv)
{
        if (argc != 3) {
                fprintf(stderr, "usage: sim_borrower DIR CLUSTER_YAML\n");
                return 2;
        }
        dir = argv[1];
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        int r = ntbf_config_load(argv[2], &topo, &d);
        if (r)
                ntbf_diags_print(&d, stderr);
        ntbf_diags_free(&d);
        ops = ntbf_backend_find("sim");
        if (r || !ops)
                return 1;
        uint32_t bn = ntbf_topo_find_node(topo, "borrower"),
                 ln = ntbf_topo_find_node(topo, "lender");
        if (bn == NTBF_NONE || ln == NTBF_NONE || !topo->nodes[bn].nadapters ||
            !topo->nodes[ln].nadapters)
                return 1;
        ba = topo->nodes[bn].adapters[0];
        la = topo->nodes[ln].adapters[0];
        struct ntbf_backend_env env = {topo, dir, bn};
        char why[512];
        r = ntbf_sim_attach(&env, &be, why, sizeof(why));
        if (!r && (r = ops->probe(be, ba, &h)))
                snprintf(why, sizeof(why), "probe: %s", ntbf_strerror(r));
        if (r) {
                reply("err %s", why);
                return 1;
        }
        nvme_wait_default(&ctrl.wait);
        reply("ready %d", (int)getpid());
        char line[512];
        while (fgets(line, sizeof(line), stdin))
                command(line);
        return 0;
}
