/* frontends/sisci-compat/src/query.c: node ids, probing, SCIQuery. */
#include <stdio.h>
#include <string.h>

#include "sx.h"

/* ntbfab's answers to SCI_Q_VENDORID and SCI_Q_API (docs/sisci.md). */
#define SX_VENDOR_ID   0xfab0u
#define SX_API_VERSION ((5u << 16) | (11u << 8))

void SCIGetLocalNodeId(unsigned int adapterNo, unsigned int *nodeId, unsigned int flags,
                       sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        if (!nodeId)
                *err = SCI_ERR_ILLEGAL_PARAMETER;
        else if (flags)
                *err = SCI_ERR_ILLEGAL_FLAG;
        else if (sx_adapter(adapterNo) == NTBF_NONE)
                *err = SCI_ERR_NO_SUCH_ADAPTERNO;
        else
                *nodeId = sx.node_id; /* every adapter of a node carries the node's id */
out:
        sx_unlock();
}

int SCIProbeNode(sci_desc_t sd, unsigned int localAdapterNo, unsigned int nodeId,
                 unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        int reachable = 0;
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        if (!sx_get(sd, SX_DESC)) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (sx_adapter(localAdapterNo) == NTBF_NONE) {
                *err = SCI_ERR_NO_SUCH_ADAPTERNO;
                goto out;
        }
        uint32_t n = sx_node_by_id(nodeId);
        if (n == NTBF_NONE) {
                *err = SCI_ERR_NO_SUCH_NODEID;
                goto out;
        }
        if (n == sx.node_idx) {
                reachable = 1;
                goto out;
        }
        /* Reachable: this node's daemon has a live session with the other node's. */
        struct json_object *res = NULL, *peers;
        int r = sx_call("node.status", NULL, &res);
        if (r) {
                *err = sx_err_of(r);
                goto out;
        }
        if (json_object_object_get_ex(res, "peers", &peers))
                for (size_t i = 0; i < json_object_array_length(peers); i++) {
                        struct json_object *x = json_object_array_get_idx(peers, i), *nm;
                        bool c = false;
                        if (json_object_object_get_ex(x, "node", &nm) &&
                            !strcmp(json_object_get_string(nm), sx.t->nodes[n].name) &&
                            sx_get_b(x, "connected", &c) && c)
                                reachable = 1;
                }
        json_object_put(res);
        if (!reachable)
                *err = SCI_ERR_NODE_NOT_RESPONDING;
out:
        sx_unlock();
        return reachable;
}

/*
 * The host named (a node name of the cluster file, or the host of its address): for each of
 * its adapter numbers below DIS_MAX_NSCIS, its node id (every adapter of a node reports the
 * node's id), its adapter number and its kind; zeros past its last adapter.
 */
static sci_error_t node_info(const char *name, unsigned int *adapters, dis_nodeId_list_t *ids,
                             unsigned int *types, unsigned flags)
{
        if (!name || !ids)
                return SCI_ERR_ILLEGAL_PARAMETER;
        if (flags)
                return SCI_ERR_ILLEGAL_FLAG;
        for (unsigned k = 0; k < DIS_MAX_NSCIS; k++) {
                (*ids)[k] = 0;
                if (adapters)
                        adapters[k] = 0;
                if (types)
                        types[k] = DIS_ADAPTER_TYPE_NONE;
        }
        for (uint32_t n = 0; n < sx.t->nnodes; n++) {
                const struct ntbf_node *x = &sx.t->nodes[n];
                size_t hl = strcspn(x->address, ":");
                if (strcmp(x->name, name) &&
                    !(hl && strlen(name) == hl && !strncmp(x->address, name, hl)))
                        continue;
                for (unsigned k = 0; k < DIS_MAX_NSCIS && k < x->nadapters; k++) {
                        (*ids)[k] = x->id;
                        if (adapters)
                                adapters[k] = k;
                        if (types)
                                types[k] = DIS_ADAPTER_TYPE_NTB;
                }
                return x->nadapters ? SCI_ERR_OK : SCI_ERR_NO_SUCH_NODEID;
        }
        return SCI_ERR_NO_SUCH_NODEID;
}

void SCIGetNodeIdByAdapterName(char *adapterName, dis_nodeId_list_t *nodeIdList,
                               dis_virt_adapter_t *adapterType, unsigned int flags,
                               sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        dis_adapter_type_t types;
        *err = node_info(adapterName, NULL, nodeIdList, types, flags);
        if (*err == SCI_ERR_OK && adapterType)
                *adapterType = types[0];
out:
        sx_unlock();
}

void SCIGetNodeInfoByAdapterName(char *adapterName, unsigned int *adapterNo,
                                 dis_nodeId_list_t *nodeIdList, dis_adapter_type_t *adapterType,
                                 unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        *err =
            node_info(adapterName, adapterNo, nodeIdList, adapterType ? *adapterType : NULL, flags);
out:
        sx_unlock();
}

