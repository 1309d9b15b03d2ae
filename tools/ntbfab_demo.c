/* tools/ntbfab_demo.c: ntbfab-demo, what `make run` shows: a borrowed accelerator used like a local
 * one. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accel_drv.h"
#include "ntbfab/device.h"
#include "ntbfab/rpc.h"
#include "ntbfab/error.h"
#include "ntbfab/units.h"

/*
 * The borrower drives the lender's accelerator through the accelerator's BAR0 mapped
 * through its NTB window, and the accelerator's copy engine moves data between the
 * borrower's memory (through the borrow's DMA window and the borrower's IOMMU) and its own
 * device memory, both ways. Then the device is returned and the lender does the same on
 * its local device. The data must match byte for byte. Both sides use the device API
 * (include/ntbfab/device.h) exactly as a driver does; nothing in this file knows whether
 * the device is local or borrowed.
 */

struct ctx {
        const char *dir, *borrower;
        uint32_t fdid;
        uint64_t size;
        int reps;
        bool json;
        struct json_object *out;
};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fputs("ntbfab-demo: error: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        exit(1);
}

static double now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

struct result {
        double to_ms, from_ms; /* best of the repetitions */
        uint32_t path_ns;      /* modeled one-way latency between this host and the device */
        uint64_t checksum;
};

/* Copy memory -> device memory -> memory again through the engine, best times, verified. */
static void transfers(struct ctx *c, struct accel_drv *a, uint8_t *mem, uint64_t dev_addr,
                      struct result *res)
{
        uint64_t n = c->size, dmem = accel_mem_addr(a);
        res->to_ms = res->from_ms = 1e9;
        for (uint64_t i = 0; i < n; i++)
                mem[i] = (uint8_t)(i * 131 + (i >> 12) + 7);
        for (int rep = 0; rep < c->reps; rep++) {
                memset(mem + n, 0, n);
                uint32_t reason = 0;
                double t0 = now_ms();
                if (accel_copy(a, dev_addr, dmem, (uint32_t)n, 10000, &reason))
                        die("the copy into device memory failed (reason %u)", reason);
                double t1 = now_ms();
                if (accel_copy(a, dmem, dev_addr + n, (uint32_t)n, 10000, &reason))
                        die("the copy out of device memory failed (reason %u)", reason);
                double t2 = now_ms();
                if (memcmp(mem, mem + n, n))
                        die("the data came back different: the DMA went somewhere else");
                res->to_ms = t1 - t0 < res->to_ms ? t1 - t0 : res->to_ms;
                res->from_ms = t2 - t1 < res->from_ms ? t2 - t1 : res->from_ms;
        }
        uint64_t h = 1469598103934665603ull;
        for (uint64_t i = 0; i < n; i++)
                h = (h ^ mem[n + i]) * 1099511628211ull;
        res->checksum = h;
}

static void report(struct ctx *c, const char *who, const char *how, const struct result *r)
{
        char sz[32];
        double mbs = (double)c->size / 1e3 / r->to_ms;
        if (c->json) {
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "path", json_object_new_string(how));
                json_object_object_add(o, "bytes", json_object_new_uint64(c->size));
                json_object_object_add(o, "to_device_ms", json_object_new_double(r->to_ms));
                json_object_object_add(o, "from_device_ms", json_object_new_double(r->from_ms));
                json_object_object_add(o, "modeled_latency_ns", json_object_new_uint64(r->path_ns));
                json_object_object_add(o, "verified", json_object_new_boolean(true));
                json_object_object_add(c->out, who, o);
                return;
        }
        printf("  %-9s %s\n", who, how);
        printf("            %s to device memory in %.3f ms (%.0f MB/s), back in %.3f ms; "
               "verified byte for byte\n",
               ntbf_size_fmt(c->size, sz, sizeof(sz)), r->to_ms, mbs, r->from_ms);
        printf("            modeled latency of the DMA path: %u ns one way (%u ns for a read's "
               "round trip)\n",
               r->path_ns, 2 * r->path_ns);
}

/*
 * Use the device fdid from node the way a driver does: open it, enable memory space and
 * bus mastering (intercepted for a borrowed device), map BAR0, get DMA memory and map it
 * for the device, then move the data. The same code serves a local and a borrowed device.
 */
