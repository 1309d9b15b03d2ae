/* tests/unit/test_device_alloc.c: the device API's allocators (IOVA, mapping table, memory). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <cmocka.h>

#include "ntbfab/error.h"
#include "dmamem.h"
#include "iova.h"
#include "maptab.h"

/* A small deterministic generator, so failures repeat. */
static uint64_t rng = 88172645463325252u;
static uint64_t next_rand(void)
{
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return rng;
}

/* ---- IOVA ----------------------------------------------------------------------------------- */

static void test_iova_single_pages(void **state)
{
        (void)state;
        struct ntbf__iova a;
        assert_int_equal(ntbf__iova_init(&a, 16), 0);
        uint8_t seen[16] = {0};
        for (int i = 0; i < 16; i++) {
                uint32_t p = ntbf__iova_alloc(&a, 1);
                assert_true(p < 16);
                assert_false(seen[p]);
                seen[p] = 1;
                assert_int_equal(ntbf__iova_len(&a, p), 1);
        }
        assert_int_equal(ntbf__iova_alloc(&a, 1), NTBF__IOVA_NONE);
        assert_int_equal(a.used, 16);
        /* Freed pages come back first (LIFO: hot in the IOTLB). */
        assert_int_equal(ntbf__iova_free(&a, 5), 0);
        assert_int_equal(ntbf__iova_free(&a, 5), -ENOENT); /* double free */
        assert_int_equal(ntbf__iova_len(&a, 5), 0);
        assert_int_equal(ntbf__iova_alloc(&a, 1), 5);
        /* Everything freed, the cache flushes into whole blocks again: 16 contiguous pages. */
        for (uint32_t p = 0; p < 16; p++)
                assert_int_equal(ntbf__iova_free(&a, p), 0);
        assert_int_equal(a.used, 0);
        assert_int_equal(ntbf__iova_alloc(&a, 16), 0);
        assert_int_equal(ntbf__iova_len(&a, 0), 16);
        ntbf__iova_fini(&a);
}

static void test_iova_ranges(void **state)
{
        (void)state;
        struct ntbf__iova a;
        assert_int_equal(ntbf__iova_init(&a, 16), 0);
        /* 3 pages take an aligned block of 4 and give its last page back. */
        assert_int_equal(ntbf__iova_alloc(&a, 3), 0);
        assert_int_equal(ntbf__iova_len(&a, 0), 3);
        assert_int_equal(ntbf__iova_len(&a, 1), 0); /* not a start */
        assert_int_equal(ntbf__iova_free(&a, 1), -ENOENT);
        assert_int_equal(ntbf__iova_alloc(&a, 1), 3);
        assert_int_equal(ntbf__iova_alloc(&a, 4), 4);
        assert_int_equal(ntbf__iova_alloc(&a, 8), 8);
        assert_int_equal(a.used, 16);
        assert_int_equal(ntbf__iova_alloc(&a, 1), NTBF__IOVA_NONE);
        assert_int_equal(ntbf__iova_free(&a, 4), 0);
        assert_int_equal(ntbf__iova_alloc(&a, 5), NTBF__IOVA_NONE); /* only 4 free */
        assert_int_equal(ntbf__iova_alloc(&a, 17), NTBF__IOVA_NONE);
        assert_int_equal(ntbf__iova_alloc(&a, 0), NTBF__IOVA_NONE);
        ntbf__iova_fini(&a);
        assert_int_equal(ntbf__iova_init(&a, 0), -EINVAL);
}

struct seen {
        uint32_t count, pages;
};

static void count_live(void *arg, uint32_t idx, uint32_t n)
{
        (void)idx;
        struct seen *s = arg;
        s->count++;
        s->pages += n;
}

