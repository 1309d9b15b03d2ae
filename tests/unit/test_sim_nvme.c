/* tests/unit/test_sim_nvme.c: the simulated NVMe controller driven like a userspace driver would.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "cfgspace.h"
#include "fake_dma.h"
#include "nvme.h"

#define MEM_BASE  UINT64_C(0x100000000)
#define MEM_SIZE  (UINT64_C(64) << 20)
#define MSI_ADDR  (MEM_BASE + MEM_SIZE - 4096) /* interrupt messages land here */
#define BAR0_ADDR UINT64_C(0xfe000000)
#define BAR2_ADDR UINT64_C(0x38000000000)
#define CAPACITY  (UINT64_C(64) << 20)
#define PG        4096u

struct hcq {
        uint16_t id;
        uint64_t addr;
        uint32_t size, head;
        uint16_t phase;
};

struct hsq {
        uint16_t id;
        uint64_t addr;
        uint32_t size, tail;
        struct hcq *cq;
};

struct t {
        struct ntbf_device d;
        struct fake_dma *f;
        struct fake_dev dev;
        void *st;
        char path[64];
        int fd;
        uint64_t brk, now;
        struct hcq acq;
        struct hsq asq;
        uint16_t cid;
};

typedef void (*tweak_fn)(struct ntbf_sim_params *p);

static struct t *tsetup(tweak_fn tweak)
{
        struct t *t = calloc(1, sizeof(*t));
        assert_non_null(t);
        snprintf(t->d.name, sizeof(t->d.name), "nvme0");
        t->d.bus = 3;
        t->d.functions = 1;
        ntbf_sim_defaults(&t->d.sim, NTBF_SIM_NVME);
        t->d.sim.capacity = CAPACITY;
        t->d.sim.msix = 4;
        if (tweak)
                tweak(&t->d.sim);
        ntbf_device_apply_sim(&t->d);
        t->d.bars[0].addr = BAR0_ADDR;
        t->d.bars[2].addr = t->d.bars[2].size ? BAR2_ADDR : 0;
        t->f = fake_dma_new(MEM_BASE, MEM_SIZE);
        assert_non_null(t->f);
        snprintf(t->path, sizeof(t->path), "/tmp/ntbf-nvme-XXXXXX");
        t->fd = mkstemp(t->path);
        assert_true(t->fd >= 0);
        assert_int_equal(fake_dev_init(&t->dev, &t->d, t->f, t->fd), 0);
        assert_int_equal(ntbf_sim_nvme_ops.create(&t->dev.env, &t->st), 0);
        t->brk = MEM_BASE;
        return t;
}

static void tfree(struct t *t)
{
        ntbf_sim_nvme_ops.destroy(t->st);
        fake_dev_free(&t->dev);
        fake_dma_free(t->f);
        close(t->fd);
        unlink(t->path);
        free(t);
}

static uint64_t alloc(struct t *t, uint64_t size)
{
        uint64_t a = t->brk;
        t->brk += (size + PG - 1) & ~(uint64_t)(PG - 1);
        assert_true(t->brk <= MSI_ADDR);
        memset(fake_dma_ptr(t->f, a), 0, size);
        return a;
}

static void *P(struct t *t, uint64_t a)
{
        void *p = fake_dma_ptr(t->f, a);
        assert_non_null(p);
        return p;
}

static uint32_t reg(struct t *t, uint32_t off)
{
        return __atomic_load_n((uint32_t *)(void *)((uint8_t *)t->dev.bar[0] + off),
                               __ATOMIC_ACQUIRE);
}

static uint64_t reg64(struct t *t, uint32_t off)
{
        return __atomic_load_n((uint64_t *)(void *)((uint8_t *)t->dev.bar[0] + off),
                               __ATOMIC_ACQUIRE);
}

static void setreg(struct t *t, uint32_t off, uint32_t v)
{
        __atomic_store_n((uint32_t *)(void *)((uint8_t *)t->dev.bar[0] + off), v, __ATOMIC_RELEASE);
}

static void setreg64(struct t *t, uint32_t off, uint64_t v)
{
        __atomic_store_n((uint64_t *)(void *)((uint8_t *)t->dev.bar[0] + off), v, __ATOMIC_RELEASE);
}

static int poll_(struct t *t)
{
        t->now += 1000;
        return ntbf_sim_nvme_ops.poll(t->st, t->now);
}

static uint16_t status(const struct ntbf_nvme_cqe *c)
{
        return (uint16_t)(((c->status >> 9) & 7) << 8 | ((c->status >> 1) & 0xff));
}

static void sq_push(struct t *t, struct hsq *q, const struct ntbf_nvme_sqe *e)
{
        memcpy(P(t, q->addr + (uint64_t)q->tail * 64), e, 64);
        q->tail = (q->tail + 1) % q->size;
        setreg(t, NTBF_NVME_SQ_TDBL(q->id), q->tail);
}

static bool cq_pop(struct t *t, struct hcq *c, struct ntbf_nvme_cqe *out)
{
        struct ntbf_nvme_cqe *e = P(t, c->addr + (uint64_t)c->head * 16);
        uint16_t st = __atomic_load_n(&e->status, __ATOMIC_ACQUIRE);
        if ((st & 1) != c->phase)
                return false;
        *out = *e;
        if (++c->head == c->size) {
                c->head = 0;
                c->phase ^= 1;
        }
        setreg(t, NTBF_NVME_CQ_HDBL(c->id), c->head);
        return true;
}

static struct ntbf_nvme_cqe run(struct t *t, struct hsq *q, struct ntbf_nvme_sqe e)
{
        struct ntbf_nvme_cqe c;
        e.cid = t->cid++;
        sq_push(t, q, &e);
        for (int i = 0; i < 100; i++) {
                poll_(t);
                if (cq_pop(t, q->cq, &c)) {
                        assert_int_equal(c.cid, e.cid);
                        assert_int_equal(c.sqid, q->id);
                        assert_int_equal(c.sqhd, q->tail);
                        return c;
                }
        }
        fail_msg("no completion for opcode 0x%x on SQ %u", e.opc, q->id);
        return c;
}

static uint16_t adm(struct t *t, struct ntbf_nvme_sqe e, uint32_t *dw0)
{
        struct ntbf_nvme_cqe c = run(t, &t->asq, e);
        if (dw0)
                *dw0 = c.dw0;
        return status(&c);
}

static void enable_sizes(struct t *t, uint32_t qsize, uint32_t cc_extra)
{
        fake_dev_bus_master(&t->dev, 1);
        t->acq = (struct hcq){.id = 0, .addr = alloc(t, qsize * 16), .size = qsize, .phase = 1};
        t->asq = (struct hsq){.id = 0, .addr = alloc(t, qsize * 64), .size = qsize, .cq = &t->acq};
        setreg(t, NTBF_NVME_REG_AQA, (qsize - 1) | (qsize - 1) << 16);
        setreg64(t, NTBF_NVME_REG_ASQ, t->asq.addr);
        setreg64(t, NTBF_NVME_REG_ACQ, t->acq.addr);
        setreg(t, NTBF_NVME_REG_CC, NTBF_NVME_CC_EN | cc_extra);
        poll_(t);
}

static void enable(struct t *t)
{
        enable_sizes(t, 32, NTBF_NVME_CC_IOSQES_64 | NTBF_NVME_CC_IOCQES_16);
        assert_int_equal(reg(t, NTBF_NVME_REG_CSTS), NTBF_NVME_CSTS_RDY);
}

static void disable(struct t *t)
{
        setreg(t, NTBF_NVME_REG_CC, 0);
        poll_(t);
        assert_int_equal(reg(t, NTBF_NVME_REG_CSTS) & NTBF_NVME_CSTS_RDY, 0);
}

static uint16_t create_cq(struct t *t, struct hcq *c, uint16_t qid, uint32_t size, bool ien,
                          uint16_t iv)
{
        *c = (struct hcq){.id = qid, .addr = alloc(t, size * 16), .size = size, .phase = 1};
        struct ntbf_nvme_sqe e = {.opc = NTBF_NVME_ADM_CREATE_CQ, .prp1 = c->addr};
        e.cdw10 = qid | (size - 1) << 16;
        e.cdw11 = 1 | (ien ? 2u : 0u) | (uint32_t)iv << 16;
        return adm(t, e, NULL);
}

static uint16_t create_sq(struct t *t, struct hsq *q, uint16_t qid, uint32_t size, struct hcq *c)
{
        *q = (struct hsq){.id = qid, .addr = alloc(t, size * 64), .size = size, .cq = c};
        struct ntbf_nvme_sqe e = {.opc = NTBF_NVME_ADM_CREATE_SQ, .prp1 = q->addr};
        e.cdw10 = qid | (size - 1) << 16;
        e.cdw11 = 1 | (uint32_t)c->id << 16;
        return adm(t, e, NULL);
}

static void io_pair(struct t *t, struct hsq *q, struct hcq *c, uint16_t qid, uint32_t size)
{
        assert_int_equal(create_cq(t, c, qid, size, false, 0), 0);
        assert_int_equal(create_sq(t, q, qid, size, c), 0);
}

static struct ntbf_nvme_sqe rw(uint8_t opc, uint64_t slba, uint32_t nlb, uint64_t prp1,
                               uint64_t prp2)
{
        struct ntbf_nvme_sqe e = {.opc = opc, .nsid = 1, .prp1 = prp1, .prp2 = prp2};
        e.cdw10 = (uint32_t)slba;
        e.cdw11 = (uint32_t)(slba >> 32);
        e.cdw12 = nlb - 1;
        return e;
}

static uint16_t io(struct t *t, struct hsq *q, struct ntbf_nvme_sqe e)
{
        struct ntbf_nvme_cqe c = run(t, q, e);
        return status(&c);
}

/* ---- data buffers scattered over pages, described by PRPs ---------------------------------- */

struct buf {
        uint64_t pages[1100];
        uint32_t n, off;
        uint64_t len, prp1, prp2;
};

/*
 * len bytes starting at offset off of the first page; pages are not contiguous (a gap page
 * between each). PRP lists start list_room entries before the end of a page (0: at its
 * start), so that small rooms force chaining through the last entry.
 */
