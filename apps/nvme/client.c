/* apps/nvme/client.c: a client over libsisci: borrow, join, queue pairs per path, the lease. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ntbf_nvme_sisci.h"

static void *beat_main(void *arg)
{
        struct ntbf_nvmx_client *c = arg;
        /* Four heartbeats per lease: one lost or late one does not cost the pairs. */
        uint32_t period_ms = c->cl.hdr.lease_ms / 4 ? c->cl.hdr.lease_ms / 4 : 1;
        while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
                volatile uint8_t *mb = __atomic_load_n(&c->cl.mbox, __ATOMIC_ACQUIRE);
                /* A mapping that reads all ones lost its path: beat through another. */
                if (__atomic_load_n((volatile uint32_t *)mb, __ATOMIC_ACQUIRE) == UINT32_MAX) {
                        for (unsigned p = 0; p < c->mb.n; p++)
                                if (c->mb.va[p] != mb &&
                                    *(volatile uint32_t *)c->mb.va[p] == NTBF_NVMS_MAGIC) {
                                        __atomic_store_n(&c->cl.mbox, c->mb.va[p],
                                                         __ATOMIC_RELEASE);
                                        break;
                                }
                }
                ntbf_nvms_client_beat(&c->cl);
                for (uint32_t t = 0; t < period_ms && !__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE);
                     t += 10) {
                        struct timespec ts = {0, 10000000};
                        nanosleep(&ts, NULL);
                }
        }
        return NULL;
}

void ntbf_nvmx_client_use_path(struct ntbf_nvmx_client *c, unsigned p)
{
        if (p < c->mb.n)
                __atomic_store_n(&c->cl.mbox, c->mb.va[p], __ATOMIC_RELEASE);
}

/* One queue pair on path p: memory, the manager's Create, the core's view. */
static int make_qpair(struct ntbf_nvmx_client *c, const struct ntbf_nvmx_client_opts *o, unsigned p)
{
        struct ntbf_nvmx *x = &c->x;
        struct ntbf_nvmx_qpair *q = &c->q[p];
        uint32_t n = o->entries ? o->entries : 64;
        /*
         * The backup pair (article 6.3) lives in this host's memory, every part of it (SQ, CQ,
         * PRP lists, its own data buffer), mapped for the controller through the second
         * adapter only: the controller's DMA to it enters this host by the second cable, and
         * its doorbells in BAR0 are reached through the second adapter too (path p's BAR0).
         * Its own data buffer: a command of the dead path that the controller still runs
         * late reads the primary's buffer, which nothing writes any more.
         */
        enum ntbf_nvmx_where sw = p ? NTBF_NVMX_HOST : o->sq_where;
        enum ntbf_nvmx_where cw = p ? NTBF_NVMX_HOST : o->cq_where;
        if (ntbf_nvmx_alloc_on(x, p, ntbf_nvme_sq_bytes(n), sw,
                               SCI_MEMACCESS_HOST_WRITE | SCI_MEMACCESS_DEVICE_READ, &c->dm,
                               &q->sq) ||
            ntbf_nvmx_alloc_on(x, p, ntbf_nvme_cq_bytes(n), cw,
                               SCI_MEMACCESS_DEVICE_WRITE | SCI_MEMACCESS_HOST_READ, &c->dm,
                               &q->cq) ||
            ntbf_nvmx_alloc_on(x, p, ntbf_nvme_prp_bytes(n), NTBF_NVMX_HOST,
                               SCI_MEMACCESS_HOST_WRITE | SCI_MEMACCESS_DEVICE_READ, NULL, &q->prp))
                return -1;
        struct ntbf_nvmx_mem *data = &c->data;
        if (p) {
                data = &c->backup;
                if (ntbf_nvmx_alloc_on(x, p, c->data.m.size, NTBF_NVMX_HOST,
                                       SCI_MEMACCESS_DEVICE_WRITE | SCI_MEMACCESS_DEVICE_READ |
                                           SCI_MEMACCESS_HOST_READ | SCI_MEMACCESS_HOST_WRITE,
                                       NULL, data))
                        return -1;
        }
        char why[NTBF_NVMS_MSG];
        int r =
            ntbf_nvms_create_qp(&c->cl, n, n, q->sq.io[p], q->cq.io[p], &q->qid, why, sizeof(why));
        if (r) {
                snprintf(x->why, sizeof(x->why), "the manager refused a queue pair: %s", why);
                return -1;
        }
        q->created = true;
        struct ntbf_nvme_mem sq = {q->sq.m.va, q->sq.io[p], q->sq.m.size};
        struct ntbf_nvme_mem cq = {q->cq.m.va, q->cq.io[p], q->cq.m.size};
        struct ntbf_nvme_mem prp = {q->prp.m.va, q->prp.io[p], q->prp.m.size};
        r = ntbf_nvme_qp_init(&q->qp, x->path[p].bar0, c->cl.hdr.db_stride, q->qid, n, &sq, n, &cq,
                              &prp);
        if (r) {
                snprintf(x->why, sizeof(x->why), "queue pair %u: %s", q->qid,
                         ntbf_nvme_strstatus(r));
                return -1;
        }
        c->paths[p] = (struct ntbf_nvme_path){
            &q->qp, x->path[p].bar0, data->io[p], p ? data->m.va : NULL, false, 0};
        return 0;
}

