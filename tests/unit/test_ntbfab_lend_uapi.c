/* tests/unit/test_ntbfab_lend_uapi.c: the layout of kernel/include/uapi/ntbfab_lend.h, the
 * contract between ntbfabd and ntbfab_shadow.ko (docs/kernel.md). A change that moves a field
 * or resizes a structure fails here, so it cannot slip into a release unnoticed: the module and
 * the daemon of two releases must agree byte for byte, or be told apart by the version. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ntbfab_lend.h"

#define FIELD(T, f, off, size)                                                                     \
        do {                                                                                       \
                assert_int_equal(offsetof(struct T, f), off);                                      \
                assert_int_equal(sizeof(((struct T *)0)->f), size);                                \
        } while (0)

static void test_sizes(void **state)
{
        (void)state;
        assert_int_equal(sizeof(struct ntbfab_lend_version), 16);
        assert_int_equal(sizeof(struct ntbfab_lend_export), 64);
        assert_int_equal(sizeof(struct ntbfab_lend_unexport), 16);
        assert_int_equal(sizeof(struct ntbfab_lend_attach), 64);
        assert_int_equal(sizeof(struct ntbfab_lend_detach), 16);
        assert_int_equal(sizeof(struct ntbfab_lend_cfg_set), 24);
        assert_int_equal(sizeof(struct ntbfab_lend_peer), 32);
        assert_int_equal(sizeof(struct ntbfab_lend_msg), 32);
        assert_int_equal(sizeof(struct ntbfab_lend_mdev_type), 64);
        assert_int_equal(sizeof(struct ntbfab_lend_mdev_pool), 64);
        assert_int_equal(sizeof(struct ntbfab_lend_mdev_entry), 32);
        assert_int_equal(sizeof(struct ntbfab_lend_mdev_list), 16);
        assert_int_equal(sizeof(struct ntbfab_lend_mdev_range), 16);
        assert_int_equal(sizeof(struct ntbfab_lend_mdev_info), 168);
        assert_int_equal(sizeof(struct ntbfab_lend_mdev_config), 256);
        assert_int_equal(sizeof(struct ntbfab_lend_mdev_window), 16);
        assert_int_equal(sizeof(struct ntbfab_lend_mdev_peer), 24);
        assert_int_equal(sizeof(struct ntbfab_lend_mdev_grant), 264);
        assert_int_equal(sizeof(struct ntbfab_lend_mdev_done), 24);
        assert_int_equal(sizeof(struct ntbfab_lend_mdev_peer_add), 32);
}

static void test_offsets(void **state)
{
        (void)state;
        FIELD(ntbfab_lend_version, version, 0, 4);
        FIELD(ntbfab_lend_version, msg_size, 4, 4);
        FIELD(ntbfab_lend_version, features, 8, 4);
        FIELD(ntbfab_lend_version, reserved, 12, 4);

        FIELD(ntbfab_lend_export, flags, 0, 4);
        FIELD(ntbfab_lend_export, group_fd, 4, 4);
        FIELD(ntbfab_lend_export, pci_domain, 8, 4);
        FIELD(ntbfab_lend_export, pci_rid, 12, 4);
        FIELD(ntbfab_lend_export, nr_irqs, 16, 4);
        FIELD(ntbfab_lend_export, reserved0, 20, 4);
        FIELD(ntbfab_lend_export, irq_fds, 24, 8);
        FIELD(ntbfab_lend_export, iova_base, 32, 8);
        FIELD(ntbfab_lend_export, iova_size, 40, 8);
        FIELD(ntbfab_lend_export, export_id, 48, 8);
        FIELD(ntbfab_lend_export, reserved, 56, 8);

        FIELD(ntbfab_lend_unexport, export_id, 0, 8);
        FIELD(ntbfab_lend_unexport, reserved, 8, 8);

        FIELD(ntbfab_lend_attach, flags, 0, 4);
        FIELD(ntbfab_lend_attach, fdid, 4, 4);
        FIELD(ntbfab_lend_attach, export_id, 8, 8);
        FIELD(ntbfab_lend_attach, config, 16, 8);
        FIELD(ntbfab_lend_attach, config_size, 24, 4);
        FIELD(ntbfab_lend_attach, shadow_id, 28, 4);
        FIELD(ntbfab_lend_attach, dma_size, 32, 8);
        FIELD(ntbfab_lend_attach, pci_domain, 40, 4);
        FIELD(ntbfab_lend_attach, pci_rid, 44, 4);
        FIELD(ntbfab_lend_attach, reserved, 48, 16);

        FIELD(ntbfab_lend_detach, shadow_id, 0, 4);
        FIELD(ntbfab_lend_detach, flags, 4, 4);
        FIELD(ntbfab_lend_detach, mappings, 8, 8);

        FIELD(ntbfab_lend_cfg_set, shadow_id, 0, 4);
        FIELD(ntbfab_lend_cfg_set, offset, 4, 4);
        FIELD(ntbfab_lend_cfg_set, value, 8, 4);
        FIELD(ntbfab_lend_cfg_set, reserved, 12, 4);
        FIELD(ntbfab_lend_cfg_set, seq, 16, 8);

        FIELD(ntbfab_lend_peer, shadow_id, 0, 4);
        FIELD(ntbfab_lend_peer, flags, 4, 4);
        FIELD(ntbfab_lend_peer, phys, 8, 8);
        FIELD(ntbfab_lend_peer, size, 16, 8);
        FIELD(ntbfab_lend_peer, dev_addr, 24, 8);

        FIELD(ntbfab_lend_msg, kind, 0, 4);
        FIELD(ntbfab_lend_msg, shadow_id, 4, 4);
        FIELD(ntbfab_lend_msg, seq, 8, 8);
        FIELD(ntbfab_lend_msg, offset, 16, 4);
        FIELD(ntbfab_lend_msg, size, 20, 4);
        FIELD(ntbfab_lend_msg, value, 24, 4);
        FIELD(ntbfab_lend_msg, reserved, 28, 4);
}

/* ntbfab_mdev's requests (VM pass-through). */
static void test_mdev_offsets(void **state)
{
        (void)state;
        FIELD(ntbfab_lend_mdev_type, fdid, 0, 4);
        FIELD(ntbfab_lend_mdev_type, vendor, 4, 2);
        FIELD(ntbfab_lend_mdev_type, device, 6, 2);
        FIELD(ntbfab_lend_mdev_type, class_code, 8, 4);
        FIELD(ntbfab_lend_mdev_type, reserved, 12, 4);
        FIELD(ntbfab_lend_mdev_type, name, 16, 48);
        FIELD(ntbfab_lend_mdev_pool, flags, 0, 4);
        FIELD(ntbfab_lend_mdev_pool, count, 4, 4);
        FIELD(ntbfab_lend_mdev_pool, types, 8, 8);
        FIELD(ntbfab_lend_mdev_pool, node, 16, 32);
        FIELD(ntbfab_lend_mdev_pool, reserved, 48, 16);
        FIELD(ntbfab_lend_mdev_entry, instance, 0, 4);
        FIELD(ntbfab_lend_mdev_entry, fdid, 4, 4);
        FIELD(ntbfab_lend_mdev_entry, uuid, 8, 16);
        FIELD(ntbfab_lend_mdev_entry, state, 24, 4);
        FIELD(ntbfab_lend_mdev_entry, reserved, 28, 4);
        FIELD(ntbfab_lend_mdev_list, count, 0, 4);
        FIELD(ntbfab_lend_mdev_list, reserved, 4, 4);
        FIELD(ntbfab_lend_mdev_list, entries, 8, 8);
        FIELD(ntbfab_lend_mdev_range, gpa, 0, 8);
        FIELD(ntbfab_lend_mdev_range, size, 8, 8);
        FIELD(ntbfab_lend_mdev_info, instance, 0, 4);
        FIELD(ntbfab_lend_mdev_info, fdid, 4, 4);
        FIELD(ntbfab_lend_mdev_info, uuid, 8, 16);
        FIELD(ntbfab_lend_mdev_info, state, 24, 4);
        FIELD(ntbfab_lend_mdev_info, nr_ranges, 28, 4);
        FIELD(ntbfab_lend_mdev_info, ranges, 32, 8);
        FIELD(ntbfab_lend_mdev_info, pinned, 40, 8);
        FIELD(ntbfab_lend_mdev_info, bars, 48, 48);
        FIELD(ntbfab_lend_mdev_info, bar_sizes, 96, 48);
        FIELD(ntbfab_lend_mdev_info, vm, 144, 8);
        FIELD(ntbfab_lend_mdev_info, reserved, 152, 16);
        FIELD(ntbfab_lend_mdev_config, instance, 0, 4);
        FIELD(ntbfab_lend_mdev_config, status, 4, 4);
        FIELD(ntbfab_lend_mdev_config, seq, 8, 8);
        FIELD(ntbfab_lend_mdev_config, config, 16, 8);
        FIELD(ntbfab_lend_mdev_config, config_size, 24, 4);
        FIELD(ntbfab_lend_mdev_config, reserved0, 28, 4);
        FIELD(ntbfab_lend_mdev_config, bar_sizes, 32, 48);
        FIELD(ntbfab_lend_mdev_config, why, 80, 160);
        FIELD(ntbfab_lend_mdev_config, reserved, 240, 16);
        FIELD(ntbfab_lend_mdev_window, gpa, 0, 8);
        FIELD(ntbfab_lend_mdev_window, size, 8, 8);
        FIELD(ntbfab_lend_mdev_peer, gpa, 0, 8);
        FIELD(ntbfab_lend_mdev_peer, size, 8, 8);
        FIELD(ntbfab_lend_mdev_peer, dev_addr, 16, 8);
        FIELD(ntbfab_lend_mdev_grant, instance, 0, 4);
        FIELD(ntbfab_lend_mdev_grant, status, 4, 4);
        FIELD(ntbfab_lend_mdev_grant, seq, 8, 8);
        FIELD(ntbfab_lend_mdev_grant, flags, 16, 4);
        FIELD(ntbfab_lend_mdev_grant, nr_peers, 20, 4);
        FIELD(ntbfab_lend_mdev_grant, export_id, 24, 8);
        FIELD(ntbfab_lend_mdev_grant, config, 32, 8);
        FIELD(ntbfab_lend_mdev_grant, config_size, 40, 4);
        FIELD(ntbfab_lend_mdev_grant, reserved0, 44, 4);
        FIELD(ntbfab_lend_mdev_grant, windows, 48, 32);
        FIELD(ntbfab_lend_mdev_grant, peers, 80, 8);
        FIELD(ntbfab_lend_mdev_grant, why, 88, 160);
        FIELD(ntbfab_lend_mdev_grant, reserved, 248, 16);
        FIELD(ntbfab_lend_mdev_done, instance, 0, 4);
        FIELD(ntbfab_lend_mdev_done, status, 4, 4);
        FIELD(ntbfab_lend_mdev_done, seq, 8, 8);
        FIELD(ntbfab_lend_mdev_done, value, 16, 4);
        FIELD(ntbfab_lend_mdev_done, reserved, 20, 4);
        FIELD(ntbfab_lend_mdev_peer_add, instance, 0, 4);
        FIELD(ntbfab_lend_mdev_peer_add, reserved, 4, 4);
        FIELD(ntbfab_lend_mdev_peer_add, peer, 8, 24);
}

