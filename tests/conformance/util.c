/* tests/conformance/util.c: what every check shares: failures, undo, events, accesses, targets. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "ntbfab/sim.h"
#include "ntbfab/units.h"
#include "conformance.h"

/* ---- reporting ------------------------------------------------------------------------------ */

static const char *base_name(const char *file)
{
        const char *s = strrchr(file, '/');
        return s ? s + 1 : file;
}

/* The first failure of a run is the one reported: later ones follow from it. */
static int vfail(struct cf_run *r, const char *file, int line, const char *fmt, va_list ap)
{
        if (r->status == CF_FAIL)
                return -1;
        r->status = CF_FAIL;
        int n = snprintf(r->reason, sizeof(r->reason), "%s:%d: ", base_name(file), line);
        if (n < 0 || (size_t)n >= sizeof(r->reason))
                n = 0;
        vsnprintf(r->reason + n, sizeof(r->reason) - (size_t)n, fmt, ap);
        return -1;
}

int cf_fail_at(struct cf_run *r, const char *file, int line, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vfail(r, file, line, fmt, ap);
        va_end(ap);
        return -1;
}

int cf_skip(struct cf_run *r, const char *fmt, ...)
{
        if (r->status != CF_PASS)
                return -1;
        r->status = CF_SKIP;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
        va_end(ap);
        return -1;
}

const char *cf_err(int e, char *buf, size_t len)
{
        if (e == 0)
                snprintf(buf, len, "0");
        else if (e < 0 && e > -4000)
                snprintf(buf, len, "-%s", ntbf_err_name(e));
        else if (e < 0)
                snprintf(buf, len, "%s", ntbf_err_name(e));
        else
                snprintf(buf, len, "%d", e);
        return buf;
}

int cf_fail_rc(struct cf_run *r, const char *file, int line, int want, int got, const char *fmt,
               ...)
{
        char ctx[512], w[64], g[64];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx, sizeof(ctx), fmt, ap);
        va_end(ap);
        return cf_fail_at(r, file, line, "%s: expected %s, got %s%s%s%s", ctx,
                          cf_err(want, w, sizeof(w)), cf_err(got, g, sizeof(g)), got ? " (" : "",
                          got ? ntbf_strerror(got) : "", got ? ")" : "");
}

int cf_fail_u64(struct cf_run *r, const char *file, int line, uint64_t want, uint64_t got,
                const char *fmt, ...)
{
        char ctx[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx, sizeof(ctx), fmt, ap);
        va_end(ap);
        if (want < 4096 && got < 4096)
                return cf_fail_at(r, file, line, "%s: expected %llu, got %llu", ctx,
                                  (unsigned long long)want, (unsigned long long)got);
        return cf_fail_at(r, file, line, "%s: expected %#llx, got %#llx", ctx,
                          (unsigned long long)want, (unsigned long long)got);
}

/* ---- undo ------------------------------------------------------------------------------------ */

enum undo_kind {
        U_SLOT,
        U_PEER_SLOT,
        U_MEM,
        U_RID,
        U_SWRID,
        U_MAP,
        U_HOSTMAP,
        U_IOMMU,
        U_IRQ,
        U_MCAST,
        U_LINK,
        U_DBMASK,
        U_EVENTS,
        U_SPADS,
        U_ISOLATE,
};

struct cf_undo {
        enum undo_kind kind;
        bool done;
        struct cf_ad *ad;
        uint32_t u32;
        uint64_t a, b;
        void *ptr;
        struct ntbf_rid rid;
        struct ntbf_mem mem;
        struct ntbf_irq irq;
};

static struct cf_undo *push(struct cf_run *r, enum undo_kind kind, struct cf_ad *ad)
{
        if (r->nundo == r->capundo) {
                size_t cap = r->capundo ? r->capundo * 2 : 64;
                struct cf_undo *u = realloc(r->undo, cap * sizeof(*u));
                if (!u) {
                        fprintf(stderr, "ntbfab-conformance: out of memory\n");
                        exit(1);
                }
                r->undo = u;
                r->capundo = cap;
        }
        struct cf_undo *u = &r->undo[r->nundo++];
        memset(u, 0, sizeof(*u));
        u->kind = kind;
        u->ad = ad;
        return u;
}

