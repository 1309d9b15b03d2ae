/* backends/sim/mcast.c: multicast group membership: where each member receives group writes. */
#include <errno.h>

#include "sim.h"

/*
 * A membership is two words (overlay address, size): written under the fabric's multicast
 * mutex and read without a lock as a seqlock, the address word carrying a valid bit and
 * a generation that changes on every join and leave. A reader that sees the same address
 * word before and after reading the size has a consistent pair.
 */

bool ntbf__sim_mcast_get(struct ntbf_sim *s, uint32_t a, uint32_t g, uint64_t *addr, uint64_t *size)
{
        struct sim_mcrec *m = sim_mc(s, a, g);
        for (;;) {
                uint64_t w = atomic_load_explicit(&m->word, memory_order_acquire);
                if (!(w & MC_VALID))
                        return false;
                uint64_t sz = atomic_load_explicit(&m->size, memory_order_acquire);
                if (atomic_load_explicit(&m->word, memory_order_acquire) == w) {
                        *addr = w & ~(uint64_t)(SIM_PAGE - 1);
                        *size = sz;
                        return true;
                }
        }
}

static uint64_t next_gen(uint64_t w)
{
        return (w + 2) & MC_GEN;
}

int ntbf__sim_mcast_join(struct ntbf_sim *s, uint32_t a, uint32_t g, uint64_t addr, uint64_t size)
{
        if (g >= s->ad[a].ngroups || addr % SIM_PAGE || !size || addr >= SIM_ADDR_LIMIT)
                return -EINVAL;
        struct sim_mcrec *m = sim_mc(s, a, g);
        int r = 0;
        ntbf__sim_lock(s, &s->hdr->mcast_lock, NULL, NULL);
        uint64_t w = atomic_load(&m->word);
        if (w & MC_VALID) {
                r = NTBF_EBUSY; /* leave first: one overlay per adapter and group */
        } else {
                atomic_store(&m->size, size);
                atomic_store_explicit(&m->word, addr | next_gen(w) | MC_VALID,
                                      memory_order_release);
        }
        ntbf__sim_unlock(&s->hdr->mcast_lock);
        return r;
}

int ntbf__sim_mcast_leave(struct ntbf_sim *s, uint32_t a, uint32_t g)
{
        if (g >= s->ad[a].ngroups)
                return -EINVAL;
        struct sim_mcrec *m = sim_mc(s, a, g);
        int r = 0;
        ntbf__sim_lock(s, &s->hdr->mcast_lock, NULL, NULL);
        uint64_t w = atomic_load(&m->word);
        if (!(w & MC_VALID))
                r = -ENOENT;
        else
                atomic_store_explicit(&m->word, next_gen(w), memory_order_release);
        ntbf__sim_unlock(&s->hdr->mcast_lock);
        return r;
}

void ntbf__sim_mcast_clear(struct ntbf_sim *s, uint32_t a)
{
        ntbf__sim_lock(s, &s->hdr->mcast_lock, NULL, NULL);
        for (uint32_t g = 0; g < s->ad[a].ngroups; g++) {
                struct sim_mcrec *m = sim_mc(s, a, g);
                uint64_t w = atomic_load(&m->word);
                if (w & MC_VALID)
                        atomic_store_explicit(&m->word, next_gen(w), memory_order_release);
        }
        ntbf__sim_unlock(&s->hdr->mcast_lock);
}
