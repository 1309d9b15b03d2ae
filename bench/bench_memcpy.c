/* bench/bench_memcpy.c: CPU copies into remote RAM through a sim window mapping versus local
 * memory. */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ntbfab/diag.h"
#include "ntbfab/error.h"
#include "ntbfab/sim.h"

/*
 * The claim under test (docs/sim.md): a CPU mapping of remote memory through a simulated
 * window is a direct mapping of the far side's backing memory, so loads and stores cost
 * what local ones cost. Two nodes a and b are cabled back to back; b exports a 64 MiB
 * buffer (mem_alloc), a maps it through 64 window slots (map_window). Against it: a local
 * malloc'd buffer of the same size. Both are warmed, then measured in alternation, round
 * after round, so drift and noise hit both alike; the median of the rounds is reported.
 *
 * Each round gives both buffers fresh physical pages (a new anonymous mapping; b's memory
 * freed, its file range punched, and allocated again behind the same window slots): how
 * a buffer's pages happen to fall against the source's in caches and DRAM banks moves a
 * copy's speed by +-10% on its own, and would otherwise favour one side for a whole run.
 */

#define MiB (UINT64_C(1) << 20)
#define BUF (64 * MiB)

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
        qsort(v, (size_t)n, sizeof(*v), cmp_double);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* GB/s copying size bytes into dst, repeated over at least 256 MiB (and 20 ms). */
static double bandwidth(uint8_t *dst, const uint8_t *src, uint64_t size)
{
        uint64_t reps = (256 * MiB) / size;
        if (reps < 4)
                reps = 4;
        /* Walk the whole buffer so small sizes are not all served from one cache-hot spot. */
        uint64_t slots = BUF / size;
        uint64_t t0 = now_ns();
        for (uint64_t i = 0; i < reps; i++) {
                uint64_t off = (i % slots) * size;
                memcpy(dst + off, src + off, size);
        }
        uint64_t dt = now_ns() - t0;
        __asm__ volatile("" ::: "memory");
        return (double)(reps * size) / (double)dt;
}

/* ns per 64-byte store-then-load at pseudo-random 64-byte aligned offsets in the buffer. */
static double latency(uint8_t *buf, const uint32_t *offs, uint32_t n)
{
        uint64_t sum = 0;
        uint64_t t0 = now_ns();
        for (uint32_t i = 0; i < n; i++) {
                volatile uint64_t *p = (volatile uint64_t *)(buf + (uint64_t)offs[i] * 64);
                for (int k = 0; k < 8; k++)
                        p[k] = i + (uint64_t)k;
                for (int k = 0; k < 8; k++)
                        sum += p[k];
        }
        uint64_t dt = now_ns() - t0;
        if (sum == 42)
                fprintf(stderr, "!");
        return (double)dt / n;
}

static struct ntbf_topo *topology(void)
{
        struct ntbf_topo *t = ntbf_topo_new("bench-memcpy", NULL);
        uint32_t a = ntbf_topo_add_node(t, "a", 4), b = ntbf_topo_add_node(t, "b", 8);
        uint32_t aa = ntbf_topo_add_adapter(t, a, "ntb0", ntbf_adapter_preset("pxh830"));
        uint32_t ba = ntbf_topo_add_adapter(t, b, "ntb0", ntbf_adapter_preset("pxh830"));
        ntbf_topo_add_link(t, (struct ntbf_port_ref){NTBF_PORT_ADAPTER, aa, 0},
                           (struct ntbf_port_ref){NTBF_PORT_ADAPTER, ba, 0});
        t->nodes[a].ram = t->nodes[b].ram = 256 * MiB;
        t->nodes[b].iommu = false; /* the slots target b's bus addresses directly */
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        if (ntbf_topo_finalize(t, &d)) {
                ntbf_diags_print(&d, stderr);
                exit(1);
        }
        ntbf_diags_free(&d);
        return t;
}

static void die(const char *what, int r)
{
        fprintf(stderr, "bench_memcpy: %s: %s\n", what, ntbf_strerror(r));
        exit(1);
}

