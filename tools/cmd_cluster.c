/* tools/cmd_cluster.c: verbs that run a simulated cluster: up, down, status, fault, keygen. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../daemon/keyfile.h"
#include "fabric.h"
#include "proc.h"
#include "ntbfab/config.h"
#include "ntbfab/error.h"
#include "ntbfab/backend.h"
#include "ntbfab/units.h"

#define UP_WAIT_MS   20000
#define DOWN_WAIT_MS 15000

static const struct verb *find(const char *name);
static bool stop_pid(int pid, unsigned ms);

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void nap_ms(unsigned ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

/* ---- finding the programs ------------------------------------------------------------------ */

/* env, then next to this program (installed or in the build tree), then PATH. */
static int find_program(const char *env, const char *name, const char *const *rel, char *out,
                        size_t len)
{
        const char *e = getenv(env);
        if (e && !access(e, X_OK)) {
                snprintf(out, len, "%s", e);
                return 0;
        }
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n > 0) {
                self[n] = 0;
                char *dir = dirname(self);
                for (size_t i = 0; rel[i]; i++) {
                        snprintf(out, len, "%s/%s", dir, rel[i]);
                        if (!access(out, X_OK))
                                return 0;
                }
        }
        const char *path = getenv("PATH");
        char buf[4096];
        snprintf(buf, sizeof(buf), "%s", path ? path : "/usr/bin:/bin");
        for (char *save, *p = strtok_r(buf, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
                snprintf(out, len, "%s/%s", p, name);
                if (!access(out, X_OK))
                        return 0;
        }
        cli_error("cannot find %s next to ntbfab or in PATH; set %s to its path", name, env);
        return -ENOENT;
}

/*
 * A backend's helper program (ntbf_backend_entry.helper, "ntbfab-simd"): found as
 * find_program finds it, its path overridden by the variable named after it (NTBFAB_SIMD);
 * short is its name without "ntbfab-" ("simd"), naming its pid file and log.
 */
static int find_helper(const char *name, char *out, size_t len, char *shortname, size_t slen)
{
        char env[64], rel1[80], rel2[96];
        size_t i = 0;
        for (; name[i] && i < sizeof(env) - 1; i++)
                env[i] = name[i] == '-' ? '_' : (char)toupper((unsigned char)name[i]);
        env[i] = 0;
        snprintf(shortname, slen, "%s", strncmp(name, "ntbfab-", 7) ? name : name + 7);
        snprintf(rel1, sizeof(rel1), "../%s", name);
        snprintf(rel2, sizeof(rel2), "../libexec/%s", name);
        const char *const rel[] = {name, rel1, rel2, NULL};
        return find_program(env, name, rel, out, len);
}

/* Start a program detached from this terminal, its output into log; returns its pid. */
static int spawn(char *const argv[], const char *log)
{
        int pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                setsid();
                int in = open("/dev/null", O_RDONLY);
                int out = open(log, O_WRONLY | O_CREAT | O_APPEND, 0640);
                if (in >= 0)
                        dup2(in, 0);
                if (out >= 0) {
                        dup2(out, 1);
                        dup2(out, 2);
                }
                execv(argv[0], argv);
                _exit(127);
        }
        return pid;
}

/* ---- up ------------------------------------------------------------------------------------ */

static char *slurp(const char *path, size_t *len)
{
        /* Regular files only: a FIFO nobody writes to would block the tool. */
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat st;
        if (fd < 0)
                return NULL;
        if (fstat(fd, &st) || !S_ISREG(st.st_mode) || fcntl(fd, F_SETFL, 0)) {
                close(fd);
                return NULL;
        }
        FILE *f = fdopen(fd, "rb");
        if (!f) {
                close(fd);
                return NULL;
        }
        char *buf = NULL;
        size_t n = 0;
        FILE *m = open_memstream(&buf, &n);
        char chunk[8192];
        size_t k;
        while ((k = fread(chunk, 1, sizeof(chunk), f)) > 0)
                fwrite(chunk, 1, k, m);
        fclose(m);
        fclose(f);
        *len = n;
        return buf;
}

static int write_file(const char *path, const char *data, size_t len, mode_t mode)
{
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        if (fd < 0)
                return -errno;
        bool ok = write(fd, data, len) == (ssize_t)len;
        close(fd);
        if (!ok || rename(tmp, path)) {
                unlink(tmp);
                return -EIO;
        }
        return 0;
}

/* The last line of a log, to say why a daemon did not come up. */
static void last_line(const char *path, char *out, size_t len)
{
        size_t n;
        char *s = slurp(path, &n);
        out[0] = 0;
        if (!s)
                return;
        while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
                s[--n] = 0;
        char *nl = strrchr(s, '\n');
        snprintf(out, len, "%s", nl ? nl + 1 : s);
        free(s);
}

/*
 * A failed up: stop what it started (daemons, then the device host), so nothing is left
 * half up, and say what failed; what was running before it stays. When something cannot be
 * stopped, say what to run.
 */
static void up_failed(struct fab *f, const char *failure, int helper_pid, const int *pids)
{
        unsigned stopped = 0, left = 0;
        for (uint32_t n = 0; n < f->t->nnodes; n++) {
                if (pids[n] >= 0)
                        continue; /* it ran before this up, or was reaped */
                stop_pid(-pids[n], DOWN_WAIT_MS);
                waitpid(-pids[n], NULL, WNOHANG);
                if (ntbf__pid_alive(-pids[n]))
                        left++;
                else
                        stopped++;
        }
        if (helper_pid > 0) {
                stop_pid(helper_pid, DOWN_WAIT_MS);
                waitpid(helper_pid, NULL, WNOHANG);
                if (ntbf__pid_alive(helper_pid))
                        left++;
                else
                        stopped++;
        }
        if (left)
                cli_error("%s; %u process%s this 'up' started could not be stopped: run 'ntbfab "
                          "down --dir %s'",
                          failure, left, left == 1 ? "" : "es", f->dir);
        else
                cli_error("%s; stopped the %u process%s this 'up' started", failure, stopped,
                          stopped == 1 ? "" : "es");
}