static sci_error_t query_adapter(sci_query_adapter_t *q)
{
        if (!q->data)
                return SCI_ERR_ILLEGAL_PARAMETER;
        uint32_t ad = sx_adapter(q->localAdapterNo);
        if (ad == NTBF_NONE)
                return SCI_ERR_NO_SUCH_ADAPTERNO;
        const struct ntbf_adapter *a = &sx.t->adapters[ad];
        struct ntbf_adapter_h *h = sx_ah(ad);
        unsigned int *u = q->data;
        switch (q->subcommand) {
        case SCI_Q_ADAPTER_NODEID:
                *u = sx.node_id;
                return SCI_ERR_OK;
        case SCI_Q_ADAPTER_BDF: {
                uint16_t dom;
                uint8_t bus = 0, dev = 0, fn = 0;
                if (a->bdf[0] && ntbf_bdf_parse(a->bdf, &dom, &bus, &dev, &fn))
                        bus = dev = fn = 0;
                *u = (unsigned)bus << 8 | (unsigned)dev << 3 | fn;
                return SCI_ERR_OK;
        }
        case SCI_Q_ADAPTER_SERIAL_NUMBER:
                /* char[64] (sisci_types.h): names are at most 31 characters each. */
                snprintf(q->data, 64, "ntbfab:%.27s.%.27s", sx.node, a->name);
                return SCI_ERR_OK;
        case SCI_Q_ADAPTER_NUMBER_OF_PORTS:
                *u = a->p.ports;
                return SCI_ERR_OK;
        case SCI_Q_ADAPTER_DMA_MTU: {
                struct ntbf_caps c;
                *u = h && !sx.ops->caps(h, &c) && (c.flags & NTBF_CAP_DMA)
                         ? (unsigned)(c.dma_max_len > UINT32_MAX ? UINT32_MAX : c.dma_max_len)
                         : 0;
                return SCI_ERR_OK;
        }
        case SCI_Q_ADAPTER_LINK_OPERATIONAL: {
                bool up = false;
                if (q->portNo >= a->p.ports)
                        return SCI_ERR_ILLEGAL_PARAMETER;
                if (h)
                        sx.ops->link_state(h, q->portNo, &up);
                *u = up;
                return SCI_ERR_OK;
        }
        case SCI_Q_ADAPTER_CONFIGURED:
                *u = 1;
                return SCI_ERR_OK;
        case SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT:
        case SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT: {
                /* The engine's alignment; 1 when the library's DMA thread copies (no engine). */
                struct ntbf_caps c;
                *u = h && !sx.ops->caps(h, &c) && (c.flags & NTBF_CAP_DMA) && c.dma_align
                         ? c.dma_align
                         : 1;
                return SCI_ERR_OK;
        }
        case SCI_Q_ADAPTER_ATT_PAGE_SIZE:
        case SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES: {
                /* A connection takes slots of the adapter's first window (the core's plans). */
                const struct ntbf_window *w = &a->win[0];
                uint64_t v = q->subcommand == SCI_Q_ADAPTER_ATT_PAGE_SIZE ? w->slot_size
                                                                          : w->slots - w->reserved;
                if (!a->nwin || v > UINT32_MAX)
                        return SCI_ERR_ILLEGAL_QUERY;
                *u = (unsigned)v;
                return SCI_ERR_OK;
        }
        default:
                return SCI_ERR_ILLEGAL_QUERY;
        }
}

sci_error_t sx_query_device(sci_smartio_query_device_t *q);

void SCIQuery(unsigned int command, void *data, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        if (!data) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        switch (command) {
        case SCI_Q_VENDORID:
                *(unsigned int *)data = SX_VENDOR_ID;
                break;
        case SCI_Q_API:
                *(unsigned int *)data = SX_API_VERSION;
                break;
        case SCI_Q_ADAPTER:
                *err = query_adapter(data);
                break;
        case SCI_Q_LOCAL_SEGMENT: {
                sci_query_local_segment_t *q = data;
                struct sx_lseg *s = (struct sx_lseg *)sx_get(q->segment, SX_LSEG);
                if (!s)
                        *err = SCI_ERR_ILLEGAL_PARAMETER;
                else if (!s->mem && !s->bus)
                        *err = SCI_ERR_ILLEGAL_OPERATION;
                else if (q->subcommand == SCI_Q_LOCAL_SEGMENT_IOADDR ||
                         q->subcommand == SCI_Q_LOCAL_SEGMENT_PHYS_ADDR)
                        q->data.ioaddr = s->bus; /* no IOMMU between the host and its devices */
                else
                        *err = SCI_ERR_ILLEGAL_QUERY;
                break;
        }
        case SCI_Q_REMOTE_SEGMENT: {
                sci_query_remote_segment_t *q = data;
                struct sx_rseg *s = (struct sx_rseg *)sx_get(q->segment, SX_RSEG);
                if (!s)
                        *err = SCI_ERR_ILLEGAL_PARAMETER;
                else if (q->subcommand == SCI_Q_REMOTE_SEGMENT_IOADDR)
                        q->data.ioaddr = s->addr; /* where this host reaches it */
                else
                        *err = SCI_ERR_ILLEGAL_QUERY;
                break;
        }
        case SCI_Q_DEVICE:
                *err = sx_query_device(data);
                break;
        default:
                *err = SCI_ERR_ILLEGAL_QUERY;
                break;
        }
out:
        sx_unlock();
}
