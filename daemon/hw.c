/* daemon/hw.c: the node's adapters: opening the backend, programming entries, link and reset
 * events. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "log.h"
#include "ntbfab/error.h"

static void hw_reprogram(struct ntbf__d *d, uint32_t adapter);

/* ---- events -------------------------------------------------------------------------------- */

struct evctx {
        struct ntbf__d *d;
        uint32_t adapter;
};

static void on_link(void *ctx, uint32_t port, bool up)
{
        struct evctx *e = ctx;
        const struct ntbf_adapter *a = &e->d->t->adapters[e->adapter];
        LOG_W("link of %s.%s port %u is %s", e->d->t->nodes[a->node].name, a->name, port,
              up ? "up" : "down");
        struct json_object *x = json_object_new_object();
        char name[80];
        snprintf(name, sizeof(name), "%s.%s", e->d->t->nodes[a->node].name, a->name);
        ntbf__jput_s(x, "adapter", name);
        ntbf__jput_u(x, "port", port);
        ntbf__node_event(e->d, up ? "link.up" : "link.down", NTBF_NONE, NULL, x);
}

static void on_reset(void *ctx)
{
        struct evctx *e = ctx;
        const struct ntbf_adapter *a = &e->d->t->adapters[e->adapter];
        LOG_W("adapter %s.%s was reset: programming it again", e->d->t->nodes[a->node].name,
              a->name);
        hw_reprogram(e->d, e->adapter);
}

static const struct ntbf_event_ops event_ops = {on_link, NULL, NULL, on_reset};

static void on_poll(uv_poll_t *p, int status, int events)
{
        (void)status;
        (void)events;
        struct evctx *e = p->data;
        e->d->ops->process_events(e->d->h[e->adapter]);
}

/* ---- opening ------------------------------------------------------------------------------- */

int ntbf__hw_open(struct ntbf__d *d, char *why, size_t whylen)
{
        const struct ntbf_topo *t = d->t;
        char no[512];
        d->ops = ntbf_backend_open_ops(t->backend, no, sizeof(no));
        if (!d->ops) {
                snprintf(why, whylen, "cannot drive the cluster's adapters: %s", no);
                return NTBF_EUNSUPPORTED;
        }
        struct ntbf_backend_env env = {t, d->dir, d->self};
        why[0] = 0;
        int r = d->ops->open(&env, &d->b, why, whylen);
        if (r) {
                if (!why[0])
                        snprintf(why, whylen, "cannot open the %s backend: %s", d->ops->name,
                                 ntbf_strerror(r));
                return r;
        }
        d->h = calloc(t->nadapters + 1, sizeof(*d->h));
        d->caps = calloc(t->nadapters + 1, sizeof(*d->caps));
        d->polls = calloc(t->nadapters + 1, sizeof(*d->polls));
        d->poll_on = calloc(t->nadapters + 1, sizeof(*d->poll_on));
        struct evctx *evctx = d->evctx = calloc(t->nadapters + 1, sizeof(*evctx));
        if (!d->h || !d->caps || !d->polls || !d->poll_on || !evctx)
                return -ENOMEM;
        const struct ntbf_node *me = &t->nodes[d->self];
        for (uint32_t i = 0; i < me->nadapters; i++) {
                uint32_t a = me->adapters[i];
                r = d->ops->probe(d->b, a, &d->h[a]);
                if (!r)
                        r = d->ops->caps(d->h[a], &d->caps[a]);
                if (r) {
                        snprintf(why, whylen, "cannot probe adapter %s.%s: %s", me->name,
                                 t->adapters[a].name, ntbf_strerror(r));
                        return r;
                }
                /* A backend that claims what it cannot do would fail later, half way. */
                char bad[400];
                if (!ntbf_caps_valid(d->ops, &d->caps[a], bad, sizeof(bad))) {
                        snprintf(why, whylen,
                                 "the %s backend reports capabilities of adapter %s.%s that "
                                 "break the rules of backend.h: %s",
                                 d->ops->name, me->name, t->adapters[a].name, bad);
                        return NTBF_EPROTO;
                }
                /* The core plans with the cluster file's figures: they must be the
                 * adapter's (a Dolphin adapter's come from SCIQuery, docs/dolphin.md). */
                if (!ntbf_caps_match(t, a, &d->caps[a], bad, sizeof(bad))) {
                        snprintf(why, whylen, "%s: %s (the %s backend's figures)",
                                 t->file ? t->file : "the cluster file", bad, d->ops->name);
                        return NTBF_ECONFIG;
                }
                evctx[a] = (struct evctx){d, a};
                d->ops->set_events(d->h[a], &event_ops, &evctx[a]);
                int fd = d->ops->event_fd(d->h[a]);
                if (fd >= 0 && !uv_poll_init(d->loop, &d->polls[a], fd)) {
                        d->polls[a].data = &evctx[a];
                        uv_poll_start(&d->polls[a], UV_READABLE, on_poll);
                        d->poll_on[a] = true;
                }
        }
        return 0;
}

