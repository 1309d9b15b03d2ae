/* tests/unit/test_simfab_ops.c: the vtable rules, and the sim's registers, events and instances. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "ntbfab/error.h"
#include "fixtures.h"
#include "simfab_fx.h"

#define MiB NTBF_MiB

/* ---- ntbf_backend_ops_valid --------------------------------------------------------------------
 */

static void expect_invalid(const struct ntbf_backend_ops *o, const char *why_expected)
{
        char why[256] = "";
        assert_false(ntbf_backend_ops_valid(o, why, sizeof(why)));
        assert_string_equal(why, why_expected);
}

/* A client_gone without serve, for the pair rule. */
static void client_gone_stub(struct ntbf_adapter_h *h, uint64_t client)
{
        (void)h;
        (void)client;
}

static int fake_host_bus(struct ntbf_adapter_h *h, const void *addr, uint64_t size, uint64_t *bus)
{
        (void)h, (void)addr, (void)size, (void)bus;
        return -EFAULT;
}

static void test_ops_valid_rules(void **state)
{
        (void)state;
        char why0[256];
        const struct ntbf_backend_ops *sim = ntbf_backend_find("sim");
        assert_non_null(sim);
        assert_ptr_equal(ntbf_backend_at(0), sim);
        /* Every backend of the registry keeps the rules (the shared-memory one too). */
        const struct ntbf_backend_ops *ivs = ntbf_backend_find("ivshmem");
        assert_non_null(ivs);
        /* built: sim, linux-ntb, switchtec, dolphin, ivshmem */
        assert_ptr_equal(ntbf_backend_at(4), ivs);
        assert_true(ntbf_backend_ops_valid(ivs, NULL, 0));
        const struct ntbf_backend_ops *lntb = ntbf_backend_find("linux-ntb");
        assert_non_null(lntb);
        assert_ptr_equal(ntbf_backend_at(1), lntb);
        assert_true(ntbf_backend_ops_valid(lntb, why0, sizeof(why0)));
        /* Switchtec's: linux-ntb's data path, inbound translations and a requester table
         * programmed in the switch, no outbound translation. */
        const struct ntbf_backend_ops *stx = ntbf_backend_find("switchtec");
        assert_non_null(stx);
        assert_ptr_equal(ntbf_backend_at(2), stx);
        assert_true(ntbf_backend_ops_valid(stx, why0, sizeof(why0)));
        assert_non_null(stx->peer_xlat_set);
        assert_non_null(stx->rid_add);
        assert_null(stx->xlat_set);
        /* Dolphin's: a managed fabric (inbound translation, devices mapped by the fabric). */
        const struct ntbf_backend_ops *dol = ntbf_backend_find("dolphin");
        assert_non_null(dol);
        assert_ptr_equal(ntbf_backend_at(3), dol);
        assert_true(ntbf_backend_ops_valid(dol, NULL, 0));
        assert_null(dol->xlat_set);
        assert_null(dol->rid_add);
        assert_null(dol->db_read);
        assert_null(dol->link_enable);
        assert_null(dol->reset);
        assert_null(ntbf_backend_at(5));
        assert_null(ntbf_backend_find("nope"));
        /* The registry: every entry named once, its vtable (if built) of the same name and
         * valid; an entry not built has a sentence; find and at see the built ones only. */
        size_t n = 0, built = 0, lo = 0;
        char list[512] = "", unbuilt[64] = "";
        for (const struct ntbf_backend_entry *e; (e = ntbf_backend_entry_at(n)); n++) {
                lo += (size_t)snprintf(list + lo, sizeof(list) - lo, "%s %s%s", n ? "," : "",
                                       e->name, e->ops ? "" : " (not built)");
                if (!e->ops && !unbuilt[0])
                        snprintf(unbuilt, sizeof(unbuilt), "%s", e->name);
                assert_ptr_equal(ntbf_backend_entry(e->name), e);
                assert_non_null(e->about);
                if (e->ops) {
                        assert_string_equal(e->ops->name, e->name);
                        assert_ptr_equal(ntbf_backend_find(e->name), e->ops);
                        assert_ptr_equal(ntbf_backend_at(built++), e->ops);
                        assert_true(ntbf_backend_ops_valid(e->ops, NULL, 0));
                        assert_null(e->unbuilt);
                } else {
                        assert_non_null(e->unbuilt);
                        assert_null(ntbf_backend_find(e->name));
                }
        }
        assert_int_equal(built, 5);
        assert_ptr_equal(ntbf_backend_entry_at(0)->ops, sim); /* the default comes first */
        assert_string_equal(ntbf_backend_entry("sim")->helper, "ntbfab-simd");
        assert_null(ntbf_backend_entry("ivshmem")->helper);
        assert_null(ntbf_backend_entry("dolphin")->helper);
        char msg[512];
        assert_ptr_equal(ntbf_backend_open_ops("ivshmem", msg, sizeof(msg)), ivs);
        char want[640];
        if (unbuilt[0]) {
                assert_null(ntbf_backend_open_ops(unbuilt, msg, sizeof(msg)));
                snprintf(want, sizeof(want), "backend '%s' is registered but not built: %s",
                         unbuilt, ntbf_backend_entry(unbuilt)->unbuilt);
                assert_string_equal(msg, want);
        }
        assert_null(ntbf_backend_open_ops("qemu", msg, sizeof(msg)));
        snprintf(want, sizeof(want), "no backend 'qemu' is registered; the registered ones are%s",
                 list);
        assert_string_equal(msg, want);
        assert_null(ntbf_backend_open_ops("qemu", NULL, 0));
        char why[256];
        assert_true(ntbf_backend_ops_valid(sim, why, sizeof(why)));
        assert_true(ntbf_backend_ops_valid(sim, NULL, 0));

        expect_invalid(NULL, "no vtable");
        struct ntbf_backend_ops o = *sim;
        o.name = "";
        expect_invalid(&o, "the backend has no name");

        /* Every mandatory callback, one at a time. */
        static const struct {
                size_t off;
                const char *name;
        } mandatory[] = {
#define M(f) {offsetof(struct ntbf_backend_ops, f), #f}
            M(open),       M(close),      M(probe),    M(release),        M(caps),
            M(link_state), M(set_events), M(event_fd), M(process_events),
#undef M
        };
        for (size_t i = 0; i < sizeof(mandatory) / sizeof(mandatory[0]); i++) {
                o = *sim;
                memset((char *)&o + mandatory[i].off, 0, sizeof(void (*)(void)));
                char exp[128];
                snprintf(exp, sizeof(exp), "mandatory callback %s is missing", mandatory[i].name);
                expect_invalid(&o, exp);
        }

        /* Translation: each pair complete, and at least one of them. */
        o = *sim;
        o.xlat_clear = NULL;
        expect_invalid(&o, "xlat_set without xlat_clear");
        o = *sim;
        o.peer_xlat_set = NULL;
        expect_invalid(&o, "peer_xlat_clear without peer_xlat_set");
        o = *sim;
        o.xlat_set = NULL;
        o.xlat_clear = NULL;
        o.peer_xlat_set = NULL;
        o.peer_xlat_clear = NULL;
        expect_invalid(&o, "no translation: neither xlat_set/xlat_clear nor "
                           "peer_xlat_set/peer_xlat_clear");
        o = *sim;
        o.xlat_set = NULL; /* inbound only (Intel, AMD) is fine */
        o.xlat_clear = NULL;
        assert_true(ntbf_backend_ops_valid(&o, why, sizeof(why)));
        o = *sim;
        o.xlat_get = NULL; /* optional on its own */
        o.fault = NULL;
        o.reset = NULL;
        o.counters = NULL;
        assert_true(ntbf_backend_ops_valid(&o, why, sizeof(why)));
        /* Optional pairs of their own: instances on one machine, link control, config space,
         * host mappings. */
        o = *sim;
        o.destroy = NULL;
        expect_invalid(&o, "create without destroy");
        o = *sim;
        o.link_enable = NULL;
        expect_invalid(&o, "link_disable without link_enable");
        o = *sim;
        o.cfg_write = NULL;
        expect_invalid(&o, "cfg_read without cfg_write");
        o = *sim;
        o.host_unmap = NULL;
        expect_invalid(&o, "host_map without host_unmap");
        o = *dol;
        o.dev_unmap = NULL;
        expect_invalid(&o, "dev_map without dev_unmap");
        o = *sim;
        o.dev_unmap = dol->dev_unmap;
        expect_invalid(&o, "dev_unmap without dev_map");
        /* A callback that needs another. */
        o = *sim;
        o.irq_alloc = NULL;
        o.irq_free = NULL;
        expect_invalid(&o, "irq_trigger without irq_alloc");
        o = *sim;
        o.host_bus = fake_host_bus;
        assert_true(ntbf_backend_ops_valid(&o, why, sizeof(why)));
        o.host_map = NULL;
        o.host_unmap = NULL;
        expect_invalid(&o, "host_bus without host_map");

        /* Pairs. */
        o = *sim;
        o.rid_del = NULL;
        expect_invalid(&o, "rid_add without rid_del");
        o = *sim;
        o.switch_rid_add = NULL;
        expect_invalid(&o, "switch_rid_del without switch_rid_add");
        o = *sim;
        o.unmap_window = NULL;
        expect_invalid(&o, "map_window without unmap_window");
        o = *sim;
        o.mem_alloc = NULL;
        expect_invalid(&o, "mem_free without mem_alloc");
        /* Memory for export mapped by address: a pair, and nothing without mem_alloc. */
        o = *ivs;
        o.mem_unmap = NULL;
        expect_invalid(&o, "mem_map without mem_unmap");
        o = *ivs;
        o.mem_alloc = NULL;
        o.mem_free = NULL;
        expect_invalid(&o, "mem_map without mem_alloc");
        o = *sim;
        o.map_window = NULL;
        o.unmap_window = NULL;
        expect_invalid(&o, "window_write without map_window");
        o = *sim;
        o.window_write = NULL; /* optional with the pair */
        assert_true(ntbf_backend_ops_valid(&o, why, sizeof(why)));
        o = *sim;
        o.msg_read = NULL;
        expect_invalid(&o, "peer_msg_write without msg_read");
        o = *sim;
        o.mcast_leave = NULL;
        expect_invalid(&o, "mcast_join without mcast_leave");
        o = *sim;
        o.dma_poll = NULL;
        expect_invalid(&o, "dma_submit without dma_poll");
        o = *sim;
        o.iommu_unmap = NULL;
        expect_invalid(&o, "iommu_map without iommu_unmap");
        o = *sim;
        o.irq_alloc = NULL;
        expect_invalid(&o, "irq_free without irq_alloc");
        o = *sim;
        o.client_gone = client_gone_stub;
        expect_invalid(&o, "client_gone without serve");

        /* Groups: all or none. */
        o = *sim;
        o.peer_db_set = NULL;
        expect_invalid(&o, "doorbell group incomplete: db_read without peer_db_set (all or none)");
        o = *sim;
        o.db_read = NULL;
        expect_invalid(&o, "doorbell group incomplete: db_clear without db_read (all or none)");
        o = *sim;
        o.peer_spad_write = NULL;
        expect_invalid(&o, "scratchpad group incomplete: spad_read without peer_spad_write (all or "
                           "none)");
        o = *sim;
        o.db_read = NULL;
        o.db_clear = NULL;
        o.db_set_mask = NULL;
        o.db_clear_mask = NULL;
        o.peer_db_set = NULL;
        o.spad_read = NULL;
        o.spad_write = NULL;
        o.peer_spad_read = NULL;
        o.peer_spad_write = NULL;
        o.rid_add = NULL;
        o.rid_del = NULL;
        o.switch_rid_add = NULL;
        o.switch_rid_del = NULL;
        o.map_window = NULL;
        o.unmap_window = NULL;
        o.window_write = NULL;
        o.mem_alloc = NULL;
        o.mem_free = NULL;
        o.peer_msg_write = NULL;
        o.msg_read = NULL;
        o.mcast_join = NULL;
        o.mcast_leave = NULL;
        o.dma_submit = NULL;
        o.dma_poll = NULL;
        o.iommu_map = NULL;
        o.iommu_unmap = NULL;
        o.irq_alloc = NULL;
        o.irq_free = NULL;
        o.irq_trigger = NULL;
        o.create = NULL;
        o.destroy = NULL;
        o.link_enable = NULL;
        o.link_disable = NULL;
        o.mem_map = NULL;
        o.mem_unmap = NULL;
        o.host_map = NULL;
        o.host_unmap = NULL;
        o.host_bus = NULL;
        o.dev_isolate = NULL;
        o.dev_iommu_map = NULL;
        o.dev_iommu_unmap = NULL;
        o.dev_iommu_faults = NULL;
        o.cfg_read = NULL;
        o.cfg_write = NULL;
        o.reset = NULL;
        o.counters = NULL;
        o.xlat_get = NULL;
        o.fault = NULL;
        assert_true(ntbf_backend_ops_valid(&o, why, sizeof(why))); /* the minimum */
}

