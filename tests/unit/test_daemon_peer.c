/* tests/unit/test_daemon_peer.c: peer frames and authentication: tampering, wrong keys, replays. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "keyfile.h"
#include "ntbfab/error.h"
#include "peerproto.h"

static const uint8_t key[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
static const uint8_t other_key[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11};

struct pair {
        struct ntbf__pp c, s;
};

/* Move one frame from one side to the other; returns ntbf__pp_next's result. */
static int deliver(struct ntbf__pp *to, const uint8_t *frame, size_t n, struct ntbf__pp_event *ev)
{
        assert_int_equal(ntbf__pp_feed(to, frame, n), 0);
        return ntbf__pp_next(to, ev);
}

/* A client and a server through the handshake. */
static void open_pair(struct pair *p, const uint8_t *ckey, const uint8_t *skey)
{
        assert_int_equal(ntbf__pp_init(&p->c, true, ckey, 4, NULL), 0);
        assert_int_equal(ntbf__pp_init(&p->s, false, skey, 8, NULL), 0);
        uint8_t *f;
        size_t n;
        assert_int_equal(ntbf__pp_hello(&p->c, &f, &n), 0);
        struct ntbf__pp_event ev;
        assert_int_equal(deliver(&p->s, f, n, &ev), 1);
        free(f);
        assert_int_equal(ev.kind, NTBF_PP_EV_OPEN);
        assert_int_equal(p->s.peer_id, 4);
        uint8_t *welcome = ev.reply;
        assert_int_equal(deliver(&p->c, welcome, ev.reply_len, &ev), 1);
        free(welcome);
        assert_int_equal(ev.kind, NTBF_PP_EV_OPEN);
        assert_int_equal(p->c.peer_id, 8);
        assert_int_equal(p->c.session, p->s.session);
}

static void close_pair(struct pair *p)
{
        ntbf__pp_free(&p->c);
        ntbf__pp_free(&p->s);
}

static void seal(struct ntbf__pp *from, const char *msg, uint8_t **f, size_t *n)
{
        assert_int_equal(ntbf__pp_seal(from, msg, strlen(msg), f, n), 0);
}

static void expect_msg(struct ntbf__pp *to, const uint8_t *f, size_t n, const char *msg)
{
        struct ntbf__pp_event ev;
        assert_int_equal(deliver(to, f, n, &ev), 1);
        assert_int_equal(ev.kind, NTBF_PP_EV_MSG);
        assert_int_equal(ev.len, strlen(msg));
        assert_memory_equal(ev.data, msg, ev.len);
}

static void expect_refused(struct ntbf__pp *to, const uint8_t *f, size_t n, int err,
                           const char *why)
{
        struct ntbf__pp_event ev;
        int r = deliver(to, f, n, &ev);
        if (r != err || !strstr(to->why, why))
                fail_msg("got %d (%s), wanted %d (%s)", r, to->why, err, why);
        assert_int_equal(to->state, NTBF_PP_FAILED);
        /* Nothing is accepted after a refusal, not even a good frame. */
        assert_int_equal(ntbf__pp_next(to, &ev), NTBF_EPROTO);
}

