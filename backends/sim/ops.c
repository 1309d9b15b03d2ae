/* backends/sim/ops.c: the simulated fabric's struct ntbf_backend_ops ("sim"). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "cfgspace.h"
#include "sim.h"

static struct ntbf_sim *S(struct ntbf_adapter_h *h)
{
        return h->s;
}

static const struct ntbf_adapter *A(struct ntbf_adapter_h *h)
{
        return &h->s->t->adapters[h->adapter];
}

/* ---- instance and adapters ------------------------------------------------------------------- */

static int sim_create(const struct ntbf_topo *t, const char *dir, char *why, size_t whylen)
{
        return ntbf_sim_fabric_create(t, dir, why, whylen);
}

static int sim_destroy(const struct ntbf_topo *t, const char *dir)
{
        (void)t;
        return ntbf_sim_fabric_destroy(dir);
}

static int sim_open(const struct ntbf_backend_env *env, struct ntbf_backend **out, char *why,
                    size_t whylen)
{
        return ntbf_sim_attach(env, out, why, whylen);
}

static void sim_close(struct ntbf_backend *b)
{
        ntbf__sim_close(ntbf__sim_of(b));
}

static bool port_up(struct ntbf_sim *s, uint32_t a, uint32_t p)
{
        uint32_t l = s->t->adapters[a].link[p];
        return l != NTBF_NONE && ntbf__sim_link_up(s, l);
}

static int sim_probe(struct ntbf_backend *b, uint32_t adapter, struct ntbf_adapter_h **out)
{
        struct ntbf_sim *s = ntbf__sim_of(b);
        if (!s || !out || adapter >= s->t->nadapters)
                return -EINVAL;
        if (s->node != NTBF_NONE && s->t->adapters[adapter].node != s->node)
                return -EPERM; /* an adapter of another host */
        struct ntbf_adapter_h *h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->s = s;
        h->adapter = adapter;
        h->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (h->efd < 0) {
                int e = errno;
                free(h);
                return -e;
        }
        struct sim_adapter *x = &s->ad[adapter];
        /* Events are changes after probe: the current state is what the caller queries. */
        atomic_store(&h->watch_seq, atomic_load(&x->event_seq));
        h->seen_db_seq = atomic_load(&x->db_seq);
        h->seen_reset_seq = atomic_load(&x->reset_seq);
        for (uint32_t p = 0; p < x->ports && p < NTBF_MAX_ADAPTER_PORTS; p++)
                h->seen_up[p] = port_up(s, adapter, p);
        pthread_mutex_lock(&s->lock);
        h->next = s->handles;
        s->handles = h;
        pthread_mutex_unlock(&s->lock);
        int r = ntbf__sim_watcher_need(s);
        if (r) {
                pthread_mutex_lock(&s->lock);
                s->handles = h->next;
                pthread_mutex_unlock(&s->lock);
                close(h->efd);
                free(h);
                return r;
        }
        *out = h;
        return 0;
}

static void sim_release(struct ntbf_adapter_h *h)
{
        if (!h)
                return;
        struct ntbf_sim *s = S(h);
        pthread_mutex_lock(&s->lock);
        for (struct ntbf_adapter_h **pp = &s->handles; *pp; pp = &(*pp)->next) {
                if (*pp == h) {
                        *pp = h->next;
                        break;
                }
        }
        pthread_mutex_unlock(&s->lock);
        ntbf__sim_watcher_kick(s);
        close(h->efd);
        free(h);
}

/*
 * Mark in seen[] the switches of adapter a's switch network: those it is cabled to and
 * those joined to them by switch cables. A host programs a switch's requester tables
 * through its own adapter's path to the switch, so these are the only ones it can reach.
 * Returns how many there are (0 on allocation failure too: nothing reachable).
 */
static uint32_t switch_network(const struct ntbf_topo *t, uint32_t a, bool *seen)
{
        uint32_t *stack = calloc(t->nswitches + 1, sizeof(*stack));
        if (!stack)
                return 0;
        uint32_t sp = 0, n = 0;
        for (uint32_t p = 0; p < NTBF_MAX_ADAPTER_PORTS; p++) {
                uint32_t l = t->adapters[a].link[p];
                if (l == NTBF_NONE)
                        continue;
                struct ntbf_port_ref o =
                    ntbf_link_peer(&t->links[l], (struct ntbf_port_ref){NTBF_PORT_ADAPTER, a, p});
                if (o.kind == NTBF_PORT_SWITCH && !seen[o.obj]) {
                        seen[o.obj] = true;
                        stack[sp++] = o.obj;
                }
        }
        while (sp) {
                uint32_t w = stack[--sp];
                n++;
                for (uint32_t p = 0; p < t->switches[w].p.ports; p++) {
                        uint32_t l = t->switches[w].link[p];
                        if (l == NTBF_NONE)
                                continue;
                        struct ntbf_port_ref o = ntbf_link_peer(
                            &t->links[l], (struct ntbf_port_ref){NTBF_PORT_SWITCH, w, p});
                        if (o.kind == NTBF_PORT_SWITCH && !seen[o.obj]) {
                                seen[o.obj] = true;
                                stack[sp++] = o.obj;
                        }
                }
        }
        free(stack);
        return n;
}

/* Whether a reaches switch sw (sw == NTBF_NONE: any switch with a requester table). */
static bool reaches_switch(const struct ntbf_topo *t, uint32_t a, uint32_t sw)
{
        bool *seen = calloc(t->nswitches + 1, sizeof(*seen));
        if (!seen)
                return false;
        bool r = false;
        if (switch_network(t, a, seen)) {
                for (uint32_t w = 0; w < t->nswitches && !r; w++)
                        r = seen[w] &&
                            (sw == NTBF_NONE ? t->switches[w].p.rid_table != 0 : w == sw);
        }
        free(seen);
        return r;
}

