/* tests/integration/test_daemon_hostile.c: strangers and insiders on the management network and
 * local clients that misbehave, against real daemons; the node must stay usable for its operators
 * throughout (docs/peer.md, "Limits"; docs/rpc.md). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon_fx.h"
#include "keyfile.h"
#include "ntbfab/error.h"
#include "peerproto.h"

static struct dfx F;

/* Under AddressSanitizer freed memory waits in a quarantine (256 MiB by default): a process's
 * resident size then says nothing about what it holds, and the memory bounds are not checked
 * (the rest of each test is). */
#ifdef __SANITIZE_ADDRESS__
#define RSS_MEANINGFUL false
#else
#define RSS_MEANINGFUL true
#endif
static uint8_t KEY[32];
static uint32_t NVME;

#define PORT_FM       18001
#define PORT_BORROWER 18002
#define PORT_LENDER   18003
#define ID_FM         4
#define ID_BORROWER   8
#define ID_LENDER     12

static int group_up(void **state)
{
        (void)state;
        dfx_up(&F, "daemon-hostile.yaml");
        char p[600], why[256];
        snprintf(p, sizeof(p), "%s/cluster.key", F.dir);
        if (ntbf__key_read(p, KEY, why, sizeof(why)))
                fail_msg("%s", why);
        NVME = dfx_fdid(&F, "lender", "nvme");
        return 0;
}

static int group_down(void **state)
{
        (void)state;
        dfx_down(&F);
        return 0;
}

/* ---- helpers ------------------------------------------------------------------------------- */

static int tcp(uint16_t port)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
        inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
                close(fd);
                return -errno;
        }
        return fd;
}

/* Whether the daemon closed fd (EOF or reset) within ms; bytes it sent first go to *got. */
static bool closed_within(int fd, int ms, size_t *got)
{
        char buf[4096];
        size_t total = 0;
        for (int t = 0; t < ms; t += 10) {
                struct pollfd p = {fd, POLLIN, 0};
                if (poll(&p, 1, 10) <= 0)
                        continue;
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n <= 0) {
                        if (got)
                                *got = total;
                        return true;
                }
                total += (size_t)n;
        }
        if (got)
                *got = total;
        return false;
}

static long rss_kib(int pid)
{
        char p[64], line[256];
        snprintf(p, sizeof(p), "/proc/%d/status", pid);
        FILE *f = fopen(p, "r");
        assert_non_null(f);
        long kib = -1;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
                        break;
        fclose(f);
        return kib;
}

/* The node serves its operators: a status and a borrow/return through the manager. */
static void operators_served(void)
{
        json_object_put(dfx_ok(&F, "borrower", "node.status", NULL));
        char p[64];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", NVME);
        json_object_put(dfx_ok(&F, "borrower", "device.borrow", p));
        json_object_put(dfx_ok(&F, "borrower", "device.return", p));
}

/* A HELLO made with the cluster key: what an eavesdropper records and replays. */
static void genuine_hello(uint32_t from, uint32_t to, uint8_t **f, size_t *n)
{
        struct ntbf__pp pp;
        assert_int_equal(ntbf__pp_init(&pp, true, KEY, from, NULL), 0);
        assert_int_equal(ntbf__pp_hello(&pp, to, f, n), 0);
        ntbf__pp_free(&pp);
}

/* ---- tests --------------------------------------------------------------------------------- */

/*
 * A HELLO of the manager to the borrower, recorded and replayed without the key, over and
 * over while the borrower's operators borrow and return: no replay takes the session over.
 */
