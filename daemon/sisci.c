/* daemon/sisci.c: the node daemon's SISCI side: client sessions, the sisci.* methods (docs/rpc.md).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon.h"
#include "log.h"
#include "ntbfab/error.h"
#include "ntbfab/units.h"
#include "sisci.h"

/*
 * A libsisci process opens a session on its control connection (sisci.session) and listens
 * to its events on a second one (sisci.listen). Everything the session creates belongs to
 * it: its segments and interrupts (exported through the fabric manager), its connections,
 * device mappings, DMA channels and device borrows. When the control connection closes (the
 * process called SCITerminate, or died), the session ends: the node drops what it recorded
 * and the manager releases the session's allocations and exports, telling every other
 * session that used them (docs/sisci.md, "Semantics under failure").
 */

struct sx_sess {
        struct sx_sess *next;
        uint64_t id;
        struct ntbf__rpc_conn *conn, *listener;
        pid_t pid;
};

struct sx_seg {
        struct sx_seg *next;
        uint64_t session;
        uint32_t id;
        uint64_t size, addr;
        bool has_mem, priv, broadcast;
        uint64_t available; /* adapter numbers (bit n) */
};

struct sx_int {
        struct sx_int *next;
        uint64_t session;
        uint32_t intno;
        bool data;
        uint32_t msi_data;
        uint64_t msi_addr, mbox_addr, mbox_size;
        uint32_t lanes;
};

struct sx_chan {
        struct sx_chan *next;
        uint64_t session;
        uint32_t adapter, chan;
};

/* A SISCI borrow of a device by a session (SCIBorrowDevice). */
struct sx_holder {
        struct sx_holder *next;
        uint64_t id, session;
        uint32_t fdid;
        bool exclusive, local;
};

/* Device segments created by this node's sessions (removed when the creator returns). */
struct sx_devseg {
        struct sx_devseg *next;
        uint64_t session, holder;
        uint32_t fdid, id, memtype;
};

/* Memory this node holds for device segments placed here by the manager. */
struct sx_mem {
        struct sx_mem *next;
        struct ntbf_mem m;
};

struct ntbf__sx {
        struct sx_sess *sessions;
        struct sx_seg *segs;
        struct sx_int *ints;
        struct sx_chan *chans;
        struct sx_holder *holders;
        struct sx_devseg *devsegs;
        struct sx_mem *mems;
        uint32_t *sisci_borrows; /* fdids this node borrowed for SISCI sessions */
        size_t nsb, capsb;
        uint64_t next_id;
};

const char *const ntbf__sx_places[] = {"hints", "device", "host", NULL};

/* Automatic segment and interrupt numbers (SCI_FLAG_AUTO_ID, no SCI_FLAG_FIXED_INTNO); private
 * segments are numbered by the daemon (their SISCI id is the process's own business). */
#define SX_AUTO_SEG_ID 0x80000000u
#define SX_PRIV_SEG_ID 0xc0000000u
#define SX_AUTO_INTNO  0x1000u

int ntbf__sx_new(struct ntbf__d *d)
{
        d->sx = calloc(1, sizeof(*d->sx));
        if (!d->sx)
                return -ENOMEM;
        /* Session and holder ids never repeat across restarts of the daemon. */
        d->sx->next_id = (uint64_t)time(NULL) << 20;
        return 0;
}

#define FREE_LIST(type, head)                                                                      \
        while (head) {                                                                             \
                type *x_ = head;                                                                   \
                head = x_->next;                                                                   \
                free(x_);                                                                          \
        }

void ntbf__sx_free(struct ntbf__d *d)
{
        struct ntbf__sx *s = d->sx;
        if (!s)
                return;
        FREE_LIST(struct sx_sess, s->sessions);
        FREE_LIST(struct sx_seg, s->segs);
        FREE_LIST(struct sx_int, s->ints);
        FREE_LIST(struct sx_chan, s->chans);
        FREE_LIST(struct sx_holder, s->holders);
        FREE_LIST(struct sx_devseg, s->devsegs);
        while (s->mems) {
                struct sx_mem *m = s->mems;
                s->mems = m->next;
                struct ntbf_adapter_h *h = d->h ? ntbf__hw_any(d, NTBF_CAP_MEM) : NULL;
                if (h)
                        d->ops->mem_free(h, &m->m);
                free(m);
        }
        free(s->sisci_borrows);
        free(s);
        d->sx = NULL;
}

/* ---- helpers ------------------------------------------------------------------------------- */

static void failf(struct ntbf__rpc_call *call, int err, const char *fmt, ...) NTBF_PRINTF(3, 4);
static void failf(struct ntbf__rpc_call *call, int err, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        ntbf__rpc_fail(call, NTBF_RPC_FAILED, err, "%s", msg);
}

static uint64_t u(struct json_object *p, const char *k, uint64_t dflt)
{
        uint64_t v;
        return ntbf__jget_u(p, k, &v) ? v : dflt;
}

static bool b(struct json_object *p, const char *k)
{
        bool v = false;
        ntbf__jget_b(p, k, &v);
        return v;
}

static struct sx_sess *sess_by_id(struct ntbf__sx *s, uint64_t id)
{
        for (struct sx_sess *x = s->sessions; x; x = x->next)
                if (x->id == id)
                        return x;
        return NULL;
}

/* The session of the connection a call came on; answers the call when there is none. */
static struct sx_sess *session_of(struct ntbf__d *d, struct ntbf__rpc_call *call)
{
        struct ntbf__rpc_conn *c = ntbf__rpc_call_conn(call);
        for (struct sx_sess *x = d->sx->sessions; x; x = x->next)
                if (x->conn == c && c)
                        return x;
        failf(call, -EINVAL, "no SISCI session on this connection; call sisci.session first");
        return NULL;
}

static bool fm_ok(struct ntbf__d *d, struct ntbf__rpc_call *call)
{
        if (d->stopping) {
                failf(call, -ESHUTDOWN, "the daemon of '%s' is stopping",
                      d->t->nodes[d->self].name);
                return false;
        }
        if (d->fm_ready)
                return true;
        failf(call, NTBF_EUNREACHABLE,
              "fabric manager '%s' unreachable: SISCI connections and exports wait for it",
              d->t->nodes[d->manager].name);
        return false;
}

/* The topology index of this node's adapter number n, or NTBF_NONE. */
static uint32_t adapter_of(struct ntbf__d *d, uint64_t n)
{
        const struct ntbf_node *me = &d->t->nodes[d->self];
        return n < me->nadapters ? me->adapters[n] : NTBF_NONE;
}

