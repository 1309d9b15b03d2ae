/* tests/unit/test_daemon_fm.c: the fabric manager's registry, admission, rollback and leases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "entry.h"
#include "fm.h"
#include "log.h"
#include "ntbfab/config.h"
#include "ntbfab/error.h"
#include "state.h"
#include "vfio.h"

/* ---- a fake network and clock -------------------------------------------------------------- */

#define MAX_REQ 64

struct req {
        uint32_t node;
        char m[16];
        struct json_object *p;
        ntbf__done_fn cb;
        void *arg;
};

struct fx {
        struct ntbf_topo *t;
        struct ntbf__store *st;
        struct ntbf__fm *fm;
        uint32_t self;
        uint64_t now;
        bool up[16];
        bool autoanswer; /* answer programming requests at once */
        uint64_t step;   /* the clock moves this much at every reading (slow work) */
        bool use_heard;  /* the daemon read its sockets up to `heard`, not up to now */
        uint64_t heard;
        void (*deferred)(void *); /* the manager's queue, waiting for the next turn */
        void *deferred_arg;
        int fail_node;         /* this node's "program" fails (-1: none) */
        struct req q[MAX_REQ]; /* requests held when not auto-answering */
        int nq;
        /* What happened, for assertions. */
        int programs[16], unprograms[16];
        struct ntbf__entset programmed; /* the fabric's hardware, as the nodes would hold it */
        struct json_object *notes[32];
        uint32_t note_node[32];
        int nnotes;
        char dbpath[64];
};

static void apply(struct fx *f, const char *m, struct json_object *p)
{
        struct json_object *e;
        assert_true(json_object_object_get_ex(p, "entries", &e));
        for (size_t i = 0; i < json_object_array_length(e); i++) {
                const char *k = json_object_get_string(json_object_array_get_idx(e, i));
                struct ntbf__ent ent;
                assert_int_equal(ntbf__ent_parse(f->t, k, &ent), 0);
                if (!strcmp(m, "program")) {
                        ntbf__entset_add(&f->programmed, k);
                        ntbf__entset_sort(&f->programmed);
                } else {
                        struct ntbf__entset one = {0}, rest = {0};
                        ntbf__entset_add(&one, k);
                        ntbf__entset_diff(&f->programmed, &one, &rest);
                        ntbf__entset_free(&one);
                        ntbf__entset_free(&f->programmed);
                        f->programmed = rest;
                }
        }
}

static void net_request(void *ctx, uint32_t node, const char *m, struct json_object *p,
                        ntbf__done_fn cb, void *arg)
{
        struct fx *f = ctx;
        if (!strcmp(m, "program"))
                f->programs[node]++;
        else
                f->unprograms[node]++;
        if (f->autoanswer) {
                if (!strcmp(m, "program") && (int)node == f->fail_node) {
                        json_object_put(p);
                        cb(arg, -ENOSPC, "lender1.ntb0: hardware table full", NULL);
                        return;
                }
                apply(f, m, p);
                json_object_put(p);
                cb(arg, 0, NULL, json_object_new_object());
                return;
        }
        assert_true(f->nq < MAX_REQ);
        f->q[f->nq++] = (struct req){node, "", p, cb, arg};
        snprintf(f->q[f->nq - 1].m, 16, "%s", m);
}

static void net_notify(void *ctx, uint32_t node, const char *m, struct json_object *p)
{
        struct fx *f = ctx;
        if (f->nnotes == 32) { /* keep the first ones */
                json_object_put(p);
                return;
        }
        json_object_object_add(p, "_m", json_object_new_string(m));
        f->note_node[f->nnotes] = node;
        f->notes[f->nnotes++] = p;
}

static uint64_t net_now(void *ctx)
{
        struct fx *f = ctx;
        f->now += f->step;
        return f->now;
}

static uint64_t net_heard(void *ctx)
{
        struct fx *f = ctx;
        return f->use_heard ? f->heard : f->now;
}

static void net_defer(void *ctx, void (*fn)(void *), void *arg)
{
        struct fx *f = ctx;
        assert_null(f->deferred); /* one queue, deferred once */
        f->deferred = fn;
        f->deferred_arg = arg;
}

/* The next turn of the loop: the deferred queue goes on. */
static bool next_turn(struct fx *f)
{
        void (*fn)(void *) = f->deferred;
        if (!fn)
                return false;
        f->deferred = NULL;
        fn(f->deferred_arg);
        return true;
}

static bool net_connected(void *ctx, uint32_t node)
{
        return ((struct fx *)ctx)->up[node];
}

/* Answer the held requests in order (0 = success). */
static void answer_all(struct fx *f, int err)
{
        while (f->nq) {
                struct req r = f->q[0];
                memmove(f->q, f->q + 1, --f->nq * sizeof(r));
                if (!err)
                        apply(f, r.m, r.p);
                json_object_put(r.p);
                r.cb(r.arg, err, err ? "failed" : NULL, err ? NULL : json_object_new_object());
        }
}

/* ---- an answer to the test --------------------------------------------------------------- */

struct ans {
        bool done;
        int err;
        char msg[1024];
        struct json_object *res;
};

static void got(void *arg, int err, const char *msg, struct json_object *res)
{
        struct ans *a = arg;
        a->done = true;
        a->err = err;
        snprintf(a->msg, sizeof(a->msg), "%s", msg ? msg : "");
        a->res = res;
}

static struct ans call(struct fx *f, uint32_t from, const char *m, const char *params)
{
        struct ans a = {0};
        struct json_object *p = json_tokener_parse(params);
        assert_non_null(p);
        ntbf__fm_request(f->fm, from, m, p, got, &a);
        json_object_put(p);
        assert_true(a.done);
        return a;
}

static void ok(struct ans a)
{
        if (a.err)
                fail_msg("error %d: %s", a.err, a.msg);
        json_object_put(a.res);
}

static void refused(struct ans a, int err, const char *text)
{
        if (a.err != err || !strstr(a.msg, text))
                fail_msg("got %d '%s', wanted %d '%s'", a.err, a.msg, err, text);
        assert_null(a.res);
}

static uint32_t node(struct fx *f, const char *name)
{
        uint32_t n = ntbf_topo_find_node(f->t, name);
        assert_int_not_equal(n, NTBF_NONE);
        return n;
}

static uint32_t fdid(struct fx *f, const char *nodename, const char *dev)
{
        uint32_t n = node(f, nodename), d = ntbf_topo_find_device(f->t, n, dev);
        assert_int_not_equal(d, NTBF_NONE);
        return ntbf__fdid_of(f->t, d, 0);
}

static const struct ntbf__fm_net netops = {NULL,          net_request, net_notify, net_now,
                                           net_connected, net_heard,   net_defer};

static void fm_start(struct fx *f)
{
        struct ntbf__fm_net n = netops;
        n.ctx = f;
        char why[256];
        int r = ntbf__fm_new(f->t, f->self, f->st, &n, &f->fm, why, sizeof(why));
        if (r)
                fail_msg("%s", why);
}

