/* tests/integration/sisci_fx.c: the libsisci tests' cluster and peers (ntbfab up, sisci_peer). */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "sisci_fx.h"

static char top[256], dir[300];
static bool up;
static struct peer peers[16];

void sfx_nap(int ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

const char *sfx_dir(void)
{
        return dir;
}

int sfx_cli(const char *args)
{
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), "%s %s --dir %s >/dev/null 2>&1", getenv("NTBFAB"), args, dir);
        int st = system(cmd);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int sfx_setup(void **state)
{
        (void)state;
        return sfx_setup_on("sisci-cluster.yaml", "a");
}

int sfx_setup_on(const char *yaml, const char *node)
{
        if (!getenv("NTBFAB") || !getenv("NTBFAB_DAEMON") || !getenv("NTBFAB_SIMD") ||
            !getenv("SISCI_PEER") || !getenv("NTBFAB_SRC")) {
                fprintf(stderr, "test_sisci: run it through meson (it needs the built tools)\n");
                return -1;
        }
        snprintf(top, sizeof(top), "/dev/shm/ntbfab-sisci-XXXXXX");
        if (!mkdtemp(top))
                return -1;
        snprintf(dir, sizeof(dir), "%s/inst", top);
        char args[600];
        snprintf(args, sizeof(args), "up %s/tests/integration/%s", getenv("NTBFAB_SRC"), yaml);
        up = true;
        if (sfx_cli(args)) {
                fprintf(stderr, "test_sisci: ntbfab up failed (logs in %s/log)\n", dir);
                return -1;
        }
        setenv("NTBFAB_DIR", dir, 1);
        setenv("NTBFAB_NODE", node, 1);
        unsetenv("NTBFAB_CONFIG");
        sci_error_t e;
        SCIInitialize(0, &e);
        if (e != SCI_ERR_OK) {
                fprintf(stderr, "test_sisci: SCIInitialize: %s\n", SCIGetErrorString(e));
                return -1;
        }
        return 0;
}

int sfx_teardown(void **state)
{
        sfx_kill_all(state);
        SCITerminate();
        if (up)
                sfx_cli("down");
        up = false;
        if (*top && !getenv("NTBFAB_KEEP")) {
                char cmd[400];
                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
                if (system(cmd))
                        fprintf(stderr, "cannot remove %s\n", top);
        }
        return 0;
}

struct peer *sfx_peer(const char *node)
{
        struct peer *p = NULL;
        for (size_t i = 0; i < sizeof(peers) / sizeof(peers[0]) && !p; i++)
                if (!peers[i].pid)
                        p = &peers[i];
        assert_non_null(p);
        int in[2], out[2];
        assert_int_equal(pipe(in), 0);
        assert_int_equal(pipe(out), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (!pid) {
                dup2(in[0], 0);
                dup2(out[1], 1);
                close(in[1]);
                close(out[0]);
                setenv("NTBFAB_NODE", node, 1);
                execl(getenv("SISCI_PEER"), "sisci_peer", (char *)NULL);
                _exit(127);
        }
        close(in[0]);
        close(out[1]);
        *p = (struct peer){pid, in[1], out[0], ""};
        snprintf(p->node, sizeof(p->node), "%s", node);
        char ans[128];
        assert_int_equal(sfx_cmd(p, ans, sizeof(ans), "%s", ""), 0); /* its "ok up" */
        return p;
}

/* Read one line of the peer's answers (30 s at most). */
static void read_line(struct peer *p, char *buf, size_t len)
{
        size_t n = 0;
        while (n + 1 < len) {
                struct pollfd pf = {p->out, POLLIN, 0};
                if (poll(&pf, 1, 30000) <= 0)
                        fail_msg("peer on node %s did not answer within 30 s", p->node);
                char c;
                ssize_t r = read(p->out, &c, 1);
                if (r <= 0)
                        fail_msg("peer on node %s went away", p->node);
                if (c == '\n')
                        break;
                buf[n++] = c;
        }
        buf[n] = 0;
}

unsigned sfx_cmd(struct peer *p, char *out, size_t len, const char *fmt, ...)
{
        char line[8192];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        if (line[0]) {
                size_t l = strlen(line);
                line[l] = '\n';
                if (write(p->in, line, l + 1) != (ssize_t)(l + 1))
                        fail_msg("cannot write to the peer on node %s", p->node);
        }
        char ans[8192];
        read_line(p, ans, sizeof(ans));
        if (!strncmp(ans, "ok", 2)) {
                if (out)
                        snprintf(out, len, "%s", ans[2] ? ans + 3 : "");
                return 0;
        }
        unsigned code = 0;
        if (sscanf(ans, "err %x", &code) != 1)
                fail_msg("peer on node %s answered '%s'", p->node, ans);
        if (out && len)
                out[0] = 0;
        return code;
}

void sfx_ok(struct peer *p, const char *fmt, ...)
{
        char line[8192];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        unsigned e = sfx_cmd(p, NULL, 0, "%s", line);
        if (e)
                fail_msg("peer on node %s: '%s' failed: %s (0x%x)", p->node, line,
                         SCIGetErrorString((sci_error_t)e), e);
}

static void reap(struct peer *p)
{
        close(p->in);
        close(p->out);
        int st;
        for (int i = 0; i < 1000 && waitpid(p->pid, &st, WNOHANG) == 0; i++)
                sfx_nap(10);
        if (waitpid(p->pid, &st, WNOHANG) == 0) {
                kill(p->pid, SIGKILL);
                waitpid(p->pid, &st, 0);
        }
        p->pid = 0;
}

void sfx_kill(struct peer *p)
{
        kill(p->pid, SIGKILL);
        reap(p);
}

void sfx_quit(struct peer *p)
{
        sfx_cmd(p, NULL, 0, "quit");
        reap(p);
}

int sfx_kill_all(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(peers) / sizeof(peers[0]); i++)
                if (peers[i].pid)
                        sfx_kill(&peers[i]);
        return 0;
}