void ntbf__hw_close(struct ntbf__d *d)
{
        if (!d->h)
                return;
        for (uint32_t a = 0; a < d->t->nadapters; a++)
                if (d->h[a])
                        d->ops->release(d->h[a]);
        if (d->b)
                d->ops->close(d->b);
        free(d->h);
        free(d->caps);
        free(d->polls);
        free(d->poll_on);
        free(d->evctx);
        free(d->proxies);
        d->proxies = NULL;
        d->nproxies = d->capproxies = 0;
        d->evctx = NULL;
        d->h = NULL;
}

struct ntbf_adapter_h *ntbf__hw_any(struct ntbf__d *d, uint32_t cap)
{
        const struct ntbf_node *me = &d->t->nodes[d->self];
        for (uint32_t i = 0; i < me->nadapters; i++) {
                uint32_t a = me->adapters[i];
                if (d->h[a] && (d->caps[a].flags & cap) == cap)
                        return d->h[a];
        }
        return NULL;
}

struct json_object *ntbf__hw_ports(struct ntbf__d *d)
{
        struct json_object *v = json_object_new_array();
        const struct ntbf_node *me = &d->t->nodes[d->self];
        for (uint32_t i = 0; d->h && i < me->nadapters; i++) {
                uint32_t a = me->adapters[i];
                for (uint32_t p = 0; p < d->t->adapters[a].p.ports; p++) {
                        bool up = false;
                        if (d->h[a])
                                d->ops->link_state(d->h[a], p, &up);
                        json_object_array_add(v, json_object_new_boolean(up));
                }
        }
        return v;
}

/* ---- proxy IDs ------------------------------------------------------------------------------- */

void ntbf__hw_proxy_note(struct ntbf__d *d, const struct ntbf__ent *e, uint32_t proxy)
{
        size_t i = 0;
        while (i < d->nproxies &&
               (d->proxies[i].adapter != e->obj || d->proxies[i].rid.node != e->rid.node ||
                d->proxies[i].rid.rid != e->rid.rid || d->proxies[i].rid.mask != e->rid.mask))
                i++;
        if (proxy == NTBF_NONE) {
                if (i < d->nproxies)
                        d->proxies[i] = d->proxies[--d->nproxies];
                return;
        }
        if (i == d->nproxies) {
                if (d->nproxies == d->capproxies) {
                        size_t cap = d->capproxies ? d->capproxies * 2 : 8;
                        struct ntbf__proxy *v = realloc(d->proxies, cap * sizeof(*v));
                        if (!v) {
                                LOG_E("out of memory: proxy ID %04x not recorded", proxy);
                                return;
                        }
                        d->proxies = v;
                        d->capproxies = cap;
                }
                d->nproxies++;
        }
        d->proxies[i] = (struct ntbf__proxy){e->obj, proxy, e->rid};
        LOG_I("requester %04x/%04x leaves %s.%s as proxy ID %02x:%02x.%x", e->rid.rid, e->rid.mask,
              d->t->nodes[d->t->adapters[e->obj].node].name, d->t->adapters[e->obj].name,
              proxy >> 8 & 0xff, proxy >> 3 & 0x1f, proxy & 7);
}

