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

/* The three frames of a handshake, given nonces (NULL: random). Asserts each step. */
static void handshake(struct pair *p, const uint8_t *ckey, const uint8_t *skey, const uint8_t *nc,
                      const uint8_t *ns)
{
        assert_int_equal(ntbf__pp_init(&p->c, true, ckey, 4, nc), 0);
        assert_int_equal(ntbf__pp_init(&p->s, false, skey, 8, ns), 0);
        uint8_t *f;
        size_t n;
        assert_int_equal(ntbf__pp_hello(&p->c, 8, &f, &n), 0);
        struct ntbf__pp_event ev;
        assert_int_equal(deliver(&p->s, f, n, &ev), 1);
        free(f);
        assert_int_equal(ev.kind, NTBF_PP_EV_HELLO);
        assert_int_equal(p->s.peer_id, 4);
        /* Nothing more until the caller checked the node and asked for the WELCOME. */
        assert_int_equal(ntbf__pp_next(&p->s, &ev), 0);
        assert_int_equal(ntbf__pp_welcome(&p->s, &f, &n), 0);
        assert_int_equal(deliver(&p->c, f, n, &ev), 1);
        free(f);
        assert_int_equal(ev.kind, NTBF_PP_EV_OPEN);
        assert_int_equal(p->c.peer_id, 8);
        assert_non_null(ev.reply); /* the PROOF */
        assert_int_equal(p->s.state, NTBF_PP_CHALLENGED);
        uint8_t *proof = ev.reply;
        assert_int_equal(deliver(&p->s, proof, ev.reply_len, &ev), 1);
        free(proof);
        assert_int_equal(ev.kind, NTBF_PP_EV_OPEN);
        assert_int_equal(p->c.session, p->s.session);
}

static void open_pair(struct pair *p, const uint8_t *ckey, const uint8_t *skey)
{
        handshake(p, ckey, skey, NULL, NULL);
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
                handshake(&p, key, key, ref.c.nonce_self, ref.s.nonce_self);
                struct ntbf__pp_event ev;
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
        assert_int_equal(ntbf__pp_hello(&c, 8, &f, &n), 0);
        expect_refused(&s, f, n, NTBF_EAUTH, "HELLO not made with the cluster key");
        free(f);
        ntbf__pp_free(&c);
        ntbf__pp_free(&s);
        /* A server with another key cannot answer a good HELLO convincingly: its WELCOME
         * fails at the client. */
        assert_int_equal(ntbf__pp_init(&c, true, key, 4, NULL), 0);
        assert_int_equal(ntbf__pp_hello(&c, 8, &f, &n), 0);
        assert_int_equal(ntbf__pp_hello(&c, 8, &f, &n), -EINVAL); /* once only */
        struct ntbf__pp forged;
        assert_int_equal(ntbf__pp_init(&forged, false, key, 8, NULL), 0);
        struct ntbf__pp_event ev;
        assert_int_equal(deliver(&forged, f, n, &ev), 1); /* it saw a good HELLO... */
        free(f);
        memcpy(forged.key, other_key, 32); /* ...but answers with another key */
        assert_int_equal(ntbf__pp_welcome(&forged, &f, &n), 0);
        expect_refused(&c, f, n, NTBF_EAUTH, "WELCOME not made with the cluster key");
        free(f);
        ntbf__pp_free(&c);
        ntbf__pp_free(&forged);
}

/*
 * A recorded HELLO replayed (the attacker has the bytes, not the key): the server answers
 * with a fresh challenge and opens nothing; the PROOF recorded from the genuine handshake
 * does not answer the new challenge; nor does anything else without the key.
 */
static void test_replayed_hello(void **state)
{
        (void)state;
        struct ntbf__pp c;
        assert_int_equal(ntbf__pp_init(&c, true, key, 4, NULL), 0);
        uint8_t *hello, *f, *proof;
        size_t hn, n, pn;
        assert_int_equal(ntbf__pp_hello(&c, 8, &hello, &hn), 0);
        struct ntbf__pp genuine;
        assert_int_equal(ntbf__pp_init(&genuine, false, key, 8, NULL), 0);
        struct ntbf__pp_event ev;
        assert_int_equal(deliver(&genuine, hello, hn, &ev), 1);
        assert_int_equal(ntbf__pp_welcome(&genuine, &f, &n), 0);
        assert_int_equal(deliver(&c, f, n, &ev), 1);
        free(f);
        proof = ev.reply;
        pn = ev.reply_len;
        assert_int_equal(deliver(&genuine, proof, pn, &ev), 1);
        assert_int_equal(ev.kind, NTBF_PP_EV_OPEN);
        for (int i = 0; i < 50; i++) {
                struct ntbf__pp s;
                assert_int_equal(ntbf__pp_init(&s, false, key, 8, NULL), 0);
                assert_int_equal(deliver(&s, hello, hn, &ev), 1);
                assert_int_equal(ev.kind, NTBF_PP_EV_HELLO); /* not a session */
                assert_int_equal(ntbf__pp_welcome(&s, &f, &n), 0);
                assert_true(s.session != genuine.session);
                free(f);
                if (i == 0) {
                        expect_refused(&s, proof, pn, NTBF_EAUTH, "does not answer");
                } else {
                        /* A PROOF made up without the key: any tag. */
                        uint8_t *fake = malloc(pn);
                        memcpy(fake, proof, pn);
                        for (size_t k = 16; k < pn; k++)
                                fake[k] ^= (uint8_t)(i * 31 + k);
                        for (size_t k = 24; k < 32; k++)
                                fake[k] = 0; /* a valid sequence number */
                        int r = deliver(&s, fake, pn, &ev);
                        assert_true(r == NTBF_EAUTH);
                        free(fake);
                }
                assert_true(s.state != NTBF_PP_OPEN);
                ntbf__pp_free(&s);
        }
        free(hello);
        free(proof);
        ntbf__pp_free(&c);
        ntbf__pp_free(&genuine);
}

