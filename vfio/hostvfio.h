/* vfio/hostvfio.h: real local PCIe devices through vfio-pci: sysfs binding, VFIO fds. */
#ifndef NTBF_HOSTVFIO_H
#define NTBF_HOSTVFIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Two halves, used by two parties (docs/device-api.md, "Real devices: VFIO"):
 *
 * - sysfs (vfiosys.c): the owner of a device (ntbfabd) checks that VFIO can work here (an
 *   IOMMU, the modules, a viable IOMMU group), binds the device to vfio-pci with
 *   driver_override + drivers_probe, and gives it back to its previous driver on release.
 *   Every path is under a root prefix, so tests run the logic against a fake sysfs tree.
 * - fds (vfio.c): the container, group and device file descriptors: the owner opens them
 *   (VFIO_TYPE1v2), clients adopt the container and device fds it passes them, and both
 *   use them for BARs, config space, DMA mappings and MSI-X eventfds with no daemon call.
 *
 * Functions return 0 or a negative code (ntbfab/error.h) and, where they take why/whylen,
 * put the sentence an operator needs there: what failed and what to do about it.
 */

/* ---- sysfs: checks and binding ----------------------------------------------------------------
 */

struct ntbf__vfio_sys {
        /* "" on a real system; a directory holding sys/ and dev/ in tests. */
        char root[256];
        /* Tests: a fake kernel that reacts to each sysfs write (binding a driver, creating
         * /dev/vfio/N). NULL on a real system, where the kernel does it. */
        void (*kernel)(void *arg, const char *path, const char *value);
        void *arg;
};

/* Drivers a device may be bound to without spoiling its group (the kernel's own list). */
bool ntbf__vfio_driver_harmless(const char *driver);

/* VFIO can work on this host: an IOMMU with groups, the vfio modules, /dev/vfio/vfio. */
int ntbf__vfio_sys_check(const struct ntbf__vfio_sys *s, char *why, size_t whylen);
/* The IOMMU group number of bdf (DDDD:BB:DD.F). */
int ntbf__vfio_sys_group(const struct ntbf__vfio_sys *s, const char *bdf, int *group, char *why,
                         size_t whylen);
/* The driver bdf is bound to, "" for none. */
int ntbf__vfio_sys_driver(const struct ntbf__vfio_sys *s, const char *bdf, char *drv,
                          size_t drvlen);
/* Every other device of bdf's group is unbound or on a harmless driver; else they are named. */
int ntbf__vfio_sys_viable(const struct ntbf__vfio_sys *s, const char *bdf, int group, char *why,
                          size_t whylen);
/* Vendor, device and class from sysfs (for the daemon's cross-check with the cluster file). */
int ntbf__vfio_sys_ids(const struct ntbf__vfio_sys *s, const char *bdf, uint16_t *vendor,
                       uint16_t *device, uint32_t *class_code);
/* The host-physical address and size of each memory BAR (from the resource file; 0 if not
 * implemented or an I/O BAR). 0, or -errno if the file cannot be read. */
int ntbf__vfio_sys_bars(const struct ntbf__vfio_sys *s, const char *bdf, uint64_t addr[6],
                        uint64_t size[6]);

/* What a device was bound to before ntbfab took it. */
struct ntbf__vfio_prev {
        char driver[64]; /* "" none */
        bool taken;      /* ntbfab bound it to vfio-pci (false: it already was) */
};

/*
 * Bind bdf to vfio-pci. A device bound to another kernel driver is refused (NTBF_EBUSY,
 * naming the driver) unless force, which unbinds that driver first; prev records what to
 * give it back to. The group must be viable (checked first; the devices in the way named).
 */
int ntbf__vfio_sys_bind(const struct ntbf__vfio_sys *s, const char *bdf, bool force,
                        struct ntbf__vfio_prev *prev, char *why, size_t whylen);
/* Undo bind: unbind vfio-pci, clear driver_override, bind prev->driver again. */
int ntbf__vfio_sys_release(const struct ntbf__vfio_sys *s, const char *bdf,
                           const struct ntbf__vfio_prev *prev, char *why, size_t whylen);

