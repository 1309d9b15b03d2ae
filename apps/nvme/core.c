/* apps/nvme/core.c: the NVMe driver core: reset, admin commands, queue pairs, PRPs, completions. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ntbf_nvme.h"

#define PG     4096u
#define LIST_N (PG / 8) /* PRP entries in one list page */

/* ---- time and waiting ---------------------------------------------------------------------- */

uint64_t ntbf_nvme_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void nap(uint32_t ns)
{
        struct timespec ts = {0, (long)ns};
        nanosleep(&ts, NULL);
}

void ntbf_nvme_wait_default(struct ntbf_nvme_wait *w)
{
        *w = (struct ntbf_nvme_wait){.timeout_ms = 2000, .spin_ns = 50000, .nap_ns = 20000};
}

/* One look of a waiter that started at t0: 0 to look again, -ETIMEDOUT when it is over. */
int ntbf_nvme_wait_step(const struct ntbf_nvme_wait *w, uint64_t t0)
{
        if (w->idle)
                w->idle(w->idle_arg);
        uint64_t dt = ntbf_nvme_now_ns() - t0;
        if (dt > (uint64_t)w->timeout_ms * 1000000u)
                return -ETIMEDOUT;
        if (w->nap_ns && dt > w->spin_ns)
                nap(w->nap_ns);
        return 0;
}

/* ---- registers: naturally aligned loads and stores, never torn ---------------------------- */

static uint32_t r32(const struct ntbf_nvme_ctrl *c, uint32_t off)
{
        return __atomic_load_n((volatile uint32_t *)(c->regs + off), __ATOMIC_ACQUIRE);
}

static uint64_t r64(const struct ntbf_nvme_ctrl *c, uint32_t off)
{
        /* Two dword reads: not every path to a BAR carries 8-byte reads whole. */
        uint64_t lo = r32(c, off), hi = r32(c, off + 4);
        return hi << 32 | lo;
}

static void w32(struct ntbf_nvme_ctrl *c, uint32_t off, uint32_t v)
{
        __atomic_store_n((volatile uint32_t *)(c->regs + off), v, __ATOMIC_RELEASE);
}

static void w64(struct ntbf_nvme_ctrl *c, uint32_t off, uint64_t v)
{
        w32(c, off, (uint32_t)v);
        w32(c, off + 4, (uint32_t)(v >> 32));
}

static uint64_t le(const uint8_t *p, unsigned n)
{
        uint64_t v = 0;
        for (unsigned i = 0; i < n; i++)
                v |= (uint64_t)p[i] << (8 * i);
        return v;
}

static size_t pages(size_t bytes)
{
        return (bytes + PG - 1) & ~(size_t)(PG - 1);
}

size_t ntbf_nvme_sq_bytes(uint32_t sq_entries)
{
        return pages((size_t)sq_entries * 64);
}

size_t ntbf_nvme_cq_bytes(uint32_t cq_entries)
{
        return pages((size_t)cq_entries * 16);
}

size_t ntbf_nvme_prp_bytes(uint32_t sq_entries)
{
        return sq_entries ? (size_t)(sq_entries - 1) * PG : 0;
}

size_t ntbf_nvme_admin_bytes(uint32_t entries)
{
        /* SQ, CQ, one PRP page per command (Identify needs none, but Get Log Page may), and the
         * Identify page. */
        return ntbf_nvme_sq_bytes(entries) + ntbf_nvme_cq_bytes(entries) + PG;
}

/* ---- status sentences ---------------------------------------------------------------------- */

