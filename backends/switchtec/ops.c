/* backends/switchtec/ops.c: the switchtec backend's vtable: the linux-ntb backend for the data
 * path, the switch's GAS for LUT entries and requester IDs (docs/switchtec.md). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lntb.h"
#include "ntbfab/error.h"
#include "switchtec.h"

/*
 * Composition. Every handle holds the linux-ntb backend's handle of the same adapter (its
 * NTB through /dev/ntbfab-ntbN: windows, CPU maps, memory for export, doorbells,
 * scratchpads, messages, link, events, interrupt vectors, the relay) and, in the NTB's
 * owner (the node daemon, or a tool that runs without one), the switch's GAS:
 *
 *   - own: this host's NT partition. Its requester-ID table (rid_add, rid_del: an entry per
 *     function a mask covers, the proxy devfn the switch gives read back) and the
 *     crosslink partition's copies. Its LUT is not this host's: its entries lead into the
 *     peers' memory, and the peers program them.
 *   - peer[p]: the partition of the adapter at the other end of port p. peer_xlat_set of a
 *     slot of that adapter's LUT window writes the peer partition's LUT entry of that
 *     slot, leading into this host's partition, besides asking the lower layer to translate
 *     (on real hardware ntb_hw_switchtec's mw_set_trans writes the same entry). Records
 *     and the read-back at probe cover exactly these entries: those of the peer's LUT whose
 *     destination is this host's partition.
 *
 * Each of these keeps its records in the instance directory (a file per adapter and
 * partition) and is read back at probe: what a crash left is cleared, what a switch reset
 * lost is written again. Processes that reach the NTB through the daemon's relay do not
 * open the GAS: what would change the switch is the owner's (-EPERM, as linux-ntb does).
 */

struct swb {
        struct lntb_backend *lb;
        const struct ntbf_topo *t;
        char dir[120];
        bool owner;
        struct stx_timing tm; /* zero: Linux's (STX_TIMING_DEFAULT) */
};

struct swpeer {
        bool open;
        uint32_t adapter;
        const struct ntbf_window *lut; /* the peer's LUT window, or NULL */
        struct stx_dev d;
};

struct swh {
        struct swb *b;
        struct lntb *l;
        uint32_t adapter;
        bool gas; /* own and the peers' partitions are open */
        struct stx_dev own;
        struct swpeer peer[LNTB_MAX_PEERS];
        pthread_mutex_t mu; /* requester adds and deletes of several entries */
};

/* The adapter handle is the lower layer's struct lntb (so that what this backend does not
 * change is linux-ntb's own callbacks, lntb_op_*); this backend's state hangs off it. */
#define H(h)  ((struct swh *)((struct lntb *)(void *)(h))->upper)
#define SB(b) ((struct swb *)(void *)(b))

/* ---- where the switch is ------------------------------------------------------------------ */

/* The adapter's LUT window: the one window split into more than one slot, or NULL. */
static const struct ntbf_window *lut_window(const struct ntbf_adapter *ad)
{
        for (uint32_t w = 0; w < ad->nwin; w++)
                if (ad->win[w].slots > 1)
                        return &ad->win[w];
        return NULL;
}

/* A path of `switchtec:`, relative ones in the instance directory. */
static void stx_path(const struct swb *b, const char *p, char *out, size_t len)
{
        if (p[0] == '/' || !b->dir[0])
                snprintf(out, len, "%s", p);
        else
                snprintf(out, len, "%s/%s", b->dir, p);
}

/* What the adapter's `switchtec:` says, checked (without gas, the switch that owns its bdf in
 * sysfs, under the linux-ntb layer's root); the GAS config of partition part. */