static void expect_caps_invalid(const struct ntbf_backend_ops *o, const struct ntbf_caps *c,
                                const char *want)
{
        char why[256];
        assert_false(ntbf_caps_valid(o, c, why, sizeof(why)));
        assert_string_equal(why, want);
}

/* ntbf_caps_valid: each rule of backend.h, once broken, with its sentence. */
static void test_caps_valid_rules(void **state)
{
        (void)state;
        struct fab f;
        fab_up(&f, fab_b2b(true));
        struct ntbf_caps good, c;
        char why[256];
        assert_int_equal(f.ops->caps(f.h[0], &good), 0);
        assert_true(ntbf_caps_valid(f.ops, &good, why, sizeof(why)));
        assert_string_equal(why, "valid");
        assert_true(good.flags & NTBF_CAP_LINK_CTRL);
        assert_true(good.flags & NTBF_CAP_RESET);
        assert_true(good.flags & NTBF_CAP_COUNTERS);

        /* requires: a claimed flag has its callbacks. */
        struct ntbf_backend_ops o = *f.ops;
        o.counters = NULL;
        expect_caps_invalid(&o, &good, "NTBF_CAP_COUNTERS claimed without counters");
        o = *f.ops;
        o.reset = NULL;
        expect_caps_invalid(&o, &good, "NTBF_CAP_RESET claimed without reset");
        o = *f.ops;
        o.link_enable = o.link_disable = NULL;
        expect_caps_invalid(&o, &good, "NTBF_CAP_LINK_CTRL claimed without link_enable");
        o = *f.ops;
        o.peer_db_set = NULL;
        expect_caps_invalid(&o, &good, "NTBF_CAP_DOORBELL claimed without peer_db_set");
        c = good;
        c.flags |= NTBF_CAP_DEV_MAP; /* the sim maps no device itself */
        expect_caps_invalid(f.ops, &c, "NTBF_CAP_DEV_MAP claimed without dev_map");
        c = good;
        c.flags |= NTBF_CAP_MEM_PHYS;
        o = *f.ops;
        o.host_map = NULL;
        o.host_unmap = NULL;
        expect_caps_invalid(&o, &c, "NTBF_CAP_MEM_PHYS claimed without host_map");
        o = *f.ops;
        o.mem_alloc = NULL;
        o.mem_free = NULL;
        o.mem_map = NULL;
        o.mem_unmap = NULL;
        c.flags &= ~(uint32_t)NTBF_CAP_MEM;
        expect_caps_invalid(&o, &c, "NTBF_CAP_MEM_PHYS claimed without mem_alloc");
        assert_true(good.flags & NTBF_CAP_MAP_LIVE); /* the sim's mappings follow their slots */
        c = good;
        c.flags &= ~(uint32_t)NTBF_CAP_CPU_MAP;
        expect_caps_invalid(f.ops, &c, "NTBF_CAP_MAP_LIVE claimed without NTBF_CAP_CPU_MAP");
        c = good;
        c.flags &= ~(uint32_t)(NTBF_CAP_COUNTERS | NTBF_CAP_RESET | NTBF_CAP_LINK_CTRL);
        o = *f.ops;
        o.counters = NULL;
        o.reset = NULL;
        o.link_enable = o.link_disable = NULL;
        assert_true(ntbf_caps_valid(&o, &c, why, sizeof(why))); /* optional, not claimed */
        c = good;
        c.flags |= 1u << 30;
        expect_caps_invalid(f.ops, &c, "unknown capability flags 0x40000000");

        /* excludes */
        c = good;
        c.flags |= NTBF_CAP_NO_RID_TABLE;
        expect_caps_invalid(f.ops, &c, "NTBF_CAP_RID_TABLE and NTBF_CAP_NO_RID_TABLE both claimed");
        c = good;
        c.flags |= NTBF_CAP_KERNEL_IOMMU;
        expect_caps_invalid(f.ops, &c, "NTBF_CAP_IOMMU and NTBF_CAP_KERNEL_IOMMU both claimed");
        c = good;
        c.flags &= ~(uint32_t)(NTBF_CAP_XLAT_OUTBOUND | NTBF_CAP_XLAT_INBOUND);
        expect_caps_invalid(f.ops, &c,
                            "neither NTBF_CAP_XLAT_OUTBOUND nor NTBF_CAP_XLAT_INBOUND claimed");

        /* figures */
        c = good;
        c.db_valid_mask = 0;
        expect_caps_invalid(f.ops, &c, "NTBF_CAP_DOORBELL claimed but db_valid_mask is 0");
        c = good;
        c.flags &= ~(uint32_t)NTBF_CAP_SCRATCHPAD;
        expect_caps_invalid(f.ops, &c, "NTBF_CAP_SCRATCHPAD not claimed but scratchpads is 8");
        c = good;
        c.rid_table = 0;
        c.rid_reserved = 0;
        expect_caps_invalid(f.ops, &c, "NTBF_CAP_RID_TABLE claimed with rid_table 0");
        c = good;
        c.rid_reserved = c.rid_table;
        expect_caps_invalid(f.ops, &c,
                            "NTBF_CAP_RID_TABLE claimed but rid_reserved 32 leaves no entry of "
                            "rid_table 32");
        c = good;
        c.flags = (c.flags & ~(uint32_t)NTBF_CAP_RID_TABLE) | NTBF_CAP_NO_RID_TABLE;
        expect_caps_invalid(f.ops, &c,
                            "NTBF_CAP_NO_RID_TABLE claimed with rid_table 32, rid_reserved 2");

        /* windows */
        c = good;
        c.nwindows = 0;
        expect_caps_invalid(f.ops, &c, "0 windows; an adapter has 1 to 8");
        c = good;
        c.windows[0].slot_size /= 2;
        expect_caps_invalid(f.ops, &c,
                            "window 0: 256 slots of 0x80000 bytes do not make its 0x10000000 "
                            "bytes");
        c = good;
        c.windows[0].first_slot = 1;
        expect_caps_invalid(f.ops, &c,
                            "window 0: first_slot 1, but the windows before it have 0 slots");
        c = good;
        c.windows[0].reserved = c.windows[0].slots;
        expect_caps_invalid(f.ops, &c, "window 0: 256 reserved slots leave none of its 256");
        c = good;
        c.windows[0].addr_align = 3 * 4096;
        expect_caps_invalid(f.ops, &c,
                            "window 0: addr_align 0x3000 and size_align 0x100000 must be powers "
                            "of two");
        c = good;
        c.windows[0].size_max = 2 * c.windows[0].slot_size;
        expect_caps_invalid(f.ops, &c,
                            "window 0: size_align 0x100000 <= size_max 0x200000 <= slot_size "
                            "0x100000 does not hold");
        c = good;
        c.nwindows = 2;
        c.windows[1] = c.windows[0];
        c.windows[1].first_slot = c.windows[0].slots;
        c.slots *= 2;
        expect_caps_invalid(f.ops, &c, "windows 0 and 1 overlap");
        c.windows[1].base += c.windows[0].size;
        assert_true(ntbf_caps_valid(f.ops, &c, why, sizeof(why)));
        c.slots--;
        expect_caps_invalid(f.ops, &c, "slots is 511 but the windows have 512");
        fab_down(&f);
}

