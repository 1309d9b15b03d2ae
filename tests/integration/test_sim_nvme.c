/* tests/integration/test_sim_nvme.c: the simulated NVMe lent across the NTB and driven by borrower
 * processes: Identify, PRP I/O, eight queue pairs in eight processes, persistence, drops. */
#include <ctype.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "ntbfab/error.h"
#include "devtest_rig.h"
#include "cfgspace.h"
#include "lendhand.h"
#include "nvme.h"

/*
 * Every test: this process creates the fabric, plays the lender's part (requester IDs, DMA
 * window: rig_lend) and runs the device host; borrower processes (sim_borrower) map the
 * controller's BAR0 through the borrower's window and keep queues, PRP lists and data in the
 * borrower's RAM, which the controller reaches through the lender's window and the
 * borrower's IOMMU. Data is checked byte for byte, by the borrower and independently here
 * (the borrower's RAM, the namespace image file).
 */

static uint64_t le(const uint8_t *p, unsigned n)
{
        uint64_t v = 0;
        for (unsigned i = 0; i < n; i++)
                v |= (uint64_t)p[i] << (8 * i);
        return v;
}

static uint8_t *ram(struct rig *g, uint32_t node, uint64_t addr, uint64_t len)
{
        void *p = NULL;
        assert_int_equal(ntbf_sim_phys_ptr(g->b, node, addr, len, &p), 0);
        return p;
}

/* The namespace image holds stream seed at [pos, pos + len). */
static void image_has(struct rig *g, uint64_t pos, uint64_t len, uint64_t seed)
{
        char path[256];
        rig_image_path(g, path, sizeof(path));
        int fd = open(path, O_RDONLY);
        assert_true(fd >= 0);
        uint8_t *b = malloc(len);
        assert_non_null(b);
        assert_int_equal(pread(fd, b, len, (off_t)pos), (ssize_t)len);
        close(fd);
        int64_t at = seed ? lh_pattern_check(seed, pos, b, len) : lh_bytes_check(b, 0, len);
        if (at >= 0)
                fail_msg("image byte %llu is 0x%02x", (unsigned long long)(pos + (uint64_t)at),
                         b[at]);
        free(b);
}

/* A borrower with the pool of region r, nvme0's BAR0 mapped, bus mastering on, enabled. */
static void borrower_up(struct bproc *p, struct rig *g, unsigned r)
{
        bp_spawn(p, g);
        bp_setup(p, g, r, RIG_REGION, MiB);
        bp_ok(p, "cfgon %u", g->nvme);
        bp_ok(p, "nvme-enable 16");
}

static void expect_status(const char *line, int want)
{
        if (strncmp(line, "ok", 2) || (int)(int64_t)bp_num(line, 1) != want)
                fail_msg("expected status %d, got '%s'", want, line);
}

/* Fill the borrower's buffer at pool offset off with stream seed at namespace pos; write it. */
static void write_at(struct bproc *b, uint64_t off, uint64_t len, uint64_t pos, uint64_t seed)
{
        bp_ok(b, "buf %llu %llu", (unsigned long long)off, (unsigned long long)len);
        bp_ok(b, "fill %llu %llu", (unsigned long long)seed, (unsigned long long)pos);
        expect_status(bp_ok(b, "io %d %llu", NTBF_NVME_CMD_WRITE, (unsigned long long)pos), 0);
}

/* Read into a buffer at pool offset off, first filled with 0xa5; check stream seed. */
static void read_check(struct bproc *b, uint64_t off, uint64_t len, uint64_t pos, uint64_t seed)
{
        bp_ok(b, "buf %llu %llu", (unsigned long long)off, (unsigned long long)len);
        bp_ok(b, "fillb 0xa5");
        expect_status(bp_ok(b, "io %d %llu", NTBF_NVME_CMD_READ, (unsigned long long)pos), 0);
        if (seed)
                bp_ok(b, "check %llu %llu", (unsigned long long)seed, (unsigned long long)pos);
        else
                bp_ok(b, "checkb 0");
}