static int stx_cfg(const struct swb *b, uint32_t adapter, int part, uint32_t owner_adapter,
                   char gas[256], char mrpc[256], char rec[384], struct stx_dev_cfg *c, char *why,
                   size_t whylen)
{
        const struct ntbf_topo *t = b->t;
        const struct ntbf_adapter *ad = &t->adapters[owner_adapter];
        const char *nn = t->nodes[ad->node].name;
        const struct ntbf_stx_params *x = &ad->stx;
        memset(c, 0, sizeof(*c));
        gas[0] = mrpc[0] = rec[0] = 0;
        bool use_mrpc = !strcmp(x->gas, "mrpc");
        if (!x->gas[0] || (use_mrpc && !x->device[0])) {
                /* Not in the file: the switch that owns the adapter's NT function. */
                struct stx_found fs;
                char w[512];
                if (stx_find_switch(b->lb->sys->root, ad->bdf, &fs, w, sizeof(w)))
                        return lntb_say(why, whylen, NTBF_ECONFIG, "adapter %s.%s: %s", nn,
                                        ad->name, w);
                if (fs.partition >= 0 && x->partition >= 0 && fs.partition != x->partition)
                        return lntb_say(why, whylen, NTBF_ECONFIG,
                                        "adapter %s.%s has switchtec: {partition: %d}, but its "
                                        "switch's management device %s (%s) is partition %d: "
                                        "correct the partition (or the adapter's bdf)",
                                        nn, ad->name, x->partition, fs.name, fs.function,
                                        fs.partition);
                snprintf(use_mrpc ? mrpc : gas, 256, "%s", use_mrpc ? fs.device : fs.gas);
        } else {
                stx_path(b, use_mrpc ? x->device : x->gas, use_mrpc ? mrpc : gas, 256);
        }
        if (use_mrpc)
                c->mrpc = mrpc;
        else
                c->gas = gas;
        c->partition = part;
        c->tm = b->tm;
        c->rid_reserved = t->adapters[adapter].p.rid_reserved;
        if (b->dir[0]) {
                snprintf(rec, 384, "%s/switchtec-%s.%s-p%d.records", b->dir, nn, ad->name, part);
                c->records = rec;
        }
        return 0;
}

/* The partition of adapter a: its switchtec: {partition}, or -1 (the GAS's own). */
static int partition_of(const struct ntbf_topo *t, uint32_t a)
{
        return t->adapters[a].stx.partition;
}

/* ---- the backend -------------------------------------------------------------------------- */

static bool adapter_wanted(const struct ntbf_backend_env *env, const struct ntbf_adapter *ad)
{
        return env->node == NTBF_NONE || ad->node == env->node;
}