static void expect_mismatch(const struct ntbf_topo *t, const struct ntbf_caps *c, const char *want)
{
        char why[512];
        assert_false(ntbf_caps_match(t, 0, c, why, sizeof(why)));
        assert_string_equal(why, want);
}

/*
 * ntbf_caps_match: the adapter's figures against the cluster file's, each figure once, with
 * the key that would fix it (what the daemon says when a Dolphin adapter's SCIQuery figures
 * differ from the file).
 */
static void test_caps_match_file(void **state)
{
        (void)state;
        struct fab f;
        fab_up(&f, fab_b2b(true));
        struct ntbf_caps good, c;
        char why[512];
        assert_int_equal(f.ops->caps(f.h[0], &good), 0);
        assert_true(ntbf_caps_match(f.t, 0, &good, why, sizeof(why)));
        assert_string_equal(why, "matches");
#define MISMATCH(text) expect_mismatch(f.t, &c, "adapter a.ntb0: " text)
        c = good;
        c.windows[0].slots *= 2;
        c.windows[0].slot_size /= 2;
        MISMATCH("the backend reports 512 slots in window 0, the cluster file 256; set "
                 "lut_entries: 512 (or slots: 512 in windows:)");
        c = good;
        c.windows[0].size *= 2;
        MISMATCH("the backend reports window 0 of 0x20000000 bytes, the cluster file "
                 "0x10000000; set window: 0x20000000 (or size: in windows:)");
        c = good;
        c.windows[0].addr_align *= 2;
        MISMATCH("window 0: the core plans translations aligned to 0x100000, in multiples of "
                 "0x100000, of up to 0x100000 bytes, but the backend takes addresses aligned "
                 "to 0x200000, sizes in multiples of 0x100000, up to 0x100000");
        c = good;
        c.windows[0].addr_align = c.windows[0].size_align = 4096; /* finer: fine */
        assert_true(ntbf_caps_match(f.t, 0, &c, why, sizeof(why)));
        c = good;
        c.ports = 1;
        MISMATCH("the backend reports 1 ports, the cluster file 2; set ports: 1");
        c = good;
        c.dma_channels = 2;
        MISMATCH("the backend reports 2 DMA channels, the cluster file 4; set dma_channels: 2");
        c = good;
        c.flags &= ~(uint32_t)NTBF_CAP_DMA;
        c.dma_channels = 0;
        MISMATCH("the backend reports 0 DMA channels, the cluster file 4; set dma_channels: 0");
        c = good;
        c.flags = (c.flags & ~(uint32_t)NTBF_CAP_RID_TABLE) | NTBF_CAP_NO_RID_TABLE;
        c.rid_table = c.rid_reserved = 0;
        MISMATCH("the backend reports 0 requester-ID entries, the cluster file 32; set "
                 "rid_table: 0");
        c = good;
        c.flags = (c.flags & ~(uint32_t)NTBF_CAP_XLAT_OUTBOUND) | NTBF_CAP_XLAT_INBOUND;
        MISMATCH("the backend programs translations inbound, the cluster file says xlat: "
                 "outbound; set xlat: inbound");
        c = good;
        c.db_valid_mask >>= 1;
        MISMATCH("the backend reports 15 doorbell bits, the cluster file 16; set doorbells: 15");
        c = good;
        c.flags &= ~(uint32_t)NTBF_CAP_IOMMU;
        MISMATCH("traffic into node a goes through no IOMMU the backend knows of, but the "
                 "cluster file says iommu: true; set iommu: false");
#undef MISMATCH
        assert_false(ntbf_caps_match(f.t, f.t->nadapters, &good, why, sizeof(why)));
        fab_down(&f);
}

