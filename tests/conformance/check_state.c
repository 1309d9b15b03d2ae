/* tests/conformance/check_state.c: adapter reset, the drop counters, and refused arguments. */
#include <errno.h>
#include <string.h>

#include "ntbfab/error.h"
#include "ntbfab/units.h"
#include "checks.h"

/* ---- reset --------------------------------------------------------------------------------------
 */

int cf_check_reset(struct cf_run *r)
{
        struct cf_ctx *cx = r->cx;
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        const struct ntbf_backend_ops *o = cx->ops;
        const struct ntbf_caps *c = &a->caps;
        CF_TRY(cf_need_cap(r, NTBF_CAP_RESET, a, NULL));
        bool inbound = false;
        CF_TRY(cf_slot_how(r, p, &inbound));
        struct cf_target tg;
        CF_TRY(cf_target(r, p, cf_slot(p->a, 0), 1, &tg));
        /* The last slot of the first slot's window, onto the same memory. */
        const struct ntbf_window *W = cf_slot_window(a, tg.slot, NULL);
        uint32_t last = W->first_slot + W->slots - 1;
        struct ntbf_xlat x = {b->node, b->idx, tg.far, NTBF_NONE, tg.xs};
        if (last != tg.slot)
                CF_TRY(cf_slot_set(r, p, inbound, last, &x));
        struct cf_win w;
        CF_TRY(cf_win_open(r, p, cf_slot(p->a, 0), 1, &w));
        int st;
        CF_TRY(cf_win_write(r, &w, w.base, cf_pattern(130, 0), &st));
        CF_OK(r, st, "write through slot 0 before the reset");
        CF_EQ(r, cf_load64(tg.mem.addr), cf_pattern(130, 0), "far side before the reset");

        /* State the reset must take away. */
        struct ntbf_rid dev = {a->node, 0x0300, 0xffff};
        bool rids = c->flags & NTBF_CAP_RID_TABLE;
        if (rids) {
                CF_OK(r, o->rid_add(a->h, &dev, NULL), "%s: rid_add(03:00.0)", a->name);
                cf_undo_rid(r, a, &dev);
        }
        bool dbs = (c->flags & NTBF_CAP_DOORBELL) && (b->caps.flags & NTBF_CAP_DOORBELL);
        uint64_t m = c->db_valid_mask & -c->db_valid_mask;
        if (dbs) {
                CF_OK(r, o->db_set_mask(a->h, m), "%s: db_set_mask(%#llx)", a->name,
                      (unsigned long long)m);
                cf_undo_dbmask(r, a, m);
                CF_OK(r, o->peer_db_set(b->h, a->idx, c->db_valid_mask),
                      "%s: peer_db_set(%s, all bits)", b->name, a->name);
                uint64_t bits = 0;
                for (double end = cf_now_ms() + cx->timeout_ms;
                     bits != c->db_valid_mask && cf_now_ms() < end;) {
                        CF_OK(r, o->db_read(a->h, &bits), "%s: db_read", a->name);
                        if (bits != c->db_valid_mask)
                                cf_sleep_us(100);
                }
                CF_EQ(r, bits, c->db_valid_mask, "%s: doorbells pending before the reset", a->name);
        }
        bool spads = c->flags & NTBF_CAP_SCRATCHPAD;
        if (spads) {
                cf_undo_spads(r, a);
                for (uint32_t i = 0; i < c->scratchpads; i++)
                        CF_OK(r, o->spad_write(a->h, i, (uint32_t)cf_pattern(131, i) | 1),
                              "%s: spad_write(%u)", a->name, i);
        }
        CF_TRY(cf_drain(r, a));

        CF_OK(r, o->reset(a->h), "%s: reset", a->name);
        CF_TRY(cf_wait_ev(r, a, &a->ev.resets, 1, "reset_event"));
        if (o->xlat_get) {
                uint32_t both[2] = {tg.slot, last};
                for (int i = 0; i < 2; i++) {
                        struct ntbf_xlat y;
                        bool valid = true;
                        CF_OK(r, o->xlat_get(a->h, both[i], &y, &valid), "%s: xlat_get(%u)",
                              a->name, both[i]);
                        CF_TRUE(r, !valid, "%s: slot %u is still valid after the reset", a->name,
                                both[i]);
                }
        }
        CF_TRY(cf_win_expect_dropped(r, &w, w.base, "slot 0 after the reset"));
        CF_TRY(cf_win_write(r, &w, w.base, cf_pattern(130, 1), &st));
        CF_EQ(r, cf_load64(tg.mem.addr), cf_pattern(130, 0),
              "far side after a write to slot 0 after the reset (it must be lost)");
        if (rids) {
                CF_RC(r, -ENOENT, o->rid_del(a->h, &dev), "%s: rid_del(03:00.0) after the reset",
                      a->name);
                struct ntbf_rid rc = {a->node, 0x0000, 0xffff};
                CF_RC(r, -EPERM, o->rid_del(a->h, &rc), "%s: rid_del(00:00.0) after the reset",
                      a->name);
                /* Back to the reserved entries only: every other entry is free again. */
                uint32_t free = c->rid_table - c->rid_reserved, added = 0;
                for (uint32_t i = 0; i <= free; i++) {
                        struct ntbf_rid y = {a->node, (uint16_t)(0x8000 + i * 8), 0xffff};
                        int e = o->rid_add(a->h, &y, NULL);
                        if (e)
                                break;
                        cf_undo_rid(r, a, &y);
                        added++;
                }
                CF_EQ(r, added, free, "%s: requester entries free after the reset", a->name);
                for (uint32_t i = 0; i < added; i++) {
                        struct ntbf_rid y = {a->node, (uint16_t)(0x8000 + i * 8), 0xffff};
                        CF_OK(r, o->rid_del(a->h, &y), "%s: rid_del", a->name);
                }
        }
        if (dbs) {
                uint64_t bits = ~0ull;
                CF_OK(r, o->db_read(a->h, &bits), "%s: db_read", a->name);
                CF_EQ(r, bits, 0, "%s: doorbells pending after the reset", a->name);
                cf_ev_reset(a);
                CF_OK(r, o->peer_db_set(b->h, a->idx, m), "%s: peer_db_set(%s, %#llx)", b->name,
                      a->name, (unsigned long long)m);
                CF_TRY(cf_wait_ev(r, a, &a->ev.dbs, 1,
                                  "db_event for a bit masked before the reset (masks must clear)"));
                CF_OK(r, o->db_clear(a->h, m), "%s: db_clear", a->name);
        }
        if (spads) {
                for (uint32_t i = 0; i < c->scratchpads; i++) {
                        uint32_t v = 1;
                        CF_OK(r, o->spad_read(a->h, i, &v), "%s: spad_read(%u)", a->name, i);
                        CF_EQ(r, v, 0, "%s: scratchpad %u after the reset", a->name, i);
                }
        }
        struct ntbf_counters k;
        CF_TRY(cf_counters(r, a, &k));
        /* The host CPU's reserved requester entries survived: its accesses pass again. */
        CF_TRY(cf_slot_set(r, p, inbound, tg.slot, &x));
        CF_TRY(cf_win_write(r, &w, w.base, cf_pattern(130, 2), &st));
        CF_OK(r, st, "write through slot 0 reprogrammed after the reset");
        CF_EQ(r, cf_load64(tg.mem.addr), cf_pattern(130, 2),
              "far side after slot 0 was reprogrammed after the reset");
        return 0;
}

