/* frontends/lending/device.c: devices: open, config space, BARs, DMA, MSI-X, peers, events. */
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lending.h"

#define PAGE 4096u

/* PCI registers the API itself touches (PCI Local Bus 3.0, PCIe Base 4.0). */
#define PCI_STATUS        0x06
#define PCI_STATUS_CAPS   0x10
#define PCI_CAP_PTR       0x34
#define PCI_CAP_ID_MSIX   0x11
#define MSIX_FLAGS        0x02
#define MSIX_TABLE        0x04
#define MSIX_QSIZE        0x07ff
#define MSIX_MASKALL      0x4000
#define MSIX_ENABLE       0x8000
#define MSIX_ENTRY_SIZE   16
#define MSIX_ENTRY_MASKED 1u

/* ---- the fast-path lock --------------------------------------------------------------------- */

/*
 * DMA map/unmap hold a per-device spinlock for the few tens of nanoseconds of an IOVA
 * allocation and an IOMMU update: cheaper than a mutex uncontended, and it yields to the
 * scheduler if the holder was preempted.
 */
static inline void spin_lock(atomic_int *l)
{
        for (unsigned n = 0; atomic_exchange_explicit(l, 1, memory_order_acquire); n++) {
                while (atomic_load_explicit(l, memory_order_relaxed)) {
#if defined(__x86_64__) || defined(__i386__)
                        __builtin_ia32_pause();
#endif
                        if (++n > 256) {
                                sched_yield();
                                n = 0;
                        }
                }
        }
}

static inline void spin_unlock(atomic_int *l)
{
        atomic_store_explicit(l, 0, memory_order_release);
}

/* ---- parsing device.open ------------------------------------------------------------------ */

struct parse {
        struct ntbf_dev *d;
        const char *what; /* "device.open" */
        int err;
};

static int bad(struct parse *p, const char *fmt, const char *key)
{
        char msg[256];
        snprintf(msg, sizeof(msg), fmt, key);
        p->err = ntbf__fail(p->d->ctx, NTBF_EPROTO, "%s: the daemon's answer %s (docs/rpc.md)",
                            p->what, msg);
        return p->err;
}

/* An unsigned integer member; absent leaves *v and returns 1 (or fails when required). */
static int get_u64(struct parse *p, struct json_object *o, const char *key, bool required,
                   uint64_t *v)
{
        struct json_object *x;
        if (!o || !json_object_object_get_ex(o, key, &x) || json_object_is_type(x, json_type_null))
                return required ? bad(p, "has no '%s'", key) : 1;
        if (!json_object_is_type(x, json_type_int) || json_object_get_int64(x) < 0)
                return bad(p, "has a '%s' that is not an unsigned integer", key);
        *v = json_object_get_uint64(x);
        return 0;
}

static void get_str(struct json_object *o, const char *key, char *buf, size_t len)
{
        struct json_object *x;
        if (o && json_object_object_get_ex(o, key, &x) && json_object_is_type(x, json_type_string))
                snprintf(buf, len, "%s", json_object_get_string(x));
}

static bool get_bool(struct json_object *o, const char *key, bool dflt)
{
        struct json_object *x;
        if (o && json_object_object_get_ex(o, key, &x) && json_object_is_type(x, json_type_boolean))
                return json_object_get_boolean(x);
        return dflt;
}

static struct json_object *get_obj(struct json_object *o, const char *key)
{
        struct json_object *x;
        if (o && json_object_object_get_ex(o, key, &x) && json_object_is_type(x, json_type_object))
                return x;
        return NULL;
}

/*
 * An adapter named in the answer: its topology index, or its name ("ntb0", or
 * "node.ntb0"); docs/rpc.md leaves the form open. It must be one of this node's.
 */
static int get_adapter(struct parse *p, struct json_object *o, uint32_t *out)
{
        struct ntbf_ctx *ctx = p->d->ctx;
        const struct ntbf_topo *t = ctx->topo;
        struct json_object *x;
        if (!o || !json_object_object_get_ex(o, "adapter", &x))
                return bad(p, "has no '%s'", "adapter");
        uint32_t a = NTBF_NONE;
        if (json_object_is_type(x, json_type_int)) {
                int64_t v = json_object_get_int64(x);
                if (v >= 0 && v < (int64_t)t->nadapters)
                        a = (uint32_t)v;
        } else if (json_object_is_type(x, json_type_string)) {
                const char *s = json_object_get_string(x), *dot = strchr(s, '.');
                if (dot && (size_t)(dot - s) == strlen(ctx->node) &&
                    !strncmp(s, ctx->node, dot - s))
                        s = dot + 1;
                a = ntbf_topo_find_adapter(t, ctx->node_idx, s);
        }
        if (a == NTBF_NONE || t->adapters[a].node != ctx->node_idx || !ctx->ah[a])
                return bad(p, "names an '%s' that is not one of this node's adapters", "adapter");
        *out = a;
        return 0;
}

/* Where the device sits in the cluster file: fdid = node id << 12 | function index. */
static void find_in_topology(struct ntbf_dev *d)
{
        const struct ntbf_topo *t = d->ctx->topo;
        d->tdev = d->tfunc = NTBF_NONE;
        uint32_t node = ntbf_topo_find_node_id(t, d->info.fdid >> 12);
        if (node == NTBF_NONE)
                return;
        uint32_t index = d->info.fdid & 0xfff, seen = 0;
        const struct ntbf_node *n = &t->nodes[node];
        for (uint32_t i = 0; i < n->ndevices; i++) {
                const struct ntbf_device *dev = &t->devices[n->devices[i]];
                uint32_t nf = ntbf_device_nfuncs(dev);
                if (index < seen + nf) {
                        d->tdev = n->devices[i];
                        d->tfunc = index - seen;
                        return;
                }
                seen += nf;
        }
}

static int parse_info(struct parse *p, struct json_object *info)
{
        struct ntbf_dev_info *i = &p->d->info;
        uint64_t v = 0;
        if (get_u64(p, info, "fdid", true, &v) < 0)
                return p->err;
        i->fdid = (uint32_t)v;
        get_str(info, "bdf", i->bdf, sizeof(i->bdf));
        get_str(info, "lender_bdf", i->lender_bdf, sizeof(i->lender_bdf));
        get_str(info, "lender", i->lender, sizeof(i->lender));
        static const struct {
                const char *key;
                size_t off;
                unsigned bytes;
        } f[] = {
            {"vendor_id", offsetof(struct ntbf_dev_info, vendor_id), 2},
            {"device_id", offsetof(struct ntbf_dev_info, device_id), 2},
            {"class_code", offsetof(struct ntbf_dev_info, class_code), 4},
            {"dma_window", offsetof(struct ntbf_dev_info, dma_window), 8},
            {"msix_vectors", offsetof(struct ntbf_dev_info, msix_vectors), 4},
            {"hops", offsetof(struct ntbf_dev_info, hops), 4},
            {"latency_ns", offsetof(struct ntbf_dev_info, latency_ns), 4},
        };
        for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++) {
                v = 0;
                if (get_u64(p, info, f[k].key, false, &v) < 0)
                        return p->err;
                uint8_t *dst = (uint8_t *)i + f[k].off;
                if (f[k].bytes == 2) {
                        uint16_t x = (uint16_t)v;
                        memcpy(dst, &x, 2);
                } else if (f[k].bytes == 4) {
                        uint32_t x = (uint32_t)v;
                        memcpy(dst, &x, 4);
                } else {
                        memcpy(dst, &v, 8);
                }
        }
        return 0;
}

static int parse_bars(struct parse *p, struct json_object *res)
{
        struct ntbf_dev *d = p->d;
        struct json_object *bars;
        for (unsigned b = 0; b < NTBF_MAX_BARS; b++)
                d->bars[b].adapter = NTBF_NONE;
        if (!json_object_object_get_ex(res, "bars", &bars))
                return 0;
        if (!json_object_is_type(bars, json_type_array))
                return bad(p, "has a '%s' that is not an array", "bars");
        for (size_t k = 0; k < json_object_array_length(bars); k++) {
                struct json_object *o = json_object_array_get_idx(bars, k);
                uint64_t bar = 0, size = 0, addr = 0, off = 0, win = 0;
                if (get_u64(p, o, "bar", true, &bar) < 0 ||
                    get_u64(p, o, "size", true, &size) < 0 ||
                    get_u64(p, o, "addr", true, &addr) < 0)
                        return p->err;
                if (bar >= NTBF_MAX_BARS)
                        return bad(p, "has a BAR number over 5 in '%s'", "bars");
                struct ntbf__bar *B = &d->bars[bar];
                B->size = size;
                B->addr = addr;
                B->prefetchable = get_bool(o, "prefetchable", false);
                if (d->tdev != NTBF_NONE && !json_object_object_get_ex(o, "prefetchable", NULL))
                        B->prefetchable =
                            d->ctx->topo->devices[d->tdev].bars[bar].flags & NTBF_BAR_PREF;
                if (!d->info.local) {
                        if (get_adapter(p, o, &B->adapter) < 0 ||
                            get_u64(p, o, "offset", true, &off) < 0 ||
                            get_u64(p, o, "window", false, &win) < 0)
                                return p->err;
                        const struct ntbf_adapter *A = &d->ctx->topo->adapters[B->adapter];
                        B->offset = off;
                        B->win = (uint32_t)win;
                        if (win >= A->nwin || off > A->win[win].size ||
                            size > A->win[win].size - off)
                                return bad(p, "places a BAR outside the adapter's window in '%s'",
                                           "bars");
                }
                d->info.bars[bar] = (struct ntbf_dev_bar){size, addr, B->prefetchable};
        }
        return 0;
}

