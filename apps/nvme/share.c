/* apps/nvme/share.c: the manager/client protocol over the mailbox (ntbf_nvme_share.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "ntbf_nvme_share.h"

#define PG 4096u

_Static_assert(sizeof(struct ntbf_nvms_hdr) <= PG, "the header fits its page");
_Static_assert(sizeof(struct ntbf_nvms_lobby) == 160, "lobby entries are 160 bytes");
_Static_assert(sizeof(struct ntbf_nvms_slot) == 512, "slots are 512 bytes");
_Static_assert(offsetof(struct ntbf_nvms_slot, owner) % 64 == 0,
               "the manager's half of a slot starts a cache line of its own");

/* Where things are: the header page, the lobby, then the slots. */
#define LOBBY_OFF PG
#define SLOTS_OFF                                                                                  \
        (LOBBY_OFF + (((size_t)NTBF_NVMS_LOBBY * sizeof(struct ntbf_nvms_lobby) + PG - 1) &        \
                      ~(size_t)(PG - 1)))

size_t ntbf_nvms_mbox_bytes(uint32_t nslots)
{
        size_t b = SLOTS_OFF + (size_t)nslots * sizeof(struct ntbf_nvms_slot);
        return (b + PG - 1) & ~(size_t)(PG - 1);
}

/* ---- shared memory: aligned single loads and stores only ------------------------------------ */

static uint32_t ld32(volatile uint8_t *b, size_t off)
{
        return __atomic_load_n((volatile uint32_t *)(b + off), __ATOMIC_ACQUIRE);
}
static uint64_t ld64(volatile uint8_t *b, size_t off)
{
        return __atomic_load_n((volatile uint64_t *)(b + off), __ATOMIC_ACQUIRE);
}
static void st32(volatile uint8_t *b, size_t off, uint32_t v)
{
        __atomic_store_n((volatile uint32_t *)(b + off), v, __ATOMIC_RELEASE);
}
static void st64(volatile uint8_t *b, size_t off, uint64_t v)
{
        __atomic_store_n((volatile uint64_t *)(b + off), v, __ATOMIC_RELEASE);
}
/* Text into shared memory (NUL padded) and out of it (always terminated). */
static void st_str(volatile uint8_t *b, size_t off, size_t cap, const char *s)
{
        size_t n = strlen(s);
        for (size_t i = 0; i < cap; i++)
                b[off + i] = (uint8_t)(i < n && i + 1 < cap ? s[i] : 0);
}
static void ld_str(volatile uint8_t *b, size_t off, size_t cap, char *out, size_t outlen)
{
        size_t i = 0;
        for (; i < cap && i + 1 < outlen; i++) {
                char c = (char)b[off + i];
                if (!c)
                        break;
                out[i] = c >= 0x20 && c < 0x7f ? c : '?';
        }
        if (outlen)
                out[i] = 0;
}

#define HDR(f) offsetof(struct ntbf_nvms_hdr, f)
#define LOB(e, f)                                                                                  \
        (LOBBY_OFF + (size_t)(e) * sizeof(struct ntbf_nvms_lobby) +                                \
         offsetof(struct ntbf_nvms_lobby, f))
#define SLOT(s, f)                                                                                 \
        (SLOTS_OFF + (size_t)(s) * sizeof(struct ntbf_nvms_slot) +                                 \
         offsetof(struct ntbf_nvms_slot, f))

static uint64_t rnd64(void)
{
        uint64_t v = 0;
        if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
                v = ntbf_nvme_now_ns() * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)getpid();
        return v;
}

/* The lobby checksum: FNV-1a over what the client wrote, so a torn entry does not pass. */
static uint32_t lobby_chk(uint64_t nonce, uint32_t node, uint32_t pid, uint32_t gen)
{
        uint32_t w[5] = {(uint32_t)nonce, (uint32_t)(nonce >> 32), node, pid, gen};
        uint32_t h = 2166136261u;
        for (int i = 0; i < 5; i++)
                for (int k = 0; k < 4; k++) {
                        h ^= (w[i] >> (8 * k)) & 0xff;
                        h *= 16777619u;
                }
        return h | 1; /* never 0: an empty entry does not pass either */
}

#define PRINTF(f, a) __attribute__((format(printf, f, a)))

static void say(char *why, size_t len, const char *fmt, ...) PRINTF(3, 4);
static void say(char *why, size_t len, const char *fmt, ...)
{
        if (!why || !len)
                return;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
}

