/* tests/integration/lendhand.c: Device Lending by hand on the simulated fabric (see lendhand.h). */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "ntbfab/error.h"
#include "lendhand.h"

static int rid_op(const struct ntbf_backend_ops *ops, struct ntbf_adapter_h *h,
                  const struct ntbf_topo *t, uint32_t dev, bool add)
{
        const struct ntbf_device *d = &t->devices[dev];
        for (uint32_t f = 0; f < ntbf_device_nfuncs(d); f++) {
                struct ntbf_rid r = {d->node, (uint16_t)ntbf_device_rid(d, f), 0xffff};
                int e = add ? ops->rid_add(h, &r, NULL) : ops->rid_del(h, &r);
                if (e && !(add && e == -EEXIST))
                        return e;
        }
        return 0;
}

int lh_rid_add(const struct ntbf_backend_ops *ops, struct ntbf_adapter_h *h,
               const struct ntbf_topo *t, uint32_t dev)
{
        return rid_op(ops, h, t, dev, true);
}

int lh_rid_del(const struct ntbf_backend_ops *ops, struct ntbf_adapter_h *h,
               const struct ntbf_topo *t, uint32_t dev)
{
        return rid_op(ops, h, t, dev, false);
}

int lh_dma_window(const struct ntbf_backend_ops *ops, struct ntbf_adapter_h *h,
                  const struct ntbf_topo *t, uint32_t la, uint32_t slot, uint32_t n, uint32_t ba,
                  uint64_t iova, uint64_t *dev)
{
        const struct ntbf_adapter *a = &t->adapters[la];
        uint64_t e = a->lut_entry_size;
        if (iova % e || slot + n > a->nslots)
                return -EINVAL;
        for (uint32_t i = 0; i < n; i++) {
                struct ntbf_xlat x = {t->adapters[ba].node, ba, iova + i * e, NTBF_NONE, e};
                int r = ops->xlat_set(h, slot + i, &x);
                if (r)
                        return r;
        }
        *dev = a->window_base + slot * e;
        return 0;
}

int lh_map_remote(const struct ntbf_backend_ops *ops, struct ntbf_adapter_h *h,
                  const struct ntbf_topo *t, uint32_t ba, uint32_t slot, uint32_t la, uint64_t addr,
                  uint64_t size, struct lh_map *m)
{
        const struct ntbf_adapter *b = &t->adapters[ba];
        uint64_t e = b->lut_entry_size, base = addr - addr % e;
        uint32_t n = (uint32_t)((addr + size - base + e - 1) / e);
        if (!size || slot + n > b->nslots)
                return -EINVAL;
        for (uint32_t i = 0; i < n; i++) {
                struct ntbf_xlat want = {t->adapters[la].node, la, base + i * e, NTBF_NONE, e},
                                 have;
                bool valid = false;
                if (ops->xlat_get && !ops->xlat_get(h, slot + i, &have, &valid) && valid &&
                    have.dst_adapter == la && have.addr == want.addr && have.size == want.size &&
                    have.mcast_group == NTBF_NONE)
                        continue;
                int r = ops->xlat_set(h, slot + i, &want);
                if (r)
                        return r;
        }
        void *p;
        int r = ops->map_window(h, 0, slot * e, n * e, NTBF_MAP_UNCACHED, &p);
        if (r)
                return r;
        m->base = p;
        m->size = n * e;
        m->addr = (uint8_t *)p + (addr - base);
        return 0;
}

void lh_unmap_remote(const struct ntbf_backend_ops *ops, struct ntbf_adapter_h *h, struct lh_map *m)
{
        if (m->base)
                ops->unmap_window(h, m->base, m->size);
        memset(m, 0, sizeof(*m));
}

