/* tests/unit/test_device_api.c: the device API on a two-host simulated fabric, fake daemon. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "ntbfab/device.h"
#include "ntbfab/error.h"
#include "accel.h"
#include "cfgspace.h"
#include "fakedaemon.h"
#include "nvme.h"

#define KiB NTBF_KiB
#define MiB NTBF_MiB

/*
 * "lender" lends an NVMe drive and two accelerators; "borrower" borrows them through a
 * fake daemon that programs the fabric as a borrow would (fakedaemon.c). Both hosts have
 * an IOMMU (the default), so the borrower maps DMA buffers in its IOMMU behind the DMA
 * window. 1 GiB windows of 256 slots: 4 MiB per slot.
 */
static const char *cluster_yaml =
    "cluster: {name: devapi, backend: sim}\n"
    "nodes:\n"
    "  - name: lender\n"
    "    id: 4\n"
    "    address: 127.0.0.1:7700\n"
    "    ram: 256MiB\n"
    "    adapters:\n"
    "      - {name: ntb0, model: pxh830, window: 1GiB}\n"
    "    devices:\n"
    "      - {name: nvme0, bdf: \"0000:03:00.0\", lend: true,\n"
    "         sim: {model: nvme, capacity: 16MiB, queues: 4, msix: 4}}\n"
    "      - {name: acc0, bdf: \"0000:04:00.0\", lend: true,\n"
    "         sim: {model: accel, memory: 16MiB, msix: 4}}\n"
    "      - {name: acc1, bdf: \"0000:05:00.0\", lend: true,\n"
    "         sim: {model: accel, memory: 4MiB, msix: 2}}\n"
    "  - name: borrower\n"
    "    id: 8\n"
    "    address: 127.0.0.2:7700\n"
    "    ram: 256MiB\n"
    "    adapters:\n"
    "      - {name: ntb0, model: pxh830, window: 1GiB}\n"
    "links:\n"
    "  - [lender.ntb0, borrower.ntb0]\n";

#define LENDER   0u
#define BORROWER 1u

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

static volatile uint32_t *reg32(void *bar, unsigned off)
{
        return (volatile uint32_t *)((uint8_t *)bar + off);
}

static uint64_t rd64(void *bar, unsigned off)
{
        return *(volatile uint64_t *)((uint8_t *)bar + off);
}

/* Wait up to ms for fd; returns the eventfd count read, 0 on timeout. */
static uint64_t wait_fd(int fd, int ms)
{
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, ms) != 1)
                return 0;
        uint64_t v = 0;
        if (read(fd, &v, sizeof(v)) != sizeof(v))
                return 0;
        return v;
}

static bool readable(int fd)
{
        struct pollfd p = {fd, POLLIN, 0};
        return poll(&p, 1, 0) == 1;
}

/* ---- the rig ---------------------------------------------------------------------------- */

struct rig {
        struct fk_fabric f;
        struct fakedaemon fk;
        struct ntbf_ctx *ctx;
        struct fk_dev *nvme, *acc, *acc1;
};

/* The rig of the running test, so that a failed test is cleaned up by teardown. */
static struct rig *current;

static void rig_up_yaml(struct rig *g, const char *node, const char *yaml)
{
        memset(g, 0, sizeof(*g));
        current = g;
        unsetenv("NTBFAB_CONFIG");
        unsetenv("NTBFAB_RPC_TIMEOUT_MS");
        assert_int_equal(fk_fabric_up(&g->f, yaml, true), 0);
        assert_int_equal(fk_start(&g->fk, &g->f, node), 0);
        if (!strcmp(node, "borrower")) {
                g->nvme = fk_borrow(&g->fk, "lender", "nvme0", 0, 64 * MiB, 32 * MiB);
                g->acc = fk_borrow(&g->fk, "lender", "acc0", 0, 64 * MiB, 0);
                g->acc1 = fk_borrow(&g->fk, "lender", "acc1", 0, 4 * MiB, 64 * KiB);
        } else {
                g->nvme = fk_local(&g->fk, "nvme0", 0);
                g->acc = fk_local(&g->fk, "acc0", 0);
                g->acc1 = fk_local(&g->fk, "acc1", 0);
        }
        assert_non_null(g->nvme);
        assert_non_null(g->acc);
        assert_non_null(g->acc1);
        int r = ntbf_ctx_open(g->f.dir, node, &g->ctx);
        if (r)
                fail_msg("ntbf_ctx_open: %s", ntbf_ctx_error(NULL));
}

static void rig_up(struct rig *g, const char *node)
{
        rig_up_yaml(g, node, cluster_yaml);
}

static void rig_down(struct rig *g)
{
        current = NULL;
        ntbf_ctx_close(g->ctx);
        fk_kill(&g->fk);
        fk_fabric_down(&g->f);
}

static struct ntbf_dev *open_ok(struct rig *g, uint32_t fdid)
{
        struct ntbf_dev *d = NULL;
        int r = ntbf_dev_open(g->ctx, fdid, &d);
        if (r)
                fail_msg("ntbf_dev_open(0x%x): %s", fdid, ntbf_ctx_error(g->ctx));
        return d;
}

static uint32_t cfg(struct ntbf_dev *d, uint32_t off, unsigned size)
{
        uint32_t v = 0;
        int r = ntbf_dev_cfg_read(d, off, size, &v);
        if (r)
                fail_msg("cfg_read(0x%x): %s", off, ntbf_strerror(r));
        return v;
}

static void *bar(struct ntbf_dev *d, unsigned b)
{
        void *p = NULL;
        size_t size = 0;
        int r = ntbf_dev_map_bar(d, b, &p, &size);
        if (r)
                fail_msg("map_bar(%u): %s", b, ntbf_strerror(r));
        return p;
}

/* ---- the accelerator ------------------------------------------------------------------------ */

static void accel_enable(struct ntbf_dev *d, void *regs, uint32_t ctrl)
{
        assert_int_equal(
            ntbf_dev_cfg_write(d, NTBF_PCI_COMMAND, 2, NTBF_PCI_CMD_MEMORY | NTBF_PCI_CMD_MASTER),
            0);
        *reg32(regs, NTBF_ACCEL_REG_CTRL) = NTBF_ACCEL_CTRL_ENABLE | ctrl;
        for (uint64_t end = now_ms() + 3000; now_ms() < end;) {
                if (*reg32(regs, NTBF_ACCEL_REG_STATUS) & NTBF_ACCEL_STATUS_READY)
                        return;
                sleep_ms(1);
        }
        fail_msg("the accelerator did not become ready");
}

