/* apps/nvme/work.c: I/O workloads over queue pairs with patterns, histograms and path failover. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ntbf_nvme_work.h"

/* ---- histogram ------------------------------------------------------------------------------ */

/* Bucket of ns: values below 64 exactly, then 64 sub-buckets per power of two. */
static unsigned bin_of(uint64_t ns)
{
        if (ns < NTBF_NVME_HIST_SUB)
                return (unsigned)ns;
        unsigned e = 63u - (unsigned)__builtin_clzll(ns); /* >= 6 */
        unsigned sub = (unsigned)(ns >> (e - 6)) & (NTBF_NVME_HIST_SUB - 1);
        return (e - 5) * NTBF_NVME_HIST_SUB + sub;
}

/* The largest value of bucket b. */
static uint64_t bin_top(unsigned b)
{
        if (b < NTBF_NVME_HIST_SUB)
                return b;
        unsigned e = b / NTBF_NVME_HIST_SUB + 5, sub = b % NTBF_NVME_HIST_SUB;
        uint64_t lo = (UINT64_C(1) << e) | ((uint64_t)sub << (e - 6));
        return lo + (UINT64_C(1) << (e - 6)) - 1;
}

void ntbf_nvme_hist_add(struct ntbf_nvme_hist *h, uint64_t ns)
{
        if (!h->n || ns < h->min_ns)
                h->min_ns = ns;
        if (ns > h->max_ns)
                h->max_ns = ns;
        h->n++;
        h->sum_ns += ns;
        unsigned b = bin_of(ns);
        h->bins[b < NTBF_NVME_HIST_BINS ? b : NTBF_NVME_HIST_BINS - 1]++;
}

uint64_t ntbf_nvme_hist_quantile(const struct ntbf_nvme_hist *h, double q)
{
        if (!h->n)
                return 0;
        if (q <= 0)
                return h->min_ns;
        if (q >= 1)
                return h->max_ns;
        uint64_t want = (uint64_t)(q * (double)h->n);
        if (want >= h->n)
                want = h->n - 1;
        uint64_t seen = 0;
        for (unsigned b = 0; b < NTBF_NVME_HIST_BINS; b++) {
                seen += h->bins[b];
                if (seen > want) {
                        uint64_t v = bin_top(b);
                        if (v > h->max_ns)
                                v = h->max_ns;
                        return v < h->min_ns ? h->min_ns : v;
                }
        }
        return h->max_ns;
}

void ntbf_nvme_hist_merge(struct ntbf_nvme_hist *into, const struct ntbf_nvme_hist *h)
{
        if (!h->n)
                return;
        if (!into->n || h->min_ns < into->min_ns)
                into->min_ns = h->min_ns;
        if (h->max_ns > into->max_ns)
                into->max_ns = h->max_ns;
        into->n += h->n;
        into->sum_ns += h->sum_ns;
        for (unsigned b = 0; b < NTBF_NVME_HIST_BINS; b++)
                into->bins[b] += h->bins[b];
}

void ntbf_nvme_hist_pow2(const struct ntbf_nvme_hist *h, uint64_t out[64])
{
        memset(out, 0, 64 * sizeof(out[0]));
        for (unsigned b = 0; b < NTBF_NVME_HIST_BINS; b++) {
                if (!h->bins[b])
                        continue;
                unsigned e = b < NTBF_NVME_HIST_SUB ? 63u - (unsigned)__builtin_clzll(b | 1)
                                                    : b / NTBF_NVME_HIST_SUB + 5;
                out[e < 64 ? e : 63] += h->bins[b];
        }
}

/* ---- patterns ------------------------------------------------------------------------------- */

static uint64_t mix(uint64_t x)
{
        x ^= x >> 30;
        x *= UINT64_C(0xbf58476d1ce4e5b9);
        x ^= x >> 27;
        x *= UINT64_C(0x94d049bb133111eb);
        return x ^ (x >> 31);
}

/*
 * Each block starts with a header (seed, block, generation) and is filled with words derived
 * from them, so a block written somewhere else, by another client or of another generation,
 * is told apart from the right one.
 */
