/* tests/conformance/check_xlat.c: translation end to end: every slot, both ends, both directions.
 */
#include <errno.h>
#include <string.h>

#include "ntbfab/units.h"
#include "checks.h"

/*
 * Block j of B's memory sits behind one slot. After the writes through the slot's two ends,
 * its first 8 bytes are p0 and its last 8 bytes p1, and the rest of its first and last pages
 * is still zero: the bytes landed at exactly the programmed address (a wrong offset inside
 * the slot, a wrong slot or a wrong block shows here as a stray or a missing pattern).
 */
static int block_ok(struct cf_run *r, const uint8_t *blk, uint64_t E, uint32_t slot, uint64_t p0,
                    uint64_t p1, const char *when)
{
        uint64_t page = E < 4096 ? E : 4096;
        uint64_t v = cf_load64(blk);
        if (v != p0)
                CF_FAIL(r,
                        "slot %u, %s: the first 8 bytes of its far-side block are %#llx, "
                        "expected %#llx (the write to the slot's start did not land there)",
                        slot, when, (unsigned long long)v, (unsigned long long)p0);
        v = cf_load64(blk + E - 8);
        if (v != p1)
                CF_FAIL(r,
                        "slot %u, %s: the last 8 bytes of its far-side block are %#llx, "
                        "expected %#llx (the write to the slot's end did not land there)",
                        slot, when, (unsigned long long)v, (unsigned long long)p1);
        uint64_t ranges[2][2] = {{8, page < E - 8 ? page : E - 8},
                                 {E - page > 8 ? E - page : 8, E - 8}};
        for (int i = 0; i < 2; i++)
                for (uint64_t k = ranges[i][0]; k < ranges[i][1]; k++)
                        if (blk[k])
                                CF_FAIL(r,
                                        "slot %u, %s: byte %#llx of its far-side block is %#x, "
                                        "expected 0 (a write landed where it was not sent)",
                                        slot, when, (unsigned long long)k, blk[k]);
        return 0;
}

static void block_zero(uint8_t *blk, uint64_t E)
{
        uint64_t page = E < 4096 ? E : 4096;
        memset(blk, 0, page);
        memset(blk + E - page, 0, page);
}

/* The slot reads back what was programmed (when the backend can read slots). */
static int readback(struct cf_run *r, struct cf_ad *a, struct cf_ad *b, uint32_t slot, bool valid,
                    uint64_t far, uint64_t size)
{
        const struct ntbf_backend_ops *o = r->cx->ops;
        if (!o->xlat_get)
                return 0;
        struct ntbf_xlat x;
        bool v = !valid;
        memset(&x, 0, sizeof(x));
        CF_OK(r, o->xlat_get(a->h, slot, &x, &v), "%s: xlat_get(slot %u)", a->name, slot);
        CF_TRUE(r, v == valid, "%s: xlat_get(slot %u) says %s, expected %s", a->name, slot,
                v ? "valid" : "invalid", valid ? "valid" : "invalid");
        if (!valid)
                return 0;
        CF_EQ(r, x.dst_node, b->node, "%s: xlat_get(slot %u).dst_node", a->name, slot);
        CF_EQ(r, x.dst_adapter, b->idx, "%s: xlat_get(slot %u).dst_adapter", a->name, slot);
        CF_EQ(r, x.addr, far, "%s: xlat_get(slot %u).addr", a->name, slot);
        CF_EQ(r, x.size, size, "%s: xlat_get(slot %u).size", a->name, slot);
        CF_EQ(r, x.mcast_group, NTBF_NONE, "%s: xlat_get(slot %u).mcast_group", a->name, slot);
        return 0;
}

static int set_raw(struct cf_run *r, struct cf_pair *p, bool inbound, uint32_t slot, uint64_t far,
                   uint64_t size)
{
        const struct ntbf_backend_ops *o = r->cx->ops;
        if (inbound)
                return o->peer_xlat_set(p->b->h, p->a->idx, slot, far, size);
        struct ntbf_xlat x = {p->b->node, p->b->idx, far, NTBF_NONE, size};
        return o->xlat_set(p->a->h, slot, &x);
}