/* Post one copy and wait for it; returns the descriptor's status. */
static uint32_t accel_copy(void *regs, uint64_t src, uint64_t dst, uint32_t len, uint32_t flags)
{
        uint32_t tail = *reg32(regs, NTBF_ACCEL_REG_TAIL);
        uint32_t done = *reg32(regs, NTBF_ACCEL_REG_COMPLETED);
        unsigned d = NTBF_ACCEL_RING_OFF + 32 * tail;
        *(volatile uint64_t *)((uint8_t *)regs + d) = src;
        *(volatile uint64_t *)((uint8_t *)regs + d + 8) = dst;
        *reg32(regs, d + 16) = len;
        *reg32(regs, d + 20) = flags;
        *reg32(regs, d + 24) = 0;
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        *reg32(regs, NTBF_ACCEL_REG_TAIL) = (tail + 1) % NTBF_ACCEL_RING_SIZE;
        for (uint64_t end = now_ms() + 5000; now_ms() < end;) {
                if (*reg32(regs, NTBF_ACCEL_REG_COMPLETED) != done)
                        return *reg32(regs, d + 24);
                sleep_ms(1);
        }
        fail_msg("the copy did not complete");
        return 0;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
        for (size_t i = 0; i < n; i++)
                p[i] = (uint8_t)((i * 2654435761u + seed) >> 13);
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_open_config_and_bars(void **state)
{
        (void)state;
        static struct rig g; /* static: teardown may clean it up after a failed assert */
        rig_up(&g, "borrower");
        struct ntbf_dev *nvme = open_ok(&g, g.nvme->fdid);
        struct ntbf_dev_info in;
        assert_int_equal(ntbf_dev_info(nvme, &in), 0);
        assert_int_equal(in.fdid, 4u << 12 | 0);
        assert_false(in.local);
        assert_string_equal(in.lender, "lender");
        assert_string_equal(in.lender_bdf, "0000:03:00.0");
        assert_string_equal(in.bdf, g.nvme->bdf);
        assert_int_equal(in.vendor_id, NTBF_SIM_VENDOR_ID);
        assert_int_equal(in.device_id, NTBF_SIM_NVME_DEVICE_ID);
        assert_int_equal(in.class_code, NTBF_CLASS_NVME);
        assert_int_equal(in.bars[0].size, NTBF_NVME_BAR0_SIZE);
        const struct ntbf_adapter *ba = &g.f.t->adapters[g.f.t->nodes[BORROWER].adapters[0]];
        assert_int_equal(in.bars[0].addr, ba->window_base + g.nvme->bar_off[0]);
        assert_int_equal(in.bars[1].size, 0);
        assert_int_equal(in.dma_window, 64 * MiB);
        assert_int_equal(in.msix_vectors, 4);

        /* Config space: the device's own ids, through the daemon. */
        assert_int_equal(cfg(nvme, NTBF_PCI_VENDOR_ID, 2), NTBF_SIM_VENDOR_ID);
        assert_int_equal(cfg(nvme, NTBF_PCI_DEVICE_ID, 2), NTBF_SIM_NVME_DEVICE_ID);
        assert_int_equal(cfg(nvme, 0, 4),
                         (uint32_t)NTBF_SIM_NVME_DEVICE_ID << 16 | NTBF_SIM_VENDOR_ID);
        assert_int_equal(cfg(nvme, NTBF_PCI_REVISION, 4) >> 8, NTBF_CLASS_NVME);
        /* Intercepted for a borrowed device: no INTx pin. */
        assert_int_equal(cfg(nvme, NTBF_PCI_INTERRUPT_PIN, 1), 0);
        uint32_t v;
        assert_int_equal(ntbf_dev_cfg_read(nvme, 0, 3, &v), -EINVAL);
        assert_int_equal(ntbf_dev_cfg_read(nvme, 1, 2, &v), -EINVAL);
        assert_int_equal(ntbf_dev_cfg_read(nvme, 4096, 4, &v), -EINVAL);
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "naturally aligned"));
        assert_int_equal(ntbf_dev_cfg_read(nvme, 0, 4, NULL), -EINVAL);
        assert_int_equal(ntbf_dev_cfg_write(nvme, 0, 1, 0x100), -EINVAL);

        /* BAR0 through the borrower's window: the controller's registers. */
        void *regs = bar(nvme, 0);
        uint64_t cap = rd64(regs, NTBF_NVME_REG_CAP);
        assert_int_equal(NTBF_NVME_CAP_MQES(cap), NTBF_NVME_MQES);
        assert_true(cap & NTBF_NVME_CAP_CQR);
        assert_true(cap & NTBF_NVME_CAP_CSS_NVM);
        assert_int_equal(NTBF_NVME_CAP_TO(cap), NTBF_NVME_TO);
        assert_int_equal(NTBF_NVME_CAP_DSTRD(cap), 0);
        assert_int_equal(*reg32(regs, NTBF_NVME_REG_VS), NTBF_NVME_VS);
        /* The same bytes the lender's BAR holds. */
        void *direct;
        assert_int_equal(ntbf_sim_phys_ptr(g.f.b, LENDER, g.nvme->bar_addr[0], 64, &direct), 0);
        assert_memory_equal(direct, regs, 64);
        void *again;
        size_t size;
        assert_int_equal(ntbf_dev_map_bar(nvme, 0, &again, &size), 0);
        assert_ptr_equal(again, regs);
        assert_int_equal(size, NTBF_NVME_BAR0_SIZE);
        assert_int_equal(ntbf_dev_map_bar(nvme, 1, &again, &size), -ENOENT);
        assert_int_equal(ntbf_dev_map_bar(nvme, 6, &again, &size), -EINVAL);
        assert_int_equal(ntbf_dev_map_bar(nvme, 0, NULL, &size), -EINVAL);
        assert_int_equal(ntbf_dev_unmap_bar(nvme, 0), 0);
        assert_int_equal(ntbf_dev_unmap_bar(nvme, 0), -EINVAL);
        assert_int_equal(ntbf_dev_unmap_bar(nvme, 7), -EINVAL);

        /* By the shadow address; unknown devices and malformed addresses. */
        struct ntbf_dev *byaddr;
        assert_int_equal(ntbf_dev_open_bdf(g.ctx, g.nvme->bdf, &byaddr), 0);
        assert_int_equal(ntbf_dev_info(byaddr, &in), 0);
        assert_int_equal(in.fdid, g.nvme->fdid);
        ntbf_dev_close(byaddr);
        assert_int_equal(ntbf_dev_open_bdf(g.ctx, "not-a-bdf", &byaddr), -EINVAL);
        assert_null(byaddr);
        assert_int_equal(ntbf_dev_open(g.ctx, 0x4fff, &byaddr), NTBF_ENOTFOUND);
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "device.open"));
        assert_int_equal(ntbf_dev_open(g.ctx, 0x4000, NULL), -EINVAL);

        /* A daemon answer without what the API needs: refused, and the handle given back. */
        unsigned closes = atomic_load(&g.fk.closes);
        static const char *const keys[] = {"dma", "msi", "iova", "info"};
        for (unsigned k = 0; k < 4; k++) {
                g.fk.drop_key = keys[k];
                assert_int_equal(ntbf_dev_open(g.ctx, g.acc->fdid, &byaddr), NTBF_EPROTO);
                assert_non_null(strstr(ntbf_ctx_error(g.ctx), keys[k]));
                assert_int_equal(atomic_load(&g.fk.closes), closes + k + 1);
        }
        /* Without a handle there is nothing to give back (the daemon drops it with the
         * connection). */
        g.fk.drop_key = "handle";
        assert_int_equal(ntbf_dev_open(g.ctx, g.acc1->fdid, &byaddr), NTBF_EPROTO);
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "'handle'"));
        assert_int_equal(atomic_load(&g.fk.closes), closes + 4);
        g.fk.drop_key = NULL;

        /* Two devices at once; closing releases the handles at the daemon. */
        struct ntbf_dev *acc = open_ok(&g, g.acc->fdid);
        assert_int_equal(ntbf_dev_info(acc, &in), 0);
        assert_int_equal(in.device_id, NTBF_SIM_ACCEL_DEVICE_ID);
        assert_true(in.bars[2].prefetchable);
        assert_int_equal(in.bars[2].size, 16 * MiB);
        closes = atomic_load(&g.fk.closes);
        ntbf_dev_close(acc);
        ntbf_dev_close(nvme);
        assert_int_equal(atomic_load(&g.fk.closes), closes + 2);
        rig_down(&g);
}

