/* frontends/sisci-compat/src/sx.h: libsisci's internals: process state, handles and objects. */
#ifndef SX_H
#define SX_H

/* The API's entry points are the library's only exports (with the ST aliases and constants). */
#pragma GCC visibility push(default)
#include "sisci_api.h"
#pragma GCC visibility pop

#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ntbfab/backend.h"
#include "ntbfab/device.h"
#include "ntbfab/error.h"
#include "ntbfab/rpc.h"
#include "ntbfab/topology.h"

/*
 * Handles. What a caller holds is never a pointer into the library: it is a number, a
 * process-unique id (never reused) shifted left by 8 with the object's kind in the low byte.
 * Every call looks the number up in a registry of live objects (sx_get), so a NULL, forged,
 * freed or wrong-kind handle is an error code, never a dereference.
 *
 * Locking. One process-wide mutex (sx.lock) guards the registry, every object and the
 * control connection to the daemon; control calls hold it for their whole duration,
 * daemon round trip included (they take milliseconds and SISCI programs issue them from few
 * threads). Waits (segment events, interrupts, DMA) drop it: they hold a reference on the
 * object and sleep on sx.cond or on a file descriptor. Callbacks run without the lock, in
 * the library's threads (events, interrupts, DMA), so they may call the API.
 */

enum sx_kind {
        SX_DESC = 1,
        SX_LSEG,
        SX_RSEG,
        SX_MAP,
        SX_SEQ,
        SX_DMAQ,
        SX_LINT,
        SX_RINT,
        SX_LDINT,
        SX_RDINT,
        SX_DEV,
        SX_DMACH,
        SX_KINDS
};

struct sx_desc;

struct sx_obj {
        uint64_t handle; /* id << 8 | kind */
        enum sx_kind kind;
        unsigned refs; /* 1 for the registry while live, plus one per call using it */
        bool dead;     /* out of the registry; freed when refs reaches 0 */
        struct sx_desc *sd;
        struct sx_obj *next, *prev; /* every live object, for SCITerminate */
};

/* A descriptor: what SCIOpen returns; resources opened under it count in nres. */
struct sx_desc {
        struct sx_obj o;
        unsigned nres;
};

/* Segment events queued for SCIWaitFor*SegmentEvent when no callback takes them. */
#define SX_EVQ 64
struct sx_ev {
        sci_segment_cb_reason_t reason;
        uint32_t node_id, adapter;
        sci_error_t status;
};
struct sx_evq {
        struct sx_ev v[SX_EVQ];
        unsigned head, n;
};

struct sx_lseg {
        struct sx_obj o;
        uint32_t id;  /* the SISCI segment id */
        uint32_t did; /* its number at the daemon (private segments: the daemon's own) */
        size_t size;
        unsigned flags;     /* creation flags */
        void *mem;          /* the memory in this process, NULL while EMPTY */
        uint64_t bus;       /* its bus address in this host */
        bool own_mem;       /* from ntbf_dma_alloc: freed with the segment */
        bool host_mem;      /* mem is the library's host_map of attached physical memory */
        uint64_t prepared;  /* adapter numbers the segment was prepared on (bit n) */
        uint64_t available; /* adapter numbers it is available on */
        unsigned maps;      /* local CPU mappings */
        unsigned dev_maps;  /* mappings for devices (SCIMapLocalSegmentForDevice) */
        unsigned conns;     /* remote connections, as the daemon reported them */
        sci_cb_local_segment_t cb;
        void *cbarg;
        struct ntbf_mem xmem; /* mem is the adapter's memory for export (hardware backends) */
        struct sx_evq evq;
        struct sx_devmap *dmaps; /* mappings for devices */
};

enum sx_rkind {
        SX_R_MEM, /* a segment of a node (SCIConnectSegment), or a device segment */
        SX_R_BAR, /* a BAR of a borrowed device (SCIConnectDeviceSegment, SCI_MEMTYPE_BAR) */
};

struct sx_rseg {
        struct sx_obj o;
        enum sx_rkind rkind;
        uint64_t dh; /* the daemon's handle of the connection (0 for a BAR) */
        uint32_t node_id, id;
        size_t size;
        bool local;          /* the memory is in this host: addr is its physical address */
        bool broadcast;      /* a multicast group: CPU stores go through window_write */
        uint64_t addr;       /* this host's address of byte 0 (window address, or physical) */
        uint32_t adapter;    /* topology index of the adapter whose window holds it */
        uint32_t win;        /* that window of the adapter */
        uint64_t offset;     /* offset of byte 0 in that window */
        uint32_t adapter_no; /* the caller's adapter number */
        uint64_t owner_phys; /* the memory's address in its owner's host (device mappings) */
        uint32_t owner_node; /* topology index of the owner's node */
        bool lost, down;
        unsigned maps, dev_maps;
        sci_cb_remote_segment_t cb;
        void *cbarg;
        struct sx_evq evq;
        struct sx_dev *dev; /* device segments: the device; BAR: its BAR number */
        unsigned bar;
        void *imap; /* an internal CPU mapping of the whole segment (DMA fallback), or NULL */
        uint64_t imap_size;
        void *imap_base;
        bool imap_host; /* imap_base is a mapping of this host's memory (sx_host_map) */
        struct sx_devmap *dmaps;
};

