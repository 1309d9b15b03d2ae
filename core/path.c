/* core/path.c: the fabric graph, least-latency paths and link-disjoint multipath. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "say.h"
#include "ntbfab/error.h"
#include "ntbfab/path.h"
#include "graph.h"
#include "suggest.h"

/*
 * Vertices: one per host (its root complex), adapter and switch. Arcs: host <-> each of
 * its adapters, and both directions of every cable. Entering a vertex costs its hop
 * latency; a cable costs its own. Hosts are never transit vertices.
 */

static uint32_t v_host(const struct ntbf__graph *g, uint32_t node)
{
        (void)g;
        return node;
}
static uint32_t v_adapter(const struct ntbf__graph *g, uint32_t a)
{
        return g->nnodes + a;
}
static uint32_t v_switch(const struct ntbf__graph *g, uint32_t s)
{
        return g->nnodes + g->nadapters + s;
}
static bool is_host(const struct ntbf__graph *g, uint32_t v)
{
        return v < g->nnodes;
}
static bool is_adapter(const struct ntbf__graph *g, uint32_t v)
{
        return v >= g->nnodes && v < g->nnodes + g->nadapters;
}

static uint32_t port_vertex(const struct ntbf__graph *g, struct ntbf_port_ref p)
{
        return p.kind == NTBF_PORT_ADAPTER ? v_adapter(g, p.obj) : v_switch(g, p.obj);
}

void ntbf__graph_free(struct ntbf__graph *g)
{
        if (!g)
                return;
        free(g->first);
        free(g->arcs);
        free(g->vcost);
        free(g->anode);
        free(g->rev);
        free(g);
}

struct ntbf__graph *ntbf__graph_build(const struct ntbf_topo *t)
{
        struct ntbf__graph *g = calloc(1, sizeof(*g));
        if (!g)
                return NULL;
        g->nnodes = t->nnodes;
        g->nadapters = t->nadapters;
        g->nswitches = t->nswitches;
        g->nv = t->nnodes + t->nadapters + t->nswitches;
        uint32_t narcs = 2 * t->nadapters + 2 * t->nlinks;
        g->first = calloc(g->nv + 1, sizeof(*g->first));
        g->arcs = calloc(narcs ? narcs : 1, sizeof(*g->arcs));
        g->vcost = calloc(g->nv ? g->nv : 1, sizeof(*g->vcost));
        g->anode = calloc(g->nadapters ? g->nadapters : 1, sizeof(*g->anode));
        g->rev = calloc(narcs ? narcs : 1, sizeof(*g->rev));
        if (!g->first || !g->arcs || !g->vcost || !g->anode || !g->rev) {
                ntbf__graph_free(g);
                return NULL;
        }
        for (uint32_t i = 0; i < t->nadapters; i++) {
                g->vcost[v_adapter(g, i)] = t->adapters[i].p.hop_ns;
                g->anode[i] = t->adapters[i].node;
        }
        for (uint32_t i = 0; i < t->nswitches; i++)
                g->vcost[v_switch(g, i)] = t->switches[i].p.hop_ns;

        /* Count arcs per vertex, then place them (CSR). Only links finalize accepted count. */
        uint32_t *deg = g->first;
        for (uint32_t i = 0; i < t->nadapters; i++) {
                deg[v_host(g, t->adapters[i].node) + 1]++;
                deg[v_adapter(g, i) + 1]++;
        }
        for (uint32_t i = 0; i < t->nlinks; i++) {
                const struct ntbf_link *l = &t->links[i];
                if (ntbf_topo_port_link(t, l->end[0]) != i)
                        continue;
                deg[port_vertex(g, l->end[0]) + 1]++;
                deg[port_vertex(g, l->end[1]) + 1]++;
        }
        for (uint32_t v = 0; v < g->nv; v++)
                g->first[v + 1] += g->first[v];
        uint32_t *fill = calloc(g->nv ? g->nv : 1, sizeof(*fill));
        if (!fill) {
                ntbf__graph_free(g);
                return NULL;
        }
        for (uint32_t i = 0; i < t->nadapters; i++) {
                uint32_t h = v_host(g, t->adapters[i].node), a = v_adapter(g, i);
                uint32_t x = g->first[h] + fill[h]++, y = g->first[a] + fill[a]++;
                g->arcs[x] = (struct ntbf__arc){h, a, NTBF_NONE, NTBF_NONE, NTBF_NONE, 0};
                g->arcs[y] = (struct ntbf__arc){a, h, NTBF_NONE, NTBF_NONE, NTBF_NONE, 0};
                g->rev[x] = y;
                g->rev[y] = x;
        }
        for (uint32_t i = 0; i < t->nlinks; i++) {
                const struct ntbf_link *l = &t->links[i];
                if (ntbf_topo_port_link(t, l->end[0]) != i)
                        continue;
                uint32_t u = port_vertex(g, l->end[0]), v = port_vertex(g, l->end[1]);
                uint32_t x = g->first[u] + fill[u]++, y = g->first[v] + fill[v]++;
                g->arcs[x] =
                    (struct ntbf__arc){u, v, i, l->end[0].port, l->end[1].port, l->latency_ns};
                g->arcs[y] =
                    (struct ntbf__arc){v, u, i, l->end[1].port, l->end[0].port, l->latency_ns};
                g->rev[x] = y;
                g->rev[y] = x;
        }
        g->narcs = g->first[g->nv];
        free(fill);
        return g;
}