/*
 * Slots [first, first + cnt) onto consecutive blocks of m: program, write, verify, clear.
 * The window is mapped only while the slots stay as they are: a backend may redo a CPU
 * mapping whenever routing changes (the simulated fabric resolves every mapping again),
 * and hardware does not care when the mapping is made.
 */
static int batch(struct cf_run *r, bool inbound, const struct ntbf_mem *m, uint32_t first,
                 uint32_t cnt)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a;
        /* Each slot translates its whole block (E = its size: the suite's windows here have
         * size_max == slot_size, see xlat_all). */
        uint64_t E = cf_slot_size(a, first), xs = cf_xsize(a, first);
        uint64_t at0 = cf_slot_addr(a, first);
        uint8_t *base = m->addr;
        struct cf_win win, *w = &win;
        int st;
        for (uint32_t j = 0; j < cnt; j++)
                block_zero(base + j * E, E);
        for (uint32_t j = 0; j < cnt; j++) {
                struct ntbf_xlat x = {p->b->node, p->b->idx, m->bus_addr + j * E, NTBF_NONE, xs};
                CF_TRY(cf_slot_set(r, p, inbound, first + j, &x));
                CF_TRY(readback(r, a, p->b, first + j, true, x.addr, xs));
        }
        CF_TRY(cf_win_open(r, p, first, cnt, w));
        for (uint32_t j = 0; j < cnt; j++) {
                uint32_t k = first + j;
                uint64_t at = at0 + j * E;
                CF_TRY(cf_win_write(r, w, at, cf_pattern(k, 0), &st));
                CF_OK(r, st, "slot %u: write of its first 8 bytes through the %s", k,
                      cf_win_how(w));
                CF_TRY(cf_win_write(r, w, at + E - 8, cf_pattern(k, 1), &st));
                CF_OK(r, st, "slot %u: write of its last 8 bytes through the %s", k, cf_win_how(w));
        }
        for (uint32_t j = 0; j < cnt; j++)
                CF_TRY(block_ok(r, base + j * E, E, first + j, cf_pattern(first + j, 0),
                                cf_pattern(first + j, 1), "after writes through the window"));
        for (uint32_t j = 0; j < cnt; j++) {
                uint32_t k = first + j;
                uint64_t v, at = at0 + j * E;
                CF_TRY(cf_win_read(r, w, at, &v, &st));
                CF_OK(r, st, "slot %u: read of its first 8 bytes through the %s", k, cf_win_how(w));
                CF_EQ(r, v, cf_pattern(k, 0), "slot %u: first 8 bytes read back through the %s", k,
                      cf_win_how(w));
                CF_TRY(cf_win_read(r, w, at + E - 8, &v, &st));
                CF_OK(r, st, "slot %u: read of its last 8 bytes through the %s", k, cf_win_how(w));
                CF_EQ(r, v, cf_pattern(k, 1), "slot %u: last 8 bytes read back through the %s", k,
                      cf_win_how(w));
        }
        CF_TRY(cf_win_close(r, w));
        for (uint32_t j = 0; j < cnt; j++) {
                CF_TRY(cf_slot_clear(r, p, inbound, first + j));
                CF_TRY(readback(r, a, p->b, first + j, false, 0, 0));
        }
        /* Cleared: reads all ones, writes lost. Read before writing: a CPU mapping may show
         * a lost write back to the writer until it is remapped (docs/sim.md). */
        CF_TRY(cf_win_open(r, p, first, cnt, w));
        for (uint32_t j = 0; j < cnt; j++) {
                uint32_t k = first + j;
                uint64_t at = at0 + j * E;
                char what[64];
                snprintf(what, sizeof(what), "slot %u after it was cleared", k);
                CF_TRY(cf_win_expect_dropped(r, w, at, what));
                CF_TRY(cf_win_expect_dropped(r, w, at + E - 8, what));
                if (!cf_drops(r))
                        continue; /* the writes would land: nothing to lose */
                CF_TRY(cf_win_write(r, w, at, ~cf_pattern(k, 0), &st));
                CF_TRY(cf_win_write(r, w, at + E - 8, ~cf_pattern(k, 1), &st));
        }
        CF_TRY(cf_win_close(r, w));
        for (uint32_t j = 0; j < cnt && !r->cx->fixed_windows; j++)
                CF_TRY(block_ok(r, base + j * E, E, first + j, cf_pattern(first + j, 0),
                                cf_pattern(first + j, 1), "after writes to the cleared slot"));
        return 0;
}