/* The first adapter of this node whose fabric maps devices itself (NTBF_CAP_DEV_MAP). */
static struct ntbf_adapter_h *managed_adapter(struct ntbf_ctx *ctx)
{
        const struct ntbf_node *n = &ctx->topo->nodes[ctx->node_idx];
        for (uint32_t i = 0; i < n->nadapters; i++) {
                struct ntbf_adapter_h *h = ctx->ah[n->adapters[i]];
                struct ntbf_caps caps;
                if (h && ctx->ops->dev_map && !ctx->ops->caps(h, &caps) &&
                    (caps.flags & NTBF_CAP_DEV_MAP))
                        return h;
        }
        return NULL;
}

/* How DMA addresses are made for this handle (docs/device-api.md, "DMA mapping"). */
static int setup_dma(struct parse *p, struct json_object *res)
{
        struct ntbf_dev *d = p->d;
        struct ntbf_ctx *ctx = d->ctx;
        /* A managed fabric (Dolphin's SmartIO) decides where the device's DMA goes: every
         * mapping is the backend's (dev_map), whatever the core planned as DMA window. */
        struct ntbf_adapter_h *mh = managed_adapter(ctx);
        if (mh) {
                if (d->tdev == NTBF_NONE)
                        return ntbf__fail(ctx, NTBF_ENOTFOUND,
                                          "device %s (fdid 0x%04x) is not in the cluster file: the "
                                          "%s backend maps devices of the file only",
                                          d->info.bdf, d->info.fdid, ctx->ops->name);
                d->mode = NTBF__DMA_MANAGED;
                d->dh = mh;
                return 0;
        }
        struct json_object *dma = get_obj(res, "dma"), *msi = get_obj(res, "msi");
        struct json_object *share = get_obj(res, "iova");
        bool isolated =
            get_bool(res, "isolated", false) || get_bool(get_obj(res, "info"), "isolated", false);
        if (!d->info.local) {
                uint32_t a;
                if (!dma || !msi)
                        return bad(p, "for a borrowed device has no '%s' object",
                                   !dma ? "dma" : "msi");
                if (get_u64(p, dma, "device_addr", true, &d->dma_dev) < 0 ||
                    get_u64(p, dma, "iova", true, &d->dma_iova) < 0 ||
                    get_u64(p, dma, "size", true, &d->dma_size) < 0 ||
                    get_adapter(p, dma, &a) < 0 ||
                    get_u64(p, msi, "device_addr", true, &d->msi_dev) < 0 ||
                    get_u64(p, msi, "host_addr", true, &d->msi_host) < 0 ||
                    get_u64(p, msi, "size", true, &d->msi_size) < 0)
                        return p->err;
                if (!d->info.dma_window)
                        d->info.dma_window = d->dma_size;
                d->dh = ctx->ah[a];
                struct ntbf_caps caps;
                if (ctx->ops->caps(d->dh, &caps) == 0 && (caps.flags & NTBF_CAP_IOMMU) &&
                    ctx->ops->iommu_map) {
                        d->mode = NTBF__DMA_IOVA;
                        if (!share)
                                return bad(p, "for a borrowed device has no '%s' share", "iova");
                } else {
                        /* No IOMMU: the window maps the borrower's RAM at dma.iova directly. */
                        d->mode = NTBF__DMA_WINDOW;
                        return 0;
                }
        } else {
                d->mode = NTBF__DMA_PHYS;
                if (d->tdev != NTBF_NONE && ctx->topo->devices[d->tdev].dma_bits < 64)
                        d->addr_end = UINT64_C(1) << ctx->topo->devices[d->tdev].dma_bits;
                if (!isolated)
                        return 0;
                /* Its own IOMMU domain on this host: buffers are mapped there at their
                 * physical addresses, so its DMA addresses stay host-physical. */
                uint64_t rid = NTBF_NONE;
                if (get_u64(p, res, "rid", false, &rid) < 0)
                        return p->err;
                if (rid == NTBF_NONE && d->tdev != NTBF_NONE)
                        rid = ntbf_device_rid(&ctx->topo->devices[d->tdev], d->tfunc);
                if (rid > 0xffff)
                        return bad(p,
                                   "for an isolated device has no '%s' (and the fdid is not in "
                                   "the cluster file)",
                                   "rid");
                if (!ctx->ops->dev_iommu_map || !ctx->ops->dev_iommu_unmap || !ctx->h0)
                        return ntbf__fail(ctx, NTBF_EUNSUPPORTED,
                                          "device %s is isolated in its own IOMMU domain, but the "
                                          "%s backend cannot map into such domains",
                                          d->info.bdf, ctx->ops->name);
                d->mode = NTBF__DMA_ISOLATED;
                d->rid = (struct ntbf_rid){ctx->node_idx, (uint16_t)rid, 0xffff};
                d->dh = ctx->h0;
                return 0;
        }
        if (get_u64(p, share, "base", true, &d->share_iova) < 0 ||
            get_u64(p, share, "size", true, &d->share_size) < 0)
                return p->err;
        if (d->share_iova % PAGE || d->share_size % PAGE || !d->share_size ||
            d->share_size / PAGE >= NTBF__IOVA_NONE)
                return bad(p, "has an '%s' share that is not a page-aligned range", "iova");
        if (d->share_iova < d->dma_iova || d->share_iova - d->dma_iova > d->dma_size ||
            d->share_size > d->dma_size - (d->share_iova - d->dma_iova))
                return bad(p, "has an '%s' share outside the DMA window", "iova");
        d->dev_base = d->dma_dev + (d->share_iova - d->dma_iova);
        if (ntbf__iova_init(&d->iova, (uint32_t)(d->share_size / PAGE)))
                return ntbf__fail(ctx, -ENOMEM, "out of memory for the IOVA allocator");
        /* The share is this handle's alone now, but a previous holder that died left its
         * IOMMU entries (the daemon hands the share back without clearing it): start empty. */
        ctx->ops->iommu_unmap(d->dh, d->share_iova, d->share_size);
        return 0;
}

/*
 * A local device behind vfio-pci (docs/device-api.md, "Real devices: VFIO"): the daemon
 * passed the container and device fds with the answer, and named this handle's IOVA share.
 * Config space, BARs, DMA mapping and MSI-X go through the fds from now on.
 */
static int setup_vfio(struct parse *p, struct json_object *res, struct json_object *vf,
                      const int *fds, unsigned nfds)
{
        struct ntbf_dev *d = p->d;
        struct ntbf_ctx *ctx = d->ctx;
        struct json_object *names, *share = get_obj(vf, "iova");
        int container = -1, device = -1;
        /* result.fds names the descriptors that came with the answer, in order. */
        if (!json_object_object_get_ex(res, "fds", &names) ||
            !json_object_is_type(names, json_type_array))
                return bad(p, "for a VFIO device has no '%s' list", "fds");
        for (size_t k = 0; k < json_object_array_length(names) && k < nfds; k++) {
                const char *n = json_object_get_string(json_object_array_get_idx(names, k));
                if (n && !strcmp(n, "container"))
                        container = fds[k];
                else if (n && !strcmp(n, "device"))
                        device = fds[k];
        }
        if (container < 0 || device < 0)
                return bad(p, "for a VFIO device lacks the container or device fd in '%s'", "fds");
        if (!share)
                return bad(p, "for a VFIO device has no '%s' share", "vfio.iova");
        if (get_u64(p, share, "base", true, &d->share_iova) < 0 ||
            get_u64(p, share, "size", true, &d->share_size) < 0)
                return p->err;
        if (d->share_iova % PAGE || d->share_size % PAGE || !d->share_size ||
            d->share_size / PAGE >= NTBF__IOVA_NONE)
                return bad(p, "has a '%s' share that is not a page-aligned range", "vfio.iova");
        d->vfio = calloc(1, sizeof(*d->vfio));
        if (!d->vfio)
                return ntbf__fail(ctx, -ENOMEM, "out of memory");
        char why[256];
        /* The fds become the device's: from here on they are closed with it. */
        int r = ntbf__vfio_adopt(dup(container), dup(device), d->vfio, why, sizeof(why));
        if (r) {
                free(d->vfio);
                d->vfio = NULL;
                return ntbf__fail(ctx, r, "device.open: the VFIO fds of %s are unusable: %s",
                                  d->info.bdf, why);
        }
        d->vfio->msix_on = get_bool(vf, "msix_enabled", false);
        d->mode = NTBF__DMA_VFIO;
        d->info.vfio = true;
        d->dev_base = d->share_iova;
        d->dma_dev = d->share_iova;
        if (!d->info.msix_vectors)
                d->info.msix_vectors = d->vfio->msix_count;
        if (ntbf__iova_init(&d->iova, (uint32_t)(d->share_size / PAGE)))
                return ntbf__fail(ctx, -ENOMEM, "out of memory for the IOVA allocator");
        /* A previous holder of the share that died left nothing (the daemon unmapped it), but
         * make sure: the container is shared by every handle of the device. */
        ntbf__vfio_dma_unmap(d->vfio, d->share_iova, d->share_size, NULL);
        return 0;
}

