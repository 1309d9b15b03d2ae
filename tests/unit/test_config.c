/* tests/unit/test_config.c: the config loader: examples, values, defaults, overrides, limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ntbfab/backend.h"
#include "ntbfab/config.h"
#include "ntbfab/error.h"
#include "ntbfab/units.h"

/* Runs with the source root as working directory (tests/unit/meson.build). */
#define EXAMPLES "config/examples/"

static struct ntbf_topo *load_ok(const char *yaml)
{
        struct ntbf_diags d;
        struct ntbf_topo *t = NULL;
        ntbf_diags_init(&d);
        int r = ntbf_config_load_mem("t.yaml", yaml, strlen(yaml), &t, &d);
        if (r) {
                ntbf_diags_print(&d, stderr);
                fail_msg("load failed: %d", r);
        }
        assert_int_equal(d.n, 0);
        ntbf_diags_free(&d);
        return t;
}

/* Load expecting mistakes; returns the printed diagnostics (caller frees). */
static char *load_errors(const char *yaml, size_t len)
{
        struct ntbf_diags d;
        struct ntbf_topo *t = (struct ntbf_topo *)&d; /* must come back NULL */
        ntbf_diags_init(&d);
        int r = ntbf_config_load_mem("t.yaml", yaml, len, &t, &d);
        assert_int_equal(r, NTBF_ECONFIG);
        assert_null(t);
        assert_true(d.errors > 0);
        char *buf = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&buf, &n);
        ntbf_diags_print(&d, f);
        fclose(f);
        ntbf_diags_free(&d);
        return buf;
}

static struct ntbf_topo *load_file_ok(const char *path)
{
        struct ntbf_diags d;
        struct ntbf_topo *t = NULL;
        ntbf_diags_init(&d);
        int r = ntbf_config_load(path, &t, &d);
        if (r) {
                ntbf_diags_print(&d, stderr);
                fail_msg("%s: load failed: %d", path, r);
        }
        assert_int_equal(d.n, 0);
        ntbf_diags_free(&d);
        assert_true(t->finalized);
        return t;
}

static void test_examples_load(void **state)
{
        (void)state;
        static const char *const files[] = {"quickstart.yaml", "three-lenders.yaml",
                                            "cluster-60.yaml", "intel-b2b.yaml",
                                            "switchtec.yaml",  "expansion.yaml"};
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                char path[128];
                snprintf(path, sizeof(path), EXAMPLES "%s", files[i]);
                ntbf_topo_free(load_file_ok(path));
        }
}

static void test_quickstart_values(void **state)
{
        (void)state;
        struct ntbf_topo *t = load_file_ok(EXAMPLES "quickstart.yaml");
        assert_string_equal(t->name, "quickstart");
        assert_string_equal(t->backend, "sim");
        assert_string_equal(t->file, EXAMPLES "quickstart.yaml");
        assert_null(t->key_file);
        assert_int_equal(t->nnodes, 2);

        uint32_t lender = ntbf_topo_find_node(t, "lender");
        uint32_t borrower = ntbf_topo_find_node(t, "borrower");
        assert_int_equal(lender, 0);
        assert_int_equal(borrower, 1);
        const struct ntbf_node *n = &t->nodes[lender];
        assert_int_equal(n->id, 4);
        assert_string_equal(n->address, "127.0.0.1:7700");
        assert_int_equal(n->ram, 4 * NTBF_GiB); /* defaults */
        assert_int_equal(n->cpu_rids, 2);
        assert_true(n->iommu);
        assert_int_equal(n->loc.line, 11); /* the name value */
        assert_int_equal(n->loc.col, 11);
        assert_int_equal(n->loc_id.line, 12);
        assert_int_equal(n->loc_id.col, 9);
        assert_int_equal(t->nodes[borrower].id, 8);
        assert_string_equal(t->nodes[borrower].address, "127.0.0.2:7700");

        uint32_t ai = ntbf_topo_find_adapter(t, lender, "ntb0");
        const struct ntbf_adapter *a = &t->adapters[ai];
        assert_string_equal(a->p.model, "pxh830");
        assert_int_equal(a->p.window, NTBF_GiB);
        assert_int_equal(a->lut_entry_size, 4 * NTBF_MiB); /* 1 GiB / 256 */
        assert_int_equal(a->p.rid_table, 32);              /* from the preset */
        assert_int_equal(a->loc.line, 15);
        assert_int_equal(a->loc.col, 16);
        assert_int_equal(a->loc_window.line, 15);
        assert_int_equal(a->loc_window.col, 45);
        assert_int_equal(a->loc_window_base.line, 0); /* not in the file */
        assert_int_equal(a->window_base % NTBF_GiB, 0);
        assert_true(a->window_base >= UINT64_C(0x38000000000));

        uint32_t di = ntbf_topo_find_device(t, lender, "nvme0");
        const struct ntbf_device *d = &t->devices[di];
        assert_true(d->lend);
        assert_int_equal(d->domain, 0);
        assert_int_equal(d->bus, 3);
        assert_int_equal(d->sim.model, NTBF_SIM_NVME);
        assert_int_equal(d->sim.capacity, NTBF_GiB);
        assert_int_equal(d->sim.queues, 32);
        assert_int_equal(d->sim.lba_size, 512); /* sim default */
        assert_int_equal(d->class_code, NTBF_CLASS_NVME);
        assert_int_equal(d->bars[0].size, 16 * NTBF_KiB);
        assert_int_equal(d->bars[0].flags, NTBF_BAR_64);
        /* Non-prefetchable: below 4 GiB, after the larger 64 KiB BAR0 of acc0. */
        assert_int_equal(d->bars[0].addr, UINT64_C(0x80010000));
        const struct ntbf_region *r = ntbf_addrmap_lookup(t, lender, d->bars[0].addr);
        assert_non_null(r);
        assert_int_equal(r->kind, NTBF_REGION_BAR);
        assert_int_equal(r->obj, di);
        assert_int_equal(d->loc.line, 17);
        assert_int_equal(d->loc_bars.line, 17); /* the sim mapping */
        assert_int_equal(d->loc_bars.col, 61);

        const struct ntbf_device *acc = &t->devices[ntbf_topo_find_device(t, lender, "acc0")];
        assert_int_equal(acc->sim.model, NTBF_SIM_ACCEL);
        assert_int_equal(acc->bars[2].size, 256 * NTBF_MiB);
        assert_int_equal(acc->bars[2].flags, NTBF_BAR_64 | NTBF_BAR_PREF);

        assert_int_equal(t->nlinks, 1);
        const struct ntbf_link *l = &t->links[0];
        assert_int_equal(l->end[0].kind, NTBF_PORT_ADAPTER);
        assert_int_equal(l->end[0].obj, ai);
        assert_int_equal(l->end[0].port, 0);
        assert_int_equal(l->end[1].kind, NTBF_PORT_ADAPTER);
        assert_int_equal(l->end[1].obj, ntbf_topo_find_adapter(t, borrower, "ntb0"));
        assert_int_equal(l->latency_ns, 0);
        assert_int_equal(l->loc.line, 27);
        assert_int_equal(l->loc.col, 5);
        ntbf_topo_free(t);
}

