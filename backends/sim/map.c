/* backends/sim/map.c: CPU mappings of windows (direct mmaps of the final memory) and the watcher
 * thread. */
#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sim.h"

/*
 * map_window resolves each slot of the range once, as a CPU read of the window's host
 * would be routed, to the file range that finally backs it (RAM or BAR, after the far
 * side's IOMMU), and maps those file ranges at consecutive addresses. Loads and stores are
 * then plain memory accesses. Ranges whose route is broken get private copies of an
 * all-ones file. When routing changes (the fabric's change counter moves), the watcher
 * thread resolves every mapping again and replaces, with MAP_FIXED, the runs that differ.
 */

/* ---- resolution ------------------------------------------------------------------------------ */

static int add_run(struct sim_mapping *m, uint64_t off, uint64_t len, enum sim_file_kind kind,
                   uint32_t obj, uint64_t foff)
{
        if (m->nruns) {
                struct sim_run *p = &m->runs[m->nruns - 1];
                if (p->kind == kind && p->off + p->len == off &&
                    (kind == SF_ONES || (p->obj == obj && p->foff + p->len == foff))) {
                        p->len += len;
                        return 0;
                }
        }
        if (m->nruns == m->cap) {
                uint32_t cap = m->cap ? m->cap * 2 : 8;
                struct sim_run *r = realloc(m->runs, cap * sizeof(*r));
                if (!r)
                        return -ENOMEM;
                m->runs = r;
                m->cap = cap;
        }
        m->runs[m->nruns++] = (struct sim_run){off, len, kind, obj, foff};
        return 0;
}

/* Resolve the whole range of m into runs (replacing m's runs). */
static int resolve(struct ntbf_sim *s, struct sim_mapping *m)
{
        uint32_t node = s->t->adapters[m->adapter].node;
        uint64_t base = m->base;
        m->nruns = 0;
        for (uint64_t off = 0; off < m->size;) {
                struct sim_hit h;
                /* A read's routing: MSI and anything that cannot be one shared mapping read
                 * all ones through a CPU mapping; a multicast slot is the adapter's post
                 * buffer, which the device host's replicator sends to the group
                 * (docs/sim.md). */
                ntbf__sim_route(s, node, NTBF_NONE, NTBF_SIM_RID_CPU, base + off, m->size - off,
                                false, false, &h);
                int r;
                bool post = h.group != NTBF_NONE && (!h.err || h.err == NTBF_EUNREACHABLE);
                if (post && sim_file(s, SF_MCPOST, m->adapter))
                        r = add_run(m, off, h.len, SF_MCPOST, m->adapter, m->post + off);
                else if (h.err || h.kind == NTBF_REGION_MSI || h.group != NTBF_NONE ||
                         !sim_file(s, h.fkind, h.fobj))
                        r = add_run(m, off, h.len, SF_ONES, 0, 0);
                else
                        r = add_run(m, off, h.len, h.fkind, h.fobj, h.foff);
                if (r)
                        return r;
                off += h.len;
        }
        return 0;
}

static int prot_of(unsigned flags)
{
        return flags & NTBF_MAP_READONLY ? PROT_READ : PROT_READ | PROT_WRITE;
}

static int apply_run(struct ntbf_sim *s, struct sim_mapping *m, const struct sim_run *run)
{
        int prot = prot_of(m->flags);
        if (run->kind != SF_ONES) {
                int fd = ntbf__sim_file_fd(s, run->kind, run->obj);
                void *p = mmap(m->addr + run->off, run->len, prot, MAP_SHARED | MAP_FIXED, fd,
                               (off_t)run->foff);
                return p == MAP_FAILED ? -errno : 0;
        }
        int fd = ntbf__sim_ones_fd(s, run->len);
        if (fd < 0)
                return -ENOMEM;
        for (uint64_t o = 0; o < run->len; o += s->ones_size) {
                uint64_t n = run->len - o < s->ones_size ? run->len - o : s->ones_size;
                void *p = mmap(m->addr + run->off + o, n, prot, MAP_PRIVATE | MAP_FIXED, fd, 0);
                if (p == MAP_FAILED)
                        return -errno;
        }
        return 0;
}

static bool same_run(const struct sim_run *a, const struct sim_run *b)
{
        return a->off == b->off && a->len == b->len && a->kind == b->kind &&
               (a->kind == SF_ONES || (a->obj == b->obj && a->foff == b->foff));
}

/* Resolve m again and remap the runs that changed. Caller holds s->lock. */
static int remap(struct ntbf_sim *s, struct sim_mapping *m)
{
        struct sim_run *old = m->runs;
        uint32_t nold = m->nruns;
        m->runs = NULL;
        m->nruns = m->cap = 0;
        int r = resolve(s, m);
        if (r) {
                free(m->runs);
                m->runs = old;
                m->nruns = m->cap = nold;
                return r;
        }
        uint32_t j = 0;
        for (uint32_t i = 0; i < m->nruns; i++) {
                while (j < nold && old[j].off < m->runs[i].off)
                        j++;
                if (j < nold && same_run(&old[j], &m->runs[i]))
                        continue;
                int e = apply_run(s, m, &m->runs[i]);
                if (e && !r)
                        r = e;
        }
        free(old);
        return r;
}

