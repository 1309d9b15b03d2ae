/* tests/conformance/check_regs.c: doorbells, their masks, scratchpads and messages between peers.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"

static int both(struct cf_run *r, uint32_t flag)
{
        struct cf_pair *p = r->p;
        if (!(p->a->caps.flags & flag))
                CF_SKIP(r, "not claimed: %s does not claim %s", p->a->name, cf_cap_name(flag));
        if (!(p->b->caps.flags & flag))
                CF_SKIP(r, "not claimed: %s does not claim %s", p->b->name, cf_cap_name(flag));
        return 0;
}

static int db_is(struct cf_run *r, struct cf_ad *ad, uint64_t want, const char *when)
{
        uint64_t bits = ~want;
        CF_OK(r, r->cx->ops->db_read(ad->h, &bits), "%s: db_read", ad->name);
        CF_EQ(r, bits, want, "%s: db_read %s", ad->name, when);
        return 0;
}

/* Wait until the bits want are pending on ad: a doorbell rung by the peer is a posted write
 * and its interrupt arrives later (at once on the simulated fabric, after the peer's QEMU
 * delivered an MSI-X on the emulated NTB), so a db_clear right after peer_db_set may come
 * before the bit it means to clear. */
static int db_arrives(struct cf_run *r, struct cf_ad *ad, uint64_t want, const char *when)
{
        double end = cf_now_ms() + r->cx->timeout_ms;
        uint64_t bits = 0;
        for (;;) {
                CF_OK(r, r->cx->ops->db_read(ad->h, &bits), "%s: db_read", ad->name);
                if ((bits & want) == want || cf_now_ms() > end)
                        break;
                usleep(1000);
        }
        CF_EQ(r, bits & want, want, "%s: pending doorbell bits %s within %u ms", ad->name, when,
              r->cx->timeout_ms);
        return 0;
}

/* OR of the bits of the db_events seen since the last reset. */
static uint64_t db_seen(const struct cf_ad *ad)
{
        uint64_t v = 0;
        for (unsigned i = 0; i < ad->ev.dbs && i < CF_EV_LOG; i++)
                v |= ad->ev.db[i].bits;
        return v;
}

int cf_check_doorbell(struct cf_run *r)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        const struct ntbf_backend_ops *o = r->cx->ops;
        CF_TRY(both(r, NTBF_CAP_DOORBELL));
        uint64_t valid = b->caps.db_valid_mask, left = 0;
        CF_OK(r, o->db_read(b->h, &left), "%s: db_read", b->name);
        if (left)
                CF_OK(r, o->db_clear(b->h, left), "%s: db_clear of bits left pending", b->name);
        CF_TRY(db_is(r, b, 0, "before ringing"));
        CF_TRY(cf_drain(r, b));
        unsigned rung = 0;
        for (unsigned i = 0; i < 64; i++) {
                uint64_t bit = UINT64_C(1) << i;
                if (!(valid & bit))
                        continue;
                cf_ev_reset(b);
                CF_OK(r, o->peer_db_set(a->h, b->idx, bit), "%s: peer_db_set(%s, bit %u)", a->name,
                      b->name, i);
                char what[48];
                snprintf(what, sizeof(what), "db_event for bit %u", i);
                CF_TRY(cf_wait_ev(r, b, &b->ev.dbs, 1, what));
                CF_EQ(r, db_seen(b), bit, "%s: bits of the db_event after bit %u was rung", b->name,
                      i);
                if (b->caps.db_vectors)
                        CF_TRUE(r, b->ev.db[0].vector < b->caps.db_vectors,
                                "%s: db_event on vector %u, but db_vectors is %u", b->name,
                                b->ev.db[0].vector, b->caps.db_vectors);
                CF_TRY(db_is(r, b, bit, "after the bit was rung"));
                CF_OK(r, o->db_clear(b->h, bit), "%s: db_clear(bit %u)", b->name, i);
                CF_TRY(db_is(r, b, 0, "after db_clear"));
                rung++;
        }
        snprintf(r->reason, sizeof(r->reason), "%u bits", rung);
        return 0;
}

