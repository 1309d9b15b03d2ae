/* frontends/lending/maptab.h: live DMA mappings that have no IOVA of their own (a hash table). */
#ifndef NTBF_LENDING_MAPTAB_H
#define NTBF_LENDING_MAPTAB_H

#include <stdint.h>

/*
 * When a device reaches memory without an IOVA allocator in between (a local device that
 * uses host-physical addresses, or a borrower without an IOMMU whose DMA window covers its
 * RAM), the device address is a function of the memory: mapping the same buffer twice gives
 * the same address. The table remembers (address, pages) with a count so that unmapping is
 * checked (an address never mapped, or unmapped once too often, is refused) and closing a
 * device knows what is left. Open addressing with linear probing and backward-shift
 * deletion: O(1) expected, no tombstones. Not thread-safe: the device's lock covers it.
 */

struct ntbf__maptab_ent {
        uint64_t addr; /* first page's device address; 0 = empty slot (address 0 is never DMA
                          memory: the backends hand out memory above the first MiB) */
        uint32_t pages;
        uint32_t refs;
};

struct ntbf__maptab {
        struct ntbf__maptab_ent *v;
        uint32_t cap, n; /* cap is a power of two */
};

void ntbf__maptab_fini(struct ntbf__maptab *t);
/* Count one more mapping of (addr, pages); *refs (may be NULL): the count now. 0 or -ENOMEM. */
int ntbf__maptab_get(struct ntbf__maptab *t, uint64_t addr, uint32_t pages, uint32_t *refs);
/* Drop one; *refs (may be NULL): what is left. 0, or -ENOENT when (addr, pages) is not mapped. */
int ntbf__maptab_put(struct ntbf__maptab *t, uint64_t addr, uint32_t pages, uint32_t *refs);
/* Every live entry (with its count); for closing a device. */
void ntbf__maptab_each(const struct ntbf__maptab *t,
                       void (*fn)(void *arg, uint64_t addr, uint32_t pages, uint32_t refs),
                       void *arg);

#endif
