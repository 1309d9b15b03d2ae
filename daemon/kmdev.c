/* daemon/kmdev.c: VM pass-through, the borrower's side of ntbfab_mdev (kern.h, docs/kernel.md).
 *
 * The module asks, the daemon decides and answers on the same device file as kern.c:
 *  - DESCRIBE: the lender's config space and BAR sizes, read without a borrow (peer `cfg`
 *    op `dump` is open to every node for a lent device), so that the VMM can set the device
 *    up while nothing is taken;
 *  - BORROW: an ordinary exclusive kernel borrow (the manager admits and programs it), the
 *    lender's export (peer `kexport`, loopback lending only, as for shadow devices), the
 *    config space now, and the two DMA windows from the guest memory the module pinned
 *    (MDEV_INFO): MDEV_GRANT. Any failure returns what was taken and refuses with a sentence;
 *  - CFG_WRITE: forwarded to the lender, its dword back (MDEV_DONE);
 *  - RETURN: the export withdrawn, the borrow returned (MDEV_DONE); LOST needs no answer.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "daemon.h"
#include "kern.h"
#include "log.h"
#include "ntbfab/error.h"
#include "ntbfab_lend.h"

#define GIB4       (UINT64_C(4) << 30)
#define MDEV_ALIGN (UINT64_C(2) << 20) /* window granularity */
#define MDEV_REACH (UINT64_C(1) << 48)

/* ---- the windows (pure; unit-tested) ------------------------------------------------------- */

int ntbf__kmdev_windows(const struct ntbfab_lend_mdev_range *r, uint32_t n, uint64_t align,
                        uint64_t limit, struct ntbfab_lend_mdev_window *w)
{
        uint64_t lo[2] = {UINT64_MAX, UINT64_MAX}, hi[2] = {0, 0}, prev = 0;
        memset(w, 0, 2 * sizeof(*w));
        if (!n || !align || (align & (align - 1)))
                return -EINVAL;
        for (uint32_t i = 0; i < n; i++) {
                uint64_t a = r[i].gpa, e = r[i].gpa + r[i].size;
                if (!r[i].size || e < a || a < prev || (a & 4095) || (r[i].size & 4095))
                        return -EINVAL;
                if (e > limit)
                        return -ERANGE;
                prev = e;
                /* A range across 4 GiB belongs to both sides. */
                if (a < GIB4) {
                        lo[0] = lo[0] < a ? lo[0] : a;
                        hi[0] = e < GIB4 ? e : GIB4;
                }
                if (e > GIB4) {
                        uint64_t s = a > GIB4 ? a : GIB4;
                        lo[1] = lo[1] < s ? lo[1] : s;
                        hi[1] = e;
                }
        }
        struct ntbfab_lend_mdev_window out[2] = {{0, 0}, {0, 0}};
        for (int k = 0; k < 2; k++) {
                if (lo[k] == UINT64_MAX)
                        continue;
                uint64_t a = lo[k] & ~(align - 1), e = (hi[k] + align - 1) & ~(align - 1);
                if (e < hi[k] || e > limit)
                        return -ERANGE;
                out[k] = (struct ntbfab_lend_mdev_window){a, e - a};
        }
        memcpy(w, out, sizeof(out));
        return 0;
}

/* ---- the pool ------------------------------------------------------------------------------ */

static bool has_mdev(struct ntbf__d *d)
{
        struct ntbfab_lend_version v = {0};
        int fd = ntbf__kern_fd(d);
        return fd >= 0 && !ioctl(fd, NTBFAB_LEND_IOC_VERSION, &v) &&
               (v.features & NTBFAB_LEND_FEAT_MDEV);
}

