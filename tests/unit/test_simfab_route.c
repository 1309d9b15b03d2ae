/* tests/unit/test_simfab_route.c: routing of transactions through the simulated fabric. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ntbfab/error.h"
#include "fixtures.h"
#include "simfab_fx.h"

#define MiB NTBF_MiB

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
        for (size_t i = 0; i < n; i++)
                p[i] = (uint8_t)(seed + i * 7);
}

static bool all_ones(const uint8_t *p, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (p[i] != 0xff)
                        return false;
        return true;
}

static void test_b2b_one_hop(void **state)
{
        (void)state;
        struct fab f;
        fab_up(&f, fab_b2b(false));
        fab_slot(&f, 0, 3, 1, 16 * MiB);
        uint8_t out[64], in[64];
        fill(out, sizeof(out), 1);
        struct ntbf_sim_trace tr;
        assert_int_equal(ntbf_sim_write(f.b, 0, NTBF_NONE, NTBF_SIM_RID_CPU,
                                        fab_win(&f, 0, 3, 0x100), out, sizeof(out), &tr),
                         0);
        assert_memory_equal(fab_ram(&f, 1, 16 * MiB + 0x100, 64), out, 64);
        assert_int_equal(tr.status, 0);
        assert_int_equal(tr.pieces, 1);
        assert_int_equal(tr.out_adapter, 0);
        assert_int_equal(tr.in_adapter, 1);
        assert_int_equal(tr.dst_node, 1);
        assert_int_equal(tr.dst_addr, 16 * MiB + 0x100);
        assert_int_equal(tr.dst_kind, NTBF_REGION_RAM);
        assert_int_equal(tr.latency_ns, 132 + 132);
        assert_int_equal(tr.path.nhops, 5);
        assert_int_equal(tr.path.hops[0].kind, NTBF_HOP_ROOT);
        assert_int_equal(tr.path.hops[1].kind, NTBF_HOP_ADAPTER);
        assert_int_equal(tr.path.hops[1].obj, 0);
        assert_int_equal(tr.path.hops[2].kind, NTBF_HOP_LINK);
        assert_int_equal(tr.path.hops[3].kind, NTBF_HOP_ADAPTER);
        assert_int_equal(tr.path.hops[3].obj, 1);
        assert_int_equal(tr.path.hops[4].kind, NTBF_HOP_ROOT);
        assert_int_equal(tr.path.hops[4].obj, 1);
        assert_int_equal(ntbf_sim_read(f.b, 0, NTBF_NONE, 0, fab_win(&f, 0, 3, 0x100), in, 64, &tr),
                         0);
        assert_memory_equal(in, out, 64);
        assert_int_equal(tr.latency_ns, 2 * 264); /* a read is a round trip */
        assert_int_equal(fab_ctr(&f, 0).tx, 2);
        assert_int_equal(fab_ctr(&f, 1).rx, 2);
        assert_int_equal(fab_ctr(&f, 1).tx, 0);
        fab_down(&f);
}