/* ---- instances ------------------------------------------------------------------------------ */

static void test_instance_lifecycle(void **state)
{
        (void)state;
        struct fab f;
        struct ntbf_topo *t = fab_b2b(true);
        uint32_t d = ntbf_topo_add_device(t, 0, "nvme0");
        t->devices[d].bus = 3;
        ntbf_sim_defaults(&t->devices[d].sim, NTBF_SIM_NVME);
        t->devices[d].sim.capacity = 16 * MiB;
        ntbf_device_apply_sim(&t->devices[d]);
        fab_up(&f, t);
        char why[512], path[512];
        /* Same topology again: nothing happens. */
        assert_int_equal(ntbf_sim_fabric_create(t, f.dir, why, sizeof(why)), 0);
        snprintf(path, sizeof(path), "%s/images/a-nvme0.img", f.dir);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_size, 16 * MiB);
        /* A different topology is refused, by create and by attach, with a clear sentence. */
        struct ntbf_topo *t2 = fab_b2b(true);
        t2->nodes[1].ram = 512 * MiB;
        fx_finalize_ok(t2);
        assert_int_equal(ntbf_sim_fabric_create(t2, f.dir, why, sizeof(why)), NTBF_EEXISTS);
        assert_non_null(strstr(why, "was created from a different topology"));
        assert_non_null(strstr(why, "destroy it"));
        struct ntbf_backend *b2 = NULL;
        struct ntbf_backend_env env = {t2, f.dir, NTBF_NONE};
        assert_int_equal(ntbf_sim_attach(&env, &b2, why, sizeof(why)), NTBF_ECONFIG);
        assert_non_null(strstr(why, "different topology"));
        assert_int_equal(f.ops->open(&env, &b2, NULL, 0), NTBF_ECONFIG);
        /* No instance at all. */
        env.dir = "/dev/shm/ntbfab-test-does-not-exist";
        assert_int_equal(ntbf_sim_attach(&env, &b2, why, sizeof(why)), NTBF_ENOTFOUND);
        ntbf_topo_free(t2);
        /* A process acting as node a may not probe b's adapter. */
        env = (struct ntbf_backend_env){t, f.dir, 0};
        assert_int_equal(f.ops->open(&env, &b2, NULL, 0), 0);
        struct ntbf_adapter_h *h;
        assert_int_equal(f.ops->probe(b2, 1, &h), -EPERM);
        assert_int_equal(f.ops->probe(b2, 0, &h), 0);
        f.ops->release(h);
        f.ops->close(b2);
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), 0);
        /* Destroy keeps the images and nothing else. */
        for (uint32_t a = 0; a < 16; a++)
                if (f.h[a])
                        f.ops->release(f.h[a]);
        f.ops->close(f.b);
        assert_int_equal(ntbf_sim_fabric_destroy(f.dir), 0);
        assert_int_equal(stat(path, &st), 0);
        snprintf(path, sizeof(path), "%s/fabric", f.dir);
        assert_int_equal(access(path, F_OK), -1);
        snprintf(path, sizeof(path), "%s/ram-a", f.dir);
        assert_int_equal(access(path, F_OK), -1);
        snprintf(path, sizeof(path), "%s/images/a-nvme0.img", f.dir);
        unlink(path);
        snprintf(path, sizeof(path), "%s/images", f.dir);
        rmdir(path);
        rmdir(f.dir);
        ntbf_topo_free(t);
}

