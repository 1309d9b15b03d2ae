/* vfio/vfiosys.c: VFIO through sysfs: host checks, group viability, binding. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ntbfab/error.h"
#include "say.h"
#include "hostvfio.h"

#define SYSPCI "/sys/bus/pci"

/* The sentence into why (ntbf__say), and the code to return. */
#define say(why, whylen, code, ...) (ntbf__say(why, whylen, __VA_ARGS__), (code))

static void path(const struct ntbf__vfio_sys *s, char *buf, size_t len, const char *fmt, ...)
    NTBF_PRINTF(4, 5);
static void path(const struct ntbf__vfio_sys *s, char *buf, size_t len, const char *fmt, ...)
{
        int n = snprintf(buf, len, "%s", s->root);
        va_list ap;
        va_start(ap, fmt);
        if (n >= 0 && (size_t)n < len)
                vsnprintf(buf + n, len - (size_t)n, fmt, ap);
        va_end(ap);
}

static bool exists(const char *p)
{
        struct stat st;
        return stat(p, &st) == 0;
}

/* The last component of the symlink at p ("" if p is not a link). */
static int link_name(const char *p, char *out, size_t len)
{
        char target[PATH_MAX];
        ssize_t n = readlink(p, target, sizeof(target) - 1);
        if (n < 0) {
                if (len)
                        out[0] = 0;
                return -errno;
        }
        target[n] = 0;
        const char *slash = strrchr(target, '/');
        snprintf(out, len, "%s", slash ? slash + 1 : target);
        return 0;
}

/* Write value to a sysfs file, as `echo value > file` does; then let a fake kernel react. */
static int sys_write(const struct ntbf__vfio_sys *s, const char *p, const char *value)
{
        /* O_TRUNC as a shell's redirection: sysfs ignores it, a plain file (tests) needs it. */
        int fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t n = strlen(value);
        ssize_t w = write(fd, value, n);
        int e = w < 0 ? -errno : (size_t)w == n ? 0 : -EIO;
        close(fd);
        if (!e && s->kernel)
                s->kernel(s->arg, p, value);
        return e;
}

static int read_text(const char *p, char *buf, size_t len)
{
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t got = read(fd, buf, len - 1);
        int e = got < 0 ? -errno : 0;
        close(fd);
        if (e)
                return e;
        size_t n = (size_t)got < len ? (size_t)got : len - 1;
        buf[n] = 0;
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
                buf[--n] = 0;
        return 0;
}

bool ntbf__vfio_driver_harmless(const char *driver)
{
        /* Drivers that leave DMA to whoever owns the group (driver_managed_dma in Linux). */
        static const char *const ok[] = {"", "vfio-pci", "pci-stub", "pcieport"};
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
                if (!strcmp(driver, ok[i]))
                        return true;
        return false;
}

/* ---- host checks ------------------------------------------------------------------------------
 */

