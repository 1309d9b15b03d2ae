/* client/rpc.c: the JSON-RPC 2.0 client of a node daemon (newline-delimited JSON, docs/rpc.md). */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ntbfab/error.h"
#include "ntbfab/rpc.h"

#define MAX_MESSAGE       (1 << 20)
#define MAX_QUEUED_EVENTS 1024
#define MAX_FDS           8 /* descriptors one answer may carry */

struct ntbf_rpc {
        int fd;
        uint64_t next_id;
        char *buf; /* received bytes not yet consumed */
        size_t len, cap;
        struct json_object **events; /* queued notifications (params) */
        size_t nevents, evcap;
        /* Descriptors received (SCM_RIGHTS) and not yet claimed by an answer, in order;
         * and those of the last answer, until taken. */
        int fdq[4 * MAX_FDS];
        unsigned nfdq;
        bool fd_overflow; /* the kernel or the queue dropped some: answers cannot be trusted */
        int last[MAX_FDS];
        unsigned nlast;
        char error[512];
};

static void close_last(struct ntbf_rpc *c)
{
        for (unsigned i = 0; i < c->nlast; i++)
                close(c->last[i]);
        c->nlast = 0;
}

/* The number of descriptors an answer announces: result.fds, an array of their names. */
static unsigned announced_fds(struct json_object *result)
{
        struct json_object *f;
        if (result && json_object_is_type(result, json_type_object) &&
            json_object_object_get_ex(result, "fds", &f) && json_object_is_type(f, json_type_array))
                return (unsigned)json_object_array_length(f);
        return 0;
}

/* Move the first n queued descriptors to last (keep true) or close them. */
static int claim_fds(struct ntbf_rpc *c, unsigned n, bool keep)
{
        if (n > c->nfdq || n > MAX_FDS || c->fd_overflow) {
                snprintf(c->error, sizeof(c->error),
                         "the daemon's answer announces %u file descriptors but %u arrived%s", n,
                         c->nfdq, c->fd_overflow ? " (some were dropped)" : "");
                return NTBF_EPROTO;
        }
        for (unsigned i = 0; i < n; i++) {
                if (keep)
                        c->last[c->nlast++] = c->fdq[i];
                else
                        close(c->fdq[i]);
        }
        memmove(c->fdq, c->fdq + n, (c->nfdq - n) * sizeof(int));
        c->nfdq -= n;
        return 0;
}

int ntbf_rpc_take_fds(struct ntbf_rpc *c, int *fds, unsigned max)
{
        unsigned n = c->nlast < max ? c->nlast : max;
        memcpy(fds, c->last, n * sizeof(int));
        memmove(c->last, c->last + n, (c->nlast - n) * sizeof(int));
        c->nlast -= n;
        return (int)n;
}

static void set_error(struct ntbf_rpc *c, const char *fmt, ...) NTBF_PRINTF(2, 3);
static void set_error(struct ntbf_rpc *c, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->error, sizeof(c->error), fmt, ap);
        va_end(ap);
}

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

const char *ntbf_rpc_host_socket(void)
{
        const char *e = getenv("NTBFAB_SOCKET");
        return e && e[0] ? e : NTBF_RPC_HOST_SOCKET;
}

const char *ntbf_rpc_socket_path(const char *dir, const char *node, char *buf, size_t len)
{
        snprintf(buf, len, "%s/run/%s.sock", dir, node);
        return buf;
}

/*
 * How long a connect waits for a daemon whose listen queue is full (a stopped daemon):
 * NTBFAB_RPC_TIMEOUT_MS, as for calls (docs/device-api.md), 5 s by default.
 */
static uint64_t connect_timeout_ms(void)
{
        const char *e = getenv("NTBFAB_RPC_TIMEOUT_MS");
        char *end;
        unsigned long v = e ? strtoul(e, &end, 10) : 0;
        return e && *e && !*end && v > 0 && v <= 3600000 ? v : 5000;
}

int ntbf_rpc_connect(const char *path, struct ntbf_rpc **out)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        /* Non-blocking, so a full listen queue gives EAGAIN instead of blocking forever. */
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        uint64_t deadline = 0;
        for (;;) {
                if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
                        break;
                int e = errno;
                if (e == EINTR)
                        continue;
                if (e == EAGAIN) {
                        uint64_t now = now_ms();
                        if (!deadline)
                                deadline = now + connect_timeout_ms();
                        if (now < deadline) {
                                struct timespec ts = {0, 10 * 1000 * 1000};
                                nanosleep(&ts, NULL);
                                continue;
                        }
                        e = ETIMEDOUT;
                }
                close(fd);
                return e == ENOENT || e == ECONNREFUSED ? NTBF_ENOTFOUND : -e;
        }
        /* The rest of the client uses blocking sends and polls for reads. */
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
                int e = errno;
                close(fd);
                return -e;
        }
        struct ntbf_rpc *c = calloc(1, sizeof(*c));
        if (!c) {
                close(fd);
                return -ENOMEM;
        }
        c->fd = fd;
        c->next_id = 1;
        *out = c;
        return 0;
}