/* A request's checksum: a request written by a client that no longer owns the slot, or torn
 * by two writers, does not pass. */
static uint32_t req_chk(uint64_t nonce, uint32_t op, uint32_t seq, const uint64_t *a)
{
        uint32_t h = lobby_chk(nonce, op, seq, 0x5eed);
        for (int i = 0; i < 6; i++)
                h = lobby_chk((uint64_t)h << 32 ^ a[i], (uint32_t)(a[i] >> 32), h, (uint32_t)i);
        return h;
}

/* The upper half of a heartbeat: which client wrote it. */
static uint64_t beat_tag(uint64_t nonce)
{
        return (uint64_t)lobby_chk(nonce, 0, 0, 0xbea7) << 32;
}

/* ---- the manager ---------------------------------------------------------------------------- */

#define MAX_QP_PER_SLOT 16

struct ntbf_nvms_owner {
        bool used;
        uint64_t nonce;
        uint32_t node, pid;
        uint64_t beat, seen_ns; /* the last heartbeat value and when it changed */
        uint32_t seq;           /* the last request answered */
        uint16_t qids[MAX_QP_PER_SLOT];
        uint32_t nqids;
};

static void mlog(struct ntbf_nvms_manager *m, const char *fmt, ...) PRINTF(2, 3);
static void mlog(struct ntbf_nvms_manager *m, const char *fmt, ...)
{
        if (!m->log)
                return;
        char buf[320];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        m->log(m->log_arg, buf);
}

static void publish_counts(struct ntbf_nvms_manager *m)
{
        uint32_t clients = 0, pairs = 0;
        for (uint32_t s = 0; s < m->nslots; s++) {
                clients += m->owner[s].used;
                pairs += m->owner[s].nqids;
        }
        st32(m->mbox, HDR(clients), clients);
        st32(m->mbox, HDR(pairs), pairs);
        uint32_t peak = ld32(m->mbox, HDR(peak));
        st32(m->mbox, HDR(peak), !pairs ? 0 : pairs > peak ? pairs : peak);
}

int ntbf_nvms_manager_init(struct ntbf_nvms_manager *m, struct ntbf_nvme_ctrl *ctrl, void *mbox,
                           size_t size, uint32_t fdid, uint32_t lease_ms,
                           uint32_t max_qp_per_client)
{
        memset(m, 0, sizeof(*m));
        if (!ctrl || !ctrl->admin_up || !ctrl->io_queues || !mbox ||
            size < ntbf_nvms_mbox_bytes(ctrl->io_queues) || !lease_ms)
                return -EINVAL;
        m->ctrl = ctrl;
        m->mbox = mbox;
        m->size = size;
        m->nslots = ctrl->io_queues;
        m->lease_ns = (uint64_t)lease_ms * 1000000u;
        m->max_qp_per_client = max_qp_per_client ? max_qp_per_client : 4;
        if (m->max_qp_per_client > MAX_QP_PER_SLOT)
                m->max_qp_per_client = MAX_QP_PER_SLOT;
        m->owner = calloc(m->nslots, sizeof(*m->owner));
        m->qid_slot = malloc(((size_t)ctrl->io_queues + 1) * sizeof(*m->qid_slot));
        if (!m->owner || !m->qid_slot) {
                free(m->owner);
                free(m->qid_slot);
                return -ENOMEM;
        }
        for (uint32_t q = 0; q <= ctrl->io_queues; q++)
                m->qid_slot[q] = UINT32_MAX;
        volatile uint8_t *b = m->mbox;
        for (size_t i = 0; i < size; i += 8)
                st64(b, i, 0);
        st32(b, HDR(version), NTBF_NVMS_VERSION);
        st64(b, HDR(epoch), rnd64() | 1);
        st32(b, HDR(fdid), fdid);
        st32(b, HDR(nslots), m->nslots);
        st32(b, HDR(lobby), NTBF_NVMS_LOBBY);
        st32(b, HDR(lease_ms), lease_ms);
        st32(b, HDR(io_queues), ctrl->io_queues);
        st32(b, HDR(mqes), ctrl->mqes);
        st32(b, HDR(db_stride), ctrl->db_stride);
        st32(b, HDR(max_qp_per_client), m->max_qp_per_client);
        st32(b, HDR(nsid), ctrl->ns.nsid);
        st32(b, HDR(lba_shift), ctrl->ns.lba_shift);
        st32(b, HDR(mdts), ctrl->id.mdts);
        st64(b, HDR(nsze), ctrl->ns.nsze);
        st64(b, HDR(max_xfer), ctrl->ns.max_xfer);
        st_str(b, HDR(sn), sizeof(((struct ntbf_nvms_hdr *)0)->sn), ctrl->id.sn);
        st_str(b, HDR(mn), sizeof(((struct ntbf_nvms_hdr *)0)->mn), ctrl->id.mn);
        st_str(b, HDR(fr), sizeof(((struct ntbf_nvms_hdr *)0)->fr), ctrl->id.fr);
        /* Served generations start at what the (zeroed) lobby holds. */
        for (uint32_t e = 0; e < NTBF_NVMS_LOBBY; e++)
                m->served_gen[e] = 0;
        st32(b, HDR(state), NTBF_NVMS_READY);
        /* The magic last: a client that sees it sees everything above. */
        st32(b, HDR(magic), NTBF_NVMS_MAGIC);
        return 0;
}

