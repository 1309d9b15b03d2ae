/* tests/integration/test_daemon_cluster.c: ntbfabd and ntbfab on a simulated three-lender cluster.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../backends/sim/accel.h"
#include "../../daemon/peerproto.h"
#include "../../tools/accel_drv.h"
#include "daemon_fx.h"
#include "ntbfab/error.h"
#include "ntbfab/path.h"
#include "ntbfab/sim.h"

static struct dfx F;
static char *baseline;
static uint32_t ACC1, ACC2, NVME3;

static int group_up(void **state)
{
        (void)state;
        dfx_up(&F, "daemon-three.yaml");
        baseline = dfx_budgets(&F);
        ACC1 = dfx_fdid(&F, "lender1", "acc1");
        ACC2 = dfx_fdid(&F, "lender2", "acc2");
        NVME3 = dfx_fdid(&F, "lender3", "nvme3");
        return 0;
}

static int group_down(void **state)
{
        (void)state;
        dfx_down(&F);
        free(baseline);
        return 0;
}

static void assert_baseline(void)
{
        dfx_assert_budgets(&F, baseline);
}

/* ---- a borrowed accelerator, driven from the borrower --------------------------------------- */

struct bdev {
        struct ntbf_rpc *rpc; /* holds the handle */
        struct json_object *open;
        uint64_t handle;
        void *bar0;
        uint32_t adapter; /* the borrower's */
        struct ntbf_mem mem;
        uint64_t iova, dev; /* the memory's IOVA in the borrower, and its device-side address */
        struct accel_drv acc;
};

static struct json_object *rpc(struct ntbf_rpc *c, const char *method, const char *params)
{
        struct json_object *res;
        int r = ntbf_rpc_call(c, method, params ? json_tokener_parse(params) : NULL, &res, 30000);
        if (r)
                fail_msg("%s %s: %s", method, params ? params : "", ntbf_rpc_error(c));
        return res;
}

/* Open fdid on node, map its BAR0 through node's window, give it size bytes of DMA memory. */
static void bdev_open(struct bdev *b, const char *node, uint32_t fdid, uint64_t size)
{
        memset(b, 0, sizeof(*b));
        char path[512], p[128];
        ntbf_rpc_socket_path(F.dir, node, path, sizeof(path));
        assert_int_equal(ntbf_rpc_connect(path, &b->rpc), 0);
        snprintf(p, sizeof(p), "{\"fdid\":%u}", fdid);
        b->open = rpc(b->rpc, "device.open", p);
        b->handle = dfx_u(b->open, "handle");
        struct json_object *bars, *bar0 = NULL;
        assert_true(json_object_object_get_ex(b->open, "bars", &bars));
        for (size_t i = 0; i < json_object_array_length(bars); i++)
                if (dfx_u(json_object_array_get_idx(bars, i), "bar") == 0)
                        bar0 = json_object_array_get_idx(bars, i);
        assert_non_null(bar0);
        b->adapter = (uint32_t)dfx_u(bar0, "adapter");
        struct ntbf_adapter_h *h = F.h[b->adapter];
        assert_int_equal(F.ops->map_window(h, 0, dfx_u(bar0, "offset"), dfx_u(bar0, "size"),
                                           NTBF_MAP_UNCACHED, &b->bar0),
                         0);
        /* DMA memory: borrower RAM behind this handle's IOVA share of the DMA window. */
        assert_int_equal(F.ops->mem_alloc(h, size, 4096, &b->mem), 0);
        b->iova = dfx_u(b->open, "iova.base");
        assert_true(size <= dfx_u(b->open, "iova.size"));
        assert_int_equal(F.ops->iommu_map(h, b->iova, b->mem.bus_addr, size), 0);
        b->dev = dfx_u(b->open, "dma.device_addr") + (b->iova - dfx_u(b->open, "dma.iova"));
        /* Memory space and bus master, through the daemon (intercepted config writes). */
        snprintf(p, sizeof(p), "{\"handle\":%" PRIu64 ",\"offset\":4,\"size\":2}", b->handle);
        struct json_object *r = rpc(b->rpc, "device.config_read", p);
        uint64_t cmd = dfx_u(r, "value");
        json_object_put(r);
        snprintf(p, sizeof(p),
                 "{\"handle\":%" PRIu64 ",\"offset\":4,\"size\":2,\"value\":%" PRIu64 "}",
                 b->handle, cmd | 0x6);
        json_object_put(rpc(b->rpc, "device.config_write", p));
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int e = accel_open(&b->acc, b->bar0);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
        if (ms > 50)
                print_message("accel_open of 0x%x took %.1f ms\n", fdid, ms);
        if (e) {
                volatile uint32_t *regs = b->bar0;
                uint32_t c0 = regs[NTBF_ACCEL_REG_CTRL / 4];
                dfx_nap(3000);
                print_message(
                    "3 s later: ctrl %08x status %08x (was ctrl %08x); cfg cmd %04x\n",
                    regs[NTBF_ACCEL_REG_CTRL / 4], regs[NTBF_ACCEL_REG_STATUS / 4], c0,
                    ntbf_sim_cfg(F.b, ntbf_topo_find_device(F.t, dfx_node(&F, "lender2"), "acc2"),
                                 0)[4]);
                uint32_t dv = ntbf_topo_find_device(F.t, dfx_node(&F, "lender2"), "acc2");
                uint64_t a2 = ntbf_device_bar_addr(&F.t->devices[dv], 0, 0);
                void *direct;
                ntbf_sim_phys_ptr(F.b, dfx_node(&F, "lender2"), a2, 4096, &direct);
                print_message("direct acc2 BAR0: ctrl %08x status %08x; mapping %p direct %p\n",
                              ((uint32_t *)direct)[NTBF_ACCEL_REG_CTRL / 4],
                              ((uint32_t *)direct)[NTBF_ACCEL_REG_STATUS / 4], b->bar0, direct);
                fail_msg("accel_open of 0x%x: %d: id %08x ctrl %08x status %08x head %u tail %u",
                         fdid, e, regs[0], regs[NTBF_ACCEL_REG_CTRL / 4],
                         regs[NTBF_ACCEL_REG_STATUS / 4], regs[NTBF_ACCEL_REG_HEAD / 4],
                         regs[NTBF_ACCEL_REG_TAIL / 4]);
        }
}

