/* daemon/kern.c: borrowed devices attached to this kernel (ntbfab_shadow), and this node's
 * real devices exported to it for loopback lending. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "daemon.h"
#include "kern.h"
#include "log.h"
#include "ntbfab/error.h"
#include "ntbfab_lend.h"
#include "vfio.h"
#include "hostvfio.h"

#define KERN_CFG 4096

struct ntbf__kern {
        int fd;
        uv_poll_t poll;
        bool polling;
        char boot_id[64];
};

static const char *dev_path(void)
{
        const char *p = getenv("NTBFAB_LEND_DEV");
        return p && *p ? p : "/dev/ntbfab-lend";
}

/* This kernel's boot id: two daemons with the same one run on one kernel. */
static void read_boot_id(char *buf, size_t len)
{
        buf[0] = '\0';
        FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
        if (!f)
                return;
        if (fgets(buf, (int)len, f))
                buf[strcspn(buf, "\n")] = '\0';
        fclose(f);
}

static struct ntbf__borrow *by_shadow(struct ntbf__d *d, uint32_t id)
{
        for (struct ntbf__borrow *b = d->borrows; b; b = b->next)
                if (b->shadow == (int64_t)id)
                        return b;
        return NULL;
}

static void peers_release(struct ntbf__d *d, struct ntbf__borrow *b);

/* ---- config writes: from the module to the lender ------------------------------------------ */

struct cfgw {
        struct ntbf__d *d;
        uint32_t shadow, off;
        uint64_t seq;
};

static void cfg_written(void *arg, int err, const char *msg, struct json_object *res)
{
        struct cfgw *w = arg;
        uint64_t dw;
        if (err) {
                LOG_W("config write at 0x%x of shadow %u: the lender refused: %s", w->off,
                      w->shadow, msg ? msg : ntbf_strerror(err));
        } else if (ntbf__jget_u(res, "dword", &dw) && w->d->kern && w->d->kern->fd >= 0) {
                struct ntbfab_lend_cfg_set c = {.shadow_id = w->shadow,
                                                .offset = w->off & ~3u,
                                                .value = (uint32_t)dw,
                                                .seq = w->seq};
                /* ENOENT: the shadow went meanwhile (its last writes still reach the device). */
                if (ioctl(w->d->kern->fd, NTBFAB_LEND_IOC_CFG_SET, &c) && errno != ENOENT)
                        LOG_W("cannot update the config copy of shadow %u: %s", w->shadow,
                              strerror(errno));
        }
        json_object_put(res);
        free(w);
}

/* Records a detached shadow's driver wrote on its way out still name its borrow. */
static void forward(struct ntbf__d *d, const struct ntbfab_lend_msg *m, struct ntbf__borrow *b)
{
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "fdid", b->fdid);
        ntbf__jput_s(q, "op", "w");
        ntbf__jput_u(q, "off", m->offset);
        ntbf__jput_u(q, "size", m->size);
        ntbf__jput_u(q, "value", m->value);
        struct cfgw *w = calloc(1, sizeof(*w));
        if (!w) {
                json_object_put(q);
                return;
        }
        *w = (struct cfgw){d, m->shadow_id, m->offset, m->seq};
        LOG_D("config write of 0x%04x's driver: 0x%x <- 0x%x (%u bytes)", b->fdid, m->offset,
              m->value, m->size);
        ntbf__peer_request(d, b->lender, "cfg", q, cfg_written, w);
}

static void drain(struct ntbf__d *d, struct ntbf__borrow *leaving)
{
        struct ntbfab_lend_msg m[32];
        for (;;) {
                ssize_t n = read(d->kern->fd, m, sizeof(m));
                if (n <= 0)
                        return;
                for (size_t i = 0; i < (size_t)n / sizeof(m[0]); i++) {
                        struct ntbf__borrow *b = by_shadow(d, m[i].shadow_id);
                        if (!b && leaving && leaving->shadow == (int64_t)m[i].shadow_id)
                                b = leaving;
                        if (m[i].kind == NTBFAB_LEND_MSG_OVERFLOW) {
                                LOG_E("ntbfab_shadow dropped config writes (its queue was full): "
                                      "attached devices may differ from what their drivers set");
                        } else if (m[i].kind == NTBFAB_LEND_MSG_CFG_WRITE && b) {
                                forward(d, &m[i], b);
                        } else if (m[i].kind >= NTBFAB_LEND_MSG_MDEV_DESCRIBE &&
                                   m[i].kind <= NTBFAB_LEND_MSG_MDEV_RETURN) {
                                ntbf__kmdev_msg(d, &m[i]);
                        } else if (m[i].kind == NTBFAB_LEND_MSG_REMOVED && b) {
                                LOG_W("shadow of 0x%04x was removed by the kernel: its lender "
                                      "withdrew the device",
                                      b->fdid);
                                peers_release(d, b);
                                b->shadow = -1;
                                json_object_object_del(b->json, "attached");
                                ntbf__node_save_borrow(d, b);
                        }
                }
        }
}

