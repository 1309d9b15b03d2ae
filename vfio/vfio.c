/* vfio/vfio.c: VFIO fds: container and device setup, BARs, config, DMA, MSI-X. */
#include <errno.h>
#include <fcntl.h>
#include <linux/vfio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ntbfab/error.h"
#include "say.h"
#include "hostvfio.h"

/* The sentence into why (ntbf__say), and the code to return. */
#define say(why, whylen, code, ...) (ntbf__say(why, whylen, __VA_ARGS__), (code))

static void init(struct ntbf__vfio *v)
{
        memset(v, 0, sizeof(*v));
        v->container = v->group = v->device = -1;
}

/* Region sizes and offsets, MSI-X count, and the container's IOVA ranges. */
static int probe(struct ntbf__vfio *v, char *why, size_t whylen)
{
        struct vfio_device_info di = {.argsz = sizeof(di)};
        if (ioctl(v->device, VFIO_DEVICE_GET_INFO, &di))
                return say(why, whylen, -errno, "VFIO_DEVICE_GET_INFO: %s", strerror(errno));
        if (!(di.flags & VFIO_DEVICE_FLAGS_PCI))
                return say(why, whylen, NTBF_EUNSUPPORTED, "the VFIO device is not a PCI device");
        for (uint32_t i = 0; i < NTBF__VFIO_REGIONS && i < di.num_regions; i++) {
                struct vfio_region_info ri = {.argsz = sizeof(ri), .index = i};
                if (ioctl(v->device, VFIO_DEVICE_GET_REGION_INFO, &ri))
                        continue; /* VGA on a device without it */
                v->regions[i] = (struct ntbf__vfio_region){ri.size, ri.offset, ri.flags};
        }
        struct vfio_irq_info ii = {.argsz = sizeof(ii), .index = VFIO_PCI_MSIX_IRQ_INDEX};
        if (di.num_irqs > VFIO_PCI_MSIX_IRQ_INDEX &&
            !ioctl(v->device, VFIO_DEVICE_GET_IRQ_INFO, &ii))
                v->msix_count = ii.count;
        /* The IOVA ranges the IOMMU accepts (reserved ranges, such as the MSI doorbell
         * window, are holes between them). */
        size_t len = 4096;
        struct vfio_iommu_type1_info *info = calloc(1, len);
        if (!info)
                return -ENOMEM;
        info->argsz = (uint32_t)len;
        if (ioctl(v->container, VFIO_IOMMU_GET_INFO, info)) {
                int e = errno;
                free(info);
                return say(why, whylen, -e, "VFIO_IOMMU_GET_INFO: %s", strerror(e));
        }
        uint32_t off = (info->flags & VFIO_IOMMU_INFO_CAPS) ? info->cap_offset : 0;
        for (unsigned guard = 0;
             off && off + sizeof(struct vfio_info_cap_header) <= len && guard < 32; guard++) {
                struct vfio_info_cap_header *h = (void *)((char *)info + off);
                if (h->id == VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE) {
                        struct vfio_iommu_type1_info_cap_iova_range *r = (void *)h;
                        for (uint32_t k = 0; k < r->nr_iovas && v->niova < NTBF__VFIO_MAX_RANGES;
                             k++)
                                v->iova[v->niova++] = (struct ntbf__vfio_range){
                                    r->iova_ranges[k].start, r->iova_ranges[k].end};
                } else if (h->id == VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL) {
                        v->dma_avail = ((struct vfio_iommu_type1_info_dma_avail *)h)->avail;
                }
                off = h->next;
        }
        free(info);
        if (!v->niova) /* an old kernel: assume what every IOMMU accepts */
                v->iova[v->niova++] = (struct ntbf__vfio_range){0, (UINT64_C(1) << 39) - 1};
        return 0;
}

