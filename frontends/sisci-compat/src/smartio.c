/* frontends/sisci-compat/src/smartio.c: the SmartIO device extension (article 6.1). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sx.h"

/*
 * A device is borrowed through the node's daemon (sisci.borrow: the process's own borrow,
 * returned when it calls SCIReturnDevice or dies) and then used through the device API
 * (ntbf_dev_open): its BARs are the device API's BAR mappings, peer-to-peer mappings of one
 * device's BAR for another are ntbf_dev_map_peer. Segments mapped for a device are MAP_DEVICE
 * admissions at the fabric manager (sisci.map_device); device segments are memory the
 * manager places by the access hints (docs/sisci.md, "Placement").
 */

void sx_rseg_fill(struct sx_rseg *s, struct json_object *res);

void sx_dev_free(struct sx_dev *d)
{
        free(d);
}

void sx_dev_drop(struct sx_dev *d)
{
        if (d->nd)
                ntbf_dev_close(d->nd);
        d->nd = NULL;
}

static struct sx_dev *dev_of(sci_smartio_device_t h)
{
        return (struct sx_dev *)sx_get(h, SX_DEV);
}

static sci_error_t borrow_err(int r)
{
        switch (r) {
        case NTBF_ENOTFOUND:
                return SCI_ERR_NO_SUCH_FDID;
        case NTBF_EBUSY:
        case NTBF_EUNREACHABLE: /* a lost device: its lender is down */
                return SCI_ERR_NOT_AVAILABLE;
        case -EINVAL:
                return SCI_ERR_ILLEGAL_PARAMETER;
        default:
                return sx_err_of(r);
        }
}

/* ---- the pool ---------------------------------------------------------------------------------
 */

static bool fill_info(struct json_object *d, sci_smartio_device_info_t *info)
{
        uint64_t v;
        const char *node = NULL, *name = NULL, *bdf = NULL;
        struct json_object *x;
        memset(info, 0, sizeof(*info));
        if (!sx_get_u(d, "fdid", &v))
                return false;
        info->fdid = (uint32_t)v;
        if (sx_get_u(d, "class", &v))
                info->pci_class = (uint32_t)v;
        if (sx_get_u(d, "vendor", &v))
                info->pci_vendor_id = (uint16_t)v;
        if (sx_get_u(d, "device", &v))
                info->pci_device_id = (uint16_t)v;
        if (json_object_object_get_ex(d, "node", &x))
                node = json_object_get_string(x);
        if (json_object_object_get_ex(d, "name", &x))
                name = json_object_get_string(x);
        if (json_object_object_get_ex(d, "bdf", &x))
                bdf = json_object_get_string(x);
        uint32_t n = node ? ntbf_topo_find_node(sx.t, node) : NTBF_NONE;
        info->nodeid = n != NTBF_NONE ? sx.t->nodes[n].id : 0;
        info->adapter = 0; /* this node's first adapter reaches every node it can reach */
        uint16_t dom;
        uint8_t b, dv, f;
        if (bdf && !ntbf_bdf_parse(bdf, &dom, &b, &dv, &f))
                info->bdf = (uint32_t)b << 8 | (uint32_t)dv << 3 | f;
        snprintf(info->user_name, sizeof(info->user_name), "%s.%s", node ? node : "?",
                 name ? name : "?");
        return true;
}

static bool matches(const sci_smartio_device_info_t *i, const sci_smartio_device_info_t *f)
{
        if (!f)
                return true;
        /* Zero is "any" for every field, the ids included (a zeroed filter with only
         * pci_class set is how Dolphin's own example finds its NVMe drive); 0xffffffff
         * is also "any" for fdid and nodeid. */
        return (!f->fdid || f->fdid == 0xffffffffu || f->fdid == i->fdid) &&
               (!f->nodeid || f->nodeid == 0xffffffffu || f->nodeid == i->nodeid) &&
               (!f->pci_class || f->pci_class == i->pci_class) &&
               (!f->pci_vendor_id || f->pci_vendor_id == i->pci_vendor_id) &&
               (!f->pci_device_id || f->pci_device_id == i->pci_device_id) &&
               (!f->pci_subsystem_vendor_id ||
                f->pci_subsystem_vendor_id == i->pci_subsystem_vendor_id) &&
               (!f->pci_subsystem_id || f->pci_subsystem_id == i->pci_subsystem_id) &&
               (!f->bdf || f->bdf == i->bdf) &&
               (!f->user_name[0] || !strncmp(f->user_name, i->user_name, sizeof(i->user_name)));
}

