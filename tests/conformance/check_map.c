/* tests/conformance/check_map.c: CPU mappings of a window as their users hold them: part of a
 * slot, kept while the slot changes, and made by another process than the one that programmed.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"

/* What these checks need: a CPU mapping of A's window (they are about mappings), and the
 * first slot of A the suite may program, with its window. */
static int need_map(struct cf_run *r, uint32_t *slot, uint32_t *win, const struct ntbf_window **W)
{
        struct cf_ad *a = r->p->a;
        if (!(a->caps.flags & NTBF_CAP_CPU_MAP) || r->cx->dma_only)
                CF_SKIP(r, "%s: %s", a->name,
                        r->cx->dma_only ? "--access dma" : "not claimed: NTBF_CAP_CPU_MAP");
        *slot = cf_slot(a, 0);
        *W = cf_slot_window(a, *slot, win);
        if (!*W)
                CF_SKIP(r, "%s: no slot the suite may program", a->name);
        return 0;
}

/* Map [off, off + size) of A's window win; the mapping is undone when the check ends. */
static int map(struct cf_run *r, uint32_t win, uint64_t off, uint64_t size, uint8_t **p)
{
        struct cf_ad *a = r->p->a;
        void *addr = NULL;
        CF_OK(r, r->cx->ops->map_window(a->h, win, off, size, 0, &addr),
              "%s: map_window(window %u, offset %#llx, %llu bytes)", a->name, win,
              (unsigned long long)off, (unsigned long long)size);
        CF_TRUE(r, addr != NULL, "%s: map_window returned a NULL address", a->name);
        cf_undo_map(r, a, addr, size);
        *p = addr;
        return 0;
}

/* Wait (bounded) until the 8 bytes at q hold want: a posted write may still be on its way. */
static bool arrives(struct cf_run *r, const uint8_t *q, uint64_t want)
{
        for (double t0 = cf_now_ms(); cf_now_ms() - t0 < r->cx->timeout_ms; cf_sleep_us(100))
                if (cf_load64(q) == want)
                        return true;
        return false;
}

/*
 * A mapping of one page in the middle of a slot reaches the far-side block at that offset:
 * map_window's offset is a byte offset in the window, not a slot number, and a backend that
 * maps from the slot's start (or from the window's) writes elsewhere.
 */
int cf_check_map_offset(struct cf_run *r)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a;
        uint32_t slot, win;
        const struct ntbf_window *W;
        CF_TRY(need_map(r, &slot, &win, &W));
        uint64_t xs = cf_xsize(a, slot), k = (xs / 2) & ~UINT64_C(4095);
        if (!k)
                CF_SKIP(r, "%s: a slot translates less than two pages (%llu bytes)", a->name,
                        (unsigned long long)xs);
        struct cf_target tg;
        CF_TRY(cf_target(r, p, slot, 1, &tg));
        uint8_t *blk = tg.mem.addr, *q;
        memset(blk, 0, 4096);
        memset(blk + k, 0, 4096);
        uint64_t off = tg.addr - W->base + k;
        CF_TRY(map(r, win, off, 4096, &q));
        uint64_t p0 = cf_pattern(slot, 40), p1 = cf_pattern(slot, 41);
        cf_store64(q, p0);
        cf_store64(q + 4096 - 8, p1);
        CF_TRUE(r, arrives(r, blk + k, p0),
                "%s: a store at the start of a mapping of window %u at offset %#llx (%#llx into "
                "slot %u) did not reach its far-side block at %#llx: it holds %#llx",
                a->name, win, (unsigned long long)off, (unsigned long long)k, slot,
                (unsigned long long)k, (unsigned long long)cf_load64(blk + k));
        CF_EQ(r, cf_load64(blk + k + 4096 - 8), p1,
              "%s: the last 8 bytes of the mapped page, at %#llx of slot %u's block", a->name,
              (unsigned long long)(k + 4096 - 8), slot);
        for (uint64_t i = 0; i < 4096; i++)
                if (blk[i])
                        CF_FAIL(r,
                                "%s: byte %#llx of slot %u's block is %#x, expected 0: the "
                                "mapping at %#llx into the slot wrote to the slot's start",
                                a->name, (unsigned long long)i, slot, blk[i],
                                (unsigned long long)k);
        CF_EQ(r, cf_load64(q), p0, "%s: a load at the start of the mapping in the slot", a->name);
        return 0;
}

/*
 * A mapping made before a slot is programmed again follows the slot: stores through it reach
 * the new far-side block, loads read it, and the old block is left alone. Users keep their
 * mappings for the life of a borrow while the daemon reprograms slots underneath.
 */
