/* daemon/entry.c: hardware entries of plans, entry sets, plans in JSON, replaying plans. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entry.h"
#include "ntbfab/units.h"
#include "state.h"

static const char *const kind_names[NTBF_ENT_KINDS] = {"swrid",  "rid",   "iommu", "deviso",
                                                       "devmap", "mcast", "slot"};

#define PAGE UINT64_C(4096)

/* ---- one entry ------------------------------------------------------------------------------ */

const char *ntbf__ent_key(const struct ntbf__ent *e, char *buf, size_t len)
{
        const char *k = kind_names[e->kind];
        switch (e->kind) {
        case NTBF_ENT_SWRID:
        case NTBF_ENT_RID:
        case NTBF_ENT_DEVISO:
                snprintf(buf, len, "%s %u %u %u %u %u", k, e->prog, e->obj, e->rid.node, e->rid.rid,
                         e->rid.mask);
                break;
        case NTBF_ENT_IOMMU:
                snprintf(buf, len, "%s %u %u 0x%" PRIx64 " 0x%" PRIx64 " 0x%" PRIx64, k, e->prog,
                         e->obj, e->addr, e->phys, e->len);
                break;
        case NTBF_ENT_DEVMAP:
                snprintf(buf, len, "%s %u %u %u %u %u 0x%" PRIx64 " 0x%" PRIx64, k, e->prog, e->obj,
                         e->rid.node, e->rid.rid, e->rid.mask, e->addr, e->len);
                break;
        case NTBF_ENT_MCAST:
                snprintf(buf, len, "%s %u %u %u 0x%" PRIx64 " 0x%" PRIx64, k, e->prog, e->obj,
                         e->group, e->addr, e->len);
                break;
        default:
                snprintf(buf, len, "%s %u %u %u %u %u %u 0x%" PRIx64 " 0x%" PRIx64, k, e->prog,
                         e->obj, e->slot, e->dst_node, e->dst_adapter, e->group, e->addr, e->len);
                break;
        }
        return buf;
}

/* Strictly "NUM" fields: digits only (or 0x + hex digits), nothing else. */
static int num(const char *s, uint64_t *out)
{
        if (!*s)
                return -EINVAL;
        return ntbf_uint_parse(s, out);
}

int ntbf__ent_parse(const struct ntbf_topo *t, const char *key, struct ntbf__ent *e)
{
        char buf[NTBF_ENT_KEY_MAX + 1];
        if (strlen(key) > NTBF_ENT_KEY_MAX)
                return -EINVAL;
        memcpy(buf, key, strlen(key) + 1);
        char *f[11];
        int n = 0;
        for (char *p = buf; n < 11;) {
                f[n++] = p;
                char *sp = strchr(p, ' ');
                if (!sp)
                        break;
                *sp = 0;
                p = sp + 1;
        }
        memset(e, 0, sizeof(*e));
        int kind = -1;
        for (int k = 0; k < NTBF_ENT_KINDS; k++)
                if (!strcmp(f[0], kind_names[k]))
                        kind = k;
        static const int fields[NTBF_ENT_KINDS] = {6, 6, 6, 6, 8, 6, 9};
        /* A slot recorded before translations had a size (8 fields) is a whole slot. */
        if (kind < 0 || (n != fields[kind] && !(kind == NTBF_ENT_SLOT && n == 8)))
                return -EINVAL;
        uint64_t v[10];
        for (int i = 1; i < n; i++)
                if (num(f[i], &v[i - 1]))
                        return -EINVAL;
        e->kind = (enum ntbf__ent_kind)kind;
        if (v[0] >= t->nnodes || v[1] > UINT32_MAX)
                return -EINVAL;
        e->prog = (uint32_t)v[0];
        e->obj = (uint32_t)v[1];
        switch (e->kind) {
        case NTBF_ENT_SWRID:
        case NTBF_ENT_RID:
        case NTBF_ENT_DEVISO:
        case NTBF_ENT_DEVMAP:
                if (v[2] >= t->nnodes || v[3] > 0xffff || v[4] > 0xffff)
                        return -EINVAL;
                e->rid = (struct ntbf_rid){(uint32_t)v[2], (uint16_t)v[3], (uint16_t)v[4]};
                if (e->kind == NTBF_ENT_SWRID && e->obj >= t->nswitches)
                        return -EINVAL;
                if (e->kind == NTBF_ENT_RID && e->obj >= t->nadapters)
                        return -EINVAL;
                if ((e->kind == NTBF_ENT_DEVISO || e->kind == NTBF_ENT_DEVMAP) &&
                    e->obj >= t->ndevices)
                        return -EINVAL;
                if (e->kind == NTBF_ENT_DEVMAP) {
                        e->addr = v[5];
                        e->len = v[6];
                        if (!e->len || e->addr % PAGE || e->len % PAGE)
                                return -EINVAL;
                }
                return 0;
        case NTBF_ENT_IOMMU:
                e->addr = v[2];
                e->phys = v[3];
                e->len = v[4];
                if (e->obj >= t->nnodes || !e->len || e->addr % PAGE || e->phys % PAGE ||
                    e->len % PAGE)
                        return -EINVAL;
                return 0;
        case NTBF_ENT_MCAST:
                if (e->obj >= t->nadapters || t->adapters[e->obj].node != e->prog ||
                    v[2] > UINT32_MAX || !v[4] || v[3] % PAGE)
                        return -EINVAL;
                e->group = (uint32_t)v[2];
                e->addr = v[3];
                e->len = v[4];
                return 0;
        default:
                if (e->obj >= t->nadapters || v[2] >= t->adapters[e->obj].nslots ||
                    v[3] > UINT32_MAX || v[4] > UINT32_MAX || v[5] > UINT32_MAX)
                        return -EINVAL;
                e->slot = (uint32_t)v[2];
                e->dst_node = (uint32_t)v[3];
                e->dst_adapter = (uint32_t)v[4];
                e->group = (uint32_t)v[5];
                e->addr = v[6];
                e->len = n == 9
                             ? v[7]
                             : ntbf_adapter_slot_window(&t->adapters[e->obj], e->slot)->slot_size;
                if (!e->len)
                        return -EINVAL;
                if (e->group == NTBF_NONE && (e->dst_adapter >= t->nadapters ||
                                              t->adapters[e->dst_adapter].node != e->dst_node))
                        return -EINVAL;
                return 0;
        }
}