/* ---- endpoints -------------------------------------------------------------------------- */

int ntbf_endpoint_parse(const struct ntbf_topo *t, const char *s, struct ntbf_endpoint *ep,
                        char *why, size_t whylen)
{
        char node[NTBF_NAME_MAX + 2];
        const char *dot = s ? strchr(s, '.') : NULL;
        size_t nl = dot ? (size_t)(dot - s) : (s ? strlen(s) : 0);
        if (!s || nl == 0 || nl > NTBF_NAME_MAX) {
                ntbf__say(why, whylen,
                          "'%s' is not an endpoint; write NODE, NODE.cpu, NODE.ram or "
                          "NODE.DEVICE",
                          s ? s : "");
                return NTBF_ENOTFOUND;
        }
        memcpy(node, s, nl);
        node[nl] = 0;
        uint32_t n = ntbf_topo_find_node(t, node);
        if (n == NTBF_NONE) {
                struct ntbf__suggest sg;
                ntbf__suggest_init(&sg, node);
                for (uint32_t i = 0; i < t->nnodes; i++)
                        ntbf__suggest_add(&sg, t->nodes[i].name);
                const char *best = ntbf__suggest_result(&sg);
                if (best)
                        ntbf__say(why, whylen, "no node '%s' in cluster '%s'; did you mean '%s'?",
                                  node, t->name, best);
                else
                        ntbf__say(why, whylen, "no node '%s' in cluster '%s'", node, t->name);
                return NTBF_ENOTFOUND;
        }
        *ep = (struct ntbf_endpoint){NTBF_EP_CPU, n, NTBF_NONE};
        if (!dot || !strcmp(dot + 1, "cpu"))
                return 0;
        if (!strcmp(dot + 1, "ram") || !strcmp(dot + 1, "mem")) {
                ep->kind = NTBF_EP_RAM;
                return 0;
        }
        uint32_t d = ntbf_topo_find_device(t, n, dot + 1);
        if (d == NTBF_NONE) {
                struct ntbf__suggest sg;
                ntbf__suggest_init(&sg, dot + 1);
                ntbf__suggest_add(&sg, "cpu");
                ntbf__suggest_add(&sg, "ram");
                for (uint32_t i = 0; i < t->nodes[n].ndevices; i++)
                        ntbf__suggest_add(&sg, t->devices[t->nodes[n].devices[i]].name);
                const char *best = ntbf__suggest_result(&sg);
                ntbf__say(why, whylen, "node '%s' has no device '%s'%s%s%s", node, dot + 1,
                          best ? "; did you mean '" : "", best ? best : "", best ? "'?" : "");
                return NTBF_ENOTFOUND;
        }
        ep->kind = NTBF_EP_DEVICE;
        ep->device = d;
        return 0;
}

const char *ntbf_endpoint_name(const struct ntbf_topo *t, struct ntbf_endpoint ep, char *buf,
                               size_t len)
{
        const char *node = ep.node < t->nnodes ? t->nodes[ep.node].name : "?";
        if (ep.kind == NTBF_EP_DEVICE && ep.device < t->ndevices)
                snprintf(buf, len, "%s.%s", node, t->devices[ep.device].name);
        else
                snprintf(buf, len, "%s.%s", node, ep.kind == NTBF_EP_RAM ? "ram" : "cpu");
        return buf;
}

const char *ntbf_hop_kind_name(enum ntbf_hop_kind k)
{
        static const char *const names[] = {"device", "root", "adapter", "link", "switch"};
        return (unsigned)k < 5 ? names[k] : "?";
}

const char *ntbf_hop_name(const struct ntbf_topo *t, const struct ntbf_hop *h, char *buf,
                          size_t len)
{
        char a[80], b[80];
        switch (h->kind) {
        case NTBF_HOP_DEVICE:
                snprintf(buf, len, "%s.%s", t->nodes[t->devices[h->obj].node].name,
                         t->devices[h->obj].name);
                break;
        case NTBF_HOP_ROOT:
                snprintf(buf, len, "%s", t->nodes[h->obj].name);
                break;
        case NTBF_HOP_ADAPTER:
                snprintf(buf, len, "%s.%s", t->nodes[t->adapters[h->obj].node].name,
                         t->adapters[h->obj].name);
                break;
        case NTBF_HOP_LINK:
                snprintf(buf, len, "%s - %s",
                         ntbf_port_name(t, t->links[h->obj].end[0], a, sizeof(a)),
                         ntbf_port_name(t, t->links[h->obj].end[1], b, sizeof(b)));
                break;
        case NTBF_HOP_SWITCH:
                snprintf(buf, len, "%s (port %u -> %u)", t->switches[h->obj].name, h->in_port,
                         h->out_port);
                break;
        }
        return buf;
}

/* ---- shared helpers --------------------------------------------------------------------- */

