/* backends/linux-ntb/lntb.h: the linux-ntb backend's objects and functions, for itself and for
 * backends built on it by composition (backends/switchtec). */
#ifndef NTBF_LNTB_H
#define NTBF_LNTB_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "ntbfab/backend.h"
#include "ntbfab_ntb.h"
#include "pollirq.h"

/*
 * The backend drives one NTB of the Linux NTB framework through ntbfab_ntb's character
 * device, /dev/ntbfab-ntbN (kernel/include/uapi/ntbfab_ntb.h; docs/linux-ntb.md).
 *
 * Who may do what. The device has one owner: the one process that opened it for writing
 * (the node daemon, or a tool that runs without one, such as ntbfab-conformance). Every other
 * process of the node opens it read-only and reaches the owner through the relay the
 * frontends give it (struct ntbf_backend_relay: the daemon's `backend.relay` method): it asks
 * for a descriptor of a window, for memory for export, or for a mapping of such memory, and
 * the owner's backend answers (lntb_serve). Such a process can read the capabilities and the
 * link, map windows, write through them, allocate and map memory for export and allocate
 * interrupt vectors; what changes the NTB itself (translations, doorbells, scratchpads,
 * messages, the link) is the owner's, and a relayed process gets -EPERM for it.
 *
 * The cluster file and Linux's numbers:
 *   - peers: Linux numbers an NTB's peers pidx = 0 .. peer count - 1; peer pidx is the
 *     adapter at the other end of the cable on the adapter's port pidx.
 *   - memory windows: Linux numbers them widx = 0, 1, ...; the adapter's translation slots
 *     that are not reserved, in slot order, are Linux's windows 0, 1, ... So the cluster
 *     file lists the NTB's windows in Linux's order, the first ones or all of them, each slot
 *     at the address ntb_peer_mw_get_addr() gives (lntb_probe checks every base and size).
 *
 * Memory for export comes from pools: one buffer of ntbfab_ntb (dma_alloc_coherent() on the
 * NTB's PCI function) per window of the peers, as large as that window and aligned to it,
 * allocated by the owner when first needed and handed out in pieces. Inbound translations
 * point a peer's window at (a part of) a pool; a whole-window translation reaches every
 * segment in that pool, so all connections into one host can share one translation
 * (docs/linux-ntb.md, "The cluster file").
 *
 * Threads: every function may be called from any thread (the rules of backend.h); the
 * handle's lock protects its lists and the pools.
 */

/* The system calls the backend makes: the C library's, or a fake device's in unit tests. */
struct lntb_sys {
        const char *root; /* prefix of /dev and /sys paths ("" on a real host) */
        int (*open)(const char *path, int flags);
        int (*close)(int fd);
        int (*ioctl)(int fd, unsigned long req, void *arg);
        void *(*mmap)(void *addr, size_t len, int prot, int flags, int fd, off_t off);
        int (*munmap)(void *addr, size_t len);
        ssize_t (*read)(int fd, void *buf, size_t len);
        int (*dup)(int fd);
};
extern const struct lntb_sys lntb_sys_libc;
/* What lntb_open uses when given no sys: the C library's. A test program linked with the
 * backends statically may point it at a fake device pair before opening (the conformance
 * runs over tests/unit/fake_ntbdev.c); the shared library does not export it. */
extern const struct lntb_sys *lntb_sys_current;

#define LNTB_MAX_PEERS 8
#define LNTB_MAX_MW    64 /* Linux memory windows one adapter's slots may name */
#define LNTB_PAGE      UINT64_C(4096)
#define LNTB_IRQ_DATA  UINT32_C(0x4c4e0000) /* "LN": a vector's MSI data is this | its id */

/* One piece of a pool: memory for export. */
struct lntb_alloc {
        uint64_t off, size;
        uint64_t client; /* 0: this process; else the relayed process it was made for */
};

