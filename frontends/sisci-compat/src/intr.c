/* frontends/sisci-compat/src/intr.c: interrupts and data interrupts (MSI writes, a mailbox ring).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "sx.h"

/*
 * An interrupt is a host interrupt vector of this node (the backend's irq_alloc: an MSI
 * address and data, and an eventfd). A remote process triggers it the way hardware does: a
 * CPU write of the data to the address, posted through its NTB window (window_write), which
 * a connection (a CONNECT admission onto the target's MSI range) makes reachable.
 *
 * A data interrupt adds a mailbox: memory of the receiver split into lanes, one per
 * connected writer (the fabric manager hands them out), each a ring of slots. A writer puts
 * its message in its lane's next slot, then stores the slot's sequence number, then writes
 * the interrupt. The receiver takes messages in sequence order and publishes how many it
 * took in the lane's header, which the writer reads only when the ring looks full.
 * docs/sisci.md has the layout.
 */

#define DINT_MAX   1024u /* largest message */
#define DINT_SLOTS 8u    /* slots per lane */
#define DINT_LANES 16u   /* writers at a time */
#define SLOT_BYTES 1088u /* seq (4), len (4), data (1024), padded to 64 */
#define LANE_HDR   64u   /* consumed (4), padding */
#define LANE_BYTES 12288u
#define MBOX_BYTES (DINT_LANES * LANE_BYTES)

_Static_assert(LANE_HDR + DINT_SLOTS * SLOT_BYTES <= LANE_BYTES, "a lane holds its slots");
_Static_assert(8 + DINT_MAX <= SLOT_BYTES, "a slot holds a message");

#define INT_CREATE_FLAGS                                                                           \
        (SCI_FLAG_USE_CALLBACK | SCI_FLAG_FIXED_INTNO | SCI_FLAG_SHARED_INT | SCI_FLAG_COUNTING_INT)

static volatile uint32_t *lane_word(volatile uint8_t *lane, size_t off)
{
        return (volatile uint32_t *)(lane + off);
}

/* ---- local interrupts ------------------------------------------------------------------------ */

void sx_lint_free(struct sx_lint *i)
{
        free(i->lane_head);
        free(i);
}

static void stop_thread(struct sx_lint *i)
{
        if (!i->thread_on)
                return;
        uint64_t one = 1;
        ssize_t w = write(i->stop, &one, sizeof(one));
        (void)w;
        i->thread_on = false;
        if (pthread_equal(pthread_self(), i->thread)) {
                pthread_detach(i->thread); /* removed from its own callback */
                return;
        }
        sx_unlock();
        pthread_join(i->thread, NULL);
        sx_lock();
}

void sx_lint_drop(struct sx_lint *i)
{
        stop_thread(i);
        if (i->stop >= 0)
                close(i->stop);
        i->stop = -1;
        uint32_t ad = sx_adapter(i->adapter_no);
        if (i->irq.fd >= 0 && sx.ops && sx_ah(ad))
                sx.ops->irq_free(sx_ah(ad), &i->irq);
        i->irq.fd = -1;
        if (i->xmbox.addr && sx.ctx)
                sx_hw_free(&i->xmbox);
        else if (i->mbox && sx.ctx)
                ntbf_dma_free(sx.ctx, i->mbox);
        i->mbox = NULL;
}

/* Take one message from the mailbox, lock held. 1: got one; 0: none; <0: buffer too small. */
static int take_message(struct sx_lint *i, void *buf, unsigned cap, unsigned *len)
{
        volatile uint8_t *mb = i->mbox;
        for (uint32_t k = 0; k < DINT_LANES; k++) {
                uint32_t lane = (i->next_lane + k) % DINT_LANES;
                volatile uint8_t *l = mb + (size_t)lane * LANE_BYTES;
                uint32_t want = i->lane_head[lane] + 1;
                volatile uint8_t *slot =
                    l + LANE_HDR + (size_t)(want - 1) % DINT_SLOTS * SLOT_BYTES;
                if (__atomic_load_n((uint32_t *)(uintptr_t)lane_word(slot, 0), __ATOMIC_ACQUIRE) !=
                    want)
                        continue;
                uint32_t n = *lane_word(slot, 4);
                if (n > DINT_MAX)
                        n = DINT_MAX;
                *len = n;
                if (n > cap)
                        return -1; /* kept for a call with a larger buffer */
                memcpy(buf, (const void *)(uintptr_t)(slot + 8), n);
                i->lane_head[lane] = want;
                __atomic_store_n((uint32_t *)(uintptr_t)lane_word(l, 0), want, __ATOMIC_RELEASE);
                i->next_lane = (lane + 1) % DINT_LANES;
                return 1;
        }
        return 0;
}

