/* frontends/sisci-compat/src/dma.c: DMA queues on the adapter's DMA engine, or the CPU. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sx.h"

/*
 * A transfer is a list of copies between a local segment and a remote one. Where the
 * adapter has a DMA engine the library claims one channel of it for the process (the node's
 * daemon hands channels out, sisci.dma_channel) and submits the copies as descriptors with
 * host-physical addresses: the local segment's bus address and the remote segment's window
 * address. Where it has none (or every channel is claimed, or SCI_FLAG_DMA_SYSDMA asks for
 * it), the library's DMA thread copies with the CPU through mappings of the segments: the
 * documented fallback (docs/sisci.md). Either way the thread completes transfers in order,
 * updates queue states and runs callbacks.
 */

#define DMA_FLAGS                                                                                  \
        (SCI_FLAG_USE_CALLBACK | SCI_FLAG_DMA_WAIT | SCI_FLAG_DMA_READ | SCI_FLAG_DMA_PHDMA |      \
         SCI_FLAG_DMA_GLOBAL | SCI_FLAG_ALLOW_UNICAST | SCI_FLAG_DMA_SYSDMA |                      \
         SCI_FLAG_DMA_USER_MEM | SCI_FLAG_DMA_ADAPTER)

struct sx_desc_x {
        uint64_t src, dst, len; /* engine: physical addresses */
        uint64_t loff, roff;    /* CPU: offsets in the segments */
};

struct sx_dmajob {
        struct sx_dmajob *next;
        struct sx_dmaq *q;
        struct sx_lseg *ls;
        struct sx_rseg *rs;
        bool read, engine, wait;
        int chan;
        struct sx_desc_x *d;
        unsigned nd, submitted, completed;
        uint64_t cookie0; /* descriptor k has cookie cookie0 + k */
        int status;
        sci_cb_dma_t cb;
        void *cbarg;
        bool done;
};

static struct sx_dmajob *jobs_head, *jobs_tail; /* every job, in submission order */

/* ---- queues -----------------------------------------------------------------------------------
 */

void sx_dmaq_free(struct sx_dmaq *q)
{
        free(q);
}

void sx_dmaq_drop(struct sx_dmaq *q)
{
        q->aborted = true;
}

static void *dma_thread(void *arg);

static int ensure_thread(void)
{
        if (sx.dma_on)
                return 0;
        sx.dma_stop = false;
        if (pthread_create(&sx.dma_thread, NULL, dma_thread, NULL))
                return -errno;
        sx.dma_on = true;
        return 0;
}

void sx_dma_stop(void)
{
        if (!sx.dma_on)
                return;
        sx.dma_stop = true;
        pthread_cond_broadcast(&sx.cond);
        sx_unlock();
        pthread_join(sx.dma_thread, NULL);
        sx_lock();
        sx.dma_on = false;
        while (jobs_head) {
                struct sx_dmajob *j = jobs_head;
                jobs_head = j->next;
                free(j->d);
                free(j);
        }
        jobs_tail = NULL;
}

void SCICreateDMAQueue(sci_desc_t sd, sci_dma_queue_t *dq, unsigned int localAdapterNo,
                       unsigned int maxEntries, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_desc *d = (struct sx_desc *)sx_get(sd, SX_DESC);
        if (!d || !dq) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~DMA_FLAGS) {
                *err = SCI_ERR_ILLEGAL_FLAG; /* DMA flags are accepted: they change nothing */
                goto out;
        }
        uint32_t ad = sx_adapter(localAdapterNo);
        if (ad == NTBF_NONE) {
                *err = SCI_ERR_NO_SUCH_ADAPTERNO;
                goto out;
        }
        /* The process's channel of this adapter's engine, claimed once. */
        if (!sx.dma_tried[localAdapterNo]) {
                struct json_object *p = sx_obj_new(), *res = NULL;
                sx_put_u(p, "adapter", localAdapterNo);
                uint64_t ch;
                if (!sx_call("sisci.dma_channel", p, &res) && sx_get_u(res, "channel", &ch))
                        sx.dma_chan[localAdapterNo] = (int)ch;
                json_object_put(res);
                sx.dma_tried[localAdapterNo] = true;
        }
        if (ensure_thread()) {
                *err = SCI_ERR_NOSPC;
                goto out;
        }
        struct sx_dmaq *q = sx_new(sizeof(*q), SX_DMAQ, d);
        if (!q) {
                *err = SCI_ERR_NOSPC;
                goto out;
        }
        q->adapter_no = localAdapterNo;
        q->adapter = ad;
        /* Entries are transfers (one SCIStartDma* call each, whatever its vector length);
         * 0 is taken as 1, as programs that pass no number expect (docs/sisci.md). */
        q->max_entries = maxEntries ? maxEntries : 1;
        q->state = SCI_DMAQUEUE_IDLE;
        *dq = sx_handle(&q->o);
