/* frontends/sisci-compat/src/lib.c: libsisci's process state: identity, the daemon, handles. */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sx.h"

struct sx_lib sx = {.lock = PTHREAD_MUTEX_INITIALIZER, .ev_stop = -1};
static pthread_once_t cond_once = PTHREAD_ONCE_INIT;

/* ---- diagnostics, time ---------------------------------------------------------------------- */

void sx_warn(const char *fmt, ...)
{
        char line[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        fprintf(stderr, "libsisci: %s\n", line);
}

uint64_t sx_now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t sx_deadline(unsigned timeout_ms)
{
        if (timeout_ms == SCI_INFINITE_TIMEOUT)
                return 0;
        return sx_now_ms() + timeout_ms;
}

static void cond_make(void)
{
        pthread_condattr_t a;
        pthread_condattr_init(&a);
        pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
        pthread_cond_init(&sx.cond, &a);
        pthread_condattr_destroy(&a);
}

/*
 * fork(): the child starts with a library of its own, as a new process would (docs/sisci.md,
 * "Processes"). The parent's threads do not exist in the child, and its connections to the
 * daemon are the parent's session: a child that went on using them would wait for events
 * nobody reads, or read the parent's answers. So the lock is taken around the fork (no thread
 * is half-way through the state when it is copied), and the child keeps nothing: its copies
 * of the connections are closed without a word to the daemon, and the rest of the parent's
 * state is set aside untouched (its objects, mappings and descriptors are the parent's to
 * release). Nothing is initialized in the child until it calls SCIInitialize.
 */
static struct sx_lib forked_from; /* the parent's state, kept reachable, never used */

static void fork_prepare(void)
{
        pthread_mutex_lock(&sx.lock);
}

static void fork_parent(void)
{
        pthread_mutex_unlock(&sx.lock);
}

static void fork_child(void)
{
        /* The event thread reads its connection without the lock: only the descriptors are
         * closed, the structures are left as they are. */
        if (sx.init) {
                forked_from = sx;
                if (sx.rpc)
                        close(ntbf_rpc_fd(sx.rpc));
                if (sx.ev)
                        close(ntbf_rpc_fd(sx.ev));
                if (sx.ev_stop >= 0)
                        close(sx.ev_stop);
                /* The device API's context: the device API's own fork handler closes the
                 * child's copies of its connections. */
        }
        uint64_t next_id = sx.next_id; /* the parent's handles stay invalid here */
        memset(&sx, 0, sizeof(sx));
        sx.next_id = next_id;
        sx.ev_stop = -1;
        pthread_mutex_init(&sx.lock, NULL);
        cond_make();
}

static void cond_init(void)
{
        cond_make();
        pthread_atfork(fork_prepare, fork_parent, fork_child);
}

bool sx_wait(uint64_t deadline)
{
        if (!deadline) {
                pthread_cond_wait(&sx.cond, &sx.lock);
                return true;
        }
        uint64_t now = sx_now_ms();
        if (now >= deadline)
                return false;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (deadline - now) * 1000000;
        ts.tv_sec += (time_t)(ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        return pthread_cond_timedwait(&sx.cond, &sx.lock, &ts) == 0 || sx_now_ms() < deadline;
}

/* ---- locking and the registry --------------------------------------------------------------- */

void sx_lock(void)
{
        pthread_once(&cond_once, cond_init);
        pthread_mutex_lock(&sx.lock);
}

void sx_unlock(void)
{
        pthread_mutex_unlock(&sx.lock);
}

sci_error_t sx_enter(void)
{
        sx_lock();
        return sx.up ? SCI_ERR_OK : SCI_ERR_NOT_INITIALIZED;
}

#define TOMB ((struct sx_obj *)1)

static size_t slot_of(uint64_t h, size_t cap)
{
        h ^= h >> 29;
        h *= UINT64_C(0xbf58476d1ce4e5b9);
        h ^= h >> 32;
        return (size_t)h & (cap - 1);
}

static int tab_grow(void)
{
        size_t cap = sx.cap ? sx.cap * 2 : 256;
        if (sx.cap && sx.used * 2 < sx.cap)
                cap = sx.cap; /* many tombstones: rehash at the same size */
        struct sx_obj **t = calloc(cap, sizeof(*t));
        if (!t)
                return -ENOMEM;
        for (size_t i = 0; i < sx.cap; i++) {
                struct sx_obj *o = sx.tab[i];
                if (!o || o == TOMB)
                        continue;
                size_t k = slot_of(o->handle, cap);
                while (t[k])
                        k = (k + 1) & (cap - 1);
                t[k] = o;
        }
        free(sx.tab);
        sx.tab = t;
        sx.cap = cap;
        sx.tombs = 0;
        return 0;
}

struct sx_obj *sx_get(const void *h, enum sx_kind kind)
{
        uint64_t v = (uint64_t)(uintptr_t)h;
        if (!v || (v & 0xff) != (uint64_t)kind || !sx.cap)
                return NULL;
        for (size_t k = slot_of(v, sx.cap), n = 0; n < sx.cap; k = (k + 1) & (sx.cap - 1), n++) {
                struct sx_obj *o = sx.tab[k];
                if (!o)
                        return NULL;
                if (o != TOMB && o->handle == v)
                        return o->dead ? NULL : o;
        }
        return NULL;
}

void *sx_handle(struct sx_obj *o)
{
        return (void *)(uintptr_t)o->handle;
}

void *sx_new(size_t size, enum sx_kind kind, struct sx_desc *sd)
{
        if ((sx.used + sx.tombs + 1) * 4 > sx.cap * 3 && tab_grow())
                return NULL;
        struct sx_obj *o = calloc(1, size);
        if (!o)
                return NULL;
        o->handle = ++sx.next_id << 8 | (uint64_t)kind;
        o->kind = kind;
        o->refs = 1;
        o->sd = sd;
        size_t k = slot_of(o->handle, sx.cap);
        while (sx.tab[k] && sx.tab[k] != TOMB)
                k = (k + 1) & (sx.cap - 1);
        if (sx.tab[k] == TOMB)
                sx.tombs--;
        sx.tab[k] = o;
        sx.used++;
        o->next = sx.all;
        if (sx.all)
                sx.all->prev = o;
        sx.all = o;
        if (sd)
                sd->nres++;
        return o;
}

void sx_ref(struct sx_obj *o)
{
        o->refs++;
}

void sx_kill(struct sx_obj *o)
{
        if (o->dead)
                return;
        o->dead = true;
        for (size_t k = slot_of(o->handle, sx.cap);; k = (k + 1) & (sx.cap - 1))
                if (sx.tab[k] == o) {
                        sx.tab[k] = TOMB;
                        sx.tombs++;
                        sx.used--;
                        break;
                }
        if (o->prev)
                o->prev->next = o->next;
        else
                sx.all = o->next;
        if (o->next)
                o->next->prev = o->prev;
        o->next = o->prev = NULL;
        if (o->sd)
                o->sd->nres--;
        pthread_cond_broadcast(&sx.cond); /* waiters on it learn it is gone */
        sx_unref(o);
}

void sx_unref(struct sx_obj *o)
{
        if (--o->refs)
                return;
        sx_free_obj(o);
}

void sx_free_obj(struct sx_obj *o)
{
        switch (o->kind) {
        case SX_LSEG:
                sx_lseg_free((struct sx_lseg *)o);
                break;
        case SX_RSEG:
                sx_rseg_free((struct sx_rseg *)o);
                break;
        case SX_MAP:
                sx_map_free((struct sx_map *)o);
                break;
        case SX_DMAQ:
                sx_dmaq_free((struct sx_dmaq *)o);
                break;
        case SX_LINT:
        case SX_LDINT:
                sx_lint_free((struct sx_lint *)o);
                break;
        case SX_RINT:
        case SX_RDINT:
                sx_rint_free((struct sx_rint *)o);
                break;
        case SX_DEV:
                sx_dev_free((struct sx_dev *)o);
                break;
        default:
                free(o);
                break;
        }
}

/* ---- the daemon ------------------------------------------------------------------------------ */

static char call_err[512];

const char *sx_call_error(void)
{
        return call_err;
}

int sx_call(const char *method, struct json_object *params, struct json_object **res)
{
        struct json_object *r = NULL;
        call_err[0] = 0;
        if (!sx.rpc) {
                json_object_put(params);
                snprintf(call_err, sizeof(call_err), "not connected to the daemon");
                return -EPIPE;
        }
        int e = ntbf_rpc_call(sx.rpc, method, params ? params : json_object_new_object(), &r,
                              sx.timeout_ms);
        if (e) {
                snprintf(call_err, sizeof(call_err), "%s", ntbf_rpc_error(sx.rpc));
                json_object_put(r);
                r = NULL;
                if (getenv("NTBFAB_SISCI_DEBUG"))
                        sx_warn("%s: %s (%s)", method, call_err, ntbf_err_name(e));
        }
        if (res)
                *res = r;
        else
                json_object_put(r);
        return e;
}

struct json_object *sx_obj_new(void)
{
        return json_object_new_object();
}

void sx_put_u(struct json_object *o, const char *k, uint64_t v)
{
        json_object_object_add(o, k, json_object_new_uint64(v));
}

void sx_put_b(struct json_object *o, const char *k, bool v)
{
        json_object_object_add(o, k, json_object_new_boolean(v));
}

bool sx_get_u(struct json_object *o, const char *k, uint64_t *v)
{
        struct json_object *x;
        if (!o || !json_object_object_get_ex(o, k, &x) || !json_object_is_type(x, json_type_int) ||
            json_object_get_int64(x) < 0)
                return false;
        *v = json_object_get_uint64(x);
        return true;
}

bool sx_get_b(struct json_object *o, const char *k, bool *v)
{
        struct json_object *x;
        if (!o || !json_object_object_get_ex(o, k, &x) ||
            !json_object_is_type(x, json_type_boolean))
                return false;
        *v = json_object_get_boolean(x);
        return true;
}

sci_error_t sx_err_of(int code)
{
        switch (code) {
        case 0:
                return SCI_ERR_OK;
        case NTBF_ENOSPC_BUDGET:
        case -ENOSPC:
        case -ENOMEM:
                return SCI_ERR_NOSPC;
        case NTBF_ENOPATH:
        case NTBF_ELINKDOWN:
                return SCI_ERR_NO_LINK_ACCESS;
        case NTBF_EUNREACHABLE:
                return SCI_ERR_NODE_NOT_RESPONDING;
        case NTBF_EADDRLIMIT:
                return SCI_ERR_ILLEGAL_ADDRESS;
        case NTBF_ENOTFOUND:
                return SCI_ERR_NO_SUCH_SEGMENT;
        case NTBF_EEXISTS:
                return SCI_ERR_SEGMENTID_USED;
        case NTBF_EBUSY:
        case -EBUSY:
                return SCI_ERR_BUSY;
        case NTBF_EUNSUPPORTED:
        case -ENOSYS:
                return SCI_ERR_NOT_SUPPORTED;
        case -EPERM:
        case -EACCES:
                return SCI_ERR_ACCESS;
        case -EINVAL:
                return SCI_ERR_ILLEGAL_PARAMETER;
        case -ETIMEDOUT:
                return SCI_ERR_TIMEOUT;
        case -EPIPE:
        case -ECONNRESET:
        case -ESHUTDOWN:
                return SCI_ERR_NODE_NOT_RESPONDING;
        default:
                return SCI_ERR_SYSTEM;
        }
}

/* ---- topology -------------------------------------------------------------------------------- */

uint32_t sx_adapter(unsigned n)
{
        if (!sx.t || sx.node_idx >= sx.t->nnodes)
                return NTBF_NONE;
        const struct ntbf_node *me = &sx.t->nodes[sx.node_idx];
        return n < me->nadapters ? me->adapters[n] : NTBF_NONE;
}

struct ntbf_adapter_h *sx_ah(uint32_t adapter)
{
        return adapter == NTBF_NONE ? NULL : ntbf_ctx_adapter(sx.ctx, adapter);
}

uint32_t sx_node_by_id(uint32_t id)
{
        return sx.t ? ntbf_topo_find_node_id(sx.t, id) : NTBF_NONE;
}

/* ---- events ---------------------------------------------------------------------------------- */

bool sx_early_lost(uint64_t dh)
{
        for (unsigned i = 0; i < sx.nearly_lost; i++)
                if (sx.early_lost[i] == dh) {
                        sx.early_lost[i] = sx.early_lost[--sx.nearly_lost];
                        return true;
                }
        return false;
}

static void dispatch(struct json_object *ev)
{
        struct json_object *k;
        if (!json_object_object_get_ex(ev, "kind", &k))
                return;
        const char *kind = json_object_get_string(k);
        uint64_t v = 0;
        if (!strcmp(kind, "sisci.seg")) {
                sx_on_seg_event(ev);
        } else if (!strcmp(kind, "sisci.lost") && sx_get_u(ev, "handle", &v)) {
                bool removed = false;
                sx_get_b(ev, "removed", &removed);
                sx_on_lost(v, removed);
        } else if (!strcmp(kind, "device.lost") && sx_get_u(ev, "fdid", &v)) {
                sx_on_device_lost((uint32_t)v);
        } else if (!strcmp(kind, "link.down") || !strcmp(kind, "link.up")) {
                /* "node.adapter": an adapter of this node whose cable changed state */
                struct json_object *a;
                if (!json_object_object_get_ex(ev, "adapter", &a))
                        return;
                const char *name = json_object_get_string(a), *dot = strchr(name, '.');
                if (!dot || (size_t)(dot - name) != strlen(sx.node) ||
                    strncmp(name, sx.node, strlen(sx.node)))
                        return;
                uint32_t ad = ntbf_topo_find_adapter(sx.t, sx.node_idx, dot + 1);
                if (ad != NTBF_NONE)
                        sx_on_link(ad, !strcmp(kind, "link.up"));
        }
}

static void *event_thread(void *arg)
{
        (void)arg;
        struct pollfd p[2] = {{ntbf_rpc_fd(sx.ev), POLLIN, 0}, {sx.ev_stop, POLLIN, 0}};
        for (;;) {
                struct json_object *ev;
                int r;
                while ((r = ntbf_rpc_next_event(sx.ev, &ev, 0)) == 0) {
                        sx_lock();
                        if (sx.up)
                                dispatch(ev);
                        sx_unlock();
                        json_object_put(ev);
                }
                if (r != -EAGAIN)
                        break; /* the daemon went away */
                if (poll(p, 2, -1) < 0 && errno != EINTR)
                        break;
                if (p[1].revents)
                        break;
        }
        return NULL;
}

/* ---- identity -------------------------------------------------------------------------------- */

/* The instance directory: NTBFAB_DIR, else this user's one default instance (docs/sisci.md). */
static int find_dir(char *out, size_t len)
{
        const char *env = getenv("NTBFAB_DIR");
        if (env && *env) {
                snprintf(out, len, "%s", env);
                return 0;
        }
        char prefix[64];
        snprintf(prefix, sizeof(prefix), "ntbfab-%u-", (unsigned)getuid());
        DIR *d = opendir("/dev/shm");
        unsigned n = 0;
        struct dirent *e;
        while (d && (e = readdir(d))) {
                if (strncmp(e->d_name, prefix, strlen(prefix)))
                        continue;
                char p[PATH_MAX];
                struct stat st;
                snprintf(p, sizeof(p), "/dev/shm/%s/cluster.yaml", e->d_name);
                if (stat(p, &st))
                        continue;
                if (!n++)
                        snprintf(out, len, "/dev/shm/%s", e->d_name);
        }
        if (d)
                closedir(d);
        if (n == 1)
                return 0;
        sx_warn(n ? "several clusters are up for this user; set NTBFAB_DIR to the instance "
                    "directory of one"
                  : "no cluster: set NTBFAB_DIR to the instance directory 'ntbfab up' printed");
        return -ENOENT;
}

/* The node: NTBFAB_NODE, else the one node with a daemon socket in DIR/run. */
static int find_node(const char *dir, char *out, size_t len)
{
        const char *env = getenv("NTBFAB_NODE");
        if (env && *env) {
                snprintf(out, len, "%s", env);
                return 0;
        }
        char run[PATH_MAX + 8];
        snprintf(run, sizeof(run), "%s/run", dir);
        DIR *d = opendir(run);
        unsigned n = 0;
        struct dirent *e;
        while (d && (e = readdir(d))) {
                size_t l = strlen(e->d_name);
                if (l < 6 || strcmp(e->d_name + l - 5, ".sock") || l - 5 >= len)
                        continue;
                if (!n++)
                        snprintf(out, len, "%.*s", (int)(l - 5), e->d_name);
        }
        if (d)
                closedir(d);
        if (n == 1)
                return 0;
        sx_warn(n ? "%s runs the daemons of several nodes (a simulated cluster); set NTBFAB_NODE "
                    "to the node this process runs on"
                  : "no daemon socket in %s/run; start the cluster (ntbfab up) or set "
                    "NTBFAB_NODE",
                dir);
        return -ENOENT;
}

void sx_requesters_drop(void);

static void teardown(void)
{
        sx_requesters_drop(); /* the daemon releases them with the session */
        /* Objects first (their mappings and memory go through the context), then the rest. */
        while (sx.all) {
                struct sx_obj *o = sx.all;
                switch (o->kind) {
                case SX_MAP:
                        sx_map_drop((struct sx_map *)o);
                        break;
                case SX_LSEG:
                        sx_lseg_drop((struct sx_lseg *)o);
                        break;
                case SX_RSEG:
                        sx_rseg_drop((struct sx_rseg *)o);
                        break;
                case SX_DMAQ:
                        sx_dmaq_drop((struct sx_dmaq *)o);
                        break;
                case SX_LINT:
                case SX_LDINT:
                        sx_lint_drop((struct sx_lint *)o);
                        break;
                case SX_RINT:
                case SX_RDINT:
                        sx_rint_drop((struct sx_rint *)o);
                        break;
                case SX_DEV:
                        sx_dev_drop((struct sx_dev *)o);
                        break;
                default:
                        break;
                }
                sx_kill(o);
        }
}

static void disconnect_all(void)
{
        if (sx.ev_on) {
                uint64_t one = 1;
                ssize_t w = write(sx.ev_stop, &one, sizeof(one));
                (void)w;
                sx_unlock(); /* the event thread may be waiting for the lock */
                pthread_join(sx.ev_thread, NULL);
                sx_lock();
                sx.ev_on = false;
        }
        if (sx.ev_stop >= 0)
                close(sx.ev_stop);
        sx.ev_stop = -1;
        ntbf_rpc_close(sx.ev);
        sx.ev = NULL;
        ntbf_rpc_close(sx.rpc);
        sx.rpc = NULL;
        if (sx.ctx)
                ntbf_ctx_close(sx.ctx);
        sx.ctx = NULL;
        sx.t = NULL;
        sx.b = NULL;
        sx.ops = NULL;
}

static int env_timeout(void)
{
        const char *s = getenv("NTBFAB_RPC_TIMEOUT_MS");
        long v = s && *s ? strtol(s, NULL, 10) : 0;
        return v > 0 && v < 3600 * 1000 ? (int)v : 10000;
}

/* Attach to the node: identity, the device API's context, the daemon session, events. */
static sci_error_t bring_up(void)
{
        /* This host's daemon (a service) when no simulated cluster is named or up. */
        struct stat hs;
        bool host = !(getenv("NTBFAB_DIR") && *getenv("NTBFAB_DIR")) &&
                    !stat(ntbf_rpc_host_socket(), &hs) && S_ISSOCK(hs.st_mode);
        if (!host &&
            (find_dir(sx.dir, sizeof(sx.dir)) || find_node(sx.dir, sx.node, sizeof(sx.node))))
                return SCI_ERR_SYSTEM;
        sx.timeout_ms = env_timeout();
        int r = ntbf_ctx_open(host ? NULL : sx.dir, host ? NULL : sx.node, &sx.ctx);
        if (r) {
                sx_warn("%s", ntbf_ctx_error(NULL));
                return SCI_ERR_SYSTEM;
        }
        if (host)
                snprintf(sx.node, sizeof(sx.node), "%s",
                         ntbf_ctx_topo(sx.ctx)->nodes[ntbf_ctx_node(sx.ctx)].name);
        sx.t = ntbf_ctx_topo(sx.ctx);
        sx.node_idx = ntbf_ctx_node(sx.ctx);
        sx.node_id = sx.t->nodes[sx.node_idx].id;
        ntbf_ctx_backend(sx.ctx, &sx.ops, &sx.b);
        char path[PATH_MAX + 64];
        snprintf(path, sizeof(path), "%s", ntbf_ctx_socket(sx.ctx));
        struct json_object *res = NULL;
        if ((r = ntbf_rpc_connect(path, &sx.rpc)) || (r = ntbf_rpc_connect(path, &sx.ev))) {
                sx_warn("cannot connect to the daemon of node %s at %s: %s", sx.node, path,
                        ntbf_strerror(r));
                goto fail;
        }
        if ((r = sx_call("sisci.session", NULL, &res)) || !sx_get_u(res, "session", &sx.session)) {
                sx_warn("the daemon of node %s refused a SISCI session: %s", sx.node,
                        r ? sx_call_error() : "no session in its answer");
                json_object_put(res);
                r = r ? r : NTBF_EPROTO;
                goto fail;
        }
        json_object_put(res);
        struct json_object *p = json_object_new_object(), *x = NULL;
        sx_put_u(p, "session", sx.session);
        if ((r = ntbf_rpc_call(sx.ev, "sisci.listen", p, &x, sx.timeout_ms)) ||
            (json_object_put(x), x = NULL,
             r = ntbf_rpc_call(sx.ev, "events.subscribe", json_object_new_object(), &x,
                               sx.timeout_ms))) {
                sx_warn("cannot listen to the events of node %s: %s", sx.node,
                        ntbf_rpc_error(sx.ev));
                goto fail;
        }
        json_object_put(x);
        sx.ev_stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (sx.ev_stop < 0 || pthread_create(&sx.ev_thread, NULL, event_thread, NULL)) {
                r = -errno;
                goto fail;
        }
        sx.ev_on = true;
        for (unsigned i = 0; i < NTBF_MAX_NODE_ADAPTERS; i++) {
                sx.dma_chan[i] = -1;
                sx.dma_tried[i] = false;
        }
        return SCI_ERR_OK;
fail:
        disconnect_all();
        return r == -ENOMEM ? SCI_ERR_NOSPC : SCI_ERR_SYSTEM;
}

/* ---- SCIInitialize, SCITerminate, SCIOpen, SCIClose ------------------------------------------ */

void SCIInitialize(unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        sx_lock();
        if (flags & ~SCI_FLAG_THREAD_SAFE) {
                *err = SCI_ERR_ILLEGAL_FLAG;
        } else if (sx.init) {
                sx.init++;
                *err = SCI_ERR_OK;
        } else {
                *err = bring_up();
                if (*err == SCI_ERR_OK) {
                        sx.init = 1;
                        sx.up = true;
                }
        }
        sx_unlock();
}

void SCITerminate(void)
{
        sx_lock();
        if (sx.init && --sx.init == 0) {
                sx_dma_stop();
                teardown();
                sx.up = false;
                disconnect_all();
                free(sx.tab);
                sx.tab = NULL;
                sx.cap = sx.used = sx.tombs = 0;
                sx.nearly_lost = 0;
        }
        sx_unlock();
}

void SCIOpen(sci_desc_t *sd, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        if (!sd) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        struct sx_desc *d = sx_new(sizeof(*d), SX_DESC, NULL);
        if (!d) {
                *err = SCI_ERR_NOSPC;
                goto out;
        }
        *sd = sx_handle(&d->o);
out:
        sx_unlock();
}

void SCIClose(sci_desc_t sd, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_desc *d = (struct sx_desc *)sx_get(sd, SX_DESC);
        if (!d)
                *err = SCI_ERR_ILLEGAL_PARAMETER;
        else if (flags)
                *err = SCI_ERR_ILLEGAL_FLAG;
        else if (d->nres)
                *err = SCI_ERR_BUSY; /* segments, queues, interrupts, devices remain */
        else
                sx_kill(&d->o);
out:
        sx_unlock();
}
