/* tests/integration/nvme_drv.c: a small polling NVMe driver for tests and benchmarks (nvme_drv.h).
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "nvme_drv.h"

#define PG      4096u
#define LIST_N  (PG / 8) /* PRP entries in one list page */
#define MAX_LEN ((uint64_t)LIST_N * PG)

/* ---- registers: naturally aligned loads and stores, never torn ---------------------------- */

static uint32_t r32(const struct nvme_ctrl *c, uint32_t off)
{
        return __atomic_load_n((volatile uint32_t *)(c->regs + off), __ATOMIC_ACQUIRE);
}

static uint64_t r64(const struct nvme_ctrl *c, uint32_t off)
{
        return __atomic_load_n((volatile uint64_t *)(c->regs + off), __ATOMIC_ACQUIRE);
}

static void w32(struct nvme_ctrl *c, uint32_t off, uint32_t v)
{
        __atomic_store_n((volatile uint32_t *)(c->regs + off), v, __ATOMIC_RELEASE);
}

static void w64(struct nvme_ctrl *c, uint32_t off, uint64_t v)
{
        __atomic_store_n((volatile uint64_t *)(c->regs + off), v, __ATOMIC_RELEASE);
}

static uint64_t now_ns(void)
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

static uint64_t le(const uint8_t *p, unsigned n)
{
        uint64_t v = 0;
        for (unsigned i = 0; i < n; i++)
                v |= (uint64_t)p[i] << (8 * i);
        return v;
}

/* ---- DMA memory ---------------------------------------------------------------------------- */

int nvme_dma_alloc(struct nvme_dma *d, uint64_t size, uint64_t align, void **va, uint64_t *dev)
{
        if (!align || (align & (align - 1)))
                return -EINVAL;
        /* Align the controller's address (the one that must be aligned). */
        uint64_t at = d->used;
        uint64_t mis = (d->dev + at) & (align - 1);
        if (mis)
                at += align - mis;
        if (at > d->size || size > d->size - at)
                return -ENOMEM;
        d->used = at + size;
        memset(d->va + at, 0, size);
        *va = d->va + at;
        if (dev)
                *dev = d->dev + at;
        return 0;
}

uint64_t nvme_dma_addr(const struct nvme_dma *d, const void *va)
{
        return d->dev + (uint64_t)((const uint8_t *)va - d->va);
}

void nvme_wait_default(struct nvme_wait *w)
{
        *w = (struct nvme_wait){.timeout_ms = 2000, .spin_ns = 20000, .nap_ns = 20000};
}

/* ---- controller state ---------------------------------------------------------------------- */

/* Wait until (CSTS & mask) == want; -EIO on all ones (nothing answers), or on a fatal status
 * while cfs_fails. */
static int wait_csts(struct nvme_ctrl *c, uint32_t mask, uint32_t want, bool cfs_fails)
{
        uint64_t to = NTBF_NVME_CAP_TO(c->cap) * UINT64_C(500000000);
        if (!to)
                to = UINT64_C(10000000000);
        for (uint64_t t0 = now_ns();;) {
                uint32_t s = r32(c, NTBF_NVME_REG_CSTS);
                if (s == UINT32_MAX || (cfs_fails && (s & NTBF_NVME_CSTS_CFS)))
                        return -EIO;
                if ((s & mask) == want)
                        return 0;
                if (now_ns() - t0 > to)
                        return -ETIMEDOUT;
                nap(20000);
        }
}

int nvme_ctrl_disable(struct nvme_ctrl *c)
{
        uint32_t cc = r32(c, NTBF_NVME_REG_CC);
        if (cc == UINT32_MAX)
                return -EIO;
        if (cc & (NTBF_NVME_CC_EN | (3u << 14)))
                w32(c, NTBF_NVME_REG_CC, cc & ~(NTBF_NVME_CC_EN | (3u << 14)));
        return wait_csts(c, NTBF_NVME_CSTS_RDY, 0, false);
}