struct sx_map {
        struct sx_obj o;
        struct sx_lseg *ls;
        struct sx_rseg *rs;
        volatile uint8_t *ptr; /* what the caller got */
        void *base;            /* what map_window returned (NULL for local memory) */
        uint64_t base_size;
        bool host; /* base is a mapping of this host's memory (sx_host_map), not a window */
        size_t off, size;
        unsigned flags;
        uint64_t phys; /* this host's physical address of ptr */
        unsigned seqs;
};

struct sx_seq {
        struct sx_obj o;
        struct sx_map *m;
        bool started;
};

/* A mapping of segment memory for a device's DMA (SCIMap*SegmentForDevice). */
struct sx_devmap {
        struct sx_devmap *next;
        struct sx_dev *dev;
        uint32_t adapter_no;
        uint64_t dh;      /* the daemon's handle of the mapping (0: a peer map of a BAR) */
        uint64_t ioaddr;  /* what the device uses */
        uint64_t peer_io; /* BAR peer mapping: the address ntbf_dev_map_peer gave */
        size_t vfio_size; /* a device behind VFIO: ntbf_dev_dma_map of this size (0: none) */
        bool vfio_window; /* ... or ntbf_dev_map_window (a remote segment's window) */
        bool fabric;      /* a managed fabric's device: the backend's dev_map of this host's
                             memory through adapter number adapter_no (hw.c) */
};

/* DMA */
#define SX_DMA_MAX_VEC DIS_DMA_MAX_VECLEN
struct sx_dmaq {
        struct sx_obj o;
        uint32_t adapter_no, adapter;
        unsigned max_entries;
        sci_dma_queue_state_t state;
        unsigned batches; /* transfers (SCIStartDma*) in flight */
        bool failed, aborted;
        sci_error_t err;
        struct sx_dmajob *jobs; /* in flight, oldest first */
        unsigned waiters;
};

/* A DMA channel a program asked for (SCIRequestDMAChannel): the library picks engines
 * itself, so it only remembers what was asked. */
struct sx_dmach {
        struct sx_obj o;
        uint32_t adapter_no;
        sci_dma_type_t type;
};

/* Interrupts */
struct sx_lint {
        struct sx_obj o;
        bool data; /* a data interrupt */
        uint32_t adapter_no, intno;
        struct ntbf_irq irq;
        uint64_t pending; /* interrupts counted, not yet waited for */
        sci_cb_interrupt_t cb;
        sci_cb_data_interrupt_t dcb;
        void *cbarg;
        pthread_t thread;
        bool thread_on;
        int stop; /* eventfd telling the callback thread to leave */
        unsigned waiters;
        /* data interrupts: the mailbox (docs/sisci.md) */
        void *mbox;
        uint64_t mbox_bus;
        size_t mbox_size;
        struct ntbf_mem xmbox; /* mbox is the adapter's memory for export (hardware backends) */
        uint32_t next_lane;    /* the lane a reader looks at first (round robin) */
        uint32_t *lane_head;   /* per lane: the next sequence number to read */
};

struct sx_rint {
        struct sx_obj o;
        bool data;
        uint64_t dh; /* the daemon's handle of the interrupt connection */
        uint32_t node_id, intno;
        uint32_t adapter; /* topology index of the adapter the write leaves through */
        uint32_t win;     /* the window of that adapter holding the target's address */
        uint64_t offset;  /* offset of the target's interrupt address in that window */
        uint32_t msi_data;
        bool local;          /* the target is in this host */
        uint64_t local_addr; /* its interrupt address in this host */
        bool lost;
        /* data interrupts: this connection's lane of the target's mailbox */
        uint64_t mbox_dh;
        uint32_t lane, lane_adapter;
        uint32_t consumed;          /* the reader's count, as last read back */
        volatile uint8_t *lane_ptr; /* mapping of the lane */
        void *lane_base;
        uint64_t lane_base_size;
        bool lane_host; /* lane_base maps this host's memory (sx_host_map), not a window */
        uint32_t seq;   /* next sequence number this writer uses */
};

