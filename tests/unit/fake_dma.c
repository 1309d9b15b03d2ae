/* tests/unit/fake_dma.c: flat-memory fake fabric and device environments for model tests. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cfgspace.h"
#include "fake_dma.h"

struct fake_dma *fake_dma_new(uint64_t base, uint64_t size)
{
        struct fake_dma *f = calloc(1, sizeof(*f));
        if (!f)
                return NULL;
        /* Anonymous memory is zero and only touched pages cost anything. */
        void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
                free(f);
                return NULL;
        }
        f->mem = m;
        f->base = base;
        f->size = size;
        return f;
}

void fake_dma_free(struct fake_dma *f)
{
        if (!f)
                return;
        munmap(f->mem, f->size);
        free(f);
}

static int reachable(const struct fake_dma *f, uint64_t addr, size_t len)
{
        if (addr < f->base || addr - f->base > f->size || len > f->size - (addr - f->base))
                return 0;
        for (unsigned i = 0; i < f->nfail; i++)
                if (addr < f->fail[i].hi && addr + len > f->fail[i].lo)
                        return 0;
        return 1;
}

static int fd_read(void *opaque, uint64_t addr, void *buf, size_t len)
{
        struct fake_dma *f = opaque;
        f->reads++;
        if (!reachable(f, addr, len)) {
                f->errors++;
                memset(buf, 0xff, len);
                return -EIO;
        }
        memcpy(buf, f->mem + (addr - f->base), len);
        return 0;
}

static int fd_write(void *opaque, uint64_t addr, const void *buf, size_t len)
{
        struct fake_dma *f = opaque;
        f->writes++;
        if (!reachable(f, addr, len)) {
                f->errors++;
                return -EIO;
        }
        uint8_t *p = f->mem + (addr - f->base);
        if (len == 4 && !(addr & 3)) {
                uint32_t v;
                memcpy(&v, buf, 4);
                __atomic_store_n((uint32_t *)(void *)p, v, __ATOMIC_RELEASE);
        } else if (len == 8 && !(addr & 7)) {
                uint64_t v;
                memcpy(&v, buf, 8);
                __atomic_store_n((uint64_t *)(void *)p, v, __ATOMIC_RELEASE);
        } else {
                memcpy(p, buf, len);
        }
        return 0;
}

struct ntbf_sim_dma fake_dma_ops(struct fake_dma *f)
{
        return (struct ntbf_sim_dma){.read = fd_read, .write = fd_write, .opaque = f};
}

void *fake_dma_ptr(struct fake_dma *f, uint64_t addr)
{
        if (addr < f->base || addr - f->base >= f->size)
                return NULL;
        return f->mem + (addr - f->base);
}

void fake_dma_fail(struct fake_dma *f, uint64_t addr, uint64_t len)
{
        if (f->nfail < sizeof(f->fail) / sizeof(f->fail[0])) {
                f->fail[f->nfail].lo = addr;
                f->fail[f->nfail].hi = addr + len;
                f->nfail++;
        }
}

void fake_dma_heal(struct fake_dma *f)
{
        f->nfail = 0;
}

int fake_dev_init(struct fake_dev *d, const struct ntbf_device *desc, struct fake_dma *f,
                  int backing_fd)
{
        memset(d, 0, sizeof(*d));
        d->cfg = aligned_alloc(4096, NTBF_SIM_CFG_REGION);
        if (!d->cfg)
                return -ENOMEM;
        memset(d->cfg, 0, NTBF_SIM_CFG_REGION);
        d->env.desc = desc;
        d->env.function = 0;
        d->env.node_name = "n0";
        d->env.node_id = 4;
        d->env.cfg = d->cfg;
        d->env.backing_fd = backing_fd;
        d->env.dma = fake_dma_ops(f);
        for (int b = 0; b < NTBF_MAX_BARS; b++) {
                uint64_t size = ntbf_device_bar_size(desc, 0, (uint32_t)b);
                if (!size)
                        continue;
                d->bar[b] = aligned_alloc(4096, size);
                if (!d->bar[b]) {
                        fake_dev_free(d);
                        return -ENOMEM;
                }
                memset(d->bar[b], 0, size);
                d->env.bar[b] = d->bar[b];
                d->env.bar_size[b] = size;
        }
        return 0;
}

void fake_dev_free(struct fake_dev *d)
{
        for (int b = 0; b < NTBF_MAX_BARS; b++)
                free(d->bar[b]);
        free(d->cfg);
        memset(d, 0, sizeof(*d));
}

void fake_dev_bus_master(struct fake_dev *d, int on)
{
        uint32_t cmd = ntbf_sim_cfg_read(d->cfg, NTBF_PCI_COMMAND, 2);
        cmd = on ? cmd | NTBF_PCI_CMD_MASTER | NTBF_PCI_CMD_MEMORY : cmd & ~NTBF_PCI_CMD_MASTER;
        ntbf_sim_cfg_write(d->cfg, NTBF_PCI_COMMAND, cmd, 2);
}