static void undo_one(struct cf_ctx *cx, struct cf_undo *u)
{
        const struct ntbf_backend_ops *o = cx->ops;
        struct ntbf_adapter_h *h = u->ad->h;
        u->done = true;
        /* Errors are ignored: the entry may already be gone (cleared twice, reset). */
        switch (u->kind) {
        case U_SLOT:
                o->xlat_clear(h, u->u32);
                break;
        case U_PEER_SLOT:
                o->peer_xlat_clear(h, (uint32_t)u->a, u->u32);
                break;
        case U_MEM:
                o->mem_free(h, &u->mem);
                break;
        case U_RID:
                o->rid_del(h, &u->rid);
                break;
        case U_SWRID:
                o->switch_rid_del(h, u->u32, &u->rid);
                break;
        case U_MAP:
                o->unmap_window(h, u->ptr, u->a);
                break;
        case U_HOSTMAP:
                o->host_unmap(h, u->ptr, u->a);
                break;
        case U_IOMMU:
                o->iommu_unmap(h, u->a, u->b);
                break;
        case U_ISOLATE:
                o->dev_isolate(h, &u->rid, false);
                break;
        case U_IRQ:
                o->irq_free(h, &u->irq);
                break;
        case U_MCAST:
                o->mcast_leave(h, u->u32);
                break;
        case U_LINK:
                if (o->link_enable)
                        o->link_enable(h, u->u32);
                break;
        case U_DBMASK:
                o->db_clear_mask(h, u->a);
                break;
        case U_EVENTS:
                o->set_events(h, &cf_event_ops, u->ad);
                break;
        case U_SPADS:
                for (uint32_t i = 0; i < u->ad->caps.scratchpads; i++)
                        o->spad_write(h, i, 0);
                break;
        }
}

void cf_undo_all(struct cf_run *r)
{
        while (r->nundo) {
                struct cf_undo *u = &r->undo[--r->nundo];
                if (!u->done)
                        undo_one(r->cx, u);
        }
}

void cf_undo_rid(struct cf_run *r, struct cf_ad *ad, const struct ntbf_rid *rid)
{
        push(r, U_RID, ad)->rid = *rid;
}

void cf_undo_swrid(struct cf_run *r, struct cf_ad *ad, uint32_t sw, const struct ntbf_rid *rid)
{
        struct cf_undo *u = push(r, U_SWRID, ad);
        u->u32 = sw;
        u->rid = *rid;
}

void cf_undo_map(struct cf_run *r, struct cf_ad *ad, void *addr, uint64_t size)
{
        struct cf_undo *u = push(r, U_MAP, ad);
        u->ptr = addr;
        u->a = size;
}

void cf_undo_host_map(struct cf_run *r, struct cf_ad *ad, void *addr, uint64_t size)
{
        struct cf_undo *u = push(r, U_HOSTMAP, ad);
        u->ptr = addr;
        u->a = size;
}

void cf_undo_iommu(struct cf_run *r, struct cf_ad *ad, uint64_t iova, uint64_t len)
{
        struct cf_undo *u = push(r, U_IOMMU, ad);
        u->a = iova;
        u->b = len;
}

void cf_undo_isolate(struct cf_run *r, struct cf_ad *ad, const struct ntbf_rid *rid)
{
        push(r, U_ISOLATE, ad)->rid = *rid;
}

void cf_undo_irq(struct cf_run *r, struct cf_ad *ad, const struct ntbf_irq *irq)
{
        push(r, U_IRQ, ad)->irq = *irq;
}

void cf_undo_mcast(struct cf_run *r, struct cf_ad *ad, uint32_t group)
{
        push(r, U_MCAST, ad)->u32 = group;
}

void cf_undo_link(struct cf_run *r, struct cf_ad *ad, uint32_t port)
{
        push(r, U_LINK, ad)->u32 = port;
}

void cf_undo_dbmask(struct cf_run *r, struct cf_ad *ad, uint64_t bits)
{
        push(r, U_DBMASK, ad)->a = bits;
}

void cf_undo_events(struct cf_run *r, struct cf_ad *ad)
{
        push(r, U_EVENTS, ad);
}

void cf_undo_spads(struct cf_run *r, struct cf_ad *ad)
{
        push(r, U_SPADS, ad);
}

/* ---- translation slots and memory ------------------------------------------------------------ */

int cf_slot_how(struct cf_run *r, struct cf_pair *p, bool *inbound)
{
        if (p->a->caps.flags & NTBF_CAP_XLAT_OUTBOUND) {
                *inbound = false;
                return 0;
        }
        if (p->b->caps.flags & NTBF_CAP_XLAT_INBOUND) {
                *inbound = true;
                return 0;
        }
        CF_SKIP(r,
                "%s does not claim NTBF_CAP_XLAT_OUTBOUND and %s does not claim "
                "NTBF_CAP_XLAT_INBOUND: nobody can program a slot from one to the other",
                p->a->name, p->b->name);
}

int cf_slot_set(struct cf_run *r, struct cf_pair *p, bool inbound, uint32_t slot,
                const struct ntbf_xlat *x)
{
        const struct ntbf_backend_ops *o = r->cx->ops;
        if (!inbound) {
                CF_OK(r, o->xlat_set(p->a->h, slot, x),
                      "%s: xlat_set(slot %u -> %#llx, %#llx bytes)", p->a->name, slot,
                      (unsigned long long)x->addr, (unsigned long long)x->size);
                push(r, U_SLOT, p->a)->u32 = slot;
                return 0;
        }
        CF_OK(r, o->peer_xlat_set(p->b->h, p->a->idx, slot, x->addr, x->size),
              "%s: peer_xlat_set(%s, slot %u -> %#llx, %#llx bytes)", p->b->name, p->a->name, slot,
              (unsigned long long)x->addr, (unsigned long long)x->size);
        struct cf_undo *u = push(r, U_PEER_SLOT, p->b);
        u->u32 = slot;
        u->a = p->a->idx;
        return 0;
}

