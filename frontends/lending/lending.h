/* frontends/lending/lending.h: the device API's internal objects (contexts, devices). */
#ifndef NTBF_LENDING_H
#define NTBF_LENDING_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>
#include <unistd.h>

#include "ntbfab/backend.h"
#include "ntbfab/device.h"
#include "ntbfab/error.h"
#include "ntbfab/rpc.h"
#include "dmamem.h"
#include "iova.h"
#include "maptab.h"
#include "hostvfio.h"

struct json_object;

/* How a device's DMA addresses are made (docs/device-api.md, "DMA mapping"). */
enum ntbf__dma_mode {
        NTBF__DMA_IOVA,     /* borrowed: IOVA of this handle's share, borrower IOMMU */
        NTBF__DMA_WINDOW,   /* borrowed, borrower without IOMMU: window over physical RAM */
        NTBF__DMA_PHYS,     /* local: host-physical addresses */
        NTBF__DMA_ISOLATED, /* local, in its own IOMMU domain: host-physical, identity-mapped */
        NTBF__DMA_VFIO,     /* local, behind vfio-pci: IOVA of this handle's share, MAP_DMA */
        NTBF__DMA_MANAGED,  /* a managed fabric's device (NTBF_CAP_DEV_MAP): the backend maps */
};

/* A window range made reachable by a device's DMA (ntbf_dev_map_window). */
struct ntbf__winmap {
        uint64_t ioaddr;
        uint32_t adapter;
        void *map; /* VFIO: the process mapping of the window that MAP_DMA pinned */
        uint64_t map_size;
        uint32_t idx; /* VFIO: first page of the IOVA share */
        bool managed; /* the backend's dev_map made it (undo: dev_unmap) */
};

struct ntbf_ctx {
        uint64_t id; /* unique per process: keys the thread-local error sentences */
        char dir[PATH_MAX];
        char node[NTBF_NAME_MAX + 1];
        uint32_t node_idx;
        char config[PATH_MAX + 64];
        char sock[PATH_MAX + 64]; /* the node daemon's socket */
        struct ntbf_topo *topo;
        const struct ntbf_backend_ops *ops;
        struct ntbf_backend *b;
        struct ntbf_backend_relay relay; /* the backend's way to the daemon (backend.relay) */
        struct ntbf_adapter_h **ah;      /* by topology adapter index; NULL for other nodes' */
        struct ntbf_adapter_h *h0;       /* the node's first adapter: memory and vectors */
        int timeout_ms;

        pthread_mutex_t rpc_lock; /* one request in flight on the control connection */
        struct ntbf_rpc *rpc;
        uint64_t gen;  /* connection generation: handles of older ones are void */
        bool rpc_dead; /* the daemon closed the connection */

        pthread_mutex_t lock; /* devs and the event thread */
        struct ntbf_dev *devs;
        struct ntbf_rpc *ev; /* the event connection (events.subscribe) */
        pthread_t ev_thread;
        bool ev_started;
        atomic_bool ev_alive;
        int ev_stop;         /* eventfd: tells the event thread to quit */
        uint64_t ev_refused; /* generation whose daemon has no events.subscribe */

        struct ntbf__dmamem mem;
        pid_t pid; /* the process that opened it: a forked child's copy makes no call */
        struct ntbf_ctx *next_open; /* the process's open contexts (ctx.c, for fork) */
};

/* A context copied into a forked child: its connections are the parent's session, its threads
 * and locks the parent's; the child makes no call on it (docs/device-api.md, "Threads and
 * processes"). */
static inline bool ntbf__ctx_foreign(const struct ntbf_ctx *ctx)
{
        return ctx->pid != getpid();
}

struct ntbf__bar {
        uint64_t size, addr;
        uint32_t adapter; /* NTBF_NONE: the BAR is in this host (local device) */
        uint32_t win;     /* the adapter's window holding it */
        uint64_t offset;  /* in that window */
        bool prefetchable;
        void *ptr;      /* the mapping, NULL when not mapped */
        void *map_base; /* what map_window returned (page aligned) */
        uint64_t map_size;
        bool mapped_local; /* a local BAR mapped by the backend's host_map */
        bool user;         /* mapped by ntbf_dev_map_bar */
        uint32_t refs;     /* internal users (the MSI-X table) */
};

struct ntbf__vec {
        bool on;
        struct ntbf_irq irq;
        uint64_t io; /* MANAGED: the vector's address as the device writes it (dev_map) */
};

struct ntbf_dev {
        struct ntbf_ctx *ctx;
        struct ntbf_dev *next;
        int64_t handle;
        uint64_t gen;
        struct ntbf_dev_info info;
        uint32_t tdev, tfunc; /* in the topology, NTBF_NONE if not found there */
        struct ntbf__bar bars[NTBF_MAX_BARS];

        /* DMA (the fast path: `lock` only). */
        enum ntbf__dma_mode mode;
        atomic_int lock;
        struct ntbf_adapter_h *dh;            /* iommu_map / dev_iommu_map go through it */
        uint64_t dma_dev, dma_iova, dma_size; /* the DMA window (borrowed) */
        uint64_t share_iova, share_size;      /* this handle's IOVA share */
        uint64_t dev_base;                    /* device address of share page 0 */
        uint64_t addr_end;                    /* PHYS, ISOLATED: addressing limit (exclusive) */
        struct ntbf_rid rid;                  /* ISOLATED: the device's requester */
        struct ntbf__iova iova;
        struct ntbf__maptab maps;  /* WINDOW, PHYS, ISOLATED, MANAGED: live mappings */
        struct ntbf__maptab pages; /* ISOLATED: pages mapped in the domain, counted */
        struct ntbf__vfio *vfio;   /* VFIO: the container and device fds the daemon passed */

        /* Control state: BAR mappings, vectors, peer mappings. */
        pthread_mutex_t ctl;
        uint64_t msi_dev, msi_host, msi_size; /* the MSI window (borrowed) */
        bool msix_known;
        uint32_t msix_cap, msix_n, msix_bir, msix_off;
        struct ntbf__vec *vecs;
        uint64_t *peers;
        uint32_t npeers, cappeers;
        struct ntbf__winmap *wins;
        uint32_t nwins, capwins;

        int evfd;
        atomic_int lost; /* 0, 1 lost and not yet reported, 2 reported (a device is lost once:
                            the loss may come on both connections) */
};

/* Record the sentence of a failure for this thread and ctx; returns code. */
int ntbf__fail(const struct ntbf_ctx *ctx, int code, const char *fmt, ...) NTBF_PRINTF(3, 4);

/*
 * A control call on ctx's connection for a handle opened under generation gen (0: none),
 * with a sentence on failure naming the method. Takes params. method NULL: device.close of a
 * handle, quietly (no sentence; skipped when the handle died with an old connection).
 */
int ntbf__call(struct ntbf_ctx *ctx, uint64_t gen, const char *method, struct json_object *params,
               struct json_object **result);
/* The same, taking up to maxfds file descriptors that came with the answer (docs/rpc.md):
 * *nfds of them land in fds, owned by the caller; any beyond maxfds are closed. */
int ntbf__call_fds(struct ntbf_ctx *ctx, uint64_t gen, const char *method,
                   struct json_object *params, struct json_object **result, int *fds,
                   unsigned maxfds, unsigned *nfds);
/* Reconnect if the daemon went away and came back; 0 or a failure (with its sentence). */
int ntbf__ctx_connected(struct ntbf_ctx *ctx);
/* Start the event connection and thread if they are not running (best effort). */
void ntbf__events_start(struct ntbf_ctx *ctx);

#endif
