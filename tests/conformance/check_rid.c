/* tests/conformance/check_rid.c: requester-ID tables of adapters and switches, and their masks. */
#include <errno.h>
#include <string.h>

#include "ntbfab/error.h"
#include "checks.h"

/* The i-th requester the checks add: bus 0x80 and up, one device per entry. */
static struct ntbf_rid nth(uint32_t node, uint32_t i)
{
        return (struct ntbf_rid){node, (uint16_t)(((0x80 + i / 32) << 8) | ((i % 32) << 3)),
                                 0xffff};
}

static const char *rid_str(const struct ntbf_rid *r, char *buf, size_t len)
{
        snprintf(buf, len, "%02x:%02x.%x/%04x", r->rid >> 8, (r->rid >> 3) & 0x1f, r->rid & 7,
                 r->mask);
        return buf;
}

/* ---- the adapter table --------------------------------------------------------------------------
 */

int cf_check_rid_table(struct cf_run *r)
{
        struct cf_ad *ad = r->ad;
        const struct ntbf_backend_ops *o = r->cx->ops;
        const char *n = ad->name;
        char s[32];
        if (!(ad->caps.flags & NTBF_CAP_RID_TABLE))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_RID_TABLE", n);
        uint32_t free = ad->caps.rid_table - ad->caps.rid_reserved, proxied = 0;
        uint8_t seen[8192] = {0}; /* proxy IDs given so far, a bit each */
        for (uint32_t i = 0; i < free; i++) {
                struct ntbf_rid x = nth(ad->node, i);
                uint32_t proxy = 0x12345678; /* must be overwritten */
                CF_OK(r, o->rid_add(ad->h, &x, &proxy), "%s: rid_add(%s), entry %u of the %u free",
                      n, rid_str(&x, s, sizeof(s)), i + 1, free);
                cf_undo_rid(r, ad, &x);
                /* A proxy ID (Switchtec) or none; two live entries never share one. */
                CF_TRUE(r, proxy == NTBF_NONE || proxy <= 0xffff,
                        "%s: rid_add(%s) set proxy to %#x: neither NTBF_NONE nor a bus:devfn", n,
                        rid_str(&x, s, sizeof(s)), proxy);
                if (proxy == NTBF_NONE)
                        continue;
                CF_TRUE(r, !(seen[proxy / 8] >> (proxy % 8) & 1),
                        "%s: rid_add(%s) gave proxy ID %02x:%02x.%x, which another live entry "
                        "has",
                        n, rid_str(&x, s, sizeof(s)), proxy >> 8, proxy >> 3 & 0x1f, proxy & 7);
                seen[proxy / 8] |= (uint8_t)(1u << (proxy % 8));
                proxied++;
        }
        CF_TRUE(r, !proxied || proxied == free,
                "%s: %u of %u entries got a proxy ID: the hardware gives all or none", n, proxied,
                free);
        struct ntbf_rid more = nth(ad->node, free), more2 = nth(ad->node, free + 1);
        CF_RC(r, -ENOSPC, o->rid_add(ad->h, &more, NULL),
              "%s: rid_add past the %u free entries (rid_table %u - rid_reserved %u)", n, free,
              ad->caps.rid_table, ad->caps.rid_reserved);
        struct ntbf_rid first = nth(ad->node, 0);
        CF_RC(r, -EEXIST, o->rid_add(ad->h, &first, NULL), "%s: rid_add(%s) a second time", n,
              rid_str(&first, s, sizeof(s)));
        struct ntbf_rid gone = nth(ad->node, free / 2);
        CF_OK(r, o->rid_del(ad->h, &gone), "%s: rid_del(%s)", n, rid_str(&gone, s, sizeof(s)));
        CF_OK(r, o->rid_add(ad->h, &more, NULL), "%s: rid_add after one rid_del freed an entry", n);
        cf_undo_rid(r, ad, &more);
        CF_RC(r, -ENOSPC, o->rid_add(ad->h, &more2, NULL), "%s: rid_add when full again", n);
        CF_RC(r, -ENOENT, o->rid_del(ad->h, &gone), "%s: rid_del(%s) of an absent entry", n,
              rid_str(&gone, s, sizeof(s)));
        /* 00:00.0 is the root complex, among the CPU's reserved entries on every platform. */
        struct ntbf_rid rc = {ad->node, 0x0000, 0xffff};
        CF_RC(r, -EPERM, o->rid_del(ad->h, &rc), "%s: rid_del(00:00.0), a reserved CPU entry", n);
        snprintf(r->reason, sizeof(r->reason), "%u entries (%u reserved)%s", ad->caps.rid_table,
                 ad->caps.rid_reserved, proxied ? ", each with its own proxy ID" : "");
        return 0;
}

