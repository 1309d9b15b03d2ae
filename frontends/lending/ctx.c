/* frontends/lending/ctx.c: contexts: identity, the daemon connection, the backend, errors. */
#include <errno.h>
#include <json-c/json.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ntbfab/config.h"
#include "ntbfab/rpc.h"
#include "lending.h"

/* ---- errors: one sentence per thread and context ------------------------------------------ */

/*
 * The sentence of a context's last failure is thread-local (two threads failing at once
 * each keep their own). A thread keeps the sentences of its four most recently failing
 * contexts, keyed by a process-unique id so that a new context at a freed address never
 * inherits an old sentence. Failures of ntbf_ctx_open, which has no context to hang the
 * sentence on, are kept apart and read with ntbf_ctx_error(NULL).
 */
#define ERR_SLOTS 4
#define ERR_LEN   512

struct err_slot {
        uint64_t id;
        char msg[ERR_LEN];
};
static _Thread_local struct err_slot err_slots[ERR_SLOTS];
static _Thread_local unsigned err_next;
static _Thread_local char open_err[ERR_LEN];
static atomic_uint_fast64_t ctx_ids = 1;

/*
 * The process's open contexts, for fork(): in the child, every context's copy of the
 * parent's connections is closed at once (the parent's session then ends with the parent,
 * not with its longest-lived child) and the copy makes no call (ntbf__ctx_foreign). The
 * fork takes no lock of ours (a context is opened under other libraries' locks: libsisci
 * opens one holding its own, and locks its own across fork): the list is kept whole at every
 * store instead, and the child reads it as it is.
 */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER; /* writers */
static struct ntbf_ctx *open_list;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* Close a forked child's copies of a context's connections, once. */
static void drop_copies(struct ntbf_ctx *ctx)
{
        if (ctx->rpc)
                close(ntbf_rpc_fd(ctx->rpc));
        if (ctx->ev)
                close(ntbf_rpc_fd(ctx->ev));
        if (ctx->ev_stop >= 0)
                close(ctx->ev_stop);
        ctx->rpc = ctx->ev = NULL; /* the child's copy of the pointers; the parent keeps its own */
        ctx->ev_stop = -1;
}

static void fork_child(void)
{
        for (struct ntbf_ctx *c = __atomic_load_n(&open_list, __ATOMIC_ACQUIRE); c;
             c = __atomic_load_n(&c->next_open, __ATOMIC_ACQUIRE))
                drop_copies(c);
        pthread_mutex_init(&open_lock, NULL); /* a vanished thread may have held it */
}

static void fork_setup(void)
{
        pthread_atfork(NULL, NULL, fork_child);
}

static void open_add(struct ntbf_ctx *ctx)
{
        pthread_once(&fork_once, fork_setup);
        pthread_mutex_lock(&open_lock);
        __atomic_store_n(&ctx->next_open, open_list, __ATOMIC_RELAXED);
        __atomic_store_n(&open_list, ctx, __ATOMIC_RELEASE); /* whole before it is seen */
        pthread_mutex_unlock(&open_lock);
}

static void open_del(struct ntbf_ctx *ctx)
{
        pthread_mutex_lock(&open_lock);
        for (struct ntbf_ctx **pp = &open_list; *pp; pp = &(*pp)->next_open)
                if (*pp == ctx) {
                        __atomic_store_n(pp, ctx->next_open, __ATOMIC_RELEASE);
                        break;
                }
        pthread_mutex_unlock(&open_lock);
}

static char *slot_for(const struct ntbf_ctx *ctx, bool take)
{
        if (!ctx)
                return open_err;
        for (unsigned i = 0; i < ERR_SLOTS; i++)
                if (err_slots[i].id == ctx->id)
                        return err_slots[i].msg;
        if (!take)
                return NULL;
        struct err_slot *s = &err_slots[err_next++ % ERR_SLOTS];
        s->id = ctx->id;
        return s->msg;
}

int ntbf__fail(const struct ntbf_ctx *ctx, int code, const char *fmt, ...)
{
        char *msg = slot_for(ctx, true);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, ERR_LEN, fmt, ap);
        va_end(ap);
        return code;
}

const char *ntbf_ctx_error(const struct ntbf_ctx *ctx)
{
        const char *m = slot_for(ctx, false);
        return m ? m : "";
}