static void on_readable(uv_poll_t *p, int status, int events)
{
        struct ntbf__d *d = p->data;
        (void)events;
        if (status == 0)
                drain(d, NULL);
}

int ntbf__kern_open(struct ntbf__d *d, char *why, size_t whylen)
{
        if (d->kern && d->kern->fd >= 0)
                return 0;
        if (!d->kern) {
                d->kern = calloc(1, sizeof(*d->kern));
                if (!d->kern)
                        return -ENOMEM;
                d->kern->fd = -1;
                read_boot_id(d->kern->boot_id, sizeof(d->kern->boot_id));
        }
        int fd = open(dev_path(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
                int e = errno;
                snprintf(why, whylen,
                         "cannot open %s (%s): load the kernel module ntbfab_shadow (modprobe "
                         "ntbfab_shadow; docs/kernel.md)",
                         dev_path(), strerror(e));
                return e == ENOENT || e == ENXIO || e == ENODEV ? NTBF_EUNSUPPORTED : -e;
        }
        struct ntbfab_lend_version v = {0};
        if (ioctl(fd, NTBFAB_LEND_IOC_VERSION, &v) || v.version != NTBFAB_LEND_VERSION ||
            v.msg_size != sizeof(struct ntbfab_lend_msg)) {
                snprintf(why, whylen,
                         "%s speaks interface version %u, this daemon %u: install the module "
                         "built from this release (docs/kernel.md)",
                         dev_path(), v.version, NTBFAB_LEND_VERSION);
                close(fd);
                return NTBF_EUNSUPPORTED;
        }
        d->kern->fd = fd;
        if (!uv_poll_init(d->loop, &d->kern->poll, fd)) {
                d->kern->poll.data = d;
                d->kern->polling = !uv_poll_start(&d->kern->poll, UV_READABLE, on_readable);
        }
        return 0;
}

int ntbf__kern_fd(struct ntbf__d *d)
{
        return d->kern ? d->kern->fd : -1;
}

const char *ntbf__kern_boot_id(struct ntbf__d *d)
{
        return d->kern ? d->kern->boot_id : "";
}

void ntbf__kern_close(struct ntbf__d *d)
{
        if (!d->kern)
                return;
        /* The loop has ended: its poll handle was closed with the others (ntbf__d_finish). */
        if (d->kern->fd >= 0)
                close(d->kern->fd);
        free(d->kern);
        d->kern = NULL;
}

/* ---- attach ------------------------------------------------------------------------------- */

struct attach {
        struct ntbf__d *d;
        uint32_t fdid;
        ntbf__done_fn cb;
        void *arg;
        uint8_t cfg[KERN_CFG];
        uint64_t export_id;
        unsigned pending; /* peer mappings asked of the manager, not answered yet */
};

static void ignore(void *arg, int err, const char *msg, struct json_object *res);
static void peers_attach(struct attach *a, struct ntbf__borrow *b);

static void attach_done(struct attach *a, int err, const char *msg)
{
        struct ntbf__borrow *b = ntbf__node_borrow(a->d, a->fdid);
        if (err && a->export_id && b) {
                /* The lender offered the device to this kernel for nothing: withdraw it. */
                struct json_object *q = json_object_new_object();
                ntbf__jput_u(q, "fdid", a->fdid);
                ntbf__peer_request(a->d, b->lender, "kunexport", q, ignore,
                                   (void *)(uintptr_t)a->fdid);
        }
        a->cb(a->arg, err, msg, NULL);
        free(a);
}

static int hexval(char c)
{
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int ntbf__kern_cfg_parse(struct json_object *res, uint8_t cfg[4096], uint32_t *n, const char **msg)
{
        const char *hex = "";
        if (!ntbf__jget_s(res, "hex", &hex))
                return *msg = "the lender's config dump has no 'hex'", NTBF_EPROTO;
        *n = (uint32_t)(strlen(hex) / 2);
        if (*n != 256 && *n != KERN_CFG)
                return *msg = "the lender's config dump is neither 256 nor 4096 bytes", NTBF_EPROTO;
        for (size_t i = 0; i < *n; i++) {
                int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
                if (hi < 0 || lo < 0)
                        return *msg = "the lender's config dump is not hex", NTBF_EPROTO;
                cfg[i] = (uint8_t)(hi << 4 | lo);
        }
        return 0;
}

static void dumped(void *arg, int err, const char *msg, struct json_object *res)
{
        struct attach *a = arg;
        struct ntbf__d *d = a->d;
        struct ntbf__borrow *b = ntbf__node_borrow(d, a->fdid);
        uint32_t n = 0;
        char why[512];
        if (!err && !b)
                err = NTBF_ENOTFOUND, msg = "the borrow ended while it was being attached";
        if (!err)
                err = ntbf__kern_cfg_parse(res, a->cfg, &n, &msg);
        json_object_put(res);
        if (err)
                return attach_done(a, err, msg);
        uint64_t dma = 0;
        struct json_object *dj;
        ntbf__jget_u(b->json, "dma_window", &dma);
        if (!dma && json_object_object_get_ex(b->json, "dma", &dj))
                ntbf__jget_u(dj, "size", &dma);
        struct ntbfab_lend_attach at = {.flags = NTBFAB_LEND_ATTACH_LOOPBACK,
                                        .fdid = a->fdid,
                                        .export_id = a->export_id,
                                        .config = (uint64_t)(uintptr_t)a->cfg,
                                        .config_size = (uint32_t)n,
                                        .dma_size = dma ? dma : UINT64_C(16) << 20};
        if (ioctl(d->kern->fd, NTBFAB_LEND_IOC_ATTACH, &at)) {
                int e = errno;
                snprintf(why, sizeof(why),
                         "the kernel refused to attach 0x%04x: %s (its log says why: dmesg)",
                         a->fdid, strerror(e));
                return attach_done(a, -e, why);
        }
        char pci[32];
        snprintf(pci, sizeof(pci), "%04x:%02x:%02x.%u", at.pci_domain, at.pci_rid >> 8 & 0xff,
                 at.pci_rid >> 3 & 0x1f, at.pci_rid & 7);
        b->shadow = at.shadow_id;
        struct json_object *o = json_object_new_object();
        ntbf__jput_s(o, "pci", pci);
        ntbf__jput_u(o, "shadow", at.shadow_id);
        ntbf__jput_u(o, "export", a->export_id);
        json_object_object_add(b->json, "attached", o);
        ntbf__node_save_borrow(d, b);
        LOG_I("attached 0x%04x to this kernel as %s", a->fdid, pci);
        /* The attach answers once every peer mapping is in place or refused. */
        peers_attach(a, b);
}

static void exported(void *arg, int err, const char *msg, struct json_object *res)
{
        struct attach *a = arg;
        struct ntbf__d *d = a->d;
        struct ntbf__borrow *b = ntbf__node_borrow(d, a->fdid);
        char why[512];
        const char *boot = "";
        if (!err && !b)
                err = NTBF_ENOTFOUND, msg = "the borrow ended while it was being attached";
        if (err) {
                json_object_put(res);
                return attach_done(a, err, msg);
        }
        ntbf__jget_u(res, "export_id", &a->export_id);
        ntbf__jget_s(res, "boot_id", &boot);
        if (strcmp(boot, d->kern->boot_id)) {
                json_object_put(res);
                snprintf(why, sizeof(why),
                         "0x%04x is lent by '%s', another kernel than this one: attaching a device "
                         "of another host needs the NTB hardware's windows onto its registers, "
                         "which this release does not drive (docs/kernel.md, 'Cross-host "
                         "attach'); use the device API (ntbfab borrow without --attach)",
                         a->fdid, d->t->nodes[b->lender].name);
                return attach_done(a, NTBF_EUNSUPPORTED, why);
        }
        json_object_put(res);
        /* The copy of config space is taken now: the export enabled bus mastering. */
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "fdid", a->fdid);
        ntbf__jput_s(q, "op", "dump");
        ntbf__peer_request(d, b->lender, "cfg", q, dumped, a);
}

void ntbf__kern_attach(struct ntbf__d *d, struct ntbf__borrow *b, ntbf__done_fn cb, void *arg)
{
        char why[512];
        int r = ntbf__kern_open(d, why, sizeof(why));
        if (r)
                return cb(arg, r, why, NULL);
        struct attach *a = calloc(1, sizeof(*a));
        if (!a)
                return cb(arg, -ENOMEM, "out of memory", NULL);
        *a = (struct attach){.d = d, .fdid = b->fdid, .cb = cb, .arg = arg};
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "fdid", b->fdid);
        ntbf__peer_request(d, b->lender, "kexport", q, exported, a);
}

