/* tests/integration/test_daemon_crash.c: a daemon killed at every step of programming its
 * hardware, restarted: the hardware then equals its records, and the records what the manager
 * wants (docs/daemon.md, "Crash consistency"). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon_fx.h"
#include "hwcheck.h"
#include "proc.h"

static struct dfx F;
static char *baseline;
static char **recs0; /* the records with nothing borrowed */
static size_t nrecs0;
static char **recs1; /* the records with the NVMe borrowed */
static size_t nrecs1;
static char P[64]; /* {"fdid": the NVMe} */

static bool same_records(char **v, size_t n)
{
        size_t m;
        char **now = hwc_records(&F, &m);
        bool same = m == n;
        for (size_t i = 0; same && i < n; i++)
                same = !strcmp(v[i], now[i]);
        if (!same)
                for (size_t i = 0; i < m; i++)
                        print_message("  record now: %s\n", now[i]);
        hwc_free(now, m);
        return same;
}

static void check_consistent(const char *what, bool borrowed)
{
        char why[8192];
        if (!hwc_matches(&F, false, why, sizeof(why)))
                fail_msg("after %s: %s", what, why);
        if (!same_records(borrowed ? recs1 : recs0, borrowed ? nrecs1 : nrecs0))
                fail_msg("after %s: the records are not what the manager wants", what);
        char *now = dfx_budgets(&F);
        if (!borrowed && strcmp(now, baseline))
                fail_msg("after %s: budgets differ from the start:\n%s", what, now);
        free(now);
}

static int group_up(void **state)
{
        (void)state;
        dfx_up(&F, "daemon-crash.yaml");
        snprintf(P, sizeof(P), "{\"fdid\":%u}", dfx_fdid(&F, "lender", "nvme"));
        baseline = dfx_budgets(&F);
        recs0 = hwc_records(&F, &nrecs0);
        json_object_put(dfx_ok(&F, "borrower", "device.borrow", P));
        recs1 = hwc_records(&F, &nrecs1);
        assert_true(nrecs1 > nrecs0);
        char why[8192];
        if (!hwc_matches(&F, false, why, sizeof(why)))
                fail_msg("%s", why);
        json_object_put(dfx_ok(&F, "borrower", "device.return", P));
        check_consistent("a clean borrow and return", false);
        return 0;
}

static int group_down(void **state)
{
        (void)state;
        dfx_down(&F);
        free(baseline);
        hwc_free(recs0, nrecs0);
        hwc_free(recs1, nrecs1);
        return 0;
}

/* Whether node's daemon died (within a second of the call that made it die). */
static bool died(const char *node, int pid)
{
        for (int i = 0; i < 100; i++) {
                if (!ntbf__pid_alive(pid))
                        return true;
                dfx_nap(10);
        }
        (void)node;
        return false;
}

/*
 * Kill node at step k = 1, 1 + stride, ... of phase until the phase has fewer steps than k;
 * after each death restart it and check. The stride is 1 (every step) unless
 * DFX_CRASH_STRIDE says otherwise: the sanitizer build, where each restart costs seconds,
 * kills at every fourth step. Returns the number of steps killed at.
 */
static int every_step(const char *node, const char *phase)
{
        const char *e = getenv("DFX_CRASH_STRIDE");
        int stride = e && atoi(e) > 1 ? atoi(e) : 1, kills = 0;
        int k = 1;
        for (;; k += stride, kills++) {
                char arm[64], what[128];
                snprintf(arm, sizeof(arm), "%s:%s:%d", node, phase, k);
                snprintf(what, sizeof(what), "%s dying at step %d of %s", node, k, phase);
                bool unprogram = !strcmp(phase, "unprogram");
                if (unprogram)
                        json_object_put(dfx_ok(&F, "borrower", "device.borrow", P));
                int pid;
                if (!strcmp(phase, "sync")) {
                        /* It dies while it reconciles, at its start: a borrow is active. */
                        json_object_put(dfx_ok(&F, "borrower", "device.borrow", P));
                        pid = dfx_pid(&F, node);
                        kill(pid, SIGKILL);
                        dfx_wait_gone(pid);
                        setenv("NTBFAB_CRASH_AT", arm, 1);
                        char out[4096];
                        dfx_cli(&F, out, sizeof(out), "up %s", F.yaml);
                        unsetenv("NTBFAB_CRASH_AT");
                        pid = dfx_pid(&F, node);
                        bool dead = pid <= 0 || died(node, pid);
                        dfx_restart(&F, node, NULL);
                        /* Within the lease: the borrow is intact and reprogrammed. */
                        check_consistent(what, true);
                        json_object_put(dfx_ok(&F, "borrower", "device.return", P));
                        check_consistent(what, false);
                        if (!dead)
                                break;
                        continue;
                }
                dfx_restart(&F, node, arm);
                pid = dfx_pid(&F, node);
                int err;
                struct json_object *r =
                    dfx_call(&F, "borrower", unprogram ? "device.return" : "device.borrow", P, &err,
                             NULL, 0);
                json_object_put(r);
                if (!died(node, pid)) {
                        /* Fewer steps than k: the call went through. */
                        assert_int_equal(err, 0);
                        if (!unprogram)
                                json_object_put(dfx_ok(&F, "borrower", "device.return", P));
                        dfx_restart(&F, node, NULL);
                        check_consistent(what, false);
                        break;
                }
                dfx_restart(&F, node, NULL);
                /* The manager gave up the borrow (or took the return): nothing is borrowed,
                 * and nothing is left programmed that no record names. */
                check_consistent(what, false);
        }
        print_message("%s: killed at %d steps of %s (every %s)\n", node, kills, phase,
                      stride == 1 ? "step" : e);
        assert_true(kills >= (stride == 1 ? 2 : 1));
        return kills;
}

static void test_borrower_program(void **state)
{
        (void)state;
        every_step("borrower", "program");
}

static void test_borrower_unprogram(void **state)
{
        (void)state;
        every_step("borrower", "unprogram");
}

static void test_lender_program(void **state)
{
        (void)state;
        every_step("lender", "program");
}

static void test_lender_unprogram(void **state)
{
        (void)state;
        every_step("lender", "unprogram");
}

static void test_borrower_sync(void **state)
{
        (void)state;
        every_step("borrower", "sync");
}

static void test_lender_sync(void **state)
{
        (void)state;
        every_step("lender", "sync");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_borrower_program), cmocka_unit_test(test_borrower_unprogram),
            cmocka_unit_test(test_lender_program),   cmocka_unit_test(test_lender_unprogram),
            cmocka_unit_test(test_borrower_sync),    cmocka_unit_test(test_lender_sync),
        };
        if (getenv("TEST_FILTER"))
                cmocka_set_test_filter(getenv("TEST_FILTER"));
        return cmocka_run_group_tests(tests, group_up, group_down);
}
