/* tests/integration/nvme_itest.h: running ntbfab-nvme managers and clients on a test cluster. */
#ifndef NTBF_TEST_NVME_ITEST_H
#define NTBF_TEST_NVME_ITEST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "daemon_fx.h"

/*
 * Each process runs as a node of the cluster (NTBFAB_DIR, NTBFAB_NODE), its stdout and
 * stderr in a file of the test's directory. Every process started is remembered and killed
 * (by pid) at teardown, also after a failed assert.
 */
struct nproc {
        pid_t pid;
        char out[512]; /* its output file */
        int status;    /* exit status once reaped (-1 before) */
};

/* Start `ntbfab-nvme ARGS` as node; the output goes to DIR/NAME.out. */
struct nproc *nit_start(struct dfx *f, const char *node, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Wait (ms at most) for it to exit: its exit status, or -1 on timeout. */
int nit_wait(struct nproc *p, int ms);
/* Run to completion (ms at most), asserting exit status want; its output in out. */
void nit_run(struct dfx *f, const char *node, int want, char *out, size_t len, int ms,
             const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* The process's output so far (NUL terminated, at most len - 1 bytes). */
char *nit_output(const struct nproc *p, char *buf, size_t len);
/* Wait (ms at most) until its output holds text. */
bool nit_wait_for(const struct nproc *p, const char *text, int ms);
/* Count lines of its output holding text. */
int nit_count(const struct nproc *p, const char *text);
/* SIGKILL (or SIGTERM) and reap. */
void nit_kill(struct nproc *p, int sig);
/* Kill every process still running (teardown). */
void nit_kill_all(void);
/* A manager of fdid on node with a lease; asserts it said it is ready. */
struct nproc *nit_manager(struct dfx *f, const char *node, unsigned fdid, const char *lease);

#endif