int nvme_ctrl_enable(struct nvme_ctrl *c, volatile void *bar0, struct nvme_dma *dma,
                     uint32_t admin_entries)
{
        c->regs = bar0;
        c->dma = dma;
        c->cap = r64(c, NTBF_NVME_REG_CAP);
        if (c->cap == UINT64_MAX)
                return -EIO; /* nothing answers behind the mapping */
        if (admin_entries < 2 || admin_entries > 4096)
                return -EINVAL;
        int r = nvme_ctrl_disable(c);
        if (r)
                return r;
        if (!c->admin.sq || c->admin.entries != admin_entries) {
                r = nvme_queue_alloc(dma, admin_entries, &c->admin);
                if (r)
                        return r;
        }
        if (!c->id) {
                void *va;
                r = nvme_dma_alloc(dma, PG, PG, &va, &c->id_dev);
                if (r)
                        return r;
                c->id = va;
        }
        nvme_queue_bind(&c->admin, bar0, 0);
        nvme_queue_clear(&c->admin);
        uint32_t n = admin_entries - 1;
        w32(c, NTBF_NVME_REG_AQA, n << 16 | n);
        w64(c, NTBF_NVME_REG_ASQ, c->admin.sq_dev);
        w64(c, NTBF_NVME_REG_ACQ, c->admin.cq_dev);
        w32(c, NTBF_NVME_REG_CC, NTBF_NVME_CC_EN | NTBF_NVME_CC_IOSQES_64 | NTBF_NVME_CC_IOCQES_16);
        return wait_csts(c, NTBF_NVME_CSTS_RDY, NTBF_NVME_CSTS_RDY, true);
}

int nvme_ctrl_shutdown(struct nvme_ctrl *c)
{
        uint32_t cc = r32(c, NTBF_NVME_REG_CC);
        if (cc == UINT32_MAX)
                return -EIO;
        w32(c, NTBF_NVME_REG_CC, (cc & ~(3u << 14)) | NTBF_NVME_CC_SHN_NORMAL);
        return wait_csts(c, NTBF_NVME_CSTS_SHST_MASK, NTBF_NVME_CSTS_SHST_DONE, true);
}

/* ---- queues -------------------------------------------------------------------------------- */

int nvme_queue_alloc(struct nvme_dma *dma, uint32_t entries, struct nvme_queue *q)
{
        return nvme_queue_alloc_cq(dma, entries, entries, q);
}

int nvme_queue_alloc_cq(struct nvme_dma *dma, uint32_t entries, uint32_t cq_entries,
                        struct nvme_queue *q)
{
        memset(q, 0, sizeof(*q));
        if (entries < 2 || entries > NTBF_NVME_MQES + 1 || cq_entries < 2 ||
            cq_entries > NTBF_NVME_MQES + 1)
                return -EINVAL;
        void *sq, *cq, *prp;
        int r = nvme_dma_alloc(dma, (uint64_t)entries * 64, PG, &sq, &q->sq_dev);
        if (!r)
                r = nvme_dma_alloc(dma, (uint64_t)cq_entries * 16, PG, &cq, &q->cq_dev);
        if (!r)
                r = nvme_dma_alloc(dma, (uint64_t)entries * PG, PG, &prp, &q->prp_dev);
        if (r)
                return r;
        q->sq = sq;
        q->cq = cq;
        q->prp = prp;
        q->entries = entries;
        q->cq_entries = cq_entries;
        q->phase = 1;
        return 0;
}

void nvme_queue_bind(struct nvme_queue *q, volatile void *bar0, uint16_t qid)
{
        volatile uint8_t *regs = bar0;
        q->qid = qid;
        q->sq_db = (volatile uint32_t *)(regs + NTBF_NVME_SQ_TDBL(qid));
        q->cq_db = (volatile uint32_t *)(regs + NTBF_NVME_CQ_HDBL(qid));
        q->sq_tail = q->sq_head = q->cq_head = 0;
        q->phase = 1;
}

void nvme_queue_clear(struct nvme_queue *q)
{
        memset(q->sq, 0, (size_t)q->entries * 64);
        memset((void *)q->cq, 0, (size_t)q->cq_entries * 16);
        q->sq_tail = q->sq_head = q->cq_head = 0;
        q->phase = 1;
}

int nvme_submit(struct nvme_queue *q, struct ntbf_nvme_sqe *cmd)
{
        uint32_t next = (q->sq_tail + 1) % q->entries;
        if (next == q->sq_head)
                return -EBUSY;
        if (q->next_cid == 0xffff)
                q->next_cid = 0; /* 0xffff is what a failed fetch completes with */
        cmd->cid = q->next_cid++;
        memcpy(&q->sq[q->sq_tail], cmd, sizeof(*cmd));
        q->sq_tail = next;
        /* The entry is in memory before the controller can see the new tail. */
        __atomic_store_n(q->sq_db, q->sq_tail, __ATOMIC_RELEASE);
        return cmd->cid;
}

