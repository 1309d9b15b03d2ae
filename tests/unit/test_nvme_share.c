/* tests/unit/test_nvme_share.c: the NVMe manager/client protocol: joins, pairs, admin, leases. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ntbf_nvme_share.h"
#include "nvme_fx.h"

#define PG  4096u
#define CAP (UINT64_C(64) << 20)

/* One controller, its manager, and clients in this thread: each client's wait runs the
 * manager's step and polls the controller, as the other processes would meanwhile. */
struct rig {
        struct nfx x;
        struct ntbf_nvms_manager m;
        void *mbox;
        size_t size;
        uint64_t mnow; /* the manager's clock */
        bool manager_off;
        bool clobber;             /* once: another client's request overwrites the first answer */
        uint32_t served;          /* the slot of the clobbered answer */
        struct ntbf_nvme_wait cw; /* clients' waits */
        char log[64][200];
        unsigned nlog;
};

static void mgr_log(void *arg, const char *msg)
{
        struct rig *g = arg;
        if (g->nlog < 64)
                snprintf(g->log[g->nlog++], sizeof(g->log[0]), "%s", msg);
}

/* A client's look: the controller moves, and so does the manager (whose own admin waits
 * only poll the controller). */
static void step(void *arg)
{
        struct rig *g = arg;
        nfx_idle(&g->x);
        if (g->manager_off)
                return;
        g->mnow += 100000; /* 100 us per look */
        ntbf_nvms_manager_step(&g->m, g->mnow);
        struct ntbf_nvms_lobby *l = (struct ntbf_nvms_lobby *)((uint8_t *)g->mbox + PG);
        for (unsigned e = 0; g->clobber && e < NTBF_NVMS_LOBBY; e++)
                if (l[e].rsp_gen) {
                        /* What the manager's answer to another client leaves there. */
                        l[e].nonce = l[e].echo = 0x0ddba11;
                        l[e].gen = l[e].rsp_gen = l[e].rsp_gen + 1;
                        g->served = l[e].slot;
                        g->clobber = false;
                }
}

static void rig_up(struct rig *g, uint32_t queues, uint32_t lease_ms, uint32_t max_per_client)
{
        memset(g, 0, sizeof(*g));
        nfx_up(&g->x, queues, CAP);
        nfx_reset(&g->x);
        g->size = ntbf_nvms_mbox_bytes(g->x.c.io_queues);
        g->mbox = aligned_alloc(PG, g->size);
        assert_non_null(g->mbox);
        g->mnow = 1000000000;
        assert_int_equal(ntbf_nvms_manager_init(&g->m, &g->x.c, g->mbox, g->size, 0x4000, lease_ms,
                                                max_per_client),
                         0);
        g->m.log = mgr_log;
        g->m.log_arg = g;
        g->cw = g->x.wait;
        g->cw.timeout_ms = 200;
        g->cw.idle = step;
        g->cw.idle_arg = g;
}

static void rig_down(struct rig *g)
{
        ntbf_nvms_manager_fini(&g->m);
        free(g->mbox);
        nfx_down(&g->x);
}

static bool logged(const struct rig *g, const char *text)
{
        for (unsigned i = 0; i < g->nlog; i++)
                if (strstr(g->log[i], text))
                        return true;
        return false;
}

static void join(struct rig *g, struct ntbf_nvms_client *cl, uint32_t node)
{
        char why[200] = "";
        int r = ntbf_nvms_client_attach(cl, g->mbox, g->size, node, 100 + node, &g->cw, why,
                                        sizeof(why));
        if (r)
                fail_msg("attach: %d %s", r, why);
}

/* A client's queue pair in the fake memory, created through the manager. */
static uint16_t client_qp(struct rig *g, struct ntbf_nvms_client *cl, struct ntbf_nvme_qp *q,
                          uint32_t entries)
{
        struct ntbf_nvme_mem sq = nfx_mem(&g->x, ntbf_nvme_sq_bytes(entries));
        struct ntbf_nvme_mem cq = nfx_mem(&g->x, ntbf_nvme_cq_bytes(entries));
        struct ntbf_nvme_mem prp = nfx_mem(&g->x, ntbf_nvme_prp_bytes(entries));
        uint16_t qid = 0;
        char why[200] = "";
        int r = ntbf_nvms_create_qp(cl, entries, entries, sq.io, cq.io, &qid, why, sizeof(why));
        if (r)
                fail_msg("create_qp: %d %s", r, why);
        assert_int_equal(ntbf_nvme_qp_init(q, g->x.dev.bar[0], cl->hdr.db_stride, qid, entries, &sq,
                                           entries, &cq, &prp),
                         0);
        return qid;
}