static void test_switch_two_hops(void **state)
{
        (void)state;
        struct fab f;
        fab_up(&f, fab_star(3, false));
        fab_slot(&f, 1, 0, 2, 32 * MiB);
        uint8_t out[128];
        fill(out, sizeof(out), 9);
        uint64_t w = fab_win(&f, 1, 0, 0x40);
        /* Switch tables start empty: the CPU of n1 is not allowed through sw0 yet. */
        assert_int_equal(ntbf_sim_write(f.b, 1, NTBF_NONE, 0, w, out, sizeof(out), NULL),
                         NTBF_ENORID);
        assert_int_equal(fab_ctr(&f, 1).drop_no_rid, 1);
        assert_int_equal(fab_ctr(&f, 1).tx, 0);
        assert_false(memcmp(fab_ram(&f, 2, 32 * MiB + 0x40, 128), out, 128) == 0);
        struct ntbf_rid cpu = {1, 0x0000, 0xffff};
        assert_int_equal(f.ops->switch_rid_add(f.h[1], 0, &cpu), 0);
        struct ntbf_sim_trace tr;
        assert_int_equal(ntbf_sim_write(f.b, 1, NTBF_NONE, 0, w, out, sizeof(out), &tr), 0);
        assert_memory_equal(fab_ram(&f, 2, 32 * MiB + 0x40, 128), out, 128);
        assert_int_equal(tr.latency_ns, 132 + 170 + 132);
        assert_int_equal(tr.path.nhops, 7);
        assert_int_equal(tr.path.hops[3].kind, NTBF_HOP_SWITCH);
        assert_int_equal(tr.path.hops[3].in_port, 1);
        assert_int_equal(tr.path.hops[3].out_port, 2);
        assert_int_equal(tr.path.hops[5].obj, 2);
        assert_int_equal(fab_ctr(&f, 2).rx, 1);
        /* Another node's CPU (n0) is still refused on the switch. */
        fab_slot(&f, 0, 0, 2, 32 * MiB);
        assert_int_equal(ntbf_sim_write(f.b, 0, NTBF_NONE, 0, fab_win(&f, 0, 0, 0), out, 8, NULL),
                         NTBF_ENORID);
        assert_int_equal(fab_ctr(&f, 0).drop_no_rid, 1);
        assert_int_equal(f.ops->switch_rid_del(f.h[1], 0, &cpu), 0);
        assert_int_equal(f.ops->switch_rid_del(f.h[1], 0, &cpu), -ENOENT);
        assert_int_equal(ntbf_sim_write(f.b, 1, NTBF_NONE, 0, w, out, 8, NULL), NTBF_ENORID);
        fab_down(&f);
}

static void test_drop_reasons(void **state)
{
        (void)state;
        struct ntbf_topo *t = fab_b2b(false);
        uint32_t dev = fab_add_dev(t, 0, "dev", 3, 1);
        struct fab f;
        fab_up(&f, t);
        uint8_t buf[256], out[256];
        fill(out, sizeof(out), 3);

        /* Unprogrammed slot: read all ones, counted on the window's adapter. */
        memset(buf, 0, sizeof(buf));
        assert_int_equal(
            ntbf_sim_read(f.b, 0, NTBF_NONE, 0, fab_win(&f, 0, 5, 0), buf, sizeof(buf), NULL),
            NTBF_EUNPROGRAMMED);
        assert_true(all_ones(buf, sizeof(buf)));
        assert_int_equal(fab_ctr(&f, 0).drop_unprogrammed, 1);

        /* A device missing from the adapter's requester table: the write is lost. */
        fab_slot(&f, 0, 3, 1, 16 * MiB);
        uint8_t *dst = fab_ram(&f, 1, 16 * MiB, 256);
        struct ntbf_sim_trace tr;
        assert_int_equal(
            ntbf_sim_write(f.b, 0, dev, 0x0300, fab_win(&f, 0, 3, 0), out, sizeof(out), &tr),
            NTBF_ENORID);
        assert_int_equal(tr.drop_adapter, 0);
        assert_true(dst[0] == 0 && dst[255] == 0);
        assert_int_equal(fab_ctr(&f, 0).drop_no_rid, 1);
        assert_int_equal(fab_ctr(&f, 1).rx, 0);
        struct ntbf_rid r = {0, 0x0300, 0xffff};
        assert_int_equal(f.ops->rid_add(f.h[0], &r, NULL), 0);
        assert_int_equal(
            ntbf_sim_write(f.b, 0, dev, 0x0300, fab_win(&f, 0, 3, 0), out, sizeof(out), &tr), 0);
        assert_memory_equal(dst, out, sizeof(out));
        assert_int_equal(tr.latency_ns, 264); /* the device has no hop latency of its own */

        /* Link down: drop_link_down on the way out, reads all ones. */
        struct ntbf_fault lf = {NTBF_FAULT_LINK_DOWN, 0};
        assert_int_equal(f.ops->fault(f.b, &lf), 0);
        assert_int_equal(ntbf_sim_read(f.b, 0, dev, 0x0300, fab_win(&f, 0, 3, 0), buf, 64, NULL),
                         NTBF_ELINKDOWN);
        assert_true(all_ones(buf, 64));
        assert_int_equal(fab_ctr(&f, 0).drop_link_down, 1);
        bool up = true;
        assert_int_equal(f.ops->link_state(f.h[1], 0, &up), 0);
        assert_false(up);
        lf.kind = NTBF_FAULT_LINK_UP;
        assert_int_equal(f.ops->fault(f.b, &lf), 0);
        assert_int_equal(ntbf_sim_read(f.b, 0, dev, 0x0300, fab_win(&f, 0, 3, 0), buf, 64, NULL),
                         0);
        assert_memory_equal(buf, out, 64);

        /* Far-side master abort: nothing claims 0x80000000 in b. Counted on b's adapter. */
        fab_slot(&f, 0, 6, 1, 0x80000000);
        assert_int_equal(ntbf_sim_read(f.b, 0, dev, 0x0300, fab_win(&f, 0, 6, 0), buf, 64, &tr),
                         NTBF_EUNREACHABLE);
        assert_true(all_ones(buf, 64));
        assert_int_equal(tr.drop_adapter, 1);
        assert_int_equal(fab_ctr(&f, 1).master_abort, 1);
        assert_int_equal(fab_ctr(&f, 0).master_abort, 0);

        /* Near-side master abort: no adapter involved, no counter. */
        assert_int_equal(ntbf_sim_read(f.b, 0, NTBF_NONE, 0, 0x90000000, buf, 64, &tr),
                         NTBF_EUNREACHABLE);
        assert_int_equal(tr.drop_adapter, NTBF_NONE);
        assert_int_equal(fab_ctr(&f, 0).master_abort, 0);

        /* No transit through a third host: a slot into b's own window master-aborts. */
        fab_slot(&f, 0, 7, 1, f.t->adapters[1].window_base);
        assert_int_equal(ntbf_sim_write(f.b, 0, NTBF_NONE, 0, fab_win(&f, 0, 7, 0), out, 8, NULL),
                         NTBF_EUNREACHABLE);
        assert_int_equal(fab_ctr(&f, 1).master_abort, 2);
        fab_down(&f);
}

