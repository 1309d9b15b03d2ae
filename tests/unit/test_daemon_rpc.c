/* tests/unit/test_daemon_rpc.c: the daemon's JSON-RPC server against hostile and ordinary input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rpc.h"

/* ---- a server with test methods ------------------------------------------------------------ */

struct fx {
        struct ntbf__rpc_server srv;
        struct ntbf__tran_mem mem;
        struct ntbf__rpc_conn *c;
        int calls;                     /* handler invocations: "changes nothing" means 0 */
        struct ntbf__rpc_call *parked; /* t.later's call, answered by the test */
        int gone;
};

static const char *const colours[] = {"red", "green", NULL};

static void m_echo(void *ctx, struct ntbf__rpc_call *call, struct json_object *params)
{
        struct fx *f = ctx;
        f->calls++;
        ntbf__rpc_result(call, json_object_get(params));
}

static void m_later(void *ctx, struct ntbf__rpc_call *call, struct json_object *params)
{
        (void)params;
        struct fx *f = ctx;
        f->calls++;
        f->parked = call;
}

static void m_fail(void *ctx, struct ntbf__rpc_call *call, struct json_object *params)
{
        (void)params;
        ((struct fx *)ctx)->calls++;
        ntbf__rpc_fail(call, NTBF_RPC_FAILED, -4001, "lender.ntb0: requester-ID table is full");
}

/* An answer with two descriptors (the fd numbers 7 and 9: the memory transport only records). */
static void m_fds(void *ctx, struct ntbf__rpc_call *call, struct json_object *params)
{
        (void)params;
        ((struct fx *)ctx)->calls++;
        static const char *const names[] = {"container", "device"};
        static const int fds[] = {7, 9};
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "x", json_object_new_int(1));
        ntbf__rpc_result_fds(call, o, fds, names, 2);
}

static const struct ntbf__rpc_method methods[] = {
    {"t.echo",
     m_echo,
     {{"a", NTBF_P_UINT, true, 0, 100, NULL},
      {"big", NTBF_P_UINT, false, 0, UINT64_MAX, NULL},
      {"s", NTBF_P_STR, false, 0, 0, NULL},
      {"b", NTBF_P_BOOL, false, 0, 0, NULL},
      {"e", NTBF_P_ENUM, false, 0, 0, colours}}},
    {"t.later", m_later, {{NULL}}},
    {"t.fail", m_fail, {{NULL}}},
    {"t.fds", m_fds, {{NULL}}},
};

static void gone(void *ctx, struct ntbf__rpc_conn *c)
{
        (void)c;
        ((struct fx *)ctx)->gone++;
}

static int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));
        f->srv =
            (struct ntbf__rpc_server){methods, sizeof(methods) / sizeof(methods[0]), f, gone, NULL};
        f->c = ntbf__rpc_conn_new(&f->srv, &ntbf__tran_mem_ops, &f->mem);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;
        ntbf__rpc_conn_free(f->c);
        if (f->parked)
                ntbf__rpc_result(f->parked, NULL); /* detached: dropped */
        assert_int_equal(f->gone, 1);
        assert_null(f->srv.conns);
        ntbf__tran_mem_free(&f->mem);
        free(f);
        return 0;
}

static void in(struct fx *f, const char *s)
{
        ntbf__rpc_conn_input(f->c, s, strlen(s));
}

/* The one answer sent since the last call (asserting there is exactly one), parsed. */
static struct json_object *answer(struct fx *f)
{
        assert_non_null(f->mem.out);
        char *nl = strchr(f->mem.out, '\n');
        assert_non_null(nl);
        assert_true(nl[1] == 0);
        struct json_object *o = json_tokener_parse(f->mem.out);
        assert_non_null(o);
        ntbf__tran_mem_reset(&f->mem);
        return o;
}

static int error_code(struct json_object *o)
{
        struct json_object *e, *c;
        assert_true(json_object_object_get_ex(o, "error", &e));
        assert_true(json_object_object_get_ex(e, "code", &c));
        return json_object_get_int(c);
}

