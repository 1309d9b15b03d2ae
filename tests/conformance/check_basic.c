/* tests/conformance/check_basic.c: checks of the vtable, capabilities, the event model and memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ntbfab/units.h"
#include "checks.h"

/* ---- vtable ------------------------------------------------------------------------------------
 */

int cf_check_vtable(struct cf_run *r)
{
        const struct ntbf_backend_ops *o = r->cx->ops;
        char why[256] = "";
        if (!ntbf_backend_ops_valid(o, why, sizeof(why)))
                CF_FAIL(r, "ntbf_backend_ops_valid refuses the vtable: %s", why);
        if (ntbf_backend_find(o->name) != o)
                CF_FAIL(r, "ntbf_backend_find(\"%s\") does not return this vtable", o->name);
        bool listed = false;
        for (size_t i = 0; ntbf_backend_at(i); i++)
                listed |= ntbf_backend_at(i) == o;
        CF_TRUE(r, listed, "ntbf_backend_at does not list backend %s", o->name);
        return 0;
}

/* ---- capability flags -------------------------------------------------------------------------
 */

/* Call a harmless operation of capability f; an adapter that does not claim f must refuse it.
 * Whatever it wrongly did is taken back at once. */
static int probe_unclaimed(struct cf_ctx *cx, struct cf_ad *ad, uint32_t f, const char **call)
{
        const struct ntbf_backend_ops *o = cx->ops;
        struct ntbf_adapter_h *h = ad->h;
        uint32_t peer = ad->partner;
        uint32_t pnode = peer == NTBF_NONE ? NTBF_NONE : cx->t->adapters[peer].node;
        struct ntbf_rid rid = {ad->node, 0x0300, 0xffff};
        int rc = -EINVAL;
        /* The partner's first slot, as the cluster file has it (its caps may be unread). */
        const struct ntbf_adapter *pa = peer == NTBF_NONE ? NULL : &cx->t->adapters[peer];
        uint32_t pslot = pa && pa->nwin ? pa->win[0].first_slot + pa->win[0].reserved : 0;
        uint64_t psize = pa && pa->nwin ? pa->win[0].size_max : 4096;
        switch (f) {
        case NTBF_CAP_XLAT_OUTBOUND: {
                uint32_t s0 = cf_slot(ad, 0);
                struct ntbf_xlat x = {pnode, peer, 0, NTBF_NONE, cf_xsize(ad, s0)};
                *call = "xlat_set(first slot)";
                if (!(rc = o->xlat_set(h, s0, &x)))
                        o->xlat_clear(h, s0);
                break;
        }
        case NTBF_CAP_XLAT_INBOUND:
                *call = "peer_xlat_set(partner, its first slot)";
                if (!(rc = o->peer_xlat_set(h, peer, pslot, 0, psize)))
                        o->peer_xlat_clear(h, peer, pslot);
                break;
        case NTBF_CAP_RID_TABLE:
                *call = "rid_add(00:03.0)";
                if (!(rc = o->rid_add(h, &rid, NULL)))
                        o->rid_del(h, &rid);
                break;
        case NTBF_CAP_CPU_MAP: {
                void *p = NULL;
                *call = "map_window(window 0, 0, 4096)";
                if (!(rc = o->map_window(h, 0, 0, 4096, 0, &p)))
                        o->unmap_window(h, p, 4096);
                break;
        }
        case NTBF_CAP_LINK_CTRL:
                *call = "link_disable(port 0)";
                if (!(rc = o->link_disable(h, 0)))
                        o->link_enable(h, 0);
                break;
        case NTBF_CAP_RESET:
                *call = "reset";
                rc = o->reset(h);
                break;
        case NTBF_CAP_COUNTERS: {
                struct ntbf_counters k;
                *call = "counters";
                rc = o->counters(h, &k);
                break;
        }
        case NTBF_CAP_MEM: {
                struct ntbf_mem m = {.fd = -1};
                *call = "mem_alloc(4096)";
                if (!(rc = o->mem_alloc(h, 4096, 0, &m)))
                        o->mem_free(h, &m);
                break;
        }
        case NTBF_CAP_DOORBELL:
                *call = "peer_db_set(partner, bit 0)";
                rc = o->peer_db_set(h, peer, 1);
                break;
        case NTBF_CAP_SCRATCHPAD:
                *call = "spad_write(0)";
                rc = o->spad_write(h, 0, 0);
                break;
        case NTBF_CAP_MESSAGE:
                *call = "peer_msg_write(partner, 0)";
                rc = o->peer_msg_write(h, peer, 0, 0);
                break;
        case NTBF_CAP_MCAST:
                *call = "mcast_join(group 0)";
                if (!(rc = o->mcast_join(h, 0, NTBF_MiB, 4096)))
                        o->mcast_leave(h, 0);
                break;
        case NTBF_CAP_DMA: {
                uint64_t c;
                int st;
                *call = "dma_poll(chan 0)";
                rc = o->dma_poll(h, 0, &c, &st, 1);
                rc = rc > 0 ? 0 : rc;
                break;
        }
        case NTBF_CAP_SWITCH_RID:
                *call = "switch_rid_add(switch 0)";
                if (!(rc = o->switch_rid_add(h, 0, &rid)))
                        o->switch_rid_del(h, 0, &rid);
                break;
        case NTBF_CAP_IRQ: {
                struct ntbf_irq irq = {.fd = -1};
                *call = "irq_alloc";
                if (!(rc = o->irq_alloc(h, &irq)))
                        o->irq_free(h, &irq);
                break;
        }
        case NTBF_CAP_IOMMU:
                *call = "iommu_map";
                if (!(rc = o->iommu_map(h, NTBF_GiB, NTBF_GiB, 4096)))
                        o->iommu_unmap(h, NTBF_GiB, 4096);
                break;
        case NTBF_CAP_DEV_IOMMU:
                *call = "dev_isolate";
                if (!(rc = o->dev_isolate(h, &rid, true)))
                        o->dev_isolate(h, &rid, false);
                break;
        default:
                break;
        }
        return rc;
}

