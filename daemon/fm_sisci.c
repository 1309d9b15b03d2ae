/* daemon/fm_sisci.c: the fabric manager's SISCI side: exports, connections, device mappings. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fm_int.h"
#include "log.h"
#include "ntbfab/error.h"
#include "ntbfab/units.h"
#include "state.h"

/*
 * The cluster-wide registry of what SISCI processes offer (docs/sisci.md): segments,
 * interrupts and data interrupts by (owner node, number), and device segments by (device,
 * number, memory type). Node daemons tell the manager what their processes export
 * (sx_export), and every connection to an export is an admission like a borrow: a CONNECT
 * whose slots the connecting node programs, recorded with the client session that made it.
 * The registry is soft state: after a restart of the manager every node registers its
 * exports and live sessions again, and what a node does not list is released. The
 * allocations themselves are stored with the others, so the budgets rebuild exactly.
 */

enum { SXE_SEG = 1, SXE_INT, SXE_DINT, SXE_DEVSEG };

struct sx_export {
        struct sx_export *next;
        uint32_t node, kind, id; /* owner node (where the memory is), kind, number */
        uint64_t session;        /* the owner's session at its node */
        uint64_t addr, size;     /* SEG, DEVSEG: memory; INT, DINT: the interrupt address */
        bool available, priv, broadcast;
        uint64_t adapters;             /* SEG: adapter numbers of its node it is available on */
        uint32_t data;                 /* INT, DINT: MSI data */
        uint64_t mbox_addr, mbox_size; /* DINT: the mailbox */
        uint32_t lanes;
        uint64_t lanes_used;
        uint32_t fdid, memtype; /* DEVSEG */
        uint32_t creator;       /* DEVSEG: the creating session's node */
        uint64_t creator_session;
        uint32_t tag; /* DEVSEG: the manager's number for it (allocations' eid) */
        bool gone;    /* being removed: its users are told "lost", not its owner */
        bool removed; /* removed by its owner without SCI_FLAG_FORCE_REMOVE */
};

struct ntbf__fm_sx {
        struct sx_export *ex;
        uint32_t next_tag;
};

#define SX_MEMTYPE_PRIVATE 2u
#define SX_MEMTYPE_SHARED  4u

/* Access hints (sisci_types.h SCI_MEMACCESS_*). */
#define SX_DEVICE_READ  0x1u
#define SX_DEVICE_WRITE 0x2u
#define SX_HOST_READ    0x4u
#define SX_HOST_WRITE   0x8u
#define SX_MULTIHOST    0x10u
#define SX_P2P          0x20u

int ntbf__fm_sx_new(struct ntbf__fm *fm)
{
        fm->sx = calloc(1, sizeof(*fm->sx));
        if (!fm->sx)
                return -ENOMEM;
        fm->sx->next_tag = 1;
        return 0;
}

void ntbf__fm_sx_free(struct ntbf__fm *fm)
{
        if (!fm->sx)
                return;
        while (fm->sx->ex) {
                struct sx_export *e = fm->sx->ex;
                fm->sx->ex = e->next;
                free(e);
        }
        free(fm->sx);
        fm->sx = NULL;
}

/* ---- small helpers ------------------------------------------------------------------------- */

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

static void op_fail(struct ntbf__fm *fm, int err, const char *fmt, ...) NTBF_PRINTF(3, 4);
static void op_fail(struct ntbf__fm *fm, int err, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        ntbf__fm_finish(fm, err, msg, NULL);
}

static const char *nname(struct ntbf__fm *fm, uint32_t n)
{
        return n < fm->t->nnodes ? ntbf__fm_node_name(fm, n) : "?";
}

/* Why an admission was refused (the core's sentence, else the error's), in why; the plan is
 * freed. */
