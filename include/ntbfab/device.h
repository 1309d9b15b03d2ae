/* ntbfab/device.h: one API for local and borrowed PCIe devices (config, BARs, DMA, interrupts). */
#ifndef NTBFAB_DEVICE_H
#define NTBFAB_DEVICE_H

#include "common.h"

NTBF_BEGIN_DECLS

/*
 * A driver uses a device the same way whether it sits in this host or is borrowed from
 * another (article sections 4 and 6.1). A context connects the process to its node's
 * daemon (control: open, config space, peer-to-peer mappings) and to the fabric backend
 * (data path: BAR mappings, DMA mappings, interrupt vectors). After ntbf_dev_open, BAR
 * access, DMA map/unmap and interrupts involve no daemon and no message to the lender.
 *
 * Functions return 0 or a negative error code (ntbfab/error.h); ntbf_ctx_error() gives
 * the last error's sentence for this context (thread-local to the context).
 */

struct ntbf_ctx;
struct ntbf_dev;

/*
 * Connect to node's daemon in instance directory dir. NULL dir/node: the environment
 * variables NTBFAB_DIR and NTBFAB_NODE; without a directory, this host's daemon (its
 * socket NTBFAB_SOCKET, else /run/ntbfab/ntbfabd.sock), which says which node it is
 * (docs/device-api.md says how a process knows who it is). Returns 0, NTBF_ENOTFOUND (no
 * such node or no daemon there), -errno.
 */
NTBF_EXPORT int ntbf_ctx_open(const char *dir, const char *node, struct ntbf_ctx **out);
/* Close the context; every device still open through it is closed first. */
NTBF_EXPORT void ntbf_ctx_close(struct ntbf_ctx *ctx);
/* The sentence explaining the last failure of a call on this context (or ""). */
NTBF_EXPORT const char *ntbf_ctx_error(const struct ntbf_ctx *ctx);

/* ---- memory for DMA ---------------------------------------------------------------------- */

/*
 * Memory the host's devices can reach by DMA (on the simulated fabric: node RAM; on
 * hardware: pinned memory). Only such memory (or a segment) can be DMA-mapped, as with
 * SPDK's DMA allocator. align 0 means 4 KiB.
 */
NTBF_EXPORT int ntbf_dma_alloc(struct ntbf_ctx *ctx, size_t size, size_t align, void **ptr);
NTBF_EXPORT void ntbf_dma_free(struct ntbf_ctx *ctx, void *ptr);
/*
 * The file descriptor and offset behind DMA memory, so that another process can map it
 * (mmap fd at offset; pass fd over a Unix socket). The fd stays the context's: do not close
 * it. NTBF_EUNSUPPORTED when the memory has none; -EFAULT for memory not from ntbf_dma_alloc.
 */
NTBF_EXPORT int ntbf_dma_fd(struct ntbf_ctx *ctx, const void *ptr, int *fd, uint64_t *offset);

/* ---- devices ------------------------------------------------------------------------------ */

/* Open a device by fabric-wide id: a device of this node, or one this node has borrowed. */
NTBF_EXPORT int ntbf_dev_open(struct ntbf_ctx *ctx, uint32_t fdid, struct ntbf_dev **out);
/* Open by PCI address in this host: a local device, or a borrowed one's shadow address. */
NTBF_EXPORT int ntbf_dev_open_bdf(struct ntbf_ctx *ctx, const char *bdf, struct ntbf_dev **out);
/* Close: unmaps its BARs and DMA mappings, frees its interrupt vectors. */
NTBF_EXPORT void ntbf_dev_close(struct ntbf_dev *dev);

struct ntbf_dev_bar {
        uint64_t size; /* 0: not implemented */
        uint64_t addr; /* the address this host's CPU reaches it at */
        bool prefetchable;
};

struct ntbf_dev_info {
        uint32_t fdid;
        bool local;          /* in this host (not borrowed) */
        char bdf[16];        /* the address the driver sees: real, or the shadow's */
        char lender_bdf[16]; /* the device's address in its own host */
        char lender[NTBF_NAME_MAX + 1];
        uint16_t vendor_id, device_id;
        uint32_t class_code;
        struct ntbf_dev_bar bars[6];
        uint64_t dma_window;   /* bytes of this host's memory the device can reach at once */
        uint32_t msix_vectors; /* 0: no MSI-X */
        uint32_t hops;         /* NTB and switch hops between this host and the device */
        uint32_t latency_ns;   /* modeled one-way latency from this host's CPU */
        bool vfio; /* a real device behind VFIO: its DMA addresses are IOVAs of its container,
                      mapped by virtual address (ntbf_dev_dma_map takes any memory of the
                      process) */
};

NTBF_EXPORT int ntbf_dev_info(const struct ntbf_dev *dev, struct ntbf_dev_info *out);

/*
 * Config space, 1, 2 or 4 bytes at a naturally aligned offset. For a borrowed device the
 * accesses are intercepted as the article's section 4.2 describes: the Interrupt Pin reads
 * 0 and INTx stays disabled; MSI address/data writes are rewritten to reach this host.
 */
NTBF_EXPORT int ntbf_dev_cfg_read(struct ntbf_dev *dev, uint32_t off, unsigned size, uint32_t *val);
NTBF_EXPORT int ntbf_dev_cfg_write(struct ntbf_dev *dev, uint32_t off, unsigned size, uint32_t val);

/* Map BAR bar into the process (a direct mapping: loads and stores go to the device). */
NTBF_EXPORT int ntbf_dev_map_bar(struct ntbf_dev *dev, unsigned bar, void **ptr, size_t *size);
NTBF_EXPORT int ntbf_dev_unmap_bar(struct ntbf_dev *dev, unsigned bar);

