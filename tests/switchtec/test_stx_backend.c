/* tests/switchtec/test_stx_backend.c: the switchtec backend (backends/switchtec/ops.c) through
 * its vtable, composed on linux-ntb over the unit tier's fake ntbfab_ntb pair, with the
 * register model of a switch: the register writes of a borrow and of a return, read back from
 * the model's register file, and the error paths (a full table, an error code, a status that
 * never settles), each leaving the switch and the lower layer as they were. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake_ntbdev.h"
#include "model.h"
#include "ntbfab/backend.h"
#include "ntbfab/config.h"
#include "ntbfab/error.h"
#include "switchtec.h"

#define MiB   (UINT64_C(1) << 20)
#define C(p)  STX_CTRL(p)
#define CBLK  0x2000 /* one partition's control block */
#define PARTS 2

struct fx {
        char dir[64];
        uint8_t *map;
        struct stxm *m;
        pthread_t th;
        struct ntbf_topo *t;
        const struct ntbf_backend_ops *o;
        struct ntbf_backend *b;
        struct ntbf_adapter_h *ha, *hb;
        uint32_t a, bb; /* topology adapters: a.nt0 (partition 0), b.nt0 (partition 1) */
        uint32_t snap[PARTS][CBLK / 4];
};

static void *model_main(void *arg)
{
        struct fx *f = arg;
        stxm_run(f->m, -1, 200);
        return NULL;
}

static uint32_t reg32(struct fx *f, uint64_t off)
{
        return __atomic_load_n((uint32_t *)(f->map + off), __ATOMIC_ACQUIRE);
}

static uint64_t reg64(struct fx *f, uint64_t off)
{
        return __atomic_load_n((uint64_t *)(f->map + off), __ATOMIC_ACQUIRE);
}

static void ctl32(struct fx *f, uint64_t off, uint32_t v)
{
        __atomic_store_n((uint32_t *)(f->map + off), v, __ATOMIC_RELEASE);
}

static void backend_open(struct fx *f)
{
        struct ntbf_backend_env env = {f->t, f->dir, NTBF_NONE, NULL};
        char why[512] = "";
        int r = f->o->open(&env, &f->b, why, sizeof(why));
        if (r)
                fprintf(stderr, "open: %s\n", why);
        assert_int_equal(r, 0);
        assert_int_equal(f->o->probe(f->b, f->a, &f->ha), 0);
        assert_int_equal(f->o->probe(f->b, f->bb, &f->hb), 0);
}

static void backend_close(struct fx *f)
{
        if (f->ha)
                f->o->release(f->ha);
        if (f->hb)
                f->o->release(f->hb);
        if (f->b)
                f->o->close(f->b);
        f->ha = f->hb = NULL;
        f->b = NULL;
}

/* The register model with partitions 0 and 1 (16 requester entries each), the fake pair laid
 * out as their LUT windows, and the backend opened on tests/conformance/switchtec-fake.yaml
 * with the model's file as stx.gas of the instance directory. */
