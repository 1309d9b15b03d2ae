/* tests/unit/simfab_fx.h: a simulated fabric instance in a temporary directory, for sim tests. */
#ifndef NTBF_TEST_SIMFAB_FX_H
#define NTBF_TEST_SIMFAB_FX_H

#include "ntbfab/backend.h"
#include "ntbfab/sim.h"

struct fab {
        struct ntbf_topo *t;
        char dir[256];
        const struct ntbf_backend_ops *ops;
        struct ntbf_backend *b;
        struct ntbf_adapter_h *h[16]; /* by adapter index, probed */
};

/* Finalize t, create an instance in a fresh /dev/shm directory, attach and probe all adapters. */
void fab_up(struct fab *f, struct ntbf_topo *t);
/* Close, destroy the instance, free the topology. */
void fab_down(struct fab *f);

/* Topologies: b2b pxh830 pair ("a", "b") with small RAM; star of n pxh830 nodes on "sw0". */
struct ntbf_topo *fab_b2b(bool iommu);
struct ntbf_topo *fab_star(unsigned n, bool iommu);
/* A device on node (bus b, functions fn) with one 4 KiB BAR0, for requester tests. */
uint32_t fab_add_dev(struct ntbf_topo *t, uint32_t node, const char *name, uint8_t bus,
                     uint32_t functions);

/* Program adapter a's slot to (dst adapter, far addr), asserting success. */
void fab_slot(struct fab *f, uint32_t a, uint32_t slot, uint32_t dst, uint64_t addr);
/* Window address of slot of adapter a, plus off. */
uint64_t fab_win(struct fab *f, uint32_t a, uint32_t slot, uint64_t off);
/* Pointer into node's RAM at physical addr. */
uint8_t *fab_ram(struct fab *f, uint32_t node, uint64_t addr, uint64_t len);
struct ntbf_counters fab_ctr(struct fab *f, uint32_t a);
/* Wait up to ms for fd to become readable; returns the eventfd count read, 0 on timeout. */
uint64_t fab_wait_fd(int fd, int ms);

#endif
