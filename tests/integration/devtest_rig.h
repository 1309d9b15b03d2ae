/* tests/integration/devtest_rig.h: the two-host fabric of the device tests (lender with an NVMe and
 * an accelerator, borrower) and the borrower processes that drive them. */
#ifndef NTBF_TEST_DEVTEST_RIG_H
#define NTBF_TEST_DEVTEST_RIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "ntbfab/sim.h"

#define MiB NTBF_MiB

/*
 * Lender (node "lender", adapter 0, no IOMMU as in the article's 7.4.1) holds nvme0 and
 * acc0; the borrower (node "borrower", IOMMU on) has nothing but RAM. PXH830 back to back:
 * 256 MiB windows of 256 slots of 1 MiB.
 *
 * Lender window: slots RIG_WSLOT.. are the DMA window, programmed once by rig_lend to the
 * borrower's I/O virtual addresses [RIG_IOVA, + RIG_WSLOTS MiB). Slots below RIG_WSLOT are
 * never programmed. The window is cut into regions of RIG_REGION bytes, one per borrower
 * process: region r is IOVA RIG_IOVA + r * RIG_REGION, device address win_dev + the same.
 * Borrower window: slot RIG_BSLOT_NVME maps nvme0's BAR0, RIG_BSLOT_ACC acc0's BAR0,
 * RIG_BSLOT_MEM.. acc0's BAR2.
 */
#define RIG_IOVA       UINT64_C(0x40000000)
#define RIG_WSLOT      128u
#define RIG_WSLOTS     128u
#define RIG_REGION     (8 * MiB)
#define RIG_BSLOT_NVME 0u
#define RIG_BSLOT_ACC  1u
#define RIG_BSLOT_MEM  32u
#define RIG_NVME_CAP   (64 * MiB)
#define RIG_ACC_MEM    (32 * MiB)

struct rig {
        char dir[128], yaml[192];
        struct ntbf_topo *t;
        const struct ntbf_backend_ops *ops;
        struct ntbf_backend *b;         /* this process: a tool (any node) */
        struct ntbf_adapter_h *hl, *hb; /* lender's and borrower's adapters */
        uint32_t ln, bn, la, ba, nvme, acc;
        uint64_t win_dev; /* device-side address of RIG_IOVA */
        struct ntbf_sim_devhost *dh;
};

/* A fresh instance in /dev/shm, attached, lent (rig_lend), device host running here. g must
 * outlive the test function (static) for rig_teardown to clean up after a failure. */
void rig_up(struct rig *g);
/* cmocka teardown: after a failure, kill the borrowers left and remove the instance. */
int rig_teardown(void **state);
/* The lender's part: device requester IDs and the DMA window. */
void rig_lend(struct rig *g);
/* Stop the device host, detach, destroy the instance (images too), free everything. */
void rig_down(struct rig *g);
/*
 * A fabric restart: stop the device host, detach, destroy the instance (NVMe images
 * survive), create it again from the same file, attach, lend, start the device host.
 * Returns having checked that only images/ was left in between.
 */
void rig_restart(struct rig *g);
/* The NVMe namespace image file. */
void rig_image_path(const struct rig *g, char *buf, size_t len);
struct ntbf_counters rig_ctr(struct rig *g, struct ntbf_adapter_h *h);
/* Device-side address and IOVA of region r. */
uint64_t rig_region_dev(const struct rig *g, unsigned r);
uint64_t rig_region_iova(unsigned r);
/* The lender slot holding device-side address dev. */
uint32_t rig_lender_slot(const struct rig *g, uint64_t dev);

/* A borrower process (tests/integration/sim_borrower.c), driven line by line. */
struct bproc {
        pid_t pid;
        FILE *in, *out;
        char line[512];
};

void bp_spawn(struct bproc *p, const struct rig *g);
void bp_send(struct bproc *p, const char *fmt, ...) NTBF_PRINTF(2, 3);
const char *bp_recv(struct bproc *p);
const char *bp_cmd(struct bproc *p, const char *fmt, ...) NTBF_PRINTF(2, 3);
/* The command must answer "ok..."; returns the answer. */
const char *bp_ok(struct bproc *p, const char *fmt, ...) NTBF_PRINTF(2, 3);
/* Field i (0: "ok") of an answer, as a number. */
uint64_t bp_num(const char *line, int i);
/* "quit" and reap: exit status 0 required. */
void bp_quit(struct bproc *p);
/* Pool of region r (size bytes, chunks of chunk) and nvme0's BAR0 mapped; nvme0 is not
 * touched otherwise. */
void bp_setup(struct bproc *p, const struct rig *g, unsigned r, uint64_t size, uint64_t chunk);

#endif
