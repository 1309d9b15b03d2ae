/* backends/sim/nvme.c: the simulated NVMe 1.4 controller (one namespace backed by a sparse file).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfgspace.h"
#include "nvme.h"

#define PAGE           NTBF_NVME_PAGE
#define PAGE_MASK      (NTBF_NVME_PAGE - 1)
/* Largest bounce buffer between the namespace file and DMA; bigger transfers loop. */
#define BOUNCE_MAX     (1u << 20)
/* Admin data transfers when MDTS is 0 (unlimited). */
#define ADMIN_MAX_XFER (1u << 20)
/* SQEs fetched with one DMA read. */
#define FETCH_BATCH    8
#define NERRLOG        (NTBF_NVME_ELPE + 1)
#define NAER           (NTBF_NVME_AERL + 1)
#define TEMP_K         313 /* composite temperature reported: 40 C */
#define WCTEMP_K       343
#define CCTEMP_K       358

struct sq {
        uint64_t base;
        uint32_t size, head;
        uint16_t cqid;
        bool live;
};

struct cq {
        uint64_t base;
        uint32_t size, head, tail;
        uint16_t iv;
        bool ien, phase, live;
        bool touched;        /* entries posted in this poll round */
        uint32_t nsq;        /* SQs completing into it */
        uint32_t unsignaled; /* entries posted since the last interrupt */
        uint64_t first_ns;   /* when the oldest unsignaled entry was posted (coalescing) */
};

struct errent {
        uint64_t count, lba;
        uint32_t nsid;
        uint16_t sqid, cid, status, param;
};

struct features {
        uint32_t arbitration, power, temp_over, temp_under, err_recovery, wce;
        uint32_t nsqa, ncqa; /* allocated I/O queues (1's based) */
        uint32_t coalesce, write_atomic, async_event;
        uint8_t iv_cd[NTBF_NVME_MSIX_MAX]; /* coalescing disabled per vector */
};

/* Result of executing a command. */
struct result {
        uint16_t status;
        uint16_t param; /* error location, 0xffff when not applicable */
        uint32_t dw0;
        uint64_t lba;
        bool hold; /* no completion now (Asynchronous Event Request) */
};

/* Walk over the PRPs of a command: yields memory segments of at most a page. */
struct prp {
        uint64_t prp1, prp2, left;
        uint64_t list;
        uint32_t nent, ient;
        int state;
};
enum { PRP_FIRST, PRP_SECOND, PRP_LIST, PRP_DONE };

/* Contiguous runs over a PRP walk. */
struct cursor {
        struct prp p;
        uint64_t addr, left;
};

struct nvme {
        struct ntbf_sim_devenv env;
        uint8_t *regs;
        uint8_t *cmb;
        uint64_t cmb_size, cmb_bar_addr, cmb_lo; /* recognized CMB range: [cmb_lo, +size) */
        uint32_t nq;                             /* queue pairs including the admin pair */
        uint32_t vectors;                        /* MSI-X table size, 0: none */
        uint32_t lba_shift;
        uint64_t nsze;
        uint64_t mdts_bytes; /* 0: unlimited */
        uint64_t cap;
        uint32_t cc, csts, intm;
        bool ready, shutdown;
        bool queues_created;
        struct sq *sq;
        struct cq *cq;
        uint16_t *live; /* live I/O SQ ids in creation order */
        uint32_t nlive, rr;
        uint16_t *touched;
        uint32_t ntouched;
        uint32_t coalescing; /* CQs with unsignaled entries under coalescing */
        struct features feat;
        uint16_t aer[NAER];
        uint32_t naer;
        struct errent errlog[NERRLOG];
        uint64_t err_count;
        /* SMART counters */
        uint64_t units_read, units_written; /* 512-byte units */
        uint64_t host_reads, host_writes, busy_ns, on_ns, power_cycles, unsafe, media_errors;
        uint64_t last_now;
        bool last_io;
        uint64_t now;
        bool io_done;
        struct ntbf_sim_msix_pending irq;
        char sn[21];
        uint64_t hash;
        uint8_t *bounce;
        size_t bounce_size;
        uint64_t prp_ent[PAGE / 8];
        uint8_t scratch[PAGE];
};

/* ---- little helpers ----------------------------------------------------------------------- */

static uint32_t r32(const struct nvme *n, uint32_t off)
{
        return __atomic_load_n((uint32_t *)(void *)(n->regs + off), __ATOMIC_ACQUIRE);
}

static uint64_t r64(const struct nvme *n, uint32_t off)
{
        return __atomic_load_n((uint64_t *)(void *)(n->regs + off), __ATOMIC_ACQUIRE);
}

static void w32(struct nvme *n, uint32_t off, uint32_t v)
{
        __atomic_store_n((uint32_t *)(void *)(n->regs + off), v, __ATOMIC_RELEASE);
}

static void w64(struct nvme *n, uint32_t off, uint64_t v)
{
        __atomic_store_n((uint64_t *)(void *)(n->regs + off), v, __ATOMIC_RELEASE);
}

