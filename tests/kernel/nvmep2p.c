/* tests/kernel/nvmep2p.c: ntbfab-nvmep2p, the kernel tier's check that guest a's QEMU NVMe
 * writes into guest b's memory through the NTB, with every address answered by ntbfab
 * (tests/kernel/init.sh, step lntb; docs/linux-ntb.md). A SISCI program, statically linked.
 *
 *   ntbfab-nvmep2p serve SEGID SIZE OFFSET LENGTH LBA SEED
 *       guest b: a segment of SIZE bytes in ntbfab's memory for export, filled with the stale
 *       pattern (the generator seeded with ~SEED) and made available; prints "ready"; on
 *       SIGUSR1 compares it byte for byte: [OFFSET, OFFSET + LENGTH) must hold the drive's
 *       bytes from LBA on (the generator seeded with SEED, as the harness wrote the drive's
 *       backing file), the rest the stale pattern still.
 *   ntbfab-nvmep2p read NODEID SEGID OFFSET LENGTH LBA
 *       guest a: holds the node's NVMe drive (SCIBorrowDevice), connects to guest b's
 *       segment, asks ntbfab for the drive's address of [OFFSET, OFFSET + LENGTH) of it
 *       (SCIMapRemoteSegmentForDevice) and for its queues' (a local segment,
 *       SCIMapLocalSegmentForDevice), and drives the controller itself (no nvme driver binds
 *       it: the guests load none): admin queues, one I/O queue pair, then NVMe Read commands
 *       of CHUNK bytes whose PRP1, PRP2 and PRP lists are the answered address plus offsets.
 *       Polls each completion. Prints "held" and keeps everything mapped until SIGUSR1, then
 *       disables the controller and releases the mappings, the connection and the drive.
 *
 * Results are RESULT name ok|FAIL detail and FIGURE name value unit lines on stdout. The
 * drive's registers are BAR0 through sysfs (resource0) of the function ntbfab names
 * (SCIQuery: the cluster file's bdf); SCIBorrowDevice enabled it (Memory Space and Bus
 * Master, read back here). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nvme/nvme_defs.h"
#include "sisci_api.h"

#define PAGE       NTBF_NVME_PAGE
#define NVME_CLASS 0x010802
/* One Read command moves CHUNK bytes: 64 pages, a PRP list of 63 entries; within the 512 KiB
 * that QEMU's controller takes by default (MDTS 7 of 4 KiB pages). */
#define CHUNK      (256u * 1024)
#define QDEPTH     16u
#define LBA_SIZE   512u /* the tier gives the drive logical_block_size=512 */
#define QSEG_ID    0x4e565100u

static sci_error_t error;
static volatile sig_atomic_t go;

static void on_usr1(int sig)
{
        (void)sig;
        go = 1;
}

static void result(const char *name, bool ok, const char *fmt, ...)
{
        char buf[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        for (char *p = buf; *p; p++)
                if (*p == '\n')
                        *p = ' ';
        printf("RESULT %s %s %s\n", name, ok ? "ok" : "FAIL", buf);
        fflush(stdout);
}

/* A failed SISCI call: the result names it, and the program ends. */
static void check(const char *name, const char *what)
{
        if (error == SCI_ERR_OK)
                return;
        result(name, false, "%s: %s (0x%x)", what, SCIGetErrorString(error), error);
        printf("failed\n");
        exit(1);
}

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The i-th output of splitmix64 from seed: the drive's word i (the harness's generator). */
static uint64_t word_of(uint64_t seed, uint64_t i)
{
        uint64_t z = seed + (i + 1) * UINT64_C(0x9e3779b97f4a7c15);
        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

static void wait_usr1(void)
{
        sigset_t none;
        sigemptyset(&none);
        while (!go)
                sigsuspend(&none);
}

static void block_usr1(void)
{
        struct sigaction sa = {.sa_handler = on_usr1};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR1, &sa, NULL);
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGUSR1);
        sigprocmask(SIG_BLOCK, &s, NULL);
}

/* ---- guest b: the segment, its stale fill and the check -------------------------------------- */

