/* daemon/vfio.c: the node's real devices through vfio-pci: take, lend to clients, give back. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"
#include "ntbfab/error.h"
#include "ntbfab/units.h"
#include "vfio.h"
#include "hostvfio.h"

/*
 * IOVA shares: every handle of a device gets one, disjoint from the others' (they share the
 * device's container, hence its IOMMU domain). 1 GiB each, placed where the IOMMU accepts
 * addresses (the MSI doorbell range of x86 is a hole) and below the device's addressing
 * limit; at most NTBF_VFIO_SHARES handles per device at a time.
 */
#define NTBF_VFIO_SHARES 16
#define NTBF_VFIO_SHARE  (UINT64_C(1) << 30)

struct vdev {
        struct vdev *next;
        uint32_t dev, fn;
        char bdf[16];
        int group;
        struct ntbf__vfio v; /* device < 0: not held */
        struct ntbf__vfio_prev prev;
        bool lent;
        unsigned handles;
        uint32_t shares; /* bit i: share i is a handle's */
        uint64_t share_base[NTBF_VFIO_SHARES];
        unsigned nshares;
        int kx_share;   /* the share a kernel borrower's DMA window uses, -1: none */
        uint64_t kx_id; /* the module's export id (0: not exported) */
        int *kx_fds;    /* the vectors' eventfds until the module holds them */
        uint32_t kx_nfds;
};

struct ntbf__vfio_d {
        struct ntbf__vfio_sys sys;
        struct vdev *list;
};

static struct ntbf__vfio_d *state(struct ntbf__d *d)
{
        if (!d->vfio) {
                d->vfio = calloc(1, sizeof(*d->vfio));
                if (!d->vfio)
                        return NULL;
                const char *root = getenv("NTBFAB_VFIO_ROOT");
                snprintf(d->vfio->sys.root, sizeof(d->vfio->sys.root), "%s", root ? root : "");
        }
        return d->vfio;
}

bool ntbf__vfiod_is(const struct ntbf__d *d, uint32_t dev)
{
        return dev < d->t->ndevices && d->t->devices[dev].vfio;
}

bool ntbf__bars_host_placed(const struct ntbf_topo *t, uint32_t dev)
{
        if (dev >= t->ndevices)
                return false;
        if (t->devices[dev].vfio)
                return true;
        const struct ntbf_backend_ops *o = ntbf_backend_find(t->backend);
        return o && o->dev_bars;
}

static struct vdev *find(struct ntbf__d *d, uint32_t dev, uint32_t fn, bool create)
{
        struct ntbf__vfio_d *s = state(d);
        if (!s)
                return NULL;
        for (struct vdev *v = s->list; v; v = v->next)
                if (v->dev == dev && v->fn == fn)
                        return v;
        if (!create)
                return NULL;
        struct vdev *v = calloc(1, sizeof(*v));
        if (!v)
                return NULL;
        v->dev = dev;
        v->fn = fn;
        v->group = -1;
        v->kx_share = -1;
        v->v.container = v->v.group = v->v.device = -1;
        ntbf__func_bdf(d->t, dev, fn, v->bdf, sizeof(v->bdf));
        v->next = s->list;
        s->list = v;
        return v;
}

/* ---- what survives a restart: the driver to give the device back to ----------------------------
 */

static void prev_key(const struct vdev *v, char *key, size_t len)
{
        snprintf(key, len, "vfio.prev.%s", v->bdf);
}

static void prev_save(struct ntbf__d *d, const struct vdev *v, bool force)
{
        char key[64];
        prev_key(v, key, sizeof(key));
        struct json_object *o = json_object_new_object();
        ntbf__jput_s(o, "driver", v->prev.driver);
        ntbf__jput_b(o, "force", force);
        if (ntbf__store_put(d->st, NTBF_T_META, key, ntbf__json_text(o)))
                LOG_W("cannot record the previous driver of %s: %s", v->bdf,
                      ntbf__store_error(d->st));
        json_object_put(o);
}

