/* daemon/rpc.c: newline-delimited JSON-RPC 2.0: limits, strict checking, in-order answers. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/suggest.h"
#include "jsonstrict.h"
#include "ntbfab/error.h"
#include "rpc.h"

struct ntbf__rpc_call {
        struct ntbf__rpc_conn *conn; /* NULL once the connection is gone */
        struct json_object *id;
        const struct ntbf__rpc_method *m;
        bool sync; /* being handled inside dispatch: the caller goes on with the queue */
        bool done;
        ntbf__done_fn cb; /* a call of ntbf__rpc_invoke: its answer goes here, not to conn */
        void *arg;
};

static void process(struct ntbf__rpc_conn *c);
static bool check_params(const struct ntbf__rpc_method *m, struct json_object *params, char *msg,
                         size_t len);
static const struct ntbf__rpc_method *find_method(const struct ntbf__rpc_server *s,
                                                  const char *name);

/* The error a JSON-RPC code stands for, for callers that get errno-like codes. */
static int invoke_err(int code)
{
        return code == NTBF_RPC_PARAMS ? -EINVAL : code == NTBF_RPC_NO_METHOD ? -ENOSYS : -EIO;
}

/* ---- connections --------------------------------------------------------------------------- */

struct ntbf__rpc_conn *ntbf__rpc_conn_new(struct ntbf__rpc_server *s,
                                          const struct ntbf__tran_ops *ops, void *tctx)
{
        static uint64_t next_id = 1;
        struct ntbf__rpc_conn *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->srv = s;
        c->ops = ops;
        c->tctx = tctx;
        c->id = next_id++;
        c->next = s->conns;
        if (s->conns)
                s->conns->prev = c;
        s->conns = c;
        return c;
}

static void close_conn(struct ntbf__rpc_conn *c)
{
        if (c->closing)
                return;
        c->closing = true;
        c->ops->close(c->tctx);
}

void ntbf__rpc_conn_eof(struct ntbf__rpc_conn *c)
{
        close_conn(c);
}

void ntbf__rpc_conn_free(struct ntbf__rpc_conn *c)
{
        if (!c)
                return;
        if (c->srv->conn_gone)
                c->srv->conn_gone(c->srv->ctx, c);
        if (c->busy)
                c->busy->conn = NULL; /* its answer will have nowhere to go */
        if (c->prev)
                c->prev->next = c->next;
        else
                c->srv->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        free(c->in);
        free(c);
}

static int send_obj_fds(struct ntbf__rpc_conn *c, struct json_object *o, const int *fds,
                        unsigned nfds)
{
        const char *s = ntbf__json_text(o);
        size_t n = strlen(s);
        char *line = malloc(n + 1);
        if (!line)
                return -ENOMEM;
        memcpy(line, s, n);
        line[n] = '\n';
        int r = nfds ? c->ops->send_fds(c->tctx, line, n + 1, fds, nfds)
                     : c->ops->send(c->tctx, line, n + 1);
        free(line);
        if (r)
                close_conn(c);
        return r;
}

static int send_obj(struct ntbf__rpc_conn *c, struct json_object *o)
{
        return send_obj_fds(c, o, NULL, 0);
}

static struct json_object *envelope(struct json_object *id)
{
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
        json_object_object_add(o, "id", id ? json_object_get(id) : NULL);
        return o;
}

static void send_error(struct ntbf__rpc_conn *c, struct json_object *id, int code, int err,
                       const char *msg)
{
        struct json_object *o = envelope(id), *e = json_object_new_object();
        json_object_object_add(e, "code", json_object_new_int(code));
        json_object_object_add(e, "message", json_object_new_string(msg));
        if (code == NTBF_RPC_FAILED) {
                struct json_object *d = json_object_new_object();
                json_object_object_add(d, "error", json_object_new_string(ntbf_err_name(err)));
                json_object_object_add(d, "errno", json_object_new_int(err));
                json_object_object_add(e, "data", d);
        }
        json_object_object_add(o, "error", e);
        send_obj(c, o);
        json_object_put(o);
}