void ntbf_rpc_close(struct ntbf_rpc *c)
{
        if (!c)
                return;
        close(c->fd);
        close_last(c);
        for (unsigned i = 0; i < c->nfdq; i++)
                close(c->fdq[i]);
        for (size_t i = 0; i < c->nevents; i++)
                json_object_put(c->events[i]);
        free(c->events);
        free(c->buf);
        free(c);
}

const char *ntbf_rpc_error(const struct ntbf_rpc *c)
{
        return c->error;
}

int ntbf_rpc_fd(const struct ntbf_rpc *c)
{
        return c->fd;
}

static int send_all(struct ntbf_rpc *c, const char *s, size_t n)
{
        while (n) {
                ssize_t w = send(c->fd, s, n, MSG_NOSIGNAL);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        set_error(c, "cannot write to the daemon: %s", strerror(errno));
                        return errno == EPIPE || errno == ECONNRESET ? -EPIPE : -errno;
                }
                s += w;
                n -= (size_t)w;
        }
        return 0;
}

/*
 * Take one complete line from the buffer, reading more (until deadline, 0: no waiting)
 * when needed. Returns 0 with *line (caller frees), -EAGAIN, -ETIMEDOUT or an error.
 */
static int read_line(struct ntbf_rpc *c, char **line, uint64_t deadline, bool wait)
{
        for (;;) {
                char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
                if (nl) {
                        size_t n = (size_t)(nl - c->buf);
                        char *l = malloc(n + 1);
                        if (!l)
                                return -ENOMEM;
                        memcpy(l, c->buf, n);
                        l[n] = 0;
                        memmove(c->buf, nl + 1, c->len - n - 1);
                        c->len -= n + 1;
                        *line = l;
                        return 0;
                }
                if (c->len >= MAX_MESSAGE) {
                        set_error(c, "the daemon sent a message over %d bytes", MAX_MESSAGE);
                        return NTBF_EPROTO;
                }
                int timeout = 0;
                if (wait) {
                        uint64_t now = now_ms();
                        if (now >= deadline) {
                                set_error(c, "the daemon did not answer in time");
                                return -ETIMEDOUT;
                        }
                        timeout = (int)(deadline - now);
                }
                struct pollfd p = {.fd = c->fd, .events = POLLIN};
                int r = poll(&p, 1, timeout);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                if (r == 0) {
                        if (!wait)
                                return -EAGAIN;
                        continue;
                }
                if (c->cap - c->len < 4096) {
                        size_t cap = c->cap ? c->cap * 2 : 8192;
                        char *b = realloc(c->buf, cap);
                        if (!b)
                                return -ENOMEM;
                        c->buf = b;
                        c->cap = cap;
                }
                /* Answers may carry descriptors (docs/rpc.md): queue what arrives. */
                union {
                        char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
                        struct cmsghdr align;
                } cb;
                struct iovec iov = {c->buf + c->len, c->cap - c->len};
                struct msghdr mh = {.msg_iov = &iov,
                                    .msg_iovlen = 1,
                                    .msg_control = cb.buf,
                                    .msg_controllen = sizeof(cb.buf)};
                ssize_t n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC);
                if (n < 0 && errno == EINTR)
                        continue;
                for (struct cmsghdr *h = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; h;
                     h = CMSG_NXTHDR(&mh, h)) {
                        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
                                continue;
                        size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        int *v = (int *)(void *)CMSG_DATA(h);
                        for (size_t i = 0; i < k; i++) {
                                int fd;
                                memcpy(&fd, v + i, sizeof(fd));
                                if (c->nfdq < sizeof(c->fdq) / sizeof(c->fdq[0]))
                                        c->fdq[c->nfdq++] = fd;
                                else {
                                        close(fd);
                                        c->fd_overflow = true;
                                }
                        }
                }
                if (n > 0 && (mh.msg_flags & MSG_CTRUNC))
                        c->fd_overflow = true;
                if (n <= 0) {
                        set_error(c, "the daemon closed the connection");
                        return -EPIPE;
                }
                c->len += (size_t)n;
        }
}

/* Queue a notification's params; the oldest is dropped if too many wait. */
static void queue_event(struct ntbf_rpc *c, struct json_object *params)
{
        if (c->nevents == c->evcap) {
                if (c->evcap >= MAX_QUEUED_EVENTS) {
                        json_object_put(c->events[0]);
                        memmove(c->events, c->events + 1, --c->nevents * sizeof(*c->events));
                } else {
                        size_t cap = c->evcap ? c->evcap * 2 : 16;
                        struct json_object **e = realloc(c->events, cap * sizeof(*e));
                        if (!e) {
                                json_object_put(params);
                                return;
                        }
                        c->events = e;
                        c->evcap = cap;
                }
        }
        c->events[c->nevents++] = params;
}

