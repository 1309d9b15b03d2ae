/* tests/unit/test_simfab_isolate.c: lender-side isolation in the sim (dev_isolate group). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ntbfab/error.h"
#include "simfab_fx.h"

/* The isolation group is all or none, and the sim offers all of it. */
static void test_ops_valid_group(void **state)
{
        (void)state;
        const struct ntbf_backend_ops *sim = ntbf_backend_find("sim");
        char why[256];
        assert_true(ntbf_backend_ops_valid(sim, why, sizeof(why)));
        assert_non_null(sim->dev_isolate);
        struct ntbf_backend_ops o = *sim;
        o.dev_iommu_unmap = NULL;
        assert_false(ntbf_backend_ops_valid(&o, why, sizeof(why)));
        assert_string_equal(why, "device isolation group incomplete: dev_isolate without "
                                 "dev_iommu_unmap (all or none)");
        o.dev_isolate = NULL;
        o.dev_iommu_map = NULL;
        /* The fault counter is about isolation domains: nothing without them. */
        assert_false(ntbf_backend_ops_valid(&o, why, sizeof(why)));
        assert_string_equal(why, "dev_iommu_faults without dev_isolate");
        o.dev_iommu_faults = NULL;
        assert_true(ntbf_backend_ops_valid(&o, why, sizeof(why)));
}

/* A device's DMA reaches only what its domain maps: translated, identity, or a fault. */
static void test_isolated_dma(void **state)
{
        (void)state;
        struct ntbf_topo *t = fab_b2b(true);
        uint32_t d = fab_add_dev(t, 0, "dev", 5, 2);
        uint32_t other = fab_add_dev(t, 0, "other", 6, 1);
        struct fab f;
        fab_up(&f, t);
        struct ntbf_caps c;
        assert_int_equal(f.ops->caps(f.h[0], &c), 0);
        assert_true(c.flags & NTBF_CAP_IOMMU); /* where isolation works (docs/sim.md) */
        uint16_t rid = (uint16_t)ntbf_device_rid(&t->devices[d], 0);
        uint16_t orid = (uint16_t)ntbf_device_rid(&t->devices[other], 0);
        struct ntbf_rid r = {0, rid, 0xfff8}; /* both functions */

        uint8_t *ram = fab_ram(&f, 0, 0x200000, 0x3000);
        memset(ram, 0x11, 0x3000);
        uint8_t buf[64], ones[64];
        memset(ones, 0xff, sizeof(ones));

        /* Not isolated: host-physical. */
        assert_int_equal(ntbf_sim_read(f.b, 0, d, rid, 0x200000, buf, 16, NULL), 0);
        assert_int_equal(buf[0], 0x11);

        assert_int_equal(f.ops->dev_isolate(f.h[0], &r, true), 0);
        /* Nothing mapped: a fault, counted on the function, the data untouched. */
        memset(buf, 0x22, sizeof(buf));
        assert_int_equal(ntbf_sim_write(f.b, 0, d, rid, 0x200000, buf, 16, NULL),
                         NTBF_EIOMMU_FAULT);
        assert_int_equal(ram[0], 0x11);
        assert_int_equal(ntbf_sim_read(f.b, 0, d, rid, 0x200000, buf, 16, NULL), NTBF_EIOMMU_FAULT);
        assert_memory_equal(buf, ones, 16);
        uint64_t faults = 0;
        assert_int_equal(ntbf_sim_dev_iommu_faults(f.b, d, 0, &faults), 0);
        assert_int_equal(faults, 2);
        /* Another device of the host is not affected. */
        assert_int_equal(ntbf_sim_read(f.b, 0, other, orid, 0x200000, buf, 16, NULL), 0);

        /* Identity and translated pages. */
        assert_int_equal(f.ops->dev_iommu_map(f.h[0], &r, 0x200000, 0x200000, 0x1000), 0);
        assert_int_equal(f.ops->dev_iommu_map(f.h[0], &r, 0x900000, 0x202000, 0x1000), 0);
        assert_int_equal(f.ops->dev_iommu_map(f.h[0], &r, 0x900000, 0x202000, 0x1000), -EEXIST);
        assert_int_equal(ntbf_sim_read(f.b, 0, d, rid, 0x200000, buf, 16, NULL), 0);
        assert_int_equal(buf[0], 0x11);
        memset(buf, 0x33, 16);
        /* Function 1 shares the domain (the entry covers both functions). */
        assert_int_equal(ntbf_sim_write(f.b, 0, d, (uint16_t)(rid + 1), 0x900010, buf, 16, NULL),
                         0);
        assert_int_equal(ram[0x2010], 0x33);
        /* A transfer crossing into an unmapped page: the mapped part lands, the rest faults. */
        memset(buf, 0x44, 32);
        assert_int_equal(ntbf_sim_write(f.b, 0, d, rid, 0x200ff0, buf, 32, NULL),
                         NTBF_EIOMMU_FAULT);
        assert_int_equal(ram[0xff0], 0x44);
        assert_int_equal(ram[0x1000], 0x11);

        /* Unmap, leave isolation: the domain is dropped, DMA is host-physical again. */
        assert_int_equal(f.ops->dev_iommu_unmap(f.h[0], &r, 0x900000, 0x1000), 0);
        assert_int_equal(ntbf_sim_read(f.b, 0, d, rid, 0x900000, buf, 16, NULL), NTBF_EIOMMU_FAULT);
        assert_int_equal(f.ops->dev_isolate(f.h[0], &r, false), 0);
        assert_int_equal(ntbf_sim_read(f.b, 0, d, rid, 0x202000, buf, 16, NULL), 0);
        assert_int_equal(f.ops->dev_isolate(f.h[0], &r, true), 0);
        assert_int_equal(ntbf_sim_read(f.b, 0, d, rid, 0x200000, buf, 16, NULL), NTBF_EIOMMU_FAULT);

        /* Only the host's own requesters; unknown ones are named. */
        struct ntbf_rid far = {1, rid, 0xfff8}, none = {0, 0x7700, 0xffff};
        assert_int_equal(f.ops->dev_isolate(f.h[0], &far, true), -EINVAL);
        assert_int_equal(f.ops->dev_isolate(f.h[0], &none, true), -ENOENT);
        char why[256];
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), 0);
        fab_down(&f);
}

/* A host without an IOMMU cannot isolate its devices. */
static void test_no_iommu(void **state)
{
        (void)state;
        struct ntbf_topo *t = fab_b2b(false);
        uint32_t d = fab_add_dev(t, 0, "dev", 5, 1);
        struct fab f;
        fab_up(&f, t);
        struct ntbf_caps c;
        assert_int_equal(f.ops->caps(f.h[0], &c), 0);
        assert_false(c.flags & (NTBF_CAP_IOMMU | NTBF_CAP_DEV_IOMMU));
        struct ntbf_rid r = {0, (uint16_t)ntbf_device_rid(&t->devices[d], 0), 0xfff8};
        assert_int_equal(f.ops->dev_isolate(f.h[0], &r, true), NTBF_EUNSUPPORTED);
        fab_down(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_ops_valid_group),
            cmocka_unit_test(test_isolated_dma),
            cmocka_unit_test(test_no_iommu),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