static void test_identify_and_io(void **state)
{
        (void)state;
        static struct rig g; /* static: rig_teardown finds it after a failure */
        rig_up(&g);
        struct bproc b;
        struct ntbf_counters l0 = rig_ctr(&g, g.hl), b0 = rig_ctr(&g, g.hb);
        borrower_up(&b, &g, 0);

        /* The admin queues the controller was given are device-side addresses inside the
         * lender's DMA window: memory of the other host. */
        const struct ntbf_device *nd = &g.t->devices[g.nvme];
        uint8_t *regs = ram(&g, g.ln, ntbf_device_bar_addr(nd, 0, 0), NTBF_NVME_BAR0_SIZE);
        uint64_t asq = le(regs + NTBF_NVME_REG_ASQ, 8), acq = le(regs + NTBF_NVME_REG_ACQ, 8);
        assert_true(asq >= rig_region_dev(&g, 0) && asq < rig_region_dev(&g, 0) + MiB);
        assert_true(acq >= rig_region_dev(&g, 0) && acq < rig_region_dev(&g, 0) + MiB);
        assert_true(rig_lender_slot(&g, asq) >= RIG_WSLOT);
        assert_true(le(regs + NTBF_NVME_REG_CSTS, 4) & NTBF_NVME_CSTS_RDY);

        /* Identify Controller: the data lands in the borrower's RAM. */
        const char *r = bp_ok(&b, "idctrl");
        expect_status(r, 0);
        uint8_t *id = ram(&g, g.bn, bp_num(r, 2), 4096);
        assert_int_equal(le(id + NTBF_NVME_IDC_VID, 2), NTBF_SIM_VENDOR_ID);
        assert_int_equal(le(id + NTBF_NVME_IDC_SSVID, 2), NTBF_SIM_VENDOR_ID);
        char mn[41];
        snprintf(mn, sizeof(mn), "%-40s", NTBF_NVME_MN);
        assert_memory_equal(id + NTBF_NVME_IDC_MN, mn, 40);
        assert_memory_equal(id + NTBF_NVME_IDC_SN, "NTBF", 4);
        for (int i = 4; i < 20; i++)
                assert_true(isxdigit(id[NTBF_NVME_IDC_SN + i]) &&
                            !islower(id[NTBF_NVME_IDC_SN + i]));
        assert_memory_equal(id + NTBF_NVME_IDC_FR, NTBF_NVME_FR "   ", 8);
        assert_int_equal(id[NTBF_NVME_IDC_MDTS], 5);
        assert_int_equal(le(id + NTBF_NVME_IDC_CNTLID, 2), 0);
        assert_int_equal(le(id + NTBF_NVME_IDC_VER, 4), NTBF_NVME_VS);
        assert_int_equal(id[NTBF_NVME_IDC_SQES], 0x66);
        assert_int_equal(id[NTBF_NVME_IDC_CQES], 0x44);
        assert_int_equal(le(id + NTBF_NVME_IDC_NN, 4), 1);

        /* Identify Namespace: 64 MiB of 512-byte blocks, one LBA format. */
        r = bp_ok(&b, "idns");
        expect_status(r, 0);
        id = ram(&g, g.bn, bp_num(r, 2), 4096);
        uint64_t nsze = RIG_NVME_CAP / 512;
        assert_int_equal(le(id + NTBF_NVME_IDNS_NSZE, 8), nsze);
        assert_int_equal(le(id + NTBF_NVME_IDNS_NCAP, 8), nsze);
        assert_int_equal(le(id + NTBF_NVME_IDNS_NUSE, 8), nsze);
        assert_int_equal(id[NTBF_NVME_IDNS_NLBAF], 0);
        assert_int_equal(id[NTBF_NVME_IDNS_FLBAS] & 0xf, 0);
        assert_int_equal((le(id + NTBF_NVME_IDNS_LBAF0, 4) >> 16) & 0xff, 9);

        /* Everything so far crossed the NTB: out through the lender's adapter, into the
         * borrower's, nothing dropped. */
        struct ntbf_counters l1 = rig_ctr(&g, g.hl), b1 = rig_ctr(&g, g.hb);
        assert_true(l1.tx - l0.tx >= 6);
        assert_int_equal(l1.tx - l0.tx, b1.rx - b0.rx);
        assert_int_equal(l1.drop_unprogrammed + l1.drop_no_rid + l1.master_abort, 0);
        assert_int_equal(b1.iommu_fault + b1.master_abort, 0);

        /* An I/O queue pair in the borrower's RAM. */
        expect_status(bp_ok(&b, "qown 1 32"), 0);

        /* 4 KiB. */
        write_at(&b, 1 * MiB, 4096, 1 * MiB, 11);
        read_check(&b, 2 * MiB, 4096, 1 * MiB, 11);
        image_has(&g, 1 * MiB, 4096, 11);

        /* 128 KiB (PRP1 + a PRP list) from a page-aligned buffer, read back into a buffer
         * that starts 0x208 bytes into a page (33 pages: a PRP list of 32 entries). */
        write_at(&b, 1 * MiB, 131072, 4 * MiB, 12);
        struct ntbf_counters l2 = rig_ctr(&g, g.hl), b2 = rig_ctr(&g, g.hb);
        read_check(&b, 3 * MiB + 0x208, 131072, 4 * MiB, 12);
        struct ntbf_counters l3 = rig_ctr(&g, g.hl), b3 = rig_ctr(&g, g.hb);
        /* 33 pieces of data (the borrower's IOMMU translates page by page), the SQE fetch and
         * the completion. */
        assert_true(l3.tx - l2.tx >= 35);
        assert_int_equal(l3.tx - l2.tx, b3.rx - b2.rx);
        image_has(&g, 4 * MiB, 131072, 12);

        /* And the other way: written from a buffer 0x7c4 bytes into a page, read aligned. */
        write_at(&b, 4 * MiB + 0x7c4, 131072, 8 * MiB + 7 * 512, 13);
        read_check(&b, 5 * MiB, 131072, 8 * MiB + 7 * 512, 13);
        image_has(&g, 8 * MiB + 7 * 512, 131072, 13);
        /* Nothing around the written ranges. */
        image_has(&g, 4 * MiB - 4096, 4096, 0);
        image_has(&g, 4 * MiB + 131072, 4096, 0);
        read_check(&b, 6 * MiB, 4096, 4 * MiB + 131072, 0);

        struct ntbf_counters l4 = rig_ctr(&g, g.hl), b4 = rig_ctr(&g, g.hb);
        assert_int_equal(l4.drop_unprogrammed + l4.drop_no_rid + l4.master_abort, 0);
        assert_int_equal(b4.iommu_fault + b4.master_abort, 0);
        /* A normal shutdown, seen in the lender's registers. */
        expect_status(bp_ok(&b, "shutdown"), 0);
        assert_int_equal(le(regs + NTBF_NVME_REG_CSTS, 4) & NTBF_NVME_CSTS_SHST_MASK,
                         NTBF_NVME_CSTS_SHST_DONE);
        bp_quit(&b);
        rig_down(&g);
}