int cf_slot_clear(struct cf_run *r, struct cf_pair *p, bool inbound, uint32_t slot)
{
        const struct ntbf_backend_ops *o = r->cx->ops;
        if (!inbound)
                CF_OK(r, o->xlat_clear(p->a->h, slot), "%s: xlat_clear(slot %u)", p->a->name, slot);
        else
                CF_OK(r, o->peer_xlat_clear(p->b->h, p->a->idx, slot),
                      "%s: peer_xlat_clear(%s, slot %u)", p->b->name, p->a->name, slot);
        return 0;
}

int cf_mem_try(struct cf_run *r, struct cf_ad *ad, uint64_t size, uint64_t align,
               struct ntbf_mem *m)
{
        memset(m, 0, sizeof(*m));
        m->fd = -1;
        int rc = r->cx->ops->mem_alloc(ad->h, size, align, m);
        if (!rc) {
                struct cf_undo *u = push(r, U_MEM, ad);
                u->mem = *m;
        }
        return rc;
}

int cf_mem(struct cf_run *r, struct cf_ad *ad, uint64_t size, uint64_t align, struct ntbf_mem *m)
{
        if (!(ad->caps.flags & NTBF_CAP_MEM))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_MEM: no memory to export",
                        ad->name);
        CF_OK(r, cf_mem_try(r, ad, size, align, m), "%s: mem_alloc(%llu bytes, align %llu)",
              ad->name, (unsigned long long)size, (unsigned long long)align);
        if (!m->addr)
                CF_FAIL(r, "%s: mem_alloc returned no mapping (addr NULL)", ad->name);
        return 0;
}

int cf_mem_free(struct cf_run *r, struct cf_ad *ad, struct ntbf_mem *m)
{
        for (size_t i = r->nundo; i-- > 0;) {
                struct cf_undo *u = &r->undo[i];
                if (u->kind == U_MEM && !u->done && u->ad == ad && u->mem.bus_addr == m->bus_addr &&
                    u->mem.addr == m->addr) {
                        u->done = true;
                        break;
                }
        }
        return r->cx->ops->mem_free(ad->h, m);
}

int cf_host_unmap(struct cf_run *r, struct cf_ad *ad, void *addr, uint64_t size)
{
        for (size_t i = r->nundo; i-- > 0;) {
                struct cf_undo *u = &r->undo[i];
                if (u->kind == U_HOSTMAP && !u->done && u->ad == ad && u->ptr == addr) {
                        u->done = true;
                        break;
                }
        }
        return r->cx->ops->host_unmap(ad->h, addr, size);
}

int cf_irq_two(struct cf_run *r, struct cf_ad *ad, struct ntbf_irq v[2])
{
        for (int i = 0; i < 2; i++) {
                memset(&v[i], 0, sizeof(v[i]));
                v[i].fd = -1;
                CF_OK(r, r->cx->ops->irq_alloc(ad->h, &v[i]), "%s: irq_alloc (vector %d)", ad->name,
                      i + 1);
                cf_undo_irq(r, ad, &v[i]);
                CF_TRUE(r, v[i].fd >= 0, "%s: irq_alloc returned fd %d", ad->name, v[i].fd);
                CF_TRUE(r, !cf_poll_readable(v[i].fd, 0),
                        "%s: a fresh vector's eventfd is readable before any interrupt", ad->name);
        }
        CF_TRUE(r, v[0].addr != v[1].addr || v[0].data != v[1].data,
                "%s: two vectors with the same address and data (%#llx, %#x)", ad->name,
                (unsigned long long)v[0].addr, v[0].data);
        return 0;
}

int cf_irq_expect(struct cf_run *r, struct cf_ad *ad, const struct ntbf_irq v[2], int i,
                  const char *how)
{
        struct cf_ctx *cx = r->cx;
        CF_TRUE(r, cf_poll_readable(v[i].fd, cx->timeout_ms),
                "%s: vector %d (address %#llx, data %#x): eventfd not signalled within %u ms of "
                "%s",
                ad->name, i + 1, (unsigned long long)v[i].addr, v[i].data, cx->timeout_ms, how);
        uint64_t cnt = 0;
        CF_TRUE(r, read(v[i].fd, &cnt, sizeof(cnt)) == sizeof(cnt) && cnt >= 1,
                "%s: vector %d: reading its eventfd", ad->name, i + 1);
        CF_TRUE(r, !cf_poll_readable(v[1 - i].fd, cx->quiet_ms),
                "%s: %s for vector %d also signalled vector %d", ad->name, how, i + 1, 2 - i);
        return 0;
}