/* ---- counters -----------------------------------------------------------------------------------
 */

/* One 8-byte access through slot, with the expected status and counter movements. */
static int one(struct cf_run *r, const char *what, uint32_t slot, uint16_t rid, bool write,
               int sim_status, const struct ntbf_counters *wa, const struct ntbf_counters *wb)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        struct ntbf_counters a0, b0, a1, b1;
        CF_TRY(cf_counters(r, a, &a0));
        CF_TRY(cf_counters(r, b, &b0));
        uint64_t v = cf_pattern(140, slot);
        int st;
        CF_TRY(cf_tx(r, a, rid, write, cf_slot_addr(a, slot), &v, 8, &st));
        if (r->cx->sim && !r->cx->dma_only)
                CF_RC(r, sim_status, st, "status of %s", what);
        else if (sim_status)
                CF_TRUE(r, st != 0, "%s succeeded", what);
        else
                CF_OK(r, st, "status of %s", what);
        CF_TRY(cf_counters(r, a, &a1));
        CF_TRY(cf_counters(r, b, &b1));
        CF_TRY(cf_counters_delta(r, a, what, &a0, &a1, wa));
        CF_TRY(cf_counters_delta(r, b, what, &b0, &b1, wb));
        return 0;
}

int cf_check_counters(struct cf_run *r)
{
        struct cf_ctx *cx = r->cx;
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        const struct ntbf_backend_ops *o = cx->ops;
        const char *why = NULL;
        enum cf_tx mode = cf_tx_mode(cx, a, &why);
        CF_TRY(cf_need_cap(r, NTBF_CAP_COUNTERS, a, b));
        if (mode == CF_TX_NONE)
                CF_SKIP(r, "%s", why);
        bool inbound = false;
        CF_TRY(cf_slot_how(r, p, &inbound));
        struct cf_target tg;
        CF_TRY(cf_target(r, p, cf_slot(p->a, 0), 1, &tg));
        uint32_t s0 = tg.slot, s1 = cf_slot(a, 1);
        uint64_t align = cf_xalign(a, s0, tg.xs);
        const struct ntbf_counters none = {0}, tx = {.tx = 1}, rx = {.rx = 1};
        unsigned kinds = 0;

        CF_TRY(one(r, "a write that lands", s0, 0, true, 0, &tx, &rx));
        CF_TRY(one(r, "a read that lands", s0, 0, false, 0, &tx, &rx));
        if (mode == CF_TX_SIM && (a->caps.flags & NTBF_CAP_RID_TABLE)) {
                const struct ntbf_counters w = {.drop_no_rid = 1};
                CF_TRY(one(r, "a write by a requester missing from the adapter's table", s0, 0x0300,
                           true, NTBF_ENORID, &w, &none));
                kinds++;
        }
        if (a->caps.flags & NTBF_CAP_LINK_CTRL) {
                cf_undo_link(r, a, p->a_port);
                CF_OK(r, o->link_disable(a->h, p->a_port), "%s: link_disable(%u)", a->name,
                      p->a_port);
                const struct ntbf_counters down = {.drop_link_down = 1};
                CF_TRY(one(r, "a write with the link down", s0, 0, true, NTBF_ELINKDOWN, &down,
                           &none));
                CF_OK(r, o->link_enable(a->h, p->a_port), "%s: link_enable(%u)", a->name,
                      p->a_port);
                kinds++;
        }

        /* The other kinds go through one probe slot, reprogrammed for each. */
        uint32_t ps = s1 != NTBF_NONE ? s1 : s0;
        if (ps == s0)
                CF_TRY(cf_slot_clear(r, p, inbound, s0));
        const struct ntbf_counters unp = {.drop_unprogrammed = 1};
        CF_TRY(one(r, "a write to an unprogrammed slot", ps, 0, true, NTBF_EUNPROGRAMMED, &unp,
                   &none));
        CF_TRY(one(r, "a read of an unprogrammed slot", ps, 0, false, NTBF_EUNPROGRAMMED, &unp,
                   &none));
        kinds++;
        uint64_t pxs = cf_xsize(a, ps), palign = cf_xalign(a, ps, pxs);
        align = palign > align ? palign : align;
        if (b->caps.flags & NTBF_CAP_IOMMU) {
                struct ntbf_xlat x = {b->node, b->idx, cf_free_iova(cx->t, b->node, align),
                                      NTBF_NONE, pxs};
                CF_TRY(cf_slot_set(r, p, inbound, ps, &x));
                const struct ntbf_counters f = {.rx = 1, .iommu_fault = 1};
                CF_TRY(
                    one(r, "a write to an unmapped IOVA", ps, 0, true, NTBF_EIOMMU_FAULT, &tx, &f));
                CF_TRY(cf_slot_clear(r, p, inbound, ps));
                kinds++;
        }
        /* Nothing claims it on B: a hole, or with an IOMMU (which would translate a hole)
         * B's own window, since nothing transits a third host. */
        struct ntbf_xlat x = {b->node, b->idx, 0, NTBF_NONE, pxs};
        if (b->caps.flags & NTBF_CAP_IOMMU) {
                const struct ntbf_window *bw = &b->caps.windows[0];
                x.addr = ntbf_align_up(bw->base, align);
                if (x.addr >= bw->base + bw->size)
                        x.addr = UINT64_MAX;
        } else {
                x.addr = cf_unclaimed(cx->t, b->node, align);
        }
        if (x.addr != UINT64_MAX) {
                CF_TRY(cf_slot_set(r, p, inbound, ps, &x));
                const struct ntbf_counters f = {.rx = 1, .master_abort = 1};
                CF_TRY(one(r, "a write to an address nothing claims on the far side", ps, 0, true,
                           NTBF_EUNREACHABLE, &tx, &f));
                CF_TRY(cf_slot_clear(r, p, inbound, ps));
                kinds++;
        }
        snprintf(r->reason, sizeof(r->reason), "%u drop kinds through the %s", kinds,
                 mode == CF_TX_SIM ? "simulated fabric's transactions" : "DMA engine");
        return 0;
}

