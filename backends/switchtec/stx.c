/* backends/switchtec/stx.c: one NT partition's LUT and requester entries, recorded and read
 * back. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "switchtec.h"

/* ---- records ------------------------------------------------------------------------------ */

static struct stx_rec *rec_find(struct stx_dev *d, char kind, uint32_t idx)
{
        for (size_t i = 0; i < d->nrecs; i++)
                if (d->recs[i].kind == kind && d->recs[i].idx == idx)
                        return &d->recs[i];
        return NULL;
}

static struct stx_rec *rec_find_rid(struct stx_dev *d, char kind, uint16_t rid)
{
        for (size_t i = 0; i < d->nrecs; i++)
                if (d->recs[i].kind == kind && d->recs[i].val == rid)
                        return &d->recs[i];
        return NULL;
}

static int rec_put(struct stx_dev *d, const struct stx_rec *r)
{
        struct stx_rec *e = rec_find(d, r->kind, r->idx);
        if (e) {
                *e = *r;
                return 0;
        }
        if (d->nrecs == d->caprecs) {
                size_t cap = d->caprecs ? d->caprecs * 2 : 32;
                struct stx_rec *n = realloc(d->recs, cap * sizeof(*n));
                if (!n)
                        return -ENOMEM;
                d->recs = n;
                d->caprecs = cap;
        }
        d->recs[d->nrecs++] = *r;
        return 0;
}

static void rec_drop(struct stx_dev *d, char kind, uint32_t idx)
{
        struct stx_rec *e = rec_find(d, kind, idx);
        if (e)
                *e = d->recs[--d->nrecs];
}

/* Write the records (a temporary file, fsync, rename): a crash leaves the old or the new. */
static int rec_save(struct stx_dev *d, char *why, size_t whylen)
{
        if (!d->records[0])
                return 0;
        char tmp[sizeof(d->records) + 8];
        snprintf(tmp, sizeof(tmp), "%s.tmp", d->records);
        FILE *f = fopen(tmp, "w");
        if (!f)
                goto fail;
        fprintf(f, "# ntbfab switchtec records: partition %d\n", d->partition);
        for (size_t i = 0; i < d->nrecs; i++) {
                const struct stx_rec *r = &d->recs[i];
                fprintf(f, "%c %" PRIu32 " 0x%" PRIx64 " %" PRIu32 "\n", r->kind, r->idx, r->val,
                        r->proxy);
        }
        if (fflush(f) || fsync(fileno(f))) {
                fclose(f);
                goto fail;
        }
        if (fclose(f) || rename(tmp, d->records))
                goto fail;
        return 0;
fail:;
        int e = -errno;
        snprintf(why, whylen, "cannot write the switchtec records %s: %s", d->records,
                 strerror(errno));
        return e ? e : -EIO;
}

static int rec_load(struct stx_dev *d, char *why, size_t whylen)
{
        FILE *f = fopen(d->records, "r");
        if (!f) {
                if (errno == ENOENT)
                        return 0;
                snprintf(why, whylen, "cannot read the switchtec records %s: %s", d->records,
                         strerror(errno));
                return -errno;
        }
        char line[256];
        unsigned n = 0;
        int r = 0;
        while (!r && fgets(line, sizeof(line), f)) {
                n++;
                if (line[0] == '#')
                        continue;
                struct stx_rec e = {0};
                char kind;
                if (sscanf(line, "%c %" SCNu32 " %" SCNx64 " %" SCNu32, &kind, &e.idx, &e.val,
                           &e.proxy) != 4 ||
                    (kind != 'L' && kind != 'R' && kind != 'X')) {
                        snprintf(why, whylen,
                                 "%s:%u: not a switchtec record (KIND INDEX VALUE PROXY); the "
                                 "file is the backend's own: remove it to drop what it "
                                 "records, and the read-back clears the switch's entries",
                                 d->records, n);
                        r = -EINVAL;
                        break;
                }
                e.kind = kind;
                r = rec_put(d, &e);
        }
        fclose(f);
        return r;
}

/* ---- opening ------------------------------------------------------------------------------ */

