/* ntbf_nvme_sisci.h: BAR0, DMA memory, the mailbox and multicast through libsisci. */
#ifndef NTBF_NVME_SISCI_H
#define NTBF_NVME_SISCI_H

#include "ntbf_nvme_share.h"
#include "ntbf_nvme_work.h"
#include "sisci_api.h"

/*
 * Everything the driver core needs, obtained with the SISCI API and its SmartIO extension
 * only (article 6.1), so the driver runs unchanged over any backend libsisci runs on:
 * - the controller: SCIBorrowDevice (exclusive for the manager's reset, then
 *   SCIReleaseExclusiveBorrow; shared for clients), BAR0 as a device segment mapped with
 *   SCI_FLAG_IO_MAP_IOSPACE, once per path (SCIConnectDeviceSegmentPath, article 6.3);
 * - DMA memory where the caller wants it (ntbf_nvmx_where): a local segment mapped for the
 *   device (this host's RAM), a device segment placed by access hints or forced to the
 *   device's side (the lender's RAM), or an accelerator's memory next to the controller (its
 *   BAR as a segment mapped for the NVMe peer to peer, article 6.4);
 * - the manager's mailbox: a local segment of the manager with a well-known id
 *   (NTBF_NVMS_SEGID), which clients connect to and map, once per path.
 * Failures leave a sentence naming the SISCI call and its error in x->why.
 */

#define NTBF_NVMX_PATHS 2

struct ntbf_nvmx {
        sci_desc_t sd;
        uint32_t fdid;
        uint32_t node_id;   /* this host's SISCI node id */
        uint32_t lender_id; /* the controller's host */
        char name[64];      /* "lender.nvme0" */
        sci_smartio_device_t dev;
        bool exclusive;
        unsigned npaths;
        struct {
                unsigned adapter;
                sci_remote_segment_t seg;
                sci_map_t map;
                volatile void *bar0;
                size_t size;
                uint64_t phys; /* where this host reaches BAR0 on this path */
        } path[NTBF_NVMX_PATHS];
        char why[320];
};

/* Where DMA memory goes. */
enum ntbf_nvmx_where {
        NTBF_NVMX_HINTS,  /* a device segment placed by the access hints given */
        NTBF_NVMX_HOST,   /* this host's RAM (a local segment) */
        NTBF_NVMX_LENDER, /* the controller's host's RAM (a device segment on the device side) */
        NTBF_NVMX_DEVMEM, /* an accelerator's memory next to the controller (ntbf_nvmx_devmem) */
};
const char *ntbf_nvmx_where_name(enum ntbf_nvmx_where w);

/* An accelerator's device memory (its BAR2), borrowed shared, carved for queues and data. */
struct ntbf_nvmx_devmem {
        uint32_t fdid, node_id;
        sci_smartio_device_t acc;
        sci_remote_segment_t seg;
        sci_map_t map;
        volatile uint8_t *va;
        uint64_t io; /* the BAR as the NVMe reaches it (peer to peer) */
        size_t size, used;
};

struct ntbf_nvmx_mem {
        struct ntbf_nvme_mem m;       /* va and the controller address of its path */
        uint64_t io[NTBF_NVMX_PATHS]; /* the controller address on each path */
        enum ntbf_nvmx_where where;
        uint32_t node_id; /* the host whose memory it is */
        sci_local_segment_t lseg;
        sci_remote_segment_t rseg;
        sci_map_t map;
        unsigned mapped; /* paths it is mapped for the device on (bits) */
};

/* Initialize libsisci and open a descriptor; learn this host's node id. 0, or -1 with x->why. */
int ntbf_nvmx_init(struct ntbf_nvmx *x);
/*
 * Borrow device fdid (exclusive or shared), with BAR0 mapped through each adapter of
 * adapters[0..npaths). 0, or -1 with x->why.
 */
int ntbf_nvmx_borrow(struct ntbf_nvmx *x, uint32_t fdid, bool exclusive, const unsigned *adapters,
                     unsigned npaths);
/* Unmap, disconnect, return the device (if borrowed), close the descriptor. */
void ntbf_nvmx_close(struct ntbf_nvmx *x);
/* Whether the paths reach BAR0 through different windows (a real second route). */
bool ntbf_nvmx_paths_distinct(const struct ntbf_nvmx *x);
/* The manager, once the controller is reset: let other borrowers in (article 6.1). */
int ntbf_nvmx_release_exclusive(struct ntbf_nvmx *x);
/* The first NVMe in the pool (SCIGetDeviceList with the NVMe class), or 0 with x->why. */
uint32_t ntbf_nvmx_find_nvme(struct ntbf_nvmx *x);

/*
 * size bytes of DMA memory for the controller, at where: hints are the SCI_MEMACCESS_* bits
 * for NTBF_NVMX_HINTS (and say what the memory is for in the others), dm the accelerator for
 * NTBF_NVMX_DEVMEM. Mapped for the device on every path of x. 0, or -1 with x->why.
 */
int ntbf_nvmx_alloc(struct ntbf_nvmx *x, size_t size, enum ntbf_nvmx_where where, unsigned hints,
                    struct ntbf_nvmx_devmem *dm, struct ntbf_nvmx_mem *out);
/*
 * The same for path p: a device segment's CPU mapping made through path p's adapter; this
 * host's memory (NTBF_NVMX_HOST) of a path p > 0 mapped for the device through path p's
 * adapter only, so the controller's DMA to it enters this host there (a backup queue pair,
 * article 6.3); m.io is the address on path p.
 */
