/* daemon/tran_sock.c: the RPC transport on the Unix socket, with SO_PEERCRED access control. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon.h"
#include "host.h"
#include "log.h"
#include "ntbfab/error.h"
#include "ntbfab/units.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

/*
 * Bytes that carry file descriptors go out with sendmsg(SCM_RIGHTS), which libuv cannot do
 * for arbitrary fds; they must not overtake what libuv still queues. So while libuv has
 * bytes queued, such a message (and everything sent after it) waits here, and goes when
 * libuv's queue is empty again.
 */
struct pend {
        struct pend *next;
        char *data;
        size_t len;
        int fds[8]; /* duplicates, closed once sent */
        unsigned nfds;
};

struct sconn {
        uv_pipe_t pipe;
        uv_shutdown_t shut;
        uv_timer_t retry; /* the socket buffer was full: try the pending messages again */
        bool retry_on;
        struct ntbf__rpc_conn *c;
        bool closing;
        bool stuck; /* over NTBF_RPC_MAX_QUEUED: closed without flushing */
        struct pend *pend, **pend_tail;
        size_t pend_bytes;
        char rbuf[65536];
};

/*
 * A client that does not read its answers and events would make the daemon queue them
 * without bound: past NTBF_RPC_MAX_QUEUED bytes waiting to be sent, the connection is
 * dropped (what is queued is discarded) and the client named in the log.
 */
static bool over_limit(struct sconn *s, size_t len)
{
        size_t q = uv_stream_get_write_queue_size((uv_stream_t *)&s->pipe) + s->pend_bytes;
        if (q + len <= NTBF_RPC_MAX_QUEUED)
                return false;
        if (!s->stuck)
                LOG_W("RPC connection %llu (pid %d uid %u) does not read what the daemon sends: "
                      "%zu bytes queued, the limit is %u; disconnecting it",
                      (unsigned long long)s->c->id, (int)s->c->pid, (unsigned)s->c->uid, q + len,
                      NTBF_RPC_MAX_QUEUED);
        s->stuck = true;
        return true;
}

struct wreq {
        uv_write_t w;
        char *data;
};

static void flush_pending(struct sconn *s);

static void wrote(uv_write_t *w, int status)
{
        (void)status;
        struct wreq *r = (struct wreq *)w;
        struct sconn *s = w->handle->data;
        free(r->data);
        free(r);
        if (s && s->pend && !s->closing)
                flush_pending(s);
}

static int libuv_send(struct sconn *s, const char *buf, size_t len);

static int s_send(void *tctx, const char *buf, size_t len)
{
        struct sconn *s = tctx;
        if (s->closing)
                return -EPIPE;
        if (over_limit(s, len))
                return -ENOBUFS;
        if (s->pend) {
                /* Behind a message waiting with fds: keep the order. */
                struct pend *p = calloc(1, sizeof(*p));
                char *copy = malloc(len);
                if (!p || !copy) {
                        free(p);
                        free(copy);
                        return -ENOMEM;
                }
                memcpy(copy, buf, len);
                *p = (struct pend){NULL, copy, len, {0}, 0};
                *s->pend_tail = p;
                s->pend_tail = &p->next;
                s->pend_bytes += len;
                return 0;
        }
        return libuv_send(s, buf, len);
}

static int libuv_send(struct sconn *s, const char *buf, size_t len)
{
        uv_buf_t b = uv_buf_init((char *)buf, (unsigned)len);
        int n = uv_try_write((uv_stream_t *)&s->pipe, &b, 1);
        if (n == (int)len)
                return 0;
        if (n < 0 && n != UV_EAGAIN)
                return n;
        size_t done = n > 0 ? (size_t)n : 0;
        struct wreq *r = malloc(sizeof(*r));
        char *copy = malloc(len - done);
        if (!r || !copy) {
                free(r);
                free(copy);
                return -ENOMEM;
        }
        memcpy(copy, buf + done, len - done);
        r->data = copy;
        b = uv_buf_init(copy, (unsigned)(len - done));
        int e = uv_write(&r->w, (uv_stream_t *)&s->pipe, &b, 1, wrote);
        if (e) {
                free(copy);
                free(r);
                return e;
        }
        return 0;
}