/* The devices of the pool (device.list), or NULL with *err set. */
static struct json_object *pool(sci_error_t *err)
{
        struct json_object *res = NULL;
        int r = sx_call("device.list", NULL, &res);
        if (r || !json_object_is_type(res, json_type_array)) {
                json_object_put(res);
                *err = r ? sx_err_of(r) : SCI_ERR_SYSTEM;
                return NULL;
        }
        return res;
}

size_t SCIGetDeviceList(sci_desc_t sd, uint32_t *fdids, size_t length,
                        const sci_smartio_device_info_t *filter, unsigned int flags,
                        sci_error_t *error)
{
        SX_ERR(error);
        size_t n = 0;
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        if (!sx_get(sd, SX_DESC) || (!fdids && length)) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        struct json_object *list = pool(err);
        for (size_t i = 0; list && i < json_object_array_length(list); i++) {
                sci_smartio_device_info_t info;
                if (!fill_info(json_object_array_get_idx(list, i), &info) ||
                    !matches(&info, filter))
                        continue;
                if (n < length)
                        fdids[n] = info.fdid;
                n++;
        }
        json_object_put(list);
out:
        sx_unlock();
        return n;
}

sci_error_t sx_query_device(sci_smartio_query_device_t *q);
sci_error_t sx_query_device(sci_smartio_query_device_t *q)
{
        if (q->subcommand != SCI_Q_DEVICE_INFO)
                return SCI_ERR_ILLEGAL_QUERY;
        if (!q->data)
                return SCI_ERR_ILLEGAL_PARAMETER;
        sci_error_t err = SCI_ERR_NO_SUCH_FDID;
        struct json_object *list = pool(&err);
        for (size_t i = 0; list && i < json_object_array_length(list); i++) {
                sci_smartio_device_info_t info;
                if (fill_info(json_object_array_get_idx(list, i), &info) && info.fdid == q->fdid) {
                        *q->data = info;
                        err = SCI_ERR_OK;
                        break;
                }
                err = SCI_ERR_NO_SUCH_FDID;
        }
        json_object_put(list);
        return err;
}

/* ---- borrowing --------------------------------------------------------------------------------
 */

static void give_back(uint64_t holder)
{
        struct json_object *p = sx_obj_new();
        sx_put_u(p, "holder", holder);
        sx_call("sisci.return", p, NULL);
}

void SCIBorrowDevice(sci_desc_t sd, sci_smartio_device_t *device, uint32_t fdid, unsigned int flags,
                     sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_desc *d = (struct sx_desc *)sx_get(sd, SX_DESC);
        if (!d || !device) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~SCI_FLAG_EXCLUSIVE) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        struct json_object *p = sx_obj_new(), *res = NULL;
        sx_put_u(p, "fdid", fdid);
        sx_put_b(p, "exclusive", flags & SCI_FLAG_EXCLUSIVE);
        uint64_t holder = 0, lender = NTBF_NONE;
        bool local = false;
        int r = sx_call("sisci.borrow", p, &res);
        if (!r && !sx_get_u(res, "holder", &holder))
                r = NTBF_EPROTO;
        sx_get_b(res, "local", &local);
        sx_get_u(res, "lender", &lender);
        json_object_put(res);
        if (r) {
                *err = borrow_err(r);
                goto out;
        }
        /* The device API opens it: the borrower's window for a borrowed device, the device
         * itself for one of this node. */
        struct ntbf_dev *nd = NULL;
        r = ntbf_dev_open(sx.ctx, fdid, &nd);
        struct sx_dev *x = r ? NULL : sx_new(sizeof(*x), SX_DEV, d);
        if (!x) {
                if (r && getenv("NTBFAB_SISCI_DEBUG"))
                        sx_warn("opening device 0x%04x: %s", fdid, ntbf_ctx_error(sx.ctx));
                if (nd)
                        ntbf_dev_close(nd);
                give_back(holder);
                *err = r == NTBF_EBUSY ? SCI_ERR_NOT_AVAILABLE : r ? sx_err_of(r) : SCI_ERR_NOSPC;
                goto out;
        }
        /*
         * SISCI has no config-space call: as SmartIO does for its borrowers, the device decodes
         * its BARs and may master the bus (DMA, and MSI-X messages) once borrowed.
         */
        uint32_t cmd = 0;
        if (!ntbf_dev_cfg_read(nd, 0x04, 2, &cmd) && (cmd & 0x6) != 0x6)
                ntbf_dev_cfg_write(nd, 0x04, 2, (cmd | 0x6) & 0xffff);
        x->fdid = fdid;
        x->holder = holder;
        x->exclusive = flags & SCI_FLAG_EXCLUSIVE;
        x->local = local;
        x->lender = (uint32_t)lender;
        x->nd = nd;
        *device = sx_handle(&x->o);
