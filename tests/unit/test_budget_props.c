/* tests/unit/test_budget_props.c: random admit/commit/release keeps budgets exact. */
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

#define STEPS_PER_TOPOLOGY 8000
#define MAX_LIVE           4096

struct rng {
        uint64_t s;
};

static uint64_t rnd(struct rng *r)
{
        /* xorshift64*: deterministic for a seed, so a failure replays exactly. */
        r->s ^= r->s >> 12;
        r->s ^= r->s << 25;
        r->s ^= r->s >> 27;
        return r->s * UINT64_C(2685821657736338717);
}

static uint32_t below(struct rng *r, uint32_t n)
{
        return n ? (uint32_t)(rnd(r) % n) : 0;
}

static bool chance(struct rng *r, unsigned percent)
{
        return below(r, 100) < percent;
}

struct stats {
        unsigned admitted, refused[8], invalid, stale, stale_ok, released, routes;
};

static void refusal_count(struct stats *st, const struct ntbf_plan *p)
{
        if (p->result == NTBF_ENOSPC_BUDGET)
                st->refused[p->refused_kind]++;
        else if (p->result == NTBF_EADDRLIMIT)
                st->refused[NTBF_BUDGET_ADDR]++;
        else
                st->invalid++;
}

static void consistent(const struct ntbf_state *s, unsigned step)
{
        char why[256];
        if (ntbf__state_check(s, why, sizeof(why)))
                fail_msg("step %u: inconsistent state: %s", step, why);
}

/* A target: RAM, a BAR, the MSI range, a multicast group, or an address nothing claims. */
static struct ntbf_target random_target(struct rng *r, const struct ntbf_topo *t)
{
        struct ntbf_target g = {NTBF_TARGET_MEM, below(r, t->nnodes), 0, 0, NTBF_NONE};
        uint32_t k = below(r, 100);
        if (k < 30) {
                g.addr = 16 * NTBF_MiB + (uint64_t)below(r, 4096) * 4096 + below(r, 4096);
                g.size = 1 + below(r, 8 * NTBF_MiB);
        } else if (k < 60 && t->ndevices) {
                const struct ntbf_device *d = &t->devices[below(r, t->ndevices)];
                uint32_t f = below(r, ntbf_device_nfuncs(d)), b = below(r, NTBF_MAX_BARS);
                uint64_t size = ntbf_device_bar_size(d, f, b);
                g.node = d->node;
                if (!size)
                        return random_target(r, t);
                uint64_t off = rnd(r) % size;
                g.addr = ntbf_device_bar_addr(d, f, b) + off;
                g.size = 1 + rnd(r) % (size - off);
        } else if (k < 70) {
                g.addr = NTBF_MSI_BASE + below(r, NTBF_MSI_SIZE - 4);
                g.size = 4;
        } else if (k < 88) {
                g.kind = NTBF_TARGET_MCAST;
                g.group = below(r, 4);
                g.addr = below(r, 2 * NTBF_MiB);
                g.size = 1 + below(r, NTBF_MiB);
        } else {
                g.addr = rnd(r) & (NTBF_PHYS_LIMIT - 1);
                g.size = 1 + below(r, 64 * NTBF_MiB);
        }
        return g;
}

/* Mostly no choice; else an adapter of the node, now and then any index (maybe invalid). */
static uint32_t random_adapter(struct rng *r, const struct ntbf_topo *t, uint32_t node)
{
        if (chance(r, 90))
                return NTBF_NONE;
        if (node < t->nnodes && t->nodes[node].nadapters && chance(r, 75))
                return t->nodes[node].adapters[below(r, t->nodes[node].nadapters)];
        return below(r, t->nadapters + 1);
}