static void print_cluster(struct fab *f, struct json_object *status)
{
        const struct ntbf_topo *t = f->t;
        printf("cluster '%s' is up in %s (fabric manager: %s)\n", t->name, f->dir,
               t->nodes[f->manager].name);
        static const char *const h1[] = {"node", "id", "address", "daemon", "adapters"};
        struct table tb;
        table_init(&tb, h1, 5);
        for (uint32_t n = 0; n < t->nnodes; n++) {
                char ads[256] = "";
                size_t o = 0;
                for (uint32_t i = 0; i < t->nodes[n].nadapters && o < sizeof(ads); i++) {
                        const struct ntbf_adapter *a = &t->adapters[t->nodes[n].adapters[i]];
                        char w[32];
                        uint64_t bytes = 0;
                        for (uint32_t k = 0; k < a->nwin; k++)
                                bytes += a->win[k].size;
                        o +=
                            (size_t)snprintf(ads + o, sizeof(ads) - o, "%s%s (%s, %s window%s)",
                                             i ? ", " : "", a->name, a->p.model,
                                             fmt_size(bytes, w, sizeof(w)), a->nwin > 1 ? "s" : "");
                }
                table_cell(&tb, "%s", t->nodes[n].name);
                table_cell(&tb, "%u", t->nodes[n].id);
                table_cell(&tb, "%s", t->nodes[n].address);
                table_cell(&tb, "pid %d", fab_pid(f->dir, t->nodes[n].name));
                table_cell(&tb, "%s", ads);
        }
        printf("\n");
        table_print(&tb, stdout, 2);
        table_free(&tb);
        static const char *const h2[] = {"link", "state"};
        table_init(&tb, h2, 2);
        struct json_object *links = jo(status, "links");
        for (size_t i = 0; links && i < json_object_array_length(links); i++) {
                struct json_object *l = json_object_array_get_idx(links, i), *ends = jo(l, "ends");
                table_cell(&tb, "%s - %s",
                           json_object_get_string(json_object_array_get_idx(ends, 0)),
                           json_object_get_string(json_object_array_get_idx(ends, 1)));
                struct json_object *up = jo(l, "up");
                table_cell(&tb, "%s", !up ? "?" : json_object_get_boolean(up) ? "up" : "down");
        }
        printf("\n");
        table_print(&tb, stdout, 2);
        table_free(&tb);
        static const char *const h3[] = {"fdid", "device", "bdf", "class", "state"};
        table_init(&tb, h3, 5);
        struct json_object *devs = jo(status, "devices");
        for (size_t i = 0; devs && i < json_object_array_length(devs); i++) {
                struct json_object *d = json_object_array_get_idx(devs, i);
                table_cell(&tb, "0x%04" PRIx64, ju(d, "fdid"));
                table_cell(&tb, "%s.%s", js(d, "node"), js(d, "name"));
                table_cell(&tb, "%s", js(d, "bdf"));
                table_cell(&tb, "0x%06" PRIx64, ju(d, "class"));
                table_cell(&tb, "%s", js(d, "state"));
        }
        printf("\nlendable devices:\n");
        table_print(&tb, stdout, 2);
        table_free(&tb);
}