static void bdev_close(struct bdev *b)
{
        struct ntbf_adapter_h *h = F.h[b->adapter];
        F.ops->iommu_unmap(h, b->iova, b->mem.size);
        F.ops->mem_free(h, &b->mem);
        F.ops->unmap_window(h, b->bar0, 65536);
        json_object_put(b->open);
        ntbf_rpc_close(b->rpc); /* closing the connection closes the handle */
}

/* Borrower memory -> device memory -> borrower memory, byte for byte. */
static void round_trip(struct bdev *b, uint32_t len, uint8_t seed)
{
        uint8_t *m = b->mem.addr;
        for (uint32_t i = 0; i < len; i++)
                m[i] = (uint8_t)(seed + i * 7);
        memset(m + len, 0, len);
        uint64_t dmem = accel_mem_addr(&b->acc);
        uint32_t reason = 0;
        int r = accel_copy(&b->acc, b->dev, dmem + 4096, len, 5000, &reason);
        if (r)
                fail_msg("copy to the device failed: %d (reason %u)", r, reason);
        r = accel_copy(&b->acc, dmem + 4096, b->dev + len, len, 5000, &reason);
        if (r)
                fail_msg("copy from the device failed: %d (reason %u)", r, reason);
        assert_memory_equal(m, m + len, len);
}

/* ---- tests --------------------------------------------------------------------------------- */

/* `ntbfab up` again: starts what is not running. */
static void up_again(const char *node)
{
        char out[8192];
        int st = dfx_cli(&F, out, sizeof(out), "up %s", F.yaml);
        if (st)
                fail_msg("ntbfab up again: %d: %s", st, out);
        assert_true(dfx_wait_ready(&F, node, 5000));
        /* The others' sessions with it come back a little later (they redial): calls from
         * them to it (config cycles) fail until then. */
        for (uint32_t i = 0; i < F.t->nnodes; i++) {
                const char *other = F.t->nodes[i].name;
                bool up = !strcmp(other, node);
                for (int t = 0; t < 5000 && !up; t += 20) {
                        int err;
                        struct json_object *s =
                            dfx_call(&F, other, "node.status", NULL, &err, NULL, 0);
                        struct json_object *peers, *v;
                        for (size_t k = 0; !err && json_object_object_get_ex(s, "peers", &peers) &&
                                           k < json_object_array_length(peers);
                             k++) {
                                struct json_object *e = json_object_array_get_idx(peers, k);
                                if (json_object_object_get_ex(e, "node", &v) &&
                                    !strcmp(json_object_get_string(v), node) &&
                                    json_object_object_get_ex(e, "connected", &v))
                                        up = json_object_get_boolean(v);
                        }
                        json_object_put(s);
                        if (!up)
                                dfx_nap(20);
                }
                assert_true(up);
        }
}