static void test_join_and_io(void **state)
{
        (void)state;
        static struct rig g;
        rig_up(&g, 32, 2000, 4);
        struct ntbf_nvms_client cl;
        join(&g, &cl, 8);
        /* What the manager publishes is what a client needs without asking. */
        assert_int_equal(cl.hdr.nslots, 31);
        assert_int_equal(cl.hdr.io_queues, 31);
        assert_int_equal(cl.hdr.fdid, 0x4000);
        assert_int_equal(cl.ns.nsze, CAP >> 9);
        assert_int_equal(cl.ns.lba_shift, 9);
        assert_string_equal(cl.hdr.mn, NTBF_NVME_MN);
        assert_true(ntbf_nvms_client_manager_ok(&cl));
        assert_true(logged(&g, "node 8 pid 108 joined as slot"));
        struct ntbf_nvme_qp q;
        uint16_t qid = client_qp(&g, &cl, &q, 32);
        assert_int_equal(qid, 1);
        assert_true(logged(&g, "created queue pair 1 (SQ 32 entries at 0x"));
        /* The client does I/O on its own: no manager in the way. */
        g.manager_off = true;
        struct ntbf_nvme_mem buf = nfx_mem(&g.x, 8 * PG);
        nfx_fill(buf.va, 8 * PG, 3, 0);
        assert_int_equal(
            ntbf_nvme_qp_rw_sync(&q, &g.x.wait, &cl.ns, NTBF_NVME_CMD_WRITE, 0, 64, buf.io), 0);
        memset(buf.va, 0, 8 * PG);
        assert_int_equal(
            ntbf_nvme_qp_rw_sync(&q, &g.x.wait, &cl.ns, NTBF_NVME_CMD_READ, 0, 64, buf.io), 0);
        assert_int_equal(nfx_check(buf.va, 8 * PG, 3, 0), -1);
        g.manager_off = false;
        /* Admin commands relayed: Identify into the client's memory, features. */
        char why[200] = "";
        struct ntbf_nvme_mem id = nfx_mem(&g.x, PG);
        assert_int_equal(ntbf_nvms_identify(&cl, NTBF_NVME_CNS_CTRL, 0, id.io, why, sizeof(why)),
                         0);
        struct ntbf_nvme_ident ident;
        ntbf_nvme_parse_ident(id.va, &ident);
        assert_string_equal(ident.mn, NTBF_NVME_MN);
        uint32_t dw0 = 0;
        assert_int_equal(
            ntbf_nvms_get_features(&cl, NTBF_NVME_FEAT_NUM_QUEUES, 0, 0, &dw0, why, sizeof(why)),
            0);
        assert_int_equal(dw0, 30u << 16 | 30u);
        assert_int_equal(
            ntbf_nvms_set_features(&cl, NTBF_NVME_FEAT_VOLATILE_WC, 0, 0, &dw0, why, sizeof(why)),
            0);
        assert_int_equal(
            ntbf_nvms_set_features(&cl, NTBF_NVME_FEAT_NUM_QUEUES, 0, 0, &dw0, why, sizeof(why)),
            -EPERM);
        assert_string_equal(why, "Set Features 0x07 changes the controller under every client; "
                                 "only the manager sets it");
        assert_int_equal(ntbf_nvms_get_log_page(&cl, NTBF_NVME_LOG_SMART, 0xffffffff, 512, id.io,
                                                why, sizeof(why)),
                         0);
        /* The controller's refusals come back with its status. */
        assert_int_equal(ntbf_nvms_identify(&cl, 0x7f, 0, id.io, why, sizeof(why)),
                         NTBF_NVME_SC_INVALID_FIELD);
        assert_string_equal(why, "NVMe: invalid field in command");
        /* Another client cannot delete this one's pair. */
        struct ntbf_nvms_client other;
        join(&g, &other, 12);
        assert_int_equal(ntbf_nvms_delete_qp(&other, qid, why, sizeof(why)), -ENOENT);
        assert_string_equal(why, "queue pair 1 is not this client's");
        assert_int_equal(ntbf_nvms_delete_qp(&cl, qid, why, sizeof(why)), 0);
        ntbf_nvme_qp_fini(&q);
        assert_int_equal(ntbf_nvms_client_detach(&cl), 0);
        assert_int_equal(ntbf_nvms_client_detach(&other), 0);
        assert_true(logged(&g, "left"));
        assert_int_equal(*(uint32_t *)((uint8_t *)g.mbox + offsetof(struct ntbf_nvms_hdr, clients)),
                         0);
        rig_down(&g);
}