static int sw_open(const struct ntbf_backend_env *env, struct ntbf_backend **out, char *why,
                   size_t whylen)
{
        if (!env || !env->topo || !out)
                return lntb_say(why, whylen, -EINVAL, "no topology");
        const struct ntbf_topo *t = env->topo;
        /* The cluster file's mistakes first, with their sentences (probe has none). */
        for (uint32_t a = 0; a < t->nadapters; a++) {
                const struct ntbf_adapter *ad = &t->adapters[a];
                if (!adapter_wanted(env, ad))
                        continue;
                const char *nn = t->nodes[ad->node].name;
                uint32_t luts = 0;
                for (uint32_t w = 0; w < ad->nwin; w++)
                        luts += ad->win[w].slots > 1;
                if (luts > 1)
                        return lntb_say(
                            why, whylen, NTBF_ECONFIG,
                            "adapter %s.%s has %u windows split into slots; a Switchtec "
                            "partition has one LUT window (at the start of its first "
                            "direct BAR): split only that one",
                            nn, ad->name, luts);
                if (!ad->bdf[0] &&
                    (!ad->stx.gas[0] || (!strcmp(ad->stx.gas, "mrpc") && !ad->stx.device[0])))
                        return lntb_say(why, whylen, NTBF_ECONFIG,
                                        "adapter %s.%s has neither a bdf (its switch is found "
                                        "from the NT function) nor switchtec: {gas: ...}: give "
                                        "it bdf: with the NT function's PCI address, or the "
                                        "switch management function's sysfs resource0 as gas "
                                        "(docs/switchtec.md)",
                                        nn, ad->name);
                for (uint32_t p = 0; p < NTBF_MAX_ADAPTER_PORTS; p++) {
                        uint32_t k = ad->link[p];
                        if (k == NTBF_NONE)
                                continue;
                        struct ntbf_port_ref o = ntbf_link_peer(
                            &t->links[k], (struct ntbf_port_ref){NTBF_PORT_ADAPTER, a, p});
                        if (o.kind == NTBF_PORT_ADAPTER && partition_of(t, o.obj) < 0)
                                return lntb_say(why, whylen, NTBF_ECONFIG,
                                                "adapter %s.%s: its peer %s.%s has no switchtec: "
                                                "{partition: N}: this host writes the LUT entries "
                                                "of the peer's partition, so the file must name it",
                                                nn, ad->name,
                                                t->nodes[t->adapters[o.obj].node].name,
                                                t->adapters[o.obj].name);
                }
        }
        struct swb *b = calloc(1, sizeof(*b));
        if (!b)
                return lntb_say(why, whylen, -ENOMEM, "out of memory");
        b->t = t;
        b->owner = env->relay == NULL;
        /* NTBFAB_STX_POLL=US,POLLS: how long to wait for a partition to settle (tests with
         * the register model, a switch slower than Linux's driver expects). */
        const char *pe = getenv("NTBFAB_STX_POLL");
        unsigned pu, pn;
        if (pe && sscanf(pe, "%u,%u", &pu, &pn) == 2 && pu && pn)
                b->tm = (struct stx_timing){pu, pn};
        if (env->dir && strlen(env->dir) >= sizeof(b->dir)) {
                free(b);
                return lntb_say(why, whylen, -ENAMETOOLONG,
                                "the instance directory %s is longer than %zu bytes; use a shorter "
                                "one (--dir)",
                                env->dir, sizeof(b->dir) - 1);
        }
        if (env->dir)
                snprintf(b->dir, sizeof(b->dir), "%s", env->dir);
        int r = lntb_open(env, NULL, "switchtec", &b->lb, why, whylen);
        if (r) {
                free(b);
                return r;
        }
        /* The owner reaches the switch: can it? (the GAS, the partitions) */
        for (uint32_t a = 0; b->owner && a < t->nadapters; a++) {
                const struct ntbf_adapter *ad = &t->adapters[a];
                if (!adapter_wanted(env, ad))
                        continue;
                char w[512];
                if (env->node == NTBF_NONE && lntb_check(b->lb, a, w, sizeof(w)) == NTBF_ENOTFOUND)
                        continue; /* with no node given: an adapter of another host */
                char gas[256], mrpc[256], rec[384];
                struct stx_dev_cfg c;
                struct stx_dev d;
                r = stx_cfg(b, a, partition_of(t, a), a, gas, mrpc, rec, &c, why, whylen);
                if (!r) {
                        c.records = NULL; /* only a look */
                        r = stx_dev_open(&d, &c, w, sizeof(w));
                        if (r)
                                lntb_say(why, whylen, r, "adapter %s.%s: %s",
                                         t->nodes[ad->node].name, ad->name, w);
                        else
                                stx_dev_close(&d);
                }
                if (r) {
                        lntb_close(b->lb);
                        free(b);
                        return r;
                }
        }
        *out = (struct ntbf_backend *)(void *)b;
        return 0;
}

static void sw_close(struct ntbf_backend *b)
{
        if (!b)
                return;
        lntb_close(SB(b)->lb);
        free(SB(b));
}

/* ---- adapters ----------------------------------------------------------------------------- */

static unsigned log2u(uint64_t v)
{
        return v ? 63 - (unsigned)__builtin_clzll(v) : 0;
}

/*
 * This partition's BAR holding the LUT window as the cluster file lays it out: the LUT
 * entries of its slots' size at the BAR's start, then the direct window that follows in the
 * same BAR, if any. Left alone when the switch has it so already.
 */
static int bar_setup(struct swh *h, char *why, size_t whylen)
{
        const struct ntbf_adapter *ad = &h->b->t->adapters[h->adapter];
        const struct ntbf_window *lw = lut_window(ad);
        if (!lw)
                return 0;
        uint32_t bar = ad->win_bar[lw - ad->win];
        uint64_t dir = 0;
        for (uint32_t w = 0; w < ad->nwin; w++)
                if (&ad->win[w] != lw && ad->win_bar[w] == bar && ad->win[w].slots == 1 &&
                    ad->win[w].base == lw->base + lw->size)
                        dir = ad->win[w].size;
        uint32_t ctl = stx_bar_ctl(dir != 0, lw->slots, log2u(lw->slot_size));
        struct stx_part *p = &h->own.p;
        if (stx_p32(p, STX_BAR_CTL(bar)) == ctl &&
            stx_p32(p, STX_BAR_WIN_SIZE(bar)) == stx_win_size_lo(dir) &&
            stx_p32(p, STX_BAR_EXT_SIZE(bar)) == (uint32_t)(dir >> 32))
                return 0;
        return stx_bar_setup(&h->own, bar, lw->slots, log2u(lw->slot_size), dir, why, whylen);
}