static void random_request(struct rng *r, const struct ntbf_topo *t, struct ntbf_request *q)
{
        uint32_t k = below(r, 100);
        if (k < 40) {
                ntbf_request_init(q, NTBF_REQ_BORROW);
                q->device = below(r, t->ndevices + (chance(r, 2) ? 1 : 0));
                uint32_t nf =
                    q->device < t->ndevices ? ntbf_device_nfuncs(&t->devices[q->device]) : 1;
                q->function = below(r, nf + (chance(r, 2) ? 1 : 0));
                q->by = below(r, t->nnodes);
                static const uint64_t dw[] = {0,
                                              4096,
                                              NTBF_MiB,
                                              3 * NTBF_MiB + 4096,
                                              16 * NTBF_MiB,
                                              64 * NTBF_MiB,
                                              300 * NTBF_MiB};
                q->dma_window = dw[below(r, 7)];
                q->via_adapter = random_adapter(r, t, q->by);
                q->to_adapter = random_adapter(
                    r, t, q->device < t->ndevices ? t->devices[q->device].node : NTBF_NONE);
        } else if (k < 65) {
                ntbf_request_init(q, NTBF_REQ_MAP_DEVICE);
                uint32_t d = below(r, t->ndevices);
                q->requester = (struct ntbf_requester){
                    NTBF_NONE, d, below(r, ntbf_device_nfuncs(&t->devices[d]))};
                q->target = random_target(r, t);
                q->via_adapter = random_adapter(r, t, t->devices[d].node);
                q->to_adapter = random_adapter(r, t, q->target.node);
        } else if (k < 85) {
                ntbf_request_init(q, NTBF_REQ_CONNECT);
                q->requester.node = below(r, t->nnodes);
                q->target = random_target(r, t);
                q->via_adapter = random_adapter(r, t, q->requester.node);
                q->to_adapter = random_adapter(r, t, q->target.node);
        } else {
                ntbf_request_init(q, NTBF_REQ_MCAST_JOIN);
                q->target =
                    (struct ntbf_target){NTBF_TARGET_MCAST, below(r, t->nnodes),
                                         16 * NTBF_MiB + (uint64_t)below(r, 4096) * 4096,
                                         chance(r, 80) ? NTBF_MiB : 2 * NTBF_MiB, below(r, 4)};
                q->via_adapter = random_adapter(r, t, q->target.node);
        }
}

static void expect_land(const struct ntbf_state *s, const struct ntbf_requester *rq, uint64_t addr,
                        uint32_t node, uint64_t to, unsigned step, const char *what)
{
        struct ntbf_route rt;
        int r = ntbf_resolve(s, rq, (struct ntbf_domain){NTBF_DOM_HOST, rq->node}, addr, &rt);
        if (r || rt.ndests != 1 || rt.dests[0].node != node || rt.dests[0].addr != to)
                fail_msg("step %u: %s at 0x%llx: result %s, %u dests (node %u addr 0x%llx), "
                         "expected node %u addr 0x%llx: %s",
                         step, what, (unsigned long long)addr, ntbf_err_name(r), rt.ndests,
                         rt.ndests ? rt.dests[0].node : 0,
                         (unsigned long long)(rt.ndests ? rt.dests[0].addr : 0), node,
                         (unsigned long long)to, rt.why);
}