static struct fx *fx_new(const char *yaml_path, const char *yaml_text, const char *manager)
{
        struct fx *f = calloc(1, sizeof(*f));
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        int r = yaml_text ? ntbf_config_load_mem("t.yaml", yaml_text, strlen(yaml_text), &f->t, &d)
                          : ntbf_config_load(yaml_path, &f->t, &d);
        if (r) {
                ntbf_diags_print(&d, stderr);
                fail();
        }
        ntbf_diags_free(&d);
        snprintf(f->dbpath, sizeof(f->dbpath), "/tmp/ntbfab-fmtest-XXXXXX");
        int fd = mkstemp(f->dbpath);
        close(fd);
        unlink(f->dbpath);
        char why[256];
        assert_int_equal(ntbf__store_open(f->dbpath, &f->st, why, sizeof(why)), 0);
        f->self = node(f, manager);
        for (int i = 0; i < 16; i++)
                f->up[i] = true;
        f->autoanswer = true;
        f->fail_node = -1;
        f->now = 1000000;
        fm_start(f);
        return f;
}

static void fx_free(struct fx *f)
{
        ntbf__fm_free(f->fm);
        ntbf__store_close(f->st);
        ntbf__store_remove(f->dbpath);
        ntbf__entset_free(&f->programmed);
        for (int i = 0; i < f->nnotes; i++)
                json_object_put(f->notes[i]);
        ntbf_topo_free(f->t);
        free(f);
}

static void register_all(struct fx *f)
{
        for (uint32_t n = 0; n < f->t->nnodes; n++) {
                char p[512] = "{\"lends\":[";
                size_t o = strlen(p);
                bool first = true;
                for (uint32_t i = 0; i < f->t->nodes[n].ndevices; i++) {
                        uint32_t dv = f->t->nodes[n].devices[i];
                        if (!f->t->devices[dv].lend)
                                continue;
                        o += (size_t)snprintf(p + o, sizeof(p) - o, "%s{\"fdid\":%u}",
                                              first ? "" : ",", ntbf__fdid_of(f->t, dv, 0));
                        first = false;
                }
                snprintf(p + o, sizeof(p) - o, "]}");
                ok(call(f, n, "register", p));
        }
}

/* The state equals a fresh one (the baseline): every budget is back. */
static void assert_baseline(struct fx *f)
{
        struct ntbf_state *fresh;
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        assert_int_equal(ntbf_state_new(f->t, &fresh, &d), 0);
        ntbf_diags_free(&d);
        char why[512];
        if (ntbf__state_equal(ntbf__fm_state(f->fm), fresh, why, sizeof(why)))
                fail_msg("not back to the baseline: %s", why);
        ntbf_state_free(fresh);
        /* And the hardware holds exactly the baseline's entries. */
        struct ntbf__entset want = {0};
        assert_int_equal(ntbf__ents_of_state(ntbf__fm_state(f->fm), &want), 0);
        struct ntbf__entset extra = {0};
        ntbf__entset_diff(&f->programmed, &want, &extra);
        if (extra.n)
                fail_msg("%zu entries left programmed, e.g. %s", extra.n, extra.v[0]);
        ntbf__entset_free(&extra);
        ntbf__entset_free(&want);
}

static const char *json_str_of(struct json_object *o, const char *k)
{
        struct json_object *v;
        assert_true(json_object_object_get_ex(o, k, &v));
        return json_object_get_string(v);
}

static const char *state_of(struct fx *f, uint32_t id)
{
        static char buf[32];
        struct ans a = call(f, f->self, "list", "{}");
        assert_int_equal(a.err, 0);
        buf[0] = 0;
        for (size_t i = 0; i < json_object_array_length(a.res); i++) {
                struct json_object *d = json_object_array_get_idx(a.res, i), *v;
                json_object_object_get_ex(d, "fdid", &v);
                if ((uint32_t)json_object_get_int64(v) == id)
                        snprintf(buf, sizeof(buf), "%s", json_str_of(d, "state"));
        }
        json_object_put(a.res);
        return buf;
}

/* ---- tests --------------------------------------------------------------------------------- */

#define THREE "config/examples/three-lenders.yaml"

static void test_registry_and_conflicts(void **state)
{
        (void)state;
        struct fx *f = fx_new(THREE, NULL, "lender3");
        register_all(f);
        uint32_t acc1 = fdid(f, "lender1", "acc1"), acc2 = fdid(f, "lender2", "acc2");
        uint32_t b = node(f, "borrower"), l1 = node(f, "lender1"), l3 = node(f, "lender3");
        assert_int_equal(acc1, 0x8000);
        assert_string_equal(state_of(f, acc1), "available");
        char p[128];
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"mode\":\"exclusive\"}", acc1);
        struct ans a = call(f, b, "borrow", p);
        assert_int_equal(a.err, 0);
        assert_string_equal(json_str_of(a.res, "lender"), "lender1");
        assert_string_equal(json_str_of(a.res, "mode"), "exclusive");
        json_object_put(a.res);
        assert_true(f->programs[b] == 1 && f->programs[l1] == 1);
        assert_string_equal(state_of(f, acc1), "exclusive");
        /* Exclusive conflicts with everything; shared with exclusive. */
        refused(call(f, l3, "borrow", p), NTBF_EBUSY,
                "lender1.acc1 (0x8000) is borrowed exclusively by 'borrower'");
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"mode\":\"shared\"}", acc1);
        refused(call(f, l3, "borrow", p), NTBF_EBUSY, "borrowed exclusively");
        refused(call(f, b, "borrow", p), NTBF_EEXISTS, "already borrowed by 'borrower'");
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"mode\":\"shared\"}", acc2);
        ok(call(f, b, "borrow", p));
        ok(call(f, l1, "borrow", p));
        assert_string_equal(state_of(f, acc2), "shared");
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc2);
        refused(call(f, l3, "borrow", p), NTBF_EBUSY, "is shared with 'borrower'");
        /* A lender cannot borrow its own device; unknown fdids are named. */
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc1);
        refused(call(f, l1, "borrow", p), -EINVAL, "is a device of 'lender1' itself");
        refused(call(f, b, "borrow", "{\"fdid\":1234}"), NTBF_ENOTFOUND, "no lent device");
        /* Unavailable: current borrows go on, new ones are refused. */
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"available\":false}", acc2);
        ok(call(f, node(f, "lender2"), "avail", p));
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"mode\":\"shared\"}", acc2);
        refused(call(f, l3, "borrow", p), NTBF_EBUSY, "is unavailable");
        /* Unlend is refused while borrowed, unless forced: borrowers are told. */
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc1);
        refused(call(f, l1, "unlend", p), NTBF_EBUSY, "is borrowed by 'borrower'");
        /* Returns, in any order, give everything back. */
        ok(call(f, b, "return", p));
        refused(call(f, b, "return", p), NTBF_ENOTFOUND, "not borrowed by 'borrower'");
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc2);
        ok(call(f, l1, "return", p));
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"force\":true}", acc2);
        ok(call(f, node(f, "lender2"), "unlend", p));
        bool told = false;
        for (int i = 0; i < f->nnotes; i++)
                told |= f->note_node[i] == b && !strcmp(json_str_of(f->notes[i], "_m"), "lost");
        assert_true(told);
        assert_baseline(f);
        fx_free(f);
}

