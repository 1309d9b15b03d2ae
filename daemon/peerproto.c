/* daemon/peerproto.c: peer frames, the challenge handshake and per-frame HMAC (docs/peer.md). */
#include <errno.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntbfab/error.h"
#include "peerproto.h"

static const uint8_t magic[4] = {'N', 'T', 'B', 'P'};

static void put32(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)(v >> 24);
        p[1] = (uint8_t)(v >> 16);
        p[2] = (uint8_t)(v >> 8);
        p[3] = (uint8_t)v;
}

static void put64(uint8_t *p, uint64_t v)
{
        put32(p, (uint32_t)(v >> 32));
        put32(p + 4, (uint32_t)v);
}

static uint32_t get32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get64(const uint8_t *p)
{
        return (uint64_t)get32(p) << 32 | get32(p + 4);
}

static int refuse(struct ntbf__pp *p, int err, const char *fmt, ...) NTBF_PRINTF(3, 4);
static int refuse(struct ntbf__pp *p, int err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->why, sizeof(p->why), fmt, ap);
        va_end(ap);
        p->state = NTBF_PP_FAILED;
        return err;
}

int ntbf__pp_init(struct ntbf__pp *p, bool client, const uint8_t key[NTBF_PP_KEY_BYTES],
                  uint32_t self_id, const uint8_t *nonce)
{
        memset(p, 0, sizeof(*p));
        if (sodium_init() < 0)
                return -EIO;
        p->client = client;
        p->state = NTBF_PP_START;
        memcpy(p->key, key, NTBF_PP_KEY_BYTES);
        p->self_id = self_id;
        if (nonce)
                memcpy(p->nonce_self, nonce, NTBF_PP_NONCE);
        else
                randombytes_buf(p->nonce_self, NTBF_PP_NONCE);
        return 0;
}

void ntbf__pp_free(struct ntbf__pp *p)
{
        free(p->buf);
        sodium_memzero(p, sizeof(*p));
}

/* Header fields into h. */
static void header(uint8_t *h, enum ntbf__pp_type type, uint32_t len, uint64_t session,
                   uint64_t seq)
{
        memset(h, 0, NTBF_PP_HDR);
        memcpy(h, magic, 4);
        h[4] = NTBF_PP_VERSION;
        h[5] = (uint8_t)type;
        put32(h + 8, len);
        put64(h + 16, session);
        put64(h + 24, seq);
}

/* The tag: HMAC-SHA-256 with key over header || payload. */
static void tag_of(const uint8_t *key, const uint8_t *frame, size_t n, uint8_t out[NTBF_PP_TAG])
{
        crypto_auth_hmacsha256_state st;
        crypto_auth_hmacsha256_init(&st, key, 32);
        crypto_auth_hmacsha256_update(&st, frame, n);
        crypto_auth_hmacsha256_final(&st, out);
        sodium_memzero(&st, sizeof(st));
}

/* Whether the frame's tag (after its n bytes of header and payload) is key's, in constant
 * time. */
static bool tag_ok(const uint8_t *key, const uint8_t *frame, size_t n)
{
        uint8_t want[NTBF_PP_TAG];
        tag_of(key, frame, n, want);
        bool ok = sodium_memcmp(want, frame + n, NTBF_PP_TAG) == 0;
        sodium_memzero(want, sizeof(want));
        return ok;
}

static int build(const uint8_t *key, enum ntbf__pp_type type, uint64_t session, uint64_t seq,
                 const void *payload, size_t n, uint8_t **out, size_t *len)
{
        if (n > NTBF_PP_MAX)
                return -E2BIG;
        size_t total = NTBF_PP_HDR + n + NTBF_PP_TAG;
        uint8_t *f = malloc(total);
        if (!f)
                return -ENOMEM;
        header(f, type, (uint32_t)n, session, seq);
        if (n)
                memcpy(f + NTBF_PP_HDR, payload, n);
        tag_of(key, f, NTBF_PP_HDR + n, f + NTBF_PP_HDR + n);
        *out = f;
        *len = total;
        return 0;
}

/*
 * Both sides derive the session from the cluster key, both nonces and both node ids: a
 * session id and one key per direction. So the WELCOME and the PROOF, tagged with these
 * keys, bind everything the handshake said; a frame of another session, for other nodes, or
 * reflected back to its sender fails its tag whatever its sequence number.
 */
