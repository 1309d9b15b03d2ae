/* tests/unit/test_simfab_robust.c: a process dying inside a shared table's lock leaves it usable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "ntbfab/error.h"
#include "fixtures.h"
#include "sim.h"
#include "simfab_fx.h"

/*
 * The child takes a table's robust mutex and dies at the worst moment the rules allow: a
 * record whole and in use, but the derived count not updated yet. The next locker must
 * get EOWNERDEAD, rebuild the count from the records, and go on.
 */

static void die_holding(pthread_mutex_t *m, void (*half_done)(void *), void *arg)
{
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                pthread_mutex_lock(m);
                half_done(arg);
                _exit(0); /* without unlocking */
        }
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
}

static void half_alloc(void *arg)
{
        struct sim_node *n = arg;
        struct sim_memrec *r = &n->mem[7];
        r->pid = getpid();
        r->start = ntbf__sim_proc_start(r->pid);
        r->base = 64 << 20;
        r->size = 1 << 20;
        atomic_store(&r->state, 1); /* ... and dies before n->mem_count++ */
}

static void half_irq(void *arg)
{
        struct sim_node *n = arg;
        n->irq[5].pid = getpid();
        atomic_store(&n->irq[5].state, 1);
}

static void half_dma(void *arg)
{
        struct sim_dmachan *c = arg;
        c->ring[0].len = 12345; /* written but never published by head */
}

static void test_owner_death_recovery(void **state)
{
        (void)state;
        struct fab f;
        fab_up(&f, fab_b2b(false));
        struct ntbf_sim *s = (struct ntbf_sim *)f.b;
        struct sim_node *n = &s->nodes[1];

        die_holding(&n->mem_lock, half_alloc, n);
        /* The table is locked by a dead process: the next locker recovers it. */
        struct ntbf_mem m;
        assert_int_equal(f.ops->mem_alloc(f.h[1], 1 << 20, 0, &m), 0);
        assert_true(m.bus_addr < (64u << 20) || m.bus_addr >= (65u << 20)); /* not over it */
        assert_int_equal(n->mem_count, 2);
        char why[256];
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), 0);
        assert_int_equal(f.ops->mem_free(f.h[1], &m), 0);

        die_holding(&n->irq_lock, half_irq, n);
        struct ntbf_irq irq;
        assert_int_equal(f.ops->irq_alloc(f.h[1], &irq), 0);
        assert_int_not_equal(irq.data, 5);
        assert_int_equal(n->irq_count, 2);
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), 0);

        /* The dead child's half-made resources are reclaimed like any dead owner's. */
        assert_int_equal(ntbf__sim_mem_reap(s, 1), 1);
        assert_int_equal(ntbf__sim_irq_reap(s, 1), 1);
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), 0);
        assert_int_equal(f.ops->irq_free(f.h[1], &irq), 0);

        struct sim_dmachan *c = sim_dma(s, 0, 0);
        die_holding(&c->lock, half_dma, c);
        assert_int_equal(f.ops->dma_submit(f.h[0], 0, 0x100000, 0x200000, 64, 1), 0);
        assert_int_equal(atomic_load(&c->head), 1);
        assert_int_equal(c->ring[0].len, 64);
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), 0);
        assert_int_equal(ntbf_sim_recoveries(f.b), 3);
        fab_down(&f);
}

/* A corrupted table is reported, not silently accepted: the checker really checks. */
static void test_checker_finds_damage(void **state)
{
        (void)state;
        struct fab f;
        fab_up(&f, fab_b2b(false));
        struct ntbf_sim *s = (struct ntbf_sim *)f.b;
        char why[256];
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), 0);
        _Atomic uint64_t *rids = sim_rids(s, 0);
        atomic_store(&rids[1], 0);
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), NTBF_EPROTO);
        assert_string_equal(why, "adapter a.ntb0: reserved requester entry 1 was changed");
        ntbf__sim_reserved_rids(s, 0);
        atomic_store(&rids[5], rid_entry(0, 0x300, 0xffff));
        atomic_store(&rids[9], rid_entry(0, 0x300, 0xffff));
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), NTBF_EPROTO);
        assert_string_equal(why, "adapter a.ntb0: requester entries 5 and 9 are the same");
        atomic_store(&rids[9], 0);
        atomic_store(&sim_xsize(s, 0)[3], NTBF_MiB);
        atomic_store(&sim_slots(s, 0)[3], SLOT_VALID | (uint64_t)0 << 48);
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), NTBF_EPROTO);
        assert_string_equal(why, "adapter a.ntb0: slot 3 targets adapter 0, which it cannot reach");
        /* A translation of a size the window cannot carry is damage too. */
        atomic_store(&sim_slots(s, 0)[3], 0);
        atomic_store(&sim_xsize(s, 0)[3], NTBF_MiB / 2);
        atomic_store(&sim_slots(s, 0)[3], SLOT_VALID | (uint64_t)1 << 48);
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), NTBF_EPROTO);
        assert_string_equal(why, "adapter a.ntb0: slot 3 is malformed (0001000000000001, 524288 "
                                 "bytes)");
        atomic_store(&sim_slots(s, 0)[3], 0);
        s->nodes[0].mem_count = 3;
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), NTBF_EPROTO);
        s->nodes[0].mem_count = 0;
        assert_int_equal(ntbf_sim_check(f.b, why, sizeof(why)), 0);
        fab_down(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_owner_death_recovery),
            cmocka_unit_test(test_checker_finds_damage),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
