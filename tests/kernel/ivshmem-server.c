/* tests/kernel/ivshmem-server.c: the server of QEMU's ivshmem-doorbell devices for the emulated
 * NTB (docs/linux-ntb.md), since Debian packages none.
 *
 * It speaks the client-server protocol of QEMU's docs/specs/ivshmem-spec.txt ("The ivshmem
 * Client-Server Protocol"): every message is a little-endian int64, some with a file descriptor
 * (SCM_RIGHTS). A client that connects receives the protocol version (0), its peer id, -1 with
 * the shared memory's descriptor, then for each other connected peer that peer's id once per
 * vector with one of its eventfds, then its own id once per vector with its own eventfds; the
 * other peers receive its id with its eventfds, and its id alone when it disconnects.
 *
 * Unlike QEMU's contrib/ivshmem-server, each peer has its own socket, and so a fixed id, and its
 * own shared memory: the emulated NTB gives each guest the *other* guest's RAM file, so that its
 * BAR2 is the peer's physical memory.
 *
 *   ntbfab-ivshmem-server --vectors N --peer ID:SOCKET:SHM [--peer ID:SOCKET:SHM ...]
 *
 * It runs until SIGTERM or SIGINT, logging connections on stdout, and removes its sockets. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_PEERS   16
#define MAX_VECTORS 64

struct peer {
        long id;
        const char *path;
        int listen_fd;
        int shm_fd;
        int conn;             /* -1: not connected */
        int efd[MAX_VECTORS]; /* its eventfds while connected */
};

static struct peer peers[MAX_PEERS];
static int npeers;
static int nvectors = 1;
static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
        (void)sig;
        stopping = 1;
}

static void usage(FILE *f)
{
        fprintf(f, "usage: ntbfab-ivshmem-server --vectors N --peer ID:SOCKET:SHM "
                   "[--peer ID:SOCKET:SHM ...]\n"
                   "  serves QEMU ivshmem-doorbell devices: the client on SOCKET gets peer id ID "
                   "and the file SHM as its shared memory\n");
}

/* One protocol message: a little-endian int64, with a descriptor when fd >= 0. */
static int send_msg(int conn, int64_t value, int fd)
{
        uint64_t le = 0;
        for (int i = 0; i < 8; i++)
                le |= (uint64_t)(((uint64_t)value >> (8 * i)) & 0xff) << (8 * i);
        struct iovec iov = {.iov_base = &le, .iov_len = sizeof(le)};
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } ctl;
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        if (fd >= 0) {
                memset(&ctl, 0, sizeof(ctl));
                msg.msg_control = ctl.buf;
                msg.msg_controllen = sizeof(ctl.buf);
                struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof(int));
        }
        ssize_t n;
        do {
                n = sendmsg(conn, &msg, MSG_NOSIGNAL);
        } while (n < 0 && errno == EINTR);
        return n == (ssize_t)sizeof(le) ? 0 : -1;
}

static void drop(struct peer *p, const char *why)
{
        printf("ivshmem-server: peer %ld disconnected (%s)\n", p->id, why);
        close(p->conn);
        p->conn = -1;
        for (int v = 0; v < nvectors; v++) {
                close(p->efd[v]);
                p->efd[v] = -1;
        }
        for (int i = 0; i < npeers; i++)
                if (peers[i].conn >= 0 && send_msg(peers[i].conn, p->id, -1) < 0)
                        printf("ivshmem-server: cannot tell peer %ld: %s\n", peers[i].id,
                               strerror(errno));
        fflush(stdout);
}

static int greet(struct peer *p)
{
        for (int v = 0; v < nvectors; v++) {
                p->efd[v] = eventfd(0, EFD_CLOEXEC);
                if (p->efd[v] < 0)
                        return -1;
        }
        if (send_msg(p->conn, 0, -1) < 0 || send_msg(p->conn, p->id, -1) < 0 ||
            send_msg(p->conn, -1, p->shm_fd) < 0)
                return -1;
        for (int i = 0; i < npeers; i++) {
                struct peer *o = &peers[i];
                if (o == p || o->conn < 0)
                        continue;
                for (int v = 0; v < nvectors; v++)
                        if (send_msg(p->conn, o->id, o->efd[v]) < 0)
                                return -1;
                for (int v = 0; v < nvectors; v++)
                        if (send_msg(o->conn, p->id, p->efd[v]) < 0)
                                printf("ivshmem-server: cannot tell peer %ld: %s\n", o->id,
                                       strerror(errno));
        }
        for (int v = 0; v < nvectors; v++)
                if (send_msg(p->conn, p->id, p->efd[v]) < 0)
                        return -1;
        return 0;
}

static void accept_peer(struct peer *p)
{
        int conn = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (conn < 0) {
                printf("ivshmem-server: accept on %s: %s\n", p->path, strerror(errno));
                return;
        }
        if (p->conn >= 0) {
                printf("ivshmem-server: refused a second client on %s: peer %ld is connected\n",
                       p->path, p->id);
                close(conn);
                fflush(stdout);
                return;
        }
        p->conn = conn;
        if (greet(p) < 0) {
                drop(p, strerror(errno));
                return;
        }
        printf("ivshmem-server: peer %ld connected on %s\n", p->id, p->path);
        fflush(stdout);
}

