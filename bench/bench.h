/* bench/bench.h: timing and result helpers shared by the benchmarks. */
#ifndef NTBF_BENCH_H
#define NTBF_BENCH_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t bench_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int bench_cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

/* Sorts v in place; returns the p-th percentile (p in [0, 100]). */
static inline uint64_t bench_percentile(uint64_t *v, size_t n, double p)
{
        qsort(v, n, sizeof(*v), bench_cmp_u64);
        size_t i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
        return v[i < n ? i : n - 1];
}

#endif