/* Latency inside hosts: a device in an expansion chassis reaches its chassis peer through the
 * switch alone, RAM and the NTB through the uplink and the root complex (docs/model.md). */
static void test_chassis_latency(void **state)
{
        (void)state;
        struct ntbf_topo *t = fab_b2b(false);
        t->nodes[0].root_ns = 100;
        t->nodes[1].root_ns = 50;
        uint32_t c = ntbf_topo_add_chassis(t, 0, "exp0");
        uint32_t dev = fab_add_dev(t, 0, "dev", 3, 1);
        uint32_t peer = fab_add_dev(t, 0, "peer", 4, 1);
        uint32_t slot = fab_add_dev(t, 0, "slot", 5, 1);
        t->devices[dev].chassis = t->devices[peer].chassis = c;
        t->devices[slot].hop_ns = 7;
        struct fab f;
        fab_up(&f, t);
        uint8_t buf[64];
        struct ntbf_sim_trace tr;
        uint64_t peer_bar = f.t->devices[peer].bars[0].addr;
        assert_int_equal(ntbf_sim_read(f.b, 0, dev, 0x0300, peer_bar, buf, 64, &tr), 0);
        assert_int_equal(tr.latency_ns, 2 * 150);
        assert_int_equal(tr.dst_kind, NTBF_REGION_BAR);
        assert_int_equal(tr.path.nhops, 3);
        assert_int_equal(tr.path.hops[1].kind, NTBF_HOP_CHASSIS);
        assert_int_equal(tr.path.latency_ns, 150);
        /* RAM of its own host: switch, uplink, root complex. */
        assert_int_equal(ntbf_sim_read(f.b, 0, dev, 0x0300, 16 * MiB, buf, 64, &tr), 0);
        assert_int_equal(tr.latency_ns, 2 * (150 + 264 + 100));
        assert_int_equal(tr.path.latency_ns, 150 + 264 + 100);
        /* A device in a host slot reaches the chassis through the root complex. */
        assert_int_equal(ntbf_sim_write(f.b, 0, slot, 0x0500, peer_bar, buf, 64, &tr), 0);
        assert_int_equal(tr.latency_ns, 7 + 100 + 264 + 150);
        assert_int_equal(tr.path.latency_ns, tr.latency_ns);
        /* Across the NTB: both root complexes, the chassis on the way out. */
        fab_slot(&f, 0, 3, 1, 16 * MiB);
        struct ntbf_rid r = {0, 0x0300, 0xffff};
        assert_int_equal(f.ops->rid_add(f.h[0], &r, NULL), 0);
        assert_int_equal(
            ntbf_sim_write(f.b, 0, dev, 0x0300, fab_win(&f, 0, 3, 0), buf, sizeof(buf), &tr), 0);
        assert_int_equal(tr.latency_ns, 150 + 264 + 100 + 132 + 132 + 50);
        assert_int_equal(tr.path.latency_ns, tr.latency_ns);
        /* The borrower's CPU into the chassis device's BAR, as a driver rings a doorbell. */
        fab_slot(&f, 1, 2, 0, peer_bar & ~(f.t->adapters[1].lut_entry_size - 1));
        uint64_t w = fab_win(&f, 1, 2, peer_bar & (f.t->adapters[1].lut_entry_size - 1));
        assert_int_equal(ntbf_sim_write(f.b, 1, NTBF_NONE, 0, w, buf, 4, &tr), 0);
        assert_int_equal(tr.latency_ns, 50 + 132 + 132 + 100 + 264 + 150);
        assert_int_equal(tr.path.latency_ns, tr.latency_ns);
        fab_down(&f);
}

