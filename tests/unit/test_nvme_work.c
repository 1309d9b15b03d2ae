/* tests/unit/test_nvme_work.c: NVMe workloads: histograms, patterns, verification, failover. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ntbf_nvme_work.h"
#include "nvme_fx.h"

#define PG  4096u
#define CAP (UINT64_C(16) << 20)

static void test_histogram(void **state)
{
        (void)state;
        static struct ntbf_nvme_hist h;
        memset(&h, 0, sizeof(h));
        for (uint64_t v = 1; v <= 100000; v++)
                ntbf_nvme_hist_add(&h, v * 100); /* 100 ns .. 10 ms */
        assert_int_equal(h.n, 100000);
        assert_int_equal(h.min_ns, 100);
        assert_int_equal(h.max_ns, 10000000);
        uint64_t p50 = ntbf_nvme_hist_quantile(&h, 0.5), p99 = ntbf_nvme_hist_quantile(&h, 0.99);
        assert_true(p50 >= 5000000 && p50 <= 5000000 * 102 / 100);
        assert_true(p99 >= 9900000 && p99 <= 9900000 * 102 / 100);
        assert_int_equal(ntbf_nvme_hist_quantile(&h, 0), 100);
        assert_int_equal(ntbf_nvme_hist_quantile(&h, 1), 10000000);
        /* Small values are exact. */
        static struct ntbf_nvme_hist s;
        memset(&s, 0, sizeof(s));
        for (int i = 0; i < 10; i++)
                ntbf_nvme_hist_add(&s, 7);
        assert_int_equal(ntbf_nvme_hist_quantile(&s, 0.5), 7);
        /* By powers of two: 100..10 ms in [2^6, 2^24); the sevens in [4, 8). */
        uint64_t p2[64], total = 0;
        ntbf_nvme_hist_pow2(&h, p2);
        for (int e = 0; e < 64; e++)
                total += p2[e];
        assert_int_equal(total, 100000);
        assert_int_equal(p2[6], 1);                   /* 100 */
        assert_int_equal(p2[7], 1);                   /* 200 */
        assert_int_equal(p2[23], 100000 - 83887 + 1); /* 8388700 .. 10000000 */
        ntbf_nvme_hist_pow2(&s, p2);
        assert_int_equal(p2[2], 10);
        ntbf_nvme_hist_merge(&s, &h);
        assert_int_equal(s.n, 100010);
        assert_int_equal(s.min_ns, 7);
}

static void test_patterns(void **state)
{
        (void)state;
        static uint8_t b[8 * 512];
        ntbf_nvme_pattern_fill(b, 100, 8, 9, 42, 1);
        assert_int_equal(ntbf_nvme_pattern_check(b, 100, 8, 9, 42, 1), -1);
        assert_int_equal(ntbf_nvme_pattern_check(b, 101, 8, 9, 42, 1), 0); /* another block */
        assert_int_equal(ntbf_nvme_pattern_check(b, 100, 8, 9, 43, 1), 0); /* another client */
        assert_int_equal(ntbf_nvme_pattern_check(b, 100, 8, 9, 42, 2), 0); /* another write */
        b[5 * 512 + 300] ^= 1;
        assert_int_equal(ntbf_nvme_pattern_check(b, 100, 8, 9, 42, 1), 5);
}

/* Two paths to one controller: each its own queue pair and its own view of the buffer. */
struct two {
        struct nfx x;
        struct ntbf_nvme_qp q[2];
        struct ntbf_nvme_path p[2];
        struct ntbf_nvme_mem buf, buf1;
        /* What the done callback saw. */
        unsigned ok, failed;
        uint8_t written[4096]; /* per 4 KiB unit: reported complete */
        uint32_t order[4096];  /* the units in the order they were reported complete */
        unsigned norder;
        unsigned fail_after; /* break path 0 after this many completions (0: never) */
        int how;             /* 0: its CQ, 1: its SQ */
};

static void on_done(void *arg, bool write, uint64_t slba, uint32_t nlb, int status)
{
        struct two *t = arg;
        (void)nlb;
        if (status) {
                t->failed++;
                return;
        }
        t->ok++;
        if (write)
                t->written[slba / 8] = 1;
        if (t->norder < 4096)
                t->order[t->norder++] = (uint32_t)(slba / 8);
        if (t->fail_after && t->ok == t->fail_after)
                fake_dma_fail(t->x.f, t->how ? t->q[0].sq_io : t->q[0].cq_io, PG);
}

