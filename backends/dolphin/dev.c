/* backends/dolphin/dev.c: devices of the managed fabric (SmartIO), and their config space. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../hostmem.h"
#include "dolphin.h"

/*
 * Which address a device's DMA uses to reach memory is SmartIO's to decide (docs/dolphin.md):
 * the device is borrowed from the fabric (SCIBorrowDevice, shared, once per handle) and
 * memory is mapped for it whole, segment by segment: this process's memory for export
 * (SCIMapLocalSegmentForDevice) and slots of the window (SCIMapRemoteSegmentForDevice, the
 * slot's segment on its node). SISCI maps a segment once per device, so mappings of parts of
 * one segment share it and count.
 *
 * Memory of this host no segment of this process holds (a device segment another process
 * made) gets a segment of its own, attached to the range, for the mapping's time.
 *
 * A device of the cluster file is found in the fabric's pool by its host's node id and its
 * function's PCI address (sci_smartio_device_info_t's nodeid and bdf, as ntbfab's headers lay
 * the structure out).
 */

struct dol_dev {
        struct dol_dev *next;
        uint32_t device, f, fdid;
        sci_smartio_device_t dev;
};

struct dol_dmap {
        struct dol_dmap *next;
        struct dol_dev *d;
        struct dol_seg *seg; /* memory for export mapped (or NULL) */
        struct dol_seg att;  /* or another range of this host's memory, attached for it */
        bool attached;
        struct dol_conn *c;           /* a slot's segment mapped (or NULL) */
        struct ntbf_adapter_h *owner; /* the handle the segment was made on */
        uint64_t io, size;            /* the whole segment as the device reaches it */
        unsigned refs;
};

/* The device's fdid in the fabric's pool. */
static int find_fdid(struct ntbf_adapter_h *h, uint32_t device, uint32_t f, uint32_t *fdid)
{
        const struct ntbf_topo *t = h->b->t;
        const struct ntbf_device *d = &t->devices[device];
        struct dol_lib *L = h->L;
        uint32_t ids[256];
        sci_error_t e = SCI_ERR_OK;
        size_t n = SCI(L, GetDeviceList, L->sd, ids, 256, NULL, 0, &e);
        if (e != SCI_ERR_OK)
                return ntbf__dol_err(e);
        uint32_t node_id = t->nodes[d->node].id, rid = ntbf_device_rid(d, f);
        for (size_t i = 0; i < n && i < 256; i++) {
                sci_smartio_device_info_t info;
                memset(&info, 0, sizeof(info));
                sci_smartio_query_device_t q = {ids[i], SC(L, SCI_Q_DEVICE_INFO), &info};
                SCI(L, Query, SC(L, SCI_Q_DEVICE), &q, 0, &e);
                if (e == SCI_ERR_OK && info.nodeid == node_id && info.bdf == rid) {
                        *fdid = ids[i];
                        return 0;
                }
        }
        return NTBF_ENOTFOUND;
}

static int dev_get(struct ntbf_adapter_h *h, uint32_t device, uint32_t f, struct dol_dev **out)
{
        for (struct dol_dev *d = h->devs; d; d = d->next)
                if (d->device == device && d->f == f) {
                        *out = d;
                        return 0;
                }
        struct dol_dev *d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        d->device = device;
        d->f = f;
        int r = find_fdid(h, device, f, &d->fdid);
        if (!r) {
                sci_error_t e = SCI_ERR_OK;
                SCI(h->L, BorrowDevice, h->L->sd, &d->dev, d->fdid, 0, &e);
                r = ntbf__dol_err(e);
        }
        if (r) {
                free(d);
                return r;
        }
        d->next = h->devs;
        h->devs = d;
        *out = d;
        return 0;
}