static bool link_down(const struct ntbf_path_opts *o, uint32_t link)
{
        return o && o->down_links && link != NTBF_NONE &&
               (o->down_links[link / 64] >> (link % 64) & 1);
}

/*
 * Whether arc u->v may be used. Hosts other than the source and target never carry
 * traffic, and neither do their adapters: an adapter of another host is only entered
 * from a cable to deliver into that host, never to leave by another cable.
 */
static bool arc_usable(const struct ntbf__graph *g, const struct ntbf_path_opts *o, uint32_t u,
                       const struct ntbf__arc *e, uint32_t src, uint32_t dst, uint32_t src_node)
{
        if (link_down(o, e->link))
                return false;
        if (is_host(g, u) && u != src)
                return false;
        if (is_host(g, e->to) && e->to != dst)
                return false;
        if (is_adapter(g, u) && e->link != NTBF_NONE && g->anode[u - g->nnodes] != src_node)
                return false;
        /* Nor does traffic come back into the source host's own adapters from a cable. */
        if (is_adapter(g, e->to) && e->link != NTBF_NONE && e->to != dst &&
            g->anode[e->to - g->nnodes] == src_node)
                return false;
        return true;
}

static int add_hop(struct ntbf_path *p, struct ntbf_hop h)
{
        if (p->nhops >= NTBF_PATH_MAX)
                return -E2BIG;
        p->hops[p->nhops++] = h;
        p->latency_ns += h.latency_ns;
        return 0;
}

/*
 * Turn a chain of arcs (graph arc indexes, from the source vertex) into hops, with the
 * endpoint device and root-complex hops at both ends. When the source vertex is a chosen
 * adapter rather than the host, the host -> adapter step is implicit.
 */
static int build_hops(const struct ntbf_topo *t, const struct ntbf__graph *g,
                      struct ntbf_endpoint a, struct ntbf_endpoint b, uint32_t src,
                      const uint32_t *chain, uint32_t nchain, struct ntbf_path *p)
{
        memset(p, 0, sizeof(*p));
        p->from = a;
        p->to = b;
        p->first_adapter = p->last_adapter = NTBF_NONE;
        int r = 0;
        if (a.kind == NTBF_EP_DEVICE)
                r |= add_hop(p, (struct ntbf_hop){NTBF_HOP_DEVICE, a.device, NTBF_NONE, NTBF_NONE,
                                                  t->devices[a.device].hop_ns});
        r |= add_hop(p, (struct ntbf_hop){NTBF_HOP_ROOT, a.node, NTBF_NONE, NTBF_NONE, 0});
        /* Step s visits vertex vert(s), entered by arc arc_in(s) (NULL for an adapter source). */
        bool lead = !is_host(g, src);
        uint32_t nsteps = nchain + (lead ? 1 : 0);
        for (uint32_t s = 0; s < nsteps; s++) {
                const struct ntbf__arc *in = NULL;
                uint32_t v = src;
                if (!(lead && s == 0)) {
                        in = &g->arcs[chain[s - (lead ? 1 : 0)]];
                        v = in->to;
                }
                if (in && in->link != NTBF_NONE)
                        r |= add_hop(p, (struct ntbf_hop){NTBF_HOP_LINK, in->link, NTBF_NONE,
                                                          NTBF_NONE, in->cost});
                if (is_host(g, v))
                        continue;
                uint32_t in_port = in && in->link != NTBF_NONE ? in->port_to : NTBF_NONE;
                uint32_t out_port = NTBF_NONE;
                if (s + 1 < nsteps) {
                        const struct ntbf__arc *next = &g->arcs[chain[s + 1 - (lead ? 1 : 0)]];
                        if (next->link != NTBF_NONE)
                                out_port = next->port_from;
                }
                if (is_adapter(g, v)) {
                        uint32_t ai = v - g->nnodes;
                        r |= add_hop(p, (struct ntbf_hop){NTBF_HOP_ADAPTER, ai, in_port, out_port,
                                                          g->vcost[v]});
                        if (p->first_adapter == NTBF_NONE)
                                p->first_adapter = ai;
                        p->last_adapter = ai;
                } else {
                        r |= add_hop(p, (struct ntbf_hop){NTBF_HOP_SWITCH,
                                                          v - g->nnodes - g->nadapters, in_port,
                                                          out_port, g->vcost[v]});
                }
        }
        r |= add_hop(p, (struct ntbf_hop){NTBF_HOP_ROOT, b.node, NTBF_NONE, NTBF_NONE, 0});
        if (b.kind == NTBF_EP_DEVICE)
                r |= add_hop(p, (struct ntbf_hop){NTBF_HOP_DEVICE, b.device, NTBF_NONE, NTBF_NONE,
                                                  t->devices[b.device].hop_ns});
        return r ? -E2BIG : 0;
}

static int check_endpoint(const struct ntbf_topo *t, struct ntbf_endpoint e, char *why,
                          size_t whylen)
{
        if (e.node >= t->nnodes ||
            (e.kind == NTBF_EP_DEVICE &&
             (e.device >= t->ndevices || t->devices[e.device].node != e.node))) {
                ntbf__say(why, whylen, "invalid endpoint");
                return -EINVAL;
        }
        return 0;
}

