/* tests/fuzz/fuzz_peer.c: libFuzzer target: any bytes into the peer protocol's frame parser. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ntbfab/error.h"
#include "peerproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t key[32] = "fuzz fuzz fuzz fuzz fuzz fuzz f";
static const uint8_t nonce_c[32] = "client nonce client nonce clien";
static const uint8_t nonce_s[32] = "server nonce server nonce serve";

/* Take frames from p until it needs more or refuses; nothing refused may be delivered. */
static void drain(struct ntbf__pp *p)
{
        for (;;) {
                struct ntbf__pp_event ev;
                int r = ntbf__pp_next(p, &ev);
                if (r <= 0) {
                        if (r < 0 &&
                            (p->state != NTBF_PP_FAILED || (r != NTBF_EAUTH && r != NTBF_EPROTO)))
                                __builtin_trap();
                        return;
                }
                if (ev.kind == NTBF_PP_EV_MSG && ev.len > NTBF_PP_MAX)
                        __builtin_trap();
                free(ev.reply);
        }
}

/*
 * The first byte picks what the rest is:
 *   0: bytes to a server that waits for HELLO (and, after a good one, the PROOF);
 *   1: bytes to a client that sent HELLO and waits for WELCOME;
 *   2: bytes after a completed handshake (a session with fixed nonces);
 *   3: payloads sealed by the real peer, one byte flipped where the input says, then fed
 *      byte-sized chunks: a tampered frame must never be delivered.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!size)
                return 0;
        uint8_t mode = data[0] % 4;
        data++;
        size--;
        struct ntbf__pp c, s;
        ntbf__pp_init(&c, true, key, 4, nonce_c);
        ntbf__pp_init(&s, false, key, 8, nonce_s);
        if (mode == 0) {
                ntbf__pp_feed(&s, data, size);
                drain(&s);
                if (s.state == NTBF_PP_HELLO_SEEN) { /* a HELLO got through: challenge it */
                        uint8_t *f;
                        size_t n;
                        if (ntbf__pp_welcome(&s, &f, &n))
                                __builtin_trap();
                        free(f);
                        drain(&s);
                        if (s.state == NTBF_PP_OPEN)
                                __builtin_trap(); /* opened without answering the challenge */
                }
        } else if (mode == 1) {
                uint8_t *f;
                size_t n;
                ntbf__pp_hello(&c, 8, &f, &n);
                free(f);
                ntbf__pp_feed(&c, data, size);
                drain(&c);
        } else {
                uint8_t *f;
                size_t n;
                struct ntbf__pp_event ev;
                ntbf__pp_hello(&c, 8, &f, &n);
                ntbf__pp_feed(&s, f, n);
                free(f);
                if (ntbf__pp_next(&s, &ev) != 1 || ev.kind != NTBF_PP_EV_HELLO ||
                    ntbf__pp_welcome(&s, &f, &n))
                        __builtin_trap();
                ntbf__pp_feed(&c, f, n);
                free(f);
                if (ntbf__pp_next(&c, &ev) != 1 || ev.kind != NTBF_PP_EV_OPEN)
                        __builtin_trap();
                ntbf__pp_feed(&s, ev.reply, ev.reply_len);
                free(ev.reply);
                if (ntbf__pp_next(&s, &ev) != 1 || ev.kind != NTBF_PP_EV_OPEN)
                        __builtin_trap();
                if (mode == 2) {
                        ntbf__pp_feed(&s, data, size);
                        drain(&s);
                } else if (size >= 4) {
                        uint32_t flip = (uint32_t)data[0] | (uint32_t)data[1] << 8;
                        uint8_t bit = (uint8_t)(1u << (data[2] & 7));
                        bool tamper = data[3] & 1;
                        data += 4;
                        size -= 4;
                        size_t half = size / 2;
                        uint8_t *f1, *f2;
                        size_t n1, n2;
                        ntbf__pp_seal(&c, data, half, &f1, &n1);
                        ntbf__pp_seal(&c, data + half, size - half, &f2, &n2);
                        uint8_t *all = malloc(n1 + n2);
                        memcpy(all, f1, n1);
                        memcpy(all + n1, f2, n2);
                        if (tamper)
                                all[flip % (n1 + n2)] ^= bit;
                        size_t got = 0;
                        for (size_t i = 0; i < n1 + n2; i++) {
                                ntbf__pp_feed(&s, all + i, 1);
                                for (;;) {
                                        int r = ntbf__pp_next(&s, &ev);
                                        if (r <= 0)
                                                break;
                                        size_t want = got ? size - half : half;
                                        const uint8_t *src = got ? data + half : data;
                                        if (ev.len != want || memcmp(ev.data, src, want))
                                                __builtin_trap(); /* a changed frame got through */
                                        got++;
                                }
                        }
                        if (!tamper && got != 2)
                                __builtin_trap();
                        free(all);
                        free(f1);
                        free(f2);
                }
        }
        ntbf__pp_free(&c);
        ntbf__pp_free(&s);
        return 0;
}
