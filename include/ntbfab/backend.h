/* ntbfab/backend.h: the vtable an NTB backend implements, and the registry of backends. */
#ifndef NTBFAB_BACKEND_H
#define NTBFAB_BACKEND_H

#include "topology.h"

NTBF_BEGIN_DECLS

/*
 * A backend only programs hardware: translation slots, requester IDs, doorbells,
 * scratchpads, multicast groups, DMA engines, host interrupts, link state. It never
 * decides policy or budgets: the core does (budget.h) and tells it what to program.
 *
 * Read this file top to bottom to know what to implement. ntbf_backend_ops_valid()
 * states the rules of the vtable: which callbacks are mandatory, which optional, which
 * come in pairs or groups, which need another. ntbf_caps_valid() states the rules of the
 * capabilities: which callbacks a claimed flag needs, which flags exclude each other,
 * what the figures must be. docs/writing-a-backend.md walks through the simulated backend
 * as the worked example; tests/conformance holds every backend to the same behaviour.
 *
 * Objects:
 *   struct ntbf_backend    one process's connection to a fabric instance (open/close)
 *   struct ntbf_adapter_h  one adapter of that fabric opened by this process (probe/release)
 * Adapters are identified by their index in the cluster topology; a backend maps that to
 * its hardware (a PCI device, a switch partition, a simulated adapter).
 *
 * Every callback returns 0 or a negative error (ntbfab/error.h): -EINVAL for bad
 * arguments, -ENOSPC when a hardware table is full, -ENOTCONN when the link is down,
 * NTBF_EUNSUPPORTED for an operation the adapter does not claim. A refused call changes
 * nothing.
 *
 * Words used throughout:
 *   port    a cable port of the adapter, 0 .. caps.ports-1 (links are per port).
 *   peer    another adapter, by its index in the topology, that this adapter reaches
 *           (directly or through switches). Never a port and never a hardware index: a
 *           backend whose hardware numbers its peers (Linux's pidx, 0 .. peer count-1)
 *           maps each to the topology index of the adapter at the other end of the
 *           cluster file's cable. Doorbells, scratchpads and messages go to a peer;
 *           inbound translation programs a peer's window.
 *   window  a range of this host's physical address space (all or part of an NTB BAR)
 *           through which accesses leave for other hosts; an adapter has 1 ..
 *           NTBF_MAX_WINDOWS of them, numbered 0 .. caps.nwindows-1.
 *   slot    one translation of a window (a LUT entry, or the whole window for a direct
 *           window). Slots are numbered per adapter, across its windows: window w holds
 *           slots caps.windows[w].first_slot .. first_slot + slots - 1, in window order.
 *
 * Threads (what a backend must allow, and what it may assume):
 *   - open, close, probe and release are never called concurrently with any other call on
 *     the same backend (open/close) or handle (probe/release); close comes after the
 *     release of every handle. create and destroy run with no backend open on the
 *     instance.
 *   - Every other call may come from any thread of the process, concurrently with calls on
 *     other handles and with calls on the same handle, except: set_events and
 *     process_events of one handle are made from one thread at a time (the handle's event
 *     thread), and one DMA channel is used by one thread at a time (dma_submit and
 *     dma_poll of the same channel are serialized by the caller).
 *   - Event callbacks (struct ntbf_event_ops) run only inside process_events, in the
 *     thread that called it, never from a thread of the backend. A callback may call any
 *     operation of the same handle except process_events, set_events and release (the
 *     daemon reprograms an adapter from its reset_event).
 *   - A backend's own threads (an interrupt watcher, a remapper) may only signal
 *     descriptors and update the backend's state; they never call back.
 */

struct ntbf_backend;
struct ntbf_adapter_h;

/*
 * How a process reaches the process that owns its node's hardware, for backends whose
 * hardware admits one owner (linux-ntb: ntbfab_ntb's character device opens for writing
 * once). The node daemon owns it; the frontends give every other process of the node a relay
 * to it (the daemon's `backend.relay` method, docs/rpc.md). A request and its answer are in
 * the backend's own format: the owner's backend answers it (serve in the vtable).
 *
 * call sends reqlen bytes of req about topology adapter `adapter` and waits: up to anslen
 * bytes of the answer go to ans (*got says how many) and up to maxfds descriptors that came
 * with it to fds (*nfds says how many; the caller owns them). It returns serve's result (0
 * or a negative code), or the relay's own failure (-EPIPE: the daemon is gone; NTBF_ENOTFOUND:
 * none listens). It may be called from any thread.
 */
