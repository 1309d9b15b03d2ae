/* tests/integration/test_sisci_mpath.c: libsisci with two adapters per host (article 6.3). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "accel_drv.h"
#include "sisci_fx.h"

/*
 * tests/integration/sisci-mp.yaml: the test process is node client (id 4), whose adapters 0
 * and 1 are each cabled to the same-numbered adapter of node lender (id 8); its adapter 2 is
 * cabled to nothing. A peer (sisci_peer) acts as the lender. Every test ends with both cables
 * up.
 */

#define LENDER     8u
#define LENDER_ACC 0x8000u /* lender.acc0 */

static sci_error_t err;

#define EXPECT(code, call)                                                                         \
        do {                                                                                       \
                err = (sci_error_t)0x12345;                                                        \
                call;                                                                              \
                if (err != (code))                                                                 \
                        fail_msg("%s: expected %s (0x%x), got %s (0x%x)", #call,                   \
                                 SCIGetErrorString(code), (unsigned)(code),                        \
                                 SCIGetErrorString(err), (unsigned)err);                           \
        } while (0)
#define OK(call) EXPECT(SCI_ERR_OK, call)

static int setup(void **state)
{
        (void)state;
        return sfx_setup_on("sisci-mp.yaml", "client");
}

/* The lender's answer to "seg_read ID OFF": the 32-bit word there. */
static uint32_t peer_word(struct peer *p, unsigned id, unsigned off)
{
        char ans[64];
        assert_int_equal(sfx_cmd(p, ans, sizeof(ans), "seg_read 0x%x %u", id, off), 0);
        return (uint32_t)strtoul(ans, NULL, 0);
}

/*
 * The daemon's sentence for a refused SCIConnectSegment (libsisci prints it with
 * NTBFAB_SISCI_DEBUG=1): stderr goes to a file for the call.
 */
static sci_error_t connect_refused(sci_desc_t sd, unsigned id, unsigned adapter, char *why,
                                   size_t len)
{
        char path[600];
        snprintf(path, sizeof(path), "%s/connect-stderr", sfx_dir());
        fflush(stderr);
        int saved = dup(2), fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
        assert_true(saved >= 0 && fd >= 0);
        dup2(fd, 2);
        setenv("NTBFAB_SISCI_DEBUG", "1", 1);
        sci_remote_segment_t rs = NULL;
        sci_error_t e;
        SCIConnectSegment(sd, &rs, LENDER, id, adapter, NULL, NULL, 0, 0, &e);
        unsetenv("NTBFAB_SISCI_DEBUG");
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        ssize_t n = pread(fd, why, len - 1, 0);
        why[n > 0 ? n : 0] = 0;
        close(fd);
        if (e == SCI_ERR_OK) {
                sci_error_t d;
                SCIDisconnectSegment(rs, 0, &d);
        }
        return e;
}

/* Connect to the lender's segment id through adapter, write v at off; the lender reads it. */
static void write_through(sci_desc_t sd, struct peer *l, unsigned id, unsigned adapter,
                          unsigned off, uint32_t v)
{
        sci_remote_segment_t rs;
        sci_map_t m;
        OK(SCIConnectSegment(sd, &rs, LENDER, id, adapter, NULL, NULL, 1000, 0, &err));
        volatile uint8_t *p;
        OK(p = SCIMapRemoteSegment(rs, &m, 0, 4096, NULL, 0, &err));
        *(volatile uint32_t *)(p + off) = v;
        /* Stores are posted: the lender sees the word soon after. */
        uint32_t got = 0;
        for (int t = 0; t < 100 && (got = peer_word(l, id, off)) != v; t++)
                sfx_nap(10);
        assert_int_equal(got, v);
        OK(SCIUnmapSegment(m, 0, &err));
        OK(SCIDisconnectSegment(rs, 0, &err));
}

/*
 * SCISetSegmentAvailable's adapter: a connection enters the segment's host only through an
 * adapter the segment is available on. Available on adapter 1 only, it is reached through
 * this host's adapter 1 (cabled to the lender's adapter 1), also with the cable of adapters 0
 * down; through adapter 0 it is refused, with a sentence naming the adapters it is on.
 */