/* A node failing to program: everything done is undone, the error is the node's. */
/* One borrow path for the device API and the kernel frontend: a device borrowed one way
 * refuses the other way, naming who holds it and how (docs/kernel.md). */
static void test_frontends(void **state)
{
        (void)state;
        struct fx *f = fx_new(THREE, NULL, "lender3");
        register_all(f);
        uint32_t acc1 = fdid(f, "lender1", "acc1"), b = node(f, "borrower"),
                 l3 = node(f, "lender3");
        char p[128];
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"mode\":\"shared\",\"attach\":true}", acc1);
        refused(call(f, b, "borrow", p), -EINVAL, "--attach borrows exclusively");
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"attach\":true}", acc1);
        struct ans a = call(f, b, "borrow", p);
        assert_int_equal(a.err, 0);
        assert_string_equal(json_str_of(a.res, "frontend"), "kernel");
        json_object_put(a.res);
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc1);
        refused(call(f, b, "borrow", p), NTBF_EEXISTS,
                "lender1.acc1 (0x8000) is already borrowed by 'borrower' (attached to its kernel: "
                "a shadow device or a VM's mdev instance); return it first (ntbfab return) to "
                "borrow it the other way");
        refused(call(f, l3, "borrow", p), NTBF_EBUSY,
                "is borrowed exclusively by 'borrower' (attached to its kernel: a shadow "
                "device or a VM's mdev instance); it must be returned there first (ntbfab return "
                "0x8000 --node borrower)");
        /* The record survives the manager's restart. */
        ntbf__fm_free(f->fm);
        fm_start(f);
        refused(call(f, l3, "borrow", p), NTBF_EBUSY, "(attached to its kernel: a shadow");
        ok(call(f, b, "return", p));
        /* And the other way round. */
        a = call(f, b, "borrow", p);
        assert_int_equal(a.err, 0);
        assert_string_equal(json_str_of(a.res, "frontend"), "api");
        json_object_put(a.res);
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"attach\":true}", acc1);
        refused(call(f, b, "borrow", p), NTBF_EEXISTS,
                "already borrowed by 'borrower' (through the device API); return it first");
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc1);
        ok(call(f, b, "return", p));
        fx_free(f);
}

static void test_rollback(void **state)
{
        (void)state;
        struct fx *f = fx_new(THREE, NULL, "lender3");
        register_all(f);
        uint32_t acc1 = fdid(f, "lender1", "acc1"), b = node(f, "borrower");
        f->fail_node = (int)node(f, "lender1");
        char p[64];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc1);
        refused(call(f, b, "borrow", p), -ENOSPC, "hardware table full");
        assert_true(f->unprograms[b] >= 1);
        assert_baseline(f);
        assert_string_equal(state_of(f, acc1), "available");
        /* An unreachable programmer: refused before anything is sent. */
        f->fail_node = -1;
        f->up[node(f, "lender1")] = false;
        refused(call(f, b, "borrow", p), NTBF_EUNREACHABLE, "lender 'lender1'");
        f->up[node(f, "lender1")] = true;
        /* Held answers: a second mutation waits for the first. */
        f->autoanswer = false;
        struct ans a1 = {0}, a2 = {0};
        struct json_object *jp = json_tokener_parse(p);
        ntbf__fm_request(f->fm, b, "borrow", jp, got, &a1);
        ntbf__fm_request(f->fm, b, "return", jp, got, &a2);
        json_object_put(jp);
        assert_false(a1.done);
        assert_int_equal(ntbf__fm_busy(f->fm), 2);
        answer_all(f, 0);
        assert_true(a1.done && a2.done);
        assert_int_equal(a1.err, 0);
        assert_int_equal(a2.err, 0);
        json_object_put(a1.res);
        json_object_put(a2.res);
        answer_all(f, 0);
        assert_baseline(f);
        fx_free(f);
}

/* A manager that stops while a borrow is being programmed tells its caller, frees the borrow
 * being made once, and its restart drops it (recorded as "programming"). */
static void test_stop_mid_round(void **state)
{
        (void)state;
        struct fx *f = fx_new(THREE, NULL, "lender3");
        register_all(f);
        uint32_t acc1 = fdid(f, "lender1", "acc1"), b = node(f, "borrower");
        char p[64];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc1);
        f->autoanswer = false;
        struct ans a = {0};
        struct json_object *jp = json_tokener_parse(p);
        ntbf__fm_request(f->fm, b, "borrow", jp, got, &a);
        json_object_put(jp);
        assert_false(a.done);
        assert_true(f->nq > 0);
        ntbf__fm_free(f->fm);
        assert_true(a.done);
        assert_int_equal(a.err, -ECANCELED);
        while (f->nq) /* the requests of a stopped manager are never answered */
                json_object_put(f->q[--f->nq].p);
        f->autoanswer = true;
        fm_start(f);
        assert_string_equal(state_of(f, acc1), "available");
        ok(call(f, b, "borrow", p));
        ok(call(f, b, "return", p));
        fx_free(f);
}