/* Count the interrupts that arrived (the eventfd is a counter). */
static void drain_fd(struct sx_lint *i)
{
        uint64_t n;
        if (read(i->irq.fd, &n, sizeof(n)) == sizeof(n))
                i->pending += n;
}

static void *callback_thread(void *arg)
{
        struct sx_lint *i = arg;
        struct pollfd p[2] = {{i->irq.fd, POLLIN, 0}, {i->stop, POLLIN, 0}};
        uint8_t *msg = malloc(DINT_MAX);
        for (bool go = msg != NULL; go;) {
                if (poll(p, 2, -1) < 0 && errno != EINTR)
                        break;
                if (p[1].revents)
                        break;
                sx_lock();
                if (i->o.dead || !i->thread_on) {
                        sx_unlock();
                        break;
                }
                if (p[0].revents)
                        drain_fd(i);
                for (;;) {
                        sci_callback_action_t a = SCI_CALLBACK_CONTINUE;
                        void *h = sx_handle(&i->o), *cbarg = i->cbarg;
                        if (i->data) {
                                unsigned len = 0;
                                if (take_message(i, msg, DINT_MAX, &len) <= 0)
                                        break;
                                sci_cb_data_interrupt_t cb = i->dcb;
                                sx_unlock();
                                a = cb(cbarg, h, msg, len, SCI_ERR_OK);
                                sx_lock();
                        } else {
                                if (!i->pending)
                                        break;
                                i->pending--;
                                sci_cb_interrupt_t cb = i->cb;
                                sx_unlock();
                                a = cb(cbarg, h, SCI_ERR_OK);
                                sx_lock();
                        }
                        if (a == SCI_CALLBACK_CANCEL || i->o.dead) {
                                go = false;
                                i->cb = NULL;
                                i->dcb = NULL;
                                break;
                        }
                }
                sx_unlock();
        }
        free(msg);
        return NULL;
}

