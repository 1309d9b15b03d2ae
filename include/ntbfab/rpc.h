/* ntbfab/rpc.h: a JSON-RPC 2.0 client for a node daemon's Unix socket (docs/rpc.md). */
#ifndef NTBFAB_RPC_H
#define NTBFAB_RPC_H

#include "common.h"

NTBF_BEGIN_DECLS

struct json_object;
struct ntbf_rpc;

/*
 * Connect to the daemon socket at path (DIR/run/NODE.sock). Returns 0, NTBF_ENOTFOUND
 * when nothing listens there (no daemon), -ETIMEDOUT when its listen queue stays full (a
 * stopped daemon) for NTBFAB_RPC_TIMEOUT_MS (default 5 s), -errno.
 */
NTBF_EXPORT int ntbf_rpc_connect(const char *path, struct ntbf_rpc **out);
/* The socket of this host's daemon, when it runs as a service (docs/operations.md). */
#define NTBF_RPC_HOST_SOCKET "/run/ntbfab/ntbfabd.sock"
/* NTBFAB_SOCKET when set and not empty, else NTBF_RPC_HOST_SOCKET. */
NTBF_EXPORT const char *ntbf_rpc_host_socket(void);
/* The socket path of node in instance directory dir, into buf. */
NTBF_EXPORT const char *ntbf_rpc_socket_path(const char *dir, const char *node, char *buf,
                                             size_t len);
NTBF_EXPORT void ntbf_rpc_close(struct ntbf_rpc *c);

/*
 * Call method with params (an object, or NULL for none; ownership is taken) and wait up to
 * timeout_ms (0: 30 s) for its answer. On success returns 0 and *result (the caller puts
 * it). On an error answer returns its ntbfab code (data.error, e.g. NTBF_ENOSPC_BUDGET; or
 * -EINVAL for invalid params, -ENOSYS for an unknown method, NTBF_EPROTO otherwise) with
 * the message available from ntbf_rpc_error(). -ETIMEDOUT, -EPIPE (daemon gone), -errno.
 * Event notifications that arrive meanwhile are queued for ntbf_rpc_next_event().
 */
NTBF_EXPORT int ntbf_rpc_call(struct ntbf_rpc *c, const char *method, struct json_object *params,
                              struct json_object **result, int timeout_ms);
/*
 * File descriptors that came with the last answer (docs/rpc.md, "File descriptors"): up to
 * max of them are moved to fds, owned by the caller from then on; returns how many. Those
 * not taken are closed by the next call on the connection, or when it closes.
 */
NTBF_EXPORT int ntbf_rpc_take_fds(struct ntbf_rpc *c, int *fds, unsigned max);
/* The message of the last error answer or failure on this connection ("" if none). */
NTBF_EXPORT const char *ntbf_rpc_error(const struct ntbf_rpc *c);

/* The connection's fd: readable when a notification may be waiting. */
NTBF_EXPORT int ntbf_rpc_fd(const struct ntbf_rpc *c);
/*
 * The next queued or arriving notification (its params object, caller puts it), waiting
 * up to timeout_ms (0: do not wait). Returns 0, -EAGAIN when none, or an error.
 */
NTBF_EXPORT int ntbf_rpc_next_event(struct ntbf_rpc *c, struct json_object **params,
                                    int timeout_ms);

NTBF_END_DECLS

#endif
