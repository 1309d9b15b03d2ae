/* frontends/lending/dmamem.h: DMA memory for ntbf_dma_alloc, carved from backend chunks. */
#ifndef NTBF_LENDING_DMAMEM_H
#define NTBF_LENDING_DMAMEM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ntbfab/backend.h"

/*
 * Memory comes from the backend's mem_alloc (physically contiguous, pinned), or, with
 * memfd set, from memfd files (devices behind VFIO: the IOMMU makes them contiguous): small
 * requests are carved from 2 MiB chunks by a buddy allocator with 64-byte granules, so they cost no
 * backend call once a chunk exists; requests over 1 MiB get a backend allocation of their
 * own. Small chunks are kept until the context closes; big ones go back when freed.
 *
 * Translating a pointer to its bus address is a binary search in a table of chunks sorted
 * by address (O(log chunks)), read without a lock under a sequence counter so that the DMA
 * mapping fast path never waits for an allocation in another thread.
 */

#define NTBF__DMA_CHUNK   (UINT64_C(2) << 20)
#define NTBF__DMA_GRANULE 64u
#define NTBF__DMA_ORDERS  16 /* granule << 15 == chunk */
#define NTBF__DMA_BIG     (NTBF__DMA_CHUNK / 2)

struct ntbf__dmachunk {
        struct ntbf_mem mem; /* the backend allocation */
        bool big;            /* one allocation of its own */
        /* Buddy state of a small chunk: per order, a bitmap of free blocks and one of
         * allocated block starts. */
        uint64_t *freemap[NTBF__DMA_ORDERS];
        uint64_t *usedmap[NTBF__DMA_ORDERS];
        uint32_t nfree[NTBF__DMA_ORDERS];
        uint64_t used; /* bytes handed out */
};

/* One entry of the lookup table: plain values, read atomically by lock-free readers. */
struct ntbf__dmaent {
        _Atomic uint64_t addr, size, bus;
};

struct ntbf__dmamem {
        pthread_mutex_t lock; /* allocations, frees, table updates */
        const struct ntbf_backend_ops *ops;
        struct ntbf_adapter_h *h; /* mem_alloc goes through this adapter of the node */
        bool memfd;               /* chunks are memfd memory instead (hardware backends) */
        struct ntbf__dmachunk **chunks;
        uint32_t nchunks, capchunks;
        /* The lookup table, sorted by addr. Grown by replacing the array: old arrays are
         * kept (readers may hold them) until fini; there are O(log) of them. */
        _Atomic(struct ntbf__dmaent *) tab;
        _Atomic uint32_t ntab;
        uint32_t captab;
        _Atomic uint32_t seq; /* odd while the table changes */
        struct ntbf__dmaent **retired;
        uint32_t nretired;
};

void ntbf__dmamem_init(struct ntbf__dmamem *m, const struct ntbf_backend_ops *ops,
                       struct ntbf_adapter_h *h);
/* Free every chunk (with the backend) and the tables. */
void ntbf__dmamem_fini(struct ntbf__dmamem *m);
/* Allocate size bytes aligned to align (a power of two; 0: 4 KiB), zeroed. 0 or -errno. */
int ntbf__dmamem_alloc(struct ntbf__dmamem *m, size_t size, size_t align, void **out);
/* Free what alloc returned. Returns 0, or -EINVAL if ptr is not a live allocation. */
int ntbf__dmamem_free(struct ntbf__dmamem *m, void *ptr);
/*
 * The bus address of [ptr, ptr + len), which must lie inside one chunk (memory from
 * ntbf__dmamem_alloc). Returns 0, or -EFAULT. Lock-free; safe against concurrent allocs.
 */
int ntbf__dmamem_bus(struct ntbf__dmamem *m, const void *ptr, uint64_t len, uint64_t *bus);
/* The fd and offset of the memory at ptr (to share it: mmap fd at offset). -EFAULT if not ours. */
int ntbf__dmamem_fd(struct ntbf__dmamem *m, const void *ptr, int *fd, uint64_t *offset);

#endif
