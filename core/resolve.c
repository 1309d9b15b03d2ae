/* core/resolve.c: where a transaction lands: address maps, windows, LUT slots, IOMMU, multicast. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ntbfab/error.h"
#include "ntbfab/resolve.h"
#include "state.h"

const char *ntbf_landing_name(enum ntbf_landing l)
{
        static const char *const names[] = {"ram", "bar", "msi", "window", "none"};
        return (unsigned)l < sizeof(names) / sizeof(names[0]) ? names[l] : "?";
}

static int fail(struct ntbf_route *o, int result, const char *fmt, ...) NTBF_PRINTF(3, 4);
static int fail(struct ntbf_route *o, int result, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(o->why, sizeof(o->why), fmt, ap);
        va_end(ap);
        o->result = result;
        o->ndests = 0;
        return result;
}

static struct ntbf_route_step *add_step(struct ntbf_route *o, enum ntbf_domain_kind kind,
                                        uint32_t node, uint64_t addr, enum ntbf_landing land)
{
        if (o->nsteps >= NTBF_ROUTE_MAX_STEPS)
                return NULL;
        struct ntbf_route_step *st = &o->steps[o->nsteps++];
        *st = (struct ntbf_route_step){{kind, node}, addr, land, NTBF_NONE, NTBF_NONE};
        return st;
}

/* "the CPU of 'b'" or "a.nvme0 (0000:03:00.0)". */
static const char *requester_name(const struct ntbf_topo *t, const struct ntbf_requester *r,
                                  char *buf, size_t len)
{
        if (r->device == NTBF_NONE) {
                snprintf(buf, len, "the CPU of '%s'", t->nodes[r->node].name);
                return buf;
        }
        const struct ntbf_device *d = &t->devices[r->device];
        char bdf[16];
        uint32_t rid = ntbf_device_rid(d, r->function);
        ntbf_bdf_fmt(d->domain, (uint8_t)(rid >> 8), (uint8_t)(rid >> 3 & 31), (uint8_t)(rid & 7),
                     bdf, sizeof(bdf));
        snprintf(buf, len, "%s.%s (%s)", t->nodes[d->node].name, d->name, bdf);
        return buf;
}

static enum ntbf_landing region_landing(enum ntbf_region_kind k)
{
        switch (k) {
        case NTBF_REGION_RAM:
                return NTBF_LAND_RAM;
        case NTBF_REGION_BAR:
        case NTBF_REGION_VF_BAR:
                return NTBF_LAND_BAR;
        case NTBF_REGION_MSI:
                return NTBF_LAND_MSI;
        case NTBF_REGION_WINDOW:
                return NTBF_LAND_WINDOW;
        }
        return NTBF_LAND_NONE;
}

/* What region r of node n holds at addr, as a destination. */
static struct ntbf_route_dest make_dest(const struct ntbf_topo *t, uint32_t n,
                                        const struct ntbf_region *r, uint64_t addr)
{
        struct ntbf_route_dest d = {n,    region_landing(r->kind), NTBF_NONE, 0, 0,
                                    addr, addr - r->base};
        if (r->kind == NTBF_REGION_BAR || r->kind == NTBF_REGION_VF_BAR) {
                const struct ntbf_device *dev = &t->devices[r->obj];
                uint64_t size =
                    r->kind == NTBF_REGION_BAR ? dev->bars[r->index].size : dev->vf_bars[r->index];
                d.device = r->obj;
                d.bar = r->index;
                d.function = (uint32_t)((addr - r->base) / size) +
                             (r->kind == NTBF_REGION_VF_BAR ? dev->functions : 0);
                d.offset = (addr - r->base) % size;
        }
        return d;
}

/* Deliver at a physical address of node n reached from another host. */
static int land_far(const struct ntbf_state *s, uint32_t n, uint64_t addr, struct ntbf_route *o)
{
        const struct ntbf_topo *t = s->t;
        const struct ntbf_region *r = ntbf_addrmap_lookup(t, n, addr);
        add_step(o, NTBF_DOM_HOST, n, addr, r ? region_landing(r->kind) : NTBF_LAND_NONE);
        if (!r)
                return fail(o, NTBF_EUNREACHABLE,
                            "nothing claims 0x%" PRIx64 " in node '%s': the transaction "
                            "master-aborts there",
                            addr, t->nodes[n].name);
        if (r->kind == NTBF_REGION_WINDOW)
                return fail(o, NTBF_EUNREACHABLE,
                            "0x%" PRIx64 " in node '%s' is the window of adapter %s: traffic does "
                            "not transit a third host, so the model drops it",
                            addr, t->nodes[n].name, t->adapters[r->obj].name);
        o->dests[0] = make_dest(t, n, r, addr);
        o->ndests = 1;
        return 0;
}