/*
 * Thirty clients each with a pair and one with two fill the article's 32-pair drive; the
 * next pair and the next client are refused with the reason.
 */
static void test_refusals(void **state)
{
        (void)state;
        static struct rig g;
        rig_up(&g, 32, 2000, 2);
        static struct ntbf_nvms_client cl[32];
        static struct ntbf_nvme_qp q[32];
        for (unsigned i = 0; i < 30; i++) {
                join(&g, &cl[i], 8 + 4 * i);
                assert_int_equal(client_qp(&g, &cl[i], &q[i], 8), i + 1);
        }
        struct ntbf_nvme_qp extra, extra2;
        assert_int_equal(client_qp(&g, &cl[0], &extra, 8), 31);
        char why[200] = "";
        uint16_t qid;
        /* The per-client limit first, then the controller's queue count. */
        assert_int_equal(
            ntbf_nvms_create_qp(&cl[0], 8, 8, extra.sq_io, extra.cq_io, &qid, why, sizeof(why)),
            -ENOSPC);
        assert_string_equal(why, "this client already holds 2 queue pairs, the most a client may "
                                 "hold; delete one first");
        join(&g, &cl[30], 200);
        assert_int_equal(
            ntbf_nvms_create_qp(&cl[30], 8, 8, extra.sq_io, extra.cq_io, &qid, why, sizeof(why)),
            -ENOSPC);
        assert_string_equal(why, "all 31 I/O queue pairs of the controller are in use (by 30 "
                                 "clients); a pair frees when its client deletes it, leaves or its "
                                 "lease expires");
        struct ntbf_nvms_client late;
        assert_int_equal(
            ntbf_nvms_client_attach(&late, g.mbox, g.size, 204, 1, &g.cw, why, sizeof(why)),
            -ENOSPC);
        assert_string_equal(why, "all 31 client slots are taken (one per I/O queue pair); retry "
                                 "when a client leaves");
        /* The barrier of --together: the peak stays while pairs come and go. */
        assert_int_equal(ntbf_nvms_client_peak(&cl[0]), 31);
        /* One leaves: its pair and its slot go to the waiting ones. */
        assert_int_equal(ntbf_nvms_client_detach(&cl[5]), 0);
        assert_int_equal(ntbf_nvms_client_peak(&cl[0]), 31);
        ntbf_nvme_qp_fini(&q[5]);
        assert_int_equal(client_qp(&g, &cl[30], &extra2, 8), 6);
        join(&g, &late, 204);
        /* Every pair works at once: each client writes its own block and reads it back. */
        struct ntbf_nvme_mem buf = nfx_mem(&g.x, 32 * PG);
        for (unsigned i = 0; i < 30; i++) {
                if (i == 5)
                        continue;
                uint8_t *p = (uint8_t *)buf.va + i * PG;
                nfx_fill(p, PG, i, (uint64_t)i * PG);
                assert_true(ntbf_nvme_qp_rw(&q[i], &cl[i].ns, NTBF_NVME_CMD_WRITE, i * 8, 8,
                                            buf.io + i * PG, 0, NULL) >= 0);
        }
        for (int k = 0; k < 50; k++)
                nfx_idle(&g.x);
        for (unsigned i = 0; i < 30; i++) {
                if (i == 5)
                        continue;
                struct ntbf_nvme_done d;
                assert_int_equal(ntbf_nvme_qp_poll(&q[i], &d, 1), 1);
                assert_int_equal(d.status, 0);
                uint8_t *p = (uint8_t *)buf.va + i * PG;
                memset(p, 0, PG);
                assert_int_equal(ntbf_nvme_qp_rw_sync(&q[i], &g.x.wait, &cl[i].ns,
                                                      NTBF_NVME_CMD_READ, i * 8, 8,
                                                      buf.io + i * PG),
                                 0);
                assert_int_equal(nfx_check(p, PG, i, (uint64_t)i * PG), -1);
        }
        for (unsigned i = 0; i < 32; i++)
                ntbf_nvme_qp_fini(&q[i]);
        ntbf_nvme_qp_fini(&extra);
        ntbf_nvme_qp_fini(&extra2);
        rig_down(&g);
}

