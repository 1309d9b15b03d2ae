/* backends/switchtec/part.c: partition edits as transactions (lock, edit, configure, check). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "part.h"

void stx_crash_point(const char *name)
{
        const char *at = getenv("NTBFAB_STX_CRASH_AT");
        if (at && !strcmp(at, name))
                _exit(86);
}

void stx_tx_init(struct stx_tx *tx)
{
        memset(tx, 0, sizeof(*tx));
}

void stx_tx_free(struct stx_tx *tx)
{
        free(tx->w);
        memset(tx, 0, sizeof(*tx));
}

static void tx_add(struct stx_tx *tx, uint64_t off, uint64_t v, uint8_t bytes)
{
        for (size_t i = 0; i < tx->n; i++)
                if (tx->w[i].off == off) { /* the last value written counts */
                        tx->w[i].val = v;
                        return;
                }
        if (tx->n == tx->cap) {
                size_t cap = tx->cap ? tx->cap * 2 : 16;
                struct stx_w *w = realloc(tx->w, cap * sizeof(*w));
                if (!w) {
                        tx->nomem = 1;
                        return;
                }
                tx->w = w;
                tx->cap = cap;
        }
        tx->w[tx->n++] = (struct stx_w){off, v, 0, bytes};
}

void stx_tx_w32(struct stx_tx *tx, uint64_t off, uint32_t v)
{
        tx_add(tx, off, v, 4);
}

void stx_tx_w64(struct stx_tx *tx, uint64_t off, uint64_t v)
{
        tx_add(tx, off, v, 8);
}

static void put(struct stx_part *p, const struct stx_w *w, bool old)
{
        uint64_t at = STX_CTRL(p->part) + w->off, v = old ? w->old : w->val;
        if (w->bytes == 8)
                stx_wr64(p->g, at, v);
        else
                stx_wr32(p->g, at, (uint32_t)v);
}

static void hold(struct stx_part *p)
{
        if (p->mu)
                pthread_mutex_lock(p->mu);
        if (p->lock_fd >= 0)
                while (flock(p->lock_fd, LOCK_EX) && errno == EINTR)
                        ;
}

static void unhold(struct stx_part *p)
{
        if (p->lock_fd >= 0)
                flock(p->lock_fd, LOCK_UN);
        if (p->mu)
                pthread_mutex_unlock(p->mu);
}

/*
 * Wait for the partition to be NORMAL or LOCKED and lock it. LOCKED with nobody of this host
 * editing (we hold the host's lock) is an edit left by a process that died between its lock
 * and its configure: take it over, the configure applies the registers as they are now and
 * the daemon's read-back clears what no record names.
 */
static int lock_part(struct stx_part *p, char *why, size_t whylen)
{
        char s[16];
        uint32_t st = 0;
        for (uint32_t i = 0; i <= p->tm.polls; i++) {
                st = stx_p32(p, STX_PART_STATUS);
                int e = stx_gas_take_err(p->g);
                if (e) {
                        snprintf(why, whylen,
                                 "partition %u: cannot read its status through MRPC: %s", p->part,
                                 strerror(-e));
                        return e;
                }
                if (st == STX_ST_NORMAL)
                        return stx_part_op(p->g, p->part, STX_OP_LOCK, &p->tm, why, whylen);
                if (st == STX_ST_LOCKED)
                        return 0;
                if (i < p->tm.polls) {
                        struct timespec ts = {p->tm.poll_us / 1000000,
                                              (long)(p->tm.poll_us % 1000000) * 1000};
                        nanosleep(&ts, NULL);
                }
        }
        snprintf(why, whylen,
                 "partition %u is busy: its status stayed %s for %u polls of %u us; the switch "
                 "is configuring or resetting it for another host; nothing was changed, try "
                 "again",
                 p->part, stx_status_name(st, s, sizeof(s)), p->tm.polls, p->tm.poll_us);
        return -ETIMEDOUT;
}

/* Write the old values back and configure again; a failure of that is added to why. */
static void roll_back(struct stx_part *p, struct stx_tx *tx, bool locked, char *why, size_t whylen)
{
        char w2[512];
        size_t n = strlen(why);
        int r = locked ? 0 : lock_part(p, w2, sizeof(w2));
        for (size_t i = 0; !r && i < tx->n; i++)
                put(p, &tx->w[i], true);
        if (!r)
                r = stx_part_op(p->g, p->part, STX_OP_CFG, &p->tm, w2, sizeof(w2));
        if (!r && stx_part_errors(p->g, p->part, w2, sizeof(w2)))
                r = -EIO;
        if (r && n < whylen)
                snprintf(why + n, whylen - n, "; undoing the edits failed too: %s", w2);
}

int stx_tx_commit(struct stx_part *p, struct stx_tx *tx,
                  int (*check)(struct stx_part *p, void *ctx, char *why, size_t whylen), void *ctx,
                  char *why, size_t whylen)
{
        why[0] = 0;
        if (tx->nomem) {
                snprintf(why, whylen, "out of memory");
                return -ENOMEM;
        }
        if (!tx->n && !check)
                return 0;
        hold(p);
        int r = lock_part(p, why, whylen);
        if (r) {
                unhold(p);
                return r;
        }
        for (size_t i = 0; i < tx->n; i++)
                tx->w[i].old =
                    tx->w[i].bytes == 8 ? stx_p64(p, tx->w[i].off) : stx_p32(p, tx->w[i].off);
        for (size_t i = 0; i < tx->n; i++)
                put(p, &tx->w[i], false);
        stx_crash_point("edited");
        r = stx_gas_take_err(p->g);
        if (r) {
                snprintf(why, whylen, "partition %u: writing its registers through MRPC failed: %s",
                         p->part, strerror(-r));
                roll_back(p, tx, true, why, whylen);
                unhold(p);
                return r;
        }
        r = stx_part_op(p->g, p->part, STX_OP_CFG, &p->tm, why, whylen);
        if (r == -ETIMEDOUT) {
                /* Still configuring: put the old values back, whatever it applies then. */
                for (size_t i = 0; i < tx->n; i++)
                        put(p, &tx->w[i], true);
                unhold(p);
                return r;
        }
        if (r) {
                unhold(p);
                return r;
        }
        char errs[1024];
        if (stx_part_errors(p->g, p->part, errs, sizeof(errs))) {
                snprintf(why, whylen, "partition %u: the switch refused the configuration: %s",
                         p->part, errs);
                roll_back(p, tx, false, why, whylen);
                unhold(p);
                return -EIO;
        }
        if (check && (r = check(p, ctx, why, whylen)) != 0) {
                roll_back(p, tx, false, why, whylen);
                unhold(p);
                return r;
        }
        unhold(p);
        return 0;
}

int stx_part_reset(struct stx_part *p, char *why, size_t whylen)
{
        hold(p);
        int r = lock_part(p, why, whylen);
        if (!r)
                r = stx_part_op(p->g, p->part, STX_OP_RESET, &p->tm, why, whylen);
        unhold(p);
        return r;
}
