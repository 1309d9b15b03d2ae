/* daemon/methods.c: the JSON-RPC methods a node daemon serves (docs/rpc.md). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "host.h"
#include "vfio.h"
#include "log.h"
#include "ntbfab/error.h"

#ifndef NTBF_VERSION
#define NTBF_VERSION "0"
#endif

static const char *node_name(struct ntbf__d *d, uint32_t n)
{
        return d->t->nodes[n].name;
}

static void failed(struct ntbf__rpc_call *call, int err, const char *msg)
{
        ntbf__rpc_fail(call, NTBF_RPC_FAILED, err, "%s", msg && msg[0] ? msg : ntbf_strerror(err));
}

/* An answer from the manager (or a peer) becomes the call's answer. */
static void pass(void *arg, int err, const char *msg, struct json_object *res)
{
        struct ntbf__rpc_call *call = arg;
        if (err)
                return failed(call, err, msg);
        ntbf__rpc_result(call, res);
}

static bool need_fm(struct ntbf__d *d, struct ntbf__rpc_call *call)
{
        if (d->stopping) {
                ntbf__rpc_fail(call, NTBF_RPC_FAILED, -ESHUTDOWN, "the daemon of '%s' is stopping",
                               node_name(d, d->self));
                return false;
        }
        if (d->fm_ready)
                return true;
        ntbf__rpc_fail(call, NTBF_RPC_FAILED, NTBF_EUNREACHABLE,
                       "fabric manager '%s' unreachable: lends, borrows and returns wait for it; "
                       "check 'ntbfab status' and start its daemon (ntbfab up)",
                       node_name(d, d->manager));
        return false;
}

static uint64_t u(struct json_object *p, const char *k, uint64_t dflt)
{
        uint64_t v;
        return ntbf__jget_u(p, k, &v) ? v : dflt;
}

/* ---- node and cluster ---------------------------------------------------------------------- */

static void m_node_status(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        (void)p;
        struct ntbf__d *d = ctx;
        const struct ntbf_topo *t = d->t;
        struct json_object *o = json_object_new_object(), *ads = json_object_new_array(),
                           *peers = json_object_new_array(), *devs = json_object_new_array();
        ntbf__jput_s(o, "node", node_name(d, d->self));
        ntbf__jput_u(o, "id", t->nodes[d->self].id);
        ntbf__jput_s(o, "cluster", t->name);
        ntbf__jput_s(o, "manager", node_name(d, d->manager));
        ntbf__jput_b(o, "manager_reachable", d->fm_ready && ntbf__peer_connected(d, d->manager));
        ntbf__jput_u(o, "uptime_ms", ntbf__now_ms() - d->start_ms);
        ntbf__jput_s(o, "version", NTBF_VERSION);
        ntbf__jput_u(o, "pid", (uint64_t)getpid());
        ntbf__jput_s(o, "config", d->config_path);
        ntbf__jput_s(o, "socket", d->sock_path);
        ntbf__jput_s(o, "backend_dir", d->dir);
        const struct ntbf_node *me = &t->nodes[d->self];
        for (uint32_t i = 0; i < me->nadapters; i++) {
                uint32_t a = me->adapters[i];
                char name[80], peer[96];
                snprintf(name, sizeof(name), "%s.%s", me->name, t->adapters[a].name);
                struct json_object *j = json_object_new_object(), *ports = json_object_new_array(),
                                   *c = json_object_new_object();
                ntbf__jput_s(j, "name", name);
                ntbf__jput_u(j, "index", a);
                for (uint32_t k = 0; k < t->adapters[a].p.ports; k++) {
                        bool up = false;
                        d->ops->link_state(d->h[a], k, &up);
                        struct ntbf_port_ref pr = {NTBF_PORT_ADAPTER, a, k};
                        uint32_t l = ntbf_topo_port_link(t, pr);
                        struct json_object *x = json_object_new_object();
                        ntbf__jput_u(x, "port", k);
                        ntbf__jput_b(x, "up", up);
                        ntbf__jput_s(x, "peer",
                                     l == NTBF_NONE
                                         ? NULL
                                         : ntbf_port_name(t, ntbf_link_peer(&t->links[l], pr), peer,
                                                          sizeof(peer)));
                        json_object_array_add(ports, x);
                }
                /* An adapter whose hardware counts nothing (no NTBF_CAP_COUNTERS): null. */
                struct ntbf_counters ct = {0};
                if ((d->caps[a].flags & NTBF_CAP_COUNTERS) && d->ops->counters &&
                    !d->ops->counters(d->h[a], &ct)) {
                        ntbf__jput_u(c, "tx", ct.tx);
                        ntbf__jput_u(c, "rx", ct.rx);
                        ntbf__jput_u(c, "drop_no_rid", ct.drop_no_rid);
                        ntbf__jput_u(c, "drop_unprogrammed", ct.drop_unprogrammed);
                        ntbf__jput_u(c, "drop_link_down", ct.drop_link_down);
                        ntbf__jput_u(c, "master_abort", ct.master_abort);
                        ntbf__jput_u(c, "iommu_fault", ct.iommu_fault);
                } else {
                        json_object_put(c);
                        c = NULL;
                }
                json_object_object_add(j, "ports", ports);
                json_object_object_add(j, "counters", c);
                json_object_object_add(j, "proxy_ids", ntbf__hw_proxies(d, a));
                json_object_array_add(ads, j);
        }
        for (uint32_t n = 0; n < t->nnodes; n++) {
                if (n == d->self)
                        continue;
                struct json_object *j = json_object_new_object();
                uint64_t s = ntbf__peer_silence_ms(d, n);
                ntbf__jput_s(j, "node", node_name(d, n));
                ntbf__jput_b(j, "connected", ntbf__peer_connected(d, n));
                json_object_object_add(j, "last_heartbeat_ms",
                                       s == UINT64_MAX ? NULL : json_object_new_uint64(s));
                json_object_array_add(peers, j);
        }
        for (uint32_t i = 0; i < me->ndevices; i++) {
                uint32_t dv = me->devices[i];
                for (uint32_t f = 0; f < ntbf_device_nfuncs(&t->devices[dv]); f++) {
                        uint32_t fdid = ntbf__fdid_of(t, dv, f);
                        struct ntbf__lend *l = ntbf__node_lend(d, fdid);
                        struct json_object *j = json_object_new_object(),
                                           *bs = json_object_new_array();
                        char bdf[32];
                        ntbf__jput_u(j, "fdid", fdid);
                        ntbf__jput_s(j, "name", t->devices[dv].name);
                        ntbf__jput_s(j, "bdf", ntbf__func_bdf(t, dv, f, bdf, sizeof(bdf)));
                        ntbf__jput_b(j, "lent", l != NULL);
                        ntbf__jput_b(j, "available", l && l->available);
                        for (uint32_t n = 0; l && n < t->nnodes && n < 32; n++)
                                if (l->borrowers >> n & 1)
                                        json_object_array_add(
                                            bs, json_object_new_string(node_name(d, n)));
                        json_object_object_add(j, "borrowers", bs);
                        uint64_t faults = 0;
                        struct ntbf_adapter_h *h = ntbf__hw_any(d, NTBF_CAP_DEV_IOMMU);
                        if (h && d->ops->dev_iommu_faults)
                                d->ops->dev_iommu_faults(h, dv, f, &faults);
                        ntbf__jput_u(j, "iommu_faults", faults);
                        json_object_array_add(devs, j);
                }
        }
        json_object_object_add(o, "adapters", ads);
        json_object_object_add(o, "peers", peers);
        json_object_object_add(o, "devices", devs);
        unsigned nb = 0, nh = 0;
        for (struct ntbf__borrow *b = d->borrows; b; b = b->next)
                nb++;
        for (struct ntbf__handle *h = d->handles; h; h = h->next)
                nh++;
        ntbf__jput_u(o, "borrows", nb);
        ntbf__jput_u(o, "handles", nh);
        ntbf__jput_u(o, "programmed", d->programmed.n);
        ntbf__rpc_result(call, o);
}