/* A client that stops beating loses its pairs and slot after the lease; one that beats keeps. */
static void test_lease(void **state)
{
        (void)state;
        static struct rig g;
        rig_up(&g, 4, 1000, 4);
        struct ntbf_nvms_client a, b;
        struct ntbf_nvme_qp qa, qb;
        join(&g, &a, 8);
        join(&g, &b, 12);
        assert_int_equal(client_qp(&g, &a, &qa, 8), 1);
        assert_int_equal(client_qp(&g, &b, &qb, 8), 2);
        /* 0.9 s with both beating, then 1.2 s with only b: a's pair goes. */
        for (int i = 0; i < 9; i++) {
                ntbf_nvms_client_beat(&a);
                ntbf_nvms_client_beat(&b);
                g.mnow += 100000000;
                ntbf_nvms_manager_step(&g.m, g.mnow);
        }
        assert_int_equal(g.m.expired, 0);
        for (int i = 0; i < 12; i++) {
                ntbf_nvms_client_beat(&b);
                g.mnow += 100000000;
                ntbf_nvms_manager_step(&g.m, g.mnow);
        }
        assert_int_equal(g.m.expired, 1);
        assert_true(logged(&g, "node 8 pid 108): lease expired (no heartbeat for 1"));
        assert_true(logged(&g, "deleted queue pair 1"));
        /* The controller no longer has a's SQ: a write through it never completes. */
        struct ntbf_nvme_mem buf = nfx_mem(&g.x, PG);
        struct ntbf_nvme_wait w = g.x.wait;
        w.timeout_ms = 20;
        assert_int_equal(ntbf_nvme_qp_rw_sync(&qa, &w, &a.ns, NTBF_NVME_CMD_WRITE, 0, 1, buf.io),
                         -ETIMEDOUT);
        /* b goes on; a newcomer gets pair 1 again. */
        assert_int_equal(
            ntbf_nvme_qp_rw_sync(&qb, &g.x.wait, &b.ns, NTBF_NVME_CMD_WRITE, 0, 1, buf.io), 0);
        struct ntbf_nvms_client c;
        struct ntbf_nvme_qp qc;
        join(&g, &c, 16);
        assert_int_equal(client_qp(&g, &c, &qc, 8), 1);
        /* a comes back (a stopped process): its slot is c's now. a is told so; its heartbeats
         * and a request written anyway do not count for c. */
        char why[200];
        assert_int_equal(c.slot, a.slot);
        assert_int_equal(ntbf_nvms_identify(&a, 1, 0, buf.io, why, sizeof(why)), -ENOTCONN);
        assert_string_equal(why, "this client's slot was taken back (its lease expired): its "
                                 "queue pairs were deleted; join again");
        uint64_t req0 = g.m.requests;
        volatile struct ntbf_nvms_slot *sl =
            (struct ntbf_nvms_slot *)((uint8_t *)g.mbox + ntbf_nvms_mbox_bytes(0)) + a.slot;
        sl->op = NTBF_NVMS_OP_DELETE_QP;
        sl->a[0] = 1;
        sl->nonce = a.nonce;
        sl->seq = 99;
        for (int i = 0; i < 15; i++) {
                ntbf_nvms_client_beat(&a); /* only a beats: c's lease runs out all the same */
                g.mnow += 100000000;
                ntbf_nvms_manager_step(&g.m, g.mnow);
        }
        assert_int_equal(g.m.requests, req0);
        assert_int_equal(g.m.expired, 3); /* b stopped beating too */
        assert_true(logged(&g, "node 16 pid 116): lease expired"));
        ntbf_nvme_qp_fini(&qa);
        ntbf_nvme_qp_fini(&qb);
        ntbf_nvme_qp_fini(&qc);
        rig_down(&g);
}