static const char *error_msg(struct json_object *o)
{
        struct json_object *e, *m;
        assert_true(json_object_object_get_ex(o, "error", &e));
        assert_true(json_object_object_get_ex(e, "message", &m));
        return json_object_get_string(m);
}

/* Send a line, expect one error answer with code and a message containing text. */
static void expect_error(struct fx *f, const char *line, int code, const char *text)
{
        int calls = f->calls;
        in(f, line);
        struct json_object *o = answer(f);
        if (error_code(o) != code || !strstr(error_msg(o), text))
                fail_msg("%s -> %s", line, json_object_to_json_string(o));
        json_object_put(o);
        assert_int_equal(f->calls, calls); /* nothing ran */
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_ordinary(void **state)
{
        struct fx *f = *state;
        in(f, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"t.echo\",\"params\":{\"a\":5,\"s\":"
              "\"x\",\"b\":true,\"e\":\"red\",\"big\":18446744073709551615}}\n");
        struct json_object *o = answer(f), *r, *v;
        assert_true(json_object_object_get_ex(o, "result", &r));
        assert_true(json_object_object_get_ex(r, "a", &v));
        assert_int_equal(json_object_get_int(v), 5);
        assert_true(json_object_object_get_ex(o, "id", &v));
        assert_int_equal(json_object_get_int(v), 7);
        json_object_put(o);
        /* String ids, null ids, and a request split across reads. */
        in(f, "{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"met");
        assert_int_equal(f->mem.len, 0);
        in(f, "hod\":\"t.echo\",\"params\":{\"a\":0}}\r\n");
        o = answer(f);
        assert_true(json_object_object_get_ex(o, "id", &v));
        assert_string_equal(json_object_get_string(v), "abc");
        json_object_put(o);
        /* An operational failure names the ntbfab error. */
        in(f, "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"t.fail\"}\n");
        o = answer(f);
        assert_int_equal(error_code(o), NTBF_RPC_FAILED);
        assert_non_null(strstr(json_object_to_json_string(o), "NTBF_ENOSPC_BUDGET"));
        json_object_put(o);
        /* Blank lines are nothing; a client notification is ignored. */
        int calls = f->calls;
        in(f, "\n  \n{\"jsonrpc\":\"2.0\",\"method\":\"t.echo\",\"params\":{\"a\":1}}\n");
        assert_int_equal(f->mem.len, 0);
        assert_int_equal(f->calls, calls);
        assert_false(f->mem.closed);
}

static void test_wrong_params(void **state)
{
        struct fx *f = *state;
        const char *pre = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.echo\",\"params\":";
        char line[1024];
#define P(params, text)                                                                            \
        do {                                                                                       \
                snprintf(line, sizeof(line), "%s%s}\n", pre, params);                              \
                expect_error(f, line, NTBF_RPC_PARAMS, text);                                      \
        } while (0)
        P("{\"a\":\"5\"}", "parameter 'a' must be a non-negative integer, not a string");
        P("{\"a\":5.5}", "parameter 'a' must be a non-negative integer, not a fractional");
        P("{\"a\":-1}", "parameter 'a' is out of range 0..100");
        P("{\"a\":101}", "parameter 'a' is out of range 0..100");
        P("{\"a\":9223372036854775808}", "parameter 'a' is out of range");
        P("{\"a\":1e300}", "must be a non-negative integer");
        P("{\"a\":1,\"big\":-9223372036854775808}", "parameter 'big' is out of range");
        P("{\"a\":1,\"b\":1}", "parameter 'b' must be true or false, not an integer");
        P("{\"a\":1,\"s\":[]}", "parameter 's' must be a string, not an array");
        P("{\"a\":1,\"e\":\"blue\"}", "parameter 'e' must be one of \"red\", \"green\"");
        P("{\"a\":1,\"s\":\"a\\u0000b\"}", "holds a NUL character");
        P("{\"a\":1,\"x\":1}", "unknown parameter 'x' of t.echo; it takes: a, big, s, b, e");
        P("{}", "missing parameter 'a'");
        P("[1]", "params must be an object");
        P("null", "params must be an object");
        /* 256 bytes is one too many. */
        char s[300];
        memset(s, 'x', 256);
        s[256] = 0;
        char p[400];
        snprintf(p, sizeof(p), "{\"a\":1,\"s\":\"%s\"}", s);
        P(p, "parameter 's' is longer than 255 bytes");
        s[255] = 0;
        snprintf(line, sizeof(line), "%s{\"a\":1,\"s\":\"%s\"}}\n", pre, s);
        in(f, line);
        json_object_put(answer(f));
#undef P
        expect_error(f,
                     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.later\",\"params\":{\"a\":1}}\n",
                     NTBF_RPC_PARAMS, "unknown parameter 'a' of t.later; it takes none");
        assert_false(f->mem.closed);
}

static void test_invalid_requests(void **state)
{
        struct fx *f = *state;
        expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.ecoh\"}\n",
                     NTBF_RPC_NO_METHOD, "method 't.ecoh' not found; did you mean 't.echo'?");
        expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"rpc.x\"}\n", NTBF_RPC_NO_METHOD,
                     "not found");
        expect_error(f, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.echo\"}]\n",
                     NTBF_RPC_INVALID, "batches are not supported");
        expect_error(f, "[]\n", NTBF_RPC_INVALID, "batches");
        expect_error(f, "42\n", NTBF_RPC_INVALID, "a request is a JSON object");
        expect_error(f, "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"t.echo\"}\n", NTBF_RPC_INVALID,
                     "'jsonrpc' must be \"2.0\"");
        expect_error(f, "{\"id\":1,\"method\":\"t.echo\"}\n", NTBF_RPC_INVALID, "are required");
        expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":1}\n", NTBF_RPC_INVALID, "are required");
        expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}\n", NTBF_RPC_INVALID,
                     "'method' must be a string");
        expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"t.echo\"}\n", NTBF_RPC_INVALID,
                     "'id' must be");
        expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"t.echo\"}\n",
                     NTBF_RPC_INVALID, "'id' must be");
        expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.echo\",\"extra\":1}\n",
                     NTBF_RPC_INVALID, "unknown member");
        /* None of these closes the connection. */
        assert_false(f->mem.closed);
        /* The answer to an invalid id is sent with id null. */
        in(f, "{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"t.echo\"}\n");
        struct json_object *o = answer(f), *id;
        assert_true(json_object_object_get_ex(o, "id", &id));
        assert_null(id);
        json_object_put(o);
}