void ntbf__sim_remap_all(struct ntbf_sim *s)
{
        pthread_mutex_lock(&s->lock);
        for (struct sim_mapping *m = s->maps; m; m = m->next)
                remap(s, m);
        pthread_mutex_unlock(&s->lock);
}

int ntbf__sim_map(struct ntbf_sim *s, uint32_t a, uint32_t win, uint64_t offset, uint64_t size,
                  unsigned flags, void **addr)
{
        const struct ntbf_adapter *ad = &s->t->adapters[a];
        if (!addr || !size || win >= ad->nwin || offset % SIM_PAGE || size % SIM_PAGE ||
            offset >= ad->win[win].size || size > ad->win[win].size - offset)
                return -EINVAL;
        struct sim_mapping *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->adapter = a;
        m->base = ad->win[win].base + offset;
        m->post = sim_post_off(ad, &ad->win[win]) + offset;
        m->size = size;
        m->flags = flags & ~(unsigned)NTBF_MAP_FIXED;
        /* Reserve the addresses first so the runs land side by side (or take the caller's). */
        bool fixed = flags & NTBF_MAP_FIXED;
        if (fixed && (!*addr || (uintptr_t)*addr % SIM_PAGE)) {
                free(m);
                return -EINVAL;
        }
        void *va =
            fixed ? *addr
                  : mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (va == MAP_FAILED) {
                free(m);
                return -ENOMEM;
        }
        m->addr = va;
        int r = ntbf__sim_watcher_need(s);
        if (r)
                goto fail;
        pthread_mutex_lock(&s->lock);
        r = resolve(s, m);
        for (uint32_t i = 0; !r && i < m->nruns; i++)
                r = apply_run(s, m, &m->runs[i]);
        bool first = !s->maps;
        if (!r) {
                m->next = s->maps;
                s->maps = m;
        }
        pthread_mutex_unlock(&s->lock);
        if (r)
                goto fail;
        if (first) /* from now on routing changes concern this process: wait on them */
                ntbf__sim_watcher_kick(s);
        *addr = va;
        return 0;
fail:
        if (fixed) /* the caller's reservation, as it was */
                mmap(va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
                     -1, 0);
        else
                munmap(va, size);
        free(m->runs);
        free(m);
        return r;
}

int ntbf__sim_unmap(struct ntbf_sim *s, uint32_t a, void *addr, uint64_t size)
{
        pthread_mutex_lock(&s->lock);
        struct sim_mapping **pp = &s->maps, *m = NULL;
        for (; *pp; pp = &(*pp)->next) {
                if ((*pp)->addr == addr && (*pp)->adapter == a && (*pp)->size == size) {
                        m = *pp;
                        *pp = m->next;
                        break;
                }
        }
        pthread_mutex_unlock(&s->lock);
        if (!m)
                return -EINVAL;
        munmap(m->addr, m->size);
        free(m->runs);
        free(m);
        return 0;
}

void ntbf__sim_maps_close(struct ntbf_sim *s)
{
        while (s->maps) {
                struct sim_mapping *m = s->maps;
                s->maps = m->next;
                munmap(m->addr, m->size);
                free(m->runs);
                free(m);
        }
}

/* ---- change notification --------------------------------------------------------------------- */

void ntbf__sim_changed(struct ntbf_sim *s)
{
        ntbf__sim_futex_bump(&s->hdr->change);
        /* Our own mappings follow our own changes at once, not a wake-up later. */
        pthread_mutex_lock(&s->lock);
        bool any = s->maps != NULL;
        pthread_mutex_unlock(&s->lock);
        if (any)
                ntbf__sim_remap_all(s);
}

void ntbf__sim_adapter_event(struct ntbf_sim *s, uint32_t a)
{
        atomic_fetch_add(&s->ad[a].event_seq, 1);
        ntbf__sim_futex_bump(&s->nodes[s->ad[a].node].attn);
}

/* ---- the watcher -------------------------------------------------------------------------------
 */

#ifndef FUTEX_32
#define FUTEX_32 2
#endif

struct waitv {
        uint64_t val;
        uint64_t uaddr;
        uint32_t flags;
        uint32_t reserved;
};

#define WAIT_MAX 128

