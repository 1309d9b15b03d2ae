/* frontends/sisci-compat/src/segment.c: local and remote segments, their events and waits. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sx.h"

#define CREATE_FLAGS                                                                               \
        (SCI_FLAG_USE_CALLBACK | SCI_FLAG_EMPTY | SCI_FLAG_PRIVATE | SCI_FLAG_DMA_SOURCE_ONLY |    \
         SCI_FLAG_AUTO_ID | SCI_FLAG_BROADCAST | SCI_FLAG_LOCK_USER_MEM | SCI_FLAG_PHYSICAL |      \
         SCI_FLAG_DMA_GLOBAL)

/* A SISCI segment id is any 32-bit number below the automatic ones (docs/sisci.md). */
#define AUTO_ID_BASE 0x80000000u

static void nap_ms(unsigned ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

/* ---- events ---------------------------------------------------------------------------------- */

static void evq_push(struct sx_evq *q, struct sx_ev ev)
{
        if (q->n == SX_EVQ) { /* the oldest goes: a program that never waits loses history */
                q->head = (q->head + 1) % SX_EVQ;
                q->n--;
        }
        q->v[(q->head + q->n++) % SX_EVQ] = ev;
        pthread_cond_broadcast(&sx.cond);
}

static bool evq_pop(struct sx_evq *q, struct sx_ev *ev)
{
        if (!q->n)
                return false;
        *ev = q->v[q->head];
        q->head = (q->head + 1) % SX_EVQ;
        q->n--;
        return true;
}

/* Wait (lock held) for the next event of a segment's queue: SCI_ERR_OK with it in *ev,
 * SCI_ERR_TIMEOUT, or SCI_ERR_CANCELLED when the segment goes away meanwhile. */
static sci_error_t wait_event(struct sx_obj *o, struct sx_evq *q, unsigned timeout,
                              struct sx_ev *ev)
{
        uint64_t deadline = sx_deadline(timeout);
        bool got = false;
        sx_ref(o);
        while (!o->dead && !(got = evq_pop(q, ev)))
                if (!sx_wait(deadline))
                        break;
        sci_error_t e = got ? SCI_ERR_OK : o->dead ? SCI_ERR_CANCELLED : SCI_ERR_TIMEOUT;
        sx_unref(o);
        return e;
}

void sx_lseg_event(struct sx_lseg *s, sci_segment_cb_reason_t reason, uint32_t node_id,
                   uint32_t adapter_no)
{
        if (reason == SCI_CB_CONNECT)
                s->conns++;
        else if (reason == SCI_CB_DISCONNECT && s->conns)
                s->conns--;
        if (!s->cb) {
                evq_push(&s->evq, (struct sx_ev){reason, node_id, adapter_no, SCI_ERR_OK});
                return;
        }
        /* Callbacks run in the event thread without the lock: they may call the API. */
        sci_cb_local_segment_t cb = s->cb;
        void *arg = s->cbarg;
        sx_ref(&s->o);
        sx_unlock();
        sci_callback_action_t a =
            cb(arg, sx_handle(&s->o), reason, node_id, adapter_no, SCI_ERR_OK);
        sx_lock();
        if (a == SCI_CALLBACK_CANCEL)
                s->cb = NULL;
        sx_unref(&s->o);
}

void sx_rseg_event(struct sx_rseg *s, sci_segment_cb_reason_t reason, sci_error_t status)
{
        if (!s->cb) {
                evq_push(&s->evq, (struct sx_ev){reason, s->node_id, s->adapter_no, status});
                return;
        }
        sci_cb_remote_segment_t cb = s->cb;
        void *arg = s->cbarg;
        sx_ref(&s->o);
        sx_unlock();
        sci_callback_action_t a = cb(arg, sx_handle(&s->o), reason, status);
        sx_lock();
        if (a == SCI_CALLBACK_CANCEL)
                s->cb = NULL;
        sx_unref(&s->o);
}

/* Objects of a kind, gathered with a reference each (callbacks may drop the lock). */
static size_t gather(enum sx_kind kind, struct sx_obj ***out)
{
        size_t n = 0;
        for (struct sx_obj *o = sx.all; o; o = o->next)
                n += o->kind == kind;
        struct sx_obj **v = calloc(n + 1, sizeof(*v));
        n = 0;
        for (struct sx_obj *o = sx.all; o && v; o = o->next)
                if (o->kind == kind) {
                        sx_ref(o);
                        v[n++] = o;
                }
        *out = v;
        return v ? n : 0;
}

static void release_all(struct sx_obj **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                sx_unref(v[i]);
        free(v);
}

void sx_on_seg_event(struct json_object *ev)
{
        uint64_t id = 0, node_id = 0, adapter = 0;
        struct json_object *r;
        sx_get_u(ev, "id", &id);
        sx_get_u(ev, "node_id", &node_id);
        sx_get_u(ev, "adapter", &adapter);
        if (!json_object_object_get_ex(ev, "reason", &r))
                return;
        sci_segment_cb_reason_t reason =
            !strcmp(json_object_get_string(r), "connect") ? SCI_CB_CONNECT : SCI_CB_DISCONNECT;
        struct sx_obj **v;
        size_t n = gather(SX_LSEG, &v);
        for (size_t i = 0; i < n; i++) {
                struct sx_lseg *s = (struct sx_lseg *)v[i];
                if (!s->o.dead && s->did == id && !(s->flags & SCI_FLAG_PRIVATE)) {
                        sx_lseg_event(s, reason, (uint32_t)node_id, (uint32_t)adapter);
                        break;
                }
        }
        release_all(v, n);
}

void sx_on_lost(uint64_t dh, bool removed)
{
        bool found = false;
        for (struct sx_obj *o = sx.all; o; o = o->next) {
                if (o->kind == SX_RINT || o->kind == SX_RDINT) {
                        struct sx_rint *i = (struct sx_rint *)o;
                        if (i->dh == dh || (i->mbox_dh && i->mbox_dh == dh)) {
                                i->lost = true;
                                found = true;
                        }
                }
                struct sx_devmap *m = NULL;
                if (o->kind == SX_LSEG)
                        m = ((struct sx_lseg *)o)->dmaps;
                if (o->kind == SX_RSEG)
                        m = ((struct sx_rseg *)o)->dmaps;
                for (; m; m = m->next)
                        if (m->dh == dh) {
                                m->dh = 0; /* released by the manager: nothing to undo */
                                found = true;
                        }
        }
        struct sx_obj **v;
        size_t n = gather(SX_RSEG, &v);
        for (size_t i = 0; i < n; i++) {
                struct sx_rseg *s = (struct sx_rseg *)v[i];
                if (s->o.dead || s->dh != dh || s->lost)
                        continue;
                found = true;
                s->lost = true;
                sx_rseg_event(s, removed ? SCI_CB_DISCONNECT : SCI_CB_LOST, SCI_ERR_OK);
        }
        release_all(v, n);
        if (!found && sx.nearly_lost < sizeof(sx.early_lost) / sizeof(sx.early_lost[0]))
                sx.early_lost[sx.nearly_lost++] = dh; /* its connect is still being answered */
        pthread_cond_broadcast(&sx.cond);
}

void sx_on_link(uint32_t adapter, bool up)
{
        struct sx_obj **v;
        size_t n = gather(SX_RSEG, &v);
        for (size_t i = 0; i < n; i++) {
                struct sx_rseg *s = (struct sx_rseg *)v[i];
                if (s->o.dead || s->local || s->adapter != adapter || s->lost || s->down == !up)
                        continue;
                s->down = !up;
                sx_rseg_event(s, up ? SCI_CB_OPERATIONAL : SCI_CB_NOT_OPERATIONAL,
                              up ? SCI_ERR_OK : SCI_ERR_NO_LINK_ACCESS);
        }
        release_all(v, n);
}

/* ---- local segments -------------------------------------------------------------------------- */

void sx_lseg_free(struct sx_lseg *s)
{
        free(s);
}

void sx_lseg_drop(struct sx_lseg *s)
{
        if (s->own_mem && s->mem && sx.ctx)
                ntbf_dma_free(sx.ctx, s->mem);
        if (s->host_mem && s->mem && sx.ops)
                sx_host_unmap(s->mem, s->size);
        if (s->xmem.addr && sx.ctx)
                sx_hw_free(&s->xmem);
        s->mem = NULL;
        while (s->dmaps) {
                struct sx_devmap *m = s->dmaps;
                s->dmaps = m->next;
                free(m);
        }
}

static sci_error_t create_err(int r)
{
        switch (r) {
        case NTBF_EEXISTS:
                return SCI_ERR_SEGMENTID_USED;
        default:
                return sx_err_of(r);
        }
}

void SCICreateSegment(sci_desc_t sd, sci_local_segment_t *segment, unsigned int segmentId,
                      size_t size, sci_cb_local_segment_t callback, void *callbackArg,
                      unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_desc *d = (struct sx_desc *)sx_get(sd, SX_DESC);
        if (!d || !segment || !size) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~CREATE_FLAGS) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (!(flags & SCI_FLAG_AUTO_ID) && segmentId >= AUTO_ID_BASE) {
                *err = SCI_ERR_ILLEGAL_PARAMETER; /* the automatic range is the library's */
                goto out;
        }
        if (size > (UINT64_C(1) << 40)) {
                *err = SCI_ERR_NOSPC;
                goto out;
        }
        void *mem = NULL;
        uint64_t bus = 0;
        struct ntbf_mem xmem = {0};
        /* On hardware, what other nodes and processes connect to is the adapter's memory for
         * export (hw.c); a private segment is the process's own. When that memory is full the
         * segment cannot be made: process memory would be out of the others' reach. */
        int hw = flags & (SCI_FLAG_EMPTY | SCI_FLAG_PRIVATE) ? NTBF_EUNSUPPORTED
                                                             : sx_hw_alloc(size, &xmem);
        if (!hw) {
                mem = xmem.addr;
                bus = xmem.bus_addr;
        } else if (hw != NTBF_EUNSUPPORTED) {
                *err = SCI_ERR_NOSPC;
                goto out;
        } else if (!(flags & SCI_FLAG_EMPTY)) {
                /* Segment memory is the node's DMA-able memory (docs/sisci.md). */
                if (ntbf_dma_alloc(sx.ctx, size, 4096, &mem) ||
                    ntbf_dma_bus(sx.ctx, mem, size, &bus)) {
                        if (mem)
                                ntbf_dma_free(sx.ctx, mem);
                        *err = SCI_ERR_NOSPC;
                        goto out;
                }
        }
        struct json_object *p = sx_obj_new(), *res = NULL;
        if (!(flags & (SCI_FLAG_AUTO_ID | SCI_FLAG_PRIVATE)))
                sx_put_u(p, "id", segmentId);
        sx_put_u(p, "size", size);
        if (mem)
                sx_put_u(p, "addr", bus);
        sx_put_b(p, "private", flags & SCI_FLAG_PRIVATE);
        sx_put_b(p, "broadcast", flags & SCI_FLAG_BROADCAST);
        uint64_t id = segmentId;
        int r = sx_call("sisci.seg_create", p, &res);
        if (!r && !sx_get_u(res, "id", &id))
                r = NTBF_EPROTO;
        json_object_put(res);
        struct sx_lseg *s = r ? NULL : sx_new(sizeof(*s), SX_LSEG, d);
        if (!s) {
                if (!r) { /* the daemon has it: give it back */
                        struct json_object *q = sx_obj_new();
                        sx_put_u(q, "id", id); /* the daemon's number */
                        sx_call("sisci.seg_remove", q, NULL);
                }
                if (xmem.addr)
                        sx_hw_free(&xmem);
                else if (mem)
                        ntbf_dma_free(sx.ctx, mem);
                *err = r ? create_err(r) : SCI_ERR_NOSPC;
                goto out;
        }
        s->did = (uint32_t)id;
        s->id = (flags & SCI_FLAG_PRIVATE) && !(flags & SCI_FLAG_AUTO_ID) ? segmentId : s->did;
        s->size = size;
        s->flags = flags;
        s->mem = mem;
        s->bus = bus;
        s->own_mem = mem != NULL && !xmem.addr;
        s->xmem = xmem;
        if (callback && (flags & SCI_FLAG_USE_CALLBACK)) {
                s->cb = callback;
                s->cbarg = callbackArg;
        }
        *segment = sx_handle(&s->o);
out:
        sx_unlock();
}

