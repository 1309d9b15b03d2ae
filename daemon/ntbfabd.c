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
#include "vfio.h"
#include "log.h"
#include "ntbfab/config.h"
#include "ntbfab/error.h"

#ifndef NTBF_VERSION
#define NTBF_VERSION "0"
#endif

static void usage(FILE *f)
{
        fprintf(f,
                "usage: ntbfabd --config FILE --node NAME [--dir DIR] [--key FILE]\n"
                "               [--log-level error|warn|info|debug] [--quiet]\n"
                "The ntbfab node daemon: owns NAME's adapters, lends its devices, borrows for\n"
                "local clients (JSON-RPC on DIR/run/NAME.sock) and talks to the other nodes'\n"
                "daemons (authenticated TCP on the addresses of the cluster file).\n"
                "  --dir DIR        instance directory (default /dev/shm/ntbfab-<uid>-<cluster>)\n"
                "  --key FILE       cluster key (default: cluster.key_file, else DIR/cluster.key)\n"
                "  --log-level L    least important messages logged (default info)\n"
                "  --quiet          log to DIR/log/NAME.log only, not to stderr\n");
}

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
        ntbf__node_shutdown(d);
}

/* ---- start-up ------------------------------------------------------------------------------ */

static int mkdirs(const char *dir, char *why, size_t whylen)
{
        static const char *const sub[] = {"", "/run", "/state", "/log"};
        for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
                char p[PATH_MAX];
                snprintf(p, sizeof(p), "%s%s", dir, sub[i]);
                if (mkdir(p, 0750) && errno != EEXIST) {
                        snprintf(why, whylen, "cannot create %.500s: %s", p, strerror(errno));
                        return -errno;
                }
        }
        return 0;
}

/* One daemon per node and instance: a lock the kernel drops if the daemon dies. */
static int take_lock(struct ntbf__d *d, const char *node, char *why, size_t whylen)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/run/%s.lock", d->dir, node);
        d->lock_fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
        /* A predecessor that was just killed may still be exiting: give it a moment. */
        int tries = 0;
        while (d->lock_fd >= 0 && flock(d->lock_fd, LOCK_EX | LOCK_NB) && tries++ < 100)
                usleep(20000);
        if (d->lock_fd < 0 || tries > 100) {
                char pidp[PATH_MAX];
                int pid = 0;
                snprintf(pidp, sizeof(pidp), "%s/run/%s.pid", d->dir, node);
                FILE *f = fopen(pidp, "r");
                if (f) {
                        if (fscanf(f, "%d", &pid) != 1)
                                pid = 0;
                        fclose(f);
                }
                snprintf(why, whylen,
                         "another ntbfabd (pid %d) already serves node '%s' in %.500s; stop it "
                         "first (ntbfab down)",
                         pid, node, d->dir);
                return NTBF_EBUSY;
        }
        return 0;
}

static void write_pid(struct ntbf__d *d)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/run/%s.pid", d->dir, d->t->nodes[d->self].name);
        FILE *f = fopen(p, "w");
        if (f) {
                fprintf(f, "%d\n", (int)getpid());
                fclose(f);
        }
}

static void remove_pid(struct ntbf__d *d)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/run/%s.pid", d->dir, d->t->nodes[d->self].name);
        unlink(p);
}

