/* frontends/lending/iova.h: the I/O virtual page allocator behind ntbf_dev_dma_map (a buddy). */
#ifndef NTBF_LENDING_IOVA_H
#define NTBF_LENDING_IOVA_H

#include <stdint.h>

/*
 * A buddy allocator over the pages of one handle's share of a DMA window. Page indexes
 * are relative to the share; the caller turns them into IOVAs. Single pages are O(1) whatever the
 * number of live allocations: freed pages go to a small LIFO cache first (reused hot,
 * IOTLB-friendly), and otherwise come off the order-0 free list, or at worst from splitting the
 * smallest free block (at most 32 steps). Multi-page ranges take the block of the next power of two
 * and give back its tail, so a range of n pages costs n pages of IOVA, naturally aligned to its
 * order.
 *
 * Per page: one byte of state and two 32-bit links (9 bytes; a 4 GiB share of 1M pages costs
 * 9 MiB of address space, touched only where blocks start). Not thread-safe: the device
 * holds its lock around every call.
 */

#define NTBF__IOVA_NONE UINT32_MAX

struct ntbf__iova {
        uint32_t npages;
        uint32_t used;     /* pages held by live allocations */
        uint8_t *meta;     /* per page: free block start (order), allocation start, cached */
        uint32_t *next;    /* free list links; for an allocation's first page: its length */
        uint32_t *prev;    /* free list links */
        uint32_t head[33]; /* free list of each order */
        uint32_t cache[64];
        uint32_t ncache;
};

/* A share of npages pages (at most 2^32 - 2). Returns 0 or -ENOMEM. */
int ntbf__iova_init(struct ntbf__iova *a, uint32_t npages);
void ntbf__iova_fini(struct ntbf__iova *a);
/* n contiguous pages: the first page's index, or NTBF__IOVA_NONE when no run of n is free. */
uint32_t ntbf__iova_alloc(struct ntbf__iova *a, uint32_t n);
/* Pages of the live allocation starting at page idx, or 0 if no allocation starts there. */
uint32_t ntbf__iova_len(const struct ntbf__iova *a, uint32_t idx);
/* Free the allocation starting at idx. Returns 0, or -ENOENT if none starts there. */
int ntbf__iova_free(struct ntbf__iova *a, uint32_t idx);
/* Call fn for every live allocation (first page, length); for closing a device. */
void ntbf__iova_each(const struct ntbf__iova *a, void (*fn)(void *arg, uint32_t idx, uint32_t n),
                     void *arg);

#endif
