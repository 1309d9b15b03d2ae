/* ntbf_nvme_share.h: the manager/client protocol over a mailbox in the manager's memory. */
#ifndef NTBF_NVME_SHARE_H
#define NTBF_NVME_SHARE_H

#include "ntbf_nvme.h"

/*
 * One manager owns the controller's admin queues; clients on any host own I/O queue pairs
 * and ask the manager to create and delete them and to run the other admin commands they
 * need (article 6.2). They talk through a mailbox: a region of the manager's memory that
 * every client maps (a SISCI segment, docs/nvme.md). Nothing here knows how the mailbox is
 * shared; the manager sees it as local memory, a client as a mapping it may reach over an
 * NTB. Only aligned 4- and 8-byte loads and stores are used, and no read-modify-write on
 * shared memory: an NTB carries neither atomics nor locks between hosts.
 *
 * Layout: a header (what the manager publishes), a lobby of NTBF_NVMS_LOBBY entries where
 * clients ask for a slot, and one slot per I/O queue pair the controller granted (a client
 * with a slot may own several pairs).
 *
 * Joining without atomics: a client writes a random nonce, its node id, pid, a random
 * generation and a checksum into a random lobby entry, generation last. The manager serves
 * an entry whose generation changed and whose checksum holds (two clients writing one entry
 * at once leave a torn entry that fails the checksum and is ignored); it answers with a slot
 * and the nonce it served. A client that reads back another nonce, or nothing in time,
 * tries another entry. A slot the manager handed out to a client that went away is
 * reclaimed by the lease like any other.
 *
 * Requests: a client writes its request into its slot, with its nonce and a checksum, then
 * a new sequence number; the manager runs it and writes the result, then the same sequence
 * number. Leases: a client bumps its slot's heartbeat (ntbf_nvms_client_beat, a few times
 * per lease); the manager deletes the queue pairs of a slot whose heartbeat stood still for
 * the lease and frees the slot. A client that comes back after that (a stopped process)
 * finds another owner's nonce in its slot and is told so; its requests and heartbeats carry
 * its own nonce and are not taken for the new owner's. Clients see the manager's own heartbeat and
 * epoch in the header: its I/O queues keep working without the manager (no software is on the data
 * path), but a manager that restarted has reset the controller, and every pair is gone.
 */

#define NTBF_NVMS_MAGIC   0x534d564eu /* "NVMS" */
#define NTBF_NVMS_VERSION 1u
#define NTBF_NVMS_LOBBY   64u
#define NTBF_NVMS_MSG     256u /* a slot's answer text */
#define NTBF_NVMS_LMSG    112u /* a lobby entry's answer text */

/* The mailbox's segment id: one manager per device per node (docs/nvme.md). */
#define NTBF_NVMS_SEGID(fdid) (0x40000000u | ((fdid)&0x0fffffffu))

enum ntbf_nvms_op {
        NTBF_NVMS_OP_NONE = 0,
        NTBF_NVMS_OP_CREATE_QP,
        NTBF_NVMS_OP_DELETE_QP,
        NTBF_NVMS_OP_IDENTIFY,
        NTBF_NVMS_OP_GET_FEATURES,
        NTBF_NVMS_OP_SET_FEATURES,
        NTBF_NVMS_OP_GET_LOG_PAGE,
        NTBF_NVMS_OP_BYE,
};

enum ntbf_nvms_state { NTBF_NVMS_STARTING = 0, NTBF_NVMS_READY = 1, NTBF_NVMS_STOPPED = 2 };

/* What the manager publishes (the mailbox's first page). */
struct ntbf_nvms_hdr {
        uint32_t magic, version;
        uint64_t epoch; /* random per manager run: a change means the controller was reset */
        uint64_t beat;  /* the manager's heartbeat */
        uint32_t state; /* enum ntbf_nvms_state */
        uint32_t fdid;
        uint32_t nslots, lobby;
        uint32_t lease_ms;
        uint32_t io_queues; /* I/O queue pairs the controller granted */
        uint32_t mqes;      /* entries a queue may have */
        uint32_t db_stride;
        uint32_t max_qp_per_client;
        uint32_t nsid, lba_shift, mdts;
        uint64_t nsze, max_xfer;
        char sn[24], mn[44], fr[12];
        uint32_t clients; /* slots held now */
        uint32_t pairs;   /* I/O queue pairs in use now */
        uint32_t peak;    /* the most in use at once since none were (a barrier for clients) */
        uint32_t pad;
};

struct ntbf_nvms_lobby {
        /* client -> manager; gen is written last */
        uint64_t nonce;
        uint32_t node, pid;
        uint32_t chk, gen;
        /* manager -> client; rsp_gen is written last */
        int32_t status;
        uint32_t slot;
        uint64_t echo;
        uint32_t rsp_gen, pad;
        char msg[NTBF_NVMS_LMSG];
};

struct ntbf_nvms_slot {
        /* client -> manager */
        uint64_t beat; /* the client's tag (from its nonce) << 32 | a counter */
        uint32_t seq, op;
        uint64_t nonce; /* the client's: a request of another is not served */
        uint32_t chk, pad;
        uint64_t a[6]; /* the request's arguments, by op (share.c) */
        uint8_t pad0[48];
        /* manager -> client; rsp_seq is written last */
        uint64_t owner; /* nonce of the client holding the slot, 0 when free */
        uint32_t rsp_seq;
        int32_t status; /* 0, NVMe status (> 0), -errno */
        uint32_t dw0;
        uint32_t qid;
        char msg[NTBF_NVMS_MSG];
        uint8_t pad1[104];
};

