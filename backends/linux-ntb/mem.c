/* backends/linux-ntb/mem.c: memory for export (pools of ntbfab_ntb buffers handed out in
 * pieces by the NTB's owner), its mappings, and interrupt vectors made of it (lntb.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../hostmem.h"
#include "lntb.h"
#include "ntbfab/error.h"

static uint64_t align_up(uint64_t v, uint64_t a)
{
        return (v + a - 1) & ~(a - 1);
}

static bool pow2(uint64_t v)
{
        return v && !(v & (v - 1));
}

/* ---- pools (the owner's) ----------------------------------------------------------------- */

/* The pool's buffer, allocated and mapped when first needed; lock held. */
static int pool_create(struct lntb *l, struct lntb_pool *p)
{
        struct ntbfab_buf_alloc ba = {.size = p->size};
        int r = lntb_ioctl(l, NTBFAB_IOC_BUF_ALLOC, &ba);
        if (r)
                return r == -EINVAL ? -ENOMEM : r; /* larger than max_buf_size */
        /* A translation from the start of the pool must meet the peers' window alignment. */
        if (ba.dma_addr % p->align || ba.size < p->size) {
                l->sys->close(ba.fd);
                return -ENOMEM;
        }
        void *va = l->sys->mmap(NULL, ba.size, PROT_READ | PROT_WRITE, MAP_SHARED, ba.fd, 0);
        if (va == MAP_FAILED) {
                r = -errno;
                l->sys->close(ba.fd);
                return r;
        }
        p->fd = ba.fd;
        p->va = va;
        p->dma = ba.dma_addr;
        p->size = ba.size;
        p->id = ba.id;
        return 0;
}

/* First fit in p for size bytes aligned to align: the offset, or UINT64_MAX. */
static uint64_t pool_fit(const struct lntb_pool *p, uint64_t size, uint64_t align, size_t *at)
{
        uint64_t from = 0;
        for (size_t i = 0; i <= p->n; i++) {
                uint64_t end = i < p->n ? p->a[i].off : p->size;
                /* The bus address is what is aligned. */
                uint64_t cand = align_up(p->dma + from, align) - p->dma;
                if (cand <= end && size <= end - cand) {
                        *at = i;
                        return cand;
                }
                if (i < p->n)
                        from = p->a[i].off + p->a[i].size;
        }
        return UINT64_MAX;
}

int lntb_pool_alloc(struct lntb *l, uint64_t client, uint64_t size, uint64_t align,
                    struct lntb_pool **pool, uint64_t *off)
{
        if (!size || (align && !pow2(align)))
                return -EINVAL;
        size = align_up(size, LNTB_PAGE);
        if (align < LNTB_PAGE)
                align = LNTB_PAGE;
        int r = -ENOMEM;
        /* Pools that exist first; a new one only when none of them has room. */
        for (uint32_t k = 0; k < 2 * l->npools; k++) {
                struct lntb_pool *p = &l->pool[k % l->npools];
                if (size > p->size || (p->fd < 0) != (k >= l->npools))
                        continue;
                if (p->fd < 0 && (r = pool_create(l, p)))
                        continue;
                size_t at;
                uint64_t o = pool_fit(p, size, align, &at);
                if (o == UINT64_MAX) {
                        r = -ENOMEM;
                        continue;
                }
                if (p->n == p->cap) {
                        size_t cap = p->cap ? 2 * p->cap : 16;
                        struct lntb_alloc *a = realloc(p->a, cap * sizeof(*a));
                        if (!a)
                                return -ENOMEM;
                        p->a = a;
                        p->cap = cap;
                }
                memmove(&p->a[at + 1], &p->a[at], (p->n - at) * sizeof(*p->a));
                p->a[at] = (struct lntb_alloc){o, size, client};
                p->n++;
                /* Memory for export is zeroed, whoever had it before. */
                memset(p->va + o, 0, size);
                *pool = p;
                *off = o;
                return 0;
        }
        return r;
}

int lntb_pool_free(struct lntb *l, uint64_t client, uint64_t bus)
{
        for (uint32_t i = 0; i < l->npools; i++) {
                struct lntb_pool *p = &l->pool[i];
                if (p->fd < 0 || bus < p->dma || bus - p->dma >= p->size)
                        continue;
                for (size_t k = 0; k < p->n; k++)
                        if (p->a[k].off == bus - p->dma && p->a[k].client == client) {
                                memmove(&p->a[k], &p->a[k + 1], (p->n - k - 1) * sizeof(*p->a));
                                p->n--;
                                return 0;
                        }
        }
        return -EINVAL;
}

