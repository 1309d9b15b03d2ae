/* backends/switchtec/switchtec.h: the switchtec backend's internals that the CLI and tests use. */
#ifndef NTBF_STX_SWITCHTEC_H
#define NTBF_STX_SWITCHTEC_H

#include "ntbfab/backend.h"
#include "part.h"

/*
 * The switchtec backend (docs/switchtec.md) programs what Linux's NTB framework does not: an NT
 * partition's BAR setup, its LUT entries and direct windows, its requester-ID table (and the
 * crosslink partition's copy of the proxy IDs), through the switch's GAS. Everything else
 * (CPU maps of the windows, memory for export, doorbells, scratchpads, link, events) it
 * delegates to a lower backend by composition: linux-ntb over the kernel's ntb_hw_switchtec
 * on real hardware, or the simulated fabric whose translation tables the register model
 * (tests/switchtec) keeps equal to the GAS (NTBFAB_SWITCHTEC_LOWER=sim).
 */

extern const struct ntbf_backend_ops ntbf__switchtec_ops;

/* Where adapter a's switch is: the GAS path (or MRPC device, *mrpc set) its `switchtec:`
 * names, relative paths taken in dir, or found from its bdf in sysfs. */
int ntbf__stx_gas_path(const struct ntbf_topo *t, const char *dir, uint32_t a, char *path,
                       size_t len, bool *mrpc, char *why, size_t whylen);
/* The NT partition of adapter a as seen through GAS g (whose own partition is g's
 * partition_id): its `switchtec: {partition}`, the GAS's partition_id for the adapter probed
 * through it (self), or the other NT partition of ep_map when there are two. */
int ntbf__stx_partition(const struct ntbf_topo *t, struct stx_gas *g, uint32_t self, uint32_t a,
                        uint32_t *part, char *why, size_t whylen);

/* The last failure of a handle, as a sentence ("" if none since probe). */
const char *ntbf__stx_last_error(struct ntbf_adapter_h *h);
/* The GAS a handle programs (tests install write hooks on it). */
struct stx_gas *ntbf__stx_handle_gas(struct ntbf_adapter_h *h);
/* The handle's partition, as the transactions use it (tests change its timing). */
struct stx_part *ntbf__stx_handle_part(struct ntbf_adapter_h *h);

#endif
