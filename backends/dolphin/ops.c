/* backends/dolphin/ops.c: the Dolphin backend: adapters, figures, slots as segments, CPU maps. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../polltimer.h"
#include "dolphin.h"

/*
 * Dolphin's adapters are driven by Dolphin's own drivers; their only public interface is
 * SISCI. SISCI works one level above this vtable (docs/dolphin.md): it has segments that a
 * node makes of its own memory and that other nodes connect to and map, not translation
 * slots by index. The backend presents it as a managed fabric:
 *
 * - A slot of adapter A's window leading to [addr, + size) of host B is a segment B makes of
 *   that memory (SCIAttachPhysicalMemory), numbered DOL_SLOT_ID(A, slot) and available on
 *   B's adapter: translation is inbound (NTBF_CAP_XLAT_INBOUND), programmed by B with
 *   peer_xlat_set. The slot lives as long as the process that programmed it (the daemon).
 * - A's processes find the segment when they use the slot (map_window, window_write, DMA):
 *   they connect to it on the node that holds it (the last one it was found on first, then
 *   each node A reaches) and map it with SISCI, each slot's part laid in place in one
 *   reserved range (SCI_FLAG_FIXED_MAP_ADDR), the rest of the window over a private page of
 *   all ones. A mapping sees what its slot led to when it was made: a slot cleared or
 *   programmed again reads all ones (the library's lost mapping) until the range is mapped
 *   again. A connection found gone (a segment event) is replaced at its next use.
 * - Local memory for export is a segment of this process (mem_alloc); this host's physical
 *   memory and BARs are mapped through attached segments (host_map, mem_map).
 * - What SISCI cannot express is not claimed (requester-ID tables: SmartIO registers a
 *   device's requester itself; doorbells, scratchpads, messages, link control, reset,
 *   counters, multicast): every such call of the vtable is absent, so the core and the
 *   daemon say it is unsupported.
 */

#define POLL_MS 50 /* link state is polled: SISCI reports no link events to a process */

static int peer_ids(const struct ntbf_topo *t, uint32_t adapter, uint32_t *ids, unsigned max,
                    unsigned *n);

/* ---- instance and adapters --------------------------------------------------------------- */

/* SISCI's adapter number of topology adapter `adapter` (docs/dolphin.md): the one whose
 * SCI_Q_ADAPTER_BDF is the cluster file's bdf, else its place among its node's adapters. */
static int adapter_no(struct dol_lib *L, const struct ntbf_topo *t, uint32_t adapter, unsigned *ano,
                      char *why, size_t whylen)
{
        const struct ntbf_adapter *a = &t->adapters[adapter];
        const struct ntbf_node *n = &t->nodes[a->node];
        unsigned pos = 0;
        while (pos < n->nadapters && n->adapters[pos] != adapter)
                pos++;
        *ano = pos;
        uint16_t dom;
        uint8_t bus, dev, fn;
        if (a->bdf[0] && L->has_SCI_Q_ADAPTER_BDF &&
            !ntbf_bdf_parse(a->bdf, &dom, &bus, &dev, &fn)) {
                unsigned want = (unsigned)bus << 8 | (unsigned)dev << 3 | fn, got = 0;
                bool found = false;
                for (unsigned k = 0; k < DIS_MAX_NSCIS && !found; k++)
                        if (ntbf__dol_qadapter(L, k, 0, SCO(L, SCI_Q_ADAPTER_BDF), &got) ==
                                SCI_ERR_OK &&
                            got == want) {
                                *ano = k;
                                found = true;
                        }
                if (!found) {
                        snprintf(why, whylen,
                                 "adapter %s.%s: the cluster file gives bdf %s, but no adapter "
                                 "SISCI knows on this host is there (SCI_Q_ADAPTER_BDF); fix the "
                                 "bdf or leave it out (the adapters are then taken in the order "
                                 "of the node's list)",
                                 n->name, a->name, a->bdf);
                        return NTBF_ECONFIG;
                }
        }
        unsigned id = 0;
        sci_error_t e = SCI_ERR_OK;
        SCI(L, GetLocalNodeId, *ano, &id, 0, &e);
        if (e != SCI_ERR_OK) {
                snprintf(why, whylen,
                         "adapter %s.%s is SISCI's adapter number %u, which this host does not "
                         "have (%s); check the adapters with dis_config, and the node's list of "
                         "adapters in the cluster file",
                         n->name, a->name, *ano, ntbf__dol_errstr(L, e));
                return -ENODEV;
        }
        if (id != n->id) {
                snprintf(why, whylen,
                         "node %s has id %u in the cluster file, but SISCI says its adapter %u "
                         "(%s) is node %u: set id: %u (dis_config -gn prints a host's node ids)",
                         n->name, n->id, *ano, a->name, id, id);
                return NTBF_ECONFIG;
        }
        return 0;
}

static bool pow2(uint64_t v)
{
        return v && !(v & (v - 1));
}

/* Count adapters of other nodes the adapter reaches (through cables and switches). */
static uint32_t count_peers(const struct ntbf_topo *t, uint32_t adapter)
{
        uint32_t ids[256];
        unsigned n = 0;
        peer_ids(t, adapter, ids, 256, &n);
        uint32_t cnt = 0;
        for (uint32_t i = 0; i < t->nadapters; i++) {
                uint32_t id = t->nodes[t->adapters[i].node].id;
                for (unsigned k = 0; k < n; k++)
                        if (ids[k] == id) {
                                cnt++;
                                break;
                        }
        }
        return cnt;
}

/* Add one figure to what the daemon's log says of h: "ports 2, window ...". */
static void NTBF_PRINTF(2, 3) fig_add(struct ntbf_adapter_h *h, const char *fmt, ...)
{
        size_t fl = strlen(h->figures);
        if (fl && fl + 2 < sizeof(h->figures)) {
                memcpy(h->figures + fl, ", ", 3);
                fl += 2;
        }
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(h->figures + fl, sizeof(h->figures) - fl, fmt, ap);
        va_end(ap);
}

/*
 * Whether the operator allows the cluster file's window where SISCI does not give it: the
 * adapter's `dolphin: {file_figures: true}` in the cluster file (docs/dolphin.md). A non-empty
 * NTBFAB_DOLPHIN_FILE_FIGURES in the environment overrides the file for every adapter of the
 * process: "0" refuses, any other value allows. *why says which allowed, or which refused
 * when the environment did (NULL: the file has no file_figures: true).
 */
static bool file_figures_allowed(const struct ntbf_adapter *a, const char **why)
{
        const char *v = getenv("NTBFAB_DOLPHIN_FILE_FIGURES");
        if (v && *v) {
                bool on = strcmp(v, "0") != 0;
                *why = on ? "NTBFAB_DOLPHIN_FILE_FIGURES is set in the environment"
                          : "NTBFAB_DOLPHIN_FILE_FIGURES=0 in the environment overrides the "
                            "cluster file's dolphin: {file_figures}";
                return on;
        }
        *why = a->dol.file_figures ? "the cluster file says dolphin: {file_figures: true}" : NULL;
        return a->dol.file_figures;
}