/* The accelerator copies between its memory and a DMA-mapped buffer of the borrower. */
static void test_dma_both_ways(void **state)
{
        (void)state;
        static struct rig g; /* static: teardown may clean it up after a failed assert */
        rig_up(&g, "borrower");
        struct ntbf_dev *acc = open_ok(&g, g.acc->fdid);
        void *regs = bar(acc, 0), *mem = bar(acc, 2);
        assert_int_equal(*reg32(regs, NTBF_ACCEL_REG_ID), NTBF_ACCEL_ID);
        accel_enable(acc, regs, 0);
        /* Interception: Interrupt Disable was forced on with our Command write. */
        assert_true(cfg(acc, NTBF_PCI_COMMAND, 2) & NTBF_PCI_CMD_INTX_DIS);
        uint64_t dev_mem = rd64(regs, NTBF_ACCEL_REG_MEM_ADDR);
        assert_int_equal(dev_mem, g.acc->bar_addr[2]);

        const size_t N = 256 * KiB;
        uint8_t *buf;
        assert_int_equal(ntbf_dma_alloc(g.ctx, N, 0, (void **)&buf), 0);
        fill(buf, N, 1);
        uint64_t io;
        assert_int_equal(ntbf_dev_dma_map(acc, buf, N, &io), 0);
        /* An address in the DMA window the lender programmed, behind the borrower's IOMMU. */
        assert_true(io >= g.acc->dma_dev && io + N <= g.acc->dma_dev + g.acc->dma_size);
        assert_int_equal(io % 4096, 0);
        uint16_t rid = (uint16_t)ntbf_device_rid(&g.f.t->devices[g.acc->tdev], 0);
        uint8_t *seen = malloc(N);
        struct ntbf_sim_trace tr;
        assert_int_equal(ntbf_sim_read(g.f.b, LENDER, g.acc->tdev, rid, io, seen, N, &tr), 0);
        assert_memory_equal(seen, buf, N);
        assert_int_equal(tr.dst_node, BORROWER);

        /* Host buffer -> device memory. */
        assert_int_equal(accel_copy(regs, io, dev_mem, (uint32_t)N, 0), NTBF_ACCEL_ST_DONE);
        assert_memory_equal(mem, buf, N);
        /* Device memory -> host buffer, at an address inside a page. */
        fill((uint8_t *)mem + MiB, 5000, 7);
        uint8_t *buf2;
        assert_int_equal(ntbf_dma_alloc(g.ctx, 8192, 0, (void **)&buf2), 0);
        uint64_t io2;
        assert_int_equal(ntbf_dev_dma_map(acc, buf2 + 100, 5000, &io2), 0);
        assert_int_equal(io2 % 4096, 100);
        assert_int_equal(accel_copy(regs, dev_mem + MiB, io2, 5000, 0), NTBF_ACCEL_ST_DONE);
        assert_memory_equal(buf2 + 100, (uint8_t *)mem + MiB, 5000);
        assert_int_equal(buf2[99], 0);
        assert_int_equal(buf2[5100], 0);

        /* Unmapping is checked and really takes the pages out of the IOMMU. */
        assert_int_equal(ntbf_dev_dma_unmap(acc, io2, 4999 + 4096), -EINVAL); /* wrong size */
        assert_int_equal(ntbf_dev_dma_unmap(acc, io2 + 4096, 100), -EINVAL);  /* not a start */
        assert_int_equal(ntbf_dev_dma_unmap(acc, io2, 5000), 0);
        assert_int_equal(ntbf_dev_dma_unmap(acc, io2, 5000), -EINVAL); /* double unmap */
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "not a live mapping"));
        assert_int_equal(ntbf_dev_dma_unmap(acc, 0x1234000, 4096), -EINVAL);
        uint32_t st = accel_copy(regs, dev_mem, io2, 64, 0);
        assert_int_equal(st & 0xff, NTBF_ACCEL_ST_ERROR);
        assert_int_equal(NTBF_ACCEL_ST_REASON(st), NTBF_ACCEL_ERR_DST);
        assert_int_equal(ntbf_dev_dma_unmap(acc, io, N), 0);

        /* Only DMA memory can be mapped. */
        uint8_t stack[64];
        assert_int_equal(ntbf_dev_dma_map(acc, stack, sizeof(stack), &io), -EFAULT);
        assert_int_equal(ntbf_dev_dma_map(acc, buf, 0, &io), -EINVAL);
        assert_int_equal(ntbf_dev_dma_map(acc, buf, 4096, NULL), -EINVAL);
        assert_int_equal(ntbf_dev_dma_map(acc, buf2, 3 * MiB, &io), -EFAULT); /* past its chunk */
        free(seen);
        ntbf_dma_free(g.ctx, buf);
        ntbf_dma_free(g.ctx, buf2);
        ntbf_dev_close(acc);
        rig_down(&g);
}

/* An MSI-X interrupt of the borrowed accelerator arrives on the borrower's eventfd. */
static void test_msix(void **state)
{
        (void)state;
        static struct rig g; /* static: teardown may clean it up after a failed assert */
        rig_up(&g, "borrower");
        struct ntbf_dev *acc = open_ok(&g, g.acc->fdid);
        void *regs = bar(acc, 0);
        accel_enable(acc, regs, NTBF_ACCEL_CTRL_IRQ_ENABLE);
        int efd = -1;
        assert_int_equal(ntbf_dev_irq_enable(acc, 1, &efd), 0);
        assert_true(efd >= 0);
        /* The table entry holds the MSI window's device-side address, unmasked. */
        volatile uint32_t *e = reg32(regs, NTBF_ACCEL_MSIX_TABLE + 16 * 1);
        uint64_t addr = (uint64_t)e[1] << 32 | e[0];
        assert_int_equal(addr, g.acc->msi_dev); /* the sim's vectors are at the MSI base */
        assert_int_not_equal(e[2], 0);
        assert_int_equal(e[3] & 1, 0);
        uint32_t flags = cfg(acc, NTBF_SIM_CFG_CAP_MSIX + NTBF_PCI_MSIX_FLAGS, 2);
        assert_true(flags & NTBF_PCI_MSIX_ENABLE);
        assert_false(flags & NTBF_PCI_MSIX_MASKALL);

        *reg32(regs, NTBF_ACCEL_REG_MSIX_VECTOR) = 1;
        void *mem = bar(acc, 2);
        (void)mem;
        uint64_t dev_mem = rd64(regs, NTBF_ACCEL_REG_MEM_ADDR);
        assert_int_equal(wait_fd(efd, 0), 0);
        assert_int_equal(accel_copy(regs, dev_mem, dev_mem + 4096, 64, NTBF_ACCEL_F_IRQ),
                         NTBF_ACCEL_ST_DONE);
        assert_true(wait_fd(efd, 3000) >= 1);

        int other;
        assert_int_equal(ntbf_dev_irq_enable(acc, 1, &other), NTBF_EBUSY);
        assert_int_equal(ntbf_dev_irq_enable(acc, 4, &other), -EINVAL);
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "vectors 0 to 3"));
        assert_int_equal(ntbf_dev_irq_enable(acc, 0, NULL), -EINVAL);
        assert_int_equal(ntbf_dev_irq_disable(acc, 1), 0);
        assert_int_equal(e[3] & 1, 1); /* masked again */
        assert_int_equal(ntbf_dev_irq_disable(acc, 1), -EINVAL);
        assert_int_equal(ntbf_dev_irq_disable(acc, 99), -EINVAL);
        /* A vector enabled at close is freed by the close. */
        assert_int_equal(ntbf_dev_irq_enable(acc, 2, &efd), 0);
        ntbf_dev_close(acc);
        struct ntbf_sim_owned own;
        assert_int_equal(ntbf_sim_owned(g.f.b, BORROWER, getpid(), &own), 0);
        assert_int_equal(own.irqs, 0);
        rig_down(&g);
}

