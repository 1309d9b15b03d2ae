/* tests/integration/test_nvme_placement.c: SQ placement (7.4.1), refusals and leases. */
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

#include "ntbf_nvme_sisci.h"
#include "ntbfab/error.h"
#include "ntbfab/sim.h"
#include "nvme_itest.h"

/*
 * tests/integration/nvme-place.yaml: the lender's nvme0 and acc0 share an expansion chassis;
 * nvme1 (two I/O queue pairs) sits in a slot of the lender; the client reaches them through
 * an MXS824. Root complexes cost 100 ns.
 */

#define NVME0 0x4000u
#define ACC0  0x4001u
#define NVME1 0x4002u

static struct dfx f;
static struct nproc *manager0;

static int setup(void **state)
{
        (void)state;
        dfx_up(&f, "nvme-place.yaml");
        manager0 = nit_manager(&f, "lender", NVME0, "10s");
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        nit_kill_all();
        dfx_down(&f);
        return 0;
}

struct modeled {
        uint32_t doorbell, fetch, data, completion, total;
        uint32_t sq_node;
        enum ntbf_region_kind sq_kind;
};

/* One way, as the NVMe's posted write to io would travel (half a read's round trip). */
static uint32_t one_way(uint32_t node, uint32_t dev, uint16_t rid, uint64_t io, size_t len)
{
        static uint8_t buf[4096];
        struct ntbf_sim_trace tr;
        int r = ntbf_sim_read(f.b, node, dev, rid, io, buf, len, &tr);
        if (r)
                fail_msg("routing 0x%" PRIx64 " as the NVMe: %s", io, ntbf_strerror(r));
        return tr.latency_ns / 2;
}

/*
 * The modeled latency of one command, as the article measured it (7.4.1): the doorbell
 * write, the controller's read of the SQ entry (a round trip), its data write and its
 * completion write, each routed through the simulated fabric as the controller issues it.
 */
static struct modeled model(const struct ntbf_nvmx_client *c)
{
        const struct ntbf_topo *t = f.t;
        uint32_t ln = ntbf_topo_find_node(t, "lender"), cn = ntbf_topo_find_node(t, "client");
        uint32_t dev = ntbf_topo_find_device(t, ln, "nvme0");
        uint16_t rid = (uint16_t)ntbf_device_rid(&t->devices[dev], 0);
        struct modeled m = {0};
        struct ntbf_path p;
        assert_int_equal(ntbf_path_find(t, NULL, (struct ntbf_endpoint){NTBF_EP_CPU, cn, 0},
                                        (struct ntbf_endpoint){NTBF_EP_DEVICE, ln, dev}, &p, NULL,
                                        0),
                         0);
        m.doorbell = p.latency_ns;
        static uint8_t sqe[64];
        struct ntbf_sim_trace tr;
        assert_int_equal(ntbf_sim_read(f.b, ln, dev, rid, c->q[0].sq.m.io, sqe, 64, &tr), 0);
        m.fetch = tr.latency_ns;
        m.sq_node = tr.dst_node;
        m.sq_kind = tr.dst_kind;
        m.data = one_way(ln, dev, rid, c->data.m.io, 4096);
        m.completion = one_way(ln, dev, rid, c->q[0].cq.m.io, 16);
        m.total = m.doorbell + m.fetch + m.data + m.completion;
        return m;
}

/*
 * Article 7.4.1: the SQ in the borrower's RAM, in the lender's RAM, and in an accelerator's
 * memory next to the NVMe (the CQ and the data in the borrower's RAM each time). The queues
 * are where the client asked, I/O works through each, and the modeled command latency orders
 * as the article found: accelerator < lender RAM < borrower RAM.
 */
