/* tests/unit/test_topology.c: defaults, address maps and the semantic checks of finalize. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ntbfab/error.h"
#include "ntbfab/topology.h"
#include "fixtures.h"

/* Finalize expecting failure; returns the diagnostics joined by newlines (caller frees). */
static char *finalize_errors(struct ntbf_topo *t)
{
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        int r = ntbf_topo_finalize(t, &d);
        assert_int_equal(r, NTBF_ECONFIG);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        ntbf_diags_print(&d, f);
        fclose(f);
        ntbf_diags_free(&d);
        return buf;
}

static void test_presets(void **state)
{
        (void)state;
        const struct ntbf_adapter_params *p = ntbf_adapter_preset("PXH830");
        assert_non_null(p);
        assert_int_equal(p->rid_table, 32);
        assert_int_equal(p->rid_reserved, 2);
        assert_int_equal(p->hop_ns, 132);
        const char *want[] = {"pxh830",  "mxh930",        "intel-gen3",          "intel-gen4",
                              "amd-ntb", "switchtec-pfx", "switchtec-pfx-linux", "dolphin-sisci",
                              "ivshmem"};
        for (size_t i = 0; i < 9; i++) {
                const struct ntbf_adapter_params *q = ntbf_adapter_preset(want[i]);
                assert_non_null(q);
                /* Every preset must itself satisfy the slot rules finalize enforces. */
                assert_true(q->window && !(q->window & (q->window - 1)));
                assert_true(q->lut_entries && !(q->lut_entries & (q->lut_entries - 1)));
                assert_true(q->window / q->lut_entries >= 4096);
                /* ... and its windows every rule of a cluster file (offsets, spad_window). */
                struct ntbf_topo *t = fx_b2b(want[i]);
                fx_finalize_ok(t);
                ntbf_topo_free(t);
        }
        /* The partition as backends/switchtec programs it: 511 usable LUT entries of 64 KiB,
         * then a 32 MiB direct window at the LUT's size into BAR2; one entry per function. */
        const struct ntbf_adapter_params *x = ntbf_adapter_preset("switchtec-pfx");
        assert_int_equal(x->windows[0].slots, 512);
        assert_int_equal(x->windows[0].size / x->windows[0].slots, 64 * 1024);
        assert_int_equal(x->windows[0].reserved, 1);
        assert_int_equal(x->windows[1].size, x->windows[0].size);
        assert_int_equal(x->rid_mask, NTBF_RID_MASK_EXPAND);
        assert_int_equal(x->spad_window, 64 * 1024);
        assert_null(ntbf_adapter_preset("pxh831"));
        assert_int_equal(ntbf_switch_preset("mxs824")->ports, 24);
        assert_int_equal(ntbf_switch_preset("mxs824")->hop_ns, 170);
        assert_null(ntbf_adapter_preset_at(9));
        /* Dolphin through SISCI: inbound slots (segments), no requester table to budget. */
        p = ntbf_adapter_preset("dolphin-sisci");
        assert_int_equal(p->xlat, NTBF_XLAT_INBOUND);
        assert_int_equal(p->rid_table, 0);
        assert_int_equal(p->doorbells, 0);
}

static void test_b2b_address_map(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b("pxh830");
        uint32_t d = ntbf_topo_add_device(t, 0, "nvme0");
        t->devices[d].bus = 3;
        t->devices[d].lend = true;
        ntbf_sim_defaults(&t->devices[d].sim, NTBF_SIM_NVME);
        ntbf_device_apply_sim(&t->devices[d]);
        fx_finalize_ok(t);
        const struct ntbf_adapter *a = &t->adapters[0];
        /* Prefetchable window: placed high, aligned to its size. */
        assert_int_equal(a->window_base, 0x38000000000ull);
        assert_int_equal(a->lut_entry_size, 1 << 20);
        /* NVMe BAR0 is non-prefetchable: below 4 GiB. */
        const struct ntbf_device *dev = &t->devices[d];
        assert_int_equal(dev->bars[0].addr, 0x80000000ull);
        const struct ntbf_region *r = ntbf_addrmap_lookup(t, 0, dev->bars[0].addr + 0x1000);
        assert_non_null(r);
        assert_int_equal(r->kind, NTBF_REGION_BAR);
        assert_int_equal(r->obj, d);
        r = ntbf_addrmap_lookup(t, 0, 0x1000);
        assert_int_equal(r->kind, NTBF_REGION_RAM);
        /* 4 GiB RAM: 2 GiB low, 2 GiB from 4 GiB. */
        r = ntbf_addrmap_lookup(t, 0, 0x100000000ull + (2ull << 30) - 1);
        assert_int_equal(r->kind, NTBF_REGION_RAM);
        assert_null(ntbf_addrmap_lookup(t, 0, 0x100000000ull + (2ull << 30)));
        r = ntbf_addrmap_lookup(t, 1, NTBF_MSI_BASE + 0x10);
        assert_int_equal(r->kind, NTBF_REGION_MSI);
        r = ntbf_addrmap_lookup(t, 1, t->adapters[1].window_base + 5);
        assert_int_equal(r->kind, NTBF_REGION_WINDOW);
        assert_int_equal(r->obj, 1);
        assert_int_equal(t->adapters[0].link[0], 0);
        assert_int_equal(t->nodes[0].ndevices, 1);
        ntbf_topo_free(t);
}