/* One answer of SCIQuery(SCI_Q_ADAPTER, sub) for h's adapter, or a sentence of why not. */
static bool query_fig(struct ntbf_adapter_h *h, bool known, unsigned sub, const char *name,
                      unsigned *u, char *why, size_t whylen)
{
        if (!known) {
                snprintf(why, whylen, "the library has no constant %s", name);
                return false;
        }
        sci_error_t e = ntbf__dol_qadapter(h->L, h->ano, 0, sub, u);
        if (e != SCI_ERR_OK) {
                snprintf(why, whylen, "SCIQuery(SCI_Q_ADAPTER, %s) failed: %s", name,
                         ntbf__dol_errstr(h->L, e));
                return false;
        }
        return true;
}

/*
 * The adapter's window from its address translation table (ATT): that many slots of that
 * size. These are the budget the core plans with (its translation slots), so they come from
 * SISCI: when SCIQuery does not give them, or gives figures the backend cannot use, the
 * adapter is refused unless the operator allows the cluster file's (file_figures_allowed),
 * which h->warning then says.
 */
static int att_window(struct ntbf_adapter_h *h, char *why, size_t whylen)
{
        struct dol_lib *L = h->L;
        const struct ntbf_topo *t = h->b->t;
        const struct ntbf_adapter *a = &t->adapters[h->adapter];
        struct ntbf_caps *c = &h->caps;
        unsigned page = 0, entries = 0;
        char what[300] = "";
        if (query_fig(h, L->has_SCI_Q_ADAPTER_ATT_PAGE_SIZE, SCO(L, SCI_Q_ADAPTER_ATT_PAGE_SIZE),
                      "SCI_Q_ADAPTER_ATT_PAGE_SIZE", &page, what, sizeof(what)) &&
            query_fig(h, L->has_SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES,
                      SCO(L, SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES),
                      "SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES", &entries, what, sizeof(what))) {
                if (pow2(page) && page >= DOL_PAGE && entries >= 1 && entries <= DOL_MAX_SLOTS) {
                        c->nwindows = 1;
                        c->windows[0] = (struct ntbf_window){.base = a->win[0].base,
                                                             .size = (uint64_t)page * entries,
                                                             .slots = entries,
                                                             .slot_size = page,
                                                             .first_slot = 0};
                        fig_add(h, "window %" PRIu64 " bytes in %u slots from SCIQuery (ATT)",
                                (uint64_t)page * entries, entries);
                        return 0;
                }
                snprintf(what, sizeof(what),
                         "SCIQuery gave an ATT of %u entries of %u bytes, which the backend "
                         "cannot use (it needs 1 to %u entries of a power of two of at least "
                         "%u bytes)",
                         entries, page, DOL_MAX_SLOTS, (unsigned)DOL_PAGE);
        }
        const char *nn = t->nodes[a->node].name;
        uint64_t fs = 0;
        for (uint32_t w = 0; w < a->nwin; w++)
                fs += a->win[w].slots;
        const char *because;
        if (!file_figures_allowed(a, &because)) {
                snprintf(why, whylen,
                         "adapter %s.%s: the window's slots are the budget the core plans with, "
                         "and the dolphin backend takes them from SISCI, but %s; update "
                         "eXpressWare, or add dolphin: {file_figures: true} to the adapter in "
                         "the cluster file to plan with its window instead (%" PRIu64 " slots)%s%s",
                         nn, a->name, what, fs, because ? "; " : "", because ? because : "");
                return NTBF_EUNSUPPORTED;
        }
        snprintf(h->warning, sizeof(h->warning),
                 "adapter %s.%s: %s; the core plans with the cluster file's window (%" PRIu64
                 " slots), unchecked, because %s: more than the adapter holds fails when a slot "
                 "is programmed",
                 nn, a->name, what, fs, because);
        fig_add(h, "window: the cluster file's (%" PRIu64 " slots)", fs);
        return 0;
}

/*
 * The adapter's figures: what SCIQuery answers (ports, the address translation table: the
 * window's size and slots, the DMA limits). The window is a budget of the core and must come
 * from SISCI (att_window); ports and the DMA limits are the file's or the defaults where the
 * library does not say. The daemon holds them to the file (ntbf_caps_match), naming what
 * differs.
 */
static int compute_caps(struct ntbf_adapter_h *h, char *why, size_t whylen)
{
        struct dol_lib *L = h->L;
        const struct ntbf_topo *t = h->b->t;
        const struct ntbf_adapter *a = &t->adapters[h->adapter];
        struct ntbf_caps *c = &h->caps;
        unsigned u = 0;
        memset(c, 0, sizeof(*c));
        h->warning[0] = 0;
        h->figures[0] = 0;
        c->flags = NTBF_CAP_XLAT_INBOUND | NTBF_CAP_CPU_MAP | NTBF_CAP_MEM | NTBF_CAP_NO_RID_TABLE |
                   NTBF_CAP_IRQ | NTBF_CAP_DEV_MAP;
        c->ports = a->p.ports;
        if (L->has_SCI_Q_ADAPTER_NUMBER_OF_PORTS &&
            ntbf__dol_qadapter(L, h->ano, 0, SCO(L, SCI_Q_ADAPTER_NUMBER_OF_PORTS), &u) ==
                SCI_ERR_OK &&
            u >= 1 && u <= NTBF_MAX_ADAPTER_PORTS) {
                c->ports = u;
                fig_add(h, "ports %u from SCIQuery", u);
        } else {
                fig_add(h, "ports %u: the cluster file's", c->ports);
        }
        c->peers = count_peers(t, h->adapter);
        c->nwindows = a->nwin;
        for (uint32_t w = 0; w < a->nwin; w++)
                c->windows[w] = a->win[w];
        int r = att_window(h, why, whylen);
        if (r)
                return r;
        /* SISCI maps any page-aligned range of a segment: page granularity everywhere. */
        for (uint32_t w = 0; w < c->nwindows; w++) {
                struct ntbf_window *W = &c->windows[w];
                W->addr_align = W->size_align = DOL_PAGE;
                W->size_max = W->slot_size;
                W->flags &= ~(uint32_t)NTBF_WIN_NATURAL_ALIGN;
                c->slots += W->slots;
        }
        c->addr_bits = a->p.addr_bits;
        /* DMA queues are the library's (adapter engines or the system's); the file says how
         * many channels the core hands out. */
        if (a->p.dma_channels) {
                c->flags |= NTBF_CAP_DMA;
                c->dma_channels = a->p.dma_channels;
                c->dma_max_len = 64 * NTBF_MiB;
                c->dma_align = 1;
                if (L->has_SCI_Q_ADAPTER_DMA_MTU &&
                    ntbf__dol_qadapter(L, h->ano, 0, SCO(L, SCI_Q_ADAPTER_DMA_MTU), &u) ==
                        SCI_ERR_OK &&
                    u) {
                        c->dma_max_len = u;
                        fig_add(h, "DMA MTU %u from SCIQuery", u);
                }
                unsigned al = 1;
                if (L->has_SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT &&
                    ntbf__dol_qadapter(L, h->ano, 0, SCO(L, SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT),
                                       &u) == SCI_ERR_OK &&
                    pow2(u))
                        al = u;
                if (L->has_SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT &&
                    ntbf__dol_qadapter(L, h->ano, 0, SCO(L, SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT),
                                       &u) == SCI_ERR_OK &&
                    pow2(u) && u > al)
                        al = u;
                c->dma_align = al;
                fig_add(h, "DMA alignment %u", al);
        }
        return 0;
}