const char *ntbf__ent_describe(const struct ntbf_topo *t, const struct ntbf__ent *e, char *buf,
                               size_t len)
{
        const char *prog = t->nodes[e->prog].name;
        switch (e->kind) {
        case NTBF_ENT_SWRID:
                snprintf(buf, len, "requester %s/%04x on switch %s (by %s)",
                         t->nodes[e->rid.node].name, e->rid.rid, t->switches[e->obj].name, prog);
                break;
        case NTBF_ENT_RID:
                snprintf(buf, len, "requester %04x in %s.%s", e->rid.rid,
                         t->nodes[t->adapters[e->obj].node].name, t->adapters[e->obj].name);
                break;
        case NTBF_ENT_IOMMU:
                snprintf(buf, len, "%s IOMMU 0x%" PRIx64 " -> 0x%" PRIx64 " (%" PRIu64 " bytes)",
                         t->nodes[e->obj].name, e->addr, e->phys, e->len);
                break;
        case NTBF_ENT_DEVISO:
                snprintf(buf, len, "isolation of %s.%s", t->nodes[t->devices[e->obj].node].name,
                         t->devices[e->obj].name);
                break;
        case NTBF_ENT_DEVMAP:
                snprintf(buf, len, "%s.%s may reach 0x%" PRIx64 "..0x%" PRIx64,
                         t->nodes[t->devices[e->obj].node].name, t->devices[e->obj].name, e->addr,
                         e->addr + e->len);
                break;
        case NTBF_ENT_MCAST:
                snprintf(buf, len,
                         "%s.%s receives multicast group %u at 0x%" PRIx64 " (%" PRIu64 " bytes)",
                         t->nodes[t->adapters[e->obj].node].name, t->adapters[e->obj].name,
                         e->group, e->addr, e->len);
                break;
        default:
                if (e->group != NTBF_NONE)
                        snprintf(buf, len, "slot %u of %s.%s -> multicast group %u", e->slot,
                                 t->nodes[t->adapters[e->obj].node].name, t->adapters[e->obj].name,
                                 e->group);
                else
                        snprintf(buf, len, "slot %u of %s.%s -> %s 0x%" PRIx64 " (by %s)", e->slot,
                                 t->nodes[t->adapters[e->obj].node].name, t->adapters[e->obj].name,
                                 t->nodes[e->dst_node].name, e->addr, prog);
                break;
        }
        return buf;
}

/* ---- sets ---------------------------------------------------------------------------------- */

void ntbf__entset_free(struct ntbf__entset *s)
{
        for (size_t i = 0; i < s->n; i++)
                free(s->v[i]);
        free(s->v);
        memset(s, 0, sizeof(*s));
}

