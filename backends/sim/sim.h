/* backends/sim/sim.h: internals of the simulated fabric shared by its source files. */
#ifndef NTBF_SIM_SIM_H
#define NTBF_SIM_SIM_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ntbfab/backend.h"
#include "ntbfab/error.h"
#include "ntbfab/sim.h"
#include "layout.h"

#define SIM_DIR_MAX   3840
#define SIM_OBJ_MAGIC UINT64_C(0x6a624f6d69536254) /* marks a struct ntbf_sim in memory */

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* A backing file of this process: opened and mapped whole on first use, kept until close. */
struct sim_file {
        _Atomic(uint8_t *) base;
        uint64_t size;
        int fd;
};

/* Kinds of backing files (a CPU mapping run names one). */
enum sim_file_kind {
        SF_RAM,
        SF_BAR,
        SF_VFBAR,
        SF_ONES,
        SF_MCPOST, /* an adapter's multicast post buffer, window-sized (docs/sim.md) */
};

/* A piece of a CPU window mapping and the memory behind it. */
struct sim_run {
        uint64_t off, len; /* within the mapping */
        enum sim_file_kind kind;
        uint32_t obj;  /* node (RAM), device * NTBF_MAX_BARS + bar (BAR, VF BAR), adapter */
        uint64_t foff; /* offset in the file */
};

struct sim_mapping {
        struct sim_mapping *next;
        uint8_t *addr;
        uint32_t adapter;
        uint64_t base, size; /* in the host's physical address space (a window's range) */
        uint64_t post;       /* offset of base in the adapter's multicast post buffer */
        unsigned flags;
        struct sim_run *runs;
        uint32_t nruns, cap;
};

/* An interrupt vector allocated by this process. */
struct sim_vec {
        struct sim_vec *next;
        uint32_t node, id, gen;
        int fd;
};

struct ntbf_adapter_h {
        struct ntbf_adapter_h *next;
        struct ntbf_sim *s;
        uint32_t adapter;
        int efd;
        /* Set by set_events; read by process_events in the owner's thread. */
        const struct ntbf_event_ops *ops;
        void *ctx;
        _Atomic uint32_t watch_seq; /* adapter event_seq last signalled by the watcher */
        uint32_t seen_db_seq, seen_reset_seq;
        bool seen_up[NTBF_MAX_ADAPTER_PORTS];
};

/* One process's attachment to an instance: the sim's struct ntbf_backend. */
struct ntbf_sim {
        uint64_t magic;
        const struct ntbf_topo *t;
        char dir[SIM_DIR_MAX]; /* leaves room for file names in PATH_MAX */
        uint32_t node;         /* the node this process acts as, or NTBF_NONE */
        int ctl_fd;
        uint8_t *ctl; /* the control file */
        uint64_t ctl_size;
        struct sim_hdr *hdr;
        struct sim_node *nodes;
        struct sim_adapter *ad;
        struct sim_switch *sw;
        struct sim_link *links;
        struct sim_route *routes;
        struct ntbf_hop *hops;
        struct sim_func *funcs;
        uint32_t *func_first; /* per device: index of its function 0 in funcs */

        /* Backing files, mapped lazily: the only syscalls a transaction may make. */
        pthread_mutex_t file_lock;
        struct sim_file *ram;    /* per node */
        struct sim_file *bar;    /* per device * NTBF_MAX_BARS */
        struct sim_file *vfbar;  /* per device * NTBF_MAX_BARS */
        struct sim_file *mcpost; /* per adapter: CPU stores into its multicast slots */
        struct sim_file *iommu;  /* per node */
        int ones_fd;             /* a file of all-ones bytes for broken window ranges */
        uint64_t ones_size;

        /* Process-local state: handles, mappings, vectors, the watcher thread. */
        pthread_mutex_t lock;
        struct ntbf_adapter_h *handles;
        struct sim_mapping *maps;
        struct sim_vec *vecs;
        pthread_t watcher;
        bool watcher_running;
        _Atomic uint32_t kick; /* private futex: wakes the watcher to rebuild or quit */
        _Atomic bool quit;
        uint32_t seen_change;
        int pid;
        uint64_t start; /* this process's start time */
};