static int run_up(int argc, char **argv)
{
        const struct verb *v = find("up");
        struct fab_opts o = {0};
        int r = fab_parse(v, argc, argv, NULL, 0, &o, NULL, NULL);
        if (r)
                return r;
        if (optind + 1 != argc)
                return cli_usage(v,
                                 optind >= argc ? "no cluster file given" : "one file at a time");
        const char *file = argv[optind];
        struct fab f = {0};
        struct ntbf_diags dg;
        ntbf_diags_init(&dg);
        r = ntbf_config_load(file, &f.t, &dg);
        ntbf_diags_sort(&dg);
        ntbf_diags_print(&dg, stderr);
        ntbf_diags_free(&dg);
        if (r) {
                cli_error("%s is not a valid cluster file; fix the errors above", file);
                return EXIT_FAIL;
        }
        /* Any backend that runs on one machine (it has create): the registry says. */
        char no[512];
        const struct ntbf_backend_ops *ops = ntbf_backend_open_ops(f.t->backend, no, sizeof(no));
        const struct ntbf_backend_entry *be = ntbf_backend_entry(f.t->backend);
        if (!ops) {
                cli_error("%s: %s", file, no);
                fab_close(&f);
                return EXIT_FAIL;
        }
        if (!ops->create) {
                cli_error("'ntbfab up' starts clusters whose backend runs on one machine; %s uses "
                          "the '%s' backend, which drives hardware: start ntbfabd on each node "
                          "instead",
                          file, f.t->backend);
                fab_close(&f);
                return EXIT_FAIL;
        }
        f.manager = fab_manager(f.t);
        const char *env = getenv("NTBFAB_DIR");
        if (o.dir)
                snprintf(f.dir, sizeof(f.dir), "%s", o.dir);
        else if (env && env[0])
                snprintf(f.dir, sizeof(f.dir), "%s", env);
        else
                ntbf_instance_dir_default(f.t, f.dir, sizeof(f.dir));
        snprintf(f.file, sizeof(f.file), "%s/cluster.yaml", f.dir);
        if (!realpath(file, f.origin))
                snprintf(f.origin, sizeof(f.origin), "%s", file);
        size_t len, olen = 0;
        char *text = slurp(file, &len), *old = slurp(f.file, &olen);
        /* Another cluster up in this directory: refuse, do not touch it. */
        if (old && (olen != len || memcmp(old, text, len)) && fab_running(f.dir)) {
                char was[PATH_MAX] = "", p[PATH_MAX];
                snprintf(p, sizeof(p), "%s/cluster.origin", f.dir);
                FILE *of = fopen(p, "r");
                if (of) {
                        if (!fgets(was, sizeof(was), of))
                                was[0] = 0;
                        was[strcspn(was, "\n")] = 0;
                        fclose(of);
                }
                cli_error("another cluster (from %s) is up in %s; bring it down first ('ntbfab "
                          "down --dir %s') or use another --dir",
                          was[0] ? was : "another file", f.dir, f.dir);
                free(text);
                free(old);
                fab_close(&f);
                return EXIT_FAIL;
        }
        free(old);
        char p[PATH_MAX], why[1024];
        static const char *const sub[] = {"", "/run", "/state", "/log"};
        for (size_t i = 0; i < 4; i++) {
                snprintf(p, sizeof(p), "%s%s", f.dir, sub[i]);
                if (mkdir(p, 0750) && errno != EEXIST) {
                        cli_error("cannot create %s: %s", p, strerror(errno));
                        free(text);
                        fab_close(&f);
                        return EXIT_FAIL;
                }
        }
        why[0] = 0;
        r = ops->create(f.t, f.dir, why, sizeof(why));
        if (r) {
                if (!why[0])
                        snprintf(why, sizeof(why), "cannot create the %s fabric in %.700s: %s",
                                 ops->name, f.dir, ntbf_strerror(r));
                cli_error("%s", why);
                free(text);
                fab_close(&f);
                return EXIT_FAIL;
        }
        write_file(f.file, text, len, 0640);
        free(text);
        snprintf(p, sizeof(p), "%s/cluster.origin", f.dir);
        char line[PATH_MAX + 2];
        snprintf(line, sizeof(line), "%s\n", f.origin);
        write_file(p, line, strlen(line), 0640);
        /* The key: the file's key_file (relative to the file), else DIR/cluster.key, made now. */
        char key[PATH_MAX];
        if (f.t->key_file && f.t->key_file[0] == '/') {
                snprintf(key, sizeof(key), "%s", f.t->key_file);
        } else if (f.t->key_file) {
                char tmp[PATH_MAX];
                snprintf(tmp, sizeof(tmp), "%s", f.origin);
                snprintf(key, sizeof(key), "%s/%s", dirname(tmp), f.t->key_file);
        } else {
                snprintf(key, sizeof(key), "%s/cluster.key", f.dir);
                if (access(key, F_OK) && ntbf__key_generate(key, why, sizeof(why))) {
                        cli_error("%s", why);
                        fab_close(&f);
                        return EXIT_FAIL;
                }
        }
        uint8_t k[NTBF_KEY_BYTES];
        if (ntbf__key_read(key, k, why, sizeof(why))) {
                cli_error("%s", why);
                fab_close(&f);
                return EXIT_FAIL;
        }
        static const char *const d_rel[] = {"ntbfabd", "../daemon/ntbfabd", "../sbin/ntbfabd",
                                            NULL};
        char helper[PATH_MAX], daemon[PATH_MAX], hname[64] = "";
        if ((be->helper && find_helper(be->helper, helper, sizeof(helper), hname, sizeof(hname))) ||
            find_program("NTBFAB_DAEMON", "ntbfabd", d_rel, daemon, sizeof(daemon))) {
                fab_close(&f);
                return EXIT_FAIL;
        }
        /* Start what is not running: up is idempotent. */
        int started = 0, helper_pid = 0;
        if (be->helper && !fab_pid(f.dir, hname)) {
                char *a[] = {helper, "--config", f.file, "--dir", f.dir, "--quiet", NULL};
                snprintf(p, sizeof(p), "%s/log/%s.log", f.dir, hname);
                int pid = spawn(a, p);
                if (pid > 0) {
                        char pp[PATH_MAX], s[32];
                        snprintf(pp, sizeof(pp), "%s/run/%s.pid", f.dir, hname);
                        snprintf(s, sizeof(s), "%d\n", pid);
                        write_file(pp, s, strlen(s), 0640);
                        helper_pid = pid;
                        started++;
                }
        }
        int *pids = calloc(f.t->nnodes, sizeof(int));
        for (uint32_t n = 0; n < f.t->nnodes; n++) {
                const char *name = f.t->nodes[n].name;
                if ((pids[n] = fab_pid(f.dir, name)))
                        continue;
                char *a[] = {daemon, "--config", f.file, "--node",  (char *)name, "--dir",
                             f.dir,  "--key",    key,    "--quiet", NULL};
                snprintf(p, sizeof(p), "%s/log/%s.err", f.dir, name);
                pids[n] = -spawn(a, p); /* negative: started now, pid file not written yet */
                started++;
        }
        /* Wait until every daemon answers and sees the manager, and every process this up
         * started is still alive: only then is the cluster up. */
        struct progress pg;
        progress_start(&pg, !o.json);
        uint64_t deadline = now_ms() + UP_WAIT_MS;
        bool all = false;
        char failure[3 * PATH_MAX] = "";
        while (!all && !failure[0] && now_ms() < deadline) {
                all = true;
                uint32_t ready = 0;
                if (helper_pid && !ntbf__pid_alive(helper_pid)) {
                        snprintf(p, sizeof(p), "%s/log/%s.log", f.dir, hname);
                        last_line(p, line, sizeof(line));
                        snprintf(failure, sizeof(failure), "%s stopped: %.1000s (see %.1000s)",
                                 be->helper, line, p);
                        break;
                }
                for (uint32_t n = 0; n < f.t->nnodes && !failure[0]; n++) {
                        int st;
                        if (pids[n] < 0 && waitpid(-pids[n], &st, WNOHANG) == -pids[n]) {
                                snprintf(p, sizeof(p), "%s/log/%s.err", f.dir, f.t->nodes[n].name);
                                last_line(p, line, sizeof(line));
                                snprintf(failure, sizeof(failure),
                                         "the daemon of node '%s' stopped: %.1000s (see %.1000s)",
                                         f.t->nodes[n].name, line, p);
                                pids[n] = 0; /* reaped: nothing to stop */
                                break;
                        }
                        struct json_object *res = NULL;
                        if (fab_call_quiet(&f, f.t->nodes[n].name, "node.status", NULL, &res, why,
                                           sizeof(why)) ||
                            !jb(res, "manager_reachable"))
                                all = false;
                        else
                                ready++;
                        json_object_put(res);
                }
                progress_show(&pg, "starting cluster '%s': %u of %u daemons ready", f.t->name,
                              ready, f.t->nnodes);
                if (!all && !failure[0])
                        nap_ms(50);
        }
        /* Every daemon and the device host: alive now, by their pid files. */
        for (uint32_t n = 0; all && !failure[0] && n < f.t->nnodes; n++)
                if (!fab_pid(f.dir, f.t->nodes[n].name))
                        snprintf(failure, sizeof(failure),
                                 "the daemon of node '%s' is not running (see %s/log/%s.err)",
                                 f.t->nodes[n].name, f.dir, f.t->nodes[n].name);
        if (all && !failure[0] && be->helper && !fab_pid(f.dir, hname))
                snprintf(failure, sizeof(failure), "%s is not running (see %s/log/%s.log)",
                         be->helper, f.dir, hname);
        if (!all && !failure[0])
                snprintf(failure, sizeof(failure),
                         "the cluster did not come up within %d s; see the logs in %s/log",
                         UP_WAIT_MS / 1000, f.dir);
        progress_end(&pg);
        if (failure[0]) {
                up_failed(&f, failure, helper_pid, pids);
                free(pids);
                fab_close(&f);
                return EXIT_FAIL;
        }
        free(pids);
        struct json_object *status = NULL;
        if (fab_call_any(&f, "cluster.status", NULL, &status)) {
                fab_close(&f);
                return EXIT_FAIL;
        }
        if (o.json) {
                struct json_object *out = json_object_new_object(),
                                   *nodes = json_object_new_array();
                json_object_object_add(out, "cluster", json_str(f.t->name));
                json_object_object_add(out, "dir", json_str(f.dir));
                json_object_object_add(out, "file", json_str(f.origin));
                json_object_object_add(out, "started", json_object_new_int(started));
                for (uint32_t n = 0; n < f.t->nnodes; n++) {
                        struct json_object *j = json_object_new_object();
                        json_object_object_add(j, "node", json_str(f.t->nodes[n].name));
                        json_object_object_add(j, "id", json_u64(f.t->nodes[n].id));
                        json_object_object_add(j, "address", json_str(f.t->nodes[n].address));
                        json_object_object_add(
                            j, "pid", json_u64((uint64_t)fab_pid(f.dir, f.t->nodes[n].name)));
                        json_object_object_add(j, "manager",
                                               json_object_new_boolean(n == f.manager));
                        json_object_array_add(nodes, j);
                }
                json_object_object_add(out, "nodes", nodes);
                json_object_object_add(out, "links", json_object_get(jo(status, "links")));
                json_object_object_add(out, "devices", json_object_get(jo(status, "devices")));
                json_print(out);
        } else {
                if (!started)
                        printf("already up: nothing to start\n");
                print_cluster(&f, status);
        }
        json_object_put(status);
        fab_close(&f);
        return EXIT_OK;
}