static bool needs_peer(uint32_t f)
{
        return f == NTBF_CAP_XLAT_OUTBOUND || f == NTBF_CAP_XLAT_INBOUND ||
               f == NTBF_CAP_DOORBELL || f == NTBF_CAP_MESSAGE;
}

/* Flag f (one of the flags f) is claimed exactly when the figure says the feature exists. */
#define IFF(r, ad, f, cond, what)                                                                  \
        CF_TRUE(r, !((ad)->caps.flags & (f)) == !(cond), "%s: %s %s claimed but %s", (ad)->name,   \
                cf_cap_name(f), ((ad)->caps.flags & (f)) ? "is" : "is not", what)

int cf_check_caps_flags(struct cf_run *r)
{
        struct cf_ctx *cx = r->cx;
        struct cf_ad *ad = r->ad;
        const struct ntbf_caps *c = &ad->caps;
        const struct ntbf_adapter *ta = &cx->t->adapters[ad->idx];
        /* The rules of backend.h: callbacks of each claimed flag, flags that exclude each
         * other, flags against their figures, the windows. */
        char why[256];
        CF_TRUE(r, ntbf_caps_valid(cx->ops, c, why, sizeof(why)),
                "%s: ntbf_caps_valid refuses its capabilities: %s", ad->name, why);

        /* Flags against the cluster file: the core plans with the file's figures. */
        IFF(r, ad, NTBF_CAP_XLAT_OUTBOUND, ta->p.xlat & NTBF_XLAT_OUTBOUND,
            "the cluster file's xlat says otherwise");
        IFF(r, ad, NTBF_CAP_XLAT_INBOUND, ta->p.xlat & NTBF_XLAT_INBOUND,
            "the cluster file's xlat says otherwise");
        IFF(r, ad, NTBF_CAP_RID_TABLE, ta->p.rid_table != 0,
            "the cluster file's rid_table says otherwise");
        IFF(r, ad, NTBF_CAP_NO_RID_TABLE, ta->p.rid_table == 0,
            "the cluster file's rid_table says otherwise");
        IFF(r, ad, NTBF_CAP_DMA, ta->p.dma_channels != 0,
            "the cluster file's dma_channels says otherwise");
        IFF(r, ad, NTBF_CAP_DOORBELL, ta->p.doorbells != 0,
            "the cluster file's doorbells says otherwise");
        IFF(r, ad, NTBF_CAP_SCRATCHPAD, ta->p.scratchpads != 0,
            "the cluster file's scratchpads says otherwise");
        IFF(r, ad, NTBF_CAP_MESSAGE, ta->p.messages != 0,
            "the cluster file's messages says otherwise");
        IFF(r, ad, NTBF_CAP_IOMMU | NTBF_CAP_KERNEL_IOMMU, cx->t->nodes[ad->node].iommu,
            "the cluster file's iommu for the node says otherwise");
        CF_TRUE(r, !(c->flags & NTBF_CAP_DEV_IOMMU) || cx->t->nodes[ad->node].iommu,
                "%s claims NTBF_CAP_DEV_IOMMU on a host without an IOMMU", ad->name);

        /* What is not claimed must not work, even when the vtable has the callback (one
         * vtable serves adapters with different features). */
        for (uint32_t f = 1; f <= NTBF_CAP_LAST; f <<= 1) {
                if ((c->flags & f) || f == NTBF_CAP_FAULT || f == NTBF_CAP_NO_RID_TABLE ||
                    f == NTBF_CAP_KERNEL_IOMMU || f == NTBF_CAP_MAP_LIVE ||
                    f == NTBF_CAP_MEM_PHYS || ntbf_cap_missing(cx->ops, f))
                        continue;
                if (f == NTBF_CAP_IOMMU && (c->flags & NTBF_CAP_KERNEL_IOMMU))
                        continue; /* the same IOMMU, claimed the other way */
                if (needs_peer(f) && ad->partner == NTBF_NONE)
                        continue;
                const char *call = "?";
                int rc = probe_unclaimed(cx, ad, f, &call);
                if (rc >= 0)
                        CF_FAIL(r, "%s does not claim %s, yet %s succeeded (it must fail)",
                                ad->name, cf_cap_name(f), call);
        }
        return 0;
}

