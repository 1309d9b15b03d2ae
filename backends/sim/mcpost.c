/* backends/sim/mcpost.c: the switch's replication of CPU stores into multicast slots. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim.h"

/*
 * A CPU mapping of a multicast slot is the sending adapter's post buffer (docs/sim.md): a
 * file as large as the adapter's windows one after the other (sim_post_off), whose bytes at
 * a window's offset are what the host's CPUs last stored there. A direct mapping cannot replicate a
 * store, and the host must not run software to do it, so the replication is the simulated switch's:
 * the device host compares each multicast slot's post buffer with what it already sent (its
 * shadow), and sends every run of changed bytes as one posted write of the sending host's CPU
 * through the slot, routed to every member exactly like window_write (requester IDs, links,
 * overlays).
 */

#define LINE 64u

struct mcpost_adapter {
        uint8_t *shadow;   /* post-buffer-sized, lazily populated: what was sent */
        uint64_t *last;    /* per slot: the entry the shadow belongs to */
        uint64_t *members; /* per slot: the membership of its group the shadow was sent to */
};

struct ntbf__sim_mcpost {
        struct ntbf_sim *s;
        struct mcpost_adapter *a;
        uint8_t *buf;
};

struct ntbf__sim_mcpost *ntbf__sim_mcpost_new(struct ntbf_sim *s)
{
        struct ntbf__sim_mcpost *m = calloc(1, sizeof(*m));
        if (!m)
                return NULL;
        m->s = s;
        m->a = calloc(s->t->nadapters + 1, sizeof(*m->a));
        m->buf = malloc(LINE);
        if (!m->a || !m->buf) {
                ntbf__sim_mcpost_free(m);
                return NULL;
        }
        return m;
}

void ntbf__sim_mcpost_free(struct ntbf__sim_mcpost *m)
{
        if (!m)
                return;
        for (uint32_t a = 0; m->a && a < m->s->t->nadapters; a++) {
                if (m->a[a].shadow)
                        munmap(m->a[a].shadow, sim_post_size(&m->s->t->adapters[a]));
                free(m->a[a].last);
                free(m->a[a].members);
        }
        free(m->a);
        free(m->buf);
        free(m);
}

/*
 * The bytes of group g any member receives (the largest overlay that joined it), and a
 * signature of its membership (every join and leave changes a member's generation).
 */
static uint64_t group_size(struct ntbf_sim *s, uint32_t g, uint64_t *members)
{
        uint64_t most = 0;
        *members = 0;
        for (uint32_t x = 0; x < s->t->nadapters; x++) {
                uint64_t base, size;
                if (g >= s->ad[x].ngroups)
                        continue;
                *members = *members * 31 + atomic_load(&sim_mc(s, x, g)->word);
                if (ntbf__sim_mcast_get(s, x, g, &base, &size) && size > most)
                        most = size;
        }
        return most;
}

static int adapter_state(struct ntbf__sim_mcpost *m, uint32_t a)
{
        struct mcpost_adapter *x = &m->a[a];
        if (x->shadow)
                return 0;
        uint64_t w = sim_post_size(&m->s->t->adapters[a]);
        x->last = calloc(m->s->ad[a].nslots, sizeof(*x->last));
        x->members = calloc(m->s->ad[a].nslots, sizeof(*x->members));
        void *p = mmap(NULL, w, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (!x->last || !x->members || p == MAP_FAILED) {
                free(x->last);
                free(x->members);
                x->last = x->members = NULL;
                return -ENOMEM;
        }
        x->shadow = p;
        return 0;
}

/*
 * Send what changed in [off, off + len) of adapter a's post buffer, which stands for window
 * addresses from at; returns bytes sent. Lines that
 * did not change are skipped with one comparison; in a line that did, each run of changed
 * bytes is one write: only the bytes the sender stored travel (as a TLP's byte enables say),
 * never its stale view of the bytes around them, which other members may have written.
 */
static uint64_t send_changes(struct ntbf__sim_mcpost *m, uint32_t a, const uint8_t *post,
                             uint64_t off, uint64_t len, uint64_t at)
{
        struct ntbf_sim *s = m->s;
        uint8_t *shadow = m->a[a].shadow;
        uint64_t base = at - off, sent = 0, end = off + len;
        for (uint64_t o = off; o < end; o += LINE) {
                uint64_t n = end - o < LINE ? end - o : LINE;
                if (!memcmp(post + o, shadow + o, n))
                        continue;
                /* One snapshot of the line, then its changed runs. */
                memcpy(m->buf, post + o, n);
                for (uint64_t i = 0; i < n;) {
                        if (m->buf[i] == shadow[o + i]) {
                                i++;
                                continue;
                        }
                        uint64_t j = i;
                        while (j < n && m->buf[j] != shadow[o + j])
                                j++;
                        memcpy(shadow + o + i, m->buf + i, j - i);
                        ntbf__sim_xfer(s, s->t->adapters[a].node, NTBF_NONE, NTBF_SIM_RID_CPU,
                                       base + o + i, m->buf + i, j - i, true, NULL);
                        sent += j - i;
                        i = j;
                }
        }
        return sent;
}

uint64_t ntbf__sim_mcpost_run(struct ntbf__sim_mcpost *m)
{
        struct ntbf_sim *s = m->s;
        uint64_t sent = 0;
        for (uint32_t a = 0; a < s->t->nadapters; a++) {
                _Atomic uint64_t *slots = sim_slots(s, a);
                const struct ntbf_adapter *ad = &s->t->adapters[a];
                const uint8_t *post = NULL;
                for (uint32_t i = 0; i < s->ad[a].nslots; i++) {
                        uint64_t e = atomic_load_explicit(&slots[i], memory_order_acquire);
                        if ((e & (SLOT_VALID | SLOT_MCAST)) != (SLOT_VALID | SLOT_MCAST))
                                continue;
                        const struct ntbf_window *w = ntbf_adapter_slot_window(ad, i);
                        uint64_t ss = w->slot_size, in = (uint64_t)(i - w->first_slot) * ss;
                        uint64_t po = sim_post_off(ad, w) + in, xs;
                        sim_slot_read(s, a, i, &xs);
                        if (!post && (!(post = sim_file(s, SF_MCPOST, a)) || adapter_state(m, a)))
                                break;
                        struct mcpost_adapter *x = &m->a[a];
                        uint64_t members, len = group_size(s, SLOT_TARGET(e), &members);
                        if (x->last[i] != e || x->members[i] != members) {
                                /* A new translation (its post buffer was emptied when it was
                                 * programmed), or a member joined or left: what was sent is
                                 * forgotten, so a member that joined late gets what the
                                 * sender stored before (as a sender repeating its stores until
                                 * answered expects). */
                                madvise(x->shadow + po, ss, MADV_DONTNEED);
                                x->last[i] = e;
                                x->members[i] = members;
                        }
                        if (len > xs)
                                len = xs; /* past the translation the slot is unprogrammed */
                        if (len &&
                            atomic_load_explicit(&s->nodes[ad->node].alive, memory_order_acquire))
                                sent += send_changes(m, a, post, po, len, w->base + in);
                }
        }
        return sent;
}