/* ---- down ---------------------------------------------------------------------------------- */

/* SIGTERM, wait, SIGKILL past the deadline. Returns whether it had to kill. */
static bool stop_pid(int pid, unsigned ms)
{
        if (pid <= 0)
                return false;
        kill(pid, SIGTERM);
        uint64_t end = now_ms() + ms;
        while (ntbf__pid_alive(pid) && now_ms() < end)
                nap_ms(20);
        if (!ntbf__pid_alive(pid))
                return false;
        kill(pid, SIGKILL);
        while (ntbf__pid_alive(pid))
                nap_ms(10);
        return true;
}

/* The short name of the cluster's backend helper ("simd": its pid file and log); false if
 * its backend has none. */
static bool helper_short(const struct fab *f, char *out, size_t len)
{
        const struct ntbf_backend_entry *be = ntbf_backend_entry(f->t->backend);
        if (!be || !be->helper)
                return false;
        snprintf(out, len, "%s", strncmp(be->helper, "ntbfab-", 7) ? be->helper : be->helper + 7);
        return true;
}

/* Whether pid is a daemon or the backend's helper of the cluster (stopped in their order). */
static bool is_cluster_daemon(const struct fab *f, int pid)
{
        for (uint32_t n = 0; n < f->t->nnodes; n++)
                if (fab_pid(f->dir, f->t->nodes[n].name) == pid)
                        return true;
        char h[64];
        return helper_short(f, h, sizeof(h)) && fab_pid(f->dir, h) == pid;
}

/* The command name of pid (its comm), for messages. */
static void proc_comm(int pid, char *out, size_t len)
{
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/comm", pid);
        FILE *f = fopen(p, "r");
        out[0] = 0;
        if (f) {
                if (!fgets(out, (int)len, f))
                        out[0] = 0;
                fclose(f);
        }
        out[strcspn(out, "\n")] = 0;
        if (!out[0])
                snprintf(out, len, "pid %d", pid);
}

/* Processes other than this one that map a file of dir (the simulated fabric's memory). */
static size_t attached_pids(const char *dir, int *out, size_t max)
{
        char prefix[PATH_MAX + 2], real[PATH_MAX];
        snprintf(prefix, sizeof(prefix), "%s/", realpath(dir, real) ? real : dir);
        size_t n = 0;
        DIR *d = opendir("/proc");
        struct dirent *e;
        while (d && n < max && (e = readdir(d))) {
                int pid = atoi(e->d_name);
                if (pid <= 0 || pid == getpid())
                        continue;
                char p[64], line[PATH_MAX + 256];
                snprintf(p, sizeof(p), "/proc/%d/maps", pid);
                FILE *f = fopen(p, "r");
                bool hit = false;
                while (f && !hit && fgets(line, sizeof(line), f))
                        hit = strstr(line, prefix) != NULL;
                if (f)
                        fclose(f);
                if (hit && ntbf__pid_alive(pid))
                        out[n++] = pid;
        }
        if (d)
                closedir(d);
        return n;
}

static void rm_tree(const char *dir)
{
        char cmd[PATH_MAX + 32];
        /* Only directories this tool created: run/ and state/ of an instance. */
        DIR *d = opendir(dir);
        if (!d)
                return;
        struct dirent *e;
        while ((e = readdir(d))) {
                if (e->d_name[0] == '.')
                        continue;
                snprintf(cmd, sizeof(cmd), "%s/%s", dir, e->d_name);
                unlink(cmd);
        }
        closedir(d);
        rmdir(dir);
}