/* A pool: one ntbfab_ntb buffer, mapped in the owner, handed out in pieces. */
struct lntb_pool {
        int fd; /* the buffer's descriptor; -1: not allocated yet */
        uint8_t *va;
        uint64_t dma, size, align;
        uint32_t id;
        struct lntb_alloc *a; /* sorted by off */
        size_t n, cap;
};

/* A CPU mapping this process made (map_window, mem_map): what unmapping it takes. */
struct lntb_map {
        struct lntb_map *next;
        void *va; /* what was mapped: page-aligned */
        uint64_t size;
        void *user; /* what the caller got, and its size */
        uint64_t ulen;
        bool window;
        uint64_t bus; /* not a window: the bus address of user */
};

/* One process's instance: the topology, the relay, the interrupt vectors. */
struct lntb_backend {
        const struct ntbf_topo *t;
        uint32_t node;
        const struct ntbf_backend_relay *relay;
        const struct lntb_sys *sys;
        struct ntbf__pollirq irq; /* vectors of every adapter, one watcher */
};

/* One adapter: its NTB, opened by this process. */
struct lntb {
        struct lntb_backend *b;
        const struct lntb_sys *sys;
        uint32_t adapter, node;
        int fd;     /* /dev/ntbfab-ntbN: O_RDWR (the owner) or O_RDONLY (relayed) */
        bool owner; /* this process owns the NTB */
        char dev[64];
        struct ntbfab_info info;
        char pci_dev[32];
        uint32_t caps_flags; /* what this NTB's adapter claims (lntb_caps) */
        /* Peers: Linux's pidx -> the topology adapter at the other end of port pidx. */
        uint32_t npeers;
        uint32_t peer[LNTB_MAX_PEERS];
        /* Outbound windows: the file's windows of this adapter, with the hardware's figures. */
        uint32_t nwin;
        struct ntbf_window win[NTBF_MAX_WINDOWS];
        /* Linux's window index of each usable slot of this adapter (NTBF_NONE: reserved). */
        uint32_t nslots;
        uint32_t slot_widx[LNTB_MAX_MW];

        pthread_mutex_t lock; /* everything below */
        /* Events: epoll over the device file and a private eventfd (synthesized events). */
        int epfd, efd;
        const struct ntbf_event_ops *ops;
        void *ctx;
        uint64_t link_seen; /* bit p: link to pidx p up when last reported */
        uint64_t db_mask;   /* what this process masked (the module's copy, for events) */
        uint64_t db_raise;  /* pending bits unmasked here: raised at the next process_events */
        bool removed;
        /* Memory for export (the owner's pools), and this process's mappings. */
        struct lntb_pool pool[NTBF_MAX_WINDOWS];
        uint32_t npools;
        struct lntb_map *maps;
        /* Relayed processes: a descriptor of each Linux window, asked for once. */
        int wfd[LNTB_MAX_MW];
        /* window_write's mapping of each window, made when first needed. */
        uint8_t *wmap[NTBF_MAX_WINDOWS];
        /* A backend built on this one whose handle is this struct: its state (NULL). */
        void *upper;
};

/* ---- the backend and its adapters (the vtable's open, close, probe, release, caps) ------- */

/*
 * env->relay NULL: this process owns the NTBs it probes; else it reaches their owner. sys
 * NULL: the C library. Opening checks what probe will need, so that a mistake is reported
 * with its sentence in why (probe has none): every adapter of backend `name` (the cluster's
 * or its own `backend`) of the node this process acts as, or with no node (a tool) every
 * such adapter whose NTB is on this host.
 */
int lntb_open(const struct ntbf_backend_env *env, const struct lntb_sys *sys, const char *name,
              struct lntb_backend **out, char *why, size_t whylen);
void lntb_close(struct lntb_backend *b);
/* Open the NTB of topology adapter `adapter` (its `bdf`, or the host's only NTB). As the
 * owner: enable the link, clear stale doorbells and messages, unmask them. why says what
 * failed (what is missing, what would fix it). */
int lntb_probe(struct lntb_backend *b, uint32_t adapter, struct lntb **out, char *why,
               size_t whylen);
