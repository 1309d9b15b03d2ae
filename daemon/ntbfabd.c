/* daemon/ntbfabd.c: ntbfabd, the node daemon: options, start-up, the event loop, a clean stop. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "host.h"
#include "log.h"
#include "vfio.h"
#include "ntbfab/config.h"
#include "ntbfab/error.h"

#ifndef NTBF_VERSION
#define NTBF_VERSION "0"
#endif
/* A host's directories: the FHS places systemd's directory settings name too, whatever the
 * installation prefix (docs/operations.md). */
#define NTBF_CONFDIR  "/etc/ntbfab"
#define NTBF_STATEDIR "/var/lib/ntbfab"
#define NTBF_RUNDIR   "/run/ntbfab"
#define NTBF_LOGDIR   "/var/log/ntbfab"

static void usage(FILE *f)
{
        fprintf(
            f,
            "usage: ntbfabd [--config FILE] [--node NAME] [--dir DIR | --state-dir DIR\n"
            "               --runtime-dir DIR] [--key FILE] [--user USER[:GROUP]]\n"
            "               [--log stderr,syslog,file] [--log-file FILE]\n"
            "               [--log-level error|warn|info|debug] [--quiet]\n"
            "The ntbfab node daemon: owns its node's adapters, lends its devices, borrows for\n"
            "local clients (JSON-RPC on a Unix socket) and talks to the other nodes' daemons\n"
            "(authenticated TCP on the addresses of the cluster file). See ntbfabd(8).\n"
            "  --config FILE      cluster file (default $CONFIGURATION_DIRECTORY/cluster.yaml,\n"
            "                     else " NTBF_CONFDIR "/cluster.yaml)\n"
            "  --node NAME        the node this host is (default: the node whose address is\n"
            "                     one of this host's, or whose name is its host name)\n"
            "  --dir DIR          a simulated cluster's instance directory (ntbfab up): the\n"
            "                     socket, state and log in DIR/run, DIR/state, DIR/log\n"
            "  --state-dir DIR    the database (default $STATE_DIRECTORY, else " NTBF_STATEDIR ")\n"
            "  --runtime-dir DIR  socket, lock and pid file (default $RUNTIME_DIRECTORY, else\n"
            "                     " NTBF_RUNDIR ")\n"
            "  --key FILE         cluster key (default: cluster.key_file, else cluster.key\n"
            "                     beside the cluster file; DIR/cluster.key with --dir)\n"
            "  --user USER        run as USER once what needs root is open\n"
            "  --log SINKS        where log lines go: stderr (the journal under systemd),\n"
            "                     syslog, file; comma-separated (default stderr; with --dir\n"
            "                     file,stderr)\n"
            "  --log-file FILE    the file sink (default $LOGS_DIRECTORY/ntbfabd.log, else\n"
            "                     " NTBF_LOGDIR "/ntbfabd.log; with --dir DIR/log/NODE.log);\n"
            "                     reopened on SIGHUP\n"
            "  --log-level L      least important messages logged (default info)\n"
            "  --quiet            with --dir: log to the file only, not to stderr\n");
}

/* What the command line says (main) and how start() resolves it. */
struct opts {
        const char *config, *node, *dir, *state_dir, *run_dir, *key, *log_file, *user;
        unsigned sinks; /* 0: the default */
        enum ntbf__log_level level;
        bool quiet;
};

/* ---- the fabric manager's view of the network ------------------------------------------------ */

static void fm_request(void *ctx, uint32_t node, const char *m, struct json_object *p,
                       ntbf__done_fn cb, void *arg)
{
        ntbf__peer_request(ctx, node, m, p, cb, arg);
}

static void fm_notify(void *ctx, uint32_t node, const char *m, struct json_object *p)
{
        ntbf__peer_notify(ctx, node, m, p);
}

static uint64_t fm_now(void *ctx)
{
        (void)ctx;
        return ntbf__now_ms();
}

