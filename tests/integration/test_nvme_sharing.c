/* tests/integration/test_nvme_sharing.c: one NVMe shared by 30 hosts, and multicast. */
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "ntbf_nvme_work.h"
#include "nvme_itest.h"

/*
 * tests/integration/nvme-31.yaml: a lender with a 32-pair drive (31 I/O pairs) and 30 client
 * nodes behind a cascade of MXS824s. The manager runs on the lender (the article's choice);
 * every client runs on a node of its own, as its own process, through libsisci.
 */

#define CLIENTS    30
#define FDID       0x4000u
#define PER_CLIENT 4096u /* blocks of 512 bytes: 2 MiB each, 60 MiB of the 64 MiB drive */

static struct dfx f;
static struct nproc *manager;

static int setup(void **state)
{
        (void)state;
        dfx_up(&f, "nvme-31.yaml");
        manager = nit_manager(&f, "lender", FDID, "10s");
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        if (manager)
                nit_kill(manager, SIGTERM);
        nit_kill_all();
        dfx_down(&f);
        return 0;
}

static void node_of(unsigned i, char *buf, size_t len)
{
        snprintf(buf, len, "c%02u", i + 1);
}

/* The most queue pairs that existed at once, from the manager's log. */
static int most_pairs_at_once(void)
{
        static char buf[1 << 20];
        nit_output(manager, buf, sizeof(buf));
        int now = 0, most = 0;
        for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
                if (strstr(l, "): created queue pair"))
                        now++;
                else if (strstr(l, "): deleted queue pair"))
                        now--;
                if (now > most)
                        most = now;
        }
        return most;
}

/*
 * Thirty clients on thirty hosts each create their own I/O queue pair and write their own
 * range with their own pattern, all at once; then each reads its range back and checks it;
 * then the test reads the namespace image and checks every byte of every range.
 */
static void test_thirty_clients(void **state)
{
        (void)state;
        struct nproc *w[CLIENTS];
        char node[16], name[32];
        for (unsigned i = 0; i < CLIENTS; i++) {
                node_of(i, node, sizeof(node));
                snprintf(name, sizeof(name), "write-%s", node);
                /* --together: nobody writes until all thirty pairs exist. --nap 1ms: thirty
                 * pollers that slept 50 us between polls kept 50-85 threads runnable on two
                 * cores, and every daemon of the cluster went unscheduled for seconds (all
                 * of them missed each other's heartbeats at once, leases ran out); a real
                 * host runs one client, not thirty. */
                w[i] = nit_start(&f, node, name,
                                 "write --fdid 0x%x --lba %u --blocks %u --seed %u --qd 4 "
                                 "--together %u --nap 1ms --timeout 60s",
                                 FDID, i * PER_CLIENT, PER_CLIENT, 100 + i, CLIENTS);
        }
        for (unsigned i = 0; i < CLIENTS; i++) {
                int st = nit_wait(w[i], 300000);
                char out[4096];
                if (st != 0)
                        fail_msg("writer %u: status %d: %s", i, st,
                                 nit_output(w[i], out, sizeof(out)));
                assert_true(nit_wait_for(w[i], "512 commands (0 reads, 512 writes)", 0));
        }
        /* Each its own pair, all thirty at the same time, and all given back. */
        assert_int_equal(most_pairs_at_once(), CLIENTS);
        assert_int_equal(nit_count(manager, " joined as slot "), CLIENTS);
        assert_int_equal(nit_count(manager, "): left"), CLIENTS);
        for (unsigned i = 0; i < CLIENTS; i++) {
                node_of(i, node, sizeof(node));
                snprintf(name, sizeof(name), "verify-%s", node);
                w[i] = nit_start(&f, node, name,
                                 "verify --fdid 0x%x --lba %u --blocks %u --seed %u --qd 4 "
                                 "--nap 1ms --timeout 60s",
                                 FDID, i * PER_CLIENT, PER_CLIENT, 100 + i);
        }
        for (unsigned i = 0; i < CLIENTS; i++) {
                char out[4096];
                int st = nit_wait(w[i], 300000);
                if (st != 0)
                        fail_msg("verifier %u: status %d: %s", i, st,
                                 nit_output(w[i], out, sizeof(out)));
        }
        /* Every byte, independently of the driver: the drive's image file. */
        char path[512];
        snprintf(path, sizeof(path), "%s/images/lender-nvme0.img", f.dir);
        int fd = open(path, O_RDONLY);
        assert_true(fd >= 0);
        size_t bytes = (size_t)PER_CLIENT * 512;
        uint8_t *b = malloc(bytes);
        assert_non_null(b);
        for (unsigned i = 0; i < CLIENTS; i++) {
                uint64_t lba = (uint64_t)i * PER_CLIENT;
                assert_int_equal(pread(fd, b, bytes, (off_t)(lba * 512)), (ssize_t)bytes);
                long bad = ntbf_nvme_pattern_check(b, lba, PER_CLIENT, 9, 100 + i, 1);
                if (bad >= 0)
                        fail_msg("client %u: block %" PRIu64 " does not hold its pattern", i,
                                 lba + (uint64_t)bad);
                /* ... and not a neighbour's: the seed is in every block. */
                assert_int_equal(ntbf_nvme_pattern_check(b, lba, 1, 9, 100 + (i + 1) % CLIENTS, 1),
                                 0);
        }
        free(b);
        close(fd);
}