static int sim_caps(struct ntbf_adapter_h *h, struct ntbf_caps *c)
{
        if (!c)
                return -EINVAL;
        struct ntbf_sim *s = S(h);
        const struct ntbf_adapter *a = A(h);
        const struct sim_adapter *x = &s->ad[h->adapter];
        memset(c, 0, sizeof(*c));
        c->flags = NTBF_CAP_CPU_MAP | NTBF_CAP_MAP_LIVE | NTBF_CAP_MEM | NTBF_CAP_MEM_PHYS |
                   NTBF_CAP_IRQ | NTBF_CAP_FAULT | NTBF_CAP_LINK_CTRL | NTBF_CAP_RESET |
                   NTBF_CAP_COUNTERS;
        if (a->p.xlat & NTBF_XLAT_OUTBOUND)
                c->flags |= NTBF_CAP_XLAT_OUTBOUND;
        if (a->p.xlat & NTBF_XLAT_INBOUND)
                c->flags |= NTBF_CAP_XLAT_INBOUND;
        c->flags |= x->nrids ? NTBF_CAP_RID_TABLE : NTBF_CAP_NO_RID_TABLE;
        if (x->ndb)
                c->flags |= NTBF_CAP_DOORBELL;
        if (x->nspads)
                c->flags |= NTBF_CAP_SCRATCHPAD;
        if (x->nmsgs)
                c->flags |= NTBF_CAP_MESSAGE;
        if (x->ngroups)
                c->flags |= NTBF_CAP_MCAST;
        if (x->nchan)
                c->flags |= NTBF_CAP_DMA;
        if (reaches_switch(s->t, h->adapter, NTBF_NONE))
                c->flags |= NTBF_CAP_SWITCH_RID;
        /* A host with an IOMMU can also isolate its devices (dev_isolate works there). */
        if (s->nodes[x->node].iommu)
                c->flags |= NTBF_CAP_IOMMU | NTBF_CAP_DEV_IOMMU;
        c->ports = a->p.ports;
        for (uint32_t d = 0; d < s->t->nadapters; d++)
                c->peers += d != h->adapter && sim_route(s, h->adapter, d)->valid;
        /* The model's windows, exactly: the sim holds the core to what it plans with. */
        c->nwindows = a->nwin;
        memcpy(c->windows, a->win, sizeof(c->windows));
        c->slots = a->nslots;
        c->addr_bits = a->p.addr_bits;
        c->rid_table = x->nrids;
        c->rid_reserved = x->rid_reserved;
        c->db_valid_mask = x->ndb >= 64 ? UINT64_MAX : (UINT64_C(1) << x->ndb) - 1;
        c->db_vectors = x->ndb ? 1 : 0;
        c->scratchpads = x->nspads;
        c->messages = x->nmsgs;
        c->mcast_groups = x->ngroups;
        c->dma_channels = x->nchan;
        c->dma_max_len = x->nchan ? SIM_DMA_MAX_LEN : 0;
        c->dma_align = x->nchan ? 1 : 0;
        return 0;
}

/* ---- link ------------------------------------------------------------------------------------ */

static void link_changed(struct ntbf_sim *s, uint32_t l)
{
        const struct ntbf_link *lk = &s->t->links[l];
        for (int e = 0; e < 2; e++)
                if (lk->end[e].kind == NTBF_PORT_ADAPTER)
                        ntbf__sim_adapter_event(s, lk->end[e].obj);
        ntbf__sim_changed(s);
}

static void link_set(struct ntbf_sim *s, uint32_t l, uint32_t bits, bool set)
{
        uint32_t old = set ? atomic_fetch_or(&s->links[l].state, bits)
                           : atomic_fetch_and(&s->links[l].state, ~bits);
        uint32_t now = set ? old | bits : old & ~bits;
        if ((old == 0) != (now == 0))
                link_changed(s, l);
}

static int sim_link_state(struct ntbf_adapter_h *h, uint32_t port, bool *up)
{
        if (port >= A(h)->p.ports || port >= NTBF_MAX_ADAPTER_PORTS || !up)
                return -EINVAL;
        *up = port_up(S(h), h->adapter, port);
        return 0;
}

static int link_admin(struct ntbf_adapter_h *h, uint32_t port, bool down)
{
        if (port >= A(h)->p.ports || port >= NTBF_MAX_ADAPTER_PORTS)
                return -EINVAL;
        uint32_t l = A(h)->link[port];
        if (l == NTBF_NONE)
                return -ENOTCONN; /* no cable on that port */
        link_set(S(h), l, LINK_ADMIN_DOWN, down);
        return 0;
}

static int sim_link_enable(struct ntbf_adapter_h *h, uint32_t port)
{
        return link_admin(h, port, false);
}

static int sim_link_disable(struct ntbf_adapter_h *h, uint32_t port)
{
        return link_admin(h, port, true);
}

/* ---- events ---------------------------------------------------------------------------------- */

static int sim_set_events(struct ntbf_adapter_h *h, const struct ntbf_event_ops *ops, void *ctx)
{
        h->ops = ops;
        h->ctx = ctx;
        return 0;
}

static int sim_event_fd(struct ntbf_adapter_h *h)
{
        return h->efd;
}

static int sim_process_events(struct ntbf_adapter_h *h)
{
        struct ntbf_sim *s = S(h);
        struct sim_adapter *x = &s->ad[h->adapter];
        uint64_t v;
        while (read(h->efd, &v, sizeof(v)) == sizeof(v))
                ;
        const struct ntbf_event_ops *ops = h->ops;
        int n = 0;
        uint32_t rs = atomic_load(&x->reset_seq);
        if (rs != h->seen_reset_seq) {
                h->seen_reset_seq = rs;
                if (ops && ops->reset_event)
                        ops->reset_event(h->ctx);
                n++;
        }
        for (uint32_t p = 0; p < x->ports && p < NTBF_MAX_ADAPTER_PORTS; p++) {
                bool up = port_up(s, h->adapter, p);
                if (up != h->seen_up[p]) {
                        h->seen_up[p] = up;
                        if (ops && ops->link_event)
                                ops->link_event(h->ctx, p, up);
                        n++;
                }
        }
        uint32_t ds = atomic_load(&x->db_seq);
        if (ds != h->seen_db_seq) {
                h->seen_db_seq = ds;
                uint64_t bits = atomic_load(&x->db) & ~atomic_load(&x->db_mask);
                if (bits) {
                        if (ops && ops->db_event)
                                ops->db_event(h->ctx, 0, bits);
                        n++;
                }
        }
        _Atomic uint64_t *msgs = sim_msgs(s, h->adapter);
        for (uint32_t m = 0; ops && ops->msg_event && m < x->nmsgs; m++) {
                uint64_t e = atomic_load(&msgs[m]);
                if ((e & MSG_FULL) && atomic_compare_exchange_strong(&msgs[m], &e, 0)) {
                        ops->msg_event(h->ctx, (uint32_t)(e >> 32) & 0x7fffffff, m, (uint32_t)e);
                        n++;
                }
        }
        return n;
}