/* sendmsg with fds on the first byte: bytes sent (>= 1), 0 if the socket is full, or -errno. */
static ssize_t send_with_fds(struct sconn *s, const char *buf, size_t len, const int *fds,
                             unsigned nfds)
{
        uv_os_fd_t fd;
        if (uv_fileno((uv_handle_t *)&s->pipe, &fd))
                return -EBADF;
        union {
                char buf[CMSG_SPACE(sizeof(int) * 8)];
                struct cmsghdr align;
        } cb;
        memset(&cb, 0, sizeof(cb));
        struct iovec iov = {(void *)buf, len};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = cb.buf,
                            .msg_controllen = CMSG_SPACE(sizeof(int) * nfds)};
        struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(h), fds, sizeof(int) * nfds);
        for (;;) {
                ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n >= 0)
                        return n;
                if (errno == EINTR)
                        continue;
                return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
        }
}

static void retry_cb(uv_timer_t *t)
{
        struct sconn *s = t->data;
        s->retry_on = false;
        if (!s->closing)
                flush_pending(s);
}

/* Send what waits, in order, while libuv has nothing queued. */
static void flush_pending(struct sconn *s)
{
        while (s->pend && !uv_stream_get_write_queue_size((uv_stream_t *)&s->pipe)) {
                struct pend *p = s->pend;
                if (p->nfds) {
                        ssize_t n = send_with_fds(s, p->data, p->len, p->fds, p->nfds);
                        if (n == 0) {
                                /* The socket buffer is full; libuv is not watching it for us. */
                                if (!s->retry_on && !uv_timer_start(&s->retry, retry_cb, 1, 0))
                                        s->retry_on = true;
                                return;
                        }
                        if (n < 0) {
                                ntbf__rpc_conn_eof(s->c);
                                return;
                        }
                        for (unsigned i = 0; i < p->nfds; i++)
                                close(p->fds[i]);
                        p->nfds = 0;
                        if ((size_t)n < p->len && libuv_send(s, p->data + n, p->len - (size_t)n)) {
                                ntbf__rpc_conn_eof(s->c);
                                return;
                        }
                } else if (libuv_send(s, p->data, p->len)) {
                        ntbf__rpc_conn_eof(s->c);
                        return;
                }
                s->pend = p->next;
                if (!s->pend)
                        s->pend_tail = &s->pend;
                s->pend_bytes -= p->len;
                free(p->data);
                free(p);
        }
}

static void free_pending(struct sconn *s)
{
        while (s->pend) {
                struct pend *p = s->pend;
                s->pend = p->next;
                for (unsigned i = 0; i < p->nfds; i++)
                        close(p->fds[i]);
                free(p->data);
                free(p);
        }
        s->pend_tail = &s->pend;
        s->pend_bytes = 0;
}

static int s_send_fds(void *tctx, const char *buf, size_t len, const int *fds, unsigned nfds)
{
        struct sconn *s = tctx;
        if (s->closing)
                return -EPIPE;
        if (!len || nfds > 8)
                return -EINVAL;
        if (over_limit(s, len))
                return -ENOBUFS;
        if (!s->pend && !uv_stream_get_write_queue_size((uv_stream_t *)&s->pipe)) {
                ssize_t n = send_with_fds(s, buf, len, fds, nfds);
                if (n < 0)
                        return (int)n;
                if (n > 0)
                        return (size_t)n < len ? libuv_send(s, buf + n, len - (size_t)n) : 0;
        }
        struct pend *p = calloc(1, sizeof(*p));
        char *copy = malloc(len);
        if (!p || !copy) {
                free(p);
                free(copy);
                return -ENOMEM;
        }
        memcpy(copy, buf, len);
        *p = (struct pend){NULL, copy, len, {0}, 0};
        for (unsigned i = 0; i < nfds; i++) {
                int d = fcntl(fds[i], F_DUPFD_CLOEXEC, 0);
                if (d < 0) {
                        free_pending(s);
                        free(copy);
                        free(p);
                        return -errno;
                }
                p->fds[p->nfds++] = d;
        }
        *s->pend_tail = p;
        s->pend_tail = &p->next;
        s->pend_bytes += len;
        flush_pending(s);
        return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
        (void)suggested;
        struct sconn *s = h->data;
        *buf = uv_buf_init(s->rbuf, sizeof(s->rbuf));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
        (void)buf;
        struct sconn *s = st->data;
        if (n < 0) {
                ntbf__rpc_conn_eof(s->c);
                return;
        }
        if (n > 0)
                ntbf__rpc_conn_input(s->c, s->rbuf, (size_t)n);
}

static void s_pause(void *tctx, bool paused)
{
        struct sconn *s = tctx;
        if (s->closing)
                return;
        if (paused)
                uv_read_stop((uv_stream_t *)&s->pipe);
        else
                uv_read_start((uv_stream_t *)&s->pipe, on_alloc, on_read);
}

static void free_sconn(uv_handle_t *h)
{
        free(h->data);
}