out:
        sx_unlock();
}

void SCIRemoveDMAQueue(sci_dma_queue_t dq, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_dmaq *q = (struct sx_dmaq *)sx_get(dq, SX_DMAQ);
        if (!q)
                *err = SCI_ERR_ILLEGAL_PARAMETER;
        else if (flags)
                *err = SCI_ERR_ILLEGAL_FLAG;
        else if (q->batches)
                *err = SCI_ERR_BUSY; /* wait for it or abort it first */
        else
                sx_kill(&q->o);
out:
        sx_unlock();
}

void SCIAbortDMAQueue(sci_dma_queue_t dq, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_dmaq *q = (struct sx_dmaq *)sx_get(dq, SX_DMAQ);
        if (!q) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        /*
         * Copies not handed to the engine yet are dropped; descriptors the engine has are
         * finished by it (hardware cannot recall them) and their completions ignored. The
         * queue is ABORTED as soon as nothing of it is in flight.
         */
        q->aborted = true;
        if (!q->batches)
                q->state = SCI_DMAQUEUE_ABORTED;
        pthread_cond_broadcast(&sx.cond);
        while (q->batches && !q->o.dead)
                sx_wait(0);
out:
        sx_unlock();
}

/* ---- starting transfers -----------------------------------------------------------------------
 */

static bool range_ok(uint64_t off, uint64_t size, uint64_t total)
{
        return size && off <= total && size <= total - off;
}