static void test_cluster_60(void **state)
{
        (void)state;
        struct ntbf_topo *t = load_file_ok(EXAMPLES "cluster-60.yaml");
        assert_int_equal(t->nnodes, 60);
        assert_int_equal(t->nswitches, 7);
        assert_int_equal(t->nlinks, 66);
        for (uint32_t i = 0; i < t->nswitches; i++)
                assert_int_equal(t->switches[i].p.ports, 12);
        uint32_t top = ntbf_topo_find_switch(t, "top");
        uint32_t sub3 = ntbf_topo_find_switch(t, "sub3");
        uint32_t l = ntbf_topo_port_link(t, (struct ntbf_port_ref){NTBF_PORT_SWITCH, sub3, 11});
        assert_int_not_equal(l, NTBF_NONE);
        struct ntbf_port_ref peer =
            ntbf_link_peer(&t->links[l], (struct ntbf_port_ref){NTBF_PORT_SWITCH, sub3, 11});
        assert_int_equal(peer.kind, NTBF_PORT_SWITCH);
        assert_int_equal(peer.obj, top);
        assert_int_equal(peer.port, 2);
        ntbf_topo_free(t);
}

static void test_overrides_and_units(void **state)
{
        (void)state;
        struct ntbf_topo *t =
            load_ok("cluster: {name: c-1, backend: dolphin, key_file: /etc/ntbfab/key}\n"
                    "nodes:\n"
                    "  - name: a\n"
                    "    id: 0x10\n"
                    "    address: '[fe80::1]:7700'\n"
                    "    ram: 64G\n"
                    "    cpu_rids: 1\n"
                    "    iommu: false\n"
                    "    mmio_low: 0xc0000000\n"
                    "    mmio_low_end: 0xfe000000\n"
                    "    mmio_high: 0x200000000000\n"
                    "    adapters:\n"
                    "      - name: ntb0\n"
                    "        model: PXH830\n"
                    "        ports: 1\n"
                    "        window: 0x20000000\n"
                    "        window_base: 0x200000000000\n"
                    "        lut_entries: 128\n"
                    "        rid_table: 64\n"
                    "        rid_reserved: 3\n"
                    "        addr_bits: 48\n"
                    "        doorbells: 4\n"
                    "        scratchpads: 2\n"
                    "        messages: 1\n"
                    "        dma_channels: 0\n"
                    "        hop_ns: 99\n"
                    "        xlat: inbound\n"
                    "        bdf: '5e:00.1'\n"
                    "      - {name: ntb1, model: mxh930, window: 64MiB, window_below_4g: true}\n"
                    "  - name: b\n"
                    "    id: 20\n"
                    "    address: host-b.example:1\n"
                    "    adapters: [{name: ntb0, model: pxh830}]\n"
                    "links:\n"
                    "  - [a.ntb0, b.ntb0]\n");
        assert_string_equal(t->name, "c-1");
        assert_string_equal(t->backend, "dolphin");
        assert_string_equal(t->key_file, "/etc/ntbfab/key");
        const struct ntbf_node *n = &t->nodes[0];
        assert_int_equal(n->id, 16);
        assert_string_equal(n->address, "[fe80::1]:7700");
        assert_int_equal(n->ram, 64 * NTBF_GiB);
        assert_int_equal(n->cpu_rids, 1);
        assert_false(n->iommu);
        assert_int_equal(n->mmio_low_base, 0xc0000000);
        assert_int_equal(n->mmio_low_end, 0xfe000000);
        assert_int_equal(n->mmio_high_base, 0x200000000000);
        const struct ntbf_adapter *a = &t->adapters[0];
        assert_string_equal(a->p.model, "pxh830");
        assert_int_equal(a->p.ports, 1);
        assert_int_equal(a->p.window, 512 * NTBF_MiB);
        assert_int_equal(a->window_base, 0x200000000000);
        assert_int_equal(a->p.lut_entries, 128);
        assert_int_equal(a->lut_entry_size, 4 * NTBF_MiB);
        assert_int_equal(a->p.rid_table, 64);
        assert_int_equal(a->p.rid_reserved, 3);
        assert_int_equal(a->p.addr_bits, 48);
        assert_int_equal(a->p.doorbells, 4);
        assert_int_equal(a->p.scratchpads, 2);
        assert_int_equal(a->p.messages, 1);
        assert_int_equal(a->p.dma_channels, 0);
        assert_int_equal(a->p.hop_ns, 99);
        assert_int_equal(a->p.xlat, NTBF_XLAT_INBOUND);
        assert_string_equal(a->bdf, "0000:5e:00.1");
        assert_int_equal(a->loc_window_base.line, 17);
        assert_int_equal(a->loc_lut.line, 18);
        const struct ntbf_adapter *a1 = &t->adapters[1];
        assert_int_equal(a1->p.window, 64 * NTBF_MiB);
        assert_true(a1->p.window_below_4g);
        assert_true(a1->window_base < UINT64_C(0x100000000));
        assert_int_equal(a1->p.xlat, NTBF_XLAT_INBOUND | NTBF_XLAT_OUTBOUND); /* preset */
        assert_string_equal(t->nodes[1].address, "host-b.example:1");
        ntbf_topo_free(t);
}