static void put(uint8_t *p, uint64_t v, unsigned len)
{
        for (unsigned i = 0; i < len; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

/* An ASCII field padded with spaces, as Identify requires. */
static void put_str(uint8_t *p, const char *s, size_t len)
{
        size_t k = strlen(s);
        memset(p, ' ', len);
        memcpy(p, s, k < len ? k : len);
}

static uint64_t fnv1a(uint64_t h, const char *s)
{
        for (; s && *s; s++)
                h = (h ^ (uint8_t)*s) * UINT64_C(0x100000001b3);
        return h;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
        return a < b ? a : b;
}

/* ---- memory: the CMB directly, everything else through the fabric ------------------------- */

static bool in_cmb(const struct nvme *n, uint64_t addr, uint64_t len, uint8_t **p)
{
        if (!n->cmb || addr < n->cmb_lo || addr - n->cmb_lo >= n->cmb_size ||
            len > n->cmb_size - (addr - n->cmb_lo))
                return false;
        *p = n->cmb + (addr - n->cmb_lo);
        return true;
}

static int mem_read(struct nvme *n, uint64_t addr, void *buf, size_t len)
{
        uint8_t *p;
        if (in_cmb(n, addr, len, &p)) {
                memcpy(buf, p, len);
                return 0;
        }
        return ntbf_sim_dma_read(&n->env, addr, buf, len);
}

static int mem_write(struct nvme *n, uint64_t addr, const void *buf, size_t len)
{
        uint8_t *p;
        if (in_cmb(n, addr, len, &p)) {
                memcpy(p, buf, len);
                return 0;
        }
        return ntbf_sim_dma_write(&n->env, addr, buf, len);
}

/* The dword holding the phase tag, published after the rest of the entry. */
static int mem_write_release32(struct nvme *n, uint64_t addr, uint32_t v)
{
        uint8_t *p;
        __atomic_thread_fence(__ATOMIC_RELEASE);
        if (in_cmb(n, addr, 4, &p) && !(addr & 3)) {
                __atomic_store_n((uint32_t *)(void *)p, v, __ATOMIC_RELEASE);
                return 0;
        }
        return mem_write(n, addr, &v, 4);
}

/* ---- PRPs --------------------------------------------------------------------------------- */

static void prp_init(struct prp *p, uint64_t prp1, uint64_t prp2, uint64_t len)
{
        *p = (struct prp){.prp1 = prp1, .prp2 = prp2, .left = len, .state = len ? 0 : PRP_DONE};
}

/* Next segment: 1 with addr and len set, 0 at the end, or -status. */
static int prp_next(struct nvme *n, struct prp *p, uint64_t *addr, uint64_t *len)
{
        switch (p->state) {
        case PRP_FIRST:
                if (p->prp1 & 3)
                        return -NTBF_NVME_SC_INVALID_PRP_OFFSET;
                *addr = p->prp1;
                *len = min64(p->left, PAGE - (p->prp1 & PAGE_MASK));
                p->left -= *len;
                if (!p->left) {
                        p->state = PRP_DONE;
                } else if (p->left <= PAGE) {
                        p->state = PRP_SECOND;
                } else {
                        if (p->prp2 & 3)
                                return -NTBF_NVME_SC_INVALID_PRP_OFFSET;
                        p->state = PRP_LIST;
                        p->list = p->prp2;
                        p->nent = p->ient = 0;
                }
                return 1;
        case PRP_SECOND:
                if (p->prp2 & PAGE_MASK)
                        return -NTBF_NVME_SC_INVALID_PRP_OFFSET;
                *addr = p->prp2;
                *len = p->left;
                p->left = 0;
                p->state = PRP_DONE;
                return 1;
        case PRP_LIST:
                while (p->ient == p->nent) {
                        /* Entries left in this list page; if more pages are needed than it
                         * holds, its last entry points to the next list page. */
                        uint32_t room = (uint32_t)((PAGE - (p->list & PAGE_MASK)) / 8);
                        uint64_t need = (p->left + PAGE - 1) / PAGE;
                        uint32_t take = need <= room ? (uint32_t)need : room;
                        if (!take || mem_read(n, p->list, n->prp_ent, (size_t)take * 8))
                                return -NTBF_NVME_SC_DATA_XFER_ERROR;
                        if (need > room) {
                                uint64_t next = n->prp_ent[room - 1];
                                if (next & PAGE_MASK)
                                        return -NTBF_NVME_SC_INVALID_PRP_OFFSET;
                                p->nent = room - 1;
                                p->list = next;
                        } else {
                                p->nent = take;
                        }
                        p->ient = 0;
                }
                *addr = n->prp_ent[p->ient++];
                if (*addr & PAGE_MASK)
                        return -NTBF_NVME_SC_INVALID_PRP_OFFSET;
                *len = min64(p->left, PAGE);
                p->left -= *len;
                if (!p->left)
                        p->state = PRP_DONE;
                return 1;
        default:
                return 0;
        }
}

/* The next run of contiguous memory of at most max bytes: 1, 0 at the end, or -status. */
static int cur_run(struct nvme *n, struct cursor *c, uint64_t max, uint64_t *addr, uint64_t *len)
{
        int r;
        if (!c->left) {
                r = prp_next(n, &c->p, &c->addr, &c->left);
                if (r <= 0)
                        return r;
        }
        uint64_t l = min64(c->left, max);
        *addr = c->addr;
        c->addr += l;
        c->left -= l;
        while (l < max && !c->left) {
                r = prp_next(n, &c->p, &c->addr, &c->left);
                if (r < 0)
                        return r;
                if (r == 0 || c->addr != *addr + l)
                        break;
                uint64_t k = min64(c->left, max - l);
                l += k;
                c->addr += k;
                c->left -= k;
        }
        *len = l;
        return 1;
}

/* Copy len bytes of buf (and zeros past buf_len) to the command's data buffer. */
static uint16_t xfer_out(struct nvme *n, const struct ntbf_nvme_sqe *s, const void *buf,
                         size_t buf_len, uint64_t len)
{
        struct cursor c = {.left = 0};
        prp_init(&c.p, s->prp1, s->prp2, len);
        uint64_t done = 0, addr, l;
        while (done < len) {
                int r = cur_run(n, &c, len - done, &addr, &l);
                if (r < 0)
                        return (uint16_t)-r;
                if (r == 0)
                        return NTBF_NVME_SC_INTERNAL;
                while (l) {
                        const void *src = (const uint8_t *)buf + done;
                        uint64_t k = l;
                        if (done >= buf_len) {
                                memset(n->bounce, 0, min64(l, n->bounce_size));
                                src = n->bounce;
                                k = min64(l, n->bounce_size);
                        } else {
                                k = min64(l, buf_len - done);
                        }
                        if (mem_write(n, addr, src, k))
                                return NTBF_NVME_SC_DATA_XFER_ERROR;
                        addr += k;
                        l -= k;
                        done += k;
                }
        }
        return 0;
}

/* ---- namespace file ----------------------------------------------------------------------- */

static int file_read(int fd, void *buf, size_t len, uint64_t pos)
{
        size_t got = 0;
        while (got < len) {
                ssize_t r = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(pos + got));
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                if (r == 0) {
                        /* Past the end of a short image: unwritten blocks read as zeros. */
                        memset((uint8_t *)buf + got, 0, len - got);
                        break;
                }
                got += (size_t)r;
        }
        return 0;
}

static int file_write(int fd, const void *buf, size_t len, uint64_t pos)
{
        size_t done = 0;
        while (done < len) {
                ssize_t r =
                    pwrite(fd, (const uint8_t *)buf + done, len - done, (off_t)(pos + done));
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return r < 0 ? -errno : -EIO;
                done += (size_t)r;
        }
        return 0;
}

static int file_sync(int fd)
{
        return fdatasync(fd) ? -errno : 0;
}

/* ---- errors, completions, interrupts ------------------------------------------------------ */

static bool dnr(uint16_t st)
{
        /* A transfer or internal error may go away on retry; the rest would fail again. */
        return st != NTBF_NVME_SC_DATA_XFER_ERROR && st != NTBF_NVME_SC_INTERNAL;
}

static uint16_t status_field(uint16_t st)
{
        if (!st)
                return 0;
        return (uint16_t)(NTBF_NVME_SC(st) << 1 | NTBF_NVME_SCT(st) << 9 |
                          (dnr(st) ? NTBF_NVME_STATUS_DNR : 0));
}

static void log_error(struct nvme *n, uint16_t sqid, uint16_t cid, uint16_t sf,
                      const struct result *r, uint32_t nsid)
{
        struct errent *e = &n->errlog[n->err_count % NERRLOG];
        *e = (struct errent){.count = ++n->err_count,
                             .lba = r->lba,
                             .nsid = nsid,
                             .sqid = sqid,
                             .cid = cid,
                             .status = sf,
                             .param = r->param};
}

static bool cq_full(struct nvme *n, uint16_t cqid)
{
        struct cq *c = &n->cq[cqid];
        if ((c->tail + 1) % c->size != c->head)
                return false;
        /* Looks full: take the host's latest head (an invalid value is ignored). */
        uint32_t h = r32(n, NTBF_NVME_CQ_HDBL(cqid));
        if (h < c->size)
                c->head = h;
        return (c->tail + 1) % c->size == c->head;
}

static void post(struct nvme *n, uint16_t sqid, uint16_t cid, const struct result *r, uint32_t nsid)
{
        struct sq *s = &n->sq[sqid];
        struct cq *c = &n->cq[s->cqid];
        uint16_t sf = status_field(r->status);
        if (r->status)
                log_error(n, sqid, cid, (uint16_t)(sf | c->phase), r, nsid);
        struct ntbf_nvme_cqe e = {.dw0 = r->dw0, .sqhd = (uint16_t)s->head, .sqid = sqid};
        uint64_t addr = c->base + (uint64_t)c->tail * sizeof(e);
        uint32_t dw3 = cid | (uint32_t)(sf | c->phase) << 16;
        /* A lost completion write is lost as a posted write would be: nothing to tell. */
        if (!mem_write(n, addr, &e, 12))
                mem_write_release32(n, addr + 12, dw3);
        if (++c->tail == c->size) {
                c->tail = 0;
                c->phase = !c->phase;
        }
        c->unsignaled++;
        if (!c->touched && n->ntouched < n->nq) {
                c->touched = true;
                n->touched[n->ntouched++] = s->cqid;
        }
}

static int signal_cq(struct nvme *n, uint16_t cqid)
{
        struct cq *c = &n->cq[cqid];
        if (c->first_ns)
                n->coalescing--;
        c->unsignaled = 0;
        c->first_ns = 0;
        if (!c->ien)
                return 0;
        return ntbf_sim_msix_signal(&n->env, &n->irq, c->iv) == 1;
}

/* After a round: interrupt for each CQ that got entries, unless coalescing holds it back. */
static int interrupts(struct nvme *n)
{
        int sent = 0;
        uint32_t thr = n->feat.coalesce & 0xff;
        for (uint32_t i = 0; i < n->ntouched; i++) {
                uint16_t q = n->touched[i];
                struct cq *c = &n->cq[q];
                c->touched = false;
                if (!c->live || !c->unsignaled)
                        continue;
                bool coalesce =
                    q != 0 && c->ien && thr && c->iv < NTBF_NVME_MSIX_MAX && !n->feat.iv_cd[c->iv];
                if (!coalesce || c->unsignaled >= thr + 1) {
                        sent += signal_cq(n, q);
                } else if (!c->first_ns) {
                        c->first_ns = n->now ? n->now : 1;
                        n->coalescing++;
                }
        }
        n->ntouched = 0;
        return sent;
}

/* Coalescing time limit (TIME, in 100 us units) of CQs holding entries back. */
static int coalesce_timers(struct nvme *n)
{
        if (!n->coalescing)
                return 0;
        uint64_t limit = ((n->feat.coalesce >> 8) & 0xff) * UINT64_C(100000);
        int sent = 0;
        for (uint32_t q = 1; q < n->nq && n->coalescing; q++) {
                struct cq *c = &n->cq[q];
                if (c->live && c->first_ns && n->now - c->first_ns >= limit)
                        sent += signal_cq(n, (uint16_t)q);
        }
        return sent;
}

/* ---- controller state --------------------------------------------------------------------- */

static void features_default(const struct nvme *n, struct features *f)
{
        memset(f, 0, sizeof(*f));
        f->arbitration = NTBF_NVME_RAB;
        f->temp_over = WCTEMP_K;
        f->wce = 1;
        f->nsqa = f->ncqa = n->nq - 1;
}

static void queues_reset(struct nvme *n)
{
        for (uint32_t q = 0; q < n->nq; q++) {
                n->sq[q] = (struct sq){0};
                n->cq[q] = (struct cq){0};
                w32(n, NTBF_NVME_SQ_TDBL(q), 0);
                w32(n, NTBF_NVME_CQ_HDBL(q), 0);
        }
        n->nlive = n->rr = n->ntouched = n->coalescing = 0;
        n->naer = 0;
        n->queues_created = false;
}

/* Controller reset (CC.EN 1 -> 0): queues and features go, AQA/ASQ/ACQ stay. */
static void controller_reset(struct nvme *n)
{
        queues_reset(n);
        features_default(n, &n->feat);
        n->ready = false;
        n->shutdown = false;
        n->csts = 0;
}

/* Power-on values of the registers the controller owns. */
static void publish_ro(struct nvme *n)
{
        uint64_t cmbmsc = n->cmb ? r64(n, NTBF_NVME_REG_CMBMSC) : 0;
        bool cre = cmbmsc & NTBF_NVME_CMBMSC_CRE;
        uint32_t cmbloc = 0, cmbsz = 0;
        if (n->cmb && cre) {
                uint32_t szu = 0;
                while (szu < 6 && (n->cmb_size >> (12 + 4 * szu)) >= (1u << 20))
                        szu++;
                cmbloc = 2; /* BIR 2, offset 0 */
                cmbsz = 0x1f | szu << 8 | (uint32_t)(n->cmb_size >> (12 + 4 * szu)) << 12;
        }
        if (r64(n, NTBF_NVME_REG_CAP) != n->cap)
                w64(n, NTBF_NVME_REG_CAP, n->cap);
        if (r32(n, NTBF_NVME_REG_VS) != NTBF_NVME_VS)
                w32(n, NTBF_NVME_REG_VS, NTBF_NVME_VS);
        if (r32(n, NTBF_NVME_REG_CSTS) != n->csts)
                w32(n, NTBF_NVME_REG_CSTS, n->csts);
        if (r32(n, NTBF_NVME_REG_NSSR))
                w32(n, NTBF_NVME_REG_NSSR, 0);
        if (r32(n, NTBF_NVME_REG_CMBLOC) != cmbloc)
                w32(n, NTBF_NVME_REG_CMBLOC, cmbloc);
        if (r32(n, NTBF_NVME_REG_CMBSZ) != cmbsz)
                w32(n, NTBF_NVME_REG_CMBSZ, cmbsz);
        if (r32(n, NTBF_NVME_REG_CMBSTS))
                w32(n, NTBF_NVME_REG_CMBSTS, 0);
        /* INTMS/INTMC: a written value differs from what the controller published. */
        uint32_t ms = r32(n, NTBF_NVME_REG_INTMS), mc = r32(n, NTBF_NVME_REG_INTMC);
        if (ms != n->intm || mc) {
                if (ms != n->intm)
                        n->intm |= ms;
                n->intm &= ~mc;
                w32(n, NTBF_NVME_REG_INTMS, n->intm);
                w32(n, NTBF_NVME_REG_INTMC, 0);
        }
        if (n->cmb)
                n->cmb_lo =
                    (cmbmsc & NTBF_NVME_CMBMSC_CMSE) ? cmbmsc & ~UINT64_C(0xfff) : n->cmb_bar_addr;
}

static void regs_power_on(struct nvme *n)
{
        memset(n->regs, 0, NTBF_NVME_MSIX_TABLE);
        n->cc = n->csts = n->intm = 0;
        publish_ro(n);
}

static void enable(struct nvme *n)
{
        uint32_t cc = n->cc, aqa = r32(n, NTBF_NVME_REG_AQA);
        uint32_t asqs = (aqa & 0xfff) + 1, acqs = ((aqa >> 16) & 0xfff) + 1;
        if (NTBF_NVME_CC_CSS(cc) != 0 || NTBF_NVME_CC_MPS(cc) != 0 || NTBF_NVME_CC_AMS(cc) != 0 ||
            asqs < 2 || acqs < 2) {
                n->csts |= NTBF_NVME_CSTS_CFS;
                return;
        }
        n->sq[0] = (struct sq){.base = r64(n, NTBF_NVME_REG_ASQ) & ~(uint64_t)PAGE_MASK,
                               .size = asqs,
                               .cqid = 0,
                               .live = true};
        n->cq[0] = (struct cq){.base = r64(n, NTBF_NVME_REG_ACQ) & ~(uint64_t)PAGE_MASK,
                               .size = acqs,
                               .ien = true,
                               .phase = true,
                               .live = true,
                               .nsq = 1};
        n->ready = true;
        n->csts |= NTBF_NVME_CSTS_RDY;
}

/* React to CC writes. Returns 1 if something changed. */
static int handle_cc(struct nvme *n)
{
        uint32_t cc = r32(n, NTBF_NVME_REG_CC), old = n->cc;
        if (cc == old)
                return 0;
        n->cc = cc;
        if ((old & NTBF_NVME_CC_EN) && !(cc & NTBF_NVME_CC_EN))
                controller_reset(n);
        else if (!(old & NTBF_NVME_CC_EN) && (cc & NTBF_NVME_CC_EN) &&
                 !(n->csts & NTBF_NVME_CSTS_CFS))
                enable(n);
        uint32_t shn = NTBF_NVME_CC_SHN(cc), oshn = NTBF_NVME_CC_SHN(old);
        if (shn && !oshn) {
                /* Shutdown: make everything written durable, then report completion. */
                file_sync(n->env.backing_fd);
                n->shutdown = true;
                n->csts = (n->csts & ~NTBF_NVME_CSTS_SHST_MASK) | NTBF_NVME_CSTS_SHST_DONE;
        } else if (!shn && oshn) {
                n->shutdown = false;
                n->csts &= ~NTBF_NVME_CSTS_SHST_MASK;
        }
        w32(n, NTBF_NVME_REG_CSTS, n->csts);
        return 1;
}

/* ---- admin commands ----------------------------------------------------------------------- */

static uint64_t admin_max(const struct nvme *n)
{
        return n->mdts_bytes ? n->mdts_bytes : ADMIN_MAX_XFER;
}

static struct result ok(uint32_t dw0)
{
        return (struct result){.status = 0, .param = 0xffff, .dw0 = dw0};
}

static struct result err(uint16_t st, uint16_t param)
{
        return (struct result){.status = st, .param = param};
}

static struct result xfer_result(uint16_t st)
{
        return st ? err(st, st == NTBF_NVME_SC_DATA_XFER_ERROR ? 0xffff : 24) : ok(0);
}

static void identify_ctrl(struct nvme *n, uint8_t *d)
{
        const struct ntbf_device *desc = n->env.desc;
        put(d + NTBF_NVME_IDC_VID, desc->vendor_id, 2);
        put(d + NTBF_NVME_IDC_SSVID, NTBF_SIM_VENDOR_ID, 2);
        put_str(d + NTBF_NVME_IDC_SN, n->sn, 20);
        put_str(d + NTBF_NVME_IDC_MN, NTBF_NVME_MN, 40);
        put_str(d + NTBF_NVME_IDC_FR, NTBF_NVME_FR, 8);
        d[NTBF_NVME_IDC_RAB] = NTBF_NVME_RAB;
        d[NTBF_NVME_IDC_MDTS] = (uint8_t)desc->sim.mdts;
        put(d + NTBF_NVME_IDC_CNTLID, n->env.function, 2);
        put(d + NTBF_NVME_IDC_VER, NTBF_NVME_VS, 4);
        d[NTBF_NVME_IDC_CNTRLTYPE] = 1; /* I/O controller */
        d[NTBF_NVME_IDC_ACL] = NTBF_NVME_ACL;
        d[NTBF_NVME_IDC_AERL] = NTBF_NVME_AERL;
        d[NTBF_NVME_IDC_FRMW] = 0x03; /* one slot, slot 1 read-only */
        d[NTBF_NVME_IDC_LPA] = 0x04;  /* extended Get Log Page (NUMDU, offsets) */
        d[NTBF_NVME_IDC_ELPE] = NTBF_NVME_ELPE;
        d[NTBF_NVME_IDC_NPSS] = 0;
        put(d + NTBF_NVME_IDC_WCTEMP, WCTEMP_K, 2);
        put(d + NTBF_NVME_IDC_CCTEMP, CCTEMP_K, 2);
        d[NTBF_NVME_IDC_SQES] = 0x66;
        d[NTBF_NVME_IDC_CQES] = 0x44;
        put(d + NTBF_NVME_IDC_NN, 1, 4);
        put(d + NTBF_NVME_IDC_ONCS, NTBF_NVME_ONCS_WRITE_ZEROES, 2);
        d[NTBF_NVME_IDC_VWC] = 0x01;
        d[NTBF_NVME_IDC_NVSCC] = 1;
        snprintf((char *)d + NTBF_NVME_IDC_SUBNQN, 256, "nqn.2026-01.io.ntbfab:sim:%s.%s.%u",
                 n->env.node_name ? n->env.node_name : "", desc->name, n->env.function);
        put(d + NTBF_NVME_IDC_PSD0, 900, 2); /* max power 9.00 W */
}

static void identify_ns(struct nvme *n, uint8_t *d)
{
        put(d + NTBF_NVME_IDNS_NSZE, n->nsze, 8);
        put(d + NTBF_NVME_IDNS_NCAP, n->nsze, 8);
        put(d + NTBF_NVME_IDNS_NUSE, n->nsze, 8);
        /* Write Zeroes deallocates (punches a hole); deallocated blocks read as zeros. */
        d[NTBF_NVME_IDNS_DLFEAT] = 0x09;
        put(d + NTBF_NVME_IDNS_NVMCAP, n->nsze << n->lba_shift, 8);
        put(d + NTBF_NVME_IDNS_NGUID, n->hash, 8);
        put(d + NTBF_NVME_IDNS_NGUID + 8, fnv1a(n->hash, "ns1"), 8);
        put(d + NTBF_NVME_IDNS_LBAF0, (uint32_t)n->lba_shift << 16, 4);
}

static struct result adm_identify(struct nvme *n, const struct ntbf_nvme_sqe *s)
{
        uint8_t *d = n->scratch;
        memset(d, 0, PAGE);
        switch (s->cdw10 & 0xff) {
        case NTBF_NVME_CNS_NS:
                if (s->nsid != 1)
                        return err(NTBF_NVME_SC_INVALID_NS, 4);
                identify_ns(n, d);
                break;
        case NTBF_NVME_CNS_CTRL:
                identify_ctrl(n, d);
                break;
        case NTBF_NVME_CNS_ACTIVE_NS:
                if (s->nsid >= 0xfffffffe)
                        return err(NTBF_NVME_SC_INVALID_NS, 4);
                if (s->nsid < 1)
                        put(d, 1, 4);
                break;
        case NTBF_NVME_CNS_NS_DESC:
                if (s->nsid != 1)
                        return err(NTBF_NVME_SC_INVALID_NS, 4);
                d[0] = 2;  /* NGUID */
                d[1] = 16; /* length */
                put(d + 4, n->hash, 8);
                put(d + 12, fnv1a(n->hash, "ns1"), 8);
                break;
        default:
                return err(NTBF_NVME_SC_INVALID_FIELD, 40);
        }
        return xfer_result(xfer_out(n, s, d, PAGE, PAGE));
}

static struct result adm_create_cq(struct nvme *n, const struct ntbf_nvme_sqe *s)
{
        uint32_t qid = s->cdw10 & 0xffff, qsize = s->cdw10 >> 16;
        uint32_t iv = s->cdw11 >> 16;
        if (!qid || qid > n->feat.ncqa || n->cq[qid].live)
                return err(NTBF_NVME_SC_INVALID_QID, 40);
        if (!qsize || qsize > NTBF_NVME_MQES)
                return err(NTBF_NVME_SC_INVALID_QSIZE, 42);
        if (!(s->cdw11 & 1))
                return err(NTBF_NVME_SC_INVALID_FIELD, 44);
        if (n->vectors ? iv >= n->vectors : iv != 0)
                return err(NTBF_NVME_SC_INVALID_IV, 46);
        if (s->prp1 & PAGE_MASK)
                return err(NTBF_NVME_SC_INVALID_PRP_OFFSET, 24);
        if (NTBF_NVME_CC_IOCQES(n->cc) != 4)
                return err(NTBF_NVME_SC_INVALID_FIELD, 0xffff);
        n->cq[qid] = (struct cq){.base = s->prp1,
                                 .size = qsize + 1,
                                 .iv = (uint16_t)iv,
                                 .ien = (s->cdw11 >> 1) & 1,
                                 .phase = true,
                                 .live = true};
        w32(n, NTBF_NVME_CQ_HDBL(qid), 0);
        n->queues_created = true;
        return ok(0);
}

static struct result adm_create_sq(struct nvme *n, const struct ntbf_nvme_sqe *s)
{
        uint32_t qid = s->cdw10 & 0xffff, qsize = s->cdw10 >> 16;
        uint32_t cqid = s->cdw11 >> 16;
        if (!qid || qid > n->feat.nsqa || n->sq[qid].live)
                return err(NTBF_NVME_SC_INVALID_QID, 40);
        if (!qsize || qsize > NTBF_NVME_MQES)
                return err(NTBF_NVME_SC_INVALID_QSIZE, 42);
        if (!(s->cdw11 & 1))
                return err(NTBF_NVME_SC_INVALID_FIELD, 44);
        if (!cqid || cqid >= n->nq || !n->cq[cqid].live)
                return err(NTBF_NVME_SC_CQ_INVALID, 46);
        if (s->prp1 & PAGE_MASK)
                return err(NTBF_NVME_SC_INVALID_PRP_OFFSET, 24);
        if (NTBF_NVME_CC_IOSQES(n->cc) != 6)
                return err(NTBF_NVME_SC_INVALID_FIELD, 0xffff);
        n->sq[qid] =
            (struct sq){.base = s->prp1, .size = qsize + 1, .cqid = (uint16_t)cqid, .live = true};
        n->cq[cqid].nsq++;
        n->live[n->nlive++] = (uint16_t)qid;
        w32(n, NTBF_NVME_SQ_TDBL(qid), 0);
        n->queues_created = true;
        return ok(0);
}

static struct result adm_delete_sq(struct nvme *n, const struct ntbf_nvme_sqe *s)
{
        uint32_t qid = s->cdw10 & 0xffff;
        if (!qid || qid >= n->nq || !n->sq[qid].live)
                return err(NTBF_NVME_SC_INVALID_QID, 40);
        n->cq[n->sq[qid].cqid].nsq--;
        n->sq[qid] = (struct sq){0};
        for (uint32_t i = 0; i < n->nlive; i++) {
                if (n->live[i] == qid) {
                        memmove(&n->live[i], &n->live[i + 1],
                                (n->nlive - i - 1) * sizeof(n->live[0]));
                        n->nlive--;
                        break;
                }
        }
        if (n->rr >= n->nlive)
                n->rr = 0;
        return ok(0);
}

static struct result adm_delete_cq(struct nvme *n, const struct ntbf_nvme_sqe *s)
{
        uint32_t qid = s->cdw10 & 0xffff;
        if (!qid || qid >= n->nq || !n->cq[qid].live)
                return err(NTBF_NVME_SC_INVALID_QID, 40);
        if (n->cq[qid].nsq)
                return err(NTBF_NVME_SC_INVALID_QUEUE_DELETION, 40);
        if (n->cq[qid].first_ns)
                n->coalescing--;
        n->cq[qid] = (struct cq){0};
        return ok(0);
}

static void put128(uint8_t *p, uint64_t v)
{
        put(p, v, 8);
        memset(p + 8, 0, 8);
}

static size_t log_smart(struct nvme *n, uint8_t *d)
{
        uint8_t warn = 0;
        if (TEMP_K >= n->feat.temp_over || (n->feat.temp_under && TEMP_K < n->feat.temp_under))
                warn |= 0x02;
        d[NTBF_NVME_SMART_CRIT_WARN] = warn;
        put(d + NTBF_NVME_SMART_TEMP, TEMP_K, 2);
        d[NTBF_NVME_SMART_AVAIL_SPARE] = 100;
        d[NTBF_NVME_SMART_SPARE_THRESH] = 10;
        d[NTBF_NVME_SMART_PCT_USED] = 0;
        /* Data units are thousands of 512-byte units, rounded up. */
        put128(d + NTBF_NVME_SMART_DATA_READ, (n->units_read + 999) / 1000);
        put128(d + NTBF_NVME_SMART_DATA_WRITTEN, (n->units_written + 999) / 1000);
        put128(d + NTBF_NVME_SMART_HOST_READS, n->host_reads);
        put128(d + NTBF_NVME_SMART_HOST_WRITES, n->host_writes);
        put128(d + NTBF_NVME_SMART_BUSY_TIME, n->busy_ns / UINT64_C(60000000000));
        put128(d + NTBF_NVME_SMART_POWER_CYCLES, n->power_cycles);
        put128(d + NTBF_NVME_SMART_POWER_ON_HOURS, n->on_ns / UINT64_C(3600000000000));
        put128(d + NTBF_NVME_SMART_UNSAFE_SHUTDOWNS, n->unsafe);
        put128(d + NTBF_NVME_SMART_MEDIA_ERRORS, n->media_errors);
        put128(d + NTBF_NVME_SMART_ERROR_ENTRIES, n->err_count);
        return NTBF_NVME_SMART_SIZE;
}

static size_t log_errors(struct nvme *n, uint8_t *d)
{
        uint64_t have = min64(n->err_count, NERRLOG);
        for (uint64_t i = 0; i < have; i++) {
                const struct errent *e = &n->errlog[(n->err_count - 1 - i) % NERRLOG];
                uint8_t *p = d + i * NTBF_NVME_ERROR_ENTRY;
                put(p + NTBF_NVME_ERR_COUNT, e->count, 8);
                put(p + NTBF_NVME_ERR_SQID, e->sqid, 2);
                put(p + NTBF_NVME_ERR_CID, e->cid, 2);
                put(p + NTBF_NVME_ERR_STATUS, e->status, 2);
                put(p + NTBF_NVME_ERR_PARAM, e->param, 2);
                put(p + NTBF_NVME_ERR_LBA, e->lba, 8);
                put(p + NTBF_NVME_ERR_NSID, e->nsid, 4);
        }
        return NERRLOG * NTBF_NVME_ERROR_ENTRY;
}

static struct result adm_get_log(struct nvme *n, const struct ntbf_nvme_sqe *s)
{
        uint32_t lid = s->cdw10 & 0xff;
        uint64_t numd = ((s->cdw10 >> 16) | (uint64_t)(s->cdw11 & 0xffff) << 16) + 1;
        uint64_t len = numd * 4, off = s->cdw12 | (uint64_t)s->cdw13 << 32;
        uint8_t *d = n->scratch;
        size_t size;
        memset(d, 0, PAGE);
        switch (lid) {
        case NTBF_NVME_LOG_ERROR:
                size = log_errors(n, d);
                break;
        case NTBF_NVME_LOG_SMART:
                if (s->nsid != 0 && s->nsid != 0xffffffff)
                        return err(NTBF_NVME_SC_INVALID_FIELD, 4);
                size = log_smart(n, d);
                break;
        case NTBF_NVME_LOG_FW_SLOT:
                d[0] = 1; /* slot 1 active */
                put_str(d + 8, NTBF_NVME_FR, 8);
                size = NTBF_NVME_FW_SLOT_SIZE;
                break;
        default:
                return err(NTBF_NVME_SC_INVALID_LOG_PAGE, 40);
        }
        if ((off & 3) || off > size)
                return err(NTBF_NVME_SC_INVALID_FIELD, 48);
        if (len > admin_max(n))
                return err(NTBF_NVME_SC_INVALID_FIELD, 42);
        return xfer_result(xfer_out(n, s, d + off, size - off, len));
}

static struct result adm_set_features(struct nvme *n, const struct ntbf_nvme_sqe *s)
{
        uint32_t fid = s->cdw10 & 0xff, v = s->cdw11;
        struct features *f = &n->feat;
        if (s->cdw10 >> 31)
                return err(NTBF_NVME_SC_FEATURE_NOT_SAVEABLE, 43);
        switch (fid) {
        case NTBF_NVME_FEAT_ARBITRATION:
                f->arbitration = v;
                return ok(0);
        case NTBF_NVME_FEAT_POWER_MGMT:
                if (v & 0x1f)
                        return err(NTBF_NVME_SC_INVALID_FIELD, 44);
                f->power = v & 0xff;
                return ok(0);
        case NTBF_NVME_FEAT_TEMP_THRESH: {
                uint32_t sel = (v >> 16) & 0xf, th = (v >> 20) & 0x3;
                if (sel != 0 || th > 1)
                        return err(NTBF_NVME_SC_INVALID_FIELD, 46);
                if (th == 0)
                        f->temp_over = v & 0xffff;
                else
                        f->temp_under = v & 0xffff;
                return ok(0);
        }
        case NTBF_NVME_FEAT_ERR_RECOVERY:
                if (v & (1u << 16)) /* DULBE needs NSFEAT bit 2, which is 0 */
                        return err(NTBF_NVME_SC_INVALID_FIELD, 46);
                f->err_recovery = v & 0xffff;
                return ok(0);
        case NTBF_NVME_FEAT_VOLATILE_WC:
                if (f->wce && !(v & 1) && file_sync(n->env.backing_fd))
                        return err(NTBF_NVME_SC_WRITE_FAULT, 0xffff);
                f->wce = v & 1;
                return ok(0);
        case NTBF_NVME_FEAT_NUM_QUEUES: {
                uint32_t nsqr = v & 0xffff, ncqr = v >> 16, max = n->nq - 1;
                if (nsqr == 0xffff || ncqr == 0xffff)
                        return err(NTBF_NVME_SC_INVALID_FIELD, 44);
                if (n->queues_created)
                        return err(NTBF_NVME_SC_CMD_SEQ_ERROR, 0xffff);
                f->nsqa = nsqr + 1 < max ? nsqr + 1 : max;
                f->ncqa = ncqr + 1 < max ? ncqr + 1 : max;
                return ok((f->nsqa - 1) | (f->ncqa - 1) << 16);
        }
        case NTBF_NVME_FEAT_IRQ_COALESCE:
                f->coalesce = v & 0xffff;
                return ok(0);
        case NTBF_NVME_FEAT_IRQ_CONFIG: {
                uint32_t iv = v & 0xffff;
                if (n->vectors ? iv >= n->vectors : iv != 0)
                        return err(NTBF_NVME_SC_INVALID_FIELD, 44);
                f->iv_cd[iv] = (v >> 16) & 1;
                return ok(0);
        }
        case NTBF_NVME_FEAT_WRITE_ATOMIC:
                f->write_atomic = v & 1;
                return ok(0);
        case NTBF_NVME_FEAT_ASYNC_EVENT:
                f->async_event = v;
                return ok(0);
        default:
                return err(NTBF_NVME_SC_INVALID_FIELD, 40);
        }
}

static struct result adm_get_features(struct nvme *n, const struct ntbf_nvme_sqe *s)
{
        uint32_t fid = s->cdw10 & 0xff, sel = (s->cdw10 >> 8) & 0x7;
        struct features def, *f = &n->feat;
        if (sel > 3)
                return err(NTBF_NVME_SC_INVALID_FIELD, 41);
        if (sel == 1 || sel == 2) {
                /* Nothing is saveable, so the saved value is the default. */
                features_default(n, &def);
                f = &def;
        }
        switch (fid) {
        case NTBF_NVME_FEAT_ARBITRATION:
        case NTBF_NVME_FEAT_POWER_MGMT:
        case NTBF_NVME_FEAT_TEMP_THRESH:
        case NTBF_NVME_FEAT_ERR_RECOVERY:
        case NTBF_NVME_FEAT_VOLATILE_WC:
        case NTBF_NVME_FEAT_NUM_QUEUES:
        case NTBF_NVME_FEAT_IRQ_COALESCE:
        case NTBF_NVME_FEAT_IRQ_CONFIG:
        case NTBF_NVME_FEAT_WRITE_ATOMIC:
        case NTBF_NVME_FEAT_ASYNC_EVENT:
                break;
        default:
                return err(NTBF_NVME_SC_INVALID_FIELD, 40);
        }
        if (sel == 3)
                return ok(0x4); /* changeable, not saveable, not namespace specific */
        switch (fid) {
        case NTBF_NVME_FEAT_ARBITRATION:
                return ok(f->arbitration);
        case NTBF_NVME_FEAT_POWER_MGMT:
                return ok(f->power);
        case NTBF_NVME_FEAT_TEMP_THRESH: {
                uint32_t v = s->cdw11, tsel = (v >> 16) & 0xf, th = (v >> 20) & 0x3;
                if (tsel != 0 || th > 1)
                        return err(NTBF_NVME_SC_INVALID_FIELD, 46);
                return ok(th == 0 ? f->temp_over : f->temp_under);
        }
        case NTBF_NVME_FEAT_ERR_RECOVERY:
                return ok(f->err_recovery);
        case NTBF_NVME_FEAT_VOLATILE_WC:
                return ok(f->wce);
        case NTBF_NVME_FEAT_NUM_QUEUES:
                return ok((f->nsqa - 1) | (f->ncqa - 1) << 16);
        case NTBF_NVME_FEAT_IRQ_COALESCE:
                return ok(f->coalesce);
        case NTBF_NVME_FEAT_IRQ_CONFIG: {
                uint32_t iv = s->cdw11 & 0xffff;
                if (n->vectors ? iv >= n->vectors : iv != 0)
                        return err(NTBF_NVME_SC_INVALID_FIELD, 44);
                return ok(iv | (uint32_t)f->iv_cd[iv] << 16);
        }
        case NTBF_NVME_FEAT_WRITE_ATOMIC:
                return ok(f->write_atomic);
        default:
                return ok(f->async_event);
        }
}

static struct result admin(struct nvme *n, const struct ntbf_nvme_sqe *s)
{
        switch (s->opc) {
        case NTBF_NVME_ADM_DELETE_SQ:
                return adm_delete_sq(n, s);
        case NTBF_NVME_ADM_CREATE_SQ:
                return adm_create_sq(n, s);
        case NTBF_NVME_ADM_GET_LOG_PAGE:
                return adm_get_log(n, s);
        case NTBF_NVME_ADM_DELETE_CQ:
                return adm_delete_cq(n, s);
        case NTBF_NVME_ADM_CREATE_CQ:
                return adm_create_cq(n, s);
        case NTBF_NVME_ADM_IDENTIFY:
                return adm_identify(n, s);
        case NTBF_NVME_ADM_ABORT:
                return ok(1); /* not aborted: every command completes within its poll */
        case NTBF_NVME_ADM_SET_FEATURES:
                return adm_set_features(n, s);
        case NTBF_NVME_ADM_GET_FEATURES:
                return adm_get_features(n, s);
        case NTBF_NVME_ADM_ASYNC_EVENT:
                if (n->naer >= NAER)
                        return err(NTBF_NVME_SC_AER_LIMIT, 0xffff);
                n->aer[n->naer++] = s->cid;
                return (struct result){.hold = true};
        default:
                return err(NTBF_NVME_SC_INVALID_OPCODE, 0);
        }
}

/* ---- I/O commands ------------------------------------------------------------------------- */

static uint16_t media_error(struct nvme *n, uint16_t st)
{
        n->media_errors++;
        return st;
}

/* Read: from the namespace file through the bounce buffer to host memory, a buffer at a time. */
static uint16_t do_read(struct nvme *n, const struct ntbf_nvme_sqe *s, uint64_t pos, uint64_t len)
{
        struct cursor c = {.left = 0};
        prp_init(&c.p, s->prp1, s->prp2, len);
        while (len) {
                uint64_t chunk = min64(len, n->bounce_size), done = 0, addr, l;
                if (file_read(n->env.backing_fd, n->bounce, chunk, pos))
                        return media_error(n, NTBF_NVME_SC_UNRECOVERED_READ);
                while (done < chunk) {
                        int r = cur_run(n, &c, chunk - done, &addr, &l);
                        if (r <= 0)
                                return r ? (uint16_t)-r : NTBF_NVME_SC_INTERNAL;
                        if (mem_write(n, addr, n->bounce + done, l))
                                return NTBF_NVME_SC_DATA_XFER_ERROR;
                        done += l;
                }
                pos += chunk;
                len -= chunk;
        }
        return 0;
}

/* Write: host memory -> bounce -> namespace file. */
static uint16_t do_write(struct nvme *n, const struct ntbf_nvme_sqe *s, uint64_t pos, uint64_t len)
{
        struct cursor c = {.left = 0};
        prp_init(&c.p, s->prp1, s->prp2, len);
        while (len) {
                uint64_t chunk = min64(len, n->bounce_size), done = 0, addr, l;
                while (done < chunk) {
                        int r = cur_run(n, &c, chunk - done, &addr, &l);
                        if (r <= 0)
                                return r ? (uint16_t)-r : NTBF_NVME_SC_INTERNAL;
                        if (mem_read(n, addr, n->bounce + done, l))
                                return NTBF_NVME_SC_DATA_XFER_ERROR;
                        done += l;
                }
                if (file_write(n->env.backing_fd, n->bounce, chunk, pos))
                        return media_error(n, NTBF_NVME_SC_WRITE_FAULT);
                pos += chunk;
                len -= chunk;
        }
        return 0;
}

static uint16_t do_write_zeroes(struct nvme *n, uint64_t pos, uint64_t len)
{
        int fd = n->env.backing_fd;
        if (!fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)pos, (off_t)len))
                return 0;
        memset(n->bounce, 0, n->bounce_size);
        while (len) {
                uint64_t k = min64(len, n->bounce_size);
                if (file_write(fd, n->bounce, k, pos))
                        return media_error(n, NTBF_NVME_SC_WRITE_FAULT);
                pos += k;
                len -= k;
        }
        return 0;
}