/* Resolve the source and target vertices from the endpoints and options. */
static int endpoints_to_vertices(const struct ntbf_topo *t, const struct ntbf__graph *g,
                                 const struct ntbf_path_opts *o, struct ntbf_endpoint a,
                                 struct ntbf_endpoint b, uint32_t *src, uint32_t *dst, char *why,
                                 size_t whylen)
{
        if (!g) {
                ntbf__say(why, whylen, "the topology is not finalized");
                return -EINVAL;
        }
        int r = check_endpoint(t, a, why, whylen);
        if (!r)
                r = check_endpoint(t, b, why, whylen);
        if (r)
                return r;
        *src = v_host(g, a.node);
        *dst = v_host(g, b.node);
        if (o && o->first_adapter != NTBF_NONE) {
                if (o->first_adapter >= t->nadapters ||
                    t->adapters[o->first_adapter].node != a.node) {
                        ntbf__say(why, whylen, "the first adapter is not an adapter of node '%s'",
                                  t->nodes[a.node].name);
                        return -EINVAL;
                }
                *src = v_adapter(g, o->first_adapter);
        }
        if (o && o->last_adapter != NTBF_NONE) {
                if (o->last_adapter >= t->nadapters ||
                    t->adapters[o->last_adapter].node != b.node) {
                        ntbf__say(why, whylen, "the last adapter is not an adapter of node '%s'",
                                  t->nodes[b.node].name);
                        return -EINVAL;
                }
                *dst = v_adapter(g, o->last_adapter);
        }
        return 0;
}

/* ---- Dijkstra --------------------------------------------------------------------------- */

struct heap_item {
        uint64_t d;
        uint32_t v;
};

static void heap_push(struct heap_item *h, uint32_t *n, struct heap_item x)
{
        uint32_t i = (*n)++;
        while (i > 0) {
                uint32_t p = (i - 1) / 2;
                if (h[p].d < x.d || (h[p].d == x.d && h[p].v <= x.v))
                        break;
                h[i] = h[p];
                i = p;
        }
        h[i] = x;
}

static struct heap_item heap_pop(struct heap_item *h, uint32_t *n)
{
        struct heap_item top = h[0], x = h[--(*n)];
        uint32_t i = 0;
        for (;;) {
                uint32_t c = 2 * i + 1;
                if (c >= *n)
                        break;
                if (c + 1 < *n &&
                    (h[c + 1].d < h[c].d || (h[c + 1].d == h[c].d && h[c + 1].v < h[c].v)))
                        c++;
                if (x.d < h[c].d || (x.d == h[c].d && x.v <= h[c].v))
                        break;
                h[i] = h[c];
                i = c;
        }
        h[i] = x;
        return top;
}

/*
 * The Dijkstra loop shared by single paths and trees. With dst == NTBF_NONE it computes the
 * whole tree from src (every host is a leaf); otherwise it stops once dst is settled. Ties
 * are broken by (distance, vertex), so a tree and a single search agree on every path.
 * src may also be a switch: a tree from it lets no adapter carry traffic between cables.
 */
static void dijkstra_run(const struct ntbf__graph *g, const struct ntbf_path_opts *o, uint32_t src,
                         uint32_t dst, uint64_t *dist, uint32_t *prev, struct heap_item *heap)
{
        uint32_t src_node = is_host(g, src)      ? src
                            : is_adapter(g, src) ? g->anode[src - g->nnodes]
                                                 : NTBF_NONE;
        uint32_t dst_node = dst == NTBF_NONE  ? NTBF_NONE
                            : is_host(g, dst) ? dst
                                              : g->anode[dst - g->nnodes];
        for (uint32_t v = 0; v < g->nv; v++) {
                dist[v] = UINT64_MAX;
                prev[v] = NTBF_NONE;
        }
        uint32_t hn = 0;
        dist[src] = is_host(g, src) ? 0 : g->vcost[src];
        heap_push(heap, &hn, (struct heap_item){dist[src], src});
        while (hn) {
                struct heap_item it = heap_pop(heap, &hn);
                if (it.d != dist[it.v])
                        continue;
                if (it.v == dst)
                        break;
                if (is_host(g, it.v) && it.v != src)
                        continue;
                for (uint32_t k = g->first[it.v]; k < g->first[it.v + 1]; k++) {
                        const struct ntbf__arc *e = &g->arcs[k];
                        if (dst == NTBF_NONE) {
                                /* Other hosts and their adapters are the tree's leaves: they
                                 * relax nothing, so settle_leaves() places them afterwards. */
                                if (link_down(o, e->link) || is_host(g, e->to) ||
                                    (is_adapter(g, e->to) &&
                                     g->anode[e->to - g->nnodes] != src_node))
                                        continue;
                        } else if (!arc_usable(g, o, it.v, e, src, dst, src_node) ||
                                   (is_adapter(g, e->to) &&
                                    g->anode[e->to - g->nnodes] != src_node &&
                                    g->anode[e->to - g->nnodes] != dst_node)) {
                                /* Another host's adapter is a dead end for this search (it
                                 * leads only into its host): leaving it out changes no path
                                 * and keeps a search in a large fabric to the switches. */
                                continue;
                        }
                        uint64_t nd = it.d + e->cost + g->vcost[e->to];
                        if (nd < dist[e->to]) {
                                dist[e->to] = nd;
                                prev[e->to] = k;
                                heap_push(heap, &hn, (struct heap_item){nd, e->to});
                        }
                }
        }
}