/* Random allocations and frees against a page bitmap: no overlap, nothing lost. */
static void test_iova_random(void **state)
{
        (void)state;
        enum { N = 1000, LIVE = 400 };
        struct ntbf__iova a;
        assert_int_equal(ntbf__iova_init(&a, N), 0);
        uint8_t owner[N];
        memset(owner, 0, sizeof(owner));
        struct {
                uint32_t idx, n;
        } live[LIVE];
        uint32_t nlive = 0, used = 0;
        for (int step = 0; step < 200000; step++) {
                bool do_alloc = nlive < LIVE && (nlive == 0 || next_rand() % 2);
                if (do_alloc) {
                        uint32_t n = next_rand() % 4 == 0 ? 1 + next_rand() % 9 : 1;
                        uint32_t p = ntbf__iova_alloc(&a, n);
                        if (p == NTBF__IOVA_NONE)
                                continue;
                        assert_true(p + n <= N);
                        uint32_t align = 1;
                        while (align < n)
                                align *= 2;
                        assert_int_equal(p % align, 0); /* naturally aligned to its order */
                        for (uint32_t i = 0; i < n; i++) {
                                assert_int_equal(owner[p + i], 0);
                                owner[p + i] = 1;
                        }
                        live[nlive].idx = p;
                        live[nlive++].n = n;
                        used += n;
                } else {
                        uint32_t k = (uint32_t)(next_rand() % nlive);
                        assert_int_equal(ntbf__iova_len(&a, live[k].idx), live[k].n);
                        assert_int_equal(ntbf__iova_free(&a, live[k].idx), 0);
                        for (uint32_t i = 0; i < live[k].n; i++)
                                owner[live[k].idx + i] = 0;
                        used -= live[k].n;
                        live[k] = live[--nlive];
                }
                assert_int_equal(a.used, used);
        }
        struct seen s = {0, 0};
        ntbf__iova_each(&a, count_live, &s);
        assert_int_equal(s.count, nlive);
        assert_int_equal(s.pages, used);
        while (nlive) {
                nlive--;
                assert_int_equal(ntbf__iova_free(&a, live[nlive].idx), 0);
        }
        /* Everything merged back: the largest aligned block fits again (512 of 1000). */
        assert_int_equal(ntbf__iova_alloc(&a, 512), 0);
        ntbf__iova_fini(&a);
}

/* ---- mapping table ----------------------------------------------------------------------------
 */

static void test_maptab(void **state)
{
        (void)state;
        struct ntbf__maptab t = {0};
        assert_int_equal(ntbf__maptab_put(&t, 0x1000, 1, NULL), -ENOENT);
        assert_int_equal(ntbf__maptab_get(&t, 0, 1, NULL), -EINVAL);
        enum { KEYS = 3000 };
        static uint32_t refs[KEYS];
        memset(refs, 0, sizeof(refs));
        for (int step = 0; step < 100000; step++) {
                uint32_t k = (uint32_t)(next_rand() % KEYS);
                uint64_t addr = 0x100000 + (uint64_t)(k / 3) * 0x1000;
                uint32_t pages = 1 + k % 3;
                if (next_rand() % 2) {
                        uint32_t now = 0;
                        assert_int_equal(ntbf__maptab_get(&t, addr, pages, &now), 0);
                        refs[k]++;
                        assert_int_equal(now, refs[k]);
                } else {
                        uint32_t left = 99;
                        assert_int_equal(ntbf__maptab_put(&t, addr, pages, &left),
                                         refs[k] ? 0 : -ENOENT);
                        if (refs[k]) {
                                refs[k]--;
                                assert_int_equal(left, refs[k]);
                        }
                }
        }
        uint32_t live = 0;
        for (uint32_t k = 0; k < KEYS; k++)
                live += refs[k] != 0;
        assert_int_equal(t.n, live);
        for (uint32_t k = 0; k < KEYS; k++)
                while (refs[k]--)
                        assert_int_equal(ntbf__maptab_put(&t, 0x100000 + (uint64_t)(k / 3) * 0x1000,
                                                          1 + k % 3, NULL),
                                         0);
        assert_int_equal(t.n, 0);
        ntbf__maptab_fini(&t);
}