/* ---- translation -------------------------------------------------------------------------------
 */

/*
 * Before a multicast translation is cleared or replaced, the CPU stores already posted
 * through it must reach the members, as posted writes already issued do on hardware: wait
 * until the device host (which replicates them, mcpost.c) has made a whole pass that began
 * after this call. Without a live device host nothing is replicated, so nothing waits;
 * a device host too slow to answer in 2 s is not waited for longer.
 */
static void mcast_drain(struct ntbf_sim *s, uint64_t old)
{
        if ((old & (SLOT_VALID | SLOT_MCAST)) != (SLOT_VALID | SLOT_MCAST))
                return;
        int32_t pid = atomic_load(&s->hdr->devhost_pid);
        uint64_t st = s->hdr->devhost_start;
        if (!pid || !st || ntbf__sim_proc_start(pid) != st)
                return;
        uint64_t p0 = atomic_load_explicit(&s->hdr->mcast_passes, memory_order_acquire);
        struct timespec nap = {0, 20000};
        for (int i = 0; i < 100000; i++) { /* 100,000 naps of at least 20 us: 2 s or more */
                if (atomic_load_explicit(&s->hdr->mcast_passes, memory_order_acquire) >= p0 + 2)
                        return;
                nanosleep(&nap, NULL);
        }
}

static int program_slot(struct ntbf_sim *s, uint32_t a, uint32_t slot, const struct ntbf_xlat *x)
{
        const struct ntbf_adapter *ad = &s->t->adapters[a];
        const struct ntbf_window *w = ntbf_adapter_slot_window(ad, slot);
        if (!x || !w)
                return -EINVAL;
        if (slot - w->first_slot < w->reserved)
                return -EPERM; /* the hardware keeps it */
        if (!ntbf_window_xlat_ok(w, x->addr, x->size) || x->addr % SIM_PAGE ||
            x->addr >= SIM_ADDR_LIMIT || x->size > SIM_ADDR_LIMIT - x->addr)
                return -EINVAL;
        if (ad->p.addr_bits < 64 && x->addr >> ad->p.addr_bits)
                return -EINVAL; /* beyond the adapter's far-side address width */
        uint64_t e;
        if (x->mcast_group != NTBF_NONE) {
                if (x->mcast_group >= s->ad[a].ngroups)
                        return -EINVAL;
                e = SLOT_VALID | SLOT_MCAST | x->addr | (uint64_t)x->mcast_group << 48;
        } else {
                if (x->dst_adapter >= s->t->nadapters ||
                    s->t->adapters[x->dst_adapter].node != x->dst_node)
                        return -EINVAL;
                if (!sim_route(s, a, x->dst_adapter)->valid)
                        return NTBF_ENOPATH; /* the adapters do not reach each other */
                e = SLOT_VALID | x->addr | (uint64_t)x->dst_adapter << 48;
        }
        /* A new multicast translation starts with nothing posted (docs/sim.md). */
        uint64_t old = atomic_load(&sim_slots(s, a)[slot]);
        if (old != e)
                mcast_drain(s, old);
        if ((e & SLOT_MCAST) && old != e)
                ntbf__sim_mcpost_forget(s, a,
                                        sim_post_off(ad, w) + (slot - w->first_slot) * w->slot_size,
                                        w->slot_size);
        /* Invalid while its size changes (layout.h): no reader pairs old and new. */
        atomic_store_explicit(&sim_slots(s, a)[slot], 0, memory_order_release);
        atomic_store_explicit(&sim_xsize(s, a)[slot], x->size, memory_order_release);
        atomic_store_explicit(&sim_slots(s, a)[slot], e, memory_order_release);
        ntbf__sim_changed(s);
        return 0;
}

static int clear_slot(struct ntbf_sim *s, uint32_t a, uint32_t slot)
{
        const struct ntbf_window *w = ntbf_adapter_slot_window(&s->t->adapters[a], slot);
        if (!w)
                return -EINVAL;
        if (slot - w->first_slot < w->reserved)
                return -EPERM;
        mcast_drain(s, atomic_load(&sim_slots(s, a)[slot]));
        atomic_store_explicit(&sim_slots(s, a)[slot], 0, memory_order_release);
        ntbf__sim_changed(s);
        return 0;
}

static int sim_xlat_set(struct ntbf_adapter_h *h, uint32_t slot, const struct ntbf_xlat *x)
{
        if (!(A(h)->p.xlat & NTBF_XLAT_OUTBOUND))
                return NTBF_EUNSUPPORTED; /* this adapter is programmed by the buffer owner */
        return program_slot(S(h), h->adapter, slot, x);
}

static int sim_xlat_clear(struct ntbf_adapter_h *h, uint32_t slot)
{
        if (!(A(h)->p.xlat & NTBF_XLAT_OUTBOUND))
                return NTBF_EUNSUPPORTED;
        return clear_slot(S(h), h->adapter, slot);
}

static int sim_peer_xlat_set(struct ntbf_adapter_h *h, uint32_t peer, uint32_t slot,
                             uint64_t local_addr, uint64_t size)
{
        struct ntbf_sim *s = S(h);
        if (!(A(h)->p.xlat & NTBF_XLAT_INBOUND))
                return NTBF_EUNSUPPORTED;
        if (peer >= s->t->nadapters)
                return -EINVAL;
        struct ntbf_xlat x = {A(h)->node, h->adapter, local_addr, NTBF_NONE, size};
        return program_slot(s, peer, slot, &x);
}

