/* tests/unit/test_sim_accel.c: the simulated accelerator's copy engine, device memory and
 * interrupts. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "accel.h"
#include "cfgspace.h"
#include "fake_dma.h"

#define MEM_BASE  UINT64_C(0x100000000)
#define MEM_SIZE  (UINT64_C(64) << 20)
#define MSI_ADDR  (MEM_BASE + MEM_SIZE - 4096)
#define BAR0_ADDR UINT64_C(0xfe000000)
#define BAR2_ADDR UINT64_C(0x38000000000)
#define DEVMEM    (UINT64_C(4) << 20)

struct t {
        struct ntbf_device d;
        struct fake_dma *f;
        struct fake_dev dev;
        void *st;
        uint32_t tail;
        uint64_t now;
};

static struct t *tsetup(void)
{
        struct t *t = calloc(1, sizeof(*t));
        assert_non_null(t);
        snprintf(t->d.name, sizeof(t->d.name), "acc0");
        t->d.bus = 4;
        t->d.functions = 1;
        ntbf_sim_defaults(&t->d.sim, NTBF_SIM_ACCEL);
        t->d.sim.memory = DEVMEM;
        t->d.sim.msix = 2;
        ntbf_device_apply_sim(&t->d);
        t->d.bars[0].addr = BAR0_ADDR;
        t->d.bars[2].addr = BAR2_ADDR;
        t->f = fake_dma_new(MEM_BASE, MEM_SIZE);
        assert_non_null(t->f);
        assert_int_equal(fake_dev_init(&t->dev, &t->d, t->f, -1), 0);
        assert_int_equal(ntbf_sim_accel_ops.create(&t->dev.env, &t->st), 0);
        return t;
}

static void tfree(struct t *t)
{
        ntbf_sim_accel_ops.destroy(t->st);
        fake_dev_free(&t->dev);
        fake_dma_free(t->f);
        free(t);
}

static uint32_t reg(struct t *t, uint32_t off)
{
        return __atomic_load_n((uint32_t *)(void *)((uint8_t *)t->dev.bar[0] + off),
                               __ATOMIC_ACQUIRE);
}

static uint64_t reg64(struct t *t, uint32_t off)
{
        return __atomic_load_n((uint64_t *)(void *)((uint8_t *)t->dev.bar[0] + off),
                               __ATOMIC_ACQUIRE);
}

static void setreg(struct t *t, uint32_t off, uint32_t v)
{
        __atomic_store_n((uint32_t *)(void *)((uint8_t *)t->dev.bar[0] + off), v, __ATOMIC_RELEASE);
}

static int poll_(struct t *t)
{
        t->now += 1000;
        return ntbf_sim_accel_ops.poll(t->st, t->now);
}

static uint8_t *ram(struct t *t, uint64_t addr)
{
        uint8_t *p = fake_dma_ptr(t->f, addr);
        assert_non_null(p);
        return p;
}

static uint8_t *devmem(struct t *t, uint64_t addr)
{
        assert_true(addr >= BAR2_ADDR && addr < BAR2_ADDR + DEVMEM);
        return (uint8_t *)t->dev.bar[2] + (addr - BAR2_ADDR);
}

static struct ntbf_accel_desc *desc(struct t *t, uint32_t i)
{
        return (struct ntbf_accel_desc *)(void *)((uint8_t *)t->dev.bar[0] + NTBF_ACCEL_RING_OFF +
                                                  32 * i);
}

static void start(struct t *t)
{
        fake_dev_bus_master(&t->dev, 1);
        setreg(t, NTBF_ACCEL_REG_CTRL, NTBF_ACCEL_CTRL_ENABLE);
        poll_(t);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_STATUS), NTBF_ACCEL_STATUS_READY);
}

/* Post a descriptor at the tail; returns its index. */
static uint32_t post(struct t *t, uint64_t src, uint64_t dst, uint32_t len, uint32_t flags)
{
        uint32_t i = t->tail;
        struct ntbf_accel_desc *d = desc(t, i);
        *d = (struct ntbf_accel_desc){
            .src = src, .dst = dst, .len = len, .flags = flags, .cookie = 0xc0de0000u | i};
        t->tail = (t->tail + 1) % NTBF_ACCEL_RING_SIZE;
        setreg(t, NTBF_ACCEL_REG_TAIL, t->tail);
        return i;
}