/* Hand a device.lost notification to every open device with that fdid. */
static void dispatch(struct ntbf_ctx *ctx, struct json_object *ev)
{
        struct json_object *kind, *fdid;
        if (!json_object_object_get_ex(ev, "kind", &kind) ||
            !json_object_object_get_ex(ev, "fdid", &fdid) ||
            strcmp(json_object_get_string(kind), "device.lost") != 0)
                return;
        int64_t id = json_object_get_int64(fdid);
        pthread_mutex_lock(&ctx->lock);
        for (struct ntbf_dev *d = ctx->devs; d; d = d->next) {
                if ((int64_t)d->info.fdid != id)
                        continue;
                int none = 0;
                if (!atomic_compare_exchange_strong(&d->lost, &none, 1))
                        continue;
                uint64_t one = 1;
                ssize_t w = write(d->evfd, &one, sizeof(one));
                (void)w; /* an eventfd at its maximum is readable anyway */
        }
        pthread_mutex_unlock(&ctx->lock);
}

/* ---- the control connection ----------------------------------------------------------------- */

/* The sentence for a call on a context from a forked child (before any lock: a thread of the
 * parent may have held it when the process was copied). */
static int foreign_call(struct ntbf_ctx *ctx, const char *method)
{
        return ntbf__fail(ctx, -ECHILD,
                          "%s: this context was opened by process %d, and this is process %d, a "
                          "child forked from it; a child opens a context of its own "
                          "(ntbf_ctx_open), the parent's stays the parent's",
                          method ? method : "a call", (int)ctx->pid, (int)getpid());
}

int ntbf__ctx_connected(struct ntbf_ctx *ctx)
{
        if (ntbf__ctx_foreign(ctx))
                return foreign_call(ctx, NULL);
        pthread_mutex_lock(&ctx->rpc_lock);
        int r = 0;
        if (ctx->rpc_dead) {
                struct ntbf_rpc *c;
                r = ntbf_rpc_connect(ctx->sock, &c);
                if (!r) {
                        /* A new connection is a new daemon session: older handles are void. */
                        ntbf_rpc_close(ctx->rpc);
                        ctx->rpc = c;
                        ctx->gen++;
                        ctx->rpc_dead = false;
                } else {
                        ntbf__fail(ctx, r,
                                   "the daemon of node %s went away and nothing answers at %s "
                                   "(%s); start ntbfabd for the node again",
                                   ctx->node, ctx->sock, ntbf_strerror(r));
                }
        }
        pthread_mutex_unlock(&ctx->rpc_lock);
        return r;
}

int ntbf__call(struct ntbf_ctx *ctx, uint64_t gen, const char *method, struct json_object *params,
               struct json_object **result)
{
        return ntbf__call_fds(ctx, gen, method, params, result, NULL, 0, NULL);
}