static void m_cluster_status(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        (void)p;
        struct ntbf__d *d = ctx;
        if (!ntbf__peer_connected(d, d->manager))
                return (void)need_fm(d, call);
        ntbf__peer_request(d, d->manager, "status", NULL, pass, call);
}

/* ---- the whole cluster through this daemon ----------------------------------------------------
 */

/* What an operator may ask of another node's daemon through this one (cluster.call). */
static const char *const forwardable[] = {"node.status",
                                          "rpc.list",
                                          "device.lend",
                                          "device.unlend",
                                          "device.available",
                                          "device.unavailable",
                                          "device.borrow",
                                          "device.return",
                                          "device.borrows",
                                          "device.lspci",
                                          NULL};

bool ntbf__forwardable(const char *method)
{
        for (size_t i = 0; forwardable[i]; i++)
                if (!strcmp(forwardable[i], method))
                        return true;
        return false;
}

static void m_rpc_list(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        (void)p;
        struct ntbf__d *d = ctx;
        struct json_object *list = ntbf__rpc_list(&d->rpc), *o = json_object_new_object();
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                struct json_object *m = json_object_array_get_idx(list, i), *n;
                json_object_object_get_ex(m, "name", &n);
                json_object_object_add(
                    m, "forwardable",
                    json_object_new_boolean(ntbf__forwardable(json_object_get_string(n))));
        }
        json_object_object_add(o, "methods", list);
        ntbf__rpc_result(call, o);
}

/*
 * An operator's call for another node (or this one): sent to that node's daemon over the
 * authenticated peer session, run there as if asked on its own socket (docs/rpc.md).
 */
static void m_cluster_call(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        const char *node = NULL, *method = NULL;
        struct json_object *params = NULL;
        ntbf__jget_s(p, "node", &node);
        ntbf__jget_s(p, "method", &method);
        json_object_object_get_ex(p, "params", &params);
        uint32_t n = ntbf_topo_find_node(d->t, node);
        if (n == NTBF_NONE)
                return ntbf__rpc_fail(call, NTBF_RPC_PARAMS, 0, "cluster '%s' has no node '%.64s'",
                                      d->t->name, node);
        if (!ntbf__forwardable(method))
                return ntbf__rpc_fail(call, NTBF_RPC_PARAMS, 0,
                                      "method '%.64s' cannot be called on another node: call it "
                                      "on that node's own socket (rpc.list says which can)",
                                      method);
        if (n == d->self)
                return ntbf__rpc_invoke(&d->rpc, method, params, pass, call);
        struct json_object *q = json_object_new_object();
        ntbf__jput_s(q, "method", method);
        json_object_object_add(q, "params",
                               params ? json_object_get(params) : json_object_new_object());
        ntbf__peer_request(d, n, "rpc", q, pass, call);
}

static void finish_now(uv_timer_t *t)
{
        ntbf__d_finish(t->data);
}

static void m_node_shutdown(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        bool keep = false;
        ntbf__jget_b(p, "keep", &keep);
        ntbf__rpc_result(call, NULL);
        if (keep) {
                /* An upgrade: nothing is returned or unlent; the hardware stays programmed and
                 * a start within the lease resumes everything (docs/operations.md). */
                LOG_I("stop asked for by a client (node.shutdown), keeping every lend and "
                      "borrow: start again within the lease (%u ms)",
                      d->t->opts.lease_ms);
                ntbf__host_notify_stopping();
                d->stopping = true;
                /* From the loop, once this answer is on its way. */
                uv_timer_start(&d->shutdown_timer, finish_now, 0, 0);
                return;
        }
        LOG_I("stop asked for by a client (node.shutdown)");
        ntbf__node_shutdown(d);
}

static void m_subscribe(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        (void)ctx;
        (void)p;
        struct ntbf__rpc_conn *c = ntbf__rpc_call_conn(call);
        if (c)
                c->subscribed = true;
        ntbf__rpc_result(call, NULL);
}

/* ---- lending ------------------------------------------------------------------------------- */

struct lendop {
        struct ntbf__d *d;
        struct ntbf__rpc_call *call;
        uint32_t fdid;
        int kind; /* 0 lend, 1 unlend, 2 avail */
        bool available;
        bool real; /* a real device, taken for VFIO by this lend (daemon/vfio.c) */
};

static void lend_done(void *arg, int err, const char *msg, struct json_object *res)
{
        struct lendop *op = arg;
        struct ntbf__d *d = op->d;
        uint32_t dev, fn;
        if (op->real && ((op->kind == 0 && err) || (op->kind == 1 && !err)) &&
            !ntbf__fdid_resolve(d->t, op->fdid, &dev, &fn))
                ntbf__vfiod_unlend(d, dev, fn); /* back to its driver unless handles hold it */
        if (!err) {
                if (op->kind == 1) {
                        for (struct ntbf__lend **pp = &d->lends; *pp; pp = &(*pp)->next)
                                if ((*pp)->fdid == op->fdid) {
                                        struct ntbf__lend *l = *pp;
                                        *pp = l->next;
                                        free(l);
                                        break;
                                }
                        char key[16];
                        snprintf(key, sizeof(key), "%u", op->fdid);
                        ntbf__store_del(d->st, NTBF_T_LENDS, key);
                } else {
                        struct ntbf__lend *l = ntbf__node_lend(d, op->fdid);
                        if (!l && (l = calloc(1, sizeof(*l)))) {
                                l->fdid = op->fdid;
                                l->next = d->lends;
                                d->lends = l;
                        }
                        if (l) {
                                l->available = op->available;
                                ntbf__node_save_lend(d, l);
                        }
                }
        }
        pass(op->call, err, msg, res);
        free(op);
}