/* Many commands in flight, and a completion queue smaller than the submission queue: the
 * controller stops fetching while the CQ is full and goes on when the borrower's CQ head
 * doorbell, written through the NTB, frees entries. */
static void test_queue_depth(void **state)
{
        (void)state;
        static struct rig g; /* static: rig_teardown finds it after a failure */
        rig_up(&g);
        struct bproc b;
        borrower_up(&b, &g, 0);
        expect_status(bp_ok(&b, "qown 1 64 8"), 0);
        const char *r = bp_ok(&b, "burst %llu 128 48 41", (unsigned long long)(48 * MiB));
        assert_int_equal(bp_num(r, 1), 48); /* 48 outstanding against 7 free CQ entries */
        assert_int_equal(bp_num(r, 2), 0);
        image_has(&g, 48 * MiB, 128 * 4096, 41);
        /* A full ring: 63 outstanding in 64 entries, around it twice. */
        bp_ok(&b, "qreset");
        expect_status(bp_ok(&b, "qown 2 64"), 0);
        r = bp_ok(&b, "burst %llu 128 63 42", (unsigned long long)(52 * MiB));
        assert_int_equal(bp_num(r, 1), 63);
        image_has(&g, 52 * MiB, 128 * 4096, 42);
        bp_quit(&b);
        rig_down(&g);
}

