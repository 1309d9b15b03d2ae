/* daemon/fm.c: the fabric manager: registry, admission, programming with rollback, leases. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entry.h"
#include "fm.h"
#include "fm_int.h"
#include "log.h"
#include "ntbfab/error.h"
#include "ntbfab/units.h"
#include "vfio.h"

static void run_queue(struct ntbf__fm *fm);

/* ---- small helpers ------------------------------------------------------------------------- */

static uint64_t now(struct ntbf__fm *fm)
{
        return fm->net.now_ms(fm->net.ctx);
}

/* Leases run out only for what this daemon could have read (fm.h). */
static uint64_t heard(struct ntbf__fm *fm)
{
        return fm->net.heard_ms ? fm->net.heard_ms(fm->net.ctx) : now(fm);
}

static bool connected(struct ntbf__fm *fm, uint32_t node)
{
        return node == fm->self || fm->net.connected(fm->net.ctx, node);
}

static void fail(ntbf__done_fn cb, void *arg, int err, const char *fmt, ...) NTBF_PRINTF(4, 5);
static void fail(ntbf__done_fn cb, void *arg, int err, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        cb(arg, err, msg, NULL);
}

static struct fm_fn *fn_of(struct ntbf__fm *fm, uint32_t fdid)
{
        for (uint32_t i = 0; i < fm->nfn; i++)
                if (fm->fn[i].fdid == fdid)
                        return &fm->fn[i];
        return NULL;
}

static uint32_t fn_node(const struct ntbf__fm *fm, const struct fm_fn *f)
{
        return fm->t->devices[f->device].node;
}

static const char *fn_name(const struct ntbf__fm *fm, const struct fm_fn *f, char *buf, size_t len)
{
        const struct ntbf_device *d = &fm->t->devices[f->device];
        if (ntbf_device_nfuncs(d) > 1)
                snprintf(buf, len, "%s.%s function %u (0x%04x)", fm->t->nodes[d->node].name,
                         d->name, f->function, f->fdid);
        else
                snprintf(buf, len, "%s.%s (0x%04x)", fm->t->nodes[d->node].name, d->name, f->fdid);
        return buf;
}

static const char *node_name(const struct ntbf__fm *fm, uint32_t n)
{
        return fm->t->nodes[n].name;
}

static struct fm_alloc *find_borrow(struct ntbf__fm *fm, uint32_t fdid, uint32_t node)
{
        for (struct fm_alloc *a = fm->allocs; a; a = a->next)
                if (a->kind == A_BORROW && a->fdid == fdid &&
                    (node == NTBF_NONE || a->node == node))
                        return a;
        return NULL;
}

static struct fm_alloc *find_seq(struct ntbf__fm *fm, uint64_t seq)
{
        for (struct fm_alloc *a = fm->allocs; a; a = a->next)
                if (a->seq == seq)
                        return a;
        return NULL;
}

static void link_alloc(struct ntbf__fm *fm, struct fm_alloc *a)
{
        struct fm_alloc **pp = &fm->allocs;
        while (*pp)
                pp = &(*pp)->next;
        a->next = NULL;
        *pp = a;
}

static void unlink_alloc(struct ntbf__fm *fm, struct fm_alloc *a)
{
        for (struct fm_alloc **pp = &fm->allocs; *pp; pp = &(*pp)->next)
                if (*pp == a) {
                        *pp = a->next;
                        return;
                }
}

/* ---- persistence --------------------------------------------------------------------------- */

static void save_fn(struct ntbf__fm *fm, const struct fm_fn *f)
{
        char key[16];
        struct json_object *o = json_object_new_object();
        ntbf__jput_b(o, "lent", f->lent);
        ntbf__jput_b(o, "available", f->available);
        ntbf__jput_b(o, "lost", f->lost);
        if (f->hw[0] | f->hw[1] | f->hw[2] | f->hw[3] | f->hw[4] | f->hw[5]) {
                struct json_object *hw = json_object_new_array();
                for (uint32_t b = 0; b < NTBF_MAX_BARS; b++)
                        json_object_array_add(hw, json_object_new_uint64(f->hw[b]));
                json_object_object_add(o, "hw_bars", hw);
        }
        snprintf(key, sizeof(key), "%u", f->fdid);
        if (ntbf__store_put(fm->st, NTBF_T_FM_DEVICES, key, ntbf__json_text(o)))
                LOG_E("cannot record device 0x%04x: %s", f->fdid, ntbf__store_error(fm->st));
        json_object_put(o);
}

static void seq_key(uint64_t seq, char *buf, size_t len)
{
        snprintf(buf, len, "%016" PRIu64, seq);
}

/* Record allocation a; with res, its resource rows too (they change only with its plan).
 * All or nothing: 0, or -EIO with nothing written and the reason logged
 * (ntbf__store_error). */
static int save_alloc_rows(struct ntbf__fm *fm, const struct fm_alloc *a, bool res)
{
        const struct ntbf_plan *p = ntbf_alloc_plan(fm->s, a->sid);
        struct json_object *o = json_object_new_object();
        const char *kn = ntbf__fm_sx_kind_name(a->kind);
        ntbf__jput_s(o, "kind", kn ? kn : a->kind == A_BORROW ? "borrow" : "map");
        ntbf__fm_sx_save(a, o);
        ntbf__jput_u(o, "fdid", a->fdid);
        ntbf__jput_s(o, "node", node_name(fm, a->node));
        ntbf__jput_b(o, "exclusive", a->exclusive);
        if (a->kind == A_BORROW)
                ntbf__jput_s(o, "frontend", a->kernel ? "kernel" : "api");
        ntbf__jput_b(o, "active", a->active);
        ntbf__jput_u(o, "parent", a->parent);
        ntbf__jput_u(o, "target_fdid", a->target_fdid);
        ntbf__jput_u(o, "bar", a->bar);
        json_object_object_add(o, "plan", p ? ntbf__plan_json(p) : NULL);
        char key[24];
        seq_key(a->seq, key, sizeof(key));
        int r = ntbf__store_begin(fm->st);
        if (!r)
                r = ntbf__store_put(fm->st, NTBF_T_FM_ALLOCS, key, ntbf__json_text(o));
        /* One row per resource, so an operator can read every slot, ID and range. */
        if (!r && p && res) {
                struct ntbf__res_row *rows = calloc(p->nres + 1, sizeof(*rows));
                char(*obj)[80] = calloc(p->nres + 1, sizeof(*obj));
                for (uint32_t i = 0; rows && obj && i < p->nres; i++) {
                        const struct ntbf_res *x = &p->res[i];
                        const struct ntbf_topo *t = fm->t;
                        if (x->kind == NTBF_RES_LUT || x->kind == NTBF_RES_RID)
                                snprintf(obj[i], 80, "%s.%s",
                                         t->nodes[t->adapters[x->obj].node].name,
                                         t->adapters[x->obj].name);
                        else if (x->kind == NTBF_RES_RANGE)
                                snprintf(obj[i], 80, "%s", t->nodes[x->obj].name);
                        else
                                snprintf(obj[i], 80, "%s", t->switches[x->obj].name);
                        rows[i] = (struct ntbf__res_row){
                            ntbf_res_kind_name(x->kind),
                            obj[i],
                            x->what,
                            x->kind == NTBF_RES_LUT || x->kind == NTBF_RES_MCAST ? (int64_t)x->first
                                                                                 : -1,
                            x->kind == NTBF_RES_LUT ? (int64_t)x->count : 1,
                            x->addr,
                            x->size,
                            x->dst_addr,
                            x->dst_node < t->nnodes ? t->nodes[x->dst_node].name : NULL,
                            x->programmer < t->nnodes ? t->nodes[x->programmer].name : NULL};
                }
                r = rows && obj ? ntbf__store_res_put(fm->st, a->seq, rows, p->nres) : -ENOMEM;
                free(rows);
                free(obj);
        }
        if (r) {
                LOG_E("cannot record allocation %" PRIu64 ": %s", a->seq,
                      r == -ENOMEM ? "out of memory" : ntbf__store_error(fm->st));
                ntbf__store_rollback(fm->st);
        } else if ((r = ntbf__store_commit(fm->st))) {
                LOG_E("cannot record allocation %" PRIu64 ": %s", a->seq,
                      ntbf__store_error(fm->st));
        }
        json_object_put(o);
        return r;
}

static int save_alloc(struct ntbf__fm *fm, const struct fm_alloc *a)
{
        return save_alloc_rows(fm, a, true);
}

static void forget_alloc(struct ntbf__fm *fm, const struct fm_alloc *a)
{
        char key[24];
        seq_key(a->seq, key, sizeof(key));
        ntbf__store_begin(fm->st);
        ntbf__store_del(fm->st, NTBF_T_FM_ALLOCS, key);
        ntbf__store_res_del(fm->st, a->seq);
        ntbf__store_commit(fm->st);
}

/* ---- JSON shapes (docs/rpc.md) ------------------------------------------------------------- */

static const char *fn_state(struct ntbf__fm *fm, const struct fm_fn *f)
{
        if (f->lost)
                return "lost";
        for (struct fm_alloc *a = fm->allocs; a; a = a->next)
                if (a->kind == A_BORROW && a->fdid == f->fdid)
                        return a->exclusive ? "exclusive" : "shared";
        return f->available ? "available" : "unavailable";
}

