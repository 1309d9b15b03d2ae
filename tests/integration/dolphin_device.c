/* tests/integration/dolphin_device.c: a device borrowed and used through the device API on the
 * Dolphin backend (dolphin.sh device): the accelerator's copy engine moves data between the
 * borrower's memory and device memory through SmartIO's mappings, checked byte for byte, then
 * the lender uses the device locally and finds the same data. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../backends/sim/accel.h"
#include "../../tools/accel_drv.h"
#include "ntbfab/device.h"
#include "ntbfab/error.h"

#define SZ (256 * 1024u)

static void die(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "dolphin_device: FAIL: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
        exit(1);
}

static uint8_t pattern(uint32_t seed, size_t i)
{
        uint32_t x = seed * 2654435761u ^ (uint32_t)i * 40503u;
        return (uint8_t)(x ^ x >> 13 ^ x >> 21);
}

static void check(const uint8_t *p, size_t n, uint32_t seed, const char *what)
{
        for (size_t i = 0; i < n; i++)
                if (p[i] != pattern(seed, i))
                        die("%s: byte %zu is %#x, expected %#x", what, i, p[i], pattern(seed, i));
}

struct use {
        struct ntbf_ctx *x;
        struct ntbf_dev *d;
        struct ntbf_dev_info info;
        struct accel_drv acc;
        uint8_t *mem, *devmem;
        uint64_t io, mem_addr;
};

/* Open fdid on node, map BAR0 and BAR2, get DMA memory mapped for the device. */
static void open_use(struct use *u, const char *dir, const char *node, uint32_t fdid)
{
        if (ntbf_ctx_open(dir, node, &u->x))
                die("%s: %s", node, ntbf_ctx_error(NULL));
        if (ntbf_dev_open(u->x, fdid, &u->d) || ntbf_dev_info(u->d, &u->info))
                die("%s: open 0x%04x: %s", node, fdid, ntbf_ctx_error(u->x));
        void *regs, *bar2;
        size_t len, len2;
        if (ntbf_dev_map_bar(u->d, 0, &regs, &len) || ntbf_dev_map_bar(u->d, 2, &bar2, &len2))
                die("%s: map a BAR: %s", node, ntbf_ctx_error(u->x));
        u->devmem = bar2;
        if (len2 < 2 * SZ)
                die("%s: BAR2 of %zu bytes, expected at least %u", node, len2, 2 * SZ);
        if (accel_open(&u->acc, regs))
                die("%s: BAR0 of 0x%04x is not an accelerator's (ID %#x)", node, fdid,
                    *(volatile uint32_t *)regs);
        u->mem_addr = accel_mem_addr(&u->acc);
        void *m;
        if (ntbf_dma_alloc(u->x, 2 * SZ, 4096, &m))
                die("%s: DMA memory: %s", node, ntbf_ctx_error(u->x));
        u->mem = m;
        if (ntbf_dev_dma_map(u->d, u->mem, 2 * SZ, &u->io))
                die("%s: DMA map: %s", node, ntbf_ctx_error(u->x));
        printf("%s: %s device 0x%04x, BAR0 at 0x%" PRIx64 ", device memory at 0x%" PRIx64
               "; the device reaches %s's memory at 0x%" PRIx64 "\n",
               node, u->info.local ? "local" : "borrowed", fdid, u->info.bars[0].addr, u->mem_addr,
               node, u->io);
}

static void copy(struct use *u, uint64_t src, uint64_t dst, const char *what)
{
        uint32_t reason = 0;
        int r = accel_copy(&u->acc, src, dst, SZ, 20000, &reason);
        if (r)
                die("%s: the copy engine failed: %s (reason %u)", what, ntbf_strerror(r), reason);
}

static void close_use(struct use *u)
{
        if (ntbf_dev_dma_unmap(u->d, u->io, 2 * SZ))
                die("DMA unmap: %s", ntbf_ctx_error(u->x));
        ntbf_dma_free(u->x, u->mem);
        ntbf_dev_close(u->d);
        ntbf_ctx_close(u->x);
}

int main(int argc, char **argv)
{
        if (argc != 4)
                die("usage: dolphin_device DIR FDID borrow|local");
        const char *dir = argv[1];
        uint32_t fdid = (uint32_t)strtoul(argv[2], NULL, 0);
        struct use u;
        memset(&u, 0, sizeof(u));
        if (!strcmp(argv[3], "borrow")) {
                open_use(&u, dir, "borrower", fdid);
                if (u.info.local)
                        die("0x%04x is not borrowed by the borrower", fdid);
                /* Borrower memory -> device memory, through SmartIO's mapping of it. */
                for (size_t i = 0; i < SZ; i++)
                        u.mem[i] = pattern(1, i);
                memset(u.mem + SZ, 0, SZ);
                copy(&u, u.io, u.mem_addr, "borrower memory -> device memory");
                check(u.devmem, SZ, 1, "device memory read through the borrower's BAR2 window");
                /* Device memory -> borrower memory: the device writes across the fabric. */
                copy(&u, u.mem_addr, u.io + SZ, "device memory -> borrower memory");
                check(u.mem + SZ, SZ, 1, "borrower memory written by the device");
                /* Stores through the window land in device memory: the engine copies them. */
                for (size_t i = 0; i < SZ; i++)
                        u.devmem[SZ + i] = pattern(2, i);
                copy(&u, u.mem_addr + SZ, u.io, "device memory (CPU-written) -> borrower memory");
                check(u.mem, SZ, 2, "borrower memory after the copy of CPU-written device memory");
                /* What a managed fabric cannot give this way, said clearly. */
                uint32_t v;
                int r = ntbf_dev_cfg_read(u.d, 0, 4, &v);
                if (r != NTBF_EUNSUPPORTED ||
                    !strstr(ntbf_ctx_error(u.x), "the dolphin backend reaches no config space"))
                        die("config read of a borrowed device where sysfs shows none: expected "
                            "NTBF_EUNSUPPORTED saying why, got %s (%s)",
                            r ? ntbf_err_name(r) : "success", r ? ntbf_ctx_error(u.x) : "");
                printf("config read: %s\n", ntbf_ctx_error(u.x));
                uint64_t pio;
                r = ntbf_dev_map_peer(u.d, u.d, 2, &pio);
                if (r != NTBF_EUNSUPPORTED ||
                    !strstr(ntbf_ctx_error(u.x), "is a device of a managed fabric"))
                        die("map_peer on a managed fabric: expected NTBF_EUNSUPPORTED saying why, "
                            "got %d (%s)",
                            r, ntbf_ctx_error(u.x));
                printf("map_peer: %s\n", ntbf_ctx_error(u.x));
                close_use(&u);
                printf("borrower: %u bytes to and from device memory, verified\n", 2 * SZ);
                return 0;
        }
        /* The lender, after the borrower returned the device: local use, the same data. */
        open_use(&u, dir, "lender", fdid);
        if (!u.info.local)
                die("0x%04x is not local to the lender", fdid);
        check(u.devmem + SZ, SZ, 2, "device memory read locally by the lender");
        check(u.devmem, SZ, 1, "device memory read locally by the lender");
        copy(&u, u.mem_addr, u.io, "device memory -> lender memory");
        check(u.mem, SZ, 1, "lender memory written by the device");
        close_use(&u);
        printf("lender: the borrower's data found in device memory and copied locally, verified\n");
        return 0;
}