static int serve(uint32_t segid, size_t size, size_t off, size_t len, uint64_t lba, uint64_t seed)
{
        const char *name = "lntb-nvme-bytes";
        if (off % 8 || len % 8 || off > size || len > size - off) {
                result(name, false, "OFFSET and LENGTH must be multiples of 8 within SIZE");
                return 2;
        }
        block_usr1();
        sci_desc_t sd;
        sci_local_segment_t seg;
        sci_map_t map;
        SCIInitialize(0, &error);
        check(name, "SCIInitialize");
        SCIOpen(&sd, 0, &error);
        check(name, "SCIOpen");
        SCICreateSegment(sd, &seg, segid, size, NULL, NULL, 0, &error);
        check(name, "SCICreateSegment");
        SCIPrepareSegment(seg, 0, 0, &error);
        check(name, "SCIPrepareSegment");
        volatile uint64_t *mem = SCIMapLocalSegment(seg, &map, 0, size, NULL, 0, &error);
        check(name, "SCIMapLocalSegment");
        /* Stale bytes first: a short transfer or a write elsewhere leaves some of them. */
        size_t words = size / 8;
        for (size_t i = 0; i < words; i++)
                mem[i] = word_of(~seed, i);
        SCISetSegmentAvailable(seg, 0, 0, &error);
        check(name, "SCISetSegmentAvailable");
        printf("ready: segment 0x%x of %zu bytes, stale pattern written\n", segid, size);
        fflush(stdout);
        wait_usr1();

        size_t bad = 0, first = SIZE_MAX, stale_in = 0;
        uint64_t first_want = 0, first_got = 0;
        uint64_t base = lba * LBA_SIZE / 8; /* the drive's word at the range's start */
        for (size_t i = 0; i < words; i++) {
                bool in = i * 8 >= off && i * 8 < off + len;
                uint64_t want = in ? word_of(seed, base + (i - off / 8)) : word_of(~seed, i);
                uint64_t got = mem[i];
                if (got == want)
                        continue;
                if (in && got == word_of(~seed, i))
                        stale_in++;
                if (!bad++) {
                        first = i * 8;
                        first_want = want;
                        first_got = got;
                }
        }
        if (bad)
                result(name, false,
                       "%zu of %zu words differ (%zu of them inside the range still stale); the "
                       "first at segment offset 0x%zx: 0x%016" PRIx64 " expected 0x%016" PRIx64
                       " (%s)",
                       bad, words, stale_in, first, first_got, first_want,
                       first >= off && first < off + len ? "the drive's bytes" : "stale bytes");
        else
                result(name, true,
                       "segment 0x%x: %zu bytes at offset 0x%zx are the drive's from LBA %" PRIu64
                       " byte for byte, and the %zu bytes around them still the stale pattern",
                       segid, len, off, lba, size - len);
        SCIUnmapSegment(map, 0, &error);
        SCIRemoveSegment(seg, 0, &error);
        SCIClose(sd, 0, &error);
        SCITerminate();
        return bad ? 1 : 0;
}

/* ---- guest a: the drive, driven through the addresses ntbfab answered ------------------------ */

struct ctl {
        volatile uint8_t *regs;
        uint32_t dstrd;
        double timeout;
};

static volatile uint32_t *reg32(struct ctl *c, unsigned off)
{
        return (volatile uint32_t *)(c->regs + off);
}

static void db_write(struct ctl *c, unsigned qid, bool cq, uint32_t v)
{
        *reg32(c, NTBF_NVME_REG_DBS + (2 * qid + cq) * (4u << c->dstrd)) = v;
}

static int wait_ready(struct ctl *c, bool ready)
{
        for (double end = now_s() + c->timeout; now_s() < end;) {
                uint32_t v = *reg32(c, NTBF_NVME_REG_CSTS);
                if (v == UINT32_MAX || v & NTBF_NVME_CSTS_CFS)
                        return -1;
                if ((v & NTBF_NVME_CSTS_RDY) == (ready ? NTBF_NVME_CSTS_RDY : 0))
                        return 0;
                nanosleep(&(struct timespec){0, 100000}, NULL);
        }
        return -1;
}

/* A queue pair in the queue segment: entries at sq/cq, the device's addresses sq_io/cq_io. */
struct qp {
        volatile struct ntbf_nvme_sqe *sq;
        volatile struct ntbf_nvme_cqe *cq;
        uint64_t sq_io, cq_io;
        unsigned id, tail, head;
        uint16_t phase;
};

