/* tests/unit/test_rpc_client.c: the JSON-RPC client against a scripted daemon in a thread. */
#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
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

#include "ntbfab/error.h"
#include "ntbfab/rpc.h"

/*
 * The fake daemon answers each request line with the next scripted reply ("%ID%" is the id).
 * A reply starting with "FDS " goes out with two descriptors attached (SCM_RIGHTS): the
 * read and write ends of a fresh pipe; "LATEFDS " is such a reply sent after the client
 * gave up on it; "NOFDS " announces descriptors it does not send.
 */

static int pipe_msgs[2][2]; /* the pipes sent, kept so the test can check what arrived */
static int npipes;

static void send_fds(int fd, const char *text)
{
        int p[2];
        assert_int_equal(pipe(p), 0);
        char cb[CMSG_SPACE(2 * sizeof(int))] = {0};
        struct iovec iov = {(void *)text, strlen(text)};
        struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb, .msg_controllen = sizeof(cb)};
        struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(2 * sizeof(int));
        memcpy(CMSG_DATA(h), p, sizeof(p));
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
        (void)w;
        if (npipes < 2) {
                pipe_msgs[npipes][0] = p[0];
                pipe_msgs[npipes][1] = p[1];
                npipes++;
        }
}
struct script {
        const char *replies[8];
        int listen_fd;
        char path[108];
        char got[4096]; /* the last request line received */
};

static void *serve(void *arg)
{
        struct script *s = arg;
        int fd = accept(s->listen_fd, NULL, NULL);
        char buf[8192];
        size_t len = 0;
        for (int i = 0; s->replies[i]; i++) {
                char *nl;
                while (!(nl = memchr(buf, '\n', len))) {
                        ssize_t n = recv(fd, buf + len, sizeof(buf) - len, 0);
                        if (n <= 0)
                                goto out;
                        len += (size_t)n;
                }
                size_t l = (size_t)(nl - buf);
                memcpy(s->got, buf, l);
                s->got[l] = 0;
                memmove(buf, nl + 1, len - l - 1);
                len -= l + 1;
                struct json_object *req = json_tokener_parse(s->got), *id;
                json_object_object_get_ex(req, "id", &id);
                char idstr[32];
                snprintf(idstr, sizeof(idstr), "%lld", (long long)json_object_get_int64(id));
                json_object_put(req);
                const char *r = s->replies[i];
                if (!strcmp(r, "HANGUP"))
                        goto hangup;
                if (!strcmp(r, "SILENT")) {
                        usleep(400 * 1000);
                        continue;
                }
                bool fds = !strncmp(r, "FDS ", 4), late_fds = !strncmp(r, "LATEFDS ", 8);
                if (late_fds)
                        usleep(300 * 1000);
                if (fds || late_fds || !strncmp(r, "NOFDS ", 6)) {
                        char out[512];
                        snprintf(out, sizeof(out),
                                 "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"fds\":[\"r\",\"w\"],"
                                 "\"n\":%s}}\n",
                                 idstr, strchr(r, ' ') + 1);
                        if (fds || late_fds)
                                send_fds(fd, out);
                        else if (send(fd, out, strlen(out), MSG_NOSIGNAL) < 0)
                                goto out;
                        if (late_fds) {
                                /* Only the client's copy of the read end is left open now. */
                                close(pipe_msgs[npipes - 1][0]);
                                pipe_msgs[npipes - 1][0] = -1;
                        }
                        continue;
                }
                if (!strcmp(r, "LATE")) {
                        /* Answer after the client gave up, then answer the next request. */
                        usleep(300 * 1000);
                        char late[128];
                        snprintf(late, sizeof(late),
                                 "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":1}\n", idstr);
                        ssize_t w = send(fd, late, strlen(late), MSG_NOSIGNAL);
                        (void)w;
                        continue;
                }
                char out[2048];
                const char *p = strstr(r, "%ID%");
                if (p)
                        snprintf(out, sizeof(out), "%.*s%s%s", (int)(p - r), r, idstr, p + 4);
                else
                        snprintf(out, sizeof(out), "%s", r);
                ssize_t w = send(fd, out, strlen(out), MSG_NOSIGNAL);
                (void)w;
        }
out:
        /* Script done: stay connected until the client closes, as a daemon would. */
        while (recv(fd, buf, sizeof(buf), 0) > 0)
                ;
hangup:
        close(fd);
        return NULL;
}

