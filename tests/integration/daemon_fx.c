/* tests/integration/daemon_fx.c: bringing test clusters up and down with the real binaries. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon_fx.h"
#include "proc.h"
#include "ntbfab/config.h"
#include "ntbfab/error.h"
#include "ntbfab/sim.h"

static const char *ntbfab(void)
{
        const char *p = getenv("NTBFAB");
        return p ? p : "ntbfab";
}

void dfx_nap(int ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

int dfx_cli(struct dfx *f, char *out, size_t len, const char *fmt, ...)
{
        char args[2048], cmd[4096];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(args, sizeof(args), fmt, ap);
        va_end(ap);
        snprintf(cmd, sizeof(cmd), "%s %s --dir %s 2>&1", ntbfab(), args, f->dir);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        size_t n = 0;
        if (out && len) {
                n = fread(out, 1, len - 1, p);
                out[n] = 0;
        }
        char sink[4096];
        while (fread(sink, 1, sizeof(sink), p) > 0)
                ;
        int st = pclose(p);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int dfx_scale(void)
{
        const char *e = getenv("DFX_SCALE");
        int s = e ? atoi(e) : 1;
        return s < 1 ? 1 : s > 20 ? 20 : s;
}

/* The cluster file with its lease multiplied by dfx_scale(), written into dir as
 * cluster.yaml: the test's view of time stretches with the daemons' (docs: tests/README.md). */
static void scaled_copy(struct dfx *f)
{
        FILE *in = fopen(f->yaml, "r");
        assert_non_null(in);
        char out[sizeof(f->yaml)], line[1024];
        snprintf(out, sizeof(out), "%.*s/cluster.yaml", (int)sizeof(f->dir) - 1, f->dir);
        FILE *o = fopen(out, "w");
        assert_non_null(o);
        while (fgets(line, sizeof(line), in)) {
                unsigned v;
                char unit[8];
                if (sscanf(line, " lease: %u%7[a-z]", &v, unit) == 2 && !strcmp(unit, "s"))
                        fprintf(o, "  lease: %us\n", v * (unsigned)dfx_scale());
                else
                        fputs(line, o);
        }
        fclose(in);
        assert_int_equal(fclose(o), 0);
        snprintf(f->yaml, sizeof(f->yaml), "%s", out);
}