/* Delete every pair slot s holds and free it. */
static void release_slot(struct ntbf_nvms_manager *m, uint32_t s, const char *why)
{
        struct ntbf_nvms_owner *o = &m->owner[s];
        char list[128] = "";
        size_t used = 0;
        for (uint32_t i = 0; i < o->nqids; i++) {
                uint16_t q = o->qids[i];
                int r = ntbf_nvme_delete_qp(m->ctrl, q);
                m->qid_slot[q] = UINT32_MAX;
                int w = snprintf(list + used, sizeof(list) - used, "%s%u%s", i ? ", " : "", q,
                                 r ? " (delete failed)" : "");
                if (w > 0 && (size_t)w < sizeof(list) - used)
                        used += (size_t)w;
        }
        if (o->nqids)
                mlog(m, "slot %u (node %u pid %u): %s; deleted queue pair%s %s", s, o->node, o->pid,
                     why, o->nqids == 1 ? "" : "s", list);
        else
                mlog(m, "slot %u (node %u pid %u): %s", s, o->node, o->pid, why);
        memset(o, 0, sizeof(*o));
        st64(m->mbox, SLOT(s, owner), 0);
        publish_counts(m);
}

static int serve_lobby(struct ntbf_nvms_manager *m, uint32_t e, uint64_t now)
{
        volatile uint8_t *b = m->mbox;
        uint32_t gen = ld32(b, LOB(e, gen));
        if (gen == m->served_gen[e])
                return 0;
        uint64_t nonce = ld64(b, LOB(e, nonce));
        uint32_t node = ld32(b, LOB(e, node)), pid = ld32(b, LOB(e, pid));
        uint32_t chk = ld32(b, LOB(e, chk));
        if (chk != lobby_chk(nonce, node, pid, gen))
                return 0; /* torn by two writers, or still being written: look again later */
        m->served_gen[e] = gen;
        char msg[NTBF_NVMS_LMSG];
        int status = 0;
        /*
         * A client asks again with the same nonce when it missed the answer (another client
         * wrote the same lobby entry before it read it): it gets the slot it was given.
         */
        uint32_t s = 0;
        while (s < m->nslots && !(m->owner[s].used && m->owner[s].nonce == nonce))
                s++;
        if (s < m->nslots) {
                snprintf(msg, sizeof(msg), "slot %u", s);
                mlog(m, "node %u pid %u asked again: still slot %u", node, pid, s);
                goto answer;
        }
        s = 0;
        while (s < m->nslots && m->owner[s].used)
                s++;
        if (s == m->nslots) {
                snprintf(msg, sizeof(msg),
                         "all %u client slots are taken (one per I/O queue pair); retry when a "
                         "client leaves",
                         m->nslots);
                status = -ENOSPC;
                m->refused++;
                mlog(m, "node %u pid %u refused: %s", node, pid, msg);
        } else {
                struct ntbf_nvms_owner *o = &m->owner[s];
                *o = (struct ntbf_nvms_owner){
                    .used = true, .nonce = nonce, .node = node, .pid = pid, .seen_ns = now};
                /* A fresh slot: sequence numbers and heartbeat from zero. */
                st64(b, SLOT(s, beat), beat_tag(nonce));
                st32(b, SLOT(s, seq), 0);
                st32(b, SLOT(s, rsp_seq), 0);
                st64(b, SLOT(s, owner), nonce);
                o->beat = beat_tag(nonce);
                snprintf(msg, sizeof(msg), "slot %u", s);
                m->joins++;
                mlog(m, "node %u pid %u joined as slot %u", node, pid, s);
                publish_counts(m);
        }
answer:
        st32(b, LOB(e, status), (uint32_t)status);
        st32(b, LOB(e, slot), s);
        st64(b, LOB(e, echo), nonce);
        st_str(b, LOB(e, msg), sizeof(msg), msg);
        st32(b, LOB(e, rsp_gen), gen);
        return 1;
}

