/* ntbfab/backend.h: the vtable an NTB backend implements, and the registry of backends. */
#ifndef NTBFAB_BACKEND_H
#define NTBFAB_BACKEND_H

#include "topology.h"

/*
 * A backend only programs hardware: translation slots, requester IDs, doorbells,
 * scratchpads, multicast groups, DMA engines, host interrupts, link state. It never
 * decides policy or budgets: the core does (budget.h) and tells it what to program.
 *
 * Read this file top to bottom to know what to implement. ntbf_backend_ops_valid()
 * states the rules: which callbacks are mandatory, which optional, which come in pairs
 * or groups. docs/writing-a-backend.md walks through the simulated backend as the
 * worked example; tests/conformance holds every backend to the same behaviour.
 *
 * Objects:
 *   struct ntbf_backend    one process's connection to a fabric instance (open/close)
 *   struct ntbf_adapter_h  one adapter of that fabric opened by this process (probe/release)
 * Adapters are identified by their index in the cluster topology; a backend maps that to
 * its hardware (a PCI device, a switch partition, a simulated adapter).
 *
 * Every callback returns 0 or a negative error (ntbfab/error.h): -EINVAL for bad
 * arguments, -ENOSPC when a hardware table is full, -ENOTCONN when the link is down,
 * NTBF_EUNSUPPORTED for an operation the hardware cannot do.
 *
 * "port" always means a cable port of the adapter (links are per port); "peer" means
 * another adapter, by topology index, that this adapter reaches (directly or through
 * switches): doorbells, scratchpads and messages go to a peer adapter.
 */

struct ntbf_backend;
struct ntbf_adapter_h;

/* Where a process attaches: the cluster, an instance directory, and who it acts as. */
struct ntbf_backend_env {
        const struct ntbf_topo *topo; /* finalized */
        const char *dir;              /* instance directory (the simulated fabric lives here) */
        uint32_t node;                /* node this process acts as; NTBF_NONE: any (tools, tests) */
};

/* ---- capabilities ----------------------------------------------------------------------- */

enum ntbf_cap_flags {
        NTBF_CAP_XLAT_OUTBOUND = 1u << 0, /* xlat_set works: the window owner programs slots */
        NTBF_CAP_XLAT_INBOUND = 1u << 1,  /* peer_xlat_set works: the buffer owner programs */
        NTBF_CAP_RID_TABLE = 1u << 2,     /* the requester-ID table is programmable */
        NTBF_CAP_CPU_MAP = 1u << 3,       /* window ranges can be mapped into the process */
        NTBF_CAP_MEM = 1u << 4,           /* local memory can be allocated for export */
        NTBF_CAP_DOORBELL = 1u << 5,
        NTBF_CAP_SCRATCHPAD = 1u << 6,
        NTBF_CAP_MESSAGE = 1u << 7,
        NTBF_CAP_MCAST = 1u << 8,       /* multicast overlays and group translation */
        NTBF_CAP_DMA = 1u << 9,         /* a DMA engine */
        NTBF_CAP_SWITCH_RID = 1u << 10, /* switch port requester tables are programmable */
        NTBF_CAP_IRQ = 1u << 11,        /* host interrupt vectors for device MSI/MSI-X */
        NTBF_CAP_FAULT = 1u << 12,      /* fault injection (the simulated fabric) */
        NTBF_CAP_IOMMU = 1u << 13,      /* the host IOMMU translates inbound traffic */
        NTBF_CAP_DEV_IOMMU = 1u << 14,  /* local devices can be isolated (dev_isolate group) */
};

struct ntbf_caps {
        uint32_t flags;       /* enum ntbf_cap_flags */
        uint32_t ports;       /* cable ports */
        uint64_t window_base; /* the window in the host's physical address space */
        uint64_t window_size;
        uint32_t lut_entries;    /* translation slots the window is split into */
        uint64_t lut_entry_size; /* window_size / lut_entries */
        uint64_t xlat_align;     /* alignment of a slot's far-side address */
        uint32_t addr_bits;      /* width of far-side addresses */
        uint32_t rid_table;      /* requester-ID entries (0: no table, nothing enforced) */
        uint32_t rid_reserved;   /* entries the host's CPU holds */
        uint64_t db_valid_mask;  /* usable doorbell bits */
        uint32_t db_vectors;
        uint32_t scratchpads;
        uint32_t messages;
        uint32_t mcast_groups; /* groups the fabric this adapter sits on supports */
        uint32_t dma_channels;
        uint64_t dma_max_len; /* longest single DMA transfer */
        uint32_t dma_align;   /* required alignment of DMA addresses and lengths */
};

