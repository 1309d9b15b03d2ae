/* daemon/fm_int.h: the fabric manager's internals, shared by fm.c and fm_sisci.c. */
#ifndef NTBF_DAEMON_FM_INT_H
#define NTBF_DAEMON_FM_INT_H

#include "entry.h"
#include "fm.h"

enum alloc_kind {
        A_BORROW,
        A_MAP,
        /* SISCI (fm_sisci.c, docs/sisci.md): each belongs to a client session of its node. */
        A_SX_CONNECT, /* a node's CPU reaches an export: a segment, an interrupt, a mailbox */
        A_SX_DMAP,    /* a device's DMA reaches a segment (SCIMap*SegmentForDevice) */
        A_SX_JOIN,    /* a broadcast segment receives its multicast group */
        A_SX_REQ,     /* a local device's requester ID (SCIRegisterPCIeRequester) */
};

/* One borrowable function of the topology, as the registry sees it. */
struct fm_fn {
        uint32_t device, function, fdid;
        bool lent, available, lost;
        uint8_t hold; /* SISCI borrows by its lender's own processes: 0, 1 shared, 2 exclusive */
        /* A real device's BARs where its host placed them (the lender's last lend; 0: none
         * known). The budget state has them too (ntbf_state_set_bars). */
        uint64_t hw[NTBF_MAX_BARS];
};

/* A committed plan: a borrow, a mapping for a device's DMA (map_peer), or a SISCI one. */
struct fm_alloc {
        struct fm_alloc *next;
        uint64_t seq; /* database key: the order of commits */
        uint32_t sid; /* allocation id in the budget state */
        enum alloc_kind kind;
        uint32_t fdid; /* BORROW: the device; MAP, SX_DMAP: the source device; SX_CONNECT to a
                          BAR: that BAR's device (NTBF_NONE for other connections) */
        uint32_t node; /* BORROW: the borrower; MAP, SX_*: the node that asked */
        bool exclusive;
        bool kernel;          /* BORROW: attached to the borrower's kernel (kern.c) */
        bool active;          /* programmed everywhere */
        uint64_t parent;      /* MAP, SX_DMAP: the borrow of the source, 0 if it is local;
                                 SX_CONNECT to a BAR: the node's borrow of the device */
        uint32_t target_fdid; /* MAP, SX_CONNECT to a BAR */
        uint32_t bar;         /* MAP, SX_CONNECT to a BAR */
        /* SISCI: the owning session (at `node`) and the export it uses (kind, owner, id). */
        uint64_t session;
        uint32_t ekind, enode, eid;
        uint32_t lane;  /* SX_CONNECT to a data interrupt's mailbox: the writer's lane */
        bool self_quit; /* released at its own session's request: no loss to report */
        /* The entries it holds in fm->want (sorted), and whether they depend on other
         * allocations (ntbf__plan_ents_shared): those are recomputed at every change. */
        struct ntbf__entset ents;
        bool ents_shared;
};

struct fm_node {
        uint64_t epoch; /* registrations so far: a new one means the node's earlier requests
                           can no longer be answered */
        uint64_t last_seen;
        bool expired; /* its lease ran out; reset when it is heard from again */
        bool registered;
        bool *port_up; /* per adapter port of the node (heartbeats) */
        bool ports_known;
};

struct fm_op {
        struct fm_op *next;
        char m[16];
        uint32_t from;
        uint64_t epoch; /* the asking node's registrations when it asked */
        struct json_object *p;
        ntbf__done_fn cb;
        void *arg;
};

struct ntbf__fm_sx;

struct ntbf__fm {
        const struct ntbf_topo *t;
        uint32_t self;
        struct ntbf__store *st;
        struct ntbf__fm_net net;
        struct ntbf_state *s;
        struct fm_fn *fn;
        uint32_t nfn;
        struct fm_alloc *allocs; /* in seq order */
        uint64_t next_seq;
        struct fm_node *nodes;
        struct fm_op *qhead, *qtail, *cur;
        bool running;
        bool deferred; /* the queue goes on at the next turn of the loop */
        unsigned queued;
        /* The running mutation's programming round. */
        int pending, err;
        char msg[512];
        void (*then)(struct ntbf__fm *fm);
        struct ntbf__entset delta; /* entries being programmed or cleared */
        /* What the budget state needs programmed, kept as allocations come and go (the
         * baseline and each allocation hold their entries); NTBFAB_FM_CHECK=1 compares it
         * with a recomputation from the whole state after every change. */
        struct ntbf__entcount want;
        bool check;
        struct fm_alloc *cur_alloc;  /* borrow/map being made */
        struct json_object *cur_res; /* answer prepared while programming */
        int fail_err;                /* why the round being rolled back failed */
        char fail_msg[512];
        struct ntbf__fm_sx *sx; /* SISCI exports (fm_sisci.c) */
};

