/* tests/kernel/ntbtest.c: ntbfab-ntbtest, the kernel tier's program in the guests
 * (tests/kernel/init.sh, docs/linux-ntb.md). Statically linked.
 *
 *   ntbfab-ntbtest barrier a|b PEER_IP NAME SECONDS   both guests reach NAME (TCP port 18400)
 *   ntbfab-ntbtest tcp-send IP PORT BYTES SEED        a deterministic stream, hashed
 *   ntbfab-ntbtest tcp-recv PORT BYTES SEED           received and checked byte for byte
 *   ntbfab-ntbtest ntbfab a|b PEER_IP HW_STATE        every ioctl and mmap of ntbfab_ntb
 *                                                     between the guests (/dev/ntbfab-ntb0)
 *
 * Results are RESULT name ok|FAIL detail and FIGURE name value unit lines on stdout. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ntbfab_ntb.h"

#define BARRIER_PORT 18400
#define DEV          "/dev/ntbfab-ntb0"
#define MIB          (1024 * 1024)

static void result(const char *name, bool ok, const char *fmt, ...)
{
        va_list ap;
        printf("RESULT %s %s ", name, ok ? "ok" : "FAIL");
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        fflush(stdout);
}

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- deterministic data: word i of stream seed ---- */

static uint64_t pat(uint64_t seed, uint64_t i)
{
        uint64_t z = seed * 0x9e3779b97f4a7c15ULL + i * 0xbf58476d1ce4e5b9ULL + 1;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
}

/* Fill len bytes at p with words first_word.. of stream seed. */
static void fill(void *p, size_t len, uint64_t seed, uint64_t first_word)
{
        volatile uint64_t *w = p;
        for (size_t i = 0; i < len / 8; i++)
                w[i] = pat(seed, first_word + i);
}

/* How many words of len bytes at p differ from stream seed; the first one's index in *first. */
static size_t differ(const void *p, size_t len, uint64_t seed, uint64_t first_word, size_t *first)
{
        const volatile uint64_t *w = p;
        size_t bad = 0;
        for (size_t i = 0; i < len / 8; i++) {
                if (w[i] != pat(seed, first_word + i)) {
                        if (!bad && first)
                                *first = i;
                        bad++;
                }
        }
        return bad;
}

static size_t nonzero(const void *p, size_t len)
{
        const volatile uint64_t *w = p;
        size_t n = 0;
        for (size_t i = 0; i < len / 8; i++)
                n += w[i] != 0;
        return n;
}

/* A hash of a stream of words, 48 bits (a FIGURE is a double). */
static uint64_t hash_words(uint64_t h, const uint64_t *w, size_t n)
{
        for (size_t i = 0; i < n; i++)
                h = (h ^ w[i]) * 0x100000001b3ULL;
        return h;
}

/* ---- TCP: barriers and the transfer over ntb_netdev ---- */

static int tcp_listen(int port)
{
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 4) < 0) {
                fprintf(stderr, "ntbtest: listen on port %d: %s\n", port, strerror(errno));
                if (s >= 0)
                        close(s);
                return -1;
        }
        return s;
}

static int tcp_accept(int s, double seconds)
{
        struct pollfd p = {.fd = s, .events = POLLIN};
        if (poll(&p, 1, (int)(seconds * 1000)) != 1)
                return -1;
        return accept4(s, NULL, NULL, SOCK_CLOEXEC);
}

static int tcp_connect(const char *ip, int port, double seconds)
{
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
        double end = now() + seconds;
        if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
                return -1;
        while (now() < end) {
                int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0)
                        return s;
                if (s >= 0)
                        close(s);
                usleep(50000);
        }
        return -1;
}

static bool read_line(int s, char *buf, size_t len, double seconds)
{
        size_t n = 0;
        while (n + 1 < len) {
                struct pollfd p = {.fd = s, .events = POLLIN};
                if (poll(&p, 1, (int)(seconds * 1000)) != 1 || read(s, buf + n, 1) != 1)
                        return false;
                if (buf[n] == '\n') {
                        buf[n] = 0;
                        return true;
                }
                n++;
        }
        return false;
}

/*
 * Guest b listens, guest a connects; each sends NAME and expects the other's to be the same.
 * Guest b stops listening before it answers, so that guest a's next barrier cannot reach the
 * listener of this one; guest a tries again when a connection ends without an answer.
 */
static bool barrier(const char *role, const char *peer, const char *name, double seconds)
{
        char line[256] = "";
        double end = now() + seconds;
        bool ok = false;
        if (!strcmp(role, "b")) {
                int s = tcp_listen(BARRIER_PORT);
                int c = s < 0 ? -1 : tcp_accept(s, seconds);
                if (s >= 0)
                        close(s);
                if (c >= 0) {
                        ok = read_line(c, line, sizeof(line), seconds) && !strcmp(line, name);
                        dprintf(c, "%s\n", name);
                        close(c);
                }
        } else {
                while (!ok && now() < end) {
                        int c = tcp_connect(peer, BARRIER_PORT, end - now());
                        if (c < 0)
                                break;
                        dprintf(c, "%s\n", name);
                        bool got = read_line(c, line, sizeof(line), end - now());
                        close(c);
                        if (!got) {
                                usleep(50000);
                                continue;
                        }
                        ok = !strcmp(line, name);
                        break;
                }
        }
        if (!ok)
                fprintf(stderr, "ntbtest: barrier %s: the other guest is at '%s'\n", name, line);
        return ok;
}

static int cmd_barrier(char **argv)
{
        return barrier(argv[0], argv[1], argv[2], atof(argv[3])) ? 0 : 1;
}

static int cmd_tcp_send(char **argv)
{
        uint64_t bytes = strtoull(argv[2], NULL, 0), seed = strtoull(argv[3], NULL, 0);
        uint64_t *buf = malloc(MIB), h = 0xcbf29ce484222325ULL;
        int s = tcp_connect(argv[0], atoi(argv[1]), 60);
        if (s < 0 || !buf || bytes % MIB) {
                result("netdev-tcp-send", false, "cannot connect to %s:%s: %s", argv[0], argv[1],
                       strerror(errno));
                return 1;
        }
        double t0 = now();
        for (uint64_t off = 0; off < bytes; off += MIB) {
                fill(buf, MIB, seed, off / 8);
                h = hash_words(h, buf, MIB / 8);
                for (size_t done = 0; done < MIB;) {
                        ssize_t n = write(s, (char *)buf + done, MIB - done);
                        if (n <= 0) {
                                result("netdev-tcp-send", false,
                                       "write after %" PRIu64 " bytes: %s", off + done,
                                       strerror(errno));
                                return 1;
                        }
                        done += n;
                }
        }
        /* the receiver closes after the last byte: then every byte arrived */
        shutdown(s, SHUT_WR);
        char c;
        ssize_t n = read(s, &c, 1);
        double dt = now() - t0;
        h &= 0xffffffffffffULL;
        result("netdev-tcp-send", n == 0,
               "sent %" PRIu64 " bytes of stream %" PRIu64 " in %.2f s (%.1f MB/s), hash %" PRIu64,
               bytes, seed, dt, bytes / dt / 1e6, h);
        printf("FIGURE netdev_tcp_MBps %.1f MB/s\nFIGURE netdev_tcp_sent_hash %" PRIu64 " hash\n",
               bytes / dt / 1e6, h);
        return n == 0 ? 0 : 1;
}

static int cmd_tcp_recv(char **argv)
{
        uint64_t bytes = strtoull(argv[1], NULL, 0), seed = strtoull(argv[2], NULL, 0);
        uint64_t *buf = malloc(MIB), got = 0, bad = 0, first_bad = 0, h = 0xcbf29ce484222325ULL;
        int s = tcp_listen(atoi(argv[0]));
        int c = s < 0 ? -1 : tcp_accept(s, 120);
        if (c < 0 || !buf) {
                result("netdev-tcp-recv", false, "no connection on port %s in 120 s", argv[0]);
                return 1;
        }
        for (;;) {
                size_t fillto = 0;
                while (fillto < MIB) {
                        ssize_t n = read(c, (char *)buf + fillto, MIB - fillto);
                        if (n <= 0)
                                break;
                        fillto += n;
                }
                if (!fillto)
                        break;
                size_t first;
                size_t d = differ(buf, fillto & ~7UL, seed, got / 8, &first);
                if (d && !bad)
                        first_bad = got + first * 8;
                bad += d + (fillto % 8 != 0);
                h = hash_words(h, buf, fillto / 8);
                got += fillto;
                if (fillto < MIB)
                        break;
        }
        close(c);
        close(s);
        h &= 0xffffffffffffULL;
        bool ok = got == bytes && !bad;
        if (ok)
                result("netdev-tcp-recv", true,
                       "received %" PRIu64 " bytes, every one as stream %" PRIu64
                       " generates them, hash %" PRIu64,
                       got, seed, h);
        else
                result("netdev-tcp-recv", false,
                       "received %" PRIu64 " of %" PRIu64 " bytes, %" PRIu64
                       " words differ, the first at byte %" PRIu64,
                       got, bytes, bad, first_bad);
        printf("FIGURE netdev_tcp_received_hash %" PRIu64 " hash\n", h);
        return ok ? 0 : 1;
}