static void release_gas(struct swh *h)
{
        for (uint32_t p = 0; p < LNTB_MAX_PEERS; p++)
                if (h->peer[p].open)
                        stx_dev_close(&h->peer[p].d);
        if (h->gas)
                stx_dev_close(&h->own);
        h->gas = false;
}

/* Open this partition and the peers', set the BAR up, read everything back. */
static int open_gas(struct swh *h, char *why, size_t whylen)
{
        const struct ntbf_topo *t = h->b->t;
        const struct ntbf_adapter *ad = &t->adapters[h->adapter];
        char gas[256], mrpc[256], rec[384];
        struct stx_dev_cfg c;
        int r = stx_cfg(h->b, h->adapter, partition_of(t, h->adapter), h->adapter, gas, mrpc, rec,
                        &c, why, whylen);
        if (r)
                return r;
        c.no_lut = true; /* its LUT entries are the peers' */
        if ((r = stx_dev_open(&h->own, &c, why, whylen)))
                return r;
        h->gas = true;
        if ((r = bar_setup(h, why, whylen)))
                return r;
        struct stx_recon rc;
        if ((r = stx_reconcile(&h->own, &rc, why, whylen)))
                return r;
        for (uint32_t p = 0; p < h->l->npeers && p < LNTB_MAX_PEERS; p++) {
                uint32_t pa = h->l->peer[p];
                if (pa == NTBF_NONE)
                        continue;
                struct swpeer *sp = &h->peer[p];
                sp->adapter = pa;
                sp->lut = lut_window(&t->adapters[pa]);
                if (!sp->lut)
                        continue; /* direct windows only: the lower layer translates them */
                r = stx_cfg(h->b, h->adapter, partition_of(t, pa), h->adapter, gas, mrpc, rec, &c,
                            why, whylen);
                if (r)
                        return r;
                c.no_rid = true;
                c.lut_to_only = true;
                c.lut_to = (uint32_t)h->own.partition;
                c.lut_reserved = sp->lut->reserved;
                if ((r = stx_dev_open(&sp->d, &c, why, whylen)))
                        return r;
                sp->open = true;
                if ((r = stx_reconcile(&sp->d, &rc, why, whylen)))
                        return r;
        }
        (void)ad;
        return 0;
}

/* probe has no sentence to give: the open above said what the file lacks; the switch's own
 * refusals at probe go to stderr, where the daemon's log takes them. */
static int sw_probe(struct ntbf_backend *bb, uint32_t adapter, struct ntbf_adapter_h **out)
{
        struct swb *b = SB(bb);
        struct swh *h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->b = b;
        h->adapter = adapter;
        pthread_mutex_init(&h->mu, NULL);
        char why[512] = "";
        int r = lntb_probe(b->lb, adapter, &h->l, why, sizeof(why));
        if (!r && b->owner && (r = open_gas(h, why, sizeof(why))) != 0)
                fprintf(stderr, "ntbfab: switchtec: adapter %s.%s: %s\n",
                        b->t->nodes[b->t->adapters[adapter].node].name,
                        b->t->adapters[adapter].name, why);
        if (r) {
                release_gas(h);
                if (h->l)
                        lntb_release(h->l);
                pthread_mutex_destroy(&h->mu);
                free(h);
                return r;
        }
        h->l->upper = h;
        *out = (struct ntbf_adapter_h *)(void *)h->l;
        return 0;
}

static void sw_release(struct ntbf_adapter_h *hh)
{
        struct swh *h = H(hh);
        release_gas(h);
        lntb_release(h->l);
        pthread_mutex_destroy(&h->mu);
        free(h);
}