void SCIRemoveSegment(sci_local_segment_t segment, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_lseg *s = (struct sx_lseg *)sx_get(segment, SX_LSEG);
        if (!s) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~SCI_FLAG_FORCE_REMOVE) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (s->maps || s->dev_maps) {
                *err = SCI_ERR_BUSY; /* unmap it (for the CPU and for devices) first */
                goto out;
        }
        struct json_object *p = sx_obj_new();
        /* Connected or not, the segment goes (as on Dolphin's library): its connectors get
         * SCI_CB_DISCONNECT, or SCI_CB_LOST with SCI_FLAG_FORCE_REMOVE. */
        sx_put_u(p, "id", s->did);
        sx_put_b(p, "force", true);
        sx_put_b(p, "graceful", !(flags & SCI_FLAG_FORCE_REMOVE));
        int r = sx_call("sisci.seg_remove", p, NULL);
        if (r && r != NTBF_ENOTFOUND) {
                *err = r == NTBF_EBUSY ? SCI_ERR_BUSY : sx_err_of(r);
                goto out;
        }
        sx_lseg_drop(s);
        sx_kill(&s->o);
out:
        sx_unlock();
}

static struct sx_lseg *lseg_adapter(sci_local_segment_t segment, unsigned adapter, sci_error_t *err)
{
        struct sx_lseg *s = (struct sx_lseg *)sx_get(segment, SX_LSEG);
        if (!s)
                *err = SCI_ERR_ILLEGAL_PARAMETER;
        else if (adapter >= 64 || sx_adapter(adapter) == NTBF_NONE)
                *err = SCI_ERR_NO_SUCH_ADAPTERNO;
        else
                return s;
        return NULL;
}

