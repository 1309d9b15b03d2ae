/* tests/conformance/check_dma.c: the adapter's DMA engine: copies, completion order, errors. */
#include <errno.h>
#include <string.h>

#include "ntbfab/error.h"
#include "ntbfab/units.h"
#include "checks.h"

static int need_dma(struct cf_run *r)
{
        struct cf_ad *a = r->p->a;
        if (!(a->caps.flags & NTBF_CAP_DMA))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_DMA", a->name);
        if (!(a->caps.flags & NTBF_CAP_MEM))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_MEM: no local buffers to copy",
                        a->name);
        return cf_need_dma(r);
}

static void fill(uint8_t *p, uint64_t len, uint32_t seed)
{
        for (uint64_t i = 0; i < len; i++)
                p[i] = (uint8_t)(cf_pattern(seed, i / 8) >> (8 * (i % 8)));
}

/* dst[0, len) must equal src, and dst[len, len + guard) still hold 0x5a. */
static int landed(struct cf_run *r, const uint8_t *dst, const uint8_t *src, uint64_t len,
                  uint64_t guard, const char *what)
{
        for (uint64_t i = 0; i < len; i++)
                if (dst[i] != src[i])
                        CF_FAIL(r, "%s of %llu bytes: byte %llu is %#x, expected %#x", what,
                                (unsigned long long)len, (unsigned long long)i, dst[i], src[i]);
        for (uint64_t i = len; i < len + guard; i++)
                if (dst[i] != 0x5a)
                        CF_FAIL(r, "%s of %llu bytes: byte %llu past the end was written (%#x)",
                                what, (unsigned long long)len, (unsigned long long)i, dst[i]);
        return 0;
}

int cf_check_dma_copy(struct cf_run *r)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a;
        CF_TRY(need_dma(r));
        const struct ntbf_caps *c = &a->caps;
        uint64_t al = c->dma_align ? c->dma_align : 1;
        const uint64_t G = 64, MAXL = NTBF_MiB;
        struct ntbf_mem src, dst;
        CF_TRY(cf_mem(r, a, MAXL + 4096, 4096, &src));
        CF_TRY(cf_mem(r, a, MAXL + 4096, 4096, &dst));
        struct cf_target tg;
        CF_TRY(cf_target(r, p, cf_slot(p->a, 0), 1, &tg));
        uint8_t *s = src.addr, *d = dst.addr, *far = tg.mem.addr;
        uint64_t win = tg.addr, E = tg.xs;
        static const uint64_t want[] = {1, 8, 64, 4096, 4096 + 8, 65536, 65536 * 4 - 8, NTBF_MiB};
        unsigned copies = 0;
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                uint64_t L = ntbf_align_up(want[i], al);
                if (L > c->dma_max_len || L > MAXL)
                        continue;
                int st;
                fill(s, L, (uint32_t)L);
                memset(d, 0x5a, L + G);
                CF_TRY(cf_dma(r, a, 0, src.bus_addr, dst.bus_addr, L, &st));
                CF_OK(r, st, "local -> local copy of %llu bytes: status", (unsigned long long)L);
                CF_TRY(landed(r, d, s, L, G, "local -> local copy"));
                copies++;
                if (L + G > E)
                        continue;
                memset(far, 0x5a, L + G);
                CF_TRY(cf_dma(r, a, 0, src.bus_addr, win, L, &st));
                CF_OK(r, st, "local -> remote copy of %llu bytes through slot 0: status",
                      (unsigned long long)L);
                CF_TRY(landed(r, far, s, L, G, "local -> remote copy"));
                fill(far, L, (uint32_t)L + 1);
                memset(d, 0x5a, L + G);
                CF_TRY(cf_dma(r, a, 0, win, dst.bus_addr, L, &st));
                CF_OK(r, st, "remote -> local copy of %llu bytes through slot 0: status",
                      (unsigned long long)L);
                CF_TRY(landed(r, d, far, L, G, "remote -> local copy"));
                copies += 2;
        }
        snprintf(r->reason, sizeof(r->reason), "%u copies, up to %llu KiB", copies,
                 (unsigned long long)(MAXL >> 10));
        return 0;
}

