/* daemon/peer.c: TCP sessions with the other daemons: handshake, heartbeats, requests, backoff. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "daemon.h"
#include "jsonstrict.h"
#include "log.h"
#include "ntbfab/error.h"
#include "peerproto.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000 /* a restarted peer is back within a heartbeat */
#define SWEEP_MS       100
#define RBUF_OPEN      16384 /* read buffer of an open session */
#define RBUF_HS        128   /* read buffer during the handshake: a frame or two at most */

/*
 * What a stranger on the management network can cost (docs/peer.md, "Limits"): an inbound
 * connection that has not completed the handshake holds about 1 KiB (this struct, libuv's
 * handle, 208 bytes of frames) for at most NTBF_PEER_HANDSHAKE_MS; there are at most
 * NTBF_PEER_MAX_UNAUTH of them, fewer when descriptors are short; more are closed as soon as
 * they are accepted. Refusals are logged at most LOG_BURST times per LOG_WINDOW_MS.
 */
#define LOG_BURST     10
#define LOG_WINDOW_MS 10000

struct peers;

/* One TCP connection, identified after the handshake. */
struct pconn {
        uv_tcp_t tcp;
        uv_connect_t creq;
        struct ntbf__peers *ps;
        struct pconn *hs_next, *hs_prev; /* in ps->hs while the handshake runs */
        uint64_t deadline;               /* ... which must end by then */
        struct peer *peer;               /* outbound: from the start; inbound: after PROOF */
        struct ntbf__pp pp;
        bool outbound, open, closing;
        uint64_t gen;
        char addr[96];
        char hsbuf[RBUF_HS];
        char *rbuf; /* RBUF_OPEN bytes, once open */
};

struct pending {
        struct pending *next;
        uint64_t id, deadline;
        char m[16];
        ntbf__done_fn cb;
        void *arg;
};

struct peer {
        struct ntbf__peers *ps;
        uint32_t node;
        struct pconn *c;    /* the open session */
        struct pconn *dial; /* outbound connection being set up */
        bool dialer;        /* we connect to it (lower id dials higher) */
        struct sockaddr_storage sa;
        bool resolved;
        uv_timer_t retry;
        uint32_t backoff;
        uint64_t last_rx;
        struct pending *pending;
};

/* A message of this node to itself, delivered from the loop like a peer's. */
struct local {
        struct local *next;
        bool note;
        char m[16];
        struct json_object *p;
        ntbf__done_fn cb;
        void *arg;
};

struct ntbf__peers {
        struct ntbf__d *d;
        uv_tcp_t listener;
        bool listening;
        struct peer *v;
        uint64_t next_id, next_gen;
        struct local *lq, *lq_tail;
        uv_timer_t lq_timer, sweep;
        bool stopping;
        struct pconn *hs;   /* connections in the handshake, oldest last */
        unsigned nunauth;   /* inbound ones among them */
        unsigned nconns;    /* every connection, open or not */
        uint64_t log_since; /* rate limit of refusal lines */
        unsigned log_lines, log_dropped;
        struct json_tokener *tok; /* parses every session's messages, reset for each */
};

/* A new window of the refusal log once the last one is over, with the count of what it did
 * not log. */
static void refusal_window(struct ntbf__peers *ps)
{
        uint64_t now = ntbf__now_ms();
        if (now - ps->log_since < LOG_WINDOW_MS)
                return;
        if (ps->log_dropped)
                LOG_W("%u more refused peer connections not logged in the last %d s",
                      ps->log_dropped, LOG_WINDOW_MS / 1000);
        ps->log_since = now;
        ps->log_lines = ps->log_dropped = 0;
}

/* A refusal line, unless LOG_BURST were written in the last LOG_WINDOW_MS. */
static void refusal_log(struct ntbf__peers *ps, const char *fmt, ...) NTBF_PRINTF(2, 3);
static void refusal_log(struct ntbf__peers *ps, const char *fmt, ...)
{
        refusal_window(ps);
        if (ps->log_lines >= LOG_BURST) {
                ps->log_dropped++;
                return;
        }
        ps->log_lines++;
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        LOG_W("%s", msg);
}

uint64_t ntbf__now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- what has been heard ------------------------------------------------------------------- */

