/* tests/unit/fake_dma.h: a fake fabric for device model tests: flat memory plus injected failures.
 */
#ifndef NTBF_TEST_FAKE_DMA_H
#define NTBF_TEST_FAKE_DMA_H

#include <stdint.h>

#include "devmodel.h"

/*
 * One flat range of memory [base, base + size) that a model's DMA reaches. Accesses that
 * leave it or touch an injected failure range fail as a dropped transaction does: reads
 * return all ones, writes are lost, the call returns -EIO. Aligned 4- and 8-byte writes are
 * single atomic stores (as the fabric performs them), so completion phase bits and MSI-X
 * data land whole.
 */
struct fake_dma {
        uint8_t *mem;
        uint64_t base, size;
        struct {
                uint64_t lo, hi;
        } fail[16];
        unsigned nfail;
        uint64_t reads, writes, errors;
};

struct fake_dma *fake_dma_new(uint64_t base, uint64_t size);
void fake_dma_free(struct fake_dma *f);
struct ntbf_sim_dma fake_dma_ops(struct fake_dma *f);
/* Host pointer of an address (NULL outside the memory). */
void *fake_dma_ptr(struct fake_dma *f, uint64_t addr);
/* Make [addr, addr + len) fail from now on; fake_dma_heal removes every failure. */
void fake_dma_fail(struct fake_dma *f, uint64_t addr, uint64_t len);
void fake_dma_heal(struct fake_dma *f);

/*
 * A device function's environment over a fake fabric: config region and BAR memory
 * allocated for function 0 of desc (BAR addresses as desc says), DMA through f.
 */
struct fake_dev {
        struct ntbf_sim_devenv env;
        uint8_t *cfg;
        void *bar[NTBF_MAX_BARS];
};
int fake_dev_init(struct fake_dev *d, const struct ntbf_device *desc, struct fake_dma *f,
                  int backing_fd);
void fake_dev_free(struct fake_dev *d);
/* Config write helpers for tests (Bus Master Enable, MSI-X enable/mask). */
void fake_dev_bus_master(struct fake_dev *d, int on);

#endif
