/* tests/integration/nvme_itest.c: running ntbfab-nvme managers and clients on a test cluster. */
#include <errno.h>
#include <fcntl.h>
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

#include "nvme_itest.h"

#define MAX_PROCS 128

static struct nproc procs[MAX_PROCS];
static unsigned nprocs;

static const char *tool(void)
{
        const char *p = getenv("NTBFAB_NVME");
        return p ? p : "ntbfab-nvme";
}

struct nproc *nit_start(struct dfx *f, const char *node, const char *name, const char *fmt, ...)
{
        char args[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(args, sizeof(args), fmt, ap);
        va_end(ap);
        assert_true(nprocs < MAX_PROCS);
        struct nproc *p = &procs[nprocs++];
        snprintf(p->out, sizeof(p->out), "%s/%s.out", f->dir, name);
        p->status = -1;
        char cmd[1400];
        snprintf(cmd, sizeof(cmd), "exec %s %s", tool(), args);
        p->pid = fork();
        assert_true(p->pid >= 0);
        if (p->pid == 0) {
                int fd = open(p->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
                if (fd < 0)
                        _exit(127);
                dup2(fd, 1);
                dup2(fd, 2);
                close(fd);
                setenv("NTBFAB_DIR", f->dir, 1);
                setenv("NTBFAB_NODE", node, 1);
                execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
                _exit(127);
        }
        return p;
}

int nit_wait(struct nproc *p, int ms)
{
        if (p->status >= 0)
                return p->status;
        for (int t = 0;; t += 10) {
                int st;
                pid_t r = waitpid(p->pid, &st, WNOHANG);
                if (r == p->pid) {
                        p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                        return p->status;
                }
                if (t >= ms)
                        return -1;
                dfx_nap(10);
        }
}

char *nit_output(const struct nproc *p, char *buf, size_t len)
{
        buf[0] = 0;
        FILE *fp = fopen(p->out, "r");
        if (!fp)
                return buf;
        size_t n = fread(buf, 1, len - 1, fp);
        buf[n] = 0;
        fclose(fp);
        return buf;
}

void nit_run(struct dfx *f, const char *node, int want, char *out, size_t len, int ms,
             const char *fmt, ...)
{
        char args[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(args, sizeof(args), fmt, ap);
        va_end(ap);
        static unsigned runs;
        char name[64];
        snprintf(name, sizeof(name), "run%u-%s", runs++, node);
        struct nproc *p = nit_start(f, node, name, "%s", args);
        int st = nit_wait(p, ms);
        static char buf[16384];
        nit_output(p, out ? out : buf, out ? len : sizeof(buf));
        if (st < 0) {
                nit_kill(p, SIGKILL);
                fail_msg("ntbfab-nvme %s on %s did not finish in %d ms: %s", args, node, ms,
                         out ? out : buf);
        }
        if (st != want)
                fail_msg("ntbfab-nvme %s on %s: exit status %d, not %d: %s", args, node, st, want,
                         out ? out : buf);
}

bool nit_wait_for(const struct nproc *p, const char *text, int ms)
{
        static char buf[65536];
        for (int t = 0;; t += 20) {
                if (strstr(nit_output(p, buf, sizeof(buf)), text))
                        return true;
                if (t >= ms)
                        return false;
                dfx_nap(20);
        }
}

int nit_count(const struct nproc *p, const char *text)
{
        static char buf[262144];
        nit_output(p, buf, sizeof(buf));
        int n = 0;
        for (const char *s = buf; (s = strstr(s, text)); s++)
                n++;
        return n;
}

void nit_kill(struct nproc *p, int sig)
{
        if (p->status >= 0)
                return;
        kill(p->pid, sig);
        if (nit_wait(p, 10000) < 0) {
                kill(p->pid, SIGKILL);
                nit_wait(p, 10000);
        }
}

void nit_kill_all(void)
{
        for (unsigned i = 0; i < nprocs; i++)
                nit_kill(&procs[i], SIGKILL);
        nprocs = 0;
}

struct nproc *nit_manager(struct dfx *f, const char *node, unsigned fdid, const char *lease)
{
        char name[64];
        snprintf(name, sizeof(name), "manager-%x", fdid);
        struct nproc *m = nit_start(f, node, name, "manager --fdid 0x%x --lease %s", fdid, lease);
        if (!nit_wait_for(m, "manager ready:", 30000)) {
                char buf[4096];
                fail_msg("the manager of 0x%x did not come up: %s", fdid,
                         nit_output(m, buf, sizeof(buf)));
        }
        return m;
}