static void test_multifunction_and_vfs(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b("pxh830");
        uint32_t d = ntbf_topo_add_device(t, 1, "nic0");
        struct ntbf_device *dev = &t->devices[d];
        dev->bus = 0x5e;
        dev->functions = 2;
        dev->vfs = 4;
        dev->bars[0] = (struct ntbf_bar){.size = 1 << 20, .flags = NTBF_BAR_64 | NTBF_BAR_PREF};
        dev->vf_bars[0] = 64 << 10;
        fx_finalize_ok(t);
        dev = &t->devices[d];
        assert_int_equal(ntbf_device_nfuncs(dev), 6);
        assert_int_equal(ntbf_device_bar_addr(dev, 1, 0), dev->bars[0].addr + (1 << 20));
        assert_int_equal(ntbf_device_bar_size(dev, 3, 0), 64 << 10);
        assert_int_equal(ntbf_device_bar_addr(dev, 3, 0), dev->vf_bar_addr[0] + (64 << 10));
        assert_int_equal(dev->vf_bar_addr[0] % (64 << 10), 0);
        assert_int_equal(ntbf_device_rid(dev, 1), 0x5e01);
        assert_int_equal(ntbf_device_rid(dev, 2), 0x5e00 + 0x80);
        assert_int_equal(ntbf_device_bar_size(dev, 6, 0), 0);
        ntbf_topo_free(t);
}

static void test_window_alignment_errors(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b("pxh830");
        t->adapters[0].p.window = 3 * NTBF_MiB;
        t->adapters[0].loc_window = (struct ntbf_loc){7, 20};
        t->adapters[1].window_base = 0x38000100000ull; /* not aligned to 256 MiB */
        t->adapters[1].loc_window_base = (struct ntbf_loc){12, 30};
        char *e = finalize_errors(t);
        assert_non_null(strstr(e, "b2b.yaml:7:20: error: adapter a.ntb0: window 3 MiB is not a "
                                  "power of two of at least 4 KiB; PCI BARs are powers of two "
                                  "(try 2 MiB)"));
        assert_non_null(strstr(e, "b2b.yaml:12:30: error: adapter b.ntb0: window_base "
                                  "0x38000100000 is not aligned to the window size 256 MiB"));
        free(e);
        ntbf_topo_free(t);

        t = fx_b2b("pxh830");
        t->adapters[0].p.lut_entries = 100000;
        e = finalize_errors(t);
        assert_non_null(strstr(e, "lut_entries 100000 is not a power of two"));
        free(e);
        ntbf_topo_free(t);

        t = fx_b2b("pxh830");
        t->adapters[0].p.lut_entries = 1 << 17;
        e = finalize_errors(t);
        assert_non_null(strstr(e, "slots smaller than 4 KiB; use at most 65536 entries"));
        free(e);
        ntbf_topo_free(t);
}

static void test_fixed_window_overlap(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b("pxh830");
        t->adapters[0].window_base = 0x80000000ull; /* over... nothing yet: fine */
        t->adapters[0].p.window = 256 * NTBF_MiB;
        fx_finalize_ok(t);
        ntbf_topo_free(t);

        t = fx_b2b("pxh830");
        t->adapters[0].window_base = 0x40000000ull; /* inside low RAM */
        char *e = finalize_errors(t);
        assert_non_null(strstr(e, "window at 0x40000000 overlaps RAM at 0x0"));
        free(e);
        ntbf_topo_free(t);
}