/* ---- events ----------------------------------------------------------------------------- */

/*
 * Events reach the owner of an adapter handle through these callbacks, registered with
 * set_events. They run only inside process_events, in the caller's thread: the caller
 * polls event_fd (e.g. in a libuv loop) and calls process_events when it is readable.
 */
struct ntbf_event_ops {
        void (*link_event)(void *ctx, uint32_t port, bool up); /* re-query with link_state */
        void (*db_event)(void *ctx, uint32_t vector, uint64_t bits);
        void (*msg_event)(void *ctx, uint32_t peer, uint32_t midx, uint32_t value);
        void (*reset_event)(void *ctx); /* the adapter was reset: everything reprogrammed lost */
};

/* ---- translation, requester IDs, memory --------------------------------------------------- */

/*
 * Where a translation slot sends accesses. The fabric routes them from this adapter to
 * dst_adapter along the static least-latency route (switch routing is static; failover
 * means using another slot or adapter, article 6.3).
 */
struct ntbf_xlat {
        uint32_t dst_node;    /* destination host */
        uint32_t dst_adapter; /* adapter through which it enters the destination host */
        uint64_t addr;        /* far-side address (xlat_align aligned), in the destination's
                                 inbound domain (its IOVA space if it has an IOMMU); for a
                                 multicast group, the offset in the group's space */
        uint32_t mcast_group; /* NTBF_NONE, or a multicast group (dst_* then unused) */
};

/* A requester-ID table entry: routing IDs r with (r & mask) == (rid & mask). */
struct ntbf_rid {
        uint32_t node; /* host of the requester */
        uint16_t rid;  /* bus << 8 | device << 3 | function */
        uint16_t mask; /* 0xffff one function, 0xfff8 all functions, 0xff00 the whole bus */
};

/* Memory allocated for export: contiguous in the host's physical (bus) address space. */
struct ntbf_mem {
        void *addr; /* mapped in this process */
        uint64_t size;
        uint64_t bus_addr; /* physical address in the host */
        int fd;            /* a file descriptor other local processes can map, or -1;
                              owned by the allocation (mem_free closes it) */
        uint64_t offset;   /* offset of the memory in fd */
};

/* A host interrupt vector: a device's MSI write of data to addr signals fd. */
struct ntbf_irq {
        uint64_t addr; /* MSI address in the host */
        uint32_t data; /* MSI data */
        int fd;        /* eventfd, readable (counter) after each interrupt */
        uint32_t id;
};

enum ntbf_map_flags {
        NTBF_MAP_READONLY = 1u << 0,
        NTBF_MAP_UNCACHED = 1u << 1, /* device registers: no write combining */
};

struct ntbf_counters {
        uint64_t tx, rx;            /* transactions out through / in through the adapter */
        uint64_t drop_no_rid;       /* requester missing from a requester-ID table */
        uint64_t drop_unprogrammed; /* window access to a slot with no translation */
        uint64_t drop_link_down;    /* link down on the way */
        uint64_t master_abort;      /* address claimed by nothing on the far side */
        uint64_t iommu_fault;       /* far-side IOMMU had no mapping */
};

enum ntbf_fault_kind {
        NTBF_FAULT_LINK_DOWN,
        NTBF_FAULT_LINK_UP,
        NTBF_FAULT_ADAPTER_RESET,
        NTBF_FAULT_HOST_DEATH, /* the host stops answering: its links go down, memory lost */
        NTBF_FAULT_HOST_REVIVE,
};

struct ntbf_fault {
        enum ntbf_fault_kind kind;
        uint32_t obj; /* link, adapter or node index */
};

/* ---- the vtable ------------------------------------------------------------------------- */

struct ntbf_backend_ops {
        const char *name;

        /* Instance and adapters (mandatory). */
        int (*open)(const struct ntbf_backend_env *env, struct ntbf_backend **out);
        void (*close)(struct ntbf_backend *b);
        int (*probe)(struct ntbf_backend *b, uint32_t adapter, struct ntbf_adapter_h **out);
        void (*release)(struct ntbf_adapter_h *h);
        int (*caps)(struct ntbf_adapter_h *h, struct ntbf_caps *out);