/* An answer of the manager becomes the call's answer. */
static void pass(void *arg, int err, const char *msg, struct json_object *res)
{
        struct ntbf__rpc_call *call = arg;
        if (err) {
                json_object_put(res);
                return failf(call, err, "%s", msg && *msg ? msg : ntbf_strerror(err));
        }
        ntbf__rpc_result(call, res);
}

static void ignore(void *arg, int err, const char *msg, struct json_object *res)
{
        (void)arg;
        if (err)
                LOG_W("SISCI clean-up at the fabric manager: %s", msg ? msg : ntbf_strerror(err));
        json_object_put(res);
}

static void to_fm(struct ntbf__d *d, const char *m, struct json_object *p, ntbf__done_fn cb,
                  void *arg)
{
        ntbf__peer_request(d, d->manager, m, p, cb, arg);
}

/* Events for a session, on its listening connection. */
static void event_to(struct ntbf__d *d, uint64_t session, struct json_object *ev)
{
        struct sx_sess *x = sess_by_id(d->sx, session);
        if (x && x->listener)
                ntbf__rpc_notify(x->listener, ev);
        else
                json_object_put(ev);
}

/* ---- sessions ------------------------------------------------------------------------------- */

void ntbf__sx_m_session(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        (void)p;
        struct ntbf__d *d = ctx;
        struct ntbf__rpc_conn *c = ntbf__rpc_call_conn(call);
        for (struct sx_sess *x = d->sx->sessions; x; x = x->next)
                if (x->conn == c)
                        return failf(call, NTBF_EEXISTS,
                                     "this connection has SISCI session %" PRIu64, x->id);
        struct sx_sess *x = calloc(1, sizeof(*x));
        if (!x || !c) {
                free(x);
                return failf(call, -ENOMEM, "out of memory");
        }
        x->id = ++d->sx->next_id;
        x->conn = c;
        x->pid = c->pid;
        x->next = d->sx->sessions;
        d->sx->sessions = x;
        struct json_object *o = json_object_new_object();
        ntbf__jput_u(o, "session", x->id);
        ntbf__jput_s(o, "node", d->t->nodes[d->self].name);
        ntbf__jput_u(o, "id", d->t->nodes[d->self].id);
        LOG_D("SISCI session %" PRIu64 " of pid %d", x->id, (int)x->pid);
        ntbf__rpc_result(call, o);
}

void ntbf__sx_m_listen(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct ntbf__rpc_conn *c = ntbf__rpc_call_conn(call);
        struct sx_sess *x = sess_by_id(d->sx, u(p, "session", 0));
        /* Only the process that owns the session hears its events. */
        if (!x || !c || c->pid != x->pid)
                return failf(call, NTBF_ENOTFOUND, "no SISCI session %" PRIu64 " of this process",
                             u(p, "session", 0));
        x->listener = c;
        ntbf__rpc_result(call, NULL);
}

static void drop_borrow_record(struct ntbf__sx *s, uint32_t fdid)
{
        for (size_t i = 0; i < s->nsb; i++)
                if (s->sisci_borrows[i] == fdid) {
                        s->sisci_borrows[i] = s->sisci_borrows[--s->nsb];
                        return;
                }
}

static bool sisci_borrowed(struct ntbf__sx *s, uint32_t fdid)
{
        for (size_t i = 0; i < s->nsb; i++)
                if (s->sisci_borrows[i] == fdid)
                        return true;
        return false;
}

static void holder_gone(struct ntbf__d *d, struct sx_holder *h);

/* Unlink and free every element of the singly linked list head (of type T, linked by next)
 * that belongs to session id. */
#define FREE_OF_SESSION(T, head, id)                                                               \
        for (T **pp_ = &(head); *pp_;) {                                                           \
                T *g_ = *pp_;                                                                      \
                if (g_->session == (id)) {                                                         \
                        *pp_ = g_->next;                                                           \
                        free(g_);                                                                  \
                } else {                                                                           \
                        pp_ = &g_->next;                                                           \
                }                                                                                  \
        }

void ntbf__sx_conn_gone(struct ntbf__d *d, struct ntbf__rpc_conn *c)
{
        struct ntbf__sx *s = d->sx;
        if (!s)
                return;
        for (struct sx_sess **pp = &s->sessions; *pp;) {
                struct sx_sess *x = *pp;
                if (x->listener == c)
                        x->listener = NULL;
                if (x->conn != c) {
                        pp = &x->next;
                        continue;
                }
                *pp = x->next;
                uint64_t id = x->id;
                free(x);
                LOG_D("SISCI session %" PRIu64 " ended", id);
                /* Holders first: returning a device clears what hangs off it at the manager. */
                for (struct sx_holder **hp = &s->holders; *hp;) {
                        struct sx_holder *h = *hp;
                        if (h->session != id) {
                                hp = &h->next;
                                continue;
                        }
                        *hp = h->next;
                        holder_gone(d, h);
                        free(h);
                }
                FREE_OF_SESSION(struct sx_seg, s->segs, id);
                FREE_OF_SESSION(struct sx_int, s->ints, id);
                FREE_OF_SESSION(struct sx_chan, s->chans, id);
                FREE_OF_SESSION(struct sx_devseg, s->devsegs, id);
                /* The manager releases the session's exports (users hear "lost") and its
                 * connections and mappings (owners hear "disconnect"). */
                if (ntbf__peer_connected(d, d->manager) || d->manager == d->self) {
                        struct json_object *q = json_object_new_object(),
                                           *l = json_object_new_array();
                        json_object_array_add(l, json_object_new_uint64(id));
                        json_object_object_add(q, "sessions", l);
                        to_fm(d, "sx_end", q, ignore, NULL);
                }
        }
}

