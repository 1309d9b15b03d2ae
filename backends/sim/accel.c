/* backends/sim/accel.c: the simulated accelerator: device memory behind BAR2 and a copy engine. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "accel.h"
#include "cfgspace.h"

/* Descriptors finished per poll at most (small copies), besides the byte budget. */
#define MAX_DESC_PER_POLL 32

struct accel {
        struct ntbf_sim_devenv env;
        uint8_t *regs;
        uint8_t *mem; /* BAR2 */
        uint64_t mem_size, mem_addr;
        uint32_t vectors;
        uint32_t head, completed, errors, last_error, irqs;
        uint64_t bytes;
        uint32_t status;
        /* descriptor in progress */
        bool active, backward;
        uint64_t src, dst, off;
        uint32_t len, flags;
        struct ntbf_sim_msix_pending irq;
        uint8_t *bounce;
};

static uint32_t r32(const struct accel *a, uint32_t off)
{
        return __atomic_load_n((uint32_t *)(void *)(a->regs + off), __ATOMIC_ACQUIRE);
}

static uint64_t r64(const struct accel *a, uint32_t off)
{
        return __atomic_load_n((uint64_t *)(void *)(a->regs + off), __ATOMIC_ACQUIRE);
}

static void w32(struct accel *a, uint32_t off, uint32_t v)
{
        if (r32(a, off) != v)
                __atomic_store_n((uint32_t *)(void *)(a->regs + off), v, __ATOMIC_RELEASE);
}

static void w64(struct accel *a, uint32_t off, uint64_t v)
{
        if (r64(a, off) != v)
                __atomic_store_n((uint64_t *)(void *)(a->regs + off), v, __ATOMIC_RELEASE);
}

static uint8_t *desc_at(const struct accel *a, uint32_t i)
{
        return a->regs + NTBF_ACCEL_RING_OFF + (size_t)i * sizeof(struct ntbf_accel_desc);
}

/* Device-owned registers, restored from the engine's state. */
static void publish(struct accel *a)
{
        w32(a, NTBF_ACCEL_REG_ID, NTBF_ACCEL_ID);
        w32(a, NTBF_ACCEL_REG_VERSION, NTBF_ACCEL_VERSION);
        w64(a, NTBF_ACCEL_REG_MEMSIZE, a->mem_size);
        w32(a, NTBF_ACCEL_REG_RING_OFF, NTBF_ACCEL_RING_OFF);
        w32(a, NTBF_ACCEL_REG_RING_SIZE, NTBF_ACCEL_RING_SIZE);
        w32(a, NTBF_ACCEL_REG_CHUNK, NTBF_ACCEL_CHUNK);
        w32(a, NTBF_ACCEL_REG_VECTORS, a->vectors);
        w32(a, NTBF_ACCEL_REG_STATUS, a->status);
        w32(a, NTBF_ACCEL_REG_HEAD, a->head);
        w32(a, NTBF_ACCEL_REG_COMPLETED, a->completed);
        w32(a, NTBF_ACCEL_REG_ERRORS, a->errors);
        w32(a, NTBF_ACCEL_REG_LAST_ERROR, a->last_error);
        w32(a, NTBF_ACCEL_REG_IRQS, a->irqs);
        w64(a, NTBF_ACCEL_REG_BYTES, a->bytes);
        w64(a, NTBF_ACCEL_REG_MEM_ADDR, a->mem_addr);
}

static void engine_reset(struct accel *a)
{
        a->head = a->completed = a->errors = a->last_error = a->irqs = 0;
        a->bytes = 0;
        a->status = 0;
        a->active = false;
        __atomic_store_n((uint32_t *)(void *)(a->regs + NTBF_ACCEL_REG_TAIL), 0, __ATOMIC_RELEASE);
}

/* ---- copying ------------------------------------------------------------------------------ */

/* Bytes from addr to the next edge of device memory (UINT64_MAX past its end). */
static uint64_t span(const struct accel *a, uint64_t addr, bool *inside)
{
        *inside = a->mem && addr >= a->mem_addr && addr - a->mem_addr < a->mem_size;
        if (*inside)
                return a->mem_size - (addr - a->mem_addr);
        if (a->mem && addr < a->mem_addr)
                return a->mem_addr - addr;
        return UINT64_MAX;
}