void SCIPrepareSegment(sci_local_segment_t segment, unsigned int localAdapterNo, unsigned int flags,
                       sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_lseg *s = lseg_adapter(segment, localAdapterNo, err);
        if (!s)
                goto out;
        /* SCI_FLAG_BROADCAST: as Dolphin's reflective-memory demo prepares its group's
         * segment; the creation flag already made it one, so it changes nothing here. */
        if (flags & ~(SCI_FLAG_DMA_SOURCE_ONLY | SCI_FLAG_LOCK_USER_MEM | SCI_FLAG_BROADCAST)) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (!s->mem && !s->bus) {
                *err = SCI_ERR_ILLEGAL_OPERATION; /* an empty segment: attach memory first */
                goto out;
        }
        s->prepared |= UINT64_C(1) << localAdapterNo;
out:
        sx_unlock();
}

static void set_available(sci_local_segment_t segment, unsigned adapter, unsigned flags, bool on,
                          sci_error_t *err)
{
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_lseg *s = lseg_adapter(segment, adapter, err);
        if (!s)
                goto out;
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (!(s->prepared >> adapter & 1)) {
                *err = SCI_ERR_SEGMENT_NOT_PREPARED;
                goto out;
        }
        struct json_object *p = sx_obj_new();
        sx_put_u(p, "id", s->did);
        sx_put_u(p, "adapter", adapter);
        sx_put_b(p, "available", on);
        int r = sx_call("sisci.seg_available", p, NULL);
        if (r) {
                /* A broadcast segment on a fabric without multicast cannot join its group. */
                *err = r == NTBF_ENOPATH || r == NTBF_EUNSUPPORTED ? SCI_ERR_NOT_SUPPORTED
                                                                   : sx_err_of(r);
                goto out;
        }
        if (on)
                s->available |= UINT64_C(1) << adapter;
        else
                s->available &= ~(UINT64_C(1) << adapter);
out:
        sx_unlock();
}