struct json_object *ntbf__sx_register_params(struct ntbf__d *d)
{
        struct ntbf__sx *s = d->sx;
        struct json_object *o = json_object_new_object(), *ss = json_object_new_array(),
                           *ex = json_object_new_array(), *hs = json_object_new_array();
        for (struct sx_sess *x = s->sessions; x; x = x->next)
                json_object_array_add(ss, json_object_new_uint64(x->id));
        for (struct sx_seg *g = s->segs; g; g = g->next) {
                if (g->priv || !g->has_mem)
                        continue;
                struct json_object *e = json_object_new_object();
                ntbf__jput_s(e, "kind", "seg");
                ntbf__jput_u(e, "id", g->id);
                ntbf__jput_u(e, "session", g->session);
                ntbf__jput_u(e, "addr", g->addr);
                ntbf__jput_u(e, "size", g->size);
                ntbf__jput_b(e, "available", g->available != 0);
                ntbf__jput_u(e, "adapters", g->available); /* connections enter by these */
                ntbf__jput_b(e, "broadcast", g->broadcast);
                json_object_array_add(ex, e);
        }
        for (struct sx_int *g = s->ints; g; g = g->next) {
                struct json_object *e = json_object_new_object();
                ntbf__jput_s(e, "kind", g->data ? "dint" : "int");
                ntbf__jput_u(e, "id", g->intno);
                ntbf__jput_u(e, "session", g->session);
                ntbf__jput_u(e, "addr", g->msi_addr);
                ntbf__jput_u(e, "size", 4);
                ntbf__jput_u(e, "data", g->msi_data);
                ntbf__jput_b(e, "available", true);
                if (g->data) {
                        ntbf__jput_u(e, "mbox_addr", g->mbox_addr);
                        ntbf__jput_u(e, "mbox_size", g->mbox_size);
                        ntbf__jput_u(e, "lanes", g->lanes);
                }
                json_object_array_add(ex, e);
        }
        /* The lender's own holds: the strongest mode of each device's holders. */
        for (struct sx_holder *h = s->holders; h; h = h->next) {
                if (!h->local)
                        continue;
                struct json_object *e = json_object_new_object();
                ntbf__jput_u(e, "fdid", h->fdid);
                ntbf__jput_u(e, "mode", h->exclusive ? 2 : 1);
                json_object_array_add(hs, e);
        }
        /* The memory held for device segments placed here: the manager frees what it no
         * longer accounts for. */
        struct json_object *ms = json_object_new_array();
        for (struct sx_mem *m = s->mems; m; m = m->next) {
                struct json_object *e = json_object_new_object();
                ntbf__jput_u(e, "addr", m->m.bus_addr);
                ntbf__jput_u(e, "size", m->m.size);
                json_object_array_add(ms, e);
        }
        json_object_object_add(o, "sessions", ss);
        json_object_object_add(o, "exports", ex);
        json_object_object_add(o, "holds", hs);
        json_object_object_add(o, "mems", ms);
        return o;
}

/* ---- segments -------------------------------------------------------------------------------- */

static struct sx_seg *seg_find(struct ntbf__sx *s, uint32_t id, uint64_t session)
{
        /* Numbers are unique on the node; a session reaches its own segments only. */
        for (struct sx_seg *g = s->segs; g; g = g->next)
                if (g->id == id && g->session == session)
                        return g;
        return NULL;
}

static bool seg_id_used(struct ntbf__sx *s, uint32_t id)
{
        for (struct sx_seg *g = s->segs; g; g = g->next)
                if (g->id == id)
                        return true;
        return false;
}

static struct json_object *seg_export(const struct sx_seg *g);

void ntbf__sx_m_seg_create(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct sx_sess *x = session_of(d, call);
        if (!x)
                return;
        bool priv = b(p, "private"), have_id = ntbf__jget_u(p, "id", &(uint64_t){0});
        uint32_t id = (uint32_t)u(p, "id", 0);
        if (priv || !have_id) {
                for (id = priv ? SX_PRIV_SEG_ID : SX_AUTO_SEG_ID;
                     seg_id_used(d->sx, id) && id < UINT32_MAX; id++)
                        ;
        } else if (seg_id_used(d->sx, id)) {
                return failf(call, NTBF_EEXISTS, "segment id %u is in use on '%s'", id,
                             d->t->nodes[d->self].name);
        }
        struct sx_seg *g = calloc(1, sizeof(*g));
        if (!g)
                return failf(call, -ENOMEM, "out of memory");
        g->session = x->id;
        g->id = id;
        g->size = u(p, "size", 0);
        g->has_mem = ntbf__jget_u(p, "addr", &g->addr);
        g->priv = priv;
        g->broadcast = b(p, "broadcast");
        g->next = d->sx->segs;
        d->sx->segs = g;
        /* Known to the manager from now on (unavailable): a connect is refused, not "no such
         * segment". The answer does not wait for it: a creation is the node's own business. */
        if (!priv && g->has_mem && d->fm_ready)
                to_fm(d, "sx_export", seg_export(g), ignore, NULL);
        struct json_object *o = json_object_new_object();
        ntbf__jput_u(o, "id", id);
        ntbf__rpc_result(call, o);
}

void ntbf__sx_m_seg_attach(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct sx_sess *x = session_of(d, call);
        if (!x)
                return;
        struct sx_seg *g = seg_find(d->sx, (uint32_t)u(p, "id", 0), x->id);
        if (!g)
                return failf(call, NTBF_ENOTFOUND, "this session has no segment %" PRIu64,
                             u(p, "id", 0));
        if (g->has_mem)
                return failf(call, NTBF_EBUSY, "segment %u already has memory", g->id);
        g->addr = u(p, "addr", 0);
        g->size = u(p, "size", g->size);
        g->has_mem = true;
        if (!g->priv && d->fm_ready)
                to_fm(d, "sx_export", seg_export(g), ignore, NULL);
        ntbf__rpc_result(call, NULL);
}

static struct json_object *seg_export(const struct sx_seg *g)
{
        struct json_object *e = json_object_new_object();
        ntbf__jput_s(e, "kind", "seg");
        ntbf__jput_u(e, "id", g->id);
        ntbf__jput_u(e, "session", g->session);
        ntbf__jput_u(e, "addr", g->addr);
        ntbf__jput_u(e, "size", g->size);
        ntbf__jput_b(e, "available", g->available != 0);
        ntbf__jput_u(e, "adapters", g->available); /* connections enter by these */
        ntbf__jput_b(e, "broadcast", g->broadcast);
        return e;
}

void ntbf__sx_m_seg_available(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct sx_sess *x = session_of(d, call);
        if (!x)
                return;
        struct sx_seg *g = seg_find(d->sx, (uint32_t)u(p, "id", 0), x->id);
        uint64_t ad = u(p, "adapter", 0);
        if (!g)
                return failf(call, NTBF_ENOTFOUND, "this session has no segment %" PRIu64,
                             u(p, "id", 0));
        if (adapter_of(d, ad) == NTBF_NONE)
                return failf(call, -ENODEV, "'%s' has no adapter number %" PRIu64,
                             d->t->nodes[d->self].name, ad);
        if (!g->has_mem)
                return failf(call, -EINVAL, "segment %u has no memory yet", g->id);
        if (b(p, "available"))
                g->available |= UINT64_C(1) << ad;
        else
                g->available &= ~(UINT64_C(1) << ad);
        if (g->priv)
                return ntbf__rpc_result(call, NULL); /* nobody connects to a private segment */
        if (!fm_ok(d, call))
                return;
        to_fm(d, "sx_export", seg_export(g), pass, call);
}

struct removeop {
        struct ntbf__d *d;
        struct ntbf__rpc_call *call;
        uint64_t session;
        uint32_t id;
};