static uint32_t wait_done(struct t *t, uint32_t i)
{
        for (int k = 0; k < 100000; k++) {
                uint32_t st = __atomic_load_n(&desc(t, i)->status, __ATOMIC_ACQUIRE);
                if (st)
                        return st;
                poll_(t);
        }
        fail_msg("descriptor %u never completed", i);
        return 0;
}

static uint8_t pat(uint32_t seed, uint64_t i)
{
        uint64_t x = (i + 1) * UINT64_C(0x9e3779b97f4a7c15) ^ seed;
        return (uint8_t)(x >> 29);
}

static void fill(uint8_t *p, uint64_t len, uint32_t seed)
{
        for (uint64_t i = 0; i < len; i++)
                p[i] = pat(seed, i);
}

static void check(const uint8_t *p, uint64_t len, uint32_t seed)
{
        for (uint64_t i = 0; i < len; i++)
                if (p[i] != pat(seed, i))
                        fail_msg("byte %llu: 0x%02x, expected 0x%02x", (unsigned long long)i, p[i],
                                 pat(seed, i));
}

static void test_registers(void **state)
{
        (void)state;
        struct t *t = tsetup();
        assert_int_equal(reg(t, NTBF_ACCEL_REG_ID), NTBF_ACCEL_ID);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_VERSION), NTBF_ACCEL_VERSION);
        assert_int_equal(reg64(t, NTBF_ACCEL_REG_MEMSIZE), DEVMEM);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_RING_OFF), 0x1000);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_RING_SIZE), 256);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_CHUNK), 64 * 1024);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_VECTORS), 2);
        assert_int_equal(reg64(t, NTBF_ACCEL_REG_MEM_ADDR), BAR2_ADDR);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_STATUS), 0);
        /* Config space: the accelerator's ids, BAR2 64-bit prefetchable, MSI-X in BAR0. */
        assert_int_equal(ntbf_sim_cfg_read(t->dev.cfg, 0, 4),
                         NTBF_SIM_ACCEL_DEVICE_ID << 16 | NTBF_SIM_VENDOR_ID);
        assert_int_equal(ntbf_sim_cfg_read(t->dev.cfg, NTBF_PCI_REVISION, 4) >> 8,
                         NTBF_CLASS_ACCEL);
        assert_int_equal(ntbf_sim_cfg_read(t->dev.cfg, NTBF_PCI_BAR0 + 8, 4),
                         (uint32_t)BAR2_ADDR | 0xc);
        struct ntbf_sim_msix m;
        ntbf_sim_cfg_msix(t->dev.cfg, &m);
        assert_int_equal(m.vectors, 2);
        assert_int_equal(m.table_off, NTBF_ACCEL_MSIX_TABLE);
        assert_int_equal(m.pba_off, NTBF_ACCEL_MSIX_PBA);
        /* Read-only registers come back after a driver's write. */
        setreg(t, NTBF_ACCEL_REG_ID, 0);
        setreg(t, NTBF_ACCEL_REG_HEAD, 17);
        poll_(t);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_ID), NTBF_ACCEL_ID);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_HEAD), 0);
        start(t);
        /* Disabled: descriptors wait. */
        setreg(t, NTBF_ACCEL_REG_CTRL, 0);
        fill(ram(t, MEM_BASE), 4096, 1);
        uint32_t i = post(t, MEM_BASE, BAR2_ADDR, 4096, 0);
        poll_(t);
        assert_int_equal(desc(t, i)->status, 0);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_STATUS), NTBF_ACCEL_STATUS_BUSY);
        setreg(t, NTBF_ACCEL_REG_CTRL, NTBF_ACCEL_CTRL_ENABLE);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_DONE);
        poll_(t);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_STATUS), NTBF_ACCEL_STATUS_READY);
        tfree(t);
}