static struct json_object *device_json(struct ntbf__fm *fm, const struct fm_fn *f)
{
        const struct ntbf_device *d = &fm->t->devices[f->device];
        char bdf[32];
        struct json_object *o = json_object_new_object(), *b = json_object_new_array();
        ntbf__jput_u(o, "fdid", f->fdid);
        ntbf__jput_s(o, "node", node_name(fm, d->node));
        ntbf__jput_s(o, "name", d->name);
        ntbf__jput_s(o, "bdf", ntbf__func_bdf(fm->t, f->device, f->function, bdf, sizeof(bdf)));
        ntbf__jput_u(o, "function", f->function);
        ntbf__jput_u(o, "class", d->class_code);
        ntbf__jput_u(o, "vendor", d->vendor_id);
        ntbf__jput_u(o, "device", d->device_id);
        ntbf__jput_s(o, "state", fn_state(fm, f));
        ntbf__jput_b(o, "isolate", d->isolate);
        /* Where its BARs are programmed: the hardware's addresses of a real device that its
         * lender reported, else the model's. */
        struct json_object *bars = json_object_new_array();
        bool hw = false;
        for (uint32_t i = 0; i < NTBF_MAX_BARS; i++) {
                uint64_t size = ntbf_device_bar_size(d, f->function, i);
                if (!size)
                        continue;
                struct json_object *x = json_object_new_object();
                ntbf__jput_u(x, "bar", i);
                ntbf__jput_u(x, "size", size);
                ntbf__jput_u(x, "addr", ntbf_state_bar_addr(fm->s, f->device, f->function, i));
                json_object_array_add(bars, x);
                hw |= f->hw[i] != 0;
        }
        json_object_object_add(o, "bars", bars);
        ntbf__jput_s(o, "bars_from", hw ? "hardware" : "model");
        for (struct fm_alloc *a = fm->allocs; a; a = a->next)
                if (a->kind == A_BORROW && a->fdid == f->fdid)
                        json_object_array_add(b, json_object_new_string(node_name(fm, a->node)));
        json_object_object_add(o, "borrowers", b);
        return o;
}

/* The part of the MSI range a borrow's MSI slot reaches. */
static uint64_t msi_reach(const struct ntbf_plan *p)
{
        for (uint32_t i = 0; i < p->nres; i++) {
                const struct ntbf_res *x = &p->res[i];
                if (x->kind == NTBF_RES_LUT && x->dest == NTBF_DEST_MSI && p->msi_addr >= x->addr &&
                    p->msi_addr < x->addr + x->size) {
                        uint64_t n = x->addr + x->size - p->msi_addr;
                        return n < NTBF_MSI_SIZE ? n : NTBF_MSI_SIZE;
                }
        }
        return 0;
}

static struct json_object *borrow_json(struct ntbf__fm *fm, const struct fm_alloc *a)
{
        const struct ntbf_topo *t = fm->t;
        const struct ntbf_plan *p = ntbf_alloc_plan(fm->s, a->sid);
        struct fm_fn *f = fn_of(fm, a->fdid);
        const struct ntbf_device *d = &t->devices[f->device];
        struct json_object *o = json_object_new_object();
        ntbf__jput_u(o, "fdid", a->fdid);
        ntbf__jput_s(o, "lender", node_name(fm, d->node));
        ntbf__jput_s(o, "borrower", node_name(fm, a->node));
        ntbf__jput_s(o, "mode", a->exclusive ? "exclusive" : "shared");
        ntbf__jput_s(o, "frontend", a->kernel ? "kernel" : "api");
        uint64_t w = p->req.dma_window ? p->req.dma_window : NTBF_DEFAULT_DMA_WINDOW;
        w = ntbf_align_up(w, 4096);
        ntbf__jput_u(o, "dma_window", w);
        json_object_object_add(o, "local_bdf", NULL); /* the borrower's daemon fills it */
        ntbf__jput_u(o, "lease_ms", t->opts.lease_ms);
        ntbf__jput_u(o, "seq", a->seq);
        char bdf[32];
        ntbf__jput_s(o, "lender_bdf", ntbf__func_bdf(t, f->device, f->function, bdf, sizeof(bdf)));
        ntbf__jput_s(o, "name", d->name);
        uint32_t ad = p->path.first_adapter;
        struct json_object *bars = json_object_new_array();
        for (uint32_t b = 0; b < NTBF_MAX_BARS; b++) {
                uint64_t size = ntbf_device_bar_size(d, f->function, b);
                if (!size || !p->bar_addr[b])
                        continue;
                struct json_object *x = json_object_new_object();
                ntbf__jput_u(x, "bar", b);
                ntbf__jput_u(x, "size", size);
                ntbf__jput_u(x, "addr", p->bar_addr[b]);
                ntbf__jput_u(x, "adapter", ad);
                ntbf__put_window(x, &t->adapters[ad], p->bar_addr[b]);
                json_object_array_add(bars, x);
        }
        json_object_object_add(o, "bars", bars);
        struct json_object *dma = json_object_new_object(), *msi = json_object_new_object();
        ntbf__jput_u(dma, "device_addr", p->dma_addr);
        ntbf__jput_u(dma, "iova", p->dma_iova);
        ntbf__jput_u(dma, "size", w);
        ntbf__jput_u(dma, "adapter", p->dma_path.last_adapter);
        /* A managed fabric maps the device's DMA itself: no window was planned for it. */
        if (p->dma_path.first_adapter < t->nadapters &&
            t->adapters[p->dma_path.first_adapter].p.managed)
                ntbf__jput_b(dma, "managed", true);
        json_object_object_add(o, "dma", dma);
        ntbf__jput_u(msi, "device_addr", p->msi_addr);
        ntbf__jput_u(msi, "host_addr", NTBF_MSI_BASE);
        ntbf__jput_u(msi, "size", msi_reach(p));
        json_object_object_add(o, "msi", msi);
        json_object_object_add(o, "path", ntbf__path_json(t, &p->path));
        json_object_object_add(o, "dma_path", ntbf__path_json(t, &p->dma_path));
        return o;
}

static struct json_object *map_json(struct ntbf__fm *fm, const struct fm_alloc *a)
{
        const struct ntbf_plan *p = ntbf_alloc_plan(fm->s, a->sid);
        struct json_object *o = json_object_new_object();
        ntbf__jput_u(o, "seq", a->seq);
        ntbf__jput_u(o, "fdid", a->fdid);
        ntbf__jput_u(o, "target", a->target_fdid);
        ntbf__jput_u(o, "bar", a->bar);
        ntbf__jput_u(o, "device_addr", p->dma_addr);
        ntbf__jput_u(o, "size", p->req.target.size);
        json_object_object_add(o, "path", ntbf__path_json(fm->t, &p->path));
        return o;
}

/* ---- programming rounds -------------------------------------------------------------------- */

static void round_done(struct ntbf__fm *fm)
{
        void (*then)(struct ntbf__fm *) = fm->then;
        fm->then = NULL;
        then(fm);
}

static void round_reply(void *arg, int err, const char *msg, struct json_object *res)
{
        struct ntbf__fm *fm = arg;
        json_object_put(res);
        if (err && !fm->err) {
                fm->err = err;
                snprintf(fm->msg, sizeof(fm->msg), "%s", msg ? msg : ntbf_strerror(err));
        }
        if (--fm->pending == 0)
                round_done(fm);
}

/*
 * Send the entries of fm->delta to their programmers ("program" or "unprogram") and call
 * then when every answer is in. Programming needs every programmer connected; clearing
 * skips the unreachable ones (they reconcile when they are back).
 */
static void round_start(struct ntbf__fm *fm, bool program, void (*then)(struct ntbf__fm *))
{
        const struct ntbf_topo *t = fm->t;
        fm->then = then;
        fm->err = 0;
        fm->msg[0] = 0;
        fm->pending = 1; /* held until every request is out */
        /* Each entry goes to its programmer: one list per node that has some. */
        struct json_object **lists = calloc(t->nnodes + 1, sizeof(*lists));
        for (size_t i = 0; lists && i < fm->delta.n; i++) {
                struct ntbf__ent e;
                if (ntbf__ent_parse(t, fm->delta.v[i], &e) || e.prog >= t->nnodes)
                        continue;
                if (!lists[e.prog])
                        lists[e.prog] = json_object_new_array();
                json_object_array_add(lists[e.prog], json_object_new_string(fm->delta.v[i]));
        }
        if (!lists && !fm->err) {
                fm->err = -ENOMEM;
                snprintf(fm->msg, sizeof(fm->msg), "out of memory");
        }
        for (uint32_t n = 0; lists && n < t->nnodes; n++) {
                struct json_object *list = lists[n];
                if (!list)
                        continue;
                if (!connected(fm, n)) {
                        json_object_put(list);
                        if (program && !fm->err) {
                                fm->err = NTBF_EUNREACHABLE;
                                snprintf(fm->msg, sizeof(fm->msg),
                                         "node '%s' must program part of this and its daemon is "
                                         "unreachable; start it (ntbfab up) or wait for it",
                                         t->nodes[n].name);
                        }
                        continue;
                }
                if (program && fm->err) {
                        json_object_put(list); /* no point: this round fails anyway */
                        continue;
                }
                struct json_object *p = json_object_new_object();
                json_object_object_add(p, "entries", list);
                fm->pending++;
                fm->net.request(fm->net.ctx, n, program ? "program" : "unprogram", p, round_reply,
                                fm);
        }
        free(lists);
        if (--fm->pending == 0)
                round_done(fm);
}

/* ---- what the state needs programmed -------------------------------------------------------
 *
 * fm->want changes with each allocation made or given back, by that allocation's entries
 * alone (and those of allocations whose entries depend on others: multicast). A change
 * records which keys it touched and whether each was wanted before, so that the
 * programming round sends exactly the difference.
 */

struct wchange {
        struct ntbf__entcount was, wasnt; /* touched keys, wanted before or not */
        int err;
};

static void want_step(struct ntbf__fm *fm, struct wchange *w, const char *key, bool add)
{
        bool before = ntbf__entcount_of(&fm->want, key) > 0;
        struct ntbf__entcount *seen = before ? &w->was : &w->wasnt;
        int r = 0;
        if (!ntbf__entcount_of(&w->was, key) && !ntbf__entcount_of(&w->wasnt, key))
                r = ntbf__entcount_step(seen, key, true);
        if (!r)
                r = ntbf__entcount_step(&fm->want, key, add);
        if (r && !w->err)
                w->err = r;
}

static void want_hold(struct ntbf__fm *fm, struct wchange *w, struct fm_alloc *a, bool hold)
{
        if (hold) {
                const struct ntbf_plan *p = ntbf_alloc_plan(fm->s, a->sid);
                ntbf__entset_free(&a->ents);
                if (p && ntbf__plan_ents(fm->s, p, &a->ents) && !w->err)
                        w->err = -ENOMEM;
                ntbf__entset_sort(&a->ents);
                a->ents_shared = p && ntbf__plan_ents_shared(p);
        }
        for (size_t i = 0; i < a->ents.n; i++)
                want_step(fm, w, a->ents.v[i], hold);
        if (!hold)
                ntbf__entset_free(&a->ents);
}