void SCISetSegmentAvailable(sci_local_segment_t segment, unsigned int localAdapterNo,
                            unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        set_available(segment, localAdapterNo, flags, true, err);
}

void SCISetSegmentUnavailable(sci_local_segment_t segment, unsigned int localAdapterNo,
                              unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        set_available(segment, localAdapterNo, flags, false, err);
}

/* Memory for an empty segment: its bus address must be reachable as RAM of this host. */
static void attach(struct sx_lseg *s, void *addr, uint64_t bus, size_t size, sci_error_t *err)
{
        if (s->mem || s->bus) {
                *err = SCI_ERR_ILLEGAL_OPERATION; /* it has memory already */
                return;
        }
        struct json_object *p = sx_obj_new();
        sx_put_u(p, "id", s->did);
        sx_put_u(p, "addr", bus);
        sx_put_u(p, "size", size);
        int r = sx_call("sisci.seg_attach", p, NULL);
        if (r) {
                *err = sx_err_of(r);
                return;
        }
        s->mem = addr;
        s->bus = bus;
        s->size = size;
        s->own_mem = false;
}

void SCIAttachPhysicalMemory(sci_ioaddr_t ioaddress, void *address, unsigned int busNo, size_t size,
                             sci_local_segment_t segment, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        (void)busNo; /* one PCI segment per simulated host */
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_lseg *s = (struct sx_lseg *)sx_get(segment, SX_LSEG);
        if (!s || !size) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~(SCI_FLAG_CUDA_BUFFER | SCI_FLAG_PHYSICAL)) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (!(s->flags & SCI_FLAG_EMPTY)) {
                *err = SCI_ERR_ILLEGAL_OPERATION;
                goto out;
        }
        if (flags & SCI_FLAG_CUDA_BUFFER) {
                *err = SCI_ERR_NOT_SUPPORTED; /* no GPU in the simulated fabric */
                goto out;
        }
        /*
         * ioaddress is a physical address of this host: RAM, or a BAR of a local device. The
         * process reaches it through the backend's host_map (the simulated fabric maps its
         * RAM and BAR files; hardware backends memory for export and sysfs BARs); address,
         * when given, is the caller's own mapping of it.
         */
        const struct ntbf_region *reg = ntbf_addrmap_lookup(sx.t, sx.node_idx, ioaddress);
        if (!reg || (reg->kind != NTBF_REGION_RAM && reg->kind != NTBF_REGION_BAR) ||
            ioaddress - reg->base + size > reg->size || ioaddress % 4096) {
                *err = SCI_ERR_ILLEGAL_ADDRESS;
                goto out;
        }
        void *p = address;
        bool mapped = false;
        if (!p) {
                int r = sx_host_map(ioaddress, size, &p, &mapped);
                if (r) {
                        sx_warn("SCIAttachPhysicalMemory: the %s backend cannot map [0x%" PRIx64
                                ", +%zu) of node %s into this process: %s",
                                sx.ops->name, (uint64_t)ioaddress, size, sx.node, ntbf_strerror(r));
                        *err = r == NTBF_EUNSUPPORTED ? SCI_ERR_NOT_SUPPORTED
                                                      : SCI_ERR_ILLEGAL_ADDRESS;
                        goto out;
                }
        }
        attach(s, p, ioaddress, size, err);
        if (*err != SCI_ERR_OK && mapped)
                sx_host_unmap(p, size);
        else
                s->host_mem = mapped;