static void derive(struct ntbf__pp *p)
{
        const uint8_t *nc = p->client ? p->nonce_self : p->nonce_peer;
        const uint8_t *ns = p->client ? p->nonce_peer : p->nonce_self;
        uint32_t idc = p->client ? p->self_id : p->peer_id;
        uint32_t ids = p->client ? p->peer_id : p->self_id;
        uint8_t in[16 + 2 * NTBF_PP_NONCE + 8], out[64], sid[8];
        memcpy(in, "ntbfab-peer-v2\0\0", 16);
        memcpy(in + 16, nc, NTBF_PP_NONCE);
        memcpy(in + 16 + NTBF_PP_NONCE, ns, NTBF_PP_NONCE);
        put32(in + 16 + 2 * NTBF_PP_NONCE, idc);
        put32(in + 20 + 2 * NTBF_PP_NONCE, ids);
        crypto_generichash(out, sizeof(out), in, sizeof(in), p->key, NTBF_PP_KEY_BYTES);
        memcpy(p->client ? p->k_tx : p->k_rx, out, 32);      /* client -> server */
        memcpy(p->client ? p->k_rx : p->k_tx, out + 32, 32); /* server -> client */
        in[15] = 1;                                          /* a separate hash for the id */
        crypto_generichash(sid, sizeof(sid), in, sizeof(in), p->key, NTBF_PP_KEY_BYTES);
        p->session = get64(sid);
        if (!p->session) /* 0 marks "no session" in HELLO */
                p->session = 1;
        sodium_memzero(out, sizeof(out));
        sodium_memzero(in, sizeof(in));
}

int ntbf__pp_hello(struct ntbf__pp *p, uint32_t server_id, uint8_t **out, size_t *len)
{
        if (!p->client || p->state != NTBF_PP_START)
                return -EINVAL;
        uint8_t pl[NTBF_PP_HELLO_LEN];
        memcpy(pl, p->nonce_self, NTBF_PP_NONCE);
        put32(pl + NTBF_PP_NONCE, p->self_id);
        put32(pl + NTBF_PP_NONCE + 4, server_id);
        int r = build(p->key, NTBF_PP_HELLO, 0, 0, pl, sizeof(pl), out, len);
        if (!r) {
                p->peer_id = server_id;
                p->state = NTBF_PP_HELLO_SENT;
        }
        return r;
}

int ntbf__pp_welcome(struct ntbf__pp *p, uint8_t **out, size_t *len)
{
        if (p->client || p->state != NTBF_PP_HELLO_SEEN)
                return -EINVAL;
        derive(p);
        uint8_t pl[NTBF_PP_WELCOME_LEN];
        memcpy(pl, p->nonce_self, NTBF_PP_NONCE);
        put32(pl + NTBF_PP_NONCE, p->self_id);
        put32(pl + NTBF_PP_NONCE + 4, p->peer_id);
        int r = build(p->k_tx, NTBF_PP_WELCOME, p->session, 0, pl, sizeof(pl), out, len);
        if (!r)
                p->state = NTBF_PP_CHALLENGED;
        return r;
}

int ntbf__pp_feed(struct ntbf__pp *p, const void *data, size_t n)
{
        if (!n)
                return 0;
        size_t limit = p->state == NTBF_PP_OPEN
                           ? 2 * (NTBF_PP_HDR + NTBF_PP_MAX + NTBF_PP_TAG) + 65536
                           : NTBF_PP_HS_BUF;
        if (p->len + n > limit)
                return -E2BIG; /* the reader must consume frames as they come */
        if (p->len + n > p->cap) {
                size_t cap = p->cap ? p->cap : p->state == NTBF_PP_OPEN ? 4096 : NTBF_PP_HS_BUF;
                while (cap < p->len + n)
                        cap *= 2;
                uint8_t *b = realloc(p->buf, cap);
                if (!b)
                        return -ENOMEM;
                p->buf = b;
                p->cap = cap;
        }
        memcpy(p->buf + p->len, data, n);
        p->len += n;
        return 0;
}

size_t ntbf__pp_frame_len(const uint8_t *buf, size_t n)
{
        if (n < NTBF_PP_HDR)
                return 0;
        return NTBF_PP_HDR + (size_t)get32(buf + 8) + NTBF_PP_TAG;
}

static void consume(struct ntbf__pp *p, size_t n)
{
        memmove(p->buf, p->buf + n, p->len - n);
        p->len -= n;
}

static const char *type_name(unsigned type)
{
        switch (type) {
        case NTBF_PP_HELLO:
                return "HELLO";
        case NTBF_PP_WELCOME:
                return "WELCOME";
        case NTBF_PP_MSG:
                return "MSG";
        case NTBF_PP_PROOF:
                return "PROOF";
        default:
                return "unknown";
        }
}

