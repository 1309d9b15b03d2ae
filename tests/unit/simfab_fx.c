/* tests/unit/simfab_fx.c: simulated fabric fixtures shared by the sim unit tests. */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "ntbfab/diag.h"
#include "ntbfab/error.h"
#include "fixtures.h"
#include "simfab_fx.h"

void fab_up(struct fab *f, struct ntbf_topo *t)
{
        memset(f, 0, sizeof(*f));
        fx_finalize_ok(t);
        f->t = t;
        snprintf(f->dir, sizeof(f->dir), "/dev/shm/ntbfab-test-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        char why[512];
        int r = ntbf_sim_fabric_create(t, f->dir, why, sizeof(why));
        if (r)
                fail_msg("create: %s", why);
        f->ops = ntbf_backend_find("sim");
        assert_non_null(f->ops);
        struct ntbf_backend_env env = {t, f->dir, NTBF_NONE};
        r = ntbf_sim_attach(&env, &f->b, why, sizeof(why));
        if (r)
                fail_msg("attach: %s", why);
        for (uint32_t a = 0; a < t->nadapters && a < 16; a++)
                assert_int_equal(f->ops->probe(f->b, a, &f->h[a]), 0);
}

void fab_down(struct fab *f)
{
        for (uint32_t a = 0; a < 16; a++)
                if (f->h[a])
                        f->ops->release(f->h[a]);
        f->ops->close(f->b);
        assert_int_equal(ntbf_sim_fabric_destroy(f->dir), 0);
        /* Only NVMe namespace images survive teardown; a test removes them itself. */
        char img[512];
        for (uint32_t d = 0; d < f->t->ndevices; d++) {
                const struct ntbf_device *dev = &f->t->devices[d];
                snprintf(img, sizeof(img), "%s/images/%s-%s.img", f->dir,
                         f->t->nodes[dev->node].name, dev->name);
                unlink(img);
        }
        snprintf(img, sizeof(img), "%s/images", f->dir);
        rmdir(img);
        rmdir(f->dir);
        assert_int_equal(access(f->dir, F_OK), -1); /* nothing left */
        ntbf_topo_free(f->t);
}

struct ntbf_topo *fab_b2b(bool iommu)
{
        struct ntbf_topo *t = fx_b2b("pxh830");
        for (uint32_t i = 0; i < t->nnodes; i++) {
                t->nodes[i].ram = 256 * NTBF_MiB;
                t->nodes[i].iommu = iommu;
        }
        return t;
}

struct ntbf_topo *fab_star(unsigned n, bool iommu)
{
        struct ntbf_topo *t = ntbf_topo_new("star", "star.yaml");
        uint32_t sw = ntbf_topo_add_switch(t, "sw0", ntbf_switch_preset("mxs824"));
        for (unsigned i = 0; i < n; i++) {
                char name[16];
                snprintf(name, sizeof(name), "n%u", i);
                uint32_t node = ntbf_topo_add_node(t, name, 4 * (i + 1));
                t->nodes[node].ram = 256 * NTBF_MiB;
                t->nodes[node].iommu = iommu;
                uint32_t a = ntbf_topo_add_adapter(t, node, "ntb0", ntbf_adapter_preset("pxh830"));
                ntbf_topo_add_link(t, fx_ap(a, 0), fx_sp(sw, i));
        }
        return t;
}

uint32_t fab_add_dev(struct ntbf_topo *t, uint32_t node, const char *name, uint8_t bus,
                     uint32_t functions)
{
        uint32_t d = ntbf_topo_add_device(t, node, name);
        t->devices[d].bus = bus;
        t->devices[d].functions = functions;
        t->devices[d].bars[0] = (struct ntbf_bar){.size = 4096, .flags = NTBF_BAR_64};
        return d;
}

void fab_slot(struct fab *f, uint32_t a, uint32_t slot, uint32_t dst, uint64_t addr)
{
        struct ntbf_xlat x = {f->t->adapters[dst].node, dst, addr, NTBF_NONE,
                              ntbf_adapter_slot_window(&f->t->adapters[a], slot)->size_max};
        int r = f->ops->xlat_set(f->h[a], slot, &x);
        if (r)
                fail_msg("xlat_set(%u, %u): %s", a, slot, ntbf_strerror(r));
}

uint64_t fab_win(struct fab *f, uint32_t a, uint32_t slot, uint64_t off)
{
        const struct ntbf_window *w = ntbf_adapter_slot_window(&f->t->adapters[a], slot);
        return w->base + (uint64_t)(slot - w->first_slot) * w->slot_size + off;
}

uint8_t *fab_ram(struct fab *f, uint32_t node, uint64_t addr, uint64_t len)
{
        void *p = NULL;
        assert_int_equal(ntbf_sim_phys_ptr(f->b, node, addr, len, &p), 0);
        return p;
}

struct ntbf_counters fab_ctr(struct fab *f, uint32_t a)
{
        struct ntbf_counters c;
        assert_int_equal(f->ops->counters(f->h[a], &c), 0);
        return c;
}

uint64_t fab_wait_fd(int fd, int ms)
{
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, ms) != 1)
                return 0;
        uint64_t v = 0;
        if (read(fd, &v, sizeof(v)) != sizeof(v))
                return 0;
        return v;
}