int ntbf__vfio_sys_check(const struct ntbf__vfio_sys *s, char *why, size_t whylen)
{
        char p[PATH_MAX];
        path(s, p, sizeof(p), "/sys/kernel/iommu_groups");
        DIR *dir = opendir(p);
        unsigned groups = 0;
        for (struct dirent *e; dir && (e = readdir(dir));)
                groups += e->d_name[0] != '.';
        if (dir)
                closedir(dir);
        if (!groups)
                return say(why, whylen, NTBF_EUNSUPPORTED,
                           "no IOMMU: %s has no groups, so no device can be isolated for VFIO; "
                           "enable VT-d (or AMD-Vi) in the firmware and boot with intel_iommu=on "
                           "(or amd_iommu=on)",
                           p);
        /* Built in or loaded, each of these has a directory under /sys/module. */
        static const char *const mods[] = {"vfio", "vfio_iommu_type1", "vfio_pci"};
        char missing[128] = "";
        unsigned nmissing = 0;
        for (size_t i = 0; i < sizeof(mods) / sizeof(mods[0]); i++) {
                path(s, p, sizeof(p), "/sys/module/%s", mods[i]);
                if (exists(p))
                        continue;
                size_t at = strlen(missing);
                snprintf(missing + at, sizeof(missing) - at, "%s%s", nmissing ? ", " : "", mods[i]);
                nmissing++;
        }
        if (nmissing)
                return say(why, whylen, NTBF_EUNSUPPORTED,
                           "the vfio module%s %s %s not loaded; run 'modprobe vfio-pci' (it loads "
                           "vfio and vfio_iommu_type1 too)",
                           nmissing > 1 ? "s" : "", missing, nmissing > 1 ? "are" : "is");
        path(s, p, sizeof(p), SYSPCI "/drivers/vfio-pci");
        if (!exists(p))
                return say(why, whylen, NTBF_EUNSUPPORTED,
                           "the vfio_pci module is loaded but registers no driver (%s is "
                           "missing); reload it with 'modprobe -r vfio-pci; modprobe vfio-pci'",
                           p);
        path(s, p, sizeof(p), "/dev/vfio/vfio");
        if (!exists(p))
                return say(why, whylen, NTBF_EUNSUPPORTED,
                           "%s is missing although vfio is loaded; is devtmpfs mounted on /dev?",
                           p);
        return 0;
}

/* ---- a device and its group ---------------------------------------------------------------------
 */

static int device_dir(const struct ntbf__vfio_sys *s, const char *bdf, char *p, size_t len,
                      char *why, size_t whylen)
{
        path(s, p, len, SYSPCI "/devices/%s", bdf);
        if (!exists(p))
                return say(why, whylen, NTBF_ENOTFOUND,
                           "no PCI device %s on this host (%s is missing); check the address "
                           "with lspci -D",
                           bdf, p);
        return 0;
}

int ntbf__vfio_sys_group(const struct ntbf__vfio_sys *s, const char *bdf, int *group, char *why,
                         size_t whylen)
{
        char p[PATH_MAX], name[64];
        int r = device_dir(s, bdf, p, sizeof(p), why, whylen);
        if (r)
                return r;
        size_t n = strlen(p);
        snprintf(p + n, sizeof(p) - n, "/iommu_group");
        char *end;
        if (link_name(p, name, sizeof(name)) || !name[0])
                return say(why, whylen, NTBF_EUNSUPPORTED,
                           "%s is in no IOMMU group (%s is missing): the IOMMU is off or does not "
                           "cover it; boot with intel_iommu=on (or amd_iommu=on)",
                           bdf, p);
        long g = strtol(name, &end, 10);
        if (*end || g < 0 || g > INT32_MAX)
                return say(why, whylen, NTBF_EPROTO, "%s links to a group named '%s'", p, name);
        *group = (int)g;
        return 0;
}

int ntbf__vfio_sys_driver(const struct ntbf__vfio_sys *s, const char *bdf, char *drv, size_t drvlen)
{
        char p[PATH_MAX];
        path(s, p, sizeof(p), SYSPCI "/devices/%s/driver", bdf);
        int r = link_name(p, drv, drvlen);
        return r == -ENOENT ? 0 : r;
}