static int run_down(int argc, char **argv)
{
        const struct verb *v = find("down");
        struct fab_opts o = {0};
        int r = fab_parse(v, argc, argv, NULL, 0, &o, NULL, NULL);
        if (r)
                return r;
        if (optind != argc)
                return cli_usage(v, "down takes no arguments");
        struct fab f;
        if (fab_find(&o, &f))
                return EXIT_FAIL;
        if (!fab_need_dir(&f, "down")) {
                fab_close(&f);
                return EXIT_FAIL;
        }
        struct json_object *out = json_object_new_object(), *killed = json_object_new_array();
        struct progress pg;
        progress_start(&pg, !o.json);
        /* Every other process of the cluster first: whatever maps its fabric (programs
         * using libsisci or the device API, an ntbfab-nvme manager) would use a fabric that
         * is about to vanish; stopped while their daemons still run, they release what they
         * hold through them. */
        struct json_object *others = json_object_new_array();
        int att[256];
        size_t natt = attached_pids(f.dir, att, 256);
        for (size_t i = 0; i < natt; i++) {
                char comm[64];
                if (is_cluster_daemon(&f, att[i]))
                        continue;
                proc_comm(att[i], comm, sizeof(comm));
                progress_show(&pg, "stopping %s (pid %d), attached to the fabric", comm, att[i]);
                bool k = stop_pid(att[i], 5000);
                struct json_object *x = json_object_new_object();
                json_object_object_add(x, "pid", json_u64((uint64_t)att[i]));
                json_object_object_add(x, "command", json_str(comm));
                json_object_object_add(x, "killed", json_object_new_boolean(k));
                json_object_array_add(others, x);
        }
        /* The manager last: the others return their borrows to it as they stop. */
        for (uint32_t k = 0; k <= f.t->nnodes; k++) {
                uint32_t n = k < f.t->nnodes ? k : f.manager;
                if (k < f.t->nnodes && n == f.manager)
                        continue;
                if (k == f.t->nnodes && n == NTBF_NONE)
                        break;
                int pid = fab_pid(f.dir, f.t->nodes[n].name);
                if (pid)
                        progress_show(&pg, "stopping the daemon of '%s' (pid %d)",
                                      f.t->nodes[n].name, pid);
                if (stop_pid(pid, DOWN_WAIT_MS))
                        json_object_array_add(killed, json_str(f.t->nodes[n].name));
        }
        /* The backend's helper, then what its create made. */
        const struct ntbf_backend_entry *be = ntbf_backend_entry(f.t->backend);
        char hname[64];
        if (helper_short(&f, hname, sizeof(hname))) {
                progress_show(&pg, "stopping %s", be->helper);
                if (stop_pid(fab_pid(f.dir, hname), DOWN_WAIT_MS))
                        json_object_array_add(killed, json_str(hname));
        }
        progress_end(&pg);
        r = be && be->ops && be->ops->destroy ? be->ops->destroy(f.t, f.dir) : -ENOENT;
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/run", f.dir);
        rm_tree(p);
        snprintf(p, sizeof(p), "%s/state", f.dir);
        rm_tree(p);
        unlink(f.file);
        snprintf(p, sizeof(p), "%s/cluster.origin", f.dir);
        unlink(p);
        if (o.json) {
                json_object_object_add(out, "cluster", json_str(f.t->name));
                json_object_object_add(out, "dir", json_str(f.dir));
                json_object_object_add(out, "killed", killed);
                json_object_object_add(out, "stopped", others);
                json_print(out);
        } else {
                for (size_t i = 0; i < json_object_array_length(others); i++) {
                        struct json_object *x = json_object_array_get_idx(others, i);
                        printf("stopped %s (pid %" PRIu64 "), which was attached to the fabric%s\n",
                               js(x, "command"), ju(x, "pid"),
                               jb(x, "killed") ? " (SIGKILL after 5 s)" : "");
                }
                json_object_put(others);
                json_object_put(out);
                size_t nk = json_object_array_length(killed);
                if (nk)
                        printf("%zu process%s did not stop within %d s and %s killed\n", nk,
                               nk == 1 ? "" : "es", DOWN_WAIT_MS / 1000, nk == 1 ? "was" : "were");
                json_object_put(killed);
                printf("cluster '%s' is down (%s: images and logs kept)\n", f.t->name, f.dir);
        }
        fab_close(&f);
        if (r && r != -ENOENT) {
                cli_error("cannot remove the fabric in %s: %s", f.dir, ntbf_strerror(r));
                return EXIT_FAIL;
        }
        return EXIT_OK;
}

/* ---- status -------------------------------------------------------------------------------- */

static const char *szf(uint64_t v, char *buf)
{
        return fmt_size(v, buf, 32);
}

