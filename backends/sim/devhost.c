/* backends/sim/devhost.c: the device host: device model runners, adapter DMA engines, the reaper.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "say.h"
#include "cfgspace.h"
#include "devmodel.h"
#include "sim.h"

/*
 * Every runner polls while it has work and for spin_ns (50 us) after its last work, then
 * naps 1 us, 2 us, 4 us ... up to max_nap_ns (1 ms) until it finds work again (docs/sim.md,
 * "Polling and its latency"). Device models have no way to be woken (a driver's doorbell is
 * a plain store to shared memory), so they nap with nanosleep; DMA engines nap on the
 * fabric's devhost_kick futex, which dma_submit bumps, so a submission ends their nap.
 */

enum runner_kind { RUN_MODEL, RUN_DMA, RUN_REAPER, RUN_MCAST };

struct runner {
        struct ntbf_sim_devhost *dh;
        pthread_t th;
        bool started;
        enum runner_kind kind;
        const struct ntbf_sim_model_ops *ops;
        void *state;
        struct ntbf_sim_devenv env;
        uint32_t func, device, node, adapter;
        uint16_t rid;
        _Atomic uint64_t polls, work, naps, flr, resets;
};

struct ntbf_sim_devhost {
        struct ntbf_sim *s;
        struct ntbf_sim_devhost_opts o;
        _Atomic bool stop;
        struct runner *r;
        uint32_t nr;
        _Atomic uint64_t reaped_mem, reaped_irqs, dma_done;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
}

static void nap_ns(uint64_t ns)
{
        struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
        nanosleep(&ts, NULL);
}

/* ---- DMA on behalf of a model -------------------------------------------------------------- */

static int model_read(void *opaque, uint64_t addr, void *buf, size_t len)
{
        struct runner *r = opaque;
        return ntbf__sim_xfer(r->dh->s, r->node, r->device, r->rid, addr, buf, len, false, NULL);
}

static int model_write(void *opaque, uint64_t addr, const void *buf, size_t len)
{
        struct runner *r = opaque;
        return ntbf__sim_xfer(r->dh->s, r->node, r->device, r->rid, addr, (void *)buf, len, true,
                              NULL);
}

/* ---- function level reset -------------------------------------------------------------------- */

/*
 * A driver starts an FLR by writing Initiate Function Level Reset (Device Control) into
 * config space; cfgspace keeps it pending in the values page (it reads as 0). The runner
 * resets the model, then clears it: whoever sees it cleared sees the reset done.
 */
static void do_flr(struct runner *r)
{
        if (!ntbf_sim_cfg_flr_pending(r->env.cfg))
                return;
        r->ops->reset(r->state);
        atomic_fetch_add(&r->flr, 1);
        atomic_fetch_add(&r->dh->s->funcs[r->func].flr, 1);
        ntbf_sim_cfg_flr_clear(r->env.cfg);
}

/* ---- runners -----------------------------------------------------------------------------------
 */

static void *model_main(void *arg)
{
        struct runner *r = arg;
        struct ntbf_sim_devhost *dh = r->dh;
        struct ntbf_sim *s = dh->s;
        struct sim_node *node = &s->nodes[r->node];
        /* Without this the kernel stretches every short nap to the default 50 us slack. */
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
        uint32_t boot = atomic_load(&node->boot);
        uint64_t now = ntbf__sim_now_ns(), last = now, nap = 0;
        while (!atomic_load_explicit(&dh->stop, memory_order_relaxed)) {
                if (!atomic_load_explicit(&node->alive, memory_order_acquire)) {
                        nap_ns(dh->o.max_nap_ns); /* a dead host's devices do nothing */
                        continue;
                }
                uint32_t b = atomic_load_explicit(&node->boot, memory_order_acquire);
                if (b != boot) {
                        boot = b;
                        r->ops->reset(r->state);
                        atomic_fetch_add(&r->resets, 1);
                }
                do_flr(r);
                int n = r->ops->poll(r->state, now);
                atomic_fetch_add_explicit(&r->polls, 1, memory_order_relaxed);
                now = ntbf__sim_now_ns();
                if (n > 0) {
                        atomic_fetch_add_explicit(&r->work, (uint64_t)n, memory_order_relaxed);
                        last = now;
                        nap = 0;
                        continue;
                }
                if (now - last < dh->o.spin_ns) {
                        cpu_relax();
                        continue;
                }
                nap = nap ? (nap * 2 < dh->o.max_nap_ns ? nap * 2 : dh->o.max_nap_ns) : 1000;
                nap_ns(nap);
                atomic_fetch_add_explicit(&r->naps, 1, memory_order_relaxed);
                now = ntbf__sim_now_ns();
        }
        return NULL;
}

