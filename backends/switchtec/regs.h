/* backends/switchtec/regs.h: the Switchtec register space (GAS) as far as NT partitions go. */
#ifndef NTBF_STX_REGS_H
#define NTBF_STX_REGS_H

#include <stdbool.h>
#include <stdint.h>

/*
 * The Global Address Space (GAS) is BAR0 of the switch's management function: Linux maps it
 * for its own driver and exposes it as sysfs resource0; the management device
 * (/dev/switchtecN) reaches it through MRPC commands too. docs/switchtec.md gives each
 * figure below with its source: "doc" facts come from the public Linux and switchtec-user
 * headers, the rest are choices of the register model (tests/switchtec) that the first run
 * on real hardware must check. All registers are little-endian.
 */

/* ---- regions of the GAS (doc) ------------------------------------------------------------ */
#define STX_GAS_MRPC     UINT64_C(0x0000)
#define STX_GAS_TOP_CFG  UINT64_C(0x1000)
#define STX_GAS_SYS_INFO UINT64_C(0x2000)
#define STX_GAS_PART_CFG UINT64_C(0x4000)
#define STX_GAS_NTB      UINT64_C(0x10000)
#define STX_GAS_PFF_CSR  UINT64_C(0x134000)
#define STX_GAS_SIZE     STX_GAS_PFF_CSR /* what the backend and the model map */

/* MRPC registers (doc): the firmware's command interface the kernel driver uses. */
#define STX_MRPC_INPUT   (STX_GAS_MRPC + 0x000) /* 1024 bytes */
#define STX_MRPC_OUTPUT  (STX_GAS_MRPC + 0x400) /* 1024 bytes */
#define STX_MRPC_CMD     (STX_GAS_MRPC + 0x800)
#define STX_MRPC_STATUS  (STX_GAS_MRPC + 0x804)
#define STX_MRPC_RET     (STX_GAS_MRPC + 0x808)
#define STX_MRPC_PAYLOAD 1024

/* MRPC commands (doc: Linux's include/linux/switchtec.h, switchtec-user). */
#define STX_MRPC_GAS_READ  0x29                   /* in {u32 offset, u32 len}: out len bytes */
#define STX_MRPC_GAS_WRITE 0x34                   /* in {u32 offset, u32 len, data[len]} */
#define STX_MRPC_GAS_MAX   (STX_MRPC_PAYLOAD - 8) /* bytes one GAS_WRITE carries */

/* System information (doc). */
#define STX_SYS_DEVICE_ID   (STX_GAS_SYS_INFO + 0x00)
#define STX_SYS_DEVICE_VER  (STX_GAS_SYS_INFO + 0x04)
#define STX_SYS_FW_VERSION  (STX_GAS_SYS_INFO + 0x08)
#define STX_SYS_PARTITION   (STX_GAS_SYS_INFO + 0x18)
#define STX_SYS_PRODUCT_ID  (STX_GAS_SYS_INFO + 0x110) /* 16 characters */
#define STX_SYS_PRODUCT_LEN 16

/* ---- the NTB region (doc) ------------------------------------------------------------------ */
#define STX_MAX_PARTS 48

/* Info block: which partitions are NT, which is the caller's. */
#define STX_NTB_PART_COUNT    (STX_GAS_NTB + 0x00) /* u8 */
#define STX_NTB_PART_ID       (STX_GAS_NTB + 0x01) /* u8: the partition of the function used */
#define STX_NTB_EP_MAP        (STX_GAS_NTB + 0x04) /* u64: bit p: partition p has an NT endpoint */
#define STX_NTB_REQ_ID        (STX_GAS_NTB + 0x0c) /* u16: the host bridge's requester ID */
/* Per partition p: crosslink enabled, and the partitions it targets (low, high 32 bits). */
#define STX_NTB_XLINK(p)      (STX_GAS_NTB + 0x20 + 16 * (uint64_t)(p))
#define STX_NTB_XLINK_LOW(p)  (STX_NTB_XLINK(p) + 4)
#define STX_NTB_XLINK_HIGH(p) (STX_NTB_XLINK(p) + 8)

/* Control block of partition p: 8 KiB each. */
#define STX_CTRL(p)         (STX_GAS_NTB + 0x4000 + 0x2000 * (uint64_t)(p))
#define STX_PART_STATUS     0x00
#define STX_PART_OP         0x04
#define STX_PART_CTRL       0x08
#define STX_BAR_SETUP       0x0c
#define STX_BAR_ERROR       0x10
#define STX_LUT_ENTRIES     0x14 /* u16: LUT entries the partition has */
#define STX_LUT_OFFSET      0x16 /* u16 */
#define STX_LUT_ERROR       0x18
#define STX_RID_SIZE        0x1c /* u16: requester-ID entries the partition has */
#define STX_RID_OFFSET      0x1e /* u16 */
#define STX_RID_ERROR       0x20
#define STX_BAR_CTL(b)      (0x40 + 16 * (uint64_t)(b))
#define STX_BAR_WIN_SIZE(b) (0x44 + 16 * (uint64_t)(b))
#define STX_BAR_XLATE(b)    (0x48 + 16 * (uint64_t)(b)) /* u64 */
#define STX_BAR_EXT_SIZE(b) (0xa0 + 4 * (uint64_t)(b))  /* the window size's upper 32 bits */
#define STX_RID_ENTRY(i)    (0x400 + 4 * (uint64_t)(i))
#define STX_LUT_ENTRY(i)    (0x1000 + 8 * (uint64_t)(i)) /* u64 */
#define STX_RID_MAX         512 /* entries the block has room for (0x400 .. 0xc00) */
#define STX_LUT_MAX         512

