/* tests/integration/test_cli.c: the ntbfab tool as a user runs it: exit codes, text, JSON. */
#include <json-c/json.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

static const char *ntbfab; /* path of the tool, from argv[1] */

struct run {
        int status;
        char *out, *err;
};

/* Run `ntbfab ARGS` (from the source root, as meson sets workdir), capturing both streams. */
static struct run run(const char *args)
{
        struct run r = {0};
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), "%s %s 2>/tmp/ntbfab-test-err.%d", ntbfab, args, getpid());
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        size_t cap = 1 << 16, n = 0;
        r.out = malloc(cap);
        size_t k;
        while ((k = fread(r.out + n, 1, cap - n - 1, p)) > 0) {
                n += k;
                if (n + 1 == cap)
                        r.out = realloc(r.out, cap *= 2);
        }
        r.out[n] = 0;
        int st = pclose(p);
        r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        char ep[64];
        snprintf(ep, sizeof(ep), "/tmp/ntbfab-test-err.%d", getpid());
        FILE *e = fopen(ep, "r");
        r.err = calloc(1, 1 << 16);
        if (e) {
                size_t m = fread(r.err, 1, (1 << 16) - 1, e);
                r.err[m] = 0;
                fclose(e);
        }
        remove(ep);
        return r;
}

static void done(struct run *r)
{
        free(r->out);
        free(r->err);
}

static struct json_object *json_of(const struct run *r)
{
        struct json_object *o = json_tokener_parse(r->out);
        if (!o)
                fail_msg("not JSON: %s", r->out);
        return o;
}

static struct json_object *get(struct json_object *o, const char *key)
{
        struct json_object *v = NULL;
        if (!json_object_object_get_ex(o, key, &v))
                fail_msg("no key '%s' in %s", key, json_object_to_json_string(o));
        return v;
}

#define Q "config/examples/quickstart.yaml"

static void test_validate(void **state)
{
        (void)state;
        struct run r = run("validate " Q);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "valid: cluster 'quickstart', 2 nodes, 2 adapters, 0 "
                                      "switches, 1 link, 2 devices"));
        done(&r);
        r = run("validate --json " Q " config/examples/cluster-60.yaml");
        assert_int_equal(r.status, 0);
        struct json_object *o = json_of(&r), *files = get(o, "files");
        assert_int_equal(json_object_array_length(files), 2);
        struct json_object *f1 = json_object_array_get_idx(files, 1);
        assert_true(json_object_get_boolean(get(f1, "valid")));
        assert_int_equal(json_object_get_int(get(get(f1, "summary"), "nodes")), 60);
        json_object_put(o);
        done(&r);
}

static void test_validate_errors(void **state)
{
        (void)state;
        /* One corpus file: its diagnostics go to stderr, the verdict to stdout, exit 1. */
        struct run r = run("validate tests/config-invalid/04-unknown-top-key.yaml");
        if (r.status == 0)
                fail_msg("accepted an invalid file");
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "tests/config-invalid/04-unknown-top-key.yaml:"));
        assert_non_null(strstr(r.err, ": error: "));
        assert_non_null(strstr(r.out, "invalid: "));
        done(&r);
        r = run("validate --json tests/config-invalid/04-unknown-top-key.yaml");
        assert_int_equal(r.status, 1);
        struct json_object *o = json_of(&r);
        struct json_object *f = json_object_array_get_idx(get(o, "files"), 0);
        assert_false(json_object_get_boolean(get(f, "valid")));
        struct json_object *d0 = json_object_array_get_idx(get(f, "diagnostics"), 0);
        assert_true(json_object_get_int(get(d0, "line")) > 0);
        assert_string_equal(json_object_get_string(get(d0, "severity")), "error");
        json_object_put(o);
        done(&r);
        r = run("validate /nonexistent/cluster.yaml");
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "/nonexistent/cluster.yaml"));
        done(&r);
}

/* A file too large is refused with its real size; what is not a regular file (a FIFO nobody
 * writes to, a directory) is refused at once instead of blocking the tool. */
static void test_validate_file_kinds(void **state)
{
        (void)state;
        char dir[] = "/tmp/ntbfab-cli-XXXXXX", path[128], args[256];
        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/big.yaml", dir);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        assert_int_equal(ftruncate(fileno(f), 100000000), 0);
        fclose(f);
        snprintf(args, sizeof(args), "validate %s", path);
        struct run r = run(args);
        assert_int_equal(r.status, 1);
        if (!strstr(r.err, "the file is 100000000 bytes"))
                fail_msg("size not reported: %s", r.err);
        done(&r);
        unlink(path);
        snprintf(path, sizeof(path), "%s/fifo.yaml", dir);
        assert_int_equal(mkfifo(path, 0600), 0);
        /* timeout(1) bounds a tool that would wait for a writer forever (status 124). */
        snprintf(args, sizeof(args), "validate %s", path);
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "timeout 20 %s %s", ntbfab, args);
        int st = system(cmd);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 1);
        r = run(args);
        assert_int_equal(r.status, 1);
        if (!strstr(r.err, "not a regular file"))
                fail_msg("FIFO not named: %s", r.err);
        done(&r);
        unlink(path);
        snprintf(args, sizeof(args), "validate %s", dir);
        r = run(args);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, dir));
        done(&r);
        rmdir(dir);
}