static bool has(const char *out, const char *text)
{
        if (strstr(out, text))
                return true;
        print_message("output: %s\n", out);
        return false;
}

static void test_lend_borrow_return(void **state)
{
        (void)state;
        char out[16384];
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "devices --json"), 0);
        struct json_object *o = json_tokener_parse(out), *devs;
        assert_non_null(o);
        assert_true(json_object_object_get_ex(o, "devices", &devs));
        assert_int_equal(json_object_array_length(devs), 3);
        json_object_put(o);
        /* Exclusive conflicts with any other borrower, shared with an exclusive one. */
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "borrow 0x%x --node borrower", ACC1), 0);
        assert_true(has(out, "as 0000:f0:00.0"));
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "borrow 0x%x --node lender3 --shared", ACC1),
                         1);
        assert_true(has(out, "ntbfab: error: lender1.acc1 (0x8000) is borrowed exclusively by "
                             "'borrower' (through the device API); it must be returned there "
                             "first (ntbfab return 0x8000 --node borrower)"));
        assert_int_equal(
            dfx_cli(&F, out, sizeof(out), "borrow lender2.acc2 --node borrower --shared"), 0);
        /* lender2's adapter (mxh930, Switchtec) lets acc2 out as a proxy ID, which the daemon
         * records from rid_add and shows in node.status. */
        struct json_object *st = dfx_ok(&F, "lender2", "node.status", NULL), *ads, *px, *x;
        assert_true(json_object_object_get_ex(st, "adapters", &ads));
        assert_true(json_object_object_get_ex(json_object_array_get_idx(ads, 0), "proxy_ids", &px));
        assert_true(json_object_array_length(px) >= 1);
        bool acc2_seen = false;
        for (size_t i = 0; i < json_object_array_length(px); i++) {
                struct json_object *e = json_object_array_get_idx(px, i);
                assert_true(json_object_object_get_ex(e, "rid", &x));
                acc2_seen |= strncmp(json_object_get_string(x), "05:00.0/", 8) == 0;
                assert_true(json_object_object_get_ex(e, "proxy", &x));
                assert_int_equal(strncmp(json_object_get_string(x), "f0:", 3), 0);
        }
        assert_true(acc2_seen);
        json_object_put(st);
        st = dfx_ok(&F, "lender1", "node.status", NULL); /* pxh830: no proxy IDs */
        assert_true(json_object_object_get_ex(st, "adapters", &ads));
        assert_true(json_object_object_get_ex(json_object_array_get_idx(ads, 0), "proxy_ids", &px));
        assert_int_equal(json_object_array_length(px), 0);
        json_object_put(st);
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "borrow 0x%x --node lender1 --shared", ACC2),
                         0);
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "borrow 0x%x --node lender3", ACC2), 1);
        assert_true(has(out, "is shared with 'borrower'; an exclusive borrow needs every borrower "
                             "to return it"));
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "devices"), 0);
        assert_true(has(out, "shared     borrower, lender1") || has(out, "borrower, lender1"));
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "lspci --node borrower --json"), 0);
        assert_true(has(out, "\"borrowed\": true"));
        /* Unavailable: no new borrows; available again. */
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "unavailable lender3 0000:03:00.0"), 0);
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "borrow 0x%x --node borrower", NVME3), 1);
        assert_true(has(out, "is unavailable"));
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "available lender3 0000:03:00.0"), 0);
        /* Usage errors are 2, with a pointer to --help. */
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "borrow 0x%x", NVME3), 2);
        assert_true(has(out, "--node"));
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "borrow nope.x --node borrower"), 2);
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "return 0x%x --node borrower", NVME3), 1);
        assert_true(has(out, "is not borrowed by 'borrower'"));
        /* Returns give every budget back. */
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "return 0x%x --node borrower", ACC1), 0);
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "return 0x%x --node borrower", ACC2), 0);
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "return 0x%x --node lender1 --json", ACC2),
                         0);
        assert_baseline();
        /* Unlend and lend again. */
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "unlend lender3 0000:03:00.0"), 0);
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "borrow 0x%x --node borrower", NVME3), 1);
        assert_true(has(out, "no lent device"));
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "lend lender3 0000:03:00.0"), 0);
        assert_true(has(out, "available"));
        /* up is idempotent; another cluster in the same directory is refused. */
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "up %s", F.yaml), 0);
        assert_true(has(out, "already up: nothing to start"));
        char other[600];
        snprintf(other, sizeof(other), "%s/config/examples/quickstart.yaml",
                 getenv("NTBFAB_SRC") ? getenv("NTBFAB_SRC") : ".");
        assert_int_equal(dfx_cli(&F, out, sizeof(out), "up %s", other), 1);
        assert_true(has(out, "another cluster (from "));
        assert_true(has(out, "is up in"));
}

