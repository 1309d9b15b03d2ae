/* tools/fabric.c: finding the running cluster, calling its daemons, options of the daemon verbs. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fabric.h"
#include "proc.h"
#include "ntbfab/config.h"
#include "ntbfab/error.h"

int fab_parse(const struct verb *v, int argc, char **argv, const struct option *extra,
              size_t nextra, struct fab_opts *o, int (*opt)(int c, const char *arg, void *ctx),
              void *ctx)
{
        struct option longs[16];
        size_t n = 0;
        longs[n++] = (struct option){"json", no_argument, NULL, 'j'};
        longs[n++] = (struct option){"dir", required_argument, NULL, 'D'};
        for (size_t i = 0; i < nextra && n < 15; i++)
                longs[n++] = extra[i];
        longs[n] = (struct option){0};
        optind = 1;
        opterr = 0;
        int c;
        while ((c = getopt_long(argc, argv, ":", longs, NULL)) != -1) {
                if (c == 'j') {
                        o->json = true;
                        continue;
                }
                if (c == 'D') {
                        o->dir = optarg;
                        continue;
                }
                if (c == '?' || c == ':') {
                        const char *bad = argv[optind - 1];
                        if (c == ':')
                                return cli_usage(v, "option '%s' needs a value", bad);
                        return cli_usage(v, "unknown option '%s'", bad);
                }
                int r = opt ? opt(c, optarg, ctx) : EXIT_USAGE;
                if (r)
                        return r;
        }
        return EXIT_OK;
}

uint64_t ju(struct json_object *o, const char *k)
{
        struct json_object *v;
        return o && json_object_object_get_ex(o, k, &v) ? json_object_get_uint64(v) : 0;
}

const char *js(struct json_object *o, const char *k)
{
        struct json_object *v;
        return o && json_object_object_get_ex(o, k, &v) && v ? json_object_get_string(v) : NULL;
}

bool jb(struct json_object *o, const char *k)
{
        struct json_object *v;
        return o && json_object_object_get_ex(o, k, &v) && json_object_get_boolean(v);
}

struct json_object *jo(struct json_object *o, const char *k)
{
        struct json_object *v;
        return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

int fab_pid(const char *dir, const char *name)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/run/%s.pid", dir, name);
        FILE *f = fopen(p, "r");
        int pid = 0;
        if (f) {
                if (fscanf(f, "%d", &pid) != 1)
                        pid = 0;
                fclose(f);
        }
        return ntbf__pid_alive(pid) ? pid : 0;
}

uint32_t fab_manager(const struct ntbf_topo *t)
{
        if (t->opts.manager[0])
                return ntbf_topo_find_node(t, t->opts.manager);
        uint32_t best = 0;
        for (uint32_t n = 1; n < t->nnodes; n++)
                if (t->nodes[n].id < t->nodes[best].id)
                        best = n;
        return best;
}

/* Whether dir holds a cluster `up` started with something still running there. */
bool fab_running(const char *dir)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/run", dir);
        DIR *d = opendir(p);
        if (!d)
                return false;
        struct dirent *e;
        bool any = false;
        while (!any && (e = readdir(d))) {
                size_t n = strlen(e->d_name);
                if (n < 5 || strcmp(e->d_name + n - 4, ".pid"))
                        continue;
                char name[256];
                snprintf(name, sizeof(name), "%.*s", (int)(n - 4), e->d_name);
                any = fab_pid(dir, name) > 0;
        }
        closedir(d);
        return any;
}