static void test_topology(void **state)
{
        (void)state;
        struct run r = run("topology --json " Q);
        assert_int_equal(r.status, 0);
        struct json_object *o = json_of(&r);
        struct json_object *a0 = json_object_array_get_idx(get(o, "adapters"), 0);
        assert_string_equal(json_object_get_string(get(a0, "model")), "pxh830");
        assert_int_equal(json_object_get_int64(get(a0, "window")), 1 << 30);
        assert_int_equal(json_object_get_int64(get(a0, "lut_entry_size")), 4 << 20);
        struct json_object *p0 = json_object_array_get_idx(get(a0, "ports"), 0);
        assert_string_equal(json_object_get_string(get(p0, "peer")), "borrower.ntb0");
        struct json_object *d0 = json_object_array_get_idx(get(o, "devices"), 0);
        struct json_object *b0 = json_object_array_get_idx(get(d0, "bars"), 0);
        assert_int_equal(json_object_get_int64(get(b0, "size")), 16384);
        assert_true(json_object_get_int64(get(b0, "address")) >= 0x80000000);
        json_object_put(o);
        done(&r);
        r = run("topology " Q);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "lender.nvme0"));
        assert_non_null(strstr(r.out, "256 x 4 MiB"));
        done(&r);
        /* Several windows: the Switchtec partition's LUT, then its direct window, in BAR2. */
        r = run("topology --json config/examples/switchtec.yaml");
        assert_int_equal(r.status, 0);
        o = json_of(&r);
        a0 = json_object_array_get_idx(get(o, "adapters"), 0);
        assert_true(json_object_get_boolean(get(a0, "rid_proxy")));
        assert_int_equal(json_object_get_int64(get(a0, "slots")), 513);
        struct json_object *ws = get(a0, "windows");
        assert_int_equal(json_object_array_length(ws), 2);
        struct json_object *w0 = json_object_array_get_idx(ws, 0);
        struct json_object *w1 = json_object_array_get_idx(ws, 1);
        assert_int_equal(json_object_get_int64(get(w0, "slots")), 512);
        assert_int_equal(json_object_get_int64(get(w0, "slot_size")), 64 << 10);
        assert_int_equal(json_object_get_int64(get(w0, "reserved")), 1);
        assert_int_equal(json_object_get_int64(get(w1, "first_slot")), 512);
        assert_int_equal(json_object_get_int64(get(w1, "bar")), 2);
        assert_true(json_object_get_boolean(get(w1, "natural_align")));
        assert_int_equal(json_object_get_int64(get(w1, "base")),
                         json_object_get_int64(get(w0, "base")) + (32 << 20));
        json_object_put(o);
        done(&r);
        r = run("topology config/examples/switchtec.yaml");
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "512 x 64 KiB + 1 x 32 MiB"));
        done(&r);
}

static void test_path(void **state)
{
        (void)state;
        struct run r = run("path --json " Q " borrower lender.nvme0");
        assert_int_equal(r.status, 0);
        struct json_object *o = json_of(&r);
        struct json_object *p = json_object_array_get_idx(get(o, "paths"), 0);
        assert_int_equal(json_object_get_int(get(p, "latency_ns")), 264);
        assert_int_equal(json_object_array_length(get(p, "hops")), 6);
        json_object_put(o);
        done(&r);
        /* A second cable-disjoint path does not exist: named, exit 1. */
        r = run("path " Q " borrower lender --disjoint 2");
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "every further path would reuse lender.ntb0 - "
                                      "borrower.ntb0"));
        done(&r);
        r = run("path " Q " borrower lender.nvme9");
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "did you mean 'nvme0'?"));
        done(&r);
        /* Through the 60-node cascade: sub, top, sub switches. */
        r = run("path --json config/examples/cluster-60.yaml node59 lender.nvme0");
        assert_int_equal(r.status, 0);
        o = json_of(&r);
        p = json_object_array_get_idx(get(o, "paths"), 0);
        assert_int_equal(json_object_get_int(get(p, "latency_ns")), 132 + 3 * 170 + 132);
        json_object_put(o);
        done(&r);
}