/* ---- drops --------------------------------------------------------------------------------------
 */

/* Put a requester in A's table and in every switch on the route, taken back at the end. */
static int rid_everywhere(struct cf_run *r, struct cf_pair *p, const struct ntbf_rid *x,
                          bool adapter)
{
        const struct ntbf_backend_ops *o = r->cx->ops;
        char s[32];
        if (adapter && (p->a->caps.flags & NTBF_CAP_RID_TABLE)) {
                CF_OK(r, o->rid_add(p->a->h, x, NULL), "%s: rid_add(%s)", p->a->name,
                      rid_str(x, s, sizeof(s)));
                cf_undo_rid(r, p->a, x);
        }
        if (!(p->a->caps.flags & NTBF_CAP_SWITCH_RID))
                return 0;
        for (uint32_t i = 0; i < p->nsw; i++) {
                if (!r->cx->t->switches[p->sw[i]].p.rid_table)
                        continue;
                int rc = o->switch_rid_add(p->a->h, p->sw[i], x);
                if (rc == -EEXIST) /* a cascade can cross one switch twice: never, but harmless */
                        continue;
                CF_OK(r, rc, "%s: switch_rid_add(%s, %s)", p->a->name,
                      r->cx->t->switches[p->sw[i]].name, rid_str(x, s, sizeof(s)));
                cf_undo_swrid(r, p->a, p->sw[i], x);
        }
        return 0;
}

static int need_sim_tx(struct cf_run *r)
{
        if (cf_tx_mode(r->cx, r->p->a, NULL) != CF_TX_SIM)
                CF_SKIP(r, "needs a transaction from a requester that is not in the table: only "
                           "the simulated fabric can issue one (ntbf_sim_write); a DMA engine "
                           "issues as its host CPU's reserved requester ID");
        return 0;
}

/* Write v as requester rid through slot tg->slot; the status must be want. */
static int write_as(struct cf_run *r, const struct cf_target *tg, uint16_t rid, uint64_t v,
                    int want)
{
        struct cf_ad *a = r->p->a;
        uint64_t addr = tg->addr;
        int st;
        CF_TRY(cf_tx(r, a, rid, true, addr, &v, 8, &st));
        CF_RC(r, want, st, "write as requester %02x:%02x.%x through %s slot %u", rid >> 8,
              (rid >> 3) & 0x1f, rid & 7, a->name, tg->slot);
        return 0;
}

int cf_check_rid_drop(struct cf_run *r)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        const struct ntbf_backend_ops *o = r->cx->ops;
        if (!(a->caps.flags & NTBF_CAP_RID_TABLE))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_RID_TABLE", a->name);
        CF_TRY(need_sim_tx(r));
        struct cf_target tg;
        CF_TRY(cf_target(r, p, cf_slot(p->a, 0), 1, &tg));
        struct ntbf_rid x = {a->node, 0x0300, 0xffff};
        CF_TRY(rid_everywhere(r, p, &x, false)); /* only A's table decides */
        uint64_t addr = cf_slot_addr(a, cf_slot(a, 0));
        struct ntbf_counters a0, b0, a1, b1;
        CF_TRY(cf_counters(r, a, &a0));
        CF_TRY(cf_counters(r, b, &b0));
        CF_TRY(write_as(r, &tg, x.rid, cf_pattern(30, 0), NTBF_ENORID));
        CF_EQ(r, cf_load64(tg.mem.addr), 0, "far side after a write by a requester missing from %s",
              a->name);
        uint64_t v = 0;
        int st;
        CF_TRY(cf_tx(r, a, x.rid, false, addr, &v, 8, &st));
        CF_RC(r, NTBF_ENORID, st, "read as requester 03:00.0, missing from %s", a->name);
        CF_EQ(r, v, UINT64_MAX, "bytes of a read by a missing requester");
        CF_TRY(cf_counters(r, a, &a1));
        CF_TRY(cf_counters(r, b, &b1));
        struct ntbf_counters wa = {.drop_no_rid = 2}, wb = {0};
        CF_TRY(cf_counters_delta(r, a, "a write and a read by a missing requester", &a0, &a1, &wa));
        CF_TRY(cf_counters_delta(r, b, "a write and a read by a missing requester", &b0, &b1, &wb));

        CF_OK(r, o->rid_add(a->h, &x, NULL), "%s: rid_add(03:00.0)", a->name);
        cf_undo_rid(r, a, &x);
        CF_TRY(write_as(r, &tg, x.rid, cf_pattern(30, 1), 0));
        CF_EQ(r, cf_load64(tg.mem.addr), cf_pattern(30, 1),
              "far side after a write by a requester present in %s", a->name);
        CF_TRY(cf_tx(r, a, x.rid, false, addr, &v, 8, &st));
        CF_OK(r, st, "read as requester 03:00.0, present in %s", a->name);
        CF_EQ(r, v, cf_pattern(30, 1), "bytes of a read by a present requester");
        CF_TRY(cf_counters(r, a, &a0));
        CF_EQ(r, a0.drop_no_rid, a1.drop_no_rid, "%s: drop_no_rid after passing accesses", a->name);

        CF_OK(r, o->rid_del(a->h, &x), "%s: rid_del(03:00.0)", a->name);
        CF_TRY(write_as(r, &tg, x.rid, cf_pattern(30, 2), NTBF_ENORID));
        CF_EQ(r, cf_load64(tg.mem.addr), cf_pattern(30, 1),
              "far side after a write by a requester deleted from %s", a->name);
        CF_TRY(cf_counters(r, a, &a1));
        CF_EQ(r, a1.drop_no_rid, a0.drop_no_rid + 1, "%s: drop_no_rid after the entry was deleted",
              a->name);
        return 0;
}