/* Whether A's slots can be programmed in the direction asked; skips otherwise. */
static int xlat_direction(struct cf_run *r, bool inbound)
{
        struct cf_ad *a = r->p->a, *b = r->p->b;
        if (!inbound && !(a->caps.flags & NTBF_CAP_XLAT_OUTBOUND))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_XLAT_OUTBOUND", a->name);
        if (inbound && !(b->caps.flags & NTBF_CAP_XLAT_INBOUND))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_XLAT_INBOUND", b->name);
        if (!(b->caps.flags & NTBF_CAP_MEM))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_MEM: no memory to translate to",
                        b->name);
        return 0;
}

/* Memory of B for up to `want` blocks of E at align (fewer when B cannot give that much),
 * identity-mapped in B's IOMMU. */
static int far_blocks(struct cf_run *r, uint32_t want, uint64_t E, uint64_t align,
                      struct ntbf_mem *m, uint32_t *got)
{
        struct cf_ad *b = r->p->b;
        uint32_t per = want;
        for (;;) {
                int rc = cf_mem_try(r, b, (uint64_t)per * E, align, m);
                if (!rc)
                        break;
                if (rc != -ENOMEM || per == 1)
                        return cf_fail_rc(r, __FILE__, __LINE__, 0, rc,
                                          "%s: mem_alloc(%llu bytes, align %llu)", b->name,
                                          (unsigned long long)per * E, (unsigned long long)align);
                per = (per + 1) / 2;
        }
        if (b->caps.flags & NTBF_CAP_IOMMU) {
                CF_OK(r, r->cx->ops->iommu_map(b->h, m->bus_addr, m->bus_addr, (uint64_t)per * E),
                      "%s: iommu_map(iova %#llx, %llu bytes) (identity)", b->name,
                      (unsigned long long)m->bus_addr, (unsigned long long)per * E);
                cf_undo_iommu(r, b, m->bus_addr, (uint64_t)per * E);
        }
        *got = per;
        return 0;
}

