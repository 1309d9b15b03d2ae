/* tests/unit/test_simfab_devhost.c: the device host: model runners, FLR, DMA engines, the reaper.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "ntbfab/error.h"
#include "fixtures.h"
#include "simfab_fx.h"
#include "cfgspace.h"
#include "nvme.h"
#include "simfab_mirror.h"

#define MiB NTBF_MiB
/* How long a wait for the device host may take: a bound only, generous for a loaded machine
 * (2 s was not: an FLR waited longer under a load of 14 on 2 cores). */
#define WAIT_MS 60000

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_us(unsigned us)
{
        struct timespec ts = {0, (long)us * 1000};
        nanosleep(&ts, NULL);
}

static volatile uint32_t *reg32(uint8_t *regs, unsigned off)
{
        return (volatile uint32_t *)(regs + off);
}

static volatile uint64_t *reg64(uint8_t *regs, unsigned off)
{
        return (volatile uint64_t *)(regs + off);
}

/* Wait until the mirror's DONE register reaches want (at most 2 s). */
static bool wait_done(uint8_t *regs, uint32_t want)
{
        for (uint64_t end = now_ms() + WAIT_MS; now_ms() < end;) {
                if (__atomic_load_n(reg32(regs, MIRROR_DONE), __ATOMIC_ACQUIRE) >= want)
                        return true;
                sleep_us(100);
        }
        return false;
}

static void ring(uint8_t *regs, uint64_t src, uint64_t dst, uint32_t len)
{
        *reg64(regs, MIRROR_SRC) = src;
        *reg64(regs, MIRROR_DST) = dst;
        *reg32(regs, MIRROR_LEN) = len;
        __atomic_store_n(reg32(regs, MIRROR_DOORBELL), 1, __ATOMIC_RELEASE);
}

struct rig {
        struct fab f;
        uint32_t dev;
        uint8_t *regs;
        uint8_t *cfg;
};

static void rig_up(struct rig *g)
{
        struct ntbf_topo *t = fab_b2b(false);
        g->dev = fab_add_dev(t, 0, "mirror0", 3, 1);
        fab_up(&g->f, t);
        struct ntbf_rid r = {0, 0x0300, 0xffff};
        assert_int_equal(g->f.ops->rid_add(g->f.h[0], &r, NULL), 0);
        g->regs = fab_ram(&g->f, 0, ntbf_device_bar_addr(&t->devices[g->dev], 0, 0), 4096);
        g->cfg = ntbf_sim_cfg(g->f.b, g->dev, 0);
        assert_non_null(g->cfg);
}

