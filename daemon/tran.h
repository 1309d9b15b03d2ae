/* daemon/tran.h: the byte transport under an RPC connection: a socket, or memory (tests, fuzzing).
 */
#ifndef NTBF_DAEMON_TRAN_H
#define NTBF_DAEMON_TRAN_H

#include <stdbool.h>
#include <stddef.h>

/*
 * As libvfio-user's tran.h: the RPC code (rpc.c) never touches a socket. A transport
 * delivers received bytes with ntbf__rpc_conn_input() and end of input with
 * ntbf__rpc_conn_eof(), and provides these operations to the connection.
 */
struct ntbf__tran_ops {
        /* Queue bytes for the peer; 0 or -errno (the connection is then closed). */
        int (*send)(void *tctx, const char *buf, size_t len);
        /* Stop (true) or resume (false) delivering input: back pressure. */
        void (*pause)(void *tctx, bool paused);
        /* Flush what was sent, then close; the connection is freed by the transport when
         * its close completes (ntbf__rpc_conn_free). */
        void (*close)(void *tctx);
        /* Optional: queue bytes with file descriptors attached (SCM_RIGHTS), delivered with
         * them and in order with everything else sent (docs/rpc.md, "File descriptors"). The
         * transport duplicates what it cannot send at once: the caller keeps its fds. */
        int (*send_fds)(void *tctx, const char *buf, size_t len, const int *fds, unsigned nfds);
};

/* The in-memory transport: what the connection sent, and the state it asked for. */
struct ntbf__tran_mem {
        char *out; /* everything sent, NUL terminated */
        size_t len, cap;
        bool paused, closed;
        int fail_send; /* if non-zero, send returns it */
        int fds[16];   /* descriptors sent with send_fds (the numbers, not duplicates) */
        unsigned nfds;
};
extern const struct ntbf__tran_ops ntbf__tran_mem_ops;
void ntbf__tran_mem_reset(struct ntbf__tran_mem *m); /* forget the output */
void ntbf__tran_mem_free(struct ntbf__tran_mem *m);

#endif