const char *ntbf_nvme_strstatus(int st)
{
        switch (st) {
        case 0:
                return "success";
        case -ETIMEDOUT:
                return "no completion in time (the controller or the path to it does not answer)";
        case -EIO:
                return "the controller is fatal or does not answer (reads return all ones)";
        case -EBUSY:
                return "the queue is full";
        case -EINVAL:
                return "the request cannot be expressed (size, alignment or queue)";
        case -ENOMEM:
                return "out of memory";
        case -ENOSPC:
                return "no free I/O queue pair";
        case -EBADMSG:
                return "data read back differs from what was written";
        case NTBF_NVME_SC_INVALID_OPCODE:
                return "NVMe: invalid command opcode";
        case NTBF_NVME_SC_INVALID_FIELD:
                return "NVMe: invalid field in command";
        case NTBF_NVME_SC_DATA_XFER_ERROR:
                return "NVMe: data transfer error (the controller could not reach the memory)";
        case NTBF_NVME_SC_INTERNAL:
                return "NVMe: internal error";
        case NTBF_NVME_SC_INVALID_NS:
                return "NVMe: invalid namespace or format";
        case NTBF_NVME_SC_CMD_SEQ_ERROR:
                return "NVMe: command sequence error";
        case NTBF_NVME_SC_INVALID_PRP_OFFSET:
                return "NVMe: invalid PRP offset";
        case NTBF_NVME_SC_LBA_RANGE:
                return "NVMe: LBA out of range";
        case NTBF_NVME_SC_CQ_INVALID:
                return "NVMe: completion queue invalid";
        case NTBF_NVME_SC_INVALID_QID:
                return "NVMe: invalid queue identifier";
        case NTBF_NVME_SC_INVALID_QSIZE:
                return "NVMe: invalid queue size";
        case NTBF_NVME_SC_INVALID_IV:
                return "NVMe: invalid interrupt vector";
        case NTBF_NVME_SC_INVALID_LOG_PAGE:
                return "NVMe: invalid log page";
        case NTBF_NVME_SC_INVALID_QUEUE_DELETION:
                return "NVMe: invalid queue deletion";
        case NTBF_NVME_SC_FEATURE_NOT_SAVEABLE:
                return "NVMe: feature identifier not saveable";
        case NTBF_NVME_SC_WRITE_FAULT:
                return "NVMe: write fault";
        case NTBF_NVME_SC_UNRECOVERED_READ:
                return "NVMe: unrecovered read error";
        }
        if (st < 0)
                return strerror(-st);
        return "NVMe: error status";
}

/* ---- queue pairs --------------------------------------------------------------------------- */

static void db_set(struct ntbf_nvme_qp *q, volatile void *bar0, uint32_t stride)
{
        volatile uint8_t *r = bar0;
        q->sq_db = (volatile uint32_t *)(r + NTBF_NVME_REG_DBS + (2u * q->qid) * stride);
        q->cq_db = (volatile uint32_t *)(r + NTBF_NVME_REG_DBS + (2u * q->qid + 1) * stride);
}

void ntbf_nvme_qp_reset(struct ntbf_nvme_qp *q)
{
        volatile uint64_t *s = q->sq;
        for (size_t i = 0; i < (size_t)q->sq_entries * 8; i++)
                s[i] = 0;
        volatile uint64_t *c = (volatile uint64_t *)q->cq;
        for (size_t i = 0; i < (size_t)q->cq_entries * 2; i++)
                c[i] = 0;
        q->sq_tail = q->sq_head = q->cq_head = 0;
        q->phase = 1;
        memset(q->slots, 0, q->ncids * sizeof(*q->slots));
        /* Hand CIDs out lowest first: a fresh pair's first command is CID 0, as drivers do. */
        q->nfree = q->ncids;
        for (uint16_t i = 0; i < q->ncids; i++)
                q->free_cids[i] = (uint16_t)(q->ncids - 1 - i);
}

