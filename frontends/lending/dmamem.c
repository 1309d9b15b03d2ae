/* frontends/lending/dmamem.c: DMA memory: backend chunks, a buddy inside them, pointer lookup. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ntbfab/error.h"
#include "dmamem.h"

#define GRANULES (NTBF__DMA_CHUNK / NTBF__DMA_GRANULE)

static bool test_bit(const uint64_t *map, uint64_t i)
{
        return map[i / 64] >> (i % 64) & 1;
}

static void set_bit(uint64_t *map, uint64_t i)
{
        map[i / 64] |= UINT64_C(1) << (i % 64);
}

static void clear_bit(uint64_t *map, uint64_t i)
{
        map[i / 64] &= ~(UINT64_C(1) << (i % 64));
}

static uint64_t words_of(unsigned k)
{
        uint64_t bits = GRANULES >> k;
        return (bits + 63) / 64;
}

void ntbf__dmamem_init(struct ntbf__dmamem *m, const struct ntbf_backend_ops *ops,
                       struct ntbf_adapter_h *h)
{
        memset(m, 0, sizeof(*m));
        pthread_mutex_init(&m->lock, NULL);
        m->ops = ops;
        m->h = h;
}

/*
 * A chunk of memfd memory: shared, so another process can map it (ntbf_dma_fd), and pinned
 * by VFIO when a device maps it. Its "bus address" is its address in this process: VFIO
 * maps by virtual address, and there is no physical address a process could use anyway.
 */