/* ---- small helpers ----------------------------------------------------------------------- */

static inline void *sim_at(const struct ntbf_sim *s, uint64_t off)
{
        return s->ctl + off;
}
static inline _Atomic uint64_t *sim_slots(const struct ntbf_sim *s, uint32_t a)
{
        return sim_at(s, s->ad[a].off_slots);
}
/* Where window w of adapter a starts in its multicast post buffer (mcpost.c): the windows
 * one after the other, window 0 first. */
static inline uint64_t sim_post_off(const struct ntbf_adapter *a, const struct ntbf_window *w)
{
        uint64_t off = 0;
        for (const struct ntbf_window *x = a->win; x < w; x++)
                off += x->size;
        return off;
}
/* All windows of adapter a: the size of its post buffer. */
static inline uint64_t sim_post_size(const struct ntbf_adapter *a)
{
        return a->nwin ? sim_post_off(a, &a->win[a->nwin - 1]) + a->win[a->nwin - 1].size : 0;
}
static inline _Atomic uint64_t *sim_xsize(const struct ntbf_sim *s, uint32_t a)
{
        return sim_at(s, s->ad[a].off_xsize);
}
/* Slot k of adapter a as one consistent (entry, size) pair (layout.h). */
static inline uint64_t sim_slot_read(const struct ntbf_sim *s, uint32_t a, uint32_t k,
                                     uint64_t *size)
{
        const _Atomic uint64_t *e = &sim_slots(s, a)[k], *z = &sim_xsize(s, a)[k];
        for (;;) {
                uint64_t e1 = atomic_load_explicit(e, memory_order_acquire);
                uint64_t n = atomic_load_explicit(z, memory_order_acquire);
                if (atomic_load_explicit(e, memory_order_acquire) == e1) {
                        *size = n;
                        return e1;
                }
        }
}
static inline _Atomic uint64_t *sim_rids(const struct ntbf_sim *s, uint32_t a)
{
        return sim_at(s, s->ad[a].off_rids);
}
static inline _Atomic uint64_t *sim_swrids(const struct ntbf_sim *s, uint32_t sw, uint32_t port)
{
        return (_Atomic uint64_t *)sim_at(s, s->sw[sw].off_rids) + (uint64_t)port * s->sw[sw].nrids;
}
static inline _Atomic uint32_t *sim_spads(const struct ntbf_sim *s, uint32_t a)
{
        return sim_at(s, s->ad[a].off_spads);
}
static inline _Atomic uint64_t *sim_msgs(const struct ntbf_sim *s, uint32_t a)
{
        return sim_at(s, s->ad[a].off_msgs);
}
static inline struct sim_dmachan *sim_dma(const struct ntbf_sim *s, uint32_t a, uint32_t c)
{
        return (struct sim_dmachan *)sim_at(s, s->ad[a].off_dma) + c;
}
static inline struct sim_mcrec *sim_mc(const struct ntbf_sim *s, uint32_t a, uint32_t g)
{
        return (struct sim_mcrec *)sim_at(s, s->ad[a].off_mcast) + g;
}
static inline const struct sim_route *sim_route(const struct ntbf_sim *s, uint32_t a, uint32_t d)
{
        return &s->routes[(uint64_t)a * s->hdr->nadapters + d];
}

void ntbf__sim_futex_bump(struct sim_futex *f);
/* Wait while *word == val, at most timeout_ns (0: forever); private: process-local word. */
void ntbf__sim_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t timeout_ns, bool private);
uint64_t ntbf__sim_now_ns(void);
/* Start time of a process (clock ticks after boot), 0 if it does not exist or is a zombie. */
uint64_t ntbf__sim_proc_start(int pid);
bool ntbf__sim_owner_alive(int pid, uint64_t start);
/* Lock a robust mutex; after a previous owner's death, run recover(arg) and continue. */
void ntbf__sim_lock(struct ntbf_sim *s, pthread_mutex_t *m, void (*recover)(void *), void *arg);
void ntbf__sim_unlock(pthread_mutex_t *m);
int ntbf__sim_mutex_init(pthread_mutex_t *m);