static void seg_removed(void *arg, int err, const char *msg, struct json_object *res)
{
        struct removeop *op = arg;
        json_object_put(res);
        if (!err) {
                for (struct sx_seg **pp = &op->d->sx->segs; *pp; pp = &(*pp)->next) {
                        struct sx_seg *g = *pp;
                        if (g->id == op->id && g->session == op->session) {
                                *pp = g->next;
                                free(g);
                                break;
                        }
                }
                ntbf__rpc_result(op->call, NULL);
        } else {
                failf(op->call, err, "%s", msg && *msg ? msg : ntbf_strerror(err));
        }
        free(op);
}

void ntbf__sx_m_seg_remove(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct sx_sess *x = session_of(d, call);
        if (!x)
                return;
        struct sx_seg *g = seg_find(d->sx, (uint32_t)u(p, "id", 0), x->id);
        if (!g)
                return failf(call, NTBF_ENOTFOUND, "this session has no segment %" PRIu64,
                             u(p, "id", 0));
        struct removeop *op = calloc(1, sizeof(*op));
        if (!op)
                return failf(call, -ENOMEM, "out of memory");
        *op = (struct removeop){d, call, x->id, g->id};
        if (g->priv || !ntbf__peer_connected(d, d->manager) || !d->fm_ready) {
                /* Not at the manager (private), or it will drop it when the node registers. */
                if (!g->priv && d->manager != d->self && g->available && !b(p, "force"))
                        LOG_W("removing segment %u while the fabric manager is unreachable", g->id);
                return seg_removed(op, 0, NULL, NULL);
        }
        struct json_object *q = json_object_new_object();
        ntbf__jput_s(q, "kind", "seg");
        ntbf__jput_u(q, "id", g->id);
        ntbf__jput_b(q, "force", b(p, "force"));
        ntbf__jput_b(q, "graceful", b(p, "graceful"));
        to_fm(d, "sx_unexport", q, seg_removed, op);
}

void ntbf__sx_m_connect(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct sx_sess *x = session_of(d, call);
        if (!x)
                return;
        uint32_t ad = adapter_of(d, u(p, "adapter", 0));
        if (ad == NTBF_NONE)
                return failf(call, -ENODEV, "'%s' has no adapter number %" PRIu64,
                             d->t->nodes[d->self].name, u(p, "adapter", 0));
        if (!fm_ok(d, call))
                return;
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "session", x->id);
        ntbf__jput_s(q, "kind", b(p, "broadcast") ? "group" : "seg");
        ntbf__jput_u(q, "node_id", u(p, "node_id", 0));
        ntbf__jput_u(q, "id", u(p, "id", 0));
        ntbf__jput_u(q, "adapter", ad);
        to_fm(d, "sx_connect", q, pass, call);
}

void ntbf__sx_m_release(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        if (!session_of(d, call) || !fm_ok(d, call))
                return;
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "handle", u(p, "handle", 0));
        to_fm(d, "sx_release", q, pass, call);
}

/* ---- interrupts ------------------------------------------------------------------------------ */

static struct sx_int *int_find(struct ntbf__sx *s, bool data, uint32_t intno)
{
        for (struct sx_int *g = s->ints; g; g = g->next)
                if (g->data == data && g->intno == intno)
                        return g;
        return NULL;
}

static struct json_object *int_export(const struct sx_int *g)
{
        struct json_object *e = json_object_new_object();
        ntbf__jput_s(e, "kind", g->data ? "dint" : "int");
        ntbf__jput_u(e, "id", g->intno);
        ntbf__jput_u(e, "session", g->session);
        ntbf__jput_u(e, "addr", g->msi_addr);
        ntbf__jput_u(e, "size", 4);
        ntbf__jput_u(e, "data", g->msi_data);
        ntbf__jput_b(e, "available", true);
        if (g->data) {
                ntbf__jput_u(e, "mbox_addr", g->mbox_addr);
                ntbf__jput_u(e, "mbox_size", g->mbox_size);
                ntbf__jput_u(e, "lanes", g->lanes);
        }
        return e;
}

struct intop {
        struct ntbf__d *d;
        struct ntbf__rpc_call *call;
        bool data;
        uint32_t intno;
        struct json_object *first; /* int_connect: the interrupt's connection */
        uint64_t session;
        uint64_t node_id; /* int_connect: the target */
        uint32_t adapter;
};

static void int_exported(void *arg, int err, const char *msg, struct json_object *res)
{
        struct intop *op = arg;
        json_object_put(res);
        if (err) {
                for (struct sx_int **pp = &op->d->sx->ints; *pp; pp = &(*pp)->next)
                        if ((*pp)->data == op->data && (*pp)->intno == op->intno) {
                                struct sx_int *g = *pp;
                                *pp = g->next;
                                free(g);
                                break;
                        }
                failf(op->call, err, "%s", msg && *msg ? msg : ntbf_strerror(err));
        } else {
                struct json_object *o = json_object_new_object();
                ntbf__jput_u(o, "intno", op->intno);
                ntbf__rpc_result(op->call, o);
        }
        free(op);
}

void ntbf__sx_m_int_create(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct sx_sess *x = session_of(d, call);
        if (!x || !fm_ok(d, call))
                return;
        bool data = b(p, "data_int");
        uint64_t want;
        uint32_t intno;
        if (ntbf__jget_u(p, "intno", &want)) {
                intno = (uint32_t)want;
                if (int_find(d->sx, data, intno))
                        return failf(call, NTBF_EEXISTS, "%sinterrupt number %u is in use on '%s'",
                                     data ? "data " : "", intno, d->t->nodes[d->self].name);
        } else {
                for (intno = SX_AUTO_INTNO; int_find(d->sx, data, intno); intno++)
                        ;
        }
        if (data && (!ntbf__jget_u(p, "mbox_addr", &want) || !u(p, "mbox_size", 0)))
                return failf(call, -EINVAL, "a data interrupt needs its mailbox");
        struct sx_int *g = calloc(1, sizeof(*g));
        struct intop *op = calloc(1, sizeof(*op));
        if (!g || !op) {
                free(g);
                free(op);
                return failf(call, -ENOMEM, "out of memory");
        }
        *g = (struct sx_int){.session = x->id,
                             .intno = intno,
                             .data = data,
                             .msi_data = (uint32_t)u(p, "data", 0),
                             .msi_addr = u(p, "addr", 0),
                             .mbox_addr = u(p, "mbox_addr", 0),
                             .mbox_size = u(p, "mbox_size", 0),
                             .lanes = (uint32_t)u(p, "lanes", 1)};
        g->next = d->sx->ints;
        d->sx->ints = g;
        *op = (struct intop){.d = d, .call = call, .data = data, .intno = intno, .session = x->id};
        to_fm(d, "sx_export", int_export(g), int_exported, op);
}