static void test_copies(void **state)
{
        (void)state;
        struct t *t = tsetup();
        start(t);
        const uint32_t len = 100 * 1024 + 3;
        /* RAM -> device memory. */
        fill(ram(t, MEM_BASE + 0x10), len, 2);
        uint32_t i = post(t, MEM_BASE + 0x10, BAR2_ADDR + 0x1001, len, 0);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_DONE);
        check(devmem(t, BAR2_ADDR + 0x1001), len, 2);
        assert_int_equal(desc(t, i)->cookie, 0xc0de0000u | i);
        /* Device memory -> RAM. */
        fill(devmem(t, BAR2_ADDR + 0x200000), len, 3);
        i = post(t, BAR2_ADDR + 0x200000, MEM_BASE + 0x100007, len, 0);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_DONE);
        check(ram(t, MEM_BASE + 0x100007), len, 3);
        /* RAM -> RAM through the engine's buffer. */
        fill(ram(t, MEM_BASE + 0x200000), len, 4);
        i = post(t, MEM_BASE + 0x200000, MEM_BASE + 0x300000, len, 0);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_DONE);
        check(ram(t, MEM_BASE + 0x300000), len, 4);
        /* Device memory -> device memory, overlapping: like memmove. */
        fill(devmem(t, BAR2_ADDR + 0x300000), len, 5);
        i = post(t, BAR2_ADDR + 0x300000, BAR2_ADDR + 0x300000 + 4096, len, 0);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_DONE);
        check(devmem(t, BAR2_ADDR + 0x300000 + 4096), len, 5);
        /* A zero-length descriptor completes at once. */
        i = post(t, 0, 0, 0, 0);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_DONE);
        poll_(t);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_COMPLETED), 5);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_ERRORS), 0);
        assert_int_equal(reg64(t, NTBF_ACCEL_REG_BYTES), 4ull * len);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_HEAD), 5);
        /* Only the RAM side crossed the fabric. */
        assert_true(t->f->reads > 0);
        tfree(t);
}

static void test_chunks(void **state)
{
        (void)state;
        struct t *t = tsetup();
        start(t);
        const uint32_t len = 200 * 1024;
        fill(ram(t, MEM_BASE), len, 6);
        uint32_t a = post(t, MEM_BASE, MEM_BASE + 0x400000, len, 0);
        fill(ram(t, MEM_BASE + 0x800000), 4096, 7);
        uint32_t b = post(t, MEM_BASE + 0x800000, BAR2_ADDR, 4096, 0);
        /* 64 KiB per poll: the big copy takes four polls, the small one waits behind it. */
        for (int k = 1; k <= 3; k++) {
                poll_(t);
                assert_int_equal(desc(t, a)->status, 0);
                assert_int_equal(reg64(t, NTBF_ACCEL_REG_BYTES), (uint64_t)k * 64 * 1024);
                assert_int_equal(reg(t, NTBF_ACCEL_REG_STATUS),
                                 NTBF_ACCEL_STATUS_READY | NTBF_ACCEL_STATUS_BUSY);
        }
        poll_(t);
        assert_int_equal(desc(t, a)->status, NTBF_ACCEL_ST_DONE);
        assert_int_equal(desc(t, b)->status, NTBF_ACCEL_ST_DONE);
        check(ram(t, MEM_BASE + 0x400000), len, 6);
        check(devmem(t, BAR2_ADDR), 4096, 7);
        /* A range straddling the end of device memory: the part past it is DMA. */
        fill(devmem(t, BAR2_ADDR + DEVMEM - 4096), 4096, 8);
        uint32_t c = post(t, BAR2_ADDR + DEVMEM - 4096, MEM_BASE + 0x900000, 8192, 0);
        assert_int_equal(wait_done(t, c), NTBF_ACCEL_ST_ERROR | NTBF_ACCEL_ERR_SRC << 8);
        check(ram(t, MEM_BASE + 0x900000), 4096, 8);
        tfree(t);
}

