/* tests/integration/test_sim_accel.c: the simulated accelerator lent across the NTB: copy-engine
 * transfers between the borrower's RAM and the device memory (BAR2) in the lender, both ways. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ntbfab/error.h"
#include "accel.h"
#include "cfgspace.h"
#include "devtest_rig.h"
#include "lendhand.h"

/*
 * The borrower process maps acc0's BAR0 (registers, descriptor ring) and BAR2 (device
 * memory) through its window and keeps its buffers in 4 MiB pieces of its RAM that only its
 * IOMMU makes contiguous; the copy engine in the lender reaches them through the lender's
 * DMA window. Bytes are checked by the borrower (its RAM, and device memory read through
 * the NTB) and by this process (device memory, directly).
 */

#define POOL  (48 * MiB)
#define SRC   (1 * MiB) /* pool offsets */
#define DST   (24 * MiB)
#define MEM_A 0 /* BAR2 offsets: RAM -> device, device -> RAM */
#define MEM_B (16 * MiB)

struct acc {
        struct rig g;
        struct bproc b;
        uint64_t bar2;  /* BAR2 address in the lender */
        uint8_t *mem;   /* BAR2 memory, seen directly */
        uint32_t descs; /* descriptors completed so far */
        uint64_t bytes; /* bytes copied so far */
};

static void acc_up(struct acc *a)
{
        memset(a, 0, sizeof(*a));
        struct rig *g = &a->g;
        rig_up(g);
        const struct ntbf_device *d = &g->t->devices[g->acc];
        a->bar2 = ntbf_device_bar_addr(d, 0, 2);
        assert_int_equal(ntbf_device_bar_size(d, 0, 2), RIG_ACC_MEM);
        void *p;
        assert_int_equal(ntbf_sim_phys_ptr(g->b, g->ln, a->bar2, RIG_ACC_MEM, &p), 0);
        a->mem = p;
        bp_spawn(&a->b, g);
        bp_setup(&a->b, g, 0, POOL, 4 * MiB);
        bp_ok(&a->b, "mapbar 1 %u 0x%llx %llu", RIG_BSLOT_ACC,
              (unsigned long long)ntbf_device_bar_addr(d, 0, 0),
              (unsigned long long)ntbf_device_bar_size(d, 0, 0));
        bp_ok(&a->b, "mapbar 2 %u 0x%llx %llu", RIG_BSLOT_MEM, (unsigned long long)a->bar2,
              (unsigned long long)RIG_ACC_MEM);
        bp_ok(&a->b, "cfgon %u", g->acc);
        const char *r = bp_ok(&a->b, "acc-enable");
        assert_int_equal(bp_num(r, 1), NTBF_ACCEL_ID);
        assert_int_equal(bp_num(r, 2), RIG_ACC_MEM);
        assert_int_equal(bp_num(r, 3), a->bar2);
}

static void acc_down(struct acc *a)
{
        bp_quit(&a->b);
        rig_down(&a->g);
}

/* One descriptor; returns its status word after checking the engine's counters. */
static uint32_t copy(struct acc *a, uint64_t src, uint64_t dst, uint64_t len, bool ok)
{
        const char *r = bp_ok(&a->b, "acc-copy 0x%llx 0x%llx %llu", (unsigned long long)src,
                              (unsigned long long)dst, (unsigned long long)len);
        uint32_t st = (uint32_t)bp_num(r, 1);
        a->descs++;
        if (ok)
                a->bytes += len;
        assert_int_equal(bp_num(r, 2), a->descs % NTBF_ACCEL_RING_SIZE); /* HEAD */
        assert_int_equal(bp_num(r, 3), a->descs);                        /* COMPLETED */
        if (ok) {
                if (st != NTBF_ACCEL_ST_DONE)
                        fail_msg("copy of %llu bytes: status 0x%x (%s)", (unsigned long long)len,
                                 st, r);
                assert_int_equal(bp_num(r, 6), a->bytes); /* BYTES */
        }
        return st;
}