static int run_status(int argc, char **argv)
{
        const struct verb *v = find("status");
        struct fab_opts o = {0};
        int r = fab_parse(v, argc, argv, NULL, 0, &o, NULL, NULL);
        if (r)
                return r;
        if (optind != argc)
                return cli_usage(v, "status takes no arguments");
        struct fab f;
        if (fab_find(&o, &f))
                return EXIT_FAIL;
        struct json_object *cs = NULL, *nodes = json_object_new_object();
        char why[1024];
        /* The manager answers; a host's daemon asks it itself. */
        uint32_t asked = f.local != NTBF_NONE ? f.local : f.manager;
        int cr = fab_call_quiet(&f, f.t->nodes[asked].name, "cluster.status", NULL, &cs, why,
                                sizeof(why));
        for (uint32_t n = 0; n < f.t->nnodes; n++) {
                struct json_object *ns = NULL;
                char w2[1024];
                if (fab_call_quiet(&f, f.t->nodes[n].name, "node.status", NULL, &ns, w2,
                                   sizeof(w2)))
                        ns = NULL;
                json_object_object_add(nodes, f.t->nodes[n].name, ns);
        }
        if (o.json) {
                struct json_object *out = json_object_new_object();
                json_object_object_add(out, "dir", f.dir[0] ? json_str(f.dir) : NULL);
                json_object_object_add(out, "socket", f.sock[0] ? json_str(f.sock) : NULL);
                json_object_object_add(out, "cluster", cs);
                json_object_object_add(out, "cluster_error", cr ? json_str(why) : NULL);
                json_object_object_add(out, "nodes", nodes);
                json_print(out);
                fab_close(&f);
                return cr ? EXIT_FAIL : EXIT_OK;
        }
        if (f.dir[0])
                printf("cluster '%s' in %s%s%s\n", f.t->name, f.dir, f.origin[0] ? " from " : "",
                       f.origin);
        else
                printf("cluster '%s' of %s, through the daemon of '%s' at %s\n", f.t->name, f.file,
                       f.t->nodes[f.local].name, f.sock);
        struct table tb;
        static const char *const hn[] = {"node",      "id",      "daemon",    "manager",
                                         "heartbeat", "borrows", "programmed"};
        table_init(&tb, hn, 7);
        struct json_object *cnodes = jo(cs, "nodes");
        for (uint32_t n = 0; n < f.t->nnodes; n++) {
                struct json_object *ns = jo(nodes, f.t->nodes[n].name), *cn = NULL;
                for (size_t i = 0; cnodes && i < json_object_array_length(cnodes); i++) {
                        struct json_object *x = json_object_array_get_idx(cnodes, i);
                        if (js(x, "node") && !strcmp(js(x, "node"), f.t->nodes[n].name))
                                cn = x;
                }
                table_cell(&tb, "%s", f.t->nodes[n].name);
                table_cell(&tb, "%u", f.t->nodes[n].id);
                if (ns)
                        table_cell(&tb, "up (pid %" PRIu64 ")", ju(ns, "pid"));
                else
                        table_cell(&tb, "down");
                table_cell(&tb, "%s",
                           n == f.manager                      ? "yes"
                           : ns && jb(ns, "manager_reachable") ? "reachable"
                                                               : "unreachable");
                if (cn && n != f.manager)
                        table_cell(&tb, "%s%" PRIu64 " ms ago",
                                   jb(cn, "lease_expired") ? "lease expired, " : "",
                                   ju(cn, "last_heartbeat_ms"));
                else
                        table_cell(&tb, "-");
                table_cell(&tb, "%" PRIu64, ns ? ju(ns, "borrows") : 0);
                table_cell(&tb, "%" PRIu64, ns ? ju(ns, "programmed") : 0);
        }
        printf("\nnodes:\n");
        table_print(&tb, stdout, 2);
        table_free(&tb);
        if (cr) {
                cli_error("%s", why);
                json_object_put(nodes);
                fab_close(&f);
                return EXIT_FAIL;
        }
        static const char *const hl[] = {"link", "state"};
        table_init(&tb, hl, 2);
        struct json_object *links = jo(cs, "links");
        for (size_t i = 0; links && i < json_object_array_length(links); i++) {
                struct json_object *l = json_object_array_get_idx(links, i), *e = jo(l, "ends");
                table_cell(&tb, "%s - %s", json_object_get_string(json_object_array_get_idx(e, 0)),
                           json_object_get_string(json_object_array_get_idx(e, 1)));
                struct json_object *up = jo(l, "up");
                table_cell(&tb, "%s", !up ? "?" : json_object_get_boolean(up) ? "up" : "down");
        }
        printf("\nlinks:\n");
        table_print(&tb, stdout, 2);
        table_free(&tb);
        static const char *const hb[] = {"object", "budget", "used", "total", "CPUs", "free"};
        table_init(&tb, hb, 6);
        for (unsigned c = 2; c < 6; c++)
                table_right(&tb, c);
        struct json_object *bud = jo(cs, "budgets");
        for (size_t i = 0; bud && i < json_object_array_length(bud); i++) {
                struct json_object *b = json_object_array_get_idx(bud, i);
                const char *k = js(b, "budget");
                bool bytes = !strcmp(k, "window");
                bool range = !strcmp(k, "range");
                char a[32], c[32], d[32], e[32];
                table_cell(&tb, "%s", js(b, "object"));
                table_cell(&tb, "%s%s", k, !strcmp(k, "switch-rid") ? " (each port)" : "");
                if (range) {
                        table_cell(&tb, "%s", fmt_size_approx(ju(b, "used"), a, 32));
                        table_cell(&tb, "%s", fmt_size_approx(ju(b, "total"), c, 32));
                        table_cell(&tb, "%s", fmt_size_approx(ju(b, "baseline"), d, 32));
                        table_cell(&tb, "%s", fmt_size_approx(ju(b, "free"), e, 32));
                } else if (bytes) {
                        table_cell(&tb, "%s", szf(ju(b, "used"), a));
                        table_cell(&tb, "%s", szf(ju(b, "total"), c));
                        table_cell(&tb, "%s", szf(ju(b, "baseline"), d));
                        table_cell(&tb, "%s", szf(ju(b, "free"), e));
                } else {
                        table_cell(&tb, "%" PRIu64, ju(b, "used"));
                        table_cell(&tb, "%" PRIu64, ju(b, "total"));
                        table_cell(&tb, "%" PRIu64, ju(b, "baseline"));
                        table_cell(&tb, "%" PRIu64, ju(b, "free"));
                }
        }
        printf("\nbudgets:\n");
        table_print(&tb, stdout, 2);
        table_free(&tb);
        static const char *const hd[] = {"fdid", "device", "bdf", "state", "borrowers"};
        table_init(&tb, hd, 5);
        struct json_object *devs = jo(cs, "devices");
        for (size_t i = 0; devs && i < json_object_array_length(devs); i++) {
                struct json_object *d = json_object_array_get_idx(devs, i),
                                   *bs = jo(d, "borrowers");
                char who[256] = "";
                size_t ow = 0;
                for (size_t k = 0; bs && k < json_object_array_length(bs) && ow < sizeof(who); k++)
                        ow += (size_t)snprintf(
                            who + ow, sizeof(who) - ow, "%s%s", k ? ", " : "",
                            json_object_get_string(json_object_array_get_idx(bs, k)));
                table_cell(&tb, "0x%04" PRIx64, ju(d, "fdid"));
                table_cell(&tb, "%s.%s", js(d, "node"), js(d, "name"));
                table_cell(&tb, "%s", js(d, "bdf"));
                table_cell(&tb, "%s", js(d, "state"));
                table_cell(&tb, "%s", who[0] ? who : "-");
        }
        printf("\ndevices:\n");
        table_print(&tb, stdout, 2);
        table_free(&tb);
        struct json_object *bor = jo(cs, "borrows");
        if (bor && json_object_array_length(bor)) {
                static const char *const hw[] = {"fdid", "device",     "borrower",
                                                 "mode", "DMA window", "lease"};
                table_init(&tb, hw, 6);
                for (size_t i = 0; i < json_object_array_length(bor); i++) {
                        struct json_object *b = json_object_array_get_idx(bor, i);
                        char a[32];
                        table_cell(&tb, "0x%04" PRIx64, ju(b, "fdid"));
                        table_cell(&tb, "%s.%s", js(b, "lender"), js(b, "name"));
                        table_cell(&tb, "%s", js(b, "borrower"));
                        table_cell(&tb, "%s", js(b, "mode"));
                        table_cell(&tb, "%s", szf(ju(b, "dma_window"), a));
                        table_cell(&tb, "%" PRIu64 " ms", ju(b, "lease_ms"));
                }
                printf("\nborrows (leases renewed by heartbeats):\n");
                table_print(&tb, stdout, 2);
                table_free(&tb);
        }
        static const char *const hc[] = {"adapter",      "tx",           "rx",
                                         "no RID",       "unprogrammed", "link down",
                                         "master abort", "IOMMU fault"};
        table_init(&tb, hc, 8);
        for (unsigned c = 1; c < 8; c++)
                table_right(&tb, c);
        static const char *const ck[] = {
            "tx",           "rx",         "drop_no_rid", "drop_unprogrammed", "drop_link_down",
            "master_abort", "iommu_fault"};
        for (uint32_t n = 0; n < f.t->nnodes; n++) {
                struct json_object *ads = jo(jo(nodes, f.t->nodes[n].name), "adapters");
                for (size_t i = 0; ads && i < json_object_array_length(ads); i++) {
                        struct json_object *a = json_object_array_get_idx(ads, i),
                                           *c = jo(a, "counters");
                        table_cell(&tb, "%s", js(a, "name"));
                        /* null: the adapter's backend counts nothing (no NTBF_CAP_COUNTERS). */
                        for (int k = 0; k < 7; k++)
                                if (c)
                                        table_cell(&tb, "%" PRIu64, ju(c, ck[k]));
                                else
                                        table_cell(&tb, "-");
                }
        }
        printf("\ncounters (transactions routed, and drops by reason):\n");
        table_print(&tb, stdout, 2);
        table_free(&tb);
        json_object_put(cs);
        json_object_put(nodes);
        fab_close(&f);
        return EXIT_OK;
}