int cf_check_dma_order(struct cf_run *r)
{
        struct cf_ctx *cx = r->cx;
        struct cf_ad *a = r->p->a;
        const struct ntbf_backend_ops *o = cx->ops;
        CF_TRY(need_dma(r));
        enum { N = 16, L = 4096 };
        struct ntbf_mem src, dst;
        CF_TRY(cf_mem(r, a, N * L, 4096, &src));
        CF_TRY(cf_mem(r, a, N * L, 4096, &dst));
        uint8_t *s = src.addr, *d = dst.addr;
        fill(s, N * L, 110);
        memset(d, 0, N * L);
        uint64_t cookies[N];
        int status[N];
        for (unsigned i = 0; i < N; i++) {
                cookies[i] = ++cx->cookie;
                CF_OK(r,
                      o->dma_submit(a->h, 0, src.bus_addr + i * L, dst.bus_addr + i * L, L,
                                    cookies[i]),
                      "%s: dma_submit %u of %u in a row (chan 0)", a->name, i + 1, N);
        }
        CF_TRY(cf_dma_wait(r, a, 0, cookies, status, N));
        for (unsigned i = 0; i < N; i++)
                CF_OK(r, status[i], "%s: status of copy %u of %u", a->name, i + 1, N);
        CF_TRUE(r, !memcmp(d, s, N * L), "%s: %u copies in a row did not all land", a->name, N);
        /* Every channel works on its own. */
        for (uint32_t ch = 0; ch < a->caps.dma_channels; ch++) {
                memset(d, 0, L);
                fill(s, L, 111 + ch);
                int st;
                CF_TRY(cf_dma(r, a, ch, src.bus_addr, dst.bus_addr, L, &st));
                CF_OK(r, st, "%s: copy on channel %u: status", a->name, ch);
                CF_TRUE(r, !memcmp(d, s, L), "%s: the copy on channel %u did not land", a->name,
                        ch);
        }
        snprintf(r->reason, sizeof(r->reason), "%u copies in order, %u channels", N,
                 a->caps.dma_channels);
        return 0;
}

int cf_check_dma_error(struct cf_run *r)
{
        struct cf_ctx *cx = r->cx;
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a;
        CF_TRY(need_dma(r));
        uint32_t s0 = cf_slot(a, 0), s1 = cf_slot(a, 1);
        uint32_t bad = s1 != NTBF_NONE ? s1 : s0;
        uint64_t at = cf_slot_addr(a, bad), win = cf_slot_addr(a, s0);
        struct ntbf_mem src, dst;
        CF_TRY(cf_mem(r, a, 4096, 4096, &src));
        CF_TRY(cf_mem(r, a, 4096, 4096, &dst));
        fill(src.addr, 64, 120);
        memset(dst.addr, 0x5a, 4096);
        int st;
        CF_TRY(cf_dma(r, a, 0, src.bus_addr, at, 64, &st));
        CF_TRUE(r, st != 0, "%s: a copy into unprogrammed slot %u completed with status 0", a->name,
                bad);
        if (cx->sim && !cx->dma_only)
                CF_RC(r, NTBF_EUNPROGRAMMED, st, "%s: status of a copy into unprogrammed slot %u",
                      a->name, bad);
        CF_TRY(cf_dma(r, a, 0, at, dst.bus_addr, 64, &st));
        CF_TRUE(r, st != 0, "%s: a copy from unprogrammed slot %u completed with status 0", a->name,
                bad);
        /* The engine goes on after an error. */
        struct cf_target tg;
        CF_TRY(cf_target(r, p, cf_slot(p->a, 0), 1, &tg));
        CF_TRY(cf_dma(r, a, 0, src.bus_addr, win, 64, &st));
        CF_OK(r, st, "%s: a good copy after two failed ones: status", a->name);
        CF_TRUE(r, !memcmp(tg.mem.addr, src.addr, 64),
                "%s: the good copy after two failed ones did not land", a->name);
        return 0;
}
