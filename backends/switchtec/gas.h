/* backends/switchtec/gas.h: reaching a Switchtec's GAS (a mapping or MRPC) and the partition
 * op protocol. */
#ifndef NTBF_STX_GAS_H
#define NTBF_STX_GAS_H

#include <stddef.h>
#include <stdint.h>

#include "regs.h"

/*
 * A GAS is reached one of two ways, as switchtec-user does:
 *   - a mapping of the management function's BAR0 (sysfs resource0, or the register model's
 *     file): loads and stores;
 *   - the management device's MRPC commands GAS_READ and GAS_WRITE: one write(2) of the
 *     command and its payload, then one read(2) of the return value and the output
 *     (/dev/switchtecN; the register model answers on a Unix SOCK_SEQPACKET socket, which
 *     keeps the same one-write-one-read shape).
 * A write hook (tests) sees every store after it is made.
 */
struct stx_gas;

typedef void (*stx_write_hook)(void *ctx, struct stx_gas *g, uint64_t off, uint64_t val,
                               unsigned bytes);

struct stx_gas {
        volatile uint8_t *map; /* mapping mode */
        uint64_t size;
        int fd;    /* the mapped file, or the MRPC device */
        bool mrpc; /* through MRPC */
        int err;   /* first failure of an MRPC access since stx_gas_clear_err (-errno) */
        char path[256];
        stx_write_hook hook;
        void *hook_ctx;
};

/* Open a GAS: path is a file to map, or with mrpc the management device (or socket). why
 * gets a sentence on failure. */
int stx_gas_open(struct stx_gas *g, const char *path, bool mrpc, char *why, size_t whylen);
/* A GAS over memory the caller owns (tests: a buffer with a write hook). */
void stx_gas_over(struct stx_gas *g, void *mem, uint64_t size);
void stx_gas_close(struct stx_gas *g);

uint8_t stx_rd8(struct stx_gas *g, uint64_t off);
uint16_t stx_rd16(struct stx_gas *g, uint64_t off);
uint32_t stx_rd32(struct stx_gas *g, uint64_t off);
uint64_t stx_rd64(struct stx_gas *g, uint64_t off);
void stx_wr32(struct stx_gas *g, uint64_t off, uint32_t v);
void stx_wr64(struct stx_gas *g, uint64_t off, uint64_t v);
/* The first MRPC failure since the last call (0 if none), and clear it. */
int stx_gas_take_err(struct stx_gas *g);

/* One MRPC command over an open device fd: 0, or -errno; *ret the firmware's return value. */
int stx_mrpc_cmd(int fd, uint32_t cmd, const void *in, size_t inlen, void *out, size_t outlen,
                 uint32_t *ret);

/* ---- the partition op protocol ------------------------------------------------------------- */

/* How long to wait for a partition to settle: polls of poll_us (Linux's driver: 1000 polls
 * of 50 ms). */
struct stx_timing {
        uint32_t poll_us, polls;
};
#define STX_TIMING_DEFAULT ((struct stx_timing){50000, 1000})

/* "NORMAL", "LOCKED", ..., or "0x%x". */
const char *stx_status_name(uint32_t st, char *buf, size_t len);

/*
 * Write partition_op = op to partition part and wait for its final status (LOCK: LOCKED;
 * CFG and RESET: NORMAL). Each op is issued from a status other than its final one (RESET
 * from LOCKED), so a status that has not yet moved is told from one that arrived. 0, or
 * -ETIMEDOUT (still in `from` or the transition after polls), -EIO (another status), or
 * an MRPC failure; why says which and what to do.
 */
int stx_part_op(struct stx_gas *g, uint32_t part, enum stx_part_op op, const struct stx_timing *tm,
                char *why, size_t whylen);

/* The error registers after a configure, as a sentence an operator can act on (empty when
 * all three are 0). Returns true when any is set. */
bool stx_part_errors(struct stx_gas *g, uint32_t part, char *why, size_t whylen);
/* One error register's code as a sentence ("the LUT window exceeds BAR 2's size ..."). */
const char *stx_error_sentence(int kind, uint32_t code, char *buf, size_t len);
enum { STX_ERR_BAR, STX_ERR_LUT, STX_ERR_RID };

#endif