int nvme_reap(struct nvme_queue *q, struct ntbf_nvme_cqe *out)
{
        volatile struct ntbf_nvme_cqe *e = &q->cq[q->cq_head];
        /* Dword 3 (CID, phase, status) is published last and whole (devmodel.h). */
        uint32_t dw3 =
            __atomic_load_n((volatile uint32_t *)((volatile uint8_t *)e + 12), __ATOMIC_ACQUIRE);
        if (((dw3 >> 16) & 1) != q->phase)
                return 0;
        out->dw0 = e->dw0;
        out->dw1 = e->dw1;
        out->sqhd = e->sqhd;
        out->sqid = e->sqid;
        out->cid = (uint16_t)dw3;
        out->status = (uint16_t)(dw3 >> 16);
        if (++q->cq_head == q->cq_entries) {
                q->cq_head = 0;
                q->phase ^= 1;
        }
        if (out->sqhd < q->entries)
                q->sq_head = out->sqhd;
        __atomic_store_n(q->cq_db, q->cq_head, __ATOMIC_RELEASE);
        return 1;
}

int nvme_wait_cid(struct nvme_queue *q, const struct nvme_wait *w, uint16_t cid,
                  struct ntbf_nvme_cqe *out)
{
        uint64_t t0 = now_ns(), limit = (uint64_t)w->timeout_ms * 1000000u;
        for (;;) {
                struct ntbf_nvme_cqe e;
                while (nvme_reap(q, &e)) {
                        if (e.cid == cid) {
                                if (out)
                                        *out = e;
                                return 0;
                        }
                        q->stray++;
                }
                uint64_t dt = now_ns() - t0;
                if (dt > limit)
                        return -ETIMEDOUT;
                if (w->nap_ns && dt > w->spin_ns)
                        nap(w->nap_ns);
        }
}

/* ---- commands ------------------------------------------------------------------------------ */

int nvme_admin(struct nvme_ctrl *c, struct ntbf_nvme_sqe *cmd, struct ntbf_nvme_cqe *out)
{
        struct ntbf_nvme_cqe e;
        int cid = nvme_submit(&c->admin, cmd);
        if (cid < 0)
                return cid;
        int r = nvme_wait_cid(&c->admin, &c->wait, (uint16_t)cid, &e);
        if (r)
                return r;
        if (out)
                *out = e;
        return nvme_cqe_status(&e);
}

int nvme_identify(struct nvme_ctrl *c, uint8_t cns, uint32_t nsid)
{
        memset(c->id, 0, PG);
        struct ntbf_nvme_sqe s = {.opc = NTBF_NVME_ADM_IDENTIFY, .nsid = nsid, .cdw10 = cns};
        s.prp1 = c->id_dev;
        return nvme_admin(c, &s, NULL);
}

int nvme_ctrl_identify(struct nvme_ctrl *c, uint8_t ctrl[4096], uint8_t ns[4096])
{
        int r = nvme_identify(c, NTBF_NVME_CNS_CTRL, 0);
        if (r)
                return r;
        if (ctrl)
                memcpy(ctrl, c->id, PG);
        uint8_t mdts = c->id[NTBF_NVME_IDC_MDTS];
        r = nvme_identify(c, NTBF_NVME_CNS_NS, 1);
        if (r)
                return r;
        if (ns)
                memcpy(ns, c->id, PG);
        c->nsze = le(c->id + NTBF_NVME_IDNS_NSZE, 8);
        uint32_t flbas = c->id[NTBF_NVME_IDNS_FLBAS] & 0xf;
        uint32_t lbaf = (uint32_t)le(c->id + NTBF_NVME_IDNS_LBAF0 + 4 * flbas, 4);
        c->lba_shift = (lbaf >> 16) & 0xff;
        uint64_t mx = mdts ? (uint64_t)PG << mdts : MAX_LEN;
        c->max_xfer = mx < MAX_LEN ? mx : MAX_LEN;
        return c->lba_shift >= 9 && c->lba_shift <= 12 ? 0 : -EIO;
}

int nvme_create_qpair(struct nvme_ctrl *c, uint16_t qid, uint32_t entries, uint64_t sq_dev,
                      uint64_t cq_dev)
{
        return nvme_create_qpair_cq(c, qid, entries, entries, sq_dev, cq_dev);
}