/* Routing changed: wake the watchers that remap CPU windows (and remap ours now). */
void ntbf__sim_changed(struct ntbf_sim *s);
/* Something adapter a's handle owners must see (doorbell, message, link, reset). */
void ntbf__sim_adapter_event(struct ntbf_sim *s, uint32_t a);

/* ---- files (fabric.c) ---------------------------------------------------------------------- */

uint8_t *ntbf__sim_file_slow(struct ntbf_sim *s, enum sim_file_kind kind, uint32_t obj);
static inline struct sim_file *sim_file_rec(struct ntbf_sim *s, enum sim_file_kind kind,
                                            uint32_t obj)
{
        return kind == SF_RAM     ? &s->ram[obj]
               : kind == SF_BAR   ? &s->bar[obj]
               : kind == SF_VFBAR ? &s->vfbar[obj]
                                  : &s->mcpost[obj];
}
static inline uint8_t *sim_file(struct ntbf_sim *s, enum sim_file_kind kind, uint32_t obj)
{
        struct sim_file *f = sim_file_rec(s, kind, obj);
        uint8_t *p = atomic_load_explicit(&f->base, memory_order_acquire);
        return likely(p) ? p : ntbf__sim_file_slow(s, kind, obj);
}
int ntbf__sim_file_fd(struct ntbf_sim *s, enum sim_file_kind kind, uint32_t obj);
const char *ntbf__sim_file_name(const struct ntbf_sim *s, enum sim_file_kind kind, uint32_t obj,
                                char *buf, size_t len);
/* Offset of RAM physical address addr (in region r) in the node's RAM file. */
uint64_t ntbf__sim_ram_off(const struct ntbf_sim *s, uint32_t node, const struct ntbf_region *r,
                           uint64_t addr);
int ntbf__sim_ones_fd(struct ntbf_sim *s, uint64_t need);
/* The replication of CPU stores into multicast slots (mcpost.c, run by the device host). */
struct ntbf__sim_mcpost;
struct ntbf__sim_mcpost *ntbf__sim_mcpost_new(struct ntbf_sim *s);
void ntbf__sim_mcpost_free(struct ntbf__sim_mcpost *m);
/* One pass over every multicast slot: sends what changed; returns the bytes sent. */
uint64_t ntbf__sim_mcpost_run(struct ntbf__sim_mcpost *m);
/* Forget what was posted into window range [off, off + len) of adapter a (a slot changed). */
void ntbf__sim_mcpost_forget(struct ntbf_sim *s, uint32_t a, uint64_t off, uint64_t len);

/* ---- routing (route.c) ------------------------------------------------------------------- */

/* Where one piece of a transaction goes. */
struct sim_hit {
        int err;          /* 0 or the drop reason */
        uint32_t drop_on; /* adapter counting err, NTBF_NONE */
        uint32_t out, in; /* adapters crossed (NTBF_NONE when local) */
        uint32_t node;    /* host where it lands */
        uint64_t addr;    /* physical address there */
        uint64_t len;     /* bytes of this piece */
        enum ntbf_region_kind kind;
        enum sim_file_kind fkind; /* RAM, BAR, VF BAR: the backing file */
        uint32_t fobj;
        uint64_t foff;
        uint32_t latency_ns;
        uint32_t group;      /* multicast: the group, else NTBF_NONE */
        uint64_t goff;       /* multicast: offset in the group */
        uint32_t fault_func; /* isolated function whose domain refused it, else NTBF_NONE */
};

/*
 * Route the first bytes of a transaction: fills h with the piece that starts at addr
 * (at most len bytes). A multicast slot is returned as group/goff and is landed member by
 * member by the caller. cpu_map: resolving a CPU mapping (no counters).
 */
void ntbf__sim_route(struct ntbf_sim *s, uint32_t node, uint32_t device, uint16_t rid,
                     uint64_t addr, uint64_t len, bool write, bool count, struct sim_hit *h);
