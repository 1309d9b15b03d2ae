/* backends/sim/hwstate.c: everything the fabric's tables hold, as sorted lines (for tests). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct lines {
        char **v;
        size_t n, cap;
        int err;
};

static void add(struct lines *l, const char *fmt, ...) NTBF_PRINTF(2, 3);
static void add(struct lines *l, const char *fmt, ...)
{
        if (l->err)
                return;
        if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 256;
                char **v = realloc(l->v, cap * sizeof(*v));
                if (!v) {
                        l->err = -ENOMEM;
                        return;
                }
                l->v = v;
                l->cap = cap;
        }
        va_list ap;
        va_start(ap, fmt);
        int r = vasprintf(&l->v[l->n], fmt, ap);
        va_end(ap);
        if (r < 0)
                l->err = -ENOMEM;
        else
                l->n++;
}

static int cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

struct pages {
        struct lines *l;
        const char *fmt; /* with the domain's name, then the page's iova and phys */
        const char *name;
};

static void page(void *arg, uint64_t iova, uint64_t phys)
{
        struct pages *p = arg;
        add(p->l, "%s %s 0x%" PRIx64 " 0x%" PRIx64, p->fmt, p->name, iova, phys);
}

int ntbf_sim_hw_state(struct ntbf_backend *b, char ***out, size_t *n)
{
        struct ntbf_sim *s = ntbf__sim_of(b);
        if (!s || !out || !n)
                return -EINVAL;
        const struct ntbf_topo *t = s->t;
        struct lines l = {0};
        char name[128];
        for (uint32_t a = 0; a < t->nadapters; a++) {
                const char *an = t->adapters[a].name, *nn = t->nodes[t->adapters[a].node].name;
                for (uint32_t i = 0; i < s->ad[a].nslots; i++) {
                        uint64_t e = atomic_load(&sim_slots(s, a)[i]);
                        if (!(e & SLOT_VALID))
                                continue;
                        if (e & SLOT_MCAST)
                                add(&l, "slot %s.%s %u group %u 0x%" PRIx64, nn, an, i,
                                    SLOT_TARGET(e), e & SLOT_ADDR);
                        else
                                add(&l, "slot %s.%s %u to %s.%s 0x%" PRIx64, nn, an, i,
                                    t->nodes[t->adapters[SLOT_TARGET(e)].node].name,
                                    t->adapters[SLOT_TARGET(e)].name, e & SLOT_ADDR);
                }
                for (uint32_t i = s->ad[a].rid_reserved; i < s->ad[a].nrids; i++) {
                        uint64_t e = atomic_load(&sim_rids(s, a)[i]);
                        if (e & RID_VALID)
                                add(&l, "rid %s.%s %s %04x/%04x", nn, an,
                                    t->nodes[e >> 32 & 0xffff].name, (unsigned)(e >> 16 & 0xffff),
                                    (unsigned)(e & 0xffff));
                }
                for (uint32_t g = 0; g < s->ad[a].ngroups; g++) {
                        uint64_t addr, size;
                        if (ntbf__sim_mcast_get(s, a, g, &addr, &size))
                                add(&l, "mcast %s.%s %u 0x%" PRIx64 " 0x%" PRIx64, nn, an, g, addr,
                                    size);
                }
        }
        /* A switch registration is on every connected port: one line, or one per port that
         * has it when they disagree. */
        for (uint32_t w = 0; w < t->nswitches; w++) {
                const char *wn = t->switches[w].name;
                uint32_t first = NTBF_NONE, ports = 0;
                for (uint32_t p = 0; p < s->sw[w].ports; p++)
                        if (t->switches[w].link[p] != NTBF_NONE) {
                                ports++;
                                if (first == NTBF_NONE)
                                        first = p;
                        }
                for (uint32_t p = 0; p < s->sw[w].ports; p++) {
                        if (t->switches[w].link[p] == NTBF_NONE)
                                continue;
                        for (uint32_t i = 0; i < s->sw[w].nrids; i++) {
                                uint64_t e = atomic_load(&sim_swrids(s, w, p)[i]);
                                if (!(e & RID_VALID))
                                        continue;
                                uint32_t on = 0;
                                for (uint32_t q = 0; q < s->sw[w].ports; q++) {
                                        if (t->switches[w].link[q] == NTBF_NONE)
                                                continue;
                                        for (uint32_t k = 0; k < s->sw[w].nrids; k++)
                                                if (atomic_load(&sim_swrids(s, w, q)[k]) == e) {
                                                        on++;
                                                        break;
                                                }
                                }
                                const char *rn = t->nodes[e >> 32 & 0xffff].name;
                                unsigned rid = (unsigned)(e >> 16 & 0xffff),
                                         mask = (unsigned)(e & 0xffff);
                                if (on != ports)
                                        add(&l, "swrid %s port %u only: %s %04x/%04x", wn, p, rn,
                                            rid, mask);
                                else if (p == first)
                                        add(&l, "swrid %s %s %04x/%04x", wn, rn, rid, mask);
                        }
                }
        }
        for (uint32_t nd = 0; nd < t->nnodes; nd++) {
                struct pages p = {&l, "iommu", t->nodes[nd].name};
                ntbf__sim_dom_each(s, nd, page, &p);
        }
        for (uint32_t d = 0; d < t->ndevices; d++) {
                const struct ntbf_device *dev = &t->devices[d];
                for (uint32_t f = 0; f < ntbf_device_nfuncs(dev); f++) {
                        uint32_t k = s->func_first[d] + f;
                        snprintf(name, sizeof(name), "%s.%s.%u", t->nodes[dev->node].name,
                                 dev->name, f);
                        if (atomic_load(&s->funcs[k].isolated))
                                add(&l, "deviso %s", name);
                        struct pages p = {&l, "devmap", name};
                        ntbf__sim_dom_each(s, t->nnodes + k, page, &p);
                }
        }
        if (l.err) {
                ntbf_sim_hw_state_free(l.v, l.n);
                return l.err;
        }
        qsort(l.v, l.n, sizeof(*l.v), cmp);
        *out = l.v;
        *n = l.n;
        return 0;
}

void ntbf_sim_hw_state_free(char **lines, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(lines[i]);
        free(lines);
}
