/* core/budget.c: the budget state of a fabric, admission of requests, commit and release. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntbfab/error.h"
#include "ntbfab/units.h"
#include "graph.h"
#include "state.h"

#define PAGE       (4 * NTBF_KiB)
/* LUT resources one plan can take on one adapter (a borrow: 6 BARs, or DMA + MSI window). */
#define MAX_CLAIMS 16

static uint64_t align_down(uint64_t v, uint64_t a)
{
        return v & ~(a - 1);
}

static uint64_t pow2_ceil(uint64_t v)
{
        return v <= 1 ? 1 : UINT64_C(1) << (64 - __builtin_clzll(v - 1));
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
        return a < b ? a : b;
}

/* ---- requester sets --------------------------------------------------------------------- */

static uint32_t rset_home(const struct ntbf__rset *s, uint32_t key)
{
        return (key * UINT32_C(0x9e3779b1)) & (s->cap - 1);
}

static uint32_t rset_find(const struct ntbf__rset *s, uint32_t key)
{
        if (!s->cap)
                return NTBF_NONE;
        for (uint32_t i = rset_home(s, key);; i = (i + 1) & (s->cap - 1)) {
                if (s->key[i] == key)
                        return i;
                if (s->key[i] == NTBF_NONE)
                        return NTBF_NONE;
        }
}

uint32_t ntbf__rset_refs(const struct ntbf__rset *s, uint32_t key)
{
        uint32_t i = rset_find(s, key);
        return i == NTBF_NONE ? 0 : s->refs[i];
}

static void rset_free(struct ntbf__rset *s)
{
        free(s->key);
        free(s->refs);
        memset(s, 0, sizeof(*s));
}

static void rset_place(struct ntbf__rset *s, uint32_t key, uint32_t refs)
{
        uint32_t i = rset_home(s, key);
        while (s->key[i] != NTBF_NONE)
                i = (i + 1) & (s->cap - 1);
        s->key[i] = key;
        s->refs[i] = refs;
        s->n++;
}

static int rset_resize(struct ntbf__rset *s, uint32_t cap)
{
        struct ntbf__rset n = {malloc(cap * sizeof(uint32_t)), malloc(cap * sizeof(uint32_t)), cap,
                               0};
        if (!n.key || !n.refs) {
                rset_free(&n);
                return -ENOMEM;
        }
        for (uint32_t i = 0; i < cap; i++) {
                n.key[i] = NTBF_NONE;
                n.refs[i] = 0;
        }
        for (uint32_t i = 0; i < s->cap; i++)
                if (s->key[i] != NTBF_NONE)
                        rset_place(&n, s->key[i], s->refs[i]);
        rset_free(s);
        *s = n;
        return 0;
}

/* Add a reference to key: 1 if it is new, 0 if it was there, or -ENOMEM. */
static int rset_inc(struct ntbf__rset *s, uint32_t key)
{
        uint32_t i = rset_find(s, key);
        if (i != NTBF_NONE) {
                s->refs[i]++;
                return 0;
        }
        if ((s->n + 1) * 4 > s->cap * 3 && rset_resize(s, s->cap ? s->cap * 2 : 16))
                return -ENOMEM;
        rset_place(s, key, 1);
        return 1;
}

/* Drop a reference to key: 1 if the key went away, 0 if it stays, -ENOENT if absent. */
static int rset_dec(struct ntbf__rset *s, uint32_t key)
{
        uint32_t i = rset_find(s, key);
        if (i == NTBF_NONE)
                return -ENOENT;
        if (--s->refs[i])
                return 0;
        /* Backward-shift deletion keeps probe chains intact without tombstones. */
        uint32_t mask = s->cap - 1;
        for (;;) {
                uint32_t j = i;
                bool moved = false;
                for (;;) {
                        j = (j + 1) & mask;
                        if (s->key[j] == NTBF_NONE)
                                break;
                        uint32_t h = rset_home(s, s->key[j]);
                        bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
                        if (!stays) {
                                moved = true;
                                break;
                        }
                }
                if (!moved) {
                        s->key[i] = NTBF_NONE;
                        s->refs[i] = 0;
                        break;
                }
                s->key[i] = s->key[j];
                s->refs[i] = s->refs[j];
                i = j;
        }
        s->n--;
        return 1;
}

static int rset_copy(struct ntbf__rset *dst, const struct ntbf__rset *src)
{
        memset(dst, 0, sizeof(*dst));
        if (!src->cap)
                return 0;
        dst->key = malloc(src->cap * sizeof(uint32_t));
        dst->refs = malloc(src->cap * sizeof(uint32_t));
        if (!dst->key || !dst->refs) {
                rset_free(dst);
                return -ENOMEM;
        }
        memcpy(dst->key, src->key, src->cap * sizeof(uint32_t));
        memcpy(dst->refs, src->refs, src->cap * sizeof(uint32_t));
        dst->cap = src->cap;
        dst->n = src->n;
        return 0;
}

/* ---- names ------------------------------------------------------------------------------ */

