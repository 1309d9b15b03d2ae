/* ntbfab/sim.h: the simulated fabric's own API: instances, the transaction router, the device host.
 */
#ifndef NTBFAB_SIM_H
#define NTBFAB_SIM_H

#include "backend.h"
#include "path.h"

NTBF_BEGIN_DECLS

/*
 * The simulated fabric (docs/sim.md) is reached like any backend, through the "sim" entry
 * of the registry (ntbf_backend_find("sim")). What only a simulator has lives here:
 * creating and destroying an instance directory, issuing a transaction as any requester
 * and seeing where it went, looking at simulated memory directly, and running the device
 * host (device models, adapter DMA engines and the reaper of dead processes' resources).
 *
 * Functions taking a struct ntbf_backend * require one opened by the sim backend and
 * return -EINVAL for any other.
 */

/*
 * Create a fabric instance for the finalized topology t in dir (created if missing):
 * the control file, RAM and BAR files, and NVMe namespace images (kept if present).
 * Idempotent: if dir already holds an instance of the same topology, nothing is
 * touched and 0 is returned. If it holds a different one, NTBF_EEXISTS is returned and
 * why says so. Other failures return -errno with why naming the file.
 */
NTBF_EXPORT int ntbf_sim_fabric_create(const struct ntbf_topo *t, const char *dir, char *why,
                                       size_t whylen);

/*
 * Remove the instance in dir: every file of the fabric, but not images/ (NVMe namespace
 * images survive teardown). The directory itself goes if nothing is left in it.
 * Processes still attached keep working on the unlinked files until they close.
 */
NTBF_EXPORT int ntbf_sim_fabric_destroy(const char *dir);

/*
 * What ops->open does, with a sentence on failure: attach to the instance in env->dir.
 * NTBF_ENOTFOUND: no instance there; NTBF_ECONFIG: the instance was created from a
 * different topology or by an incompatible version (why says which and what to do).
 * env->topo must stay alive until the backend is closed.
 */
NTBF_EXPORT int ntbf_sim_attach(const struct ntbf_backend_env *env, struct ntbf_backend **out,
                                char *why, size_t whylen);

/* Whether b was opened by the sim backend. */
NTBF_EXPORT bool ntbf_sim_is(const struct ntbf_backend *b);

/* ---- transactions -------------------------------------------------------------------------- */

/* Routing ID of a host's CPU and of an adapter's DMA engine. */
#define NTBF_SIM_RID_CPU 0x0000

/* Where a routed transaction went (the first piece of it when it was split). */
struct ntbf_sim_trace {
        int status;            /* as returned: 0 or the first drop reason */
        uint32_t pieces;       /* pieces it was split into (region, slot, page boundaries) */
        uint32_t latency_ns;   /* modeled: sum of hop latencies; a read counts the round trip */
        uint32_t out_adapter;  /* adapter it left its host through, NTBF_NONE if local */
        uint32_t in_adapter;   /* adapter it entered the far host through, or NTBF_NONE */
        uint32_t drop_adapter; /* adapter whose counter recorded the drop, or NTBF_NONE */
        uint32_t dst_node;     /* host where the first piece landed (NTBF_NONE if dropped) */
        uint64_t dst_addr;     /* physical address there (after the IOMMU) */
        enum ntbf_region_kind dst_kind;
        struct ntbf_path path; /* hops taken by the first piece */
};

/*
 * Issue a DMA read or write of len bytes at addr in the physical address space of node
 * as requester rid (a device function's routing ID, or NTBF_SIM_RID_CPU), routed hop by
 * hop exactly as a device's DMA is. Returns 0 or the first drop reason:
 * NTBF_EUNPROGRAMMED, NTBF_ENORID, NTBF_ELINKDOWN, NTBF_EIOMMU_FAULT, NTBF_EUNREACHABLE
 * (master abort). Dropped bytes of a read are all ones; dropped writes are lost.
 * tr may be NULL. device is the requesting device (for its hop latency) or NTBF_NONE.
 */
NTBF_EXPORT int ntbf_sim_read(struct ntbf_backend *b, uint32_t node, uint32_t device, uint16_t rid,
                              uint64_t addr, void *buf, size_t len, struct ntbf_sim_trace *tr);
NTBF_EXPORT int ntbf_sim_write(struct ntbf_backend *b, uint32_t node, uint32_t device, uint16_t rid,
                               uint64_t addr, const void *buf, size_t len,
                               struct ntbf_sim_trace *tr);

/*
 * A direct pointer to len bytes of RAM or device BAR memory of node at physical address
 * addr (a tool's or test's view of simulated memory: no routing, no counters).
 * -EINVAL if the range is not inside one RAM or BAR region.
 */
NTBF_EXPORT int ntbf_sim_phys_ptr(struct ntbf_backend *b, uint32_t node, uint64_t addr,
                                  uint64_t len, void **ptr);

/* The config region (NTBF_SIM_CFG_REGION bytes, shared) of function f of device d, or NULL. */
NTBF_EXPORT uint8_t *ntbf_sim_cfg(struct ntbf_backend *b, uint32_t device, uint32_t f);

