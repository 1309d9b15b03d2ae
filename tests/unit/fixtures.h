/* tests/unit/fixtures.h: small topologies built in code, shared by the unit tests. */
#ifndef NTBF_TEST_FIXTURES_H
#define NTBF_TEST_FIXTURES_H

#include "ntbfab/topology.h"

/* Two nodes ("a" id 4, "b" id 8), each one adapter of model, cabled back to back. */
struct ntbf_topo *fx_b2b(const char *model);
/*
 * A star: nodes n0..n{count-1} (ids 4, 8, ...) each with one pxh830 "ntb0" cabled to
 * port i of mxs824 switch "sw0". Node n0 has an NVMe "nvme0" (lend) and an accelerator "acc0".
 */
struct ntbf_topo *fx_star(unsigned count);
/*
 * Two pxh830 nodes "a" and "b" back to back, each with ndev single-function lent devices
 * "d0".."d{ndev-1}" (buses 1..ndev) with one 64-bit non-prefetchable BAR0 of bar bytes.
 */
struct ntbf_topo *fx_b2b_devices(unsigned ndev, uint64_t bar);
/*
 * The article's cascade: `nodes` nodes "n0".. (ids 1.. skipping the reserved 252), each with
 * a pxh830 "ntb0" on sub-switch "sub{i % subs}" port i / subs (mxs824 with as many ports as
 * needed; uplink on its last port, cabled to port s of the top switch "top"). With
 * rid_table != 0 every switch gets that requester table. Each node has a lent NVMe "nvme0".
 */
struct ntbf_topo *fx_cascade(unsigned nodes, unsigned subs, uint32_t rid_table);
/* Add a lent simulated accelerator with mem bytes of device memory (BAR2) to node n. */
uint32_t fx_add_accel(struct ntbf_topo *t, uint32_t node, const char *name, uint8_t bus,
                      uint64_t mem);
/* Port reference helpers. */
struct ntbf_port_ref fx_ap(uint32_t adapter, uint32_t port);
struct ntbf_port_ref fx_sp(uint32_t sw, uint32_t port);
/* Finalize and fail the test with the diagnostics if there are errors. */
void fx_finalize_ok(struct ntbf_topo *t);

struct ntbf_state;
/* A budget state for t; fails the test with the diagnostics if the baseline does not fit. */
struct ntbf_state *fx_state_ok(const struct ntbf_topo *t);
/* Fail the test if the state's internal consistency check finds a problem. */
void fx_consistent(const struct ntbf_state *s);

#endif