/*
 * Whether relaxing arc k (from u, settled at dist[u]) would have won over the current best
 * for its head: a smaller distance, or the same one from a vertex popped earlier (the heap
 * pops by (distance, vertex); a vertex relaxes its arcs in order, and only a strictly smaller
 * distance replaces).
 */
static bool leaf_better(const struct ntbf__graph *g, const uint64_t *dist, uint32_t k, uint64_t nd,
                        uint64_t best, uint32_t best_arc)
{
        if (nd != best)
                return nd < best;
        if (best_arc == NTBF_NONE)
                return true;
        uint32_t u = g->arcs[k].from, w = g->arcs[best_arc].from;
        if (dist[u] != dist[w])
                return dist[u] < dist[w];
        return u != w ? u < w : k < best_arc;
}

/*
 * Place the leaves of a tree exactly where Dijkstra would have: each other host's adapter
 * from the settled switch (or source adapter) that reaches it first, then each other host
 * from its adapter that does. This keeps a tree's cost to the switches in large fabrics.
 */
static void settle_leaves(const struct ntbf__graph *g, const struct ntbf_path_opts *o, uint32_t src,
                          uint32_t src_node, uint64_t *dist, uint32_t *prev)
{
        for (uint32_t a = 0; a < g->nadapters; a++) {
                uint32_t v = g->nnodes + a;
                if (g->anode[a] == src_node)
                        continue;
                uint64_t best = UINT64_MAX;
                uint32_t best_arc = NTBF_NONE;
                for (uint32_t i = g->first[v]; i < g->first[v + 1]; i++) {
                        const struct ntbf__arc *back = &g->arcs[i];
                        uint32_t u = back->to, k = g->rev[i];
                        if (back->link == NTBF_NONE || link_down(o, back->link) ||
                            dist[u] == UINT64_MAX || is_host(g, u) ||
                            (is_adapter(g, u) && g->anode[u - g->nnodes] != src_node))
                                continue;
                        uint64_t nd = dist[u] + g->arcs[k].cost + g->vcost[v];
                        if (leaf_better(g, dist, k, nd, best, best_arc)) {
                                best = nd;
                                best_arc = k;
                        }
                }
                dist[v] = best;
                prev[v] = best_arc;
        }
        for (uint32_t m = 0; m < g->nnodes; m++) {
                if (m == src)
                        continue;
                uint64_t best = UINT64_MAX;
                uint32_t best_arc = NTBF_NONE;
                for (uint32_t i = g->first[m]; i < g->first[m + 1]; i++) {
                        uint32_t a = g->arcs[i].to, k = g->rev[i];
                        if (dist[a] == UINT64_MAX || g->anode[a - g->nnodes] == src_node)
                                continue;
                        uint64_t nd = dist[a] + g->arcs[k].cost + g->vcost[m];
                        if (leaf_better(g, dist, k, nd, best, best_arc)) {
                                best = nd;
                                best_arc = k;
                        }
                }
                dist[m] = best;
                prev[m] = best_arc;
        }
}

size_t ntbf__sssp_heap_bytes(const struct ntbf__graph *g)
{
        return ((size_t)g->narcs + 2) * sizeof(struct heap_item);
}

void ntbf__sssp_tree(const struct ntbf__graph *g, uint32_t src, uint64_t *dist, uint32_t *prev,
                     void *heap)
{
        dijkstra_run(g, NULL, src, NTBF_NONE, dist, prev, heap);
        uint32_t src_node = is_host(g, src)      ? src
                            : is_adapter(g, src) ? g->anode[src - g->nnodes]
                                                 : NTBF_NONE;
        settle_leaves(g, NULL, src, src_node, dist, prev);
}

/* Least-latency arc chain src -> dst; returns the chain length or -1 if unreachable. */
static int dijkstra(const struct ntbf__graph *g, const struct ntbf_path_opts *o, uint32_t src,
                    uint32_t dst, uint32_t *chain, uint32_t maxchain)
{
        uint64_t *dist = malloc(g->nv * sizeof(*dist));
        uint32_t *prev = malloc(g->nv * sizeof(*prev));
        struct heap_item *heap = malloc((g->narcs + 2) * sizeof(*heap));
        int len = -1;
        if (!dist || !prev || !heap) {
                len = -2;
                goto out;
        }
        dijkstra_run(g, o, src, dst, dist, prev, heap);
        if (dist[dst] == UINT64_MAX)
                goto out;
        /* Walk back from dst along the arcs that reached each vertex. */
        uint32_t n = 0;
        for (uint32_t v = dst; v != src;) {
                uint32_t k = prev[v];
                if (n >= maxchain) {
                        len = -3;
                        goto out;
                }
                chain[n++] = k;
                v = g->arcs[k].from;
        }
        for (uint32_t i = 0; i < n / 2; i++) {
                uint32_t x = chain[i];
                chain[i] = chain[n - 1 - i];
                chain[n - 1 - i] = x;
        }
        len = (int)n;
out:
        free(dist);
        free(prev);
        free(heap);
        return len;
}