static void lend_common(struct ntbf__d *d, struct ntbf__rpc_call *call, struct json_object *p,
                        int kind, bool available)
{
        const char *bdf = NULL;
        uint32_t dev, fn;
        ntbf__jget_s(p, "bdf", &bdf);
        if (ntbf__func_by_bdf(d->t, d->self, bdf, &dev, &fn))
                return ntbf__rpc_fail(call, NTBF_RPC_FAILED, NTBF_ENOTFOUND,
                                      "no device function of '%s' at %s; see 'ntbfab lspci --node "
                                      "%s'",
                                      node_name(d, d->self), bdf, node_name(d, d->self));
        if (!need_fm(d, call))
                return;
        bool real = ntbf__vfiod_is(d, dev);
        if (real && kind == 0) {
                /* The lender binds itself as the device's driver first (docs/daemon.md, "Real
                 * devices"). */
                bool force = false;
                char why[1024];
                ntbf__jget_b(p, "force", &force);
                int r = ntbf__vfiod_lend(d, dev, fn, force, why, sizeof(why));
                if (r)
                        return ntbf__rpc_fail(call, NTBF_RPC_FAILED, r, "cannot lend %s: %s", bdf,
                                              why);
        }
        struct json_object *q = json_object_new_object();
        if (kind == 0 && ntbf__bars_host_placed(d->t, dev)) {
                /* The manager programs the BARs where the kernel placed them. */
                char why[512];
                struct json_object *bars = ntbf__vfiod_bars(d, dev, fn, why, sizeof(why));
                if (!bars) {
                        json_object_put(q);
                        if (real)
                                ntbf__vfiod_unlend(d, dev, fn);
                        return ntbf__rpc_fail(call, NTBF_RPC_FAILED, NTBF_ECONFIG,
                                              "cannot lend %s: %s", bdf, why);
                }
                json_object_object_add(q, "bars", bars);
        }
        struct lendop *op = calloc(1, sizeof(*op));
        *op = (struct lendop){d, call, ntbf__fdid_of(d->t, dev, fn), kind, available, real};
        ntbf__jput_u(q, "fdid", op->fdid);
        if (kind == 1) {
                bool force = false;
                ntbf__jget_b(p, "force", &force);
                ntbf__jput_b(q, "force", force);
        } else {
                ntbf__jput_b(q, "available", available);
        }
        ntbf__peer_request(d, d->manager,
                           kind == 0   ? "lend"
                           : kind == 1 ? "unlend"
                                       : "avail",
                           q, lend_done, op);
}

static void m_lend(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        bool avail = true;
        ntbf__jget_b(p, "available", &avail);
        lend_common(ctx, call, p, 0, avail);
}

static void m_unlend(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        lend_common(ctx, call, p, 1, false);
}

static void m_available(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        lend_common(ctx, call, p, 2, true);
}

static void m_unavailable(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        lend_common(ctx, call, p, 2, false);
}

/* ---- borrowing ----------------------------------------------------------------------------- */

static void m_list(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        if (!ntbf__peer_connected(d, d->manager))
                return (void)need_fm(d, call);
        ntbf__peer_request(d, d->manager, "list", json_object_get(p), pass, call);
}

struct borrowop {
        struct ntbf__d *d;
        struct ntbf__rpc_call *call;
        bool attach;
        uint32_t fdid;
        int err;
        char msg[600];
};

static void attach_undone(void *arg, int err, const char *msg, struct json_object *res)
{
        struct borrowop *op = arg;
        json_object_put(res);
        if (err)
                LOG_W("returning 0x%04x after its attach failed: %s", op->fdid, msg);
        else
                ntbf__node_drop_borrow(op->d, op->fdid, NULL);
        failed(op->call, op->err, op->msg);
        free(op);
}

/* The kernel took the device, or not: then the borrow goes back, and the caller hears why. */
static void attached(void *arg, int err, const char *msg, struct json_object *res)
{
        struct borrowop *op = arg;
        struct ntbf__d *d = op->d;
        json_object_put(res);
        struct ntbf__borrow *b = ntbf__node_borrow(d, op->fdid);
        if (!err && b) {
                if (ntbf__rpc_answer(op->call, json_object_get(b->json))) {
                        /* As borrowed(): nobody learned of it, so nobody would return it. */
                        ntbf__kern_detach(d, b, false);
                        ntbf__node_drop_borrow(d, op->fdid, NULL);
                        ntbf__node_return_unheld(d, op->fdid,
                                                 "its client hung up before the answer");
                } else {
                        ntbf__node_event(d, "device.borrowed", op->fdid, NULL, NULL);
                }
                free(op);
                return;
        }
        op->err = err ? err : NTBF_ENOTFOUND;
        snprintf(op->msg, sizeof(op->msg), "%s", err ? msg : "the borrow ended meanwhile");
        struct json_object *p = json_object_new_object();
        ntbf__jput_u(p, "fdid", op->fdid);
        ntbf__peer_request(d, d->manager, "return", p, attach_undone, op);
}

static void borrowed(void *arg, int err, const char *msg, struct json_object *res)
{
        struct borrowop *op = arg;
        struct ntbf__d *d = op->d;
        struct ntbf__rpc_call *call = op->call;
        if (err) {
                free(op);
                return failed(call, err, msg);
        }
        struct ntbf__borrow *b = NULL;
        uint64_t fdid = 0;
        ntbf__jget_u(res, "fdid", &fdid);
        b = ntbf__node_add_borrow(d, res);
        json_object_put(res);
        if (!b) {
                free(op);
                return ntbf__rpc_fail(call, NTBF_RPC_INTERNAL, -ENOMEM, "cannot record the borrow");
        }
        const char *bdf = "";
        ntbf__jget_s(b->json, "local_bdf", &bdf);
        LOG_I("borrowed 0x%04x from '%s' as %s", b->fdid, node_name(d, b->lender), bdf);
        if (op->attach) {
                op->fdid = b->fdid;
                ntbf__crash_point(d, "attach");
                return ntbf__kern_attach(d, b, attached, op);
        }
        free(op);
        if (ntbf__rpc_answer(call, json_object_get(b->json))) {
                /* Policy (docs/daemon.md): its client hung up before the answer could be
                 * written; nobody learned of the borrow, so nobody would return it. */
                ntbf__node_drop_borrow(d, (uint32_t)fdid, NULL);
                ntbf__node_return_unheld(d, (uint32_t)fdid, "its client hung up before the answer");
                return;
        }
        ntbf__node_event(d, "device.borrowed", b->fdid, NULL, NULL);
}

static void m_borrow(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        if (!need_fm(d, call))
                return;
        bool attach = false;
        char why[512];
        ntbf__jget_b(p, "attach", &attach);
        /* Before anything is taken: is there a kernel module to hand the device to? */
        int r = attach ? ntbf__kern_open(d, why, sizeof(why)) : 0;
        if (r)
                return failed(call, r, why);
        struct borrowop *op = calloc(1, sizeof(*op));
        if (!op)
                return ntbf__rpc_fail(call, NTBF_RPC_INTERNAL, -ENOMEM, "out of memory");
        *op = (struct borrowop){.d = d, .call = call, .attach = attach};
        ntbf__peer_request(d, d->manager, "borrow", json_object_get(p), borrowed, op);
}

struct returnop {
        struct ntbf__d *d;
        struct ntbf__rpc_call *call;
        uint32_t fdid;
};

