/* tools/accel_drv.c: driving the simulated accelerator's copy engine through a BAR0 mapping. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "../backends/sim/accel.h"
#include "accel_drv.h"

static uint32_t rd32(const struct accel_drv *a, uint32_t off)
{
        return __atomic_load_n((volatile uint32_t *)(a->regs + off), __ATOMIC_ACQUIRE);
}

static void wr32(struct accel_drv *a, uint32_t off, uint32_t v)
{
        __atomic_store_n((volatile uint32_t *)(a->regs + off), v, __ATOMIC_RELEASE);
}

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int accel_open(struct accel_drv *a, void *bar0)
{
        a->regs = bar0;
        if (rd32(a, NTBF_ACCEL_REG_ID) != NTBF_ACCEL_ID)
                return -ENODEV;
        wr32(a, NTBF_ACCEL_REG_CTRL, NTBF_ACCEL_CTRL_RESET);
        /* The engine notices a register write when it polls (at most ~1 ms when idle); wait
         * without spinning: on a small machine a spinning driver starves the device host. */
        uint64_t end = now_ns() + 10000000000u;
        struct timespec ts = {0, 20000};
        while ((rd32(a, NTBF_ACCEL_REG_CTRL) & NTBF_ACCEL_CTRL_RESET) && now_ns() < end)
                nanosleep(&ts, NULL);
        wr32(a, NTBF_ACCEL_REG_CTRL, NTBF_ACCEL_CTRL_ENABLE);
        while (!(rd32(a, NTBF_ACCEL_REG_STATUS) & NTBF_ACCEL_STATUS_READY) && now_ns() < end)
                nanosleep(&ts, NULL);
        a->tail = rd32(a, NTBF_ACCEL_REG_HEAD);
        wr32(a, NTBF_ACCEL_REG_TAIL, a->tail);
        return rd32(a, NTBF_ACCEL_REG_STATUS) & NTBF_ACCEL_STATUS_READY ? 0 : -ETIMEDOUT;
}

uint64_t accel_mem_addr(const struct accel_drv *a)
{
        uint64_t v;
        memcpy(&v, (const void *)(a->regs + NTBF_ACCEL_REG_MEM_ADDR), 8);
        return v;
}

int accel_copy(struct accel_drv *a, uint64_t src, uint64_t dst, uint32_t len, int timeout_ms,
               uint32_t *reason)
{
        uint32_t i = a->tail;
        volatile uint8_t *d = a->regs + NTBF_ACCEL_RING_OFF + (size_t)i * 32;
        struct ntbf_accel_desc desc = {src, dst, len, 0, 0, i};
        /* Status last: the engine only takes descriptors between HEAD and TAIL anyway. */
        memcpy((void *)d, &desc, sizeof(desc));
        a->tail = (i + 1) % NTBF_ACCEL_RING_SIZE;
        wr32(a, NTBF_ACCEL_REG_TAIL, a->tail);
        uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000u;
        uint32_t st;
        while (!(st = __atomic_load_n((volatile uint32_t *)(d + 24), __ATOMIC_ACQUIRE))) {
                if (now_ns() > end)
                        return -ETIMEDOUT;
                struct timespec ts = {0, 2000};
                nanosleep(&ts, NULL);
        }
        if (st == NTBF_ACCEL_ST_DONE)
                return 0;
        if (reason)
                *reason = NTBF_ACCEL_ST_REASON(st);
        return -EIO;
}