static void buf_make(struct t *t, struct buf *b, uint32_t off, uint64_t len, uint32_t list_room)
{
        b->off = off;
        b->len = len;
        b->n = (uint32_t)((off + len + PG - 1) / PG);
        assert_true(b->n <= sizeof(b->pages) / sizeof(b->pages[0]));
        for (uint32_t i = 0; i < b->n; i++) {
                b->pages[i] = alloc(t, PG);
                alloc(t, PG);
        }
        b->prp1 = b->pages[0] + off;
        b->prp2 = 0;
        if (b->n == 2)
                b->prp2 = b->pages[1];
        if (b->n <= 2)
                return;
        uint64_t pos = alloc(t, PG) + (list_room ? PG - 8 * list_room : 0);
        b->prp2 = pos;
        for (uint32_t i = 1; i < b->n;) {
                uint32_t room = (uint32_t)((PG - (pos & (PG - 1))) / 8), left = b->n - i;
                uint64_t *ent = P(t, pos);
                if (left <= room) {
                        for (uint32_t k = 0; k < left; k++)
                                ent[k] = b->pages[i + k];
                        break;
                }
                for (uint32_t k = 0; k < room - 1; k++)
                        ent[k] = b->pages[i + k];
                i += room - 1;
                uint64_t next = alloc(t, PG);
                ent[room - 1] = next;
                pos = next;
        }
}

static uint8_t pat(uint32_t seed, uint64_t i)
{
        uint64_t x = (i + 1) * UINT64_C(0x9e3779b97f4a7c15) ^ seed;
        return (uint8_t)(x >> 29);
}

static uint8_t *buf_byte(struct t *t, struct buf *b, uint64_t i)
{
        uint64_t at = b->off + i;
        return (uint8_t *)P(t, b->pages[at / PG]) + at % PG;
}

static void buf_fill(struct t *t, struct buf *b, uint32_t seed)
{
        for (uint64_t i = 0; i < b->len; i++)
                *buf_byte(t, b, i) = pat(seed, i);
}

static void buf_check(struct t *t, struct buf *b, uint32_t seed)
{
        for (uint64_t i = 0; i < b->len; i++)
                if (*buf_byte(t, b, i) != pat(seed, i))
                        fail_msg("byte %llu: 0x%02x, expected 0x%02x", (unsigned long long)i,
                                 *buf_byte(t, b, i), pat(seed, i));
}

static void file_check(int fd, uint64_t pos, uint64_t len, uint32_t seed)
{
        uint8_t *d = malloc(len);
        assert_non_null(d);
        assert_int_equal(pread(fd, d, len, (off_t)pos), (ssize_t)len);
        for (uint64_t i = 0; i < len; i++)
                if (d[i] != pat(seed, i))
                        fail_msg("file byte %llu: 0x%02x, expected 0x%02x", (unsigned long long)i,
                                 d[i], pat(seed, i));
        free(d);
}