/* Land addr of node's inbound domain, entered through adapter in (IOMMU, BARs, RAM, MSI). */
void ntbf__sim_inbound(struct ntbf_sim *s, uint32_t in, uint64_t addr, uint64_t len,
                       struct sim_hit *h);
/* Check the route a -> d for requester (node, rid): 0 or the drop reason. */
int ntbf__sim_route_ok(struct ntbf_sim *s, uint32_t a, uint32_t d, uint32_t node, uint16_t rid);
bool ntbf__sim_rid_ok(struct ntbf_sim *s, uint32_t a, uint32_t node, uint16_t rid);
int ntbf__sim_xfer(struct ntbf_sim *s, uint32_t node, uint32_t device, uint16_t rid, uint64_t addr,
                   void *buf, size_t len, bool write, struct ntbf_sim_trace *tr);
/* Build the static route table at creation. */
int ntbf__sim_routes_build(const struct ntbf_topo *t, struct sim_route **routes,
                           struct ntbf_hop **hops, uint32_t *nhops);

/* ---- interrupts (irq.c) -------------------------------------------------------------------- */

void ntbf__sim_msi(struct ntbf_sim *s, uint32_t node, uint32_t data);
void ntbf__sim_irq_recover(void *node);
int ntbf__sim_irq_alloc(struct ntbf_sim *s, uint32_t node, struct ntbf_irq *out);
int ntbf__sim_irq_free(struct ntbf_sim *s, uint32_t node, struct ntbf_irq *irq);
/* Watcher: hand pending interrupts of this process's vectors to their eventfds. */
void ntbf__sim_irq_deliver(struct ntbf_sim *s);
void ntbf__sim_irq_close(struct ntbf_sim *s);
/* Free the vectors of dead owners on node; returns how many. */
uint32_t ntbf__sim_irq_reap(struct ntbf_sim *s, uint32_t node);

/* ---- memory (mem.c) ---------------------------------------------------------------------- */

void ntbf__sim_mem_recover(void *node);
int ntbf__sim_mem_alloc(struct ntbf_sim *s, uint32_t node, uint64_t size, uint64_t align,
                        struct ntbf_mem *out);
int ntbf__sim_mem_free(struct ntbf_sim *s, uint32_t node, struct ntbf_mem *m);
uint32_t ntbf__sim_mem_reap(struct ntbf_sim *s, uint32_t node);
/* Whether [base, base + size) lies inside one live allocation of node. */
bool ntbf__sim_mem_live(struct ntbf_sim *s, uint32_t node, uint64_t base, uint64_t size);
/* host_bus: the bus address of [addr, addr + size) of this process, a mapping of one of the
 * node's RAM or BAR files (the backend's own, or another of the RAM file); -EFAULT if none. */
int ntbf__sim_host_bus(struct ntbf_sim *s, uint32_t node, const void *addr, uint64_t size,
                       uint64_t *bus);
/* Forget everything of a dead host (revival): records cleared, RAM zeroed. */
void ntbf__sim_node_wipe(struct ntbf_sim *s, uint32_t node);

/* ---- IOMMU (iommu.c) ----------------------------------------------------------------------- */

int ntbf__sim_iommu_map(struct ntbf_sim *s, uint32_t node, uint64_t iova, uint64_t phys,
                        uint64_t len);
int ntbf__sim_iommu_unmap(struct ntbf_sim *s, uint32_t node, uint64_t iova, uint64_t len);
/* Physical address for iova, or UINT64_MAX when unmapped. */
uint64_t ntbf__sim_iommu_lookup(struct ntbf_sim *s, uint32_t node, uint64_t iova);
void ntbf__sim_iommu_wipe(struct ntbf_sim *s, uint32_t node);
/* Any domain: 0 .. nnodes-1 hosts, nnodes + k device function k's isolation domain. */
int ntbf__sim_dom_map(struct ntbf_sim *s, uint32_t dom, uint64_t iova, uint64_t phys, uint64_t len);
int ntbf__sim_dom_unmap(struct ntbf_sim *s, uint32_t dom, uint64_t iova, uint64_t len);
uint64_t ntbf__sim_dom_lookup(struct ntbf_sim *s, uint32_t dom, uint64_t iova);
/* Call fn for every mapped page of domain dom, in IOVA order. */
void ntbf__sim_dom_each(struct ntbf_sim *s, uint32_t dom,
                        void (*fn)(void *arg, uint64_t iova, uint64_t phys), void *arg);