static struct ntbf_rpc *start(struct script *s, pthread_t *th)
{
        snprintf(s->path, sizeof(s->path), "/tmp/ntbf-rpc-test-%d.sock", getpid());
        unlink(s->path);
        s->listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        strcpy(sa.sun_path, s->path);
        assert_int_equal(bind(s->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(s->listen_fd, 1), 0);
        pthread_create(th, NULL, serve, s);
        struct ntbf_rpc *c;
        assert_int_equal(ntbf_rpc_connect(s->path, &c), 0);
        return c;
}

static void stop(struct script *s, pthread_t th, struct ntbf_rpc *c)
{
        ntbf_rpc_close(c);
        pthread_join(th, NULL);
        close(s->listen_fd);
        unlink(s->path);
}

static void test_result_and_request_shape(void **state)
{
        (void)state;
        struct script s = {
            .replies = {"{\"jsonrpc\":\"2.0\",\"id\":%ID%,\"result\":{\"x\":42}}\n"}};
        pthread_t th;
        struct ntbf_rpc *c = start(&s, &th);
        struct json_object *params = json_object_new_object(), *res;
        json_object_object_add(params, "fdid", json_object_new_int(0x4000));
        assert_int_equal(ntbf_rpc_call(c, "device.borrow", params, &res, 2000), 0);
        struct json_object *x;
        assert_true(json_object_object_get_ex(res, "x", &x));
        assert_int_equal(json_object_get_int(x), 42);
        json_object_put(res);
        stop(&s, th, c);
        /* The request the daemon saw: one compact line, JSON-RPC 2.0, with our params. */
        assert_non_null(strstr(s.got, "\"jsonrpc\":\"2.0\""));
        assert_non_null(strstr(s.got, "\"method\":\"device.borrow\""));
        assert_non_null(strstr(s.got, "\"params\":{\"fdid\":16384}"));
}

static void test_error_answers(void **state)
{
        (void)state;
        struct script s = {.replies = {
                               "{\"jsonrpc\":\"2.0\",\"id\":%ID%,\"error\":{\"code\":-32000,"
                               "\"message\":\"lender.ntb0: requester-ID table is full\","
                               "\"data\":{\"error\":\"NTBF_ENOSPC_BUDGET\",\"errno\":-4001}}}\n",
                               "{\"jsonrpc\":\"2.0\",\"id\":%ID%,\"error\":{\"code\":-32601,"
                               "\"message\":\"no method 'x'\"}}\n",
                               "{\"jsonrpc\":\"2.0\",\"id\":%ID%,\"error\":{\"code\":-32602,"
                               "\"message\":\"fdid must be an integer\"}}\n",
                               "not json at all\n",
                           }};
        pthread_t th;
        struct ntbf_rpc *c = start(&s, &th);
        struct json_object *res = (void *)1;
        assert_int_equal(ntbf_rpc_call(c, "device.borrow", NULL, &res, 2000), NTBF_ENOSPC_BUDGET);
        assert_null(res);
        assert_string_equal(ntbf_rpc_error(c), "lender.ntb0: requester-ID table is full");
        assert_int_equal(ntbf_rpc_call(c, "x", NULL, &res, 2000), -ENOSYS);
        assert_string_equal(ntbf_rpc_error(c), "no method 'x'");
        assert_int_equal(ntbf_rpc_call(c, "device.borrow", NULL, &res, 2000), -EINVAL);
        assert_int_equal(ntbf_rpc_call(c, "y", NULL, &res, 2000), NTBF_EPROTO);
        stop(&s, th, c);
}

static void test_events_during_call(void **state)
{
        (void)state;
        struct script s = {
            .replies = {"{\"jsonrpc\":\"2.0\",\"method\":\"event\",\"params\":{\"kind\":"
                        "\"device.lost\",\"fdid\":16384}}\n"
                        "{\"jsonrpc\":\"2.0\",\"id\":%ID%,\"result\":{}}\n"}};
        pthread_t th;
        struct ntbf_rpc *c = start(&s, &th);
        struct json_object *res, *ev, *kind;
        assert_int_equal(ntbf_rpc_call(c, "events.subscribe", NULL, &res, 2000), 0);
        json_object_put(res);
        assert_int_equal(ntbf_rpc_next_event(c, &ev, 0), 0);
        assert_true(json_object_object_get_ex(ev, "kind", &kind));
        assert_string_equal(json_object_get_string(kind), "device.lost");
        json_object_put(ev);
        assert_int_equal(ntbf_rpc_next_event(c, &ev, 0), -EAGAIN);
        stop(&s, th, c);
}

static void test_hangup_and_timeout(void **state)
{
        (void)state;
        struct script s = {.replies = {"SILENT", "HANGUP"}};
        pthread_t th;
        struct ntbf_rpc *c = start(&s, &th);
        struct json_object *res;
        assert_int_equal(ntbf_rpc_call(c, "node.status", NULL, &res, 100), -ETIMEDOUT);
        assert_string_equal(ntbf_rpc_error(c), "the daemon did not answer in time");
        assert_int_equal(ntbf_rpc_call(c, "node.status", NULL, &res, 2000), -EPIPE);
        stop(&s, th, c);
        struct ntbf_rpc *none;
        assert_int_equal(ntbf_rpc_connect("/tmp/ntbf-no-such-daemon.sock", &none), NTBF_ENOTFOUND);
}

static void test_late_answer_skipped(void **state)
{
        (void)state;
        struct script s = {.replies = {"LATE", "{\"jsonrpc\":\"2.0\",\"id\":%ID%,\"result\":2}\n"}};
        pthread_t th;
        struct ntbf_rpc *c = start(&s, &th);
        struct json_object *res;
        assert_int_equal(ntbf_rpc_call(c, "a", NULL, &res, 100), -ETIMEDOUT);
        assert_int_equal(ntbf_rpc_call(c, "b", NULL, &res, 2000), 0);
        assert_int_equal(json_object_get_int(res), 2); /* not the late answer to "a" */
        json_object_put(res);
        stop(&s, th, c);
}

/* Descriptors that come with an answer reach the caller, in order, once (docs/rpc.md). */
static void test_fds_with_answers(void **state)
{
        (void)state;
        npipes = 0;
        struct script s = {.replies = {"LATEFDS 1", "FDS 2", "FDS 3", "NOFDS 4"}};
        pthread_t th;
        struct ntbf_rpc *c = start(&s, &th);
        struct json_object *res;
        int fds[4];
        /* A call that times out: its answer, and the descriptors with it, are dropped. */
        assert_int_equal(ntbf_rpc_call(c, "a", NULL, &res, 100), -ETIMEDOUT);
        assert_int_equal(ntbf_rpc_call(c, "b", NULL, &res, 2000), 0);
        struct json_object *n;
        assert_true(json_object_object_get_ex(res, "n", &n));
        assert_int_equal(json_object_get_int(n), 2);
        json_object_put(res);
        assert_int_equal(ntbf_rpc_take_fds(c, fds, 4), 2);
        /* They are the second pipe's ends (the late answer's pipe was the first). */
        assert_int_equal(write(pipe_msgs[1][1], "x", 1), 1);
        char ch = 0;
        assert_int_equal(read(fds[0], &ch, 1), 1);
        assert_int_equal(ch, 'x');
        assert_int_equal(write(fds[1], "y", 1), 1);
        assert_int_equal(read(pipe_msgs[1][0], &ch, 1), 1);
        assert_int_equal(ch, 'y');
        close(fds[0]);
        close(fds[1]);
        assert_int_equal(ntbf_rpc_take_fds(c, fds, 4), 0); /* taken once */
        /* Descriptors nobody takes are closed by the next call. */
        assert_int_equal(ntbf_rpc_call(c, "c", NULL, &res, 2000), 0);
        json_object_put(res);
        /* An answer announcing descriptors that did not come is a protocol error. */
        assert_int_equal(ntbf_rpc_call(c, "d", NULL, &res, 2000), NTBF_EPROTO);
        assert_non_null(strstr(ntbf_rpc_error(c), "announces 2 file descriptors but 0 arrived"));
        stop(&s, th, c);
        /* The first pipe's read end was closed by the client: its writer sees EPIPE. */
        signal(SIGPIPE, SIG_IGN);
        assert_int_equal(write(pipe_msgs[0][1], "z", 1), -1);
        assert_int_equal(errno, EPIPE);
        for (int i = 0; i < 2; i++) {
                if (pipe_msgs[i][0] >= 0)
                        close(pipe_msgs[i][0]);
                close(pipe_msgs[i][1]);
        }
}

static void test_connect_full_backlog(void **state)
{
        (void)state;
        /* A daemon that is stopped: it listens but never accepts, and its queue is full. */
        char path[108];
        snprintf(path, sizeof(path), "/tmp/ntbf-rpc-stopped-%d.sock", getpid());
        unlink(path);
        int l = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        strcpy(sa.sun_path, path);
        assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(l, 0), 0);
        int fill[4];
        for (int i = 0; i < 4; i++) {
                fill[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
                (void)connect(fill[i], (struct sockaddr *)&sa, sizeof(sa));
        }
        setenv("NTBFAB_RPC_TIMEOUT_MS", "200", 1);
        struct ntbf_rpc *c = NULL;
        assert_int_equal(ntbf_rpc_connect(path, &c), -ETIMEDOUT);
        assert_null(c);
        unsetenv("NTBFAB_RPC_TIMEOUT_MS");
        for (int i = 0; i < 4; i++)
                close(fill[i]);
        close(l);
        unlink(path);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_result_and_request_shape),
            cmocka_unit_test(test_error_answers),
            cmocka_unit_test(test_events_during_call),
            cmocka_unit_test(test_hangup_and_timeout),
            cmocka_unit_test(test_late_answer_skipped),
            cmocka_unit_test(test_connect_full_backlog),
            cmocka_unit_test(test_fds_with_answers),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