int cf_far_mem(struct cf_run *r, struct cf_ad *b, uint64_t len, uint64_t align, struct ntbf_mem *m)
{
        CF_TRY(cf_mem(r, b, len, align, m));
        /* Without an IOMMU the bus address is what inbound traffic uses; with one the kernel
         * owns (NTBF_CAP_KERNEL_IOMMU) it is the IOVA the kernel mapped it at. */
        if (!(b->caps.flags & NTBF_CAP_IOMMU))
                return 0;
        /* Far-side addresses are in B's inbound domain: with an IOMMU, map the memory at
         * IOVA = bus address so that the same number works either way. */
        uint64_t span = ntbf_align_up(m->size, 4096);
        CF_OK(r, r->cx->ops->iommu_map(b->h, m->bus_addr, m->bus_addr, span),
              "%s: iommu_map(iova %#llx -> %#llx, %llu bytes)", b->name,
              (unsigned long long)m->bus_addr, (unsigned long long)m->bus_addr,
              (unsigned long long)span);
        cf_undo_iommu(r, b, m->bus_addr, span);
        return 0;
}

int cf_target(struct cf_run *r, struct cf_pair *p, uint32_t slot, uint32_t nslots,
              struct cf_target *tg)
{
        bool inbound = false;
        CF_TRY(cf_slot_how(r, p, &inbound));
        uint32_t w0, w1;
        if (!cf_slot_window(p->a, slot, &w0) || !cf_slot_window(p->a, slot + nslots - 1, &w1) ||
            w0 != w1)
                CF_FAIL(r, "internal: slots %u..%u of %s are not in one window", slot,
                        slot + nslots - 1, p->a->name);
        uint64_t E = cf_slot_size(p->a, slot), xs = cf_xsize(p->a, slot);
        uint64_t align = cf_xalign(p->a, slot, xs);
        CF_TRY(cf_far_mem(r, p->b, (uint64_t)nslots * E, align > E ? align : E, &tg->mem));
        tg->far = tg->mem.bus_addr;
        tg->slot = slot;
        tg->nslots = nslots;
        tg->E = E;
        tg->xs = xs;
        tg->addr = cf_slot_addr(p->a, slot);
        for (uint32_t i = 0; i < nslots; i++) {
                struct ntbf_xlat x = {p->b->node, p->b->idx, tg->far + i * E, NTBF_NONE, xs};
                CF_TRY(cf_slot_set(r, p, inbound, slot + i, &x));
        }
        return 0;
}

/* ---- events ---------------------------------------------------------------------------------- */

static void ev_link(void *ctx, uint32_t port, bool up)
{
        struct cf_events *e = &((struct cf_ad *)ctx)->ev;
        if (e->links < CF_EV_LOG) {
                e->link[e->links].port = port;
                e->link[e->links].up = up;
        }
        e->links++;
        e->calls++;
}

static void ev_db(void *ctx, uint32_t vector, uint64_t bits)
{
        struct cf_events *e = &((struct cf_ad *)ctx)->ev;
        if (e->dbs < CF_EV_LOG) {
                e->db[e->dbs].vector = vector;
                e->db[e->dbs].bits = bits;
        }
        e->dbs++;
        e->calls++;
}

static void ev_msg(void *ctx, uint32_t peer, uint32_t midx, uint32_t value)
{
        struct cf_events *e = &((struct cf_ad *)ctx)->ev;
        if (e->msgs < CF_EV_LOG) {
                e->msg[e->msgs].peer = peer;
                e->msg[e->msgs].midx = midx;
                e->msg[e->msgs].value = value;
        }
        e->msgs++;
        e->calls++;
}

static void ev_reset(void *ctx)
{
        struct cf_events *e = &((struct cf_ad *)ctx)->ev;
        e->resets++;
        e->calls++;
}

const struct ntbf_event_ops cf_event_ops = {ev_link, ev_db, ev_msg, ev_reset};
const struct ntbf_event_ops cf_event_ops_nomsg = {ev_link, ev_db, NULL, ev_reset};

void cf_ev_reset(struct cf_ad *ad)
{
        memset(&ad->ev, 0, sizeof(ad->ev));
}

int cf_process(struct cf_run *r, struct cf_ad *ad)
{
        ad->ev.calls = 0;
        int n = r->cx->ops->process_events(ad->h);
        if (n < 0)
                return cf_fail_rc(r, __FILE__, __LINE__, 0, n, "%s: process_events", ad->name);
        if ((unsigned)n != ad->ev.calls)
                CF_FAIL(r, "%s: process_events returned %d but made %u callbacks", ad->name, n,
                        ad->ev.calls);
        return n;
}

