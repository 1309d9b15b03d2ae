/* tests/unit/test_budget.c: budget state, CPU baseline, admission, refusals, commit and release. */
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
#include "graph.h"
#include "state.h"

/* Admit and commit a borrow; fail the test if refused. */
static uint32_t borrow(struct ntbf_state *s, uint32_t dev, uint32_t fn, uint32_t by, uint64_t dw,
                       struct ntbf_plan *out)
{
        struct ntbf_request q;
        ntbf_request_init(&q, NTBF_REQ_BORROW);
        q.device = dev;
        q.function = fn;
        q.by = by;
        q.dma_window = dw;
        struct ntbf_plan p;
        if (ntbf_admit(s, &q, &p))
                fail_msg("borrow refused: %s", p.why);
        uint32_t id;
        assert_int_equal(ntbf_commit(s, &p, &id), 0);
        fx_consistent(s);
        if (out)
                *out = p;
        else
                ntbf_plan_free(&p);
        return id;
}

static int try_borrow(const struct ntbf_state *s, uint32_t dev, uint32_t fn, uint32_t by,
                      uint64_t dw, struct ntbf_plan *p)
{
        struct ntbf_request q;
        ntbf_request_init(&q, NTBF_REQ_BORROW);
        q.device = dev;
        q.function = fn;
        q.by = by;
        q.dma_window = dw;
        return ntbf_admit(s, &q, p);
}

static struct ntbf_budget_row row(const struct ntbf_state *s, enum ntbf_budget_kind k, uint32_t obj)
{
        struct ntbf_budget_row rows[4096];
        size_t n = ntbf_budget_rows(s, rows, 4096);
        assert_true(n <= 4096);
        for (size_t i = 0; i < n; i++)
                if (rows[i].kind == k && rows[i].obj == obj)
                        return rows[i];
        fail_msg("no %s row for object %u", ntbf_budget_kind_name(k), obj);
        return rows[0];
}

static const struct ntbf_res *find_res(const struct ntbf_plan *p, enum ntbf_res_kind k,
                                       const char *what)
{
        for (uint32_t i = 0; i < p->nres; i++)
                if (p->res[i].kind == k && (!what || !strcmp(p->res[i].what, what)))
                        return &p->res[i];
        return NULL;
}

/* Budget rows and tables equal to a fresh state's. */
static void same_as_fresh(const struct ntbf_state *s)
{
        struct ntbf_state *f = fx_state_ok(ntbf_state_topo(s));
        char why[256];
        if (ntbf__state_equal(s, f, why, sizeof(why)))
                fail_msg("state differs from a fresh one: %s", why);
        size_t n = ntbf_budget_rows(s, NULL, 0);
        assert_int_equal(n, ntbf_budget_rows(f, NULL, 0));
        struct ntbf_budget_row *a = calloc(n, sizeof(*a)), *b = calloc(n, sizeof(*b));
        ntbf_budget_rows(s, a, n);
        ntbf_budget_rows(f, b, n);
        for (size_t i = 0; i < n; i++) {
                assert_int_equal(a[i].kind, b[i].kind);
                assert_int_equal(a[i].obj, b[i].obj);
                assert_int_equal(a[i].used, b[i].used);
                assert_int_equal(a[i].total, b[i].total);
                assert_int_equal(a[i].baseline, b[i].baseline);
        }
        free(a);
        free(b);
        ntbf_state_free(f);
}

/*
 * Article 8.6: two back-to-back PXH830 nodes; each borrows 30 devices from the other while
 * lending 30; the 31st is refused by the lender adapter's requester-ID table.
 */