/* Allocations whose entries depend on the others' follow the change. */
static void want_follow(struct ntbf__fm *fm, struct wchange *w)
{
        for (struct fm_alloc *a = fm->allocs; a; a = a->next) {
                const struct ntbf_plan *p;
                if (!a->ents_shared || !(p = ntbf_alloc_plan(fm->s, a->sid)))
                        continue;
                struct ntbf__entset now = {0}, gone = {0}, come = {0};
                if (ntbf__plan_ents(fm->s, p, &now) && !w->err)
                        w->err = -ENOMEM;
                ntbf__entset_sort(&now);
                ntbf__entset_diff(&a->ents, &now, &gone);
                ntbf__entset_diff(&now, &a->ents, &come);
                for (size_t i = 0; i < gone.n; i++)
                        want_step(fm, w, gone.v[i], false);
                for (size_t i = 0; i < come.n; i++)
                        want_step(fm, w, come.v[i], true);
                ntbf__entset_free(&a->ents);
                a->ents = now;
                ntbf__entset_free(&gone);
                ntbf__entset_free(&come);
        }
}

/* Recompute what the whole state needs and compare (NTBFAB_FM_CHECK=1: tests). */
static void want_check(struct ntbf__fm *fm, const char *after)
{
        if (!fm->check)
                return;
        struct ntbf__entset full = {0}, extra = {0}, missing = {0};
        ntbf__ents_of_state(fm->s, &full);
        ntbf__entset_diff(&full, &fm->want.keys, &missing);
        ntbf__entset_diff(&fm->want.keys, &full, &extra);
        if (missing.n || extra.n) {
                LOG_E("the manager's desired entries differ from its state's after %s: %zu "
                      "missing (%s), %zu extra (%s)",
                      after, missing.n, missing.n ? missing.v[0] : "-", extra.n,
                      extra.n ? extra.v[0] : "-");
                abort();
        }
        ntbf__entset_free(&full);
        ntbf__entset_free(&extra);
        ntbf__entset_free(&missing);
}

/* End a change: fm->delta is what it added (program) or removed (clear), sorted. */
static void want_done(struct ntbf__fm *fm, struct wchange *w, bool program, const char *what)
{
        want_follow(fm, w);
        ntbf__entset_free(&fm->delta);
        const struct ntbf__entcount *c = program ? &w->wasnt : &w->was;
        for (size_t i = 0; i < c->keys.n; i++)
                if ((ntbf__entcount_of(&fm->want, c->keys.v[i]) > 0) == program)
                        ntbf__entset_add(&fm->delta, c->keys.v[i]);
        if (w->err)
                LOG_E("out of memory keeping the desired entries after %s: nodes reconcile "
                      "with what the manager can send",
                      what);
        ntbf__entcount_free(&w->was);
        ntbf__entcount_free(&w->wasnt);
        want_check(fm, what);
}

/* Release allocations and compute in fm->delta what no longer is needed. */
static void release_into_delta(struct ntbf__fm *fm, struct fm_alloc **v, size_t n)
{
        struct wchange w = {0};
        for (size_t i = 0; i < n; i++) {
                if (v[i]->kind >= A_SX_CONNECT)
                        ntbf__fm_sx_released(fm, v[i]);
                ntbf_release(fm->s, v[i]->sid);
                want_hold(fm, &w, v[i], false);
                forget_alloc(fm, v[i]);
                unlink_alloc(fm, v[i]);
                free(v[i]);
        }
        want_done(fm, &w, false, "a release");
}

/* ---- the queue of mutations ---------------------------------------------------------------- */

static void op_finish(struct ntbf__fm *fm, int err, const char *msg, struct json_object *res)
{
        struct fm_op *op = fm->cur;
        fm->cur = NULL;
        fm->queued--;
        op->cb(op->arg, err, msg, res);
        json_object_put(op->p);
        free(op);
        run_queue(fm);
}

static void op_fail(struct ntbf__fm *fm, int err, const char *fmt, ...) NTBF_PRINTF(3, 4);
static void op_fail(struct ntbf__fm *fm, int err, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        op_finish(fm, err, msg, NULL);
}

static void start_op(struct ntbf__fm *fm, struct fm_op *op);
static void run_queue(struct ntbf__fm *fm);

/* Mutations that finish at once run back to back this long, then yield to the loop. */
#define FM_SLICE_MS 50
/* One mutation that keeps the manager this long from everything else is logged. */
#define FM_SLOW_MS  1000

static void resume_queue(void *arg)
{
        struct ntbf__fm *fm = arg;
        fm->deferred = false;
        run_queue(fm);
}

/*
 * Mutations that finish at once run back to back for at most FM_SLICE_MS; the rest wait for
 * the next turn of the loop, so that the daemon reads and answers its peers (heartbeats,
 * other requests) between them instead of going silent while a long queue drains.
 */
static void run_queue(struct ntbf__fm *fm)
{
        if (fm->running || fm->deferred)
                return;
        fm->running = true;
        uint64_t t0 = now(fm);
        for (unsigned ran = 0; !fm->cur && fm->qhead; ran++) {
                uint64_t t = now(fm);
                if (ran && fm->net.defer && t - t0 >= FM_SLICE_MS) {
                        fm->deferred = true;
                        fm->net.defer(fm->net.ctx, resume_queue, fm);
                        break;
                }
                struct fm_op *op = fm->qhead;
                fm->qhead = op->next;
                if (!fm->qhead)
                        fm->qtail = NULL;
                fm->cur = op;
                char m[sizeof(op->m)];
                uint32_t from = op->from;
                snprintf(m, sizeof(m), "%s", op->m);
                start_op(fm, op); /* may finish and free op */
                uint64_t took = now(fm) - t;
                if (took >= FM_SLOW_MS)
                        LOG_W("the fabric manager spent %" PRIu64 " ms on '%s' from '%s' without "
                              "answering anything else (is this host's CPU overloaded?)",
                              took, m, node_name(fm, from));
        }
        fm->running = false;
}

static void enqueue(struct ntbf__fm *fm, uint32_t from, const char *m, struct json_object *p,
                    ntbf__done_fn cb, void *arg)
{
        struct fm_op *op = calloc(1, sizeof(*op));
        if (!op) {
                fail(cb, arg, -ENOMEM, "out of memory");
                return;
        }
        snprintf(op->m, sizeof(op->m), "%s", m);
        op->from = from;
        op->epoch = from < fm->t->nnodes ? fm->nodes[from].epoch : 0;
        op->p = p ? json_object_get(p) : NULL;
        op->cb = cb;
        op->arg = arg;
        if (fm->qtail)
                fm->qtail->next = op;
        else
                fm->qhead = op;
        fm->qtail = op;
        fm->queued++;
        run_queue(fm);
}

/* ---- borrow -------------------------------------------------------------------------------- */

static void borrow_undone(struct ntbf__fm *fm)
{
        ntbf__entset_free(&fm->delta);
        op_fail(fm, fm->fail_err, "%s", fm->fail_msg);
}

static void borrow_programmed(struct ntbf__fm *fm)
{
        struct fm_alloc *a = fm->cur_alloc;
        fm->cur_alloc = NULL;
        uint32_t from = fm->cur->from;
        if (!fm->err && from < fm->t->nnodes && fm->nodes[from].epoch != fm->cur->epoch) {
                /* The node registered again meanwhile (its daemon or its session restarted):
                 * the answer cannot reach whoever asked, and nobody would hold the result. */
                fm->err = NTBF_EUNREACHABLE;
                snprintf(fm->msg, sizeof(fm->msg),
                         "'%s' registered again while its %s was being made; nobody would hold "
                         "it",
                         node_name(fm, from), fm->cur->m);
        }
        if (!fm->err) {
                /* Its plan, and so its resource rows, are those recorded at the commit. */
                a->active = true;
                if (save_alloc_rows(fm, a, false)) {
                        a->active = false;
                        fm->err = -EIO;
                        snprintf(fm->msg, sizeof(fm->msg),
                                 "the manager cannot record it in its database (%s); see its "
                                 "log, free the state directory's disk or release the "
                                 "database's lock, and try again",
                                 ntbf__store_error(fm->st));
                }
        }
        if (fm->err) {
                /* Nothing half-applied: clear what was programmed, give the resources back. */
                fm->fail_err = fm->err;
                snprintf(fm->fail_msg, sizeof(fm->fail_msg), "%s", fm->msg);
                LOG_W("%s failed while programming (%s); rolling back", fm->cur->m, fm->msg);
                struct fm_alloc *v[1] = {a};
                release_into_delta(fm, v, 1);
                round_start(fm, false, borrow_undone);
                return;
        }
        ntbf__entset_free(&fm->delta);
        struct json_object *res = a->kind >= A_SX_CONNECT ? ntbf__fm_sx_result(fm, a)
                                  : a->kind == A_BORROW   ? borrow_json(fm, a)
                                                          : map_json(fm, a);
        if (a->kind == A_BORROW) {
                struct fm_fn *f = fn_of(fm, a->fdid);
                char nm[96];
                LOG_I("%s borrowed %s by %s", node_name(fm, a->node),
                      fn_name(fm, f, nm, sizeof(nm)), a->exclusive ? "exclusively" : "shared");
                uint32_t lender = fn_node(fm, f);
                struct json_object *ev = json_object_new_object();
                ntbf__jput_s(ev, "kind", "device.borrowed");
                ntbf__jput_u(ev, "fdid", a->fdid);
                ntbf__jput_s(ev, "borrower", node_name(fm, a->node));
                fm->net.notify(fm->net.ctx, lender, "event", ev);
        }
        op_finish(fm, 0, NULL, res);
}