/* The key file: --key, else the cluster file's key_file (relative to the file), else DIR's. */
static void key_path(struct ntbf__d *d, const char *key, const char *config, char *out, size_t len)
{
        if (key) {
                snprintf(out, len, "%s", key);
        } else if (d->t->key_file && d->t->key_file[0] == '/') {
                snprintf(out, len, "%s", d->t->key_file);
        } else if (d->t->key_file) {
                char tmp[PATH_MAX];
                snprintf(tmp, sizeof(tmp), "%s", config);
                snprintf(out, len, "%s/%s", dirname(tmp), d->t->key_file);
        } else {
                snprintf(out, len, "%s/cluster.key", d->dir);
        }
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

static int start(struct ntbf__d *d, const char *config, const char *node, const char *dir,
                 const char *key, enum ntbf__log_level level, bool quiet, char *why, size_t whylen)
{
        struct ntbf_diags diags;
        ntbf_diags_init(&diags);
        int r = ntbf_config_load(config, &d->t, &diags);
        ntbf_diags_sort(&diags);
        ntbf_diags_print(&diags, stderr);
        ntbf_diags_free(&diags);
        if (r) {
                snprintf(why, whylen, "cannot load %s: %s", config, ntbf_strerror(r));
                return r;
        }
        d->self = ntbf_topo_find_node(d->t, node);
        if (d->self == NTBF_NONE) {
                snprintf(why, whylen, "%s has no node '%s'; name one of its nodes with --node",
                         config, node);
                return -EINVAL;
        }
        d->manager = pick_manager(d->t);
        char defdir[PATH_MAX / 2];
        snprintf(d->dir, sizeof(d->dir), "%s",
                 dir ? dir : ntbf_instance_dir_default(d->t, defdir, sizeof(defdir)));
        if ((r = mkdirs(d->dir, why, whylen)) || (r = take_lock(d, node, why, whylen)))
                return r;
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/log/%s.log", d->dir, node);
        if ((r = ntbf__log_open(node, p, level, !quiet))) {
                snprintf(why, whylen, "cannot open the log %.500s: %s", p, strerror(-r));
                return r;
        }
        LOG_I("ntbfabd %s starting: node '%s' of cluster '%s' in %s; fabric manager '%s'",
              NTBF_VERSION, node, d->t->name, d->dir, d->t->nodes[d->manager].name);
        key_path(d, key, config, p, sizeof(p));
        if ((r = ntbf__key_read(p, d->key, why, whylen)))
                return r;
        snprintf(p, sizeof(p), "%s/state/%s.db", d->dir, node);
        if ((r = ntbf__store_open(p, &d->st, why, whylen)))
                return r;
        if ((r = ntbf__hw_open(d, why, whylen)) || (r = ntbf__node_load(d, why, whylen)))
                return r;
        ntbf__vfiod_start(d);
        if ((r = ntbf__sx_new(d)))
                return r;
        snprintf(d->sock_path, sizeof(d->sock_path), "%s/run/%s.sock", d->dir, node);
        if ((r = ntbf__sock_listen(d, why, whylen)) || (r = ntbf__peers_start(d, why, whylen)))
                return r;
        if (d->self == d->manager) {
                struct ntbf__fm_net net = {d, fm_request, fm_notify, fm_now, fm_connected};
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
        write_pid(d);
        LOG_I("serving %s; %zu entr%s programmed from before", d->sock_path, d->programmed.n,
              d->programmed.n == 1 ? "y" : "ies");
        return 0;
}

int main(int argc, char **argv)
{
        const char *config = NULL, *node = NULL, *dir = NULL, *key = NULL;
        enum ntbf__log_level level = NTBF_LOG_INFO;
        bool quiet = false;
        static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                                 {"node", required_argument, NULL, 'n'},
                                                 {"dir", required_argument, NULL, 'd'},
                                                 {"key", required_argument, NULL, 'k'},
                                                 {"log-level", required_argument, NULL, 'l'},
                                                 {"quiet", no_argument, NULL, 'q'},
                                                 {"help", no_argument, NULL, 'h'},
                                                 {"version", no_argument, NULL, 'V'},
                                                 {NULL, 0, NULL, 0}};
        for (int c; (c = getopt_long(argc, argv, "", longopts, NULL)) != -1;) {
                switch (c) {
                case 'c':
                        config = optarg;
                        break;
                case 'n':
                        node = optarg;
                        break;
                case 'd':
                        dir = optarg;
                        break;
                case 'k':
                        key = optarg;
                        break;
                case 'l':
                        if (ntbf__log_level_parse(optarg, &level)) {
                                fprintf(stderr, "ntbfabd: --log-level takes error, warn, info or "
                                                "debug\n");
                                return 2;
                        }
                        break;
                case 'q':
                        quiet = true;
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
        if (!config || !node || optind != argc) {
                usage(stderr);
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);
        struct ntbf__d *d = calloc(1, sizeof(*d));
        if (!d)
                return 1;
        d->lock_fd = -1;
        d->loop = uv_default_loop();
        d->start_ms = ntbf__now_ms();
        char why[1024] = "";
        int r = start(d, config, node, dir, key, level, quiet, why, sizeof(why));
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
