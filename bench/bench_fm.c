/* bench/bench_fm.c: the fabric manager's cost per mutation as its allocations grow. */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "fm.h"
#include "log.h"
#include "ntbfab/config.h"
#include "ids.h"
#include "ntbfab/error.h"

/*
 * The manager alone, in this process: the cluster file's nodes register with their lent
 * devices, every program request is answered at once (no sockets, no hardware), and the
 * database is SQLite in /dev/shm as the daemon's. Borrowers take shared borrows of the lent
 * devices but the last, round robin, until `--allocs` exist (or the budgets refuse); at each
 * level in between, one more borrower borrows and returns the last `--count` times (give it
 * a node of its own: genfabric --lenders). A mutation's cost
 * is what the manager spends deciding, recording and computing what to program: the part
 * that grows with the fabric's allocations.
 */

static uint64_t now_ms(void *ctx)
{
        (void)ctx;
        return bench_now_ns() / 1000000u;
}

static void request(void *ctx, uint32_t node, const char *m, struct json_object *p,
                    ntbf__done_fn cb, void *arg)
{
        (void)ctx, (void)node, (void)m;
        json_object_put(p);
        cb(arg, 0, NULL, json_object_new_object());
}

static void notify(void *ctx, uint32_t node, const char *m, struct json_object *p)
{
        (void)ctx, (void)node, (void)m;
        json_object_put(p);
}

static bool connected(void *ctx, uint32_t node)
{
        (void)ctx, (void)node;
        return true;
}

struct ans {
        int err;
        char msg[512];
};

static void got(void *arg, int err, const char *msg, struct json_object *res)
{
        struct ans *a = arg;
        a->err = err;
        snprintf(a->msg, sizeof(a->msg), "%s", msg ? msg : "");
        json_object_put(res);
}

static int call(struct ntbf__fm *fm, uint32_t from, const char *m, const char *params,
                struct ans *a)
{
        struct json_object *p = json_tokener_parse(params);
        a->err = -EINPROGRESS;
        ntbf__fm_request(fm, from, m, p, got, a);
        json_object_put(p);
        return a->err;
}

/* The database and its journals, removed however the benchmark ends. */
static char db[] = "/dev/shm/ntbfab-bench-fm-XXXXXX";

static void remove_db(void)
{
        ntbf__store_remove(db);
}