struct json_object *ntbf__hw_proxies(struct ntbf__d *d, uint32_t adapter)
{
        struct json_object *v = json_object_new_array();
        for (size_t i = 0; i < d->nproxies; i++) {
                const struct ntbf__proxy *p = &d->proxies[i];
                if (p->adapter != adapter)
                        continue;
                char rid[32], px[16];
                snprintf(rid, sizeof(rid), "%02x:%02x.%x/%04x", p->rid.rid >> 8,
                         p->rid.rid >> 3 & 0x1f, p->rid.rid & 7, p->rid.mask);
                snprintf(px, sizeof(px), "%02x:%02x.%x", p->proxy >> 8 & 0xff, p->proxy >> 3 & 0x1f,
                         p->proxy & 7);
                struct json_object *x = json_object_new_object();
                ntbf__jput_s(x, "rid", rid);
                ntbf__jput_s(x, "proxy", px);
                json_object_array_add(v, x);
        }
        return v;
}

/* ---- programming ----------------------------------------------------------------------------- */

static int missing(char *why, size_t whylen, const char *what)
{
        snprintf(why, whylen, "this node's backend cannot %s", what);
        return NTBF_EUNSUPPORTED;
}

int ntbf__hw_apply(struct ntbf__d *d, const struct ntbf__ent *e, bool set, char *why, size_t whylen)
{
        const struct ntbf_topo *t = d->t;
        const struct ntbf_backend_ops *o = d->ops;
        struct ntbf_adapter_h *h = NULL;
        int r = 0;
        char desc[200];
        why[0] = 0;
        switch (e->kind) {
        case NTBF_ENT_SLOT: {
                bool owner = t->adapters[e->obj].node == d->self;
                if (owner) {
                        h = d->h[e->obj];
                        if (!h || !o->xlat_set)
                                return missing(why, whylen, "program its own window's slots");
                        struct ntbf_xlat x = {e->dst_node, e->dst_adapter, e->addr, e->group,
                                              e->len};
                        r = set ? o->xlat_set(h, e->slot, &x) : o->xlat_clear(h, e->slot);
                } else {
                        /* Inbound adapters: the buffer owner programs the peer's slot. */
                        h = e->dst_adapter < t->nadapters ? d->h[e->dst_adapter] : NULL;
                        if (!h || !o->peer_xlat_set)
                                return missing(why, whylen, "program a peer's slot");
                        r = set ? o->peer_xlat_set(h, e->obj, e->slot, e->addr, e->len)
                                : o->peer_xlat_clear(h, e->obj, e->slot);
                        if (!set && r == -EPERM)
                                r = 0; /* someone else's translation now: not ours to clear */
                }
                break;
        }
        case NTBF_ENT_RID:
                h = d->h[e->obj];
                if (!h || !o->rid_add)
                        return missing(why, whylen, "program requester IDs");
                uint32_t proxy = NTBF_NONE;
                r = set ? o->rid_add(h, &e->rid, &proxy) : o->rid_del(h, &e->rid);
                if (r == (set ? -EEXIST : -ENOENT))
                        r = 0;
                if (!r)
                        ntbf__hw_proxy_note(d, e, set ? proxy : NTBF_NONE);
                break;
        case NTBF_ENT_SWRID: {
                /* Through an adapter on the switch's network: a node cabled to two networks
                 * has one adapter that can program it (the others say NTBF_ENOPATH). */
                const struct ntbf_node *me = &t->nodes[d->self];
                if (!o->switch_rid_add)
                        return missing(why, whylen, "program switch requester tables");
                r = NTBF_ENOPATH;
                for (uint32_t i = 0; i < me->nadapters && r == NTBF_ENOPATH; i++) {
                        uint32_t a = me->adapters[i];
                        if (!d->h[a] || !(d->caps[a].flags & NTBF_CAP_SWITCH_RID))
                                continue;
                        h = d->h[a];
                        r = set ? o->switch_rid_add(h, e->obj, &e->rid)
                                : o->switch_rid_del(h, e->obj, &e->rid);
                }
                if (!h)
                        return missing(why, whylen, "program switch requester tables");
                if (r == (set ? -EEXIST : -ENOENT))
                        r = 0;
                break;
        }
        case NTBF_ENT_IOMMU:
                h = ntbf__hw_any(d, NTBF_CAP_IOMMU);
                if (!h && ntbf__hw_any(d, NTBF_CAP_KERNEL_IOMMU)) {
                        snprintf(why, whylen,
                                 "the kernel owns this host's IOMMU (NTBF_CAP_KERNEL_IOMMU): "
                                 "only memory for export is reachable from other hosts, so an "
                                 "IOVA mapping of other pages (a borrowed device's DMA window) "
                                 "cannot be made; docs/writing-a-backend.md, \"When the kernel "
                                 "owns the IOMMU\"");
                        return NTBF_EUNSUPPORTED;
                }
                if (!h || !o->iommu_map)
                        return missing(why, whylen, "program its IOMMU");
                if (set) {
                        r = o->iommu_map(h, e->addr, e->phys, e->len);
                        if (r == -EEXIST) { /* make it exactly this mapping */
                                o->iommu_unmap(h, e->addr, e->len);
                                r = o->iommu_map(h, e->addr, e->phys, e->len);
                        }
                } else {
                        r = o->iommu_unmap(h, e->addr, e->len);
                }
                break;
        case NTBF_ENT_DEVISO:
                /* NTBF_CAP_DEV_IOMMU, or a host IOMMU with the isolation callbacks (the sim,
                 * which does not claim the newer bit yet). */
                h = ntbf__hw_any(d, NTBF_CAP_DEV_IOMMU);
                if (!h)
                        h = ntbf__hw_any(d, NTBF_CAP_IOMMU);
                if (!h || !o->dev_isolate)
                        return missing(why, whylen, "isolate its devices (no lender-side IOMMU)");
                r = o->dev_isolate(h, &e->rid, set);
                break;
        case NTBF_ENT_MCAST:
                h = e->obj < t->nadapters ? d->h[e->obj] : NULL;
                if (!h || !o->mcast_join)
                        return missing(why, whylen, "receive multicast groups");
                if (set) {
                        r = o->mcast_join(h, e->group, e->addr, e->len);
                        if (r == NTBF_EBUSY) { /* make it exactly this membership */
                                o->mcast_leave(h, e->group);
                                r = o->mcast_join(h, e->group, e->addr, e->len);
                        }
                } else {
                        r = o->mcast_leave(h, e->group);
                        if (r == -ENOENT)
                                r = 0;
                }
                break;
        case NTBF_ENT_DEVMAP:
                h = ntbf__hw_any(d, NTBF_CAP_DEV_IOMMU);
                if (!h)
                        h = ntbf__hw_any(d, NTBF_CAP_IOMMU);
                if (!h || !o->dev_iommu_map)
                        return missing(why, whylen, "map isolated devices' windows");
                r = set ? o->dev_iommu_map(h, &e->rid, e->addr, e->addr, e->len)
                        : o->dev_iommu_unmap(h, &e->rid, e->addr, e->len);
                if (set && r == -EEXIST)
                        r = 0;
                break;
        default:
                return -EINVAL;
        }
        if (r)
                snprintf(why, whylen, "cannot %s %s: %s", set ? "program" : "clear",
                         ntbf__ent_describe(t, e, desc, sizeof(desc)), ntbf_strerror(r));
        else
                LOG_D("%s %s", set ? "programmed" : "cleared",
                      ntbf__ent_describe(t, e, desc, sizeof(desc)));
        return r;
}

/* After a reset: everything this node programmed, again (entries are idempotent). */
static void hw_reprogram(struct ntbf__d *d, uint32_t adapter)
{
        (void)adapter;
        unsigned n = 0, bad = 0;
        for (int k = 0; k < NTBF_ENT_KINDS; k++)
                for (size_t i = 0; i < d->programmed.n; i++) {
                        struct ntbf__ent e;
                        char why[256];
                        if (ntbf__ent_parse(d->t, d->programmed.v[i], &e) || (int)e.kind != k)
                                continue;
                        if (ntbf__hw_apply(d, &e, true, why, sizeof(why))) {
                                LOG_E("%s", why);
                                bad++;
                        }
                        n++;
                }
        LOG_I("reprogrammed %u entr%s (%u failed)", n, n == 1 ? "y" : "ies", bad);
}