static void retry_closed(uv_handle_t *h)
{
        free(h->data);
}

static void closed(uv_handle_t *h)
{
        struct sconn *s = h->data;
        ntbf__rpc_conn_free(s->c);
        free_pending(s);
        /* The timer goes last: its close frees the connection's memory. */
        uv_close((uv_handle_t *)&s->retry, retry_closed);
}

static void shut(uv_shutdown_t *req, int status)
{
        (void)status;
        struct sconn *s = req->data;
        if (!uv_is_closing((uv_handle_t *)&s->pipe))
                uv_close((uv_handle_t *)&s->pipe, closed);
}

static void s_close(void *tctx)
{
        struct sconn *s = tctx;
        if (s->closing)
                return;
        s->closing = true;
        uv_read_stop((uv_stream_t *)&s->pipe);
        /* What was sent (an error answer) is flushed before the socket goes; not to a client
         * that stopped reading: that would wait for it forever. */
        s->shut.data = s;
        if (s->stuck || uv_shutdown(&s->shut, (uv_stream_t *)&s->pipe, shut))
                uv_close((uv_handle_t *)&s->pipe, closed);
}

static const struct ntbf__tran_ops sock_ops = {s_send, s_pause, s_close, s_send_fds};

bool ntbf__sock_conn_handle(struct ntbf__d *d, const uv_handle_t *h)
{
        for (struct ntbf__rpc_conn *c = d->rpc.conns; c; c = c->next) {
                struct sconn *s = c->tctx;
                if (c->ops == &sock_ops &&
                    (h == (uv_handle_t *)&s->retry || h == (uv_handle_t *)&s->pipe))
                        return true;
        }
        return false;
}

/* ---- access control ------------------------------------------------------------------------ */

static bool account_id(const char *s, bool group, uint32_t *id)
{
        uint64_t v;
        if (!ntbf_uint_parse(s, &v) && v <= UINT32_MAX) {
                *id = (uint32_t)v;
                return true;
        }
        if (group) {
                struct group *g = getgrnam(s);
                if (g)
                        *id = g->gr_gid;
                return g != NULL;
        }
        struct passwd *p = getpwnam(s);
        if (p)
                *id = p->pw_uid;
        return p != NULL;
}

/* Whether the peer (uid, its groups) may talk to this daemon (docs/rpc.md, "Access"). */
static bool allowed(struct ntbf__d *d, uid_t uid, const gid_t *groups, int ngroups)
{
        if (uid == 0 || uid == getuid())
                return true;
        const struct ntbf_cluster_opts *o = &d->t->opts;
        uint32_t id;
        for (uint32_t i = 0; i < o->nallow_users; i++)
                if (account_id(o->allow_users[i], false, &id) && id == uid)
                        return true;
        for (uint32_t i = 0; i <= o->nallow_groups; i++) {
                /* The socket's group is allowed too: giving it the socket means that. */
                const char *g = i < o->nallow_groups ? o->allow_groups[i] : o->socket_group;
                if (g[0] && account_id(g, true, &id))
                        for (int k = 0; k < ngroups; k++)
                                if (groups[k] == id)
                                        return true;
        }
        return false;
}

/*
 * Whom the access settings allow must reach the socket through the file system: DIR and
 * DIR/run get search permission for group and others (not read: names are not listed),
 * and the socket is writable by others when users or groups are allowed by name (the
 * SO_PEERCRED check above decides), by its group when only socket_group is set. Nothing
 * else of DIR is opened: state/, log/ and the key stay the owner's.
 */
static void open_path(struct ntbf__d *d)
{
        const struct ntbf_cluster_opts *o = &d->t->opts;
        bool named = o->nallow_users || o->nallow_groups;
        if (!named && !o->socket_group[0])
                return;
        /* The socket's directory, and with --dir the instance directory above it (on a host
         * the runtime directory is made searchable already, docs/daemon.md). */
        char inst[PATH_MAX];
        snprintf(inst, sizeof(inst), "%s/run", d->dir);
        bool instance = !strcmp(inst, d->run_dir);
        const char *dirs[] = {d->run_dir, instance ? d->dir : NULL};
        for (int i = 0; i < 2 && dirs[i]; i++) {
                struct stat st;
                if (stat(dirs[i], &st) || st.st_uid != geteuid())
                        continue; /* not ours to change: its owner decides */
                if ((st.st_mode & 0011) != 0011 && chmod(dirs[i], (st.st_mode & 07777) | 0011))
                        LOG_W("cannot open %s to the users of allow_users / allow_groups / "
                              "socket_group: %s",
                              dirs[i], strerror(errno));
        }
        if (named && chmod(d->sock_path, 0666))
                LOG_W("cannot open %s to the users of allow_users / allow_groups: %s",
                      d->sock_path, strerror(errno));
}