int ntbf_nvme_qp_init(struct ntbf_nvme_qp *q, volatile void *bar0, uint32_t db_stride, uint16_t qid,
                      uint32_t sq_entries, const struct ntbf_nvme_mem *sq, uint32_t cq_entries,
                      const struct ntbf_nvme_mem *cq, const struct ntbf_nvme_mem *prp)
{
        memset(q, 0, sizeof(*q));
        if (sq_entries < 2 || cq_entries < 2 || sq_entries > 65536 || cq_entries > 65536 || !sq ||
            !cq || !sq->va || !cq->va || (sq->io & (PG - 1)) || (cq->io & (PG - 1)) ||
            sq->size < ntbf_nvme_sq_bytes(sq_entries) || cq->size < ntbf_nvme_cq_bytes(cq_entries))
                return -EINVAL;
        bool lists = prp && prp->va;
        if (lists && ((prp->io & (PG - 1)) || prp->size < ntbf_nvme_prp_bytes(sq_entries)))
                return -EINVAL;
        /* A CQ entry must be free for every outstanding command: the controller fetches a
         * command only when its CQ has room. */
        uint32_t n = sq_entries - 1 < cq_entries - 1 ? sq_entries - 1 : cq_entries - 1;
        if (n > 0xfffe)
                n = 0xfffe; /* CID 0xffff is what a failed fetch completes with */
        q->slots = calloc(n, sizeof(*q->slots));
        q->free_cids = calloc(n, sizeof(*q->free_cids));
        if (!q->slots || !q->free_cids) {
                ntbf_nvme_qp_fini(q);
                return -ENOMEM;
        }
        q->qid = qid;
        q->ncids = (uint16_t)n;
        q->sq_entries = sq_entries;
        q->cq_entries = cq_entries;
        q->sq = sq->va;
        q->cq = cq->va;
        q->sq_io = sq->io;
        q->cq_io = cq->io;
        if (lists) {
                q->prp = prp->va;
                q->prp_io = prp->io;
        }
        db_set(q, bar0, db_stride ? db_stride : 4);
        ntbf_nvme_qp_reset(q);
        return 0;
}

void ntbf_nvme_qp_fini(struct ntbf_nvme_qp *q)
{
        free(q->slots);
        free(q->free_cids);
        q->slots = NULL;
        q->free_cids = NULL;
        q->ncids = q->nfree = 0;
}

unsigned ntbf_nvme_qp_outstanding(const struct ntbf_nvme_qp *q)
{
        unsigned n = 0;
        for (unsigned i = 0; i < q->ncids; i++)
                n += q->slots[i].busy && !q->slots[i].timed_out;
        return n;
}

static int take_cid(struct ntbf_nvme_qp *q)
{
        if (!q->nfree)
                return -EBUSY;
        /* The SQ has room whenever a CID is free: ncids < sq_entries. */
        return q->free_cids[--q->nfree];
}

static void give_cid(struct ntbf_nvme_qp *q, uint16_t cid)
{
        q->slots[cid].busy = 0;
        q->slots[cid].timed_out = 0;
        q->free_cids[q->nfree++] = cid;
}

/* Copy cmd (CID set) into the SQ and ring the doorbell. */
static void push(struct ntbf_nvme_qp *q, uint16_t cid, struct ntbf_nvme_sqe *cmd, void *tag)
{
        cmd->cid = cid;
        struct ntbf_nvme_slot *s = &q->slots[cid];
        s->busy = 1;
        s->timed_out = 0;
        s->tag = tag;
        uint64_t w[8];
        memcpy(w, cmd, sizeof(w));
        volatile uint64_t *e = q->sq + (size_t)q->sq_tail * 8;
        for (int i = 0; i < 8; i++)
                e[i] = w[i];
        q->sq_tail = (q->sq_tail + 1) % q->sq_entries;
        s->t_submit = ntbf_nvme_now_ns();
        q->submitted++;
        /* The entry is written before the controller can see the new tail (article 7.4.1:
         * PCIe keeps posted writes in order, so the command is in the SQ when it reads it). */
        __atomic_store_n(q->sq_db, q->sq_tail, __ATOMIC_RELEASE);
}

int ntbf_nvme_qp_submit(struct ntbf_nvme_qp *q, struct ntbf_nvme_sqe *cmd, void *tag)
{
        int cid = take_cid(q);
        if (cid < 0)
                return cid;
        push(q, (uint16_t)cid, cmd, tag);
        return cid;
}

/* PRP1/PRP2 (and the list in the CID's page) for len bytes at controller address io. */
static int build_prps(struct ntbf_nvme_qp *q, uint16_t cid, struct ntbf_nvme_sqe *cmd, uint64_t io,
                      uint64_t len)
{
        if (io & 3)
                return -EINVAL;
        cmd->prp1 = io;
        cmd->prp2 = 0;
        uint64_t first = PG - (io & (PG - 1));
        if (len <= first)
                return 0;
        uint64_t rest = len - first, next = io + first;
        if (rest <= PG) {
                cmd->prp2 = next;
                return 0;
        }
        uint64_t n = (rest + PG - 1) / PG;
        if (!q->prp || n > LIST_N)
                return -EINVAL;
        volatile uint64_t *list = (volatile uint64_t *)(q->prp + (size_t)cid * PG);
        for (uint64_t i = 0; i < n; i++)
                list[i] = next + i * PG;
        cmd->prp2 = q->prp_io + (uint64_t)cid * PG;
        return 0;
}

