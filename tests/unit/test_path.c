/* tests/unit/test_path.c: least-latency paths, link-disjoint multipath and gap explanations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ntbfab/diag.h"
#include "ntbfab/error.h"
#include "ntbfab/path.h"
#include "fixtures.h"

static struct ntbf_endpoint ep(const struct ntbf_topo *t, const char *s)
{
        struct ntbf_endpoint e;
        char why[256];
        int r = ntbf_endpoint_parse(t, s, &e, why, sizeof(why));
        if (r)
                fail_msg("%s: %s", s, why);
        return e;
}

/* "kind:name kind:name ..." of a path, for compact assertions. */
static const char *hops_str(const struct ntbf_topo *t, const struct ntbf_path *p)
{
        static char buf[2048];
        size_t n = 0;
        buf[0] = 0;
        for (uint32_t i = 0; i < p->nhops; i++) {
                char h[128];
                n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s:%s", i ? " | " : "",
                                      ntbf_hop_kind_name(p->hops[i].kind),
                                      ntbf_hop_name(t, &p->hops[i], h, sizeof(h)));
        }
        return buf;
}

static void test_endpoint_parse(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_star(3);
        fx_finalize_ok(t);
        struct ntbf_endpoint e;
        char why[256];
        assert_int_equal(ntbf_endpoint_parse(t, "n1", &e, why, sizeof(why)), 0);
        assert_int_equal(e.kind, NTBF_EP_CPU);
        assert_int_equal(e.node, 1);
        assert_int_equal(ntbf_endpoint_parse(t, "n0.ram", &e, why, sizeof(why)), 0);
        assert_int_equal(e.kind, NTBF_EP_RAM);
        assert_int_equal(ntbf_endpoint_parse(t, "n0.nvme0", &e, why, sizeof(why)), 0);
        assert_int_equal(e.kind, NTBF_EP_DEVICE);
        assert_int_equal(ntbf_endpoint_parse(t, "n0.nvme1", &e, why, sizeof(why)), NTBF_ENOTFOUND);
        assert_string_equal(why, "node 'n0' has no device 'nvme1'; did you mean 'nvme0'?");
        assert_int_equal(ntbf_endpoint_parse(t, "m1", &e, why, sizeof(why)), NTBF_ENOTFOUND);
        assert_string_equal(why, "no node 'm1' in cluster 'star'; did you mean 'n1'?");
        assert_int_equal(ntbf_endpoint_parse(t, "", &e, why, sizeof(why)), NTBF_ENOTFOUND);
        char name[64];
        assert_string_equal(ntbf_endpoint_name(t, ep(t, "n0.acc0"), name, sizeof(name)), "n0.acc0");
        ntbf_topo_free(t);
}

static void test_b2b_path(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b("pxh830");
        uint32_t d = ntbf_topo_add_device(t, 0, "nvme0");
        t->devices[d].hop_ns = 150; /* behind an expansion chassis switch */
        fx_finalize_ok(t);
        struct ntbf_path p;
        char why[256];
        assert_int_equal(
            ntbf_path_find(t, NULL, ep(t, "b"), ep(t, "a.nvme0"), &p, why, sizeof(why)), 0);
        assert_string_equal(hops_str(t, &p), "root:b | adapter:b.ntb0 | link:a.ntb0 - b.ntb0 | "
                                             "adapter:a.ntb0 | root:a | device:a.nvme0");
        assert_int_equal(p.latency_ns, 132 + 132 + 150);
        assert_int_equal(p.first_adapter, 1);
        assert_int_equal(p.last_adapter, 0);
        assert_int_equal(p.hops[1].out_port, 0);
        assert_int_equal(p.hops[3].in_port, 0);
        /* Same host: only the device hop, no NTB. */
        assert_int_equal(
            ntbf_path_find(t, NULL, ep(t, "a"), ep(t, "a.nvme0"), &p, why, sizeof(why)), 0);
        assert_string_equal(hops_str(t, &p), "root:a | root:a | device:a.nvme0");
        assert_int_equal(p.latency_ns, 150);
        assert_int_equal(p.first_adapter, NTBF_NONE);
        ntbf_topo_free(t);
}

/*
 * The article's 7.4.1 lender: NVMe and accelerator in an expansion chassis (PEX8796, uplink
 * through two PEX8733), a root complex of 100 ns on both hosts, b2b PXH830 to the borrower.
 */