/* Every usable slot of window wi of A, and the refusals of that window's rules. */
static int xlat_window(struct cf_run *r, bool inbound, uint32_t wi, const char **how)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        const struct ntbf_window *W = &a->caps.windows[wi];
        uint32_t lo = W->first_slot + W->reserved, n = W->slots - W->reserved;
        uint64_t E = W->slot_size, xs = cf_xsize(a, lo), align = cf_xalign(a, lo, xs);
        if (xs != E)
                CF_SKIP(r,
                        "%s: window %u translates %#llx of each %#llx-byte slot at most; this "
                        "check writes whole slots",
                        a->name, wi, (unsigned long long)xs, (unsigned long long)E);
        /* Distinct memory for every slot at once, so that a slot landing in another's
         * block shows; when B cannot give that much, slots are taken in batches. */
        struct ntbf_mem m;
        uint32_t per;
        CF_TRY(far_blocks(r, n, E, align > E ? align : E, &m, &per));

        /* Refusals change nothing: the window's first slot stays unprogrammed. */
        const char *who = inbound ? b->name : a->name;
        const char *call = inbound ? "peer_xlat_set" : "xlat_set";
        struct cf_win w;
        CF_TRY(cf_win_open(r, p, lo, 1, &w));
        uint64_t at = cf_slot_addr(a, lo), req = W->addr_align;
        if (W->flags & NTBF_WIN_NATURAL_ALIGN)
                req = align; /* the translation's size, rounded up: what the hardware needs */
        if (req > 1) {
                uint64_t mis = m.bus_addr + req / 2;
                CF_RC(r, -EINVAL, set_raw(r, p, inbound, lo, mis, xs),
                      "%s: %s(slot %u -> %#llx, not aligned to %#llx)", who, call, lo,
                      (unsigned long long)mis, (unsigned long long)req);
                CF_TRY(readback(r, a, b, lo, false, 0, 0));
                CF_TRY(
                    cf_win_expect_dropped(r, &w, at, "a slot after a refused misaligned address"));
        }
        if (a->caps.addr_bits < 64) {
                uint64_t far = UINT64_C(1) << a->caps.addr_bits;
                CF_RC(r, -EINVAL, set_raw(r, p, inbound, lo, far, xs),
                      "%s: %s(slot %u -> %#llx, beyond addr_bits %u)", who, call, lo,
                      (unsigned long long)far, a->caps.addr_bits);
        }
        CF_RC(r, -EINVAL, set_raw(r, p, inbound, lo, m.bus_addr, 0), "%s: %s(slot %u, size 0)", who,
              call, lo);
        CF_RC(r, -EINVAL, set_raw(r, p, inbound, lo, m.bus_addr, W->size_max + W->size_align),
              "%s: %s(slot %u, size %#llx, past size_max %#llx)", who, call, lo,
              (unsigned long long)(W->size_max + W->size_align), (unsigned long long)W->size_max);
        for (uint32_t k = W->first_slot; k < lo; k++)
                CF_RC(r, -EPERM, set_raw(r, p, inbound, k, m.bus_addr, xs),
                      "%s: %s(slot %u, reserved by the hardware)", who, call, k);
        CF_TRY(readback(r, a, b, lo, false, 0, 0));
        CF_TRY(cf_win_expect_dropped(r, &w, at, "a slot after refused calls"));
        *how = cf_win_how(&w);
        CF_TRY(cf_win_close(r, &w));
        for (uint32_t first = lo; first < lo + n; first += per)
                CF_TRY(batch(r, inbound, &m, first, lo + n - first < per ? lo + n - first : per));
        return 0;
}

static int xlat_all(struct cf_run *r, bool inbound)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a;
        CF_TRY(xlat_direction(r, inbound));
        const struct ntbf_caps *c = &a->caps;
        const char *who = inbound ? p->b->name : a->name;
        const char *call = inbound ? "peer_xlat_set" : "xlat_set";
        uint32_t s0 = cf_slot(a, 0);
        CF_RC(r, -EINVAL, set_raw(r, p, inbound, c->slots, 0, cf_xsize(a, s0)),
              "%s: %s(slot %u, past the last)", who, call, c->slots);
        CF_RC(r, -EINVAL, set_raw(r, p, inbound, UINT32_MAX, 0, cf_xsize(a, s0)), "%s: %s(slot %u)",
              who, call, UINT32_MAX);
        const char *how = "?";
        uint32_t done = 0;
        char sizes[256] = "";
        for (uint32_t wi = 0; wi < c->nwindows; wi++) {
                CF_TRY(xlat_window(r, inbound, wi, &how));
                done += c->windows[wi].slots - c->windows[wi].reserved;
                size_t l = strlen(sizes);
                snprintf(sizes + l, sizeof(sizes) - l, "%s%u x %llu KiB", wi ? " + " : "",
                         c->windows[wi].slots - c->windows[wi].reserved,
                         (unsigned long long)(c->windows[wi].slot_size >> 10));
        }
        snprintf(r->reason, sizeof(r->reason), "%u slots (%s) in %u window%s through the %s", done,
                 sizes, c->nwindows, c->nwindows == 1 ? "" : "s", how);
        return 0;
}

/*
 * A translation smaller than its slot (struct ntbf_xlat.size): the bytes it covers land, the
 * rest of the slot is unprogrammed. Sizes that are not a multiple of size_align are refused.
 */