out:
        sx_unlock();
}

void SCIReturnDevice(sci_smartio_device_t device, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_dev *x = dev_of(device);
        if (!x) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (x->segs || x->maps) {
                *err = SCI_ERR_BUSY; /* disconnect its segments and unmap what it reaches */
                goto out;
        }
        sx_dev_drop(x);
        give_back(x->holder);
        sx_kill(&x->o);
out:
        sx_unlock();
}

void SCIReleaseExclusiveBorrow(sci_smartio_device_t device, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_dev *x = dev_of(device);
        if (!x) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (!x->exclusive)
                goto out; /* shared already */
        struct json_object *p = sx_obj_new();
        sx_put_u(p, "holder", x->holder);
        int r = sx_call("sisci.release_exclusive", p, NULL);
        if (r)
                *err = sx_err_of(r);
        else
                x->exclusive = false;
out:
        sx_unlock();
}

uint32_t SCIGetFabricDeviceId(sci_smartio_device_t device)
{
        sx_lock();
        struct sx_dev *x = dev_of(device);
        uint32_t fdid = x ? x->fdid : 0;
        sx_unlock();
        return fdid;
}

void sx_on_device_lost(uint32_t fdid)
{
        for (struct sx_obj *o = sx.all; o; o = o->next)
                if (o->kind == SX_DEV && ((struct sx_dev *)o)->fdid == fdid)
                        ((struct sx_dev *)o)->lost = true;
        /* Its BARs read all ones now; segments connected through it are lost. */
        for (struct sx_obj *o = sx.all; o;) {
                struct sx_obj *next = o->next;
                struct sx_rseg *s = (struct sx_rseg *)o;
                if (o->kind == SX_RSEG && s->dev && s->dev->fdid == fdid && !s->lost &&
                    s->rkind == SX_R_BAR) {
                        s->lost = true;
                        sx_ref(o);
                        sx_rseg_event(s, SCI_CB_LOST, SCI_ERR_OK);
                        next = o->next;
                        sx_unref(o);
                }
                o = next;
        }
        pthread_cond_broadcast(&sx.cond);
}

/* ---- device segments --------------------------------------------------------------------------
 */

/*
 * A device segment through adapter `adapter`. A BAR of a remote device named with a path
 * (SCIConnectDeviceSegmentPath) is a connection of this host's CPU to the BAR through that
 * adapter (sisci.devseg_connect with SCI_MEMTYPE_BAR: a CONNECT at the fabric manager), so one
 * borrowed device can have its BAR mapped through every adapter of the host (article 6.3);
 * without a path it is the borrow's own mapping (the device API's BAR, one window).
 */
