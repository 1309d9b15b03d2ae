/* tests/shadow/shadowtest.c: the kernel tier's checks of a shadow device that busybox cannot
 * make (docs/kernel.md): the NTB window switched off and on, and whether the device's DMA
 * arrives while it is off; and the backends' host_map of a PCI BAR (backends/hostmem.c) on
 * this kernel's sysfs. Runs in the guest, statically linked. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "hostmem.h"
#include "ntbfab_lend.h"

#define BLK     4096
#define FILLER  0x5a
#define CMD_MEM 0x2 /* PCI_COMMAND_MEMORY */

/* Memory decoding of a PCI function on or off: with it off, its BARs are not in the address
 * space, so nothing reaches the RAM behind the window. */
static int window(const char *bdf, bool on)
{
        char path[256];
        snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/config", bdf);
        int fd = open(path, O_RDWR);
        uint16_t cmd;
        if (fd < 0 || pread(fd, &cmd, 2, 4) != 2) {
                fprintf(stderr, "shadowtest: %s: %s\n", path, strerror(errno));
                return -1;
        }
        cmd = on ? cmd | CMD_MEM : cmd & ~CMD_MEM;
        int r = pwrite(fd, &cmd, 2, 4) == 2 ? 0 : -1;
        close(fd);
        return r;
}

struct rd {
        int fd;
        off_t off;
        uint8_t *buf;
        ssize_t got;
        int err;
};

static void *reader(void *arg)
{
        struct rd *r = arg;
        r->got = pread(r->fd, r->buf, BLK, r->off);
        r->err = r->got < 0 ? errno : 0;
        return NULL;
}

static size_t count_not(const uint8_t *b, uint8_t v)
{
        size_t n = 0;
        for (size_t i = 0; i < BLK; i++)
                n += b[i] != v;
        return n;
}

/*
 * The negative test. A block with a known pattern is written and read back (the window on:
 * it arrives). Then a read into a buffer of filler bytes is started with the window off:
 * after a second the buffer still holds the filler (the device's DMA went to the window,
 * which leads nowhere now). The window comes back; the driver's timeout resets the
 * controller and the read is done again, and the pattern arrives.
 */
static int dmacheck(const char *dev, const char *win, off_t off)
{
        int fd = open(dev, O_RDWR | O_DIRECT);
        uint8_t *pat, *buf;
        if (fd < 0 || posix_memalign((void **)&pat, BLK, BLK) ||
            posix_memalign((void **)&buf, BLK, BLK)) {
                printf("RESULT dma-through-window FAIL cannot open %s: %s\n", dev, strerror(errno));
                return 1;
        }
        for (size_t i = 0; i < BLK; i++)
                pat[i] = (uint8_t)(i * 7 + 3) == FILLER ? 0x11 : (uint8_t)(i * 7 + 3);
        memset(buf, FILLER, BLK);
        if (pwrite(fd, pat, BLK, off) != BLK || pread(fd, buf, BLK, off) != BLK ||
            memcmp(buf, pat, BLK)) {
                printf("RESULT dma-through-window FAIL the block did not read back with the "
                       "window on: %s\n",
                       strerror(errno));
                return 1;
        }
        memset(buf, FILLER, BLK);
        if (window(win, false)) {
                printf("RESULT dma-through-window FAIL cannot switch %s's memory decoding off\n",
                       win);
                return 1;
        }
        struct rd r = {fd, off, buf, 0, 0};
        pthread_t t;
        pthread_create(&t, NULL, reader, &r);
        sleep(1);
        size_t arrived = count_not(buf, FILLER);
        bool done_early = __atomic_load_n(&r.got, __ATOMIC_SEQ_CST) != 0;
        window(win, true);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        pthread_join(t, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double waited = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
        bool back = r.got == BLK && !memcmp(buf, pat, BLK);
        if (arrived == 0 && !done_early && back) {
                printf("RESULT dma-through-window ok with the window's decoding off, none of the "
                       "%d bytes the device read arrived within 1 s (the buffer kept its filler); "
                       "with it on again the driver's retry brought all of them after %.1f s\n",
                       BLK, waited);
                return 0;
        }
        printf("RESULT dma-through-window FAIL window off: %zu of %d bytes arrived, read done "
               "early: %d; window on: read returned %zd (%s), pattern %s\n",
               arrived, BLK, done_early, r.got, strerror(r.err), back ? "back" : "not back");
        return 1;
}

/* A pattern no two blocks share: 64-bit words of a keyed xorshift of (seed, offset). */
static uint64_t word(uint64_t seed, uint64_t off)
{
        uint64_t x = seed * 0x9e3779b97f4a7c15u ^ off;
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdu;
        x ^= x >> 33;
        return x;
}

/* Write size bytes of seed's pattern to path, or check that path holds them. */
static int pattern(const char *path, uint64_t seed, uint64_t size, bool check)
{
        static uint64_t buf[1 << 17]; /* 1 MiB */
        int fd = open(path, check ? O_RDONLY : O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) {
                fprintf(stderr, "shadowtest: %s: %s\n", path, strerror(errno));
                return 1;
        }
        uint64_t bad = 0;
        for (uint64_t off = 0; off < size; off += sizeof(buf)) {
                size_t n = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);
                if (check) {
                        if (read(fd, buf, n) != (ssize_t)n) {
                                fprintf(stderr, "shadowtest: %s: short read at %llu\n", path,
                                        (unsigned long long)off);
                                return 1;
                        }
                        for (size_t i = 0; i < n / 8; i++)
                                bad += buf[i] != word(seed, off + 8 * i);
                } else {
                        for (size_t i = 0; i < n / 8; i++)
                                buf[i] = word(seed, off + 8 * i);
                        if (write(fd, buf, n) != (ssize_t)n) {
                                fprintf(stderr, "shadowtest: %s: %s\n", path, strerror(errno));
                                return 1;
                        }
                }
        }
        if (check && read(fd, buf, 1) != 0)
                bad++; /* longer than it should be */
        close(fd);
        if (bad)
                fprintf(stderr, "shadowtest: %s: %llu words differ from seed %llu's pattern\n",
                        path, (unsigned long long)bad, (unsigned long long)seed);
        return bad ? 1 : 0;
}

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

