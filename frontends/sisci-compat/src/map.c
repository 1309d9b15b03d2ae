/* frontends/sisci-compat/src/map.c: CPU mappings of segments, sequences, copies and barriers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sx.h"

#define PAGE 4096u

#define MAP_FLAGS                                                                                  \
        (SCI_FLAG_READONLY_MAP | SCI_FLAG_SHARED_MAP | SCI_FLAG_IO_MAP_IOSPACE |                   \
         SCI_FLAG_WRITE_BACK_CACHE_MAP | SCI_FLAG_NO_MEMORY_LOOPBACK | SCI_FLAG_LOCK_OPERATION |   \
         SCI_FLAG_CONDITIONAL_INTERRUPT_MAP | SCI_FLAG_UNCONDITIONAL_DATA_INTERRUPT_MAP |          \
         SCI_FLAG_FIXED_MAP_ADDR | SCI_FLAG_BROADCAST)

static bool range_ok(size_t off, size_t size, size_t total)
{
        return size && off <= total && size <= total - off;
}

static unsigned backend_flags(unsigned flags)
{
        unsigned f = 0;
        if (flags & SCI_FLAG_READONLY_MAP)
                f |= NTBF_MAP_READONLY;
        if (flags & SCI_FLAG_IO_MAP_IOSPACE)
                f |= NTBF_MAP_UNCACHED; /* device registers: no write combining */
        return f;
}

/*
 * A window range [off, off + size) of adapter mapped page-aligned; *p points at off. With
 * SCI_FLAG_FIXED_MAP_ADDR the mapping starts at fixed (page-aligned, and so must off be).
 */
static int map_range(uint32_t adapter, uint32_t win, uint64_t off, uint64_t size, unsigned flags,
                     void *fixed, void **base, uint64_t *base_size, volatile uint8_t **p)
{
        struct ntbf_adapter_h *h = sx_ah(adapter);
        if (!h || !sx.ops->map_window)
                return NTBF_EUNSUPPORTED;
        uint64_t lo = off & ~(uint64_t)(PAGE - 1),
                 hi = (off + size + PAGE - 1) & ~(uint64_t)(PAGE - 1);
        unsigned bf = backend_flags(flags);
        if (flags & SCI_FLAG_FIXED_MAP_ADDR) {
                if (!fixed || (uintptr_t)fixed % PAGE || off % PAGE)
                        return -EINVAL;
                bf |= NTBF_MAP_FIXED;
                *base = fixed;
        }
        int r = sx.ops->map_window(h, win, lo, hi - lo, bf, base);
        if (r)
                return r;
        *base_size = hi - lo;
        *p = (volatile uint8_t *)*base + (off - lo);
        return 0;
}

volatile uint8_t *sx_rseg_imap(struct sx_rseg *s)
{
        if (s->imap)
                return s->imap;
        if (s->rkind != SX_R_MEM || s->broadcast)
                return NULL;
        if (s->local) {
                void *p;
                bool mapped;
                if (sx_host_map(s->addr, s->size, &p, &mapped))
                        return NULL;
                s->imap = p;
                if (mapped) {
                        s->imap_base = p;
                        s->imap_size = s->size;
                        s->imap_host = true;
                }
                return s->imap;
        }
        volatile uint8_t *p;
        if (map_range(s->adapter, s->win, s->offset, s->size, 0, NULL, &s->imap_base, &s->imap_size,
                      &p))
                return NULL;
        s->imap = (void *)(uintptr_t)p;
        return s->imap;
}

sci_error_t sx_rseg_write(struct sx_rseg *s, uint64_t off, const void *buf, size_t len)
{
        if (s->broadcast) {
                /* A CPU store into a multicast window is replicated only as a posted write
                 * through the window (docs/sisci.md): a direct mapping cannot do it. */
                struct ntbf_adapter_h *h = sx_ah(s->adapter);
                if (!h || !sx.ops->window_write)
                        return SCI_ERR_NOT_SUPPORTED;
                return sx.ops->window_write(h, s->win, s->offset + off, buf, len)
                           ? SCI_ERR_TRANSFER_FAILED
                           : SCI_ERR_OK;
        }
        volatile uint8_t *p = sx_rseg_imap(s);
        if (!p)
                return SCI_ERR_NOT_SUPPORTED;
        memcpy((void *)(uintptr_t)(p + off), buf, len);
        return SCI_ERR_OK;
}

/* ---- maps --------------------------------------------------------------------------------------
 */

void sx_map_free(struct sx_map *m)
{
        free(m);
}