static bool set_feature_allowed(uint8_t fid)
{
        /* Number of Queues is the manager's (set at reset, the slots follow from it); power
         * states and interrupts would change the controller under every other client. */
        return fid != NTBF_NVME_FEAT_NUM_QUEUES && fid != NTBF_NVME_FEAT_POWER_MGMT &&
               fid != NTBF_NVME_FEAT_IRQ_CONFIG && fid != NTBF_NVME_FEAT_IRQ_COALESCE;
}

/* Run the request of slot s; the result into status/dw0/qid/msg. */
static int run_request(struct ntbf_nvms_manager *m, uint32_t s, uint32_t op, const uint64_t *a,
                       uint32_t *dw0, uint32_t *qid, char *msg, size_t msglen)
{
        struct ntbf_nvms_owner *o = &m->owner[s];
        struct ntbf_nvme_ctrl *c = m->ctrl;
        int r;
        switch (op) {
        case NTBF_NVMS_OP_CREATE_QP: {
                uint32_t sqe = (uint32_t)a[2], cqe = (uint32_t)a[3];
                if (sqe < 2 || cqe < 2 || sqe > c->mqes || cqe > c->mqes) {
                        say(msg, msglen, "queue sizes %u/%u are outside 2..%u", sqe, cqe, c->mqes);
                        return -EINVAL;
                }
                if (o->nqids >= m->max_qp_per_client) {
                        say(msg, msglen,
                            "this client already holds %u queue pairs, the most a client may "
                            "hold; delete one first",
                            o->nqids);
                        return -ENOSPC;
                }
                uint16_t q = 1;
                while (q <= c->io_queues && m->qid_slot[q] != UINT32_MAX)
                        q++;
                if (q > c->io_queues) {
                        uint32_t holders = 0;
                        for (uint32_t i = 0; i < m->nslots; i++)
                                holders += m->owner[i].nqids > 0;
                        say(msg, msglen,
                            "all %u I/O queue pairs of the controller are in use (by %u "
                            "client%s); a pair frees when its client deletes it, leaves or "
                            "its lease expires",
                            c->io_queues, holders, holders == 1 ? "" : "s");
                        m->refused++;
                        return -ENOSPC;
                }
                r = ntbf_nvme_create_qp(c, q, sqe, cqe, a[0], a[1]);
                if (r) {
                        say(msg, msglen, "creating queue pair %u: %s", q, ntbf_nvme_strstatus(r));
                        return r;
                }
                m->qid_slot[q] = s;
                o->qids[o->nqids++] = q;
                *qid = q;
                mlog(m,
                     "slot %u (node %u pid %u): created queue pair %u (SQ %u entries at 0x%" PRIx64
                     ", CQ %u at 0x%" PRIx64 ")",
                     s, o->node, o->pid, q, sqe, a[0], cqe, a[1]);
                publish_counts(m);
                return 0;
        }
        case NTBF_NVMS_OP_DELETE_QP: {
                uint64_t q = a[0];
                if (q == 0 || q > c->io_queues || m->qid_slot[q] != s) {
                        say(msg, msglen, "queue pair %" PRIu64 " is not this client's", q);
                        return -ENOENT;
                }
                r = ntbf_nvme_delete_qp(c, (uint16_t)q);
                m->qid_slot[q] = UINT32_MAX;
                for (uint32_t i = 0; i < o->nqids; i++)
                        if (o->qids[i] == q) {
                                o->qids[i] = o->qids[--o->nqids];
                                break;
                        }
                mlog(m, "slot %u (node %u pid %u): deleted queue pair %" PRIu64 "%s", s, o->node,
                     o->pid, q, r ? " (the controller refused)" : "");
                publish_counts(m);
                if (r)
                        say(msg, msglen, "deleting queue pair %" PRIu64 ": %s", q,
                            ntbf_nvme_strstatus(r));
                return r;
        }
        case NTBF_NVMS_OP_IDENTIFY:
                r = ntbf_nvme_identify(c, (uint8_t)a[0], (uint32_t)a[1], a[2]);
                break;
        case NTBF_NVMS_OP_GET_FEATURES:
                r = ntbf_nvme_get_features(c, (uint8_t)a[0], (uint32_t)a[1], a[2], dw0);
                break;
        case NTBF_NVMS_OP_SET_FEATURES:
                if (!set_feature_allowed((uint8_t)a[0])) {
                        say(msg, msglen,
                            "Set Features 0x%02x changes the controller under every client; "
                            "only the manager sets it",
                            (unsigned)(uint8_t)a[0]);
                        return -EPERM;
                }
                r = ntbf_nvme_set_features(c, (uint8_t)a[0], (uint32_t)a[1], (uint32_t)a[2], dw0);
                break;
        case NTBF_NVMS_OP_GET_LOG_PAGE:
                r = ntbf_nvme_get_log_page(c, (uint8_t)a[0], (uint32_t)a[1], (uint32_t)a[2], a[3]);
                break;
        case NTBF_NVMS_OP_BYE:
                release_slot(m, s, "left");
                return 0;
        default:
                say(msg, msglen, "unknown request %u", op);
                return -EINVAL;
        }
        if (r)
                say(msg, msglen, "%s", ntbf_nvme_strstatus(r));
        return r;
}