static void start(sci_dma_queue_t dq, sci_local_segment_t lseg, sci_remote_segment_t rseg, size_t n,
                  const dis_dma_vec_t *vec, sci_cb_dma_t cb, void *cbarg, unsigned flags,
                  sci_error_t *err)
{
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_dmaq *q = (struct sx_dmaq *)sx_get(dq, SX_DMAQ);
        struct sx_lseg *ls = (struct sx_lseg *)sx_get(lseg, SX_LSEG);
        struct sx_rseg *rs = (struct sx_rseg *)sx_get(rseg, SX_RSEG);
        if (!q || !ls || !rs || !vec || !n) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~DMA_FLAGS) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (n > DIS_DMA_MAX_VECLEN || q->batches >= q->max_entries) {
                *err = SCI_ERR_MAX_ENTRIES;
                goto out;
        }
        if (!ls->mem && !ls->bus) {
                *err = SCI_ERR_ILLEGAL_OPERATION;
                goto out;
        }
        if (rs->lost) {
                *err = SCI_ERR_NOT_CONNECTED;
                goto out;
        }
        /*
         * A queue of adapter n moves data through adapter n: its engine writes the remote
         * segment's window address, so the segment must be connected through the same adapter
         * (connect it again through this one) or be in this host.
         */
        if (!rs->local && rs->adapter != NTBF_NONE && rs->adapter != q->adapter) {
                *err = SCI_ERR_ILLEGAL_ADAPTERNO;
                goto out;
        }
        bool read = flags & SCI_FLAG_DMA_READ;
        if (read && rs->broadcast) {
                *err = SCI_ERR_ILLEGAL_OPERATION; /* a multicast group cannot be read */
                goto out;
        }
        int chan = sx.dma_chan[q->adapter_no];
        struct ntbf_adapter_h *h = sx_ah(q->adapter);
        struct ntbf_caps caps = {0};
        bool engine = chan >= 0 && !(flags & SCI_FLAG_DMA_SYSDMA) && h && !sx.ops->caps(h, &caps) &&
                      (caps.flags & NTBF_CAP_DMA);
        if ((flags & SCI_FLAG_DMA_ADAPTER) && !engine) {
                *err = SCI_ERR_DMA_NOT_AVAILABLE;
                goto out;
        }
        uint64_t align = engine && caps.dma_align > 1 ? caps.dma_align : 1;
        uint64_t maxlen = engine && caps.dma_max_len ? caps.dma_max_len : UINT64_C(1) << 62;
        size_t nd = 0;
        for (size_t k = 0; k < n; k++) {
                /* v->flags is not read: programs leave it uninitialized. */
                const dis_dma_vec_t *v = &vec[k];
                if (!range_ok(v->local_offset, v->size, ls->size) ||
                    !range_ok(v->remote_offset, v->size, rs->size)) {
                        *err = v->size ? SCI_ERR_OUT_OF_RANGE : SCI_ERR_ILLEGAL_PARAMETER;
                        goto out;
                }
                if (v->size % align) {
                        *err = SCI_ERR_SIZE_ALIGNMENT;
                        goto out;
                }
                if (v->local_offset % align || v->remote_offset % align) {
                        *err = SCI_ERR_OFFSET_ALIGNMENT;
                        goto out;
                }
                nd += (v->size + maxlen - 1) / maxlen;
        }
        struct sx_dmajob *j = calloc(1, sizeof(*j));
        struct sx_desc_x *d = calloc(nd, sizeof(*d));
        if (!j || !d) {
                free(j);
                free(d);
                *err = SCI_ERR_NOSPC;
                goto out;
        }
        nd = 0;
        for (size_t k = 0; k < n; k++)
                for (uint64_t done = 0; done < vec[k].size;) {
                        uint64_t len = vec[k].size - done < maxlen ? vec[k].size - done : maxlen;
                        uint64_t lo = vec[k].local_offset + done, ro = vec[k].remote_offset + done;
                        uint64_t la = ls->bus + lo, ra = rs->addr + ro;
                        d[nd++] = (struct sx_desc_x){read ? ra : la, read ? la : ra, len, lo, ro};
                        done += len;
                }
        *j = (struct sx_dmajob){.q = q,
                                .ls = ls,
                                .rs = rs,
                                .read = read,
                                .engine = engine,
                                .wait = flags & SCI_FLAG_DMA_WAIT,
                                .chan = chan,
                                .d = d,
                                .nd = (unsigned)nd};
        if (cb && (flags & SCI_FLAG_USE_CALLBACK)) {
                j->cb = cb;
                j->cbarg = cbarg;
        }
        /* The segments stay while the job uses them (removal says SCI_ERR_BUSY). */
        sx_ref(&q->o);
        sx_ref(&ls->o);
        sx_ref(&rs->o);
        ls->maps++;
        rs->maps++;
        q->batches++;
        q->aborted = false;
        q->failed = false;
        q->state = SCI_DMAQUEUE_POSTED;
        if (jobs_tail)
                jobs_tail->next = j;
        else
                jobs_head = j;
        jobs_tail = j;
        pthread_cond_broadcast(&sx.cond);
        if (j->wait) {
                /* SCI_FLAG_DMA_WAIT: return when it is done, with its result. */
                while (!j->done)
                        sx_wait(0);
                *err = j->status ? SCI_ERR_TRANSFER_FAILED : SCI_ERR_OK;
                free(j->d);
                free(j);
        }
out:
        sx_unlock();
}

void SCIStartDmaTransfer(sci_dma_queue_t dq, sci_local_segment_t localSegment,
                         sci_remote_segment_t remoteSegment, size_t localOffset, size_t size,
                         size_t remoteOffset, sci_cb_dma_t callback, void *callbackArg,
                         unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        dis_dma_vec_t v = {size, localOffset, remoteOffset, 0};
        start(dq, localSegment, remoteSegment, 1, &v, callback, callbackArg, flags, err);
}