static int sw_caps(struct ntbf_adapter_h *hh, struct ntbf_caps *c)
{
        struct swh *h = H(hh);
        int r = lntb_caps(h->l, c);
        if (r)
                return r;
        const struct ntbf_adapter *ad = &h->b->t->adapters[h->adapter];
        /* Translations: what the lower layer does, inbound (the buffer's owner programs its
         * peer's slot, and this backend the peer's LUT entry). Outbound it does not program
         * the switch: not claimed. The requester table is the switch's, programmed here. */
        c->flags &= ~(uint32_t)(NTBF_CAP_XLAT_OUTBOUND | NTBF_CAP_NO_RID_TABLE);
        c->flags |= NTBF_CAP_RID_TABLE;
        c->rid_table = h->gas ? h->own.rid_size : ad->p.rid_table;
        c->rid_reserved = ad->p.rid_reserved;
        return 0;
}

/* ---- translation: the peer's LUT entry, then the lower layer -------------------------------- */

static struct swpeer *peer_of(struct swh *h, uint32_t peer)
{
        for (uint32_t p = 0; p < LNTB_MAX_PEERS; p++)
                if (h->peer[p].open && h->peer[p].adapter == peer)
                        return &h->peer[p];
        return NULL;
}

/* The LUT entry of slot `slot` of the peer's adapter, or -1 (a direct window's slot). */
static int lut_index(const struct swpeer *sp, uint32_t slot)
{
        if (!sp || !sp->lut || slot - sp->lut->first_slot >= sp->lut->slots)
                return -1;
        return (int)(slot - sp->lut->first_slot);
}

/* What this host's records hold for LUT entry idx of sp's partition (0: none). */
static uint64_t lut_recorded(struct swpeer *sp, uint32_t idx)
{
        uint64_t v = 0;
        pthread_mutex_lock(&sp->d.mu);
        for (size_t i = 0; i < sp->d.nrecs; i++)
                if (sp->d.recs[i].kind == 'L' && sp->d.recs[i].idx == idx)
                        v = sp->d.recs[i].val;
        pthread_mutex_unlock(&sp->d.mu);
        return v;
}

static void log_why(struct swh *h, const char *what, int r, const char *why)
{
        const struct ntbf_topo *t = h->b->t;
        fprintf(stderr, "ntbfab: switchtec: adapter %s.%s: %s: %s (%d)\n",
                t->nodes[t->adapters[h->adapter].node].name, t->adapters[h->adapter].name, what,
                why, r);
}

static int sw_peer_xlat_set(struct ntbf_adapter_h *hh, uint32_t peer, uint32_t slot,
                            uint64_t local_addr, uint64_t size)
{
        struct swh *h = H(hh);
        if (!h->gas)
                return lntb_peer_xlat_set(h->l, peer, slot, local_addr, size);
        struct swpeer *sp = peer_of(h, peer);
        int idx = lut_index(sp, slot);
        if (idx < 0)
                return lntb_peer_xlat_set(h->l, peer, slot, local_addr, size);
        if ((uint32_t)idx < sp->lut->reserved)
                return -EPERM;
        /* The lower layer's refusals of bad arguments come before the switch is touched. */
        const struct ntbf_window *w = sp->lut;
        if (!size || size > w->size_max || (w->size_align && size % w->size_align) ||
            (w->addr_align && local_addr % w->addr_align) || local_addr % w->slot_size)
                return -EINVAL;
        uint64_t old = lut_recorded(sp, (uint32_t)idx);
        char why[768];
        int r = stx_lut_set(&sp->d, (uint32_t)idx, local_addr, (uint32_t)h->own.partition, why,
                            sizeof(why));
        if (r) {
                log_why(h, "peer_xlat_set", r, why);
                return r;
        }
        r = lntb_peer_xlat_set(h->l, peer, slot, local_addr, size);
        if (r) { /* the entry as it was */
                int u = old ? stx_lut_set(&sp->d, (uint32_t)idx, stx_lut_addr(old),
                                          stx_lut_part(old), why, sizeof(why))
                            : stx_lut_clear(&sp->d, (uint32_t)idx, why, sizeof(why));
                if (u)
                        log_why(h, "undoing a LUT entry", u, why);
        }
        return r;
}

