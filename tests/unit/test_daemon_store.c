/* tests/unit/test_daemon_store.c: the daemon's SQLite store, entry codec and config interception.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "entry.h"
#include "intercept.h"
#include "ntbfab/config.h"
#include "ntbfab/error.h"
#include "store.h"

/* ---- the store ------------------------------------------------------------------------------ */

struct rows {
        char keys[16][32];
        int n;
        int stop_at;
};

static int collect(void *arg, const char *key, const char *json)
{
        (void)json;
        struct rows *r = arg;
        snprintf(r->keys[r->n++], 32, "%s", key);
        return r->n == r->stop_at ? 7 : 0;
}

static void test_store(void **state)
{
        (void)state;
        char path[] = "/tmp/ntbfab-store-XXXXXX", why[256];
        int fd = mkstemp(path);
        close(fd);
        unlink(path);
        struct ntbf__store *s;
        assert_int_equal(ntbf__store_open(path, &s, why, sizeof(why)), 0);
        /* Insertion order is kept, an update keeps a row's place. */
        assert_int_equal(ntbf__store_put(s, NTBF_T_FM_ALLOCS, "b", "{\"v\":1}"), 0);
        assert_int_equal(ntbf__store_put(s, NTBF_T_FM_ALLOCS, "a", "{\"v\":2}"), 0);
        assert_int_equal(ntbf__store_put(s, NTBF_T_FM_ALLOCS, "c", "{}"), 0);
        assert_int_equal(ntbf__store_put(s, NTBF_T_FM_ALLOCS, "b", "{\"v\":3}"), 0);
        struct rows r = {.stop_at = -1};
        assert_int_equal(ntbf__store_each(s, NTBF_T_FM_ALLOCS, collect, &r), 0);
        assert_int_equal(r.n, 3);
        assert_string_equal(r.keys[0], "b");
        assert_string_equal(r.keys[1], "a");
        assert_string_equal(r.keys[2], "c");
        char *v;
        assert_int_equal(ntbf__store_get(s, NTBF_T_FM_ALLOCS, "b", &v), 0);
        assert_string_equal(v, "{\"v\":3}");
        free(v);
        assert_int_equal(ntbf__store_get(s, NTBF_T_FM_ALLOCS, "zz", &v), NTBF_ENOTFOUND);
        /* A callback stops the walk with its own code. */
        struct rows r2 = {.stop_at = 2};
        assert_int_equal(ntbf__store_each(s, NTBF_T_FM_ALLOCS, collect, &r2), 7);
        /* Tables are separate; transactions nest. */
        assert_int_equal(ntbf__store_begin(s), 0);
        assert_int_equal(ntbf__store_begin(s), 0);
        assert_int_equal(ntbf__store_put(s, NTBF_T_LENDS, "16385", "{\"available\":true}"), 0);
        assert_int_equal(ntbf__store_del(s, NTBF_T_FM_ALLOCS, "a"), 0);
        assert_int_equal(ntbf__store_commit(s), 0);
        assert_int_equal(ntbf__store_commit(s), 0);
        struct ntbf__res_row rows[2] = {
            {"lut", "lender.ntb0", "DMA window", 0, 4, 0x1000, 0x4000, 0x400000, "borrower",
             "lender"},
            {"rid", "lender.ntb0", "requester ID", -1, 1, 0, 0, 0, NULL, NULL},
        };
        assert_int_equal(ntbf__store_res_put(s, 1, rows, 2), 0);
        assert_int_equal(ntbf__store_res_put(s, 1, rows, 1), 0); /* replaced as a whole */
        ntbf__store_close(s);
        /* What was committed survives a reopen (a restart). */
        assert_int_equal(ntbf__store_open(path, &s, why, sizeof(why)), 0);
        struct rows r3 = {.stop_at = -1};
        assert_int_equal(ntbf__store_each(s, NTBF_T_FM_ALLOCS, collect, &r3), 0);
        assert_int_equal(r3.n, 2);
        assert_int_equal(ntbf__store_get(s, NTBF_T_LENDS, "16385", &v), 0);
        free(v);
        assert_int_equal(ntbf__store_clear(s, NTBF_T_LENDS), 0);
        assert_int_equal(ntbf__store_get(s, NTBF_T_LENDS, "16385", &v), NTBF_ENOTFOUND);
        /* Another schema: refused with a sentence, nothing touched. */
        assert_int_equal(ntbf__store_put(s, NTBF_T_META, "schema", "999"), 0);
        ntbf__store_close(s);
        assert_int_equal(ntbf__store_open(path, &s, why, sizeof(why)), NTBF_ECONFIG);
        assert_non_null(strstr(why, "another version of ntbfabd"));
        ntbf__store_remove(path);
        /* A path that cannot be a database. */
        assert_int_not_equal(ntbf__store_open("/proc/nope/x.db", &s, why, sizeof(why)), 0);
        assert_non_null(strstr(why, "cannot open the database"));
}

