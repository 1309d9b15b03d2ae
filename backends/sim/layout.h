/* backends/sim/layout.h: the layout of a simulated fabric's control file, shared by all processes.
 */
#ifndef NTBF_SIM_LAYOUT_H
#define NTBF_SIM_LAYOUT_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ntbfab/path.h"

/*
 * Every process of a fabric instance maps the control file `fabric` and works on it
 * directly, so this layout is an ABI between processes of the same build: bump
 * SIM_VERSION whenever it changes (attachers refuse other versions).
 *
 * Rules that keep the state consistent whatever instruction a process dies at
 * (docs/sim.md, "Surviving the death of any attached process"):
 *   - hardware registers and table entries are single 32/64-bit words, changed by one
 *     atomic store or compare-and-swap; an entry is never half written;
 *   - multi-word records (memory allocations, interrupt vectors, DMA descriptors,
 *     multicast memberships) are changed under robust process-shared mutexes, fields
 *     first and their `state` word last, so a record is either whole or not in use;
 *     counters derived from records are rebuilt by the next locker after a death.
 */

#define SIM_MAGIC   UINT64_C(0x314d4953464254e4) /* "\xe4TBFSIM1" little-endian */
#define SIM_VERSION 4

#define SIM_PAGE         4096u
#define SIM_IOVA_BITS    48 /* IOVA space of a host IOMMU (VT-d 4-level tables) */
#define SIM_ADDR_LIMIT   (UINT64_C(1) << 48)
#define SIM_MEM_RECORDS  4096 /* exported allocations per host */
#define SIM_IRQ_VECTORS  2048 /* interrupt vectors per host */
#define SIM_DMA_RING     256  /* descriptors per DMA channel */
#define SIM_DMA_MAX_LEN  (64u << 20)
#define SIM_MEM_FLOOR    (1u << 20) /* RAM below 1 MiB is never exported (firmware) */
#define SIM_MAX_ADAPTERS 0xfffeu
#define SIM_MAX_NODES    0xfffeu
#define SIM_MCAST_MAX    64 /* PCIe multicast MAXGROUP */
#define SIM_IRQ_ADDR     UINT64_C(0xfee00000)

/* A futex word with a count of sleepers, so wakers skip the syscall when nobody sleeps. */
struct sim_futex {
        _Atomic uint32_t seq;
        _Atomic uint32_t waiters;
};

/* ---- entries (one 64-bit word each) -------------------------------------------------------- */

/*
 * LUT slot: bit 0 valid, bit 1 multicast, bits 12..47 the far-side address (aligned to
 * the window's addr_align, at least 4 KiB), bits 48..63 the destination adapter or
 * multicast group. Far-side addresses are therefore below 2^48: nothing exists above that
 * in any simulated address domain (48-bit physical addressing, 48-bit IOVA).
 *
 * The translation's size is a second word per slot (off_xsize). A slot is programmed by
 * storing 0 into the entry, then the size, then the entry (release); a reader takes the
 * entry, the size, and the entry again, and trusts the pair only when both entries agree,
 * so it never pairs one programming's address with another's size (a programmer killed in
 * between leaves the slot invalid).
 */
#define SLOT_VALID     UINT64_C(1)
#define SLOT_MCAST     UINT64_C(2)
#define SLOT_ADDR      UINT64_C(0x0000fffffffff000)
#define SLOT_TARGET(e) ((uint32_t)((e) >> 48))

/* Requester-ID entry: bit 63 valid, bits 32..47 node, bits 16..31 routing ID, 0..15 mask. */
#define RID_VALID UINT64_C(0x8000000000000000)
static inline uint64_t rid_entry(uint32_t node, uint16_t rid, uint16_t mask)
{
        return RID_VALID | (uint64_t)(node & 0xffff) << 32 | (uint64_t)(rid & mask) << 16 | mask;
}
static inline bool rid_match(uint64_t e, uint32_t node, uint16_t rid)
{
        uint16_t mask = (uint16_t)e;
        return (e & RID_VALID) && (uint32_t)(e >> 32 & 0xffff) == node &&
               (uint16_t)(rid & mask) == (uint16_t)(e >> 16);
}

/* Inbound message register: bit 63 full, bits 32..62 sending adapter, 0..31 the value. */
#define MSG_FULL UINT64_C(0x8000000000000000)

/* Link state word: a link carries traffic only when it is 0. */
#define LINK_ADMIN_DOWN 1u /* link_disable or an injected link-down */
#define LINK_END0_DEAD  2u /* the host of end 0 is dead */
#define LINK_END1_DEAD  4u

/* ---- records --------------------------------------------------------------------------------- */

/* Memory exported by a process (mem_alloc), owned until mem_free or the owner's death. */
struct sim_memrec {
        _Atomic uint32_t state; /* 0 free, 1 in use: written last */
        int32_t pid;
        uint64_t start; /* owner's start time (clock ticks after boot): pid reuse guard */
        uint64_t base, size;
        uint64_t id;
};

/* A host interrupt vector (irq_alloc). Its eventfd lives in the owner process. */
struct sim_irqrec {
        _Atomic uint32_t state;   /* 0 free, 1 in use */
        _Atomic uint32_t pending; /* set by an MSI write, taken by the owner's watcher */
        int32_t pid;
        uint32_t gen; /* allocations of this vector so far */
        uint64_t start;
        _Atomic uint64_t count; /* interrupts delivered */
};