static void ignore(void *arg, int err, const char *msg, struct json_object *res)
{
        uint32_t fdid = (uint32_t)(uintptr_t)arg;
        if (err && err != NTBF_ENOTFOUND)
                LOG_W("the lender did not withdraw its export of 0x%04x: %s", fdid,
                      msg ? msg : ntbf_strerror(err));
        json_object_put(res);
}

void ntbf__kern_detach(struct ntbf__d *d, struct ntbf__borrow *b, bool surprise)
{
        if (b->mdev >= 0)
                return ntbf__kmdev_lost(d, b);
        if (b->shadow < 0 || !d->kern || d->kern->fd < 0)
                return;
        peers_release(d, b);
        struct ntbfab_lend_detach dt = {.shadow_id = (uint32_t)b->shadow,
                                        .flags = surprise ? NTBFAB_LEND_DETACH_SURPRISE : 0};
        if (ioctl(d->kern->fd, NTBFAB_LEND_IOC_DETACH, &dt) && errno != ENOENT)
                LOG_E("cannot detach 0x%04x from this kernel: %s", b->fdid, strerror(errno));
        else
                LOG_I("detached 0x%04x from this kernel%s (%" PRIu64 " DMA mappings left by "
                      "its driver)",
                      b->fdid, surprise ? " (surprise removal)" : "", (uint64_t)dt.mappings);
        /* What the driver wrote on its way out (bus mastering off) still goes to the device,
         * ahead of the export's withdrawal: one connection keeps the order. */
        drain(d, b);
        b->shadow = -1;
        json_object_object_del(b->json, "attached");
        ntbf__node_save_borrow(d, b);
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "fdid", b->fdid);
        ntbf__peer_request(d, b->lender, "kunexport", q, ignore, (void *)(uintptr_t)b->fdid);
}