static struct ntbf_topo *chassis_b2b(void)
{
        struct ntbf_topo *t = fx_b2b("pxh830");
        t->nodes[0].root_ns = 100;
        t->nodes[1].root_ns = 100;
        uint32_t c = ntbf_topo_add_chassis(t, 0, "exp0");
        assert_int_equal(t->chassis[c].hop_ns, 150);
        assert_int_equal(t->chassis[c].uplink_ns, 2 * 132);
        uint32_t n = ntbf_topo_add_device(t, 0, "nvme0");
        t->devices[n].chassis = c;
        t->devices[n].bus = 3;
        uint32_t g = fx_add_accel(t, 0, "acc0", 4, 64 << 20);
        t->devices[g].chassis = c;
        uint32_t h = ntbf_topo_add_device(t, 0, "slot0"); /* in a slot of the host */
        t->devices[h].bus = 5;
        t->devices[h].hop_ns = 20;
        fx_finalize_ok(t);
        return t;
}

static void test_chassis_paths(void **state)
{
        (void)state;
        struct ntbf_topo *t = chassis_b2b();
        struct ntbf_path p;
        char why[256];
        /* Peers in one chassis meet in its switch: no uplink, no root complex. */
        assert_int_equal(
            ntbf_path_find(t, NULL, ep(t, "a.nvme0"), ep(t, "a.acc0"), &p, why, sizeof(why)), 0);
        assert_string_equal(hops_str(t, &p), "device:a.nvme0 | chassis:a.exp0 | device:a.acc0");
        assert_int_equal(p.latency_ns, 150);
        assert_int_equal(ntbf_topo_local_ns(t, 0, 0, 1), 150);
        /* RAM: switch, uplink, root complex (counted once on a local path). */
        assert_int_equal(
            ntbf_path_find(t, NULL, ep(t, "a.nvme0"), ep(t, "a.ram"), &p, why, sizeof(why)), 0);
        assert_string_equal(hops_str(t, &p), "device:a.nvme0 | chassis:a.exp0 | root:a | root:a");
        assert_int_equal(p.latency_ns, 150 + 264 + 100);
        assert_int_equal(ntbf_topo_local_ns(t, 0, 0, NTBF_NONE), 150 + 264 + 100);
        assert_int_equal(ntbf_device_root_ns(t, 0), 150 + 264);
        /* A device in a host slot reaches the chassis through the root complex. */
        assert_int_equal(
            ntbf_path_find(t, NULL, ep(t, "a.slot0"), ep(t, "a.acc0"), &p, why, sizeof(why)), 0);
        assert_string_equal(hops_str(t, &p), "device:a.slot0 | root:a | root:a | "
                                             "chassis:a.exp0 | device:a.acc0");
        assert_int_equal(p.latency_ns, 20 + 100 + 150 + 264);
        /* The borrower's RAM: everything, and both root complexes. */
        assert_int_equal(
            ntbf_path_find(t, NULL, ep(t, "a.nvme0"), ep(t, "b.ram"), &p, why, sizeof(why)), 0);
        assert_string_equal(hops_str(t, &p),
                            "device:a.nvme0 | chassis:a.exp0 | root:a | adapter:a.ntb0 | "
                            "link:a.ntb0 - b.ntb0 | adapter:b.ntb0 | root:b");
        assert_int_equal(p.latency_ns, 150 + 264 + 100 + 132 + 132 + 100);
        /* The borrower's CPU to the NVMe: the mirror image. */
        assert_int_equal(
            ntbf_path_find(t, NULL, ep(t, "b"), ep(t, "a.nvme0"), &p, why, sizeof(why)), 0);
        assert_string_equal(hops_str(t, &p),
                            "root:b | adapter:b.ntb0 | link:a.ntb0 - b.ntb0 | adapter:a.ntb0 | "
                            "root:a | chassis:a.exp0 | device:a.nvme0");
        assert_int_equal(p.latency_ns, 100 + 132 + 132 + 100 + 264 + 150);
        /* The article's SQ placement order (7.4.1): accelerator < lender RAM < borrower RAM. */
        uint32_t acc = 0, lram = 0, bram = 0;
        assert_int_equal(ntbf_path_find(t, NULL, ep(t, "a.nvme0"), ep(t, "a.acc0"), &p, NULL, 0),
                         0);
        acc = p.latency_ns;
        assert_int_equal(ntbf_path_find(t, NULL, ep(t, "a.nvme0"), ep(t, "a.ram"), &p, NULL, 0), 0);
        lram = p.latency_ns;
        assert_int_equal(ntbf_path_find(t, NULL, ep(t, "a.nvme0"), ep(t, "b.ram"), &p, NULL, 0), 0);
        bram = p.latency_ns;
        assert_true(acc < lram && lram < bram);
        ntbf_topo_free(t);
}

