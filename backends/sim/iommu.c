/* backends/sim/iommu.c: a host's IOMMU for inbound NTB traffic, a 2-level radix page table. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim.h"

/*
 * The file iommu-<node> holds the page tables of one host, shared by every process:
 *
 *   [0, 4 KiB)         header: the leaf allocator
 *   [4 KiB, +1 MiB)    level 1: 2^18 words, leaf index + 1 (0: no leaf yet)
 *   [2 MiB, ...)       leaves: 2^18 page-table entries of 8 bytes each (2 MiB, 1 GiB of IOVA)
 *
 * A 48-bit IOVA is 36 bits of page number: 18 bits index level 1, 18 bits the leaf. An
 * entry is the physical page with bit 0 set. Mapping or unmapping a page is one
 * compare-and-swap or store of its entry (O(1), no lock, no syscall once the file is
 * mapped); a leaf is installed with one compare-and-swap of its level-1 word. The file is
 * sparse: only touched leaves cost memory.
 */
#define L1_BITS    18
#define L2_BITS    18
#define L1_OFF     4096u
#define LEAF0_OFF  (2u << 20)
#define LEAF_SIZE  ((uint64_t)8 << L2_BITS)
#define MAX_LEAVES 2048u /* 2 TiB of IOVA mapped in distinct 1 GiB areas at once */
#define PTE_VALID  UINT64_C(1)

struct iommu_hdr {
        uint64_t magic;
        _Atomic uint32_t next_leaf;
};

static uint64_t iommu_file_size(void)
{
        return LEAF0_OFF + (uint64_t)MAX_LEAVES * LEAF_SIZE;
}

/* This process's mapping of node's tables; create: make the file if it does not exist. */
static uint8_t *iommu_base(struct ntbf_sim *s, uint32_t node, bool create)
{
        struct sim_file *f = &s->iommu[node];
        uint8_t *p = atomic_load_explicit(&f->base, memory_order_acquire);
        if (likely(p))
                return p;
        if (!create && !atomic_load_explicit(&s->nodes[node].iommu_ready, memory_order_acquire))
                return NULL;
        pthread_mutex_lock(&s->file_lock);
        p = atomic_load(&f->base);
        if (!p) {
                char path[PATH_MAX + 64];
                snprintf(path, sizeof(path), "%s/iommu-%s", s->dir, s->t->nodes[node].name);
                uint64_t size = iommu_file_size();
                int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
                struct stat st;
                if (fd >= 0 && !fstat(fd, &st) &&
                    ((uint64_t)st.st_size >= size || !ftruncate(fd, (off_t)size))) {
                        void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                        if (m != MAP_FAILED) {
                                f->fd = fd;
                                f->size = size;
                                p = m;
                                atomic_store_explicit(&f->base, p, memory_order_release);
                                atomic_store_explicit(&s->nodes[node].iommu_ready, 1,
                                                      memory_order_release);
                                fd = -1;
                        }
                }
                if (fd >= 0)
                        close(fd);
        }
        pthread_mutex_unlock(&s->file_lock);
        return p;
}

static _Atomic uint64_t *leaf_of(uint8_t *base, uint64_t l1, bool create)
{
        _Atomic uint32_t *dir = (_Atomic uint32_t *)(base + L1_OFF);
        uint32_t v = atomic_load_explicit(&dir[l1], memory_order_acquire);
        if (!v) {
                if (!create)
                        return NULL;
                struct iommu_hdr *h = (struct iommu_hdr *)base;
                uint32_t idx = atomic_fetch_add(&h->next_leaf, 1);
                if (idx >= MAX_LEAVES)
                        return NULL;
                /* A fresh leaf is all zeros (sparse file). If another mapper installed one
                 * first, ours stays unused: a bounded loss, never an inconsistency. */
                uint32_t expect = 0;
                if (atomic_compare_exchange_strong(&dir[l1], &expect, idx + 1))
                        v = idx + 1;
                else
                        v = expect;
        }
        return (_Atomic uint64_t *)(base + LEAF0_OFF + (uint64_t)(v - 1) * LEAF_SIZE);
}

