/* daemon/daemon.h: the running daemon's top-level state, shared by its runtime files. */
#ifndef NTBF_DAEMON_DAEMON_H
#define NTBF_DAEMON_DAEMON_H

#include <limits.h>
#include <uv.h>

#include "entry.h"
#include "fm.h"
#include "ids.h"
#include "intercept.h"
#include "kern.h"
#include "keyfile.h"
#include "ntbfab/backend.h"
#include "rpc.h"
#include "sisci.h"
#include "store.h"

#define NTBF_HEARTBEAT_MS      1000
#define NTBF_MISSED_BEATS      3    /* heartbeats missed before a peer is unreachable */
#define NTBF_PEER_TIMEOUT_MS   5000 /* a request to a peer without an answer fails */
/* Strangers on the management network (docs/peer.md, "Limits"). */
#define NTBF_PEER_HANDSHAKE_MS 2000 /* a connection not authenticated by then is dropped */
#define NTBF_PEER_MAX_UNAUTH   32   /* inbound connections in the handshake at once */
#define NTBF_PEER_FD_RESERVE   64   /* descriptors peers leave to the rest of the daemon */
#define NTBF_SHARES            4    /* a borrow's DMA window is split among this many handles */
#define NTBF_SHUTDOWN_MS       5000 /* longest a SIGTERM waits for returns to complete */
#define NTBF_SHADOW_BUS        0xf0 /* shadow devices of borrows: 0000:f0:00.0 and up */

struct ntbf__peers;
struct ntbf__vfio_d;
struct ntbf__kern;

/* A device this node borrowed (docs/daemon.md: the shadow device). */
struct ntbf__borrow {
        struct ntbf__borrow *next;
        uint32_t fdid, device, function, lender;
        uint32_t slot;            /* shadow device number: BDF 0000:f0+slot/32:slot%32.0 */
        struct json_object *json; /* BORROW, local_bdf filled in */
        uint32_t shares;          /* bit i: DMA window share i is held by a handle */
        struct ntbf__icpt icpt;   /* config-space interception state */
        bool sisci;               /* held for SISCI sessions ("sisci": true in json) */
        int64_t shadow;           /* attached to this kernel: the module's id; -1: not */
        int64_t mdev;             /* held for a VM: ntbfab_mdev's instance id; -1: not */
};

/* A mapping for a device's DMA made through device.map_peer. */
struct ntbf__map {
        struct ntbf__map *next;
        uint64_t seq, device_addr;
};

/* An open device (device.open), owned by the connection that opened it. */
struct ntbf__handle {
        struct ntbf__handle *next;
        uint64_t id;
        struct ntbf__rpc_conn *conn;
        uint32_t fdid, device, function;
        bool local;
        int share; /* borrowed: the DMA window share held, -1 none */
        bool lost; /* the borrow is gone: the handle only answers errors */
        struct ntbf__map *maps;
};

/* What this node lends, and who borrowed it (from the fabric manager's notes). */
struct ntbf__lend {
        struct ntbf__lend *next;
        uint32_t fdid;
        bool available;
        uint32_t borrowers; /* bit n: node n borrows it */
};

struct ntbf__d {
        /* Configuration. */
        struct ntbf_topo *t;
        uint32_t self, manager;
        char dir[PATH_MAX / 2]; /* the backend's directory (the simulated fabric's instance) */
        char run_dir[PATH_MAX / 2], state_dir[PATH_MAX / 2];
        char run_base[PATH_MAX / 2 + 64]; /* RUN/NODE (--dir) or RUN/ntbfabd: .sock .pid .lock */
        char log_path[PATH_MAX];
        char config_path[PATH_MAX];
        char sock_path[PATH_MAX];
        uint8_t key[NTBF_KEY_BYTES];
        uv_loop_t *loop;
        uint64_t start_ms;
        int lock_fd;

        /* Hardware. */
        const struct ntbf_backend_ops *ops;
        struct ntbf_backend *b;
        struct ntbf_adapter_h **h; /* per topology adapter; NULL unless ours */
        struct ntbf_caps *caps;
        uv_poll_t *polls;
        bool *poll_on;
        void *evctx; /* per adapter: what its event callbacks get */
        /* Requester IDs the hardware replaced by proxy IDs (rid_add's *proxy). */
        struct ntbf__proxy {
                uint32_t adapter, proxy;
                struct ntbf_rid rid;
        } * proxies;
        size_t nproxies, capproxies;