static int sim_peer_xlat_clear(struct ntbf_adapter_h *h, uint32_t peer, uint32_t slot)
{
        struct ntbf_sim *s = S(h);
        if (!(A(h)->p.xlat & NTBF_XLAT_INBOUND))
                return NTBF_EUNSUPPORTED;
        if (peer >= s->t->nadapters || slot >= s->ad[peer].nslots)
                return -EINVAL;
        uint64_t e = atomic_load(&sim_slots(s, peer)[slot]);
        /* The buffer owner clears only translations into its own host. */
        if ((e & SLOT_VALID) && ((e & SLOT_MCAST) || SLOT_TARGET(e) != h->adapter))
                return -EPERM;
        return clear_slot(s, peer, slot);
}

static int sim_xlat_get(struct ntbf_adapter_h *h, uint32_t slot, struct ntbf_xlat *x, bool *valid)
{
        struct ntbf_sim *s = S(h);
        if (!x || !valid || slot >= s->ad[h->adapter].nslots)
                return -EINVAL;
        uint64_t size, e = sim_slot_read(s, h->adapter, slot, &size);
        *valid = e & SLOT_VALID;
        *x = (struct ntbf_xlat){NTBF_NONE, NTBF_NONE, e & SLOT_ADDR, NTBF_NONE, size};
        if (!*valid)
                x->addr = x->size = 0;
        else if (e & SLOT_MCAST)
                x->mcast_group = SLOT_TARGET(e);
        else {
                x->dst_adapter = SLOT_TARGET(e);
                x->dst_node = s->t->adapters[x->dst_adapter].node;
        }
        return 0;
}

/* ---- requester IDs -----------------------------------------------------------------------------
 */

/*
 * Insert entry e in tab[lo, n): one compare-and-swap into a free word, then a look for a
 * twin inserted concurrently: of two equal entries the one at the higher index backs out,
 * so racing adders never leave duplicates and a killed adder leaves one whole entry.
 */
static int table_add(_Atomic uint64_t *tab, uint32_t lo, uint32_t n, uint64_t e)
{
        for (uint32_t i = 0; i < n; i++)
                if (atomic_load(&tab[i]) == e)
                        return -EEXIST;
        for (uint32_t i = lo; i < n; i++) {
                uint64_t expect = 0;
                if (!atomic_compare_exchange_strong(&tab[i], &expect, e))
                        continue;
                for (uint32_t j = 0; j < i; j++) {
                        if (atomic_load(&tab[j]) == e) {
                                uint64_t mine = e;
                                atomic_compare_exchange_strong(&tab[i], &mine, 0);
                                return -EEXIST;
                        }
                }
                return 0;
        }
        return -ENOSPC;
}

static int table_del(_Atomic uint64_t *tab, uint32_t lo, uint32_t n, uint64_t e)
{
        for (uint32_t i = lo; i < n; i++) {
                uint64_t expect = e;
                if (atomic_compare_exchange_strong(&tab[i], &expect, 0))
                        return 0;
        }
        return -ENOENT;
}

static int rid_check(struct ntbf_sim *s, const struct ntbf_rid *r)
{
        return r && r->node < s->t->nnodes ? 0 : -EINVAL;
}

static int sim_rid_add(struct ntbf_adapter_h *h, const struct ntbf_rid *r, uint32_t *proxy)
{
        struct ntbf_sim *s = S(h);
        if (proxy)
                *proxy = NTBF_NONE; /* PLX-like: requester IDs cross unchanged */
        struct sim_adapter *x = &s->ad[h->adapter];
        if (rid_check(s, r))
                return -EINVAL;
        if (!x->nrids)
                return NTBF_EUNSUPPORTED;
        /* An adapter's table holds requesters of its own host (docs/model.md). */
        if (r->node != x->node)
                return -EINVAL;
        uint64_t entry = rid_entry(r->node, r->rid, r->mask);
        int e = table_add(sim_rids(s, h->adapter), x->rid_reserved, x->nrids, entry);
        if (!e)
                ntbf__sim_changed(s);
        /* Switchtec-like adapters (rid_proxy): the ID the far side sees is the entry's own,
         * on the NT endpoint's buses from 0xf0: bus 0xf0 + k / 256, devfn k % 256. */
        for (uint32_t k = 0; !e && proxy && A(h)->p.rid_proxy && k < x->nrids; k++)
                if (atomic_load(&sim_rids(s, h->adapter)[k]) == entry)
                        *proxy = (0xf0u + k / 256) << 8 | (k % 256);
        return e;
}

static int sim_rid_del(struct ntbf_adapter_h *h, const struct ntbf_rid *r)
{
        struct ntbf_sim *s = S(h);
        struct sim_adapter *x = &s->ad[h->adapter];
        if (rid_check(s, r))
                return -EINVAL;
        if (!x->nrids)
                return NTBF_EUNSUPPORTED;
        uint64_t e = rid_entry(r->node, r->rid, r->mask);
        _Atomic uint64_t *tab = sim_rids(s, h->adapter);
        for (uint32_t i = 0; i < x->rid_reserved; i++)
                if (atomic_load(&tab[i]) == e)
                        return -EPERM; /* the host CPU's entries stay */
        int err = table_del(tab, x->rid_reserved, x->nrids, e);
        if (!err)
                ntbf__sim_changed(s);
        return err;
}

/* Switch tables are programmed through an adapter on the switch's network, as the caps of
 * the adapter say (NTBF_CAP_SWITCH_RID): one that reaches no switch with a table cannot
 * program any, and none can program a switch of another network. */
static int switch_reach(struct ntbf_sim *s, uint32_t a, uint32_t sw)
{
        if (!reaches_switch(s->t, a, NTBF_NONE))
                return NTBF_EUNSUPPORTED;
        return reaches_switch(s->t, a, sw) ? 0 : NTBF_ENOPATH;
}