static void *dma_main(void *arg)
{
        struct runner *r = arg;
        struct ntbf_sim_devhost *dh = r->dh;
        struct ntbf_sim *s = dh->s;
        struct sim_futex *kick = &s->hdr->devhost_kick;
        struct sim_node *node = &s->nodes[r->node];
        size_t blen = 256 * 1024;
        uint8_t *bounce = malloc(blen);
        if (!bounce)
                return NULL;
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
        uint64_t now = ntbf__sim_now_ns(), last = now, nap = 0;
        while (!atomic_load_explicit(&dh->stop, memory_order_relaxed)) {
                uint32_t k = atomic_load(&kick->seq);
                int n = 0;
                if (atomic_load_explicit(&node->alive, memory_order_acquire))
                        n = ntbf__sim_dma_run(s, r->adapter, bounce, blen);
                atomic_fetch_add_explicit(&r->polls, 1, memory_order_relaxed);
                now = ntbf__sim_now_ns();
                if (n > 0) {
                        atomic_fetch_add_explicit(&r->work, (uint64_t)n, memory_order_relaxed);
                        atomic_fetch_add(&dh->dma_done, (uint64_t)n);
                        last = now;
                        nap = 0;
                        continue;
                }
                if (now - last < dh->o.spin_ns) {
                        cpu_relax();
                        continue;
                }
                nap = nap ? (nap * 2 < dh->o.max_nap_ns ? nap * 2 : dh->o.max_nap_ns) : 1000;
                /* Register as a sleeper, then look again: a submission after the look bumps
                 * kick->seq past k and the wait returns at once. */
                atomic_fetch_add(&kick->waiters, 1);
                if (atomic_load(&kick->seq) == k)
                        ntbf__sim_futex_wait(&kick->seq, k, nap, false);
                atomic_fetch_sub(&kick->waiters, 1);
                atomic_fetch_add_explicit(&r->naps, 1, memory_order_relaxed);
                now = ntbf__sim_now_ns();
        }
        free(bounce);
        return NULL;
}

static void *reaper_main(void *arg)
{
        struct runner *r = arg;
        struct ntbf_sim_devhost *dh = r->dh;
        struct ntbf_sim *s = dh->s;
        while (!atomic_load(&dh->stop)) {
                for (uint32_t n = 0; n < s->t->nnodes && !atomic_load(&dh->stop); n++) {
                        atomic_fetch_add(&dh->reaped_mem, ntbf__sim_mem_reap(s, n));
                        atomic_fetch_add(&dh->reaped_irqs, ntbf__sim_irq_reap(s, n));
                }
                atomic_fetch_add(&r->polls, 1);
                /* Short naps so stop is prompt; the period is reap_ms. */
                for (uint32_t t = 0; t < dh->o.reap_ms && !atomic_load(&dh->stop); t++)
                        nap_ns(1000000);
        }
        return NULL;
}

const struct ntbf_sim_model_ops *ntbf_sim_builtin_model(const struct ntbf_device *d)
{
        return ntbf_sim_model_for(d);
}

/* ---- the device host role ------------------------------------------------------------------ */

static int claim_role(struct ntbf_sim *s, char *why, size_t whylen)
{
        struct sim_hdr *h = s->hdr;
        int me = getpid();
        for (;;) {
                int32_t cur = atomic_load(&h->devhost_pid);
                if (cur == me) {
                        ntbf__say(why, whylen, "this process already runs the device host");
                        return NTBF_EBUSY;
                }
                if (cur) {
                        uint64_t st = h->devhost_start;
                        uint64_t now = ntbf__sim_proc_start(cur);
                        /* A start time of 0 means the owner is still claiming: alive. */
                        if (now && (!st || st == now)) {
                                ntbf__say(
                                    why, whylen,
                                    "another device host (pid %d) serves the fabric in %s; stop "
                                    "it first",
                                    cur, s->dir);
                                return NTBF_EBUSY;
                        }
                }
                if (atomic_compare_exchange_strong(&h->devhost_pid, &cur, me)) {
                        h->devhost_start = ntbf__sim_proc_start(me);
                        return 0;
                }
        }
}