/* ---- refused arguments --------------------------------------------------------------------------
 */

/* What a refused call must not change, as hashes of everything readable. */
struct snap {
        uint64_t slots, spads, db, links, counters;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
        return (h ^ v) * UINT64_C(0x100000001b3);
}

static void take(struct cf_ctx *cx, struct cf_ad *ad, struct snap *s)
{
        const struct ntbf_backend_ops *o = cx->ops;
        memset(s, 0, sizeof(*s));
        for (uint32_t k = 0; o->xlat_get && k < ad->caps.slots; k++) {
                struct ntbf_xlat x = {0};
                bool v = false;
                o->xlat_get(ad->h, k, &x, &v);
                s->slots = mix(s->slots, v ? x.addr ^ x.size ^ ((uint64_t)x.dst_adapter << 48) ^
                                                 ((uint64_t)x.mcast_group << 32)
                                           : 1);
        }
        for (uint32_t k = 0; (ad->caps.flags & NTBF_CAP_SCRATCHPAD) && k < ad->caps.scratchpads;
             k++) {
                uint32_t v = 0;
                o->spad_read(ad->h, k, &v);
                s->spads = mix(s->spads, v);
        }
        if (ad->caps.flags & NTBF_CAP_DOORBELL)
                o->db_read(ad->h, &s->db);
        for (uint32_t q = 0; q < ad->caps.ports; q++) {
                bool up = false;
                o->link_state(ad->h, q, &up);
                s->links = mix(s->links, up);
        }
        struct ntbf_counters c = {0};
        if (ad->caps.flags & NTBF_CAP_COUNTERS)
                o->counters(ad->h, &c);
        s->counters =
            mix(mix(mix(mix(mix(mix(mix(0, c.tx), c.rx), c.drop_no_rid), c.drop_unprogrammed),
                        c.drop_link_down),
                    c.master_abort),
                c.iommu_fault);
}