static void test_split_at_slots(void **state)
{
        (void)state;
        struct fab f;
        fab_up(&f, fab_b2b(false));
        fab_slot(&f, 0, 7, 1, 64 * MiB);
        fab_slot(&f, 0, 8, 1, 96 * MiB);
        uint8_t out[8192], in[8192];
        fill(out, sizeof(out), 5);
        struct ntbf_sim_trace tr;
        uint64_t w = fab_win(&f, 0, 7, MiB - 4096);
        assert_int_equal(ntbf_sim_write(f.b, 0, NTBF_NONE, 0, w, out, sizeof(out), &tr), 0);
        assert_int_equal(tr.pieces, 2);
        assert_memory_equal(fab_ram(&f, 1, 65 * MiB - 4096, 4096), out, 4096);
        assert_memory_equal(fab_ram(&f, 1, 96 * MiB, 4096), out + 4096, 4096);
        /* Half into slot 9 (unprogrammed): the read returns data then all ones. */
        fab_slot(&f, 0, 8, 1, 96 * MiB);
        assert_int_equal(
            ntbf_sim_read(f.b, 0, NTBF_NONE, 0, fab_win(&f, 0, 8, MiB - 4096), in, sizeof(in), &tr),
            NTBF_EUNPROGRAMMED);
        assert_int_equal(tr.pieces, 2);
        assert_memory_equal(in, fab_ram(&f, 1, 97 * MiB - 4096, 4096), 4096);
        assert_true(all_ones(in + 4096, 4096));
        fab_down(&f);
}

static void test_iommu(void **state)
{
        (void)state;
        struct fab f;
        fab_up(&f, fab_b2b(true));
        fab_slot(&f, 0, 2, 1, 256 * MiB); /* an IOVA: b has an IOMMU */
        uint8_t out[8192];
        fill(out, sizeof(out), 11);
        uint64_t w = fab_win(&f, 0, 2, 0);
        struct ntbf_sim_trace tr;
        assert_int_equal(ntbf_sim_write(f.b, 0, NTBF_NONE, 0, w, out, 64, &tr), NTBF_EIOMMU_FAULT);
        assert_int_equal(fab_ctr(&f, 1).iommu_fault, 1);
        assert_int_equal(tr.drop_adapter, 1);
        /* Two IOVA pages onto scattered physical pages. */
        assert_int_equal(f.ops->iommu_map(f.h[1], 256 * MiB, 32 * MiB, 4096), 0);
        assert_int_equal(f.ops->iommu_map(f.h[1], 256 * MiB + 4096, 8 * MiB, 4096), 0);
        assert_int_equal(f.ops->iommu_map(f.h[1], 256 * MiB, 40 * MiB, 4096), -EEXIST);
        assert_int_equal(f.ops->iommu_map(f.h[1], 256 * MiB + 1, 40 * MiB, 4096), -EINVAL);
        assert_int_equal(ntbf_sim_write(f.b, 0, NTBF_NONE, 0, w, out, sizeof(out), &tr), 0);
        assert_int_equal(tr.pieces, 2);
        assert_int_equal(tr.dst_addr, 32 * MiB);
        assert_memory_equal(fab_ram(&f, 1, 32 * MiB, 4096), out, 4096);
        assert_memory_equal(fab_ram(&f, 1, 8 * MiB, 4096), out + 4096, 4096);
        assert_int_equal(f.ops->iommu_unmap(f.h[1], 256 * MiB, 8192), 0);
        assert_int_equal(ntbf_sim_write(f.b, 0, NTBF_NONE, 0, w + 4096, out, 64, NULL),
                         NTBF_EIOMMU_FAULT);
        assert_int_equal(fab_ctr(&f, 1).iommu_fault, 2);
        /* After an unmap the same IOVA maps again. */
        assert_int_equal(f.ops->iommu_map(f.h[1], 256 * MiB, 40 * MiB, 8192), 0);
        assert_int_equal(ntbf_sim_write(f.b, 0, NTBF_NONE, 0, w, out, 64, NULL), 0);
        assert_memory_equal(fab_ram(&f, 1, 40 * MiB, 64), out, 64);
        fab_down(&f);
}

