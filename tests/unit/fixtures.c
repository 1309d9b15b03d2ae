/* tests/unit/fixtures.c: topologies for unit tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "ntbfab/diag.h"
#include "fixtures.h"
#include "ntbfab/budget.h"
#include "ntbfab/error.h"
#include "state.h"

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
                /* ids 4, 8, ... skipping the reserved 252 */
                uint32_t id = 4 * (i + 1) >= NTBF_RESERVED_NODE_ID ? 4 * (i + 2) : 4 * (i + 1);
                uint32_t n = ntbf_topo_add_node(t, name, id);
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

struct ntbf_topo *fx_b2b_devices(unsigned ndev, uint64_t bar)
{
        struct ntbf_topo *t = fx_b2b("pxh830");
        for (uint32_t n = 0; n < 2; n++) {
                for (unsigned i = 0; i < ndev; i++) {
                        char name[16];
                        snprintf(name, sizeof(name), "d%u", i);
                        uint32_t d = ntbf_topo_add_device(t, n, name);
                        struct ntbf_device *dev = &t->devices[d];
                        dev->bus = (uint8_t)(i + 1);
                        dev->lend = true;
                        dev->bars[0] = (struct ntbf_bar){.size = bar, .flags = NTBF_BAR_64};
                }
        }
        return t;
}

uint32_t fx_add_accel(struct ntbf_topo *t, uint32_t node, const char *name, uint8_t bus,
                      uint64_t mem)
{
        uint32_t d = ntbf_topo_add_device(t, node, name);
        struct ntbf_device *dev = &t->devices[d];
        dev->bus = bus;
        dev->lend = true;
        ntbf_sim_defaults(&dev->sim, NTBF_SIM_ACCEL);
        dev->sim.memory = mem;
        ntbf_device_apply_sim(dev);
        return d;
}

struct ntbf_topo *fx_cascade(unsigned nodes, unsigned subs, uint32_t rid_table)
{
        struct ntbf_topo *t = ntbf_topo_new("cascade", "cascade.yaml");
        unsigned per = (nodes + subs - 1) / subs;
        struct ntbf_switch_params top = *ntbf_switch_preset("mxs824");
        struct ntbf_switch_params sub = top;
        if (top.ports < subs)
                top.ports = subs;
        if (sub.ports < per + 1)
                sub.ports = per + 1;
        if (rid_table)
                top.rid_table = sub.rid_table = rid_table;
        uint32_t ti = ntbf_topo_add_switch(t, "top", &top);
        t->switches[ti].loc = (struct ntbf_loc){3, 5};
        for (unsigned s = 0; s < subs; s++) {
                char name[16];
                snprintf(name, sizeof(name), "sub%u", s);
                uint32_t si = ntbf_topo_add_switch(t, name, &sub);
                t->switches[si].loc = (struct ntbf_loc){4 + s, 5};
                ntbf_topo_add_link(t, fx_sp(si, sub.ports - 1), fx_sp(ti, s));
        }
        for (unsigned i = 0; i < nodes; i++) {
                char name[16];
                snprintf(name, sizeof(name), "n%u", i);
                uint32_t id = i + 1 >= NTBF_RESERVED_NODE_ID ? i + 2 : i + 1;
                uint32_t n = ntbf_topo_add_node(t, name, id);
                uint32_t a = ntbf_topo_add_adapter(t, n, "ntb0", ntbf_adapter_preset("pxh830"));
                ntbf_topo_add_link(t, fx_ap(a, 0), fx_sp(1 + i % subs, i / subs));
                uint32_t d = ntbf_topo_add_device(t, n, "nvme0");
                struct ntbf_device *dev = &t->devices[d];
                dev->bus = 3;
                dev->lend = true;
                ntbf_sim_defaults(&dev->sim, NTBF_SIM_NVME);
                ntbf_device_apply_sim(dev);
        }
        return t;
}

struct ntbf_state *fx_state_ok(const struct ntbf_topo *t)
{
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        struct ntbf_state *s = NULL;
        int r = ntbf_state_new(t, &s, &d);
        if (r) {
                ntbf_diags_print(&d, stderr);
                fail_msg("ntbf_state_new: %s", ntbf_err_name(r));
        }
        ntbf_diags_free(&d);
        return s;
}

void fx_consistent(const struct ntbf_state *s)
{
        char why[256];
        if (ntbf__state_check(s, why, sizeof(why)))
                fail_msg("inconsistent state: %s", why);
}