static void connect_devseg(sci_smartio_device_t device, sci_remote_segment_t *segment,
                           unsigned segid, unsigned memtype, unsigned adapter, bool path,
                           sci_cb_device_segment_t cb, void *cbarg, unsigned flags,
                           sci_error_t *err)
{
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_dev *x = dev_of(device);
        if (!x || !segment) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~(SCI_FLAG_USE_CALLBACK | SCI_FLAG_SPECIFY_PATH)) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (sx_adapter(adapter) == NTBF_NONE) {
                *err = SCI_ERR_NO_SUCH_ADAPTERNO;
                goto out;
        }
        if (x->lost) {
                *err = SCI_ERR_NOT_AVAILABLE;
                goto out;
        }
        struct ntbf_dev_info info;
        struct json_object *res = NULL;
        bool bar_conn = memtype == SCI_MEMTYPE_BAR && path && !x->local;
        if (memtype == SCI_MEMTYPE_BAR) {
                /* BAR segId of the device, where this host reaches it. */
                if (ntbf_dev_info(x->nd, &info) || segid >= 6 || !info.bars[segid].size) {
                        *err = SCI_ERR_NO_SUCH_SEGMENT;
                        goto out;
                }
        }
        if (bar_conn || memtype == SCI_MEMTYPE_PRIVATE || memtype == SCI_MEMTYPE_SHARED) {
                struct json_object *p = sx_obj_new();
                sx_put_u(p, "holder", x->holder);
                sx_put_u(p, "id", segid);
                sx_put_u(p, "memtype", memtype);
                sx_put_u(p, "adapter", adapter);
                int r = sx_call("sisci.devseg_connect", p, &res);
                if (r) {
                        *err = r == NTBF_ENOTFOUND ? SCI_ERR_NO_SUCH_SEGMENT : sx_err_of(r);
                        goto out;
                }
        } else if (memtype != SCI_MEMTYPE_BAR) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        struct sx_rseg *s = sx_new(sizeof(*s), SX_RSEG, x->o.sd);
        if (!s) {
                uint64_t h = 0;
                if (sx_get_u(res, "handle", &h)) {
                        struct json_object *q = sx_obj_new();
                        sx_put_u(q, "handle", h);
                        sx_call("sisci.release", q, NULL);
                }
                json_object_put(res);
                *err = SCI_ERR_NOSPC;
                goto out;
        }
        s->dev = x;
        s->id = segid;
        s->adapter_no = adapter;
        x->segs++;
        if (bar_conn) {
                /* Reached through the connection's window, like a segment of the lender. */
                s->rkind = SX_R_BAR;
                s->bar = segid;
                sx_rseg_fill(s, res);
                s->owner_node = x->lender < sx.t->nnodes ? x->lender : s->owner_node;
                s->node_id = s->owner_node < sx.t->nnodes ? sx.t->nodes[s->owner_node].id : 0;
        } else if (memtype == SCI_MEMTYPE_BAR) {
                s->rkind = SX_R_BAR;
                s->bar = segid;
                s->size = info.bars[segid].size;
                s->addr = info.bars[segid].addr;
                s->local = true; /* reached through the device API, not a connection */
                s->adapter = NTBF_NONE;
                uint32_t ln = x->lender < sx.t->nnodes ? x->lender : sx.node_idx;
                s->node_id = sx.t->nodes[ln].id;
                s->owner_node = ln;
        } else {
                s->rkind = SX_R_MEM;
                sx_rseg_fill(s, res);
                s->node_id = s->owner_node < sx.t->nnodes ? sx.t->nodes[s->owner_node].id : 0;
        }
        json_object_put(res);
        if (cb && (flags & SCI_FLAG_USE_CALLBACK)) {
                s->cb = cb;
                s->cbarg = cbarg;
        }
        *segment = sx_handle(&s->o);
out:
        sx_unlock();
}

void SCIConnectDeviceSegment(sci_smartio_device_t device, sci_remote_segment_t *segment,
                             unsigned int segmentId, unsigned int memoryType,
                             sci_cb_device_segment_t callback, void *callbackArg,
                             unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        connect_devseg(device, segment, segmentId, memoryType, 0, false, callback, callbackArg,
                       flags, err);
}

void SCIConnectDeviceSegmentPath(sci_smartio_device_t device, sci_remote_segment_t *segment,
                                 unsigned int segmentId, unsigned int memoryType,
                                 unsigned int localAdapterNo, sci_cb_device_segment_t callback,
                                 void *callbackArg, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        connect_devseg(device, segment, segmentId, memoryType, localAdapterNo, true, callback,
                       callbackArg, flags, err);
}