static int serve_slot(struct ntbf_nvms_manager *m, uint32_t s, uint64_t now)
{
        volatile uint8_t *b = m->mbox;
        struct ntbf_nvms_owner *o = &m->owner[s];
        uint64_t beat = ld64(b, SLOT(s, beat));
        /* Only the owner's heartbeats count: a client the slot was taken from may still beat. */
        if (beat != o->beat && (beat & ~UINT64_C(0xffffffff)) == beat_tag(o->nonce)) {
                o->beat = beat;
                o->seen_ns = now;
        }
        uint32_t seq = ld32(b, SLOT(s, seq));
        uint32_t op = 0;
        uint64_t a[6] = {0}, nonce = 0;
        if (seq != o->seq) {
                op = ld32(b, SLOT(s, op));
                for (int i = 0; i < 6; i++)
                        a[i] = ld64(b, SLOT(s, a) + 8u * (unsigned)i);
                nonce = ld64(b, SLOT(s, nonce));
        }
        /* Not the owner's, or not whole yet: not served (looked at again next time). */
        if (seq != o->seq && nonce == o->nonce &&
            ld32(b, SLOT(s, chk)) == req_chk(nonce, op, seq, a)) {
                /* A request renews the lease as a heartbeat does. */
                o->seen_ns = now;
                uint32_t dw0 = 0, qid = 0;
                char msg[NTBF_NVMS_MSG] = "";
                int status = run_request(m, s, op, a, &dw0, &qid, msg, sizeof(msg));
                m->requests++;
                st32(b, SLOT(s, status), (uint32_t)status);
                st32(b, SLOT(s, dw0), dw0);
                st32(b, SLOT(s, qid), qid);
                st_str(b, SLOT(s, msg), NTBF_NVMS_MSG, msg);
                st32(b, SLOT(s, rsp_seq), seq);
                if (op != NTBF_NVMS_OP_BYE)
                        o->seq = seq;
                return 1;
        }
        if (now - o->seen_ns > m->lease_ns) {
                char why[64];
                snprintf(why, sizeof(why), "lease expired (no heartbeat for %" PRIu64 " ms)",
                         (now - o->seen_ns) / 1000000u);
                m->expired++;
                release_slot(m, s, why);
                return 1;
        }
        return 0;
}

int ntbf_nvms_manager_step(struct ntbf_nvms_manager *m, uint64_t now_ns)
{
        int work = 0;
        if (now_ns - m->last_beat_ns >= 1000000u) {
                st64(m->mbox, HDR(beat), ld64(m->mbox, HDR(beat)) + 1);
                m->last_beat_ns = now_ns;
        }
        for (uint32_t e = 0; e < NTBF_NVMS_LOBBY; e++)
                work += serve_lobby(m, e, now_ns);
        for (uint32_t s = 0; s < m->nslots; s++)
                if (m->owner[s].used)
                        work += serve_slot(m, s, now_ns);
        return work;
}

