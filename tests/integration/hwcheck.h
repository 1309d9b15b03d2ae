/* tests/integration/hwcheck.h: the simulated fabric's tables against what the daemons recorded. */
#ifndef NTBF_TEST_HWCHECK_H
#define NTBF_TEST_HWCHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "daemon_fx.h"

/* Every entry the daemons of f recorded as programmed (DIR/state/NODE.db, table programmed),
 * as sorted entry keys; count into *n. Caller frees with hwc_free. */
char **hwc_records(struct dfx *f, size_t *n);
void hwc_free(char **v, size_t n);

/*
 * Whether the fabric's hardware (ntbf_sim_hw_state) is exactly what the records imply: every
 * recorded entry in it, nothing else in it (the host CPUs' reserved requester entries
 * aside). iommu_pages_of_clients: host IOMMU pages that no record names are not counted
 * (processes map their own DMA memory there). On a difference, why lists the first ones.
 */
bool hwc_matches(struct dfx *f, bool iommu_pages_of_clients, char *why, size_t len);

#endif