static void int_removed(void *arg, int err, const char *msg, struct json_object *res)
{
        struct intop *op = arg;
        (void)msg;
        json_object_put(res);
        if (err)
                LOG_W("removing interrupt %u at the fabric manager: %s", op->intno,
                      msg ? msg : ntbf_strerror(err));
        ntbf__rpc_result(op->call, NULL);
        free(op);
}

void ntbf__sx_m_int_remove(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct sx_sess *x = session_of(d, call);
        if (!x)
                return;
        bool data = b(p, "data_int");
        uint32_t intno = (uint32_t)u(p, "intno", 0);
        for (struct sx_int **pp = &d->sx->ints; *pp; pp = &(*pp)->next) {
                struct sx_int *g = *pp;
                if (g->data != data || g->intno != intno || g->session != x->id)
                        continue;
                *pp = g->next;
                free(g);
                struct intop *op = calloc(1, sizeof(*op));
                if (!op)
                        return failf(call, -ENOMEM, "out of memory");
                *op = (struct intop){
                    .d = d, .call = call, .data = data, .intno = intno, .session = x->id};
                if (!d->fm_ready)
                        return int_removed(op, 0, NULL, NULL);
                struct json_object *q = json_object_new_object();
                ntbf__jput_s(q, "kind", data ? "dint" : "int");
                ntbf__jput_u(q, "id", intno);
                ntbf__jput_b(q, "force", true);
                return to_fm(d, "sx_unexport", q, int_removed, op);
        }
        failf(call, NTBF_ENOTFOUND, "this session has no %sinterrupt %u", data ? "data " : "",
              intno);
}

static void mbox_connected(void *arg, int err, const char *msg, struct json_object *res)
{
        struct intop *op = arg;
        if (err) {
                /* Nothing half-made: the interrupt's connection goes too. */
                uint64_t h = 0;
                ntbf__jget_u(op->first, "handle", &h);
                struct json_object *q = json_object_new_object();
                ntbf__jput_u(q, "handle", h);
                to_fm(op->d, "sx_release", q, ignore, NULL);
                json_object_put(op->first);
                failf(op->call, err, "%s", msg && *msg ? msg : ntbf_strerror(err));
        } else {
                json_object_object_add(op->first, "mbox", res);
                ntbf__rpc_result(op->call, op->first);
        }
        free(op);
}

/* A data interrupt is two connections: its interrupt address, then a lane of its mailbox. */
static void int_connected(void *arg, int err, const char *msg, struct json_object *res)
{
        struct intop *op = arg;
        if (err || !op->data) {
                pass(op->call, err, msg, res);
                free(op);
                return;
        }
        op->first = res;
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "session", op->session);
        ntbf__jput_s(q, "kind", "mbox");
        ntbf__jput_u(q, "node_id", op->node_id);
        ntbf__jput_u(q, "id", op->intno);
        ntbf__jput_u(q, "adapter", op->adapter);
        to_fm(op->d, "sx_connect", q, mbox_connected, op);
}

void ntbf__sx_m_int_connect(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct sx_sess *x = session_of(d, call);
        if (!x)
                return;
        uint32_t ad = adapter_of(d, u(p, "adapter", 0));
        if (ad == NTBF_NONE)
                return failf(call, -ENODEV, "'%s' has no adapter number %" PRIu64,
                             d->t->nodes[d->self].name, u(p, "adapter", 0));
        if (!fm_ok(d, call))
                return;
        bool data = b(p, "data_int");
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "session", x->id);
        ntbf__jput_s(q, "kind", data ? "dint" : "int");
        ntbf__jput_u(q, "node_id", u(p, "node_id", 0));
        ntbf__jput_u(q, "id", u(p, "intno", 0));
        ntbf__jput_u(q, "adapter", ad);
        if (!data)
                return to_fm(d, "sx_connect", q, pass, call);
        struct intop *op = calloc(1, sizeof(*op));
        if (!op) {
                json_object_put(q);
                return failf(call, -ENOMEM, "out of memory");
        }
        *op = (struct intop){
            d, call, true, (uint32_t)u(p, "intno", 0), NULL, x->id, u(p, "node_id", 0), ad};
        to_fm(d, "sx_connect", q, int_connected, op);
}

/* ---- DMA channels -----------------------------------------------------------------------------
 */

/*
 * An adapter's DMA channels are shared by every process of the node, and completions are
 * read by whoever polls a channel; so a session claims a channel for itself (libsisci then
 * runs all its DMA queues of that adapter on it) and gets it back when the session ends.
 */
void ntbf__sx_m_dma_channel(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct sx_sess *x = session_of(d, call);
        if (!x)
                return;
        uint32_t ad = adapter_of(d, u(p, "adapter", 0));
        if (ad == NTBF_NONE)
                return failf(call, -ENODEV, "'%s' has no adapter number %" PRIu64,
                             d->t->nodes[d->self].name, u(p, "adapter", 0));
        uint32_t n = d->caps[ad].flags & NTBF_CAP_DMA ? d->caps[ad].dma_channels : 0;
        for (uint32_t c = 0; c < n; c++) {
                bool used = false;
                for (struct sx_chan *g = d->sx->chans; g && !used; g = g->next)
                        used = g->adapter == ad && g->chan == c;
                if (used)
                        continue;
                struct sx_chan *g = calloc(1, sizeof(*g));
                if (!g)
                        return failf(call, -ENOMEM, "out of memory");
                *g = (struct sx_chan){d->sx->chans, x->id, ad, c};
                d->sx->chans = g;
                struct json_object *o = json_object_new_object();
                ntbf__jput_u(o, "channel", c);
                ntbf__jput_u(o, "adapter", ad);
                return ntbf__rpc_result(call, o);
        }
        if (n)
                return failf(call, NTBF_ENOSPC_BUDGET,
                             "all %u DMA channels of %s.%s are claimed by other processes", n,
                             d->t->nodes[d->self].name, d->t->adapters[ad].name);
        failf(call, NTBF_EUNSUPPORTED, "%s.%s has no DMA engine", d->t->nodes[d->self].name,
              d->t->adapters[ad].name);
}

/* ---- SmartIO borrows --------------------------------------------------------------------------
 */

static struct sx_holder *holder_of(struct ntbf__d *d, struct ntbf__rpc_call *call, uint64_t id)
{
        struct ntbf__rpc_conn *c = ntbf__rpc_call_conn(call);
        for (struct sx_holder *h = d->sx->holders; h; h = h->next) {
                struct sx_sess *x = sess_by_id(d->sx, h->session);
                if (h->id == id && x && x->conn == c)
                        return h;
        }
        failf(call, NTBF_ENOTFOUND, "this session holds no device borrow %" PRIu64, id);
        return NULL;
}

