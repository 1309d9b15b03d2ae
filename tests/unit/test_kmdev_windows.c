/* tests/unit/test_kmdev_windows.c: the DMA windows of a VM's memory (daemon/kmdev.c, article
 * section 5.2) on synthetic guest layouts: the ranges ntbfab_mdev found pinned, split at 4 GiB
 * into a low and a high window, each aligned out to the window granularity. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kern.h"
#include "ntbfab_lend.h"

#define MIB   (UINT64_C(1) << 20)
#define GIB   (UINT64_C(1) << 30)
#define ALIGN (2 * MIB)
#define REACH (UINT64_C(1) << 48)

static int split(const struct ntbfab_lend_mdev_range *r, uint32_t n,
                 struct ntbfab_lend_mdev_window w[2])
{
        return ntbf__kmdev_windows(r, n, ALIGN, REACH, w);
}

#define WIN(w, g, s)                                                                               \
        do {                                                                                       \
                assert_int_equal((w).gpa, g);                                                      \
                assert_int_equal((w).size, s);                                                     \
        } while (0)

/* A small guest (128 MiB, all below the PCI hole): low RAM around the VGA hole, one window. */
static void test_small_guest(void **state)
{
        (void)state;
        struct ntbfab_lend_mdev_range r[] = {{0, 0xa0000}, {0x100000, 128 * MIB - 0x100000}};
        struct ntbfab_lend_mdev_window w[2];
        assert_int_equal(split(r, 2, w), 0);
        WIN(w[0], 0, 128 * MIB);
        WIN(w[1], 0, 0);
}

/* q35 with 6 GiB: 2 GiB below the hole, 4 GiB above 4 GiB: two windows, the hole in neither. */
static void test_split_guest(void **state)
{
        (void)state;
        struct ntbfab_lend_mdev_range r[] = {
            {0, 0xa0000}, {0x100000, 2 * GIB - 0x100000}, {4 * GIB, 4 * GIB}};
        struct ntbfab_lend_mdev_window w[2];
        assert_int_equal(split(r, 3, w), 0);
        WIN(w[0], 0, 2 * GIB);
        WIN(w[1], 4 * GIB, 4 * GIB);
}

/* The layout is discovered, not assumed: RAM that starts late, a high part alone. */
static void test_discovered_layouts(void **state)
{
        (void)state;
        struct ntbfab_lend_mdev_window w[2];
        struct ntbfab_lend_mdev_range late[] = {{64 * MIB + 0x1000, 3 * MIB}};
        assert_int_equal(split(late, 1, w), 0);
        WIN(w[0], 64 * MIB, 4 * MIB); /* aligned out to 2 MiB both ways */
        WIN(w[1], 0, 0);
        struct ntbfab_lend_mdev_range high[] = {{5 * GIB, GIB}, {8 * GIB, 2 * GIB}};
        assert_int_equal(split(high, 2, w), 0);
        WIN(w[0], 0, 0);
        WIN(w[1], 5 * GIB, 5 * GIB);
        /* A range across 4 GiB is split between the two windows. */
        struct ntbfab_lend_mdev_range across[] = {{3 * GIB, 2 * GIB}};
        assert_int_equal(split(across, 1, w), 0);
        WIN(w[0], 3 * GIB, GIB);
        WIN(w[1], 4 * GIB, GIB);
}

/* Bad layouts are refused and leave no window behind. */
static void test_refusals(void **state)
{
        (void)state;
        struct ntbfab_lend_mdev_window w[2] = {{1, 1}, {1, 1}};
        struct ntbfab_lend_mdev_range unsorted[] = {{GIB, MIB}, {0, MIB}};
        assert_int_equal(split(unsorted, 2, w), -EINVAL);
        WIN(w[0], 0, 0);
        WIN(w[1], 0, 0);
        struct ntbfab_lend_mdev_range overlap[] = {{0, 2 * MIB}, {MIB, 2 * MIB}};
        assert_int_equal(split(overlap, 2, w), -EINVAL);
        struct ntbfab_lend_mdev_range odd[] = {{0x800, MIB}};
        assert_int_equal(split(odd, 1, w), -EINVAL);
        struct ntbfab_lend_mdev_range empty[] = {{MIB, 0}};
        assert_int_equal(split(empty, 1, w), -EINVAL);
        assert_int_equal(split(NULL, 0, w), -EINVAL);
        struct ntbfab_lend_mdev_range wrap[] = {{UINT64_MAX - 0xfff, 0x2000}};
        assert_int_equal(split(wrap, 1, w), -EINVAL);
        /* Beyond the device's reach, or aligned out past it. */
        struct ntbfab_lend_mdev_range far[] = {{0, MIB}, {REACH, GIB}};
        assert_int_equal(split(far, 2, w), -ERANGE);
        struct ntbfab_lend_mdev_range edge[] = {{8 * GIB, GIB + 0x1000}};
        assert_int_equal(ntbf__kmdev_windows(edge, 1, ALIGN, 9 * GIB + 0x1000, w), -ERANGE);
        assert_int_equal(ntbf__kmdev_windows(edge, 1, 3 * MIB, REACH, w), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_small_guest),
            cmocka_unit_test(test_split_guest),
            cmocka_unit_test(test_discovered_layouts),
            cmocka_unit_test(test_refusals),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