/*
 * What the state accepts, checked on the header alone: the only frame type, its payload
 * length (exact during the handshake), its session id and sequence number.
 */
static int check_header(struct ntbf__pp *p, const uint8_t *h)
{
        unsigned type = h[5];
        uint32_t plen = get32(h + 8);
        uint64_t session = get64(h + 16), seq = get64(h + 24);
        unsigned want;
        uint32_t len;
        switch (p->state) {
        case NTBF_PP_START:
                if (p->client)
                        return refuse(p, NTBF_EPROTO, "data before this side's HELLO");
                want = NTBF_PP_HELLO, len = NTBF_PP_HELLO_LEN;
                break;
        case NTBF_PP_HELLO_SENT:
                want = NTBF_PP_WELCOME, len = NTBF_PP_WELCOME_LEN;
                break;
        case NTBF_PP_HELLO_SEEN:
        case NTBF_PP_CHALLENGED:
                want = NTBF_PP_PROOF, len = NTBF_PP_PROOF_LEN;
                break;
        default:
                if (type != NTBF_PP_MSG)
                        return refuse(p, NTBF_EPROTO, "frame type %u in an open session", type);
                return 0;
        }
        if (type != want)
                return refuse(p, NTBF_EPROTO, "expected %s, got frame type %u (%s)",
                              type_name(want), type, type_name(type));
        if (plen != len)
                return refuse(p, NTBF_EPROTO, "malformed %s: %u bytes of payload, not %u",
                              type_name(type), plen, len);
        if (seq || (type == NTBF_PP_HELLO && session))
                return refuse(p, NTBF_EPROTO, "malformed %s: a session or sequence number set",
                              type_name(type));
        return 0;
}

/* Server: a HELLO whose tag is the cluster key's, meant for this node by another one. */
static int take_hello(struct ntbf__pp *p, const uint8_t *f, struct ntbf__pp_event *ev)
{
        const uint8_t *pl = f + NTBF_PP_HDR;
        if (!tag_ok(p->key, f, NTBF_PP_HDR + NTBF_PP_HELLO_LEN))
                return refuse(p, NTBF_EAUTH, "HELLO not made with the cluster key");
        uint32_t idc = get32(pl + NTBF_PP_NONCE), ids = get32(pl + NTBF_PP_NONCE + 4);
        if (ids != p->self_id)
                return refuse(p, NTBF_EAUTH,
                              "HELLO meant for node id %u, not this node (id %u): replayed or "
                              "misdirected",
                              ids, p->self_id);
        if (idc == p->self_id)
                return refuse(p, NTBF_EAUTH, "HELLO claims to come from this node (id %u)", idc);
        memcpy(p->nonce_peer, pl, NTBF_PP_NONCE);
        p->peer_id = idc;
        consume(p, NTBF_PP_HDR + NTBF_PP_HELLO_LEN + NTBF_PP_TAG);
        p->state = NTBF_PP_HELLO_SEEN;
        ev->kind = NTBF_PP_EV_HELLO;
        return 1;
}

/* Client: the server's challenge, for our HELLO, from the node dialled. */
static int take_welcome(struct ntbf__pp *p, const uint8_t *f, struct ntbf__pp_event *ev)
{
        const uint8_t *pl = f + NTBF_PP_HDR;
        memcpy(p->nonce_peer, pl, NTBF_PP_NONCE);
        derive(p); /* with the ids this side expects: a WELCOME for others fails its tag */
        if (!tag_ok(p->k_rx, f, NTBF_PP_HDR + NTBF_PP_WELCOME_LEN))
                return refuse(p, NTBF_EAUTH,
                              "WELCOME not made with the cluster key for our HELLO to node id %u",
                              p->peer_id);
        if (get32(pl + NTBF_PP_NONCE) != p->peer_id || get32(pl + NTBF_PP_NONCE + 4) != p->self_id)
                return refuse(p, NTBF_EAUTH, "WELCOME names other nodes");
        if (get64(f + 16) != p->session)
                return refuse(p, NTBF_EAUTH, "WELCOME names another session");
        consume(p, NTBF_PP_HDR + NTBF_PP_WELCOME_LEN + NTBF_PP_TAG);
        int r = build(p->k_tx, NTBF_PP_PROOF, p->session, 0, NULL, 0, &ev->reply, &ev->reply_len);
        if (r)
                return refuse(p, r, "out of memory");
        p->state = NTBF_PP_OPEN;
        ev->kind = NTBF_PP_EV_OPEN;
        return 1;
}