struct ntbf_backend_relay {
        int (*call)(void *ctx, uint32_t adapter, const void *req, size_t reqlen, void *ans,
                    size_t anslen, size_t *got, int *fds, unsigned maxfds, unsigned *nfds);
        void *ctx;
};

/* Where a process attaches: the cluster, an instance directory, and who it acts as. */
struct ntbf_backend_env {
        const struct ntbf_topo *topo; /* finalized; outlives the backend */
        const char *dir;              /* instance directory (the simulated fabric lives here) */
        uint32_t node;                /* node this process acts as; NTBF_NONE: any (tools, tests) */
        /* NULL: this process owns the hardware it probes (the daemon, a tool that runs without
         * one such as ntbfab-conformance). Else the way to the owner; outlives the backend. */
        const struct ntbf_backend_relay *relay;
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
        NTBF_CAP_IOMMU = 1u << 13,      /* the host IOMMU translates inbound traffic, and
                                           iommu_map programs it */
        NTBF_CAP_DEV_IOMMU = 1u << 14,  /* local devices can be isolated (dev_isolate group) */
        /*
         * No requester-ID table exists on the adapter: every requester of the host passes
         * (Intel, AMD). Excludes NTBF_CAP_RID_TABLE; rid_table is then 0. An adapter that
         * claims neither has a table it cannot program: only its rid_reserved fixed entries
         * (the host's CPU) pass, so no device can reach through it.
         */
        NTBF_CAP_NO_RID_TABLE = 1u << 15,
        /*
         * The kernel owns this host's IOMMU (Linux's NTB framework with an IOMMU on):
         * inbound traffic reaches only memory the kernel mapped for the device, which is
         * what mem_alloc returns (bus_addr is then the address inbound traffic uses, an
         * IOVA). Excludes NTBF_CAP_IOMMU: no iommu_map for this adapter. The core's
         * scattered-page DMA windows (iommu entries) cannot be programmed on such a host;
         * docs/writing-a-backend.md says what the daemon and frontends do instead.
         */
        NTBF_CAP_KERNEL_IOMMU = 1u << 16,
        NTBF_CAP_LINK_CTRL = 1u << 17, /* link_enable/link_disable work */
        NTBF_CAP_RESET = 1u << 18,     /* reset works */
        NTBF_CAP_COUNTERS = 1u << 19,  /* counters reports the hardware's counts */
        /*
         * A managed fabric: the fabric's own software (Dolphin's SmartIO) decides which
         * address a device's DMA uses to reach memory, so device addresses come from dev_map,
         * not from the core's plans (its DMA and MSI windows). The device API then maps the
         * DMA of every device of the fabric through dev_map (docs/writing-a-backend.md,
         * "Managed fabrics").
         */
        NTBF_CAP_DEV_MAP = 1u << 20,
        /*
         * A CPU mapping (map_window) follows its slots: once a slot is programmed again, by
         * either side, stores and loads through a mapping made before reach the new far-side
         * block (conformance map.live). A fact (no callbacks; needs NTBF_CAP_CPU_MAP). Not
         * claimed where a mapping holds what its slots led to when it was made, as on a
         * managed fabric whose mappings are of segments (Dolphin's SISCI, docs/dolphin.md):
         * there a user maps the range again after its slots were programmed again.
         */
        NTBF_CAP_MAP_LIVE = 1u << 21,
        /*
         * Memory for export is this host's physical RAM: mem_alloc's bus_addr is the
         * host-physical address at which the host's own devices DMA (unless isolated) and
         * host_map maps it. The device API then takes the DMA memory of local devices from
         * mem_alloc (ntbf_dma_alloc), and libsisci its segments from that same allocator.
         * Needs mem_alloc and host_map. Claimed by the simulated fabric; not claimed where
         * bus_addr is an address only the NTB uses (linux-ntb: a DMA address of the NTB's
         * device) or where devices reach process memory through VFIO's mappings (ivshmem):
         * there DMA memory is memfd memory and segments come from mem_alloc.
         */
        NTBF_CAP_MEM_PHYS = 1u << 22,
};
/* The highest flag above, for loops over all of them. */
#define NTBF_CAP_LAST NTBF_CAP_MEM_PHYS