static int sim_switch_rid_add(struct ntbf_adapter_h *h, uint32_t sw, const struct ntbf_rid *r)
{
        struct ntbf_sim *s = S(h);
        if (rid_check(s, r) || sw >= s->t->nswitches)
                return -EINVAL;
        int reach = switch_reach(s, h->adapter, sw);
        if (reach)
                return reach;
        const struct sim_switch *x = &s->sw[sw];
        if (!x->nrids)
                return NTBF_EUNSUPPORTED;
        uint64_t e = rid_entry(r->node, r->rid, r->mask);
        const uint32_t *links = s->t->switches[sw].link;
        uint64_t mine[NTBF_MAX_SWITCH_PORTS / 64] = {0}; /* ports this call filled */
        uint32_t added = 0, had = 0, ports = 0;
        int err = 0;
        for (uint32_t p = 0; p < x->ports && !err; p++) {
                if (links[p] == NTBF_NONE)
                        continue; /* no partition on an unconnected port */
                ports++;
                int r2 = table_add(sim_swrids(s, sw, p), 0, x->nrids, e);
                if (r2 == -EEXIST) {
                        had++;
                } else if (r2) {
                        err = r2;
                } else {
                        added++;
                        mine[p / 64] |= UINT64_C(1) << (p % 64);
                }
        }
        if (err) {
                /* Every connected port or none: take back what this call added. */
                for (uint32_t p = 0; p < x->ports; p++)
                        if (mine[p / 64] >> (p % 64) & 1)
                                table_del(sim_swrids(s, sw, p), 0, x->nrids, e);
                return err;
        }
        if (!added && had == ports)
                return -EEXIST;
        ntbf__sim_changed(s);
        return 0;
}

static int sim_switch_rid_del(struct ntbf_adapter_h *h, uint32_t sw, const struct ntbf_rid *r)
{
        struct ntbf_sim *s = S(h);
        if (rid_check(s, r) || sw >= s->t->nswitches)
                return -EINVAL;
        int reach = switch_reach(s, h->adapter, sw);
        if (reach)
                return reach;
        const struct sim_switch *x = &s->sw[sw];
        if (!x->nrids)
                return NTBF_EUNSUPPORTED;
        uint64_t e = rid_entry(r->node, r->rid, r->mask);
        uint32_t gone = 0;
        for (uint32_t p = 0; p < x->ports; p++)
                if (s->t->switches[sw].link[p] != NTBF_NONE &&
                    !table_del(sim_swrids(s, sw, p), 0, x->nrids, e))
                        gone++;
        if (!gone)
                return -ENOENT;
        ntbf__sim_changed(s);
        return 0;
}

/* ---- CPU maps, memory -------------------------------------------------------------------------
 */

static int sim_map_window(struct ntbf_adapter_h *h, uint32_t win, uint64_t offset, uint64_t size,
                          unsigned flags, void **addr)
{
        return ntbf__sim_map(S(h), h->adapter, win, offset, size, flags, addr);
}

static int sim_unmap_window(struct ntbf_adapter_h *h, void *addr, uint64_t size)
{
        return ntbf__sim_unmap(S(h), h->adapter, addr, size);
}

/* A CPU store routed like any transaction: MSI writes interrupt, multicast is replicated. */
static int sim_window_write(struct ntbf_adapter_h *h, uint32_t win, uint64_t offset,
                            const void *buf, uint64_t len)
{
        struct ntbf_sim *s = S(h);
        const struct ntbf_adapter *ad = &s->t->adapters[h->adapter];
        if (!buf || !len || win >= ad->nwin || offset >= ad->win[win].size ||
            len > ad->win[win].size - offset)
                return -EINVAL;
        /* The router only reads the buffer of a write. */
        return ntbf__sim_xfer(s, ad->node, NTBF_NONE, NTBF_SIM_RID_CPU, ad->win[win].base + offset,
                              (void *)(uintptr_t)buf, (size_t)len, true, NULL);
}

static int sim_mem_alloc(struct ntbf_adapter_h *h, uint64_t size, uint64_t align,
                         struct ntbf_mem *out)
{
        return ntbf__sim_mem_alloc(S(h), A(h)->node, size, align, out);
}

static int sim_mem_free(struct ntbf_adapter_h *h, struct ntbf_mem *m)
{
        return ntbf__sim_mem_free(S(h), A(h)->node, m);
}

/* Any RAM or BAR range of the host: this process maps every backing file whole already. */
static int sim_host_map(struct ntbf_adapter_h *h, uint64_t addr, uint64_t size, void **out)
{
        if (!size || !out)
                return -EINVAL;
        int r = ntbf_sim_phys_ptr((struct ntbf_backend *)S(h), A(h)->node, addr, size, out);
        return r == -EINVAL ? -EFAULT : r;
}

static int sim_host_unmap(struct ntbf_adapter_h *h, void *addr, uint64_t size)
{
        (void)h;
        return addr && size ? 0 : -EINVAL; /* the files stay mapped until close */
}

static int sim_host_bus(struct ntbf_adapter_h *h, const void *addr, uint64_t size, uint64_t *bus)
{
        return ntbf__sim_host_bus(S(h), A(h)->node, addr, size, bus);
}

/* Memory for export only: what is not allocated is not another process's segment. */
static int sim_mem_map(struct ntbf_adapter_h *h, uint64_t bus_addr, uint64_t size, void **addr)
{
        if (!size || !addr)
                return -EINVAL;
        if (!ntbf__sim_mem_live(S(h), A(h)->node, bus_addr, size))
                return -EFAULT;
        return sim_host_map(h, bus_addr, size, addr);
}

/* ---- doorbells, scratchpads, messages ------------------------------------------------------- */

/*
 * Registers of a peer are reached over the link: its route from us must be up. They are
 * reached through our own adapter's registers of the same kind (have: how many it has), so
 * an adapter without doorbells, scratchpads or messages, which does not claim them, cannot
 * use the peer's either.
 */
static int peer_ok(struct ntbf_adapter_h *h, uint32_t peer, uint32_t have)
{
        struct ntbf_sim *s = S(h);
        if (!have)
                return NTBF_EUNSUPPORTED;
        if (peer >= s->t->nadapters || !sim_route(s, h->adapter, peer)->valid)
                return -EINVAL;
        const struct sim_route *rt = sim_route(s, h->adapter, peer);
        for (uint32_t i = 0; i < rt->nhops; i++)
                if (s->hops[rt->first + i].kind == NTBF_HOP_LINK &&
                    !ntbf__sim_link_up(s, s->hops[rt->first + i].obj))
                        return -ENOTCONN;
        return 0;
}

