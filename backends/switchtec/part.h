/* backends/switchtec/part.h: editing one NT partition's control block as a transaction. */
#ifndef NTBF_STX_PART_H
#define NTBF_STX_PART_H

#include <pthread.h>

#include "gas.h"

/*
 * Edits of a partition's registers take effect only when the partition is configured: lock
 * it, write the registers, configure it, read its error registers. An stx_tx collects the
 * writes, then stx_tx_commit runs that sequence; when the switch refuses (an error register
 * set) or the configure never settles, it writes back every register it changed and
 * configures again, so nothing is half applied, and says why in a sentence.
 */
struct stx_part {
        struct stx_gas *g;
        uint32_t part;
        struct stx_timing tm;
        pthread_mutex_t *mu; /* one partition's edits at a time in this process */
        int lock_fd;         /* flock(2)ed around edits against other processes; -1 none */
};

struct stx_w {
        uint64_t off; /* from the partition's control block */
        uint64_t val, old;
        uint8_t bytes; /* 4 or 8 */
};

struct stx_tx {
        struct stx_w *w;
        size_t n, cap;
        int nomem;
};

void stx_tx_init(struct stx_tx *tx);
void stx_tx_free(struct stx_tx *tx);
void stx_tx_w32(struct stx_tx *tx, uint64_t off, uint32_t v);
void stx_tx_w64(struct stx_tx *tx, uint64_t off, uint64_t v);

/*
 * Run the transaction on p. If check is set it runs after the configure, with the partition
 * configured and still in this process's hands (the proxy IDs are read there); a non-zero
 * return rolls back like a switch error. 0, or -EIO (the switch refused: why decodes its
 * error registers), -ETIMEDOUT, -ENOMEM, an MRPC failure.
 */
int stx_tx_commit(struct stx_part *p, struct stx_tx *tx,
                  int (*check)(struct stx_part *p, void *ctx, char *why, size_t whylen), void *ctx,
                  char *why, size_t whylen);

/* Registers of the partition's control block. */
static inline uint32_t stx_p32(struct stx_part *p, uint64_t off)
{
        return stx_rd32(p->g, STX_CTRL(p->part) + off);
}
static inline uint64_t stx_p64(struct stx_part *p, uint64_t off)
{
        return stx_rd64(p->g, STX_CTRL(p->part) + off);
}

/* Reset the partition (lock, reset): every LUT entry, window translation and requester
 * entry the switch keeps for it is cleared but what the firmware holds. */
int stx_part_reset(struct stx_part *p, char *why, size_t whylen);

/* Tests: the process exits (status 86) at the point named by NTBFAB_STX_CRASH_AT, e.g.
 * "edited" (registers written, the partition locked, not configured). */
void stx_crash_point(const char *name);

#endif
