/* backends/sim/accel.h: register map and descriptor layout of the simulated copy accelerator. */
#ifndef NTBF_SIM_ACCEL_H
#define NTBF_SIM_ACCEL_H

#include <stdint.h>

/*
 * The accelerator is a device with a large BAR of device memory (BAR2, sim.memory bytes,
 * 64-bit prefetchable) and a copy engine driven by a descriptor ring in BAR0 (64 KiB):
 *
 *   0x0000 registers (all 32-bit little endian unless marked 64; RO = device-owned, a
 *          driver's write to them is undone at the next poll; RW = driver-owned)
 *   0x1000 descriptor ring: NTBF_ACCEL_RING_SIZE descriptors of 32 bytes (to 0x3000)
 *   0x4000 MSI-X table (when sim.msix > 0; up to 2048 vectors, to 0xc000)
 *   0xc000 MSI-X PBA
 *
 * Programming model:
 *   1. Check ID == NTBF_ACCEL_ID. Set CTRL.ENABLE (and CTRL.IRQ_ENABLE plus MSIX_VECTOR for
 *      interrupts). Bus Master Enable must be set for any copy that leaves the device.
 *   2. Fill the descriptor at index TAIL (status 0), then write TAIL = (TAIL + 1) % RING_SIZE.
 *      The ring is full when (TAIL + 1) % RING_SIZE == HEAD. Descriptors between HEAD and
 *      TAIL belong to the engine and must not be changed.
 *   3. The engine copies len bytes from src to dst. Addresses are in the device's host
 *      address space: its own BAR2 range is device memory, accessed inside the device;
 *      anything else is DMA through the fabric (a range may straddle BAR2's edges).
 *      Overlapping source and destination in the same memory behave like memmove. Copies
 *      advance NTBF_ACCEL_CHUNK bytes per poll step, so a large copy does not hold up other
 *      work; up to 32 small descriptors finish in one step.
 *   4. When a descriptor is finished the engine writes its status (DONE, or ERROR with a
 *      reason; bytes copied before an error stay copied), then advances HEAD and COMPLETED
 *      (and ERRORS/LAST_ERROR on error). A descriptor with NTBF_ACCEL_F_IRQ completed while
 *      CTRL.IRQ_ENABLE is set makes the engine signal MSIX_VECTOR once per poll step.
 *   5. CTRL.RESET (self-clearing) aborts the descriptor in progress and zeroes HEAD, TAIL,
 *      COMPLETED, ERRORS, LAST_ERROR, IRQS and BYTES. An FLR resets everything to power-on
 *      (device memory keeps its contents).
 * A TAIL value >= RING_SIZE is ignored and sets STATUS.DOORBELL_ERROR until a valid one is
 * written.
 */

#define NTBF_ACCEL_ID      0x4c434341u /* "ACCL" */
#define NTBF_ACCEL_VERSION 0x00010000u /* 1.0 */

#define NTBF_ACCEL_REG_ID          0x000 /* RO */
#define NTBF_ACCEL_REG_VERSION     0x004 /* RO */
#define NTBF_ACCEL_REG_MEMSIZE     0x008 /* RO 64: BAR2 bytes */
#define NTBF_ACCEL_REG_RING_OFF    0x010 /* RO: offset of the ring in BAR0 */
#define NTBF_ACCEL_REG_RING_SIZE   0x014 /* RO: descriptors in the ring */
#define NTBF_ACCEL_REG_CHUNK       0x018 /* RO: bytes copied per poll step */
#define NTBF_ACCEL_REG_VECTORS     0x01c /* RO: MSI-X vectors */
#define NTBF_ACCEL_REG_CTRL        0x020 /* RW */
#define NTBF_ACCEL_REG_STATUS      0x024 /* RO */
#define NTBF_ACCEL_REG_HEAD        0x028 /* RO: next descriptor the engine processes */
#define NTBF_ACCEL_REG_TAIL        0x02c /* RW: doorbell, one past the last posted one */
#define NTBF_ACCEL_REG_COMPLETED   0x030 /* RO: descriptors finished (free-running) */
#define NTBF_ACCEL_REG_ERRORS      0x034 /* RO: descriptors finished with an error */
#define NTBF_ACCEL_REG_LAST_ERROR  0x038 /* RO: reason (7:0) | descriptor index (31:16) */
#define NTBF_ACCEL_REG_MSIX_VECTOR 0x03c /* RW: vector for completion interrupts */
#define NTBF_ACCEL_REG_IRQS        0x040 /* RO: interrupts signaled (free-running) */
#define NTBF_ACCEL_REG_BYTES       0x048 /* RO 64: bytes copied (free-running) */
#define NTBF_ACCEL_REG_MEM_ADDR    0x050 /* RO 64: BAR2 address in the device's host */

#define NTBF_ACCEL_CTRL_ENABLE     0x1u
#define NTBF_ACCEL_CTRL_RESET      0x2u
#define NTBF_ACCEL_CTRL_IRQ_ENABLE 0x4u
#define NTBF_ACCEL_STATUS_READY    0x1u /* enabled */
#define NTBF_ACCEL_STATUS_BUSY     0x2u /* descriptors pending */
#define NTBF_ACCEL_STATUS_DB_ERROR 0x4u /* last TAIL write was out of range */

#define NTBF_ACCEL_RING_OFF   0x1000u
#define NTBF_ACCEL_RING_SIZE  256u
#define NTBF_ACCEL_CHUNK      (64u * 1024)
#define NTBF_ACCEL_MSIX_TABLE 0x4000u
#define NTBF_ACCEL_MSIX_PBA   0xc000u
#define NTBF_ACCEL_MSIX_MAX   2048u
#define NTBF_ACCEL_BAR0_SIZE  0x10000u

/* A descriptor (32 bytes, in BAR0 at RING_OFF + 32 * index). */
struct ntbf_accel_desc {
        uint64_t src, dst;
        uint32_t len;    /* bytes; 0 completes at once */
        uint32_t flags;  /* NTBF_ACCEL_F_* ; other bits reserved (error BAD_FLAGS) */
        uint32_t status; /* written by the engine, last */
        uint32_t cookie; /* the driver's; the engine never touches it */
};
_Static_assert(sizeof(struct ntbf_accel_desc) == 32, "descriptor is 32 bytes");

#define NTBF_ACCEL_F_IRQ 0x1u /* interrupt on completion */

/* Descriptor status: 0 until finished, then DONE or ERROR | reason << 8. */
#define NTBF_ACCEL_ST_DONE          1u
#define NTBF_ACCEL_ST_ERROR         2u
#define NTBF_ACCEL_ST_REASON(s)     (((s) >> 8) & 0xff)
#define NTBF_ACCEL_ERR_SRC          1u /* reading the source failed (DMA dropped / aborted) */
#define NTBF_ACCEL_ERR_DST          2u /* writing the destination failed */
#define NTBF_ACCEL_ERR_BAD_FLAGS    3u /* reserved flag bits set */
#define NTBF_ACCEL_ERR_NO_BUSMASTER 4u /* DMA needed but Bus Master Enable is clear */

#endif