static void test_budget(void **state)
{
        (void)state;
        struct run r = run("budget --json --node node01 config/examples/cluster-60.yaml");
        assert_int_equal(r.status, 0);
        struct json_object *o = json_of(&r), *rows = get(o, "rows");
        bool saw_rid = false, saw_switch = false;
        for (size_t i = 0; i < json_object_array_length(rows); i++) {
                struct json_object *row = json_object_array_get_idx(rows, i);
                const char *obj = json_object_get_string(get(row, "object"));
                const char *b = json_object_get_string(get(row, "budget"));
                if (!strcmp(obj, "node01.ntb0") && !strcmp(b, "rid")) {
                        saw_rid = true;
                        assert_int_equal(json_object_get_int(get(row, "used")), 2);
                        assert_int_equal(json_object_get_int(get(row, "total")), 32);
                }
                if (!strcmp(b, "switch-rid")) {
                        saw_switch = true;
                        /* 60 CPUs x 2 requester IDs on every port of every switch. */
                        assert_int_equal(json_object_get_int(get(row, "used")), 120);
                }
                /* Only node01's own rows and the one switch it is cabled to. */
                if (strcmp(obj, "node01.ntb0") && strcmp(obj, "node01") && strcmp(obj, "sub1"))
                        fail_msg("row of %s shown for --node node01", obj);
        }
        assert_true(saw_rid);
        assert_true(saw_switch);
        json_object_put(o);
        done(&r);
}

static void test_plan(void **state)
{
        (void)state;
        struct run r = run("plan --json " Q " --borrow lender:nvme0 --by borrower");
        assert_int_equal(r.status, 0);
        struct json_object *o = json_of(&r);
        assert_true(json_object_get_boolean(get(o, "admitted")));
        struct json_object *res = get(o, "resources");
        bool rid = false, dma = false;
        for (size_t i = 0; i < json_object_array_length(res); i++) {
                struct json_object *x = json_object_array_get_idx(res, i);
                if (!strcmp(json_object_get_string(get(x, "kind")), "rid"))
                        rid = !strcmp(json_object_get_string(get(x, "object")), "lender.ntb0");
                if (!strcmp(json_object_get_string(get(x, "for")), "DMA window"))
                        dma = true;
        }
        assert_true(rid);
        assert_true(dma);
        assert_true(json_object_get_int64(get(get(o, "addresses"), "msi")) != 0);
        json_object_put(o);
        done(&r);
}

/* The article's figure (8.6): 30 devices per PXH830 requester table, the 31st refused. */
static void test_plan_count(void **state)
{
        (void)state;
        struct run r = run("plan " Q " --borrow lender:nvme0 --by borrower --count 40");
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.out, "30 of 40 borrows like lender.nvme0 by borrower fit; "
                                      "borrow 31 is refused: lender.ntb0: requester-ID table is "
                                      "full (32 of 32 used"));
        done(&r);
        r = run("plan --json " Q " --borrow lender:nvme0 --by borrower --count 30");
        assert_int_equal(r.status, 0);
        struct json_object *o = json_of(&r), *c = get(o, "count");
        assert_int_equal(json_object_get_int(get(c, "fit")), 30);
        json_object_put(o);
        done(&r);
        r = run("plan --json " Q " --borrow lender:nvme0 --by borrower --count 31");
        assert_int_equal(r.status, 1);
        o = json_of(&r);
        struct json_object *rf = get(get(get(o, "count"), "first_refusal"), "refusal");
        assert_string_equal(json_object_get_string(get(rf, "budget")), "rid");
        assert_string_equal(json_object_get_string(get(rf, "object")), "lender.ntb0");
        assert_int_equal(json_object_get_int(get(rf, "used")), 32);
        assert_int_equal(json_object_get_int(get(rf, "total")), 32);
        json_object_put(o);
        done(&r);
}

static void test_usage(void **state)
{
        (void)state;
        struct run r = run("frobnicate");
        assert_int_equal(r.status, 2);
        done(&r);
        r = run("pth " Q);
        assert_int_equal(r.status, 2);
        assert_non_null(strstr(r.err, "did you mean 'path'?"));
        done(&r);
        r = run("plan " Q " --by borrower");
        assert_int_equal(r.status, 2);
        done(&r);
        r = run("plan " Q " --borrow lender:nvme0 --by borrower --dma-window 1GB");
        assert_int_equal(r.status, 2);
        assert_non_null(strstr(r.err, "ambiguous"));
        done(&r);
        r = run("budget --frob " Q);
        assert_int_equal(r.status, 2);
        assert_non_null(strstr(r.err, "unknown option '--frob'"));
        done(&r);
        r = run("path " Q " borrower");
        assert_int_equal(r.status, 2);
        done(&r);
        r = run("--help");
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "plan"));
        done(&r);
        r = run("plan --help");
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "--count N"));
        done(&r);
        r = run("");
        assert_int_equal(r.status, 2);
        done(&r);
}