/* Leases: a silent borrower's borrows come back; a silent lender's devices are lost. */
static void test_leases(void **state)
{
        (void)state;
        struct fx *f = fx_new(THREE, NULL, "lender3");
        register_all(f);
        uint32_t acc1 = fdid(f, "lender1", "acc1"), acc2 = fdid(f, "lender2", "acc2");
        uint32_t b = node(f, "borrower"), l1 = node(f, "lender1"), l2 = node(f, "lender2");
        char p[64];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc1);
        ok(call(f, b, "borrow", p));
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc2);
        ok(call(f, b, "borrow", p));
        uint32_t lease = f->t->opts.lease_ms;
        /* Heartbeats keep it alive. */
        for (int i = 0; i < 30; i++) {
                f->now += lease / 4;
                for (uint32_t n = 0; n < f->t->nnodes; n++)
                        ntbf__fm_seen(f->fm, n, NULL);
                ntbf__fm_tick(f->fm);
        }
        assert_string_equal(state_of(f, acc1), "exclusive");
        /* The borrower goes silent: after the lease (not before) everything comes back. */
        f->up[b] = false;
        f->now += lease - 1;
        for (uint32_t n = 0; n < f->t->nnodes; n++)
                if (n != b)
                        ntbf__fm_seen(f->fm, n, NULL);
        ntbf__fm_tick(f->fm);
        assert_string_equal(state_of(f, acc1), "exclusive");
        f->now += 2;
        ntbf__fm_tick(f->fm);
        assert_int_equal(ntbf__fm_busy(f->fm), 0);
        assert_string_equal(state_of(f, acc1), "available");
        assert_string_equal(state_of(f, acc2), "available");
        assert_true(f->unprograms[l1] >= 1 && f->unprograms[l2] >= 1);
        /* The dead borrower's own entries stay until it reconciles: all of them its own. */
        struct ntbf__entset want = {0}, extra = {0};
        ntbf__ents_of_state(ntbf__fm_state(f->fm), &want);
        ntbf__entset_diff(&f->programmed, &want, &extra);
        for (size_t i = 0; i < extra.n; i++) {
                struct ntbf__ent e;
                assert_int_equal(ntbf__ent_parse(f->t, extra.v[i], &e), 0);
                assert_int_equal(e.prog, b);
        }
        /* It comes back: sync tells it to keep only its baseline entries. */
        f->up[b] = true;
        ntbf__fm_seen(f->fm, b, NULL);
        struct ans s = call(f, b, "sync", "{}");
        assert_int_equal(s.err, 0);
        struct json_object *borrows, *entries;
        json_object_object_get_ex(s.res, "borrows", &borrows);
        json_object_object_get_ex(s.res, "entries", &entries);
        assert_int_equal(json_object_array_length(borrows), 0);
        for (size_t i = 0; i < json_object_array_length(entries); i++)
                assert_non_null(
                    strstr(json_object_get_string(json_object_array_get_idx(entries, i)), "swrid"));
        json_object_put(s.res);
        /* Clearing the rest (what the node does when it reconciles) gives the baseline. */
        for (size_t i = 0; i < extra.n; i++) {
                struct json_object *one = json_object_new_object(), *l = json_object_new_array();
                json_object_array_add(l, json_object_new_string(extra.v[i]));
                json_object_object_add(one, "entries", l);
                apply(f, "unprogram", one);
                json_object_put(one);
        }
        ntbf__entset_free(&want);
        ntbf__entset_free(&extra);
        assert_baseline(f);

        /* A lender goes silent: its device is lost to its borrower, then found again. */
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc1);
        ok(call(f, b, "borrow", p));
        int notes = f->nnotes;
        f->up[l1] = false;
        f->now += lease + 1;
        for (uint32_t n = 0; n < f->t->nnodes; n++)
                if (n != l1)
                        ntbf__fm_seen(f->fm, n, NULL);
        ntbf__fm_tick(f->fm);
        assert_string_equal(state_of(f, acc1), "lost");
        bool lost = false;
        for (int i = notes; i < f->nnotes; i++)
                lost |= f->note_node[i] == b && !strcmp(json_str_of(f->notes[i], "_m"), "lost");
        assert_true(lost);
        refused(call(f, b, "borrow", p), NTBF_EUNREACHABLE, "is lost");
        f->up[l1] = true;
        register_all(f);
        assert_string_equal(state_of(f, acc1), "available");
        fx_free(f);
}

/*
 * A manager busy for longer than a lease (a long queue, a starved CPU) does not hold against
 * the nodes the heartbeats it did not read meanwhile; and a long queue of mutations yields to
 * the loop between them, so that heartbeats are read and sent while it drains.
 */
static void test_busy_manager(void **state)
{
        (void)state;
        struct fx *f = fx_new(THREE, NULL, "lender3");
        register_all(f);
        uint32_t acc1 = fdid(f, "lender1", "acc1"), acc2 = fdid(f, "lender2", "acc2");
        uint32_t b = node(f, "borrower");
        uint32_t lease = f->t->opts.lease_ms;
        char p1[64], p2[64];
        snprintf(p1, sizeof(p1), "{\"fdid\":%u}", acc1);
        snprintf(p2, sizeof(p2), "{\"fdid\":%u}", acc2);
        ok(call(f, b, "borrow", p1));

        /* Busy for two leases: what was not read is not silence. */
        f->use_heard = true;
        f->heard = f->now;
        f->now += 2 * (uint64_t)lease;
        ntbf__fm_tick(f->fm);
        assert_string_equal(state_of(f, acc1), "exclusive");
        /* The next poll reads every node's heartbeat: still nobody is silent. */
        f->heard = f->now;
        for (uint32_t n = 0; n < f->t->nnodes; n++)
                ntbf__fm_seen(f->fm, n, NULL);
        ntbf__fm_tick(f->fm);
        assert_string_equal(state_of(f, acc1), "exclusive");
        /* Silence that was read as silence still ends the lease. */
        f->now += lease + 1;
        f->heard = f->now;
        for (uint32_t n = 0; n < f->t->nnodes; n++)
                if (n != b)
                        ntbf__fm_seen(f->fm, n, NULL);
        ntbf__fm_tick(f->fm);
        assert_string_equal(state_of(f, acc1), "available");
        f->use_heard = false;
        ntbf__fm_seen(f->fm, b, NULL);
        ok(call(f, b, "sync", "{}"));

        /* A queue that takes long: the first mutation waits for the lender's answer, three
         * more queue behind it. */
        f->autoanswer = false;
        struct ans a[4] = {{0}};
        const char *m[4] = {"borrow", "borrow", "return", "return"};
        const char *prm[4] = {p1, p2, p1, p2};
        for (int i = 0; i < 4; i++) {
                struct json_object *p = json_tokener_parse(prm[i]);
                ntbf__fm_request(f->fm, b, m[i], p, got, &a[i]);
                json_object_put(p);
        }
        assert_false(a[0].done);
        assert_int_equal(ntbf__fm_busy(f->fm), 4);
        /* Each reading of the clock now costs 30 ms: the queue runs one slice (50 ms) of
         * mutations, then waits for the next turn of the loop, in order. */
        f->autoanswer = true;
        f->step = 30;
        answer_all(f, 0);
        assert_true(a[0].done && a[1].done);
        assert_false(a[2].done);
        assert_non_null(f->deferred);
        int turns = 0;
        while (next_turn(f))
                turns++;
        assert_true(turns >= 1);
        for (int i = 0; i < 4; i++) {
                if (a[i].err)
                        fail_msg("%s %d: %d %s", m[i], i, a[i].err, a[i].msg);
                json_object_put(a[i].res);
        }
        assert_int_equal(ntbf__fm_busy(f->fm), 0);
        assert_string_equal(state_of(f, acc1), "available");
        assert_string_equal(state_of(f, acc2), "available");
        /* Without slow work the whole queue runs in one turn. */
        f->step = 0;
        ok(call(f, b, "borrow", p1));
        ok(call(f, b, "return", p1));
        assert_null(f->deferred);
        assert_baseline(f);
        fx_free(f);
}