/*
 * Make [ptr, ptr + size) of DMA memory reachable by the device; *ioaddr is the address the
 * device must use. For a borrowed device this is an I/O virtual address in the borrower's
 * IOMMU behind the DMA window programmed at borrow time (article 4.3): no message to the
 * lender. NTBF_ENOSPC_BUDGET when the DMA window is full. For a device behind VFIO
 * (info.vfio) any memory mapped in the process will do (VFIO pins it by virtual address:
 * ntbf_dma_alloc memory, a segment's mapping, memory another process shares); elsewhere
 * only memory from ntbf_dma_alloc (-EFAULT otherwise).
 */
NTBF_EXPORT int ntbf_dev_dma_map(struct ntbf_dev *dev, void *ptr, size_t size, uint64_t *ioaddr);
NTBF_EXPORT int ntbf_dev_dma_unmap(struct ntbf_dev *dev, uint64_t ioaddr, size_t size);

/*
 * Make BAR bar of device target reachable by dev's DMA, along the shortest path (article
 * 4.4: same lender, target in this host, or different lenders). *ioaddr is what dev uses.
 */
NTBF_EXPORT int ntbf_dev_map_peer(struct ntbf_dev *dev, struct ntbf_dev *target, unsigned bar,
                                  uint64_t *ioaddr);
NTBF_EXPORT int ntbf_dev_unmap_peer(struct ntbf_dev *dev, uint64_t ioaddr);

/*
 * Make [offset, offset + size) of window `win` of this host's adapter `adapter` (its index in
 * the cluster file; window 0 for an adapter of one window) reachable by dev's DMA: the device then
 * reaches whatever the window's translation slots lead to (a remote segment: peer-to-peer into
 * another host's memory, as SISCI's SCIMapRemoteSegmentForDevice does). *ioaddr is the address dev
 * uses. For a device behind VFIO the window's CPU mapping is mapped in the device's IOMMU domain;
 * for a local device without one it is the window's host-physical address. Borrowed devices:
 * NTBF_EUNSUPPORTED (their peer mappings go through the daemon: ntbf_dev_map_peer).
 */
NTBF_EXPORT int ntbf_dev_map_window(struct ntbf_dev *dev, uint32_t adapter, uint32_t win,
                                    uint64_t offset, uint64_t size, uint64_t *ioaddr);
NTBF_EXPORT int ntbf_dev_unmap_window(struct ntbf_dev *dev, uint64_t ioaddr);

/*
 * Enable MSI-X vector n and return an eventfd that counts its interrupts. The device's
 * MSI-X table entry is written with an address and data that reach this host.
 */
NTBF_EXPORT int ntbf_dev_irq_enable(struct ntbf_dev *dev, unsigned vector, int *eventfd);
NTBF_EXPORT int ntbf_dev_irq_disable(struct ntbf_dev *dev, unsigned vector);

/*
 * An fd that becomes readable when something happens to the device (it was lost: its
 * lender died or it was revoked); ntbf_dev_event reads one event.
 */
enum ntbf_dev_event_kind { NTBF_DEV_EVENT_NONE, NTBF_DEV_EVENT_LOST };
NTBF_EXPORT int ntbf_dev_event_fd(struct ntbf_dev *dev);
NTBF_EXPORT int ntbf_dev_event(struct ntbf_dev *dev, enum ntbf_dev_event_kind *kind);

/* ---- for frontends built on a context (libsisci) ------------------------------------------ */

/*
 * A frontend that has its own control methods (libsisci's segments, interrupts, DMA queues)
 * still needs what a context already holds: who the process is, the topology, and the
 * backend attachment for its data path (window mappings, DMA engines, interrupt vectors).
 * These give it read access; the context keeps ownership of all of it.
 */
struct ntbf_topo;
struct ntbf_backend_ops;
struct ntbf_backend;
struct ntbf_adapter_h;

/* The cluster topology the context loaded (valid until ntbf_ctx_close), or NULL. */
NTBF_EXPORT const struct ntbf_topo *ntbf_ctx_topo(const struct ntbf_ctx *ctx);
/* The socket of the context's node daemon (DIR/run/NODE.sock, or this host's daemon's). */
NTBF_EXPORT const char *ntbf_ctx_socket(const struct ntbf_ctx *ctx);
/* The node the context acts as (its index in the topology), or NTBF_NONE. */
NTBF_EXPORT uint32_t ntbf_ctx_node(const struct ntbf_ctx *ctx);
/* The instance directory the context attached to, or NULL. */
NTBF_EXPORT const char *ntbf_ctx_dir(const struct ntbf_ctx *ctx);
/* The backend the context attached to. 0, or -EINVAL for a NULL argument. */
NTBF_EXPORT int ntbf_ctx_backend(struct ntbf_ctx *ctx, const struct ntbf_backend_ops **ops,
                                 struct ntbf_backend **b);
/* The handle of this node's adapter (topology index), or NULL (not one of this node's). */
NTBF_EXPORT struct ntbf_adapter_h *ntbf_ctx_adapter(struct ntbf_ctx *ctx, uint32_t adapter);
/*
 * The bus address (host-physical) of [ptr, ptr + len) of memory from ntbf_dma_alloc of this
 * context: what a device of this host, or an NTB slot onto this host, reaches it at.
 * 0, or -EFAULT when the range is not inside one allocation chunk of the context.
 */
NTBF_EXPORT int ntbf_dma_bus(struct ntbf_ctx *ctx, const void *ptr, size_t len, uint64_t *bus);

NTBF_END_DECLS

#endif