/* The strongest mode the node's holders of fdid hold it in: 0 none, 1 shared, 2 exclusive. */
static unsigned hold_mode(struct ntbf__sx *s, uint32_t fdid)
{
        unsigned m = 0;
        for (struct sx_holder *h = s->holders; h; h = h->next)
                if (h->fdid == fdid)
                        m = h->exclusive ? 2 : m > 1 ? m : 1;
        return m;
}

struct borrowop {
        struct ntbf__d *d;
        struct ntbf__rpc_call *call;
        uint64_t session;
        uint32_t fdid;
        bool exclusive, local;
};

static void add_holder(struct borrowop *op)
{
        struct sx_holder *h = calloc(1, sizeof(*h));
        if (!h)
                return failf(op->call, -ENOMEM, "out of memory");
        *h = (struct sx_holder){op->d->sx->holders, ++op->d->sx->next_id, op->session,
                                op->fdid,           op->exclusive,        op->local};
        op->d->sx->holders = h;
        uint32_t dev, fn;
        ntbf__fdid_resolve(op->d->t, op->fdid, &dev, &fn);
        struct json_object *o = json_object_new_object();
        ntbf__jput_u(o, "holder", h->id);
        ntbf__jput_u(o, "fdid", h->fdid);
        ntbf__jput_b(o, "local", h->local);
        ntbf__jput_u(o, "lender", op->d->t->devices[dev].node);
        ntbf__rpc_result(op->call, o);
}

static void held(void *arg, int err, const char *msg, struct json_object *res)
{
        struct borrowop *op = arg;
        json_object_put(res);
        if (err)
                failf(op->call, err, "%s", msg && *msg ? msg : ntbf_strerror(err));
        else if (!sess_by_id(op->d->sx, op->session))
                failf(op->call, -ECANCELED, "the session ended meanwhile");
        else
                add_holder(op);
        free(op);
}

static void sisci_borrowed_cb(void *arg, int err, const char *msg, struct json_object *res)
{
        struct borrowop *op = arg;
        struct ntbf__d *d = op->d;
        struct ntbf__sx *s = d->sx;
        struct ntbf__borrow *nb = NULL;
        if (err == NTBF_EEXISTS && ntbf__node_borrow(d, op->fdid) && sisci_borrowed(s, op->fdid))
                err = 0; /* another session of this node borrowed it meanwhile: share it */
        else if (!err && !sess_by_id(s, op->session) && !sisci_borrowed(s, op->fdid)) {
                /* Its session ended before the answer: nobody would hold or return it. */
                ntbf__node_return_unheld(d, op->fdid, "its SISCI session ended before the answer");
                err = -ECANCELED;
                msg = "the session ended meanwhile";
        } else if (!err) {
                if (!(nb = ntbf__node_add_borrow(d, res))) {
                        err = -ENOMEM;
                        msg = "cannot record the borrow";
                } else {
                        ntbf__node_borrow_for_sisci(d, nb);
                        if (s->nsb == s->capsb) {
                                size_t cap = s->capsb ? 2 * s->capsb : 8;
                                uint32_t *v = realloc(s->sisci_borrows, cap * sizeof(*v));
                                if (v) {
                                        s->sisci_borrows = v;
                                        s->capsb = cap;
                                }
                        }
                        if (s->nsb < s->capsb)
                                s->sisci_borrows[s->nsb++] = op->fdid;
                        LOG_I("borrowed 0x%04x for a SISCI process (%s)", op->fdid,
                              op->exclusive ? "exclusive" : "shared");
                        ntbf__node_event(d, "device.borrowed", op->fdid, NULL, NULL);
                }
        }
        json_object_put(res);
        if (err)
                failf(op->call, err == NTBF_EBUSY ? NTBF_EBUSY : err, "%s",
                      msg && *msg ? msg : ntbf_strerror(err));
        else
                add_holder(op);
        free(op);
}

void ntbf__sx_m_borrow(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct sx_sess *x = session_of(d, call);
        if (!x)
                return;
        uint32_t fdid = (uint32_t)u(p, "fdid", 0), dev, fn;
        bool exclusive = b(p, "exclusive");
        if (ntbf__fdid_resolve(d->t, fdid, &dev, &fn))
                return failf(call, NTBF_ENOTFOUND, "no device has fdid 0x%04x", fdid);
        unsigned mode = hold_mode(d->sx, fdid);
        if (mode == 2 || (exclusive && mode))
                return failf(call, NTBF_EBUSY, "0x%04x is %s by another process of '%s'", fdid,
                             mode == 2 ? "held exclusively" : "in use", d->t->nodes[d->self].name);
        if (!fm_ok(d, call))
                return;
        struct borrowop *op = calloc(1, sizeof(*op));
        if (!op)
                return failf(call, -ENOMEM, "out of memory");
        *op =
            (struct borrowop){d, call, x->id, fdid, exclusive, d->t->devices[dev].node == d->self};
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "fdid", fdid);
        if (op->local) {
                /* The lender's own process: the manager keeps remote borrows out as needed. */
                ntbf__jput_u(q, "mode", exclusive ? 2 : 1);
                if ((exclusive ? 2u : 1u) <= mode) {
                        json_object_put(q);
                        return held(op, 0, NULL, NULL);
                }
                return to_fm(d, "sx_hold", q, held, op);
        }
        if (ntbf__node_borrow(d, fdid)) {
                json_object_put(q);
                if (!sisci_borrowed(d->sx, fdid)) {
                        free(op);
                        return failf(
                            call, NTBF_EBUSY,
                            "0x%04x is borrowed by '%s' for Device Lending (ntbfab borrow); "
                            "return it first",
                            fdid, d->t->nodes[d->self].name);
                }
                return held(op, 0, NULL, NULL); /* shared with the node's other SISCI users */
        }
        ntbf__jput_s(q, "mode", exclusive ? "exclusive" : "shared");
        to_fm(d, "borrow", q, sisci_borrowed_cb, op);
}

struct returnop {
        struct ntbf__d *d;
        struct ntbf__rpc_call *call; /* NULL: nobody waits (the session ended) */
        uint32_t fdid;
        bool drop; /* the node's borrow goes: drop the shadow device once the manager says so */
};

static void returned(void *arg, int err, const char *msg, struct json_object *res)
{
        struct returnop *op = arg;
        json_object_put(res);
        if (op->drop && (!err || err == NTBF_ENOTFOUND)) {
                ntbf__node_drop_borrow(op->d, op->fdid, NULL);
                ntbf__node_event(op->d, "device.returned", op->fdid, NULL, NULL);
                LOG_I("returned 0x%04x (its last SISCI user let it go)", op->fdid);
                err = 0;
        }
        if (op->call) {
                if (err)
                        failf(op->call, err, "%s", msg && *msg ? msg : ntbf_strerror(err));
                else
                        ntbf__rpc_result(op->call, NULL);
        } else if (err) {
                LOG_W("returning 0x%04x: %s", op->fdid, msg ? msg : ntbf_strerror(err));
        }
        free(op);
}