/* Map an error answer to a code: data.error names it; else the JSON-RPC code decides. */
static int error_code(struct json_object *err)
{
        struct json_object *data, *name, *code;
        if (json_object_object_get_ex(err, "data", &data) &&
            json_object_object_get_ex(data, "errno", &name) &&
            json_object_is_type(name, json_type_int)) {
                int e = json_object_get_int(name);
                if (e < 0)
                        return e;
        }
        if (json_object_object_get_ex(err, "code", &code)) {
                switch (json_object_get_int(code)) {
                case -32601:
                        return -ENOSYS;
                case -32602:
                        return -EINVAL;
                default:
                        break;
                }
        }
        return NTBF_EPROTO;
}

int ntbf_rpc_call(struct ntbf_rpc *c, const char *method, struct json_object *params,
                  struct json_object **result, int timeout_ms)
{
        c->error[0] = 0;
        *result = NULL;
        close_last(c); /* the previous answer's descriptors, if nobody took them */
        uint64_t id = c->next_id++;
        struct json_object *req = json_object_new_object();
        json_object_object_add(req, "jsonrpc", json_object_new_string("2.0"));
        json_object_object_add(req, "id", json_object_new_int64((int64_t)id));
        json_object_object_add(req, "method", json_object_new_string(method));
        if (params)
                json_object_object_add(req, "params", params);
        const char *s = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN |
                                                                JSON_C_TO_STRING_NOSLASHESCAPE);
        size_t n = strlen(s);
        char *msg = malloc(n + 2);
        if (!msg) {
                json_object_put(req);
                return -ENOMEM;
        }
        memcpy(msg, s, n);
        msg[n] = '\n';
        json_object_put(req);
        int r = send_all(c, msg, n + 1);
        free(msg);
        if (r)
                return r;
        uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 30000);
        for (;;) {
                char *line;
                r = read_line(c, &line, deadline, true);
                if (r)
                        return r;
                struct json_object *o = json_tokener_parse(line);
                free(line);
                struct json_object *rid, *v;
                if (!o || !json_object_is_type(o, json_type_object)) {
                        json_object_put(o);
                        set_error(c, "the daemon sent something that is not a JSON object");
                        return NTBF_EPROTO;
                }
                if (!json_object_object_get_ex(o, "id", &rid)) {
                        /* A notification: keep it for ntbf_rpc_next_event. */
                        if (json_object_object_get_ex(o, "params", &v))
                                queue_event(c, json_object_get(v));
                        json_object_put(o);
                        continue;
                }
                uint64_t got = (uint64_t)json_object_get_int64(rid);
                if (got < id) {
                        /* The late answer of a call that timed out: drop it (and what it
                         * carried, so that the next answer's descriptors stay in order). */
                        struct json_object *res = NULL;
                        json_object_object_get_ex(o, "result", &res);
                        r = claim_fds(c, announced_fds(res), false);
                        json_object_put(o);
                        if (r)
                                return r;
                        continue;
                }
                if (got != id) {
                        json_object_put(o);
                        set_error(c, "the daemon answered a request that was never sent");
                        return NTBF_EPROTO;
                }
                if (json_object_object_get_ex(o, "error", &v)) {
                        struct json_object *m;
                        set_error(c, "%s",
                                  json_object_object_get_ex(v, "message", &m)
                                      ? json_object_get_string(m)
                                      : "the daemon reported an error");
                        r = error_code(v);
                        json_object_put(o);
                        return r;
                }
                if (!json_object_object_get_ex(o, "result", &v)) {
                        json_object_put(o);
                        set_error(c, "the daemon's answer has neither result nor error");
                        return NTBF_EPROTO;
                }
                r = claim_fds(c, announced_fds(v), true);
                if (r) {
                        json_object_put(o);
                        return r;
                }
                *result = json_object_get(v);
                json_object_put(o);
                return 0;
        }
}

int ntbf_rpc_next_event(struct ntbf_rpc *c, struct json_object **params, int timeout_ms)
{
        uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
        for (;;) {
                if (c->nevents) {
                        *params = c->events[0];
                        memmove(c->events, c->events + 1, --c->nevents * sizeof(*c->events));
                        return 0;
                }
                char *line;
                int r = read_line(c, &line, deadline, timeout_ms > 0);
                if (r == -ETIMEDOUT)
                        return -EAGAIN;
                if (r)
                        return r;
                struct json_object *o = json_tokener_parse(line), *rid, *v;
                free(line);
                if (o && json_object_is_type(o, json_type_object) &&
                    !json_object_object_get_ex(o, "id", &rid) &&
                    json_object_object_get_ex(o, "params", &v))
                        queue_event(c, json_object_get(v));
                json_object_put(o);
        }
}