/*
 * heard_ms is when the loop's latest completed I/O poll began: every message that reached a
 * socket before then has been read. It lags the clock by at most one poll's wait (the next
 * timer: a second at most), never runs ahead of it, and stands still while the daemon cannot
 * poll: a long callback, or a CPU that runs other processes. (libuv's idle-time metric is no
 * help here: a poll that times out leaves its start time behind, and the next poll with an
 * event counts everything since as idle, so it can run ahead of the clock after a stall.)
 */
static void poll_begins(uv_prepare_t *h)
{
        struct ntbf__d *d = h->data;
        d->poll_t0 = ntbf__now_ms();
}

static void poll_ended(uv_check_t *h)
{
        struct ntbf__d *d = h->data;
        d->heard_ms = d->poll_t0;
}

uint64_t ntbf__heard_ms(const struct ntbf__d *d)
{
        return d->heard_ms;
}

void ntbf__heard_start(struct ntbf__d *d)
{
        d->heard_ms = ntbf__now_ms();
        uv_prepare_init(d->loop, &d->poll_prepare);
        d->poll_prepare.data = d;
        uv_prepare_start(&d->poll_prepare, poll_begins);
        uv_check_init(d->loop, &d->poll_check);
        d->poll_check.data = d;
        uv_check_start(&d->poll_check, poll_ended);
}

static const char *name_of(struct ntbf__peers *ps, uint32_t node)
{
        return ps->d->t->nodes[node].name;
}

/* ---- writing ------------------------------------------------------------------------------- */

struct wreq {
        uv_write_t w;
        uint8_t *data;
};

static void wrote(uv_write_t *w, int status)
{
        (void)status;
        struct wreq *r = (struct wreq *)w;
        free(r->data);
        free(r);
}

static void conn_close(struct pconn *c, const char *why);

static void send_bytes(struct pconn *c, uint8_t *data, size_t len)
{
        struct wreq *r = malloc(sizeof(*r));
        if (!r || c->closing) {
                free(r);
                free(data);
                return;
        }
        r->data = data;
        uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
        int e = uv_write(&r->w, (uv_stream_t *)&c->tcp, &b, 1, wrote);
        if (e) {
                free(data);
                free(r);
                conn_close(c, uv_strerror(e));
        }
}

static int send_json(struct pconn *c, struct json_object *o)
{
        const char *s = ntbf__json_text(o);
        uint8_t *f;
        size_t n;
        int r = ntbf__pp_seal(&c->pp, s, strlen(s), &f, &n);
        if (r)
                return r;
        send_bytes(c, f, n);
        return 0;
}

/* ---- requests and their answers ------------------------------------------------------------ */

static void fail_pending(struct peer *p, int err, const char *why)
{
        while (p->pending) {
                struct pending *x = p->pending;
                p->pending = x->next;
                char msg[256];
                snprintf(msg, sizeof(msg), "%s (%s of node '%s')", why, x->m,
                         name_of(p->ps, p->node));
                x->cb(x->arg, err, msg, NULL);
                free(x);
        }
}

static void local_kick(struct ntbf__peers *ps);

void ntbf__peer_request(struct ntbf__d *d, uint32_t node, const char *m, struct json_object *p,
                        ntbf__done_fn cb, void *arg)
{
        struct ntbf__peers *ps = d->peers;
        if (ps->stopping) {
                json_object_put(p);
                cb(arg, -ECANCELED, "the daemon is stopping", NULL);
                return;
        }
        if (node == d->self) {
                struct local *l = calloc(1, sizeof(*l));
                if (!l) {
                        json_object_put(p);
                        cb(arg, -ENOMEM, "out of memory", NULL);
                        return;
                }
                snprintf(l->m, sizeof(l->m), "%s", m);
                l->p = p;
                l->cb = cb;
                l->arg = arg;
                if (ps->lq_tail)
                        ps->lq_tail->next = l;
                else
                        ps->lq = l;
                ps->lq_tail = l;
                local_kick(ps);
                return;
        }
        struct peer *pr = &ps->v[node];
        if (!pr->c) {
                char msg[256];
                snprintf(msg, sizeof(msg),
                         "the daemon of node '%s' is unreachable; check that it runs (ntbfab "
                         "status)",
                         name_of(ps, node));
                json_object_put(p);
                cb(arg, NTBF_EUNREACHABLE, msg, NULL);
                return;
        }
        struct pending *x = calloc(1, sizeof(*x));
        struct json_object *o = json_object_new_object();
        x->id = ++ps->next_id;
        x->deadline = ntbf__now_ms() + NTBF_PEER_TIMEOUT_MS;
        snprintf(x->m, sizeof(x->m), "%s", m);
        x->cb = cb;
        x->arg = arg;
        x->next = pr->pending;
        pr->pending = x;
        ntbf__jput_s(o, "t", "q");
        ntbf__jput_u(o, "id", x->id);
        ntbf__jput_s(o, "m", m);
        json_object_object_add(o, "p", p ? p : json_object_new_object());
        int r = send_json(pr->c, o);
        json_object_put(o);
        if (r) {
                pr->pending = x->next;
                free(x);
                cb(arg, r, "cannot send to the peer", NULL);
        }
}

