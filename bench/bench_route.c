/* bench/bench_route.c: what routing one transaction costs in the simulated fabric. */
#include <getopt.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ntbfab/diag.h"
#include "ntbfab/error.h"
#include "ntbfab/sim.h"

/*
 * Device models and DMA engines route every transaction (docs/sim.md, "Transactions"):
 * address map, slot, requester tables, static route, far side (IOMMU). This measures
 * ntbf_sim_write of 64 bytes: local RAM, through one NTB (back to back), through a switch,
 * and into a host with an IOMMU.
 */

#define MiB (UINT64_C(1) << 20)

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct ntbf_topo *star(void)
{
        struct ntbf_topo *t = ntbf_topo_new("bench-route", NULL);
        uint32_t sw = ntbf_topo_add_switch(t, "sw0", ntbf_switch_preset("mxs824"));
        for (uint32_t i = 0; i < 3; i++) {
                char name[8];
                snprintf(name, sizeof(name), "n%u", i);
                uint32_t n = ntbf_topo_add_node(t, name, 4 * (i + 1));
                t->nodes[n].ram = 256 * MiB;
                t->nodes[n].iommu = i == 2;
                uint32_t a = ntbf_topo_add_adapter(t, n, "ntb0", ntbf_adapter_preset("pxh830"));
                ntbf_topo_add_link(t, (struct ntbf_port_ref){NTBF_PORT_ADAPTER, a, 0},
                                   (struct ntbf_port_ref){NTBF_PORT_SWITCH, sw, i});
        }
        /* n0 also has a direct cable to n1 on its second port. */
        uint32_t a1 = ntbf_topo_add_adapter(t, 0, "ntb1", ntbf_adapter_preset("pxh830"));
        uint32_t b1 = ntbf_topo_add_adapter(t, 1, "ntb1", ntbf_adapter_preset("pxh830"));
        ntbf_topo_add_link(t, (struct ntbf_port_ref){NTBF_PORT_ADAPTER, a1, 0},
                           (struct ntbf_port_ref){NTBF_PORT_ADAPTER, b1, 0});
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        if (ntbf_topo_finalize(t, &d)) {
                ntbf_diags_print(&d, stderr);
                exit(1);
        }
        ntbf_diags_free(&d);
        return t;
}

static double measure(struct ntbf_backend *b, uint32_t node, uint64_t addr)
{
        uint8_t buf[64] = {1};
        uint64_t n = 2000000, best = UINT64_MAX;
        for (int round = 0; round < 5; round++) {
                uint64_t t0 = now_ns();
                for (uint64_t i = 0; i < n; i++)
                        if (ntbf_sim_write(b, node, NTBF_NONE, 0, addr + (i % 64) * 64, buf, 64,
                                           NULL))
                                exit(1);
                uint64_t dt = now_ns() - t0;
                if (dt < best)
                        best = dt;
        }
        return (double)best / (double)n;
}

int main(int argc, char **argv)
{
        const char *json_path = NULL;
        if (argc == 3 && !strcmp(argv[1], "--json"))
                json_path = argv[2];
        struct ntbf_topo *t = star();
        char dir[] = "/dev/shm/ntbfab-bench-XXXXXX", why[512];
        if (!mkdtemp(dir) || ntbf_sim_fabric_create(t, dir, why, sizeof(why)))
                return 1;
        const struct ntbf_backend_ops *ops = ntbf_backend_find("sim");
        struct ntbf_backend *b;
        struct ntbf_adapter_h *h0 = NULL, *h1 = NULL, *h2 = NULL;
        struct ntbf_backend_env env = {t, dir, NTBF_NONE};
        if (ops->open(&env, &b, NULL, 0) || ops->probe(b, 0, &h0) || ops->probe(b, 2, &h2) ||
            ops->probe(b, 3, &h1))
                return 1;
        const struct ntbf_adapter *a0 = &t->adapters[0], *a1 = &t->adapters[3];
        struct ntbf_rid cpu = {0, 0, 0xffff};
        struct ntbf_xlat sw = {2, 2, 0x40000000, NTBF_NONE, a0->lut_entry_size},
                         dir1 = {1, 4, 16 * MiB, NTBF_NONE, a1->lut_entry_size};
        if (ops->switch_rid_add(h0, 0, &cpu) || ops->xlat_set(h0, 0, &sw) ||
            ops->xlat_set(h1, 0, &dir1) || ops->iommu_map(h2, 0x40000000, 32 * MiB, MiB))
                return 1;
        double local = measure(b, 0, 16 * MiB);
        double b2b = measure(b, 0, a1->window_base);
        double viasw = measure(b, 0, a0->window_base);
        printf("ntbf_sim_write, 64 bytes, best of 5 x 2M:\n");
        printf("  local RAM:                              %6.1f ns\n", local);
        printf("  one NTB hop (back to back):             %6.1f ns\n", b2b);
        printf("  through a switch into a host with IOMMU: %6.1f ns\n", viasw);
        if (json_path) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "bench", json_object_new_string("route"));
                json_object_object_add(o, "local_ns", json_object_new_double(local));
                json_object_object_add(o, "b2b_ns", json_object_new_double(b2b));
                json_object_object_add(o, "switch_iommu_ns", json_object_new_double(viasw));
                json_object_to_file_ext(json_path, o, JSON_C_TO_STRING_PRETTY);
                json_object_put(o);
        }
        ops->release(h0);
        ops->release(h1);
        ops->release(h2);
        ops->close(b);
        ntbf_sim_fabric_destroy(dir);
        ntbf_topo_free(t);
        return 0;
}