/* ---- ntbfab_ntb ---- */

static const char *role, *peer_ip, *hw_state;
static int side;
static struct ntbfab_event events[1024];
static int nevents;

/* ioctl that must fail with errno want; counts what did not. */
static int refusals, wrong;
static void refuse(int fd, unsigned long req, void *arg, int want, const char *what)
{
        errno = 0;
        int r = ioctl(fd, req, arg);
        if (r == 0 || errno != want) {
                printf("ntbtest: %s: %s, expected %s\n", what,
                       r == 0 ? "accepted" : strerror(errno), strerror(want));
                wrong++;
        } else {
                refusals++;
        }
}

static bool wait_readable(int fd, int ms)
{
        struct pollfd p = {.fd = fd, .events = POLLIN};
        return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

static uint64_t efd_take(int efd)
{
        uint64_t v = 0;
        if (read(efd, &v, sizeof(v)) != sizeof(v))
                return 0;
        return v;
}

/* Read every queued event record of fd (non-blocking) into events[]. */
static void drain(int fd)
{
        int fl = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
        while (nevents < (int)(sizeof(events) / sizeof(events[0]))) {
                ssize_t n =
                    read(fd, &events[nevents], sizeof(events) - nevents * sizeof(events[0]));
                if (n <= 0)
                        break;
                nevents += n / sizeof(events[0]);
        }
        fcntl(fd, F_SETFL, fl);
}

static int find_event(uint32_t type, int64_t vector, uint64_t bits, int from)
{
        for (int i = from; i < nevents; i++)
                if (events[i].type == type && (vector < 0 || events[i].vector == vector) &&
                    events[i].bits == bits)
                        return i;
        return -1;
}

static uint32_t spad_read(int fd, uint32_t flags, uint32_t sidx)
{
        struct ntbfab_spad s = {.flags = flags, .sidx = sidx};
        return ioctl(fd, NTBFAB_IOC_SPAD_READ, &s) ? 0xdeadbeef : s.value;
}

static int spad_write(int fd, uint32_t flags, uint32_t sidx, uint32_t value)
{
        struct ntbfab_spad s = {.flags = flags, .sidx = sidx, .value = value};
        return ioctl(fd, NTBFAB_IOC_SPAD_WRITE, &s);
}

static bool wait_spad(int fd, uint32_t sidx, uint32_t value, double seconds)
{
        double end = now() + seconds;
        while (now() < end) {
                if (spad_read(fd, 0, sidx) == value)
                        return true;
                usleep(10000);
        }
        return false;
}

static uint64_t db_read(int fd)
{
        struct ntbfab_bits b = {0};
        return ioctl(fd, NTBFAB_IOC_DB_READ, &b) ? ~0ULL : b.bits;
}

static int bits_ioc(int fd, unsigned long req, uint64_t bits)
{
        struct ntbfab_bits b = {.bits = bits};
        return ioctl(fd, req, &b);
}

static int add_eventfd(int fd, uint32_t events_, uint64_t db_bits)
{
        int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        struct ntbfab_eventfd r = {.fd = efd, .events = events_, .db_bits = db_bits};
        if (efd < 0 || ioctl(fd, NTBFAB_IOC_EVENTFD_ADD, &r)) {
                printf("ntbtest: EVENTFD_ADD(%#x, %#" PRIx64 "): %s\n", events_, db_bits,
                       strerror(errno));
                return -1;
        }
        return efd;
}

static bool state(int fd, struct ntbfab_state *st)
{
        memset(st, 0, sizeof(*st));
        return ioctl(fd, NTBFAB_IOC_STATE, st) == 0;
}

static uint64_t link_up(int fd)
{
        struct ntbfab_link l = {0};
        return ioctl(fd, NTBFAB_IOC_LINK_STATUS, &l) ? 0 : l.up;
}

/* Wait for a link event saying up (or down) in fd's queue, or for the status to say so. */
static bool wait_link(int fd, bool up, double seconds, int *from)
{
        double end = now() + seconds;
        do {
                drain(fd);
                for (int i = *from; i < nevents; i++) {
                        if (events[i].type == NTBFAB_EVENT_LINK && !!events[i].bits == up) {
                                *from = i + 1;
                                return true;
                        }
                }
                wait_readable(fd, 100);
        } while (now() < end);
        return false;
}

/* The emulated NTB's own view of window w's translation (debugfs). */
static bool hw_trans(int w, uint64_t *addr, uint64_t *size)
{
        char line[256];
        FILE *f = fopen(hw_state, "r");
        bool found = false;
        while (f && fgets(line, sizeof(line), f)) {
                int mw;
                unsigned long long a, s;
                if (sscanf(line, "mw%d slice %*s size %*s busy %*d trans %llx size %llx", &mw, &a,
                           &s) == 3 &&
                    mw == w) {
                        *addr = a;
                        *size = s;
                        found = true;
                }
        }
        if (f)
                fclose(f);
        return found;
}

/* One byte with up to 4 descriptors (SCM_RIGHTS): the message both directions use. */
struct fd_msg {
        char byte;
        struct iovec iov;
        union {
                char buf[CMSG_SPACE(4 * sizeof(int))];
                struct cmsghdr align;
        } ctl;
        struct msghdr msg;
};

static void fd_msg_init(struct fd_msg *m, int n)
{
        memset(m, 0, sizeof(*m));
        m->byte = 'f';
        m->iov = (struct iovec){.iov_base = &m->byte, .iov_len = 1};
        m->msg = (struct msghdr){.msg_iov = &m->iov,
                                 .msg_iovlen = 1,
                                 .msg_control = m->ctl.buf,
                                 .msg_controllen = CMSG_SPACE(n * sizeof(int))};
}

/* The emulated NTB's own link flag for this side (debugfs). */
static bool hw_link(uint64_t *own)
{
        char line[256];
        FILE *f = fopen(hw_state, "r");
        bool found = false;
        while (f && fgets(line, sizeof(line), f)) {
                unsigned long long o;
                if (sscanf(line, "side %*d peer %*d link own %llu", &o) == 1) {
                        *own = o;
                        found = true;
                }
        }
        if (f)
                fclose(f);
        return found;
}

static int send_fds(int sock, const int *fds, int n)
{
        struct fd_msg m;
        fd_msg_init(&m, n);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m.msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(n * sizeof(int));
        memcpy(CMSG_DATA(c), fds, n * sizeof(int));
        return sendmsg(sock, &m.msg, 0) == 1 ? 0 : -1;
}

static int recv_fds(int sock, int *fds, int n)
{
        struct fd_msg m;
        fd_msg_init(&m, n);
        if (recvmsg(sock, &m.msg, MSG_CMSG_CLOEXEC) != 1)
                return -1;
        struct cmsghdr *c = CMSG_FIRSTHDR(&m.msg);
        if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(n * sizeof(int)))
                return -1;
        memcpy(fds, CMSG_DATA(c), n * sizeof(int));
        return 0;
}

/* Seeds of what side s writes into the peer's window w. */
static uint64_t seed_of(int s, int w)
{
        return 0x5eed0000ULL + s * 16 + w;
}

struct buf {
        struct ntbfab_buf_alloc a;
        void *map;
};

static bool buf_alloc(int fd, struct buf *b, uint64_t size)
{
        memset(b, 0, sizeof(*b));
        b->a.size = size;
        if (ioctl(fd, NTBFAB_IOC_BUF_ALLOC, &b->a))
                return false;
        b->map = mmap(NULL, b->a.size, PROT_READ | PROT_WRITE, MAP_SHARED, b->a.fd, 0);
        return b->map != MAP_FAILED;
}

static int set_trans(int fd, int widx, int buf_fd, uint64_t off, uint64_t size)
{
        struct ntbfab_mw_trans t = {.widx = widx, .buf_fd = buf_fd, .offset = off, .size = size};
        return ioctl(fd, NTBFAB_IOC_MW_SET_TRANS, &t);
}

/* The checks of one side, in the order both guests run them. */
static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