/* What the database says about an earlier take: its driver, and whether it was forced. */
static bool prev_load(struct ntbf__d *d, struct vdev *v, bool *force)
{
        char key[64], *json = NULL;
        prev_key(v, key, sizeof(key));
        if (ntbf__store_get(d->st, NTBF_T_META, key, &json))
                return false;
        struct json_object *o = json_tokener_parse(json);
        free(json);
        const char *drv = "";
        ntbf__jget_s(o, "driver", &drv);
        snprintf(v->prev.driver, sizeof(v->prev.driver), "%s", drv);
        *force = false;
        ntbf__jget_b(o, "force", force);
        json_object_put(o);
        return true;
}

/* ---- taking and giving back -------------------------------------------------------------------
 */

static void plan_shares(struct ntbf__d *d, struct vdev *v)
{
        uint32_t bits = d->t->devices[v->dev].dma_bits;
        uint64_t limit = bits >= 64 ? UINT64_MAX : UINT64_C(1) << bits;
        v->nshares = 0;
        for (uint64_t base = NTBF_VFIO_SHARE;
             v->nshares < NTBF_VFIO_SHARES && base <= limit - NTBF_VFIO_SHARE &&
             base < (UINT64_C(1) << 48);
             base += NTBF_VFIO_SHARE) {
                for (uint32_t i = 0; i < v->v.niova; i++)
                        if (base >= v->v.iova[i].start &&
                            base + NTBF_VFIO_SHARE - 1 <= v->v.iova[i].end) {
                                v->share_base[v->nshares++] = base;
                                break;
                        }
        }
}

/* The cluster file's ids, where it gives them, must be the device's. */
static int check_ids(struct ntbf__d *d, struct vdev *v, char *why, size_t whylen)
{
        const struct ntbf_device *x = &d->t->devices[v->dev];
        uint16_t ven, dev;
        uint32_t cls;
        if (ntbf__vfio_sys_ids(&state(d)->sys, v->bdf, &ven, &dev, &cls))
                return 0; /* nothing to compare with */
        if ((x->vendor_id && x->vendor_id != ven) || (x->device_id && x->device_id != dev) ||
            (x->class_code && x->class_code != cls)) {
                snprintf(why, whylen,
                         "%s: the cluster file says %s is %04x:%04x class %06x, but the device "
                         "at %s is %04x:%04x class %06x; fix its bdf or ids in the file",
                         d->t->file ? d->t->file : "the cluster file", x->name, x->vendor_id,
                         x->device_id, x->class_code, v->bdf, ven, dev, cls);
                return NTBF_ECONFIG;
        }
        return 0;
}

/*
 * The function's memory BARs where the kernel placed them (sysfs), each of the size the
 * cluster file gives: the manager plans borrowers' windows with those sizes and programs the
 * addresses (docs/daemon.md, "Real devices"). A BAR smaller than a page is lent as the page
 * it starts, which the cluster file names as 4 KiB. 0, or NTBF_ECONFIG naming the file's
 * line, the BAR and both sizes.
 */
static int hw_bars(struct ntbf__d *d, uint32_t dev, uint32_t fn, uint64_t addr[6], char *why,
                   size_t whylen)
{
        const struct ntbf_device *x = &d->t->devices[dev];
        struct ntbf__vfio_d *s = state(d);
        char bdf[32];
        uint64_t size[6];
        ntbf__func_bdf(d->t, dev, fn, bdf, sizeof(bdf));
        /* A VFIO device through its sysfs tree; any other through the backend, which reaches
         * the host's devices where it reaches their config space. */
        int r = x->vfio ? (s ? ntbf__vfio_sys_bars(&s->sys, bdf, addr, size) : -ENOMEM)
                : d->ops && d->ops->dev_bars ? d->ops->dev_bars(d->b, dev, fn, addr, size)
                                             : -ENOTSUP;
        if (r) {
                snprintf(why, whylen,
                         "cannot read where the kernel placed the BARs of %s "
                         "(/sys/bus/pci/devices/%s/resource: %s)",
                         bdf, bdf, strerror(-r));
                return r;
        }
        const struct ntbf_loc *at = x->loc_bars.line ? &x->loc_bars : &x->loc;
        for (uint32_t b = 0; b < 6; b++) {
                uint64_t want = ntbf_device_bar_size(x, fn, b), have = size[b];
                if (have && have < 4096 && !(addr[b] & 4095))
                        have = 4096;
                if (want == have)
                        continue;
                char w[32], h[32];
                ntbf_size_fmt(want, w, sizeof(w));
                ntbf_size_fmt(size[b], h, sizeof(h));
                snprintf(why, whylen,
                         "%s:%u: BAR%u of %s (%s) is %s on the hardware but %s in the cluster "
                         "file; %s",
                         d->t->file ? d->t->file : "the cluster file", at->line, b, x->name, bdf,
                         size[b] ? h : "not implemented", want ? w : "absent",
                         size[b] && size[b] < 4096
                             ? "a BAR smaller than a page is lent only when it starts a page "
                               "(pci=resource_alignment= on the kernel's command line)"
                             : "make the device's bars the hardware's (lspci -vv shows them)");
                return NTBF_ECONFIG;
        }
        return 0;
}