/* A borrower without an IOMMU: the DMA window maps its RAM directly, addresses are offsets. */
static void test_window_without_iommu(void **state)
{
        (void)state;
        /* The same cluster, but the borrower's inbound traffic is not translated. */
        char yaml[4096];
        const char *at =
            strstr(cluster_yaml, "    ram: 256MiB\n    adapters:\n      - {name: ntb0, "
                                 "model: pxh830, window: 1GiB}\nlinks");
        assert_non_null(at);
        snprintf(yaml, sizeof(yaml), "%.*s    iommu: false\n%s", (int)(at - cluster_yaml),
                 cluster_yaml, at);
        static struct rig g; /* static: teardown may clean it up after a failed assert */
        rig_up_yaml(&g, "borrower", yaml);
        assert_int_equal(g.acc->dma_iova, 0);
        struct ntbf_dev *acc = open_ok(&g, g.acc->fdid);
        void *regs = bar(acc, 0), *mem = bar(acc, 2);
        accel_enable(acc, regs, 0);
        uint64_t dev_mem = rd64(regs, NTBF_ACCEL_REG_MEM_ADDR);
        uint8_t *buf;
        assert_int_equal(ntbf_dma_alloc(g.ctx, 64 * KiB, 0, (void **)&buf), 0);
        fill(buf, 64 * KiB, 41);
        uint64_t io, io2;
        assert_int_equal(ntbf_dev_dma_map(acc, buf, 64 * KiB, &io), 0);
        /* The window's device address plus the buffer's physical address. */
        void *phys;
        assert_int_equal(ntbf_sim_phys_ptr(g.f.b, BORROWER, io - g.acc->dma_dev, 64 * KiB, &phys),
                         0);
        assert_memory_equal(phys, buf, 64 * KiB);
        assert_int_equal(accel_copy(regs, io, dev_mem, 64 * KiB, 0), NTBF_ACCEL_ST_DONE);
        assert_memory_equal(mem, buf, 64 * KiB);
        fill(mem, 64 * KiB, 42);
        assert_int_equal(ntbf_dev_dma_map(acc, buf, 64 * KiB, &io2), 0);
        assert_int_equal(io2, io); /* counted, not allocated */
        assert_int_equal(accel_copy(regs, dev_mem, io, 64 * KiB, 0), NTBF_ACCEL_ST_DONE);
        assert_memory_equal(buf, mem, 64 * KiB);
        assert_int_equal(ntbf_dev_dma_unmap(acc, io, 64 * KiB), 0);
        assert_int_equal(ntbf_dev_dma_unmap(acc, io, 64 * KiB), 0);
        assert_int_equal(ntbf_dev_dma_unmap(acc, io, 64 * KiB), -EINVAL);
        /* Memory past the window's 64 MiB of RAM cannot be reached. */
        uint8_t *big;
        assert_int_equal(ntbf_dma_alloc(g.ctx, 96 * MiB, 0, (void **)&big), 0);
        assert_int_equal(ntbf_dev_dma_map(acc, big, 96 * MiB, &io), NTBF_EUNREACHABLE);
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "outside the DMA window"));
        ntbf_dma_free(g.ctx, big);
        ntbf_dma_free(g.ctx, buf);
        ntbf_dev_close(acc);
        rig_down(&g);
}

/* A small share: IOVA runs out with NTBF_ENOSPC_BUDGET, unmapping gives it back. */
static void test_iova_exhaustion(void **state)
{
        (void)state;
        static struct rig g; /* static: teardown may clean it up after a failed assert */
        rig_up(&g, "borrower");
        struct ntbf_dev *acc = open_ok(&g, g.acc1->fdid); /* 64 KiB share: 16 pages */
        uint8_t *buf;
        assert_int_equal(ntbf_dma_alloc(g.ctx, 64 * KiB, 0, (void **)&buf), 0);
        uint64_t io[16], x;
        for (int i = 0; i < 16; i++) {
                assert_int_equal(ntbf_dev_dma_map(acc, buf + 4096 * (i % 4), 4096, &io[i]), 0);
                for (int j = 0; j < i; j++)
                        assert_int_not_equal(io[i], io[j]);
        }
        assert_int_equal(ntbf_dev_dma_map(acc, buf, 4096, &x), NTBF_ENOSPC_BUDGET);
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "DMA window"));
        assert_int_equal(ntbf_dev_dma_map(acc, buf, 64 * KiB + 1, &x), -EINVAL); /* never fits */
        assert_int_equal(ntbf_dev_dma_unmap(acc, io[5], 4096), 0);
        assert_int_equal(ntbf_dev_dma_map(acc, buf, 4096, &x), 0);
        assert_int_equal(x, io[5]);
        /* Close with everything mapped: the IOMMU entries go, so the share can be reused. */
        ntbf_dev_close(acc);
        acc = open_ok(&g, g.acc1->fdid);
        /* A contiguous range: 16 pages at once, one device-side run. */
        fill(buf, 64 * KiB, 3);
        assert_int_equal(ntbf_dev_dma_map(acc, buf, 64 * KiB, &x), 0);
        uint8_t *seen = malloc(64 * KiB);
        uint16_t rid = (uint16_t)ntbf_device_rid(&g.f.t->devices[g.acc1->tdev], 0);
        assert_int_equal(ntbf_sim_read(g.f.b, LENDER, g.acc1->tdev, rid, x, seen, 64 * KiB, NULL),
                         0);
        assert_memory_equal(seen, buf, 64 * KiB);
        assert_int_equal(ntbf_dev_dma_map(acc, buf, 4096, &io[0]), NTBF_ENOSPC_BUDGET);
        assert_int_equal(ntbf_dev_dma_unmap(acc, x, 64 * KiB), 0);
        /* A holder that died leaves IOMMU entries in its share: the next open clears them. */
        ntbf_dev_close(acc);
        uint32_t ba = g.f.t->nodes[BORROWER].adapters[0];
        assert_int_equal(g.f.ops->iommu_map(g.f.h[ba], g.acc1->dma_iova, 2 * MiB, 64 * KiB), 0);
        acc = open_ok(&g, g.acc1->fdid);
        assert_int_equal(ntbf_dev_dma_map(acc, buf, 64 * KiB, &x), 0);
        assert_int_equal(ntbf_dev_dma_unmap(acc, x, 64 * KiB), 0);

        /* A second handle of the same device gets a share of its own. */
        struct ntbf_dev *second = open_ok(&g, g.acc1->fdid);
        assert_int_equal(ntbf_dev_dma_map(acc, buf, 4096, &io[0]), 0);
        assert_int_equal(ntbf_dev_dma_map(second, buf, 4096, &io[1]), 0);
        assert_true(io[1] >= io[0] + 64 * KiB || io[1] + 64 * KiB <= io[0]);
        free(seen);
        ntbf_dev_close(second);
        ntbf_dev_close(acc);
        ntbf_dma_free(g.ctx, buf);
        rig_down(&g);
}