static uint64_t le(const uint8_t *p, unsigned len)
{
        uint64_t v = 0;
        for (unsigned i = 0; i < len; i++)
                v |= (uint64_t)p[i] << (8 * i);
        return v;
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_enable_handshake(void **state)
{
        (void)state;
        struct t *t = tsetup(NULL);
        uint64_t cap = reg64(t, NTBF_NVME_REG_CAP);
        assert_int_equal(NTBF_NVME_CAP_MQES(cap), 4095);
        assert_true(cap & NTBF_NVME_CAP_CQR);
        assert_int_equal(NTBF_NVME_CAP_TO(cap), NTBF_NVME_TO);
        assert_int_equal(NTBF_NVME_CAP_DSTRD(cap), 0);
        assert_true(cap & NTBF_NVME_CAP_CSS_NVM);
        assert_int_equal(NTBF_NVME_CAP_MPSMIN(cap), 0);
        assert_int_equal(NTBF_NVME_CAP_MPSMAX(cap), 0);
        assert_false(cap & NTBF_NVME_CAP_CMBS);
        assert_int_equal(reg(t, NTBF_NVME_REG_VS), 0x00010400);
        assert_int_equal(reg(t, NTBF_NVME_REG_CSTS), 0);
        /* A driver's write to a read-only register does not stick. */
        setreg64(t, NTBF_NVME_REG_CAP, 0);
        setreg(t, NTBF_NVME_REG_CSTS, 0xff);
        poll_(t);
        assert_int_equal(reg64(t, NTBF_NVME_REG_CAP), cap);
        assert_int_equal(reg(t, NTBF_NVME_REG_CSTS), 0);

        enable(t);
        uint32_t dw0;
        struct ntbf_nvme_sqe id = {.opc = NTBF_NVME_ADM_IDENTIFY, .prp1 = alloc(t, PG)};
        id.cdw10 = NTBF_NVME_CNS_CTRL;
        assert_int_equal(adm(t, id, &dw0), 0);
        disable(t);
        assert_int_equal(reg(t, NTBF_NVME_REG_CSTS), 0);

        /* Unsupported memory page size: fatal status instead of ready; CC.EN 0 clears it. */
        enable_sizes(t, 32, 1u << 7);
        assert_int_equal(reg(t, NTBF_NVME_REG_CSTS), NTBF_NVME_CSTS_CFS);
        disable(t);
        assert_int_equal(reg(t, NTBF_NVME_REG_CSTS), 0);
        /* A one-entry admin queue is too small. */
        enable_sizes(t, 1, 0);
        assert_int_equal(reg(t, NTBF_NVME_REG_CSTS), NTBF_NVME_CSTS_CFS);
        disable(t);
        enable(t);
        tfree(t);
}

static void test_identify(void **state)
{
        (void)state;
        struct t *t = tsetup(NULL);
        enable(t);
        uint64_t a = alloc(t, PG);
        uint8_t *d = P(t, a);
        struct ntbf_nvme_sqe e = {.opc = NTBF_NVME_ADM_IDENTIFY, .prp1 = a};
        e.cdw10 = NTBF_NVME_CNS_CTRL;
        assert_int_equal(adm(t, e, NULL), 0);
        assert_int_equal(le(d + NTBF_NVME_IDC_VID, 2), NTBF_SIM_VENDOR_ID);
        assert_int_equal(le(d + NTBF_NVME_IDC_SSVID, 2), NTBF_SIM_VENDOR_ID);
        assert_memory_equal(d + NTBF_NVME_IDC_SN, "NTBF", 4);
        for (int i = 4; i < 20; i++)
                assert_non_null(strchr("0123456789ABCDEF", d[NTBF_NVME_IDC_SN + i]));
        char mn[41] = {0};
        memcpy(mn, d + NTBF_NVME_IDC_MN, 40);
        assert_string_equal(mn, "ntbfab simulated NVMe                   ");
        assert_memory_equal(d + NTBF_NVME_IDC_FR, "0.1.0   ", 8);
        assert_int_equal(d[NTBF_NVME_IDC_MDTS], 5);
        assert_int_equal(le(d + NTBF_NVME_IDC_CNTLID, 2), 0);
        assert_int_equal(le(d + NTBF_NVME_IDC_VER, 4), 0x00010400);
        assert_int_equal(d[NTBF_NVME_IDC_SQES], 0x66);
        assert_int_equal(d[NTBF_NVME_IDC_CQES], 0x44);
        assert_int_equal(le(d + NTBF_NVME_IDC_NN, 4), 1);
        assert_int_equal(le(d + NTBF_NVME_IDC_ONCS, 2), NTBF_NVME_ONCS_WRITE_ZEROES);
        assert_int_equal(d[NTBF_NVME_IDC_VWC] & 1, 1);
        assert_int_equal(d[NTBF_NVME_IDC_ELPE], 63);
        assert_int_equal(d[NTBF_NVME_IDC_AERL], 3);
        assert_int_equal(le(d + NTBF_NVME_IDC_SGLS, 4), 0);
        assert_string_equal((char *)d + NTBF_NVME_IDC_SUBNQN,
                            "nqn.2026-01.io.ntbfab:sim:n0.nvme0.0");
        /* The serial number is stable for the same node, device and function. */
        char sn[21] = {0};
        memcpy(sn, d + NTBF_NVME_IDC_SN, 20);

        memset(d, 0xee, PG);
        e.cdw10 = NTBF_NVME_CNS_NS;
        e.nsid = 1;
        assert_int_equal(adm(t, e, NULL), 0);
        assert_int_equal(le(d + NTBF_NVME_IDNS_NSZE, 8), CAPACITY / 512);
        assert_int_equal(le(d + NTBF_NVME_IDNS_NCAP, 8), CAPACITY / 512);
        assert_int_equal(le(d + NTBF_NVME_IDNS_NUSE, 8), CAPACITY / 512);
        assert_int_equal(d[NTBF_NVME_IDNS_NLBAF], 0);
        assert_int_equal(d[NTBF_NVME_IDNS_FLBAS], 0);
        assert_int_equal(le(d + NTBF_NVME_IDNS_LBAF0, 4), 9u << 16);
        assert_int_equal(le(d + NTBF_NVME_IDNS_NVMCAP, 8), CAPACITY);
        assert_int_equal(d[200], 0); /* the rest is zeroed, not left over */
        e.nsid = 2;
        assert_int_equal(adm(t, e, NULL), NTBF_NVME_SC_INVALID_NS);
        e.nsid = 0;
        assert_int_equal(adm(t, e, NULL), NTBF_NVME_SC_INVALID_NS);

        memset(d, 0xee, PG);
        e.cdw10 = NTBF_NVME_CNS_ACTIVE_NS;
        e.nsid = 0;
        assert_int_equal(adm(t, e, NULL), 0);
        assert_int_equal(le(d, 4), 1);
        assert_int_equal(le(d + 4, 4), 0);
        e.nsid = 1;
        assert_int_equal(adm(t, e, NULL), 0);
        assert_int_equal(le(d, 4), 0);
        e.nsid = 0xfffffffe;
        assert_int_equal(adm(t, e, NULL), NTBF_NVME_SC_INVALID_NS);

        e.cdw10 = NTBF_NVME_CNS_NS_DESC;
        e.nsid = 1;
        assert_int_equal(adm(t, e, NULL), 0);
        assert_int_equal(d[0], 2);
        assert_int_equal(d[1], 16);
        e.cdw10 = 0x10;
        assert_int_equal(adm(t, e, NULL), NTBF_NVME_SC_INVALID_FIELD);
        tfree(t);

        /* 4 KiB LBAs. */
        t = tsetup(NULL);
        t->d.sim.lba_size = 4096;
        ntbf_sim_nvme_ops.destroy(t->st);
        memset(t->dev.cfg, 0, NTBF_SIM_CFG_REGION);
        assert_int_equal(ntbf_sim_nvme_ops.create(&t->dev.env, &t->st), 0);
        enable(t);
        a = alloc(t, PG);
        d = P(t, a);
        e = (struct ntbf_nvme_sqe){.opc = NTBF_NVME_ADM_IDENTIFY, .prp1 = a, .nsid = 1};
        assert_int_equal(adm(t, e, NULL), 0);
        assert_int_equal(le(d + NTBF_NVME_IDNS_NSZE, 8), CAPACITY / 4096);
        assert_int_equal(le(d + NTBF_NVME_IDNS_LBAF0, 4), 12u << 16);
        e.cdw10 = NTBF_NVME_CNS_CTRL;
        assert_int_equal(adm(t, e, NULL), 0);
        assert_memory_equal(d + NTBF_NVME_IDC_SN, sn, 20);
        tfree(t);
}

static uint16_t raw_create(struct t *t, uint8_t opc, uint32_t cdw10, uint32_t cdw11, uint64_t prp1)
{
        struct ntbf_nvme_sqe e = {.opc = opc, .prp1 = prp1, .cdw10 = cdw10, .cdw11 = cdw11};
        return adm(t, e, NULL);
}

static uint16_t del(struct t *t, uint8_t opc, uint16_t qid)
{
        struct ntbf_nvme_sqe e = {.opc = opc, .cdw10 = qid};
        return adm(t, e, NULL);
}

static void test_queue_create_delete(void **state)
{
        (void)state;
        struct t *t = tsetup(NULL); /* 32 queue pairs: I/O ids 1..31; 4 MSI-X vectors */
        enable(t);
        uint64_t m = alloc(t, 64 * 1024);
        const uint8_t CQ = NTBF_NVME_ADM_CREATE_CQ, SQ = NTBF_NVME_ADM_CREATE_SQ;
        /* Create I/O CQ refusals. */
        assert_int_equal(raw_create(t, CQ, 0 | 15u << 16, 1, m), NTBF_NVME_SC_INVALID_QID);
        assert_int_equal(raw_create(t, CQ, 32 | 15u << 16, 1, m), NTBF_NVME_SC_INVALID_QID);
        assert_int_equal(raw_create(t, CQ, 1 | 0u << 16, 1, m), NTBF_NVME_SC_INVALID_QSIZE);
        assert_int_equal(raw_create(t, CQ, 1 | 4096u << 16, 1, m), NTBF_NVME_SC_INVALID_QSIZE);
        assert_int_equal(raw_create(t, CQ, 1 | 15u << 16, 0, m), NTBF_NVME_SC_INVALID_FIELD);
        assert_int_equal(raw_create(t, CQ, 1 | 15u << 16, 3 | 4u << 16, m),
                         NTBF_NVME_SC_INVALID_IV);
        assert_int_equal(raw_create(t, CQ, 1 | 15u << 16, 1, m + 64),
                         NTBF_NVME_SC_INVALID_PRP_OFFSET);
        /* The largest queue (MQES + 1 entries) and the last id are fine. */
        assert_int_equal(raw_create(t, CQ, 31 | 4095u << 16, 3 | 3u << 16, m), 0);
        assert_int_equal(raw_create(t, CQ, 1 | 15u << 16, 1, m), 0);
        assert_int_equal(raw_create(t, CQ, 1 | 15u << 16, 1, m), NTBF_NVME_SC_INVALID_QID);
        /* Create I/O SQ refusals. */
        assert_int_equal(raw_create(t, SQ, 0 | 15u << 16, 1 | 1u << 16, m),
                         NTBF_NVME_SC_INVALID_QID);
        assert_int_equal(raw_create(t, SQ, 32 | 15u << 16, 1 | 1u << 16, m),
                         NTBF_NVME_SC_INVALID_QID);
        assert_int_equal(raw_create(t, SQ, 1 | 0u << 16, 1 | 1u << 16, m),
                         NTBF_NVME_SC_INVALID_QSIZE);
        assert_int_equal(raw_create(t, SQ, 1 | 4096u << 16, 1 | 1u << 16, m),
                         NTBF_NVME_SC_INVALID_QSIZE);
        assert_int_equal(raw_create(t, SQ, 1 | 15u << 16, 0 | 1u << 16, m),
                         NTBF_NVME_SC_INVALID_FIELD);
        assert_int_equal(raw_create(t, SQ, 1 | 15u << 16, 1 | 2u << 16, m),
                         NTBF_NVME_SC_CQ_INVALID);
        assert_int_equal(raw_create(t, SQ, 1 | 15u << 16, 1 | 0u << 16, m),
                         NTBF_NVME_SC_CQ_INVALID);
        assert_int_equal(raw_create(t, SQ, 1 | 15u << 16, 1 | 1u << 16, m + 8),
                         NTBF_NVME_SC_INVALID_PRP_OFFSET);
        assert_int_equal(raw_create(t, SQ, 1 | 15u << 16, 1 | 1u << 16, m), 0);
        assert_int_equal(raw_create(t, SQ, 1 | 15u << 16, 1 | 1u << 16, m),
                         NTBF_NVME_SC_INVALID_QID);
        assert_int_equal(raw_create(t, SQ, 2 | 15u << 16, 1 | 1u << 16, m + PG), 0);
        /* Deletion: a CQ in use by SQs is refused, unknown ids are refused. */
        assert_int_equal(del(t, NTBF_NVME_ADM_DELETE_CQ, 1), NTBF_NVME_SC_INVALID_QUEUE_DELETION);
        assert_int_equal(del(t, NTBF_NVME_ADM_DELETE_SQ, 0), NTBF_NVME_SC_INVALID_QID);
        assert_int_equal(del(t, NTBF_NVME_ADM_DELETE_SQ, 3), NTBF_NVME_SC_INVALID_QID);
        assert_int_equal(del(t, NTBF_NVME_ADM_DELETE_CQ, 0), NTBF_NVME_SC_INVALID_QID);
        assert_int_equal(del(t, NTBF_NVME_ADM_DELETE_CQ, 2), NTBF_NVME_SC_INVALID_QID);
        assert_int_equal(del(t, NTBF_NVME_ADM_DELETE_SQ, 1), 0);
        assert_int_equal(del(t, NTBF_NVME_ADM_DELETE_SQ, 1), NTBF_NVME_SC_INVALID_QID);
        assert_int_equal(del(t, NTBF_NVME_ADM_DELETE_CQ, 1), NTBF_NVME_SC_INVALID_QUEUE_DELETION);
        assert_int_equal(del(t, NTBF_NVME_ADM_DELETE_SQ, 2), 0);
        assert_int_equal(del(t, NTBF_NVME_ADM_DELETE_CQ, 1), 0);
        assert_int_equal(del(t, NTBF_NVME_ADM_DELETE_CQ, 1), NTBF_NVME_SC_INVALID_QID);
        assert_int_equal(del(t, NTBF_NVME_ADM_DELETE_CQ, 31), 0);
        /* The id is free again. */
        assert_int_equal(raw_create(t, CQ, 1 | 15u << 16, 1, m), 0);
        disable(t);

        /* Queue entry sizes must have been set in CC. */
        enable_sizes(t, 32, 0);
        assert_int_equal(raw_create(t, CQ, 1 | 15u << 16, 1, m), NTBF_NVME_SC_INVALID_FIELD);
        disable(t);
        tfree(t);

        /* Without MSI-X only vector 0 exists. */
        t = tsetup(NULL);
        t->d.sim.msix = 0;
        ntbf_sim_nvme_ops.destroy(t->st);
        memset(t->dev.cfg, 0, NTBF_SIM_CFG_REGION);
        assert_int_equal(ntbf_sim_nvme_ops.create(&t->dev.env, &t->st), 0);
        assert_int_equal(ntbf_sim_cfg_find_cap(t->dev.cfg, NTBF_PCI_CAP_ID_MSIX), 0);
        enable(t);
        m = alloc(t, PG);
        assert_int_equal(raw_create(t, CQ, 1 | 15u << 16, 3 | 1u << 16, m),
                         NTBF_NVME_SC_INVALID_IV);
        assert_int_equal(raw_create(t, CQ, 1 | 15u << 16, 3, m), 0);
        tfree(t);
}

static uint16_t set_feat(struct t *t, uint32_t fid, uint32_t v, uint32_t *dw0)
{
        struct ntbf_nvme_sqe e = {.opc = NTBF_NVME_ADM_SET_FEATURES, .cdw10 = fid, .cdw11 = v};
        return adm(t, e, dw0);
}

static uint16_t get_feat(struct t *t, uint32_t fid, uint32_t sel, uint32_t v, uint32_t *dw0)
{
        struct ntbf_nvme_sqe e = {
            .opc = NTBF_NVME_ADM_GET_FEATURES, .cdw10 = fid | sel << 8, .cdw11 = v};
        return adm(t, e, dw0);
}

static void test_num_queues(void **state)
{
        (void)state;
        struct t *t = tsetup(NULL);
        enable(t);
        uint32_t dw0 = 0;
        uint64_t m = alloc(t, 16 * PG);
        const uint8_t CQ = NTBF_NVME_ADM_CREATE_CQ, SQ = NTBF_NVME_ADM_CREATE_SQ;
        assert_int_equal(get_feat(t, NTBF_NVME_FEAT_NUM_QUEUES, 0, 0, &dw0), 0);
        assert_int_equal(dw0, 30 | 30u << 16);
        /* Ask for 3 SQs and 5 CQs (0's based): granted exactly. */
        assert_int_equal(set_feat(t, NTBF_NVME_FEAT_NUM_QUEUES, 2 | 4u << 16, &dw0), 0);
        assert_int_equal(dw0, 2 | 4u << 16);
        assert_int_equal(get_feat(t, NTBF_NVME_FEAT_NUM_QUEUES, 0, 0, &dw0), 0);
        assert_int_equal(dw0, 2 | 4u << 16);
        /* Default and saved values are still the controller's maximum. */
        assert_int_equal(get_feat(t, NTBF_NVME_FEAT_NUM_QUEUES, 1, 0, &dw0), 0);
        assert_int_equal(dw0, 30 | 30u << 16);
        assert_int_equal(get_feat(t, NTBF_NVME_FEAT_NUM_QUEUES, 3, 0, &dw0), 0);
        assert_int_equal(dw0, 0x4);
        /* Asking for more than exist grants the maximum. */
        assert_int_equal(set_feat(t, NTBF_NVME_FEAT_NUM_QUEUES, 100 | 200u << 16, &dw0), 0);
        assert_int_equal(dw0, 30 | 30u << 16);
        assert_int_equal(set_feat(t, NTBF_NVME_FEAT_NUM_QUEUES, 0xffff, &dw0),
                         NTBF_NVME_SC_INVALID_FIELD);
        assert_int_equal(set_feat(t, NTBF_NVME_FEAT_NUM_QUEUES, 2 | 4u << 16, &dw0), 0);
        /* Queue ids beyond the allocation are refused. */
        assert_int_equal(raw_create(t, CQ, 6 | 15u << 16, 1, m), NTBF_NVME_SC_INVALID_QID);
        assert_int_equal(raw_create(t, CQ, 5 | 15u << 16, 1, m), 0);
        assert_int_equal(raw_create(t, SQ, 4 | 15u << 16, 1 | 5u << 16, m + PG),
                         NTBF_NVME_SC_INVALID_QID);
        assert_int_equal(raw_create(t, SQ, 3 | 15u << 16, 1 | 5u << 16, m + PG), 0);
        /* Once queues exist the allocation cannot change. */
        assert_int_equal(set_feat(t, NTBF_NVME_FEAT_NUM_QUEUES, 10 | 10u << 16, &dw0),
                         NTBF_NVME_SC_CMD_SEQ_ERROR);
        /* Saving is not supported. */
        assert_int_equal(set_feat(t, NTBF_NVME_FEAT_NUM_QUEUES | 1u << 31, 1, &dw0),
                         NTBF_NVME_SC_FEATURE_NOT_SAVEABLE);
        /* A controller reset restores the default allocation. */
        disable(t);
        enable(t);
        assert_int_equal(get_feat(t, NTBF_NVME_FEAT_NUM_QUEUES, 0, 0, &dw0), 0);
        assert_int_equal(dw0, 30 | 30u << 16);
        /* Other features. */
        assert_int_equal(get_feat(t, NTBF_NVME_FEAT_ARBITRATION, 0, 0, &dw0), 0);
        assert_int_equal(dw0 & 7, NTBF_NVME_RAB);
        assert_int_equal(get_feat(t, NTBF_NVME_FEAT_VOLATILE_WC, 0, 0, &dw0), 0);
        assert_int_equal(dw0, 1);
        assert_int_equal(set_feat(t, NTBF_NVME_FEAT_VOLATILE_WC, 0, NULL), 0);
        assert_int_equal(get_feat(t, NTBF_NVME_FEAT_VOLATILE_WC, 0, 0, &dw0), 0);
        assert_int_equal(dw0, 0);
        assert_int_equal(set_feat(t, NTBF_NVME_FEAT_IRQ_COALESCE, 0x0a05, NULL), 0);
        assert_int_equal(get_feat(t, NTBF_NVME_FEAT_IRQ_COALESCE, 0, 0, &dw0), 0);
        assert_int_equal(dw0, 0x0a05);
        assert_int_equal(set_feat(t, NTBF_NVME_FEAT_IRQ_CONFIG, 2 | 1u << 16, NULL), 0);
        assert_int_equal(get_feat(t, NTBF_NVME_FEAT_IRQ_CONFIG, 0, 2, &dw0), 0);
        assert_int_equal(dw0, 2 | 1u << 16);
        assert_int_equal(set_feat(t, NTBF_NVME_FEAT_IRQ_CONFIG, 4, NULL),
                         NTBF_NVME_SC_INVALID_FIELD);
        assert_int_equal(set_feat(t, NTBF_NVME_FEAT_POWER_MGMT, 1, NULL),
                         NTBF_NVME_SC_INVALID_FIELD);
        assert_int_equal(get_feat(t, NTBF_NVME_FEAT_TEMP_THRESH, 0, 0, &dw0), 0);
        assert_int_equal(dw0, 343);
        assert_int_equal(set_feat(t, 0x0c, 0, NULL), NTBF_NVME_SC_INVALID_FIELD);
        assert_int_equal(get_feat(t, 0x0c, 0, 0, &dw0), NTBF_NVME_SC_INVALID_FIELD);
        tfree(t);
}

static void test_rw_4k(void **state)
{
        (void)state;
        struct t *t = tsetup(NULL);
        enable(t);
        struct hsq q;
        struct hcq c;
        io_pair(t, &q, &c, 1, 64);
        struct buf *w = calloc(1, sizeof(*w)), *r = calloc(1, sizeof(*r));
        buf_make(t, w, 0, 4096, 0);
        buf_make(t, r, 0, 4096, 0);
        buf_fill(t, w, 1);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_WRITE, 100, 8, w->prp1, w->prp2)), 0);
        file_check(t->fd, 100 * 512, 4096, 1);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 100, 8, r->prp1, r->prp2)), 0);
        buf_check(t, r, 1);
        /* 4 KiB at a 512-byte offset spans two pages: PRP2 is the second page. */
        buf_make(t, w, 512, 4096, 0);
        buf_make(t, r, 3072, 4096, 0);
        assert_int_equal(w->n, 2);
        buf_fill(t, w, 2);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_WRITE, 7, 8, w->prp1, w->prp2)), 0);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 7, 8, r->prp1, r->prp2)), 0);
        buf_check(t, r, 2);
        file_check(t->fd, 7 * 512, 4096, 2);
        /* PRP2 with an offset where a page is expected. */
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 7, 8, r->prp1, r->prp2 + 16)),
                         NTBF_NVME_SC_INVALID_PRP_OFFSET);
        /* PRP1 not dword aligned. */
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 7, 1, r->prp1 + 2, 0)),
                         NTBF_NVME_SC_INVALID_PRP_OFFSET);
        free(w);
        free(r);
        tfree(t);
}