struct json_object *ntbf__vfiod_bars(struct ntbf__d *d, uint32_t dev, uint32_t fn, char *why,
                                     size_t whylen)
{
        uint64_t addr[6];
        if (hw_bars(d, dev, fn, addr, why, whylen))
                return NULL;
        struct json_object *a = json_object_new_array();
        for (uint32_t b = 0; b < 6; b++) {
                if (!addr[b])
                        continue;
                struct json_object *o = json_object_new_object();
                ntbf__jput_u(o, "bar", b);
                ntbf__jput_u(o, "addr", addr[b]);
                ntbf__jput_u(o, "size", ntbf_device_bar_size(&d->t->devices[dev], fn, b));
                json_object_array_add(a, o);
        }
        return a;
}

static int take(struct ntbf__d *d, struct vdev *v, bool force, char *why, size_t whylen)
{
        if (v->v.device >= 0)
                return 0;
        struct ntbf__vfio_d *s = state(d);
        int r = ntbf__vfio_sys_check(&s->sys, why, whylen);
        if (!r)
                r = ntbf__vfio_sys_group(&s->sys, v->bdf, &v->group, why, whylen);
        if (r)
                return r;
        for (struct vdev *o = s->list; o; o = o->next)
                if (o != v && o->v.device >= 0 && o->group == v->group) {
                        snprintf(why, whylen,
                                 "%s shares IOMMU group %d with %s, which this daemon holds: a "
                                 "group is one IOMMU domain, given to one device at a time; "
                                 "unlend or close %s first",
                                 v->bdf, v->group, o->bdf, o->bdf);
                        return NTBF_EBUSY;
                }
        uint64_t addr[6];
        r = check_ids(d, v, why, whylen);
        if (!r)
                r = hw_bars(d, v->dev, v->fn, addr, why, whylen);
        if (r)
                return r;
        bool was_forced = false, recorded = prev_load(d, v, &was_forced);
        r = ntbf__vfio_sys_bind(&s->sys, v->bdf, force || was_forced, &v->prev, why, whylen);
        if (r)
                return r;
        if (v->prev.taken) {
                prev_save(d, v, force || was_forced);
        } else if (recorded) {
                /* Still on vfio-pci from an earlier run of this daemon: the database knows
                 * which driver to give it back to. */
                prev_load(d, v, &was_forced);
                v->prev.taken = true;
        }
        r = ntbf__vfio_open(s->sys.root, v->group, v->bdf, &v->v, why, whylen);
        if (r) {
                char ignore[256];
                ntbf__vfio_sys_release(&s->sys, v->bdf, &v->prev, ignore, sizeof(ignore));
                return r;
        }
        /* Every vector once, so that clients can each set theirs (vfio.h). */
        if (v->v.msix_count && ntbf__vfio_irq_enable(&v->v))
                LOG_W("cannot enable MSI-X of %s through VFIO: interrupts will not reach clients",
                      v->bdf);
        plan_shares(d, v);
        LOG_I("took %s for VFIO: IOMMU group %d, %u IOVA shares of %" PRIu64
              " MiB; it goes back to %s%s%s when released",
              v->bdf, v->group, v->nshares, NTBF_VFIO_SHARE >> 20, v->prev.driver[0] ? "'" : "",
              v->prev.driver[0] ? v->prev.driver : "no driver", v->prev.driver[0] ? "'" : "");
        return 0;
}

