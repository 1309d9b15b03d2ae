/* daemon/tran_mem.c: the in-memory RPC transport, for unit tests and fuzz targets. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tran.h"

static int mem_send(void *tctx, const char *buf, size_t len)
{
        struct ntbf__tran_mem *m = tctx;
        if (m->fail_send)
                return m->fail_send;
        if (m->len + len + 1 > m->cap) {
                size_t cap = m->cap ? m->cap : 256;
                while (cap < m->len + len + 1)
                        cap *= 2;
                char *o = realloc(m->out, cap);
                if (!o)
                        return -ENOMEM;
                m->out = o;
                m->cap = cap;
        }
        memcpy(m->out + m->len, buf, len);
        m->len += len;
        m->out[m->len] = 0;
        return 0;
}

static void mem_pause(void *tctx, bool paused)
{
        ((struct ntbf__tran_mem *)tctx)->paused = paused;
}

static void mem_close(void *tctx)
{
        ((struct ntbf__tran_mem *)tctx)->closed = true;
}

static int mem_send_fds(void *tctx, const char *buf, size_t len, const int *fds, unsigned nfds)
{
        struct ntbf__tran_mem *m = tctx;
        int r = mem_send(tctx, buf, len);
        for (unsigned i = 0; !r && i < nfds && m->nfds < 16; i++)
                m->fds[m->nfds++] = fds[i];
        return r;
}

const struct ntbf__tran_ops ntbf__tran_mem_ops = {mem_send, mem_pause, mem_close, mem_send_fds};

void ntbf__tran_mem_reset(struct ntbf__tran_mem *m)
{
        m->len = 0;
        if (m->out)
                m->out[0] = 0;
}

void ntbf__tran_mem_free(struct ntbf__tran_mem *m)
{
        free(m->out);
        memset(m, 0, sizeof(*m));
}
