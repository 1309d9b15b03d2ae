/* backends/sim/route.c: static routes between adapters and the routing of each transaction. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* ---- static routes (creation time) ----------------------------------------------------------- */

/*
 * For every ordered pair of adapters A, D of different hosts: the least-latency path from
 * A's host leaving through A to D's host entering through D, with every link up. Only the
 * hops from A to D are kept (adapters, cables, switches): what a transaction crosses.
 * Switch routing is static (article 6.3), so this is computed once, never per transaction.
 */
int ntbf__sim_routes_build(const struct ntbf_topo *t, struct sim_route **routes_out,
                           struct ntbf_hop **hops_out, uint32_t *nhops_out)
{
        uint32_t na = t->nadapters;
        struct sim_route *routes = calloc((size_t)na * na + 1, sizeof(*routes));
        uint32_t cap = 64, n = 0;
        struct ntbf_hop *hops = malloc(cap * sizeof(*hops));
        struct ntbf_path *p = malloc(sizeof(*p));
        int r = 0;
        if (!routes || !hops || !p) {
                r = -ENOMEM;
                goto fail;
        }
        for (uint32_t a = 0; a < na; a++) {
                for (uint32_t d = 0; d < na; d++) {
                        uint32_t an = t->adapters[a].node, dn = t->adapters[d].node;
                        if (an == dn)
                                continue;
                        struct ntbf_path_opts o = NTBF_PATH_OPTS_INIT;
                        o.first_adapter = a;
                        o.last_adapter = d;
                        struct ntbf_endpoint from = {NTBF_EP_CPU, an, NTBF_NONE};
                        struct ntbf_endpoint to = {NTBF_EP_RAM, dn, NTBF_NONE};
                        if (ntbf_path_find(t, &o, from, to, p, NULL, 0))
                                continue; /* unreachable: slots to D are refused */
                        struct sim_route *rt = &routes[(uint64_t)a * na + d];
                        rt->first = n;
                        for (uint32_t i = 0; i < p->nhops; i++) {
                                const struct ntbf_hop *h = &p->hops[i];
                                if (h->kind == NTBF_HOP_ROOT || h->kind == NTBF_HOP_DEVICE)
                                        continue;
                                if (n == cap) {
                                        cap *= 2;
                                        struct ntbf_hop *nh = realloc(hops, cap * sizeof(*hops));
                                        if (!nh) {
                                                r = -ENOMEM;
                                                goto fail;
                                        }
                                        hops = nh;
                                }
                                hops[n++] = *h;
                                rt->latency_ns += h->latency_ns;
                        }
                        rt->nhops = (uint16_t)(n - rt->first);
                        rt->valid = 1;
                }
        }
        free(p);
        *routes_out = routes;
        *hops_out = hops;
        *nhops_out = n;
        return 0;
fail:
        free(routes);
        free(hops);
        free(p);
        return r;
}

/* ---- checks on the way --------------------------------------------------------------------- */

static inline bool rid_in(const _Atomic uint64_t *tab, uint32_t n, uint32_t node, uint16_t rid)
{
        for (uint32_t i = 0; i < n; i++)
                if (rid_match(atomic_load_explicit(&tab[i], memory_order_relaxed), node, rid))
                        return true;
        return false;
}

bool ntbf__sim_rid_ok(struct ntbf_sim *s, uint32_t a, uint32_t node, uint16_t rid)
{
        const struct sim_adapter *x = &s->ad[a];
        return !x->nrids || rid_in(sim_rids(s, a), x->nrids, node, rid);
}

bool ntbf__sim_link_up(struct ntbf_sim *s, uint32_t link)
{
        return atomic_load_explicit(&s->links[link].state, memory_order_acquire) == 0;
}