void SCIStartDmaTransferVec(sci_dma_queue_t dq, sci_local_segment_t localSegment,
                            sci_remote_segment_t remoteSegment, size_t vecLength,
                            dis_dma_vec_t *disDmaVec, sci_cb_dma_t callback, void *callbackArg,
                            unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        start(dq, localSegment, remoteSegment, vecLength, disDmaVec, callback, callbackArg, flags,
              err);
}

sci_dma_queue_state_t SCIWaitForDMAQueue(sci_dma_queue_t dq, unsigned int timeout,
                                         unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        sci_dma_queue_state_t st = SCI_DMAQUEUE_ERROR;
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_dmaq *q = (struct sx_dmaq *)sx_get(dq, SX_DMAQ);
        if (!q) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~DMA_FLAGS) { /* programs pass their transfer's flags: ignored */
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        uint64_t deadline = sx_deadline(timeout);
        sx_ref(&q->o);
        q->waiters++;
        while (q->batches && !q->o.dead)
                if (!sx_wait(deadline))
                        break;
        q->waiters--;
        if (q->o.dead)
                *err = SCI_ERR_CANCELLED;
        else if (q->batches)
                *err = SCI_ERR_TIMEOUT;
        st = q->state;
        if (*err == SCI_ERR_OK && st == SCI_DMAQUEUE_ERROR)
                *err = q->err ? q->err : SCI_ERR_TRANSFER_FAILED;
        sx_unref(&q->o);
out:
        sx_unlock();
        return st;
}

sci_dma_queue_state_t SCIDMAQueueState(sci_dma_queue_t dq)
{
        sx_lock();
        struct sx_dmaq *q = (struct sx_dmaq *)sx_get(dq, SX_DMAQ);
        sci_dma_queue_state_t st = q ? q->state : SCI_DMAQUEUE_ERROR;
        sx_unlock();
        return st;
}

/* ---- the DMA thread ---------------------------------------------------------------------------
 */

/* Copy the job's descriptors with the CPU (lock not held). 0 or a drop reason. */
static int cpu_copy(struct sx_dmajob *j, volatile uint8_t *remote)
{
        uint8_t *local = j->ls->mem;
        for (unsigned k = 0; k < j->nd; k++) {
                const struct sx_desc_x *d = &j->d[k];
                if (j->rs->broadcast) {
                        /* Multicast: posted writes through the window are replicated. */
                        int r =
                            sx.ops->window_write(sx_ah(j->rs->adapter), j->rs->win,
                                                 j->rs->offset + d->roff, local + d->loff, d->len);
                        if (r)
                                return r;
                } else if (j->read) {
                        memcpy(local + d->loff, (const void *)(uintptr_t)(remote + d->roff),
                               d->len);
                } else {
                        memcpy((void *)(uintptr_t)(remote + d->roff), local + d->loff, d->len);
                }
        }
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        return 0;
}

static void finish(struct sx_dmajob *j, int status)
{
        struct sx_dmaq *q = j->q;
        j->status = status;
        j->done = true;
        q->batches--;
        if (status) {
                q->failed = true;
                q->err = SCI_ERR_TRANSFER_FAILED;
        }
        if (!q->batches)
                q->state = q->aborted  ? SCI_DMAQUEUE_ABORTED
                           : q->failed ? SCI_DMAQUEUE_ERROR
                                       : SCI_DMAQUEUE_DONE;
        if (j->ls->maps)
                j->ls->maps--;
        if (j->rs->maps)
                j->rs->maps--;
        pthread_cond_broadcast(&sx.cond);
}

