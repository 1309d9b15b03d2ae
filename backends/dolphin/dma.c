/* backends/dolphin/dma.c: DMA through SISCI's DMA queues, one queue per channel. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "dolphin.h"

/*
 * SISCI moves data between a local segment and a remote one (SCIStartDmaTransfer), not
 * between addresses. A transfer of the vtable (host-physical source and destination) becomes:
 * the window side is the slot's connection (its segment on the far node); the local side is
 * this process's memory for export holding the range, else a segment attached to the range
 * for the transfer's time; a copy between two local ranges goes to a loopback connection of
 * this node to the destination's segment. A slot that is not programmed completes at once
 * with NTBF_EUNPROGRAMMED. Completions come from the library's callbacks (its thread) and
 * leave in submission order.
 */

#define DOL_DMA_ENTRIES 64 /* transfers in flight per channel (the queue's maxEntries) */

struct dol_job {
        struct dol_job *next;
        uint64_t cookie;
        int status;
        _Atomic bool done;
        struct dol_conn *c;    /* the slot's connection (window side), or NULL */
        struct dol_seg tl, tr; /* segments attached for this transfer (source, target) */
        bool has_tl, has_tr;
        sci_remote_segment_t lb; /* loopback connection to a local target */
        bool has_lb;
};

struct dol_chan {
        struct dol_chan *next;
        uint32_t chan;
        sci_dma_queue_t dq;
        struct dol_job *head, *tail;
};

static sci_callback_action_t done_cb(void *arg, sci_dma_queue_t q, sci_error_t e)
{
        (void)q;
        struct dol_job *j = arg;
        j->status = e == SCI_ERR_OK ? 0 : e == SCI_ERR_TRANSFER_FAILED ? -EIO : ntbf__dol_err(e);
        atomic_store(&j->done, true);
        return SCI_CALLBACK_CONTINUE;
}

static struct dol_chan *chan_get(struct ntbf_adapter_h *h, uint32_t chan, int *err)
{
        for (struct dol_chan *c = h->chans; c; c = c->next)
                if (c->chan == chan)
                        return c;
        struct dol_lib *L = h->L;
        struct dol_chan *c = calloc(1, sizeof(*c));
        if (!c) {
                *err = -ENOMEM;
                return NULL;
        }
        sci_error_t e = SCI_ERR_OK;
        SCI(L, CreateDMAQueue, L->sd, &c->dq, h->ano, DOL_DMA_ENTRIES, 0, &e);
        if (e != SCI_ERR_OK) {
                free(c);
                *err = ntbf__dol_err(e);
                return NULL;
        }
        c->chan = chan;
        c->next = h->chans;
        h->chans = c;
        return c;
}

static void job_free(struct ntbf_adapter_h *h, struct dol_job *j)
{
        sci_error_t e;
        if (j->has_lb)
                SCI(h->L, DisconnectSegment, j->lb, 0, &e);
        if (j->has_tl)
                ntbf__dol_detach(h, &j->tl);
        if (j->has_tr)
                ntbf__dol_detach(h, &j->tr);
        ntbf__dol_conn_put(h, j->c);
        free(j);
}

/* A local segment holding [addr, + len): memory for export, else one attached for j. */
static int local_seg(struct ntbf_adapter_h *h, uint64_t addr, uint64_t len, struct dol_seg *tmp,
                     bool *attached, sci_local_segment_t *seg, uint64_t *off, uint32_t *id)
{
        struct dol_seg *s = ntbf__dol_mem_find(h, addr, len, NULL);
        if (s) {
                *seg = s->seg;
                *off = addr - s->bus;
                *id = s->id;
                return 0;
        }
        uint64_t lo = addr & ~(DOL_PAGE - 1), hi = (addr + len + DOL_PAGE - 1) & ~(DOL_PAGE - 1);
        int r = ntbf__dol_attach(h, lo, hi - lo, false, tmp);
        if (r)
                return r;
        *attached = true;
        *seg = tmp->seg;
        *off = addr - lo;
        *id = tmp->id;
        return 0;
}