/* ---- registers and events ------------------------------------------------------------------- */

struct seen {
        int links, dbs, msgs, resets;
        uint32_t port, peer, midx, value;
        bool up;
        uint64_t bits;
};

static void ev_link(void *ctx, uint32_t port, bool up)
{
        struct seen *s = ctx;
        s->links++;
        s->port = port;
        s->up = up;
}
static void ev_db(void *ctx, uint32_t vector, uint64_t bits)
{
        struct seen *s = ctx;
        (void)vector;
        s->dbs++;
        s->bits = bits;
}
static void ev_msg(void *ctx, uint32_t peer, uint32_t midx, uint32_t value)
{
        struct seen *s = ctx;
        s->msgs++;
        s->peer = peer;
        s->midx = midx;
        s->value = value;
}
static void ev_reset(void *ctx)
{
        ((struct seen *)ctx)->resets++;
}

static const struct ntbf_event_ops evops = {ev_link, ev_db, ev_msg, ev_reset};

/* Wait for the handle's event fd, then dispatch. */
static int pump(struct fab *f, uint32_t a)
{
        fab_wait_fd(f->ops->event_fd(f->h[a]), 2000);
        return f->ops->process_events(f->h[a]);
}

static void test_doorbells_spads_events(void **state)
{
        (void)state;
        struct fab f;
        struct ntbf_topo *t = fab_b2b(false);
        t->adapters[1].p.messages = 4; /* pxh830 has none; IDT-like messages on b */
        t->adapters[0].p.messages = 4;
        fab_up(&f, t);
        struct seen sb = {0};
        assert_int_equal(f.ops->set_events(f.h[1], &evops, &sb), 0);
        struct ntbf_caps c;
        assert_int_equal(f.ops->caps(f.h[1], &c), 0);
        assert_int_equal(c.db_valid_mask, 0xffff);
        assert_int_equal(c.scratchpads, 8);

        /* Doorbells: masked bits wait, unmasking raises them. */
        assert_int_equal(f.ops->db_set_mask(f.h[1], 0x2), 0);
        assert_int_equal(f.ops->peer_db_set(f.h[0], 1, 0x3), 0);
        assert_int_equal(pump(&f, 1), 1);
        assert_int_equal(sb.dbs, 1);
        assert_int_equal(sb.bits, 0x1);
        uint64_t bits;
        assert_int_equal(f.ops->db_read(f.h[1], &bits), 0);
        assert_int_equal(bits, 0x3);
        assert_int_equal(f.ops->db_clear(f.h[1], 0x1), 0);
        assert_int_equal(f.ops->db_clear_mask(f.h[1], 0x2), 0);
        assert_int_equal(pump(&f, 1), 1);
        assert_int_equal(sb.bits, 0x2);
        assert_int_equal(f.ops->peer_db_set(f.h[0], 1, 1u << 16), -EINVAL);
        assert_int_equal(f.ops->peer_db_set(f.h[0], 0, 1), -EINVAL); /* not a peer */

        /* Scratchpads. */
        assert_int_equal(f.ops->peer_spad_write(f.h[0], 1, 3, 0xdeadbeef), 0);
        uint32_t v;
        assert_int_equal(f.ops->spad_read(f.h[1], 3, &v), 0);
        assert_int_equal(v, 0xdeadbeef);
        assert_int_equal(f.ops->spad_write(f.h[1], 4, 7), 0);
        assert_int_equal(f.ops->peer_spad_read(f.h[0], 1, 4, &v), 0);
        assert_int_equal(v, 7);
        assert_int_equal(f.ops->spad_read(f.h[1], 8, &v), -EINVAL);

        /* Messages: delivered as msg_event; a full register refuses the next one. */
        assert_int_equal(f.ops->peer_msg_write(f.h[0], 1, 2, 42), 0);
        assert_int_equal(f.ops->peer_msg_write(f.h[0], 1, 2, 43), -EBUSY);
        assert_int_equal(pump(&f, 1), 1);
        assert_int_equal(sb.msgs, 1);
        assert_int_equal(sb.peer, 0);
        assert_int_equal(sb.midx, 2);
        assert_int_equal(sb.value, 42);
        assert_int_equal(f.ops->peer_msg_write(f.h[0], 1, 2, 43), 0);
        uint32_t peer;
        assert_int_equal(f.ops->set_events(f.h[1], NULL, NULL), 0);
        assert_int_equal(f.ops->msg_read(f.h[1], 2, &peer, &v), 0);
        assert_int_equal(v, 43);
        assert_int_equal(f.ops->msg_read(f.h[1], 2, &peer, &v), -ENOMSG);
        assert_int_equal(f.ops->set_events(f.h[1], &evops, &sb), 0);

        /* Link events at both ends; peers unreachable while down. */
        struct seen sa = {0};
        assert_int_equal(f.ops->set_events(f.h[0], &evops, &sa), 0);
        assert_int_equal(f.ops->link_disable(f.h[0], 0), 0);
        assert_int_equal(pump(&f, 1), 1);
        assert_int_equal(sb.links, 1);
        assert_false(sb.up);
        assert_int_equal(pump(&f, 0), 1);
        assert_int_equal(sa.links, 1);
        assert_int_equal(f.ops->peer_db_set(f.h[0], 1, 1), -ENOTCONN);
        assert_int_equal(f.ops->link_enable(f.h[1], 0), 0);
        assert_int_equal(pump(&f, 0), 1);
        assert_true(sa.up);
        assert_int_equal(pump(&f, 1), 1);
        assert_true(sb.up);
        assert_int_equal(f.ops->link_state(f.h[0], 1, &sa.up), 0); /* port 1: no cable */
        assert_false(sa.up);
        assert_int_equal(f.ops->link_disable(f.h[0], 1), -ENOTCONN);

        /* Reset: slots, requester IDs (not the CPU's), doorbells, masks, scratchpads. */
        fab_slot(&f, 1, 4, 0, 16 * MiB);
        struct ntbf_rid r = {1, 0x0300, 0xffff};
        assert_int_equal(f.ops->rid_add(f.h[1], &r, NULL), 0);
        assert_int_equal(f.ops->db_set_mask(f.h[1], 0xff), 0);
        assert_int_equal(f.ops->reset(f.h[1]), 0);
        assert_int_equal(pump(&f, 1), 1);
        assert_int_equal(sb.resets, 1);
        struct ntbf_xlat x;
        bool valid = true;
        assert_int_equal(f.ops->xlat_get(f.h[1], 4, &x, &valid), 0);
        assert_false(valid);
        assert_int_equal(f.ops->rid_del(f.h[1], &r), -ENOENT);
        assert_int_equal(f.ops->db_read(f.h[1], &bits), 0);
        assert_int_equal(bits, 0);
        assert_int_equal(f.ops->spad_read(f.h[1], 4, &v), 0);
        assert_int_equal(v, 0);
        uint8_t one = 1;
        assert_int_equal(ntbf_sim_write(f.b, 1, NTBF_NONE, 0, fab_win(&f, 1, 0, 0), &one, 1, NULL),
                         NTBF_EUNPROGRAMMED);
        char why[256];
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), 0);
        fab_down(&f);
}