static void test_node_errors(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b("pxh830");
        t->nodes[1].id = 4;
        t->nodes[1].loc_id = (struct ntbf_loc){9, 9};
        t->nodes[0].loc = (struct ntbf_loc){3, 5};
        char *e = finalize_errors(t);
        assert_non_null(strstr(e, "b2b.yaml:9:9: error: node id 4 is already used by node 'a' "
                                  "(line 3)"));
        free(e);
        ntbf_topo_free(t);

        t = fx_b2b("pxh830");
        t->nodes[1].id = 252;
        e = finalize_errors(t);
        assert_non_null(strstr(e, "node id 252 is reserved for broadcast"));
        free(e);
        ntbf_topo_free(t);

        t = fx_b2b("pxh830");
        snprintf(t->nodes[1].name, sizeof(t->nodes[1].name), "a");
        e = finalize_errors(t);
        assert_non_null(strstr(e, "duplicate node name 'a'"));
        free(e);
        ntbf_topo_free(t);

        t = fx_b2b("pxh830");
        t->nodes[0].ram = 4 * NTBF_TiB;
        e = finalize_errors(t);
        assert_non_null(strstr(e, "overlaps the 64-bit MMIO space"));
        free(e);
        ntbf_topo_free(t);
}

static void test_link_errors(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b("pxh830");
        uint32_t c = ntbf_topo_add_node(t, "c", 12);
        uint32_t ca = ntbf_topo_add_adapter(t, c, "ntb0", ntbf_adapter_preset("pxh830"));
        /* a.ntb0 port 0 is already cabled to b. */
        uint32_t l = ntbf_topo_add_link(t, fx_ap(0, 0), fx_ap(ca, 0));
        t->links[0].loc = (struct ntbf_loc){20, 5};
        t->links[l].loc = (struct ntbf_loc){21, 5};
        char *e = finalize_errors(t);
        assert_non_null(strstr(e, "b2b.yaml:21:5: error: port a.ntb0 is already used by the link "
                                  "at line 20; a port takes one cable, use another port"));
        /* And c then reaches nobody. */
        assert_non_null(strstr(e, "node 'c' cannot reach the other nodes: none of its adapters "
                                  "has a link"));
        /* ... and the nodes that do reach each other are not blamed. */
        assert_null(strstr(e, "node 'a' cannot reach"));
        free(e);
        ntbf_topo_free(t);

        t = fx_b2b("pxh830");
        ntbf_topo_add_link(t, fx_ap(0, 5), fx_ap(1, 1));
        e = finalize_errors(t);
        assert_non_null(strstr(e, "link end a.ntb0.5: adapter a.ntb0 has 2 ports (0..1)"));
        free(e);
        ntbf_topo_free(t);

        t = fx_b2b("pxh830");
        uint32_t a2 = ntbf_topo_add_adapter(t, 0, "ntb1", ntbf_adapter_preset("pxh830"));
        ntbf_topo_add_link(t, fx_ap(0, 1), fx_ap(a2, 0));
        e = finalize_errors(t);
        assert_non_null(strstr(e, "connects node 'a' to itself"));
        free(e);
        ntbf_topo_free(t);
}

static void test_reachability(void **state)
{
        (void)state;
        /* Three nodes in a line: a - b - c. a cannot reach c (no transit through b). */
        struct ntbf_topo *t = fx_b2b("pxh830");
        uint32_t c = ntbf_topo_add_node(t, "c", 12);
        uint32_t ca = ntbf_topo_add_adapter(t, c, "ntb0", ntbf_adapter_preset("pxh830"));
        ntbf_topo_add_link(t, fx_ap(1, 1), fx_ap(ca, 0));
        char *e = finalize_errors(t);
        assert_non_null(strstr(e, "node 'a' cannot reach node 'c': no link or switch connects "
                                  "them"));
        free(e);
        /* Completing the mesh fixes it. */
        ntbf_topo_add_link(t, fx_ap(0, 1), fx_ap(ca, 1));
        fx_finalize_ok(t);
        ntbf_topo_free(t);

        /* Two switches cascaded reach each other. */
        t = fx_star(4);
        uint32_t sw1 = ntbf_topo_add_switch(t, "sw1", ntbf_switch_preset("mxs824"));
        uint32_t x = ntbf_topo_add_node(t, "x", 100);
        uint32_t xa = ntbf_topo_add_adapter(t, x, "ntb0", ntbf_adapter_preset("mxh930"));
        ntbf_topo_add_link(t, fx_ap(xa, 0), fx_sp(sw1, 0));
        e = finalize_errors(t);
        assert_non_null(strstr(e, "cannot reach"));
        free(e);
        ntbf_topo_add_link(t, fx_sp(0, 23), fx_sp(sw1, 23));
        fx_finalize_ok(t);
        ntbf_topo_free(t);
}

