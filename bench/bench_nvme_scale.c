/* bench/bench_nvme_scale.c: aggregate IOPS of 1 to 30 clients sharing one NVMe (7.4.2). */
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvmefx.h"

/*
 * The 31-node cluster of tests/integration/nvme-31.yaml on ports 17820-17850 (the test's
 * 17720-17750 moved by 100, so both can run at once): a manager on the lender, then N clients
 * on N nodes, each with its own queue pair, reading 4 KiB at random in a loop (queue depth 1,
 * polling, as the article's clients did) for the same time, all started together
 * (--together). Aggregate IOPS is the sum of the clients'. On a machine with few CPUs the
 * clients' polling competes with the simulated drive for them: the figures say what this
 * machine does, not what the design limits.
 */

#define FDID 0x4000u

int main(int argc, char **argv)
{
        const char *json_path = NULL, *build = "build", *src = ".";
        uint64_t secs = 3;
        static const struct option lo[] = {{"json", 1, NULL, 'j'},
                                           {"build", 1, NULL, 'b'},
                                           {"src", 1, NULL, 's'},
                                           {"seconds", 1, NULL, 't'},
                                           {NULL, 0, NULL, 0}};
        for (int c; (c = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
                if (c == 'j')
                        json_path = optarg;
                else if (c == 'b')
                        build = optarg;
                else if (c == 's')
                        src = optarg;
                else if (c == 't')
                        secs = strtoull(optarg, NULL, 0);
                else {
                        fprintf(stderr, "usage: bench_nvme_scale [--json FILE] [--build DIR] "
                                        "[--src DIR] [--seconds S]\n");
                        return 2;
                }
        }
        char path[1024];
        snprintf(path, sizeof(path), "%s/tests/integration/nvme-31.yaml", src);
        static const char *const from[] = {"127.0.0.1:177", "name: nvme31"};
        static const char *const to[] = {"127.0.0.1:178", "name: nvme31-bench"};
        char *text = nb_rewrite(path, from, to, 2);
        static struct nb b;
        if (!text || nb_up(&b, build, text))
                return 1;
        free(text);
        int ret = 1;
        pid_t m = nb_manager(&b, "lender", FDID);
        if (m < 0)
                goto out;
        static const unsigned counts[] = {1, 2, 4, 8, 30};
        struct json_object *rows = json_object_new_array();
        printf("4 KiB random reads, queue depth 1 per client, %" PRIu64
               " s, clients on separate nodes\n",
               secs);
        printf("  %7s %14s %14s %14s %12s %12s\n", "clients", "aggregate IOPS", "min client",
               "max client", "median ns", "p99 ns");
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
                unsigned n = counts[k];
                pid_t p[30];
                for (unsigned i = 0; i < n; i++) {
                        char node[16], name[48];
                        snprintf(node, sizeof(node), "c%02u", i + 1);
                        snprintf(name, sizeof(name), "scale-%u-%s", n, node);
                        p[i] = nb_start(&b, node, name,
                                        "bench --fdid 0x%x --rw randread --bs 4KiB --qd 1 --time "
                                        "%" PRIu64 "s --together %u --timeout 30s --json",
                                        FDID, secs, n);
                }
                double sum = 0, low = 1e18, hi = 0, p50 = 0, p99 = 0;
                for (unsigned i = 0; i < n; i++) {
                        char name[48];
                        snprintf(name, sizeof(name), "scale-%u-c%02u", n, i + 1);
                        if (nb_wait(p[i], (int)(secs * 1000 + 180000))) {
                                fprintf(stderr, "bench_nvme_scale: %s/%s.out failed\n", b.dir,
                                        name);
                                goto out;
                        }
                        struct json_object *j = nb_json(&b, name);
                        double iops = nb_num(j, "result.iops");
                        sum += iops;
                        low = iops < low ? iops : low;
                        hi = iops > hi ? iops : hi;
                        p50 += nb_num(j, "result.latency_ns.p50") / n;
                        p99 = nb_num(j, "result.latency_ns.p99") > p99
                                  ? nb_num(j, "result.latency_ns.p99")
                                  : p99;
                        json_object_put(j);
                }
                printf("  %7u %14.0f %14.0f %14.0f %12.0f %12.0f\n", n, sum, low, hi, p50, p99);
                struct json_object *r = json_object_new_object();
                json_object_object_add(r, "clients", json_object_new_int((int)n));
                json_object_object_add(r, "aggregate_iops", json_object_new_double(sum));
                json_object_object_add(r, "min_client_iops", json_object_new_double(low));
                json_object_object_add(r, "max_client_iops", json_object_new_double(hi));
                json_object_object_add(r, "mean_client_median_ns", json_object_new_double(p50));
                json_object_object_add(r, "worst_client_p99_ns", json_object_new_double(p99));
                json_object_array_add(rows, r);
        }
        if (json_path) {
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "benchmark", json_object_new_string("nvme_scale"));
                json_object_object_add(o, "seconds", json_object_new_int((int)secs));
                json_object_object_add(o, "rows", rows);
                json_object_to_file_ext(json_path, o, JSON_C_TO_STRING_PRETTY);
                json_object_put(o);
        } else {
                json_object_put(rows);
        }
        ret = 0;
out:
        if (m > 0) {
                kill(m, SIGTERM);
                nb_wait(m, 15000);
        }
        nb_down(&b);
        return ret;
}