/* ---- fault --------------------------------------------------------------------------------- */

/* "NODE.ADAPTER[.PORT]" to an adapter port. */
static int parse_port(const struct ntbf_topo *t, const char *s, uint32_t *adapter, uint32_t *port)
{
        char buf[128], *dot, *dot2;
        snprintf(buf, sizeof(buf), "%s", s);
        if (!(dot = strchr(buf, '.')))
                return -EINVAL;
        *dot = 0;
        *port = 0;
        if ((dot2 = strchr(dot + 1, '.'))) {
                *dot2 = 0;
                uint64_t p;
                if (ntbf_uint_parse(dot2 + 1, &p) || p >= NTBF_MAX_ADAPTER_PORTS)
                        return -EINVAL;
                *port = (uint32_t)p;
        }
        uint32_t n = ntbf_topo_find_node(t, buf);
        if (n == NTBF_NONE)
                return -EINVAL;
        *adapter = ntbf_topo_find_adapter(t, n, dot + 1);
        return *adapter == NTBF_NONE ? -EINVAL : 0;
}

static int run_fault(int argc, char **argv)
{
        const struct verb *v = find("fault");
        struct fab_opts o = {0};
        int r = fab_parse(v, argc, argv, NULL, 0, &o, NULL, NULL);
        if (r)
                return r;
        if (optind + 2 != argc)
                return cli_usage(v, "give a fault and what it hits");
        const char *kind = argv[optind], *what = argv[optind + 1];
        static const char *const kinds[] = {"link-down", "link-up",   "reset",
                                            "kill",      "host-down", "host-up"};
        int k = -1;
        for (int i = 0; i < 6; i++)
                if (!strcmp(kind, kinds[i]))
                        k = i;
        if (k < 0)
                return cli_usage(v, "unknown fault '%s'", kind);
        struct fab f;
        if (fab_find(&o, &f))
                return EXIT_FAIL;
        if (!fab_need_dir(&f, "fault")) {
                fab_close(&f);
                return EXIT_FAIL;
        }
        struct ntbf_fault ft = {0};
        uint32_t ad = 0, port = 0, node = NTBF_NONE;
        if (k <= 2) {
                if (parse_port(f.t, what, &ad, &port)) {
                        fab_close(&f);
                        return cli_usage(v,
                                         "'%s' names no adapter port; write NODE.ADAPTER or "
                                         "NODE.ADAPTER.PORT",
                                         what);
                }
        } else if ((node = fab_node(&f, what)) == NTBF_NONE) {
                fab_close(&f);
                return EXIT_USAGE;
        }
        if (k == 3) {
                int pid = fab_pid(f.dir, what);
                if (!pid) {
                        cli_error("no daemon of node '%s' runs in %s", what, f.dir);
                        fab_close(&f);
                        return EXIT_FAIL;
                }
                kill(pid, SIGKILL);
                while (ntbf__pid_alive(pid))
                        nap_ms(5);
                if (o.json) {
                        struct json_object *out = json_object_new_object();
                        json_object_object_add(out, "fault", json_str(kind));
                        json_object_object_add(out, "node", json_str(what));
                        json_object_object_add(out, "pid", json_u64((uint64_t)pid));
                        json_print(out);
                } else {
                        printf("killed the daemon of '%s' (pid %d); 'ntbfab up %s' starts it "
                               "again\n",
                               what, pid, f.origin[0] ? f.origin : "FILE");
                }
                fab_close(&f);
                return EXIT_OK;
        }
        if (k <= 1) {
                uint32_t l = f.t->adapters[ad].link[port];
                if (l == NTBF_NONE) {
                        cli_error("%s has no cable on port %u", what, port);
                        fab_close(&f);
                        return EXIT_FAIL;
                }
                ft = (struct ntbf_fault){k == 0 ? NTBF_FAULT_LINK_DOWN : NTBF_FAULT_LINK_UP, l};
        } else if (k == 2) {
                ft = (struct ntbf_fault){NTBF_FAULT_ADAPTER_RESET, ad};
        } else {
                ft = (struct ntbf_fault){k == 4 ? NTBF_FAULT_HOST_DEATH : NTBF_FAULT_HOST_REVIVE,
                                         node};
        }
        /* Through the backend's fault op: a backend that cannot inject faults says so. */
        struct ntbf_backend_env env = {f.t, f.dir, NTBF_NONE};
        struct ntbf_backend *b;
        char why[1024] = "";
        const struct ntbf_backend_ops *ops = ntbf_backend_open_ops(f.t->backend, why, sizeof(why));
        if (!ops) {
                r = NTBF_EUNSUPPORTED;
        } else if (!ops->fault) {
                snprintf(why, sizeof(why), "the '%s' backend cannot inject faults (no fault op)",
                         ops->name);
                r = NTBF_EUNSUPPORTED;
        } else if ((r = ops->open(&env, &b, why, sizeof(why))) && !why[0]) {
                snprintf(why, sizeof(why), "cannot open the %s backend in %.700s: %s", ops->name,
                         f.dir, ntbf_strerror(r));
        }
        if (!r) {
                r = ops->fault(b, &ft);
                ops->close(b);
                if (r)
                        snprintf(why, sizeof(why), "the fault was refused: %s", ntbf_strerror(r));
        }
        if (r) {
                cli_error("%s", why);
                fab_close(&f);
                return EXIT_FAIL;
        }
        if (o.json) {
                struct json_object *out = json_object_new_object();
                json_object_object_add(out, "fault", json_str(kind));
                json_object_object_add(out, "target", json_str(what));
                json_print(out);
        } else {
                printf("%s: %s\n", kind, what);
        }
        fab_close(&f);
        return EXIT_OK;
}