int ntbf__sim_route_ok(struct ntbf_sim *s, uint32_t a, uint32_t d, uint32_t node, uint16_t rid)
{
        const struct sim_route *rt = sim_route(s, a, d);
        if (!rt->valid)
                return NTBF_EUNREACHABLE;
        const struct ntbf_hop *h = &s->hops[rt->first];
        for (uint32_t i = 0; i < rt->nhops; i++) {
                if (h[i].kind == NTBF_HOP_LINK) {
                        if (!ntbf__sim_link_up(s, h[i].obj))
                                return NTBF_ELINKDOWN;
                } else if (h[i].kind == NTBF_HOP_SWITCH) {
                        /* The requester needs its ingress mapping on the port it enters and
                         * its outgoing mapping on the port it leaves (article 8.6). */
                        const struct sim_switch *sw = &s->sw[h[i].obj];
                        if (!sw->nrids)
                                continue;
                        if (!rid_in(sim_swrids(s, h[i].obj, h[i].in_port), sw->nrids, node, rid) ||
                            !rid_in(sim_swrids(s, h[i].obj, h[i].out_port), sw->nrids, node, rid))
                                return NTBF_ENORID;
                }
        }
        return 0;
}

/* ---- one piece of a transaction ------------------------------------------------------------ */

static inline uint64_t min64(uint64_t a, uint64_t b)
{
        return a < b ? a : b;
}

static void drop(struct sim_hit *h, int err, uint32_t on)
{
        h->err = err;
        h->drop_on = on;
}

/* The piece lands in region r of node at addr: set the backing file and clip the length. */
static void land(struct ntbf_sim *s, struct sim_hit *h, uint32_t node, const struct ntbf_region *r,
                 uint64_t addr)
{
        h->node = node;
        h->addr = addr;
        h->kind = r->kind;
        h->len = min64(h->len, r->base + r->size - addr);
        switch (r->kind) {
        case NTBF_REGION_RAM:
                h->fkind = SF_RAM;
                h->fobj = node;
                h->foff = ntbf__sim_ram_off(s, node, r, addr);
                break;
        case NTBF_REGION_BAR:
        case NTBF_REGION_VF_BAR:
                h->fkind = r->kind == NTBF_REGION_BAR ? SF_BAR : SF_VFBAR;
                h->fobj = r->obj * NTBF_MAX_BARS + r->index;
                h->foff = addr - r->base;
                break;
        default:
                break;
        }
}

/* Landing after the far root complex: a BAR is further on, through its slot or chassis. */
static void land_in(struct ntbf_sim *s, struct sim_hit *h, uint32_t node,
                    const struct ntbf_region *r, uint64_t addr)
{
        land(s, h, node, r, addr);
        if (r->kind == NTBF_REGION_BAR || r->kind == NTBF_REGION_VF_BAR)
                h->latency_ns += ntbf_device_root_ns(s->t, r->obj);
}

void ntbf__sim_inbound(struct ntbf_sim *s, uint32_t in, uint64_t addr, uint64_t len,
                       struct sim_hit *h)
{
        uint32_t node = s->ad[in].node;
        h->in = in;
        h->node = node;
        h->len = len;
        h->latency_ns += s->t->nodes[node].root_ns;
        if (!atomic_load_explicit(&s->nodes[node].alive, memory_order_acquire)) {
                drop(h, NTBF_EUNREACHABLE, in);
                return;
        }
        const struct ntbf_region *r = ntbf_addrmap_lookup(s->t, node, addr);
        if (!s->nodes[node].iommu) {
                /* No transit through a third host: a window on the far side claims nothing. */
                if (!r || r->kind == NTBF_REGION_WINDOW) {
                        h->len = min64(len, SIM_PAGE - addr % SIM_PAGE);
                        drop(h, NTBF_EUNREACHABLE, in);
                        return;
                }
                land_in(s, h, node, r, addr);
                return;
        }
        if (r && r->kind != NTBF_REGION_RAM) {
                /* Interrupts and peer-to-peer bypass the IOMMU in the model (docs/model.md). */
                if (r->kind == NTBF_REGION_WINDOW) {
                        h->len = min64(len, r->base + r->size - addr);
                        drop(h, NTBF_EUNREACHABLE, in);
                        return;
                }
                land_in(s, h, node, r, addr);
                return;
        }
        /* Anything else is an I/O virtual address: translated page by page. */
        h->len = min64(len, SIM_PAGE - addr % SIM_PAGE);
        uint64_t phys = ntbf__sim_iommu_lookup(s, node, addr);
        if (phys == UINT64_MAX) {
                drop(h, NTBF_EIOMMU_FAULT, in);
                return;
        }
        const struct ntbf_region *pr = ntbf_addrmap_lookup(s->t, node, phys);
        if (!pr || (pr->kind != NTBF_REGION_RAM && pr->kind != NTBF_REGION_BAR &&
                    pr->kind != NTBF_REGION_VF_BAR)) {
                drop(h, NTBF_EUNREACHABLE, in);
                return;
        }
        land_in(s, h, node, pr, phys);
}

