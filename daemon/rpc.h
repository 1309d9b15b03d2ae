/* daemon/rpc.h: the JSON-RPC 2.0 server of a node daemon: framing, checking, dispatch
 * (docs/rpc.md). */
#ifndef NTBF_DAEMON_RPC_H
#define NTBF_DAEMON_RPC_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ntbfab/common.h"
#include "ids.h"
#include "tran.h"

#define NTBF_RPC_MAX_LINE   (1u << 20) /* longest message, without its newline */
#define NTBF_RPC_MAX_FLIGHT 64         /* requests read but not answered, per connection */
#define NTBF_RPC_MAX_STRING 255        /* longest string parameter, in bytes */
#define NTBF_RPC_MAX_DEPTH  32         /* deepest JSON nesting accepted */
#define NTBF_RPC_MAX_QUEUED (4u << 20) /* answers and events queued for one client, bytes */

/* JSON-RPC error codes. */
enum {
        NTBF_RPC_PARSE = -32700,
        NTBF_RPC_INVALID = -32600,
        NTBF_RPC_NO_METHOD = -32601,
        NTBF_RPC_PARAMS = -32602,
        NTBF_RPC_INTERNAL = -32603,
        NTBF_RPC_FAILED = -32000, /* operational: data names the ntbfab error */
};

enum ntbf__ptype { NTBF_P_UINT, NTBF_P_STR, NTBF_P_BOOL, NTBF_P_ENUM, NTBF_P_OBJECT };

struct ntbf__param {
        const char *name;
        enum ntbf__ptype type;
        bool required;
        uint64_t min, max;          /* NTBF_P_UINT */
        const char *const *choices; /* NTBF_P_ENUM: NULL-terminated */
};

#define NTBF_RPC_PARAMS_MAX 8

struct ntbf__rpc_call;
struct ntbf__rpc_conn;

struct ntbf__rpc_method {
        const char *name;
        /* Handle a call whose params passed the schema (params is an object, never NULL).
         * Answer now or later with ntbf__rpc_result / ntbf__rpc_fail, exactly once. */
        void (*fn)(void *ctx, struct ntbf__rpc_call *call, struct json_object *params);
        struct ntbf__param params[NTBF_RPC_PARAMS_MAX]; /* ends at a NULL name */
};

struct ntbf__rpc_server {
        const struct ntbf__rpc_method *methods;
        size_t nmethods;
        void *ctx;
        /* A connection goes away: release what belongs to it (handles, subscriptions). */
        void (*conn_gone)(void *ctx, struct ntbf__rpc_conn *c);
        struct ntbf__rpc_conn *conns; /* every live connection */
};

struct ntbf__rpc_conn {
        struct ntbf__rpc_conn *next, *prev;
        struct ntbf__rpc_server *srv;
        const struct ntbf__tran_ops *ops;
        void *tctx;
        char *in; /* received, not yet handled */
        size_t len, cap;
        size_t lines;                /* complete lines in `in` */
        size_t tail;                 /* bytes after the last newline */
        struct ntbf__rpc_call *busy; /* the call being answered (requests run in order) */
        bool closing, paused, processing;
        bool subscribed; /* events.subscribe */
        /* Who is on the other end (SO_PEERCRED), for logs. */
        pid_t pid;
        uid_t uid;
        uint64_t id; /* connection number, for logs */
        void *user;  /* the daemon's per-connection data */
};

/* rpc.list: every method of s with its parameters (name, type, required, range, choices). */
struct json_object *ntbf__rpc_list(const struct ntbf__rpc_server *s);

/* Install a connection on a transport. */
struct ntbf__rpc_conn *ntbf__rpc_conn_new(struct ntbf__rpc_server *s,
                                          const struct ntbf__tran_ops *ops, void *tctx);
/* Bytes received. */
void ntbf__rpc_conn_input(struct ntbf__rpc_conn *c, const char *data, size_t n);
/* The peer closed its side (or the transport failed): close ours. */
void ntbf__rpc_conn_eof(struct ntbf__rpc_conn *c);
/* The transport is done with the connection (after close): free it. A call still being
 * answered is detached; its answer is dropped. */
void ntbf__rpc_conn_free(struct ntbf__rpc_conn *c);

/* The connection a call came on (NULL when it went away meanwhile). */
struct ntbf__rpc_conn *ntbf__rpc_call_conn(const struct ntbf__rpc_call *call);
const char *ntbf__rpc_call_method(const struct ntbf__rpc_call *call);
/* Answer with result (ownership taken; NULL means {}). */
void ntbf__rpc_result(struct ntbf__rpc_call *call, struct json_object *result);
/* The same; 0 if the answer went to the connection, -EPIPE (or the transport's error) if the
 * client is gone: it never gets the answer. */
int ntbf__rpc_answer(struct ntbf__rpc_call *call, struct json_object *result);
/*
 * Answer with result and file descriptors (docs/rpc.md, "File descriptors"): result gets
 * "fds": names (nfds strings, taken), and the fds travel with the answer's bytes. The
 * caller keeps its fds. A transport that cannot pass fds answers an error instead.
 */
void ntbf__rpc_result_fds(struct ntbf__rpc_call *call, struct json_object *result, const int *fds,
                          const char *const *names, unsigned nfds);
/*
 * Answer with an error. code is a JSON-RPC code; for NTBF_RPC_FAILED, err (an ntbfab or
 * -errno code) is given as data {error, errno}.
 */
void ntbf__rpc_fail(struct ntbf__rpc_call *call, int code, int err, const char *fmt, ...)
    NTBF_PRINTF(4, 5);
/*
 * Run method for a caller that is no connection (cluster.call: an operator on another node,
 * through that node's daemon): params (not taken) are checked as on a socket, then cb gets
 * (0, NULL, result) or (error, sentence, NULL) exactly once. The call has no connection
 * (ntbf__rpc_call_conn is NULL) and cannot pass file descriptors.
 */
void ntbf__rpc_invoke(struct ntbf__rpc_server *s, const char *method, struct json_object *params,
                      ntbf__done_fn cb, void *arg);
/* Send an event notification to a subscribed connection (params ownership taken). */
int ntbf__rpc_notify(struct ntbf__rpc_conn *c, struct json_object *params);

#endif