static struct result io(struct nvme *n, const struct ntbf_nvme_sqe *s)
{
        struct result r = ok(0);
        uint8_t opc = s->opc;
        if (opc != NTBF_NVME_CMD_FLUSH && opc != NTBF_NVME_CMD_WRITE && opc != NTBF_NVME_CMD_READ &&
            opc != NTBF_NVME_CMD_WRITE_ZEROES)
                return err(NTBF_NVME_SC_INVALID_OPCODE, 0);
        if (s->nsid != 1 && !(opc == NTBF_NVME_CMD_FLUSH && s->nsid == 0xffffffff))
                return err(NTBF_NVME_SC_INVALID_NS, 4);
        if (opc == NTBF_NVME_CMD_FLUSH) {
                if (file_sync(n->env.backing_fd))
                        return err(media_error(n, NTBF_NVME_SC_WRITE_FAULT), 0xffff);
                return r;
        }
        uint64_t slba = s->cdw10 | (uint64_t)s->cdw11 << 32;
        uint64_t nlb = (s->cdw12 & 0xffff) + 1;
        uint64_t pos = slba << n->lba_shift, len = nlb << n->lba_shift;
        r.lba = slba;
        if (opc != NTBF_NVME_CMD_WRITE_ZEROES && n->mdts_bytes && len > n->mdts_bytes) {
                r.status = NTBF_NVME_SC_INVALID_FIELD;
                r.param = 48;
                return r;
        }
        if (slba >= n->nsze || nlb > n->nsze - slba) {
                r.status = NTBF_NVME_SC_LBA_RANGE;
                r.param = 40;
                return r;
        }
        bool durable = (s->cdw12 & NTBF_NVME_RW_FUA) || !n->feat.wce;
        switch (opc) {
        case NTBF_NVME_CMD_READ:
                r.status = do_read(n, s, pos, len);
                if (!r.status) {
                        n->host_reads++;
                        n->units_read += len >> 9;
                }
                break;
        case NTBF_NVME_CMD_WRITE:
                r.status = do_write(n, s, pos, len);
                if (!r.status && durable && file_sync(n->env.backing_fd))
                        r.status = media_error(n, NTBF_NVME_SC_WRITE_FAULT);
                if (!r.status) {
                        n->host_writes++;
                        n->units_written += len >> 9;
                }
                break;
        default:
                r.status = do_write_zeroes(n, pos, len);
                if (!r.status && durable && file_sync(n->env.backing_fd))
                        r.status = media_error(n, NTBF_NVME_SC_WRITE_FAULT);
                break;
        }
        if (r.status == NTBF_NVME_SC_INVALID_PRP_OFFSET)
                r.param = 24;
        return r;
}

