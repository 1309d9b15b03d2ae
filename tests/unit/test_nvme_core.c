/* tests/unit/test_nvme_core.c: the NVMe driver core against the simulated controller. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "nvme_fx.h"

#define PG  4096u
#define CAP (UINT64_C(64) << 20)

static void test_reset_and_identify(void **state)
{
        (void)state;
        static struct nfx x;
        nfx_up(&x, 32, CAP);
        nfx_reset(&x);
        struct ntbf_nvme_ctrl *c = &x.c;
        assert_true(c->admin_up);
        assert_true(ntbf_nvme_ctrl_alive(c));
        assert_int_equal(c->db_stride, 4);
        assert_int_equal(c->mqes, NTBF_NVME_MQES + 1);
        assert_int_equal(c->vs, NTBF_NVME_VS);
        /* The article's drive: 32 queue pairs, one of them the admin pair. */
        assert_int_equal(c->io_queues, 31);
        assert_string_equal(c->id.mn, NTBF_NVME_MN);
        assert_string_equal(c->id.fr, NTBF_NVME_FR);
        assert_memory_equal(c->id.sn, "NTBF", 4);
        assert_int_equal(c->id.vid, NTBF_SIM_VENDOR_ID);
        assert_int_equal(c->id.nn, 1);
        assert_int_equal(c->ns.nsid, 1);
        assert_int_equal(c->ns.lba_shift, 9);
        assert_int_equal(c->ns.nsze, CAP >> 9);
        assert_int_equal(c->ns.max_xfer, (uint64_t)PG << 5); /* MDTS 5 */
        /* The registers say where the admin queues are: in the region the driver was given. */
        volatile uint8_t *r = x.dev.bar[0];
        uint64_t asq = *(volatile uint64_t *)(r + NTBF_NVME_REG_ASQ);
        assert_int_equal(asq, c->admin.sq_io);
        /* Get Features Number of Queues answers what Set Features granted. */
        uint32_t dw0 = 0;
        assert_int_equal(ntbf_nvme_get_features(c, NTBF_NVME_FEAT_NUM_QUEUES, 0, 0, &dw0), 0);
        assert_int_equal(dw0, 30u << 16 | 30u);
        /* A reset takes the admin queues again, from the start. */
        nfx_reset(&x);
        assert_int_equal(c->admin.submitted, 3);
        nfx_down(&x);
}

static void test_io_and_prps(void **state)
{
        (void)state;
        static struct nfx x;
        nfx_up(&x, 8, CAP);
        nfx_reset(&x);
        struct ntbf_nvme_ctrl *c = &x.c;
        assert_int_equal(c->io_queues, 7);
        struct ntbf_nvme_qp q;
        nfx_qp(&x, &q, 1, 64);
        assert_int_equal(ntbf_nvme_create_qp(c, 1, 64, 64, q.sq_io, q.cq_io), 0);
        assert_int_equal(q.ncids, 63);
        struct ntbf_nvme_mem buf = nfx_mem(&x, 256 * 1024);
        /* One block, two pages from an offset, and a PRP list (128 KiB from an offset). */
        static const struct {
                uint64_t off, len, pos;
        } cases[] = {{0, 512, 0}, {512, 4096, 512 * 9}, {1024, 128 * 1024 - 1024, 1 << 20}};
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                uint8_t *p = (uint8_t *)buf.va + cases[i].off;
                nfx_fill(p, cases[i].len, i + 1, cases[i].pos);
                uint32_t nlb = (uint32_t)(cases[i].len >> 9);
                assert_int_equal(ntbf_nvme_qp_rw_sync(&q, &x.wait, &c->ns, NTBF_NVME_CMD_WRITE,
                                                      cases[i].pos >> 9, nlb,
                                                      buf.io + cases[i].off),
                                 0);
                memset(p, 0xa5, cases[i].len);
                assert_int_equal(ntbf_nvme_qp_rw_sync(&q, &x.wait, &c->ns, NTBF_NVME_CMD_READ,
                                                      cases[i].pos >> 9, nlb,
                                                      buf.io + cases[i].off),
                                 0);
                assert_int_equal(nfx_check(p, cases[i].len, i + 1, cases[i].pos), -1);
        }
        /* More than MDTS, past the namespace, a PRP not dword aligned: refused by the driver. */
        assert_int_equal(ntbf_nvme_qp_rw(&q, &c->ns, NTBF_NVME_CMD_READ, 0, 257, buf.io, 0, NULL),
                         -EINVAL);
        assert_int_equal(
            ntbf_nvme_qp_rw(&q, &c->ns, NTBF_NVME_CMD_READ, c->ns.nsze, 1, buf.io, 0, NULL),
            -EINVAL);
        assert_int_equal(ntbf_nvme_qp_rw(&q, &c->ns, NTBF_NVME_CMD_READ, 0, 1, buf.io + 2, 0, NULL),
                         -EINVAL);
        assert_int_equal(ntbf_nvme_qp_outstanding(&q), 0);
        /* The controller's own refusal comes back as its status. */
        struct ntbf_nvme_sqe s = {.opc = NTBF_NVME_CMD_READ, .nsid = 1, .prp1 = buf.io};
        s.cdw10 = (uint32_t)c->ns.nsze;
        int cid = ntbf_nvme_qp_submit(&q, &s, NULL);
        assert_true(cid >= 0);
        struct ntbf_nvme_done d;
        assert_int_equal(ntbf_nvme_qp_wait(&q, &x.wait, (uint16_t)cid, &d), 0);
        assert_int_equal(d.status, NTBF_NVME_SC_LBA_RANGE);
        assert_string_equal(ntbf_nvme_strstatus(d.status), "NVMe: LBA out of range");
        assert_int_equal(ntbf_nvme_qp_flush_sync(&q, &x.wait, 1), 0);
        /* Queue pair ids beyond what the controller granted. */
        assert_int_equal(ntbf_nvme_create_qp(c, 8, 16, 16, q.sq_io, q.cq_io),
                         NTBF_NVME_SC_INVALID_QID);
        assert_int_equal(ntbf_nvme_delete_qp(c, 1), 0);
        ntbf_nvme_qp_fini(&q);
        nfx_down(&x);
}