static void two_up(struct two *t)
{
        memset(t, 0, sizeof(*t));
        nfx_up(&t->x, 4, CAP);
        nfx_reset(&t->x);
        for (int i = 0; i < 2; i++) {
                nfx_qp(&t->x, &t->q[i], (uint16_t)(i + 1), 16);
                assert_int_equal(ntbf_nvme_create_qp(&t->x.c, (uint16_t)(i + 1), 16, 16,
                                                     t->q[i].sq_io, t->q[i].cq_io),
                                 0);
        }
        t->buf = nfx_mem(&t->x, 8 * PG);
        for (int i = 0; i < 2; i++)
                t->p[i] =
                    (struct ntbf_nvme_path){&t->q[i], t->x.dev.bar[0], t->buf.io, NULL, false, 0};
        /* The backup path has a buffer of its own (memory on the device's side, docs/nvme.md). */
        t->buf1 = nfx_mem(&t->x, 8 * PG);
        t->p[1].buf = t->buf1.va;
        t->p[1].buf_io = t->buf1.io;
}

static void two_down(struct two *t)
{
        ntbf_nvme_qp_fini(&t->q[0]);
        ntbf_nvme_qp_fini(&t->q[1]);
        nfx_down(&t->x);
}

static struct ntbf_nvme_job job_of(struct two *t, uint32_t read_pct, uint64_t ios, uint32_t gen)
{
        return (struct ntbf_nvme_job){.bs = PG,
                                      .qd = 8,
                                      .read_pct = read_pct,
                                      .first = 0,
                                      .blocks = ios * 8,
                                      .ios = ios,
                                      .seed = 9,
                                      .timeout_ns = 20000000,
                                      .pattern = NTBF_NVME_PAT_STREAM,
                                      .gen = gen,
                                      .idle = nfx_idle,
                                      .idle_arg = &t->x,
                                      .done = on_done,
                                      .done_arg = t};
}

static void test_write_verify(void **state)
{
        (void)state;
        static struct two t;
        two_up(&t);
        struct ntbf_nvme_stats st;
        struct ntbf_nvme_job j = job_of(&t, 0, 300, 1);
        assert_int_equal(ntbf_nvme_job_run(t.p, 1, &t.x.c.ns, t.buf.va, &j, &st), 0);
        assert_int_equal(st.ios, 300);
        assert_int_equal(st.writes, 300);
        assert_int_equal(st.bytes, 300 * PG);
        assert_int_equal(st.lat.n, 300);
        assert_int_equal(t.p[0].ios, 300);
        j = job_of(&t, 100, 300, 1);
        assert_int_equal(ntbf_nvme_job_run(t.p, 1, &t.x.c.ns, t.buf.va, &j, &st), 0);
        assert_int_equal(st.reads, 300);
        assert_int_equal(st.mismatches, 0);
        /* Another generation is not what is on the drive: every read says so. */
        j = job_of(&t, 100, 300, 2);
        assert_int_equal(ntbf_nvme_job_run(t.p, 1, &t.x.c.ns, t.buf.va, &j, &st), -EBADMSG);
        assert_int_equal(st.mismatches, 300);
        /* Shuffled (write and verify --random): every unit once, not in order, and the same
         * order again for the same seed, so a verify reads what the write wrote. */
        uint32_t first[300];
        for (int pass = 0; pass < 2; pass++) {
                memset(t.written, 0, sizeof(t.written));
                t.norder = 0;
                j = job_of(&t, pass ? 100 : 0, 300, 1);
                j.qd = 1; /* completions in submission order */
                j.shuffle = true;
                j.first = 3 * 300 * 8; /* a range of its own: unwritten until now */
                assert_int_equal(ntbf_nvme_job_run(t.p, 1, &t.x.c.ns, t.buf.va, &j, &st), 0);
                assert_int_equal(st.ios, 300);
                assert_int_equal(st.mismatches, 0);
                assert_int_equal(t.norder, 300);
                unsigned in_place = 0, seen[300] = {0};
                for (unsigned i = 0; i < 300; i++) {
                        uint32_t u = t.order[i] - 3 * 300;
                        assert_true(u < 300);
                        seen[u]++;
                        in_place += u == i;
                        if (!pass)
                                first[i] = u;
                        else
                                assert_int_equal(u, first[i]);
                }
                for (unsigned u = 0; u < 300; u++)
                        assert_int_equal(seen[u], 1);
                assert_true(in_place < 30); /* a shuffle, not the sequential order */
        }
        /* Another seed, another order. */
        t.norder = 0;
        j = job_of(&t, 0, 300, 1);
        j.qd = 1;
        j.shuffle = true;
        j.seed = 10;
        j.first = 3 * 300 * 8;
        assert_int_equal(ntbf_nvme_job_run(t.p, 1, &t.x.c.ns, t.buf.va, &j, &st), 0);
        unsigned same = 0;
        for (unsigned i = 0; i < 300; i++)
                same += t.order[i] - 3 * 300 == first[i];
        assert_true(same < 30);
        /* A random mix by time. */
        j = job_of(&t, 50, 0, 1);
        j.random = true;
        j.time_ns = 20000000;
        j.pattern = NTBF_NVME_PAT_NONE;
        assert_int_equal(ntbf_nvme_job_run(t.p, 1, &t.x.c.ns, t.buf.va, &j, &st), 0);
        assert_true(st.reads > 0 && st.writes > 0);
        assert_int_equal(st.ios, st.reads + st.writes);
        /* Bad jobs. */
        j.bs = 1000;
        assert_int_equal(ntbf_nvme_job_run(t.p, 1, &t.x.c.ns, t.buf.va, &j, &st), -EINVAL);
        two_down(&t);
}

