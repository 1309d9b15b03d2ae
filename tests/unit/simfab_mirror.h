/* tests/unit/simfab_mirror.h: a test-only device model that copies memory by DMA (the "mirror"). */
#ifndef NTBF_TEST_SIMFAB_MIRROR_H
#define NTBF_TEST_SIMFAB_MIRROR_H

#include "devmodel.h"

/*
 * BAR0 registers of the mirror. A driver writes SRC, DST, LEN, optionally MSI_ADDR and
 * MSI_DATA, then a nonzero value to DOORBELL. The model reads LEN bytes at SRC and writes
 * them at DST by DMA (as the function's requester), stores STATUS (1 done, or the negative
 * drop reason), bumps DONE, sends the MSI if MSI_ADDR is set, and clears DOORBELL.
 * SEEN_NS is CLOCK_MONOTONIC when the model noticed the doorbell; RESETS counts resets.
 */
#define MIRROR_SRC      0x00
#define MIRROR_DST      0x08
#define MIRROR_LEN      0x10
#define MIRROR_DOORBELL 0x14
#define MIRROR_STATUS   0x18
#define MIRROR_DONE     0x1c
#define MIRROR_MSI_ADDR 0x20
#define MIRROR_MSI_DATA 0x28
#define MIRROR_SEEN_NS  0x30
#define MIRROR_RESETS   0x38
#define MIRROR_CREATES  0x3c

extern const struct ntbf_sim_model_ops simfab_mirror_ops;
/* Model lookup for ntbf_sim_devhost_opts: devices whose name starts with "mirror". */
const struct ntbf_sim_model_ops *simfab_mirror_for(const struct ntbf_device *d);

#endif