/* The manager restarts: the state is rebuilt exactly from the stored plans, in order. */
static void test_restart_replays(void **state)
{
        (void)state;
        struct fx *f = fx_new("config/examples/quickstart.yaml", NULL, "lender");
        register_all(f);
        uint32_t nvme = fdid(f, "lender", "nvme0"), acc = fdid(f, "lender", "acc0");
        uint32_t b = node(f, "borrower");
        char p[64];
        /* nvme0 first, then acc0 (sharing nvme0's MSI slot); then nvme0 goes: acc0's plan
         * recorded a shared slot that it now holds alone. */
        snprintf(p, sizeof(p), "{\"fdid\":%u}", nvme);
        ok(call(f, b, "borrow", p));
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"dma_window\":4194304}", acc);
        ok(call(f, b, "borrow", p));
        snprintf(p, sizeof(p), "{\"fdid\":%u}", nvme);
        ok(call(f, b, "return", p));
        struct ntbf_state *before = ntbf_state_clone(ntbf__fm_state(f->fm));
        struct ans s1 = call(f, b, "sync", "{}");
        ntbf__fm_free(f->fm);
        fm_start(f);
        char why[512];
        if (ntbf__state_equal(ntbf__fm_state(f->fm), before, why, sizeof(why)))
                fail_msg("rebuilt state differs: %s", why);
        ntbf_state_free(before);
        struct ans s2 = call(f, b, "sync", "{}");
        assert_string_equal(json_object_to_json_string(s1.res), json_object_to_json_string(s2.res));
        json_object_put(s1.res);
        json_object_put(s2.res);
        assert_string_equal(state_of(f, acc), "exclusive");
        /* And it goes on: return, borrow again. */
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc);
        ok(call(f, b, "return", p));
        assert_baseline(f);
        fx_free(f);
}

/* Whether a programmed slot into node n covers address x there. */
static bool slot_covers(struct fx *f, uint32_t n, uint64_t x)
{
        for (size_t i = 0; i < f->programmed.n; i++) {
                struct ntbf__ent e;
                assert_int_equal(ntbf__ent_parse(f->t, f->programmed.v[i], &e), 0);
                if (e.kind == NTBF_ENT_SLOT && e.dst_node == n && x >= e.addr && x - e.addr < e.len)
                        return true;
        }
        return false;
}

/*
 * Real devices (vfio: true): the lender says where its kernel placed the BARs, and the
 * manager programs those addresses, not the model's; it refuses lends that do not say, or
 * whose sizes are not the cluster file's, and a BAR that moves while borrowed; what it
 * learnt survives its restart.
 */
static void test_real_bars(void **state)
{
        (void)state;
        const char *yaml =
            "cluster: {name: hw}\n"
            "nodes:\n"
            "  - {name: lender, id: 4, address: 127.0.0.1:7700, adapters: [{name: ntb0, model: "
            "pxh830, window: 1GiB}],\n"
            "     devices: [{name: nvme0, bdf: \"0000:04:00.0\", vfio: true, bars: [16KiB]},\n"
            "               {name: nvme1, bdf: \"0000:05:00.0\", vfio: true, bars: [16KiB, 0, "
            "64KiB]},\n"
            "               {name: acc0, bdf: \"06:00.0\", sim: {model: accel, memory: 64MiB}}]}\n"
            "  - {name: borrower, id: 8, address: 127.0.0.2:7700, adapters: [{name: ntb0, model: "
            "pxh830, window: 1GiB}]}\n"
            "links: [[lender.ntb0, borrower.ntb0]]\n";
        struct fx *f = fx_new(NULL, yaml, "lender");
        register_all(f);
        uint32_t n0 = fdid(f, "lender", "nvme0"), n1 = fdid(f, "lender", "nvme1");
        uint32_t acc = fdid(f, "lender", "acc0"), l = node(f, "lender"), b = node(f, "borrower");
        uint32_t d0 = ntbf_topo_find_device(f->t, l, "nvme0");
        const uint64_t hw0 = UINT64_C(0x3f0000000000), hw1 = UINT64_C(0xfe010000);
        const uint64_t hw1b2 = UINT64_C(0x3f0000100000);
        char p[256];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", n0);
        refused(call(f, l, "lend", p), -EINVAL, "does not say where the kernel placed its BARs");
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"bars\":[{\"bar\":0,\"addr\":%llu,\"size\":65536}]}",
                 n0, (unsigned long long)hw0);
        refused(call(f, l, "lend", p), NTBF_ECONFIG,
                "BAR0 of lender.nvme0 (0x4000) is 64 KiB on the hardware but 16 KiB in the cluster "
                "file");
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"bars\":[{\"bar\":7,\"addr\":%llu,\"size\":16384}]}",
                 n0, (unsigned long long)hw0);
        refused(call(f, l, "lend", p), -EINVAL, "names its BARs wrongly (entry 0");
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"bars\":[{\"bar\":0,\"addr\":%llu,\"size\":16384}]}",
                 n0, (unsigned long long)(hw0 + 4096));
        refused(call(f, l, "lend", p), -EINVAL, "is not a nonzero multiple of its size");
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"bars\":[{\"bar\":0,\"addr\":%llu,\"size\":16384}]}",
                 n1, (unsigned long long)hw1);
        refused(call(f, l, "lend", p), NTBF_ECONFIG,
                "names no address for BAR2 (64 KiB in the cluster file)");
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"bars\":[]}", acc);
        refused(call(f, l, "lend", p), -EINVAL,
                "lender.acc0 (0x4002) is a device of the model (not vfio: true, and backend sim "
                "does not reach its hosts' devices)");
        assert_string_equal(state_of(f, n0), "");

        snprintf(p, sizeof(p), "{\"fdid\":%u,\"bars\":[{\"bar\":0,\"addr\":%llu,\"size\":16384}]}",
                 n0, (unsigned long long)hw0);
        ok(call(f, l, "lend", p));
        snprintf(p, sizeof(p),
                 "{\"fdid\":%u,\"bars\":[{\"bar\":2,\"addr\":%llu,\"size\":65536},"
                 "{\"bar\":0,\"addr\":%llu,\"size\":16384}]}",
                 n1, (unsigned long long)hw1b2, (unsigned long long)hw1);
        ok(call(f, l, "lend", p));
        /* Borrowed: the borrower's BAR0 slot goes where the hardware has it. */
        snprintf(p, sizeof(p), "{\"fdid\":%u}", n0);
        ok(call(f, b, "borrow", p));
        assert_true(slot_covers(f, l, hw0));
        assert_false(slot_covers(f, l, ntbf_device_bar_addr(&f->t->devices[d0], 0, 0)));
        snprintf(p, sizeof(p), "{\"fdid\":%u}", n1);
        ok(call(f, b, "borrow", p));
        assert_true(slot_covers(f, l, hw1b2));
        /* Same lender, peer to peer: nvme0 reaches nvme1's BAR2 at its hardware address. */
        snprintf(p, sizeof(p), "{\"src\":%u,\"target\":%u,\"bar\":2}", n0, n1);
        struct ans m = call(f, b, "map", p);
        assert_int_equal(m.err, 0);
        uint64_t addr;
        assert_true(ntbf__jget_u(m.res, "device_addr", &addr));
        assert_int_equal(addr, hw1b2);
        json_object_put(m.res);
        /* A BAR that moves while borrowed is refused, and nothing changes. */
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"bars\":[{\"bar\":0,\"addr\":%llu,\"size\":16384}]}",
                 n0, (unsigned long long)(hw0 + 16384));
        refused(call(f, l, "lend", p), NTBF_EBUSY,
                "moved from 0x3f0000000000 to 0x3f0000004000 while borrowed");
        assert_int_equal(ntbf_state_bar_addr(ntbf__fm_state(f->fm), d0, 0, 0), hw0);

        /* The manager restarts: what the lends said is still what it programs. */
        ntbf__fm_free(f->fm);
        fm_start(f);
        assert_int_equal(ntbf_state_bar_addr(ntbf__fm_state(f->fm), d0, 0, 0), hw0);
        snprintf(p, sizeof(p), "{\"fdid\":%u}", n1);
        ok(call(f, b, "return", p));
        ok(call(f, b, "borrow", p));
        assert_true(slot_covers(f, l, hw1b2));
        /* A registration that names a real lend without its BARs does not lend it. */
        ok(call(f, b, "return", p));
        snprintf(p, sizeof(p), "{\"lends\":[{\"fdid\":%u}]}", n1);
        ok(call(f, l, "register", p));
        assert_string_equal(state_of(f, n1), "");
        snprintf(p, sizeof(p),
                 "{\"lends\":[{\"fdid\":%u,\"bars\":[{\"bar\":2,\"addr\":%llu,\"size\":65536},"
                 "{\"bar\":0,\"addr\":%llu,\"size\":16384}]}]}",
                 n1, (unsigned long long)hw1b2, (unsigned long long)hw1);
        ok(call(f, l, "register", p));
        assert_string_equal(state_of(f, n1), "available");
        snprintf(p, sizeof(p), "{\"fdid\":%u}", n0);
        ok(call(f, b, "return", p));
        assert_baseline(f);
        fx_free(f);
}

