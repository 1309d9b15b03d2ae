/* tests/conformance/check_link.c: link state, and taking a link down and up again. */
#include <errno.h>
#include <string.h>

#include "ntbfab/error.h"
#include "checks.h"

static int expect_state(struct cf_run *r, struct cf_ad *ad, uint32_t port, bool want,
                        const char *when)
{
        bool up = !want;
        CF_OK(r, r->cx->ops->link_state(ad->h, port, &up), "%s: link_state(port %u)", ad->name,
              port);
        CF_TRUE(r, up == want, "%s: link_state(port %u) %s says %s, expected %s", ad->name, port,
                when, up ? "up" : "down", want ? "up" : "down");
        return 0;
}

/* Every port of ad: up where the cluster file has a cable on the route, down where none. */
static int ports(struct cf_run *r, struct cf_ad *ad, uint32_t route_port)
{
        const struct ntbf_adapter *ta = &r->cx->t->adapters[ad->idx];
        for (uint32_t q = 0; q < ad->caps.ports && q < NTBF_MAX_ADAPTER_PORTS; q++) {
                if (q == route_port)
                        CF_TRY(expect_state(r, ad, q, true, "on the route's cable"));
                else if (ta->link[q] == NTBF_NONE)
                        CF_TRY(expect_state(r, ad, q, false, "with no cable"));
        }
        return 0;
}

int cf_check_link_state(struct cf_run *r)
{
        struct cf_pair *p = r->p;
        CF_TRY(ports(r, p->a, p->a_port));
        CF_TRY(ports(r, p->b, p->b_port));
        return 0;
}

/* The link_event for port went to ad, saying up. */
static int saw_link(struct cf_run *r, struct cf_ad *ad, uint32_t port, bool up)
{
        CF_TRY(cf_wait_ev(r, ad, &ad->ev.links, 1, up ? "link_event (up)" : "link_event (down)"));
        for (unsigned i = 0; i < ad->ev.links && i < CF_EV_LOG; i++)
                if (ad->ev.link[i].port == port && ad->ev.link[i].up == up)
                        return 0;
        CF_FAIL(r, "%s: link_event(port %u, %s) expected, got link_event(port %u, %s)", ad->name,
                port, up ? "up" : "down", ad->ev.link[0].port, ad->ev.link[0].up ? "up" : "down");
}

int cf_check_link_cycle(struct cf_run *r)
{
        struct cf_ctx *cx = r->cx;
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        const struct ntbf_backend_ops *o = cx->ops;
        CF_TRY(cf_need_cap(r, NTBF_CAP_LINK_CTRL, a, NULL));
        struct cf_target tg;
        CF_TRY(cf_target(r, p, cf_slot(p->a, 0), 1, &tg));
        struct cf_win w;
        CF_TRY(cf_win_open(r, p, cf_slot(p->a, 0), 1, &w));
        int st;
        uint64_t v;
        CF_TRY(cf_win_write(r, &w, w.base, cf_pattern(60, 0), &st));
        CF_OK(r, st, "write through the %s with the link up", cf_win_how(&w));
        CF_EQ(r, cf_load64(tg.mem.addr), cf_pattern(60, 0), "far side with the link up");
        CF_TRY(cf_drain(r, a));
        CF_TRY(cf_drain(r, b));

        cf_undo_link(r, a, p->a_port);
        CF_OK(r, o->link_disable(a->h, p->a_port), "%s: link_disable(port %u)", a->name, p->a_port);
        CF_TRY(saw_link(r, a, p->a_port, false));
        CF_TRY(expect_state(r, a, p->a_port, false, "after link_disable"));
        if (!p->via_switch) {
                CF_TRY(saw_link(r, b, p->b_port, false));
                CF_TRY(expect_state(r, b, p->b_port, false, "after the far end's link_disable"));
        } else {
                /* B's own cable to the switch is still up. */
                CF_TRY(
                    expect_state(r, b, p->b_port, true, "while A's cable to the switch is down"));
        }

        CF_TRY(cf_win_expect_dropped(r, &w, w.base, "the window with the link down"));
        if (cf_drops(r)) {
                CF_TRY(cf_win_write(r, &w, w.base, cf_pattern(60, 1), &st));
                CF_EQ(r, cf_load64(tg.mem.addr), cf_pattern(60, 0),
                      "far side after a write with the link down (it must be lost)");
        }
        const char *why = NULL;
        if (cf_tx_mode(cx, a, &why) != CF_TX_NONE) {
                struct ntbf_counters a0, a1;
                CF_TRY(cf_counters(r, a, &a0));
                uint64_t x = cf_pattern(60, 2);
                CF_TRY(cf_tx(r, a, 0, true, cf_slot_addr(a, cf_slot(a, 0)), &x, 8, &st));
                CF_TRUE(r, st != 0, "a counted write with the link down succeeded");
                if (cx->sim && !cx->dma_only)
                        CF_RC(r, NTBF_ELINKDOWN, st, "status of a write with the link down");
                CF_TRY(cf_counters(r, a, &a1));
                const struct ntbf_counters want = {.drop_link_down = 1};
                CF_TRY(cf_counters_delta(r, a, "one write with the link down", &a0, &a1, &want));
        }
        if ((a->caps.flags & NTBF_CAP_DOORBELL) && (b->caps.flags & NTBF_CAP_DOORBELL))
                CF_RC(r, -ENOTCONN,
                      o->peer_db_set(a->h, b->idx, b->caps.db_valid_mask & -b->caps.db_valid_mask),
                      "%s: peer_db_set(%s) with the link down", a->name, b->name);
        if ((a->caps.flags & NTBF_CAP_SCRATCHPAD) && b->caps.scratchpads)
                CF_RC(r, -ENOTCONN, o->peer_spad_write(a->h, b->idx, 0, 1),
                      "%s: peer_spad_write(%s, 0) with the link down", a->name, b->name);

        cf_ev_reset(a);
        cf_ev_reset(b);
        CF_OK(r, o->link_enable(a->h, p->a_port), "%s: link_enable(port %u)", a->name, p->a_port);
        CF_TRY(saw_link(r, a, p->a_port, true));
        CF_TRY(expect_state(r, a, p->a_port, true, "after link_enable"));
        if (!p->via_switch) {
                CF_TRY(saw_link(r, b, p->b_port, true));
                CF_TRY(expect_state(r, b, p->b_port, true, "after the far end's link_enable"));
        }
        CF_TRY(cf_win_write(r, &w, w.base, cf_pattern(60, 3), &st));
        CF_OK(r, st, "write through the %s after link_enable", cf_win_how(&w));
        CF_EQ(r, cf_load64(tg.mem.addr), cf_pattern(60, 3), "far side after link_enable");
        CF_TRY(cf_win_read(r, &w, w.base, &v, &st));
        CF_OK(r, st, "read through the %s after link_enable", cf_win_how(&w));
        CF_EQ(r, v, cf_pattern(60, 3), "read back through the %s after link_enable",
              cf_win_how(&w));
        if (why)
                snprintf(r->reason, sizeof(r->reason), "drop_link_down not checked: %s", why);
        return 0;
}
