/* backends/hostmem.c: PCI BARs and config space through sysfs, and the file offsets of
 * mappings (hostmem.h). */
#include "hostmem.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ntbfab/topology.h"

#define PAGE            UINT64_C(4096)
#define PCI_BARS        6               /* resource lines 0..5; line 6 is the expansion ROM */
#define IORESOURCE_MEM_ UINT64_C(0x200) /* the resource line's flag of a memory BAR */

/* The memory BARs of the device whose sysfs directory is dir, from its resource file: start
 * and size of each, 0 for an I/O BAR or none. -errno when the file cannot be read. */
static int read_bars(const char *dir, uint64_t addr[PCI_BARS], uint64_t size[PCI_BARS])
{
        char path[PATH_MAX + 512];
        snprintf(path, sizeof(path), "%s/resource", dir);
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        for (int i = 0; i < PCI_BARS; i++)
                addr[i] = size[i] = 0;
        uint64_t lo, hi, flags;
        for (int i = 0;
             i < PCI_BARS && fscanf(f, "%" SCNx64 " %" SCNx64 " %" SCNx64, &lo, &hi, &flags) == 3;
             i++)
                if ((flags & IORESOURCE_MEM_) && hi > lo) {
                        addr[i] = lo;
                        size[i] = hi - lo + 1;
                }
        fclose(f);
        return 0;
}

/* The BAR of device dir holding the range: its number and start, or -1. */
static int find_bar(const char *dir, uint64_t addr, uint64_t size, uint64_t *start)
{
        uint64_t lo[PCI_BARS], len[PCI_BARS];
        if (read_bars(dir, lo, len))
                return -1;
        for (int i = 0; i < PCI_BARS; i++)
                if (len[i] && addr >= lo[i] && addr - lo[i] < len[i] &&
                    size <= len[i] - (addr - lo[i])) {
                        *start = lo[i];
                        return i;
                }
        return -1;
}

int ntbf__pci_bar_map(const char *root, uint64_t addr, uint64_t size, void **out)
{
        if (!out || !size || addr + size < addr)
                return -EINVAL;
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/sys/bus/pci/devices", root ? root : "");
        DIR *d = opendir(dir);
        if (!d)
                return -EFAULT; /* no PCI devices: not a BAR */
        int r = -EFAULT;
        struct dirent *e;
        while (r == -EFAULT && (e = readdir(d))) {
                if (e->d_name[0] == '.')
                        continue;
                char dev[PATH_MAX + 256];
                uint64_t start = 0;
                snprintf(dev, sizeof(dev), "%s/%s", dir, e->d_name);
                int bar = find_bar(dev, addr, size, &start);
                if (bar < 0)
                        continue;
                char res[PATH_MAX + 512];
                snprintf(res, sizeof(res), "%s/resource%d", dev, bar);
                int fd = open(res, O_RDWR | O_CLOEXEC);
                if (fd < 0) {
                        r = -errno;
                        break;
                }
                uint64_t off = addr - start, pg = off & ~(PAGE - 1);
                uint64_t len = ((off + size + PAGE - 1) & ~(PAGE - 1)) - pg;
                void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)pg);
                r = p == MAP_FAILED ? -errno : 0;
                close(fd);
                if (!r)
                        *out = (uint8_t *)p + (off - pg);
        }
        closedir(d);
        return r;
}

int ntbf__pci_bar_unmap(void *addr, uint64_t size)
{
        if (!addr || !size)
                return -EINVAL;
        uintptr_t a = (uintptr_t)addr, pg = a & ~(uintptr_t)(PAGE - 1);
        return munmap((void *)pg, ((a + size + PAGE - 1) & ~(uintptr_t)(PAGE - 1)) - pg) ? -errno
                                                                                         : 0;
}

int ntbf__maps_file_off(int fd, const void *addr, uint64_t size, uint64_t *off)
{
        struct stat st;
        if (!addr || !size || !off || fstat(fd, &st))
                return -EFAULT;
        FILE *f = fopen("/proc/self/maps", "re");
        if (!f)
                return -EFAULT;
        char line[PATH_MAX + 256];
        uintptr_t a = (uintptr_t)addr;
        int r = -EFAULT;
        while (r && fgets(line, sizeof(line), f)) {
                uintptr_t lo, hi;
                uint64_t moff, ino;
                unsigned maj, min;
                if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %*s %" SCNx64 " %x:%x %" SCNu64, &lo,
                           &hi, &moff, &maj, &min, &ino) != 6)
                        continue;
                if (ino != st.st_ino || makedev(maj, min) != st.st_dev || a < lo || a >= hi ||
                    size > hi - a)
                        continue;
                *off = moff + (a - lo);
                r = 0;
        }
        fclose(f);
        return r;
}

/* The sysfs directory of function f of topology device `device` of this host (node), or
 * -ENODEV. */
static int func_dir(const char *dir, const struct ntbf_topo *t, uint32_t node, uint32_t device,
                    uint32_t f, char *out, size_t len)
{
        if (!dir || !t || device >= t->ndevices || f >= ntbf_device_nfuncs(&t->devices[device]))
                return -ENODEV;
        const struct ntbf_device *d = &t->devices[device];
        if (node != NTBF_NONE && d->node != node)
                return -ENODEV; /* another host's device: its daemon reaches it */
        uint32_t rid = ntbf_device_rid(d, f);
        snprintf(out, len, "%s/%04x:%02x:%02x.%x", dir, d->domain, rid >> 8, (rid >> 3) & 0x1f,
                 rid & 7);
        return 0;
}

int ntbf__pci_bars(const char *dir, const struct ntbf_topo *t, uint32_t node, uint32_t device,
                   uint32_t f, uint64_t addr[6], uint64_t size[6])
{
        char fdir[PATH_MAX];
        int r = func_dir(dir, t, node, device, f, fdir, sizeof(fdir));
        if (r || !addr || !size)
                return r ? r : -EINVAL;
        r = read_bars(fdir, addr, size);
        return r == -ENOENT ? -ENODEV : r;
}

int ntbf__pci_cfg(const char *dir, const struct ntbf_topo *t, uint32_t node, uint32_t device,
                  uint32_t f, bool write, uint32_t off, uint32_t size, uint32_t *val)
{
        char fdir[PATH_MAX - 16];
        if (!val || func_dir(dir, t, node, device, f, fdir, sizeof(fdir)))
                return -ENODEV;
        if ((size != 1 && size != 2 && size != 4) || off % size || off >= 4096)
                return -EINVAL;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/config", fdir);
        int fd = open(path, (write ? O_RDWR : O_RDONLY) | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? -ENODEV : -errno;
        uint32_t w = write ? *val : 0;
        uint8_t buf[4] = {(uint8_t)w, (uint8_t)(w >> 8), (uint8_t)(w >> 16), (uint8_t)(w >> 24)};
        ssize_t n = write ? pwrite(fd, buf, size, off) : pread(fd, buf, size, off);
        int r = n == (ssize_t)size ? 0 : n < 0 ? -errno : -EIO;
        close(fd);
        if (!r && !write)
                *val = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 |
                       (uint32_t)buf[3] << 24;
        return r;
}