/* Many commands in flight: every one completes once, with its tag, and CIDs are reused. */
static void test_queue_depth(void **state)
{
        (void)state;
        static struct nfx x;
        nfx_up(&x, 4, CAP);
        nfx_reset(&x);
        struct ntbf_nvme_ctrl *c = &x.c;
        struct ntbf_nvme_qp q;
        nfx_qp(&x, &q, 1, 16);
        assert_int_equal(ntbf_nvme_create_qp(c, 1, 16, 16, q.sq_io, q.cq_io), 0);
        struct ntbf_nvme_mem buf = nfx_mem(&x, 64 * PG);
        enum { N = 200 };
        unsigned seen[N] = {0};
        unsigned next = 0, done = 0;
        for (int spins = 0; done < N && spins < 100000; spins++) {
                while (next < N) {
                        uint8_t *p = (uint8_t *)buf.va + (next % 64) * PG;
                        nfx_fill(p, PG, 7, (uint64_t)next * PG);
                        int cid = ntbf_nvme_qp_rw(&q, &c->ns, NTBF_NVME_CMD_WRITE,
                                                  (uint64_t)next * 8, 8, buf.io + (next % 64) * PG,
                                                  0, (void *)(uintptr_t)(next + 1));
                        if (cid == -EBUSY)
                                break;
                        assert_true(cid >= 0 && cid < 15);
                        next++;
                }
                /* At most 15 in flight (16 entries), and the free list says so. */
                assert_true(ntbf_nvme_qp_outstanding(&q) <= 15);
                nfx_idle(&x);
                struct ntbf_nvme_done d[8];
                int n = ntbf_nvme_qp_poll(&q, d, 8);
                for (int i = 0; i < n; i++) {
                        unsigned k = (unsigned)(uintptr_t)d[i].tag - 1;
                        assert_true(k < N);
                        assert_int_equal(d[i].status, 0);
                        seen[k]++;
                        done++;
                }
        }
        assert_int_equal(done, N);
        for (unsigned i = 0; i < N; i++)
                assert_int_equal(seen[i], 1);
        assert_int_equal(q.submitted, N);
        assert_int_equal(q.completed, N);
        assert_int_equal(q.stray, 0);
        /* Read everything back. */
        for (unsigned i = 0; i < N; i++) {
                uint8_t *p = buf.va;
                assert_int_equal(ntbf_nvme_qp_rw_sync(&q, &x.wait, &c->ns, NTBF_NVME_CMD_READ,
                                                      (uint64_t)i * 8, 8, buf.io),
                                 0);
                assert_int_equal(nfx_check(p, PG, 7, (uint64_t)i * PG), -1);
        }
        ntbf_nvme_qp_fini(&q);
        nfx_down(&x);
}

/*
 * A controller that stops answering: commands expire as -ETIMEDOUT, keep their CIDs, and a
 * late completion frees the CID without being reported as a success.
 */
