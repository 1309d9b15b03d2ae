/* bench/bench_borrow.c: borrow + return round trips through the daemons of the quickstart cluster.
 */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "ntbfab/rpc.h"

/*
 * One round trip is what an operator's `ntbfab borrow` + `ntbfab return` cost without the
 * process start: device.borrow on the borrower's daemon (which asks the fabric manager on
 * the lender over authenticated TCP, which admits, commits, records in SQLite and has both
 * nodes program their adapters) and device.return (the same backwards). The cluster is the
 * quickstart one, brought up with the built binaries in a fresh directory.
 */

static int run(const char *cmd)
{
        int st = system(cmd);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv)
{
        const char *json_path = NULL, *build = "build", *src = ".";
        unsigned n = 2000, warm = 100;
        static const struct option lo[] = {{"json", required_argument, NULL, 'j'},
                                           {"count", required_argument, NULL, 'n'},
                                           {"build", required_argument, NULL, 'b'},
                                           {"src", required_argument, NULL, 's'},
                                           {NULL, 0, NULL, 0}};
        for (int c; (c = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
                if (c == 'j')
                        json_path = optarg;
                else if (c == 'n')
                        n = (unsigned)strtoul(optarg, NULL, 0);
                else if (c == 'b')
                        build = optarg;
                else if (c == 's')
                        src = optarg;
                else {
                        fprintf(stderr, "usage: bench_borrow [--json FILE] [--count N] [--build "
                                        "DIR] [--src DIR]\n");
                        return 2;
                }
        }
        if (n < 10)
                n = 10;
        char dir[] = "/dev/shm/ntbfab-bench-XXXXXX", cmd[4096];
        if (!mkdtemp(dir)) {
                perror("mkdtemp");
                return 1;
        }
        snprintf(cmd, sizeof(cmd),
                 "NTBFAB_DAEMON=%s/daemon/ntbfabd NTBFAB_SIMD=%s/ntbfab-simd %s/tools/ntbfab up "
                 "%s/config/examples/quickstart.yaml --dir %s > /dev/null",
                 build, build, build, src, dir);
        if (run(cmd)) {
                fprintf(stderr, "bench_borrow: cannot bring the quickstart cluster up in %s\n",
                        dir);
                return 1;
        }
        char path[4200];
        struct ntbf_rpc *c;
        ntbf_rpc_socket_path(dir, "borrower", path, sizeof(path));
        int r = ntbf_rpc_connect(path, &c);
        uint64_t *t = calloc(n, sizeof(*t));
        for (unsigned i = 0; !r && i < warm + n; i++) {
                struct json_object *p = json_object_new_object(), *res;
                json_object_object_add(p, "fdid", json_object_new_int(0x4001));
                uint64_t t0 = bench_now_ns();
                r = ntbf_rpc_call(c, "device.borrow", p, &res, 10000);
                json_object_put(res);
                if (!r) {
                        p = json_object_new_object();
                        json_object_object_add(p, "fdid", json_object_new_int(0x4001));
                        r = ntbf_rpc_call(c, "device.return", p, &res, 10000);
                        json_object_put(res);
                }
                if (i >= warm)
                        t[i - warm] = bench_now_ns() - t0;
        }
        if (r)
                fprintf(stderr, "bench_borrow: %s\n", ntbf_rpc_error(c));
        ntbf_rpc_close(c);
        snprintf(cmd, sizeof(cmd), "%s/tools/ntbfab down --dir %s > /dev/null; rm -rf %s", build,
                 dir, dir);
        run(cmd);
        if (r)
                return 1;
        uint64_t sum = 0;
        for (unsigned i = 0; i < n; i++)
                sum += t[i];
        double mean = (double)sum / n / 1e6;
        double p50 = bench_percentile(t, n, 50) / 1e6, p99 = bench_percentile(t, n, 99) / 1e6;
        double lo_ = t[0] / 1e6, hi = t[n - 1] / 1e6;
        printf(
            "borrow + return round trip on the quickstart cluster (loopback TCP, %u runs after "
            "%u warm-up):\n  median %.3f ms, p99 %.3f ms, mean %.3f ms, min %.3f ms, max %.3f ms "
            "(target: median <= 2 ms)\n",
            n, warm, p50, p99, mean, lo_, hi);
        if (json_path) {
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "bench", json_object_new_string("borrow_return"));
                json_object_object_add(o, "cluster", json_object_new_string("quickstart"));
                json_object_object_add(o, "runs", json_object_new_int((int)n));
                json_object_object_add(o, "median_ms", json_object_new_double(p50));
                json_object_object_add(o, "p99_ms", json_object_new_double(p99));
                json_object_object_add(o, "mean_ms", json_object_new_double(mean));
                json_object_object_add(o, "min_ms", json_object_new_double(lo_));
                json_object_object_add(o, "max_ms", json_object_new_double(hi));
                if (json_object_to_file_ext(json_path, o, JSON_C_TO_STRING_PRETTY))
                        fprintf(stderr, "bench_borrow: cannot write %s\n", json_path);
                json_object_put(o);
        }
        free(t);
        return 0;
}