static void *dma_thread(void *arg)
{
        (void)arg;
        sx_lock();
        unsigned idle = 0;
        while (!sx.dma_stop) {
                bool busy = false, progress = false;
                /* Hand descriptors to engines, copy CPU jobs, collect completions. */
                for (struct sx_dmajob *j = jobs_head; j; j = j->next) {
                        if (j->done)
                                continue;
                        busy = true;
                        if (j->q->aborted && j->submitted == j->completed) {
                                j->status = -ECANCELED; /* nothing of it is in flight */
                                j->submitted = j->completed = j->nd;
                        }
                        if (!j->engine && j->completed < j->nd) {
                                volatile uint8_t *remote =
                                    j->rs->broadcast ? NULL : sx_rseg_imap(j->rs);
                                int r = 0;
                                if (!remote && !j->rs->broadcast) {
                                        r = NTBF_EUNSUPPORTED;
                                } else {
                                        sx_unlock();
                                        r = cpu_copy(j, remote);
                                        sx_lock();
                                }
                                j->status = r;
                                j->submitted = j->completed = j->nd;
                        }
                        while (j->engine && j->submitted < j->nd && !j->q->aborted) {
                                const struct sx_desc_x *d = &j->d[j->submitted];
                                if (!j->submitted)
                                        j->cookie0 = sx.dma_cookie, sx.dma_cookie += j->nd;
                                int r = sx.ops->dma_submit(sx_ah(j->q->adapter), (uint32_t)j->chan,
                                                           d->src, d->dst, d->len,
                                                           j->cookie0 + j->submitted);
                                if (r == -EBUSY)
                                        break; /* the ring is full: later */
                                if (r) {
                                        j->status = r;
                                        j->completed += j->nd - j->submitted;
                                        j->submitted = j->nd;
                                        break;
                                }
                                j->submitted++;
                        }
                }
                /* Completions of this process's channels (they come back oldest first). */
                for (unsigned a = 0; a < NTBF_MAX_NODE_ADAPTERS && busy; a++) {
                        if (sx.dma_chan[a] < 0)
                                continue;
                        uint64_t cookies[64];
                        int st[64];
                        int n = sx.ops->dma_poll(sx_ah(sx_adapter(a)), (uint32_t)sx.dma_chan[a],
                                                 cookies, st, 64);
                        progress |= n > 0;
                        for (int k = 0; k < n; k++)
                                for (struct sx_dmajob *j = jobs_head; j; j = j->next)
                                        if (j->engine && cookies[k] >= j->cookie0 &&
                                            cookies[k] < j->cookie0 + j->submitted) {
                                                j->completed++;
                                                if (st[k] && !j->status)
                                                        j->status = st[k];
                                                break;
                                        }
                }
                /* Finished jobs leave in order; their callbacks run without the lock. */
                while (jobs_head && !jobs_head->done && jobs_head->completed == jobs_head->nd &&
                       jobs_head->submitted == jobs_head->nd) {
                        struct sx_dmajob *j = jobs_head;
                        jobs_head = j->next;
                        if (!jobs_head)
                                jobs_tail = NULL;
                        j->next = NULL;
                        int status = j->status;
                        bool aborted = status == -ECANCELED;
                        finish(j, status);
                        progress = true;
                        sci_cb_dma_t cb = aborted ? NULL : j->cb;
                        void *cbarg = j->cbarg;
                        struct sx_dmaq *q = j->q;
                        struct sx_lseg *ls = j->ls;
                        struct sx_rseg *rs = j->rs;
                        bool waited = j->wait;
                        if (!waited) {
                                free(j->d);
                                free(j);
                        }
                        if (cb) {
                                sci_error_t e = status ? SCI_ERR_TRANSFER_FAILED : SCI_ERR_OK;
                                sx_unlock();
                                sci_callback_action_t act = cb(cbarg, sx_handle(&q->o), e);
                                (void)act;
                                sx_lock();
                        }
                        sx_unref(&ls->o);
                        sx_unref(&rs->o);
                        sx_unref(&q->o);
                }
                if (!busy && !jobs_head) {
                        idle = 0;
                        pthread_cond_wait(&sx.cond, &sx.lock);
                        continue;
                }
                /* Something is in flight: poll, spinning briefly, then napping. */
                if (progress)
                        idle = 0;
                sx_unlock();
                if (++idle < 200) {
                        sched_yield();
                } else {
                        struct timespec ts = {0, 20000};
                        nanosleep(&ts, NULL);
                }
                sx_lock();
        }
        sx_unlock();
        return NULL;
}

/* ---- transfers from process memory, channels ------------------------------------------------ */