static int cmd_ntbfab(char **argv)
{
        role = argv[0];
        peer_ip = argv[1];
        hw_state = argv[2];
        side = !strcmp(role, "a") ? 0 : 1;
        int peer = 1 - side;
        char why[512];
        bool ok;

        /* -- version, ownership ------------------------------------------------------------ */
        int fd = open(DEV, O_RDWR | O_CLOEXEC);
        struct ntbfab_version v = {0};
        ok = fd >= 0 && !ioctl(fd, NTBFAB_IOC_VERSION, &v) && v.version == NTBFAB_NTB_VERSION &&
             v.event_size == sizeof(struct ntbfab_event) && !v.features;
        result("ntbfab-version", ok,
               "open(%s, O_RDWR) %s; interface version %u, events of %u bytes", DEV,
               fd >= 0 ? "ok" : strerror(errno), v.version, v.event_size);
        if (fd < 0)
                return 1;

        int fd2 = open(DEV, O_RDWR | O_CLOEXEC);
        int e2 = errno;
        int ro = open(DEV, O_RDONLY | O_CLOEXEC);
        struct ntbfab_info info = {0};
        struct ntbfab_state st;
        int ro_info = ro >= 0 ? ioctl(ro, NTBFAB_IOC_INFO, &info) : -1;
        refusals = wrong = 0;
        struct ntbfab_spad sp = {.value = 1};
        refuse(ro, NTBFAB_IOC_SPAD_WRITE, &sp, EPERM, "SPAD_WRITE on a read-only open");
        struct ntbfab_link lk = {.speed = -1, .width = -1};
        refuse(ro, NTBFAB_IOC_LINK_ENABLE, &lk, EPERM, "LINK_ENABLE on a read-only open");
        void *rm = mmap(NULL, 4096, PROT_READ, MAP_SHARED, ro, 0);
        int e3 = errno;
        ok = fd2 < 0 && e2 == EBUSY && ro >= 0 && ro_info == 0 && !wrong && rm == MAP_FAILED &&
             e3 == EACCES && state(ro, &st) && st.owner_pid == (uint32_t)getpid() &&
             (st.flags & NTBFAB_STATE_OWNED) && st.opens == 2;
        result("ntbfab-owner-exclusive", ok,
               "a second O_RDWR open: %s; O_RDONLY: INFO %s, writes refused with EPERM (%d), "
               "mmap %s; STATE names the owner pid %u, %u opens",
               fd2 < 0 ? strerror(e2) : "accepted", ro_info ? "failed" : "ok", refusals,
               rm == MAP_FAILED ? strerror(e3) : "accepted", st.owner_pid, st.opens);

        /* -- what the device has ------------------------------------------------------------ */
        memset(&info, 0, sizeof(info));
        ioctl(fd, NTBFAB_IOC_INFO, &info);
        struct ntbfab_peer_info pi = {.pidx = 0};
        int pr = ioctl(fd, NTBFAB_IOC_PEER_INFO, &pi);
        ok = info.port == side && info.peer_count == 1 && info.peer_mw_count == 2 &&
             info.db_valid_mask == 0xf && info.db_vector_count == 4 && info.spad_count == 16 &&
             info.msg_count == 4 && info.msg_inbits == 0xf && info.msg_outbits == 0xf0 &&
             info.topology == (side ? NTBFAB_TOPO_B2B_DSD : NTBFAB_TOPO_B2B_USD) &&
             (info.flags & NTBFAB_INFO_MW_SET_TRANS) &&
             !(info.flags & NTBFAB_INFO_PEER_MW_SET_TRANS) &&
             (info.flags & NTBFAB_INFO_PEER_SPAD_READ) && (info.flags & NTBFAB_INFO_DB_SET) &&
             (info.flags & NTBFAB_INFO_MSG_MASK) && !strcmp(info.driver, "ntb_hw_ivshmem") &&
             info.minor == 0 && !pr && pi.port == peer && pi.mw_count == 2;
        result("ntbfab-info", ok,
               "%s on %s: port %d (peer %d), topology %u, %u peer(s), %u+%u windows, doorbells "
               "%#" PRIx64 " on %u vectors, %u scratchpads, %u messages (in %#" PRIx64
               ", out %#" PRIx64 "), flags %#x",
               info.driver, info.ntb_name, info.port, pi.port, info.topology, info.peer_count,
               pi.mw_count, info.peer_mw_count, (uint64_t)info.db_valid_mask, info.db_vector_count,
               info.spad_count, info.msg_count, (uint64_t)info.msg_inbits,
               (uint64_t)info.msg_outbits, info.flags);

        /* -- bad arguments: each refused with its errno ------------------------------------- */
        refusals = wrong = 0;
        struct ntbfab_peer_info bpi = {.pidx = 0, .flags = 1};
        refuse(fd, NTBFAB_IOC_PEER_INFO, &bpi, EINVAL, "PEER_INFO with an unknown flag");
        bpi = (struct ntbfab_peer_info){.pidx = 1};
        refuse(fd, NTBFAB_IOC_PEER_INFO, &bpi, EINVAL, "PEER_INFO of peer 1");
        struct ntbfab_mw_info bmi = {.pidx = 0, .widx = 2};
        refuse(fd, NTBFAB_IOC_MW_INFO, &bmi, EINVAL, "MW_INFO of window 2");
        struct ntbfab_link bl = {.speed = -1, .width = -1, .reserved = 1};
        refuse(fd, NTBFAB_IOC_LINK_ENABLE, &bl, EINVAL, "LINK_ENABLE with reserved set");
        bl = (struct ntbfab_link){.speed = -1, .width = -1, .flags = 4};
        refuse(fd, NTBFAB_IOC_LINK_ENABLE, &bl, EINVAL, "LINK_ENABLE with an unknown flag");
        refuse(fd, NTBFAB_IOC_LINK_DISABLE, (void *)1, EINVAL, "LINK_DISABLE with an argument");
        struct ntbfab_buf_alloc bba = {.size = 4096, .flags = 2};
        refuse(fd, NTBFAB_IOC_BUF_ALLOC, &bba, EINVAL, "BUF_ALLOC with an unknown flag");
        bba = (struct ntbfab_buf_alloc){.size = 0};
        refuse(fd, NTBFAB_IOC_BUF_ALLOC, &bba, EINVAL, "BUF_ALLOC of 0 bytes");
        bba = (struct ntbfab_buf_alloc){.size = 1ULL << 40};
        refuse(fd, NTBFAB_IOC_BUF_ALLOC, &bba, EINVAL, "BUF_ALLOC of 1 TiB");
        struct ntbfab_bits bb = {.bits = 0x10};
        refuse(fd, NTBFAB_IOC_DB_MASK, &bb, EINVAL, "DB_MASK of an invalid bit");
        bb = (struct ntbfab_bits){.bits = 1, .flags = 1};
        refuse(fd, NTBFAB_IOC_PEER_DB_SET, &bb, EINVAL, "PEER_DB_SET with an unknown flag");
        bb = (struct ntbfab_bits){.bits = 1, .reserved = 1};
        refuse(fd, NTBFAB_IOC_DB_CLEAR, &bb, EINVAL, "DB_CLEAR with reserved set");
        bb = (struct ntbfab_bits){.bits = 0x100};
        refuse(fd, NTBFAB_IOC_MSG_CLEAR, &bb, EINVAL, "MSG_CLEAR of an invalid bit");
        struct ntbfab_spad bs = {.flags = 2};
        refuse(fd, NTBFAB_IOC_SPAD_READ, &bs, EINVAL, "SPAD_READ with an unknown flag");
        bs = (struct ntbfab_spad){.sidx = 16};
        refuse(fd, NTBFAB_IOC_SPAD_READ, &bs, EINVAL, "SPAD_READ of scratchpad 16");
        bs = (struct ntbfab_spad){.pidx = 1};
        refuse(fd, NTBFAB_IOC_SPAD_WRITE, &bs, EINVAL, "a local SPAD_WRITE naming a peer");
        struct ntbfab_msg bm = {.midx = 4};
        refuse(fd, NTBFAB_IOC_MSG_READ, &bm, EINVAL, "MSG_READ of register 4");
        bm = (struct ntbfab_msg){.pidx = 1};
        refuse(fd, NTBFAB_IOC_MSG_READ, &bm, EINVAL, "MSG_READ with a peer given");
        struct ntbfab_eventfd be = {.fd = -1, .events = 8};
        refuse(fd, NTBFAB_IOC_EVENTFD_ADD, &be, EINVAL, "EVENTFD_ADD of an unknown event kind");
        be = (struct ntbfab_eventfd){.fd = -1, .events = NTBFAB_EV_DB};
        refuse(fd, NTBFAB_IOC_EVENTFD_ADD, &be, EINVAL, "EVENTFD_ADD for no doorbell bit");
        be = (struct ntbfab_eventfd){.fd = -1, .events = NTBFAB_EV_LINK, .db_bits = 1};
        refuse(fd, NTBFAB_IOC_EVENTFD_ADD, &be, EINVAL, "EVENTFD_ADD of doorbell bits without DB");
        be = (struct ntbfab_eventfd){.fd = 0, .events = NTBFAB_EV_LINK};
        refuse(fd, NTBFAB_IOC_EVENTFD_ADD, &be, EINVAL,
               "EVENTFD_ADD of a descriptor that is no eventfd");
        refuse(fd, NTBFAB_IOC_EVENTFD_DEL, (void *)63, ENOENT, "EVENTFD_DEL of a free slot");
        refuse(fd, NTBFAB_IOC_EVENTFD_DEL, (void *)64, EINVAL, "EVENTFD_DEL of slot 64");
        struct ntbfab_mw_ref bref = {.widx = 0, .reserved = 1};
        refuse(fd, NTBFAB_IOC_MW_CLEAR_TRANS, &bref, EINVAL, "MW_CLEAR_TRANS with reserved set");
        struct ntbfab_peer_mw_fd bpf = {.widx = 0, .offset = 100, .size = 4096};
        refuse(fd, NTBFAB_IOC_PEER_MW_FD, &bpf, EINVAL, "PEER_MW_FD at an unaligned offset");
        bpf = (struct ntbfab_peer_mw_fd){.widx = 0, .offset = 4096, .size = 1ULL << 30};
        refuse(fd, NTBFAB_IOC_PEER_MW_FD, &bpf, EINVAL, "PEER_MW_FD beyond the window");
        refuse(fd, _IOR(NTBFAB_IOC_MAGIC, 0x7f, struct ntbfab_bits), &bb, ENOTTY,
               "an unknown ioctl");
        refuse(fd, _IOR(NTBFAB_IOC_MAGIC, 0x01, struct ntbfab_bits), &bb, ENOTTY,
               "INFO's number with another size");
        char small[16];
        int rr = read(ro, small, sizeof(small));
        int e4 = errno;
        result("ntbfab-rejects-bad-args", !wrong && rr < 0 && e4 == EINVAL,
               "%d bad calls refused with the documented errno, %d accepted or wrong; a read of "
               "16 bytes: %s",
               refusals, wrong, rr < 0 ? strerror(e4) : "accepted");

        /* -- before the link is up: the alignment is not known ----------------------------- */
        struct ntbfab_mw_info mi = {.widx = 0};
        ioctl(fd, NTBFAB_IOC_MW_INFO, &mi);
        result("ntbfab-align-before-link", !(mi.flags & NTBFAB_MW_ALIGN_VALID) && !mi.size_max,
               "MW_INFO before link-up: flags %#x, size_max %" PRIu64, mi.flags,
               (uint64_t)mi.size_max);

        /* -- events, link --------------------------------------------------------------------- */
        int efd_link = add_eventfd(fd, NTBFAB_EV_LINK, 0);
        int efd_db1 = add_eventfd(fd, NTBFAB_EV_DB, 0x2);
        int efd_db2 = add_eventfd(fd, NTBFAB_EV_DB, 0x4);
        int efd_db8 = add_eventfd(fd, NTBFAB_EV_DB, 0x8);
        int efd_msg = add_eventfd(fd, NTBFAB_EV_MSG, 0);
        /*
         * Doorbells rung and messages sent for an earlier client (ntb_pingpong sends one per
         * ping) may be pending: take them over, then unmask.
         */
        bits_ioc(fd, NTBFAB_IOC_DB_CLEAR, 0xf);
        bits_ioc(fd, NTBFAB_IOC_MSG_CLEAR, 0xff);
        bits_ioc(fd, NTBFAB_IOC_DB_UNMASK, 0xf);
        bits_ioc(fd, NTBFAB_IOC_MSG_UNMASK, 0xf);
        double t0 = now();
        struct ntbfab_link l = {.speed = -1, .width = -1};
        int le = ioctl(fd, NTBFAB_IOC_LINK_ENABLE, &l);
        uint64_t nlink = 0;
        while (now() - t0 < 30 && !link_up(fd))
                if (wait_readable(efd_link, 200))
                        nlink += efd_take(efd_link);
        memset(&l, 0, sizeof(l));
        ioctl(fd, NTBFAB_IOC_LINK_STATUS, &l);
        nlink += efd_take(efd_link);
        result("ntbfab-link-up",
               !le && l.up == 1 && l.speed == 3 && l.width == 4 && nlink >= 1 &&
                   (l.flags & NTBFAB_LINK_ENABLED),
               "LINK_ENABLE %s; up %#" PRIx64 " after %.0f ms, Gen%d x%d, %" PRIu64
               " link event(s) on the eventfd",
               le ? strerror(errno) : "ok", (uint64_t)l.up, (now() - t0) * 1000, l.speed, l.width,
               nlink);

        struct ntbfab_mw_info m[2] = {{.widx = 0}, {.widx = 1}};
        struct ntbfab_peer_mw_info pm[2] = {{.widx = 0}, {.widx = 1}};
        ok = true;
        for (int w = 0; w < 2; w++) {
                uint64_t size = w ? 16 * MIB : 4 * MIB;
                ok &= !ioctl(fd, NTBFAB_IOC_MW_INFO, &m[w]) &&
                      !ioctl(fd, NTBFAB_IOC_PEER_MW_INFO, &pm[w]);
                ok &= (m[w].flags & NTBFAB_MW_ALIGN_VALID) && m[w].addr_align == size &&
                      m[w].size_max == size && m[w].size_align == 4096 && pm[w].size == size &&
                      pm[w].mmap_offset == (uint64_t)w << NTBFAB_MMAP_MW_SHIFT && pm[w].phys_addr;
        }
        result("ntbfab-mw-info", ok,
               "inbound windows: %" PRIu64 " and %" PRIu64 " bytes, address alignment %" PRIu64
               " and %" PRIu64 "; outbound: %" PRIu64 " bytes at %#" PRIx64 ", %" PRIu64
               " bytes at %#" PRIx64,
               (uint64_t)m[0].size_max, (uint64_t)m[1].size_max, (uint64_t)m[0].addr_align,
               (uint64_t)m[1].addr_align, (uint64_t)pm[0].size, (uint64_t)pm[0].phys_addr,
               (uint64_t)pm[1].size, (uint64_t)pm[1].phys_addr);

        /* -- buffers --------------------------------------------------------------------------- */
        struct buf b1, b0;
        bool a1 = buf_alloc(fd, &b1, 16 * MIB), a0 = buf_alloc(fd, &b0, 4 * MIB);
        struct ntbfab_buf_alloc b2 = {.size = 4096};
        int r2 = ioctl(fd, NTBFAB_IOC_BUF_ALLOC, &b2);
        int e5 = errno;
        struct ntbfab_buf_info bi = {0};
        int bir = a1 ? ioctl(b1.a.fd, NTBFAB_IOC_BUF_INFO, &bi) : -1;
        ok = a1 && a0 && r2 && e5 == ENOMEM && !nonzero(b1.map, 16 * MIB) &&
             !nonzero(b0.map, 4 * MIB) && !(b1.a.dma_addr % (16 * MIB)) &&
             !(b0.a.dma_addr % (4 * MIB)) && !bir && bi.size == 16 * MIB &&
             bi.dma_addr == b1.a.dma_addr && bi.id == b1.a.id && bi.minor == 0 && !bi.trans_count &&
             (fcntl(b1.a.fd, F_GETFD) & FD_CLOEXEC);
        result("ntbfab-buf-alloc", ok,
               "buffers of 16 MiB at %#" PRIx64 " (id %u) and 4 MiB at %#" PRIx64
               " (id %u), mapped, all zero; a third: %s (the emulated NTB has one buffer per "
               "window); BUF_INFO on the fd: %" PRIu64 " bytes at %#" PRIx64,
               (uint64_t)b1.a.dma_addr, b1.a.id, (uint64_t)b0.a.dma_addr, b0.a.id,
               r2 ? strerror(e5) : "accepted", (uint64_t)bi.size, (uint64_t)bi.dma_addr);
        if (!a1 || !a0)
                return 1;

        /* -- translations: the wrong ones refused, the right ones set ------------------------ */
        refusals = wrong = 0;
        struct ntbfab_mw_trans bt = {.widx = 0, .buf_fd = b1.a.fd, .size = 4 * MIB};
        refuse(fd, NTBFAB_IOC_MW_SET_TRANS, &bt, EINVAL, "window 0 onto window 1's slice");
        bt = (struct ntbfab_mw_trans){.widx = 1, .buf_fd = b0.a.fd, .size = 4 * MIB};
        refuse(fd, NTBFAB_IOC_MW_SET_TRANS, &bt, EINVAL, "window 1 onto window 0's slice");
        bt =
            (struct ntbfab_mw_trans){.widx = 0, .buf_fd = b0.a.fd, .offset = 4 * MIB, .size = 4096};
        refuse(fd, NTBFAB_IOC_MW_SET_TRANS, &bt, EINVAL, "a range beyond the buffer");
        bt = (struct ntbfab_mw_trans){.widx = 0, .buf_fd = b0.a.fd, .size = 8 * MIB};
        refuse(fd, NTBFAB_IOC_MW_SET_TRANS, &bt, EINVAL, "more than the buffer");
        bt = (struct ntbfab_mw_trans){.widx = 0, .buf_fd = efd_link, .size = 4096};
        refuse(fd, NTBFAB_IOC_MW_SET_TRANS, &bt, EINVAL, "an eventfd as the buffer");
        bt = (struct ntbfab_mw_trans){.widx = 0, .buf_fd = 999, .size = 4096};
        refuse(fd, NTBFAB_IOC_MW_SET_TRANS, &bt, EBADF, "a closed descriptor as the buffer");
        bt = (struct ntbfab_mw_trans){.widx = 0, .buf_fd = b0.a.fd, .size = 4 * MIB, .flags = 1};
        refuse(fd, NTBFAB_IOC_MW_SET_TRANS, &bt, EINVAL, "an unknown flag");
        struct ntbfab_state st0;
        state(fd, &st0);
        result("ntbfab-trans-wrong-address-refused", !wrong && st0.mw_trans == 0,
               "%d wrong translations refused (the emulated NTB's own refusal for a buffer that "
               "is not the window's slice, in the kernel log), %d accepted or wrong; none "
               "programmed",
               refusals, wrong);

        int t0r = set_trans(fd, 0, b0.a.fd, 0, 4 * MIB);
        int t1r = set_trans(fd, 1, b1.a.fd, 0, 16 * MIB);
        struct ntbfab_mw_info mt[2] = {{.widx = 0}, {.widx = 1}};
        ioctl(fd, NTBFAB_IOC_MW_INFO, &mt[0]);
        ioctl(fd, NTBFAB_IOC_MW_INFO, &mt[1]);
        uint64_t ha0 = 0, hs0 = 0, ha1 = 0, hs1 = 0;
        hw_trans(0, &ha0, &hs0);
        hw_trans(1, &ha1, &hs1);
        state(fd, &st);
        memset(&bi, 0, sizeof(bi));
        ioctl(b1.a.fd, NTBFAB_IOC_BUF_INFO, &bi);
        ok = !t0r && !t1r && (mt[0].flags & NTBFAB_MW_TRANS_SET) &&
             mt[0].trans_addr == b0.a.dma_addr && mt[0].trans_size == 4 * MIB &&
             mt[0].buf_id == b0.a.id && mt[0].trans_pid == (uint32_t)getpid() &&
             (mt[1].flags & NTBFAB_MW_TRANS_SET) && mt[1].trans_addr == b1.a.dma_addr &&
             st.mw_trans == 2 && st.bufs == 2 && bi.trans_count == 1 && ha0 == b0.a.dma_addr &&
             hs0 == 4 * MIB && ha1 == b1.a.dma_addr && hs1 == 16 * MIB;
        result("ntbfab-trans-set", ok,
               "windows 0 and 1 translate to buffers %u and %u (%#" PRIx64 ", %#" PRIx64
               "); the emulated NTB holds %#" PRIx64 "+%#" PRIx64 " and %#" PRIx64 "+%#" PRIx64
               "; STATE: %u translations, %u buffers",
               mt[0].buf_id, mt[1].buf_id, (uint64_t)mt[0].trans_addr, (uint64_t)mt[1].trans_addr,
               ha0, hs0, ha1, hs1, st.mw_trans, st.bufs);

        /* -- scratchpads: mine into the peer's, the peer's into mine ------------------------ */
        uint32_t mine = 0x5eed0000 | side, theirs = 0x5eed0000 | peer;
        int sw = spad_write(fd, NTBFAB_SPAD_PEER, 0, mine);
        uint32_t back = spad_read(fd, NTBFAB_SPAD_PEER, 0);
        bool got = wait_spad(fd, 0, theirs, 30);
        result("ntbfab-spad", !sw && back == mine && got,
               "wrote %#x into the peer's scratchpad 0 (reads back %#x); the peer's %#x arrived in "
               "mine",
               mine, back, spad_read(fd, 0, 0));

        /* -- the peer's windows: a child's slice descriptor, then the whole windows ---------- */
        struct ntbfab_peer_mw_fd pf = {.widx = 0, .offset = 2 * MIB, .size = MIB};
        int sv[2];
        int pfr = ioctl(fd, NTBFAB_IOC_PEER_MW_FD, &pf);
        int cstatus = -1;
        if (!pfr && !socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
                pid_t c = fork();
                if (c == 0) {
                        int got_fd;
                        close(fd);
                        if (recv_fds(sv[1], &got_fd, 1))
                                _exit(2);
                        void *p = mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_SHARED, got_fd, 0);
                        if (p == MAP_FAILED)
                                _exit(3);
                        fill(p, MIB, seed_of(side, 0), 2 * MIB / 8);
                        /* the descriptor maps nothing beyond its range */
                        void *q =
                            mmap(NULL, 2 * MIB, PROT_READ | PROT_WRITE, MAP_SHARED, got_fd, 0);
                        _exit(q == MAP_FAILED ? 0 : 4);
                }
                send_fds(sv[0], &pf.fd, 1);
                close(pf.fd);
                waitpid(c, &cstatus, 0);
                close(sv[0]);
                close(sv[1]);
        }
        result("ntbfab-window-fd-child", !pfr && WIFEXITED(cstatus) && WEXITSTATUS(cstatus) == 0,
               "PEER_MW_FD of window 0 [2 MiB, 3 MiB) %s; a child got it over SCM_RIGHTS, mapped "
               "it, wrote 1 MiB and could not map beyond it: exit %d",
               pfr ? strerror(errno) : "ok", WIFEXITED(cstatus) ? WEXITSTATUS(cstatus) : -1);

        refusals = wrong = 0;
        void *w1 = mmap(NULL, 16 * MIB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, pm[1].mmap_offset);
        void *w0 = mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, pm[0].mmap_offset + MIB);
        void *bad1 = mmap(NULL, 2 * MIB, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                          pm[0].mmap_offset + 3 * MIB);
        void *bad2 = mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, pm[0].mmap_offset);
        /* memcpy from process memory into the window, as ntb_perf copies: 4 times 16 MiB */
        uint64_t *src = malloc(16 * MIB);
        double tw = 0;
        if (w1 != MAP_FAILED && src) {
                fill(src, 16 * MIB, seed_of(side, 1), 0);
                tw = now();
                for (int round = 0; round < 4; round++)
                        memcpy(w1, src, 16 * MIB);
                tw = now() - tw;
                printf("FIGURE ntbfab_window_memcpy_MBps_side%d %.1f MB/s\n", side,
                       64 * MIB / tw / 1e6);
        }
        free(src);
        if (w0 != MAP_FAILED)
                fill(w0, MIB, seed_of(side, 0), MIB / 8);
        if (w1 != MAP_FAILED)
                munmap(w1, 16 * MIB);
        if (w0 != MAP_FAILED)
                munmap(w0, MIB);
        /* my stores are done: ring the peer's doorbell bit 1 */
        int rng = bits_ioc(fd, NTBFAB_IOC_PEER_DB_SET, 0x2);
        bool maps_ok = w1 != MAP_FAILED && w0 != MAP_FAILED && bad1 == MAP_FAILED &&
                       bad2 == MAP_FAILED && !rng && tw > 0;

        /* -- what the peer wrote, in my buffers ---------------------------------------------- */
        bool dbev = wait_readable(efd_db1, 30000);
        uint64_t n1 = efd_take(efd_db1);
        size_t f1 = 0, f0 = 0, f2 = 0;
        size_t d1 = differ(b1.map, 16 * MIB, seed_of(peer, 1), 0, &f1);
        size_t d0 = differ((char *)b0.map + MIB, MIB, seed_of(peer, 0), MIB / 8, &f0);
        size_t d2 = differ((char *)b0.map + 2 * MIB, MIB, seed_of(peer, 0), 2 * MIB / 8, &f2);
        size_t z = nonzero(b0.map, MIB) + nonzero((char *)b0.map + 3 * MIB, MIB);
        ok = maps_ok && dbev && n1 == 1 && !d1 && !d0 && !d2 && !z;
        snprintf(
            why, sizeof(why),
            "copied 16 MiB into the peer's window 1 and wrote 1 MiB at 1 MiB of window 0 (maps: "
            "window %s, beyond it %s, private %s) and rang doorbell bit 1; the peer's "
            "doorbell %s; in my buffers %zu+%zu+%zu of 2,621,440 words differ from what the "
            "peer wrote, %zu words outside its ranges are not zero",
            w1 == MAP_FAILED ? "refused" : "ok", bad1 == MAP_FAILED ? "refused" : "accepted",
            bad2 == MAP_FAILED ? "refused" : "accepted", dbev ? "arrived" : "never came", d1, d0,
            d2, z);
        result("ntbfab-window-data", ok, "%s", why);
        if (ok)
                printf("FIGURE ntbfab_bytes_verified_side%d %d bytes\n", side, 18 * MIB);

        /* -- the buffer's descriptor in another process ------------------------------------- */
        cstatus = -1;
        if (!socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
                pid_t c = fork();
                if (c == 0) {
                        int got_fd;
                        struct ntbfab_buf_info ci = {0};
                        close(fd);
                        if (recv_fds(sv[1], &got_fd, 1) ||
                            ioctl(got_fd, NTBFAB_IOC_BUF_INFO, &ci) || ci.id != b1.a.id ||
                            ci.size != 16 * MIB)
                                _exit(2);
                        /* past its end: refused */
                        void *p = mmap(NULL, 16 * MIB, PROT_READ, MAP_SHARED, got_fd, 4 * MIB);
                        if (p != MAP_FAILED)
                                _exit(3);
                        /* at an offset inside it: the peer's data */
                        p = mmap(NULL, 12 * MIB, PROT_READ, MAP_SHARED, got_fd, 4 * MIB);
                        if (p == MAP_FAILED)
                                _exit(4);
                        _exit(differ(p, 12 * MIB, seed_of(peer, 1), 4 * MIB / 8, NULL) ? 5 : 0);
                }
                send_fds(sv[0], &b1.a.fd, 1);
                waitpid(c, &cstatus, 0);
                close(sv[0]);
                close(sv[1]);
        }
        result("ntbfab-buf-fd-child", WIFEXITED(cstatus) && WEXITSTATUS(cstatus) == 0,
               "a child got buffer %u's descriptor over SCM_RIGHTS: BUF_INFO, a mapping past its "
               "end refused, 12 MiB mapped at offset 4 MiB hold the peer's data: exit %d",
               b1.a.id, WIFEXITED(cstatus) ? WEXITSTATUS(cstatus) : -1);

        /* -- doorbells ----------------------------------------------------------------------- */
        drain(fd);
        uint64_t pending = db_read(fd);
        int ev = find_event(NTBFAB_EVENT_DB, 1, 0x2, 0);
        int dc = bits_ioc(fd, NTBFAB_IOC_DB_CLEAR, 0x2);
        uint64_t after = db_read(fd);
        result("ntbfab-doorbell", (pending & 0x2) && ev >= 0 && !dc && !(after & 0x2),
               "the peer's ring of bit 1: eventfd signalled once, DB_READ %#" PRIx64
               ", an event record (vector 1, bits 0x2) %s; after DB_CLEAR %#" PRIx64,
               pending, ev >= 0 ? "read" : "missing", after);

        /* masked: the bit becomes pending without an event; unmasking raises it */
        int mr = bits_ioc(fd, NTBFAB_IOC_DB_MASK, 0x4);
        struct ntbfab_bits rm_ = {0};
        ioctl(fd, NTBFAB_IOC_DB_READ_MASK, &rm_);
        spad_write(fd, NTBFAB_SPAD_PEER, 1, 1);
        bool peer_masked = wait_spad(fd, 1, 1, 30);
        bits_ioc(fd, NTBFAB_IOC_PEER_DB_SET, 0x4);
        double end = now() + 20;
        while (now() < end && !(db_read(fd) & 0x4))
                usleep(10000);
        uint64_t p2 = db_read(fd);
        uint64_t silent = efd_take(efd_db2);
        int ur = bits_ioc(fd, NTBFAB_IOC_DB_UNMASK, 0x4);
        bool fired = wait_readable(efd_db2, 10000);
        bits_ioc(fd, NTBFAB_IOC_DB_CLEAR, 0x4);
        result("ntbfab-db-mask",
               !mr && rm_.bits == 0x4 && peer_masked && (p2 & 0x4) && !silent && !ur && fired,
               "bit 2 masked (DB_READ_MASK %#" PRIx64 "), rung by the peer: pending %#" PRIx64
               ", %" PRIu64 " eventfd signals while masked; unmasked: %s",
               (uint64_t)rm_.bits, p2, silent, fired ? "the event came" : "no event");

        /* -- messages ------------------------------------------------------------------------ */
        struct ntbfab_msg mw = {.pidx = 0, .midx = 0, .value = 0x6d730000 | side};
        int mwr = ioctl(fd, NTBFAB_IOC_MSG_WRITE, &mw);
        bool mev = wait_readable(efd_msg, 20000);
        struct ntbfab_bits ms = {0};
        end = now() + 20;
        while (now() < end && !(ms.bits & 1)) {
                ioctl(fd, NTBFAB_IOC_MSG_STATUS, &ms);
                usleep(10000);
        }
        struct ntbfab_msg mrd = {.midx = 0};
        int mrr = ioctl(fd, NTBFAB_IOC_MSG_READ, &mrd);
        int mcr = bits_ioc(fd, NTBFAB_IOC_MSG_CLEAR, 0x1);
        struct ntbfab_bits ms2 = {0};
        ioctl(fd, NTBFAB_IOC_MSG_STATUS, &ms2);
        result("ntbfab-msg",
               !mwr && mev && (ms.bits & 1) && !mrr && mrd.value == (0x6d730000u | peer) &&
                   mrd.pidx == 0 && !mcr && !(ms2.bits & 1),
               "sent %#x to the peer's message register 0; received %#x from peer %u (event %s, "
               "status %#" PRIx64 "), status after MSG_CLEAR %#" PRIx64,
               mw.value, mrd.value, mrd.pidx, mev ? "signalled" : "missing", (uint64_t)ms.bits,
               (uint64_t)ms2.bits);

        /* -- a local doorbell set by this side ------------------------------------------------ */
        int dsr = bits_ioc(fd, NTBFAB_IOC_DB_SET, 0x8);
        bool d8 = wait_readable(efd_db8, 10000);
        uint64_t p8 = db_read(fd);
        bits_ioc(fd, NTBFAB_IOC_DB_CLEAR, 0x8);
        result("ntbfab-db-set-local", !dsr && d8 && (p8 & 0x8),
               "DB_SET of bit 3: eventfd %s, DB_READ %#" PRIx64, d8 ? "signalled" : "silent", p8);

        /* -- doorbell round trips: bit 1 rung, the peer rings it back from its eventfd ------- */
        {
                enum { RTT_N = 200 };
                double rtt[RTT_N];
                int n = 0;
                /* Both sides clear bit 1 before they meet: cleared after, side 1 could
                 * take side 0's first ring for a stale one and both would wait forever. */
                efd_take(efd_db1);
                bits_ioc(fd, NTBFAB_IOC_DB_CLEAR, 0x2);
                bool met = barrier(role, peer_ip, "db-rtt", 60);
                for (int i = 0; met && i < RTT_N; i++) {
                        double t = now();
                        if (side == 0 && bits_ioc(fd, NTBFAB_IOC_PEER_DB_SET, 0x2))
                                break;
                        if (!wait_readable(efd_db1, 10000))
                                break;
                        efd_take(efd_db1);
                        bits_ioc(fd, NTBFAB_IOC_DB_CLEAR, 0x2);
                        if (side == 1 && bits_ioc(fd, NTBFAB_IOC_PEER_DB_SET, 0x2))
                                break;
                        rtt[n++] = (now() - t) * 1e6;
                }
                qsort(rtt, (size_t)n, sizeof(rtt[0]), cmp_double);
                result("ntbfab-db-rtt", n == RTT_N,
                       "%d of %d doorbell round trips through the character device (ring, the "
                       "peer's eventfd, its ring back, this side's eventfd)",
                       n, RTT_N);
                if (side == 0 && n == RTT_N)
                        printf("FIGURE ntbfab_db_rtt_median_us %.1f us\n"
                               "FIGURE ntbfab_db_rtt_p99_us %.1f us\n",
                               rtt[RTT_N / 2], rtt[RTT_N * 99 / 100]);
        }

        /* -- the event records ------------------------------------------------------------- */
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pollr = poll(&pfd, 1, 1000);
        drain(fd);
        int elink = find_event(NTBFAB_EVENT_LINK, -1, 1, 0);
        int e1 = find_event(NTBFAB_EVENT_DB, 1, 0x2, 0);
        int e2b = find_event(NTBFAB_EVENT_DB, 2, 0x4, 0);
        int e8 = find_event(NTBFAB_EVENT_DB, 3, 0x8, 0);
        int em = -1;
        for (int i = 0; i < nevents; i++)
                if (events[i].type == NTBFAB_EVENT_MSG && (events[i].bits & 1))
                        em = i;
        bool ordered = true;
        for (int i = 1; i < nevents; i++)
                ordered &= events[i].seq > events[i - 1].seq;
        ok = pollr == 1 && elink >= 0 && events[elink].speed == 3 && events[elink].width == 4 &&
             e1 >= 0 && e2b >= 0 && e8 >= 0 && em >= 0 && ordered && e1 < e2b && e2b < e8;
        result("ntbfab-events-read", ok,
               "poll: %s; %d records read: link up (Gen%d x%d) #%d, doorbell bit 1 #%d, bit 2 "
               "after unmasking #%d, message #%d, local bit 3 #%d; sequence numbers %s",
               pollr == 1 ? "readable" : "nothing", nevents, elink >= 0 ? events[elink].speed : 0,
               elink >= 0 ? events[elink].width : 0, elink, e1, e2b, em, e8,
               ordered ? "increasing" : "out of order");

        /* -- outbound translation: not on this hardware ------------------------------------ */
        struct ntbfab_peer_mw_trans ot = {.widx = 0, .addr = 0x1000000, .size = 4096};
        int otr = ioctl(fd, NTBFAB_IOC_PEER_MW_SET_TRANS, &ot);
        int e6 = errno;
        struct ntbfab_mw_ref oref = {.widx = 0};
        int ocr = ioctl(fd, NTBFAB_IOC_PEER_MW_CLEAR_TRANS, &oref);
        result("ntbfab-outbound-unsupported", otr && e6 == EOPNOTSUPP && !ocr,
               "PEER_MW_SET_TRANS: %s (ntb_hw_ivshmem translates on the inbound side); clearing "
               "an outbound window that does not translate: %s",
               otr ? strerror(e6) : "accepted", ocr ? strerror(errno) : "ok");

        /* -- a buffer lives while a descriptor, a mapping or a translation holds it --------- */
        struct ntbfab_state s1, s2, s3;
        close(b0.a.fd);
        state(fd, &s1);
        struct ntbfab_mw_ref cref = {.widx = 0};
        int ctr = ioctl(fd, NTBFAB_IOC_MW_CLEAR_TRANS, &cref);
        state(fd, &s2);
        munmap(b0.map, 4 * MIB);
        state(fd, &s3);
        hw_trans(0, &ha0, &hs0);
        result("ntbfab-buf-lifetime",
               s1.bufs == 2 && !ctr && s2.mw_trans == 1 && s2.bufs == 2 && s3.bufs == 1 && !ha0,
               "buffer %u's descriptor closed: %u buffers (its mapping and translation hold it); "
               "translation cleared: %u buffers, %u translations; unmapped: %u buffers; the "
               "emulated NTB's window 0 translates to %#" PRIx64,
               b0.a.id, s1.bufs, s2.bufs, s2.mw_trans, s3.bufs, ha0);

        if (!barrier(role, peer_ip, "ntbfab-data-done", 120))
                result("barrier-ntbfab-data-done", false, "the other guest did not arrive");

        /* -- the owner's close undoes what it set; a killed owner's too --------------------- */
        spad_write(fd, 0, 3, 0x1234);
        int from = 0;
        drain(fd);
        from = nevents;
        if (side == 0) {
                barrier(role, peer_ip, "close-test", 120);
                state(fd, &s1);
                close(fd);
                state(ro, &st);
                struct ntbfab_mw_info c1 = {.widx = 1};
                ioctl(ro, NTBFAB_IOC_MW_INFO, &c1);
                hw_trans(1, &ha1, &hs1);
                /* 3 this owner wrote, 0 and 1 the peer wrote for it: all zero now */
                uint32_t sp3 = spad_read(ro, 0, 3) | spad_read(ro, 0, 0) | spad_read(ro, 0, 1);
                ok = (s1.flags & NTBFAB_STATE_LINK_ENABLED) && s1.mw_trans == 1 &&
                     s1.spads_written == 1 && !st.flags && !st.owner_pid && !st.mw_trans &&
                     st.db_mask == 0xf && !st.spads_written && st.bufs == 1 &&
                     !(c1.flags & NTBFAB_MW_TRANS_SET) && !ha1 && !sp3;
                snprintf(
                    why, sizeof(why),
                    "before close: flags %#x, %u translation(s), %u scratchpad(s) written; "
                    "after: flags %#x, owner %u, %u translations, doorbell mask %#" PRIx64
                    ", %u scratchpads written (scratchpads 0, 1, 3 read %#x), %u buffer (the "
                    "descriptor still open), the emulated NTB's window 1 translates to %#" PRIx64,
                    s1.flags, s1.mw_trans, s1.spads_written, st.flags, st.owner_pid, st.mw_trans,
                    (uint64_t)st.db_mask, st.spads_written, sp3, st.bufs, ha1);
                close(b1.a.fd);
                munmap(b1.map, 16 * MIB);
                state(ro, &st);
                result("ntbfab-close-undoes", ok && st.bufs == 0,
                       "%s; closed and unmapped: %u buffers", why, st.bufs);

                /* a new owner in a child, SIGKILLed with everything set */
                barrier(role, peer_ip, "kill-test", 120);
                int ks[2];
                socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ks);
                pid_t c = fork();
                if (c == 0) {
                        int cfd = open(DEV, O_RDWR | O_CLOEXEC);
                        struct buf c0, c1b;
                        struct ntbfab_link cl = {.speed = -1, .width = -1};
                        struct ntbfab_peer_mw_fd cpf = {.widx = 1, .size = MIB};
                        if (cfd < 0 || !buf_alloc(cfd, &c1b, 16 * MIB) ||
                            !buf_alloc(cfd, &c0, 4 * MIB) ||
                            set_trans(cfd, 0, c0.a.fd, 0, 4 * MIB) ||
                            set_trans(cfd, 1, c1b.a.fd, 0, 16 * MIB) ||
                            ioctl(cfd, NTBFAB_IOC_LINK_ENABLE, &cl) || spad_write(cfd, 0, 3, 7) ||
                            ioctl(cfd, NTBFAB_IOC_PEER_MW_FD, &cpf))
                                _exit(2);
                        int give[2] = {c1b.a.fd, cpf.fd};
                        send_fds(ks[1], give, 2);
                        for (;;)
                                pause();
                }
                /* if the child fails before it sends, its end closes and this returns */
                close(ks[1]);
                int kfds[2] = {-1, -1};
                bool got_fds = !recv_fds(ks[0], kfds, 2);
                close(ks[0]);
                struct ntbfab_state ks1, ks2;
                state(ro, &ks1);
                uint64_t ka0 = 0, ka1 = 0, kz = 0;
                hw_trans(0, &ka0, &kz);
                hw_trans(1, &ka1, &kz);
                void *wm = got_fds ? mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_SHARED, kfds[1], 0)
                                   : MAP_FAILED;
                if (wm != MAP_FAILED)
                        *(volatile uint64_t *)wm = 1;
                end = now() + 30;
                while (now() < end && !link_up(ro))
                        usleep(20000);
                bool up_before = link_up(ro);
                barrier(role, peer_ip, "kill-up", 120);
                kill(c, SIGKILL);
                waitpid(c, NULL, 0);
                state(ro, &ks2);
                struct ntbfab_mw_info k0 = {.widx = 0}, k1 = {.widx = 1};
                ioctl(ro, NTBFAB_IOC_MW_INFO, &k0);
                ioctl(ro, NTBFAB_IOC_MW_INFO, &k1);
                struct ntbfab_buf_info kbi = {0};
                int kbr = got_fds ? ioctl(kfds[0], NTBFAB_IOC_BUF_INFO, &kbi) : -1;
                ok = got_fds && ks1.owner_pid == (uint32_t)c && ks1.mw_trans == 2 &&
                     ks1.bufs == 2 && (ks1.flags & NTBFAB_STATE_LINK_ENABLED) && up_before &&
                     !ks2.flags && !ks2.owner_pid && !ks2.mw_trans && ks2.db_mask == 0xf &&
                     !ks2.spads_written && ks2.bufs == 1 && !(k0.flags & NTBFAB_MW_TRANS_SET) &&
                     !(k1.flags & NTBFAB_MW_TRANS_SET) && !kbr && !kbi.trans_count &&
                     spad_read(ro, 0, 3) == 0;
                snprintf(why, sizeof(why),
                         "the child (pid %d) owned it with %u translations, %u buffers, link %s, "
                         "scratchpad 3 written; after SIGKILL a fresh look: flags %#x, owner %u, "
                         "%u translations (MW_INFO: window 0 %s, window 1 %s), doorbell mask "
                         "%#" PRIx64 ", %u scratchpads written, %u buffer (the one whose "
                         "descriptor it passed here: %u translations use it)",
                         (int)c, ks1.mw_trans, ks1.bufs, up_before ? "up" : "down", ks2.flags,
                         ks2.owner_pid, ks2.mw_trans,
                         k0.flags & NTBFAB_MW_TRANS_SET ? "translates" : "clear",
                         k1.flags & NTBFAB_MW_TRANS_SET ? "translates" : "clear",
                         (uint64_t)ks2.db_mask, ks2.spads_written, ks2.bufs, kbi.trans_count);
                if (got_fds)
                        close(kfds[0]);
                state(ro, &ks2);
                result("ntbfab-kill-clears", ok && ks2.bufs == 0,
                       "%s; that descriptor closed: %u buffers", why, ks2.bufs);
                uint64_t after0 = 1, after1 = 1;
                hw_trans(0, &after0, &kz);
                hw_trans(1, &after1, &kz);
                result("ntbfab-kill-hw-clear", ka0 && ka1 && !after0 && !after1,
                       "the emulated NTB's own translations: %#" PRIx64 " and %#" PRIx64
                       " while the child owned it, %#" PRIx64 " and %#" PRIx64 " after its SIGKILL",
                       ka0, ka1, after0, after1);
                /* the window descriptor it passed: its mappings torn down, no new ones */
                int gstatus = -1;
                if (wm != MAP_FAILED) {
                        pid_t g = fork();
                        if (g == 0) {
                                *(volatile uint64_t *)wm = 2;
                                _exit(0);
                        }
                        waitpid(g, &gstatus, 0);
                }
                void *wm2 = got_fds
                                ? mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_SHARED, kfds[1], 0)
                                : MAP_FAILED;
                int e7 = errno;
                result(
                    "ntbfab-window-fd-revoked",
                    wm != MAP_FAILED && WIFSIGNALED(gstatus) && WTERMSIG(gstatus) == SIGBUS &&
                        wm2 == MAP_FAILED && e7 == ENODEV,
                    "the child's window descriptor, mapped here while it lived: a store after its "
                    "death %s; a new mmap: %s",
                    WIFSIGNALED(gstatus) ? strsignal(WTERMSIG(gstatus)) : "went through",
                    wm2 == MAP_FAILED ? strerror(e7) : "accepted");
                barrier(role, peer_ip, "kill-done", 120);
        } else {
                barrier(role, peer_ip, "close-test", 120);
                bool down = wait_link(fd, false, 30, &from);
                result("ntbfab-link-down-seen", down && !link_up(fd),
                       "the other guest's owner closed its file: a link-down event %s",
                       down ? "arrived" : "never came");
                barrier(role, peer_ip, "kill-test", 120);
                bool up = wait_link(fd, true, 30, &from);
                barrier(role, peer_ip, "kill-up", 120);
                bool down2 = up && wait_link(fd, false, 30, &from);
                result("ntbfab-peer-kill-link-down", up && down2,
                       "the link came up when the other guest's new owner enabled it (%s) and "
                       "went down when that process was SIGKILLed (%s)",
                       up ? "seen" : "not seen", down2 ? "seen" : "not seen");
                barrier(role, peer_ip, "kill-done", 120);
                /* the link disabled and enabled again by this owner */
                struct ntbfab_link ld1 = {0}, ld2 = {0};
                int dr = ioctl(fd, NTBFAB_IOC_LINK_DISABLE, 0);
                ioctl(fd, NTBFAB_IOC_LINK_STATUS, &ld1);
                uint64_t hwl1 = 1, hwl2 = 0;
                hw_link(&hwl1);
                struct ntbfab_link en = {.speed = -1, .width = -1};
                int er = ioctl(fd, NTBFAB_IOC_LINK_ENABLE, &en);
                ioctl(fd, NTBFAB_IOC_LINK_STATUS, &ld2);
                hw_link(&hwl2);
                result("ntbfab-link-disable",
                       !dr && !(ld1.flags & NTBFAB_LINK_ENABLED) && !ld1.up && !hwl1 && !er &&
                           (ld2.flags & NTBFAB_LINK_ENABLED) && hwl2,
                       "LINK_DISABLE: status flags %#x, up %#" PRIx64
                       ", the emulated NTB's own link flag %" PRIu64
                       "; LINK_ENABLE again: flags %#x, own flag %" PRIu64,
                       ld1.flags, (uint64_t)ld1.up, hwl1, ld2.flags, hwl2);
                state(fd, &s1);
                close(fd);
                close(b1.a.fd);
                munmap(b1.map, 16 * MIB);
                state(ro, &st);
                hw_trans(1, &ha1, &hs1);
                ok = (s1.flags & NTBFAB_STATE_LINK_ENABLED) && s1.mw_trans == 1 &&
                     s1.spads_written == 1 && !st.flags && !st.mw_trans && st.db_mask == 0xf &&
                     !st.spads_written && !st.bufs && !ha1 &&
                     !(spad_read(ro, 0, 3) | spad_read(ro, 0, 0) | spad_read(ro, 0, 1));
                result("ntbfab-close-undoes", ok,
                       "before close: flags %#x, %u translation(s), %u scratchpad(s) written; "
                       "after close and unmap: flags %#x, %u translations, doorbell mask %#" PRIx64
                       ", %u scratchpads written, %u buffers, the emulated NTB's window 1 "
                       "translates to %#" PRIx64,
                       s1.flags, s1.mw_trans, s1.spads_written, st.flags, st.mw_trans,
                       (uint64_t)st.db_mask, st.spads_written, st.bufs, ha1);
        }
        close(ro);
        return 0;
}