int ntbf__rpc_notify(struct ntbf__rpc_conn *c, struct json_object *params)
{
        if (c->closing) {
                json_object_put(params);
                return -EPIPE;
        }
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
        json_object_object_add(o, "method", json_object_new_string("event"));
        json_object_object_add(o, "params", params);
        int r = send_obj(c, o);
        json_object_put(o);
        return r;
}

/* ---- answers ------------------------------------------------------------------------------- */

struct ntbf__rpc_conn *ntbf__rpc_call_conn(const struct ntbf__rpc_call *call)
{
        return call->conn;
}

const char *ntbf__rpc_call_method(const struct ntbf__rpc_call *call)
{
        return call->m->name;
}

static void finish(struct ntbf__rpc_call *call)
{
        struct ntbf__rpc_conn *c = call->conn;
        call->done = true;
        if (call->sync)
                return; /* dispatch frees it and goes on */
        json_object_put(call->id);
        free(call);
        if (c) {
                c->busy = NULL;
                process(c);
        }
}

int ntbf__rpc_answer(struct ntbf__rpc_call *call, struct json_object *result)
{
        int r = -EPIPE;
        if (call->cb) {
                call->cb(call->arg, 0, NULL, result ? result : json_object_new_object());
                r = 0; /* it went to the peer that asked (cluster.call) */
        } else if (call->conn && !call->conn->closing) {
                struct json_object *o = envelope(call->id);
                json_object_object_add(o, "result", result ? result : json_object_new_object());
                r = send_obj(call->conn, o);
                json_object_put(o);
        } else {
                json_object_put(result);
        }
        finish(call);
        return r;
}

void ntbf__rpc_result(struct ntbf__rpc_call *call, struct json_object *result)
{
        ntbf__rpc_answer(call, result);
}

void ntbf__rpc_result_fds(struct ntbf__rpc_call *call, struct json_object *result, const int *fds,
                          const char *const *names, unsigned nfds)
{
        struct ntbf__rpc_conn *c = call->conn;
        if (call->cb && !nfds)
                return ntbf__rpc_result(call, result);
        if (!call->cb && (!c || c->closing)) {
                json_object_put(result);
                return finish(call);
        }
        if (nfds && (call->cb || !c->ops->send_fds)) {
                json_object_put(result);
                return ntbf__rpc_fail(call, NTBF_RPC_FAILED, NTBF_EUNSUPPORTED,
                                      "this connection cannot pass file descriptors (connect "
                                      "through the daemon's Unix socket)");
        }
        if (!result)
                result = json_object_new_object();
        struct json_object *a = json_object_new_array();
        for (unsigned i = 0; i < nfds; i++)
                json_object_array_add(a, json_object_new_string(names[i]));
        json_object_object_add(result, "fds", a);
        struct json_object *o = envelope(call->id);
        json_object_object_add(o, "result", result);
        send_obj_fds(c, o, fds, nfds);
        json_object_put(o);
        finish(call);
}

void ntbf__rpc_fail(struct ntbf__rpc_call *call, int code, int err, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (call->cb)
                call->cb(call->arg, code == NTBF_RPC_FAILED && err ? err : invoke_err(code), msg,
                         NULL);
        else if (call->conn && !call->conn->closing)
                send_error(call->conn, call->id, code, err, msg);
        finish(call);
}

void ntbf__rpc_invoke(struct ntbf__rpc_server *s, const char *method, struct json_object *params,
                      ntbf__done_fn cb, void *arg)
{
        char msg[512];
        const struct ntbf__rpc_method *m = find_method(s, method);
        if (!m) {
                snprintf(msg, sizeof(msg), "method '%.64s' not found", method);
                return cb(arg, -ENOSYS, msg, NULL);
        }
        if (!check_params(m, params, msg, sizeof(msg)))
                return cb(arg, -EINVAL, msg, NULL);
        struct ntbf__rpc_call *call = calloc(1, sizeof(*call));
        if (!call)
                return cb(arg, -ENOMEM, "out of memory", NULL);
        call->m = m;
        call->cb = cb;
        call->arg = arg;
        call->sync = true;
        struct json_object *empty = params ? NULL : json_object_new_object();
        m->fn(s->ctx, call, params ? params : empty);
        json_object_put(empty);
        call->sync = false;
        if (call->done)
                free(call);
}