/*
 * Node ids of the nodes the adapter reaches through its cables and switches, the nodes at the
 * other end of its own cables first: where a slot's segment is looked for.
 */
static int peer_ids(const struct ntbf_topo *t, uint32_t adapter, uint32_t *ids, unsigned max,
                    unsigned *n)
{
        uint32_t self = t->adapters[adapter].node;
        *n = 0;
        bool *seen_sw = calloc(t->nswitches + 1, sizeof(bool));
        bool *seen_node = calloc(t->nnodes + 1, sizeof(bool));
        if (!seen_sw || !seen_node) {
                free(seen_sw);
                free(seen_node);
                return -ENOMEM;
        }
        seen_node[self] = true;
        /* Breadth first over switches; adapters found are the ends. */
        uint32_t *queue = calloc(t->nswitches + 1, sizeof(uint32_t));
        unsigned qh = 0, qt = 0;
        for (int pass = 0; pass < 2; pass++) {
                for (uint32_t p = 0; p < NTBF_MAX_ADAPTER_PORTS; p++) {
                        uint32_t l = t->adapters[adapter].link[p];
                        if (l == NTBF_NONE)
                                continue;
                        struct ntbf_port_ref o = ntbf_link_peer(
                            &t->links[l], (struct ntbf_port_ref){NTBF_PORT_ADAPTER, adapter, p});
                        if (pass == 0 && o.kind == NTBF_PORT_ADAPTER) {
                                uint32_t nn = t->adapters[o.obj].node;
                                if (!seen_node[nn] && *n < max) {
                                        seen_node[nn] = true;
                                        ids[(*n)++] = t->nodes[nn].id;
                                }
                        } else if (pass == 1 && o.kind == NTBF_PORT_SWITCH && queue &&
                                   !seen_sw[o.obj]) {
                                seen_sw[o.obj] = true;
                                queue[qt++] = o.obj;
                        }
                }
        }
        while (queue && qh < qt) {
                uint32_t sw = queue[qh++];
                for (uint32_t p = 0; p < t->switches[sw].p.ports; p++) {
                        uint32_t l = t->switches[sw].link[p];
                        if (l == NTBF_NONE)
                                continue;
                        struct ntbf_port_ref o = ntbf_link_peer(
                            &t->links[l], (struct ntbf_port_ref){NTBF_PORT_SWITCH, sw, p});
                        if (o.kind == NTBF_PORT_SWITCH && !seen_sw[o.obj]) {
                                seen_sw[o.obj] = true;
                                queue[qt++] = o.obj;
                        } else if (o.kind == NTBF_PORT_ADAPTER) {
                                uint32_t nn = t->adapters[o.obj].node;
                                if (!seen_node[nn] && *n < max) {
                                        seen_node[nn] = true;
                                        ids[(*n)++] = t->nodes[nn].id;
                                }
                        }
                }
        }
        free(queue);
        free(seen_sw);
        free(seen_node);
        return 0;
}

static void conn_drop(struct ntbf_adapter_h *h, struct dol_conn *c);

static void release_h(struct ntbf_adapter_h *h)
{
        if (!h)
                return;
        struct ntbf_backend *b = h->b;
        pthread_mutex_lock(&b->lock);
        for (struct ntbf_adapter_h **pp = &b->hs; *pp; pp = &(*pp)->next_h)
                if (*pp == h) {
                        *pp = h->next_h;
                        break;
                }
        pthread_mutex_unlock(&b->lock);
        ntbf__dol_irq_release(h);
        ntbf__dol_dma_release(h);
        ntbf__dol_dev_release(h);
        struct dol_lib *L = h->L;
        sci_error_t e;
        while (h->wmaps) {
                struct dol_wmap *m = h->wmaps;
                h->wmaps = m->next;
                for (unsigned i = 0; i < m->nparts; i++)
                        if (m->parts[i].map)
                                SCI(L, UnmapSegment, m->parts[i].map, 0, &e);
                munmap(m->va, m->size);
                for (unsigned i = 0; i < m->nparts; i++)
                        if (m->parts[i].c)
                                m->parts[i].c->refs--;
                free(m);
        }
        for (uint32_t k = 0; k < h->caps.slots; k++)
                if (h->cur && h->cur[k]) {
                        h->cur[k]->refs--;
                        h->cur[k] = NULL;
                }
        while (h->conns)
                conn_drop(h, h->conns);
        while (h->inslots) {
                struct dol_inslot *x = h->inslots;
                h->inslots = x->next;
                SCI(L, SetSegmentUnavailable, x->s.seg, h->ano, 0, &e);
                SCI(L, RemoveSegment, x->s.seg, SC(L, SCI_FLAG_FORCE_REMOVE), &e);
                free(x);
        }
        while (h->mems) {
                struct dol_seg *s = h->mems;
                h->mems = s->next;
                ntbf__dol_detach(h, s);
                free(s);
        }
        while (h->hmaps) {
                struct dol_seg *s = h->hmaps;
                h->hmaps = s->next;
                ntbf__dol_detach(h, s);
                free(s);
        }
        if (h->tfd >= 0)
                close(h->tfd);
        free(h->cur);
        free(h->hint);
        ntbf__dol_put(L);
        pthread_mutex_destroy(&h->lock);
        pthread_mutex_destroy(&h->irq_lock);
        free(h);
}

static int probe_checked(struct ntbf_backend *b, uint32_t adapter, struct ntbf_adapter_h **out,
                         char *why, size_t whylen)
{
        const struct ntbf_topo *t = b->t;
        if (!out || adapter >= t->nadapters)
                return -EINVAL;
        const struct ntbf_adapter *a = &t->adapters[adapter];
        if (b->node != NTBF_NONE && a->node != b->node)
                return -EPERM;
        if (adapter >= DOL_MAX_ADAPTERS || !a->nwin || a->nslots > DOL_MAX_SLOTS) {
                snprintf(why, whylen,
                         "adapter %s.%s: the backend numbers at most %u adapters of %u slots",
                         t->nodes[a->node].name, a->name, DOL_MAX_ADAPTERS, DOL_MAX_SLOTS);
                return NTBF_ECONFIG;
        }
        struct ntbf_adapter_h *h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->b = b;
        h->adapter = adapter;
        h->node = a->node;
        h->node_id = t->nodes[a->node].id;
        h->tfd = -1;
        pthread_mutex_init(&h->lock, NULL);
        pthread_mutex_init(&h->irq_lock, NULL);
        int r = ntbf__dol_get(t, a->node, &h->L, why, whylen);
        if (!r)
                r = adapter_no(h->L, t, adapter, &h->ano, why, whylen);
        if (!r)
                r = peer_ids(t, adapter, h->peer_id, 64, &h->npeer_ids);
        if (!r)
                r = compute_caps(h, why, whylen);
        if (!r) {
                h->cur = calloc(h->caps.slots, sizeof(*h->cur));
                h->hint = calloc(h->caps.slots, sizeof(*h->hint));
                if (!h->cur || !h->hint)
                        r = -ENOMEM;
        }
        if (r) {
                free(h->cur);
                free(h->hint);
                if (h->L)
                        ntbf__dol_put(h->L);
                pthread_mutex_destroy(&h->lock);
                pthread_mutex_destroy(&h->irq_lock);
                free(h);
                return r;
        }
        for (uint32_t p = 0; p < h->caps.ports && p < NTBF_MAX_ADAPTER_PORTS; p++) {
                unsigned up = 0;
                h->up[p] =
                    ntbf__dol_qadapter(h->L, h->ano, p, SC(h->L, SCI_Q_ADAPTER_LINK_OPERATIONAL),
                                       &up) == SCI_ERR_OK &&
                    up;
        }
        pthread_mutex_lock(&b->lock);
        h->next_h = b->hs;
        b->hs = h;
        pthread_mutex_unlock(&b->lock);
        *out = h;
        return 0;
}

