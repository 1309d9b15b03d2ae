/* tests/unit/test_ntbfab_uapi.c: the layout of kernel/include/uapi/ntbfab_ntb.h, pinned.
 *
 * The header is the contract between ntbfab_ntb.ko and user space (docs/linux-ntb.md): a field
 * that moves, a structure that changes size or an ioctl number that changes breaks every
 * program built against the old header. The tables below are the layout of version 1, written
 * out by hand from the header as it was released; this test fails, naming the field, when the
 * header no longer matches them. A deliberate change bumps NTBFAB_NTB_VERSION or adds new
 * structures and ioctls, and updates the tables in the same commit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "ntbfab_ntb.h"

struct field {
        const char *name;
        size_t offset, size;
        size_t want_offset, want_size;
};

struct sized {
        const char *name;
        size_t size, want;
};

struct ioc {
        const char *name;
        unsigned long value, want;
};

/* clang-format off */
#define FIELD(s, f, off, sz) { #s "." #f, offsetof(struct s, f), sizeof(((struct s *)0)->f), off, sz }
#define STRUCT(s, sz) { "struct " #s, sizeof(struct s), sz }
#define IOC(n, v) { #n, n, v }

/* Version 1: struct, field, offset, size. */
static const struct field fields[] = {
        FIELD(ntbfab_version, version, 0, 4),
        FIELD(ntbfab_version, features, 4, 4),
        FIELD(ntbfab_version, event_size, 8, 4),
        FIELD(ntbfab_version, reserved, 12, 4),
        FIELD(ntbfab_info, flags, 0, 4),
        FIELD(ntbfab_info, port, 4, 4),
        FIELD(ntbfab_info, peer_count, 8, 4),
        FIELD(ntbfab_info, topology, 12, 4),
        FIELD(ntbfab_info, peer_mw_count, 16, 4),
        FIELD(ntbfab_info, db_vector_count, 20, 4),
        FIELD(ntbfab_info, db_valid_mask, 24, 8),
        FIELD(ntbfab_info, spad_count, 32, 4),
        FIELD(ntbfab_info, msg_count, 36, 4),
        FIELD(ntbfab_info, msg_inbits, 40, 8),
        FIELD(ntbfab_info, msg_outbits, 48, 8),
        FIELD(ntbfab_info, minor, 56, 4),
        FIELD(ntbfab_info, reserved, 60, 4),
        FIELD(ntbfab_info, ntb_name, 64, 32),
        FIELD(ntbfab_info, driver, 96, 32),
        FIELD(ntbfab_peer_info, pidx, 0, 4),
        FIELD(ntbfab_peer_info, flags, 4, 4),
        FIELD(ntbfab_peer_info, port, 8, 4),
        FIELD(ntbfab_peer_info, mw_count, 12, 4),
        FIELD(ntbfab_mw_info, pidx, 0, 4),
        FIELD(ntbfab_mw_info, widx, 4, 4),
        FIELD(ntbfab_mw_info, flags, 8, 4),
        FIELD(ntbfab_mw_info, buf_id, 12, 4),
        FIELD(ntbfab_mw_info, addr_align, 16, 8),
        FIELD(ntbfab_mw_info, size_align, 24, 8),
        FIELD(ntbfab_mw_info, size_max, 32, 8),
        FIELD(ntbfab_mw_info, trans_addr, 40, 8),
        FIELD(ntbfab_mw_info, trans_size, 48, 8),
        FIELD(ntbfab_mw_info, trans_pid, 56, 4),
        FIELD(ntbfab_mw_info, reserved, 60, 4),
        FIELD(ntbfab_peer_mw_info, widx, 0, 4),
        FIELD(ntbfab_peer_mw_info, flags, 4, 4),
        FIELD(ntbfab_peer_mw_info, phys_addr, 8, 8),
        FIELD(ntbfab_peer_mw_info, size, 16, 8),
        FIELD(ntbfab_peer_mw_info, mmap_offset, 24, 8),
        FIELD(ntbfab_peer_mw_info, trans_addr, 32, 8),
        FIELD(ntbfab_peer_mw_info, trans_size, 40, 8),
        FIELD(ntbfab_peer_mw_info, trans_pidx, 48, 4),
        FIELD(ntbfab_peer_mw_info, reserved, 52, 4),
        FIELD(ntbfab_link, up, 0, 8),
        FIELD(ntbfab_link, speed, 8, 4),
        FIELD(ntbfab_link, width, 12, 4),
        FIELD(ntbfab_link, flags, 16, 4),
        FIELD(ntbfab_link, reserved, 20, 4),
        FIELD(ntbfab_buf_alloc, size, 0, 8),
        FIELD(ntbfab_buf_alloc, flags, 8, 4),
        FIELD(ntbfab_buf_alloc, fd, 12, 4),
        FIELD(ntbfab_buf_alloc, dma_addr, 16, 8),
        FIELD(ntbfab_buf_alloc, id, 24, 4),
        FIELD(ntbfab_buf_alloc, reserved, 28, 4),
        FIELD(ntbfab_buf_info, size, 0, 8),
        FIELD(ntbfab_buf_info, dma_addr, 8, 8),
        FIELD(ntbfab_buf_info, id, 16, 4),
        FIELD(ntbfab_buf_info, minor, 20, 4),
        FIELD(ntbfab_buf_info, flags, 24, 4),
        FIELD(ntbfab_buf_info, trans_count, 28, 4),
        FIELD(ntbfab_mw_trans, pidx, 0, 4),
        FIELD(ntbfab_mw_trans, widx, 4, 4),
        FIELD(ntbfab_mw_trans, flags, 8, 4),
        FIELD(ntbfab_mw_trans, buf_fd, 12, 4),
        FIELD(ntbfab_mw_trans, offset, 16, 8),
        FIELD(ntbfab_mw_trans, size, 24, 8),
        FIELD(ntbfab_mw_ref, pidx, 0, 4),
        FIELD(ntbfab_mw_ref, widx, 4, 4),
        FIELD(ntbfab_mw_ref, flags, 8, 4),
        FIELD(ntbfab_mw_ref, reserved, 12, 4),
        FIELD(ntbfab_peer_mw_trans, pidx, 0, 4),
        FIELD(ntbfab_peer_mw_trans, widx, 4, 4),
        FIELD(ntbfab_peer_mw_trans, flags, 8, 4),
        FIELD(ntbfab_peer_mw_trans, reserved, 12, 4),
        FIELD(ntbfab_peer_mw_trans, addr, 16, 8),
        FIELD(ntbfab_peer_mw_trans, size, 24, 8),
        FIELD(ntbfab_peer_mw_fd, widx, 0, 4),
        FIELD(ntbfab_peer_mw_fd, flags, 4, 4),
        FIELD(ntbfab_peer_mw_fd, offset, 8, 8),
        FIELD(ntbfab_peer_mw_fd, size, 16, 8),
        FIELD(ntbfab_peer_mw_fd, fd, 24, 4),
        FIELD(ntbfab_peer_mw_fd, reserved, 28, 4),
        FIELD(ntbfab_bits, bits, 0, 8),
        FIELD(ntbfab_bits, flags, 8, 4),
        FIELD(ntbfab_bits, reserved, 12, 4),
        FIELD(ntbfab_spad, flags, 0, 4),
        FIELD(ntbfab_spad, pidx, 4, 4),
        FIELD(ntbfab_spad, sidx, 8, 4),
        FIELD(ntbfab_spad, value, 12, 4),
        FIELD(ntbfab_msg, flags, 0, 4),
        FIELD(ntbfab_msg, pidx, 4, 4),
        FIELD(ntbfab_msg, midx, 8, 4),
        FIELD(ntbfab_msg, value, 12, 4),
        FIELD(ntbfab_eventfd, fd, 0, 4),
        FIELD(ntbfab_eventfd, events, 4, 4),
        FIELD(ntbfab_eventfd, db_bits, 8, 8),
        FIELD(ntbfab_eventfd, id, 16, 4),
        FIELD(ntbfab_eventfd, flags, 20, 4),
        FIELD(ntbfab_event, type, 0, 4),
        FIELD(ntbfab_event, vector, 4, 4),
        FIELD(ntbfab_event, bits, 8, 8),
        FIELD(ntbfab_event, seq, 16, 8),
        FIELD(ntbfab_event, speed, 24, 4),
        FIELD(ntbfab_event, width, 28, 4),
        FIELD(ntbfab_state, flags, 0, 4),
        FIELD(ntbfab_state, owner_pid, 4, 4),
        FIELD(ntbfab_state, mw_trans, 8, 4),
        FIELD(ntbfab_state, peer_mw_trans, 12, 4),
        FIELD(ntbfab_state, bufs, 16, 4),
        FIELD(ntbfab_state, opens, 20, 4),
        FIELD(ntbfab_state, db_mask, 24, 8),
        FIELD(ntbfab_state, spads_written, 32, 4),
        FIELD(ntbfab_state, reserved, 36, 4),
};