static void test_available_per_adapter(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        struct peer *l = sfx_peer("lender");
        sfx_ok(l, "seg_create 0x7100 65536 0");
        sfx_ok(l, "seg_available 0x7100 1");
        char why[2048];
        sci_error_t e = connect_refused(sd, 0x7100, 0, why, sizeof(why));
        if (e != SCI_ERR_NO_LINK_ACCESS)
                fail_msg("connect through adapter 0: expected SCI_ERR_NO_LINK_ACCESS, got %s "
                         "(0x%x): %s",
                         SCIGetErrorString(e), (unsigned)e, why);
        if (!strstr(why, "segment 28928 of 'lender' is available on its adapter ntb1 only, and "
                         "'client' reaches none of them through the adapter it named"))
                fail_msg("the refusal does not say why: %s", why);
        /* Adapter 2 has no cable at all: refused the same way. */
        assert_int_equal(connect_refused(sd, 0x7100, 2, why, sizeof(why)), SCI_ERR_NO_LINK_ACCESS);
        write_through(sd, l, 0x7100, 1, 16, 0x11aa11aa);
        assert_int_equal(sfx_cli("fault link-down client.ntb0"), 0);
        write_through(sd, l, 0x7100, 1, 32, 0x22bb22bb);
        assert_int_equal(sfx_cli("fault link-up client.ntb0"), 0);

        /* Available on both: reached through either. Unavailable on 1 again: only through 0. */
        sfx_ok(l, "seg_available 0x7100 0");
        write_through(sd, l, 0x7100, 0, 48, 0x33cc33cc);
        write_through(sd, l, 0x7100, 1, 64, 0x44dd44dd);
        sfx_ok(l, "seg_unavailable 0x7100 1");
        assert_int_equal(connect_refused(sd, 0x7100, 1, why, sizeof(why)), SCI_ERR_NO_LINK_ACCESS);
        if (!strstr(why, "available on its adapter ntb0 only"))
                fail_msg("the refusal does not say why: %s", why);
        write_through(sd, l, 0x7100, 0, 80, 0x55ee55ee);
        /* Unavailable on every adapter: not available at all. */
        sfx_ok(l, "seg_unavailable 0x7100 0");
        assert_int_equal(connect_refused(sd, 0x7100, 0, why, sizeof(why)),
                         SCI_ERR_CONNECTION_REFUSED);
        sfx_ok(l, "seg_remove 0x7100 0");
        sfx_quit(l);
        OK(SCIClose(sd, 0, &err));
}

/*
 * SCIMapLocalSegmentForDevice's adapter: the borrowed accelerator's DMA enters this host
 * through it. With the cable of adapters 0 down, a segment mapped for the device through
 * adapter 1 is read and written by the device (its BAR0 reached through adapter 1 as well,
 * SCIConnectDeviceSegmentPath); one mapped through adapter 0 is not reached.
 */
static void test_device_dma_through_adapter(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        sci_smartio_device_t dev;
        OK(SCIBorrowDevice(sd, &dev, LENDER_ACC, 0, &err));
        sci_remote_segment_t bar;
        OK(SCIConnectDeviceSegmentPath(dev, &bar, 0, SCI_MEMTYPE_BAR, 1, NULL, NULL, 0, &err));
        sci_map_t bm;
        volatile void *regs;
        OK(regs = SCIMapRemoteSegment(bar, &bm, 0, SCIGetRemoteSegmentSize(bar), NULL,
                                      SCI_FLAG_IO_MAP_IOSPACE, &err));
        struct accel_drv drv;
        assert_int_equal(accel_open(&drv, (void *)(uintptr_t)regs), 0);

        sci_local_segment_t s1, s0;
        sci_map_t m1, m0;
        volatile uint8_t *p1, *p0;
        OK(SCICreateSegment(sd, &s1, 0x7200, 65536, NULL, NULL, 0, &err));
        OK(SCIPrepareSegment(s1, 1, 0, &err));
        OK(SCISetSegmentAvailable(s1, 1, 0, &err));
        OK(p1 = SCIMapLocalSegment(s1, &m1, 0, 65536, NULL, 0, &err));
        OK(SCICreateSegment(sd, &s0, 0x7201, 65536, NULL, NULL, 0, &err));
        OK(SCIPrepareSegment(s0, 0, 0, &err));
        OK(SCISetSegmentAvailable(s0, 0, 0, &err));
        OK(p0 = SCIMapLocalSegment(s0, &m0, 0, 65536, NULL, 0, &err));
        sci_ioaddr_t io1, io0;
        OK(SCIMapLocalSegmentForDevice(s1, 1, dev, &io1, 0, 0, 0, &err));
        OK(SCIMapLocalSegmentForDevice(s0, 0, dev, &io0, 0, 0, 0, &err));
        assert_int_not_equal(io1, io0);
        for (int i = 0; i < 4096; i++)
                p1[i] = p0[i] = (uint8_t)(i * 7 + 1);
        /* Both cables up: each mapping works. */
        assert_int_equal(accel_copy(&drv, io1, io1 + 8192, 4096, 5000, NULL), 0);
        assert_int_equal(accel_copy(&drv, io0, io0 + 8192, 4096, 5000, NULL), 0);
        assert_memory_equal((const void *)(p1 + 8192), (const void *)p1, 4096);
        assert_memory_equal((const void *)(p0 + 8192), (const void *)p0, 4096);

        assert_int_equal(sfx_cli("fault link-down client.ntb0"), 0);
        for (int i = 0; i < 4096; i++)
                p1[i] = p0[i] = (uint8_t)(i * 11 + 3);
        /* Through adapter 1: the device reads this host's memory and writes it. */
        assert_int_equal(accel_copy(&drv, io1, io1 + 16384, 4096, 5000, NULL), 0);
        assert_memory_equal((const void *)(p1 + 16384), (const void *)p1, 4096);
        /* Through adapter 0: the cable is down, the device's read fails, nothing arrives. */
        assert_int_equal(accel_copy(&drv, io0, io0 + 16384, 4096, 5000, NULL), -EIO);
        for (int i = 0; i < 4096; i++)
                assert_int_equal(p0[16384 + i], 0);
        assert_int_equal(sfx_cli("fault link-up client.ntb0"), 0);

        OK(SCIUnmapLocalSegmentForDevice(s1, 1, dev, 0, &err));
        OK(SCIUnmapLocalSegmentForDevice(s0, 0, dev, 0, &err));
        OK(SCIUnmapSegment(m1, 0, &err));
        OK(SCIUnmapSegment(m0, 0, &err));
        OK(SCIRemoveSegment(s1, 0, &err));
        OK(SCIRemoveSegment(s0, 0, &err));
        OK(SCIUnmapSegment(bm, 0, &err));
        OK(SCIDisconnectSegment(bar, 0, &err));
        OK(SCIReturnDevice(dev, 0, &err));
        OK(SCIClose(sd, 0, &err));
}