struct json_object *ntbf__rpc_list(const struct ntbf__rpc_server *s)
{
        static const char *const types[] = {"integer", "string", "boolean", "string", "object"};
        struct json_object *list = json_object_new_array();
        for (size_t i = 0; i < s->nmethods; i++) {
                const struct ntbf__rpc_method *m = &s->methods[i];
                struct json_object *o = json_object_new_object(), *ps = json_object_new_array();
                json_object_object_add(o, "name", json_object_new_string(m->name));
                for (size_t k = 0; k < NTBF_RPC_PARAMS_MAX && m->params[k].name; k++) {
                        const struct ntbf__param *p = &m->params[k];
                        struct json_object *x = json_object_new_object();
                        json_object_object_add(x, "name", json_object_new_string(p->name));
                        json_object_object_add(x, "type", json_object_new_string(types[p->type]));
                        json_object_object_add(x, "required", json_object_new_boolean(p->required));
                        if (p->type == NTBF_P_UINT) {
                                json_object_object_add(x, "min", json_object_new_uint64(p->min));
                                json_object_object_add(x, "max", json_object_new_uint64(p->max));
                        }
                        if (p->type == NTBF_P_ENUM) {
                                struct json_object *e = json_object_new_array();
                                for (size_t c = 0; p->choices[c]; c++)
                                        json_object_array_add(
                                            e, json_object_new_string(p->choices[c]));
                                json_object_object_add(x, "enum", e);
                        }
                        json_object_array_add(ps, x);
                }
                json_object_object_add(o, "params", ps);
                json_object_array_add(list, o);
        }
        return list;
}

/* ---- checking ------------------------------------------------------------------------------ */

/* An error sentence about a parameter into msg; returns false. */
static bool bad(char *msg, size_t len, const char *fmt, ...) NTBF_PRINTF(3, 4);
static bool bad(char *msg, size_t len, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
        return false;
}

static const char *type_name(const struct ntbf__param *p)
{
        switch (p->type) {
        case NTBF_P_UINT:
                return "a non-negative integer";
        case NTBF_P_BOOL:
                return "true or false";
        case NTBF_P_OBJECT:
                return "an object";
        default:
                return "a string";
        }
}

static const char *json_kind(struct json_object *v)
{
        switch (json_object_get_type(v)) {
        case json_type_null:
                return "null";
        case json_type_boolean:
                return "a boolean";
        case json_type_double:
                return "a fractional number";
        case json_type_int:
                return "an integer";
        case json_type_object:
                return "an object";
        case json_type_array:
                return "an array";
        default:
                return "a string";
        }
}

static bool check_value(const struct ntbf__param *p, struct json_object *v, char *msg, size_t len)
{
        switch (p->type) {
        case NTBF_P_UINT: {
                if (!json_object_is_type(v, json_type_int))
                        return bad(msg, len, "parameter '%s' must be %s, not %s", p->name,
                                   type_name(p), json_kind(v));
                if (json_object_get_int64(v) < 0)
                        return bad(msg, len, "parameter '%s' is out of range %" PRIu64 "..%" PRIu64,
                                   p->name, p->min, p->max);
                uint64_t x = json_object_get_uint64(v);
                if (x < p->min || x > p->max)
                        return bad(msg, len, "parameter '%s' is out of range %" PRIu64 "..%" PRIu64,
                                   p->name, p->min, p->max);
                return true;
        }
        case NTBF_P_BOOL:
                if (!json_object_is_type(v, json_type_boolean))
                        return bad(msg, len, "parameter '%s' must be true or false, not %s",
                                   p->name, json_kind(v));
                return true;
        case NTBF_P_OBJECT:
                /* Its members are the business of the method that gets it (cluster.call
                 * hands it to the method it names, which checks it). */
                if (!json_object_is_type(v, json_type_object))
                        return bad(msg, len, "parameter '%s' must be an object, not %s", p->name,
                                   json_kind(v));
                return true;
        case NTBF_P_STR:
        case NTBF_P_ENUM: {
                if (!json_object_is_type(v, json_type_string))
                        return bad(msg, len, "parameter '%s' must be a string, not %s", p->name,
                                   json_kind(v));
                size_t n = (size_t)json_object_get_string_len(v);
                const char *s = json_object_get_string(v);
                if (n > NTBF_RPC_MAX_STRING)
                        return bad(msg, len, "parameter '%s' is longer than %d bytes", p->name,
                                   NTBF_RPC_MAX_STRING);
                if (strlen(s) != n)
                        return bad(msg, len, "parameter '%s' holds a NUL character", p->name);
                if (p->type == NTBF_P_STR)
                        return true;
                char list[256] = "";
                size_t o = 0;
                for (size_t i = 0; p->choices[i]; i++) {
                        if (!strcmp(s, p->choices[i]))
                                return true;
                        o += (size_t)snprintf(list + o, o < sizeof(list) ? sizeof(list) - o : 0,
                                              "%s\"%s\"", i ? ", " : "", p->choices[i]);
                }
                return bad(msg, len, "parameter '%s' must be one of %s", p->name, list);
        }
        }
        return false;
}