int nvme_create_qpair_cq(struct nvme_ctrl *c, uint16_t qid, uint32_t entries, uint32_t cq_entries,
                         uint64_t sq_dev, uint64_t cq_dev)
{
        if (!qid || entries < 2 || entries > NTBF_NVME_MQES + 1 || cq_entries < 2 ||
            cq_entries > NTBF_NVME_MQES + 1)
                return -EINVAL;
        uint32_t sz = (entries - 1) << 16 | qid;
        /* Physically contiguous (PC), polled: IEN 0, vector 0. */
        struct ntbf_nvme_sqe s = {
            .opc = NTBF_NVME_ADM_CREATE_CQ, .cdw10 = (cq_entries - 1) << 16 | qid, .cdw11 = 1};
        s.prp1 = cq_dev;
        int r = nvme_admin(c, &s, NULL);
        if (r)
                return r;
        s = (struct ntbf_nvme_sqe){
            .opc = NTBF_NVME_ADM_CREATE_SQ, .cdw10 = sz, .cdw11 = (uint32_t)qid << 16 | 1};
        s.prp1 = sq_dev;
        r = nvme_admin(c, &s, NULL);
        if (r) {
                struct ntbf_nvme_sqe d = {.opc = NTBF_NVME_ADM_DELETE_CQ, .cdw10 = qid};
                nvme_admin(c, &d, NULL);
        }
        return r;
}

int nvme_delete_qpair(struct nvme_ctrl *c, uint16_t qid)
{
        struct ntbf_nvme_sqe s = {.opc = NTBF_NVME_ADM_DELETE_SQ, .cdw10 = qid};
        int r = nvme_admin(c, &s, NULL);
        s = (struct ntbf_nvme_sqe){.opc = NTBF_NVME_ADM_DELETE_CQ, .cdw10 = qid};
        int r2 = nvme_admin(c, &s, NULL);
        return r ? r : r2;
}

int nvme_rw_prep(const struct nvme_ctrl *c, struct nvme_queue *q, struct ntbf_nvme_sqe *cmd,
                 uint8_t opc, uint64_t slba, uint32_t nlb, uint64_t dev, uint32_t cdw12_flags)
{
        uint64_t len = (uint64_t)nlb << c->lba_shift;
        if (!nlb || nlb > 65536 || len > c->max_xfer || (dev & 3) || !c->lba_shift)
                return -EINVAL;
        memset(cmd, 0, sizeof(*cmd));
        cmd->opc = opc;
        cmd->nsid = 1;
        cmd->prp1 = dev;
        uint64_t first = PG - (dev & (PG - 1));
        if (len > first) {
                uint64_t rest = len - first, next = dev + first;
                if (rest <= PG) {
                        cmd->prp2 = next;
                } else {
                        uint64_t n = (rest + PG - 1) / PG;
                        if (n > LIST_N)
                                return -EINVAL;
                        uint64_t *list = q->prp + (size_t)q->sq_tail * LIST_N;
                        for (uint64_t i = 0; i < n; i++)
                                list[i] = next + i * PG;
                        cmd->prp2 = q->prp_dev + (uint64_t)q->sq_tail * PG;
                }
        }
        cmd->cdw10 = (uint32_t)slba;
        cmd->cdw11 = (uint32_t)(slba >> 32);
        cmd->cdw12 = (nlb - 1) | cdw12_flags;
        return 0;
}

int nvme_rw(struct nvme_ctrl *c, struct nvme_queue *q, uint8_t opc, uint64_t pos, uint64_t len,
            uint64_t dev)
{
        uint64_t bs = UINT64_C(1) << c->lba_shift;
        if (!c->lba_shift || pos % bs || len % bs || !len)
                return -EINVAL;
        struct ntbf_nvme_sqe s;
        int r = nvme_rw_prep(c, q, &s, opc, pos >> c->lba_shift, (uint32_t)(len >> c->lba_shift),
                             dev, 0);
        if (r)
                return r;
        int cid = nvme_submit(q, &s);
        if (cid < 0)
                return cid;
        struct ntbf_nvme_cqe e;
        r = nvme_wait_cid(q, &c->wait, (uint16_t)cid, &e);
        return r ? r : nvme_cqe_status(&e);
}

int nvme_flush(struct nvme_ctrl *c, struct nvme_queue *q)
{
        struct ntbf_nvme_sqe s = {.opc = NTBF_NVME_CMD_FLUSH, .nsid = 1};
        int cid = nvme_submit(q, &s);
        if (cid < 0)
                return cid;
        struct ntbf_nvme_cqe e;
        int r = nvme_wait_cid(q, &c->wait, (uint16_t)cid, &e);
        return r ? r : nvme_cqe_status(&e);
}