/*
 * The figures of docs/kernel.md: 4 KiB reads at queue depth 1 from random places of the
 * first 64 MiB (latency: median and p99), then 128 KiB reads in order over 64 MiB
 * (throughput). O_DIRECT: every read is the device's DMA into this process's buffer.
 * Printed as FIGURE lines with the name's prefix.
 */
static int bench(const char *dev, const char *prefix, unsigned ios)
{
        int fd = open(dev, O_RDONLY | O_DIRECT);
        void *buf;
        const size_t span = 64 << 20, big = 128 << 10;
        if (fd < 0 || posix_memalign(&buf, BLK, big)) {
                fprintf(stderr, "shadowtest: %s: %s\n", dev, strerror(errno));
                return 1;
        }
        double *lat = calloc(ios, sizeof(double));
        uint64_t x = 88172645463325252u;
        for (unsigned i = 0; i < 50; i++) /* warm up */
                if (pread(fd, buf, BLK, (off_t)(i * BLK)) != BLK)
                        return 1;
        for (unsigned i = 0; i < ios; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                off_t off = (off_t)(x % (span / BLK)) * BLK;
                double t0 = now_s();
                if (pread(fd, buf, BLK, off) != BLK) {
                        fprintf(stderr, "shadowtest: read at %lld: %s\n", (long long)off,
                                strerror(errno));
                        return 1;
                }
                lat[i] = (now_s() - t0) * 1e6;
        }
        qsort(lat, ios, sizeof(double), cmp_double);
        printf("FIGURE %s_read4k_qd1_median_us %.1f us\n", prefix, lat[ios / 2]);
        printf("FIGURE %s_read4k_qd1_p99_us %.1f us\n", prefix, lat[ios * 99 / 100]);
        double t0 = now_s();
        for (size_t off = 0; off < span; off += big)
                if (pread(fd, buf, big, (off_t)off) != (ssize_t)big)
                        return 1;
        printf("FIGURE %s_read128k_mb_s %.1f MB/s\n", prefix, (double)span / (now_s() - t0) / 1e6);
        free(lat);
        close(fd);
        return 0;
}

