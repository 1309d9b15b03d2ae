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

/*
 * The cluster's processes, whose CPU time the run reads: on a shared machine the wall-clock
 * figures move with the load of others, the CPU each process spends per round trip less (it is
 * what a change to the path changes).
 */
static const char *const procs[] = {"lender", "borrower", "simd"};
#define NPROCS (sizeof(procs) / sizeof(procs[0]))

/* User + system seconds of the process whose pid DIR/run/NAME.pid holds (all its threads);
 * negative if it cannot be read. */
static double proc_cpu_s(const char *dir, const char *name)
{
        char path[4200], buf[1024];
        long pid = 0;
        snprintf(path, sizeof(path), "%s/run/%s.pid", dir, name);
        FILE *f = fopen(path, "r");
        if (!f)
                return -1;
        if (fscanf(f, "%ld", &pid) != 1)
                pid = 0;
        fclose(f);
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
        if (pid <= 0 || !(f = fopen(path, "r")))
                return -1;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        /* Fields after the command name (which may hold spaces): state is field 3, utime 14,
         * stime 15. */
        char *p = strrchr(buf, ')');
        unsigned long long ut, st;
        if (!p ||
            sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
                return -1;
        return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
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
        /* The daemons inherit this environment: the tests' checks (a whole-state recheck
         * after each of the manager's changes, crash points) are not what an operator runs. */
        static const char *const test_only[] = {"NTBFAB_FM_CHECK", "NTBFAB_CRASH_AT"};
        for (size_t k = 0; k < sizeof(test_only) / sizeof(test_only[0]); k++)
                if (getenv(test_only[k])) {
                        fprintf(stderr, "bench_borrow: %s is set; the cluster runs without it\n",
                                test_only[k]);
                        unsetenv(test_only[k]);
                }
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
                /* `ntbfab up` stopped what it started; the daemons' errors are shown, and
                 * the directory goes (each failed run left 1 GiB sparse images in /dev/shm). */
                fprintf(stderr, "bench_borrow: cannot bring the quickstart cluster up (is another "
                                "cluster on 127.0.0.1:7700 and 127.0.0.2:7700?)\n");
                snprintf(cmd, sizeof(cmd), "cat %s/log/*.err >&2 2>/dev/null; rm -rf %s", dir, dir);
                run(cmd);
                return 1;
        }
        char path[4200];
        struct ntbf_rpc *c;
        ntbf_rpc_socket_path(dir, "borrower", path, sizeof(path));
        int r = ntbf_rpc_connect(path, &c);
        uint64_t *t = calloc(n, sizeof(*t));
        double cpu0[NPROCS] = {-1, -1, -1}, cpu[NPROCS];
        for (unsigned i = 0; !r && i < warm + n; i++) {
                if (i == warm)
                        for (size_t k = 0; k < NPROCS; k++)
                                cpu0[k] = proc_cpu_s(dir, procs[k]);
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
        for (size_t k = 0; k < NPROCS; k++) {
                double now = proc_cpu_s(dir, procs[k]);
                cpu[k] = cpu0[k] < 0 || now < 0 ? -1 : (now - cpu0[k]) * 1e3 / n;
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
        printf("  CPU per round trip:");
        for (size_t k = 0; k < NPROCS; k++)
                printf(cpu[k] < 0 ? " %s ?" : " %s %.3f ms", procs[k], cpu[k]);
        printf(" (load moves these less than the wall-clock figures)\n");
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
                struct json_object *cj = json_object_new_object();
                for (size_t k = 0; k < NPROCS; k++)
                        if (cpu[k] >= 0)
                                json_object_object_add(cj, procs[k],
                                                       json_object_new_double(cpu[k]));
                json_object_object_add(o, "cpu_ms_per_round_trip", cj);
                if (json_object_to_file_ext(json_path, o, JSON_C_TO_STRING_PRETTY))
                        fprintf(stderr, "bench_borrow: cannot write %s\n", json_path);
                json_object_put(o);
        }
        free(t);
        return 0;
}