int ntbf__kmdev_pool(struct ntbf__d *d, char *why, size_t whylen)
{
        int r = ntbf__kern_open(d, why, whylen);
        if (r)
                return r;
        if (!has_mdev(d)) {
                snprintf(why, whylen,
                         "the kernel module ntbfab_mdev is not loaded (modprobe ntbfab_mdev; "
                         "docs/kernel.md)");
                return NTBF_EUNSUPPORTED;
        }
        const struct ntbf_topo *t = d->t;
        struct ntbfab_lend_mdev_type *ty = calloc(NTBFAB_LEND_MDEV_MAX_TYPES, sizeof(*ty));
        if (!ty)
                return -ENOMEM;
        uint32_t n = 0;
        for (uint32_t dev = 0; dev < t->ndevices; dev++) {
                const struct ntbf_device *x = &t->devices[dev];
                if (x->node == d->self)
                        continue;
                for (uint32_t fn = 0; fn < x->functions && n < NTBFAB_LEND_MDEV_MAX_TYPES; fn++) {
                        ty[n] = (struct ntbfab_lend_mdev_type){.fdid = ntbf__fdid_of(t, dev, fn),
                                                               .vendor = x->vendor_id,
                                                               .device = x->device_id,
                                                               .class_code = x->class_code};
                        char nm[2 * NTBF_NAME_MAX + 16];
                        snprintf(nm, sizeof(nm), "%s.%s%s%.0u", t->nodes[x->node].name, x->name,
                                 fn ? ".fn" : "", fn);
                        /* Zeros after the name (calloc): the module compares whole entries. */
                        memcpy(ty[n].name, nm, strnlen(nm, sizeof(ty[n].name) - 1));
                        n++;
                }
        }
        if (!n) {
                free(ty);
                snprintf(why, whylen,
                         "no device of another node in the cluster: '%s' has nothing to borrow "
                         "for its VMs",
                         t->nodes[d->self].name);
                return NTBF_ENOTFOUND;
        }
        struct ntbfab_lend_mdev_pool p = {.count = n, .types = (uint64_t)(uintptr_t)ty};
        snprintf(p.node, sizeof(p.node), "%s", t->nodes[d->self].name);
        r = ioctl(ntbf__kern_fd(d), NTBFAB_LEND_IOC_MDEV_POOL, &p) ? -errno : 0;
        free(ty);
        if (r == -EBUSY)
                snprintf(why, whylen,
                         "the module's mdev parent of '%s' has instances of another pool: remove "
                         "them first (ntbfab mdev remove)",
                         t->nodes[d->self].name);
        else if (r)
                snprintf(why, whylen, "the kernel refused the pool of %u devices: %s (dmesg)", n,
                         strerror(-r));
        else
                LOG_I("VM pass-through: %u device%s of the pool offered as mdev types", n,
                      n == 1 ? "" : "s");
        return r;
}

static void give_back(struct ntbf__d *d, uint32_t fdid, uint32_t lender, bool exported);
static const char *const state_names[] = {"idle", "open", "borrowing", "borrowed", "lost"};

/*
 * What a daemon before this one left: borrows held for VMs by instances of the module. An
 * instance that still has the device (the VM runs on) is served from here on; one that no
 * longer has it (its VM stopped, or it was removed, while no daemon ran: the module could tell
 * nobody) leaves a borrow nobody holds, which goes back now.
 */
static void take_over(struct ntbf__d *d)
{
        struct ntbfab_lend_mdev_entry e[64];
        struct ntbfab_lend_mdev_list l = {.count = 64, .entries = (uint64_t)(uintptr_t)e};
        bool listed = !ioctl(ntbf__kern_fd(d), NTBFAB_LEND_IOC_MDEV_LIST, &l);
        if (!listed)
                LOG_W("cannot list the VMs' instances (%s): borrows held for them are taken "
                      "over as recorded",
                      strerror(errno));
        for (struct ntbf__borrow *b = d->borrows, *next; b; b = next) {
                struct json_object *o;
                uint64_t inst;
                next = b->next;
                if (!json_object_object_get_ex(b->json, "mdev", &o) ||
                    !ntbf__jget_u(o, "instance", &inst) || b->mdev == (int64_t)inst)
                        continue;
                const char *st = listed ? "gone" : NULL;
                for (uint32_t i = 0; listed && i < l.count && i < 64; i++)
                        if (e[i].instance == inst && e[i].fdid == b->fdid)
                                st = e[i].state == NTBFAB_LEND_MDEV_BORROWED ? NULL
                                     : e[i].state < 5 ? state_names[e[i].state]
                                                      : "?";
                if (st) {
                        LOG_W("0x%04x was held for a VM by instance %" PRIu64 ", which no longer "
                              "has it (%s): its VM stopped, or it went, while no daemon ran; "
                              "returning it",
                              b->fdid, inst, st);
                        give_back(d, b->fdid, b->lender, true);
                        ntbf__node_event(d, "device.returned", b->fdid, NULL, NULL);
                        continue;
                }
                /* A daemon before this one died with the VM running: the instance kept the
                 * device, this daemon serves it from here on (its config writes, its
                 * return). */
                b->mdev = (int64_t)inst;
                LOG_I("0x%04x of a VM (instance %" PRIu64 ") taken over from its borrow record",
                      b->fdid, inst);
        }
}