static void test_chassis_rules(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b("pxh830");
        uint32_t c0 = ntbf_topo_add_chassis(t, 0, "exp0");
        ntbf_topo_add_chassis(t, 0, "exp0");
        ntbf_topo_add_chassis(t, 1, "exp0"); /* another node may reuse the name */
        uint32_t d = ntbf_topo_add_device(t, 1, "x");
        t->devices[d].chassis = c0; /* a chassis of another host */
        struct ntbf_diags diags;
        ntbf_diags_init(&diags);
        assert_int_equal(ntbf_topo_finalize(t, &diags), NTBF_ECONFIG);
        assert_int_equal(diags.errors, 2);
        char *all = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&all, &len);
        ntbf_diags_print(&diags, f);
        fclose(f);
        assert_non_null(strstr(all, "duplicate chassis name 'exp0' in node 'a'"));
        assert_non_null(strstr(all, "device b.x: chassis 'exp0' hangs from node 'a', not from "
                                    "the device's node"));
        free(all);
        ntbf_diags_free(&diags);
        /* A clone keeps the chassis. */
        t->devices[d].chassis = 2;
        t->nchassis = 3;
        struct ntbf_topo *c = ntbf_topo_clone(t);
        assert_non_null(c);
        assert_int_equal(c->nchassis, 3);
        assert_string_equal(c->chassis[2].name, "exp0");
        assert_int_equal(c->devices[d].chassis, 2);
        assert_int_equal(ntbf_topo_find_chassis(c, 1, "exp0"), 2);
        assert_int_equal(ntbf_topo_find_chassis(c, 0, "exp1"), NTBF_NONE);
        ntbf_topo_free(c);
        ntbf_topo_free(t);
}

static void test_root_ns_remote(void **state)
{
        (void)state;
        /* Without the new keys nothing changes; with root_ns both ends pay once each. */
        struct ntbf_topo *t = fx_b2b("pxh830");
        uint32_t d = ntbf_topo_add_device(t, 0, "nvme0");
        (void)d;
        fx_finalize_ok(t);
        struct ntbf_path p;
        assert_int_equal(ntbf_path_find(t, NULL, ep(t, "b"), ep(t, "a.nvme0"), &p, NULL, 0), 0);
        assert_int_equal(p.latency_ns, 264);
        assert_int_equal(ntbf_path_find(t, NULL, ep(t, "a"), ep(t, "a.ram"), &p, NULL, 0), 0);
        assert_int_equal(p.latency_ns, 0);
        t->nodes[0].root_ns = 40;
        t->nodes[1].root_ns = 60;
        fx_finalize_ok(t);
        assert_int_equal(ntbf_path_find(t, NULL, ep(t, "b"), ep(t, "a.nvme0"), &p, NULL, 0), 0);
        assert_int_equal(p.latency_ns, 60 + 264 + 40);
        assert_int_equal(ntbf_path_find(t, NULL, ep(t, "a"), ep(t, "a.ram"), &p, NULL, 0), 0);
        assert_int_equal(p.latency_ns, 40);
        assert_int_equal(p.nhops, 2);
        ntbf_topo_free(t);
}

static void test_switch_path(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_star(4);
        fx_finalize_ok(t);
        struct ntbf_path p;
        char why[256];
        assert_int_equal(
            ntbf_path_find(t, NULL, ep(t, "n3"), ep(t, "n0.nvme0"), &p, why, sizeof(why)), 0);
        assert_string_equal(hops_str(t, &p),
                            "root:n3 | adapter:n3.ntb0 | link:n3.ntb0 - sw0.3 | "
                            "switch:sw0 (port 3 -> 0) | link:n0.ntb0 - sw0.0 | adapter:n0.ntb0 | "
                            "root:n0 | device:n0.nvme0");
        assert_int_equal(p.latency_ns, 132 + 170 + 132);
        ntbf_topo_free(t);
}

/* Two nodes, each with two adapters; a-ntb0 - b-ntb0 direct, a-ntb1 - sw - b-ntb1. */
static struct ntbf_topo *dual(void)
{
        struct ntbf_topo *t = fx_b2b("pxh830");
        uint32_t a1 = ntbf_topo_add_adapter(t, 0, "ntb1", ntbf_adapter_preset("mxh930"));
        uint32_t b1 = ntbf_topo_add_adapter(t, 1, "ntb1", ntbf_adapter_preset("mxh930"));
        uint32_t sw = ntbf_topo_add_switch(t, "sw", ntbf_switch_preset("mxs824"));
        ntbf_topo_add_link(t, fx_ap(a1, 0), fx_sp(sw, 0));
        ntbf_topo_add_link(t, fx_ap(b1, 0), fx_sp(sw, 1));
        return t;
}