/* A device of the process's own host: host-physical DMA addresses, direct BARs. */
static void test_local_device(void **state)
{
        (void)state;
        static struct rig g; /* static: teardown may clean it up after a failed assert */
        rig_up(&g, "lender");
        struct ntbf_dev *acc = open_ok(&g, g.acc->fdid);
        struct ntbf_dev_info in;
        assert_int_equal(ntbf_dev_info(acc, &in), 0);
        assert_true(in.local);
        assert_string_equal(in.bdf, "0000:04:00.0");
        assert_int_equal(in.bars[2].addr, g.acc->bar_addr[2]);
        void *regs = bar(acc, 0), *mem = bar(acc, 2);
        assert_int_equal(*reg32(regs, NTBF_ACCEL_REG_ID), NTBF_ACCEL_ID);
        /* Not intercepted: the pin is there. */
        assert_int_equal(cfg(acc, NTBF_PCI_INTERRUPT_PIN, 1), 1);
        accel_enable(acc, regs, NTBF_ACCEL_CTRL_IRQ_ENABLE);
        uint64_t dev_mem = rd64(regs, NTBF_ACCEL_REG_MEM_ADDR);

        const size_t N = 128 * KiB;
        uint8_t *buf;
        assert_int_equal(ntbf_dma_alloc(g.ctx, N, 0, (void **)&buf), 0);
        fill(buf, N, 11);
        uint64_t io, io_again;
        assert_int_equal(ntbf_dev_dma_map(acc, buf, N, &io), 0);
        /* Host-physical: the lender's RAM at io holds the buffer's bytes. */
        void *phys;
        assert_int_equal(ntbf_sim_phys_ptr(g.f.b, LENDER, io, N, &phys), 0);
        assert_memory_equal(phys, buf, N);
        const struct ntbf_region *reg = ntbf_addrmap_lookup(g.f.t, LENDER, io);
        assert_non_null(reg);
        assert_int_equal(reg->kind, NTBF_REGION_RAM);
        assert_int_equal(ntbf_dev_dma_map(acc, buf, N, &io_again), 0);
        assert_int_equal(io_again, io); /* the same buffer, the same address */

        assert_int_equal(accel_copy(regs, io, dev_mem, (uint32_t)N, 0), NTBF_ACCEL_ST_DONE);
        assert_memory_equal(mem, buf, N);
        fill((uint8_t *)mem + 2 * MiB, N, 12);
        int efd;
        assert_int_equal(ntbf_dev_irq_enable(acc, 0, &efd), 0);
        volatile uint32_t *e = reg32(regs, NTBF_ACCEL_MSIX_TABLE);
        assert_int_equal(e[0], (uint32_t)NTBF_MSI_BASE); /* the host's own MSI address */
        assert_int_equal(accel_copy(regs, dev_mem + 2 * MiB, io, (uint32_t)N, NTBF_ACCEL_F_IRQ),
                         NTBF_ACCEL_ST_DONE);
        assert_memory_equal(buf, (uint8_t *)mem + 2 * MiB, N);
        assert_true(wait_fd(efd, 3000) >= 1);

        assert_int_equal(ntbf_dev_dma_unmap(acc, io, N), 0);
        assert_int_equal(ntbf_dev_dma_unmap(acc, io, N), 0);
        assert_int_equal(ntbf_dev_dma_unmap(acc, io, N), -EINVAL);
        assert_int_equal(ntbf_dev_dma_unmap(acc, io, 4096), -EINVAL);
        ntbf_dev_close(acc);
        ntbf_dma_free(g.ctx, buf);
        rig_down(&g);
}

/*
 * ntbf_dev_map_window: a local device without an IOMMU of its own reaches a window at its
 * host-physical address; other adapters, ranges and borrowed devices are refused.
 */
static void test_map_window(void **state)
{
        (void)state;
        static struct rig g;
        rig_up(&g, "lender");
        struct ntbf_dev *acc = open_ok(&g, g.acc->fdid);
        uint32_t mine = g.f.t->nodes[LENDER].adapters[0],
                 other = g.f.t->nodes[BORROWER].adapters[0];
        const struct ntbf_adapter *a = &g.f.t->adapters[mine];
        uint64_t io, io2;
        assert_int_equal(ntbf_dev_map_window(acc, mine, 0, 3 * 4096 + 8, 4096, &io), 0);
        assert_int_equal(io, a->window_base + 3 * 4096 + 8);
        const struct ntbf_region *reg = ntbf_addrmap_lookup(g.f.t, LENDER, io);
        assert_non_null(reg);
        assert_int_equal(reg->kind, NTBF_REGION_WINDOW);
        assert_int_equal(ntbf_dev_map_window(acc, mine, 0, 0, a->p.window, &io2), 0);
        assert_int_equal(ntbf_dev_map_window(acc, other, 0, 0, 4096, &io), -EINVAL);
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "not one of node lender's"));
        assert_int_equal(ntbf_dev_map_window(acc, mine, 0, a->p.window - 4096, 8192, &io), -EINVAL);
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "outside window 0"));
        assert_int_equal(ntbf_dev_map_window(acc, mine, 1, 0, 4096, &io), -EINVAL);
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "which has 1 window"));
        assert_int_equal(ntbf_dev_unmap_window(acc, io2 + 4096), -EINVAL);
        assert_int_equal(ntbf_dev_unmap_window(acc, io2), 0);
        assert_int_equal(ntbf_dev_unmap_window(acc, io2), -EINVAL);
        ntbf_dev_close(acc); /* undoes the window mapping left */
        rig_down(&g);

        /* A borrowed device maps remote memory through the daemon (map_peer), not here. */
        rig_up(&g, "borrower");
        acc = open_ok(&g, g.acc->fdid);
        mine = g.f.t->nodes[BORROWER].adapters[0];
        assert_int_equal(ntbf_dev_map_window(acc, mine, 0, 0, 4096, &io), NTBF_EUNSUPPORTED);
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "borrowed"));
        ntbf_dev_close(acc);
        rig_down(&g);
}

/*
 * A local device in its own IOMMU domain (lender-side isolation, article 4.3): addresses stay
 * host-physical, but only what is mapped is reachable. Skipped where the backend has no
 * isolation domains.
 */
static void test_local_isolated(void **state)
{
        (void)state;
        static struct rig g; /* static: teardown may clean it up after a failed assert */
        rig_up(&g, "lender");
        struct fk_dev *x = fk_local_isolated(&g.fk, "acc1", 0);
        if (!x) {
                rig_down(&g);
                skip();
        }
        /* fk_local already listed acc1; the isolated entry comes last and wins the lookup. */
        struct ntbf_dev *acc = open_ok(&g, x->fdid);
        void *regs = bar(acc, 0), *mem = bar(acc, 2);
        accel_enable(acc, regs, NTBF_ACCEL_CTRL_IRQ_ENABLE);
        uint64_t dev_mem = rd64(regs, NTBF_ACCEL_REG_MEM_ADDR);
        uint8_t *buf;
        assert_int_equal(ntbf_dma_alloc(g.ctx, 32 * KiB, 0, (void **)&buf), 0);
        fill(buf, 32 * KiB, 51);
        uint64_t io, io2;
        assert_int_equal(ntbf_dev_dma_map(acc, buf, 32 * KiB, &io), 0);
        void *phys;
        assert_int_equal(ntbf_sim_phys_ptr(g.f.b, LENDER, io, 32 * KiB, &phys), 0);
        assert_memory_equal(phys, buf, 32 * KiB); /* host-physical */
        assert_int_equal(accel_copy(regs, io, dev_mem, 32 * KiB, 0), NTBF_ACCEL_ST_DONE);
        assert_memory_equal(mem, buf, 32 * KiB);
        /* Overlapping mappings share pages: the page stays mapped until the last unmap. */
        assert_int_equal(ntbf_dev_dma_map(acc, buf + 4096, 4096, &io2), 0);
        assert_int_equal(io2, io + 4096);
        assert_int_equal(ntbf_dev_dma_unmap(acc, io, 32 * KiB), 0);
        fill(mem, 4096, 52);
        assert_int_equal(accel_copy(regs, dev_mem, io2, 4096, 0), NTBF_ACCEL_ST_DONE);
        assert_memory_equal(buf + 4096, mem, 4096);
        /* An unmapped page is refused by the domain. */
        uint32_t st = accel_copy(regs, dev_mem, io, 64, 0);
        assert_int_equal(st & 0xff, NTBF_ACCEL_ST_ERROR);
        assert_int_equal(NTBF_ACCEL_ST_REASON(st), NTBF_ACCEL_ERR_DST);
        /* Interrupts get through: the message's page is in the domain too. */
        int efd;
        assert_int_equal(ntbf_dev_irq_enable(acc, 0, &efd), 0);
        assert_int_equal(accel_copy(regs, dev_mem, io2, 64, NTBF_ACCEL_F_IRQ), NTBF_ACCEL_ST_DONE);
        assert_true(wait_fd(efd, 3000) >= 1);
        assert_int_equal(ntbf_dev_dma_unmap(acc, io2, 4096), 0);
        ntbf_dev_close(acc);
        ntbf_dma_free(g.ctx, buf);
        rig_down(&g);
}