/* Doorbell and message block of partition p (16 KiB each; the lower layer drives it). */
#define STX_DBMSG(p) (STX_GAS_NTB + 0x64000 + 0x4000 * (uint64_t)(p))

/* partition_op and partition_status (doc). */
enum stx_part_op { STX_OP_LOCK = 1, STX_OP_CFG = 2, STX_OP_RESET = 3 };
enum stx_part_status {
        STX_ST_NORMAL = 1,
        STX_ST_LOCKED = 2,
        STX_ST_LOCKING = 3,
        STX_ST_CONFIGURING = 4,
        STX_ST_RESETTING = 5,
};

/* partition_ctrl (doc): requester-ID protection off (the table is not enforced). */
#define STX_PART_CTRL_ID_PROT_DIS (1u << 0)

/* A BAR entry's ctl (doc). */
#define STX_BAR_VALID       (1u << 0)
#define STX_BAR_DIR_WIN_EN  (1u << 4)
#define STX_BAR_LUT_WIN_EN  (1u << 5)
#define STX_BAR_LUT_SHIFT   8  /* bits 13:8: log2 of a LUT entry's size */
#define STX_BAR_COUNT_SHIFT 14 /* bits 14 and up: LUT entries - 1 */

static inline uint32_t stx_bar_ctl(bool dir, uint32_t lut_count, unsigned lut_log2)
{
        uint32_t c = STX_BAR_VALID | (dir ? STX_BAR_DIR_WIN_EN : 0);
        if (lut_count)
                c |= STX_BAR_LUT_WIN_EN | (uint32_t)lut_log2 << STX_BAR_LUT_SHIFT |
                     (lut_count - 1) << STX_BAR_COUNT_SHIFT;
        return c;
}

static inline uint32_t stx_bar_lut_count(uint32_t ctl)
{
        return ctl & STX_BAR_LUT_WIN_EN ? (ctl >> STX_BAR_COUNT_SHIFT) + 1 : 0;
}

static inline unsigned stx_bar_lut_log2(uint32_t ctl)
{
        return ctl >> STX_BAR_LUT_SHIFT & 0x3f;
}

/*
 * A direct window's size (doc): the low 32 bits of the size (a multiple of 4 KiB) with
 * log2 of the size rounded up in bits 5:0, the high 32 bits in the BAR's ext entry.
 */
static inline uint32_t stx_win_size_lo(uint64_t size)
{
        if (!size)
                return 0;
        unsigned lg = size <= 1 ? 0 : 64 - (unsigned)__builtin_clzll(size - 1);
        return ((uint32_t)size & ~UINT32_C(0xfff)) | lg;
}

static inline uint64_t stx_win_size(uint32_t lo, uint32_t hi)
{
        return (uint64_t)hi << 32 | (lo & ~UINT32_C(0xfff));
}

/* A direct window's translation (doc): the target address with the partition in the low
 * bits (the address is aligned to the window's size, at least 4 KiB). */
static inline uint64_t stx_xlate(uint64_t addr, uint32_t part)
{
        return addr | part;
}

/* A LUT entry (doc): bit 0 enable, the destination partition from bit 1, the target address
 * aligned to the entry size (at least 4 KiB) in the upper bits. */
#define STX_LUT_EN         UINT64_C(1)
#define STX_LUT_PART_SHIFT 1
#define STX_LUT_PART_MASK  UINT64_C(0x3f)

static inline uint64_t stx_lut_entry(uint64_t addr, uint32_t part)
{
        return addr | (uint64_t)part << STX_LUT_PART_SHIFT | STX_LUT_EN;
}

static inline uint32_t stx_lut_part(uint64_t e)
{
        return (uint32_t)(e >> STX_LUT_PART_SHIFT & STX_LUT_PART_MASK);
}

static inline uint64_t stx_lut_addr(uint64_t e)
{
        return e & ~UINT64_C(0xfff);
}

/* A requester-ID entry (doc): (RID << 16) | enable; after a configure the switch shows the
 * proxy devfn it gave the requester in bits 8:1. */
#define STX_RID_EN UINT32_C(1)

static inline uint32_t stx_rid_entry(uint16_t rid)
{
        return (uint32_t)rid << 16 | STX_RID_EN;
}

static inline uint16_t stx_rid_of(uint32_t e)
{
        return (uint16_t)(e >> 16);
}

static inline uint32_t stx_rid_proxy(uint32_t e)
{
        return e >> 1 & 0xff;
}

#endif