/*
 * The windows of an adapter are struct ntbf_window (topology.h): the same figures as the
 * cluster file's, which are those of Linux's ntb_peer_mw_get_addr (base, size) and
 * ntb_mw_get_align (addr_align, size_align, size_max) for one memory window, with slots for
 * windows split by a LUT. xlat_set refuses a window's reserved slots (-EPERM).
 */
struct ntbf_caps {
        uint32_t flags; /* enum ntbf_cap_flags */
        uint32_t ports; /* cable ports */
        uint32_t peers; /* adapters this one reaches (the valid `peer` arguments) */
        uint32_t nwindows;
        struct ntbf_window windows[NTBF_MAX_WINDOWS];
        uint32_t slots;        /* all windows' slots: the last window's first_slot + slots */
        uint32_t addr_bits;    /* width of far-side addresses */
        uint32_t rid_table;    /* requester-ID entries (0 with NTBF_CAP_NO_RID_TABLE) */
        uint32_t rid_reserved; /* entries the host's CPU holds */
        /*
         * Doorbells, scratchpads and messages are registers of this adapter that every
         * peer reaches. The counts below are this adapter's own; a peer has its own
         * counts (its caps), and peer_* calls are checked against the peer's registers:
         * peer_db_set rings bits of the peer's db_valid_mask, peer_spad_* address the
         * peer's scratchpads. On hardware whose peers share one doorbell register
         * (multi-port NTBs), bits are not per peer: the clients partition them.
         */
        uint64_t db_valid_mask; /* usable doorbell bits */
        uint32_t db_vectors;
        uint32_t scratchpads;
        uint32_t messages;
        uint32_t mcast_groups; /* groups the fabric this adapter sits on supports */
        uint32_t dma_channels;
        uint64_t dma_max_len; /* longest single DMA transfer */
        uint32_t dma_align;   /* required alignment of DMA addresses and lengths */
};

/* The window holding adapter slot `slot`, or NULL. */
static inline const struct ntbf_window *ntbf_caps_slot_window(const struct ntbf_caps *c,
                                                              uint32_t slot)
{
        for (uint32_t w = 0; w < c->nwindows && w < NTBF_MAX_WINDOWS; w++)
                if (slot - c->windows[w].first_slot < c->windows[w].slots)
                        return &c->windows[w];
        return NULL;
}

/* The window holding physical address addr (its index; *off the offset in it), or -1. */
static inline int ntbf_caps_addr_window(const struct ntbf_caps *c, uint64_t addr, uint64_t *off)
{
        for (uint32_t w = 0; w < c->nwindows && w < NTBF_MAX_WINDOWS; w++)
                if (addr - c->windows[w].base < c->windows[w].size) {
                        if (off)
                                *off = addr - c->windows[w].base;
                        return (int)w;
                }
        return -1;
}

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
        uint64_t addr;        /* far-side address, in the destination's inbound domain (its
                                 IOVA space if it has an IOMMU); for a multicast group, the
                                 offset in the group's space. A multiple of the window's
                                 addr_align (and of the size rounded up to a power of two
                                 with NTBF_WIN_NATURAL_ALIGN), below 2^addr_bits */
        uint32_t mcast_group; /* NTBF_NONE, or a multicast group (dst_* then unused) */
        uint64_t size;        /* bytes translated from the slot's start: 1 .. size_max, a
                                 multiple of size_align; the rest of the slot is unprogrammed
                                 (accesses there are dropped as drop_unprogrammed) */
};

/* A requester-ID table entry: routing IDs r with (r & mask) == (rid & mask). */
struct ntbf_rid {
        uint32_t node; /* host of the requester */
        uint16_t rid;  /* bus << 8 | device << 3 | function */
        uint16_t mask; /* 0xffff one function, 0xfff8 all functions, 0xff00 the whole bus */
};