/* Commit plan for allocation a, record it, program what it added. */
static void commit_and_program(struct ntbf__fm *fm, struct fm_alloc *a, struct ntbf_plan *plan)
{
        int r = ntbf_commit(fm->s, plan, &a->sid);
        if (r) {
                free(a);
                op_fail(fm, r, "the budget state changed under the plan (%s); try again",
                        ntbf_strerror(r));
                return;
        }
        a->seq = fm->next_seq++;
        /* Recorded as "programming" before anything is programmed: a crash now leaves it to be
         * dropped. A record that cannot be written refuses the mutation, nothing programmed. */
        if (save_alloc(fm, a)) {
                if (a->kind >= A_SX_CONNECT)
                        ntbf__fm_sx_released(fm, a);
                ntbf_release(fm->s, a->sid);
                free(a);
                op_fail(fm, -EIO,
                        "the manager cannot record it in its database (%s); nothing was "
                        "programmed; see its log, free the state directory's disk or release "
                        "the database's lock, and try again",
                        ntbf__store_error(fm->st));
                return;
        }
        link_alloc(fm, a);
        struct wchange w = {0};
        want_hold(fm, &w, a, true);
        want_done(fm, &w, true, fm->cur ? fm->cur->m : "a commit");
        fm->cur_alloc = a;
        round_start(fm, true, borrow_programmed);
}

static int get_fdid(struct json_object *p, uint32_t *fdid)
{
        uint64_t v;
        if (!ntbf__jget_u(p, "fdid", &v) || v > UINT32_MAX)
                return -EINVAL;
        *fdid = (uint32_t)v;
        return 0;
}

/* How a borrow is used, for refusals that name who holds a device and how. */
static const char *how(const struct fm_alloc *a)
{
        return a->kernel ? "(attached to its kernel: a shadow device or a VM's mdev instance)"
                         : "(through the device API)";
}

static void op_borrow(struct ntbf__fm *fm, struct fm_op *op)
{
        const struct ntbf_topo *t = fm->t;
        uint32_t fdid;
        const char *mode = "exclusive";
        uint64_t window = 0;
        char nm[96];
        if (get_fdid(op->p, &fdid))
                return op_fail(fm, -EINVAL, "borrow needs an fdid");
        ntbf__jget_s(op->p, "mode", &mode);
        ntbf__jget_u(op->p, "dma_window", &window);
        bool exclusive = strcmp(mode, "shared") != 0, kernel = false;
        ntbf__jget_b(op->p, "attach", &kernel);
        if (kernel && !exclusive)
                return op_fail(fm, -EINVAL,
                               "an attached device belongs to one kernel's driver: --attach "
                               "borrows exclusively, not --shared");
        struct fm_fn *f = fn_of(fm, fdid);
        if (!f || !f->lent)
                return op_fail(fm, NTBF_ENOTFOUND,
                               "no lent device has fdid 0x%04x; see 'ntbfab devices' for the "
                               "devices of the cluster",
                               fdid);
        fn_name(fm, f, nm, sizeof(nm));
        uint32_t lender = fn_node(fm, f);
        if (f->lost)
                return op_fail(fm, NTBF_EUNREACHABLE,
                               "%s is lost: its lender '%s' is down; wait for it to come back", nm,
                               node_name(fm, lender));
        if (lender == op->from)
                return op_fail(fm, -EINVAL, "%s is a device of '%s' itself; use it locally", nm,
                               node_name(fm, op->from));
        /* SR-IOV (article 7.1.6): the lender keeps the PF, which enables and manages the VFs;
         * each VF is borrowed on its own. */
        const struct ntbf_device *dv = &t->devices[f->device];
        if (dv->vfs && f->function < dv->functions) {
                uint32_t vf0 = ntbf__fdid_of(t, f->device, dv->functions);
                return op_fail(fm, -EINVAL,
                               "%s is the physical function of an SR-IOV device; it stays with "
                               "its lender, which enables its %u VFs: borrow one of them "
                               "(0x%04x-0x%04x)",
                               nm, dv->vfs, vf0, vf0 + dv->vfs - 1);
        }
        const struct fm_alloc *mine = find_borrow(fm, fdid, op->from);
        if (mine)
                return op_fail(fm, NTBF_EEXISTS, "%s is already borrowed by '%s' %s%s", nm,
                               node_name(fm, op->from), how(mine),
                               mine->kernel == kernel ? ""
                                                      : "; return it first (ntbfab return) to "
                                                        "borrow it the other way");
        for (struct fm_alloc *a = fm->allocs; a; a = a->next) {
                if (a->kind != A_BORROW || a->fdid != fdid)
                        continue;
                if (a->exclusive)
                        return op_fail(fm, NTBF_EBUSY,
                                       "%s is borrowed exclusively by '%s' %s; it must be "
                                       "returned there first (ntbfab return 0x%04x --node %s)",
                                       nm, node_name(fm, a->node), how(a), fdid,
                                       node_name(fm, a->node));
                if (exclusive)
                        return op_fail(fm, NTBF_EBUSY,
                                       "%s is shared with '%s'; an exclusive borrow needs every "
                                       "borrower to return it (or borrow it with --shared)",
                                       nm, node_name(fm, a->node));
        }
        char hw[256];
        if (ntbf__fm_sx_hold_conflict(fm, f, exclusive, hw, sizeof(hw)))
                return op_fail(fm, NTBF_EBUSY, "%s %s", nm, hw);
        if (!f->available)
                return op_fail(fm, NTBF_EBUSY,
                               "%s is unavailable (its lender took it out of the pool); ask "
                               "'%s' to make it available",
                               nm, node_name(fm, lender));
        if (!connected(fm, lender))
                return op_fail(fm, NTBF_EUNREACHABLE,
                               "the lender '%s' of %s is unreachable; try again when it is back",
                               node_name(fm, lender), nm);
        struct ntbf_request req;
        ntbf_request_init(&req, NTBF_REQ_BORROW);
        req.device = f->device;
        req.function = f->function;
        req.by = op->from;
        req.dma_window = window;
        req.exclusive = exclusive;
        struct ntbf_plan plan;
        ntbf_plan_init(&plan);
        int r = ntbf_admit(fm->s, &req, &plan);
        if (r) {
                char why[600];
                snprintf(why, sizeof(why), "%s", plan.why);
                ntbf_plan_free(&plan);
                return op_fail(fm, r, "%s", why[0] ? why : ntbf_strerror(r));
        }
        struct fm_alloc *a = calloc(1, sizeof(*a));
        if (!a) {
                ntbf_plan_free(&plan);
                return op_fail(fm, -ENOMEM, "out of memory");
        }
        *a = (struct fm_alloc){.kind = A_BORROW,
                               .fdid = fdid,
                               .node = op->from,
                               .exclusive = exclusive,
                               .kernel = kernel};
        commit_and_program(fm, a, &plan);
        ntbf_plan_free(&plan);
}

/* ---- return, unmap, expiry, unlend --------------------------------------------------------- */

static void released(struct ntbf__fm *fm)
{
        struct json_object *res = fm->cur_res;
        fm->cur_res = NULL;
        if (fm->err)
                LOG_W("clearing after %s: %s (the node reconciles when it can)", fm->cur->m,
                      fm->msg);
        ntbf__entset_free(&fm->delta);
        op_finish(fm, 0, NULL, res ? res : json_object_new_object());
}

/* Whether allocation a depends on device function fdid (borrowed, mapped from or into). */
static bool uses(const struct fm_alloc *a, uint32_t fdid)
{
        return a->fdid == fdid || (a->kind == A_MAP && a->target_fdid == fdid);
}

/*
 * Release a set of allocations (and the mappings hanging off them), tell the borrowers
 * of lost devices, clear what is no longer needed.
 */
static void release_many(struct ntbf__fm *fm,
                         bool (*pick)(struct ntbf__fm *, struct fm_alloc *, void *), void *ctx,
                         const char *lost_reason)
{
        size_t n = 0, cap = 0;
        struct fm_alloc **v = NULL;
        for (struct fm_alloc *a = fm->allocs; a; a = a->next)
                if (pick(fm, a, ctx)) {
                        if (n == cap) {
                                cap = cap ? cap * 2 : 8;
                                v = realloc(v, cap * sizeof(*v));
                        }
                        v[n++] = a;
                }
        /* Mappings of a released borrow go with it (a BAR connection too). */
        for (struct fm_alloc *a = fm->allocs; a; a = a->next) {
                if ((a->kind != A_MAP && a->kind != A_SX_DMAP && a->kind != A_SX_CONNECT) ||
                    !a->parent)
                        continue;
                bool have = false, parent_gone = false;
                for (size_t i = 0; i < n; i++) {
                        have |= v[i] == a;
                        parent_gone |= v[i]->seq == a->parent;
                }
                if (parent_gone && !have) {
                        if (n == cap) {
                                cap = cap ? cap * 2 : 8;
                                v = realloc(v, cap * sizeof(*v));
                        }
                        v[n++] = a;
                }
        }
        for (size_t i = 0; i < n && lost_reason; i++) {
                if (v[i]->kind != A_BORROW)
                        continue;
                struct json_object *ev = json_object_new_object();
                ntbf__jput_u(ev, "fdid", v[i]->fdid);
                ntbf__jput_s(ev, "reason", lost_reason);
                if (connected(fm, v[i]->node))
                        fm->net.notify(fm->net.ctx, v[i]->node, "lost", ev);
                else
                        json_object_put(ev);
        }
        release_into_delta(fm, v, n);
        free(v);
}

struct ret_ctx {
        uint32_t fdid, node;
};

static bool pick_return(struct ntbf__fm *fm, struct fm_alloc *a, void *ctx)
{
        (void)fm;
        struct ret_ctx *c = ctx;
        return a->node == c->node && uses(a, c->fdid);
}

static void op_return(struct ntbf__fm *fm, struct fm_op *op)
{
        uint32_t fdid;
        char nm[96];
        if (get_fdid(op->p, &fdid))
                return op_fail(fm, -EINVAL, "return needs an fdid");
        struct fm_alloc *a = find_borrow(fm, fdid, op->from);
        struct fm_fn *f = fn_of(fm, fdid);
        if (!a || !f)
                return op_fail(fm, NTBF_ENOTFOUND, "0x%04x is not borrowed by '%s'", fdid,
                               node_name(fm, op->from));
        LOG_I("%s returns %s", node_name(fm, op->from), fn_name(fm, f, nm, sizeof(nm)));
        struct ret_ctx c = {fdid, op->from};
        release_many(fm, pick_return, &c, NULL);
        struct json_object *ev = json_object_new_object();
        ntbf__jput_s(ev, "kind", "device.returned");
        ntbf__jput_u(ev, "fdid", fdid);
        ntbf__jput_s(ev, "borrower", node_name(fm, op->from));
        fm->net.notify(fm->net.ctx, fn_node(fm, f), "event", ev);
        round_start(fm, false, released);
}

