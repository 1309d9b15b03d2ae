/* tests/unit/nvme_fx.c: the simulated NVMe over flat fake memory for driver tests (nvme_fx.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "nvme_fx.h"

#define PG 4096u

void nfx_idle(void *arg)
{
        struct nfx *x = arg;
        if (!x->frozen) {
                x->now += 1000;
                ntbf_sim_nvme_ops.poll(x->st, x->now);
        }
        if (x->extra)
                x->extra(x->extra_arg);
}

void nfx_up(struct nfx *x, uint32_t queues, uint64_t capacity)
{
        memset(x, 0, sizeof(*x));
        snprintf(x->d.name, sizeof(x->d.name), "nvme0");
        x->d.bus = 3;
        x->d.functions = 1;
        ntbf_sim_defaults(&x->d.sim, NTBF_SIM_NVME);
        x->d.sim.capacity = capacity;
        x->d.sim.queues = queues;
        ntbf_device_apply_sim(&x->d);
        x->d.bars[0].addr = UINT64_C(0xfe000000);
        x->f = fake_dma_new(NFX_BASE, NFX_SIZE);
        assert_non_null(x->f);
        snprintf(x->path, sizeof(x->path), "/tmp/ntbf-nvmefx-XXXXXX");
        x->fd = mkstemp(x->path);
        assert_true(x->fd >= 0);
        assert_int_equal(fake_dev_init(&x->dev, &x->d, x->f, x->fd), 0);
        assert_int_equal(ntbf_sim_nvme_ops.create(&x->dev.env, &x->st), 0);
        fake_dev_bus_master(&x->dev, 1);
        x->brk = NFX_BASE;
        x->wait = (struct ntbf_nvme_wait){.timeout_ms = 300, .idle = nfx_idle, .idle_arg = x};
}

void nfx_down(struct nfx *x)
{
        ntbf_nvme_ctrl_close(&x->c);
        ntbf_sim_nvme_ops.destroy(x->st);
        fake_dev_free(&x->dev);
        fake_dma_free(x->f);
        close(x->fd);
        unlink(x->path);
}

struct ntbf_nvme_mem nfx_mem(struct nfx *x, size_t size)
{
        size = (size + PG - 1) & ~(size_t)(PG - 1);
        uint64_t a = x->brk;
        x->brk += size;
        assert_true(x->brk <= NFX_BASE + NFX_SIZE);
        void *p = fake_dma_ptr(x->f, a);
        memset(p, 0, size);
        return (struct ntbf_nvme_mem){p, a, size};
}

void nfx_reset(struct nfx *x)
{
        ntbf_nvme_ctrl_close(&x->c);
        assert_int_equal(ntbf_nvme_ctrl_open(&x->c, x->dev.bar[0], NTBF_NVME_BAR0_SIZE), 0);
        x->c.wait = x->wait;
        struct ntbf_nvme_mem admin = nfx_mem(x, ntbf_nvme_admin_bytes(32));
        int r = ntbf_nvme_ctrl_reset(&x->c, &admin, 32);
        if (r)
                fail_msg("reset: %s", ntbf_nvme_strstatus(r));
}

void nfx_qp(struct nfx *x, struct ntbf_nvme_qp *q, uint16_t qid, uint32_t entries)
{
        struct ntbf_nvme_mem sq = nfx_mem(x, ntbf_nvme_sq_bytes(entries));
        struct ntbf_nvme_mem cq = nfx_mem(x, ntbf_nvme_cq_bytes(entries));
        struct ntbf_nvme_mem prp = nfx_mem(x, ntbf_nvme_prp_bytes(entries));
        assert_int_equal(ntbf_nvme_qp_init(q, x->dev.bar[0], x->c.db_stride, qid, entries, &sq,
                                           entries, &cq, &prp),
                         0);
}

static uint8_t stream(uint64_t seed, uint64_t pos)
{
        uint64_t v =
            (pos / 8 + 1) * UINT64_C(0x9e3779b97f4a7c15) ^ seed * UINT64_C(0xbf58476d1ce4e5b9);
        v ^= v >> 31;
        return (uint8_t)(v >> (8 * (pos % 8)));
}

void nfx_fill(uint8_t *p, size_t len, uint64_t seed, uint64_t pos)
{
        for (size_t i = 0; i < len; i++)
                p[i] = stream(seed, pos + i);
}

long nfx_check(const uint8_t *p, size_t len, uint64_t seed, uint64_t pos)
{
        for (size_t i = 0; i < len; i++)
                if (p[i] != stream(seed, pos + i))
                        return (long)i;
        return -1;
}
