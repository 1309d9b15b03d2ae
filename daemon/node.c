/* daemon/node.c: the node role: lends, borrows, programming for the manager, reconciling, events.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "vfio.h"
#include "log.h"
#include "ntbfab/error.h"
#include "ntbfab/units.h"

static const char *node_name(struct ntbf__d *d, uint32_t n)
{
        return d->t->nodes[n].name;
}

/* ---- events to local clients ----------------------------------------------------------------- */

void ntbf__node_event(struct ntbf__d *d, const char *kind, uint32_t fdid, const char *reason,
                      struct json_object *extra)
{
        struct json_object *ev = json_object_new_object();
        ntbf__jput_s(ev, "kind", kind);
        if (fdid != NTBF_NONE)
                ntbf__jput_u(ev, "fdid", fdid);
        if (reason)
                ntbf__jput_s(ev, "reason", reason);
        if (extra) {
                json_object_object_foreach(extra, k, v)
                    json_object_object_add(ev, k, json_object_get(v));
                json_object_put(extra);
        }
        for (struct ntbf__rpc_conn *c = d->rpc.conns; c; c = c->next) {
                bool holds = false;
                for (struct ntbf__handle *h = d->handles; h && fdid != NTBF_NONE; h = h->next)
                        holds |= h->conn == c && h->fdid == fdid;
                if (c->subscribed || (holds && !strcmp(kind, "device.lost")))
                        ntbf__rpc_notify(c, json_object_get(ev));
        }
        json_object_put(ev);
}

/* ---- lends and borrows ---------------------------------------------------------------------- */

struct ntbf__lend *ntbf__node_lend(struct ntbf__d *d, uint32_t fdid)
{
        for (struct ntbf__lend *l = d->lends; l; l = l->next)
                if (l->fdid == fdid)
                        return l;
        return NULL;
}

struct ntbf__borrow *ntbf__node_borrow(struct ntbf__d *d, uint32_t fdid)
{
        for (struct ntbf__borrow *b = d->borrows; b; b = b->next)
                if (b->fdid == fdid)
                        return b;
        return NULL;
}

void ntbf__node_save_lend(struct ntbf__d *d, const struct ntbf__lend *l)
{
        char key[16];
        snprintf(key, sizeof(key), "%u", l->fdid);
        struct json_object *o = json_object_new_object();
        ntbf__jput_b(o, "available", l->available);
        if (ntbf__store_put(d->st, NTBF_T_LENDS, key, ntbf__json_text(o)))
                LOG_E("cannot record lend 0x%04x: %s", l->fdid, ntbf__store_error(d->st));
        json_object_put(o);
}

static struct ntbf__lend *add_lend(struct ntbf__d *d, uint32_t fdid, bool available)
{
        struct ntbf__lend *l = ntbf__node_lend(d, fdid);
        if (!l) {
                l = calloc(1, sizeof(*l));
                if (!l)
                        return NULL;
                l->fdid = fdid;
                l->next = d->lends;
                d->lends = l;
        }
        l->available = available;
        return l;
}

void ntbf__node_save_borrow(struct ntbf__d *d, const struct ntbf__borrow *b)
{
        char key[16];
        snprintf(key, sizeof(key), "%u", b->fdid);
        if (ntbf__store_put(d->st, NTBF_T_BORROWS, key, ntbf__json_text(b->json)))
                LOG_E("cannot record borrow 0x%04x: %s", b->fdid, ntbf__store_error(d->st));
}

/*
 * A borrow as the manager answered it: the shadow device gets a local BDF on the shadow bus,
 * the lowest free device number (kept across restarts: it is in the stored json).
 */
struct ntbf__borrow *ntbf__node_add_borrow(struct ntbf__d *d, struct json_object *bj)
{
        uint64_t fdid;
        uint32_t dev, fn;
        if (!ntbf__jget_u(bj, "fdid", &fdid) || ntbf__fdid_resolve(d->t, (uint32_t)fdid, &dev, &fn))
                return NULL;
        struct ntbf__borrow *b = ntbf__node_borrow(d, (uint32_t)fdid);
        const char *old_bdf = NULL;
        if (b) {
                ntbf__jget_s(b->json, "local_bdf", &old_bdf);
        } else {
                b = calloc(1, sizeof(*b));
                if (!b)
                        return NULL;
                b->fdid = (uint32_t)fdid;
                b->device = dev;
                b->function = fn;
                b->lender = d->t->devices[dev].node;
                b->slot = UINT32_MAX;
                b->shadow = -1;
                b->mdev = -1;
                b->next = d->borrows;
                d->borrows = b;
        }
        const char *given = NULL;
        uint16_t dom;
        uint8_t bus, dv, f;
        const char *bdf =
            old_bdf ? old_bdf : (ntbf__jget_s(bj, "local_bdf", &given) ? given : NULL);
        if (b->slot == UINT32_MAX && bdf && !ntbf_bdf_parse(bdf, &dom, &bus, &dv, &f) &&
            bus >= NTBF_SHADOW_BUS)
                b->slot = (uint32_t)(bus - NTBF_SHADOW_BUS) * 32 + dv;
        if (b->slot == UINT32_MAX) {
                for (uint32_t s = 0; b->slot == UINT32_MAX; s++) {
                        bool used = false;
                        for (struct ntbf__borrow *o = d->borrows; o; o = o->next)
                                used |= o != b && o->slot == s;
                        if (!used)
                                b->slot = s;
                }
        }
        char local[32];
        ntbf_bdf_fmt(0, (uint8_t)(NTBF_SHADOW_BUS + b->slot / 32), (uint8_t)(b->slot % 32), 0,
                     local, sizeof(local));
        struct json_object *copy = json_object_get(bj), *att;
        json_object_object_add(copy, "local_bdf", json_object_new_string(local));
        /* The manager does not know what this kernel holds (a shadow device, a VM's mdev
         * instance): keep it. */
        static const char *const held[] = {"attached", "mdev"};
        for (size_t i = 0; i < 2; i++)
                if (b->json && copy != b->json && json_object_object_get_ex(b->json, held[i], &att))
                        json_object_object_add(copy, held[i], json_object_get(att));
        json_object_put(b->json);
        b->json = copy;
        ntbf__jget_b(bj, "sisci", &b->sisci);
        struct json_object *msi;
        if (json_object_object_get_ex(bj, "msi", &msi)) {
                ntbf__jget_u(msi, "device_addr", &b->icpt.dev_addr);
                ntbf__jget_u(msi, "host_addr", &b->icpt.host_addr);
                ntbf__jget_u(msi, "size", &b->icpt.size);
        }
        ntbf__node_save_borrow(d, b);
        return b;
}