void ntbf__sim_route(struct ntbf_sim *s, uint32_t node, uint32_t device, uint16_t rid,
                     uint64_t addr, uint64_t len, bool write, bool count, struct sim_hit *h)
{
        h->err = 0;
        h->drop_on = h->out = h->in = h->group = NTBF_NONE;
        h->node = node;
        h->addr = addr;
        h->len = len;
        h->kind = NTBF_REGION_RAM;
        h->fkind = SF_ONES; /* no backing file until the piece lands in RAM or a BAR */
        h->fobj = 0;
        h->foff = 0;
        /* Up to the requester's root complex, and through it (docs/model.md). */
        h->latency_ns = ntbf_topo_local_ns(s->t, node, device, NTBF_NONE);
        h->fault_func = NTBF_NONE;
        if (device != NTBF_NONE || rid != NTBF_SIM_RID_CPU) {
                /*
                 * An isolated function's DMA goes through its own IOMMU domain first. The
                 * IOMMU knows the requester by routing ID alone, so a transaction issued
                 * without naming the device is looked up by its ID.
                 */
                uint32_t k = device != NTBF_NONE ? ntbf__sim_func_of(s, device, rid)
                                                 : ntbf__sim_func_by_rid(s, node, rid);
                if (k != NTBF_NONE &&
                    unlikely(atomic_load_explicit(&s->funcs[k].isolated, memory_order_acquire))) {
                        h->len = len = min64(len, SIM_PAGE - addr % SIM_PAGE);
                        uint64_t phys = ntbf__sim_dev_translate(s, k, addr);
                        if (phys == UINT64_MAX) {
                                h->fault_func = k;
                                drop(h, NTBF_EIOMMU_FAULT, NTBF_NONE);
                                return;
                        }
                        h->addr = addr = phys;
                }
        }
        const struct ntbf_region *r = ntbf_addrmap_lookup(s->t, node, addr);
        if (!r) {
                h->len = min64(len, SIM_PAGE - addr % SIM_PAGE);
                drop(h, NTBF_EUNREACHABLE, NTBF_NONE);
                return;
        }
        if (r->kind != NTBF_REGION_WINDOW) {
                land(s, h, node, r, addr);
                /* In the requester's own host: a peer in its chassis is met in the switch. */
                bool bar = r->kind == NTBF_REGION_BAR || r->kind == NTBF_REGION_VF_BAR;
                h->latency_ns = ntbf_topo_local_ns(s->t, node, device, bar ? r->obj : NTBF_NONE);
                if (r->kind == NTBF_REGION_MSI && !write)
                        drop(h, NTBF_EUNREACHABLE, NTBF_NONE);
                return;
        }
        uint32_t a = r->obj;
        struct sim_adapter *x = &s->ad[a];
        const struct ntbf_window *w = &s->t->adapters[a].win[r->index];
        uint64_t off = addr - r->base, in = off % w->slot_size, size;
        uint64_t e = sim_slot_read(s, a, w->first_slot + (uint32_t)(off / w->slot_size), &size);
        h->out = a;
        h->kind = NTBF_REGION_WINDOW;
        /* Past the translation's size the slot is unprogrammed up to its end. */
        if (!(e & SLOT_VALID) || in >= size) {
                h->len = min64(len, w->slot_size - in);
                drop(h, NTBF_EUNPROGRAMMED, a);
                return;
        }
        h->len = min64(len, size - in);
        if (x->nrids && !rid_in(sim_rids(s, a), x->nrids, node, rid)) {
                drop(h, NTBF_ENORID, a);
                return;
        }
        uint64_t far = (e & SLOT_ADDR) + in;
        if (e & SLOT_MCAST) {
                h->group = SLOT_TARGET(e);
                h->goff = far;
                if (!write)
                        drop(h, NTBF_EUNREACHABLE, a); /* multicast is for posted writes */
                else if (count)
                        atomic_fetch_add_explicit(&x->ctr.tx, 1, memory_order_relaxed);
                return;
        }
        uint32_t d = SLOT_TARGET(e);
        int err = ntbf__sim_route_ok(s, a, d, node, rid);
        if (err) {
                drop(h, err, a);
                return;
        }
        h->latency_ns += sim_route(s, a, d)->latency_ns;
        if (count)
                atomic_fetch_add_explicit(&x->ctr.tx, 1, memory_order_relaxed);
        ntbf__sim_inbound(s, d, far, h->len, h);
        if (!h->err && h->kind == NTBF_REGION_MSI && !write)
                drop(h, NTBF_EUNREACHABLE, d);
        if (count) /* it came in through D, whatever happens there next */
                atomic_fetch_add_explicit(&s->ad[d].ctr.rx, 1, memory_order_relaxed);
}