static void test_device_errors(void **state)
{
        (void)state;
        /* A lent device whose BARs need more window than any borrower has. */
        struct ntbf_topo *t = fx_b2b("pxh830");
        uint32_t d = ntbf_topo_add_device(t, 0, "gpu0");
        struct ntbf_device *dev = &t->devices[d];
        dev->bus = 0x17;
        dev->lend = true;
        dev->bars[0] = (struct ntbf_bar){.size = 16 << 20, .flags = NTBF_BAR_64};
        dev->bars[2] = (struct ntbf_bar){.size = 1ull << 30, .flags = NTBF_BAR_64 | NTBF_BAR_PREF};
        dev->loc_bars = (struct ntbf_loc){14, 11};
        char *e = finalize_errors(t);
        assert_non_null(strstr(e, "b2b.yaml:14:11: error: device a.gpu0: its BARs need 1040 MiB "
                                  "of window but the largest window of another node is 256 MiB"));
        free(e);
        /* A bigger borrower window fixes it. */
        t->adapters[1].p.window = 2 * NTBF_GiB;
        fx_finalize_ok(t);
        ntbf_topo_free(t);

        t = fx_b2b("pxh830");
        d = ntbf_topo_add_device(t, 0, "odd");
        t->devices[d].bars[0].size = 3000;
        t->devices[d].bars[1].size = 4096;
        t->devices[d].bars[1].flags = NTBF_BAR_64;
        t->devices[d].functions = 9;
        e = finalize_errors(t);
        assert_non_null(strstr(e, "BAR0 size 3000 B is not a power of two"));
        assert_non_null(strstr(e, "BAR1 is 64-bit but a 64-bit BAR uses two slots"));
        assert_non_null(strstr(e, "functions 9 is out of range 1..8"));
        free(e);
        ntbf_topo_free(t);

        t = fx_b2b("pxh830");
        d = ntbf_topo_add_device(t, 0, "nvme0");
        t->devices[d].sim.model = NTBF_SIM_NVME;
        ntbf_sim_defaults(&t->devices[d].sim, NTBF_SIM_NVME);
        t->devices[d].sim.lba_size = 520;
        t->devices[d].sim.queues = 1;
        ntbf_device_apply_sim(&t->devices[d]);
        d = ntbf_topo_add_device(t, 0, "nvme1");
        e = finalize_errors(t);
        assert_non_null(strstr(e, "lba 520; the simulated NVMe supports 512 or 4096"));
        assert_non_null(strstr(e, "queues 1 is out of range 2..1024"));
        assert_non_null(strstr(e, "device 'nvme1' has the PCI address of device 'nvme0'"));
        free(e);
        ntbf_topo_free(t);
}

static void test_low_mmio_exhaustion(void **state)
{
        (void)state;
        /* 32-bit-only BARs that cannot all fit below 4 GiB. */
        struct ntbf_topo *t = fx_b2b("pxh830");
        for (int i = 0; i < 3; i++) {
                char name[8];
                snprintf(name, sizeof(name), "d%d", i);
                uint32_t d = ntbf_topo_add_device(t, 0, name);
                t->devices[d].bus = (uint8_t)(10 + i);
                t->devices[d].bars[0] = (struct ntbf_bar){.size = 1ull << 30, .flags = 0};
        }
        char *e = finalize_errors(t);
        assert_non_null(strstr(e, "do not fit in its 32-bit MMIO space"));
        free(e);
        ntbf_topo_free(t);
}

static void test_bdf(void **state)
{
        (void)state;
        uint16_t dom;
        uint8_t b, d, f;
        assert_int_equal(ntbf_bdf_parse("0000:03:00.0", &dom, &b, &d, &f), 0);
        assert_int_equal(b, 3);
        assert_int_equal(ntbf_bdf_parse("5e:1f.7", &dom, &b, &d, &f), 0);
        assert_int_equal(b, 0x5e);
        assert_int_equal(d, 31);
        assert_int_equal(f, 7);
        assert_int_equal(ntbf_bdf_parse("5e:20.0", &dom, &b, &d, &f), -EINVAL);
        assert_int_equal(ntbf_bdf_parse("5e:1f.8", &dom, &b, &d, &f), -EINVAL);
        assert_int_equal(ntbf_bdf_parse("0000:03:00.0x", &dom, &b, &d, &f), -EINVAL);
        assert_int_equal(ntbf_bdf_parse("3:0.0", &dom, &b, &d, &f), -EINVAL);
        char buf[16];
        assert_string_equal(ntbf_bdf_fmt(1, 0x5e, 3, 1, buf, sizeof(buf)), "0001:5e:03.1");
}