static int memfd_alloc(uint64_t size, uint64_t align, struct ntbf_mem *out)
{
        int fd = memfd_create("ntbfab-dma", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (ftruncate(fd, (off_t)size)) {
                int e = -errno;
                close(fd);
                return e;
        }
        /* Reserve room to align the start, then place the file there. */
        uint64_t extra = align > 4096 ? align : 0;
        uint8_t *res = mmap(NULL, size + extra, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (res == MAP_FAILED) {
                close(fd);
                return -ENOMEM;
        }
        uint8_t *at =
            extra ? (uint8_t *)(((uintptr_t)res + align - 1) & ~(uintptr_t)(align - 1)) : res;
        void *p = mmap(at, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
        if (p == MAP_FAILED) {
                int e = -errno;
                munmap(res, size + extra);
                close(fd);
                return e;
        }
        if (at > res)
                munmap(res, (size_t)(at - res));
        if (res + size + extra > at + size)
                munmap(at + size, (size_t)(res + size + extra - (at + size)));
        *out = (struct ntbf_mem){p, size, (uint64_t)(uintptr_t)p, fd, 0};
        return 0;
}

static void chunk_free(struct ntbf__dmamem *m, struct ntbf__dmachunk *c)
{
        if (m->memfd && c->mem.addr) {
                munmap(c->mem.addr, c->mem.size);
                close(c->mem.fd);
        } else if (m->ops && m->ops->mem_free && c->mem.addr)
                m->ops->mem_free(m->h, &c->mem);
        free(c->freemap[0]);
        free(c);
}

void ntbf__dmamem_fini(struct ntbf__dmamem *m)
{
        for (uint32_t i = 0; i < m->nchunks; i++)
                chunk_free(m, m->chunks[i]);
        free(m->chunks);
        free(atomic_load(&m->tab));
        for (uint32_t i = 0; i < m->nretired; i++)
                free(m->retired[i]);
        free(m->retired);
        pthread_mutex_destroy(&m->lock);
        memset(m, 0, sizeof(*m));
}

/* ---- the lookup table (seqlock writers hold m->lock) ------------------------------------- */

static void write_begin(struct ntbf__dmamem *m)
{
        atomic_store_explicit(&m->seq, atomic_load_explicit(&m->seq, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        atomic_thread_fence(memory_order_release);
}

static void write_end(struct ntbf__dmamem *m)
{
        atomic_store_explicit(&m->seq, atomic_load_explicit(&m->seq, memory_order_relaxed) + 1,
                              memory_order_release);
}

static void ent_copy(struct ntbf__dmaent *dst, struct ntbf__dmaent *src)
{
        atomic_store_explicit(&dst->addr, atomic_load_explicit(&src->addr, memory_order_relaxed),
                              memory_order_relaxed);
        atomic_store_explicit(&dst->size, atomic_load_explicit(&src->size, memory_order_relaxed),
                              memory_order_relaxed);
        atomic_store_explicit(&dst->bus, atomic_load_explicit(&src->bus, memory_order_relaxed),
                              memory_order_relaxed);
}

static int tab_insert(struct ntbf__dmamem *m, const struct ntbf_mem *mem)
{
        uint32_t n = atomic_load_explicit(&m->ntab, memory_order_relaxed);
        struct ntbf__dmaent *tab = atomic_load_explicit(&m->tab, memory_order_relaxed);
        if (n == m->captab) {
                /* Grow into a new array; the old one stays readable for readers in flight. */
                uint32_t cap = m->captab ? m->captab * 2 : 16;
                struct ntbf__dmaent *nt = calloc(cap, sizeof(*nt));
                struct ntbf__dmaent **rt =
                    realloc(m->retired, (m->nretired + 1) * sizeof(*m->retired));
                if (!nt || !rt) {
                        free(nt);
                        if (rt)
                                m->retired = rt;
                        return -ENOMEM;
                }
                m->retired = rt;
                for (uint32_t i = 0; i < n; i++)
                        ent_copy(&nt[i], &tab[i]);
                if (tab)
                        m->retired[m->nretired++] = tab;
                atomic_store_explicit(&m->tab, nt, memory_order_release);
                m->captab = cap;
                tab = nt;
        }
        uint64_t addr = (uint64_t)(uintptr_t)mem->addr;
        uint32_t at = 0;
        while (at < n && atomic_load_explicit(&tab[at].addr, memory_order_relaxed) < addr)
                at++;
        write_begin(m);
        for (uint32_t i = n; i > at; i--)
                ent_copy(&tab[i], &tab[i - 1]);
        atomic_store_explicit(&tab[at].addr, addr, memory_order_relaxed);
        atomic_store_explicit(&tab[at].size, mem->size, memory_order_relaxed);
        atomic_store_explicit(&tab[at].bus, mem->bus_addr, memory_order_relaxed);
        atomic_store_explicit(&m->ntab, n + 1, memory_order_relaxed);
        write_end(m);
        return 0;
}

static void tab_remove(struct ntbf__dmamem *m, const struct ntbf_mem *mem)
{
        uint32_t n = atomic_load_explicit(&m->ntab, memory_order_relaxed);
        struct ntbf__dmaent *tab = atomic_load_explicit(&m->tab, memory_order_relaxed);
        uint64_t addr = (uint64_t)(uintptr_t)mem->addr;
        for (uint32_t at = 0; at < n; at++) {
                if (atomic_load_explicit(&tab[at].addr, memory_order_relaxed) != addr)
                        continue;
                write_begin(m);
                for (uint32_t i = at; i + 1 < n; i++)
                        ent_copy(&tab[i], &tab[i + 1]);
                atomic_store_explicit(&m->ntab, n - 1, memory_order_relaxed);
                write_end(m);
                return;
        }
}

int ntbf__dmamem_bus(struct ntbf__dmamem *m, const void *ptr, uint64_t len, uint64_t *bus)
{
        uint64_t p = (uint64_t)(uintptr_t)ptr;
        for (;;) {
                uint32_t s = atomic_load_explicit(&m->seq, memory_order_acquire);
                if (s & 1)
                        continue; /* a writer is moving entries: a few stores, retry */
                struct ntbf__dmaent *tab = atomic_load_explicit(&m->tab, memory_order_acquire);
                uint32_t lo = 0, hi = atomic_load_explicit(&m->ntab, memory_order_relaxed);
                int r = -EFAULT;
                uint64_t b = 0;
                /* The last entry whose addr <= p. */
                while (lo < hi) {
                        uint32_t mid = lo + (hi - lo) / 2;
                        if (atomic_load_explicit(&tab[mid].addr, memory_order_relaxed) <= p)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                if (lo) {
                        struct ntbf__dmaent *e = &tab[lo - 1];
                        uint64_t a = atomic_load_explicit(&e->addr, memory_order_relaxed);
                        uint64_t sz = atomic_load_explicit(&e->size, memory_order_relaxed);
                        if (p - a < sz && len <= sz - (p - a)) {
                                b = atomic_load_explicit(&e->bus, memory_order_relaxed) + (p - a);
                                r = 0;
                        }
                }
                atomic_thread_fence(memory_order_acquire);
                if (atomic_load_explicit(&m->seq, memory_order_relaxed) != s)
                        continue;
                if (!r)
                        *bus = b;
                return r;
        }
}

/* ---- the buddy inside small chunks -------------------------------------------------------- */

static unsigned order_for(size_t size, size_t align)
{
        uint64_t want = size > align ? size : align;
        unsigned k = 0;
        while (((uint64_t)NTBF__DMA_GRANULE << k) < want)
                k++;
        return k;
}

/* The number of chunks starting at or below p (the index of the first one above p). */
static uint32_t chunk_index(const struct ntbf__dmamem *m, const void *p)
{
        uint32_t lo = 0, hi = m->nchunks;
        while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if ((const uint8_t *)m->chunks[mid]->mem.addr <= (const uint8_t *)p)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static struct ntbf__dmachunk *chunk_new(struct ntbf__dmamem *m, uint64_t size, uint64_t align,
                                        bool big, int *err)
{
        struct ntbf__dmachunk *c = calloc(1, sizeof(*c));
        if (!c) {
                *err = -ENOMEM;
                return NULL;
        }
        if (!big) {
                uint64_t words = 0;
                for (unsigned k = 0; k < NTBF__DMA_ORDERS; k++)
                        words += 2 * words_of(k);
                uint64_t *bits = calloc(words, sizeof(uint64_t));
                if (!bits) {
                        free(c);
                        *err = -ENOMEM;
                        return NULL;
                }
                for (unsigned k = 0; k < NTBF__DMA_ORDERS; k++) {
                        c->freemap[k] = bits;
                        bits += words_of(k);
                        c->usedmap[k] = bits;
                        bits += words_of(k);
                }
                set_bit(c->freemap[NTBF__DMA_ORDERS - 1], 0);
                c->nfree[NTBF__DMA_ORDERS - 1] = 1;
        }
        c->big = big;
        int r = m->memfd ? memfd_alloc(size, align, &c->mem)
                         : m->ops->mem_alloc(m->h, size, align, &c->mem);
        if (r) {
                c->mem.addr = NULL;
                chunk_free(m, c);
                *err = r;
                return NULL;
        }
        if (m->nchunks == m->capchunks) {
                uint32_t cap = m->capchunks ? m->capchunks * 2 : 8;
                struct ntbf__dmachunk **v = realloc(m->chunks, cap * sizeof(*v));
                if (!v) {
                        chunk_free(m, c);
                        *err = -ENOMEM;
                        return NULL;
                }
                m->chunks = v;
                m->capchunks = cap;
        }
        r = tab_insert(m, &c->mem);
        if (r) {
                chunk_free(m, c);
                *err = r;
                return NULL;
        }
        /* Kept sorted by address, like the table, so a free finds its chunk by bisection. */
        uint32_t at = chunk_index(m, c->mem.addr);
        memmove(m->chunks + at + 1, m->chunks + at, (m->nchunks - at) * sizeof(*m->chunks));
        m->chunks[at] = c;
        m->nchunks++;
        return c;
}

/* Take a block of order k from chunk c, splitting a larger one. Returns the granule index. */
static int64_t chunk_take(struct ntbf__dmachunk *c, unsigned k)
{
        unsigned j = k;
        while (j < NTBF__DMA_ORDERS && !c->nfree[j])
                j++;
        if (j == NTBF__DMA_ORDERS)
                return -1;
        uint64_t idx = 0;
        for (uint64_t w = 0; w < words_of(j); w++) {
                if (c->freemap[j][w]) {
                        idx = w * 64 + (uint64_t)__builtin_ctzll(c->freemap[j][w]);
                        break;
                }
        }
        clear_bit(c->freemap[j], idx);
        c->nfree[j]--;
        uint64_t g = idx << j; /* granule index of the block */
        while (j > k) {
                j--;
                /* Split: the upper half stays free at order j. */
                set_bit(c->freemap[j], (g >> j) + 1);
                c->nfree[j]++;
        }
        set_bit(c->usedmap[k], g >> k);
        c->used += (uint64_t)NTBF__DMA_GRANULE << k;
        return (int64_t)g;
}

static void chunk_give(struct ntbf__dmachunk *c, uint64_t g, unsigned k)
{
        clear_bit(c->usedmap[k], g >> k);
        c->used -= (uint64_t)NTBF__DMA_GRANULE << k;
        while (k + 1 < NTBF__DMA_ORDERS) {
                uint64_t buddy = (g >> k) ^ 1;
                if (!test_bit(c->freemap[k], buddy))
                        break;
                clear_bit(c->freemap[k], buddy);
                c->nfree[k]--;
                g &= ~((UINT64_C(1) << (k + 1)) - 1);
                k++;
        }
        set_bit(c->freemap[k], g >> k);
        c->nfree[k]++;
}

int ntbf__dmamem_alloc(struct ntbf__dmamem *m, size_t size, size_t align, void **out)
{
        if (!out || !size || (align && (align & (align - 1))))
                return -EINVAL;
        if (!align)
                align = 4096;
        if (size > UINT64_MAX / 2 || align > UINT64_MAX / 2)
                return -ENOMEM;
        if (!m->memfd && (!m->ops || !m->ops->mem_alloc))
                return NTBF_EUNSUPPORTED;
        int r = 0;
        pthread_mutex_lock(&m->lock);
        if (size > NTBF__DMA_BIG || align > NTBF__DMA_BIG) {
                uint64_t bytes = (size + 4095) & ~(uint64_t)4095;
                struct ntbf__dmachunk *c = chunk_new(m, bytes, align, true, &r);
                pthread_mutex_unlock(&m->lock);
                if (!c)
                        return r;
                memset(c->mem.addr, 0, bytes);
                *out = c->mem.addr;
                return 0;
        }
        unsigned k = order_for(size, align);
        int64_t g = -1;
        struct ntbf__dmachunk *c = NULL;
        for (uint32_t i = 0; i < m->nchunks && g < 0; i++) {
                if (m->chunks[i]->big)
                        continue;
                c = m->chunks[i];
                g = chunk_take(c, k);
        }
        if (g < 0) {
                c = chunk_new(m, NTBF__DMA_CHUNK, NTBF__DMA_CHUNK, false, &r);
                if (c)
                        g = chunk_take(c, k);
        }
        pthread_mutex_unlock(&m->lock);
        if (g < 0)
                return r ? r : -ENOMEM;
        void *p = (uint8_t *)c->mem.addr + (uint64_t)g * NTBF__DMA_GRANULE;
        memset(p, 0, (size_t)NTBF__DMA_GRANULE << k);
        *out = p;
        return 0;
}

int ntbf__dmamem_free(struct ntbf__dmamem *m, void *ptr)
{
        if (!ptr)
                return 0;
        int r = -EINVAL;
        uint8_t *p = ptr;
        pthread_mutex_lock(&m->lock);
        uint32_t i = chunk_index(m, p);
        struct ntbf__dmachunk *c = i ? m->chunks[i - 1] : NULL;
        uint8_t *base = c ? c->mem.addr : NULL;
        if (!c || p >= base + c->mem.size) {
                /* not ours */
        } else if (c->big) {
                if (p == base) {
                        tab_remove(m, &c->mem);
                        memmove(m->chunks + i - 1, m->chunks + i,
                                (m->nchunks - i) * sizeof(*m->chunks));
                        m->nchunks--;
                        chunk_free(m, c);
                        r = 0;
                }
        } else if ((uint64_t)(p - base) % NTBF__DMA_GRANULE == 0) {
                uint64_t g = (uint64_t)(p - base) / NTBF__DMA_GRANULE;
                for (unsigned k = 0; k < NTBF__DMA_ORDERS; k++) {
                        if (g & ((UINT64_C(1) << k) - 1))
                                break;
                        if (test_bit(c->usedmap[k], g >> k)) {
                                chunk_give(c, g, k);
                                r = 0;
                                break;
                        }
                }
        }
        pthread_mutex_unlock(&m->lock);
        return r;
}

int ntbf__dmamem_fd(struct ntbf__dmamem *m, const void *ptr, int *fd, uint64_t *offset)
{
        int r = -EFAULT;
        const uint8_t *p = ptr;
        pthread_mutex_lock(&m->lock);
        uint32_t i = chunk_index(m, p);
        struct ntbf__dmachunk *c = i ? m->chunks[i - 1] : NULL;
        if (c && p < (const uint8_t *)c->mem.addr + c->mem.size) {
                r = c->mem.fd >= 0 ? 0 : NTBF_EUNSUPPORTED;
                *fd = c->mem.fd;
                *offset = c->mem.offset + (uint64_t)(p - (const uint8_t *)c->mem.addr);
        }
        pthread_mutex_unlock(&m->lock);
        return r;
}