static uint64_t db_valid(const struct sim_adapter *x)
{
        return x->ndb >= 64 ? UINT64_MAX : (UINT64_C(1) << x->ndb) - 1;
}

static int sim_db_read(struct ntbf_adapter_h *h, uint64_t *bits)
{
        if (!bits)
                return -EINVAL;
        *bits = atomic_load(&S(h)->ad[h->adapter].db);
        return 0;
}

static int sim_db_clear(struct ntbf_adapter_h *h, uint64_t bits)
{
        atomic_fetch_and(&S(h)->ad[h->adapter].db, ~bits);
        return 0;
}

static int sim_db_set_mask(struct ntbf_adapter_h *h, uint64_t bits)
{
        struct sim_adapter *x = &S(h)->ad[h->adapter];
        if (bits & ~db_valid(x))
                return -EINVAL;
        atomic_fetch_or(&x->db_mask, bits);
        return 0;
}

static int sim_db_clear_mask(struct ntbf_adapter_h *h, uint64_t bits)
{
        struct ntbf_sim *s = S(h);
        struct sim_adapter *x = &s->ad[h->adapter];
        if (bits & ~db_valid(x))
                return -EINVAL;
        uint64_t old = atomic_fetch_and(&x->db_mask, ~bits);
        /* Unmasking a pending bit raises the interrupt it held back. */
        if (old & bits & atomic_load(&x->db)) {
                atomic_fetch_add(&x->db_seq, 1);
                ntbf__sim_adapter_event(s, h->adapter);
        }
        return 0;
}

static int sim_peer_db_set(struct ntbf_adapter_h *h, uint32_t peer, uint64_t bits)
{
        struct ntbf_sim *s = S(h);
        int r = peer_ok(h, peer, s->ad[h->adapter].ndb);
        if (r)
                return r;
        struct sim_adapter *x = &s->ad[peer];
        if (bits & ~db_valid(x))
                return -EINVAL;
        atomic_fetch_or(&x->db, bits);
        atomic_fetch_add(&x->db_seq, 1);
        ntbf__sim_adapter_event(s, peer);
        return 0;
}

static int sim_spad_read(struct ntbf_adapter_h *h, uint32_t idx, uint32_t *val)
{
        struct ntbf_sim *s = S(h);
        if (!val || idx >= s->ad[h->adapter].nspads)
                return -EINVAL;
        *val = atomic_load(&sim_spads(s, h->adapter)[idx]);
        return 0;
}

static int sim_spad_write(struct ntbf_adapter_h *h, uint32_t idx, uint32_t val)
{
        struct ntbf_sim *s = S(h);
        if (idx >= s->ad[h->adapter].nspads)
                return -EINVAL;
        atomic_store(&sim_spads(s, h->adapter)[idx], val);
        return 0;
}

static int sim_peer_spad_read(struct ntbf_adapter_h *h, uint32_t peer, uint32_t idx, uint32_t *val)
{
        struct ntbf_sim *s = S(h);
        int r = peer_ok(h, peer, s->ad[h->adapter].nspads);
        if (r)
                return r;
        if (!val || idx >= s->ad[peer].nspads)
                return -EINVAL;
        *val = atomic_load(&sim_spads(s, peer)[idx]);
        return 0;
}

static int sim_peer_spad_write(struct ntbf_adapter_h *h, uint32_t peer, uint32_t idx, uint32_t val)
{
        struct ntbf_sim *s = S(h);
        int r = peer_ok(h, peer, s->ad[h->adapter].nspads);
        if (r)
                return r;
        if (idx >= s->ad[peer].nspads)
                return -EINVAL;
        atomic_store(&sim_spads(s, peer)[idx], val);
        return 0;
}

static int sim_peer_msg_write(struct ntbf_adapter_h *h, uint32_t peer, uint32_t midx, uint32_t val)
{
        struct ntbf_sim *s = S(h);
        int r = peer_ok(h, peer, s->ad[h->adapter].nmsgs);
        if (r)
                return r;
        if (midx >= s->ad[peer].nmsgs)
                return -EINVAL;
        uint64_t expect = 0;
        uint64_t e = MSG_FULL | (uint64_t)h->adapter << 32 | val;
        if (!atomic_compare_exchange_strong(&sim_msgs(s, peer)[midx], &expect, e))
                return -EBUSY; /* the previous message was not read yet */
        ntbf__sim_adapter_event(s, peer);
        return 0;
}

static int sim_msg_read(struct ntbf_adapter_h *h, uint32_t midx, uint32_t *peer, uint32_t *val)
{
        struct ntbf_sim *s = S(h);
        if (!peer || !val || midx >= s->ad[h->adapter].nmsgs)
                return -EINVAL;
        uint64_t e = atomic_exchange(&sim_msgs(s, h->adapter)[midx], 0);
        if (!(e & MSG_FULL))
                return -ENOMSG;
        *peer = (uint32_t)(e >> 32) & 0x7fffffff;
        *val = (uint32_t)e;
        return 0;
}

/* ---- multicast, DMA, IOMMU, interrupts ---------------------------------------------------------
 */

static int sim_mcast_join(struct ntbf_adapter_h *h, uint32_t group, uint64_t local_addr,
                          uint64_t size)
{
        return ntbf__sim_mcast_join(S(h), h->adapter, group, local_addr, size);
}

static int sim_mcast_leave(struct ntbf_adapter_h *h, uint32_t group)
{
        return ntbf__sim_mcast_leave(S(h), h->adapter, group);
}

static int sim_dma_submit(struct ntbf_adapter_h *h, uint32_t chan, uint64_t src, uint64_t dst,
                          uint64_t len, uint64_t cookie)
{
        return ntbf__sim_dma_submit(S(h), h->adapter, chan, src, dst, len, cookie);
}

static int sim_dma_poll(struct ntbf_adapter_h *h, uint32_t chan, uint64_t *cookies, int *status,
                        unsigned max)
{
        return ntbf__sim_dma_poll(S(h), h->adapter, chan, cookies, status, max);
}