int cf_check_xlat_size(struct cf_run *r)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        bool inbound = false;
        CF_TRY(cf_slot_how(r, p, &inbound));
        if (!(b->caps.flags & NTBF_CAP_MEM))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_MEM: no memory to translate to",
                        b->name);
        /* The first window whose translations may be smaller than a slot. */
        uint32_t slot = NTBF_NONE;
        const struct ntbf_window *W = NULL;
        for (uint32_t wi = 0; wi < a->caps.nwindows && slot == NTBF_NONE; wi++) {
                W = &a->caps.windows[wi];
                if (W->size_align < W->size_max && W->size_align >= 4096)
                        slot = W->first_slot + W->reserved;
        }
        const char *who = inbound ? b->name : a->name;
        const char *call = inbound ? "peer_xlat_set" : "xlat_set";
        uint32_t s0 = cf_slot(a, 0);
        const struct ntbf_window *W0 = cf_slot_window(a, s0, NULL);
        if (W0->size_align > 1)
                CF_RC(r, -EINVAL, set_raw(r, p, inbound, s0, 0, W0->size_align / 2),
                      "%s: %s(slot %u, size %#llx, not a multiple of size_align %#llx)", who, call,
                      s0, (unsigned long long)(W0->size_align / 2),
                      (unsigned long long)W0->size_align);
        if (slot == NTBF_NONE)
                CF_SKIP(r,
                        "%s: no window translates less than a whole slot (size_align = size_max): "
                        "only the refusal of a smaller size was checked",
                        a->name);
        uint64_t part = W->size_align, E = W->slot_size;
        struct ntbf_mem m;
        uint32_t got;
        uint64_t align = cf_xalign(a, slot, part);
        CF_TRY(far_blocks(r, 1, E, align > E ? align : E, &m, &got));
        uint8_t *blk = m.addr;
        struct ntbf_xlat x = {b->node, b->idx, m.bus_addr, NTBF_NONE, part};
        CF_TRY(cf_slot_set(r, p, inbound, slot, &x));
        CF_TRY(readback(r, a, b, slot, true, m.bus_addr, part));
        struct cf_win w;
        CF_TRY(cf_win_open(r, p, slot, 1, &w));
        uint64_t at = cf_slot_addr(a, slot);
        int st;
        uint64_t v;
        CF_TRY(cf_win_write(r, &w, at + part - 8, cf_pattern(150, 0), &st));
        CF_OK(r, st, "slot %u: a write to the last 8 bytes of its %#llx-byte translation", slot,
              (unsigned long long)part);
        CF_EQ(r, cf_load64(blk + part - 8), cf_pattern(150, 0),
              "slot %u: the far side's last 8 bytes of the translation", slot);
        CF_TRY(cf_win_expect_dropped(r, &w, at + part,
                                     "the first byte past a translation smaller than its slot"));
        CF_TRY(cf_win_expect_dropped(r, &w, at + E - 8, "the end of a slot past its translation"));
        CF_TRY(cf_win_read(r, &w, at + part - 8, &v, &st));
        CF_EQ(r, v, cf_pattern(150, 0), "slot %u: the translation's last 8 bytes read back", slot);
        /* The far side behind the unprogrammed part was never touched. */
        for (uint64_t k = part; k < part + 4096 && k < E; k++)
                CF_TRUE(r, !blk[k],
                        "slot %u: byte %#llx past its %#llx-byte translation changed at the far "
                        "side",
                        slot, (unsigned long long)k, (unsigned long long)part);
        snprintf(r->reason, sizeof(r->reason), "%#llx of a %#llx-byte slot through the %s%s",
                 (unsigned long long)part, (unsigned long long)E, cf_win_how(&w),
                 cf_drops(r) ? "; the rest dropped" : "");
        return 0;
}

int cf_check_xlat_outbound(struct cf_run *r)
{
        return xlat_all(r, false);
}

int cf_check_xlat_inbound(struct cf_run *r)
{
        return xlat_all(r, true);
}