/* Explain why dst cannot be reached from src: the missing adapter, link, or a down link. */
static void explain_gap(const struct ntbf_topo *t, const struct ntbf_path_opts *o,
                        struct ntbf_endpoint a, struct ntbf_endpoint b, char *why, size_t whylen)
{
        const char *an = t->nodes[a.node].name, *bn = t->nodes[b.node].name;
        for (int side = 0; side < 2; side++) {
                const struct ntbf_node *n = &t->nodes[side ? b.node : a.node];
                if (n->nadapters == 0) {
                        ntbf__say(why, whylen,
                                  "no path from '%s' to '%s': node '%s' has no adapter", an, bn,
                                  n->name);
                        return;
                }
                bool any = false, any_up = false;
                for (uint32_t k = 0; k < n->nadapters; k++) {
                        const struct ntbf_adapter *ad = &t->adapters[n->adapters[k]];
                        for (uint32_t p = 0; p < NTBF_MAX_ADAPTER_PORTS; p++) {
                                if (ad->link[p] == NTBF_NONE)
                                        continue;
                                any = true;
                                any_up |= !link_down(o, ad->link[p]);
                        }
                }
                if (!any) {
                        ntbf__say(why, whylen,
                                  "no path from '%s' to '%s': no adapter of node '%s' "
                                  "has a link",
                                  an, bn, n->name);
                        return;
                }
                if (!any_up) {
                        ntbf__say(why, whylen,
                                  "no path from '%s' to '%s': every link of node '%s' "
                                  "is down",
                                  an, bn, n->name);
                        return;
                }
        }
        if (o && o->down_links) {
                /* Would it work with every link up? Then name the down link it would use. */
                struct ntbf_path_opts up = *o;
                up.down_links = NULL;
                uint32_t src, dst, chain[NTBF_PATH_MAX];
                if (!endpoints_to_vertices(t, t->graph, &up, a, b, &src, &dst, NULL, 0)) {
                        int n = dijkstra(t->graph, &up, src, dst, chain, NTBF_PATH_MAX);
                        for (int i = 0; i < n; i++) {
                                uint32_t l = t->graph->arcs[chain[i]].link;
                                if (link_down(o, l)) {
                                        char x[80], y[80];
                                        ntbf__say(
                                            why, whylen,
                                            "no path from '%s' to '%s': link %s - %s "
                                            "is down and no other path exists",
                                            an, bn,
                                            ntbf_port_name(t, t->links[l].end[0], x, sizeof(x)),
                                            ntbf_port_name(t, t->links[l].end[1], y, sizeof(y)));
                                        return;
                                }
                        }
                }
        }
        if (o && (o->first_adapter != NTBF_NONE || o->last_adapter != NTBF_NONE)) {
                ntbf__say(why, whylen, "no path from '%s' to '%s' through the chosen adapter%s", an,
                          bn,
                          o->first_adapter != NTBF_NONE && o->last_adapter != NTBF_NONE ? "s" : "");
                return;
        }
        ntbf__say(why, whylen,
                  "no path from '%s' to '%s': no cable or switch connects them (paths do "
                  "not transit other hosts)",
                  an, bn);
}

int ntbf_path_find(const struct ntbf_topo *t, const struct ntbf_path_opts *o,
                   struct ntbf_endpoint a, struct ntbf_endpoint b, struct ntbf_path *out, char *why,
                   size_t whylen)
{
        uint32_t src, dst, chain[NTBF_PATH_MAX];
        const struct ntbf__graph *g = t->graph;
        int r = endpoints_to_vertices(t, g, o, a, b, &src, &dst, why, whylen);
        if (r)
                return r;
        if (a.node == b.node)
                return build_hops(t, g, a, b, v_host(g, a.node), NULL, 0, out);
        int n = dijkstra(g, o, src, dst, chain, NTBF_PATH_MAX);
        if (n == -2)
                return -ENOMEM;
        if (n == -3) {
                ntbf__say(why, whylen, "the path is longer than %d hops", NTBF_PATH_MAX);
                return -E2BIG;
        }
        if (n < 0) {
                explain_gap(t, o, a, b, why, whylen);
                return NTBF_ENOPATH;
        }
        if (dst != v_host(g, b.node)) {
                /* Entering the target host from the chosen last adapter: add that arc. */
                uint32_t h = v_host(g, b.node);
                for (uint32_t k = g->first[dst]; k < g->first[dst + 1]; k++) {
                        if (g->arcs[k].to == h) {
                                if (n >= NTBF_PATH_MAX)
                                        return -E2BIG;
                                chain[n++] = k;
                                break;
                        }
                }
        }
        r = build_hops(t, g, a, b, src, chain, (uint32_t)n, out);
        if (r)
                ntbf__say(why, whylen, "the path is longer than %d hops", NTBF_PATH_MAX);
        return r;
}