/* Copy len bytes; 0 or an error reason. */
static uint32_t copy(struct accel *a, uint64_t src, uint64_t dst, uint64_t len)
{
        while (len) {
                bool s_in, d_in;
                uint64_t k = len, ss = span(a, src, &s_in), ds = span(a, dst, &d_in);
                k = k < ss ? k : ss;
                k = k < ds ? k : ds;
                uint8_t *sp = s_in ? a->mem + (src - a->mem_addr) : NULL;
                uint8_t *dp = d_in ? a->mem + (dst - a->mem_addr) : NULL;
                if ((!s_in || !d_in) && !ntbf_sim_cfg_bus_master(a->env.cfg))
                        return NTBF_ACCEL_ERR_NO_BUSMASTER;
                if (s_in && d_in) {
                        memmove(dp, sp, k);
                } else if (s_in) {
                        if (ntbf_sim_dma_write(&a->env, dst, sp, k))
                                return NTBF_ACCEL_ERR_DST;
                } else if (d_in) {
                        /* Straight into device memory; a failed read leaves all ones there, as
                         * the completions carrying them would. */
                        if (ntbf_sim_dma_read(&a->env, src, dp, k))
                                return NTBF_ACCEL_ERR_SRC;
                } else {
                        if (ntbf_sim_dma_read(&a->env, src, a->bounce, k))
                                return NTBF_ACCEL_ERR_SRC;
                        if (ntbf_sim_dma_write(&a->env, dst, a->bounce, k))
                                return NTBF_ACCEL_ERR_DST;
                }
                src += k;
                dst += k;
                len -= k;
        }
        return 0;
}

static void finish(struct accel *a, uint32_t reason, bool *irq)
{
        uint32_t st = reason ? NTBF_ACCEL_ST_ERROR | reason << 8 : NTBF_ACCEL_ST_DONE;
        struct ntbf_accel_desc *d = (struct ntbf_accel_desc *)(void *)desc_at(a, a->head);
        /* Data first, then the status the driver polls. */
        __atomic_store_n(&d->status, st, __ATOMIC_RELEASE);
        if (reason) {
                a->errors++;
                a->last_error = reason | a->head << 16;
        }
        if (a->flags & NTBF_ACCEL_F_IRQ)
                *irq = true;
        a->active = false;
        a->head = (a->head + 1) % NTBF_ACCEL_RING_SIZE;
        a->completed++;
}

/* One poll step of the engine: at most NTBF_ACCEL_CHUNK bytes. Returns descriptors finished
 * plus chunks copied (0 when idle). */
static int engine(struct accel *a, bool *irq)
{
        uint32_t tail = r32(a, NTBF_ACCEL_REG_TAIL);
        if (tail >= NTBF_ACCEL_RING_SIZE) {
                a->status |= NTBF_ACCEL_STATUS_DB_ERROR;
                return 0;
        }
        a->status &= ~NTBF_ACCEL_STATUS_DB_ERROR;
        uint64_t budget = NTBF_ACCEL_CHUNK;
        int work = 0;
        for (int n = 0; n < MAX_DESC_PER_POLL && budget; n++) {
                if (!a->active) {
                        if (a->head == tail)
                                break;
                        const struct ntbf_accel_desc *d =
                            (const struct ntbf_accel_desc *)(const void *)desc_at(a, a->head);
                        a->src = __atomic_load_n(&d->src, __ATOMIC_ACQUIRE);
                        a->dst = __atomic_load_n(&d->dst, __ATOMIC_ACQUIRE);
                        a->len = __atomic_load_n(&d->len, __ATOMIC_ACQUIRE);
                        a->flags = __atomic_load_n(&d->flags, __ATOMIC_ACQUIRE);
                        a->off = 0;
                        a->active = true;
                        /* A destination overlapping the end of its source is copied from the
                         * end, chunk by chunk, so the result is that of memmove. */
                        a->backward = a->dst > a->src && a->dst - a->src < a->len;
                        if (a->flags & ~NTBF_ACCEL_F_IRQ) {
                                finish(a, NTBF_ACCEL_ERR_BAD_FLAGS, irq);
                                work++;
                                continue;
                        }
                }
                uint64_t k = a->len - a->off;
                k = k < budget ? k : budget;
                uint64_t at = a->backward ? a->len - a->off - k : a->off;
                uint32_t reason = copy(a, a->src + at, a->dst + at, k);
                if (!reason) {
                        a->off += k;
                        a->bytes += k;
                        budget -= k;
                }
                if (reason || a->off == a->len)
                        finish(a, reason, irq);
                work++;
        }
        return work;
}

/* ---- model operations --------------------------------------------------------------------- */

static void layout_of(const struct accel *a, struct ntbf_sim_cfg_layout *l)
{
        *l = (struct ntbf_sim_cfg_layout){.msix_vectors = a->vectors,
                                          .msix_table_bar = 0,
                                          .msix_table_off = NTBF_ACCEL_MSIX_TABLE,
                                          .msix_pba_bar = 0,
                                          .msix_pba_off = NTBF_ACCEL_MSIX_PBA,
                                          .link_width = 16};
}

