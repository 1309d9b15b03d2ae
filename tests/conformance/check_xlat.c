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
                    uint64_t far)
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
        CF_EQ(r, x.mcast_group, NTBF_NONE, "%s: xlat_get(slot %u).mcast_group", a->name, slot);
        return 0;
}

static int set_raw(struct cf_run *r, struct cf_pair *p, bool inbound, uint32_t slot, uint64_t far)
{
        const struct ntbf_backend_ops *o = r->cx->ops;
        if (inbound)
                return o->peer_xlat_set(p->b->h, p->a->idx, slot, far);
        struct ntbf_xlat x = {p->b->node, p->b->idx, far, NTBF_NONE};
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
        uint64_t E = a->caps.lut_entry_size;
        uint8_t *base = m->addr;
        struct cf_win win, *w = &win;
        int st;
        for (uint32_t j = 0; j < cnt; j++)
                block_zero(base + j * E, E);
        for (uint32_t j = 0; j < cnt; j++) {
                struct ntbf_xlat x = {p->b->node, p->b->idx, m->bus_addr + j * E, NTBF_NONE};
                CF_TRY(cf_slot_set(r, p, inbound, first + j, &x));
                CF_TRY(readback(r, a, p->b, first + j, true, x.addr));
        }
        CF_TRY(cf_win_open(r, p, first, cnt, w));
        for (uint32_t j = 0; j < cnt; j++) {
                uint32_t k = first + j;
                CF_TRY(cf_win_write(r, w, k * E, cf_pattern(k, 0), &st));
                CF_OK(r, st, "slot %u: write of its first 8 bytes through the %s", k,
                      cf_win_how(w));
                CF_TRY(cf_win_write(r, w, k * E + E - 8, cf_pattern(k, 1), &st));
                CF_OK(r, st, "slot %u: write of its last 8 bytes through the %s", k, cf_win_how(w));
        }
        for (uint32_t j = 0; j < cnt; j++)
                CF_TRY(block_ok(r, base + j * E, E, first + j, cf_pattern(first + j, 0),
                                cf_pattern(first + j, 1), "after writes through the window"));
        for (uint32_t j = 0; j < cnt; j++) {
                uint32_t k = first + j;
                uint64_t v;
                CF_TRY(cf_win_read(r, w, k * E, &v, &st));
                CF_OK(r, st, "slot %u: read of its first 8 bytes through the %s", k, cf_win_how(w));
                CF_EQ(r, v, cf_pattern(k, 0), "slot %u: first 8 bytes read back through the %s", k,
                      cf_win_how(w));
                CF_TRY(cf_win_read(r, w, k * E + E - 8, &v, &st));
                CF_OK(r, st, "slot %u: read of its last 8 bytes through the %s", k, cf_win_how(w));
                CF_EQ(r, v, cf_pattern(k, 1), "slot %u: last 8 bytes read back through the %s", k,
                      cf_win_how(w));
        }
        CF_TRY(cf_win_close(r, w));
        for (uint32_t j = 0; j < cnt; j++) {
                CF_TRY(cf_slot_clear(r, p, inbound, first + j));
                CF_TRY(readback(r, a, p->b, first + j, false, 0));
        }
        /* Cleared: reads all ones, writes lost. Read before writing: a CPU mapping may show
         * a lost write back to the writer until it is remapped (docs/sim.md). */
        CF_TRY(cf_win_open(r, p, first, cnt, w));
        for (uint32_t j = 0; j < cnt; j++) {
                uint32_t k = first + j;
                char what[64];
                snprintf(what, sizeof(what), "slot %u after it was cleared", k);
                CF_TRY(cf_win_expect_dropped(r, w, k * E, what));
                CF_TRY(cf_win_expect_dropped(r, w, k * E + E - 8, what));
                CF_TRY(cf_win_write(r, w, k * E, ~cf_pattern(k, 0), &st));
                CF_TRY(cf_win_write(r, w, k * E + E - 8, ~cf_pattern(k, 1), &st));
        }
        CF_TRY(cf_win_close(r, w));
        for (uint32_t j = 0; j < cnt; j++)
                CF_TRY(block_ok(r, base + j * E, E, first + j, cf_pattern(first + j, 0),
                                cf_pattern(first + j, 1), "after writes to the cleared slot"));
        return 0;
}

