/* tests/integration/daemon_fx.h: a cluster of real daemons (ntbfab up) for the integration tests.
 */
#ifndef NTBF_TEST_DAEMON_FX_H
#define NTBF_TEST_DAEMON_FX_H

#include <json-c/json.h>
#include <stdbool.h>

#include "ntbfab/backend.h"
#include "ntbfab/rpc.h"

struct dfx {
        char dir[256];
        char yaml[512];
        struct ntbf_topo *t;
        const struct ntbf_backend_ops *ops;
        struct ntbf_backend *b; /* this test process attached to the fabric (as any node) */
        struct ntbf_adapter_h *h[16];
};

/* How much slower than a plain build the daemons run (DFX_SCALE, 1 by default; the sanitizer
 * build sets it for tests that wait on leases): leases in the cluster file and the dfx_wait_*
 * bounds are multiplied by it. */
int dfx_scale(void);
/* `ntbfab up` of a cluster file of tests/integration in a fresh directory; asserts it works. */
void dfx_up(struct dfx *f, const char *yaml_name);
/* `ntbfab down`, then remove the directory. */
void dfx_down(struct dfx *f);
/* Run ntbfab with args (and --dir); its output (stdout and stderr) into out; exit status. */
int dfx_cli(struct dfx *f, char *out, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Call a method of node's daemon: the result (caller puts), or NULL with *err and msg. */
struct json_object *dfx_call(struct dfx *f, const char *node, const char *method,
                             const char *params, int *err, char *msg, size_t len);
/* The same, asserting success. */
struct json_object *dfx_ok(struct dfx *f, const char *node, const char *method, const char *params);
/* Budget rows of cluster.status as one text, to compare with a baseline. */
char *dfx_budgets(struct dfx *f);
int dfx_pid(struct dfx *f, const char *node);
/* Wait (10 s at most) until the process has exited. */
void dfx_wait_gone(int pid);
/* Wait until node answers node.status with its manager reachable (ms at most). */
bool dfx_wait_ready(struct dfx *f, const char *node, int ms);
/* Wait until fdid is in state (device.list) (ms at most). */
bool dfx_wait_state(struct dfx *f, uint32_t fdid, const char *state, int ms);
/* Lines of node's log (DIR/log/NODE.log) that contain text. */
int dfx_log_count(struct dfx *f, const char *node, const char *text);
/* Assert the budgets (dfx_budgets) are baseline, printing both when not. */
void dfx_assert_budgets(struct dfx *f, const char *baseline);
/* Kill node's daemon (SIGKILL) if it runs, start it again with `ntbfab up` (with
 * NTBFAB_CRASH_AT=crash_at in its environment unless NULL), and wait until it and every other
 * daemon see each other and the manager. */
void dfx_restart(struct dfx *f, const char *node, const char *crash_at);
/* Wait (ms at most) until every daemon answers, sees the manager and is connected to every
 * other daemon. */
bool dfx_wait_all(struct dfx *f, int ms);
uint32_t dfx_fdid(struct dfx *f, const char *node, const char *device);
uint32_t dfx_node(struct dfx *f, const char *name);
uint32_t dfx_adapter(struct dfx *f, const char *node);   /* its first adapter */
uint64_t dfx_u(struct json_object *o, const char *path); /* "dma.device_addr" */
void dfx_nap(int ms);

#endif