static void op_unmap(struct ntbf__fm *fm, struct fm_op *op)
{
        uint64_t seq;
        if (!ntbf__jget_u(op->p, "seq", &seq))
                return op_fail(fm, -EINVAL, "unmap needs the mapping's seq");
        struct fm_alloc *a = find_seq(fm, seq);
        if (!a || a->kind != A_MAP || a->node != op->from)
                return op_fail(fm, NTBF_ENOTFOUND, "no mapping %" PRIu64 " of '%s'", seq,
                               node_name(fm, op->from));
        struct fm_alloc *v[1] = {a};
        release_into_delta(fm, v, 1);
        round_start(fm, false, released);
}

struct expire_ctx {
        uint32_t node;
};

static bool pick_expired(struct ntbf__fm *fm, struct fm_alloc *a, void *ctx)
{
        uint32_t n = ((struct expire_ctx *)ctx)->node;
        if (a->node == n)
                return true; /* a borrow or mapping of the silent node */
        if (ntbf__fm_sx_uses_node(fm, a, n))
                return true; /* a connection to one of its segments or interrupts */
        struct fm_fn *f = fn_of(fm, a->fdid),
                     *g = a->kind == A_MAP ? fn_of(fm, a->target_fdid) : NULL;
        return (f && fn_node(fm, f) == n) || (g && fn_node(fm, g) == n);
}

/* A node's lease ran out: it is dead to the fabric until it is heard from again. */
static void op_expire(struct ntbf__fm *fm, struct fm_op *op)
{
        uint32_t n = op->from;
        bool lends = false;
        for (uint32_t i = 0; i < fm->nfn; i++) {
                struct fm_fn *f = &fm->fn[i];
                if (fn_node(fm, f) == n && f->lent && !f->lost) {
                        f->lost = true;
                        lends = true;
                        save_fn(fm, f);
                }
        }
        unsigned borrows = 0, lost = 0;
        for (struct fm_alloc *a = fm->allocs; a; a = a->next) {
                borrows += a->node == n && a->kind == A_BORROW;
                if (a->kind == A_BORROW && a->node != n) {
                        struct fm_fn *f = fn_of(fm, a->fdid);
                        lost += f && fn_node(fm, f) == n;
                }
        }
        LOG_W("lease of '%s' ran out (%u ms without a heartbeat): returning its %u borrow%s, %u "
              "borrowed device%s of it lost%s",
              node_name(fm, n), fm->t->opts.lease_ms, borrows, borrows == 1 ? "" : "s", lost,
              lost == 1 ? "" : "s", lends ? ", its lent devices marked lost" : "");
        char reason[128];
        snprintf(reason, sizeof(reason), "its lender '%s' stopped answering (lease expired)",
                 node_name(fm, n));
        struct expire_ctx c = {n};
        ntbf__fm_sx_expire(fm, n);
        release_many(fm, pick_expired, &c, reason);
        round_start(fm, false, released);
}

struct unlend_ctx {
        uint32_t fdid;
};

static bool pick_unlend(struct ntbf__fm *fm, struct fm_alloc *a, void *ctx)
{
        (void)fm;
        return uses(a, ((struct unlend_ctx *)ctx)->fdid);
}

static void unlent(struct ntbf__fm *fm)
{
        released(fm);
}

static void op_unlend(struct ntbf__fm *fm, struct fm_op *op)
{
        uint32_t fdid;
        bool force = false;
        char nm[96];
        if (get_fdid(op->p, &fdid))
                return op_fail(fm, -EINVAL, "unlend needs an fdid");
        ntbf__jget_b(op->p, "force", &force);
        struct fm_fn *f = fn_of(fm, fdid);
        if (!f || fn_node(fm, f) != op->from)
                return op_fail(fm, NTBF_ENOTFOUND, "0x%04x is not a device of '%s'", fdid,
                               node_name(fm, op->from));
        fn_name(fm, f, nm, sizeof(nm));
        struct fm_alloc *b = find_borrow(fm, fdid, NTBF_NONE);
        if (b && !force)
                return op_fail(fm, NTBF_EBUSY,
                               "%s is borrowed by '%s'; it must be returned first, or unlent with "
                               "force (its borrowers then lose it)",
                               nm, node_name(fm, b->node));
        f->lent = false;
        f->available = true;
        f->lost = false;
        save_fn(fm, f);
        LOG_I("%s unlent%s", nm, b ? " by force" : "");
        struct unlend_ctx c = {fdid};
        release_many(fm, pick_unlend, &c, "its lender took it back");
        round_start(fm, false, unlent);
}

/* ---- mappings for a device's DMA (article 4.4) --------------------------------------------- */

static void op_map(struct ntbf__fm *fm, struct fm_op *op)
{
        const struct ntbf_topo *t = fm->t;
        uint64_t src, tgt, bar;
        if (!ntbf__jget_u(op->p, "src", &src) || !ntbf__jget_u(op->p, "target", &tgt) ||
            !ntbf__jget_u(op->p, "bar", &bar) || src > UINT32_MAX || tgt > UINT32_MAX ||
            bar >= NTBF_MAX_BARS)
                return op_fail(fm, -EINVAL, "map needs src, target and bar");
        uint32_t sd, sf, td, tf;
        if (ntbf__fdid_resolve(t, (uint32_t)src, &sd, &sf) ||
            ntbf__fdid_resolve(t, (uint32_t)tgt, &td, &tf))
                return op_fail(fm, NTBF_ENOTFOUND, "no device has fdid 0x%04x or 0x%04x",
                               (uint32_t)src, (uint32_t)tgt);
        /* The asking node must hold both: its own devices, or ones it borrowed. */
        struct fm_alloc *sb = NULL;
        if (t->devices[sd].node != op->from && !(sb = find_borrow(fm, (uint32_t)src, op->from)))
                return op_fail(fm, -EPERM, "0x%04x is neither a device of '%s' nor borrowed by it",
                               (uint32_t)src, node_name(fm, op->from));
        if (t->devices[td].node != op->from && !find_borrow(fm, (uint32_t)tgt, op->from))
                return op_fail(fm, -EPERM, "0x%04x is neither a device of '%s' nor borrowed by it",
                               (uint32_t)tgt, node_name(fm, op->from));
        uint64_t size = ntbf_device_bar_size(&t->devices[td], tf, (uint32_t)bar);
        if (!size)
                return op_fail(fm, -EINVAL, "device 0x%04x has no BAR%u", (uint32_t)tgt,
                               (unsigned)bar);
        struct ntbf_request req;
        ntbf_request_init(&req, NTBF_REQ_MAP_DEVICE);
        req.requester = (struct ntbf_requester){t->devices[sd].node, sd, sf};
        req.target =
            (struct ntbf_target){NTBF_TARGET_MEM, t->devices[td].node,
                                 ntbf_device_bar_addr(&t->devices[td], tf, (uint32_t)bar), size, 0};
        struct ntbf_plan plan;
        ntbf_plan_init(&plan);
        int r = ntbf_admit(fm->s, &req, &plan);
        if (r) {
                char why[600];
                snprintf(why, sizeof(why), "%s", plan.why);
                ntbf_plan_free(&plan);
                return op_fail(fm, r, "%s", why[0] ? why : ntbf_strerror(r));
        }
        struct fm_alloc *a = calloc(1, sizeof(*a));
        if (!a) {
                ntbf_plan_free(&plan);
                return op_fail(fm, -ENOMEM, "out of memory");
        }
        *a = (struct fm_alloc){.kind = A_MAP,
                               .fdid = (uint32_t)src,
                               .node = op->from,
                               .parent = sb ? sb->seq : 0,
                               .target_fdid = (uint32_t)tgt,
                               .bar = (uint32_t)bar};
        commit_and_program(fm, a, &plan);
        ntbf_plan_free(&plan);
}

static void start_op(struct ntbf__fm *fm, struct fm_op *op)
{
        if (!strcmp(op->m, "borrow"))
                op_borrow(fm, op);
        else if (!strcmp(op->m, "return"))
                op_return(fm, op);
        else if (!strcmp(op->m, "map"))
                op_map(fm, op);
        else if (!strcmp(op->m, "unmap"))
                op_unmap(fm, op);
        else if (!strcmp(op->m, "unlend"))
                op_unlend(fm, op);
        else if (!strcmp(op->m, "expire"))
                op_expire(fm, op);
        else if (ntbf__fm_sx_start(fm, op))
                ;
        else
                op_fail(fm, -ENOSYS, "no such fabric manager request '%s'", op->m);
}

/*
 * A lend's "bars": where the lender's kernel placed a real device's BARs ([{bar, addr,
 * size}]). The manager plans with the cluster file's sizes and programs these addresses
 * (ntbf_state_set_bars); a device of the model has none. Nothing changes on a refusal.
 */