void ntbf__node_borrow_for_sisci(struct ntbf__d *d, struct ntbf__borrow *b)
{
        b->sisci = true;
        json_object_object_add(b->json, "sisci", json_object_new_boolean(true));
        ntbf__node_save_borrow(d, b);
}

static void unheld_returned(void *arg, int err, const char *msg, struct json_object *res)
{
        (void)arg;
        json_object_put(res);
        if (err && err != NTBF_ENOTFOUND)
                LOG_W("returning a borrow nobody holds: %s", msg ? msg : ntbf_strerror(err));
}

void ntbf__node_return_unheld(struct ntbf__d *d, uint32_t fdid, const char *why)
{
        LOG_W("borrow of 0x%04x: %s; returning it", fdid, why);
        struct json_object *p = json_object_new_object();
        ntbf__jput_u(p, "fdid", fdid);
        ntbf__peer_request(d, d->manager, "return", p, unheld_returned, d);
}

void ntbf__node_drop_borrow(struct ntbf__d *d, uint32_t fdid, const char *reason)
{
        for (struct ntbf__borrow **pp = &d->borrows; *pp; pp = &(*pp)->next) {
                struct ntbf__borrow *b = *pp;
                if (b->fdid != fdid)
                        continue;
                /* Still in this kernel: the device is gone under its driver. */
                ntbf__kern_detach(d, b, true);
                *pp = b->next;
                char key[16];
                snprintf(key, sizeof(key), "%u", fdid);
                ntbf__store_del(d->st, NTBF_T_BORROWS, key);
                for (struct ntbf__handle *h = d->handles; h; h = h->next)
                        if (h->fdid == fdid && !h->local) {
                                h->lost = true;
                                h->share = -1;
                        }
                if (reason)
                        ntbf__node_event(d, "device.lost", fdid, reason, NULL);
                json_object_put(b->json);
                free(b);
                return;
        }
}

/* ---- programming for the manager ------------------------------------------------------------ */

/*
 * Where a test makes the daemon die (docs/daemon.md, "Crash consistency"): with
 * NTBFAB_CRASH_AT=NODE:PHASE:K in its environment, the daemon of NODE calls _exit at the K-th
 * crash point of PHASE ("program", "unprogram" or "sync"): after the records of a request are
 * committed, after each entry is programmed or cleared, after the records are updated;
 * "attach": after a borrow for this kernel is recorded, before the kernel is given it.
 */
void ntbf__crash_point(struct ntbf__d *d, const char *phase)
{
        static int armed = -1;
        static char want[16];
        static long k, seen;
        if (armed < 0) {
                const char *e = getenv("NTBFAB_CRASH_AT");
                char node[64];
                armed = e && sscanf(e, "%63[^:]:%15[^:]:%ld", node, want, &k) == 3 &&
                        !strcmp(node, node_name(d, d->self)) && k > 0;
        }
        if (!armed || strcmp(phase, want) || ++seen != k)
                return;
        LOG_W("NTBFAB_CRASH_AT: dying at step %ld of %s", k, phase);
        _exit(86);
}

/*
 * What this node has programmed: the set in memory and the table in the store. Changes are
 * collected (record) and folded into the sorted set once per request (record_flush): a
 * borrow programs tens of slots, and sorting after each would cost more than programming.
 */
static void record(struct ntbf__d *d, const char *key, bool present)
{
        if (present) {
                ntbf__entset_add(&d->rec_add, key);
                ntbf__store_put(d->st, NTBF_T_PROGRAMMED, key, "{}");
        } else {
                ntbf__entset_add(&d->rec_del, key);
                ntbf__store_del(d->st, NTBF_T_PROGRAMMED, key);
        }
}

static void record_flush(struct ntbf__d *d)
{
        if (d->rec_del.n) {
                struct ntbf__entset rest = {0};
                ntbf__entset_sort(&d->rec_del);
                ntbf__entset_diff(&d->programmed, &d->rec_del, &rest);
                ntbf__entset_free(&d->programmed);
                d->programmed = rest;
                ntbf__entset_free(&d->rec_del);
        }
        if (d->rec_add.n) {
                for (size_t i = 0; i < d->rec_add.n; i++) {
                        ntbf__entset_add(&d->programmed, d->rec_add.v[i]);
                }
                ntbf__entset_sort(&d->programmed);
                ntbf__entset_free(&d->rec_add);
        }
}

/* Record (or forget) the entries whose keys are marked in pick, in one transaction; -EIO if
 * the database did not take it (nothing is then recorded). */