void ntbf__peer_notify(struct ntbf__d *d, uint32_t node, const char *m, struct json_object *p)
{
        struct ntbf__peers *ps = d->peers;
        if (ps->stopping) {
                json_object_put(p);
                return;
        }
        if (node == d->self) {
                struct local *l = calloc(1, sizeof(*l));
                if (!l) {
                        json_object_put(p);
                        return;
                }
                l->note = true;
                snprintf(l->m, sizeof(l->m), "%s", m);
                l->p = p;
                if (ps->lq_tail)
                        ps->lq_tail->next = l;
                else
                        ps->lq = l;
                ps->lq_tail = l;
                local_kick(ps);
                return;
        }
        struct peer *pr = &ps->v[node];
        if (!pr->c) {
                json_object_put(p);
                return;
        }
        struct json_object *o = json_object_new_object();
        ntbf__jput_s(o, "t", "n");
        ntbf__jput_s(o, "m", m);
        json_object_object_add(o, "p", p ? p : json_object_new_object());
        send_json(pr->c, o);
        json_object_put(o);
}

bool ntbf__peer_connected(struct ntbf__d *d, uint32_t node)
{
        return node == d->self || (d->peers && d->peers->v[node].c != NULL);
}

uint64_t ntbf__peer_silence_ms(struct ntbf__d *d, uint32_t node)
{
        if (node == d->self)
                return 0;
        struct peer *p = &d->peers->v[node];
        return p->last_rx ? ntbf__now_ms() - p->last_rx : UINT64_MAX;
}

/* The answer to a peer's request goes back on the session it came on, if it still exists. */
struct reply {
        struct ntbf__peers *ps;
        uint32_t node;
        uint64_t gen, id;
};

static void reply_cb(void *arg, int err, const char *msg, struct json_object *res)
{
        struct reply *r = arg;
        struct peer *p = &r->ps->v[r->node];
        if (p->c && p->c->gen == r->gen && !p->c->closing) {
                struct json_object *o = json_object_new_object();
                ntbf__jput_s(o, "t", "r");
                ntbf__jput_u(o, "id", r->id);
                json_object_object_add(o, "e", json_object_new_int(err));
                if (err)
                        ntbf__jput_s(o, "msg", msg ? msg : ntbf_strerror(err));
                json_object_object_add(o, "res", res);
                res = NULL;
                send_json(p->c, o);
                json_object_put(o);
        }
        json_object_put(res);
        free(r);
}

/* ---- one message of an open session -------------------------------------------------------- */

