/* backends/sim/devmodel.h: what a simulated device model sees of the fabric, and what it provides.
 */
#ifndef NTBF_SIM_DEVMODEL_H
#define NTBF_SIM_DEVMODEL_H

#include <stdint.h>

#include "ntbfab/topology.h"

/*
 * A device model is the "hardware" of one simulated PCIe device function. It runs in
 * the simulator's device host process, polled by a runner that spins while the model
 * is busy and backs off while it is idle. Everything a driver touches (config space,
 * BAR memory) lives in shared memory that any process of the fabric may map; the model
 * reacts to register writes when it polls, exactly as hardware reacts to a doorbell.
 *
 * All DMA goes through the fabric's router: an address in the device's own host's
 * physical address space, routed hop by hop through windows and LUT slots to its
 * backing memory. A dropped transaction (missing requester ID, unprogrammed slot, link
 * down, master abort) returns a negative error; reads then return all ones and writes
 * are lost, as on hardware. Models must behave like hardware on such errors (e.g. an
 * NVMe command whose PRP read fails completes with a data transfer error, if the
 * completion itself can be written).
 *
 * A naturally aligned write of 4 or 8 bytes lands as one store, never torn (as PCIe
 * delivers an aligned DWORD write): models rely on it to publish an NVMe completion's
 * phase-tag dword after the rest of the entry, and an MSI-X message's data whole.
 */

struct ntbf_sim_dma {
        int (*read)(void *opaque, uint64_t addr, void *buf, size_t len);
        int (*write)(void *opaque, uint64_t addr, const void *buf, size_t len);
        void *opaque;
};

/* Size of one function's config space (PCIe extended). */
#define NTBF_SIM_CFG_SIZE   4096
/*
 * A function's config region in shared memory: the 4 KiB of register values followed by
 * the masks that give writes their PCI semantics (see cfgspace.h).
 */
#define NTBF_SIM_CFG_REGION (3 * NTBF_SIM_CFG_SIZE)

struct ntbf_sim_devenv {
        const struct ntbf_device *desc; /* topology entry: BDF, ids, BARs, sim parameters */
        uint32_t function;              /* which function of desc this model instance is */
        const char *node_name;          /* host of the device (for serial numbers, logs) */
        uint32_t node_id;
        uint8_t *cfg;             /* config region, NTBF_SIM_CFG_REGION bytes (shared) */
        void *bar[NTBF_MAX_BARS]; /* BAR backing memory (shared), NULL if absent */
        uint64_t bar_size[NTBF_MAX_BARS];
        int backing_fd;          /* NVMe: namespace image, a sparse file; -1 for other models */
        struct ntbf_sim_dma dma; /* DMA as this function's requester ID */
};

struct ntbf_sim_model_ops {
        const char *name; /* "nvme", "accel" */
        /*
         * Create the model's private state. cfg and BAR memory are already allocated
         * (zeroed on first creation; they survive a restart of the device host process,
         * so create must accept and continue from existing register contents where it
         * can, or reset them). Returns 0 or -errno.
         */
        int (*create)(const struct ntbf_sim_devenv *env, void **state);
        /*
         * Do pending work: process doorbells, copy descriptors, post completions and
         * interrupts. Returns the number of units of work done (0 when idle), which the
         * runner uses to decide whether to spin or back off. now_ns is CLOCK_MONOTONIC.
         */
        int (*poll)(void *state, uint64_t now_ns);
        /* A reset of the function (FLR, or the fabric's adapter/host reset): back to power-on. */
        void (*reset)(void *state);
        void (*destroy)(void *state);
};

extern const struct ntbf_sim_model_ops ntbf_sim_nvme_ops;
extern const struct ntbf_sim_model_ops ntbf_sim_accel_ops;

/* The model for a topology device, or NULL if it has no sim model. */
const struct ntbf_sim_model_ops *ntbf_sim_model_for(const struct ntbf_device *d);

#endif