static int record_many(struct ntbf__d *d, const ntbf__entkey *key, size_t n, const bool *pick,
                       bool present, char *why, size_t whylen)
{
        bool any = false;
        for (size_t i = 0; i < n; i++)
                any |= pick[i];
        if (!any)
                return 0;
        int r = ntbf__store_begin(d->st);
        for (size_t i = 0; i < n && !r; i++)
                if (pick[i])
                        r = present ? ntbf__store_put(d->st, NTBF_T_PROGRAMMED, key[i], "{}")
                                    : ntbf__store_del(d->st, NTBF_T_PROGRAMMED, key[i]);
        if (!r)
                r = ntbf__store_commit(d->st);
        if (r) {
                ntbf__store_rollback(d->st);
                snprintf(why, whylen, "%s: cannot record what it programs in its database: %s",
                         node_name(d, d->self), ntbf__store_error(d->st));
                LOG_E("%s", why);
                return -EIO;
        }
        for (size_t i = 0; i < n; i++)
                if (pick[i])
                        ntbf__entset_add(present ? &d->rec_add : &d->rec_del, key[i]);
        record_flush(d);
        return 0;
}

/* Parse a list of entry keys, all programmed by this node; -EINVAL names the bad one. */
static int parse_entries(struct ntbf__d *d, struct json_object *list, struct ntbf__ent **out,
                         size_t *n, char *why, size_t whylen)
{
        if (!list || !json_object_is_type(list, json_type_array)) {
                snprintf(why, whylen, "no entries");
                return -EINVAL;
        }
        size_t k = json_object_array_length(list);
        struct ntbf__ent *v = calloc(k + 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < k; i++) {
                struct json_object *s = json_object_array_get_idx(list, i);
                if (!json_object_is_type(s, json_type_string) ||
                    ntbf__ent_parse(d->t, json_object_get_string(s), &v[i]) ||
                    v[i].prog != d->self) {
                        snprintf(why, whylen, "entry %zu is not one this node programs", i);
                        free(v);
                        return -EINVAL;
                }
        }
        *out = v;
        *n = k;
        return 0;
}

/* Clear the entries of v marked in pick from the hardware, in reverse kind order; those
 * cleared get done[i]. The first failure goes to why (later ones to the log). */
static int clear_marked(struct ntbf__d *d, const struct ntbf__ent *v, size_t n, const bool *pick,
                        bool *done, const char *phase, char *why, size_t whylen)
{
        char w[512];
        int first = 0;
        for (int k = NTBF_ENT_KINDS - 1; k >= 0; k--)
                for (size_t i = 0; i < n; i++) {
                        if ((int)v[i].kind != k || !pick[i])
                                continue;
                        int r = ntbf__hw_apply(d, &v[i], false, w, sizeof(w));
                        ntbf__crash_point(d, phase);
                        if (r) {
                                LOG_E("%s", w);
                                if (!first) {
                                        first = r;
                                        snprintf(why, whylen, "%s: %s", node_name(d, d->self), w);
                                }
                                continue;
                        }
                        done[i] = true;
                }
        return first;
}

/*
 * Apply entries (set: in kind order; clear: reverse). The records always name at least what
 * the hardware holds, whenever the daemon dies: an entry is recorded (committed) before it is
 * programmed, and forgotten only after it is cleared. A restarted daemon clears what its
 * records name and the manager no longer wants, so nothing stays programmed that no table
 * names. On a failed set, what this request newly programmed is cleared again and forgotten:
 * nothing half-applied.
 */