void ntbf_nvms_manager_fini(struct ntbf_nvms_manager *m)
{
        if (!m->owner)
                return;
        st32(m->mbox, HDR(state), NTBF_NVMS_STOPPED);
        for (uint32_t s = 0; s < m->nslots; s++)
                if (m->owner[s].used)
                        release_slot(m, s, "the manager stops");
        free(m->owner);
        free(m->qid_slot);
        m->owner = NULL;
        m->qid_slot = NULL;
}

/* ---- a client ------------------------------------------------------------------------------- */

static void read_hdr(volatile uint8_t *b, struct ntbf_nvms_hdr *h)
{
        memset(h, 0, sizeof(*h));
        h->magic = ld32(b, HDR(magic));
        h->version = ld32(b, HDR(version));
        h->epoch = ld64(b, HDR(epoch));
        h->beat = ld64(b, HDR(beat));
        h->state = ld32(b, HDR(state));
        h->fdid = ld32(b, HDR(fdid));
        h->nslots = ld32(b, HDR(nslots));
        h->lobby = ld32(b, HDR(lobby));
        h->lease_ms = ld32(b, HDR(lease_ms));
        h->io_queues = ld32(b, HDR(io_queues));
        h->mqes = ld32(b, HDR(mqes));
        h->db_stride = ld32(b, HDR(db_stride));
        h->max_qp_per_client = ld32(b, HDR(max_qp_per_client));
        h->nsid = ld32(b, HDR(nsid));
        h->lba_shift = ld32(b, HDR(lba_shift));
        h->mdts = ld32(b, HDR(mdts));
        h->nsze = ld64(b, HDR(nsze));
        h->max_xfer = ld64(b, HDR(max_xfer));
        ld_str(b, HDR(sn), sizeof(h->sn), h->sn, sizeof(h->sn));
        ld_str(b, HDR(mn), sizeof(h->mn), h->mn, sizeof(h->mn));
        ld_str(b, HDR(fr), sizeof(h->fr), h->fr, sizeof(h->fr));
        h->clients = ld32(b, HDR(clients));
        h->pairs = ld32(b, HDR(pairs));
}

static void client_wait_init(struct ntbf_nvms_client *cl, const struct ntbf_nvme_wait *w)
{
        if (w) {
                cl->wait = *w;
        } else {
                ntbf_nvme_wait_default(&cl->wait);
                cl->wait.timeout_ms = 10000; /* admin work behind other clients' requests */
                cl->wait.nap_ns = 50000;
        }
}