/* What an admitted plan promises must resolve: BARs, MSI, DMA windows, mapped targets. */
static void check_routes(const struct ntbf_state *s, const struct ntbf_plan *p, unsigned step,
                         struct stats *st)
{
        const struct ntbf_topo *t = ntbf_state_topo(s);
        const struct ntbf_request *q = &p->req;
        st->routes++;
        if (q->kind == NTBF_REQ_BORROW) {
                const struct ntbf_device *d = &t->devices[q->device];
                struct ntbf_requester cpu = {q->by, NTBF_NONE, 0};
                struct ntbf_requester dev = {d->node, q->device, q->function};
                for (uint32_t b = 0; b < NTBF_MAX_BARS; b++) {
                        uint64_t size = ntbf_device_bar_size(d, q->function, b);
                        if (size)
                                expect_land(s, &cpu, p->bar_addr[b] + size / 2, d->node,
                                            ntbf_device_bar_addr(d, q->function, b) + size / 2,
                                            step, "BAR");
                }
                expect_land(s, &dev, p->msi_addr, q->by, NTBF_MSI_BASE, step, "MSI");
                struct ntbf_route rt;
                int r = ntbf_resolve(s, &dev, (struct ntbf_domain){NTBF_DOM_HOST, d->node},
                                     p->dma_addr + 8, &rt);
                if (t->nodes[q->by].iommu) {
                        if (r != NTBF_EIOMMU_FAULT)
                                fail_msg("step %u: DMA window into an IOMMU: %s: %s", step,
                                         ntbf_err_name(r), rt.why);
                } else {
                        expect_land(s, &dev, p->dma_addr + 8, q->by, p->dma_iova + 8, step,
                                    "DMA window");
                }
                return;
        }
        if (q->kind == NTBF_REQ_MCAST_JOIN)
                return;
        const struct ntbf_requester *rq = &q->requester;
        if (q->target.kind == NTBF_TARGET_MCAST) {
                struct ntbf_route rt;
                int r = ntbf_resolve(s, rq, (struct ntbf_domain){NTBF_DOM_HOST, rq->node},
                                     p->dma_addr, &rt);
                if (r && r != NTBF_EUNREACHABLE)
                        fail_msg("step %u: multicast send: %s: %s", step, ntbf_err_name(r), rt.why);
                for (uint32_t i = 0; !r && i < rt.ndests; i++)
                        if (rt.dests[i].land != NTBF_LAND_RAM && rt.dests[i].land != NTBF_LAND_BAR)
                                fail_msg("step %u: multicast member lands on %s", step,
                                         ntbf_landing_name(rt.dests[i].land));
                return;
        }
        expect_land(s, rq, p->dma_addr, q->target.node, q->target.addr, step, "mapping start");
        expect_land(s, rq, p->dma_addr + q->target.size - 1, q->target.node,
                    q->target.addr + q->target.size - 1, step, "mapping end");
}

struct live {
        uint32_t ids[MAX_LIVE];
        uint32_t n;
};