static void test_mirror_model(void **state)
{
        (void)state;
        struct rig g;
        rig_up(&g);
        struct fab *f = &g.f;
        /* Config space was built when the fabric was created (cfgspace, no model layout). */
        assert_int_equal(ntbf_sim_cfg_read(g.cfg, NTBF_PCI_CAP_PTR, 1) != 0, 1);
        uint32_t pcie = ntbf_sim_cfg_find_cap(g.cfg, NTBF_PCI_CAP_ID_EXP);
        assert_int_not_equal(pcie, 0);

        struct ntbf_mem src, dst;
        assert_int_equal(f->ops->mem_alloc(f->h[0], 16384, 0, &src), 0);
        assert_int_equal(f->ops->mem_alloc(f->h[1], 16384, 0, &dst), 0);
        for (int i = 0; i < 16384; i++)
                ((uint8_t *)src.addr)[i] = (uint8_t)(i * 13 + 1);
        fab_slot(f, 0, 0, 1, dst.bus_addr & ~(MiB - 1));
        struct ntbf_sim_devhost_opts o = {.model_for = simfab_mirror_for};
        struct ntbf_sim_devhost *dh;
        char why[256];
        assert_int_equal(ntbf_sim_devhost_start(f->b, &o, &dh, why, sizeof(why)), 0);
        struct ntbf_sim_devhost *dh2;
        assert_int_equal(ntbf_sim_devhost_start(f->b, &o, &dh2, why, sizeof(why)), NTBF_EBUSY);
        assert_int_equal(*reg32(g.regs, MIRROR_CREATES), 1);

        /* Device DMA from local RAM across the fabric into b's memory. */
        ring(g.regs, src.bus_addr, fab_win(f, 0, 0, dst.bus_addr & (MiB - 1)), 16384);
        assert_true(wait_done(g.regs, 1));
        assert_int_equal(*reg32(g.regs, MIRROR_STATUS), 1);
        assert_memory_equal(dst.addr, src.addr, 16384);
        assert_int_equal(fab_ctr(f, 0).tx, 1); /* 16 KiB in one slot: one piece */

        /* Its MSI reaches b's vector through the MSI window. */
        struct ntbf_irq irq;
        assert_int_equal(f->ops->irq_alloc(f->h[1], &irq), 0);
        fab_slot(f, 0, 1, 1, irq.addr);
        *reg64(g.regs, MIRROR_MSI_ADDR) = fab_win(f, 0, 1, 0);
        *reg32(g.regs, MIRROR_MSI_DATA) = irq.data;
        ring(g.regs, src.bus_addr, fab_win(f, 0, 0, dst.bus_addr & (MiB - 1)), 64);
        assert_true(wait_done(g.regs, 2));
        assert_int_equal(fab_wait_fd(irq.fd, WAIT_MS), 1);

        /* A drop is the device's error, as on hardware. */
        *reg64(g.regs, MIRROR_MSI_ADDR) = 0;
        ring(g.regs, src.bus_addr, fab_win(f, 0, 5, 0), 64);
        assert_true(wait_done(g.regs, 3));
        assert_int_equal((int32_t)*reg32(g.regs, MIRROR_STATUS), NTBF_EUNPROGRAMMED);
        assert_int_equal(fab_ctr(f, 0).drop_unprogrammed, 1);

        /* Function level reset through a config write, as a driver does: pending until the
         * runner has reset the model. */
        assert_int_equal(
            ntbf_sim_cfg_write(g.cfg, pcie + NTBF_PCI_EXP_DEVCTL, NTBF_PCI_EXP_DEVCTL_FLR, 2), 0);
        for (uint64_t end = now_ms() + WAIT_MS; now_ms() < end && ntbf_sim_cfg_flr_pending(g.cfg);)
                sleep_us(100);
        assert_false(ntbf_sim_cfg_flr_pending(g.cfg));
        assert_int_equal(*reg32(g.regs, MIRROR_RESETS), 1);
        assert_int_equal(*reg32(g.regs, MIRROR_DONE), 0);

        /* A dead host's devices stop; revival resets them. */
        struct ntbf_fault hf = {NTBF_FAULT_HOST_DEATH, 0};
        assert_int_equal(f->ops->fault(f->b, &hf), 0);
        sleep_us(5000);
        ring(g.regs, src.bus_addr, src.bus_addr + 8192, 64);
        sleep_us(20000);
        assert_int_equal(*reg32(g.regs, MIRROR_DONE), 0);
        hf.kind = NTBF_FAULT_HOST_REVIVE;
        assert_int_equal(f->ops->fault(f->b, &hf), 0);
        for (uint64_t end = now_ms() + WAIT_MS; now_ms() < end && *reg32(g.regs, MIRROR_RESETS) < 2;)
                sleep_us(100);
        assert_int_equal(*reg32(g.regs, MIRROR_RESETS), 2);

        struct ntbf_sim_devhost_stats st;
        ntbf_sim_devhost_stats(dh, &st);
        assert_int_equal(st.models, 1);
        assert_int_equal(st.flr, 1);
        assert_int_equal(st.resets, 1);
        assert_true(st.work >= 3);
        ntbf_sim_devhost_stop(dh);
        /* The role is free again, and a restarted host keeps the registers. */
        assert_int_equal(ntbf_sim_devhost_start(f->b, &o, &dh, why, sizeof(why)), 0);
        assert_int_equal(*reg32(g.regs, MIRROR_CREATES), 2);
        ntbf_sim_devhost_stop(dh);
        f->ops->irq_free(f->h[1], &irq);
        fab_down(f);
}