static void create(sci_desc_t sd, void **out, unsigned adapter, unsigned int *intno, bool data,
                   void *cb, void *cbarg, unsigned flags, sci_error_t *err)
{
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_desc *d = (struct sx_desc *)sx_get(sd, SX_DESC);
        if (!d || !out || !intno) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~INT_CREATE_FLAGS) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        uint32_t ad = sx_adapter(adapter);
        struct ntbf_adapter_h *h = sx_ah(ad);
        if (!h) {
                *err = SCI_ERR_NO_SUCH_ADAPTERNO;
                goto out;
        }
        struct ntbf_caps caps;
        if (sx.ops->caps(h, &caps) || !(caps.flags & NTBF_CAP_IRQ) || !sx.ops->irq_alloc) {
                *err = SCI_ERR_NOT_SUPPORTED;
                goto out;
        }
        struct sx_lint *i = sx_new(sizeof(*i), data ? SX_LDINT : SX_LINT, d);
        if (!i) {
                *err = SCI_ERR_NOSPC;
                goto out;
        }
        i->data = data;
        i->adapter_no = adapter;
        i->stop = -1;
        i->irq.fd = -1;
        struct json_object *p = sx_obj_new(), *res = NULL;
        int r = sx.ops->irq_alloc(h, &i->irq);
        if (r) {
                i->irq.fd = -1;
                json_object_put(p);
                goto fail;
        }
        if (data) {
                i->lane_head = calloc(DINT_LANES, sizeof(*i->lane_head));
                /* Writers on other nodes reach the mailbox: on hardware it is the adapter's
                 * memory for export (hw.c), or DMA memory where that is the same
                 * (NTBF_CAP_MEM_PHYS). */
                int hw = i->lane_head ? sx_hw_alloc(MBOX_BYTES, &i->xmbox) : -ENOMEM;
                if (!hw) {
                        i->mbox = i->xmbox.addr;
                        i->mbox_bus = i->xmbox.bus_addr;
                } else if (hw != NTBF_EUNSUPPORTED) {
                        r = hw;
                        json_object_put(p);
                        goto fail;
                } else if ((r = ntbf_dma_alloc(sx.ctx, MBOX_BYTES, 4096, &i->mbox)) ||
                           (r = ntbf_dma_bus(sx.ctx, i->mbox, MBOX_BYTES, &i->mbox_bus))) {
                        r = r ? r : -ENOMEM;
                        json_object_put(p);
                        goto fail;
                }
                i->mbox_size = MBOX_BYTES;
                sx_put_u(p, "mbox_addr", i->mbox_bus);
                sx_put_u(p, "mbox_size", MBOX_BYTES);
                sx_put_u(p, "lanes", DINT_LANES);
        }
        sx_put_b(p, "data_int", data);
        if (flags & SCI_FLAG_FIXED_INTNO)
                sx_put_u(p, "intno", *intno);
        sx_put_u(p, "data", i->irq.data);
        sx_put_u(p, "addr", i->irq.addr);
        uint64_t no = 0;
        r = sx_call("sisci.int_create", p, &res);
        if (!r && !sx_get_u(res, "intno", &no))
                r = NTBF_EPROTO;
        json_object_put(res);
        if (r)
                goto fail;
        i->intno = (uint32_t)no;
        if (cb && (flags & SCI_FLAG_USE_CALLBACK)) {
                if (data)
                        i->dcb = (sci_cb_data_interrupt_t)cb;
                else
                        i->cb = (sci_cb_interrupt_t)cb;
                i->cbarg = cbarg;
                i->stop = eventfd(0, EFD_CLOEXEC);
                if (i->stop < 0 || pthread_create(&i->thread, NULL, callback_thread, i)) {
                        struct json_object *q = sx_obj_new();
                        sx_put_b(q, "data_int", data);
                        sx_put_u(q, "intno", i->intno);
                        sx_call("sisci.int_remove", q, NULL);
                        r = -ENOMEM;
                        goto fail;
                }
                i->thread_on = true;
        }
        *intno = i->intno;
        *out = sx_handle(&i->o);
        goto out;
fail:
        *err = r == NTBF_EEXISTS ? SCI_ERR_INTNO_USED : sx_err_of(r);
        sx_lint_drop(i);
        sx_kill(&i->o);
out:
        sx_unlock();
}

void SCICreateInterrupt(sci_desc_t sd, sci_local_interrupt_t *interrupt,
                        unsigned int localAdapterNo, unsigned int *interruptNo,
                        sci_cb_interrupt_t callback, void *callbackArg, unsigned int flags,
                        sci_error_t *error)
{
        SX_ERR(error);
        create(sd, (void **)interrupt, localAdapterNo, interruptNo, false, (void *)callback,
               callbackArg, flags, err);
}

void SCICreateDataInterrupt(sci_desc_t sd, sci_local_data_interrupt_t *interrupt,
                            unsigned int localAdapterNo, unsigned int *interruptNo,
                            sci_cb_data_interrupt_t callback, void *callbackArg, unsigned int flags,
                            sci_error_t *error)
{
        SX_ERR(error);
        create(sd, (void **)interrupt, localAdapterNo, interruptNo, true, (void *)callback,
               callbackArg, flags, err);
}