bool cf_poll_readable(int fd, unsigned ms)
{
        double end = cf_now_ms() + ms;
        for (;;) {
                struct pollfd p = {fd, POLLIN, 0};
                double left = end - cf_now_ms();
                int n = poll(&p, 1, left > 0 ? (int)left + 1 : 0);
                if (n > 0)
                        return (p.revents & POLLIN) != 0;
                if (n == 0 || (n < 0 && errno != EINTR) || left <= 0)
                        return false;
        }
}

int cf_drain(struct cf_run *r, struct cf_ad *ad)
{
        CF_TRY(cf_process(r, ad));
        cf_ev_reset(ad);
        return 0;
}

int cf_wait_ev(struct cf_run *r, struct cf_ad *ad, const unsigned *counter, unsigned want,
               const char *what)
{
        int fd = r->cx->ops->event_fd(ad->h);
        double end = cf_now_ms() + r->cx->timeout_ms;
        while (*counter < want) {
                double left = end - cf_now_ms();
                if (left <= 0 || !cf_poll_readable(fd, (unsigned)left + 1))
                        break;
                CF_TRY(cf_process(r, ad));
        }
        if (*counter >= want)
                return 0;
        /* Tell a lost wake-up from a lost event. */
        CF_TRY(cf_process(r, ad));
        if (*counter >= want)
                CF_FAIL(r,
                        "%s: %s was pending, but event_fd %d did not become readable within "
                        "%u ms",
                        ad->name, what, fd, r->cx->timeout_ms);
        CF_FAIL(r, "%s: no %s within %u ms", ad->name, what, r->cx->timeout_ms);
}

int cf_quiet(struct cf_run *r, struct cf_ad *ad)
{
        int fd = r->cx->ops->event_fd(ad->h);
        double end = cf_now_ms() + r->cx->quiet_ms;
        for (double left; (left = end - cf_now_ms()) > 0;)
                if (cf_poll_readable(fd, (unsigned)left + 1))
                        CF_TRY(cf_process(r, ad));
        CF_TRY(cf_process(r, ad));
        return 0;
}

/* ---- DMA ------------------------------------------------------------------------------------- */

int cf_need_dma(struct cf_run *r)
{
        struct cf_ctx *cx = r->cx;
        if (!cx->sim || cx->devhost)
                return 0;
        /* The simulated DMA engines run in the device host; no device models are needed. */
        struct ntbf_sim_devhost_opts o = {0};
        char why[512] = "";
        int rc = ntbf_sim_devhost_start(cx->b, &o, &cx->devhost, why, sizeof(why));
        if (rc)
                CF_FAIL(r,
                        "cannot start the simulated fabric's device host (it runs the DMA "
                        "engines): %s",
                        why);
        return 0;
}

int cf_dma_wait(struct cf_run *r, struct cf_ad *ad, uint32_t chan, const uint64_t *cookies,
                int *status, unsigned n)
{
        double start = cf_now_ms(), end = start + r->cx->timeout_ms;
        unsigned got = 0;
        while (got < n) {
                uint64_t c[16];
                int st[16];
                unsigned max = n - got < 16 ? n - got : 16;
                int k = r->cx->ops->dma_poll(ad->h, chan, c, st, max);
                if (k < 0)
                        return cf_fail_rc(r, __FILE__, __LINE__, 0, k, "%s: dma_poll(chan %u)",
                                          ad->name, chan);
                if ((unsigned)k > max)
                        CF_FAIL(r, "%s: dma_poll(chan %u, max %u) returned %d completions",
                                ad->name, chan, max, k);
                for (int i = 0; i < k; i++, got++) {
                        if (c[i] != cookies[got])
                                CF_FAIL(r,
                                        "%s: chan %u: completion %u carries cookie %llu, expected "
                                        "%llu (completions come back oldest first)",
                                        ad->name, chan, got, (unsigned long long)c[i],
                                        (unsigned long long)cookies[got]);
                        status[got] = st[i];
                }
                if (k)
                        continue;
                double now = cf_now_ms();
                if (now > end)
                        CF_FAIL(r, "%s: chan %u: cookie %llu did not complete within %u ms",
                                ad->name, chan, (unsigned long long)cookies[got],
                                r->cx->timeout_ms);
                /* Spin briefly (an engine completes small copies in microseconds), then nap. */
                if (now - start > 1.0)
                        cf_sleep_us(50);
        }
        return 0;
}

int cf_dma(struct cf_run *r, struct cf_ad *ad, uint32_t chan, uint64_t src, uint64_t dst,
           uint64_t len, int *status)
{
        CF_TRY(cf_need_dma(r));
        uint64_t cookie = ++r->cx->cookie;
        CF_OK(r, r->cx->ops->dma_submit(ad->h, chan, src, dst, len, cookie),
              "%s: dma_submit(chan %u, %#llx -> %#llx, %llu bytes)", ad->name, chan,
              (unsigned long long)src, (unsigned long long)dst, (unsigned long long)len);
        return cf_dma_wait(r, ad, chan, &cookie, status, 1);
}