/* Holder h is gone (already unlinked): what it created goes, and the node's hold is adjusted. */
static void holder_done(struct ntbf__d *d, struct sx_holder *h, struct ntbf__rpc_call *call)
{
        struct ntbf__sx *s = d->sx;
        bool fm = d->fm_ready && (ntbf__peer_connected(d, d->manager) || d->manager == d->self);
        for (struct sx_devseg **pp = &s->devsegs; *pp;) {
                struct sx_devseg *g = *pp;
                if (g->holder != h->id) {
                        pp = &g->next;
                        continue;
                }
                *pp = g->next;
                if (fm) {
                        struct json_object *q = json_object_new_object();
                        ntbf__jput_u(q, "id", g->id);
                        ntbf__jput_u(q, "fdid", g->fdid);
                        ntbf__jput_u(q, "memtype", g->memtype);
                        ntbf__jput_u(q, "session", g->session);
                        ntbf__jput_b(q, "force", true);
                        to_fm(d, "sx_unexport", q, ignore, NULL);
                }
                free(g);
        }
        struct returnop *op = calloc(1, sizeof(*op));
        if (!op) {
                if (call)
                        failf(call, -ENOMEM, "out of memory");
                return;
        }
        *op = (struct returnop){d, call, h->fdid, false};
        unsigned mode = hold_mode(s, h->fdid);
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "fdid", h->fdid);
        if (h->local && fm && mode < (h->exclusive ? 2u : 1u)) {
                ntbf__jput_u(q, "mode", mode);
                return to_fm(d, "sx_hold", q, returned, op);
        }
        if (!h->local && !mode && sisci_borrowed(s, h->fdid)) {
                drop_borrow_record(s, h->fdid);
                op->drop = true;
                if (fm)
                        return to_fm(d, "return", q, returned, op);
        }
        json_object_put(q);
        returned(op, 0, NULL, NULL);
}

static void holder_gone(struct ntbf__d *d, struct sx_holder *h)
{
        holder_done(d, h, NULL);
}

void ntbf__sx_m_return(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct sx_holder *h = holder_of(d, call, u(p, "holder", 0));
        if (!h)
                return;
        for (struct sx_holder **pp = &d->sx->holders; *pp; pp = &(*pp)->next)
                if (*pp == h) {
                        *pp = h->next;
                        break;
                }
        holder_done(d, h, call);
        free(h);
}

void ntbf__sx_m_release_exclusive(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct sx_holder *h = holder_of(d, call, u(p, "holder", 0));
        if (!h)
                return;
        if (!h->exclusive)
                return ntbf__rpc_result(call, NULL);
        if (!fm_ok(d, call))
                return;
        h->exclusive = false;
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "fdid", h->fdid);
        if (h->local) {
                ntbf__jput_u(q, "mode", hold_mode(d->sx, h->fdid));
                return to_fm(d, "sx_hold", q, pass, call);
        }
        to_fm(d, "sx_mode", q, pass, call);
}

bool ntbf__sx_pid_holds(struct ntbf__d *d, pid_t pid, uint32_t fdid)
{
        if (!d->sx)
                return false;
        for (struct sx_holder *h = d->sx->holders; h; h = h->next) {
                struct sx_sess *x = sess_by_id(d->sx, h->session);
                if (h->fdid == fdid && x && x->pid == pid)
                        return true;
        }
        return false;
}

bool ntbf__sx_holds(struct ntbf__d *d, uint32_t fdid)
{
        return d->sx && sisci_borrowed(d->sx, fdid) && hold_mode(d->sx, fdid);
}

void ntbf__sx_device_lost(struct ntbf__d *d, uint32_t fdid)
{
        if (d->sx)
                drop_borrow_record(d->sx, fdid);
}

/* ---- device segments and mappings for devices -------------------------------------------------
 */

struct devsegop {
        struct ntbf__d *d;
        struct ntbf__rpc_call *call;
        struct sx_devseg g;
};

static void devseg_made(void *arg, int err, const char *msg, struct json_object *res)
{
        struct devsegop *op = arg;
        if (!err && sess_by_id(op->d->sx, op->g.session)) {
                struct sx_devseg *g = malloc(sizeof(*g));
                if (g) {
                        *g = op->g;
                        g->next = op->d->sx->devsegs;
                        op->d->sx->devsegs = g;
                }
        }
        pass(op->call, err, msg, res);
        free(op);
}

void ntbf__sx_m_devseg_create(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct sx_holder *h = holder_of(d, call, u(p, "holder", 0));
        if (!h || !fm_ok(d, call))
                return;
        struct devsegop *op = calloc(1, sizeof(*op));
        if (!op)
                return failf(call, -ENOMEM, "out of memory");
        op->d = d;
        op->call = call;
        op->g = (struct sx_devseg){NULL,
                                   h->session,
                                   h->id,
                                   h->fdid,
                                   (uint32_t)u(p, "id", 0),
                                   (uint32_t)u(p, "memtype", 0)};
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "session", h->session);
        ntbf__jput_u(q, "fdid", h->fdid);
        ntbf__jput_u(q, "id", u(p, "id", 0));
        ntbf__jput_u(q, "size", u(p, "size", 0));
        ntbf__jput_u(q, "memtype", u(p, "memtype", 0));
        ntbf__jput_u(q, "hints", u(p, "hints", 0));
        const char *place = "hints";
        ntbf__jget_s(p, "place", &place);
        ntbf__jput_s(q, "place", place);
        to_fm(d, "sx_devseg", q, devseg_made, op);
}

void ntbf__sx_m_devseg_connect(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct sx_holder *h = holder_of(d, call, u(p, "holder", 0));
        if (!h)
                return;
        uint32_t ad = adapter_of(d, u(p, "adapter", 0));
        if (ad == NTBF_NONE)
                return failf(call, -ENODEV, "'%s' has no adapter number %" PRIu64,
                             d->t->nodes[d->self].name, u(p, "adapter", 0));
        if (!fm_ok(d, call))
                return;
        /* memtype 1 (SCI_MEMTYPE_BAR): BAR `id` of the device through this adapter. */
        bool bar = u(p, "memtype", 0) == 1;
        if (bar && h->local)
                return failf(call, -EINVAL,
                             "0x%04x is a device of this node: its BARs are reached directly",
                             h->fdid);
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "session", h->session);
        ntbf__jput_s(q, "kind", bar ? "bar" : "devseg");
        ntbf__jput_u(q, "fdid", h->fdid);
        ntbf__jput_u(q, "id", u(p, "id", 0));
        ntbf__jput_u(q, "memtype", u(p, "memtype", 0));
        ntbf__jput_u(q, "adapter", ad);
        to_fm(d, "sx_connect", q, pass, call);
}

