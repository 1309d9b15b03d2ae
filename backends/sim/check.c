/* backends/sim/check.c: walk every table of an instance and say whether it is consistent. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim.h"

struct chk {
        char *why;
        size_t len;
        int err;
};

static void bad(struct chk *c, const char *fmt, ...) NTBF_PRINTF(2, 3);
static void bad(struct chk *c, const char *fmt, ...)
{
        if (c->err)
                return; /* the first inconsistency is the one reported */
        c->err = NTBF_EPROTO;
        if (!c->why || !c->len)
                return;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->why, c->len, fmt, ap);
        va_end(ap);
}

static const char *aname(struct ntbf_sim *s, uint32_t a, char *buf, size_t len)
{
        snprintf(buf, len, "%s.%s", s->t->nodes[s->t->adapters[a].node].name,
                 s->t->adapters[a].name);
        return buf;
}

static void check_rid_table(struct chk *c, const _Atomic uint64_t *tab, uint32_t n, uint32_t nnodes,
                            uint32_t only_node, const char *what)
{
        for (uint32_t i = 0; i < n; i++) {
                uint64_t e = atomic_load(&tab[i]);
                if (!e)
                        continue;
                uint32_t node = (uint32_t)(e >> 32 & 0xffff);
                uint16_t rid = (uint16_t)(e >> 16), mask = (uint16_t)e;
                if (!(e & RID_VALID) || (e >> 48 & 0x7fff) || node >= nnodes || (rid & ~mask))
                        bad(c, "%s: requester entry %u is malformed (%016" PRIx64 ")", what, i, e);
                else if (only_node != NTBF_NONE && node != only_node)
                        bad(c, "%s: requester entry %u belongs to another host", what, i);
                for (uint32_t j = 0; j < i; j++)
                        if (atomic_load(&tab[j]) == e)
                                bad(c, "%s: requester entries %u and %u are the same", what, j, i);
        }
}