void lntb_release(struct lntb *l);
/* Whether lntb_probe would succeed, and why not (opens the NTB read-only and closes it). */
int lntb_check(struct lntb_backend *b, uint32_t adapter, char *why, size_t whylen);
/* Print fmt into why (when given) and return rc: an error and its sentence in one. */
int lntb_say(char *why, size_t len, int rc, const char *fmt, ...) NTBF_PRINTF(4, 5);
int lntb_caps(struct lntb *l, struct ntbf_caps *out);
/* The topology, and the node this process acts as. */
const struct ntbf_topo *lntb_topo(const struct lntb_backend *b);
/* Linux's peer index of topology adapter `peer`, or -1. */
int lntb_pidx(const struct lntb *l, uint32_t peer);

/* ---- link and events ---------------------------------------------------------------------- */

int lntb_link_state(struct lntb *l, uint32_t port, bool *up);
int lntb_link_enable(struct lntb *l, uint32_t port);
int lntb_link_disable(struct lntb *l, uint32_t port);
int lntb_set_events(struct lntb *l, const struct ntbf_event_ops *ops, void *ctx);
int lntb_event_fd(struct lntb *l);
int lntb_process_events(struct lntb *l);

/* ---- translation -------------------------------------------------------------------------- */

int lntb_xlat_set(struct lntb *l, uint32_t slot, const struct ntbf_xlat *x);
int lntb_xlat_clear(struct lntb *l, uint32_t slot);
int lntb_peer_xlat_set(struct lntb *l, uint32_t peer, uint32_t slot, uint64_t local_addr,
                       uint64_t size);
int lntb_peer_xlat_clear(struct lntb *l, uint32_t peer, uint32_t slot);

/* ---- windows ------------------------------------------------------------------------------ */

int lntb_map_window(struct lntb *l, uint32_t win, uint64_t offset, uint64_t size, unsigned flags,
                    void **addr);
int lntb_unmap_window(struct lntb *l, void *addr, uint64_t size);
int lntb_window_write(struct lntb *l, uint32_t win, uint64_t offset, const void *buf, uint64_t len);

/* ---- memory for export and interrupt vectors (mem.c) --------------------------------------- */

int lntb_mem_alloc(struct lntb *l, uint64_t size, uint64_t align, struct ntbf_mem *out);
int lntb_mem_free(struct lntb *l, struct ntbf_mem *m);
int lntb_mem_map(struct lntb *l, uint64_t bus_addr, uint64_t size, void **addr);
int lntb_mem_unmap(struct lntb *l, void *addr, uint64_t size);
int lntb_irq_alloc(struct lntb *l, struct ntbf_irq *out);
int lntb_irq_free(struct lntb *l, struct ntbf_irq *irq);
/* A local interrupt: data stored into the vector page at addr (any process's), mapped with
 * lntb_mem_map for the store. -EINVAL when addr is not 4-byte aligned live memory. */
int lntb_irq_trigger(struct lntb *l, uint64_t addr, uint32_t data);
/* This host's memory: memory for export (lntb_mem_map), else a local PCI device's BAR
 * through sysfs (hostmem.h); -EFAULT for other RAM, which this backend cannot reach. */
int lntb_host_map(struct lntb *l, uint64_t addr, uint64_t size, void **out);
int lntb_host_unmap(struct lntb *l, void *addr, uint64_t size);
/* The bus address of [addr, addr + size) of this process: a piece of a pool the owner maps, or
 * a mapping made by mem_alloc, mem_map or host_map. -EFAULT for anything else. */
int lntb_host_bus(struct lntb *l, const void *addr, uint64_t size, uint64_t *bus);
/* How the vectors' pages are allocated (lntb_mem_alloc, lntb_mem_free). */
extern const struct ntbf__pollirq_mem lntb_irq_mem;
/* The pool and offset holding [bus, bus + size) of a live allocation; lock held. */
struct lntb_pool *lntb_pool_find(struct lntb *l, uint64_t bus, uint64_t size, uint64_t *off,
                                 bool live);

