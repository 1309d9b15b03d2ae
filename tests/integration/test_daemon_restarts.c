/* tests/integration/test_daemon_restarts.c: who holds a borrow once daemons restarted, device
 * segments across manager restarts, borrows whose client hung up (docs/daemon.md, "What a
 * crash leaves"). */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
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

#include "daemon_fx.h"
#include "ntbfab/sim.h"
#include "sisci_fx.h"

static struct dfx F;
static uint32_t NVME;
static char *baseline;

#define SCI_ERR_NOT_AVAILABLE_CODE 0x40000e00u

static int group_up(void **state)
{
        (void)state;
        dfx_up(&F, "daemon-restarts.yaml");
        NVME = dfx_fdid(&F, "lender", "nvme");
        setenv("NTBFAB_DIR", F.dir, 1);
        baseline = dfx_budgets(&F);
        return 0;
}

static int group_down(void **state)
{
        sfx_kill_all(state);
        dfx_down(&F);
        free(baseline);
        return 0;
}

static void kill_daemon(const char *node)
{
        int pid = dfx_pid(&F, node);
        assert_true(pid > 0);
        kill(pid, SIGKILL);
        dfx_wait_gone(pid);
}

/* A new SISCI process can take the NVMe exclusively: nobody holds it any more. */
static void exclusive_borrow_works(void)
{
        assert_true(dfx_wait_state(&F, NVME, "available", 10000));
        struct peer *p = sfx_peer("borrower");
        unsigned e = sfx_cmd(p, NULL, 0, "borrow %u 1", NVME);
        if (e)
                fail_msg("SCIBorrowDevice(0x%x, exclusive) by a new process: %s (0x%x)", NVME,
                         SCIGetErrorString((sci_error_t)e), e);
        sfx_quit(p);
        assert_true(dfx_wait_state(&F, NVME, "available", 10000));
        dfx_assert_budgets(&F, baseline);
}

/* The borrower's daemon dies with its SISCI process: the borrow nobody holds is returned when
 * the daemon is back. */
static void test_sisci_borrow_borrower_restart(void **state)
{
        (void)state;
        struct peer *p = sfx_peer("borrower");
        sfx_ok(p, "borrow %u 1", NVME);
        assert_true(dfx_wait_state(&F, NVME, "exclusive", 5000));
        kill_daemon("borrower");
        sfx_kill(p);
        dfx_restart(&F, "borrower", NULL);
        exclusive_borrow_works();
}

/* The manager's daemon is down while the SISCI process that held a borrow dies: the borrow is
 * returned once the manager is back. */
static void test_sisci_borrow_manager_restart(void **state)
{
        (void)state;
        struct peer *p = sfx_peer("borrower");
        sfx_ok(p, "borrow %u 1", NVME);
        assert_true(dfx_wait_state(&F, NVME, "exclusive", 5000));
        kill_daemon("fm");
        sfx_kill(p);
        dfx_nap(200); /* the borrower's daemon ends the session while the manager is away */
        dfx_restart(&F, "fm", NULL);
        exclusive_borrow_works();
}

/* Memory the borrower's daemon holds for a device segment: what the simulated fabric
 * records as owned by that daemon's process. */
static uint32_t segments_held(const char *node)
{
        struct ntbf_sim_owned o;
        assert_int_equal(ntbf_sim_owned(F.b, dfx_node(&F, node), dfx_pid(&F, node), &o), 0);
        return o.mem;
}

/* A device segment placed on the borrower outlives three manager restarts, and its memory is
 * freed once its process ends. */
static void test_devseg_manager_restarts(void **state)
{
        (void)state;
        uint32_t before = segments_held("borrower");
        struct peer *p = sfx_peer("borrower");
        sfx_ok(p, "borrow %u 0", NVME);
        /* Private, read by the host: placed in the creator's host, the borrower. */
        char out[64];
        assert_int_equal(sfx_cmd(p, out, sizeof(out), "devseg 1 4096 2 4"), 0);
        assert_int_equal(strtoul(out, NULL, 0), 8);
        assert_int_equal(segments_held("borrower"), before + 1);
        for (int i = 0; i < 3; i++) {
                kill_daemon("fm");
                dfx_restart(&F, "fm", NULL);
        }
        assert_int_equal(segments_held("borrower"), before + 1);
        sfx_quit(p);
        int held = 0;
        for (int t = 0; t < 5000; t += 50) {
                held = (int)segments_held("borrower");
                if (held == (int)before)
                        break;
                dfx_nap(50);
        }
        if (held != (int)before)
                fail_msg("the borrower's daemon holds %d segments, %u before the device "
                         "segment was made and its process ended",
                         held, before);
        assert_true(dfx_wait_state(&F, NVME, "available", 5000));
        dfx_assert_budgets(&F, baseline);
}

/* A device.borrow whose client hangs up before the answer: the borrow is returned (policy:
 * nobody learned of it, so nobody would return it). */
static void test_borrow_client_gone(void **state)
{
        (void)state;
        char path[512], line[128];
        ntbf_rpc_socket_path(F.dir, "borrower", path, sizeof(path));
        for (int i = 0; i < 5; i++) {
                int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                struct sockaddr_un sa = {.sun_family = AF_UNIX};
                assert_true(strlen(path) < sizeof(sa.sun_path));
                memcpy(sa.sun_path, path, strlen(path) + 1);
                assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
                int n = snprintf(line, sizeof(line),
                                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"device.borrow\","
                                 "\"params\":{\"fdid\":%u}}\n",
                                 NVME);
                /* The manager is held still until the client has hung up: it really hangs
                 * up before any answer (whatever the scheduler does to this process). */
                int fm = dfx_pid(&F, "fm");
                kill(fm, SIGSTOP);
                assert_int_equal(write(fd, line, (size_t)n), n);
                dfx_nap(50);
                close(fd);
                kill(fm, SIGCONT);
                /* Returned once the answer finds nobody to take it (the log says so). */
                bool gone = false;
                for (int t = 0; t < 5000 && !gone; t += 20) {
                        gone = dfx_log_count(&F, "borrower", "client hung up before the answer") ==
                               i + 1;
                        if (!gone)
                                dfx_nap(20);
                }
                assert_true(gone);
                assert_true(dfx_wait_state(&F, NVME, "available", 5000));
                struct json_object *bs = dfx_ok(&F, "borrower", "device.borrows", NULL);
                assert_int_equal(json_object_array_length(bs), 0);
                json_object_put(bs);
        }
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "grep -q 'client hung up before the answer' %s/log/borrower.log",
                 F.dir);
        assert_int_equal(system(cmd), 0);
        dfx_assert_budgets(&F, baseline);
        /* A borrow whose answer reached its client stays after the client left. */
        char p[64];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", NVME);
        json_object_put(dfx_ok(&F, "borrower", "device.borrow", p));
        dfx_nap(200);
        assert_true(dfx_wait_state(&F, NVME, "exclusive", 1));
        json_object_put(dfx_ok(&F, "borrower", "device.return", p));
        dfx_assert_budgets(&F, baseline);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_sisci_borrow_borrower_restart),
            cmocka_unit_test(test_sisci_borrow_manager_restart),
            cmocka_unit_test(test_devseg_manager_restarts),
            cmocka_unit_test(test_borrow_client_gone),
        };
        if (getenv("TEST_FILTER"))
                cmocka_set_test_filter(getenv("TEST_FILTER"));
        return cmocka_run_group_tests(tests, group_up, group_down);
}