/* A listener's "fnv1a HASH" and the model it saw. */
static void listened(struct nproc *p, char *hash, size_t len)
{
        char out[4096];
        nit_output(p, out, sizeof(out));
        const char *h = strstr(out, "fnv1a ");
        if (!h || !strstr(out, "model ntbfab simulated NVMe"))
                fail_msg("listener: %s", out);
        snprintf(hash, len, "%.16s", h + 6);
}

/*
 * Article 6.5: ten hosts join a multicast group; one Identify whose data buffer is the
 * group delivers the same 4 KiB to all of them, and the controller's host sends it once.
 */
static void test_multicast_identify(void **state)
{
        (void)state;
        enum { MEMBERS = 10, GROUP = 7 };
        struct nproc *l[MEMBERS];
        char node[16], name[32];
        for (unsigned i = 0; i < MEMBERS; i++) {
                node_of(10 + i, node, sizeof(node));
                snprintf(name, sizeof(name), "listen-%s", node);
                l[i] = nit_start(&f, node, name, "listen --group %u --timeout 60s", GROUP);
        }
        for (unsigned i = 0; i < MEMBERS; i++)
                assert_true(nit_wait_for(l[i], "member of multicast group", 30000));
        /* Transactions through the lender's adapter and into each member's. */
        struct ntbf_adapter_h *h[1 + MEMBERS];
        struct ntbf_counters before[1 + MEMBERS], after[1 + MEMBERS];
        for (unsigned k = 0; k <= MEMBERS; k++) {
                if (k)
                        node_of(9 + k, node, sizeof(node));
                uint32_t a = dfx_adapter(&f, k ? node : "lender");
                assert_int_equal(f.ops->probe(f.b, a, &h[k]), 0);
                assert_int_equal(f.ops->counters(h[k], &before[k]), 0);
        }
        char out[4096];
        nit_run(&f, "c01", 0, out, sizeof(out), 60000, "identify --fdid 0x%x --multicast %u", FDID,
                GROUP);
        assert_non_null(strstr(out, "sent to multicast group 7: 4096 bytes in one write"));
        char first[32] = "", hash[32];
        for (unsigned i = 0; i < MEMBERS; i++) {
                if (nit_wait(l[i], 60000) != 0)
                        fail_msg("listener %u: %s", i, nit_output(l[i], out, sizeof(out)));
                listened(l[i], hash, sizeof(hash));
                if (!i)
                        snprintf(first, sizeof(first), "%s", hash);
                assert_string_equal(hash, first);
        }
        for (unsigned k = 0; k <= MEMBERS; k++) {
                assert_int_equal(f.ops->counters(h[k], &after[k]), 0);
                f.ops->release(h[k]);
        }
        /* One write left the lender; each member's adapter took it in. */
        assert_int_equal(after[0].tx - before[0].tx, 1);
        for (unsigned k = 1; k <= MEMBERS; k++)
                assert_int_equal(after[k].rx - before[k].rx, 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_thirty_clients),
            cmocka_unit_test(test_multicast_identify),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