/* ---- capability figures -----------------------------------------------------------------------
 */

static unsigned popcount64(uint64_t v)
{
        unsigned n = 0;
        for (; v; v &= v - 1)
                n++;
        return n;
}

/* The fewest multicast groups of the switches the adapter is cabled to (0 if none). */
static uint32_t switch_groups(const struct ntbf_topo *t, uint32_t a)
{
        uint32_t g = UINT32_MAX;
        for (uint32_t p = 0; p < NTBF_MAX_ADAPTER_PORTS; p++) {
                uint32_t l = t->adapters[a].link[p];
                if (l == NTBF_NONE)
                        continue;
                struct ntbf_port_ref o =
                    ntbf_link_peer(&t->links[l], (struct ntbf_port_ref){NTBF_PORT_ADAPTER, a, p});
                if (o.kind == NTBF_PORT_SWITCH && t->switches[o.obj].p.mcast_groups < g)
                        g = t->switches[o.obj].p.mcast_groups;
        }
        return g == UINT32_MAX ? 0 : g;
}

/* Whether the suite tests a and b as a pair (either way round) or as sender and member. */
static bool peer_of(const struct cf_ctx *cx, const struct cf_ad *a, const struct cf_ad *b)
{
        for (unsigned i = 0; i < cx->npairs; i++) {
                const struct cf_pair *p = &cx->pairs[i];
                if ((p->a == a && p->b == b) || (p->a == b && p->b == a))
                        return true;
                for (unsigned m = 0; m < p->nmembers; m++)
                        if ((p->a == a && p->members[m] == b) || (p->a == b && p->members[m] == a))
                                return true;
        }
        return false;
}