static int parse_open(struct ntbf_dev *d, struct json_object *res, const int *fds, unsigned nfds)
{
        struct parse p = {d, "device.open", 0};
        uint64_t handle = 0;
        if (get_u64(&p, res, "handle", true, &handle) < 0)
                return p.err;
        if (handle > INT64_MAX)
                return bad(&p, "has a '%s' over 2^63", "handle");
        d->handle = (int64_t)handle;
        struct json_object *info = get_obj(res, "info");
        if (!info)
                return bad(&p, "has no '%s' object", "info");
        if (parse_info(&p, info))
                return p.err;
        d->info.local = get_bool(info, "local", !get_obj(res, "dma"));
        find_in_topology(d);
        int r = parse_bars(&p, res);
        if (r)
                return r;
        struct json_object *vf = get_obj(res, "vfio");
        if (vf) {
                if (!d->info.local)
                        return bad(&p, "has a '%s' object for a borrowed device", "vfio");
                return setup_vfio(&p, res, vf, fds, nfds);
        }
        return setup_dma(&p, res);
}

/* ---- open and close --------------------------------------------------------------------- */

static void dev_free(struct ntbf_dev *d)
{
        if (d->vfio) {
                ntbf__vfio_close(d->vfio);
                free(d->vfio);
        }
        free(d->wins);
        ntbf__iova_fini(&d->iova);
        ntbf__maptab_fini(&d->maps);
        ntbf__maptab_fini(&d->pages);
        free(d->vecs);
        free(d->peers);
        if (d->evfd >= 0)
                close(d->evfd);
        pthread_mutex_destroy(&d->ctl);
        free(d);
}

static void close_handle(struct ntbf_ctx *ctx, uint64_t gen, int64_t handle)
{
        struct json_object *params = json_object_new_object(), *res;
        json_object_object_add(params, "handle", json_object_new_int64(handle));
        /* Best effort: a daemon that is gone has closed the handle with the connection. */
        if (ntbf__call(ctx, gen, NULL, params, &res) == 0)
                json_object_put(res);
}

static int dev_open(struct ntbf_ctx *ctx, struct json_object *params, struct ntbf_dev **out)
{
        int r = ntbf__ctx_connected(ctx);
        if (r) {
                json_object_put(params);
                return r;
        }
        /* Subscribe before opening, so that a loss right after the open is not missed. */
        ntbf__events_start(ctx);
        struct ntbf_dev *d = calloc(1, sizeof(*d));
        if (!d) {
                json_object_put(params);
                return ntbf__fail(ctx, -ENOMEM, "out of memory");
        }
        d->ctx = ctx;
        d->evfd = -1;
        d->handle = -1;
        pthread_mutex_init(&d->ctl, NULL);
        pthread_mutex_lock(&ctx->rpc_lock);
        d->gen = ctx->gen;
        pthread_mutex_unlock(&ctx->rpc_lock);
        struct json_object *res;
        int fds[8];
        unsigned nfds = 0;
        r = ntbf__call_fds(ctx, d->gen, "device.open", params, &res, fds, 8, &nfds);
        if (r) {
                dev_free(d);
                return r;
        }
        r = parse_open(d, res, fds, nfds);
        json_object_put(res);
        for (unsigned k = 0; k < nfds; k++)
                close(fds[k]); /* setup_vfio kept duplicates of those it uses */
        if (!r) {
                d->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                if (d->evfd < 0)
                        r = ntbf__fail(ctx, -errno, "eventfd: %s", strerror(errno));
        }
        if (r) {
                if (d->handle >= 0)
                        close_handle(ctx, d->gen, d->handle);
                dev_free(d);
                return r;
        }
        pthread_mutex_lock(&ctx->lock);
        d->next = ctx->devs;
        ctx->devs = d;
        pthread_mutex_unlock(&ctx->lock);
        *out = d;
        return 0;
}

int ntbf_dev_open(struct ntbf_ctx *ctx, uint32_t fdid, struct ntbf_dev **out)
{
        if (!ctx)
                return -EINVAL;
        if (!out)
                return ntbf__fail(ctx, -EINVAL, "ntbf_dev_open: out is NULL");
        *out = NULL;
        struct json_object *params = json_object_new_object();
        json_object_object_add(params, "fdid", json_object_new_int64(fdid));
        return dev_open(ctx, params, out);
}

int ntbf_dev_open_bdf(struct ntbf_ctx *ctx, const char *bdf, struct ntbf_dev **out)
{
        if (!ctx)
                return -EINVAL;
        if (!out || !bdf)
                return ntbf__fail(ctx, -EINVAL, "ntbf_dev_open_bdf: %s is NULL",
                                  !out ? "out" : "bdf");
        *out = NULL;
        uint16_t dom;
        uint8_t bus, dv, fn;
        if (ntbf_bdf_parse(bdf, &dom, &bus, &dv, &fn))
                return ntbf__fail(ctx, -EINVAL,
                                  "ntbf_dev_open_bdf: '%.32s' is not a PCI address "
                                  "(DDDD:BB:DD.F or BB:DD.F)",
                                  bdf);
        char norm[16];
        ntbf_bdf_fmt(dom, bus, dv, fn, norm, sizeof(norm));
        struct json_object *params = json_object_new_object();
        json_object_object_add(params, "bdf", json_object_new_string(norm));
        return dev_open(ctx, params, out);
}

int ntbf_dev_info(const struct ntbf_dev *dev, struct ntbf_dev_info *out)
{
        if (!dev)
                return -EINVAL;
        if (!out)
                return ntbf__fail(dev->ctx, -EINVAL, "ntbf_dev_info: out is NULL");
        *out = dev->info;
        return 0;
}

/* ---- config space ------------------------------------------------------------------------ */

static int cfg_check(struct ntbf_dev *dev, const char *fn, uint32_t off, unsigned size)
{
        if ((size != 1 && size != 2 && size != 4) || off % size || off + size > 4096)
                return ntbf__fail(dev->ctx, -EINVAL,
                                  "%s: %u bytes at 0x%x: config accesses are 1, 2 or 4 bytes, "
                                  "naturally aligned, below 0x1000",
                                  fn, size, off);
        return 0;
}

int ntbf_dev_cfg_read(struct ntbf_dev *dev, uint32_t off, unsigned size, uint32_t *val)
{
        if (!dev)
                return -EINVAL;
        if (!val)
                return ntbf__fail(dev->ctx, -EINVAL, "ntbf_dev_cfg_read: val is NULL");
        int r = cfg_check(dev, "ntbf_dev_cfg_read", off, size);
        if (r)
                return r;
        if (dev->vfio) {
                /* Straight to the device fd: VFIO virtualizes what must be (BARs, MSI-X). */
                r = ntbf__vfio_cfg_read(dev->vfio, off, size, val);
                if (r)
                        return ntbf__fail(dev->ctx, r,
                                          "ntbf_dev_cfg_read: %u bytes at 0x%x of %s: %s", size,
                                          off, dev->info.bdf, ntbf_strerror(r));
                return 0;
        }
        struct json_object *params = json_object_new_object(), *res, *v;
        json_object_object_add(params, "handle", json_object_new_int64(dev->handle));
        json_object_object_add(params, "offset", json_object_new_int64(off));
        json_object_object_add(params, "size", json_object_new_int64(size));
        r = ntbf__call(dev->ctx, dev->gen, "device.config_read", params, &res);
        if (r)
                return r;
        if (!json_object_object_get_ex(res, "value", &v) ||
            !json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
            json_object_get_int64(v) > UINT32_MAX) {
                json_object_put(res);
                return ntbf__fail(dev->ctx, NTBF_EPROTO,
                                  "device.config_read: the daemon's answer has no 'value' of 32 "
                                  "bits (docs/rpc.md)");
        }
        *val = (uint32_t)json_object_get_int64(v);
        json_object_put(res);
        return 0;
}

int ntbf_dev_cfg_write(struct ntbf_dev *dev, uint32_t off, unsigned size, uint32_t val)
{
        if (!dev)
                return -EINVAL;
        int r = cfg_check(dev, "ntbf_dev_cfg_write", off, size);
        if (r)
                return r;
        if (size < 4 && val >> (8 * size))
                return ntbf__fail(dev->ctx, -EINVAL,
                                  "ntbf_dev_cfg_write: 0x%x does not fit in %u bytes", val, size);
        if (dev->vfio) {
                r = ntbf__vfio_cfg_write(dev->vfio, off, size, val);
                if (r)
                        return ntbf__fail(dev->ctx, r,
                                          "ntbf_dev_cfg_write: %u bytes at 0x%x of %s: %s", size,
                                          off, dev->info.bdf, ntbf_strerror(r));
                return 0;
        }
        struct json_object *params = json_object_new_object(), *res;
        json_object_object_add(params, "handle", json_object_new_int64(dev->handle));
        json_object_object_add(params, "offset", json_object_new_int64(off));
        json_object_object_add(params, "size", json_object_new_int64(size));
        json_object_object_add(params, "value", json_object_new_int64(val));
        r = ntbf__call(dev->ctx, dev->gen, "device.config_write", params, &res);
        json_object_put(res);
        return r;
}

/* ---- BARs -------------------------------------------------------------------------------- */

