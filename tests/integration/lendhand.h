/* tests/integration/lendhand.h: Device Lending by hand on the simulated fabric (DMA window, BAR
 * mapping, IOMMU-backed DMA memory), for tests and benchmarks. */
#ifndef NTBF_TEST_LENDHAND_H
#define NTBF_TEST_LENDHAND_H

#include <stdbool.h>
#include <stdint.h>

#include "ntbfab/backend.h"

/*
 * What SmartIO's lender and borrower sides do (article 4.1-4.3), done explicitly with the
 * backend vtable so a test can see and break each piece:
 *
 *   lender:   the device's requester ID in the lender adapter's table, and a "DMA window":
 *             consecutive slots of the lender's window pointing at one contiguous range of
 *             the borrower's I/O virtual addresses (set up once, in advance);
 *   borrower: the device's BARs mapped through the borrower's own window (its CPU then
 *             reaches the registers with plain loads and stores), and memory for the
 *             device: pages anywhere in its RAM, made contiguous for the device by its
 *             IOMMU inside the DMA window, and contiguous for the process by mmap.
 *
 * Every function returns 0 or a negative error (ntbfab/error.h).
 */

/* Lender: add every function of device dev to the requester-ID table of lender adapter h. */
int lh_rid_add(const struct ntbf_backend_ops *ops, struct ntbf_adapter_h *h,
               const struct ntbf_topo *t, uint32_t dev);
int lh_rid_del(const struct ntbf_backend_ops *ops, struct ntbf_adapter_h *h,
               const struct ntbf_topo *t, uint32_t dev);

/*
 * Lender: slots [slot, slot + n) of lender adapter la (handle h) point at borrower adapter
 * ba, at I/O virtual addresses [iova, iova + n * E) of the borrower (E: slot size; iova
 * E aligned). *dev is the address a device of the lender uses for iova.
 */
int lh_dma_window(const struct ntbf_backend_ops *ops, struct ntbf_adapter_h *h,
                  const struct ntbf_topo *t, uint32_t la, uint32_t slot, uint32_t n, uint32_t ba,
                  uint64_t iova, uint64_t *dev);

/* A range of the lender's physical address space mapped through the borrower's window. */
struct lh_map {
        void *base;          /* the whole mapping (slots) */
        uint64_t size;       /* its length */
        volatile void *addr; /* the requested address inside it */
};

/*
 * Borrower: program slots of borrower adapter ba from slot on to reach [addr, addr + size)
 * of lender adapter la's host (a BAR), and map them into this process (uncached: device
 * registers). A slot already holding the same translation is left alone.
 */
int lh_map_remote(const struct ntbf_backend_ops *ops, struct ntbf_adapter_h *h,
                  const struct ntbf_topo *t, uint32_t ba, uint32_t slot, uint32_t la, uint64_t addr,
                  uint64_t size, struct lh_map *m);
void lh_unmap_remote(const struct ntbf_backend_ops *ops, struct ntbf_adapter_h *h,
                     struct lh_map *m);

#define LH_MAX_CHUNKS 64

/* Borrower memory for device DMA. */
struct lh_pool {
        uint8_t *va;   /* size bytes, contiguous in this process */
        uint64_t size; /* a multiple of chunk */
        uint64_t iova; /* where the borrower's IOMMU puts it */
        uint64_t dev;  /* the address a lender device uses for va[0] */
        uint64_t chunk;
        uint32_t nchunks, nmapped;
        struct ntbf_mem mem[LH_MAX_CHUNKS];
};

/*
 * Borrower: size bytes of its RAM in chunks of chunk bytes (each chunk contiguous, chunks
 * deliberately not adjacent in physical memory), mapped at iova by the borrower's IOMMU
 * (adapter handle h) and contiguously into this process. dev: the device-side address of
 * iova (lh_dma_window). The memory reads as zeros.
 */
int lh_pool_new(const struct ntbf_backend_ops *ops, struct ntbf_adapter_h *h, uint64_t size,
                uint64_t chunk, uint64_t iova, uint64_t dev, struct lh_pool *p);
void lh_pool_free(const struct ntbf_backend_ops *ops, struct ntbf_adapter_h *h, struct lh_pool *p);
/* Physical address in the borrower of byte off of the pool. */
uint64_t lh_pool_phys(const struct lh_pool *p, uint64_t off);

/*
 * Memory Space Enable and Bus Master Enable in the command register of a function's config
 * region (ntbf_sim_cfg): what the borrower's config cycle, forwarded to the lender, does. Both
 * bits are plain read-write bits, so setting them in the values page is that config write.
 */
void lh_cfg_enable(uint8_t *cfg);

/* A position-dependent pattern: byte pos + i of stream seed. */
void lh_pattern(uint64_t seed, uint64_t pos, void *buf, uint64_t len);
/* Index of the first byte of buf that differs from lh_pattern(seed, pos), or -1. */
int64_t lh_pattern_check(uint64_t seed, uint64_t pos, const void *buf, uint64_t len);
/* Index of the first byte of buf that is not v, or -1. */
int64_t lh_bytes_check(const void *buf, uint8_t v, uint64_t len);

#endif