        /* Local clients and peers. */
        struct ntbf__rpc_server rpc;
        uv_pipe_t listener;
        bool listening;
        struct ntbf__peers *peers;

        /* Roles. */
        struct ntbf__store *st;
        struct ntbf__fm *fm; /* this node is the fabric manager */
        bool fm_ready;       /* registered with the manager and reconciled */
        bool resumed;        /* reconciled once since this daemon started */
        bool syncing;

        /* Node state. */
        struct ntbf__entset programmed; /* entries in this node's hardware (also in the store) */
        struct ntbf__entset rec_add, rec_del; /* recorded, not folded into `programmed` yet */
        struct ntbf__lend *lends;
        struct ntbf__borrow *borrows;
        struct ntbf__handle *handles;
        uint64_t next_handle;
        struct ntbf__vfio_d *vfio; /* real devices held through vfio-pci (vfio.c) */
        struct ntbf__kern *kern;   /* /dev/ntbfab-lend, once opened (kern.c) */

        struct ntbf__sx *sx; /* SISCI sessions (sisci.c) */

        uv_timer_t beat, lease_tick, shutdown_timer;
        /* The loop's I/O polls (ntbfabd.c, ntbf__heard_ms). */
        uv_prepare_t poll_prepare;
        uv_check_t poll_check;
        uint64_t poll_t0, heard_ms;
        /* The fabric manager's queue, resumed on the next turn of the loop (fm.h, defer). */
        uv_idle_t fm_resume;
        void (*fm_resume_fn)(void *);
        void *fm_resume_arg;
        uv_signal_t sigterm, sigint, sighup;
        bool stopping;
        unsigned stop_pending;
        int exit_code;
};

/* ---- peer.c: authenticated TCP to the other daemons (docs/peer.md) ------------------------- */

int ntbf__peers_start(struct ntbf__d *d, char *why, size_t whylen);
void ntbf__peers_stop(struct ntbf__d *d);
void ntbf__peers_free(struct ntbf__d *d);
/* Request m of node (this node too: answered from the loop); p taken; cb runs once. */
void ntbf__peer_request(struct ntbf__d *d, uint32_t node, const char *m, struct json_object *p,
                        ntbf__done_fn cb, void *arg);
/* A one-way message (p taken); dropped when the peer is not connected. */
void ntbf__peer_notify(struct ntbf__d *d, uint32_t node, const char *m, struct json_object *p);
bool ntbf__peer_connected(struct ntbf__d *d, uint32_t node);
/* Milliseconds since node was last heard from (UINT64_MAX: never). */
uint64_t ntbf__peer_silence_ms(struct ntbf__d *d, uint32_t node);
/* Send heartbeats and drop silent peers (every NTBF_HEARTBEAT_MS). */
void ntbf__peers_beat(struct ntbf__d *d);

/* ---- dispatch (node.c): what arrives from peers or from this node itself ------------------- */

void ntbf__d_request(struct ntbf__d *d, uint32_t from, const char *m, struct json_object *p,
                     ntbf__done_fn cb, void *arg);
void ntbf__d_note(struct ntbf__d *d, uint32_t from, const char *m, struct json_object *p);
/* A peer's session came up or went down. */
void ntbf__d_peer_up(struct ntbf__d *d, uint32_t node, bool up);

/* ---- node.c: the node role ------------------------------------------------------------------ */

int ntbf__node_load(struct ntbf__d *d, char *why, size_t whylen);
/* Register with the manager and reconcile (after the manager's session came up). */
void ntbf__node_join(struct ntbf__d *d);
/* Events to subscribed clients ("device.lost", ...); extra is merged (taken, may be NULL). */
void ntbf__node_event(struct ntbf__d *d, const char *kind, uint32_t fdid, const char *reason,
                      struct json_object *extra);