static void message(struct pconn *c, const uint8_t *data, size_t len)
{
        struct ntbf__peers *ps = c->ps;
        struct peer *p = c->peer;
        struct ntbf__d *d = ps->d;
        if (!ps->tok && (ps->tok = json_tokener_new_ex(64)))
                json_tokener_set_flags(ps->tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        struct json_tokener *tok = ps->tok;
        struct json_object *o = NULL, *pp;
        if (tok) {
                json_tokener_reset(tok);
                o = json_tokener_parse_ex(tok, (const char *)data, (int)len);
        }
        bool whole = o && json_tokener_get_parse_end(tok) == len;
        const char *t = NULL, *m = NULL;
        char why[160];
        if (whole && ntbf__json_check((const char *)data, len, why, sizeof(why)))
                whole = false;
        if (!whole || !json_object_is_type(o, json_type_object) || !ntbf__jget_s(o, "t", &t)) {
                /* Authenticated but not understood: a bug or a version mismatch, not an attack. */
                LOG_W("peer %s (node '%s'): message not understood; ignored", c->addr,
                      name_of(ps, p->node));
                json_object_put(o);
                return;
        }
        p->last_rx = ntbf__now_ms();
        bool hb = !strcmp(t, "h");
        if (d->fm)
                ntbf__fm_seen(d->fm, p->node, hb ? o : NULL);
        if (hb) {
                json_object_put(o);
                return;
        }
        if (!json_object_object_get_ex(o, "p", &pp))
                pp = NULL;
        if (!strcmp(t, "q")) {
                uint64_t id;
                struct reply *r = calloc(1, sizeof(*r));
                if (r && ntbf__jget_u(o, "id", &id) && ntbf__jget_s(o, "m", &m)) {
                        *r = (struct reply){ps, p->node, c->gen, id};
                        ntbf__d_request(d, p->node, m, pp, reply_cb, r);
                } else {
                        free(r);
                }
        } else if (!strcmp(t, "n")) {
                if (ntbf__jget_s(o, "m", &m))
                        ntbf__d_note(d, p->node, m, pp);
        } else if (!strcmp(t, "r")) {
                uint64_t id;
                struct json_object *e, *res = NULL;
                const char *msg = NULL;
                if (ntbf__jget_u(o, "id", &id)) {
                        for (struct pending **x = &p->pending; *x; x = &(*x)->next) {
                                if ((*x)->id != id)
                                        continue;
                                struct pending *q = *x;
                                *x = q->next;
                                int err = json_object_object_get_ex(o, "e", &e)
                                              ? json_object_get_int(e)
                                              : NTBF_EPROTO;
                                ntbf__jget_s(o, "msg", &msg);
                                if (json_object_object_get_ex(o, "res", &res))
                                        json_object_get(res);
                                q->cb(q->arg, err, msg ? msg : (err ? ntbf_strerror(err) : NULL),
                                      err ? (json_object_put(res), NULL) : res);
                                free(q);
                                break;
                        }
                }
        }
        json_object_put(o);
}

/* ---- connections --------------------------------------------------------------------------- */

static void schedule_dial(struct peer *p);

static void closed(uv_handle_t *h)
{
        struct pconn *c = h->data;
        c->ps->nconns--;
        ntbf__pp_free(&c->pp);
        free(c->rbuf);
        free(c);
}

/* The handshake is over (done or abandoned): off the list, out of the count. */
static void hs_leave(struct pconn *c)
{
        struct ntbf__peers *ps = c->ps;
        if (!c->deadline)
                return;
        if (c->hs_prev)
                c->hs_prev->hs_next = c->hs_next;
        else
                ps->hs = c->hs_next;
        if (c->hs_next)
                c->hs_next->hs_prev = c->hs_prev;
        c->hs_next = c->hs_prev = NULL;
        c->deadline = 0;
        if (!c->outbound)
                ps->nunauth--;
}

static void hs_enter(struct pconn *c)
{
        struct ntbf__peers *ps = c->ps;
        c->deadline = ntbf__now_ms() + NTBF_PEER_HANDSHAKE_MS;
        c->hs_next = ps->hs;
        if (ps->hs)
                ps->hs->hs_prev = c;
        ps->hs = c;
        if (!c->outbound)
                ps->nunauth++;
}

static void conn_close(struct pconn *c, const char *why)
{
        if (c->closing)
                return;
        c->closing = true;
        hs_leave(c);
        struct peer *p = c->peer;
        struct ntbf__peers *ps = c->ps;
        if (p && p->dial == c)
                p->dial = NULL;
        if (p && p->c == c) {
                p->c = NULL;
                if (!ps->stopping)
                        LOG_W("session with node '%s' (%s) closed: %s", name_of(ps, p->node),
                              c->addr, why);
                fail_pending(p, NTBF_EUNREACHABLE, "the connection was lost before the answer");
                if (!ps->stopping)
                        ntbf__d_peer_up(ps->d, p->node, false);
        }
        uv_read_stop((uv_stream_t *)&c->tcp);
        uv_close((uv_handle_t *)&c->tcp, closed);
        if (p && p->dialer && !p->c && !p->dial && !ps->stopping)
                schedule_dial(p);
}

/* A server's check of a good HELLO, before anything is answered: the node it claims to be
 * must be another node of the cluster file. */
static bool hello_ok(struct pconn *c)
{
        struct ntbf__d *d = c->ps->d;
        uint32_t node = ntbf_topo_find_node_id(d->t, c->pp.peer_id);
        if (node != NTBF_NONE && node != d->self)
                return true;
        refusal_log(c->ps,
                    "peer %s sent a HELLO made with the cluster key as node id %u, which is %s; "
                    "dropping the connection without an answer",
                    c->addr, c->pp.peer_id,
                    node == d->self ? "this node" : "no node of the cluster file");
        return false;
}

/* The handshake finished (on the server: the client answered the challenge): the connection
 * becomes the peer's session. Only now may it replace an older one. */
static void session_open(struct pconn *c)
{
        struct ntbf__peers *ps = c->ps;
        struct ntbf__d *d = ps->d;
        uint32_t node = ntbf_topo_find_node_id(d->t, c->pp.peer_id);
        if (node == NTBF_NONE || node == d->self || (c->peer && c->peer->node != node)) {
                LOG_W("peer %s authenticated as node id %u, which %s; dropping the connection",
                      c->addr, c->pp.peer_id,
                      node == d->self ? "is this node" : "is not the node expected there");
                conn_close(c, "wrong node");
                return;
        }
        char *rbuf = malloc(RBUF_OPEN);
        if (!rbuf) {
                conn_close(c, "out of memory");
                return;
        }
        c->rbuf = rbuf;
        hs_leave(c);
        struct peer *p = &ps->v[node];
        if (p->c && p->c != c) /* it restarted: the new session replaces the old one */
                conn_close(p->c, "replaced by a new session");
        if (p->dial == c)
                p->dial = NULL;
        c->peer = p;
        c->open = true;
        p->c = c;
        p->backoff = BACKOFF_MIN_MS;
        p->last_rx = ntbf__now_ms();
        LOG_I("session with node '%s' (%s) open", name_of(ps, node), c->addr);
        /* A first heartbeat at once: the manager learns this node's links without waiting. */
        struct json_object *o = json_object_new_object();
        ntbf__jput_s(o, "t", "h");
        json_object_object_add(o, "ports", ntbf__hw_ports(d));
        send_json(c, o);
        json_object_put(o);
        ntbf__d_peer_up(d, node, true);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
        (void)suggested;
        struct pconn *c = h->data;
        /* Small reads until the session is open: a stranger's bytes are taken a frame at a
         * time, and its header refused before more is read. */
        *buf = c->rbuf ? uv_buf_init(c->rbuf, RBUF_OPEN) : uv_buf_init(c->hsbuf, RBUF_HS);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
        struct pconn *c = s->data;
        (void)buf;
        if (n < 0) {
                conn_close(c, n == UV_EOF ? "closed by the peer" : uv_strerror((int)n));
                return;
        }
        if (c->closing || !n)
                return;
        if (ntbf__pp_feed(&c->pp, buf->base, (size_t)n)) {
                refusal_log(c->ps, "peer %s: %s; dropping the connection", c->addr,
                            c->open ? "too much unframed data"
                                    : "more bytes than a handshake before finishing it");
                conn_close(c, "flooded");
                return;
        }
        for (;;) {
                struct ntbf__pp_event ev;
                int r = ntbf__pp_next(&c->pp, &ev);
                if (r == 0)
                        break;
                if (r < 0) {
                        /* Nothing of it is believed; the dialer reconnects with backoff. */
                        const char *what =
                            r == NTBF_EAUTH ? "authentication failed" : "protocol error";
                        if (c->open)
                                LOG_W("peer %s (node '%s'): %s: %s; dropping the connection",
                                      c->addr, name_of(c->ps, c->peer->node), what, c->pp.why);
                        else
                                refusal_log(c->ps, "peer %s%s%s%s: %s: %s; dropping the connection",
                                            c->addr, c->peer ? " (node '" : "",
                                            c->peer ? name_of(c->ps, c->peer->node) : "",
                                            c->peer ? "')" : "", what, c->pp.why);
                        conn_close(c, what);
                        return;
                }
                if (ev.kind == NTBF_PP_EV_HELLO) {
                        /* WELCOME (the challenge) only once the node it claims is checked. */
                        uint8_t *w;
                        size_t wl;
                        if (!hello_ok(c) || ntbf__pp_welcome(&c->pp, &w, &wl)) {
                                conn_close(c, "refused HELLO");
                                return;
                        }
                        send_bytes(c, w, wl);
                        if (c->closing)
                                return;
                } else if (ev.kind == NTBF_PP_EV_OPEN) {
                        if (ev.reply)
                                send_bytes(c, ev.reply, ev.reply_len); /* the client's PROOF */
                        if (c->closing)
                                return;
                        session_open(c);
                        if (c->closing)
                                return;
                } else {
                        message(c, ev.data, ev.len);
                        if (c->closing)
                                return;
                }
        }
}

static struct pconn *conn_new(struct ntbf__peers *ps, bool outbound)
{
        struct pconn *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->ps = ps;
        c->outbound = outbound;
        c->gen = ++ps->next_gen;
        if (ntbf__pp_init(&c->pp, outbound, ps->d->key, ps->d->t->nodes[ps->d->self].id, NULL) ||
            uv_tcp_init(ps->d->loop, &c->tcp)) {
                ntbf__pp_free(&c->pp);
                free(c);
                return NULL;
        }
        c->tcp.data = c;
        ps->nconns++;
        uv_tcp_nodelay(&c->tcp, 1);
        return c;
}

/*
 * How many inbound connections may be in the handshake at once: NTBF_PEER_MAX_UNAUTH, and
 * an eighth of the descriptors the process may open, so that strangers never take the
 * descriptors the local socket needs for its operators.
 */
static unsigned max_unauth(void)
{
        struct rlimit r;
        unsigned m = NTBF_PEER_MAX_UNAUTH;
        if (!getrlimit(RLIMIT_NOFILE, &r) && r.rlim_cur != RLIM_INFINITY && r.rlim_cur / 8 < m)
                m = (unsigned)(r.rlim_cur / 8);
        return m ? m : 1;
}

/* Whether descriptor fd leaves NTBF_PEER_FD_RESERVE descriptors for everything else. */
static bool fd_spare(int fd)
{
        struct rlimit r;
        return getrlimit(RLIMIT_NOFILE, &r) || r.rlim_cur == RLIM_INFINITY ||
               (rlim_t)fd + NTBF_PEER_FD_RESERVE < r.rlim_cur;
}

static void on_connection(uv_stream_t *server, int status)
{
        struct ntbf__peers *ps = server->data;
        if (status < 0)
                return;
        struct pconn *c = conn_new(ps, false);
        if (!c)
                return;
        if (uv_accept(server, (uv_stream_t *)&c->tcp)) {
                uv_close((uv_handle_t *)&c->tcp, closed);
                return;
        }
        uv_os_fd_t fd = -1;
        uv_fileno((uv_handle_t *)&c->tcp, &fd);
        unsigned cap = max_unauth();
        bool full = ps->nconns > 2 * ps->d->t->nnodes + cap; /* this one counted */
        if (ps->nunauth >= cap || full || !fd_spare(fd)) {
                /* Accepted only to be closed: the backlog does not fill with strangers. */
                refusal_log(ps,
                            "refusing a peer connection at once: %s (at most %u in the "
                            "handshake at a time, %d descriptors kept for the rest)",
                            ps->nunauth >= cap ? "too many connections in the handshake"
                            : full             ? "too many peer connections"
                                               : "descriptors are short",
                            cap, NTBF_PEER_FD_RESERVE);
                c->closing = true;
                uv_close((uv_handle_t *)&c->tcp, closed);
                return;
        }
        hs_enter(c);
        struct sockaddr_storage sa;
        int len = sizeof(sa);
        char host[64] = "?";
        if (!uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&sa, &len)) {
                if (sa.ss_family == AF_INET)
                        uv_ip4_name((struct sockaddr_in *)&sa, host, sizeof(host));
                else
                        uv_ip6_name((struct sockaddr_in6 *)&sa, host, sizeof(host));
                snprintf(c->addr, sizeof(c->addr), "%s:%u", host,
                         ntohs(((struct sockaddr_in *)&sa)->sin_port));
        }
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_connect(uv_connect_t *req, int status)
{
        struct pconn *c = req->data;
        if (status < 0) {
                LOG_D("cannot reach node '%s' at %s: %s", name_of(c->ps, c->peer->node), c->addr,
                      uv_strerror(status));
                conn_close(c, uv_strerror(status));
                return;
        }
        uint8_t *f;
        size_t n;
        if (ntbf__pp_hello(&c->pp, c->ps->d->t->nodes[c->peer->node].id, &f, &n)) {
                conn_close(c, "out of memory");
                return;
        }
        send_bytes(c, f, n);
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void dial(uv_timer_t *t)
{
        struct peer *p = t->data;
        struct ntbf__peers *ps = p->ps;
        if (ps->stopping || p->c || p->dial || !p->resolved)
                return;
        struct pconn *c = conn_new(ps, true);
        if (!c) {
                schedule_dial(p);
                return;
        }
        c->peer = p;
        snprintf(c->addr, sizeof(c->addr), "%s", ps->d->t->nodes[p->node].address);
        p->dial = c;
        hs_enter(c); /* connecting counts: a peer that does not answer is given up on too */
        c->creq.data = c;
        int e = uv_tcp_connect(&c->creq, &c->tcp, (struct sockaddr *)&p->sa, on_connect);
        if (e)
                conn_close(c, uv_strerror(e));
}

static void schedule_dial(struct peer *p)
{
        uv_timer_start(&p->retry, dial, p->backoff, 0);
        p->backoff = p->backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : p->backoff * 2;
}

/* ---- the loop's own work ------------------------------------------------------------------- */

static void local_run(uv_timer_t *t)
{
        struct ntbf__peers *ps = t->data;
        /* Take the queue as it is now: what runs may queue more for the next turn. */
        struct local *l = ps->lq;
        ps->lq = ps->lq_tail = NULL;
        while (l) {
                struct local *next = l->next;
                if (l->note)
                        ntbf__d_note(ps->d, ps->d->self, l->m, l->p);
                else
                        ntbf__d_request(ps->d, ps->d->self, l->m, l->p, l->cb, l->arg);
                json_object_put(l->p);
                free(l);
                l = next;
        }
}

static void local_kick(struct ntbf__peers *ps)
{
        if (!uv_is_active((uv_handle_t *)&ps->lq_timer))
                uv_timer_start(&ps->lq_timer, local_run, 0, 0);
}

static void sweep(uv_timer_t *t)
{
        struct ntbf__peers *ps = t->data;
        /* Deadlines pass only for what this daemon has read (ntbf__heard_ms): an answer
         * waiting in a socket while the daemon was busy is not late. */
        uint64_t heard = ntbf__heard_ms(ps->d);
        refusal_window(ps);
        /* Handshakes that did not finish in time. */
        for (struct pconn *c = ps->hs, *next; c; c = next) {
                next = c->hs_next;
                if (c->deadline > heard)
                        continue;
                if (c->outbound)
                        LOG_D("handshake with node '%s' (%s) timed out", name_of(ps, c->peer->node),
                              c->addr);
                else
                        refusal_log(ps,
                                    "peer %s did not complete the handshake within %d ms; "
                                    "dropping the connection",
                                    c->addr, NTBF_PEER_HANDSHAKE_MS);
                conn_close(c, "handshake timed out");
        }
        for (uint32_t n = 0; n < ps->d->t->nnodes; n++) {
                struct peer *p = &ps->v[n];
                for (struct pending **x = &p->pending; *x;) {
                        struct pending *q = *x;
                        if (q->deadline > heard) {
                                x = &q->next;
                                continue;
                        }
                        *x = q->next;
                        char msg[256];
                        snprintf(msg, sizeof(msg),
                                 "node '%s' did not answer %s within %d ms; it may be overloaded "
                                 "or its daemon stuck",
                                 name_of(ps, n), q->m, NTBF_PEER_TIMEOUT_MS);
                        q->cb(q->arg, -ETIMEDOUT, msg, NULL);
                        free(q);
                }
        }
}

void ntbf__peers_beat(struct ntbf__d *d)
{
        struct ntbf__peers *ps = d->peers;
        if (!ps)
                return;
        uint64_t heard = ntbf__heard_ms(d);
        struct json_object *ports = ntbf__hw_ports(d);
        if (d->fm) { /* the manager hears its own node's link states too */
                struct json_object *self = json_object_new_object();
                json_object_object_add(self, "ports", json_object_get(ports));
                ntbf__fm_seen(d->fm, d->self, self);
                json_object_put(self);
        }
        for (uint32_t n = 0; n < d->t->nnodes; n++) {
                struct peer *p = &ps->v[n];
                if (!p->c)
                        continue;
                /* Silent up to what this daemon has read, not up to now (ntbf__heard_ms). */
                if (heard > p->last_rx &&
                    heard - p->last_rx > (uint64_t)NTBF_MISSED_BEATS * NTBF_HEARTBEAT_MS) {
                        LOG_W("node '%s' is unreachable: %d heartbeats missed", name_of(ps, n),
                              NTBF_MISSED_BEATS);
                        conn_close(p->c, "heartbeats missed");
                        continue;
                }
                struct json_object *o = json_object_new_object();
                ntbf__jput_s(o, "t", "h");
                json_object_object_add(o, "ports", json_object_get(ports));
                send_json(p->c, o);
                json_object_put(o);
        }
        json_object_put(ports);
}

/* ---- start and stop ------------------------------------------------------------------------ */

/* "host:port" (IPv6 in brackets) into a socket address. */
static int resolve(const char *addr, struct sockaddr_storage *sa)
{
        char host[80];
        const char *colon = strrchr(addr, ':');
        if (!colon || (size_t)(colon - addr) >= sizeof(host))
                return -EINVAL;
        const char *h = addr;
        size_t hl = (size_t)(colon - addr);
        if (addr[0] == '[' && hl >= 2 && addr[hl - 1] == ']') {
                h++;
                hl -= 2;
        }
        memcpy(host, h, hl);
        host[hl] = 0;
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
        if (getaddrinfo(host, colon + 1, &hints, &res))
                return -EHOSTUNREACH;
        memcpy(sa, res->ai_addr, res->ai_addrlen);
        freeaddrinfo(res);
        return 0;
}

int ntbf__peers_start(struct ntbf__d *d, char *why, size_t whylen)
{
        struct ntbf__peers *ps = calloc(1, sizeof(*ps));
        if (!ps)
                return -ENOMEM;
        d->peers = ps;
        ps->d = d;
        ps->v = calloc(d->t->nnodes, sizeof(*ps->v));
        if (!ps->v)
                return -ENOMEM;
        uv_timer_init(d->loop, &ps->lq_timer);
        ps->lq_timer.data = ps;
        uv_timer_init(d->loop, &ps->sweep);
        ps->sweep.data = ps;
        uv_timer_start(&ps->sweep, sweep, SWEEP_MS, SWEEP_MS);
        const struct ntbf_node *me = &d->t->nodes[d->self];
        for (uint32_t n = 0; n < d->t->nnodes; n++) {
                struct peer *p = &ps->v[n];
                p->ps = ps;
                p->node = n;
                p->backoff = BACKOFF_MIN_MS;
                uv_timer_init(d->loop, &p->retry);
                p->retry.data = p;
                if (n == d->self)
                        continue;
                p->dialer = me->id < d->t->nodes[n].id;
                if (resolve(d->t->nodes[n].address, &p->sa)) {
                        LOG_W("cannot resolve the address %s of node '%s'; it stays unreachable",
                              d->t->nodes[n].address, d->t->nodes[n].name);
                        continue;
                }
                p->resolved = true;
        }
        struct sockaddr_storage sa;
        int e = resolve(me->address, &sa);
        if (!e)
                e = uv_tcp_init(d->loop, &ps->listener);
        if (!e) {
                ps->listening = true;
                ps->listener.data = ps;
                e = uv_tcp_bind(&ps->listener, (struct sockaddr *)&sa, 0);
        }
        if (!e)
                e = uv_listen((uv_stream_t *)&ps->listener, 64, on_connection);
        if (e) {
                snprintf(why, whylen,
                         "cannot listen on %s (the address of node '%s' in the cluster file): "
                         "%s; is another daemon of this node or another cluster running?",
                         me->address, me->name, e < 0 ? uv_strerror(e) : strerror(-e));
                return e;
        }
        for (uint32_t n = 0; n < d->t->nnodes; n++)
                if (ps->v[n].dialer && ps->v[n].resolved)
                        uv_timer_start(&ps->v[n].retry, dial, 0, 0);
        return 0;
}

void ntbf__peers_stop(struct ntbf__d *d)
{
        struct ntbf__peers *ps = d->peers;
        if (!ps)
                return;
        ps->stopping = true;
        for (uint32_t n = 0; ps->v && n < d->t->nnodes; n++) {
                struct peer *p = &ps->v[n];
                if (p->c)
                        conn_close(p->c, "stopping");
                if (p->dial)
                        conn_close(p->dial, "stopping");
                fail_pending(p, -ECANCELED, "the daemon is stopping");
                uv_close((uv_handle_t *)&p->retry, NULL);
        }
        while (ps->lq) {
                struct local *l = ps->lq;
                ps->lq = l->next;
                if (!l->note)
                        l->cb(l->arg, -ECANCELED, "the daemon is stopping", NULL);
                json_object_put(l->p);
                free(l);
        }
        if (ps->listening)
                uv_close((uv_handle_t *)&ps->listener, NULL);
        uv_close((uv_handle_t *)&ps->lq_timer, NULL);
        uv_close((uv_handle_t *)&ps->sweep, NULL);
}

void ntbf__peers_free(struct ntbf__d *d)
{
        if (d->peers) {
                if (d->peers->tok)
                        json_tokener_free(d->peers->tok);
                free(d->peers->v);
                free(d->peers);
                d->peers = NULL;
        }
}