static void test_eight_processes(void **state)
{
        (void)state;
        enum { N = 8 };
        static struct rig g; /* static: rig_teardown finds it after a failure */
        rig_up(&g);
        /* The manager: admin queues in its memory, creates the clients' queue pairs. */
        struct bproc m;
        borrower_up(&m, &g, 0);
        expect_status(bp_ok(&m, "qown %u 32", N + 1), 0);
        const char *geom = bp_ok(&m, "geom");
        unsigned shift = (unsigned)bp_num(geom, 1);
        unsigned long long max_xfer = bp_num(geom, 2);
        assert_int_equal(shift, 9);
        assert_int_equal(max_xfer, 131072);
        char path[256];
        snprintf(path, sizeof(path), "%s/barrier", g.dir);
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, 4096), 0);
        close(fd);

        struct bproc c[N];
        for (unsigned i = 0; i < N; i++) {
                bp_spawn(&c[i], &g);
                bp_setup(&c[i], &g, 1 + i, RIG_REGION, 2 * MiB);
                const char *r = bp_ok(&c[i], "qalloc 64");
                uint64_t sq = bp_num(r, 1), cq = bp_num(r, 2);
                /* Queue memory of the client's region, relayed to the manager. */
                assert_true(sq >= rig_region_dev(&g, 1 + i) && sq < rig_region_dev(&g, 2 + i));
                expect_status(bp_ok(&m, "qcreate %u 64 0x%llx 0x%llx", 1 + i,
                                    (unsigned long long)sq, (unsigned long long)cq),
                              0);
                bp_ok(&c[i], "qbind %u", 1 + i);
                bp_ok(&c[i], "geom %u %llu", shift, max_xfer);
                bp_ok(&c[i], "timeout 30000");
        }
        /* Each writes and reads back its own 2 MiB with its own pattern, all at once. */
        const uint64_t base = 16 * MiB, span = 2 * MiB;
        for (unsigned i = 0; i < N; i++)
                bp_send(&c[i], "run %llu %llu %u %u", (unsigned long long)(base + i * span),
                        (unsigned long long)span, 100 + i, N);
        uint64_t last_start = 0, first_end = UINT64_MAX, cmds = 0;
        for (unsigned i = 0; i < N; i++) {
                const char *r = bp_recv(&c[i]);
                if (strncmp(r, "ok", 2))
                        fail_msg("client %u: %s", i, r);
                cmds += bp_num(r, 1);
                uint64_t t0 = bp_num(r, 2), t1 = bp_num(r, 3);
                last_start = t0 > last_start ? t0 : last_start;
                first_end = t1 < first_end ? t1 : first_end;
        }
        /* They ran at the same time: the last one started before the first one finished. */
        assert_true(last_start < first_end);
        print_message("%d processes, %llu commands; all eight running together for %.1f ms\n", N,
                      (unsigned long long)cmds, (double)(first_end - last_start) / 1e6);

        /* One process reads every byte of all eight ranges back. */
        bp_ok(&m, "timeout 10000");
        for (unsigned i = 0; i < N; i++)
                bp_ok(&m, "verify %llu %llu %u", (unsigned long long)(base + i * span),
                      (unsigned long long)span, 100 + i);
        for (unsigned i = 0; i < N; i++)
                image_has(&g, base + i * span, span, 100 + i);
        image_has(&g, base - 4096, 4096, 0);
        image_has(&g, base + N * span, 4096, 0);
        for (unsigned i = 0; i < N; i++)
                bp_quit(&c[i]);
        bp_quit(&m);
        struct ntbf_counters l = rig_ctr(&g, g.hl), b = rig_ctr(&g, g.hb);
        assert_int_equal(l.drop_unprogrammed + l.drop_no_rid + l.master_abort, 0);
        assert_int_equal(b.iommu_fault + b.master_abort, 0);
        rig_down(&g);
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

/* The device host alone restarts under a borrower that keeps its mappings: the controller's
 * queues are gone, it says so (CSTS.CFS), and a reset by the borrower brings it back. Then a
 * Function Level Reset from the borrower: back to power-on, data kept. */