void cf_dma_drain(struct cf_ctx *cx, struct cf_ad *ad)
{
        if (!(ad->caps.flags & NTBF_CAP_DMA) || !cx->ops->dma_poll)
                return;
        for (uint32_t ch = 0; ch < ad->caps.dma_channels; ch++) {
                uint64_t c[16];
                int st[16];
                while (cx->ops->dma_poll(ad->h, ch, c, st, 16) > 0)
                        ;
        }
}

/* The staging buffer lives as long as the adapter is under test (freed at teardown). */
static int stage(struct cf_run *r, struct cf_ad *ad)
{
        if (ad->staged)
                return 0;
        int rc = r->cx->ops->mem_alloc(ad->h, 65536, 4096, &ad->stage);
        if (rc)
                return cf_fail_rc(r, __FILE__, __LINE__, 0, rc,
                                  "%s: mem_alloc of the DMA staging buffer", ad->name);
        ad->staged = true;
        return 0;
}

/* ---- accesses -------------------------------------------------------------------------------- */

enum cf_tx cf_tx_mode(struct cf_ctx *cx, struct cf_ad *ad, const char **why)
{
        if (cx->sim && !cx->dma_only)
                return CF_TX_SIM;
        uint32_t need = NTBF_CAP_DMA | NTBF_CAP_MEM;
        if ((ad->caps.flags & need) == need)
                return CF_TX_DMA;
        if (why)
                *why = cx->sim ? "--access dma, and the adapter has no DMA engine"
                               : "only the simulated fabric can issue a transaction the backend "
                                 "counts, or a DMA engine (with NTBF_CAP_MEM), and the adapter "
                                 "has none";
        return CF_TX_NONE;
}

int cf_tx(struct cf_run *r, struct cf_ad *ad, uint16_t rid, bool write, uint64_t addr, void *buf,
          size_t len, int *status)
{
        struct cf_ctx *cx = r->cx;
        switch (cf_tx_mode(cx, ad, NULL)) {
        case CF_TX_SIM:
                *status =
                    write ? ntbf_sim_write(cx->b, ad->node, NTBF_NONE, rid, addr, buf, len, NULL)
                          : ntbf_sim_read(cx->b, ad->node, NTBF_NONE, rid, addr, buf, len, NULL);
                if (*status == -EINVAL)
                        CF_FAIL(r, "ntbf_sim_%s(node %u, %#llx) refused its arguments",
                                write ? "write" : "read", ad->node, (unsigned long long)addr);
                return 0;
        case CF_TX_DMA:
                if (len > 4096)
                        CF_FAIL(r, "internal: cf_tx of %zu bytes", len);
                CF_TRY(stage(r, ad));
                if (write) {
                        memcpy(ad->stage.addr, buf, len);
                        return cf_dma(r, ad, 0, ad->stage.bus_addr, addr, len, status);
                }
                memset(ad->stage.addr, 0, len);
                CF_TRY(cf_dma(r, ad, 0, addr, ad->stage.bus_addr, len, status));
                if (*status)
                        memset(buf, 0xff, len);
                else
                        memcpy(buf, ad->stage.addr, len);
                return 0;
        case CF_TX_NONE:
                break;
        }
        CF_FAIL(r, "internal: cf_tx without a way to issue transactions");
}

const char *cf_win_how(const struct cf_win *w)
{
        return w->cpu ? "CPU mapping" : "DMA engine";
}

int cf_win_open(struct cf_run *r, struct cf_pair *p, uint32_t first, uint32_t n, struct cf_win *w)
{
        struct cf_ad *a = p->a;
        memset(w, 0, sizeof(*w));
        w->p = p;
        uint32_t last;
        const struct ntbf_window *W = cf_slot_window(a, first, &w->win);
        if (!W || !n || !cf_slot_window(a, first + n - 1, &last) || last != w->win)
                CF_FAIL(r, "internal: slots %u..%u of %s are not in one window", first,
                        first + n - 1, a->name);
        w->base = cf_slot_addr(a, first);
        w->off = w->base - W->base;
        w->size = (uint64_t)n * W->slot_size;
        if ((a->caps.flags & NTBF_CAP_CPU_MAP) && !r->cx->dma_only) {
                void *addr = NULL;
                CF_OK(r, r->cx->ops->map_window(a->h, w->win, w->off, w->size, 0, &addr),
                      "%s: map_window(window %u, offset %#llx, %llu bytes)", a->name, w->win,
                      (unsigned long long)w->off, (unsigned long long)w->size);
                if (!addr)
                        CF_FAIL(r, "%s: map_window returned a NULL address", a->name);
                cf_undo_map(r, a, addr, w->size);
                w->cpu = addr;
                return 0;
        }
        uint32_t need = NTBF_CAP_DMA | NTBF_CAP_MEM;
        if ((a->caps.flags & need) != need)
                CF_SKIP(r,
                        "%s: no way to reach the window: %s, and no DMA engine with "
                        "NTBF_CAP_MEM",
                        a->name, r->cx->dma_only ? "--access dma" : "NTBF_CAP_CPU_MAP not claimed");
        CF_TRY(cf_need_dma(r));
        return stage(r, a);
}