int ntbf__dol_dma_submit(struct ntbf_adapter_h *h, uint32_t chan, uint64_t src, uint64_t dst,
                         uint64_t len, uint64_t cookie)
{
        const struct ntbf_caps *caps = &h->caps;
        uint64_t al = caps->dma_align ? caps->dma_align : 1;
        if (!(caps->flags & NTBF_CAP_DMA))
                return NTBF_EUNSUPPORTED;
        if (chan >= caps->dma_channels || !len || len > caps->dma_max_len || src % al || dst % al ||
            len % al || src + len < src || dst + len < dst)
                return -EINVAL;
        struct dol_lib *L = h->L;
        uint32_t ws, wd, ks, kd;
        uint64_t is, id;
        bool rs = !ntbf__dol_win_slot(h, src, &ws, &ks, &is);
        bool rd = !ntbf__dol_win_slot(h, dst, &wd, &kd, &id);
        if (rs && rd)
                return NTBF_EUNSUPPORTED; /* window to window: SISCI has no such transfer */
        struct dol_job *j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        j->cookie = cookie;
        int r = 0;
        pthread_mutex_lock(&h->lock);
        struct dol_chan *ch = chan_get(h, chan, &r);
        if (!ch) {
                pthread_mutex_unlock(&h->lock);
                free(j);
                return r;
        }
        sci_local_segment_t lseg = NULL;
        sci_remote_segment_t rseg = NULL;
        uint64_t loff = 0, roff = 0;
        uint32_t sid = 0;
        unsigned flags = SC(L, SCI_FLAG_USE_CALLBACK);
        bool now = false; /* completes at once (an unprogrammed slot) */
        if (rs || rd) {
                uint32_t k = rs ? ks : kd;
                uint64_t in = rs ? is : id, la = rs ? dst : src;
                int ce = 0;
                j->c = ntbf__dol_conn_get(h, k, &ce);
                if (!j->c || in >= j->c->size || len > j->c->size - in) {
                        j->status = NTBF_EUNPROGRAMMED;
                        now = true;
                } else {
                        rseg = j->c->rseg;
                        roff = in;
                        r = local_seg(h, la, len, &j->tl, &j->has_tl, &lseg, &loff, &sid);
                        if (rs)
                                flags |= SC(L, SCI_FLAG_DMA_READ);
                }
        } else {
                /* Local to local: the target is reached through a connection to itself. */
                uint64_t doff;
                uint32_t did = 0;
                sci_local_segment_t dseg;
                r = local_seg(h, src, len, &j->tl, &j->has_tl, &lseg, &loff, &sid);
                if (!r)
                        r = local_seg(h, dst, len, &j->tr, &j->has_tr, &dseg, &doff, &did);
                if (!r) {
                        sci_error_t e = SCI_ERR_OK;
                        SCI(L, ConnectSegment, L->sd, &j->lb, h->node_id, did, h->ano, NULL, NULL,
                            0, 0, &e);
                        if (e != SCI_ERR_OK)
                                r = ntbf__dol_err(e);
                        j->has_lb = !r;
                        rseg = j->lb;
                        roff = doff;
                }
        }
        if (!r && !now) {
                sci_error_t e = SCI_ERR_OK;
                SCI(L, StartDmaTransfer, ch->dq, lseg, rseg, loff, len, roff, done_cb, j, flags,
                    &e);
                if (e != SCI_ERR_OK)
                        r = ntbf__dol_err(e); /* a full queue is -EBUSY */
        }
        if (r) {
                pthread_mutex_unlock(&h->lock);
                job_free(h, j);
                return r;
        }
        if (now)
                atomic_store(&j->done, true);
        if (ch->tail)
                ch->tail->next = j;
        else
                ch->head = j;
        ch->tail = j;
        pthread_mutex_unlock(&h->lock);
        return 0;
}

int ntbf__dol_dma_poll(struct ntbf_adapter_h *h, uint32_t chan, uint64_t *cookies, int *status,
                       unsigned max)
{
        if (!(h->caps.flags & NTBF_CAP_DMA))
                return NTBF_EUNSUPPORTED;
        if (chan >= h->caps.dma_channels || (max && (!cookies || !status)))
                return -EINVAL;
        unsigned n = 0;
        pthread_mutex_lock(&h->lock);
        struct dol_chan *ch = h->chans;
        while (ch && ch->chan != chan)
                ch = ch->next;
        while (ch && n < max && ch->head && atomic_load(&ch->head->done)) {
                struct dol_job *j = ch->head;
                ch->head = j->next;
                if (!ch->head)
                        ch->tail = NULL;
                cookies[n] = j->cookie;
                status[n] = j->status;
                n++;
                job_free(h, j);
        }
        pthread_mutex_unlock(&h->lock);
        return (int)n;
}

void ntbf__dol_dma_release(struct ntbf_adapter_h *h)
{
        struct dol_lib *L = h->L;
        while (h->chans) {
                struct dol_chan *c = h->chans;
                h->chans = c->next;
                /* What is in flight finishes first: the queue cannot go before. */
                for (struct dol_job *j = c->head; j; j = j->next)
                        while (!atomic_load(&j->done))
                                sched_yield();
                while (c->head) {
                        struct dol_job *j = c->head;
                        c->head = j->next;
                        job_free(h, j);
                }
                sci_error_t e;
                SCI(L, RemoveDMAQueue, c->dq, 0, &e);
                free(c);
        }
}