static int sw_peer_xlat_clear(struct ntbf_adapter_h *hh, uint32_t peer, uint32_t slot)
{
        struct swh *h = H(hh);
        struct swpeer *sp = h->gas ? peer_of(h, peer) : NULL;
        int idx = lut_index(sp, slot);
        if (idx >= 0 && (uint32_t)idx >= sp->lut->reserved && lut_recorded(sp, (uint32_t)idx)) {
                char why[768];
                int r = stx_lut_clear(&sp->d, (uint32_t)idx, why, sizeof(why));
                if (r) {
                        log_why(h, "peer_xlat_clear", r, why);
                        return r;
                }
        }
        return lntb_peer_xlat_clear(h->l, peer, slot);
}

/* ---- requester IDs ------------------------------------------------------------------------ */

/* The requester IDs entry r covers (a Switchtec entry holds one: a mask is expanded). */
static uint32_t rid_expand(const struct ntbf_rid *r, uint16_t *out)
{
        uint32_t n = 0;
        uint16_t base = r->rid & r->mask;
        for (uint32_t v = 0; v < 0x10000; v++)
                if (((uint16_t)v & r->mask) == base)
                        out[n++] = (uint16_t)v;
        return n;
}

/* Whether rid is one of the host's reserved entries (its CPU's: the switch's first ones). */
static bool rid_reserved(struct swh *h, uint16_t rid)
{
        for (uint32_t i = 0; i < h->own.rid_reserved && i < h->own.rid_size; i++) {
                uint32_t e = stx_p32(&h->own.p, STX_RID_ENTRY(i));
                if ((e & STX_RID_EN) && stx_rid_of(e) == rid)
                        return true;
        }
        return false;
}

static uint32_t rid_free(struct swh *h)
{
        uint32_t n = 0;
        for (uint32_t i = h->own.rid_reserved; i < h->own.rid_size; i++)
                n += !(stx_p32(&h->own.p, STX_RID_ENTRY(i)) & STX_RID_EN);
        return n;
}

/* Check r, take the handle's lock and expand r into *rids (rid_end frees it). */
static int rid_begin(struct swh *h, const struct ntbf_rid *r, uint16_t **rids, uint32_t *n)
{
        if (!r || r->node >= h->b->t->nnodes)
                return -EINVAL;
        if (!h->gas)
                return -EPERM;
        if (!(*rids = malloc(0x10000 * sizeof(**rids))))
                return -ENOMEM;
        pthread_mutex_lock(&h->mu);
        *n = rid_expand(r, *rids);
        return 0;
}

static int rid_end(struct swh *h, uint16_t *rids, const char *what, int rc, const char *why)
{
        if (rc && why[0])
                log_why(h, what, rc, why);
        pthread_mutex_unlock(&h->mu);
        free(rids);
        return rc;
}

static int sw_rid_add(struct ntbf_adapter_h *hh, const struct ntbf_rid *r, uint32_t *proxy)
{
        struct swh *h = H(hh);
        uint16_t *rids;
        uint32_t n, done = 0, px = NTBF_NONE;
        int rc = rid_begin(h, r, &rids, &n);
        if (rc)
                return rc;
        for (uint32_t i = 0; i < n && !rc; i++)
                if (rid_reserved(h, rids[i]) || stx_rid_recorded(&h->own, rids[i], NULL))
                        rc = -EEXIST;
        if (!rc && n > rid_free(h))
                rc = -ENOSPC;
        char why[768] = "";
        for (; !rc && done < n; done++) {
                uint32_t p = 0;
                rc = stx_rid_add(&h->own, rids[done], &p, why, sizeof(why));
                if (!rc && (rids[done] == r->rid || px == NTBF_NONE))
                        px = p;
        }
        /* All or nothing: a refusal takes back the functions added before it. */
        for (uint32_t i = 0; rc && i + 1 < done; i++) {
                char w2[512];
                stx_rid_del(&h->own, rids[i], w2, sizeof(w2));
        }
        /* The ID the far side sees: the proxy devfn on the bus of the NT endpoint (bus 0 of
         * the partition's view here: the GAS does not say which bus the far host gave it). */
        if (!rc && proxy)
                *proxy = px;
        return rid_end(h, rids, "rid_add", rc, why);
}

