/* backends/sim/mem.c: memory exported from a host's RAM (mem_alloc), owned by a process. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ntbfab/units.h"
#include "sim.h"

/*
 * Allocations are records in the node's table (layout.h): base, size, owner (pid and start
 * time), written before the record's state word is set. The table is changed under the
 * node's robust mutex. Records are unsorted; an allocation sorts the used ones and takes
 * the first gap that fits (allocation is not on any data path).
 */

void ntbf__sim_mem_recover(void *arg)
{
        struct sim_node *n = arg;
        uint32_t count = 0;
        uint64_t bytes = 0;
        for (uint32_t i = 0; i < SIM_MEM_RECORDS; i++) {
                if (atomic_load(&n->mem[i].state) == 1) {
                        count++;
                        bytes += n->mem[i].size;
                }
        }
        n->mem_count = count;
        n->mem_bytes = bytes;
}

struct span {
        uint64_t base, end;
};

static int cmp_span(const void *a, const void *b)
{
        const struct span *x = a, *y = b;
        return x->base < y->base ? -1 : x->base > y->base;
}

/* The RAM ranges of a node in physical addresses: low RAM, then RAM from 4 GiB. */
static uint32_t ram_ranges(const struct ntbf_sim *s, uint32_t node, struct span out[2])
{
        const struct ntbf_addrmap *m = &s->t->maps[node];
        uint32_t n = 0;
        for (uint32_t i = 0; i < m->n && n < 2; i++)
                if (m->v[i].kind == NTBF_REGION_RAM)
                        out[n++] = (struct span){m->v[i].base, m->v[i].base + m->v[i].size};
        return n;
}

/* First fit of size at align among the used spans; UINT64_MAX if nothing fits. */
static uint64_t first_fit(const struct span *ram, uint32_t nram, const struct span *used,
                          uint32_t nused, uint64_t size, uint64_t align)
{
        for (uint32_t r = 0; r < nram; r++) {
                uint64_t at = ram[r].base < SIM_MEM_FLOOR ? SIM_MEM_FLOOR : ram[r].base;
                at = ntbf_align_up(at, align);
                for (uint32_t i = 0; i <= nused; i++) {
                        uint64_t gap_end = i < nused ? used[i].base : ram[r].end;
                        if (i < nused && used[i].end <= at)
                                continue;
                        if (gap_end > ram[r].end)
                                gap_end = ram[r].end;
                        if (at < gap_end && gap_end - at >= size)
                                return at;
                        if (i < nused)
                                at = ntbf_align_up(used[i].end > at ? used[i].end : at, align);
                        if (at >= ram[r].end)
                                break;
                }
        }
        return UINT64_MAX;
}

static void punch(struct ntbf_sim *s, uint32_t node, uint64_t base, uint64_t size)
{
        const struct ntbf_region *r = ntbf_addrmap_lookup(s->t, node, base);
        int fd = ntbf__sim_file_fd(s, SF_RAM, node);
        if (r && fd >= 0)
                fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                          (off_t)ntbf__sim_ram_off(s, node, r, base), (off_t)size);
}

int ntbf__sim_mem_alloc(struct ntbf_sim *s, uint32_t node, uint64_t size, uint64_t align,
                        struct ntbf_mem *out)
{
        if (!size || !out || (align && !ntbf_is_pow2(align)))
                return -EINVAL;
        size = ntbf_align_up(size, SIM_PAGE);
        if (align < SIM_PAGE)
                align = SIM_PAGE;
        if (getpid() != s->pid) { /* forked: the owner is the child */
                s->pid = getpid();
                s->start = ntbf__sim_proc_start(s->pid);
        }
        struct sim_node *n = &s->nodes[node];
        struct span ram[2];
        uint32_t nram = ram_ranges(s, node, ram);
        struct span *used = malloc(SIM_MEM_RECORDS * sizeof(*used));
        if (!used)
                return -ENOMEM;
        int r = 0;
        ntbf__sim_lock(s, &n->mem_lock, ntbf__sim_mem_recover, n);
        uint32_t nused = 0, freerec = UINT32_MAX;
        for (uint32_t i = 0; i < SIM_MEM_RECORDS; i++) {
                if (atomic_load(&n->mem[i].state) == 1)
                        used[nused++] =
                            (struct span){n->mem[i].base, n->mem[i].base + n->mem[i].size};
                else if (freerec == UINT32_MAX)
                        freerec = i;
        }
        qsort(used, nused, sizeof(*used), cmp_span);
        uint64_t base = first_fit(ram, nram, used, nused, size, align);
        if (freerec == UINT32_MAX || base == UINT64_MAX) {
                r = -ENOMEM;
                ntbf__sim_unlock(&n->mem_lock);
                free(used);
                return r;
        }
        struct sim_memrec *m = &n->mem[freerec];
        m->pid = s->pid;
        m->start = s->start;
        m->base = base;
        m->size = size;
        m->id = n->mem_next_id++;
        atomic_store_explicit(&m->state, 1, memory_order_release);
        n->mem_count++;
        n->mem_bytes += size;
        ntbf__sim_unlock(&n->mem_lock);
        free(used);