/* Lines that cannot be JSON close the connection after the error. */
static void test_parse_errors_close(void **state)
{
        static const char *const lines[] = {
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.echo\"\n",      /* truncated */
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.\xff\xfe\"}\n", /* invalid UTF-8 */
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.\xc3\"}\n",     /* cut sequence */
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.echo\"} {}\n",  /* two values */
            "{'jsonrpc':'2.0'}\n",                                        /* not strict JSON */
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.echo\",}\n",    /* trailing comma */
            "{\"a\":1}\0{}\n",                                            /* NUL inside */
        };
        for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
                setup(state);
                struct fx *f = *state;
                size_t n = strlen(lines[i]);
                if (i == 6)
                        n = 11;
                ntbf__rpc_conn_input(f->c, lines[i], n);
                struct json_object *o = answer(f);
                if (error_code(o) != NTBF_RPC_PARSE)
                        fail_msg("line %zu: %s", i, json_object_to_json_string(o));
                json_object_put(o);
                assert_true(f->mem.closed);
                assert_int_equal(f->calls, 0);
                /* Nothing more is read from a closing connection. */
                in(f,
                   "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.echo\",\"params\":{\"a\":1}}\n");
                assert_int_equal(f->mem.len, 0);
                teardown(state);
        }
}

/* What json-c forgives is refused: NUL in names, ids past 64 bits, UTF-8 RFC 3629 forbids. */
static void test_strict_text(void **state)
{
        struct fx *f = *state;
        /* A NUL in the method or a parameter's name: refused, not truncated to a known name. */
        expect_error(f,
                     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.echo\\u0000x\","
                     "\"params\":{\"a\":1}}\n",
                     NTBF_RPC_INVALID, "'method' holds a NUL character");
        expect_error(f,
                     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.echo\","
                     "\"params\":{\"a\\u0000x\":1}}\n",
                     NTBF_RPC_INVALID, "a member name holds a NUL character");
        expect_error(f,
                     "{\"jsonrpc\":\"2.0\",\"id\\u0000\":1,\"method\":\"t.echo\","
                     "\"params\":{\"a\":1}}\n",
                     NTBF_RPC_INVALID, "NUL");
        /* Integers past 64 bits: json-c would clamp them to the bound. */
        in(f, "{\"jsonrpc\":\"2.0\",\"id\":18446744073709551616,\"method\":\"t.echo\","
              "\"params\":{\"a\":1}}\n");
        struct json_object *o = answer(f), *id;
        assert_int_equal(error_code(o), NTBF_RPC_INVALID);
        assert_non_null(strstr(error_msg(o), "outside the 64-bit range"));
        assert_true(json_object_object_get_ex(o, "id", &id));
        assert_null(id);
        json_object_put(o);
        expect_error(f,
                     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.echo\",\"params\":"
                     "{\"a\":1,\"big\":18446744073709551616}}\n",
                     NTBF_RPC_INVALID, "18446744073709551616 is outside");
        expect_error(f,
                     "{\"jsonrpc\":\"2.0\",\"id\":-9223372036854775809,\"method\":"
                     "\"t.echo\"}\n",
                     NTBF_RPC_INVALID, "outside the 64-bit range");
        /* The bounds themselves are fine and come back exactly. */
        in(f, "{\"jsonrpc\":\"2.0\",\"id\":18446744073709551615,\"method\":\"t.echo\","
              "\"params\":{\"a\":1}}\n");
        assert_non_null(strstr(f->mem.out, "\"id\":18446744073709551615"));
        json_object_put(answer(f));
        in(f, "{\"jsonrpc\":\"2.0\",\"id\":-9223372036854775808,\"method\":\"t.echo\","
              "\"params\":{\"a\":1}}\n");
        assert_non_null(strstr(f->mem.out, "\"id\":-9223372036854775808"));
        json_object_put(answer(f));
        /* A proper pair of surrogate escapes is one character. */
        in(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.echo\",\"params\":"
              "{\"a\":1,\"s\":\"\\ud83d\\ude00 \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}}\n");
        o = answer(f);
        assert_null(strstr(json_object_to_json_string(o), "error"));
        json_object_put(o);
        assert_false(f->mem.closed);
        /* Malformed text closes the connection like any parse error. */
        static const char *const bad[] = {
            "\xc0\x80",             /* overlong NUL */
            "\xe0\x80\xaf",         /* overlong '/' */
            "\xed\xa0\x80",         /* a surrogate, encoded */
            "\xf4\x90\x80\x80",     /* past U+10FFFF */
            "\xf8\x88\x80\x80\x80", /* five bytes */
            "\\ud800",              /* a lone high surrogate escape */
            "\\udc00x",             /* a lone low one */
            "\\ud800\\u0041",       /* a high one not followed by a low one */
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                teardown(state);
                setup(state);
                f = *state;
                char line[256];
                snprintf(line, sizeof(line),
                         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.echo\",\"params\":"
                         "{\"a\":1,\"s\":\"x%sy\"}}\n",
                         bad[i]);
                in(f, line);
                o = answer(f);
                if (error_code(o) != NTBF_RPC_PARSE)
                        fail_msg("case %zu: %s", i, json_object_to_json_string(o));
                json_object_put(o);
                assert_true(f->mem.closed);
                assert_int_equal(f->calls, 0);
        }
}