/* Translate an IOVA of node n through its IOMMU: a reserved range with a known mapping. */
static int translate_iova(const struct ntbf_state *s, uint32_t n, uint64_t iova,
                          struct ntbf_route *o, uint64_t *phys)
{
        const struct ntbf_topo *t = s->t;
        add_step(o, NTBF_DOM_IOVA, n, iova, NTBF_LAND_NONE);
        const struct ntbf__range *g = ntbf__range_find(s, n, iova);
        if (!g)
                return fail(o, NTBF_EIOMMU_FAULT,
                            "IOVA 0x%" PRIx64 " is not mapped in the IOMMU domain of node '%s' (no "
                            "reserved range holds it): the IOMMU faults",
                            iova, t->nodes[n].name);
        if (!g->maps_to)
                return fail(o, NTBF_EIOMMU_FAULT,
                            "IOVA 0x%" PRIx64 " of node '%s' lies in the range 0x%" PRIx64
                            "-0x%" PRIx64 " reserved for a DMA window, whose pages the driver "
                            "maps at run time; no mapping is known there, so the IOMMU faults",
                            iova, t->nodes[n].name, g->addr, g->addr + g->size - 1);
        *phys = g->maps_to + (iova - g->addr);
        return 0;
}

/* The requester-ID tables along p, and whether the requester is in each. */
static int check_rids(const struct ntbf_state *s, const struct ntbf_requester *rq,
                      const struct ntbf_path *p, struct ntbf_route *o)
{
        const struct ntbf_topo *t = s->t;
        uint32_t key = ntbf__req_key(t, rq);
        int miss = -1;
        for (uint32_t i = 0; i < p->nhops && o->nrids < NTBF_PATH_MAX; i++) {
                const struct ntbf_hop *h = &p->hops[i];
                struct ntbf_route_rid rr;
                if (h->kind == NTBF_HOP_ADAPTER && t->adapters[h->obj].node == rq->node &&
                    t->adapters[h->obj].p.rid_table)
                        rr = (struct ntbf_route_rid){false, h->obj,
                                                     rq->device == NTBF_NONE ||
                                                         ntbf__rset_refs(&s->ad[h->obj].rids, key)};
                else if (h->kind == NTBF_HOP_SWITCH && t->switches[h->obj].p.rid_table)
                        rr = (struct ntbf_route_rid){true, h->obj,
                                                     ntbf__rset_refs(&s->sw[h->obj].reqs, key) > 0};
                else
                        continue;
                if (!rr.present && miss < 0)
                        miss = (int)o->nrids;
                o->rids[o->nrids++] = rr;
        }
        if (miss < 0)
                return 0;
        char rn[96];
        requester_name(t, rq, rn, sizeof(rn));
        const struct ntbf_route_rid *m = &o->rids[miss];
        if (m->is_switch)
                return fail(o, NTBF_ENORID,
                            "switch '%s': %s is not in its requester-ID table, so its ports drop "
                            "the transaction; admit a borrow or mapping for it",
                            t->switches[m->obj].name, rn);
        return fail(o, NTBF_ENORID,
                    "%s.%s: %s is not in the adapter's requester-ID table, so the transaction is "
                    "dropped; admit a borrow or mapping for it",
                    t->nodes[t->adapters[m->obj].node].name, t->adapters[m->obj].name, rn);
}

