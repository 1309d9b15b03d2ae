/* tests/integration/test_simfab_simd.c: ntbfab-simd as an operator runs it: serve, refuse, stop. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "ntbfab/sim.h"

static const char *simd(void)
{
        const char *p = getenv("NTBFAB_SIMD");
        return p ? p : "ntbfab-simd";
}

static const char *yaml =
    "cluster: {name: simdtest, backend: sim}\n"
    "nodes:\n"
    "  - name: lender\n"
    "    id: 4\n"
    "    address: 127.0.0.1:7700\n"
    "    ram: 256MiB\n"
    "    adapters:\n"
    "      - {name: ntb0, model: pxh830}\n"
    "    devices:\n"
    "      - {name: nvme0, bdf: \"0000:03:00.0\", lend: true, sim: {model: nvme, capacity: "
    "%s}}\n"
    "  - name: borrower\n"
    "    id: 8\n"
    "    address: 127.0.0.2:7700\n"
    "    ram: 256MiB\n"
    "    adapters:\n"
    "      - {name: ntb0, model: pxh830}\n"
    "links:\n"
    "  - [lender.ntb0, borrower.ntb0]\n";

static void write_yaml(const char *path, const char *capacity)
{
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, yaml, capacity);
        fclose(f);
}

/* Run simd to completion; its first line of output (stdout and stderr) into out. */
static int run(const char *config, const char *dir, char *out, size_t len)
{
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), "%s --config %s --dir %s 2>&1", simd(), config, dir);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        out[0] = 0;
        if (!fgets(out, (int)len, p))
                out[0] = 0;
        int st = pclose(p);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_simd_serves_and_refuses(void **state)
{
        (void)state;
        char tmp[] = "/tmp/ntbfab-simd-XXXXXX", dir[] = "/dev/shm/ntbfab-simdtest-XXXXXX";
        assert_non_null(mkdtemp(tmp));
        assert_non_null(mkdtemp(dir));
        char cfg[128], cfg2[128];
        snprintf(cfg, sizeof(cfg), "%s/cluster.yaml", tmp);
        snprintf(cfg2, sizeof(cfg2), "%s/other.yaml", tmp);
        write_yaml(cfg, "8MiB");
        write_yaml(cfg2, "16MiB");

        int fd[2];
        assert_int_equal(pipe(fd), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                dup2(fd[1], 1);
                close(fd[0]);
                execl(simd(), "ntbfab-simd", "--config", cfg, "--dir", dir, (char *)NULL);
                _exit(127);
        }
        close(fd[1]);
        FILE *out = fdopen(fd[0], "r");
        char line[512] = "";
        assert_non_null(fgets(line, sizeof(line), out));
        print_message("%s", line);
        assert_non_null(strstr(line, "serving cluster 'simdtest'"));
        assert_non_null(strstr(line, "1 device model"));

        char msg[1024];
        assert_int_equal(run(cfg, dir, msg, sizeof(msg)), 1);
        assert_non_null(strstr(msg, "another device host"));
        assert_int_equal(run(cfg2, dir, msg, sizeof(msg)), 1);
        print_message("%s", msg);
        assert_non_null(strstr(msg, "was created from a different topology"));

        assert_int_equal(kill(pid, SIGTERM), 0);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
        fclose(out);

        assert_int_equal(ntbf_sim_fabric_destroy(dir), 0);
        char path[256];
        snprintf(path, sizeof(path), "%s/images/lender-nvme0.img", dir);
        assert_int_equal(unlink(path), 0);
        snprintf(path, sizeof(path), "%s/images", dir);
        assert_int_equal(rmdir(path), 0);
        assert_int_equal(rmdir(dir), 0);
        unlink(cfg);
        unlink(cfg2);
        rmdir(tmp);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_simd_serves_and_refuses),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
