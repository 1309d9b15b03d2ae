/* tests/unit/simfab_mirror.c: the mirror device model: a DMA copy engine driven through BAR0. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "simfab_mirror.h"

struct mirror {
        struct ntbf_sim_devenv env;
        uint8_t *regs;
        uint8_t buf[64 * 1024];
};

static _Atomic uint32_t *r32(struct mirror *m, unsigned off)
{
        return (_Atomic uint32_t *)(m->regs + off);
}

static _Atomic uint64_t *r64(struct mirror *m, unsigned off)
{
        return (_Atomic uint64_t *)(m->regs + off);
}

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int mirror_create(const struct ntbf_sim_devenv *env, void **state)
{
        if (!env->bar[0] || env->bar_size[0] < 4096)
                return -EINVAL;
        struct mirror *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->env = *env;
        m->regs = env->bar[0];
        /* Registers survive a restart of the device host: keep them, count the creation. */
        atomic_fetch_add(r32(m, MIRROR_CREATES), 1);
        *state = m;
        return 0;
}

static int mirror_poll(void *state, uint64_t now)
{
        struct mirror *m = state;
        (void)now;
        /* Take the doorbell with the work, so a ring after DONE is never wiped. */
        if (!atomic_exchange_explicit(r32(m, MIRROR_DOORBELL), 0, memory_order_acq_rel))
                return 0;
        atomic_store(r64(m, MIRROR_SEEN_NS), now_ns());
        uint64_t src = atomic_load(r64(m, MIRROR_SRC)), dst = atomic_load(r64(m, MIRROR_DST));
        uint32_t len = atomic_load(r32(m, MIRROR_LEN));
        int err = 0;
        for (uint32_t done = 0; done < len && !err;) {
                uint32_t n = len - done < sizeof(m->buf) ? len - done : (uint32_t)sizeof(m->buf);
                err = m->env.dma.read(m->env.dma.opaque, src + done, m->buf, n);
                if (!err)
                        err = m->env.dma.write(m->env.dma.opaque, dst + done, m->buf, n);
                done += n;
        }
        atomic_store(r32(m, MIRROR_STATUS), err ? (uint32_t)err : 1u);
        uint64_t msi = atomic_load(r64(m, MIRROR_MSI_ADDR));
        if (msi) {
                uint32_t data = atomic_load(r32(m, MIRROR_MSI_DATA));
                m->env.dma.write(m->env.dma.opaque, msi, &data, 4);
        }
        /* DONE last: a driver that sees it sees the status and the interrupt too. */
        atomic_fetch_add(r32(m, MIRROR_DONE), 1);
        return 1;
}

static void mirror_reset(void *state)
{
        struct mirror *m = state;
        uint32_t resets = atomic_load(r32(m, MIRROR_RESETS)),
                 creates = atomic_load(r32(m, MIRROR_CREATES));
        memset(m->regs, 0, 0x40);
        atomic_store(r32(m, MIRROR_RESETS), resets + 1);
        atomic_store(r32(m, MIRROR_CREATES), creates);
}

static void mirror_destroy(void *state)
{
        free(state);
}

const struct ntbf_sim_model_ops simfab_mirror_ops = {"mirror", mirror_create, mirror_poll,
                                                     mirror_reset, mirror_destroy};

const struct ntbf_sim_model_ops *simfab_mirror_for(const struct ntbf_device *d)
{
        return strncmp(d->name, "mirror", 6) ? NULL : &simfab_mirror_ops;
}