        /* Fresh memory reads as zeros, whatever a previous owner left there. */
        punch(s, node, base, size);
        const struct ntbf_region *reg = ntbf_addrmap_lookup(s->t, node, base);
        int fd = ntbf__sim_file_fd(s, SF_RAM, node);
        void *addr = MAP_FAILED;
        int dfd = -1;
        if (fd >= 0)
                addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                            (off_t)ntbf__sim_ram_off(s, node, reg, base));
        if (addr != MAP_FAILED)
                dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (addr == MAP_FAILED || dfd < 0) {
                r = -errno;
                if (addr != MAP_FAILED)
                        munmap(addr, size);
                struct ntbf_mem tmp = {.size = size, .bus_addr = base, .fd = -1};
                ntbf__sim_mem_free(s, node, &tmp);
                return r ? r : -EIO;
        }
        *out = (struct ntbf_mem){addr, size, base, dfd, ntbf__sim_ram_off(s, node, reg, base)};
        return 0;
}

int ntbf__sim_mem_free(struct ntbf_sim *s, uint32_t node, struct ntbf_mem *m)
{
        if (!m)
                return -EINVAL;
        struct sim_node *n = &s->nodes[node];
        int r = -ENOENT;
        ntbf__sim_lock(s, &n->mem_lock, ntbf__sim_mem_recover, n);
        for (uint32_t i = 0; i < SIM_MEM_RECORDS; i++) {
                struct sim_memrec *rec = &n->mem[i];
                if (atomic_load(&rec->state) == 1 && rec->base == m->bus_addr &&
                    rec->size == ntbf_align_up(m->size, SIM_PAGE)) {
                        atomic_store_explicit(&rec->state, 0, memory_order_release);
                        n->mem_count--;
                        n->mem_bytes -= rec->size;
                        r = 0;
                        break;
                }
        }
        ntbf__sim_unlock(&n->mem_lock);
        if (r)
                return r;
        punch(s, node, m->bus_addr, ntbf_align_up(m->size, SIM_PAGE));
        if (m->addr)
                munmap(m->addr, ntbf_align_up(m->size, SIM_PAGE));
        if (m->fd >= 0)
                close(m->fd);
        m->addr = NULL;
        m->fd = -1;
        return 0;
}

bool ntbf__sim_mem_live(struct ntbf_sim *s, uint32_t node, uint64_t base, uint64_t size)
{
        struct sim_node *n = &s->nodes[node];
        bool in = false;
        ntbf__sim_lock(s, &n->mem_lock, ntbf__sim_mem_recover, n);
        for (uint32_t i = 0; i < SIM_MEM_RECORDS && !in; i++) {
                const struct sim_memrec *rec = &n->mem[i];
                in = atomic_load(&rec->state) == 1 && base >= rec->base && size <= rec->size &&
                     base - rec->base <= rec->size - size;
        }
        ntbf__sim_unlock(&n->mem_lock);
        return in;
}

uint32_t ntbf__sim_mem_reap(struct ntbf_sim *s, uint32_t node)
{
        struct sim_node *n = &s->nodes[node];
        /* Punching holes is a syscall: done after unlocking, for up to 64 of them. */
        struct {
                uint64_t base, size;
        } freed[64];
        uint32_t nfreed = 0, total = 0;
        int last_pid = -1;
        uint64_t last_start = 0;
        bool last_alive = true;
        ntbf__sim_lock(s, &n->mem_lock, ntbf__sim_mem_recover, n);
        for (uint32_t i = 0; i < SIM_MEM_RECORDS; i++) {
                struct sim_memrec *rec = &n->mem[i];
                if (atomic_load(&rec->state) != 1)
                        continue;
                /* Records of one owner tend to be many: ask /proc once per owner. */
                if (rec->pid != last_pid || rec->start != last_start) {
                        last_pid = rec->pid;
                        last_start = rec->start;
                        last_alive = ntbf__sim_owner_alive(rec->pid, rec->start);
                }
                if (last_alive)
                        continue;
                atomic_store_explicit(&rec->state, 0, memory_order_release);
                n->mem_count--;
                n->mem_bytes -= rec->size;
                total++;
                if (nfreed < 64)
                        freed[nfreed].base = rec->base, freed[nfreed++].size = rec->size;
                else
                        punch(s, node, rec->base, rec->size);
        }
        ntbf__sim_unlock(&n->mem_lock);
        for (uint32_t i = 0; i < nfreed; i++)
                punch(s, node, freed[i].base, freed[i].size);
        return total;
}

void ntbf__sim_node_wipe(struct ntbf_sim *s, uint32_t node)
{
        struct sim_node *n = &s->nodes[node];
        ntbf__sim_lock(s, &n->mem_lock, ntbf__sim_mem_recover, n);
        for (uint32_t i = 0; i < SIM_MEM_RECORDS; i++)
                atomic_store(&n->mem[i].state, 0);
        n->mem_count = 0;
        n->mem_bytes = 0;
        ntbf__sim_unlock(&n->mem_lock);
        ntbf__sim_lock(s, &n->irq_lock, ntbf__sim_irq_recover, n);
        for (uint32_t i = 0; i < SIM_IRQ_VECTORS; i++) {
                atomic_store(&n->irq[i].state, 0);
                atomic_store(&n->irq[i].pending, 0);
        }
        n->irq_count = 0;
        ntbf__sim_unlock(&n->irq_lock);
        int fd = ntbf__sim_file_fd(s, SF_RAM, node);
        if (fd >= 0)
                fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)n->ram_size);
        ntbf__sim_iommu_wipe(s, node);
}