void ntbf_nvme_pattern_fill(uint8_t *p, uint64_t lba, uint32_t nlb, uint32_t shift, uint64_t seed,
                            uint32_t gen)
{
        size_t bsz = (size_t)1 << shift;
        for (uint32_t i = 0; i < nlb; i++) {
                uint64_t *w = (uint64_t *)(void *)(p + (size_t)i * bsz);
                uint64_t b = lba + i, k = mix(seed ^ mix(b) ^ ((uint64_t)gen << 40));
                w[0] = seed;
                w[1] = b;
                w[2] = gen;
                for (size_t j = 3; j < bsz / 8; j++)
                        w[j] = mix(k + j);
        }
}

long ntbf_nvme_pattern_check(const uint8_t *p, uint64_t lba, uint32_t nlb, uint32_t shift,
                             uint64_t seed, uint32_t gen)
{
        size_t bsz = (size_t)1 << shift;
        for (uint32_t i = 0; i < nlb; i++) {
                const uint64_t *w = (const uint64_t *)(const void *)(p + (size_t)i * bsz);
                uint64_t b = lba + i, k = mix(seed ^ mix(b) ^ ((uint64_t)gen << 40));
                if (w[0] != seed || w[1] != b || w[2] != gen)
                        return (long)i;
                for (size_t j = 3; j < bsz / 8; j++)
                        if (w[j] != mix(k + j))
                                return (long)i;
        }
        return -1;
}

/* ---- the runner ----------------------------------------------------------------------------- */

struct cmd {
        bool busy, write;
        uint64_t slba;
        uint32_t nlb;
        unsigned path;
        uint64_t t0; /* first submission: a failover is part of a command's latency */
};

struct run {
        struct ntbf_nvme_path *paths;
        unsigned npaths, cur;
        const struct ntbf_nvme_ns *ns;
        const struct ntbf_nvme_job *job;
        struct ntbf_nvme_stats *st;
        uint8_t *buf;
        struct cmd *cmds;
        uint64_t rng, next_unit, units, first;
        uint32_t nlb;
        unsigned inflight;
};

static uint64_t rnd(struct run *r)
{
        r->rng ^= r->rng << 13;
        r->rng ^= r->rng >> 7;
        r->rng ^= r->rng << 17;
        return r->rng * UINT64_C(0x2545f4914f6cdd1d);
}

/*
 * The i-th unit of a shuffled pass over n units: a keyed bijection of [0, 2^b) (four Feistel
 * rounds on two halves of b/2 bits, b even and 2^b >= n), applied again while the result is
 * n or more (cycle walking: a bijection of [0, 2^b) restricted so maps [0, n) onto itself).
 */
static uint64_t shuffled(uint64_t i, uint64_t n, uint64_t key)
{
        unsigned half = 1;
        while ((UINT64_C(1) << (2 * half)) < n)
                half++;
        uint64_t mask = (UINT64_C(1) << half) - 1;
        do {
                uint64_t l = i >> half, r = i & mask;
                for (unsigned round = 0; round < 4; round++) {
                        uint64_t f = mix(key + round * UINT64_C(0x9e3779b97f4a7c15) + r) & mask;
                        uint64_t t = r;
                        r = l ^ f;
                        l = t;
                }
                i = l << half | r;
        } while (i >= n);
        return i;
}

static bool bar_dead(volatile void *bar0)
{
        if (!bar0)
                return false;
        uint32_t s = __atomic_load_n(
            (volatile uint32_t *)((volatile uint8_t *)bar0 + NTBF_NVME_REG_CSTS), __ATOMIC_ACQUIRE);
        return s == UINT32_MAX;
}

static uint8_t *buf_of(struct run *r, unsigned p)
{
        return r->paths[p].buf ? (uint8_t *)r->paths[p].buf : r->buf;
}