/* The built-in NVMe model in the device host: Identify data lands in another node's RAM. */
static void test_nvme_model_across_fabric(void **state)
{
        (void)state;
        struct ntbf_topo *t = fab_b2b(false);
        uint32_t d = ntbf_topo_add_device(t, 0, "nvme0");
        t->devices[d].bus = 4;
        ntbf_sim_defaults(&t->devices[d].sim, NTBF_SIM_NVME);
        t->devices[d].sim.capacity = 16 * MiB;
        t->devices[d].sim.msix = 8;
        ntbf_device_apply_sim(&t->devices[d]);
        struct fab f;
        fab_up(&f, t);
        /* Powered on at creation: config space with the model's MSI-X layout. */
        uint8_t *cfg = ntbf_sim_cfg(f.b, d, 0);
        assert_int_equal(ntbf_sim_cfg_read(cfg, NTBF_PCI_VENDOR_ID, 2), NTBF_SIM_VENDOR_ID);
        assert_int_equal(ntbf_sim_cfg_read(cfg, NTBF_PCI_DEVICE_ID, 2), NTBF_SIM_NVME_DEVICE_ID);
        struct ntbf_sim_msix mx;
        ntbf_sim_cfg_msix(cfg, &mx);
        assert_true(mx.present);
        assert_int_equal(mx.vectors, 8);
        assert_int_equal(
            ntbf_sim_cfg_write(cfg, NTBF_PCI_COMMAND, NTBF_PCI_CMD_MEMORY | NTBF_PCI_CMD_MASTER, 2),
            0);
        struct ntbf_rid r = {0, 0x0400, 0xfff8};
        assert_int_equal(f.ops->rid_add(f.h[0], &r, NULL), 0);
        struct ntbf_mem buf;
        assert_int_equal(f.ops->mem_alloc(f.h[1], 4096, 0, &buf), 0);
        fab_slot(&f, 0, 0, 1, buf.bus_addr & ~(MiB - 1));

        struct ntbf_sim_devhost_opts o = {.model_for = ntbf_sim_builtin_model};
        struct ntbf_sim_devhost *dh;
        char why[256];
        assert_int_equal(ntbf_sim_devhost_start(f.b, &o, &dh, why, sizeof(why)), 0);
        uint8_t *regs = fab_ram(&f, 0, ntbf_device_bar_addr(&t->devices[d], 0, 0), 0x4000);
        uint8_t *sq = fab_ram(&f, 0, 2 * MiB, 4096), *cq = fab_ram(&f, 0, 3 * MiB, 4096);
        *reg32(regs, NTBF_NVME_REG_AQA) = 15u << 16 | 15u;
        *reg64(regs, NTBF_NVME_REG_ASQ) = 2 * MiB;
        *reg64(regs, NTBF_NVME_REG_ACQ) = 3 * MiB;
        *reg32(regs, NTBF_NVME_REG_CC) =
            NTBF_NVME_CC_EN | NTBF_NVME_CC_IOSQES_64 | NTBF_NVME_CC_IOCQES_16;
        for (uint64_t end = now_ms() + WAIT_MS;
             now_ms() < end && !(*reg32(regs, NTBF_NVME_REG_CSTS) & NTBF_NVME_CSTS_RDY);)
                sleep_us(100);
        assert_true(*reg32(regs, NTBF_NVME_REG_CSTS) & NTBF_NVME_CSTS_RDY);
        /* Identify Controller, data pointer through a's window into b's buffer. */
        uint32_t cmd[16] = {0};
        cmd[0] = NTBF_NVME_ADM_IDENTIFY | 7u << 16;
        uint64_t prp = fab_win(&f, 0, 0, buf.bus_addr & (MiB - 1));
        memcpy(&cmd[6], &prp, 8);
        cmd[10] = NTBF_NVME_CNS_CTRL;
        memcpy(sq, cmd, 64);
        __atomic_store_n(reg32(regs, NTBF_NVME_SQ_TDBL(0)), 1, __ATOMIC_RELEASE);
        volatile uint32_t *cqe = (volatile uint32_t *)cq;
        for (uint64_t end = now_ms() + WAIT_MS; now_ms() < end && !(cqe[3] & 0x10000);)
                sleep_us(100);
        assert_true(cqe[3] & 0x10000);        /* phase tag of the first pass */
        assert_int_equal(cqe[3] & 0xffff, 7); /* command identifier */
        assert_int_equal(cqe[3] >> 17, 0);    /* success */
        uint16_t vid;
        memcpy(&vid, buf.addr, 2);
        assert_int_equal(vid, NTBF_SIM_VENDOR_ID);
        assert_memory_equal((uint8_t *)buf.addr + 24, NTBF_NVME_MN, strlen(NTBF_NVME_MN));
        assert_int_equal(fab_ctr(&f, 0).tx, 1);
        ntbf_sim_devhost_stop(dh);
        assert_int_equal(f.ops->mem_free(f.h[1], &buf), 0);
        fab_down(&f);
}