/*
 * Walk every table of the instance and check it is consistent: entries decode to valid
 * objects, no duplicate requester entries, reserved entries intact, allocations inside
 * RAM and disjoint, derived counts matching the records. Returns 0, or NTBF_EPROTO with
 * the first inconsistency in why.
 */
NTBF_EXPORT int ntbf_sim_check(struct ntbf_backend *b, char *why, size_t whylen);

/* How many times a process found a shared table's lock held by a dead process and repaired
 * the table (EOWNERDEAD), since the instance was created. */
NTBF_EXPORT uint64_t ntbf_sim_recoveries(struct ntbf_backend *b);

/* DMA of an isolated device function refused by its IOMMU domain (dev_isolate), so far. */
NTBF_EXPORT int ntbf_sim_dev_iommu_faults(struct ntbf_backend *b, uint32_t device, uint32_t f,
                                          uint64_t *out);

/*
 * Everything the fabric's tables hold, one line per entry, sorted (caller frees with
 * ntbf_sim_hw_state_free): what tests compare with what the daemons recorded. Lines:
 *   slot NODE.ADAPTER SLOT to NODE.ADAPTER ADDR    slot NODE.ADAPTER SLOT group G ADDR
 *   rid NODE.ADAPTER NODE RID/MASK                 (the host CPU's reserved entries left out)
 *   swrid SWITCH NODE RID/MASK                     (on every connected port; else one line
 *                                                   "swrid SWITCH port P only: ..." per port)
 *   mcast NODE.ADAPTER GROUP ADDR SIZE
 *   iommu NODE IOVA PHYS                           (one per 4 KiB page)
 *   deviso NODE.DEVICE.FN                          devmap NODE.DEVICE.FN IOVA PHYS (per page)
 * (numbers in hex with 0x, RID and MASK 4 hex digits).
 */
NTBF_EXPORT int ntbf_sim_hw_state(struct ntbf_backend *b, char ***lines, size_t *n);
NTBF_EXPORT void ntbf_sim_hw_state_free(char **lines, size_t n);

/* Resources with an owner process still recorded (for tests and `ntbfab status`). */
struct ntbf_sim_owned {
        uint32_t mem;   /* exported memory allocations */
        uint32_t irqs;  /* interrupt vectors */
        uint64_t bytes; /* bytes of exported memory */
};
/* Count what pid owns (pid 0: everything) on node (NTBF_NONE: all nodes). */
NTBF_EXPORT int ntbf_sim_owned(struct ntbf_backend *b, uint32_t node, int pid,
                               struct ntbf_sim_owned *out);

/* ---- the device host ----------------------------------------------------------------------- */

struct ntbf_sim_model_ops; /* backends/sim/devmodel.h */
struct ntbf_sim_devhost;

/* The built-in model of a device (NVMe, accelerator: d->sim.model), or NULL. */
NTBF_EXPORT const struct ntbf_sim_model_ops *ntbf_sim_builtin_model(const struct ntbf_device *d);

struct ntbf_sim_devhost_opts {
        /* The model of a device, or NULL for none (ntbf_sim_builtin_model runs the built-in
         * ones); a NULL lookup runs no device models. */
        const struct ntbf_sim_model_ops *(*model_for)(const struct ntbf_device *d);
        bool no_dma;         /* do not run the adapters' DMA engines */
        bool no_reaper;      /* do not free the resources of dead processes */
        uint32_t reap_ms;    /* reaper period; 0: 20 ms */
        uint32_t spin_ns;    /* keep polling this long after the last work; 0: 50 us */
        uint32_t max_nap_ns; /* longest idle sleep; 0: 1 ms */
};

/* What the device host has done, for tests and benchmarks. */
struct ntbf_sim_devhost_stats {
        uint32_t models, dma_engines;
        uint64_t polls, work, naps; /* summed over all runner threads */
        uint64_t flr, resets;       /* model resets by FLR and by host revival */
        uint64_t dma_done;          /* DMA descriptors completed */
        uint64_t reaped_mem, reaped_irqs;
};

/*
 * Start the device host in the calling process: one thread per device function with a
 * model, one per adapter with DMA channels, and the reaper. Only one device host serves
 * an instance at a time: NTBF_EBUSY (why names the pid) while another one lives.
 */
NTBF_EXPORT int ntbf_sim_devhost_start(struct ntbf_backend *b,
                                       const struct ntbf_sim_devhost_opts *opts,
                                       struct ntbf_sim_devhost **out, char *why, size_t whylen);
NTBF_EXPORT void ntbf_sim_devhost_stats(struct ntbf_sim_devhost *dh,
                                        struct ntbf_sim_devhost_stats *out);
/* Stop the threads, release the device host role. Stop before closing the backend. */
NTBF_EXPORT void ntbf_sim_devhost_stop(struct ntbf_sim_devhost *dh);

NTBF_END_DECLS

#endif