/* Memory allocated for export: contiguous in the host's inbound address space. */
struct ntbf_mem {
        void *addr; /* mapped in this process */
        uint64_t size;
        uint64_t bus_addr; /* the address inbound traffic reaches it at: physical, or the IOVA
                              the kernel mapped it at (NTBF_CAP_KERNEL_IOMMU) */
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
        /*
         * *addr is an input: map exactly there (page-aligned), replacing what the caller
         * reserved at [*addr, + size) (SISCI's SCI_FLAG_FIXED_MAP_ADDR; how a backend over
         * another library lays several mappings side by side). unmap_window then unmaps the
         * range as for any mapping; the caller re-reserves it if it wants it back.
         */
        NTBF_MAP_FIXED = 1u << 2,
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

        /*
         * An instance on one machine (pair, optional): the backend can run a whole cluster
         * on this host (`ntbfab up`, the conformance suite). create makes what open needs
         * in dir for the finalized topology t (idempotent for the same topology; another
         * one is NTBF_EEXISTS); destroy removes it. A backend without them opens hardware
         * that exists on its own. why gets a sentence on failure.
         */
        int (*create)(const struct ntbf_topo *t, const char *dir, char *why, size_t whylen);
        int (*destroy)(const struct ntbf_topo *t, const char *dir);

        /* Instance and adapters (mandatory). open writes a sentence to why on failure
         * (what is missing and what would fix it; why may be NULL when whylen is 0). */
        int (*open)(const struct ntbf_backend_env *env, struct ntbf_backend **out, char *why,
                    size_t whylen);
        void (*close)(struct ntbf_backend *b);
        int (*probe)(struct ntbf_backend *b, uint32_t adapter, struct ntbf_adapter_h **out);
        void (*release)(struct ntbf_adapter_h *h);
        int (*caps)(struct ntbf_adapter_h *h, struct ntbf_caps *out);

        /* Link: link_state is mandatory; enable and disable a pair (NTBF_CAP_LINK_CTRL). */
        int (*link_state)(struct ntbf_adapter_h *h, uint32_t port, bool *up);
        int (*link_enable)(struct ntbf_adapter_h *h, uint32_t port);
        int (*link_disable)(struct ntbf_adapter_h *h, uint32_t port);

        /* Events (mandatory). */
        int (*set_events)(struct ntbf_adapter_h *h, const struct ntbf_event_ops *ops, void *ctx);
        int (*event_fd)(struct ntbf_adapter_h *h);
        /* Dispatch what happened since the last call; returns how many events, or < 0. */
        int (*process_events)(struct ntbf_adapter_h *h);

        /* Translation: at least one of the two pairs. slot is adapter-wide (see the top). */
        int (*xlat_set)(struct ntbf_adapter_h *h, uint32_t slot, const struct ntbf_xlat *x);
        int (*xlat_clear)(struct ntbf_adapter_h *h, uint32_t slot);
        /* Inbound: program slot of peer_adapter's window to reach [local_addr, + size) of
         * this host (the same rules as struct ntbf_xlat's addr and size, of the peer's
         * window). */
        int (*peer_xlat_set)(struct ntbf_adapter_h *h, uint32_t peer_adapter, uint32_t slot,
                             uint64_t local_addr, uint64_t size);
        int (*peer_xlat_clear)(struct ntbf_adapter_h *h, uint32_t peer_adapter, uint32_t slot);
        /* Optional: read a slot back (conformance and diagnostics), size included. */
        int (*xlat_get)(struct ntbf_adapter_h *h, uint32_t slot, struct ntbf_xlat *x, bool *valid);

        /*
         * Requester IDs of this host's requesters leaving through the adapter (pair).
         * -EEXIST: the entry is already there; -ENOENT: deleting an absent entry; the
         * rid_reserved entries of the host's CPU cannot be deleted (-EPERM). Hardware that
         * rewrites requester IDs as they cross (Switchtec's proxy IDs) returns the ID the
         * far side sees in *proxy (bus << 8 | devfn); others set NTBF_NONE. proxy may be
         * NULL. The daemon records it (docs/daemon.md): the far host's IOMMU sees that ID.
         */
        int (*rid_add)(struct ntbf_adapter_h *h, const struct ntbf_rid *r, uint32_t *proxy);
        int (*rid_del)(struct ntbf_adapter_h *h, const struct ntbf_rid *r);
        /* Switch port requester tables (pair): register r on every connected port of sw. */
        int (*switch_rid_add)(struct ntbf_adapter_h *h, uint32_t sw, const struct ntbf_rid *r);
        int (*switch_rid_del)(struct ntbf_adapter_h *h, uint32_t sw, const struct ntbf_rid *r);