static int cmp_u64pair(const void *a, const void *b)
{
        const uint64_t *x = a, *y = b;
        return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void check_node(struct chk *c, struct ntbf_sim *s, uint32_t ni)
{
        struct sim_node *n = &s->nodes[ni];
        const char *name = s->t->nodes[ni].name;
        uint64_t *spans = malloc(SIM_MEM_RECORDS * 2 * sizeof(uint64_t));
        if (!spans) {
                bad(c, "out of memory");
                return;
        }
        ntbf__sim_lock(s, &n->mem_lock, ntbf__sim_mem_recover, n);
        uint32_t count = 0;
        uint64_t bytes = 0;
        for (uint32_t i = 0; i < SIM_MEM_RECORDS; i++) {
                struct sim_memrec *m = &n->mem[i];
                uint32_t st = atomic_load(&m->state);
                if (st > 1)
                        bad(c, "node %s: memory record %u has state %u", name, i, st);
                if (st != 1)
                        continue;
                const struct ntbf_region *r = ntbf_addrmap_lookup(s->t, ni, m->base);
                if (!m->size || m->base % SIM_PAGE || m->size % SIM_PAGE || !r ||
                    r->kind != NTBF_REGION_RAM || m->base < SIM_MEM_FLOOR ||
                    m->base - r->base + m->size > r->size)
                        bad(c,
                            "node %s: allocation %u [0x%" PRIx64 ", +0x%" PRIx64
                            ") is not inside RAM",
                            name, i, m->base, m->size);
                spans[2 * count] = m->base;
                spans[2 * count + 1] = m->base + m->size;
                count++;
                bytes += m->size;
        }
        if (count != n->mem_count || bytes != n->mem_bytes)
                bad(c,
                    "node %s: %u allocations of %" PRIu64 " bytes recorded, %u of %" PRIu64
                    " counted",
                    name, count, bytes, n->mem_count, n->mem_bytes);
        ntbf__sim_unlock(&n->mem_lock);
        qsort(spans, count, 2 * sizeof(uint64_t), cmp_u64pair);
        for (uint32_t i = 1; i < count; i++)
                if (spans[2 * i] < spans[2 * i - 1])
                        bad(c, "node %s: allocations at 0x%" PRIx64 " and 0x%" PRIx64 " overlap",
                            name, spans[2 * i - 2], spans[2 * i]);
        free(spans);

        ntbf__sim_lock(s, &n->irq_lock, ntbf__sim_irq_recover, n);
        uint32_t used = 0;
        for (uint32_t i = 0; i < SIM_IRQ_VECTORS; i++) {
                uint32_t st = atomic_load(&n->irq[i].state);
                if (st > 1 || (i == 0 && st))
                        bad(c, "node %s: interrupt vector %u has state %u", name, i, st);
                used += st == 1;
        }
        if (used != n->irq_count)
                bad(c, "node %s: %u vectors in use, %u counted", name, used, n->irq_count);
        ntbf__sim_unlock(&n->irq_lock);
}

static void check_adapter(struct chk *c, struct ntbf_sim *s, uint32_t a)
{
        char an[100], nm[80];
        snprintf(an, sizeof(an), "adapter %s", aname(s, a, nm, sizeof(nm)));
        const struct sim_adapter *x = &s->ad[a];
        for (uint32_t k = 0; k < x->nslots; k++) {
                uint64_t size, e = sim_slot_read(s, a, k, &size);
                if (!e)
                        continue;
                uint32_t tgt = SLOT_TARGET(e);
                const struct ntbf_window *w = ntbf_adapter_slot_window(&s->t->adapters[a], k);
                if (!(e & SLOT_VALID) || (e & 0xffc) || !w ||
                    !ntbf_window_xlat_ok(w, e & SLOT_ADDR, size))
                        bad(c, "%s: slot %u is malformed (%016" PRIx64 ", %" PRIu64 " bytes)", an,
                            k, e, size);
                else if (e & SLOT_MCAST ? tgt >= x->ngroups
                                        : tgt >= s->t->nadapters || !sim_route(s, a, tgt)->valid)
                        bad(c, "%s: slot %u targets %s %u, which it cannot reach", an, k,
                            e & SLOT_MCAST ? "group" : "adapter", tgt);
        }
        const _Atomic uint64_t *rids = sim_rids(s, a);
        for (uint32_t k = 0; k < x->rid_reserved; k++)
                if (atomic_load(&rids[k]) != rid_entry(x->node, (uint16_t)(k << 3), 0xffff))
                        bad(c, "%s: reserved requester entry %u was changed", an, k);
        check_rid_table(c, rids, x->nrids, s->t->nnodes, x->node, an);
        for (uint32_t g = 0; g < x->ngroups; g++) {
                uint64_t base, size;
                if (ntbf__sim_mcast_get(s, a, g, &base, &size) && (!size || base >= SIM_ADDR_LIMIT))
                        bad(c, "%s: multicast membership %u is malformed", an, g);
        }
        for (uint32_t ch = 0; ch < x->nchan; ch++) {
                struct sim_dmachan *d = sim_dma(s, a, ch);
                ntbf__sim_lock(s, &d->lock, ntbf__sim_dma_recover, d);
                uint64_t head = atomic_load(&d->head), done = atomic_load(&d->done);
                if (done > head || d->reaped > done || head - d->reaped > SIM_DMA_RING)
                        bad(c, "%s: DMA channel %u indexes are inconsistent", an, ch);
                ntbf__sim_unlock(&d->lock);
        }
}

int ntbf_sim_check(struct ntbf_backend *b, char *why, size_t whylen)
{
        struct ntbf_sim *s = ntbf__sim_of(b);
        if (!s)
                return -EINVAL;
        struct chk c = {why, whylen, 0};
        if (s->hdr->magic != SIM_MAGIC || s->hdr->version != SIM_VERSION ||
            !atomic_load(&s->hdr->ready))
                bad(&c, "the control file header is damaged");
        for (uint32_t n = 0; n < s->t->nnodes; n++)
                check_node(&c, s, n);
        for (uint32_t a = 0; a < s->t->nadapters; a++)
                check_adapter(&c, s, a);
        for (uint32_t w = 0; w < s->t->nswitches; w++) {
                char what[80];
                for (uint32_t p = 0; p < s->sw[w].ports; p++) {
                        snprintf(what, sizeof(what), "switch %s port %u", s->t->switches[w].name,
                                 p);
                        check_rid_table(&c, sim_swrids(s, w, p), s->sw[w].nrids, s->t->nnodes,
                                        NTBF_NONE, what);
                }
        }
        for (uint32_t l = 0; l < s->t->nlinks; l++)
                if (atomic_load(&s->links[l].state) & ~7u)
                        bad(&c, "link %u has an unknown state", l);
        if (!c.err && why && whylen)
                snprintf(why, whylen, "consistent");
        return c.err;
}

int ntbf_sim_owned(struct ntbf_backend *b, uint32_t node, int pid, struct ntbf_sim_owned *out)
{
        struct ntbf_sim *s = ntbf__sim_of(b);
        if (!s || !out || (node != NTBF_NONE && node >= s->t->nnodes))
                return -EINVAL;
        *out = (struct ntbf_sim_owned){0, 0, 0};
        for (uint32_t n = 0; n < s->t->nnodes; n++) {
                if (node != NTBF_NONE && n != node)
                        continue;
                struct sim_node *x = &s->nodes[n];
                for (uint32_t i = 0; i < SIM_MEM_RECORDS; i++) {
                        struct sim_memrec *m = &x->mem[i];
                        if (atomic_load(&m->state) == 1 && (!pid || m->pid == pid)) {
                                out->mem++;
                                out->bytes += m->size;
                        }
                }
                for (uint32_t i = 0; i < SIM_IRQ_VECTORS; i++) {
                        struct sim_irqrec *v = &x->irq[i];
                        if (atomic_load(&v->state) == 1 && (!pid || v->pid == pid))
                                out->irqs++;
                }
        }
        return 0;
}