/* Peer-to-peer between two devices of the same lender: acc0 copies into acc1's memory. */
static void test_map_peer(void **state)
{
        (void)state;
        static struct rig g; /* static: teardown may clean it up after a failed assert */
        rig_up(&g, "borrower");
        struct ntbf_dev *a0 = open_ok(&g, g.acc->fdid), *a1 = open_ok(&g, g.acc1->fdid);
        void *regs = bar(a0, 0), *mem0 = bar(a0, 2), *mem1 = bar(a1, 2);
        accel_enable(a0, regs, 0);
        uint64_t peer;
        assert_int_equal(ntbf_dev_map_peer(a0, a1, 2, &peer), 0);
        assert_int_equal(peer, g.acc1->bar_addr[2]); /* same lender: the BAR's own address */
        fill(mem0, 64 * KiB, 21);
        uint64_t dev_mem = rd64(regs, NTBF_ACCEL_REG_MEM_ADDR);
        assert_int_equal(accel_copy(regs, dev_mem, peer + 4096, 64 * KiB, 0), NTBF_ACCEL_ST_DONE);
        assert_memory_equal((uint8_t *)mem1 + 4096, mem0, 64 * KiB);
        assert_int_equal(ntbf_dev_map_peer(a0, a1, 1, &peer), -ENOENT);
        assert_int_equal(ntbf_dev_map_peer(a0, NULL, 2, &peer), -EINVAL);
        assert_int_equal(ntbf_dev_unmap_peer(a0, g.acc1->bar_addr[2]), 0);
        assert_int_equal(ntbf_dev_unmap_peer(a0, g.acc1->bar_addr[2]), -EINVAL);
        ntbf_dev_close(a1);
        ntbf_dev_close(a0);
        rig_down(&g);
}

/* The context's event connection is up at the daemon (one per context). */
static void wait_subscribed(struct rig *g)
{
        for (uint64_t end = now_ms() + 2000; fk_subscribers(&g->fk) < 1 && now_ms() < end;)
                sleep_ms(1);
        assert_int_equal(fk_subscribers(&g->fk), 1);
}

/* The lender died: device.lost reaches the device's event fd. */
static void test_lost_event(void **state)
{
        (void)state;
        static struct rig g; /* static: teardown may clean it up after a failed assert */
        rig_up(&g, "borrower");
        struct ntbf_dev *acc = open_ok(&g, g.acc->fdid), *nvme = open_ok(&g, g.nvme->fdid);
        int fd = ntbf_dev_event_fd(acc);
        assert_true(fd >= 0);
        enum ntbf_dev_event_kind kind = NTBF_DEV_EVENT_LOST;
        assert_int_equal(ntbf_dev_event(acc, &kind), 0);
        assert_int_equal(kind, NTBF_DEV_EVENT_NONE);
        assert_false(readable(fd));
        wait_subscribed(&g); /* one event connection per context */
        fk_lost(&g.fk, g.acc->fdid);
        struct pollfd p = {fd, POLLIN, 0};
        assert_int_equal(poll(&p, 1, 3000), 1);
        assert_int_equal(ntbf_dev_event(acc, &kind), 0);
        assert_int_equal(kind, NTBF_DEV_EVENT_LOST);
        assert_int_equal(ntbf_dev_event(acc, &kind), 0);
        assert_int_equal(kind, NTBF_DEV_EVENT_NONE);
        assert_false(readable(fd));
        assert_false(readable(ntbf_dev_event_fd(nvme))); /* another fdid */
        /* The copy sent to the holding connection arrives with the next call: no second loss. */
        assert_int_equal(cfg(nvme, NTBF_PCI_VENDOR_ID, 2), NTBF_SIM_VENDOR_ID);
        assert_false(readable(fd));
        assert_int_equal(ntbf_dev_event(acc, &kind), 0);
        assert_int_equal(kind, NTBF_DEV_EVENT_NONE);
        assert_int_equal(ntbf_dev_event(acc, NULL), -EINVAL);
        ntbf_dev_close(nvme);
        ntbf_dev_close(acc);
        rig_down(&g);
}

/*
 * A forked child and the parent's context: its control calls fail at once with -ECHILD and a
 * sentence, and closing the copies in the child sends nothing and stops nothing of the
 * parent's, whose device, connection and event thread carry on.
 */
static int child_of_fork(struct rig *g, struct ntbf_dev *acc)
{
        struct ntbf_dev *d = NULL;
        if (ntbf_dev_open(g->ctx, g->nvme->fdid, &d) != -ECHILD || d)
                return 1;
        if (!strstr(ntbf_ctx_error(g->ctx), "a child forked from it"))
                return 2;
        uint32_t v = 0;
        if (ntbf_dev_cfg_read(acc, NTBF_PCI_VENDOR_ID, 2, &v) != -ECHILD)
                return 3;
        ntbf_dev_close(acc);
        ntbf_ctx_close(g->ctx);
        /* A context of its own works. */
        struct ntbf_ctx *mine = NULL;
        if (ntbf_ctx_open(g->f.dir, "borrower", &mine))
                return 4;
        int r = ntbf_dev_open(mine, g->nvme->fdid, &d);
        ntbf_dev_close(d);
        ntbf_ctx_close(mine);
        return r ? 5 : 0;
}

static void test_forked_child(void **state)
{
        (void)state;
        static struct rig g; /* static: teardown may clean it up after a failed assert */
        rig_up(&g, "borrower");
        struct ntbf_dev *acc = open_ok(&g, g.acc->fdid);
        wait_subscribed(&g);
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                alarm(20); /* a child stuck on a lock of the parent's threads dies */
                _exit(child_of_fork(&g, acc));
        }
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (WIFSIGNALED(st))
                fail_msg("the forked child was killed by signal %d (hung on the parent's "
                         "context)",
                         WTERMSIG(st));
        if (WEXITSTATUS(st))
                fail_msg("the forked child's check %d failed (1: open not refused, 2: no "
                         "sentence, 3: config read not refused, 4-5: a context of its own)",
                         WEXITSTATUS(st));
        /* The parent's device is still open at the daemon, its connection still answers. */
        assert_int_equal(cfg(acc, NTBF_PCI_VENDOR_ID, 2), NTBF_SIM_VENDOR_ID);
        /* Its event thread still runs: a loss reaches the device's event fd. */
        fk_lost(&g.fk, g.acc->fdid);
        struct pollfd p = {ntbf_dev_event_fd(acc), POLLIN, 0};
        assert_int_equal(poll(&p, 1, 3000), 1);
        enum ntbf_dev_event_kind kind;
        assert_int_equal(ntbf_dev_event(acc, &kind), 0);
        assert_int_equal(kind, NTBF_DEV_EVENT_LOST);
        ntbf_dev_close(acc);
        rig_down(&g);
}

/*
 * A forked child holds none of the parent's connections: when the parent closes its context
 * while the child lives on, the daemon sees the session end (its event subscription goes).
 */
