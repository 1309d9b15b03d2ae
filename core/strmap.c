/* core/strmap.c: open-addressing string map with FNV-1a hashing and linear probing. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strmap.h"

static uint64_t hash(const char *s)
{
        uint64_t h = 1469598103934665603ull;
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 1099511628211ull;
        return h;
}

void ntbf__strmap_init(struct ntbf__strmap *m)
{
        memset(m, 0, sizeof(*m));
}

void ntbf__strmap_free(struct ntbf__strmap *m)
{
        free(m->v);
        memset(m, 0, sizeof(*m));
}

static struct ntbf__strmap_slot *find(struct ntbf__strmap_slot *v, size_t cap, const char *key)
{
        size_t i = hash(key) & (cap - 1);
        while (v[i].key && strcmp(v[i].key, key))
                i = (i + 1) & (cap - 1);
        return &v[i];
}

static int grow(struct ntbf__strmap *m)
{
        size_t cap = m->cap ? m->cap * 2 : 64;
        struct ntbf__strmap_slot *v = calloc(cap, sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < m->cap; i++)
                if (m->v[i].key)
                        *find(v, cap, m->v[i].key) = m->v[i];
        free(m->v);
        m->v = v;
        m->cap = cap;
        return 0;
}

int ntbf__strmap_put(struct ntbf__strmap *m, const char *key, uint32_t val, uint32_t *old)
{
        if ((m->n + 1) * 2 > m->cap) {
                int r = grow(m);
                if (r)
                        return r;
        }
        struct ntbf__strmap_slot *s = find(m->v, m->cap, key);
        if (s->key) {
                if (old)
                        *old = s->val;
                return 1;
        }
        s->key = key;
        s->val = val;
        m->n++;
        return 0;
}

uint32_t ntbf__strmap_get(const struct ntbf__strmap *m, const char *key)
{
        if (!m->cap)
                return UINT32_MAX;
        const struct ntbf__strmap_slot *s = find(m->v, m->cap, key);
        return s->key ? s->val : UINT32_MAX;
}