static int lend_bars(struct ntbf__fm *fm, struct fm_fn *f, struct json_object *p, char *why,
                     size_t whylen)
{
        const struct ntbf_device *d = &fm->t->devices[f->device];
        struct json_object *bars = NULL;
        bool has = json_object_object_get_ex(p, "bars", &bars);
        char nm[96], w[32], h[32];
        fn_name(fm, f, nm, sizeof(nm));
        if (!ntbf__bars_host_placed(fm->t, f->device)) {
                if (!has)
                        return 0;
                snprintf(why, whylen,
                         "%s is a device of the model (not vfio: true, and backend %s does not "
                         "reach its hosts' devices): its BARs are where the cluster file places "
                         "them, not the lender's to say",
                         nm, fm->t->backend);
                return -EINVAL;
        }
        if (!has || !json_object_is_type(bars, json_type_array)) {
                snprintf(why, whylen,
                         "the lend of %s does not say where the kernel placed its BARs, which the "
                         "manager programs for a real device; run the same ntbfabd version on "
                         "'%s'",
                         nm, node_name(fm, d->node));
                return -EINVAL;
        }
        uint64_t addr[NTBF_MAX_BARS] = {0};
        for (size_t k = 0; k < json_object_array_length(bars); k++) {
                struct json_object *e = json_object_array_get_idx(bars, k);
                uint64_t b, a, size;
                if (!ntbf__jget_u(e, "bar", &b) || !ntbf__jget_u(e, "addr", &a) ||
                    !ntbf__jget_u(e, "size", &size) || b >= NTBF_MAX_BARS || !a || addr[b]) {
                        snprintf(why, whylen,
                                 "the lend of %s names its BARs wrongly (entry %zu: needs bar "
                                 "0-5 once, addr and size)",
                                 nm, k);
                        return -EINVAL;
                }
                uint64_t want = ntbf_device_bar_size(d, f->function, (uint32_t)b);
                if (size != want) {
                        ntbf_size_fmt(want, w, sizeof(w));
                        ntbf_size_fmt(size, h, sizeof(h));
                        snprintf(why, whylen,
                                 "BAR%u of %s is %s on the hardware but %s in the cluster file; "
                                 "make the device's bars the hardware's",
                                 (unsigned)b, nm, h, want ? w : "absent");
                        return NTBF_ECONFIG;
                }
                addr[b] = a;
        }
        for (uint32_t b = 0; b < NTBF_MAX_BARS; b++) {
                uint64_t want = ntbf_device_bar_size(d, f->function, b);
                if (want && !addr[b]) {
                        ntbf_size_fmt(want, w, sizeof(w));
                        snprintf(why, whylen,
                                 "the lend of %s names no address for BAR%u (%s in the cluster "
                                 "file); make the device's bars the hardware's",
                                 nm, b, w);
                        return NTBF_ECONFIG;
                }
        }
        for (uint32_t b = 0; b < NTBF_MAX_BARS; b++) {
                uint64_t was = ntbf_state_bar_addr(fm->s, f->device, f->function, b);
                if (!ntbf_device_bar_size(d, f->function, b) || !f->hw[b] || was == addr[b])
                        continue;
                for (struct fm_alloc *a = fm->allocs; a; a = a->next)
                        if (a->fdid == f->fdid || a->target_fdid == f->fdid) {
                                snprintf(why, whylen,
                                         "BAR%u of %s moved from 0x%" PRIx64 " to 0x%" PRIx64
                                         " while borrowed or mapped; return and unmap it first "
                                         "(ntbfab status lists who holds it)",
                                         b, nm, was, addr[b]);
                                return NTBF_EBUSY;
                        }
        }
        int r = ntbf_state_set_bars(fm->s, f->device, f->function, addr, why, whylen);
        if (r)
                return r;
        if (memcmp(f->hw, addr, sizeof(addr))) {
                memcpy(f->hw, addr, sizeof(addr));
                for (uint32_t b = 0; b < NTBF_MAX_BARS; b++)
                        if (addr[b])
                                LOG_I("%s: BAR%u is at 0x%" PRIx64 " on its host", nm, b, addr[b]);
        }
        return 0;
}

/* ---- immediate requests -------------------------------------------------------------------- */

static void do_register(struct ntbf__fm *fm, uint32_t from, struct json_object *p, ntbf__done_fn cb,
                        void *arg)
{
        struct json_object *lends;
        if (!json_object_object_get_ex(p, "lends", &lends) ||
            !json_object_is_type(lends, json_type_array))
                return fail(cb, arg, -EINVAL, "register needs a list of lends");
        size_t n = json_object_array_length(lends);
        for (uint32_t i = 0; i < fm->nfn; i++) {
                struct fm_fn *f = &fm->fn[i];
                if (fn_node(fm, f) != from)
                        continue;
                bool listed = false, avail = true;
                for (size_t k = 0; k < n; k++) {
                        struct json_object *l = json_object_array_get_idx(lends, k);
                        uint64_t fd;
                        char why[512];
                        if (!ntbf__jget_u(l, "fdid", &fd) || fd != f->fdid)
                                continue;
                        if (lend_bars(fm, f, l, why, sizeof(why))) {
                                /* Not lent until a lend says where its BARs are. */
                                LOG_E("node '%s' lends 0x%04x: %s", node_name(fm, from), f->fdid,
                                      why);
                                continue;
                        }
                        listed = true;
                        ntbf__jget_b(l, "available", &avail);
                }
                bool borrowed = find_borrow(fm, f->fdid, NTBF_NONE) != NULL;
                bool lent = listed || borrowed;
                if (f->lent != lent || f->lost || (listed && f->available != avail)) {
                        f->lent = lent;
                        f->lost = false;
                        if (listed)
                                f->available = avail;
                        save_fn(fm, f);
                }
        }
        fm->nodes[from].epoch++; /* before what the registration itself queues */
        ntbf__fm_sx_register(fm, from, p);
        fm->nodes[from].registered = true;
        fm->nodes[from].expired = false;
        fm->nodes[from].last_seen = now(fm);
        LOG_I("node '%s' registered (%zu lent device function%s)", node_name(fm, from), n,
              n == 1 ? "" : "s");
        cb(arg, 0, NULL, json_object_new_object());
}

static void do_sync(struct ntbf__fm *fm, uint32_t from, ntbf__done_fn cb, void *arg)
{
        struct json_object *o = json_object_new_object(), *e = json_object_new_array(),
                           *b = json_object_new_array(), *m = json_object_new_array();
        for (size_t i = 0; i < fm->want.keys.n; i++) {
                struct ntbf__ent x;
                if (!ntbf__ent_parse(fm->t, fm->want.keys.v[i], &x) && x.prog == from)
                        json_object_array_add(e, json_object_new_string(fm->want.keys.v[i]));
        }
        for (struct fm_alloc *a = fm->allocs; a; a = a->next) {
                if (a->node != from || !a->active || a->kind >= A_SX_CONNECT)
                        continue;
                json_object_array_add(a->kind == A_BORROW ? b : m,
                                      a->kind == A_BORROW ? borrow_json(fm, a) : map_json(fm, a));
        }
        json_object_object_add(o, "entries", e);
        json_object_object_add(o, "borrows", b);
        json_object_object_add(o, "maps", m);
        /* Who borrows this node's devices: the lender checks config requests against it. */
        struct json_object *lent = json_object_new_array();
        for (uint32_t i = 0; i < fm->nfn; i++) {
                struct fm_fn *f = &fm->fn[i];
                if (fn_node(fm, f) != from)
                        continue;
                struct json_object *who = NULL;
                for (struct fm_alloc *a = fm->allocs; a; a = a->next) {
                        if (a->kind != A_BORROW || a->fdid != f->fdid)
                                continue;
                        if (!who)
                                who = json_object_new_array();
                        json_object_array_add(who, json_object_new_string(node_name(fm, a->node)));
                }
                if (!who)
                        continue;
                struct json_object *e2 = json_object_new_object();
                ntbf__jput_u(e2, "fdid", f->fdid);
                json_object_object_add(e2, "borrowers", who);
                json_object_array_add(lent, e2);
        }
        json_object_object_add(o, "lent_out", lent);
        cb(arg, 0, NULL, o);
}

static void do_lend(struct ntbf__fm *fm, uint32_t from, struct json_object *p, bool avail_only,
                    ntbf__done_fn cb, void *arg)
{
        uint32_t fdid;
        bool avail = true;
        if (get_fdid(p, &fdid))
                return fail(cb, arg, -EINVAL, "needs an fdid");
        ntbf__jget_b(p, "available", &avail);
        struct fm_fn *f = fn_of(fm, fdid);
        if (!f || fn_node(fm, f) != from)
                return fail(cb, arg, NTBF_ENOTFOUND, "0x%04x is not a device of '%s'", fdid,
                            node_name(fm, from));
        const struct ntbf_device *d = &fm->t->devices[f->device];
        if (!d->bars[0].size && !d->bars[2].size && !d->bars[4].size && !d->bars[1].size &&
            !d->bars[3].size && !d->bars[5].size && !d->vfs)
                return fail(cb, arg, -EINVAL, "%s has no BAR: nothing to lend", d->name);
        if (avail_only && !f->lent)
                return fail(cb, arg, NTBF_ENOTFOUND, "0x%04x is not lent; lend it first", fdid);
        char why[512];
        int r = avail_only ? 0 : lend_bars(fm, f, p, why, sizeof(why));
        if (r)
                return fail(cb, arg, r, "%s", why);
        f->lent = true;
        f->available = avail;
        f->lost = false;
        save_fn(fm, f);
        char nm[96];
        LOG_I("%s %s", fn_name(fm, f, nm, sizeof(nm)),
              avail_only ? (avail ? "is available" : "is unavailable")
                         : (avail ? "lent" : "lent, unavailable"));
        cb(arg, 0, NULL, device_json(fm, f));
}

static bool match_u(struct json_object *p, const char *k, uint64_t v)
{
        uint64_t want;
        return !ntbf__jget_u(p, k, &want) || want == v;
}

static void do_list(struct ntbf__fm *fm, struct json_object *p, ntbf__done_fn cb, void *arg)
{
        struct json_object *a = json_object_new_array();
        const char *node = NULL, *state = NULL;
        ntbf__jget_s(p, "node", &node);
        ntbf__jget_s(p, "state", &state);
        for (uint32_t i = 0; i < fm->nfn; i++) {
                struct fm_fn *f = &fm->fn[i];
                const struct ntbf_device *d = &fm->t->devices[f->device];
                if (!f->lent && !f->lost)
                        continue;
                if (!match_u(p, "class", d->class_code) || !match_u(p, "vendor", d->vendor_id) ||
                    !match_u(p, "device", d->device_id) ||
                    (node && strcmp(node, node_name(fm, d->node))) ||
                    (state && strcmp(state, fn_state(fm, f))))
                        continue;
                json_object_array_add(a, device_json(fm, f));
        }
        cb(arg, 0, NULL, a);
}