static void resumed(void *arg, int err, const char *msg, struct json_object *res)
{
        uint32_t fdid = (uint32_t)(uintptr_t)arg;
        (void)res;
        if (err)
                LOG_E("borrowed device 0x%04x was attached before the restart and cannot be "
                      "attached again: %s; return it (ntbfab return)",
                      fdid, msg ? msg : ntbf_strerror(err));
}

void ntbf__kern_resume(struct ntbf__d *d)
{
        for (struct ntbf__borrow *b = d->borrows; b; b = b->next) {
                if (b->shadow >= 0 || !json_object_object_get_ex(b->json, "attached", NULL))
                        continue;
                /* The kernel's peer entries went with the shadow; the manager's go now. */
                peers_release(d, b);
                json_object_object_del(b->json, "attached");
                LOG_I("attaching 0x%04x again (it was attached when this daemon stopped)", b->fdid);
                ntbf__kern_attach(d, b, resumed, (void *)(uintptr_t)b->fdid);
        }
}

/* ---- peer-to-peer mappings (article 4.4) ---------------------------------------------------- */

/*
 * Attached device A reaches every other device this node holds: the others attached to this
 * kernel, and this node's own devices. For each BAR of each such target T the manager
 * resolves (request `map`: the same lender, a device of this node, or another lender) the
 * address A uses to reach it; the module gets it with where this kernel sees the BAR
 * (NTBFAB_LEND_IOC_PEER_ADD), so that A's driver's dma_map_resource() of that BAR returns
 * it. A target attached later is added both ways. Each mapping is recorded in A's borrow
 * (attached.peers: target, bar, phys, size, device_addr, seq, route) and released at the
 * manager (`unmap`) when A or T goes. A mapping refused (by the manager or the module) is
 * recorded as attached.refused (target, bar, error) until A or T goes, and nothing else of
 * it remains: the attach stands.
 */

struct peerop {
        struct attach *a; /* the attach waiting for it, or NULL */
        struct ntbf__d *d;
        uint32_t src, target, bar;
        int64_t src_shadow, tgt_shadow; /* as asked: still the same devices? (-1: not a shadow) */
        uint64_t phys, size;
};