/*
 * What the NTB holds now, read through the character device (a read-only open, which any
 * process may make beside the owner) and the emulated NTB's debugfs: one line
 * "owner PID opens N mw_trans 0xM peer_mw_trans 0xM bufs N hw_trans 0xA 0xB".
 */
static int cmd_state(char **argv)
{
        hw_state = argv[1];
        int fd = open(argv[0], O_RDONLY | O_CLOEXEC);
        struct ntbfab_state st = {0};
        if (fd < 0 || ioctl(fd, NTBFAB_IOC_STATE, &st)) {
                fprintf(stderr, "ntbfab-ntbtest: %s: %s\n", argv[0], strerror(errno));
                return 1;
        }
        close(fd);
        uint64_t a0 = 0, a1 = 0, z;
        hw_trans(0, &a0, &z);
        hw_trans(1, &a1, &z);
        /* this process's own read-only open is one of the opens counted */
        printf("owner %u opens %u mw_trans %#x peer_mw_trans %#x bufs %u hw_trans %#" PRIx64
               " %#" PRIx64 "\n",
               st.owner_pid, st.opens - 1, st.mw_trans, st.peer_mw_trans, st.bufs, a0, a1);
        return 0;
}

int main(int argc, char **argv)
{
        static const struct {
                const char *name;
                int args;
                int (*fn)(char **);
        } cmds[] = {
            {"barrier", 4, cmd_barrier},
            {"tcp-send", 4, cmd_tcp_send},
            {"tcp-recv", 3, cmd_tcp_recv},
            {"ntbfab", 3, cmd_ntbfab},
            {"state", 2, cmd_state},
        };
        setvbuf(stdout, NULL, _IOLBF, 0);
        for (size_t i = 0; argc > 1 && i < sizeof(cmds) / sizeof(cmds[0]); i++)
                if (!strcmp(argv[1], cmds[i].name) && argc == cmds[i].args + 2)
                        return cmds[i].fn(argv + 2);
        fprintf(stderr, "usage: ntbfab-ntbtest barrier a|b PEER_IP NAME SECONDS\n"
                        "       ntbfab-ntbtest tcp-send IP PORT BYTES SEED\n"
                        "       ntbfab-ntbtest tcp-recv PORT BYTES SEED\n"
                        "       ntbfab-ntbtest ntbfab a|b PEER_IP HW_STATE_FILE\n"
                        "       ntbfab-ntbtest state /dev/ntbfab-ntbN HW_STATE_FILE\n");
        return 2;
}