static void test_replayed_hello(void **state)
{
        (void)state;
        uint8_t *hello;
        size_t n;
        genuine_hello(ID_FM, ID_BORROWER, &hello, &n);
        int replaced = dfx_log_count(&F, "borrower", "replaced by a new session");
        int lost = dfx_log_count(&F, "borrower", "session with node 'fm'");
        /* Rounds of 20 at once (under the cap of connections in the handshake). */
        for (int round = 0; round < 4; round++) {
                int fds[20];
                for (int i = 0; i < 20; i++) {
                        fds[i] = tcp(PORT_BORROWER);
                        assert_true(fds[i] >= 0);
                        assert_int_equal(write(fds[i], hello, n), (ssize_t)n);
                }
                operators_served();
                /* The replayer cannot answer the challenge: the daemon gives up on it. */
                for (int i = 0; i < 20; i++) {
                        assert_true(closed_within(fds[i], 10000, NULL));
                        close(fds[i]);
                }
        }
        free(hello);
        operators_served();
        assert_int_equal(dfx_log_count(&F, "borrower", "replaced by a new session"), replaced);
        assert_int_equal(dfx_log_count(&F, "borrower", "session with node 'fm'"), lost);
}

/* A HELLO that names a node of no cluster, or the server itself, or another server, gets no
 * WELCOME: the connection closes before a byte is sent back. */
static void test_hello_checked_before_welcome(void **state)
{
        (void)state;
        static const uint32_t ids[][2] = {
            {99, ID_BORROWER}, {ID_BORROWER, ID_BORROWER}, {ID_FM, ID_LENDER}};
        for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
                uint8_t *hello;
                size_t n, got = 1;
                genuine_hello(ids[i][0], ids[i][1], &hello, &n);
                int fd = tcp(PORT_BORROWER);
                assert_int_equal(write(fd, hello, n), (ssize_t)n);
                free(hello);
                assert_true(closed_within(fd, 5000, &got));
                if (got)
                        fail_msg("HELLO %u -> %u: the daemon answered %zu bytes", ids[i][0],
                                 ids[i][1], got);
                close(fd);
        }
        operators_served();
}

/* Headers that announce a megabyte cost the daemon nothing: refused at the header. */
static void test_oversized_frames(void **state)
{
        (void)state;
        int pid = dfx_pid(&F, "borrower");
        long before = rss_kib(pid);
        static uint8_t junk[65536];
        int fds[100];
        for (int i = 0; i < 100; i++) {
                uint8_t h[32] = {'N', 'T', 'B', 'P', NTBF_PP_VERSION, 1};
                h[8] = 0x00, h[9] = 0x10, h[10] = 0, h[11] = 0; /* 1 MiB of payload */
                fds[i] = tcp(PORT_BORROWER);
                assert_true(fds[i] >= 0);
                fcntl(fds[i], F_SETFL, O_NONBLOCK);
                assert_int_equal(write(fds[i], h, sizeof(h)), 32);
                if (write(fds[i], junk, sizeof(junk)) < 0) {
                }
        }
        for (int i = 0; i < 100; i++) {
                assert_true(closed_within(fds[i], 5000, NULL));
                close(fds[i]);
        }
        long after = rss_kib(pid);
        print_message("borrower RSS %ld KiB before, %ld KiB after 100 oversized headers\n", before,
                      after);
        assert_true(!RSS_MEANINGFUL || after - before < 8 * 1024);
        operators_served();
}

/* Idle connections beyond the cap are closed at once, the rest at the handshake timeout; the
 * operators are served meanwhile, and a daemon with few descriptors still accepts them. */
static void idle_flood(int count)
{
        int *fds = calloc((size_t)count, sizeof(int));
        int opened = 0;
        for (int i = 0; i < count; i++) {
                fds[i] = tcp(PORT_BORROWER);
                if (fds[i] >= 0)
                        opened++;
                if (i % 100 == 50)
                        json_object_put(dfx_ok(&F, "borrower", "node.status", NULL));
        }
        assert_true(opened > 0);
        operators_served();
        int shut = 0;
        for (int i = 0; i < count; i++) {
                if (fds[i] < 0)
                        continue;
                shut += closed_within(fds[i], 10000, NULL);
                close(fds[i]);
        }
        assert_int_equal(shut, opened);
        free(fds);
        operators_served();
}

static void test_idle_flood(void **state)
{
        (void)state;
        idle_flood(400);
}

