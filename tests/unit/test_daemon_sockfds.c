/* tests/unit/test_daemon_sockfds.c: descriptors over the daemon's real Unix socket, in order. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon.h"

/*
 * docs/rpc.md, "File descriptors": an answer's descriptors travel on its own bytes and never
 * overtake what was sent before. The hard case is an answer with descriptors while libuv
 * still holds bytes of an earlier answer the client has not read: it must wait behind them
 * (tran_sock.c, struct pend). Here a client pipelines a request with a 900 KB answer and one
 * with descriptors, and reads only once both are answered: the second waits in the
 * transport's queue and must go out once libuv has written the first.
 */

#define BIG (900 * 1024)

static void m_big(void *ctx, struct ntbf__rpc_call *call, struct json_object *params)
{
        (void)ctx;
        (void)params;
        char *s = malloc(BIG + 1);
        memset(s, 'a', BIG);
        s[BIG] = 0;
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "big", json_object_new_string(s));
        free(s);
        ntbf__rpc_result(call, o);
}

static int pipe_fds[2];

static void m_fds(void *ctx, struct ntbf__rpc_call *call, struct json_object *params)
{
        (void)ctx;
        (void)params;
        static const char *const names[] = {"r", "w"};
        ntbf__rpc_result_fds(call, NULL, pipe_fds, names, 2);
        /* The daemon keeps its own: the transport sent (or duplicated) them. */
}

static const struct ntbf__rpc_method methods[] = {
    {"t.big", m_big, {{NULL}}},
    {"t.fds", m_fds, {{NULL}}},
};

struct client {
        char path[108];
        volatile int done;
        size_t total;   /* bytes received */
        size_t fds_end; /* end of the bytes read with the descriptors */
        int fds[2], nfds;
        size_t second_line; /* offset where the second answer starts */
        char *data;
};

static void *client(void *arg)
{
        struct client *c = arg;
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", c->path);
        if (connect(s, (struct sockaddr *)&sa, sizeof(sa)))
                goto out;
        const char *req = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.big\"}\n"
                          "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"t.fds\"}\n";
        if (write(s, req, strlen(req)) != (ssize_t)strlen(req))
                goto out;
        usleep(300 * 1000); /* both answered by now; most of the first still in libuv */
        c->data = malloc(2 * BIG);
        c->fds_end = 0;
        for (int waited = 0; c->total < 2 * BIG && waited < 500;) {
                union {
                        char buf[CMSG_SPACE(4 * sizeof(int))];
                        struct cmsghdr align;
                } cb;
                struct iovec iov = {c->data + c->total, 2 * BIG - c->total};
                struct msghdr mh = {.msg_iov = &iov,
                                    .msg_iovlen = 1,
                                    .msg_control = cb.buf,
                                    .msg_controllen = sizeof(cb.buf)};
                ssize_t n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
                if (n < 0 && errno == EAGAIN) {
                        char *nl = memchr(c->data, '\n', c->total);
                        if (nl && memchr(nl + 1, '\n', c->total - (size_t)(nl + 1 - c->data)))
                                break; /* both lines are in */
                        usleep(10 * 1000);
                        waited++;
                        continue;
                }
                if (n <= 0)
                        break;
                struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
                if (h && h->cmsg_type == SCM_RIGHTS) {
                        c->nfds = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                        memcpy(c->fds, CMSG_DATA(h), 2 * sizeof(int));
                        c->fds_end = c->total + (size_t)n;
                }
                c->total += (size_t)n;
        }
        char *nl = memchr(c->data, '\n', c->total);
        if (nl)
                c->second_line = (size_t)(nl + 1 - c->data);
out:
        close(s);
        c->done = 1;
        return NULL;
}

static void close_cb(uv_handle_t *h)
{
        (void)h;
}

static void test_fds_wait_behind_queued_bytes(void **state)
{
        (void)state;
        struct ntbf__d d = {0};
        d.t = ntbf_topo_new("t", NULL);
        d.loop = calloc(1, sizeof(*d.loop));
        uv_loop_init(d.loop);
        snprintf(d.sock_path, sizeof(d.sock_path), "/tmp/ntbf-sockfds-%d.sock", getpid());
        assert_int_equal(pipe(pipe_fds), 0);
        char why[256];
        assert_int_equal(ntbf__sock_listen(&d, why, sizeof(why)), 0);
        d.rpc.methods = methods;
        d.rpc.nmethods = 2;
        d.rpc.conn_gone = NULL;
        struct client c = {0};
        snprintf(c.path, sizeof(c.path), "/tmp/ntbf-sockfds-%d.sock", getpid());
        pthread_t th;
        pthread_create(&th, NULL, client, &c);
        while (!c.done)
                uv_run(d.loop, UV_RUN_NOWAIT), usleep(1000);
        pthread_join(th, NULL);
        /* The first answer whole, then the second, with both descriptors on its bytes: a
         * Unix stream read stops after the bytes that carry descriptors, so the read that
         * got them ends inside the second answer (had they overtaken the first answer's
         * queued bytes, it would end before). */
        assert_true(c.second_line > BIG);
        assert_non_null(strstr(c.data + c.second_line, "\"fds\":[\"r\",\"w\"]"));
        assert_int_equal(c.nfds, 2);
        assert_true(c.fds_end > c.second_line);
        /* They are the daemon's pipe. */
        assert_int_equal(write(pipe_fds[1], "q", 1), 1);
        char ch;
        assert_int_equal(read(c.fds[0], &ch, 1), 1);
        assert_int_equal(ch, 'q');
        for (int i = 0; i < 2; i++) {
                close(c.fds[i]);
                close(pipe_fds[i]);
        }
        free(c.data);
        /* Close what the socket left: the connection closes on its end of input. */
        for (int i = 0; i < 50; i++)
                uv_run(d.loop, UV_RUN_NOWAIT), usleep(1000);
        uv_close((uv_handle_t *)&d.listener, close_cb);
        uv_run(d.loop, UV_RUN_DEFAULT);
        assert_int_equal(uv_loop_close(d.loop), 0);
        free(d.loop);
        unlink(d.sock_path);
        ntbf_topo_free(d.t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_fds_wait_behind_queued_bytes),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
