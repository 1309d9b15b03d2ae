/* backends/sim/dma.c: adapter DMA engines: descriptor rings in the control file, run by the device
 * host. */
#include <errno.h>
#include <string.h>

#include "sim.h"

/*
 * Each channel is a ring of SIM_DMA_RING descriptors. Submitters and pollers (any process)
 * hold the channel's robust mutex: a descriptor is written whole and then published by one
 * store of `head`. The engine (a device host thread) copies descriptors [done, head) in
 * order, as requester (host, 0x0000) through the fabric's router, stores each status and
 * publishes it with one store of `done`. So completions come back oldest first.
 */

void ntbf__sim_dma_recover(void *arg)
{
        (void)arg; /* head and reaped are single words stored last: nothing derived to rebuild */
}

int ntbf__sim_dma_submit(struct ntbf_sim *s, uint32_t a, uint32_t chan, uint64_t src, uint64_t dst,
                         uint64_t len, uint64_t cookie)
{
        if (chan >= s->ad[a].nchan)
                return -EINVAL;
        if (!len || len > SIM_DMA_MAX_LEN)
                return -EINVAL;
        struct sim_dmachan *c = sim_dma(s, a, chan);
        int r = 0;
        ntbf__sim_lock(s, &c->lock, ntbf__sim_dma_recover, c);
        uint64_t head = atomic_load(&c->head);
        if (head - c->reaped >= SIM_DMA_RING) {
                r = -EBUSY; /* ring full of unpolled completions or pending work */
        } else {
                struct sim_dmadesc *d = &c->ring[head % SIM_DMA_RING];
                d->src = src;
                d->dst = dst;
                d->len = len;
                d->cookie = cookie;
                d->status = 1; /* pending */
                atomic_store_explicit(&c->head, head + 1, memory_order_release);
        }
        ntbf__sim_unlock(&c->lock);
        if (!r)
                ntbf__sim_futex_bump(&s->hdr->devhost_kick);
        return r;
}

int ntbf__sim_dma_poll(struct ntbf_sim *s, uint32_t a, uint32_t chan, uint64_t *cookies,
                       int *status, unsigned max)
{
        if (chan >= s->ad[a].nchan || (max && (!cookies || !status)))
                return -EINVAL;
        struct sim_dmachan *c = sim_dma(s, a, chan);
        unsigned n = 0;
        ntbf__sim_lock(s, &c->lock, ntbf__sim_dma_recover, c);
        uint64_t done = atomic_load_explicit(&c->done, memory_order_acquire);
        while (n < max && c->reaped < done) {
                const struct sim_dmadesc *d = &c->ring[c->reaped % SIM_DMA_RING];
                cookies[n] = d->cookie;
                status[n] = d->status;
                n++;
                c->reaped++;
        }
        ntbf__sim_unlock(&c->lock);
        return (int)n;
}

/* Copy len bytes src -> dst through the fabric as the engine's requester. A failed read
 * aborts the descriptor before anything of that chunk is written, as an engine does on an
 * error completion. */
static int copy(struct ntbf_sim *s, uint32_t node, uint64_t src, uint64_t dst, uint64_t len,
                uint8_t *bounce, size_t blen)
{
        while (len) {
                size_t n = len < blen ? (size_t)len : blen;
                int r = ntbf__sim_xfer(s, node, NTBF_NONE, NTBF_SIM_RID_CPU, src, bounce, n, false,
                                       NULL);
                if (!r)
                        r = ntbf__sim_xfer(s, node, NTBF_NONE, NTBF_SIM_RID_CPU, dst, bounce, n,
                                           true, NULL);
                if (r)
                        return r;
                src += n;
                dst += n;
                len -= n;
        }
        return 0;
}

int ntbf__sim_dma_run(struct ntbf_sim *s, uint32_t a, uint8_t *bounce, size_t bounce_len)
{
        int work = 0;
        uint32_t node = s->ad[a].node;
        for (uint32_t ch = 0; ch < s->ad[a].nchan; ch++) {
                struct sim_dmachan *c = sim_dma(s, a, ch);
                uint64_t done = atomic_load_explicit(&c->done, memory_order_relaxed);
                uint64_t head = atomic_load_explicit(&c->head, memory_order_acquire);
                for (; done < head; done++) {
                        struct sim_dmadesc *d = &c->ring[done % SIM_DMA_RING];
                        d->status = copy(s, node, d->src, d->dst, d->len, bounce, bounce_len);
                        atomic_store_explicit(&c->done, done + 1, memory_order_release);
                        work++;
                }
        }
        return work;
}