/* ---- k link-disjoint paths: successive shortest paths on a residual graph --------------- */

struct redge {
        uint32_t to, next;
        int32_t cap;
        int64_t cost;
        uint32_t arc; /* graph arc of a forward edge; NTBF_NONE for reverse edges */
};

struct flow {
        struct redge *e;
        uint32_t ne, *head;
};

static void flow_add(struct flow *f, uint32_t u, uint32_t v, int32_t cap, int64_t cost,
                     uint32_t arc)
{
        f->e[f->ne] = (struct redge){v, f->head[u], cap, cost, arc};
        f->head[u] = f->ne++;
        f->e[f->ne] = (struct redge){u, f->head[v], 0, -cost, NTBF_NONE};
        f->head[v] = f->ne++;
}

/* Bellman-Ford (queue based) shortest path in the residual graph; false if dst unreachable. */
static bool flow_spfa(const struct flow *f, uint32_t nv, uint32_t src, uint32_t dst, int64_t *dist,
                      uint32_t *pe, uint32_t *queue, bool *inq)
{
        for (uint32_t v = 0; v < nv; v++) {
                dist[v] = INT64_MAX;
                pe[v] = NTBF_NONE;
                inq[v] = false;
        }
        uint32_t qh = 0, qt = 0;
        dist[src] = 0;
        queue[qt++ % (nv + 1)] = src;
        inq[src] = true;
        while (qh != qt) {
                uint32_t u = queue[qh++ % (nv + 1)];
                inq[u] = false;
                for (uint32_t k = f->head[u]; k != NTBF_NONE; k = f->e[k].next) {
                        const struct redge *e = &f->e[k];
                        if (e->cap <= 0 || dist[u] + e->cost >= dist[e->to])
                                continue;
                        dist[e->to] = dist[u] + e->cost;
                        pe[e->to] = k;
                        if (!inq[e->to]) {
                                inq[e->to] = true;
                                queue[qt++ % (nv + 1)] = e->to;
                        }
                }
        }
        return dist[dst] != INT64_MAX;
}