int ntbf_nvme_qp_rw(struct ntbf_nvme_qp *q, const struct ntbf_nvme_ns *ns, uint8_t opc,
                    uint64_t slba, uint32_t nlb, uint64_t buf_io, uint32_t cdw12_flags, void *tag)
{
        uint64_t len = (uint64_t)nlb << ns->lba_shift;
        if (!nlb || nlb > 65536 || !ns->lba_shift || len > ns->max_xfer || slba + nlb > ns->nsze ||
            slba + nlb < slba)
                return -EINVAL;
        int cid = take_cid(q);
        if (cid < 0)
                return cid;
        struct ntbf_nvme_sqe cmd = {.opc = opc, .nsid = ns->nsid};
        int r = build_prps(q, (uint16_t)cid, &cmd, buf_io, len);
        if (r) {
                q->free_cids[q->nfree++] = (uint16_t)cid;
                return r;
        }
        cmd.cdw10 = (uint32_t)slba;
        cmd.cdw11 = (uint32_t)(slba >> 32);
        cmd.cdw12 = (nlb - 1) | cdw12_flags;
        push(q, (uint16_t)cid, &cmd, tag);
        return cid;
}

int ntbf_nvme_qp_poll(struct ntbf_nvme_qp *q, struct ntbf_nvme_done *out, unsigned max)
{
        unsigned n = 0;
        bool moved = false;
        while (n < max) {
                volatile struct ntbf_nvme_cqe *e = &q->cq[q->cq_head];
                /* Dword 3 (CID, phase, status) is published last and whole. */
                uint32_t dw3 = __atomic_load_n((volatile uint32_t *)((volatile uint8_t *)e + 12),
                                               __ATOMIC_ACQUIRE);
                if (((dw3 >> 16) & 1) != q->phase)
                        break;
                struct ntbf_nvme_cqe c = {.dw0 = e->dw0,
                                          .dw1 = e->dw1,
                                          .sqhd = e->sqhd,
                                          .sqid = e->sqid,
                                          .cid = (uint16_t)dw3,
                                          .status = (uint16_t)(dw3 >> 16)};
                if (++q->cq_head == q->cq_entries) {
                        q->cq_head = 0;
                        q->phase ^= 1;
                }
                moved = true;
                if (c.sqhd < q->sq_entries)
                        q->sq_head = c.sqhd;
                if (c.cid >= q->ncids || !q->slots[c.cid].busy) {
                        q->stray++; /* e.g. CID 0xffff: a command the controller could not fetch */
                        continue;
                }
                struct ntbf_nvme_slot *s = &q->slots[c.cid];
                if (s->timed_out) {
                        q->late++; /* already reported as failed: only its CID comes back */
                        give_cid(q, c.cid);
                        continue;
                }
                out[n++] = (struct ntbf_nvme_done){c.cid, ntbf_nvme_cqe_status(&c), c.dw0,
                                                   ntbf_nvme_now_ns() - s->t_submit, s->tag};
                q->completed++;
                give_cid(q, c.cid);
        }
        if (moved)
                __atomic_store_n(q->cq_db, q->cq_head, __ATOMIC_RELEASE);
        return (int)n;
}

int ntbf_nvme_qp_expire(struct ntbf_nvme_qp *q, uint64_t now_ns, uint64_t timeout_ns,
                        struct ntbf_nvme_done *out, unsigned max)
{
        unsigned n = 0;
        for (uint16_t i = 0; i < q->ncids && n < max; i++) {
                struct ntbf_nvme_slot *s = &q->slots[i];
                if (!s->busy || s->timed_out || now_ns < s->t_submit ||
                    now_ns - s->t_submit <= timeout_ns)
                        continue;
                s->timed_out = 1;
                q->expired++;
                out[n++] = (struct ntbf_nvme_done){i, -ETIMEDOUT, 0, now_ns - s->t_submit, s->tag};
        }
        return (int)n;
}