static void test_deep_nesting(void **state)
{
        struct fx *f = *state;
        char line[2048];
        size_t o = (size_t)snprintf(line, sizeof(line),
                                    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.echo\","
                                    "\"params\":{\"a\":1,\"s\":");
        for (int i = 0; i < 200; i++)
                line[o++] = '[';
        for (int i = 0; i < 200; i++)
                line[o++] = ']';
        o += (size_t)snprintf(line + o, sizeof(line) - o, "}}\n");
        in(f, line);
        struct json_object *a = answer(f);
        assert_int_equal(error_code(a), NTBF_RPC_PARSE);
        json_object_put(a);
        assert_true(f->mem.closed);
        assert_int_equal(f->calls, 0);
}

/* A message of exactly 1 MiB is read; one byte more is refused before its end arrives. */
static void test_line_limit(void **state)
{
        struct fx *f = *state;
        const char *req =
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.echo\",\"params\":{\"a\":1}";
        size_t n = NTBF_RPC_MAX_LINE;
        char *line = malloc(n + 2);
        memset(line, ' ', n);
        memcpy(line, req, strlen(req));
        line[n - 1] = '}';
        line[n] = '\n';
        ntbf__rpc_conn_input(f->c, line, n + 1);
        struct json_object *o = answer(f);
        assert_false(json_object_object_get_ex(o, "error", NULL));
        json_object_put(o);
        assert_int_equal(f->calls, 1);
        /* 1 MiB + 1 bytes without a newline: refused at once, the connection closed. */
        memset(line, 'x', n + 1);
        ntbf__rpc_conn_input(f->c, line, n);
        assert_int_equal(f->mem.len, 0);
        ntbf__rpc_conn_input(f->c, line, 1);
        o = answer(f);
        assert_int_equal(error_code(o), NTBF_RPC_INVALID);
        assert_non_null(strstr(error_msg(o), "longer than 1 MiB"));
        json_object_put(o);
        assert_true(f->mem.closed);
        assert_int_equal(f->calls, 1);
        free(line);
}

