/* backends/sim/irq.c: host interrupt vectors: MSI writes set a pending bit, the owner gets an
 * eventfd. */
#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sim.h"

/*
 * A vector is a record in its host's table (owner pid and start time, a pending word) and
 * an eventfd in the owner process. An MSI write of data v to the host's MSI range sets
 * vector v's pending word and wakes the host's attention futex; the owner's watcher thread
 * takes the pending word and writes the eventfd. The table is changed under the host's
 * robust mutex; delivery takes no lock.
 */

void ntbf__sim_irq_recover(void *arg)
{
        struct sim_node *n = arg;
        uint32_t count = 0;
        for (uint32_t i = 0; i < SIM_IRQ_VECTORS; i++)
                count += atomic_load(&n->irq[i].state) == 1;
        n->irq_count = count;
}

void ntbf__sim_msi(struct ntbf_sim *s, uint32_t node, uint32_t data)
{
        if (data >= SIM_IRQ_VECTORS)
                return; /* no such vector: the interrupt goes nowhere, as on x86 */
        struct sim_node *n = &s->nodes[node];
        struct sim_irqrec *v = &n->irq[data];
        if (atomic_load_explicit(&v->state, memory_order_acquire) != 1)
                return;
        atomic_fetch_add_explicit(&v->count, 1, memory_order_relaxed);
        if (atomic_exchange(&v->pending, 1) == 0)
                ntbf__sim_futex_bump(&n->attn);
}

int ntbf__sim_irq_alloc(struct ntbf_sim *s, uint32_t node, struct ntbf_irq *out)
{
        if (!out)
                return -EINVAL;
        struct sim_vec *lv = calloc(1, sizeof(*lv));
        if (!lv)
                return -ENOMEM;
        lv->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (lv->fd < 0) {
                int e = errno;
                free(lv);
                return -e;
        }
        if (getpid() != s->pid) {
                s->pid = getpid();
                s->start = ntbf__sim_proc_start(s->pid);
        }
        struct sim_node *n = &s->nodes[node];
        uint32_t id = UINT32_MAX;
        ntbf__sim_lock(s, &n->irq_lock, ntbf__sim_irq_recover, n);
        /* Vector 0 is never handed out: a zeroed MSI data word must not hit a live vector. */
        for (uint32_t i = 1; i < SIM_IRQ_VECTORS; i++) {
                struct sim_irqrec *v = &n->irq[i];
                if (atomic_load(&v->state) != 0)
                        continue;
                v->pid = s->pid;
                v->start = s->start;
                v->gen++;
                atomic_store(&v->pending, 0);
                atomic_store(&v->count, 0);
                atomic_store_explicit(&v->state, 1, memory_order_release);
                n->irq_count++;
                id = i;
                lv->gen = v->gen;
                break;
        }
        ntbf__sim_unlock(&n->irq_lock);
        if (id == UINT32_MAX) {
                close(lv->fd);
                free(lv);
                return -ENOSPC;
        }
        lv->node = node;
        lv->id = id;
        pthread_mutex_lock(&s->lock);
        lv->next = s->vecs;
        s->vecs = lv;
        pthread_mutex_unlock(&s->lock);
        int r = ntbf__sim_watcher_need(s);
        if (r) {
                struct ntbf_irq tmp = {.id = id, .fd = lv->fd};
                ntbf__sim_irq_free(s, node, &tmp);
                return r;
        }
        *out = (struct ntbf_irq){SIM_IRQ_ADDR, id, lv->fd, id};
        return 0;
}

static void release_record(struct ntbf_sim *s, uint32_t node, uint32_t id, uint32_t gen)
{
        struct sim_node *n = &s->nodes[node];
        ntbf__sim_lock(s, &n->irq_lock, ntbf__sim_irq_recover, n);
        struct sim_irqrec *v = &n->irq[id];
        /* Only ours: the reaper may have given a vector of a "dead" pid to someone else. */
        if (atomic_load(&v->state) == 1 && v->gen == gen && v->pid == s->pid) {
                atomic_store_explicit(&v->state, 0, memory_order_release);
                n->irq_count--;
        }
        ntbf__sim_unlock(&n->irq_lock);
}

int ntbf__sim_irq_free(struct ntbf_sim *s, uint32_t node, struct ntbf_irq *irq)
{
        if (!irq)
                return -EINVAL;
        pthread_mutex_lock(&s->lock);
        struct sim_vec **pp = &s->vecs, *lv = NULL;
        for (; *pp; pp = &(*pp)->next) {
                if ((*pp)->node == node && (*pp)->id == irq->id) {
                        lv = *pp;
                        *pp = lv->next;
                        break;
                }
        }
        pthread_mutex_unlock(&s->lock);
        if (!lv)
                return -ENOENT;
        release_record(s, node, lv->id, lv->gen);
        close(lv->fd);
        free(lv);
        irq->fd = -1;
        return 0;
}

void ntbf__sim_irq_deliver(struct ntbf_sim *s)
{
        pthread_mutex_lock(&s->lock);
        for (struct sim_vec *lv = s->vecs; lv; lv = lv->next) {
                struct sim_irqrec *v = &s->nodes[lv->node].irq[lv->id];
                if (v->gen != lv->gen)
                        continue;
                if (atomic_load_explicit(&v->pending, memory_order_relaxed) &&
                    atomic_exchange(&v->pending, 0)) {
                        uint64_t one = 1;
                        ssize_t w = write(lv->fd, &one, sizeof(one));
                        (void)w; /* a saturated eventfd still reads as pending */
                }
        }
        pthread_mutex_unlock(&s->lock);
}

void ntbf__sim_irq_close(struct ntbf_sim *s)
{
        while (s->vecs) {
                struct sim_vec *lv = s->vecs;
                s->vecs = lv->next;
                release_record(s, lv->node, lv->id, lv->gen);
                close(lv->fd);
                free(lv);
        }
}

uint32_t ntbf__sim_irq_reap(struct ntbf_sim *s, uint32_t node)
{
        struct sim_node *n = &s->nodes[node];
        uint32_t total = 0;
        int last_pid = -1;
        uint64_t last_start = 0;
        bool last_alive = true;
        ntbf__sim_lock(s, &n->irq_lock, ntbf__sim_irq_recover, n);
        for (uint32_t i = 0; i < SIM_IRQ_VECTORS; i++) {
                struct sim_irqrec *v = &n->irq[i];
                if (atomic_load(&v->state) != 1)
                        continue;
                if (v->pid != last_pid || v->start != last_start) {
                        last_pid = v->pid;
                        last_start = v->start;
                        last_alive = ntbf__sim_owner_alive(v->pid, v->start);
                }
                if (last_alive)
                        continue;
                atomic_store_explicit(&v->state, 0, memory_order_release);
                n->irq_count--;
                total++;
        }
        ntbf__sim_unlock(&n->irq_lock);
        return total;
}