static void test_msi_to_vector(void **state)
{
        (void)state;
        struct ntbf_topo *t = fab_b2b(true);
        uint32_t dev = fab_add_dev(t, 0, "dev", 3, 1);
        struct fab f;
        fab_up(&f, t);
        struct ntbf_irq irq;
        assert_int_equal(f.ops->irq_alloc(f.h[1], &irq), 0);
        assert_int_equal(irq.addr, NTBF_MSI_BASE);
        /* The MSI window: a slot to b's interrupt range (not translated by b's IOMMU). */
        fab_slot(&f, 0, 9, 1, irq.addr);
        struct ntbf_rid r = {0, 0x0300, 0xffff};
        assert_int_equal(f.ops->rid_add(f.h[0], &r, NULL), 0);
        uint32_t data = irq.data;
        struct ntbf_sim_trace tr;
        assert_int_equal(ntbf_sim_write(f.b, 0, dev, 0x0300, fab_win(&f, 0, 9, 0), &data, 4, &tr),
                         0);
        assert_int_equal(tr.dst_kind, NTBF_REGION_MSI);
        assert_int_equal(fab_wait_fd(irq.fd, 2000), 1);
        /* Another vector's data does not signal this one. */
        uint32_t other = irq.data + 1;
        assert_int_equal(ntbf_sim_write(f.b, 0, dev, 0x0300, fab_win(&f, 0, 9, 0), &other, 4, NULL),
                         0);
        assert_int_equal(fab_wait_fd(irq.fd, 50), 0);
        /* Reading an MSI address is a master abort. */
        assert_int_equal(ntbf_sim_read(f.b, 0, dev, 0x0300, fab_win(&f, 0, 9, 0), &data, 4, NULL),
                         NTBF_EUNREACHABLE);
        assert_int_equal(f.ops->irq_free(f.h[1], &irq), 0);
        fab_down(&f);
}

static void test_multicast(void **state)
{
        (void)state;
        struct fab f;
        fab_up(&f, fab_star(4, false));
        struct ntbf_caps c;
        assert_int_equal(f.ops->caps(f.h[0], &c), 0);
        assert_true(c.flags & NTBF_CAP_MCAST);
        assert_int_equal(c.mcast_groups, 64);
        for (uint32_t m = 1; m <= 3; m++)
                assert_int_equal(f.ops->mcast_join(f.h[m], 2, 48 * MiB + m * MiB, MiB), 0);
        assert_int_equal(f.ops->mcast_join(f.h[1], 2, 48 * MiB, MiB), NTBF_EBUSY);
        struct ntbf_xlat x = {NTBF_NONE, NTBF_NONE, 0, 2, MiB};
        assert_int_equal(f.ops->xlat_set(f.h[0], 0, &x), 0);
        struct ntbf_rid cpu = {0, 0, 0xffff};
        assert_int_equal(f.ops->switch_rid_add(f.h[0], 0, &cpu), 0);
        uint8_t out[256];
        fill(out, sizeof(out), 13);
        assert_int_equal(
            ntbf_sim_write(f.b, 0, NTBF_NONE, 0, fab_win(&f, 0, 0, 0x80), out, sizeof(out), NULL),
            0);
        for (uint32_t m = 1; m <= 3; m++) {
                assert_memory_equal(fab_ram(&f, m, 48 * MiB + m * MiB + 0x80, 256), out, 256);
                assert_int_equal(fab_ctr(&f, m).rx, 1);
        }
        assert_int_equal(fab_ctr(&f, 0).tx, 1);
        /* A member that left gets nothing more. */
        assert_int_equal(f.ops->mcast_leave(f.h[3], 2), 0);
        fill(out, sizeof(out), 17);
        assert_int_equal(
            ntbf_sim_write(f.b, 0, NTBF_NONE, 0, fab_win(&f, 0, 0, 0x80), out, sizeof(out), NULL),
            0);
        assert_memory_equal(fab_ram(&f, 1, 49 * MiB + 0x80, 256), out, 256);
        assert_memory_equal(fab_ram(&f, 2, 50 * MiB + 0x80, 256), out, 256);
        assert_false(memcmp(fab_ram(&f, 3, 51 * MiB + 0x80, 256), out, 256) == 0);
        /* Multicast is for writes. */
        uint8_t in[16];
        assert_int_equal(ntbf_sim_read(f.b, 0, NTBF_NONE, 0, fab_win(&f, 0, 0, 0), in, 16, NULL),
                         NTBF_EUNREACHABLE);
        assert_true(all_ones(in, 16));
        fab_down(&f);
}

