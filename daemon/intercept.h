/* daemon/intercept.h: config-cycle interception for borrowed devices (article 4.2). */
#ifndef NTBF_DAEMON_INTERCEPT_H
#define NTBF_DAEMON_INTERCEPT_H

#include <stdbool.h>
#include <stdint.h>

/*
 * The borrower forwards config accesses to the lender but rewrites some on the way:
 *  - reads: the Interrupt Pin (0x3d) reads 0, so a driver never tries legacy INTx, which
 *    cannot cross an NTB;
 *  - writes of the Command register keep Interrupt Disable set;
 *  - writes of the MSI capability's Message Address with an address of this host's MSI
 *    range are rewritten to the device-side address of the borrow's MSI window (and its
 *    upper half for a 64-bit capability), so the device's interrupts reach this host.
 * Pure code: the daemon supplies the MSI capability (found on the lender) and forwards.
 */
struct ntbf__icpt {
        bool known;        /* the lender told where MSI lives */
        uint32_t msi_cap;  /* offset of the MSI capability, 0 if none */
        bool msi64;        /* 64-bit Message Address */
        uint64_t dev_addr; /* device-side address of the MSI window's start */
        uint64_t host_addr, size;
        uint32_t upper; /* upper half of the last rewritten address */
};

/* An access after interception: at most two writes. */
struct ntbf__cfgw {
        uint32_t off, size, val;
};

/* Whether a naturally aligned access of 1, 2 or 4 bytes below 4 KiB. */
bool ntbf__icpt_valid(uint32_t off, uint32_t size);
/* The value a read of (off, size) returns to the borrower's driver. */
uint32_t ntbf__icpt_read(const struct ntbf__icpt *ic, uint32_t off, uint32_t size, uint32_t val);
/* The writes to perform on the device for a driver's write; returns how many (1 or 2). */
int ntbf__icpt_write(struct ntbf__icpt *ic, uint32_t off, uint32_t size, uint32_t val,
                     struct ntbf__cfgw out[2]);

#endif