int cf_check_doorbell_mask(struct cf_run *r)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        const struct ntbf_backend_ops *o = r->cx->ops;
        CF_TRY(both(r, NTBF_CAP_DOORBELL));
        uint64_t valid = b->caps.db_valid_mask;
        uint64_t m = valid & -valid, rest = valid & ~m, n = rest & -rest;
        CF_TRY(cf_drain(r, b));
        CF_OK(r, o->db_set_mask(b->h, m), "%s: db_set_mask(%#llx)", b->name, (unsigned long long)m);
        cf_undo_dbmask(r, b, m);
        CF_OK(r, o->peer_db_set(a->h, b->idx, m | n), "%s: peer_db_set(%#llx)", a->name,
              (unsigned long long)(m | n));
        if (n) {
                CF_TRY(cf_wait_ev(r, b, &b->ev.dbs, 1, "db_event for the unmasked bit"));
                CF_EQ(r, db_seen(b), n,
                      "%s: db_event bits when a masked and an unmasked bit were rung", b->name);
        } else {
                CF_TRY(cf_quiet(r, b));
                CF_EQ(r, b->ev.dbs, 0, "%s: db_events for a masked bit", b->name);
        }
        CF_TRY(db_is(r, b, m | n, "with one of the rung bits masked"));
        if (n)
                CF_OK(r, o->db_clear(b->h, n), "%s: db_clear", b->name);
        cf_ev_reset(b);
        CF_OK(r, o->peer_db_set(a->h, b->idx, m), "%s: peer_db_set(%#llx) again", a->name,
              (unsigned long long)m);
        CF_TRY(cf_quiet(r, b));
        CF_EQ(r, b->ev.dbs, 0, "%s: db_events for a masked bit within %u ms", b->name,
              r->cx->quiet_ms);
        /* Unmasking a pending bit raises it, as on hardware. */
        CF_OK(r, o->db_clear_mask(b->h, m), "%s: db_clear_mask(%#llx)", b->name,
              (unsigned long long)m);
        CF_TRY(cf_wait_ev(r, b, &b->ev.dbs, 1, "db_event when a pending bit was unmasked"));
        CF_EQ(r, db_seen(b), m, "%s: db_event bits after unmasking", b->name);
        CF_TRY(db_is(r, b, m, "after unmasking"));
        CF_OK(r, o->db_clear(b->h, m), "%s: db_clear", b->name);
        /* A bit rung while masked and cleared before unmasking raises nothing. */
        CF_OK(r, o->db_set_mask(b->h, m), "%s: db_set_mask", b->name);
        CF_OK(r, o->peer_db_set(a->h, b->idx, m), "%s: peer_db_set", a->name);
        CF_TRY(db_arrives(r, b, m, "rung while masked"));
        CF_OK(r, o->db_clear(b->h, m), "%s: db_clear", b->name);
        cf_ev_reset(b);
        CF_OK(r, o->db_clear_mask(b->h, m), "%s: db_clear_mask", b->name);
        CF_TRY(cf_quiet(r, b));
        CF_EQ(r, b->ev.dbs, 0, "%s: db_events after unmasking a bit cleared while masked", b->name);
        return 0;
}