int ntbf_nvms_client_attach(struct ntbf_nvms_client *cl, volatile void *mbox, size_t size,
                            uint32_t node, uint32_t pid, const struct ntbf_nvme_wait *w, char *why,
                            size_t whylen)
{
        memset(cl, 0, sizeof(*cl));
        client_wait_init(cl, w);
        cl->mbox = mbox;
        cl->size = size;
        volatile uint8_t *b = cl->mbox;
        if (size < ntbf_nvms_mbox_bytes(0)) {
                say(why, whylen, "the mailbox is %zu bytes, too small to be one", size);
                return -EPROTO;
        }
        read_hdr(b, &cl->hdr);
        if (cl->hdr.magic == UINT32_MAX) {
                say(why, whylen,
                    "the manager's mailbox reads all ones: the path to it is down or "
                    "the manager is gone");
                return -ENOTCONN;
        }
        if (cl->hdr.magic != NTBF_NVMS_MAGIC || cl->hdr.version != NTBF_NVMS_VERSION) {
                say(why, whylen,
                    "the segment is not an NVMe manager's mailbox of version %u (magic 0x%08x, "
                    "version %u)",
                    NTBF_NVMS_VERSION, cl->hdr.magic, cl->hdr.version);
                return -EPROTO;
        }
        if (cl->hdr.state != NTBF_NVMS_READY) {
                say(why, whylen, "the manager is %s",
                    cl->hdr.state == NTBF_NVMS_STOPPED ? "stopped" : "not ready yet");
                return -EAGAIN;
        }
        if (size < ntbf_nvms_mbox_bytes(cl->hdr.nslots) || cl->hdr.lobby != NTBF_NVMS_LOBBY) {
                say(why, whylen, "the mailbox (%zu bytes) does not hold its %u slots", size,
                    cl->hdr.nslots);
                return -EPROTO;
        }
        cl->epoch = cl->hdr.epoch;
        cl->ns =
            (struct ntbf_nvme_ns){cl->hdr.nsid, cl->hdr.nsze, cl->hdr.lba_shift, cl->hdr.max_xfer};
        /*
         * A few tries in random lobby entries; a taken entry shows another nonce. Every try
         * carries the same nonce: if the manager served one whose answer another client's
         * request overwrote, it answers the next with the same slot (no slot is lost).
         */
        uint64_t nonce = rnd64();
        for (int attempt = 0; attempt < 6; attempt++) {
                uint64_t r = rnd64();
                uint32_t e = (uint32_t)(r % NTBF_NVMS_LOBBY);
                uint32_t gen = (uint32_t)(r >> 32);
                if (!gen || gen == ld32(b, LOB(e, rsp_gen)))
                        gen = gen * 2654435761u + 7;
                st64(b, LOB(e, nonce), nonce);
                st32(b, LOB(e, node), node);
                st32(b, LOB(e, pid), pid);
                st32(b, LOB(e, chk), lobby_chk(nonce, node, pid, gen));
                st32(b, LOB(e, gen), gen);
                struct ntbf_nvme_wait lw = cl->wait;
                lw.timeout_ms = lw.timeout_ms / 2 + 1;
                for (uint64_t t0 = ntbf_nvme_now_ns();;) {
                        if (ld32(b, LOB(e, rsp_gen)) == gen) {
                                if (ld64(b, LOB(e, echo)) != nonce)
                                        break; /* another client's: try elsewhere */
                                int st = (int)ld32(b, LOB(e, status));
                                if (st) {
                                        char msg[NTBF_NVMS_MSG];
                                        ld_str(b, LOB(e, msg), NTBF_NVMS_LMSG, msg, sizeof(msg));
                                        say(why, whylen, "%s", msg);
                                        return st;
                                }
                                cl->slot = ld32(b, LOB(e, slot));
                                if (cl->slot >= cl->hdr.nslots) {
                                        say(why, whylen, "the manager gave slot %u of %u", cl->slot,
                                            cl->hdr.nslots);
                                        return -EPROTO;
                                }
                                cl->nonce = nonce;
                                cl->seq = 0;
                                cl->beat = 0;
                                return 0;
                        }
                        if (ld32(b, HDR(magic)) != NTBF_NVMS_MAGIC) {
                                say(why, whylen, "the manager's mailbox went away while joining");
                                return -ENOTCONN;
                        }
                        if (ntbf_nvme_wait_step(&lw, t0))
                                break;
                }
        }
        say(why, whylen,
            "the manager of fdid 0x%x did not answer in %u ms; is 'ntbfab-nvme manager' running "
            "and its heartbeat advancing?",
            cl->hdr.fdid, cl->wait.timeout_ms);
        return -ETIMEDOUT;
}

void ntbf_nvms_client_rebase(struct ntbf_nvms_client *cl, volatile void *mbox)
{
        cl->mbox = mbox;
}

void ntbf_nvms_client_beat(struct ntbf_nvms_client *cl)
{
        cl->beat = (cl->beat + 1) & 0xffffffffu;
        st64(cl->mbox, SLOT(cl->slot, beat), beat_tag(cl->nonce) | cl->beat);
}

void ntbf_nvms_client_counts(const struct ntbf_nvms_client *cl, uint32_t *clients, uint32_t *pairs)
{
        *clients = ld32(cl->mbox, HDR(clients));
        *pairs = ld32(cl->mbox, HDR(pairs));
}

uint32_t ntbf_nvms_client_peak(const struct ntbf_nvms_client *cl)
{
        return ld32(cl->mbox, HDR(peak));
}

bool ntbf_nvms_client_manager_ok(const struct ntbf_nvms_client *cl)
{
        return ld32(cl->mbox, HDR(magic)) == NTBF_NVMS_MAGIC &&
               ld64(cl->mbox, HDR(epoch)) == cl->epoch &&
               ld32(cl->mbox, HDR(state)) == NTBF_NVMS_READY;
}