/* The numbers user space calls: type 0xB9, the command, the direction and the size. */
static void test_ioctl_numbers(void **state)
{
        (void)state;
        struct {
                unsigned long cmd, nr, dir, size;
        } v[] = {
            {NTBFAB_LEND_IOC_VERSION, 0, _IOC_READ, 16},
            {NTBFAB_LEND_IOC_EXPORT, 1, _IOC_READ | _IOC_WRITE, 64},
            {NTBFAB_LEND_IOC_UNEXPORT, 2, _IOC_WRITE, 16},
            {NTBFAB_LEND_IOC_ATTACH, 3, _IOC_READ | _IOC_WRITE, 64},
            {NTBFAB_LEND_IOC_DETACH, 4, _IOC_READ | _IOC_WRITE, 16},
            {NTBFAB_LEND_IOC_CFG_SET, 5, _IOC_WRITE, 24},
            {NTBFAB_LEND_IOC_PEER_ADD, 6, _IOC_WRITE, 32},
            {NTBFAB_LEND_IOC_PEER_DEL, 7, _IOC_WRITE, 32},
            {NTBFAB_LEND_IOC_MDEV_POOL, 0x10, _IOC_WRITE, 64},
            {NTBFAB_LEND_IOC_MDEV_LIST, 0x11, _IOC_READ | _IOC_WRITE, 16},
            {NTBFAB_LEND_IOC_MDEV_INFO, 0x12, _IOC_READ | _IOC_WRITE, 168},
            {NTBFAB_LEND_IOC_MDEV_CONFIG, 0x13, _IOC_WRITE, 256},
            {NTBFAB_LEND_IOC_MDEV_GRANT, 0x14, _IOC_WRITE, 264},
            {NTBFAB_LEND_IOC_MDEV_DONE, 0x15, _IOC_WRITE, 24},
            {NTBFAB_LEND_IOC_MDEV_PEER, 0x16, _IOC_WRITE, 32},
        };
        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
                assert_int_equal(_IOC_TYPE(v[i].cmd), 0xB9);
                assert_int_equal(_IOC_NR(v[i].cmd), v[i].nr);
                assert_int_equal(_IOC_DIR(v[i].cmd), v[i].dir);
                assert_int_equal(_IOC_SIZE(v[i].cmd), v[i].size);
        }
        assert_int_equal(NTBFAB_LEND_VERSION, 2);
        assert_int_equal(NTBFAB_LEND_RID(0x12, 0x34), 0x1234);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_sizes),
            cmocka_unit_test(test_offsets),
            cmocka_unit_test(test_mdev_offsets),
            cmocka_unit_test(test_ioctl_numbers),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