        /* Link (mandatory). */
        int (*link_state)(struct ntbf_adapter_h *h, uint32_t port, bool *up);
        int (*link_enable)(struct ntbf_adapter_h *h, uint32_t port);
        int (*link_disable)(struct ntbf_adapter_h *h, uint32_t port);

        /* Events (mandatory). */
        int (*set_events)(struct ntbf_adapter_h *h, const struct ntbf_event_ops *ops, void *ctx);
        int (*event_fd)(struct ntbf_adapter_h *h);
        /* Dispatch what happened since the last call; returns how many events, or < 0. */
        int (*process_events)(struct ntbf_adapter_h *h);

        /* Translation: at least one of the two pairs. */
        int (*xlat_set)(struct ntbf_adapter_h *h, uint32_t slot, const struct ntbf_xlat *x);
        int (*xlat_clear)(struct ntbf_adapter_h *h, uint32_t slot);
        /* Inbound: program slot of peer_adapter's window to reach local_addr of this host. */
        int (*peer_xlat_set)(struct ntbf_adapter_h *h, uint32_t peer_adapter, uint32_t slot,
                             uint64_t local_addr);
        int (*peer_xlat_clear)(struct ntbf_adapter_h *h, uint32_t peer_adapter, uint32_t slot);
        /* Optional: read a slot back (conformance and diagnostics). */
        int (*xlat_get)(struct ntbf_adapter_h *h, uint32_t slot, struct ntbf_xlat *x, bool *valid);

        /* Requester IDs of this host's requesters leaving through the adapter (pair).
         * -EEXIST: the entry is already there; -ENOENT: deleting an absent entry; the
         * rid_reserved entries of the host's CPU cannot be deleted (-EPERM). */
        int (*rid_add)(struct ntbf_adapter_h *h, const struct ntbf_rid *r);
        int (*rid_del)(struct ntbf_adapter_h *h, const struct ntbf_rid *r);
        /* Switch port requester tables (pair): register r on every connected port of sw. */
        int (*switch_rid_add)(struct ntbf_adapter_h *h, uint32_t sw, const struct ntbf_rid *r);
        int (*switch_rid_del)(struct ntbf_adapter_h *h, uint32_t sw, const struct ntbf_rid *r);

        /* CPU access to the window (pair): the mapping is direct, no software on the path. */
        int (*map_window)(struct ntbf_adapter_h *h, uint64_t offset, uint64_t size, unsigned flags,
                          void **addr);
        int (*unmap_window)(struct ntbf_adapter_h *h, void *addr, uint64_t size);
        /*
         * A posted write of len bytes at offset of the window, as this host's CPU issues it
         * (optional; needs the map_window pair). It reaches what a direct mapping cannot:
         * the far host's MSI range (an interrupt: how SISCI triggers a remote interrupt) and
         * multicast groups (replicated to every member). Hardware backends store through a
         * mapping; the simulated fabric routes the write. Returns once the write is issued;
         * a write dropped on the way is counted on the adapter like any posted write (a
         * backend that learns the drop reason may return it, as the sim does). -EINVAL when
         * [offset, offset + len) is empty or leaves the window.
         */
        int (*window_write)(struct ntbf_adapter_h *h, uint64_t offset, const void *buf,
                            uint64_t len);

        /* Local memory for export (pair). */
        int (*mem_alloc)(struct ntbf_adapter_h *h, uint64_t size, uint64_t align,
                         struct ntbf_mem *out);
        int (*mem_free)(struct ntbf_adapter_h *h, struct ntbf_mem *m);
        /*
         * Memory for export by its bus address (pair, optional; needs mem_alloc): map
         * [bus_addr, bus_addr + size) of what any process of this host allocated with
         * mem_alloc into this process. It is how a second process of the host reaches a
         * segment the first exported (SISCI's connections within a host) without the first
         * passing it a file descriptor. -EFAULT when the range is not live memory for export.
         */
        int (*mem_map)(struct ntbf_adapter_h *h, uint64_t bus_addr, uint64_t size, void **addr);
        int (*mem_unmap)(struct ntbf_adapter_h *h, void *addr, uint64_t size);

        /* Doorbells (group: all or none). */
        int (*db_read)(struct ntbf_adapter_h *h, uint64_t *bits);
        int (*db_clear)(struct ntbf_adapter_h *h, uint64_t bits);
        int (*db_set_mask)(struct ntbf_adapter_h *h, uint64_t bits);
        int (*db_clear_mask)(struct ntbf_adapter_h *h, uint64_t bits);
        int (*peer_db_set)(struct ntbf_adapter_h *h, uint32_t peer, uint64_t bits);