static void test_sq_placement(void **state)
{
        (void)state;
        setenv("NTBFAB_DIR", f.dir, 1);
        setenv("NTBFAB_NODE", "client", 1);
        static const enum ntbf_nvmx_where where[] = {NTBF_NVMX_HOST, NTBF_NVMX_LENDER,
                                                     NTBF_NVMX_DEVMEM};
        struct modeled m[3];
        uint32_t ln = ntbf_topo_find_node(f.t, "lender"), cn = ntbf_topo_find_node(f.t, "client");
        for (int i = 0; i < 3; i++) {
                static struct ntbf_nvmx_client c;
                struct ntbf_nvmx_client_opts o = {.fdid = NVME0,
                                                  .npaths = 1,
                                                  .sq_where = where[i],
                                                  .cq_where = NTBF_NVMX_HOST,
                                                  .data_where = NTBF_NVMX_HOST,
                                                  .devmem_fdid = ACC0,
                                                  .entries = 16,
                                                  .data_bytes = 4096 * 4};
                if (ntbf_nvmx_client_open(&c, &o))
                        fail_msg("placement %s: %s", ntbf_nvmx_where_name(where[i]), c.x.why);
                m[i] = model(&c);
                /* Reads through the queue pair, data checked against what was written. */
                struct ntbf_nvme_job j = {.bs = 4096,
                                          .qd = 4,
                                          .read_pct = 0,
                                          .first = 8192,
                                          .blocks = 800,
                                          .ios = 100,
                                          .seed = 77 + i,
                                          .timeout_ns = 30000000000,
                                          .gen = 1,
                                          .pattern = NTBF_NVME_PAT_STREAM};
                static struct ntbf_nvme_stats st;
                assert_int_equal(ntbf_nvme_job_run(c.paths, 1, &c.cl.ns, c.data.m.va, &j, &st), 0);
                j.read_pct = 100;
                assert_int_equal(ntbf_nvme_job_run(c.paths, 1, &c.cl.ns, c.data.m.va, &j, &st), 0);
                assert_int_equal(st.reads, 100);
                assert_int_equal(st.mismatches, 0);
                printf("SQ in %-14s (node %u): modeled command latency %u ns = doorbell %u + SQ "
                       "fetch %u + data %u + completion %u\n",
                       ntbf_nvmx_where_name(where[i]), c.q[0].sq.node_id, m[i].total, m[i].doorbell,
                       m[i].fetch, m[i].data, m[i].completion);
                ntbf_nvmx_client_close(&c);
        }
        /* Where the controller's SQ reads landed. */
        assert_int_equal(m[0].sq_node, cn);
        assert_int_equal(m[0].sq_kind, NTBF_REGION_RAM);
        assert_int_equal(m[1].sq_node, ln);
        assert_int_equal(m[1].sq_kind, NTBF_REGION_RAM);
        assert_int_equal(m[2].sq_node, ln);
        assert_int_equal(m[2].sq_kind, NTBF_REGION_BAR);
        /* The article's order, from nothing but the SQ's place. */
        assert_true(m[2].total < m[1].total);
        assert_true(m[1].total < m[0].total);
        assert_int_equal(m[0].data, m[1].data);
        assert_int_equal(m[1].completion, m[2].completion);
        /* The figures of nvme-place.yaml: a chassis switch (150), its uplink (264), root
         * complexes (100 each), two PXH830s (132 each) and an MXS824 (170). */
        assert_int_equal(m[2].fetch, 2 * 150);
        assert_int_equal(m[1].fetch, 2 * (150 + 264 + 100));
        assert_int_equal(m[0].fetch, 2 * (150 + 264 + 100 + 132 + 170 + 132 + 100));
}

/*
 * The access hints alone (article 7.4.1): the SQ (host writes, device reads) lands next to the
 * device, the CQ (device writes, host reads) next to the host. And data in an accelerator's
 * memory next to the drive (article 6.4): the drive reads and writes it peer to peer.
 */
static void test_hints_and_device_memory(void **state)
{
        (void)state;
        setenv("NTBFAB_DIR", f.dir, 1);
        setenv("NTBFAB_NODE", "client", 1);
        static struct ntbf_nvmx_client c;
        struct ntbf_nvmx_client_opts o = {.fdid = NVME0,
                                          .npaths = 1,
                                          .sq_where = NTBF_NVMX_HINTS,
                                          .cq_where = NTBF_NVMX_HINTS,
                                          .data_where = NTBF_NVMX_DEVMEM,
                                          .devmem_fdid = ACC0,
                                          .entries = 16,
                                          .data_bytes = 4096 * 8};
        if (ntbf_nvmx_client_open(&c, &o))
                fail_msg("%s", c.x.why);
        assert_int_equal(c.q[0].sq.node_id, 4); /* the lender */
        assert_int_equal(c.q[0].cq.node_id, 8); /* the client */
        assert_int_equal(c.data.node_id, 4);
        /* Where the drive's data transfers land: the accelerator's memory BAR. */
        uint32_t ln = ntbf_topo_find_node(f.t, "lender");
        uint32_t dev = ntbf_topo_find_device(f.t, ln, "nvme0");
        uint32_t acc = ntbf_topo_find_device(f.t, ln, "acc0");
        static uint8_t probe[64];
        struct ntbf_sim_trace tr;
        assert_int_equal(ntbf_sim_read(f.b, ln, dev,
                                       (uint16_t)ntbf_device_rid(&f.t->devices[dev], 0),
                                       c.data.m.io, probe, 64, &tr),
                         0);
        assert_int_equal(tr.dst_kind, NTBF_REGION_BAR);
        const struct ntbf_region *r = ntbf_addrmap_lookup(f.t, ln, tr.dst_addr);
        assert_non_null(r);
        assert_int_equal(r->obj, acc);
        /* Peer to peer inside the chassis: one switch each way. */
        assert_int_equal(tr.latency_ns, 2 * 150);
        struct ntbf_nvme_job j = {.bs = 4096,
                                  .qd = 8,
                                  .read_pct = 0,
                                  .first = 16384,
                                  .blocks = 1600,
                                  .ios = 200,
                                  .seed = 5,
                                  .timeout_ns = 30000000000,
                                  .gen = 3,
                                  .pattern = NTBF_NVME_PAT_STREAM};
        static struct ntbf_nvme_stats st;
        assert_int_equal(ntbf_nvme_job_run(c.paths, 1, &c.cl.ns, c.data.m.va, &j, &st), 0);
        j.read_pct = 100;
        assert_int_equal(ntbf_nvme_job_run(c.paths, 1, &c.cl.ns, c.data.m.va, &j, &st), 0);
        assert_int_equal(st.reads, 200);
        assert_int_equal(st.mismatches, 0);
        ntbf_nvmx_client_close(&c);
}