/* ---- entries --------------------------------------------------------------------------------- */

static void test_entries(void **state)
{
        (void)state;
        struct ntbf_topo *t;
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        assert_int_equal(ntbf_config_load("config/examples/three-lenders.yaml", &t, &d), 0);
        ntbf_diags_free(&d);
        const struct ntbf__ent ents[] = {
            {NTBF_ENT_SWRID, 1, 0, 0, 0, 0, 0, 0, 0, 0, {1, 0x0500, 0xfff8}},
            {NTBF_ENT_RID, 1, 1, 0, 0, 0, 0, 0, 0, 0, {1, 0x0500, 0xfff8}},
            {NTBF_ENT_IOMMU, 0, 0, 0, 0, 0, 0, 0x400000, 0x2000000, 0x10000, {0}},
            {NTBF_ENT_DEVISO, 1, 0, 0, 0, 0, 0, 0, 0, 0, {1, 0x0500, 0xfff8}},
            {NTBF_ENT_DEVMAP, 1, 0, 0, 0, 0, 0, 0x38000000000, 0, 0x1000000, {1, 0x0500, 0xfff8}},
            {NTBF_ENT_SLOT, 0, 0, 17, 1, 1, NTBF_NONE, 0x80000000, 0, 0x10000, {0}},
        };
        for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]); i++) {
                char key[NTBF_ENT_KEY_MAX + 1], again[NTBF_ENT_KEY_MAX + 1], desc[256];
                struct ntbf__ent e;
                ntbf__ent_key(&ents[i], key, sizeof(key));
                if (ntbf__ent_parse(t, key, &e))
                        fail_msg("cannot parse back '%s'", key);
                assert_string_equal(ntbf__ent_key(&e, again, sizeof(again)), key);
                assert_true(strlen(ntbf__ent_describe(t, &e, desc, sizeof(desc))) > 0);
        }
        static const char *const bad[] = {
            "",
            "slot",
            "slot 0 0 17 1 1 4294967295",                     /* too few fields */
            "slot 0 0 17 1 1 4294967295 0x80000000 0x1000 9", /* too many */
            "slot 0 0 17 1 1 4294967295 0x80000000 0x0",      /* translates nothing */
            "slot 9 0 17 1 1 4294967295 0x0",                 /* no node 9 */
            "slot 0 99 17 1 1 4294967295 0x0",                /* no adapter 99 */
            "slot 0 0 9999 1 1 4294967295 0x0",               /* no slot 9999 */
            "slot 0 0 17 2 1 4294967295 0x0",                 /* adapter 1 is not node 2's */
            "rid 0 0 1 70000 65535",                          /* rid over 16 bits */
            "iommu 0 0 0x401 0x1000 0x1000",                  /* unaligned */
            "devmap 1 0 1 1280 65528 0x0 0x0",                /* empty */
            "swrid 0 5 0 0 65535",                            /* no switch 5 */
            "nope 0 0 0 0 0",
            "rid 0 0 1 -1 65535",
            "rid 0 0 1 12x 65535",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct ntbf__ent e;
                if (!ntbf__ent_parse(t, bad[i], &e))
                        fail_msg("'%s' was accepted", bad[i]);
        }
        /* A slot recorded before translations had a size is a whole slot. */
        struct ntbf__ent old;
        assert_int_equal(ntbf__ent_parse(t, "slot 0 0 17 1 1 4294967295 0x80000000", &old), 0);
        assert_int_equal(old.len, t->adapters[0].win[0].slot_size);
        assert_true(old.len > 0);
        /* Sets: sorted, without duplicates; a - b. */
        struct ntbf__entset a = {0}, b = {0}, out = {0};
        ntbf__entset_add(&a, "x");
        ntbf__entset_add(&a, "c");
        ntbf__entset_add(&a, "a");
        ntbf__entset_add(&a, "c");
        ntbf__entset_sort(&a);
        assert_int_equal(a.n, 3);
        ntbf__entset_add(&b, "c");
        ntbf__entset_sort(&b);
        assert_int_equal(ntbf__entset_diff(&a, &b, &out), 0);
        assert_int_equal(out.n, 2);
        assert_string_equal(out.v[0], "a");
        assert_string_equal(out.v[1], "x");
        assert_true(ntbf__entset_has(&a, "x"));
        assert_false(ntbf__entset_has(&b, "x"));
        ntbf__entset_free(&a);
        ntbf__entset_free(&b);
        ntbf__entset_free(&out);
        ntbf_topo_free(t);
}