/* The cluster file a host's daemon loaded: NTBFAB_CONFIG, else what node.status says. */
static int find_by_socket(struct fab *f, const char *sock)
{
        snprintf(f->sock, sizeof(f->sock), "%s", sock);
        struct ntbf_rpc *c;
        struct json_object *st = NULL;
        int r = ntbf_rpc_connect(sock, &c);
        if (r) {
                if (r == -EACCES)
                        cli_error("the daemon at %s refused this user; ask for allow_users or "
                                  "allow_groups in the cluster file",
                                  sock);
                else
                        cli_error("no daemon answers at %s; start it (systemctl start ntbfabd) "
                                  "or set NTBFAB_SOCKET to its socket",
                                  sock);
                return EXIT_FAIL;
        }
        r = ntbf_rpc_call(c, "node.status", NULL, &st, 10000);
        if (r) {
                cli_error("the daemon at %s does not answer node.status: %s", sock,
                          ntbf_rpc_error(c));
                ntbf_rpc_close(c);
                return EXIT_FAIL;
        }
        ntbf_rpc_close(c);
        const char *env = getenv("NTBFAB_CONFIG");
        snprintf(f->file, sizeof(f->file), "%s", env && env[0] ? env : js(st, "config"));
        snprintf(f->origin, sizeof(f->origin), "%s", f->file);
        char node[64];
        snprintf(node, sizeof(node), "%s", js(st, "node") ? js(st, "node") : "");
        json_object_put(st);
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        r = ntbf_config_load(f->file, &f->t, &d);
        ntbf_diags_print(&d, stderr);
        ntbf_diags_free(&d);
        if (r) {
                cli_error("cannot load %s, the cluster file of the daemon at %s: %s; set "
                          "NTBFAB_CONFIG to a copy this user can read",
                          f->file, sock, ntbf_strerror(r));
                return EXIT_FAIL;
        }
        f->local = ntbf_topo_find_node(f->t, node);
        if (f->local == NTBF_NONE) {
                cli_error("%s has no node '%s', the node of the daemon at %s; it runs with "
                          "another cluster file",
                          f->file, node, sock);
                fab_close(f);
                return EXIT_FAIL;
        }
        f->manager = fab_manager(f->t);
        return EXIT_OK;
}

int fab_find(const struct fab_opts *o, struct fab *f)
{
        memset(f, 0, sizeof(*f));
        f->local = NTBF_NONE;
        const char *dir = o->dir ? o->dir : getenv("NTBFAB_DIR");
        if (dir && !dir[0])
                dir = NULL; /* NTBFAB_DIR= means unset */
        const char *sock = getenv("NTBFAB_SOCKET");
        struct stat st;
        if (!dir && sock && sock[0])
                return find_by_socket(f, sock);
        if (!dir && !stat(NTBF_RPC_HOST_SOCKET, &st) && S_ISSOCK(st.st_mode))
                return find_by_socket(f, NTBF_RPC_HOST_SOCKET);
        if (!dir) {
                /* The one cluster that is up for this user (docs/cli.md). */
                char prefix[64];
                snprintf(prefix, sizeof(prefix), "ntbfab-%u-", (unsigned)getuid());
                DIR *d = opendir("/dev/shm");
                struct dirent *e;
                int found = 0;
                char names[1024] = "";
                while (d && (e = readdir(d))) {
                        if (strncmp(e->d_name, prefix, strlen(prefix)))
                                continue;
                        char p[PATH_MAX / 2], c[PATH_MAX];
                        snprintf(p, sizeof(p), "/dev/shm/%s", e->d_name);
                        snprintf(c, sizeof(c), "%s/cluster.yaml", p);
                        if (access(c, R_OK) || !fab_running(p))
                                continue;
                        if (!found++)
                                snprintf(f->dir, sizeof(f->dir), "%s", p);
                        size_t l = strlen(names);
                        snprintf(names + l, sizeof(names) - l, "%s%.200s", l ? ", " : "", p);
                }
                if (d)
                        closedir(d);
                if (found != 1) {
                        if (!found)
                                cli_error("no ntbfabd runs on this host (no %s) and no cluster is "
                                          "up for this user; start the daemon (systemctl start "
                                          "ntbfabd) or run 'ntbfab up FILE' (or name the "
                                          "cluster with --dir DIR or NTBFAB_SOCKET)",
                                          NTBF_RPC_HOST_SOCKET);
                        else
                                cli_error("%d clusters are up (%s); choose one with --dir DIR",
                                          found, names);
                        return EXIT_FAIL;
                }
        } else {
                snprintf(f->dir, sizeof(f->dir), "%s", dir);
        }
        snprintf(f->file, sizeof(f->file), "%s/cluster.yaml", f->dir);
        if (access(f->file, R_OK)) {
                cli_error("no cluster was brought up in %s (no %s); run 'ntbfab up FILE --dir %s' "
                          "first",
                          f->dir, f->file, f->dir);
                return EXIT_FAIL;
        }
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/cluster.origin", f->dir);
        FILE *of = fopen(p, "r");
        if (of) {
                if (!fgets(f->origin, sizeof(f->origin), of))
                        f->origin[0] = 0;
                f->origin[strcspn(f->origin, "\n")] = 0;
                fclose(of);
        }
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        int r = ntbf_config_load(f->file, &f->t, &d);
        ntbf_diags_print(&d, stderr);
        ntbf_diags_free(&d);
        if (r) {
                cli_error("cannot load %s: %s", f->file, ntbf_strerror(r));
                return EXIT_FAIL;
        }
        f->manager = fab_manager(f->t);
        return EXIT_OK;
}