static void do_status(struct ntbf__fm *fm, ntbf__done_fn cb, void *arg)
{
        const struct ntbf_topo *t = fm->t;
        struct json_object *o = json_object_new_object(), *nodes = json_object_new_array(),
                           *links = json_object_new_array(), *budgets = json_object_new_array(),
                           *borrows = json_object_new_array(), *maps = json_object_new_array();
        ntbf__jput_s(o, "cluster", t->name);
        ntbf__jput_s(o, "manager", node_name(fm, fm->self));
        ntbf__jput_u(o, "lease_ms", t->opts.lease_ms);
        uint64_t tnow = now(fm);
        for (uint32_t n = 0; n < t->nnodes; n++) {
                struct json_object *j = json_object_new_object();
                ntbf__jput_s(j, "node", t->nodes[n].name);
                ntbf__jput_u(j, "id", t->nodes[n].id);
                ntbf__jput_b(j, "up", connected(fm, n));
                ntbf__jput_b(j, "lease_expired", fm->nodes[n].expired);
                ntbf__jput_u(j, "last_heartbeat_ms",
                             n == fm->self ? 0 : tnow - fm->nodes[n].last_seen);
                json_object_array_add(nodes, j);
        }
        for (uint32_t l = 0; l < t->nlinks; l++) {
                const struct ntbf_link *lk = &t->links[l];
                char a[96], b[96];
                struct json_object *j = json_object_new_object(), *ends = json_object_new_array();
                json_object_array_add(
                    ends, json_object_new_string(ntbf_port_name(t, lk->end[0], a, sizeof(a))));
                json_object_array_add(
                    ends, json_object_new_string(ntbf_port_name(t, lk->end[1], b, sizeof(b))));
                json_object_object_add(j, "ends", ends);
                /* Up as its adapters' owners last reported (switch-to-switch: unknown). */
                int up = -1;
                for (int e = 0; e < 2; e++) {
                        const struct ntbf_port_ref *pr = &lk->end[e];
                        if (pr->kind != NTBF_PORT_ADAPTER)
                                continue;
                        uint32_t n = t->adapters[pr->obj].node;
                        bool *pu = fm->nodes[n].port_up;
                        if (!pu || !fm->nodes[n].ports_known || !connected(fm, n))
                                continue;
                        uint32_t k = 0;
                        for (uint32_t i = 0; i < t->nodes[n].nadapters; i++) {
                                uint32_t ai = t->nodes[n].adapters[i];
                                if (ai == pr->obj) {
                                        k += pr->port;
                                        break;
                                }
                                k += t->adapters[ai].p.ports;
                        }
                        up = up == 0 ? 0 : pu[k];
                }
                json_object_object_add(j, "up", up < 0 ? NULL : json_object_new_boolean(up));
                json_object_array_add(links, j);
        }
        size_t nr = ntbf_budget_rows(fm->s, NULL, 0);
        struct ntbf_budget_row *rows = calloc(nr + 1, sizeof(*rows));
        ntbf_budget_rows(fm->s, rows, nr);
        for (size_t i = 0; rows && i < nr; i++) {
                const struct ntbf_budget_row *r = &rows[i];
                bool sw = r->kind == NTBF_BUDGET_SWITCH_RID || r->kind == NTBF_BUDGET_MCAST;
                bool nd = r->kind == NTBF_BUDGET_RANGE;
                char obj[96];
                if (sw)
                        snprintf(obj, sizeof(obj), "%s", t->switches[r->obj].name);
                else if (nd)
                        snprintf(obj, sizeof(obj), "%s", t->nodes[r->obj].name);
                else
                        snprintf(obj, sizeof(obj), "%s.%s", t->nodes[t->adapters[r->obj].node].name,
                                 t->adapters[r->obj].name);
                struct json_object *j = json_object_new_object();
                ntbf__jput_s(j, "object", obj);
                ntbf__jput_s(j, "kind", sw ? "switch" : nd ? "node" : "adapter");
                ntbf__jput_s(j, "budget", ntbf_budget_kind_name(r->kind));
                ntbf__jput_u(j, "used", r->used);
                ntbf__jput_u(j, "total", r->total);
                ntbf__jput_u(j, "baseline", r->baseline);
                ntbf__jput_u(j, "free", r->total > r->used ? r->total - r->used : 0);
                json_object_array_add(budgets, j);
        }
        free(rows);
        json_object_object_add(o, "nodes", nodes);
        json_object_object_add(o, "links", links);
        json_object_object_add(o, "budgets", budgets);
        struct json_object *devs = json_object_new_array();
        for (uint32_t i = 0; i < fm->nfn; i++)
                if (fm->fn[i].lent || fm->fn[i].lost)
                        json_object_array_add(devs, device_json(fm, &fm->fn[i]));
        json_object_object_add(o, "devices", devs);
        for (struct fm_alloc *a = fm->allocs; a; a = a->next) {
                if (!a->active || a->kind >= A_SX_CONNECT)
                        continue;
                if (a->kind == A_BORROW)
                        json_object_array_add(borrows, borrow_json(fm, a));
                else
                        json_object_array_add(maps, map_json(fm, a));
        }
        json_object_object_add(o, "borrows", borrows);
        json_object_object_add(o, "maps", maps);
        ntbf__jput_u(o, "allocations", ntbf_state_allocs(fm->s, NULL, 0));
        cb(arg, 0, NULL, o);
}

void ntbf__fm_request(struct ntbf__fm *fm, uint32_t from, const char *m, struct json_object *p,
                      ntbf__done_fn cb, void *arg)
{
        if (from >= fm->t->nnodes)
                return fail(cb, arg, -EINVAL, "request from an unknown node");
        fm->nodes[from].last_seen = now(fm);
        if (!strcmp(m, "register"))
                return do_register(fm, from, p, cb, arg);
        if (!strcmp(m, "sync"))
                return do_sync(fm, from, cb, arg);
        if (!strcmp(m, "lend"))
                return do_lend(fm, from, p, false, cb, arg);
        if (!strcmp(m, "avail"))
                return do_lend(fm, from, p, true, cb, arg);
        if (!strcmp(m, "list"))
                return do_list(fm, p, cb, arg);
        if (!strcmp(m, "status"))
                return do_status(fm, cb, arg);
        if (!strcmp(m, "borrow") || !strcmp(m, "return") || !strcmp(m, "map") ||
            !strcmp(m, "unmap") || !strcmp(m, "unlend"))
                return enqueue(fm, from, m, p, cb, arg);
        if (ntbf__fm_sx_request(fm, from, m, p, cb, arg))
                return;
        fail(cb, arg, -ENOSYS, "no such fabric manager request '%s'", m);
}

/* ---- leases -------------------------------------------------------------------------------- */

void ntbf__fm_seen(struct ntbf__fm *fm, uint32_t node, struct json_object *hb)
{
        if (node >= fm->t->nnodes)
                return;
        struct fm_node *n = &fm->nodes[node];
        n->last_seen = now(fm);
        if (n->expired)
                LOG_I("node '%s' is back", node_name(fm, node));
        n->expired = false;
        struct json_object *ports;
        if (!hb || !json_object_object_get_ex(hb, "ports", &ports) ||
            !json_object_is_type(ports, json_type_array) || !n->port_up)
                return;
        uint32_t k = 0, total = 0;
        for (uint32_t i = 0; i < fm->t->nodes[node].nadapters; i++)
                total += fm->t->adapters[fm->t->nodes[node].adapters[i]].p.ports;
        for (size_t i = 0; i < json_object_array_length(ports) && k < total; i++, k++)
                n->port_up[k] = json_object_get_boolean(json_object_array_get_idx(ports, i));
        n->ports_known = true;
}

static void ignore(void *arg, int err, const char *msg, struct json_object *res)
{
        (void)arg;
        (void)err;
        (void)msg;
        json_object_put(res);
}

void ntbf__fm_tick(struct ntbf__fm *fm)
{
        /* What arrived while this daemon was busy is not silence: measure up to what it read. */
        uint64_t t = heard(fm);
        for (uint32_t n = 0; n < fm->t->nnodes; n++) {
                struct fm_node *x = &fm->nodes[n];
                if (n == fm->self || x->expired || t <= x->last_seen ||
                    t - x->last_seen <= fm->t->opts.lease_ms)
                        continue;
                bool involved = false;
                for (struct fm_alloc *a = fm->allocs; a && !involved; a = a->next)
                        involved = pick_expired(fm, a, &(struct expire_ctx){n});
                for (uint32_t i = 0; i < fm->nfn && !involved; i++)
                        involved =
                            fn_node(fm, &fm->fn[i]) == n && fm->fn[i].lent && !fm->fn[i].lost;
                x->expired = true;
                if (involved)
                        enqueue(fm, n, "expire", NULL, ignore, NULL);
        }
}

unsigned ntbf__fm_busy(const struct ntbf__fm *fm)
{
        return fm->queued;
}

const struct ntbf_state *ntbf__fm_state(const struct ntbf__fm *fm)
{
        return fm->s;
}

/* ---- loading ------------------------------------------------------------------------------- */

static int load_fn(void *arg, const char *key, const char *json)
{
        struct ntbf__fm *fm = arg;
        uint64_t fdid;
        if (ntbf_uint_parse(key, &fdid))
                return 0;
        struct fm_fn *f = fn_of(fm, (uint32_t)fdid);
        struct json_object *o = json_tokener_parse(json);
        if (f && o) {
                ntbf__jget_b(o, "lent", &f->lent);
                ntbf__jget_b(o, "available", &f->available);
                ntbf__jget_b(o, "lost", &f->lost);
                struct json_object *hw;
                uint64_t addr[NTBF_MAX_BARS] = {0};
                char why[256];
                if (json_object_object_get_ex(o, "hw_bars", &hw) &&
                    json_object_is_type(hw, json_type_array) &&
                    json_object_array_length(hw) == NTBF_MAX_BARS) {
                        for (uint32_t b = 0; b < NTBF_MAX_BARS; b++)
                                addr[b] = json_object_get_uint64(json_object_array_get_idx(hw, b));
                        if (ntbf_state_set_bars(fm->s, f->device, f->function, addr, why,
                                                sizeof(why)))
                                LOG_W("device 0x%04x: the recorded hardware BARs no longer fit "
                                      "the cluster file (%s); its next lend says where they are",
                                      f->fdid, why);
                        else
                                memcpy(f->hw, addr, sizeof(addr));
                }
        }
        json_object_put(o);
        return 0;
}

struct load_ctx {
        struct ntbf__fm *fm;
        char (*drop)[24];
        size_t ndrop, cap;
};