int ntbf__vfio_open(const char *root, int group, const char *bdf, struct ntbf__vfio *v, char *why,
                    size_t whylen)
{
        init(v);
        char p[512];
        snprintf(p, sizeof(p), "%s/dev/vfio/vfio", root);
        int r;
        v->container = open(p, O_RDWR | O_CLOEXEC);
        if (v->container < 0) {
                r = say(why, whylen, -errno, "cannot open %s: %s; is vfio loaded?", p,
                        strerror(errno));
                goto fail;
        }
        if (ioctl(v->container, VFIO_GET_API_VERSION) != VFIO_API_VERSION ||
            ioctl(v->container, VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU) <= 0) {
                r = say(why, whylen, NTBF_EUNSUPPORTED,
                        "VFIO type1 IOMMU (v2) is unavailable: load vfio_iommu_type1 (modprobe "
                        "vfio_iommu_type1) and check that the IOMMU is on (intel_iommu=on)");
                goto fail;
        }
        snprintf(p, sizeof(p), "%s/dev/vfio/%d", root, group);
        v->group = open(p, O_RDWR | O_CLOEXEC);
        if (v->group < 0) {
                int e = errno;
                r = say(why, whylen, -e,
                        e == EBUSY ? "cannot open %s: %s; another process (a VM, or another "
                                     "ntbfabd) holds the group"
                                   : "cannot open %s: %s",
                        p, strerror(e));
                goto fail;
        }
        struct vfio_group_status st = {.argsz = sizeof(st)};
        if (ioctl(v->group, VFIO_GROUP_GET_STATUS, &st)) {
                r = say(why, whylen, -errno, "VFIO_GROUP_GET_STATUS: %s", strerror(errno));
                goto fail;
        }
        if (!(st.flags & VFIO_GROUP_FLAGS_VIABLE)) {
                r = say(why, whylen, NTBF_EBUSY,
                        "IOMMU group %d is not viable: a device in it is bound to a kernel "
                        "driver (see /sys/kernel/iommu_groups/%d/devices)",
                        group, group);
                goto fail;
        }
        if (ioctl(v->group, VFIO_GROUP_SET_CONTAINER, &v->container) ||
            ioctl(v->container, VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU)) {
                r = say(why, whylen, -errno, "cannot give IOMMU group %d a container: %s", group,
                        strerror(errno));
                goto fail;
        }
        v->device = ioctl(v->group, VFIO_GROUP_GET_DEVICE_FD, bdf);
        if (v->device < 0) {
                r = say(why, whylen, -errno, "VFIO_GROUP_GET_DEVICE_FD %s: %s", bdf,
                        strerror(errno));
                goto fail;
        }
        r = probe(v, why, whylen);
        if (r)
                goto fail;
        return 0;
fail:
        ntbf__vfio_close(v);
        return r;
}

int ntbf__vfio_adopt(int container, int device, struct ntbf__vfio *v, char *why, size_t whylen)
{
        init(v);
        v->container = container;
        v->device = device;
        int r = probe(v, why, whylen);
        if (r)
                ntbf__vfio_close(v);
        return r;
}

void ntbf__vfio_close(struct ntbf__vfio *v)
{
        if (v->device >= 0)
                close(v->device);
        if (v->group >= 0)
                close(v->group);
        if (v->container >= 0)
                close(v->container);
        init(v);
}

/* ---- config space and BARs ------------------------------------------------------------------- */

static int cfg_check(const struct ntbf__vfio *v, uint32_t off, unsigned size)
{
        if ((size != 1 && size != 2 && size != 4) || off % size ||
            off + size > v->regions[NTBF__VFIO_CONFIG].size)
                return -EINVAL;
        return 0;
}

int ntbf__vfio_cfg_read(const struct ntbf__vfio *v, uint32_t off, unsigned size, uint32_t *val)
{
        int r = cfg_check(v, off, size);
        if (r)
                return r;
        uint8_t b[4] = {0};
        ssize_t n = pread(v->device, b, size, (off_t)(v->regions[NTBF__VFIO_CONFIG].offset + off));
        if (n != (ssize_t)size)
                return n < 0 ? -errno : -EIO;
        *val = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        return 0;
}

int ntbf__vfio_cfg_write(const struct ntbf__vfio *v, uint32_t off, unsigned size, uint32_t val)
{
        int r = cfg_check(v, off, size);
        if (r)
                return r;
        uint8_t b[4] = {(uint8_t)val, (uint8_t)(val >> 8), (uint8_t)(val >> 16),
                        (uint8_t)(val >> 24)};
        ssize_t n = pwrite(v->device, b, size, (off_t)(v->regions[NTBF__VFIO_CONFIG].offset + off));
        if (n != (ssize_t)size)
                return n < 0 ? -errno : -EIO;
        return 0;
}