out:
        sx_unlock();
}

/*
 * The bus address of process memory that is this node's memory: memory of the library's own
 * DMA allocations, or any memory the backend maps (host_bus: memory for export, another
 * segment's memory, on the simulated fabric any mapping of the node's RAM).
 */
static int ram_bus(const void *addr, size_t size, uint64_t *bus)
{
        if (!ntbf_dma_bus(sx.ctx, addr, size, bus))
                return 0;
        return sx_host_bus(addr, size, bus) ? -EFAULT : 0;
}

void SCIRegisterSegmentMemory(void *address, size_t size, sci_local_segment_t segment,
                              unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_lseg *s = (struct sx_lseg *)sx_get(segment, SX_LSEG);
        if (!s || !address || !size) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~SCI_FLAG_LOCK_USER_MEM) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (!(s->flags & SCI_FLAG_EMPTY)) {
                *err = SCI_ERR_ILLEGAL_OPERATION;
                goto out;
        }
        /*
         * Only memory that devices and the fabric can reach becomes a segment: the node's
         * memory the backend maps (docs/sisci.md); ordinary process memory (malloc, the
         * stack) is not in the host's physical address space as the fabric sees it.
         */
        uint64_t bus;
        if (ram_bus(address, size, &bus) || bus % 4096) {
                *err = SCI_ERR_ILLEGAL_ADDRESS;
                goto out;
        }
        attach(s, address, bus, size, err);