int ntbf__call_fds(struct ntbf_ctx *ctx, uint64_t gen, const char *method,
                   struct json_object *params, struct json_object **result, int *fds,
                   unsigned maxfds, unsigned *nfds)
{
        *result = NULL;
        if (nfds)
                *nfds = 0;
        if (ntbf__ctx_foreign(ctx)) {
                json_object_put(params);
                return method ? foreign_call(ctx, method) : -ECHILD;
        }
        pthread_mutex_lock(&ctx->rpc_lock);
        int r;
        if (!method) {
                /* A close: a handle that died with its connection needs no call and no sentence. */
                if (ctx->rpc_dead || (gen && gen != ctx->gen)) {
                        json_object_put(params);
                        r = -EPIPE;
                } else {
                        r = ntbf_rpc_call(ctx->rpc, "device.close", params, result,
                                          ctx->timeout_ms);
                        if (r == -EPIPE)
                                ctx->rpc_dead = true;
                }
        } else if (ctx->rpc_dead) {
                json_object_put(params);
                r = ntbf__fail(ctx, -EPIPE,
                               "%s: the daemon of node %s went away (it closed the connection); "
                               "control calls fail until it is back, while BAR and DMA mappings "
                               "keep working",
                               method, ctx->node);
        } else if (gen && gen != ctx->gen) {
                json_object_put(params);
                r = ntbf__fail(ctx, -EPIPE,
                               "%s: the device was opened before the daemon of node %s restarted, "
                               "and its handle died with the old connection; close the device and "
                               "open it again",
                               method, ctx->node);
        } else {
                r = ntbf_rpc_call(ctx->rpc, method, params, result, ctx->timeout_ms);
                if (r == -EPIPE) {
                        ctx->rpc_dead = true;
                        ntbf__fail(ctx, r,
                                   "%s: the daemon of node %s went away (%s); control calls fail "
                                   "until it is back, while BAR and DMA mappings keep working",
                                   method, ctx->node, ntbf_rpc_error(ctx->rpc));
                } else if (r == -ETIMEDOUT) {
                        ntbf__fail(ctx, r,
                                   "%s: the daemon of node %s did not answer within %d ms "
                                   "(NTBFAB_RPC_TIMEOUT_MS sets the limit); is it stopped or "
                                   "overloaded?",
                                   method, ctx->node, ctx->timeout_ms);
                } else if (r) {
                        const char *m = ntbf_rpc_error(ctx->rpc);
                        ntbf__fail(ctx, r, "%s: %s", method, *m ? m : ntbf_strerror(r));
                }
        }
        if (!r && !ctx->rpc_dead) {
                /* Descriptors of this answer are taken now, under the lock, or closed. */
                int got[8];
                int n = ntbf_rpc_take_fds(ctx->rpc, got, 8);
                for (int k = 0; k < n; k++) {
                        if (fds && nfds && *nfds < maxfds)
                                fds[(*nfds)++] = got[k];
                        else
                                close(got[k]);
                }
        }
        /*
         * The daemon also sends device.lost to every connection holding the device, this one
         * included: take what arrived with the answer and hand it out (after unlocking, so
         * that the device list is never locked inside the connection's lock).
         */
        struct json_object *evs[16];
        unsigned nev = 0;
        while (!ctx->rpc_dead && nev < 16 && ntbf_rpc_next_event(ctx->rpc, &evs[nev], 0) == 0)
                nev++;
        pthread_mutex_unlock(&ctx->rpc_lock);
        for (unsigned k = 0; k < nev; k++) {
                dispatch(ctx, evs[k]);
                json_object_put(evs[k]);
        }
        return r;
}

/* ---- events ---------------------------------------------------------------------------------- */

static void *event_thread(void *arg)
{
        struct ntbf_ctx *ctx = arg;
        struct pollfd p[2] = {{ntbf_rpc_fd(ctx->ev), POLLIN, 0}, {ctx->ev_stop, POLLIN, 0}};
        for (;;) {
                /* Drain first: the subscribe call may already have queued a notification. */
                int r;
                struct json_object *ev;
                while ((r = ntbf_rpc_next_event(ctx->ev, &ev, 0)) == 0) {
                        dispatch(ctx, ev);
                        json_object_put(ev);
                }
                if (r != -EAGAIN)
                        break; /* the daemon went away: no more events on this connection */
                if (poll(p, 2, -1) < 0 && errno != EINTR)
                        break;
                if (p[1].revents)
                        break;
        }
        atomic_store(&ctx->ev_alive, false);
        return NULL;
}

static void events_stop(struct ntbf_ctx *ctx)
{
        if (!ctx->ev_started)
                return;
        uint64_t one = 1;
        ssize_t w = write(ctx->ev_stop, &one, sizeof(one));
        (void)w;
        pthread_join(ctx->ev_thread, NULL);
        uint64_t v;
        ssize_t rd = read(ctx->ev_stop, &v, sizeof(v));
        (void)rd;
        ntbf_rpc_close(ctx->ev);
        ctx->ev = NULL;
        ctx->ev_started = false;
}