/*
 * `ntbfab up` with any backend that runs on one machine (the registry's create): two daemons
 * on the ivshmem backend, whose region is the file its create made in the instance directory.
 * Ports 18301-18302 (tests/README.md).
 */
static void test_up_ivshmem(void **state)
{
        (void)state;
        char dir[] = "/dev/shm/ntbfab-cliup-XXXXXX", file[128], cmd[512], p[256];
        assert_non_null(mkdtemp(dir));
        snprintf(file, sizeof(file), "%s.yaml", dir);
        FILE *f = fopen(file, "w");
        assert_non_null(f);
        fputs("cluster: {name: cli-up-ivshmem, backend: ivshmem, manager: a}\n"
              "nodes:\n"
              "  - {name: a, id: 4, address: 127.0.0.1:18301, iommu: false,\n"
              "     adapters: [{name: ivs0, model: ivshmem}]}\n"
              "  - {name: b, id: 8, address: 127.0.0.1:18302, iommu: false,\n"
              "     adapters: [{name: ivs0, model: ivshmem}]}\n"
              "links: [[a.ivs0, b.ivs0]]\n",
              f);
        fclose(f);
        snprintf(cmd, sizeof(cmd), "up --dir %s/i %s", dir, file);
        struct run r = run(cmd);
        bool up = r.status == 0;
        char err[4096];
        snprintf(err, sizeof(err), "%s", r.err);
        if (up) {
                assert_non_null(strstr(r.out, "cluster 'cli-up-ivshmem' is up in"));
                snprintf(p, sizeof(p), "%s/i/ivshmem", dir); /* the backend's create made it */
                up = access(p, F_OK) == 0;
        }
        done(&r);
        /* Both daemons opened the same region: the link between them comes up. */
        bool link = false;
        snprintf(cmd, sizeof(cmd), "status --json --dir %s/i", dir);
        for (int i = 0; up && i < 200 && !link; i++) {
                r = run(cmd);
                struct json_object *o = r.status ? NULL : json_tokener_parse(r.out), *cs, *ls, *st;
                if (o && json_object_object_get_ex(o, "cluster", &cs) &&
                    json_object_object_get_ex(cs, "links", &ls) &&
                    json_object_array_length(ls) == 1 &&
                    json_object_object_get_ex(json_object_array_get_idx(ls, 0), "up", &st))
                        link = json_object_get_boolean(st);
                json_object_put(o);
                done(&r);
                if (!link)
                        usleep(50 * 1000);
        }
        /* No fault op on ivshmem: refused, through the vtable. */
        snprintf(cmd, sizeof(cmd), "fault --dir %s/i link-down a.ivs0", dir);
        r = run(cmd);
        int fault_status = r.status;
        bool fault_said = strstr(r.err, "the 'ivshmem' backend cannot inject faults") != NULL;
        done(&r);
        snprintf(cmd, sizeof(cmd), "down --dir %s/i", dir);
        r = run(cmd);
        int down_status = r.status;
        done(&r);
        snprintf(p, sizeof(p), "%s/i/ivshmem", dir);
        bool region_left = access(p, F_OK) == 0;
        snprintf(cmd, sizeof(cmd), "rm -rf %s %s", dir, file);
        assert_int_equal(system(cmd), 0);
        if (!up)
                fail_msg("ntbfab up failed: %s", err);
        assert_true(link);
        assert_int_equal(fault_status, 1);
        assert_true(fault_said);
        assert_int_equal(down_status, 0);
        assert_false(region_left); /* down ran the backend's destroy */
        /* A backend that drives hardware (or is not built here) is not started by up. */
        r = run("up --dir /dev/shm/ntbfab-cliup-none config/examples/intel-b2b.yaml");
        assert_int_equal(r.status, 1);
        assert_true(strstr(r.err, "backend 'linux-ntb' is registered but not built") ||
                    strstr(r.err, "the 'linux-ntb' backend, which drives hardware"));
        done(&r);
        assert_int_equal(access("/dev/shm/ntbfab-cliup-none", F_OK), -1);
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr, "usage: %s PATH-TO-NTBFAB\n", argv[0]);
                return 2;
        }
        ntbfab = argv[1];
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_validate),
            cmocka_unit_test(test_validate_errors),
            cmocka_unit_test(test_validate_file_kinds),
            cmocka_unit_test(test_topology),
            cmocka_unit_test(test_path),
            cmocka_unit_test(test_budget),
            cmocka_unit_test(test_plan),
            cmocka_unit_test(test_plan_count),
            cmocka_unit_test(test_usage),
            cmocka_unit_test(test_up_ivshmem),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