/* ---- whole transactions -------------------------------------------------------------------- */

static void count_drop(struct ntbf_sim *s, uint32_t a, int err)
{
        if (a == NTBF_NONE)
                return;
        struct sim_counters *c = &s->ad[a].ctr;
        _Atomic uint64_t *v = NULL;
        switch (err) {
        case NTBF_ENORID:
                v = &c->drop_no_rid;
                break;
        case NTBF_EUNPROGRAMMED:
                v = &c->drop_unprogrammed;
                break;
        case NTBF_ELINKDOWN:
                v = &c->drop_link_down;
                break;
        case NTBF_EIOMMU_FAULT:
                v = &c->iommu_fault;
                break;
        default:
                v = &c->master_abort;
                break;
        }
        atomic_fetch_add_explicit(v, 1, memory_order_relaxed);
}

/* Move the bytes of a piece that was routed without error. */
static int deliver(struct ntbf_sim *s, const struct sim_hit *h, uint8_t *buf, bool write)
{
        if (h->kind == NTBF_REGION_MSI) {
                /* An MSI is a DWORD write whose data names the vector (docs/sim.md). */
                if (h->len >= 4) {
                        uint32_t data;
                        memcpy(&data, buf, 4);
                        ntbf__sim_msi(s, h->node, data);
                }
                return 0;
        }
        uint8_t *base = sim_file(s, h->fkind, h->fobj);
        if (unlikely(!base))
                return NTBF_EUNREACHABLE;
        uint8_t *p = base + h->foff;
        /* A naturally aligned DWORD or QWORD is one store or load, never torn (devmodel.h):
         * NVMe phase tags and MSI-X data rely on it. */
        if (h->len == 8 && !((uintptr_t)p & 7)) {
                uint64_t v;
                if (write) {
                        memcpy(&v, buf, 8);
                        __atomic_store_n((uint64_t *)p, v, __ATOMIC_RELEASE);
                } else {
                        v = __atomic_load_n((uint64_t *)p, __ATOMIC_ACQUIRE);
                        memcpy(buf, &v, 8);
                }
        } else if (h->len == 4 && !((uintptr_t)p & 3)) {
                uint32_t v;
                if (write) {
                        memcpy(&v, buf, 4);
                        __atomic_store_n((uint32_t *)p, v, __ATOMIC_RELEASE);
                } else {
                        v = __atomic_load_n((uint32_t *)p, __ATOMIC_ACQUIRE);
                        memcpy(buf, &v, 4);
                }
        } else if (write) {
                memcpy(p, buf, h->len);
        } else {
                memcpy(buf, p, h->len);
        }
        return 0;
}