        /* CPU access to a window (pair): the mapping is direct, no software on the path.
         * offset and size are page-aligned and inside window `win`. */
        int (*map_window)(struct ntbf_adapter_h *h, uint32_t win, uint64_t offset, uint64_t size,
                          unsigned flags, void **addr);
        int (*unmap_window)(struct ntbf_adapter_h *h, void *addr, uint64_t size);
        /*
         * A posted write of len bytes at offset of window `win`, as this host's CPU issues
         * it (optional; needs the map_window pair). It reaches what a direct mapping cannot:
         * the far host's MSI range (an interrupt: how SISCI triggers a remote interrupt) and
         * multicast groups (replicated to every member). Hardware backends store through a
         * mapping; the simulated fabric routes the write. Returns once the write is issued;
         * a write dropped on the way is counted on the adapter like any posted write (a
         * backend that learns the drop reason may return it, as the sim does). -EINVAL when
         * [offset, offset + len) is empty or leaves the window.
         */
        int (*window_write)(struct ntbf_adapter_h *h, uint32_t win, uint64_t offset,
                            const void *buf, uint64_t len);

        /* Local memory for export (pair). Zeroed, whoever had it before. */
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
        /*
         * This host's physical address space (pair, optional): map [addr, addr + size) of its
         * RAM or of a local device's BAR into this process, whoever allocated it (SISCI's
         * SCIAttachPhysicalMemory, the device API's local BARs, a mailbox of another
         * process). The simulated fabric maps its RAM and BAR files. A hardware backend maps
         * what it reaches: its memory for export, as mem_map does, and a BAR of a local PCI
         * device through its sysfs resource file (ivshmem, linux-ntb); any other RAM is
         * -EFAULT there, as is a range that is not RAM or one BAR. libsisci and the device
         * API map this host's memory only through it.
         */
        int (*host_map)(struct ntbf_adapter_h *h, uint64_t addr, uint64_t size, void **out);
        int (*host_unmap)(struct ntbf_adapter_h *h, void *addr, uint64_t size);

        /* Doorbells (group: all or none). db_* are this adapter's own register; peer_db_set
         * rings bits of a peer's. */
        int (*db_read)(struct ntbf_adapter_h *h, uint64_t *bits);
        int (*db_clear)(struct ntbf_adapter_h *h, uint64_t bits);
        int (*db_set_mask)(struct ntbf_adapter_h *h, uint64_t bits);
        int (*db_clear_mask)(struct ntbf_adapter_h *h, uint64_t bits);
        int (*peer_db_set)(struct ntbf_adapter_h *h, uint32_t peer, uint64_t bits);

        /* Scratchpads (group): this adapter's own registers, and a peer's. */
        int (*spad_read)(struct ntbf_adapter_h *h, uint32_t idx, uint32_t *val);
        int (*spad_write)(struct ntbf_adapter_h *h, uint32_t idx, uint32_t val);
        int (*peer_spad_read)(struct ntbf_adapter_h *h, uint32_t peer, uint32_t idx, uint32_t *val);
        int (*peer_spad_write)(struct ntbf_adapter_h *h, uint32_t peer, uint32_t idx, uint32_t val);