static void unmapped(void *arg, int err, const char *msg, struct json_object *res)
{
        (void)arg;
        json_object_put(res);
        if (err && err != NTBF_ENOTFOUND && err != -ECANCELED)
                LOG_W("releasing a peer mapping at the manager: %s",
                      msg ? msg : ntbf_strerror(err));
}

static void peer_unmap(struct ntbf__d *d, uint64_t seq)
{
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "seq", seq);
        ntbf__peer_request(d, d->manager, "unmap", q, unmapped, NULL);
}

/* b's list key of its attach record ("peers", "refused"), made when create says so. */
static struct json_object *list_of(struct ntbf__borrow *b, const char *key, bool create)
{
        struct json_object *att, *pa = NULL;
        if (!json_object_object_get_ex(b->json, "attached", &att))
                return NULL;
        if (!json_object_object_get_ex(att, key, &pa) && create) {
                pa = json_object_new_array();
                json_object_object_add(att, key, pa);
        }
        return pa;
}

static struct json_object *peers_of(struct ntbf__borrow *b, bool create)
{
        return list_of(b, "peers", create);
}

/* A refused mapping of b (the manager's or the kernel's sentence), for `ntbfab lspci` and
 * the attach's answer: attached.refused, one entry per BAR, until b or the target goes. */
static void refused_add(struct ntbf__d *d, struct ntbf__borrow *b, uint32_t target, uint32_t bar,
                        const char *why)
{
        struct json_object *ra = list_of(b, "refused", true), *o;
        if (!ra)
                return; /* not attached (any more): nothing to name it in */
        o = json_object_new_object();
        ntbf__jput_u(o, "target", target);
        ntbf__jput_u(o, "bar", bar);
        ntbf__jput_s(o, "error", why);
        json_object_array_add(ra, o);
        ntbf__node_save_borrow(d, b);
}

/* x's refusals of mappings to target go with the target: nothing is left to refuse. */
static bool refused_drop(struct ntbf__borrow *x, uint32_t target)
{
        struct json_object *ra = list_of(x, "refused", false), *keep, *att;
        if (!ra)
                return false;
        keep = json_object_new_array();
        size_t n = json_object_array_length(ra);
        for (size_t i = 0; i < n; i++) {
                struct json_object *e = json_object_array_get_idx(ra, i);
                uint64_t tg = 0;
                ntbf__jget_u(e, "target", &tg);
                if (tg != target)
                        json_object_array_add(keep, json_object_get(e));
        }
        bool dropped = json_object_array_length(keep) != n;
        json_object_object_get_ex(x->json, "attached", &att);
        if (json_object_array_length(keep)) {
                json_object_object_add(att, "refused", keep);
        } else {
                json_object_object_del(att, "refused");
                json_object_put(keep);
        }
        return dropped;
}

/* Where this kernel sees BAR bar of the device at PCI address pci (sysfs): memory BARs only. */
static bool bar_in_sysfs(const char *pci, uint32_t bar, uint64_t *phys, uint64_t *size)
{
        static const struct ntbf__vfio_sys host; /* the real /sys */
        uint64_t addr[6], len[6];
        if (bar >= 6 || ntbf__vfio_sys_bars(&host, pci, addr, len) || !addr[bar])
                return false;
        *phys = addr[bar];
        *size = len[bar];
        return true;
}

/* The target's BAR here: a shadow's (pci given) or a real local device's from sysfs, a
 * simulated device's from the topology. Sizes are rounded up to pages (the module's unit). */
static bool bar_here(struct ntbf__d *d, const char *pci, uint32_t fdid, uint32_t bar,
                     uint64_t *phys, uint64_t *size)
{
        uint32_t dev, fn;
        if (ntbf__fdid_resolve(d->t, fdid, &dev, &fn))
                return false;
        const struct ntbf_device *td = &d->t->devices[dev];
        if (!ntbf_device_bar_size(td, fn, bar))
                return false; /* the manager maps only the BARs the topology names */
        char real[32];
        if (!pci && ntbf__bars_host_placed(d->t, dev)) {
                snprintf(real, sizeof(real), "%04x:%02x:%02x.%x", td->domain, td->bus, td->dev,
                         td->fn + fn);
                pci = real;
        }
        if (pci) {
                if (!bar_in_sysfs(pci, bar, phys, size))
                        return false;
        } else {
                *phys = ntbf_device_bar_addr(td, fn, bar);
                *size = ntbf_device_bar_size(td, fn, bar);
        }
        *size = (*size + 4095) & ~UINT64_C(4095);
        return *phys != 0;
}