static void signal_handles(struct ntbf_sim *s)
{
        pthread_mutex_lock(&s->lock);
        for (struct ntbf_adapter_h *h = s->handles; h; h = h->next) {
                uint32_t seq = atomic_load(&s->ad[h->adapter].event_seq);
                if (seq != atomic_load(&h->watch_seq)) {
                        atomic_store(&h->watch_seq, seq);
                        uint64_t one = 1;
                        ssize_t w = write(h->efd, &one, sizeof(one));
                        (void)w;
                }
        }
        pthread_mutex_unlock(&s->lock);
}

/*
 * The futexes to sleep on: the change counter (only with CPU mappings to keep up to date:
 * a process without any, like a daemon or the device host, is not woken by every slot
 * programmed anywhere), and the hosts we hold adapters or vectors of.
 */
static uint32_t wait_set(struct ntbf_sim *s, struct sim_futex **shared, uint32_t max)
{
        uint32_t n = 0;
        uint32_t nn = s->t->nnodes;
        bool *want = calloc(nn, sizeof(*want));
        pthread_mutex_lock(&s->lock);
        if (s->maps)
                shared[n++] = &s->hdr->change;
        for (struct ntbf_adapter_h *h = s->handles; want && h; h = h->next)
                want[s->ad[h->adapter].node] = true;
        for (struct sim_vec *v = s->vecs; want && v; v = v->next)
                want[v->node] = true;
        pthread_mutex_unlock(&s->lock);
        if (!want)
                return n;
        for (uint32_t i = 0; i < nn; i++) {
                if (!want[i])
                        continue;
                if (n == max) { /* too many hosts for one futex_waitv: poll instead */
                        n = max + 1;
                        break;
                }
                shared[n++] = &s->nodes[i].attn;
        }
        free(want);
        return n;
}

static void *watcher_main(void *arg)
{
        struct ntbf_sim *s = arg;
        struct sim_futex *shared[WAIT_MAX];
        struct waitv wv[WAIT_MAX];
        bool have_waitv = true, poll = false;
        uint32_t n = 0, built = 0;
        bool have_set = false;
        while (!atomic_load(&s->quit)) {
                uint32_t kick = atomic_load(&s->kick);
                /* The set changes only when handles or vectors come and go, which kicks us:
                 * an interrupt storm costs no allocation or lock here. */
                if (!have_set || kick != built) {
                        n = wait_set(s, shared, WAIT_MAX - 1);
                        poll = n > WAIT_MAX - 1;
                        if (n > WAIT_MAX - 1)
                                n = WAIT_MAX - 1;
                        built = kick;
                        have_set = true;
                }
                poll = poll || !have_waitv;
                for (uint32_t i = 0; i < n; i++)
                        atomic_fetch_add(&shared[i]->waiters, 1);
                wv[0] = (struct waitv){kick, (uintptr_t)&s->kick, FUTEX_32 | FUTEX_PRIVATE_FLAG, 0};
                for (uint32_t i = 0; i < n; i++)
                        wv[i + 1] = (struct waitv){atomic_load(&shared[i]->seq),
                                                   (uintptr_t)&shared[i]->seq, FUTEX_32, 0};
                /* Work after taking the values: anything newer makes the wait return at once. */
                uint32_t change = atomic_load(&s->hdr->change.seq);
                if (change != s->seen_change) {
                        s->seen_change = change;
                        ntbf__sim_remap_all(s);
                }
                ntbf__sim_irq_deliver(s);
                signal_handles(s);
                if (!poll && !atomic_load(&s->quit)) {
                        long r = syscall(SYS_futex_waitv, wv, n + 1, 0, NULL, CLOCK_MONOTONIC);
                        if (r < 0 && errno == ENOSYS)
                                have_waitv = false;
                } else if (!atomic_load(&s->quit)) {
                        ntbf__sim_futex_wait(&s->kick, kick, 1000000, true);
                }
                for (uint32_t i = 0; i < n; i++)
                        atomic_fetch_sub(&shared[i]->waiters, 1);
        }
        return NULL;
}

int ntbf__sim_watcher_need(struct ntbf_sim *s)
{
        pthread_mutex_lock(&s->lock);
        int r = 0;
        if (!s->watcher_running) {
                atomic_store(&s->quit, false);
                r = -pthread_create(&s->watcher, NULL, watcher_main, s);
                s->watcher_running = !r;
        }
        pthread_mutex_unlock(&s->lock);
        if (!r)
                ntbf__sim_watcher_kick(s); /* rebuild its wait set */
        return r;
}

void ntbf__sim_watcher_kick(struct ntbf_sim *s)
{
        atomic_fetch_add(&s->kick, 1);
        syscall(SYS_futex, &s->kick, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void ntbf__sim_watcher_stop(struct ntbf_sim *s)
{
        pthread_mutex_lock(&s->lock);
        bool running = s->watcher_running;
        s->watcher_running = false;
        pthread_mutex_unlock(&s->lock);
        if (!running)
                return;
        atomic_store(&s->quit, true);
        ntbf__sim_watcher_kick(s);
        pthread_join(s->watcher, NULL);
}