/* The lobby: torn entries are ignored, a wrong mailbox is named, a restarted manager too. */
static void test_lobby_and_mailbox(void **state)
{
        (void)state;
        static struct rig g;
        rig_up(&g, 4, 1000, 4);
        uint8_t *b = g.mbox;
        struct ntbf_nvms_lobby *e = (struct ntbf_nvms_lobby *)(b + PG) + 5;
        /* A torn entry (its checksum fails) is not served. */
        e->nonce = 42;
        e->node = 8;
        e->pid = 1;
        e->chk = 1234;
        e->gen = 77;
        ntbf_nvms_manager_step(&g.m, g.mnow += 1000);
        assert_int_equal(e->rsp_gen, 0);
        assert_int_equal(g.m.joins, 0);
        /* Joining works next to it. */
        struct ntbf_nvms_client cl;
        join(&g, &cl, 8);
        assert_int_equal(g.m.joins, 1);
        /* Not a mailbox, nothing behind the mapping, the wrong version. */
        char why[200];
        static uint8_t junk[64 * 1024];
        struct ntbf_nvms_client x;
        assert_int_equal(
            ntbf_nvms_client_attach(&x, junk, sizeof(junk), 8, 1, &g.cw, why, sizeof(why)),
            -EPROTO);
        assert_string_equal(why, "the segment is not an NVMe manager's mailbox of version 1 "
                                 "(magic 0x00000000, version 0)");
        memset(junk, 0xff, sizeof(junk));
        assert_int_equal(
            ntbf_nvms_client_attach(&x, junk, sizeof(junk), 8, 1, &g.cw, why, sizeof(why)),
            -ENOTCONN);
        /* A manager that does not answer. */
        g.manager_off = true;
        struct ntbf_nvme_wait w = g.cw;
        w.timeout_ms = 10;
        assert_int_equal(ntbf_nvms_client_attach(&x, g.mbox, g.size, 8, 1, &w, why, sizeof(why)),
                         -ETIMEDOUT);
        assert_non_null(strstr(why, "did not answer"));
        g.manager_off = false;
        /* The manager restarts (new epoch): the client is told its pairs are gone. */
        ntbf_nvms_manager_fini(&g.m);
        assert_int_equal(ntbf_nvms_identify(&cl, 1, 0, 0, why, sizeof(why)), -ENOTCONN);
        assert_int_equal(ntbf_nvms_client_attach(&x, g.mbox, g.size, 8, 1, &w, why, sizeof(why)),
                         -EAGAIN);
        assert_string_equal(why, "the manager is stopped");
        nfx_reset(&g.x);
        assert_int_equal(ntbf_nvms_manager_init(&g.m, &g.x.c, g.mbox, g.size, 0x4000, 1000, 4), 0);
        assert_false(ntbf_nvms_client_manager_ok(&cl));
        assert_int_equal(ntbf_nvms_identify(&cl, 1, 0, 0, why, sizeof(why)), -ENOTCONN);
        assert_non_null(strstr(why, "gone or restarted"));
        join(&g, &cl, 8);
        rig_down(&g);
}

/*
 * Two clients write the same lobby entry: the first one's answer is overwritten before it
 * reads it. It asks again elsewhere with the same nonce and gets the slot it was given: no
 * second slot, no slot held by nobody until its lease runs out.
 */
static void test_lost_answer(void **state)
{
        (void)state;
        static struct rig g;
        rig_up(&g, 4, 3600000, 4); /* the manager's clock runs fast here: no lease runs out */
        g.cw.timeout_ms = 40;      /* each try waits half of it */
        g.clobber = true;
        struct ntbf_nvms_client cl;
        join(&g, &cl, 8);
        assert_false(g.clobber);
        assert_int_equal(cl.slot, g.served);
        assert_int_equal(g.m.joins, 1);
        assert_true(logged(&g, "node 8 pid 108 asked again: still slot"));
        uint32_t clients, pairs;
        ntbf_nvms_client_counts(&cl, &clients, &pairs);
        assert_int_equal(clients, 1);
        /* And the slot works. */
        struct ntbf_nvme_qp q;
        assert_true(client_qp(&g, &cl, &q, 16) > 0);
        ntbf_nvme_qp_fini(&q);
        rig_down(&g);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_join_and_io), cmocka_unit_test(test_refusals),
            cmocka_unit_test(test_lease),       cmocka_unit_test(test_lobby_and_mailbox),
            cmocka_unit_test(test_lost_answer),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