static void give_back(struct ntbf__d *d, struct vdev *v)
{
        if (v->v.device < 0 || v->lent || v->handles)
                return;
        ntbf__vfio_close(&v->v);
        char why[512], key[64];
        if (ntbf__vfio_sys_release(&state(d)->sys, v->bdf, &v->prev, why, sizeof(why)))
                LOG_E("%s", why);
        else
                LOG_I("gave %s back to %s", v->bdf,
                      v->prev.driver[0] ? v->prev.driver : "no driver");
        prev_key(v, key, sizeof(key));
        ntbf__store_del(d->st, NTBF_T_META, key);
        memset(&v->prev, 0, sizeof(v->prev));
        v->shares = 0;
}

/* ---- hooks -------------------------------------------------------------------------------------
 */

void ntbf__vfiod_start(struct ntbf__d *d)
{
        for (struct ntbf__lend *l = d->lends; l; l = l->next) {
                uint32_t dev, fn;
                if (ntbf__fdid_resolve(d->t, l->fdid, &dev, &fn) || !ntbf__vfiod_is(d, dev))
                        continue;
                char why[1024];
                if (ntbf__vfiod_lend(d, dev, fn, false, why, sizeof(why)))
                        LOG_E("lent device 0x%04x cannot be taken for VFIO: %s", l->fdid, why);
        }
}

void ntbf__vfiod_stop(struct ntbf__d *d)
{
        if (!d->vfio)
                return;
        while (d->vfio->list) {
                struct vdev *v = d->vfio->list;
                d->vfio->list = v->next;
                /* A lent device stays on vfio-pci for the next start; others go back. */
                bool lent = v->lent;
                v->handles = 0;
                v->lent = false;
                if (lent)
                        ntbf__vfio_close(&v->v);
                else
                        give_back(d, v);
                free(v);
        }
        free(d->vfio);
        d->vfio = NULL;
}

int ntbf__vfiod_lend(struct ntbf__d *d, uint32_t dev, uint32_t fn, bool force, char *why,
                     size_t whylen)
{
        struct vdev *v = find(d, dev, fn, true);
        if (!v)
                return -ENOMEM;
        int r = take(d, v, force, why, whylen);
        if (!r)
                v->lent = true;
        return r;
}

void ntbf__vfiod_unlend(struct ntbf__d *d, uint32_t dev, uint32_t fn)
{
        struct vdev *v = find(d, dev, fn, false);
        if (!v)
                return;
        v->lent = false;
        give_back(d, v);
}

int ntbf__vfiod_open(struct ntbf__d *d, struct ntbf__handle *h, char *why, size_t whylen)
{
        struct vdev *v = find(d, h->device, h->function, true);
        if (!v)
                return -ENOMEM;
        int r = take(d, v, false, why, whylen);
        if (r)
                return r;
        h->share = -1;
        for (unsigned i = 0; i < v->nshares && h->share < 0; i++)
                if (!(v->shares >> i & 1))
                        h->share = (int)i;
        if (h->share < 0) {
                give_back(d, v);
                snprintf(why, whylen,
                         "all %u IOVA shares of %s are held by open handles; close one "
                         "(the IOMMU domain is split among at most %d handles)",
                         v->nshares, v->bdf, NTBF_VFIO_SHARES);
                return NTBF_EBUSY;
        }
        v->shares |= 1u << h->share;
        v->handles++;
        return 0;
}