struct lntb_pool *lntb_pool_find(struct lntb *l, uint64_t bus, uint64_t size, uint64_t *off,
                                 bool live)
{
        for (uint32_t i = 0; i < l->npools; i++) {
                struct lntb_pool *p = &l->pool[i];
                if (p->fd < 0 || bus < p->dma || bus - p->dma > p->size ||
                    size > p->size - (bus - p->dma))
                        continue;
                uint64_t o = bus - p->dma;
                if (live) {
                        bool in = false;
                        for (size_t k = 0; k < p->n && !in; k++)
                                in = o >= p->a[k].off && size <= p->a[k].size &&
                                     o - p->a[k].off <= p->a[k].size - size;
                        if (!in)
                                continue;
                }
                *off = o;
                return p;
        }
        return NULL;
}

/* ---- memory for export --------------------------------------------------------------------- */

/* Record a mapping of memory at bus (va, len: what to unmap; user, size: what the caller got). */
static int record(struct lntb *l, void *va, uint64_t len, void *user, uint64_t size, uint64_t bus)
{
        struct lntb_map *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        *m = (struct lntb_map){.va = va, .size = len, .user = user, .ulen = size, .bus = bus};
        pthread_mutex_lock(&l->lock);
        m->next = l->maps;
        l->maps = m;
        pthread_mutex_unlock(&l->lock);
        return 0;
}

/* Map [off, off + size) of fd (any alignment), memory at bus, and record it; *addr is the
 * first byte. */
static int map_piece(struct lntb *l, int fd, uint64_t off, uint64_t size, uint64_t bus, void **addr)
{
        uint64_t base = off & ~(LNTB_PAGE - 1), len = align_up(off + size, LNTB_PAGE) - base;
        uint8_t *va = l->sys->mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)base);
        if (va == MAP_FAILED)
                return -errno;
        int r = record(l, va, len, va + (off - base), size, bus);
        if (r)
                l->sys->munmap(va, len);
        else
                *addr = va + (off - base);
        return r;
}

int lntb_mem_alloc(struct lntb *l, uint64_t size, uint64_t align, struct ntbf_mem *out)
{
        if (!out || !size || (align && !pow2(align)))
                return -EINVAL;
        memset(out, 0, sizeof(*out));
        out->fd = -1;
        if (!l->owner) {
                struct lntb_relay_ans a;
                int fd = -1;
                int r = lntb_relay(l, LNTB_RELAY_MEM_ALLOC, size, align, &a, &fd);
                if (r)
                        return r;
                void *va;
                if ((r = map_piece(l, fd, a.off, a.size, a.bus, &va))) {
                        l->sys->close(fd);
                        lntb_relay(l, LNTB_RELAY_MEM_FREE, a.bus, 0, &a, NULL);
                        return r;
                }
                *out = (struct ntbf_mem){va, a.size, a.bus, fd, a.off};
                return 0;
        }
        pthread_mutex_lock(&l->lock);
        struct lntb_pool *p;
        uint64_t off;
        int r = lntb_pool_alloc(l, 0, size, align, &p, &off);
        int fd = r ? -1 : l->sys->dup(p->fd);
        if (!r && fd < 0) {
                r = -errno;
                lntb_pool_free(l, 0, p->dma + off);
        }
        if (!r)
                *out = (struct ntbf_mem){p->va + off, align_up(size, LNTB_PAGE), p->dma + off, fd,
                                         off};
        pthread_mutex_unlock(&l->lock);
        return r;
}

int lntb_mem_free(struct lntb *l, struct ntbf_mem *m)
{
        if (!m)
                return -EINVAL;
        int r;
        if (!l->owner) {
                r = lntb_unmap(l, m->addr, m->size, false);
                if (r)
                        return r;
                struct lntb_relay_ans a;
                r = lntb_relay(l, LNTB_RELAY_MEM_FREE, m->bus_addr, 0, &a, NULL);
        } else {
                pthread_mutex_lock(&l->lock);
                uint64_t off;
                struct lntb_pool *p = lntb_pool_find(l, m->bus_addr, m->size, &off, true);
                r = p && p->va + off == m->addr ? lntb_pool_free(l, 0, m->bus_addr) : -EINVAL;
                pthread_mutex_unlock(&l->lock);
        }
        if (!r && m->fd >= 0) {
                l->sys->close(m->fd);
                m->fd = -1;
        }
        return r;
}

