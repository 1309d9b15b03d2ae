/* tests/integration/simfab_topos.c: topologies built in code, identical in every test process. */
#include <stdio.h>
#include <string.h>

#include "ntbfab/diag.h"
#include "simfab_topos.h"

struct ntbf_topo *itopo(const char *name)
{
        struct ntbf_topo *t = ntbf_topo_new("itest", "itest.yaml");
        uint32_t a = ntbf_topo_add_node(t, "a", 4), b = ntbf_topo_add_node(t, "b", 8);
        uint32_t aa = ntbf_topo_add_adapter(t, a, "ntb0", ntbf_adapter_preset("pxh830"));
        uint32_t ba = ntbf_topo_add_adapter(t, b, "ntb0", ntbf_adapter_preset("pxh830"));
        ntbf_topo_add_link(t, (struct ntbf_port_ref){NTBF_PORT_ADAPTER, aa, 0},
                           (struct ntbf_port_ref){NTBF_PORT_ADAPTER, ba, 0});
        bool iommu = !strcmp(name, "b2b-iommu");
        t->nodes[a].ram = t->nodes[b].ram = 256 * NTBF_MiB;
        t->nodes[a].iommu = t->nodes[b].iommu = iommu;
        if (!strcmp(name, "b2b-big"))
                t->nodes[b].ram = 512 * NTBF_MiB;
        if (!strcmp(name, "b2b-mirror")) {
                uint32_t d = ntbf_topo_add_device(t, a, "mirror0");
                t->devices[d].bus = 3;
                t->devices[d].bars[0] = (struct ntbf_bar){.size = 4096, .flags = NTBF_BAR_64};
        }
        if (!strcmp(name, "nvme")) {
                uint32_t d = ntbf_topo_add_device(t, a, "nvme0");
                t->devices[d].bus = 4;
                ntbf_sim_defaults(&t->devices[d].sim, NTBF_SIM_NVME);
                t->devices[d].sim.capacity = 8 * NTBF_MiB;
                ntbf_device_apply_sim(&t->devices[d]);
        }
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        int r = ntbf_topo_finalize(t, &d);
        if (r)
                ntbf_diags_print(&d, stderr);
        ntbf_diags_free(&d);
        if (r) {
                ntbf_topo_free(t);
                return NULL;
        }
        return t;
}