static void test_errors(void **state)
{
        (void)state;
        struct t *t = tsetup();
        start(t);
        fill(ram(t, MEM_BASE), 8192, 9);
        fake_dma_fail(t->f, MEM_BASE + 0x10000, 4096);
        uint32_t i = post(t, MEM_BASE + 0x10000, BAR2_ADDR, 4096, 0);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_ERROR | NTBF_ACCEL_ERR_SRC << 8);
        assert_int_equal(NTBF_ACCEL_ST_REASON(desc(t, i)->status), NTBF_ACCEL_ERR_SRC);
        poll_(t);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_ERRORS), 1);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_LAST_ERROR), NTBF_ACCEL_ERR_SRC | i << 16);
        /* The failed read was a master abort for the function. */
        assert_true(ntbf_sim_cfg_read(t->dev.cfg, NTBF_PCI_STATUS, 2) & NTBF_PCI_STS_RMA);
        i = post(t, MEM_BASE, MEM_BASE + 0x10000, 4096, 0);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_ERROR | NTBF_ACCEL_ERR_DST << 8);
        i = post(t, BAR2_ADDR, UINT64_C(0x7000000000), 16, 0);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_ERROR | NTBF_ACCEL_ERR_DST << 8);
        i = post(t, MEM_BASE, BAR2_ADDR, 16, 0x10);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_ERROR | NTBF_ACCEL_ERR_BAD_FLAGS << 8);
        /* Without Bus Master Enable only device-internal copies work. */
        fake_dev_bus_master(&t->dev, 0);
        i = post(t, MEM_BASE, BAR2_ADDR, 4096, 0);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_ERROR | NTBF_ACCEL_ERR_NO_BUSMASTER << 8);
        fill(devmem(t, BAR2_ADDR), 4096, 10);
        i = post(t, BAR2_ADDR, BAR2_ADDR + 8192, 4096, 0);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_DONE);
        check(devmem(t, BAR2_ADDR + 8192), 4096, 10);
        fake_dev_bus_master(&t->dev, 1);
        /* After errors the engine goes on. */
        i = post(t, MEM_BASE, BAR2_ADDR, 8192, 0);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_DONE);
        check(devmem(t, BAR2_ADDR), 8192, 9);
        poll_(t);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_COMPLETED), 7);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_ERRORS), 5);
        /* A doorbell out of range is ignored and flagged until a valid one comes. */
        setreg(t, NTBF_ACCEL_REG_TAIL, 300);
        poll_(t);
        assert_true(reg(t, NTBF_ACCEL_REG_STATUS) & NTBF_ACCEL_STATUS_DB_ERROR);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_HEAD), 7);
        setreg(t, NTBF_ACCEL_REG_TAIL, t->tail);
        poll_(t);
        assert_false(reg(t, NTBF_ACCEL_REG_STATUS) & NTBF_ACCEL_STATUS_DB_ERROR);
        tfree(t);
}

static uint32_t msi_word(struct t *t)
{
        return __atomic_load_n((uint32_t *)(void *)ram(t, MSI_ADDR), __ATOMIC_ACQUIRE);
}