static void returned(void *arg, int err, const char *msg, struct json_object *res)
{
        struct returnop *op = arg;
        if (!err || err == NTBF_ENOTFOUND) {
                /* Not borrowed per the manager either way: the shadow goes. */
                if (!err || ntbf__node_borrow(op->d, op->fdid)) {
                        ntbf__node_drop_borrow(op->d, op->fdid, "returned");
                        LOG_I("returned 0x%04x", op->fdid);
                }
        }
        if (!err)
                ntbf__node_event(op->d, "device.returned", op->fdid, NULL, NULL);
        pass(op->call, err, msg, res);
        free(op);
}

static void m_return(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        if (!need_fm(d, call))
                return;
        struct returnop *op = calloc(1, sizeof(*op));
        if (!op)
                return ntbf__rpc_fail(call, NTBF_RPC_INTERNAL, -ENOMEM, "out of memory");
        *op = (struct returnop){d, call, (uint32_t)u(p, "fdid", 0)};
        /* The kernel's driver lets go first (docs/kernel.md), then the borrow ends. */
        struct ntbf__borrow *b = ntbf__node_borrow(d, op->fdid);
        if (b)
                ntbf__kern_detach(d, b, false);
        ntbf__peer_request(d, d->manager, "return", json_object_get(p), returned, op);
}

static void m_borrows(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        (void)p;
        struct ntbf__d *d = ctx;
        struct json_object *a = json_object_new_array();
        for (struct ntbf__borrow *b = d->borrows; b; b = b->next)
                json_object_array_add(a, json_object_get(b->json));
        ntbf__rpc_result(call, a);
}

/* ---- VM pass-through: mdev instances (kmdev.c) --------------------------------------------- */

static void m_mdev_list(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        (void)p;
        struct json_object *out = NULL;
        char why[512];
        int r = ntbf__kmdev_list(ctx, &out, why, sizeof(why));
        if (r)
                return failed(call, r, why);
        ntbf__rpc_result(call, out);
}

static void m_mdev_create(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct json_object *out = NULL;
        const char *uuid = NULL;
        char why[512];
        ntbf__jget_s(p, "uuid", &uuid);
        int r = ntbf__kmdev_create(ctx, (uint32_t)u(p, "fdid", 0), uuid, &out, why, sizeof(why));
        if (r)
                return failed(call, r, why);
        ntbf__rpc_result(call, out);
}

static void m_mdev_remove(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        const char *uuid = "";
        char why[512];
        ntbf__jget_s(p, "uuid", &uuid);
        int r = ntbf__kmdev_remove(ctx, uuid, why, sizeof(why));
        if (r)
                return failed(call, r, why);
        ntbf__rpc_result(call, json_object_new_object());
}

static struct json_object *local_fn_json(struct ntbf__d *d, uint32_t dev, uint32_t f)
{
        const struct ntbf_device *x = &d->t->devices[dev];
        char bdf[32];
        struct json_object *o = json_object_new_object(), *bars = json_object_new_array();
        ntbf__jput_s(o, "bdf", ntbf__func_bdf(d->t, dev, f, bdf, sizeof(bdf)));
        ntbf__jput_u(o, "fdid", ntbf__fdid_of(d->t, dev, f));
        ntbf__jput_s(o, "name", x->name);
        ntbf__jput_u(o, "vendor", x->vendor_id);
        ntbf__jput_u(o, "device", x->device_id);
        ntbf__jput_u(o, "class", x->class_code);
        for (uint32_t b = 0; b < NTBF_MAX_BARS; b++) {
                uint64_t size = ntbf_device_bar_size(x, f, b);
                if (!size)
                        continue;
                struct json_object *j = json_object_new_object();
                ntbf__jput_u(j, "bar", b);
                ntbf__jput_u(j, "size", size);
                ntbf__jput_u(j, "addr", ntbf_device_bar_addr(x, f, b));
                json_object_array_add(bars, j);
        }
        json_object_object_add(o, "bars", bars);
        ntbf__jput_b(o, "borrowed", false);
        ntbf__jput_s(o, "lender", NULL);
        ntbf__jput_s(o, "lender_bdf", NULL);
        return o;
}

static void m_lspci(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        (void)p;
        struct ntbf__d *d = ctx;
        struct json_object *a = json_object_new_array();
        const struct ntbf_node *me = &d->t->nodes[d->self];
        for (uint32_t i = 0; i < me->ndevices; i++)
                for (uint32_t f = 0; f < ntbf_device_nfuncs(&d->t->devices[me->devices[i]]); f++)
                        json_object_array_add(a, local_fn_json(d, me->devices[i], f));
        for (struct ntbf__borrow *b = d->borrows; b; b = b->next) {
                struct json_object *o = local_fn_json(d, b->device, b->function), *bars;
                const char *s = NULL;
                ntbf__jget_s(b->json, "local_bdf", &s);
                ntbf__jput_s(o, "bdf", s);
                if (json_object_object_get_ex(b->json, "bars", &bars))
                        json_object_object_add(o, "bars", json_object_get(bars));
                ntbf__jput_b(o, "borrowed", true);
                ntbf__jput_s(o, "lender", node_name(d, b->lender));
                ntbf__jget_s(b->json, "lender_bdf", &s);
                ntbf__jput_s(o, "lender_bdf", s);
                /* In this kernel: its PCI address and peer mappings (docs/kernel.md). */
                struct json_object *att;
                if (json_object_object_get_ex(b->json, "attached", &att))
                        json_object_object_add(o, "attached", json_object_get(att));
                /* Held for a VM: its ntbfab_mdev instance (the record a restart takes over). */
                if (json_object_object_get_ex(b->json, "mdev", &att))
                        json_object_object_add(o, "mdev", json_object_get(att));
                json_object_array_add(a, o);
        }
        ntbf__rpc_result(call, a);
}

/* ---- the device API ------------------------------------------------------------------------ */

static struct ntbf__handle *handle_of(struct ntbf__d *d, struct ntbf__rpc_call *call,
                                      struct json_object *p, const char *key)
{
        uint64_t id = u(p, key, 0);
        struct ntbf__rpc_conn *c = ntbf__rpc_call_conn(call);
        for (struct ntbf__handle *h = d->handles; h; h = h->next)
                if (h->id == id && h->conn == c)
                        return h;
        ntbf__rpc_fail(call, NTBF_RPC_FAILED, NTBF_ENOTFOUND,
                       "no open handle %" PRIu64 " on this connection (handles belong to the "
                       "connection that opened them)",
                       id);
        return NULL;
}

static bool handle_usable(struct ntbf__d *d, struct ntbf__rpc_call *call, struct ntbf__handle *h)
{
        (void)d;
        if (!h->lost)
                return true;
        ntbf__rpc_fail(call, NTBF_RPC_FAILED, NTBF_EUNREACHABLE,
                       "device 0x%04x was lost (returned, reclaimed or its lender died); close the "
                       "handle",
                       h->fdid);
        return false;
}