static void submit(struct ctl *c, struct qp *q, const struct ntbf_nvme_sqe *e)
{
        q->sq[q->tail] = *e;
        q->tail = (q->tail + 1) % QDEPTH;
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        db_write(c, q->id, false, q->tail);
}

/* The next completion's status field (phase bit dropped), or -1 after the timeout. */
static int reap(struct ctl *c, struct qp *q, uint16_t *cid)
{
        for (double end = now_s() + c->timeout; now_s() < end;) {
                volatile struct ntbf_nvme_cqe *e = &q->cq[q->head];
                if ((e->status & 1) == q->phase) {
                        __atomic_thread_fence(__ATOMIC_SEQ_CST);
                        *cid = e->cid;
                        int st = e->status >> 1;
                        if (++q->head == QDEPTH) {
                                q->head = 0;
                                q->phase ^= 1;
                        }
                        db_write(c, q->id, true, q->head);
                        return st;
                }
        }
        return -1;
}

static int admin(struct ctl *c, struct qp *a, uint8_t opc, uint32_t cdw10, uint32_t cdw11,
                 uint64_t prp1)
{
        static uint16_t cid;
        struct ntbf_nvme_sqe e = {
            .opc = opc, .cid = ++cid, .prp1 = prp1, .cdw10 = cdw10, .cdw11 = cdw11};
        submit(c, a, &e);
        uint16_t got;
        int st = reap(c, a, &got);
        return st == 0 && got != cid ? -1 : st;
}

/* The drive's config space file in sysfs. */
static void cfg_path(char *path, size_t len, uint32_t bdf)
{
        snprintf(path, len, "/sys/bus/pci/devices/0000:%02x:%02x.%x/config", bdf >> 8,
                 (bdf >> 3) & 0x1f, bdf & 7);
}

/*
 * Bus Master off before SCIBorrowDevice (the firmware may have left it on), so that finding
 * it on afterwards says the borrow enabled the drive.
 */
static int master_off(const char *name, uint32_t bdf)
{
        char path[128];
        cfg_path(path, sizeof(path), bdf);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        uint16_t cmd = 0;
        bool ok = fd >= 0 && pread(fd, &cmd, 2, 4) == 2;
        if (ok) {
                cmd &= (uint16_t)~0x4u;
                ok = pwrite(fd, &cmd, 2, 4) == 2;
        }
        if (!ok)
                result(name, false, "%s: %s (is the cluster file's bdf of the drive right?)", path,
                       strerror(errno));
        if (fd >= 0)
                close(fd);
        return ok ? 0 : -1;
}

/*
 * BAR0 of the drive through sysfs. SCIBorrowDevice set Memory Space and Bus Master in its
 * Command register (through the daemon, which reaches the config space of the node's devices
 * through sysfs on backend linux-ntb): read back here, the drive cannot DMA without them.
 */
static volatile uint8_t *open_regs(const char *name, uint32_t bdf, size_t *size)
{
        char path[128];
        cfg_path(path, sizeof(path), bdf);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        uint16_t cmd = 0;
        if (fd < 0 || pread(fd, &cmd, 2, 4) != 2) {
                result(name, false, "%s: %s (is the cluster file's bdf of the drive right?)", path,
                       strerror(errno));
                if (fd >= 0)
                        close(fd);
                return NULL;
        }
        if ((cmd & 0x6) != 0x6) {
                result(name, false,
                       "the drive's Command register is 0x%04x after SCIBorrowDevice: Memory "
                       "Space and Bus Master are not both set (the daemon did not reach its "
                       "config space)",
                       cmd);
                close(fd);
                return NULL;
        }
        close(fd);
        strcpy(strrchr(path, '/'), "/resource0");
        /* sysfs gives the BAR's size as the file's */
        fd = open(path, O_RDWR | O_SYNC | O_CLOEXEC);
        struct stat st = {0};
        void *p = fd < 0 || fstat(fd, &st) ? MAP_FAILED
                  : st.st_size < (off_t)(2 * PAGE)
                      ? (errno = ERANGE, MAP_FAILED)
                      : mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (fd >= 0)
                close(fd);
        if (p == MAP_FAILED) {
                result(name, false, "mapping %s (%lld bytes): %s", path, (long long)st.st_size,
                       strerror(errno));
                return NULL;
        }
        *size = (size_t)st.st_size;
        return p;
}