out:
        sx_unlock();
}

size_t SCIGetLocalSegmentSize(sci_local_segment_t segment)
{
        sx_lock();
        struct sx_lseg *s = (struct sx_lseg *)sx_get(segment, SX_LSEG);
        size_t n = s ? s->size : 0;
        sx_unlock();
        return n;
}

unsigned int SCIGetLocalSegmentId(sci_local_segment_t segment)
{
        sx_lock();
        struct sx_lseg *s = (struct sx_lseg *)sx_get(segment, SX_LSEG);
        unsigned id = s ? s->id : 0;
        sx_unlock();
        return id;
}

sci_segment_cb_reason_t SCIWaitForLocalSegmentEvent(sci_local_segment_t segment,
                                                    unsigned int *sourceNodeId,
                                                    unsigned int *localAdapterNo,
                                                    unsigned int timeout, unsigned int flags,
                                                    sci_error_t *error)
{
        SX_ERR(error);
        sci_segment_cb_reason_t reason = 0;
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_lseg *s = (struct sx_lseg *)sx_get(segment, SX_LSEG);
        if (!s) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (s->cb) {
                *err = SCI_ERR_ILLEGAL_OPERATION; /* its events go to the callback */
                goto out;
        }
        struct sx_ev ev = {0};
        if ((*err = wait_event(&s->o, &s->evq, timeout, &ev)) == SCI_ERR_OK) {
                reason = ev.reason;
                if (sourceNodeId)
                        *sourceNodeId = ev.node_id;
                if (localAdapterNo)
                        *localAdapterNo = ev.adapter;
        }
out:
        sx_unlock();
        return reason;
}

/* ---- remote segments ------------------------------------------------------------------------- */

void sx_rseg_free(struct sx_rseg *s)
{
        free(s);
}

void sx_rseg_drop(struct sx_rseg *s)
{
        if (s->imap_base && s->imap_host)
                sx_host_unmap(s->imap_base, s->imap_size);
        else if (s->imap_base && sx.ops)
                sx.ops->unmap_window(sx_ah(s->adapter), s->imap_base, s->imap_size);
        s->imap = NULL;
        s->imap_base = NULL;
        while (s->dmaps) {
                struct sx_devmap *m = s->dmaps;
                s->dmaps = m->next;
                free(m);
        }
        if (s->dev && s->dev->segs)
                s->dev->segs--;
}