int cf_check_rid_mask(struct cf_run *r)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a;
        const struct ntbf_backend_ops *o = r->cx->ops;
        if (!(a->caps.flags & NTBF_CAP_RID_TABLE))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_RID_TABLE", a->name);
        CF_TRY(need_sim_tx(r));
        struct cf_target tg;
        CF_TRY(cf_target(r, p, cf_slot(p->a, 0), 1, &tg));
        /* One entry for all functions of device 04:00 (a multi-function device counts once). */
        struct ntbf_rid dev = {a->node, 0x0400, 0xfff8};
        CF_TRY(rid_everywhere(r, p, &dev, true));
        for (uint16_t fn = 0; fn < 8; fn++) {
                CF_TRY(write_as(r, &tg, (uint16_t)(0x0400 | fn), cf_pattern(40, fn), 0));
                CF_EQ(r, cf_load64(tg.mem.addr), cf_pattern(40, fn),
                      "far side after a write by 04:00.%u (entry 04:00.0/fff8)", fn);
        }
        struct ntbf_counters c0, c1;
        CF_TRY(cf_counters(r, a, &c0));
        CF_TRY(write_as(r, &tg, 0x0408, 1, NTBF_ENORID)); /* 04:01.0: another device */
        CF_TRY(write_as(r, &tg, 0x03ff, 1, NTBF_ENORID)); /* 03:1f.7 */
        CF_TRY(cf_counters(r, a, &c1));
        CF_EQ(r, c1.drop_no_rid - c0.drop_no_rid, 2, "%s: drop_no_rid after two unmatched writes",
              a->name);
        struct ntbf_rid dup = {a->node, 0x0403, 0xfff8};
        CF_RC(r, -EEXIST, o->rid_add(a->h, &dup, NULL),
              "%s: rid_add(04:00.3/fff8), the same entry as 04:00.0/fff8", a->name);
        /* A whole bus. */
        struct ntbf_rid bus = {a->node, 0x0500, 0xff00};
        CF_TRY(rid_everywhere(r, p, &bus, true));
        CF_TRY(write_as(r, &tg, 0x05a3, cf_pattern(41, 0), 0));
        CF_EQ(r, cf_load64(tg.mem.addr), cf_pattern(41, 0),
              "far side after a write by 05:14.3 (entry 05:00.0/ff00)");
        CF_TRY(write_as(r, &tg, 0x0600, 1, NTBF_ENORID));
        return 0;
}

/* ---- switch tables ------------------------------------------------------------------------------
 */