int cf_check_map_live(struct cf_run *r)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a;
        uint32_t slot, win;
        const struct ntbf_window *W;
        CF_TRY(need_map(r, &slot, &win, &W));
        if (!(a->caps.flags & NTBF_CAP_MAP_LIVE))
                CF_SKIP(r,
                        "not claimed: %s does not claim NTBF_CAP_MAP_LIVE (its mappings hold "
                        "what their slots led to when they were made)",
                        a->name);
        if (r->cx->fixed_windows)
                CF_SKIP(r,
                        "the hardware under test translates slot %u only to one fixed address "
                        "(--fixed-windows): there is no other block to program it onto",
                        slot);
        bool inbound = false;
        CF_TRY(cf_slot_how(r, p, &inbound));
        struct cf_target tg;
        CF_TRY(cf_target(r, p, slot, 1, &tg));
        struct ntbf_mem m2;
        uint64_t al = cf_xalign(a, slot, tg.xs);
        CF_TRY(cf_far_mem(r, p->b, tg.E, al > tg.E ? al : tg.E, &m2));
        uint8_t *b1 = tg.mem.addr, *b2 = m2.addr, *q;
        memset(b1, 0, 4096);
        memset(b2, 0, 4096);
        CF_TRY(map(r, win, tg.addr - W->base, 4096, &q));
        uint64_t p1 = cf_pattern(slot, 50), p2 = cf_pattern(slot, 51);
        cf_store64(q, p1);
        CF_TRUE(r, arrives(r, b1, p1),
                "%s: a store through the mapping did not reach slot %u's "
                "first block",
                a->name, slot);
        /* Programmed again, onto the second block; the mapping stays. */
        struct ntbf_xlat x = {p->b->node, p->b->idx, m2.bus_addr, NTBF_NONE, tg.xs};
        CF_TRY(cf_slot_set(r, p, inbound, slot, &x));
        cf_store64(q + 8, p2);
        CF_TRUE(r, arrives(r, b2 + 8, p2),
                "%s: after slot %u was programmed onto another block, a store through a mapping "
                "made before did not reach the new block (it holds %#llx; the old one %#llx at "
                "that offset)",
                a->name, slot, (unsigned long long)cf_load64(b2 + 8),
                (unsigned long long)cf_load64(b1 + 8));
        CF_EQ(r, cf_load64(b1 + 8), 0,
              "%s: slot %u's old block after a store through the live mapping (the mapping "
              "still reaches where the slot led before)",
              a->name, slot);
        cf_store64(b2, p2 ^ 1);
        CF_EQ(r, cf_load64(q), p2 ^ 1,
              "%s: a load through the live mapping after slot %u changed (the new block's "
              "first 8 bytes)",
              a->name, slot);
        return 0;
}

/*
 * The child's side of map.process: open the backend anew, probe A, map the slot, check the
 * parent's pattern, store its own, undo all of it. 0, or 1 with the reason in why.
 */
/*
 * The relay of a backend whose hardware has one owner (linux-ntb): the second process asks
 * this one, as a node's processes ask its daemon (struct ntbf_backend_relay), over a socket
 * pair. A request is its adapter and the backend's bytes; an answer serve's result, its bytes
 * and its descriptors.
 */
struct relay_msg {
        int32_t rc;
        uint32_t adapter;
        uint32_t len;
        uint32_t pad;
        uint8_t data[256];
};

static ssize_t relay_send(int sock, const struct relay_msg *m, const int *fds, unsigned nfds)
{
        struct iovec iov = {(void *)m, sizeof(*m)};
        union {
                char buf[CMSG_SPACE(2 * sizeof(int))];
                struct cmsghdr align;
        } ctl;
        struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1};
        if (nfds) {
                memset(&ctl, 0, sizeof(ctl));
                h.msg_control = ctl.buf;
                h.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
                struct cmsghdr *c = CMSG_FIRSTHDR(&h);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
                memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
        }
        return sendmsg(sock, &h, MSG_NOSIGNAL);
}

static ssize_t relay_recv(int sock, struct relay_msg *m, int *fds, unsigned maxfds,
                          unsigned *nfds)
{
        struct iovec iov = {m, sizeof(*m)};
        union {
                char buf[CMSG_SPACE(2 * sizeof(int))];
                struct cmsghdr align;
        } ctl;
        struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                           .msg_controllen = sizeof(ctl.buf)};
        ssize_t n = recvmsg(sock, &h, MSG_CMSG_CLOEXEC);
        *nfds = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&h); n > 0 && c; c = CMSG_NXTHDR(&h, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                unsigned k = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                int got[2];
                memcpy(got, CMSG_DATA(c), (k < 2 ? k : 2) * sizeof(int));
                for (unsigned i = 0; i < k && i < 2; i++) {
                        if (*nfds < maxfds)
                                fds[(*nfds)++] = got[i];
                        else
                                close(got[i]);
                }
        }
        if (n > 0 && ((size_t)n != sizeof(*m) || m->len > sizeof(m->data)))
                return -1;
        return n;
}