static void test_rw_128k_prp_list(void **state)
{
        (void)state;
        struct t *t = tsetup(NULL);
        enable(t);
        struct hsq q;
        struct hcq c;
        io_pair(t, &q, &c, 1, 64);
        struct buf *w = calloc(1, sizeof(*w)), *r = calloc(1, sizeof(*r));
        /* 128 KiB (= MDTS) with PRP1 at offset 0x200: 33 scattered pages, a 32-entry list. */
        buf_make(t, w, 0x200, 128 * 1024, 0);
        buf_make(t, r, 0x800, 128 * 1024, 0);
        assert_int_equal(w->n, 33);
        buf_fill(t, w, 3);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_WRITE, 1000, 256, w->prp1, w->prp2)), 0);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 1000, 256, r->prp1, r->prp2)), 0);
        buf_check(t, r, 3);
        file_check(t->fd, 1000 * 512, 128 * 1024, 3);
        /* The same through a list that starts 4 entries before the end of its page, so its
         * last entry chains to the next list page. */
        buf_make(t, r, 0x10, 128 * 1024, 4);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 1000, 256, r->prp1, r->prp2)), 0);
        buf_check(t, r, 3);
        /* A list entry with an offset is refused. */
        uint64_t *ent = P(t, r->prp2);
        ent[1] += 8;
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 1000, 256, r->prp1, r->prp2)),
                         NTBF_NVME_SC_INVALID_PRP_OFFSET);
        free(w);
        free(r);
        tfree(t);
}

static void no_mdts(struct ntbf_sim_params *p)
{
        p->mdts = 0;
}

static void test_prp_chain_large(void **state)
{
        (void)state;
        struct t *t = tsetup(no_mdts);
        enable(t);
        struct hsq q;
        struct hcq c;
        io_pair(t, &q, &c, 1, 16);
        struct buf *w = calloc(1, sizeof(*w)), *r = calloc(1, sizeof(*r));
        /* 4 MiB + 1 KiB: 1026 pages, lists chained three times; larger than the 1 MiB bounce. */
        uint64_t len = (4u << 20) + 1024;
        buf_make(t, w, 0x400, len, 3);
        buf_make(t, r, 0xc00, len, 0);
        buf_fill(t, w, 4);
        uint32_t nlb = (uint32_t)(len / 512);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_WRITE, 77, nlb, w->prp1, w->prp2)), 0);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 77, nlb, r->prp1, r->prp2)), 0);
        buf_check(t, r, 4);
        file_check(t->fd, 77 * 512, len, 4);
        free(w);
        free(r);
        tfree(t);
}

static uint16_t get_log(struct t *t, uint8_t lid, uint32_t nsid, uint32_t bytes, uint64_t addr,
                        uint64_t off)
{
        uint32_t numd = bytes / 4 - 1;
        struct ntbf_nvme_sqe e = {.opc = NTBF_NVME_ADM_GET_LOG_PAGE, .nsid = nsid, .prp1 = addr};
        e.prp2 = bytes + (addr & (PG - 1)) > PG ? addr - (addr & (PG - 1)) + PG : 0;
        e.cdw10 = lid | (numd & 0xffff) << 16;
        e.cdw11 = numd >> 16;
        e.cdw12 = (uint32_t)off;
        e.cdw13 = (uint32_t)(off >> 32);
        return adm(t, e, NULL);
}