static int same(struct cf_run *r, struct cf_ad *ad, const struct snap *before, const char *call)
{
        struct snap now;
        take(r->cx, ad, &now);
        const char *what = now.slots != before->slots         ? "its translation slots"
                           : now.spads != before->spads       ? "its scratchpads"
                           : now.db != before->db             ? "its doorbell bits"
                           : now.links != before->links       ? "its link state"
                           : now.counters != before->counters ? "its counters"
                                                              : NULL;
        if (what)
                CF_FAIL(r, "%s, refused, still changed %s of %s", call, what, ad->name);
        return 0;
}

/* A call that must return -EINVAL and leave A and B as they were. */
#define REFUSED(r, call, ...)                                                                      \
        do {                                                                                       \
                char c_[320];                                                                      \
                snprintf(c_, sizeof(c_), __VA_ARGS__);                                             \
                CF_RC(r, -EINVAL, call, "%s", c_);                                                 \
                CF_TRY(same(r, a, &sa, c_));                                                       \
                CF_TRY(same(r, b, &sb, c_));                                                       \
                refused++;                                                                         \
        } while (0)

int cf_check_args(struct cf_run *r)
{
        struct cf_ctx *cx = r->cx;
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        const struct ntbf_backend_ops *o = cx->ops;
        const struct ntbf_topo *t = cx->t;
        const struct ntbf_caps *ca = &a->caps, *cb = &b->caps;
        uint32_t fa = ca->flags, fb = cb->flags, na = t->nadapters;
        struct snap sa, sb;
        take(cx, a, &sa);
        take(cx, b, &sb);
        unsigned refused = 0;
        uint32_t v32 = 0, peer = 0;
        bool up;

        uint32_t s0 = cf_slot(a, 0), ns = ca->slots;
        uint64_t xs = cf_xsize(a, s0);
        if (fa & NTBF_CAP_XLAT_OUTBOUND) {
                struct ntbf_xlat x = {b->node, b->idx, 0, NTBF_NONE, xs};
                REFUSED(r, o->xlat_set(a->h, ns, &x), "%s: xlat_set(slot %u)", a->name, ns);
                REFUSED(r, o->xlat_set(a->h, UINT32_MAX, &x), "%s: xlat_set(slot %u)", a->name,
                        UINT32_MAX);
                REFUSED(r, o->xlat_clear(a->h, ns), "%s: xlat_clear(slot %u)", a->name, ns);
                struct ntbf_xlat bad = {NTBF_NONE, na, 0, NTBF_NONE, xs};
                REFUSED(r, o->xlat_set(a->h, s0, &bad), "%s: xlat_set(slot %u -> adapter %u)",
                        a->name, s0, na);
                x.size = 0;
                REFUSED(r, o->xlat_set(a->h, s0, &x), "%s: xlat_set(slot %u, size 0)", a->name, s0);
                if (fa & NTBF_CAP_MCAST) {
                        struct ntbf_xlat g = {NTBF_NONE, NTBF_NONE, 0, ca->mcast_groups, xs};
                        REFUSED(r, o->xlat_set(a->h, s0, &g), "%s: xlat_set(slot %u -> group %u)",
                                a->name, s0, ca->mcast_groups);
                }
        }
        if (o->xlat_get) {
                struct ntbf_xlat x;
                bool v;
                REFUSED(r, o->xlat_get(a->h, ns, &x, &v), "%s: xlat_get(slot %u)", a->name, ns);
        }
        if (fb & NTBF_CAP_XLAT_INBOUND) {
                REFUSED(r, o->peer_xlat_set(b->h, a->idx, ns, 0, xs),
                        "%s: peer_xlat_set(%s, slot %u)", b->name, a->name, ns);
                REFUSED(r, o->peer_xlat_clear(b->h, a->idx, ns), "%s: peer_xlat_clear(%s, slot %u)",
                        b->name, a->name, ns);
                REFUSED(r, o->peer_xlat_set(b->h, na, 0, 0, xs), "%s: peer_xlat_set(peer %u)",
                        b->name, na);
                REFUSED(r, o->peer_xlat_clear(b->h, na, 0), "%s: peer_xlat_clear(peer %u)", b->name,
                        na);
                REFUSED(r, o->peer_xlat_set(b->h, a->idx, s0, 0, 0),
                        "%s: peer_xlat_set(%s, slot %u, size 0)", b->name, a->name, s0);
        }
        if (fa & NTBF_CAP_SCRATCHPAD) {
                REFUSED(r, o->spad_read(a->h, ca->scratchpads, &v32), "%s: spad_read(%u)", a->name,
                        ca->scratchpads);
                REFUSED(r, o->spad_write(a->h, ca->scratchpads, 1), "%s: spad_write(%u)", a->name,
                        ca->scratchpads);
                REFUSED(r, o->peer_spad_write(a->h, na, 0, 1), "%s: peer_spad_write(peer %u)",
                        a->name, na);
                REFUSED(r, o->peer_spad_read(a->h, na, 0, &v32), "%s: peer_spad_read(peer %u)",
                        a->name, na);
                if (fb & NTBF_CAP_SCRATCHPAD) {
                        REFUSED(r, o->peer_spad_write(a->h, b->idx, cb->scratchpads, 1),
                                "%s: peer_spad_write(%s, %u)", a->name, b->name, cb->scratchpads);
                        REFUSED(r, o->peer_spad_read(a->h, b->idx, cb->scratchpads, &v32),
                                "%s: peer_spad_read(%s, %u)", a->name, b->name, cb->scratchpads);
                }
        }
        REFUSED(r, o->link_state(a->h, ca->ports, &up), "%s: link_state(port %u)", a->name,
                ca->ports);
        REFUSED(r, o->link_state(a->h, UINT32_MAX, &up), "%s: link_state(port %u)", a->name,
                UINT32_MAX);
        if (fa & NTBF_CAP_LINK_CTRL) {
                REFUSED(r, o->link_enable(a->h, ca->ports), "%s: link_enable(port %u)", a->name,
                        ca->ports);
                REFUSED(r, o->link_disable(a->h, ca->ports), "%s: link_disable(port %u)", a->name,
                        ca->ports);
        }
        if ((fa & NTBF_CAP_DOORBELL) && (fb & NTBF_CAP_DOORBELL)) {
                uint64_t ok = cb->db_valid_mask & -cb->db_valid_mask;
                REFUSED(r, o->peer_db_set(a->h, na, ok), "%s: peer_db_set(peer %u)", a->name, na);
                if (~cb->db_valid_mask) {
                        uint64_t bad = ~cb->db_valid_mask & (cb->db_valid_mask + 1);
                        bad = bad ? bad : ~cb->db_valid_mask & -~cb->db_valid_mask;
                        REFUSED(r, o->peer_db_set(a->h, b->idx, bad),
                                "%s: peer_db_set(%s, %#llx, outside db_valid_mask)", a->name,
                                b->name, (unsigned long long)bad);
                }
                if (~ca->db_valid_mask) {
                        uint64_t bad = ~ca->db_valid_mask & -~ca->db_valid_mask;
                        REFUSED(r, o->db_set_mask(a->h, bad), "%s: db_set_mask(%#llx)", a->name,
                                (unsigned long long)bad);
                        REFUSED(r, o->db_clear_mask(a->h, bad), "%s: db_clear_mask(%#llx)", a->name,
                                (unsigned long long)bad);
                }
        }
        if ((fa & NTBF_CAP_MESSAGE) && (fb & NTBF_CAP_MESSAGE)) {
                REFUSED(r, o->peer_msg_write(a->h, b->idx, cb->messages, 1),
                        "%s: peer_msg_write(%s, %u)", a->name, b->name, cb->messages);
                REFUSED(r, o->peer_msg_write(a->h, na, 0, 1), "%s: peer_msg_write(peer %u)",
                        a->name, na);
                REFUSED(r, o->msg_read(a->h, ca->messages, &peer, &v32), "%s: msg_read(%u)",
                        a->name, ca->messages);
        }
        if (fa & NTBF_CAP_MCAST) {
                REFUSED(r, o->mcast_join(a->h, ca->mcast_groups, NTBF_MiB, 4096),
                        "%s: mcast_join(group %u)", a->name, ca->mcast_groups);
                REFUSED(r, o->mcast_leave(a->h, ca->mcast_groups), "%s: mcast_leave(group %u)",
                        a->name, ca->mcast_groups);
        }
        if (fa & NTBF_CAP_DMA) {
                uint64_t c;
                int st;
                REFUSED(r, o->dma_submit(a->h, ca->dma_channels, 0, 0, 8, 1),
                        "%s: dma_submit(chan %u)", a->name, ca->dma_channels);
                REFUSED(r, o->dma_poll(a->h, ca->dma_channels, &c, &st, 1), "%s: dma_poll(chan %u)",
                        a->name, ca->dma_channels);
        }
        struct ntbf_rid rid = {a->node, 0x0300, 0xffff};
        if (fa & NTBF_CAP_SWITCH_RID) {
                REFUSED(r, o->switch_rid_add(a->h, t->nswitches, &rid), "%s: switch_rid_add(%u)",
                        a->name, t->nswitches);
                REFUSED(r, o->switch_rid_del(a->h, t->nswitches, &rid), "%s: switch_rid_del(%u)",
                        a->name, t->nswitches);
        }
        if (fa & NTBF_CAP_RID_TABLE) {
                struct ntbf_rid bad = {t->nnodes, 0x0300, 0xffff};
                REFUSED(r, o->rid_add(a->h, &bad, NULL), "%s: rid_add(node %u)", a->name,
                        t->nnodes);
        }
        if ((fa & NTBF_CAP_FAULT) && o->fault) {
                struct ntbf_fault f = {NTBF_FAULT_LINK_DOWN, t->nlinks};
                REFUSED(r, o->fault(cx->b, &f), "fault(link down, link %u)", t->nlinks);
                f = (struct ntbf_fault){NTBF_FAULT_ADAPTER_RESET, na};
                REFUSED(r, o->fault(cx->b, &f), "fault(adapter reset, adapter %u)", na);
                f = (struct ntbf_fault){NTBF_FAULT_HOST_DEATH, t->nnodes};
                REFUSED(r, o->fault(cx->b, &f), "fault(host death, node %u)", t->nnodes);
        }
        snprintf(r->reason, sizeof(r->reason), "%u calls refused with -EINVAL", refused);
        return 0;
}