/* ---- doorbells, scratchpads, messages ------------------------------------------------------ */

int lntb_db_read(struct lntb *l, uint64_t *bits);
int lntb_db_clear(struct lntb *l, uint64_t bits);
int lntb_db_set_mask(struct lntb *l, uint64_t bits);
int lntb_db_clear_mask(struct lntb *l, uint64_t bits);
int lntb_peer_db_set(struct lntb *l, uint32_t peer, uint64_t bits);
int lntb_spad_read(struct lntb *l, uint32_t idx, uint32_t *val);
int lntb_spad_write(struct lntb *l, uint32_t idx, uint32_t val);
int lntb_peer_spad_read(struct lntb *l, uint32_t peer, uint32_t idx, uint32_t *val);
int lntb_peer_spad_write(struct lntb *l, uint32_t peer, uint32_t idx, uint32_t val);
int lntb_peer_msg_write(struct lntb *l, uint32_t peer, uint32_t midx, uint32_t val);
int lntb_msg_read(struct lntb *l, uint32_t midx, uint32_t *peer, uint32_t *val);

/* ---- the relay (relay.c) -------------------------------------------------------------------- */

/* What a relayed process asks the owner for. */
enum lntb_relay_op {
        LNTB_RELAY_WINDOW_FD = 1, /* a descriptor of Linux window a (the whole of it) */
        LNTB_RELAY_MEM_ALLOC,     /* a = size, b = align: memory for export, the pool's fd */
        LNTB_RELAY_MEM_FREE,      /* a = bus address of an allocation of this client */
        LNTB_RELAY_MEM_MAP,       /* a = bus address, b = size inside a live allocation */
};
#define LNTB_RELAY_MAGIC UINT32_C(0x4c4e5231) /* "LNR1" */
struct lntb_relay_req {
        uint32_t magic, op;
        uint64_t a, b;
};
struct lntb_relay_ans {
        int32_t rc;
        uint32_t pad;
        uint64_t bus, off, size;
};
/* Ask the owner (a relayed process); *fd gets the descriptor that came with the answer, or -1. */
int lntb_relay(struct lntb *l, uint32_t op, uint64_t a, uint64_t b, struct lntb_relay_ans *ans,
               int *fd);
/* The owner's side: the vtable's serve and client_gone. */
int lntb_serve(struct lntb *l, uint64_t client, const void *req, size_t reqlen, void *ans,
               size_t anslen, size_t *got, int *fds, unsigned maxfds, unsigned *nfds);
void lntb_client_gone(struct lntb *l, uint64_t client);

/* ---- the rest, shared by the files of the backend ------------------------------------------- */

/* ioctl with EINTR retried: 0 or -errno. */
int lntb_ioctl(const struct lntb *l, unsigned long req, void *arg);
/* Forget and unmap a mapping this process made (a window's, or memory for export's). */
int lntb_unmap(struct lntb *l, void *addr, uint64_t size, bool window);
/* Wake the poller of the handle's event fd (a synthesized event is pending). */
void lntb_wake(struct lntb *l);
/* The owner's allocation for a relayed client (client != 0) or itself. */
int lntb_pool_alloc(struct lntb *l, uint64_t client, uint64_t size, uint64_t align,
                    struct lntb_pool **pool, uint64_t *off);
int lntb_pool_free(struct lntb *l, uint64_t client, uint64_t bus);

/* The vtable's callbacks that only pass a handle's call on to lntb_*: a backend built on this
 * one whose adapter handle is the struct lntb (backends/switchtec) puts them in its own
 * vtable for what it does not change. */
int lntb_op_link_state(struct ntbf_adapter_h *h, uint32_t port, bool *up);
int lntb_op_link_enable(struct ntbf_adapter_h *h, uint32_t port);
int lntb_op_link_disable(struct ntbf_adapter_h *h, uint32_t port);
int lntb_op_set_events(struct ntbf_adapter_h *h, const struct ntbf_event_ops *ops, void *ctx);
int lntb_op_event_fd(struct ntbf_adapter_h *h);
int lntb_op_process_events(struct ntbf_adapter_h *h);
int lntb_op_map_window(struct ntbf_adapter_h *h, uint32_t win, uint64_t offset, uint64_t size,
                       unsigned flags, void **addr);