static void test_errors_and_error_log(void **state)
{
        (void)state;
        struct t *t = tsetup(NULL);
        enable(t);
        struct hsq q;
        struct hcq c;
        io_pair(t, &q, &c, 1, 64);
        struct buf *b = calloc(1, sizeof(*b));
        buf_make(t, b, 0, 132 * 1024, 0);
        uint64_t nsze = CAPACITY / 512;
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, nsze - 1, 2, b->prp1, b->prp2)),
                         NTBF_NVME_SC_LBA_RANGE);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, nsze - 1, 1, b->prp1, b->prp2)), 0);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_WRITE, UINT64_C(1) << 40, 1, b->prp1, 0)),
                         NTBF_NVME_SC_LBA_RANGE);
        /* MDTS 5 = 128 KiB: 257 blocks is one too many. */
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 0, 257, b->prp1, b->prp2)),
                         NTBF_NVME_SC_INVALID_FIELD);
        struct ntbf_nvme_sqe e = rw(0x7f, 0, 1, b->prp1, 0);
        assert_int_equal(io(t, &q, e), NTBF_NVME_SC_INVALID_OPCODE);
        e = rw(NTBF_NVME_CMD_READ, 0, 1, b->prp1, 0);
        e.nsid = 2;
        assert_int_equal(io(t, &q, e), NTBF_NVME_SC_INVALID_NS);
        e.nsid = 1;
        e.flags = 0x40; /* SGL */
        assert_int_equal(io(t, &q, e), NTBF_NVME_SC_INVALID_FIELD);
        /* Admin commands on an I/O queue and unknown admin opcodes. */
        e = (struct ntbf_nvme_sqe){.opc = 0xc0};
        assert_int_equal(adm(t, e, NULL), NTBF_NVME_SC_INVALID_OPCODE);
        /* The completion says Do Not Retry for these. */
        e = rw(NTBF_NVME_CMD_READ, nsze, 1, b->prp1, 0);
        e.cid = t->cid++;
        sq_push(t, &q, &e);
        poll_(t);
        struct ntbf_nvme_cqe ce;
        assert_true(cq_pop(t, &c, &ce));
        assert_true(ce.status & NTBF_NVME_STATUS_DNR);
        uint16_t last_cid = e.cid;

        /* The error log holds them, newest first. */
        uint64_t la = alloc(t, 2 * PG);
        uint8_t *l = P(t, la);
        assert_int_equal(get_log(t, NTBF_NVME_LOG_ERROR, 0, 4096, la, 0), 0);
        assert_int_equal(le(l + NTBF_NVME_ERR_COUNT, 8), 8);
        assert_int_equal(le(l + NTBF_NVME_ERR_SQID, 2), 1);
        assert_int_equal(le(l + NTBF_NVME_ERR_CID, 2), last_cid);
        assert_int_equal(le(l + NTBF_NVME_ERR_STATUS, 2) & 0xfffe,
                         NTBF_NVME_SC_LBA_RANGE << 1 | NTBF_NVME_STATUS_DNR);
        assert_int_equal(le(l + NTBF_NVME_ERR_LBA, 8), nsze);
        assert_int_equal(le(l + NTBF_NVME_ERR_NSID, 4), 1);
        assert_int_equal(le(l + NTBF_NVME_ERR_PARAM, 2), 40);
        uint8_t *e1 = l + NTBF_NVME_ERROR_ENTRY; /* the admin invalid opcode */
        assert_int_equal(le(e1 + NTBF_NVME_ERR_COUNT, 8), 7);
        assert_int_equal(le(e1 + NTBF_NVME_ERR_SQID, 2), 0);
        assert_int_equal(le(e1 + NTBF_NVME_ERR_STATUS, 2) >> 1 & 0x7ff,
                         NTBF_NVME_SC_INVALID_OPCODE);
        uint8_t *e7 = l + 7 * NTBF_NVME_ERROR_ENTRY; /* the first: LBA out of range */
        assert_int_equal(le(e7 + NTBF_NVME_ERR_COUNT, 8), 1);
        assert_int_equal(le(e7 + NTBF_NVME_ERR_LBA, 8), nsze - 1);
        assert_int_equal(le(l + 8 * NTBF_NVME_ERROR_ENTRY, 8), 0);
        /* Offsets into the log. */
        assert_int_equal(get_log(t, NTBF_NVME_LOG_ERROR, 0, 64, la, 64), 0);
        assert_int_equal(le(l + NTBF_NVME_ERR_COUNT, 8), 7);
        assert_int_equal(get_log(t, NTBF_NVME_LOG_ERROR, 0, 64, la, 2), NTBF_NVME_SC_INVALID_FIELD);
        assert_int_equal(get_log(t, 0x7e, 0, 64, la, 0), NTBF_NVME_SC_INVALID_LOG_PAGE);
        /* The two refused log reads are in the log as well. */
        assert_int_equal(get_log(t, NTBF_NVME_LOG_SMART, 0, 512, la, 0), 0);
        assert_int_equal(le(l + NTBF_NVME_SMART_ERROR_ENTRIES, 8), 10);
        free(b);
        tfree(t);
}

static void test_smart(void **state)
{
        (void)state;
        struct t *t = tsetup(NULL);
        enable(t);
        struct hsq q;
        struct hcq c;
        io_pair(t, &q, &c, 1, 64);
        struct buf *b = calloc(1, sizeof(*b));
        buf_make(t, b, 0, 64 * 1024, 0);
        for (int i = 0; i < 20; i++) /* 20 x 128 blocks = 2560 units written */
                assert_int_equal(
                    io(t, &q, rw(NTBF_NVME_CMD_WRITE, 128u * i, 128, b->prp1, b->prp2)), 0);
        for (int i = 0; i < 3; i++) /* 3 x 8 units read */
                assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 0, 8, b->prp1, b->prp2)), 0);
        /* Failed commands do not count. */
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, CAPACITY, 8, b->prp1, b->prp2)),
                         NTBF_NVME_SC_LBA_RANGE);
        uint64_t la = alloc(t, PG);
        uint8_t *l = P(t, la);
        assert_int_equal(get_log(t, NTBF_NVME_LOG_SMART, 0xffffffff, 512, la, 0), 0);
        assert_int_equal(l[NTBF_NVME_SMART_CRIT_WARN], 0);
        assert_int_equal(le(l + NTBF_NVME_SMART_TEMP, 2), 313);
        assert_int_equal(l[NTBF_NVME_SMART_AVAIL_SPARE], 100);
        assert_int_equal(le(l + NTBF_NVME_SMART_DATA_WRITTEN, 8), 3); /* 2560 / 1000 rounded up */
        assert_int_equal(le(l + NTBF_NVME_SMART_DATA_READ, 8), 1);
        assert_int_equal(le(l + NTBF_NVME_SMART_HOST_WRITES, 8), 20);
        assert_int_equal(le(l + NTBF_NVME_SMART_HOST_READS, 8), 3);
        assert_int_equal(le(l + NTBF_NVME_SMART_POWER_CYCLES, 8), 1);
        assert_int_equal(le(l + NTBF_NVME_SMART_UNSAFE_SHUTDOWNS, 8), 0);
        assert_int_equal(le(l + NTBF_NVME_SMART_MEDIA_ERRORS, 8), 0);
        assert_int_equal(le(l + NTBF_NVME_SMART_ERROR_ENTRIES, 8), 1);
        /* The SMART log is controller-wide only. */
        assert_int_equal(get_log(t, NTBF_NVME_LOG_SMART, 1, 512, la, 0),
                         NTBF_NVME_SC_INVALID_FIELD);
        /* Lowering the over-temperature threshold below 313 K raises the warning. */
        assert_int_equal(set_feat(t, NTBF_NVME_FEAT_TEMP_THRESH, 300, NULL), 0);
        assert_int_equal(get_log(t, NTBF_NVME_LOG_SMART, 0, 512, la, 0), 0);
        assert_int_equal(l[NTBF_NVME_SMART_CRIT_WARN], 0x02);
        /* A reset of the function while enabled: one more power cycle, an unsafe shutdown. */
        ntbf_sim_nvme_ops.reset(t->st);
        enable(t);
        assert_int_equal(get_log(t, NTBF_NVME_LOG_SMART, 0, 512, la, 0), 0);
        assert_int_equal(le(l + NTBF_NVME_SMART_POWER_CYCLES, 8), 2);
        assert_int_equal(le(l + NTBF_NVME_SMART_UNSAFE_SHUTDOWNS, 8), 1);
        assert_int_equal(le(l + NTBF_NVME_SMART_HOST_WRITES, 8), 20);
        /* Firmware slot log. */
        assert_int_equal(get_log(t, NTBF_NVME_LOG_FW_SLOT, 0, 512, la, 0), 0);
        assert_int_equal(l[0], 1);
        assert_memory_equal(l + 8, "0.1.0   ", 8);
        free(b);
        tfree(t);
}

static void test_flush_durable(void **state)
{
        (void)state;
        struct t *t = tsetup(NULL);
        enable(t);
        struct hsq q;
        struct hcq c;
        io_pair(t, &q, &c, 1, 64);
        struct buf *b = calloc(1, sizeof(*b));
        buf_make(t, b, 0, 32 * 1024, 0);
        buf_fill(t, b, 9);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_WRITE, 4096, 64, b->prp1, b->prp2)), 0);
        struct ntbf_nvme_sqe f = {.opc = NTBF_NVME_CMD_FLUSH, .nsid = 1};
        assert_int_equal(io(t, &q, f), 0);
        int fd = open(t->path, O_RDONLY);
        assert_true(fd >= 0);
        file_check(fd, 4096 * 512, 32 * 1024, 9);
        close(fd);
        f.nsid = 0xffffffff;
        assert_int_equal(io(t, &q, f), 0);
        f.nsid = 5;
        assert_int_equal(io(t, &q, f), NTBF_NVME_SC_INVALID_NS);
        /* FUA and write-through (cache disabled) writes complete after reaching the file. */
        buf_fill(t, b, 10);
        struct ntbf_nvme_sqe w = rw(NTBF_NVME_CMD_WRITE, 8192, 64, b->prp1, b->prp2);
        w.cdw12 |= NTBF_NVME_RW_FUA;
        assert_int_equal(io(t, &q, w), 0);
        file_check(t->fd, 8192 * 512, 32 * 1024, 10);
        /* Write Zeroes. */
        struct ntbf_nvme_sqe z = rw(NTBF_NVME_CMD_WRITE_ZEROES, 8192 + 8, 16, 0, 0);
        assert_int_equal(io(t, &q, z), 0);
        uint8_t *d = malloc(32 * 1024);
        assert_int_equal(pread(t->fd, d, 32 * 1024, 8192 * 512), 32 * 1024);
        for (int i = 0; i < 32 * 1024; i++)
                assert_int_equal(d[i], i >= 8 * 512 && i < 24 * 512 ? 0 : pat(10, (uint64_t)i));
        free(d);
        free(b);
        tfree(t);
}