/* params (NULL: none) against the method's schema. */
static bool check_params(const struct ntbf__rpc_method *m, struct json_object *params, char *msg,
                         size_t len)
{
        if (!params)
                goto required;
        if (!json_object_is_type(params, json_type_object))
                return bad(msg, len, "params must be an object of named parameters, not %s",
                           json_kind(params));
        json_object_object_foreach(params, key, val)
        {
                const struct ntbf__param *p = NULL;
                for (size_t i = 0; i < NTBF_RPC_PARAMS_MAX && m->params[i].name; i++)
                        if (!strcmp(m->params[i].name, key))
                                p = &m->params[i];
                if (!p) {
                        char known[256] = "";
                        size_t o = 0;
                        for (size_t i = 0; i < NTBF_RPC_PARAMS_MAX && m->params[i].name; i++)
                                o += (size_t)snprintf(known + o,
                                                      o < sizeof(known) ? sizeof(known) - o : 0,
                                                      "%s%s", i ? ", " : "", m->params[i].name);
                        char shown[64];
                        snprintf(shown, sizeof(shown), "%.40s%s", key,
                                 strlen(key) > 40 ? "..." : "");
                        for (char *q = shown; *q; q++)
                                if ((unsigned char)*q < 0x20)
                                        *q = '?';
                        return bad(msg, len, "unknown parameter '%s' of %s; %s%s", shown, m->name,
                                   known[0] ? "it takes: " : "it takes none",
                                   known[0] ? known : "");
                }
                if (!check_value(p, val, msg, len))
                        return false;
        }
required:
        for (size_t i = 0; i < NTBF_RPC_PARAMS_MAX && m->params[i].name; i++) {
                struct json_object *v;
                if (m->params[i].required &&
                    (!params || !json_object_object_get_ex(params, m->params[i].name, &v)))
                        return bad(msg, len, "missing parameter '%s' (%s)", m->params[i].name,
                                   type_name(&m->params[i]));
        }
        return true;
}

static const struct ntbf__rpc_method *find_method(const struct ntbf__rpc_server *s,
                                                  const char *name)
{
        for (size_t i = 0; i < s->nmethods; i++)
                if (!strcmp(s->methods[i].name, name))
                        return &s->methods[i];
        return NULL;
}

/* ---- one line ------------------------------------------------------------------------------ */

static struct json_object *parse_line(const char *line, size_t n)
{
        struct json_tokener *tok = json_tokener_new_ex(NTBF_RPC_MAX_DEPTH);
        if (!tok)
                return NULL;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        struct json_object *o = json_tokener_parse_ex(tok, line, (int)n);
        /* A bare number or literal only ends at the end of the input: mark the end. */
        if (!o && json_tokener_get_error(tok) == json_tokener_continue &&
            json_tokener_get_parse_end(tok) == n) {
                o = json_tokener_parse_ex(tok, "", 1);
                if (o && json_tokener_get_error(tok) == json_tokener_success) {
                        json_tokener_free(tok);
                        return o;
                }
        }
        /* Complete, and nothing after the value: one message is one JSON value. */
        if (o && (json_tokener_get_error(tok) != json_tokener_success ||
                  json_tokener_get_parse_end(tok) != n)) {
                json_object_put(o);
                o = NULL;
        }
        json_tokener_free(tok);
        return o;
}