void ntbf__events_start(struct ntbf_ctx *ctx)
{
        if (ntbf__ctx_foreign(ctx))
                return;
        pthread_mutex_lock(&ctx->rpc_lock);
        uint64_t gen = ctx->gen;
        pthread_mutex_unlock(&ctx->rpc_lock);
        pthread_mutex_lock(&ctx->lock);
        if ((ctx->ev_started && atomic_load(&ctx->ev_alive)) || ctx->ev_refused == gen) {
                pthread_mutex_unlock(&ctx->lock);
                return;
        }
        events_stop(ctx); /* a thread whose daemon went away: start over */
        struct json_object *res = NULL;
        if (ntbf_rpc_connect(ctx->sock, &ctx->ev) == 0) {
                /* Without events a device still works; its event fd just never fires. */
                int r = ntbf_rpc_call(ctx->ev, "events.subscribe", json_object_new_object(), &res,
                                      ctx->timeout_ms);
                if (r == -ENOSYS)
                        ctx->ev_refused = gen; /* not this daemon: do not ask again */
                if (r == 0) {
                        atomic_store(&ctx->ev_alive, true);
                        if (pthread_create(&ctx->ev_thread, NULL, event_thread, ctx) == 0)
                                ctx->ev_started = true;
                        else
                                atomic_store(&ctx->ev_alive, false);
                }
                json_object_put(res);
                if (!ctx->ev_started) {
                        ntbf_rpc_close(ctx->ev);
                        ctx->ev = NULL;
                }
        }
        pthread_mutex_unlock(&ctx->lock);
}

/* ---- open and close ---------------------------------------------------------------------- */

static int env_timeout(void)
{
        const char *s = getenv("NTBFAB_RPC_TIMEOUT_MS");
        if (s && *s) {
                char *end;
                long v = strtol(s, &end, 10);
                if (!*end && v > 0 && v <= 3600 * 1000)
                        return (int)v;
        }
        return 5000;
}

/* The cluster file: $NTBFAB_CONFIG, else DIR/cluster.yaml (docs/device-api.md). */
static int load_topology(struct ntbf_ctx *ctx)
{
        const char *env = getenv("NTBFAB_CONFIG");
        if (env && *env)
                snprintf(ctx->config, sizeof(ctx->config), "%s", env);
        else if (!ctx->config[0]) /* a host's daemon said which file it loaded */
                snprintf(ctx->config, sizeof(ctx->config), "%s/cluster.yaml", ctx->dir);
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        int r = ntbf_config_load(ctx->config, &ctx->topo, &d);
        if (r == -ENOENT && !(env && *env)) {
                r = ntbf__fail(NULL, NTBF_ENOTFOUND,
                               "no cluster file: %s does not exist and NTBFAB_CONFIG is not set; "
                               "set NTBFAB_CONFIG to the cluster's YAML file",
                               ctx->config);
        } else if (r) {
                const char *first = d.n ? d.v[0].msg : ntbf_strerror(r);
                uint32_t line = d.n ? d.v[0].loc.line : 0, col = d.n ? d.v[0].loc.col : 0;
                r = ntbf__fail(NULL, r, "cannot load the cluster file %s:%u:%u: %s", ctx->config,
                               line, col, first);
        }
        ntbf_diags_free(&d);
        return r;
}

/*
 * The backend's way to the owner of the node's hardware (backend.h): the daemon's
 * backend.relay method on ctx's control connection, the request and answer in hexadecimal.
 */
static int relay_call(void *arg, uint32_t adapter, const void *req, size_t reqlen, void *ans,
                      size_t anslen, size_t *got, int *fds, unsigned maxfds, unsigned *nfds)
{
        struct ntbf_ctx *ctx = arg;
        char hex[2 * 120 + 1];
        *got = 0;
        if (reqlen > 120)
                return -EINVAL;
        for (size_t i = 0; i < reqlen; i++)
                snprintf(hex + 2 * i, 3, "%02x", ((const uint8_t *)req)[i]);
        hex[2 * reqlen] = 0;
        struct json_object *p = json_object_new_object(), *res = NULL;
        json_object_object_add(p, "adapter", json_object_new_uint64(adapter));
        json_object_object_add(p, "req", json_object_new_string(hex));
        int r = ntbf__call_fds(ctx, 0, "backend.relay", p, &res, fds, maxfds, nfds);
        if (r)
                return r;
        struct json_object *a = NULL;
        const char *s = json_object_object_get_ex(res, "ans", &a) ? json_object_get_string(a) : "";
        size_t n = strlen(s) / 2;
        for (size_t i = 0; i < n && i < anslen; i++) {
                unsigned v = 0;
                sscanf(s + 2 * i, "%2x", &v);
                ((uint8_t *)ans)[i] = (uint8_t)v;
        }
        *got = n < anslen ? n : anslen;
        json_object_put(res);
        return 0;
}