static int sw_rid_del(struct ntbf_adapter_h *hh, const struct ntbf_rid *r)
{
        struct swh *h = H(hh);
        uint16_t *rids;
        uint32_t n;
        int rc = rid_begin(h, r, &rids, &n);
        if (rc)
                return rc;
        for (uint32_t i = 0; i < n && !rc; i++)
                if (rid_reserved(h, rids[i]))
                        rc = -EPERM;
        for (uint32_t i = 0; i < n && !rc; i++)
                if (!stx_rid_recorded(&h->own, rids[i], NULL))
                        rc = -ENOENT;
        /* Every function, whatever one of them returns: an entry the switch kept is no longer
         * in the records, and the read-back at the next probe clears it. */
        char why[768] = "";
        int err = 0;
        for (uint32_t i = 0; !rc && i < n; i++) {
                char w2[512];
                int e = stx_rid_del(&h->own, rids[i], w2, sizeof(w2));
                if (e && !err) {
                        err = e;
                        snprintf(why, sizeof(why), "%s", w2);
                }
        }
        return rid_end(h, rids, "rid_del", rc ? rc : err, why);
}

/* The host's own devices behind the switch (config space, BAR placement): through sysfs, as
 * linux-ntb reaches them. */
static int sw_cfg_read(struct ntbf_backend *b, uint32_t device, uint32_t f, uint32_t off,
                       uint32_t size, uint32_t *val)
{
        return lntb_op_cfg_read((struct ntbf_backend *)(void *)SB(b)->lb, device, f, off, size,
                                val);
}

static int sw_cfg_write(struct ntbf_backend *b, uint32_t device, uint32_t f, uint32_t off,
                        uint32_t size, uint32_t val)
{
        return lntb_op_cfg_write((struct ntbf_backend *)(void *)SB(b)->lb, device, f, off, size,
                                 val);
}

static int sw_dev_bars(struct ntbf_backend *b, uint32_t device, uint32_t f, uint64_t addr[6],
                       uint64_t size[6])
{
        return lntb_op_dev_bars((struct ntbf_backend *)(void *)SB(b)->lb, device, f, addr, size);
}

const struct ntbf_backend_ops ntbf__switchtec_ops = {
    .name = "switchtec",
    .open = sw_open,
    .close = sw_close,
    .probe = sw_probe,
    .release = sw_release,
    .caps = sw_caps,
    .link_state = lntb_op_link_state,
    .link_enable = lntb_op_link_enable,
    .link_disable = lntb_op_link_disable,
    .set_events = lntb_op_set_events,
    .event_fd = lntb_op_event_fd,
    .process_events = lntb_op_process_events,
    .peer_xlat_set = sw_peer_xlat_set,
    .peer_xlat_clear = sw_peer_xlat_clear,
    .rid_add = sw_rid_add,
    .rid_del = sw_rid_del,
    .map_window = lntb_op_map_window,
    .unmap_window = lntb_op_unmap_window,
    .window_write = lntb_op_window_write,
    .mem_alloc = lntb_op_mem_alloc,
    .mem_free = lntb_op_mem_free,
    .mem_map = lntb_op_mem_map,
    .mem_unmap = lntb_op_mem_unmap,
    .host_map = lntb_op_host_map,
    .host_unmap = lntb_op_host_unmap,
    .db_read = lntb_op_db_read,
    .db_clear = lntb_op_db_clear,
    .db_set_mask = lntb_op_db_set_mask,
    .db_clear_mask = lntb_op_db_clear_mask,
    .peer_db_set = lntb_op_peer_db_set,
    .spad_read = lntb_op_spad_read,
    .spad_write = lntb_op_spad_write,
    .peer_spad_read = lntb_op_peer_spad_read,
    .peer_spad_write = lntb_op_peer_spad_write,
    .peer_msg_write = lntb_op_peer_msg_write,
    .msg_read = lntb_op_msg_read,
    .irq_alloc = lntb_op_irq_alloc,
    .irq_free = lntb_op_irq_free,
    .irq_trigger = lntb_op_irq_trigger,
    .serve = lntb_op_serve,
    .client_gone = lntb_op_client_gone,
    .host_bus = lntb_op_host_bus,
    .cfg_read = sw_cfg_read,
    .cfg_write = sw_cfg_write,
    .dev_bars = sw_dev_bars,
};