static void test_rid_mask(void **state)
{
        (void)state;
        struct ntbf_topo *t = fab_b2b(false);
        uint32_t mf = fab_add_dev(t, 0, "mf", 5, 4);
        uint32_t other = fab_add_dev(t, 0, "other", 6, 1);
        struct fab f;
        fab_up(&f, t);
        fab_slot(&f, 0, 1, 1, 8 * MiB);
        /* One entry for all functions of the device (the PLX RID LUT aliases functions). */
        struct ntbf_rid r = {0, 0x0500, 0xfff8};
        assert_int_equal(f.ops->rid_add(f.h[0], &r, NULL), 0);
        uint8_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        uint64_t w = fab_win(&f, 0, 1, 0);
        for (uint16_t fn = 0; fn < 4; fn++)
                assert_int_equal(ntbf_sim_write(f.b, 0, mf, (uint16_t)(0x0500 + fn), w, v, 8, NULL),
                                 0);
        assert_int_equal(ntbf_sim_write(f.b, 0, other, 0x0600, w, v, 8, NULL), NTBF_ENORID);
        assert_int_equal(ntbf_sim_write(f.b, 0, mf, 0x0508, w, v, 8, NULL), NTBF_ENORID);
        assert_int_equal(fab_ctr(&f, 0).drop_no_rid, 2);
        /* An entry of another host never matches this host's requesters. */
        struct ntbf_rid foreign = {1, 0x0600, 0xffff};
        assert_int_equal(f.ops->rid_add(f.h[0], &foreign, NULL), -EINVAL);
        fab_down(&f);
}

static void test_table_capacity(void **state)
{
        (void)state;
        struct fab f;
        fab_up(&f, fab_star(2, false));
        /* pxh830: 32 entries, 2 held by the CPU since creation. */
        struct ntbf_caps c;
        assert_int_equal(f.ops->caps(f.h[0], &c), 0);
        assert_int_equal(c.rid_table, 32);
        assert_int_equal(c.rid_reserved, 2);
        struct ntbf_rid r = {0, 0, 0xffff};
        assert_int_equal(f.ops->rid_add(f.h[0], &r, NULL), -EEXIST); /* the CPU's own entry */
        assert_int_equal(f.ops->rid_del(f.h[0], &r), -EPERM);
        for (uint16_t i = 0; i < 30; i++) {
                r.rid = (uint16_t)(0x1000 + (i << 3));
                assert_int_equal(f.ops->rid_add(f.h[0], &r, NULL), 0);
        }
        r.rid = 0x2000;
        assert_int_equal(f.ops->rid_add(f.h[0], &r, NULL), -ENOSPC);
        r.rid = 0x1000;
        assert_int_equal(f.ops->rid_add(f.h[0], &r, NULL), -EEXIST);
        assert_int_equal(f.ops->rid_del(f.h[0], &r), 0);
        r.rid = 0x2000;
        assert_int_equal(f.ops->rid_add(f.h[0], &r, NULL), 0);
        /* mxs824: 256 entries per port, on every connected port at once. */
        struct ntbf_rid s = {0, 0, 0xffff};
        for (uint32_t i = 0; i < 256; i++) {
                s.node = i % 2;
                s.rid = (uint16_t)(i / 2 << 3);
                assert_int_equal(f.ops->switch_rid_add(f.h[0], 0, &s), 0);
        }
        s.rid = 0x7ff8;
        assert_int_equal(f.ops->switch_rid_add(f.h[0], 0, &s), -ENOSPC);
        char why[256];
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), 0);
        fab_down(&f);
}