        /* Messages (pair, optional): delivered as msg_event on the peer, naming the sender. */
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
         * The host's IOMMU for inbound NTB traffic (pair, optional; NTBF_CAP_IOMMU):
         * inbound accesses to iova reach local physical address phys (4 KiB pages). This is
         * what makes a borrower's scattered pages contiguous behind one DMA window (article
         * 4.3). Absent where the kernel owns the IOMMU (NTBF_CAP_KERNEL_IOMMU).
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
        /* Optional, needs the isolation group: DMA of function f of local device `device`
         * that its isolation domain refused, so far. */
        int (*dev_iommu_faults)(struct ntbf_adapter_h *h, uint32_t device, uint32_t f,
                                uint64_t *out);

        /*
         * Config space of this host's local devices that the backend models or reaches
         * (pair, optional): function f of topology device `device`, size 1, 2 or 4 bytes at
         * a naturally aligned offset below 4096. -ENODEV for a device it has no config
         * space of (the daemon then tries the host's own, VFIO). Writes have the effect a
         * config write has on the device (BAR sizing, MSI-X enable, FLR).
         */
        int (*cfg_read)(struct ntbf_backend *b, uint32_t device, uint32_t f, uint32_t off,
                        uint32_t size, uint32_t *val);
        int (*cfg_write)(struct ntbf_backend *b, uint32_t device, uint32_t f, uint32_t off,
                         uint32_t size, uint32_t val);
        /*
         * Where this host's kernel placed the memory BARs of function f of local device
         * `device` (optional): addr[b] and size[b] of each memory BAR b, both 0 for an I/O
         * BAR or none. A backend whose devices are this host's own PCI functions, reached as
         * cfg_read reaches them, has it; -ENODEV for a device it does not reach. With it,
         * every device of the cluster's nodes sits where its host's kernel placed it (the
         * lender tells the manager, which programs those addresses); without it (a modelled
         * fabric), a device that is not VFIO's sits where the cluster file places it.
         */
        int (*dev_bars)(struct ntbf_backend *b, uint32_t device, uint32_t f, uint64_t addr[6],
                        uint64_t size[6]);

        /*
         * Devices of a managed fabric (pair, optional; NTBF_CAP_DEV_MAP). Make [addr, addr +
         * size) reachable by the DMA of function f of topology device `device` (of this host
         * or borrowed from another) and return in *ioaddr the address the device must use:
         * addr is memory of this host (memory for export of any process: a DMA buffer, an
         * interrupt vector's address, a segment) or a range of one slot of this adapter's
         * windows (the device then reaches what the slot leads to). The backend gets the
         * device from the fabric's software (Dolphin: SCIBorrowDevice) at the first mapping
         * and gives it back at release. -EFAULT when addr is neither; NTBF_ENOTFOUND when the
         * fabric does not know the device; -ENOTCONN for an unprogrammed slot. dev_unmap
         * undoes one mapping by the address dev_map returned (-ENOENT when there is none).
         */
        int (*dev_map)(struct ntbf_adapter_h *h, uint32_t device, uint32_t f, uint64_t addr,
                       uint64_t size, uint64_t *ioaddr);
        int (*dev_unmap)(struct ntbf_adapter_h *h, uint32_t device, uint32_t f, uint64_t ioaddr);

        /* Host interrupt vectors (pair, optional). */
        int (*irq_alloc)(struct ntbf_adapter_h *h, struct ntbf_irq *out);
        int (*irq_free)(struct ntbf_adapter_h *h, struct ntbf_irq *irq);
        /* Optional, needs the pair: the MSI write of data to addr (a vector of this host,
         * allocated by any of its processes) as a local requester issues it: a local
         * interrupt. */
        int (*irq_trigger)(struct ntbf_adapter_h *h, uint64_t addr, uint32_t data);

        /* Reset (optional, NTBF_CAP_RESET): clears slots, requester IDs (but the reserved),
         * doorbells, masks, scratchpads, and delivers reset_event to every handle. */
        int (*reset)(struct ntbf_adapter_h *h);
        /* Counters (optional, NTBF_CAP_COUNTERS): what the hardware counted since power-on. */
        int (*counters)(struct ntbf_adapter_h *h, struct ntbf_counters *out);

        /* Fault injection (optional, simulated fabrics; NTBF_CAP_FAULT). */
        int (*fault)(struct ntbf_backend *b, const struct ntbf_fault *f);

        /*
         * The owner's end of a relay (pair, optional; see struct ntbf_backend_relay): serve
         * answers a request another process of the node sent through its relay, as call
         * describes (the daemon calls it from its loop). client names that process's
         * connection; what serve gives a client (memory, say) is taken back by client_gone,
         * when the connection ends (the process exited or died). A backend whose every
         * process reaches the hardware itself (sim, ivshmem) has neither.
         */
        int (*serve)(struct ntbf_adapter_h *h, uint64_t client, const void *req, size_t reqlen,
                     void *ans, size_t anslen, size_t *got, int *fds, unsigned maxfds,
                     unsigned *nfds);
        void (*client_gone)(struct ntbf_adapter_h *h, uint64_t client);

        /*
         * The bus address of memory this process holds (optional, needs host_map): where
         * [addr, addr + size) of this process is one piece of this host's memory that the
         * backend maps (memory from mem_alloc, a mapping made by mem_map or host_map; on the
         * simulated fabric any mapping of the host's RAM), *bus is the address of its first
         * byte in the host's physical space: what a peer's slot must lead to, and what
         * host_map maps back. libsisci's SCIRegisterSegmentMemory asks it. -EFAULT for
         * memory the backend does not map (malloc, the stack, another backend's).
         */
        int (*host_bus)(struct ntbf_adapter_h *h, const void *addr, uint64_t size, uint64_t *bus);
};