int ntbf__entset_add(struct ntbf__entset *s, const char *key)
{
        if (s->n == s->cap) {
                size_t cap = s->cap ? s->cap * 2 : 64;
                char **v = realloc(s->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                s->v = v;
                s->cap = cap;
        }
        if (!(s->v[s->n] = strdup(key)))
                return -ENOMEM;
        s->n++;
        return 0;
}

static int cmp_key(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

void ntbf__entset_sort(struct ntbf__entset *s)
{
        if (!s->n)
                return;
        qsort(s->v, s->n, sizeof(*s->v), cmp_key);
        size_t o = 1;
        for (size_t i = 1; i < s->n; i++) {
                if (!strcmp(s->v[i], s->v[o - 1]))
                        free(s->v[i]);
                else
                        s->v[o++] = s->v[i];
        }
        s->n = o;
}

bool ntbf__entset_has(const struct ntbf__entset *s, const char *key)
{
        return s->n && bsearch(&key, s->v, s->n, sizeof(*s->v), cmp_key);
}

int ntbf__entset_diff(const struct ntbf__entset *a, const struct ntbf__entset *b,
                      struct ntbf__entset *out)
{
        size_t j = 0;
        for (size_t i = 0; i < a->n; i++) {
                while (j < b->n && strcmp(b->v[j], a->v[i]) < 0)
                        j++;
                if (j < b->n && !strcmp(b->v[j], a->v[i]))
                        continue;
                int r = ntbf__entset_add(out, a->v[i]);
                if (r)
                        return r;
        }
        return 0;
}

void ntbf__entset_only(struct ntbf__entset *s, const struct ntbf_topo *t, uint32_t node)
{
        size_t o = 0;
        for (size_t i = 0; i < s->n; i++) {
                struct ntbf__ent e;
                if (!ntbf__ent_parse(t, s->v[i], &e) && e.prog == node)
                        s->v[o++] = s->v[i];
                else
                        free(s->v[i]);
        }
        s->n = o;
}

/* ---- counted sets ---------------------------------------------------------------------------- */

void ntbf__entcount_free(struct ntbf__entcount *c)
{
        ntbf__entset_free(&c->keys);
        free(c->n);
        memset(c, 0, sizeof(*c));
}

/* Where key is, or where it would go (*found false), in the sorted keys. */
static size_t entcount_find(const struct ntbf__entcount *c, const char *key, bool *found)
{
        size_t lo = 0, hi = c->keys.n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int r = strcmp(c->keys.v[mid], key);
                if (!r) {
                        *found = true;
                        return mid;
                }
                if (r < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *found = false;
        return lo;
}

uint32_t ntbf__entcount_of(const struct ntbf__entcount *c, const char *key)
{
        bool found;
        size_t i = entcount_find(c, key, &found);
        return found ? c->n[i] : 0;
}

int ntbf__entcount_step(struct ntbf__entcount *c, const char *key, bool add)
{
        bool found;
        size_t i = entcount_find(c, key, &found);
        struct ntbf__entset *k = &c->keys;
        if (!add) {
                if (!found)
                        return -ENOENT;
                if (--c->n[i])
                        return 0;
                free(k->v[i]);
                memmove(&k->v[i], &k->v[i + 1], (k->n - i - 1) * sizeof(*k->v));
                memmove(&c->n[i], &c->n[i + 1], (k->n - i - 1) * sizeof(*c->n));
                k->n--;
                return 0;
        }
        if (found) {
                c->n[i]++;
                return 0;
        }
        if (k->n == k->cap || k->n == c->cap) {
                size_t cap = k->cap > c->cap ? k->cap : c->cap;
                cap = cap ? cap * 2 : 64;
                char **v = realloc(k->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                k->v = v;
                k->cap = cap;
                uint32_t *n = realloc(c->n, cap * sizeof(*n));
                if (!n)
                        return -ENOMEM;
                c->n = n;
                c->cap = cap;
        }
        char *dup = strdup(key);
        if (!dup)
                return -ENOMEM;
        memmove(&k->v[i + 1], &k->v[i], (k->n - i) * sizeof(*k->v));
        memmove(&c->n[i + 1], &c->n[i], (k->n - i) * sizeof(*c->n));
        k->v[i] = dup;
        c->n[i] = 1;
        k->n++;
        return 0;
}

/* ---- entries of a state -------------------------------------------------------------------- */

struct ntbf_rid ntbf__dev_rid(const struct ntbf_topo *t, uint32_t device)
{
        const struct ntbf_device *d = &t->devices[device];
        struct ntbf_rid r = {.node = d->node};
        ntbf_device_rid_entry(d, &r.rid, &r.mask);
        return r;
}

struct ntbf_rid ntbf__cpu_rid(uint32_t node, uint32_t k)
{
        /* The root complex's IDs 00:00.0, 00:01.0, ... as the sim reserves them. */
        return (struct ntbf_rid){node, (uint16_t)(k << 3), 0xffff};
}

static int add(struct ntbf__entset *out, const struct ntbf__ent *e)
{
        char key[NTBF_ENT_KEY_MAX + 1];
        return ntbf__entset_add(out, ntbf__ent_key(e, key, sizeof(key)));
}

static int add_requester(const struct ntbf_topo *t, struct ntbf__entset *out,
                         enum ntbf__ent_kind kind, uint32_t obj, const struct ntbf_requester *rq)
{
        struct ntbf__ent e = {.kind = kind, .obj = obj, .prog = rq->node};
        if (kind == NTBF_ENT_RID)
                e.prog = t->adapters[obj].node;
        if (rq->device != NTBF_NONE && kind == NTBF_ENT_RID) {
                /* What the adapter's table holds for the device: one entry, or one per
                 * function where entries take no masks (rid_mask, docs/model.md). */
                const struct ntbf_adapter *a = &t->adapters[obj];
                const struct ntbf_device *d = &t->devices[rq->device];
                uint32_t n = ntbf_adapter_rid_cost(a, d);
                for (uint32_t k = 0; k < n; k++) {
                        e.rid.node = d->node;
                        ntbf_adapter_rid_at(a, d, k, &e.rid.rid, &e.rid.mask);
                        int r = add(out, &e);
                        if (r)
                                return r;
                }
                return 0;
        }
        if (rq->device != NTBF_NONE) {
                e.rid = ntbf__dev_rid(t, rq->device);
                return add(out, &e);
        }
        for (uint32_t k = 0; k < t->nodes[rq->node].cpu_rids; k++) {
                e.rid = ntbf__cpu_rid(rq->node, k);
                int r = add(out, &e);
                if (r)
                        return r;
        }
        return 0;
}

/* Identity pages [lo, hi) of an isolated device's domain. */
static int add_devmap(const struct ntbf_topo *t, struct ntbf__entset *out, uint32_t dev,
                      uint64_t lo, uint64_t hi)
{
        lo &= ~(PAGE - 1);
        hi = ntbf_align_up(hi, PAGE);
        if (hi <= lo)
                return 0;
        struct ntbf__ent e = {.kind = NTBF_ENT_DEVMAP,
                              .prog = t->devices[dev].node,
                              .obj = dev,
                              .rid = ntbf__dev_rid(t, dev),
                              .addr = lo,
                              .len = hi - lo};
        return add(out, &e);
}

/*
 * Lender-side isolation (docs/daemon.md): the device reaches exactly the windows of its
 * plans: a borrow's DMA window and the MSI range part of its MSI slot; a mapping's target.
 */
static int add_isolation(const struct ntbf_topo *t, const struct ntbf_plan *p,
                         struct ntbf__entset *out)
{
        uint32_t dev = p->req.kind == NTBF_REQ_BORROW ? p->req.device : p->req.requester.device;
        if (p->req.kind == NTBF_REQ_REQUESTER)
                return 0; /* a local device's own traffic: not a lent device's domain */
        if (dev == NTBF_NONE || dev >= t->ndevices || !t->devices[dev].isolate)
                return 0;
        struct ntbf__ent iso = {.kind = NTBF_ENT_DEVISO,
                                .prog = t->devices[dev].node,
                                .obj = dev,
                                .rid = ntbf__dev_rid(t, dev)};
        int r = add(out, &iso);
        if (r)
                return r;
        if (p->req.kind == NTBF_REQ_MAP_DEVICE)
                return add_devmap(t, out, dev, p->dma_addr, p->dma_addr + p->req.target.size);
        if (p->req.kind != NTBF_REQ_BORROW)
                return 0;
        uint64_t w = p->req.dma_window ? p->req.dma_window : NTBF_DEFAULT_DMA_WINDOW;
        if ((r = add_devmap(t, out, dev, p->dma_addr, p->dma_addr + ntbf_align_up(w, PAGE))))
                return r;
        for (uint32_t i = 0; i < p->nres; i++) {
                const struct ntbf_res *x = &p->res[i];
                if (x->kind == NTBF_RES_LUT && x->dest == NTBF_DEST_MSI && p->msi_addr >= x->addr &&
                    p->msi_addr < x->addr + x->size) {
                        uint64_t end = x->addr + x->size;
                        if (end - p->msi_addr > NTBF_MSI_SIZE)
                                end = p->msi_addr + NTBF_MSI_SIZE;
                        return add_devmap(t, out, dev, p->msi_addr, end);
                }
        }
        return 0;
}

/*
 * A multicast join (docs/sisci.md): the member's overlay, where group writes land, is its
 * buffer as its adapter's inbound traffic addresses it (the IOVA the join reserved when the
 * node has an IOMMU), under the group's slot number on the switches. The window slots the
 * join accounts for are the overlay's budget, not translations to program.
 */
static int add_join(const struct ntbf_topo *t, const struct ntbf_plan *p, const struct ntbf_res *x,
                    struct ntbf__entset *out)
{
        uint32_t slot = NTBF_NONE;
        uint64_t addr = p->req.target.addr;
        for (uint32_t i = 0; i < p->nres; i++) {
                const struct ntbf_res *y = &p->res[i];
                if (y->kind == NTBF_RES_MCAST)
                        slot = y->first;
                if (y->kind == NTBF_RES_RANGE && y->maps_to && t->nodes[y->obj].iommu)
                        addr = y->addr + p->req.target.addr % PAGE;
        }
        if (slot == NTBF_NONE)
                return 0;
        struct ntbf__ent e = {.kind = NTBF_ENT_MCAST,
                              .prog = t->adapters[x->obj].node,
                              .obj = x->obj,
                              .group = slot,
                              .addr = addr,
                              .len = p->req.target.size};
        return add(out, &e);
}

bool ntbf__plan_ents_shared(const struct ntbf_plan *p)
{
        for (uint32_t i = 0; i < p->nres; i++)
                if (p->res[i].kind == NTBF_RES_LUT && p->res[i].dest == NTBF_DEST_MCAST)
                        return true;
        return false;
}

int ntbf__base_ents(const struct ntbf_state *s, struct ntbf__entset *out)
{
        const struct ntbf_topo *t = ntbf_state_topo(s);
        int r = 0;
        for (uint32_t i = 0; i < s->nbase && !r; i++) {
                struct ntbf_requester cpu = {s->base[i].node, NTBF_NONE, 0};
                r = add_requester(t, out, NTBF_ENT_SWRID, s->base[i].sw, &cpu);
        }
        return r;
}

int ntbf__plan_ents(const struct ntbf_state *s, const struct ntbf_plan *p, struct ntbf__entset *out)
{
        const struct ntbf_topo *t = ntbf_state_topo(s);
        int r = 0;
        for (uint32_t i = 0; i < p->nres && !r; i++) {
                const struct ntbf_res *x = &p->res[i];
                switch (x->kind) {
                case NTBF_RES_LUT: {
                        const struct ntbf_window *W =
                            ntbf_adapter_slot_window(&t->adapters[x->obj], x->first);
                        uint64_t E = W ? W->slot_size : 0;
                        uint32_t group = NTBF_NONE;
                        if (x->group != NTBF_NONE && x->dest != NTBF_DEST_MCAST) {
                                r = add_join(t, p, x, out);
                                break;
                        }
                        if (x->dest == NTBF_DEST_MCAST) {
                                /* The group's slot on the sender's network; none: no member. */
                                uint32_t net = s->adapter_net[x->obj];
                                group = net == NTBF_NONE ? NTBF_NONE
                                                         : ntbf__group_slot(s, net, x->group, NULL);
                                if (group == NTBF_NONE)
                                        break;
                        }
                        for (uint32_t k = 0; k < x->count && !r; k++) {
                                struct ntbf__ent e = {
                                    .kind = NTBF_ENT_SLOT,
                                    .prog = x->programmer,
                                    .obj = x->obj,
                                    .slot = x->first + k,
                                    .dst_node =
                                        x->dest == NTBF_DEST_MCAST ? NTBF_NONE : x->dst_node,
                                    .dst_adapter =
                                        x->dest == NTBF_DEST_MCAST ? NTBF_NONE : x->dst_adapter,
                                    .group = group,
                                    .addr = x->dst_addr + k * E,
                                    /* Whole slots but the last, which translates the rest. */
                                    .len = k + 1 < x->count ? E : x->size - (uint64_t)k * E};
                                r = add(out, &e);
                        }
                        break;
                }
                case NTBF_RES_RID:
                        r = add_requester(t, out, NTBF_ENT_RID, x->obj, &x->req);
                        break;
                case NTBF_RES_SWITCH_RID:
                        r = add_requester(t, out, NTBF_ENT_SWRID, x->obj, &x->req);
                        break;
                case NTBF_RES_RANGE:
                        /* A DMA window's range (maps_to 0) is reserved, not programmed: the
                         * borrower's device API maps its pages at run time. */
                        if (x->maps_to && t->nodes[x->obj].iommu) {
                                struct ntbf__ent e = {.kind = NTBF_ENT_IOMMU,
                                                      .prog = x->obj,
                                                      .obj = x->obj,
                                                      .addr = x->addr,
                                                      .phys = x->maps_to,
                                                      .len = x->size};
                                r = add(out, &e);
                        }
                        break;
                case NTBF_RES_MCAST:
                        break; /* switch group slots: the members' joins program them */
                }
        }
        return r ? r : add_isolation(t, p, out);
}

int ntbf__ents_of_state(const struct ntbf_state *s, struct ntbf__entset *out)
{
        int r = ntbf__base_ents(s, out);
        for (uint32_t i = 0; i < s->nallocs && !r; i++)
                r = ntbf__plan_ents(s, &s->allocs[i]->plan, out);
        ntbf__entset_sort(out);
        return r;
}

/* ---- plans in JSON -------------------------------------------------------------------------- */

static void put_u(struct json_object *o, const char *k, uint64_t v)
{
        json_object_object_add(o, k, json_object_new_uint64(v));
}

static struct json_object *u32s(const uint32_t *v, size_t n)
{
        struct json_object *a = json_object_new_array();
        for (size_t i = 0; i < n; i++)
                json_object_array_add(a, json_object_new_uint64(v[i]));
        return a;
}

static struct json_object *raw_path(const struct ntbf_path *p)
{
        struct json_object *o = json_object_new_object(), *hops = json_object_new_array();
        uint32_t ends[] = {p->from.kind, p->from.node, p->from.device,
                           p->to.kind,   p->to.node,   p->to.device};
        json_object_object_add(o, "ends", u32s(ends, 6));
        uint32_t misc[] = {p->latency_ns, p->first_adapter, p->last_adapter};
        json_object_object_add(o, "misc", u32s(misc, 3));
        for (uint32_t i = 0; i < p->nhops && i < NTBF_PATH_MAX; i++) {
                const struct ntbf_hop *h = &p->hops[i];
                uint32_t v[] = {h->kind, h->obj, h->in_port, h->out_port, h->latency_ns};
                json_object_array_add(hops, u32s(v, 5));
        }
        json_object_object_add(o, "hops", hops);
        return o;
}

struct json_object *ntbf__plan_json(const struct ntbf_plan *p)
{
        struct json_object *o = json_object_new_object();
        const struct ntbf_request *q = &p->req;
        uint32_t req[] = {
            q->kind,        q->device,         q->function,         q->by,
            q->exclusive,   q->requester.node, q->requester.device, q->requester.function,
            q->target.kind, q->target.node,    q->target.group,     q->via_adapter,
            q->to_adapter};
        json_object_object_add(o, "req", u32s(req, sizeof(req) / sizeof(req[0])));
        put_u(o, "dma_window", q->dma_window);
        put_u(o, "target_addr", q->target.addr);
        put_u(o, "target_size", q->target.size);
        json_object_object_add(o, "path", raw_path(&p->path));
        json_object_object_add(o, "dma_path", raw_path(&p->dma_path));
        struct json_object *bars = json_object_new_array();
        for (int b = 0; b < NTBF_MAX_BARS; b++)
                json_object_array_add(bars, json_object_new_uint64(p->bar_addr[b]));
        json_object_object_add(o, "bar_addr", bars);
        put_u(o, "dma_addr", p->dma_addr);
        put_u(o, "dma_iova", p->dma_iova);
        put_u(o, "msi_addr", p->msi_addr);
        struct json_object *res = json_object_new_array();
        for (uint32_t i = 0; i < p->nres; i++) {
                const struct ntbf_res *x = &p->res[i];
                struct json_object *r = json_object_new_object();
                uint32_t v[] = {x->kind,     x->obj,         x->first,        x->count, x->shared,
                                x->req.node, x->req.device,  x->req.function, x->group, x->dest,
                                x->dst_node, x->dst_adapter, x->programmer};
                json_object_object_add(r, "v", u32s(v, sizeof(v) / sizeof(v[0])));
                put_u(r, "dst_addr", x->dst_addr);
                put_u(r, "addr", x->addr);
                put_u(r, "size", x->size);
                put_u(r, "maps_to", x->maps_to);
                json_object_object_add(r, "what", json_object_new_string(x->what));
                json_object_array_add(res, r);
        }
        json_object_object_add(o, "res", res);
        return o;
}

static bool get_u(struct json_object *o, const char *k, uint64_t *v)
{
        struct json_object *x;
        if (!json_object_object_get_ex(o, k, &x) || !json_object_is_type(x, json_type_int) ||
            json_object_get_int64(x) < 0)
                return false;
        *v = json_object_get_uint64(x);
        return true;
}

static bool arr_u32s(struct json_object *a, uint32_t *v, size_t n)
{
        if (!json_object_is_type(a, json_type_array) || json_object_array_length(a) != n)
                return false;
        for (size_t i = 0; i < n; i++) {
                struct json_object *x = json_object_array_get_idx(a, i);
                if (!json_object_is_type(x, json_type_int) || json_object_get_int64(x) < 0 ||
                    json_object_get_int64(x) > UINT32_MAX)
                        return false;
                v[i] = (uint32_t)json_object_get_int64(x);
        }
        return true;
}

static bool get_u32s(struct json_object *o, const char *k, uint32_t *v, size_t n)
{
        struct json_object *a;
        return json_object_object_get_ex(o, k, &a) && arr_u32s(a, v, n);
}

static bool get_path(struct json_object *o, const char *k, struct ntbf_path *p)
{
        struct json_object *x, *hops;
        uint32_t ends[6], misc[3];
        memset(p, 0, sizeof(*p));
        if (!json_object_object_get_ex(o, k, &x) || !get_u32s(x, "ends", ends, 6) ||
            !get_u32s(x, "misc", misc, 3) || !json_object_object_get_ex(x, "hops", &hops) ||
            !json_object_is_type(hops, json_type_array) ||
            json_object_array_length(hops) > NTBF_PATH_MAX)
                return false;
        p->from = (struct ntbf_endpoint){ends[0], ends[1], ends[2]};
        p->to = (struct ntbf_endpoint){ends[3], ends[4], ends[5]};
        p->latency_ns = misc[0];
        p->first_adapter = misc[1];
        p->last_adapter = misc[2];
        p->nhops = (uint32_t)json_object_array_length(hops);
        for (uint32_t i = 0; i < p->nhops; i++) {
                uint32_t v[5];
                if (!arr_u32s(json_object_array_get_idx(hops, i), v, 5))
                        return false;
                p->hops[i] = (struct ntbf_hop){v[0], v[1], v[2], v[3], v[4]};
        }
        return true;
}

int ntbf__plan_from_json(const struct ntbf_topo *t, struct json_object *o, struct ntbf_plan *p)
{
        uint32_t q[13];
        uint64_t target_addr, target_size, dma_window;
        struct json_object *res, *bars;
        if (!get_u32s(o, "req", q, 13) || !get_u(o, "dma_window", &dma_window) ||
            !get_u(o, "target_addr", &target_addr) || !get_u(o, "target_size", &target_size) ||
            !get_path(o, "path", &p->path) || !get_path(o, "dma_path", &p->dma_path) ||
            !get_u(o, "dma_addr", &p->dma_addr) || !get_u(o, "dma_iova", &p->dma_iova) ||
            !get_u(o, "msi_addr", &p->msi_addr) || !json_object_object_get_ex(o, "res", &res) ||
            !json_object_is_type(res, json_type_array) ||
            !json_object_object_get_ex(o, "bar_addr", &bars) ||
            !json_object_is_type(bars, json_type_array) ||
            json_object_array_length(bars) != NTBF_MAX_BARS)
                return -EINVAL;
        ntbf_request_init(&p->req, q[0]);
        p->req.device = q[1];
        p->req.function = q[2];
        p->req.by = q[3];
        p->req.exclusive = q[4];
        p->req.requester = (struct ntbf_requester){q[5], q[6], q[7]};
        p->req.target.kind = q[8];
        p->req.target.node = q[9];
        p->req.target.group = q[10];
        p->req.via_adapter = q[11];
        p->req.to_adapter = q[12];
        p->req.dma_window = dma_window;
        p->req.target.addr = target_addr;
        p->req.target.size = target_size;
        for (int b = 0; b < NTBF_MAX_BARS; b++) {
                struct json_object *x = json_object_array_get_idx(bars, (size_t)b);
                p->bar_addr[b] = json_object_get_uint64(x);
        }
        size_t n = json_object_array_length(res);
        p->res = calloc(n ? n : 1, sizeof(*p->res));
        if (!p->res)
                return -ENOMEM;
        p->cap = (uint32_t)(n ? n : 1);
        for (size_t i = 0; i < n; i++) {
                struct json_object *r = json_object_array_get_idx(res, i), *what;
                uint32_t v[13];
                struct ntbf_res *x = &p->res[i];
                if (!get_u32s(r, "v", v, 13) || !get_u(r, "dst_addr", &x->dst_addr) ||
                    !get_u(r, "addr", &x->addr) || !get_u(r, "size", &x->size) ||
                    !get_u(r, "maps_to", &x->maps_to) ||
                    !json_object_object_get_ex(r, "what", &what))
                        return -EINVAL;
                if (v[0] > NTBF_RES_RANGE || v[9] > NTBF_DEST_MCAST)
                        return -EINVAL;
                x->kind = v[0];
                x->obj = v[1];
                x->first = v[2];
                x->count = v[3];
                x->shared = v[4];
                x->req = (struct ntbf_requester){v[5], v[6], v[7]};
                x->group = v[8];
                x->dest = v[9];
                x->dst_node = v[10];
                x->dst_adapter = v[11];
                x->programmer = v[12];
                snprintf(x->what, sizeof(x->what), "%s", json_object_get_string(what));
                /* Indexes must name objects of this topology before anything trusts them. */
                if ((x->kind == NTBF_RES_LUT || x->kind == NTBF_RES_RID) && x->obj >= t->nadapters)
                        return -EINVAL;
                if ((x->kind == NTBF_RES_SWITCH_RID || x->kind == NTBF_RES_MCAST) &&
                    x->obj >= t->nswitches)
                        return -EINVAL;
                if (x->kind == NTBF_RES_RANGE && x->obj >= t->nnodes)
                        return -EINVAL;
                if (x->kind == NTBF_RES_LUT &&
                    (x->programmer >= t->nnodes ||
                     (uint64_t)x->first + x->count > t->adapters[x->obj].nslots))
                        return -EINVAL;
                if ((x->kind == NTBF_RES_RID || x->kind == NTBF_RES_SWITCH_RID) &&
                    (x->req.node >= t->nnodes ||
                     (x->req.device != NTBF_NONE && x->req.device >= t->ndevices)))
                        return -EINVAL;
                p->nres++;
        }
        p->result = 0;
        return 0;
}

/* Whether an earlier resource of the same plan takes what x takes. */
static bool taken_before(const struct ntbf_topo *t, const struct ntbf_plan *p, uint32_t i,
                         uint32_t slot)
{
        const struct ntbf_res *x = &p->res[i];
        for (uint32_t j = 0; j < i; j++) {
                const struct ntbf_res *y = &p->res[j];
                if (y->kind != x->kind || y->obj != x->obj)
                        continue;
                switch (x->kind) {
                case NTBF_RES_LUT:
                        if (slot >= y->first && slot < y->first + y->count)
                                return true;
                        break;
                case NTBF_RES_RID:
                case NTBF_RES_SWITCH_RID:
                        if (ntbf__req_key(t, &x->req) == ntbf__req_key(t, &y->req))
                                return true;
                        break;
                case NTBF_RES_MCAST:
                        if (x->first == y->first)
                                return true;
                        break;
                case NTBF_RES_RANGE:
                        if (x->addr == y->addr)
                                return true;
                        break;
                }
        }
        return false;
}

int ntbf__plan_replay(struct ntbf_state *s, struct ntbf_plan *p, uint32_t *id)
{
        const struct ntbf_topo *t = ntbf_state_topo(s);
        for (uint32_t i = 0; i < p->nres; i++) {
                struct ntbf_res *x = &p->res[i];
                switch (x->kind) {
                case NTBF_RES_LUT:
                        x->shared = s->ad[x->obj].slots[x->first].refs > 0 ||
                                    taken_before(t, p, i, x->first);
                        break;
                case NTBF_RES_RID:
                        x->shared =
                            ntbf__rset_refs(&s->ad[x->obj].rids, ntbf__req_key(t, &x->req)) > 0 ||
                            taken_before(t, p, i, 0);
                        break;
                case NTBF_RES_SWITCH_RID:
                        x->shared =
                            ntbf__rset_refs(&s->sw[x->obj].reqs, ntbf__req_key(t, &x->req)) > 0 ||
                            taken_before(t, p, i, 0);
                        break;
                case NTBF_RES_MCAST:
                        x->shared = (x->first < t->switches[x->obj].p.mcast_groups &&
                                     s->sw[x->obj].mc[x->first].refs > 0) ||
                                    taken_before(t, p, i, 0);
                        break;
                case NTBF_RES_RANGE:
                        x->shared = ntbf__range_find(s, x->obj, x->addr) != NULL ||
                                    taken_before(t, p, i, 0);
                        break;
                }
        }
        return ntbf_commit(s, p, id);
}

/* ---- paths ---------------------------------------------------------------------------------- */

struct json_object *ntbf__path_json(const struct ntbf_topo *t, const struct ntbf_path *p)
{
        char buf[160];
        struct json_object *o = json_object_new_object(), *hops = json_object_new_array();
        json_object_object_add(o, "from",
                               json_object_new_string(ntbf_endpoint_name(t, p->from, buf, 160)));
        json_object_object_add(o, "to",
                               json_object_new_string(ntbf_endpoint_name(t, p->to, buf, 160)));
        put_u(o, "latency_ns", p->latency_ns);
        put_u(o, "read_round_trip_ns", 2ull * p->latency_ns);
        for (uint32_t i = 0; i < p->nhops; i++) {
                const struct ntbf_hop *h = &p->hops[i];
                struct json_object *j = json_object_new_object();
                json_object_object_add(j, "kind",
                                       json_object_new_string(ntbf_hop_kind_name(h->kind)));
                json_object_object_add(
                    j, "name", json_object_new_string(ntbf_hop_name(t, h, buf, sizeof(buf))));
                json_object_object_add(
                    j, "in_port",
                    h->in_port == NTBF_NONE ? NULL : json_object_new_uint64(h->in_port));
                json_object_object_add(
                    j, "out_port",
                    h->out_port == NTBF_NONE ? NULL : json_object_new_uint64(h->out_port));
                put_u(j, "latency_ns", h->latency_ns);
                json_object_array_add(hops, j);
        }
        json_object_object_add(o, "hops", hops);
        return o;
}