/* The second process's end: call (struct ntbf_backend_relay). */
static int relay_call(void *ctx, uint32_t adapter, const void *req, size_t reqlen, void *ans,
                      size_t anslen, size_t *got, int *fds, unsigned maxfds, unsigned *nfds)
{
        int sock = *(int *)ctx;
        struct relay_msg m = {0};
        *got = 0;
        *nfds = 0;
        if (reqlen > sizeof(m.data))
                return -EINVAL;
        m.adapter = adapter;
        m.len = (uint32_t)reqlen;
        memcpy(m.data, req, reqlen);
        if (relay_send(sock, &m, NULL, 0) != (ssize_t)sizeof(m))
                return -EPIPE;
        if (relay_recv(sock, &m, fds, maxfds, nfds) <= 0)
                return -EPIPE;
        *got = m.len < anslen ? m.len : anslen;
        memcpy(ans, m.data, *got);
        return m.rc;
}

/* This process's end: one request of the second process, answered by serve; false once the
 * second process has closed its end. */
static bool relay_serve(struct cf_ctx *cx, int sock)
{
        struct relay_msg m;
        int in[2];
        unsigned nin = 0;
        if (relay_recv(sock, &m, in, 2, &nin) <= 0)
                return false;
        for (unsigned i = 0; i < nin; i++)
                close(in[i]);
        struct ntbf_adapter_h *h = NULL;
        for (unsigned i = 0; i < cx->nads; i++)
                if (cx->ads[i].idx == m.adapter)
                        h = cx->ads[i].h;
        uint8_t req[sizeof(m.data)];
        size_t len = m.len, got = 0;
        memcpy(req, m.data, len);
        int fds[2] = {-1, -1};
        unsigned nfds = 0;
        memset(&m, 0, sizeof(m));
        m.rc = h ? cx->ops->serve(h, 1, req, len, m.data, sizeof(m.data), &got, fds, 2, &nfds)
                 : NTBF_ENOTFOUND;
        m.len = (uint32_t)got;
        relay_send(sock, &m, fds, m.rc ? 0 : nfds);
        for (unsigned i = 0; i < nfds; i++)
                close(fds[i]);
        return true;
}

static int second(struct cf_ctx *cx, struct cf_ad *a, int relay, uint32_t win, uint64_t off,
                  uint64_t want, uint64_t store, char *why, size_t len)
{
        const struct ntbf_backend_ops *o = cx->ops;
        struct ntbf_backend *b = NULL;
        struct ntbf_adapter_h *h = NULL;
        char owhy[256] = "", e[64];
        void *addr = NULL;
        struct ntbf_backend_relay rl = {relay_call, &relay};
        struct ntbf_backend_env env = cx->env;
        if (relay >= 0)
                env.relay = &rl;
        int rc = o->open(&env, &b, owhy, sizeof(owhy));
        if (rc) {
                snprintf(why, len, "open returned %s: %s", cf_err(rc, e, sizeof(e)), owhy);
                return 1;
        }
        rc = o->probe(b, a->idx, &h);
        if (rc) {
                snprintf(why, len, "probe(%s) returned %s", a->name, cf_err(rc, e, sizeof(e)));
                o->close(b);
                return 1;
        }
        rc = o->map_window(h, win, off, 4096, 0, &addr);
        if (rc || !addr) {
                snprintf(why, len, "map_window(window %u, offset %#llx) returned %s", win,
                         (unsigned long long)off, cf_err(rc, e, sizeof(e)));
        } else {
                uint64_t v = cf_load64(addr);
                cf_store64((uint8_t *)addr + 8, store);
                if (v != want)
                        snprintf(why, len,
                                 "a load through its mapping of the slot read %#llx, expected "
                                 "%#llx (what the first process stored there)",
                                 (unsigned long long)v, (unsigned long long)want);
                o->unmap_window(h, addr, 4096);
        }
        o->release(h);
        o->close(b);
        return why[0] ? 1 : 0;
}

/*
 * What one process programmed, another sees: a slot programmed here is mapped and used by a
 * second process that opened the backend itself (a daemon programs, its clients map), and
 * that process's exit leaves the slot programmed.
 */
