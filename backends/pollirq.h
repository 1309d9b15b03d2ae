/* backends/pollirq.h: host interrupt vectors made of memory for export that a thread watches,
 * for backends whose hardware cannot turn a peer's MSI write into a host interrupt. */
#ifndef NTBF_BACKENDS_POLLIRQ_H
#define NTBF_BACKENDS_POLLIRQ_H

#include <pthread.h>
#include <stdatomic.h>

#include "ntbfab/backend.h"

/*
 * A vector is one page of the adapter's memory for export: its MSI address is the page's
 * bus address, its data a value of the backend's choice. A writer reaches it the way a
 * device's MSI write would, through a window slot (window_write); one thread per process
 * reads the first word of every vector every NTBF__POLLIRQ_US microseconds and, when it
 * holds the vector's data, clears it and signals the vector's eventfd. Delivery is software
 * polling; the write itself is a store through the fabric.
 */
#define NTBF__POLLIRQ_US 50

/* How the backend allocates and frees a vector's page (its mem_alloc and mem_free). */
struct ntbf__pollirq_mem {
        int (*alloc)(struct ntbf_adapter_h *h, uint64_t size, uint64_t align, struct ntbf_mem *m);
        int (*free)(struct ntbf_adapter_h *h, struct ntbf_mem *m);
};

struct ntbf__pollirq_vec {
        struct ntbf__pollirq_vec *next;
        struct ntbf_adapter_h *h;
        struct ntbf_mem m;
        int efd;
        uint32_t id, data;
};

/* One process's vectors (embed it in the backend; zero it, then ntbf__pollirq_init). */
struct ntbf__pollirq {
        const struct ntbf__pollirq_mem *mem;
        uint32_t data_base; /* a vector's data: this | (its id & 0xffff) */
        pthread_mutex_t lock;
        struct ntbf__pollirq_vec *vecs;
        uint32_t next_id;
        pthread_t watcher;
        bool watching;
        _Atomic bool stop;
};

void ntbf__pollirq_init(struct ntbf__pollirq *p, const struct ntbf__pollirq_mem *mem,
                        uint32_t data_base);
/* Stops the watcher; every vector must have been freed (ntbf__pollirq_drop). */
void ntbf__pollirq_fini(struct ntbf__pollirq *p);
int ntbf__pollirq_alloc(struct ntbf__pollirq *p, struct ntbf_adapter_h *h, struct ntbf_irq *out);
/* -EINVAL when irq is no vector of h. Closes the eventfd (irq->fd becomes -1). */
int ntbf__pollirq_free(struct ntbf__pollirq *p, struct ntbf_adapter_h *h, struct ntbf_irq *irq);
/* Free every vector of h (its release). */
void ntbf__pollirq_drop(struct ntbf__pollirq *p, struct ntbf_adapter_h *h);
/* Whether [addr, addr + len) lies in the page of a live vector (a local trigger's target). */
bool ntbf__pollirq_owns(struct ntbf__pollirq *p, uint64_t addr, uint64_t len);

#endif
