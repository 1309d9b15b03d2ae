/* backends/sim/iommu.c: a host's IOMMU for inbound NTB traffic, a 2-level radix page table. */
#include <errno.h>
#include <stdlib.h>
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

/*
 * Domains: 0 .. nnodes-1 are the hosts' IOMMUs for inbound NTB traffic (iommu-<node>);
 * nnodes + k is the isolation domain of device function k (iommu-<node>.<device>.<fn>;
 * names hold no dots, so the two never collide). Both use the same table format.
 */
static _Atomic uint32_t *dom_ready(struct ntbf_sim *s, uint32_t dom)
{
        return dom < s->t->nnodes ? &s->nodes[dom].iommu_ready
                                  : &s->funcs[dom - s->t->nnodes].dom_ready;
}

static void dom_path(struct ntbf_sim *s, uint32_t dom, char *path, size_t len)
{
        const struct ntbf_topo *t = s->t;
        if (dom < t->nnodes) {
                snprintf(path, len, "%s/iommu-%s", s->dir, t->nodes[dom].name);
                return;
        }
        const struct sim_func *f = &s->funcs[dom - t->nnodes];
        const struct ntbf_device *d = &t->devices[f->device];
        snprintf(path, len, "%s/iommu-%s.%s.%u", s->dir, t->nodes[d->node].name, d->name,
                 f->function);
}