/*
 * Article 6.3: the primary path breaks in the middle of a write workload (its CQ, then in a
 * second run its SQ, unreachable); the backup path takes over. Every write reported complete
 * reads back, and nothing is reported complete twice or without a completion.
 */
static void failover(int how)
{
        static struct two t;
        two_up(&t);
        t.fail_after = 100;
        t.how = how;
        struct ntbf_nvme_stats st;
        struct ntbf_nvme_job j = job_of(&t, 0, 400, 1);
        assert_int_equal(ntbf_nvme_job_run(t.p, 2, &t.x.c.ns, t.buf.va, &j, &st), 0);
        assert_int_equal(st.failovers, 1);
        assert_true(t.p[0].failed && !t.p[1].failed);
        assert_int_equal(st.ios, 400);
        assert_int_equal(t.ok, 400);
        assert_int_equal(t.failed, 0);
        assert_true(st.resubmitted >= 1);
        assert_int_equal(t.p[0].ios + t.p[1].ios, 400);
        assert_true(t.p[1].ios >= 300 - 8);
        for (unsigned u = 0; u < 400; u++)
                assert_int_equal(t.written[u], 1);
        /* Read everything back on the backup path alone. */
        fake_dma_heal(t.x.f);
        t.fail_after = 0;
        t.p[0].failed = true;
        j = job_of(&t, 100, 400, 1);
        assert_int_equal(ntbf_nvme_job_run(t.p, 2, &t.x.c.ns, t.buf.va, &j, &st), 0);
        assert_int_equal(st.mismatches, 0);
        assert_int_equal(t.p[1].ios, 400);
        /* With both paths gone, what is outstanding fails instead of being reported done. */
        t.p[0].failed = false;
        t.p[1].failed = false;
        fake_dma_fail(t.x.f, t.q[0].cq_io, PG);
        fake_dma_fail(t.x.f, t.q[1].cq_io, PG);
        t.ok = t.failed = 0;
        j = job_of(&t, 0, 50, 3);
        assert_int_equal(ntbf_nvme_job_run(t.p, 2, &t.x.c.ns, t.buf.va, &j, &st), -EIO);
        assert_int_equal(t.ok, 0);
        assert_true(t.failed > 0);
        two_down(&t);
}

static void test_failover_cq(void **state)
{
        (void)state;
        failover(0);
}

static void test_failover_sq(void **state)
{
        (void)state;
        failover(1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_histogram),    cmocka_unit_test(test_patterns),
            cmocka_unit_test(test_write_verify), cmocka_unit_test(test_failover_cq),
            cmocka_unit_test(test_failover_sq),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
