/* tests/integration/simfab_topos.h: the topologies the multi-process tests share by name. */
#ifndef NTBF_TEST_SIMFAB_TOPOS_H
#define NTBF_TEST_SIMFAB_TOPOS_H

#include "ntbfab/topology.h"

/*
 * "b2b": two pxh830 nodes a, b back to back, no IOMMU; "b2b-iommu": the same with IOMMUs;
 * "b2b-mirror": b2b plus a mirror device on a (bus 3); "b2b-big": b2b with more RAM on b
 * (a different topology); "nvme": b2b plus an NVMe device on a (a namespace image).
 * Returns a finalized topology or NULL.
 */
struct ntbf_topo *itopo(const char *name);

#endif