static void test_interrupts(void **state)
{
        (void)state;
        struct t *t = tsetup();
        start(t);
        uint32_t x = ntbf_sim_cfg_find_cap(t->dev.cfg, NTBF_PCI_CAP_ID_MSIX);
        ntbf_sim_cfg_write(t->dev.cfg, x + NTBF_PCI_MSIX_FLAGS, NTBF_PCI_MSIX_ENABLE, 2);
        uint8_t *e = (uint8_t *)t->dev.bar[0] + NTBF_ACCEL_MSIX_TABLE + 16;
        uint32_t ent[4] = {(uint32_t)MSI_ADDR, (uint32_t)(MSI_ADDR >> 32), 0x77, 0};
        memcpy(e, ent, sizeof(ent));
        setreg(t, NTBF_ACCEL_REG_MSIX_VECTOR, 1);
        setreg(t, NTBF_ACCEL_REG_CTRL, NTBF_ACCEL_CTRL_ENABLE | NTBF_ACCEL_CTRL_IRQ_ENABLE);
        /* No IRQ flag: no message. */
        uint32_t i = post(t, MEM_BASE, BAR2_ADDR, 64, 0);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_DONE);
        poll_(t);
        assert_int_equal(msi_word(t), 0);
        i = post(t, MEM_BASE, BAR2_ADDR, 64, NTBF_ACCEL_F_IRQ);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_DONE);
        assert_int_equal(msi_word(t), 0x77);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_IRQS), 1);
        /* Masked: pending in the PBA, delivered on unmask. */
        *(uint32_t *)(void *)ram(t, MSI_ADDR) = 0;
        ent[3] = 1;
        memcpy(e, ent, sizeof(ent));
        i = post(t, MEM_BASE, BAR2_ADDR, 64, NTBF_ACCEL_F_IRQ);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_DONE);
        poll_(t);
        assert_int_equal(msi_word(t), 0);
        uint64_t pba;
        memcpy(&pba, (uint8_t *)t->dev.bar[0] + NTBF_ACCEL_MSIX_PBA, 8);
        assert_int_equal(pba, 2);
        ent[3] = 0;
        memcpy(e, ent, sizeof(ent));
        poll_(t);
        assert_int_equal(msi_word(t), 0x77);
        memcpy(&pba, (uint8_t *)t->dev.bar[0] + NTBF_ACCEL_MSIX_PBA, 8);
        assert_int_equal(pba, 0);
        /* Interrupts disabled in CTRL: the flag alone does nothing. */
        *(uint32_t *)(void *)ram(t, MSI_ADDR) = 0;
        setreg(t, NTBF_ACCEL_REG_CTRL, NTBF_ACCEL_CTRL_ENABLE);
        i = post(t, MEM_BASE, BAR2_ADDR, 64, NTBF_ACCEL_F_IRQ);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_DONE);
        poll_(t);
        assert_int_equal(msi_word(t), 0);
        tfree(t);
}

static void test_ring_wrap(void **state)
{
        (void)state;
        struct t *t = tsetup();
        start(t);
        const uint32_t n = 700, sz = 512;
        fill(ram(t, MEM_BASE), (uint64_t)n * sz, 12);
        uint32_t posted = 0, done = 0;
        while (done < n) {
                /* Fill the ring up to one free slot (full means tail + 1 == head). */
                while (posted < n &&
                       (t->tail + 1) % NTBF_ACCEL_RING_SIZE != reg(t, NTBF_ACCEL_REG_HEAD)) {
                        post(t, MEM_BASE + (uint64_t)posted * sz,
                             BAR2_ADDR + (uint64_t)(n - 1 - posted) * sz, sz, 0);
                        posted++;
                }
                poll_(t);
                done = reg(t, NTBF_ACCEL_REG_COMPLETED);
        }
        assert_int_equal(posted, n);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_HEAD), n % NTBF_ACCEL_RING_SIZE);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_ERRORS), 0);
        for (uint32_t k = 0; k < n; k++) {
                const uint8_t *d = devmem(t, BAR2_ADDR + (uint64_t)(n - 1 - k) * sz);
                for (uint32_t b = 0; b < sz; b++)
                        assert_int_equal(d[b], pat(12, (uint64_t)k * sz + b));
        }
        tfree(t);
}