static int load_alloc(void *arg, const char *key, const char *json)
{
        struct load_ctx *lc = arg;
        struct ntbf__fm *fm = lc->fm;
        uint64_t seq;
        struct json_object *o = json_tokener_parse(json), *pj;
        struct fm_alloc *a = calloc(1, sizeof(*a));
        struct ntbf_plan plan;
        ntbf_plan_init(&plan);
        const char *kind = "", *node = "";
        uint64_t fdid = 0, parent = 0, tf = 0, bar = 0;
        bool ok = a && o && !ntbf_uint_parse(key, &seq) && ntbf__jget_s(o, "kind", &kind) &&
                  ntbf__jget_u(o, "fdid", &fdid) && ntbf__jget_s(o, "node", &node) &&
                  ntbf__jget_b(o, "active", &a->active) &&
                  json_object_object_get_ex(o, "plan", &pj) &&
                  !ntbf__plan_from_json(fm->t, pj, &plan);
        if (ok) {
                ntbf__jget_b(o, "exclusive", &a->exclusive);
                const char *fe = "api";
                ntbf__jget_s(o, "frontend", &fe);
                a->kernel = !strcmp(fe, "kernel");
                ntbf__jget_u(o, "parent", &parent);
                ntbf__jget_u(o, "target_fdid", &tf);
                ntbf__jget_u(o, "bar", &bar);
                a->seq = seq;
                a->kind = !strcmp(kind, "map") ? A_MAP : A_BORROW;
                if (ntbf__fm_sx_kind(kind, &a->kind))
                        ntbf__fm_sx_load(a, o);
                a->fdid = (uint32_t)fdid;
                a->node = ntbf_topo_find_node(fm->t, node);
                a->parent = parent;
                a->target_fdid = (uint32_t)tf;
                a->bar = (uint32_t)bar;
                ok = a->node != NTBF_NONE && fn_of(fm, a->fdid);
        }
        if (ok && !a->active) {
                LOG_W("allocation %s was being programmed when the manager stopped; dropping it "
                      "(nodes clear what they programmed when they reconcile)",
                      key);
                ok = false;
        } else if (ok) {
                int r = ntbf__plan_replay(fm->s, &plan, &a->sid);
                if (r) {
                        LOG_E("allocation %s no longer applies to the budget state (%s); dropping "
                              "it",
                              key, ntbf_strerror(r));
                        ok = false;
                }
        } else {
                LOG_E("allocation %s in the database is unreadable; dropping it", key);
        }
        if (ok) {
                link_alloc(fm, a);
                struct wchange w = {0};
                want_hold(fm, &w, a, true);
                ntbf__entcount_free(&w.was);
                ntbf__entcount_free(&w.wasnt);
                if (seq >= fm->next_seq)
                        fm->next_seq = seq + 1;
        } else {
                free(a);
                if (lc->ndrop == lc->cap) {
                        lc->cap = lc->cap ? 2 * lc->cap : 8;
                        lc->drop = realloc(lc->drop, lc->cap * sizeof(*lc->drop));
                }
                snprintf(lc->drop[lc->ndrop++], 24, "%s", key);
        }
        ntbf_plan_free(&plan);
        json_object_put(o);
        return 0;
}

int ntbf__fm_new(const struct ntbf_topo *t, uint32_t self, struct ntbf__store *st,
                 const struct ntbf__fm_net *net, struct ntbf__fm **out, char *why, size_t whylen)
{
        struct ntbf__fm *fm = calloc(1, sizeof(*fm));
        if (!fm)
                return -ENOMEM;
        fm->t = t;
        fm->self = self;
        fm->st = st;
        fm->net = *net;
        fm->next_seq = 1;
        if (ntbf__fm_sx_new(fm)) {
                free(fm);
                return -ENOMEM;
        }
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        int r = ntbf_state_new(t, &fm->s, &d);
        ntbf_diags_free(&d);
        if (r) {
                snprintf(why, whylen, "the cluster's baseline does not fit its budgets");
                free(fm);
                return r;
        }
        for (uint32_t i = 0; i < t->ndevices; i++)
                fm->nfn += ntbf_device_nfuncs(&t->devices[i]);
        fm->fn = calloc(fm->nfn + 1, sizeof(*fm->fn));
        fm->nodes = calloc(t->nnodes, sizeof(*fm->nodes));
        if (!fm->fn || !fm->nodes) {
                ntbf__fm_free(fm);
                return -ENOMEM;
        }
        uint32_t k = 0;
        for (uint32_t i = 0; i < t->ndevices; i++)
                for (uint32_t f = 0; f < ntbf_device_nfuncs(&t->devices[i]); f++, k++)
                        fm->fn[k] =
                            (struct fm_fn){i, f, ntbf__fdid_of(t, i, f), false, true, false};
        uint64_t tnow = now(fm);
        for (uint32_t n = 0; n < t->nnodes; n++) {
                uint32_t ports = 0;
                for (uint32_t i = 0; i < t->nodes[n].nadapters; i++)
                        ports += t->adapters[t->nodes[n].adapters[i]].p.ports;
                fm->nodes[n].port_up = calloc(ports + 1, sizeof(bool));
                /* A fresh full term for everyone (docs/daemon.md: the FM restarts). */
                fm->nodes[n].last_seen = tnow;
        }
        const char *check = getenv("NTBFAB_FM_CHECK");
        fm->check = check && !strcmp(check, "1");
        struct ntbf__entset base = {0};
        r = ntbf__base_ents(fm->s, &base);
        for (size_t i = 0; i < base.n && !r; i++)
                r = ntbf__entcount_step(&fm->want, base.v[i], true);
        ntbf__entset_free(&base);
        if (r) {
                ntbf__fm_free(fm);
                return -ENOMEM;
        }
        struct load_ctx lc = {fm, NULL, 0, 0};
        if (ntbf__store_each(st, NTBF_T_FM_DEVICES, load_fn, fm) ||
            ntbf__store_each(st, NTBF_T_FM_ALLOCS, load_alloc, &lc) || ntbf__fm_sx_restore(fm)) {
                snprintf(why, whylen, "cannot read the fabric manager's tables: %s",
                         ntbf__store_error(st));
                free(lc.drop);
                ntbf__fm_free(fm);
                return -EIO;
        }
        for (size_t i = 0; i < lc.ndrop; i++) {
                uint64_t seq = 0;
                ntbf_uint_parse(lc.drop[i], &seq);
                ntbf__store_del(st, NTBF_T_FM_ALLOCS, lc.drop[i]);
                ntbf__store_res_del(st, seq);
        }
        free(lc.drop);
        /* Multicast entries are numbered among all the groups restored: settle them now. */
        struct wchange w = {0};
        want_follow(fm, &w);
        ntbf__entcount_free(&w.was);
        ntbf__entcount_free(&w.wasnt);
        want_check(fm, "loading");
        unsigned nb = 0, nm = 0;
        for (struct fm_alloc *a = fm->allocs; a; a = a->next) {
                nb += a->kind == A_BORROW;
                nm += a->kind == A_MAP;
        }
        if (nb || nm)
                LOG_I("fabric manager: %u borrow%s and %u mapping%s restored from the database", nb,
                      nb == 1 ? "" : "s", nm, nm == 1 ? "" : "s");
        *out = fm;
        return 0;
}

void ntbf__fm_free(struct ntbf__fm *fm)
{
        if (!fm)
                return;
        while (fm->allocs) {
                struct fm_alloc *a = fm->allocs;
                fm->allocs = a->next;
                ntbf__entset_free(&a->ents);
                free(a);
        }
        ntbf__entcount_free(&fm->want);
        while (fm->qhead) {
                struct fm_op *op = fm->qhead;
                fm->qhead = op->next;
                op->cb(op->arg, -ECANCELED, "the fabric manager is stopping", NULL);
                json_object_put(op->p);
                free(op);
        }
        if (fm->cur) {
                /* An answer in flight will never come: its caller is told now. */
                fm->cur->cb(fm->cur->arg, -ECANCELED, "the fabric manager is stopping", NULL);
                json_object_put(fm->cur->p);
                free(fm->cur);
        }
        for (uint32_t n = 0; fm->nodes && n < fm->t->nnodes; n++)
                free(fm->nodes[n].port_up);
        free(fm->nodes);
        free(fm->fn);
        ntbf__entset_free(&fm->delta);
        json_object_put(fm->cur_res);
        /* fm->cur_alloc, being programmed, is linked already: freed with the others. */
        ntbf_state_free(fm->s);
        ntbf__fm_sx_free(fm);
        free(fm);
}

/* ---- for fm_sisci.c (fm_int.h) ------------------------------------------------------------- */

void ntbf__fm_finish(struct ntbf__fm *fm, int err, const char *msg, struct json_object *res)
{
        op_finish(fm, err, msg, res);
}

void ntbf__fm_commit(struct ntbf__fm *fm, struct fm_alloc *a, struct ntbf_plan *plan)
{
        commit_and_program(fm, a, plan);
}

void ntbf__fm_release(struct ntbf__fm *fm, struct fm_alloc **v, size_t n, struct json_object *res)
{
        release_into_delta(fm, v, n);
        json_object_put(fm->cur_res);
        fm->cur_res = res;
        round_start(fm, false, released);
}

void ntbf__fm_enqueue(struct ntbf__fm *fm, uint32_t from, const char *m, struct json_object *p,
                      ntbf__done_fn cb, void *arg)
{
        enqueue(fm, from, m, p, cb, arg);
}

struct fm_fn *ntbf__fm_fn(struct ntbf__fm *fm, uint32_t fdid)
{
        return fn_of(fm, fdid);
}

uint32_t ntbf__fm_fn_node(const struct ntbf__fm *fm, const struct fm_fn *f)
{
        return fn_node(fm, f);
}

const char *ntbf__fm_node_name(const struct ntbf__fm *fm, uint32_t n)
{
        return node_name(fm, n);
}

bool ntbf__fm_connected(struct ntbf__fm *fm, uint32_t node)
{
        return connected(fm, node);
}

void ntbf__fm_save_fn(struct ntbf__fm *fm, const struct fm_fn *f)
{
        save_fn(fm, f);
}

struct fm_alloc *ntbf__fm_find_borrow(struct ntbf__fm *fm, uint32_t fdid, uint32_t node)
{
        return find_borrow(fm, fdid, node);
}

int ntbf__fm_save_alloc(struct ntbf__fm *fm, const struct fm_alloc *a)
{
        return save_alloc(fm, a);
}

const char *ntbf__fm_store_error(const struct ntbf__fm *fm)
{
        return ntbf__store_error(fm->st);
}