static void run(struct ntbf_topo *t, uint64_t seed, struct stats *st)
{
        fx_finalize_ok(t);
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        struct ntbf_state *s = NULL;
        if (ntbf_state_new(t, &s, &d)) {
                ntbf_diags_print(&d, stderr);
                fail_msg("ntbf_state_new failed");
        }
        ntbf_diags_free(&d);
        struct rng r = {seed};
        struct live *lv = calloc(1, sizeof(*lv));
        uint32_t last_released = 0;
        for (unsigned step = 0; step < STEPS_PER_TOPOLOGY; step++) {
                uint32_t op = below(&r, 100);
                struct ntbf_request q;
                struct ntbf_plan p;
                if (op < 55 || lv->n == 0) {
                        random_request(&r, t, &q);
                        int res = ntbf_admit(s, &q, &p);
                        assert_int_equal(res, p.result);
                        if (res == 0 && lv->n < MAX_LIVE) {
                                uint32_t id;
                                int c = ntbf_commit(s, &p, &id);
                                if (c)
                                        fail_msg("step %u: fresh plan not committed: %s", step,
                                                 ntbf_err_name(c));
                                lv->ids[lv->n++] = id;
                                st->admitted++;
                                check_routes(s, ntbf_alloc_plan(s, id), step, st);
                        } else if (res) {
                                assert_int_equal(p.nres, 0);
                                assert_true(p.why[0] != 0);
                                refusal_count(st, &p);
                        }
                        ntbf_plan_free(&p);
                } else if (op < 85) {
                        uint32_t i = below(&r, lv->n);
                        assert_int_equal(ntbf_release(s, lv->ids[i]), 0);
                        last_released = lv->ids[i];
                        lv->ids[i] = lv->ids[--lv->n];
                        st->released++;
                } else if (op < 95) {
                        /* Two plans from the same state; the second may have gone stale. */
                        struct ntbf_request q2;
                        struct ntbf_plan p2;
                        random_request(&r, t, &q);
                        random_request(&r, t, &q2);
                        int a = ntbf_admit(s, &q, &p), b = ntbf_admit(s, &q2, &p2);
                        if (!a && !b && lv->n + 2 <= MAX_LIVE) {
                                uint32_t id;
                                assert_int_equal(ntbf_commit(s, &p, &id), 0);
                                lv->ids[lv->n++] = id;
                                struct ntbf_state *before = ntbf_state_clone(s);
                                assert_non_null(before);
                                int c = ntbf_commit(s, &p2, &id);
                                if (c == -ESTALE) {
                                        char why[256];
                                        if (ntbf__state_equal(s, before, why, sizeof(why)))
                                                fail_msg("step %u: stale commit changed the "
                                                         "state: %s",
                                                         step, why);
                                        st->stale++;
                                } else {
                                        assert_int_equal(c, 0);
                                        lv->ids[lv->n++] = id;
                                        st->stale_ok++;
                                        check_routes(s, ntbf_alloc_plan(s, id), step, st);
                                }
                                ntbf_state_free(before);
                        }
                        ntbf_plan_free(&p);
                        ntbf_plan_free(&p2);
                } else if (op < 97) {
                        assert_int_equal(ntbf_release(s, last_released ? last_released : 0),
                                         NTBF_ENOTFOUND);
                } else {
                        struct ntbf_state *c = ntbf_state_clone(s);
                        char why[256];
                        assert_non_null(c);
                        if (ntbf__state_equal(s, c, why, sizeof(why)))
                                fail_msg("step %u: clone differs: %s", step, why);
                        consistent(c, step);
                        ntbf_state_free(c);
                }
                consistent(s, step);
                if (step % 500 == 499)
                        for (uint32_t i = 0; i < lv->n; i++)
                                check_routes(s, ntbf_alloc_plan(s, lv->ids[i]), step, st);
        }
        /* Everything back: the state equals a fresh one, row by row and table by table. */
        while (lv->n) {
                assert_int_equal(ntbf_release(s, lv->ids[--lv->n]), 0);
                consistent(s, STEPS_PER_TOPOLOGY);
        }
        struct ntbf_state *fresh = NULL;
        ntbf_diags_init(&d);
        assert_int_equal(ntbf_state_new(t, &fresh, &d), 0);
        ntbf_diags_free(&d);
        char why[256];
        if (ntbf__state_equal(s, fresh, why, sizeof(why)))
                fail_msg("after releasing everything: %s", why);
        size_t n = ntbf_budget_rows(s, NULL, 0);
        struct ntbf_budget_row *a = calloc(n, sizeof(*a)), *b = calloc(n, sizeof(*b));
        assert_int_equal(ntbf_budget_rows(fresh, b, n), n);
        ntbf_budget_rows(s, a, n);
        for (size_t i = 0; i < n; i++) {
                assert_int_equal(a[i].used, b[i].used);
                assert_int_equal(a[i].baseline, b[i].baseline);
                assert_int_equal(a[i].total, b[i].total);
        }
        free(a);
        free(b);
        free(lv);
        ntbf_state_free(fresh);
        ntbf_state_free(s);
        ntbf_topo_free(t);
}

static void report(const char *name, const struct stats *st)
{
        printf("%s: %u admitted (%u checked routes), %u released, refused: lut %u window %u "
               "rid %u switch-rid %u mcast %u addr %u range %u, invalid/no path %u, stale %u "
               "(still valid %u)\n",
               name, st->admitted, st->routes, st->released, st->refused[NTBF_BUDGET_LUT],
               st->refused[NTBF_BUDGET_WINDOW], st->refused[NTBF_BUDGET_RID],
               st->refused[NTBF_BUDGET_SWITCH_RID], st->refused[NTBF_BUDGET_MCAST],
               st->refused[NTBF_BUDGET_ADDR], st->refused[NTBF_BUDGET_RANGE], st->invalid,
               st->stale, st->stale_ok);
}