struct ntbf__borrow *ntbf__node_borrow(struct ntbf__d *d, uint32_t fdid);
/* Record a borrow as the manager answered it (BORROW); gives it its shadow BDF. */
struct ntbf__borrow *ntbf__node_add_borrow(struct ntbf__d *d, struct json_object *borrow);
/* Everything is closed: leave the loop (ntbfabd.c). */
void ntbf__d_finish(struct ntbf__d *d);
struct ntbf__lend *ntbf__node_lend(struct ntbf__d *d, uint32_t fdid);
/* The borrow is held for SISCI sessions (sisci.c), not for the node: it is returned when no
 * session holds it any more, and at the daemon's next start (no session survives that). */
void ntbf__node_borrow_for_sisci(struct ntbf__d *d, struct ntbf__borrow *b);
/* Return fdid to the manager for nobody on this node (log why): a borrow nobody holds. */
void ntbf__node_return_unheld(struct ntbf__d *d, uint32_t fdid, const char *why);
/* A test's crash point (NTBFAB_CRASH_AT=NODE:PHASE:K, docs/daemon.md): _exit at the K-th
 * call for PHASE in the daemon of NODE. */
void ntbf__crash_point(struct ntbf__d *d, const char *phase);
/* Forget a borrow (returned, lost or reclaimed): its handles become lost. */
void ntbf__node_drop_borrow(struct ntbf__d *d, uint32_t fdid, const char *reason);
void ntbf__node_save_lend(struct ntbf__d *d, const struct ntbf__lend *l);
void ntbf__node_save_borrow(struct ntbf__d *d, const struct ntbf__borrow *b);
/* Start the SIGTERM sequence: return borrows, unlend, stop. */
void ntbf__node_shutdown(struct ntbf__d *d);
/* The lender side of config space (sim: the function's config region). */
int ntbf__node_cfg(struct ntbf__d *d, uint32_t device, uint32_t function, bool write, uint32_t off,
                   uint32_t size, uint32_t *val);

/* ---- hw.c: entries into the hardware through the backend ----------------------------------- */

int ntbf__hw_open(struct ntbf__d *d, char *why, size_t whylen);
void ntbf__hw_close(struct ntbf__d *d);
/* Program (set) or clear one entry; idempotent. why names the entry on failure. */
int ntbf__hw_apply(struct ntbf__d *d, const struct ntbf__ent *e, bool set, char *why,
                   size_t whylen);
/* An adapter of this node with cap (NTBF_CAP_*), or NULL. */
struct ntbf_adapter_h *ntbf__hw_any(struct ntbf__d *d, uint32_t cap);
/* Port states of this node's adapters, in adapter then port order. */
struct json_object *ntbf__hw_ports(struct ntbf__d *d);
/* Record the proxy ID the hardware gave requester entry e (NTBF_NONE: none, or deleted). */
void ntbf__hw_proxy_note(struct ntbf__d *d, const struct ntbf__ent *e, uint32_t proxy);
/* [{rid: "0000:03:00.0/fff8" requester, proxy: "BB:DD.F"}] of adapter a. */
struct json_object *ntbf__hw_proxies(struct ntbf__d *d, uint32_t adapter);

/* ---- tran_sock.c: the Unix socket (mode 0660, SO_PEERCRED checks) -------------------------- */

int ntbf__sock_listen(struct ntbf__d *d, char *why, size_t whylen);
/* Whether h belongs to a client connection (which closes its handles itself). */
bool ntbf__sock_conn_handle(struct ntbf__d *d, const uv_handle_t *h);

/* ---- methods.c: the RPC methods ------------------------------------------------------------ */

extern const struct ntbf__rpc_method ntbf__methods[];
extern const size_t ntbf__nmethods;
/* A connection went away: close its handles. */
void ntbf__methods_conn_gone(void *ctx, struct ntbf__rpc_conn *c);
void ntbf__handle_close(struct ntbf__d *d, struct ntbf__handle *h);
/* Whether another node's operator may call method here through cluster.call. */
bool ntbf__forwardable(const char *method);

uint64_t ntbf__now_ms(void);
/*
 * The time up to which every message that reached this daemon's sockets has been read: when
 * the loop's latest completed I/O poll began. A peer's silence is measured up to it, not up to the
 * clock, so a daemon that was busy for seconds (a long request, a CPU starved by other
 * processes) does not hold against its peers the messages it did not read meanwhile.
 */
uint64_t ntbf__heard_ms(const struct ntbf__d *d);
/* Start keeping ntbf__heard_ms, before the loop runs. */
void ntbf__heard_start(struct ntbf__d *d);

#endif