void SCICreateDeviceSegment(sci_smartio_device_t device, unsigned int segmentId, size_t size,
                            unsigned int memoryType, unsigned int accessHints, unsigned int flags,
                            sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_dev *x = dev_of(device);
        if (!x || !size ||
            (memoryType != SCI_MEMTYPE_PRIVATE && memoryType != SCI_MEMTYPE_SHARED)) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (accessHints & ~0x3fu) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags & ~(SCI_FLAG_DEVICE_SIDE_ONLY | SCI_FLAG_LOCAL_ONLY |
                      SCI_FLAG_DEVICE_PREFER_BANDWIDTH | SCI_FLAG_HOST_PREFER_BANDWIDTH)) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (size > (UINT64_C(1) << 40)) {
                *err = SCI_ERR_NOSPC;
                goto out;
        }
        /* The flags overrule the hints: where the memory must be, or which side is favoured. */
        const char *place = "hints";
        if ((flags & SCI_FLAG_DEVICE_SIDE_ONLY) == SCI_FLAG_DEVICE_SIDE_ONLY ||
            (flags & SCI_FLAG_DEVICE_PREFER_BANDWIDTH) == SCI_FLAG_DEVICE_PREFER_BANDWIDTH)
                place = "device";
        else if ((flags & SCI_FLAG_LOCAL_ONLY) == SCI_FLAG_LOCAL_ONLY ||
                 (flags & SCI_FLAG_HOST_PREFER_BANDWIDTH) == SCI_FLAG_HOST_PREFER_BANDWIDTH)
                place = "host";
        struct json_object *p = sx_obj_new();
        sx_put_u(p, "holder", x->holder);
        sx_put_u(p, "id", segmentId);
        sx_put_u(p, "size", (size + 4095) & ~(size_t)4095);
        sx_put_u(p, "memtype", memoryType);
        sx_put_u(p, "hints", accessHints);
        json_object_object_add(p, "place", json_object_new_string(place));
        int r = sx_call("sisci.devseg_create", p, NULL);
        if (r)
                *err = r == NTBF_EEXISTS ? SCI_ERR_SEGMENTID_USED : sx_err_of(r);
out:
        sx_unlock();
}

/* ---- segments mapped for devices --------------------------------------------------------------
 */

static struct sx_devmap **find_dmap(struct sx_devmap **head, struct sx_dev *x, uint32_t adapter_no,
                                    bool any_adapter)
{
        for (struct sx_devmap **pp = head; *pp; pp = &(*pp)->next)
                if ((*pp)->dev == x && (any_adapter || (*pp)->adapter_no == adapter_no))
                        return pp;
        return NULL;
}

/* sisci.map_device with params p (holder added here): the device address, or an error. */
static int map_device(struct sx_dev *x, struct json_object *p, uint64_t *dh, uint64_t *io)
{
        sx_put_u(p, "holder", x->holder);
        struct json_object *res = NULL;
        int r = sx_call("sisci.map_device", p, &res);
        if (!r && (!sx_get_u(res, "handle", dh) || !sx_get_u(res, "device_addr", io)))
                r = NTBF_EPROTO;
        json_object_put(res);
        return r;
}

static void unmap_device(uint64_t dh)
{
        if (!dh)
                return; /* released already (the manager said it was lost) */
        struct json_object *p = sx_obj_new();
        sx_put_u(p, "handle", dh);
        sx_call("sisci.release", p, NULL);
}

/* Undo a mapping for a device: VFIO's, or the fabric manager's admission. */
static void unmap_devmap(struct sx_devmap *m)
{
        if (m->fabric)
                sx_dev_fabric_unmap(m->dev, m->adapter_no, m->ioaddr);
        else if (m->vfio_window && m->dev->nd)
                ntbf_dev_unmap_window(m->dev->nd, m->ioaddr);
        else if (m->vfio_size && m->dev->nd)
                ntbf_dev_dma_unmap(m->dev->nd, m->ioaddr, m->vfio_size);
        else
                unmap_device(m->dh);
}

/* A segment's memory mapped for a device behind VFIO: this host's memory through this
 * process's mapping of it, another host's through the window the connection uses. */
static int vfio_map_rseg(struct sx_rseg *s, struct sx_dev *x, size_t offset, size_t size,
                         struct sx_devmap *m)
{
        if (s->broadcast)
                return NTBF_EUNSUPPORTED;
        if (s->local && sx_dev_managed(x)) {
                /* This host's memory: the fabric maps it by its bus address. */
                m->fabric = true;
                m->adapter_no = s->adapter_no;
                return sx_dev_fabric_map(x, s->adapter_no, s->addr + offset, size, &m->ioaddr);
        }
        if (s->local) {
                volatile uint8_t *p = sx_rseg_imap(s);
                m->vfio_size = size;
                return p ? ntbf_dev_dma_map(x->nd, (void *)(uintptr_t)(p + offset), size,
                                            &m->ioaddr)
                         : NTBF_EUNSUPPORTED;
        }
        m->vfio_window = true;
        return ntbf_dev_map_window(x->nd, s->adapter, s->win, s->offset + offset, size, &m->ioaddr);
}