/*
 * One window against the cluster file's: the same range and slots; alignments the core's
 * plans always satisfy (the file's are multiples of the hardware's), and at least the
 * file's largest translation.
 */
static int window_figures(struct cf_run *r, const char *n, uint32_t i, const struct ntbf_window *hw,
                          const struct ntbf_window *m, const struct cf_ad *ad)
{
        CF_EQ(r, hw->base, m->base, "%s: window %u base against the cluster file", n, i);
        CF_EQ(r, hw->size, m->size, "%s: window %u size against the cluster file", n, i);
        CF_EQ(r, hw->first_slot, m->first_slot, "%s: window %u first_slot", n, i);
        CF_EQ(r, hw->slots, m->slots, "%s: window %u slots against the cluster file", n, i);
        CF_EQ(r, hw->slot_size, m->slot_size, "%s: window %u slot_size against the cluster file", n,
              i);
        CF_EQ(r, hw->reserved, m->reserved, "%s: window %u reserved slots against the cluster file",
              n, i);
        CF_TRUE(r, hw->slot_size >= 4096, "%s: window %u: slots of %#llx bytes, below a page", n, i,
                (unsigned long long)hw->slot_size);
        CF_TRUE(r, hw->addr_align && m->addr_align % hw->addr_align == 0,
                "%s: window %u: the core aligns far addresses to %#llx (the cluster file's "
                "addr_align) but the hardware needs %#llx",
                n, i, (unsigned long long)m->addr_align, (unsigned long long)hw->addr_align);
        CF_TRUE(r, hw->size_align && m->size_align % hw->size_align == 0,
                "%s: window %u: the core sizes translations in multiples of %#llx (the cluster "
                "file's size_align) but the hardware needs %#llx",
                n, i, (unsigned long long)m->size_align, (unsigned long long)hw->size_align);
        CF_TRUE(r, hw->size_max >= m->size_max,
                "%s: window %u: the core plans translations of up to %#llx (the cluster file's "
                "size_max) but the hardware takes %#llx at most",
                n, i, (unsigned long long)m->size_max, (unsigned long long)hw->size_max);
        CF_TRUE(r, !(hw->flags & NTBF_WIN_NATURAL_ALIGN) || (m->flags & NTBF_WIN_NATURAL_ALIGN),
                "%s: window %u needs naturally aligned far addresses, which the cluster file "
                "does not say (addr_align: natural)",
                n, i);
        const struct ntbf_region *reg = ntbf_addrmap_lookup(r->cx->t, ad->node, hw->base);
        CF_TRUE(r,
                reg && reg->kind == NTBF_REGION_WINDOW && reg->obj == ad->idx && reg->index == i &&
                    hw->base - reg->base + hw->size <= reg->size,
                "%s: [%#llx, +%#llx) is not window %u of this adapter in its host's address map", n,
                (unsigned long long)hw->base, (unsigned long long)hw->size, i);
        return 0;
}