static const char *route_of(struct ntbf__d *d, struct ntbf__borrow *src, uint32_t target)
{
        uint32_t dev, fn;
        if (ntbf__fdid_resolve(d->t, target, &dev, &fn))
                return "?";
        uint32_t n = d->t->devices[dev].node;
        return n == d->self       ? "borrower's device"
               : n == src->lender ? "same lender"
                                  : "another lender";
}

static void peer_attach_step(struct attach *a)
{
        if (a && !--a->pending)
                attach_done(a, 0, NULL);
}

static void peer_mapped(void *arg, int err, const char *msg, struct json_object *res)
{
        struct peerop *op = arg;
        struct ntbf__d *d = op->d;
        uint64_t seq = 0, addr = 0;
        ntbf__jget_u(res, "seq", &seq);
        ntbf__jget_u(res, "device_addr", &addr);
        json_object_put(res);
        struct ntbf__borrow *b = ntbf__node_borrow(d, op->src);
        struct ntbf__borrow *t = op->tgt_shadow >= 0 ? ntbf__node_borrow(d, op->target) : NULL;
        bool gone = !b || b->shadow != op->src_shadow || !d->kern || d->kern->fd < 0 ||
                    (op->tgt_shadow >= 0 && (!t || t->shadow != op->tgt_shadow));
        char why[600];
        if (err) {
                snprintf(why, sizeof(why), "the manager refused the mapping: %s",
                         msg ? msg : ntbf_strerror(err));
                LOG_W("0x%04x cannot reach BAR%u of 0x%04x peer-to-peer: %s; its driver's "
                      "dma_map_resource() of that BAR fails, the attach stands",
                      op->src, op->bar, op->target, why);
                if (!gone)
                        refused_add(d, b, op->target, op->bar, why);
        } else if (gone) {
                /* One of the two went meanwhile: nothing to enter. */
                peer_unmap(d, seq);
        } else {
                struct ntbfab_lend_peer pe = {.shadow_id = (uint32_t)b->shadow,
                                              .phys = op->phys,
                                              .size = op->size,
                                              .dev_addr = addr};
                if (ioctl(d->kern->fd, NTBFAB_LEND_IOC_PEER_ADD, &pe)) {
                        snprintf(why, sizeof(why), "the kernel refused the entry: %s",
                                 strerror(errno));
                        LOG_W("0x%04x cannot reach BAR%u of 0x%04x peer-to-peer: %s; its "
                              "driver's dma_map_resource() of that BAR fails, the attach stands",
                              op->src, op->bar, op->target, why);
                        peer_unmap(d, seq);
                        refused_add(d, b, op->target, op->bar, why);
                } else {
                        struct json_object *o = json_object_new_object();
                        ntbf__jput_u(o, "target", op->target);
                        ntbf__jput_u(o, "bar", op->bar);
                        ntbf__jput_u(o, "phys", op->phys);
                        ntbf__jput_u(o, "size", op->size);
                        ntbf__jput_u(o, "device_addr", addr);
                        ntbf__jput_u(o, "seq", seq);
                        ntbf__jput_s(o, "route", route_of(d, b, op->target));
                        json_object_array_add(peers_of(b, true), o);
                        ntbf__node_save_borrow(d, b);
                        LOG_I("0x%04x reaches BAR%u of 0x%04x (0x%" PRIx64 "+0x%" PRIx64
                              " here) at device address 0x%" PRIx64 " (%s)",
                              op->src, op->bar, op->target, op->phys, op->size, addr,
                              route_of(d, b, op->target));
                }
        }
        peer_attach_step(op->a);
        free(op);
}