static void test_reset_and_restart(void **state)
{
        (void)state;
        struct t *t = tsetup();
        start(t);
        fill(ram(t, MEM_BASE), 256 * 1024, 13);
        post(t, MEM_BASE, BAR2_ADDR, 256 * 1024, 0);
        poll_(t);
        assert_int_equal(reg64(t, NTBF_ACCEL_REG_BYTES), 64 * 1024);
        /* The device host restarts mid-copy: the descriptor is copied again, to the end. */
        ntbf_sim_accel_ops.destroy(t->st);
        assert_int_equal(ntbf_sim_accel_ops.create(&t->dev.env, &t->st), 0);
        assert_int_equal(wait_done(t, 0), NTBF_ACCEL_ST_DONE);
        check(devmem(t, BAR2_ADDR), 256 * 1024, 13);
        poll_(t);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_COMPLETED), 1);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_HEAD), 1);
        /* CTRL.RESET mid-copy: counters and ring pointers back to 0, the bit clears. */
        post(t, MEM_BASE, BAR2_ADDR + 0x100000, 256 * 1024, 0);
        poll_(t);
        setreg(t, NTBF_ACCEL_REG_CTRL, NTBF_ACCEL_CTRL_ENABLE | NTBF_ACCEL_CTRL_RESET);
        poll_(t);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_CTRL), NTBF_ACCEL_CTRL_ENABLE);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_HEAD), 0);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_TAIL), 0);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_COMPLETED), 0);
        assert_int_equal(reg64(t, NTBF_ACCEL_REG_BYTES), 0);
        assert_int_equal(desc(t, 1)->status, 0);
        t->tail = 0;
        uint32_t i = post(t, MEM_BASE, BAR2_ADDR + 0x100000, 4096, 0);
        assert_int_equal(i, 0);
        assert_int_equal(wait_done(t, i), NTBF_ACCEL_ST_DONE);
        /* FLR: registers and config space back to power-on; device memory keeps its data. */
        ntbf_sim_accel_ops.reset(t->st);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_CTRL), 0);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_COMPLETED), 0);
        assert_int_equal(reg(t, NTBF_ACCEL_REG_ID), NTBF_ACCEL_ID);
        assert_int_equal(ntbf_sim_cfg_read(t->dev.cfg, NTBF_PCI_COMMAND, 2), 0);
        check(devmem(t, BAR2_ADDR), 256 * 1024, 13);
        tfree(t);
}

static void test_model_for(void **state)
{
        (void)state;
        struct ntbf_device d;
        memset(&d, 0, sizeof(d));
        assert_null(ntbf_sim_model_for(&d));
        d.sim.model = NTBF_SIM_NVME;
        assert_ptr_equal(ntbf_sim_model_for(&d), &ntbf_sim_nvme_ops);
        assert_string_equal(ntbf_sim_model_for(&d)->name, "nvme");
        d.sim.model = NTBF_SIM_ACCEL;
        assert_ptr_equal(ntbf_sim_model_for(&d), &ntbf_sim_accel_ops);
        assert_string_equal(ntbf_sim_model_for(&d)->name, "accel");
        /* A BAR0 too small for the register map is refused. */
        struct t *t = tsetup();
        void *st;
        t->dev.env.bar_size[0] = 4096;
        assert_int_equal(ntbf_sim_accel_ops.create(&t->dev.env, &st), -EINVAL);
        t->dev.env.bar_size[0] = NTBF_ACCEL_BAR0_SIZE;
        tfree(t);
}

static uint64_t ns_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Not a pass/fail figure: copy bandwidth of the engine (poll loop included). */
static void test_bandwidth(void **state)
{
        (void)state;
        struct t *t = tsetup();
        start(t);
        const uint32_t len = 4 << 20;
        const char *what[] = {"RAM->BAR2", "BAR2->RAM", "RAM->RAM"};
        uint64_t src[] = {MEM_BASE, BAR2_ADDR, MEM_BASE};
        uint64_t dst[] = {BAR2_ADDR, MEM_BASE + (8u << 20), MEM_BASE + (16u << 20)};
        memset(ram(t, MEM_BASE), 1, (uint64_t)len * 5);
        for (int k = 0; k < 3; k++) {
                uint64_t t0 = ns_now();
                for (int r = 0; r < 8; r++)
                        wait_done(t, post(t, src[k], dst[k], len, 0));
                uint64_t ns = ns_now() - t0;
                print_message("accel %s: %.2f GB/s\n", what[k], 8.0 * len / (double)ns);
        }
        tfree(t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_registers),
            cmocka_unit_test(test_copies),
            cmocka_unit_test(test_chunks),
            cmocka_unit_test(test_errors),
            cmocka_unit_test(test_interrupts),
            cmocka_unit_test(test_ring_wrap),
            cmocka_unit_test(test_reset_and_restart),
            cmocka_unit_test(test_model_for),
            cmocka_unit_test(test_bandwidth),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