static void test_round_robin(void **state)
{
        (void)state;
        struct t *t = tsetup(NULL);
        enable(t);
        struct hcq c;
        struct hsq q[8];
        assert_int_equal(create_cq(t, &c, 1, 256, false, 0), 0);
        for (uint16_t i = 0; i < 8; i++)
                assert_int_equal(create_sq(t, &q[i], (uint16_t)(i + 1), 32, &c), 0);
        uint64_t buf = alloc(t, PG);
        /* 20 reads queued on each SQ before the controller looks. */
        for (int k = 0; k < 20; k++) {
                for (int i = 0; i < 8; i++) {
                        struct ntbf_nvme_sqe e = rw(NTBF_NVME_CMD_READ, (uint64_t)k, 1, buf, 0);
                        e.cid = (uint16_t)((i + 1) * 100 + k);
                        sq_push(t, &q[i], &e);
                }
        }
        uint16_t order[160];
        uint32_t n = 0, polls = 0;
        struct ntbf_nvme_cqe ce;
        while (n < 160 && polls++ < 100) {
                poll_(t);
                while (n < 160 && cq_pop(t, &c, &ce)) {
                        assert_int_equal(status(&ce), 0);
                        assert_int_equal(ce.cid / 100, ce.sqid);
                        order[n++] = ce.sqid;
                }
        }
        assert_int_equal(n, 160);
        /* Per SQ, commands complete in order; across SQs they interleave in bursts of 8. */
        int count[9] = {0}, run = 0, maxrun = 0;
        for (uint32_t i = 0; i < 64; i++) {
                count[order[i]]++;
                run = i && order[i] == order[i - 1] ? run + 1 : 1;
                maxrun = run > maxrun ? run : maxrun;
        }
        for (int i = 1; i <= 8; i++)
                assert_int_equal(count[i], 8);
        assert_int_equal(maxrun, 8);
        /* Bursts visit the SQs in creation order, from wherever the rotation stands. */
        for (uint32_t k = 0; k + 1 < 8; k++)
                assert_int_equal(order[8 * (k + 1)], order[8 * k] % 8 + 1);

        /* With arbitration burst 2 (AB = 1) the bursts shrink. */
        assert_int_equal(set_feat(t, NTBF_NVME_FEAT_ARBITRATION, 1, NULL), 0);
        for (int k = 0; k < 6; k++) {
                for (int i = 0; i < 8; i++) {
                        struct ntbf_nvme_sqe e = rw(NTBF_NVME_CMD_READ, 0, 1, buf, 0);
                        e.cid = (uint16_t)((i + 1) * 100 + k);
                        sq_push(t, &q[i], &e);
                }
        }
        poll_(t);
        n = 0;
        while (cq_pop(t, &c, &ce))
                order[n++] = ce.sqid;
        assert_int_equal(n, 16);
        for (uint32_t k = 0; k < 8; k++) {
                assert_int_equal(order[2 * k], order[2 * k + 1]);
                if (k + 1 < 8)
                        assert_int_equal(order[2 * (k + 1)], order[2 * k] % 8 + 1);
        }
        tfree(t);
}

static void test_cq_full_backpressure(void **state)
{
        (void)state;
        struct t *t = tsetup(NULL);
        enable(t);
        struct hcq c;
        struct hsq q;
        assert_int_equal(create_cq(t, &c, 1, 4, false, 0), 0); /* holds 3 entries */
        assert_int_equal(create_sq(t, &q, 1, 16, &c), 0);
        uint64_t buf = alloc(t, PG);
        for (int k = 0; k < 10; k++) {
                struct ntbf_nvme_sqe e = rw(NTBF_NVME_CMD_READ, 0, 1, buf, 0);
                e.cid = (uint16_t)k;
                sq_push(t, &q, &e);
        }
        for (int i = 0; i < 5; i++)
                poll_(t);
        /* Three entries posted, the fourth slot untouched (never overwritten). */
        struct ntbf_nvme_cqe *ring = P(t, c.addr);
        for (int i = 0; i < 3; i++) {
                assert_int_equal(ring[i].cid, i);
                assert_int_equal(ring[i].status & 1, 1);
                assert_int_equal(ring[i].sqhd, i + 1);
        }
        assert_int_equal(ring[3].status, 0);
        assert_int_equal(ring[3].cid, 0);
        /* The host consumes them; the controller resumes and wraps. */
        int got = 0;
        struct ntbf_nvme_cqe ce;
        for (int round = 0; round < 10 && got < 10; round++) {
                while (cq_pop(t, &c, &ce)) {
                        assert_int_equal(ce.cid, got);
                        got++;
                }
                poll_(t);
        }
        while (cq_pop(t, &c, &ce))
                assert_int_equal(ce.cid, got++);
        assert_int_equal(got, 10);
        tfree(t);
}

static uint8_t *msix_entry(struct t *t, uint32_t v)
{
        return (uint8_t *)t->dev.bar[0] + NTBF_NVME_MSIX_TABLE + 16 * v;
}

static void msix_set(struct t *t, uint32_t v, uint64_t addr, uint32_t data, uint32_t masked)
{
        uint32_t e[4] = {(uint32_t)addr, (uint32_t)(addr >> 32), data, masked};
        memcpy(msix_entry(t, v), e, sizeof(e));
}

static uint32_t msi_word(struct t *t, uint32_t v)
{
        return __atomic_load_n((uint32_t *)P(t, MSI_ADDR + 4 * v), __ATOMIC_ACQUIRE);
}

static uint64_t pba(struct t *t)
{
        return __atomic_load_n((uint64_t *)(void *)((uint8_t *)t->dev.bar[0] + NTBF_NVME_MSIX_PBA),
                               __ATOMIC_ACQUIRE);
}

static void test_msix(void **state)
{
        (void)state;
        struct t *t = tsetup(NULL);
        /* Power-on table: every vector masked. */
        for (uint32_t v = 0; v < 4; v++)
                assert_int_equal(msix_entry(t, v)[12] & 1, 1);
        uint32_t x = ntbf_sim_cfg_find_cap(t->dev.cfg, NTBF_PCI_CAP_ID_MSIX);
        ntbf_sim_cfg_write(t->dev.cfg, x + NTBF_PCI_MSIX_FLAGS, NTBF_PCI_MSIX_ENABLE, 2);
        for (uint32_t v = 0; v < 4; v++)
                msix_set(t, v, MSI_ADDR + 4 * v, 0x50 + v, 0);
        enable(t);
        struct hcq c;
        struct hsq q;
        assert_int_equal(create_cq(t, &c, 1, 16, true, 2), 0);
        /* The admin CQ signals vector 0. */
        assert_int_equal(msi_word(t, 0), 0x50);
        assert_int_equal(create_sq(t, &q, 1, 16, &c), 0);
        uint64_t buf = alloc(t, PG);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 0, 1, buf, 0)), 0);
        assert_int_equal(msi_word(t, 2), 0x52);
        assert_int_equal(msi_word(t, 1), 0);
        /* A masked vector: no message, the PBA bit instead; unmasking delivers it. */
        *(uint32_t *)P(t, MSI_ADDR + 8) = 0;
        msix_set(t, 2, MSI_ADDR + 8, 0x62, 1);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 0, 1, buf, 0)), 0);
        assert_int_equal(msi_word(t, 2), 0);
        assert_int_equal(pba(t), 1u << 2);
        poll_(t);
        assert_int_equal(msi_word(t, 2), 0);
        msix_set(t, 2, MSI_ADDR + 8, 0x62, 0);
        poll_(t);
        assert_int_equal(msi_word(t, 2), 0x62);
        assert_int_equal(pba(t), 0);
        /* Function mask: the same through the capability. */
        *(uint32_t *)P(t, MSI_ADDR + 8) = 0;
        ntbf_sim_cfg_write(t->dev.cfg, x + NTBF_PCI_MSIX_FLAGS,
                           NTBF_PCI_MSIX_ENABLE | NTBF_PCI_MSIX_MASKALL, 2);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 0, 1, buf, 0)), 0);
        assert_int_equal(msi_word(t, 2), 0);
        assert_int_equal(pba(t), 1u << 2);
        ntbf_sim_cfg_write(t->dev.cfg, x + NTBF_PCI_MSIX_FLAGS, NTBF_PCI_MSIX_ENABLE, 2);
        poll_(t);
        assert_int_equal(msi_word(t, 2), 0x62);
        assert_int_equal(pba(t), 0);
        /* MSI-X disabled: nothing is delivered (INTx never crosses), nothing pends. */
        *(uint32_t *)P(t, MSI_ADDR + 8) = 0;
        ntbf_sim_cfg_write(t->dev.cfg, x + NTBF_PCI_MSIX_FLAGS, 0, 2);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 0, 1, buf, 0)), 0);
        ntbf_sim_cfg_write(t->dev.cfg, x + NTBF_PCI_MSIX_FLAGS, NTBF_PCI_MSIX_ENABLE, 2);
        poll_(t);
        assert_int_equal(msi_word(t, 2), 0);
        assert_int_equal(pba(t), 0);
        /* A CQ without IEN never interrupts. */
        struct hcq c2;
        struct hsq q2;
        assert_int_equal(create_cq(t, &c2, 2, 16, false, 3), 0);
        assert_int_equal(create_sq(t, &q2, 2, 16, &c2), 0);
        assert_int_equal(io(t, &q2, rw(NTBF_NVME_CMD_READ, 0, 1, buf, 0)), 0);
        assert_int_equal(msi_word(t, 3), 0);

        /* Interrupt coalescing: 4 entries or 200 us, whichever first. */
        assert_int_equal(set_feat(t, NTBF_NVME_FEAT_IRQ_COALESCE, 3 | 2u << 8, NULL), 0);
        for (int k = 0; k < 2; k++)
                assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 0, 1, buf, 0)), 0);
        assert_int_equal(msi_word(t, 2), 0);
        t->now += 250000;
        poll_(t);
        assert_int_equal(msi_word(t, 2), 0x62);
        *(uint32_t *)P(t, MSI_ADDR + 8) = 0;
        for (int k = 0; k < 4; k++) {
                struct ntbf_nvme_sqe e = rw(NTBF_NVME_CMD_READ, 0, 1, buf, 0);
                e.cid = (uint16_t)k;
                sq_push(t, &q, &e);
        }
        poll_(t);
        assert_int_equal(msi_word(t, 2), 0x62);
        struct ntbf_nvme_cqe ce;
        while (cq_pop(t, &c, &ce))
                ;
        /* ... unless the vector opts out (Interrupt Vector Configuration CD). */
        *(uint32_t *)P(t, MSI_ADDR + 8) = 0;
        assert_int_equal(set_feat(t, NTBF_NVME_FEAT_IRQ_CONFIG, 2 | 1u << 16, NULL), 0);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 0, 1, buf, 0)), 0);
        assert_int_equal(msi_word(t, 2), 0x62);

        /* Without Bus Master Enable no message leaves the function. */
        *(uint32_t *)P(t, MSI_ADDR) = 0;
        fake_dev_bus_master(&t->dev, 0);
        ntbf_sim_msix_signal(&t->dev.env, &(struct ntbf_sim_msix_pending){0}, 0);
        assert_int_equal(msi_word(t, 0), 0);
        tfree(t);
}