void ntbf__kmdev_start(struct ntbf__d *d)
{
        char why[256];
        bool held = false;
        for (struct ntbf__borrow *b = d->borrows; b; b = b->next)
                held |= json_object_object_get_ex(b->json, "mdev", NULL);
        /* Only where the module is loaded: nothing is opened for a daemon that never serves
         * VMs, unless it held devices for them before a restart. */
        if (!held && access("/sys/module/ntbfab_mdev", F_OK))
                return;
        if (ntbf__kmdev_pool(d, why, sizeof(why))) {
                if (held)
                        LOG_E("VM pass-through unavailable: %s", why);
                else
                        LOG_I("VM pass-through unavailable: %s", why);
                return;
        }
        if (held)
                take_over(d);
}

/* ---- answers -------------------------------------------------------------------------------- */

static struct ntbf__borrow *by_inst(struct ntbf__d *d, uint32_t inst)
{
        for (struct ntbf__borrow *b = d->borrows; b; b = b->next)
                if (b->mdev == (int64_t)inst)
                        return b;
        return NULL;
}

static void done(struct ntbf__d *d, uint32_t inst, uint64_t seq, int status, uint32_t value)
{
        struct ntbfab_lend_mdev_done a = {
            .instance = inst, .status = status, .seq = seq, .value = value};
        if (ioctl(ntbf__kern_fd(d), NTBFAB_LEND_IOC_MDEV_DONE, &a) && errno != ENOENT)
                LOG_W("cannot answer instance %u: %s", inst, strerror(errno));
}

struct req {
        struct ntbf__d *d;
        uint32_t inst, fdid, lender;
        uint64_t seq, export_id;
        bool borrowed;
        uint32_t cfg_n;
        uint8_t cfg[4096];
};

static struct req *req_new(struct ntbf__d *d, const struct ntbfab_lend_msg *m)
{
        struct req *q = calloc(1, sizeof(*q));
        if (q)
                *q = (struct req){.d = d, .inst = m->shadow_id, .seq = m->seq, .fdid = m->value};
        return q;
}

/* ---- DESCRIBE ------------------------------------------------------------------------------- */

static void described(void *arg, int err, const char *msg, struct json_object *res)
{
        struct req *q = arg;
        struct ntbfab_lend_mdev_config c = {.instance = q->inst, .seq = q->seq};
        uint32_t n = 0;
        if (!err)
                err = ntbf__kern_cfg_parse(res, q->cfg, &n, &msg);
        struct json_object *bs;
        if (!err && json_object_object_get_ex(res, "bar_sizes", &bs))
                for (size_t i = 0; i < 6 && i < json_object_array_length(bs); i++)
                        c.bar_sizes[i] =
                            (uint64_t)json_object_get_uint64(json_object_array_get_idx(bs, i));
        if (err) {
                c.status = err < 0 && err > -4096 ? err : -EIO;
                snprintf(c.why, sizeof(c.why), "0x%04x cannot be described: %s", q->fdid,
                         msg ? msg : ntbf_strerror(err));
                LOG_W("%s", c.why);
        } else {
                c.config = (uint64_t)(uintptr_t)q->cfg;
                c.config_size = n;
        }
        if (ioctl(ntbf__kern_fd(q->d), NTBFAB_LEND_IOC_MDEV_CONFIG, &c))
                LOG_W("cannot describe 0x%04x to instance %u: %s", q->fdid, q->inst,
                      strerror(errno));
        json_object_put(res);
        free(q);
}

static void describe(struct ntbf__d *d, const struct ntbfab_lend_msg *m)
{
        uint32_t dev, fn;
        struct req *q = req_new(d, m);
        if (!q)
                return;
        if (ntbf__fdid_resolve(d->t, q->fdid, &dev, &fn))
                return described(q, NTBF_ENOTFOUND, "no such device in the cluster", NULL);
        struct json_object *p = json_object_new_object();
        ntbf__jput_u(p, "fdid", q->fdid);
        ntbf__jput_s(p, "op", "dump");
        ntbf__peer_request(d, d->t->devices[dev].node, "cfg", p, described, q);
}