int main(int argc, char **argv)
{
        const char *json_path = NULL;
        unsigned count = 200, target = 1000;
        static const struct option lo[] = {{"json", required_argument, NULL, 'j'},
                                           {"count", required_argument, NULL, 'n'},
                                           {"allocs", required_argument, NULL, 'a'},
                                           {NULL, 0, NULL, 0}};
        for (int c; (c = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
                if (c == 'j')
                        json_path = optarg;
                else if (c == 'n')
                        count = (unsigned)strtoul(optarg, NULL, 0);
                else if (c == 'a')
                        target = (unsigned)strtoul(optarg, NULL, 0);
                else
                        goto usage;
        }
        if (optind + 1 != argc) {
        usage:
                fprintf(stderr, "usage: bench_fm [--json FILE] [--count N] [--allocs N] "
                                "CLUSTER.yaml\n");
                return 2;
        }
        ntbf__log_open("bench_fm", NTBF_LOG_STDERR, NULL, NTBF_LOG_WARN);
        struct ntbf_topo *t;
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        if (ntbf_config_load(argv[optind], &t, &d)) {
                ntbf_diags_print(&d, stderr);
                return 1;
        }
        ntbf_diags_free(&d);
        char why[512];
        int fd = mkstemp(db);
        if (fd < 0)
                return perror("mkstemp"), 1;
        close(fd);
        unlink(db);
        atexit(remove_db);
        struct ntbf__store *st;
        struct ntbf__fm *fm;
        struct ntbf__fm_net net = {NULL, request, notify, now_ms, connected, NULL, NULL};
        if (ntbf__store_open(db, &st, why, sizeof(why)) ||
            ntbf__fm_new(t, 0, st, &net, &fm, why, sizeof(why))) {
                fprintf(stderr, "bench_fm: %s\n", why);
                return 1;
        }
        /* Registration: every node with its lent devices; the others borrow. */
        uint32_t *devs = calloc(t->ndevices + 1, sizeof(*devs)), *by = calloc(t->nnodes, 4);
        uint32_t ndev = 0, nby = 0;
        struct ans a;
        for (uint32_t n = 0; n < t->nnodes; n++) {
                char p[4096] = "{\"lends\":[";
                size_t o = strlen(p);
                for (uint32_t i = 0; i < t->nodes[n].ndevices; i++) {
                        uint32_t dv = t->nodes[n].devices[i];
                        if (!t->devices[dv].lend || o > sizeof(p) - 64)
                                continue;
                        devs[ndev] = ntbf__fdid_of(t, dv, 0);
                        o += (size_t)snprintf(p + o, sizeof(p) - o, "%s{\"fdid\":%u}",
                                              ndev && p[o - 1] != '[' ? "," : "", devs[ndev]);
                        ndev++;
                }
                snprintf(p + o, sizeof(p) - o, "]}");
                if (call(fm, n, "register", p, &a))
                        return fprintf(stderr, "bench_fm: register: %s\n", a.msg), 1;
                if (!t->nodes[n].ndevices)
                        by[nby++] = n;
        }
        if (ndev < 2 || nby < 2)
                return fprintf(stderr, "bench_fm: the cluster needs two lent devices and two "
                                       "nodes without devices\n"),
                       1;
        printf("bench_fm: %s: %u nodes, %u lent devices, %u borrowers; %u borrow+return "
               "cycles per level\n",
               t->name, t->nnodes, ndev, nby, count);
        printf("%10s %14s %14s %14s\n", "allocs", "median us", "p99 us", "vs none");
        struct json_object *levels = json_object_new_array();
        uint32_t made = 0, k = 0;
        uint64_t *v = calloc(count, sizeof(*v)), base = 0;
        /* The measuring borrower is the last; the others fill. */
        uint32_t me = by[--nby];
        for (unsigned level = 0;; level = level ? level * 2 : 125) {
                while (made < level && k < (uint64_t)nby * (ndev - 1)) {
                        char p[128];
                        snprintf(p, sizeof(p),
                                 "{\"fdid\":%u,\"mode\":\"shared\",\"dma_window\":1048576}",
                                 devs[k % (ndev - 1)]);
                        if (!call(fm, by[k / (ndev - 1) % nby], "borrow", p, &a))
                                made++;
                        k++;
                }
                if (made < level && level > 0)
                        break; /* the budgets refuse more */
                char p[96];
                snprintf(p, sizeof(p), "{\"fdid\":%u,\"mode\":\"shared\"}", devs[ndev - 1]);
                for (unsigned i = 0; i < count; i++) {
                        uint64_t t0 = bench_now_ns();
                        if (call(fm, me, "borrow", p, &a) || call(fm, me, "return", p, &a))
                                return fprintf(stderr, "bench_fm: %s\n", a.msg), 1;
                        v[i] = (bench_now_ns() - t0) / 2;
                }
                uint64_t med = bench_percentile(v, count, 50), p99 = bench_percentile(v, count, 99);
                if (!base)
                        base = med ? med : 1;
                printf("%10u %14.1f %14.1f %13.2fx\n", made, med / 1e3, p99 / 1e3,
                       (double)med / (double)base);
                struct json_object *l = json_object_new_object();
                json_object_object_add(l, "allocations", json_object_new_uint64(made));
                json_object_object_add(l, "median_ns", json_object_new_uint64(med));
                json_object_object_add(l, "p99_ns", json_object_new_uint64(p99));
                json_object_array_add(levels, l);
                if (made >= target)
                        break;
        }
        if (json_path) {
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "bench", json_object_new_string("fm"));
                json_object_object_add(o, "cluster", json_object_new_string(t->name));
                json_object_object_add(o, "cycles", json_object_new_uint64(count));
                json_object_object_add(o, "levels", levels);
                json_object_to_file_ext(json_path, o, JSON_C_TO_STRING_PRETTY);
                json_object_put(o);
        } else {
                json_object_put(levels);
        }
        free(v);
        free(devs);
        free(by);
        ntbf__fm_free(fm);
        ntbf__store_close(st);
        ntbf_topo_free(t);
        return 0;
}
