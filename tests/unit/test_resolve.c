/* tests/unit/test_resolve.c: resolving addresses through windows, LUTs, IOMMUs and multicast. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ntbfab/budget.h"
#include "ntbfab/error.h"
#include "ntbfab/resolve.h"
#include "fixtures.h"
#include "state.h"

/* Admit and commit; fail the test if refused. The plan is returned (caller frees). */
static struct ntbf_plan admit_ok(struct ntbf_state *s, const struct ntbf_request *q)
{
        struct ntbf_plan p;
        if (ntbf_admit(s, q, &p))
                fail_msg("refused: %s", p.why);
        uint32_t id;
        assert_int_equal(ntbf_commit(s, &p, &id), 0);
        fx_consistent(s);
        return p;
}

static struct ntbf_plan do_borrow(struct ntbf_state *s, uint32_t dev, uint32_t by)
{
        struct ntbf_request q;
        ntbf_request_init(&q, NTBF_REQ_BORROW);
        q.device = dev;
        q.by = by;
        return admit_ok(s, &q);
}

static struct ntbf_plan do_map(struct ntbf_state *s, uint32_t dev, uint32_t node, uint64_t addr,
                               uint64_t size)
{
        struct ntbf_request q;
        ntbf_request_init(&q, NTBF_REQ_MAP_DEVICE);
        q.requester = (struct ntbf_requester){NTBF_NONE, dev, 0};
        q.target = (struct ntbf_target){NTBF_TARGET_MEM, node, addr, size, NTBF_NONE};
        return admit_ok(s, &q);
}

static int resolve(const struct ntbf_state *s, uint32_t node, uint32_t dev, uint64_t addr,
                   struct ntbf_route *rt)
{
        struct ntbf_requester rq = {node, dev, 0};
        return ntbf_resolve(s, &rq, (struct ntbf_domain){NTBF_DOM_HOST, node}, addr, rt);
}

static bool path_uses_adapter(const struct ntbf_path *p, uint32_t a)
{
        for (uint32_t i = 0; i < p->nhops; i++)
                if (p->hops[i].kind == NTBF_HOP_ADAPTER && p->hops[i].obj == a)
                        return true;
        return false;
}

/*
 * Article 4.4: a borrowed device (the source) reaches a target device's BAR on the shortest
 * path in all three cases; the address the mapping returns lands on the target BAR offset.
 */