static void test_timeouts(void **state)
{
        (void)state;
        static struct nfx x;
        nfx_up(&x, 4, CAP);
        nfx_reset(&x);
        struct ntbf_nvme_ctrl *c = &x.c;
        struct ntbf_nvme_qp q;
        nfx_qp(&x, &q, 1, 8);
        assert_int_equal(ntbf_nvme_create_qp(c, 1, 8, 8, q.sq_io, q.cq_io), 0);
        struct ntbf_nvme_mem buf = nfx_mem(&x, PG);
        x.frozen = true;
        struct ntbf_nvme_wait w = x.wait;
        w.timeout_ms = 20;
        assert_int_equal(ntbf_nvme_qp_rw_sync(&q, &w, &c->ns, NTBF_NVME_CMD_WRITE, 0, 1, buf.io),
                         -ETIMEDOUT);
        int cid = ntbf_nvme_qp_rw(&q, &c->ns, NTBF_NVME_CMD_WRITE, 8, 1, buf.io, 0, (void *)7);
        assert_true(cid >= 0);
        struct ntbf_nvme_done d[8];
        uint64_t t = q.slots[cid].t_submit;
        assert_int_equal(ntbf_nvme_qp_expire(&q, t + 1000, 5000, d, 8), 0);
        assert_int_equal(ntbf_nvme_qp_expire(&q, t + 10000, 5000, d, 8), 1);
        assert_int_equal(d[0].status, -ETIMEDOUT);
        assert_ptr_equal(d[0].tag, (void *)7);
        assert_int_equal(ntbf_nvme_qp_expire(&q, t + 20000, 5000, d, 8), 0); /* once */
        assert_int_equal(ntbf_nvme_qp_outstanding(&q), 0);
        assert_int_equal(q.nfree, q.ncids - 2); /* both CIDs still taken */
        /* The controller comes back: both complete late, and only free their CIDs. */
        x.frozen = false;
        for (int i = 0; i < 10; i++)
                nfx_idle(&x);
        assert_int_equal(ntbf_nvme_qp_poll(&q, d, 8), 0);
        assert_int_equal(q.late, 2);
        assert_int_equal(q.nfree, q.ncids);
        /* A command the controller cannot fetch (its SQ unreachable) completes as CID 0xffff:
         * a stray, and the command itself times out. */
        fake_dma_fail(x.f, q.sq_io, PG);
        assert_int_equal(ntbf_nvme_qp_rw_sync(&q, &w, &c->ns, NTBF_NVME_CMD_READ, 0, 1, buf.io),
                         -ETIMEDOUT);
        assert_int_equal(q.stray, 1);
        fake_dma_heal(x.f);
        /* A lost completion (the CQ unreachable): the data moved, but the command is not
         * reported complete. */
        fake_dma_fail(x.f, q.cq_io, PG);
        assert_int_equal(ntbf_nvme_qp_rw_sync(&q, &w, &c->ns, NTBF_NVME_CMD_READ, 0, 1, buf.io),
                         -ETIMEDOUT);
        fake_dma_heal(x.f);
        /* After the pair is recreated the queue starts afresh. */
        assert_int_equal(ntbf_nvme_delete_qp(c, 1), 0);
        ntbf_nvme_qp_reset(&q);
        assert_int_equal(ntbf_nvme_create_qp(c, 1, 8, 8, q.sq_io, q.cq_io), 0);
        assert_int_equal(
            ntbf_nvme_qp_rw_sync(&q, &x.wait, &c->ns, NTBF_NVME_CMD_READ, 0, 1, buf.io), 0);
        ntbf_nvme_qp_fini(&q);
        nfx_down(&x);
}

/* A BAR that reads all ones (the path to the controller is gone) is said so, not waited on. */
static void test_dead_path(void **state)
{
        (void)state;
        static uint8_t ones[NTBF_NVME_BAR0_SIZE];
        memset(ones, 0xff, sizeof(ones));
        struct ntbf_nvme_ctrl c;
        assert_int_equal(ntbf_nvme_ctrl_open(&c, ones, sizeof(ones)), -EIO);
        static struct nfx x;
        nfx_up(&x, 4, CAP);
        nfx_reset(&x);
        assert_true(ntbf_nvme_ctrl_alive(&x.c));
        x.c.regs = ones;
        assert_false(ntbf_nvme_ctrl_alive(&x.c));
        assert_int_equal(ntbf_nvme_ctrl_disable(&x.c), -EIO);
        x.c.regs = x.dev.bar[0];
        assert_int_equal(ntbf_nvme_ctrl_shutdown(&x.c), 0);
        assert_int_equal(ntbf_nvme_ctrl_disable(&x.c), 0);
        /* Bad arguments. */
        struct ntbf_nvme_mem small = nfx_mem(&x, PG);
        assert_int_equal(ntbf_nvme_ctrl_reset(&x.c, &small, 32), -EINVAL);
        struct ntbf_nvme_qp q;
        /* 128 SQ entries need two pages; one entry is no queue. */
        assert_int_equal(ntbf_nvme_qp_init(&q, x.dev.bar[0], 4, 1, 128, &small, 16, &small, NULL),
                         -EINVAL);
        assert_int_equal(ntbf_nvme_qp_init(&q, x.dev.bar[0], 4, 1, 1, &small, 16, &small, NULL),
                         -EINVAL);
        assert_int_equal(ntbf_nvme_qp_init(&q, x.dev.bar[0], 4, 1, 16, &small, 16, &small, NULL),
                         0);
        ntbf_nvme_qp_fini(&q);
        nfx_down(&x);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_reset_and_identify), cmocka_unit_test(test_io_and_prps),
            cmocka_unit_test(test_queue_depth),        cmocka_unit_test(test_timeouts),
            cmocka_unit_test(test_dead_path),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