int ntbf_nvme_qp_wait(struct ntbf_nvme_qp *q, const struct ntbf_nvme_wait *w, uint16_t cid,
                      struct ntbf_nvme_done *out)
{
        if (cid >= q->ncids || !q->slots[cid].busy)
                return -EINVAL;
        for (uint64_t t0 = ntbf_nvme_now_ns();;) {
                struct ntbf_nvme_done d[8];
                int n = ntbf_nvme_qp_poll(q, d, 8);
                for (int i = 0; i < n; i++) {
                        if (d[i].cid == cid) {
                                if (out)
                                        *out = d[i];
                                return 0;
                        }
                        q->stray++;
                }
                if (n)
                        continue;
                if (ntbf_nvme_wait_step(w, t0)) {
                        q->slots[cid].timed_out = 1;
                        q->expired++;
                        return -ETIMEDOUT;
                }
        }
}

int ntbf_nvme_qp_rw_sync(struct ntbf_nvme_qp *q, const struct ntbf_nvme_wait *w,
                         const struct ntbf_nvme_ns *ns, uint8_t opc, uint64_t slba, uint32_t nlb,
                         uint64_t buf_io)
{
        int cid = ntbf_nvme_qp_rw(q, ns, opc, slba, nlb, buf_io, 0, NULL);
        if (cid < 0)
                return cid;
        struct ntbf_nvme_done d;
        int r = ntbf_nvme_qp_wait(q, w, (uint16_t)cid, &d);
        return r ? r : d.status;
}

int ntbf_nvme_qp_flush_sync(struct ntbf_nvme_qp *q, const struct ntbf_nvme_wait *w, uint32_t nsid)
{
        struct ntbf_nvme_sqe s = {.opc = NTBF_NVME_CMD_FLUSH, .nsid = nsid};
        int cid = ntbf_nvme_qp_submit(q, &s, NULL);
        if (cid < 0)
                return cid;
        struct ntbf_nvme_done d;
        int r = ntbf_nvme_qp_wait(q, w, (uint16_t)cid, &d);
        return r ? r : d.status;
}

/* ---- the controller ------------------------------------------------------------------------ */

int ntbf_nvme_ctrl_open(struct ntbf_nvme_ctrl *c, volatile void *bar0, size_t bar0_size)
{
        memset(c, 0, sizeof(*c));
        if (!bar0 || bar0_size < NTBF_NVME_REG_DBS + 8)
                return -EINVAL;
        c->regs = bar0;
        c->regs_size = bar0_size;
        ntbf_nvme_wait_default(&c->wait);
        c->cap = r64(c, NTBF_NVME_REG_CAP);
        c->vs = r32(c, NTBF_NVME_REG_VS);
        if (c->cap == UINT64_MAX)
                return -EIO; /* nothing answers behind the mapping */
        c->db_stride = 4u << NTBF_NVME_CAP_DSTRD(c->cap);
        c->mqes = NTBF_NVME_CAP_MQES(c->cap) + 1;
        c->ready_ns = NTBF_NVME_CAP_TO(c->cap) * UINT64_C(500000000);
        if (!c->ready_ns)
                c->ready_ns = UINT64_C(10000000000);
        return 0;
}

void ntbf_nvme_ctrl_close(struct ntbf_nvme_ctrl *c)
{
        ntbf_nvme_qp_fini(&c->admin);
        c->admin_up = false;
        c->regs = NULL;
}

bool ntbf_nvme_ctrl_alive(const struct ntbf_nvme_ctrl *c)
{
        uint32_t s = r32(c, NTBF_NVME_REG_CSTS);
        return s != UINT32_MAX && !(s & NTBF_NVME_CSTS_CFS);
}