static void test_clone(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_star(3);
        fx_finalize_ok(t);
        struct ntbf_topo *c = ntbf_topo_clone(t);
        assert_non_null(c);
        /* A what-if copy: one more device on n0; the original is untouched. */
        uint32_t d = ntbf_topo_add_device(c, 0, "nvme0#2");
        c->devices[d] = c->devices[0];
        snprintf(c->devices[d].name, sizeof(c->devices[d].name), "nvme0#2");
        c->devices[d].bus = 9;
        fx_finalize_ok(c);
        assert_int_equal(c->ndevices, 3);
        assert_int_equal(t->ndevices, 2);
        assert_int_equal(c->nodes[0].ndevices, 3);
        /* Windows keep their addresses; the new BAR gets its own. */
        assert_int_equal(c->adapters[0].window_base, t->adapters[0].window_base);
        assert_int_not_equal(c->devices[d].bars[0].addr, t->devices[0].bars[0].addr);
        assert_int_equal(c->devices[0].bars[0].addr, t->devices[0].bars[0].addr);
        ntbf_topo_free(c);
        ntbf_topo_free(t);
}

static void test_vf_bus_rules(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b("pxh830");
        uint32_t nic = ntbf_topo_add_device(t, 1, "nic0");
        t->devices[nic].bus = 0x5e;
        t->devices[nic].vfs = 64;
        t->devices[nic].bars[0] =
            (struct ntbf_bar){.size = 1 << 20, .flags = NTBF_BAR_64 | NTBF_BAR_PREF};
        t->devices[nic].vf_bars[0] = 64 << 10;
        fx_finalize_ok(t);
        uint16_t rid, mask;
        ntbf_device_rid_entry(&t->devices[nic], &rid, &mask);
        assert_int_equal(rid, 0x5e00);
        assert_int_equal(mask, 0xff00);
        /* Every VF's routing ID is covered by that one entry. */
        for (uint32_t f = 0; f < ntbf_device_nfuncs(&t->devices[nic]); f++)
                assert_int_equal(ntbf_device_rid(&t->devices[nic], f) & mask, rid);
        /* A plain multi-function device: bus:device, any function. */
        uint32_t mf = ntbf_topo_add_device(t, 1, "mf0");
        t->devices[mf].bus = 0x60;
        t->devices[mf].dev = 3;
        t->devices[mf].functions = 4;
        fx_finalize_ok(t);
        ntbf_device_rid_entry(&t->devices[mf], &rid, &mask);
        assert_int_equal(rid, 0x6018);
        assert_int_equal(mask, 0xfff8);

        /* Another device on the VFs' bus, and VFs that run past the bus. */
        uint32_t x = ntbf_topo_add_device(t, 1, "x");
        t->devices[x].bus = 0x5e;
        t->devices[x].dev = 31;
        t->devices[mf].vfs = 200;
        t->devices[mf].vf_bars[0] = 4096;
        char *e = finalize_errors(t);
        assert_non_null(strstr(e, "device 'x' is on bus 5e with device 'nic0' (line 0), whose "
                                  "SR-IOV VFs occupy that bus; give 'nic0' a bus of its own"));
        assert_non_null(strstr(e, "device b.mf0: 200 VFs from routing ID 60:13.0 run past bus "
                                  "60 (104 fit)"));
        free(e);
        ntbf_topo_free(t);
}

static void test_node_limits(void **state)
{
        (void)state;
        struct ntbf_topo *t = fx_b2b("pxh830");
        for (uint32_t i = 0; i <= NTBF_MAX_NODE_DEVICES; i++) {
                char name[16];
                snprintf(name, sizeof(name), "d%u", i);
                uint32_t d = ntbf_topo_add_device(t, 0, name);
                t->devices[d].bus = (uint8_t)(i / 32);
                t->devices[d].dev = (uint8_t)(i % 32);
                t->devices[d].domain = (uint16_t)(i / 8192);
        }
        char *e = finalize_errors(t);
        assert_non_null(
            strstr(e, "node 'a' has 1025 devices; ntbfab models at most 1024 per node"));
        free(e);
        ntbf_topo_free(t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_presets),
            cmocka_unit_test(test_b2b_address_map),
            cmocka_unit_test(test_multifunction_and_vfs),
            cmocka_unit_test(test_window_alignment_errors),
            cmocka_unit_test(test_fixed_window_overlap),
            cmocka_unit_test(test_node_errors),
            cmocka_unit_test(test_link_errors),
            cmocka_unit_test(test_reachability),
            cmocka_unit_test(test_device_errors),
            cmocka_unit_test(test_low_mmio_exhaustion),
            cmocka_unit_test(test_bdf),
            cmocka_unit_test(test_clone),
            cmocka_unit_test(test_node_limits),
            cmocka_unit_test(test_vf_bus_rules),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