/*
 * On a backend that reaches its hosts' own PCI functions (linux-ntb: dev_bars), every device
 * sits where its host's kernel placed it, VFIO's or not: the manager wants the addresses with
 * the lend and programs them.
 */
static void test_host_placed_bars(void **state)
{
        (void)state;
        const char *yaml =
            "cluster: {name: hwl, backend: linux-ntb}\n"
            "nodes:\n"
            "  - {name: lender, id: 4, address: 127.0.0.1:7700, ram: 1GiB, adapters: [{name: "
            "ntb0, model: intel-gen4, bdf: \"0000:00:03.0\", windows: [{size: 1GiB, bar: 2, base: "
            "0x800000000}, {size: 1GiB, bar: 4, base: 0x840000000}]}],\n"
            "     devices: [{name: nvme0, bdf: \"0000:04:00.0\", bars: [16KiB]}]}\n"
            "  - {name: borrower, id: 8, address: 127.0.0.2:7700, ram: 1GiB, adapters: [{name: "
            "ntb0, model: intel-gen4, bdf: \"0000:00:03.0\", windows: [{size: 1GiB, bar: 2, base: "
            "0x800000000}, {size: 1GiB, bar: 4, base: 0x840000000}]}]}\n"
            "links: [[lender.ntb0, borrower.ntb0]]\n";
        struct fx *f = fx_new(NULL, yaml, "lender");
        uint32_t l = node(f, "lender"), b = node(f, "borrower");
        uint32_t n0 = fdid(f, "lender", "nvme0"), d0 = ntbf_topo_find_device(f->t, l, "nvme0");
        assert_true(ntbf__bars_host_placed(f->t, d0));
        assert_false(f->t->devices[d0].vfio);
        const uint64_t hw0 = UINT64_C(0xfebd0000);
        char p[256];
        snprintf(p, sizeof(p), "{\"lends\":[{\"fdid\":%u}]}", n0);
        ok(call(f, l, "register", p));
        assert_string_equal(state_of(f, n0), "");
        snprintf(p, sizeof(p), "{\"fdid\":%u}", n0);
        refused(call(f, l, "lend", p), -EINVAL, "does not say where the kernel placed its BARs");
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"bars\":[{\"bar\":0,\"addr\":%llu,\"size\":16384}]}",
                 n0, (unsigned long long)hw0);
        ok(call(f, l, "lend", p));
        assert_int_equal(ntbf_state_bar_addr(ntbf__fm_state(f->fm), d0, 0, 0), hw0);
        snprintf(p, sizeof(p), "{\"fdid\":%u}", n0);
        ok(call(f, b, "borrow", p));
        assert_true(slot_covers(f, l, hw0));
        assert_false(slot_covers(f, l, ntbf_device_bar_addr(&f->t->devices[d0], 0, 0)));
        ok(call(f, b, "return", p));
        assert_baseline(f);
        fx_free(f);
}

/*
 * The manager's database cannot be written (another writer holds its lock past the busy
 * timeout): a borrow is refused with the reason, and nothing is programmed, taken or
 * recorded; once the lock goes, the same borrow is made and returned.
 */