static void test_round_trip(void **state)
{
        (void)state;
        struct pair p;
        open_pair(&p, key, key);
        uint8_t *f, *g;
        size_t n, m;
        seal(&p.c, "{\"t\":\"hb\"}", &f, &n);
        expect_msg(&p.s, f, n, "{\"t\":\"hb\"}");
        free(f);
        seal(&p.s, "pong", &f, &n);
        expect_msg(&p.c, f, n, "pong");
        free(f);
        /* Several frames in one read, split at every byte across reads. */
        seal(&p.c, "one", &f, &n);
        seal(&p.c, "two", &g, &m);
        uint8_t *both = malloc(n + m);
        memcpy(both, f, n);
        memcpy(both + n, g, m);
        struct ntbf__pp_event ev;
        for (size_t i = 0; i < n + m; i++) {
                assert_int_equal(ntbf__pp_feed(&p.s, both + i, 1), 0);
                int r = ntbf__pp_next(&p.s, &ev);
                if (i == n - 1 || i == n + m - 1) {
                        assert_int_equal(r, 1);
                        assert_memory_equal(ev.data, i == n - 1 ? "one" : "two", 3);
                } else {
                        assert_int_equal(r, 0);
                }
        }
        free(both);
        free(f);
        free(g);
        /* An empty payload and the largest one. */
        assert_int_equal(ntbf__pp_seal(&p.c, "", 0, &f, &n), 0);
        expect_msg(&p.s, f, n, "");
        free(f);
        char *big = malloc(NTBF_PP_MAX);
        memset(big, 'b', NTBF_PP_MAX);
        assert_int_equal(ntbf__pp_seal(&p.c, big, NTBF_PP_MAX, &f, &n), 0);
        assert_int_equal(deliver(&p.s, f, n, &ev), 1);
        assert_int_equal(ev.len, NTBF_PP_MAX);
        free(f);
        assert_int_equal(ntbf__pp_seal(&p.c, big, NTBF_PP_MAX + 1, &f, &n), -E2BIG);
        free(big);
        close_pair(&p);
}

/* Flipping any bit of a frame (header, payload or tag) gets it refused. */
static void test_tamper_every_byte(void **state)
{
        (void)state;
        const char *msg = "{\"t\":\"req\",\"m\":\"borrow\",\"fdid\":16385}";
        struct pair ref;
        open_pair(&ref, key, key);
        uint8_t *f;
        size_t n;
        seal(&ref.c, msg, &f, &n);
        for (size_t i = 0; i < n; i++) {
                struct pair p;
                /* Same nonces, so the same session and the same frame bytes. */
                assert_int_equal(ntbf__pp_init(&p.s, false, key, 8, ref.s.nonce_self), 0);
                assert_int_equal(ntbf__pp_init(&p.c, true, key, 4, ref.c.nonce_self), 0);
                uint8_t *h, *w;
                size_t hn, wn;
                assert_int_equal(ntbf__pp_hello(&p.c, &h, &hn), 0);
                struct ntbf__pp_event ev;
                assert_int_equal(deliver(&p.s, h, hn, &ev), 1);
                free(h);
                free(ev.reply);
                uint8_t *t = malloc(n);
                memcpy(t, f, n);
                t[i] ^= 0x20;
                /* A changed length field may make the frame look incomplete: close it then. */
                int r = deliver(&p.s, t, n, &ev);
                if (r == 0) {
                        assert_true(i >= 8 && i < 12);
                } else if (r == 1) {
                        fail_msg("tampered byte %zu accepted", i);
                } else {
                        assert_true(r == NTBF_EAUTH || r == NTBF_EPROTO);
                        assert_int_equal(p.s.state, NTBF_PP_FAILED);
                }
                free(t);
                (void)w;
                (void)wn;
                close_pair(&p);
        }
        free(f);
        close_pair(&ref);
}