/* ---- BORROW --------------------------------------------------------------------------------- */

static void ignored(void *arg, int err, const char *msg, struct json_object *res)
{
        uint32_t fdid = (uint32_t)(uintptr_t)arg;
        if (err && err != NTBF_ENOTFOUND)
                LOG_W("returning 0x%04x of a VM: %s", fdid, msg ? msg : ntbf_strerror(err));
        json_object_put(res);
}

/* The export and the borrow go (in that order, on the connections that keep it). */
static void give_back(struct ntbf__d *d, uint32_t fdid, uint32_t lender, bool exported)
{
        struct ntbf__borrow *b = ntbf__node_borrow(d, fdid);
        struct json_object *p;
        if (b)
                b->mdev = -1; /* nothing left for kern_detach() to withdraw */
        if (exported) {
                p = json_object_new_object();
                ntbf__jput_u(p, "fdid", fdid);
                ntbf__peer_request(d, lender, "kunexport", p, ignored, (void *)(uintptr_t)fdid);
        }
        p = json_object_new_object();
        ntbf__jput_u(p, "fdid", fdid);
        ntbf__peer_request(d, d->manager, "return", p, ignored, (void *)(uintptr_t)fdid);
        ntbf__node_drop_borrow(d, fdid, "returned by its VM");
}

static void grant(struct req *q, int err, const char *msg)
{
        struct ntbf__d *d = q->d;
        struct ntbfab_lend_mdev_grant g = {.instance = q->inst, .seq = q->seq};
        struct ntbfab_lend_mdev_range ranges[NTBFAB_LEND_MDEV_MAX_RANGES];
        struct ntbfab_lend_mdev_info in = {.instance = q->inst,
                                           .nr_ranges = NTBFAB_LEND_MDEV_MAX_RANGES,
                                           .ranges = (uint64_t)(uintptr_t)ranges};
        /* The layout the module found when it pinned the guest's memory (article 5.2). */
        if (!err && ioctl(ntbf__kern_fd(d), NTBFAB_LEND_IOC_MDEV_INFO, &in))
                err = -errno, msg = "the instance is gone";
        if (!err && in.nr_ranges > NTBFAB_LEND_MDEV_MAX_RANGES)
                err = -E2BIG, msg = "the guest's memory is in more ranges than a grant maps";
        int w =
            err ? 0 : ntbf__kmdev_windows(ranges, in.nr_ranges, MDEV_ALIGN, MDEV_REACH, g.windows);
        if (w) {
                err = w;
                msg = w == -ERANGE ? "the guest's memory is beyond the device's reach"
                                   : "the guest's memory layout is not usable";
        }
        if (err) {
                snprintf(g.why, sizeof(g.why), "0x%04x not borrowed for the VM: %s", q->fdid,
                         msg ? msg : ntbf_strerror(err));
                LOG_W("%s", g.why);
                if (q->borrowed)
                        give_back(d, q->fdid, q->lender, q->export_id != 0);
                g.status = err < 0 && err > -4096 ? err : -EIO;
        } else {
                g.flags = NTBFAB_LEND_ATTACH_LOOPBACK;
                g.export_id = q->export_id;
                g.config = (uint64_t)(uintptr_t)q->cfg;
                g.config_size = q->cfg_n;
        }
        if (ioctl(ntbf__kern_fd(d), NTBFAB_LEND_IOC_MDEV_GRANT, &g)) {
                if (!err) {
                        LOG_E("instance %u refused the grant of 0x%04x: %s (dmesg)", q->inst,
                              q->fdid, strerror(errno));
                        give_back(d, q->fdid, q->lender, true);
                }
        } else if (!err) {
                struct ntbf__borrow *b = ntbf__node_borrow(d, q->fdid);
                if (b) {
                        struct json_object *o = json_object_new_object();
                        ntbf__jput_u(o, "instance", q->inst);
                        ntbf__jput_u(o, "export", q->export_id);
                        json_object_object_add(b->json, "mdev", o);
                        ntbf__node_save_borrow(d, b);
                }
                LOG_I("0x%04x borrowed for a VM (instance %u, %" PRIu64 " MiB of guest RAM): "
                      "windows 0x%" PRIx64 "+0x%" PRIx64 " and 0x%" PRIx64 "+0x%" PRIx64,
                      q->fdid, q->inst, (uint64_t)in.pinned >> 20, (uint64_t)g.windows[0].gpa,
                      (uint64_t)g.windows[0].size, (uint64_t)g.windows[1].gpa,
                      (uint64_t)g.windows[1].size);
                ntbf__node_event(d, "device.borrowed", q->fdid, NULL, NULL);
        }
        free(q);
}