static bool range_ok(uint64_t a, uint64_t len)
{
        return !(a % SIM_PAGE) && a < SIM_ADDR_LIMIT && len <= SIM_ADDR_LIMIT - a;
}

static void unmap_pages(uint8_t *base, uint64_t pn, uint64_t n)
{
        _Atomic uint64_t *leaf = NULL;
        uint64_t cur = UINT64_MAX;
        for (uint64_t i = 0; i < n; i++, pn++) {
                uint64_t l1 = pn >> L2_BITS;
                if (l1 != cur) {
                        cur = l1;
                        leaf = leaf_of(base, l1, false);
                }
                if (leaf)
                        atomic_store_explicit(&leaf[pn & ((1u << L2_BITS) - 1)], 0,
                                              memory_order_release);
        }
}

int ntbf__sim_iommu_map(struct ntbf_sim *s, uint32_t node, uint64_t iova, uint64_t phys,
                        uint64_t len)
{
        if (!len || len % SIM_PAGE || !range_ok(iova, len) || !range_ok(phys, len))
                return -EINVAL;
        uint8_t *base = iommu_base(s, node, true);
        if (!base)
                return -ENOMEM;
        uint64_t pn = iova / SIM_PAGE, n = len / SIM_PAGE;
        _Atomic uint64_t *leaf = NULL;
        uint64_t cur = UINT64_MAX;
        for (uint64_t i = 0; i < n; i++) {
                uint64_t p = pn + i, l1 = p >> L2_BITS;
                if (l1 != cur) {
                        cur = l1;
                        leaf = leaf_of(base, l1, true);
                }
                int err = 0;
                if (!leaf) {
                        err = -ENOSPC;
                } else {
                        uint64_t expect = 0;
                        uint64_t pte = (phys + i * SIM_PAGE) | PTE_VALID;
                        if (!atomic_compare_exchange_strong_explicit(
                                &leaf[p & ((1u << L2_BITS) - 1)], &expect, pte,
                                memory_order_release, memory_order_relaxed))
                                err = -EEXIST; /* as Linux iommu_map: never remap silently */
                }
                if (err) {
                        unmap_pages(base, pn, i);
                        return err;
                }
        }
        return 0;
}

int ntbf__sim_iommu_unmap(struct ntbf_sim *s, uint32_t node, uint64_t iova, uint64_t len)
{
        if (!len || len % SIM_PAGE || !range_ok(iova, len))
                return -EINVAL;
        uint8_t *base = iommu_base(s, node, false);
        if (base)
                unmap_pages(base, iova / SIM_PAGE, len / SIM_PAGE);
        return 0;
}

uint64_t ntbf__sim_iommu_lookup(struct ntbf_sim *s, uint32_t node, uint64_t iova)
{
        if (iova >= SIM_ADDR_LIMIT)
                return UINT64_MAX;
        uint8_t *base = iommu_base(s, node, false);
        if (!base)
                return UINT64_MAX;
        uint64_t pn = iova / SIM_PAGE;
        _Atomic uint64_t *leaf = leaf_of(base, pn >> L2_BITS, false);
        if (!leaf)
                return UINT64_MAX;
        uint64_t pte =
            atomic_load_explicit(&leaf[pn & ((1u << L2_BITS) - 1)], memory_order_acquire);
        if (!(pte & PTE_VALID))
                return UINT64_MAX;
        return (pte & ~(uint64_t)(SIM_PAGE - 1)) | (iova % SIM_PAGE);
}

void ntbf__sim_iommu_wipe(struct ntbf_sim *s, uint32_t node)
{
        /* A rebooted host has empty page tables. Punching the file keeps its size, so other
         * processes' mappings stay valid and read zeros (no entries, no leaves). */
        uint8_t *base = iommu_base(s, node, false);
        if (!base)
                return;
        fallocate(s->iommu[node].fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                  (off_t)s->iommu[node].size);
}
