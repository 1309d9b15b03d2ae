/* bench/nvmefx.h: clusters and ntbfab-nvme processes for the NVMe driver's benchmarks. */
#ifndef NTBF_BENCH_NVMEFX_H
#define NTBF_BENCH_NVMEFX_H

#include <json-c/json.h>
#include <stdbool.h>
#include <sys/types.h>

/*
 * A cluster brought up with the built binaries (--build DIR) in a fresh directory under
 * /dev/shm from a cluster file's text, and ntbfab-nvme processes run as its nodes with their
 * output in that directory. Teardown brings the cluster down and removes the directory.
 */
struct nb {
        char build[512];
        char dir[128];
        char yaml[256];
};

/* The text of a file with every occurrence of from[i] replaced by to[i] (caller frees). */
char *nb_rewrite(const char *path, const char *const *from, const char *const *to, unsigned n);
/* Up from text (written to DIR/cluster-src.yaml); 0 or -1 with a message on stderr. */
int nb_up(struct nb *b, const char *build, const char *text);
void nb_down(struct nb *b);
/* ntbfab-nvme ARGS as node, output in DIR/NAME.out; the pid. */
pid_t nb_start(struct nb *b, const char *node, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Wait for pid (ms at most): exit status, -1 on timeout (then it is killed). */
int nb_wait(pid_t pid, int ms);
/* Whether DIR/NAME.out holds text (waiting ms at most). */
bool nb_wait_for(struct nb *b, const char *name, const char *text, int ms);
/* DIR/NAME.out parsed as JSON (the last document in it), or NULL. */
struct json_object *nb_json(struct nb *b, const char *name);
/* A number inside a JSON object by dotted path ("result.latency_ns.p50"); -1 if missing. */
double nb_num(struct json_object *o, const char *path);
/* A manager of fdid on node; its pid, or -1 if it did not say it is ready. */
pid_t nb_manager(struct nb *b, const char *node, unsigned fdid);
void nb_nap(int ms);

#endif