/*
 * Windows (docs/config.md, "Windows"): the Switchtec layout (LUT window and direct window in
 * one BAR), a fixed BAR base, defaults; a model's windows, and the single-window keys as
 * shorthand that replaces them.
 */
/* backend switchtec: each adapter says where its switch is, or the error names its line. */
static void test_switchtec_needs_its_switch(void **state)
{
        (void)state;
        const char *y = "cluster: {name: c, backend: switchtec}\n"
                        "nodes:\n"
                        "  - name: a\n"
                        "    id: 4\n"
                        "    address: 'x:1'\n"
                        "    adapters:\n"
                        "      - {name: n, model: switchtec-pfx}\n"
                        "  - name: b\n"
                        "    id: 8\n"
                        "    address: 'x:2'\n"
                        "    adapters:\n"
                        "      - name: n\n"
                        "        model: switchtec-pfx\n"
                        "        switchtec: {gas: mrpc, partition: 1}\n"
                        "  - name: c\n"
                        "    id: 9\n"
                        "    address: 'x:3'\n"
                        "    adapters:\n"
                        "      - name: n\n"
                        "        model: switchtec-pfx\n"
                        "        switchtec: {gas: /sys/bus/pci/devices/0000:03:00.1/resource0}\n"
                        "  - name: d\n"
                        "    id: 10\n"
                        "    address: 'x:4'\n"
                        "    adapters:\n"
                        "      - {name: n, model: switchtec-pfx, bdf: '03:00.1', switchtec: "
                        "{partition: 2}}\n"
                        "      - {name: m, model: switchtec-pfx, bdf: '05:00.1', switchtec: "
                        "{gas: mrpc, partition: 3}}\n";
        char *e = load_errors(y, strlen(y));
        assert_non_null(strstr(e, "t.yaml:7:16: error: adapter a.n: the switchtec backend needs "
                                  "its switch: add bdf: with the NT function's PCI address (the "
                                  "switch is found from it in /sys/class/switchtec) and "
                                  "switchtec: {partition: N}, or switchtec: {gas: "));
        assert_non_null(strstr(e, "t.yaml:14:20: error: adapter b.n: switchtec: {gas: mrpc} "
                                  "reaches the switch through its management device: add device: "
                                  "/dev/switchtecN, or the adapter's bdf (the device is then found "
                                  "from it)\n"));
        /* With a bdf, gas (and mrpc's device) may be left out: the backend finds the switch. */
        assert_null(strstr(e, "adapter d."));
        assert_non_null(strstr(e, "t.yaml:21:20: error: adapter c.n: the switchtec backend needs "
                                  "the NT partition in the file"));
        free(e);
}