static int sim_iommu_map(struct ntbf_adapter_h *h, uint64_t iova, uint64_t phys, uint64_t len)
{
        struct ntbf_sim *s = S(h);
        uint32_t node = s->ad[h->adapter].node;
        if (!s->nodes[node].iommu)
                return NTBF_EUNSUPPORTED;
        return ntbf__sim_iommu_map(s, node, iova, phys, len);
}

static int sim_iommu_unmap(struct ntbf_adapter_h *h, uint64_t iova, uint64_t len)
{
        struct ntbf_sim *s = S(h);
        uint32_t node = s->ad[h->adapter].node;
        if (!s->nodes[node].iommu)
                return NTBF_EUNSUPPORTED;
        return ntbf__sim_iommu_unmap(s, node, iova, len);
}

/* Lender-side isolation: a requester of this host, and a host with an IOMMU. */
static int dev_iso_check(struct ntbf_adapter_h *h, const struct ntbf_rid *r)
{
        struct ntbf_sim *s = S(h);
        if (rid_check(s, r) || r->node != A(h)->node)
                return -EINVAL;
        return s->nodes[r->node].iommu ? 0 : NTBF_EUNSUPPORTED;
}

static int sim_dev_isolate(struct ntbf_adapter_h *h, const struct ntbf_rid *r, bool on)
{
        int e = dev_iso_check(h, r);
        return e ? e : ntbf__sim_dev_isolate(S(h), r, on);
}

static int sim_dev_iommu_map(struct ntbf_adapter_h *h, const struct ntbf_rid *r, uint64_t iova,
                             uint64_t phys, uint64_t len)
{
        int e = dev_iso_check(h, r);
        return e ? e : ntbf__sim_dev_map(S(h), r, iova, phys, len, true);
}

static int sim_dev_iommu_unmap(struct ntbf_adapter_h *h, const struct ntbf_rid *r, uint64_t iova,
                               uint64_t len)
{
        int e = dev_iso_check(h, r);
        return e ? e : ntbf__sim_dev_map(S(h), r, iova, 0, len, false);
}

static int sim_irq_alloc(struct ntbf_adapter_h *h, struct ntbf_irq *out)
{
        return ntbf__sim_irq_alloc(S(h), A(h)->node, out);
}

static int sim_irq_free(struct ntbf_adapter_h *h, struct ntbf_irq *irq)
{
        return ntbf__sim_irq_free(S(h), A(h)->node, irq);
}

/* A write into the host's own MSI range, as the CPU issues it. */
static int sim_irq_trigger(struct ntbf_adapter_h *h, uint64_t addr, uint32_t data)
{
        if (addr - NTBF_MSI_BASE >= NTBF_MSI_SIZE)
                return -EINVAL;
        return ntbf_sim_write((struct ntbf_backend *)S(h), A(h)->node, NTBF_NONE, NTBF_SIM_RID_CPU,
                              addr, &data, sizeof(data), NULL);
}

static int sim_dev_iommu_faults(struct ntbf_adapter_h *h, uint32_t device, uint32_t f,
                                uint64_t *out)
{
        struct ntbf_sim *s = S(h);
        if (device >= s->t->ndevices || s->t->devices[device].node != A(h)->node)
                return -EINVAL;
        return ntbf_sim_dev_iommu_faults((struct ntbf_backend *)s, device, f, out);
}

static uint8_t *cfg_region(struct ntbf_backend *b, uint32_t device, uint32_t f)
{
        struct ntbf_sim *s = ntbf__sim_of(b);
        if (!s || device >= s->t->ndevices ||
            (s->node != NTBF_NONE && s->t->devices[device].node != s->node))
                return NULL; /* a device of another host: not ours to touch */
        return ntbf_sim_cfg(b, device, f);
}

static bool cfg_args(uint32_t off, uint32_t size)
{
        return (size == 1 || size == 2 || size == 4) && off < 4096 && off % size == 0;
}

static int sim_cfg_read(struct ntbf_backend *b, uint32_t device, uint32_t f, uint32_t off,
                        uint32_t size, uint32_t *val)
{
        uint8_t *region = cfg_region(b, device, f);
        if (!val || !cfg_args(off, size))
                return -EINVAL;
        if (!region)
                return -ENODEV;
        *val = ntbf_sim_cfg_read(region, off, size);
        return 0;
}

static int sim_cfg_write(struct ntbf_backend *b, uint32_t device, uint32_t f, uint32_t off,
                         uint32_t size, uint32_t val)
{
        uint8_t *region = cfg_region(b, device, f);
        if (!cfg_args(off, size))
                return -EINVAL;
        if (!region)
                return -ENODEV;
        return ntbf_sim_cfg_write(region, off, val, size);
}

/* ---- reset, counters, faults -------------------------------------------------------------------
 */

void ntbf__sim_reserved_rids(struct ntbf_sim *s, uint32_t a)
{
        struct sim_adapter *x = &s->ad[a];
        _Atomic uint64_t *tab = sim_rids(s, a);
        for (uint32_t k = 0; k < x->rid_reserved; k++)
                atomic_store(&tab[k], rid_entry(x->node, (uint16_t)(k << 3), 0xffff));
        for (uint32_t k = x->rid_reserved; k < x->nrids; k++)
                atomic_store(&tab[k], 0);
}

void ntbf__sim_adapter_reset(struct ntbf_sim *s, uint32_t a)
{
        struct sim_adapter *x = &s->ad[a];
        _Atomic uint64_t *slots = sim_slots(s, a);
        for (uint32_t k = 0; k < x->nslots; k++)
                atomic_store(&slots[k], 0);
        ntbf__sim_reserved_rids(s, a);
        atomic_store(&x->db, 0);
        atomic_store(&x->db_mask, 0);
        for (uint32_t k = 0; k < x->nspads; k++)
                atomic_store(&sim_spads(s, a)[k], 0);
        for (uint32_t k = 0; k < x->nmsgs; k++)
                atomic_store(&sim_msgs(s, a)[k], 0);
        ntbf__sim_mcast_clear(s, a);
        atomic_fetch_add(&x->reset_seq, 1);
        ntbf__sim_adapter_event(s, a);
        ntbf__sim_changed(s);
}