static void test_article_figure(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b_devices(31, 16 * NTBF_KiB);
        fx_finalize_ok(t);
        struct ntbf_state *s = fx_state_ok(t);
        struct ntbf_budget_row r = row(s, NTBF_BUDGET_RID, 0);
        assert_int_equal(r.used, 2);
        assert_int_equal(r.total, 32);
        assert_int_equal(r.baseline, 2);
        uint32_t ids[60], nids = 0;
        for (uint32_t i = 0; i < 30; i++) {
                ids[nids++] = borrow(s, 31 + i, 0, 0, NTBF_MiB, NULL); /* a borrows b.d<i> */
                ids[nids++] = borrow(s, i, 0, 1, NTBF_MiB, NULL);      /* b borrows a.d<i> */
        }
        for (uint32_t ad = 0; ad < 2; ad++) {
                r = row(s, NTBF_BUDGET_RID, ad);
                assert_int_equal(r.used, 32);
                assert_int_equal(r.total, 32);
        }
        /* a.ntb0: one slot shared by all 30 BAR mappings into b (they lie in one 1 MiB
         * block), 30 DMA windows of b's borrows, one MSI slot shared by them. */
        assert_int_equal(row(s, NTBF_BUDGET_LUT, 0).used, 32);
        assert_int_equal(row(s, NTBF_BUDGET_WINDOW, 0).used, 32 * NTBF_MiB);

        struct ntbf_plan p;
        assert_int_equal(try_borrow(s, 31 + 30, 0, 0, NTBF_MiB, &p), NTBF_ENOSPC_BUDGET);
        assert_int_equal(p.result, NTBF_ENOSPC_BUDGET);
        assert_int_equal(p.refused_kind, NTBF_BUDGET_RID);
        assert_int_equal(p.refused_obj, 1);
        assert_int_equal(p.refused_used, 32);
        assert_int_equal(p.refused_total, 32);
        assert_int_equal(p.refused_need, 1);
        assert_int_equal(p.nres, 0);
        assert_string_equal(p.why, "b.ntb0: requester-ID table is full (32 of 32 used: 2 for the "
                                   "CPU, 30 by devices); this borrow needs 1 more; return a "
                                   "borrowed device through b.ntb0 or lend through another "
                                   "adapter");
        ntbf_plan_free(&p);
        assert_int_equal(try_borrow(s, 30, 0, 1, NTBF_MiB, &p), NTBF_ENOSPC_BUDGET);
        assert_int_equal(p.refused_kind, NTBF_BUDGET_RID);
        assert_int_equal(p.refused_obj, 0);
        assert_non_null(strstr(p.why, "a.ntb0: requester-ID table is full (32 of 32 used"));
        ntbf_plan_free(&p);
        /* A refused commit is refused. */
        assert_int_equal(ntbf_commit(s, &p, NULL), -EINVAL);

        for (uint32_t i = 0; i < nids; i++) {
                assert_int_equal(ntbf_release(s, ids[i]), 0);
                fx_consistent(s);
        }
        assert_int_equal(ntbf_release(s, ids[0]), NTBF_ENOTFOUND);
        same_as_fresh(s);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

/* nic0 on node 0: bus 3, 4 functions and 8 VFs, lent. */
static uint32_t add_nic(struct ntbf_topo *t)
{
        uint32_t d = ntbf_topo_add_device(t, 0, "nic0");
        struct ntbf_device *dev = &t->devices[d];
        dev->bus = 3;
        dev->lend = true;
        dev->functions = 4;
        dev->vfs = 8;
        dev->bars[0] = (struct ntbf_bar){.size = 16 * NTBF_KiB, .flags = NTBF_BAR_64};
        dev->vf_bars[0] = 16 * NTBF_KiB;
        return d;
}

static void test_multifunction_one_entry(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b("pxh830");
        uint32_t d = add_nic(t);
        fx_finalize_ok(t);
        struct ntbf_state *s = fx_state_ok(t);
        uint32_t ids[12];
        for (uint32_t f = 0; f < 12; f++) {
                struct ntbf_plan p;
                ids[f] = borrow(s, d, f, 1, NTBF_MiB, &p);
                const struct ntbf_res *rid = find_res(&p, NTBF_RES_RID, NULL);
                assert_non_null(rid);
                assert_int_equal(rid->obj, 0);
                assert_int_equal(rid->shared, f > 0);
                assert_int_equal(rid->req.function, f);
                /* Each function's BAR0 is reached at its own address. */
                assert_true(p.bar_addr[0] != 0);
                ntbf_plan_free(&p);
                assert_int_equal(row(s, NTBF_BUDGET_RID, 0).used, 3);
        }
        /* 12 DMA windows of 1 MiB + one MSI slot on the lender's adapter. */
        assert_int_equal(row(s, NTBF_BUDGET_LUT, 0).used, 13);
        struct ntbf_plan p;
        assert_int_equal(try_borrow(s, d, 12, 1, 0, &p), -EINVAL);
        assert_non_null(strstr(p.why, "has 12 functions; there is no function 12"));
        ntbf_plan_free(&p);
        for (uint32_t f = 0; f < 12; f++)
                assert_int_equal(ntbf_release(s, ids[f]), 0);
        assert_int_equal(row(s, NTBF_BUDGET_RID, 0).used, 2);
        same_as_fresh(s);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

/*
 * SR-IOV (article 7.1.6, 8.6): VFs of one device borrowed by different hosts count as one
 * device in every requester table they cross, and the entry stays until the last goes.
 */
static void test_vfs_two_borrowers(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_star(4);
        uint32_t d = ntbf_topo_add_device(t, 0, "nic0");
        struct ntbf_device *dev = &t->devices[d];
        dev->bus = 0x40;
        dev->lend = true;
        dev->vfs = 4;
        dev->bars[0] = (struct ntbf_bar){.size = 16 * NTBF_KiB, .flags = NTBF_BAR_64};
        dev->vf_bars[0] = 16 * NTBF_KiB;
        fx_finalize_ok(t);
        struct ntbf_state *s = fx_state_ok(t);
        uint32_t vf1 = dev->functions, vf2 = dev->functions + 1;
        uint64_t sw0 = row(s, NTBF_BUDGET_SWITCH_RID, 0).used;
        struct ntbf_plan p1, p2;
        uint32_t id1 = borrow(s, d, vf1, 1, NTBF_MiB, &p1);
        const struct ntbf_res *r1 = NULL;
        for (uint32_t i = 0; i < p1.nres; i++)
                if (p1.res[i].kind == NTBF_RES_SWITCH_RID && p1.res[i].req.device == d)
                        r1 = &p1.res[i];
        assert_non_null(r1);
        assert_false(r1->shared);
        assert_int_equal(r1->req.device, d);
        assert_int_equal(r1->req.function, vf1);
        uint32_t id2 = borrow(s, d, vf2, 2, NTBF_MiB, &p2);
        /* The second VF, by another host: the device's entry is there already. */
        for (uint32_t i = 0; i < p2.nres; i++)
                if (p2.res[i].kind == NTBF_RES_SWITCH_RID && p2.res[i].req.device == d)
                        assert_true(p2.res[i].shared);
        assert_int_equal(row(s, NTBF_BUDGET_SWITCH_RID, 0).used, sw0 + 1);
        /* Each VF's BAR is reached at its own address by its own borrower. */
        assert_int_not_equal(ntbf_device_bar_addr(dev, vf1, 0), ntbf_device_bar_addr(dev, vf2, 0));
        ntbf_plan_free(&p1);
        ntbf_plan_free(&p2);
        assert_int_equal(ntbf_release(s, id1), 0);
        assert_int_equal(row(s, NTBF_BUDGET_SWITCH_RID, 0).used, sw0 + 1);
        assert_int_equal(ntbf_release(s, id2), 0);
        assert_int_equal(row(s, NTBF_BUDGET_SWITCH_RID, 0).used, sw0);
        same_as_fresh(s);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

/* The address a plan's BAR0 slot sends to: its LUT target plus the BAR's offset in the slot. */
static uint64_t bar0_target(const struct ntbf_plan *p)
{
        const struct ntbf_res *r = find_res(p, NTBF_RES_LUT, "BAR0");
        assert_non_null(r);
        assert_int_equal(r->dest, NTBF_DEST_MEM);
        return r->dst_addr + (p->bar_addr[0] - r->addr);
}

static int map_bar(const struct ntbf_state *s, uint32_t node, uint32_t dev, uint32_t tnode,
                   uint64_t addr, uint64_t size, struct ntbf_plan *p)
{
        struct ntbf_request q;
        ntbf_request_init(&q, NTBF_REQ_MAP_DEVICE);
        q.requester = (struct ntbf_requester){node, dev, 0};
        q.target = (struct ntbf_target){NTBF_TARGET_MEM, tnode, addr, size, NTBF_NONE};
        return ntbf_admit(s, &q, p);
}

/*
 * A real device's BARs sit where its host's firmware put them, not where the model places
 * them: a borrower's BAR slot, a remote device's mapping and a same-host device's answer all
 * use the hardware's address, while admission still finds regions and paths in the model.
 */
static void test_real_bars(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b("pxh830");
        uint32_t d = add_nic(t);
        uint32_t peer = ntbf_topo_add_device(t, 0, "acc0"),
                 far = ntbf_topo_add_device(t, 1, "gpu0");
        t->devices[peer].bus = 5;
        t->devices[peer].bars[0] = (struct ntbf_bar){.size = 16 * NTBF_KiB};
        t->devices[far].bus = 6;
        t->devices[far].bars[0] = (struct ntbf_bar){.size = 16 * NTBF_KiB};
        fx_finalize_ok(t);
        struct ntbf_state *s = fx_state_ok(t);
        const struct ntbf_device *dev = &t->devices[d];
        uint32_t vf2 = dev->functions + 2;
        const uint64_t hw1 = UINT64_C(0xfb204000), hwvf = UINT64_C(0x3800000c8000);
        uint64_t a1[NTBF_MAX_BARS] = {hw1}, avf[NTBF_MAX_BARS] = {hwvf};
        char why[256];
        assert_int_equal(ntbf_state_set_bars(s, d, 1, a1, why, sizeof(why)), 0);
        assert_int_equal(ntbf_state_set_bars(s, d, vf2, avf, why, sizeof(why)), 0);
        assert_int_equal(ntbf_state_bar_addr(s, d, 1, 0), hw1);
        assert_int_equal(ntbf_state_bar_addr(s, d, 0, 0), ntbf_device_bar_addr(dev, 0, 0));
        assert_int_equal(ntbf_state_bar_addr(s, d, 1, 2), 0);

        /* Borrowed: function 1 and VF 2 at the hardware's addresses, function 0 at the model's. */
        struct ntbf_plan p;
        uint32_t id1 = borrow(s, d, 1, 1, NTBF_MiB, &p);
        assert_int_equal(bar0_target(&p), hw1);
        ntbf_plan_free(&p);
        uint32_t idv = borrow(s, d, vf2, 1, NTBF_MiB, &p);
        assert_int_equal(bar0_target(&p), hwvf);
        ntbf_plan_free(&p);
        uint32_t id0 = borrow(s, d, 0, 1, NTBF_MiB, &p);
        assert_int_equal(bar0_target(&p), ntbf_device_bar_addr(dev, 0, 0));
        ntbf_plan_free(&p);

        /* A device of the other host maps 4 KiB at 8 KiB into function 1's BAR0 (named by the
         * model's address, as every request does): the slot targets the hardware's. */
        uint64_t m1 = ntbf_device_bar_addr(dev, 1, 0);
        assert_int_equal(map_bar(s, 1, far, 0, m1 + 8192, 4096, &p), 0);
        const struct ntbf_res *r = find_res(&p, NTBF_RES_LUT, NULL);
        assert_non_null(r);
        assert_int_equal(r->dst_addr + (p.dma_addr - r->addr), hw1 + 8192);
        ntbf_plan_free(&p);
        /* A device of the same host reaches it directly, at the hardware's address. */
        assert_int_equal(map_bar(s, 0, peer, 0, m1 + 8192, 4096, &p), 0);
        assert_int_equal(p.dma_addr, hw1 + 8192);
        ntbf_plan_free(&p);

        /* Refusals change nothing. */
        uint64_t bad[NTBF_MAX_BARS] = {hw1 + 4096};
        assert_int_equal(ntbf_state_set_bars(s, d, 1, bad, why, sizeof(why)), -EINVAL);
        assert_non_null(strstr(why, "BAR0 of a.nic0 function 1 at 0xfb205000 is not a nonzero "
                                    "multiple of its size (0x4000)"));
        uint64_t extra[NTBF_MAX_BARS] = {hw1, 0, UINT64_C(0xfb300000)};
        assert_int_equal(ntbf_state_set_bars(s, d, 1, extra, why, sizeof(why)), -EINVAL);
        assert_string_equal(why, "a.nic0 function 1 has no BAR2 in the cluster file");
        uint64_t none[NTBF_MAX_BARS] = {0};
        assert_int_equal(ntbf_state_set_bars(s, d, 1, none, why, sizeof(why)), -EINVAL);
        assert_int_equal(ntbf_state_set_bars(s, d, 12 + 8, a1, why, sizeof(why)), -EINVAL);
        assert_int_equal(ntbf_state_bar_addr(s, d, 1, 0), hw1);

        /* A clone keeps them; forgetting brings the model's back, in this state only. */
        struct ntbf_state *c = ntbf_state_clone(s);
        assert_non_null(c);
        assert_int_equal(ntbf_state_set_bars(s, d, 1, NULL, why, sizeof(why)), 0);
        assert_int_equal(ntbf_state_bar_addr(s, d, 1, 0), m1);
        assert_int_equal(ntbf_state_bar_addr(c, d, 1, 0), hw1);
        ntbf_state_free(c);

        assert_int_equal(ntbf_release(s, id1), 0);
        assert_int_equal(ntbf_release(s, idv), 0);
        assert_int_equal(ntbf_release(s, id0), 0);
        same_as_fresh(s);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

static void test_switch_accounting(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_star(4);
        fx_finalize_ok(t);
        struct ntbf_state *s = fx_state_ok(t);
        struct ntbf_budget_row r = row(s, NTBF_BUDGET_SWITCH_RID, 0);
        assert_int_equal(r.used, 8);
        assert_int_equal(r.baseline, 8);
        assert_int_equal(r.total, 256);
        struct ntbf_plan p;
        uint32_t id1 = borrow(s, 0, 0, 1, 0, &p); /* n1 borrows n0.nvme0 */
        bool dev_reg = false, cpu_reg = false;
        for (uint32_t i = 0; i < p.nres; i++) {
                const struct ntbf_res *x = &p.res[i];
                if (x->kind != NTBF_RES_SWITCH_RID)
                        continue;
                assert_int_equal(x->obj, 0);
                if (x->req.device == 0) {
                        dev_reg = true;
                        assert_false(x->shared);
                } else {
                        assert_int_equal(x->req.device, NTBF_NONE);
                        assert_int_equal(x->req.node, 1);
                        assert_true(x->shared); /* the CPU baseline already has it */
                        cpu_reg = true;
                }
        }
        assert_true(dev_reg && cpu_reg);
        assert_int_equal(p.path.nhops, 8);
        assert_int_equal(p.dma_path.nhops, 8);
        ntbf_plan_free(&p);
        assert_int_equal(row(s, NTBF_BUDGET_SWITCH_RID, 0).used, 9);
        assert_int_equal(row(s, NTBF_BUDGET_SWITCH_RID, 0).baseline, 8);
        /* A second borrower of the same device: no new entry anywhere. */
        uint32_t id2 = borrow(s, 0, 0, 2, 0, &p);
        const struct ntbf_res *x = find_res(&p, NTBF_RES_RID, NULL);
        assert_true(x && x->shared);
        ntbf_plan_free(&p);
        assert_int_equal(row(s, NTBF_BUDGET_SWITCH_RID, 0).used, 9);
        assert_int_equal(row(s, NTBF_BUDGET_RID, 0).used, 3);
        assert_int_equal(ntbf_release(s, id1), 0);
        assert_int_equal(row(s, NTBF_BUDGET_SWITCH_RID, 0).used, 9);
        assert_int_equal(ntbf_release(s, id2), 0);
        assert_int_equal(row(s, NTBF_BUDGET_SWITCH_RID, 0).used, 8);
        same_as_fresh(s);
        ntbf_state_free(s);
        ntbf_topo_free(t);

        /* Star of N nodes: every CPU crosses the one switch: cpu_rids * N on every port. */
        unsigned sizes[] = {2, 5, 12, 24};
        for (unsigned i = 0; i < 4; i++) {
                t = fx_star(sizes[i]);
                fx_finalize_ok(t);
                s = fx_state_ok(t);
                assert_int_equal(row(s, NTBF_BUDGET_SWITCH_RID, 0).used, 2 * sizes[i]);
                ntbf_state_free(s);
                ntbf_topo_free(t);
        }
        /* One CPU with 1 requester ID weighs 1. */
        t = fx_star(3);
        t->nodes[2].cpu_rids = 1;
        fx_finalize_ok(t);
        s = fx_state_ok(t);
        assert_int_equal(row(s, NTBF_BUDGET_SWITCH_RID, 0).used, 5);
        ntbf_state_free(s);
        ntbf_topo_free(t);

        /* The article's cascade: each CPU crosses the top and every sub-switch. */
        t = fx_cascade(60, 6, 0);
        fx_finalize_ok(t);
        s = fx_state_ok(t);
        for (uint32_t sw = 0; sw < 7; sw++)
                assert_int_equal(row(s, NTBF_BUDGET_SWITCH_RID, sw).used, 120);
        /* A borrow across the top registers the device on the three switches it crosses. */
        uint32_t n0 = 0, n1 = 1; /* n0 on sub0, n1 on sub1 */
        borrow(s, t->nodes[n0].devices[0], 0, n1, 0, &p);
        assert_int_equal(p.path.nhops, 12);
        ntbf_plan_free(&p);
        assert_int_equal(row(s, NTBF_BUDGET_SWITCH_RID, 0).used, 121); /* top */
        assert_int_equal(row(s, NTBF_BUDGET_SWITCH_RID, 1).used, 121); /* sub0 */
        assert_int_equal(row(s, NTBF_BUDGET_SWITCH_RID, 2).used, 121); /* sub1 */
        assert_int_equal(row(s, NTBF_BUDGET_SWITCH_RID, 3).used, 120);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

static void test_switch_table_full(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_star(3);
        t->switches[0].p.rid_table = 7;
        fx_finalize_ok(t);
        struct ntbf_state *s = fx_state_ok(t);
        borrow(s, 0, 0, 1, 0, NULL);
        struct ntbf_plan p;
        assert_int_equal(try_borrow(s, 1, 0, 2, 0, &p), NTBF_ENOSPC_BUDGET);
        assert_int_equal(p.refused_kind, NTBF_BUDGET_SWITCH_RID);
        assert_int_equal(p.refused_obj, 0);
        assert_string_equal(p.why,
                            "switch 'sw0': requester-ID table is full (7 of 7 entries used on "
                            "each port: 6 for CPUs, 1 by devices); this borrow needs 1 more on "
                            "every connected port; return a device whose traffic crosses 'sw0', "
                            "raise rid_table, or keep borrower and lender on one switch");
        ntbf_plan_free(&p);
        /* The device already registered is shared. */
        assert_int_equal(try_borrow(s, 0, 0, 2, 0, &p), 0);
        ntbf_plan_free(&p);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

static void test_baseline_overflow(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_star(10);
        t->switches[0].p.rid_table = 16;
        t->switches[0].loc = (struct ntbf_loc){7, 3};
        fx_finalize_ok(t);
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        struct ntbf_state *s = (void *)1;
        assert_int_equal(ntbf_state_new(t, &s, &d), NTBF_ECONFIG);
        assert_null(s);
        assert_int_equal(d.n, 1);
        assert_int_equal(d.errors, 1);
        assert_string_equal(d.v[0].file, "star.yaml");
        assert_int_equal(d.v[0].loc.line, 7);
        assert_int_equal(d.v[0].loc.col, 3);
        assert_string_equal(d.v[0].msg, "switch 'sw0': the CPUs of 10 nodes need 20 requester-ID "
                                        "entries on each port but it has 16; raise rid_table or "
                                        "split the fabric");
        ntbf_diags_free(&d);
        ntbf_topo_free(t);

        /* 1024 nodes under one top and 63 sub-switches: every switch overflows. */
        t = fx_cascade(1024, 63, 0);
        fx_finalize_ok(t);
        ntbf_diags_init(&d);
        assert_int_equal(ntbf_state_new(t, &s, &d), NTBF_ECONFIG);
        assert_int_equal(d.n, 64);
        assert_string_equal(d.v[0].msg, "switch 'top': the CPUs of 1024 nodes need 2048 "
                                        "requester-ID entries on each port but it has 256; raise "
                                        "rid_table or split the fabric");
        assert_int_equal(d.v[0].loc.line, 3);
        ntbf_diags_free(&d);
        ntbf_topo_free(t);
}

/* The CPU baseline is exactly the switches on ntbf_path_find's paths between every pair. */
static void check_baseline_brute(struct ntbf_topo *t)
{
        struct ntbf_state *s = fx_state_ok(t);
        bool *on = calloc(t->nswitches, sizeof(*on));
        for (uint32_t n = 0; n < t->nnodes; n++) {
                memset(on, 0, t->nswitches * sizeof(*on));
                for (uint32_t m = 0; m < t->nnodes; m++) {
                        if (m == n)
                                continue;
                        struct ntbf_path p;
                        char why[256];
                        assert_int_equal(ntbf_path_find(t, NULL,
                                                        (struct ntbf_endpoint){NTBF_EP_CPU, n, 0},
                                                        (struct ntbf_endpoint){NTBF_EP_CPU, m, 0},
                                                        &p, why, sizeof(why)),
                                         0);
                        for (uint32_t h = 0; h < p.nhops; h++)
                                if (p.hops[h].kind == NTBF_HOP_SWITCH)
                                        on[p.hops[h].obj] = true;
                }
                for (uint32_t sw = 0; sw < t->nswitches; sw++)
                        if (on[sw] != (ntbf__rset_refs(&s->sw[sw].reqs, ntbf__key_cpu(t, n)) > 0))
                                fail_msg("node %u switch %u: baseline %d, paths %d", n, sw, !on[sw],
                                         on[sw]);
        }
        free(on);
        fx_consistent(s);
        ntbf_state_free(s);
}

static void test_baseline_matches_paths(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_cascade(60, 6, 0);
        fx_finalize_ok(t);
        check_baseline_brute(t);
        ntbf_topo_free(t);
        /* Mixed: a second adapter on some nodes into another switch, a direct cable, and a
         * second cable between the switch networks' top and sub0. */
        t = fx_cascade(12, 3, 0);
        uint32_t sw = ntbf_topo_add_switch(t, "side", ntbf_switch_preset("mxs824"));
        for (uint32_t n = 0; n < 6; n++) {
                uint32_t a = ntbf_topo_add_adapter(t, n, "ntb1", ntbf_adapter_preset("mxh930"));
                ntbf_topo_add_link(t, fx_ap(a, 0), fx_sp(sw, n));
        }
        uint32_t a6 = ntbf_topo_add_adapter(t, 6, "ntb2", ntbf_adapter_preset("pxh830"));
        uint32_t a7 = ntbf_topo_add_adapter(t, 7, "ntb2", ntbf_adapter_preset("pxh830"));
        ntbf_topo_add_link(t, fx_ap(a6, 0), fx_ap(a7, 0));
        ntbf_topo_add_link(t, fx_sp(0, 20), fx_sp(1, 20));
        fx_finalize_ok(t);
        check_baseline_brute(t);
        ntbf_topo_free(t);
}

/* A fabric full of equal-latency alternatives: two tops, parallel cables, dual-homed nodes. */
static struct ntbf_topo *tie_fabric(void)
{
        struct ntbf_topo *t = fx_cascade(12, 3, 0);
        uint32_t top2 = ntbf_topo_add_switch(t, "top2", ntbf_switch_preset("mxs824"));
        for (uint32_t s = 1; s <= 3; s++)
                ntbf_topo_add_link(t, fx_sp(s, 22), fx_sp(top2, s));
        ntbf_topo_add_link(t, fx_sp(0, 20), fx_sp(1, 20)); /* a second top - sub0 cable */
        uint32_t side = ntbf_topo_add_switch(t, "side", ntbf_switch_preset("mxs824"));
        for (uint32_t n = 0; n < 6; n++) {
                uint32_t a = ntbf_topo_add_adapter(t, n, "ntb1", ntbf_adapter_preset("pxh830"));
                ntbf_topo_add_link(t, fx_ap(a, 0), fx_sp(side, n));
        }
        uint32_t a6 = ntbf_topo_add_adapter(t, 6, "ntb2", ntbf_adapter_preset("pxh830"));
        uint32_t a7 = ntbf_topo_add_adapter(t, 7, "ntb2", ntbf_adapter_preset("pxh830"));
        ntbf_topo_add_link(t, fx_ap(a6, 0), fx_ap(a7, 0));
        ntbf_topo_add_link(t, fx_ap(8, 1), fx_sp(2, 21)); /* n8's second port onto sub1 */
        /* n9 (on sub0) also on sub1 by a slow cable: from sub1's nodes both ways cost the
         * same (302 + 340 + 132 = 642 + 0 + 132) though the switches are settled apart. */
        uint32_t slow = ntbf_topo_add_link(t, fx_ap(9, 1), fx_sp(2, 19));
        t->links[slow].latency_ns = 340;
        return t;
}

/* Every tree path (ntbf__sssp_tree) is exactly the path ntbf_path_find returns. */
static void test_tree_matches_path_find(void **state)
{
        (void)state;
        struct ntbf_topo *t = tie_fabric();
        fx_finalize_ok(t);
        const struct ntbf__graph *g = t->graph;
        uint64_t *dist = malloc(g->nv * sizeof(*dist));
        uint32_t *prev = malloc(g->nv * sizeof(*prev));
        void *heap = malloc(ntbf__sssp_heap_bytes(g));
        for (uint32_t n = 0; n < t->nnodes; n++) {
                ntbf__sssp_tree(g, n, dist, prev, heap);
                for (uint32_t m = 0; m < t->nnodes; m++) {
                        if (m == n)
                                continue;
                        struct ntbf_path p;
                        char why[256];
                        assert_int_equal(ntbf_path_find(t, NULL,
                                                        (struct ntbf_endpoint){NTBF_EP_CPU, n, 0},
                                                        (struct ntbf_endpoint){NTBF_EP_CPU, m, 0},
                                                        &p, why, sizeof(why)),
                                         0);
                        uint32_t links[NTBF_PATH_MAX], nl = 0;
                        for (uint32_t v = m; v != n; v = g->arcs[prev[v]].from) {
                                assert_int_not_equal(prev[v], NTBF_NONE);
                                if (g->arcs[prev[v]].link != NTBF_NONE)
                                        links[nl++] = g->arcs[prev[v]].link;
                        }
                        assert_int_equal(dist[m], p.latency_ns);
                        for (uint32_t h = 0; h < p.nhops; h++)
                                if (p.hops[h].kind == NTBF_HOP_LINK) {
                                        assert_true(nl > 0);
                                        assert_int_equal(links[--nl], p.hops[h].obj);
                                }
                        assert_int_equal(nl, 0);
                }
        }
        free(dist);
        free(prev);
        free(heap);
        check_baseline_brute(t);
        ntbf_topo_free(t);
}

static void test_slot_sharing(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b_devices(2, 16 * NTBF_KiB);
        fx_finalize_ok(t);
        struct ntbf_state *s = fx_state_ok(t);
        struct ntbf_plan p1, p2;
        uint32_t id1 = borrow(s, 0, 0, 1, NTBF_MiB, &p1); /* b borrows a.d0 */
        uint32_t id2 = borrow(s, 1, 0, 1, NTBF_MiB, &p2); /* b borrows a.d1 */
        const struct ntbf_res *m1 = find_res(&p1, NTBF_RES_LUT, "MSI window");
        const struct ntbf_res *m2 = find_res(&p2, NTBF_RES_LUT, "MSI window");
        assert_non_null(m1);
        assert_non_null(m2);
        assert_false(m1->shared);
        assert_true(m2->shared);
        assert_int_equal(m1->obj, 0);
        assert_int_equal(m1->first, m2->first);
        assert_int_equal(m1->count, 1);
        assert_int_equal(m1->dest, NTBF_DEST_MSI);
        assert_int_equal(m1->dst_node, 1);
        assert_int_equal(m1->programmer, 0); /* PLX: the window owner programs it */
        assert_int_equal(p1.msi_addr, p2.msi_addr);
        assert_int_equal(p1.msi_addr, m1->addr + (NTBF_MSI_BASE % NTBF_MiB));
        /* Both BAR0s are in one 1 MiB block of a: the borrower's slot is shared too. */
        const struct ntbf_res *b1 = find_res(&p1, NTBF_RES_LUT, "BAR0");
        const struct ntbf_res *b2 = find_res(&p2, NTBF_RES_LUT, "BAR0");
        assert_true(b1 && b2 && !b1->shared && b2->shared && b1->first == b2->first);
        assert_int_equal(b1->obj, 1);
        assert_int_equal(p2.bar_addr[0] - p1.bar_addr[0],
                         t->devices[1].bars[0].addr - t->devices[0].bars[0].addr);
        assert_int_equal(row(s, NTBF_BUDGET_LUT, 0).used, 3);
        /* Releasing one keeps the shared MSI slot: the other device's interrupt still lands. */
        assert_int_equal(ntbf_release(s, id1), 0);
        fx_consistent(s);
        assert_int_equal(row(s, NTBF_BUDGET_LUT, 0).used, 2);
        struct ntbf_route rt;
        struct ntbf_requester d1 = {0, 1, 0};
        assert_int_equal(
            ntbf_resolve(s, &d1, (struct ntbf_domain){NTBF_DOM_HOST, 0}, p2.msi_addr, &rt), 0);
        assert_int_equal(rt.ndests, 1);
        assert_int_equal(rt.dests[0].land, NTBF_LAND_MSI);
        assert_int_equal(rt.dests[0].node, 1);
        assert_int_equal(rt.dests[0].addr, NTBF_MSI_BASE);
        assert_int_equal(ntbf_release(s, id2), 0);
        assert_int_equal(row(s, NTBF_BUDGET_LUT, 0).used, 0);
        ntbf_plan_free(&p1);
        ntbf_plan_free(&p2);
        same_as_fresh(s);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

static uint32_t dma_first(const struct ntbf_plan *p)
{
        const struct ntbf_res *r = find_res(p, NTBF_RES_LUT, "DMA window");
        assert_non_null(r);
        return r->first;
}

/*
 * Windows of their own size and rules (a Switchtec partition through ntb_hw_switchtec: 31
 * usable LUT slots of 64 KiB, LUT 0 reserved, and a 2 MiB direct window after them): each
 * range goes to the window of the smallest slots that carries it; refusals name windows.
 */
/*
 * The rid_mask rule: what a device of several functions costs in its lender adapter's table.
 * nic0 has 4 functions and 8 VFs (12 requester IDs on its bus). NATIVE: one masked entry;
 * EXPAND (Switchtec): one entry per ID; REFUSE: none can pass, a single-function device can.
 */
static void test_rid_mask_rules(void **state)
{
        (void)state;
        struct ntbf_plan p;
        for (uint32_t rule = NTBF_RID_MASK_NATIVE; rule <= NTBF_RID_MASK_REFUSE; rule++) {
                struct ntbf_topo *t = fx_b2b("pxh830");
                t->adapters[0].p.rid_mask = rule;
                uint32_t d = add_nic(t);
                uint32_t one = ntbf_topo_add_device(t, 0, "nvme0");
                t->devices[one].bus = 4;
                t->devices[one].lend = true;
                t->devices[one].bars[0] =
                    (struct ntbf_bar){.size = 16 * NTBF_KiB, .flags = NTBF_BAR_64};
                fx_finalize_ok(t);
                const struct ntbf_adapter *la = &t->adapters[0];
                uint16_t rid, mask;
                struct ntbf_state *s = fx_state_ok(t);
                if (rule == NTBF_RID_MASK_REFUSE) {
                        assert_int_equal(ntbf_adapter_rid_cost(la, &t->devices[d]), 0);
                        assert_int_equal(try_borrow(s, d, 0, 1, NTBF_MiB, &p), NTBF_ENOSPC_BUDGET);
                        assert_int_equal(p.refused_kind, NTBF_BUDGET_RID);
                        assert_int_equal(p.refused_obj, 0);
                        assert_int_equal(p.refused_need, 12);
                        assert_string_equal(
                            p.why, "a.ntb0: its requester-ID table holds one ID per entry and "
                                   "its driver programs one entry per device (rid_mask: "
                                   "refuse), but a.nic0 has 12 functions, which would need 12 "
                                   "entries; a.nic0 cannot pass through a.ntb0: lend it through "
                                   "an adapter whose table takes masks, or set rid_mask: expand "
                                   "if its driver programs one entry per function");
                        ntbf_plan_free(&p);
                        /* One function: one exact entry. */
                        assert_int_equal(ntbf_adapter_rid_cost(la, &t->devices[one]), 1);
                        ntbf_adapter_rid_at(la, &t->devices[one], 0, &rid, &mask);
                        assert_int_equal(rid, 0x0400);
                        assert_int_equal(mask, 0xffff);
                        uint32_t id = borrow(s, one, 0, 1, NTBF_MiB, NULL);
                        assert_int_equal(row(s, NTBF_BUDGET_RID, 0).used, 3);
                        assert_int_equal(ntbf_release(s, id), 0);
                        same_as_fresh(s);
                        ntbf_state_free(s);
                        ntbf_topo_free(t);
                        continue;
                }
                uint32_t cost = rule == NTBF_RID_MASK_EXPAND ? 12 : 1;
                assert_int_equal(ntbf_adapter_rid_cost(la, &t->devices[d]), cost);
                /* Entry 1 is function 1 (EXPAND), entry 11 VF 7 at PF0 + 0x80 + 7. */
                ntbf_adapter_rid_at(la, &t->devices[d], cost - 1, &rid, &mask);
                assert_int_equal(rid, rule == NTBF_RID_MASK_EXPAND ? 0x0387 : 0x0300);
                assert_int_equal(mask, rule == NTBF_RID_MASK_EXPAND ? 0xffff : 0xff00);
                uint32_t ids[4];
                for (uint32_t f = 0; f < 3; f++) {
                        ids[f] = borrow(s, d, f, 1, NTBF_MiB, &p);
                        assert_int_equal(find_res(&p, NTBF_RES_RID, NULL)->shared, f > 0);
                        ntbf_plan_free(&p);
                        assert_int_equal(row(s, NTBF_BUDGET_RID, 0).used, 2 + cost);
                }
                ids[3] = borrow(s, one, 0, 1, NTBF_MiB, NULL);
                assert_int_equal(row(s, NTBF_BUDGET_RID, 0).used, 2 + cost + 1);
                for (uint32_t i = 0; i < 4; i++)
                        assert_int_equal(ntbf_release(s, ids[i]), 0);
                same_as_fresh(s);
                ntbf_state_free(s);
                /* A table with room for the device's masked entry, not for its 12 IDs. */
                t->adapters[0].p.rid_table = 12;
                fx_finalize_ok(t);
                s = fx_state_ok(t);
                int rc = try_borrow(s, d, 0, 1, NTBF_MiB, &p);
                if (rule == NTBF_RID_MASK_NATIVE) {
                        assert_int_equal(rc, 0);
                } else {
                        assert_int_equal(rc, NTBF_ENOSPC_BUDGET);
                        assert_int_equal(p.refused_kind, NTBF_BUDGET_RID);
                        assert_int_equal(p.refused_used, 2);
                        assert_int_equal(p.refused_total, 12);
                        assert_int_equal(p.refused_need, 12);
                        assert_string_equal(
                            p.why, "a.ntb0: requester-ID table is full (2 of 12 used: 2 for the "
                                   "CPU, 0 by devices); this borrow needs 12 more (one per "
                                   "function: its table holds one ID per entry, rid_mask: "
                                   "expand, and a.nic0 has 12 functions); return a borrowed "
                                   "device through a.ntb0 or lend through another adapter");
                }
                ntbf_plan_free(&p);
                ntbf_state_free(s);
                ntbf_topo_free(t);
        }
        assert_string_equal(ntbf_rid_mask_name(NTBF_RID_MASK_EXPAND), "expand");
        assert_string_equal(ntbf_rid_mask_name(7), "?");
}

static void test_windows_switchtec(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b_devices(3, 16 * NTBF_KiB);
        for (uint32_t a = 0; a < 2; a++)
                t->adapters[a].p = *ntbf_adapter_preset("switchtec-pfx-linux");
        fx_finalize_ok(t);
        const struct ntbf_adapter *la = &t->adapters[0];
        assert_int_equal(la->nwin, 2);
        assert_int_equal(la->nslots, 33);
        assert_int_equal(la->win[1].first_slot, 32);
        assert_int_equal(la->win[1].base, la->win[0].base + 2 * NTBF_MiB); /* one BAR */
        struct ntbf_state *s = fx_state_ok(t);
        /* 32 LUT + the direct one; LUT 0, the driver's shared window (its scratchpads), is
         * taken at start. */
        struct ntbf_budget_row lut = row(s, NTBF_BUDGET_LUT, 0);
        assert_int_equal(lut.total, 33);
        assert_int_equal(lut.used, 1);
        assert_int_equal(lut.baseline, 1);
        struct ntbf_budget_row win = row(s, NTBF_BUDGET_WINDOW, 0);
        assert_int_equal(win.total, 4 * NTBF_MiB);
        assert_int_equal(win.used, 64 * NTBF_KiB);
        assert_int_equal(win.baseline, 64 * NTBF_KiB);
        struct ntbf_plan p;
        borrow(s, 0, 0, 1, NTBF_MiB, &p);
        const struct ntbf_res *bar = find_res(&p, NTBF_RES_LUT, "BAR0");
        assert_int_equal(bar->first, 1); /* LUT 0 is the hardware's */
        assert_int_equal(bar->count, 1);
        assert_int_equal(bar->size, 64 * NTBF_KiB);
        const struct ntbf_res *dma = find_res(&p, NTBF_RES_LUT, "DMA window");
        assert_int_equal(dma->first, 1);
        assert_int_equal(dma->count, 16); /* 1 MiB in 64 KiB LUT slots, not the direct window */
        assert_int_equal(find_res(&p, NTBF_RES_LUT, "MSI window")->first, 17);
        ntbf_plan_free(&p);
        /* 2 MiB: too many LUT slots for what is left; the direct window carries it whole. */
        borrow(s, 1, 0, 1, 2 * NTBF_MiB, &p);
        dma = find_res(&p, NTBF_RES_LUT, "DMA window");
        assert_int_equal(dma->first, 32);
        assert_int_equal(dma->count, 1);
        assert_int_equal(dma->size, 2 * NTBF_MiB);
        assert_int_equal(dma->addr, la->win[1].base);
        assert_int_equal(dma->dst_addr % (2 * NTBF_MiB), 0); /* naturally aligned */
        assert_true(find_res(&p, NTBF_RES_LUT, "MSI window")->shared);
        ntbf_plan_free(&p);
        assert_int_equal(row(s, NTBF_BUDGET_LUT, 0).used, 1 + 18);
        assert_int_equal(row(s, NTBF_BUDGET_WINDOW, 0).used, 18 * 64 * NTBF_KiB + 2 * NTBF_MiB);
        /* Another 2 MiB: the LUT could never carry it, the direct window is taken. */
        assert_int_equal(try_borrow(s, 2, 0, 1, 2 * NTBF_MiB, &p), NTBF_ENOSPC_BUDGET);
        assert_int_equal(p.refused_kind, NTBF_BUDGET_LUT);
        assert_string_equal(p.why, "a.ntb0: no window has room for the DMA window: window 1 has no "
                                   "1 free consecutive slot of 2 MiB (0 free, largest run 0); use "
                                   "a smaller --dma-window or a larger window");
        ntbf_plan_free(&p);
        /* 4 MiB: no window of the adapter can carry it at all. */
        assert_int_equal(try_borrow(s, 2, 0, 1, 4 * NTBF_MiB, &p), NTBF_ENOSPC_BUDGET);
        assert_int_equal(p.refused_kind, NTBF_BUDGET_WINDOW);
        assert_non_null(strstr(p.why, "a.ntb0: no window can carry the DMA window (4 MiB at 0x"));
        assert_non_null(strstr(p.why, "): window 0 31 x 64 KiB, window 1 1 x 2 MiB; enlarge a "
                                      "window of a.ntb0"));
        ntbf_plan_free(&p);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

/*
 * Translations smaller than their slot: Intel's BAR-sized windows translate from the BAR-size
 * aligned address below the target, in pages, as far as the target ends, not the whole BAR.
 */
static void test_windows_sized_translations(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b("intel-gen3");
        uint32_t d = ntbf_topo_add_device(t, 0, "nvme0");
        t->devices[d].bus = 3;
        t->devices[d].lend = true;
        t->devices[d].bars[0] = (struct ntbf_bar){.size = 16 * NTBF_KiB, .flags = NTBF_BAR_64};
        fx_finalize_ok(t);
        struct ntbf_state *s = fx_state_ok(t);
        struct ntbf_plan p;
        borrow(s, d, 0, 1, 0, &p);
        const uint64_t W = 256 * NTBF_MiB;
        uint64_t x = t->devices[d].bars[0].addr;
        const struct ntbf_res *bar = find_res(&p, NTBF_RES_LUT, "BAR0");
        assert_int_equal(bar->obj, 1);
        assert_int_equal(bar->count, 1);
        assert_int_equal(bar->dst_addr, x & ~(W - 1));
        assert_int_equal(bar->size, x + 16 * NTBF_KiB - (x & ~(W - 1)));
        assert_true(bar->size < W);
        assert_int_equal(bar->programmer, 0); /* inbound: the lender programs b's window */
        /* The DMA window (16 MiB of IOVA) and the MSI window take the lender's two windows. */
        const struct ntbf_res *dma = find_res(&p, NTBF_RES_LUT, "DMA window");
        const struct ntbf_res *msi = find_res(&p, NTBF_RES_LUT, "MSI window");
        assert_true(dma->first != msi->first);
        assert_int_equal(dma->size, p.dma_iova + 16 * NTBF_MiB - dma->dst_addr);
        assert_int_equal(msi->dst_addr, NTBF_MSI_BASE & ~(W - 1));
        assert_int_equal(msi->size, NTBF_MSI_BASE + NTBF_MiB - msi->dst_addr);
        assert_int_equal(row(s, NTBF_BUDGET_LUT, 0).used, 2);
        assert_int_equal(row(s, NTBF_BUDGET_WINDOW, 0).used, 2 * W);
        ntbf_plan_free(&p);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

static void test_first_fit_and_exhaustion(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b_devices(4, 16 * NTBF_KiB);
        t->adapters[0].p.window = 32 * NTBF_MiB; /* 32 slots of 1 MiB */
        t->adapters[0].p.lut_entries = 32;
        fx_finalize_ok(t);
        struct ntbf_state *s = fx_state_ok(t);
        struct ntbf_plan p;
        uint32_t x1 = borrow(s, 0, 0, 1, 9 * NTBF_MiB, &p);
        assert_int_equal(dma_first(&p), 0); /* slots 0-8, MSI slot 9 */
        assert_int_equal(find_res(&p, NTBF_RES_LUT, "MSI window")->first, 9);
        ntbf_plan_free(&p);
        borrow(s, 1, 0, 1, 9 * NTBF_MiB, &p);
        assert_int_equal(dma_first(&p), 10);
        ntbf_plan_free(&p);
        uint32_t x3 = borrow(s, 2, 0, 1, 3 * NTBF_MiB, &p);
        assert_int_equal(dma_first(&p), 19);
        ntbf_plan_free(&p);
        borrow(s, 3, 0, 1, 10 * NTBF_MiB, &p);
        assert_int_equal(dma_first(&p), 22);
        ntbf_plan_free(&p);
        assert_int_equal(row(s, NTBF_BUDGET_LUT, 0).used, 32);
        assert_int_equal(ntbf_release(s, x1), 0);
        assert_int_equal(ntbf_release(s, x3), 0);
        /* 12 free: 0-8 and 19-21. */
        assert_int_equal(try_borrow(s, 0, 0, 1, 16 * NTBF_MiB, &p), NTBF_ENOSPC_BUDGET);
        assert_int_equal(p.refused_kind, NTBF_BUDGET_LUT);
        assert_int_equal(p.refused_obj, 0);
        assert_int_equal(p.refused_used, 20);
        assert_int_equal(p.refused_total, 32);
        assert_int_equal(p.refused_need, 16);
        assert_string_equal(p.why, "a.ntb0: window has no 16 free consecutive slots of 1 MiB for "
                                   "the DMA window (12 free, largest run 9); use a smaller "
                                   "--dma-window or a larger window");
        ntbf_plan_free(&p);
        /* More than the whole window: a configuration limit, not a momentary one. */
        assert_int_equal(try_borrow(s, 0, 0, 1, 64 * NTBF_MiB, &p), NTBF_ENOSPC_BUDGET);
        assert_int_equal(p.refused_kind, NTBF_BUDGET_WINDOW);
        assert_int_equal(p.refused_need, 64 * NTBF_MiB);
        assert_string_equal(p.why, "a.ntb0: the DMA window needs 64 slots of 1 MiB (64 MiB of "
                                   "window) but the whole window has 32 (32 MiB); enlarge the "
                                   "window of a.ntb0");
        ntbf_plan_free(&p);
        /* First fit: the lowest run that is long enough. */
        int want[] = {0, 3, 6, 19};
        for (int i = 0; i < 4; i++) {
                borrow(s, 0, 0, 1, 3 * NTBF_MiB, &p);
                assert_int_equal(dma_first(&p), want[i]);
                ntbf_plan_free(&p);
        }
        assert_int_equal(try_borrow(s, 0, 0, 1, 1, &p), NTBF_ENOSPC_BUDGET);
        assert_non_null(strstr(p.why, "(0 free, largest run 0)"));
        ntbf_plan_free(&p);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

static void test_addressing_limits(void **state)
{
        (void)state;
        for (int low = 0; low < 2; low++) {
                struct ntbf_topo *t = fx_b2b("pxh830");
                uint32_t d = ntbf_topo_add_device(t, 0, "gpu");
                t->devices[d].bus = 5;
                t->devices[d].lend = true;
                t->devices[d].dma_bits = 32;
                t->devices[d].bars[0] = (struct ntbf_bar){.size = 16 * NTBF_KiB};
                t->adapters[0].p.window_below_4g = low;
                fx_finalize_ok(t);
                struct ntbf_state *s = fx_state_ok(t);
                struct ntbf_plan p;
                int r = try_borrow(s, d, 0, 1, 0, &p);
                if (!low) {
                        assert_int_equal(r, NTBF_EADDRLIMIT);
                        assert_int_equal(p.refused_kind, NTBF_BUDGET_ADDR);
                        assert_int_equal(p.refused_obj, 0);
                        assert_int_equal(p.refused_total, UINT64_C(1) << 32);
                        assert_string_equal(
                            p.why, "a.gpu can address 32 bits (up to 0xffffffff) but its DMA "
                                   "window would be at 0x38000000000-0x38000ffffff in the window "
                                   "of a.ntb0; place that window below 4 GiB (window_below_4g: "
                                   "true on a.ntb0) or use the lender IOMMU");
                } else {
                        assert_int_equal(r, 0);
                        assert_true(p.dma_addr + 16 * NTBF_MiB <= (UINT64_C(1) << 32));
                        assert_true(p.msi_addr < (UINT64_C(1) << 32));
                        uint32_t id;
                        assert_int_equal(ntbf_commit(s, &p, &id), 0);
                        fx_consistent(s);
                }
                ntbf_plan_free(&p);
                ntbf_state_free(s);
                ntbf_topo_free(t);
        }
        /* An adapter translating 32-bit addresses cannot reach a BAR above 4 GiB. */
        struct ntbf_topo *t = fx_b2b("pxh830");
        uint32_t d = fx_add_accel(t, 0, "acc", 4, 64 * NTBF_MiB);
        t->adapters[1].p.addr_bits = 32;
        fx_finalize_ok(t);
        struct ntbf_state *s = fx_state_ok(t);
        struct ntbf_plan p;
        assert_int_equal(try_borrow(s, d, 0, 1, 0, &p), NTBF_EADDRLIMIT);
        assert_int_equal(p.refused_obj, 1);
        assert_non_null(strstr(p.why, "b.ntb0 translates 32-bit far-side addresses but BAR2 of "
                                      "a.acc needs slots up to 0x"));
        assert_non_null(strstr(p.why, "in node 'a'; use an adapter with wider translation"));
        ntbf_plan_free(&p);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

static void test_invalid_requests(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_star(3);
        fx_finalize_ok(t);
        struct ntbf_state *s = fx_state_ok(t);
        struct ntbf_plan p;
        assert_int_equal(try_borrow(s, 0, 0, 0, 0, &p), -EINVAL);
        assert_string_equal(p.why, "n0.nvme0 is in node 'n0' itself; a node uses its own devices "
                                   "directly");
        ntbf_plan_free(&p);
        assert_int_equal(try_borrow(s, 99, 0, 1, 0, &p), -EINVAL);
        ntbf_plan_free(&p);
        struct ntbf_request q;
        ntbf_request_init(&q, NTBF_REQ_BORROW);
        q.device = 0;
        q.by = 1;
        q.via_adapter = 0; /* n0's adapter, not the borrower's */
        assert_int_equal(ntbf_admit(s, &q, &p), -EINVAL);
        assert_string_equal(p.why, "the first adapter is not an adapter of node 'n1'");
        ntbf_plan_free(&p);
        ntbf_request_init(&q, NTBF_REQ_CONNECT);
        q.requester.node = 1;
        q.target.node = 0;
        q.target.addr = UINT64_C(0x70000000000);
        q.target.size = 4096;
        assert_int_equal(ntbf_admit(s, &q, &p), -EINVAL);
        assert_string_equal(p.why, "nothing is at 0x70000000000 in node 'n0' (no RAM, BAR or MSI "
                                   "range)");
        ntbf_plan_free(&p);
        q.target.addr = t->adapters[0].window_base;
        assert_int_equal(ntbf_admit(s, &q, &p), -EINVAL);
        assert_non_null(strstr(p.why, "is the window of adapter ntb0"));
        ntbf_plan_free(&p);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

/* Stale plans are refused without any change; clones are independent. */
static void test_stale_and_clone(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b_devices(2, 16 * NTBF_KiB);
        t->adapters[0].p.window = 4 * NTBF_MiB;
        t->adapters[0].p.lut_entries = 4;
        fx_finalize_ok(t);
        struct ntbf_state *s = fx_state_ok(t);
        struct ntbf_plan pa, pb;
        assert_int_equal(try_borrow(s, 0, 0, 1, 2 * NTBF_MiB, &pa), 0);
        assert_int_equal(try_borrow(s, 1, 0, 1, 2 * NTBF_MiB, &pb), 0);
        uint32_t ida, idb;
        assert_int_equal(ntbf_commit(s, &pa, &ida), 0);
        struct ntbf_state *before = ntbf_state_clone(s);
        assert_non_null(before);
        assert_int_equal(ntbf_commit(s, &pb, &idb), -ESTALE);
        char why[256];
        if (ntbf__state_equal(s, before, why, sizeof(why)))
                fail_msg("a stale commit changed the state: %s", why);
        fx_consistent(s);
        /* The clone lives on its own. */
        assert_int_equal(ntbf_release(before, ida), 0);
        assert_int_equal(row(before, NTBF_BUDGET_LUT, 0).used, 0);
        assert_int_equal(row(s, NTBF_BUDGET_LUT, 0).used, 3);
        assert_non_null(ntbf_alloc_plan(s, ida));
        assert_null(ntbf_alloc_plan(before, ida));
        uint32_t ids[4];
        assert_int_equal(ntbf_state_allocs(s, ids, 4), 1);
        assert_int_equal(ids[0], ida);
        assert_int_equal(ntbf_alloc_plan(s, ida)->dma_addr, pa.dma_addr);
        ntbf_plan_free(&pa);
        ntbf_plan_free(&pb);
        ntbf_state_free(before);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

static void test_names(void **state)
{
        (void)state;
        assert_string_equal(ntbf_budget_kind_name(NTBF_BUDGET_RID), "rid");
        assert_string_equal(ntbf_budget_kind_name(NTBF_BUDGET_SWITCH_RID), "switch-rid");
        assert_string_equal(ntbf_budget_kind_name(NTBF_BUDGET_RANGE), "range");
        assert_string_equal(ntbf_res_kind_name(NTBF_RES_RANGE), "range");
        assert_string_equal(ntbf_res_kind_name(NTBF_RES_MCAST), "mcast");
        assert_string_equal(ntbf_landing_name(NTBF_LAND_MSI), "msi");
        assert_string_equal(ntbf_budget_kind_name((enum ntbf_budget_kind)99), "?");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_article_figure),
            cmocka_unit_test(test_multifunction_one_entry),
            cmocka_unit_test(test_vfs_two_borrowers),
            cmocka_unit_test(test_real_bars),
            cmocka_unit_test(test_rid_mask_rules),
            cmocka_unit_test(test_switch_accounting),
            cmocka_unit_test(test_switch_table_full),
            cmocka_unit_test(test_baseline_overflow),
            cmocka_unit_test(test_baseline_matches_paths),
            cmocka_unit_test(test_tree_matches_path_find),
            cmocka_unit_test(test_slot_sharing),
            cmocka_unit_test(test_first_fit_and_exhaustion),
            cmocka_unit_test(test_windows_switchtec),
            cmocka_unit_test(test_windows_sized_translations),
            cmocka_unit_test(test_addressing_limits),
            cmocka_unit_test(test_invalid_requests),
            cmocka_unit_test(test_stale_and_clone),
            cmocka_unit_test(test_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