/* The borrower drives the accelerator through its NTB window; interception; a lender restart. */
static void test_data_path_and_lender_restart(void **state)
{
        (void)state;
        char p[64];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", ACC2);
        json_object_put(dfx_ok(&F, "borrower", "device.borrow", p));
        struct bdev b;
        bdev_open(&b, "borrower", ACC2, 1 << 20);
        round_trip(&b, 256 * 1024, 1);
        /* Config space through the borrower: INTx masked, Interrupt Disable kept on. */
        char q[160];
        snprintf(q, sizeof(q), "{\"handle\":%" PRIu64 ",\"offset\":61,\"size\":1}", b.handle);
        struct json_object *r = rpc(b.rpc, "device.config_read", q);
        assert_int_equal(dfx_u(r, "value"), 0);
        json_object_put(r);
        uint32_t dev = ntbf_topo_find_device(F.t, dfx_node(&F, "lender2"), "acc2");
        uint8_t *cfg = ntbf_sim_cfg(F.b, dev, 0);
        assert_int_equal(cfg[0x3d], 1); /* the device itself advertises INTA */
        snprintf(q, sizeof(q), "{\"handle\":%" PRIu64 ",\"offset\":4,\"size\":2,\"value\":6}",
                 b.handle);
        json_object_put(rpc(b.rpc, "device.config_write", q));
        assert_true(cfg[5] & 0x04); /* Interrupt Disable forced on */

        /* The lender's daemon dies: no daemon is on the data path. */
        int pid = dfx_pid(&F, "lender2");
        assert_true(pid > 0);
        kill(pid, SIGKILL);
        dfx_wait_gone(pid);
        round_trip(&b, 64 * 1024, 2);
        /* It comes back within the lease: everything is intact. */
        up_again("lender2");
        assert_true(dfx_wait_state(&F, ACC2, "exclusive", 100));
        struct json_object *bs = dfx_ok(&F, "borrower", "device.borrows", NULL);
        assert_int_equal(json_object_array_length(bs), 1);
        json_object_put(bs);
        round_trip(&b, 128 * 1024, 3);
        /* A borrower's user hears nothing bad meanwhile; return. */
        bdev_close(&b);
        json_object_put(dfx_ok(&F, "borrower", "device.return", p));
        assert_baseline();
}

/* A borrower's daemon killed: after the lease every budget is back, the devices available. */
static void test_borrower_death(void **state)
{
        (void)state;
        char p[64];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", ACC2);
        json_object_put(dfx_ok(&F, "borrower", "device.borrow", p));
        snprintf(p, sizeof(p), "{\"fdid\":%u,\"mode\":\"shared\"}", NVME3);
        json_object_put(dfx_ok(&F, "borrower", "device.borrow", p));
        char *during = dfx_budgets(&F);
        assert_string_not_equal(during, baseline);
        free(during);
        int pid = dfx_pid(&F, "borrower");
        kill(pid, SIGKILL);
        dfx_wait_gone(pid);
        /* Not before the lease runs out... */
        dfx_nap((int)F.t->opts.lease_ms / 2);
        assert_true(dfx_wait_state(&F, ACC2, "exclusive", 50));
        /* ...but soon after. */
        assert_true(dfx_wait_state(&F, ACC2, "available", 4000));
        assert_true(dfx_wait_state(&F, NVME3, "available", 1000));
        assert_baseline();
        /* The borrower comes back and clears what it had programmed itself. */
        up_again("borrower");
        struct json_object *s = dfx_ok(&F, "borrower", "node.status", NULL);
        /* Only the CPU baseline's switch entries remain programmed by it. */
        assert_int_equal(dfx_u(s, "borrows"), 0);
        assert_true(dfx_u(s, "programmed") <= 2);
        json_object_put(s);
        assert_baseline();
}