static void test_dma_engine(void **state)
{
        (void)state;
        struct fab f;
        fab_up(&f, fab_b2b(false));
        struct ntbf_caps c;
        assert_int_equal(f.ops->caps(f.h[0], &c), 0);
        assert_true(c.flags & NTBF_CAP_DMA);
        assert_int_equal(c.dma_channels, 4);
        uint8_t *local = fab_ram(&f, 0, 4 * MiB, 4 * MiB);
        for (int i = 0; i < 256 * 64; i++)
                local[i] = (uint8_t)i;
        /* Without a running engine the ring fills up. */
        for (uint64_t i = 0; i < 256; i++)
                assert_int_equal(
                    f.ops->dma_submit(f.h[0], 1, 4 * MiB + i * 64, 6 * MiB + i * 64, 64, 1000 + i),
                    0);
        assert_int_equal(f.ops->dma_submit(f.h[0], 1, 4 * MiB, 6 * MiB, 64, 9), -EBUSY);
        uint64_t cookies[300];
        int status[300];
        assert_int_equal(f.ops->dma_poll(f.h[0], 1, cookies, status, 300), 0);
        assert_int_equal(f.ops->dma_submit(f.h[0], 4, 0, 0, 64, 9), -EINVAL);

        struct ntbf_sim_devhost_opts o = {.no_reaper = true};
        struct ntbf_sim_devhost *dh;
        assert_int_equal(ntbf_sim_devhost_start(f.b, &o, &dh, NULL, 0), 0);
        unsigned got = 0;
        for (uint64_t end = now_ms() + WAIT_MS; got < 256 && now_ms() < end;) {
                int n = f.ops->dma_poll(f.h[0], 1, cookies + got, status + got, 300 - got);
                assert_true(n >= 0);
                got += (unsigned)n;
                if (!n)
                        sleep_us(100);
        }
        assert_int_equal(got, 256);
        for (unsigned i = 0; i < 256; i++) {
                assert_int_equal(cookies[i], 1000 + i); /* oldest first */
                assert_int_equal(status[i], 0);
        }
        assert_memory_equal(fab_ram(&f, 0, 6 * MiB, 256 * 64), local, 256 * 64);

        /* Across the fabric, and one into an unprogrammed slot. */
        fab_slot(&f, 0, 3, 1, 32 * MiB);
        assert_int_equal(f.ops->dma_submit(f.h[0], 2, 4 * MiB, fab_win(&f, 0, 3, 0), MiB, 1), 0);
        assert_int_equal(f.ops->dma_submit(f.h[0], 2, 4 * MiB, fab_win(&f, 0, 4, 0), 4096, 2), 0);
        assert_int_equal(f.ops->dma_submit(f.h[0], 2, fab_win(&f, 0, 3, 0), 8 * MiB, 4096, 3), 0);
        got = 0;
        for (uint64_t end = now_ms() + WAIT_MS; got < 3 && now_ms() < end;) {
                int n = f.ops->dma_poll(f.h[0], 2, cookies + got, status + got, 3 - got);
                got += (unsigned)n;
                if (!n)
                        sleep_us(100);
        }
        assert_int_equal(got, 3);
        assert_int_equal(cookies[0], 1);
        assert_int_equal(status[0], 0);
        assert_int_equal(cookies[1], 2);
        assert_int_equal(status[1], NTBF_EUNPROGRAMMED);
        assert_int_equal(cookies[2], 3);
        assert_int_equal(status[2], 0);
        assert_memory_equal(fab_ram(&f, 1, 32 * MiB, MiB), local, MiB);
        assert_memory_equal(fab_ram(&f, 0, 8 * MiB, 4096), local, 4096);
        assert_int_equal(fab_ctr(&f, 0).drop_unprogrammed, 1);
        struct ntbf_sim_devhost_stats st;
        ntbf_sim_devhost_stats(dh, &st);
        assert_int_equal(st.dma_engines, 2);
        assert_int_equal(st.dma_done, 259);
        ntbf_sim_devhost_stop(dh);
        fab_down(&f);
}

/*
 * CPU stores through a multicast mapping are posted writes: clearing the translation right
 * after them must not lose them (a sender that stores and leaves the group, as a reflective
 * memory program's last barrier does). The device host naps 200 ms when idle here, so
 * without a drain the clear always comes before the replication's next pass.
 */