/* An adapter's dolphin: (docs/dolphin.md): file_figures read per adapter, false without it. */
static void test_dolphin_keys(void **state)
{
        (void)state;
        const char *y = "cluster: {name: c, backend: dolphin}\n"
                        "nodes:\n"
                        "  - name: a\n"
                        "    id: 4\n"
                        "    address: 'x:1'\n"
                        "    adapters:\n"
                        "      - name: n\n"
                        "        model: dolphin-sisci\n"
                        "        dolphin: {file_figures: true}\n"
                        "  - name: b\n"
                        "    id: 8\n"
                        "    address: 'x:2'\n"
                        "    adapters:\n"
                        "      - {name: n, model: dolphin-sisci, dolphin: {file_figures: false}}\n"
                        "  - name: c\n"
                        "    id: 9\n"
                        "    address: 'x:3'\n"
                        "    adapters:\n"
                        "      - {name: n, model: dolphin-sisci}\n"
                        "links: [[a.n, b.n], [b.n.1, c.n], [c.n.1, a.n.1]]\n";
        struct ntbf_topo *t = load_ok(y);
        assert_true(t->adapters[0].dol.file_figures);
        assert_int_equal(t->adapters[0].dol.loc.line, 9);
        assert_int_equal(t->adapters[0].dol.loc.col, 18);
        assert_false(t->adapters[1].dol.file_figures);
        assert_false(t->adapters[2].dol.file_figures);
        assert_int_equal(t->adapters[2].dol.loc.line, 0);
        ntbf_topo_free(t);
}

static void test_backend_names_from_registry(void **state)
{
        (void)state;
        /* Every registered backend is a valid cluster.backend, built here or not, and the list
         * of names an unknown backend gets is the registry's, in its order. */
        char names[512] = "";
        size_t o = 0, n = 0;
        for (const struct ntbf_backend_entry *e; (e = ntbf_backend_entry_at(n)); n++) {
                char y[640];
                /* The switchtec backend needs to know where each adapter's switch is. */
                bool stx = !strcmp(e->name, "switchtec");
                snprintf(y, sizeof(y),
                         "cluster: {name: c, backend: %s}\n"
                         "nodes:\n"
                         "  - {name: a, id: 4, address: 'x:1', adapters: [{name: n, model: "
                         "pxh830%s}]}\n"
                         "  - {name: b, id: 8, address: 'x:2', adapters: [{name: n, model: "
                         "pxh830%s}]}\n"
                         "links: [[a.n, b.n]]\n",
                         e->name, stx ? ", switchtec: {gas: g, partition: 0}" : "",
                         stx ? ", switchtec: {gas: g, partition: 1}" : "");
                struct ntbf_topo *t = load_ok(y);
                assert_string_equal(t->backend, e->name);
                ntbf_topo_free(t);
                o += (size_t)snprintf(names + o, sizeof(names) - o, "%s%s", n ? ", " : "", e->name);
        }
        assert_true(n >= 2);
        const char *bad = "cluster: {name: c, backend: qemu}\nnodes: []\n";
        char *e = load_errors(bad, strlen(bad));
        char want[640];
        snprintf(want, sizeof(want), "unknown backend 'qemu'; use one of %s\n", names);
        assert_non_null(strstr(e, want));
        free(e);
        /* The per-adapter key is refused: one backend drives the cluster. */
        const char *ad = "cluster: {name: c, backend: sim}\n"
                         "nodes:\n"
                         "  - {name: a, id: 4, address: 'x:1', adapters: [{name: n, model: "
                         "pxh830, backend: sim}]}\n";
        e = load_errors(ad, strlen(ad));
        assert_non_null(strstr(e, "t.yaml:3:83: error: 'backend' is a key of 'cluster', not of "
                                  "an adapter: one backend drives every adapter of the "
                                  "cluster; remove it here (and set cluster.backend)\n"));
        free(e);
}