/* Map BAR b: through the adapter's window (borrowed) or directly (local). Caller holds ctl. */
static int bar_map(struct ntbf_dev *d, unsigned b)
{
        struct ntbf_ctx *ctx = d->ctx;
        struct ntbf__bar *B = &d->bars[b];
        void *p = NULL;
        int r;
        if (B->adapter == NTBF_NONE && d->vfio) {
                /* A BAR of a device behind vfio-pci: mmap of the device fd, no daemon. */
                r = ntbf__vfio_map_bar(d->vfio, b, &p);
                if (r)
                        return ntbf__fail(ctx, r, "cannot map BAR %u of %s through VFIO: %s%s", b,
                                          d->info.bdf, ntbf_strerror(r),
                                          r == NTBF_EUNSUPPORTED
                                              ? " (VFIO does not allow mmap of this BAR)"
                                              : "");
                B->ptr = p;
                B->map_base = NULL;
                return 0;
        }
        if (B->adapter == NTBF_NONE) {
                /* A BAR of this host: the backend maps it by its address (host_map): the
                 * simulated fabric its BAR files, ivshmem and linux-ntb the sysfs resource
                 * file. */
                if (!ctx->ops->host_map || !ctx->h0)
                        return ntbf__fail(ctx, NTBF_EUNSUPPORTED,
                                          "mapping BARs of local devices is not supported by the "
                                          "%s backend",
                                          ctx->ops->name);
                r = ctx->ops->host_map(ctx->h0, B->addr, B->size, &p);
                if (r)
                        return ntbf__fail(ctx, r,
                                          "BAR %u of %s at 0x%" PRIx64 " (%" PRIu64
                                          " bytes) is not device memory of node %s the %s "
                                          "backend can map: %s",
                                          b, d->info.bdf, B->addr, B->size, ctx->node,
                                          ctx->ops->name, ntbf_strerror(r));
                B->ptr = p;
                B->map_base = p;
                B->map_size = B->size;
                B->mapped_local = true;
                return 0;
        }
        if (!ctx->ops->map_window)
                return ntbf__fail(ctx, NTBF_EUNSUPPORTED,
                                  "the %s backend cannot map adapter windows into a process",
                                  ctx->ops->name);
        uint64_t moff = B->offset & ~(uint64_t)(PAGE - 1), delta = B->offset - moff;
        uint64_t msize = (delta + B->size + PAGE - 1) & ~(uint64_t)(PAGE - 1);
        unsigned flags = B->prefetchable ? 0 : NTBF_MAP_UNCACHED;
        r = ctx->ops->map_window(ctx->ah[B->adapter], B->win, moff, msize, flags, &p);
        if (r)
                return ntbf__fail(ctx, r, "cannot map BAR %u of %s through %s.%s: %s", b,
                                  d->info.bdf, ctx->node, ctx->topo->adapters[B->adapter].name,
                                  ntbf_strerror(r));
        B->map_base = p;
        B->map_size = msize;
        B->ptr = (uint8_t *)p + delta;
        return 0;
}

static void bar_unmap(struct ntbf_dev *d, unsigned b)
{
        struct ntbf__bar *B = &d->bars[b];
        if (d->vfio && B->adapter == NTBF_NONE)
                ntbf__vfio_unmap_bar(d->vfio, b, B->ptr);
        else if (B->mapped_local)
                d->ctx->ops->host_unmap(d->ctx->h0, B->map_base, B->map_size);
        else if (B->map_base)
                d->ctx->ops->unmap_window(d->ctx->ah[B->adapter], B->map_base, B->map_size);
        B->ptr = B->map_base = NULL;
        B->mapped_local = false;
}

static int bar_check(struct ntbf_dev *d, const char *fn, unsigned b)
{
        if (b >= NTBF_MAX_BARS)
                return ntbf__fail(d->ctx, -EINVAL, "%s: BAR %u does not exist (0 to 5)", fn, b);
        if (!d->bars[b].size)
                return ntbf__fail(d->ctx, -ENOENT, "%s: device %s does not implement BAR %u", fn,
                                  d->info.bdf, b);
        return 0;
}

/* Internal users (the MSI-X table) take a reference. Caller holds ctl. */
static int bar_get(struct ntbf_dev *d, unsigned b)
{
        if (!d->bars[b].ptr) {
                int r = bar_map(d, b);
                if (r)
                        return r;
        }
        d->bars[b].refs++;
        return 0;
}

static void bar_put(struct ntbf_dev *d, unsigned b)
{
        if (--d->bars[b].refs == 0 && !d->bars[b].user)
                bar_unmap(d, b);
}

int ntbf_dev_map_bar(struct ntbf_dev *dev, unsigned bar, void **ptr, size_t *size)
{
        if (!dev)
                return -EINVAL;
        if (!ptr)
                return ntbf__fail(dev->ctx, -EINVAL, "ntbf_dev_map_bar: ptr is NULL");
        int r = bar_check(dev, "ntbf_dev_map_bar", bar);
        if (r)
                return r;
        pthread_mutex_lock(&dev->ctl);
        struct ntbf__bar *B = &dev->bars[bar];
        if (!B->ptr)
                r = bar_map(dev, bar);
        if (!r) {
                B->user = true;
                *ptr = B->ptr;
                if (size)
                        *size = (size_t)B->size;
        }
        pthread_mutex_unlock(&dev->ctl);
        return r;
}

int ntbf_dev_unmap_bar(struct ntbf_dev *dev, unsigned bar)
{
        if (!dev)
                return -EINVAL;
        int r = bar_check(dev, "ntbf_dev_unmap_bar", bar);
        if (r)
                return r;
        pthread_mutex_lock(&dev->ctl);
        struct ntbf__bar *B = &dev->bars[bar];
        if (!B->user) {
                r = ntbf__fail(dev->ctx, -EINVAL, "ntbf_dev_unmap_bar: BAR %u of %s is not mapped",
                               bar, dev->info.bdf);
        } else {
                B->user = false;
                if (!B->refs)
                        bar_unmap(dev, bar);
        }
        pthread_mutex_unlock(&dev->ctl);
        return r;
}

/* ---- DMA mapping: the fast path -------------------------------------------------------------- */

static int dma_fail_window(struct ntbf_dev *d, uint64_t size)
{
        return ntbf__fail(d->ctx, NTBF_ENOSPC_BUDGET,
                          "the DMA window of %s is full: %" PRIu64 " bytes do not fit in the "
                          "%" PRIu64 " bytes of this handle's share (%" PRIu32
                          " of its pages are mapped); unmap buffers, or borrow with a larger "
                          "dma_window",
                          d->info.bdf, size, d->share_size, d->iova.used);
}

/*
 * An isolated local device: pages [first, first + n pages) mapped at their own addresses in
 * its domain. Mappings may overlap (two buffers in one page), so each page is counted and
 * mapped on its first use, unmapped after its last. Caller holds dev->lock.
 */
static void domain_unmap(struct ntbf_dev *d, uint64_t first, uint64_t n)
{
        for (uint64_t k = 0; k < n; k++) {
                uint32_t left = 1;
                uint64_t pa = first + k * PAGE;
                if (!ntbf__maptab_put(&d->pages, pa, 1, &left) && !left)
                        d->ctx->ops->dev_iommu_unmap(d->dh, &d->rid, pa, PAGE);
        }
}

static int domain_map(struct ntbf_dev *d, uint64_t first, uint64_t n)
{
        for (uint64_t k = 0; k < n; k++) {
                uint32_t refs = 0;
                uint64_t pa = first + k * PAGE;
                int r = ntbf__maptab_get(&d->pages, pa, 1, &refs);
                if (!r && refs == 1) {
                        r = d->ctx->ops->dev_iommu_map(d->dh, &d->rid, pa, pa, PAGE);
                        if (r)
                                ntbf__maptab_put(&d->pages, pa, 1, NULL);
                }
                if (r) {
                        domain_unmap(d, first, k);
                        return r;
                }
        }
        return 0;
}

/* Whether a window mapping starts at ioaddr (its IOVA is not ntbf_dev_dma_unmap's). Caller holds
 * dev->lock. */
static bool window_at(const struct ntbf_dev *dev, uint64_t ioaddr)
{
        for (uint32_t i = 0; i < dev->nwins; i++)
                if ((dev->wins[i].ioaddr & ~(uint64_t)(PAGE - 1)) == ioaddr)
                        return true;
        return false;
}

/*
 * A device behind VFIO: an IOVA range of this handle's share, and VFIO_IOMMU_MAP_DMA of the
 * pages of [va, va + pages) there (the kernel pins them). The ioctl runs outside the spinlock:
 * it takes microseconds, and the range is this call's alone once allocated.
 */
static int vfio_map(struct ntbf_dev *dev, const void *va, uint64_t pages, uint32_t *idx_out)
{
        struct ntbf_ctx *ctx = dev->ctx;
        if (pages > dev->iova.npages)
                return ntbf__fail(ctx, -EINVAL,
                                  "%" PRIu64 " pages exceed the %" PRIu64
                                  " bytes of this handle's IOVA share",
                                  pages, dev->share_size);
        spin_lock(&dev->lock);
        uint32_t idx = ntbf__iova_alloc(&dev->iova, (uint32_t)pages);
        spin_unlock(&dev->lock);
        if (idx == NTBF__IOVA_NONE)
                return dma_fail_window(dev, pages * PAGE);
        uint64_t iova = dev->share_iova + (uint64_t)idx * PAGE;
        int r = ntbf__vfio_dma_map(dev->vfio, iova, va, pages * PAGE);
        if (r) {
                spin_lock(&dev->lock);
                ntbf__iova_free(&dev->iova, idx);
                spin_unlock(&dev->lock);
                return ntbf__fail(
                    ctx, r,
                    "VFIO_IOMMU_MAP_DMA of %" PRIu64 " bytes at IOVA 0x%" PRIx64 " for %s: %s%s",
                    pages * PAGE, iova, dev->info.bdf, ntbf_strerror(r),
                    r == -EEXIST   ? " (the IOVA is mapped already: a stale mapping)"
                    : r == -ENOSPC ? " (the container's limit of mappings is reached)"
                    : r == -ENOMEM ? " (the locked-memory limit, ulimit -l, is reached)"
                                   : "");
        }
        *idx_out = idx;
        return 0;
}

