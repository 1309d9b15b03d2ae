/* backends/pollirq.c: interrupt vectors as watched words of memory for export (pollirq.h). */
#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "pollirq.h"

#define PAGE UINT64_C(4096)

void ntbf__pollirq_init(struct ntbf__pollirq *p, const struct ntbf__pollirq_mem *mem,
                        uint32_t data_base)
{
        p->mem = mem;
        p->data_base = data_base;
        p->vecs = NULL;
        p->next_id = 0;
        p->watching = false;
        atomic_store(&p->stop, false);
        pthread_mutex_init(&p->lock, NULL);
}

void ntbf__pollirq_fini(struct ntbf__pollirq *p)
{
        if (p->watching) {
                atomic_store(&p->stop, true);
                pthread_join(p->watcher, NULL);
                p->watching = false;
        }
        pthread_mutex_destroy(&p->lock);
}

/* Watch every vector of the process: a word holding the vector's data is an interrupt. */
static void *watcher(void *arg)
{
        struct ntbf__pollirq *p = arg;
        while (!atomic_load(&p->stop)) {
                pthread_mutex_lock(&p->lock);
                for (struct ntbf__pollirq_vec *v = p->vecs; v; v = v->next) {
                        _Atomic uint32_t *w = v->m.addr;
                        if (atomic_load(w) && atomic_exchange(w, 0) == v->data) {
                                uint64_t one = 1;
                                ssize_t n = write(v->efd, &one, sizeof(one));
                                (void)n;
                        }
                }
                pthread_mutex_unlock(&p->lock);
                struct timespec ts = {0, NTBF__POLLIRQ_US * 1000};
                nanosleep(&ts, NULL);
        }
        return NULL;
}

int ntbf__pollirq_alloc(struct ntbf__pollirq *p, struct ntbf_adapter_h *h, struct ntbf_irq *out)
{
        if (!out)
                return -EINVAL;
        struct ntbf__pollirq_vec *v = calloc(1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        int r = p->mem->alloc(h, PAGE, PAGE, &v->m);
        if (r) {
                free(v);
                return r;
        }
        v->h = h;
        v->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (v->efd < 0) {
                r = -errno;
                p->mem->free(h, &v->m);
                free(v);
                return r;
        }
        pthread_mutex_lock(&p->lock);
        v->id = ++p->next_id;
        v->data = p->data_base | (v->id & 0xffff);
        v->next = p->vecs;
        p->vecs = v;
        if (!p->watching) {
                atomic_store(&p->stop, false);
                p->watching = !pthread_create(&p->watcher, NULL, watcher, p);
                r = p->watching ? 0 : -EAGAIN;
        }
        pthread_mutex_unlock(&p->lock);
        if (r) {
                struct ntbf_irq x = {.id = v->id};
                ntbf__pollirq_free(p, h, &x);
                return r;
        }
        *out = (struct ntbf_irq){v->m.bus_addr, v->data, v->efd, v->id};
        return 0;
}

int ntbf__pollirq_free(struct ntbf__pollirq *p, struct ntbf_adapter_h *h, struct ntbf_irq *irq)
{
        if (!irq)
                return -EINVAL;
        struct ntbf__pollirq_vec *v = NULL;
        pthread_mutex_lock(&p->lock);
        for (struct ntbf__pollirq_vec **pp = &p->vecs; *pp; pp = &(*pp)->next)
                if ((*pp)->id == irq->id && (*pp)->h == h) {
                        v = *pp;
                        *pp = v->next;
                        break;
                }
        pthread_mutex_unlock(&p->lock);
        if (!v)
                return -EINVAL;
        close(v->efd);
        p->mem->free(h, &v->m);
        free(v);
        irq->fd = -1;
        return 0;
}

void ntbf__pollirq_drop(struct ntbf__pollirq *p, struct ntbf_adapter_h *h)
{
        for (;;) {
                struct ntbf_irq x = {.id = 0};
                pthread_mutex_lock(&p->lock);
                for (struct ntbf__pollirq_vec *v = p->vecs; v; v = v->next)
                        if (v->h == h) {
                                x.id = v->id;
                                break;
                        }
                pthread_mutex_unlock(&p->lock);
                if (!x.id)
                        return;
                ntbf__pollirq_free(p, h, &x);
        }
}

bool ntbf__pollirq_owns(struct ntbf__pollirq *p, uint64_t addr, uint64_t len)
{
        bool hit = false;
        pthread_mutex_lock(&p->lock);
        for (struct ntbf__pollirq_vec *v = p->vecs; v && !hit; v = v->next)
                hit = addr >= v->m.bus_addr && len <= PAGE && addr - v->m.bus_addr <= PAGE - len;
        pthread_mutex_unlock(&p->lock);
        return hit;
}
