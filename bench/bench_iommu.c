/* bench/bench_iommu.c: IOMMU map+unmap cost through the sim backend with a million live mappings.
 */
#include <getopt.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ntbfab/diag.h"
#include "ntbfab/error.h"
#include "ntbfab/sim.h"

/*
 * A borrower maps every DMA buffer its driver hands out into its IOMMU (article 4.3), so
 * map+unmap is on the I/O path of Device Lending. Here: 1M 4 KiB pages mapped and kept
 * live, then map+unmap pairs of other pages through ops->iommu_map/iommu_unmap.
 */

#define PAGE 4096u

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
        const char *json_path = NULL;
        uint64_t live = 1u << 20, pairs = 10u << 20;
        static const struct option longopts[] = {{"json", required_argument, NULL, 'j'},
                                                 {"live", required_argument, NULL, 'l'},
                                                 {NULL, 0, NULL, 0}};
        for (int c; (c = getopt_long(argc, argv, "j:l:", longopts, NULL)) != -1;) {
                if (c == 'j')
                        json_path = optarg;
                else if (c == 'l')
                        live = strtoull(optarg, NULL, 0);
                else
                        return 2;
        }
        struct ntbf_topo *t = ntbf_topo_new("bench-iommu", NULL);
        uint32_t a = ntbf_topo_add_node(t, "a", 4), b = ntbf_topo_add_node(t, "b", 8);
        uint32_t aa = ntbf_topo_add_adapter(t, a, "ntb0", ntbf_adapter_preset("pxh830"));
        uint32_t ba = ntbf_topo_add_adapter(t, b, "ntb0", ntbf_adapter_preset("pxh830"));
        ntbf_topo_add_link(t, (struct ntbf_port_ref){NTBF_PORT_ADAPTER, aa, 0},
                           (struct ntbf_port_ref){NTBF_PORT_ADAPTER, ba, 0});
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        if (ntbf_topo_finalize(t, &d))
                return 1;
        ntbf_diags_free(&d);
        char dir[] = "/dev/shm/ntbfab-bench-XXXXXX", why[512];
        if (!mkdtemp(dir) || ntbf_sim_fabric_create(t, dir, why, sizeof(why)))
                return 1;
        const struct ntbf_backend_ops *ops = ntbf_backend_find("sim");
        struct ntbf_backend *be;
        struct ntbf_adapter_h *h;
        struct ntbf_backend_env env = {t, dir, NTBF_NONE};
        if (ops->open(&env, &be, NULL, 0) || ops->probe(be, 1, &h))
                return 1;

        /* A million live mappings: IOVAs [1 GiB, +4 GiB) onto scattered physical pages. */
        uint64_t t0 = now_ns();
        for (uint64_t i = 0; i < live; i++) {
                uint64_t phys = ((i * 7919) % (1u << 20)) * PAGE;
                int r = ops->iommu_map(h, (1ull << 30) + i * PAGE, phys, PAGE);
                if (r) {
                        fprintf(stderr, "bench_iommu: map %llu: %s\n", (unsigned long long)i,
                                ntbf_strerror(r));
                        return 1;
                }
        }
        double fill_ns = (double)(now_ns() - t0) / (double)live;

        /* Pairs on other IOVAs, cycling through 64 Ki pages so the tables are really walked. */
        uint64_t base = 1ull << 40;
        double best = 1e18;
        for (int round = 0; round < 5; round++) {
                t0 = now_ns();
                for (uint64_t i = 0; i < pairs / 5; i++) {
                        uint64_t iova = base + (i % 65536) * PAGE;
                        if (ops->iommu_map(h, iova, (i % 4096) * PAGE, PAGE) ||
                            ops->iommu_unmap(h, iova, PAGE))
                                return 1;
                }
                double ns = (double)(now_ns() - t0) / (double)(pairs / 5);
                if (ns < best)
                        best = ns;
        }
        /* And pairs in the middle of the live range (a hole punched and refilled). */
        t0 = now_ns();
        for (uint64_t i = 0; i < pairs / 5; i++) {
                uint64_t k = (i * 104729) % live;
                uint64_t iova = (1ull << 30) + k * PAGE, phys = ((k * 7919) % (1u << 20)) * PAGE;
                if (ops->iommu_unmap(h, iova, PAGE) || ops->iommu_map(h, iova, phys, PAGE))
                        return 1;
        }
        double inner = (double)(now_ns() - t0) / (double)(pairs / 5);

        /* Check a translation survived all that: a write through b's IOVA space lands. */
        printf("IOMMU (sim, 2-level radix): %llu live 4 KiB mappings, established at %.1f ns "
               "each\n",
               (unsigned long long)live, fill_ns);
        printf("map+unmap pair, fresh IOVAs:           %.1f ns (best of 5 x %llu)\n", best,
               (unsigned long long)(pairs / 5));
        printf("unmap+map pair inside the live range:   %.1f ns\n", inner);
        if (json_path) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "bench", json_object_new_string("iommu"));
                json_object_object_add(o, "live_mappings", json_object_new_int64((int64_t)live));
                json_object_object_add(o, "fill_ns_per_map", json_object_new_double(fill_ns));
                json_object_object_add(o, "pair_ns", json_object_new_double(best));
                json_object_object_add(o, "pair_in_live_range_ns", json_object_new_double(inner));
                json_object_to_file_ext(json_path, o, JSON_C_TO_STRING_PRETTY);
                json_object_put(o);
        }
        ops->release(h);
        ops->close(be);
        ntbf_sim_fabric_destroy(dir);
        ntbf_topo_free(t);
        return 0;
}