/* Requests are answered in order, one at a time; past 64 in flight reading stops. */
static void test_order_and_back_pressure(void **state)
{
        struct fx *f = *state;
        in(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.later\"}\n"
              "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"t.echo\",\"params\":{\"a\":2}}\n");
        assert_non_null(f->parked);
        assert_int_equal(f->mem.len, 0); /* 2 waits for 1 */
        assert_int_equal(f->calls, 1);
        for (int i = 0; i < 70; i++) {
                char l[128];
                snprintf(
                    l, sizeof(l),
                    "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"t.echo\",\"params\":{\"a\":3}}"
                    "\n",
                    100 + i);
                in(f, l);
        }
        assert_true(f->mem.paused);
        /* An event may be sent while a call is pending. */
        assert_int_equal(ntbf__rpc_notify(f->c, json_object_new_object()), 0);
        assert_non_null(strstr(f->mem.out, "\"method\":\"event\""));
        ntbf__tran_mem_reset(&f->mem);
        struct ntbf__rpc_call *call = f->parked;
        f->parked = NULL;
        ntbf__rpc_result(call, json_object_new_string("one"));
        assert_false(f->mem.paused);
        assert_int_equal(f->calls, 72);
        /* Answers in order: 1, 2, 100..169. */
        char *p = f->mem.out;
        int want[] = {1, 2, 100, 101};
        for (int i = 0; i < 4; i++) {
                char *nl = strchr(p, '\n');
                assert_non_null(nl);
                *nl = 0;
                struct json_object *o = json_tokener_parse(p), *id;
                assert_true(json_object_object_get_ex(o, "id", &id));
                assert_int_equal(json_object_get_int(id), want[i]);
                json_object_put(o);
                p = nl + 1;
        }
        ntbf__tran_mem_reset(&f->mem);
}