int ntbf_path_disjoint(const struct ntbf_topo *t, const struct ntbf_path_opts *o,
                       struct ntbf_endpoint a, struct ntbf_endpoint b, unsigned k,
                       struct ntbf_path *out, unsigned *found, char *why, size_t whylen)
{
        const struct ntbf__graph *g = t->graph;
        uint32_t src, dst;
        *found = 0;
        int r = endpoints_to_vertices(t, g, o, a, b, &src, &dst, why, whylen);
        if (r)
                return r;
        if (k == 0)
                return 0;
        if (a.node == b.node) {
                /* A host reaches itself without links: one path, and no second disjoint one. */
                r = ntbf_path_find(t, o, a, b, &out[0], why, whylen);
                if (r)
                        return r;
                *found = 1;
                if (k > 1) {
                        ntbf__say(why, whylen,
                                  "'%s' and '%s' are in the same host: there is one local "
                                  "path",
                                  t->nodes[a.node].name, t->nodes[b.node].name);
                        return NTBF_ENOPATH;
                }
                return 0;
        }
        uint32_t nv = g->nv + 1; /* + a super-sink if the target is a host */
        struct flow f = {0};
        f.e = malloc((2 * (size_t)g->narcs + 2) * sizeof(*f.e));
        f.head = malloc(nv * sizeof(*f.head));
        int64_t *dist = malloc(nv * sizeof(*dist));
        uint32_t *pe = malloc(nv * sizeof(*pe));
        uint32_t *queue = malloc((nv + 1) * sizeof(*queue));
        bool *inq = malloc(nv * sizeof(*inq));
        bool *seen = NULL;
        uint32_t *chain = malloc(NTBF_PATH_MAX * sizeof(*chain));
        r = -ENOMEM;
        if (!f.e || !f.head || !dist || !pe || !queue || !inq || !chain)
                goto out;
        for (uint32_t v = 0; v < nv; v++)
                f.head[v] = NTBF_NONE;
        for (uint32_t u = 0; u < g->nv; u++) {
                for (uint32_t i = g->first[u]; i < g->first[u + 1]; i++) {
                        const struct ntbf__arc *e = &g->arcs[i];
                        if (!arc_usable(g, o, u, e, src, dst, a.node))
                                continue;
                        /* Cables carry one path; host-adapter arcs and switches carry any. */
                        int32_t cap = e->link == NTBF_NONE ? (int32_t)k : 1;
                        flow_add(&f, u, e->to, cap, (int64_t)e->cost + g->vcost[e->to], i);
                }
        }
        /* A chosen first adapter is the flow's source; its own hop cost is common to all. */
        uint32_t s = src;
        unsigned flow = 0;
        while (flow < k && flow_spfa(&f, nv, s, dst, dist, pe, queue, inq)) {
                for (uint32_t v = dst; v != s;) {
                        uint32_t ei = pe[v];
                        f.e[ei].cap -= 1;
                        f.e[ei ^ 1].cap += 1;
                        v = f.e[ei ^ 1].to;
                }
                flow++;
        }
        /* Flow along both directions of one cable cancels: it would mean sharing it. */
        for (uint32_t i = 0; i < f.ne; i += 2) {
                struct redge *e = &f.e[i];
                if (e->arc == NTBF_NONE || g->arcs[e->arc].link == NTBF_NONE || e->cap != 0)
                        continue;
                for (uint32_t j = i + 2; j < f.ne; j += 2) {
                        struct redge *x = &f.e[j];
                        if (x->arc != NTBF_NONE && x->cap == 0 &&
                            g->arcs[x->arc].link == g->arcs[e->arc].link && x->to != e->to) {
                                e->cap = 1;
                                f.e[i + 1].cap = 0;
                                x->cap = 1;
                                f.e[j + 1].cap = 0;
                                break;
                        }
                }
        }
        /* If fewer than k exist, name a minimum cut now, before decomposing the flow:
         * the saturated cables leaving what the source still reaches. */
        char cutmsg[768] = "";
        if (flow > 0 && flow < k) {
                seen = calloc(nv, sizeof(*seen));
                if (!seen) {
                        r = -ENOMEM;
                        goto out;
                }
                uint32_t qh = 0, qt = 0;
                queue[qt++] = s;
                seen[s] = true;
                while (qh < qt) {
                        uint32_t u = queue[qh++];
                        for (uint32_t i = f.head[u]; i != NTBF_NONE; i = f.e[i].next) {
                                if (f.e[i].cap > 0 && !seen[f.e[i].to]) {
                                        seen[f.e[i].to] = true;
                                        queue[qt++] = f.e[i].to;
                                }
                        }
                }
                char names[512] = "", x[80], y[80];
                size_t used = 0;
                unsigned listed = 0;
                for (uint32_t i = 0; i < f.ne && listed < 4; i += 2) {
                        const struct redge *e = &f.e[i];
                        if (e->arc == NTBF_NONE || g->arcs[e->arc].link == NTBF_NONE)
                                continue;
                        uint32_t u = f.e[i + 1].to;
                        if (!seen[u] || seen[e->to] || e->cap > 0)
                                continue;
                        const struct ntbf_link *l = &t->links[g->arcs[e->arc].link];
                        int w =
                            snprintf(names + used, sizeof(names) - used, "%s%s - %s",
                                     listed ? ", " : "", ntbf_port_name(t, l->end[0], x, sizeof(x)),
                                     ntbf_port_name(t, l->end[1], y, sizeof(y)));
                        if (w > 0 && (size_t)w < sizeof(names) - used)
                                used += (size_t)w;
                        listed++;
                }
                snprintf(cutmsg, sizeof(cutmsg),
                         "only %u link-disjoint path%s from '%s' to '%s': every further "
                         "path would reuse %s",
                         flow, flow == 1 ? "" : "s", t->nodes[a.node].name, t->nodes[b.node].name,
                         listed ? names : "a link already used");
        }
        /* Decompose the flow into paths. */
        unsigned got = 0;
        for (unsigned p = 0; p < flow; p++) {
                uint32_t n = 0, u = s;
                bool ok = true;
                while (u != dst) {
                        uint32_t used = NTBF_NONE;
                        for (uint32_t i = f.head[u]; i != NTBF_NONE; i = f.e[i].next) {
                                struct redge *e = &f.e[i];
                                if (i % 2 == 0 && e->arc != NTBF_NONE && f.e[i + 1].cap > 0) {
                                        used = i;
                                        break;
                                }
                        }
                        if (used == NTBF_NONE || n >= NTBF_PATH_MAX) {
                                ok = false;
                                break;
                        }
                        f.e[used + 1].cap -= 1; /* consume one unit of flow */
                        f.e[used].cap += 1;
                        chain[n++] = f.e[used].arc;
                        u = f.e[used].to;
                }
                if (!ok)
                        break;
                if (dst != v_host(g, b.node)) {
                        uint32_t h = v_host(g, b.node);
                        for (uint32_t i = g->first[dst]; i < g->first[dst + 1]; i++) {
                                if (g->arcs[i].to == h && n < NTBF_PATH_MAX) {
                                        chain[n++] = i;
                                        break;
                                }
                        }
                }
                r = build_hops(t, g, a, b, src, chain, n, &out[got]);
                if (r)
                        goto out;
                got++;
        }
        /* Sort by latency (few paths: insertion sort). */
        for (unsigned i = 1; i < got; i++) {
                struct ntbf_path x = out[i];
                unsigned j = i;
                while (j > 0 && out[j - 1].latency_ns > x.latency_ns) {
                        out[j] = out[j - 1];
                        j--;
                }
                out[j] = x;
        }
        *found = got;
        r = 0;
        if (got == 0) {
                explain_gap(t, o, a, b, why, whylen);
                r = NTBF_ENOPATH;
        } else if (got < k) {
                ntbf__say(why, whylen, "%s", cutmsg);
                r = NTBF_ENOPATH;
        }
out:
        free(f.e);
        free(f.head);
        free(dist);
        free(pe);
        free(queue);
        free(inq);
        free(seen);
        free(chain);
        return r;
}