/* ---- config interception --------------------------------------------------------------------- */

static void test_intercept(void **state)
{
        (void)state;
        struct ntbf__icpt ic = {.known = true};
        /* Interrupt Pin reads 0 whatever the access covering it; Line and the rest untouched. */
        assert_int_equal(ntbf__icpt_read(&ic, 0x3d, 1, 0x01), 0);
        assert_int_equal(ntbf__icpt_read(&ic, 0x3c, 2, 0x010b), 0x000b);
        assert_int_equal(ntbf__icpt_read(&ic, 0x3c, 4, 0x0000010b), 0x0000000b);
        assert_int_equal(ntbf__icpt_read(&ic, 0x3e, 2, 0xffff), 0xffff);
        assert_int_equal(ntbf__icpt_read(&ic, 0x00, 4, 0x0002fab0), 0x0002fab0);
        /* Command writes keep Interrupt Disable set. */
        struct ntbf__cfgw w[2];
        assert_int_equal(ntbf__icpt_write(&ic, 0x04, 2, 0x0006, w), 1);
        assert_int_equal(w[0].val, 0x0406);
        assert_int_equal(ntbf__icpt_write(&ic, 0x04, 4, 0x00100006, w), 1);
        assert_int_equal(w[0].val, 0x00100406);
        assert_int_equal(ntbf__icpt_write(&ic, 0x05, 1, 0x00, w), 1);
        assert_int_equal(w[0].val, 0x04);
        assert_int_equal(ntbf__icpt_write(&ic, 0x04, 1, 0x06, w), 1);
        assert_int_equal(w[0].val, 0x06); /* the low byte has no such bit */
        /* MSI: an address of this host's MSI range becomes the MSI window's device address. */
        ic.msi_cap = 0x48;
        ic.dev_addr = 0x38001200000;
        ic.host_addr = 0xfee00000;
        ic.size = 0x100000;
        assert_int_equal(ntbf__icpt_write(&ic, 0x4c, 4, 0xfee00010, w), 1);
        assert_int_equal(w[0].off, 0x4c);
        assert_int_equal(w[0].val, 0x01200010); /* 32-bit capability: low half only */
        ic.msi64 = true;
        assert_int_equal(ntbf__icpt_write(&ic, 0x4c, 4, 0xfee00010, w), 2);
        assert_int_equal(w[0].val, 0x01200010);
        assert_int_equal(w[1].off, 0x50);
        assert_int_equal(w[1].size, 4);
        assert_int_equal(w[1].val, 0x380);
        /* The driver's own upper half (0 on x86) keeps the rewritten one. */
        assert_int_equal(ntbf__icpt_write(&ic, 0x50, 4, 0, w), 1);
        assert_int_equal(w[0].val, 0x380);
        /* Addresses outside the MSI range and other registers pass as written. */
        assert_int_equal(ntbf__icpt_write(&ic, 0x4c, 4, 0x12345678, w), 1);
        assert_int_equal(w[0].val, 0x12345678);
        assert_int_equal(ntbf__icpt_write(&ic, 0x54, 2, 0x41, w), 1); /* MSI data */
        assert_int_equal(w[0].val, 0x41);
        /* Only naturally aligned 1, 2, 4-byte accesses below 4 KiB. */
        assert_true(ntbf__icpt_valid(0xffc, 4));
        assert_false(ntbf__icpt_valid(0x1000, 1));
        assert_false(ntbf__icpt_valid(0x02, 4));
        assert_false(ntbf__icpt_valid(0x01, 2));
        assert_false(ntbf__icpt_valid(0x00, 3));
        assert_false(ntbf__icpt_valid(0x00, 8));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_store),
            cmocka_unit_test(test_entries),
            cmocka_unit_test(test_intercept),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
