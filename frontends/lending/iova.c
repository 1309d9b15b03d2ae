/* frontends/lending/iova.c: a buddy allocator of I/O virtual pages, O(1) for single pages. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "iova.h"

/*
 * meta[] of a page: 0 inside a block (or not a block start), M_FREE | order at the start
 * of a free block, M_USED at the start of a live allocation (next[] holds its length),
 * M_CACHED for a freed single page parked in the cache. Only M_FREE blocks take part in
 * coalescing, so cached pages simply look busy to their buddies.
 */
#define M_FREE   0x40
#define M_USED   0x80
#define M_CACHED 0xc0
#define NONE     NTBF__IOVA_NONE
#define MAXORD   32

static void push(struct ntbf__iova *a, uint32_t i, unsigned k)
{
        a->meta[i] = (uint8_t)(M_FREE | k);
        a->prev[i] = NONE;
        a->next[i] = a->head[k];
        if (a->head[k] != NONE)
                a->prev[a->head[k]] = i;
        a->head[k] = i;
}

static void unlink_block(struct ntbf__iova *a, uint32_t i, unsigned k)
{
        if (a->prev[i] != NONE)
                a->next[a->prev[i]] = a->next[i];
        else
                a->head[k] = a->next[i];
        if (a->next[i] != NONE)
                a->prev[a->next[i]] = a->prev[i];
        a->meta[i] = 0;
}

/* Free the aligned block [i, i + 2^k) and merge it with its free buddies. */
static void free_block(struct ntbf__iova *a, uint32_t i, unsigned k)
{
        while (k < MAXORD - 1) {
                uint64_t size = UINT64_C(1) << k;
                uint64_t b = i ^ size;
                if (b + size > a->npages || a->meta[b] != (M_FREE | k))
                        break;
                unlink_block(a, (uint32_t)b, k);
                a->meta[i] = 0;
                i = (uint32_t)(b < i ? b : i);
                k++;
        }
        push(a, i, k);
}

/* Free [i, end) as the largest aligned blocks that tile it. */
static void free_range(struct ntbf__iova *a, uint64_t i, uint64_t end)
{
        while (i < end) {
                unsigned k = 0;
                while (k + 1 < MAXORD && !(i & ((UINT64_C(2) << k) - 1)) &&
                       i + (UINT64_C(2) << k) <= end)
                        k++;
                free_block(a, (uint32_t)i, k);
                i += UINT64_C(1) << k;
        }
}

int ntbf__iova_init(struct ntbf__iova *a, uint32_t npages)
{
        memset(a, 0, sizeof(*a));
        if (!npages || npages == NONE)
                return -EINVAL;
        /* calloc: the kernel hands out zero pages lazily, so untouched ranges cost nothing. */
        a->meta = calloc(npages, 1);
        a->next = calloc(npages, sizeof(uint32_t));
        a->prev = calloc(npages, sizeof(uint32_t));
        if (!a->meta || !a->next || !a->prev) {
                ntbf__iova_fini(a);
                return -ENOMEM;
        }
        a->npages = npages;
        for (unsigned k = 0; k <= MAXORD; k++)
                a->head[k] = NONE;
        free_range(a, 0, npages);
        return 0;
}

void ntbf__iova_fini(struct ntbf__iova *a)
{
        free(a->meta);
        free(a->next);
        free(a->prev);
        memset(a, 0, sizeof(*a));
}

/* Return every cached page to the buddy lists (merging), oldest first. */
static void flush_cache(struct ntbf__iova *a, uint32_t count)
{
        for (uint32_t j = 0; j < count; j++) {
                a->meta[a->cache[j]] = 0;
                free_block(a, a->cache[j], 0);
        }
        memmove(a->cache, a->cache + count, (a->ncache - count) * sizeof(a->cache[0]));
        a->ncache -= count;
}

static unsigned order_of(uint32_t n)
{
        unsigned k = 0;
        while ((UINT64_C(1) << k) < n)
                k++;
        return k;
}

uint32_t ntbf__iova_alloc(struct ntbf__iova *a, uint32_t n)
{
        if (!n || n > a->npages)
                return NONE;
        if (n == 1 && a->ncache) {
                uint32_t i = a->cache[--a->ncache];
                a->meta[i] = M_USED;
                a->next[i] = 1;
                a->used++;
                return i;
        }
        unsigned k = order_of(n), j = k;
        for (;;) {
                while (j < MAXORD && a->head[j] == NONE)
                        j++;
                if (j < MAXORD)
                        break;
                if (!a->ncache)
                        return NONE;
                /* Cached pages may complete a larger block: give them back and look again. */
                flush_cache(a, a->ncache);
                j = k;
        }
        uint32_t i = a->head[j];
        unlink_block(a, i, j);
        while (j > k) {
                j--;
                push(a, i + (uint32_t)(UINT64_C(1) << j), j);
        }
        /* Keep exactly n pages: the tail of the power-of-two block goes back. */
        free_range(a, (uint64_t)i + n, (uint64_t)i + (UINT64_C(1) << k));
        a->meta[i] = M_USED;
        a->next[i] = n;
        a->used += n;
        return i;
}

uint32_t ntbf__iova_len(const struct ntbf__iova *a, uint32_t idx)
{
        if (idx >= a->npages || a->meta[idx] != M_USED)
                return 0;
        return a->next[idx];
}

int ntbf__iova_free(struct ntbf__iova *a, uint32_t idx)
{
        uint32_t n = ntbf__iova_len(a, idx);
        if (!n)
                return -ENOENT;
        a->used -= n;
        if (n == 1) {
                if (a->ncache == sizeof(a->cache) / sizeof(a->cache[0]))
                        flush_cache(a, a->ncache / 2);
                a->meta[idx] = M_CACHED;
                a->cache[a->ncache++] = idx;
                return 0;
        }
        a->meta[idx] = 0;
        free_range(a, idx, (uint64_t)idx + n);
        return 0;
}

void ntbf__iova_each(const struct ntbf__iova *a, void (*fn)(void *arg, uint32_t idx, uint32_t n),
                     void *arg)
{
        /* Free blocks are skipped whole, so this walks blocks, not pages, where it can. */
        for (uint64_t i = 0; i < a->npages;) {
                uint8_t m = a->meta[i];
                if (m == M_USED) {
                        fn(arg, (uint32_t)i, a->next[i]);
                        i += a->next[i];
                } else if ((m & 0xc0) == M_FREE) {
                        i += UINT64_C(1) << (m & 0x3f);
                } else {
                        i++;
                }
        }
}