static void mem_has(struct acc *a, uint64_t off, uint64_t len, uint64_t seed)
{
        int64_t at = lh_pattern_check(seed, 0, a->mem + off, len);
        if (at >= 0)
                fail_msg("device memory byte %llu of a %llu-byte copy is 0x%02x",
                         (unsigned long long)at, (unsigned long long)len, a->mem[off + at]);
}

static void test_copy_both_directions(void **state)
{
        (void)state;
        static struct acc a; /* static: rig_teardown finds it after a failure */
        acc_up(&a);
        struct rig *g = &a.g;
        uint64_t dev = rig_region_dev(g, 0);
        static const struct {
                uint64_t len, so, mo, mo2, doff;
        } cases[] = {
            {4096, 0, 0, 0, 0},
            {MiB, 0, 0, 0, 0},
            {16 * MiB, 0, 0, 0, 0},
            {1000003, 3, 1, 7, 5}, /* unaligned length and addresses */
        };
        struct ntbf_counters l0 = rig_ctr(g, g->hl);
        for (unsigned i = 0; i < 4; i++) {
                uint64_t len = cases[i].len, seed_a = 1000 + i, seed_b = 2000 + i;
                uint64_t so = SRC + cases[i].so, mo = MEM_A + cases[i].mo;
                uint64_t mo2 = MEM_B + cases[i].mo2, doff = DST + cases[i].doff;

                /* Borrower RAM -> device memory: the engine reads across the NTB. */
                memset(a.mem + MEM_A, 0, 16 * MiB + 16);
                bp_ok(&a.b, "pfill %llu %llu %llu", (unsigned long long)so, (unsigned long long)len,
                      (unsigned long long)seed_a);
                copy(&a, dev + so, a.bar2 + mo, len, true);
                mem_has(&a, mo, len, seed_a);
                if (mo > MEM_A)
                        assert_int_equal(a.mem[mo - 1], 0);
                assert_int_equal(a.mem[mo + len], 0);
                /* The borrower's CPU sees the same through its window. */
                bp_ok(&a.b, "mcheck %llu %llu %llu", (unsigned long long)mo,
                      (unsigned long long)len, (unsigned long long)seed_a);

                /* Device memory -> borrower RAM: written by the borrower's CPU through the
                 * window, copied by the engine across the NTB into the borrower's pieces. */
                bp_ok(&a.b, "mfill %llu %llu %llu", (unsigned long long)mo2,
                      (unsigned long long)len, (unsigned long long)seed_b);
                mem_has(&a, mo2, len, seed_b);
                bp_ok(&a.b, "pfillb %llu %llu 0", (unsigned long long)(DST - 16),
                      (unsigned long long)(len + 64));
                copy(&a, a.bar2 + mo2, dev + doff, len, true);
                bp_ok(&a.b, "pcheck %llu %llu %llu", (unsigned long long)doff,
                      (unsigned long long)len, (unsigned long long)seed_b);
                bp_ok(&a.b, "pcheckb %llu %llu 0", (unsigned long long)(DST - 16),
                      (unsigned long long)(doff - (DST - 16)));
                bp_ok(&a.b, "pcheckb %llu 16 0", (unsigned long long)(doff + len));
                print_message("%8llu bytes both ways: ok\n", (unsigned long long)len);
        }
        struct ntbf_counters l1 = rig_ctr(g, g->hl), b1 = rig_ctr(g, g->hb);
        /* 2 x (4 KiB + 1 MiB + 16 MiB + ~1 MiB) crossed in pieces of at most a page. */
        assert_true(l1.tx - l0.tx >= 2 * (18 * MiB) / 4096);
        assert_int_equal(l1.drop_unprogrammed + l1.drop_no_rid + l1.master_abort, 0);
        assert_int_equal(b1.iommu_fault + b1.master_abort, 0);
        acc_down(&a);
}