/* ---- keygen -------------------------------------------------------------------------------- */

static int run_keygen(int argc, char **argv)
{
        const struct verb *v = find("keygen");
        struct fab_opts o = {0};
        int r = fab_parse(v, argc, argv, NULL, 0, &o, NULL, NULL);
        if (r)
                return r;
        if (optind + 1 != argc)
                return cli_usage(v, "give the key file to create");
        char why[1024];
        if (ntbf__key_generate(argv[optind], why, sizeof(why))) {
                cli_error("%s", why);
                return EXIT_FAIL;
        }
        if (o.json) {
                struct json_object *out = json_object_new_object();
                json_object_object_add(out, "file", json_str(argv[optind]));
                json_object_object_add(out, "bytes", json_u64(NTBF_KEY_BYTES));
                json_object_object_add(out, "mode", json_str("0600"));
                json_print(out);
        } else {
                printf("%s: a new cluster key (32 random bytes, mode 0600); name it with "
                       "'cluster: {key_file: ...}' or ntbfabd --key, and give every node the "
                       "same file\n",
                       argv[optind]);
        }
        return EXIT_OK;
}

const struct verb verbs_cluster[] = {
    {"up", "[--json] [--dir DIR] FILE",
     "Start a cluster on this machine: fabric, device host, daemons.",
     "\nCreates the fabric of FILE in DIR (default /dev/shm/ntbfab-<uid>-<cluster>) with its\n"
     "backend's create (the sim, or ivshmem with a file as the region), starts the backend's\n"
     "helper (ntbfab-simd, the sim's device host) and one ntbfabd per node in the background\n"
     "(their logs in DIR/log),\n"
     "waits until every daemon answers and reaches the fabric manager, and shows the nodes,\n"
     "links and lendable devices with their fdids. Running it again starts only what is not\n"
     "running. It refuses when another cluster is up in DIR.\n",
     run_up},
    {"down", "[--json] [--dir DIR]", "Stop a cluster started by up and remove its fabric.",
     "\nStops every daemon (borrows are returned, the fabric manager last), then the device\n"
     "host, and removes the fabric. NVMe images and logs stay in DIR.\n",
     run_down},
    {"status", "[--json] [--dir DIR]",
     "Show nodes, links, budgets, devices, borrows and error counters.",
     "\nAsked of the fabric manager (cluster-wide) and of every node's daemon (counters).\n",
     run_status},
    {"fault", "[--json] [--dir DIR] KIND TARGET", "Inject a fault into a simulated cluster.",
     "\nKINDs:\n"
     "  link-down NODE.ADAPTER[.PORT]   take the cable at that port down\n"
     "  link-up NODE.ADAPTER[.PORT]     bring it back\n"
     "  reset NODE.ADAPTER              reset the adapter (its translations are lost)\n"
     "  kill NODE                       SIGKILL the node's daemon ('ntbfab up' restarts it)\n"
     "  host-down NODE, host-up NODE    the host dies (links down, memory lost) / reboots\n",
     run_fault},
    {"keygen", "[--json] FILE", "Create a cluster key file (32 random bytes, mode 0600).",
     "\nNever overwrites an existing file. Daemons refuse a key file that group or others can\n"
     "read or write.\n",
     run_keygen},
};
const size_t verbs_cluster_count = sizeof(verbs_cluster) / sizeof(verbs_cluster[0]);

static const struct verb *find(const char *name)
{
        for (size_t i = 0; i < verbs_cluster_count; i++)
                if (!strcmp(verbs_cluster[i].name, name))
                        return &verbs_cluster[i];
        return NULL;
}