static void b_dumped(void *arg, int err, const char *msg, struct json_object *res)
{
        struct req *q = arg;
        if (!err)
                err = ntbf__kern_cfg_parse(res, q->cfg, &q->cfg_n, &msg);
        json_object_put(res);
        grant(q, err, msg);
}

static void b_exported(void *arg, int err, const char *msg, struct json_object *res)
{
        struct req *q = arg;
        struct ntbf__d *d = q->d;
        const char *boot = "";
        char why[NTBFAB_LEND_MDEV_WHY_LEN];
        if (!err) {
                ntbf__jget_u(res, "export_id", &q->export_id);
                ntbf__jget_s(res, "boot_id", &boot);
                if (strcmp(boot, ntbf__kern_boot_id(d))) {
                        snprintf(why, sizeof(why),
                                 "it is lent by another kernel: a VM reaches only devices of "
                                 "this kernel's lenders in this release (docs/kernel.md)");
                        err = NTBF_EUNSUPPORTED, msg = why;
                }
        }
        json_object_put(res);
        if (err)
                return grant(q, err, msg);
        struct json_object *p = json_object_new_object();
        ntbf__jput_u(p, "fdid", q->fdid);
        ntbf__jput_s(p, "op", "dump");
        ntbf__peer_request(d, q->lender, "cfg", p, b_dumped, q);
}

static void b_borrowed(void *arg, int err, const char *msg, struct json_object *res)
{
        struct req *q = arg;
        struct ntbf__d *d = q->d;
        struct ntbf__borrow *b = err ? NULL : ntbf__node_add_borrow(d, res);
        json_object_put(res);
        if (!err && !b)
                err = -ENOMEM, msg = "cannot record the borrow";
        if (err)
                return grant(q, err, msg);
        q->borrowed = true;
        b->mdev = q->inst;
        q->lender = b->lender;
        struct json_object *p = json_object_new_object();
        ntbf__jput_u(p, "fdid", q->fdid);
        ntbf__peer_request(d, q->lender, "kexport", p, b_exported, q);
}

static void borrow(struct ntbf__d *d, const struct ntbfab_lend_msg *m)
{
        struct req *q = req_new(d, m);
        if (!q)
                return;
        if (!ntbf__peer_connected(d, d->manager))
                return grant(q, NTBF_EUNREACHABLE, "the fabric manager is not reachable");
        struct json_object *p = json_object_new_object();
        ntbf__jput_u(p, "fdid", q->fdid);
        ntbf__jput_s(p, "mode", "exclusive");
        ntbf__jput_b(p, "attach", true); /* held by this kernel: no device API on it */
        ntbf__peer_request(d, d->manager, "borrow", p, b_borrowed, q);
}

/* ---- CFG_WRITE, RETURN ---------------------------------------------------------------------- */

static void cfg_written(void *arg, int err, const char *msg, struct json_object *res)
{
        struct req *q = arg;
        uint64_t dw = 0;
        if (!err && !ntbf__jget_u(res, "dword", &dw))
                err = NTBF_EPROTO, msg = "the lender's answer has no dword";
        if (err)
                LOG_W("config write of a VM to 0x%04x: %s", q->fdid,
                      msg ? msg : ntbf_strerror(err));
        json_object_put(res);
        done(q->d, q->inst, q->seq, err ? (err < 0 && err > -4096 ? err : -EIO) : 0, (uint32_t)dw);
        free(q);
}

static void cfg_write(struct ntbf__d *d, const struct ntbfab_lend_msg *m)
{
        struct ntbf__borrow *b = by_inst(d, m->shadow_id);
        if (!b)
                return done(d, m->shadow_id, m->seq, -ENOENT, 0);
        struct req *q = req_new(d, m);
        if (!q)
                return done(d, m->shadow_id, m->seq, -ENOMEM, 0);
        q->fdid = b->fdid;
        struct json_object *p = json_object_new_object();
        ntbf__jput_u(p, "fdid", b->fdid);
        ntbf__jput_s(p, "op", "w");
        ntbf__jput_u(p, "off", m->offset);
        ntbf__jput_u(p, "size", m->size);
        ntbf__jput_u(p, "value", m->value);
        ntbf__peer_request(d, b->lender, "cfg", p, cfg_written, q);
}