int ntbf_nvmx_client_open(struct ntbf_nvmx_client *c, const struct ntbf_nvmx_client_opts *o)
{
        memset(c, 0, sizeof(*c));
        struct ntbf_nvmx *x = &c->x;
        if (ntbf_nvmx_init(x))
                return -1;
        uint32_t fdid = o->fdid ? o->fdid : ntbf_nvmx_find_nvme(x);
        if (!fdid)
                return -1;
        unsigned np = o->npaths ? o->npaths : 1;
        if (ntbf_nvmx_borrow(x, fdid, false, o->adapters, np))
                return -1;
        int r = ntbf_nvme_ctrl_open(&c->ctrl, x->path[0].bar0, x->path[0].size);
        if (r) {
                snprintf(x->why, sizeof(x->why),
                         "BAR0 of %s reads all ones: the controller or the path to it is gone",
                         x->name);
                return -1;
        }
        uint32_t mgr = o->manager_id ? o->manager_id : x->lender_id;
        if (ntbf_nvmx_mbox_connect(x, mgr, 5000, &c->mb))
                return -1;
        char why[NTBF_NVMS_MSG];
        r = ntbf_nvms_client_attach(&c->cl, c->mb.va[0], c->mb.size, x->node_id, (uint32_t)getpid(),
                                    NULL, why, sizeof(why));
        if (r) {
                snprintf(x->why, sizeof(x->why), "joining the manager on node %u: %s", mgr, why);
                return -1;
        }
        c->joined = true;
        pthread_t *t = malloc(sizeof(*t));
        if (!t || pthread_create(t, NULL, beat_main, c)) {
                free(t);
                snprintf(x->why, sizeof(x->why), "cannot start the heartbeat thread");
                return -1;
        }
        c->beat_thread = t;
        c->beating = true;
        if (o->no_queues)
                return 0;
        if ((o->sq_where == NTBF_NVMX_DEVMEM || o->cq_where == NTBF_NVMX_DEVMEM ||
             o->data_where == NTBF_NVMX_DEVMEM) &&
            ntbf_nvmx_devmem_open(x, o->devmem_fdid, &c->dm))
                return -1;
        size_t db = o->data_bytes ? o->data_bytes : 1 << 20;
        if (ntbf_nvmx_alloc(x, db,
                            o->data_where == NTBF_NVMX_DEVMEM ? NTBF_NVMX_DEVMEM : NTBF_NVMX_HOST,
                            SCI_MEMACCESS_DEVICE_WRITE | SCI_MEMACCESS_DEVICE_READ |
                                SCI_MEMACCESS_HOST_READ | SCI_MEMACCESS_HOST_WRITE,
                            &c->dm, &c->data))
                return -1;
        for (unsigned p = 0; p < np; p++)
                if (make_qpair(c, o, p))
                        return -1;
        c->npaths = np;
        return 0;
}

void ntbf_nvmx_client_close(struct ntbf_nvmx_client *c)
{
        struct ntbf_nvmx *x = &c->x;
        char why[NTBF_NVMS_MSG];
        for (unsigned p = 0; p < NTBF_NVMX_PATHS; p++) {
                struct ntbf_nvmx_qpair *q = &c->q[p];
                if (q->created && c->joined)
                        ntbf_nvms_delete_qp(&c->cl, q->qid, why, sizeof(why));
                ntbf_nvme_qp_fini(&q->qp);
                ntbf_nvmx_free(x, &q->sq);
                ntbf_nvmx_free(x, &q->cq);
                ntbf_nvmx_free(x, &q->prp);
                q->created = false;
        }
        if (c->joined)
                ntbf_nvms_client_detach(&c->cl);
        c->joined = false;
        if (c->beating) {
                __atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
                pthread_join(*(pthread_t *)c->beat_thread, NULL);
                free(c->beat_thread);
                c->beating = false;
        }
        ntbf_nvmx_free(x, &c->data);
        ntbf_nvmx_free(x, &c->backup);
        if (c->dm.acc)
                ntbf_nvmx_devmem_close(x, &c->dm);
        ntbf_nvmx_mbox_close(x, &c->mb);
        ntbf_nvme_ctrl_close(&c->ctrl);
        ntbf_nvmx_close(x);
}
