/* tests/unit/test_daemon_host.c: which node a daemon is, from its host's addresses and name;
 * the log's sinks; the user --user names. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "host.h"
#include "log.h"
#include "ntbfab/config.h"

static const char file[] = "cluster: {name: h}\n"
                           "nodes:\n"
                           "  - {name: alpha, id: 4, address: '10.0.0.1:7700', adapters: "
                           "[{name: ntb0, model: pxh830}]}\n"
                           "  - {name: beta, id: 8, address: 'beta.lab:7700', adapters: "
                           "[{name: ntb0, model: pxh830}]}\n"
                           "  - {name: gamma, id: 12, address: '[fd00::3]:7700', adapters: "
                           "[{name: ntb0, model: pxh830}]}\n"
                           "  - {name: delta, id: 16, address: '10.0.0.4:7700', adapters: "
                           "[{name: ntb0, model: pxh830}]}\n"
                           "  - {name: epsilon, id: 20, address: '10.0.0.4:7701', adapters: "
                           "[{name: ntb0, model: pxh830}]}\n"
                           "switches: [{name: sw, model: mxs824}]\n"
                           "links: [[alpha.ntb0, sw.0], [beta.ntb0, sw.1], [gamma.ntb0, sw.2],\n"
                           "        [delta.ntb0, sw.3], [epsilon.ntb0, sw.4]]\n";

static struct ntbf_topo *load(void)
{
        struct ntbf_topo *t = NULL;
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        int r = ntbf_config_load_mem("h.yaml", file, strlen(file), &t, &d);
        if (r)
                ntbf_diags_print(&d, stderr);
        ntbf_diags_free(&d);
        assert_int_equal(r, 0);
        return t;
}

/* beta.lab resolves to 10.0.0.2; nothing else resolves. */
static size_t fake_resolve(const char *host, char out[][64], size_t max)
{
        if (strcmp(host, "beta.lab") || !max)
                return 0;
        snprintf(out[0], 64, "10.0.0.2");
        return 1;
}

static int match(struct ntbf_topo *t, const char *const *addrs, size_t n, const char *hostname,
                 uint32_t *node, char *why)
{
        return ntbf__host_match(t, "h.yaml", addrs, n, hostname, fake_resolve, node, why, 512);
}

static void test_by_address(void **state)
{
        (void)state;
        struct ntbf_topo *t = load();
        char why[512];
        uint32_t node = 99;
        const char *a[] = {"127.0.0.1", "10.0.0.1", "::1"};
        assert_int_equal(match(t, a, 3, "host", &node, why), 0);
        assert_string_equal(t->nodes[node].name, "alpha");
        /* IPv6 in brackets, compared as addresses (fd00:0::3 is fd00::3). */
        const char *g[] = {"fd00:0::3"};
        assert_int_equal(match(t, g, 1, "host", &node, why), 0);
        assert_string_equal(t->nodes[node].name, "gamma");
        /* A host name in the file that resolves to one of the host's addresses. */
        const char *b[] = {"10.0.0.2"};
        assert_int_equal(match(t, b, 1, "elsewhere", &node, why), 0);
        assert_string_equal(t->nodes[node].name, "beta");
        ntbf_topo_free(t);
}

static void test_by_name(void **state)
{
        (void)state;
        struct ntbf_topo *t = load();
        char why[512];
        uint32_t node = 99;
        const char *none[] = {"192.0.2.7"};
        /* No address matches: the host name, or its first label, names the node. */
        assert_int_equal(match(t, none, 1, "gamma.example.org", &node, why), 0);
        assert_string_equal(t->nodes[node].name, "gamma");
        assert_int_equal(match(t, none, 1, "BETA.lab", &node, why), 0);
        assert_string_equal(t->nodes[node].name, "beta");
        ntbf_topo_free(t);
}

static void test_errors(void **state)
{
        (void)state;
        struct ntbf_topo *t = load();
        char why[512];
        uint32_t node = 99;
        const char *none[] = {"192.0.2.7", "127.0.0.1"};
        assert_int_equal(match(t, none, 2, "zeta", &node, why), -ENOENT);
        assert_non_null(strstr(why, "no node of h.yaml has an address of this host (192.0.2.7, "
                                    "127.0.0.1) or its host name 'zeta'"));
        assert_non_null(strstr(why, "--node NAME"));
        /* Two nodes on one host (different ports): the address cannot tell them apart. */
        const char *d[] = {"10.0.0.4"};
        assert_int_equal(match(t, d, 1, "zeta", &node, why), -EEXIST);
        assert_non_null(strstr(why, "2 nodes of h.yaml match this host by address ('delta' at "
                                    "10.0.0.4:7700, 'epsilon' at 10.0.0.4:7701)"));
        assert_non_null(strstr(why, "--node NAME"));
        /* An address match wins over a name match of another node. */
        const char *a[] = {"10.0.0.1"};
        assert_int_equal(match(t, a, 1, "gamma", &node, why), 0);
        assert_string_equal(t->nodes[node].name, "alpha");
        ntbf_topo_free(t);
}

static void test_log_sinks(void **state)
{
        (void)state;
        unsigned s = 0;
        assert_int_equal(ntbf__log_sinks_parse("stderr", &s), 0);
        assert_int_equal(s, NTBF_LOG_STDERR);
        assert_int_equal(ntbf__log_sinks_parse("file,syslog", &s), 0);
        assert_int_equal(s, NTBF_LOG_FILE | NTBF_LOG_SYSLOG);
        assert_int_equal(ntbf__log_sinks_parse("journal", &s), -EINVAL);
        assert_int_equal(ntbf__log_sinks_parse("", &s), -EINVAL);
        assert_int_equal(ntbf__log_sinks_parse("file,", &s), 0);
        assert_int_equal(ntbf__log_sinks_parse("filex", &s), -EINVAL);
}

static void test_user(void **state)
{
        (void)state;
        char why[512];
        uid_t uid = 1;
        gid_t gid = 1;
        assert_int_equal(ntbf__host_lookup_user("root", &uid, &gid, why, sizeof(why)), 0);
        assert_int_equal(uid, 0);
        assert_int_equal(ntbf__host_lookup_user("no-such-user-x", &uid, &gid, why, sizeof(why)),
                         -ENOENT);
        assert_non_null(strstr(why, "no user 'no-such-user-x'"));
        assert_int_equal(
            ntbf__host_lookup_user("root:no-such-group-x", &uid, &gid, why, sizeof(why)), -ENOENT);
        assert_non_null(strstr(why, "no group 'no-such-group-x'"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_by_address), cmocka_unit_test(test_by_name),
            cmocka_unit_test(test_errors),     cmocka_unit_test(test_log_sinks),
            cmocka_unit_test(test_user),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