static void test_windows_keys(void **state)
{
        (void)state;
        struct ntbf_topo *t =
            load_ok("cluster: {name: w}\n"
                    "nodes:\n"
                    "  - name: a\n"
                    "    id: 4\n"
                    "    address: a:1\n"
                    "    adapters:\n"
                    "      - name: nt0\n"
                    "        model: switchtec-pfx\n"
                    "        rid_proxy: false\n"
                    "        windows:\n"
                    "          - {size: 32MiB, slots: 512, reserved: 1, bar: 2, base: "
                    "0x38100000000}\n"
                    "          - {size: 32MiB, bar: 2, addr_align: natural, size_align: 4KiB}\n"
                    "          - {size: 1GiB, bar: 4, size_max: 512MiB, size_align: 2MiB}\n"
                    "      - {name: ntb1, model: intel-gen3, window_base: 0x38200000000}\n"
                    "      - {name: ntb2, model: intel-gen3, window: 1GiB}\n"
                    "  - name: b\n"
                    "    id: 8\n"
                    "    address: b:1\n"
                    "    adapters:\n"
                    "      - name: nt0\n"
                    "        model: switchtec-pfx\n"
                    "        rid_mask: native\n"
                    "        spad_window: 128KiB\n"
                    "        windows:\n"
                    "          - {size: 32MiB, slots: 256, reserved: 1, bar: 2}\n"
                    "          - {size: 32MiB, bar: 2, addr_align: natural, size_align: 4KiB}\n"
                    "        switchtec: {device: /dev/switchtec1, gas: mrpc, partition: 3}\n"
                    "      - {name: ntb1, model: intel-gen3}\n"
                    "      - {name: ntb2, model: intel-gen3}\n"
                    "links:\n"
                    "  - [a.nt0, b.nt0]\n"
                    "  - [a.ntb1, b.ntb1]\n"
                    "  - [a.ntb2, b.ntb2]\n");
        const struct ntbf_adapter *a = &t->adapters[0];
        assert_false(a->p.rid_proxy);
        assert_int_equal(a->nwin, 3);
        assert_int_equal(a->nslots, 514);
        assert_int_equal(a->win[0].base, 0x38100000000);
        assert_int_equal(a->win[0].slots, 512);
        assert_int_equal(a->win[0].slot_size, 64 * NTBF_KiB);
        assert_int_equal(a->win[0].reserved, 1);
        assert_int_equal(a->win[0].addr_align, 64 * NTBF_KiB); /* the slot size by default */
        assert_int_equal(a->win[0].size_align, 64 * NTBF_KiB);
        assert_int_equal(a->win[0].size_max, 64 * NTBF_KiB);
        assert_int_equal(a->win[1].base, 0x38100000000 + 32 * NTBF_MiB); /* after it in BAR2 */
        assert_int_equal(a->win[1].first_slot, 512);
        assert_int_equal(a->win[1].slots, 1);
        assert_true(a->win[1].flags & NTBF_WIN_NATURAL_ALIGN);
        assert_int_equal(a->win[1].size_align, 4 * NTBF_KiB);
        assert_int_equal(a->win[1].size_max, 32 * NTBF_MiB);
        assert_int_equal(a->win[2].first_slot, 513);
        assert_int_equal(a->win[2].size_max, 512 * NTBF_MiB);
        assert_int_equal(a->win[2].size_align, 2 * NTBF_MiB);
        assert_int_equal(a->win[2].base % NTBF_GiB, 0); /* BAR4 placed, aligned to its size */
        assert_int_equal(a->window_base, a->win[0].base);
        assert_int_equal(a->lut_entry_size, 64 * NTBF_KiB);
        assert_true(a->loc_win[2].line == 13);
        /* A model's windows, window_base the first BAR's. */
        const struct ntbf_adapter *i1 = &t->adapters[1];
        assert_int_equal(i1->nwin, 2);
        assert_int_equal(i1->win[0].base, 0x38200000000);
        assert_int_equal(i1->win[0].addr_align, 256 * NTBF_MiB);
        assert_int_equal(i1->win[1].base % (256 * NTBF_MiB), 0);
        assert_true(i1->win[1].base != i1->win[0].base);
        /* The single-window keys replace them: one window, the model's lut_entries. */
        const struct ntbf_adapter *i2 = &t->adapters[2];
        assert_int_equal(i2->nwin, 1);
        assert_int_equal(i2->win[0].size, NTBF_GiB);
        assert_int_equal(i2->win[0].slots, 2);
        assert_int_equal(i2->win[0].slot_size, 512 * NTBF_MiB);
        assert_int_equal(a->p.rid_mask, NTBF_RID_MASK_EXPAND); /* the preset's */
        assert_int_equal(a->stx.partition, -1);                /* no `switchtec:` */
        assert_string_equal(a->stx.gas, "");
        /* The other end: LUT entries of 128 KiB, masks, where the switch is. */
        const struct ntbf_adapter *b = &t->adapters[3];
        assert_int_equal(b->nwin, 2);
        assert_int_equal(b->win[0].slots, 256);
        assert_int_equal(b->win[0].reserved, 1);
        assert_int_equal(b->win[1].base, b->win[0].base + 32 * NTBF_MiB);
        assert_true(b->p.rid_proxy);
        assert_int_equal(b->p.rid_mask, NTBF_RID_MASK_NATIVE);
        assert_int_equal(b->p.spad_window, 128 * NTBF_KiB);
        assert_string_equal(b->stx.device, "/dev/switchtec1");
        assert_string_equal(b->stx.gas, "mrpc");
        assert_int_equal(b->stx.partition, 3);
        assert_int_equal(b->stx.loc.line, 27);
        ntbf_topo_free(t);
}