int ntbf_dev_dma_map(struct ntbf_dev *dev, void *ptr, size_t size, uint64_t *ioaddr)
{
        if (!dev)
                return -EINVAL;
        if (!ptr || !ioaddr || !size)
                return ntbf__fail(dev->ctx, -EINVAL, "ntbf_dev_dma_map: %s",
                                  !ptr      ? "ptr is NULL"
                                  : !ioaddr ? "ioaddr is NULL"
                                            : "size is 0");
        struct ntbf_ctx *ctx = dev->ctx;
        uint64_t bus;
        if (dev->mode == NTBF__DMA_VFIO) {
                /* VFIO maps by virtual address and pins what it maps: any memory the process
                 * has mapped will do (a segment another process made, shared with this one),
                 * and the kernel refuses what cannot be pinned. */
                uint64_t off = (uintptr_t)ptr % PAGE;
                uint32_t idx;
                int r =
                    vfio_map(dev, (const uint8_t *)ptr - off, (off + size + PAGE - 1) / PAGE, &idx);
                if (!r)
                        *ioaddr = dev->share_iova + (uint64_t)idx * PAGE + off;
                return r;
        }
        if (ntbf__dmamem_bus(&ctx->mem, ptr, size, &bus))
                return ntbf__fail(ctx, -EFAULT,
                                  "ntbf_dev_dma_map: [%p, +%zu) is not inside memory from "
                                  "ntbf_dma_alloc of this context",
                                  ptr, size);
        uint64_t off = bus % PAGE, first = bus - off;
        uint64_t pages = (off + size + PAGE - 1) / PAGE;
        int r = 0;
        switch (dev->mode) {
        case NTBF__DMA_VFIO:
                return -EINVAL; /* mapped above, before the DMA-memory check */
        case NTBF__DMA_IOVA: {
                if (pages > dev->iova.npages)
                        return ntbf__fail(ctx, -EINVAL,
                                          "ntbf_dev_dma_map: %zu bytes exceed the %" PRIu64
                                          " bytes of this handle's DMA window share",
                                          size, dev->share_size);
                spin_lock(&dev->lock);
                uint32_t idx = ntbf__iova_alloc(&dev->iova, (uint32_t)pages);
                if (idx == NTBF__IOVA_NONE) {
                        spin_unlock(&dev->lock);
                        return dma_fail_window(dev, size);
                }
                uint64_t iova = dev->share_iova + (uint64_t)idx * PAGE;
                r = ctx->ops->iommu_map(dev->dh, iova, first, pages * PAGE);
                if (r)
                        ntbf__iova_free(&dev->iova, idx);
                spin_unlock(&dev->lock);
                if (r)
                        return ntbf__fail(ctx, r,
                                          "cannot map IOVA 0x%" PRIx64 " in the IOMMU of node %s: "
                                          "%s%s",
                                          iova, ctx->node, ntbf_strerror(r),
                                          r == -EEXIST ? " (a previous holder of this share left "
                                                         "it mapped: the daemon must clear shares)"
                                                       : "");
                *ioaddr = dev->dev_base + (uint64_t)idx * PAGE + off;
                return 0;
        }
        case NTBF__DMA_WINDOW:
                if (first < dev->dma_iova || first - dev->dma_iova >= dev->dma_size ||
                    pages * PAGE > dev->dma_size - (first - dev->dma_iova))
                        return ntbf__fail(
                            ctx, NTBF_EUNREACHABLE,
                            "memory at 0x%" PRIx64 " of node %s is outside the DMA "
                            "window of %s ([0x%" PRIx64 ", +%" PRIu64 ") of RAM, no IOMMU)",
                            bus, ctx->node, dev->info.bdf, dev->dma_iova, dev->dma_size);
                *ioaddr = dev->dma_dev + (bus - dev->dma_iova);
                break;
        case NTBF__DMA_MANAGED:
                r = ctx->ops->dev_map(dev->dh, dev->tdev, dev->tfunc, bus, size, ioaddr);
                if (r)
                        return ntbf__fail(
                            ctx, r,
                            "the %s backend cannot map [0x%" PRIx64 ", +%zu) of node %s for %s: %s",
                            ctx->ops->name, bus, size, ctx->node, dev->info.bdf, ntbf_strerror(r));
                off = *ioaddr % PAGE;
                break;
        case NTBF__DMA_PHYS:
        case NTBF__DMA_ISOLATED:
                if (dev->addr_end &&
                    (first >= dev->addr_end || pages * PAGE > dev->addr_end - first))
                        return ntbf__fail(ctx, NTBF_EADDRLIMIT,
                                          "memory at 0x%" PRIx64 " is beyond what %s can address "
                                          "(below 0x%" PRIx64 ")",
                                          bus, dev->info.bdf, dev->addr_end);
                *ioaddr = bus;
                break;
        }
        spin_lock(&dev->lock);
        r = ntbf__maptab_get(&dev->maps, *ioaddr - off, (uint32_t)pages, NULL);
        if (!r && dev->mode == NTBF__DMA_ISOLATED) {
                r = domain_map(dev, first, pages);
                if (r)
                        ntbf__maptab_put(&dev->maps, first, (uint32_t)pages, NULL);
        }
        spin_unlock(&dev->lock);
        if (r && dev->mode == NTBF__DMA_MANAGED)
                ctx->ops->dev_unmap(dev->dh, dev->tdev, dev->tfunc, *ioaddr);
        if (r == -ENOMEM)
                return ntbf__fail(ctx, r, "out of memory for the mapping table");
        if (r)
                return ntbf__fail(
                    ctx, r, "cannot map 0x%" PRIx64 " in the IOMMU domain of %s on node %s: %s",
                    first, dev->info.bdf, ctx->node, ntbf_strerror(r));
        return 0;
}

int ntbf_dev_dma_unmap(struct ntbf_dev *dev, uint64_t ioaddr, size_t size)
{
        if (!dev)
                return -EINVAL;
        struct ntbf_ctx *ctx = dev->ctx;
        uint64_t off = ioaddr % PAGE, first = ioaddr - off;
        if (!size || size > UINT64_MAX - 2 * PAGE)
                return ntbf__fail(ctx, -EINVAL, "ntbf_dev_dma_unmap: size %zu is not a mapping's",
                                  size);
        uint64_t pages = (off + size + PAGE - 1) / PAGE;
        int r = 0;
        if (dev->mode == NTBF__DMA_VFIO) {
                uint64_t rel = first - dev->share_iova;
                if (first < dev->share_iova || rel >= dev->share_size)
                        goto notmapped;
                uint32_t idx = (uint32_t)(rel / PAGE);
                spin_lock(&dev->lock);
                bool ok = ntbf__iova_len(&dev->iova, idx) == pages && !window_at(dev, first);
                spin_unlock(&dev->lock);
                if (!ok)
                        goto notmapped;
                r = ntbf__vfio_dma_unmap(dev->vfio, first, pages * PAGE, NULL);
                spin_lock(&dev->lock);
                ntbf__iova_free(&dev->iova, idx);
                spin_unlock(&dev->lock);
                if (r)
                        return ntbf__fail(ctx, r, "VFIO_IOMMU_UNMAP_DMA at IOVA 0x%" PRIx64 ": %s",
                                          first, ntbf_strerror(r));
                return 0;
        }
        if (dev->mode == NTBF__DMA_IOVA) {
                uint64_t rel = first - dev->dev_base;
                if (first < dev->dev_base || rel >= dev->share_size)
                        goto notmapped;
                uint32_t idx = (uint32_t)(rel / PAGE);
                spin_lock(&dev->lock);
                if (ntbf__iova_len(&dev->iova, idx) != pages) {
                        spin_unlock(&dev->lock);
                        goto notmapped;
                }
                uint64_t iova = dev->share_iova + rel;
                r = ctx->ops->iommu_unmap(dev->dh, iova, pages * PAGE);
                /* The IOVA goes back even if the backend complained: it no longer maps it. */
                ntbf__iova_free(&dev->iova, idx);
                spin_unlock(&dev->lock);
                if (r)
                        return ntbf__fail(ctx, r, "unmapping IOVA 0x%" PRIx64 ": %s", iova,
                                          ntbf_strerror(r));
                return 0;
        }
        spin_lock(&dev->lock);
        r = ntbf__maptab_put(&dev->maps, first, pages > UINT32_MAX ? 0 : (uint32_t)pages, NULL);
        if (!r && dev->mode == NTBF__DMA_ISOLATED)
                domain_unmap(dev, first, pages);
        spin_unlock(&dev->lock);
        if (!r && dev->mode == NTBF__DMA_MANAGED)
                r = ctx->ops->dev_unmap(dev->dh, dev->tdev, dev->tfunc, ioaddr);
        if (!r)
                return 0;
notmapped:
        return ntbf__fail(ctx, -EINVAL,
                          "ntbf_dev_dma_unmap: [0x%" PRIx64 ", +%zu) is not a live mapping of %s "
                          "(never mapped, already unmapped, or mapped with another size)",
                          ioaddr, size, dev->info.bdf);
}