/* One refusal of the uapi: the ioctl fails with want. */
static int refused(int fd, unsigned long cmd, void *arg, int want, const char *what)
{
        errno = 0;
        if (ioctl(fd, cmd, arg) == 0 || errno != want) {
                printf("RESULT uapi-refusals FAIL %s: errno %d (%s), wanted %d (%s)\n", what, errno,
                       strerror(errno), want, strerror(want));
                return 1;
        }
        return 0;
}

/*
 * The contract of /dev/ntbfab-lend (kernel/include/uapi/ntbfab_lend.h) from user space: the
 * version, and bad input refused with the errors the header promises, changing nothing.
 */
static int uapi(void)
{
        int fd = open("/dev/ntbfab-lend", O_RDWR | O_NONBLOCK),
            ro = open("/dev/ntbfab-lend", O_RDONLY);
        struct ntbfab_lend_version v = {0};
        if (fd < 0 || ro < 0 || ioctl(ro, NTBFAB_LEND_IOC_VERSION, &v) ||
            v.version != NTBFAB_LEND_VERSION || v.msg_size != sizeof(struct ntbfab_lend_msg) ||
            !(v.features & NTBFAB_LEND_FEAT_LOOPBACK)) {
                printf("RESULT uapi-refusals FAIL open or VERSION: %s (version %u, record %u, "
                       "features 0x%x)\n",
                       strerror(errno), v.version, v.msg_size, v.features);
                return 1;
        }
        static uint8_t cfg[NTBFAB_LEND_CFG_SIZE];
        struct ntbfab_lend_attach a = {.flags = NTBFAB_LEND_ATTACH_LOOPBACK,
                                       .export_id = 987654321,
                                       .config = (uint64_t)(uintptr_t)cfg,
                                       .config_size = sizeof(cfg),
                                       .dma_size = 1 << 20};
        struct ntbfab_lend_export e = {.group_fd = -1,
                                       .pci_rid = NTBFAB_LEND_RID(0xfe, 0),
                                       .iova_base = 1 << 30,
                                       .iova_size = 1 << 30};
        struct ntbfab_lend_detach dt = {.shadow_id = 12345};
        struct ntbfab_lend_cfg_set cs = {.shadow_id = 12345};
        struct ntbfab_lend_peer pe = {.shadow_id = 12345, .phys = 1 << 30, .size = 4096};
        struct ntbfab_lend_msg m;
        int bad = 0;
        bad += refused(ro, NTBFAB_LEND_IOC_ATTACH, &a, EPERM, "ATTACH on a read-only open");
        bad += refused(fd, NTBFAB_LEND_IOC_ATTACH, &a, ENOENT, "ATTACH of an unknown export");
        a.flags |= 0x80;
        bad += refused(fd, NTBFAB_LEND_IOC_ATTACH, &a, EINVAL, "ATTACH with an unknown flag");
        a.flags = NTBFAB_LEND_ATTACH_LOOPBACK;
        a.reserved[1] = 1;
        bad += refused(fd, NTBFAB_LEND_IOC_ATTACH, &a, EINVAL, "ATTACH with a reserved field set");
        a.reserved[1] = 0;
        a.config_size = 100;
        bad += refused(fd, NTBFAB_LEND_IOC_ATTACH, &a, EINVAL, "ATTACH of 100 config bytes");
        a.config_size = sizeof(cfg);
        a.dma_size = 1000;
        bad += refused(fd, NTBFAB_LEND_IOC_ATTACH, &a, EINVAL, "ATTACH of a DMA window of 1000 B");
        e.flags = 2;
        bad += refused(fd, NTBFAB_LEND_IOC_EXPORT, &e, EINVAL, "EXPORT with an unknown flag");
        e.flags = 0;
        bad += refused(fd, NTBFAB_LEND_IOC_EXPORT, &e, ENODEV, "EXPORT of no device");
        bad += refused(fd, NTBFAB_LEND_IOC_DETACH, &dt, ENOENT, "DETACH of an unknown shadow");
        dt.flags = 4;
        bad += refused(fd, NTBFAB_LEND_IOC_DETACH, &dt, EINVAL, "DETACH with an unknown flag");
        bad += refused(fd, NTBFAB_LEND_IOC_CFG_SET, &cs, ENOENT, "CFG_SET of an unknown shadow");
        bad += refused(fd, NTBFAB_LEND_IOC_PEER_ADD, &pe, ENOENT, "PEER_ADD of an unknown shadow");
        bad += refused(fd, NTBFAB_LEND_IOC_PEER_DEL, &pe, ENOENT, "PEER_DEL of an unknown shadow");
        bad += refused(fd, _IOW(NTBFAB_LEND_IOC_MAGIC, 0x3f, uint64_t), &m, ENOTTY,
                       "an unknown ioctl");
        errno = 0;
        if (read(fd, &m, sizeof(m) - 1) != -1 || errno != EINVAL) {
                printf("RESULT uapi-refusals FAIL a read smaller than a record: %s\n",
                       strerror(errno));
                bad++;
        } else if (read(fd, &m, sizeof(m)) != -1 || errno != EAGAIN) {
                printf("RESULT uapi-refusals FAIL a read with no record: %s\n", strerror(errno));
                bad++;
        }
        close(fd);
        close(ro);
        if (!bad)
                printf("RESULT uapi-refusals ok version %u; read-only opens may not attach "
                       "(EPERM); unknown flags, set reserved fields, bad sizes (EINVAL), "
                       "unknown exports and shadows (ENOENT), no device (ENODEV), unknown "
                       "ioctls (ENOTTY), short reads (EINVAL) and empty ones (EAGAIN) refused\n",
                       v.version);
        return bad ? 1 : 0;
}