static void remove_int(void *h, bool data, unsigned flags, sci_error_t *err)
{
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_lint *i = (struct sx_lint *)sx_get(h, data ? SX_LDINT : SX_LINT);
        if (!i) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        struct json_object *p = sx_obj_new();
        sx_put_b(p, "data_int", data);
        sx_put_u(p, "intno", i->intno);
        int r = sx_call("sisci.int_remove", p, NULL);
        if (r && r != NTBF_ENOTFOUND) {
                *err = sx_err_of(r);
                goto out;
        }
        sx_ref(&i->o);
        sx_kill(&i->o); /* waiters wake up: the interrupt is gone */
        sx_lint_drop(i);
        sx_unref(&i->o);
out:
        sx_unlock();
}

void SCIRemoveInterrupt(sci_local_interrupt_t interrupt, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        remove_int(interrupt, false, flags, err);
}

void SCIRemoveDataInterrupt(sci_local_data_interrupt_t interrupt, unsigned int flags,
                            sci_error_t *error)
{
        SX_ERR(error);
        remove_int(interrupt, true, flags, err);
}

/* Wait (lock held on entry and exit) until the vector's eventfd fires or the deadline. */
static bool wait_fd(struct sx_lint *i, uint64_t deadline)
{
        int ms = -1;
        if (deadline) {
                uint64_t now = sx_now_ms();
                if (now >= deadline)
                        return false;
                ms = (int)(deadline - now < 1000 ? deadline - now : 1000);
        } else {
                ms = 1000; /* look for a removal once a second */
        }
        struct pollfd p = {i->irq.fd, POLLIN, 0};
        i->waiters++;
        sx_unlock();
        int r = poll(&p, 1, ms);
        sx_lock();
        i->waiters--;
        if (r > 0 && !i->o.dead)
                drain_fd(i);
        return true;
}

void SCIWaitForInterrupt(sci_local_interrupt_t interrupt, unsigned int timeout, unsigned int flags,
                         sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_lint *i = (struct sx_lint *)sx_get(interrupt, SX_LINT);
        if (!i) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (i->thread_on) {
                *err = SCI_ERR_ILLEGAL_OPERATION; /* its interrupts go to the callback */
                goto out;
        }
        uint64_t deadline = sx_deadline(timeout);
        sx_ref(&i->o);
        for (;;) {
                if (i->o.dead) {
                        *err = SCI_ERR_CANCELLED;
                        break;
                }
                if (i->pending) {
                        i->pending--;
                        break;
                }
                if (!wait_fd(i, deadline)) {
                        *err = SCI_ERR_TIMEOUT;
                        break;
                }
        }
        sx_unref(&i->o);
out:
        sx_unlock();
}

void SCIWaitForDataInterrupt(sci_local_data_interrupt_t interrupt, void *data, unsigned int *length,
                             unsigned int timeout, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_lint *i = (struct sx_lint *)sx_get(interrupt, SX_LDINT);
        if (!i || !data || !length) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (i->thread_on) {
                *err = SCI_ERR_ILLEGAL_OPERATION;
                goto out;
        }
        uint64_t deadline = sx_deadline(timeout);
        unsigned cap = *length;
        sx_ref(&i->o);
        for (;;) {
                if (i->o.dead) {
                        *err = SCI_ERR_CANCELLED;
                        break;
                }
                int got = take_message(i, data, cap, length);
                if (got < 0) {
                        *err = SCI_ERR_OVERFLOW; /* *length says how much it needs */
                        break;
                }
                if (got > 0)
                        break;
                if (!wait_fd(i, deadline)) {
                        *err = SCI_ERR_TIMEOUT;
                        break;
                }
        }
        sx_unref(&i->o);
out:
        sx_unlock();
}

/* ---- remote interrupts ------------------------------------------------------------------------
 */

void sx_rint_free(struct sx_rint *i)
{
        free(i);
}

void sx_rint_drop(struct sx_rint *i)
{
        if (i->lane_base && i->lane_host)
                sx_host_unmap(i->lane_base, i->lane_base_size);
        else if (i->lane_base && sx.ops)
                sx.ops->unmap_window(sx_ah(i->lane_adapter), i->lane_base, i->lane_base_size);
        i->lane_base = NULL;
}

