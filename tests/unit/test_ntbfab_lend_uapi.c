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
        };
        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
                assert_int_equal(_IOC_TYPE(v[i].cmd), 0xB9);
                assert_int_equal(_IOC_NR(v[i].cmd), v[i].nr);
                assert_int_equal(_IOC_DIR(v[i].cmd), v[i].dir);
                assert_int_equal(_IOC_SIZE(v[i].cmd), v[i].size);
        }
        assert_int_equal(NTBFAB_LEND_VERSION, 1);
        assert_int_equal(NTBFAB_LEND_RID(0x12, 0x34), 0x1234);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_sizes),
            cmocka_unit_test(test_offsets),
            cmocka_unit_test(test_ioctl_numbers),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