/* ---- DMA memory over a fake backend ------------------------------------------------------------
 */

static int mem_calls, mem_frees;
static uint64_t next_bus = 0x40000000;

static int fake_mem_alloc(struct ntbf_adapter_h *h, uint64_t size, uint64_t align,
                          struct ntbf_mem *out)
{
        (void)h;
        void *p = NULL;
        if (posix_memalign(&p, 4096, size))
                return -ENOMEM;
        if (align < 4096)
                align = 4096;
        next_bus = (next_bus + align - 1) & ~(align - 1);
        *out = (struct ntbf_mem){p, size, next_bus, -1, 0};
        next_bus += size + 4096; /* a gap: bus addresses are not contiguous across chunks */
        mem_calls++;
        return 0;
}

static int fake_mem_free(struct ntbf_adapter_h *h, struct ntbf_mem *m)
{
        (void)h;
        free(m->addr);
        mem_frees++;
        return 0;
}

static const struct ntbf_backend_ops fake_ops = {
    .name = "fake",
    .mem_alloc = fake_mem_alloc,
    .mem_free = fake_mem_free,
};

static void test_dmamem(void **state)
{
        (void)state;
        struct ntbf__dmamem m;
        ntbf__dmamem_init(&m, &fake_ops, NULL);
        mem_calls = mem_frees = 0;
        enum { N = 600 };
        void *p[N];
        uint64_t bus[N];
        size_t sz[N];
        for (int i = 0; i < N; i++) {
                sz[i] = 1 + next_rand() % 5000;
                size_t align = i % 7 == 0 ? 0 : (size_t)64 << (next_rand() % 6);
                assert_int_equal(ntbf__dmamem_alloc(&m, sz[i], align, &p[i]), 0);
                assert_int_equal(ntbf__dmamem_bus(&m, p[i], sz[i], &bus[i]), 0);
                size_t want = align ? align : 4096;
                assert_int_equal(bus[i] % want, 0);
                assert_int_equal((uintptr_t)p[i] % (want < 4096 ? want : 4096), 0);
                /* Zeroed, and the bus address moves with the pointer. */
                for (size_t k = 0; k < sz[i]; k++)
                        assert_int_equal(((uint8_t *)p[i])[k], 0);
                uint64_t b2;
                assert_int_equal(ntbf__dmamem_bus(&m, (uint8_t *)p[i] + sz[i] - 1, 1, &b2), 0);
                assert_int_equal(b2, bus[i] + sz[i] - 1);
                memset(p[i], 0xa5, sz[i]);
        }
        /* 600 allocations of up to 5 KB (at most 8 KiB blocks) fit in a few 2 MiB chunks. */
        assert_true(mem_calls <= 4);
        /* No two allocations overlap, in either address space. */
        for (int i = 0; i < N; i++)
                for (int j = i + 1; j < N; j++) {
                        assert_true((uint8_t *)p[i] + sz[i] <= (uint8_t *)p[j] ||
                                    (uint8_t *)p[j] + sz[j] <= (uint8_t *)p[i]);
                        assert_true(bus[i] + sz[i] <= bus[j] || bus[j] + sz[j] <= bus[i]);
                }
        uint64_t b;
        int local;
        assert_int_equal(ntbf__dmamem_bus(&m, &local, 4, &b), -EFAULT);
        assert_int_equal(ntbf__dmamem_bus(&m, p[0], NTBF__DMA_CHUNK + 1, &b), -EFAULT);
        assert_int_equal(ntbf__dmamem_free(&m, &local), -EINVAL);
        assert_int_equal(ntbf__dmamem_free(&m, (uint8_t *)p[1] + 64), -EINVAL);
        for (int i = 0; i < N; i++)
                assert_int_equal(ntbf__dmamem_free(&m, p[i]), 0);
        assert_int_equal(ntbf__dmamem_free(&m, p[0]), -EINVAL); /* double free */
        assert_int_equal(mem_frees, 0);                         /* small chunks are kept */

        /* A big allocation has its own chunk and goes back to the backend when freed. */
        void *big;
        int calls = mem_calls;
        assert_int_equal(ntbf__dmamem_alloc(&m, 3 * NTBF__DMA_CHUNK + 5, 0, &big), 0);
        assert_int_equal(mem_calls, calls + 1);
        assert_int_equal(ntbf__dmamem_bus(&m, big, 3 * NTBF__DMA_CHUNK + 5, &b), 0);
        assert_int_equal(ntbf__dmamem_free(&m, big), 0);
        assert_int_equal(mem_frees, 1);
        assert_int_equal(ntbf__dmamem_bus(&m, big, 1, &b), -EFAULT);
        /* After everything was freed, a whole chunk's worth fits again without a new chunk. */
        calls = mem_calls;
        void *whole;
        assert_int_equal(ntbf__dmamem_alloc(&m, NTBF__DMA_BIG, 0, &whole), 0);
        assert_int_equal(mem_calls, calls);
        assert_int_equal(ntbf__dmamem_alloc(&m, 0, 0, &whole), -EINVAL);
        assert_int_equal(ntbf__dmamem_alloc(&m, 64, 3, &whole), -EINVAL);
        ntbf__dmamem_fini(&m);
        assert_int_equal(mem_frees, mem_calls);
}