static void on_connection(uv_stream_t *server, int status)
{
        struct ntbf__d *d = server->data;
        if (status < 0)
                return;
        struct sconn *s = calloc(1, sizeof(*s));
        if (!s || uv_pipe_init(d->loop, &s->pipe, 0)) {
                free(s);
                return;
        }
        s->pipe.data = s;
        s->pend_tail = &s->pend;
        if (uv_accept(server, (uv_stream_t *)&s->pipe)) {
                uv_close((uv_handle_t *)&s->pipe, free_sconn);
                return;
        }
        uv_os_fd_t fd;
        struct ucred cred = {0};
        socklen_t len = sizeof(cred);
        gid_t groups[256];
        socklen_t glen = sizeof(groups);
        int ng = 0;
        bool ok = !uv_fileno((uv_handle_t *)&s->pipe, &fd) &&
                  !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
        if (ok && !getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen))
                ng = (int)(glen / sizeof(gid_t));
        if (ng < 256 && ok)
                groups[ng++] = cred.gid;
        if (!ok || !allowed(d, cred.uid, groups, ng)) {
                /* Refused before a byte is read. */
                LOG_W("refused an RPC connection from pid %d uid %u: not root, not this daemon's "
                      "user, not in allow_users or allow_groups",
                      (int)cred.pid, (unsigned)cred.uid);
                uv_close((uv_handle_t *)&s->pipe, free_sconn);
                return;
        }
        s->c = ntbf__rpc_conn_new(&d->rpc, &sock_ops, s);
        if (!s->c) {
                uv_close((uv_handle_t *)&s->pipe, free_sconn);
                return;
        }
        uv_timer_init(d->loop, &s->retry);
        s->retry.data = s;
        s->c->pid = cred.pid;
        s->c->uid = cred.uid;
        LOG_D("RPC connection %llu from pid %d uid %u", (unsigned long long)s->c->id, (int)cred.pid,
              (unsigned)cred.uid);
        uv_read_start((uv_stream_t *)&s->pipe, on_alloc, on_read);
}

int ntbf__sock_listen(struct ntbf__d *d, char *why, size_t whylen)
{
        d->rpc = (struct ntbf__rpc_server){ntbf__methods, ntbf__nmethods, d,
                                           ntbf__methods_conn_gone, NULL};
        int e, fd = ntbf__host_inherited_socket();
        if (fd >= 0) {
                /* Socket activation (ntbfabd.socket): systemd made the socket, with the mode
                 * and group of the unit, and keeps it while the daemon restarts. */
                struct sockaddr_un sa;
                socklen_t len = sizeof(sa);
                if (!getsockname(fd, (struct sockaddr *)&sa, &len) && sa.sun_path[0])
                        snprintf(d->sock_path, sizeof(d->sock_path), "%.*s",
                                 (int)sizeof(sa.sun_path), sa.sun_path);
                e = uv_pipe_init(d->loop, &d->listener, 0);
                if (!e) {
                        d->listening = true;
                        d->listener.data = d;
                        e = uv_pipe_open(&d->listener, fd);
                }
                if (!e)
                        e = uv_listen((uv_stream_t *)&d->listener, 64, on_connection);
                if (e)
                        snprintf(why, whylen, "cannot listen on the socket systemd passed: %s",
                                 uv_strerror(e));
                else
                        LOG_I("listening on %s, passed by systemd", d->sock_path);
                return e;
        }
        unlink(d->sock_path); /* a stale socket: the node lock says no daemon uses it */
        e = uv_pipe_init(d->loop, &d->listener, 0);
        if (!e) {
                d->listening = true;
                d->listener.data = d;
                e = uv_pipe_bind(&d->listener, d->sock_path);
        }
        if (!e)
                e = uv_listen((uv_stream_t *)&d->listener, 64, on_connection);
        if (e) {
                snprintf(why, whylen, "cannot listen on %s: %s", d->sock_path, uv_strerror(e));
                return e;
        }
        chmod(d->sock_path, 0660);
        open_path(d);
        const char *grp = d->t->opts.socket_group;
        uint32_t gid;
        if (grp[0]) {
                if (!account_id(grp, true, &gid) || chown(d->sock_path, (uid_t)-1, gid))
                        LOG_W("cannot give %s to group '%s': %s; only this user and root can "
                              "connect",
                              d->sock_path, grp, strerror(errno));
        }
        return 0;
}