static void ret(struct ntbf__d *d, const struct ntbfab_lend_msg *m)
{
        struct ntbf__borrow *b = by_inst(d, m->shadow_id);
        static const char *const why[] = {"",
                                          "the guest released it",
                                          "the VMM reset it",
                                          "the VM stopped",
                                          "its lender withdrew it",
                                          "its instance was removed"};
        if (b) {
                LOG_I("returning 0x%04x of a VM (instance %u): %s", b->fdid, m->shadow_id,
                      m->value < 6 ? why[m->value] : "?");
                b->mdev = -1;
                give_back(d, b->fdid, b->lender, m->value != NTBFAB_LEND_MDEV_WHY_LOST);
                ntbf__node_event(d, "device.returned", b->fdid, NULL, NULL);
        }
        if (m->value != NTBFAB_LEND_MDEV_WHY_LOST)
                done(d, m->shadow_id, m->seq, 0, 0);
}

void ntbf__kmdev_msg(struct ntbf__d *d, const struct ntbfab_lend_msg *m)
{
        switch (m->kind) {
        case NTBFAB_LEND_MSG_MDEV_DESCRIBE:
                return describe(d, m);
        case NTBFAB_LEND_MSG_MDEV_BORROW:
                return borrow(d, m);
        case NTBFAB_LEND_MSG_MDEV_CFG_WRITE:
                return cfg_write(d, m);
        case NTBFAB_LEND_MSG_MDEV_RETURN:
                return ret(d, m);
        }
}

void ntbf__kmdev_lost(struct ntbf__d *d, struct ntbf__borrow *b)
{
        /* The lender's export goes: the module tears the instance's borrow down and the
         * guest sees the device removed; its RETURN (LOST) then finds no borrow. */
        LOG_W("0x%04x of a VM (instance %" PRId64 ") is gone: the guest loses it", b->fdid,
              b->mdev);
        b->mdev = -1;
        struct json_object *p = json_object_new_object();
        ntbf__jput_u(p, "fdid", b->fdid);
        ntbf__peer_request(d, b->lender, "kunexport", p, ignored, (void *)(uintptr_t)b->fdid);
}

/* ---- operators: mdev.list, mdev.create, mdev.remove --------------------------------------- */

static const char *sysfs_root(void)
{
        const char *p = getenv("NTBFAB_SYSFS");
        return p && *p ? p : "/sys";
}

static void uuid_text(const uint8_t u[16], char out[37])
{
        static const int dash[] = {4, 6, 8, 10};
        char *o = out;
        for (int i = 0, k = 0; i < 16; i++) {
                if (k < 4 && i == dash[k])
                        *o++ = '-', k++;
                o += sprintf(o, "%02x", u[i]);
        }
        *o = '\0';
}

static bool uuid_ok(const char *s)
{
        if (strlen(s) != 36)
                return false;
        for (int i = 0; i < 36; i++) {
                bool dash = i == 8 || i == 13 || i == 18 || i == 23;
                if (dash ? s[i] != '-' : !strchr("0123456789abcdef", s[i]))
                        return false;
        }
        return true;
}

static int write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");
        if (!f)
                return -errno;
        int r = fputs(text, f) < 0 ? -errno : 0;
        if (fclose(f) && !r)
                r = -errno;
        return r;
}

int ntbf__kmdev_list(struct ntbf__d *d, struct json_object **out, char *why, size_t whylen)
{
        int r = ntbf__kmdev_pool(d, why, whylen);
        if (r)
                return r;
        struct ntbfab_lend_mdev_entry e[64];
        struct ntbfab_lend_mdev_list l = {.count = 64, .entries = (uint64_t)(uintptr_t)e};
        if (ioctl(ntbf__kern_fd(d), NTBFAB_LEND_IOC_MDEV_LIST, &l)) {
                snprintf(why, whylen, "the kernel refused the list: %s", strerror(errno));
                return -errno;
        }
        *out = json_object_new_array();
        for (uint32_t i = 0; i < l.count && i < 64; i++) {
                struct json_object *o = json_object_new_object();
                char u[37], path[96];
                uuid_text(e[i].uuid, u);
                snprintf(path, sizeof(path), "/sys/bus/mdev/devices/%s", u);
                ntbf__jput_s(o, "uuid", u);
                ntbf__jput_u(o, "instance", e[i].instance);
                ntbf__jput_u(o, "fdid", e[i].fdid);
                ntbf__jput_s(o, "state", e[i].state < 5 ? state_names[e[i].state] : "?");
                ntbf__jput_s(o, "sysfsdev", path);
                json_object_array_add(*out, o);
        }
        return 0;
}

