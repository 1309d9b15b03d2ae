/* backends/linux-ntb/relay.c: what a process that does not own the NTB asks its owner (the
 * node daemon) for, and the owner's answers (lntb.h, "Who may do what"). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "lntb.h"
#include "ntbfab/error.h"

int lntb_relay(struct lntb *l, uint32_t op, uint64_t a, uint64_t b, struct lntb_relay_ans *ans,
               int *fd)
{
        const struct ntbf_backend_relay *rl = l->b->relay;
        if (fd)
                *fd = -1;
        if (!rl || !rl->call)
                return -EPERM;
        struct lntb_relay_req req = {LNTB_RELAY_MAGIC, op, a, b};
        int fds[2] = {-1, -1};
        unsigned nfds = 0;
        size_t got = 0;
        memset(ans, 0, sizeof(*ans));
        int r = rl->call(rl->ctx, l->adapter, &req, sizeof(req), ans, sizeof(*ans), &got, fds, 2,
                         &nfds);
        if (!r && (got != sizeof(*ans) || nfds != (fd ? 1u : 0u)))
                r = NTBF_EPROTO; /* an owner of another version, or no owner at all */
        if (r || !fd) {
                for (unsigned i = 0; i < nfds && i < 2; i++)
                        l->sys->close(fds[i]);
                return r;
        }
        *fd = fds[0];
        return 0;
}

/* A descriptor of Linux window widx, whole: only the windows the adapter's slots name. */
static int serve_window(struct lntb *l, uint64_t widx, int *fd)
{
        for (uint32_t w = 0; w < l->nwin; w++) {
                const struct ntbf_window *W = &l->win[w];
                for (uint32_t k = 0; k < W->slots; k++)
                        if (l->slot_widx[W->first_slot + k] == widx) {
                                struct ntbfab_peer_mw_fd mf = {.widx = (uint32_t)widx,
                                                               .size = W->slot_size};
                                int r = lntb_ioctl(l, NTBFAB_IOC_PEER_MW_FD, &mf);
                                *fd = r ? -1 : mf.fd;
                                return r;
                        }
        }
        return -EINVAL;
}

int lntb_serve(struct lntb *l, uint64_t client, const void *reqp, size_t reqlen, void *ansp,
               size_t anslen, size_t *got, int *fds, unsigned maxfds, unsigned *nfds)
{
        struct lntb_relay_req req;
        struct lntb_relay_ans ans = {0};
        if (got)
                *got = 0;
        if (nfds)
                *nfds = 0;
        if (!reqp || reqlen != sizeof(req) || !ansp || anslen < sizeof(ans) || !got || !fds ||
            !maxfds || !nfds)
                return -EINVAL;
        memcpy(&req, reqp, sizeof(req));
        if (req.magic != LNTB_RELAY_MAGIC)
                return NTBF_EPROTO;
        /* Client 0 is the owner itself. */
        if (!client || !l->owner)
                return -EINVAL;
        int r, fd = -1;
        pthread_mutex_lock(&l->lock);
        switch (req.op) {
        case LNTB_RELAY_WINDOW_FD:
                r = serve_window(l, req.a, &fd);
                break;
        case LNTB_RELAY_MEM_ALLOC: {
                struct lntb_pool *p;
                uint64_t off;
                r = lntb_pool_alloc(l, client, req.a, req.b, &p, &off);
                if (r)
                        break;
                fd = l->sys->dup(p->fd);
                if (fd < 0) {
                        r = -errno;
                        lntb_pool_free(l, client, p->dma + off);
                        break;
                }
                ans.bus = p->dma + off;
                ans.off = off;
                ans.size = (req.a + LNTB_PAGE - 1) & ~(LNTB_PAGE - 1);
                break;
        }
        case LNTB_RELAY_MEM_FREE:
                r = lntb_pool_free(l, client, req.a);
                break;
        case LNTB_RELAY_MEM_MAP: {
                uint64_t off;
                struct lntb_pool *p = req.b ? lntb_pool_find(l, req.a, req.b, &off, true) : NULL;
                r = p ? 0 : -EFAULT;
                if (r)
                        break;
                fd = l->sys->dup(p->fd);
                r = fd < 0 ? -errno : 0;
                ans.bus = req.a;
                ans.off = off;
                ans.size = req.b;
                break;
        }
        default:
                r = -EINVAL;
        }
        pthread_mutex_unlock(&l->lock);
        if (r)
                return r;
        memcpy(ansp, &ans, sizeof(ans));
        *got = sizeof(ans);
        if (fd >= 0) {
                fds[0] = fd;
                *nfds = 1;
        }
        return 0;
}

void lntb_client_gone(struct lntb *l, uint64_t client)
{
        if (!client)
                return;
        pthread_mutex_lock(&l->lock);
        for (uint32_t i = 0; i < l->npools; i++) {
                struct lntb_pool *p = &l->pool[i];
                size_t k = 0;
                for (size_t j = 0; j < p->n; j++)
                        if (p->a[j].client != client)
                                p->a[k++] = p->a[j];
                p->n = k;
        }
        pthread_mutex_unlock(&l->lock);
}