/*
 * Check a vtable against the rules, in the order this header lists the callbacks, and
 * return true, or false with the first broken rule written to why (e.g. "rid_add without
 * rid_del"):
 *   mandatory     name, open, close, probe, release, caps, link_state, set_events,
 *                 event_fd, process_events
 *   one of        the translation pairs xlat_set/xlat_clear, peer_xlat_set/peer_xlat_clear
 *   pairs         create/destroy, link_enable/link_disable, rid_add/rid_del,
 *                 switch_rid_add/switch_rid_del, map_window/unmap_window,
 *                 mem_alloc/mem_free, mem_map/mem_unmap, host_map/host_unmap,
 *                 peer_msg_write/msg_read,
 *                 mcast_join/mcast_leave, dma_submit/dma_poll, iommu_map/iommu_unmap,
 *                 cfg_read/cfg_write, dev_map/dev_unmap, irq_alloc/irq_free, serve/client_gone
 *   groups        doorbells (db_read, db_clear, db_set_mask, db_clear_mask, peer_db_set),
 *                 scratchpads (spad_read, spad_write, peer_spad_read, peer_spad_write),
 *                 device isolation (dev_isolate, dev_iommu_map, dev_iommu_unmap)
 *   needs         window_write needs map_window; mem_map needs mem_alloc;
 *                 dev_iommu_faults needs dev_isolate;
 *                 irq_trigger needs irq_alloc; host_bus needs host_map
 *   optional      xlat_get, reset, counters, fault, dev_bars
 */
NTBF_EXPORT bool ntbf_backend_ops_valid(const struct ntbf_backend_ops *ops, char *why,
                                        size_t whylen);

/*
 * Check an adapter's capabilities against its vtable and themselves, and return true, or
 * false with the first broken rule in why:
 *   requires      each claimed flag has its callbacks (NTBF_CAP_XLAT_OUTBOUND: xlat_set,
 *                 ..., NTBF_CAP_LINK_CTRL: link_enable, NTBF_CAP_RESET: reset,
 *                 NTBF_CAP_COUNTERS: counters, NTBF_CAP_FAULT: fault, NTBF_CAP_DEV_MAP:
 *                 dev_map, NTBF_CAP_MEM_PHYS: mem_alloc and host_map)
 *   excludes      NTBF_CAP_RID_TABLE and NTBF_CAP_NO_RID_TABLE; NTBF_CAP_IOMMU and
 *                 NTBF_CAP_KERNEL_IOMMU
 *   figures       a flag and its figure agree (doorbells: db_valid_mask != 0, scratchpads,
 *                 messages, mcast_groups, dma_channels); rid_table > 0 with
 *                 NTBF_CAP_RID_TABLE, 0 with NTBF_CAP_NO_RID_TABLE, rid_reserved <
 *                 rid_table with a table; at least one translation flag
 *   windows       1 .. NTBF_MAX_WINDOWS; each: slots >= 1, slot_size * slots == size,
 *                 first_slot the running count, reserved < slots, addr_align, size_align
 *                 powers of two, size_align <= size_max <= slot_size, disjoint ranges;
 *                 slots the total
 */