static int dol_probe(struct ntbf_backend *b, uint32_t adapter, struct ntbf_adapter_h **out)
{
        char why[512];
        return probe_checked(b, adapter, out, why, sizeof(why));
}

static void dol_release(struct ntbf_adapter_h *h)
{
        release_h(h);
}

/*
 * A whole cluster on one machine (ntbfab up, the conformance suite) is possible only where
 * each process can be told which node of the library's fabric it is: NTBFAB_SISCI_ENV with
 * %n or %i, as with ntbfab's own libsisci standing for Dolphin's over a simulated cluster
 * (docs/dolphin.md). Dolphin's library serves the host it runs on: there, one ntbfabd runs on
 * each node. Nothing is made in dir: the fabric exists on its own.
 */
static int dol_create(const struct ntbf_topo *t, const char *dir, char *why, size_t whylen)
{
        (void)t;
        (void)dir;
        const char *env = getenv("NTBFAB_SISCI_ENV");
        if (!env || (!strstr(env, "%n") && !strstr(env, "%i"))) {
                snprintf(why, whylen,
                         "the dolphin backend runs one node per host (Dolphin's library serves "
                         "the host it runs on): start ntbfabd on each node; a cluster on one "
                         "machine needs a SISCI library that each daemon can tell its node to "
                         "(NTBFAB_SISCI_ENV with %%n, docs/dolphin.md)");
                return NTBF_EUNSUPPORTED;
        }
        char path[PATH_MAX];
        return ntbf__dol_find(path, sizeof(path), why, whylen);
}

static int dol_destroy(const struct ntbf_topo *t, const char *dir)
{
        (void)t;
        (void)dir;
        return 0;
}

static int dol_open(const struct ntbf_backend_env *env, struct ntbf_backend **out, char *why,
                    size_t whylen)
{
        char scratch[512];
        if (!why || !whylen) {
                why = scratch;
                whylen = sizeof(scratch);
        }
        why[0] = 0;
        if (!env || !env->topo || !out) {
                snprintf(why, whylen, "opening needs a finalized topology");
                return -EINVAL;
        }
        char path[PATH_MAX];
        int r = ntbf__dol_find(path, sizeof(path), why, whylen);
        if (r)
                return r;
        struct ntbf_backend *b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->t = env->topo;
        b->node = env->node;
        pthread_mutex_init(&b->lock, NULL);
        /* A node's daemon hears at once what is wrong with its adapters: the library, its
         * environment, the node id, the adapter numbers. The library stays up meanwhile. */
        if (b->node != NTBF_NONE && b->node < b->t->nnodes) {
                const struct ntbf_node *n = &b->t->nodes[b->node];
                for (uint32_t i = 0; i < n->nadapters && !r; i++) {
                        struct ntbf_adapter_h *h = NULL;
                        r = probe_checked(b, n->adapters[i], &h, why, whylen);
                        /* The owner of the adapters (the daemon) says where its figures came
                         * from, and loudly what stands for SISCI's; its programs do not. */
                        if (!r && !env->relay) {
                                fprintf(stderr, "ntbfab dolphin: adapter %s.%s: figures %s\n",
                                        n->name, b->t->adapters[n->adapters[i]].name, h->figures);
                                if (h->warning[0])
                                        fprintf(stderr, "ntbfab dolphin: WARNING: %s\n",
                                                h->warning);
                        }
                        if (!r) {
                                if (!b->keep) {
                                        b->keep = h->L;
                                        ntbf__dol_ref(h->L);
                                }
                                release_h(h);
                        }
                }
        }
        if (r) {
                if (!why[0])
                        snprintf(why, whylen, "%s", ntbf_strerror(r));
                ntbf__dol_put(b->keep);
                pthread_mutex_destroy(&b->lock);
                free(b);
                return r;
        }
        *out = b;
        return 0;
}

static void dol_close(struct ntbf_backend *b)
{
        if (!b)
                return;
        ntbf__dol_put(b->keep);
        pthread_mutex_destroy(&b->lock);
        free(b);
}

static int dol_caps(struct ntbf_adapter_h *h, struct ntbf_caps *c)
{
        if (!c)
                return -EINVAL;
        *c = h->caps;
        return 0;
}

/* ---- link and events ---------------------------------------------------------------------- */

static int dol_link_state(struct ntbf_adapter_h *h, uint32_t port, bool *up)
{
        if (!up || port >= h->caps.ports)
                return -EINVAL;
        unsigned u = 0;
        sci_error_t e =
            ntbf__dol_qadapter(h->L, h->ano, port, SC(h->L, SCI_Q_ADAPTER_LINK_OPERATIONAL), &u);
        *up = e == SCI_ERR_OK && u;
        return 0;
}

static int dol_set_events(struct ntbf_adapter_h *h, const struct ntbf_event_ops *ops, void *ctx)
{
        h->ops = ops;
        h->ctx = ctx;
        return 0;
}

static int dol_event_fd(struct ntbf_adapter_h *h)
{
        /* SISCI tells a process nothing of its adapters' links: a timer looks. */
        return ntbf__polltimer_fd(&h->tfd, POLL_MS);
}

static int dol_process_events(struct ntbf_adapter_h *h)
{
        ntbf__polltimer_drain(h->tfd);
        int n = 0;
        for (uint32_t p = 0; p < h->caps.ports && p < NTBF_MAX_ADAPTER_PORTS; p++) {
                bool up = false;
                dol_link_state(h, p, &up);
                if (up == h->up[p])
                        continue;
                h->up[p] = up;
                if (h->ops && h->ops->link_event)
                        h->ops->link_event(h->ctx, p, up);
                n++;
        }
        return n;
}

/* ---- slots: segments on the memory's host ------------------------------------------------- */

/* Window w of topology adapter a, with the rules this backend applies (page granularity). */
static int topo_slot_window(const struct ntbf_adapter *a, uint32_t slot, struct ntbf_window *w)
{
        for (uint32_t i = 0; i < a->nwin; i++)
                if (slot - a->win[i].first_slot < a->win[i].slots) {
                        *w = a->win[i];
                        w->addr_align = w->size_align = DOL_PAGE;
                        w->size_max = w->slot_size;
                        w->flags &= ~(uint32_t)NTBF_WIN_NATURAL_ALIGN;
                        return 0;
                }
        return -EINVAL;
}