static void test_wrong_key(void **state)
{
        (void)state;
        struct ntbf__pp c, s;
        assert_int_equal(ntbf__pp_init(&c, true, other_key, 4, NULL), 0);
        assert_int_equal(ntbf__pp_init(&s, false, key, 8, NULL), 0);
        uint8_t *f;
        size_t n;
        assert_int_equal(ntbf__pp_hello(&c, &f, &n), 0);
        expect_refused(&s, f, n, NTBF_EAUTH, "HELLO not made with the cluster key");
        free(f);
        ntbf__pp_free(&c);
        ntbf__pp_free(&s);
        /* A server with another key cannot answer a good HELLO convincingly. */
        assert_int_equal(ntbf__pp_init(&c, true, key, 4, NULL), 0);
        assert_int_equal(ntbf__pp_init(&s, false, key, 8, NULL), 0);
        assert_int_equal(ntbf__pp_hello(&c, &f, &n), 0);
        struct ntbf__pp_event ev;
        assert_int_equal(deliver(&s, f, n, &ev), 1);
        free(f);
        struct ntbf__pp forged;
        assert_int_equal(ntbf__pp_init(&forged, false, other_key, 8, NULL), 0);
        free(ev.reply);
        assert_int_equal(ntbf__pp_hello(&c, &f, &n), -EINVAL); /* once only */
        /* Forge a WELCOME: the forger saw the HELLO but has another key. */
        ntbf__pp_free(&c);
        assert_int_equal(ntbf__pp_init(&c, true, key, 4, NULL), 0);
        assert_int_equal(ntbf__pp_hello(&c, &f, &n), 0);
        /* the forger accepts any HELLO by using its key as if it were right */
        memcpy(forged.key, key, 32);
        assert_int_equal(deliver(&forged, f, n, &ev), 1);
        free(f);
        /* now corrupt the WELCOME's tag as a different key would */
        ev.reply[ev.reply_len - 1] ^= 1;
        expect_refused(&c, ev.reply, ev.reply_len, NTBF_EAUTH, "WELCOME not made");
        free(ev.reply);
        ntbf__pp_free(&c);
        ntbf__pp_free(&s);
        ntbf__pp_free(&forged);
}

static void test_replay_within_session(void **state)
{
        (void)state;
        struct pair p;
        open_pair(&p, key, key);
        uint8_t *f1, *f2;
        size_t n1, n2;
        seal(&p.c, "first", &f1, &n1);
        seal(&p.c, "second", &f2, &n2);
        expect_msg(&p.s, f1, n1, "first");
        expect_msg(&p.s, f2, n2, "second");
        expect_refused(&p.s, f1, n1, NTBF_EAUTH, "a replay");
        free(f1);
        free(f2);
        close_pair(&p);
        /* Skipping a frame (a sequence gap) is refused too. */
        open_pair(&p, key, key);
        seal(&p.c, "first", &f1, &n1);
        seal(&p.c, "second", &f2, &n2);
        expect_refused(&p.s, f2, n2, NTBF_EAUTH, "went missing");
        free(f1);
        free(f2);
        close_pair(&p);
}

/* A sequence number going backwards, correctly tagged (as by a buggy or hostile peer). */
static void test_sequence_backwards(void **state)
{
        (void)state;
        struct pair p;
        open_pair(&p, key, key);
        uint8_t *f;
        size_t n;
        for (int i = 0; i < 5; i++) {
                seal(&p.c, "x", &f, &n);
                expect_msg(&p.s, f, n, "x");
                free(f);
        }
        p.c.tx_seq = 2; /* the next frame carries 3 */
        seal(&p.c, "x", &f, &n);
        expect_refused(&p.s, f, n, NTBF_EAUTH, "sequence number 3 where 6 was due (a replay)");
        free(f);
        close_pair(&p);
}

/* A frame of an earlier session fails in the next one, even with the right sequence number. */
static void test_replay_across_sessions(void **state)
{
        (void)state;
        struct pair a, b;
        open_pair(&a, key, key);
        uint8_t *f;
        size_t n;
        seal(&a.c, "from session a", &f, &n);
        open_pair(&b, key, key);
        assert_true(a.s.session != b.s.session);
        expect_refused(&b.s, f, n, NTBF_EAUTH, "another session");
        free(f);
        /* Reflected back to its sender: wrong direction key. */
        seal(&a.c, "reflected", &f, &n);
        expect_refused(&a.c, f, n, NTBF_EAUTH, "fails authentication");
        free(f);
        /* A replayed HELLO only gets a fresh WELCOME; a recorded client message still fails. */
        close_pair(&a);
        close_pair(&b);
}