int ntbf__vfio_sys_viable(const struct ntbf__vfio_sys *s, const char *bdf, int group, char *why,
                          size_t whylen)
{
        char p[PATH_MAX];
        path(s, p, sizeof(p), "/sys/kernel/iommu_groups/%d/devices", group);
        DIR *dir = opendir(p);
        if (!dir)
                return say(why, whylen, NTBF_EUNSUPPORTED, "cannot list IOMMU group %d (%s): %s",
                           group, p, strerror(errno));
        char others[512] = "", how[512] = "";
        unsigned bad = 0;
        for (struct dirent *e; (e = readdir(dir));) {
                if (e->d_name[0] == '.' || !strcmp(e->d_name, bdf))
                        continue;
                char drv[64];
                ntbf__vfio_sys_driver(s, e->d_name, drv, sizeof(drv));
                if (ntbf__vfio_driver_harmless(drv))
                        continue;
                size_t at = strlen(others);
                snprintf(others + at, sizeof(others) - at, "%s%s (bound to %s)", bad ? ", " : "",
                         e->d_name, drv);
                if (!bad)
                        snprintf(how, sizeof(how), "echo %s > /sys/bus/pci/drivers/%s/unbind",
                                 e->d_name, drv);
                bad++;
        }
        closedir(dir);
        if (bad)
                return say(why, whylen, NTBF_EBUSY,
                           "IOMMU group %d of %s is not viable: it also holds %s; the IOMMU "
                           "isolates a group as a whole, so unbind %s or bind %s to vfio-pci "
                           "(%s), or move %s to a slot with a group of its own",
                           group, bdf, others, bad > 1 ? "them" : "it", bad > 1 ? "them" : "it",
                           how, bdf);
        return 0;
}

int ntbf__vfio_sys_ids(const struct ntbf__vfio_sys *s, const char *bdf, uint16_t *vendor,
                       uint16_t *device, uint32_t *class_code)
{
        static const char *const files[] = {"vendor", "device", "class"};
        uint64_t v[3];
        for (int i = 0; i < 3; i++) {
                char p[PATH_MAX], text[64], *end;
                path(s, p, sizeof(p), SYSPCI "/devices/%s/%s", bdf, files[i]);
                int r = read_text(p, text, sizeof(text));
                if (r)
                        return r;
                v[i] = strtoull(text, &end, 16);
                if (end == text)
                        return NTBF_EPROTO;
        }
        *vendor = (uint16_t)v[0];
        *device = (uint16_t)v[1];
        *class_code = (uint32_t)v[2] & 0xffffff;
        return 0;
}

int ntbf__vfio_sys_bars(const struct ntbf__vfio_sys *s, const char *bdf, uint64_t addr[6],
                        uint64_t size[6])
{
        char p[PATH_MAX];
        path(s, p, sizeof(p), SYSPCI "/devices/%s/resource", bdf);
        FILE *f = fopen(p, "re");
        if (!f)
                return -errno;
        for (int b = 0; b < 6; b++)
                addr[b] = size[b] = 0;
        for (int b = 0; b < 6; b++) {
                uint64_t start = 0, end = 0, flags = 0;
                if (fscanf(f, "%" SCNx64 " %" SCNx64 " %" SCNx64, &start, &end, &flags) != 3)
                        break;
                if (end > start && (flags & 0x200)) { /* IORESOURCE_MEM: I/O BARs are not lent */
                        addr[b] = start;
                        size[b] = end - start + 1;
                }
        }
        fclose(f);
        return 0;
}

/* ---- binding ------------------------------------------------------------------------------------
 */

static int check_bound(const struct ntbf__vfio_sys *s, const char *bdf, char *why, size_t whylen)
{
        char drv[64];
        ntbf__vfio_sys_driver(s, bdf, drv, sizeof(drv));
        if (!strcmp(drv, "vfio-pci"))
                return 0;
        return say(why, whylen, -EIO,
                   "%s did not bind to vfio-pci (its driver is %s%s%s): the kernel log (dmesg) "
                   "says why",
                   bdf, drv[0] ? "'" : "", drv[0] ? drv : "none", drv[0] ? "'" : "");
}