void dfx_up(struct dfx *f, const char *yaml_name)
{
        memset(f, 0, sizeof(*f));
        snprintf(f->yaml, sizeof(f->yaml), "%s/tests/integration/%s",
                 getenv("NTBFAB_SRC") ? getenv("NTBFAB_SRC") : ".", yaml_name);
        snprintf(f->dir, sizeof(f->dir), "/dev/shm/ntbfab-itest-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        if (dfx_scale() > 1)
                scaled_copy(f);
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        if (ntbf_config_load(f->yaml, &f->t, &d)) {
                ntbf_diags_print(&d, stderr);
                fail_msg("cannot load %s", f->yaml);
        }
        ntbf_diags_free(&d);
        char out[8192];
        int st = dfx_cli(f, out, sizeof(out), "up %s", f->yaml);
        if (st)
                fail_msg("ntbfab up %s failed (%d): %s", f->yaml, st, out);
        f->ops = ntbf_backend_find("sim");
        struct ntbf_backend_env env = {f->t, f->dir, NTBF_NONE};
        char why[512];
        if (ntbf_sim_attach(&env, &f->b, why, sizeof(why)))
                fail_msg("attach: %s", why);
        for (uint32_t a = 0; a < f->t->nadapters && a < 16; a++)
                assert_int_equal(f->ops->probe(f->b, a, &f->h[a]), 0);
}

/*
 * A sanitizer report of a daemon, the device host or a client the test started: their
 * standard error is in DIR/log (NODE.err, simd.log, the tests' *.out). In a sanitizer build
 * (make test runs the daemon tests there too) any report fails the test that saw it.
 */
static void no_sanitizer_reports(struct dfx *f)
{
        char cmd[600], hit[1024] = "";
        snprintf(cmd, sizeof(cmd),
                 "grep -s -H -m1 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' %s/log/* "
                 "2>/dev/null | head -1",
                 f->dir);
        FILE *p = popen(cmd, "r");
        if (p) {
                if (!fgets(hit, sizeof(hit), p))
                        hit[0] = 0;
                pclose(p);
        }
        if (hit[0])
                fail_msg("a sanitizer reported an error (logs kept in %s/log): %s", f->dir, hit);
}

void dfx_down(struct dfx *f)
{
        for (uint32_t a = 0; a < 16; a++)
                if (f->h[a])
                        f->ops->release(f->h[a]);
        if (f->b)
                f->ops->close(f->b);
        char out[4096];
        int st = dfx_cli(f, out, sizeof(out), "down");
        if (st)
                fail_msg("ntbfab down failed (%d): %s", st, out);
        no_sanitizer_reports(f); /* after down: the daemons' exit (leaks) too */
        char cmd[512];
        /* What down keeps (logs, key, images) goes with the test's directory. */
        snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
        if (!getenv("NTBFAB_KEEP") && system(cmd)) {
        }
        ntbf_topo_free(f->t);
        f->t = NULL;
}

struct json_object *dfx_call(struct dfx *f, const char *node, const char *method,
                             const char *params, int *err, char *msg, size_t len)
{
        char path[512];
        struct ntbf_rpc *c;
        ntbf_rpc_socket_path(f->dir, node, path, sizeof(path));
        *err = ntbf_rpc_connect(path, &c);
        if (*err) {
                if (msg)
                        snprintf(msg, len, "no daemon at %s", path);
                return NULL;
        }
        struct json_object *p = params ? json_tokener_parse(params) : NULL, *res = NULL;
        if (params)
                assert_non_null(p);
        *err = ntbf_rpc_call(c, method, p, &res, 30000);
        if (*err && msg)
                snprintf(msg, len, "%s", ntbf_rpc_error(c));
        ntbf_rpc_close(c);
        return res;
}

struct json_object *dfx_ok(struct dfx *f, const char *node, const char *method, const char *params)
{
        int err;
        char msg[1024];
        struct json_object *r = dfx_call(f, node, method, params, &err, msg, sizeof(msg));
        if (err)
                fail_msg("%s %s %s: %s (%d)", node, method, params ? params : "", msg, err);
        return r;
}

char *dfx_budgets(struct dfx *f)
{
        const char *fm = f->t->opts.manager[0] ? f->t->opts.manager : f->t->nodes[0].name;
        struct json_object *s = dfx_ok(f, fm, "cluster.status", NULL), *rows;
        assert_true(json_object_object_get_ex(s, "budgets", &rows));
        char *text = strdup(json_object_to_json_string_ext(rows, JSON_C_TO_STRING_PRETTY));
        json_object_put(s);
        return text;
}

int dfx_pid(struct dfx *f, const char *node)
{
        char p[512];
        snprintf(p, sizeof(p), "%s/run/%s.pid", f->dir, node);
        FILE *x = fopen(p, "r");
        int pid = 0;
        if (x) {
                if (fscanf(x, "%d", &pid) != 1)
                        pid = 0;
                fclose(x);
        }
        return pid;
}

void dfx_wait_gone(int pid)
{
        for (int i = 0; i < 2000 && ntbf__pid_alive(pid); i++)
                dfx_nap(5);
        assert_false(ntbf__pid_alive(pid));
}

bool dfx_wait_ready(struct dfx *f, const char *node, int ms)
{
        ms *= dfx_scale();
        for (int t = 0; t < ms; t += 20) {
                int err;
                struct json_object *s = dfx_call(f, node, "node.status", NULL, &err, NULL, 0), *v;
                bool ok = !err && json_object_object_get_ex(s, "manager_reachable", &v) &&
                          json_object_get_boolean(v);
                json_object_put(s);
                if (ok)
                        return true;
                dfx_nap(20);
        }
        return false;
}

bool dfx_wait_state(struct dfx *f, uint32_t fdid, const char *state, int ms)
{
        ms *= dfx_scale();
        const char *fm = f->t->opts.manager[0] ? f->t->opts.manager : f->t->nodes[0].name;
        for (int t = 0; t < ms; t += 50) {
                int err;
                struct json_object *l = dfx_call(f, fm, "device.list", NULL, &err, NULL, 0);
                bool ok = false;
                for (size_t i = 0; !err && i < json_object_array_length(l); i++) {
                        struct json_object *d = json_object_array_get_idx(l, i), *v, *s;
                        if (json_object_object_get_ex(d, "fdid", &v) &&
                            (uint32_t)json_object_get_int64(v) == fdid &&
                            json_object_object_get_ex(d, "state", &s))
                                ok = !strcmp(json_object_get_string(s), state);
                }
                json_object_put(l);
                if (ok)
                        return true;
                dfx_nap(50);
        }
        return false;
}

uint32_t dfx_node(struct dfx *f, const char *name)
{
        uint32_t n = ntbf_topo_find_node(f->t, name);
        assert_int_not_equal(n, NTBF_NONE);
        return n;
}

uint32_t dfx_adapter(struct dfx *f, const char *node)
{
        return f->t->nodes[dfx_node(f, node)].adapters[0];
}

uint32_t dfx_fdid(struct dfx *f, const char *node, const char *device)
{
        uint32_t n = dfx_node(f, node), d = ntbf_topo_find_device(f->t, n, device);
        assert_int_not_equal(d, NTBF_NONE);
        uint32_t index = 0;
        for (uint32_t i = 0; f->t->nodes[n].devices[i] != d; i++)
                index += ntbf_device_nfuncs(&f->t->devices[f->t->nodes[n].devices[i]]);
        return f->t->nodes[n].id << 12 | index;
}

uint64_t dfx_u(struct json_object *o, const char *path)
{
        char buf[128];
        snprintf(buf, sizeof(buf), "%s", path);
        struct json_object *cur = o;
        for (char *save, *p = strtok_r(buf, ".", &save); p; p = strtok_r(NULL, ".", &save))
                if (!json_object_object_get_ex(cur, p, &cur))
                        fail_msg("no %s in %s", path, json_object_to_json_string(o));
        return json_object_get_uint64(cur);
}

/* Whether node's daemon reports a session with every other node. */
static bool all_peers(struct dfx *f, const char *node)
{
        int err;
        struct json_object *s = dfx_call(f, node, "node.status", NULL, &err, NULL, 0), *peers, *v;
        bool ok = !err && json_object_object_get_ex(s, "manager_reachable", &v) &&
                  json_object_get_boolean(v) && json_object_object_get_ex(s, "peers", &peers);
        for (size_t k = 0; ok && k < json_object_array_length(peers); k++) {
                struct json_object *e = json_object_array_get_idx(peers, k);
                ok = json_object_object_get_ex(e, "connected", &v) && json_object_get_boolean(v);
        }
        json_object_put(s);
        return ok;
}

bool dfx_wait_all(struct dfx *f, int ms)
{
        ms *= dfx_scale();
        for (int t = 0; t < ms; t += 20) {
                bool ok = true;
                for (uint32_t n = 0; n < f->t->nnodes && ok; n++)
                        ok = all_peers(f, f->t->nodes[n].name);
                if (ok)
                        return true;
                dfx_nap(20);
        }
        return false;
}

void dfx_restart(struct dfx *f, const char *node, const char *crash_at)
{
        int pid = dfx_pid(f, node);
        if (pid > 0 && ntbf__pid_alive(pid)) {
                kill(pid, SIGKILL);
                dfx_wait_gone(pid);
        }
        if (crash_at)
                setenv("NTBFAB_CRASH_AT", crash_at, 1);
        char out[8192];
        int st = dfx_cli(f, out, sizeof(out), "up %s", f->yaml);
        unsetenv("NTBFAB_CRASH_AT");
        if (st)
                fail_msg("ntbfab up (restarting %s): %d: %s", node, st, out);
        if (!dfx_wait_all(f, 10000))
                fail_msg("the daemons do not all see each other after %s restarted", node);
}

int dfx_log_count(struct dfx *f, const char *node, const char *text)
{
        char p[600], line[4096];
        snprintf(p, sizeof(p), "%s/log/%s.log", f->dir, node);
        FILE *x = fopen(p, "r");
        if (!x)
                return 0;
        int n = 0;
        while (fgets(line, sizeof(line), x))
                n += strstr(line, text) != NULL;
        fclose(x);
        return n;
}

void dfx_assert_budgets(struct dfx *f, const char *baseline)
{
        char *now = dfx_budgets(f);
        if (strcmp(now, baseline))
                fail_msg("budgets differ from the start:\n%s\nbaseline:\n%s", now, baseline);
        free(now);
}