/* Map the answer of a connection (sisci.connect, devseg_connect) into s. */
void sx_rseg_fill(struct sx_rseg *s, struct json_object *res);
void sx_rseg_fill(struct sx_rseg *s, struct json_object *res)
{
        uint64_t v;
        bool b = false;
        sx_get_u(res, "handle", &s->dh);
        sx_get_b(res, "local", &b);
        s->local = b;
        sx_get_u(res, "addr", &s->addr);
        if (sx_get_u(res, "size", &v))
                s->size = (size_t)v;
        s->adapter = sx_get_u(res, "adapter", &v) ? (uint32_t)v : NTBF_NONE;
        sx_get_u(res, "offset", &s->offset);
        s->win = sx_get_u(res, "window", &v) ? (uint32_t)v : 0;
        s->owner_node = sx_get_u(res, "owner_node", &v) ? (uint32_t)v : NTBF_NONE;
        sx_get_u(res, "owner_addr", &s->owner_phys);
        if (sx_early_lost(s->dh))
                s->lost = true;
}

static sci_error_t connect_err(int r)
{
        switch (r) {
        case NTBF_ENOTFOUND:
                return SCI_ERR_NO_SUCH_SEGMENT;
        case NTBF_EBUSY:
        case -EPERM:
                return SCI_ERR_CONNECTION_REFUSED;
        case -ENXIO:
                return SCI_ERR_NO_SUCH_NODEID;
        case NTBF_EUNREACHABLE:
        case -EPIPE:
        case -ETIMEDOUT:
                return SCI_ERR_NODE_NOT_RESPONDING;
        default:
                return sx_err_of(r);
        }
}

void SCIConnectSegment(sci_desc_t sd, sci_remote_segment_t *segment, unsigned int nodeId,
                       unsigned int segmentId, unsigned int localAdapterNo,
                       sci_cb_remote_segment_t callback, void *callbackArg, unsigned int timeout,
                       unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_desc *d = (struct sx_desc *)sx_get(sd, SX_DESC);
        if (!d || !segment) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~(SCI_FLAG_USE_CALLBACK | SCI_FLAG_BROADCAST)) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (localAdapterNo >= 64 || sx_adapter(localAdapterNo) == NTBF_NONE) {
                *err = SCI_ERR_NO_SUCH_ADAPTERNO;
                goto out;
        }
        bool bcast = flags & SCI_FLAG_BROADCAST;
        if (bcast != (nodeId == DIS_BROADCAST_NODEID_GROUP_ALL)) {
                *err = SCI_ERR_ILLEGAL_NODEID; /* the group id goes with the broadcast flag */
                goto out;
        }
        if (!bcast && sx_node_by_id(nodeId) == NTBF_NONE) {
                *err = SCI_ERR_NO_SUCH_NODEID;
                goto out;
        }
        /*
         * A segment that does not exist yet or is not available yet is retried until the
         * timeout (docs/sisci.md): the owner may still be starting.
         */
        uint64_t deadline = sx_deadline(timeout);
        struct json_object *res = NULL;
        int r;
        for (unsigned delay = 1;; delay = delay < 64 ? delay * 2 : 64) {
                struct json_object *p = sx_obj_new();
                sx_put_u(p, "node_id", bcast ? 0 : nodeId);
                sx_put_u(p, "id", segmentId);
                sx_put_u(p, "adapter", localAdapterNo);
                sx_put_b(p, "broadcast", bcast);
                r = sx_call("sisci.connect", p, &res);
                bool again = r == NTBF_ENOTFOUND || r == NTBF_EBUSY || r == NTBF_EUNREACHABLE;
                if (!again || timeout == 0)
                        break;
                uint64_t now = sx_now_ms();
                if (deadline && now >= deadline) {
                        r = -ETIMEDOUT;
                        break;
                }
                unsigned ms = delay;
                if (deadline && now + ms > deadline)
                        ms = (unsigned)(deadline - now);
                sx_unlock();
                nap_ms(ms);
                sx_lock();
                if (!sx.up || !(d = (struct sx_desc *)sx_get(sd, SX_DESC))) {
                        *err = SCI_ERR_CANCELLED;
                        goto out;
                }
        }
        if (r) {
                *err = r == -ETIMEDOUT && timeout ? SCI_ERR_TIMEOUT : connect_err(r);
                goto out;
        }
        struct sx_rseg *s = sx_new(sizeof(*s), SX_RSEG, d);
        if (!s) {
                uint64_t h = 0;
                sx_get_u(res, "handle", &h);
                struct json_object *q = sx_obj_new();
                sx_put_u(q, "handle", h);
                sx_call("sisci.release", q, NULL);
                json_object_put(res);
                *err = SCI_ERR_NOSPC;
                goto out;
        }
        s->rkind = SX_R_MEM;
        s->node_id = nodeId;
        s->id = segmentId;
        s->broadcast = bcast;
        s->adapter_no = localAdapterNo;
        sx_rseg_fill(s, res);
        json_object_put(res);
        if (callback && (flags & SCI_FLAG_USE_CALLBACK)) {
                s->cb = callback;
                s->cbarg = callbackArg;
        }
        *segment = sx_handle(&s->o);