/* Wait until (CSTS & mask) == want; -EIO on all ones, or on a fatal status while cfs_fails. */
static int wait_csts(struct ntbf_nvme_ctrl *c, uint32_t mask, uint32_t want, bool cfs_fails)
{
        struct ntbf_nvme_wait w = c->wait;
        w.timeout_ms = (uint32_t)(c->ready_ns / 1000000u);
        for (uint64_t t0 = ntbf_nvme_now_ns();;) {
                uint32_t s = r32(c, NTBF_NVME_REG_CSTS);
                if (s == UINT32_MAX || (cfs_fails && (s & NTBF_NVME_CSTS_CFS)))
                        return -EIO;
                if ((s & mask) == want)
                        return 0;
                if (ntbf_nvme_wait_step(&w, t0))
                        return -ETIMEDOUT;
        }
}

int ntbf_nvme_ctrl_disable(struct ntbf_nvme_ctrl *c)
{
        uint32_t cc = r32(c, NTBF_NVME_REG_CC);
        if (cc == UINT32_MAX)
                return -EIO;
        if (cc & (NTBF_NVME_CC_EN | (3u << 14)))
                w32(c, NTBF_NVME_REG_CC, cc & ~(NTBF_NVME_CC_EN | (3u << 14)));
        c->admin_up = false;
        return wait_csts(c, NTBF_NVME_CSTS_RDY, 0, false);
}

int ntbf_nvme_ctrl_shutdown(struct ntbf_nvme_ctrl *c)
{
        uint32_t cc = r32(c, NTBF_NVME_REG_CC);
        if (cc == UINT32_MAX)
                return -EIO;
        w32(c, NTBF_NVME_REG_CC, (cc & ~(3u << 14)) | NTBF_NVME_CC_SHN_NORMAL);
        return wait_csts(c, NTBF_NVME_CSTS_SHST_MASK, NTBF_NVME_CSTS_SHST_DONE, true);
}

int ntbf_nvme_ctrl_reset(struct ntbf_nvme_ctrl *c, const struct ntbf_nvme_mem *admin,
                         uint32_t entries)
{
        if (entries < 2 || entries > 4096 || entries > c->mqes || !admin || !admin->va ||
            (admin->io & (PG - 1)) || admin->size < ntbf_nvme_admin_bytes(entries))
                return -EINVAL;
        if (NTBF_NVME_CAP_MPSMIN(c->cap) > 0)
                return -EINVAL; /* the core uses 4 KiB pages */
        int r = ntbf_nvme_ctrl_disable(c);
        if (r)
                return r;
        ntbf_nvme_qp_fini(&c->admin);
        size_t sqb = ntbf_nvme_sq_bytes(entries), cqb = ntbf_nvme_cq_bytes(entries);
        uint8_t *va = admin->va;
        struct ntbf_nvme_mem sq = {va, admin->io, sqb};
        struct ntbf_nvme_mem cq = {va + sqb, admin->io + sqb, cqb};
        c->idbuf = va + sqb + cqb;
        c->idbuf_io = admin->io + sqb + cqb;
        r = ntbf_nvme_qp_init(&c->admin, c->regs, c->db_stride, 0, entries, &sq, entries, &cq,
                              NULL);
        if (r)
                return r;
        uint32_t n = entries - 1;
        w32(c, NTBF_NVME_REG_AQA, n << 16 | n);
        w64(c, NTBF_NVME_REG_ASQ, c->admin.sq_io);
        w64(c, NTBF_NVME_REG_ACQ, c->admin.cq_io);
        w32(c, NTBF_NVME_REG_CC, NTBF_NVME_CC_EN | NTBF_NVME_CC_IOSQES_64 | NTBF_NVME_CC_IOCQES_16);
        r = wait_csts(c, NTBF_NVME_CSTS_RDY, NTBF_NVME_CSTS_RDY, true);
        if (r)
                return r;
        c->admin_up = true;
        r = ntbf_nvme_identify(c, NTBF_NVME_CNS_CTRL, 0, c->idbuf_io);
        if (r)
                return r;
        ntbf_nvme_parse_ident(c->idbuf, &c->id);
        r = ntbf_nvme_identify(c, NTBF_NVME_CNS_NS, 1, c->idbuf_io);
        if (r)
                return r;
        r = ntbf_nvme_parse_ns(c->idbuf, 1, c->id.mdts, &c->ns);
        if (r)
                return r;
        /* Ask for every pair the controller has; it answers with what it grants (0's based). */
        uint32_t dw0 = 0;
        r = ntbf_nvme_set_features(c, NTBF_NVME_FEAT_NUM_QUEUES, 0xfffeu << 16 | 0xfffeu, 0, &dw0);
        if (r)
                return r;
        uint32_t nsq = (dw0 & 0xffff) + 1, ncq = (dw0 >> 16) + 1;
        c->io_queues = nsq < ncq ? nsq : ncq;
        return 0;
}