static int attach_backend(struct ntbf_ctx *ctx)
{
        const struct ntbf_topo *t = ctx->topo;
        char no[512];
        ctx->ops = ntbf_backend_open_ops(t->backend, no, sizeof(no));
        if (!ctx->ops)
                return ntbf__fail(NULL, NTBF_EUNSUPPORTED, "the cluster file %s: %s", ctx->config,
                                  no);
        ctx->relay = (struct ntbf_backend_relay){relay_call, ctx};
        struct ntbf_backend_env env = {t, ctx->dir, ctx->node_idx, &ctx->relay};
        char why[512] = "";
        int r;
        r = ctx->ops->open(&env, &ctx->b, why, sizeof(why));
        if (r)
                return ntbf__fail(NULL, r, "cannot attach to the %s fabric in %s: %s",
                                  ctx->ops->name, ctx->dir, *why ? why : ntbf_strerror(r));
        ctx->ah = calloc(t->nadapters ? t->nadapters : 1, sizeof(*ctx->ah));
        if (!ctx->ah)
                return ntbf__fail(NULL, -ENOMEM, "out of memory");
        const struct ntbf_node *n = &t->nodes[ctx->node_idx];
        for (uint32_t i = 0; i < n->nadapters; i++) {
                uint32_t a = n->adapters[i];
                r = ctx->ops->probe(ctx->b, a, &ctx->ah[a]);
                if (r)
                        return ntbf__fail(NULL, r, "cannot open adapter %s.%s: %s", ctx->node,
                                          t->adapters[a].name, ntbf_strerror(r));
                if (!ctx->h0)
                        ctx->h0 = ctx->ah[a];
        }
        return 0;
}

static void ctx_free(struct ntbf_ctx *ctx)
{
        open_del(ctx);
        events_stop(ctx);
        ntbf_rpc_close(ctx->rpc);
        ntbf__dmamem_fini(&ctx->mem); /* before the adapters: it frees through h0 */
        if (ctx->ah)
                for (uint32_t a = 0; a < ctx->topo->nadapters; a++)
                        if (ctx->ah[a])
                                ctx->ops->release(ctx->ah[a]);
        free(ctx->ah);
        if (ctx->b)
                ctx->ops->close(ctx->b);
        ntbf_topo_free(ctx->topo);
        if (ctx->ev_stop >= 0)
                close(ctx->ev_stop);
        pthread_mutex_destroy(&ctx->rpc_lock);
        pthread_mutex_destroy(&ctx->lock);
        free(ctx);
}

static int ctx_open_at(const char *dir, const char *node, const char *sock, const char *config,
                       struct ntbf_ctx **out);
static int open_host(const char *node, struct ntbf_ctx **out);

int ntbf_ctx_open(const char *dir, const char *node, struct ntbf_ctx **out)
{
        return ctx_open_at(dir, node, NULL, NULL, out);
}

/*
 * This host's daemon (a service, docs/operations.md): it says which node it is, which
 * cluster file it loaded and where the backend's instance lives.
 */
static int open_host(const char *node, struct ntbf_ctx **out)
{
        const char *sock = ntbf_rpc_host_socket();
        struct ntbf_rpc *c;
        struct json_object *st = NULL, *v;
        int r = ntbf_rpc_connect(sock, &c);
        if (r)
                return ntbf__fail(NULL, r, "cannot connect to this host's daemon at %s: %s", sock,
                                  ntbf_strerror(r));
        r = ntbf_rpc_call(c, "node.status", NULL, &st, env_timeout());
        if (r) {
                ntbf__fail(NULL, r, "this host's daemon at %s does not answer node.status: %s",
                           sock, ntbf_rpc_error(c));
                ntbf_rpc_close(c);
                return r;
        }
        ntbf_rpc_close(c);
        char me[NTBF_NAME_MAX + 1] = "", dir[PATH_MAX] = "", config[PATH_MAX] = "";
        if (json_object_object_get_ex(st, "node", &v))
                snprintf(me, sizeof(me), "%s", json_object_get_string(v));
        if (json_object_object_get_ex(st, "backend_dir", &v))
                snprintf(dir, sizeof(dir), "%s", json_object_get_string(v));
        if (json_object_object_get_ex(st, "config", &v))
                snprintf(config, sizeof(config), "%s", json_object_get_string(v));
        json_object_put(st);
        if (node && *node && strcmp(node, me)) {
                return ntbf__fail(NULL, NTBF_ENOTFOUND,
                                  "this host's daemon at %s serves node '%s', not '%s'", sock, me,
                                  node);
        }
        return ctx_open_at(dir, me, sock, config, out);
}