int main(int argc, char **argv)
{
        const char *json_path = NULL;
        int rounds = 15;
        static const struct option longopts[] = {{"json", required_argument, NULL, 'j'},
                                                 {"rounds", required_argument, NULL, 'r'},
                                                 {NULL, 0, NULL, 0}};
        for (int c; (c = getopt_long(argc, argv, "j:r:", longopts, NULL)) != -1;) {
                if (c == 'j')
                        json_path = optarg;
                else if (c == 'r')
                        rounds = atoi(optarg);
                else {
                        fprintf(stderr, "usage: bench_memcpy [--json PATH] [--rounds N]\n");
                        return 2;
                }
        }
        if (rounds < 1 || rounds > 100)
                rounds = 15;

        /* The fabric: b exports 64 MiB, a maps it through its window. */
        struct ntbf_topo *t = topology();
        char dir[] = "/dev/shm/ntbfab-bench-XXXXXX", why[512];
        if (!mkdtemp(dir))
                die("mkdtemp", -errno);
        int r = ntbf_sim_fabric_create(t, dir, why, sizeof(why));
        if (r) {
                fprintf(stderr, "bench_memcpy: %s\n", why);
                return 1;
        }
        const struct ntbf_backend_ops *ops = ntbf_backend_find("sim");
        struct ntbf_backend *b;
        struct ntbf_adapter_h *ha = NULL, *hb = NULL;
        struct ntbf_backend_env env = {t, dir, NTBF_NONE};
        if ((r = ops->open(&env, &b, NULL, 0)) || (r = ops->probe(b, 0, &ha)) ||
            (r = ops->probe(b, 1, &hb)))
                die("attach", r);
        struct ntbf_mem mem;
        if ((r = ops->mem_alloc(hb, BUF, MiB, &mem)))
                die("mem_alloc", r);
        for (uint32_t k = 0; k < BUF / MiB; k++) {
                struct ntbf_xlat x = {1, 1, mem.bus_addr + k * MiB, NTBF_NONE, MiB};
                if ((r = ops->xlat_set(ha, k, &x)))
                        die("xlat_set", r);
        }
        void *win;
        if ((r = ops->map_window(ha, 0, 0, BUF, 0, &win)))
                die("map_window", r);
        uint8_t *remote = win, *local = NULL, *src = NULL;
        if (posix_memalign((void **)&src, 4096, BUF))
                die("posix_memalign", -ENOMEM);
        for (uint64_t i = 0; i < BUF; i++)
                src[i] = (uint8_t)(i * 31 + 7);
        static const uint64_t sizes[] = {64 << 10, 256 << 10, MiB, 4 * MiB, 16 * MiB, 64 * MiB};
        enum { NS = sizeof(sizes) / sizeof(sizes[0]) };
        double bw_local[NS][100], bw_remote[NS][100], lat_local[100], lat_remote[100];
        uint32_t nlat = 1u << 20;
        uint32_t *offs = malloc(nlat * sizeof(*offs));
        uint32_t x = 12345;
        for (uint32_t i = 0; i < nlat; i++) {
                x = x * 1103515245u + 12345u;
                offs[i] = (x >> 4) % (uint32_t)(BUF / 64);
        }
        for (int round = 0; round < rounds; round++) {
                /* Fresh pages for both, then warm both: every page faulted in and touched. */
                uint64_t bus = mem.bus_addr;
                if ((r = ops->mem_free(hb, &mem)) || (r = ops->mem_alloc(hb, BUF, MiB, &mem)))
                        die("mem_alloc", r);
                if (mem.bus_addr != bus)
                        die("b's buffer moved", -EIO);
                local = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (local == MAP_FAILED)
                        die("mmap", -errno);
                for (int w = 0; w < 2; w++) {
                        memcpy(local, src, BUF);
                        memcpy(remote, src, BUF);
                }
                if (memcmp(mem.addr, src, BUF))
                        die("the window does not reach b's buffer", -EIO);
                /* Alternate which goes first, so neither always runs on a warmer machine. */
                bool remote_first = round % 2;
                for (int s = 0; s < NS; s++) {
                        if (remote_first)
                                bw_remote[s][round] = bandwidth(remote, src, sizes[s]);
                        bw_local[s][round] = bandwidth(local, src, sizes[s]);
                        if (!remote_first)
                                bw_remote[s][round] = bandwidth(remote, src, sizes[s]);
                }
                if (remote_first)
                        lat_remote[round] = latency(remote, offs, nlat);
                lat_local[round] = latency(local, offs, nlat);
                if (!remote_first)
                        lat_remote[round] = latency(remote, offs, nlat);
                munmap(local, BUF);
        }
        json_object *root = json_object_new_object();
        json_object_object_add(root, "bench", json_object_new_string("memcpy"));
        json_object_object_add(root, "rounds", json_object_new_int(rounds));
        json_object_object_add(root, "cpus",
                               json_object_new_int((int)sysconf(_SC_NPROCESSORS_ONLN)));
        json_object *jsizes = json_object_new_array();
        printf("memcpy into a window-mapped remote buffer vs local malloc'd memory\n");
        printf("(b2b pxh830 sim fabric in %s, %d alternating rounds, medians)\n\n", dir, rounds);
        printf("%10s %14s %14s %8s\n", "size", "local GB/s", "remote GB/s", "ratio");
        double worst = 1e9;
        for (int s = 0; s < NS; s++) {
                double l = median(bw_local[s], rounds), rm = median(bw_remote[s], rounds);
                double ratio = rm / l;
                if (ratio < worst)
                        worst = ratio;
                printf("%7llu KiB %14.2f %14.2f %8.3f\n", (unsigned long long)(sizes[s] >> 10), l,
                       rm, ratio);
                json_object *o = json_object_new_object();
                json_object_object_add(o, "size", json_object_new_int64((int64_t)sizes[s]));
                json_object_object_add(o, "local_gbps", json_object_new_double(l));
                json_object_object_add(o, "remote_gbps", json_object_new_double(rm));
                json_object_object_add(o, "ratio", json_object_new_double(ratio));
                json_object_array_add(jsizes, o);
        }
        json_object_object_add(root, "bandwidth", jsizes);
        double ll = median(lat_local, rounds), lr = median(lat_remote, rounds);
        printf(
            "\n64-byte store-then-load at random offsets in 64 MiB: local %.1f ns, remote %.1f ns, "
            "ratio %.3f\n",
            ll, lr, lr / ll);
        printf("worst bandwidth ratio %.3f (target >= 0.97), latency ratio %.3f (target <= 1.05)\n",
               worst, lr / ll);
        json_object *jl = json_object_new_object();
        json_object_object_add(jl, "local_ns", json_object_new_double(ll));
        json_object_object_add(jl, "remote_ns", json_object_new_double(lr));
        json_object_object_add(jl, "ratio", json_object_new_double(lr / ll));
        json_object_object_add(root, "latency_64b", jl);
        json_object_object_add(root, "worst_bandwidth_ratio", json_object_new_double(worst));
        json_object *jt = json_object_new_object();
        json_object_object_add(jt, "bandwidth_ratio_min", json_object_new_double(0.97));
        json_object_object_add(jt, "latency_ratio_max", json_object_new_double(1.05));
        json_object_object_add(root, "targets", jt);
        if (json_path && json_object_to_file_ext(json_path, root, JSON_C_TO_STRING_PRETTY) != 0) {
                fprintf(stderr, "bench_memcpy: cannot write %s\n", json_path);
                return 1;
        }
        json_object_put(root);

        ops->unmap_window(ha, win, BUF);
        ops->mem_free(hb, &mem);
        ops->release(ha);
        ops->release(hb);
        ops->close(b);
        ntbf_sim_fabric_destroy(dir);
        ntbf_topo_free(t);
        free(src);
        free(offs);
        return 0;
}