static int apply_list(struct ntbf__d *d, struct ntbf__ent *v, size_t n, bool set, const char *phase,
                      char *why, size_t whylen)
{
        char w[512];
        int first = 0;
        bool *fresh = calloc(n + 1, 1), *done = calloc(n + 1, 1);
        /* Each entry's key, formatted once: the records, the set and the check use it. */
        ntbf__entkey *key = calloc(n + 1, sizeof(*key));
        if (!fresh || !done || !key) {
                free(fresh);
                free(done);
                free(key);
                snprintf(why, whylen, "out of memory");
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                ntbf__ent_key(&v[i], key[i], sizeof(key[i]));
        record_flush(d);
        if (!set) {
                for (size_t i = 0; i < n; i++)
                        fresh[i] = true;
                first = clear_marked(d, v, n, fresh, done, phase, why, whylen);
                int r = record_many(d, key, n, done, false, w, sizeof(w));
                ntbf__crash_point(d, phase);
                if (r && !first) {
                        first = r;
                        snprintf(why, whylen, "%s", w);
                }
                goto out;
        }
        /* Intent first: what this request adds is in the records before the hardware. */
        for (size_t i = 0; i < n; i++)
                fresh[i] = !ntbf__entset_has(&d->programmed, key[i]);
        if ((first = record_many(d, key, n, fresh, true, why, whylen)))
                goto out;
        ntbf__crash_point(d, phase);
        size_t failed = n;
        for (int k = 0; k < NTBF_ENT_KINDS && failed == n; k++)
                for (size_t i = 0; i < n && failed == n; i++) {
                        if ((int)v[i].kind != k)
                                continue;
                        int r = ntbf__hw_apply(d, &v[i], true, w, sizeof(w));
                        ntbf__crash_point(d, phase);
                        if (r) {
                                LOG_E("%s", w);
                                first = r;
                                failed = i;
                                snprintf(why, whylen, "%s: %s", node_name(d, d->self), w);
                        }
                        done[i] = true;
                }
        if (first) {
                /* Nothing half-applied on this node either: clear what this request added (the
                 * entry that failed too: it may be partly in), then forget it. */
                bool *undo = calloc(n + 1, 1), *cleared = calloc(n + 1, 1);
                if (undo && cleared) {
                        for (size_t i = 0; i < n; i++)
                                undo[i] = fresh[i] && done[i];
                        clear_marked(d, v, n, undo, cleared, phase, w, sizeof(w));
                        for (size_t i = 0; i < n; i++)
                                undo[i] = fresh[i] && (!done[i] || cleared[i]);
                        record_many(d, key, n, undo, false, w, sizeof(w));
                        ntbf__crash_point(d, phase);
                }
                free(undo);
                free(cleared);
        }
out:
        free(fresh);
        free(done);
        free(key);
        return first;
}

static void do_program(struct ntbf__d *d, struct json_object *p, bool set, ntbf__done_fn cb,
                       void *arg)
{
        struct json_object *list = NULL;
        struct ntbf__ent *v;
        size_t n;
        char why[600];
        if (p)
                json_object_object_get_ex(p, "entries", &list);
        int r = parse_entries(d, list, &v, &n, why, sizeof(why));
        if (!r) {
                r = apply_list(d, v, n, set, set ? "program" : "unprogram", why, sizeof(why));
                free(v);
        }
        /* A malformed request is refused whichever way it goes; so is a clear that failed
         * (the manager logs it; the node's records keep the entry until it is cleared). */
        if (r)
                return cb(arg, r, why, NULL);
        cb(arg, 0, NULL, json_object_new_object());
}

/* ---- the lender's side of config space --------------------------------------------------------
 */

/*
 * The one path to a local device's config space: VFIO for a device of this host driven
 * through vfio-pci (`vfio: true`), else the backend's cfg_read/cfg_write (the simulated
 * device models; sysfs on the dolphin and linux-ntb backends). NTBF_EUNSUPPORTED when
 * neither reaches the device.
 */
int ntbf__node_cfg(struct ntbf__d *d, uint32_t device, uint32_t function, bool write, uint32_t off,
                   uint32_t size, uint32_t *val)
{
        if (!ntbf__icpt_valid(off, size))
                return -EINVAL;
        if (ntbf__vfiod_is(d, device))
                return ntbf__vfiod_cfg(d, device, function, write, off, size, val);
        if (!d->ops->cfg_read)
                return NTBF_EUNSUPPORTED;
        int r = write ? d->ops->cfg_write(d->b, device, function, off, size, *val)
                      : d->ops->cfg_read(d->b, device, function, off, size, val);
        return r == -ENODEV ? NTBF_EUNSUPPORTED : r;
}

/* The MSI capability (its offset, 0 if none) and whether it takes 64-bit addresses. */
static void node_msi_cap(struct ntbf__d *d, uint32_t dev, uint32_t fn, uint32_t *cap, bool *msi64)
{
        *cap = 0;
        *msi64 = false;
        uint32_t sts = 0, ptr = 0, id = 0, flags = 0;
        if (ntbf__node_cfg(d, dev, fn, false, 0x06, 2, &sts) || !(sts & 0x10) ||
            ntbf__node_cfg(d, dev, fn, false, 0x34, 1, &ptr))
                return;
        /* At most 48 capabilities fit in 256 bytes: more is a loop. */
        for (unsigned n = 0; n < 48 && ptr >= 0x40 && ptr < 0x100; n++) {
                ptr &= 0xfc;
                if (ntbf__node_cfg(d, dev, fn, false, ptr, 1, &id))
                        return;
                if (id == 0x05) {
                        *cap = ptr;
                        if (!ntbf__node_cfg(d, dev, fn, false, ptr + 2, 2, &flags))
                                *msi64 = flags & 0x80;
                        return;
                }
                if (ntbf__node_cfg(d, dev, fn, false, ptr + 1, 1, &ptr))
                        return;
        }
}

static void do_cfg(struct ntbf__d *d, uint32_t from, struct json_object *p, ntbf__done_fn cb,
                   void *arg)
{
        uint64_t fdid, off = 0, size = 4, value = 0;
        const char *op = "r";
        uint32_t dev, fn;
        if (!ntbf__jget_u(p, "fdid", &fdid) || !ntbf__jget_s(p, "op", &op) ||
            ntbf__fdid_resolve(d->t, (uint32_t)fdid, &dev, &fn) ||
            d->t->devices[dev].node != d->self)
                return cb(arg, NTBF_ENOTFOUND, "no such device of this node", NULL);
        struct ntbf__lend *l = ntbf__node_lend(d, (uint32_t)fdid);
        /* A lent device's config space may be read whole by any node of the fabric: a VM's
         * instance shows it before anything is borrowed (kmdev.c); all else needs a borrow. */
        bool describe = !strcmp(op, "dump") && l;
        if (from != d->self && !describe && (!l || !(l->borrowers >> from & 1)))
                return cb(arg, -EPERM, "the device is not borrowed by the asking node", NULL);
        uint32_t probe;
        if (ntbf__node_cfg(d, dev, fn, false, 0, 2, &probe) == NTBF_EUNSUPPORTED) {
                /* Which config spaces the backend reaches is its own (the simulated fabric's
                 * device models, sysfs for the dolphin and linux-ntb backends): say which. */
                char why[256];
                snprintf(why, sizeof(why),
                         "no config-space access to this device: it is not a VFIO device of "
                         "this host and the %s backend reaches no config space of it",
                         d->ops->name);
                return cb(arg, NTBF_EUNSUPPORTED, why, NULL);
        }
        struct json_object *o = json_object_new_object();
        if (!strcmp(op, "info")) {
                uint32_t cap = 0;
                bool msi64 = false;
                node_msi_cap(d, dev, fn, &cap, &msi64);
                ntbf__jput_u(o, "msi", cap);
                ntbf__jput_b(o, "msi64", msi64);
                return cb(arg, 0, NULL, o);
        }
        if (!strcmp(op, "dump")) {
                /* The whole config space, for a shadow device's copy (kern.c). */
                char hex[2 * 4096 + 1];
                uint32_t n = 0, dw;
                for (; n < 4096 && !ntbf__node_cfg(d, dev, fn, false, n, 4, &dw); n += 4)
                        for (int i = 0; i < 4; i++)
                                snprintf(hex + 2 * (n + (uint32_t)i), 3, "%02x",
                                         dw >> 8 * i & 0xff);
                if (n < 256) {
                        json_object_put(o);
                        return cb(arg, -EIO, "cannot read the device's config space", NULL);
                }
                hex[2 * (n < 4096 ? 256 : 4096)] = '\0';
                ntbf__jput_s(o, "hex", hex);
                /* The BARs' sizes: what VFIO says of a real device, else the model's. */
                uint64_t sizes[6] = {0};
                struct json_object *bs = json_object_new_array();
                if (!ntbf__vfiod_bar_sizes(d, dev, fn, sizes) && fn < d->t->devices[dev].functions)
                        for (unsigned b = 0; b < 6; b++)
                                sizes[b] = d->t->devices[dev].bars[b].size;
                for (unsigned b = 0; b < 6; b++)
                        json_object_array_add(bs, json_object_new_uint64(sizes[b]));
                json_object_object_add(o, "bar_sizes", bs);
                return cb(arg, 0, NULL, o);
        }
        ntbf__jget_u(p, "off", &off);
        ntbf__jget_u(p, "size", &size);
        ntbf__jget_u(p, "value", &value);
        uint32_t v = (uint32_t)value;
        int r = off > 4096 || size > 4 ? -EINVAL
                                       : ntbf__node_cfg(d, dev, fn, !strcmp(op, "w"), (uint32_t)off,
                                                        (uint32_t)size, &v);
        if (r) {
                json_object_put(o);
                return cb(arg, r,
                          "config access refused: offset and size must be aligned 1, 2 "
                          "or 4 bytes below 4096",
                          NULL);
        }
        ntbf__jput_u(o, "value", v);
        /* After a write, the whole dword as the device now has it (kern.c keeps a copy). */
        uint32_t dw;
        if (!strcmp(op, "w") && !ntbf__node_cfg(d, dev, fn, false, (uint32_t)off & ~3u, 4, &dw))
                ntbf__jput_u(o, "dword", dw);
        cb(arg, 0, NULL, o);
}

/* Legacy INTx cannot cross an NTB: a lent device keeps Interrupt Disable set (article 4.2). */
static void mask_intx(struct ntbf__d *d, uint32_t fdid)
{
        uint32_t dev, fn, v;
        if (ntbf__fdid_resolve(d->t, fdid, &dev, &fn) ||
            ntbf__node_cfg(d, dev, fn, false, 0x04, 2, &v))
                return;
        v |= 0x0400;
        ntbf__node_cfg(d, dev, fn, true, 0x04, 2, &v);
}

/* An operator's call from another node's socket (cluster.call): run as if asked here. */
static void do_rpc(struct ntbf__d *d, struct json_object *p, ntbf__done_fn cb, void *arg)
{
        const char *method = NULL;
        struct json_object *params = NULL;
        if (!ntbf__jget_s(p, "method", &method) || !ntbf__forwardable(method) ||
            !json_object_object_get_ex(p, "params", &params) ||
            !json_object_is_type(params, json_type_object))
                return cb(arg, -EINVAL, "not a method another node may call here", NULL);
        ntbf__rpc_invoke(&d->rpc, method, params, cb, arg);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

static bool fm_method(const char *m)
{
        static const char *const v[] = {"register", "sync",   "lend", "avail", "list",  "status",
                                        "borrow",   "return", "map",  "unmap", "unlend"};
        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
                if (!strcmp(m, v[i]))
                        return true;
        return false;
}

void ntbf__d_request(struct ntbf__d *d, uint32_t from, const char *m, struct json_object *p,
                     ntbf__done_fn cb, void *arg)
{
        if (fm_method(m) || ntbf__sx_fm_method(m)) {
                if (!d->fm)
                        return cb(arg, -EINVAL, "this node is not the fabric manager", NULL);
                return ntbf__fm_request(d->fm, from, m, p, cb, arg);
        }
        if (from != d->manager && from != d->self &&
            (!strcmp(m, "program") || !strcmp(m, "unprogram")))
                return cb(arg, -EPERM, "only the fabric manager programs this node", NULL);
        if (!strcmp(m, "program"))
                return do_program(d, p, true, cb, arg);
        if (!strcmp(m, "unprogram"))
                return do_program(d, p, false, cb, arg);
        if (!strcmp(m, "cfg"))
                return do_cfg(d, from, p, cb, arg);
        if (!strcmp(m, "kexport"))
                return ntbf__kern_export(d, from, p, cb, arg);
        if (!strcmp(m, "kunexport"))
                return ntbf__kern_unexport(d, from, p, cb, arg);
        if (!strcmp(m, "rpc"))
                return do_rpc(d, p, cb, arg);
        if (from == d->manager && ntbf__sx_request(d, m, p, cb, arg))
                return;
        cb(arg, -ENOSYS, "unknown peer request", NULL);
}

static void lend_borrowers(struct ntbf__d *d, uint32_t fdid, const char *who, bool add)
{
        struct ntbf__lend *l = ntbf__node_lend(d, fdid);
        uint32_t n = who ? ntbf_topo_find_node(d->t, who) : NTBF_NONE;
        if (!l || n == NTBF_NONE || n >= 32)
                return;
        if (add)
                l->borrowers |= 1u << n;
        else
                l->borrowers &= ~(1u << n);
}

void ntbf__d_note(struct ntbf__d *d, uint32_t from, const char *m, struct json_object *p)
{
        uint64_t fdid = NTBF_NONE;
        const char *reason = NULL, *kind = NULL, *who = NULL;
        ntbf__jget_u(p, "fdid", &fdid);
        ntbf__jget_s(p, "reason", &reason);
        if (from != d->manager && from != d->self)
                return; /* events come from the manager only */
        if (ntbf__sx_note(d, m, p))
                return;
        if (!strcmp(m, "lost")) {
                ntbf__sx_device_lost(d, (uint32_t)fdid);
                LOG_W("borrowed device 0x%04x lost: %s", (uint32_t)fdid, reason ? reason : "?");
                ntbf__node_drop_borrow(d, (uint32_t)fdid, reason ? reason : "lost");
                return;
        }
        if (!strcmp(m, "event") && ntbf__jget_s(p, "kind", &kind)) {
                ntbf__jget_s(p, "borrower", &who);
                if (!strcmp(kind, "device.borrowed")) {
                        lend_borrowers(d, (uint32_t)fdid, who, true);
                        mask_intx(d, (uint32_t)fdid);
                } else if (!strcmp(kind, "device.returned")) {
                        lend_borrowers(d, (uint32_t)fdid, who, false);
                }
                struct json_object *x = json_object_new_object();
                if (who)
                        ntbf__jput_s(x, "borrower", who);
                ntbf__node_event(d, kind, (uint32_t)fdid, reason, x);
        }
}

/* ---- joining the manager ------------------------------------------------------------------- */

/*
 * The hardware read back: a slot of this node's own window (an adapter its owner programs)
 * that holds a translation while no entry of the manager's set v uses it is cleared. The
 * records already cover what this daemon programmed (apply_list); this also covers what they
 * cannot: a database moved away, or a slot left by another program.
 */
static void clear_unknown_slots(struct ntbf__d *d, const struct ntbf__ent *v, size_t n)
{
        const struct ntbf_node *me = &d->t->nodes[d->self];
        for (uint32_t i = 0; i < me->nadapters; i++) {
                uint32_t a = me->adapters[i];
                const struct ntbf_adapter *ad = &d->t->adapters[a];
                if (!d->h[a] || !d->ops->xlat_get || !d->ops->xlat_clear ||
                    !(ad->p.xlat & NTBF_XLAT_OUTBOUND))
                        continue;
                for (uint32_t slot = 0; slot < ad->nslots; slot++) {
                        struct ntbf_xlat x;
                        bool valid = false, kept = false;
                        for (uint32_t w = 0; w < ad->nwin; w++)
                                kept |= slot - ad->win[w].first_slot < ad->win[w].reserved;
                        if (kept || d->ops->xlat_get(d->h[a], slot, &x, &valid) || !valid)
                                continue; /* the hardware's own slots are not ours to clear */
                        bool wanted = false;
                        for (size_t k = 0; k < n && !wanted; k++)
                                wanted = v[k].kind == NTBF_ENT_SLOT && v[k].obj == a &&
                                         v[k].slot == slot;
                        if (wanted)
                                continue;
                        int r = d->ops->xlat_clear(d->h[a], slot);
                        LOG_W("slot %u of %s.%s held a translation (to 0x%" PRIx64
                              ") that no record names: %s",
                              slot, me->name, ad->name, x.addr, r ? ntbf_strerror(r) : "cleared");
                }
        }
}

/* A borrow made for this kernel (a shadow device, a VM's instance) that neither holds. */
static bool kernel_orphan(struct ntbf__borrow *b)
{
        const char *fe = "";
        return ntbf__jget_s(b->json, "frontend", &fe) && !strcmp(fe, "kernel") &&
               !json_object_object_get_ex(b->json, "attached", NULL) &&
               !json_object_object_get_ex(b->json, "mdev", NULL);
}

static void synced(void *arg, int err, const char *msg, struct json_object *res)
{
        struct ntbf__d *d = arg;
        d->syncing = false;
        if (err) {
                LOG_W("cannot sync with the fabric manager: %s", msg);
                json_object_put(res);
                return;
        }
        struct json_object *list = NULL, *borrows = NULL, *lent = NULL;
        json_object_object_get_ex(res, "entries", &list);
        json_object_object_get_ex(res, "borrows", &borrows);
        json_object_object_get_ex(res, "lent_out", &lent);
        struct ntbf__ent *v = NULL;
        size_t n = 0;
        char why[600];
        if (parse_entries(d, list, &v, &n, why, sizeof(why))) {
                LOG_E("the fabric manager's entries for this node are unusable: %s", why);
                json_object_put(res);
                return;
        }
        /* Make the hardware equal to the manager's record: clear what it no longer has (a
         * borrow reclaimed while this daemon was down), program all it has (idempotent). */
        struct ntbf__entset want = {0}, extra = {0};
        char key[NTBF_ENT_KEY_MAX + 1];
        for (size_t i = 0; i < n; i++)
                ntbf__entset_add(&want, ntbf__ent_key(&v[i], key, sizeof(key)));
        ntbf__entset_sort(&want);
        clear_unknown_slots(d, v, n);
        ntbf__entset_diff(&d->programmed, &want, &extra);
        struct ntbf__ent *x = calloc(extra.n + 1, sizeof(*x));
        size_t nx = 0;
        for (size_t i = 0; x && i < extra.n; i++)
                if (!ntbf__ent_parse(d->t, extra.v[i], &x[nx]))
                        nx++;
                else
                        record(d, extra.v[i], false);
        record_flush(d);
        if (nx)
                apply_list(d, x, nx, false, "sync", why, sizeof(why));
        int r = apply_list(d, v, n, true, "sync", why, sizeof(why));
        free(x);
        free(v);
        ntbf__entset_free(&want);
        ntbf__entset_free(&extra);
        if (r)
                LOG_E("reconciling: %s", why);
        /* Borrows: the manager's list is the truth for what exists; this node's records say
         * who holds it (docs/daemon.md, "What a crash leaves"). */
        for (struct ntbf__borrow *b = d->borrows, *next; b; b = next) {
                next = b->next;
                bool kept = false;
                for (size_t i = 0; borrows && i < json_object_array_length(borrows); i++) {
                        uint64_t f;
                        kept |= ntbf__jget_u(json_object_array_get_idx(borrows, i), "fdid", &f) &&
                                f == b->fdid;
                }
                if (!kept) {
                        LOG_W("borrow of 0x%04x was reclaimed by the fabric manager meanwhile",
                              b->fdid);
                        ntbf__node_drop_borrow(d, b->fdid,
                                               "reclaimed by the fabric manager (lease expired)");
                }
        }
        for (size_t i = 0; borrows && i < json_object_array_length(borrows); i++) {
                struct json_object *bj = json_object_array_get_idx(borrows, i);
                uint64_t f;
                if (!ntbf__jget_u(bj, "fdid", &f))
                        continue;
                struct ntbf__borrow *b = ntbf__node_borrow(d, (uint32_t)f);
                if (!b) {
                        /* Committed at the manager, never recorded here: the answer was lost
                         * (this daemon, its client or the session died first). */
                        ntbf__node_return_unheld(d, (uint32_t)f,
                                                 "the fabric manager records it, this node "
                                                 "does not (its answer was lost)");
                        continue;
                }
                bool sisci = b->sisci;
                b = ntbf__node_add_borrow(d, bj);
                if (b && sisci && !b->sisci)
                        ntbf__node_borrow_for_sisci(d, b);
                if (b && b->sisci && !ntbf__sx_holds(d, b->fdid)) {
                        /* No SISCI session holds it: its sessions ended with a daemon that
                         * died, or while the manager was away. */
                        ntbf__node_drop_borrow(d, b->fdid, "no SISCI process holds it any more");
                        ntbf__node_return_unheld(d, (uint32_t)f, "no SISCI session holds it");
                } else if (b && !d->resumed && kernel_orphan(b)) {
                        /* Made for this kernel by the daemon before this one, which died
                         * before the kernel was given it: nothing here will ever hold it. */
                        ntbf__node_drop_borrow(d, b->fdid, NULL);
                        ntbf__node_return_unheld(d, (uint32_t)f,
                                                 "borrowed for this kernel, but its daemon "
                                                 "stopped before a shadow device or a VM's "
                                                 "instance took it");
                }
        }
        for (struct ntbf__lend *l = d->lends; l; l = l->next)
                l->borrowers = 0;
        for (size_t i = 0; lent && i < json_object_array_length(lent); i++) {
                struct json_object *e = json_object_array_get_idx(lent, i), *who;
                uint64_t f;
                if (!ntbf__jget_u(e, "fdid", &f) ||
                    !json_object_object_get_ex(e, "borrowers", &who))
                        continue;
                for (size_t k = 0; k < json_object_array_length(who); k++)
                        lend_borrowers(d, (uint32_t)f,
                                       json_object_get_string(json_object_array_get_idx(who, k)),
                                       true);
        }
        unsigned nb = 0;
        for (struct ntbf__borrow *b = d->borrows; b; b = b->next)
                nb++;
        d->fm_ready = true;
        d->resumed = true;
        ntbf__kern_resume(d);
        ntbf__kmdev_start(d);
        LOG_I("joined the fabric manager on '%s': %zu entr%s programmed, %u borrow%s",
              node_name(d, d->manager), d->programmed.n, d->programmed.n == 1 ? "y" : "ies", nb,
              nb == 1 ? "" : "s");
        json_object_put(res);
}

static void registered(void *arg, int err, const char *msg, struct json_object *res)
{
        struct ntbf__d *d = arg;
        json_object_put(res);
        if (err) {
                d->syncing = false;
                LOG_W("cannot register with the fabric manager: %s", msg);
                return;
        }
        ntbf__peer_request(d, d->manager, "sync", NULL, synced, d);
}

void ntbf__node_join(struct ntbf__d *d)
{
        if (d->syncing || d->stopping)
                return;
        d->syncing = true;
        struct json_object *p = json_object_new_object(), *l = json_object_new_array();
        for (struct ntbf__lend *x = d->lends; x; x = x->next) {
                struct json_object *e = json_object_new_object();
                ntbf__jput_u(e, "fdid", x->fdid);
                ntbf__jput_b(e, "available", x->available);
                uint32_t dev, fn;
                if (!ntbf__fdid_resolve(d->t, x->fdid, &dev, &fn) &&
                    ntbf__bars_host_placed(d->t, dev)) {
                        /* Where the kernel placed its BARs (the manager refuses the lend
                         * without them). */
                        char why[512];
                        struct json_object *bars = ntbf__vfiod_bars(d, dev, fn, why, sizeof(why));
                        if (bars)
                                json_object_object_add(e, "bars", bars);
                        else
                                LOG_E("lent device 0x%04x: %s", x->fdid, why);
                }
                json_object_array_add(l, e);
        }
        json_object_object_add(p, "lends", l);
        json_object_object_add(p, "sx", ntbf__sx_register_params(d));
        ntbf__peer_request(d, d->manager, "register", p, registered, d);
}

void ntbf__d_peer_up(struct ntbf__d *d, uint32_t node, bool up)
{
        struct json_object *x = json_object_new_object();
        ntbf__jput_s(x, "node", node_name(d, node));
        ntbf__node_event(d, up ? "peer.up" : "peer.down", NTBF_NONE, NULL, x);
        if (node != d->manager)
                return;
        if (up) {
                ntbf__node_join(d);
        } else {
                d->fm_ready = false;
                LOG_W("fabric manager '%s' unreachable: lends, borrows and returns wait for it; "
                      "what is programmed keeps working",
                      node_name(d, node));
        }
}

/* ---- loading -------------------------------------------------------------------------------- */

static int load_lend(void *arg, const char *key, const char *json)
{
        struct ntbf__d *d = arg;
        uint64_t fdid;
        bool avail = true;
        struct json_object *o = json_tokener_parse(json);
        ntbf__jget_b(o, "available", &avail);
        json_object_put(o);
        uint32_t dev, fn;
        if (!ntbf_uint_parse(key, &fdid) && !ntbf__fdid_resolve(d->t, (uint32_t)fdid, &dev, &fn) &&
            d->t->devices[dev].node == d->self)
                add_lend(d, (uint32_t)fdid, avail);
        return 0;
}

static int load_borrow(void *arg, const char *key, const char *json)
{
        (void)key;
        struct ntbf__d *d = arg;
        struct json_object *o = json_tokener_parse(json);
        if (o)
                ntbf__node_add_borrow(d, o);
        json_object_put(o);
        return 0;
}

static int load_programmed(void *arg, const char *key, const char *json)
{
        (void)json;
        struct ntbf__d *d = arg;
        struct ntbf__ent e;
        if (!ntbf__ent_parse(d->t, key, &e) && e.prog == d->self)
                ntbf__entset_add(&d->programmed, key);
        return 0;
}

int ntbf__node_load(struct ntbf__d *d, char *why, size_t whylen)
{
        char *v = NULL;
        bool first = ntbf__store_get(d->st, NTBF_T_META, "lends_initialized", &v) != 0;
        free(v);
        if (first) {
                /* The first start lends what the cluster file says; later starts what the
                 * operator left lent (device.lend / device.unlend persist). */
                const struct ntbf_node *me = &d->t->nodes[d->self];
                for (uint32_t i = 0; i < me->ndevices; i++) {
                        const struct ntbf_device *dev = &d->t->devices[me->devices[i]];
                        if (!dev->lend)
                                continue;
                        for (uint32_t f = 0; f < ntbf_device_nfuncs(dev); f++)
                                ntbf__node_save_lend(
                                    d, add_lend(d, ntbf__fdid_of(d->t, me->devices[i], f), true));
                }
                ntbf__store_put(d->st, NTBF_T_META, "lends_initialized", "1");
        }
        if (ntbf__store_each(d->st, NTBF_T_LENDS, load_lend, d) ||
            ntbf__store_each(d->st, NTBF_T_BORROWS, load_borrow, d) ||
            ntbf__store_each(d->st, NTBF_T_PROGRAMMED, load_programmed, d)) {
                snprintf(why, whylen, "cannot read this node's tables: %s",
                         ntbf__store_error(d->st));
                return -EIO;
        }
        ntbf__entset_sort(&d->programmed);
        return 0;
}

/* ---- stopping ------------------------------------------------------------------------------- */

static void close_rest(uv_handle_t *h, void *arg)
{
        struct ntbf__d *d = arg;
        /* Client connections close themselves (pipe, then retry timer) once their last
         * answer is flushed: closing their timer here would close it twice. */
        if ((h->type == UV_NAMED_PIPE && h != (uv_handle_t *)&d->listener) ||
            ntbf__sock_conn_handle(d, h))
                return;
        if (!uv_is_closing(h))
                uv_close(h, NULL);
}

void ntbf__d_finish(struct ntbf__d *d)
{
        static bool done;
        if (done)
                return;
        done = true;
        LOG_I("stopped");
        for (struct ntbf__rpc_conn *c = d->rpc.conns; c; c = c->next)
                ntbf__rpc_conn_eof(c);
        ntbf__peers_stop(d);
        uv_walk(d->loop, close_rest, d);
}

static void stop_step(void *arg, int err, const char *msg, struct json_object *res)
{
        struct ntbf__d *d = arg;
        json_object_put(res);
        if (err)
                LOG_W("while stopping: %s", msg);
        if (--d->stop_pending == 0)
                ntbf__d_finish(d);
}

static void shutdown_timeout(uv_timer_t *t)
{
        struct ntbf__d *d = t->data;
        LOG_W("stopping without every answer after %d ms", NTBF_SHUTDOWN_MS);
        ntbf__d_finish(d);
}

void ntbf__node_shutdown(struct ntbf__d *d)
{
        if (d->stopping)
                return;
        d->stopping = true;
        uv_timer_start(&d->shutdown_timer, shutdown_timeout, NTBF_SHUTDOWN_MS, 0);
        LOG_I("stopping: returning %s borrows and unlending", d->borrows ? "its" : "no");
        d->stop_pending = 1;
        bool fm = d->fm_ready && ntbf__peer_connected(d, d->manager);
        while (d->borrows) {
                uint32_t fdid = d->borrows->fdid;
                /* A driver of this kernel unbinds first, from a working device. */
                ntbf__kern_detach(d, d->borrows, false);
                /* Users hear it first, then the manager gets the device back. */
                ntbf__node_drop_borrow(d, fdid, "this node's daemon is stopping");
                if (fm) {
                        struct json_object *p = json_object_new_object();
                        ntbf__jput_u(p, "fdid", fdid);
                        d->stop_pending++;
                        ntbf__peer_request(d, d->manager, "return", p, stop_step, d);
                }
        }
        for (struct ntbf__lend *l = d->lends; l && fm; l = l->next) {
                struct json_object *p = json_object_new_object();
                ntbf__jput_u(p, "fdid", l->fdid);
                ntbf__jput_b(p, "force", true);
                d->stop_pending++;
                ntbf__peer_request(d, d->manager, "unlend", p, stop_step, d);
        }
        stop_step(d, 0, NULL, NULL);
}