static void test_store_refuses(void **state)
{
        (void)state;
        struct fx *f = fx_new(THREE, NULL, "lender3");
        register_all(f);
        uint32_t acc1 = fdid(f, "lender1", "acc1"), b = node(f, "borrower");
        sqlite3 *db = NULL;
        assert_int_equal(sqlite3_open(f->dbpath, &db), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
        char p[64];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc1);
        refused(call(f, b, "borrow", p), -EIO,
                "the manager cannot record it in its database (database is locked); nothing was "
                "programmed");
        assert_string_equal(state_of(f, acc1), "available");
        assert_baseline(f);
        assert_int_equal(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
        /* Recorded as "programming", programmed, then its "active" record fails: rolled back
         * on the nodes, and refused. */
        f->autoanswer = false;
        struct ans a = {0};
        struct json_object *jp = json_tokener_parse(p);
        ntbf__fm_request(f->fm, b, "borrow", jp, got, &a);
        json_object_put(jp);
        assert_false(a.done);
        assert_true(f->nq > 0);
        assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
        f->autoanswer = true; /* the rollback's clears are answered at once */
        answer_all(f, 0);
        assert_true(a.done);
        assert_int_equal(a.err, -EIO);
        if (!strstr(a.msg, "cannot record it in its database (database is locked)"))
                fail_msg("refused with '%s'", a.msg);
        assert_string_equal(state_of(f, acc1), "available");
        assert_baseline(f);
        assert_int_equal(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
        ok(call(f, b, "borrow", p));
        assert_string_equal(state_of(f, acc1), "exclusive");
        /* Sharing it (SCIReleaseExclusiveBorrow) needs its record rewritten: refused too. */
        assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
        refused(call(f, b, "sx_mode", p), -EIO,
                "cannot record it in its database (database is locked); the borrow stays "
                "exclusive");
        assert_string_equal(state_of(f, acc1), "exclusive");
        assert_int_equal(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
        ok(call(f, b, "sx_mode", p));
        assert_string_equal(state_of(f, acc1), "shared");
        ok(call(f, b, "return", p));
        assert_baseline(f);
        sqlite3_close(db);
        fx_free(f);
}

/* Many cycles leave every budget exactly as it started. */
static void test_cycles(void **state)
{
        (void)state;
        struct fx *f = fx_new(THREE, NULL, "lender3");
        register_all(f);
        uint32_t acc1 = fdid(f, "lender1", "acc1"), nvme = fdid(f, "lender3", "nvme3");
        uint32_t b = node(f, "borrower");
        char p1[64], p2[64];
        snprintf(p1, sizeof(p1), "{\"fdid\":%u}", acc1);
        snprintf(p2, sizeof(p2), "{\"fdid\":%u}", nvme);
        for (int i = 0; i < 200; i++) {
                ok(call(f, b, "borrow", p1));
                ok(call(f, b, "borrow", p2));
                ok(call(f, b, "return", i % 2 ? p1 : p2));
                ok(call(f, b, "return", i % 2 ? p2 : p1));
        }
        assert_baseline(f);
        fx_free(f);
}

/* Peer-to-peer mappings: the three cases, and their release with the borrow. */
static void test_map_peer(void **state)
{
        (void)state;
        struct fx *f = fx_new(THREE, NULL, "lender3");
        register_all(f);
        uint32_t acc1 = fdid(f, "lender1", "acc1"), acc2 = fdid(f, "lender2", "acc2");
        uint32_t b = node(f, "borrower");
        char p[128];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc1);
        ok(call(f, b, "borrow", p));
        snprintf(p, sizeof(p), "{\"src\":%u,\"target\":%u,\"bar\":2}", acc1, acc2);
        refused(call(f, b, "map", p), -EPERM, "neither a device of 'borrower' nor borrowed");
        char q[64];
        snprintf(q, sizeof(q), "{\"fdid\":%u}", acc2);
        ok(call(f, b, "borrow", q));
        struct ans m = call(f, b, "map", p);
        assert_int_equal(m.err, 0);
        struct json_object *path, *hops;
        assert_true(json_object_object_get_ex(m.res, "path", &path));
        assert_true(json_object_object_get_ex(path, "hops", &hops));
        /* Shortest path: acc1's host, its adapter, the switch, lender2's adapter, acc2. */
        struct ntbf_path sp;
        struct ntbf_endpoint from = {NTBF_EP_DEVICE, node(f, "lender1"),
                                     ntbf_topo_find_device(f->t, node(f, "lender1"), "acc1")};
        struct ntbf_endpoint to = {NTBF_EP_DEVICE, node(f, "lender2"),
                                   ntbf_topo_find_device(f->t, node(f, "lender2"), "acc2")};
        assert_int_equal(ntbf_path_find(f->t, NULL, from, to, &sp, NULL, 0), 0);
        assert_int_equal(json_object_array_length(hops), sp.nhops);
        json_object_put(m.res);
        /* Returning acc1 takes its mapping with it. */
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc1);
        ok(call(f, b, "return", p));
        ok(call(f, b, "return", q));
        assert_baseline(f);
        fx_free(f);
}

/* The two other cases of article 4.4: the same lender, and a target in the borrower. */
static void test_map_peer_cases(void **state)
{
        (void)state;
        const char *yaml =
            "cluster: {name: p2p}\n"
            "nodes:\n"
            "  - {name: lender, id: 4, address: 127.0.0.1:7700, adapters: [{name: ntb0, model: "
            "pxh830, window: 1GiB}],\n"
            "     devices: [{name: acc0, bdf: \"04:00.0\", lend: true, sim: {model: accel, memory: "
            "64MiB}},\n"
            "               {name: acc1, bdf: \"05:00.0\", lend: true, sim: {model: accel, memory: "
            "64MiB}}]}\n"
            "  - {name: borrower, id: 8, address: 127.0.0.2:7700, adapters: [{name: ntb0, model: "
            "pxh830, window: 1GiB}],\n"
            "     devices: [{name: gpu, bdf: \"06:00.0\", sim: {model: accel, memory: 64MiB}}]}\n"
            "links: [[lender.ntb0, borrower.ntb0]]\n";
        struct fx *f = fx_new(NULL, yaml, "lender");
        register_all(f);
        uint32_t a0 = fdid(f, "lender", "acc0"), a1 = fdid(f, "lender", "acc1");
        uint32_t gpu = fdid(f, "borrower", "gpu"), b = node(f, "borrower");
        char p[128];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", a0);
        ok(call(f, b, "borrow", p));
        snprintf(p, sizeof(p), "{\"fdid\":%u}", a1);
        ok(call(f, b, "borrow", p));
        struct ntbf__entset before = {0};
        ntbf__ents_of_state(ntbf__fm_state(f->fm), &before);
        /* Same lender: nothing to program, the target's own address in that host. */
        snprintf(p, sizeof(p), "{\"src\":%u,\"target\":%u,\"bar\":2}", a0, a1);
        struct ans m = call(f, b, "map", p);
        assert_int_equal(m.err, 0);
        uint32_t l = node(f, "lender"), d1 = ntbf_topo_find_device(f->t, l, "acc1");
        uint64_t addr;
        assert_true(ntbf__jget_u(m.res, "device_addr", &addr));
        assert_int_equal(addr, ntbf_device_bar_addr(&f->t->devices[d1], 0, 2));
        json_object_put(m.res);
        struct ntbf__entset after = {0}, extra = {0};
        ntbf__ents_of_state(ntbf__fm_state(f->fm), &after);
        ntbf__entset_diff(&after, &before, &extra);
        assert_int_equal(extra.n, 0);
        ntbf__entset_free(&after);
        ntbf__entset_free(&extra);
        /* A device of the borrower: the lender maps a window onto its BAR; the address is in
         * the lender's window, programmed by the lender. */
        snprintf(p, sizeof(p), "{\"src\":%u,\"target\":%u,\"bar\":2}", a0, gpu);
        int before_prog = f->programs[l];
        m = call(f, b, "map", p);
        assert_int_equal(m.err, 0);
        assert_true(ntbf__jget_u(m.res, "device_addr", &addr));
        const struct ntbf_adapter *la = &f->t->adapters[f->t->nodes[l].adapters[0]];
        assert_true(addr >= la->window_base && addr < la->window_base + la->p.window);
        assert_true(f->programs[l] > before_prog);
        json_object_put(m.res);
        /* The borrower's own device cannot be the source of someone else's mapping. */
        snprintf(p, sizeof(p), "{\"src\":%u,\"target\":%u,\"bar\":2}", gpu, a0);
        refused(call(f, l, "map", p), -EPERM, "neither a device of 'lender' nor borrowed by it");
        ntbf__entset_free(&before);
        snprintf(p, sizeof(p), "{\"fdid\":%u}", a0);
        ok(call(f, b, "return", p));
        snprintf(p, sizeof(p), "{\"fdid\":%u}", a1);
        ok(call(f, b, "return", p));
        assert_baseline(f);
        fx_free(f);
}

/* The borrower's daemon at --attach (daemon/kern.c): mappings both ways between two devices of
 * different lenders, each through its own lender's window; unmap by seq gives back exactly
 * what map took; a refusal names why. */
static void test_map_peer_unmap(void **state)
{
        (void)state;
        struct fx *f = fx_new(THREE, NULL, "lender3");
        register_all(f);
        uint32_t acc1 = fdid(f, "lender1", "acc1"), acc2 = fdid(f, "lender2", "acc2");
        uint32_t b = node(f, "borrower"), l1 = node(f, "lender1"), l2 = node(f, "lender2");
        char p[128];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc1);
        ok(call(f, b, "borrow", p));
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc2);
        ok(call(f, b, "borrow", p));
        struct ntbf__entset before = {0};
        ntbf__ents_of_state(ntbf__fm_state(f->fm), &before);
        size_t allocs = ntbf_state_allocs(ntbf__fm_state(f->fm), NULL, 0);
        uint64_t seq[2];
        uint32_t src[2] = {acc1, acc2}, tgt[2] = {acc2, acc1}, by[2] = {l1, l2};
        for (int i = 0; i < 2; i++) {
                int progs = f->programs[by[i]];
                snprintf(p, sizeof(p), "{\"src\":%u,\"target\":%u,\"bar\":2}", src[i], tgt[i]);
                struct ans m = call(f, b, "map", p);
                assert_int_equal(m.err, 0);
                uint64_t addr;
                assert_true(ntbf__jget_u(m.res, "device_addr", &addr));
                assert_true(ntbf__jget_u(m.res, "seq", &seq[i]));
                /* In the source's lender's window onto the target's lender, programmed there. */
                const struct ntbf_adapter *a = &f->t->adapters[f->t->nodes[by[i]].adapters[0]];
                assert_true(addr >= a->window_base && addr < a->window_base + a->p.window);
                assert_true(f->programs[by[i]] > progs);
                json_object_put(m.res);
        }
        assert_int_equal(ntbf_state_allocs(ntbf__fm_state(f->fm), NULL, 0), allocs + 2);
        /* A BAR the target lacks, and a stranger's unmap, are refused with a sentence. */
        snprintf(p, sizeof(p), "{\"src\":%u,\"target\":%u,\"bar\":5}", acc1, acc2);
        refused(call(f, b, "map", p), -EINVAL, "has no BAR5");
        snprintf(p, sizeof(p), "{\"seq\":%" PRIu64 "}", seq[0]);
        refused(call(f, l1, "unmap", p), NTBF_ENOTFOUND, "no mapping");
        for (int i = 0; i < 2; i++) {
                snprintf(p, sizeof(p), "{\"seq\":%" PRIu64 "}", seq[i]);
                ok(call(f, b, "unmap", p));
        }
        /* Twice: the daemon's release after a return finds nothing, and says so. */
        refused(call(f, b, "unmap", p), NTBF_ENOTFOUND, "no mapping");
        assert_int_equal(ntbf_state_allocs(ntbf__fm_state(f->fm), NULL, 0), allocs);
        struct ntbf__entset after = {0}, extra = {0}, gone = {0};
        ntbf__ents_of_state(ntbf__fm_state(f->fm), &after);
        ntbf__entset_diff(&after, &before, &extra);
        ntbf__entset_diff(&before, &after, &gone);
        assert_int_equal(extra.n, 0);
        assert_int_equal(gone.n, 0);
        ntbf__entset_free(&before);
        ntbf__entset_free(&after);
        ntbf__entset_free(&extra);
        ntbf__entset_free(&gone);
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc1);
        ok(call(f, b, "return", p));
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc2);
        ok(call(f, b, "return", p));
        assert_baseline(f);
        fx_free(f);
}