static const char *refusal(int r, struct ntbf_plan *plan, char *why, size_t len)
{
        snprintf(why, len, "%s", plan->why[0] ? plan->why : ntbf_strerror(r));
        ntbf_plan_free(plan);
        return why;
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

static const char *kind_word(uint32_t k)
{
        return k == SXE_SEG    ? "segment"
               : k == SXE_INT  ? "interrupt"
               : k == SXE_DINT ? "data interrupt"
                               : "device segment";
}

static struct sx_export *find_ex(struct ntbf__fm *fm, uint32_t node, uint32_t kind, uint32_t id)
{
        for (struct sx_export *e = fm->sx->ex; e; e = e->next)
                if (e->node == node && e->kind == kind && e->id == id && kind != SXE_DEVSEG)
                        return e;
        return NULL;
}

/* A device segment: SHARED ones by (device, number), PRIVATE ones also by their creator. */
static struct sx_export *find_devseg(struct ntbf__fm *fm, uint32_t fdid, uint32_t id,
                                     uint32_t memtype, uint32_t creator, uint64_t session)
{
        for (struct sx_export *e = fm->sx->ex; e; e = e->next)
                if (e->kind == SXE_DEVSEG && e->fdid == fdid && e->id == id &&
                    e->memtype == memtype &&
                    (memtype != SX_MEMTYPE_PRIVATE ||
                     (e->creator == creator && e->creator_session == session)))
                        return e;
        return NULL;
}

/* Whether an allocation's (ekind, enode, eid) names export e (device segments by tag). */
static bool names(const struct sx_export *e, uint32_t ekind, uint32_t enode, uint32_t eid)
{
        if (e->kind != ekind)
                return false;
        return e->kind == SXE_DEVSEG ? e->tag == eid : e->node == enode && e->id == eid;
}

/* The export an allocation uses, or NULL. */
static struct sx_export *export_of(struct ntbf__fm *fm, const struct fm_alloc *a)
{
        if (!a->ekind)
                return NULL;
        for (struct sx_export *e = fm->sx->ex; e; e = e->next)
                if (names(e, a->ekind, a->enode, a->eid))
                        return e;
        return NULL;
}

static void unlink_ex(struct ntbf__fm *fm, struct sx_export *x)
{
        for (struct sx_export **pp = &fm->sx->ex; *pp; pp = &(*pp)->next)
                if (*pp == x) {
                        *pp = x->next;
                        return;
                }
}

/* A note for a client session of a node (its daemon forwards it to the session's events). */
static void note(struct ntbf__fm *fm, uint32_t node, uint64_t session, const char *what,
                 struct json_object *p)
{
        ntbf__jput_u(p, "session", session);
        ntbf__jput_s(p, "what", what);
        if (ntbf__fm_connected(fm, node))
                fm->net.notify(fm->net.ctx, node, "sx_event", p);
        else
                json_object_put(p);
}

/* The number of adapter ai among its node's adapters (SISCI adapter numbers). */
static uint32_t adapter_no(const struct ntbf_topo *t, uint32_t ai)
{
        if (ai >= t->nadapters)
                return 0;
        const struct ntbf_node *n = &t->nodes[t->adapters[ai].node];
        for (uint32_t i = 0; i < n->nadapters; i++)
                if (n->adapters[i] == ai)
                        return i;
        return 0;
}

/* ---- database ------------------------------------------------------------------------------ */

static const char *const kind_names[] = {[A_SX_CONNECT] = "connect",
                                         [A_SX_DMAP] = "sx_map",
                                         [A_SX_JOIN] = "join",
                                         [A_SX_REQ] = "requester"};

const char *ntbf__fm_sx_kind_name(enum alloc_kind k)
{
        return k >= A_SX_CONNECT && k <= A_SX_REQ ? kind_names[k] : NULL;
}

bool ntbf__fm_sx_kind(const char *name, enum alloc_kind *k)
{
        for (int i = A_SX_CONNECT; i <= A_SX_REQ; i++)
                if (!strcmp(name, kind_names[i])) {
                        *k = (enum alloc_kind)i;
                        return true;
                }
        return false;
}

void ntbf__fm_sx_save(const struct fm_alloc *a, struct json_object *o)
{
        if (a->kind < A_SX_CONNECT)
                return;
        ntbf__jput_u(o, "session", a->session);
        ntbf__jput_u(o, "ekind", a->ekind);
        ntbf__jput_u(o, "enode", a->enode);
        ntbf__jput_u(o, "eid", a->eid);
        ntbf__jput_u(o, "lane", a->lane);
}

void ntbf__fm_sx_load(struct fm_alloc *a, struct json_object *o)
{
        a->session = u(o, "session", 0);
        a->ekind = (uint32_t)u(o, "ekind", 0);
        a->enode = (uint32_t)u(o, "enode", NTBF_NONE);
        a->eid = (uint32_t)u(o, "eid", 0);
        a->lane = (uint32_t)u(o, "lane", NTBF_NONE);
}

/* ---- answers and notes --------------------------------------------------------------------- */

struct json_object *ntbf__fm_sx_result(struct ntbf__fm *fm, struct fm_alloc *a)
{
        const struct ntbf_topo *t = fm->t;
        const struct ntbf_plan *p = ntbf_alloc_plan(fm->s, a->sid);
        struct json_object *o = json_object_new_object();
        ntbf__jput_u(o, "handle", a->seq);
        if (!p)
                return o;
        if (a->kind == A_SX_DMAP) {
                ntbf__jput_u(o, "device_addr", p->dma_addr);
                ntbf__jput_u(o, "size", p->req.target.size);
                json_object_object_add(o, "path", ntbf__path_json(t, &p->path));
                return o;
        }
        if (a->kind != A_SX_CONNECT)
                return o;
        bool local = p->req.target.kind == NTBF_TARGET_MEM && p->req.target.node == a->node;
        uint32_t ad = p->path.first_adapter;
        for (uint32_t i = 0; i < p->nres && ad == NTBF_NONE; i++)
                if (p->res[i].kind == NTBF_RES_LUT)
                        ad = p->res[i].obj; /* a multicast send has no path, only its slots */
        ntbf__jput_b(o, "local", local);
        ntbf__jput_u(o, "addr", p->dma_addr);
        ntbf__jput_u(o, "size", p->req.target.size);
        if (!local && ad < t->nadapters) {
                ntbf__jput_u(o, "adapter", ad);
                ntbf__put_window(o, &t->adapters[ad], p->dma_addr);
        }
        struct sx_export *e = export_of(fm, a);
        if (!e && a->fdid != NTBF_NONE) {
                /* A device's BAR: its lender, where the BAR sits. */
                ntbf__jput_u(o, "owner_node", p->req.target.node);
                ntbf__jput_u(o, "owner_addr", p->req.target.addr);
        }
        if (e) {
                ntbf__jput_u(o, "owner_node", e->node);
                ntbf__jput_u(o, "owner_addr", p->req.target.addr);
                if (e->kind == SXE_INT || e->kind == SXE_DINT)
                        ntbf__jput_u(o, "data", e->data);
                if (a->lane != NTBF_NONE) {
                        ntbf__jput_u(o, "lane", a->lane);
                        ntbf__jput_u(o, "lanes", e->lanes);
                }
                if (e->kind == SXE_SEG || e->kind == SXE_DEVSEG) {
                        struct json_object *n = json_object_new_object();
                        ntbf__jput_u(n, "id", e->kind == SXE_SEG ? e->id : e->fdid);
                        ntbf__jput_s(n, "reason", "connect");
                        ntbf__jput_u(n, "node_id", t->nodes[a->node].id);
                        ntbf__jput_u(n, "adapter", adapter_no(t, p->path.last_adapter));
                        if (e->kind == SXE_SEG)
                                note(fm, e->node, e->session, "seg", n);
                        else
                                json_object_put(n);
                }
        }
        json_object_object_add(o, "path", ntbf__path_json(t, &p->path));
        return o;
}

/*
 * Who hears of a released allocation: the owner of a segment hears that a node disconnected
 * (unless the segment itself is going); the session that made the allocation hears that it
 * is lost, unless it asked for the release itself (self_quit). Only programmed allocations
 * were ever seen by anyone.
 */
void ntbf__fm_sx_released(struct ntbf__fm *fm, struct fm_alloc *a)
{
        struct sx_export *e = export_of(fm, a);
        if (a->kind == A_SX_CONNECT && e && e->kind == SXE_DINT && a->lane < 64)
                e->lanes_used &= ~(UINT64_C(1) << a->lane);
        if (!a->active)
                return;
        if (a->kind == A_SX_CONNECT && e && !e->gone) {
                if (e->kind == SXE_SEG) {
                        struct json_object *n = json_object_new_object();
                        ntbf__jput_u(n, "id", e->id);
                        ntbf__jput_s(n, "reason", "disconnect");
                        ntbf__jput_u(n, "node_id", fm->t->nodes[a->node].id);
                        ntbf__jput_u(n, "adapter", 0);
                        note(fm, e->node, e->session, "seg", n);
                }
        }
        if (!a->self_quit && (a->kind == A_SX_CONNECT || a->kind == A_SX_DMAP)) {
                struct json_object *n = json_object_new_object();
                ntbf__jput_u(n, "handle", a->seq);
                /* Its owner removed the segment (not by force): SCI_CB_DISCONNECT. */
                ntbf__jput_b(n, "removed", e && e->gone && e->removed);
                note(fm, a->node, a->session, "lost", n);
        }
}

bool ntbf__fm_sx_uses_node(struct ntbf__fm *fm, const struct fm_alloc *a, uint32_t n)
{
        (void)fm;
        return a->kind >= A_SX_CONNECT && a->ekind && a->enode == n;
}

/* ---- exports ------------------------------------------------------------------------------- */

/*
 * Device segments are hard state (docs/daemon.md, "What a crash leaves"): their memory is
 * allocated by a node's daemon for the manager, so only the manager can say when it goes. A
 * restarted manager reloads them; a node that registers lists the memory it holds for them
 * (sx.mems), and what no device segment accounts for is freed there.
 */
static void devseg_key(uint32_t tag, char *buf, size_t len)
{
        snprintf(buf, len, "%u", tag);
}

static void devseg_save(struct ntbf__fm *fm, const struct sx_export *e)
{
        char key[16];
        devseg_key(e->tag, key, sizeof(key));
        struct json_object *o = json_object_new_object();
        ntbf__jput_u(o, "node", e->node);
        ntbf__jput_u(o, "id", e->id);
        ntbf__jput_u(o, "addr", e->addr);
        ntbf__jput_u(o, "size", e->size);
        ntbf__jput_u(o, "fdid", e->fdid);
        ntbf__jput_u(o, "memtype", e->memtype);
        ntbf__jput_u(o, "creator", e->creator);
        ntbf__jput_u(o, "session", e->creator_session);
        if (ntbf__store_put(fm->st, NTBF_T_FM_DEVSEGS, key, ntbf__json_text(o)))
                LOG_E("cannot record device segment %u: %s", e->id, ntbf__store_error(fm->st));
        json_object_put(o);
}

static int devseg_load(void *arg, const char *key, const char *json)
{
        struct ntbf__fm *fm = arg;
        uint64_t tag;
        struct json_object *o = json_tokener_parse(json);
        struct sx_export *e = calloc(1, sizeof(*e));
        if (!e || !o || ntbf_uint_parse(key, &tag) || tag > UINT32_MAX) {
                free(e);
                json_object_put(o);
                return 0; /* an unusable row is left alone */
        }
        *e = (struct sx_export){.node = (uint32_t)u(o, "node", 0),
                                .kind = SXE_DEVSEG,
                                .id = (uint32_t)u(o, "id", 0),
                                .addr = u(o, "addr", 0),
                                .size = u(o, "size", 0),
                                .available = true,
                                .fdid = (uint32_t)u(o, "fdid", NTBF_NONE),
                                .memtype = (uint32_t)u(o, "memtype", 0),
                                .creator = (uint32_t)u(o, "creator", 0),
                                .creator_session = u(o, "session", 0),
                                .tag = (uint32_t)tag};
        json_object_put(o);
        if (e->node >= fm->t->nnodes || e->creator >= fm->t->nnodes) {
                free(e);
                return 0;
        }
        e->next = fm->sx->ex;
        fm->sx->ex = e;
        if (e->tag >= fm->sx->next_tag)
                fm->sx->next_tag = e->tag + 1;
        return 0;
}

int ntbf__fm_sx_restore(struct ntbf__fm *fm)
{
        /* Tags name device segments in the stored allocations too: never given twice. */
        for (struct fm_alloc *a = fm->allocs; a; a = a->next)
                if (a->ekind == SXE_DEVSEG && a->eid >= fm->sx->next_tag)
                        fm->sx->next_tag = a->eid + 1;
        return ntbf__store_each(fm->st, NTBF_T_FM_DEVSEGS, devseg_load, fm);
}

static void free_export(struct ntbf__fm *fm, struct sx_export *e)
{
        if (e->kind == SXE_DEVSEG) {
                char key[16];
                devseg_key(e->tag, key, sizeof(key));
                ntbf__store_del(fm->st, NTBF_T_FM_DEVSEGS, key);
        }
        if (e->kind == SXE_DEVSEG && e->addr) {
                /* The memory was allocated by the placement node's daemon for this segment. */
                struct json_object *n = json_object_new_object();
                ntbf__jput_u(n, "addr", e->addr);
                ntbf__jput_u(n, "size", e->size);
                if (ntbf__fm_connected(fm, e->node))
                        fm->net.notify(fm->net.ctx, e->node, "sx_memfree", n);
                else
                        json_object_put(n);
        }
        free(e);
}

/* Allocations that depend on export e (connections, device mappings, its multicast join). */
static size_t users_of(struct ntbf__fm *fm, const struct sx_export *e, struct fm_alloc ***out)
{
        size_t n = 0, cap = 0;
        struct fm_alloc **v = NULL;
        for (struct fm_alloc *a = fm->allocs; a; a = a->next) {
                if (a->kind < A_SX_CONNECT || !names(e, a->ekind, a->enode, a->eid))
                        continue;
                if (n == cap) {
                        cap = cap ? cap * 2 : 8;
                        struct fm_alloc **w = realloc(v, cap * sizeof(*v));
                        if (!w)
                                break;
                        v = w;
                }
                v[n++] = a;
        }
        *out = v;
        return n;
}

static unsigned connections_to(struct ntbf__fm *fm, const struct sx_export *e)
{
        struct fm_alloc **v;
        size_t n = users_of(fm, e, &v);
        unsigned c = 0;
        for (size_t i = 0; i < n; i++)
                c += v[i]->kind == A_SX_CONNECT;
        free(v);
        return c;
}

/*
 * Export e goes: whoever uses it hears "lost" now (while it can still be found), then it
 * leaves the registry and what used it is released quietly.
 */
static void tell_gone(struct ntbf__fm *fm, struct sx_export *e, struct fm_alloc **v, size_t n)
{
        e->gone = true;
        for (size_t i = 0; i < n; i++) {
                if (v[i]->kind == A_SX_JOIN)
                        v[i]->self_quit = true;
                ntbf__fm_sx_released(fm, v[i]);
                v[i]->self_quit = true;
        }
}

/* Remove export e and release what uses it. Ends the running mutation. */
static void drop_export(struct ntbf__fm *fm, struct sx_export *e)
{
        struct fm_alloc **v;
        size_t n = users_of(fm, e, &v);
        tell_gone(fm, e, v, n);
        unlink_ex(fm, e);
        free_export(fm, e);
        ntbf__fm_release(fm, v, n, NULL);
        free(v);
}

static void fill_export(struct sx_export *e, struct json_object *p)
{
        e->session = u(p, "session", e->session);
        e->addr = u(p, "addr", e->addr);
        e->size = u(p, "size", e->size);
        e->available = b(p, "available");
        /* A node that does not say (an older daemon) offers it on every adapter. */
        e->adapters = u(p, "adapters", UINT64_MAX);
        e->priv = b(p, "private");
        e->broadcast = b(p, "broadcast");
        e->data = (uint32_t)u(p, "data", e->data);
        e->mbox_addr = u(p, "mbox_addr", e->mbox_addr);
        e->mbox_size = u(p, "mbox_size", e->mbox_size);
        e->lanes = (uint32_t)u(p, "lanes", e->lanes);
        if (e->lanes > 64)
                e->lanes = 64;
}

static uint32_t kind_of(struct json_object *p)
{
        const char *k = "";
        ntbf__jget_s(p, "kind", &k);
        return !strcmp(k, "seg")    ? SXE_SEG
               : !strcmp(k, "int")  ? SXE_INT
               : !strcmp(k, "dint") ? SXE_DINT
                                    : 0;
}

static struct fm_alloc *join_of(struct ntbf__fm *fm, const struct sx_export *e)
{
        for (struct fm_alloc *a = fm->allocs; a; a = a->next)
                if (a->kind == A_SX_JOIN && a->ekind == e->kind && a->enode == e->node &&
                    a->eid == e->id)
                        return a;
        return NULL;
}

/* sx_export: create or update an export; a broadcast segment joins its group when available. */
static void op_export(struct ntbf__fm *fm, struct fm_op *op)
{
        uint32_t kind = kind_of(op->p);
        uint64_t id;
        if (!kind || !ntbf__jget_u(op->p, "id", &id) || id > UINT32_MAX)
                return op_fail(fm, -EINVAL, "sx_export needs a kind and an id");
        struct sx_export *e = find_ex(fm, op->from, kind, (uint32_t)id);
        if (!e) {
                e = calloc(1, sizeof(*e));
                if (!e)
                        return op_fail(fm, -ENOMEM, "out of memory");
                e->node = op->from;
                e->kind = kind;
                e->id = (uint32_t)id;
                e->next = fm->sx->ex;
                fm->sx->ex = e;
        }
        fill_export(e, op->p);
        if (!(e->kind == SXE_SEG && e->broadcast && e->available) || join_of(fm, e))
                return ntbf__fm_finish(fm, 0, NULL, json_object_new_object());
        /* A broadcast segment receives its group (the segment id) into its memory. */
        struct ntbf_request req;
        ntbf_request_init(&req, NTBF_REQ_MCAST_JOIN);
        req.target = (struct ntbf_target){NTBF_TARGET_MCAST, op->from, e->addr, e->size, e->id};
        struct ntbf_plan plan;
        int r = ntbf_admit(fm->s, &req, &plan);
        if (r) {
                char why[600];
                e->available = false;
                return op_fail(fm, r, "broadcast segment %u of '%s' cannot join its group: %s",
                               e->id, nname(fm, op->from), refusal(r, &plan, why, sizeof(why)));
        }
        struct fm_alloc *a = calloc(1, sizeof(*a));
        if (!a) {
                ntbf_plan_free(&plan);
                return op_fail(fm, -ENOMEM, "out of memory");
        }
        *a = (struct fm_alloc){.kind = A_SX_JOIN,
                               .fdid = NTBF_NONE,
                               .node = op->from,
                               .session = e->session,
                               .ekind = e->kind,
                               .enode = e->node,
                               .eid = e->id,
                               .lane = NTBF_NONE};
        ntbf__fm_commit(fm, a, &plan);
        ntbf_plan_free(&plan);
}

/* sx_unexport: the owner removes an export; with connections only if forced. */
static void op_unexport(struct ntbf__fm *fm, struct fm_op *op)
{
        uint32_t kind = kind_of(op->p);
        uint64_t id;
        if (!ntbf__jget_u(op->p, "id", &id))
                return op_fail(fm, -EINVAL, "sx_unexport needs a kind and an id");
        struct sx_export *e = NULL;
        if (kind)
                e = find_ex(fm, op->from, kind, (uint32_t)id);
        else
                e = find_devseg(fm, (uint32_t)u(op->p, "fdid", NTBF_NONE), (uint32_t)id,
                                (uint32_t)u(op->p, "memtype", 0), op->from, u(op->p, "session", 0));
        if (!e)
                return ntbf__fm_finish(fm, 0, NULL, json_object_new_object());
        unsigned c = connections_to(fm, e);
        e->removed = b(op->p, "graceful");
        if (c && !b(op->p, "force"))
                return op_fail(fm, NTBF_EBUSY, "%s %u of '%s' has %u connection%s",
                               kind_word(e->kind), e->id, nname(fm, e->node), c, c == 1 ? "" : "s");
        drop_export(fm, e);
}

/* ---- connections ----------------------------------------------------------------------------- */

/*
 * Admit a connection to segment e entering its node only through an adapter it was made
 * available on (SCISetSegmentAvailable's adapter): the least-latency admissible one. A segment
 * available on every adapter of its node leaves the choice to the core.
 */
static int admit_available(struct ntbf__fm *fm, const struct sx_export *e,
                           const struct ntbf_request *req, struct ntbf_plan *plan)
{
        const struct ntbf_topo *t = fm->t;
        const struct ntbf_node *on = &t->nodes[e->node];
        uint64_t all = on->nadapters >= 64 ? UINT64_MAX : (UINT64_C(1) << on->nadapters) - 1;
        if ((e->adapters & all) == all || req->target.node == req->requester.node)
                return ntbf_admit(fm->s, req, plan);
        struct ntbf_request q = *req;
        int best = NTBF_ENOPATH;
        bool have = false;
        char names[160] = "";
        ntbf_plan_init(plan);
        for (uint32_t k = 0; k < on->nadapters; k++) {
                if (!(e->adapters >> k & 1))
                        continue;
                size_t len = strlen(names);
                snprintf(names + len, sizeof(names) - len, "%s%s", len ? ", " : "",
                         t->adapters[on->adapters[k]].name);
                struct ntbf_plan p;
                q.to_adapter = on->adapters[k];
                int r = ntbf_admit(fm->s, &q, &p);
                if (!r && (!have || p.path.latency_ns < plan->path.latency_ns)) {
                        ntbf_plan_free(plan);
                        *plan = p;
                        have = true;
                        best = 0;
                        continue;
                }
                if (r && !have && (best == NTBF_ENOPATH || r != NTBF_ENOPATH)) {
                        /* What refused it: a budget says more than a missing path. */
                        ntbf_plan_free(plan);
                        *plan = p;
                        best = r;
                        continue;
                }
                ntbf_plan_free(&p);
        }
        if (!have && best == NTBF_ENOPATH) {
                plan->result = NTBF_ENOPATH;
                snprintf(plan->why, sizeof(plan->why),
                         "segment %u of '%s' is available on its adapter%s %s only, and '%s' "
                         "reaches none of them%s",
                         e->id, nname(fm, e->node), strchr(names, ',') ? "s" : "",
                         names[0] ? names : "(none)", nname(fm, req->requester.node),
                         req->via_adapter != NTBF_NONE ? " through the adapter it named" : "");
        }
        return best;
}

/* sx_connect: a client of node `from` connects to an export (or sends to a group). */
static void op_connect(struct ntbf__fm *fm, struct fm_op *op)
{
        const struct ntbf_topo *t = fm->t;
        const char *k = "";
        ntbf__jget_s(op->p, "kind", &k);
        uint64_t id = u(op->p, "id", UINT64_MAX), node_id = u(op->p, "node_id", UINT64_MAX);
        uint32_t via = (uint32_t)u(op->p, "adapter", NTBF_NONE);
        if (id > UINT32_MAX ||
            (via != NTBF_NONE && (via >= t->nadapters || t->adapters[via].node != op->from)))
                return op_fail(fm, -EINVAL, "sx_connect needs an id and an adapter of '%s'",
                               nname(fm, op->from));
        struct ntbf_request req;
        ntbf_request_init(&req, NTBF_REQ_CONNECT);
        req.requester = (struct ntbf_requester){op->from, NTBF_NONE, 0};
        req.via_adapter = via;
        struct fm_alloc proto = {.kind = A_SX_CONNECT,
                                 .fdid = NTBF_NONE,
                                 .node = op->from,
                                 .session = u(op->p, "session", 0),
                                 .lane = NTBF_NONE};
        struct sx_export *e = NULL;
        if (!strcmp(k, "group")) {
                /* Multicast: the group of broadcast segment `id`, as big as its members. */
                uint64_t gsize = 0;
                for (struct sx_export *x = fm->sx->ex; x; x = x->next)
                        if (x->kind == SXE_SEG && x->broadcast && x->id == id && join_of(fm, x))
                                gsize = x->size;
                if (!gsize)
                        return op_fail(fm, NTBF_ENOTFOUND,
                                       "no node has joined broadcast segment %" PRIu64
                                       " (multicast group) yet",
                                       id);
                req.target =
                    (struct ntbf_target){NTBF_TARGET_MCAST, NTBF_NONE, 0, gsize, (uint32_t)id};
                proto.eid = (uint32_t)id;
        } else if (!strcmp(k, "devseg")) {
                uint32_t fdid = (uint32_t)u(op->p, "fdid", NTBF_NONE),
                         memtype = (uint32_t)u(op->p, "memtype", 0);
                e = find_devseg(fm, fdid, (uint32_t)id, memtype, op->from, proto.session);
                if (!e)
                        return op_fail(fm, NTBF_ENOTFOUND,
                                       "device 0x%04x has no %s segment %" PRIu64 " for this "
                                       "session",
                                       fdid, memtype == SX_MEMTYPE_SHARED ? "shared" : "private",
                                       id);
                req.target = (struct ntbf_target){NTBF_TARGET_MEM, e->node, e->addr, e->size, 0};
        } else if (!strcmp(k, "bar")) {
                /*
                 * BAR `id` of a device the node borrowed, reached through the adapter named
                 * (article 6.3: one BAR mapped through each of a borrower's adapters). It hangs
                 * off the node's borrow: returning or losing the device releases it.
                 */
                uint32_t fdid = (uint32_t)u(op->p, "fdid", NTBF_NONE);
                struct fm_fn *f = ntbf__fm_fn(fm, fdid);
                if (!f)
                        return op_fail(fm, NTBF_ENOTFOUND, "no device has fdid 0x%04x", fdid);
                uint32_t lender = ntbf__fm_fn_node(fm, f);
                struct fm_alloc *sb = ntbf__fm_find_borrow(fm, fdid, op->from);
                if (lender == op->from)
                        return op_fail(fm, -EINVAL,
                                       "0x%04x is a device of '%s' itself: its BARs are reached "
                                       "directly, through no adapter",
                                       fdid, nname(fm, op->from));
                if (!sb)
                        return op_fail(fm, -EPERM, "0x%04x is not borrowed by '%s'", fdid,
                                       nname(fm, op->from));
                const struct ntbf_device *dv = &t->devices[f->device];
                uint64_t bsize =
                    id < NTBF_MAX_BARS ? ntbf_device_bar_size(dv, f->function, (uint32_t)id) : 0;
                if (!bsize)
                        return op_fail(fm, NTBF_ENOTFOUND, "0x%04x has no BAR %" PRIu64, fdid, id);
                req.target = (struct ntbf_target){
                    NTBF_TARGET_MEM, lender, ntbf_device_bar_addr(dv, f->function, (uint32_t)id),
                    bsize, 0};
                proto.fdid = fdid;
                proto.parent = sb->seq;
                proto.target_fdid = fdid;
                proto.bar = (uint32_t)id;
        } else {
                uint32_t kind = !strcmp(k, "seg")                          ? SXE_SEG
                                : !strcmp(k, "int")                        ? SXE_INT
                                : !strcmp(k, "dint") || !strcmp(k, "mbox") ? SXE_DINT
                                                                           : 0;
                uint32_t n =
                    node_id > UINT32_MAX ? NTBF_NONE : ntbf_topo_find_node_id(t, (uint32_t)node_id);
                if (!kind)
                        return op_fail(fm, -EINVAL, "sx_connect: unknown kind '%s'", k);
                if (n == NTBF_NONE)
                        return op_fail(fm, -ENXIO, "no node has id %" PRIu64, node_id);
                e = find_ex(fm, n, kind, (uint32_t)id);
                if (!e)
                        return op_fail(fm, NTBF_ENOTFOUND, "'%s' has no %s %" PRIu64, nname(fm, n),
                                       kind_word(kind), id);
                if (kind == SXE_SEG && !e->available)
                        return op_fail(fm, NTBF_EBUSY,
                                       "segment %" PRIu64 " of '%s' is not available", id,
                                       nname(fm, n));
                if (kind == SXE_SEG && e->broadcast)
                        return op_fail(
                            fm, -EPERM,
                            "segment %" PRIu64 " of '%s' is a broadcast segment: connect "
                            "to it with SCI_FLAG_BROADCAST and DIS_BROADCAST_NODEID_GROUP_ALL",
                            id, nname(fm, n));
                if (!strcmp(k, "mbox")) {
                        uint32_t lane = NTBF_NONE;
                        for (uint32_t i = 0; i < e->lanes && lane == NTBF_NONE; i++)
                                if (!(e->lanes_used >> i & 1))
                                        lane = i;
                        if (lane == NTBF_NONE)
                                return op_fail(fm, NTBF_ENOSPC_BUDGET,
                                               "data interrupt %" PRIu64 " of '%s' has all its %u "
                                               "lanes connected",
                                               id, nname(fm, n), e->lanes);
                        proto.lane = lane;
                        req.target =
                            (struct ntbf_target){NTBF_TARGET_MEM, n, e->mbox_addr, e->mbox_size, 0};
                } else if (kind == SXE_SEG) {
                        req.target = (struct ntbf_target){NTBF_TARGET_MEM, n, e->addr, e->size, 0};
                } else {
                        /* The interrupt address: a CPU write there is the interrupt. */
                        req.target = (struct ntbf_target){NTBF_TARGET_MEM, n, e->addr, 4, 0};
                }
        }
        if (e) {
                proto.ekind = e->kind;
                proto.enode = e->node;
                proto.eid = e->kind == SXE_DEVSEG ? e->tag : e->id;
        }
        struct ntbf_plan plan;
        int r = e && e->kind == SXE_SEG ? admit_available(fm, e, &req, &plan)
                                        : ntbf_admit(fm->s, &req, &plan);
        if (r) {
                char why[600];
                return op_fail(fm, r, "%s", refusal(r, &plan, why, sizeof(why)));
        }
        struct fm_alloc *a = calloc(1, sizeof(*a));
        if (!a) {
                ntbf_plan_free(&plan);
                return op_fail(fm, -ENOMEM, "out of memory");
        }
        *a = proto;
        if (e && e->kind == SXE_DINT && a->lane < 64)
                e->lanes_used |= UINT64_C(1) << a->lane;
        ntbf__fm_commit(fm, a, &plan);
        ntbf_plan_free(&plan);
}

static struct fm_alloc *find_seq(struct ntbf__fm *fm, uint64_t seq)
{
        for (struct fm_alloc *a = fm->allocs; a; a = a->next)
                if (a->seq == seq)
                        return a;
        return NULL;
}

/* sx_release: a client gives back one of its allocations. */
static void op_release(struct ntbf__fm *fm, struct fm_op *op)
{
        uint64_t seq;
        if (!ntbf__jget_u(op->p, "handle", &seq))
                return op_fail(fm, -EINVAL, "sx_release needs a handle");
        struct fm_alloc *a = find_seq(fm, seq);
        if (!a || a->kind < A_SX_CONNECT || a->node != op->from)
                return op_fail(fm, NTBF_ENOTFOUND, "'%s' holds no SISCI allocation %" PRIu64,
                               nname(fm, op->from), seq);
        a->self_quit = true;
        struct fm_alloc *v[1] = {a};
        ntbf__fm_release(fm, v, 1, NULL);
}

static bool listed(struct json_object *list, uint64_t session)
{
        for (size_t i = 0; list && i < json_object_array_length(list); i++)
                if ((uint64_t)json_object_get_int64(json_object_array_get_idx(list, i)) == session)
                        return true;
        return false;
}

/*
 * sx_end: client sessions of a node are gone (keep: false, the listed ones) or every session
 * but the listed ones is (keep: true, a node registering after its daemon or the manager
 * restarted). Their exports go (connectors are told), their allocations are released.
 */
static void op_end(struct ntbf__fm *fm, struct fm_op *op)
{
        struct json_object *list = NULL;
        json_object_object_get_ex(op->p, "sessions", &list);
        bool keep = b(op->p, "keep");
        size_t n = 0, cap = 0;
        struct fm_alloc **v = NULL;
        /* Exports first: what uses them is told it is lost. */
        for (struct sx_export **pp = &fm->sx->ex; *pp;) {
                struct sx_export *e = *pp;
                uint32_t node = e->kind == SXE_DEVSEG ? e->creator : e->node;
                uint64_t s = e->kind == SXE_DEVSEG ? e->creator_session : e->session;
                if (node != op->from || listed(list, s) == keep) {
                        pp = &e->next;
                        continue;
                }
                struct fm_alloc **w;
                size_t k = users_of(fm, e, &w);
                tell_gone(fm, e, w, k);
                for (size_t i = 0; i < k; i++) {
                        if (n == cap) {
                                cap = cap ? cap * 2 : 16;
                                v = realloc(v, cap * sizeof(*v));
                        }
                        v[n++] = w[i];
                }
                free(w);
                *pp = e->next;
                free_export(fm, e);
        }
        for (struct fm_alloc *a = fm->allocs; a; a = a->next) {
                if (a->kind < A_SX_CONNECT || a->node != op->from ||
                    listed(list, a->session) == keep)
                        continue;
                bool have = false;
                for (size_t i = 0; i < n; i++)
                        have |= v[i] == a;
                if (have)
                        continue;
                a->self_quit = true;
                if (n == cap) {
                        cap = cap ? cap * 2 : 16;
                        v = realloc(v, cap * sizeof(*v));
                }
                v[n++] = a;
        }
        if (n)
                LOG_I("releasing %zu SISCI allocation%s of ended sessions of '%s'", n,
                      n == 1 ? "" : "s", nname(fm, op->from));
        ntbf__fm_release(fm, v, n, NULL);
        free(v);
}

void ntbf__fm_sx_expire(struct ntbf__fm *fm, uint32_t n)
{
        /*
         * The node's exports go. Their users elsewhere hear "lost" now; the expiry then releases
         * them with the node's own allocations (ntbf__fm_sx_uses_node: they name the node as
         * the export's owner, which device segments of the node's sessions placed elsewhere are
         * made to do here).
         */
        for (struct sx_export **pp = &fm->sx->ex; *pp;) {
                struct sx_export *e = *pp;
                if (e->node != n && !(e->kind == SXE_DEVSEG && e->creator == n)) {
                        pp = &e->next;
                        continue;
                }
                struct fm_alloc **w;
                size_t k = users_of(fm, e, &w);
                tell_gone(fm, e, w, k);
                for (size_t i = 0; i < k; i++)
                        w[i]->enode = n;
                free(w);
                *pp = e->next;
                free_export(fm, e);
        }
}

/* ---- device mappings --------------------------------------------------------------------------
 */

/* sx_dmap: a device held by the node reaches memory (a segment, or a multicast group). */
static void op_dmap(struct ntbf__fm *fm, struct fm_op *op)
{
        const struct ntbf_topo *t = fm->t;
        uint32_t fdid = (uint32_t)u(op->p, "fdid", NTBF_NONE);
        struct fm_fn *f = ntbf__fm_fn(fm, fdid);
        if (!f)
                return op_fail(fm, NTBF_ENOTFOUND, "no device has fdid 0x%04x", fdid);
        struct fm_alloc *sb = NULL;
        uint32_t lender = ntbf__fm_fn_node(fm, f);
        if (lender != op->from && !(sb = ntbf__fm_find_borrow(fm, fdid, op->from)))
                return op_fail(fm, -EPERM, "0x%04x is neither a device of '%s' nor borrowed by it",
                               fdid, nname(fm, op->from));
        struct ntbf_request req;
        ntbf_request_init(&req, NTBF_REQ_MAP_DEVICE);
        req.requester = (struct ntbf_requester){lender, f->device, f->function};
        uint64_t group = u(op->p, "group", UINT64_MAX), size = u(op->p, "size", 0),
                 addr = u(op->p, "addr", 0), node = u(op->p, "node", NTBF_NONE);
        if (group <= UINT32_MAX)
                req.target =
                    (struct ntbf_target){NTBF_TARGET_MCAST, NTBF_NONE, addr, size, (uint32_t)group};
        else if (node < t->nnodes)
                req.target = (struct ntbf_target){NTBF_TARGET_MEM, (uint32_t)node, addr, size, 0};
        else
                return op_fail(fm, -EINVAL, "sx_dmap needs a target node or group");
        /*
         * The adapter the device's DMA enters the asking node by (SCIMapLocalSegmentForDevice's
         * adapter, article 6.3): the core resolves the lender's adapter along the least-latency
         * path to it. Only memory of the asking node enters through one of its adapters.
         */
        uint32_t to = (uint32_t)u(op->p, "to_adapter", NTBF_NONE);
        if (to != NTBF_NONE) {
                if (to >= t->nadapters || t->adapters[to].node != op->from)
                        return op_fail(fm, -EINVAL,
                                       "sx_dmap: to_adapter must be an adapter of '%s'",
                                       nname(fm, op->from));
                if (req.target.kind != NTBF_TARGET_MEM || req.target.node != op->from)
                        return op_fail(fm, -EINVAL,
                                       "sx_dmap: an adapter of '%s' is named, but the memory is "
                                       "not in '%s'",
                                       nname(fm, op->from), nname(fm, op->from));
                req.to_adapter = to;
        }
        struct ntbf_plan plan;
        int r = ntbf_admit(fm->s, &req, &plan);
        if (r) {
                char why[600];
                return op_fail(fm, r, "%s", refusal(r, &plan, why, sizeof(why)));
        }
        struct fm_alloc *a = calloc(1, sizeof(*a));
        if (!a) {
                ntbf_plan_free(&plan);
                return op_fail(fm, -ENOMEM, "out of memory");
        }
        *a = (struct fm_alloc){.kind = A_SX_DMAP,
                               .fdid = fdid,
                               .node = op->from,
                               .parent = sb ? sb->seq : 0,
                               .session = u(op->p, "session", 0),
                               .ekind = (uint32_t)u(op->p, "ekind", 0),
                               .enode = (uint32_t)u(op->p, "enode", NTBF_NONE),
                               .eid = (uint32_t)u(op->p, "eid", 0),
                               .lane = (uint32_t)u(op->p, "etag", NTBF_NONE)};
        ntbf__fm_commit(fm, a, &plan);
        ntbf_plan_free(&plan);
}

/* ---- device segments ------------------------------------------------------------------------- */

struct memop {
        struct ntbf__fm *fm;
        struct sx_export *e;
};

static void mem_answer(void *arg, int err, const char *msg, struct json_object *res)
{
        struct memop *m = arg;
        struct ntbf__fm *fm = m->fm;
        struct sx_export *e = m->e;
        free(m);
        uint64_t addr = 0;
        if (!err && !ntbf__jget_u(res, "addr", &addr))
                err = NTBF_EPROTO;
        json_object_put(res);
        if (err) {
                uint32_t node = e->node;
                free(e);
                return op_fail(fm, err, "cannot allocate device segment memory on '%s': %s",
                               nname(fm, node), msg ? msg : ntbf_strerror(err));
        }
        e->addr = addr;
        e->next = fm->sx->ex;
        fm->sx->ex = e;
        devseg_save(fm, e);
        struct json_object *o = json_object_new_object();
        ntbf__jput_s(o, "node", nname(fm, e->node));
        ntbf__jput_u(o, "addr", addr);
        ntbf__fm_finish(fm, 0, NULL, o);
}

/*
 * Where a device segment's memory goes by its access hints (docs/sisci.md has the table):
 * near its readers, since writes are posted and reads across the fabric are round trips.
 * What several hosts read (MULTIHOST_READ: the creator writes, other hosts read) sits in the
 * creator's host; what devices read or write peer to peer, and what the device reads and no
 * host reads (a submission queue, written by one host or by several), in the device's host;
 * everything else (a completion queue: the host reads; no hints) in the creator's host.
 */
static bool placed_near_device(uint32_t hints)
{
        if ((hints & SX_MULTIHOST) && (hints & SX_HOST_READ))
                return false;
        if (hints & SX_P2P)
                return true;
        return (hints & SX_DEVICE_READ) && !(hints & SX_HOST_READ);
}

/* sx_devseg: memory for a device's queues, placed by the access hints or the flags. */
static void op_devseg(struct ntbf__fm *fm, struct fm_op *op)
{
        uint32_t fdid = (uint32_t)u(op->p, "fdid", NTBF_NONE), id = (uint32_t)u(op->p, "id", 0),
                 memtype = (uint32_t)u(op->p, "memtype", 0), hints = (uint32_t)u(op->p, "hints", 0);
        uint64_t size = u(op->p, "size", 0), session = u(op->p, "session", 0);
        struct fm_fn *f = ntbf__fm_fn(fm, fdid);
        if (!f)
                return op_fail(fm, NTBF_ENOTFOUND, "no device has fdid 0x%04x", fdid);
        uint32_t lender = ntbf__fm_fn_node(fm, f);
        if (lender != op->from && !ntbf__fm_find_borrow(fm, fdid, op->from))
                return op_fail(fm, -EPERM, "0x%04x is not borrowed by '%s'", fdid,
                               nname(fm, op->from));
        if (find_devseg(fm, fdid, id, memtype, op->from, session))
                return op_fail(fm, NTBF_EEXISTS, "device 0x%04x already has %s segment %u", fdid,
                               memtype == SX_MEMTYPE_SHARED ? "shared" : "private", id);
        const char *place = "hints";
        ntbf__jget_s(op->p, "place", &place);
        bool near_device = placed_near_device(hints);
        if (!strcmp(place, "device"))
                near_device = true;
        else if (!strcmp(place, "host"))
                near_device = false;
        struct sx_export *e = calloc(1, sizeof(*e));
        struct memop *m = calloc(1, sizeof(*m));
        if (!e || !m) {
                free(e);
                free(m);
                return op_fail(fm, -ENOMEM, "out of memory");
        }
        *e = (struct sx_export){.node = near_device ? lender : op->from,
                                .kind = SXE_DEVSEG,
                                .id = id,
                                .size = size,
                                .available = true,
                                .fdid = fdid,
                                .memtype = memtype,
                                .creator = op->from,
                                .creator_session = session,
                                .tag = fm->sx->next_tag++};
        if (!ntbf__fm_connected(fm, e->node)) {
                free(e);
                free(m);
                return op_fail(fm, NTBF_EUNREACHABLE,
                               "'%s' must hold the segment and is unreachable",
                               nname(fm, near_device ? lender : op->from));
        }
        LOG_I("device segment %u of 0x%04x (%" PRIu64 " bytes, hints 0x%x) placed on '%s'", id,
              fdid, size, hints, nname(fm, e->node));
        m->fm = fm;
        m->e = e;
        struct json_object *p = json_object_new_object();
        ntbf__jput_u(p, "size", size);
        fm->net.request(fm->net.ctx, e->node, "sx_mem", p, mem_answer, m);
}

/* ---- holds: SISCI borrows by the lender's own processes ------------------------------------- */

int ntbf__fm_sx_hold_conflict(struct ntbf__fm *fm, const struct fm_fn *f, bool exclusive, char *why,
                              size_t len)
{
        (void)fm;
        if (f->hold == 2) {
                snprintf(why, len, "is held exclusively by a process on its lender");
                return NTBF_EBUSY;
        }
        if (f->hold && exclusive) {
                snprintf(why, len,
                         "is used by a process on its lender; an exclusive borrow must "
                         "wait until it returns the device");
                return NTBF_EBUSY;
        }
        return 0;
}

/* sx_hold {fdid, mode}: the lender's processes hold its device (0 none, 1 shared, 2 excl). */
static void op_hold(struct ntbf__fm *fm, struct fm_op *op)
{
        uint32_t fdid = (uint32_t)u(op->p, "fdid", NTBF_NONE), mode = (uint32_t)u(op->p, "mode", 0);
        struct fm_fn *f = ntbf__fm_fn(fm, fdid);
        if (!f || ntbf__fm_fn_node(fm, f) != op->from || mode > 2)
                return op_fail(fm, NTBF_ENOTFOUND, "0x%04x is not a device of '%s'", fdid,
                               nname(fm, op->from));
        if (mode && (!f->lent || f->lost))
                return op_fail(fm, NTBF_ENOTFOUND, "0x%04x is not in the pool (lend it first)",
                               fdid);
        if (mode && !f->available && !f->hold)
                return op_fail(fm, NTBF_EBUSY, "0x%04x is unavailable", fdid);
        for (struct fm_alloc *a = fm->allocs; a && mode; a = a->next) {
                if (a->kind != A_BORROW || a->fdid != fdid)
                        continue;
                if (a->exclusive || mode == 2)
                        return op_fail(fm, NTBF_EBUSY, "0x%04x is borrowed %s by '%s'", fdid,
                                       a->exclusive ? "exclusively" : "(shared)",
                                       nname(fm, a->node));
        }
        f->hold = (uint8_t)mode;
        ntbf__fm_finish(fm, 0, NULL, json_object_new_object());
}

/* sx_mode {fdid}: the node's borrow becomes shared (SCIReleaseExclusiveBorrow). */
static void op_mode(struct ntbf__fm *fm, struct fm_op *op)
{
        uint32_t fdid = (uint32_t)u(op->p, "fdid", NTBF_NONE);
        struct fm_alloc *a = ntbf__fm_find_borrow(fm, fdid, op->from);
        if (!a)
                return op_fail(fm, NTBF_ENOTFOUND, "0x%04x is not borrowed by '%s'", fdid,
                               nname(fm, op->from));
        if (a->exclusive) {
                a->exclusive = false;
                if (ntbf__fm_save_alloc(fm, a)) {
                        a->exclusive = true; /* as recorded */
                        return op_fail(fm, -EIO,
                                       "the manager cannot record it in its database (%s); the "
                                       "borrow stays exclusive; try again",
                                       ntbf__fm_store_error(fm));
                }
                LOG_I("'%s' shares its exclusive borrow of 0x%04x", nname(fm, op->from), fdid);
        }
        ntbf__fm_finish(fm, 0, NULL, json_object_new_object());
}

/* ---- requester registrations ------------------------------------------------------------------
 */

/* sx_requester {session, adapter, bus, devfn}: a device of the node reaches its adapter's mappings.
 */
static void op_requester(struct ntbf__fm *fm, struct fm_op *op)
{
        const struct ntbf_topo *t = fm->t;
        uint32_t ad = (uint32_t)u(op->p, "adapter", NTBF_NONE);
        uint64_t bus = u(op->p, "bus", 256), devfn = u(op->p, "devfn", 256);
        if (ad >= t->nadapters || t->adapters[ad].node != op->from || bus > 255 || devfn > 255)
                return op_fail(fm, -EINVAL,
                               "sx_requester needs an adapter of '%s', a bus and a devfn",
                               nname(fm, op->from));
        uint32_t rid = (uint32_t)(bus << 8 | devfn), dev = NTBF_NONE, fn = 0;
        const struct ntbf_node *me = &t->nodes[op->from];
        for (uint32_t i = 0; i < me->ndevices && dev == NTBF_NONE; i++)
                for (uint32_t f = 0; f < ntbf_device_nfuncs(&t->devices[me->devices[i]]); f++)
                        if (ntbf_device_rid(&t->devices[me->devices[i]], f) == rid) {
                                dev = me->devices[i];
                                fn = f;
                                break;
                        }
        if (dev == NTBF_NONE)
                return op_fail(fm, NTBF_ENOTFOUND,
                               "'%s' has no device at %02x:%02x.%u in the cluster file (only "
                               "devices the file describes are modeled)",
                               nname(fm, op->from), (unsigned)bus, (unsigned)devfn >> 3,
                               (unsigned)devfn & 7);
        struct ntbf_request req;
        ntbf_request_init(&req, NTBF_REQ_REQUESTER);
        req.requester = (struct ntbf_requester){op->from, dev, fn};
        req.via_adapter = ad;
        struct ntbf_plan plan;
        int r = ntbf_admit(fm->s, &req, &plan);
        if (r) {
                char why[600];
                return op_fail(fm, r, "%s", refusal(r, &plan, why, sizeof(why)));
        }
        struct fm_alloc *a = calloc(1, sizeof(*a));
        if (!a) {
                ntbf_plan_free(&plan);
                return op_fail(fm, -ENOMEM, "out of memory");
        }
        *a = (struct fm_alloc){.kind = A_SX_REQ,
                               .fdid = NTBF_NONE,
                               .node = op->from,
                               .session = u(op->p, "session", 0),
                               .lane = NTBF_NONE};
        ntbf__fm_commit(fm, a, &plan);
        ntbf_plan_free(&plan);
}

/* ---- dispatch ----------------------------------------------------------------------------------
 */

static const struct {
        const char *m;
        void (*fn)(struct ntbf__fm *, struct fm_op *);
} ops[] = {
    {"sx_export", op_export},       {"sx_unexport", op_unexport}, {"sx_connect", op_connect},
    {"sx_release", op_release},     {"sx_end", op_end},           {"sx_dmap", op_dmap},
    {"sx_devseg", op_devseg},       {"sx_hold", op_hold},         {"sx_mode", op_mode},
    {"sx_requester", op_requester},
};

bool ntbf__fm_sx_request(struct ntbf__fm *fm, uint32_t from, const char *m, struct json_object *p,
                         ntbf__done_fn cb, void *arg)
{
        for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
                if (!strcmp(m, ops[i].m)) {
                        if (!p || !json_object_is_type(p, json_type_object)) {
                                fail(cb, arg, -EINVAL, "%s needs parameters", m);
                                return true;
                        }
                        ntbf__fm_enqueue(fm, from, m, p, cb, arg);
                        return true;
                }
        return false;
}

static void op_devseg_gone(struct ntbf__fm *fm, struct fm_op *op);

bool ntbf__fm_sx_start(struct ntbf__fm *fm, struct fm_op *op)
{
        if (!strcmp(op->m, "sx_devseg_gone")) { /* queued by the manager only */
                op_devseg_gone(fm, op);
                return true;
        }
        for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
                if (!strcmp(op->m, ops[i].m)) {
                        ops[i].fn(fm, op);
                        return true;
                }
        return false;
}

static void ignore(void *arg, int err, const char *msg, struct json_object *res)
{
        (void)arg;
        if (err)
                LOG_W("re-registering SISCI state: %s", msg ? msg : ntbf_strerror(err));
        json_object_put(res);
}

/* sx_devseg_gone (queued by the manager itself): the memory of device segment `tag` is gone
 * with its node's daemon; the segment goes, its users hear "lost". */
static void op_devseg_gone(struct ntbf__fm *fm, struct fm_op *op)
{
        uint32_t tag = (uint32_t)u(op->p, "tag", 0);
        for (struct sx_export *e = fm->sx->ex; e; e = e->next)
                if (e->kind == SXE_DEVSEG && e->tag == tag) {
                        e->addr = 0; /* nothing to free there any more */
                        return drop_export(fm, e);
                }
        ntbf__fm_finish(fm, 0, NULL, json_object_new_object());
}

/*
 * The memory node `from` lists for device segments against the registry: memory no segment
 * accounts for (its answer was lost, or the segment went while the node was away) is freed
 * there; a segment whose memory the node no longer holds (its daemon restarted) goes.
 */
static void register_mems(struct ntbf__fm *fm, uint32_t from, struct json_object *mems)
{
        /* The segments to drop are queued once the registry is walked: a queued mutation may
         * run at once and change it. */
        struct json_object *gone = json_object_new_array();
        for (struct sx_export *e = fm->sx->ex; e; e = e->next) {
                if (e->kind != SXE_DEVSEG || e->node != from || !e->addr)
                        continue;
                bool held = false;
                for (size_t i = 0; mems && i < json_object_array_length(mems) && !held; i++)
                        held = u(json_object_array_get_idx(mems, i), "addr", 0) == e->addr;
                if (held)
                        continue;
                LOG_W("device segment %u of 0x%04x: '%s' no longer holds its memory; it goes",
                      e->id, e->fdid, nname(fm, from));
                json_object_array_add(gone, json_object_new_uint64(e->tag));
        }
        for (size_t i = 0; i < json_object_array_length(gone); i++) {
                struct json_object *q = json_object_new_object();
                json_object_object_add(q, "tag",
                                       json_object_get(json_object_array_get_idx(gone, i)));
                ntbf__fm_enqueue(fm, from, "sx_devseg_gone", q, ignore, NULL);
                json_object_put(q);
        }
        json_object_put(gone);
        for (size_t i = 0; mems && i < json_object_array_length(mems); i++) {
                struct json_object *m = json_object_array_get_idx(mems, i);
                uint64_t addr = u(m, "addr", 0);
                bool used = false;
                for (struct sx_export *e = fm->sx->ex; e && !used; e = e->next)
                        used = e->kind == SXE_DEVSEG && e->node == from && e->addr == addr;
                if (used)
                        continue;
                LOG_W("'%s' holds %" PRIu64 " bytes at 0x%" PRIx64
                      " for a device segment that no longer exists: freed",
                      nname(fm, from), u(m, "size", 0), addr);
                struct json_object *n = json_object_new_object();
                ntbf__jput_u(n, "addr", addr);
                ntbf__jput_u(n, "size", u(m, "size", 0));
                fm->net.notify(fm->net.ctx, from, "sx_memfree", n);
        }
}

void ntbf__fm_sx_register(struct ntbf__fm *fm, uint32_t from, struct json_object *p)
{
        struct json_object *sx, *sessions = NULL, *exports = NULL;
        if (!json_object_object_get_ex(p, "sx", &sx))
                sx = NULL;
        struct json_object *mems = NULL;
        if (sx) {
                json_object_object_get_ex(sx, "sessions", &sessions);
                json_object_object_get_ex(sx, "exports", &exports);
                json_object_object_get_ex(sx, "mems", &mems);
        }
        register_mems(fm, from, mems);
        /* Everything of sessions the node no longer has goes; then its exports are refreshed. */
        struct json_object *q = json_object_new_object();
        json_object_object_add(q, "sessions",
                               sessions ? json_object_get(sessions) : json_object_new_array());
        ntbf__jput_b(q, "keep", true);
        ntbf__fm_enqueue(fm, from, "sx_end", q, ignore, NULL);
        json_object_put(q);
        for (size_t i = 0; exports && i < json_object_array_length(exports); i++)
                ntbf__fm_enqueue(fm, from, "sx_export", json_object_array_get_idx(exports, i),
                                 ignore, NULL);
        /* The lender's own holds, as the node lists them. */
        struct json_object *holds = NULL;
        if (sx)
                json_object_object_get_ex(sx, "holds", &holds);
        for (uint32_t i = 0; i < fm->nfn; i++)
                if (ntbf__fm_fn_node(fm, &fm->fn[i]) == from)
                        fm->fn[i].hold = 0;
        for (size_t i = 0; holds && i < json_object_array_length(holds); i++) {
                struct json_object *h = json_object_array_get_idx(holds, i);
                struct fm_fn *f = ntbf__fm_fn(fm, (uint32_t)u(h, "fdid", NTBF_NONE));
                uint64_t mode = u(h, "mode", 0);
                if (f && ntbf__fm_fn_node(fm, f) == from && mode <= 2 && mode > f->hold)
                        f->hold = (uint8_t)mode;
        }
}