static int submit(struct run *r, unsigned k)
{
        struct cmd *c = &r->cmds[k];
        while (r->cur < r->npaths && r->paths[r->cur].failed)
                r->cur++;
        if (r->cur >= r->npaths)
                return -EIO;
        struct ntbf_nvme_path *p = &r->paths[r->cur];
        uint64_t io = p->buf_io + (uint64_t)k * r->job->bs;
        /* Data is made where the path's controller reads it: a write resubmitted on another
         * path with its own buffer carries the same pattern. */
        if (c->write && r->job->pattern == NTBF_NVME_PAT_STREAM)
                ntbf_nvme_pattern_fill(buf_of(r, r->cur) + (size_t)k * r->job->bs, c->slba, c->nlb,
                                       r->ns->lba_shift, r->job->seed, r->job->gen);
        int cid = ntbf_nvme_qp_rw(p->qp, r->ns, c->write ? NTBF_NVME_CMD_WRITE : NTBF_NVME_CMD_READ,
                                  c->slba, c->nlb, io, 0, (void *)(uintptr_t)(k + 1));
        if (cid < 0)
                return cid;
        c->path = r->cur;
        return 0;
}

static void finish(struct run *r, unsigned k, int status, uint64_t now)
{
        struct cmd *c = &r->cmds[k];
        struct ntbf_nvme_stats *st = r->st;
        const struct ntbf_nvme_job *j = r->job;
        if (!status && !c->write && j->pattern == NTBF_NVME_PAT_STREAM &&
            ntbf_nvme_pattern_check(buf_of(r, c->path) + (size_t)k * j->bs, c->slba, c->nlb,
                                    r->ns->lba_shift, j->seed, j->gen) >= 0) {
                st->mismatches++;
                if (!st->first_error)
                        st->first_error = -EBADMSG;
        }
        if (status) {
                st->errors++;
                if (!st->first_error)
                        st->first_error = status;
        } else {
                st->ios++;
                st->bytes += (uint64_t)c->nlb << r->ns->lba_shift;
                if (c->write)
                        st->writes++;
                else
                        st->reads++;
                ntbf_nvme_hist_add(&st->lat, now - c->t0);
                r->paths[c->path].ios++;
        }
        if (j->done)
                j->done(j->done_arg, c->write, c->slba, c->nlb, status);
        c->busy = false;
        r->inflight--;
}

/* Give up path p: what it still holds goes to the next path that works. */
static int fail_path(struct run *r, unsigned p, uint64_t now)
{
        struct ntbf_nvme_path *x = &r->paths[p];
        if (x->failed)
                return 0;
        x->failed = true;
        r->st->failovers++;
        /* A command the controller might still run on the old path completes there only as a
         * late completion: it is never reported twice. */
        for (uint16_t i = 0; i < x->qp->ncids; i++)
                if (x->qp->slots[i].busy)
                        x->qp->slots[i].timed_out = 1;
        for (unsigned k = 0; k < r->job->qd; k++) {
                struct cmd *c = &r->cmds[k];
                if (!c->busy || c->path != p)
                        continue;
                int e = submit(r, k);
                if (e) {
                        finish(r, k, e == -EBUSY ? -EIO : e, now);
                        continue;
                }
                r->st->resubmitted++;
        }
        return 0;
}

static bool want_more(struct run *r, uint64_t issued, uint64_t now, uint64_t t_start)
{
        const struct ntbf_nvme_job *j = r->job;
        if (j->ios)
                return issued < j->ios;
        return now - t_start < j->time_ns;
}