/* Hops (adapters and switches) and latency of a path JSON. */
static void path_cost(struct json_object *path, uint32_t *hops, uint32_t *lat)
{
        struct json_object *hv;
        uint64_t l = 0;
        *hops = 0;
        ntbf__jget_u(path, "latency_ns", &l);
        *lat = (uint32_t)l;
        if (!json_object_object_get_ex(path, "hops", &hv))
                return;
        for (size_t i = 0; i < json_object_array_length(hv); i++) {
                const char *k = "";
                ntbf__jget_s(json_object_array_get_idx(hv, i), "kind", &k);
                *hops += !strcmp(k, "adapter") || !strcmp(k, "switch");
        }
}

static struct json_object *open_json(struct ntbf__d *d, struct ntbf__handle *h)
{
        const struct ntbf_topo *t = d->t;
        const struct ntbf_device *x = &t->devices[h->device];
        struct ntbf__borrow *b = h->local ? NULL : ntbf__node_borrow(d, h->fdid);
        struct json_object *o = json_object_new_object(), *info = json_object_new_object(),
                           *ibars = json_object_new_array(), *bars = json_object_new_array();
        char bdf[32];
        ntbf__jput_u(o, "handle", h->id);
        ntbf__jput_u(info, "fdid", h->fdid);
        ntbf__jput_b(info, "local", h->local);
        const char *local_bdf = NULL;
        if (b)
                ntbf__jget_s(b->json, "local_bdf", &local_bdf);
        ntbf__func_bdf(t, h->device, h->function, bdf, sizeof(bdf));
        ntbf__jput_s(info, "bdf", local_bdf ? local_bdf : bdf);
        ntbf__jput_s(info, "lender_bdf", bdf);
        ntbf__jput_s(info, "lender", node_name(d, x->node));
        ntbf__jput_u(info, "vendor_id", x->vendor_id);
        ntbf__jput_u(info, "device_id", x->device_id);
        ntbf__jput_u(info, "class_code", x->class_code);
        struct json_object *bbars = NULL;
        if (b)
                json_object_object_get_ex(b->json, "bars", &bbars);
        for (uint32_t i = 0; i < NTBF_MAX_BARS; i++) {
                uint64_t size = ntbf_device_bar_size(x, h->function, i), addr = 0;
                struct json_object *ib = json_object_new_object(), *bb;
                struct json_object *from = NULL;
                for (size_t k = 0; bbars && k < json_object_array_length(bbars); k++) {
                        uint64_t n;
                        bb = json_object_array_get_idx(bbars, k);
                        if (ntbf__jget_u(bb, "bar", &n) && n == i)
                                from = bb;
                }
                if (size)
                        addr = b ? u(from, "addr", 0) : ntbf_device_bar_addr(x, h->function, i);
                bool pref = i < NTBF_MAX_BARS && h->function < x->functions
                                ? (x->bars[i].flags & NTBF_BAR_PREF) != 0
                                : true;
                ntbf__jput_u(ib, "size", size);
                ntbf__jput_u(ib, "addr", addr);
                ntbf__jput_b(ib, "prefetchable", size && pref);
                json_object_array_add(ibars, ib);
                if (!size)
                        continue;
                struct json_object *j = json_object_new_object();
                ntbf__jput_u(j, "bar", i);
                ntbf__jput_u(j, "size", size);
                ntbf__jput_u(j, "addr", addr);
                if (b && from) {
                        ntbf__jput_u(j, "adapter", u(from, "adapter", 0));
                        ntbf__jput_u(j, "window", u(from, "window", 0));
                        ntbf__jput_u(j, "offset", u(from, "offset", 0));
                } else {
                        json_object_object_add(j, "adapter", NULL);
                        json_object_object_add(j, "window", NULL);
                        json_object_object_add(j, "offset", NULL);
                }
                json_object_array_add(bars, j);
        }
        json_object_object_add(info, "bars", ibars);
        ntbf__jput_u(info, "msix_vectors", x->sim.msix);
        uint32_t hops = 0, lat = 0;
        struct json_object *dma = NULL, *msi = NULL, *path = NULL;
        if (b) {
                json_object_object_get_ex(b->json, "dma", &dma);
                json_object_object_get_ex(b->json, "msi", &msi);
                if (json_object_object_get_ex(b->json, "path", &path))
                        path_cost(path, &hops, &lat);
        }
        uint64_t win = dma ? u(dma, "size", 0) : 0;
        ntbf__jput_u(info, "dma_window", win);
        ntbf__jput_u(info, "hops", hops);
        ntbf__jput_u(info, "latency_ns", lat);
        json_object_object_add(o, "info", info);
        json_object_object_add(o, "bars", bars);
        if (b && dma && msi) {
                json_object_object_add(o, "dma", json_object_get(dma));
                json_object_object_add(o, "msi", json_object_get(msi));
                /* This handle's share of the window (docs/rpc.md: a quarter each). */
                uint64_t share = win / NTBF_SHARES & ~UINT64_C(4095);
                struct json_object *iova = json_object_new_object();
                ntbf__jput_u(iova, "base", u(dma, "iova", 0) + (uint64_t)h->share * share);
                ntbf__jput_u(iova, "size", share);
                json_object_object_add(o, "iova", iova);
        }
        return o;
}