/* A write to a multicast slot: one copy to every member, each along its own route. */
static int mcast_write(struct ntbf_sim *s, uint32_t node, uint16_t rid, const struct sim_hit *h,
                       const uint8_t *buf)
{
        int first = 0;
        for (uint32_t m = 0; m < s->t->nadapters; m++) {
                uint64_t base, size;
                if (m == h->out || h->group >= s->ad[m].ngroups ||
                    !ntbf__sim_mcast_get(s, m, h->group, &base, &size))
                        continue;
                int err = ntbf__sim_route_ok(s, h->out, m, node, rid);
                if (err) {
                        count_drop(s, h->out, err);
                        first = first ? first : err;
                        continue;
                }
                atomic_fetch_add_explicit(&s->ad[m].ctr.rx, 1, memory_order_relaxed);
                /* Bytes past the member's overlay are not for it. */
                uint64_t goff = h->goff, left = h->len;
                const uint8_t *p = buf;
                while (left && goff < size) {
                        struct sim_hit mh = {.latency_ns = 0};
                        mh.group = NTBF_NONE;
                        ntbf__sim_inbound(s, m, base + goff, min64(left, size - goff), &mh);
                        if (!mh.err)
                                mh.err = deliver(s, &mh, (uint8_t *)p, true);
                        if (mh.err) {
                                count_drop(s, mh.drop_on, mh.err);
                                first = first ? first : mh.err;
                        }
                        goff += mh.len;
                        p += mh.len;
                        left -= mh.len;
                }
        }
        return first;
}

static void trace_path(struct ntbf_sim *s, uint32_t node, uint32_t device, const struct sim_hit *h,
                       struct ntbf_path *p)
{
        memset(p, 0, sizeof(*p));
        p->first_adapter = p->last_adapter = NTBF_NONE;
        p->from = (struct ntbf_endpoint){device != NTBF_NONE ? NTBF_EP_DEVICE : NTBF_EP_CPU, node,
                                         device};
        uint32_t dst = h->err ? node : h->node;
        bool bar = !h->err && (h->kind == NTBF_REGION_BAR || h->kind == NTBF_REGION_VF_BAR);
        uint32_t tdev = NTBF_NONE;
        if (bar) {
                const struct ntbf_region *r = ntbf_addrmap_lookup(s->t, h->node, h->addr);
                tdev = r ? r->obj : NTBF_NONE;
        }
        p->to = (struct ntbf_endpoint){tdev != NTBF_NONE ? NTBF_EP_DEVICE : NTBF_EP_RAM, dst, tdev};
#define ADD(k, o, lat)                                                                             \
        do {                                                                                       \
                if (p->nhops < NTBF_PATH_MAX) {                                                    \
                        p->hops[p->nhops++] =                                                      \
                            (struct ntbf_hop){(k), (o), NTBF_NONE, NTBF_NONE, (lat)};              \
                        p->latency_ns += (lat);                                                    \
                }                                                                                  \
        } while (0)
        const struct ntbf_topo *t = s->t;
        uint32_t ca = device != NTBF_NONE ? t->devices[device].chassis : NTBF_NONE;
        uint32_t ct = tdev != NTBF_NONE ? t->devices[tdev].chassis : NTBF_NONE;
        bool remote = h->out != NTBF_NONE && h->in != NTBF_NONE;
        bool in_chassis = !remote && h->out == NTBF_NONE && ca != NTBF_NONE && ca == ct;
        if (device != NTBF_NONE)
                ADD(NTBF_HOP_DEVICE, device, t->devices[device].hop_ns);
        if (ca != NTBF_NONE)
                ADD(NTBF_HOP_CHASSIS, ca,
                    t->chassis[ca].hop_ns + (in_chassis ? 0 : t->chassis[ca].uplink_ns));
        if (!in_chassis)
                ADD(NTBF_HOP_ROOT, node, t->nodes[node].root_ns);
        if (remote) {
                const struct sim_route *rt = sim_route(s, h->out, h->in);
                for (uint32_t i = 0; i < rt->nhops && p->nhops < NTBF_PATH_MAX; i++) {
                        p->hops[p->nhops++] = s->hops[rt->first + i];
                        p->latency_ns += s->hops[rt->first + i].latency_ns;
                }
                p->first_adapter = h->out;
                p->last_adapter = h->in;
                ADD(NTBF_HOP_ROOT, h->node, t->nodes[h->node].root_ns);
        } else if (h->out != NTBF_NONE) {
                ADD(NTBF_HOP_ADAPTER, h->out, t->adapters[h->out].p.hop_ns);
                p->first_adapter = p->last_adapter = h->out;
        }
        if (ct != NTBF_NONE && !in_chassis)
                ADD(NTBF_HOP_CHASSIS, ct, t->chassis[ct].hop_ns + t->chassis[ct].uplink_ns);
        if (tdev != NTBF_NONE)
                ADD(NTBF_HOP_DEVICE, tdev, t->devices[tdev].hop_ns);
#undef ADD
}

