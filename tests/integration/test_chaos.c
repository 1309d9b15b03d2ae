/* tests/integration/test_chaos.c: daemons and clients killed at random points of borrows,
 * returns, SISCI and NVMe work, restarted; after every round the fabric must be whole again
 * (docs/daemon.md, "Crash consistency").
 *
 * CHAOS_SECONDS (default 75) bounds the run, CHAOS_SEED replays one (the seed is printed
 * first, and again with the round that failed). After each round, once every client is dead
 * and every daemon back:
 *   - no device is held by nobody: every borrow the manager records is one its borrower
 *     records, for itself (not for SISCI sessions, which are all gone), and every device
 *     is available once those are returned;
 *   - every budget is back to its value at the start;
 *   - the fabric's tables (read through the backend) equal what the daemons recorded, and
 *     that is what was recorded at the start;
 *   - no daemon holds memory for a device segment any more.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon_fx.h"
#include "hwcheck.h"
#include "ntbfab/sim.h"
#include "proc.h"

static struct dfx F;
static char *baseline;
static char **recs0;
static size_t nrecs0;
static uint32_t NVME, ACC;
static const char *const NODES[] = {"fm", "b1", "b2", "lender"};
#define NNODES 4

static uint64_t rng;

static uint64_t rnd(void)
{
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return rng;
}

static unsigned below(unsigned n)
{
        return (unsigned)(rnd() % n);
}

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- clients -------------------------------------------------------------------------------- */

#define MAX_CLIENTS 16
static struct {
        pid_t pid;
        int in; /* its stdin (a SISCI process waits on it, holding what it made), or -1 */
} clients[MAX_CLIENTS];
static int nclients;

static void remember(pid_t pid, int in)
{
        if (pid > 0 && nclients < MAX_CLIENTS) {
                clients[nclients].pid = pid;
                clients[nclients++].in = in;
        } else if (pid > 0) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                if (in >= 0)
                        close(in);
        }
}

/* A process running argv as node, its output to DIR/log/chaos-NAME.out. */
static pid_t spawn(const char *node, const char *name, const char *const *argv, int *in)
{
        int p[2] = {-1, -1};
        if (in && pipe(p))
                return -1;
        pid_t pid = fork();
        if (pid == 0) {
                char out[600];
                snprintf(out, sizeof(out), "%s/log/chaos-%s.out", F.dir, name);
                int fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0644);
                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                        close(fd);
                }
                if (in) {
                        dup2(p[0], 0);
                        close(p[0]);
                        close(p[1]);
                }
                setenv("NTBFAB_DIR", F.dir, 1);
                setenv("NTBFAB_NODE", node, 1);
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        if (in) {
                close(p[0]);
                *in = p[1];
        }
        remember(pid, in ? p[1] : -1);
        return pid;
}

/* A Device Lending user: borrows, opens, closes and returns the accelerator, over and over. */
static void dl_client(const char *node)
{
        pid_t pid = fork();
        if (pid) {
                remember(pid, -1);
                return;
        }
        char path[512], p[64];
        ntbf_rpc_socket_path(F.dir, node, path, sizeof(path));
        snprintf(p, sizeof(p), "{\"fdid\":%u}", ACC);
        for (int i = 0; i < 1000; i++) {
                struct ntbf_rpc *c;
                if (ntbf_rpc_connect(path, &c))
                        _exit(0);
                struct json_object *res = NULL;
                if (!ntbf_rpc_call(c, "device.borrow", json_tokener_parse(p), &res, 5000)) {
                        json_object_put(res);
                        res = NULL;
                        if (!ntbf_rpc_call(c, "device.open", json_tokener_parse(p), &res, 5000))
                                json_object_put(res);
                        res = NULL;
                        ntbf_rpc_call(c, "device.return", json_tokener_parse(p), &res, 5000);
                }
                json_object_put(res);
                ntbf_rpc_close(c);
        }
        _exit(0);
}

/* A SISCI process with a script: it borrows, makes device and ordinary segments, connects. */
static void sisci_client(const char *node, unsigned k)
{
        const char *a[] = {getenv("SISCI_PEER"), NULL};
        char name[32];
        snprintf(name, sizeof(name), "sisci-%s-%u", node, k);
        int in;
        if (spawn(node, name, a, &in) <= 0)
                return;
        char script[1024];
        unsigned seg = 100 + k;
        int n = snprintf(script, sizeof(script),
                         "borrow %u %u\n"
                         "devseg %u 4096 2 4\n"
                         "seg_create %u 65536\n"
                         "seg_available %u 0\n"
                         "connect 16 %u 1000 0\n"
                         "connect 8 %u 1000 0\n"
                         "devseg %u 8192 4 1\n"
                         "return\n"
                         "borrow %u 0\n"
                         "devseg %u 4096 2 4\n",
                         NVME, below(2), 1 + k, seg, seg, 100 + below(4), 100 + below(4), 20 + k,
                         NVME, 40 + k);
        /* Stdin stays open: the process waits for more, holding what it made, until killed. */
        if (write(in, script, (size_t)n) < 0) {
        }
}