static void test_descriptor_limit(void **state)
{
        (void)state;
        int pid = dfx_pid(&F, "borrower");
        struct rlimit lim, old;
        assert_int_equal(prlimit(pid, RLIMIT_NOFILE, NULL, &old), 0);
        lim = (struct rlimit){256, old.rlim_max}; /* ulimit -n 256 (soft: it can be undone) */
        assert_int_equal(prlimit(pid, RLIMIT_NOFILE, &lim, NULL), 0);
        idle_flood(400);
        /* Many operators at once, while strangers keep coming. */
        int fds[300];
        for (int i = 0; i < 300; i++)
                fds[i] = tcp(PORT_BORROWER);
        struct ntbf_rpc *c[20];
        char path[512];
        ntbf_rpc_socket_path(F.dir, "borrower", path, sizeof(path));
        for (int i = 0; i < 20; i++)
                assert_int_equal(ntbf_rpc_connect(path, &c[i]), 0);
        for (int i = 0; i < 20; i++) {
                struct json_object *res = NULL;
                int r = ntbf_rpc_call(c[i], "node.status", NULL, &res, 10000);
                if (r)
                        fail_msg("operator %d: %s", i, ntbf_rpc_error(c[i]));
                json_object_put(res);
                ntbf_rpc_close(c[i]);
        }
        for (int i = 0; i < 300; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        operators_served();
        assert_int_equal(prlimit(pid, RLIMIT_NOFILE, &old, NULL), 0);
}

/* Refused frames are logged, but not each of thousands: a burst, then one line that counts
 * the rest once the window is over. */
static void test_refusals_rate_limited(void **state)
{
        (void)state;
        /* Start in a fresh window: the last one's summary is out. */
        dfx_nap(10500);
        int summaries = dfx_log_count(&F, "borrower", "not logged in the last");
        int before = dfx_log_count(&F, "borrower", "peer 127.0.0.1");
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < 1000; i++) {
                int fd = tcp(PORT_BORROWER);
                assert_true(fd >= 0);
                static const char junk[64] = "GET / HTTP/1.0\r\n\r\n";
                if (write(fd, junk, sizeof(junk)) < 0) {
                }
                assert_true(closed_within(fd, 5000, NULL));
                close(fd);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        int after = dfx_log_count(&F, "borrower", "peer 127.0.0.1");
        /* 10 lines per window of 10 s: the windows the flood took (one, unless this machine
         * is slow), each holding at most 10. */
        long windows = 1 + (long)(t1.tv_sec - t0.tv_sec) / 10;
        print_message("%d log lines for 1000 refused connections (%ld window%s of 10 s)\n",
                      after - before, windows, windows == 1 ? "" : "s");
        assert_true(after - before > 0);
        assert_true(after - before <= 10 * windows);
        for (int t = 0;
             t < 12000 && dfx_log_count(&F, "borrower", "not logged in the last") == summaries;
             t += 100)
                dfx_nap(100);
        assert_int_equal(dfx_log_count(&F, "borrower", "not logged in the last"), summaries + 1);
        operators_served();
}

/* An insider with the key, as the manager: a malformed unprogram is refused, not acknowledged. */
static void test_malformed_unprogram(void **state)
{
        (void)state;
        struct ntbf__pp pp;
        assert_int_equal(ntbf__pp_init(&pp, true, KEY, ID_FM, NULL), 0);
        uint8_t *f;
        size_t n;
        assert_int_equal(ntbf__pp_hello(&pp, ID_BORROWER, &f, &n), 0);
        int fd = tcp(PORT_BORROWER);
        assert_int_equal(write(fd, f, n), (ssize_t)n);
        free(f);
        struct ntbf__pp_event ev;
        int r = 0;
        uint8_t buf[4096];
        while (r == 0) {
                ssize_t k = read(fd, buf, sizeof(buf));
                assert_true(k > 0);
                assert_int_equal(ntbf__pp_feed(&pp, buf, (size_t)k), 0);
                r = ntbf__pp_next(&pp, &ev);
        }
        assert_int_equal(r, 1);
        assert_int_equal(ev.kind, NTBF_PP_EV_OPEN);
        if (ev.reply) {
                assert_int_equal(write(fd, ev.reply, ev.reply_len), (ssize_t)ev.reply_len);
                free(ev.reply);
        }
        static const char *const bad[] = {
            "{\"t\":\"q\",\"id\":1,\"m\":\"unprogram\",\"p\":{\"entries\":[\"slot nonsense\"]}}",
            "{\"t\":\"q\",\"id\":2,\"m\":\"unprogram\",\"p\":{\"entries\":7}}",
            "{\"t\":\"q\",\"id\":3,\"m\":\"unprogram\",\"p\":{}}",
            "{\"t\":\"q\",\"id\":4,\"m\":\"program\",\"p\":{\"entries\":[\"slot nonsense\"]}}",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                assert_int_equal(ntbf__pp_seal(&pp, bad[i], strlen(bad[i]), &f, &n), 0);
                assert_int_equal(write(fd, f, n), (ssize_t)n);
                free(f);
        }
        int answers = 0;
        while (answers < 4) {
                r = ntbf__pp_next(&pp, &ev);
                if (r == 0) {
                        ssize_t k = read(fd, buf, sizeof(buf));
                        assert_true(k > 0);
                        assert_int_equal(ntbf__pp_feed(&pp, buf, (size_t)k), 0);
                        continue;
                }
                assert_int_equal(r, 1);
                char text[1024];
                snprintf(text, sizeof(text), "%.*s", (int)ev.len, (const char *)ev.data);
                if (!strstr(text, "\"t\":\"r\""))
                        continue; /* heartbeats */
                answers++;
                if (strstr(text, "\"e\":0"))
                        fail_msg("a malformed request was acknowledged: %s", text);
        }
        close(fd);
        ntbf__pp_free(&pp);
        /* The real manager dials the borrower again; the node is usable once it is back. */
        assert_true(dfx_wait_ready(&F, "borrower", 10000));
        operators_served();
}

/* A local client that sends requests and never reads the answers is disconnected. */
static void test_client_not_reading(void **state)
{
        (void)state;
        int pid = dfx_pid(&F, "borrower");
        long before = rss_kib(pid);
        char path[512];
        ntbf_rpc_socket_path(F.dir, "borrower", path, sizeof(path));
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        assert_true(strlen(path) < sizeof(sa.sun_path));
        memcpy(sa.sun_path, path, strlen(path) + 1);
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        int small = 4096;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
        fcntl(fd, F_SETFL, O_NONBLOCK);
        static const char req[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"node.status\"}\n";
        bool dropped = false;
        for (int i = 0; i < 200000 && !dropped; i++) {
                ssize_t k = write(fd, req, sizeof(req) - 1);
                if (k < 0 && errno == EAGAIN) {
                        struct pollfd p = {fd, POLLOUT, 0};
                        poll(&p, 1, 100);
                        if (p.revents & (POLLERR | POLLHUP))
                                dropped = true;
                        continue;
                }
                if (k < 0)
                        dropped = true;
        }
        close(fd);
        long after = rss_kib(pid);
        print_message("borrower RSS %ld KiB before, %ld KiB after a client that does not read\n",
                      before, after);
        assert_true(dropped);
        assert_true(!RSS_MEANINGFUL || after - before < 32 * 1024);
        assert_true(dfx_log_count(&F, "borrower", "does not read") > 0);
        operators_served();
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_replayed_hello),
            cmocka_unit_test(test_hello_checked_before_welcome),
            cmocka_unit_test(test_oversized_frames),
            cmocka_unit_test(test_idle_flood),
            cmocka_unit_test(test_descriptor_limit),
            cmocka_unit_test(test_refusals_rate_limited),
            cmocka_unit_test(test_malformed_unprogram),
            cmocka_unit_test(test_client_not_reading),
        };
        signal(SIGPIPE, SIG_IGN); /* writes to connections the daemon dropped fail instead */
        if (getenv("TEST_FILTER"))
                cmocka_set_test_filter(getenv("TEST_FILTER"));
        return cmocka_run_group_tests(tests, group_up, group_down);
}