/* ---- peer-to-peer -------------------------------------------------------------------------- */

int ntbf_dev_map_peer(struct ntbf_dev *dev, struct ntbf_dev *target, unsigned bar, uint64_t *ioaddr)
{
        if (!dev)
                return -EINVAL;
        if (!target || !ioaddr)
                return ntbf__fail(dev->ctx, -EINVAL, "ntbf_dev_map_peer: %s is NULL",
                                  !target ? "target" : "ioaddr");
        if (target->ctx != dev->ctx)
                return ntbf__fail(dev->ctx, -EINVAL,
                                  "ntbf_dev_map_peer: the target was opened through another "
                                  "context (handles belong to one daemon connection)");
        if (dev->mode == NTBF__DMA_MANAGED)
                return ntbf__fail(dev->ctx, NTBF_EUNSUPPORTED,
                                  "ntbf_dev_map_peer: %s is a device of a managed fabric (%s "
                                  "backend), whose own software maps peer-to-peer traffic; the "
                                  "core's peer windows would give it addresses the fabric does "
                                  "not use (docs/dolphin.md)",
                                  dev->info.bdf, dev->ctx->ops->name);
        int r = bar_check(target, "ntbf_dev_map_peer", bar);
        if (r)
                return r;
        if (target->gen != dev->gen)
                return ntbf__fail(dev->ctx, -EPIPE,
                                  "ntbf_dev_map_peer: one of the devices was opened before the "
                                  "daemon restarted; reopen it");
        struct json_object *params = json_object_new_object(), *res, *v;
        json_object_object_add(params, "handle", json_object_new_int64(dev->handle));
        json_object_object_add(params, "target", json_object_new_int64(target->handle));
        json_object_object_add(params, "bar", json_object_new_int64(bar));
        r = ntbf__call(dev->ctx, dev->gen, "device.map_peer", params, &res);
        if (r)
                return r;
        if (!json_object_object_get_ex(res, "device_addr", &v) ||
            !json_object_is_type(v, json_type_int)) {
                json_object_put(res);
                return ntbf__fail(dev->ctx, NTBF_EPROTO,
                                  "device.map_peer: the daemon's answer has no 'device_addr' "
                                  "(docs/rpc.md)");
        }
        uint64_t addr = json_object_get_uint64(v);
        json_object_put(res);
        pthread_mutex_lock(&dev->ctl);
        if (dev->npeers == dev->cappeers) {
                uint32_t cap = dev->cappeers ? dev->cappeers * 2 : 4;
                uint64_t *p = realloc(dev->peers, cap * sizeof(*p));
                if (p) {
                        dev->peers = p;
                        dev->cappeers = cap;
                }
        }
        if (dev->npeers < dev->cappeers)
                dev->peers[dev->npeers++] = addr;
        pthread_mutex_unlock(&dev->ctl);
        *ioaddr = addr;
        return 0;
}

int ntbf_dev_unmap_peer(struct ntbf_dev *dev, uint64_t ioaddr)
{
        if (!dev)
                return -EINVAL;
        pthread_mutex_lock(&dev->ctl);
        uint32_t i = 0;
        while (i < dev->npeers && dev->peers[i] != ioaddr)
                i++;
        bool found = i < dev->npeers;
        if (found)
                dev->peers[i] = dev->peers[--dev->npeers];
        pthread_mutex_unlock(&dev->ctl);
        if (!found)
                return ntbf__fail(dev->ctx, -EINVAL,
                                  "ntbf_dev_unmap_peer: 0x%" PRIx64 " is not a peer mapping of %s",
                                  ioaddr, dev->info.bdf);
        struct json_object *params = json_object_new_object(), *res;
        json_object_object_add(params, "handle", json_object_new_int64(dev->handle));
        json_object_object_add(params, "device_addr", json_object_new_uint64(ioaddr));
        int r = ntbf__call(dev->ctx, dev->gen, "device.unmap_peer", params, &res);
        json_object_put(res);
        return r;
}

/* ---- windows -------------------------------------------------------------------------------- */

int ntbf_dev_map_window(struct ntbf_dev *dev, uint32_t adapter, uint32_t win, uint64_t offset,
                        uint64_t size, uint64_t *ioaddr)
{
        if (!dev)
                return -EINVAL;
        struct ntbf_ctx *ctx = dev->ctx;
        if (!ioaddr || !size)
                return ntbf__fail(ctx, -EINVAL, "ntbf_dev_map_window: %s",
                                  !ioaddr ? "ioaddr is NULL" : "size is 0");
        const struct ntbf_topo *t = ctx->topo;
        if (adapter >= t->nadapters || t->adapters[adapter].node != ctx->node_idx ||
            !ctx->ah[adapter])
                return ntbf__fail(ctx, -EINVAL,
                                  "ntbf_dev_map_window: adapter %u is not one of node %s's",
                                  adapter, ctx->node);
        const struct ntbf_adapter *A = &t->adapters[adapter];
        uint64_t wsize = win < A->nwin ? A->win[win].size : 0;
        if (offset >= wsize || size > wsize - offset)
                return ntbf__fail(ctx, -EINVAL,
                                  "ntbf_dev_map_window: [0x%" PRIx64 ", +%" PRIu64
                                  ") is outside window %u (%" PRIu64 " bytes) of %s.%s, which has "
                                  "%u window%s",
                                  offset, size, win, wsize, ctx->node, A->name, A->nwin,
                                  A->nwin == 1 ? "" : "s");
        uint64_t off = offset % PAGE, first = offset - off;
        uint64_t pages = (off + size + PAGE - 1) / PAGE;
        struct ntbf__winmap w = {0, adapter, NULL, pages * PAGE, 0};
        int r;
        if (dev->mode == NTBF__DMA_VFIO) {
                /* The window's CPU mapping is what VFIO pins: the IOMMU then leads the device's
                 * DMA wherever the window's slots lead the CPU's loads and stores. */
                if (!ctx->ops->map_window)
                        return ntbf__fail(ctx, NTBF_EUNSUPPORTED,
                                          "the %s backend cannot map windows into a process",
                                          ctx->ops->name);
                r = ctx->ops->map_window(ctx->ah[adapter], win, first, w.map_size, 0, &w.map);
                if (r)
                        return ntbf__fail(ctx, r, "cannot map the window of %s.%s: %s", ctx->node,
                                          t->adapters[adapter].name, ntbf_strerror(r));
                r = vfio_map(dev, w.map, pages, &w.idx);
                if (r) {
                        ctx->ops->unmap_window(ctx->ah[adapter], w.map, w.map_size);
                        return r;
                }
                w.ioaddr = dev->share_iova + (uint64_t)w.idx * PAGE + off;
        } else if (dev->mode == NTBF__DMA_MANAGED) {
                /* The fabric says where the device reaches the window's slot. */
                struct ntbf_caps caps;
                r = ctx->ops->caps(ctx->ah[adapter], &caps);
                if (!r)
                        r = ctx->ops->dev_map(ctx->ah[adapter], dev->tdev, dev->tfunc,
                                              caps.windows[0].base + offset, size, &w.ioaddr);
                if (r)
                        return ntbf__fail(ctx, r,
                                          "the %s backend cannot map [0x%" PRIx64 ", +%" PRIu64
                                          ") of the window of %s.%s for %s: %s",
                                          ctx->ops->name, offset, size, ctx->node,
                                          t->adapters[adapter].name, dev->info.bdf,
                                          ntbf_strerror(r));
                w.managed = true;
        } else if (dev->mode == NTBF__DMA_PHYS) {
                struct ntbf_caps caps;
                r = ctx->ops->caps(ctx->ah[adapter], &caps);
                if (r)
                        return ntbf__fail(ctx, r, "cannot read the capabilities of %s.%s: %s",
                                          ctx->node, t->adapters[adapter].name, ntbf_strerror(r));
                w.ioaddr = caps.windows[win].base + offset;
                if (dev->addr_end && (w.ioaddr >= dev->addr_end || size > dev->addr_end - w.ioaddr))
                        return ntbf__fail(ctx, NTBF_EADDRLIMIT,
                                          "the window of %s.%s at 0x%" PRIx64
                                          " is beyond what %s can address (below 0x%" PRIx64 ")",
                                          ctx->node, t->adapters[adapter].name, w.ioaddr,
                                          dev->info.bdf, dev->addr_end);
        } else {
                return ntbf__fail(ctx, NTBF_EUNSUPPORTED,
                                  "ntbf_dev_map_window: %s is %s; map remote memory for it through "
                                  "the daemon (ntbf_dev_map_peer)",
                                  dev->info.bdf,
                                  dev->info.local ? "in an isolation domain" : "borrowed");
        }
        spin_lock(&dev->lock);
        if (dev->nwins == dev->capwins) {
                uint32_t cap = dev->capwins ? dev->capwins * 2 : 4;
                struct ntbf__winmap *v = realloc(dev->wins, cap * sizeof(*v));
                if (v) {
                        dev->wins = v;
                        dev->capwins = cap;
                }
        }
        bool kept = dev->nwins < dev->capwins;
        if (kept)
                dev->wins[dev->nwins++] = w;
        spin_unlock(&dev->lock);
        if (!kept) {
                if (w.map) {
                        ntbf__vfio_dma_unmap(dev->vfio, w.ioaddr - off, w.map_size, NULL);
                        spin_lock(&dev->lock);
                        ntbf__iova_free(&dev->iova, w.idx);
                        spin_unlock(&dev->lock);
                        ctx->ops->unmap_window(ctx->ah[adapter], w.map, w.map_size);
                }
                return ntbf__fail(ctx, -ENOMEM, "out of memory");
        }
        *ioaddr = w.ioaddr;
        return 0;
}