static void m_open(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        const struct ntbf_topo *t = d->t;
        uint64_t fdid;
        const char *bdf;
        bool by_fdid = ntbf__jget_u(p, "fdid", &fdid), by_bdf = ntbf__jget_s(p, "bdf", &bdf);
        if (by_fdid == by_bdf)
                return ntbf__rpc_fail(call, NTBF_RPC_PARAMS, 0,
                                      "device.open takes exactly one of 'fdid' and 'bdf'");
        struct ntbf__borrow *b = NULL;
        uint32_t dev = 0, fn = 0;
        if (by_bdf) {
                for (struct ntbf__borrow *x = d->borrows; x && !b; x = x->next) {
                        const char *s = NULL;
                        uint16_t d1, d2;
                        uint8_t b1, b2, v1, v2, f1, f2;
                        if (ntbf__jget_s(x->json, "local_bdf", &s) &&
                            !ntbf_bdf_parse(s, &d1, &b1, &v1, &f1) &&
                            !ntbf_bdf_parse(bdf, &d2, &b2, &v2, &f2) && d1 == d2 && b1 == b2 &&
                            v1 == v2 && f1 == f2)
                                b = x;
                }
                if (b) {
                        fdid = b->fdid;
                } else if (ntbf__func_by_bdf(t, d->self, bdf, &dev, &fn)) {
                        return ntbf__rpc_fail(call, NTBF_RPC_FAILED, NTBF_ENOTFOUND,
                                              "no device at %s on '%s' (local, or a borrowed "
                                              "device's shadow); see 'ntbfab lspci --node %s'",
                                              bdf, node_name(d, d->self), node_name(d, d->self));
                } else {
                        fdid = ntbf__fdid_of(t, dev, fn);
                }
        } else {
                b = ntbf__node_borrow(d, (uint32_t)fdid);
                if (!b && (ntbf__fdid_resolve(t, (uint32_t)fdid, &dev, &fn) ||
                           t->devices[dev].node != d->self))
                        return ntbf__rpc_fail(call, NTBF_RPC_FAILED, NTBF_ENOTFOUND,
                                              "0x%04x is neither a device of '%s' nor borrowed by "
                                              "it; borrow it first (ntbfab borrow)",
                                              (uint32_t)fdid, node_name(d, d->self));
        }
        struct json_object *att;
        if (b && json_object_object_get_ex(b->json, "attached", &att)) {
                const char *pci = "";
                ntbf__jget_s(att, "pci", &pci);
                return ntbf__rpc_fail(call, NTBF_RPC_FAILED, NTBF_EBUSY,
                                      "0x%04x is attached to this kernel as %s: its kernel driver "
                                      "owns it; 'ntbfab return 0x%04x --node %s' detaches it, "
                                      "then borrow it without --attach",
                                      b->fdid, pci, b->fdid, node_name(d, d->self));
        }
        struct ntbf__handle *h = calloc(1, sizeof(*h));
        if (!h)
                return ntbf__rpc_fail(call, NTBF_RPC_INTERNAL, -ENOMEM, "out of memory");
        h->id = ++d->next_handle;
        h->conn = ntbf__rpc_call_conn(call);
        h->fdid = (uint32_t)fdid;
        h->share = -1;
        if (b) {
                h->device = b->device;
                h->function = b->function;
                for (int s = 0; s < NTBF_SHARES && h->share < 0; s++)
                        if (!(b->shares >> s & 1))
                                h->share = s;
                if (h->share < 0) {
                        free(h);
                        return ntbf__rpc_fail(call, NTBF_RPC_FAILED, NTBF_EBUSY,
                                              "all %d shares of the DMA window of 0x%04x are held "
                                              "by open handles; close one",
                                              NTBF_SHARES, (uint32_t)fdid);
                }
                b->shares |= 1u << h->share;
        } else {
                h->local = true;
                h->device = dev;
                h->function = fn;
                struct ntbf__lend *l = ntbf__node_lend(d, h->fdid);
                struct ntbf__rpc_conn *oc = ntbf__rpc_call_conn(call);
                /* A SISCI process of the lender shares the device with its borrowers. */
                if (l && l->borrowers && !(oc && ntbf__sx_pid_holds(d, oc->pid, h->fdid))) {
                        free(h);
                        return ntbf__rpc_fail(call, NTBF_RPC_FAILED, NTBF_EBUSY,
                                              "0x%04x is lent out and borrowed; it is used "
                                              "through its borrower until it is returned",
                                              (uint32_t)fdid);
                }
        }
        if (h->local && ntbf__vfiod_is(d, dev)) {
                char why[1024], name[32];
                int r = ntbf__vfiod_open(d, h, why, sizeof(why));
                if (r) {
                        free(h);
                        return ntbf__rpc_fail(call, NTBF_RPC_FAILED, r, "cannot open %s: %s",
                                              ntbf__func_bdf(t, dev, fn, name, sizeof(name)), why);
                }
        }
        h->next = d->handles;
        d->handles = h;
        if (h->local && ntbf__vfiod_is(d, dev))
                return ntbf__vfiod_answer(d, call, h, open_json(d, h));
        ntbf__rpc_result(call, open_json(d, h));
}

static void unmapped(void *arg, int err, const char *msg, struct json_object *res)
{
        (void)arg;
        json_object_put(res);
        if (err)
                LOG_W("releasing a peer mapping: %s", msg);
}

void ntbf__handle_close(struct ntbf__d *d, struct ntbf__handle *h)
{
        for (struct ntbf__handle **pp = &d->handles; *pp; pp = &(*pp)->next)
                if (*pp == h) {
                        *pp = h->next;
                        break;
                }
        while (h->maps) {
                struct ntbf__map *m = h->maps;
                h->maps = m->next;
                if (ntbf__peer_connected(d, d->manager)) {
                        struct json_object *p = json_object_new_object();
                        ntbf__jput_u(p, "seq", m->seq);
                        ntbf__peer_request(d, d->manager, "unmap", p, unmapped, NULL);
                }
                free(m);
        }
        struct ntbf__borrow *b = h->local ? NULL : ntbf__node_borrow(d, h->fdid);
        if (b && h->share >= 0)
                b->shares &= ~(1u << h->share);
        if (h->local && ntbf__vfiod_is(d, h->device))
                ntbf__vfiod_close(d, h);
        free(h);
}

/* ---- backend.relay: a process of the node asks the hardware's owner (backend.h) ---------- */

/*
 * The request and the answer are the backend's own bytes, in hexadecimal; the descriptors
 * serve gives travel with the answer. A relayed process's things end with its connection
 * (client_gone, below).
 */
static void m_relay(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        uint64_t adapter = 0;
        const char *hex = "";
        ntbf__jget_u(p, "adapter", &adapter);
        ntbf__jget_s(p, "req", &hex);
        struct ntbf__rpc_conn *c = ntbf__rpc_call_conn(call);
        if (adapter >= d->t->nadapters || !d->h[adapter])
                return ntbf__rpc_fail(call, NTBF_RPC_PARAMS, -EINVAL,
                                      "adapter %" PRIu64 " is not one of node %s's", adapter,
                                      node_name(d, d->self));
        if (!d->ops->serve)
                return ntbf__rpc_fail(call, NTBF_RPC_FAILED, NTBF_EUNSUPPORTED,
                                      "the %s backend has nothing to relay: every process reaches "
                                      "its hardware itself",
                                      d->ops->name);
        uint8_t req[NTBF_RPC_MAX_STRING / 2], ans[256];
        size_t n = strlen(hex), got = 0;
        if (n % 2 || n / 2 > sizeof(req))
                return ntbf__rpc_fail(call, NTBF_RPC_PARAMS, -EINVAL,
                                      "req is an even number of hexadecimal digits, at most %zu",
                                      2 * sizeof(req));
        for (size_t i = 0; i < n / 2; i++) {
                unsigned v;
                if (sscanf(hex + 2 * i, "%2x", &v) != 1 || !isxdigit((unsigned char)hex[2 * i]) ||
                    !isxdigit((unsigned char)hex[2 * i + 1]))
                        return ntbf__rpc_fail(call, NTBF_RPC_PARAMS, -EINVAL,
                                              "req is not hexadecimal at character %zu", 2 * i);
                req[i] = (uint8_t)v;
        }
        int fds[8];
        unsigned nfds = 0;
        int r = d->ops->serve(d->h[adapter], c ? c->id : 0, req, n / 2, ans, sizeof(ans), &got, fds,
                              8, &nfds);
        if (r)
                return failed(call, r, NULL);
        char out[2 * sizeof(ans) + 1];
        for (size_t i = 0; i < got && i < sizeof(ans); i++)
                snprintf(out + 2 * i, 3, "%02x", ans[i]);
        out[2 * (got < sizeof(ans) ? got : sizeof(ans))] = 0;
        struct json_object *res = json_object_new_object();
        ntbf__jput_s(res, "ans", out);
        static const char *const names[8] = {"fd0", "fd1", "fd2", "fd3",
                                             "fd4", "fd5", "fd6", "fd7"};
        if (nfds)
                ntbf__rpc_result_fds(call, res, fds, names, nfds);
        else
                ntbf__rpc_result(call, res);
        for (unsigned i = 0; i < nfds; i++)
                close(fds[i]);
}