static bool fm_connected(void *ctx, uint32_t node)
{
        return ntbf__peer_connected(ctx, node);
}

static uint64_t fm_heard(void *ctx)
{
        return ntbf__heard_ms(ctx);
}

/* The manager's queue goes on in the loop's idle phase: after timers, before the next poll. */
static void fm_resume(uv_idle_t *h)
{
        struct ntbf__d *d = h->data;
        uv_idle_stop(h);
        d->fm_resume_fn(d->fm_resume_arg);
}

static void fm_defer(void *ctx, void (*fn)(void *), void *arg)
{
        struct ntbf__d *d = ctx;
        d->fm_resume_fn = fn;
        d->fm_resume_arg = arg;
        uv_idle_start(&d->fm_resume, fm_resume);
}

/* ---- timers and signals -------------------------------------------------------------------- */

static void beat(uv_timer_t *t)
{
        ntbf__peers_beat(t->data);
}

static void lease_tick(uv_timer_t *t)
{
        struct ntbf__d *d = t->data;
        if (d->fm)
                ntbf__fm_tick(d->fm);
}

static void on_signal(uv_signal_t *s, int sig)
{
        struct ntbf__d *d = s->data;
        LOG_I("%s: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
        ntbf__host_notify_stopping();
        ntbf__node_shutdown(d);
}

/* SIGHUP: logrotate moved the log file; open it again. */
static void on_hup(uv_signal_t *s, int sig)
{
        (void)s;
        (void)sig;
        int r = ntbf__log_reopen();
        if (r)
                LOG_E("SIGHUP: cannot reopen the log file: %s; logging to the old one",
                      strerror(-r));
        else
                LOG_I("SIGHUP: log file reopened");
        ntbf__host_notify_reloading();
}

/* ---- start-up ------------------------------------------------------------------------------ */

/* A systemd directory variable (RuntimeDirectory= and friends): the first of its paths. */
static const char *sd_dir(const char *var, char *buf, size_t len)
{
        const char *v = getenv(var);
        if (!v || !v[0])
                return NULL;
        snprintf(buf, len, "%.*s", (int)strcspn(v, ":"), v);
        return buf;
}

/* Create dir if missing (mode; missing parents 0755); give it to the user the daemon becomes. */
static int make_dir(const char *dir, mode_t mode, uid_t uid, gid_t gid, char *why, size_t whylen)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s", dir);
        for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
                *s = 0;
                if (mkdir(p, 0755) && errno != EEXIST)
                        break; /* the last mkdir says why */
                *s = '/';
        }
        if (mkdir(dir, mode) && errno != EEXIST) {
                snprintf(why, whylen, "cannot create %.500s: %s", dir, strerror(errno));
                return -errno;
        }
        if (uid != (uid_t)-1 && chown(dir, uid, gid)) {
                snprintf(why, whylen, "cannot give %.500s to uid %u: %s", dir, (unsigned)uid,
                         strerror(errno));
                return -errno;
        }
        return 0;
}

/*
 * One daemon per node and runtime directory: a lock the kernel drops if the daemon dies.
 * A predecessor that was just killed may still be exiting: wait up to 2 s for it.
 */
static int take_lock(struct ntbf__d *d, const char *node, char *why, size_t whylen)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s.lock", d->run_base);
        d->lock_fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
        int tries = 0;
        while (d->lock_fd >= 0 && flock(d->lock_fd, LOCK_EX | LOCK_NB) && tries++ < 100)
                usleep(20000);
        if (d->lock_fd < 0 || tries > 100) {
                char pidp[PATH_MAX];
                int pid = 0;
                snprintf(pidp, sizeof(pidp), "%s.pid", d->run_base);
                FILE *f = fopen(pidp, "r");
                if (f) {
                        if (fscanf(f, "%d", &pid) != 1)
                                pid = 0;
                        fclose(f);
                }
                snprintf(why, whylen,
                         "another ntbfabd (pid %d) already serves node '%s' in %.500s; stop it "
                         "first (ntbfab down, or systemctl stop ntbfabd)",
                         pid, node, d->run_dir);
                return NTBF_EBUSY;
        }
        return 0;
}

