/* tools/fabric.h: what the verbs that talk to a running cluster share (finding it, calling it). */
#ifndef NTBF_TOOLS_FABRIC_H
#define NTBF_TOOLS_FABRIC_H

#include <getopt.h>
#include <limits.h>

#include "cli.h"
#include "ntbfab/rpc.h"

extern const struct verb verbs_cluster[];
extern const size_t verbs_cluster_count;
extern const struct verb verbs_device[];
extern const size_t verbs_device_count;

/* Options every such verb takes: --json, --dir DIR, plus the verb's own. */
struct fab_opts {
        bool json;
        const char *dir;
};
/* Parse argv; extra options are handed to opt(c, optarg, ctx). Returns EXIT_OK or a status. */
int fab_parse(const struct verb *v, int argc, char **argv, const struct option *extra,
              size_t nextra, struct fab_opts *o, int (*opt)(int c, const char *arg, void *ctx),
              void *ctx);

/*
 * A running cluster: its instance directory and the copy of its cluster file that `ntbfab
 * up` recorded there (docs/cli.md, "Which cluster").
 */
struct fab {
        char dir[PATH_MAX / 2]; /* "" when the cluster is reached through a host's daemon */
        char sock[PATH_MAX];    /* that daemon's socket ("" with an instance directory) */
        char file[PATH_MAX];    /* DIR/cluster.yaml, or the cluster file the daemon loaded */
        char origin[PATH_MAX];  /* the file `up` was given */
        struct ntbf_topo *t;
        uint32_t manager;
        uint32_t local; /* the node of the host's daemon (NTBF_NONE with a directory) */
};
/*
 * Find the cluster: o->dir, NTBFAB_DIR, NTBFAB_SOCKET, this host's daemon at the default
 * socket, or the one `ntbfab up` brought up for this user (docs/cli.md, "Which cluster");
 * prints the error itself.
 */
int fab_find(const struct fab_opts *o, struct fab *f);
/* A verb that only works on a cluster `ntbfab up` started: false (and says so) otherwise. */
bool fab_need_dir(const struct fab *f, const char *verb);
void fab_close(struct fab *f);
/* The manager node of a topology (cluster.manager, else the lowest id). */
uint32_t fab_manager(const struct ntbf_topo *t);
/* A node's daemon pid from DIR/run/NODE.pid, 0 when none runs. */
int fab_pid(const char *dir, const char *name);
/* Whether something `up` started in dir still runs. */
bool fab_running(const char *dir);

/* Call method on node's daemon: 0 with *res, or prints a one-line error and returns it. */
int fab_call(const struct fab *f, const char *node, const char *method, struct json_object *params,
             struct json_object **res);
/* The same without printing; the message into why. */
int fab_call_quiet(const struct fab *f, const char *node, const char *method,
                   struct json_object *params, struct json_object **res, char *why, size_t len);
/* Call on the manager, or on any node that answers. */
int fab_call_any(const struct fab *f, const char *method, struct json_object *params,
                 struct json_object **res);
uint32_t fab_node(const struct fab *f, const char *name); /* prints the error */

/* JSON accessors for results. */
uint64_t ju(struct json_object *o, const char *k);
const char *js(struct json_object *o, const char *k);
bool jb(struct json_object *o, const char *k);
struct json_object *jo(struct json_object *o, const char *k);

#endif