        /* Scratchpads (group). */
        int (*spad_read)(struct ntbf_adapter_h *h, uint32_t idx, uint32_t *val);
        int (*spad_write)(struct ntbf_adapter_h *h, uint32_t idx, uint32_t val);
        int (*peer_spad_read)(struct ntbf_adapter_h *h, uint32_t peer, uint32_t idx, uint32_t *val);
        int (*peer_spad_write)(struct ntbf_adapter_h *h, uint32_t peer, uint32_t idx, uint32_t val);

        /* Messages (pair, optional): delivered as msg_event on the peer. */
        int (*peer_msg_write)(struct ntbf_adapter_h *h, uint32_t peer, uint32_t midx, uint32_t val);
        int (*msg_read)(struct ntbf_adapter_h *h, uint32_t midx, uint32_t *peer, uint32_t *val);

        /* Multicast (group, optional): receive group traffic into local memory. */
        int (*mcast_join)(struct ntbf_adapter_h *h, uint32_t group, uint64_t local_addr,
                          uint64_t size);
        int (*mcast_leave)(struct ntbf_adapter_h *h, uint32_t group);

        /* DMA engine (pair, optional). Addresses are in the host's physical space. */
        int (*dma_submit)(struct ntbf_adapter_h *h, uint32_t chan, uint64_t src, uint64_t dst,
                          uint64_t len, uint64_t cookie);
        /* Completed cookies (and their status: 0 or a negative error), oldest first. */
        int (*dma_poll)(struct ntbf_adapter_h *h, uint32_t chan, uint64_t *cookies, int *status,
                        unsigned max);

        /*
         * The host's IOMMU for inbound NTB traffic (pair, optional): inbound accesses to
         * iova reach local physical address phys (4 KiB pages). This is what makes a
         * borrower's scattered pages contiguous behind one DMA window (article 4.3).
         */
        int (*iommu_map)(struct ntbf_adapter_h *h, uint64_t iova, uint64_t phys, uint64_t len);
        int (*iommu_unmap)(struct ntbf_adapter_h *h, uint64_t iova, uint64_t len);

        /*
         * Lender-side isolation (group, optional): put a local device (every function
         * matching r) in its own IOMMU domain, where its DMA reaches only what is mapped
         * there (article 4.3 and 8.1); iova -> phys, 4 KiB pages. Without isolation a
         * device's DMA addresses are host-physical.
         */
        int (*dev_isolate)(struct ntbf_adapter_h *h, const struct ntbf_rid *r, bool on);
        int (*dev_iommu_map)(struct ntbf_adapter_h *h, const struct ntbf_rid *r, uint64_t iova,
                             uint64_t phys, uint64_t len);
        int (*dev_iommu_unmap)(struct ntbf_adapter_h *h, const struct ntbf_rid *r, uint64_t iova,
                               uint64_t len);

        /* Host interrupt vectors (pair, optional). */
        int (*irq_alloc)(struct ntbf_adapter_h *h, struct ntbf_irq *out);
        int (*irq_free)(struct ntbf_adapter_h *h, struct ntbf_irq *irq);

        /* Reset and counters (mandatory): reset clears slots, requester IDs (but the
         * reserved), doorbells, masks, scratchpads, and delivers reset_event. */
        int (*reset)(struct ntbf_adapter_h *h);
        int (*counters)(struct ntbf_adapter_h *h, struct ntbf_counters *out);

        /* Fault injection (optional, simulated fabrics). */
        int (*fault)(struct ntbf_backend *b, const struct ntbf_fault *f);
};

/*
 * Check a vtable: mandatory callbacks present, pairs complete, groups all-or-none, and
 * at least one translation pair. Returns true, or false with the first broken rule
 * written to why (e.g. "rid_add without rid_del").
 */
NTBF_EXPORT bool ntbf_backend_ops_valid(const struct ntbf_backend_ops *ops, char *why,
                                        size_t whylen);

/* The registered backends, by name ("sim", ...); NULL if unknown. */
NTBF_EXPORT const struct ntbf_backend_ops *ntbf_backend_find(const char *name);
/* Iterate the registry: NULL past the end. */
NTBF_EXPORT const struct ntbf_backend_ops *ntbf_backend_at(size_t i);

#endif