/* ---- fds: the container, the group, the device --------------------------------------------------
 */

#define NTBF__VFIO_REGIONS 9 /* BAR0..5, ROM, config, VGA (VFIO_PCI_NUM_REGIONS) */
#define NTBF__VFIO_CONFIG  7 /* VFIO_PCI_CONFIG_REGION_INDEX */

struct ntbf__vfio_region {
        uint64_t size, offset; /* offset: where the region is in the device fd */
        uint32_t flags;        /* VFIO_REGION_INFO_FLAG_{READ,WRITE,MMAP} */
};

struct ntbf__vfio_range {
        uint64_t start, end; /* inclusive, as the kernel reports them */
};

#define NTBF__VFIO_MAX_RANGES 8

struct ntbf__vfio {
        int container, group, device; /* -1 when not held (a client holds no group fd) */
        struct ntbf__vfio_region regions[NTBF__VFIO_REGIONS];
        uint32_t msix_count; /* MSI-X vectors VFIO offers (0: none) */
        bool msix_on;        /* MSI-X enabled through SET_IRQS, for msix_count vectors */
        struct ntbf__vfio_range iova[NTBF__VFIO_MAX_RANGES]; /* usable IOVA ranges */
        uint32_t niova;
        uint32_t dma_avail; /* mappings the container still accepts (0: not reported) */
};

/*
 * The owner's side: open ROOT/dev/vfio/vfio and ROOT/dev/vfio/GROUP, check the group is
 * viable, attach it to a new container with the TYPE1v2 IOMMU, and get bdf's device fd.
 */
int ntbf__vfio_open(const char *root, int group, const char *bdf, struct ntbf__vfio *v, char *why,
                    size_t whylen);
/* A client's side: use the container and device fds the owner passed (taken: closed by close). */
int ntbf__vfio_adopt(int container, int device, struct ntbf__vfio *v, char *why, size_t whylen);
void ntbf__vfio_close(struct ntbf__vfio *v);

/* Config space through the device fd (1, 2 or 4 bytes, little endian). */
int ntbf__vfio_cfg_read(const struct ntbf__vfio *v, uint32_t off, unsigned size, uint32_t *val);
int ntbf__vfio_cfg_write(const struct ntbf__vfio *v, uint32_t off, unsigned size, uint32_t val);
/* mmap a BAR (shared, read/write); NTBF_EUNSUPPORTED if VFIO does not allow mmap of it. */
int ntbf__vfio_map_bar(const struct ntbf__vfio *v, unsigned bar, void **ptr);
void ntbf__vfio_unmap_bar(const struct ntbf__vfio *v, unsigned bar, void *ptr);

/* The IOMMU (VFIO_IOMMU_MAP_DMA / UNMAP_DMA): iova -> the pages of [vaddr, vaddr + len). */
int ntbf__vfio_dma_map(const struct ntbf__vfio *v, uint64_t iova, const void *vaddr, uint64_t len);
/* Unmap every mapping inside [iova, iova + len); *unmapped (may be NULL) says how much was. */
int ntbf__vfio_dma_unmap(const struct ntbf__vfio *v, uint64_t iova, uint64_t len,
                         uint64_t *unmapped);

/*
 * MSI-X. enable turns MSI-X on for every vector VFIO offers, none signalling anything yet:
 * the 6.1 kernel cannot grow the set while it is on, and clients sharing a device each set
 * their own vectors, so the owner enables them all once (msix_on tells a client it did).
 * irq_set makes vector n signal fd (-1: nothing), enabling first if needed.
 */
int ntbf__vfio_irq_enable(struct ntbf__vfio *v);
int ntbf__vfio_irq_set(struct ntbf__vfio *v, unsigned vector, int fd);
/* Reset the device (function level reset, or what VFIO can do for it). */
int ntbf__vfio_reset(const struct ntbf__vfio *v);
/* Disable MSI-X altogether (every vector's eventfd is dropped). */
int ntbf__vfio_irq_off(struct ntbf__vfio *v);

#endif