/*
 * Reads [lba, lba + len) into the device address io (page aligned): one command per CHUNK,
 * up to QDEPTH - 1 outstanding, each chunk's pages after the first in its PRP list page.
 */
static int read_all(struct ctl *c, struct qp *q, uint64_t io, size_t len, uint64_t lba,
                    volatile uint64_t *lists, uint64_t lists_io, unsigned *ncmds,
                    unsigned *nentries, char *why, size_t whylen)
{
        unsigned n = (unsigned)((len + CHUNK - 1) / CHUNK), done = 0, sent = 0;
        *nentries = 0;
        while (done < n) {
                while (sent < n && sent - done < QDEPTH - 1) {
                        size_t at = (size_t)sent * CHUNK,
                               bytes = len - at < CHUNK ? len - at : CHUNK;
                        unsigned pages = (unsigned)((bytes + PAGE - 1) / PAGE);
                        /* The list pages are used in turn: slot sent % (QDEPTH - 1). */
                        unsigned slot = sent % (QDEPTH - 1);
                        volatile uint64_t *list = lists + (size_t)slot * (PAGE / 8);
                        uint64_t prp2 = 0;
                        if (pages == 2) {
                                prp2 = io + at + PAGE;
                        } else if (pages > 2) {
                                for (unsigned k = 1; k < pages; k++)
                                        list[k - 1] = io + at + (uint64_t)k * PAGE;
                                prp2 = lists_io + (uint64_t)slot * PAGE;
                                *nentries += pages - 1;
                        }
                        uint64_t slba = lba + at / LBA_SIZE;
                        struct ntbf_nvme_sqe e = {
                            .opc = NTBF_NVME_CMD_READ,
                            .cid = (uint16_t)(sent + 1),
                            .nsid = 1,
                            .prp1 = io + at,
                            .prp2 = prp2,
                            .cdw10 = (uint32_t)slba,
                            .cdw11 = (uint32_t)(slba >> 32),
                            .cdw12 = (uint32_t)(bytes / LBA_SIZE - 1),
                        };
                        submit(c, q, &e);
                        sent++;
                }
                uint16_t cid;
                int st = reap(c, q, &cid);
                if (st < 0) {
                        snprintf(why, whylen, "no completion for a Read within %.0f s", c->timeout);
                        return -1;
                }
                if (st) {
                        snprintf(why, whylen,
                                 "Read command %u completed with status 0x%x (SCT %d, SC 0x%02x)",
                                 cid, st, (st >> 8) & 7, st & 0xff);
                        return -1;
                }
                done++;
        }
        *ncmds = n;
        return 0;
}