static void inslot_remove(struct ntbf_adapter_h *h, struct dol_inslot *x)
{
        struct dol_lib *L = h->L;
        sci_error_t e = SCI_ERR_OK;
        SCI(L, SetSegmentUnavailable, x->s.seg, h->ano, 0, &e);
        e = SCI_ERR_OK;
        SCI(L, RemoveSegment, x->s.seg, 0, &e);
        if (e != SCI_ERR_OK) /* still connected: the connectors lose it */
                SCI(L, RemoveSegment, x->s.seg, SC(L, SCI_FLAG_FORCE_REMOVE), &e);
}

static struct dol_inslot **inslot_find(struct ntbf_adapter_h *h, uint32_t peer, uint32_t slot)
{
        for (struct dol_inslot **pp = &h->inslots; *pp; pp = &(*pp)->next)
                if ((*pp)->adapter == peer && (*pp)->slot == slot)
                        return pp;
        return NULL;
}

static int peer_slot_ok(struct ntbf_adapter_h *h, uint32_t peer, uint32_t slot,
                        struct ntbf_window *w)
{
        const struct ntbf_topo *t = h->b->t;
        if (peer >= t->nadapters || t->adapters[peer].node == h->node || peer >= DOL_MAX_ADAPTERS ||
            slot >= t->adapters[peer].nslots || slot >= DOL_MAX_SLOTS)
                return -EINVAL;
        return topo_slot_window(&t->adapters[peer], slot, w);
}

static int dol_peer_xlat_set(struct ntbf_adapter_h *h, uint32_t peer, uint32_t slot,
                             uint64_t local_addr, uint64_t size)
{
        struct ntbf_window w;
        int r = peer_slot_ok(h, peer, slot, &w);
        if (r)
                return r;
        if (slot - w.first_slot < w.reserved)
                return -EPERM;
        const struct ntbf_adapter *pa = &h->b->t->adapters[peer];
        if (!ntbf_window_xlat_ok(&w, local_addr, size) ||
            (pa->p.addr_bits < 64 &&
             (local_addr >> pa->p.addr_bits || (local_addr + size - 1) >> pa->p.addr_bits)))
                return -EINVAL;
        struct dol_lib *L = h->L;
        sci_error_t e = SCI_ERR_OK;
        pthread_mutex_lock(&h->lock);
        struct dol_inslot **pp = inslot_find(h, peer, slot), *x;
        if (pp) { /* programmed again: the old segment goes, its connectors lose it */
                x = *pp;
                *pp = x->next;
                inslot_remove(h, x);
        } else {
                x = calloc(1, sizeof(*x));
        }
        if (!x) {
                pthread_mutex_unlock(&h->lock);
                return -ENOMEM;
        }
        *x = (struct dol_inslot){.adapter = peer, .slot = slot};
        x->s.id = DOL_SLOT_ID(peer, slot);
        x->s.bus = local_addr;
        x->s.size = size;
        SCI(L, CreateSegment, L->sd, &x->s.seg, x->s.id, size, NULL, NULL, SC(L, SCI_FLAG_EMPTY),
            &e);
        if (e != SCI_ERR_OK) {
                /* Held by another process of this host (one programmer per slot). */
                r = e == SCI_ERR_SEGMENTID_USED ? -EBUSY : ntbf__dol_err(e);
                goto fail;
        }
        SCI(L, AttachPhysicalMemory, local_addr, NULL, 0, size, x->s.seg, 0, &e);
        if (e != SCI_ERR_OK) {
                /* Not memory of this host SISCI can make a segment of. */
                r = NTBF_EUNREACHABLE;
                goto fail_seg;
        }
        SCI(L, PrepareSegment, x->s.seg, h->ano, 0, &e);
        if (e == SCI_ERR_OK)
                SCI(L, SetSegmentAvailable, x->s.seg, h->ano, 0, &e);
        if (e != SCI_ERR_OK) {
                r = ntbf__dol_err(e);
                goto fail_seg;
        }
        x->next = h->inslots;
        h->inslots = x;
        pthread_mutex_unlock(&h->lock);
        return 0;
fail_seg:
        SCI(L, RemoveSegment, x->s.seg, 0, &e);
fail:
        pthread_mutex_unlock(&h->lock);
        free(x);
        return r ? r : -EIO;
}

static int dol_peer_xlat_clear(struct ntbf_adapter_h *h, uint32_t peer, uint32_t slot)
{
        struct ntbf_window w;
        int r = peer_slot_ok(h, peer, slot, &w);
        if (r)
                return r;
        pthread_mutex_lock(&h->lock);
        struct dol_inslot **pp = inslot_find(h, peer, slot);
        if (pp) {
                struct dol_inslot *x = *pp;
                *pp = x->next;
                inslot_remove(h, x);
                free(x);
        }
        pthread_mutex_unlock(&h->lock);
        return 0; /* not this process's: nothing of it to clear */
}

/* ---- connections to slots ----------------------------------------------------------------- */

int ntbf__dol_win_slot(struct ntbf_adapter_h *h, uint64_t addr, uint32_t *win, uint32_t *slot,
                       uint64_t *in_slot)
{
        uint64_t off;
        int w = ntbf_caps_addr_window(&h->caps, addr, &off);
        if (w < 0)
                return -EFAULT;
        const struct ntbf_window *W = &h->caps.windows[w];
        *win = (uint32_t)w;
        *slot = W->first_slot + (uint32_t)(off / W->slot_size);
        *in_slot = off % W->slot_size;
        return 0;
}