/* Handle one message; returns false when the connection must close. */
static bool dispatch(struct ntbf__rpc_conn *c, const char *line, size_t n)
{
        while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
                n--;
        if (!n)
                return true; /* a blank line is nothing */
        struct json_object *o = parse_line(line, n);
        char msg[512], why[160];
        int bad = o ? ntbf__json_check(line, n, why, sizeof(why)) : -EILSEQ;
        if (!o || bad == -EILSEQ) {
                snprintf(msg, sizeof(msg),
                         "parse error: the line is not one valid UTF-8 JSON value%s%s",
                         o ? ": " : "", o ? why : "");
                json_object_put(o);
                send_error(c, NULL, NTBF_RPC_PARSE, 0, msg);
                return false;
        }
        if (bad) {
                snprintf(msg, sizeof(msg), "invalid request: %s", why);
                send_error(c, NULL, NTBF_RPC_INVALID, 0, msg);
                goto out;
        }
        struct json_object *id = NULL, *v;
        bool has_id = false;
        if (json_object_is_type(o, json_type_array)) {
                send_error(c, NULL, NTBF_RPC_INVALID, 0,
                           "invalid request: batches are not supported; send one request per line");
                goto out;
        }
        if (!json_object_is_type(o, json_type_object)) {
                send_error(c, NULL, NTBF_RPC_INVALID, 0,
                           "invalid request: a request is a JSON object");
                goto out;
        }
        if (json_object_object_get_ex(o, "id", &v)) {
                enum json_type t = json_object_get_type(v);
                if (t != json_type_null && t != json_type_int && t != json_type_string) {
                        send_error(c, NULL, NTBF_RPC_INVALID, 0,
                                   "invalid request: 'id' must be a string, an integer or null");
                        goto out;
                }
                id = v;
                has_id = true;
        }
        const char *method = NULL;
        struct json_object *params = NULL;
        bool has_params = false;
        json_object_object_foreach(o, key, val)
        {
                if (!strcmp(key, "jsonrpc")) {
                        if (!json_object_is_type(val, json_type_string) ||
                            strcmp(json_object_get_string(val), "2.0")) {
                                send_error(c, id, NTBF_RPC_INVALID, 0,
                                           "invalid request: 'jsonrpc' must be \"2.0\"");
                                goto out;
                        }
                } else if (!strcmp(key, "method")) {
                        if (!json_object_is_type(val, json_type_string)) {
                                send_error(c, id, NTBF_RPC_INVALID, 0,
                                           "invalid request: 'method' must be a string");
                                goto out;
                        }
                        method = json_object_get_string(val);
                        if (strlen(method) != (size_t)json_object_get_string_len(val)) {
                                send_error(c, id, NTBF_RPC_INVALID, 0,
                                           "invalid request: 'method' holds a NUL character");
                                goto out;
                        }
                } else if (!strcmp(key, "params")) {
                        params = val;
                        has_params = true;
                } else if (strcmp(key, "id")) {
                        send_error(c, id, NTBF_RPC_INVALID, 0,
                                   "invalid request: unknown member (a request has jsonrpc, "
                                   "method, params and id)");
                        goto out;
                }
        }
        if (!json_object_object_get_ex(o, "jsonrpc", &v) || !method) {
                send_error(c, id, NTBF_RPC_INVALID, 0,
                           "invalid request: 'jsonrpc' and 'method' are required");
                goto out;
        }
        if (!has_id)
                goto out; /* a client's notification is ignored (docs/rpc.md) */
        const struct ntbf__rpc_method *m = find_method(c->srv, method);
        if (!m) {
                struct ntbf__suggest sg;
                char shown[64];
                snprintf(shown, sizeof(shown), "%.40s%s", method, strlen(method) > 40 ? "..." : "");
                for (char *q = shown; *q; q++)
                        if ((unsigned char)*q < 0x20)
                                *q = '?';
                ntbf__suggest_init(&sg, method);
                for (size_t i = 0; i < c->srv->nmethods; i++)
                        ntbf__suggest_add(&sg, c->srv->methods[i].name);
                const char *best = ntbf__suggest_result(&sg);
                snprintf(msg, sizeof(msg), "method '%s' not found%s%s%s", shown,
                         best ? "; did you mean '" : "", best ? best : "", best ? "'?" : "");
                send_error(c, id, NTBF_RPC_NO_METHOD, 0, msg);
                goto out;
        }
        if (has_params && !params) {
                send_error(c, id, NTBF_RPC_PARAMS, 0,
                           "params must be an object of named parameters, not null");
                goto out;
        }
        if (!check_params(m, params, msg, sizeof(msg))) {
                send_error(c, id, NTBF_RPC_PARAMS, 0, msg);
                goto out;
        }
        struct ntbf__rpc_call *call = calloc(1, sizeof(*call));
        if (!call) {
                send_error(c, id, NTBF_RPC_INTERNAL, 0, "out of memory");
                goto out;
        }
        call->conn = c;
        call->id = id ? json_object_get(id) : NULL;
        call->m = m;
        call->sync = true;
        c->busy = call;
        struct json_object *empty = params ? NULL : json_object_new_object();
        m->fn(c->srv->ctx, call, params ? params : empty);
        json_object_put(empty);
        call->sync = false;
        if (call->done) {
                c->busy = NULL;
                json_object_put(call->id);
                free(call);
        }
out:
        json_object_put(o);
        return true;
}