/*
 * SCIStartDmaTransferMem: process memory is not in any engine's reach (it is not segment
 * memory), so the CPU moves it, at once: the queue is DONE (or ERROR) when the call returns.
 */
void SCIStartDmaTransferMem(sci_dma_queue_t dq, void *localAddress,
                            sci_remote_segment_t remoteSegment, size_t size, size_t remoteOffset,
                            sci_cb_dma_t callback, void *callbackArg, unsigned int flags,
                            sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_dmaq *q = (struct sx_dmaq *)sx_get(dq, SX_DMAQ);
        struct sx_rseg *rs = (struct sx_rseg *)sx_get(remoteSegment, SX_RSEG);
        if (!q || !rs || !localAddress || !size) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~DMA_FLAGS) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (!range_ok(remoteOffset, size, rs->size)) {
                *err = SCI_ERR_OUT_OF_RANGE;
                goto out;
        }
        if (q->batches) {
                *err = SCI_ERR_BUSY; /* transfers of the engine are in flight on this queue */
                goto out;
        }
        if (rs->lost) {
                *err = SCI_ERR_NOT_CONNECTED;
                goto out;
        }
        if (flags & SCI_FLAG_DMA_READ) {
                volatile uint8_t *m = rs->broadcast ? NULL : sx_rseg_imap(rs);
                if (!m)
                        *err = rs->broadcast ? SCI_ERR_ILLEGAL_OPERATION : SCI_ERR_NOSPC;
                else
                        memcpy(localAddress, (const void *)(uintptr_t)(m + remoteOffset), size);
        } else {
                *err = sx_rseg_write(rs, remoteOffset, localAddress, size);
        }
        q->aborted = false;
        q->failed = *err != SCI_ERR_OK;
        q->state = q->failed ? SCI_DMAQUEUE_ERROR : SCI_DMAQUEUE_DONE;
        pthread_cond_broadcast(&sx.cond);
        sci_error_t status = *err;
        sx_unlock();
        if (callback && (flags & SCI_FLAG_USE_CALLBACK))
                callback(callbackArg, dq, status);
        return;
out:
        sx_unlock();
}

void SCIRequestDMAChannel(sci_desc_t sd, sci_dma_channel_t *channel, unsigned int localAdapterNo,
                          sci_dma_type_t type, unsigned int channelId, unsigned int flags,
                          sci_error_t *error)
{
        SX_ERR(error);
        (void)channelId; /* any channel: the library claims one per adapter itself */
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_desc *d = (struct sx_desc *)sx_get(sd, SX_DESC);
        if (!d || !channel || type < SCI_DMA_TYPE_DONTCARE || type > SCI_DMA_TYPE_TRANSPARENT) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (sx_adapter(localAdapterNo) == NTBF_NONE) {
                *err = SCI_ERR_NO_SUCH_ADAPTERNO;
                goto out;
        }
        struct sx_dmach *c = sx_new(sizeof(*c), SX_DMACH, d);
        if (!c) {
                *err = SCI_ERR_NOSPC;
                goto out;
        }
        c->adapter_no = localAdapterNo;
        c->type = type;
        *channel = sx_handle(&c->o);
out:
        sx_unlock();
}

void SCIReturnDMAChannel(sci_dma_channel_t channel, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_obj *c = sx_get(channel, SX_DMACH);
        if (!c) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        sx_kill(c);
out:
        sx_unlock();
}

/* A queue runs on its adapter's channel whatever was assigned: only the adapter must match. */
void SCIAssignDMAChannel(sci_dma_channel_t channel, sci_dma_queue_t dq, unsigned int flags,
                         sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_dmach *c = (struct sx_dmach *)sx_get(channel, SX_DMACH);
        struct sx_dmaq *q = (struct sx_dmaq *)sx_get(dq, SX_DMAQ);
        if (!c || !q)
                *err = SCI_ERR_ILLEGAL_PARAMETER;
        else if (flags)
                *err = SCI_ERR_ILLEGAL_FLAG;
        else if (c->adapter_no != q->adapter_no)
                *err = SCI_ERR_ILLEGAL_ADAPTERNO;
out:
        sx_unlock();
}