/* Ask the manager for src's mappings of every BAR of target (tpci: a shadow's address). */
static void peer_map(struct ntbf__d *d, struct attach *a, struct ntbf__borrow *src, uint32_t target,
                     int64_t tgt_shadow, const char *tpci)
{
        for (uint32_t bar = 0; bar < NTBF_MAX_BARS; bar++) {
                uint64_t phys, size;
                if (!bar_here(d, tpci, target, bar, &phys, &size))
                        continue;
                struct peerop *op = calloc(1, sizeof(*op));
                if (!op) {
                        LOG_W("no peer mapping from 0x%04x to 0x%04x: out of memory", src->fdid,
                              target);
                        return;
                }
                *op = (struct peerop){a,           d,          src->fdid, target, bar,
                                      src->shadow, tgt_shadow, phys,      size};
                if (a)
                        a->pending++;
                struct json_object *q = json_object_new_object();
                ntbf__jput_u(q, "src", src->fdid);
                ntbf__jput_u(q, "target", target);
                ntbf__jput_u(q, "bar", bar);
                ntbf__peer_request(d, d->manager, "map", q, peer_mapped, op);
        }
}

static const char *pci_of(struct ntbf__borrow *b)
{
        struct json_object *att;
        const char *pci = NULL;
        if (json_object_object_get_ex(b->json, "attached", &att))
                ntbf__jget_s(att, "pci", &pci);
        return pci;
}

static void peers_attach(struct attach *a, struct ntbf__borrow *b)
{
        struct ntbf__d *d = a->d;
        a->pending = 1; /* this function's own step: no answer before every request is out */
        for (struct ntbf__borrow *x = d->borrows; x; x = x->next) {
                if (x == b || x->shadow < 0 || !pci_of(x))
                        continue;
                peer_map(d, a, b, x->fdid, x->shadow, pci_of(x));
                peer_map(d, a, x, b->fdid, b->shadow, pci_of(b));
        }
        for (uint32_t i = 0; i < d->t->ndevices; i++)
                if (d->t->devices[i].node == d->self)
                        for (uint32_t fn = 0; fn < d->t->devices[i].functions; fn++)
                                peer_map(d, a, b, ntbf__fdid_of(d->t, i, fn), -1, NULL);
        peer_attach_step(a);
}

/* b leaves this kernel: the entries of others that reach it go from the module, and every
 * mapping of it or to it goes back to the manager. */
static void peers_release(struct ntbf__d *d, struct ntbf__borrow *b)
{
        for (struct ntbf__borrow *x = d->borrows; x; x = x->next) {
                if (x == b)
                        continue;
                bool save = refused_drop(x, b->fdid);
                struct json_object *pa = peers_of(x, false);
                size_t n = pa ? json_object_array_length(pa) : 0, dropped = 0;
                struct json_object *keep = json_object_new_array();
                for (size_t i = 0; i < n; i++) {
                        struct json_object *e = json_object_array_get_idx(pa, i);
                        uint64_t tg = 0, seq = 0, phys = 0, size = 0;
                        ntbf__jget_u(e, "target", &tg);
                        if (tg != b->fdid) {
                                json_object_array_add(keep, json_object_get(e));
                                continue;
                        }
                        ntbf__jget_u(e, "seq", &seq);
                        ntbf__jget_u(e, "phys", &phys);
                        ntbf__jget_u(e, "size", &size);
                        struct ntbfab_lend_peer pe = {
                            .shadow_id = (uint32_t)x->shadow, .phys = phys, .size = size};
                        if (x->shadow >= 0 && d->kern && d->kern->fd >= 0 &&
                            ioctl(d->kern->fd, NTBFAB_LEND_IOC_PEER_DEL, &pe) && errno != ENOENT)
                                LOG_W("cannot withdraw 0x%04x's peer entry for 0x%04x: %s", x->fdid,
                                      b->fdid, strerror(errno));
                        peer_unmap(d, seq);
                        dropped++;
                }
                if (pa) {
                        struct json_object *att;
                        json_object_object_get_ex(x->json, "attached", &att);
                        json_object_object_add(att, "peers", keep);
                } else {
                        json_object_put(keep);
                }
                if (dropped) {
                        LOG_I("0x%04x no longer reaches 0x%04x peer-to-peer (%zu BAR%s)", x->fdid,
                              b->fdid, dropped, dropped == 1 ? "" : "s");
                        save = true;
                }
                if (save)
                        ntbf__node_save_borrow(d, x);
        }
        struct json_object *pa = peers_of(b, false);
        size_t n = pa ? json_object_array_length(pa) : 0;
        for (size_t i = 0; i < n; i++) {
                uint64_t seq = 0;
                ntbf__jget_u(json_object_array_get_idx(pa, i), "seq", &seq);
                peer_unmap(d, seq);
        }
        struct json_object *att;
        if (json_object_object_get_ex(b->json, "attached", &att)) {
                json_object_object_del(att, "peers");
                json_object_object_del(att, "refused");
        }
}

