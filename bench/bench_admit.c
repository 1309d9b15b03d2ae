/* bench/bench_admit.c: admission decision time (path + budget) on cluster files. */
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "ntbfab/budget.h"
#include "ntbfab/config.h"

/*
 * For each file: load, then time ntbf_admit() of "borrow the lender's NVMe by node k" for
 * borrowers k spread over the fabric (a dry run: nothing committed, as `ntbfab plan` does).
 * Each sample is one decision; we report median and p99 over all samples.
 */
static struct json_object *bench_file(const char *path, unsigned samples)
{
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        struct ntbf_topo *t = NULL;
        struct ntbf_state *s = NULL;
        if (ntbf_config_load(path, &t, &d) || ntbf_state_new(t, &s, &d)) {
                ntbf_diags_print(&d, stderr);
                ntbf_diags_free(&d);
                ntbf_topo_free(t);
                return NULL;
        }
        ntbf_diags_free(&d);
        uint32_t dev = NTBF_NONE;
        for (uint32_t i = 0; i < t->ndevices && dev == NTBF_NONE; i++)
                if (t->devices[i].sim.model == NTBF_SIM_NVME)
                        dev = i;
        if (dev == NTBF_NONE) {
                fprintf(stderr, "%s: no NVMe to borrow\n", path);
                return NULL;
        }
        uint64_t *ns = calloc(samples, sizeof(*ns));
        struct ntbf_plan p;
        ntbf_plan_init(&p);
        unsigned refused = 0;
        for (unsigned i = 0; i < samples + samples / 10; i++) {
                struct ntbf_request rq;
                ntbf_request_init(&rq, NTBF_REQ_BORROW);
                rq.device = dev;
                rq.by = (uint32_t)((i * 7919u) % t->nnodes);
                if (rq.by == t->devices[dev].node)
                        rq.by = (rq.by + 1) % t->nnodes;
                uint64_t t0 = bench_now_ns();
                int r = ntbf_admit(s, &rq, &p);
                uint64_t t1 = bench_now_ns();
                ntbf_plan_free(&p);
                refused += r != 0;
                if (i >= samples / 10) /* the first tenth warms caches */
                        ns[i - samples / 10] = t1 - t0;
        }
        uint64_t med = bench_percentile(ns, samples, 50), p99 = bench_percentile(ns, samples, 99);
        printf("%-40s nodes %5u switches %3u  admit median %8.2f us  p99 %8.2f us  (%u "
               "samples%s)\n",
               path, t->nnodes, t->nswitches, med / 1000.0, p99 / 1000.0, samples,
               refused ? ", some refused" : "");
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "file", json_object_new_string(path));
        json_object_object_add(o, "nodes", json_object_new_int64(t->nnodes));
        json_object_object_add(o, "switches", json_object_new_int64(t->nswitches));
        json_object_object_add(o, "samples", json_object_new_int64(samples));
        json_object_object_add(o, "median_ns", json_object_new_int64((int64_t)med));
        json_object_object_add(o, "p99_ns", json_object_new_int64((int64_t)p99));
        json_object_object_add(o, "refused", json_object_new_int64(refused));
        free(ns);
        ntbf_state_free(s);
        ntbf_topo_free(t);
        return o;
}

int main(int argc, char **argv)
{
        const char *json_out = NULL;
        unsigned samples = 20000;
        struct json_object *res = json_object_new_array();
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--json") && i + 1 < argc) {
                        json_out = argv[++i];
                        continue;
                }
                if (!strcmp(argv[i], "--samples") && i + 1 < argc) {
                        samples = (unsigned)strtoul(argv[++i], NULL, 10);
                        continue;
                }
                struct json_object *o = bench_file(argv[i], samples ? samples : 1);
                if (!o)
                        return 1;
                json_object_array_add(res, o);
        }
        struct json_object *top = json_object_new_object();
        json_object_object_add(top, "bench", json_object_new_string("admit"));
        json_object_object_add(top, "results", res);
        if (json_out && json_object_to_file_ext(json_out, top, JSON_C_TO_STRING_PRETTY)) {
                fprintf(stderr, "cannot write %s\n", json_out);
                return 1;
        }
        json_object_put(top);
        return 0;
}