NTBF_EXPORT bool ntbf_caps_valid(const struct ntbf_backend_ops *ops, const struct ntbf_caps *c,
                                 char *why, size_t whylen);

/*
 * Check one adapter's capabilities against what the cluster file says of it, and return
 * true, or false with the first figure that differs in why, naming the cluster file's key
 * that would fix it. The core plans with the file's figures, so a backend whose figures come
 * from the hardware (Dolphin's SISCI library answers SCIQuery) is held to the file here:
 *   ports; every window's base, size, slots, slot size and reserved slots, and alignments
 *   and a size_max that the core's plans fit (the rules of the conformance check
 *   caps.figures); rid_table with NTBF_CAP_RID_TABLE / NTBF_CAP_NO_RID_TABLE; dma_channels;
 *   doorbells, scratchpads and messages; the translation sides against `xlat`; an IOMMU
 *   flag against the node's `iommu`.
 * The daemon refuses to start when an adapter of its node fails it (docs/daemon.md).
 */
NTBF_EXPORT bool ntbf_caps_match(const struct ntbf_topo *t, uint32_t adapter,
                                 const struct ntbf_caps *c, char *why, size_t whylen);

/* The name of one capability flag ("NTBF_CAP_DOORBELL"), or "?". */
NTBF_EXPORT const char *ntbf_cap_name(uint32_t flag);
/* The first callback claiming flag needs that ops lacks ("peer_db_set"), or NULL. */
NTBF_EXPORT const char *ntbf_cap_missing(const struct ntbf_backend_ops *ops, uint32_t flag);

/*
 * The registry of backends (backends/registry.c, the one place a backend is registered).
 *
 * Every backend the project knows has an entry, built on this platform or not: the cluster
 * file accepts exactly the registered names (its "did you mean" and its list of names come
 * from here), and a backend that is registered but not built into this library has ops ==
 * NULL and a sentence saying why (`unbuilt`). Such a cluster file still validates (ntbfab
 * validate, topology, plan); whatever must open the backend (ntbfabd, ntbfab up, the
 * conformance suite) refuses with that sentence.
 *
 * `helper` names a program `ntbfab up` starts beside the daemons of a cluster on one machine
 * (with --config FILE --dir DIR --quiet), for a backend whose create() alone does not make
 * the whole fabric: the sim's ntbfab-simd, which hosts its simulated devices. NULL: none.
 * `ntbfab up` runs any built backend that has create (ops->create: it runs on one machine).
 */
struct ntbf_backend_entry {
        const char *name;                   /* as cluster.backend names it */
        const struct ntbf_backend_ops *ops; /* NULL: registered, not built here */
        const char *about;                  /* what it drives, one line */
        const char *unbuilt;                /* ops == NULL: why, and what would build it */
        const char *helper;                 /* for ntbfab up, or NULL */
};

/* Every registered entry, built or not, in registry order: NULL past the end. */
NTBF_EXPORT const struct ntbf_backend_entry *ntbf_backend_entry_at(size_t i);
/* The entry named name (exact), built or not; NULL if no such backend is registered. */
NTBF_EXPORT const struct ntbf_backend_entry *ntbf_backend_entry(const char *name);
/* The built backends only: by name (NULL if unknown or not built), and by index. */
NTBF_EXPORT const struct ntbf_backend_ops *ntbf_backend_find(const char *name);
NTBF_EXPORT const struct ntbf_backend_ops *ntbf_backend_at(size_t i);
/*
 * The built backend named name, or NULL with a sentence in why: no such backend (listing
 * the registered names), or registered but not built here (its `unbuilt`).
 */
NTBF_EXPORT const struct ntbf_backend_ops *ntbf_backend_open_ops(const char *name, char *why,
                                                                 size_t whylen);
/*
 * The default instance directory of a cluster (where ntbfab up, ntbfabd and the sim keep
 * run/, state/, log/ and a simulated fabric): /dev/shm/ntbfab-UID-NAME. Returns buf.
 */
NTBF_EXPORT const char *ntbf_instance_dir_default(const struct ntbf_topo *t, char *buf, size_t len);

NTBF_END_DECLS

#endif