/* Back to back: small tables and windows so every budget runs out now and then. */
static void test_props_b2b(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b("pxh830");
        t->nodes[1].iommu = false;
        t->nodes[1].ram = 192 * NTBF_MiB; /* a RAM pool of 176 MiB */
        t->adapters[0].p.rid_table = 4;   /* room for 2 of a's 3 devices */
        t->adapters[1].p.window = 64 * NTBF_MiB;
        t->adapters[1].p.lut_entries = 64;
        uint32_t d = ntbf_topo_add_device(t, 0, "nic");
        t->devices[d].bus = 2;
        t->devices[d].lend = true;
        t->devices[d].functions = 4;
        t->devices[d].vfs = 6;
        t->devices[d].bars[0] = (struct ntbf_bar){.size = 16 * NTBF_KiB, .flags = NTBF_BAR_64};
        t->devices[d].vf_bars[0] = 16 * NTBF_KiB;
        d = ntbf_topo_add_device(t, 0, "gpu");
        t->devices[d].bus = 3;
        t->devices[d].lend = true;
        t->devices[d].dma_bits = 32;
        t->devices[d].bars[0] = (struct ntbf_bar){.size = 16 * NTBF_KiB};
        t->devices[d].bars[2] =
            (struct ntbf_bar){.size = 32 * NTBF_MiB, .flags = NTBF_BAR_64 | NTBF_BAR_PREF};
        fx_add_accel(t, 0, "acc", 4, 16 * NTBF_MiB);
        fx_add_accel(t, 1, "acc", 4, 16 * NTBF_MiB);
        fx_add_accel(t, 1, "acc2", 5, 8 * NTBF_MiB);
        d = ntbf_topo_add_device(t, 1, "nvme");
        t->devices[d].bus = 6;
        t->devices[d].lend = true;
        ntbf_sim_defaults(&t->devices[d].sim, NTBF_SIM_NVME);
        ntbf_device_apply_sim(&t->devices[d]);
        struct stats st = {0};
        run(t, UINT64_C(0x5eed0001), &st);
        report("b2b", &st);
        assert_true(st.admitted > 500);
        assert_true(st.refused[NTBF_BUDGET_RID] > 0);
        assert_true(st.refused[NTBF_BUDGET_LUT] > 0);
        assert_true(st.refused[NTBF_BUDGET_ADDR] > 0);
        assert_true(st.refused[NTBF_BUDGET_RANGE] > 0);
}

/* A star with a small switch table, few multicast groups and a node without an IOMMU. */
static void test_props_star(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_star(6);
        t->switches[0].p.rid_table = 15; /* baseline 12: room for 3 of the 4 devices */
        t->switches[0].p.mcast_groups = 3;
        t->nodes[2].iommu = false;
        fx_add_accel(t, 3, "acc", 4, 32 * NTBF_MiB);
        fx_add_accel(t, 5, "acc", 4, 8 * NTBF_MiB);
        struct stats st = {0};
        run(t, UINT64_C(0x5eed0002), &st);
        report("star", &st);
        assert_true(st.admitted > 500);
        assert_true(st.refused[NTBF_BUDGET_SWITCH_RID] > 0);
        assert_true(st.refused[NTBF_BUDGET_MCAST] > 0);
        assert_true(st.stale > 0);
}

/* The article's cascade (small), with a direct Intel NTB pair between n0 and n1. */
static void test_props_cascade(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_cascade(12, 3, 64);
        uint32_t i0 = ntbf_topo_add_adapter(t, 0, "xeon", ntbf_adapter_preset("intel-gen3"));
        uint32_t i1 = ntbf_topo_add_adapter(t, 1, "xeon", ntbf_adapter_preset("intel-gen3"));
        ntbf_topo_add_link(t, fx_ap(i0, 0), fx_ap(i1, 0));
        fx_add_accel(t, 4, "acc", 4, 16 * NTBF_MiB);
        t->nodes[7].iommu = false;
        struct stats st = {0};
        run(t, UINT64_C(0x5eed0003), &st);
        report("cascade", &st);
        assert_true(st.admitted > 500);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_props_b2b),
            cmocka_unit_test(test_props_star),
            cmocka_unit_test(test_props_cascade),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