static void power_on(struct accel *a)
{
        memset(a->regs, 0, NTBF_ACCEL_MSIX_TABLE);
        engine_reset(a);
        publish(a);
}

static void accel_destroy(void *state)
{
        struct accel *a = state;
        if (!a)
                return;
        free(a->bounce);
        free(a);
}

static int accel_create(const struct ntbf_sim_devenv *env, void **state)
{
        const struct ntbf_device *d = env->desc;
        if (!env->cfg || !env->bar[0] || env->bar_size[0] < NTBF_ACCEL_BAR0_SIZE)
                return -EINVAL;
        struct accel *a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->env = *env;
        a->regs = env->bar[0];
        if (env->bar[2]) {
                a->mem = env->bar[2];
                a->mem_size = env->bar_size[2];
                a->mem_addr = ntbf_device_bar_addr(d, env->function, 2);
        }
        a->vectors = d->sim.msix < NTBF_ACCEL_MSIX_MAX ? d->sim.msix : NTBF_ACCEL_MSIX_MAX;
        a->bounce = aligned_alloc(4096, NTBF_ACCEL_CHUNK);
        if (!a->bounce) {
                accel_destroy(a);
                return -ENOMEM;
        }
        struct ntbf_sim_cfg_layout l;
        layout_of(a, &l);
        if (ntbf_sim_cfg_matches(env->cfg, d, env->function, &l) &&
            r32(a, NTBF_ACCEL_REG_ID) == NTBF_ACCEL_ID) {
                /* A restarted device host continues from the registers; the descriptor that
                 * was in progress is copied again from its start. */
                a->head = r32(a, NTBF_ACCEL_REG_HEAD) % NTBF_ACCEL_RING_SIZE;
                a->completed = r32(a, NTBF_ACCEL_REG_COMPLETED);
                a->errors = r32(a, NTBF_ACCEL_REG_ERRORS);
                a->last_error = r32(a, NTBF_ACCEL_REG_LAST_ERROR);
                a->irqs = r32(a, NTBF_ACCEL_REG_IRQS);
                a->bytes = r64(a, NTBF_ACCEL_REG_BYTES);
                publish(a);
        } else {
                int r = ntbf_sim_cfg_build(env->cfg, d, env->function, &l);
                if (r) {
                        accel_destroy(a);
                        return r;
                }
                ntbf_sim_msix_reset(&a->env, &a->irq);
                power_on(a);
        }
        *state = a;
        return 0;
}

static void accel_reset(void *state)
{
        struct accel *a = state;
        struct ntbf_sim_cfg_layout l;
        layout_of(a, &l);
        ntbf_sim_cfg_build(a->env.cfg, a->env.desc, a->env.function, &l);
        ntbf_sim_msix_reset(&a->env, &a->irq);
        power_on(a);
}

static int accel_poll(void *state, uint64_t now_ns)
{
        (void)now_ns;
        struct accel *a = state;
        int work = 0;
        uint32_t ctrl = r32(a, NTBF_ACCEL_REG_CTRL);
        if (ctrl & NTBF_ACCEL_CTRL_RESET) {
                engine_reset(a);
                __atomic_fetch_and((uint32_t *)(void *)(a->regs + NTBF_ACCEL_REG_CTRL),
                                   ~NTBF_ACCEL_CTRL_RESET, __ATOMIC_ACQ_REL);
                ctrl &= ~NTBF_ACCEL_CTRL_RESET;
                work++;
        }
        work += ntbf_sim_msix_flush(&a->env, &a->irq);
        bool irq = false;
        if (ctrl & NTBF_ACCEL_CTRL_ENABLE) {
                a->status |= NTBF_ACCEL_STATUS_READY;
                work += engine(a, &irq);
        } else {
                a->status &= ~NTBF_ACCEL_STATUS_READY;
        }
        uint32_t tail = r32(a, NTBF_ACCEL_REG_TAIL);
        if (a->active || (tail < NTBF_ACCEL_RING_SIZE && tail != a->head))
                a->status |= NTBF_ACCEL_STATUS_BUSY;
        else
                a->status &= ~NTBF_ACCEL_STATUS_BUSY;
        publish(a);
        if (irq && (ctrl & NTBF_ACCEL_CTRL_IRQ_ENABLE)) {
                int r = ntbf_sim_msix_signal(&a->env, &a->irq, r32(a, NTBF_ACCEL_REG_MSIX_VECTOR));
                if (r >= 0) {
                        a->irqs++;
                        w32(a, NTBF_ACCEL_REG_IRQS, a->irqs);
                }
        }
        return work;
}

const struct ntbf_sim_model_ops ntbf_sim_accel_ops = {
    .name = "accel",
    .create = accel_create,
    .poll = accel_poll,
    .reset = accel_reset,
    .destroy = accel_destroy,
};