static int parse_peer(const char *arg, struct peer *p)
{
        char *copy = strdup(arg), *end;
        char *sock = copy ? strchr(copy, ':') : NULL;
        char *shm = sock ? strchr(sock + 1, ':') : NULL;
        if (!shm) {
                fprintf(stderr, "ntbfab-ivshmem-server: --peer %s: expected ID:SOCKET:SHM\n", arg);
                free(copy);
                return -1;
        }
        *sock++ = 0;
        *shm++ = 0;
        errno = 0;
        p->id = strtol(copy, &end, 10);
        if (errno || *end || p->id < 0 || p->id > 65535) {
                fprintf(stderr, "ntbfab-ivshmem-server: --peer %s: the id must be 0..65535\n", arg);
                free(copy);
                return -1;
        }
        p->path = strdup(sock);
        p->shm_fd = open(shm, O_RDWR | O_CLOEXEC);
        struct stat st;
        if (p->shm_fd < 0 || fstat(p->shm_fd, &st) < 0 || st.st_size <= 0) {
                fprintf(stderr,
                        "ntbfab-ivshmem-server: --peer %s: cannot use %s as shared memory: %s\n",
                        arg, shm, p->shm_fd < 0 ? strerror(errno) : "empty file");
                free(copy);
                return -1;
        }
        free(copy);
        p->conn = -1;
        for (int v = 0; v < MAX_VECTORS; v++)
                p->efd[v] = -1;
        return 0;
}

static int listen_on(struct peer *p)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(p->path) >= sizeof(sa.sun_path)) {
                fprintf(stderr, "ntbfab-ivshmem-server: socket path %s is longer than %zu bytes\n",
                        p->path, sizeof(sa.sun_path) - 1);
                return -1;
        }
        strcpy(sa.sun_path, p->path);
        unlink(p->path);
        p->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (p->listen_fd < 0 || bind(p->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            listen(p->listen_fd, 4) < 0) {
                fprintf(stderr, "ntbfab-ivshmem-server: cannot listen on %s: %s\n", p->path,
                        strerror(errno));
                return -1;
        }
        return 0;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {{"vectors", required_argument, NULL, 'v'},
                                             {"peer", required_argument, NULL, 'p'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
        int c;
        char *end;
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 'v':
                        errno = 0;
                        nvectors = (int)strtol(optarg, &end, 10);
                        if (errno || *end || nvectors < 1 || nvectors > MAX_VECTORS) {
                                fprintf(stderr,
                                        "ntbfab-ivshmem-server: --vectors %s: 1 to %d vectors\n",
                                        optarg, MAX_VECTORS);
                                return 2;
                        }
                        break;
                case 'p':
                        if (npeers == MAX_PEERS) {
                                fprintf(stderr, "ntbfab-ivshmem-server: at most %d peers\n",
                                        MAX_PEERS);
                                return 2;
                        }
                        if (parse_peer(optarg, &peers[npeers]) < 0)
                                return 2;
                        for (int i = 0; i < npeers; i++) {
                                if (peers[i].id == peers[npeers].id) {
                                        fprintf(stderr,
                                                "ntbfab-ivshmem-server: peer id %ld given twice\n",
                                                peers[i].id);
                                        return 2;
                                }
                        }
                        npeers++;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (optind < argc || !npeers) {
                usage(stderr);
                return 2;
        }
        struct sigaction sa = {.sa_handler = on_signal};
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
        int ret = 0;
        for (int i = 0; i < npeers; i++)
                if (listen_on(&peers[i]) < 0)
                        ret = 1;
        if (!ret) {
                printf("ivshmem-server: serving %d peer(s), %d vector(s) each\n", npeers, nvectors);
                fflush(stdout);
        }
        while (!ret && !stopping) {
                struct pollfd pfd[2 * MAX_PEERS];
                for (int i = 0; i < npeers; i++) {
                        pfd[2 * i] = (struct pollfd){.fd = peers[i].listen_fd, .events = POLLIN};
                        pfd[2 * i + 1] = (struct pollfd){.fd = peers[i].conn, .events = POLLIN};
                }
                if (poll(pfd, 2 * npeers, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        perror("ntbfab-ivshmem-server: poll");
                        ret = 1;
                        break;
                }
                for (int i = 0; i < npeers; i++) {
                        struct peer *p = &peers[i];
                        if (p->conn >= 0 && pfd[2 * i + 1].revents) {
                                /* clients send nothing: data or end of file, it is gone */
                                char b[64];
                                ssize_t n = read(p->conn, b, sizeof(b));
                                if (n <= 0)
                                        drop(p, n < 0 ? strerror(errno) : "end of file");
                        }
                        if (pfd[2 * i].revents & POLLIN)
                                accept_peer(p);
                }
        }
        for (int i = 0; i < npeers; i++)
                if (peers[i].path && peers[i].listen_fd > 0)
                        unlink(peers[i].path);
        return ret;
}