/* One DMA write of 4 KiB of ls at remote offset roff through dq; the queue's end state. */
static sci_dma_queue_state_t dma_write(sci_dma_queue_t dq, sci_local_segment_t ls,
                                       sci_remote_segment_t rs, size_t roff)
{
        OK(SCIStartDmaTransfer(dq, ls, rs, 0, 4096, roff, NULL, NULL, 0, &err));
        sci_dma_queue_state_t st;
        OK(st = SCIWaitForDMAQueue(dq, 10000, 0, &err));
        return st;
}

/*
 * A DMA queue of adapter n moves data through adapter n: a segment connected through another
 * adapter is refused (SCI_ERR_ILLEGAL_ADAPTERNO); the queue of adapter 1 writes a segment
 * connected through adapter 1 with the cable of adapters 0 down.
 */
static void test_dma_queue_adapter(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        struct peer *l = sfx_peer("lender");
        sfx_ok(l, "seg_create 0x7300 65536 0");
        sfx_ok(l, "seg_available 0x7300 0");
        sfx_ok(l, "seg_available 0x7300 1");
        sci_local_segment_t ls;
        sci_map_t lm;
        volatile uint8_t *lp;
        OK(SCICreateSegment(sd, &ls, 0x7301, 4096, NULL, NULL, 0, &err));
        OK(SCIPrepareSegment(ls, 0, 0, &err));
        OK(SCIPrepareSegment(ls, 1, 0, &err));
        OK(lp = SCIMapLocalSegment(ls, &lm, 0, 4096, NULL, 0, &err));
        for (int i = 0; i < 4096; i += 4)
                *(volatile uint32_t *)(lp + i) = 0xd0000000u + (uint32_t)i;
        sci_remote_segment_t rs0, rs1;
        OK(SCIConnectSegment(sd, &rs0, LENDER, 0x7300, 0, NULL, NULL, 1000, 0, &err));
        OK(SCIConnectSegment(sd, &rs1, LENDER, 0x7300, 1, NULL, NULL, 1000, 0, &err));
        sci_dma_queue_t q0, q1;
        OK(SCICreateDMAQueue(sd, &q0, 0, 4, 0, &err));
        OK(SCICreateDMAQueue(sd, &q1, 1, 4, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_ADAPTERNO,
               SCIStartDmaTransfer(q0, ls, rs1, 0, 4096, 0, NULL, NULL, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_ADAPTERNO,
               SCIStartDmaTransfer(q1, ls, rs0, 0, 4096, 0, NULL, NULL, 0, &err));
        assert_int_equal(dma_write(q0, ls, rs0, 0), SCI_DMAQUEUE_DONE);
        assert_int_equal(peer_word(l, 0x7300, 4092), 0xd0000000u + 4092);
        assert_int_equal(sfx_cli("fault link-down client.ntb0"), 0);
        assert_int_equal(dma_write(q1, ls, rs1, 8192), SCI_DMAQUEUE_DONE);
        assert_int_equal(peer_word(l, 0x7300, 8192 + 4092), 0xd0000000u + 4092);
        assert_int_equal(sfx_cli("fault link-up client.ntb0"), 0);
        OK(SCIRemoveDMAQueue(q0, 0, &err));
        OK(SCIRemoveDMAQueue(q1, 0, &err));
        OK(SCIDisconnectSegment(rs0, 0, &err));
        OK(SCIDisconnectSegment(rs1, 0, &err));
        OK(SCIUnmapSegment(lm, 0, &err));
        OK(SCIRemoveSegment(ls, 0, &err));
        sfx_quit(l);
        OK(SCIClose(sd, 0, &err));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_available_per_adapter, sfx_kill_all),
            cmocka_unit_test_teardown(test_device_dma_through_adapter, sfx_kill_all),
            cmocka_unit_test_teardown(test_dma_queue_adapter, sfx_kill_all),
        };
        return cmocka_run_group_tests_name("libsisci multipath", tests, setup, sfx_teardown);
}