int lntb_op_unmap_window(struct ntbf_adapter_h *h, void *addr, uint64_t size);
int lntb_op_window_write(struct ntbf_adapter_h *h, uint32_t win, uint64_t offset, const void *buf,
                         uint64_t len);
int lntb_op_mem_alloc(struct ntbf_adapter_h *h, uint64_t size, uint64_t align,
                      struct ntbf_mem *out);
int lntb_op_mem_free(struct ntbf_adapter_h *h, struct ntbf_mem *m);
int lntb_op_mem_map(struct ntbf_adapter_h *h, uint64_t bus_addr, uint64_t size, void **addr);
int lntb_op_mem_unmap(struct ntbf_adapter_h *h, void *addr, uint64_t size);
int lntb_op_db_read(struct ntbf_adapter_h *h, uint64_t *bits);
int lntb_op_db_clear(struct ntbf_adapter_h *h, uint64_t bits);
int lntb_op_db_set_mask(struct ntbf_adapter_h *h, uint64_t bits);
int lntb_op_db_clear_mask(struct ntbf_adapter_h *h, uint64_t bits);
int lntb_op_peer_db_set(struct ntbf_adapter_h *h, uint32_t peer, uint64_t bits);
int lntb_op_spad_read(struct ntbf_adapter_h *h, uint32_t idx, uint32_t *val);
int lntb_op_spad_write(struct ntbf_adapter_h *h, uint32_t idx, uint32_t val);
int lntb_op_peer_spad_read(struct ntbf_adapter_h *h, uint32_t peer, uint32_t idx, uint32_t *val);
int lntb_op_peer_spad_write(struct ntbf_adapter_h *h, uint32_t peer, uint32_t idx, uint32_t val);
int lntb_op_peer_msg_write(struct ntbf_adapter_h *h, uint32_t peer, uint32_t midx, uint32_t val);
int lntb_op_msg_read(struct ntbf_adapter_h *h, uint32_t midx, uint32_t *peer, uint32_t *val);
int lntb_op_irq_alloc(struct ntbf_adapter_h *h, struct ntbf_irq *out);
int lntb_op_irq_free(struct ntbf_adapter_h *h, struct ntbf_irq *irq);
int lntb_op_irq_trigger(struct ntbf_adapter_h *h, uint64_t addr, uint32_t data);
int lntb_op_host_map(struct ntbf_adapter_h *h, uint64_t addr, uint64_t size, void **out);
int lntb_op_host_unmap(struct ntbf_adapter_h *h, void *addr, uint64_t size);
int lntb_op_host_bus(struct ntbf_adapter_h *h, const void *addr, uint64_t size, uint64_t *bus);
/* The host's own devices of the cluster file that are not VFIO's (b: the linux-ntb backend):
 * config space and BAR placement through sysfs under the backend's root. */
int lntb_op_cfg_read(struct ntbf_backend *b, uint32_t device, uint32_t f, uint32_t off,
                     uint32_t size, uint32_t *val);
int lntb_op_cfg_write(struct ntbf_backend *b, uint32_t device, uint32_t f, uint32_t off,
                      uint32_t size, uint32_t val);
int lntb_op_dev_bars(struct ntbf_backend *b, uint32_t device, uint32_t f, uint64_t addr[6],
                     uint64_t size[6]);
int lntb_op_serve(struct ntbf_adapter_h *h, uint64_t client, const void *req, size_t reqlen,
                  void *ans, size_t anslen, size_t *got, int *fds, unsigned maxfds, unsigned *nfds);
void lntb_op_client_gone(struct ntbf_adapter_h *h, uint64_t client);

/* The vtable (ops.c), and the backend's name in the registry. */
extern const struct ntbf_backend_ops ntbf__linux_ntb_ops;

#endif