static void use_device(struct ctx *c, const char *node, struct result *r,
                       struct ntbf_dev_info *info)
{
        struct ntbf_ctx *x;
        if (ntbf_ctx_open(c->dir, node, &x))
                die("%s: %s", node, ntbf_ctx_error(NULL));
        struct ntbf_dev *d;
        if (ntbf_dev_open(x, c->fdid, &d))
                die("%s: open 0x%04x: %s", node, c->fdid, ntbf_ctx_error(x));
        if (ntbf_dev_info(d, info))
                die("%s: %s", node, ntbf_ctx_error(x));
        uint32_t cmd;
        if (ntbf_dev_cfg_read(d, 4, 2, &cmd) || ntbf_dev_cfg_write(d, 4, 2, cmd | 0x6))
                die("%s: config space: %s", node, ntbf_ctx_error(x));
        void *regs, *mem;
        size_t len;
        uint64_t ioaddr;
        if (ntbf_dev_map_bar(d, 0, &regs, &len))
                die("%s: map BAR0: %s", node, ntbf_ctx_error(x));
        struct accel_drv acc;
        if (accel_open(&acc, regs))
                die("%s: BAR0 of 0x%04x is not an accelerator's", node, c->fdid);
        if (ntbf_dma_alloc(x, 2 * c->size, 4096, &mem))
                die("%s: DMA memory: %s", node, ntbf_ctx_error(x));
        if (ntbf_dev_dma_map(d, mem, 2 * c->size, &ioaddr))
                die("%s: DMA map: %s", node, ntbf_ctx_error(x));
        if (!c->json)
                printf("  %-9s reaches BAR0 at 0x%" PRIx64 "; the device reaches %s's memory at "
                       "0x%" PRIx64 "%s\n",
                       node, info->bars[0].addr, node, ioaddr,
                       info->local ? " (host-physical)"
                                   : " (the DMA window, through the borrower's IOMMU)");
        r->path_ns = info->latency_ns;
        transfers(c, &acc, mem, ioaddr, r);
        ntbf_dev_dma_unmap(d, ioaddr, 2 * c->size);
        ntbf_dma_free(x, mem);
        ntbf_dev_close(d);
        ntbf_ctx_close(x);
}

static void usage(FILE *f)
{
        fprintf(f, "usage: ntbfab-demo --dir DIR --fdid FDID [--borrower NODE] [--size SIZE] "
                   "[--json]\nThe borrower drives a borrowed accelerator, then its lender uses "
                   "it locally.\n");
}

/* Give the device back (the lender then uses it locally), through the borrower's daemon. */
static void give_back(struct ctx *c)
{
        char path[1024];
        struct ntbf_rpc *r;
        ntbf_rpc_socket_path(c->dir, c->borrower, path, sizeof(path));
        if (ntbf_rpc_connect(path, &r))
                die("no daemon answers at %s; run 'ntbfab up FILE' first", path);
        struct json_object *p = json_object_new_object(), *res;
        json_object_object_add(p, "fdid", json_object_new_uint64(c->fdid));
        if (ntbf_rpc_call(r, "device.return", p, &res, 30000))
                die("device.return: %s", ntbf_rpc_error(r));
        json_object_put(res);
        ntbf_rpc_close(r);
}

int main(int argc, char **argv)
{
        struct ctx c = {.borrower = "borrower", .size = 4 * NTBF_MiB, .reps = 5};
        const char *fdid_s = NULL;
        static const struct option lo[] = {{"dir", required_argument, NULL, 'd'},
                                           {"borrower", required_argument, NULL, 'b'},
                                           {"fdid", required_argument, NULL, 'f'},
                                           {"size", required_argument, NULL, 's'},
                                           {"json", no_argument, NULL, 'j'},
                                           {"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
        for (int o; (o = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
                switch (o) {
                case 'd':
                        c.dir = optarg;
                        break;
                case 'b':
                        c.borrower = optarg;
                        break;
                case 'f':
                        fdid_s = optarg;
                        break;
                case 's':
                        if (ntbf_size_parse(optarg, &c.size, NULL) || c.size < 4096 ||
                            c.size > 16 * NTBF_MiB) {
                                fprintf(stderr, "ntbfab-demo: --size takes 4KiB..16MiB\n");
                                return 2;
                        }
                        break;
                case 'j':
                        c.json = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        uint64_t fd;
        if (!c.dir || !fdid_s || ntbf_uint_parse(fdid_s, &fd) || optind != argc) {
                usage(stderr);
                return 2;
        }
        c.fdid = (uint32_t)fd;
        c.out = json_object_new_object();

        struct result rb = {0}, rl = {0};
        struct ntbf_dev_info bi, li;
        if (!c.json)
                printf("demonstration: accelerator 0x%04x, borrowed by %s, then used by its "
                       "lender\n",
                       c.fdid, c.borrower);
        use_device(&c, c.borrower, &rb, &bi);
        if (bi.local)
                die("0x%04x is not borrowed by %s; run 'ntbfab borrow 0x%04x --node %s' first",
                    c.fdid, c.borrower, c.fdid, c.borrower);
        report(&c, c.borrower,
               "borrowed: memory of the borrower <-> device memory, through the NTB", &rb);
        give_back(&c);
        if (!c.json)
                printf("  (%s returned 0x%04x to %s, which uses it locally now)\n", c.borrower,
                       c.fdid, bi.lender);
        use_device(&c, bi.lender, &rl, &li);
        report(&c, bi.lender, "local: memory of the lender <-> device memory, no NTB", &rl);
        bool same = rb.checksum == rl.checksum;
        if (c.json) {
                json_object_object_add(c.out, "data_match", json_object_new_boolean(same));
                puts(json_object_to_json_string_ext(c.out, JSON_C_TO_STRING_PRETTY));
        } else {
                printf("  both paths moved the same %" PRIu64 " bytes (checksum %016" PRIx64
                       "%s): the borrowed device behaves as the local one; the NTB adds %u ns "
                       "of modeled latency per one-way DMA\n",
                       c.size, rb.checksum, same ? ", identical" : ", DIFFERENT",
                       rb.path_ns - rl.path_ns);
        }
        json_object_put(c.out);
        return same ? 0 : 1;
}