/*
 * A controller with two I/O queue pairs: two clients hold them, a third is refused with the
 * reason; one holder is killed, and after its lease the manager deletes its pair and lets the
 * third in.
 */
static void test_refusal_and_lease(void **state)
{
        (void)state;
        struct nproc *m = nit_manager(&f, "lender", NVME1, "2s");
        struct nproc *a =
            nit_start(&f, "client", "hold-a", "bench --fdid 0x%x --time 60s --nap 200us", NVME1);
        struct nproc *b =
            nit_start(&f, "client", "hold-b", "bench --fdid 0x%x --time 60s --nap 200us", NVME1);
        for (int t = 0; nit_count(m, "): created queue pair") < 2; t += 50) {
                if (t > 30000)
                        fail_msg("the two holders did not get their pairs");
                dfx_nap(50);
        }
        char out[4096];
        nit_run(&f, "client", 1, out, sizeof(out), 60000, "identify --fdid 0x%x", NVME1);
        assert_non_null(strstr(out, "all 2 client slots are taken (one per I/O queue pair); "
                                    "retry when a client leaves"));
        assert_int_equal(nit_count(m, " refused: all 2 client slots are taken"), 1);
        /* The first holder dies without a word. */
        nit_kill(a, SIGKILL);
        assert_true(nit_wait_for(m, "lease expired (no heartbeat for", 10000));
        assert_int_equal(nit_count(m, "lease expired"), 1);
        assert_true(nit_wait_for(m, "; deleted queue pair", 0));
        nit_run(&f, "client", 0, out, sizeof(out), 60000, "bench --fdid 0x%x --ios 500", NVME1);
        assert_non_null(strstr(out, "500 commands (500 reads"));
        /* Writes in a random order (each 4 KiB once) read back in any order; another seed's
         * pattern is not there; --random belongs to write and verify. */
        nit_run(&f, "client", 0, out, sizeof(out), 60000,
                "write --fdid 0x%x --lba 0 --blocks 800 --seed 5 --random --qd 4", NVME1);
        assert_non_null(strstr(out, "100 commands (0 reads, 100 writes)"));
        nit_run(&f, "client", 0, out, sizeof(out), 60000,
                "verify --fdid 0x%x --lba 0 --blocks 800 --seed 5 --qd 4", NVME1);
        assert_non_null(strstr(out, "100 commands (100 reads, 0 writes)"));
        nit_run(&f, "client", 1, out, sizeof(out), 60000,
                "verify --fdid 0x%x --lba 0 --blocks 800 --seed 6 --random", NVME1);
        assert_non_null(
            strstr(out, "100 of 100 commands read data other than the pattern of seed 6"));
        nit_run(&f, "client", 2, out, sizeof(out), 60000, "bench --fdid 0x%x --random", NVME1);
        assert_non_null(strstr(out, "--random is an option of write and verify"));
        /* b was never disturbed. */
        assert_int_equal(nit_wait(b, 0), -1);
        nit_kill(b, SIGTERM);
        nit_kill(m, SIGTERM);
        assert_true(nit_wait_for(m, "manager stopped", 10000));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_sq_placement),
            cmocka_unit_test(test_hints_and_device_memory),
            cmocka_unit_test(test_refusal_and_lease),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
