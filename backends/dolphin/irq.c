/* backends/dolphin/irq.c: interrupt vectors: words of exported memory, rung by SISCI interrupts. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "dolphin.h"

/*
 * A vector of the vtable is an MSI write: data written to an address of this host. A SISCI
 * interrupt is rung by SCITriggerInterrupt alone, never by a store (a CPU's through a mapping,
 * a device's MSI), so a vector is both (docs/dolphin.md):
 *
 * - a 4-byte word of an interrupt page, a page of this handle's memory for export whose
 *   header names the page's SISCI interrupt (its doorbell) and node; the vector's address is
 *   the word's, its data a number of its own. Whatever writes the data there (a store through
 *   a window slot onto the page, a device's MSI mapped with dev_map, irq_trigger) raises the
 *   vector: the handle's watcher thread finds the word set, clears it and signals the
 *   vector's eventfd.
 * - the watcher sleeps in SCIWaitForInterrupt on the doorbell, 1 ms at most: window_write of
 *   4 bytes onto an interrupt page (and irq_trigger) triggers the doorbell after the store, so
 *   it wakes at once; a plain store is seen within a millisecond.
 */

#define IRQ_MAGIC   UINT64_C(0x31515249424e544e) /* "NTBIRQ1", little endian */
#define IRQ_HDR     64u
#define IRQ_VECS    ((4096u - IRQ_HDR) / 4u)
#define IRQ_DATA    UINT32_C(0x44300000) /* "D0": a vector's data is this | its number */
#define IRQ_WAIT_MS 1u

struct irq_hdr {
        uint64_t magic;
        uint32_t node_id, intno; /* the page's doorbell: SISCI interrupt intno of node_id */
};

struct dol_irqs {
        struct ntbf_adapter_h *h;
        struct ntbf_mem page;
        sci_local_interrupt_t lint;
        unsigned intno;
        pthread_t thread;
        bool running;
        _Atomic bool stop;
        pthread_mutex_t lock; /* the vectors */
        int efd[IRQ_VECS];
        bool used[IRQ_VECS];
};

static _Atomic uint32_t *word(struct dol_irqs *q, unsigned i)
{
        return (_Atomic uint32_t *)(void *)((uint8_t *)q->page.addr + IRQ_HDR + 4 * i);
}

static void *watcher(void *arg)
{
        struct dol_irqs *q = arg;
        struct dol_lib *L = q->h->L;
        while (!atomic_load(&q->stop)) {
                pthread_mutex_lock(&q->lock);
                for (unsigned i = 0; i < IRQ_VECS; i++) {
                        if (!q->used[i] || !atomic_load(word(q, i)))
                                continue;
                        if (atomic_exchange(word(q, i), 0) == (IRQ_DATA | (i + 1))) {
                                uint64_t one = 1;
                                ssize_t n = write(q->efd[i], &one, sizeof(one));
                                (void)n;
                        }
                }
                pthread_mutex_unlock(&q->lock);
                sci_error_t e = SCI_ERR_OK;
                SCI(L, WaitForInterrupt, q->lint, IRQ_WAIT_MS, 0, &e);
        }
        return NULL;
}

static void irqs_free(struct ntbf_adapter_h *h, struct dol_irqs *q)
{
        sci_error_t e;
        if (q->running) {
                atomic_store(&q->stop, true);
                pthread_join(q->thread, NULL);
        }
        if (q->lint)
                SCI(h->L, RemoveInterrupt, q->lint, 0, &e);
        for (unsigned i = 0; i < IRQ_VECS; i++)
                if (q->used[i])
                        close(q->efd[i]);
        pthread_mutex_destroy(&q->lock);
}

/* The handle's interrupt page, its doorbell and its watcher, made at the first vector. */
static int irqs_get(struct ntbf_adapter_h *h, struct dol_irqs **out)
{
        if (h->irqs) {
                *out = h->irqs;
                return 0;
        }
        struct dol_irqs *q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        q->h = h;
        pthread_mutex_init(&q->lock, NULL);
        int r = ntbf__dol_mem_alloc(h, 4096, 4096, &q->page);
        if (r) {
                pthread_mutex_destroy(&q->lock);
                free(q);
                return r;
        }
        struct dol_lib *L = h->L;
        sci_error_t e = SCI_ERR_OK;
        SCI(L, CreateInterrupt, L->sd, &q->lint, h->ano, &q->intno, NULL, NULL, 0, &e);
        if (e != SCI_ERR_OK) {
                q->lint = NULL;
                r = ntbf__dol_err(e);
        } else {
                struct irq_hdr *hd = q->page.addr;
                hd->node_id = h->node_id;
                hd->intno = q->intno;
                atomic_thread_fence(memory_order_release);
                hd->magic = IRQ_MAGIC;
                q->running = !pthread_create(&q->thread, NULL, watcher, q);
                r = q->running ? 0 : -EAGAIN;
        }
        if (r) {
                irqs_free(h, q);
                ntbf__dol_mem_free(h, &q->page);
                free(q);
                return r;
        }
        h->irqs = *out = q;
        return 0;
}

