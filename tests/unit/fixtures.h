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
/* Port reference helpers. */
struct ntbf_port_ref fx_ap(uint32_t adapter, uint32_t port);
struct ntbf_port_ref fx_sp(uint32_t sw, uint32_t port);
/* Finalize and fail the test with the diagnostics if there are errors. */
void fx_finalize_ok(struct ntbf_topo *t);

#endif