/*
 * The BAR host_map of the hardware backends (ntbf__pci_bar_map: /sys/bus/pci/devices/ * /
 * resource, then resourceN) on real sysfs. BAR bar of bdf is memory the harness filled (a
 * file behind QEMU's ivshmem-plain): at each of the n offsets, the bytes read through the
 * mapping must be the next chunk of ref (what the harness wrote there), and /proc/self/maps
 * must give the mapping's BAR address (the kernel reports a resource file's offsets from
 * the BAR's bus address: host_bus relies on it). The complement of the first chunk is then
 * written through a mapping at the BAR's middle, for the harness to find in the file. A
 * range running past the BAR and one in no BAR are refused (-EFAULT).
 */
static int barmap(const char *bdf, int bar, const char *ref, char **offs, int n)
{
        char path[256], line[160], why[400] = "";
        unsigned long long lo = 0, hi = 0, fl = 0;
        snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource", bdf);
        FILE *f = fopen(path, "r");
        for (int i = 0; f && i <= bar && fgets(line, sizeof(line), f); i++)
                if (i == bar && sscanf(line, "%llx %llx %llx", &lo, &hi, &fl) != 3)
                        lo = hi = 0;
        if (f)
                fclose(f);
        static uint8_t want[1 << 16];
        int rf = open(ref, O_RDONLY);
        ssize_t got = rf < 0 ? -1 : read(rf, want, sizeof(want));
        if (rf >= 0)
                close(rf);
        if (!hi || got <= 0 || got % n) {
                printf("RESULT host-map-sysfs FAIL no BAR%d in %s or no reference in %s\n", bar,
                       path, ref);
                return 1;
        }
        uint64_t size = hi - lo + 1, len = (uint64_t)got / (unsigned)n;
        snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource%d", bdf, bar);
        int rfd = open(path, O_RDONLY);
        for (int i = 0; i < n && !why[0]; i++) {
                uint64_t off = strtoull(offs[i], NULL, 0), fo = 0;
                void *p = NULL;
                int r = ntbf__pci_bar_map("", lo + off, len, &p);
                if (r) {
                        snprintf(why, sizeof(why), "mapping 0x%llx+0x%" PRIx64 ": %s", lo + off,
                                 len, strerror(-r));
                } else if (memcmp(p, want + i * len, len)) {
                        snprintf(why, sizeof(why),
                                 "the %" PRIu64 " bytes at BAR offset 0x%" PRIx64 " differ from "
                                 "the file's",
                                 len, off);
                } else if (ntbf__maps_file_off(rfd, p, len, &fo) || fo != lo + off) {
                        snprintf(why, sizeof(why),
                                 "/proc/self/maps puts the mapping of 0x%llx at offset 0x%" PRIx64
                                 " of %s",
                                 lo + off, fo, path);
                }
                if (!r)
                        ntbf__pci_bar_unmap(p, len);
        }
        if (rfd >= 0)
                close(rfd);
        void *p = NULL;
        int r;
        if (!why[0] && !(r = ntbf__pci_bar_map("", lo + size / 2, len, &p))) {
                for (uint64_t i = 0; i < len; i++)
                        ((volatile uint8_t *)p)[i] = (uint8_t)~want[i];
                ntbf__pci_bar_unmap(p, len);
        } else if (!why[0]) {
                snprintf(why, sizeof(why), "mapping the BAR's middle: %s", strerror(-r));
        }
        if (!why[0] && (r = ntbf__pci_bar_map("", lo + size - 4096, 8192, &p)) != -EFAULT)
                snprintf(why, sizeof(why), "a range running past the BAR's end: %s",
                         r ? strerror(-r) : "mapped");
        if (!why[0] && (r = ntbf__pci_bar_map("", 0x100000, 4096, &p)) != -EFAULT)
                snprintf(why, sizeof(why), "RAM at 1 MiB (no BAR): %s",
                         r ? strerror(-r) : "mapped");
        if (why[0]) {
                printf("RESULT host-map-sysfs FAIL BAR%d of %s at 0x%llx: %s\n", bar, bdf, lo, why);
                return 1;
        }
        printf("RESULT host-map-sysfs ok BAR%d of %s (0x%llx, %" PRIu64 " MiB) through "
               "ntbf__pci_bar_map: %d ranges of %" PRIu64 " bytes read as the harness wrote them "
               "(/proc/self/maps: at their bus addresses), the middle written; past the end and "
               "RAM refused (EFAULT)\n",
               bar, bdf, lo, size >> 20, n, len);
        return 0;
}

