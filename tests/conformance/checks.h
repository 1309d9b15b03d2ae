/* tests/conformance/checks.h: the check functions, one per entry of the table in checks.c. */
#ifndef NTBF_CONFORMANCE_CHECKS_H
#define NTBF_CONFORMANCE_CHECKS_H

#include <stdio.h>

#include "conformance.h"

int cf_check_vtable(struct cf_run *r);
int cf_check_caps_flags(struct cf_run *r);
int cf_check_caps_figures(struct cf_run *r);
int cf_check_events_idle(struct cf_run *r);
int cf_check_events_fd(struct cf_run *r);
int cf_check_mem(struct cf_run *r);
int cf_check_xlat_outbound(struct cf_run *r);
int cf_check_xlat_inbound(struct cf_run *r);
int cf_check_xlat_size(struct cf_run *r);
int cf_check_map_offset(struct cf_run *r);
int cf_check_map_live(struct cf_run *r);
int cf_check_map_process(struct cf_run *r);
int cf_check_rid_table(struct cf_run *r);
int cf_check_rid_drop(struct cf_run *r);
int cf_check_rid_mask(struct cf_run *r);
int cf_check_rid_switch(struct cf_run *r);
int cf_check_rid_switch_drop(struct cf_run *r);
int cf_check_link_state(struct cf_run *r);
int cf_check_link_cycle(struct cf_run *r);
int cf_check_doorbell(struct cf_run *r);
int cf_check_doorbell_mask(struct cf_run *r);
int cf_check_spad(struct cf_run *r);
int cf_check_msg(struct cf_run *r);
int cf_check_iommu(struct cf_run *r);
int cf_check_dev_iommu(struct cf_run *r);
int cf_check_irq(struct cf_run *r);
int cf_check_irq_trigger(struct cf_run *r);
int cf_check_host_map(struct cf_run *r);
int cf_check_host_bus(struct cf_run *r);
int cf_check_mcast(struct cf_run *r);
int cf_check_window_write(struct cf_run *r);
int cf_check_dma_copy(struct cf_run *r);
int cf_check_dma_order(struct cf_run *r);
int cf_check_dma_error(struct cf_run *r);
int cf_check_reset(struct cf_run *r);
int cf_check_counters(struct cf_run *r);
int cf_check_args(struct cf_run *r);

#endif