/* Handle queued lines, in order, while no call is being answered. */
static void process(struct ntbf__rpc_conn *c)
{
        if (c->processing)
                return;
        c->processing = true;
        while (!c->busy && !c->closing) {
                char *nl = c->len ? memchr(c->in, '\n', c->len) : NULL;
                size_t n = nl ? (size_t)(nl - c->in) : c->len;
                if (n > NTBF_RPC_MAX_LINE) {
                        send_error(c, NULL, NTBF_RPC_INVALID, 0,
                                   "invalid request: message longer than 1 MiB; the connection "
                                   "is closed");
                        close_conn(c);
                        break;
                }
                if (!nl)
                        break;
                bool keep = dispatch(c, c->in, n);
                /* The line goes whatever happened; `in` is not touched by handlers. */
                memmove(c->in, c->in + n + 1, c->len - n - 1);
                c->len -= n + 1;
                c->lines--;
                if (!keep) {
                        close_conn(c);
                        break;
                }
        }
        if (c->paused && !c->closing && c->lines + (c->busy != NULL) < NTBF_RPC_MAX_FLIGHT) {
                c->paused = false;
                c->ops->pause(c->tctx, false);
        }
        c->processing = false;
}

void ntbf__rpc_conn_input(struct ntbf__rpc_conn *c, const char *data, size_t n)
{
        if (c->closing || !n)
                return;
        if (c->len + n > c->cap) {
                size_t cap = c->cap ? c->cap : 4096;
                while (cap < c->len + n)
                        cap *= 2;
                char *b = realloc(c->in, cap);
                if (!b) {
                        close_conn(c);
                        return;
                }
                c->in = b;
                c->cap = cap;
        }
        memcpy(c->in + c->len, data, n);
        c->len += n;
        for (size_t i = 0; i < n; i++) {
                if (data[i] == '\n') {
                        c->lines++;
                        c->tail = 0;
                } else {
                        c->tail++;
                }
        }
        if (c->tail > NTBF_RPC_MAX_LINE) {
                /* Do not buffer a line that can only be refused. */
                send_error(c, NULL, NTBF_RPC_INVALID, 0,
                           "invalid request: message longer than 1 MiB; the connection is closed");
                close_conn(c);
                return;
        }
        /* Back pressure: at most NTBF_RPC_MAX_FLIGHT requests read and not answered. */
        if (!c->paused && c->lines + (c->busy != NULL) >= NTBF_RPC_MAX_FLIGHT) {
                c->paused = true;
                c->ops->pause(c->tctx, true);
        }
        process(c);
}