static int sim_reset(struct ntbf_adapter_h *h)
{
        ntbf__sim_adapter_reset(S(h), h->adapter);
        return 0;
}

static int sim_counters(struct ntbf_adapter_h *h, struct ntbf_counters *out)
{
        if (!out)
                return -EINVAL;
        struct sim_counters *c = &S(h)->ad[h->adapter].ctr;
        *out = (struct ntbf_counters){atomic_load(&c->tx),
                                      atomic_load(&c->rx),
                                      atomic_load(&c->drop_no_rid),
                                      atomic_load(&c->drop_unprogrammed),
                                      atomic_load(&c->drop_link_down),
                                      atomic_load(&c->master_abort),
                                      atomic_load(&c->iommu_fault)};
        return 0;
}

/* Mark the links of node's adapters dead (or alive again). */
static void node_links(struct ntbf_sim *s, uint32_t node, bool dead)
{
        const struct ntbf_topo *t = s->t;
        for (uint32_t l = 0; l < t->nlinks; l++) {
                for (int e = 0; e < 2; e++) {
                        const struct ntbf_port_ref *p = &t->links[l].end[e];
                        if (p->kind == NTBF_PORT_ADAPTER && t->adapters[p->obj].node == node &&
                            t->adapters[p->obj].link[p->port] == l)
                                link_set(s, l, e ? LINK_END1_DEAD : LINK_END0_DEAD, dead);
                }
        }
}

static int sim_fault(struct ntbf_backend *b, const struct ntbf_fault *f)
{
        struct ntbf_sim *s = ntbf__sim_of(b);
        if (!s || !f)
                return -EINVAL;
        const struct ntbf_topo *t = s->t;
        switch (f->kind) {
        case NTBF_FAULT_LINK_DOWN:
        case NTBF_FAULT_LINK_UP:
                if (f->obj >= t->nlinks ||
                    ntbf_topo_port_link(t, t->links[f->obj].end[0]) != f->obj)
                        return -EINVAL;
                link_set(s, f->obj, LINK_ADMIN_DOWN, f->kind == NTBF_FAULT_LINK_DOWN);
                return 0;
        case NTBF_FAULT_ADAPTER_RESET:
                if (f->obj >= t->nadapters)
                        return -EINVAL;
                ntbf__sim_adapter_reset(s, f->obj);
                return 0;
        case NTBF_FAULT_HOST_DEATH:
                if (f->obj >= t->nnodes)
                        return -EINVAL;
                if (!atomic_exchange(&s->nodes[f->obj].alive, 0))
                        return 0;
                node_links(s, f->obj, true);
                ntbf__sim_changed(s);
                return 0;
        case NTBF_FAULT_HOST_REVIVE:
                if (f->obj >= t->nnodes)
                        return -EINVAL;
                if (atomic_load(&s->nodes[f->obj].alive))
                        return 0;
                /* A rebooted host: memory, vectors and IOMMU tables gone, adapters reset. */
                ntbf__sim_node_wipe(s, f->obj);
                for (uint32_t k = 0; k < t->nodes[f->obj].nadapters; k++)
                        ntbf__sim_adapter_reset(s, t->nodes[f->obj].adapters[k]);
                atomic_fetch_add(&s->nodes[f->obj].boot, 1);
                atomic_store(&s->nodes[f->obj].alive, 1);
                node_links(s, f->obj, false);
                ntbf__sim_changed(s);
                return 0;
        }
        return -EINVAL;
}

const struct ntbf_backend_ops ntbf__sim_ops = {
    .name = "sim",
    .create = sim_create,
    .destroy = sim_destroy,
    .open = sim_open,
    .close = sim_close,
    .probe = sim_probe,
    .release = sim_release,
    .caps = sim_caps,
    .link_state = sim_link_state,
    .link_enable = sim_link_enable,
    .link_disable = sim_link_disable,
    .set_events = sim_set_events,
    .event_fd = sim_event_fd,
    .process_events = sim_process_events,
    .xlat_set = sim_xlat_set,
    .xlat_clear = sim_xlat_clear,
    .peer_xlat_set = sim_peer_xlat_set,
    .peer_xlat_clear = sim_peer_xlat_clear,
    .xlat_get = sim_xlat_get,
    .rid_add = sim_rid_add,
    .rid_del = sim_rid_del,
    .switch_rid_add = sim_switch_rid_add,
    .switch_rid_del = sim_switch_rid_del,
    .map_window = sim_map_window,
    .unmap_window = sim_unmap_window,
    .window_write = sim_window_write,
    .mem_alloc = sim_mem_alloc,
    .mem_free = sim_mem_free,
    .mem_map = sim_mem_map,
    .mem_unmap = sim_host_unmap,
    .host_map = sim_host_map,
    .host_unmap = sim_host_unmap,
    .db_read = sim_db_read,
    .db_clear = sim_db_clear,
    .db_set_mask = sim_db_set_mask,
    .db_clear_mask = sim_db_clear_mask,
    .peer_db_set = sim_peer_db_set,
    .spad_read = sim_spad_read,
    .spad_write = sim_spad_write,
    .peer_spad_read = sim_peer_spad_read,
    .peer_spad_write = sim_peer_spad_write,
    .peer_msg_write = sim_peer_msg_write,
    .msg_read = sim_msg_read,
    .mcast_join = sim_mcast_join,
    .mcast_leave = sim_mcast_leave,
    .dma_submit = sim_dma_submit,
    .dma_poll = sim_dma_poll,
    .iommu_map = sim_iommu_map,
    .iommu_unmap = sim_iommu_unmap,
    .dev_isolate = sim_dev_isolate,
    .dev_iommu_map = sim_dev_iommu_map,
    .dev_iommu_unmap = sim_dev_iommu_unmap,
    .dev_iommu_faults = sim_dev_iommu_faults,
    .cfg_read = sim_cfg_read,
    .cfg_write = sim_cfg_write,
    .irq_alloc = sim_irq_alloc,
    .irq_free = sim_irq_free,
    .irq_trigger = sim_irq_trigger,
    .reset = sim_reset,
    .counters = sim_counters,
    .fault = sim_fault,
    .host_bus = sim_host_bus,
};