static void test_mcast_stores_before_clear(void **state)
{
        (void)state;
        struct fab f;
        fab_up(&f, fab_star(3, false));
        for (uint32_t m = 1; m <= 2; m++)
                assert_int_equal(f.ops->mcast_join(f.h[m], 5, 40 * MiB, MiB), 0);
        struct ntbf_rid cpu = {0, 0, 0xffff};
        assert_int_equal(f.ops->switch_rid_add(f.h[0], 0, &cpu), 0);
        struct ntbf_sim_devhost_opts o = {.no_reaper = true, .max_nap_ns = 200000000};
        struct ntbf_sim_devhost *dh;
        assert_int_equal(ntbf_sim_devhost_start(f.b, &o, &dh, NULL, 0), 0);
        for (uint32_t round = 1; round <= 3; round++) {
                struct ntbf_xlat x = {NTBF_NONE, NTBF_NONE, 0, 5, MiB};
                assert_int_equal(f.ops->xlat_set(f.h[0], 2, &x), 0);
                sleep_us(300000); /* the replication goes idle: its naps reach 200 ms */
                volatile uint32_t *w;
                assert_int_equal(f.ops->map_window(f.h[0], 0,
                                                   fab_win(&f, 0, 2, 0) - fab_win(&f, 0, 0, 0),
                                                   4096, 0, (void **)&w),
                                 0);
                w[7] = 0xc0de0000 + round;
                __atomic_thread_fence(__ATOMIC_SEQ_CST);
                assert_int_equal(f.ops->unmap_window(f.h[0], (void *)w, 4096), 0);
                assert_int_equal(f.ops->xlat_clear(f.h[0], 2), 0);
                for (uint32_t m = 1; m <= 2; m++) {
                        volatile uint32_t *got = (volatile uint32_t *)fab_ram(&f, m, 40 * MiB, 64);
                        assert_int_equal(got[7], 0xc0de0000 + round);
                }
        }
        ntbf_sim_devhost_stop(dh);
        fab_down(&f);
}

static void test_reaper(void **state)
{
        (void)state;
        struct fab f;
        fab_up(&f, fab_b2b(false));
        struct ntbf_sim_devhost *dh;
        assert_int_equal(ntbf_sim_devhost_start(f.b, NULL, &dh, NULL, 0), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                /* A process of node b exports memory and takes vectors, then dies. */
                struct ntbf_backend *b;
                struct ntbf_adapter_h *h;
                struct ntbf_backend_env env = {f.t, f.dir, 1};
                struct ntbf_mem m;
                struct ntbf_irq irq;
                if (ntbf_sim_attach(&env, &b, NULL, 0) || f.ops->probe(b, 1, &h))
                        _exit(2);
                for (int i = 0; i < 10; i++)
                        if (f.ops->mem_alloc(h, 1 << 20, 0, &m) || f.ops->irq_alloc(h, &irq))
                                _exit(3);
                _exit(0);
        }
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        uint64_t t0 = now_ms();
        struct ntbf_sim_owned own = {1, 1, 1};
        while (now_ms() - t0 < WAIT_MS) {
                assert_int_equal(ntbf_sim_owned(f.b, 1, pid, &own), 0);
                if (!own.mem && !own.irqs)
                        break;
                sleep_us(1000);
        }
        assert_int_equal(own.mem, 0);
        assert_int_equal(own.irqs, 0);
        print_message("reaped 10 allocations and 10 vectors %llu ms after the owner's death\n",
                      (unsigned long long)(now_ms() - t0));
        struct ntbf_sim_devhost_stats s;
        ntbf_sim_devhost_stats(dh, &s);
        assert_int_equal(s.reaped_mem, 10);
        assert_int_equal(s.reaped_irqs, 10);
        char why[256];
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), 0);
        /* The memory is usable again. */
        struct ntbf_mem m;
        assert_int_equal(f.ops->mem_alloc(f.h[1], 250 << 20, 0, &m), 0);
        assert_int_equal(f.ops->mem_free(f.h[1], &m), 0);
        ntbf_sim_devhost_stop(dh);
        fab_down(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_mirror_model),
            cmocka_unit_test(test_nvme_model_across_fabric),
            cmocka_unit_test(test_dma_engine),
            cmocka_unit_test(test_mcast_stores_before_clear),
            cmocka_unit_test(test_reaper),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