/* ---- admin commands ------------------------------------------------------------------------ */

int ntbf_nvme_admin(struct ntbf_nvme_ctrl *c, struct ntbf_nvme_sqe *cmd, struct ntbf_nvme_cqe *out)
{
        if (!c->admin_up)
                return -EINVAL;
        int cid = ntbf_nvme_qp_submit(&c->admin, cmd, NULL);
        if (cid < 0)
                return cid;
        struct ntbf_nvme_done d;
        int r = ntbf_nvme_qp_wait(&c->admin, &c->wait, (uint16_t)cid, &d);
        if (r)
                return r;
        if (out)
                *out = (struct ntbf_nvme_cqe){.dw0 = d.dw0, .cid = d.cid};
        return d.status;
}

int ntbf_nvme_identify(struct ntbf_nvme_ctrl *c, uint8_t cns, uint32_t nsid, uint64_t buf_io)
{
        struct ntbf_nvme_sqe s = {.opc = NTBF_NVME_ADM_IDENTIFY, .nsid = nsid, .cdw10 = cns};
        s.prp1 = buf_io;
        if ((buf_io & (PG - 1)) != 0)
                s.prp2 = (buf_io & ~(uint64_t)(PG - 1)) + PG;
        return ntbf_nvme_admin(c, &s, NULL);
}

int ntbf_nvme_get_features(struct ntbf_nvme_ctrl *c, uint8_t fid, uint32_t cdw11, uint64_t buf_io,
                           uint32_t *dw0)
{
        struct ntbf_nvme_sqe s = {.opc = NTBF_NVME_ADM_GET_FEATURES, .cdw10 = fid, .cdw11 = cdw11};
        s.prp1 = buf_io;
        struct ntbf_nvme_cqe e;
        int r = ntbf_nvme_admin(c, &s, &e);
        if (!r && dw0)
                *dw0 = e.dw0;
        return r;
}

int ntbf_nvme_set_features(struct ntbf_nvme_ctrl *c, uint8_t fid, uint32_t cdw11, uint32_t cdw12,
                           uint32_t *dw0)
{
        struct ntbf_nvme_sqe s = {
            .opc = NTBF_NVME_ADM_SET_FEATURES, .cdw10 = fid, .cdw11 = cdw11, .cdw12 = cdw12};
        struct ntbf_nvme_cqe e;
        int r = ntbf_nvme_admin(c, &s, &e);
        if (!r && dw0)
                *dw0 = e.dw0;
        return r;
}

int ntbf_nvme_get_log_page(struct ntbf_nvme_ctrl *c, uint8_t lid, uint32_t nsid, uint32_t len,
                           uint64_t buf_io)
{
        if (!len || len % 4 || len > PG || (buf_io & 3) || (buf_io & (PG - 1)) + len > PG)
                return -EINVAL;
        uint32_t numd = len / 4 - 1;
        struct ntbf_nvme_sqe s = {.opc = NTBF_NVME_ADM_GET_LOG_PAGE,
                                  .nsid = nsid,
                                  .cdw10 = (numd & 0xffff) << 16 | lid,
                                  .cdw11 = numd >> 16};
        s.prp1 = buf_io;
        return ntbf_nvme_admin(c, &s, NULL);
}