const char *ntbf_budget_kind_name(enum ntbf_budget_kind k)
{
        static const char *const names[] = {"lut",   "window", "rid",  "switch-rid",
                                            "mcast", "addr",   "range"};
        return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

const char *ntbf_res_kind_name(enum ntbf_res_kind k)
{
        static const char *const names[] = {"lut", "rid", "switch-rid", "mcast", "range"};
        return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

/* A what[] label: cut to fit (it is informational). */
static void set_what(struct ntbf_res *r, const char *s)
{
        size_t n = strnlen(s, sizeof(r->what) - 1);
        memcpy(r->what, s, n);
        r->what[n] = 0;
}

static const char *adapter_name(const struct ntbf_topo *t, uint32_t a, char *buf, size_t len)
{
        snprintf(buf, len, "%s.%s", t->nodes[t->adapters[a].node].name, t->adapters[a].name);
        return buf;
}

/* "a.nvme0", or "a.nic0 function 1" / "a.nic0 VF 3" for devices with several functions. */
static const char *function_name(const struct ntbf_topo *t, uint32_t d, uint32_t f, char *buf,
                                 size_t len)
{
        const struct ntbf_device *dev = &t->devices[d];
        const char *node = t->nodes[dev->node].name;
        if (ntbf_device_nfuncs(dev) == 1)
                snprintf(buf, len, "%s.%s", node, dev->name);
        else if (f < dev->functions)
                snprintf(buf, len, "%s.%s function %u", node, dev->name, f);
        else
                snprintf(buf, len, "%s.%s VF %u", node, dev->name, f - dev->functions);
        return buf;
}

/* ---- plans and requests ----------------------------------------------------------------- */

void ntbf_request_init(struct ntbf_request *r, enum ntbf_req_kind kind)
{
        memset(r, 0, sizeof(*r));
        r->kind = kind;
        r->device = NTBF_NONE;
        r->by = NTBF_NONE;
        r->requester = (struct ntbf_requester){NTBF_NONE, NTBF_NONE, 0};
        r->target = (struct ntbf_target){NTBF_TARGET_MEM, NTBF_NONE, 0, 0, NTBF_NONE};
        r->via_adapter = NTBF_NONE;
        r->to_adapter = NTBF_NONE;
}

void ntbf_plan_init(struct ntbf_plan *p)
{
        memset(p, 0, sizeof(*p));
        p->refused_obj = NTBF_NONE;
}

void ntbf_plan_free(struct ntbf_plan *p)
{
        if (!p)
                return;
        free(p->res);
        p->res = NULL;
        p->nres = p->cap = 0;
}

int ntbf_plan_copy(struct ntbf_plan *dst, const struct ntbf_plan *src)
{
        *dst = *src;
        dst->res = NULL;
        dst->cap = 0;
        if (src->nres) {
                dst->res = malloc(src->nres * sizeof(*dst->res));
                if (!dst->res) {
                        dst->nres = 0;
                        return -ENOMEM;
                }
                memcpy(dst->res, src->res, src->nres * sizeof(*dst->res));
                dst->cap = src->nres;
        }
        return 0;
}

static struct ntbf_res *add_res(struct ntbf_plan *p, enum ntbf_res_kind kind, uint32_t obj)
{
        if (p->nres == p->cap) {
                uint32_t cap = p->cap ? p->cap * 2 : 16;
                struct ntbf_res *v = realloc(p->res, cap * sizeof(*v));
                if (!v)
                        return NULL;
                p->res = v;
                p->cap = cap;
        }
        struct ntbf_res *r = &p->res[p->nres++];
        memset(r, 0, sizeof(*r));
        r->kind = kind;
        r->obj = obj;
        r->group = NTBF_NONE;
        r->dst_node = r->dst_adapter = r->programmer = NTBF_NONE;
        r->req = (struct ntbf_requester){NTBF_NONE, NTBF_NONE, 0};
        return r;
}

/* ---- state: creation, baseline, copies -------------------------------------------------- */

const struct ntbf_topo *ntbf_state_topo(const struct ntbf_state *s)
{
        return s->t;
}

void ntbf_state_free(struct ntbf_state *s)
{
        if (!s)
                return;
        const struct ntbf_topo *t = s->t;
        if (s->ad)
                for (uint32_t i = 0; i < t->nadapters; i++) {
                        free(s->ad[i].slots);
                        rset_free(&s->ad[i].rids);
                }
        if (s->sw)
                for (uint32_t i = 0; i < t->nswitches; i++) {
                        rset_free(&s->sw[i].reqs);
                        free(s->sw[i].mc);
                }
        if (s->nd)
                for (uint32_t i = 0; i < t->nnodes; i++)
                        free(s->nd[i].v);
        for (uint32_t i = 0; i < s->nallocs; i++) {
                ntbf_plan_free(&s->allocs[i]->plan);
                free(s->allocs[i]);
        }
        free(s->allocs);
        free(s->hw_bar);
        free(s->hw_first);
        free(s->ad);
        free(s->sw);
        free(s->nd);
        free(s->net_first);
        free(s->net_sw);
        free(s->adapter_net);
        free(s->base);
        free(s);
}

static uint32_t uf_find(uint32_t *p, uint32_t x)
{
        while (p[x] != x) {
                p[x] = p[p[x]];
                x = p[x];
        }
        return x;
}

/* Group switches joined by switch-switch cables into networks; note each adapter's network. */
static int build_networks(struct ntbf_state *s)
{
        const struct ntbf_topo *t = s->t;
        uint32_t ns = t->nswitches;
        uint32_t *uf = malloc((ns + 1) * sizeof(*uf));
        uint32_t *id = malloc((ns + 1) * sizeof(*id));
        s->net_first = calloc(ns + 2, sizeof(uint32_t));
        s->net_sw = malloc((ns + 1) * sizeof(uint32_t));
        s->adapter_net = malloc((t->nadapters + 1) * sizeof(uint32_t));
        if (!uf || !id || !s->net_first || !s->net_sw || !s->adapter_net) {
                free(uf);
                free(id);
                return -ENOMEM;
        }
        for (uint32_t i = 0; i < ns; i++)
                uf[i] = i;
        for (uint32_t i = 0; i < t->nlinks; i++) {
                const struct ntbf_link *l = &t->links[i];
                if (ntbf_topo_port_link(t, l->end[0]) != i || l->end[0].kind != NTBF_PORT_SWITCH ||
                    l->end[1].kind != NTBF_PORT_SWITCH)
                        continue;
                uf[uf_find(uf, l->end[0].obj)] = uf_find(uf, l->end[1].obj);
        }
        for (uint32_t i = 0; i < ns; i++)
                id[i] = NTBF_NONE;
        s->nnets = 0;
        for (uint32_t i = 0; i < ns; i++) {
                uint32_t r = uf_find(uf, i);
                if (id[r] == NTBF_NONE)
                        id[r] = s->nnets++;
                s->sw[i].net = id[r];
                s->net_first[id[r] + 1]++;
        }
        for (uint32_t n = 0; n < s->nnets; n++)
                s->net_first[n + 1] += s->net_first[n];
        uint32_t *fill = id; /* reuse: per-network fill count */
        memset(fill, 0, (ns + 1) * sizeof(*fill));
        for (uint32_t i = 0; i < ns; i++) {
                uint32_t n = s->sw[i].net;
                s->net_sw[s->net_first[n] + fill[n]++] = i;
        }
        s->adapter_net[t->nadapters] = NTBF_NONE;
        for (uint32_t a = 0; a < t->nadapters; a++) {
                s->adapter_net[a] = NTBF_NONE;
                for (uint32_t p = 0; p < NTBF_MAX_ADAPTER_PORTS; p++) {
                        uint32_t l = t->adapters[a].link[p];
                        if (l == NTBF_NONE)
                                continue;
                        struct ntbf_port_ref o = ntbf_link_peer(
                            &t->links[l], (struct ntbf_port_ref){NTBF_PORT_ADAPTER, a, p});
                        if (o.kind == NTBF_PORT_SWITCH) {
                                s->adapter_net[a] = s->sw[o.obj].net;
                                break;
                        }
                }
        }
        free(uf);
        free(id);
        return 0;
}

static uint64_t key_weight(const struct ntbf_topo *t, uint32_t key)
{
        return key >= t->ndevices ? t->nodes[key - t->ndevices].cpu_rids : 1;
}

/* The switch a node's only cable goes to, or NTBF_NONE (several cables, or a direct one). */
static uint32_t single_exit(const struct ntbf_topo *t, uint32_t n)
{
        uint32_t exit_sw = NTBF_NONE, cables = 0;
        const struct ntbf_node *nd = &t->nodes[n];
        for (uint32_t k = 0; k < nd->nadapters; k++) {
                uint32_t a = nd->adapters[k];
                for (uint32_t p = 0; p < NTBF_MAX_ADAPTER_PORTS; p++) {
                        uint32_t l = t->adapters[a].link[p];
                        if (l == NTBF_NONE)
                                continue;
                        struct ntbf_port_ref o = ntbf_link_peer(
                            &t->links[l], (struct ntbf_port_ref){NTBF_PORT_ADAPTER, a, p});
                        cables++;
                        exit_sw = o.kind == NTBF_PORT_SWITCH ? o.obj : NTBF_NONE;
                }
        }
        return cables == 1 ? exit_sw : NTBF_NONE;
}

struct tree_scratch {
        uint64_t *dist;
        uint32_t *prev, *stamp, *list;
        void *heap;
};

/*
 * The switches on the tree paths from src to every host other than skip: walk up from each
 * host until a vertex this tree already walked. Returns how many were written to list.
 */
static uint32_t tree_switches(const struct ntbf__graph *g, struct tree_scratch *x, uint32_t src,
                              uint32_t skip)
{
        uint32_t sw0 = g->nnodes + g->nadapters, n = 0;
        ntbf__sssp_tree(g, src, x->dist, x->prev, x->heap);
        x->stamp[src] = src;
        for (uint32_t m = 0; m < g->nnodes; m++) {
                if (m == skip || x->prev[m] == NTBF_NONE)
                        continue;
                if (src >= sw0 && !n)
                        x->list[n++] = src - sw0; /* the root switch is on every path */
                for (uint32_t v = m; v != src && x->stamp[v] != src;) {
                        x->stamp[v] = src;
                        if (v >= sw0)
                                x->list[n++] = v - sw0;
                        v = g->arcs[x->prev[v]].from;
                }
        }
        return n;
}

/*
 * The CPU baseline (docs/model.md): each node's CPU is registered on every switch on its
 * least-latency paths to all other nodes. A node whose only cable goes to a switch shares
 * that switch's tree (see ntbf__sssp_tree), so a fabric of single-cabled nodes costs one
 * tree per switch instead of one per node.
 */
static int build_baseline(struct ntbf_state *s)
{
        const struct ntbf_topo *t = s->t;
        const struct ntbf__graph *g = t->graph;
        uint32_t ns = t->nswitches;
        struct tree_scratch x = {malloc(g->nv * sizeof(uint64_t)), malloc(g->nv * sizeof(uint32_t)),
                                 malloc(g->nv * sizeof(uint32_t)),
                                 malloc((ns + 1) * sizeof(uint32_t)),
                                 malloc(ntbf__sssp_heap_bytes(g))};
        /* Per switch: its tree's switch list, computed when a node first needs it. */
        uint32_t *memo_first = malloc((ns + 1) * sizeof(uint32_t));
        uint32_t *memo_n = malloc((ns + 1) * sizeof(uint32_t));
        uint32_t *memo = malloc(((size_t)ns * ns + 1) * sizeof(uint32_t));
        uint32_t memo_used = 0, capb = 0;
        int r = -ENOMEM;
        if (!x.dist || !x.prev || !x.stamp || !x.list || !x.heap || !memo_first || !memo_n || !memo)
                goto out;
        for (uint32_t v = 0; v < g->nv; v++)
                x.stamp[v] = NTBF_NONE;
        for (uint32_t i = 0; i < ns; i++)
                memo_first[i] = NTBF_NONE;
        for (uint32_t n = 0; n < t->nnodes && ns; n++) {
                const uint32_t *list;
                uint32_t cnt;
                uint32_t ex = single_exit(t, n);
                if (ex == NTBF_NONE) {
                        cnt = tree_switches(g, &x, n, n);
                        list = x.list;
                } else {
                        if (memo_first[ex] == NTBF_NONE) {
                                memo_first[ex] = memo_used;
                                memo_n[ex] =
                                    tree_switches(g, &x, g->nnodes + g->nadapters + ex, NTBF_NONE);
                                memcpy(memo + memo_used, x.list, memo_n[ex] * sizeof(uint32_t));
                                memo_used += memo_n[ex];
                        }
                        list = memo + memo_first[ex];
                        cnt = memo_n[ex];
                        /* Its own switch only counts if another node is reached through it. */
                        if (t->nnodes < 2)
                                cnt = 0;
                }
                for (uint32_t k = 0; k < cnt; k++) {
                        uint32_t sw = list[k];
                        if (capb == s->nbase) {
                                uint32_t c = capb ? capb * 2 : 64;
                                void *nb = realloc(s->base, c * sizeof(*s->base));
                                if (!nb)
                                        goto out;
                                s->base = nb;
                                capb = c;
                        }
                        s->base[s->nbase++] = (struct ntbf__base){sw, n};
                        if (rset_inc(&s->sw[sw].reqs, ntbf__key_cpu(t, n)) < 0)
                                goto out;
                        s->sw[sw].entries += t->nodes[n].cpu_rids;
                }
        }
        for (uint32_t i = 0; i < ns; i++)
                s->sw[i].baseline = s->sw[i].entries;
        r = 0;
out:
        free(x.dist);
        free(x.prev);
        free(x.stamp);
        free(x.list);
        free(x.heap);
        free(memo_first);
        free(memo_n);
        free(memo);
        return r;
}

int ntbf_state_new(const struct ntbf_topo *t, struct ntbf_state **out, struct ntbf_diags *diags)
{
        *out = NULL;
        if (!t || !t->finalized || !t->graph)
                return -EINVAL;
        struct ntbf_state *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->t = t;
        s->next_id = 1;
        s->ad = calloc(t->nadapters + 1, sizeof(*s->ad));
        s->sw = calloc(t->nswitches + 1, sizeof(*s->sw));
        s->nd = calloc(t->nnodes + 1, sizeof(*s->nd));
        if (!s->ad || !s->sw || !s->nd)
                goto nomem;
        for (uint32_t i = 0; i < t->nadapters; i++) {
                s->ad[i].slots = calloc(t->adapters[i].nslots + 1, sizeof(struct ntbf__slot));
                if (!s->ad[i].slots)
                        goto nomem;
        }
        for (uint32_t i = 0; i < t->nswitches; i++) {
                s->sw[i].mc = calloc(t->switches[i].p.mcast_groups + 1, sizeof(struct ntbf__mslot));
                if (!s->sw[i].mc)
                        goto nomem;
        }
        if (build_networks(s) || build_baseline(s))
                goto nomem;
        int bad = 0;
        for (uint32_t i = 0; i < t->nswitches; i++) {
                const struct ntbf_switch *sw = &t->switches[i];
                if (!sw->p.rid_table || s->sw[i].entries <= sw->p.rid_table)
                        continue;
                uint32_t cpus = 0;
                for (uint32_t k = 0; k < s->nbase; k++)
                        cpus += s->base[k].sw == i;
                if (diags)
                        ntbf_diag_add(diags, NTBF_SEV_ERROR, t->file, sw->loc,
                                      "switch '%s': the CPUs of %u nodes need %" PRIu64
                                      " requester-ID entries on each port but it has %u; raise "
                                      "rid_table or split the fabric",
                                      sw->name, cpus, s->sw[i].entries, sw->p.rid_table);
                bad++;
        }
        if (bad) {
                ntbf_state_free(s);
                return NTBF_ECONFIG;
        }
        *out = s;
        return 0;
nomem:
        ntbf_state_free(s);
        return -ENOMEM;
}

/* Device functions of the topology (the hardware BAR table's rows). */
static size_t hw_funcs(const struct ntbf_topo *t)
{
        size_t n = 0;
        for (uint32_t d = 0; d < t->ndevices; d++)
                n += ntbf_device_nfuncs(&t->devices[d]);
        return n;
}

int ntbf_state_set_bars(struct ntbf_state *s, uint32_t device, uint32_t f,
                        const uint64_t addr[NTBF_MAX_BARS], char *why, size_t whylen)
{
        const struct ntbf_topo *t = s->t;
        if (device >= t->ndevices || f >= ntbf_device_nfuncs(&t->devices[device])) {
                snprintf(why, whylen, "no device function %u of device %u", f, device);
                return -EINVAL;
        }
        const struct ntbf_device *d = &t->devices[device];
        char dn[96];
        function_name(t, device, f, dn, sizeof(dn));
        for (uint32_t b = 0; addr && b < NTBF_MAX_BARS; b++) {
                uint64_t size = ntbf_device_bar_size(d, f, b);
                if (!size && addr[b]) {
                        snprintf(why, whylen, "%s has no BAR%u in the cluster file", dn, b);
                        return -EINVAL;
                }
                if (size && (!addr[b] || addr[b] % size || addr[b] >= NTBF_PHYS_LIMIT ||
                             NTBF_PHYS_LIMIT - addr[b] < size)) {
                        snprintf(why, whylen,
                                 "BAR%u of %s at 0x%" PRIx64 " is not a nonzero multiple of its "
                                 "size (0x%" PRIx64 ") below 2^48",
                                 b, dn, addr[b], size);
                        return -EINVAL;
                }
        }
        if (!s->hw_bar) {
                if (!addr)
                        return 0;
                s->hw_bar = calloc(hw_funcs(t) * NTBF_MAX_BARS + 1, sizeof(uint64_t));
                s->hw_first = calloc(t->ndevices + 1, sizeof(uint32_t));
                if (!s->hw_bar || !s->hw_first) {
                        free(s->hw_bar);
                        free(s->hw_first);
                        s->hw_bar = NULL;
                        s->hw_first = NULL;
                        snprintf(why, whylen, "out of memory");
                        return -ENOMEM;
                }
                for (uint32_t k = 0, n = 0; k < t->ndevices; k++) {
                        s->hw_first[k] = n;
                        n += ntbf_device_nfuncs(&t->devices[k]);
                }
        }
        uint64_t *row = &s->hw_bar[((size_t)s->hw_first[device] + f) * NTBF_MAX_BARS];
        for (uint32_t b = 0; b < NTBF_MAX_BARS; b++)
                row[b] = addr ? addr[b] : 0;
        return 0;
}

uint64_t ntbf_state_bar_addr(const struct ntbf_state *s, uint32_t device, uint32_t f, uint32_t b)
{
        const struct ntbf_topo *t = s->t;
        if (device >= t->ndevices || b >= NTBF_MAX_BARS)
                return 0;
        const struct ntbf_device *d = &t->devices[device];
        if (f >= ntbf_device_nfuncs(d) || !ntbf_device_bar_size(d, f, b))
                return 0;
        uint64_t hw =
            s->hw_bar ? s->hw_bar[((size_t)s->hw_first[device] + f) * NTBF_MAX_BARS + b] : 0;
        return hw ? hw : ntbf_device_bar_addr(d, f, b);
}

/* x, in region reg, where the hardware has it: inside a real device's BAR, the same offset
 * from the address its host gave that BAR (ntbf_state_set_bars); elsewhere, x itself. */
static uint64_t hw_x(const struct ntbf_state *s, const struct ntbf_region *reg, uint64_t x)
{
        if (!s->hw_bar || (reg->kind != NTBF_REGION_BAR && reg->kind != NTBF_REGION_VF_BAR))
                return x;
        const struct ntbf_device *d = &s->t->devices[reg->obj];
        uint32_t f0 = reg->kind == NTBF_REGION_BAR ? 0 : d->functions;
        uint64_t size = ntbf_device_bar_size(d, f0, reg->index);
        if (!size || x < reg->base)
                return x;
        uint32_t f = f0 + (uint32_t)((x - reg->base) / size);
        return ntbf_state_bar_addr(s, reg->obj, f, reg->index) +
               (x - ntbf_device_bar_addr(d, f, reg->index));
}

struct ntbf_state *ntbf_state_clone(const struct ntbf_state *src)
{
        const struct ntbf_topo *t = src->t;
        struct ntbf_state *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->t = t;
        s->next_id = src->next_id;
        s->nnets = src->nnets;
        s->ad = calloc(t->nadapters + 1, sizeof(*s->ad));
        s->sw = calloc(t->nswitches + 1, sizeof(*s->sw));
        s->nd = calloc(t->nnodes + 1, sizeof(*s->nd));
        s->net_first = malloc((t->nswitches + 2) * sizeof(uint32_t));
        s->net_sw = malloc((t->nswitches + 1) * sizeof(uint32_t));
        s->adapter_net = malloc((t->nadapters + 1) * sizeof(uint32_t));
        s->base = malloc((src->nbase + 1) * sizeof(*s->base));
        s->allocs = calloc(src->nallocs + 1, sizeof(*s->allocs));
        if (!s->ad || !s->sw || !s->nd || !s->net_first || !s->net_sw || !s->adapter_net ||
            !s->base || !s->allocs)
                goto fail;
        memcpy(s->net_first, src->net_first, (t->nswitches + 2) * sizeof(uint32_t));
        memcpy(s->net_sw, src->net_sw, (t->nswitches + 1) * sizeof(uint32_t));
        memcpy(s->adapter_net, src->adapter_net, (t->nadapters + 1) * sizeof(uint32_t));
        if (src->nbase)
                memcpy(s->base, src->base, src->nbase * sizeof(*s->base));
        s->nbase = src->nbase;
        for (uint32_t i = 0; i < t->nadapters; i++) {
                size_t n = t->adapters[i].nslots + 1;
                s->ad[i].used = src->ad[i].used;
                s->ad[i].used_bytes = src->ad[i].used_bytes;
                s->ad[i].rid_entries = src->ad[i].rid_entries;
                s->ad[i].slots = malloc(n * sizeof(struct ntbf__slot));
                if (!s->ad[i].slots || rset_copy(&s->ad[i].rids, &src->ad[i].rids))
                        goto fail;
                memcpy(s->ad[i].slots, src->ad[i].slots, n * sizeof(struct ntbf__slot));
        }
        for (uint32_t i = 0; i < t->nswitches; i++) {
                size_t n = t->switches[i].p.mcast_groups + 1;
                struct ntbf__switch_st *d = &s->sw[i];
                *d = src->sw[i];
                d->mc = malloc(n * sizeof(*d->mc));
                memset(&d->reqs, 0, sizeof(d->reqs));
                if (!d->mc || rset_copy(&d->reqs, &src->sw[i].reqs))
                        goto fail;
                memcpy(d->mc, src->sw[i].mc, n * sizeof(*d->mc));
        }
        for (uint32_t i = 0; i < t->nnodes; i++) {
                const struct ntbf__node_st *o = &src->nd[i];
                s->nd[i] = *o;
                s->nd[i].v = malloc((o->cap + 1) * sizeof(*o->v));
                if (!s->nd[i].v) {
                        s->nd[i].n = 0;
                        goto fail;
                }
                if (o->n)
                        memcpy(s->nd[i].v, o->v, o->n * sizeof(*o->v));
        }
        s->cap_allocs = src->nallocs + 1;
        for (uint32_t i = 0; i < src->nallocs; i++) {
                struct ntbf__alloc *a = malloc(sizeof(*a));
                if (!a)
                        goto fail;
                a->id = src->allocs[i]->id;
                if (ntbf_plan_copy(&a->plan, &src->allocs[i]->plan)) {
                        free(a);
                        goto fail;
                }
                s->allocs[s->nallocs++] = a;
        }
        if (src->hw_bar) {
                size_t nf = hw_funcs(t), nb = nf * NTBF_MAX_BARS * sizeof(uint64_t);
                s->hw_bar = malloc(nb);
                s->hw_first = malloc((t->ndevices + 1) * sizeof(uint32_t));
                if (!s->hw_bar || !s->hw_first)
                        goto fail;
                memcpy(s->hw_bar, src->hw_bar, nb);
                memcpy(s->hw_first, src->hw_first, (t->ndevices + 1) * sizeof(uint32_t));
        }
        return s;
fail:
        ntbf_state_free(s);
        return NULL;
}

/* ---- ranges of inbound domains ---------------------------------------------------------- */

/* The arena pieces of node n's inbound domain: IOVA space, or the RAM pool. */
static uint32_t arena(const struct ntbf_topo *t, uint32_t n, uint64_t lo[2], uint64_t hi[2])
{
        if (t->nodes[n].iommu) {
                lo[0] = NTBF_IOVA_BASE;
                hi[0] = NTBF_PHYS_LIMIT;
                return 1;
        }
        uint32_t k = 0;
        const struct ntbf_addrmap *m = &t->maps[n];
        for (uint32_t i = 0; i < m->n && k < 2; i++) {
                const struct ntbf_region *r = &m->v[i];
                if (r->kind != NTBF_REGION_RAM || r->base + r->size <= NTBF_POOL_BASE)
                        continue;
                lo[k] = r->base < NTBF_POOL_BASE ? NTBF_POOL_BASE : r->base;
                hi[k] = r->base + r->size;
                k++;
        }
        return k;
}

static uint64_t arena_bytes(const struct ntbf_topo *t, uint32_t n)
{
        uint64_t lo[2], hi[2], sum = 0;
        uint32_t k = arena(t, n, lo, hi);
        for (uint32_t i = 0; i < k; i++)
                sum += hi[i] - lo[i];
        return sum;
}

const struct ntbf__range *ntbf__range_find(const struct ntbf_state *s, uint32_t n, uint64_t addr)
{
        const struct ntbf__node_st *ns = &s->nd[n];
        uint32_t lo = 0, hi = ns->n;
        while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                const struct ntbf__range *r = &ns->v[mid];
                if (addr < r->addr)
                        hi = mid;
                else if (addr - r->addr >= r->size)
                        lo = mid + 1;
                else
                        return r;
        }
        return NULL;
}

static uint32_t range_index(const struct ntbf__node_st *ns, uint64_t addr)
{
        uint32_t lo = 0, hi = ns->n;
        while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (ns->v[mid].addr < addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static bool range_free(const struct ntbf__node_st *ns, uint64_t addr, uint64_t size)
{
        uint32_t i = range_index(ns, addr);
        if (i < ns->n && ns->v[i].addr < addr + size)
                return false;
        if (i > 0 && ns->v[i - 1].addr + ns->v[i - 1].size > addr)
                return false;
        return true;
}

/* ---- admission -------------------------------------------------------------------------- */

struct adm {
        const struct ntbf_state *s;
        const struct ntbf_topo *t;
        struct ntbf_plan *p;
        const char *verb; /* "this borrow", ... */
};

static int refuse(struct adm *a, int result, enum ntbf_budget_kind kind, uint32_t obj,
                  uint64_t used, uint64_t total, uint64_t need, const char *fmt, ...)
    NTBF_PRINTF(8, 9);
static int refuse(struct adm *a, int result, enum ntbf_budget_kind kind, uint32_t obj,
                  uint64_t used, uint64_t total, uint64_t need, const char *fmt, ...)
{
        struct ntbf_plan *p = a->p;
        p->result = result;
        p->refused_kind = kind;
        p->refused_obj = obj;
        p->refused_used = used;
        p->refused_total = total;
        p->refused_need = need;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->why, sizeof(p->why), fmt, ap);
        va_end(ap);
        return result;
}

static int invalid(struct adm *a, const char *fmt, ...) NTBF_PRINTF(2, 3);
static int invalid(struct adm *a, const char *fmt, ...)
{
        struct ntbf_plan *p = a->p;
        p->result = -EINVAL;
        p->refused_obj = NTBF_NONE;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->why, sizeof(p->why), fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static int nomem(struct adm *a)
{
        a->p->result = -ENOMEM;
        snprintf(a->p->why, sizeof(a->p->why), "out of memory");
        return -ENOMEM;
}

/* A path failure as a plan result: NTBF_ENOPATH and -EINVAL carry the path's sentence. */
static int path_result(struct adm *a, int r)
{
        a->p->result = r;
        a->p->refused_obj = NTBF_NONE;
        return r;
}

/* Slots this plan already takes on one adapter (consulted before the state's). */
struct claims {
        uint32_t n;
        const struct ntbf_res *r[MAX_CLAIMS];
};

static void claims_of(const struct ntbf_plan *p, uint32_t ai, struct claims *c)
{
        c->n = 0;
        for (uint32_t i = 0; i < p->nres && c->n < MAX_CLAIMS; i++)
                if (p->res[i].kind == NTBF_RES_LUT && p->res[i].obj == ai)
                        c->r[c->n++] = &p->res[i];
}

/*
 * The largest and smallest slots of an adapter's windows. A far-side range aligned to the
 * largest (or to its own size rounded up, when smaller) is carried by one translation of any
 * window it fits; the MSI window is one of the smallest slots.
 */
static uint64_t max_slot(const struct ntbf_adapter *ad)
{
        uint64_t m = 0;
        for (uint32_t w = 0; w < ad->nwin; w++)
                m = ad->win[w].slot_size > m ? ad->win[w].slot_size : m;
        return m;
}

static uint64_t min_slot(const struct ntbf_adapter *ad)
{
        uint64_t m = UINT64_MAX;
        for (uint32_t w = 0; w < ad->nwin; w++)
                m = ad->win[w].slot_size < m ? ad->win[w].slot_size : m;
        return m;
}

/* Slot size of the window holding adapter slot k (0 if none). */
static uint64_t slot_bytes(const struct ntbf_adapter *ad, uint32_t k)
{
        const struct ntbf_window *w = ntbf_adapter_slot_window(ad, k);
        return w ? w->slot_size : 0;
}

/* What slot i of a LUT resource translates: whole slots, the last one the rest. */
static struct ntbf__slot res_slot(const struct ntbf_adapter *ad, const struct ntbf_res *r,
                                  uint32_t i)
{
        uint64_t E = slot_bytes(ad, r->first);
        return (struct ntbf__slot){r->dst_addr + i * E,
                                   i + 1 < r->count ? E : r->size - (uint64_t)i * E,
                                   1,
                                   r->dest,
                                   r->dst_node,
                                   r->dst_adapter,
                                   r->group,
                                   0};
}

/* The effective content of slot k: what the plan put there, else the state's. */
static bool eff_slot(const struct ntbf_adapter *ad, const struct ntbf__adapter_st *as,
                     const struct claims *c, uint32_t k, struct ntbf__slot *out)
{
        for (uint32_t i = 0; i < c->n; i++) {
                const struct ntbf_res *r = c->r[i];
                if (k - r->first < r->count) {
                        *out = res_slot(ad, r, k - r->first);
                        return true;
                }
        }
        if (!as->slots[k].refs)
                return false;
        *out = as->slots[k];
        return true;
}

static bool claimed(const struct claims *c, uint32_t k)
{
        for (uint32_t i = 0; i < c->n; i++)
                if (k - c->r[i]->first < c->r[i]->count)
                        return true;
        return false;
}

struct lut_want {
        uint32_t adapter;
        enum ntbf_dest_kind dest;
        uint32_t dst_node, dst_adapter, group;
        uint64_t x, size; /* far-side range to reach */
        const char *what; /* for the plan: "BAR0", "DMA window", ... */
        const char *desc; /* for refusals: "BAR0 of a.nvme0", "the DMA window" */
        const char *fix;  /* for slot exhaustion */
};

static bool slot_is(const struct ntbf__slot *sl, const struct lut_want *w, uint64_t addr)
{
        return sl->dest == (uint32_t)w->dest && sl->dst_node == w->dst_node &&
               sl->dst_adapter == w->dst_adapter && sl->group == w->group && sl->dst_addr == addr;
}

/*
 * How one window carries a far-side range: n consecutive slots from far address lo, each a
 * whole slot but the last, which translates `last` bytes (docs/model.md, "Windows").
 */
struct fit {
        uint32_t win, n;
        uint64_t lo, last;
};

/* Fit [x, x + size) into window w by its rules; false when it cannot ever. */
static bool fit_window(const struct ntbf_window *w, uint32_t win, uint64_t x, uint64_t size,
                       struct fit *f)
{
        uint64_t E = w->slot_size, A = w->addr_align, Z = w->size_align, end = x + size;
        uint64_t lo = align_down(x, A);
        if (w->flags & NTBF_WIN_NATURAL_ALIGN) {
                /* The address aligned to the translation's size rounded up to a power of two. */
                for (uint64_t p = pow2_ceil(end - lo);; p *= 2) {
                        lo = align_down(x, p > A ? p : A);
                        if (end - lo <= p || p > E)
                                break;
                }
        }
        uint64_t t = ntbf_align_up(end - lo, Z);
        if (t <= w->size_max && (!(w->flags & NTBF_WIN_NATURAL_ALIGN) || !(lo % pow2_ceil(t)))) {
                *f = (struct fit){win, 1, lo, t};
                return true;
        }
        /* Several slots: whole ones, so only where a translation is a whole slot. */
        if (w->slots < 2 || w->size_max != E)
                return false;
        lo = align_down(x, E);
        uint64_t n = ntbf_div_ceil(end - lo, E);
        if (n > w->slots - w->reserved)
                return false;
        *f = (struct fit){win, (uint32_t)n, lo, ntbf_align_up(end - lo - (n - 1) * E, Z)};
        return true;
}

/* Whether slots [k, k + f->n) hold f's blocks of w's destination (and at least its bytes). */
static bool run_maps(const struct ntbf_adapter *ad, const struct ntbf__adapter_st *as,
                     const struct claims *c, uint32_t k, const struct fit *f,
                     const struct lut_want *w)
{
        uint64_t E = ad->win[f->win].slot_size;
        struct ntbf__slot sl;
        for (uint32_t i = 0; i < f->n; i++)
                if (!eff_slot(ad, as, c, k + i, &sl) || !slot_is(&sl, w, f->lo + i * E) ||
                    sl.xsize < (i + 1 < f->n ? E : f->last))
                        return false;
        return true;
}

/* Who programs a slot (docs/model.md: xlat side); the budget is the window owner's. */
static uint32_t programmer(const struct ntbf_topo *t, uint32_t ai, enum ntbf_dest_kind dest,
                           uint32_t dst_node)
{
        const struct ntbf_adapter *ad = &t->adapters[ai];
        if ((ad->p.xlat & NTBF_XLAT_OUTBOUND) || dest == NTBF_DEST_MCAST || dst_node == NTBF_NONE)
                return ad->node;
        return dst_node;
}

/* A run of f->n slots of window f->win this plan can share (exact blocks), or NTBF_NONE. */
static uint32_t find_shared(const struct ntbf_adapter *ad, const struct ntbf__adapter_st *as,
                            const struct claims *c, const struct fit *f, const struct lut_want *w)
{
        const struct ntbf_window *W = &ad->win[f->win];
        uint32_t lo = W->first_slot + W->reserved, hi = W->first_slot + W->slots;
        /* A run this plan already took, else one in the state (scanned only when the adapter
         * has slots in use: admission cost stays independent of the LUT size). */
        for (uint32_t i = 0; i < c->n; i++) {
                const struct ntbf_res *r = c->r[i];
                uint64_t E = slot_bytes(ad, r->first);
                if (r->first < lo || r->first >= hi || f->lo < r->dst_addr ||
                    (f->lo - r->dst_addr) % E || (f->lo - r->dst_addr) / E >= r->count)
                        continue;
                uint32_t k = r->first + (uint32_t)((f->lo - r->dst_addr) / E);
                if (k + f->n <= hi && run_maps(ad, as, c, k, f, w))
                        return k;
        }
        for (uint32_t k = lo; as->used && k + f->n <= hi; k++) {
                const struct ntbf__slot *x = &as->slots[k];
                if (x->refs && x->dst_addr == f->lo && slot_is(x, w, f->lo) &&
                    run_maps(ad, as, c, k, f, w))
                        return k;
        }
        return NTBF_NONE;
}

/* The first run of n free slots of window win, or NTBF_NONE; *nfree, *best for refusals. */
static uint32_t find_free(const struct ntbf_adapter *ad, const struct ntbf__adapter_st *as,
                          const struct claims *c, uint32_t win, uint32_t n, uint32_t *nfree,
                          uint32_t *best)
{
        const struct ntbf_window *W = &ad->win[win];
        uint32_t lo = W->first_slot + W->reserved, hi = W->first_slot + W->slots;
        uint32_t run = 0, first = NTBF_NONE;
        *nfree = *best = 0;
        for (uint32_t k = lo; k < hi; k++) {
                if (as->slots[k].refs || claimed(c, k)) {
                        run = 0;
                        continue;
                }
                (*nfree)++;
                if (++run > *best)
                        *best = run;
                if (run == n && first == NTBF_NONE)
                        first = k + 1 - n;
        }
        return first;
}

/* Windows of ad, the one with the smallest slots first (ties: window order). */
static uint32_t window_order(const struct ntbf_adapter *ad, uint32_t *order)
{
        uint32_t n = 0;
        for (uint32_t w = 0; w < ad->nwin; w++) {
                uint32_t k = n++;
                for (; k > 0 && ad->win[order[k - 1]].slot_size > ad->win[w].slot_size; k--)
                        order[k] = order[k - 1];
                order[k] = w;
        }
        return n;
}

/* The refusal when no window can hold the range however free (the whole window is small). */
static int refuse_size(struct adm *a, const struct lut_want *w, const char *an)
{
        const struct ntbf_adapter *ad = &a->t->adapters[w->adapter];
        const struct ntbf__adapter_st *as = &a->s->ad[w->adapter];
        char s1[32], s2[32], s3[32];
        if (ad->nwin == 1) {
                uint64_t E = ad->win[0].slot_size;
                uint64_t lo = align_down(w->x, E), hi = ntbf_align_up(w->x + w->size, E);
                uint64_t n = (hi - lo) / E;
                return refuse(a, NTBF_ENOSPC_BUDGET, NTBF_BUDGET_WINDOW, w->adapter, as->used_bytes,
                              ad->win[0].size, n * E,
                              "%s: %s needs %" PRIu64 " slots of %s (%s of window) but the whole "
                              "window has %u (%s); enlarge the window of %s",
                              an, w->desc, n, ntbf_size_fmt(E, s1, sizeof(s1)),
                              ntbf_size_fmt(n * E, s2, sizeof(s2)), ad->win[0].slots,
                              ntbf_size_fmt(ad->win[0].size, s3, sizeof(s3)), an);
        }
        char list[320];
        size_t o = 0;
        uint64_t total = 0;
        for (uint32_t i = 0; i < ad->nwin && o < sizeof(list); i++) {
                const struct ntbf_window *W = &ad->win[i];
                total += W->size;
                o += (size_t)snprintf(list + o, sizeof(list) - o, "%swindow %u %u x %s",
                                      i ? ", " : "", i, W->slots - W->reserved,
                                      ntbf_size_fmt(W->slot_size, s1, sizeof(s1)));
                if (o < sizeof(list) && W->size_max < W->slot_size)
                        o += (size_t)snprintf(list + o, sizeof(list) - o, " (%s at most)",
                                              ntbf_size_fmt(W->size_max, s2, sizeof(s2)));
        }
        return refuse(a, NTBF_ENOSPC_BUDGET, NTBF_BUDGET_WINDOW, w->adapter, as->used_bytes, total,
                      w->size,
                      "%s: no window can carry %s (%s at 0x%" PRIx64 "): %s; enlarge a window "
                      "of %s",
                      an, w->desc, ntbf_size_fmt(w->size, s3, sizeof(s3)), w->x, list, an);
}

/*
 * Take the consecutive slots of an adapter that reach [x, x + size): in the window of the
 * smallest slots that fits it, share a run that already maps exactly these blocks of the
 * same destination, else take the first free run there, else try the next window. *near is
 * the address of x in the window.
 */
static int take_lut(struct adm *a, const struct lut_want *w, uint64_t *near)
{
        const struct ntbf_topo *t = a->t;
        const struct ntbf_adapter *ad = &t->adapters[w->adapter];
        const struct ntbf__adapter_st *as = &a->s->ad[w->adapter];
        char an[72], s1[32];
        adapter_name(t, w->adapter, an, sizeof(an));
        uint32_t order[NTBF_MAX_WINDOWS], nw = window_order(ad, order);
        struct fit fits[NTBF_MAX_WINDOWS];
        bool can[NTBF_MAX_WINDOWS] = {false};
        uint32_t ncan = 0;
        for (uint32_t i = 0; i < nw; i++)
                ncan += can[i] = fit_window(&ad->win[order[i]], order[i], w->x, w->size, &fits[i]);
        /* Translated far-side addresses must fit the adapter's width (what the first window
         * that can carry it would translate; whole slots of window 0 if none can). */
        uint64_t top = 0;
        for (uint32_t i = 0; i < nw && !top; i++)
                if (can[i])
                        top = fits[i].lo + (fits[i].n - 1) * ad->win[order[i]].slot_size +
                              fits[i].last;
        if (!top)
                top = ntbf_align_up(w->x + w->size, ad->win[0].slot_size);
        if (ad->p.addr_bits < 64 && (top - 1) >> ad->p.addr_bits) {
                uint64_t limit = UINT64_C(1) << ad->p.addr_bits;
                return refuse(a, NTBF_EADDRLIMIT, NTBF_BUDGET_ADDR, w->adapter, top - 1, limit, 0,
                              "%s translates %u-bit far-side addresses but %s needs slots up to "
                              "0x%" PRIx64 "%s%s%s; use an adapter with wider translation "
                              "(addr_bits)",
                              an, ad->p.addr_bits, w->desc, top - 1,
                              w->dst_node != NTBF_NONE ? " in node '" : "",
                              w->dst_node != NTBF_NONE ? t->nodes[w->dst_node].name : "",
                              w->dst_node != NTBF_NONE ? "'" : "");
        }
        if (!ncan)
                return refuse_size(a, w, an);
        struct claims c;
        claims_of(a->p, w->adapter, &c);
        uint32_t first = NTBF_NONE, pick = 0;
        bool shared = false;
        for (uint32_t i = 0; i < nw && first == NTBF_NONE; i++)
                if (can[i] && (first = find_shared(ad, as, &c, &fits[i], w)) != NTBF_NONE)
                        pick = i;
        shared = first != NTBF_NONE;
        uint32_t nfree[NTBF_MAX_WINDOWS] = {0}, best[NTBF_MAX_WINDOWS] = {0};
        for (uint32_t i = 0; i < nw && first == NTBF_NONE; i++)
                if (can[i] && (first = find_free(ad, as, &c, order[i], fits[i].n, &nfree[i],
                                                 &best[i])) != NTBF_NONE)
                        pick = i;
        if (first == NTBF_NONE) {
                if (ad->nwin == 1) {
                        const struct ntbf_window *W = &ad->win[0];
                        uint32_t L = W->slots - W->reserved, n = fits[0].n;
                        return refuse(
                            a, NTBF_ENOSPC_BUDGET, NTBF_BUDGET_LUT, w->adapter, L - nfree[0], L, n,
                            "%s: window has no %u free consecutive slot%s of %s for %s "
                            "(%u free, largest run %u); %s",
                            an, n, n == 1 ? "" : "s", ntbf_size_fmt(W->slot_size, s1, sizeof(s1)),
                            w->desc, nfree[0], best[0], w->fix);
                }
                char list[400];
                size_t o = 0;
                uint32_t used = 0, total = 0, need = 0;
                for (uint32_t i = 0; i < nw && o < sizeof(list); i++) {
                        if (!can[i])
                                continue;
                        const struct ntbf_window *W = &ad->win[order[i]];
                        used += W->slots - W->reserved - nfree[i];
                        total += W->slots - W->reserved;
                        need = need ? need : fits[i].n;
                        o += (size_t)snprintf(
                            list + o, sizeof(list) - o,
                            "%swindow %u has no %u free consecutive slot%s of "
                            "%s (%u free, largest run %u)",
                            o ? "; " : "", order[i], fits[i].n, fits[i].n == 1 ? "" : "s",
                            ntbf_size_fmt(W->slot_size, s1, sizeof(s1)), nfree[i], best[i]);
                }
                return refuse(a, NTBF_ENOSPC_BUDGET, NTBF_BUDGET_LUT, w->adapter, used, total, need,
                              "%s: no window has room for %s: %s; %s", an, w->desc, list, w->fix);
        }
        const struct fit *f = &fits[pick];
        uint64_t E = ad->win[f->win].slot_size;
        struct ntbf_res *r = add_res(a->p, NTBF_RES_LUT, w->adapter);
        if (!r)
                return nomem(a);
        r->first = first;
        r->count = f->n;
        r->shared = shared;
        r->group = w->group;
        r->dest = w->dest;
        r->dst_node = w->dst_node;
        r->dst_adapter = w->dst_adapter;
        r->dst_addr = f->lo;
        r->addr = ad->win[f->win].base + (uint64_t)(first - ad->win[f->win].first_slot) * E;
        r->size = (uint64_t)(f->n - 1) * E + f->last;
        r->programmer = programmer(t, w->adapter, w->dest, w->dst_node);
        set_what(r, w->what);
        *near = r->addr + (w->x - f->lo);
        return 0;
}

static bool plan_has(const struct ntbf_plan *p, enum ntbf_res_kind kind, uint32_t obj,
                     const struct ntbf_topo *t, uint32_t key)
{
        for (uint32_t i = 0; i < p->nres; i++)
                if (p->res[i].kind == kind && p->res[i].obj == obj &&
                    ntbf__req_key(t, &p->res[i].req) == key)
                        return true;
        return false;
}

/* Hardware entries requester key costs in adapter ai's table (its rid_mask rule); 0: cannot. */
static uint32_t rid_cost(const struct ntbf_topo *t, uint32_t ai, uint32_t key)
{
        return key < t->ndevices ? ntbf_adapter_rid_cost(&t->adapters[ai], &t->devices[key]) : 1;
}

/* The requester's entry in the table of the adapter it leaves its host through. */
static int take_rid(struct adm *a, uint32_t ai, const struct ntbf_requester *rq, const char *fix)
{
        const struct ntbf_topo *t = a->t;
        const struct ntbf_adapter *ad = &t->adapters[ai];
        if (!ad->p.rid_table || rq->device == NTBF_NONE)
                return 0; /* no table, or the CPU (its entries are reserved) */
        uint32_t key = ntbf__req_key(t, rq);
        if (plan_has(a->p, NTBF_RES_RID, ai, t, key))
                return 0;
        const struct ntbf__adapter_st *as = &a->s->ad[ai];
        bool present = ntbf__rset_refs(&as->rids, key) > 0;
        if (!present) {
                char an[72], dn[96];
                adapter_name(t, ai, an, sizeof(an));
                const struct ntbf_device *dev = &t->devices[rq->device];
                uint32_t cost = rid_cost(t, ai, key), nf = ntbf_device_nfuncs(dev);
                snprintf(dn, sizeof(dn), "%s.%s", t->nodes[dev->node].name, dev->name);
                if (!cost)
                        return refuse(
                            a, NTBF_ENOSPC_BUDGET, NTBF_BUDGET_RID, ai,
                            ad->p.rid_reserved + as->rid_entries, ad->p.rid_table, nf,
                            "%s: its requester-ID table holds one ID per entry and its driver "
                            "programs one entry per device (rid_mask: refuse), but %s has %u "
                            "functions, which would need %u entries; %s cannot pass through "
                            "%s: lend it through an adapter whose table takes masks, or set "
                            "rid_mask: expand if its driver programs one entry per function",
                            an, dn, nf, nf, dn, an);
                uint64_t pending = 0;
                for (uint32_t i = 0; i < a->p->nres; i++) {
                        const struct ntbf_res *r = &a->p->res[i];
                        if (r->kind == NTBF_RES_RID && r->obj == ai && !r->shared)
                                pending += rid_cost(t, ai, ntbf__req_key(t, &r->req));
                }
                uint64_t used = ad->p.rid_reserved + as->rid_entries + pending;
                if (used + cost > ad->p.rid_table) {
                        char each[240] = "";
                        if (ad->p.rid_mask == NTBF_RID_MASK_EXPAND && nf > 1)
                                snprintf(each, sizeof(each),
                                         " (one per function: its table holds one ID per entry, "
                                         "rid_mask: expand, and %s has %u functions)",
                                         dn, nf);
                        return refuse(
                            a, NTBF_ENOSPC_BUDGET, NTBF_BUDGET_RID, ai, used, ad->p.rid_table, cost,
                            "%s: requester-ID table is full (%" PRIu64
                            " of %u used: %u for the CPU, %" PRIu64 " by devices); %s needs %u "
                            "more%s; %s",
                            an, used, ad->p.rid_table, ad->p.rid_reserved,
                            used - ad->p.rid_reserved, a->verb, cost, each, fix);
                }
        }
        struct ntbf_res *r = add_res(a->p, NTBF_RES_RID, ai);
        if (!r)
                return nomem(a);
        r->req = *rq;
        r->shared = present;
        snprintf(r->what, sizeof(r->what), "requester ID");
        return 0;
}

/* The requester registered on switch sw: one entry on each of its connected ports. */
static int take_switch(struct adm *a, uint32_t sw, const struct ntbf_requester *rq)
{
        const struct ntbf_topo *t = a->t;
        const struct ntbf_switch *x = &t->switches[sw];
        if (!x->p.rid_table)
                return 0;
        uint32_t key = ntbf__req_key(t, rq);
        if (plan_has(a->p, NTBF_RES_SWITCH_RID, sw, t, key))
                return 0;
        const struct ntbf__switch_st *ss = &a->s->sw[sw];
        bool present = ntbf__rset_refs(&ss->reqs, key) > 0;
        if (!present) {
                uint64_t w = key_weight(t, key), pending = 0;
                for (uint32_t i = 0; i < a->p->nres; i++) {
                        const struct ntbf_res *r = &a->p->res[i];
                        if (r->kind == NTBF_RES_SWITCH_RID && r->obj == sw && !r->shared)
                                pending += key_weight(t, ntbf__req_key(t, &r->req));
                }
                uint64_t used = ss->entries + pending;
                if (used + w > x->p.rid_table)
                        return refuse(a, NTBF_ENOSPC_BUDGET, NTBF_BUDGET_SWITCH_RID, sw, used,
                                      x->p.rid_table, w,
                                      "switch '%s': requester-ID table is full (%" PRIu64
                                      " of %u entries used on each port: %" PRIu64
                                      " for CPUs, %" PRIu64 " by devices); %s needs %" PRIu64
                                      " more on every connected port; return a device whose "
                                      "traffic crosses '%s', raise rid_table, or keep borrower "
                                      "and lender on one switch",
                                      x->name, used, x->p.rid_table, ss->baseline,
                                      used - ss->baseline, a->verb, w, x->name);
        }
        struct ntbf_res *r = add_res(a->p, NTBF_RES_SWITCH_RID, sw);
        if (!r)
                return nomem(a);
        r->req = *rq;
        r->shared = present;
        snprintf(r->what, sizeof(r->what), "%s",
                 rq->device == NTBF_NONE ? "CPU requester IDs" : "requester ID");
        return 0;
}

static int take_path_switches(struct adm *a, const struct ntbf_path *p,
                              const struct ntbf_requester *rq)
{
        for (uint32_t i = 0; i < p->nhops; i++)
                if (p->hops[i].kind == NTBF_HOP_SWITCH) {
                        int r = take_switch(a, p->hops[i].obj, rq);
                        if (r)
                                return r;
                }
        return 0;
}

/*
 * Reserve size bytes aligned to align in node n's inbound domain; with maps_to set, an
 * existing range mapping exactly the same pages is shared instead.
 */
static int take_range(struct adm *a, uint32_t n, uint64_t size, uint64_t align, uint64_t maps_to,
                      const char *what, uint64_t *out)
{
        const struct ntbf_topo *t = a->t;
        const struct ntbf__node_st *ns = &a->s->nd[n];
        struct ntbf_plan *p = a->p;
        if (maps_to) {
                for (uint32_t i = 0; i < p->nres; i++) {
                        const struct ntbf_res *r = &p->res[i];
                        if (r->kind == NTBF_RES_RANGE && r->obj == n && r->maps_to == maps_to &&
                            r->size == size) {
                                *out = r->addr;
                                goto share;
                        }
                }
                for (uint32_t i = 0; i < ns->n; i++)
                        if (ns->v[i].maps_to == maps_to && ns->v[i].size == size) {
                                *out = ns->v[i].addr;
                                goto share;
                        }
        }
        uint64_t lo[2], hi[2];
        uint32_t na = arena(t, n, lo, hi);
        for (uint32_t k = 0; k < na; k++) {
                uint64_t c = ntbf_align_up(lo[k], align);
                for (bool moved = true; moved;) {
                        moved = false;
                        for (uint32_t i = range_index(ns, c) ? range_index(ns, c) - 1 : 0;
                             i < ns->n; i++) {
                                const struct ntbf__range *r = &ns->v[i];
                                if (r->addr + r->size <= c)
                                        continue;
                                if (r->addr >= c + size)
                                        break;
                                c = ntbf_align_up(r->addr + r->size, align);
                        }
                        for (uint32_t i = 0; i < p->nres; i++) {
                                const struct ntbf_res *r = &p->res[i];
                                if (r->kind == NTBF_RES_RANGE && r->obj == n && !r->shared &&
                                    r->addr < c + size && c < r->addr + r->size) {
                                        c = ntbf_align_up(r->addr + r->size, align);
                                        moved = true;
                                }
                        }
                }
                if (c >= lo[k] && c + size <= hi[k] && c + size > c) {
                        *out = c;
                        struct ntbf_res *r = add_res(p, NTBF_RES_RANGE, n);
                        if (!r)
                                return nomem(a);
                        r->addr = c;
                        r->size = size;
                        r->maps_to = maps_to;
                        set_what(r, what);
                        return 0;
                }
        }
        char s1[32], s2[32];
        bool io = t->nodes[n].iommu;
        return refuse(
            a, NTBF_ENOSPC_BUDGET, NTBF_BUDGET_RANGE, n, ns->bytes, arena_bytes(t, n), size,
            "node '%s': no free %s range aligned to %s in its %s (%s reserved); return "
            "a borrow of '%s' or use a smaller --dma-window",
            t->nodes[n].name, ntbf_size_fmt(size, s1, sizeof(s1)),
            ntbf_size_fmt(align, s2, sizeof(s2)), io ? "IOVA space" : "RAM pool (no IOMMU)",
            ntbf_size_fmt(ns->bytes, (char[32]){0}, 32), t->nodes[n].name);
share:;
        struct ntbf_res *r = add_res(p, NTBF_RES_RANGE, n);
        if (!r)
                return nomem(a);
        r->addr = *out;
        r->size = size;
        r->maps_to = maps_to;
        r->shared = true;
        set_what(r, what);
        return 0;
}

/* The requester's DMA reaches [lo, lo + len)? (docs/model.md: dma_bits vs window addresses) */
static int check_reach(struct adm *a, uint32_t d, uint32_t f, uint64_t lo, uint64_t len,
                       uint32_t ai, const char *desc)
{
        const struct ntbf_topo *t = a->t;
        const struct ntbf_device *dev = &t->devices[d];
        if (dev->dma_bits >= 64)
                return 0;
        uint64_t limit = UINT64_C(1) << dev->dma_bits, end = lo + len - 1;
        if (end < limit)
                return 0;
        char dn[96], an[72];
        function_name(t, d, f, dn, sizeof(dn));
        if (ai == NTBF_NONE)
                return refuse(a, NTBF_EADDRLIMIT, NTBF_BUDGET_ADDR, NTBF_NONE, end, limit, 0,
                              "%s can address %u bits (up to 0x%" PRIx64 ") but %s is at 0x%" PRIx64
                              "-0x%" PRIx64 " in its own host; use a target below that limit",
                              dn, dev->dma_bits, limit - 1, desc, lo, end);
        adapter_name(t, ai, an, sizeof(an));
        return refuse(a, NTBF_EADDRLIMIT, NTBF_BUDGET_ADDR, ai, end, limit, 0,
                      "%s can address %u bits (up to 0x%" PRIx64 ") but %s would be at 0x%" PRIx64
                      "-0x%" PRIx64 " in the window of %s; place that window below 4 GiB "
                      "(window_below_4g: true on %s) or use the lender IOMMU",
                      dn, dev->dma_bits, limit - 1, desc, lo, end, an, an);
}

/* The region of node n holding [addr, addr + size), or NULL after an -EINVAL refusal. */
static const struct ntbf_region *target_region(struct adm *a, uint32_t n, uint64_t addr,
                                               uint64_t size)
{
        const struct ntbf_topo *t = a->t;
        if (n >= t->nnodes) {
                invalid(a, "the target names no node");
                return NULL;
        }
        if (!size || addr + size < addr) {
                invalid(a, "the target range at 0x%" PRIx64 " in node '%s' is empty or wraps", addr,
                        t->nodes[n].name);
                return NULL;
        }
        const struct ntbf_region *r = ntbf_addrmap_lookup(t, n, addr);
        if (!r) {
                invalid(a, "nothing is at 0x%" PRIx64 " in node '%s' (no RAM, BAR or MSI range)",
                        addr, t->nodes[n].name);
                return NULL;
        }
        if (addr + size - r->base > r->size) {
                invalid(a,
                        "the target 0x%" PRIx64 "-0x%" PRIx64 " in node '%s' runs past the %s "
                        "region ending at 0x%" PRIx64,
                        addr, addr + size - 1, t->nodes[n].name, ntbf_region_kind_name(r->kind),
                        r->base + r->size - 1);
                return NULL;
        }
        if (r->kind == NTBF_REGION_WINDOW) {
                invalid(a,
                        "0x%" PRIx64 " in node '%s' is the window of adapter %s; traffic does not "
                        "transit another host, target the memory behind it",
                        addr, t->nodes[n].name, t->adapters[r->obj].name);
                return NULL;
        }
        return r;
}

static struct ntbf_endpoint region_endpoint(uint32_t n, const struct ntbf_region *r)
{
        if (r->kind == NTBF_REGION_BAR || r->kind == NTBF_REGION_VF_BAR)
                return (struct ntbf_endpoint){NTBF_EP_DEVICE, n, r->obj};
        return (struct ntbf_endpoint){NTBF_EP_RAM, n, NTBF_NONE};
}

static void region_desc(const struct ntbf_topo *t, uint32_t n, const struct ntbf_region *r,
                        char *buf, size_t len)
{
        if (r->kind == NTBF_REGION_BAR || r->kind == NTBF_REGION_VF_BAR)
                snprintf(buf, len, "%sBAR%u of %s.%s", r->kind == NTBF_REGION_VF_BAR ? "VF " : "",
                         r->index, t->nodes[n].name, t->devices[r->obj].name);
        else if (r->kind == NTBF_REGION_MSI)
                snprintf(buf, len, "the MSI range of %s", t->nodes[n].name);
        else
                snprintf(buf, len, "RAM of %s", t->nodes[n].name);
}

/*
 * Reach [x, x + size) in node n (region reg) through adapter ai, entering n by adapter ta:
 * RAM of a node with an IOMMU goes through an IOVA range mapped to it; BARs, MSI and RAM of
 * a node without one are reached directly.
 */
static int take_target(struct adm *a, uint32_t ai, uint32_t ta, uint32_t n,
                       const struct ntbf_region *reg, uint64_t x, uint64_t size, uint32_t group,
                       const char *what, const char *fix, uint64_t *near)
{
        const struct ntbf_topo *t = a->t;
        char desc[112];
        region_desc(t, n, reg, desc, sizeof(desc));
        struct lut_want w = {.adapter = ai,
                             .dest = NTBF_DEST_MEM,
                             .dst_node = n,
                             .dst_adapter = ta,
                             .group = group,
                             .x = hw_x(a->s, reg, x),
                             .size = size,
                             .what = what,
                             .desc = desc,
                             .fix = fix};
        if (reg->kind == NTBF_REGION_MSI)
                w.dest = NTBF_DEST_MSI;
        if (reg->kind == NTBF_REGION_RAM && t->nodes[n].iommu) {
                uint64_t pg = align_down(x, PAGE), len = ntbf_align_up(x + size, PAGE) - pg;
                if (!pg)
                        return invalid(a,
                                       "the model does not map physical page 0 of node '%s' "
                                       "through its IOMMU; use a buffer above 4 KiB",
                                       t->nodes[n].name);
                uint64_t E = max_slot(&t->adapters[ai]), iova;
                int r =
                    take_range(a, n, len, min_u64(E, pow2_ceil(len)), pg, "IOVA mapping", &iova);
                if (r)
                        return r;
                w.dest = NTBF_DEST_IOVA;
                w.x = iova + (x - pg);
        }
        return take_lut(a, &w, near);
}

static int check_device(struct adm *a, uint32_t d, uint32_t f)
{
        const struct ntbf_topo *t = a->t;
        if (d >= t->ndevices)
                return invalid(a, "the request names no device (index %u of %u)", d, t->ndevices);
        if (f >= ntbf_device_nfuncs(&t->devices[d]))
                return invalid(a, "device %s.%s has %u function%s; there is no function %u",
                               t->nodes[t->devices[d].node].name, t->devices[d].name,
                               ntbf_device_nfuncs(&t->devices[d]),
                               ntbf_device_nfuncs(&t->devices[d]) == 1 ? "" : "s", f);
        return 0;
}

static int find_path(struct adm *a, uint32_t first, uint32_t last, struct ntbf_endpoint from,
                     struct ntbf_endpoint to, struct ntbf_path *out)
{
        struct ntbf_path_opts o = NTBF_PATH_OPTS_INIT;
        o.first_adapter = first;
        o.last_adapter = last;
        int r = ntbf_path_find(a->t, &o, from, to, out, a->p->why, sizeof(a->p->why));
        return r ? path_result(a, r) : 0;
}

static int admit_borrow(struct adm *a)
{
        const struct ntbf_topo *t = a->t;
        struct ntbf_plan *p = a->p;
        const struct ntbf_request *q = &p->req;
        int r = check_device(a, q->device, q->function);
        if (r)
                return r;
        const struct ntbf_device *dev = &t->devices[q->device];
        uint32_t L = dev->node, B = q->by, f = q->function;
        char dn[96], an[72], fix[160];
        function_name(t, q->device, f, dn, sizeof(dn));
        if (B >= t->nnodes)
                return invalid(a, "the borrower names no node");
        if (B == L)
                return invalid(a, "%s is in node '%s' itself; a node uses its own devices directly",
                               dn, t->nodes[B].name);
        r = find_path(a, q->via_adapter, q->to_adapter, (struct ntbf_endpoint){NTBF_EP_CPU, B, 0},
                      (struct ntbf_endpoint){NTBF_EP_DEVICE, L, q->device}, &p->path);
        if (r)
                return r;
        uint32_t ba = p->path.first_adapter, la = p->path.last_adapter;
        struct ntbf_requester cpu = {B, NTBF_NONE, 0}, devq = {L, q->device, f};
        /* The borrower's CPU reaches the BARs through its own window. */
        snprintf(fix, sizeof(fix), "return a borrowed device through %s or enlarge its window",
                 adapter_name(t, ba, an, sizeof(an)));
        for (uint32_t b = 0; b < NTBF_MAX_BARS; b++) {
                uint64_t size = ntbf_device_bar_size(dev, f, b);
                if (!size)
                        continue;
                char what[16], desc[128];
                snprintf(what, sizeof(what), "BAR%u", b);
                snprintf(desc, sizeof(desc), "BAR%u of %s", b, dn);
                struct lut_want w = {.adapter = ba,
                                     .dest = NTBF_DEST_MEM,
                                     .dst_node = L,
                                     .dst_adapter = la,
                                     .group = NTBF_NONE,
                                     .x = ntbf_state_bar_addr(a->s, q->device, f, b),
                                     .size = size,
                                     .what = what,
                                     .desc = desc,
                                     .fix = fix};
                if ((r = take_lut(a, &w, &p->bar_addr[b])))
                        return r;
        }
        if ((r = take_path_switches(a, &p->path, &cpu)))
                return r;
        /* The device's DMA and MSI writes come back through the same pair of adapters. */
        r = find_path(a, la, ba, (struct ntbf_endpoint){NTBF_EP_DEVICE, L, q->device},
                      (struct ntbf_endpoint){NTBF_EP_RAM, B, 0}, &p->dma_path);
        if (r)
                return r;
        adapter_name(t, la, an, sizeof(an));
        snprintf(fix, sizeof(fix),
                 "return a borrowed device through %s or lend through another "
                 "adapter",
                 an);
        if ((r = take_rid(a, la, &devq, fix)) || (r = take_path_switches(a, &p->dma_path, &devq)))
                return r;
        /* A managed fabric maps the device's DMA and interrupts itself (the backend's
         * dev_map): nothing of the lender's window is taken for them. */
        if (t->adapters[la].p.managed)
                return 0;
        if (q->dma_window > NTBF_PHYS_LIMIT)
                return invalid(a, "a DMA window of %" PRIu64 " bytes is beyond 48-bit addressing",
                               q->dma_window);
        uint64_t W = ntbf_align_up(q->dma_window ? q->dma_window : NTBF_DEFAULT_DMA_WINDOW, PAGE);
        uint64_t E = max_slot(&t->adapters[la]);
        bool io = t->nodes[B].iommu;
        if ((r = take_range(a, B, W, min_u64(E, pow2_ceil(W)), 0, "DMA window", &p->dma_iova)))
                return r;
        snprintf(fix, sizeof(fix), "use a smaller --dma-window or a larger window");
        struct lut_want w = {.adapter = la,
                             .dest = io ? NTBF_DEST_IOVA : NTBF_DEST_MEM,
                             .dst_node = B,
                             .dst_adapter = ba,
                             .group = NTBF_NONE,
                             .x = p->dma_iova,
                             .size = W,
                             .what = "DMA window",
                             .desc = "the DMA window",
                             .fix = fix};
        if ((r = take_lut(a, &w, &p->dma_addr)) ||
            (r = check_reach(a, q->device, f, p->dma_addr, W, la, "its DMA window")))
                return r;
        /* One slot onto the block holding the MSI range: shared by all borrows of B via la. */
        uint64_t msz = min_u64(min_slot(&t->adapters[la]), NTBF_MSI_SIZE);
        snprintf(fix, sizeof(fix), "return a borrowed device through %s or enlarge its window", an);
        struct lut_want m = {.adapter = la,
                             .dest = NTBF_DEST_MSI,
                             .dst_node = B,
                             .dst_adapter = ba,
                             .group = NTBF_NONE,
                             .x = NTBF_MSI_BASE,
                             .size = msz,
                             .what = "MSI window",
                             .desc = "the MSI window",
                             .fix = fix};
        if ((r = take_lut(a, &m, &p->msi_addr)) ||
            (r = check_reach(a, q->device, f, p->msi_addr, msz, la, "its MSI window")))
                return r;
        return 0;
}

uint32_t ntbf__group_slot(const struct ntbf_state *s, uint32_t net, uint32_t group, uint64_t *size)
{
        const struct ntbf_topo *t = s->t;
        uint32_t sw = s->net_sw[s->net_first[net]];
        for (uint32_t k = 0; k < t->switches[sw].p.mcast_groups; k++)
                if (s->sw[sw].mc[k].refs && s->sw[sw].mc[k].group == group) {
                        if (size)
                                *size = s->sw[sw].mc[k].size;
                        return k;
                }
        return NTBF_NONE;
}

/* Send to a multicast group: map [off, off + size) of group's range through the host's adapter. */
static int admit_send_group(struct adm *a, const struct ntbf_requester *rq, uint32_t d, uint32_t f)
{
        const struct ntbf_topo *t = a->t;
        const struct ntbf_state *s = a->s;
        struct ntbf_plan *p = a->p;
        const struct ntbf_request *q = &p->req;
        uint32_t H = rq->node, g = q->target.group, ai = NTBF_NONE;
        uint64_t gsize = 0;
        for (uint32_t k = 0; k < t->nodes[H].nadapters && ai == NTBF_NONE; k++) {
                uint32_t c = t->nodes[H].adapters[k];
                if (q->via_adapter != NTBF_NONE && c != q->via_adapter)
                        continue;
                if (s->adapter_net[c] != NTBF_NONE &&
                    ntbf__group_slot(s, s->adapter_net[c], g, &gsize) != NTBF_NONE)
                        ai = c;
        }
        if (q->via_adapter != NTBF_NONE &&
            (q->via_adapter >= t->nadapters || t->adapters[q->via_adapter].node != H))
                return invalid(a, "the chosen adapter is not an adapter of node '%s'",
                               t->nodes[H].name);
        if (ai == NTBF_NONE) {
                p->result = NTBF_ENOPATH;
                snprintf(p->why, sizeof(p->why),
                         "no switch network that node '%s' is cabled to%s has multicast group %u; "
                         "have a node join it first",
                         t->nodes[H].name, q->via_adapter != NTBF_NONE ? " (by that adapter)" : "",
                         g);
                return NTBF_ENOPATH;
        }
        uint64_t off = q->target.addr, size = q->target.size;
        if (!size || off + size < off || off + size > gsize)
                return invalid(a,
                               "0x%" PRIx64 "+0x%" PRIx64 " is not inside multicast group %u, "
                               "whose range is %" PRIu64 " bytes",
                               off, size, g, gsize);
        uint32_t net = s->adapter_net[ai];
        char an[72], fix[160], desc[48];
        adapter_name(t, ai, an, sizeof(an));
        p->path.from = d == NTBF_NONE ? (struct ntbf_endpoint){NTBF_EP_CPU, H, 0}
                                      : (struct ntbf_endpoint){NTBF_EP_DEVICE, H, d};
        p->path.first_adapter = p->path.last_adapter = NTBF_NONE;
        snprintf(fix, sizeof(fix),
                 "remove another mapping through %s or map through another "
                 "adapter",
                 an);
        int r = take_rid(a, ai, rq, fix);
        if (r)
                return r;
        /* Multicast writes are replicated across the whole network. */
        for (uint32_t k = s->net_first[net]; k < s->net_first[net + 1]; k++)
                if ((r = take_switch(a, s->net_sw[k], rq)))
                        return r;
        snprintf(desc, sizeof(desc), "multicast group %u", g);
        snprintf(fix, sizeof(fix), "map a smaller part of the group or enlarge the window of %s",
                 an);
        struct lut_want w = {.adapter = ai,
                             .dest = NTBF_DEST_MCAST,
                             .dst_node = NTBF_NONE,
                             .dst_adapter = NTBF_NONE,
                             .group = g,
                             .x = off,
                             .size = size,
                             .what = desc,
                             .desc = desc,
                             .fix = fix};
        if ((r = take_lut(a, &w, &p->dma_addr)))
                return r;
        if (d != NTBF_NONE)
                return check_reach(a, d, f, p->dma_addr, size, ai, desc);
        return 0;
}

/* MAP_DEVICE (device requester) and CONNECT (CPU requester) to a memory target. */
static int admit_map(struct adm *a, bool device)
{
        const struct ntbf_topo *t = a->t;
        struct ntbf_plan *p = a->p;
        const struct ntbf_request *q = &p->req;
        struct ntbf_requester rq = q->requester;
        uint32_t d = NTBF_NONE, f = 0;
        int r;
        if (device) {
                if ((r = check_device(a, rq.device, rq.function)))
                        return r;
                d = rq.device;
                f = rq.function;
                rq.node = t->devices[d].node;
        } else {
                if (rq.node >= t->nnodes)
                        return invalid(a, "the requester names no node");
                rq.device = NTBF_NONE;
                rq.function = 0;
        }
        p->req.requester = rq;
        uint32_t H = rq.node;
        if (q->target.kind == NTBF_TARGET_MCAST)
                return admit_send_group(a, &rq, d, f);
        uint32_t T = q->target.node;
        uint64_t x = q->target.addr, size = q->target.size;
        const struct ntbf_region *reg = target_region(a, T, x, size);
        if (!reg)
                return -EINVAL;
        struct ntbf_endpoint from = device ? (struct ntbf_endpoint){NTBF_EP_DEVICE, H, d}
                                           : (struct ntbf_endpoint){NTBF_EP_CPU, H, 0};
        if ((r = find_path(a, q->via_adapter, q->to_adapter, from, region_endpoint(T, reg),
                           &p->path)))
                return r;
        char desc[112];
        region_desc(t, T, reg, desc, sizeof(desc));
        if (T == H) {
                /* Nothing to map: the target is in the requester's own host. */
                p->dma_addr = hw_x(a->s, reg, x);
                return device ? check_reach(a, d, f, x, size, NTBF_NONE, desc) : 0;
        }
        uint32_t ha = p->path.first_adapter, ta = p->path.last_adapter;
        char an[72], fix[160];
        adapter_name(t, ha, an, sizeof(an));
        snprintf(fix, sizeof(fix),
                 "remove another device's mappings through %s or map through "
                 "another adapter",
                 an);
        if ((r = take_rid(a, ha, &rq, fix)) || (r = take_path_switches(a, &p->path, &rq)))
                return r;
        snprintf(fix, sizeof(fix), "map a smaller range or enlarge the window of %s", an);
        const char *what = reg->kind == NTBF_REGION_RAM ? "segment" : desc;
        if ((r = take_target(a, ha, ta, T, reg, x, size, NTBF_NONE, what, fix, &p->dma_addr)))
                return r;
        return device ? check_reach(a, d, f, p->dma_addr, size, ha, desc) : 0;
}

static int admit_join(struct adm *a)
{
        const struct ntbf_topo *t = a->t;
        const struct ntbf_state *s = a->s;
        struct ntbf_plan *p = a->p;
        const struct ntbf_request *q = &p->req;
        uint32_t N = q->target.node, g = q->target.group;
        uint64_t x = q->target.addr, size = q->target.size;
        const struct ntbf_region *reg = target_region(a, N, x, size);
        if (!reg)
                return -EINVAL;
        if (reg->kind == NTBF_REGION_MSI)
                return invalid(a, "a multicast buffer must be RAM or a BAR, not the MSI range");
        if (g == NTBF_NONE)
                return invalid(a, "the join names no multicast group");
        uint32_t ai = q->via_adapter;
        if (ai != NTBF_NONE && (ai >= t->nadapters || t->adapters[ai].node != N))
                return invalid(a, "the chosen adapter is not an adapter of node '%s'",
                               t->nodes[N].name);
        for (uint32_t k = 0; k < t->nodes[N].nadapters && ai == NTBF_NONE; k++)
                if (s->adapter_net[t->nodes[N].adapters[k]] != NTBF_NONE)
                        ai = t->nodes[N].adapters[k];
        char an[72];
        if (ai == NTBF_NONE || s->adapter_net[ai] == NTBF_NONE) {
                p->result = NTBF_ENOPATH;
                snprintf(p->why, sizeof(p->why),
                         "node '%s' has no adapter cabled to a switch%s; multicast groups live in "
                         "switches",
                         t->nodes[N].name, ai != NTBF_NONE ? " among the chosen ones" : "");
                return NTBF_ENOPATH;
        }
        adapter_name(t, ai, an, sizeof(an));
        uint32_t net = s->adapter_net[ai];
        const struct ntbf__adapter_st *as = &s->ad[ai];
        for (uint32_t k = 0; k < t->adapters[ai].nslots; k++)
                if (as->slots[k].refs && as->slots[k].group == g &&
                    as->slots[k].dest != NTBF_DEST_MCAST) {
                        p->result = NTBF_EEXISTS;
                        snprintf(p->why, sizeof(p->why),
                                 "node '%s' is already a member of multicast group %u through %s; "
                                 "leave it first",
                                 t->nodes[N].name, g, an);
                        return NTBF_EEXISTS;
                }
        p->path.from = p->path.to = (struct ntbf_endpoint){NTBF_EP_RAM, N, 0};
        p->path.first_adapter = p->path.last_adapter = ai;
        uint64_t gsize = 0;
        uint32_t slot = ntbf__group_slot(s, net, g, &gsize);
        bool shared = slot != NTBF_NONE;
        if (shared && gsize != size)
                return invalid(a,
                               "multicast group %u has %" PRIu64 "-byte buffers; join it with a "
                               "buffer of the same size",
                               g, gsize);
        if (!shared) {
                /* The same slot number on every switch, so the group has one address range. */
                uint32_t lim = UINT32_MAX;
                for (uint32_t k = s->net_first[net]; k < s->net_first[net + 1]; k++) {
                        uint32_t sw = s->net_sw[k];
                        const struct ntbf_switch *x2 = &t->switches[sw];
                        if (!x2->p.mcast_groups)
                                return refuse(a, NTBF_ENOSPC_BUDGET, NTBF_BUDGET_MCAST, sw, 0, 0, 1,
                                              "switch '%s' does not support multicast (0 groups); "
                                              "use multicast-capable switches",
                                              x2->name);
                        lim = x2->p.mcast_groups < lim ? x2->p.mcast_groups : lim;
                }
                for (uint32_t c = 0; c < lim && slot == NTBF_NONE; c++) {
                        bool ok = true;
                        for (uint32_t k = s->net_first[net]; k < s->net_first[net + 1] && ok; k++)
                                ok = !s->sw[s->net_sw[k]].mc[c].refs;
                        if (ok)
                                slot = c;
                }
                if (slot == NTBF_NONE) {
                        uint32_t sw = s->net_sw[s->net_first[net]];
                        for (uint32_t k = s->net_first[net]; k < s->net_first[net + 1]; k++)
                                if (s->sw[s->net_sw[k]].mc_used >=
                                    t->switches[s->net_sw[k]].p.mcast_groups)
                                        sw = s->net_sw[k];
                        const struct ntbf_switch *x2 = &t->switches[sw];
                        return refuse(a, NTBF_ENOSPC_BUDGET, NTBF_BUDGET_MCAST, sw,
                                      s->sw[sw].mc_used, x2->p.mcast_groups, 1,
                                      "switch '%s': %u of %u multicast groups are in use and no "
                                      "group number is free on every switch of its network; this "
                                      "join needs 1 more; have the members of a group leave it",
                                      x2->name, s->sw[sw].mc_used, x2->p.mcast_groups);
                }
        }
        for (uint32_t k = s->net_first[net]; k < s->net_first[net + 1]; k++) {
                struct ntbf_res *r = add_res(p, NTBF_RES_MCAST, s->net_sw[k]);
                if (!r)
                        return nomem(a);
                r->first = slot;
                r->count = 1;
                r->group = g;
                r->size = size;
                r->shared = shared;
                snprintf(r->what, sizeof(r->what), "multicast group %u", g);
        }
        char fix[160];
        snprintf(fix, sizeof(fix), "join with a smaller buffer or enlarge the window of %s", an);
        uint64_t near;
        return take_target(a, ai, ai, N, reg, x, size, g, "multicast overlay", fix, &near);
}

/*
 * REQUESTER: a device of a node issues transactions into the window of one of the node's
 * adapters (a GPU reaching segments the node's CPU connected, SCIRegisterPCIeRequester): its
 * ID in that adapter's table, and on every switch of the adapter's network since the
 * mappings it uses may lead anywhere there.
 */
static int admit_requester(struct adm *a)
{
        const struct ntbf_topo *t = a->t;
        const struct ntbf_state *s = a->s;
        struct ntbf_plan *p = a->p;
        struct ntbf_requester rq = p->req.requester;
        int r = check_device(a, rq.device, rq.function);
        if (r)
                return r;
        rq.node = t->devices[rq.device].node;
        p->req.requester = rq;
        uint32_t ai = p->req.via_adapter;
        if (ai >= t->nadapters || t->adapters[ai].node != rq.node)
                return invalid(a, "the adapter is not an adapter of node '%s'",
                               t->nodes[rq.node].name);
        p->path.from = (struct ntbf_endpoint){NTBF_EP_DEVICE, rq.node, rq.device};
        p->path.to = p->path.from;
        p->path.first_adapter = p->path.last_adapter = ai;
        char an[72], fix[160];
        adapter_name(t, ai, an, sizeof(an));
        snprintf(fix, sizeof(fix), "unregister another requester of %s or return a device", an);
        if ((r = take_rid(a, ai, &rq, fix)))
                return r;
        uint32_t net = s->adapter_net[ai];
        for (uint32_t k = net == NTBF_NONE ? 0 : s->net_first[net];
             net != NTBF_NONE && k < s->net_first[net + 1]; k++)
                if ((r = take_switch(a, s->net_sw[k], &rq)))
                        return r;
        return 0;
}

int ntbf_admit(const struct ntbf_state *s, const struct ntbf_request *req, struct ntbf_plan *plan)
{
        ntbf_plan_init(plan);
        plan->req = *req;
        struct adm a = {s, s->t, plan, "this request"};
        int r;
        switch (req->kind) {
        case NTBF_REQ_BORROW:
                a.verb = "this borrow";
                r = admit_borrow(&a);
                break;
        case NTBF_REQ_MAP_DEVICE:
                a.verb = "this mapping";
                r = admit_map(&a, true);
                break;
        case NTBF_REQ_CONNECT:
                a.verb = "this connection";
                r = admit_map(&a, false);
                break;
        case NTBF_REQ_MCAST_JOIN:
                a.verb = "this join";
                r = admit_join(&a);
                break;
        case NTBF_REQ_REQUESTER:
                a.verb = "this registration";
                r = admit_requester(&a);
                break;
        default:
                r = invalid(&a, "unknown request kind %d", (int)req->kind);
                break;
        }
        plan->result = r;
        if (r)
                plan->nres = 0;
        return r;
}

/* ---- commit and release ----------------------------------------------------------------- */

static bool res_valid(const struct ntbf_topo *t, const struct ntbf_res *r)
{
        switch (r->kind) {
        case NTBF_RES_LUT:
                return r->obj < t->nadapters && r->count &&
                       r->first + (uint64_t)r->count <= t->adapters[r->obj].nslots &&
                       ntbf_adapter_slot_window(&t->adapters[r->obj], r->first) ==
                           ntbf_adapter_slot_window(&t->adapters[r->obj],
                                                    r->first + r->count - 1) &&
                       r->size >
                           (uint64_t)(r->count - 1) *
                               ntbf_adapter_slot_window(&t->adapters[r->obj], r->first)->slot_size;
        case NTBF_RES_RID:
                return r->obj < t->nadapters && r->req.device < t->ndevices;
        case NTBF_RES_SWITCH_RID:
                return r->obj < t->nswitches &&
                       (r->req.device == NTBF_NONE ? r->req.node < t->nnodes
                                                   : r->req.device < t->ndevices);
        case NTBF_RES_MCAST:
                return r->obj < t->nswitches && r->first < t->switches[r->obj].p.mcast_groups;
        case NTBF_RES_RANGE:
                return r->obj < t->nnodes && r->size && r->addr + r->size > r->addr;
        }
        return false;
}

static void unapply(struct ntbf_state *s, const struct ntbf_res *r);

/* Apply one resource if the state is as the plan saw it; -ESTALE (nothing done) if not. */
static int apply(struct ntbf_state *s, const struct ntbf_res *r)
{
        const struct ntbf_topo *t = s->t;
        if (!res_valid(t, r))
                return -ESTALE;
        switch (r->kind) {
        case NTBF_RES_LUT: {
                struct ntbf__adapter_st *as = &s->ad[r->obj];
                const struct ntbf_adapter *ad = &t->adapters[r->obj];
                for (uint32_t i = 0; i < r->count; i++) {
                        const struct ntbf__slot *sl = &as->slots[r->first + i];
                        struct ntbf__slot want = res_slot(ad, r, i);
                        if (r->shared ? !sl->refs || sl->dest != want.dest ||
                                            sl->dst_node != want.dst_node ||
                                            sl->dst_adapter != want.dst_adapter ||
                                            sl->group != want.group ||
                                            sl->dst_addr != want.dst_addr || sl->xsize < want.xsize
                                      : sl->refs != 0)
                                return -ESTALE;
                }
                for (uint32_t i = 0; i < r->count; i++) {
                        struct ntbf__slot *sl = &as->slots[r->first + i];
                        if (!sl->refs++) {
                                *sl = res_slot(ad, r, i);
                                as->used++;
                                as->used_bytes += slot_bytes(ad, r->first + i);
                        }
                }
                return 0;
        }
        case NTBF_RES_RID: {
                const struct ntbf_adapter *ad = &t->adapters[r->obj];
                struct ntbf__adapter_st *as = &s->ad[r->obj];
                uint32_t key = ntbf__req_key(t, &r->req), cost = rid_cost(t, r->obj, key);
                bool present = ntbf__rset_refs(&as->rids, key) > 0;
                if (!ad->p.rid_table || present != r->shared ||
                    (!present &&
                     (!cost || ad->p.rid_reserved + as->rid_entries + cost > ad->p.rid_table)))
                        return -ESTALE;
                int x = rset_inc(&as->rids, key);
                if (x < 0)
                        return -ENOMEM;
                if (x == 1)
                        as->rid_entries += cost;
                return 0;
        }
        case NTBF_RES_SWITCH_RID: {
                struct ntbf__switch_st *ss = &s->sw[r->obj];
                uint32_t key = ntbf__req_key(t, &r->req);
                uint64_t w = key_weight(t, key);
                bool present = ntbf__rset_refs(&ss->reqs, key) > 0;
                if (!t->switches[r->obj].p.rid_table || present != r->shared ||
                    (!present && ss->entries + w > t->switches[r->obj].p.rid_table))
                        return -ESTALE;
                int x = rset_inc(&ss->reqs, key);
                if (x < 0)
                        return -ENOMEM;
                if (x == 1)
                        ss->entries += w;
                return 0;
        }
        case NTBF_RES_MCAST: {
                struct ntbf__switch_st *ss = &s->sw[r->obj];
                struct ntbf__mslot *m = &ss->mc[r->first];
                if (r->shared ? !m->refs || m->group != r->group || m->size != r->size : m->refs)
                        return -ESTALE;
                if (!m->refs++) {
                        m->group = r->group;
                        m->size = r->size;
                        ss->mc_used++;
                }
                return 0;
        }
        case NTBF_RES_RANGE: {
                struct ntbf__node_st *ns = &s->nd[r->obj];
                if (r->shared) {
                        uint32_t i = range_index(ns, r->addr);
                        if (i >= ns->n || ns->v[i].addr != r->addr || ns->v[i].size != r->size ||
                            ns->v[i].maps_to != r->maps_to)
                                return -ESTALE;
                        ns->v[i].refs++;
                        return 0;
                }
                uint64_t lo[2], hi[2];
                uint32_t na = arena(t, r->obj, lo, hi);
                bool inside = false;
                for (uint32_t k = 0; k < na; k++)
                        inside |= r->addr >= lo[k] && r->addr + r->size <= hi[k];
                if (!inside || !range_free(ns, r->addr, r->size))
                        return -ESTALE;
                if (ns->n == ns->cap) {
                        uint32_t c = ns->cap ? ns->cap * 2 : 8;
                        struct ntbf__range *v = realloc(ns->v, (c + 1) * sizeof(*v));
                        if (!v)
                                return -ENOMEM;
                        ns->v = v;
                        ns->cap = c;
                }
                uint32_t i = range_index(ns, r->addr);
                memmove(&ns->v[i + 1], &ns->v[i], (ns->n - i) * sizeof(*ns->v));
                ns->v[i] = (struct ntbf__range){r->addr, r->size, r->maps_to, 1, 0};
                ns->n++;
                ns->bytes += r->size;
                return 0;
        }
        }
        return -ESTALE;
}

static void unapply(struct ntbf_state *s, const struct ntbf_res *r)
{
        const struct ntbf_topo *t = s->t;
        switch (r->kind) {
        case NTBF_RES_LUT: {
                struct ntbf__adapter_st *as = &s->ad[r->obj];
                for (uint32_t i = 0; i < r->count; i++) {
                        struct ntbf__slot *sl = &as->slots[r->first + i];
                        if (sl->refs && !--sl->refs) {
                                memset(sl, 0, sizeof(*sl));
                                as->used--;
                                as->used_bytes -= slot_bytes(&t->adapters[r->obj], r->first + i);
                        }
                }
                break;
        }
        case NTBF_RES_RID: {
                uint32_t key = ntbf__req_key(t, &r->req);
                if (rset_dec(&s->ad[r->obj].rids, key) == 1)
                        s->ad[r->obj].rid_entries -= rid_cost(t, r->obj, key);
                break;
        }
        case NTBF_RES_SWITCH_RID: {
                uint32_t key = ntbf__req_key(t, &r->req);
                if (rset_dec(&s->sw[r->obj].reqs, key) == 1)
                        s->sw[r->obj].entries -= key_weight(t, key);
                break;
        }
        case NTBF_RES_MCAST: {
                struct ntbf__switch_st *ss = &s->sw[r->obj];
                struct ntbf__mslot *m = &ss->mc[r->first];
                if (m->refs && !--m->refs) {
                        memset(m, 0, sizeof(*m));
                        ss->mc_used--;
                }
                break;
        }
        case NTBF_RES_RANGE: {
                struct ntbf__node_st *ns = &s->nd[r->obj];
                uint32_t i = range_index(ns, r->addr);
                if (i >= ns->n || ns->v[i].addr != r->addr)
                        break;
                if (!--ns->v[i].refs) {
                        ns->bytes -= ns->v[i].size;
                        memmove(&ns->v[i], &ns->v[i + 1], (ns->n - i - 1) * sizeof(*ns->v));
                        ns->n--;
                }
                break;
        }
        }
}

static uint32_t alloc_index(const struct ntbf_state *s, uint32_t id)
{
        uint32_t lo = 0, hi = s->nallocs;
        while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (s->allocs[mid]->id < id)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < s->nallocs && s->allocs[lo]->id == id ? lo : NTBF_NONE;
}

int ntbf_commit(struct ntbf_state *s, const struct ntbf_plan *plan, uint32_t *id)
{
        if (!plan || plan->result)
                return -EINVAL;
        if (s->nallocs == s->cap_allocs) {
                uint32_t c = s->cap_allocs ? s->cap_allocs * 2 : 64;
                struct ntbf__alloc **v = realloc(s->allocs, c * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                s->allocs = v;
                s->cap_allocs = c;
        }
        struct ntbf__alloc *a = malloc(sizeof(*a));
        if (!a || ntbf_plan_copy(&a->plan, plan)) {
                free(a);
                return -ENOMEM;
        }
        /* Apply in order (a later resource may share what an earlier one took); undo on failure. */
        for (uint32_t i = 0; i < plan->nres; i++) {
                int r = apply(s, &plan->res[i]);
                if (r) {
                        while (i-- > 0)
                                unapply(s, &plan->res[i]);
                        ntbf_plan_free(&a->plan);
                        free(a);
                        return r;
                }
        }
        a->id = s->next_id++;
        if (!s->next_id)
                s->next_id = 1;
        s->allocs[s->nallocs++] = a;
        if (id)
                *id = a->id;
        return 0;
}

int ntbf_release(struct ntbf_state *s, uint32_t id)
{
        uint32_t i = alloc_index(s, id);
        if (i == NTBF_NONE)
                return NTBF_ENOTFOUND;
        struct ntbf__alloc *a = s->allocs[i];
        for (uint32_t k = a->plan.nres; k-- > 0;)
                unapply(s, &a->plan.res[k]);
        ntbf_plan_free(&a->plan);
        free(a);
        memmove(&s->allocs[i], &s->allocs[i + 1], (s->nallocs - i - 1) * sizeof(*s->allocs));
        s->nallocs--;
        return 0;
}

const struct ntbf_plan *ntbf_alloc_plan(const struct ntbf_state *s, uint32_t id)
{
        uint32_t i = alloc_index(s, id);
        return i == NTBF_NONE ? NULL : &s->allocs[i]->plan;
}

size_t ntbf_state_allocs(const struct ntbf_state *s, uint32_t *ids, size_t max)
{
        for (uint32_t i = 0; i < s->nallocs && i < max; i++)
                ids[i] = s->allocs[i]->id;
        return s->nallocs;
}

/* ---- budget rows ------------------------------------------------------------------------ */

size_t ntbf_budget_rows(const struct ntbf_state *s, struct ntbf_budget_row *rows, size_t max)
{
        const struct ntbf_topo *t = s->t;
        size_t n = 0;
#define ROW(k, o, u, tot, b)                                                                       \
        do {                                                                                       \
                if (n < max)                                                                       \
                        rows[n] = (struct ntbf_budget_row){(k), (o), (u), (tot), (b)};             \
                n++;                                                                               \
        } while (0)
        for (uint32_t i = 0; i < t->nadapters; i++) {
                const struct ntbf_adapter *ad = &t->adapters[i];
                const struct ntbf__adapter_st *as = &s->ad[i];
                /* The slots the hardware keeps (Switchtec's LUT 0: its driver's shared
                 * window, where the software scratchpads live) are taken at start. */
                uint32_t slots = 0, kept = 0;
                uint64_t bytes = 0, kept_bytes = 0;
                for (uint32_t w = 0; w < ad->nwin; w++) {
                        slots += ad->win[w].slots;
                        bytes += ad->win[w].size;
                        kept += ad->win[w].reserved;
                        kept_bytes += (uint64_t)ad->win[w].reserved * ad->win[w].slot_size;
                }
                ROW(NTBF_BUDGET_LUT, i, kept + as->used, slots, kept);
                ROW(NTBF_BUDGET_WINDOW, i, kept_bytes + as->used_bytes, bytes, kept_bytes);
                if (ad->p.rid_table)
                        ROW(NTBF_BUDGET_RID, i, ad->p.rid_reserved + as->rid_entries,
                            ad->p.rid_table, ad->p.rid_reserved);
        }
        for (uint32_t i = 0; i < t->nswitches; i++) {
                const struct ntbf_switch *sw = &t->switches[i];
                if (sw->p.rid_table)
                        ROW(NTBF_BUDGET_SWITCH_RID, i, s->sw[i].entries, sw->p.rid_table,
                            s->sw[i].baseline);
                if (sw->p.mcast_groups)
                        ROW(NTBF_BUDGET_MCAST, i, s->sw[i].mc_used, sw->p.mcast_groups, 0);
        }
        for (uint32_t i = 0; i < t->nnodes; i++)
                ROW(NTBF_BUDGET_RANGE, i, s->nd[i].bytes, arena_bytes(t, i), 0);
#undef ROW
        return n;
}

/* ---- consistency checks (tests) --------------------------------------------------------- */

struct pair {
        uint32_t obj, key;
        uint64_t a, b; /* RANGE: addr, size; MCAST: slot */
};

static int cmp_pair(const void *x, const void *y)
{
        const struct pair *p = x, *q = y;
        if (p->obj != q->obj)
                return p->obj < q->obj ? -1 : 1;
        if (p->key != q->key)
                return p->key < q->key ? -1 : 1;
        if (p->a != q->a)
                return p->a < q->a ? -1 : 1;
        return p->b < q->b ? -1 : p->b > q->b;
}

#define FAIL(...)                                                                                  \
        do {                                                                                       \
                snprintf(why, len, __VA_ARGS__);                                                   \
                r = -EPROTO;                                                                       \
                goto out;                                                                          \
        } while (0)

int ntbf__state_check(const struct ntbf_state *s, char *why, size_t len)
{
        const struct ntbf_topo *t = s->t;
        int r = 0;
        size_t nres = s->nbase, np = 0;
        for (uint32_t i = 0; i < s->nallocs; i++)
                nres += s->allocs[i]->plan.nres;
        struct pair *pv = malloc((nres + 1) * sizeof(*pv));
        uint32_t **cnt = calloc(t->nadapters + 1, sizeof(*cnt));
        uint32_t **mcnt = calloc(t->nswitches + 1, sizeof(*mcnt));
        size_t nobj = (t->nadapters > t->nswitches ? t->nadapters : t->nswitches) + 1;
        uint32_t *distinct = calloc(nobj, sizeof(uint32_t));
        uint64_t *entries = calloc(nobj, sizeof(uint64_t));
        if (!pv || !cnt || !mcnt || !distinct || !entries) {
                free(pv);
                free(cnt);
                free(mcnt);
                free(distinct);
                free(entries);
                snprintf(why, len, "out of memory");
                return -ENOMEM;
        }
        for (uint32_t i = 0; i < t->nadapters; i++) {
                cnt[i] = calloc(t->adapters[i].nslots + 1, sizeof(uint32_t));
                if (!cnt[i])
                        FAIL("out of memory");
        }
        for (uint32_t i = 0; i < t->nswitches; i++) {
                mcnt[i] = calloc(t->switches[i].p.mcast_groups + 1, sizeof(uint32_t));
                if (!mcnt[i])
                        FAIL("out of memory");
        }
        /* LUT slots: every reference recorded by an allocation, with the same destination. */
        for (uint32_t i = 0; i < s->nallocs; i++) {
                const struct ntbf_plan *p = &s->allocs[i]->plan;
                for (uint32_t k = 0; k < p->nres; k++) {
                        const struct ntbf_res *x = &p->res[k];
                        if (x->kind != NTBF_RES_LUT)
                                continue;
                        for (uint32_t j = 0; j < x->count; j++) {
                                const struct ntbf__slot *sl = &s->ad[x->obj].slots[x->first + j];
                                struct ntbf__slot want = res_slot(&t->adapters[x->obj], x, j);
                                cnt[x->obj][x->first + j]++;
                                if (sl->dest != want.dest || sl->dst_node != want.dst_node ||
                                    sl->dst_adapter != want.dst_adapter ||
                                    sl->group != want.group || sl->dst_addr != want.dst_addr ||
                                    sl->xsize < want.xsize)
                                        FAIL("adapter %u slot %u: destination differs from "
                                             "allocation %u",
                                             x->obj, x->first + j, s->allocs[i]->id);
                        }
                }
        }
        for (uint32_t i = 0; i < t->nadapters; i++) {
                uint32_t used = 0;
                uint64_t bytes = 0;
                for (uint32_t k = 0; k < t->adapters[i].nslots; k++) {
                        const struct ntbf__slot *sl = &s->ad[i].slots[k];
                        if (sl->refs != cnt[i][k])
                                FAIL("adapter %u slot %u: %u references, allocations hold %u", i, k,
                                     sl->refs, cnt[i][k]);
                        if (!sl->refs &&
                            (sl->dest || sl->dst_node || sl->dst_addr || sl->group || sl->xsize))
                                FAIL("adapter %u slot %u: free but not cleared", i, k);
                        if (sl->refs && (!sl->xsize || sl->xsize > slot_bytes(&t->adapters[i], k)))
                                FAIL("adapter %u slot %u translates %" PRIu64 " bytes", i, k,
                                     sl->xsize);
                        used += sl->refs > 0;
                        bytes += sl->refs ? slot_bytes(&t->adapters[i], k) : 0;
                }
                if (used != s->ad[i].used || bytes != s->ad[i].used_bytes)
                        FAIL("adapter %u: %u slots (%" PRIu64 " bytes) in use, counters say %u "
                             "(%" PRIu64 ")",
                             i, used, bytes, s->ad[i].used, s->ad[i].used_bytes);
        }
        /* Requester entries of adapters. */
        np = 0;
        for (uint32_t i = 0; i < s->nallocs; i++) {
                const struct ntbf_plan *p = &s->allocs[i]->plan;
                for (uint32_t k = 0; k < p->nres; k++)
                        if (p->res[k].kind == NTBF_RES_RID)
                                pv[np++] = (struct pair){p->res[k].obj,
                                                         ntbf__req_key(t, &p->res[k].req), 0, 0};
        }
        qsort(pv, np, sizeof(*pv), cmp_pair);
        {
                memset(distinct, 0, (t->nadapters + 1) * sizeof(uint32_t));
                memset(entries, 0, (t->nadapters + 1) * sizeof(uint64_t));
                for (size_t i = 0; i < np;) {
                        size_t j = i;
                        while (j < np && pv[j].obj == pv[i].obj && pv[j].key == pv[i].key)
                                j++;
                        distinct[pv[i].obj]++;
                        entries[pv[i].obj] += rid_cost(t, pv[i].obj, pv[i].key);
                        uint32_t have = ntbf__rset_refs(&s->ad[pv[i].obj].rids, pv[i].key);
                        if (have != j - i) {
                                FAIL("adapter %u requester %u: %u references, allocations hold "
                                     "%zu",
                                     pv[i].obj, pv[i].key, have, j - i);
                        }
                        i = j;
                }
                for (uint32_t i = 0; i < t->nadapters; i++) {
                        const struct ntbf_adapter *ad = &t->adapters[i];
                        if (distinct[i] != s->ad[i].rids.n) {
                                FAIL("adapter %u: %u requesters, allocations hold %u", i,
                                     s->ad[i].rids.n, distinct[i]);
                        }
                        if (entries[i] != s->ad[i].rid_entries) {
                                FAIL("adapter %u: %" PRIu64 " requester entries, allocations "
                                     "cost %" PRIu64,
                                     i, s->ad[i].rid_entries, entries[i]);
                        }
                        if (ad->p.rid_table &&
                            ad->p.rid_reserved + s->ad[i].rid_entries > ad->p.rid_table) {
                                FAIL("adapter %u: requester table over its size", i);
                        }
                }
        }
        /* Switch registrations: the baseline plus the allocations. */
        np = 0;
        for (uint32_t i = 0; i < s->nbase; i++)
                pv[np++] = (struct pair){s->base[i].sw, ntbf__key_cpu(t, s->base[i].node), 0, 0};
        for (uint32_t i = 0; i < s->nallocs; i++) {
                const struct ntbf_plan *p = &s->allocs[i]->plan;
                for (uint32_t k = 0; k < p->nres; k++)
                        if (p->res[k].kind == NTBF_RES_SWITCH_RID)
                                pv[np++] = (struct pair){p->res[k].obj,
                                                         ntbf__req_key(t, &p->res[k].req), 0, 0};
        }
        qsort(pv, np, sizeof(*pv), cmp_pair);
        {
                memset(distinct, 0, (t->nswitches + 1) * sizeof(uint32_t));
                memset(entries, 0, (t->nswitches + 1) * sizeof(uint64_t));
                bool bad = false;
                for (size_t i = 0; i < np && !bad;) {
                        size_t j = i;
                        while (j < np && pv[j].obj == pv[i].obj && pv[j].key == pv[i].key)
                                j++;
                        distinct[pv[i].obj]++;
                        entries[pv[i].obj] += key_weight(t, pv[i].key);
                        uint32_t have = ntbf__rset_refs(&s->sw[pv[i].obj].reqs, pv[i].key);
                        if (have != j - i) {
                                snprintf(why, len,
                                         "switch %u requester %u: %u references, records hold %zu",
                                         pv[i].obj, pv[i].key, have, j - i);
                                bad = true;
                        }
                        i = j;
                }
                for (uint32_t i = 0; i < t->nswitches && !bad; i++) {
                        const struct ntbf__switch_st *ss = &s->sw[i];
                        if (distinct[i] != ss->reqs.n || entries[i] != ss->entries) {
                                snprintf(why, len,
                                         "switch %u: %u requesters / %" PRIu64
                                         " entries, records hold %u / %" PRIu64,
                                         i, ss->reqs.n, ss->entries, distinct[i], entries[i]);
                                bad = true;
                        } else if (t->switches[i].p.rid_table &&
                                   ss->entries > t->switches[i].p.rid_table) {
                                snprintf(why, len, "switch %u: over its requester table", i);
                                bad = true;
                        }
                }
                if (bad) {
                        r = -EPROTO;
                        goto out;
                }
        }
        /* Multicast group slots. */
        for (uint32_t a = 0; a < s->nallocs; a++) {
                const struct ntbf_plan *p = &s->allocs[a]->plan;
                for (uint32_t j = 0; j < p->nres; j++) {
                        const struct ntbf_res *x = &p->res[j];
                        if (x->kind != NTBF_RES_MCAST)
                                continue;
                        mcnt[x->obj][x->first]++;
                        if (x->group != s->sw[x->obj].mc[x->first].group)
                                FAIL("switch %u group slot %u: group differs from allocation %u",
                                     x->obj, x->first, s->allocs[a]->id);
                }
        }
        for (uint32_t i = 0; i < t->nswitches; i++) {
                uint32_t used = 0;
                for (uint32_t k = 0; k < t->switches[i].p.mcast_groups; k++) {
                        if (mcnt[i][k] != s->sw[i].mc[k].refs)
                                FAIL("switch %u group slot %u: %u references, allocations hold %u",
                                     i, k, s->sw[i].mc[k].refs, mcnt[i][k]);
                        used += mcnt[i][k] > 0;
                }
                if (used != s->sw[i].mc_used)
                        FAIL("switch %u: %u group slots in use, counter says %u", i, used,
                             s->sw[i].mc_used);
        }
        /* Ranges of inbound domains. */
        np = 0;
        for (uint32_t i = 0; i < s->nallocs; i++) {
                const struct ntbf_plan *p = &s->allocs[i]->plan;
                for (uint32_t k = 0; k < p->nres; k++)
                        if (p->res[k].kind == NTBF_RES_RANGE)
                                pv[np++] =
                                    (struct pair){p->res[k].obj, 0, p->res[k].addr, p->res[k].size};
        }
        qsort(pv, np, sizeof(*pv), cmp_pair);
        {
                size_t i = 0;
                for (uint32_t n = 0; n < t->nnodes; n++) {
                        const struct ntbf__node_st *ns = &s->nd[n];
                        uint64_t bytes = 0;
                        for (uint32_t k = 0; k < ns->n; k++) {
                                const struct ntbf__range *g = &ns->v[k];
                                size_t j = i;
                                while (j < np && pv[j].obj == n && pv[j].a == g->addr &&
                                       pv[j].b == g->size)
                                        j++;
                                if (j - i != g->refs || !g->refs)
                                        FAIL("node %u range 0x%" PRIx64 ": %u references, "
                                             "allocations hold %zu",
                                             n, g->addr, g->refs, j - i);
                                if (k && ns->v[k - 1].addr + ns->v[k - 1].size > g->addr)
                                        FAIL("node %u: ranges overlap at 0x%" PRIx64, n, g->addr);
                                bytes += g->size;
                                i = j;
                        }
                        if (bytes != ns->bytes)
                                FAIL("node %u: %" PRIu64 " bytes reserved, counter says %" PRIu64,
                                     n, bytes, ns->bytes);
                }
                if (i != np)
                        FAIL("allocations hold a range the tables do not");
        }
        /* Every row within its total. */
        {
                size_t nrows = ntbf_budget_rows(s, NULL, 0);
                struct ntbf_budget_row *rows = malloc((nrows + 1) * sizeof(*rows));
                if (!rows)
                        FAIL("out of memory");
                ntbf_budget_rows(s, rows, nrows);
                for (size_t k = 0; k < nrows; k++)
                        if (rows[k].used > rows[k].total || rows[k].baseline > rows[k].used) {
                                snprintf(why, len,
                                         "%s row of object %u: used %" PRIu64 " of %" PRIu64
                                         " (baseline %" PRIu64 ")",
                                         ntbf_budget_kind_name(rows[k].kind), rows[k].obj,
                                         rows[k].used, rows[k].total, rows[k].baseline);
                                r = -EPROTO;
                        }
                free(rows);
        }
out:
        for (uint32_t i = 0; i < t->nadapters; i++)
                free(cnt[i]);
        for (uint32_t i = 0; i < t->nswitches; i++)
                free(mcnt[i]);
        free(cnt);
        free(mcnt);
        free(pv);
        free(distinct);
        free(entries);
        return r;
}

static bool rset_same(const struct ntbf__rset *a, const struct ntbf__rset *b)
{
        if (a->n != b->n)
                return false;
        for (uint32_t i = 0; i < a->cap; i++)
                if (a->key[i] != NTBF_NONE && ntbf__rset_refs(b, a->key[i]) != a->refs[i])
                        return false;
        return true;
}

int ntbf__state_equal(const struct ntbf_state *a, const struct ntbf_state *b, char *why, size_t len)
{
        const struct ntbf_topo *t = a->t;
        int r = 0;
        if (a->t != b->t)
                FAIL("different topologies");
        if (a->nallocs != b->nallocs)
                FAIL("%u allocations vs %u", a->nallocs, b->nallocs);
        for (uint32_t i = 0; i < t->nadapters; i++) {
                if (a->ad[i].used != b->ad[i].used ||
                    memcmp(a->ad[i].slots, b->ad[i].slots,
                           t->adapters[i].nslots * sizeof(struct ntbf__slot)))
                        FAIL("adapter %u: LUT slots differ", i);
                if (!rset_same(&a->ad[i].rids, &b->ad[i].rids))
                        FAIL("adapter %u: requester table differs", i);
        }
        for (uint32_t i = 0; i < t->nswitches; i++) {
                const struct ntbf__switch_st *x = &a->sw[i], *y = &b->sw[i];
                if (x->entries != y->entries || x->baseline != y->baseline ||
                    x->mc_used != y->mc_used || x->net != y->net || !rset_same(&x->reqs, &y->reqs))
                        FAIL("switch %u: requester registrations differ", i);
                if (memcmp(x->mc, y->mc, t->switches[i].p.mcast_groups * sizeof(*x->mc)))
                        FAIL("switch %u: multicast groups differ", i);
        }
        for (uint32_t i = 0; i < t->nnodes; i++) {
                const struct ntbf__node_st *x = &a->nd[i], *y = &b->nd[i];
                if (x->n != y->n || x->bytes != y->bytes ||
                    (x->n && memcmp(x->v, y->v, x->n * sizeof(*x->v))))
                        FAIL("node %u: reserved ranges differ", i);
        }
        if (a->nbase != b->nbase ||
            (a->nbase && memcmp(a->base, b->base, a->nbase * sizeof(*a->base))))
                FAIL("CPU baselines differ");
out:
        return r;
}
