/* tests/integration/test_nvme_failover.c: multipath failover of an NVMe client (article 6.3). */
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
#include "ntbfab/error.h"
#include "ntbfab/sim.h"
#include "nvme_itest.h"

/*
 * tests/integration/nvme-mp.yaml: the client has two adapters, each cabled to one of the
 * lender's. The client keeps a backup queue pair in its own memory, reached by the controller
 * through the second pair of adapters (article 6.3, Fig. 16); the cable of the first goes down
 * in the middle of a write workload.
 */

#define FDID     0x4000u
#define COMMANDS 60000u /* one 512-byte block each */
#define SEED     9u

static struct dfx f;
static struct nproc *manager;

static int setup(void **state)
{
        (void)state;
        dfx_up(&f, "nvme-mp.yaml");
        manager = nit_manager(&f, "lender", FDID, "10s");
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        nit_kill_all();
        dfx_down(&f);
        return 0;
}

static unsigned lines_of(const char *path)
{
        FILE *fp = fopen(path, "r");
        if (!fp)
                return 0;
        unsigned n = 0;
        for (int c; (c = fgetc(fp)) != EOF;)
                n += c == '\n';
        fclose(fp);
        return n;
}

/* The backup pair's controller addresses, from the client's "backup pair:" line. */
struct backup {
        unsigned path, adapter, qid;
        uint64_t io[4]; /* SQ, CQ, PRP lists, data */
};

static struct backup backup_of(const struct nproc *w)
{
        char out[8192];
        nit_output(w, out, sizeof(out));
        const char *l = strstr(out, "backup pair: ");
        struct backup b;
        if (!l || sscanf(l,
                         "backup pair: path %u through adapter %u, queue pair %u: SQ at "
                         "0x%" SCNx64 ", CQ at 0x%" SCNx64 ", PRP lists at 0x%" SCNx64
                         ", data at 0x%" SCNx64,
                         &b.path, &b.adapter, &b.qid, &b.io[0], &b.io[1], &b.io[2], &b.io[3]) != 7)
                fail_msg("the client did not say where its backup pair is: %s", out);
        return b;
}

/*
 * Each part of the backup pair, read as the controller reads it (its requester ID, from the
 * lender): it is in the client's RAM, and the read leaves the lender through ntb1 and enters
 * the client through ntb1.
 */
static void assert_backup_route(const struct backup *b)
{
        static const char *const part[] = {"SQ", "CQ", "PRP lists", "data"};
        const struct ntbf_topo *t = f.t;
        uint32_t ln = ntbf_topo_find_node(t, "lender"), cn = ntbf_topo_find_node(t, "client");
        uint32_t dev = ntbf_topo_find_device(t, ln, "nvme0");
        uint16_t rid = (uint16_t)ntbf_device_rid(&t->devices[dev], 0);
        uint32_t out = ntbf_topo_find_adapter(t, ln, "ntb1"),
                 in = ntbf_topo_find_adapter(t, cn, "ntb1");
        for (int i = 0; i < 4; i++) {
                uint8_t buf[64];
                struct ntbf_sim_trace tr;
                int r = ntbf_sim_read(f.b, ln, dev, rid, b->io[i], buf, sizeof(buf), &tr);
                if (r)
                        fail_msg("the controller cannot reach the backup %s at 0x%" PRIx64 ": %s",
                                 part[i], b->io[i], ntbf_strerror(r));
                if (tr.dst_node != cn || tr.out_adapter != out || tr.in_adapter != in)
                        fail_msg("the backup %s at 0x%" PRIx64 " is reached in node %u through "
                                 "adapters %u -> %u, not in the client (%u) through lender.ntb1 "
                                 "(%u) -> client.ntb1 (%u)",
                                 part[i], b->io[i], tr.dst_node, tr.out_adapter, tr.in_adapter, cn,
                                 out, in);
        }
}

static uint64_t tx_of(const char *node, const char *adapter)
{
        uint32_t a = ntbf_topo_find_adapter(f.t, ntbf_topo_find_node(f.t, node), adapter);
        struct ntbf_adapter_h *h;
        struct ntbf_counters c;
        assert_int_equal(f.ops->probe(f.b, a, &h), 0);
        assert_int_equal(f.ops->counters(h, &c), 0);
        f.ops->release(h);
        return c.tx;
}

/* "  path P      adapter A, queue pair Q: N commands": N. */
static uint64_t path_ios(const char *out, unsigned p)
{
        char key[32];
        snprintf(key, sizeof(key), "  path %u      adapter ", p);
        const char *l = strstr(out, key);
        const char *n = l ? strstr(l, ": ") : NULL;
        if (!n)
                fail_msg("no line for path %u: %s", p, out);
        return strtoull(n + 2, NULL, 10);
}

