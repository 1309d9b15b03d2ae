/* tools/accel_drv.h: a small driver for the simulated accelerator, through any mapping of its BAR0.
 */
#ifndef NTBF_TOOLS_ACCEL_DRV_H
#define NTBF_TOOLS_ACCEL_DRV_H

#include <stdint.h>

/*
 * The copy engine of backends/sim/accel.h driven the way a driver would: register stores
 * and descriptor writes into BAR0, wherever BAR0 is mapped (locally, or through the
 * borrower's NTB window: the code cannot tell, which is the point of Device Lending).
 */
struct accel_drv {
        volatile uint8_t *regs;
        uint32_t tail;
};

/* Check the ID, reset and enable the engine. -ENODEV if BAR0 is not an accelerator's. */
int accel_open(struct accel_drv *a, void *bar0);
/* The device's BAR2 (device memory) address in its own host. */
uint64_t accel_mem_addr(const struct accel_drv *a);
/* Copy len bytes from src to dst (device-side addresses) and wait up to timeout_ms for the
 * descriptor. Returns 0, -ETIMEDOUT, or -EIO with *reason (NTBF_ACCEL_ERR_*). */
int accel_copy(struct accel_drv *a, uint64_t src, uint64_t dst, uint32_t len, int timeout_ms,
               uint32_t *reason);

#endif