/* Expansion chassis and root complexes (docs/config.md): keys, defaults, references. */
static void test_chassis_keys(void **state)
{
        (void)state;
        struct ntbf_topo *t =
            load_ok("cluster: {name: chassis}\n"
                    "nodes:\n"
                    "  - name: a\n"
                    "    id: 4\n"
                    "    address: 127.0.0.1:7700\n"
                    "    root_ns: 90\n"
                    "    devices:\n"
                    "      - {name: nvme0, bdf: '03:00.0', chassis: exp1,\n"
                    "         sim: {model: nvme}}\n"
                    "      - {name: gpu0, bdf: '04:00.0', chassis: exp0, hop_ns: 5,\n"
                    "         sim: {model: accel}}\n"
                    "      - {name: nic0, bdf: '05:00.0', sim: {model: accel}}\n"
                    "    chassis:\n"
                    "      - {name: exp0}\n"
                    "      - {name: exp1, hop_ns: 100, uplink_ns: 0}\n"
                    "    adapters: [{name: ntb0, model: pxh830, window: 1GiB}]\n"
                    "  - name: b\n"
                    "    id: 8\n"
                    "    address: 127.0.0.2:7700\n"
                    "    adapters: [{name: ntb0, model: pxh830, window: 1GiB}]\n"
                    "links: [[a.ntb0, b.ntb0]]\n");
        assert_int_equal(t->nodes[0].root_ns, 90);
        assert_int_equal(t->nodes[1].root_ns, 0);
        assert_int_equal(t->nchassis, 2);
        assert_string_equal(t->chassis[0].name, "exp0");
        assert_int_equal(t->chassis[0].node, 0);
        assert_int_equal(t->chassis[0].hop_ns, NTBF_CHASSIS_HOP_NS);
        assert_int_equal(t->chassis[0].uplink_ns, NTBF_CHASSIS_UPLINK_NS);
        assert_int_equal(t->chassis[0].loc.line, 14);
        assert_int_equal(t->chassis[1].hop_ns, 100);
        assert_int_equal(t->chassis[1].uplink_ns, 0);
        /* Devices name chassis listed after them. */
        assert_int_equal(t->devices[0].chassis, 1);
        assert_int_equal(t->devices[1].chassis, 0);
        assert_int_equal(t->devices[1].hop_ns, 5);
        assert_int_equal(t->devices[2].chassis, NTBF_NONE);
        /* nvme0 -> gpu0 in different chassis: up exp1, through the root, down exp0. */
        assert_int_equal(ntbf_topo_local_ns(t, 0, 0, 1), 100 + 90 + (150 + 264) + 5);
        ntbf_topo_free(t);
}

static void test_bar_forms(void **state)
{
        (void)state;
        struct ntbf_topo *t = load_ok("cluster: {name: bars}\n"
                                      "nodes:\n"
                                      "  - name: a\n"
                                      "    id: 4\n"
                                      "    address: 127.0.0.1:7700\n"
                                      "    adapters: [{name: ntb0, model: pxh830, window: 4GiB}]\n"
                                      "    devices:\n"
                                      "      - name: gpu0\n"
                                      "        bdf: 0000:3b:00.0\n"
                                      "        class: 0x030200\n"
                                      "        vendor: 0x10de\n"
                                      "        device: 0x1db4\n"
                                      "        lend: true\n"
                                      "        dma_bits: 47\n"
                                      "        hop_ns: 300\n"
                                      "        bars:\n"
                                      "          - 16MiB\n"
                                      "          - ~\n"
                                      "          - {size: 1GiB, prefetchable: true}\n"
                                      "          - null\n"
                                      "          - {size: 32MiB, bits: 32, prefetchable: true}\n"
                                      "          -\n"
                                      "      - name: nic0\n"
                                      "        bdf: 5e:00.0\n"
                                      "        functions: 2\n"
                                      "        vfs: 8\n"
                                      "        bars: [{size: 1MiB, prefetchable: true}]\n"
                                      "        vf_bars: [64KiB]\n"
                                      "  - name: b\n"
                                      "    id: 8\n"
                                      "    address: 127.0.0.2:7700\n"
                                      "    adapters: [{name: ntb0, model: pxh830, window: 4GiB}]\n"
                                      "links: [[a.ntb0, b.ntb0]]\n");
        const struct ntbf_device *g = &t->devices[0];
        assert_int_equal(g->class_code, 0x030200);
        assert_int_equal(g->vendor_id, 0x10de);
        assert_int_equal(g->device_id, 0x1db4);
        assert_int_equal(g->dma_bits, 47);
        assert_int_equal(g->hop_ns, 300);
        assert_int_equal(g->sim.model, NTBF_SIM_NONE);
        assert_int_equal(g->bars[0].size, 16 * NTBF_MiB);
        assert_int_equal(g->bars[0].flags, NTBF_BAR_64);
        assert_true(g->bars[0].addr < UINT64_C(0x100000000)); /* non-prefetchable: low */
        assert_int_equal(g->bars[1].size, 0);
        assert_int_equal(g->bars[2].size, NTBF_GiB);
        assert_int_equal(g->bars[2].flags, NTBF_BAR_64 | NTBF_BAR_PREF);
        assert_true(g->bars[2].addr >= UINT64_C(0x38000000000)); /* prefetchable 64-bit: high */
        assert_int_equal(g->bars[3].size, 0);
        assert_int_equal(g->bars[4].size, 32 * NTBF_MiB);
        assert_int_equal(g->bars[4].flags, NTBF_BAR_PREF);
        assert_true(g->bars[4].addr < UINT64_C(0x100000000)); /* 32-bit: low */
        assert_int_equal(g->bars[5].size, 0);
        assert_int_equal(g->loc_bars.line, 17); /* the list's first item */
        const struct ntbf_device *nic = &t->devices[1];
        assert_int_equal(nic->bus, 0x5e);
        assert_int_equal(nic->functions, 2);
        assert_int_equal(nic->vfs, 8);
        assert_int_equal(nic->vf_bars[0], 64 * NTBF_KiB);
        assert_false(nic->lend);
        assert_int_equal(nic->dma_bits, 64); /* default */
        ntbf_topo_free(t);
}