int cf_check_spad(struct cf_run *r)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        const struct ntbf_backend_ops *o = r->cx->ops;
        CF_TRY(both(r, NTBF_CAP_SCRATCHPAD));
        cf_undo_spads(r, a);
        cf_undo_spads(r, b);
        uint32_t v;
        /* All written first, then all read: an index aliasing another shows. */
        for (uint32_t i = 0; i < b->caps.scratchpads; i++)
                CF_OK(r, o->peer_spad_write(a->h, b->idx, i, (uint32_t)cf_pattern(71, i)),
                      "%s: peer_spad_write(%s, %u)", a->name, b->name, i);
        for (uint32_t i = 0; i < b->caps.scratchpads; i++) {
                CF_OK(r, o->spad_read(b->h, i, &v), "%s: spad_read(%u)", b->name, i);
                CF_EQ(r, v, (uint32_t)cf_pattern(71, i), "%s: spad_read(%u) after %s wrote it",
                      b->name, i, a->name);
                CF_OK(r, o->peer_spad_read(a->h, b->idx, i, &v), "%s: peer_spad_read(%s, %u)",
                      a->name, b->name, i);
                CF_EQ(r, v, (uint32_t)cf_pattern(71, i), "%s: peer_spad_read(%s, %u)", a->name,
                      b->name, i);
        }
        for (uint32_t i = 0; i < a->caps.scratchpads; i++)
                CF_OK(r, o->peer_spad_write(b->h, a->idx, i, (uint32_t)cf_pattern(72, i)),
                      "%s: peer_spad_write(%s, %u)", b->name, a->name, i);
        for (uint32_t i = 0; i < a->caps.scratchpads; i++) {
                CF_OK(r, o->spad_read(a->h, i, &v), "%s: spad_read(%u)", a->name, i);
                CF_EQ(r, v, (uint32_t)cf_pattern(72, i), "%s: spad_read(%u) after %s wrote it",
                      a->name, i, b->name);
        }
        for (uint32_t i = 0; i < b->caps.scratchpads; i++)
                CF_OK(r, o->spad_write(b->h, i, (uint32_t)cf_pattern(73, i)), "%s: spad_write(%u)",
                      b->name, i);
        for (uint32_t i = 0; i < b->caps.scratchpads; i++) {
                CF_OK(r, o->peer_spad_read(a->h, b->idx, i, &v), "%s: peer_spad_read(%s, %u)",
                      a->name, b->name, i);
                CF_EQ(r, v, (uint32_t)cf_pattern(73, i),
                      "%s: peer_spad_read(%s, %u) after %s wrote it locally", a->name, b->name, i,
                      b->name);
        }
        snprintf(r->reason, sizeof(r->reason), "%u + %u scratchpads", a->caps.scratchpads,
                 b->caps.scratchpads);
        return 0;
}

int cf_check_msg(struct cf_run *r)
{
        struct cf_ctx *cx = r->cx;
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        const struct ntbf_backend_ops *o = cx->ops;
        CF_TRY(both(r, NTBF_CAP_MESSAGE));
        CF_TRY(cf_drain(r, b));
        for (uint32_t m = 0; m < b->caps.messages; m++) {
                uint32_t v = (uint32_t)cf_pattern(80, m);
                CF_OK(r, o->peer_msg_write(a->h, b->idx, m, v), "%s: peer_msg_write(%s, %u)",
                      a->name, b->name, m);
                char what[48];
                snprintf(what, sizeof(what), "msg_event for message %u", m);
                CF_TRY(cf_wait_ev(r, b, &b->ev.msgs, m + 1, what));
                CF_EQ(r, b->ev.msgs, m + 1, "%s: msg_events after %u messages", b->name, m + 1);
                CF_EQ(r, b->ev.msg[m].peer, a->idx, "%s: msg_event %u: peer (the sender)", b->name,
                      m);
                CF_EQ(r, b->ev.msg[m].midx, m, "%s: msg_event %u: message index", b->name, m);
                CF_EQ(r, b->ev.msg[m].value, v, "%s: msg_event %u: value", b->name, m);
        }
        /* Without msg_event, a message waits in its register for msg_read. */
        CF_OK(r, o->set_events(b->h, &cf_event_ops_nomsg, b), "%s: set_events without msg_event",
              b->name);
        cf_undo_events(r, b);
        uint32_t v = (uint32_t)cf_pattern(81, 0), peer = NTBF_NONE, got = 0;
        CF_OK(r, o->peer_msg_write(a->h, b->idx, 0, v), "%s: peer_msg_write(%s, 0)", a->name,
              b->name);
        int rc = -1;
        for (double end = cf_now_ms() + cx->timeout_ms; rc && cf_now_ms() < end;) {
                rc = o->msg_read(b->h, 0, &peer, &got);
                if (rc)
                        cf_sleep_us(100);
        }
        CF_OK(r, rc, "%s: msg_read(0) within %u ms of the message", b->name, cx->timeout_ms);
        CF_EQ(r, peer, a->idx, "%s: msg_read(0): peer", b->name);
        CF_EQ(r, got, v, "%s: msg_read(0): value", b->name);
        rc = o->msg_read(b->h, 0, &peer, &got);
        CF_TRUE(r, rc < 0, "%s: msg_read(0) of a register already read succeeded", b->name);
        snprintf(r->reason, sizeof(r->reason), "%u message registers", b->caps.messages);
        return 0;
}