static void test_unreachable_source(void **state)
{
        (void)state;
        static struct acc a; /* static: rig_teardown finds it after a failure */
        acc_up(&a);
        struct rig *g = &a.g;
        uint64_t dev = rig_region_dev(g, 0);
        const uint64_t len = 65536;
        bp_ok(&a.b, "pfillb %llu %llu 0x5a", (unsigned long long)DST, (unsigned long long)len);
        uint8_t *cfg = ntbf_sim_cfg(g->b, g->acc, 0);
        assert_non_null(cfg);
        assert_int_equal(ntbf_sim_cfg_read(cfg, NTBF_PCI_STATUS, 2) & NTBF_PCI_STS_RMA, 0);

        /* A source in a slot of the lender's window that was never programmed. */
        const struct ntbf_adapter *la = &g->t->adapters[g->la];
        uint64_t nowhere = la->window_base + 3 * la->lut_entry_size;
        struct ntbf_counters l0 = rig_ctr(g, g->hl), b0 = rig_ctr(g, g->hb);
        uint32_t st = copy(&a, nowhere, dev + DST, len, false);
        assert_int_equal(st & 0xff, NTBF_ACCEL_ST_ERROR);
        assert_int_equal(NTBF_ACCEL_ST_REASON(st), NTBF_ACCEL_ERR_SRC);
        const char *r = bp_ok(&a.b, "acc-copy 0 0 0"); /* an empty descriptor: the registers */
        a.descs++;
        assert_int_equal(bp_num(r, 1), NTBF_ACCEL_ST_DONE);
        assert_int_equal(bp_num(r, 4), 1); /* ERRORS */
        uint32_t last = (uint32_t)bp_num(r, 5);
        assert_int_equal(last & 0xff, NTBF_ACCEL_ERR_SRC);
        assert_int_equal(last >> 16, 0); /* descriptor 0 */
        bp_ok(&a.b, "pcheckb %llu %llu 0x5a", (unsigned long long)DST, (unsigned long long)len);
        struct ntbf_counters l1 = rig_ctr(g, g->hl);
        assert_true(l1.drop_unprogrammed > l0.drop_unprogrammed);
        /* The read's Unsupported Request is recorded as on hardware. */
        assert_true(ntbf_sim_cfg_read(cfg, NTBF_PCI_STATUS, 2) & NTBF_PCI_STS_RMA);

        /* A source inside the DMA window where the borrower's IOMMU maps nothing. */
        uint64_t unmapped = rig_region_dev(g, 12);
        st = copy(&a, unmapped, dev + DST, len, false);
        assert_int_equal(st & 0xff, NTBF_ACCEL_ST_ERROR);
        assert_int_equal(NTBF_ACCEL_ST_REASON(st), NTBF_ACCEL_ERR_SRC);
        bp_ok(&a.b, "pcheckb %llu %llu 0x5a", (unsigned long long)DST, (unsigned long long)len);
        struct ntbf_counters b2 = rig_ctr(g, g->hb);
        assert_true(b2.iommu_fault > b0.iommu_fault); /* counted where it came in */
        r = bp_ok(&a.b, "acc-copy 0 0 0");
        a.descs++;
        assert_int_equal(bp_num(r, 4), 2);
        assert_int_equal(bp_num(r, 5), NTBF_ACCEL_ERR_SRC | 2u << 16); /* descriptor 2 */

        /* The engine goes on: a good copy after the failures. */
        bp_ok(&a.b, "pfill %llu %llu 77", (unsigned long long)SRC, (unsigned long long)len);
        copy(&a, dev + SRC, dev + DST, len, true);
        bp_ok(&a.b, "pcheck %llu %llu 77", (unsigned long long)DST, (unsigned long long)len);
        acc_down(&a);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_copy_both_directions, rig_teardown),
            cmocka_unit_test_teardown(test_unreachable_source, rig_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