static void test_xlat_programming(void **state)
{
        (void)state;
        struct fab f;
        struct ntbf_topo *t = ntbf_topo_new("mixed", "mixed.yaml");
        uint32_t a = ntbf_topo_add_node(t, "a", 4), b = ntbf_topo_add_node(t, "b", 8);
        t->nodes[a].ram = t->nodes[b].ram = 256 * MiB;
        t->nodes[a].iommu = t->nodes[b].iommu = false;
        uint32_t ia = ntbf_topo_add_adapter(t, a, "ntb0", ntbf_adapter_preset("intel-gen3"));
        uint32_t ib = ntbf_topo_add_adapter(t, b, "ntb0", ntbf_adapter_preset("intel-gen3"));
        ntbf_topo_add_link(t, fx_ap(ia, 0), fx_ap(ib, 0));
        fab_up(&f, t);
        struct ntbf_caps c;
        assert_int_equal(f.ops->caps(f.h[0], &c), 0);
        assert_true(c.flags & NTBF_CAP_XLAT_INBOUND);
        assert_false(c.flags & NTBF_CAP_XLAT_OUTBOUND);
        /* BAR2 and BAR4: two windows of one slot each, at addresses aligned to the BAR. */
        assert_int_equal(c.slots, 2);
        assert_int_equal(c.nwindows, 2);
        for (int w = 0; w < 2; w++) {
                assert_int_equal(c.windows[w].first_slot, (uint32_t)w);
                assert_int_equal(c.windows[w].slots, 1);
                assert_int_equal(c.windows[w].size, 256 * MiB);
                assert_int_equal(c.windows[w].addr_align, 256 * MiB);
                assert_int_equal(c.windows[w].size_align, 4096);
                assert_int_equal(c.windows[w].size_max, 256 * MiB);
                assert_int_equal(c.windows[w].base % (256 * MiB), 0);
        }
        assert_true(c.windows[0].base != c.windows[1].base);
        assert_int_equal(c.rid_table, 0);
        assert_true(c.flags & NTBF_CAP_NO_RID_TABLE);
        /* Intel: the window owner cannot program; the buffer owner programs the peer's slot. */
        struct ntbf_xlat x = {1, 1, 0, NTBF_NONE, 256 * MiB};
        assert_int_equal(f.ops->xlat_set(f.h[0], 0, &x), NTBF_EUNSUPPORTED);
        assert_int_equal(f.ops->peer_xlat_set(f.h[1], 0, 1, 12 * MiB, 256 * MiB),
                         -EINVAL);                                           /* alignment */
        assert_int_equal(f.ops->peer_xlat_set(f.h[1], 0, 1, 0, 0), -EINVAL); /* no size */
        assert_int_equal(f.ops->peer_xlat_set(f.h[1], 0, 1, 0, 256 * MiB + 4096),
                         -EINVAL); /* past size_max */
        assert_int_equal(f.ops->peer_xlat_set(f.h[1], 0, 1, 0, 16 * MiB + 100),
                         -EINVAL); /* not in pages */
        /* A translation of 16 MiB of the 256 MiB slot: the rest of the slot is unprogrammed. */
        assert_int_equal(f.ops->peer_xlat_set(f.h[1], 0, 1, 0, 16 * MiB), 0);
        bool valid;
        assert_int_equal(f.ops->xlat_get(f.h[0], 1, &x, &valid), 0);
        assert_true(valid);
        assert_int_equal(x.size, 16 * MiB);
        uint8_t u[4] = {9, 8, 7, 6}, back[4];
        assert_int_equal(
            ntbf_sim_write(f.b, 0, NTBF_NONE, 0x4200, fab_win(&f, 0, 1, 16 * MiB - 4), u, 4, NULL),
            0);
        assert_memory_equal(fab_ram(&f, 1, 16 * MiB - 4, 4), u, 4);
        struct ntbf_counters c0, c1;
        assert_int_equal(f.ops->counters(f.h[0], &c0), 0);
        assert_int_equal(
            ntbf_sim_write(f.b, 0, NTBF_NONE, 0x4200, fab_win(&f, 0, 1, 16 * MiB), u, 4, NULL),
            NTBF_EUNPROGRAMMED);
        assert_int_equal(
            ntbf_sim_read(f.b, 0, NTBF_NONE, 0x4200, fab_win(&f, 0, 1, 16 * MiB), back, 4, NULL),
            NTBF_EUNPROGRAMMED);
        assert_int_equal(f.ops->counters(f.h[0], &c1), 0);
        assert_int_equal(c1.drop_unprogrammed - c0.drop_unprogrammed, 2);
        assert_memory_equal(back, ((uint8_t[4]){0xff, 0xff, 0xff, 0xff}), 4);
        assert_memory_equal(fab_ram(&f, 1, 16 * MiB, 4), ((uint8_t[4]){0}), 4);
        assert_int_equal(f.ops->peer_xlat_set(f.h[1], 0, 1, 0, 256 * MiB), 0);
        assert_int_equal(f.ops->xlat_get(f.h[0], 1, &x, &valid), 0);
        assert_true(valid);
        assert_int_equal(x.dst_node, 1);
        assert_int_equal(x.dst_adapter, 1);
        assert_int_equal(x.addr, 0);
        assert_int_equal(x.size, 256 * MiB);
        assert_int_equal(x.mcast_group, NTBF_NONE);
        /* No requester table: nothing is enforced. */
        uint8_t v[4] = {1, 2, 3, 4};
        assert_int_equal(
            ntbf_sim_write(f.b, 0, NTBF_NONE, 0x4200, fab_win(&f, 0, 1, 12 * MiB), v, 4, NULL), 0);
        assert_memory_equal(fab_ram(&f, 1, 12 * MiB, 4), v, 4);
        assert_int_equal(f.ops->peer_xlat_clear(f.h[0], 0, 1), -EPERM); /* not into a's host */
        assert_int_equal(f.ops->peer_xlat_clear(f.h[1], 0, 1), 0);
        assert_int_equal(f.ops->xlat_get(f.h[0], 1, &x, &valid), 0);
        assert_false(valid);
        struct ntbf_rid r = {0, 0x300, 0xffff};
        assert_int_equal(f.ops->rid_add(f.h[0], &r, NULL), NTBF_EUNSUPPORTED);
        fab_down(&f);
}