/* Bytes of a mailbox with nslots slots (a whole number of pages). */
size_t ntbf_nvms_mbox_bytes(uint32_t nslots);

/* ---- the manager ---------------------------------------------------------------------------- */

struct ntbf_nvms_owner; /* share.c */

struct ntbf_nvms_manager {
        struct ntbf_nvme_ctrl *ctrl;
        volatile uint8_t *mbox;
        size_t size;
        uint32_t nslots;
        uint64_t lease_ns;
        uint32_t max_qp_per_client;
        struct ntbf_nvms_owner *owner; /* per slot */
        uint32_t *qid_slot;            /* per qid: the slot owning it, or UINT32_MAX */
        uint32_t served_gen[NTBF_NVMS_LOBBY];
        uint64_t last_beat_ns;
        /* Where the manager says what it does (attach, create, delete, expiry); may be NULL. */
        void (*log)(void *arg, const char *msg);
        void *log_arg;
        /* Counters. */
        uint64_t requests, joins, refused, expired;
};

/*
 * Publish the controller (reset by ntbf_nvme_ctrl_reset) through mbox, local memory of
 * ntbf_nvms_mbox_bytes(ctrl->io_queues) bytes: one slot per I/O queue pair.
 */
int ntbf_nvms_manager_init(struct ntbf_nvms_manager *m, struct ntbf_nvme_ctrl *ctrl, void *mbox,
                           size_t size, uint32_t fdid, uint32_t lease_ms,
                           uint32_t max_qp_per_client);
/* Serve what is pending: joins, requests, expired leases. Returns the units of work done. */
int ntbf_nvms_manager_step(struct ntbf_nvms_manager *m, uint64_t now_ns);
/* Delete every client's pairs, say STOPPED and free the manager's state. */
void ntbf_nvms_manager_fini(struct ntbf_nvms_manager *m);

/* ---- a client ------------------------------------------------------------------------------- */

struct ntbf_nvms_client {
        volatile uint8_t *mbox;
        size_t size;
        uint32_t slot;
        uint64_t nonce, epoch;
        uint32_t seq;
        uint64_t beat;
        struct ntbf_nvme_wait wait;
        struct ntbf_nvms_hdr hdr; /* a copy taken at attach */
        struct ntbf_nvme_ns ns;
};

/*
 * Join the manager behind mbox (a mapping of its mailbox of size bytes) as node/pid: take a
 * slot. w bounds each wait (NULL: default). On failure why says what and what to do
 * (-ENOSPC: every slot is held; -ETIMEDOUT: the manager does not answer; -EPROTO: not a
 * mailbox of this version).
 */
int ntbf_nvms_client_attach(struct ntbf_nvms_client *cl, volatile void *mbox, size_t size,
                            uint32_t node, uint32_t pid, const struct ntbf_nvme_wait *w, char *why,
                            size_t whylen);
/* Continue through another mapping of the same mailbox (another path, article 6.3). */
void ntbf_nvms_client_rebase(struct ntbf_nvms_client *cl, volatile void *mbox);
/* Renew the lease: call a few times per lease (hdr.lease_ms). */
void ntbf_nvms_client_beat(struct ntbf_nvms_client *cl);
/* Clients and I/O queue pairs the manager counts now (this client included). */
void ntbf_nvms_client_counts(const struct ntbf_nvms_client *cl, uint32_t *clients, uint32_t *pairs);
/* The most pairs in use at once since the last moment none were: a client waiting for N
 * others misses nothing while it is not scheduled. */
uint32_t ntbf_nvms_client_peak(const struct ntbf_nvms_client *cl);
/* The manager still runs the controller this client attached to (same epoch, READY). */
bool ntbf_nvms_client_manager_ok(const struct ntbf_nvms_client *cl);

/*
 * Requests. Each returns 0, an NVMe status (> 0) or -errno; on failure why holds the
 * manager's sentence (e.g. "all 31 I/O queue pairs of ... are in use").
 */
int ntbf_nvms_create_qp(struct ntbf_nvms_client *cl, uint32_t sq_entries, uint32_t cq_entries,
                        uint64_t sq_io, uint64_t cq_io, uint16_t *qid, char *why, size_t whylen);
int ntbf_nvms_delete_qp(struct ntbf_nvms_client *cl, uint16_t qid, char *why, size_t whylen);
int ntbf_nvms_identify(struct ntbf_nvms_client *cl, uint8_t cns, uint32_t nsid, uint64_t buf_io,
                       char *why, size_t whylen);
int ntbf_nvms_get_features(struct ntbf_nvms_client *cl, uint8_t fid, uint32_t cdw11,
                           uint64_t buf_io, uint32_t *dw0, char *why, size_t whylen);
int ntbf_nvms_set_features(struct ntbf_nvms_client *cl, uint8_t fid, uint32_t cdw11, uint32_t cdw12,
                           uint32_t *dw0, char *why, size_t whylen);
int ntbf_nvms_get_log_page(struct ntbf_nvms_client *cl, uint8_t lid, uint32_t nsid, uint32_t len,
                           uint64_t buf_io, char *why, size_t whylen);
/* Leave: the manager deletes the client's remaining pairs and frees its slot. */
int ntbf_nvms_client_detach(struct ntbf_nvms_client *cl);

#endif