/* The distributed NVMe driver: a manager on the lender and a writer on a borrower. */
static void nvme_clients(void)
{
        char fdid[16];
        snprintf(fdid, sizeof(fdid), "0x%x", NVME);
        const char *tool = getenv("NTBFAB_NVME");
        if (!tool)
                return;
        const char *m[] = {tool, "manager", "--fdid", fdid, "--lease", "2s", NULL};
        spawn("lender", "nvme-manager", m, NULL);
        const char *w[] = {tool, "write", "--fdid", fdid,        "--lba", "0", "--blocks",
                           "64", "--qd",  "4",      "--timeout", "5s",    NULL};
        spawn(below(2) ? "b1" : "b2", "nvme-writer", w, NULL);
}

static void kill_clients(bool all)
{
        int kept = 0;
        for (int i = 0; i < nclients; i++) {
                if (!all && below(2)) {
                        clients[kept++] = clients[i];
                        continue;
                }
                kill(clients[i].pid, SIGKILL);
                waitpid(clients[i].pid, NULL, 0);
                if (clients[i].in >= 0)
                        close(clients[i].in);
        }
        nclients = kept;
}

/* ---- checks --------------------------------------------------------------------------------- */

static char failure[16384];

static bool fail_check(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bool fail_check(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(failure, sizeof(failure), fmt, ap);
        va_end(ap);
        return false;
}

/* Every borrow the manager records is one its borrower records for itself. */
static bool no_orphan_borrows(void)
{
        int err;
        char msg[512];
        struct json_object *s = dfx_call(&F, "fm", "cluster.status", NULL, &err, msg, sizeof(msg));
        if (err)
                return fail_check("cluster.status: %s", msg);
        struct json_object *bs;
        bool ok = json_object_object_get_ex(s, "borrows", &bs);
        for (size_t i = 0; ok && i < json_object_array_length(bs); i++) {
                struct json_object *b = json_object_array_get_idx(bs, i), *v;
                const char *who =
                    json_object_object_get_ex(b, "borrower", &v) ? json_object_get_string(v) : "?";
                uint64_t fdid = dfx_u(b, "fdid");
                struct json_object *mine = dfx_call(&F, who, "device.borrows", NULL, &err, NULL, 0);
                bool found = false, sisci = false;
                for (size_t k = 0; !err && k < json_object_array_length(mine); k++) {
                        struct json_object *x = json_object_array_get_idx(mine, k), *y;
                        if (dfx_u(x, "fdid") != fdid)
                                continue;
                        found = true;
                        sisci =
                            json_object_object_get_ex(x, "sisci", &y) && json_object_get_boolean(y);
                }
                json_object_put(mine);
                if (!found)
                        ok = fail_check("the manager records a borrow of 0x%" PRIx64
                                        " by '%s' that '%s' does not: held by nobody",
                                        fdid, who, who);
                else if (sisci)
                        ok = fail_check("'%s' holds 0x%" PRIx64
                                        " for SISCI sessions, but every SISCI process is dead",
                                        who, fdid);
        }
        json_object_put(s);
        return ok;
}

/* Return what Device Lending users left borrowed (theirs by policy). */
static void return_all(void)
{
        for (int n = 1; n < NNODES; n++) {
                int err;
                struct json_object *mine =
                    dfx_call(&F, NODES[n], "device.borrows", NULL, &err, NULL, 0);
                for (size_t k = 0; !err && k < json_object_array_length(mine); k++) {
                        char p[64];
                        snprintf(p, sizeof(p), "{\"fdid\":%" PRIu64 "}",
                                 dfx_u(json_object_array_get_idx(mine, k), "fdid"));
                        json_object_put(dfx_call(&F, NODES[n], "device.return", p, &err, NULL, 0));
                }
                json_object_put(mine);
        }
}

static bool all_available(void)
{
        int err;
        struct json_object *l = dfx_call(&F, "fm", "device.list", NULL, &err, NULL, 0);
        bool ok = !err;
        for (size_t i = 0; ok && i < json_object_array_length(l); i++) {
                struct json_object *d = json_object_array_get_idx(l, i), *st;
                if (json_object_object_get_ex(d, "state", &st) &&
                    strcmp(json_object_get_string(st), "available"))
                        ok = fail_check("device 0x%" PRIx64 " is '%s' with nothing borrowed or "
                                        "held: %s",
                                        dfx_u(d, "fdid"), json_object_get_string(st),
                                        json_object_to_json_string(d));
        }
        json_object_put(l);
        return ok;
}

static bool budgets_back(void)
{
        char *now = dfx_budgets(&F);
        bool ok = !strcmp(now, baseline);
        if (!ok)
                fail_check("budgets differ from the start:\n%s", now);
        free(now);
        return ok;
}

static bool hardware_is_records(void)
{
        char why[8192];
        if (!hwc_matches(&F, true, why, sizeof(why)))
                return fail_check("%s", why);
        size_t n;
        char **now = hwc_records(&F, &n);
        bool same = n == nrecs0;
        for (size_t i = 0; same && i < n; i++)
                same = !strcmp(now[i], recs0[i]);
        if (!same) {
                size_t o = (size_t)snprintf(failure, sizeof(failure),
                                            "the records differ from the start's:");
                for (size_t i = 0; i < n && o < sizeof(failure); i++)
                        o += (size_t)snprintf(failure + o, sizeof(failure) - o, "\n  %s", now[i]);
        }
        hwc_free(now, n);
        return same;
}

static bool no_segment_memory(void)
{
        for (int n = 0; n < NNODES; n++) {
                struct ntbf_sim_owned o;
                int pid = dfx_pid(&F, NODES[n]);
                if (ntbf_sim_owned(F.b, dfx_node(&F, NODES[n]), pid, &o))
                        return fail_check("cannot count what '%s' owns", NODES[n]);
                if (o.mem)
                        return fail_check("the daemon of '%s' still holds %u allocation%s of "
                                          "memory (device segments nobody uses)",
                                          NODES[n], o.mem, o.mem == 1 ? "" : "s");
        }
        return true;
}

/* Poll check until it holds or ms pass. */
static bool eventually(bool (*check)(void), int ms)
{
        for (int t = 0;; t += 100) {
                if (check())
                        return true;
                if (t >= ms)
                        return false;
                dfx_nap(100);
        }
}

/* ---- the test ------------------------------------------------------------------------------- */

static int group_up(void **state)
{
        (void)state;
        dfx_up(&F, "daemon-chaos.yaml");
        NVME = dfx_fdid(&F, "lender", "nvme");
        ACC = dfx_fdid(&F, "lender", "acc");
        baseline = dfx_budgets(&F);
        recs0 = hwc_records(&F, &nrecs0);
        return 0;
}

static int group_down(void **state)
{
        (void)state;
        kill_clients(true);
        dfx_down(&F);
        free(baseline);
        hwc_free(recs0, nrecs0);
        return 0;
}

static void test_chaos(void **state)
{
        (void)state;
        const char *s = getenv("CHAOS_SECONDS"), *seed_env = getenv("CHAOS_SEED");
        unsigned seconds = s ? (unsigned)strtoul(s, NULL, 0) : 75;
        uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : (uint64_t)time(NULL) ^ getpid();
        if (!seed)
                seed = 1;
        rng = seed;
        print_message("chaos: seed %" PRIu64 " (replay: CHAOS_SEED=%" PRIu64 "), %u s\n", seed,
                      seed, seconds);
        uint64_t end = now_ms() + (uint64_t)seconds * 1000;
        unsigned round = 0, daemon_kills = 0, client_kills = 0;
        while (now_ms() < end) {
                round++;
                /* Work: a random mix of users. */
                unsigned what = 1 + below(7);
                if (what & 1)
                        dl_client(below(2) ? "b1" : "b2");
                if (what & 2)
                        for (unsigned k = 0, n = 1 + below(2); k < n; k++)
                                sisci_client(k ? "b2" : "b1", k);
                if (what & 4)
                        nvme_clients();
                dfx_nap((int)below(600));
                /* Kill: some clients, a daemon or two, at this random point. */
                bool killed[NNODES] = {false};
                if (below(3)) {
                        for (unsigned k = 0, n = 1 + below(2); k < n; k++) {
                                unsigned v = below(NNODES);
                                int pid = dfx_pid(&F, NODES[v]);
                                if (!killed[v] && pid > 0) {
                                        kill(pid, SIGKILL);
                                        killed[v] = true;
                                        daemon_kills++;
                                }
                        }
                }
                client_kills += (unsigned)nclients;
                kill_clients(false);
                dfx_nap((int)below(300));
                kill_clients(true);
                /* Back up: the daemons that died, then everyone sees everyone. */
                for (int v = 0; v < NNODES; v++)
                        if (killed[v])
                                dfx_wait_gone(dfx_pid(&F, NODES[v]));
                char out[8192];
                if (dfx_cli(&F, out, sizeof(out), "up %s", F.yaml))
                        fail_msg("chaos round %u (seed %" PRIu64 "): ntbfab up: %s", round, seed,
                                 out);
                if (!dfx_wait_all(&F, 20000))
                        fail_msg("chaos round %u (seed %" PRIu64 "): the daemons do not see "
                                 "each other again",
                                 round, seed);
                /* Whole again (given time for leases, returns and syncs to settle). */
                bool (*const checks[])(void) = {no_orphan_borrows,   NULL,
                                                all_available,       budgets_back,
                                                hardware_is_records, no_segment_memory};
                for (size_t c = 0; c < sizeof(checks) / sizeof(checks[0]); c++) {
                        if (!checks[c]) {
                                return_all();
                                continue;
                        }
                        if (!eventually(checks[c], 15000))
                                fail_msg("chaos: round %u (seed %" PRIu64
                                         ", replay with CHAOS_SEED=%" PRIu64 "): %s",
                                         round, seed, seed, failure);
                }
        }
        print_message("chaos: %u rounds in %u s: %u daemons and %u clients killed, the fabric "
                      "whole after each (seed %" PRIu64 ")\n",
                      round, seconds, daemon_kills, client_kills, seed);
        assert_true(round > 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_chaos)};
        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests(tests, group_up, group_down);
}