static void conn_drop(struct ntbf_adapter_h *h, struct dol_conn *c)
{
        struct dol_lib *L = h->L;
        sci_error_t e;
        for (struct dol_conn **pp = &h->conns; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
        if (c->imap)
                SCI(L, UnmapSegment, c->imap, 0, &e);
        SCI(L, DisconnectSegment, c->rseg, 0, &e);
        free(c);
}

void ntbf__dol_conn_put(struct ntbf_adapter_h *h, struct dol_conn *c)
{
        if (c && --c->refs == 0)
                conn_drop(h, c);
}

/* Whether the segment behind c went away (its owner removed it, or died). */
static bool conn_gone(struct ntbf_adapter_h *h, struct dol_conn *c)
{
        struct dol_lib *L = h->L;
        for (;;) {
                sci_error_t e = SCI_ERR_OK, st = SCI_ERR_OK;
                sci_segment_cb_reason_t why =
                    SCI(L, WaitForRemoteSegmentEvent, c->rseg, &st, 0, 0, &e);
                if (e != SCI_ERR_OK)
                        return false; /* no event waiting */
                if (why == SCI_CB_DISCONNECT || why == SCI_CB_LOST)
                        return true;
        }
}

struct dol_conn *ntbf__dol_conn_get(struct ntbf_adapter_h *h, uint32_t slot, int *err)
{
        struct dol_lib *L = h->L;
        *err = 0;
        if (slot >= h->caps.slots) {
                *err = -EINVAL;
                return NULL;
        }
        struct dol_conn *c = h->cur[slot];
        if (c && conn_gone(h, c)) {
                c->stale = true;
                h->cur[slot] = NULL;
                ntbf__dol_conn_put(h, c);
                c = NULL;
        }
        if (c) {
                c->refs++;
                return c;
        }
        uint32_t id = DOL_SLOT_ID(h->adapter, slot);
        uint32_t tries[65];
        unsigned nt = 0;
        if (h->hint[slot])
                tries[nt++] = h->hint[slot];
        for (unsigned i = 0; i < h->npeer_ids; i++)
                if (h->peer_id[i] != h->hint[slot])
                        tries[nt++] = h->peer_id[i];
        int r = -ENOTCONN;
        for (unsigned i = 0; i < nt; i++) {
                sci_remote_segment_t rseg;
                sci_error_t e = SCI_ERR_OK;
                SCI(L, ConnectSegment, L->sd, &rseg, tries[i], id, h->ano, NULL, NULL, 0, 0, &e);
                if (e != SCI_ERR_OK) {
                        int x = ntbf__dol_err(e);
                        if (x != NTBF_ENOTFOUND && x != -ECONNREFUSED && x != -ETIMEDOUT)
                                r = x; /* not just absent there: say why */
                        continue;
                }
                c = calloc(1, sizeof(*c));
                if (!c) {
                        SCI(L, DisconnectSegment, rseg, 0, &e);
                        *err = -ENOMEM;
                        return NULL;
                }
                *c = (struct dol_conn){.rseg = rseg,
                                       .slot = slot,
                                       .node_id = tries[i],
                                       .id = id,
                                       .size = SCI(L, GetRemoteSegmentSize, rseg),
                                       .refs = 2};
                c->next = h->conns;
                h->conns = c;
                h->cur[slot] = c;
                h->hint[slot] = tries[i];
                return c;
        }
        *err = r;
        return NULL;
}

uint8_t *ntbf__dol_conn_imap(struct ntbf_adapter_h *h, struct dol_conn *c)
{
        if (c->iaddr)
                return c->iaddr;
        struct dol_lib *L = h->L;
        sci_error_t e = SCI_ERR_OK;
        volatile void *p = SCI(L, MapRemoteSegment, c->rseg, &c->imap, 0, c->size, NULL, 0, &e);
        if (e != SCI_ERR_OK || !p) {
                c->imap = NULL;
                return NULL;
        }
        c->iaddr = (uint8_t *)(uintptr_t)p;
        return c->iaddr;
}

/* ---- CPU maps ----------------------------------------------------------------------------- */

/* A private page of all ones over [va, + len): what a dropped access reads. */
static int ones(uint8_t *va, uint64_t len, int prot)
{
        void *p =
            mmap(va, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (p == MAP_FAILED)
                return -errno;
        memset(p, 0xff, len);
        if (prot != (PROT_READ | PROT_WRITE))
                mprotect(p, len, prot);
        return 0;
}

static void wmap_undo(struct ntbf_adapter_h *h, struct dol_wmap *m)
{
        sci_error_t e;
        for (unsigned i = 0; i < m->nparts; i++) {
                if (m->parts[i].map)
                        SCI(h->L, UnmapSegment, m->parts[i].map, 0, &e);
                ntbf__dol_conn_put(h, m->parts[i].c);
        }
}

static int dol_map_window(struct ntbf_adapter_h *h, uint32_t win, uint64_t offset, uint64_t size,
                          unsigned flags, void **addr)
{
        bool fixed = flags & NTBF_MAP_FIXED;
        if (!addr || win >= h->caps.nwindows || !size || offset % DOL_PAGE || size % DOL_PAGE ||
            offset >= h->caps.windows[win].size || size > h->caps.windows[win].size - offset ||
            (fixed && (!*addr || (uintptr_t)*addr % DOL_PAGE)))
                return -EINVAL;
        const struct ntbf_window *W = &h->caps.windows[win];
        struct dol_lib *L = h->L;
        uint32_t k0 = (uint32_t)(offset / W->slot_size),
                 k1 = (uint32_t)((offset + size - 1) / W->slot_size);
        struct dol_wmap *m = calloc(1, sizeof(*m) + (k1 - k0 + 1) * sizeof(struct dol_part));
        if (!m)
                return -ENOMEM;
        int prot = flags & NTBF_MAP_READONLY ? PROT_READ : PROT_READ | PROT_WRITE;
        uint8_t *va =
            fixed ? *addr
                  : mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (va == MAP_FAILED) {
                free(m);
                return -ENOMEM;
        }
        m->va = va;
        m->size = size;
        unsigned mf = SC(L, SCI_FLAG_FIXED_MAP_ADDR);
        if (flags & NTBF_MAP_UNCACHED)
                mf |= SC(L, SCI_FLAG_IO_MAP_IOSPACE);
        if (flags & NTBF_MAP_READONLY)
                mf |= SC(L, SCI_FLAG_READONLY_MAP);
        int r = 0;
        pthread_mutex_lock(&h->lock);
        for (uint32_t k = k0; k <= k1 && !r; k++) {
                uint64_t s0 = (uint64_t)k * W->slot_size, lo = offset > s0 ? offset : s0;
                uint64_t hi = offset + size < s0 + W->slot_size ? offset + size : s0 + W->slot_size;
                uint64_t mapped = 0;
                int ce = 0;
                struct dol_conn *c = ntbf__dol_conn_get(h, W->first_slot + k, &ce);
                if (c && lo - s0 < c->size) {
                        uint64_t len =
                            hi - lo < c->size - (lo - s0) ? hi - lo : c->size - (lo - s0);
                        struct dol_part *pt = &m->parts[m->nparts++];
                        pt->c = c;
                        sci_error_t e = SCI_ERR_OK;
                        SCI(L, MapRemoteSegment, c->rseg, &pt->map, lo - s0, len,
                            va + (lo - offset), mf, &e);
                        if (e != SCI_ERR_OK) {
                                pt->map = NULL;
                                r = ntbf__dol_err(e);
                                break;
                        }
                        mapped = len;
                } else if (c) {
                        ntbf__dol_conn_put(h, c);
                }
                if (lo + mapped < hi)
                        r = ones(va + (lo + mapped - offset), hi - lo - mapped, prot);
        }
        if (!r) {
                m->next = h->wmaps;
                h->wmaps = m;
        } else {
                wmap_undo(h, m);
        }
        pthread_mutex_unlock(&h->lock);
        if (r) {
                if (fixed) /* the caller's reservation, as it was */
                        mmap(va, size, PROT_NONE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
                else
                        munmap(va, size);
                free(m);
                return r;
        }
        *addr = va;
        return 0;
}

static int dol_unmap_window(struct ntbf_adapter_h *h, void *addr, uint64_t size)
{
        struct dol_wmap *m = NULL;
        pthread_mutex_lock(&h->lock);
        for (struct dol_wmap **pp = &h->wmaps; *pp; pp = &(*pp)->next)
                if ((*pp)->va == addr && (*pp)->size == size) {
                        m = *pp;
                        *pp = m->next;
                        wmap_undo(h, m);
                        break;
                }
        pthread_mutex_unlock(&h->lock);
        if (!m)
                return -EINVAL;
        munmap(m->va, m->size);
        free(m);
        return 0;
}

/*
 * A posted write through the window, as a store through the slot's mapping. A 4-byte
 * aligned write is one store; written to an interrupt vector of the far host it also rings
 * that host's doorbell interrupt (irq.c), which a mapping cannot do.
 */
static int dol_window_write(struct ntbf_adapter_h *h, uint32_t win, uint64_t offset,
                            const void *buf, uint64_t len)
{
        if (!buf || !len || win >= h->caps.nwindows || offset >= h->caps.windows[win].size ||
            len > h->caps.windows[win].size - offset)
                return -EINVAL;
        const struct ntbf_window *W = &h->caps.windows[win];
        const uint8_t *src = buf;
        int r = 0;
        pthread_mutex_lock(&h->lock);
        for (uint64_t pos = offset; pos < offset + len;) {
                uint32_t k = W->first_slot + (uint32_t)(pos / W->slot_size);
                uint64_t in = pos % W->slot_size, n = W->slot_size - in;
                if (n > offset + len - pos)
                        n = offset + len - pos;
                int ce = 0;
                struct dol_conn *c = ntbf__dol_conn_get(h, k, &ce);
                uint8_t *p = c && in < c->size ? ntbf__dol_conn_imap(h, c) : NULL;
                if (c && n > c->size - in && in < c->size)
                        n = c->size - in;
                if (!p) {
                        r = NTBF_EUNPROGRAMMED; /* this part is dropped */
                } else if (n == 4 && !((uintptr_t)(p + in) % 4)) {
                        uint32_t v;
                        memcpy(&v, src + (pos - offset), 4);
                        atomic_store((_Atomic uint32_t *)(void *)(p + in), v);
                        if (len == 4)
                                ntbf__dol_irq_doorbell(h, c, in);
                } else {
                        memcpy(p + in, src + (pos - offset), n);
                        atomic_thread_fence(memory_order_release);
                }
                ntbf__dol_conn_put(h, c);
                pos += n;
        }
        pthread_mutex_unlock(&h->lock);
        return r;
}

/* ---- this host's memory --------------------------------------------------------------------- */

int ntbf__dol_attach(struct ntbf_adapter_h *h, uint64_t addr, uint64_t size, bool map,
                     struct dol_seg *s)
{
        struct dol_lib *L = h->L;
        sci_error_t e = SCI_ERR_OK;
        memset(s, 0, sizeof(*s));
        s->bus = addr;
        s->size = size;
        SCI(L, CreateSegment, L->sd, &s->seg, 0, size, NULL, NULL,
            SC(L, SCI_FLAG_EMPTY) | SC(L, SCI_FLAG_AUTO_ID), &e);
        if (e != SCI_ERR_OK)
                return ntbf__dol_err(e);
        SCI(L, AttachPhysicalMemory, addr, NULL, 0, size, s->seg, 0, &e);
        if (e == SCI_ERR_OK)
                SCI(L, PrepareSegment, s->seg, h->ano, 0, &e);
        if (e == SCI_ERR_OK)
                SCI(L, SetSegmentAvailable, s->seg, h->ano, 0, &e);
        if (e == SCI_ERR_OK && map) {
                void *p = SCI(L, MapLocalSegment, s->seg, &s->map, 0, size, NULL, 0, &e);
                s->addr = p;
        }
        if (e != SCI_ERR_OK) {
                int r = ntbf__dol_err(e);
                sci_error_t e2;
                s->map = NULL;
                SCI(L, RemoveSegment, s->seg, 0, &e2);
                return r == -EINVAL || r == -EIO || r == NTBF_EUNSUPPORTED ? -EFAULT : r;
        }
        s->id = SCI(L, GetLocalSegmentId, s->seg);
        return 0;
}

void ntbf__dol_detach(struct ntbf_adapter_h *h, struct dol_seg *s)
{
        struct dol_lib *L = h->L;
        sci_error_t e;
        if (s->map)
                SCI(L, UnmapSegment, s->map, 0, &e);
        s->map = NULL;
        SCI(L, SetSegmentUnavailable, s->seg, h->ano, 0, &e);
        e = SCI_ERR_OK;
        SCI(L, RemoveSegment, s->seg, 0, &e);
        if (e != SCI_ERR_OK)
                SCI(L, RemoveSegment, s->seg, SC(L, SCI_FLAG_FORCE_REMOVE), &e);
}

int ntbf__dol_mem_alloc(struct ntbf_adapter_h *h, uint64_t size, uint64_t align,
                        struct ntbf_mem *out)
{
        if (!out || !size || (align & (align - 1)) || size > UINT64_MAX / 2)
                return -EINVAL;
        if (align < DOL_PAGE)
                align = DOL_PAGE;
        size = (size + DOL_PAGE - 1) & ~(DOL_PAGE - 1);
        uint64_t whole = size + (align - DOL_PAGE); /* room to align the bus address */
        struct dol_lib *L = h->L;
        struct dol_seg *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        sci_error_t e = SCI_ERR_OK;
        SCI(L, CreateSegment, L->sd, &s->seg, 0, whole, NULL, NULL, SC(L, SCI_FLAG_AUTO_ID), &e);
        if (e != SCI_ERR_OK) {
                free(s);
                return e == SCI_ERR_NOSPC ? -ENOMEM : ntbf__dol_err(e);
        }
        s->size = whole;
        void *p = SCI(L, MapLocalSegment, s->seg, &s->map, 0, whole, NULL, 0, &e);
        sci_query_local_segment_t q = {.segment = s->seg,
                                       .subcommand = SC(L, SCI_Q_LOCAL_SEGMENT_PHYS_ADDR)};
        if (e == SCI_ERR_OK)
                SCI(L, Query, SC(L, SCI_Q_LOCAL_SEGMENT), &q, 0, &e);
        /* Available on the adapter: devices map it, DMA reaches it. */
        if (e == SCI_ERR_OK)
                SCI(L, PrepareSegment, s->seg, h->ano, 0, &e);
        if (e == SCI_ERR_OK)
                SCI(L, SetSegmentAvailable, s->seg, h->ano, 0, &e);
        if (e != SCI_ERR_OK || !p) {
                int r = ntbf__dol_err(e);
                sci_error_t e2;
                if (s->map)
                        SCI(L, UnmapSegment, s->map, 0, &e2);
                SCI(L, RemoveSegment, s->seg, 0, &e2);
                free(s);
                return r ? r : -EIO;
        }
        s->addr = p;
        s->bus = q.data.ioaddr;
        s->id = SCI(L, GetLocalSegmentId, s->seg);
        uint64_t delta = (align - s->bus % align) % align;
        memset(s->addr, 0, whole);
        pthread_mutex_lock(&h->lock);
        pthread_mutex_lock(&h->b->lock); /* other handles search h->mems (mem_find) */
        s->next = h->mems;
        h->mems = s;
        pthread_mutex_unlock(&h->b->lock);
        for (unsigned i = 0; i < 16 && i < h->nfreed; i++) /* live again */
                if (h->freed[i].bus < s->bus + whole && s->bus < h->freed[i].bus + h->freed[i].size)
                        h->freed[i].size = 0;
        pthread_mutex_unlock(&h->lock);
        *out = (struct ntbf_mem){s->addr + delta, size, s->bus + delta, -1, 0};
        return 0;
}

int ntbf__dol_mem_free(struct ntbf_adapter_h *h, struct ntbf_mem *m)
{
        if (!m)
                return -EINVAL;
        struct dol_seg *s = NULL;
        int r = -EINVAL;
        pthread_mutex_lock(&h->lock);
        for (struct dol_seg **pp = &h->mems; *pp; pp = &(*pp)->next) {
                struct dol_seg *x = *pp;
                if ((uint8_t *)m->addr >= x->addr && (uint8_t *)m->addr < x->addr + x->size) {
                        if (x->devmaps) {
                                r = -EBUSY; /* a device still reaches it */
                                break;
                        }
                        pthread_mutex_lock(&h->b->lock);
                        *pp = x->next;
                        pthread_mutex_unlock(&h->b->lock);
                        s = x;
                        r = 0;
                        break;
                }
        }
        if (s) {
                /* Remembered: mapping it again by address is refused (mem_map). */
                h->freed[h->nfreed % 16] = (struct dol_freed){s->bus, s->size};
                h->nfreed++;
        }
        pthread_mutex_unlock(&h->lock);
        if (s) {
                ntbf__dol_detach(h, s);
                free(s);
                m->fd = -1;
        }
        return r;
}

struct dol_seg *ntbf__dol_mem_find(struct ntbf_adapter_h *self, uint64_t bus, uint64_t len,
                                   struct ntbf_adapter_h **owner)
{
        struct ntbf_backend *b = self->b;
        struct dol_seg *found = NULL;
        pthread_mutex_lock(&b->lock);
        for (struct ntbf_adapter_h *h = b->hs; h && !found; h = h->next_h)
                for (struct dol_seg *s = h->mems; s && !found && h->node == self->node; s = s->next)
                        if (bus >= s->bus && len <= s->size && bus - s->bus <= s->size - len) {
                                found = s;
                                if (owner)
                                        *owner = h;
                        }
        pthread_mutex_unlock(&b->lock);
        return found;
}

/* This host's memory mapped into the process: an attached segment, mapped. */
static int host_map(struct ntbf_adapter_h *h, uint64_t addr, uint64_t size, void **out)
{
        if (!out || !size || addr + size < addr)
                return -EINVAL;
        /* Memory for export this process freed is not live any more. SISCI cannot tell which
         * memory another process of the host allocated: that is mapped when SISCI can. */
        pthread_mutex_lock(&h->lock);
        bool freed = false;
        for (unsigned i = 0; i < 16 && i < h->nfreed; i++)
                freed |= h->freed[i].size && addr < h->freed[i].bus + h->freed[i].size &&
                         h->freed[i].bus < addr + size;
        pthread_mutex_unlock(&h->lock);
        if (freed && !ntbf__dol_mem_find(h, addr, size, NULL))
                return -EFAULT;
        uint64_t lo = addr & ~(DOL_PAGE - 1), hi = (addr + size + DOL_PAGE - 1) & ~(DOL_PAGE - 1);
        struct dol_seg *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        int r = ntbf__dol_attach(h, lo, hi - lo, true, s);
        if (r) {
                free(s);
                return r;
        }
        pthread_mutex_lock(&h->lock);
        s->next = h->hmaps;
        h->hmaps = s;
        pthread_mutex_unlock(&h->lock);
        *out = s->addr + (addr - lo);
        return 0;
}

static int host_unmap(struct ntbf_adapter_h *h, void *addr, uint64_t size)
{
        struct dol_seg *s = NULL;
        pthread_mutex_lock(&h->lock);
        for (struct dol_seg **pp = &h->hmaps; *pp; pp = &(*pp)->next)
                if ((uint8_t *)addr >= (*pp)->addr &&
                    (uint8_t *)addr + size <= (*pp)->addr + (*pp)->size) {
                        s = *pp;
                        *pp = s->next;
                        break;
                }
        pthread_mutex_unlock(&h->lock);
        if (!s)
                return -EINVAL;
        ntbf__dol_detach(h, s);
        free(s);
        return 0;
}

/* The segment of list s whose mapping in this process holds [a, a + size): its bus address. */
static bool seg_bus(const struct dol_seg *s, const uint8_t *a, uint64_t size, uint64_t *bus)
{
        for (; s; s = s->next)
                if (s->addr && a >= s->addr && (uint64_t)(a - s->addr) < s->size &&
                    size <= s->size - (uint64_t)(a - s->addr)) {
                        *bus = s->bus + (uint64_t)(a - s->addr);
                        return true;
                }
        return false;
}

/* The bus address of memory this process maps: memory for export of any handle of the node
 * (under the backend's lock, as ntbf__dol_mem_find reads it), or a host mapping of self. */
static int host_bus(struct ntbf_adapter_h *self, const void *addr, uint64_t size, uint64_t *bus)
{
        if (!addr || !size || !bus)
                return -EINVAL;
        bool found = false;
        pthread_mutex_lock(&self->b->lock);
        for (struct ntbf_adapter_h *h = self->b->hs; h && !found; h = h->next_h)
                found = h->node == self->node && seg_bus(h->mems, addr, size, bus);
        pthread_mutex_unlock(&self->b->lock);
        if (!found) {
                pthread_mutex_lock(&self->lock);
                found = seg_bus(self->hmaps, addr, size, bus);
                pthread_mutex_unlock(&self->lock);
        }
        return found ? 0 : -EFAULT;
}

/* ---- the vtable ------------------------------------------------------------------------------ */

const struct ntbf_backend_ops ntbf__dolphin_ops = {
    .name = "dolphin",
    .create = dol_create,
    .destroy = dol_destroy,
    .open = dol_open,
    .close = dol_close,
    .probe = dol_probe,
    .release = dol_release,
    .caps = dol_caps,
    .link_state = dol_link_state,
    .set_events = dol_set_events,
    .event_fd = dol_event_fd,
    .process_events = dol_process_events,
    .peer_xlat_set = dol_peer_xlat_set,
    .peer_xlat_clear = dol_peer_xlat_clear,
    .map_window = dol_map_window,
    .unmap_window = dol_unmap_window,
    .window_write = dol_window_write,
    .mem_alloc = ntbf__dol_mem_alloc,
    .mem_free = ntbf__dol_mem_free,
    .mem_map = host_map,
    .mem_unmap = host_unmap,
    .host_map = host_map,
    .host_unmap = host_unmap,
    .dma_submit = ntbf__dol_dma_submit,
    .dma_poll = ntbf__dol_dma_poll,
    .cfg_read = ntbf__dol_cfg_read,
    .cfg_write = ntbf__dol_cfg_write,
    .dev_map = ntbf__dol_dev_map,
    .dev_unmap = ntbf__dol_dev_unmap,
    .irq_alloc = ntbf__dol_irq_alloc,
    .irq_free = ntbf__dol_irq_free,
    .irq_trigger = ntbf__dol_irq_trigger,
    .host_bus = host_bus,
};