void ntbf__sim_dom_wipe(struct ntbf_sim *s, uint32_t dom);
/* The function index of device's requester rid, or NTBF_NONE. */
uint32_t ntbf__sim_func_of(const struct ntbf_sim *s, uint32_t device, uint16_t rid);
/* The function of any of node's devices with routing ID rid, or NTBF_NONE. */
uint32_t ntbf__sim_func_by_rid(const struct ntbf_sim *s, uint32_t node, uint16_t rid);
/* Address an isolated function's DMA at addr reaches in its host, or UINT64_MAX (fault). */
uint64_t ntbf__sim_dev_translate(struct ntbf_sim *s, uint32_t func, uint64_t addr);
int ntbf__sim_dev_isolate(struct ntbf_sim *s, const struct ntbf_rid *r, bool on);
int ntbf__sim_dev_map(struct ntbf_sim *s, const struct ntbf_rid *r, uint64_t iova, uint64_t phys,
                      uint64_t len, bool map);

/* ---- multicast (mcast.c) ----------------------------------------------------------------- */

int ntbf__sim_mcast_join(struct ntbf_sim *s, uint32_t a, uint32_t g, uint64_t addr, uint64_t size);
int ntbf__sim_mcast_leave(struct ntbf_sim *s, uint32_t a, uint32_t g);
/* Membership of adapter a in group g: false if not a member. */
bool ntbf__sim_mcast_get(struct ntbf_sim *s, uint32_t a, uint32_t g, uint64_t *addr,
                         uint64_t *size);
void ntbf__sim_mcast_clear(struct ntbf_sim *s, uint32_t a);

/* ---- DMA engines (dma.c) ----------------------------------------------------------------- */

int ntbf__sim_dma_submit(struct ntbf_sim *s, uint32_t a, uint32_t chan, uint64_t src, uint64_t dst,
                         uint64_t len, uint64_t cookie);
int ntbf__sim_dma_poll(struct ntbf_sim *s, uint32_t a, uint32_t chan, uint64_t *cookies,
                       int *status, unsigned max);
/* Engine side: run the pending descriptors of adapter a; returns descriptors done. */
int ntbf__sim_dma_run(struct ntbf_sim *s, uint32_t a, uint8_t *bounce, size_t bounce_len);
void ntbf__sim_dma_recover(void *chan);

/* ---- CPU maps and the watcher (map.c) ---------------------------------------------------- */

int ntbf__sim_map(struct ntbf_sim *s, uint32_t a, uint32_t win, uint64_t offset, uint64_t size,
                  unsigned flags, void **addr);
int ntbf__sim_unmap(struct ntbf_sim *s, uint32_t a, void *addr, uint64_t size);
void ntbf__sim_remap_all(struct ntbf_sim *s);
int ntbf__sim_watcher_need(struct ntbf_sim *s);
void ntbf__sim_watcher_kick(struct ntbf_sim *s);
void ntbf__sim_watcher_stop(struct ntbf_sim *s);
void ntbf__sim_maps_close(struct ntbf_sim *s);

/* ---- operations (ops.c) ------------------------------------------------------------------ */

extern const struct ntbf_backend_ops ntbf__sim_ops;
void ntbf__sim_adapter_reset(struct ntbf_sim *s, uint32_t a);
uint32_t ntbf__sim_mcast_groups(const struct ntbf_topo *t, uint32_t a);
bool ntbf__sim_link_up(struct ntbf_sim *s, uint32_t link);

/* fabric.c */
struct ntbf_sim *ntbf__sim_of(struct ntbf_backend *b);
void ntbf__sim_close(struct ntbf_sim *s);
void ntbf__sim_reserved_rids(struct ntbf_sim *s, uint32_t a);

#endif
