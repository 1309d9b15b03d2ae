/* bench/nvmefx.c: clusters and ntbfab-nvme processes for the NVMe driver's benchmarks. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nvmefx.h"

void nb_nap(int ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

static char *slurp(const char *path, size_t *len)
{
        FILE *f = fopen(path, "rb");
        if (!f)
                return NULL;
        char *buf = NULL;
        size_t n = 0;
        FILE *m = open_memstream(&buf, &n);
        char chunk[8192];
        size_t k;
        while ((k = fread(chunk, 1, sizeof(chunk), f)) > 0)
                fwrite(chunk, 1, k, m);
        fclose(m);
        fclose(f);
        if (len)
                *len = n;
        return buf;
}

char *nb_rewrite(const char *path, const char *const *from, const char *const *to, unsigned n)
{
        char *s = slurp(path, NULL);
        for (unsigned i = 0; s && i < n; i++) {
                char *out = NULL;
                size_t len = 0;
                FILE *m = open_memstream(&out, &len);
                size_t fl = strlen(from[i]);
                for (const char *p = s; *p;) {
                        const char *h = strstr(p, from[i]);
                        if (!h) {
                                fputs(p, m);
                                break;
                        }
                        fwrite(p, 1, (size_t)(h - p), m);
                        fputs(to[i], m);
                        p = h + fl;
                }
                fclose(m);
                free(s);
                s = out;
        }
        return s;
}

static int sh(const char *cmd)
{
        int st = system(cmd);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int nb_up(struct nb *b, const char *build, const char *text)
{
        memset(b, 0, sizeof(*b));
        snprintf(b->build, sizeof(b->build), "%s", build);
        snprintf(b->dir, sizeof(b->dir), "/dev/shm/ntbfab-bench-nvme-XXXXXX");
        if (!mkdtemp(b->dir)) {
                perror("mkdtemp");
                return -1;
        }
        snprintf(b->yaml, sizeof(b->yaml), "%s/cluster-src.yaml", b->dir);
        FILE *f = fopen(b->yaml, "w");
        if (!f || fputs(text, f) < 0 || fclose(f)) {
                perror(b->yaml);
                return -1;
        }
        char cmd[2048];
        snprintf(cmd, sizeof(cmd),
                 "NTBFAB_DAEMON=%s/daemon/ntbfabd NTBFAB_SIMD=%s/ntbfab-simd %s/tools/ntbfab up "
                 "%s --dir %s > %s/up.log 2>&1",
                 build, build, build, b->yaml, b->dir, b->dir);
        if (sh(cmd)) {
                snprintf(cmd, sizeof(cmd), "cat %s/up.log >&2", b->dir);
                sh(cmd);
                fprintf(stderr, "the cluster did not come up in %s\n", b->dir);
                nb_down(b); /* what did start, and the directory */
                return -1;
        }
        return 0;
}

void nb_down(struct nb *b)
{
        if (!b->dir[0])
                return;
        char cmd[1200];
        snprintf(cmd, sizeof(cmd), "%s/tools/ntbfab down --dir %s > /dev/null 2>&1", b->build,
                 b->dir);
        sh(cmd);
        if (!getenv("NTBFAB_KEEP")) {
                snprintf(cmd, sizeof(cmd), "rm -rf %s", b->dir);
                sh(cmd);
        }
        b->dir[0] = 0;
}

pid_t nb_start(struct nb *b, const char *node, const char *name, const char *fmt, ...)
{
        char args[1024], out[512], cmd[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(args, sizeof(args), fmt, ap);
        va_end(ap);
        snprintf(out, sizeof(out), "%s/%s.out", b->dir, name);
        snprintf(cmd, sizeof(cmd), "exec %s/apps/nvme/ntbfab-nvme %s", b->build, args);
        pid_t pid = fork();
        if (pid == 0) {
                int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
                if (fd < 0)
                        _exit(127);
                dup2(fd, 1);
                dup2(fd, 2);
                close(fd);
                setenv("NTBFAB_DIR", b->dir, 1);
                setenv("NTBFAB_NODE", node, 1);
                execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
                _exit(127);
        }
        return pid;
}

int nb_wait(pid_t pid, int ms)
{
        for (int t = 0;; t += 5) {
                int st;
                if (waitpid(pid, &st, WNOHANG) == pid)
                        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                if (t >= ms) {
                        kill(pid, SIGKILL);
                        waitpid(pid, &st, 0);
                        return -1;
                }
                nb_nap(5);
        }
}

bool nb_wait_for(struct nb *b, const char *name, const char *text, int ms)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/%s.out", b->dir, name);
        for (int t = 0;; t += 10) {
                char *s = slurp(path, NULL);
                bool hit = s && strstr(s, text);
                free(s);
                if (hit)
                        return true;
                if (t >= ms)
                        return false;
                nb_nap(10);
        }
}

struct json_object *nb_json(struct nb *b, const char *name)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/%s.out", b->dir, name);
        char *s = slurp(path, NULL);
        if (!s)
                return NULL;
        /* The document starts at the first '{' of a line. */
        const char *p = s[0] == '{' ? s : strstr(s, "\n{");
        struct json_object *o = p ? json_tokener_parse(p[0] == '{' ? p : p + 1) : NULL;
        free(s);
        return o;
}

double nb_num(struct json_object *o, const char *path)
{
        char key[128];
        const char *p = path;
        while (o && *p) {
                const char *dot = strchr(p, '.');
                size_t n = dot ? (size_t)(dot - p) : strlen(p);
                snprintf(key, sizeof(key), "%.*s", (int)n, p);
                struct json_object *x;
                if (!json_object_object_get_ex(o, key, &x))
                        return -1;
                o = x;
                p = dot ? dot + 1 : p + n;
        }
        return o ? json_object_get_double(o) : -1;
}

pid_t nb_manager(struct nb *b, const char *node, unsigned fdid)
{
        char name[64];
        snprintf(name, sizeof(name), "manager-%x", fdid);
        pid_t m = nb_start(b, node, name, "manager --fdid 0x%x --lease 10s", fdid);
        if (!nb_wait_for(b, name, "manager ready:", 30000)) {
                fprintf(stderr, "the manager of 0x%x did not come up (%s/%s.out)\n", fdid, b->dir,
                        name);
                kill(m, SIGKILL);
                nb_wait(m, 5000);
                return -1;
        }
        return m;
}