static void release_role(struct ntbf_sim *s)
{
        int32_t me = getpid();
        s->hdr->devhost_start = 0;
        atomic_compare_exchange_strong(&s->hdr->devhost_pid, &me, 0);
}

static int open_image(struct ntbf_sim *s, const struct ntbf_device *d)
{
        char path[PATH_MAX + 128];
        snprintf(path, sizeof(path), "%s/images/%s-%s.img", s->dir, s->t->nodes[d->node].name,
                 d->name);
        return open(path, O_RDWR | O_CLOEXEC);
}

static int setup_model(struct ntbf_sim_devhost *dh, struct runner *r, uint32_t d, uint32_t f,
                       const struct ntbf_sim_model_ops *ops)
{
        struct ntbf_sim *s = dh->s;
        const struct ntbf_device *dev = &s->t->devices[d];
        r->dh = dh;
        r->kind = RUN_MODEL;
        r->ops = ops;
        r->device = d;
        r->node = dev->node;
        r->func = s->func_first[d] + f;
        r->rid = s->funcs[r->func].rid;
        struct ntbf_sim_devenv *e = &r->env;
        e->desc = dev;
        e->function = f;
        e->node_name = s->t->nodes[dev->node].name;
        e->node_id = s->t->nodes[dev->node].id;
        e->cfg = sim_at(s, s->funcs[r->func].off_cfg);
        e->backing_fd = -1;
        for (uint32_t b = 0; b < NTBF_MAX_BARS; b++) {
                uint64_t size = ntbf_device_bar_size(dev, f, b);
                if (!size)
                        continue;
                bool pf = f < dev->functions;
                uint8_t *base = sim_file(s, pf ? SF_BAR : SF_VFBAR, d * NTBF_MAX_BARS + b);
                if (!base)
                        return -EIO;
                e->bar[b] = base + (pf ? f : f - dev->functions) * size;
                e->bar_size[b] = size;
        }
        if (dev->sim.model == NTBF_SIM_NVME) {
                e->backing_fd = open_image(s, dev);
                if (e->backing_fd < 0)
                        return -errno;
        }
        e->dma = (struct ntbf_sim_dma){model_read, model_write, r};
        return ops->create(e, &r->state);
}

/*
 * The switches' multicast replication of CPU stores (mcpost.c): a pass over the multicast
 * slots every 10 us while stores keep coming, backing off to max_nap_ns when idle.
 */
static void *mcast_main(void *arg)
{
        struct runner *r = arg;
        struct ntbf_sim_devhost *dh = r->dh;
        struct ntbf__sim_mcpost *m = ntbf__sim_mcpost_new(dh->s);
        if (!m)
                return NULL;
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
        uint64_t nap = 10000;
        while (!atomic_load_explicit(&dh->stop, memory_order_relaxed)) {
                uint64_t n = ntbf__sim_mcpost_run(m);
                atomic_fetch_add_explicit(&dh->s->hdr->mcast_passes, 1, memory_order_release);
                atomic_fetch_add_explicit(&r->polls, 1, memory_order_relaxed);
                if (n) {
                        atomic_fetch_add_explicit(&r->work, n, memory_order_relaxed);
                        nap = 10000;
                } else if (nap < dh->o.max_nap_ns) {
                        nap = nap * 2 < dh->o.max_nap_ns ? nap * 2 : dh->o.max_nap_ns;
                }
                nap_ns(nap);
        }
        ntbf__sim_mcpost_free(m);
        return NULL;
}