static void test_cpu_map_follows_routing(void **state)
{
        (void)state;
        struct fab f;
        fab_up(&f, fab_b2b(false));
        struct ntbf_mem m;
        assert_int_equal(f.ops->mem_alloc(f.h[1], 64 * 1024, 0, &m), 0);
        uint64_t E = MiB;
        fab_slot(&f, 0, 10, 1, m.bus_addr & ~(E - 1));
        void *va;
        assert_int_equal(f.ops->map_window(f.h[0], 0, 10 * E, E, 0, &va), 0);
        uint8_t *p = (uint8_t *)va + (m.bus_addr & (E - 1));
        uint8_t out[4096];
        fill(out, sizeof(out), 21);
        memcpy(p, out, sizeof(out));
        assert_memory_equal(m.addr, out, sizeof(out));
        assert_memory_equal(fab_ram(&f, 1, m.bus_addr, 4096), out, 4096);
        /* Link down: the range reads all ones (our own change remaps at once). */
        struct ntbf_fault lf = {NTBF_FAULT_LINK_DOWN, 0};
        assert_int_equal(f.ops->fault(f.b, &lf), 0);
        assert_true(all_ones(p, 4096));
        memset(p, 0, 64); /* lost to everyone else */
        assert_memory_equal(m.addr, out, 64);
        lf.kind = NTBF_FAULT_LINK_UP;
        assert_int_equal(f.ops->fault(f.b, &lf), 0);
        assert_memory_equal(p, out, sizeof(out));
        assert_int_equal(f.ops->xlat_clear(f.h[0], 10), 0);
        assert_true(all_ones(p, 64));
        assert_int_equal(f.ops->unmap_window(f.h[0], va, E), 0);
        assert_int_equal(f.ops->mem_free(f.h[1], &m), 0);
        fab_down(&f);
}

static void test_host_death_and_revival(void **state)
{
        (void)state;
        struct fab f;
        fab_up(&f, fab_b2b(false));
        struct ntbf_mem m;
        assert_int_equal(f.ops->mem_alloc(f.h[1], 4096, 0, &m), 0);
        memset(m.addr, 0x5a, 4096);
        fab_slot(&f, 0, 2, 1, m.bus_addr & ~(MiB - 1));
        fab_slot(&f, 1, 7, 0, 8 * MiB);
        void *va;
        assert_int_equal(f.ops->map_window(f.h[0], 0, 2 * MiB, MiB, 0, &va), 0);
        uint8_t *p = (uint8_t *)va + (m.bus_addr & (MiB - 1));
        assert_int_equal(p[0], 0x5a);
        struct ntbf_fault hf = {NTBF_FAULT_HOST_DEATH, 1};
        assert_int_equal(f.ops->fault(f.b, &hf), 0);
        /* b's links went down: a sees it on the way out, and its mapping reads all ones. */
        bool up = true;
        assert_int_equal(f.ops->link_state(f.h[0], 0, &up), 0);
        assert_false(up);
        uint8_t buf[16];
        assert_int_equal(ntbf_sim_read(f.b, 0, NTBF_NONE, 0, fab_win(&f, 0, 2, 0), buf, 16, NULL),
                         NTBF_ELINKDOWN);
        assert_true(all_ones(p, 64));
        hf.kind = NTBF_FAULT_HOST_REVIVE;
        assert_int_equal(f.ops->fault(f.b, &hf), 0);
        /* A reboot: b's memory is gone and zero, its adapter reset; a's slot survives. */
        assert_int_equal(f.ops->link_state(f.h[0], 0, &up), 0);
        assert_true(up);
        assert_int_equal(p[0], 0);
        assert_int_equal(*fab_ram(&f, 1, m.bus_addr, 1), 0);
        struct ntbf_sim_owned o;
        assert_int_equal(ntbf_sim_owned(f.b, 1, 0, &o), 0);
        assert_int_equal(o.mem, 0);
        struct ntbf_xlat x;
        bool valid;
        assert_int_equal(f.ops->xlat_get(f.h[1], 7, &x, &valid), 0);
        assert_false(valid);
        assert_int_equal(f.ops->xlat_get(f.h[0], 2, &x, &valid), 0);
        assert_true(valid);
        memset(buf, 0x33, sizeof(buf));
        assert_int_equal(ntbf_sim_write(f.b, 0, NTBF_NONE, 0,
                                        fab_win(&f, 0, 2, m.bus_addr & (MiB - 1)), buf, 16, NULL),
                         0);
        assert_int_equal(p[0], 0x33);
        /* A link taken down on purpose stays down through a death and revival. */
        struct ntbf_fault lf = {NTBF_FAULT_LINK_DOWN, 0};
        assert_int_equal(f.ops->fault(f.b, &lf), 0);
        hf.kind = NTBF_FAULT_HOST_DEATH;
        assert_int_equal(f.ops->fault(f.b, &hf), 0);
        hf.kind = NTBF_FAULT_HOST_REVIVE;
        assert_int_equal(f.ops->fault(f.b, &hf), 0);
        assert_int_equal(f.ops->link_state(f.h[0], 0, &up), 0);
        assert_false(up);
        char why[256];
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), 0);
        assert_int_equal(f.ops->unmap_window(f.h[0], va, MiB), 0);
        fab_down(&f);
}

