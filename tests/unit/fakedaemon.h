/* tests/unit/fakedaemon.h: a fake node daemon answering the device API's RPC methods, for tests. */
#ifndef NTBF_TEST_FAKEDAEMON_H
#define NTBF_TEST_FAKEDAEMON_H

#include <pthread.h>
#include <stdatomic.h>

#include "ntbfab/backend.h"
#include "ntbfab/sim.h"

/*
 * A simulated cluster in a fresh /dev/shm directory, built from YAML text the way `ntbfab
 * up` would: the file is written to DIR/cluster.yaml (where ntbf_ctx_open looks for it),
 * the fabric instance is created, this process attaches as any node and may run the device
 * models. No cmocka here: the benchmark uses it too.
 */
struct fk_fabric {
        char dir[256];
        struct ntbf_topo *t;
        const struct ntbf_backend_ops *ops;
        struct ntbf_backend *b;
        struct ntbf_adapter_h *h[16]; /* by adapter index */
        struct ntbf_sim_devhost *dh;
        uint32_t next_slot[16]; /* slots handed out so far, per adapter */
        uint32_t nborrows;      /* borrows programmed: each gets its own IOVA range */
};

/* Returns 0, or prints why to stderr and returns an error. models: run the device host. */
int fk_fabric_up(struct fk_fabric *f, const char *yaml, bool models);
/* The two halves of fk_fabric_up: the files (no threads: a process may fork after it), then
 * this process's attachment. */
int fk_fabric_create(struct fk_fabric *f, const char *yaml);
int fk_fabric_attach(struct fk_fabric *f, bool models);
void fk_fabric_down(struct fk_fabric *f);

/* A device as the fake daemon presents it to device.open. */
struct fk_dev {
        uint32_t fdid;
        uint32_t tdev, func; /* topology device and function */
        bool local;
        bool isolated; /* local, in its own IOMMU domain */
        char bdf[16];  /* the address on the daemon's node (shadow address when borrowed) */
        uint64_t bar_addr[6], bar_off[6];
        uint32_t bar_adapter;
        uint64_t dma_dev, dma_iova, dma_size;
        uint32_t dma_adapter; /* the borrower's adapter the DMA enters through */
        uint64_t msi_dev, msi_host, msi_size;
        uint64_t share;       /* IOVA bytes per handle (0: the whole window) */
        uint32_t shares_used; /* bitmap of handed-out shares */
};

#define FK_MAX_DEVS    8
#define FK_MAX_CONNS   8
#define FK_MAX_HANDLES 32

struct fk_conn {
        int fd;
        bool sub;
        char buf[1 << 16];
        size_t len;
};

struct fk_handle {
        bool used;
        uint32_t dev, conn, share;
        uint64_t peers[4];
};

struct fakedaemon {
        struct fk_fabric *f;
        uint32_t node;
        char sock[512];
        int lfd, stopfd;
        pthread_t th;
        bool running;
        pthread_mutex_t lock; /* devices, handles, sends */
        struct fk_dev devs[FK_MAX_DEVS];
        uint32_t ndevs;
        struct fk_conn conns[FK_MAX_CONNS];
        struct fk_handle handles[FK_MAX_HANDLES];
        atomic_bool silent;   /* read requests, answer nothing (a hung daemon) */
        const char *drop_key; /* leave this member out of device.open answers (a broken daemon) */
        atomic_uint requests; /* requests received */
        atomic_uint closes;   /* device.close calls */
        atomic_uint subscribed;
        atomic_uint subscribe_calls;
        bool no_events; /* answer events.subscribe with "method not found" (an older daemon) */
};

/* Listen on DIR/run/NODE.sock as node's daemon. Returns 0 or -errno. */
int fk_start(struct fakedaemon *fk, struct fk_fabric *f, const char *node);
/*
 * Program a borrow by fk's node of function func of device dev, as the fabric manager has
 * the nodes do (docs/daemon.md): BAR slots in the borrower's window, the lender's DMA
 * window (dma_window bytes at a fresh IOVA range of the borrower) and MSI window, the
 * device's requester ID in the lender's adapter. share: IOVA bytes per handle (0: all).
 * Returns the fk_dev, or NULL (why printed).
 */
struct fk_dev *fk_borrow(struct fakedaemon *fk, const char *lender, const char *dev, uint32_t func,
                         uint64_t dma_window, uint64_t share);
/* A device of fk's own node. */
struct fk_dev *fk_local(struct fakedaemon *fk, const char *dev, uint32_t func);
/* The same, put in its own IOMMU domain (dev_isolate); NULL if the backend cannot. */
struct fk_dev *fk_local_isolated(struct fakedaemon *fk, const char *dev, uint32_t func);
/* Send device.lost for fdid to every subscribed connection. */
void fk_lost(struct fakedaemon *fk, uint32_t fdid);
/* The daemon dies: every connection and the socket go away at once. */
void fk_kill(struct fakedaemon *fk);
/* Subscribed event connections right now. */
unsigned fk_subscribers(struct fakedaemon *fk);

#endif