static int ctx_open_at(const char *dir, const char *node, const char *sock, const char *config,
                       struct ntbf_ctx **out)
{
        open_err[0] = 0;
        if (!out)
                return ntbf__fail(NULL, -EINVAL, "ntbf_ctx_open: out is NULL");
        *out = NULL;
        if (!dir || !*dir)
                dir = getenv("NTBFAB_DIR");
        if (!node || !*node)
                node = getenv("NTBFAB_NODE");
        struct stat st;
        if ((!dir || !*dir) && !stat(ntbf_rpc_host_socket(), &st) && S_ISSOCK(st.st_mode))
                return open_host(node, out);
        if (!dir || !*dir)
                return ntbf__fail(NULL, -EINVAL,
                                  "no instance directory: pass one or set NTBFAB_DIR (ntbfab up "
                                  "prints it), or start this host's daemon (no %s)",
                                  ntbf_rpc_host_socket());
        if (!node || !*node)
                return ntbf__fail(NULL, -EINVAL,
                                  "no node: pass one or set NTBFAB_NODE to the name of this "
                                  "process's node in the cluster file");
        if (strlen(dir) >= PATH_MAX - 64)
                return ntbf__fail(NULL, -ENAMETOOLONG, "instance directory name too long: %s", dir);
        if (strlen(node) > NTBF_NAME_MAX)
                return ntbf__fail(NULL, NTBF_ENOTFOUND,
                                  "no node '%.64s': names have at most %d "
                                  "characters",
                                  node, NTBF_NAME_MAX);
        struct ntbf_ctx *ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
                return ntbf__fail(NULL, -ENOMEM, "out of memory");
        ctx->id = atomic_fetch_add(&ctx_ids, 1);
        ctx->pid = getpid();
        ctx->ev_stop = -1;
        pthread_mutex_init(&ctx->rpc_lock, NULL);
        pthread_mutex_init(&ctx->lock, NULL);
        snprintf(ctx->dir, sizeof(ctx->dir), "%s", dir);
        snprintf(ctx->node, sizeof(ctx->node), "%s", node);
        if (sock)
                snprintf(ctx->sock, sizeof(ctx->sock), "%s", sock);
        if (config)
                snprintf(ctx->config, sizeof(ctx->config), "%s", config);
        ctx->timeout_ms = env_timeout();
        ctx->gen = 1;
        ntbf__dmamem_init(&ctx->mem, NULL, NULL);

        int r = load_topology(ctx);
        if (r)
                goto fail;
        ctx->node_idx = ntbf_topo_find_node(ctx->topo, node);
        if (ctx->node_idx == NTBF_NONE) {
                r = ntbf__fail(NULL, NTBF_ENOTFOUND, "no node '%s' in the cluster file %s", node,
                               ctx->config);
                goto fail;
        }
        if (!ctx->sock[0])
                ntbf_rpc_socket_path(ctx->dir, ctx->node, ctx->sock, sizeof(ctx->sock));
        r = ntbf_rpc_connect(ctx->sock, &ctx->rpc);
        if (r) {
                if (r == NTBF_ENOTFOUND)
                        ntbf__fail(NULL, r,
                                   "no daemon of node %s listens at %s; start it (ntbfab up, or "
                                   "ntbfabd --node %s)",
                                   node, ctx->sock, node);
                else
                        ntbf__fail(NULL, r, "cannot connect to the daemon of node %s at %s: %s",
                                   node, ctx->sock, ntbf_strerror(r));
                goto fail;
        }
        r = attach_backend(ctx);
        if (r)
                goto fail;
        ctx->ev_stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (ctx->ev_stop < 0) {
                r = ntbf__fail(NULL, -errno, "eventfd: %s", strerror(errno));
                goto fail;
        }
        /* DMA memory is the backend's memory for export where local devices reach it by its
         * bus address (NTBF_CAP_MEM_PHYS: host RAM, the simulated fabric's) or where the
         * fabric maps it for devices (NTBF_CAP_DEV_MAP, a managed fabric); elsewhere it is
         * memfd memory, which VFIO pins when a device maps it (docs/device-api.md, "DMA
         * memory"). */
        struct ntbf_caps caps;
        bool backend_mem = ctx->h0 && !ctx->ops->caps(ctx->h0, &caps) &&
                           (caps.flags & (NTBF_CAP_MEM_PHYS | NTBF_CAP_DEV_MAP));
        ctx->mem.ops = ctx->ops;
        ctx->mem.h = ctx->h0;
        ctx->mem.memfd = !backend_mem;
        open_add(ctx);
        *out = ctx;
        return 0;
fail:
        ctx_free(ctx);
        return r;
}