static void test_vf_bars_and_p2p(void **state)
{
        (void)state;
        struct ntbf_topo *t = fab_b2b(true);
        uint32_t d = fab_add_dev(t, 1, "sriov", 6, 1);
        t->devices[d].vfs = 4;
        t->devices[d].vf_bars[0] = 8192;
        struct fab f;
        fab_up(&f, t);
        const struct ntbf_device *dev = &f.t->devices[d];
        /* VF 2's BAR0 is its own 8 KiB of the VF BAR array; reached peer-to-peer from a, past
         * b's IOMMU (inbound traffic to BARs is not translated). */
        uint64_t vf2 = ntbf_device_bar_addr(dev, 1 + 2, 0);
        assert_int_equal(vf2, dev->vf_bar_addr[0] + 2 * 8192);
        fab_slot(&f, 0, 4, 1, vf2 & ~(MiB - 1));
        uint8_t out[32];
        fill(out, sizeof(out), 41);
        struct ntbf_sim_trace tr;
        assert_int_equal(ntbf_sim_write(f.b, 0, NTBF_NONE, 0, fab_win(&f, 0, 4, vf2 & (MiB - 1)),
                                        out, sizeof(out), &tr),
                         0);
        assert_int_equal(tr.dst_kind, NTBF_REGION_VF_BAR);
        assert_int_equal(tr.path.to.kind, NTBF_EP_DEVICE);
        assert_int_equal(tr.path.to.device, d);
        assert_memory_equal(fab_ram(&f, 1, vf2, 32), out, 32);
        /* VF i's routing ID: PF0's + 0x80 + i; its config region exists. */
        assert_int_equal(ntbf_device_rid(dev, 3), 0x0600 + 0x80 + 2);
        assert_non_null(ntbf_sim_cfg(f.b, d, 4));
        assert_null(ntbf_sim_cfg(f.b, d, 5));
        fab_down(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_b2b_one_hop),
            cmocka_unit_test(test_switch_two_hops),
            cmocka_unit_test(test_drop_reasons),
            cmocka_unit_test(test_split_at_slots),
            cmocka_unit_test(test_chassis_latency),
            cmocka_unit_test(test_iommu),
            cmocka_unit_test(test_msi_to_vector),
            cmocka_unit_test(test_multicast),
            cmocka_unit_test(test_rid_mask),
            cmocka_unit_test(test_table_capacity),
            cmocka_unit_test(test_cpu_map_follows_routing),
            cmocka_unit_test(test_host_death_and_revival),
            cmocka_unit_test(test_vf_bars_and_p2p),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