out:
        sx_unlock();
}

void SCIDisconnectSegment(sci_remote_segment_t segment, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_rseg *s = (struct sx_rseg *)sx_get(segment, SX_RSEG);
        if (!s) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (s->maps || s->dev_maps) {
                *err = SCI_ERR_BUSY; /* unmap it first */
                goto out;
        }
        if (s->dh && !s->lost) {
                struct json_object *p = sx_obj_new();
                sx_put_u(p, "handle", s->dh);
                int r = sx_call("sisci.release", p, NULL);
                if (r && r != NTBF_ENOTFOUND) {
                        *err = sx_err_of(r);
                        goto out;
                }
        }
        sx_rseg_drop(s);
        sx_kill(&s->o);
out:
        sx_unlock();
}

size_t SCIGetRemoteSegmentSize(sci_remote_segment_t segment)
{
        sx_lock();
        struct sx_rseg *s = (struct sx_rseg *)sx_get(segment, SX_RSEG);
        size_t n = s ? s->size : 0;
        sx_unlock();
        return n;
}

unsigned int SCIGetRemoteSegmentId(sci_remote_segment_t segment)
{
        sx_lock();
        struct sx_rseg *s = (struct sx_rseg *)sx_get(segment, SX_RSEG);
        unsigned id = s ? s->id : 0;
        sx_unlock();
        return id;
}

unsigned int SCIGetRemoteSegmentNodeId(sci_remote_segment_t segment)
{
        sx_lock();
        struct sx_rseg *s = (struct sx_rseg *)sx_get(segment, SX_RSEG);
        unsigned id = s ? s->node_id : 0;
        sx_unlock();
        return id;
}

sci_segment_cb_reason_t SCIWaitForRemoteSegmentEvent(sci_remote_segment_t segment,
                                                     sci_error_t *status, unsigned int timeout,
                                                     unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        sci_segment_cb_reason_t reason = 0;
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_rseg *s = (struct sx_rseg *)sx_get(segment, SX_RSEG);
        if (!s) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (s->cb) {
                *err = SCI_ERR_ILLEGAL_OPERATION;
                goto out;
        }
        struct sx_ev ev = {0};
        if ((*err = wait_event(&s->o, &s->evq, timeout, &ev)) == SCI_ERR_OK) {
                reason = ev.reason;
                if (status)
                        *status = ev.status;
        }
out:
        sx_unlock();
        return reason;
}