/* ---- the lender: exports for a borrower in this same kernel -------------------------------- */

static bool lend_check(struct ntbf__d *d, uint32_t from, struct json_object *p, uint32_t *dev,
                       uint32_t *fn, ntbf__done_fn cb, void *arg)
{
        uint64_t fdid;
        if (!ntbf__jget_u(p, "fdid", &fdid) || ntbf__fdid_resolve(d->t, (uint32_t)fdid, dev, fn) ||
            d->t->devices[*dev].node != d->self) {
                cb(arg, NTBF_ENOTFOUND, "no such device of this node", NULL);
                return false;
        }
        struct ntbf__lend *l = ntbf__node_lend(d, (uint32_t)fdid);
        if (from != d->self && (!l || !(l->borrowers >> from & 1))) {
                cb(arg, -EPERM, "the device is not borrowed by the asking node", NULL);
                return false;
        }
        return true;
}

void ntbf__kern_export(struct ntbf__d *d, uint32_t from, struct json_object *p, ntbf__done_fn cb,
                       void *arg)
{
        uint32_t dev, fn;
        char why[512];
        if (!lend_check(d, from, p, &dev, &fn, cb, arg))
                return;
        if (!ntbf__vfiod_is(d, dev))
                return cb(arg, NTBF_EUNSUPPORTED,
                          "loopback attach needs a real device of the lender (vfio: true)", NULL);
        int r = ntbf__kern_open(d, why, sizeof(why));
        if (r)
                return cb(arg, r, why, NULL);
        struct ntbf__vfiod_kx kx;
        r = ntbf__vfiod_kexport(d, dev, fn, &kx, why, sizeof(why));
        if (r)
                return cb(arg, r, why, NULL);
        if (!kx.export_id) {
                uint16_t dom;
                uint8_t bus, dv, f;
                ntbf_bdf_parse(kx.bdf, &dom, &bus, &dv, &f);
                struct ntbfab_lend_export e = {.group_fd = kx.group_fd,
                                               .pci_domain = dom,
                                               .pci_rid = NTBFAB_LEND_RID(bus, dv << 3 | f),
                                               .nr_irqs = kx.nirqs,
                                               .irq_fds = (uint64_t)(uintptr_t)kx.fds,
                                               .iova_base = kx.iova_base,
                                               .iova_size = kx.iova_size};
                if (ioctl(d->kern->fd, NTBFAB_LEND_IOC_EXPORT, &e)) {
                        int e2 = errno;
                        ntbf__vfiod_kunexport(d, dev, fn);
                        snprintf(why, sizeof(why),
                                 "the kernel refused to export %s for loopback lending: %s (its "
                                 "log says why: dmesg)",
                                 kx.bdf, strerror(e2));
                        return cb(arg, -e2, why, NULL);
                }
                ntbf__vfiod_kexport_set(d, dev, fn, e.export_id);
                kx.export_id = e.export_id;
                LOG_I("exported %s to this kernel (export %" PRIu64 ", %u vectors, IOVA 0x%" PRIx64
                      "+0x%" PRIx64 ")",
                      kx.bdf, kx.export_id, kx.nirqs, kx.iova_base, kx.iova_size);
        }
        struct json_object *o = json_object_new_object();
        ntbf__jput_u(o, "export_id", kx.export_id);
        ntbf__jput_s(o, "boot_id", d->kern->boot_id);
        cb(arg, 0, NULL, o);
}

void ntbf__kern_unexport(struct ntbf__d *d, uint32_t from, struct json_object *p, ntbf__done_fn cb,
                         void *arg)
{
        uint32_t dev, fn;
        if (!lend_check(d, from, p, &dev, &fn, cb, arg))
                return;
        uint64_t id = ntbf__vfiod_kexport_id(d, dev, fn);
        if (!id)
                return cb(arg, NTBF_ENOTFOUND, "not exported", NULL);
        struct ntbfab_lend_unexport u = {.export_id = id};
        if (d->kern && d->kern->fd >= 0 && ioctl(d->kern->fd, NTBFAB_LEND_IOC_UNEXPORT, &u) &&
            errno != ENOENT)
                LOG_E("cannot withdraw export %" PRIu64 ": %s", id, strerror(errno));
        ntbf__vfiod_kunexport(d, dev, fn);
        LOG_I("withdrew export %" PRIu64 " from this kernel", id);
        cb(arg, 0, NULL, NULL);
}