static int xlat_all(struct cf_run *r, bool inbound)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        const struct ntbf_backend_ops *o = r->cx->ops;
        if (!inbound && !(a->caps.flags & NTBF_CAP_XLAT_OUTBOUND))
                CF_SKIP(r, "%s does not claim NTBF_CAP_XLAT_OUTBOUND", a->name);
        if (inbound && !(b->caps.flags & NTBF_CAP_XLAT_INBOUND))
                CF_SKIP(r, "%s does not claim NTBF_CAP_XLAT_INBOUND", b->name);
        if (!(b->caps.flags & NTBF_CAP_MEM))
                CF_SKIP(r, "%s does not claim NTBF_CAP_MEM: no memory to translate to", b->name);
        const struct ntbf_caps *c = &a->caps;
        uint32_t n = c->lut_entries;
        uint64_t E = c->lut_entry_size;
        uint64_t align = c->xlat_align > E ? c->xlat_align : E;

        /* Distinct memory for every slot at once, so that a slot landing in another's
         * block shows; when B cannot give that much, slots are taken in batches. */
        struct ntbf_mem m;
        uint32_t per = n;
        for (;;) {
                int rc = cf_mem_try(r, b, (uint64_t)per * E, align, &m);
                if (!rc)
                        break;
                if (rc != -ENOMEM || per == 1)
                        return cf_fail_rc(r, __FILE__, __LINE__, 0, rc,
                                          "%s: mem_alloc(%llu bytes, align %llu)", b->name,
                                          (unsigned long long)per * E, (unsigned long long)align);
                per = (per + 1) / 2;
        }
        if (b->caps.flags & NTBF_CAP_IOMMU) {
                CF_OK(r, o->iommu_map(b->h, m.bus_addr, m.bus_addr, (uint64_t)per * E),
                      "%s: iommu_map(iova %#llx, %llu bytes) (identity)", b->name,
                      (unsigned long long)m.bus_addr, (unsigned long long)per * E);
                cf_undo_iommu(r, b, m.bus_addr, (uint64_t)per * E);
        }

        /* Refusals change nothing: slot 0 stays unprogrammed. */
        const char *who = inbound ? b->name : a->name;
        const char *call = inbound ? "peer_xlat_set" : "xlat_set";
        struct cf_win w;
        CF_TRY(cf_win_open(r, p, 0, 1, &w));
        if (c->xlat_align > 1) {
                uint64_t mis = m.bus_addr + c->xlat_align / 2;
                CF_RC(r, -EINVAL, set_raw(r, p, inbound, 0, mis),
                      "%s: %s(slot 0 -> %#llx, not aligned to xlat_align %#llx)", who, call,
                      (unsigned long long)mis, (unsigned long long)c->xlat_align);
                CF_TRY(readback(r, a, b, 0, false, 0));
                CF_TRY(
                    cf_win_expect_dropped(r, &w, 0, "slot 0 after a refused misaligned address"));
        }
        if (c->addr_bits < 64) {
                uint64_t far = UINT64_C(1) << c->addr_bits;
                CF_RC(r, -EINVAL, set_raw(r, p, inbound, 0, far),
                      "%s: %s(slot 0 -> %#llx, beyond addr_bits %u)", who, call,
                      (unsigned long long)far, c->addr_bits);
        }
        CF_RC(r, -EINVAL, set_raw(r, p, inbound, n, m.bus_addr), "%s: %s(slot %u, past the last)",
              who, call, n);
        CF_RC(r, -EINVAL, set_raw(r, p, inbound, UINT32_MAX, m.bus_addr), "%s: %s(slot %u)", who,
              call, UINT32_MAX);
        CF_TRY(readback(r, a, b, 0, false, 0));
        CF_TRY(cf_win_expect_dropped(r, &w, 0, "slot 0 after refused calls"));
        const char *how = cf_win_how(&w);
        CF_TRY(cf_win_close(r, &w));

        for (uint32_t first = 0; first < n; first += per)
                CF_TRY(batch(r, inbound, &m, first, n - first < per ? n - first : per));
        snprintf(r->reason, sizeof(r->reason), "%u slots of %llu KiB through the %s", n,
                 (unsigned long long)(E >> 10), how);
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