const char *ntbf_ctx_socket(const struct ntbf_ctx *ctx)
{
        return ctx ? ctx->sock : NULL;
}

void ntbf_ctx_close(struct ntbf_ctx *ctx)
{
        if (!ctx)
                return;
        if (ntbf__ctx_foreign(ctx)) {
                /* A forked child's copy: its descriptors are closed, and nothing else is
                 * touched. No lock (the parent's threads may have held one), no call, no word to
                 * the event thread (its stop eventfd is the parent's too), no unmapping of the
                 * memory the parent shares with its devices. What the copy holds in memory is
                 * left to the child's exit. (The fork already closed them: nothing is left.) */
                drop_copies(ctx);
                return;
        }
        for (;;) {
                pthread_mutex_lock(&ctx->lock);
                struct ntbf_dev *d = ctx->devs;
                pthread_mutex_unlock(&ctx->lock);
                if (!d)
                        break;
                ntbf_dev_close(d);
        }
        ctx_free(ctx);
}

/* ---- DMA memory -------------------------------------------------------------------------------
 */

int ntbf_dma_alloc(struct ntbf_ctx *ctx, size_t size, size_t align, void **ptr)
{
        if (!ctx)
                return -EINVAL;
        if (!ptr)
                return ntbf__fail(ctx, -EINVAL, "ntbf_dma_alloc: ptr is NULL");
        *ptr = NULL;
        if (!size)
                return ntbf__fail(ctx, -EINVAL, "ntbf_dma_alloc: size is 0");
        if (align & (align - 1))
                return ntbf__fail(ctx, -EINVAL,
                                  "ntbf_dma_alloc: alignment %zu is not a power of two", align);
        if (!ctx->h0 && !ctx->mem.memfd)
                return ntbf__fail(ctx, NTBF_EUNSUPPORTED,
                                  "node %s has no adapter to allocate DMA memory through",
                                  ctx->node);
        int r = ntbf__dmamem_alloc(&ctx->mem, size, align, ptr);
        if (r == NTBF_EUNSUPPORTED)
                return ntbf__fail(ctx, r, "the %s backend cannot allocate DMA memory",
                                  ctx->ops->name);
        if (r)
                return ntbf__fail(ctx, r, "cannot allocate %zu bytes of DMA memory on node %s: %s",
                                  size, ctx->node, ntbf_strerror(r));
        return 0;
}

void ntbf_dma_free(struct ntbf_ctx *ctx, void *ptr)
{
        if (!ctx || !ptr)
                return;
        if (ntbf__dmamem_free(&ctx->mem, ptr))
                ntbf__fail(ctx, -EINVAL,
                           "ntbf_dma_free: %p is not a live allocation of ntbf_dma_alloc", ptr);
}

int ntbf_dma_fd(struct ntbf_ctx *ctx, const void *ptr, int *fd, uint64_t *offset)
{
        if (!ctx)
                return -EINVAL;
        if (!ptr || !fd || !offset)
                return ntbf__fail(ctx, -EINVAL, "ntbf_dma_fd: %s is NULL",
                                  !ptr  ? "ptr"
                                  : !fd ? "fd"
                                        : "offset");
        int r = ntbf__dmamem_fd(&ctx->mem, ptr, fd, offset);
        if (r == -EFAULT)
                return ntbf__fail(ctx, r, "ntbf_dma_fd: %p is not memory from ntbf_dma_alloc", ptr);
        if (r)
                return ntbf__fail(ctx, r,
                                  "the DMA memory at %p has no file descriptor (%s backend)", ptr,
                                  ctx->ops->name);
        return 0;
}