static void test_xlat_checks(void **state)
{
        (void)state;
        struct fab f;
        struct ntbf_topo *t = fab_star(3, false);
        fab_up(&f, t);
        struct ntbf_xlat x = {1, 1, 3 * MiB, NTBF_NONE, MiB};
        assert_int_equal(f.ops->xlat_set(f.h[0], 256, &x), -EINVAL);
        x.size = MiB / 2;
        assert_int_equal(f.ops->xlat_set(f.h[0], 0, &x), -EINVAL); /* not a whole slot */
        x.size = 2 * MiB;
        assert_int_equal(f.ops->xlat_set(f.h[0], 0, &x), -EINVAL); /* more than a slot */
        x.size = MiB;
        x.addr = 3 * MiB + 4096;
        assert_int_equal(f.ops->xlat_set(f.h[0], 0, &x), -EINVAL); /* not slot aligned */
        x.addr = UINT64_C(1) << 48;
        assert_int_equal(f.ops->xlat_set(f.h[0], 0, &x), -EINVAL); /* beyond any sim domain */
        x = (struct ntbf_xlat){2, 1, 0, NTBF_NONE, MiB};
        assert_int_equal(f.ops->xlat_set(f.h[0], 0, &x), -EINVAL); /* adapter 1 is not on node 2 */
        x = (struct ntbf_xlat){0, 0, 0, NTBF_NONE, MiB};
        assert_int_equal(f.ops->xlat_set(f.h[0], 0, &x), NTBF_ENOPATH); /* own host */
        x = (struct ntbf_xlat){NTBF_NONE, NTBF_NONE, 0, 64, MiB};
        assert_int_equal(f.ops->xlat_set(f.h[0], 0, &x), -EINVAL); /* 64 groups: 0..63 */
        x.mcast_group = 63;
        assert_int_equal(f.ops->xlat_set(f.h[0], 0, &x), 0);
        bool valid;
        assert_int_equal(f.ops->xlat_get(f.h[0], 0, &x, &valid), 0);
        assert_true(valid);
        assert_int_equal(x.mcast_group, 63);
        fab_down(&f);
}