int cf_check_rid_switch(struct cf_run *r)
{
        struct cf_ctx *cx = r->cx;
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a;
        const struct ntbf_backend_ops *o = cx->ops;
        char s[32];
        if (!(a->caps.flags & NTBF_CAP_SWITCH_RID))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_SWITCH_RID", a->name);
        unsigned tested = 0;
        for (uint32_t k = 0; k < p->nsw; k++) {
                uint32_t sw = p->sw[k];
                const char *sn = cx->t->switches[sw].name;
                uint32_t size = cx->t->switches[sw].p.rid_table;
                if (!size)
                        continue; /* no table: nothing enforced, nothing to fill */
                /* The switch's figure comes from the cluster file: ntbf_caps has none. */
                uint32_t free = size - cx->sw_held[sw];
                for (uint32_t i = 0; i < free; i++) {
                        struct ntbf_rid x = nth(a->node, i);
                        CF_OK(r, o->switch_rid_add(a->h, sw, &x),
                              "%s: switch_rid_add(%s, %s), entry %u of the %u free", a->name, sn,
                              rid_str(&x, s, sizeof(s)), i + 1, free);
                        cf_undo_swrid(r, a, sw, &x);
                }
                struct ntbf_rid more = nth(a->node, free), first = nth(a->node, 0),
                                gone = nth(a->node, free / 2);
                CF_RC(r, -ENOSPC, o->switch_rid_add(a->h, sw, &more),
                      "%s: switch_rid_add(%s) past its %u entries (%u held by the suite's CPU "
                      "baseline)",
                      a->name, sn, size, cx->sw_held[sw]);
                CF_RC(r, -EEXIST, o->switch_rid_add(a->h, sw, &first),
                      "%s: switch_rid_add(%s, %s) a second time", a->name, sn,
                      rid_str(&first, s, sizeof(s)));
                CF_OK(r, o->switch_rid_del(a->h, sw, &gone), "%s: switch_rid_del(%s, %s)", a->name,
                      sn, rid_str(&gone, s, sizeof(s)));
                CF_OK(r, o->switch_rid_add(a->h, sw, &more),
                      "%s: switch_rid_add(%s) after one switch_rid_del freed an entry", a->name,
                      sn);
                cf_undo_swrid(r, a, sw, &more);
                CF_RC(r, -ENOENT, o->switch_rid_del(a->h, sw, &gone),
                      "%s: switch_rid_del(%s, %s) of an absent entry", a->name, sn,
                      rid_str(&gone, s, sizeof(s)));
                cf_undo_all(r); /* room for the next switch's entries of the same requesters */
                tested++;
        }
        if (!tested)
                CF_SKIP(r, "no switch on the route has a requester table (rid_table 0)");
        return 0;
}

int cf_check_rid_switch_drop(struct cf_run *r)
{
        struct cf_ctx *cx = r->cx;
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a;
        const struct ntbf_backend_ops *o = cx->ops;
        if (!(a->caps.flags & NTBF_CAP_SWITCH_RID))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_SWITCH_RID", a->name);
        uint32_t last = NTBF_NONE;
        for (uint32_t k = 0; k < p->nsw; k++)
                if (cx->t->switches[p->sw[k]].p.rid_table)
                        last = p->sw[k];
        if (last == NTBF_NONE)
                CF_SKIP(r, "no switch on the route has a requester table (rid_table 0)");
        CF_TRY(need_sim_tx(r));
        struct cf_target tg;
        CF_TRY(cf_target(r, p, cf_slot(p->a, 0), 1, &tg));
        struct ntbf_rid x = {a->node, 0x0300, 0xffff};
        if (a->caps.flags & NTBF_CAP_RID_TABLE) {
                CF_OK(r, o->rid_add(a->h, &x, NULL), "%s: rid_add(03:00.0)", a->name);
                cf_undo_rid(r, a, &x);
        }
        struct ntbf_counters c0, c1;
        CF_TRY(cf_counters(r, a, &c0));
        CF_TRY(write_as(r, &tg, x.rid, cf_pattern(50, 0), NTBF_ENORID));
        CF_EQ(r, cf_load64(tg.mem.addr), 0,
              "far side after a write by a requester missing from "
              "the switches");
        CF_TRY(cf_counters(r, a, &c1));
        CF_EQ(r, c1.drop_no_rid - c0.drop_no_rid, 1,
              "%s: drop_no_rid after a write dropped by a switch (drops on the way out count on "
              "the adapter the transaction left by)",
              a->name);
        CF_TRY(rid_everywhere(r, p, &x, false));
        CF_TRY(write_as(r, &tg, x.rid, cf_pattern(50, 1), 0));
        CF_EQ(r, cf_load64(tg.mem.addr), cf_pattern(50, 1),
              "far side after a write by a requester registered on every switch");
        CF_OK(r, o->switch_rid_del(a->h, last, &x), "%s: switch_rid_del(%s, 03:00.0)", a->name,
              cx->t->switches[last].name);
        CF_TRY(write_as(r, &tg, x.rid, cf_pattern(50, 2), NTBF_ENORID));
        CF_EQ(r, cf_load64(tg.mem.addr), cf_pattern(50, 1),
              "far side after a write by a requester deleted from switch %s",
              cx->t->switches[last].name);
        struct ntbf_rid dev = {a->node, 0x0400, 0xfff8};
        CF_TRY(rid_everywhere(r, p, &dev, true));
        CF_TRY(write_as(r, &tg, 0x0405, cf_pattern(50, 3), 0));
        CF_EQ(r, cf_load64(tg.mem.addr), cf_pattern(50, 3),
              "far side after a write by 04:00.5 (entry 04:00.0/fff8 on the switches)");
        CF_TRY(write_as(r, &tg, 0x0408, 1, NTBF_ENORID));
        return 0;
}