static void test_sim_overrides(void **state)
{
        (void)state;
        struct ntbf_topo *t = load_ok(
            "cluster: {name: sim}\n"
            "nodes:\n"
            "  - name: a\n"
            "    id: 4\n"
            "    address: 127.0.0.1:7700\n"
            "    adapters: [{name: ntb0, model: pxh830, window: 1GiB}]\n"
            "    devices:\n"
            "      - {name: n, bdf: '01:00.0', lend: true,\n"
            "         sim: {model: nvme, capacity: 2TiB, queues: 64, lba: 4096, mdts: 0,\n"
            "               cmb: 8MiB, msix: 33}}\n"
            "      - {name: x, bdf: '02:00.0', sim: {model: accel, memory: 512MiB, msix: 4}}\n"
            "  - name: b\n"
            "    id: 8\n"
            "    address: 127.0.0.2:7700\n"
            "    adapters: [{name: ntb0, model: pxh830, window: 1GiB}]\n"
            "links: [[a.ntb0, b.ntb0]]\n");
        const struct ntbf_sim_params *s = &t->devices[0].sim;
        assert_int_equal(s->capacity, 2 * NTBF_TiB);
        assert_int_equal(s->queues, 64);
        assert_int_equal(s->lba_size, 4096);
        assert_int_equal(s->mdts, 0);
        assert_int_equal(s->cmb, 8 * NTBF_MiB);
        assert_int_equal(s->msix, 33);
        assert_int_equal(t->devices[0].bars[2].size, 8 * NTBF_MiB); /* the CMB */
        assert_int_equal(t->devices[0].loc_bars.line, 9);
        assert_int_equal(t->devices[0].loc_bars.col, 15);
        assert_int_equal(t->devices[1].sim.memory, 512 * NTBF_MiB);
        assert_int_equal(t->devices[1].bars[2].size, 512 * NTBF_MiB);
        assert_int_equal(t->devices[1].sim.msix, 4);
        ntbf_topo_free(t);
}

static void test_links_ports_latency(void **state)
{
        (void)state;
        struct ntbf_topo *t = load_ok("cluster: {name: mesh}\n"
                                      "switches:\n"
                                      "  - {name: sw, model: mxs824, ports: 8, rid_table: 128,\n"
                                      "     mcast_groups: 0, hop_ns: 150}\n"
                                      "nodes:\n"
                                      "  - {name: a, id: 4, address: 'a:1',\n"
                                      "     adapters: [{name: ntb0, model: pxh830}]}\n"
                                      "  - {name: b, id: 8, address: 'b:1',\n"
                                      "     adapters: [{name: ntb0, model: pxh830}]}\n"
                                      "  - {name: c, id: 12, address: 'c:1',\n"
                                      "     adapters: [{name: ntb0, model: pxh830}]}\n"
                                      "links:\n"
                                      "  - [a.ntb0, b.ntb0.1]\n"
                                      "  - {ends: [a.ntb0.1, sw.7], latency_ns: 5}\n"
                                      "  - {ends: ['c.ntb0.0', sw.0]}\n"
                                      "  - [b.ntb0.0, sw.3]\n");
        const struct ntbf_switch *sw = &t->switches[0];
        assert_int_equal(sw->p.ports, 8);
        assert_int_equal(sw->p.rid_table, 128);
        assert_int_equal(sw->p.mcast_groups, 0);
        assert_int_equal(sw->p.hop_ns, 150);
        assert_int_equal(sw->loc.line, 3);
        assert_int_equal(t->nlinks, 4);
        const struct ntbf_link *l = t->links;
        assert_int_equal(l[0].end[1].port, 1);
        assert_int_equal(l[0].latency_ns, 0);
        assert_int_equal(l[1].end[0].port, 1);
        assert_int_equal(l[1].end[1].kind, NTBF_PORT_SWITCH);
        assert_int_equal(l[1].end[1].port, 7);
        assert_int_equal(l[1].latency_ns, 5);
        assert_int_equal(l[1].loc.line, 14);
        assert_int_equal(l[1].loc.col, 5);
        assert_int_equal(l[2].end[0].obj, 2);
        assert_int_equal(l[2].end[0].port, 0);
        assert_int_equal(l[3].end[1].port, 3);
        ntbf_topo_free(t);
}

static void test_empty_lists_and_minimal(void **state)
{
        (void)state;
        /* Empty values of list keys are empty lists; a one-node cluster is accepted. */
        struct ntbf_topo *t = load_ok("cluster: {name: one}\n"
                                      "nodes:\n"
                                      "  - {name: a, id: 4, address: 'a:1', devices: [],\n"
                                      "     adapters: [{name: ntb0, model: pxh830}]}\n"
                                      "switches:\n"
                                      "links: []\n");
        assert_int_equal(t->nnodes, 1);
        assert_int_equal(t->nswitches, 0);
        ntbf_topo_free(t);
}