static void test_devhost_restart_and_flr(void **state)
{
        (void)state;
        static struct rig g; /* static: rig_teardown finds it after a failure */
        rig_up(&g);
        struct bproc b;
        borrower_up(&b, &g, 0);
        expect_status(bp_ok(&b, "qown 1 32"), 0);
        write_at(&b, 1 * MiB, 65536, 5 * MiB, 51);
        ntbf_sim_devhost_stop(g.dh);
        char why[256];
        struct ntbf_sim_devhost_opts o = {.model_for = ntbf_sim_builtin_model};
        if (ntbf_sim_devhost_start(g.b, &o, &g.dh, why, sizeof(why)))
                fail_msg("%s", why);
        const struct ntbf_device *nd = &g.t->devices[g.nvme];
        uint8_t *regs = ram(&g, g.ln, ntbf_device_bar_addr(nd, 0, 0), NTBF_NVME_BAR0_SIZE);
        uint32_t csts = 0;
        for (int i = 0; i < 200 && !(csts & NTBF_NVME_CSTS_CFS); i++) {
                sleep_ms(5);
                csts = (uint32_t)le(regs + NTBF_NVME_REG_CSTS, 4);
        }
        assert_true(csts & NTBF_NVME_CSTS_CFS);
        bp_ok(&b, "timeout 300");
        bp_ok(&b, "buf %llu 65536", (unsigned long long)(2 * MiB));
        bp_ok(&b, "fillb 0xa5");
        expect_status(bp_ok(&b, "io %d %llu", NTBF_NVME_CMD_READ, (unsigned long long)(5 * MiB)),
                      -ETIMEDOUT);
        bp_ok(&b, "checkb 0xa5");
        bp_ok(&b, "timeout 2000");
        bp_ok(&b, "nvme-enable 16");
        expect_status(bp_ok(&b, "qown 1 32"), 0);
        read_check(&b, 2 * MiB, 65536, 5 * MiB, 51);

        uint8_t *cfg = ntbf_sim_cfg(g.b, g.nvme, 0);
        assert_true(ntbf_sim_cfg_bus_master(cfg));
        bp_ok(&b, "flr %u", g.nvme);
        assert_false(ntbf_sim_cfg_bus_master(cfg));
        assert_int_equal(le(regs + NTBF_NVME_REG_CC, 4), 0);
        assert_int_equal(le(regs + NTBF_NVME_REG_CSTS, 4), 0);
        assert_int_equal(le(regs + NTBF_NVME_REG_ASQ, 8), 0);
        bp_ok(&b, "cfgon %u", g.nvme);
        bp_ok(&b, "nvme-enable 16");
        expect_status(bp_ok(&b, "qown 1 32"), 0);
        read_check(&b, 3 * MiB, 65536, 5 * MiB, 51);
        bp_quit(&b);
        rig_down(&g);
}

static void test_persist_across_restart(void **state)
{
        (void)state;
        static struct rig g; /* static: rig_teardown finds it after a failure */
        rig_up(&g);
        struct bproc b;
        borrower_up(&b, &g, 0);
        const char *r = bp_ok(&b, "idctrl");
        char sn[21] = {0};
        memcpy(sn, ram(&g, g.bn, bp_num(r, 2), 4096) + NTBF_NVME_IDC_SN, 20);
        expect_status(bp_ok(&b, "qown 1 32"), 0);
        const uint64_t p = 3 * MiB + 512, q = 40 * MiB;
        write_at(&b, 1 * MiB, 131072, p, 21);
        write_at(&b, 2 * MiB + 0x100, 4096, q, 22);
        expect_status(bp_ok(&b, "flush"), 0);
        bp_quit(&b);
        image_has(&g, p, 131072, 21);

        /* The whole fabric goes (device host, instance files) but the namespace image. */
        rig_restart(&g);
        image_has(&g, p, 131072, 21);
        image_has(&g, q, 4096, 22);

        /* A new borrower process on the new instance: a controller at power-on, enabled
         * again, finds the data. */
        const struct ntbf_device *nd = &g.t->devices[g.nvme];
        uint8_t *regs = ram(&g, g.ln, ntbf_device_bar_addr(nd, 0, 0), NTBF_NVME_BAR0_SIZE);
        assert_int_equal(le(regs + NTBF_NVME_REG_CC, 4), 0);
        borrower_up(&b, &g, 1);
        r = bp_ok(&b, "idctrl");
        assert_memory_equal(ram(&g, g.bn, bp_num(r, 2), 4096) + NTBF_NVME_IDC_SN, sn, 20);
        expect_status(bp_ok(&b, "qown 2 32"), 0);
        read_check(&b, 3 * MiB + 0x40, 131072, p, 21);
        read_check(&b, 4 * MiB, 4096, q, 22);
        read_check(&b, 5 * MiB, 4096, q + 4096, 0);
        bp_quit(&b);
        rig_down(&g);
}