/* Fan a write into multicast group g out to every member's buffer (not back out its port). */
static int resolve_group(const struct ntbf_state *s, const struct ntbf_requester *rq,
                         struct ntbf_endpoint from, uint32_t ai, uint32_t g, uint64_t off,
                         struct ntbf_route *o)
{
        const struct ntbf_topo *t = s->t;
        uint32_t net = s->adapter_net[ai];
        if (net == NTBF_NONE)
                return fail(o, NTBF_EUNREACHABLE, "adapter %s is cabled to no switch",
                            t->adapters[ai].name);
        /* The write crosses the whole network: the requester must be on every switch. */
        struct ntbf_path p = {0};
        p.hops[p.nhops++] = (struct ntbf_hop){NTBF_HOP_ADAPTER, ai, 0, 0, 0};
        for (uint32_t k = s->net_first[net]; k < s->net_first[net + 1] && p.nhops < NTBF_PATH_MAX;
             k++)
                p.hops[p.nhops++] = (struct ntbf_hop){NTBF_HOP_SWITCH, s->net_sw[k], 0, 0, 0};
        int r = check_rids(s, rq, &p, o);
        if (r)
                return r;
        uint64_t gsize;
        if (ntbf__group_slot(s, net, g, &gsize) == NTBF_NONE)
                return fail(o, NTBF_EUNREACHABLE,
                            "multicast group %u has no member in the switch network of %s.%s; the "
                            "write goes nowhere",
                            g, t->nodes[t->adapters[ai].node].name, t->adapters[ai].name);
        uint32_t latency = 0;
        for (uint32_t i = 0; i < s->nallocs && o->ndests < NTBF_ROUTE_MAX_DESTS; i++) {
                const struct ntbf_plan *m = &s->allocs[i]->plan;
                uint32_t ma = m->path.first_adapter;
                if (m->req.kind != NTBF_REQ_MCAST_JOIN || m->req.target.group != g ||
                    ma == NTBF_NONE || s->adapter_net[ma] != net || ma == ai)
                        continue;
                if (off >= m->req.target.size)
                        continue;
                uint32_t n = m->req.target.node;
                uint64_t addr = m->req.target.addr + off;
                const struct ntbf_region *reg = ntbf_addrmap_lookup(t, n, addr);
                if (!reg)
                        continue;
                o->dests[o->ndests++] = make_dest(t, n, reg, addr);
                struct ntbf_path_opts po = NTBF_PATH_OPTS_INIT;
                po.first_adapter = ai;
                po.last_adapter = ma;
                struct ntbf_path mp;
                if (!ntbf_path_find(t, &po, from, (struct ntbf_endpoint){NTBF_EP_RAM, n, 0}, &mp,
                                    NULL, 0)) {
                        /* An overlay onto device memory goes on from the root complex. */
                        uint32_t lat = mp.latency_ns;
                        if (o->dests[o->ndests - 1].land == NTBF_LAND_BAR)
                                lat += ntbf_device_root_ns(t, o->dests[o->ndests - 1].device);
                        if (lat > latency)
                                latency = lat;
                }
        }
        o->latency_ns = latency;
        if (!o->ndests)
                return fail(o, NTBF_EUNREACHABLE,
                            "multicast group %u has no member but the sender's own port; the "
                            "write goes nowhere",
                            g);
        return 0;
}