int ntbf_nvmx_alloc_on(struct ntbf_nvmx *x, unsigned p, size_t size, enum ntbf_nvmx_where where,
                       unsigned hints, struct ntbf_nvmx_devmem *dm, struct ntbf_nvmx_mem *out);
void ntbf_nvmx_free(struct ntbf_nvmx *x, struct ntbf_nvmx_mem *m);

/* Borrow accelerator acc_fdid (shared) and map its BAR2 for the CPU and for x's controller. */
int ntbf_nvmx_devmem_open(struct ntbf_nvmx *x, uint32_t acc_fdid, struct ntbf_nvmx_devmem *dm);
void ntbf_nvmx_devmem_close(struct ntbf_nvmx *x, struct ntbf_nvmx_devmem *dm);

/* The mailbox: the manager's segment, or a client's mapping of it on each path. */
struct ntbf_nvmx_mbox {
        sci_local_segment_t lseg;
        sci_remote_segment_t rseg[NTBF_NVMX_PATHS];
        sci_map_t map[NTBF_NVMX_PATHS];
        volatile void *va[NTBF_NVMX_PATHS];
        unsigned n;
        size_t size;
};
/* The manager: a local segment of size bytes, available on every adapter of x. */
int ntbf_nvmx_mbox_create(struct ntbf_nvmx *x, size_t size, struct ntbf_nvmx_mbox *mb);
/* A client: connect to the manager on node manager_id through each of x's paths. */
int ntbf_nvmx_mbox_connect(struct ntbf_nvmx *x, uint32_t manager_id, unsigned timeout_ms,
                           struct ntbf_nvmx_mbox *mb);
void ntbf_nvmx_mbox_close(struct ntbf_nvmx *x, struct ntbf_nvmx_mbox *mb);

/*
 * Multicast (article 6.5). A member makes a buffer of size bytes of its memory part of group
 * (a broadcast segment, SCI_FLAG_BROADCAST); the one who sends maps the group for x's
 * controller, so one write of the controller reaches every member.
 */
struct ntbf_nvmx_group {
        sci_local_segment_t lseg; /* a member's buffer */
        sci_map_t lmap;
        volatile uint8_t *va;
        sci_remote_segment_t rseg; /* the sender's connection to the group */
        uint64_t io;
        size_t size;
        bool mapped;
};
int ntbf_nvmx_group_join(struct ntbf_nvmx *x, uint32_t group, size_t size,
                         struct ntbf_nvmx_group *g);
int ntbf_nvmx_group_connect(struct ntbf_nvmx *x, uint32_t group, unsigned timeout_ms,
                            struct ntbf_nvmx_group *g);
void ntbf_nvmx_group_close(struct ntbf_nvmx *x, struct ntbf_nvmx_group *g);

/* ---- a client: everything between "borrow shared" and "I/O with no one else involved" ------ */

struct ntbf_nvmx_client_opts {
        uint32_t fdid;                      /* 0: the first NVMe in the pool */
        unsigned adapters[NTBF_NVMX_PATHS]; /* local adapter of each path */
        unsigned npaths;                    /* 2: a backup queue pair on the second path */
        uint32_t manager_id;                /* 0: the controller's host (the article's choice) */
        enum ntbf_nvmx_where sq_where, cq_where, data_where;
        uint32_t devmem_fdid; /* an accelerator, for NTBF_NVMX_DEVMEM */
        uint32_t entries;     /* queue entries (SQ and CQ) */
        size_t data_bytes;    /* the data buffer */
        bool no_queues;       /* join only (identify, features) */
};

struct ntbf_nvmx_qpair {
        struct ntbf_nvmx_mem sq, cq, prp;
        struct ntbf_nvme_qp qp;
        uint16_t qid;
        bool created;
};

struct ntbf_nvmx_client {
        struct ntbf_nvmx x;
        struct ntbf_nvme_ctrl ctrl; /* BAR0 of path 0: CAP, doorbell stride */
        struct ntbf_nvmx_mbox mb;
        struct ntbf_nvms_client cl;
        struct ntbf_nvmx_devmem dm;
        struct ntbf_nvmx_qpair q[NTBF_NVMX_PATHS];
        struct ntbf_nvmx_mem data;   /* path 0's data buffer */
        struct ntbf_nvmx_mem backup; /* the backup path's, on the device's side */
        struct ntbf_nvme_path paths[NTBF_NVMX_PATHS];
        unsigned npaths;
        bool joined, beating;
        volatile int stop;
        void *beat_thread; /* pthread_t */
};

/*
 * Borrow the controller shared, join its manager, start renewing the lease (a thread), and
 * unless opts->no_queues create a queue pair per path: on the first, the SQ and CQ where
 * opts say and a data buffer; on the second (the backup), SQ, CQ, PRP lists and a data buffer
 * of its own all on the controller's host, so none of the controller's DMA crosses a cable,
 * and the CPU reaching them, and BAR0, through the second adapter. 0, or -1 with c->x.why.
 */
int ntbf_nvmx_client_open(struct ntbf_nvmx_client *c, const struct ntbf_nvmx_client_opts *o);
/* Delete the pairs through the manager, leave, free everything, return the controller. */
void ntbf_nvmx_client_close(struct ntbf_nvmx_client *c);
/* Continue admin traffic through the mailbox mapping of path p (after a failover). */
void ntbf_nvmx_client_use_path(struct ntbf_nvmx_client *c, unsigned p);

#endif
