/* daemon/peerproto.h: the peer protocol's frames, handshake and authentication (docs/peer.md). */
#ifndef NTBF_DAEMON_PEERPROTO_H
#define NTBF_DAEMON_PEERPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Pure code (no sockets, no clock): one struct ntbf__pp per TCP connection turns bytes into
 * authenticated messages and messages into frames, so that it can be unit tested and fuzzed
 * on its own. The socket side (peer.c) feeds what it reads and writes what this returns.
 *
 * Frame: a 32-byte header, the payload, a 32-byte HMAC-SHA-256 tag. Header (big endian):
 *   0  magic "NTBP"   4  version (2)   5  type   6  flags (0)   8  payload length
 *   12 reserved (0)   16 session id (8 bytes)   24 sequence number (8 bytes)
 *
 * The handshake (docs/peer.md): HELLO (client nonce, client id, the server's id it is meant
 * for), WELCOME (the server's fresh nonce: the challenge), PROOF (the client's answer). The
 * server opens the session only on a PROOF, which needs the key and the server's nonce of
 * this very connection: a recorded HELLO replayed opens nothing.
 */
#define NTBF_PP_HDR         32
#define NTBF_PP_TAG         32
#define NTBF_PP_NONCE       32
#define NTBF_PP_MAX         (1u << 20) /* largest payload */
#define NTBF_PP_VERSION     2
#define NTBF_PP_KEY_BYTES   32
#define NTBF_PP_HELLO_LEN   (NTBF_PP_NONCE + 8) /* nonce, client id, server id */
#define NTBF_PP_WELCOME_LEN (NTBF_PP_NONCE + 8) /* nonce, server id, client id */
#define NTBF_PP_PROOF_LEN   0
/* Bytes buffered before the session is open: the largest handshake frame, twice. */
#define NTBF_PP_HS_BUF      (2 * (NTBF_PP_HDR + NTBF_PP_HELLO_LEN + NTBF_PP_TAG))

enum ntbf__pp_type {
        NTBF_PP_HELLO = 1,   /* client -> server: client nonce, client id, server id */
        NTBF_PP_WELCOME = 2, /* server -> client: server nonce (the challenge), both ids */
        NTBF_PP_MSG = 3,     /* either way, once the session is open */
        NTBF_PP_PROOF = 4,   /* client -> server: the answer to the challenge */
};

enum ntbf__pp_state {
        NTBF_PP_START,      /* server: waiting for HELLO; client: HELLO not built yet */
        NTBF_PP_HELLO_SENT, /* client: waiting for WELCOME */
        NTBF_PP_HELLO_SEEN, /* server: HELLO good, its ids for the caller to check */
        NTBF_PP_CHALLENGED, /* server: WELCOME sent, waiting for PROOF */
        NTBF_PP_OPEN,       /* messages flow */
        NTBF_PP_FAILED,     /* a frame was refused: the connection must be dropped */
};

struct ntbf__pp {
        bool client;
        enum ntbf__pp_state state;
        uint8_t key[NTBF_PP_KEY_BYTES]; /* the cluster key */
        uint32_t self_id, peer_id;      /* SISCI node ids; client: peer_id is the one it dials */
        uint8_t nonce_self[NTBF_PP_NONCE], nonce_peer[NTBF_PP_NONCE];
        uint8_t k_tx[32], k_rx[32]; /* session keys, one per direction */
        uint64_t session;
        uint64_t tx_seq, rx_seq; /* last sent / last accepted */
        uint8_t *buf;            /* received bytes not yet consumed */
        size_t len, cap;
        size_t pending; /* bytes at buf of the payload last returned, dropped by the next call */
        char why[256];  /* why the last frame was refused */
};

/* An outcome of ntbf__pp_next. */
struct ntbf__pp_event {
        enum {
                NTBF_PP_EV_HELLO, /* server: a good HELLO from peer_id; check it, then
                                     ntbf__pp_welcome (or drop the connection) */
                NTBF_PP_EV_OPEN,  /* the session is open */
                NTBF_PP_EV_MSG,
        } kind;
        const uint8_t *data; /* MSG: the payload, valid until the next call */
        size_t len;
        uint8_t *reply; /* OPEN on the client: the PROOF frame to send (caller frees) */
        size_t reply_len;
};

/* Set up one side of a connection. nonce: NULL to draw one from libsodium (tests pass one). */
int ntbf__pp_init(struct ntbf__pp *p, bool client, const uint8_t key[NTBF_PP_KEY_BYTES],
                  uint32_t self_id, const uint8_t *nonce);
void ntbf__pp_free(struct ntbf__pp *p);

/* Client: the HELLO frame for the server with node id server_id (caller frees). */
int ntbf__pp_hello(struct ntbf__pp *p, uint32_t server_id, uint8_t **out, size_t *len);

/* Server, after NTBF_PP_EV_HELLO and the caller's check of peer_id: the WELCOME to send. */
int ntbf__pp_welcome(struct ntbf__pp *p, uint8_t **out, size_t *len);

/* Append received bytes. -E2BIG if more than one frame's worth is buffered (before the
 * session is open: more than NTBF_PP_HS_BUF bytes). */
int ntbf__pp_feed(struct ntbf__pp *p, const void *data, size_t n);

/*
 * Take the next complete frame: 1 with ev filled, 0 when more bytes are needed (or, after
 * NTBF_PP_EV_HELLO, until ntbf__pp_welcome), or a negative code when the frame is refused
 * (NTBF_EAUTH: bad tag, wrong key, wrong session or node, replayed or reordered sequence
 * number; NTBF_EPROTO: malformed); p->why says which and the connection must be dropped: the
 * state is then FAILED and nothing else is accepted. A header that cannot start a frame
 * acceptable now (bad magic, version, type, or a length the state does not allow) is refused
 * as soon as its 32 bytes are in, before the payload is waited for.
 */
int ntbf__pp_next(struct ntbf__pp *p, struct ntbf__pp_event *ev);

/* Seal a message for the open session (caller frees *out). */
int ntbf__pp_seal(struct ntbf__pp *p, const void *payload, size_t n, uint8_t **out, size_t *len);

/* Bytes of the frame that starts buf (header only needed), or 0 if the header is incomplete. */
size_t ntbf__pp_frame_len(const uint8_t *buf, size_t n);

#endif