static void test_dma_failures(void **state)
{
        (void)state;
        struct t *t = tsetup(NULL);
        enable(t);
        struct hsq q;
        struct hcq c;
        io_pair(t, &q, &c, 1, 64);
        struct buf *b = calloc(1, sizeof(*b));
        buf_make(t, b, 0, 16 * 1024, 0);
        buf_fill(t, b, 5);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_WRITE, 0, 32, b->prp1, b->prp2)), 0);
        /* The third data page is unreachable. */
        fake_dma_fail(t->f, b->pages[2], PG);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_WRITE, 64, 32, b->prp1, b->prp2)),
                         NTBF_NVME_SC_DATA_XFER_ERROR);
        assert_true(ntbf_sim_cfg_read(t->dev.cfg, NTBF_PCI_STATUS, 2) & NTBF_PCI_STS_RMA);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 0, 32, b->prp1, b->prp2)),
                         NTBF_NVME_SC_DATA_XFER_ERROR);
        fake_dma_heal(t->f);
        /* An unreachable PRP list. */
        fake_dma_fail(t->f, b->prp2, 8);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 0, 32, b->prp1, b->prp2)),
                         NTBF_NVME_SC_DATA_XFER_ERROR);
        fake_dma_heal(t->f);
        /* An unreachable SQ entry: completed with CID 0xffff and a transfer error. */
        struct ntbf_nvme_sqe e = rw(NTBF_NVME_CMD_READ, 0, 1, b->prp1, 0);
        e.cid = 77;
        fake_dma_fail(t->f, q.addr + (uint64_t)q.tail * 64, 64);
        sq_push(t, &q, &e);
        poll_(t);
        struct ntbf_nvme_cqe ce;
        assert_true(cq_pop(t, &c, &ce));
        assert_int_equal(ce.cid, 0xffff);
        assert_int_equal(status(&ce), NTBF_NVME_SC_DATA_XFER_ERROR);
        assert_int_equal(ce.sqhd, q.tail);
        assert_false(ce.status & NTBF_NVME_STATUS_DNR);
        fake_dma_heal(t->f);
        /* The next command goes through; the data written before is intact. */
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 0, 32, b->prp1, b->prp2)), 0);
        buf_check(t, b, 5);
        /* An unreachable CQ: the completion is lost, nothing else happens. */
        fake_dma_fail(t->f, c.addr, 16 * 64);
        e.cid = 78;
        sq_push(t, &q, &e);
        poll_(t);
        fake_dma_heal(t->f);
        assert_false(cq_pop(t, &c, &ce));
        tfree(t);
        free(b);
}

static void test_reset_and_shutdown(void **state)
{
        (void)state;
        struct t *t = tsetup(NULL);
        enable(t);
        struct hsq q;
        struct hcq c;
        io_pair(t, &q, &c, 1, 64);
        struct buf *b = calloc(1, sizeof(*b));
        buf_make(t, b, 0, 4096, 0);
        buf_fill(t, b, 6);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_WRITE, 10, 8, b->prp1, b->prp2)), 0);
        /* CC.EN = 0: queues are gone, doorbells read 0; the same ids can be created again. */
        disable(t);
        assert_int_equal(reg(t, NTBF_NVME_SQ_TDBL(1)), 0);
        assert_int_equal(reg(t, NTBF_NVME_SQ_TDBL(0)), 0);
        enable(t);
        io_pair(t, &q, &c, 1, 64);
        /* Shutdown: the controller reports completion and stops fetching. */
        setreg(t, NTBF_NVME_REG_CC, reg(t, NTBF_NVME_REG_CC) | NTBF_NVME_CC_SHN_NORMAL);
        poll_(t);
        assert_int_equal(reg(t, NTBF_NVME_REG_CSTS) & NTBF_NVME_CSTS_SHST_MASK,
                         NTBF_NVME_CSTS_SHST_DONE);
        int fd = open(t->path, O_RDONLY);
        file_check(fd, 10 * 512, 4096, 6);
        close(fd);
        struct ntbf_nvme_sqe e = rw(NTBF_NVME_CMD_READ, 10, 8, b->prp1, b->prp2);
        sq_push(t, &q, &e);
        poll_(t);
        struct ntbf_nvme_cqe ce;
        assert_false(cq_pop(t, &c, &ce));
        disable(t);
        assert_int_equal(reg(t, NTBF_NVME_REG_CSTS), 0);

        /* FLR as the runner does it: pending flag, model reset, flag cleared. */
        enable(t);
        uint32_t dc = NTBF_SIM_CFG_CAP_PCIE + NTBF_PCI_EXP_DEVCTL;
        ntbf_sim_cfg_write(t->dev.cfg, dc, ntbf_sim_cfg_read(t->dev.cfg, dc, 2) | 0x8000, 2);
        assert_true(ntbf_sim_cfg_flr_pending(t->dev.cfg));
        ntbf_sim_nvme_ops.reset(t->st);
        ntbf_sim_cfg_flr_clear(t->dev.cfg);
        assert_false(ntbf_sim_cfg_flr_pending(t->dev.cfg));
        assert_int_equal(ntbf_sim_cfg_read(t->dev.cfg, NTBF_PCI_COMMAND, 2), 0);
        assert_int_equal(reg(t, NTBF_NVME_REG_CC), 0);
        assert_int_equal(reg(t, NTBF_NVME_REG_CSTS), 0);
        assert_int_equal(reg(t, NTBF_NVME_REG_AQA), 0);
        assert_int_equal(reg(t, NTBF_NVME_REG_VS), NTBF_NVME_VS);
        enable(t);
        io_pair(t, &q, &c, 1, 64);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 10, 8, b->prp1, b->prp2)), 0);
        buf_check(t, b, 6);
        free(b);
        tfree(t);
}

static void test_restart_while_enabled(void **state)
{
        (void)state;
        struct t *t = tsetup(NULL);
        enable(t);
        /* The device host dies and comes back on the same shared memory. */
        ntbf_sim_nvme_ops.destroy(t->st);
        assert_int_equal(ntbf_sim_nvme_ops.create(&t->dev.env, &t->st), 0);
        poll_(t);
        assert_true(reg(t, NTBF_NVME_REG_CSTS) & NTBF_NVME_CSTS_CFS);
        /* Config space (bus master, MSI-X state) survived. */
        assert_true(ntbf_sim_cfg_bus_master(t->dev.cfg));
        disable(t);
        assert_int_equal(reg(t, NTBF_NVME_REG_CSTS), 0);
        enable(t);
        /* Restarted while disabled: nothing to report. */
        disable(t);
        ntbf_sim_nvme_ops.destroy(t->st);
        assert_int_equal(ntbf_sim_nvme_ops.create(&t->dev.env, &t->st), 0);
        poll_(t);
        assert_int_equal(reg(t, NTBF_NVME_REG_CSTS), 0);
        enable(t);
        tfree(t);
}

static void with_cmb(struct ntbf_sim_params *p)
{
        p->cmb = 1 << 20;
}

static void test_cmb(void **state)
{
        (void)state;
        struct t *t = tsetup(with_cmb);
        assert_true(reg64(t, NTBF_NVME_REG_CAP) & NTBF_NVME_CAP_CMBS);
        /* CMBLOC/CMBSZ read 0 until CMBMSC.CRE. */
        assert_int_equal(reg(t, NTBF_NVME_REG_CMBSZ), 0);
        setreg64(t, NTBF_NVME_REG_CMBMSC, NTBF_NVME_CMBMSC_CRE);
        poll_(t);
        assert_int_equal(reg(t, NTBF_NVME_REG_CMBLOC), 2);
        assert_int_equal(reg(t, NTBF_NVME_REG_CMBSZ), 0x1f | 256u << 12); /* 256 x 4 KiB */
        enable(t);
        /* An SQ and the data buffer in the CMB; the CQ in host memory. */
        struct hcq c;
        assert_int_equal(create_cq(t, &c, 1, 16, false, 0), 0);
        struct ntbf_nvme_sqe cs = {.opc = NTBF_NVME_ADM_CREATE_SQ, .prp1 = BAR2_ADDR};
        cs.cdw10 = 1 | 15u << 16;
        cs.cdw11 = 1 | 1u << 16;
        assert_int_equal(adm(t, cs, NULL), 0);
        uint8_t *cmb = t->dev.bar[2];
        uint64_t data = BAR2_ADDR + 0x10000;
        for (int i = 0; i < 8192; i++)
                cmb[0x10000 + i] = pat(11, (uint64_t)i);
        struct ntbf_nvme_sqe e = rw(NTBF_NVME_CMD_WRITE, 50, 16, data, data + PG);
        e.cid = 5;
        memcpy(cmb, &e, 64);
        uint64_t before = t->f->reads;
        setreg(t, NTBF_NVME_SQ_TDBL(1), 1);
        poll_(t);
        struct ntbf_nvme_cqe ce;
        assert_true(cq_pop(t, &c, &ce));
        assert_int_equal(ce.cid, 5);
        assert_int_equal(status(&ce), 0);
        /* Neither the command nor its data crossed the fabric. */
        assert_int_equal(t->f->reads, before);
        file_check(t->fd, 50 * 512, 8192, 11);
        tfree(t);
}