static void test_window_drop(void **state)
{
        (void)state;
        static struct rig g; /* static: rig_teardown finds it after a failure */
        rig_up(&g);
        struct bproc b;
        borrower_up(&b, &g, 0);
        expect_status(bp_ok(&b, "qown 1 32"), 0);
        const uint64_t pos = 2 * MiB, len = 65536;
        write_at(&b, 1 * MiB, len, pos, 31);
        expect_status(bp_ok(&b, "flush"), 0);

        /* The read buffer has a slot of the DMA window to itself; the queues are elsewhere. */
        const char *r =
            bp_ok(&b, "buf %llu %llu", (unsigned long long)(6 * MiB), (unsigned long long)len);
        uint32_t slot = rig_lender_slot(&g, bp_num(r, 1));
        assert_true(slot >= RIG_WSLOT && slot != rig_lender_slot(&g, rig_region_dev(&g, 0)));
        bp_ok(&b, "fillb 0xa5");

        /* Slot cleared: the data has nowhere to go; the controller says so. */
        struct ntbf_counters c0 = rig_ctr(&g, g.hl);
        assert_int_equal(g.ops->xlat_clear(g.hl, slot), 0);
        expect_status(bp_ok(&b, "io %d %llu", NTBF_NVME_CMD_READ, (unsigned long long)pos),
                      NTBF_NVME_SC_DATA_XFER_ERROR);
        bp_ok(&b, "checkb 0xa5"); /* not one byte arrived */
        struct ntbf_counters c1 = rig_ctr(&g, g.hl);
        assert_true(c1.drop_unprogrammed > c0.drop_unprogrammed);
        print_message("slot %u cleared: Data Transfer Error, %llu writes dropped on the lender\n",
                      slot, (unsigned long long)(c1.drop_unprogrammed - c0.drop_unprogrammed));

        /* Programmed again: the same read works. */
        uint64_t dev;
        assert_int_equal(lh_dma_window(g.ops, g.hl, g.t, g.la, slot, 1, g.ba,
                                       RIG_IOVA + (uint64_t)(slot - RIG_WSLOT) * MiB, &dev),
                         0);
        expect_status(bp_ok(&b, "io %d %llu", NTBF_NVME_CMD_READ, (unsigned long long)pos), 0);
        bp_ok(&b, "check 31 %llu", (unsigned long long)pos);

        /* The controller's requester ID removed: nothing it sends crosses, not even the
         * command fetch or the completion. */
        bp_ok(&b, "fillb 0xa5");
        bp_ok(&b, "timeout 500");
        struct ntbf_counters c2 = rig_ctr(&g, g.hl);
        assert_int_equal(lh_rid_del(g.ops, g.hl, g.t, g.nvme), 0);
        expect_status(bp_ok(&b, "io %d %llu", NTBF_NVME_CMD_READ, (unsigned long long)pos),
                      -ETIMEDOUT);
        bp_ok(&b, "checkb 0xa5");
        /* Wait for the controller to have tried (it may be slower than the driver's patience
         * on a loaded machine), so it does not complete once the ID is back. */
        struct ntbf_counters c3 = c2;
        for (int i = 0; i < 500 && c3.drop_no_rid == c2.drop_no_rid; i++) {
                sleep_ms(10);
                c3 = rig_ctr(&g, g.hl);
        }
        assert_true(c3.drop_no_rid > c2.drop_no_rid);
        sleep_ms(50);
        c3 = rig_ctr(&g, g.hl);
        bp_ok(&b, "checkb 0xa5");
        print_message("requester ID removed: no completion, %llu transactions dropped\n",
                      (unsigned long long)(c3.drop_no_rid - c2.drop_no_rid));

        /* Back: the ID again, and the queue pair deleted and created anew (the controller
         * counts a completion the driver never saw), as the article's driver does. */
        assert_int_equal(lh_rid_add(g.ops, g.hl, g.t, g.nvme), 0);
        bp_ok(&b, "timeout 2000");
        expect_status(bp_ok(&b, "qreset"), 0);
        expect_status(bp_ok(&b, "io %d %llu", NTBF_NVME_CMD_READ, (unsigned long long)pos), 0);
        bp_ok(&b, "check 31 %llu", (unsigned long long)pos);
        bp_quit(&b);
        rig_down(&g);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_identify_and_io, rig_teardown),
            cmocka_unit_test_teardown(test_queue_depth, rig_teardown),
            cmocka_unit_test_teardown(test_eight_processes, rig_teardown),
            cmocka_unit_test_teardown(test_devhost_restart_and_flr, rig_teardown),
            cmocka_unit_test_teardown(test_persist_across_restart, rig_teardown),
            cmocka_unit_test_teardown(test_window_drop, rig_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