int stx_dev_open(struct stx_dev *d, const struct stx_dev_cfg *cfg, char *why, size_t whylen)
{
        memset(d, 0, sizeof(*d));
        d->g.fd = -1;
        d->xlink = -1;
        if (!cfg->mrpc && !cfg->gas) {
                snprintf(why, whylen,
                         "where is the switch? give the GAS file (sysfs resource0 of its "
                         "management function) or its management device for MRPC");
                return -EINVAL;
        }
        int r = cfg->mrpc ? stx_gas_open(&d->g, cfg->mrpc, true, why, whylen)
                          : stx_gas_open(&d->g, cfg->gas, false, why, whylen);
        if (r)
                return r;
        uint64_t ep = stx_rd64(&d->g, STX_NTB_EP_MAP);
        uint32_t own = stx_rd8(&d->g, STX_NTB_PART_ID);
        if ((r = stx_gas_take_err(&d->g))) {
                snprintf(why, whylen, "%s: cannot read the switch's NTB info block: %s", d->g.path,
                         strerror(-r));
                goto fail;
        }
        d->partition = cfg->partition >= 0 ? cfg->partition : (int)own;
        if (d->partition >= STX_MAX_PARTS || !(ep >> d->partition & 1)) {
                snprintf(why, whylen,
                         "%s: partition %d has no NT endpoint (the switch's ep_map is 0x%016" PRIx64
                         "); set switchtec: {partition: N} to one of its bits, or check the "
                         "switch's configuration file",
                         d->g.path, d->partition, ep);
                r = -ENODEV;
                goto fail;
        }
        uint64_t c = STX_CTRL((uint32_t)d->partition);
        d->lut_entries = stx_rd16(&d->g, c + STX_LUT_ENTRIES);
        d->rid_size = stx_rd16(&d->g, c + STX_RID_SIZE);
        if (d->lut_entries > STX_LUT_MAX)
                d->lut_entries = STX_LUT_MAX;
        if (d->rid_size > STX_RID_MAX)
                d->rid_size = STX_RID_MAX;
        uint32_t xl = stx_rd32(&d->g, STX_NTB_XLINK((uint32_t)d->partition));
        uint64_t tgt = stx_rd32(&d->g, STX_NTB_XLINK_LOW((uint32_t)d->partition)) |
                       (uint64_t)stx_rd32(&d->g, STX_NTB_XLINK_HIGH((uint32_t)d->partition)) << 32;
        if (xl & 1 && tgt)
                d->xlink = __builtin_ctzll(tgt);
        d->lut_reserved = cfg->lut_reserved;
        d->rid_reserved = cfg->rid_reserved;
        d->no_rid = cfg->no_rid;
        d->no_lut = cfg->no_lut;
        d->lut_to_only = cfg->lut_to_only;
        d->lut_to = cfg->lut_to;
        pthread_mutex_init(&d->mu, NULL);
        d->p = (struct stx_part){.g = &d->g,
                                 .part = (uint32_t)d->partition,
                                 .tm = cfg->tm.polls ? cfg->tm : STX_TIMING_DEFAULT,
                                 .mu = &d->mu,
                                 .lock_fd = -1};
        if (cfg->records) {
                snprintf(d->records, sizeof(d->records), "%s", cfg->records);
                char lk[sizeof(d->records) + 8];
                snprintf(lk, sizeof(lk), "%s.lock", cfg->records);
                d->p.lock_fd = open(lk, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
                if (d->p.lock_fd < 0) {
                        r = -errno;
                        snprintf(why, whylen, "cannot open the switchtec lock file %s: %s", lk,
                                 strerror(errno));
                        goto fail_mu;
                }
                if ((r = rec_load(d, why, whylen)))
                        goto fail_mu;
        }
        return 0;
fail_mu:
        if (d->p.lock_fd >= 0)
                close(d->p.lock_fd);
        pthread_mutex_destroy(&d->mu);
        free(d->recs);
fail:
        stx_gas_close(&d->g);
        return r;
}

void stx_dev_close(struct stx_dev *d)
{
        if (d->p.lock_fd >= 0)
                close(d->p.lock_fd);
        pthread_mutex_destroy(&d->mu);
        free(d->recs);
        stx_gas_close(&d->g);
        memset(d, 0, sizeof(*d));
        d->g.fd = -1;
}

/* ---- reading back ------------------------------------------------------------------------- */

static struct stx_part xpart(struct stx_dev *d)
{
        struct stx_part x = d->p;
        x.part = (uint32_t)d->xlink;
        return x;
}

/* Make one partition's entries [from, n) of kind equal the records of rkind. */
static void reconcile_table(struct stx_dev *d, struct stx_part *p, struct stx_tx *tx, bool lut,
                            char rkind, uint32_t from, uint32_t n, uint32_t *stale,
                            uint32_t *restored, uint32_t *kept)
{
        for (uint32_t i = from; i < n; i++) {
                struct stx_rec *rec = rec_find(d, rkind, i);
                if (lut) {
                        uint64_t hw = stx_p64(p, STX_LUT_ENTRY(i));
                        if (rec && hw == rec->val) {
                                (*kept)++;
                        } else if (rec) {
                                stx_tx_w64(tx, STX_LUT_ENTRY(i), rec->val);
                                (*restored)++;
                        } else if ((hw & STX_LUT_EN) &&
                                   (!d->lut_to_only || stx_lut_part(hw) == d->lut_to)) {
                                stx_tx_w64(tx, STX_LUT_ENTRY(i), 0);
                                (*stale)++;
                        }
                } else {
                        uint32_t hw = stx_p32(p, STX_RID_ENTRY(i));
                        bool on = hw & STX_RID_EN;
                        if (rec && on && stx_rid_of(hw) == rec->val) {
                                (*kept)++;
                        } else if (rec) {
                                stx_tx_w32(tx, STX_RID_ENTRY(i), stx_rid_entry((uint16_t)rec->val));
                                (*restored)++;
                        } else if (on) {
                                stx_tx_w32(tx, STX_RID_ENTRY(i), 0);
                                (*stale)++;
                        }
                }
        }
}

/* After a configure that (re)wrote requester entries, the proxies the switch gave them. */
static int read_proxies(struct stx_part *p, void *ctx, char *why, size_t whylen)
{
        struct stx_dev *d = ctx;
        for (size_t i = 0; i < d->nrecs; i++) {
                struct stx_rec *r = &d->recs[i];
                if (r->kind != 'R')
                        continue;
                uint32_t e = stx_p32(p, STX_RID_ENTRY(r->idx));
                if (!(e & STX_RID_EN) || stx_rid_of(e) != r->val) {
                        snprintf(why, whylen,
                                 "partition %u: requester entry %u reads 0x%08x after the "
                                 "configure, not the %04" PRIx64 " written",
                                 p->part, r->idx, e, r->val);
                        return -EIO;
                }
                r->proxy = stx_rid_proxy(e);
        }
        return 0;
}

int stx_reconcile(struct stx_dev *d, struct stx_recon *out, char *why, size_t whylen)
{
        struct stx_recon rc = {0};
        struct stx_tx tx, xtx;
        stx_tx_init(&tx);
        stx_tx_init(&xtx);
        pthread_mutex_lock(&d->mu);
        if (!d->no_lut)
                reconcile_table(d, &d->p, &tx, true, 'L', d->lut_reserved, d->lut_entries,
                                &rc.stale_lut, &rc.restored_lut, &rc.kept);
        if (!d->no_rid)
                reconcile_table(d, &d->p, &tx, false, 'R', d->rid_reserved, d->rid_size,
                                &rc.stale_rid, &rc.restored_rid, &rc.kept);
        struct stx_part x = xpart(d);
        if (d->xlink >= 0 && !d->no_rid) {
                uint32_t xn = stx_rd16(&d->g, STX_CTRL(x.part) + STX_RID_SIZE);
                reconcile_table(d, &x, &xtx, false, 'X', d->rid_reserved,
                                xn > STX_RID_MAX ? STX_RID_MAX : xn, &rc.stale_rid,
                                &rc.restored_rid, &rc.kept);
        }
        int r = stx_gas_take_err(&d->g);
        if (r)
                snprintf(why, whylen, "partition %d: reading its tables back failed: %s",
                         d->partition, strerror(-r));
        /* The proxies are read again even when nothing changed: the records may predate a
         * switch reset that gave new ones. */
        pthread_mutex_unlock(&d->mu);
        if (!r)
                r = stx_tx_commit(&d->p, &tx, read_proxies, d, why, whylen);
        if (!r && d->xlink >= 0 && !d->no_rid)
                r = stx_tx_commit(&x, &xtx, NULL, NULL, why, whylen);
        pthread_mutex_lock(&d->mu);
        if (!r)
                r = rec_save(d, why, whylen);
        pthread_mutex_unlock(&d->mu);
        stx_tx_free(&tx);
        stx_tx_free(&xtx);
        if (out)
                *out = rc;
        return r;
}

/* ---- programming -------------------------------------------------------------------------- */

/* One register of partition p written in a transaction of its own. */
static int write_one(struct stx_part *p, uint64_t off, uint64_t v, bool wide,
                     int (*check)(struct stx_part *p, void *ctx, char *why, size_t whylen),
                     void *ctx, char *why, size_t whylen)
{
        struct stx_tx tx;
        stx_tx_init(&tx);
        if (wide)
                stx_tx_w64(&tx, off, v);
        else
                stx_tx_w32(&tx, off, (uint32_t)v);
        int r = stx_tx_commit(p, &tx, check, ctx, why, whylen);
        stx_tx_free(&tx);
        return r;
}

/* Record an entry the switch took. */
static int record(struct stx_dev *d, const struct stx_rec *rec, char *why, size_t whylen)
{
        pthread_mutex_lock(&d->mu);
        int r = rec_put(d, rec);
        if (r)
                snprintf(why, whylen, "out of memory recording partition %d's entry", d->partition);
        else
                r = rec_save(d, why, whylen);
        pthread_mutex_unlock(&d->mu);
        return r;
}

int stx_bar_setup(struct stx_dev *d, uint32_t bar, uint32_t lut_count, unsigned lut_log2,
                  uint64_t dir_size, char *why, size_t whylen)
{
        if (bar > 5) {
                snprintf(why, whylen, "BAR %u: a partition has BARs 0 to 5", bar);
                return -EINVAL;
        }
        struct stx_tx tx;
        stx_tx_init(&tx);
        stx_tx_w32(&tx, STX_BAR_CTL(bar), stx_bar_ctl(dir_size != 0, lut_count, lut_log2));
        stx_tx_w32(&tx, STX_BAR_WIN_SIZE(bar), stx_win_size_lo(dir_size));
        stx_tx_w32(&tx, STX_BAR_EXT_SIZE(bar), (uint32_t)(dir_size >> 32));
        int r = stx_tx_commit(&d->p, &tx, NULL, NULL, why, whylen);
        stx_tx_free(&tx);
        return r;
}

int stx_lut_set(struct stx_dev *d, uint32_t idx, uint64_t addr, uint32_t dest, char *why,
                size_t whylen)
{
        if (idx < d->lut_reserved || idx >= d->lut_entries) {
                snprintf(why, whylen,
                         "partition %d: LUT entry %u is not programmable: entries %u to %u are "
                         "(below %u the lower layer keeps them; the partition has %u)",
                         d->partition, idx, d->lut_reserved,
                         d->lut_entries ? d->lut_entries - 1 : 0, d->lut_reserved, d->lut_entries);
                return -EPERM;
        }
        if (addr & 0xfff || dest >= STX_MAX_PARTS) {
                snprintf(why, whylen,
                         "partition %d: LUT entry %u: address 0x%" PRIx64 " partition %u: the "
                         "address must be 4 KiB aligned and the partition 0..47",
                         d->partition, idx, addr, dest);
                return -EINVAL;
        }
        struct stx_rec rec = {'L', idx, stx_lut_entry(addr, dest), 0};
        int r = write_one(&d->p, STX_LUT_ENTRY(idx), rec.val, true, NULL, NULL, why, whylen);
        if (r)
                return r;
        stx_crash_point("lut-programmed");
        return record(d, &rec, why, whylen);
}

int stx_lut_clear(struct stx_dev *d, uint32_t idx, char *why, size_t whylen)
{
        if (idx < d->lut_reserved || idx >= d->lut_entries) {
                snprintf(why, whylen, "partition %d: LUT entry %u is not programmable",
                         d->partition, idx);
                return -EPERM;
        }
        pthread_mutex_lock(&d->mu);
        rec_drop(d, 'L', idx);
        int r = rec_save(d, why, whylen);
        pthread_mutex_unlock(&d->mu);
        if (r)
                return r;
        stx_crash_point("lut-unrecorded");
        return write_one(&d->p, STX_LUT_ENTRY(idx), 0, true, NULL, NULL, why, whylen);
}

struct rid_ctx {
        uint32_t idx;
        uint16_t rid;
        uint32_t proxy;
};

static int rid_check(struct stx_part *p, void *ctx, char *why, size_t whylen)
{
        struct rid_ctx *c = ctx;
        uint32_t e = stx_p32(p, STX_RID_ENTRY(c->idx));
        if (!(e & STX_RID_EN) || stx_rid_of(e) != c->rid) {
                snprintf(why, whylen,
                         "partition %u: requester entry %u reads 0x%08x after the configure, "
                         "not %04x enabled",
                         p->part, c->idx, e, c->rid);
                return -EIO;
        }
        c->proxy = stx_rid_proxy(e);
        return 0;
}

/* A free requester entry of partition p (size entries, the first `reserved` kept), or -1. */
static int rid_free(struct stx_dev *d, struct stx_part *p, char kind, uint32_t size)
{
        for (uint32_t i = d->rid_reserved; i < size; i++)
                if (!(stx_p32(p, STX_RID_ENTRY(i)) & STX_RID_EN) && !rec_find(d, kind, i))
                        return (int)i;
        return -1;
}

int stx_rid_add(struct stx_dev *d, uint16_t rid, uint32_t *proxy, char *why, size_t whylen)
{
        pthread_mutex_lock(&d->mu);
        struct stx_rec *have = rec_find_rid(d, 'R', rid);
        if (have) {
                *proxy = have->proxy;
                pthread_mutex_unlock(&d->mu);
                return 0;
        }
        int idx = rid_free(d, &d->p, 'R', d->rid_size);
        pthread_mutex_unlock(&d->mu);
        if (idx < 0) {
                snprintf(why, whylen,
                         "partition %d: its requester-ID table is full (%u entries, %u the "
                         "host's); return a borrowed device first (ntbfab switchtec rid lists "
                         "them)",
                         d->partition, d->rid_size, d->rid_reserved);
                return -ENOSPC;
        }
        struct rid_ctx c = {(uint32_t)idx, rid, 0};
        int r = write_one(&d->p, STX_RID_ENTRY(c.idx), stx_rid_entry(rid), false, rid_check, &c,
                          why, whylen);
        if (r)
                return r;
        stx_crash_point("rid-programmed");
        struct stx_rec rec = {'R', c.idx, rid, c.proxy};
        if ((r = record(d, &rec, why, whylen)) != 0)
                return r;
        if (d->xlink >= 0) {
                /* The crosslink partition sees the requester as its proxy ID (bus 0 of the
                 * virtual partition, the proxy devfn): its table must let that through. */
                struct stx_part x = xpart(d);
                uint32_t xn = stx_rd16(&d->g, STX_CTRL(x.part) + STX_RID_SIZE);
                pthread_mutex_lock(&d->mu);
                int xi = rid_free(d, &x, 'X', xn > STX_RID_MAX ? STX_RID_MAX : xn);
                pthread_mutex_unlock(&d->mu);
                if (xi < 0) {
                        snprintf(why, whylen,
                                 "crosslink partition %u: its requester-ID table is full; the "
                                 "proxy ID %02x of %04x cannot cross",
                                 x.part, c.proxy, rid);
                        r = -ENOSPC;
                } else {
                        r = write_one(&x, STX_RID_ENTRY((uint32_t)xi),
                                      stx_rid_entry((uint16_t)c.proxy), false, NULL, NULL, why,
                                      whylen);
                }
                if (!r) {
                        struct stx_rec xr = {'X', (uint32_t)xi, c.proxy, 0};
                        r = record(d, &xr, why, whylen);
                }
                if (r) { /* all or nothing: take the requester entry back */
                        char w2[256];
                        stx_rid_del(d, rid, w2, sizeof(w2));
                        return r;
                }
        }
        *proxy = c.proxy;
        return 0;
}

int stx_rid_del(struct stx_dev *d, uint16_t rid, char *why, size_t whylen)
{
        pthread_mutex_lock(&d->mu);
        struct stx_rec *have = rec_find_rid(d, 'R', rid);
        if (!have) {
                pthread_mutex_unlock(&d->mu);
                snprintf(why, whylen, "partition %d: requester %04x is not in this host's records",
                         d->partition, rid);
                return -ENOENT;
        }
        uint32_t idx = have->idx, proxy = have->proxy;
        struct stx_rec *xr = d->xlink >= 0 ? rec_find_rid(d, 'X', (uint16_t)proxy) : NULL;
        int xi = xr ? (int)xr->idx : -1;
        rec_drop(d, 'R', idx);
        if (xi >= 0)
                rec_drop(d, 'X', (uint32_t)xi);
        int r = rec_save(d, why, whylen);
        pthread_mutex_unlock(&d->mu);
        if (r)
                return r;
        stx_crash_point("rid-unrecorded");
        r = write_one(&d->p, STX_RID_ENTRY(idx), 0, false, NULL, NULL, why, whylen);
        if (!r && xi >= 0) {
                struct stx_part x = xpart(d);
                r = write_one(&x, STX_RID_ENTRY((uint32_t)xi), 0, false, NULL, NULL, why, whylen);
        }
        return r;
}

bool stx_rid_recorded(struct stx_dev *d, uint16_t rid, uint32_t *proxy)
{
        pthread_mutex_lock(&d->mu);
        struct stx_rec *have = rec_find_rid(d, 'R', rid);
        if (have && proxy)
                *proxy = have->proxy;
        pthread_mutex_unlock(&d->mu);
        return have != NULL;
}