static void write_pid(struct ntbf__d *d)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s.pid", d->run_base);
        FILE *f = fopen(p, "w");
        if (f) {
                fprintf(f, "%d\n", (int)getpid());
                fclose(f);
        }
}

static void remove_pid(struct ntbf__d *d)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s.pid", d->run_base);
        unlink(p);
}

/*
 * The key file: --key, else the cluster file's key_file (relative to the file), else
 * DIR/cluster.key (a simulated cluster) or cluster.key beside the cluster file (a host).
 */
static void key_path(struct ntbf__d *d, const struct opts *o, char *out, size_t len)
{
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof(tmp), "%s", o->config);
        if (o->key)
                snprintf(out, len, "%s", o->key);
        else if (d->t->key_file && d->t->key_file[0] == '/')
                snprintf(out, len, "%s", d->t->key_file);
        else if (d->t->key_file)
                snprintf(out, len, "%s/%s", dirname(tmp), d->t->key_file);
        else if (o->dir)
                snprintf(out, len, "%s/cluster.key", o->dir);
        else
                snprintf(out, len, "%s/cluster.key", dirname(tmp));
}

static uint32_t pick_manager(const struct ntbf_topo *t)
{
        if (t->opts.manager[0])
                return ntbf_topo_find_node(t, t->opts.manager);
        uint32_t best = 0;
        for (uint32_t n = 1; n < t->nnodes; n++)
                if (t->nodes[n].id < t->nodes[best].id)
                        best = n;
        return best;
}

/* Whether the node has a real device (vfio: true): then the daemon binds drivers in sysfs. */
static bool has_real_devices(const struct ntbf__d *d)
{
        const struct ntbf_node *me = &d->t->nodes[d->self];
        for (uint32_t i = 0; i < me->ndevices; i++)
                if (d->t->devices[me->devices[i]].vfio)
                        return true;
        return false;
}

/* Where everything goes: an instance directory (--dir) or the host's directories. */
static int layout(struct ntbf__d *d, const struct opts *o, const char *node, char *why,
                  size_t whylen)
{
        char buf[PATH_MAX / 2];
        if (o->dir) {
                snprintf(d->dir, sizeof(d->dir), "%s", o->dir);
                snprintf(d->run_dir, sizeof(d->run_dir), "%s/run", o->dir);
                snprintf(d->state_dir, sizeof(d->state_dir), "%s/state", o->dir);
                snprintf(d->run_base, sizeof(d->run_base), "%s/%s", d->run_dir, node);
                snprintf(d->log_path, sizeof(d->log_path), "%s/log/%s.log", o->dir, node);
                return 0;
        }
        const char *run = o->run_dir ? o->run_dir : sd_dir("RUNTIME_DIRECTORY", buf, sizeof(buf));
        snprintf(d->run_dir, sizeof(d->run_dir), "%s", run ? run : NTBF_RUNDIR);
        const char *st = o->state_dir ? o->state_dir : sd_dir("STATE_DIRECTORY", buf, sizeof(buf));
        snprintf(d->state_dir, sizeof(d->state_dir), "%s", st ? st : NTBF_STATEDIR);
        snprintf(d->run_base, sizeof(d->run_base), "%s/ntbfabd", d->run_dir);
        const char *logs = sd_dir("LOGS_DIRECTORY", buf, sizeof(buf));
        snprintf(d->log_path, sizeof(d->log_path), "%s/ntbfabd.log", logs ? logs : NTBF_LOGDIR);
        /* The backend's directory: the simulated fabric's instance (shared with the other
         * hosts' daemons, docs/operations.md), else the runtime directory. */
        const char *sim = getenv("NTBFAB_SIM_DIR");
        if (!strcmp(d->t->backend, "sim"))
                snprintf(d->dir, sizeof(d->dir), "%s",
                         sim && sim[0] ? sim : ntbf_instance_dir_default(d->t, buf, sizeof(buf)));
        else
                snprintf(d->dir, sizeof(d->dir), "%s", d->run_dir);
        (void)why;
        (void)whylen;
        return 0;
}