int lntb_mem_map(struct lntb *l, uint64_t bus_addr, uint64_t size, void **addr)
{
        if (!addr || !size)
                return -EINVAL;
        if (!l->owner) {
                struct lntb_relay_ans a;
                int fd = -1;
                int r = lntb_relay(l, LNTB_RELAY_MEM_MAP, bus_addr, size, &a, &fd);
                if (r)
                        return r;
                r = map_piece(l, fd, a.off, size, bus_addr, addr);
                l->sys->close(fd); /* the mapping keeps the buffer */
                return r;
        }
        pthread_mutex_lock(&l->lock);
        uint64_t off;
        struct lntb_pool *p = lntb_pool_find(l, bus_addr, size, &off, true);
        int fd = p ? p->fd : -1;
        pthread_mutex_unlock(&l->lock);
        if (!p)
                return -EFAULT;
        return map_piece(l, fd, off, size, bus_addr, addr);
}

int lntb_mem_unmap(struct lntb *l, void *addr, uint64_t size)
{
        return lntb_unmap(l, addr, size, false);
}

int lntb_host_map(struct lntb *l, uint64_t addr, uint64_t size, void **out)
{
        if (!out || !size)
                return -EINVAL;
        int r = lntb_mem_map(l, addr, size, out);
        if (r != -EFAULT)
                return r;
        /* Not memory for export: a local device's BAR, or nothing this backend reaches. */
        void *p;
        if ((r = ntbf__pci_bar_map(l->sys->root, addr, size, &p)))
                return r;
        uint8_t *pg = (uint8_t *)((uintptr_t)p & ~(uintptr_t)(LNTB_PAGE - 1));
        uint64_t len = align_up((uint64_t)((uint8_t *)p - pg) + size, LNTB_PAGE);
        if ((r = record(l, pg, len, p, size, addr))) {
                ntbf__pci_bar_unmap(p, size);
                return r;
        }
        *out = p;
        return 0;
}

int lntb_host_unmap(struct lntb *l, void *addr, uint64_t size)
{
        return lntb_unmap(l, addr, size, false);
}

int lntb_host_bus(struct lntb *l, const void *addr, uint64_t size, uint64_t *bus)
{
        if (!addr || !size || !bus)
                return -EINVAL;
        const uint8_t *a = addr;
        int r = -EFAULT;
        pthread_mutex_lock(&l->lock);
        for (struct lntb_map *m = l->maps; m && r; m = m->next) {
                const uint8_t *u = m->user;
                if (!m->window && a >= u && (uint64_t)(a - u) < m->ulen &&
                    size <= m->ulen - (uint64_t)(a - u)) {
                        *bus = m->bus + (uint64_t)(a - u);
                        r = 0;
                }
        }
        /* The owner's pools: what its mem_alloc hands out, live pieces only. */
        for (uint32_t i = 0; l->owner && r && i < l->npools; i++) {
                const struct lntb_pool *p = &l->pool[i];
                uint64_t off;
                if (p->fd >= 0 && a >= p->va && (uint64_t)(a - p->va) < p->size &&
                    lntb_pool_find(l, p->dma + (uint64_t)(a - p->va), size, &off, true) == p) {
                        *bus = p->dma + off;
                        r = 0;
                }
        }
        pthread_mutex_unlock(&l->lock);
        return r;
}

/* ---- interrupt vectors ------------------------------------------------------------------------
 */

static int vec_alloc(struct ntbf_adapter_h *h, uint64_t size, uint64_t align, struct ntbf_mem *m)
{
        return lntb_mem_alloc((struct lntb *)h, size, align, m);
}

static int vec_free(struct ntbf_adapter_h *h, struct ntbf_mem *m)
{
        return lntb_mem_free((struct lntb *)h, m);
}

const struct ntbf__pollirq_mem lntb_irq_mem = {vec_alloc, vec_free};

int lntb_irq_alloc(struct lntb *l, struct ntbf_irq *out)
{
        return ntbf__pollirq_alloc(&l->b->irq, (struct ntbf_adapter_h *)l, out);
}

int lntb_irq_free(struct lntb *l, struct ntbf_irq *irq)
{
        return ntbf__pollirq_free(&l->b->irq, (struct ntbf_adapter_h *)l, irq);
}

int lntb_irq_trigger(struct lntb *l, uint64_t addr, uint32_t data)
{
        void *p;
        if (addr % 4)
                return -EINVAL;
        int r = lntb_mem_map(l, addr, 4, &p);
        if (r)
                return r == -EFAULT ? -EINVAL : r;
        atomic_store((_Atomic uint32_t *)p, data);
        return lntb_mem_unmap(l, p, 4);
}