/*
 * host_bus on the simulated fabric: the bus address of any mapping of the node's RAM, the
 * backend's own (host_map, mem_alloc) or one the process made of the RAM file, with RAM past
 * the 32-bit MMIO hole placed from 4 GiB (the file holds it right after the low RAM).
 */
static void test_host_bus(void **state)
{
        (void)state;
        struct ntbf_topo *t = fab_b2b(false);
        t->nodes[0].ram = UINT64_C(0x80000000) + 64 * NTBF_MiB; /* 2 GiB low, 64 MiB high */
        struct fab f;
        fab_up(&f, t);
        struct ntbf_adapter_h *h = f.h[0];
        uint64_t lo = 0x100000, hi = UINT64_C(0x100000000) + 0x3000, bus = 0;
        void *p;
        assert_int_equal(f.ops->host_map(h, lo + 0x10, 64, &p), 0);
        assert_int_equal(f.ops->host_bus(h, p, 64, &bus), 0);
        assert_int_equal(bus, lo + 0x10);
        assert_int_equal(f.ops->host_map(h, hi, 4096, &p), 0);
        assert_int_equal(f.ops->host_bus(h, (uint8_t *)p + 8, 8, &bus), 0);
        assert_int_equal(bus, hi + 8);
        assert_int_equal(f.ops->host_unmap(h, p, 4096), 0);
        /* Memory for export is RAM, at the bus address mem_alloc reported. */
        struct ntbf_mem m;
        assert_int_equal(f.ops->mem_alloc(h, 8192, 4096, &m), 0);
        assert_int_equal(f.ops->host_bus(h, (uint8_t *)m.addr + 4096, 4096, &bus), 0);
        assert_int_equal(bus, m.bus_addr + 4096);
        assert_int_equal(f.ops->mem_free(h, &m), 0);
        /* A mapping of the RAM file this process made itself (as from ntbf_dma_fd): the high
         * RAM sits in the file right after the 2 GiB below the hole. */
        char path[512];
        snprintf(path, sizeof(path), "%s/ram-a", f.dir);
        int fd = open(path, O_RDWR);
        assert_true(fd >= 0);
        uint8_t *q = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                          (off_t)(UINT64_C(0x80000000) + 0x2000));
        assert_true(q != MAP_FAILED);
        close(fd);
        assert_int_equal(f.ops->host_bus(h, q + 0x18, 16, &bus), 0);
        assert_int_equal(bus, UINT64_C(0x100000000) + 0x2018);
        assert_int_equal(f.ops->host_bus(h, q + 0x18, 8192, &bus), -EFAULT); /* past it */
        munmap(q, 8192);
        /* Not the node's memory. */
        char heap[32];
        assert_int_equal(f.ops->host_bus(h, heap, sizeof(heap), &bus), -EFAULT);
        assert_int_equal(f.ops->host_bus(f.h[1], (uint8_t *)p, 8, &bus), -EFAULT); /* node b */
        fab_down(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_ops_valid_rules),
            cmocka_unit_test(test_caps_valid_rules),
            cmocka_unit_test(test_caps_match_file),
            cmocka_unit_test(test_instance_lifecycle),
            cmocka_unit_test(test_doorbells_spads_events),
            cmocka_unit_test(test_xlat_programming),
            cmocka_unit_test(test_xlat_checks),
            cmocka_unit_test(test_host_bus),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