int ntbf_nvme_job_run(struct ntbf_nvme_path *paths, unsigned npaths, const struct ntbf_nvme_ns *ns,
                      void *buf, const struct ntbf_nvme_job *job, struct ntbf_nvme_stats *st)
{
        memset(st, 0, sizeof(*st));
        uint32_t bsz = 1u << ns->lba_shift;
        if (!npaths || !job->qd || !job->bs || job->bs % bsz || job->bs > ns->max_xfer ||
            job->read_pct > 100 || job->first >= ns->nsze)
                return -EINVAL;
        struct run r = {
            .paths = paths, .npaths = npaths, .ns = ns, .job = job, .st = st, .buf = buf};
        r.nlb = job->bs / bsz;
        r.first = job->first;
        uint64_t blocks = job->blocks ? job->blocks : ns->nsze - job->first;
        if (blocks > ns->nsze - job->first)
                blocks = ns->nsze - job->first;
        r.units = blocks / r.nlb;
        if (!r.units)
                return -EINVAL;
        r.rng = mix(job->seed + 1) | 1;
        r.cmds = calloc(job->qd, sizeof(*r.cmds));
        if (!r.cmds)
                return -ENOMEM;
        for (unsigned p = 0; p < npaths; p++)
                paths[p].ios = 0;
        uint64_t timeout = job->timeout_ns ? job->timeout_ns : UINT64_C(2000000000);
        uint64_t t_start = ntbf_nvme_now_ns(), issued = 0, looks = 0;
        int ret = 0;
        for (;;) {
                uint64_t now = ntbf_nvme_now_ns();
                /* Fill the queue. */
                for (unsigned k = 0; k < job->qd && want_more(&r, issued, now, t_start); k++) {
                        struct cmd *c = &r.cmds[k];
                        if (c->busy)
                                continue;
                        uint64_t unit = job->random ? rnd(&r) % r.units
                                        : job->shuffle
                                            ? shuffled(r.next_unit++ % r.units, r.units, job->seed)
                                            : r.next_unit++ % r.units;
                        c->write = job->read_pct == 0 ||
                                   (job->read_pct < 100 && rnd(&r) % 100 >= job->read_pct);
                        c->slba = r.first + unit * r.nlb;
                        c->nlb = r.nlb;
                        c->t0 = now;
                        int e = submit(&r, k);
                        if (e == -EBUSY)
                                break;
                        if (e) {
                                ret = e;
                                goto out;
                        }
                        c->busy = true;
                        r.inflight++;
                        issued++;
                }
                if (!r.inflight && !want_more(&r, issued, now, t_start))
                        break;
                /* Reap the paths that work; a failed one is abandoned, late completions and
                 * all (its CQ may read all ones). */
                bool any = false;
                for (unsigned p = 0; p < npaths; p++) {
                        if (paths[p].failed)
                                continue;
                        struct ntbf_nvme_done d[32];
                        int n = ntbf_nvme_qp_poll(paths[p].qp, d, 32);
                        now = n ? ntbf_nvme_now_ns() : now;
                        for (int i = 0; i < n; i++) {
                                unsigned k = (unsigned)(uintptr_t)d[i].tag - 1;
                                if (k < job->qd && r.cmds[k].busy && r.cmds[k].path == p)
                                        finish(&r, k, d[i].status, now);
                        }
                        any |= n > 0;
                }
                if (any)
                        continue;
                /* Nothing came back: has a path died? */
                looks++;
                now = ntbf_nvme_now_ns();
                for (unsigned p = 0; p < npaths; p++) {
                        if (paths[p].failed)
                                continue;
                        struct ntbf_nvme_done d[32];
                        bool dead = (looks % 64 == 0 && bar_dead(paths[p].bar0)) ||
                                    ntbf_nvme_qp_expire(paths[p].qp, now, timeout, d, 32) > 0;
                        if (dead)
                                fail_path(&r, p, now);
                }
                if (r.cur >= npaths) {
                        /* Every path is gone: what is left fails. */
                        for (unsigned k = 0; k < job->qd; k++)
                                if (r.cmds[k].busy)
                                        finish(&r, k, -EIO, now);
                        ret = -EIO;
                        goto out;
                }
                if (job->idle)
                        job->idle(job->idle_arg);
                if (job->nap_ns) {
                        /* Many clients sharing few CPUs: give the controller's poller a turn. */
                        struct timespec ts = {0, (long)job->nap_ns};
                        nanosleep(&ts, NULL);
                }
        }
out:
        st->elapsed_ns = ntbf_nvme_now_ns() - t_start;
        free(r.cmds);
        if (!ret && st->first_error)
                ret = st->first_error;
        return ret;
}