int lh_pool_new(const struct ntbf_backend_ops *ops, struct ntbf_adapter_h *h, uint64_t size,
                uint64_t chunk, uint64_t iova, uint64_t dev, struct lh_pool *p)
{
        memset(p, 0, sizeof(*p));
        if (!chunk || chunk % 4096 || size % chunk || size / chunk > LH_MAX_CHUNKS || iova % 4096)
                return -EINVAL;
        p->size = size;
        p->chunk = chunk;
        p->iova = iova;
        p->dev = dev;
        void *va = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (va == MAP_FAILED)
                return -ENOMEM;
        p->va = va;
        /* A page between chunks keeps them apart physically: the IOMMU, not the allocator,
         * makes the range contiguous for the device. */
        struct ntbf_mem spacer[LH_MAX_CHUNKS];
        uint32_t nspacer = 0;
        int r = 0;
        for (uint64_t off = 0; off < size && !r; off += chunk) {
                struct ntbf_mem *m = &p->mem[p->nchunks];
                r = ops->mem_alloc(h, chunk, 0, m);
                if (r)
                        break;
                p->nchunks++;
                if (m->fd < 0) {
                        r = NTBF_EUNSUPPORTED;
                        break;
                }
                void *at = mmap(p->va + off, chunk, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                                m->fd, (off_t)m->offset);
                if (at == MAP_FAILED) {
                        r = -errno;
                        break;
                }
                r = ops->iommu_map(h, iova + off, m->bus_addr, chunk);
                if (r)
                        break;
                p->nmapped++;
                if (off + chunk < size && !ops->mem_alloc(h, 4096, 0, &spacer[nspacer]))
                        nspacer++;
        }
        for (uint32_t i = 0; i < nspacer; i++)
                ops->mem_free(h, &spacer[i]);
        if (r)
                lh_pool_free(ops, h, p);
        return r;
}

void lh_pool_free(const struct ntbf_backend_ops *ops, struct ntbf_adapter_h *h, struct lh_pool *p)
{
        for (uint32_t i = 0; i < p->nchunks; i++) {
                if (i < p->nmapped)
                        ops->iommu_unmap(h, p->iova + i * p->chunk, p->chunk);
                ops->mem_free(h, &p->mem[i]);
        }
        if (p->va)
                munmap(p->va, p->size);
        memset(p, 0, sizeof(*p));
}

uint64_t lh_pool_phys(const struct lh_pool *p, uint64_t off)
{
        return p->mem[off / p->chunk].bus_addr + off % p->chunk;
}

void lh_cfg_enable(uint8_t *cfg)
{
        /* Command register (offset 4): Memory Space Enable 0x2, Bus Master Enable 0x4. The
         * dword is changed by compare-and-swap, as every config-space change is (cfgspace.h). */
        __atomic_fetch_or((uint32_t *)(void *)(cfg + 4), 0x6u, __ATOMIC_ACQ_REL);
}

/* ---- patterns ------------------------------------------------------------------------------ */

static uint64_t mix(uint64_t x)
{
        x += UINT64_C(0x9e3779b97f4a7c15);
        x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
        return x ^ (x >> 31);
}

static uint8_t pat_byte(uint64_t seed, uint64_t at, uint64_t *wordi, uint64_t *word)
{
        if (at >> 3 != *wordi) {
                *wordi = at >> 3;
                *word = mix(seed * UINT64_C(0x100000001b3) ^ *wordi);
        }
        return (uint8_t)(*word >> (8 * (at & 7)));
}

void lh_pattern(uint64_t seed, uint64_t pos, void *buf, uint64_t len)
{
        uint8_t *b = buf;
        uint64_t wi = UINT64_MAX, w = 0;
        for (uint64_t i = 0; i < len; i++)
                b[i] = pat_byte(seed, pos + i, &wi, &w);
}

int64_t lh_pattern_check(uint64_t seed, uint64_t pos, const void *buf, uint64_t len)
{
        const uint8_t *b = buf;
        uint64_t wi = UINT64_MAX, w = 0;
        for (uint64_t i = 0; i < len; i++)
                if (b[i] != pat_byte(seed, pos + i, &wi, &w))
                        return (int64_t)i;
        return -1;
}

int64_t lh_bytes_check(const void *buf, uint8_t v, uint64_t len)
{
        const uint8_t *b = buf;
        for (uint64_t i = 0; i < len; i++)
                if (b[i] != v)
                        return (int64_t)i;
        return -1;
}
