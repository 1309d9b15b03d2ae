/* bench/bench_load.c: YAML load + validate time and peak memory for cluster files. */
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "ntbfab/budget.h"
#include "ntbfab/config.h"

/* One full validation, as `ntbfab validate` does it: parse, finalize, budget baseline. */
static int validate(const char *path)
{
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        struct ntbf_topo *t = NULL;
        struct ntbf_state *s = NULL;
        int r = ntbf_config_load(path, &t, &d);
        if (!r)
                r = ntbf_state_new(t, &s, &d);
        if (r)
                ntbf_diags_print(&d, stderr);
        ntbf_state_free(s);
        ntbf_topo_free(t);
        ntbf_diags_free(&d);
        return r;
}

/* Peak RSS of one validation, measured in a fresh child process. */
static long peak_rss_kib(const char *path)
{
        pid_t pid = fork();
        if (pid == 0)
                _exit(validate(path) ? 1 : 0);
        int st;
        struct rusage ru;
        if (pid < 0 || wait4(pid, &st, 0, &ru) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
                return -1;
        return ru.ru_maxrss;
}

int main(int argc, char **argv)
{
        const char *json_out = NULL;
        unsigned runs = 50;
        struct json_object *res = json_object_new_array();
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--json") && i + 1 < argc) {
                        json_out = argv[++i];
                        continue;
                }
                if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
                        runs = (unsigned)strtoul(argv[++i], NULL, 10);
                        continue;
                }
                const char *path = argv[i];
                uint64_t *ns = calloc(runs ? runs : 1, sizeof(*ns));
                for (unsigned k = 0; k < runs; k++) {
                        uint64_t t0 = bench_now_ns();
                        if (validate(path))
                                return 1;
                        ns[k] = bench_now_ns() - t0;
                }
                uint64_t med = bench_percentile(ns, runs, 50), max = ns[runs - 1];
                long rss = peak_rss_kib(path);
                printf("%-40s load+validate median %8.3f ms  max %8.3f ms  peak RSS %6.1f MiB  "
                       "(%u runs)\n",
                       path, med / 1e6, max / 1e6, rss / 1024.0, runs);
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "file", json_object_new_string(path));
                json_object_object_add(o, "runs", json_object_new_int64(runs));
                json_object_object_add(o, "median_ns", json_object_new_int64((int64_t)med));
                json_object_object_add(o, "max_ns", json_object_new_int64((int64_t)max));
                json_object_object_add(o, "peak_rss_kib", json_object_new_int64(rss));
                json_object_array_add(res, o);
                free(ns);
        }
        struct json_object *top = json_object_new_object();
        json_object_object_add(top, "bench", json_object_new_string("load"));
        json_object_object_add(top, "results", res);
        if (json_out && json_object_to_file_ext(json_out, top, JSON_C_TO_STRING_PRETTY)) {
                fprintf(stderr, "cannot write %s\n", json_out);
                return 1;
        }
        json_object_put(top);
        return 0;
}