void sx_map_drop(struct sx_map *m)
{
        if (m->base && m->host)
                sx_host_unmap(m->base, m->base_size);
        else if (m->base && sx.ops)
                sx.ops->unmap_window(sx_ah(m->rs->adapter), m->base, m->base_size);
        m->base = NULL;
        if (m->rs && m->rs->rkind == SX_R_BAR && !m->rs->dh && m->rs->maps == 1 && m->rs->dev &&
            m->rs->dev->nd)
                ntbf_dev_unmap_bar(m->rs->dev->nd, m->rs->bar);
        if (m->ls && m->ls->maps)
                m->ls->maps--;
        if (m->rs && m->rs->maps)
                m->rs->maps--;
}

static sci_error_t map_check(unsigned flags)
{
        return flags & ~MAP_FLAGS ? SCI_ERR_ILLEGAL_FLAG : SCI_ERR_OK;
}

void *SCIMapLocalSegment(sci_local_segment_t segment, sci_map_t *map, size_t offset, size_t size,
                         void *addr, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        (void)addr;
        void *ret = NULL;
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_lseg *s = (struct sx_lseg *)sx_get(segment, SX_LSEG);
        if (!s || !map) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if ((*err = map_check(flags)) != SCI_ERR_OK)
                goto out;
        if (flags & SCI_FLAG_FIXED_MAP_ADDR) {
                *err = SCI_ERR_FLAG_NOT_IMPLEMENTED; /* local memory stays where it is */
                goto out;
        }
        if (!s->mem) {
                *err = SCI_ERR_ILLEGAL_OPERATION; /* an empty segment */
                goto out;
        }
        if (!range_ok(offset, size, s->size)) {
                *err = size ? SCI_ERR_OUT_OF_RANGE : SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        struct sx_map *m = sx_new(sizeof(*m), SX_MAP, NULL);
        if (!m) {
                *err = SCI_ERR_NOSPC;
                goto out;
        }
        m->ls = s;
        m->ptr = (volatile uint8_t *)s->mem + offset;
        m->off = offset;
        m->size = size;
        m->flags = flags;
        m->phys = s->bus + offset;
        s->maps++;
        *map = sx_handle(&m->o);
        ret = (void *)(uintptr_t)m->ptr;
out:
        sx_unlock();
        return ret;
}

volatile void *SCIMapRemoteSegment(sci_remote_segment_t segment, sci_map_t *map, size_t offset,
                                   size_t size, void *addr, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        volatile void *ret = NULL;
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_rseg *s = (struct sx_rseg *)sx_get(segment, SX_RSEG);
        if (!s || !map) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if ((*err = map_check(flags)) != SCI_ERR_OK)
                goto out;
        if (!range_ok(offset, size, s->size)) {
                *err = size ? SCI_ERR_OUT_OF_RANGE : SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (s->lost) {
                *err = SCI_ERR_NOT_CONNECTED;
                goto out;
        }
        void *base = NULL;
        uint64_t base_size = 0, phys = s->addr + offset;
        volatile uint8_t *p = NULL;
        bool host = false;
        int r = 0;
        if ((flags & SCI_FLAG_FIXED_MAP_ADDR) &&
            (s->broadcast || s->local || (s->rkind == SX_R_BAR && !s->dh))) {
                /* Only a window can be laid where the caller asks (map_window's
                 * NTBF_MAP_FIXED); this host's memory and a BAR stay where they are. */
                *err = SCI_ERR_FLAG_NOT_IMPLEMENTED;
                goto out;
        }
        if ((flags & SCI_FLAG_FIXED_MAP_ADDR) &&
            (!addr || (uintptr_t)addr % PAGE || (s->offset + offset) % PAGE)) {
                *err = !addr || (uintptr_t)addr % PAGE ? SCI_ERR_ILLEGAL_ADDRESS
                                                       : SCI_ERR_OFFSET_ALIGNMENT;
                goto out;
        }
        if (s->rkind == SX_R_BAR && !s->dh) {
                /* A device's BAR through the device API: the borrower's window, or the BAR. A
                 * BAR connected through a chosen adapter (dh) is mapped like a segment. */
                void *bar;
                size_t len;
                r = s->dev && s->dev->nd ? ntbf_dev_map_bar(s->dev->nd, s->bar, &bar, &len)
                                         : NTBF_EUNREACHABLE;
                if (!r)
                        p = (volatile uint8_t *)bar + offset;
        } else if (s->local) {
                /* The memory is in this host: RAM mapped directly (the simulated fabric), or
                 * the adapter's memory for export mapped by its address (hw.c). */
                void *q;
                r = sx_host_map(phys, size, &q, &host);
                if (!r)
                        p = q;
                if (host) {
                        base = q;
                        base_size = size;
                }
        } else {
                r = map_range(s->adapter, s->win, s->offset + offset, size, flags, addr, &base,
                              &base_size, &p);
        }
        if (r) {
                *err = r == NTBF_EUNSUPPORTED ? SCI_ERR_NOT_SUPPORTED : sx_err_of(r);
                goto out;
        }
        struct sx_map *m = sx_new(sizeof(*m), SX_MAP, NULL);
        if (!m) {
                if (base && host)
                        sx_host_unmap(base, base_size);
                else if (base)
                        sx.ops->unmap_window(sx_ah(s->adapter), base, base_size);
                *err = SCI_ERR_NOSPC;
                goto out;
        }
        m->rs = s;
        m->ptr = p;
        m->host = host;
        m->base = base;
        m->base_size = base_size;
        m->off = offset;
        m->size = size;
        m->flags = flags;
        m->phys = phys;
        s->maps++;
        *map = sx_handle(&m->o);
        ret = p;
out:
        sx_unlock();
        return ret;
}

void SCIUnmapSegment(sci_map_t map, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_map *m = (struct sx_map *)sx_get(map, SX_MAP);
        if (!m) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        /* Sequences created on the map stay (removable); they are not retriable any more. */
        for (struct sx_obj *o = sx.all; m->seqs && o; o = o->next)
                if (o->kind == SX_SEQ && ((struct sx_seq *)o)->m == m) {
                        ((struct sx_seq *)o)->m = NULL;
                        m->seqs--;
                }
        sx_map_drop(m);
        sx_kill(&m->o);
out:
        sx_unlock();
}

volatile void *SCIGetMapPointer(sci_map_t map)
{
        sx_lock();
        struct sx_map *m = (struct sx_map *)sx_get(map, SX_MAP);
        volatile void *p = m ? m->ptr : NULL;
        sx_unlock();
        return p;
}

sci_ioaddr_t SCIGetMapPhysAddr(sci_map_t map)
{
        sx_lock();
        struct sx_map *m = (struct sx_map *)sx_get(map, SX_MAP);
        sci_ioaddr_t a = m ? m->phys : 0;
        sx_unlock();
        return a;
}

/* ---- sequences --------------------------------------------------------------------------------
 */

void SCICreateMapSequence(sci_map_t map, sci_sequence_t *sequence, unsigned int flags,
                          sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_map *m = (struct sx_map *)sx_get(map, SX_MAP);
        if (!m || !sequence) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        struct sx_seq *q = sx_new(sizeof(*q), SX_SEQ, NULL);
        if (!q) {
                *err = SCI_ERR_NOSPC;
                goto out;
        }
        q->m = m;
        m->seqs++;
        *sequence = sx_handle(&q->o);
out:
        sx_unlock();
}

void SCIRemoveSequence(sci_sequence_t sequence, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_seq *q = (struct sx_seq *)sx_get(sequence, SX_SEQ);
        if (!q) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (q->m)
                q->m->seqs--;
        sx_kill(&q->o);
out:
        sx_unlock();
}

/*
 * What a sequence knows (docs/sisci.md): the connection behind the map is lost (its owner
 * removed it or died: not retriable), or a link of this node's adapter on its path is down
 * (retriable: it may come back with the mapping still valid, article 6.3).
 */
static sci_sequence_status_t seq_status(const struct sx_map *m)
{
        if (!m)
                return SCI_SEQ_NOT_RETRIABLE; /* its map was unmapped */
        if (!m->rs)
                return SCI_SEQ_OK;
        if (m->rs->lost || (m->rs->dev && m->rs->dev->lost))
                return SCI_SEQ_NOT_RETRIABLE;
        if (m->rs->down)
                return SCI_SEQ_RETRIABLE;
        if (!m->rs->local && m->rs->adapter != NTBF_NONE) {
                struct ntbf_adapter_h *h = sx_ah(m->rs->adapter);
                const struct ntbf_adapter *a = &sx.t->adapters[m->rs->adapter];
                bool any = false, up = false;
                for (uint32_t p = 0; h && p < a->p.ports; p++) {
                        if (a->link[p] == NTBF_NONE)
                                continue;
                        bool u = false;
                        any = true;
                        sx.ops->link_state(h, p, &u);
                        up |= u;
                }
                if (any && !up)
                        return SCI_SEQ_RETRIABLE;
        }
        return SCI_SEQ_OK;
}

static sci_sequence_status_t seq_call(sci_sequence_t sequence, unsigned flags, sci_error_t *err,
                                      bool start)
{
        sci_sequence_status_t st = SCI_SEQ_NOT_RETRIABLE;
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_seq *q = (struct sx_seq *)sx_get(sequence, SX_SEQ);
        if (!q) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (start)
                q->started = true;
        __atomic_thread_fence(__ATOMIC_SEQ_CST); /* what was stored before is out */
        st = seq_status(q->m);
out:
        sx_unlock();
        return st;
}

sci_sequence_status_t SCIStartSequence(sci_sequence_t sequence, unsigned int flags,
                                       sci_error_t *error)
{
        SX_ERR(error);
        return seq_call(sequence, flags, err, true);
}

sci_sequence_status_t SCICheckSequence(sci_sequence_t sequence, unsigned int flags,
                                       sci_error_t *error)
{
        SX_ERR(error);
        return seq_call(sequence, flags, err, false);
}

/* Stores through the mappings are plain stores: a fence orders and drains them. */
void SCIFlush(sci_sequence_t sequence, unsigned int flags)
{
        (void)sequence;
        (void)flags;
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

void SCIStoreBarrier(sci_sequence_t sequence, unsigned int flags)
{
        (void)sequence;
        (void)flags;
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* ---- copies -----------------------------------------------------------------------------------
 */

void SCIMemCpy(sci_sequence_t sequence, void *memAddr, sci_map_t remoteMap, size_t remoteOffset,
               size_t size, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_map *m = (struct sx_map *)sx_get(remoteMap, SX_MAP);
        struct sx_seq *q = sequence ? (struct sx_seq *)sx_get(sequence, SX_SEQ) : NULL;
        if (!m || !memAddr || (sequence && (!q || q->m != m))) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~(SCI_FLAG_BLOCK_READ | SCI_FLAG_ERROR_CHECK)) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (!range_ok(remoteOffset, size, m->size)) {
                *err = size ? SCI_ERR_OUT_OF_RANGE : SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        bool read = flags & SCI_FLAG_BLOCK_READ;
        if (!read && (m->flags & SCI_FLAG_READONLY_MAP)) {
                *err = SCI_ERR_ILLEGAL_OPERATION; /* a store would fault */
                goto out;
        }
        volatile uint8_t *p = m->ptr + remoteOffset;
        bool via_write = !read && m->rs && m->rs->broadcast;
        sx_ref(&m->o);
        sx_unlock(); /* the copy itself needs no lock: the map stays while referenced */
        if (via_write) {
                sx_lock();
                *err = sx_rseg_write(m->rs, m->off + remoteOffset, memAddr, size);
                sx_unlock();
        } else if (read) {
                memcpy(memAddr, (const void *)(uintptr_t)p, size);
        } else {
                memcpy((void *)(uintptr_t)p, memAddr, size);
                __atomic_thread_fence(__ATOMIC_SEQ_CST);
        }
        sx_lock();
        if (*err == SCI_ERR_OK && (flags & SCI_FLAG_ERROR_CHECK) && seq_status(m) != SCI_SEQ_OK)
                *err = SCI_ERR_TRANSFER_FAILED;
        sx_unref(&m->o);
out:
        sx_unlock();
}

void SCIMemWrite(void *memAddr, volatile void *remoteAddr, size_t size, unsigned int flags,
                 sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        if (!memAddr || !remoteAddr || !size) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~SCI_FLAG_ERROR_CHECK) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        /* The address must lie in one of this process's writable remote mappings. */
        uintptr_t a = (uintptr_t)remoteAddr;
        struct sx_map *m = NULL;
        for (struct sx_obj *o = sx.all; o && !m; o = o->next) {
                struct sx_map *x = (struct sx_map *)o;
                if (o->kind != SX_MAP || !x->rs || (x->flags & SCI_FLAG_READONLY_MAP))
                        continue;
                uintptr_t lo = (uintptr_t)x->ptr;
                if (a >= lo && a - lo < x->size && size <= x->size - (a - lo))
                        m = x;
        }
        if (!m) {
                *err = SCI_ERR_ILLEGAL_ADDRESS;
                goto out;
        }
        if (m->rs->broadcast) {
                *err = sx_rseg_write(m->rs, m->off + (a - (uintptr_t)m->ptr), memAddr, size);
        } else {
                memcpy((void *)a, memAddr, size);
                __atomic_thread_fence(__ATOMIC_SEQ_CST);
        }
        if (*err == SCI_ERR_OK && (flags & SCI_FLAG_ERROR_CHECK) && seq_status(m) != SCI_SEQ_OK)
                *err = SCI_ERR_TRANSFER_FAILED;
out:
        sx_unlock();
}

void SCICacheSync(sci_map_t map, void *addr, size_t length, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        if ((map && !sx_get(map, SX_MAP)) || !addr || !length) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~(SCI_FLAG_CACHE_FLUSH | SCI_FLAG_CACHE_INVALIDATE)) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        /* Segment memory is coherent with the CPU on every supported fabric: ordering is all
         * that is left to do (docs/sisci.md). */
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
out:
        sx_unlock();
}
