/* frontends/sisci-compat/src/requester.c: SCIRegisterPCIeRequester: local devices reach the NTB. */
#include <stdlib.h>

#include "sx.h"

/*
 * A device of this node that is not borrowed (a GPU, say) reaching segments this node's CPU
 * connected must be in the requester tables of the adapter it goes through and of the
 * switches behind it: the fabric manager admits that against the budgets (a REQUESTER
 * request) and the owners program it. Registrations belong to the process's session.
 */

struct reg {
        struct reg *next;
        struct sx_desc *sd;
        unsigned adapter, bus, devfn;
        bool global;
        uint64_t handles[NTBF_MAX_NODE_ADAPTERS];
        unsigned nh;
};

static struct reg *regs;

static void release(struct reg *g)
{
        for (unsigned k = 0; k < g->nh; k++) {
                struct json_object *p = sx_obj_new();
                sx_put_u(p, "handle", g->handles[k]);
                sx_call("sisci.release", p, NULL);
        }
        g->nh = 0;
}

void sx_requesters_drop(void);
void sx_requesters_drop(void)
{
        while (regs) {
                struct reg *g = regs;
                regs = g->next;
                free(g);
        }
}

static struct reg **find(unsigned adapter, unsigned bus, unsigned devfn, bool global)
{
        for (struct reg **pp = &regs; *pp; pp = &(*pp)->next) {
                struct reg *g = *pp;
                if (g->bus == bus && g->devfn == devfn && g->global == global &&
                    (global || g->adapter == adapter))
                        return pp;
        }
        return NULL;
}

void SCIRegisterPCIeRequester(sci_desc_t sd, unsigned int localAdapterNo, unsigned int bus,
                              unsigned int devfn, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_desc *d = (struct sx_desc *)sx_get(sd, SX_DESC);
        if (!d || bus > 255 || devfn > 255) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~SCI_FLAG_PCIE_REQUESTER_GLOBAL) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        bool global = flags & SCI_FLAG_PCIE_REQUESTER_GLOBAL;
        if (!global && sx_adapter(localAdapterNo) == NTBF_NONE) {
                *err = SCI_ERR_NO_SUCH_ADAPTERNO;
                goto out;
        }
        if (find(localAdapterNo, bus, devfn, global)) {
                *err = SCI_ERR_BUSY; /* registered already */
                goto out;
        }
        struct reg *g = calloc(1, sizeof(*g));
        if (!g) {
                *err = SCI_ERR_NOSPC;
                goto out;
        }
        *g = (struct reg){
            .sd = d, .adapter = localAdapterNo, .bus = bus, .devfn = devfn, .global = global};
        /* SCI_FLAG_PCIE_REQUESTER_GLOBAL: through every adapter of the node. */
        const struct ntbf_node *me = &sx.t->nodes[sx.node_idx];
        for (unsigned a = 0; a < me->nadapters && a < NTBF_MAX_NODE_ADAPTERS; a++) {
                if (!global && a != localAdapterNo)
                        continue;
                struct json_object *p = sx_obj_new(), *res = NULL;
                sx_put_u(p, "adapter", a);
                sx_put_u(p, "bus", bus);
                sx_put_u(p, "devfn", devfn);
                uint64_t h = 0;
                int r = sx_call("sisci.requester", p, &res);
                if (!r && !sx_get_u(res, "handle", &h))
                        r = NTBF_EPROTO;
                json_object_put(res);
                if (r) {
                        release(g);
                        free(g);
                        *err = r == NTBF_ENOTFOUND ? SCI_ERR_ILLEGAL_PARAMETER : sx_err_of(r);
                        goto out;
                }
                g->handles[g->nh++] = h;
        }
        g->next = regs;
        regs = g;
        d->nres++;
out:
        sx_unlock();
}

void SCIUnregisterPCIeRequester(sci_desc_t sd, unsigned int localAdapterNo, unsigned int bus,
                                unsigned int devfn, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_desc *d = (struct sx_desc *)sx_get(sd, SX_DESC);
        if (!d) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~SCI_FLAG_PCIE_REQUESTER_GLOBAL) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        struct reg **pp = find(localAdapterNo, bus, devfn, flags & SCI_FLAG_PCIE_REQUESTER_GLOBAL);
        if (!pp || (*pp)->sd != d) {
                *err = SCI_ERR_ILLEGAL_PARAMETER; /* not registered through this descriptor */
                goto out;
        }
        struct reg *g = *pp;
        *pp = g->next;
        release(g);
        free(g);
        d->nres--;
out:
        sx_unlock();
}