int cf_check_caps_figures(struct cf_run *r)
{
        struct cf_ctx *cx = r->cx;
        struct cf_ad *ad = r->ad;
        const char *n = ad->name;
        struct ntbf_caps c;
        memset(&c, 0, sizeof(c));
        CF_OK(r, cx->ops->caps(ad->h, &c), "%s: caps", n);
        const struct ntbf_adapter *ta = &cx->t->adapters[ad->idx];

        CF_EQ(r, c.flags, ad->caps.flags, "%s: caps flags changed between two calls", n);
        CF_EQ(r, c.ports, ta->p.ports, "%s: ports against the cluster file", n);
        CF_TRUE(r, c.ports >= 1 && c.ports <= NTBF_MAX_ADAPTER_PORTS,
                "%s: %u ports (1..%u expected)", n, c.ports, NTBF_MAX_ADAPTER_PORTS);
        CF_EQ(r, c.nwindows, ta->nwin, "%s: windows against the cluster file", n);
        CF_EQ(r, c.slots, ta->nslots, "%s: slots against the cluster file", n);
        for (uint32_t i = 0; i < c.nwindows && i < NTBF_MAX_WINDOWS; i++)
                CF_TRY(window_figures(r, n, i, &c.windows[i], &ta->win[i], ad));
        /* Peers: at least every adapter the suite pairs this one with, and not itself. */
        uint32_t known = 0;
        for (unsigned k = 0; k < cx->nads; k++)
                known += cx->ads[k].idx != ad->idx && peer_of(cx, ad, &cx->ads[k]);
        CF_TRUE(r, c.peers >= known && c.peers < cx->t->nadapters,
                "%s: peers %u, but it reaches at least %u of the suite's adapters and the cluster "
                "has %u adapters in all",
                n, c.peers, known, cx->t->nadapters);
        CF_TRUE(r, c.addr_bits >= 32 && c.addr_bits <= 64, "%s: addr_bits %u (32..64 expected)", n,
                c.addr_bits);
        CF_EQ(r, c.addr_bits, ta->p.addr_bits, "%s: addr_bits against the cluster file", n);

        CF_EQ(r, c.rid_table, ta->p.rid_table, "%s: rid_table against the cluster file", n);
        if (c.rid_table) {
                CF_TRUE(r, c.rid_reserved < c.rid_table,
                        "%s: rid_reserved %u leaves no entry of rid_table %u", n, c.rid_reserved,
                        c.rid_table);
                CF_EQ(r, c.rid_reserved, ta->p.rid_reserved,
                      "%s: rid_reserved against the cluster file", n);
        } else {
                CF_EQ(r, c.rid_reserved, 0, "%s: rid_reserved without a requester table", n);
        }

        uint32_t dbs = ta->p.doorbells > 64 ? 64 : ta->p.doorbells;
        CF_EQ(r, popcount64(c.db_valid_mask), dbs,
              "%s: doorbell bits in db_valid_mask against the cluster file's doorbells", n);
        if (c.db_valid_mask)
                CF_TRUE(r, c.db_vectors >= 1, "%s: doorbells without a vector (db_vectors 0)", n);
        CF_EQ(r, c.scratchpads, ta->p.scratchpads, "%s: scratchpads against the cluster file", n);
        CF_EQ(r, c.messages, ta->p.messages, "%s: messages against the cluster file", n);
        CF_EQ(r, c.dma_channels, ta->p.dma_channels, "%s: dma_channels against the cluster file",
              n);
        if (c.dma_channels) {
                CF_TRUE(r, c.dma_max_len >= 4096, "%s: dma_max_len %llu is below a page", n,
                        (unsigned long long)c.dma_max_len);
                CF_TRUE(r, ntbf_is_pow2(c.dma_align) && c.dma_align <= 4096,
                        "%s: dma_align %u is not a power of two up to a page", n, c.dma_align);
        }
        /* The PCIe multicast capability has at most 64 groups, and every switch of the
         * adapter's network must replicate them. */
        uint32_t g = switch_groups(cx->t, ad->idx);
        CF_TRUE(r, c.mcast_groups <= 64 && c.mcast_groups <= g,
                "%s: mcast_groups %u exceeds what its switches support (%u; 64 at most)", n,
                c.mcast_groups, g);
        return 0;
}

/* ---- events -----------------------------------------------------------------------------------
 */