/*
 * sisci.map_device: make memory reachable by a held device's DMA: a segment of the session
 * (seg, from offset addr), memory of another node (node, addr: what a connection reported as
 * its owner's address), or a multicast group (group, offset addr). With adapter, memory of
 * this node is reached through that adapter of it (the manager's to_adapter).
 */
void ntbf__sx_m_map_device(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct sx_holder *h = holder_of(d, call, u(p, "holder", 0));
        if (!h)
                return;
        /* adapter (optional): the adapter number of this node the device's DMA enters by. */
        uint32_t to = NTBF_NONE;
        if (json_object_object_get_ex(p, "adapter", NULL) &&
            (to = adapter_of(d, u(p, "adapter", 0))) == NTBF_NONE)
                return failf(call, -ENODEV, "'%s' has no adapter number %" PRIu64,
                             d->t->nodes[d->self].name, u(p, "adapter", 0));
        if (!fm_ok(d, call))
                return;
        uint64_t seg, node, group, off = u(p, "addr", 0), size = u(p, "size", 0);
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "session", h->session);
        ntbf__jput_u(q, "fdid", h->fdid);
        ntbf__jput_u(q, "size", size);
        if (to != NTBF_NONE)
                ntbf__jput_u(q, "to_adapter", to);
        if (ntbf__jget_u(p, "seg", &seg)) {
                struct sx_seg *g = seg_find(d->sx, (uint32_t)seg, h->session);
                if (!g || !g->has_mem || off > g->size || size > g->size - off) {
                        json_object_put(q);
                        return failf(call, g ? -ERANGE : NTBF_ENOTFOUND,
                                     g ? "the range is outside segment %u" : "no segment %u",
                                     (uint32_t)seg);
                }
                ntbf__jput_u(q, "node", d->self);
                ntbf__jput_u(q, "addr", g->addr + off);
        } else if (ntbf__jget_u(p, "group", &group)) {
                ntbf__jput_u(q, "group", group);
                ntbf__jput_u(q, "addr", off);
        } else if (ntbf__jget_u(p, "node", &node) && node < d->t->nnodes) {
                ntbf__jput_u(q, "node", node);
                ntbf__jput_u(q, "addr", off);
        } else {
                json_object_put(q);
                return failf(call, -EINVAL, "map_device needs seg, node or group");
        }
        to_fm(d, "sx_dmap", q, pass, call);
}

/* sisci.requester {adapter, bus, devfn}: a local device reaches this node's NTB mappings. */
void ntbf__sx_m_requester(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct sx_sess *x = session_of(d, call);
        if (!x)
                return;
        uint32_t ad = adapter_of(d, u(p, "adapter", 0));
        if (ad == NTBF_NONE)
                return failf(call, -ENODEV, "'%s' has no adapter number %" PRIu64,
                             d->t->nodes[d->self].name, u(p, "adapter", 0));
        if (!fm_ok(d, call))
                return;
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "session", x->id);
        ntbf__jput_u(q, "adapter", ad);
        ntbf__jput_u(q, "bus", u(p, "bus", 0));
        ntbf__jput_u(q, "devfn", u(p, "devfn", 0));
        to_fm(d, "sx_requester", q, pass, call);
}

/* ---- the manager's notes and requests ------------------------------------------------------- */

bool ntbf__sx_fm_method(const char *m)
{
        static const char *const v[] = {"sx_export", "sx_unexport", "sx_connect", "sx_release",
                                        "sx_end",    "sx_dmap",     "sx_devseg",  "sx_hold",
                                        "sx_mode",   "sx_requester"};
        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
                if (!strcmp(m, v[i]))
                        return true;
        return false;
}

bool ntbf__sx_note(struct ntbf__d *d, const char *m, struct json_object *p)
{
        if (!strcmp(m, "sx_event")) {
                const char *what = "";
                uint64_t session = 0;
                ntbf__jget_s(p, "what", &what);
                ntbf__jget_u(p, "session", &session);
                struct json_object *ev = json_object_new_object();
                if (!strcmp(what, "seg")) {
                        const char *reason = "";
                        ntbf__jget_s(p, "reason", &reason);
                        ntbf__jput_s(ev, "kind", "sisci.seg");
                        ntbf__jput_u(ev, "id", u(p, "id", 0));
                        ntbf__jput_s(ev, "reason", reason);
                        ntbf__jput_u(ev, "node_id", u(p, "node_id", 0));
                        ntbf__jput_u(ev, "adapter", u(p, "adapter", 0));
                } else if (!strcmp(what, "lost")) {
                        ntbf__jput_s(ev, "kind", "sisci.lost");
                        ntbf__jput_u(ev, "handle", u(p, "handle", 0));
                        ntbf__jput_b(ev, "removed", b(p, "removed"));
                } else {
                        json_object_put(ev);
                        return true;
                }
                event_to(d, session, ev);
                return true;
        }
        if (!strcmp(m, "sx_memfree")) {
                uint64_t addr = u(p, "addr", 0);
                for (struct sx_mem **pp = &d->sx->mems; *pp; pp = &(*pp)->next) {
                        struct sx_mem *x = *pp;
                        if (x->m.bus_addr != addr)
                                continue;
                        *pp = x->next;
                        struct ntbf_adapter_h *h = ntbf__hw_any(d, NTBF_CAP_MEM);
                        if (h)
                                d->ops->mem_free(h, &x->m);
                        free(x);
                        break;
                }
                return true;
        }
        return false;
}

bool ntbf__sx_request(struct ntbf__d *d, const char *m, struct json_object *p,
                      void (*cb)(void *arg, int err, const char *msg, struct json_object *res),
                      void *arg)
{
        if (strcmp(m, "sx_mem"))
                return false;
        struct ntbf_adapter_h *h = ntbf__hw_any(d, NTBF_CAP_MEM);
        struct sx_mem *x = calloc(1, sizeof(*x));
        uint64_t size = u(p, "size", 0);
        int r = !x ? -ENOMEM : !h || !d->ops->mem_alloc ? NTBF_EUNSUPPORTED : !size ? -EINVAL : 0;
        if (!r)
                r = d->ops->mem_alloc(h, ntbf_align_up(size, 4096), 4096, &x->m);
        if (r) {
                free(x);
                cb(arg, r, "cannot allocate memory for a device segment", NULL);
                return true;
        }
        x->next = d->sx->mems;
        d->sx->mems = x;
        struct json_object *o = json_object_new_object();
        ntbf__jput_u(o, "addr", x->m.bus_addr);
        cb(arg, 0, NULL, o);
        return true;
}