/* ---- arbitration -------------------------------------------------------------------------- */

static struct result execute(struct nvme *n, uint16_t qid, const struct ntbf_nvme_sqe *s)
{
        /* Fused operations and SGLs are not supported. */
        if (s->flags & 0xc3)
                return err(NTBF_NVME_SC_INVALID_FIELD, 1);
        if (qid == 0)
                return admin(n, s);
        n->io_done = true;
        return io(n, s);
}

static uint32_t burst(const struct nvme *n)
{
        uint32_t ab = n->feat.arbitration & 0x7;
        return ab == 7 ? UINT32_MAX : 1u << ab;
}

/* Up to one burst of commands of SQ qid. Returns the number processed. */
static int process_sq(struct nvme *n, uint16_t qid)
{
        struct sq *s = &n->sq[qid];
        uint32_t tail = r32(n, NTBF_NVME_SQ_TDBL(qid));
        /* An invalid doorbell value is ignored (the spec's asynchronous error, not raised). */
        if (tail >= s->size || s->head == tail)
                return 0;
        struct ntbf_nvme_sqe batch[FETCH_BATCH];
        uint32_t max = burst(n);
        int done = 0;
        while (s->head != tail && (uint32_t)done < max && s->live) {
                uint32_t avail = tail > s->head ? tail - s->head : s->size - s->head;
                uint32_t k = avail < FETCH_BATCH ? avail : FETCH_BATCH;
                if (max - (uint32_t)done < k)
                        k = max - (uint32_t)done;
                uint64_t addr = s->base + (uint64_t)s->head * 64;
                bool fetched = mem_read(n, addr, batch, (size_t)k * 64) == 0;
                for (uint32_t i = 0; i < k && s->live; i++) {
                        if (cq_full(n, s->cqid))
                                return done;
                        /* A batch that failed is retried entry by entry: only the SQEs that
                         * cannot be read fail. */
                        bool got =
                            fetched || mem_read(n, addr + (uint64_t)i * 64, &batch[i], 64) == 0;
                        s->head = (s->head + 1) % s->size;
                        done++;
                        if (!got) {
                                struct result r = err(NTBF_NVME_SC_DATA_XFER_ERROR, 0xffff);
                                post(n, qid, 0xffff, &r, 0);
                                continue;
                        }
                        struct result r = execute(n, qid, &batch[i]);
                        if (!r.hold)
                                post(n, qid, batch[i].cid, &r, batch[i].nsid);
                }
        }
        return done;
}

