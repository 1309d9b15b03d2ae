/* tests/unit/test_units.c: sizes with units, integers, error codes and diagnostics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ntbfab/diag.h"
#include "ntbfab/error.h"
#include "ntbfab/units.h"

static void test_size_parse(void **state)
{
        (void)state;
        uint64_t v;
        const char *why = NULL;
        assert_int_equal(ntbf_size_parse("4096", &v, &why), 0);
        assert_int_equal(v, 4096);
        assert_int_equal(ntbf_size_parse("64KiB", &v, &why), 0);
        assert_int_equal(v, 65536);
        assert_int_equal(ntbf_size_parse("2MiB", &v, &why), 0);
        assert_int_equal(v, 2 << 20);
        assert_int_equal(ntbf_size_parse("1GiB", &v, &why), 0);
        assert_int_equal(v, 1 << 30);
        assert_int_equal(ntbf_size_parse("1G", &v, &why), 0);
        assert_int_equal(v, 1 << 30);
        assert_int_equal(ntbf_size_parse("3 T", &v, &why), 0);
        assert_int_equal(v, UINT64_C(3) << 40);
        assert_int_equal(ntbf_size_parse("0x1000", &v, &why), 0);
        assert_int_equal(v, 4096);
        assert_int_equal(ntbf_size_parse("16k", &v, &why), 0);
        assert_int_equal(v, 16384);
        assert_int_equal(ntbf_size_parse("1_048_576", &v, &why), 0);
        assert_int_equal(v, 1048576);
}

static void test_size_parse_errors(void **state)
{
        (void)state;
        uint64_t v = 77;
        const char *why = NULL;
        assert_int_equal(ntbf_size_parse("1GB", &v, &why), -EINVAL);
        assert_non_null(strstr(why, "ambiguous"));
        assert_int_equal(ntbf_size_parse("12 parsecs", &v, &why), -EINVAL);
        assert_non_null(strstr(why, "unknown unit"));
        assert_int_equal(ntbf_size_parse("", &v, &why), -EINVAL);
        assert_int_equal(ntbf_size_parse("GiB", &v, &why), -EINVAL);
        assert_int_equal(ntbf_size_parse("99999999999999999999", &v, &why), -ERANGE);
        assert_int_equal(ntbf_size_parse("16777216T", &v, &why), -ERANGE);
        assert_int_equal(ntbf_size_parse("-1", &v, &why), -EINVAL);
        assert_int_equal(v, 77); /* untouched on error */
        assert_int_equal(ntbf_size_parse(NULL, &v, NULL), -EINVAL);
}

static void test_size_fmt(void **state)
{
        (void)state;
        char b[32];
        assert_string_equal(ntbf_size_fmt(16384, b, sizeof(b)), "16 KiB");
        assert_string_equal(ntbf_size_fmt(1536ull << 20, b, sizeof(b)), "1536 MiB");
        assert_string_equal(ntbf_size_fmt(100, b, sizeof(b)), "100 B");
        assert_string_equal(ntbf_size_fmt(0, b, sizeof(b)), "0 B");
        assert_string_equal(ntbf_size_fmt(1ull << 40, b, sizeof(b)), "1 TiB");
}

static void test_uint_parse(void **state)
{
        (void)state;
        uint64_t v;
        assert_int_equal(ntbf_uint_parse("42", &v), 0);
        assert_int_equal(v, 42);
        assert_int_equal(ntbf_uint_parse("0xFEE00000", &v), 0);
        assert_int_equal(v, 0xfee00000);
        assert_int_equal(ntbf_uint_parse("42k", &v), -EINVAL);
        assert_int_equal(ntbf_uint_parse("0x", &v), -EINVAL);
        assert_int_equal(ntbf_uint_parse("18446744073709551616", &v), -ERANGE);
}

static void test_errors(void **state)
{
        (void)state;
        assert_string_equal(ntbf_err_name(NTBF_ENOPATH), "NTBF_ENOPATH");
        assert_string_equal(ntbf_strerror(NTBF_ENOPATH), "no path between the endpoints");
        assert_string_equal(ntbf_err_name(-ENOMEM), "ENOMEM");
        assert_string_equal(ntbf_strerror(-ENOENT), "No such file or directory");
        assert_string_equal(ntbf_strerror(0), "success");
        assert_string_equal(ntbf_strerror(12345), "unknown error");
        /* Every code has a distinct name and a sentence. */
        static const int codes[] = {
#define C(name, value, text) value,
            NTBF_ERRNO_MAP(C)
#undef C
        };
        for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
                assert_true(strlen(ntbf_strerror(codes[i])) > 5);
                assert_true(strncmp(ntbf_err_name(codes[i]), "NTBF_E", 6) == 0);
        }
}

static void test_diags(void **state)
{
        (void)state;
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        ntbf_diag_add(&d, NTBF_SEV_ERROR, "b.yaml", (struct ntbf_loc){3, 1}, "third %d", 3);
        ntbf_diag_add(&d, NTBF_SEV_WARNING, "a.yaml", (struct ntbf_loc){9, 2}, "first");
        ntbf_diag_add(&d, NTBF_SEV_ERROR, "b.yaml", (struct ntbf_loc){1, 7}, "second");
        assert_int_equal(d.errors, 2);
        ntbf_diags_sort(&d);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        ntbf_diags_print(&d, f);
        fclose(f);
        assert_string_equal(buf, "a.yaml:9:2: warning: first\n"
                                 "b.yaml:1:7: error: second\n"
                                 "b.yaml:3:1: error: third 3\n");
        free(buf);
        ntbf_diags_free(&d);
        /* The limit keeps memory bounded but the count exact. */
        ntbf_diags_init(&d);
        d.limit = 5;
        for (int i = 0; i < 20; i++)
                ntbf_diag_add(&d, NTBF_SEV_ERROR, NULL, (struct ntbf_loc){0, 0}, "e%d", i);
        assert_int_equal(d.n, 5);
        assert_int_equal(d.errors, 20);
        assert_int_equal(d.dropped, 15);
        ntbf_diags_free(&d);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_size_parse), cmocka_unit_test(test_size_parse_errors),
            cmocka_unit_test(test_size_fmt),   cmocka_unit_test(test_uint_parse),
            cmocka_unit_test(test_errors),     cmocka_unit_test(test_diags),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