int cf_win_close(struct cf_run *r, struct cf_win *w)
{
        if (!w->cpu)
                return 0;
        struct cf_ad *a = w->p->a;
        for (size_t i = r->nundo; i-- > 0;) {
                struct cf_undo *u = &r->undo[i];
                if (u->kind == U_MAP && !u->done && u->ptr == w->cpu) {
                        u->done = true;
                        break;
                }
        }
        void *addr = w->cpu;
        w->cpu = NULL;
        CF_OK(r, r->cx->ops->unmap_window(a->h, addr, w->size), "%s: unmap_window(%llu bytes)",
              a->name, (unsigned long long)w->size);
        return 0;
}

/* Accesses stay inside what cf_win_open mapped: a stray one is the suite's own bug. */
static int win_inside(struct cf_run *r, const struct cf_win *w, uint64_t at)
{
        if (at < w->base || at - w->base > w->size - 8)
                CF_FAIL(r, "internal: access at %#llx outside the mapped [%#llx, +%#llx)",
                        (unsigned long long)at, (unsigned long long)w->base,
                        (unsigned long long)w->size);
        return 0;
}

int cf_win_write(struct cf_run *r, struct cf_win *w, uint64_t at, uint64_t v, int *status)
{
        struct cf_ad *a = w->p->a;
        *status = 0;
        CF_TRY(win_inside(r, w, at));
        if (w->cpu) {
                cf_store64(w->cpu + (at - w->base), v);
                return 0;
        }
        CF_TRY(stage(r, a));
        cf_store64(a->stage.addr, v);
        return cf_dma(r, a, 0, a->stage.bus_addr, at, 8, status);
}

int cf_win_read(struct cf_run *r, struct cf_win *w, uint64_t at, uint64_t *v, int *status)
{
        struct cf_ad *a = w->p->a;
        *status = 0;
        CF_TRY(win_inside(r, w, at));
        if (w->cpu) {
                *v = cf_load64(w->cpu + (at - w->base));
                return 0;
        }
        CF_TRY(stage(r, a));
        uint8_t *dst = (uint8_t *)a->stage.addr + 8;
        cf_store64(dst, 0);
        CF_TRY(cf_dma(r, a, 0, at, a->stage.bus_addr + 8, 8, status));
        *v = *status ? UINT64_MAX : cf_load64(dst);
        return 0;
}

bool cf_drops(struct cf_run *r)
{
        if (r->cx->fixed_windows)
                r->undropped = true;
        return !r->cx->fixed_windows;
}

int cf_win_expect_dropped(struct cf_run *r, struct cf_win *w, uint64_t at, const char *what)
{
        uint64_t v;
        int st;
        if (!cf_drops(r))
                return 0;
        CF_TRY(cf_win_read(r, w, at, &v, &st));
        if (st == 0 && v != UINT64_MAX)
                CF_FAIL(r,
                        "%s: read at %#llx (window %u, offset %#llx) through the %s returned "
                        "%#llx, expected all ones (the access must be dropped)",
                        what, (unsigned long long)at, w->win,
                        (unsigned long long)(at - w->base + w->off), cf_win_how(w),
                        (unsigned long long)v);
        return 0;
}

/* ---- counters -------------------------------------------------------------------------------- */

int cf_counters(struct cf_run *r, struct cf_ad *ad, struct ntbf_counters *c)
{
        memset(c, 0, sizeof(*c));
        if (!(ad->caps.flags & NTBF_CAP_COUNTERS))
                return 0;
        CF_OK(r, r->cx->ops->counters(ad->h, c), "%s: counters", ad->name);
        return 0;
}

int cf_counters_delta(struct cf_run *r, const struct cf_ad *ad, const char *what,
                      const struct ntbf_counters *base, const struct ntbf_counters *got,
                      const struct ntbf_counters *want)
{
        const char *ad_name = ad->name;
        if (!(ad->caps.flags & NTBF_CAP_COUNTERS)) {
                r->uncounted = true;
                return 0;
        }
        static const struct {
                const char *name;
                size_t off;
        } f[] = {
#define F(x) {#x, offsetof(struct ntbf_counters, x)}
            F(tx),
            F(rx),
            F(drop_no_rid),
            F(drop_unprogrammed),
            F(drop_link_down),
            F(master_abort),
            F(iommu_fault),
#undef F
        };
        for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
                uint64_t b, g, w;
                memcpy(&b, (const char *)base + f[i].off, 8);
                memcpy(&g, (const char *)got + f[i].off, 8);
                memcpy(&w, (const char *)want + f[i].off, 8);
                if (g - b != w)
                        CF_FAIL(r, "%s: counter %s of %s moved by %lld, expected %llu", what,
                                f[i].name, ad_name, (long long)(g - b), (unsigned long long)w);
        }
        return 0;
}

