/* tests/unit/fixtures.c: topologies for unit tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "ntbfab/diag.h"
#include "fixtures.h"

struct ntbf_port_ref fx_ap(uint32_t adapter, uint32_t port)
{
        return (struct ntbf_port_ref){NTBF_PORT_ADAPTER, adapter, port};
}

struct ntbf_port_ref fx_sp(uint32_t sw, uint32_t port)
{
        return (struct ntbf_port_ref){NTBF_PORT_SWITCH, sw, port};
}

void fx_finalize_ok(struct ntbf_topo *t)
{
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        int r = ntbf_topo_finalize(t, &d);
        if (r) {
                ntbf_diags_print(&d, stderr);
                fail_msg("finalize failed: %d", r);
        }
        ntbf_diags_free(&d);
}

struct ntbf_topo *fx_b2b(const char *model)
{
        struct ntbf_topo *t = ntbf_topo_new("b2b", "b2b.yaml");
        uint32_t a = ntbf_topo_add_node(t, "a", 4);
        uint32_t b = ntbf_topo_add_node(t, "b", 8);
        uint32_t aa = ntbf_topo_add_adapter(t, a, "ntb0", ntbf_adapter_preset(model));
        uint32_t ba = ntbf_topo_add_adapter(t, b, "ntb0", ntbf_adapter_preset(model));
        ntbf_topo_add_link(t, fx_ap(aa, 0), fx_ap(ba, 0));
        return t;
}

struct ntbf_topo *fx_star(unsigned count)
{
        struct ntbf_topo *t = ntbf_topo_new("star", "star.yaml");
        uint32_t sw = ntbf_topo_add_switch(t, "sw0", ntbf_switch_preset("mxs824"));
        for (unsigned i = 0; i < count; i++) {
                char name[16];
                snprintf(name, sizeof(name), "n%u", i);
                uint32_t n = ntbf_topo_add_node(t, name, 4 * (i + 1));
                uint32_t a = ntbf_topo_add_adapter(t, n, "ntb0", ntbf_adapter_preset("pxh830"));
                ntbf_topo_add_link(t, fx_ap(a, 0), fx_sp(sw, i));
                if (i == 0) {
                        uint32_t d = ntbf_topo_add_device(t, n, "nvme0");
                        struct ntbf_device *dev = &t->devices[d];
                        dev->bus = 3;
                        dev->lend = true;
                        ntbf_sim_defaults(&dev->sim, NTBF_SIM_NVME);
                        ntbf_device_apply_sim(dev);
                        d = ntbf_topo_add_device(t, n, "acc0");
                        dev = &t->devices[d];
                        dev->bus = 4;
                        dev->lend = true;
                        ntbf_sim_defaults(&dev->sim, NTBF_SIM_ACCEL);
                        dev->sim.memory = 64 * NTBF_MiB;
                        ntbf_device_apply_sim(dev);
                }
        }
        return t;
}