/* 1000 borrow/return cycles leave every budget exactly as it started. */
static void test_cycles(void **state)
{
        (void)state;
        char path[512], p[64];
        struct ntbf_rpc *c;
        ntbf_rpc_socket_path(F.dir, "borrower", path, sizeof(path));
        assert_int_equal(ntbf_rpc_connect(path, &c), 0);
        snprintf(p, sizeof(p), "{\"fdid\":%u}", NVME3);
        for (int i = 0; i < 1000; i++) {
                json_object_put(rpc(c, "device.borrow", p));
                json_object_put(rpc(c, "device.return", p));
        }
        ntbf_rpc_close(c);
        assert_baseline();
}

/* acc1 (lender1) copies into acc2's memory (lender2) over the shortest path (article 4.4). */
static void test_map_peer(void **state)
{
        (void)state;
        char p[160];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", ACC1);
        json_object_put(dfx_ok(&F, "borrower", "device.borrow", p));
        snprintf(p, sizeof(p), "{\"fdid\":%u}", ACC2);
        json_object_put(dfx_ok(&F, "borrower", "device.borrow", p));
        struct bdev a, b;
        bdev_open(&a, "borrower", ACC1, 1 << 20);
        /* The target's handle must be on the same connection. */
        snprintf(p, sizeof(p), "{\"fdid\":%u}", ACC2);
        struct json_object *t = rpc(a.rpc, "device.open", p);
        uint64_t th = dfx_u(t, "handle");
        json_object_put(t);
        snprintf(p, sizeof(p), "{\"handle\":%" PRIu64 ",\"target\":%" PRIu64 ",\"bar\":2}",
                 a.handle, th);
        struct json_object *m = rpc(a.rpc, "device.map_peer", p), *path, *hops;
        uint64_t target = dfx_u(m, "device_addr");
        assert_true(json_object_object_get_ex(m, "path", &path));
        assert_true(json_object_object_get_ex(path, "hops", &hops));
        struct ntbf_path sp;
        uint32_t l1 = dfx_node(&F, "lender1"), l2 = dfx_node(&F, "lender2");
        struct ntbf_endpoint from = {NTBF_EP_DEVICE, l1, ntbf_topo_find_device(F.t, l1, "acc1")};
        struct ntbf_endpoint to = {NTBF_EP_DEVICE, l2, ntbf_topo_find_device(F.t, l2, "acc2")};
        assert_int_equal(ntbf_path_find(F.t, NULL, from, to, &sp, NULL, 0), 0);
        assert_int_equal(json_object_array_length(hops), sp.nhops);
        /* Never through the borrower: acc1's adapter, the switch, acc2's adapter. */
        assert_null(strstr(json_object_to_json_string(path), "borrower"));
        json_object_put(m);
        /* acc2's memory, seen from the borrower through its own window, to check the bytes. */
        bdev_open(&b, "borrower", ACC2, 4096);
        uint64_t amem = accel_mem_addr(&a.acc), bmem = accel_mem_addr(&b.acc);
        uint8_t *src = a.mem.addr;
        for (int i = 0; i < 65536; i++)
                src[i] = (uint8_t)(i * 13 + 5);
        uint32_t reason = 0;
        assert_int_equal(accel_copy(&a.acc, a.dev, amem, 65536, 5000, &reason), 0);
        assert_int_equal(accel_copy(&a.acc, amem, target + 8192, 65536, 5000, &reason), 0);
        /* Back from acc2's memory into the borrower by acc2, and compare. */
        assert_int_equal(accel_copy(&b.acc, bmem + 8192, b.dev, 4096, 5000, &reason), 0);
        assert_memory_equal(b.mem.addr, src, 4096);
        bdev_close(&b);
        bdev_close(&a);
        snprintf(p, sizeof(p), "{\"fdid\":%u}", ACC1);
        json_object_put(dfx_ok(&F, "borrower", "device.return", p));
        snprintf(p, sizeof(p), "{\"fdid\":%u}", ACC2);
        json_object_put(dfx_ok(&F, "borrower", "device.return", p));
        assert_baseline();
}