void ntbf__methods_conn_gone(void *ctx, struct ntbf__rpc_conn *c)
{
        struct ntbf__d *d = ctx;
        /* What the backend gave the connection's process (relayed memory) comes back. */
        if (d->ops && d->ops->client_gone && d->h)
                for (uint32_t a = 0; a < d->t->nadapters; a++)
                        if (d->h[a])
                                d->ops->client_gone(d->h[a], c->id);
        ntbf__sx_conn_gone(d, c);
        for (struct ntbf__handle *h = d->handles, *next; h; h = next) {
                next = h->next;
                if (h->conn == c)
                        ntbf__handle_close(d, h);
        }
}

static void m_close(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct ntbf__handle *h = handle_of(d, call, p, "handle");
        if (!h)
                return;
        ntbf__handle_close(d, h);
        ntbf__rpc_result(call, NULL);
}

/* Config space: local devices directly; borrowed ones through the lender, intercepted. */
struct cfgop {
        struct ntbf__d *d;
        struct ntbf__rpc_call *call;
        uint32_t fdid, lender;
        bool write;
        uint32_t off, size, val;
        struct ntbf__cfgw w[2];
        int nw, done;
};

static void cfg_send(struct cfgop *op);

static void cfg_answer(void *arg, int err, const char *msg, struct json_object *res)
{
        struct cfgop *op = arg;
        if (err) {
                json_object_put(res);
                failed(op->call, err, msg);
                free(op);
                return;
        }
        struct ntbf__borrow *b = ntbf__node_borrow(op->d, op->fdid);
        if (!b) {
                json_object_put(res);
                ntbf__rpc_fail(op->call, NTBF_RPC_FAILED, NTBF_EUNREACHABLE,
                               "device 0x%04x was lost meanwhile", op->fdid);
                free(op);
                return;
        }
        if (!b->icpt.known) {
                uint64_t cap = 0;
                ntbf__jget_u(res, "msi", &cap);
                ntbf__jget_b(res, "msi64", &b->icpt.msi64);
                b->icpt.msi_cap = (uint32_t)cap;
                b->icpt.known = true;
                json_object_put(res);
                if (op->write)
                        op->nw = ntbf__icpt_write(&b->icpt, op->off, op->size, op->val, op->w);
                return cfg_send(op);
        }
        if (!op->write) {
                uint64_t v = 0;
                ntbf__jget_u(res, "value", &v);
                json_object_put(res);
                struct json_object *o = json_object_new_object();
                ntbf__jput_u(o, "value", ntbf__icpt_read(&b->icpt, op->off, op->size, (uint32_t)v));
                ntbf__rpc_result(op->call, o);
                free(op);
                return;
        }
        json_object_put(res);
        if (++op->done < op->nw)
                return cfg_send(op);
        ntbf__rpc_result(op->call, NULL);
        free(op);
}

static void cfg_send(struct cfgop *op)
{
        struct ntbf__borrow *b = ntbf__node_borrow(op->d, op->fdid);
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "fdid", op->fdid);
        if (!b || !b->icpt.known) {
                ntbf__jput_s(q, "op", "info");
        } else if (!op->write) {
                ntbf__jput_s(q, "op", "r");
                ntbf__jput_u(q, "off", op->off);
                ntbf__jput_u(q, "size", op->size);
        } else {
                ntbf__jput_s(q, "op", "w");
                ntbf__jput_u(q, "off", op->w[op->done].off);
                ntbf__jput_u(q, "size", op->w[op->done].size);
                ntbf__jput_u(q, "value", op->w[op->done].val);
        }
        ntbf__peer_request(op->d, op->lender, "cfg", q, cfg_answer, op);
}

static void cfg_common(struct ntbf__d *d, struct ntbf__rpc_call *call, struct json_object *p,
                       bool write)
{
        struct ntbf__handle *h = handle_of(d, call, p, "handle");
        if (!h || !handle_usable(d, call, h))
                return;
        uint32_t off = (uint32_t)u(p, "offset", 0), size = (uint32_t)u(p, "size", 4),
                 val = (uint32_t)u(p, "value", 0);
        if (!ntbf__icpt_valid(off, size))
                return ntbf__rpc_fail(call, NTBF_RPC_PARAMS, 0,
                                      "parameter 'offset' must be aligned to 'size' (1, 2 or 4) "
                                      "and below 4096");
        if (write && size < 4 && val >> (8 * size))
                return ntbf__rpc_fail(call, NTBF_RPC_PARAMS, 0,
                                      "parameter 'value' does not fit in %u byte%s", size,
                                      size == 1 ? "" : "s");
        if (h->local) {
                int r = ntbf__node_cfg(d, h->device, h->function, write, off, size, &val);
                if (r)
                        return ntbf__rpc_fail(call, NTBF_RPC_FAILED, r, "config access failed: %s",
                                              ntbf_strerror(r));
                struct json_object *o = NULL;
                if (!write) {
                        o = json_object_new_object();
                        ntbf__jput_u(o, "value", val);
                }
                return ntbf__rpc_result(call, o);
        }
        struct ntbf__borrow *b = ntbf__node_borrow(d, h->fdid);
        struct cfgop *op = calloc(1, sizeof(*op));
        *op = (struct cfgop){d, call, h->fdid, b->lender, write, off, size, val};
        if (write && b->icpt.known)
                op->nw = ntbf__icpt_write(&b->icpt, off, size, val, op->w);
        cfg_send(op);
}

static void m_cfg_read(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        cfg_common(ctx, call, p, false);
}

static void m_cfg_write(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        cfg_common(ctx, call, p, true);
}

/* Peer-to-peer (article 4.4): the manager resolves the shortest path and programs it. */
struct mapop {
        struct ntbf__d *d;
        struct ntbf__rpc_call *call;
        uint64_t handle;
};

static void mapped(void *arg, int err, const char *msg, struct json_object *res)
{
        struct mapop *op = arg;
        struct ntbf__d *d = op->d;
        if (err) {
                failed(op->call, err, msg);
                free(op);
                return;
        }
        struct ntbf__handle *h = NULL;
        for (struct ntbf__handle *x = d->handles; x; x = x->next)
                if (x->id == op->handle)
                        h = x;
        uint64_t seq = 0, addr = 0;
        ntbf__jget_u(res, "seq", &seq);
        ntbf__jget_u(res, "device_addr", &addr);
        if (!h) { /* closed meanwhile: give it back */
                struct json_object *p = json_object_new_object();
                ntbf__jput_u(p, "seq", seq);
                ntbf__peer_request(d, d->manager, "unmap", p, unmapped, NULL);
                json_object_put(res);
                ntbf__rpc_fail(op->call, NTBF_RPC_FAILED, NTBF_ENOTFOUND,
                               "the handle was closed meanwhile");
                free(op);
                return;
        }
        struct ntbf__map *m = calloc(1, sizeof(*m));
        m->seq = seq;
        m->device_addr = addr;
        m->next = h->maps;
        h->maps = m;
        struct json_object *o = json_object_new_object(), *path;
        ntbf__jput_u(o, "device_addr", addr);
        ntbf__jput_u(o, "size", u(res, "size", 0));
        if (json_object_object_get_ex(res, "path", &path))
                json_object_object_add(o, "path", json_object_get(path));
        json_object_put(res);
        ntbf__rpc_result(op->call, o);
        free(op);
}

