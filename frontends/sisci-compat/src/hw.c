/* frontends/sisci-compat/src/hw.c: segments on hardware backends: export memory, VFIO. */
#include <errno.h>
#include <string.h>

#include "sx.h"

/*
 * Everything here goes through the backend's vtable, the same on every backend:
 *
 * - Memory other nodes reach through their windows is the adapter's memory for export
 *   (mem_alloc): on ivshmem, the half of the shared region the other kernel's slots lead to.
 *   Where that memory is host-physical RAM that local devices reach too (NTBF_CAP_MEM_PHYS:
 *   the simulated fabric), the device API's DMA memory is made of it, and segments come from
 *   that allocator instead (segment.c); elsewhere a process's own DMA memory (ntbf_dma_alloc:
 *   memfd pages) is invisible to the other nodes.
 * - This process reaches this host's memory by its bus address with host_map (a segment of
 *   another process, a mailbox, SCIAttachPhysicalMemory), and finds the bus address of memory
 *   it maps with host_bus (SCIRegisterSegmentMemory).
 * - A device behind VFIO reaches what its container maps: the process's own CPU mapping of
 *   the segment, mapped by virtual address (ntbf_dev_dma_map; ntbf_dev_map_window for a
 *   remote segment's window). The fabric manager's device admissions describe modeled
 *   address spaces and have nothing to program there.
 */

/* The node's first adapter whose capabilities satisfy has, or NULL. */
static struct ntbf_adapter_h *node_adapter(bool (*has)(const struct ntbf_caps *c))
{
        for (unsigned n = 0; n < NTBF_MAX_NODE_ADAPTERS; n++) {
                uint32_t a = sx_adapter(n);
                struct ntbf_adapter_h *h = a == NTBF_NONE ? NULL : sx_ah(a);
                struct ntbf_caps caps;
                if (h && !sx.ops->caps(h, &caps) && has(&caps))
                        return h;
        }
        return NULL;
}

static bool has_mem(const struct ntbf_caps *c)
{
        return sx.ops->mem_alloc && (c->flags & NTBF_CAP_MEM);
}

static bool has_host(const struct ntbf_caps *c)
{
        (void)c;
        return sx.ops->host_map != NULL;
}

/* The adapter whose memory for export holds this host's segments: the node's first that has
 * any (a host's memory is one whichever adapter it is reached through). */
static struct ntbf_adapter_h *mem_adapter(void)
{
        return node_adapter(has_mem);
}

/* The adapter through which this process maps this host's memory (host_map, host_bus,
 * irq_trigger act on the host, whichever of its adapters is asked). */
static struct ntbf_adapter_h *host_adapter(void)
{
        return node_adapter(has_host);
}

int sx_hw_alloc(size_t size, struct ntbf_mem *m)
{
        memset(m, 0, sizeof(*m));
        struct ntbf_adapter_h *h = mem_adapter();
        struct ntbf_caps caps;
        if (!h || sx.ops->caps(h, &caps) || (caps.flags & NTBF_CAP_MEM_PHYS))
                return NTBF_EUNSUPPORTED; /* the device API's DMA memory is this memory */
        int r = sx.ops->mem_alloc(h, (size + 4095) & ~(size_t)4095, 4096, m);
        if (r)
                memset(m, 0, sizeof(*m));
        return r;
}

void sx_hw_free(struct ntbf_mem *m)
{
        struct ntbf_adapter_h *h = m->addr ? mem_adapter() : NULL;
        if (h)
                sx.ops->mem_free(h, m);
        memset(m, 0, sizeof(*m));
}

int sx_host_map(uint64_t bus, size_t size, void **p, bool *mapped)
{
        *mapped = false;
        struct ntbf_adapter_h *h = host_adapter();
        if (!h)
                return NTBF_EUNSUPPORTED;
        int r = sx.ops->host_map(h, bus, size, p);
        *mapped = !r;
        return r;
}

void sx_host_unmap(void *p, size_t size)
{
        struct ntbf_adapter_h *h = p ? host_adapter() : NULL;
        if (h)
                sx.ops->host_unmap(h, p, size);
}

int sx_host_bus(const void *p, size_t size, uint64_t *bus)
{
        struct ntbf_adapter_h *h = host_adapter();
        return h && sx.ops->host_bus ? sx.ops->host_bus(h, p, size, bus) : NTBF_EUNSUPPORTED;
}

int sx_irq_trigger(uint32_t adapter, uint64_t addr, uint32_t data)
{
        struct ntbf_adapter_h *h = adapter == NTBF_NONE ? NULL : sx_ah(adapter);
        if (!h)
                h = host_adapter();
        if (!h) {
                uint32_t a = sx_adapter(0);
                h = a == NTBF_NONE ? NULL : sx_ah(a);
        }
        return h && sx.ops->irq_trigger ? sx.ops->irq_trigger(h, addr, data) : NTBF_EUNSUPPORTED;
}

bool sx_dev_vfio(const struct sx_dev *x)
{
        struct ntbf_dev_info info;
        return x->nd && !ntbf_dev_info(x->nd, &info) && info.vfio;
}

/* The topology device and function of an fdid (node id << 12 | function index). */
static int fdid_func(uint32_t fdid, uint32_t *dev, uint32_t *fn)
{
        uint32_t node = sx_node_by_id(fdid >> 12), index = fdid & 0xfff, seen = 0;
        if (node == NTBF_NONE)
                return NTBF_ENOTFOUND;
        const struct ntbf_node *n = &sx.t->nodes[node];
        for (uint32_t i = 0; i < n->ndevices; i++) {
                uint32_t nf = ntbf_device_nfuncs(&sx.t->devices[n->devices[i]]);
                if (index < seen + nf) {
                        *dev = n->devices[i];
                        *fn = index - seen;
                        return 0;
                }
                seen += nf;
        }
        return NTBF_ENOTFOUND;
}

/* The handle of adapter number n of this node when its fabric maps devices itself. */
static struct ntbf_adapter_h *fabric_adapter(uint32_t n)
{
        struct ntbf_adapter_h *h = sx_ah(sx_adapter(n));
        struct ntbf_caps caps;
        return h && sx.ops->dev_map && !sx.ops->caps(h, &caps) && (caps.flags & NTBF_CAP_DEV_MAP)
                   ? h
                   : NULL;
}

bool sx_dev_managed(const struct sx_dev *x)
{
        (void)x;
        return fabric_adapter(0) != NULL;
}

int sx_dev_fabric_map(struct sx_dev *x, uint32_t adapter_no, uint64_t bus, size_t size,
                      uint64_t *ioaddr)
{
        struct ntbf_adapter_h *h = fabric_adapter(adapter_no);
        uint32_t dev, fn;
        if (!h)
                return NTBF_EUNSUPPORTED;
        int r = fdid_func(x->fdid, &dev, &fn);
        return r ? r : sx.ops->dev_map(h, dev, fn, bus, size, ioaddr);
}

void sx_dev_fabric_unmap(struct sx_dev *x, uint32_t adapter_no, uint64_t ioaddr)
{
        struct ntbf_adapter_h *h = fabric_adapter(adapter_no);
        uint32_t dev, fn;
        if (h && !fdid_func(x->fdid, &dev, &fn))
                sx.ops->dev_unmap(h, dev, fn, ioaddr);
}