/* A device DMAs outside its windows and is stopped, the data untouched. */
static void test_dma_outside_windows(void **state)
{
        (void)state;
        char p[64];
        uint32_t l1 = dfx_node(&F, "lender1"), l2 = dfx_node(&F, "lender2");
        snprintf(p, sizeof(p), "{\"fdid\":%u}", ACC1);
        json_object_put(dfx_ok(&F, "borrower", "device.borrow", p));
        snprintf(p, sizeof(p), "{\"fdid\":%u}", ACC2);
        json_object_put(dfx_ok(&F, "borrower", "device.borrow", p));
        struct bdev a, b;
        bdev_open(&a, "borrower", ACC1, 1 << 20);
        bdev_open(&b, "borrower", ACC2, 1 << 20);
        round_trip(&a, 4096, 9); /* its windows work */
        /* Isolated acc1 aims at its own host's RAM: its IOMMU domain refuses. */
        void *ram;
        assert_int_equal(ntbf_sim_phys_ptr(F.b, l1, 0x300000, 4096, &ram), 0);
        memset(ram, 0x5a, 4096);
        uint32_t d1 = ntbf_topo_find_device(F.t, l1, "acc1");
        uint64_t before = 0, after = 0;
        ntbf_sim_dev_iommu_faults(F.b, d1, 0, &before);
        uint32_t reason = 0;
        assert_int_equal(accel_copy(&a.acc, accel_mem_addr(&a.acc), 0x300000, 4096, 5000, &reason),
                         -EIO);
        assert_int_equal(reason, NTBF_ACCEL_ERR_DST);
        ntbf_sim_dev_iommu_faults(F.b, d1, 0, &after);
        assert_true(after > before);
        for (int i = 0; i < 4096; i++)
                assert_int_equal(((uint8_t *)ram)[i], 0x5a);
        struct json_object *s = dfx_ok(&F, "lender1", "node.status", NULL);
        assert_non_null(strstr(json_object_to_json_string(s), "\"iommu_faults\":"));
        json_object_put(s);
        /* acc2 is not isolated: an address in its host's window past what was programmed is an
         * unprogrammed slot, dropped and counted on lender2's adapter. */
        uint32_t ad = dfx_adapter(&F, "lender2");
        const struct ntbf_adapter *x = &F.t->adapters[ad];
        uint64_t stray = x->window_base + x->p.window - x->lut_entry_size;
        struct ntbf_counters c0, c1;
        F.ops->counters(F.h[ad], &c0);
        assert_int_equal(accel_copy(&b.acc, accel_mem_addr(&b.acc), stray, 4096, 5000, &reason),
                         -EIO);
        F.ops->counters(F.h[ad], &c1);
        assert_true(c1.drop_unprogrammed > c0.drop_unprogrammed);
        (void)l2;
        bdev_close(&a);
        bdev_close(&b);
        snprintf(p, sizeof(p), "{\"fdid\":%u}", ACC1);
        json_object_put(dfx_ok(&F, "borrower", "device.return", p));
        snprintf(p, sizeof(p), "{\"fdid\":%u}", ACC2);
        json_object_put(dfx_ok(&F, "borrower", "device.return", p));
        assert_baseline();
}

/* SIGTERM: the borrower's users hear device.lost, then the device goes back. */
static void test_sigterm_returns(void **state)
{
        (void)state;
        char path[512], p[64];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", ACC2);
        json_object_put(dfx_ok(&F, "borrower", "device.borrow", p));
        struct ntbf_rpc *c;
        ntbf_rpc_socket_path(F.dir, "borrower", path, sizeof(path));
        assert_int_equal(ntbf_rpc_connect(path, &c), 0);
        json_object_put(rpc(c, "events.subscribe", NULL));
        int pid = dfx_pid(&F, "borrower");
        kill(pid, SIGTERM);
        struct json_object *ev = NULL;
        bool lost = false;
        for (int i = 0; i < 50 * dfx_scale() && !lost; i++) {
                if (ntbf_rpc_next_event(c, &ev, 100) == 0) {
                        struct json_object *k;
                        lost = json_object_object_get_ex(ev, "kind", &k) &&
                               !strcmp(json_object_get_string(k), "device.lost");
                        json_object_put(ev);
                }
        }
        assert_true(lost);
        ntbf_rpc_close(c);
        dfx_wait_gone(pid);
        assert_true(dfx_wait_state(&F, ACC2, "available", 2000));
        assert_baseline();
        up_again("borrower");
}

