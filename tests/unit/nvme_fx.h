/* tests/unit/nvme_fx.h: the simulated NVMe over fake memory, polled from the driver's waits. */
#ifndef NTBF_TEST_NVME_FX_H
#define NTBF_TEST_NVME_FX_H

#include <stdbool.h>

#include "fake_dma.h"
#include "ntbf_nvme.h"
#include "nvme.h" /* the simulated controller (backends/sim) */

/*
 * One simulated controller whose DMA reaches [NFX_BASE, NFX_BASE + NFX_SIZE) of fake memory,
 * driven by the driver core in this thread: every look of a waiter polls the model once
 * (the wait hook), so tests are deterministic and need no device host.
 */
#define NFX_BASE UINT64_C(0x100000000)
#define NFX_SIZE (UINT64_C(64) << 20)

struct nfx {
        struct ntbf_device d;
        struct fake_dma *f;
        struct fake_dev dev;
        void *st;
        char path[64];
        int fd;
        uint64_t brk, now;
        bool frozen; /* the model is not polled (a controller that stopped answering) */
        struct ntbf_nvme_wait wait; /* short timeouts, the model polled on every look */
        struct ntbf_nvme_ctrl c;
        void (*extra)(void *arg); /* also run on every look (a manager's step) */
        void *extra_arg;
};

/* A controller of queues pairs (admin included) and capacity bytes, bus mastering on. */
void nfx_up(struct nfx *x, uint32_t queues, uint64_t capacity);
void nfx_down(struct nfx *x);
/* Page-aligned zeroed DMA memory from the fake range. */
struct ntbf_nvme_mem nfx_mem(struct nfx *x, size_t size);
/* One poll of the model (unless frozen), and the extra hook. */
void nfx_idle(void *arg);
/* ntbf_nvme_ctrl_open and _reset with admin queues of 32 entries, asserting success. */
void nfx_reset(struct nfx *x);
/* A queue pair's memory and init, for qid with entries (SQ = CQ size). */
void nfx_qp(struct nfx *x, struct ntbf_nvme_qp *q, uint16_t qid, uint32_t entries);
/* Deterministic bytes of stream seed at byte pos. */
void nfx_fill(uint8_t *p, size_t len, uint64_t seed, uint64_t pos);
/* Index of the first byte that differs from the stream, or -1. */
long nfx_check(const uint8_t *p, size_t len, uint64_t seed, uint64_t pos);

#endif