int ntbf__vfio_sys_bind(const struct ntbf__vfio_sys *s, const char *bdf, bool force,
                        struct ntbf__vfio_prev *prev, char *why, size_t whylen)
{
        memset(prev, 0, sizeof(*prev));
        int r = ntbf__vfio_sys_check(s, why, whylen);
        int group = -1;
        if (!r)
                r = ntbf__vfio_sys_group(s, bdf, &group, why, whylen);
        if (!r)
                r = ntbf__vfio_sys_viable(s, bdf, group, why, whylen);
        if (r)
                return r;
        char drv[64], p[PATH_MAX];
        r = ntbf__vfio_sys_driver(s, bdf, drv, sizeof(drv));
        if (r)
                return say(why, whylen, r, "cannot read the driver of %s: %s", bdf,
                           ntbf_strerror(r));
        if (!strcmp(drv, "vfio-pci"))
                return 0; /* bound already (by an operator, or a previous run): leave it so */
        if (drv[0]) {
                if (!force)
                        return say(why, whylen, NTBF_EBUSY,
                                   "%s is in use by the kernel driver '%s'; unbind it first (echo "
                                   "%s > /sys/bus/pci/drivers/%s/unbind) or lend it with --force, "
                                   "which unbinds '%s' now and binds it again when the device is "
                                   "released",
                                   bdf, drv, bdf, drv, drv);
                path(s, p, sizeof(p), SYSPCI "/drivers/%s/unbind", drv);
                r = sys_write(s, p, bdf);
                if (r)
                        return say(why, whylen, r, "cannot unbind %s from '%s' (%s): %s", bdf, drv,
                                   p, ntbf_strerror(r));
                snprintf(prev->driver, sizeof(prev->driver), "%s", drv);
        }
        prev->taken = true;
        path(s, p, sizeof(p), SYSPCI "/devices/%s/driver_override", bdf);
        r = sys_write(s, p, "vfio-pci");
        if (!r) {
                path(s, p, sizeof(p), SYSPCI "/drivers_probe");
                r = sys_write(s, p, bdf);
        }
        if (!r)
                r = check_bound(s, bdf, why, whylen);
        else
                ntbf__say(why, whylen, "cannot bind %s to vfio-pci (%s): %s", bdf, p,
                          ntbf_strerror(r));
        if (r) {
                char ignore[64];
                ntbf__vfio_sys_release(s, bdf, prev, ignore, sizeof(ignore));
                memset(prev, 0, sizeof(*prev));
        }
        return r;
}

int ntbf__vfio_sys_release(const struct ntbf__vfio_sys *s, const char *bdf,
                           const struct ntbf__vfio_prev *prev, char *why, size_t whylen)
{
        if (!prev->taken)
                return 0;
        char drv[64], p[PATH_MAX];
        ntbf__vfio_sys_driver(s, bdf, drv, sizeof(drv));
        int r = 0;
        if (!strcmp(drv, "vfio-pci")) {
                path(s, p, sizeof(p), SYSPCI "/drivers/vfio-pci/unbind");
                r = sys_write(s, p, bdf);
                if (r)
                        return say(why, whylen, r, "cannot unbind %s from vfio-pci: %s", bdf,
                                   ntbf_strerror(r));
        }
        /* An empty override lets the normal matching pick the driver again. */
        path(s, p, sizeof(p), SYSPCI "/devices/%s/driver_override", bdf);
        r = sys_write(s, p, "\n");
        if (r && r != -ENOENT)
                return say(why, whylen, r, "cannot clear driver_override of %s: %s", bdf,
                           ntbf_strerror(r));
        if (!prev->driver[0])
                return 0;
        path(s, p, sizeof(p), SYSPCI "/drivers/%s/bind", prev->driver);
        r = sys_write(s, p, bdf);
        if (r) {
                /* The driver may have gone (unloaded): let the kernel choose. */
                path(s, p, sizeof(p), SYSPCI "/drivers_probe");
                sys_write(s, p, bdf);
        }
        ntbf__vfio_sys_driver(s, bdf, drv, sizeof(drv));
        if (strcmp(drv, prev->driver))
                return say(why, whylen, -EIO,
                           "%s was given back but did not bind to '%s' again (its driver is "
                           "%s); bind it by hand: echo %s > /sys/bus/pci/drivers/%s/bind",
                           bdf, prev->driver, drv[0] ? drv : "none", bdf, prev->driver);
        return 0;
}