static void m_map_peer(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct ntbf__handle *h = handle_of(d, call, p, "handle");
        if (!h || !handle_usable(d, call, h))
                return;
        struct ntbf__handle *tg = handle_of(d, call, p, "target");
        if (!tg || !handle_usable(d, call, tg) || !need_fm(d, call))
                return;
        struct json_object *q = json_object_new_object();
        ntbf__jput_u(q, "src", h->fdid);
        ntbf__jput_u(q, "target", tg->fdid);
        ntbf__jput_u(q, "bar", u(p, "bar", 0));
        struct mapop *op = calloc(1, sizeof(*op));
        *op = (struct mapop){d, call, h->id};
        ntbf__peer_request(d, d->manager, "map", q, mapped, op);
}

static void m_unmap_peer(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
{
        struct ntbf__d *d = ctx;
        struct ntbf__handle *h = handle_of(d, call, p, "handle");
        if (!h)
                return;
        uint64_t addr = u(p, "device_addr", 0);
        for (struct ntbf__map **pp = &h->maps; *pp; pp = &(*pp)->next) {
                struct ntbf__map *m = *pp;
                if (m->device_addr != addr)
                        continue;
                if (!need_fm(d, call))
                        return;
                *pp = m->next;
                struct json_object *q = json_object_new_object();
                ntbf__jput_u(q, "seq", m->seq);
                free(m);
                ntbf__peer_request(d, d->manager, "unmap", q, pass, call);
                return;
        }
        ntbf__rpc_fail(call, NTBF_RPC_FAILED, NTBF_ENOTFOUND,
                       "handle %" PRIu64 " has no peer mapping at 0x%" PRIx64, h->id, addr);
}

/* ---- the table ----------------------------------------------------------------------------- */

static const char *const modes[] = {"exclusive", "shared", NULL};
static const char *const states[] = {"available", "unavailable", "exclusive",
                                     "shared",    "lost",        NULL};

#define FDID                                                                                       \
        {                                                                                          \
                "fdid", NTBF_P_UINT, true, 0, UINT32_MAX, NULL                                     \
        }
#define BDF                                                                                        \
        {                                                                                          \
                "bdf", NTBF_P_STR, true, 0, 0, NULL                                                \
        }
#define HANDLE                                                                                     \
        {                                                                                          \
                "handle", NTBF_P_UINT, true, 1, UINT64_MAX >> 12, NULL                             \
        }

const struct ntbf__rpc_method ntbf__methods[] = {
    {"node.status", m_node_status, {{NULL}}},
    {"cluster.status", m_cluster_status, {{NULL}}},
    {"node.shutdown", m_node_shutdown, {{"keep", NTBF_P_BOOL, false, 0, 0, NULL}}},
    {"rpc.list", m_rpc_list, {{NULL}}},
    {"cluster.call",
     m_cluster_call,
     {{"node", NTBF_P_STR, true, 0, 0, NULL},
      {"method", NTBF_P_STR, true, 0, 0, NULL},
      {"params", NTBF_P_OBJECT, false, 0, 0, NULL}}},
    {"events.subscribe", m_subscribe, {{NULL}}},
    {"device.lend",
     m_lend,
     {BDF,
      {"available", NTBF_P_BOOL, false, 0, 0, NULL},
      {"force", NTBF_P_BOOL, false, 0, 0, NULL}}},
    {"device.unlend", m_unlend, {BDF, {"force", NTBF_P_BOOL, false, 0, 0, NULL}}},
    {"device.available", m_available, {BDF}},
    {"device.unavailable", m_unavailable, {BDF}},
    {"device.list",
     m_list,
     {{"class", NTBF_P_UINT, false, 0, 0xffffff, NULL},
      {"vendor", NTBF_P_UINT, false, 0, 0xffff, NULL},
      {"device", NTBF_P_UINT, false, 0, 0xffff, NULL},
      {"node", NTBF_P_STR, false, 0, 0, NULL},
      {"state", NTBF_P_ENUM, false, 0, 0, states}}},
    {"device.borrow",
     m_borrow,
     {FDID,
      {"mode", NTBF_P_ENUM, false, 0, 0, modes},
      {"dma_window", NTBF_P_UINT, false, 4096, UINT64_C(1) << 40, NULL},
      {"attach", NTBF_P_BOOL, false, 0, 0, NULL}}},
    {"device.return", m_return, {FDID}},
    {"device.borrows", m_borrows, {{NULL}}},
    {"mdev.list", m_mdev_list, {{NULL}}},
    {"mdev.create", m_mdev_create, {FDID, {"uuid", NTBF_P_STR, false, 0, 0, NULL}}},
    {"mdev.remove", m_mdev_remove, {{"uuid", NTBF_P_STR, true, 0, 0, NULL}}},
    {"device.lspci", m_lspci, {{NULL}}},
    {"device.open",
     m_open,
     {{"fdid", NTBF_P_UINT, false, 0, UINT32_MAX, NULL}, {"bdf", NTBF_P_STR, false, 0, 0, NULL}}},
    {"device.close", m_close, {HANDLE}},
    {"device.config_read",
     m_cfg_read,
     {HANDLE,
      {"offset", NTBF_P_UINT, true, 0, 4095, NULL},
      {"size", NTBF_P_UINT, true, 1, 4, NULL}}},
    {"device.config_write",
     m_cfg_write,
     {HANDLE,
      {"offset", NTBF_P_UINT, true, 0, 4095, NULL},
      {"size", NTBF_P_UINT, true, 1, 4, NULL},
      {"value", NTBF_P_UINT, true, 0, UINT32_MAX, NULL}}},
    {"device.map_peer",
     m_map_peer,
     {HANDLE,
      {"target", NTBF_P_UINT, true, 1, UINT64_MAX >> 12, NULL},
      {"bar", NTBF_P_UINT, true, 0, 5, NULL}}},
    {"device.unmap_peer",
     m_unmap_peer,
     {HANDLE, {"device_addr", NTBF_P_UINT, true, 0, UINT64_MAX, NULL}}},
    {"backend.relay",
     m_relay,
     {{"adapter", NTBF_P_UINT, true, 0, UINT32_MAX, NULL}, {"req", NTBF_P_STR, true, 0, 0, NULL}}},
    NTBF__SX_METHODS,
};

const size_t ntbf__nmethods = sizeof(ntbf__methods) / sizeof(ntbf__methods[0]);