/* This process's mapping of a domain's tables; create: make the file if it does not exist. */
static uint8_t *iommu_base(struct ntbf_sim *s, uint32_t dom, bool create)
{
        struct sim_file *f = &s->iommu[dom];
        uint8_t *p = atomic_load_explicit(&f->base, memory_order_acquire);
        if (likely(p))
                return p;
        if (!create && !atomic_load_explicit(dom_ready(s, dom), memory_order_acquire))
                return NULL;
        pthread_mutex_lock(&s->file_lock);
        p = atomic_load(&f->base);
        if (!p) {
                char path[PATH_MAX + 128];
                dom_path(s, dom, path, sizeof(path));
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
                                atomic_store_explicit(dom_ready(s, dom), 1, memory_order_release);
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

int ntbf__sim_dom_map(struct ntbf_sim *s, uint32_t node, uint64_t iova, uint64_t phys, uint64_t len)
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

int ntbf__sim_dom_unmap(struct ntbf_sim *s, uint32_t node, uint64_t iova, uint64_t len)
{
        if (!len || len % SIM_PAGE || !range_ok(iova, len))
                return -EINVAL;
        uint8_t *base = iommu_base(s, node, false);
        if (base)
                unmap_pages(base, iova / SIM_PAGE, len / SIM_PAGE);
        return 0;
}

void ntbf__sim_dom_each(struct ntbf_sim *s, uint32_t dom,
                        void (*fn)(void *arg, uint64_t iova, uint64_t phys), void *arg)
{
        uint8_t *base = iommu_base(s, dom, false);
        if (!base)
                return;
        for (uint64_t l1 = 0; l1 < (1u << L1_BITS); l1++) {
                _Atomic uint64_t *leaf = leaf_of(base, l1, false);
                for (uint64_t i = 0; leaf && i < (1u << L2_BITS); i++) {
                        uint64_t pte = atomic_load_explicit(&leaf[i], memory_order_acquire);
                        if (pte & PTE_VALID)
                                fn(arg, (l1 << L2_BITS | i) * SIM_PAGE,
                                   pte & ~(uint64_t)(SIM_PAGE - 1));
                }
        }
}

uint64_t ntbf__sim_dom_lookup(struct ntbf_sim *s, uint32_t node, uint64_t iova)
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

void ntbf__sim_dom_wipe(struct ntbf_sim *s, uint32_t node)
{
        /* A rebooted host has empty page tables. Punching the file keeps its size, so other
         * processes' mappings stay valid and read zeros (no entries, no leaves). */
        uint8_t *base = iommu_base(s, node, false);
        if (!base)
                return;
        fallocate(s->iommu[node].fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                  (off_t)s->iommu[node].size);
}

int ntbf__sim_iommu_map(struct ntbf_sim *s, uint32_t node, uint64_t iova, uint64_t phys,
                        uint64_t len)
{
        return ntbf__sim_dom_map(s, node, iova, phys, len);
}

int ntbf__sim_iommu_unmap(struct ntbf_sim *s, uint32_t node, uint64_t iova, uint64_t len)
{
        return ntbf__sim_dom_unmap(s, node, iova, len);
}

uint64_t ntbf__sim_iommu_lookup(struct ntbf_sim *s, uint32_t node, uint64_t iova)
{
        return ntbf__sim_dom_lookup(s, node, iova);
}

void ntbf__sim_iommu_wipe(struct ntbf_sim *s, uint32_t node)
{
        ntbf__sim_dom_wipe(s, node);
        /* A rebooted host forgets its devices' isolation too. */
        const struct ntbf_node *n = &s->t->nodes[node];
        for (uint32_t i = 0; i < n->ndevices; i++) {
                uint32_t d = n->devices[i];
                for (uint32_t f = 0; f < ntbf_device_nfuncs(&s->t->devices[d]); f++) {
                        uint32_t k = s->func_first[d] + f;
                        atomic_store(&s->funcs[k].isolated, 0);
                        ntbf__sim_dom_wipe(s, s->t->nnodes + k);
                }
        }
}

/* ---- lender-side isolation of device functions ----------------------------------------------- */

uint32_t ntbf__sim_func_of(const struct ntbf_sim *s, uint32_t device, uint16_t rid)
{
        const struct ntbf_device *d = &s->t->devices[device];
        uint32_t rid0 = ntbf_device_rid(d, 0);
        if (rid >= rid0 && rid - rid0 < d->functions)
                return s->func_first[device] + (rid - rid0);
        if (d->vfs && rid >= rid0 + NTBF_VF_OFFSET && rid - rid0 - NTBF_VF_OFFSET < d->vfs)
                return s->func_first[device] + d->functions + (rid - rid0 - NTBF_VF_OFFSET);
        return NTBF_NONE;
}

uint32_t ntbf__sim_func_by_rid(const struct ntbf_sim *s, uint32_t node, uint16_t rid)
{
        const struct ntbf_node *n = &s->t->nodes[node];
        for (uint32_t i = 0; i < n->ndevices; i++) {
                uint32_t k = ntbf__sim_func_of(s, n->devices[i], rid);
                if (k != NTBF_NONE)
                        return k;
        }
        return NTBF_NONE;
}

uint64_t ntbf__sim_dev_translate(struct ntbf_sim *s, uint32_t func, uint64_t addr)
{
        return ntbf__sim_dom_lookup(s, s->t->nnodes + func, addr);
}

/* The functions of node's devices that r names; returns how many, into out (at most max). */
static uint32_t funcs_matching(struct ntbf_sim *s, const struct ntbf_rid *r, uint32_t *out,
                               uint32_t max)
{
        uint32_t n = 0;
        const struct ntbf_node *nd = &s->t->nodes[r->node];
        for (uint32_t i = 0; i < nd->ndevices; i++) {
                uint32_t d = nd->devices[i];
                for (uint32_t f = 0; f < ntbf_device_nfuncs(&s->t->devices[d]); f++) {
                        uint32_t k = s->func_first[d] + f;
                        if ((s->funcs[k].rid & r->mask) != (r->rid & r->mask))
                                continue;
                        if (n < max)
                                out[n] = k;
                        n++;
                }
        }
        return n;
}

#define MATCH_MAX (NTBF_MAX_FUNCTIONS + NTBF_MAX_VFS)

int ntbf__sim_dev_isolate(struct ntbf_sim *s, const struct ntbf_rid *r, bool on)
{
        uint32_t *k = malloc(MATCH_MAX * sizeof(*k));
        if (!k)
                return -ENOMEM;
        uint32_t n = funcs_matching(s, r, k, MATCH_MAX);
        for (uint32_t i = 0; i < n && i < MATCH_MAX; i++) {
                uint32_t old = atomic_exchange(&s->funcs[k[i]].isolated, on ? 1 : 0);
                /* Leaving isolation drops the domain: the next isolation starts empty. */
                if (old && !on)
                        ntbf__sim_dom_wipe(s, s->t->nnodes + k[i]);
        }
        free(k);
        return n ? 0 : -ENOENT;
}

int ntbf__sim_dev_map(struct ntbf_sim *s, const struct ntbf_rid *r, uint64_t iova, uint64_t phys,
                      uint64_t len, bool map)
{
        uint32_t *k = malloc(MATCH_MAX * sizeof(*k));
        if (!k)
                return -ENOMEM;
        uint32_t n = funcs_matching(s, r, k, MATCH_MAX);
        int e = n ? 0 : -ENOENT;
        for (uint32_t i = 0; i < n && i < MATCH_MAX && !e; i++) {
                uint32_t dom = s->t->nnodes + k[i];
                if (!map) {
                        e = ntbf__sim_dom_unmap(s, dom, iova, len);
                        continue;
                }
                e = ntbf__sim_dom_map(s, dom, iova, phys, len);
                if (e) /* all functions or none */
                        while (i-- > 0)
                                ntbf__sim_dom_unmap(s, s->t->nnodes + k[i], iova, len);
        }
        free(k);
        return e;
}

int ntbf_sim_dev_iommu_faults(struct ntbf_backend *b, uint32_t device, uint32_t f, uint64_t *out)
{
        struct ntbf_sim *s = ntbf__sim_of(b);
        if (!s || !out || device >= s->t->ndevices ||
            f >= ntbf_device_nfuncs(&s->t->devices[device]))
                return -EINVAL;
        *out = atomic_load(&s->funcs[s->func_first[device] + f].iommu_faults);
        return 0;
}