/* SmartIO */
struct sx_dev {
        struct sx_obj o;
        uint32_t fdid;
        uint64_t holder; /* the daemon's handle of this borrow */
        bool exclusive;
        bool local; /* a device of this node */
        bool lost;
        struct ntbf_dev *nd; /* the device API's handle (BARs, peer mappings) */
        unsigned segs;       /* remote segments connected through it */
        unsigned maps;       /* segment mappings for it */
        uint32_t lender;     /* topology index of the lender */
};

/* The process. */
struct sx_lib {
        pthread_mutex_t lock;
        pthread_cond_t cond; /* broadcast on every event, completion and removal */
        unsigned init;       /* SCIInitialize nesting */
        bool up;
        char dir[PATH_MAX];
        char node[NTBF_NAME_MAX + 1];
        uint32_t node_idx, node_id;
        struct ntbf_ctx *ctx;
        const struct ntbf_backend_ops *ops;
        struct ntbf_backend *b;
        const struct ntbf_topo *t;
        struct ntbf_rpc *rpc; /* control: calls hold sx.lock */
        struct ntbf_rpc *ev;  /* events: read by the event thread only */
        pthread_t ev_thread;
        bool ev_on;
        int ev_stop;
        uint64_t session;
        int timeout_ms;
        /* registry: open addressing on the handle, tombstones on removal */
        struct sx_obj **tab;
        size_t cap, used, tombs;
        uint64_t next_id;
        struct sx_obj *all; /* every live object */
        /* DMA */
        pthread_t dma_thread;
        bool dma_on, dma_stop;
        int dma_chan[NTBF_MAX_NODE_ADAPTERS]; /* channel claimed per adapter number, -1 none */
        bool dma_tried[NTBF_MAX_NODE_ADAPTERS];
        struct sx_dmajob *dma_todo; /* CPU fallback jobs */
        uint64_t dma_cookie;
        /* connection losses that arrived before the object was registered */
        uint64_t early_lost[16];
        unsigned nearly_lost;
};

extern struct sx_lib sx;

/* ---- errors --------------------------------------------------------------------------------- */

/* Where the caller's error goes (a NULL error pointer is allowed: the code is dropped). */
#define SX_ERR(p) sci_error_t sx_dummy_err_, *err = (p) ? (p) : &sx_dummy_err_
/* The SCI error for an ntbfab / -errno code where no call-specific meaning applies. */
sci_error_t sx_err_of(int code);
/* A line on stderr (libsisci's only diagnostics, for what SCI codes cannot say). */
void sx_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- locking, registry ---------------------------------------------------------------------- */

void sx_lock(void);
void sx_unlock(void);
/* Enter a call: lock, and SCI_ERR_NOT_INITIALIZED when SCIInitialize has not succeeded. */
sci_error_t sx_enter(void);
/* The live object a handle names, of that kind (no reference taken), or NULL. */
struct sx_obj *sx_get(const void *h, enum sx_kind kind);
/* Register a new object (refs 1); its handle is then valid. NULL on ENOMEM (obj freed). */
void *sx_new(size_t size, enum sx_kind kind, struct sx_desc *sd);
void *sx_handle(struct sx_obj *o);
/* Remove from the registry (the handle is invalid from now on) and drop its reference. */
void sx_kill(struct sx_obj *o);
void sx_ref(struct sx_obj *o);
/* Drop a reference; the object is freed at 0 (after its kind's cleanup). */
void sx_unref(struct sx_obj *o);
/* Wait on sx.cond until woken or the deadline (ms since the epoch of sx_now_ms; 0: forever).
 * Returns false on timeout. */
bool sx_wait(uint64_t deadline);
uint64_t sx_now_ms(void);
/* Deadline for a SISCI timeout in ms (SCI_INFINITE_TIMEOUT: 0, forever). */
uint64_t sx_deadline(unsigned timeout_ms);

/* ---- the daemon ----------------------------------------------------------------------------- */

/* A control call (holding sx.lock); takes params. Returns 0 or the daemon's code; *res may be
 * NULL. msg (optional) gets the daemon's sentence. */
int sx_call(const char *method, struct json_object *params, struct json_object **res);
const char *sx_call_error(void);
/* Small JSON helpers. */
struct json_object *sx_obj_new(void);
void sx_put_u(struct json_object *o, const char *k, uint64_t v);
void sx_put_b(struct json_object *o, const char *k, bool v);
bool sx_get_u(struct json_object *o, const char *k, uint64_t *v);
bool sx_get_b(struct json_object *o, const char *k, bool *v);