static void test_malformed(void **state)
{
        (void)state;
        struct ntbf__pp s;
        uint8_t junk[64] = "GET / HTTP/1.1\r\n";
        assert_int_equal(ntbf__pp_init(&s, false, key, 8, NULL), 0);
        expect_refused(&s, junk, sizeof(junk), NTBF_EPROTO, "bad magic");
        ntbf__pp_free(&s);
        /* A length over the limit is refused from the header alone. */
        uint8_t h[NTBF_PP_HDR] = {'N', 'T', 'B', 'P', 1, 1, 0, 0, 0x00, 0x10, 0x00, 0x01};
        assert_int_equal(ntbf__pp_init(&s, false, key, 8, NULL), 0);
        expect_refused(&s, h, sizeof(h), NTBF_EPROTO, "more than");
        ntbf__pp_free(&s);
        /* Truncated frames wait; a MSG before the handshake is refused. */
        struct pair p;
        open_pair(&p, key, key);
        uint8_t *f;
        size_t n;
        seal(&p.c, "whole", &f, &n);
        struct ntbf__pp_event ev;
        assert_int_equal(deliver(&p.s, f, n - 1, &ev), 0);
        assert_int_equal(ntbf__pp_next(&p.s, &ev), 0);
        struct ntbf__pp fresh;
        assert_int_equal(ntbf__pp_init(&fresh, false, key, 8, NULL), 0);
        expect_refused(&fresh, f, n, NTBF_EPROTO, "expected HELLO");
        ntbf__pp_free(&fresh);
        /* A version we do not speak, reserved bits. */
        uint8_t *t = malloc(n);
        memcpy(t, f, n);
        t[4] = 2;
        assert_int_equal(ntbf__pp_init(&fresh, false, key, 8, NULL), 0);
        expect_refused(&fresh, t, n, NTBF_EPROTO, "version 2");
        ntbf__pp_free(&fresh);
        free(t);
        free(f);
        close_pair(&p);
}

static void test_keyfile(void **state)
{
        (void)state;
        char dir[] = "/tmp/ntbfab-key-XXXXXX", path[128], why[256];
        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/cluster.key", dir);
        uint8_t k[32], k2[32];
        assert_int_equal(ntbf__key_generate(path, why, sizeof(why)), 0);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        assert_int_equal(st.st_size, 65);
        assert_int_equal(ntbf__key_read(path, k, why, sizeof(why)), 0);
        assert_int_equal(ntbf__key_generate(path, why, sizeof(why)), NTBF_EEXISTS);
        assert_non_null(strstr(why, "never overwritten"));
        assert_int_equal(ntbf__key_read(path, k2, why, sizeof(why)), 0);
        assert_memory_equal(k, k2, 32); /* untouched */
        assert_int_equal(chmod(path, 0640), 0);
        assert_int_equal(ntbf__key_read(path, k2, why, sizeof(why)), -EACCES);
        assert_non_null(strstr(why, "chmod 600"));
        assert_int_equal(chmod(path, 0604), 0);
        assert_int_equal(ntbf__key_read(path, k2, why, sizeof(why)), -EACCES);
        unlink(path);
        FILE *f = fopen(path, "w");
        fputs("not hex\n", f);
        fclose(f);
        chmod(path, 0600);
        assert_int_equal(ntbf__key_read(path, k2, why, sizeof(why)), NTBF_EPROTO);
        unlink(path);
        assert_int_equal(ntbf__key_read(path, k2, why, sizeof(why)), -ENOENT);
        assert_non_null(strstr(why, "ntbfab keygen"));
        /* A FIFO nobody writes to is refused at once, not waited on. */
        assert_int_equal(mkfifo(path, 0600), 0);
        assert_int_equal(ntbf__key_read(path, k2, why, sizeof(why)), -EINVAL);
        assert_non_null(strstr(why, "not a regular file"));
        unlink(path);
        rmdir(dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_round_trip),
            cmocka_unit_test(test_tamper_every_byte),
            cmocka_unit_test(test_wrong_key),
            cmocka_unit_test(test_replay_within_session),
            cmocka_unit_test(test_sequence_backwards),
            cmocka_unit_test(test_replay_across_sessions),
            cmocka_unit_test(test_malformed),
            cmocka_unit_test(test_keyfile),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