int ntbf__dol_dev_map(struct ntbf_adapter_h *h, uint32_t device, uint32_t f, uint64_t addr,
                      uint64_t size, uint64_t *ioaddr)
{
        const struct ntbf_topo *t = h->b->t;
        if (!ioaddr || !size || addr + size < addr || device >= t->ndevices ||
            f >= ntbf_device_nfuncs(&t->devices[device]))
                return -EINVAL;
        struct dol_lib *L = h->L;
        uint32_t win, slot;
        uint64_t in;
        bool window = !ntbf__dol_win_slot(h, addr, &win, &slot, &in);
        struct ntbf_adapter_h *owner = h;
        struct dol_seg *seg = window ? NULL : ntbf__dol_mem_find(h, addr, size, &owner);
        pthread_mutex_lock(&h->lock);
        struct dol_dev *d;
        int r = dev_get(h, device, f, &d);
        struct dol_conn *c = NULL;
        if (!r && window) {
                c = ntbf__dol_conn_get(h, slot, &r);
                if (!c || in >= c->size || size > c->size - in)
                        r = r ? r : -ENOTCONN;
        }
        if (r)
                goto out;
        struct dol_dmap *m = h->dmaps;
        while (m && (window || seg) && !(m->d == d && (window ? m->c == c : m->seg == seg)))
                m = m->next;
        if (m && (window || seg)) {
                m->refs++;
        } else {
                m = calloc(1, sizeof(*m));
                if (!m) {
                        r = -ENOMEM;
                        goto out;
                }
                m->d = d;
                m->owner = owner;
                m->refs = 1;
                sci_error_t e = SCI_ERR_OK;
                if (window) {
                        m->c = c;
                        SCI(L, MapRemoteSegmentForDevice, c->rseg, d->dev, &m->io, 0, c->size, 0,
                            &e);
                        m->size = c->size;
                } else {
                        if (!seg) {
                                /* Memory of this host another process allocated (a device
                                 * segment the daemon made): a segment of its own for it. */
                                uint64_t lo = addr & ~(DOL_PAGE - 1),
                                         hi = (addr + size + DOL_PAGE - 1) & ~(DOL_PAGE - 1);
                                r = ntbf__dol_attach(h, lo, hi - lo, false, &m->att);
                                if (r) {
                                        free(m);
                                        goto out;
                                }
                                m->attached = true;
                                seg = &m->att;
                        }
                        m->seg = seg;
                        SCI(L, MapLocalSegmentForDevice, seg->seg, owner->ano, d->dev, &m->io, 0,
                            seg->size, 0, &e);
                        m->size = seg->size;
                }
                if (e != SCI_ERR_OK) {
                        if (m->attached)
                                ntbf__dol_detach(h, &m->att);
                        free(m);
                        r = ntbf__dol_err(e);
                        goto out;
                }
                m->next = h->dmaps;
                h->dmaps = m;
                if (!window)
                        seg->devmaps++;
                c = NULL; /* the mapping keeps the connection's reference */
        }
        *ioaddr = m->io + (window ? in : addr - m->seg->bus);
out:
        ntbf__dol_conn_put(h, c);
        pthread_mutex_unlock(&h->lock);
        return r;
}

static void dmap_drop(struct ntbf_adapter_h *h, struct dol_dmap *m)
{
        sci_error_t e;
        if (m->c) {
                SCI(h->L, UnmapRemoteSegmentForDevice, m->c->rseg, m->d->dev, 0, &e);
                ntbf__dol_conn_put(h, m->c);
        } else {
                SCI(h->L, UnmapLocalSegmentForDevice, m->seg->seg, m->owner->ano, m->d->dev, 0, &e);
                m->seg->devmaps--;
                if (m->attached)
                        ntbf__dol_detach(h, &m->att);
        }
        free(m);
}

int ntbf__dol_dev_unmap(struct ntbf_adapter_h *h, uint32_t device, uint32_t f, uint64_t ioaddr)
{
        int r = -ENOENT;
        pthread_mutex_lock(&h->lock);
        for (struct dol_dmap **pp = &h->dmaps; *pp; pp = &(*pp)->next) {
                struct dol_dmap *m = *pp;
                if (m->d->device != device || m->d->f != f || ioaddr < m->io ||
                    ioaddr - m->io >= m->size)
                        continue;
                if (--m->refs == 0) {
                        *pp = m->next;
                        dmap_drop(h, m);
                }
                r = 0;
                break;
        }
        pthread_mutex_unlock(&h->lock);
        return r;
}

void ntbf__dol_dev_release(struct ntbf_adapter_h *h)
{
        sci_error_t e;
        while (h->dmaps) {
                struct dol_dmap *m = h->dmaps;
                h->dmaps = m->next;
                dmap_drop(h, m);
        }
        while (h->devs) {
                struct dol_dev *d = h->devs;
                h->devs = d->next;
                SCI(h->L, ReturnDevice, d->dev, 0, &e);
                free(d);
        }
}

/* ---- config space ---------------------------------------------------------------------------- */

/*
 * SISCI has no config-space call. The lender's daemon reaches its own devices' config space
 * the way Linux offers it to root, through sysfs, which does not touch the driver the device
 * is bound to (Dolphin's, for a device in the SmartIO pool). NTBFAB_DOLPHIN_PCI_ROOT replaces
 * /sys/bus/pci/devices (tests).
 */
static const char *pci_dir(void)
{
        const char *root = getenv("NTBFAB_DOLPHIN_PCI_ROOT");
        return root && *root ? root : "/sys/bus/pci/devices";
}

int ntbf__dol_cfg_read(struct ntbf_backend *b, uint32_t device, uint32_t f, uint32_t off,
                       uint32_t size, uint32_t *val)
{
        if (!val)
                return -EINVAL;
        return ntbf__pci_cfg(pci_dir(), b->t, b->node, device, f, false, off, size, val);
}

int ntbf__dol_cfg_write(struct ntbf_backend *b, uint32_t device, uint32_t f, uint32_t off,
                        uint32_t size, uint32_t val)
{
        return ntbf__pci_cfg(pci_dir(), b->t, b->node, device, f, true, off, size, &val);
}