/* ---- topology ------------------------------------------------------------------------------- */

/* The topology index of this node's adapter number n, or NTBF_NONE. */
uint32_t sx_adapter(unsigned n);
/* The handle of adapter (topology index) of this node, or NULL. */
struct ntbf_adapter_h *sx_ah(uint32_t adapter);
/* The topology index of the node with SISCI node id, or NTBF_NONE. */
uint32_t sx_node_by_id(uint32_t id);

/* ---- per-kind cleanup, events (the files of each part) -------------------------------------- */

void sx_free_obj(struct sx_obj *o); /* dispatches to the kind's free */
void sx_lseg_free(struct sx_lseg *s);
void sx_rseg_free(struct sx_rseg *s);
void sx_map_free(struct sx_map *m);
void sx_dmaq_free(struct sx_dmaq *q);
void sx_lint_free(struct sx_lint *i);
void sx_rint_free(struct sx_rint *i);
void sx_dev_free(struct sx_dev *d);

/* Undo whatever an object holds (SCITerminate with objects left open). */
void sx_lseg_drop(struct sx_lseg *s);
void sx_rseg_drop(struct sx_rseg *s);
void sx_map_drop(struct sx_map *m);
void sx_dmaq_drop(struct sx_dmaq *q);
void sx_lint_drop(struct sx_lint *i);
void sx_rint_drop(struct sx_rint *i);
void sx_dev_drop(struct sx_dev *d);

/* Queue an event or hand it to the object's callback (runs callbacks outside the lock). */
void sx_lseg_event(struct sx_lseg *s, sci_segment_cb_reason_t reason, uint32_t node_id,
                   uint32_t adapter_no);
void sx_rseg_event(struct sx_rseg *s, sci_segment_cb_reason_t reason, sci_error_t status);
/* Events from the daemon (event thread, lock held). */
void sx_on_seg_event(struct json_object *ev);
/* A connection the manager released; removed: its owner removed the segment (not forced). */
void sx_on_lost(uint64_t dh, bool removed);
void sx_on_link(uint32_t adapter, bool up);
void sx_on_device_lost(uint32_t fdid);
/* Whether dh was reported lost before its object existed (consumes the record). */
bool sx_early_lost(uint64_t dh);

/* DMA thread (dma.c) */
void sx_dma_stop(void);

/* ---- hardware backends (hw.c) -------------------------------------------------------------- */

/* Memory for export of this host's first adapter that has any; NTBF_EUNSUPPORTED when no
 * adapter exports memory, or when it is host-physical RAM that the device API's DMA memory
 * is made of (NTBF_CAP_MEM_PHYS: segments come from ntbf_dma_alloc then). */
int sx_hw_alloc(size_t size, struct ntbf_mem *m);
void sx_hw_free(struct ntbf_mem *m);
/* This host's memory at bus address bus, mapped into this process by the backend's host_map
 * (*mapped: undo with sx_host_unmap). NTBF_EUNSUPPORTED when the backend has none. */
int sx_host_map(uint64_t bus, size_t size, void **p, bool *mapped);
void sx_host_unmap(void *p, size_t size);
/* The bus address of [p, p + size) of this process: the backend's host_bus. */
int sx_host_bus(const void *p, size_t size, uint64_t *bus);
/* A local interrupt: data written to vector address addr of this host (the backend's
 * irq_trigger, through adapter `adapter` or the node's first). */
int sx_irq_trigger(uint32_t adapter, uint64_t addr, uint32_t data);
/* Whether the device is a real one behind VFIO (its DMA maps are the process's own). */
bool sx_dev_vfio(const struct sx_dev *x);
/* Whether the device is on a managed fabric (NTBF_CAP_DEV_MAP, Dolphin's SmartIO): its DMA
 * maps are the backend's, asked by this process (memory of this host by bus address; a
 * remote segment through ntbf_dev_map_window), never the fabric manager's. */
bool sx_dev_managed(const struct sx_dev *x);
int sx_dev_fabric_map(struct sx_dev *x, uint32_t adapter_no, uint64_t bus, size_t size,
                      uint64_t *ioaddr);
void sx_dev_fabric_unmap(struct sx_dev *x, uint32_t adapter_no, uint64_t ioaddr);

/* The remote segment's internal mapping of the whole segment (lock held), or NULL. */
volatile uint8_t *sx_rseg_imap(struct sx_rseg *s);
/* Write len bytes at offset off of a remote segment as the CPU would (window_write for
 * multicast groups, stores otherwise). */
sci_error_t sx_rseg_write(struct sx_rseg *s, uint64_t off, const void *buf, size_t len);

#endif