int cf_check_events_idle(struct cf_run *r)
{
        struct cf_ad *ad = r->ad;
        const struct ntbf_backend_ops *o = r->cx->ops;
        int fd = o->event_fd(ad->h);
        CF_TRUE(r, fd >= 0, "%s: event_fd returned %d", ad->name, fd);
        CF_TRUE(r, fcntl(fd, F_GETFD) != -1, "%s: event_fd %d is not an open descriptor", ad->name,
                fd);
        CF_EQ(r, o->event_fd(ad->h), fd, "%s: event_fd changed between two calls", ad->name);
        /* libuv (the daemon's loop) polls with epoll, which refuses regular files. */
        int ep = epoll_create1(EPOLL_CLOEXEC);
        CF_TRUE(r, ep >= 0, "epoll_create1: %s", strerror(errno));
        struct epoll_event ev = {.events = EPOLLIN};
        int rc = epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        int err = errno;
        close(ep);
        CF_TRUE(r, rc == 0, "%s: event_fd %d cannot be watched with epoll: %s", ad->name, fd,
                strerror(err));

        CF_TRY(cf_drain(r, ad));
        struct pollfd p = {fd, POLLIN, 0};
        CF_TRUE(r, poll(&p, 1, 0) >= 0 && !(p.revents & (POLLNVAL | POLLERR)),
                "%s: poll on event_fd reports an error (revents %#x)", ad->name, p.revents);
        CF_TRUE(r, !(p.revents & POLLIN),
                "%s: event_fd stays readable after process_events with nothing pending: an "
                "event loop would spin",
                ad->name);
        double worst = 0;
        for (int i = 0; i < 10; i++) {
                double t0 = cf_now_ms();
                int n = cf_process(r, ad);
                CF_TRY(n);
                double ms = cf_now_ms() - t0;
                worst = ms > worst ? ms : worst;
                CF_EQ(r, n, 0, "%s: process_events with nothing pending", ad->name);
        }
        CF_TRUE(r, worst < 100,
                "%s: process_events with nothing pending took %.1f ms (it must "
                "not wait)",
                ad->name, worst);
        return 0;
}

int cf_check_events_fd(struct cf_run *r)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        const struct ntbf_backend_ops *o = r->cx->ops;
        bool db = (a->caps.flags & NTBF_CAP_DOORBELL) && (b->caps.flags & NTBF_CAP_DOORBELL);
        if (!db && p->via_switch)
                CF_SKIP(r, "no doorbells, and a switched pair raises no link event at B: nothing "
                           "A can do raises an event at B");
        if (!db && !(a->caps.flags & NTBF_CAP_LINK_CTRL))
                CF_SKIP(r,
                        "not claimed: no doorbells and no NTBF_CAP_LINK_CTRL on %s: nothing A "
                        "can do raises an event at B",
                        a->name);
        int fd = o->event_fd(b->h);
        CF_TRY(cf_drain(r, b));
        CF_TRUE(r, !cf_poll_readable(fd, 0), "%s: event_fd readable with nothing pending", b->name);
        uint64_t bit = b->caps.db_valid_mask & -b->caps.db_valid_mask;
        double t0 = cf_now_ms();
        if (db) {
                CF_OK(r, o->peer_db_set(a->h, b->idx, bit), "%s: peer_db_set(%s, %#llx)", a->name,
                      b->name, (unsigned long long)bit);
        } else {
                cf_undo_link(r, a, p->a_port);
                CF_OK(r, o->link_disable(a->h, p->a_port), "%s: link_disable(port %u)", a->name,
                      p->a_port);
        }
        const char *what = db ? "a doorbell" : "a link change";
        CF_TRUE(r, cf_poll_readable(fd, r->cx->timeout_ms),
                "%s: event_fd did not become readable within %u ms of %s from %s", b->name,
                r->cx->timeout_ms, what, a->name);
        double ms = cf_now_ms() - t0;
        int n = cf_process(r, b);
        CF_TRY(n);
        CF_TRUE(r, n >= 1, "%s: event_fd was readable but process_events dispatched nothing",
                b->name);
        CF_TRUE(r, !cf_poll_readable(fd, 0),
                "%s: event_fd stays readable after process_events: an event loop would spin",
                b->name);
        if (db)
                CF_OK(r, o->db_clear(b->h, bit), "%s: db_clear", b->name);
        else
                CF_OK(r, o->link_enable(a->h, p->a_port), "%s: link_enable", a->name);
        snprintf(r->reason, sizeof(r->reason), "readable %.3f ms after %s", ms, what);
        return 0;
}