int ntbf__dol_irq_alloc(struct ntbf_adapter_h *h, struct ntbf_irq *out)
{
        if (!out)
                return -EINVAL;
        struct dol_irqs *q;
        pthread_mutex_lock(&h->irq_lock);
        int r = irqs_get(h, &q);
        pthread_mutex_unlock(&h->irq_lock);
        if (r)
                return r;
        pthread_mutex_lock(&q->lock);
        unsigned i = 0;
        while (i < IRQ_VECS && q->used[i])
                i++;
        if (i == IRQ_VECS) {
                pthread_mutex_unlock(&q->lock);
                return -ENOSPC;
        }
        int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (fd < 0) {
                r = -errno;
                pthread_mutex_unlock(&q->lock);
                return r;
        }
        atomic_store(word(q, i), 0);
        q->efd[i] = fd;
        q->used[i] = true;
        pthread_mutex_unlock(&q->lock);
        *out = (struct ntbf_irq){q->page.bus_addr + IRQ_HDR + 4 * i, IRQ_DATA | (i + 1), fd, i + 1};
        return 0;
}

int ntbf__dol_irq_free(struct ntbf_adapter_h *h, struct ntbf_irq *irq)
{
        pthread_mutex_lock(&h->irq_lock);
        struct dol_irqs *q = h->irqs;
        pthread_mutex_unlock(&h->irq_lock);
        if (!irq || !q || irq->id < 1 || irq->id > IRQ_VECS)
                return -EINVAL;
        unsigned i = irq->id - 1;
        pthread_mutex_lock(&q->lock);
        if (!q->used[i]) {
                pthread_mutex_unlock(&q->lock);
                return -EINVAL;
        }
        q->used[i] = false;
        close(q->efd[i]);
        atomic_store(word(q, i), 0);
        pthread_mutex_unlock(&q->lock);
        irq->fd = -1;
        return 0;
}

/* Trigger SISCI interrupt intno of node node_id through a cached connection (h->lock held). */
static void ring(struct ntbf_adapter_h *h, uint32_t node_id, uint32_t intno)
{
        struct dol_lib *L = h->L;
        struct dol_bell *b = NULL;
        for (unsigned i = 0; i < h->nbells && !b; i++)
                if (h->bells[i].node_id == node_id && h->bells[i].intno == intno)
                        b = &h->bells[i];
        for (int attempt = 0; attempt < 2; attempt++) {
                sci_error_t e = SCI_ERR_OK;
                if (!b) {
                        if (h->nbells == sizeof(h->bells) / sizeof(h->bells[0])) {
                                SCI(L, DisconnectInterrupt, h->bells[0].ri, 0, &e);
                                h->bells[0] = h->bells[--h->nbells];
                        }
                        b = &h->bells[h->nbells];
                        SCI(L, ConnectInterrupt, L->sd, &b->ri, node_id, h->ano, intno, 0, 0, &e);
                        if (e != SCI_ERR_OK)
                                return; /* the poll still finds the word */
                        b->node_id = node_id;
                        b->intno = intno;
                        h->nbells++;
                }
                SCI(L, TriggerInterrupt, b->ri, 0, &e);
                if (e == SCI_ERR_OK)
                        return;
                /* The target's doorbell was made again: connect anew, once. */
                SCI(L, DisconnectInterrupt, b->ri, 0, &e);
                *b = h->bells[--h->nbells];
                b = NULL;
        }
}

void ntbf__dol_irq_doorbell(struct ntbf_adapter_h *h, struct dol_conn *c, uint64_t off)
{
        if (!c->iaddr || off - off % 4096 + sizeof(struct irq_hdr) > c->size ||
            off % 4096 < IRQ_HDR)
                return;
        const volatile struct irq_hdr *hd = (const void *)(c->iaddr + (off - off % 4096));
        if (hd->magic == IRQ_MAGIC && hd->node_id == c->node_id)
                ring(h, hd->node_id, hd->intno);
}

int ntbf__dol_irq_trigger(struct ntbf_adapter_h *h, uint64_t addr, uint32_t data)
{
        if (addr % 4 || addr % 4096 < IRQ_HDR)
                return -EINVAL;
        struct dol_seg s;
        int r = ntbf__dol_attach(h, addr - addr % 4096, 4096, true, &s);
        if (r)
                return -EINVAL; /* not memory of this host */
        const volatile struct irq_hdr *hd = (const void *)s.addr;
        if (hd->magic != IRQ_MAGIC || hd->node_id != h->node_id) {
                ntbf__dol_detach(h, &s);
                return -EINVAL; /* not an interrupt page */
        }
        atomic_store((_Atomic uint32_t *)(void *)(s.addr + addr % 4096), data);
        uint32_t intno = hd->intno;
        ntbf__dol_detach(h, &s);
        pthread_mutex_lock(&h->lock);
        ring(h, h->node_id, intno);
        pthread_mutex_unlock(&h->lock);
        return 0;
}

void ntbf__dol_irq_release(struct ntbf_adapter_h *h)
{
        sci_error_t e;
        for (unsigned i = 0; i < h->nbells; i++)
                SCI(h->L, DisconnectInterrupt, h->bells[i].ri, 0, &e);
        h->nbells = 0;
        struct dol_irqs *q = h->irqs;
        if (!q)
                return;
        h->irqs = NULL;
        irqs_free(h, q);
        ntbf__dol_mem_free(h, &q->page);
        free(q);
}