static int do_read(uint32_t nodeid, uint32_t segid, size_t off, size_t len, uint64_t lba)
{
        const char *mapname = "lntb-nvme-map", *readname = "lntb-nvme-read";
        block_usr1();
        sci_desc_t sd;
        SCIInitialize(0, &error);
        check(mapname, "SCIInitialize");
        SCIOpen(&sd, 0, &error);
        check(mapname, "SCIOpen");

        /* The node's NVMe drive, as the cluster file lends it (the pool's only one here). */
        sci_smartio_device_info_t filter;
        memset(&filter, 0, sizeof(filter));
        filter.fdid = UINT32_MAX;
        filter.nodeid = UINT32_MAX;
        filter.pci_class = NVME_CLASS;
        uint32_t fdid;
        size_t found = SCIGetDeviceList(sd, &fdid, 1, &filter, 0, &error);
        check(mapname, "SCIGetDeviceList");
        if (!found) {
                result(mapname, false,
                       "no NVMe drive in ntbfab's pool (the cluster file lends "
                       "none)");
                return 1;
        }
        sci_smartio_device_info_t info;
        sci_smartio_query_device_t qd = {fdid, SCI_Q_DEVICE_INFO, &info};
        SCIQuery(SCI_Q_DEVICE, &qd, 0, &error);
        check(mapname, "SCIQuery(SCI_Q_DEVICE)");
        if (master_off(mapname, info.bdf)) {
                printf("failed\n");
                return 1;
        }
        sci_smartio_device_t dev;
        SCIBorrowDevice(sd, &dev, fdid, SCI_FLAG_EXCLUSIVE, &error);
        check(mapname, "SCIBorrowDevice");

        /* Guest b's segment, and the drive's address of the range ntbfab answers. */
        sci_remote_segment_t rseg;
        for (double end = now_s() + 30;;) {
                SCIConnectSegment(sd, &rseg, nodeid, segid, 0, NULL, NULL, 1000, 0, &error);
                if (error == SCI_ERR_OK || now_s() > end)
                        break;
                nanosleep(&(struct timespec){0, 20000000}, NULL);
        }
        check(mapname, "SCIConnectSegment");
        sci_ioaddr_t io;
        SCIMapRemoteSegmentForDevice(rseg, dev, &io, off, len, 0, &error);
        check(mapname, "SCIMapRemoteSegmentForDevice");

        /* Queues and PRP lists: a segment of this node, mapped for the drive by ntbfab too. */
        size_t qsize = (2 + 1 + 2 + (QDEPTH - 1)) * (size_t)PAGE;
        sci_local_segment_t qseg;
        sci_map_t qmap;
        SCICreateSegment(sd, &qseg, QSEG_ID, qsize, NULL, NULL, 0, &error);
        check(mapname, "SCICreateSegment(queues)");
        SCIPrepareSegment(qseg, 0, 0, &error);
        check(mapname, "SCIPrepareSegment(queues)");
        SCISetSegmentAvailable(qseg, 0, 0, &error);
        check(mapname, "SCISetSegmentAvailable(queues)");
        volatile uint8_t *qmem = SCIMapLocalSegment(qseg, &qmap, 0, qsize, NULL, 0, &error);
        check(mapname, "SCIMapLocalSegment(queues)");
        sci_ioaddr_t qio;
        SCIMapLocalSegmentForDevice(qseg, 0, dev, &qio, 0, qsize, 0, &error);
        check(mapname, "SCIMapLocalSegmentForDevice(queues)");
        if (io % PAGE || qio % PAGE) {
                result(mapname, false,
                       "ntbfab answered 0x%" PRIx64 " and 0x%" PRIx64
                       ": PRP entries need page-aligned addresses",
                       io, qio);
                return 1;
        }
        result(mapname, true,
               "drive 0x%x (%s, %02x:%02x.%x) holds device address 0x%" PRIx64
               " for %zu bytes at offset 0x%zx of node %u's segment 0x%x "
               "(SCIMapRemoteSegmentForDevice), and 0x%" PRIx64 " for its queues here",
               fdid, info.user_name, info.bdf >> 8, (info.bdf >> 3) & 0x1f, info.bdf & 7, io, len,
               off, nodeid, segid, qio);

        size_t barsize = 0;
        struct ctl c = {.regs = open_regs(readname, info.bdf, &barsize)};
        if (!c.regs) {
                printf("failed\n");
                return 1;
        }
        uint64_t cap = *(volatile uint64_t *)(c.regs + NTBF_NVME_REG_CAP);
        c.dstrd = NTBF_NVME_CAP_DSTRD(cap);
        c.timeout = NTBF_NVME_CAP_TO(cap) * 0.5 + 5;
        memset((void *)qmem, 0, qsize);
        /* Layout: admin SQ, admin CQ, I/O SQ, I/O CQ (a page each), the PRP list pages. */
        struct qp a = {
            (volatile void *)qmem, (volatile void *)(qmem + PAGE), qio, qio + PAGE, 0, 0, 0, 1};
        struct qp q = {(volatile void *)(qmem + 2 * PAGE),
                       (volatile void *)(qmem + 3 * PAGE),
                       qio + 2 * PAGE,
                       qio + 3 * PAGE,
                       1,
                       0,
                       0,
                       1};
        volatile uint64_t *lists = (volatile uint64_t *)(qmem + 4 * PAGE);
        uint64_t lists_io = qio + 4 * PAGE;

        char why[512] = "";
        *reg32(&c, NTBF_NVME_REG_CC) = 0;
        if (wait_ready(&c, false)) {
                snprintf(why, sizeof(why), "the controller does not go idle (CSTS 0x%x)",
                         *reg32(&c, NTBF_NVME_REG_CSTS));
        } else {
                *reg32(&c, NTBF_NVME_REG_AQA) = (QDEPTH - 1) << 16 | (QDEPTH - 1);
                *(volatile uint64_t *)(c.regs + NTBF_NVME_REG_ASQ) = a.sq_io;
                *(volatile uint64_t *)(c.regs + NTBF_NVME_REG_ACQ) = a.cq_io;
                *reg32(&c, NTBF_NVME_REG_CC) =
                    NTBF_NVME_CC_EN | NTBF_NVME_CC_IOSQES_64 | NTBF_NVME_CC_IOCQES_16;
                if (wait_ready(&c, true))
                        snprintf(why, sizeof(why),
                                 "the controller does not become ready (CSTS "
                                 "0x%x)",
                                 *reg32(&c, NTBF_NVME_REG_CSTS));
        }
        int st = 0;
        if (!*why &&
            (st = admin(&c, &a, NTBF_NVME_ADM_CREATE_CQ, (QDEPTH - 1) << 16 | 1, 1, q.cq_io)))
                snprintf(why, sizeof(why), "Create I/O Completion Queue: status 0x%x", st);
        if (!*why && (st = admin(&c, &a, NTBF_NVME_ADM_CREATE_SQ, (QDEPTH - 1) << 16 | 1,
                                 1u << 16 | 1, q.sq_io)))
                snprintf(why, sizeof(why), "Create I/O Submission Queue: status 0x%x", st);
        unsigned ncmds = 0, nentries = 0;
        double t0 = now_s();
        if (!*why)
                read_all(&c, &q, io, len, lba, lists, lists_io, &ncmds, &nentries, why,
                         sizeof(why));
        double t = now_s() - t0;
        if (*why) {
                result(readname, false, "%s", why);
        } else {
                result(readname, true,
                       "%u Read commands (%u KiB each, %u PRP list entries) of %zu bytes from "
                       "LBA %" PRIu64 " completed with status 0 into device address 0x%" PRIx64
                       " in %.3f s",
                       ncmds, CHUNK / 1024, nentries, len, lba, io, t);
                printf("FIGURE lntb_nvme_read_MBps %.1f MB/s\n", (double)len / t / 1e6);
        }
        printf("held\n");
        fflush(stdout);
        wait_usr1();

        *reg32(&c, NTBF_NVME_REG_CC) = 0;
        wait_ready(&c, false);
        munmap((void *)c.regs, barsize);
        SCIUnmapLocalSegmentForDevice(qseg, 0, dev, 0, &error);
        check(readname, "SCIUnmapLocalSegmentForDevice");
        SCIUnmapSegment(qmap, 0, &error);
        SCIRemoveSegment(qseg, 0, &error);
        check(readname, "SCIRemoveSegment(queues)");
        SCIUnmapRemoteSegmentForDevice(rseg, dev, 0, &error);
        check(readname, "SCIUnmapRemoteSegmentForDevice");
        SCIDisconnectSegment(rseg, 0, &error);
        check(readname, "SCIDisconnectSegment");
        SCIReturnDevice(dev, 0, &error);
        check(readname, "SCIReturnDevice");
        SCIClose(sd, 0, &error);
        SCITerminate();
        printf("released\n");
        return *why ? 1 : 0;
}

static uint64_t num(const char *s)
{
        char *end;
        errno = 0;
        uint64_t v = strtoull(s, &end, 0);
        if (errno || end == s || *end) {
                fprintf(stderr, "ntbfab-nvmep2p: '%s' is not a number\n", s);
                exit(2);
        }
        return v;
}

int main(int argc, char **argv)
{
        setvbuf(stdout, NULL, _IOLBF, 0);
        if (argc == 8 && !strcmp(argv[1], "serve"))
                return serve((uint32_t)num(argv[2]), num(argv[3]), num(argv[4]), num(argv[5]),
                             num(argv[6]), num(argv[7]));
        if (argc == 7 && !strcmp(argv[1], "read"))
                return do_read((uint32_t)num(argv[2]), (uint32_t)num(argv[3]), num(argv[4]),
                               num(argv[5]), num(argv[6]));
        fprintf(stderr, "usage: ntbfab-nvmep2p serve SEGID SIZE OFFSET LENGTH LBA SEED\n"
                        "       ntbfab-nvmep2p read NODEID SEGID OFFSET LENGTH LBA\n");
        return 2;
}