static void test_failover_mid_write(void **state)
{
        (void)state;
        char log[600], out[8192];
        snprintf(log, sizeof(log), "%s/writes.log", f.dir);
        struct nproc *w = nit_start(&f, "client", "write",
                                    "write --fdid 0x%x --adapter 0,1 --lba 0 --blocks %u --bs 512 "
                                    "--qd 4 --seed %u --nap 20us --timeout 5s --log %s",
                                    FDID, COMMANDS, SEED, log);
        /* Where the backup pair is: this host's RAM, through the second adapters. */
        if (!nit_wait_for(w, "backup pair: ", 60000))
                fail_msg("the writer did not set up its backup pair: %s",
                         nit_output(w, out, sizeof(out)));
        assert_false(nit_wait_for(w, "the backup queue pair shares the primary's route", 0));
        struct backup bk = backup_of(w);
        assert_int_equal(bk.path, 1);
        assert_int_equal(bk.adapter, 1);
        assert_backup_route(&bk);
        /* A third of the way in, the primary cable goes down. */
        for (int t = 0; lines_of(log) < COMMANDS / 3; t += 5) {
                if (nit_wait(w, 0) >= 0 || t > 120000)
                        fail_msg("the writer ended or stalled before the fault: %s",
                                 nit_output(w, out, sizeof(out)));
                dfx_nap(5);
        }
        uint64_t tx0 = tx_of("lender", "ntb1");
        assert_int_equal(dfx_cli(&f, out, sizeof(out), "fault link-down client.ntb0"), 0);
        /* With the primary cable down, the controller still reaches the backup pair. */
        assert_backup_route(&bk);
        int st = nit_wait(w, 300000);
        nit_output(w, out, sizeof(out));
        if (st != 0)
                fail_msg("the writer failed: %s", out);
        uint64_t tx = tx_of("lender", "ntb1") - tx0;
        assert_non_null(strstr(out, "failover    1 path given up"));
        assert_non_null(strstr(out, "(failed)"));
        uint64_t ios0 = path_ios(out, 0), ios1 = path_ios(out, 1);
        const char *fo = strstr(out, "failover    ");
        unsigned long resub = strtoul(strstr(fo, "given up, ") + 10, NULL, 10);
        fprintf(stderr,
                "failover: %" PRIu64 " commands completed on the primary, %" PRIu64
                " on the backup, %lu resubmitted; %" PRIu64 " transactions left lender.ntb1\n",
                ios0, ios1, resub, tx);
        assert_int_equal(ios0 + ios1, COMMANDS);
        assert_true(ios1 > 0 && resub <= 4);
        /* The controller's DMA of the backup pair crossed the second cable: per command at
         * least its SQ entry read, its data read and its completion write. */
        if (tx < 3 * ios1)
                fail_msg("only %" PRIu64 " transactions left lender.ntb1 for %" PRIu64
                         " commands on the backup pair",
                         tx, ios1);
        /* Every write reported complete is in the log once, with status 0. */
        static uint8_t done[COMMANDS];
        FILE *fp = fopen(log, "r");
        assert_non_null(fp);
        char kind;
        uint64_t slba;
        unsigned nlb;
        int status;
        unsigned n = 0;
        while (fscanf(fp, " %c %" SCNu64 " %u %d", &kind, &slba, &nlb, &status) == 4) {
                assert_int_equal(kind, 'W');
                assert_int_equal(status, 0);
                assert_true(slba < COMMANDS);
                assert_int_equal(done[slba], 0);
                done[slba] = 1;
                n++;
        }
        fclose(fp);
        assert_int_equal(n, COMMANDS);
        /* What was reported done happened: the drive's image holds every block. */
        char path[512];
        snprintf(path, sizeof(path), "%s/images/lender-nvme0.img", f.dir);
        int fd = open(path, O_RDONLY);
        assert_true(fd >= 0);
        uint8_t *b = malloc((size_t)COMMANDS * 512);
        assert_non_null(b);
        assert_int_equal(pread(fd, b, (size_t)COMMANDS * 512, 0), (ssize_t)COMMANDS * 512);
        close(fd);
        long bad = ntbf_nvme_pattern_check(b, 0, COMMANDS, 9, SEED, 1);
        free(b);
        if (bad >= 0)
                fail_msg("block %ld was reported written and does not hold its data", bad);
        /* The cable comes back with the mappings still valid (article 6.3): a client reads
         * everything back through the primary path. */
        assert_int_equal(dfx_cli(&f, out, sizeof(out), "fault link-up client.ntb0"), 0);
        nit_run(&f, "client", 0, out, sizeof(out), 300000,
                "verify --fdid 0x%x --lba 0 --blocks %u --seed %u --qd 4", FDID, COMMANDS, SEED);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_failover_mid_write),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