/* A random address: mostly in the fake memory, sometimes unreachable, sometimes unaligned. */
static uint64_t rnd_addr(void)
{
        uint32_t r = (uint32_t)rand();
        uint64_t a = MEM_BASE + ((uint64_t)(uint32_t)rand() << 6) % MEM_SIZE;
        if (r % 8 == 0)
                return (uint64_t)(uint32_t)rand() << 20;
        return r % 4 == 0 ? a : a & ~(uint64_t)(PG - 1);
}

static void rnd_sqe(uint32_t *p, const uint8_t *ops, unsigned nops)
{
        for (int k = 0; k < 16; k++)
                p[k] = (uint32_t)rand() * 2654435761u;
        struct ntbf_nvme_sqe *e = (struct ntbf_nvme_sqe *)(void *)p;
        uint32_t r = (uint32_t)rand();
        if (r % 8) {
                e->opc = ops[r % nops];
                e->flags = 0;
                e->nsid = r % 3 ? 1 : e->nsid;
                e->prp1 = rnd_addr();
                e->prp2 = rnd_addr();
                e->cdw10 = r & 0x100 ? e->cdw10 % 64 : e->cdw10;
                e->cdw11 = r & 0x200 ? e->cdw11 & 0xffff0003 : e->cdw11;
                e->cdw12 = r & 0x400 ? e->cdw12 % 512 : e->cdw12;
        }
}

static void test_garbage_registers(void **state)
{
        (void)state;
        static const uint8_t admin_ops[] = {0x00, 0x01, 0x02, 0x04, 0x05, 0x06,
                                            0x08, 0x09, 0x0a, 0x0c, 0x7f};
        static const uint8_t io_ops[] = {0x00, 0x01, 0x02, 0x08, 0x04};
        struct t *t = tsetup(NULL);
        enable(t);
        struct hsq q;
        struct hcq c;
        io_pair(t, &q, &c, 1, 64);
        uint32_t x = ntbf_sim_cfg_find_cap(t->dev.cfg, NTBF_PCI_CAP_ID_MSIX);
        srand(12345);
        int work = 0;
        uint8_t *bar0 = t->dev.bar[0];
        const uint32_t valid_cc = NTBF_NVME_CC_EN | NTBF_NVME_CC_IOSQES_64 | NTBF_NVME_CC_IOCQES_16;
        for (int i = 0; i < 20000; i++) {
                uint32_t r = (uint32_t)rand(), v = (uint32_t)rand() * 2654435761u;
                switch (r % 12) {
                case 0: /* any register or doorbell dword */
                        setreg(t, (r >> 4) % 0x3000 & ~3u, v);
                        break;
                case 1: { /* CC: off, a valid enable, a shutdown, or random bits */
                        uint32_t cc[4] = {0, valid_cc, valid_cc | NTBF_NVME_CC_SHN_NORMAL, v};
                        setreg(t, NTBF_NVME_REG_CC, cc[(r >> 4) % 4]);
                        break;
                }
                case 2: /* admin queue anywhere, small or random sizes */
                        setreg64(t, NTBF_NVME_REG_ASQ, rnd_addr());
                        setreg64(t, NTBF_NVME_REG_ACQ, rnd_addr());
                        setreg(t, NTBF_NVME_REG_AQA, r & 0x10 ? v : (v % 64) | (v % 64) << 16);
                        break;
                case 3: /* doorbells of existing and non-existing queues */
                        setreg(t, NTBF_NVME_SQ_TDBL(r % 40), v % 80);
                        setreg(t, NTBF_NVME_CQ_HDBL(r % 40), (v >> 8) % 80);
                        break;
                case 4: /* a mostly well-formed random I/O command, then the doorbell */
                        rnd_sqe(P(t, q.addr + (uint64_t)(r % 64) * 64), io_ops, 5);
                        setreg(t, NTBF_NVME_SQ_TDBL(1), (r >> 8) % 64);
                        break;
                case 5: /* MSI-X table entries anywhere */
                        memcpy(bar0 + NTBF_NVME_MSIX_TABLE + (r % 4) * 16 + (v % 4) * 4, &v, 4);
                        break;
                case 6: /* config space writes */
                        ntbf_sim_cfg_write(t->dev.cfg, (r >> 8) % 256 & ~3u, v, 4);
                        break;
                case 7:
                        setreg64(t, NTBF_NVME_REG_CMBMSC, (uint64_t)v << 32 | r);
                        break;
                case 8: { /* random admin commands into the admin SQ, then the doorbell */
                        uint64_t asq = reg64(t, NTBF_NVME_REG_ASQ) & ~(uint64_t)(PG - 1);
                        for (int k = 0; k < 4; k++)
                                if (fake_dma_ptr(t->f, asq) && asq + PG <= MSI_ADDR)
                                        rnd_sqe(P(t, asq + (uint64_t)((r >> 4) + k) % 64 * 64),
                                                admin_ops, sizeof(admin_ops));
                        setreg(t, NTBF_NVME_SQ_TDBL(0), v % 64);
                        break;
                }
                case 9: /* the driver fixes things up now and then */
                        fake_dev_bus_master(&t->dev, 1);
                        ntbf_sim_cfg_write(t->dev.cfg, x + NTBF_PCI_MSIX_FLAGS,
                                           r & 0x10 ? NTBF_PCI_MSIX_ENABLE : 0, 2);
                        break;
                case 10: /* failing memory */
                        if (r & 0x10)
                                fake_dma_heal(t->f);
                        else
                                fake_dma_fail(t->f, rnd_addr(), v % (1 << 20));
                        break;
                default:
                        break;
                }
                work += poll_(t);
                if (i % 5000 == 4999)
                        ntbf_sim_nvme_ops.reset(t->st);
        }
        /* The garbage reached the command processing, not only the register checks. */
        assert_true(work > 5000);
        print_message("garbage: %d units of work, %llu DMA errors\n", work,
                      (unsigned long long)t->f->errors);
        /* Still a working controller after a reset. */
        fake_dma_heal(t->f);
        setreg(t, NTBF_NVME_REG_CC, 0);
        poll_(t);
        ntbf_sim_nvme_ops.reset(t->st);
        t->brk = MEM_BASE;
        enable(t);
        io_pair(t, &q, &c, 1, 64);
        uint64_t buf = alloc(t, PG);
        assert_int_equal(io(t, &q, rw(NTBF_NVME_CMD_READ, 0, 8, buf, 0)), 0);
        tfree(t);
}

static uint64_t ns_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Not a pass/fail figure: prints what a 4 KiB QD1 read costs inside the model (one poll that
 * fetches, executes and completes the command), next to the pread and copy it cannot avoid.
 * The namespace range is written first so that every read hits the page cache.
 */
static void test_perf_qd1_read(void **state)
{
        (void)state;
        struct t *t = tsetup(NULL);
        enable(t);
        struct hsq q;
        struct hcq c;
        io_pair(t, &q, &c, 1, 256);
        uint64_t buf = alloc(t, PG);
        const int n = 20000, span = 4096; /* 16 MiB of 4 KiB blocks */
        uint8_t *tmp = aligned_alloc(PG, PG);
        memset(tmp, 0x5a, PG);
        for (int i = 0; i < span; i++)
                assert_int_equal(pwrite(t->fd, tmp, PG, (off_t)i * PG), PG);
        uint64_t in_poll = 0, idle = 0, io_only = 0;
        struct ntbf_nvme_cqe ce;
        for (int i = 0; i < n; i++) {
                uint64_t blk = (uint64_t)(i * 7919) % span;
                struct ntbf_nvme_sqe e = rw(NTBF_NVME_CMD_READ, blk * 8, 8, buf, 0);
                e.cid = (uint16_t)i;
                sq_push(t, &q, &e);
                uint64_t t0 = ns_now();
                ntbf_sim_nvme_ops.poll(t->st, t0);
                uint64_t t1 = ns_now();
                in_poll += t1 - t0;
                assert_true(cq_pop(t, &c, &ce));
                assert_int_equal(status(&ce), 0);
                t0 = ns_now();
                ntbf_sim_nvme_ops.poll(t->st, t0);
                idle += ns_now() - t0;
                t0 = ns_now();
                assert_int_equal(pread(t->fd, tmp, PG, (off_t)(blk * PG)), PG);
                t->dev.env.dma.write(t->dev.env.dma.opaque, buf, tmp, PG);
                io_only += ns_now() - t0;
        }
        free(tmp);
        print_message("nvme model, 4 KiB QD1 read: %.0f ns per command in poll, of which %.0f ns "
                      "pread+copy; model overhead %.0f ns; idle poll %.0f ns\n",
                      (double)in_poll / n, (double)io_only / n,
                      ((double)in_poll - (double)io_only) / n, (double)idle / n);
        tfree(t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_enable_handshake),
            cmocka_unit_test(test_identify),
            cmocka_unit_test(test_queue_create_delete),
            cmocka_unit_test(test_num_queues),
            cmocka_unit_test(test_rw_4k),
            cmocka_unit_test(test_rw_128k_prp_list),
            cmocka_unit_test(test_prp_chain_large),
            cmocka_unit_test(test_errors_and_error_log),
            cmocka_unit_test(test_smart),
            cmocka_unit_test(test_flush_durable),
            cmocka_unit_test(test_round_robin),
            cmocka_unit_test(test_cq_full_backpressure),
            cmocka_unit_test(test_msix),
            cmocka_unit_test(test_dma_failures),
            cmocka_unit_test(test_reset_and_shutdown),
            cmocka_unit_test(test_restart_while_enabled),
            cmocka_unit_test(test_cmb),
            cmocka_unit_test(test_garbage_registers),
            cmocka_unit_test(test_perf_qd1_read),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