/* Isolation: the lender programs a domain holding exactly the borrow's windows. */
static void test_isolation_entries(void **state)
{
        (void)state;
        const char *yaml =
            "cluster: {name: iso}\n"
            "nodes:\n"
            "  - {name: lender, id: 4, address: 127.0.0.1:7700, adapters: [{name: ntb0, model: "
            "pxh830, window: 1GiB}],\n"
            "     devices: [{name: acc0, bdf: \"04:00.0\", lend: true, isolate: true, sim: {model: "
            "accel, memory: 64MiB}}]}\n"
            "  - {name: borrower, id: 8, address: 127.0.0.2:7700, adapters: [{name: ntb0, model: "
            "pxh830, window: 1GiB}]}\n"
            "links: [[lender.ntb0, borrower.ntb0]]\n";
        struct fx *f = fx_new(NULL, yaml, "lender");
        register_all(f);
        uint32_t acc = fdid(f, "lender", "acc0"), b = node(f, "borrower");
        char p[64];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", acc);
        struct ans a = call(f, b, "borrow", p);
        assert_int_equal(a.err, 0);
        struct json_object *dma;
        json_object_object_get_ex(a.res, "dma", &dma);
        uint64_t dev_addr;
        assert_true(ntbf__jget_u(dma, "device_addr", &dev_addr));
        json_object_put(a.res);
        int iso = 0, maps = 0;
        bool dma_mapped = false;
        for (size_t i = 0; i < f->programmed.n; i++) {
                struct ntbf__ent e;
                ntbf__ent_parse(f->t, f->programmed.v[i], &e);
                iso += e.kind == NTBF_ENT_DEVISO;
                if (e.kind == NTBF_ENT_DEVMAP) {
                        maps++;
                        assert_int_equal(e.prog, node(f, "lender"));
                        dma_mapped |= e.addr == dev_addr && e.len == NTBF_DEFAULT_DMA_WINDOW;
                }
        }
        assert_int_equal(iso, 1);
        assert_int_equal(maps, 2); /* the DMA window and the MSI range */
        assert_true(dma_mapped);
        ok(call(f, b, "return", p));
        assert_baseline(f);
        fx_free(f);
}

int main(void)
{
        ntbf__log_open("test", NTBF_LOG_STDERR, NULL, NTBF_LOG_ERROR);
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_registry_and_conflicts),
            cmocka_unit_test(test_frontends),
            cmocka_unit_test(test_rollback),
            cmocka_unit_test(test_stop_mid_round),
            cmocka_unit_test(test_leases),
            cmocka_unit_test(test_busy_manager),
            cmocka_unit_test(test_restart_replays),
            cmocka_unit_test(test_cycles),
            cmocka_unit_test(test_map_peer),
            cmocka_unit_test(test_map_peer_cases),
            cmocka_unit_test(test_map_peer_unmap),
            cmocka_unit_test(test_isolation_entries),
            cmocka_unit_test(test_real_bars),
            cmocka_unit_test(test_host_placed_bars),
            cmocka_unit_test(test_store_refuses),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
