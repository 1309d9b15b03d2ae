/* frontends/lending/maptab.c: an open-addressing table of (device address, pages) -> count. */
#include <errno.h>
#include <stdlib.h>

#include "maptab.h"

static uint32_t slot_of(const struct ntbf__maptab *t, uint64_t addr, uint32_t pages)
{
        /* Page addresses differ in their middle bits: a multiplicative hash spreads them. */
        uint64_t h = (addr >> 12 ^ (uint64_t)pages << 40) * UINT64_C(0x9e3779b97f4a7c15);
        return (uint32_t)(h >> 32) & (t->cap - 1);
}

static int grow(struct ntbf__maptab *t)
{
        uint32_t cap = t->cap ? t->cap * 2 : 64;
        if (cap < t->cap)
                return -ENOMEM;
        struct ntbf__maptab_ent *v = calloc(cap, sizeof(*v)), *old = t->v;
        if (!v)
                return -ENOMEM;
        uint32_t ocap = t->cap;
        t->v = v;
        t->cap = cap;
        for (uint32_t i = 0; i < ocap; i++) {
                if (!old[i].addr)
                        continue;
                uint32_t s = slot_of(t, old[i].addr, old[i].pages);
                while (v[s].addr)
                        s = (s + 1) & (cap - 1);
                v[s] = old[i];
        }
        free(old);
        return 0;
}

void ntbf__maptab_fini(struct ntbf__maptab *t)
{
        free(t->v);
        t->v = NULL;
        t->cap = t->n = 0;
}

int ntbf__maptab_get(struct ntbf__maptab *t, uint64_t addr, uint32_t pages, uint32_t *refs)
{
        if (!addr)
                return -EINVAL;
        if ((uint64_t)(t->n + 1) * 2 > t->cap) {
                int r = grow(t);
                if (r)
                        return r;
        }
        uint32_t s = slot_of(t, addr, pages);
        for (;; s = (s + 1) & (t->cap - 1)) {
                struct ntbf__maptab_ent *e = &t->v[s];
                if (!e->addr) {
                        *e = (struct ntbf__maptab_ent){addr, pages, 1};
                        t->n++;
                } else if (e->addr == addr && e->pages == pages) {
                        if (e->refs == UINT32_MAX)
                                return -ENOMEM;
                        e->refs++;
                } else {
                        continue;
                }
                if (refs)
                        *refs = e->refs;
                return 0;
        }
}

int ntbf__maptab_put(struct ntbf__maptab *t, uint64_t addr, uint32_t pages, uint32_t *refs)
{
        if (!t->cap || !addr)
                return -ENOENT;
        uint32_t mask = t->cap - 1, s = slot_of(t, addr, pages);
        for (;; s = (s + 1) & mask) {
                struct ntbf__maptab_ent *e = &t->v[s];
                if (!e->addr)
                        return -ENOENT;
                if (e->addr == addr && e->pages == pages)
                        break;
        }
        if (refs)
                *refs = t->v[s].refs - 1;
        if (--t->v[s].refs)
                return 0;
        /* Backward-shift deletion: pull later members of the probe run into the hole. */
        uint32_t hole = s;
        for (uint32_t j = (s + 1) & mask; t->v[j].addr; j = (j + 1) & mask) {
                uint32_t home = slot_of(t, t->v[j].addr, t->v[j].pages);
                /* Move j into the hole unless its home lies cyclically in (hole, j]. */
                if (((j - home) & mask) >= ((j - hole) & mask)) {
                        t->v[hole] = t->v[j];
                        hole = j;
                }
        }
        t->v[hole] = (struct ntbf__maptab_ent){0, 0, 0};
        t->n--;
        return 0;
}

void ntbf__maptab_each(const struct ntbf__maptab *t,
                       void (*fn)(void *arg, uint64_t addr, uint32_t pages, uint32_t refs),
                       void *arg)
{
        for (uint32_t i = 0; i < t->cap; i++)
                if (t->v[i].addr)
                        fn(arg, t->v[i].addr, t->v[i].pages, t->v[i].refs);
}