/* Undo a window mapping (its entry already taken out of dev->wins). */
static void window_undo(struct ntbf_dev *dev, const struct ntbf__winmap *w)
{
        if (w->managed)
                dev->ctx->ops->dev_unmap(dev->ctx->ah[w->adapter], dev->tdev, dev->tfunc,
                                         w->ioaddr);
        if (!w->map)
                return;
        ntbf__vfio_dma_unmap(dev->vfio, w->ioaddr & ~(uint64_t)(PAGE - 1), w->map_size, NULL);
        spin_lock(&dev->lock);
        ntbf__iova_free(&dev->iova, w->idx);
        spin_unlock(&dev->lock);
        dev->ctx->ops->unmap_window(dev->ctx->ah[w->adapter], w->map, w->map_size);
}

int ntbf_dev_unmap_window(struct ntbf_dev *dev, uint64_t ioaddr)
{
        if (!dev)
                return -EINVAL;
        struct ntbf__winmap w;
        bool found = false;
        spin_lock(&dev->lock);
        for (uint32_t i = 0; i < dev->nwins && !found; i++) {
                if (dev->wins[i].ioaddr != ioaddr)
                        continue;
                w = dev->wins[i];
                dev->wins[i] = dev->wins[--dev->nwins];
                found = true;
        }
        spin_unlock(&dev->lock);
        if (!found)
                return ntbf__fail(dev->ctx, -EINVAL,
                                  "ntbf_dev_unmap_window: 0x%" PRIx64
                                  " is not a window mapping of %s",
                                  ioaddr, dev->info.bdf);
        window_undo(dev, &w);
        return 0;
}

/* ---- MSI-X -------------------------------------------------------------------------------- */

/* Find the MSI-X capability through config space, once. Caller holds ctl. */
static int msix_find(struct ntbf_dev *d)
{
        if (d->msix_known)
                return d->msix_cap ? 0 : NTBF_EUNSUPPORTED;
        uint32_t sts, ptr, id = 0, flags, table;
        int r = ntbf_dev_cfg_read(d, PCI_STATUS, 2, &sts);
        if (!r && (sts & PCI_STATUS_CAPS))
                r = ntbf_dev_cfg_read(d, PCI_CAP_PTR, 1, &ptr);
        else
                ptr = 0;
        /* A capability list has at most 48 entries in 256 bytes: a loop is a broken device. */
        for (unsigned n = 0; !r && n < 48 && ptr >= 0x40 && ptr < 0x100; n++) {
                ptr &= 0xfc;
                r = ntbf_dev_cfg_read(d, ptr, 1, &id);
                if (r || id == PCI_CAP_ID_MSIX)
                        break;
                r = ntbf_dev_cfg_read(d, ptr + 1, 1, &ptr);
        }
        if (r)
                return r;
        d->msix_known = true;
        if (id != PCI_CAP_ID_MSIX || ptr < 0x40)
                goto none;
        r = ntbf_dev_cfg_read(d, ptr + MSIX_FLAGS, 2, &flags);
        if (!r)
                r = ntbf_dev_cfg_read(d, ptr + MSIX_TABLE, 4, &table);
        if (r) {
                d->msix_known = false;
                return r;
        }
        d->msix_n = (flags & MSIX_QSIZE) + 1;
        d->msix_bir = table & 7;
        d->msix_off = table & ~7u;
        if (d->msix_bir >= NTBF_MAX_BARS || !d->bars[d->msix_bir].size ||
            d->msix_off > d->bars[d->msix_bir].size ||
            (uint64_t)d->msix_n * MSIX_ENTRY_SIZE > d->bars[d->msix_bir].size - d->msix_off)
                return ntbf__fail(d->ctx, NTBF_EPROTO,
                                  "the MSI-X table of %s (BAR %u offset 0x%x, %u vectors) is not "
                                  "inside a BAR",
                                  d->info.bdf, d->msix_bir, d->msix_off, d->msix_n);
        d->vecs = calloc(d->msix_n, sizeof(*d->vecs));
        if (!d->vecs) {
                d->msix_known = false;
                return ntbf__fail(d->ctx, -ENOMEM, "out of memory");
        }
        d->msix_cap = ptr;
        if (!d->info.msix_vectors)
                d->info.msix_vectors = d->msix_n;
        return 0;
none:
        return ntbf__fail(d->ctx, NTBF_EUNSUPPORTED, "device %s has no MSI-X capability",
                          d->info.bdf);
}

/* Undo the domain mapping of an interrupt address (isolated devices). */
static void msi_unmap(struct ntbf_dev *d, uint64_t addr, uint64_t io)
{
        if (d->mode == NTBF__DMA_MANAGED)
                d->ctx->ops->dev_unmap(d->dh, d->tdev, d->tfunc, io);
        if (d->mode != NTBF__DMA_ISOLATED)
                return;
        spin_lock(&d->lock);
        domain_unmap(d, addr & ~(uint64_t)(PAGE - 1), 1);
        spin_unlock(&d->lock);
}

static volatile uint32_t *msix_entry(struct ntbf_dev *d, unsigned v)
{
        return (volatile uint32_t *)((uint8_t *)d->bars[d->msix_bir].ptr + d->msix_off +
                                     (uint64_t)v * MSIX_ENTRY_SIZE);
}

static void msix_mask(struct ntbf_dev *d, unsigned v)
{
        volatile uint32_t *e = msix_entry(d, v);
        e[3] = e[3] | MSIX_ENTRY_MASKED;
        atomic_thread_fence(memory_order_seq_cst);
}

/*
 * MSI-X of a device behind VFIO: the kernel owns the MSI-X table (it programs the host's
 * interrupt addresses, remapped by the IOMMU) and signals an eventfd per vector
 * (VFIO_DEVICE_SET_IRQS); the API only hands the eventfd over.
 */
static int vfio_irq_enable(struct ntbf_dev *dev, unsigned vector, int *eventfd_out)
{
        struct ntbf_ctx *ctx = dev->ctx;
        pthread_mutex_lock(&dev->ctl);
        int r = 0;
        if (!dev->msix_known) {
                dev->msix_n = dev->vfio->msix_count;
                dev->vecs = dev->msix_n ? calloc(dev->msix_n, sizeof(*dev->vecs)) : NULL;
                if (dev->msix_n && !dev->vecs) {
                        r = ntbf__fail(ctx, -ENOMEM, "out of memory");
                        goto out;
                }
                dev->msix_known = true;
        }
        if (!dev->msix_n) {
                r = ntbf__fail(ctx, NTBF_EUNSUPPORTED, "device %s has no MSI-X capability",
                               dev->info.bdf);
                goto out;
        }
        if (vector >= dev->msix_n) {
                r = ntbf__fail(ctx, -EINVAL,
                               "ntbf_dev_irq_enable: %s has MSI-X vectors 0 to %u, not %u",
                               dev->info.bdf, dev->msix_n - 1, vector);
                goto out;
        }
        if (dev->vecs[vector].on) {
                r = ntbf__fail(ctx, NTBF_EBUSY, "ntbf_dev_irq_enable: vector %u of %s is enabled",
                               vector, dev->info.bdf);
                goto out;
        }
        int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (efd < 0) {
                r = ntbf__fail(ctx, -errno, "eventfd: %s", strerror(errno));
                goto out;
        }
        r = ntbf__vfio_irq_set(dev->vfio, vector, efd);
        if (r) {
                close(efd);
                r = ntbf__fail(ctx, r, "VFIO_DEVICE_SET_IRQS for MSI-X vector %u of %s: %s", vector,
                               dev->info.bdf, ntbf_strerror(r));
                goto out;
        }
        dev->vecs[vector] = (struct ntbf__vec){true, {0, 0, efd, vector}};
        *eventfd_out = efd;
out:
        pthread_mutex_unlock(&dev->ctl);
        return r;
}