static sci_error_t map_err(int r)
{
        switch (r) {
        case NTBF_ENOTFOUND:
                return SCI_ERR_NO_SUCH_SEGMENT;
        case NTBF_EADDRLIMIT:
                return SCI_ERR_ILLEGAL_ADDRESS;
        case -EPERM:
                return SCI_ERR_NOT_AVAILABLE;
        default:
                return sx_err_of(r);
        }
}

void SCIMapLocalSegmentForDevice(sci_local_segment_t segment, unsigned int localAdapterNo,
                                 sci_smartio_device_t device, sci_ioaddr_t *ioaddr, size_t offset,
                                 size_t size, unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_lseg *s = (struct sx_lseg *)sx_get(segment, SX_LSEG);
        struct sx_dev *x = dev_of(device);
        if (!s || !x || !ioaddr) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (localAdapterNo >= 64 || sx_adapter(localAdapterNo) == NTBF_NONE) {
                *err = SCI_ERR_NO_SUCH_ADAPTERNO;
                goto out;
        }
        if (!size && offset < s->size)
                size = s->size - offset; /* 0: to the end of the segment */
        if (!size || offset > s->size || size > s->size - offset) {
                *err = SCI_ERR_OUT_OF_RANGE;
                goto out;
        }
        /* As with the original: prepared on that adapter, and available (unless private). */
        if (!(s->prepared >> localAdapterNo & 1)) {
                *err = SCI_ERR_SEGMENT_NOT_PREPARED;
                goto out;
        }
        if (!(s->flags & SCI_FLAG_PRIVATE) && !(s->available >> localAdapterNo & 1)) {
                *err = SCI_ERR_NOT_AVAILABLE;
                goto out;
        }
        if (x->lost) {
                *err = SCI_ERR_NOT_AVAILABLE;
                goto out;
        }
        if (find_dmap(&s->dmaps, x, localAdapterNo, false)) {
                *err = SCI_ERR_BUSY; /* mapped for that device already: unmap it first */
                goto out;
        }
        struct sx_devmap *m = calloc(1, sizeof(*m));
        if (!m) {
                *err = SCI_ERR_NOSPC;
                goto out;
        }
        int r;
        if (sx_dev_vfio(x)) {
                /* Behind VFIO the device reaches what this process maps for it (hw.c). */
                r = s->mem ? ntbf_dev_dma_map(x->nd, (uint8_t *)s->mem + offset, size, &m->ioaddr)
                           : NTBF_EUNSUPPORTED;
                m->vfio_size = size;
        } else if (sx_dev_managed(x)) {
                /* A managed fabric maps it itself, by bus address, through that adapter. */
                r = sx_dev_fabric_map(x, localAdapterNo, s->bus + offset, size, &m->ioaddr);
                m->fabric = true;
        } else {
                /* The device's DMA enters this host through that adapter (article 6.3). */
                struct json_object *p = sx_obj_new();
                sx_put_u(p, "seg", s->did);
                sx_put_u(p, "addr", offset);
                sx_put_u(p, "size", size);
                sx_put_u(p, "adapter", localAdapterNo);
                r = map_device(x, p, &m->dh, &m->ioaddr);
        }
        if (r) {
                free(m);
                *err = map_err(r);
                goto out;
        }
        m->dev = x;
        m->adapter_no = localAdapterNo;
        m->next = s->dmaps;
        s->dmaps = m;
        s->dev_maps++;
        x->maps++;
        *ioaddr = m->ioaddr;
out:
        sx_unlock();
}