/* ---- fm.c, for fm_sisci.c ------------------------------------------------------------------ */

/* End the running mutation with an answer (res taken) or an error. */
void ntbf__fm_finish(struct ntbf__fm *fm, int err, const char *msg, struct json_object *res);
/* Commit plan for a (allocated by the caller, taken), record it, program what it added; the
 * mutation ends when programming does (ntbf__fm_sx_result makes the answer). */
void ntbf__fm_commit(struct ntbf__fm *fm, struct fm_alloc *a, struct ntbf_plan *plan);
/* Release allocations (and what hangs off them), clear what is no longer needed, then end
 * the mutation with res (taken; NULL: {}). */
void ntbf__fm_release(struct ntbf__fm *fm, struct fm_alloc **v, size_t n, struct json_object *res);
/* Queue a mutation (runs in arrival order with the others). */
void ntbf__fm_enqueue(struct ntbf__fm *fm, uint32_t from, const char *m, struct json_object *p,
                      ntbf__done_fn cb, void *arg);
struct fm_fn *ntbf__fm_fn(struct ntbf__fm *fm, uint32_t fdid);
uint32_t ntbf__fm_fn_node(const struct ntbf__fm *fm, const struct fm_fn *f);
const char *ntbf__fm_node_name(const struct ntbf__fm *fm, uint32_t n);
bool ntbf__fm_connected(struct ntbf__fm *fm, uint32_t node);
void ntbf__fm_save_fn(struct ntbf__fm *fm, const struct fm_fn *f);
struct fm_alloc *ntbf__fm_find_borrow(struct ntbf__fm *fm, uint32_t fdid, uint32_t node);
/* Record a changed allocation: 0, or -EIO with nothing written (ntbf__fm_store_error). */
int ntbf__fm_save_alloc(struct ntbf__fm *fm, const struct fm_alloc *a);
const char *ntbf__fm_store_error(const struct ntbf__fm *fm);

/* ---- fm_sisci.c, for fm.c -------------------------------------------------------------------- */

int ntbf__fm_sx_new(struct ntbf__fm *fm);
void ntbf__fm_sx_free(struct ntbf__fm *fm);
/* A SISCI request from a node (sx_*): answered now or queued. False: not a SISCI request. */
bool ntbf__fm_sx_request(struct ntbf__fm *fm, uint32_t from, const char *m, struct json_object *p,
                         ntbf__done_fn cb, void *arg);
/* Start a queued SISCI mutation. False: not one. */
bool ntbf__fm_sx_start(struct ntbf__fm *fm, struct fm_op *op);
/* The answer for a SISCI allocation just programmed everywhere (and the notes it causes). */
struct json_object *ntbf__fm_sx_result(struct ntbf__fm *fm, struct fm_alloc *a);
/* A SISCI allocation is being released: tell whoever must know (lost, disconnect). */
void ntbf__fm_sx_released(struct ntbf__fm *fm, struct fm_alloc *a);
/* Whether a depends on node n other than as its owner (the export it uses is n's). */
bool ntbf__fm_sx_uses_node(struct ntbf__fm *fm, const struct fm_alloc *a, uint32_t n);
/* Node n's lease ran out: its exports go (called before its allocations are released). */
void ntbf__fm_sx_expire(struct ntbf__fm *fm, uint32_t n);
/* A node registered: its exports and live sessions (what it does not list is dropped). */
void ntbf__fm_sx_register(struct ntbf__fm *fm, uint32_t from, struct json_object *p);
/* The device segments recorded in the database, back in the registry (a restart). */
int ntbf__fm_sx_restore(struct ntbf__fm *fm);
/* A borrow of f by another node is refused by the lender's own SISCI holds (why says so). */
int ntbf__fm_sx_hold_conflict(struct ntbf__fm *fm, const struct fm_fn *f, bool exclusive, char *why,
                              size_t len);
/* Database: the kind's name ("connect", ...) or NULL; extra fields in and out of JSON. */
const char *ntbf__fm_sx_kind_name(enum alloc_kind k);
bool ntbf__fm_sx_kind(const char *name, enum alloc_kind *k);
void ntbf__fm_sx_save(const struct fm_alloc *a, struct json_object *o);
void ntbf__fm_sx_load(struct fm_alloc *a, struct json_object *o);

#endif