/* One request: arguments, op, then the sequence number; wait for the same number back. */
static int request(struct ntbf_nvms_client *cl, uint32_t op, const uint64_t *a, unsigned na,
                   uint32_t *dw0, uint32_t *qid, char *why, size_t whylen)
{
        volatile uint8_t *b = cl->mbox;
        uint32_t s = cl->slot;
        if (!ntbf_nvms_client_manager_ok(cl)) {
                say(why, whylen,
                    "the manager this client joined is gone or restarted (the controller was "
                    "reset and every queue pair with it); join again");
                return -ENOTCONN;
        }
        if (ld64(b, SLOT(s, owner)) != cl->nonce) {
                say(why, whylen,
                    "this client's slot was taken back (its lease expired): its queue pairs were "
                    "deleted; join again");
                return -ENOTCONN;
        }
        uint64_t args[6];
        for (unsigned i = 0; i < 6; i++)
                args[i] = i < na ? a[i] : 0;
        uint32_t seq = ++cl->seq;
        if (!seq)
                seq = ++cl->seq; /* 0 is a fresh slot's */
        for (unsigned i = 0; i < 6; i++)
                st64(b, SLOT(s, a) + 8u * i, args[i]);
        st32(b, SLOT(s, op), op);
        st64(b, SLOT(s, nonce), cl->nonce);
        st32(b, SLOT(s, chk), req_chk(cl->nonce, op, seq, args));
        st32(b, SLOT(s, seq), seq);
        for (uint64_t t0 = ntbf_nvme_now_ns();;) {
                if (ld32(b, SLOT(s, rsp_seq)) == seq)
                        break;
                if (ntbf_nvme_wait_step(&cl->wait, t0)) {
                        say(why, whylen, "the manager did not answer request %u in %u ms", op,
                            cl->wait.timeout_ms);
                        return -ETIMEDOUT;
                }
        }
        int st = (int)ld32(b, SLOT(s, status));
        if (dw0)
                *dw0 = ld32(b, SLOT(s, dw0));
        if (qid)
                *qid = ld32(b, SLOT(s, qid));
        if (st && why)
                ld_str(b, SLOT(s, msg), NTBF_NVMS_MSG, why, whylen);
        return st;
}

int ntbf_nvms_create_qp(struct ntbf_nvms_client *cl, uint32_t sq_entries, uint32_t cq_entries,
                        uint64_t sq_io, uint64_t cq_io, uint16_t *qid, char *why, size_t whylen)
{
        uint64_t a[] = {sq_io, cq_io, sq_entries, cq_entries};
        uint32_t q = 0;
        int r = request(cl, NTBF_NVMS_OP_CREATE_QP, a, 4, NULL, &q, why, whylen);
        if (!r)
                *qid = (uint16_t)q;
        return r;
}

int ntbf_nvms_delete_qp(struct ntbf_nvms_client *cl, uint16_t qid, char *why, size_t whylen)
{
        uint64_t a[] = {qid};
        return request(cl, NTBF_NVMS_OP_DELETE_QP, a, 1, NULL, NULL, why, whylen);
}

int ntbf_nvms_identify(struct ntbf_nvms_client *cl, uint8_t cns, uint32_t nsid, uint64_t buf_io,
                       char *why, size_t whylen)
{
        uint64_t a[] = {cns, nsid, buf_io};
        return request(cl, NTBF_NVMS_OP_IDENTIFY, a, 3, NULL, NULL, why, whylen);
}

int ntbf_nvms_get_features(struct ntbf_nvms_client *cl, uint8_t fid, uint32_t cdw11,
                           uint64_t buf_io, uint32_t *dw0, char *why, size_t whylen)
{
        uint64_t a[] = {fid, cdw11, buf_io};
        return request(cl, NTBF_NVMS_OP_GET_FEATURES, a, 3, dw0, NULL, why, whylen);
}

int ntbf_nvms_set_features(struct ntbf_nvms_client *cl, uint8_t fid, uint32_t cdw11, uint32_t cdw12,
                           uint32_t *dw0, char *why, size_t whylen)
{
        uint64_t a[] = {fid, cdw11, cdw12};
        return request(cl, NTBF_NVMS_OP_SET_FEATURES, a, 3, dw0, NULL, why, whylen);
}

int ntbf_nvms_get_log_page(struct ntbf_nvms_client *cl, uint8_t lid, uint32_t nsid, uint32_t len,
                           uint64_t buf_io, char *why, size_t whylen)
{
        uint64_t a[] = {lid, nsid, len, buf_io};
        return request(cl, NTBF_NVMS_OP_GET_LOG_PAGE, a, 4, NULL, NULL, why, whylen);
}

int ntbf_nvms_client_detach(struct ntbf_nvms_client *cl)
{
        if (!cl->mbox)
                return 0;
        char why[NTBF_NVMS_MSG];
        int r = ntbf_nvms_client_manager_ok(cl)
                    ? request(cl, NTBF_NVMS_OP_BYE, NULL, 0, NULL, NULL, why, sizeof(why))
                    : 0;
        cl->mbox = NULL;
        return r;
}
