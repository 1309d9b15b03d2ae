/* tests/integration/sisci_fx.h: the libsisci tests' cluster and the peer processes they drive. */
#ifndef NTBF_TEST_SISCI_FX_H
#define NTBF_TEST_SISCI_FX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sisci_api.h"

/* Node ids of tests/integration/sisci-cluster.yaml. */
#define NODE_A    4u
#define NODE_B    8u
#define NODE_C    12u
#define FDID_NVME 0xc000u /* c.nvme0 */
#define FDID_ACC  0xc001u /* c.acc0 */
#define FDID_ACC1 0x4000u /* a.acc1 */

/* A sisci_peer process on another node. */
struct peer {
        pid_t pid;
        int in, out; /* its stdin (we write), its stdout (we read) */
        char node[32];
};

/* Bring the cluster up in a fresh directory and initialize libsisci as node a. */
int sfx_setup(void **state);
/* The same with another cluster file of tests/integration, as node. */
int sfx_setup_on(const char *yaml, const char *node);
int sfx_teardown(void **state);
const char *sfx_dir(void);
/* Start a peer on node; asserts it came up. */
struct peer *sfx_peer(const char *node);
/*
 * Send one command; the answer's status: 0 for "ok", the SISCI code for "err"; the rest of
 * the line (values) into out when given. Fails the test if no answer comes within 30 s.
 */
unsigned sfx_cmd(struct peer *p, char *out, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same, asserting "ok". */
void sfx_ok(struct peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Kill a peer (SIGKILL) and reap it. */
void sfx_kill(struct peer *p);
/* Ask a peer to quit, reap it. */
void sfx_quit(struct peer *p);
/* Kill every peer still running (per-test teardown). */
int sfx_kill_all(void **state);
void sfx_nap(int ms);
/* Run `ntbfab ARGS --dir DIR`; its exit status. */
int sfx_cli(const char *args);

#endif