static int process_queues(struct nvme *n)
{
        int done = process_sq(n, 0);
        uint32_t cnt = n->nlive;
        for (uint32_t i = 0; i < cnt && cnt == n->nlive; i++)
                done += process_sq(n, n->live[(n->rr + i) % cnt]);
        if (n->nlive)
                n->rr = (n->rr + 1) % n->nlive;
        return done;
}

/* ---- model operations --------------------------------------------------------------------- */

static void layout_of(const struct nvme *n, struct ntbf_sim_cfg_layout *l)
{
        *l = (struct ntbf_sim_cfg_layout){.msix_vectors = n->vectors,
                                          .msix_table_bar = 0,
                                          .msix_table_off = NTBF_NVME_MSIX_TABLE,
                                          .msix_pba_bar = 0,
                                          .msix_pba_off = NTBF_NVME_MSIX_PBA,
                                          .link_width = 4};
}

static void nvme_destroy(void *state)
{
        struct nvme *n = state;
        if (!n)
                return;
        free(n->sq);
        free(n->cq);
        free(n->live);
        free(n->touched);
        free(n->bounce);
        free(n);
}

static int nvme_create(const struct ntbf_sim_devenv *env, void **state)
{
        const struct ntbf_device *d = env->desc;
        const struct ntbf_sim_params *p = &d->sim;
        if (!env->cfg || !env->bar[0] || env->bar_size[0] < NTBF_NVME_BAR0_SIZE ||
            env->backing_fd < 0 || (p->lba_size != 512 && p->lba_size != 4096) || !p->capacity ||
            p->capacity % p->lba_size || p->queues < 2 || p->queues > NTBF_NVME_MAX_QUEUES ||
            p->mdts > 20)
                return -EINVAL;
        struct nvme *n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        n->env = *env;
        n->regs = env->bar[0];
        n->nq = p->queues;
        n->vectors = p->msix < NTBF_NVME_MSIX_MAX ? p->msix : NTBF_NVME_MSIX_MAX;
        n->lba_shift = p->lba_size == 4096 ? 12 : 9;
        n->nsze = p->capacity >> n->lba_shift;
        n->mdts_bytes = p->mdts ? (uint64_t)PAGE << p->mdts : 0;
        if (p->cmb && env->bar[2] && env->bar_size[2] >= p->cmb) {
                n->cmb = env->bar[2];
                n->cmb_size = p->cmb;
                n->cmb_bar_addr = ntbf_device_bar_addr(d, env->function, 2);
                n->cmb_lo = n->cmb_bar_addr;
        }
        n->cap = NTBF_NVME_MQES | NTBF_NVME_CAP_CQR | (uint64_t)NTBF_NVME_TO << 24 |
                 NTBF_NVME_CAP_CSS_NVM | (n->cmb ? NTBF_NVME_CAP_CMBS : 0);
        n->bounce_size = n->mdts_bytes && n->mdts_bytes < BOUNCE_MAX ? n->mdts_bytes : BOUNCE_MAX;
        n->sq = calloc(n->nq, sizeof(*n->sq));
        n->cq = calloc(n->nq, sizeof(*n->cq));
        n->live = calloc(n->nq, sizeof(*n->live));
        n->touched = calloc(n->nq, sizeof(*n->touched));
        n->bounce = aligned_alloc(PAGE, n->bounce_size);
        if (!n->sq || !n->cq || !n->live || !n->touched || !n->bounce) {
                nvme_destroy(n);
                return -ENOMEM;
        }
        struct stat st;
        if (fstat(env->backing_fd, &st) || ((uint64_t)st.st_size < p->capacity &&
                                            ftruncate(env->backing_fd, (off_t)p->capacity))) {
                int e = -errno;
                nvme_destroy(n);
                return e;
        }
        n->hash = fnv1a(fnv1a(fnv1a(UINT64_C(0xcbf29ce484222325), env->node_name), "/"), d->name);
        char fn[16];
        snprintf(fn, sizeof(fn), "/%u", env->function);
        n->hash = fnv1a(n->hash, fn);
        snprintf(n->sn, sizeof(n->sn), "NTBF%016llX", (unsigned long long)n->hash);

        struct ntbf_sim_cfg_layout l;
        layout_of(n, &l);
        bool restart = ntbf_sim_cfg_matches(env->cfg, d, env->function, &l);
        if (!restart) {
                int r = ntbf_sim_cfg_build(env->cfg, d, env->function, &l);
                if (r) {
                        nvme_destroy(n);
                        return r;
                }
                ntbf_sim_msix_reset(&n->env, &n->irq);
        }
        features_default(n, &n->feat);
        n->power_cycles = 1;
        uint32_t cc = r32(n, NTBF_NVME_REG_CC);
        if (restart && (cc & NTBF_NVME_CC_EN)) {
                /* A device host restart lost the queues of an enabled controller: report a
                 * fatal status; the driver's reset (CC.EN = 0) brings it back. */
                n->cc = cc;
                n->intm = r32(n, NTBF_NVME_REG_INTMS);
                n->csts = (r32(n, NTBF_NVME_REG_CSTS) & NTBF_NVME_CSTS_RDY) | NTBF_NVME_CSTS_CFS;
                n->unsafe++;
                publish_ro(n);
        } else {
                regs_power_on(n);
                queues_reset(n);
        }
        *state = n;
        return 0;
}