static int setup_poll(void **state, const char *poll, bool find)
{
        struct fx *f = calloc(1, sizeof(*f));
        snprintf(f->dir, sizeof(f->dir), "/tmp/stxbe.XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        char gas[128];
        snprintf(gas, sizeof(gas), "%s/stx.gas", f->dir);
        /* Partition 2: a third host's, which this test never opens. */
        struct stxm_params p = {.ep_map = 0x7,
                                .lut_entries = 512,
                                .rid_size = 16,
                                .host_rid = 0x0008,
                                .bar_size = 8 * MiB};
        f->map = stxm_create(gas, &p);
        assert_non_null(f->map);
        f->m = stxm_new(f->map);
        assert_int_equal(pthread_create(&f->th, NULL, model_main, f), 0);
        struct fake_layout l = {3, MiB, MiB, 8 * MiB, FAKE_BAR + MiB};
        fake_ntb_layout(&l);
        lntb_sys_current = fake_ntb_init();
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        int r = ntbf_config_load("tests/conformance/switchtec-fake.yaml", &f->t, &d);
        if (r)
                ntbf_diags_print(&d, stderr);
        ntbf_diags_free(&d);
        assert_int_equal(r, 0);
        f->a = ntbf_topo_find_adapter(f->t, ntbf_topo_find_node(f->t, "a"), "nt0");
        f->bb = ntbf_topo_find_adapter(f->t, ntbf_topo_find_node(f->t, "b"), "nt0");
        f->o = ntbf_backend_find("switchtec");
        assert_non_null(f->o);
        setenv("NTBFAB_STX_POLL", poll, 1);
        if (find) {
                /* No gas in the file: each host's switch is the management endpoint of the
                 * fake sysfs that owns its NT function (the fake's 00:03.0 and 00:04.0), both
                 * reaching the model's file, each showing its own partition. */
                f->t->adapters[f->a].stx.gas[0] = 0;
                f->t->adapters[f->bb].stx.gas[0] = 0;
                stxm_fake_sysfs(lntb_sys_current->root, "switchtec0", "0000:00:03.0", 0, gas);
                stxm_fake_sysfs(lntb_sys_current->root, "switchtec1", "0000:00:04.0", 1, gas);
        }
        backend_open(f);
        *state = f;
        return 0;
}

/* Polls of 1 ms; 60000 bound the wait only (a loaded machine may not run the model). */
static int setup(void **state)
{
        return setup_poll(state, "1000,60000", false);
}

/* The same, with each adapter's switch found from its bdf. */
static int setup_found(void **state)
{
        return setup_poll(state, "1000,60000", true);
}

/* 30 polls: a status that never settles is given up on quickly. */
static int setup_short(void **state)
{
        return setup_poll(state, "1000,30", false);
}

static int teardown(void **state)
{
        struct fx *f = *state;
        backend_close(f);
        __atomic_store_n((uint32_t *)(f->map + STXM_STOP), 1, __ATOMIC_RELEASE);
        pthread_join(f->th, NULL);
        stxm_free(f->m);
        munmap(f->map, STXM_FILE_SIZE);
        ntbf_topo_free(f->t);
        fake_ntb_fini();
        fake_ntb_layout(NULL);
        lntb_sys_current = &lntb_sys_libc;
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
        assert_int_equal(system(cmd), 0);
        free(f);
        return 0;
}

/* Both partitions' control blocks as they are now. */
static void snapshot(struct fx *f)
{
        for (uint32_t p = 0; p < PARTS; p++)
                for (uint32_t i = 0; i < CBLK / 4; i++)
                        f->snap[p][i] = reg32(f, C(p) + 4 * i);
}

/* The registers that differ from the snapshot must be exactly want[] (partition, offset);
 * every other register of both control blocks is as it was. */
struct at {
        uint32_t part;
        uint64_t off;
};

static void changed_exactly(struct fx *f, const struct at *want, size_t n)
{
        for (uint32_t p = 0; p < PARTS; p++)
                for (uint32_t i = 0; i < CBLK / 4; i++) {
                        bool differs = reg32(f, C(p) + 4 * i) != f->snap[p][i], listed = false;
                        for (size_t k = 0; k < n; k++)
                                listed |= want[k].part == p && want[k].off / 4 == i;
                        if (differs != listed)
                                fail_msg("partition %u register +%#x: %s (now %#x, was %#x)", p,
                                         4 * i, differs ? "changed, unexpectedly" : "unchanged",
                                         reg32(f, C(p) + 4 * i), f->snap[p][i]);
                }
}

/* A buffer of b's memory for export, 1 MiB aligned (what a borrower's window reaches). */
static struct ntbf_mem mem_b(struct fx *f)
{
        struct ntbf_mem m;
        assert_int_equal(f->o->mem_alloc(f->hb, MiB, MiB, &m), 0);
        return m;
}

/* ---- a borrow and a return ------------------------------------------------------------------ */

/* At probe each partition's BAR 2 was set up as the file lays it out: 4 LUT entries of
 * 1 MiB at its start, no direct window. */
static void test_bar_setup_at_probe(void **state)
{
        struct fx *f = *state;
        for (uint32_t p = 0; p < PARTS; p++) {
                assert_int_equal(reg32(f, C(p) + STX_BAR_CTL(2)),
                                 STX_BAR_VALID | STX_BAR_LUT_WIN_EN | 20u << STX_BAR_LUT_SHIFT |
                                     3u << STX_BAR_COUNT_SHIFT);
                assert_int_equal(reg32(f, C(p) + STX_BAR_WIN_SIZE(2)), 0);
                assert_int_equal(reg32(f, C(p) + STX_PART_STATUS), STX_ST_NORMAL);
        }
}

/*
 * A borrow as the daemon programs it on a's side: the device 41:00 (all 8 functions, one core
 * entry with mask 0xfff8) reaches b's memory through a's window. a's requester table gets
 * eight entries (RID << 16 | 1, the proxy devfn in bits 8:1); b's inbound translation of a's
 * slot 1 is partition 0's LUT entry 1: b's bus address, destination partition 1, enabled.
 * The return takes every one of them back. Nothing else changes in either control block.
 */
static void test_borrow_and_return(void **state)
{
        struct fx *f = *state;
        struct ntbf_mem m = mem_b(f);
        snapshot(f);
        struct ntbf_rid dev = {0, 0x4100, 0xfff8};
        uint32_t proxy = 0;
        assert_int_equal(f->o->rid_add(f->ha, &dev, &proxy), 0);
        assert_int_equal(f->o->peer_xlat_set(f->hb, f->a, 1, m.bus_addr, MiB), 0);

        struct at want[9];
        size_t n = 0;
        uint32_t seen = 0;
        for (uint32_t fn = 0; fn < 8; fn++) {
                uint32_t e = reg32(f, C(0) + STX_RID_ENTRY(2 + fn));
                assert_int_equal(stx_rid_of(e), 0x4100 | fn);
                assert_int_equal(e & STX_RID_EN, 1);
                uint32_t px = stx_rid_proxy(e);
                assert_true(px >= 3 && !(seen & 1u << px)); /* the host's two hold 1 and 2 */
                seen |= 1u << px;
                if (fn == 0)
                        assert_int_equal(proxy, px); /* the proxy of 41:00.0 reached the core */
                want[n++] = (struct at){0, STX_RID_ENTRY(2 + fn)};
        }
        assert_int_equal(reg64(f, C(0) + STX_LUT_ENTRY(1)), m.bus_addr | 1u << 1 | 1);
        want[n++] = (struct at){0, STX_LUT_ENTRY(1)};
        changed_exactly(f, want, n);
        /* The lower layer translated too: the fake's inbound window 0 of b (a's slot 1). */
        uint64_t size = 0;
        assert_int_equal(fake_ntb_trans(1, 0, &size), m.bus_addr);
        assert_int_equal(size, MiB);

        /* The return. */
        assert_int_equal(f->o->peer_xlat_clear(f->hb, f->a, 1), 0);
        assert_int_equal(f->o->rid_del(f->ha, &dev), 0);
        changed_exactly(f, NULL, 0);
        assert_int_equal(fake_ntb_trans(1, 0, NULL), 0);
        /* Gone from the records too: a second return finds nothing. */
        assert_int_equal(f->o->rid_del(f->ha, &dev), -ENOENT);
        assert_int_equal(f->o->mem_free(f->hb, &m), 0);
}

/* A second add of any function already there, and the host's own entries, are refused
 * without a write. */
static void test_rid_refusals(void **state)
{
        struct fx *f = *state;
        struct ntbf_rid one = {0, 0x4102, 0xffff}, all = {0, 0x4100, 0xfff8};
        assert_int_equal(f->o->rid_add(f->ha, &one, NULL), 0);
        snapshot(f);
        assert_int_equal(f->o->rid_add(f->ha, &all, NULL), -EEXIST);
        struct ntbf_rid host = {0, 0x0008, 0xffff}, cpu = {0, 0x0000, 0xffff};
        assert_int_equal(f->o->rid_add(f->ha, &host, NULL), -EEXIST);
        assert_int_equal(f->o->rid_del(f->ha, &cpu), -EPERM);
        changed_exactly(f, NULL, 0);
        assert_int_equal(f->o->rid_del(f->ha, &one), 0);
}

/* ---- error paths: nothing half applied ------------------------------------------------------ */

/* A full table: 14 free entries; a device of 8 functions fits once, the second does not,
 * and nothing of it is written. */
static void test_full_table(void **state)
{
        struct fx *f = *state;
        struct ntbf_rid d1 = {0, 0x4100, 0xfff8}, d2 = {0, 0x4200, 0xfff8};
        assert_int_equal(f->o->rid_add(f->ha, &d1, NULL), 0);
        snapshot(f);
        assert_int_equal(f->o->rid_add(f->ha, &d2, NULL), -ENOSPC);
        changed_exactly(f, NULL, 0);
        assert_int_equal(f->o->rid_del(f->ha, &d2), -ENOENT);
        assert_int_equal(f->o->rid_del(f->ha, &d1), 0);
}

/* The switch runs out of proxy IDs in the middle of a device (it has 5 per partition: the
 * host's two and three more): the fourth function's configure fails with req_id_error, and
 * the three added before are taken back. */
static void test_error_mid_device(void **state)
{
        struct fx *f = *state;
        ctl32(f, STXM_PROXIES, 5);
        snapshot(f);
        struct ntbf_rid d = {0, 0x4100, 0xfff8};
        assert_int_equal(f->o->rid_add(f->ha, &d, NULL), -EIO);
        changed_exactly(f, NULL, 0);
        assert_int_equal(f->o->rid_del(f->ha, &d), -ENOENT);
        ctl32(f, STXM_PROXIES, 32);
        assert_int_equal(f->o->rid_add(f->ha, &d, NULL), 0);
        assert_int_equal(f->o->rid_del(f->ha, &d), 0);
}

/* An error code for the next configure (an unknown lut_error): the LUT entry is rolled back
 * and the lower layer was never asked, so b's window reaches nothing. */
static void test_error_code(void **state)
{
        struct fx *f = *state;
        struct ntbf_mem m = mem_b(f);
        snapshot(f);
        ctl32(f, STXM_INJECT_LUT, 0x00ff0001);
        assert_int_equal(f->o->peer_xlat_set(f->hb, f->a, 1, m.bus_addr, MiB), -EIO);
        changed_exactly(f, NULL, 0); /* the rollback's configure cleared lut_error too */
        assert_int_equal(fake_ntb_trans(1, 0, NULL), 0);
        /* Nothing recorded: the next translation of the slot works and its clear leaves
         * nothing. */
        assert_int_equal(f->o->peer_xlat_set(f->hb, f->a, 1, m.bus_addr, MiB), 0);
        assert_int_equal(f->o->peer_xlat_clear(f->hb, f->a, 1), 0);
        assert_int_equal(reg64(f, C(0) + STX_LUT_ENTRY(1)), 0);
        assert_int_equal(f->o->mem_free(f->hb, &m), 0);
}

/* A bad argument is refused before the switch is touched. */
static void test_bad_args(void **state)
{
        struct fx *f = *state;
        struct ntbf_mem m = mem_b(f);
        snapshot(f);
        uint32_t configs = reg32(f, STXM_CONFIGS);
        assert_int_equal(f->o->peer_xlat_set(f->hb, f->a, 1, m.bus_addr + 4096, MiB), -EINVAL);
        assert_int_equal(f->o->peer_xlat_set(f->hb, f->a, 0, m.bus_addr, MiB), -EPERM);
        assert_int_equal(reg32(f, STXM_CONFIGS), configs);
        changed_exactly(f, NULL, 0);
        assert_int_equal(f->o->mem_free(f->hb, &m), 0);
}

/* A configure that never settles: -ETIMEDOUT, the edit taken back, the lower layer not
 * asked; once the switch settles the entry reads 0. A lock that never settles changes
 * nothing. */
static void test_status_never_settles(void **state)
{
        struct fx *f = *state;
        struct ntbf_mem m = mem_b(f);
        ctl32(f, STXM_STUCK, STXM_STUCK_CFG);
        assert_int_equal(f->o->peer_xlat_set(f->hb, f->a, 1, m.bus_addr, MiB), -ETIMEDOUT);
        assert_int_equal(reg64(f, C(0) + STX_LUT_ENTRY(1)), 0);
        assert_int_equal(fake_ntb_trans(1, 0, NULL), 0);
        ctl32(f, STXM_STUCK, 0);
        for (int i = 0; reg32(f, C(0) + STX_PART_STATUS) != STX_ST_NORMAL; i++) {
                assert_true(i < 60000); /* bounds the wait only */
                usleep(1000);
        }
        assert_int_equal(reg64(f, C(0) + STX_LUT_ENTRY(1)), 0);
        snapshot(f);
        ctl32(f, STXM_STUCK, STXM_STUCK_LOCK);
        struct ntbf_rid d = {0, 0x4100, 0xffff};
        assert_int_equal(f->o->rid_add(f->ha, &d, NULL), -ETIMEDOUT);
        assert_int_equal(reg32(f, C(0) + STX_RID_ENTRY(2)), 0);
        ctl32(f, STXM_STUCK, 0);
        assert_int_equal(f->o->rid_del(f->ha, &d), -ENOENT);
        assert_int_equal(f->o->mem_free(f->hb, &m), 0);
}

/* ---- the read-back at probe ------------------------------------------------------------------ */

/*
 * After a crash: partition 0 holds a LUT entry leading into partition 1 and a requester entry
 * that no records name, and a LUT entry leading into partition 2 (a third host's). Probing
 * again clears the first two (b's and a's leftovers) and keeps the third: each host owns
 * only the LUT entries into its own memory.
 */
static void test_readback_at_probe(void **state)
{
        struct fx *f = *state;
        backend_close(f);
        uint64_t mine = stx_lut_entry(0x30000000, 1), other = stx_lut_entry(0x50000000, 2);
        __atomic_store_n((uint64_t *)(f->map + C(0) + STX_LUT_ENTRY(2)), mine, __ATOMIC_RELEASE);
        __atomic_store_n((uint64_t *)(f->map + C(0) + STX_LUT_ENTRY(3)), other, __ATOMIC_RELEASE);
        ctl32(f, C(0) + STX_RID_ENTRY(5), stx_rid_entry(0x7700) | 9u << 1);
        backend_open(f);
        assert_int_equal(reg64(f, C(0) + STX_LUT_ENTRY(2)), 0);
        assert_int_equal(reg64(f, C(0) + STX_LUT_ENTRY(3)), other);
        assert_int_equal(reg32(f, C(0) + STX_RID_ENTRY(5)), 0);
        assert_int_equal(reg32(f, C(0) + STX_RID_ENTRY(1)), stx_rid_entry(0x0008) | 2u << 1);
}

/* ---- the switch found from the NT function ----------------------------------------------------
 */

/* With no gas in the file, a borrow and a return program the switch each adapter's bdf leads
 * to in sysfs, as with gas given (setup_found). */
static void test_found_from_bdf(void **state)
{
        test_bar_setup_at_probe(state);
        test_borrow_and_return(state);
}

/* What the backend cannot find is refused at open with a sentence, nothing opened: a switch
 * whose partition is not the file's (a's bdf leading to b's switch), none owning the NT
 * function, two that could. Then the right tree opens. */
static void test_found_refusals(void **state)
{
        struct fx *f = *state;
        backend_close(f);
        const char *root = lntb_sys_current->root;
        char gas[128], why[512], p[400];
        snprintf(gas, sizeof(gas), "%s/stx.gas", f->dir);
        struct ntbf_backend_env env = {f->t, f->dir, NTBF_NONE, NULL};
        snprintf(p, sizeof(p), "rm -rf '%s/sys/class/switchtec'", root);
        assert_int_equal(system(p), 0);
        stxm_fake_sysfs(root, "switchtec0", "0000:00:03.0", 1, gas);
        assert_int_equal(f->o->open(&env, &f->b, why, sizeof(why)), NTBF_ECONFIG);
        assert_null(f->b);
        assert_non_null(strstr(why, "adapter a.nt0 has switchtec: {partition: 0}, but its "
                                    "switch's management device switchtec0 (0000:00:03.0) is "
                                    "partition 1: correct the partition"));
        assert_int_equal(system(p), 0);
        stxm_fake_sysfs(root, "switchtec0", "0000:00:05.0", 0, gas);
        assert_int_equal(f->o->open(&env, &f->b, why, sizeof(why)), NTBF_ECONFIG);
        assert_non_null(strstr(why, "adapter a.nt0: no Switchtec management function is NT "
                                    "function 0000:00:03.0 or another function of its device: "
                                    "/sys/class/switchtec has switchtec0 (0000:00:05.0)"));
        assert_non_null(strstr(why, "switchtec: {gas: ...}"));
        stxm_fake_sysfs(root, "switchtec1", "0000:00:03.1", 0, gas);
        stxm_fake_sysfs(root, "switchtec2", "0000:00:03.2", 0, gas);
        assert_int_equal(f->o->open(&env, &f->b, why, sizeof(why)), NTBF_ECONFIG);
        assert_non_null(strstr(why, "adapter a.nt0: 2 Switchtec management functions could own "
                                    "NT function 0000:00:03.0"));
        assert_int_equal(system(p), 0);
        stxm_fake_sysfs(root, "switchtec0", "0000:00:03.0", 0, gas);
        stxm_fake_sysfs(root, "switchtec1", "0000:00:04.0", 1, gas);
        backend_open(f);
}

/* The host's own devices behind the switch: config space and where the kernel placed their
 * BARs, from sysfs under the backend's root (a device that is not VFIO's). */
static void test_host_devices(void **state)
{
        struct fx *f = *state;
        char d[600], p[700], cmd[700];
        snprintf(d, sizeof(d), "%s/sys/bus/pci/devices/0000:05:00.0", lntb_sys_current->root);
        snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", d);
        assert_int_equal(system(cmd), 0);
        uint32_t dev = ntbf_topo_find_device(f->t, ntbf_topo_find_node(f->t, "a"), "nvme0");
        assert_true(dev != NTBF_NONE);
        uint32_t v = 0;
        uint64_t addr[6], size[6];
        assert_int_equal(f->o->cfg_read(f->b, dev, 0, 0, 4, &v), -ENODEV);
        assert_int_equal(f->o->dev_bars(f->b, dev, 0, addr, size), -ENODEV);
        snprintf(p, sizeof(p), "%s/config", d);
        FILE *c = fopen(p, "w");
        assert_non_null(c);
        const uint8_t cfg[64] = {0x86, 0x80, 0x53, 0x09};
        assert_int_equal(fwrite(cfg, 1, sizeof(cfg), c), sizeof(cfg));
        fclose(c);
        snprintf(p, sizeof(p), "%s/resource", d);
        c = fopen(p, "w");
        assert_non_null(c);
        fprintf(c, "0x00000000fb200000 0x00000000fb203fff 0x0000000000140204\n");
        fclose(c);
        assert_int_equal(f->o->cfg_read(f->b, dev, 0, 0, 4, &v), 0);
        assert_int_equal(v, 0x09538086);
        assert_int_equal(f->o->cfg_write(f->b, dev, 0, 0x0c, 1, 0x10), 0);
        assert_int_equal(f->o->cfg_read(f->b, dev, 0, 0x0c, 1, &v), 0);
        assert_int_equal(v, 0x10);
        assert_int_equal(f->o->dev_bars(f->b, dev, 0, addr, size), 0);
        assert_int_equal(addr[0], 0xfb200000);
        assert_int_equal(size[0], 0x4000);
        assert_int_equal(addr[1] | size[1], 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_bar_setup_at_probe, setup, teardown),
            cmocka_unit_test_setup_teardown(test_borrow_and_return, setup, teardown),
            cmocka_unit_test_setup_teardown(test_rid_refusals, setup, teardown),
            cmocka_unit_test_setup_teardown(test_full_table, setup, teardown),
            cmocka_unit_test_setup_teardown(test_error_mid_device, setup, teardown),
            cmocka_unit_test_setup_teardown(test_error_code, setup, teardown),
            cmocka_unit_test_setup_teardown(test_bad_args, setup, teardown),
            cmocka_unit_test_setup_teardown(test_status_never_settles, setup_short, teardown),
            cmocka_unit_test_setup_teardown(test_readback_at_probe, setup, teardown),
            cmocka_unit_test_setup_teardown(test_found_from_bdf, setup_found, teardown),
            cmocka_unit_test_setup_teardown(test_found_refusals, setup_found, teardown),
            cmocka_unit_test_setup_teardown(test_host_devices, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