/* A write that fails closes the connection. */
static void test_send_failure(void **state)
{
        struct fx *f = *state;
        in(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.later\"}\n");
        assert_non_null(f->parked);
        f->mem.fail_send = -32;
        in(f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"nope\"}\n"); /* queued behind 1 */
        assert_false(f->mem.closed);
        struct ntbf__rpc_call *call = f->parked;
        f->parked = NULL;
        ntbf__rpc_result(call, NULL);
        assert_true(f->mem.closed);
}

/* The client leaves while its call is pending: the answer is dropped, nothing leaks. */
static void test_detach(void **state)
{
        struct fx *f = *state;
        in(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.later\"}\n");
        ntbf__rpc_conn_eof(f->c);
        assert_true(f->mem.closed);
        struct ntbf__rpc_call *call = f->parked;
        f->parked = NULL;
        ntbf__rpc_conn_free(f->c);
        assert_null(ntbf__rpc_call_conn(call));
        assert_string_equal(ntbf__rpc_call_method(call), "t.later");
        ntbf__rpc_result(call, json_object_new_object());
        assert_int_equal(f->mem.len, 0);
        f->gone = 0;
        f->c = ntbf__rpc_conn_new(&f->srv, &ntbf__tran_mem_ops, &f->mem);
}

/* docs/rpc.md, "File descriptors": the answer names them, the transport carries them. */
static void test_fds(void **state)
{
        struct fx *f = *state;
        in(f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"t.fds\"}\n");
        struct json_object *o = answer(f), *r, *names;
        assert_true(json_object_object_get_ex(o, "result", &r));
        assert_true(json_object_object_get_ex(r, "fds", &names));
        assert_int_equal(json_object_array_length(names), 2);
        assert_string_equal(json_object_get_string(json_object_array_get_idx(names, 0)),
                            "container");
        assert_string_equal(json_object_get_string(json_object_array_get_idx(names, 1)), "device");
        json_object_put(o);
        assert_int_equal(f->mem.nfds, 2);
        assert_int_equal(f->mem.fds[0], 7);
        assert_int_equal(f->mem.fds[1], 9);
}

/* A transport that cannot carry descriptors answers an error instead, and nothing leaks. */
static void test_fds_unsupported(void **state)
{
        struct fx *f = *state;
        static struct ntbf__tran_ops plain;
        plain = ntbf__tran_mem_ops;
        plain.send_fds = NULL;
        f->c->ops = &plain;
        in(f, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"t.fds\"}\n");
        struct json_object *o = answer(f), *e, *m;
        assert_int_equal(error_code(o), NTBF_RPC_FAILED);
        assert_true(json_object_object_get_ex(o, "error", &e));
        assert_true(json_object_object_get_ex(e, "message", &m));
        assert_non_null(strstr(json_object_get_string(m), "cannot pass file descriptors"));
        json_object_put(o);
        assert_int_equal(f->mem.nfds, 0);
        f->c->ops = &ntbf__tran_mem_ops;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_ordinary, setup, teardown),
            cmocka_unit_test_setup_teardown(test_wrong_params, setup, teardown),
            cmocka_unit_test_setup_teardown(test_invalid_requests, setup, teardown),
            cmocka_unit_test(test_parse_errors_close),
            cmocka_unit_test_setup_teardown(test_strict_text, setup, teardown),
            cmocka_unit_test_setup_teardown(test_deep_nesting, setup, teardown),
            cmocka_unit_test_setup_teardown(test_line_limit, setup, teardown),
            cmocka_unit_test_setup_teardown(test_order_and_back_pressure, setup, teardown),
            cmocka_unit_test_setup_teardown(test_send_failure, setup, teardown),
            cmocka_unit_test_setup_teardown(test_detach, setup, teardown),
            cmocka_unit_test_setup_teardown(test_fds, setup, teardown),
            cmocka_unit_test_setup_teardown(test_fds_unsupported, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