static const struct sized structs[] = {
        STRUCT(ntbfab_version, 16),
        STRUCT(ntbfab_info, 128),
        STRUCT(ntbfab_peer_info, 16),
        STRUCT(ntbfab_mw_info, 64),
        STRUCT(ntbfab_peer_mw_info, 56),
        STRUCT(ntbfab_link, 24),
        STRUCT(ntbfab_buf_alloc, 32),
        STRUCT(ntbfab_buf_info, 32),
        STRUCT(ntbfab_mw_trans, 32),
        STRUCT(ntbfab_mw_ref, 16),
        STRUCT(ntbfab_peer_mw_trans, 32),
        STRUCT(ntbfab_peer_mw_fd, 32),
        STRUCT(ntbfab_bits, 16),
        STRUCT(ntbfab_spad, 16),
        STRUCT(ntbfab_msg, 16),
        STRUCT(ntbfab_eventfd, 24),
        STRUCT(ntbfab_event, 32),
        STRUCT(ntbfab_state, 40),
};

static const struct ioc iocs[] = {
        IOC(NTBFAB_IOC_VERSION, 0x8010b800),
        IOC(NTBFAB_IOC_INFO, 0x8080b801),
        IOC(NTBFAB_IOC_PEER_INFO, 0xc010b802),
        IOC(NTBFAB_IOC_MW_INFO, 0xc040b803),
        IOC(NTBFAB_IOC_PEER_MW_INFO, 0xc038b804),
        IOC(NTBFAB_IOC_STATE, 0x8028b805),
        IOC(NTBFAB_IOC_LINK_STATUS, 0x8018b810),
        IOC(NTBFAB_IOC_LINK_ENABLE, 0x4018b811),
        IOC(NTBFAB_IOC_LINK_DISABLE, 0x0000b812),
        IOC(NTBFAB_IOC_BUF_ALLOC, 0xc020b820),
        IOC(NTBFAB_IOC_BUF_INFO, 0x8020b821),
        IOC(NTBFAB_IOC_MW_SET_TRANS, 0x4020b822),
        IOC(NTBFAB_IOC_MW_CLEAR_TRANS, 0x4010b823),
        IOC(NTBFAB_IOC_PEER_MW_SET_TRANS, 0x4020b824),
        IOC(NTBFAB_IOC_PEER_MW_CLEAR_TRANS, 0x4010b825),
        IOC(NTBFAB_IOC_PEER_MW_FD, 0xc020b826),
        IOC(NTBFAB_IOC_DB_READ, 0x8010b830),
        IOC(NTBFAB_IOC_DB_CLEAR, 0x4010b831),
        IOC(NTBFAB_IOC_DB_SET, 0x4010b832),
        IOC(NTBFAB_IOC_DB_READ_MASK, 0x8010b833),
        IOC(NTBFAB_IOC_DB_MASK, 0x4010b834),
        IOC(NTBFAB_IOC_DB_UNMASK, 0x4010b835),
        IOC(NTBFAB_IOC_PEER_DB_SET, 0x4010b836),
        IOC(NTBFAB_IOC_SPAD_READ, 0xc010b840),
        IOC(NTBFAB_IOC_SPAD_WRITE, 0x4010b841),
        IOC(NTBFAB_IOC_MSG_STATUS, 0x8010b850),
        IOC(NTBFAB_IOC_MSG_CLEAR, 0x4010b851),
        IOC(NTBFAB_IOC_MSG_MASK, 0x4010b852),
        IOC(NTBFAB_IOC_MSG_UNMASK, 0x4010b853),
        IOC(NTBFAB_IOC_MSG_READ, 0xc010b854),
        IOC(NTBFAB_IOC_MSG_WRITE, 0x4010b855),
        IOC(NTBFAB_IOC_EVENTFD_ADD, 0xc018b860),
        IOC(NTBFAB_IOC_EVENTFD_DEL, 0x0000b861),
};
/* clang-format on */