int ntbf_dev_irq_enable(struct ntbf_dev *dev, unsigned vector, int *eventfd_out)
{
        if (!dev)
                return -EINVAL;
        struct ntbf_ctx *ctx = dev->ctx;
        if (!eventfd_out)
                return ntbf__fail(ctx, -EINVAL, "ntbf_dev_irq_enable: eventfd is NULL");
        if (dev->vfio)
                return vfio_irq_enable(dev, vector, eventfd_out);
        if (!ctx->ops->irq_alloc || !ctx->h0)
                return ntbf__fail(ctx, NTBF_EUNSUPPORTED,
                                  "the %s backend has no host interrupt vectors", ctx->ops->name);
        pthread_mutex_lock(&dev->ctl);
        int r = msix_find(dev);
        if (r)
                goto out;
        if (vector >= dev->msix_n) {
                r = ntbf__fail(ctx, -EINVAL,
                               "ntbf_dev_irq_enable: %s has MSI-X vectors 0 to %u, not %u",
                               dev->info.bdf, dev->msix_n - 1, vector);
                goto out;
        }
        if (dev->vecs[vector].on) {
                r = ntbf__fail(ctx, NTBF_EBUSY, "ntbf_dev_irq_enable: vector %u of %s is enabled",
                               vector, dev->info.bdf);
                goto out;
        }
        r = bar_get(dev, dev->msix_bir);
        if (r)
                goto out;
        struct ntbf_adapter_h *h = dev->dh ? dev->dh : ctx->h0;
        struct ntbf_irq irq;
        r = ctx->ops->irq_alloc(h, &irq);
        if (r) {
                bar_put(dev, dev->msix_bir);
                r = ntbf__fail(ctx, r, "no interrupt vector on node %s: %s", ctx->node,
                               ntbf_strerror(r));
                goto out;
        }
        uint64_t addr = irq.addr;
        if (dev->mode == NTBF__DMA_ISOLATED) {
                /* The message is a DMA write: its page must be in the device's domain too. */
                spin_lock(&dev->lock);
                r = domain_map(dev, irq.addr & ~(uint64_t)(PAGE - 1), 1);
                spin_unlock(&dev->lock);
                if (r) {
                        ctx->ops->irq_free(h, &irq);
                        bar_put(dev, dev->msix_bir);
                        r = ntbf__fail(ctx, r,
                                       "cannot map the interrupt address 0x%" PRIx64
                                       " in the IOMMU domain of %s: %s",
                                       irq.addr, dev->info.bdf, ntbf_strerror(r));
                        goto out;
                }
        }
        if (dev->mode == NTBF__DMA_MANAGED) {
                /* The fabric maps the vector's address for the device, as any memory. */
                r = ctx->ops->dev_map(dev->dh, dev->tdev, dev->tfunc, irq.addr, 4, &addr);
                if (r) {
                        ctx->ops->irq_free(h, &irq);
                        bar_put(dev, dev->msix_bir);
                        r = ntbf__fail(ctx, r,
                                       "the %s backend cannot map interrupt address 0x%" PRIx64
                                       " of node %s for %s: %s",
                                       ctx->ops->name, irq.addr, ctx->node, dev->info.bdf,
                                       ntbf_strerror(r));
                        goto out;
                }
        } else if (!dev->info.local) {
                /* The device writes into the MSI window; the window lands on irq.addr. */
                if (irq.addr < dev->msi_host || irq.addr - dev->msi_host >= dev->msi_size) {
                        ctx->ops->irq_free(h, &irq);
                        bar_put(dev, dev->msix_bir);
                        r = ntbf__fail(ctx, NTBF_EUNREACHABLE,
                                       "interrupt address 0x%" PRIx64 " of node %s is outside "
                                       "the MSI window of %s ([0x%" PRIx64 ", +%" PRIu64 "))",
                                       irq.addr, ctx->node, dev->info.bdf, dev->msi_host,
                                       dev->msi_size);
                        goto out;
                }
                addr = dev->msi_dev + (irq.addr - dev->msi_host);
        }
        volatile uint32_t *e = msix_entry(dev, vector);
        e[3] = MSIX_ENTRY_MASKED;
        e[0] = (uint32_t)addr;
        e[1] = (uint32_t)(addr >> 32);
        e[2] = irq.data;
        atomic_thread_fence(memory_order_seq_cst);
        e[3] = 0;
        uint32_t flags;
        r = ntbf_dev_cfg_read(dev, dev->msix_cap + MSIX_FLAGS, 2, &flags);
        if (!r && ((flags & MSIX_MASKALL) || !(flags & MSIX_ENABLE)))
                r = ntbf_dev_cfg_write(dev, dev->msix_cap + MSIX_FLAGS, 2,
                                       (flags | MSIX_ENABLE) & ~(uint32_t)MSIX_MASKALL);
        if (r) {
                msix_mask(dev, vector);
                msi_unmap(dev, irq.addr, addr);
                ctx->ops->irq_free(h, &irq);
                bar_put(dev, dev->msix_bir);
                goto out;
        }
        dev->vecs[vector] = (struct ntbf__vec){true, irq, addr};
        *eventfd_out = irq.fd;
out:
        pthread_mutex_unlock(&dev->ctl);
        return r;
}

/* Mask and free a vector. Caller holds ctl. */
static void vec_off(struct ntbf_dev *d, unsigned v)
{
        struct ntbf_ctx *ctx = d->ctx;
        if (d->vfio) {
                ntbf__vfio_irq_set(d->vfio, v, -1);
                close(d->vecs[v].irq.fd);
                d->vecs[v].on = false;
                return;
        }
        struct ntbf_adapter_h *h = d->dh ? d->dh : ctx->h0;
        msix_mask(d, v);
        msi_unmap(d, d->vecs[v].irq.addr, d->vecs[v].io);
        ctx->ops->irq_free(h, &d->vecs[v].irq);
        d->vecs[v].on = false;
        bar_put(d, d->msix_bir);
}

int ntbf_dev_irq_disable(struct ntbf_dev *dev, unsigned vector)
{
        if (!dev)
                return -EINVAL;
        pthread_mutex_lock(&dev->ctl);
        int r = 0;
        if (!dev->msix_known || vector >= dev->msix_n || !dev->vecs[vector].on)
                r = ntbf__fail(dev->ctx, -EINVAL,
                               "ntbf_dev_irq_disable: vector %u of %s is not "
                               "enabled",
                               vector, dev->info.bdf);
        else
                vec_off(dev, vector);
        pthread_mutex_unlock(&dev->ctl);
        return r;
}

/* ---- events --------------------------------------------------------------------------------- */

int ntbf_dev_event_fd(struct ntbf_dev *dev)
{
        if (!dev)
                return -EINVAL;
        return dev->evfd;
}

int ntbf_dev_event(struct ntbf_dev *dev, enum ntbf_dev_event_kind *kind)
{
        if (!dev)
                return -EINVAL;
        if (!kind)
                return ntbf__fail(dev->ctx, -EINVAL, "ntbf_dev_event: kind is NULL");
        uint64_t v;
        ssize_t n = read(dev->evfd, &v, sizeof(v));
        (void)n; /* drained; the flag below is the event */
        int pending = 1;
        *kind = atomic_compare_exchange_strong(&dev->lost, &pending, 2) ? NTBF_DEV_EVENT_LOST
                                                                        : NTBF_DEV_EVENT_NONE;
        return 0;
}

/* ---- close ---------------------------------------------------------------------------------- */

static void unmap_iova(void *arg, uint32_t idx, uint32_t n)
{
        struct ntbf_dev *d = arg;
        d->ctx->ops->iommu_unmap(d->dh, d->share_iova + (uint64_t)idx * PAGE, (uint64_t)n * PAGE);
}

static void unmap_page(void *arg, uint64_t addr, uint32_t pages, uint32_t refs)
{
        (void)pages;
        (void)refs;
        struct ntbf_dev *d = arg;
        d->ctx->ops->dev_iommu_unmap(d->dh, &d->rid, addr, PAGE);
}

/* What the fabric still maps for a closing device (each mapping counted). */
static void unmap_managed(void *arg, uint64_t addr, uint32_t pages, uint32_t refs)
{
        (void)pages;
        struct ntbf_dev *d = arg;
        while (refs--)
                d->ctx->ops->dev_unmap(d->dh, d->tdev, d->tfunc, addr);
}

void ntbf_dev_close(struct ntbf_dev *dev)
{
        if (!dev)
                return;
        struct ntbf_ctx *ctx = dev->ctx;
        /* A forked child's copy of the parent's device: its IOMMU container, vectors and
         * handle are the parent's, so nothing of them is undone from here. */
        if (ntbf__ctx_foreign(ctx))
                return;
        pthread_mutex_lock(&ctx->lock);
        for (struct ntbf_dev **pp = &ctx->devs; *pp; pp = &(*pp)->next) {
                if (*pp == dev) {
                        *pp = dev->next;
                        break;
                }
        }
        pthread_mutex_unlock(&ctx->lock);
        pthread_mutex_lock(&dev->ctl);
        for (uint32_t v = 0; dev->vecs && v < dev->msix_n; v++)
                if (dev->vecs[v].on)
                        vec_off(dev, v);
        for (unsigned b = 0; b < NTBF_MAX_BARS; b++) {
                if (dev->bars[b].ptr)
                        bar_unmap(dev, b);
        }
        pthread_mutex_unlock(&dev->ctl);
        while (dev->nwins) {
                struct ntbf__winmap w = dev->wins[--dev->nwins];
                window_undo(dev, &w);
        }
        /* The share goes back to the daemon with the handle: leave nothing mapped in it. */
        if (dev->mode == NTBF__DMA_IOVA)
                ntbf__iova_each(&dev->iova, unmap_iova, dev);
        if (dev->mode == NTBF__DMA_VFIO)
                ntbf__vfio_dma_unmap(dev->vfio, dev->share_iova, dev->share_size, NULL);
        if (dev->mode == NTBF__DMA_ISOLATED)
                ntbf__maptab_each(&dev->pages, unmap_page, dev);
        if (dev->mode == NTBF__DMA_MANAGED)
                ntbf__maptab_each(&dev->maps, unmap_managed, dev);
        if (dev->handle >= 0)
                close_handle(ctx, dev->gen, dev->handle);
        dev_free(dev);
}