/*
 * Off the simulated fabric DMA memory is memfd memory (devices behind VFIO): shareable with
 * another process through its fd, and its "bus address" is its address in this process.
 */
static void test_dmamem_memfd(void **state)
{
        (void)state;
        struct ntbf__dmamem m;
        ntbf__dmamem_init(&m, NULL, NULL);
        m.memfd = true;
        void *small, *big, *aligned;
        assert_int_equal(ntbf__dmamem_alloc(&m, 100, 0, &small), 0);
        assert_int_equal(ntbf__dmamem_alloc(&m, 3 << 20, 0, &big), 0);
        assert_int_equal(ntbf__dmamem_alloc(&m, 4096, 2 << 20, &aligned), 0);
        assert_int_equal((uintptr_t)aligned % (2 << 20), 0);
        uint64_t bus;
        assert_int_equal(ntbf__dmamem_bus(&m, (char *)big + 4096, 8, &bus), 0);
        assert_int_equal(bus, (uint64_t)(uintptr_t)big + 4096);
        /* The same bytes through the fd, as another process would map them. */
        int fd;
        uint64_t off;
        memset(big, 0x3c, 3 << 20);
        assert_int_equal(ntbf__dmamem_fd(&m, (char *)big + 8192, &fd, &off), 0);
        assert_int_equal(off, 8192);
        uint8_t *view = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        assert_ptr_not_equal(view, MAP_FAILED);
        assert_int_equal(view[100], 0x3c);
        view[0] = 0x77;
        assert_int_equal(((uint8_t *)big)[0], 0x77);
        munmap(view, 4096);
        assert_int_equal(ntbf__dmamem_fd(&m, small, &fd, &off), 0);
        assert_true(fd >= 0);
        int x;
        assert_int_equal(ntbf__dmamem_fd(&m, &x, &fd, &off), -EFAULT);
        assert_int_equal(ntbf__dmamem_free(&m, big), 0);
        assert_int_equal(ntbf__dmamem_free(&m, small), 0);
        assert_int_equal(ntbf__dmamem_free(&m, aligned), 0);
        ntbf__dmamem_fini(&m);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_iova_single_pages),
            cmocka_unit_test(test_iova_ranges),
            cmocka_unit_test(test_iova_random),
            cmocka_unit_test(test_maptab),
            cmocka_unit_test(test_dmamem),
            cmocka_unit_test(test_dmamem_memfd),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