int ntbf_sim_devhost_start(struct ntbf_backend *b, const struct ntbf_sim_devhost_opts *opts,
                           struct ntbf_sim_devhost **out, char *why, size_t whylen)
{
        struct ntbf_sim *s = ntbf__sim_of(b);
        if (!s || !out)
                return -EINVAL;
        struct ntbf_sim_devhost *dh = calloc(1, sizeof(*dh));
        if (!dh)
                return -ENOMEM;
        dh->s = s;
        if (opts)
                dh->o = *opts;
        if (!dh->o.reap_ms)
                dh->o.reap_ms = 20;
        if (!dh->o.spin_ns)
                dh->o.spin_ns = 50000;
        if (!dh->o.max_nap_ns)
                dh->o.max_nap_ns = 1000000;
        const struct ntbf_topo *t = s->t;
        uint32_t cap = 2 + t->nadapters;
        for (uint32_t d = 0; d < t->ndevices; d++)
                cap += ntbf_device_nfuncs(&t->devices[d]);
        dh->r = calloc(cap, sizeof(*dh->r));
        if (!dh->r) {
                free(dh);
                return -ENOMEM;
        }
        int r = claim_role(s, why, whylen);
        if (r) {
                free(dh->r);
                free(dh);
                return r;
        }
        for (uint32_t d = 0; d < t->ndevices && !r && dh->o.model_for; d++) {
                const struct ntbf_sim_model_ops *ops = dh->o.model_for(&t->devices[d]);
                if (!ops)
                        continue;
                for (uint32_t f = 0; f < ntbf_device_nfuncs(&t->devices[d]) && !r; f++) {
                        struct runner *x = &dh->r[dh->nr];
                        r = setup_model(dh, x, d, f, ops);
                        if (r) {
                                if (x->env.backing_fd >= 0)
                                        close(x->env.backing_fd);
                                ntbf__say(why, whylen,
                                          "device %s.%s function %u: model %s failed: %s",
                                          t->nodes[t->devices[d].node].name, t->devices[d].name, f,
                                          ops->name, ntbf_strerror(r));
                                break;
                        }
                        dh->nr++;
                }
        }
        for (uint32_t a = 0; a < t->nadapters && !r && !dh->o.no_dma; a++) {
                if (!s->ad[a].nchan)
                        continue;
                struct runner *x = &dh->r[dh->nr++];
                x->dh = dh;
                x->kind = RUN_DMA;
                x->adapter = a;
                x->node = s->ad[a].node;
        }
        if (!r && !dh->o.no_dma) {
                struct runner *x = &dh->r[dh->nr++];
                x->dh = dh;
                x->kind = RUN_MCAST;
        }
        if (!r && !dh->o.no_reaper) {
                struct runner *x = &dh->r[dh->nr++];
                x->dh = dh;
                x->kind = RUN_REAPER;
        }
        for (uint32_t i = 0; i < dh->nr && !r; i++) {
                struct runner *x = &dh->r[i];
                void *(*fn)(void *) = x->kind == RUN_MODEL   ? model_main
                                      : x->kind == RUN_DMA   ? dma_main
                                      : x->kind == RUN_MCAST ? mcast_main
                                                             : reaper_main;
                r = -pthread_create(&x->th, NULL, fn, x);
                x->started = !r;
                if (r)
                        ntbf__say(why, whylen, "cannot start a device host thread: %s",
                                  strerror(-r));
        }
        if (r) {
                ntbf_sim_devhost_stop(dh);
                return r;
        }
        *out = dh;
        return 0;
}

void ntbf_sim_devhost_stats(struct ntbf_sim_devhost *dh, struct ntbf_sim_devhost_stats *o)
{
        memset(o, 0, sizeof(*o));
        for (uint32_t i = 0; i < dh->nr; i++) {
                struct runner *x = &dh->r[i];
                if (x->kind == RUN_REAPER || x->kind == RUN_MCAST)
                        continue;
                o->models += x->kind == RUN_MODEL;
                o->dma_engines += x->kind == RUN_DMA;
                o->polls += atomic_load(&x->polls);
                o->work += atomic_load(&x->work);
                o->naps += atomic_load(&x->naps);
                o->flr += atomic_load(&x->flr);
                o->resets += atomic_load(&x->resets);
        }
        o->dma_done = atomic_load(&dh->dma_done);
        o->reaped_mem = atomic_load(&dh->reaped_mem);
        o->reaped_irqs = atomic_load(&dh->reaped_irqs);
}

void ntbf_sim_devhost_stop(struct ntbf_sim_devhost *dh)
{
        if (!dh)
                return;
        atomic_store(&dh->stop, true);
        /* DMA engines may sleep on the kick futex: wake them. */
        ntbf__sim_futex_bump(&dh->s->hdr->devhost_kick);
        for (uint32_t i = 0; i < dh->nr; i++)
                if (dh->r[i].started)
                        pthread_join(dh->r[i].th, NULL);
        for (uint32_t i = 0; i < dh->nr; i++) {
                struct runner *x = &dh->r[i];
                if (x->kind != RUN_MODEL)
                        continue;
                if (x->state)
                        x->ops->destroy(x->state);
                if (x->env.backing_fd >= 0)
                        close(x->env.backing_fd);
        }
        release_role(dh->s);
        free(dh->r);
        free(dh);
}
