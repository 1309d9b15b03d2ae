/* backends/switchtec/find.c: the switch of an NT function, found in sysfs (docs/switchtec.md,
 * "Where the switch is"). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "switchtec.h"

#define CLASS_DIR "/sys/class/switchtec"

struct pci_addr {
        unsigned dom, bus, dev, fn;
};

/* DDDD:BB:DD.F, as sysfs names PCI functions and the loader stores an adapter's bdf. */
static bool parse_bdf(const char *s, struct pci_addr *a)
{
        char end;
        return sscanf(s, "%x:%x:%x.%x%c", &a->dom, &a->bus, &a->dev, &a->fn, &end) == 4 &&
               a->bus < 256 && a->dev < 32 && a->fn < 8;
}

/* The PCI function a class device is: the last component of its `device` link. */
static bool class_function(const char *root, const char *name, char *bdf, size_t len)
{
        char p[PATH_MAX], target[PATH_MAX];
        snprintf(p, sizeof(p), "%s%s/%s/device", root, CLASS_DIR, name);
        ssize_t n = readlink(p, target, sizeof(target) - 1);
        if (n <= 0)
                return false;
        target[n] = 0;
        const char *slash = strrchr(target, '/');
        snprintf(bdf, len, "%.31s", slash ? slash + 1 : target);
        return true;
}

/* The class device's `partition` attribute (the management endpoint's own partition), or -1. */
static int class_partition(const char *root, const char *name)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s%s/%s/partition", root, CLASS_DIR, name);
        FILE *f = fopen(p, "re");
        if (!f)
                return -1;
        int v = -1;
        if (fscanf(f, "%d", &v) != 1 || v < 0 || v > 47)
                v = -1;
        fclose(f);
        return v;
}

/*
 * A management endpoint owns the NT function when it is that function (Linux's
 * ntb_hw_switchtec drives the NTB through the management endpoint itself, whose class code
 * then says NTB), or failing that, when it is another function of the same device of the
 * switch's upstream port (same domain, bus and device number). The first kind wins; two of
 * the winning kind are ambiguous.
 */
int stx_find_switch(const char *root, const char *ntb_bdf, struct stx_found *out, char *why,
                    size_t whylen)
{
        memset(out, 0, sizeof(*out));
        out->partition = -1;
        if (!root)
                root = "";
        struct pci_addr nt;
        if (!ntb_bdf || !parse_bdf(ntb_bdf, &nt)) {
                bool none = !ntb_bdf || !*ntb_bdf;
                snprintf(why, whylen,
                         "the switch is found from the NT function's PCI address (the "
                         "adapter's bdf), and %s%s%s: give the adapter its bdf as "
                         "DDDD:BB:DD.F, or the switch's register space in switchtec: {gas: ...}",
                         none ? "the adapter has none" : "'", none ? "" : ntb_bdf,
                         none ? "" : "' is not one");
                return -EINVAL;
        }
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s%s", root, CLASS_DIR);
        DIR *d = opendir(dir);
        if (!d) {
                snprintf(why, whylen,
                         "cannot list %s to find the switch of NT function %s: %s (is the "
                         "switchtec driver loaded?); load it, or give the switch's register "
                         "space in switchtec: {gas: ...}",
                         CLASS_DIR, ntb_bdf, strerror(errno));
                return -ENOENT;
        }
        char seen[400] = "", best[2][64] = {"", ""}, fn[32];
        size_t o = 0;
        unsigned n = 0, hits[2] = {0, 0}; /* [0]: the function itself; [1]: same device */
        struct dirent *e;
        while ((e = readdir(d))) {
                if (strncmp(e->d_name, "switchtec", 9))
                        continue;
                if (!class_function(root, e->d_name, fn, sizeof(fn)))
                        snprintf(fn, sizeof(fn), "?");
                n++;
                if (o < sizeof(seen))
                        o += (size_t)snprintf(seen + o, sizeof(seen) - o, "%s%s (%s)",
                                              o ? ", " : "", e->d_name, fn);
                struct pci_addr m;
                if (!parse_bdf(fn, &m) || m.dom != nt.dom || m.bus != nt.bus || m.dev != nt.dev)
                        continue;
                int k = m.fn == nt.fn ? 0 : 1;
                if (!hits[k]++)
                        snprintf(best[k], sizeof(best[k]), "%.40s", e->d_name);
        }
        closedir(d);
        int k = hits[0] ? 0 : 1;
        if (!hits[k]) {
                snprintf(why, whylen,
                         "no Switchtec management function is NT function %s or another "
                         "function of its device: %s has %s%s; check the adapter's bdf, or give "
                         "the switch's register space in switchtec: {gas: ...}",
                         ntb_bdf, CLASS_DIR, n ? "" : "no switchtecN", n ? seen : "");
                return -ENOENT;
        }
        if (hits[k] > 1) {
                snprintf(why, whylen,
                         "%u Switchtec management functions could own NT function %s (%s): "
                         "give the switch's register space in switchtec: {gas: ...}",
                         hits[k], ntb_bdf, seen);
                return -EEXIST;
        }
        snprintf(fn, sizeof(fn), "?");
        class_function(root, best[k], fn, sizeof(fn));
        snprintf(out->name, sizeof(out->name), "%s", best[k]);
        snprintf(out->function, sizeof(out->function), "%s", fn);
        snprintf(out->gas, sizeof(out->gas), "%s/sys/bus/pci/devices/%s/resource0", root, fn);
        snprintf(out->device, sizeof(out->device), "%s/dev/%s", root, best[k]);
        out->partition = class_partition(root, best[k]);
        return 0;
}