/* Restarts within the lease: the borrower's daemon, and the fabric manager's. */
static void test_restarts_within_lease(void **state)
{
        (void)state;
        char p[64];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", ACC2);
        json_object_put(dfx_ok(&F, "borrower", "device.borrow", p));
        struct bdev b;
        bdev_open(&b, "borrower", ACC2, 1 << 20);
        round_trip(&b, 64 * 1024, 4);
        char *during = dfx_budgets(&F);
        /* The borrower's daemon dies and is back at once: the borrow is intact. */
        int pid = dfx_pid(&F, "borrower");
        kill(pid, SIGKILL);
        dfx_wait_gone(pid);
        round_trip(&b, 64 * 1024, 5); /* no daemon on the data path */
        up_again("borrower");
        struct json_object *bs = dfx_ok(&F, "borrower", "device.borrows", NULL);
        assert_int_equal(json_object_array_length(bs), 1);
        json_object_put(bs);
        char *now = dfx_budgets(&F);
        assert_string_equal(now, during);
        free(now);
        /* The fabric manager dies and is back: it rebuilds the same state from its plans. */
        pid = dfx_pid(&F, "lender3");
        kill(pid, SIGKILL);
        dfx_wait_gone(pid);
        round_trip(&b, 64 * 1024, 6);
        up_again("lender3");
        assert_true(dfx_wait_ready(&F, "borrower", 5000));
        now = dfx_budgets(&F);
        assert_string_equal(now, during);
        free(now);
        free(during);
        assert_true(dfx_wait_state(&F, ACC2, "exclusive", 100));
        round_trip(&b, 64 * 1024, 7);
        /* The connection holding the handle was to the old borrower daemon: reopen. */
        bdev_close(&b);
        json_object_put(dfx_ok(&F, "borrower", "device.return", p));
        assert_baseline();
}

/* A lender's daemon dies for good: its borrowed device is lost to the borrower. */
static void test_lender_death(void **state)
{
        (void)state;
        char path[512], p[64];
        snprintf(p, sizeof(p), "{\"fdid\":%u}", ACC2);
        json_object_put(dfx_ok(&F, "borrower", "device.borrow", p));
        struct ntbf_rpc *c;
        ntbf_rpc_socket_path(F.dir, "borrower", path, sizeof(path));
        assert_int_equal(ntbf_rpc_connect(path, &c), 0);
        json_object_put(rpc(c, "events.subscribe", NULL));
        int pid = dfx_pid(&F, "lender2");
        kill(pid, SIGKILL);
        dfx_wait_gone(pid);
        struct json_object *ev = NULL;
        bool lost = false;
        for (int i = 0; i < 60 * dfx_scale() && !lost; i++) {
                if (ntbf_rpc_next_event(c, &ev, 100) == 0) {
                        struct json_object *k, *f;
                        lost = json_object_object_get_ex(ev, "kind", &k) &&
                               !strcmp(json_object_get_string(k), "device.lost") &&
                               json_object_object_get_ex(ev, "fdid", &f) &&
                               (uint32_t)json_object_get_int64(f) == ACC2;
                        json_object_put(ev);
                }
        }
        assert_true(lost);
        ntbf_rpc_close(c);
        assert_true(dfx_wait_state(&F, ACC2, "lost", 1000));
        struct json_object *bs = dfx_ok(&F, "borrower", "device.borrows", NULL);
        assert_int_equal(json_object_array_length(bs), 0);
        json_object_put(bs);
        /* Back: it reconciles (clears what the manager released) and lends again. */
        up_again("lender2");
        assert_true(dfx_wait_state(&F, ACC2, "available", 2000));
        assert_baseline();
}

/* Who may use a daemon's socket, as `ntbfab up` made its directories: root, its own user,
 * allow_users (uid 1), allow_groups (sys), socket_group (adm); not nobody. Real uids. */