bool fab_need_dir(const struct fab *f, const char *verb)
{
        if (f->dir[0])
                return true;
        cli_error("'ntbfab %s' works on simulated clusters brought up by 'ntbfab up' (name one "
                  "with --dir DIR); the daemon at %s is a host's: manage it with systemctl",
                  verb, f->sock);
        return false;
}

void fab_close(struct fab *f)
{
        ntbf_topo_free(f->t);
        f->t = NULL;
}

uint32_t fab_node(const struct fab *f, const char *name)
{
        uint32_t n = ntbf_topo_find_node(f->t, name);
        if (n == NTBF_NONE) {
                char list[512] = "";
                size_t o = 0;
                for (uint32_t i = 0; i < f->t->nnodes && o < sizeof(list); i++)
                        o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "",
                                              f->t->nodes[i].name);
                cli_error("cluster '%s' has no node '%s'; its nodes are %s", f->t->name, name,
                          list);
        }
        return n;
}

int fab_call_quiet(const struct fab *f, const char *node, const char *method,
                   struct json_object *params, struct json_object **res, char *why, size_t len)
{
        char path[PATH_MAX];
        struct ntbf_rpc *c;
        *res = NULL;
        if (f->sock[0] && strcmp(node, f->t->nodes[f->local].name)) {
                /* Another node: through the host's daemon (cluster.call, docs/rpc.md). */
                struct json_object *q = json_object_new_object();
                json_object_object_add(q, "node", json_object_new_string(node));
                json_object_object_add(q, "method", json_object_new_string(method));
                if (params)
                        json_object_object_add(q, "params", params);
                params = q;
                method = "cluster.call";
        }
        if (f->sock[0])
                snprintf(path, sizeof(path), "%s", f->sock);
        else
                ntbf_rpc_socket_path(f->dir, node, path, sizeof(path));
        int r = ntbf_rpc_connect(path, &c);
        if (r) {
                json_object_put(params);
                if (r == -EACCES)
                        snprintf(why, len,
                                 "the daemon at %s refused this user; ask for allow_users or "
                                 "allow_groups in the cluster file",
                                 path);
                else if (f->sock[0])
                        snprintf(why, len,
                                 "no daemon answers at %s; start it (systemctl start ntbfabd)",
                                 path);
                else
                        snprintf(why, len,
                                 "no daemon answers at %s; run 'ntbfab up %s' first (ntbfab "
                                 "status shows which daemons run)",
                                 path, f->origin[0] ? f->origin : "FILE");
                return r;
        }
        r = ntbf_rpc_call(c, method, params, res, 60000);
        if (r)
                snprintf(why, len, "%s", ntbf_rpc_error(c));
        ntbf_rpc_close(c);
        return r;
}

int fab_call(const struct fab *f, const char *node, const char *method, struct json_object *params,
             struct json_object **res)
{
        char why[1024];
        int r = fab_call_quiet(f, node, method, params, res, why, sizeof(why));
        if (r)
                cli_error("%s", why);
        return r;
}

int fab_call_any(const struct fab *f, const char *method, struct json_object *params,
                 struct json_object **res)
{
        char why[1024], first[1024] = "";
        int r = NTBF_ENOTFOUND;
        if (f->sock[0]) /* the host's daemon asks the manager itself */
                return fab_call(f, f->t->nodes[f->local].name, method, params, res);
        /* The manager first: it answers cluster-wide questions itself. */
        for (uint32_t k = 0; k <= f->t->nnodes; k++) {
                uint32_t n = k == 0 ? f->manager : k - 1;
                if (k && n == f->manager)
                        continue;
                if (n >= f->t->nnodes)
                        break;
                r = fab_call_quiet(f, f->t->nodes[n].name, method,
                                   params ? json_object_get(params) : NULL, res, why, sizeof(why));
                if (!r || (r != NTBF_ENOTFOUND && r != -EPIPE && r != NTBF_EUNREACHABLE)) {
                        if (r)
                                cli_error("%s", why);
                        json_object_put(params);
                        return r;
                }
                if (!first[0])
                        snprintf(first, sizeof(first), "%s", why);
        }
        json_object_put(params);
        cli_error("%s", first);
        return r;
}