/* ---- memory -----------------------------------------------------------------------------------
 */

int cf_check_mem(struct cf_run *r)
{
        struct cf_ctx *cx = r->cx;
        struct cf_ad *ad = r->ad;
        const char *n = ad->name;
        if (!(ad->caps.flags & NTBF_CAP_MEM))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_MEM", n);
        static const struct {
                uint64_t size, align;
        } req[] = {
            {4096, 0},
            {100, 0},
            {3 * 4096, 4096},
            {65536, 65536},
            {NTBF_MiB, NTBF_MiB},
            {4096, 2 * NTBF_MiB},
        };
        enum { N = sizeof(req) / sizeof(req[0]) };
        struct ntbf_mem m[N];
        for (int i = 0; i < N; i++) {
                CF_TRY(cf_mem(r, ad, req[i].size, req[i].align, &m[i]));
                uint64_t al = req[i].align ? req[i].align : 1;
                CF_TRUE(r, m[i].size >= req[i].size, "%s: mem_alloc(%llu) returned %llu bytes", n,
                        (unsigned long long)req[i].size, (unsigned long long)m[i].size);
                CF_EQ(r, m[i].bus_addr % al, 0, "%s: mem_alloc(%llu, align %llu): bus_addr %#llx",
                      n, (unsigned long long)req[i].size, (unsigned long long)al,
                      (unsigned long long)m[i].bus_addr);
                /* Its bus address is physical, unless the kernel mapped it (an IOVA). */
                const struct ntbf_region *reg = ntbf_addrmap_lookup(cx->t, ad->node, m[i].bus_addr);
                CF_TRUE(r,
                        (ad->caps.flags & NTBF_CAP_KERNEL_IOMMU) ||
                            (reg && reg->kind == NTBF_REGION_RAM &&
                             m[i].bus_addr + m[i].size <= reg->base + reg->size),
                        "%s: allocation [%#llx, +%#llx) is not inside the RAM of its host", n,
                        (unsigned long long)m[i].bus_addr, (unsigned long long)m[i].size);
                /* Fresh memory holds nothing of a previous owner. */
                const uint8_t *p = m[i].addr;
                for (uint64_t k = 0; k < m[i].size; k++)
                        if (p[k])
                                CF_FAIL(r,
                                        "%s: fresh allocation at %#llx: byte %llu is %#x, "
                                        "expected 0 (no data of a previous owner)",
                                        n, (unsigned long long)m[i].bus_addr, (unsigned long long)k,
                                        p[k]);
        }
        /* Disjoint, and each keeps its own bytes while the others are written. */
        for (int i = 0; i < N; i++)
                for (int j = 0; j < i; j++)
                        CF_TRUE(r,
                                m[i].bus_addr + m[i].size <= m[j].bus_addr ||
                                    m[j].bus_addr + m[j].size <= m[i].bus_addr,
                                "%s: allocations [%#llx, +%#llx) and [%#llx, +%#llx) overlap", n,
                                (unsigned long long)m[i].bus_addr, (unsigned long long)m[i].size,
                                (unsigned long long)m[j].bus_addr, (unsigned long long)m[j].size);
        for (int i = 0; i < N; i++)
                for (uint64_t k = 0; k + 8 <= m[i].size; k += 8)
                        cf_store64((uint8_t *)m[i].addr + k, cf_pattern((uint32_t)i + 1, k));
        for (int i = 0; i < N; i++)
                for (uint64_t k = 0; k + 8 <= m[i].size; k += 8)
                        CF_EQ(r, cf_load64((uint8_t *)m[i].addr + k),
                              cf_pattern((uint32_t)i + 1, k),
                              "%s: allocation %d, offset %llu, after writing all of them", n, i,
                              (unsigned long long)k);
        /* The descriptor, when there is one, maps the same memory. */
        for (int i = 0; i < N; i++) {
                if (m[i].fd < 0)
                        continue;
                uint64_t pg = m[i].offset % 4096;
                void *q = mmap(NULL, 4096 + pg, PROT_READ, MAP_SHARED, m[i].fd,
                               (off_t)(m[i].offset - pg));
                CF_TRUE(r, q != MAP_FAILED,
                        "%s: cannot mmap the allocation's fd at offset %llu: %s", n,
                        (unsigned long long)m[i].offset, strerror(errno));
                uint64_t v = cf_load64((uint8_t *)q + pg);
                munmap(q, 4096 + pg);
                CF_EQ(r, v, cf_pattern((uint32_t)i + 1, 0), "%s: allocation %d read through its fd",
                      n, i);
        }
        /* Mapped by bus address (another process's view of it), when the backend can. */
        const struct ntbf_backend_ops *o = cx->ops;
        for (int i = 0; o->mem_map && i < N; i++) {
                void *q = NULL;
                CF_OK(r, o->mem_map(ad->h, m[i].bus_addr, m[i].size, &q),
                      "%s: mem_map of allocation %d at %#llx", n, i,
                      (unsigned long long)m[i].bus_addr);
                uint64_t v = cf_load64(q);
                cf_store64((uint8_t *)q + 8, UINT64_C(0x600d) + (uint64_t)i);
                uint64_t back = cf_load64((uint8_t *)m[i].addr + 8);
                CF_OK(r, o->mem_unmap(ad->h, q, m[i].size), "%s: mem_unmap of allocation %d", n, i);
                CF_EQ(r, v, cf_pattern((uint32_t)i + 1, 0),
                      "%s: allocation %d read through mem_map", n, i);
                CF_EQ(r, back, UINT64_C(0x600d) + (uint64_t)i,
                      "%s: a store through mem_map of allocation %d, read at its address", n, i);
        }
        struct ntbf_mem bad;
        CF_RC(r, -EINVAL, cf_mem_try(r, ad, 4096, 3 * 4096, &bad),
              "%s: mem_alloc with an alignment that is not a power of two", n);
        CF_RC(r, -EINVAL, cf_mem_try(r, ad, 0, 0, &bad), "%s: mem_alloc of 0 bytes", n);
        uint64_t gone = m[0].bus_addr, gone_size = m[0].size;
        for (int i = N; i-- > 0;)
                CF_OK(r, cf_mem_free(r, ad, &m[i]), "%s: mem_free of allocation %d", n, i);
        void *q = NULL;
        if (o->mem_map)
                CF_RC(r, -EFAULT, o->mem_map(ad->h, gone, gone_size, &q),
                      "%s: mem_map of memory that was freed", n);
        /* Reused memory holds nothing of its previous owner either: the same requests again
         * get (most likely) the memory just written and freed, and it must read zero. */
        for (int i = 0; i < N; i++) {
                CF_TRY(cf_mem(r, ad, req[i].size, req[i].align, &m[i]));
                const uint8_t *z = m[i].addr;
                for (uint64_t k = 0; k < m[i].size; k++)
                        if (z[k])
                                CF_FAIL(r,
                                        "%s: allocation %d made again after a free, at %#llx: "
                                        "byte %llu is %#x, expected 0 (data of the previous "
                                        "owner)",
                                        n, i, (unsigned long long)m[i].bus_addr,
                                        (unsigned long long)k, z[k]);
        }
        for (int i = N; i-- > 0;)
                CF_OK(r, cf_mem_free(r, ad, &m[i]), "%s: mem_free of allocation %d made again", n,
                      i);
        return 0;
}