int ntbf_resolve(const struct ntbf_state *s, const struct ntbf_requester *req,
                 struct ntbf_domain dom, uint64_t addr, struct ntbf_route *out)
{
        const struct ntbf_topo *t = s->t;
        struct ntbf_route *o = out;
        memset(o, 0, sizeof(*o));
        if (!req || req->node >= t->nnodes || dom.node >= t->nnodes ||
            (req->device != NTBF_NONE &&
             (req->device >= t->ndevices || t->devices[req->device].node != req->node ||
              req->function >= ntbf_device_nfuncs(&t->devices[req->device]))))
                return fail(o, -EINVAL, "the requester or domain names nothing in the topology");
        char rn[96];
        requester_name(t, req, rn, sizeof(rn));
        if (dom.kind == NTBF_DOM_IOVA) {
                /* Inbound traffic seen at the node's IOMMU: translate, then land. */
                uint64_t phys;
                int r = translate_iova(s, dom.node, addr, o, &phys);
                if (r)
                        return r;
                r = land_far(s, dom.node, phys, o);
                if (!r)
                        o->steps[0].land = o->dests[0].land;
                return r;
        }
        if (dom.node != req->node)
                return fail(o, -EINVAL,
                            "%s issues transactions in the address space of node '%s', not '%s'",
                            rn, t->nodes[req->node].name, t->nodes[dom.node].name);
        if (req->device != NTBF_NONE) {
                uint32_t bits = t->devices[req->device].dma_bits;
                if (bits < 64 && addr >> bits) {
                        add_step(o, NTBF_DOM_HOST, req->node, addr, NTBF_LAND_NONE);
                        return fail(o, NTBF_EADDRLIMIT,
                                    "%s addresses %u bits (up to 0x%" PRIx64 ") and cannot issue "
                                    "0x%" PRIx64 "; map the target below that limit",
                                    rn, bits, (UINT64_C(1) << bits) - 1, addr);
                }
        }
        struct ntbf_endpoint from =
            req->device == NTBF_NONE
                ? (struct ntbf_endpoint){NTBF_EP_CPU, req->node, 0}
                : (struct ntbf_endpoint){NTBF_EP_DEVICE, req->node, req->device};
        uint32_t H = req->node;
        const struct ntbf_region *r = ntbf_addrmap_lookup(t, H, addr);
        if (!r) {
                add_step(o, NTBF_DOM_HOST, H, addr, NTBF_LAND_NONE);
                return fail(o, NTBF_EUNREACHABLE,
                            "nothing claims 0x%" PRIx64 " in node '%s' (no RAM, BAR, MSI range or "
                            "window): the transaction of %s master-aborts",
                            addr, t->nodes[H].name, rn);
        }
        struct ntbf_path p;
        if (r->kind != NTBF_REGION_WINDOW) {
                /* In the requester's own host: no NTB on the way. */
                add_step(o, NTBF_DOM_HOST, H, addr, region_landing(r->kind));
                o->dests[0] = make_dest(t, H, r, addr);
                o->ndests = 1;
                struct ntbf_endpoint to = o->dests[0].land == NTBF_LAND_BAR
                                              ? (struct ntbf_endpoint){NTBF_EP_DEVICE, H, r->obj}
                                              : (struct ntbf_endpoint){NTBF_EP_RAM, H, 0};
                if (!ntbf_path_find(t, NULL, from, to, &p, NULL, 0))
                        o->latency_ns = p.latency_ns;
                return 0;
        }
        uint32_t ai = r->obj;
        const struct ntbf_adapter *ad = &t->adapters[ai];
        const struct ntbf_window *W = &ad->win[r->index];
        uint64_t E = W->slot_size, within = addr - r->base;
        uint32_t k = W->first_slot + (uint32_t)(within / E);
        uint64_t kb = r->base + (k - W->first_slot) * E; /* the slot's first byte */
        struct ntbf_route_step *st = add_step(o, NTBF_DOM_HOST, H, addr, NTBF_LAND_WINDOW);
        st->adapter = ai;
        st->slot = k;
        const struct ntbf__slot *sl = &s->ad[ai].slots[k];
        if (!sl->refs)
                return fail(o, NTBF_EUNPROGRAMMED,
                            "%s.%s: slot %u (window 0x%" PRIx64 "-0x%" PRIx64 ") is not "
                            "programmed, so the access of %s at 0x%" PRIx64 " is not translated",
                            t->nodes[H].name, ad->name, k, kb, kb + E - 1, rn, addr);
        if (within % E >= sl->xsize)
                return fail(o, NTBF_EUNPROGRAMMED,
                            "%s.%s: slot %u translates its first 0x%" PRIx64 " bytes only, so "
                            "the access of %s at 0x%" PRIx64 " past them is not translated",
                            t->nodes[H].name, ad->name, k, sl->xsize, rn, addr);
        uint64_t far = sl->dst_addr + within % E;
        if (sl->dest == NTBF_DEST_MCAST)
                return resolve_group(s, req, from, ai, sl->group, far, o);
        uint32_t n = sl->dst_node;
        struct ntbf_path_opts po = NTBF_PATH_OPTS_INIT;
        po.first_adapter = ai;
        po.last_adapter = sl->dst_adapter;
        char pwhy[256] = "";
        int rr = ntbf_path_find(t, &po, from, (struct ntbf_endpoint){NTBF_EP_RAM, n, 0}, &p, pwhy,
                                sizeof(pwhy));
        if (rr)
                return fail(o, rr, "%s", pwhy);
        if ((rr = check_rids(s, req, &p, o)))
                return rr;
        uint64_t phys = far;
        if (sl->dest == NTBF_DEST_IOVA && (rr = translate_iova(s, n, far, o, &phys)))
                return rr;
        if ((rr = land_far(s, n, phys, o)))
                return rr;
        if (sl->dest == NTBF_DEST_IOVA)
                o->steps[o->nsteps - 2].land = o->dests[0].land;
        o->latency_ns = p.latency_ns;
        if (o->dests[0].land == NTBF_LAND_BAR) /* on from the root complex to the device */
                o->latency_ns += ntbf_device_root_ns(t, o->dests[0].device);
        return 0;
}