int ntbf_nvme_create_qp(struct ntbf_nvme_ctrl *c, uint16_t qid, uint32_t sq_entries,
                        uint32_t cq_entries, uint64_t sq_io, uint64_t cq_io)
{
        if (!qid || sq_entries < 2 || cq_entries < 2 || sq_entries > c->mqes ||
            cq_entries > c->mqes)
                return -EINVAL;
        /* Physically contiguous (PC), polled: IEN 0, vector 0. */
        struct ntbf_nvme_sqe s = {
            .opc = NTBF_NVME_ADM_CREATE_CQ, .cdw10 = (cq_entries - 1) << 16 | qid, .cdw11 = 1};
        s.prp1 = cq_io;
        int r = ntbf_nvme_admin(c, &s, NULL);
        if (r)
                return r;
        s = (struct ntbf_nvme_sqe){.opc = NTBF_NVME_ADM_CREATE_SQ,
                                   .cdw10 = (sq_entries - 1) << 16 | qid,
                                   .cdw11 = (uint32_t)qid << 16 | 1};
        s.prp1 = sq_io;
        r = ntbf_nvme_admin(c, &s, NULL);
        if (r) {
                struct ntbf_nvme_sqe d = {.opc = NTBF_NVME_ADM_DELETE_CQ, .cdw10 = qid};
                ntbf_nvme_admin(c, &d, NULL);
        }
        return r;
}

int ntbf_nvme_delete_qp(struct ntbf_nvme_ctrl *c, uint16_t qid)
{
        struct ntbf_nvme_sqe s = {.opc = NTBF_NVME_ADM_DELETE_SQ, .cdw10 = qid};
        int r = ntbf_nvme_admin(c, &s, NULL);
        s = (struct ntbf_nvme_sqe){.opc = NTBF_NVME_ADM_DELETE_CQ, .cdw10 = qid};
        int r2 = ntbf_nvme_admin(c, &s, NULL);
        return r ? r : r2;
}

/* ---- Identify data ------------------------------------------------------------------------- */

/* A space-padded ASCII field of n bytes, trimmed, into out (n + 1 bytes). */
static void ascii(const uint8_t *p, unsigned n, char *out)
{
        unsigned k = 0;
        for (unsigned i = 0; i < n; i++)
                out[k++] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
        while (k && out[k - 1] == ' ')
                k--;
        out[k] = 0;
}

void ntbf_nvme_parse_ident(const uint8_t id[4096], struct ntbf_nvme_ident *o)
{
        memset(o, 0, sizeof(*o));
        o->vid = (uint16_t)le(id + NTBF_NVME_IDC_VID, 2);
        o->ssvid = (uint16_t)le(id + NTBF_NVME_IDC_SSVID, 2);
        ascii(id + NTBF_NVME_IDC_SN, 20, o->sn);
        ascii(id + NTBF_NVME_IDC_MN, 40, o->mn);
        ascii(id + NTBF_NVME_IDC_FR, 8, o->fr);
        o->mdts = id[NTBF_NVME_IDC_MDTS];
        o->cntlid = (uint16_t)le(id + NTBF_NVME_IDC_CNTLID, 2);
        o->ver = (uint32_t)le(id + NTBF_NVME_IDC_VER, 4);
        o->sqes = id[NTBF_NVME_IDC_SQES];
        o->cqes = id[NTBF_NVME_IDC_CQES];
        o->nn = (uint32_t)le(id + NTBF_NVME_IDC_NN, 4);
        o->oncs = (uint16_t)le(id + NTBF_NVME_IDC_ONCS, 2);
        o->vwc = id[NTBF_NVME_IDC_VWC];
}

int ntbf_nvme_parse_ns(const uint8_t id[4096], uint32_t nsid, uint8_t mdts, struct ntbf_nvme_ns *o)
{
        memset(o, 0, sizeof(*o));
        o->nsid = nsid;
        o->nsze = le(id + NTBF_NVME_IDNS_NSZE, 8);
        uint32_t flbas = id[NTBF_NVME_IDNS_FLBAS] & 0xf;
        uint32_t lbaf = (uint32_t)le(id + NTBF_NVME_IDNS_LBAF0 + 4 * flbas, 4);
        o->lba_shift = (lbaf >> 16) & 0xff;
        /* One PRP list page describes 512 pages after the first. */
        uint64_t list_max = (uint64_t)LIST_N * PG;
        uint64_t mx = mdts ? (uint64_t)PG << mdts : list_max;
        o->max_xfer = mx < list_max ? mx : list_max;
        return o->lba_shift >= 9 && o->lba_shift <= 12 && o->nsze ? 0 : -EIO;
}