int ntbf__sim_xfer(struct ntbf_sim *s, uint32_t node, uint32_t device, uint16_t rid, uint64_t addr,
                   void *buf, size_t len, bool write, struct ntbf_sim_trace *tr)
{
        uint8_t *p = buf;
        int first = 0;
        uint32_t pieces = 0;
        while (len) {
                struct sim_hit h;
                ntbf__sim_route(s, node, device, rid, addr, len, write, true, &h);
                int err = h.err;
                if (!err && h.group != NTBF_NONE)
                        err = mcast_write(s, node, rid, &h, p);
                else if (!err)
                        err = h.err = deliver(s, &h, p, write);
                else
                        count_drop(s, h.drop_on, err);
                if (h.fault_func != NTBF_NONE)
                        atomic_fetch_add_explicit(&s->funcs[h.fault_func].iommu_faults, 1,
                                                  memory_order_relaxed);
                if (h.err && !write)
                        memset(p, 0xff, h.len);
                if (err && !first)
                        first = err;
                if (tr && !pieces) {
                        tr->latency_ns = write ? h.latency_ns : 2 * h.latency_ns;
                        tr->out_adapter = h.out;
                        tr->in_adapter = h.in;
                        tr->drop_adapter = h.err ? h.drop_on : NTBF_NONE;
                        tr->dst_node = h.err ? NTBF_NONE : h.node;
                        tr->dst_addr = h.addr;
                        tr->dst_kind = h.kind;
                        trace_path(s, node, device, &h, &tr->path);
                }
                p += h.len;
                addr += h.len;
                len -= h.len;
                pieces++;
        }
        if (tr) {
                tr->status = first;
                tr->pieces = pieces;
        }
        return first;
}

static int xfer_check(struct ntbf_sim *s, uint32_t node, uint32_t device, const void *buf)
{
        if (!s || node >= s->t->nnodes || (!buf))
                return -EINVAL;
        if (device != NTBF_NONE && (device >= s->t->ndevices || s->t->devices[device].node != node))
                return -EINVAL;
        return 0;
}

int ntbf_sim_read(struct ntbf_backend *b, uint32_t node, uint32_t device, uint16_t rid,
                  uint64_t addr, void *buf, size_t len, struct ntbf_sim_trace *tr)
{
        struct ntbf_sim *s = ntbf__sim_of(b);
        int r = xfer_check(s, node, device, buf);
        if (r)
                return r;
        return ntbf__sim_xfer(s, node, device, rid, addr, buf, len, false, tr);
}

int ntbf_sim_write(struct ntbf_backend *b, uint32_t node, uint32_t device, uint16_t rid,
                   uint64_t addr, const void *buf, size_t len, struct ntbf_sim_trace *tr)
{
        struct ntbf_sim *s = ntbf__sim_of(b);
        int r = xfer_check(s, node, device, buf);
        if (r)
                return r;
        return ntbf__sim_xfer(s, node, device, rid, addr, (void *)buf, len, true, tr);
}