int cf_check_map_process(struct cf_run *r)
{
        struct cf_ctx *cx = r->cx;
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a;
        uint32_t slot, win;
        const struct ntbf_window *W;
        CF_TRY(need_map(r, &slot, &win, &W));
        struct cf_target tg;
        CF_TRY(cf_target(r, p, slot, 1, &tg));
        uint8_t *blk = tg.mem.addr, *q;
        memset(blk, 0, 4096);
        uint64_t off = tg.addr - W->base;
        CF_TRY(map(r, win, off, 4096, &q));
        uint64_t mine = cf_pattern(slot, 60), theirs = cf_pattern(slot, 61);
        cf_store64(q, mine);
        CF_TRUE(r, arrives(r, blk, mine),
                "%s: a store through this process's mapping of slot %u "
                "did not arrive",
                a->name, slot);
        int fds[2], rs[2] = {-1, -1};
        CF_TRUE(r, pipe(fds) == 0, "pipe: %s", strerror(errno));
        /* A backend with an owner's end (serve) is reached through it, as its daemon is. */
        if (cx->ops->serve && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rs)) {
                close(fds[0]);
                close(fds[1]);
                CF_FAIL(r, "socketpair: %s", strerror(errno));
        }
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
                close(fds[0]);
                close(fds[1]);
                if (rs[0] >= 0) {
                        close(rs[0]);
                        close(rs[1]);
                }
                CF_FAIL(r, "fork: %s", strerror(errno));
        }
        if (pid == 0) {
                close(fds[0]);
                if (rs[0] >= 0)
                        close(rs[0]);
                char why[512] = "";
                int rc = second(cx, a, rs[1], win, off, mine, theirs, why, sizeof(why));
                if (write(fds[1], why, strlen(why)) < 0)
                        rc = 2;
                _exit(rc);
        }
        close(fds[1]);
        if (rs[1] >= 0)
                close(rs[1]);
        char why[512] = "";
        size_t got = 0;
        struct pollfd pf[2] = {{fds[0], POLLIN, 0}, {rs[0], POLLIN, 0}};
        for (;;) {
                if (poll(pf, rs[0] >= 0 ? 2 : 1, (int)cx->timeout_ms * 5) <= 0) {
                        kill(pid, SIGKILL);
                        break;
                }
                if (rs[0] >= 0 && pf[1].revents) {
                        /* the second process's end closed: it has exited, or is exiting */
                        if (!relay_serve(cx, rs[0]))
                                pf[1].fd = -1;
                        continue;
                }
                if (!(pf[0].revents & (POLLIN | POLLHUP)))
                        continue;
                ssize_t n = read(fds[0], why + got, sizeof(why) - 1 - got);
                if (n <= 0)
                        break;
                got += (size_t)n;
        }
        close(fds[0]);
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (rs[0] >= 0) {
                close(rs[0]);
                if (cx->ops->client_gone)
                        for (unsigned i = 0; i < cx->nads; i++)
                                cx->ops->client_gone(cx->ads[i].h, 1);
        }
        if (!WIFEXITED(st) || WEXITSTATUS(st))
                CF_FAIL(r, "%s: a second process using slot %u %s: %s", a->name, slot,
                        WIFSIGNALED(st) ? "was killed (hung, or crashed)" : "failed",
                        why[0] ? why : "no reason given");
        CF_TRUE(r, arrives(r, blk + 8, theirs),
                "%s: the second process's store through its own mapping of slot %u did not reach "
                "the far-side block (it holds %#llx)",
                a->name, slot, (unsigned long long)cf_load64(blk + 8));
        /* Its exit took nothing of ours: the slot still leads where this process put it. */
        cf_store64(q + 16, mine ^ 1);
        CF_TRUE(r, arrives(r, blk + 16, mine ^ 1),
                "%s: after the second process exited, a store through this process's mapping "
                "of slot %u no longer arrives (its exit undid this process's translation)",
                a->name, slot);
        const struct ntbf_backend_ops *o = cx->ops;
        if (o->xlat_get) {
                struct ntbf_xlat x;
                bool valid = false;
                CF_OK(r, o->xlat_get(a->h, slot, &x, &valid), "%s: xlat_get(slot %u)", a->name,
                      slot);
                CF_TRUE(r, valid && x.addr == tg.far,
                        "%s: xlat_get(slot %u) after the second process exited: %s %#llx, "
                        "expected valid %#llx",
                        a->name, slot, valid ? "valid" : "invalid", (unsigned long long)x.addr,
                        (unsigned long long)tg.far);
        }
        return 0;
}