static void test_forked_child_session(void **state)
{
        (void)state;
        static struct rig g; /* static: teardown may clean it up after a failed assert */
        rig_up(&g, "borrower");
        struct ntbf_dev *acc = open_ok(&g, g.acc->fdid);
        wait_subscribed(&g);
        int go[2];
        assert_int_equal(pipe(go), 0);
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                alarm(20);
                char c;
                _exit(read(go[0], &c, 1) == 1 ? 0 : 1); /* lives on until the parent is done */
        }
        ntbf_dev_close(acc);
        ntbf_ctx_close(g.ctx);
        g.ctx = NULL;
        for (uint64_t end = now_ms() + 3000; fk_subscribers(&g.fk) > 0 && now_ms() < end;)
                sleep_ms(1);
        unsigned left = fk_subscribers(&g.fk);
        assert_int_equal(write(go[1], "x", 1), 1);
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        close(go[0]);
        close(go[1]);
        if (left)
                fail_msg("the parent closed its context, yet the daemon still has its event "
                         "subscription: the forked child holds a copy of the connection");
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        rig_down(&g);
}

/*
 * A daemon without events.subscribe: devices work, nobody asks twice, and a loss the daemon
 * sends to the connection holding the device arrives with the next control call.
 */
static void test_no_events(void **state)
{
        (void)state;
        static struct rig g; /* static: teardown may clean it up after a failed assert */
        rig_up(&g, "borrower");
        g.fk.no_events = true;
        struct ntbf_dev *a = open_ok(&g, g.acc->fdid), *b = open_ok(&g, g.nvme->fdid);
        assert_int_equal(atomic_load(&g.fk.subscribe_calls), 1);
        assert_int_equal(cfg(a, NTBF_PCI_VENDOR_ID, 2), NTBF_SIM_VENDOR_ID);
        assert_true(ntbf_dev_event_fd(a) >= 0);
        enum ntbf_dev_event_kind kind;
        assert_int_equal(ntbf_dev_event(a, &kind), 0);
        assert_int_equal(kind, NTBF_DEV_EVENT_NONE);
        /* The loss still reaches the holder's connection; the next control call hands it on. */
        fk_lost(&g.fk, g.acc->fdid);
        usleep(50 * 1000);
        assert_false(readable(ntbf_dev_event_fd(a)));
        assert_int_equal(cfg(b, NTBF_PCI_VENDOR_ID, 2), NTBF_SIM_VENDOR_ID);
        assert_true(readable(ntbf_dev_event_fd(a)));
        assert_int_equal(ntbf_dev_event(a, &kind), 0);
        assert_int_equal(kind, NTBF_DEV_EVENT_LOST);
        assert_false(readable(ntbf_dev_event_fd(b)));
        ntbf_dev_close(b);
        ntbf_dev_close(a);
        rig_down(&g);
}

/* The daemon dies: control calls fail at once, the data path keeps working. */
static void test_daemon_dies(void **state)
{
        (void)state;
        static struct rig g; /* static: teardown may clean it up after a failed assert */
        rig_up(&g, "borrower");
        struct ntbf_dev *acc = open_ok(&g, g.acc->fdid);
        void *regs = bar(acc, 0), *mem = bar(acc, 2);
        accel_enable(acc, regs, 0);
        uint64_t dev_mem = rd64(regs, NTBF_ACCEL_REG_MEM_ADDR);
        uint8_t *buf;
        assert_int_equal(ntbf_dma_alloc(g.ctx, 64 * KiB, 0, (void **)&buf), 0);

        fk_kill(&g.fk);
        uint64_t t0 = now_ms();
        uint32_t v;
        assert_int_equal(ntbf_dev_cfg_read(acc, 0, 4, &v), -EPIPE);
        assert_int_equal(ntbf_dev_cfg_write(acc, 4, 2, 6), -EPIPE);
        assert_true(now_ms() - t0 < 1000);
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "went away"));
        struct ntbf_dev *other;
        assert_int_equal(ntbf_dev_open(g.ctx, g.nvme->fdid, &other), NTBF_ENOTFOUND);
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "start ntbfabd"));
        assert_true(now_ms() - t0 < 1000);

        /* BARs, DMA mapping and the device's DMA need no daemon. */
        assert_int_equal(*reg32(regs, NTBF_ACCEL_REG_ID), NTBF_ACCEL_ID);
        fill(buf, 64 * KiB, 31);
        uint64_t io;
        assert_int_equal(ntbf_dev_dma_map(acc, buf, 64 * KiB, &io), 0);
        assert_int_equal(accel_copy(regs, io, dev_mem, 64 * KiB, 0), NTBF_ACCEL_ST_DONE);
        assert_memory_equal(mem, buf, 64 * KiB);
        assert_int_equal(ntbf_dev_dma_unmap(acc, io, 64 * KiB), 0);

        /* A new daemon: new opens work, the old handle is void and says so. */
        assert_int_equal(fk_start(&g.fk, &g.f, "borrower"), 0);
        assert_non_null(fk_borrow(&g.fk, "lender", "acc1", 0, 4 * MiB, 0));
        struct ntbf_dev *fresh;
        int r = ntbf_dev_open(g.ctx, g.fk.devs[0].fdid, &fresh);
        if (r)
                fail_msg("reopen: %s", ntbf_ctx_error(g.ctx));
        assert_int_equal(ntbf_dev_cfg_read(fresh, 0, 2, &v), 0);
        assert_int_equal(v, NTBF_SIM_VENDOR_ID);
        assert_int_equal(ntbf_dev_cfg_read(acc, 0, 4, &v), -EPIPE);
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "restarted"));
        ntbf_dev_close(fresh);
        ntbf_dev_close(acc); /* no daemon call for the void handle, no hang */
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "restarted")); /* and no new sentence */
        ntbf_dma_free(g.ctx, buf);
        rig_down(&g);
}

/* The daemon hangs: control calls time out (NTBFAB_RPC_TIMEOUT_MS), nothing blocks for ever. */
static void test_daemon_hangs(void **state)
{
        (void)state;
        static struct rig g; /* static: teardown may clean it up after a failed assert */
        rig_up(&g, "borrower");
        ntbf_ctx_close(g.ctx);
        setenv("NTBFAB_RPC_TIMEOUT_MS", "300", 1);
        assert_int_equal(ntbf_ctx_open(g.f.dir, "borrower", &g.ctx), 0);
        struct ntbf_dev *acc = open_ok(&g, g.acc->fdid);
        void *regs = bar(acc, 0);
        atomic_store(&g.fk.silent, true);
        uint64_t t0 = now_ms();
        uint32_t v;
        assert_int_equal(ntbf_dev_cfg_read(acc, 0, 4, &v), -ETIMEDOUT);
        uint64_t took = now_ms() - t0;
        assert_true(took >= 250 && took < 2000);
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "did not answer"));
        assert_int_equal(*reg32(regs, NTBF_ACCEL_REG_ID), NTBF_ACCEL_ID);
        atomic_store(&g.fk.silent, false);
        assert_int_equal(ntbf_dev_cfg_read(acc, 0, 2, &v), 0);
        assert_int_equal(v, NTBF_SIM_VENDOR_ID);
        ntbf_dev_close(acc);
        unsetenv("NTBFAB_RPC_TIMEOUT_MS");
        rig_down(&g);
}