int ntbf__vfio_map_bar(const struct ntbf__vfio *v, unsigned bar, void **ptr)
{
        if (bar >= 6 || !v->regions[bar].size)
                return -ENOENT;
        if (!(v->regions[bar].flags & VFIO_REGION_INFO_FLAG_MMAP))
                return NTBF_EUNSUPPORTED; /* an I/O port BAR, or mmap refused */
        void *p = mmap(NULL, v->regions[bar].size, PROT_READ | PROT_WRITE, MAP_SHARED, v->device,
                       (off_t)v->regions[bar].offset);
        if (p == MAP_FAILED)
                return -errno;
        *ptr = p;
        return 0;
}

void ntbf__vfio_unmap_bar(const struct ntbf__vfio *v, unsigned bar, void *ptr)
{
        if (bar < 6 && ptr)
                munmap(ptr, v->regions[bar].size);
}

/* ---- the IOMMU ------------------------------------------------------------------------------- */

int ntbf__vfio_dma_map(const struct ntbf__vfio *v, uint64_t iova, const void *vaddr, uint64_t len)
{
        struct vfio_iommu_type1_dma_map m = {
            .argsz = sizeof(m),
            .flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
            .vaddr = (uint64_t)(uintptr_t)vaddr,
            .iova = iova,
            .size = len,
        };
        return ioctl(v->container, VFIO_IOMMU_MAP_DMA, &m) ? -errno : 0;
}

int ntbf__vfio_dma_unmap(const struct ntbf__vfio *v, uint64_t iova, uint64_t len,
                         uint64_t *unmapped)
{
        struct vfio_iommu_type1_dma_unmap u = {.argsz = sizeof(u), .iova = iova, .size = len};
        int r = ioctl(v->container, VFIO_IOMMU_UNMAP_DMA, &u) ? -errno : 0;
        if (unmapped)
                *unmapped = r ? 0 : u.size;
        return r;
}

/* ---- MSI-X -------------------------------------------------------------------------------- */

static int set_irqs(const struct ntbf__vfio *v, uint32_t flags, uint32_t start, uint32_t count,
                    const int *fds)
{
        size_t len = sizeof(struct vfio_irq_set) + (size_t)count * sizeof(int);
        struct vfio_irq_set *s = calloc(1, len);
        if (!s)
                return -ENOMEM;
        s->argsz = (uint32_t)len;
        s->flags = flags | VFIO_IRQ_SET_ACTION_TRIGGER;
        s->index = VFIO_PCI_MSIX_IRQ_INDEX;
        s->start = start;
        s->count = count;
        if (count && fds)
                memcpy(s->data, fds, (size_t)count * sizeof(int));
        int r = ioctl(v->device, VFIO_DEVICE_SET_IRQS, s) ? -errno : 0;
        free(s);
        return r;
}

int ntbf__vfio_irq_enable(struct ntbf__vfio *v)
{
        if (!v->msix_count)
                return NTBF_EUNSUPPORTED;
        /* Every vector at once, none with an eventfd yet (-1). */
        int *fds = malloc(v->msix_count * sizeof(int));
        if (!fds)
                return -ENOMEM;
        for (uint32_t i = 0; i < v->msix_count; i++)
                fds[i] = -1;
        int r = set_irqs(v, VFIO_IRQ_SET_DATA_EVENTFD, 0, v->msix_count, fds);
        free(fds);
        if (!r)
                v->msix_on = true;
        return r;
}

int ntbf__vfio_irq_set(struct ntbf__vfio *v, unsigned vector, int fd)
{
        if (vector >= v->msix_count)
                return -EINVAL;
        if (!v->msix_on) {
                int r = ntbf__vfio_irq_enable(v);
                if (r)
                        return r;
        }
        return set_irqs(v, VFIO_IRQ_SET_DATA_EVENTFD, vector, 1, &fd);
}

int ntbf__vfio_irq_off(struct ntbf__vfio *v)
{
        v->msix_on = false;
        return set_irqs(v, VFIO_IRQ_SET_DATA_NONE, 0, 0, NULL);
}

int ntbf__vfio_reset(const struct ntbf__vfio *v)
{
        return ioctl(v->device, VFIO_DEVICE_RESET) ? -errno : 0;
}