static sci_error_t connect_err(int r)
{
        switch (r) {
        case NTBF_ENOTFOUND:
                return SCI_ERR_NO_SUCH_INTNO;
        case -ENXIO:
                return SCI_ERR_NO_SUCH_NODEID;
        case NTBF_ENOSPC_BUDGET:
                return SCI_ERR_NOSPC; /* every lane of the data interrupt is taken */
        case NTBF_EUNREACHABLE:
                return SCI_ERR_NODE_NOT_RESPONDING;
        default:
                return sx_err_of(r);
        }
}

static void nap_ms(unsigned ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

/* The writer's lane of a data interrupt's mailbox: mapped, emptied, ready at sequence 0. */
static int map_lane(struct sx_rint *i, struct json_object *mbox)
{
        uint64_t lane = 0, addr = 0, off = 0, ad = NTBF_NONE, win = 0;
        bool local = false;
        sx_get_u(mbox, "handle", &i->mbox_dh);
        sx_get_u(mbox, "lane", &lane);
        sx_get_b(mbox, "local", &local);
        sx_get_u(mbox, "addr", &addr);
        sx_get_u(mbox, "offset", &off);
        sx_get_u(mbox, "window", &win);
        sx_get_u(mbox, "adapter", &ad);
        if (lane >= DINT_LANES)
                return NTBF_EPROTO;
        i->lane = (uint32_t)lane;
        if (local) {
                void *p;
                bool mapped;
                int r = sx_host_map(addr + lane * LANE_BYTES, LANE_BYTES, &p, &mapped);
                if (r)
                        return r;
                i->lane_ptr = p;
                if (mapped) {
                        i->lane_base = p;
                        i->lane_base_size = LANE_BYTES;
                        i->lane_host = true;
                }
        } else {
                i->lane_adapter = (uint32_t)ad;
                void *base;
                int r =
                    sx.ops->map_window(sx_ah((uint32_t)ad), (uint32_t)win, off + lane * LANE_BYTES,
                                       LANE_BYTES, NTBF_MAP_UNCACHED, &base);
                /* A backend that maps windows write-combined only (linux-ntb): the writer's
                 * full fences order its stores there as well (SCITriggerDataInterrupt). */
                if (r == NTBF_EUNSUPPORTED)
                        r = sx.ops->map_window(sx_ah((uint32_t)ad), (uint32_t)win,
                                               off + lane * LANE_BYTES, LANE_BYTES, 0, &base);
                if (r)
                        return r;
                i->lane_base = base;
                i->lane_base_size = LANE_BYTES;
                i->lane_ptr = base;
        }
        /* Whatever a previous writer of the lane left unread is dropped. */
        uint32_t consumed = *lane_word(i->lane_ptr, 0);
        for (uint32_t k = 0; k < DINT_SLOTS; k++)
                *lane_word(i->lane_ptr, LANE_HDR + k * SLOT_BYTES) = 0;
        i->seq = consumed;
        i->consumed = consumed;
        return 0;
}

static void connect_int(sci_desc_t sd, void **out, unsigned node_id, unsigned adapter,
                        unsigned intno, unsigned timeout, unsigned flags, bool data,
                        sci_error_t *err)
{
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_desc *d = (struct sx_desc *)sx_get(sd, SX_DESC);
        if (!d || !out) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (adapter >= 64 || sx_adapter(adapter) == NTBF_NONE) {
                *err = SCI_ERR_NO_SUCH_ADAPTERNO;
                goto out;
        }
        if (sx_node_by_id(node_id) == NTBF_NONE) {
                *err = SCI_ERR_NO_SUCH_NODEID;
                goto out;
        }
        uint64_t deadline = sx_deadline(timeout);
        struct json_object *res = NULL;
        int r;
        for (unsigned delay = 1;; delay = delay < 64 ? delay * 2 : 64) {
                struct json_object *p = sx_obj_new();
                sx_put_b(p, "data_int", data);
                sx_put_u(p, "node_id", node_id);
                sx_put_u(p, "intno", intno);
                sx_put_u(p, "adapter", adapter);
                r = sx_call("sisci.int_connect", p, &res);
                if ((r != NTBF_ENOTFOUND && r != NTBF_EUNREACHABLE) || timeout == 0)
                        break;
                uint64_t now = sx_now_ms();
                if (deadline && now >= deadline) {
                        r = -ETIMEDOUT;
                        break;
                }
                sx_unlock();
                nap_ms(deadline && now + delay > deadline ? (unsigned)(deadline - now) : delay);
                sx_lock();
                if (!sx.up || !(d = (struct sx_desc *)sx_get(sd, SX_DESC))) {
                        *err = SCI_ERR_CANCELLED;
                        goto out;
                }
        }
        if (r) {
                *err = r == -ETIMEDOUT ? SCI_ERR_TIMEOUT : connect_err(r);
                goto out;
        }
        struct sx_rint *i = sx_new(sizeof(*i), data ? SX_RDINT : SX_RINT, d);
        uint64_t v = 0;
        if (!i) {
                r = -ENOMEM;
        } else {
                i->data = data;
                i->node_id = node_id;
                i->intno = intno;
                sx_get_u(res, "handle", &i->dh);
                bool local = false;
                sx_get_b(res, "local", &local);
                i->local = local;
                sx_get_u(res, "addr", &i->local_addr);
                i->adapter = sx_get_u(res, "adapter", &v) ? (uint32_t)v : NTBF_NONE;
                sx_get_u(res, "offset", &i->offset);
                i->win = sx_get_u(res, "window", &v) ? (uint32_t)v : 0;
                if (sx_get_u(res, "data", &v))
                        i->msi_data = (uint32_t)v;
                struct json_object *mbox;
                if (data)
                        r = json_object_object_get_ex(res, "mbox", &mbox) ? map_lane(i, mbox)
                                                                          : NTBF_EPROTO;
                if (sx_early_lost(i->dh) || (i->mbox_dh && sx_early_lost(i->mbox_dh)))
                        i->lost = true;
        }
        if (r) {
                /* Give back what the daemon made. */
                uint64_t h[2] = {0, 0};
                struct json_object *mbox;
                sx_get_u(res, "handle", &h[0]);
                if (json_object_object_get_ex(res, "mbox", &mbox))
                        sx_get_u(mbox, "handle", &h[1]);
                for (int k = 0; k < 2; k++)
                        if (h[k]) {
                                struct json_object *q = sx_obj_new();
                                sx_put_u(q, "handle", h[k]);
                                sx_call("sisci.release", q, NULL);
                        }
                if (i) {
                        sx_rint_drop(i);
                        sx_kill(&i->o);
                }
                *err = sx_err_of(r);
        } else {
                *out = sx_handle(&i->o);
        }
        json_object_put(res);
out:
        sx_unlock();
}

void SCIConnectInterrupt(sci_desc_t sd, sci_remote_interrupt_t *interrupt, unsigned int nodeId,
                         unsigned int localAdapterNo, unsigned int interruptNo,
                         unsigned int timeout, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        connect_int(sd, (void **)interrupt, nodeId, localAdapterNo, interruptNo, timeout, flags,
                    false, err);
}

void SCIConnectDataInterrupt(sci_desc_t sd, sci_remote_data_interrupt_t *interrupt,
                             unsigned int nodeId, unsigned int localAdapterNo,
                             unsigned int interruptNo, unsigned int timeout, unsigned int flags,
                             sci_error_t *error)
{
        SX_ERR(error);
        connect_int(sd, (void **)interrupt, nodeId, localAdapterNo, interruptNo, timeout, flags,
                    true, err);
}

static void disconnect_int(void *h, bool data, unsigned flags, sci_error_t *err)
{
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_rint *i = (struct sx_rint *)sx_get(h, data ? SX_RDINT : SX_RINT);
        if (!i) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        uint64_t hs[2] = {i->dh, i->mbox_dh};
        for (int k = 0; k < 2 && !i->lost; k++)
                if (hs[k]) {
                        struct json_object *q = sx_obj_new();
                        sx_put_u(q, "handle", hs[k]);
                        int r = sx_call("sisci.release", q, NULL);
                        if (r && r != NTBF_ENOTFOUND) {
                                *err = sx_err_of(r);
                                goto out;
                        }
                }
        sx_rint_drop(i);
        sx_kill(&i->o);
out:
        sx_unlock();
}

void SCIDisconnectInterrupt(sci_remote_interrupt_t interrupt, unsigned int flags,
                            sci_error_t *error)
{
        SX_ERR(error);
        disconnect_int(interrupt, false, flags, err);
}

void SCIDisconnectDataInterrupt(sci_remote_data_interrupt_t interrupt, unsigned int flags,
                                sci_error_t *error)
{
        SX_ERR(error);
        disconnect_int(interrupt, true, flags, err);
}

/* The interrupt itself: the vector's data written to its address, as the CPU would. */
static sci_error_t fire(struct sx_rint *i)
{
        uint32_t v = i->msi_data;
        int r;
        if (i->local)
                r = sx_irq_trigger(i->adapter, i->local_addr, v);
        else
                r = sx.ops->window_write
                        ? sx.ops->window_write(sx_ah(i->adapter), i->win, i->offset, &v, sizeof(v))
                        : NTBF_EUNSUPPORTED;
        if (r == NTBF_EUNSUPPORTED)
                return SCI_ERR_NOT_SUPPORTED;
        return r ? SCI_ERR_TRANSFER_FAILED : SCI_ERR_OK;
}

void SCITriggerInterrupt(sci_remote_interrupt_t interrupt, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_rint *i = (struct sx_rint *)sx_get(interrupt, SX_RINT);
        if (!i)
                *err = SCI_ERR_ILLEGAL_PARAMETER;
        else if (flags)
                *err = SCI_ERR_ILLEGAL_FLAG;
        else if (i->lost)
                *err = SCI_ERR_NOT_CONNECTED;
        else
                *err = fire(i);
out:
        sx_unlock();
}

void SCITriggerDataInterrupt(sci_remote_data_interrupt_t interrupt, void *data, unsigned int length,
                             unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_rint *i = (struct sx_rint *)sx_get(interrupt, SX_RDINT);
        if (!i || (!data && length)) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (length > DINT_MAX) {
                *err = SCI_ERR_OUT_OF_RANGE;
                goto out;
        }
        if (i->lost) {
                *err = SCI_ERR_NOT_CONNECTED;
                goto out;
        }
        /*
         * A ring that looks full reads the reader's count back (a remote read across the
         * fabric, only then); still full, the trigger fails at once with SCI_ERR_NOSPC and
         * sends nothing, as a receiver queue that is full does on Dolphin's library.
         */
        volatile uint8_t *l = i->lane_ptr;
        if (i->seq - i->consumed >= DINT_SLOTS) {
                uint32_t consumed = *lane_word(l, 0);
                if (consumed == UINT32_MAX) { /* all ones: the mailbox is gone */
                        *err = SCI_ERR_NOT_CONNECTED;
                        goto out;
                }
                if (i->seq - consumed >= DINT_SLOTS) {
                        *err = SCI_ERR_NOSPC;
                        goto out;
                }
                i->consumed = consumed;
        }
        uint32_t seq = i->seq + 1;
        volatile uint8_t *slot = l + LANE_HDR + (size_t)(seq - 1) % DINT_SLOTS * SLOT_BYTES;
        memcpy((void *)(uintptr_t)(slot + 8), data ? data : "", length);
        *lane_word(slot, 4) = length;
        /* The message before its sequence number: a full fence, since the lane may be mapped
         * write-combined, whose stores a release fence does not order (x86: mfence). */
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        *lane_word(slot, 0) = seq;
        __atomic_thread_fence(__ATOMIC_SEQ_CST); /* and both before the interrupt */
        i->seq = seq;
        *err = fire(i);
out:
        sx_unlock();
}