void SCIUnmapLocalSegmentForDevice(sci_local_segment_t segment, unsigned int localAdapterNo,
                                   sci_smartio_device_t device, unsigned int flags,
                                   sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_lseg *s = (struct sx_lseg *)sx_get(segment, SX_LSEG);
        struct sx_dev *x = dev_of(device);
        if (!s || !x) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        struct sx_devmap **pp = find_dmap(&s->dmaps, x, localAdapterNo, false);
        if (!pp) {
                *err = SCI_ERR_NOT_CONNECTED; /* not mapped for that device */
                goto out;
        }
        struct sx_devmap *m = *pp;
        *pp = m->next;
        unmap_devmap(m);
        free(m);
        s->dev_maps--;
        x->maps--;
out:
        sx_unlock();
}

void SCIMapRemoteSegmentForDevice(sci_remote_segment_t segment, sci_smartio_device_t device,
                                  sci_ioaddr_t *ioaddr, size_t offset, size_t size,
                                  unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_rseg *s = (struct sx_rseg *)sx_get(segment, SX_RSEG);
        struct sx_dev *x = dev_of(device);
        if (!s || !x || !ioaddr) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        if (!size && offset < s->size)
                size = s->size - offset;
        if (!size || offset > s->size || size > s->size - offset) {
                *err = SCI_ERR_OUT_OF_RANGE;
                goto out;
        }
        if (s->lost) {
                *err = SCI_ERR_NOT_CONNECTED;
                goto out;
        }
        if (x->lost) {
                *err = SCI_ERR_NOT_AVAILABLE;
                goto out;
        }
        if (find_dmap(&s->dmaps, x, 0, true)) {
                *err = SCI_ERR_BUSY;
                goto out;
        }
        struct sx_devmap *m = calloc(1, sizeof(*m));
        if (!m) {
                *err = SCI_ERR_NOSPC;
                goto out;
        }
        int r;
        if (s->rkind == SX_R_BAR) {
                /* Another device's BAR (or the device's own): peer to peer, shortest path. */
                uint64_t io = 0;
                r = s->dev && s->dev->nd ? ntbf_dev_map_peer(x->nd, s->dev->nd, s->bar, &io)
                                         : NTBF_EUNREACHABLE;
                m->peer_io = io;
                m->ioaddr = io + offset;
        } else if (sx_dev_vfio(x) || sx_dev_managed(x)) {
                r = vfio_map_rseg(s, x, offset, size, m);
        } else {
                struct json_object *p = sx_obj_new();
                if (s->broadcast) {
                        sx_put_u(p, "group", s->id);
                        sx_put_u(p, "addr", offset);
                } else {
                        sx_put_u(p, "node", s->local ? sx.node_idx : s->owner_node);
                        sx_put_u(p, "addr", (s->local ? s->addr : s->owner_phys) + offset);
                        /* Memory of this host (a device segment placed here): the device
                         * reaches it through the adapter the segment was connected by. */
                        if (s->local)
                                sx_put_u(p, "adapter", s->adapter_no);
                }
                sx_put_u(p, "size", size);
                r = map_device(x, p, &m->dh, &m->ioaddr);
        }
        if (r) {
                free(m);
                *err = map_err(r);
                goto out;
        }
        m->dev = x;
        m->next = s->dmaps;
        s->dmaps = m;
        s->dev_maps++;
        x->maps++;
        *ioaddr = m->ioaddr;
out:
        sx_unlock();
}

void SCIUnmapRemoteSegmentForDevice(sci_remote_segment_t segment, sci_smartio_device_t device,
                                    unsigned int flags, sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) != SCI_ERR_OK)
                goto out;
        struct sx_rseg *s = (struct sx_rseg *)sx_get(segment, SX_RSEG);
        struct sx_dev *x = dev_of(device);
        if (!s || !x) {
                *err = SCI_ERR_ILLEGAL_PARAMETER;
                goto out;
        }
        if (flags) {
                *err = SCI_ERR_ILLEGAL_FLAG;
                goto out;
        }
        struct sx_devmap **pp = find_dmap(&s->dmaps, x, 0, true);
        if (!pp) {
                *err = SCI_ERR_NOT_CONNECTED;
                goto out;
        }
        struct sx_devmap *m = *pp;
        *pp = m->next;
        if (s->rkind == SX_R_BAR) {
                if (x->nd)
                        ntbf_dev_unmap_peer(x->nd, m->peer_io);
        } else {
                unmap_devmap(m);
        }
        free(m);
        s->dev_maps--;
        x->maps--;
out:
        sx_unlock();
}