void ntbf__vfiod_answer(struct ntbf__d *d, struct ntbf__rpc_call *call, struct ntbf__handle *h,
                        struct json_object *answer)
{
        struct vdev *v = find(d, h->device, h->function, false);
        struct json_object *info = NULL, *ibars = NULL, *bars = json_object_new_array();
        json_object_object_get_ex(answer, "info", &info);
        json_object_object_get_ex(info, "bars", &ibars);
        /* What the hardware says, not the model: ids, BAR addresses and sizes, vectors. */
        uint16_t ven, dev;
        uint32_t cls;
        if (!ntbf__vfio_sys_ids(&state(d)->sys, v->bdf, &ven, &dev, &cls)) {
                ntbf__jput_u(info, "vendor_id", ven);
                ntbf__jput_u(info, "device_id", dev);
                ntbf__jput_u(info, "class_code", cls);
        }
        uint64_t addr[6] = {0}, size[6] = {0};
        ntbf__vfio_sys_bars(&state(d)->sys, v->bdf, addr, size);
        for (unsigned b = 0; b < 6; b++) {
                uint64_t sz = v->v.regions[b].size;
                struct json_object *ib = ibars ? json_object_array_get_idx(ibars, b) : NULL;
                if (ib) {
                        ntbf__jput_u(ib, "size", sz);
                        ntbf__jput_u(ib, "addr", sz ? addr[b] : 0);
                        ntbf__jput_b(ib, "prefetchable", false);
                }
                if (!sz)
                        continue;
                struct json_object *j = json_object_new_object();
                ntbf__jput_u(j, "bar", b);
                ntbf__jput_u(j, "size", sz);
                ntbf__jput_u(j, "addr", addr[b]);
                json_object_object_add(j, "adapter", NULL);
                json_object_object_add(j, "window", NULL);
                json_object_object_add(j, "offset", NULL);
                json_object_array_add(bars, j);
        }
        json_object_object_add(answer, "bars", bars);
        ntbf__jput_u(info, "msix_vectors", v->v.msix_count);
        struct json_object *vf = json_object_new_object(), *iova = json_object_new_object();
        ntbf__jput_u(iova, "base", v->share_base[h->share]);
        ntbf__jput_u(iova, "size", NTBF_VFIO_SHARE);
        json_object_object_add(vf, "iova", iova);
        ntbf__jput_b(vf, "msix_enabled", v->v.msix_on);
        ntbf__jput_u(vf, "group", (uint64_t)v->group);
        json_object_object_add(answer, "vfio", vf);
        static const char *const names[] = {"container", "device"};
        int fds[2] = {v->v.container, v->v.device};
        LOG_D("handle %" PRIu64 " of %s: IOVA share %d at 0x%" PRIx64, h->id, v->bdf, h->share,
              v->share_base[h->share]);
        ntbf__rpc_result_fds(call, answer, fds, names, 2);
}

void ntbf__vfiod_close(struct ntbf__d *d, struct ntbf__handle *h)
{
        struct vdev *v = find(d, h->device, h->function, false);
        if (!v || h->share < 0 || !(v->shares >> h->share & 1))
                return;
        /* Whatever the handle's process left mapped goes, dead or alive (the kernel lets
         * any holder of the container unmap). */
        uint64_t gone = 0;
        int r = ntbf__vfio_dma_unmap(&v->v, v->share_base[h->share], NTBF_VFIO_SHARE, &gone);
        if (r)
                LOG_E("cannot clear IOVA share %d of %s: %s", h->share, v->bdf, ntbf_strerror(r));
        else if (gone)
                LOG_I("cleared %" PRIu64 " KiB of DMA mappings handle %" PRIu64 " of %s (pid %d) "
                      "left in its IOVA share",
                      gone >> 10, h->id, v->bdf, h->conn ? (int)h->conn->pid : -1);
        v->shares &= ~(1u << h->share);
        h->share = -1;
        if (--v->handles == 0) {
                /* Nobody drives it now: no stale eventfds, and a clean device for the next. */
                if (v->v.msix_count)
                        ntbf__vfio_irq_enable(&v->v);
                ntbf__vfio_reset(&v->v);
        }
        give_back(d, v);
}

int ntbf__vfiod_cfg(struct ntbf__d *d, uint32_t dev, uint32_t fn, bool write, uint32_t off,
                    uint32_t size, uint32_t *val)
{
        struct vdev *v = find(d, dev, fn, false);
        if (!v || v->v.device < 0)
                return NTBF_ENOTFOUND;
        return write ? ntbf__vfio_cfg_write(&v->v, off, size, *val)
                     : ntbf__vfio_cfg_read(&v->v, off, size, val);
}

/* ---- loopback lending: this kernel borrows the device (daemon/kern.c) ------------------------
 */

static void kx_close_fds(struct vdev *v)
{
        for (uint32_t i = 0; i < v->kx_nfds; i++)
                if (v->kx_fds[i] >= 0)
                        close(v->kx_fds[i]);
        free(v->kx_fds);
        v->kx_fds = NULL;
        v->kx_nfds = 0;
}