/* Contexts: who we are from the environment, and a sentence for every refusal. */
static void test_ctx_open(void **state)
{
        (void)state;
        static struct rig g; /* static: teardown may clean it up after a failed assert */
        rig_up(&g, "borrower");
        struct ntbf_ctx *c = (struct ntbf_ctx *)1;
        unsetenv("NTBFAB_DIR");
        unsetenv("NTBFAB_NODE");
        assert_int_equal(ntbf_ctx_open(NULL, NULL, &c), -EINVAL);
        assert_null(c);
        assert_non_null(strstr(ntbf_ctx_error(NULL), "NTBFAB_DIR"));
        setenv("NTBFAB_DIR", g.f.dir, 1);
        assert_int_equal(ntbf_ctx_open(NULL, NULL, &c), -EINVAL);
        assert_non_null(strstr(ntbf_ctx_error(NULL), "NTBFAB_NODE"));
        setenv("NTBFAB_NODE", "borrower", 1);
        assert_int_equal(ntbf_ctx_open(NULL, NULL, &c), 0);
        assert_string_equal(ntbf_ctx_error(c), "");
        ntbf_ctx_close(c);
        assert_int_equal(ntbf_ctx_open(NULL, "nobody", &c), NTBF_ENOTFOUND);
        assert_non_null(strstr(ntbf_ctx_error(NULL), "no node 'nobody'"));
        /* The lender has no daemon in this test. */
        assert_int_equal(ntbf_ctx_open(NULL, "lender", &c), NTBF_ENOTFOUND);
        assert_non_null(strstr(ntbf_ctx_error(NULL), "lender.sock"));
        setenv("NTBFAB_CONFIG", "/nonexistent/cluster.yaml", 1);
        assert_int_not_equal(ntbf_ctx_open(NULL, NULL, &c), 0);
        assert_non_null(strstr(ntbf_ctx_error(NULL), "/nonexistent/cluster.yaml"));
        char path[512];
        snprintf(path, sizeof(path), "%s/cluster.yaml", g.f.dir);
        setenv("NTBFAB_CONFIG", path, 1);
        assert_int_equal(ntbf_ctx_open(NULL, NULL, &c), 0);
        ntbf_ctx_close(c);
        unsetenv("NTBFAB_CONFIG");
        unsetenv("NTBFAB_DIR");
        unsetenv("NTBFAB_NODE");
        assert_int_equal(ntbf_ctx_open(g.f.dir, "borrower", NULL), -EINVAL);

        /* NULL objects are refused, not dereferenced. */
        assert_int_equal(ntbf_dma_alloc(NULL, 64, 0, NULL), -EINVAL);
        void *p;
        assert_int_equal(ntbf_dma_alloc(g.ctx, 0, 0, &p), -EINVAL);
        assert_int_equal(ntbf_dma_alloc(g.ctx, 64, 48, &p), -EINVAL);
        assert_int_equal(ntbf_dma_alloc(g.ctx, 64, 0, NULL), -EINVAL);
        ntbf_dma_free(g.ctx, &p); /* not DMA memory: ignored, with a sentence */
        assert_non_null(strstr(ntbf_ctx_error(g.ctx), "not a live allocation"));
        ntbf_dma_free(NULL, NULL);
        ntbf_dev_close(NULL);
        ntbf_ctx_close(NULL);
        assert_int_equal(ntbf_dev_info(NULL, NULL), -EINVAL);
        assert_int_equal(ntbf_dev_cfg_read(NULL, 0, 4, NULL), -EINVAL);
        assert_int_equal(ntbf_dev_map_bar(NULL, 0, NULL, NULL), -EINVAL);
        assert_int_equal(ntbf_dev_dma_map(NULL, NULL, 0, NULL), -EINVAL);
        assert_int_equal(ntbf_dev_dma_unmap(NULL, 0, 0), -EINVAL);
        assert_int_equal(ntbf_dev_irq_enable(NULL, 0, NULL), -EINVAL);
        assert_int_equal(ntbf_dev_event_fd(NULL), -EINVAL);
        assert_int_equal(ntbf_dev_event(NULL, NULL), -EINVAL);
        assert_int_equal(ntbf_dev_open(NULL, 0, NULL), -EINVAL);
        /* Closing a context closes what is still open through it. */
        struct ntbf_dev *d = open_ok(&g, g.acc->fdid);
        (void)bar(d, 0);
        assert_int_equal(ntbf_dma_alloc(g.ctx, 4096, 0, &p), 0);
        uint64_t io;
        assert_int_equal(ntbf_dev_dma_map(d, p, 4096, &io), 0);
        rig_down(&g);
}

/* Threads mapping and unmapping on one device never get the same live address. */
struct hammer {
        struct ntbf_dev *dev;
        uint8_t *buf;
        uint64_t base;
        _Atomic uint8_t *live; /* per page of the window */
        int failures;
};

static void *hammer_thread(void *arg)
{
        struct hammer *h = arg;
        uint64_t io[8];
        for (int round = 0; round < 5000; round++) {
                for (int k = 0; k < 8; k++) {
                        if (ntbf_dev_dma_map(h->dev, h->buf + 4096 * k, 4096, &io[k])) {
                                h->failures++;
                                return NULL;
                        }
                        if (atomic_exchange(&h->live[(io[k] - h->base) / 4096], 1))
                                h->failures++;
                }
                for (int k = 0; k < 8; k++) {
                        atomic_store(&h->live[(io[k] - h->base) / 4096], 0);
                        if (ntbf_dev_dma_unmap(h->dev, io[k], 4096))
                                h->failures++;
                }
        }
        return NULL;
}

static void test_threads(void **state)
{
        (void)state;
        static struct rig g; /* static: teardown may clean it up after a failed assert */
        rig_up(&g, "borrower");
        struct ntbf_dev *acc = open_ok(&g, g.acc->fdid);
        uint8_t *buf;
        assert_int_equal(ntbf_dma_alloc(g.ctx, 32 * KiB, 0, (void **)&buf), 0);
        _Atomic uint8_t *live = calloc(g.acc->dma_size / 4096, 1);
        struct hammer h[4];
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
                h[i] = (struct hammer){acc, buf, g.acc->dma_dev, live, 0};
                assert_int_equal(pthread_create(&th[i], NULL, hammer_thread, &h[i]), 0);
        }
        for (int i = 0; i < 4; i++) {
                pthread_join(th[i], NULL);
                assert_int_equal(h[i].failures, 0);
        }
        /* Everything was given back: the whole window maps as one range again. */
        uint8_t *big;
        assert_int_equal(ntbf_dma_alloc(g.ctx, 4 * MiB, 0, (void **)&big), 0);
        uint64_t io[16];
        for (int i = 0; i < 16; i++)
                assert_int_equal(ntbf_dev_dma_map(acc, big, 4 * MiB, &io[i]), 0);
        assert_int_equal(ntbf_dev_dma_map(acc, big, 4096, &io[0]), NTBF_ENOSPC_BUDGET);
        free((void *)live);
        ntbf_dev_close(acc);
        rig_down(&g);
}

static int teardown(void **state)
{
        (void)state;
        if (current) {
                unsetenv("NTBFAB_RPC_TIMEOUT_MS");
                atomic_store(&current->fk.silent, false);
                rig_down(current);
        }
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_open_config_and_bars, teardown),
            cmocka_unit_test_teardown(test_dma_both_ways, teardown),
            cmocka_unit_test_teardown(test_msix, teardown),
            cmocka_unit_test_teardown(test_iova_exhaustion, teardown),
            cmocka_unit_test_teardown(test_window_without_iommu, teardown),
            cmocka_unit_test_teardown(test_local_device, teardown),
            cmocka_unit_test_teardown(test_local_isolated, teardown),
            cmocka_unit_test_teardown(test_map_window, teardown),
            cmocka_unit_test_teardown(test_map_peer, teardown),
            cmocka_unit_test_teardown(test_lost_event, teardown),
            cmocka_unit_test_teardown(test_forked_child, teardown),
            cmocka_unit_test_teardown(test_forked_child_session, teardown),
            cmocka_unit_test_teardown(test_no_events, teardown),
            cmocka_unit_test_teardown(test_daemon_dies, teardown),
            cmocka_unit_test_teardown(test_daemon_hangs, teardown),
            cmocka_unit_test_teardown(test_ctx_open, teardown),
            cmocka_unit_test_teardown(test_threads, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