static void nvme_reset(void *state)
{
        struct nvme *n = state;
        if (n->ready && !n->shutdown)
                n->unsafe++;
        n->power_cycles++;
        struct ntbf_sim_cfg_layout l;
        layout_of(n, &l);
        ntbf_sim_cfg_build(n->env.cfg, n->env.desc, n->env.function, &l);
        ntbf_sim_msix_reset(&n->env, &n->irq);
        controller_reset(n);
        regs_power_on(n);
}

static int nvme_poll(void *state, uint64_t now_ns)
{
        struct nvme *n = state;
        if (n->last_now && now_ns > n->last_now) {
                n->on_ns += now_ns - n->last_now;
                if (n->last_io)
                        n->busy_ns += now_ns - n->last_now;
        }
        n->last_now = now_ns;
        n->now = now_ns;
        n->io_done = false;
        publish_ro(n);
        int work = handle_cc(n);
        if (!n->ready || n->shutdown || (n->csts & NTBF_NVME_CSTS_CFS) ||
            !ntbf_sim_cfg_bus_master(n->env.cfg)) {
                n->last_io = false;
                return work;
        }
        work += ntbf_sim_msix_flush(&n->env, &n->irq);
        work += coalesce_timers(n);
        work += process_queues(n);
        work += interrupts(n);
        n->last_io = n->io_done;
        return work;
}

const struct ntbf_sim_model_ops ntbf_sim_nvme_ops = {
    .name = "nvme",
    .create = nvme_create,
    .poll = nvme_poll,
    .reset = nvme_reset,
    .destroy = nvme_destroy,
};