static int start(struct ntbf__d *d, struct opts *o, char *why, size_t whylen)
{
        struct ntbf_diags diags;
        ntbf_diags_init(&diags);
        int r = ntbf_config_load(o->config, &d->t, &diags);
        ntbf_diags_sort(&diags);
        ntbf_diags_print(&diags, stderr);
        ntbf_diags_free(&diags);
        if (r) {
                snprintf(why, whylen, "cannot load %s: %s", o->config, ntbf_strerror(r));
                return r;
        }
        if (!realpath(o->config, d->config_path))
                snprintf(d->config_path, sizeof(d->config_path), "%s", o->config);
        if (o->node) {
                d->self = ntbf_topo_find_node(d->t, o->node);
                if (d->self == NTBF_NONE) {
                        snprintf(why, whylen,
                                 "%s has no node '%s'; name one of its nodes with --node",
                                 o->config, o->node);
                        return -EINVAL;
                }
        } else if ((r = ntbf__host_find_node(d->t, o->config, &d->self, why, whylen))) {
                return r;
        }
        const char *node = d->t->nodes[d->self].name;
        d->manager = pick_manager(d->t);
        uid_t uid = (uid_t)-1;
        gid_t gid = (gid_t)-1;
        if (o->user && (r = ntbf__host_lookup_user(o->user, &uid, &gid, why, whylen)))
                return r;
        if (!o->user || geteuid() != 0)
                uid = (uid_t)-1; /* nothing to hand over */
        unsigned sinks = o->sinks;
        if (!sinks)
                sinks = o->dir ? NTBF_LOG_FILE | (o->quiet ? 0 : NTBF_LOG_STDERR) : NTBF_LOG_STDERR;
        if ((r = layout(d, o, node, why, whylen)))
                return r;
        if (o->log_file)
                snprintf(d->log_path, sizeof(d->log_path), "%s", o->log_file);
        char p[PATH_MAX];
        if (o->dir && (r = make_dir(o->dir, 0750, uid, gid, why, whylen)))
                return r;
        /* The runtime directory is searchable by all: the socket's own mode and group say
         * who may connect (docs/rpc.md, "Access"). */
        if ((r = make_dir(d->run_dir, o->dir ? 0750 : 0755, uid, gid, why, whylen)) ||
            (r = make_dir(d->state_dir, 0750, uid, gid, why, whylen)))
                return r;
        if (sinks & NTBF_LOG_FILE) {
                snprintf(p, sizeof(p), "%s", d->log_path);
                if ((r = make_dir(dirname(p), 0750, uid, gid, why, whylen)))
                        return r;
        }
        if ((r = take_lock(d, node, why, whylen)))
                return r;
        if ((r = ntbf__log_open(node, sinks, d->log_path, o->level))) {
                snprintf(why, whylen, "cannot open the log %.500s: %s", d->log_path, strerror(-r));
                return r;
        }
        if ((sinks & NTBF_LOG_FILE) && uid != (uid_t)-1 && chown(d->log_path, uid, gid))
                LOG_W("cannot give %s to uid %u: %s", d->log_path, (unsigned)uid, strerror(errno));
        LOG_I("ntbfabd %s starting: node '%s' of cluster '%s' (%s); fabric manager '%s'",
              NTBF_VERSION, node, d->t->name, d->config_path, d->t->nodes[d->manager].name);
        key_path(d, o, p, sizeof(p));
        if ((r = ntbf__key_read(p, d->key, why, whylen)))
                return r;
        if ((r = ntbf__hw_open(d, why, whylen)))
                return r;
        /* Root was needed for the key, the directories and the adapters; what remains runs
         * as the user (docs/daemon.md, "Privileges"). */
        if (uid != (uid_t)-1) {
                bool dac = has_real_devices(d);
                if ((r = ntbf__host_drop(uid, gid, dac, why, whylen)))
                        return r;
                LOG_I("running as %s (uid %u)%s", o->user, (unsigned)uid,
                      dac ? " with CAP_DAC_OVERRIDE (real devices: sysfs driver binding, "
                            "/dev/vfio)"
                          : " without capabilities");
        }
        snprintf(p, sizeof(p), "%s/%s.db", d->state_dir, node);
        if ((r = ntbf__store_open(p, &d->st, why, whylen)) || (r = ntbf__node_load(d, why, whylen)))
                return r;
        ntbf__vfiod_start(d);
        if ((r = ntbf__sx_new(d)))
                return r;
        snprintf(d->sock_path, sizeof(d->sock_path), "%s.sock", d->run_base);
        if ((r = ntbf__sock_listen(d, why, whylen)) || (r = ntbf__peers_start(d, why, whylen)))
                return r;
        if (d->self == d->manager) {
                uv_idle_init(d->loop, &d->fm_resume);
                d->fm_resume.data = d;
                struct ntbf__fm_net net = {d,        fm_request, fm_notify, fm_now, fm_connected,
                                           fm_heard, fm_defer};
                if ((r = ntbf__fm_new(d->t, d->self, d->st, &net, &d->fm, why, whylen)))
                        return r;
                ntbf__node_join(d);  /* with itself, through the loop */
                ntbf__peers_beat(d); /* its own links, known at once */
        }
        uv_timer_init(d->loop, &d->beat);
        d->beat.data = d;
        uv_timer_start(&d->beat, beat, NTBF_HEARTBEAT_MS, NTBF_HEARTBEAT_MS);
        uv_timer_init(d->loop, &d->lease_tick);
        d->lease_tick.data = d;
        uv_timer_start(&d->lease_tick, lease_tick, 250, 250);
        uv_timer_init(d->loop, &d->shutdown_timer);
        d->shutdown_timer.data = d;
        uv_signal_init(d->loop, &d->sigterm);
        d->sigterm.data = d;
        uv_signal_start(&d->sigterm, on_signal, SIGTERM);
        uv_signal_init(d->loop, &d->sigint);
        d->sigint.data = d;
        uv_signal_start(&d->sigint, on_signal, SIGINT);
        uv_signal_init(d->loop, &d->sighup);
        d->sighup.data = d;
        uv_signal_start(&d->sighup, on_hup, SIGHUP);
        write_pid(d);
        LOG_I("serving %s; %zu entr%s programmed from before", d->sock_path, d->programmed.n,
              d->programmed.n == 1 ? "y" : "ies");
        snprintf(p, sizeof(p), "node '%s' of cluster '%s' on %.1000s", node, d->t->name,
                 d->sock_path);
        ntbf__host_notify_ready(p);
        return 0;
}

