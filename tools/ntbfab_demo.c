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
#include "ntbfab/config.h"
#include "ntbfab/error.h"
#include "ntbfab/path.h"
#include "ntbfab/rpc.h"
#include "ntbfab/sim.h"
#include "ntbfab/units.h"

/*
 * The borrower drives the lender's accelerator through the accelerator's BAR0 mapped
 * through its NTB window, and the accelerator's copy engine moves data between the
 * borrower's memory (through the borrow's DMA window and the borrower's IOMMU) and its own
 * device memory, both ways. Then the device is returned and the lender does the same on
 * its local device. The data must match byte for byte. This uses the daemon's RPC methods
 * (device.open, device.config_write, device.return) and the backend directly for the data
 * path, as the device API (include/ntbfab/device.h) does.
 */

struct ctx {
        const char *dir, *borrower;
        uint32_t fdid;
        uint64_t size;
        int reps;
        bool json;
        struct ntbf_topo *t;
        const struct ntbf_backend_ops *ops;
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

static struct json_object *call(struct ntbf_rpc *c, const char *m, struct json_object *p)
{
        struct json_object *r;
        if (ntbf_rpc_call(c, m, p, &r, 30000))
                die("%s: %s", m, ntbf_rpc_error(c));
        return r;
}

static uint64_t u(struct json_object *o, const char *path)
{
        char buf[128];
        snprintf(buf, sizeof(buf), "%s", path);
        struct json_object *cur = o;
        for (char *save, *p = strtok_r(buf, ".", &save); p; p = strtok_r(NULL, ".", &save))
                if (!json_object_object_get_ex(cur, p, &cur))
                        die("the daemon's answer has no %s", path);
        return json_object_get_uint64(cur);
}

static struct ntbf_rpc *connect_node(struct ctx *c, const char *node)
{
        char path[1024];
        struct ntbf_rpc *r;
        ntbf_rpc_socket_path(c->dir, node, path, sizeof(path));
        if (ntbf_rpc_connect(path, &r))
                die("no daemon answers at %s; run 'ntbfab up FILE' first", path);
        return r;
}

/* Enable memory space and bus master through the daemon (intercepted for a borrowed one). */
static void enable(struct ntbf_rpc *r, uint64_t handle)
{
        struct json_object *p = json_object_new_object();
        json_object_object_add(p, "handle", json_object_new_uint64(handle));
        json_object_object_add(p, "offset", json_object_new_int(4));
        json_object_object_add(p, "size", json_object_new_int(2));
        struct json_object *v = call(r, "device.config_read", p);
        uint64_t cmd = u(v, "value");
        json_object_put(v);
        p = json_object_new_object();
        json_object_object_add(p, "handle", json_object_new_uint64(handle));
        json_object_object_add(p, "offset", json_object_new_int(4));
        json_object_object_add(p, "size", json_object_new_int(2));
        json_object_object_add(p, "value", json_object_new_uint64(cmd | 0x6));
        json_object_put(call(r, "device.config_write", p));
}

struct result {
        double to_ms, from_ms; /* best of the repetitions */
        uint32_t path_ns;      /* modeled one-way latency device <-> memory */
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
                        printf("usage: ntbfab-demo --dir DIR --fdid FDID [--borrower NODE] "
                               "[--size SIZE] [--json]\nThe borrower drives a borrowed "
                               "accelerator, then its lender uses it locally.\n");
                        return 0;
                default:
                        fprintf(stderr, "usage: ntbfab-demo --dir DIR --fdid FDID [--borrower "
                                        "NODE] [--size SIZE] [--json]\n");
                        return 2;
                }
        }
        uint64_t fd;
        if (!c.dir || !fdid_s || ntbf_uint_parse(fdid_s, &fd) || optind != argc) {
                fprintf(stderr, "usage: ntbfab-demo --dir DIR --fdid FDID [--borrower NODE] "
                                "[--size SIZE] [--json]\n");
                return 2;
        }
        c.fdid = (uint32_t)fd;
        char file[1024];
        snprintf(file, sizeof(file), "%s/cluster.yaml", c.dir);
        struct ntbf_diags dg;
        ntbf_diags_init(&dg);
        if (ntbf_config_load(file, &c.t, &dg))
                die("cannot load %s: is a cluster up in %s?", file, c.dir);
        ntbf_diags_free(&dg);
        c.ops = ntbf_backend_find("sim");
        c.out = json_object_new_object();

        /* ---- the borrower ---- */
        uint32_t bn = ntbf_topo_find_node(c.t, c.borrower);
        if (bn == NTBF_NONE)
                die("no node '%s'", c.borrower);
        struct ntbf_rpc *br = connect_node(&c, c.borrower);
        struct json_object *p = json_object_new_object();
        json_object_object_add(p, "fdid", json_object_new_uint64(c.fdid));
        struct json_object *open = call(br, "device.open", p), *info, *bars, *lender;
        json_object_object_get_ex(open, "info", &info);
        json_object_object_get_ex(open, "bars", &bars);
        json_object_object_get_ex(info, "lender", &lender);
        if (json_object_get_boolean(json_object_object_get(info, "local")))
                die("0x%04x is not borrowed by %s; run 'ntbfab borrow 0x%04x --node %s' first",
                    c.fdid, c.borrower, c.fdid, c.borrower);
        char lname[64];
        snprintf(lname, sizeof(lname), "%s", json_object_get_string(lender));
        uint32_t ln = ntbf_topo_find_node(c.t, lname);
        struct ntbf_backend_env env = {c.t, c.dir, bn};
        struct ntbf_backend *b;
        char why[1024];
        if (ntbf_sim_attach(&env, &b, why, sizeof(why)))
                die("%s", why);
        struct json_object *bar0 = json_object_array_get_idx(bars, 0);
        uint32_t ad = (uint32_t)u(bar0, "adapter");
        struct ntbf_adapter_h *h;
        if (c.ops->probe(b, ad, &h))
                die("cannot probe the borrower's adapter");
        void *regs;
        if (c.ops->map_window(h, u(bar0, "offset"), u(bar0, "size"), NTBF_MAP_UNCACHED, &regs))
                die("cannot map BAR0 through the NTB window");
        uint64_t hold = u(open, "handle");
        enable(br, hold);
        struct accel_drv acc;
        if (accel_open(&acc, regs))
                die("BAR0 is not an accelerator's");
        struct ntbf_mem mem;
        if (c.ops->mem_alloc(h, 2 * c.size, 4096, &mem))
                die("cannot allocate %" PRIu64 " bytes of borrower memory", 2 * c.size);
        uint64_t iova = u(open, "iova.base");
        if (2 * c.size > u(open, "iova.size"))
                die("the DMA window share is smaller than %" PRIu64 " bytes; use --size",
                    2 * c.size);
        /* The borrower's IOMMU makes its pages contiguous behind the DMA window (article 4.3). */
        if (c.ops->iommu_map(h, iova, mem.bus_addr, 2 * c.size))
                die("cannot map the IOVA range");
        uint64_t dev_addr = u(open, "dma.device_addr") + (iova - u(open, "dma.iova"));
        struct ntbf_path path;
        struct result rb = {0}, rl = {0};
        struct json_object *bj = json_object_new_object();
        json_object_object_add(bj, "fdid", json_object_new_uint64(c.fdid));
        struct json_object *borrows = call(br, "device.borrows", NULL);
        for (size_t i = 0; i < json_object_array_length(borrows); i++) {
                struct json_object *x = json_object_array_get_idx(borrows, i), *dp;
                if (u(x, "fdid") == c.fdid && json_object_object_get_ex(x, "dma_path", &dp))
                        rb.path_ns = (uint32_t)u(dp, "latency_ns");
        }
        json_object_put(borrows);
        json_object_put(bj);
        if (!c.json) {
                printf("demonstration: %s's accelerator 0x%04x, borrowed by %s\n", lname, c.fdid,
                       c.borrower);
                printf("  %s reaches its BAR0 at 0x%" PRIx64 " (its NTB window), the device "
                       "reaches %s's memory at 0x%" PRIx64 " (the DMA window, IOVA 0x%" PRIx64
                       ")\n",
                       c.borrower, u(bar0, "addr"), c.borrower, dev_addr, iova);
        }
        transfers(&c, &acc, mem.addr, dev_addr, &rb);
        report(&c, c.borrower,
               "borrowed: memory of the borrower <-> device memory, through the NTB", &rb);
        c.ops->iommu_unmap(h, iova, 2 * c.size);
        c.ops->mem_free(h, &mem);
        c.ops->unmap_window(h, regs, u(bar0, "size"));
        c.ops->release(h);
        c.ops->close(b);
        json_object_put(open);
        /* The lender uses it locally: the borrower gives it back first. */
        p = json_object_new_object();
        json_object_object_add(p, "fdid", json_object_new_uint64(c.fdid));
        json_object_put(call(br, "device.return", p));
        ntbf_rpc_close(br);
        if (!c.json)
                printf("  (%s returned 0x%04x to its lender)\n", c.borrower, c.fdid);

        /* ---- the lender, on its local device ---- */
        struct ntbf_rpc *lr = connect_node(&c, lname);
        p = json_object_new_object();
        json_object_object_add(p, "fdid", json_object_new_uint64(c.fdid));
        open = call(lr, "device.open", p);
        json_object_object_get_ex(open, "bars", &bars);
        bar0 = json_object_array_get_idx(bars, 0);
        env.node = ln;
        if (ntbf_sim_attach(&env, &b, why, sizeof(why)))
                die("%s", why);
        /* A local device: its BAR is in this host's address space, DMA addresses are
         * host-physical (docs/rpc.md, device.open). */
        if (ntbf_sim_phys_ptr(b, ln, u(bar0, "addr"), u(bar0, "size"), &regs))
                die("cannot reach the local BAR0");
        enable(lr, u(open, "handle"));
        if (accel_open(&acc, regs))
                die("the local BAR0 is not an accelerator's");
        if (c.ops->probe(b, c.t->nodes[ln].adapters[0], &h) ||
            c.ops->mem_alloc(h, 2 * c.size, 4096, &mem))
                die("cannot allocate lender memory");
        uint32_t dv = NTBF_NONE;
        for (uint32_t i = 0; i < c.t->nodes[ln].ndevices; i++) {
                uint32_t d = c.t->nodes[ln].devices[i];
                if (c.t->devices[d].sim.model == NTBF_SIM_ACCEL)
                        dv = d;
        }
        struct ntbf_endpoint from = {NTBF_EP_DEVICE, ln, dv}, to = {NTBF_EP_RAM, ln, NTBF_NONE};
        if (dv != NTBF_NONE && !ntbf_path_find(c.t, NULL, from, to, &path, NULL, 0))
                rl.path_ns = path.latency_ns;
        transfers(&c, &acc, mem.addr, mem.bus_addr, &rl);
        report(&c, lname, "local: memory of the lender <-> device memory, no NTB", &rl);
        c.ops->mem_free(h, &mem);
        c.ops->release(h);
        c.ops->close(b);
        json_object_put(open);
        ntbf_rpc_close(lr);
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
        ntbf_topo_free(c.t);
        return same ? 0 : 1;
}