/* ---- addresses of the far side ----------------------------------------------------------------
 */

uint64_t cf_free_iova(const struct ntbf_topo *t, uint32_t node, uint64_t align)
{
        for (uint64_t v = ntbf_align_up(16 * NTBF_GiB, align); v < NTBF_PHYS_LIMIT; v += align) {
                const struct ntbf_region *reg = ntbf_addrmap_lookup(t, node, v);
                if (!reg || reg->kind == NTBF_REGION_RAM)
                        return v;
        }
        return UINT64_MAX;
}

uint64_t cf_unclaimed(const struct ntbf_topo *t, uint32_t node, uint64_t align)
{
        const struct ntbf_addrmap *m = &t->maps[node];
        uint64_t at = 0;
        for (uint32_t i = 0; i <= m->n; i++) {
                uint64_t end = i < m->n ? m->v[i].base : NTBF_PHYS_LIMIT;
                uint64_t v = ntbf_align_up(at, align);
                if (v >= at && v < end && end - v >= align)
                        return v;
                if (i < m->n && m->v[i].base + m->v[i].size > at)
                        at = m->v[i].base + m->v[i].size;
        }
        return UINT64_MAX;
}

/* ---- small things ---------------------------------------------------------------------------- */

uint64_t cf_pattern(uint32_t seed, uint64_t k)
{
        /* splitmix64: distinct, never zero (fresh memory) nor all ones (a dropped read). */
        uint64_t z = ((uint64_t)seed << 40) + k + UINT64_C(0x9e3779b97f4a7c15);
        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        z ^= z >> 31;
        if (z == 0 || z == UINT64_MAX)
                z = UINT64_C(0x5a5a5a5a5a5a5a5a) ^ k;
        return z;
}

/* Window accesses are single 8-byte loads and stores, as a driver's MMIO would be. */
uint64_t cf_load64(const void *p)
{
        return *(const volatile uint64_t *)p;
}

void cf_store64(void *p, uint64_t v)
{
        *(volatile uint64_t *)p = v;
}

int cf_need_cap(struct cf_run *r, uint32_t flag, struct cf_ad *a, struct cf_ad *b)
{
        struct cf_ad *v[2] = {a, b};
        for (int i = 0; i < 2; i++)
                if (v[i] && !(v[i]->caps.flags & flag))
                        CF_SKIP(r, "not claimed: %s does not claim %s", v[i]->name,
                                ntbf_cap_name(flag));
        return 0;
}

/* ---- slots and windows ------------------------------------------------------------------- */

const struct ntbf_window *cf_slot_window(const struct cf_ad *ad, uint32_t slot, uint32_t *win)
{
        const struct ntbf_caps *c = &ad->caps;
        for (uint32_t w = 0; w < c->nwindows && w < NTBF_MAX_WINDOWS; w++)
                if (slot - c->windows[w].first_slot < c->windows[w].slots) {
                        if (win)
                                *win = w;
                        return &c->windows[w];
                }
        return NULL;
}

uint64_t cf_slot_addr(const struct cf_ad *ad, uint32_t slot)
{
        const struct ntbf_window *w = cf_slot_window(ad, slot, NULL);
        return w ? w->base + (uint64_t)(slot - w->first_slot) * w->slot_size : 0;
}

uint64_t cf_slot_size(const struct cf_ad *ad, uint32_t slot)
{
        const struct ntbf_window *w = cf_slot_window(ad, slot, NULL);
        return w ? w->slot_size : 0;
}

uint64_t cf_xsize(const struct cf_ad *ad, uint32_t slot)
{
        const struct ntbf_window *w = cf_slot_window(ad, slot, NULL);
        return w ? w->size_max - w->size_max % w->size_align : 0;
}

uint64_t cf_xalign(const struct cf_ad *ad, uint32_t slot, uint64_t size)
{
        const struct ntbf_window *w = cf_slot_window(ad, slot, NULL);
        if (!w)
                return 4096;
        uint64_t a = w->addr_align < 4096 ? 4096 : w->addr_align;
        if (w->flags & NTBF_WIN_NATURAL_ALIGN) {
                uint64_t nat = size <= 1 ? 1 : UINT64_C(1) << (64 - __builtin_clzll(size - 1));
                a = nat > a ? nat : a;
        }
        return a;
}

uint32_t cf_slot(const struct cf_ad *ad, uint32_t n)
{
        const struct ntbf_caps *c = &ad->caps;
        for (uint32_t w = 0; w < c->nwindows && w < NTBF_MAX_WINDOWS; w++) {
                uint32_t usable = c->windows[w].slots - c->windows[w].reserved;
                if (n < usable)
                        return c->windows[w].first_slot + c->windows[w].reserved + n;
                n -= usable;
        }
        return NTBF_NONE;
}

double cf_now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void cf_sleep_us(unsigned us)
{
        struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
        nanosleep(&ts, NULL);
}