/* Server: the client's answer to this connection's challenge. */
static int take_proof(struct ntbf__pp *p, const uint8_t *f, struct ntbf__pp_event *ev)
{
        if (!tag_ok(p->k_rx, f, NTBF_PP_HDR + NTBF_PP_PROOF_LEN) || get64(f + 16) != p->session)
                return refuse(p, NTBF_EAUTH,
                              "PROOF does not answer this connection's challenge (a replayed "
                              "HELLO, or another key)");
        consume(p, NTBF_PP_HDR + NTBF_PP_PROOF_LEN + NTBF_PP_TAG);
        p->state = NTBF_PP_OPEN;
        ev->kind = NTBF_PP_EV_OPEN;
        return 1;
}

int ntbf__pp_next(struct ntbf__pp *p, struct ntbf__pp_event *ev)
{
        memset(ev, 0, sizeof(*ev));
        if (p->pending) {
                consume(p, p->pending);
                p->pending = 0;
        }
        if (p->state == NTBF_PP_FAILED)
                return NTBF_EPROTO;
        if (p->len < NTBF_PP_HDR)
                return 0;
        const uint8_t *h = p->buf;
        /* The header is checked before waiting for the rest: a stranger never makes the
         * reader wait for (or buffer) a payload it could not accept anyway. */
        if (memcmp(h, magic, 4))
                return refuse(p, NTBF_EPROTO, "not an ntbfab peer frame (bad magic)");
        if (h[4] != NTBF_PP_VERSION)
                return refuse(p, NTBF_EPROTO, "peer protocol version %u, this daemon speaks %u",
                              h[4], NTBF_PP_VERSION);
        uint32_t plen = get32(h + 8);
        if (plen > NTBF_PP_MAX)
                return refuse(p, NTBF_EPROTO, "frame of %u bytes, more than the %u allowed", plen,
                              NTBF_PP_MAX);
        if (h[6] || h[7] || get32(h + 12))
                return refuse(p, NTBF_EPROTO, "reserved header bits set");
        if (p->state == NTBF_PP_HELLO_SEEN)
                return 0; /* the caller checks the HELLO's node first */
        int r = check_header(p, h);
        if (r)
                return r;
        size_t total = NTBF_PP_HDR + plen + NTBF_PP_TAG;
        if (p->len < total)
                return 0;
        switch (p->state) {
        case NTBF_PP_START:
                return take_hello(p, h, ev);
        case NTBF_PP_HELLO_SENT:
                return take_welcome(p, h, ev);
        case NTBF_PP_CHALLENGED:
                return take_proof(p, h, ev);
        default:
                break;
        }
        const uint8_t *payload = h + NTBF_PP_HDR;
        uint64_t session = get64(h + 16), seq = get64(h + 24);
        /* Authenticate first: nothing of an unauthenticated frame is believed, the sequence
         * number included. */
        if (!tag_ok(p->k_rx, h, NTBF_PP_HDR + plen))
                return refuse(p, NTBF_EAUTH,
                              session != p->session
                                  ? "frame of another session (replayed from an earlier one?)"
                                  : "frame fails authentication (tampered, or another key)");
        if (session != p->session)
                return refuse(p, NTBF_EAUTH, "frame names another session");
        if (seq != p->rx_seq + 1)
                return refuse(p, NTBF_EAUTH, "sequence number %llu where %llu was due (%s)",
                              (unsigned long long)seq, (unsigned long long)p->rx_seq + 1,
                              seq <= p->rx_seq ? "a replay" : "frames went missing");
        p->rx_seq = seq;
        ev->kind = NTBF_PP_EV_MSG;
        /* The payload stays in the buffer until the next call consumes it. */
        memmove(p->buf, payload, plen);
        memmove(p->buf + plen, p->buf + total, p->len - total);
        p->len = p->len - total + plen;
        ev->data = p->buf;
        ev->len = plen;
        p->pending = plen;
        return 1;
}

int ntbf__pp_seal(struct ntbf__pp *p, const void *payload, size_t n, uint8_t **out, size_t *len)
{
        if (p->state != NTBF_PP_OPEN)
                return -ENOTCONN;
        int r = build(p->k_tx, NTBF_PP_MSG, p->session, p->tx_seq + 1, payload, n, out, len);
        if (!r)
                p->tx_seq++;
        return r;
}