static void test_fields(void **state)
{
        (void)state;
        int bad = 0;
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
                const struct field *f = &fields[i];
                if (f->offset != f->want_offset || f->size != f->want_size) {
                        printf("%s: at offset %zu with %zu bytes, the contract says offset %zu "
                               "with %zu bytes\n",
                               f->name, f->offset, f->size, f->want_offset, f->want_size);
                        bad++;
                }
        }
        assert_int_equal(bad, 0);
}

static void test_sizes(void **state)
{
        (void)state;
        int bad = 0;
        for (size_t i = 0; i < sizeof(structs) / sizeof(structs[0]); i++) {
                const struct sized *s = &structs[i];
                /* A multiple of 8: the same layout for 32- and 64-bit user space. */
                if (s->size != s->want || s->size % 8) {
                        printf("%s: %zu bytes, the contract says %zu\n", s->name, s->size, s->want);
                        bad++;
                }
        }
        assert_int_equal(bad, 0);
}

/* Every field of every structure is in the table: a new field needs a row. */
static void test_fields_cover_structs(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(structs) / sizeof(structs[0]); i++) {
                const char *name = structs[i].name + sizeof("struct ") - 1;
                size_t covered = 0, len = strlen(name);
                for (size_t j = 0; j < sizeof(fields) / sizeof(fields[0]); j++)
                        if (!strncmp(fields[j].name, name, len) && fields[j].name[len] == '.')
                                covered += fields[j].size;
                if (covered != structs[i].size)
                        printf("%s: the table's fields cover %zu of its %zu bytes\n",
                               structs[i].name, covered, structs[i].size);
                assert_int_equal(covered, structs[i].size);
        }
}

static void test_ioctl_numbers(void **state)
{
        (void)state;
        int bad = 0;
        for (size_t i = 0; i < sizeof(iocs) / sizeof(iocs[0]); i++) {
                if (iocs[i].value != iocs[i].want) {
                        printf("%s = %#lx, the contract says %#lx\n", iocs[i].name, iocs[i].value,
                               iocs[i].want);
                        bad++;
                }
        }
        assert_int_equal(bad, 0);
        assert_int_equal(NTBFAB_NTB_VERSION, 1);
        assert_int_equal(NTBFAB_IOC_MAGIC, 0xB8);
        assert_int_equal(NTBFAB_MMAP_MW_SHIFT, 40);
        assert_int_equal(NTBFAB_EVENTFD_MAX, 64);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_fields),
            cmocka_unit_test(test_sizes),
            cmocka_unit_test(test_fields_cover_structs),
            cmocka_unit_test(test_ioctl_numbers),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