static void test_disjoint(void **state)
{
        (void)state;
        struct ntbf_topo *t = dual();
        fx_finalize_ok(t);
        struct ntbf_path p[3];
        unsigned found;
        char why[512];
        assert_int_equal(
            ntbf_path_disjoint(t, NULL, ep(t, "a"), ep(t, "b"), 2, p, &found, why, sizeof(why)), 0);
        assert_int_equal(found, 2);
        /* Fastest first: the direct PXH830 pair, then through the switch. */
        assert_int_equal(p[0].latency_ns, 264);
        assert_int_equal(p[1].latency_ns, 170 * 3);
        assert_int_equal(p[0].first_adapter, 0);
        assert_int_equal(p[1].first_adapter, 2);
        /* A third disjoint path does not exist; both cuts are named. */
        assert_int_equal(
            ntbf_path_disjoint(t, NULL, ep(t, "a"), ep(t, "b"), 3, p, &found, why, sizeof(why)),
            NTBF_ENOPATH);
        assert_int_equal(found, 2);
        assert_non_null(strstr(why, "only 2 link-disjoint paths from 'a' to 'b'"));
        assert_non_null(strstr(why, "a.ntb0 - b.ntb0"));
        /* Forcing the first adapter picks the switch path. */
        struct ntbf_path_opts o = NTBF_PATH_OPTS_INIT;
        o.first_adapter = 2;
        assert_int_equal(ntbf_path_find(t, &o, ep(t, "a"), ep(t, "b"), &p[0], why, sizeof(why)), 0);
        assert_int_equal(p[0].first_adapter, 2);
        assert_int_equal(p[0].last_adapter, 3);
        ntbf_topo_free(t);
}

static void test_disjoint_bottleneck(void **state)
{
        (void)state;
        /* Star: n1 has one cable to the switch, so only one disjoint path to n0. */
        struct ntbf_topo *t = fx_star(3);
        fx_finalize_ok(t);
        struct ntbf_path p[2];
        unsigned found;
        char why[512];
        assert_int_equal(
            ntbf_path_disjoint(t, NULL, ep(t, "n1"), ep(t, "n0"), 2, p, &found, why, sizeof(why)),
            NTBF_ENOPATH);
        assert_int_equal(found, 1);
        assert_non_null(strstr(why, "every further path would reuse"));
        ntbf_topo_free(t);
}

static void test_down_links(void **state)
{
        (void)state;
        struct ntbf_topo *t = dual();
        fx_finalize_ok(t);
        uint64_t down[1] = {1}; /* link 0: a.ntb0 - b.ntb0 */
        struct ntbf_path_opts o = NTBF_PATH_OPTS_INIT;
        o.down_links = down;
        struct ntbf_path p;
        char why[512];
        assert_int_equal(ntbf_path_find(t, &o, ep(t, "a"), ep(t, "b"), &p, why, sizeof(why)), 0);
        assert_int_equal(p.first_adapter, 2); /* failed over to the switch */
        down[0] = 1 | 2;                      /* and a.ntb1 - sw.0 */
        assert_int_equal(ntbf_path_find(t, &o, ep(t, "a"), ep(t, "b"), &p, why, sizeof(why)),
                         NTBF_ENOPATH);
        assert_string_equal(why, "no path from 'a' to 'b': every link of node 'a' is down");
        down[0] = 1 | 4; /* a.ntb0 - b.ntb0 and b.ntb1 - sw.1 */
        assert_int_equal(ntbf_path_find(t, &o, ep(t, "a"), ep(t, "b"), &p, why, sizeof(why)),
                         NTBF_ENOPATH);
        assert_string_equal(why, "no path from 'a' to 'b': every link of node 'b' is down");
        ntbf_topo_free(t);

        /* A down cable inside the fabric is named. */
        t = fx_star(3);
        uint32_t sw1 = ntbf_topo_add_switch(t, "sw1", ntbf_switch_preset("mxs824"));
        uint32_t x = ntbf_topo_add_node(t, "x", 100);
        uint32_t xa = ntbf_topo_add_adapter(t, x, "ntb0", ntbf_adapter_preset("pxh830"));
        ntbf_topo_add_link(t, fx_ap(xa, 0), fx_sp(sw1, 0));
        uint32_t up = ntbf_topo_add_link(t, fx_sp(0, 23), fx_sp(sw1, 23));
        fx_finalize_ok(t);
        down[0] = UINT64_C(1) << up;
        assert_int_equal(ntbf_path_find(t, &o, ep(t, "x"), ep(t, "n0"), &p, why, sizeof(why)),
                         NTBF_ENOPATH);
        assert_string_equal(why, "no path from 'x' to 'n0': link sw0.23 - sw1.23 is down and no "
                                 "other path exists");
        ntbf_topo_free(t);
}