static void test_every_mistake_reported(void **state)
{
        (void)state;
        const char *y = "cluster: {name: m}\n"
                        "nodes:\n"
                        "  - {name: a, id: 4, address: 'a:1', ram: 1GB,\n"
                        "     adapters: [{name: ntb0, model: pxh830, windw: 1GiB}]}\n"
                        "  - {name: b, id: 4, address: 'b',\n"
                        "     adapters: [{name: ntb0, model: pxh830}]}\n"
                        "links: [[a.ntb0, b.ntb1]]\n";
        char *e = load_errors(y, strlen(y));
        assert_string_equal(
            e, "t.yaml:3:43: error: 'ram' value '1GB' is not a size: decimal units (KB, MB, GB, "
               "TB) are ambiguous; write KiB, MiB, GiB or TiB (powers of 1024)\n"
               "t.yaml:4:45: error: unknown key 'windw' in adapter; did you mean 'window'?\n"
               "t.yaml:5:19: error: node id 4 is already used by node 'a' (line 3); give each "
               "node a unique id\n"
               "t.yaml:5:31: error: 'address' value 'b' is not HOST:PORT: the port is missing; "
               "write HOST:PORT, like 10.0.0.1:7700\n"
               "t.yaml:7:18: error: link end 'b.ntb1': node 'b' has no adapter 'ntb1'; did you "
               "mean 'ntb0'?\n");
        free(e);
}

static void test_hostile_inputs(void **state)
{
        (void)state;
        /* Aliases would let a tiny file expand exponentially: refused. */
        const char *bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n"
                           "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                           "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n";
        char *e = load_errors(bomb, strlen(bomb));
        assert_non_null(strstr(e, "t.yaml:1:4: error: anchors and aliases"));
        assert_non_null(strstr(e, "t.yaml:2:8: error: anchors and aliases"));
        free(e);

        /* 10 MB of nesting: stops at the depth limit, no stack or heap blow-up. */
        size_t n = 10 * 1000 * 1000;
        char *deep = malloc(n);
        memset(deep, '[', n);
        e = load_errors(deep, n);
        assert_string_equal(e, "t.yaml:1:65: error: the file nests lists and mappings more than "
                               "64 levels deep; a cluster file needs at most 7, check that this "
                               "is the right file\n");
        free(e);
        for (size_t i = 0; i + 1 < n; i += 2)
                memcpy(deep + i, "- ", 2);
        e = load_errors(deep, n);
        assert_non_null(strstr(e, "more than 64 levels deep"));
        free(e);
        free(deep);

        /* NUL bytes and other binary data. */
        static const char bin[] = "cluster:\0\x01\xff\xfe";
        e = load_errors(bin, sizeof(bin) - 1);
        assert_non_null(strstr(e, "t.yaml:1:9: error: the file is not YAML text"));
        free(e);

        /* Over 64 MiB: refused before parsing. */
        size_t big = 64 * NTBF_MiB + 1;
        char *huge = calloc(1, big);
        e = load_errors(huge, big);
        assert_string_equal(e, "t.yaml:1:1: error: the file is 67108865 bytes; cluster files are "
                               "limited to 64 MiB, check that this is the right file\n");
        free(e);
        free(huge);

        /* A NUL escape in a value cannot pass for the text before it. */
        const char *nul = "cluster: {name: \"a\\0b\"}\n";
        e = load_errors(nul, strlen(nul));
        assert_non_null(strstr(e, "t.yaml:1:17: error: 'name' holds a NUL character"));
        free(e);
}

static void test_unreadable_file(void **state)
{
        (void)state;
        struct ntbf_diags d;
        struct ntbf_topo *t = NULL;
        ntbf_diags_init(&d);
        assert_int_equal(ntbf_config_load("config/examples/no-such.yaml", &t, &d), -ENOENT);
        assert_null(t);
        assert_int_equal(d.n, 1);
        assert_string_equal(d.v[0].msg, "cannot read the cluster file: No such file or "
                                        "directory; check the path and its permissions");
        assert_string_equal(d.v[0].file, "config/examples/no-such.yaml");
        ntbf_diags_free(&d);
        ntbf_diags_init(&d);
        assert_int_equal(ntbf_config_load("config/examples", &t, &d), -EISDIR);
        ntbf_diags_free(&d);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_examples_load),
            cmocka_unit_test(test_chassis_keys),
            cmocka_unit_test(test_quickstart_values),
            cmocka_unit_test(test_cluster_60),
            cmocka_unit_test(test_overrides_and_units),
            cmocka_unit_test(test_windows_keys),
            cmocka_unit_test(test_backend_names_from_registry),
        cmocka_unit_test(test_dolphin_keys),
            cmocka_unit_test(test_switchtec_needs_its_switch),
            cmocka_unit_test(test_bar_forms),
            cmocka_unit_test(test_sim_overrides),
            cmocka_unit_test(test_links_ports_latency),
            cmocka_unit_test(test_empty_lists_and_minimal),
            cmocka_unit_test(test_every_mistake_reported),
            cmocka_unit_test(test_hostile_inputs),
            cmocka_unit_test(test_unreadable_file),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