int main(int argc, char **argv)
{
        struct opts o = {.level = NTBF_LOG_INFO};
        static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                                 {"node", required_argument, NULL, 'n'},
                                                 {"dir", required_argument, NULL, 'd'},
                                                 {"state-dir", required_argument, NULL, 's'},
                                                 {"runtime-dir", required_argument, NULL, 'r'},
                                                 {"key", required_argument, NULL, 'k'},
                                                 {"user", required_argument, NULL, 'u'},
                                                 {"log", required_argument, NULL, 'L'},
                                                 {"log-file", required_argument, NULL, 'f'},
                                                 {"log-level", required_argument, NULL, 'l'},
                                                 {"quiet", no_argument, NULL, 'q'},
                                                 {"help", no_argument, NULL, 'h'},
                                                 {"version", no_argument, NULL, 'V'},
                                                 {NULL, 0, NULL, 0}};
        for (int c; (c = getopt_long(argc, argv, "", longopts, NULL)) != -1;) {
                switch (c) {
                case 'c':
                        o.config = optarg;
                        break;
                case 'n':
                        o.node = optarg;
                        break;
                case 'd':
                        o.dir = optarg;
                        break;
                case 's':
                        o.state_dir = optarg;
                        break;
                case 'r':
                        o.run_dir = optarg;
                        break;
                case 'k':
                        o.key = optarg;
                        break;
                case 'u':
                        o.user = optarg;
                        break;
                case 'L':
                        if (ntbf__log_sinks_parse(optarg, &o.sinks)) {
                                fprintf(stderr, "ntbfabd: --log takes stderr, syslog or file, or "
                                                "several of them separated by commas\n");
                                return 2;
                        }
                        break;
                case 'f':
                        o.log_file = optarg;
                        break;
                case 'l':
                        if (ntbf__log_level_parse(optarg, &o.level)) {
                                fprintf(stderr, "ntbfabd: --log-level takes error, warn, info or "
                                                "debug\n");
                                return 2;
                        }
                        break;
                case 'q':
                        o.quiet = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                case 'V':
                        printf("ntbfabd %s\n", NTBF_VERSION);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (optind != argc) {
                usage(stderr);
                return 2;
        }
        char defconf[PATH_MAX / 2], cd[PATH_MAX / 4];
        if (!o.config) {
                const char *c = sd_dir("CONFIGURATION_DIRECTORY", cd, sizeof(cd));
                snprintf(defconf, sizeof(defconf), "%s/cluster.yaml", c ? c : NTBF_CONFDIR);
                o.config = defconf;
        }
        if (o.dir && (o.state_dir || o.run_dir)) {
                fprintf(stderr, "ntbfabd: --dir holds the state and the socket itself; give "
                                "either --dir or --state-dir/--runtime-dir\n");
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);
        struct ntbf__d *d = calloc(1, sizeof(*d));
        if (!d)
                return 1;
        d->lock_fd = -1;
        d->loop = uv_default_loop();
        d->start_ms = ntbf__now_ms();
        ntbf__heard_start(d);
        char why[1024] = "";
        int r = start(d, &o, why, sizeof(why));
        if (r) {
                fprintf(stderr, "ntbfabd: %s\n", why[0] ? why : ntbf_strerror(r));
                ntbf__log(NTBF_LOG_ERROR, "cannot start: %s", why[0] ? why : ntbf_strerror(r));
                ntbf__d_finish(d);
        }
        uv_run(d->loop, UV_RUN_DEFAULT);
        uv_loop_close(d->loop);
        if (!r)
                remove_pid(d);
        ntbf__fm_free(d->fm);
        ntbf__sx_free(d);
        ntbf__kern_close(d); /* before VFIO: the module lets go of the exported groups */
        ntbf__vfiod_stop(d);
        while (d->handles) {
                struct ntbf__handle *h = d->handles;
                d->handles = h->next;
                free(h);
        }
        while (d->borrows) {
                struct ntbf__borrow *b = d->borrows;
                d->borrows = b->next;
                json_object_put(b->json);
                free(b);
        }
        while (d->lends) {
                struct ntbf__lend *l = d->lends;
                d->lends = l->next;
                free(l);
        }
        ntbf__entset_free(&d->programmed);
        ntbf__entset_free(&d->rec_add);
        ntbf__entset_free(&d->rec_del);
        ntbf__peers_free(d);
        ntbf__hw_close(d);
        ntbf__store_close(d->st);
        ntbf_topo_free(d->t);
        if (d->lock_fd >= 0)
                close(d->lock_fd);
        ntbf__log_close();
        free(d);
        return r ? 1 : 0;
}