static void test_socket_access(void **state)
{
        (void)state;
        if (getuid() != 0) {
                print_message("not root: cannot act as other users; skipped\n");
                return;
        }
        char path[512];
        ntbf_rpc_socket_path(F.dir, "lender1", path, sizeof(path));
        static const struct {
                uid_t uid;
                gid_t gid, extra; /* primary and supplementary group */
                int want;         /* 0 served, 1 refused by the daemon */
        } who[] = {
            {65534, 65534, 65534, 1}, /* nobody */
            {1, 1, 1, 0},             /* allow_users */
            {2, 2, 3, 0},             /* bin, with supplementary group sys: allow_groups */
            {3, 4, 4, 0},             /* sys uid with primary group adm: socket_group */
            {5, 5, 5, 1},             /* games: listed nowhere */
        };
        for (size_t k = 0; k < sizeof(who) / sizeof(who[0]); k++) {
                pid_t pid = fork();
                if (pid == 0) {
                        if (setgroups(1, &who[k].extra) || setgid(who[k].gid) || setuid(who[k].uid))
                                _exit(3);
                        struct ntbf_rpc *c;
                        int r = ntbf_rpc_connect(path, &c);
                        if (r)
                                _exit(r == -EACCES ? 5 : 4); /* the file system said no */
                        struct json_object *res = NULL;
                        r = ntbf_rpc_call(c, "node.status", NULL, &res, 5000);
                        json_object_put(res);
                        ntbf_rpc_close(c);
                        _exit(r == 0 ? 0 : r == -EPIPE ? 1 : 2);
                }
                int st;
                assert_int_equal(waitpid(pid, &st, 0), pid);
                assert_true(WIFEXITED(st));
                if (WEXITSTATUS(st) != who[k].want)
                        fail_msg("uid %u gid %u (+%u): exit %d, want %d (5: refused by the file "
                                 "system)",
                                 (unsigned)who[k].uid, (unsigned)who[k].gid, (unsigned)who[k].extra,
                                 WEXITSTATUS(st), who[k].want);
        }
        char cmd[600];
        snprintf(cmd, sizeof(cmd),
                 "grep -q 'refused an RPC connection from pid [0-9]* uid 65534' %s/log/lender1.log",
                 F.dir);
        assert_int_equal(system(cmd), 0);
        /* Nothing else of the directory is opened up: the state and the key stay private. */
        struct stat st;
        char p[600];
        snprintf(p, sizeof(p), "%s/state", F.dir);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 07, 0);
        snprintf(p, sizeof(p), "%s/cluster.key", F.dir);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 077, 0);
}

/* A peer without the cluster key is refused and logged, and changes nothing. */
static void test_rogue_peer(void **state)
{
        (void)state;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(17704)};
        inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        uint8_t wrong[32] = {42};
        struct ntbf__pp pp;
        assert_int_equal(ntbf__pp_init(&pp, true, wrong, 4, NULL), 0);
        uint8_t *f;
        size_t n;
        assert_int_equal(ntbf__pp_hello(&pp, 16, &f, &n), 0);
        assert_int_equal(write(fd, f, n), (ssize_t)n);
        free(f);
        char buf[64];
        /* Dropped: the daemon closes without answering. */
        assert_int_equal(read(fd, buf, sizeof(buf)), 0);
        close(fd);
        ntbf__pp_free(&pp);
        char log[512], cmd[600];
        snprintf(log, sizeof(log), "%s/log/lender3.log", F.dir);
        snprintf(cmd, sizeof(cmd),
                 "grep -q 'authentication failed: HELLO not made with the cluster "
                 "key' %s",
                 log);
        assert_int_equal(system(cmd), 0);
        assert_baseline();
        assert_true(dfx_wait_ready(&F, "borrower", 1000)); /* the real peers are fine */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_lend_borrow_return),
            cmocka_unit_test(test_data_path_and_lender_restart),
            cmocka_unit_test(test_map_peer),
            cmocka_unit_test(test_dma_outside_windows),
            cmocka_unit_test(test_cycles),
            cmocka_unit_test(test_borrower_death),
            cmocka_unit_test(test_restarts_within_lease),
            cmocka_unit_test(test_lender_death),
            cmocka_unit_test(test_socket_access),
            cmocka_unit_test(test_sigterm_returns),
            cmocka_unit_test(test_rogue_peer),
        };
        if (getenv("TEST_FILTER"))
                cmocka_set_test_filter(getenv("TEST_FILTER"));
        return cmocka_run_group_tests(tests, group_up, group_down);
}