static void test_no_transit(void **state)
{
        (void)state;
        /* a - b - c in a line (via two-port adapters) plus a - c: a reaches c directly only. */
        struct ntbf_topo *t = fx_b2b("pxh830");
        uint32_t c = ntbf_topo_add_node(t, "c", 12);
        uint32_t ca = ntbf_topo_add_adapter(t, c, "ntb0", ntbf_adapter_preset("pxh830"));
        ntbf_topo_add_link(t, fx_ap(1, 1), fx_ap(ca, 0));
        uint32_t ac = ntbf_topo_add_link(t, fx_ap(0, 1), fx_ap(ca, 1));
        fx_finalize_ok(t);
        struct ntbf_path p;
        char why[512];
        assert_int_equal(ntbf_path_find(t, NULL, ep(t, "a"), ep(t, "c"), &p, why, sizeof(why)), 0);
        assert_int_equal(p.nhops, 5);
        uint64_t down[1] = {UINT64_C(1) << ac};
        struct ntbf_path_opts o = NTBF_PATH_OPTS_INIT;
        o.down_links = down;
        /* Without the a - c cable, the only way would transit host b: refused. */
        assert_int_equal(ntbf_path_find(t, &o, ep(t, "a"), ep(t, "c"), &p, why, sizeof(why)),
                         NTBF_ENOPATH);
        ntbf_topo_free(t);
}

static void test_no_loop_through_source(void **state)
{
        (void)state;
        /* a.ntb0 - sw0; a.ntb1 port 0 - sw0, port 1 - sw1; b - sw1. */
        struct ntbf_topo *t = ntbf_topo_new("loop", "loop.yaml");
        uint32_t a = ntbf_topo_add_node(t, "a", 4), b = ntbf_topo_add_node(t, "b", 8);
        uint32_t a0 = ntbf_topo_add_adapter(t, a, "ntb0", ntbf_adapter_preset("pxh830"));
        uint32_t a1 = ntbf_topo_add_adapter(t, a, "ntb1", ntbf_adapter_preset("pxh830"));
        uint32_t b0 = ntbf_topo_add_adapter(t, b, "ntb0", ntbf_adapter_preset("pxh830"));
        uint32_t sw0 = ntbf_topo_add_switch(t, "sw0", ntbf_switch_preset("mxs824"));
        uint32_t sw1 = ntbf_topo_add_switch(t, "sw1", ntbf_switch_preset("mxs824"));
        ntbf_topo_add_link(t, fx_ap(a0, 0), fx_sp(sw0, 0));
        ntbf_topo_add_link(t, fx_ap(a1, 0), fx_sp(sw0, 1));
        ntbf_topo_add_link(t, fx_ap(a1, 1), fx_sp(sw1, 0));
        ntbf_topo_add_link(t, fx_ap(b0, 0), fx_sp(sw1, 1));
        fx_finalize_ok(t);
        struct ntbf_path p;
        char why[512];
        assert_int_equal(ntbf_path_find(t, NULL, ep(t, "a"), ep(t, "b"), &p, why, sizeof(why)), 0);
        assert_int_equal(p.first_adapter, a1);
        /* Leaving through ntb0 would need to come back in through ntb1 and out again. */
        struct ntbf_path_opts o = NTBF_PATH_OPTS_INIT;
        o.first_adapter = a0;
        assert_int_equal(ntbf_path_find(t, &o, ep(t, "a"), ep(t, "b"), &p, why, sizeof(why)),
                         NTBF_ENOPATH);
        ntbf_topo_free(t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_endpoint_parse),
            cmocka_unit_test(test_b2b_path),
            cmocka_unit_test(test_switch_path),
            cmocka_unit_test(test_disjoint),
            cmocka_unit_test(test_disjoint_bottleneck),
            cmocka_unit_test(test_down_links),
            cmocka_unit_test(test_no_transit),
            cmocka_unit_test(test_no_loop_through_source),
            cmocka_unit_test(test_chassis_paths),
            cmocka_unit_test(test_chassis_rules),
            cmocka_unit_test(test_root_ns_remote),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