/*
 * Write one byte of a device's config space N times through sysfs (the PCI core's path for
 * a driver's config write), values 1 to 250 in turn, as fast as it goes; print the last.
 */
static int cfgflood(const char *bdf, unsigned off, unsigned n)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "/sys/bus/pci/devices/%s/config", bdf);
        int fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd < 0) {
                fprintf(stderr, "shadowtest: %s: %s\n", p, strerror(errno));
                return 1;
        }
        uint8_t v = 0;
        for (unsigned i = 0; i < n; i++) {
                v = (uint8_t)(1 + i % 250);
                if (pwrite(fd, &v, 1, off) != 1) {
                        fprintf(stderr, "shadowtest: write %u of %s at 0x%x: %s\n", i, p, off,
                                strerror(errno));
                        close(fd);
                        return 1;
                }
        }
        close(fd);
        printf("%u\n", v);
        return 0;
}

int main(int argc, char **argv)
{
        if (argc == 2 && !strcmp(argv[1], "uapi"))
                return uapi();
        if (argc == 5 && !strcmp(argv[1], "bench"))
                return bench(argv[2], argv[3], (unsigned)strtoul(argv[4], NULL, 0));
        if (argc == 5 && (!strcmp(argv[1], "fill") || !strcmp(argv[1], "check")))
                return pattern(argv[2], strtoull(argv[3], NULL, 0), strtoull(argv[4], NULL, 0),
                               argv[1][0] == 'c');
        if (argc == 4 && !strcmp(argv[1], "window"))
                return window(argv[2], !strcmp(argv[3], "on")) ? 1 : 0;
        if (argc == 5 && !strcmp(argv[1], "dmacheck"))
                return dmacheck(argv[2], argv[3], (off_t)strtoll(argv[4], NULL, 0));
        if (argc == 5 && !strcmp(argv[1], "cfgflood"))
                return cfgflood(argv[2], (unsigned)strtoul(argv[3], NULL, 0),
                                (unsigned)strtoul(argv[4], NULL, 0));
        if (argc >= 6 && !strcmp(argv[1], "barmap"))
                return barmap(argv[2], atoi(argv[3]), argv[4], argv + 5, argc - 5);
        fprintf(stderr, "usage: shadowtest window BDF on|off\n"
                        "       shadowtest dmacheck BLOCKDEV WINDOW-BDF OFFSET\n"
                        "       shadowtest fill|check FILE SEED BYTES\n"
                        "       shadowtest bench BLOCKDEV PREFIX IOS\n"
                        "       shadowtest barmap BDF BAR REFFILE OFFSET...\n"
                        "       shadowtest cfgflood BDF OFFSET COUNT\n");
        return 2;
}