/* Both node ids are bound: a HELLO meant for another server, a WELCOME from a node other than
 * the one dialled, or naming another client, are refused. */
static void test_ids_bound(void **state)
{
        (void)state;
        struct ntbf__pp c, s;
        uint8_t *f;
        size_t n;
        struct ntbf__pp_event ev;
        assert_int_equal(ntbf__pp_init(&c, true, key, 4, NULL), 0);
        assert_int_equal(ntbf__pp_hello(&c, 12, &f, &n), 0); /* meant for node 12 */
        assert_int_equal(ntbf__pp_init(&s, false, key, 8, NULL), 0);
        expect_refused(&s, f, n, NTBF_EAUTH, "meant for node id 12, not this node (id 8)");
        free(f);
        ntbf__pp_free(&s);
        ntbf__pp_free(&c);
        /* A HELLO claiming to be the server itself. */
        assert_int_equal(ntbf__pp_init(&c, true, key, 8, NULL), 0);
        assert_int_equal(ntbf__pp_hello(&c, 8, &f, &n), 0);
        assert_int_equal(ntbf__pp_init(&s, false, key, 8, NULL), 0);
        expect_refused(&s, f, n, NTBF_EAUTH, "claims to come from this node");
        free(f);
        ntbf__pp_free(&s);
        ntbf__pp_free(&c);
        /* The client dialled 8, node 12 (with the key) answers a HELLO of its own making. */
        assert_int_equal(ntbf__pp_init(&c, true, key, 4, NULL), 0);
        assert_int_equal(ntbf__pp_hello(&c, 8, &f, &n), 0);
        free(f);
        struct ntbf__pp other, s12;
        assert_int_equal(ntbf__pp_init(&other, true, key, 4, c.nonce_self), 0);
        assert_int_equal(ntbf__pp_hello(&other, 12, &f, &n), 0);
        assert_int_equal(ntbf__pp_init(&s12, false, key, 12, NULL), 0);
        assert_int_equal(deliver(&s12, f, n, &ev), 1);
        free(f);
        assert_int_equal(ntbf__pp_welcome(&s12, &f, &n), 0);
        expect_refused(&c, f, n, NTBF_EAUTH, "WELCOME not made with the cluster key for our");
        free(f);
        ntbf__pp_free(&c);
        ntbf__pp_free(&other);
        ntbf__pp_free(&s12);
}

/* Before the session is open a peer's bytes are bounded: a frame header that the state cannot
 * accept is refused as soon as it is in, and no more than two handshake frames are buffered. */
static void test_handshake_bounds(void **state)
{
        (void)state;
        struct ntbf__pp s;
        struct ntbf__pp_event ev;
        /* A HELLO header announcing 1 MiB: refused before any of the megabyte is read. */
        uint8_t h[NTBF_PP_HDR] = {'N',  'T',  'B',  'P', NTBF_PP_VERSION, NTBF_PP_HELLO, 0, 0,
                                  0x00, 0x10, 0x00, 0x00};
        assert_int_equal(ntbf__pp_init(&s, false, key, 8, NULL), 0);
        expect_refused(&s, h, sizeof(h), NTBF_EPROTO, "malformed HELLO: 1048576 bytes");
        ntbf__pp_free(&s);
        /* A MSG header where a HELLO is due. */
        h[5] = NTBF_PP_MSG;
        h[9] = 0;
        h[11] = 10;
        assert_int_equal(ntbf__pp_init(&s, false, key, 8, NULL), 0);
        expect_refused(&s, h, sizeof(h), NTBF_EPROTO, "expected HELLO, got frame type 3");
        ntbf__pp_free(&s);
        /* More than two handshake frames' worth is not buffered at all. */
        static uint8_t junk[4096];
        assert_int_equal(ntbf__pp_init(&s, false, key, 8, NULL), 0);
        assert_int_equal(ntbf__pp_feed(&s, junk, NTBF_PP_HS_BUF + 1), -E2BIG);
        assert_int_equal(s.len, 0);
        assert_true(s.cap <= NTBF_PP_HS_BUF);
        assert_int_equal(ntbf__pp_next(&s, &ev), 0);
        ntbf__pp_free(&s);
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
        uint8_t h[NTBF_PP_HDR] = {'N',  'T',  'B',  'P', NTBF_PP_VERSION, 1, 0, 0,
                                  0x00, 0x10, 0x00, 0x01};
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
        t[4] = 1;
        assert_int_equal(ntbf__pp_init(&fresh, false, key, 8, NULL), 0);
        expect_refused(&fresh, t, n, NTBF_EPROTO, "version 1, this daemon speaks 2");
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
            cmocka_unit_test(test_replayed_hello),
            cmocka_unit_test(test_ids_bound),
            cmocka_unit_test(test_handshake_bounds),
            cmocka_unit_test(test_replay_within_session),
            cmocka_unit_test(test_sequence_backwards),
            cmocka_unit_test(test_replay_across_sessions),
            cmocka_unit_test(test_malformed),
            cmocka_unit_test(test_keyfile),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