int ntbf__vfiod_kexport(struct ntbf__d *d, uint32_t dev, uint32_t fn, struct ntbf__vfiod_kx *kx,
                        char *why, size_t whylen)
{
        struct vdev *v = find(d, dev, fn, false);
        memset(kx, 0, sizeof(*kx));
        if (!v || v->v.device < 0) {
                snprintf(why, whylen, "the device is not held through VFIO: lend it first");
                return NTBF_ENOTFOUND;
        }
        snprintf(kx->bdf, sizeof(kx->bdf), "%s", v->bdf);
        if (v->kx_id) {
                kx->export_id = v->kx_id;
                return 0;
        }
        if (!v->v.msix_count || !v->v.msix_on) {
                snprintf(why, whylen,
                         "%s has no MSI-X enabled through VFIO: the kernel's shadow device "
                         "relays MSI-X vectors only",
                         v->bdf);
                return NTBF_EUNSUPPORTED;
        }
        if (v->kx_share < 0) {
                for (unsigned i = 0; i < v->nshares && v->kx_share < 0; i++)
                        if (!(v->shares >> i & 1))
                                v->kx_share = (int)i;
                if (v->kx_share < 0) {
                        snprintf(why, whylen,
                                 "all %u IOVA shares of %s are held by open handles; close one",
                                 v->nshares, v->bdf);
                        return NTBF_EBUSY;
                }
                v->shares |= 1u << v->kx_share;
                v->handles++;
        }
        kx_close_fds(v);
        v->kx_fds = calloc(v->v.msix_count, sizeof(int));
        if (!v->kx_fds)
                return -ENOMEM;
        for (uint32_t i = 0; i < v->v.msix_count; i++) {
                int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                v->kx_fds[v->kx_nfds++] = fd;
                if (fd < 0 || ntbf__vfio_irq_set(&v->v, i, fd)) {
                        snprintf(why, whylen, "cannot give MSI-X vector %u of %s an eventfd: %s", i,
                                 v->bdf, strerror(errno));
                        ntbf__vfiod_kunexport(d, dev, fn);
                        return -EIO;
                }
        }
        /*
         * Config writes reach the device through the daemons after the driver wrote them
         * (posted: the kernel's config accessors cannot wait), while its MMIO goes straight
         * there. A driver starts DMA right after enabling bus mastering, so the lender
         * enables memory decoding and bus mastering before the shadow device exists; the
         * driver's later writes (bus mastering off when it stops) follow in order.
         */
        uint32_t cmd = 0;
        if (ntbf__vfio_cfg_read(&v->v, 0x04, 2, &cmd) ||
            ntbf__vfio_cfg_write(&v->v, 0x04, 2, cmd | 0x0006)) {
                snprintf(why, whylen, "cannot enable bus mastering of %s through VFIO", v->bdf);
                ntbf__vfiod_kunexport(d, dev, fn);
                return -EIO;
        }
        kx->group_fd = v->v.group;
        kx->nirqs = v->kx_nfds;
        kx->fds = v->kx_fds;
        kx->iova_base = v->share_base[v->kx_share];
        kx->iova_size = NTBF_VFIO_SHARE;
        return 0;
}

void ntbf__vfiod_kexport_set(struct ntbf__d *d, uint32_t dev, uint32_t fn, uint64_t id)
{
        struct vdev *v = find(d, dev, fn, false);
        if (!v)
                return;
        v->kx_id = id;
        kx_close_fds(v);
}

bool ntbf__vfiod_bar_sizes(struct ntbf__d *d, uint32_t dev, uint32_t fn, uint64_t sizes[6])
{
        struct vdev *v = find(d, dev, fn, false);
        if (!v || v->v.device < 0)
                return false;
        for (unsigned b = 0; b < 6; b++)
                sizes[b] = v->v.regions[b].size;
        return true;
}

uint64_t ntbf__vfiod_kexport_id(struct ntbf__d *d, uint32_t dev, uint32_t fn)
{
        struct vdev *v = find(d, dev, fn, false);
        return v ? v->kx_id : 0;
}

void ntbf__vfiod_kunexport(struct ntbf__d *d, uint32_t dev, uint32_t fn)
{
        struct vdev *v = find(d, dev, fn, false);
        if (!v || v->kx_share < 0)
                return;
        kx_close_fds(v);
        v->kx_id = 0;
        v->shares &= ~(1u << v->kx_share);
        v->kx_share = -1;
        if (--v->handles == 0 && v->v.device >= 0) {
                /* Vectors signal nothing again, and the next user finds a clean device. */
                if (v->v.msix_count)
                        ntbf__vfio_irq_enable(&v->v);
                ntbf__vfio_reset(&v->v);
        }
        give_back(d, v);
}