static void p2p_three_cases(bool chassis)
{
        struct ntbf_topo *t = fx_star(3); /* n0: lender 1, n1: lender 2, n2: borrower */
        uint32_t src = 1;                 /* n0.acc0 */
        uint32_t same = fx_add_accel(t, 0, "acc1", 5, 64 * NTBF_MiB);
        uint32_t other = fx_add_accel(t, 1, "acc2", 5, 64 * NTBF_MiB);
        uint32_t local = fx_add_accel(t, 2, "local", 5, 64 * NTBF_MiB);
        if (chassis) {
                /* Latency inside hosts: the paths and the resolver must agree on it too. */
                for (uint32_t n = 0; n < 3; n++)
                        t->nodes[n].root_ns = 30 + 10 * n;
                uint32_t c0 = ntbf_topo_add_chassis(t, 0, "exp0");
                uint32_t c1 = ntbf_topo_add_chassis(t, 1, "exp0");
                t->devices[src].chassis = t->devices[same].chassis = c0;
                t->devices[other].chassis = c1;
                t->devices[local].hop_ns = 11;
        }
        fx_finalize_ok(t);
        struct ntbf_state *s = fx_state_ok(t);
        struct ntbf_plan b1 = do_borrow(s, src, 2), b2 = do_borrow(s, same, 2),
                         b3 = do_borrow(s, other, 2);
        const uint64_t off = 0x12340;
        struct {
                uint32_t target, tnode;
                uint32_t hops;
                bool nothing_mapped;
        } cases[] = {
            {same, 0, 4, true},   /* same lender: the lender's own bus address */
            {local, 2, 9, false}, /* target local to the borrower */
            {other, 1, 9, false}, /* different lenders, through the switch */
        };
        for (int c = 0; c < 3; c++) {
                const struct ntbf_device *tg = &t->devices[cases[c].target];
                uint64_t bar2 = tg->bars[2].addr;
                struct ntbf_plan m = do_map(s, src, cases[c].tnode, bar2 + off, 4096);
                /* With chassis: one chassis hop instead of the root, or one more at each end. */
                static const uint32_t chassis_hops[] = {3, 10, 11};
                assert_int_equal(m.path.nhops, chassis ? chassis_hops[c] : cases[c].hops);
                /* Never through the borrower's adapter unless the target is in the borrower. */
                assert_int_equal(path_uses_adapter(&m.path, 2), cases[c].tnode == 2);
                /* Shortest: the latency of the least-latency path between the two devices. */
                struct ntbf_path best;
                char why[256];
                assert_int_equal(
                    ntbf_path_find(
                        t, NULL, (struct ntbf_endpoint){NTBF_EP_DEVICE, 0, src},
                        (struct ntbf_endpoint){NTBF_EP_DEVICE, cases[c].tnode, cases[c].target},
                        &best, why, sizeof(why)),
                    0);
                assert_int_equal(m.path.latency_ns, best.latency_ns);
                if (cases[c].nothing_mapped) {
                        assert_int_equal(m.nres, 0);
                        assert_int_equal(m.dma_addr, bar2 + off);
                } else {
                        assert_true(m.dma_addr >= t->adapters[0].window_base);
                        assert_true(m.dma_addr <
                                    t->adapters[0].window_base + t->adapters[0].p.window);
                }
                struct ntbf_route rt;
                assert_int_equal(resolve(s, 0, src, m.dma_addr, &rt), 0);
                assert_int_equal(rt.ndests, 1);
                assert_int_equal(rt.dests[0].node, cases[c].tnode);
                assert_int_equal(rt.dests[0].land, NTBF_LAND_BAR);
                assert_int_equal(rt.dests[0].device, cases[c].target);
                assert_int_equal(rt.dests[0].bar, 2);
                assert_int_equal(rt.dests[0].offset, off);
                assert_int_equal(rt.dests[0].addr, bar2 + off);
                assert_int_equal(rt.latency_ns, m.path.latency_ns);
                if (!cases[c].nothing_mapped) {
                        /* The source's requester ID is in n0.ntb0's table and on the switch. */
                        assert_int_equal(rt.nrids, 2);
                        assert_true(rt.rids[0].present && !rt.rids[0].is_switch);
                        assert_true(rt.rids[1].present && rt.rids[1].is_switch);
                        assert_int_equal(rt.nsteps, 2);
                        assert_int_equal(rt.steps[0].land, NTBF_LAND_WINDOW);
                        assert_int_equal(rt.steps[0].adapter, 0);
                }
                ntbf_plan_free(&m);
        }
        /* The borrower's CPU reaches the source's BAR through its own window. */
        struct ntbf_route rt;
        assert_int_equal(resolve(s, 2, NTBF_NONE, b1.bar_addr[2] + 8, &rt), 0);
        assert_int_equal(rt.dests[0].device, src);
        assert_int_equal(rt.dests[0].offset, 8);
        assert_int_equal(rt.latency_ns,
                         chassis ? 50 + 132 + 170 + 132 + 30 + 264 + 150 : 132 + 170 + 132);
        ntbf_plan_free(&b1);
        ntbf_plan_free(&b2);
        ntbf_plan_free(&b3);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

static void test_p2p_three_cases(void **state)
{
        (void)state;
        p2p_three_cases(false);
}

/* The same with root complexes, chassis and a slot: one chassis of the same lender is one
 * switch hop away. */
static void test_p2p_three_cases_chassis(void **state)
{
        (void)state;
        p2p_three_cases(true);
}

static void test_connect_iommu(void **state)
{
        (void)state;
        for (int iommu = 1; iommu >= 0; iommu--) {
                struct ntbf_topo *t = fx_b2b("pxh830");
                t->nodes[1].iommu = iommu;
                fx_finalize_ok(t);
                struct ntbf_state *s = fx_state_ok(t);
                struct ntbf_request q;
                ntbf_request_init(&q, NTBF_REQ_CONNECT);
                q.requester.node = 0;
                q.target =
                    (struct ntbf_target){NTBF_TARGET_MEM, 1, 0x10000000, NTBF_MiB, NTBF_NONE};
                struct ntbf_plan p = admit_ok(s, &q);
                const struct ntbf_res *lut = NULL, *range = NULL;
                for (uint32_t i = 0; i < p.nres; i++) {
                        if (p.res[i].kind == NTBF_RES_LUT)
                                lut = &p.res[i];
                        if (p.res[i].kind == NTBF_RES_RANGE)
                                range = &p.res[i];
                }
                assert_non_null(lut);
                assert_int_equal(lut->obj, 0);
                assert_string_equal(lut->what, "segment");
                if (iommu) {
                        assert_non_null(range);
                        assert_int_equal(range->obj, 1);
                        assert_int_equal(range->maps_to, 0x10000000);
                        assert_int_equal(range->size, NTBF_MiB);
                        assert_int_equal(range->addr, NTBF_IOVA_BASE);
                        assert_int_equal(lut->dest, NTBF_DEST_IOVA);
                        assert_int_equal(lut->dst_addr, range->addr);
                } else {
                        assert_null(range);
                        assert_int_equal(lut->dest, NTBF_DEST_MEM);
                        assert_int_equal(lut->dst_addr, 0x10000000);
                }
                struct ntbf_route rt;
                assert_int_equal(resolve(s, 0, NTBF_NONE, p.dma_addr + 0x123, &rt), 0);
                assert_int_equal(rt.ndests, 1);
                assert_int_equal(rt.dests[0].node, 1);
                assert_int_equal(rt.dests[0].land, NTBF_LAND_RAM);
                assert_int_equal(rt.dests[0].addr, 0x10000123);
                assert_int_equal(rt.latency_ns, 264);
                assert_int_equal(rt.nsteps, iommu ? 3 : 2);
                if (iommu) {
                        assert_int_equal(rt.steps[1].dom.kind, NTBF_DOM_IOVA);
                        assert_int_equal(rt.steps[1].addr, NTBF_IOVA_BASE + 0x123);
                }
                /* A second connection to the same pages shares the IOVA range and the slot. */
                struct ntbf_plan p2 = admit_ok(s, &q);
                assert_int_equal(p2.dma_addr, p.dma_addr);
                for (uint32_t i = 0; i < p2.nres; i++)
                        assert_true(p2.res[i].shared);
                ntbf_plan_free(&p);
                ntbf_plan_free(&p2);
                ntbf_state_free(s);
                ntbf_topo_free(t);
        }
}

static void test_multicast(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_star(10);
        fx_finalize_ok(t);
        struct ntbf_state *s = fx_state_ok(t);
        struct ntbf_request q;
        for (uint32_t n = 1; n <= 8; n++) {
                ntbf_request_init(&q, NTBF_REQ_MCAST_JOIN);
                q.target = (struct ntbf_target){NTBF_TARGET_MCAST, n, 0x20000000, NTBF_MiB, 7};
                struct ntbf_plan p = admit_ok(s, &q);
                bool mc = false, overlay = false;
                for (uint32_t i = 0; i < p.nres; i++) {
                        const struct ntbf_res *r = &p.res[i];
                        if (r->kind == NTBF_RES_MCAST) {
                                mc = true;
                                assert_int_equal(r->obj, 0);
                                assert_int_equal(r->first, 0);
                                assert_int_equal(r->shared, n > 1); /* first member only */
                        }
                        if (r->kind == NTBF_RES_LUT) {
                                overlay = true;
                                assert_int_equal(r->obj, n); /* n<i>.ntb0 */
                                assert_int_equal(r->group, 7);
                                assert_string_equal(r->what, "multicast overlay");
                        }
                }
                assert_true(mc && overlay);
                ntbf_plan_free(&p);
        }
        /* Joining twice, or with another buffer size, is refused. */
        ntbf_request_init(&q, NTBF_REQ_MCAST_JOIN);
        q.target = (struct ntbf_target){NTBF_TARGET_MCAST, 3, 0x30000000, NTBF_MiB, 7};
        struct ntbf_plan p;
        assert_int_equal(ntbf_admit(s, &q, &p), NTBF_EEXISTS);
        ntbf_plan_free(&p);
        q.target = (struct ntbf_target){NTBF_TARGET_MCAST, 9, 0x30000000, 2 * NTBF_MiB, 7};
        assert_int_equal(ntbf_admit(s, &q, &p), -EINVAL);
        assert_non_null(strstr(p.why, "has 1048576-byte buffers"));
        ntbf_plan_free(&p);
        /* n0's accelerator writes into the group: the write lands in all 8 buffers. */
        ntbf_request_init(&q, NTBF_REQ_MAP_DEVICE);
        q.requester = (struct ntbf_requester){NTBF_NONE, 1, 0};
        q.target = (struct ntbf_target){NTBF_TARGET_MCAST, NTBF_NONE, 0, NTBF_MiB, 7};
        p = admit_ok(s, &q);
        struct ntbf_route rt;
        assert_int_equal(resolve(s, 0, 1, p.dma_addr + 0x40, &rt), 0);
        assert_int_equal(rt.ndests, 8);
        bool seen[10] = {false};
        for (uint32_t i = 0; i < rt.ndests; i++) {
                assert_int_equal(rt.dests[i].land, NTBF_LAND_RAM);
                assert_int_equal(rt.dests[i].addr, 0x20000040);
                assert_true(rt.dests[i].node >= 1 && rt.dests[i].node <= 8);
                seen[rt.dests[i].node] = true;
        }
        for (uint32_t n = 1; n <= 8; n++)
                assert_true(seen[n]);
        assert_int_equal(rt.latency_ns, 132 + 170 + 132);
        ntbf_plan_free(&p);
        /* So does a CPU store of a node that is not a member. */
        ntbf_request_init(&q, NTBF_REQ_CONNECT);
        q.requester.node = 9;
        q.target = (struct ntbf_target){NTBF_TARGET_MCAST, NTBF_NONE, 0, NTBF_MiB, 7};
        p = admit_ok(s, &q);
        assert_int_equal(resolve(s, 9, NTBF_NONE, p.dma_addr, &rt), 0);
        assert_int_equal(rt.ndests, 8);
        ntbf_plan_free(&p);
        /* A member's own write is not sent back out of its port: 7 others receive it. */
        ntbf_request_init(&q, NTBF_REQ_CONNECT);
        q.requester.node = 4;
        q.target = (struct ntbf_target){NTBF_TARGET_MCAST, NTBF_NONE, 0, 4096, 7};
        p = admit_ok(s, &q);
        assert_int_equal(resolve(s, 4, NTBF_NONE, p.dma_addr, &rt), 0);
        assert_int_equal(rt.ndests, 7);
        ntbf_plan_free(&p);
        /* An unknown group has no path. */
        q.target.group = 8;
        assert_int_equal(ntbf_admit(s, &q, &p), NTBF_ENOPATH);
        ntbf_plan_free(&p);
        struct ntbf_budget_row rows[64];
        size_t nr = ntbf_budget_rows(s, rows, 64);
        bool found = false;
        for (size_t i = 0; i < nr; i++)
                if (rows[i].kind == NTBF_BUDGET_MCAST) {
                        found = true;
                        assert_int_equal(rows[i].used, 1);
                        assert_int_equal(rows[i].total, 64);
                }
        assert_true(found);
        uint32_t ids[64];
        size_t n = ntbf_state_allocs(s, ids, 64);
        for (size_t i = 0; i < n; i++)
                assert_int_equal(ntbf_release(s, ids[i]), 0);
        fx_consistent(s);
        struct ntbf_state *f = fx_state_ok(t);
        char why[256];
        if (ntbf__state_equal(s, f, why, sizeof(why)))
                fail_msg("%s", why);
        ntbf_state_free(f);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

static void test_resolve_negative(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b_devices(3, 16 * NTBF_KiB);
        t->devices[2].dma_bits = 32;
        fx_finalize_ok(t);
        struct ntbf_state *s = fx_state_ok(t);
        struct ntbf_plan p = do_borrow(s, 0, 1); /* b borrows a.d0 */
        struct ntbf_route rt;
        char buf[512];

        /* Positive: the borrower's CPU reaches the BAR; the device's MSI reaches b. */
        assert_int_equal(resolve(s, 1, NTBF_NONE, p.bar_addr[0] + 0x10, &rt), 0);
        assert_int_equal(rt.dests[0].land, NTBF_LAND_BAR);
        assert_int_equal(rt.dests[0].device, 0);
        assert_int_equal(rt.dests[0].offset, 0x10);
        assert_int_equal(rt.latency_ns, 264);
        assert_int_equal(resolve(s, 0, 0, p.msi_addr + 0x1004, &rt), 0);
        assert_int_equal(rt.dests[0].land, NTBF_LAND_MSI);
        assert_int_equal(rt.dests[0].addr, NTBF_MSI_BASE + 0x1004);

        /* Unprogrammed slot. */
        uint64_t wb = t->adapters[1].window_base;
        assert_int_equal(resolve(s, 1, NTBF_NONE, wb + 200 * NTBF_MiB + 8, &rt),
                         NTBF_EUNPROGRAMMED);
        snprintf(buf, sizeof(buf),
                 "b.ntb0: slot 200 (window 0x%llx-0x%llx) is not programmed, so the access of "
                 "the CPU of 'b' at 0x%llx is not translated",
                 (unsigned long long)(wb + 200 * NTBF_MiB),
                 (unsigned long long)(wb + 201 * NTBF_MiB - 1),
                 (unsigned long long)(wb + 200 * NTBF_MiB + 8));
        assert_string_equal(rt.why, buf);
        assert_int_equal(rt.steps[0].slot, 200);
        assert_int_equal(rt.ndests, 0);

        /* Missing requester ID: a.d1 was never admitted through a.ntb0. */
        assert_int_equal(resolve(s, 0, 1, p.dma_addr, &rt), NTBF_ENORID);
        assert_string_equal(rt.why, "a.ntb0: a.d1 (0000:02:00.0) is not in the adapter's "
                                    "requester-ID table, so the transaction is dropped; admit a "
                                    "borrow or mapping for it");
        assert_int_equal(rt.nrids, 1);
        assert_false(rt.rids[0].present);
        assert_int_equal(rt.rids[0].obj, 0);

        /* Master abort: nothing claims the address. */
        assert_int_equal(resolve(s, 1, NTBF_NONE, UINT64_C(0x70000000000), &rt), NTBF_EUNREACHABLE);
        assert_string_equal(rt.why, "nothing claims 0x70000000000 in node 'b' (no RAM, BAR, MSI "
                                    "range or window): the transaction of the CPU of 'b' "
                                    "master-aborts");

        /* IOMMU fault: the DMA window's pages are mapped at run time, not in the model. */
        assert_int_equal(resolve(s, 0, 0, p.dma_addr + 0x80, &rt), NTBF_EIOMMU_FAULT);
        snprintf(buf, sizeof(buf),
                 "IOVA 0x%llx of node 'b' lies in the range 0x%llx-0x%llx reserved for a DMA "
                 "window, whose pages the driver maps at run time; no mapping is known there, so "
                 "the IOMMU faults",
                 (unsigned long long)(p.dma_iova + 0x80), (unsigned long long)p.dma_iova,
                 (unsigned long long)(p.dma_iova + NTBF_DEFAULT_DMA_WINDOW - 1));
        assert_string_equal(rt.why, buf);
        assert_true(rt.rids[0].present);
        struct ntbf_requester d0 = {0, 0, 0};
        assert_int_equal(ntbf_resolve(s, &d0, (struct ntbf_domain){NTBF_DOM_IOVA, 1},
                                      UINT64_C(0x4000000000), &rt),
                         NTBF_EIOMMU_FAULT);
        assert_string_equal(rt.why, "IOVA 0x4000000000 is not mapped in the IOMMU domain of node "
                                    "'b' (no reserved range holds it): the IOMMU faults");

        /* Address limit of a 32-bit device. */
        assert_int_equal(resolve(s, 0, 2, UINT64_C(0x100000000), &rt), NTBF_EADDRLIMIT);
        assert_string_equal(rt.why, "a.d2 (0000:03:00.0) addresses 32 bits (up to 0xffffffff) "
                                    "and cannot issue 0x100000000; map the target below that "
                                    "limit");

        /* A requester in another host's address space is a caller error. */
        assert_int_equal(resolve(s, 0, 0, 0, &rt), 0); /* a.d0 reads a's RAM: local */
        struct ntbf_requester cpu_a = {0, NTBF_NONE, 0};
        assert_int_equal(ntbf_resolve(s, &cpu_a, (struct ntbf_domain){NTBF_DOM_HOST, 1}, 0, &rt),
                         -EINVAL);
        ntbf_plan_free(&p);
        ntbf_state_free(s);
        ntbf_topo_free(t);

        /* Without a borrower IOMMU the DMA window is RAM of the pool: it lands. */
        t = fx_b2b_devices(1, 16 * NTBF_KiB);
        t->nodes[1].iommu = false;
        fx_finalize_ok(t);
        s = fx_state_ok(t);
        p = do_borrow(s, 0, 1);
        assert_int_equal(p.dma_iova, NTBF_POOL_BASE);
        assert_int_equal(resolve(s, 0, 0, p.dma_addr + 0x10, &rt), 0);
        assert_int_equal(rt.dests[0].land, NTBF_LAND_RAM);
        assert_int_equal(rt.dests[0].addr, NTBF_POOL_BASE + 0x10);
        ntbf_plan_free(&p);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

/* A switch port drops a requester that is not registered on it. */
static void test_resolve_switch_norid(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_star(3);
        t->adapters[0].p.rid_table = 0; /* n0's adapter enforces nothing; the switch does */
        fx_finalize_ok(t);
        struct ntbf_state *s = fx_state_ok(t);
        struct ntbf_plan p = do_borrow(s, 0, 1); /* n1 borrows n0.nvme0 */
        struct ntbf_route rt;
        assert_int_equal(resolve(s, 0, 1, p.msi_addr, &rt), NTBF_ENORID); /* n0.acc0 */
        assert_string_equal(rt.why, "switch 'sw0': n0.acc0 (0000:04:00.0) is not in its "
                                    "requester-ID table, so its ports drop the transaction; admit "
                                    "a borrow or mapping for it");
        assert_int_equal(rt.nrids, 1);
        assert_true(rt.rids[0].is_switch);
        assert_int_equal(resolve(s, 0, 0, p.msi_addr, &rt), 0);
        assert_int_equal(rt.dests[0].land, NTBF_LAND_MSI);
        ntbf_plan_free(&p);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_p2p_three_cases),  cmocka_unit_test(test_p2p_three_cases_chassis),
            cmocka_unit_test(test_connect_iommu),    cmocka_unit_test(test_multicast),
            cmocka_unit_test(test_resolve_negative), cmocka_unit_test(test_resolve_switch_norid),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