struct sim_dmadesc {
        uint64_t src, dst, len, cookie;
        int32_t status;
        uint32_t pad;
};

/* One DMA channel: submitters and pollers lock; the engine only moves `done`. */
struct sim_dmachan {
        pthread_mutex_t lock;
        _Atomic uint64_t head; /* descriptors published */
        _Atomic uint64_t done; /* descriptors completed by the engine */
        uint64_t reaped;       /* completions handed to dma_poll */
        struct sim_dmadesc ring[SIM_DMA_RING];
};

/* A multicast membership (mcast_join) of one adapter in one group, read as a seqlock. */
struct sim_mcrec {
        _Atomic uint64_t word; /* bit 0 valid, bits 1..11 generation, bits 12..63 address */
        _Atomic uint64_t size;
};
#define MC_VALID UINT64_C(1)
#define MC_GEN   UINT64_C(0xffe)

/* ---- objects ----------------------------------------------------------------------------- */

struct sim_hdr {
        uint64_t magic;
        uint32_t version;
        uint32_t hdr_size;
        uint64_t topo_hash;
        uint64_t size; /* bytes of the control file */
        char cluster[64];
        uint32_t nnodes, nadapters, nswitches, nlinks, ndevices, nfuncs;
        uint32_t nhops, ngroups;
        uint64_t off_node, off_adapter, off_switch, off_link, off_route, off_hop, off_func;
        int32_t creator_pid;
        _Atomic uint32_t ready;      /* set last by the creator */
        _Atomic uint64_t recoveries; /* shared locks found with a dead owner and repaired */

        /* Routing generation: bumped by every change that can alter a route. */
        alignas(64) struct sim_futex change;
        /* The device host serving the instance: pid and start time, 0 if none. */
        alignas(64) _Atomic int32_t devhost_pid;
        uint64_t devhost_start;
        struct sim_futex devhost_kick; /* DMA submissions wake the engines */
        /* Multicast membership changes. */
        alignas(64) pthread_mutex_t mcast_lock;
        /* Passes of the device host's multicast replication (mcpost.c): a slot is cleared
         * only after a pass that began after the clear was asked for (ops.c). */
        alignas(64) _Atomic uint64_t mcast_passes;
};

struct sim_node {
        uint64_t ram_size, ram_low; /* RAM bytes; bytes below the 32-bit MMIO hole */
        uint32_t iommu;             /* inbound NTB traffic is translated */
        _Atomic uint32_t alive;
        _Atomic uint32_t boot;        /* revivals: device models reset when it changes */
        _Atomic uint32_t iommu_ready; /* the iommu-<node> file exists */
        /* Events for processes of this host: MSI, doorbells, messages, link, reset. */
        alignas(64) struct sim_futex attn;

        alignas(64) pthread_mutex_t mem_lock;
        uint32_t mem_count; /* derived from mem[]: rebuilt after a death */
        uint64_t mem_bytes; /* derived */
        uint64_t mem_next_id;
        alignas(64) pthread_mutex_t irq_lock;
        uint32_t irq_count; /* derived from irq[] */
        struct sim_memrec mem[SIM_MEM_RECORDS];
        struct sim_irqrec irq[SIM_IRQ_VECTORS];
};

struct sim_counters {
        _Atomic uint64_t tx, rx, drop_no_rid, drop_unprogrammed, drop_link_down, master_abort,
            iommu_fault;
};

struct sim_adapter {
        uint32_t node, nslots, nrids, rid_reserved;
        uint32_t nspads, nmsgs, ndb, nchan;
        uint32_t ngroups, ports;
        uint64_t off_slots, off_xsize, off_rids, off_spads, off_msgs, off_dma, off_mcast;

        alignas(64) _Atomic uint64_t db;
        _Atomic uint64_t db_mask;
        _Atomic uint32_t db_seq;    /* peer_db_set calls */
        _Atomic uint32_t reset_seq; /* resets */
        _Atomic uint32_t event_seq; /* anything the handle owners must look at */
        alignas(64) struct sim_counters ctr;
};

struct sim_switch {
        uint32_t ports, nrids, ngroups, pad;
        uint64_t off_rids; /* ports x nrids entries */
};

struct sim_link {
        _Atomic uint32_t state;
        uint32_t pad;
};

/* The static route from adapter A to adapter D: hops[first .. first + nhops). */
struct sim_route {
        uint32_t first;
        uint16_t nhops;
        uint16_t valid;
        uint32_t latency_ns; /* adapters, switches and cables, one way */
        uint32_t pad;
};

struct sim_func {
        uint32_t device, function;
        uint16_t rid;
        uint16_t pad;
        uint32_t pad2;
        uint64_t off_cfg;     /* NTBF_SIM_CFG_REGION bytes */
        _Atomic uint64_t flr; /* function level resets seen by the model runner */
        /* Lender-side isolation (dev_isolate): the function's DMA goes through its own IOMMU
         * domain, the file iommu-<node>.<device>.<function>, instead of straight to its host. */
        _Atomic uint32_t isolated;
        _Atomic uint32_t dom_ready;    /* the domain file exists */
        _Atomic uint64_t iommu_faults; /* DMA refused by the domain */
};

#endif