int ntbf__kmdev_create(struct ntbf__d *d, uint32_t fdid, const char *uuid, struct json_object **out,
                       char *why, size_t whylen)
{
        char u[40] = "", dir[160], path[512];
        int r = ntbf__kmdev_pool(d, why, whylen);
        if (r)
                return r;
        if (uuid && !uuid_ok(uuid)) {
                snprintf(why, whylen, "'%s' is not a UUID in lower case (like %s)", uuid,
                         "0b6a1c52-3c2e-4d36-9b1e-5f4a2c9d8e71");
                return -EINVAL;
        }
        if (uuid) {
                snprintf(u, sizeof(u), "%s", uuid);
        } else {
                FILE *f = fopen("/proc/sys/kernel/random/uuid", "r");
                if (!f || !fgets(u, sizeof(u), f)) {
                        if (f)
                                fclose(f);
                        snprintf(why, whylen, "cannot make a UUID: give one (--uuid)");
                        return -EIO;
                }
                fclose(f);
                u[strcspn(u, "\n")] = '\0';
        }
        snprintf(dir, sizeof(dir), "%s/class/mdev_bus/ntbfab-%s/mdev_supported_types", sysfs_root(),
                 d->t->nodes[d->self].name);
        DIR *dd = opendir(dir);
        char suffix[8];
        snprintf(suffix, sizeof(suffix), "-%04x", fdid);
        struct dirent *de;
        bool found = false;
        while (dd && (de = readdir(dd))) {
                size_t n = strlen(de->d_name);
                if (n > 5 && !strcmp(de->d_name + n - 5, suffix)) {
                        snprintf(path, sizeof(path), "%s/%s/create", dir, de->d_name);
                        found = true;
                        break;
                }
        }
        if (dd)
                closedir(dd);
        if (!found) {
                snprintf(why, whylen,
                         "0x%04x is not in the pool of '%s' (the devices of the other nodes; "
                         "see 'ntbfab devices')",
                         fdid, d->t->nodes[d->self].name);
                return NTBF_ENOTFOUND;
        }
        r = write_file(path, u);
        if (r) {
                snprintf(why, whylen, "the kernel did not create instance %s of 0x%04x: %s", u,
                         fdid, strerror(-r));
                return r;
        }
        LOG_I("created mdev instance %s of 0x%04x (nothing is borrowed until its guest enables "
              "the device)",
              u, fdid);
        *out = json_object_new_object();
        ntbf__jput_s(*out, "uuid", u);
        ntbf__jput_u(*out, "fdid", fdid);
        snprintf(path, sizeof(path), "/sys/bus/mdev/devices/%s", u);
        ntbf__jput_s(*out, "sysfsdev", path);
        return 0;
}

int ntbf__kmdev_remove(struct ntbf__d *d, const char *uuid, char *why, size_t whylen)
{
        char path[256];
        struct json_object *l = NULL;
        int r = ntbf__kmdev_list(d, &l, why, whylen);
        if (r)
                return r;
        bool mine = false;
        for (size_t i = 0; i < json_object_array_length(l); i++) {
                const char *u = "";
                ntbf__jget_s(json_object_array_get_idx(l, i), "uuid", &u);
                mine |= !strcmp(u, uuid);
        }
        json_object_put(l);
        if (!mine) {
                snprintf(why, whylen, "no mdev instance %s of '%s' (ntbfab mdev list)", uuid,
                         d->t->nodes[d->self].name);
                return NTBF_ENOTFOUND;
        }
        snprintf(path, sizeof(path), "%s/bus/mdev/devices/%s/remove", sysfs_root(), uuid);
        r = write_file(path, "1");
        if (r) {
                snprintf(why, whylen, "the kernel did not remove %s: %s%s", uuid, strerror(-r),
                         r == -EBUSY ? " (a VM has it open: stop the VM first)" : "");
                return r;
        }
        LOG_I("removed mdev instance %s", uuid);
        return 0;
}
