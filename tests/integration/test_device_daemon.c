/* tests/integration/test_device_daemon.c: the device API when its daemon process is SIGKILLed. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "ntbfab/device.h"
#include "ntbfab/error.h"
#include "accel.h"
#include "cfgspace.h"
#include "fakedaemon.h"

/*
 * The daemon is another process here (the fake daemon in a forked child, which attaches to
 * the fabric and programs the borrow itself), so its death is a real one: the kernel closes
 * its sockets, and nothing of it runs any more. The device host runs in the test process.
 */
static const char *yaml = "cluster: {name: devapi-kill, backend: sim}\n"
                          "nodes:\n"
                          "  - name: lender\n"
                          "    id: 4\n"
                          "    address: 127.0.0.1:7700\n"
                          "    ram: 256MiB\n"
                          "    adapters:\n"
                          "      - {name: ntb0, model: pxh830, window: 1GiB}\n"
                          "    devices:\n"
                          "      - {name: acc0, bdf: \"0000:04:00.0\", lend: true,\n"
                          "         sim: {model: accel, memory: 4MiB, msix: 2}}\n"
                          "  - name: borrower\n"
                          "    id: 8\n"
                          "    address: 127.0.0.2:7700\n"
                          "    ram: 256MiB\n"
                          "    adapters:\n"
                          "      - {name: ntb0, model: pxh830, window: 1GiB}\n"
                          "links:\n"
                          "  - [lender.ntb0, borrower.ntb0]\n";

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static volatile uint32_t *reg32(void *bar, unsigned off)
{
        return (volatile uint32_t *)((uint8_t *)bar + off);
}

/* The child: a daemon for "borrower" that has borrowed acc0; reports the fdid, then serves. */
static void daemon_child(struct fk_fabric *f, int out)
{
        static struct fakedaemon fk;
        uint32_t fdid = 0;
        if (!fk_fabric_attach(f, false) && !fk_start(&fk, f, "borrower")) {
                struct fk_dev *x = fk_borrow(&fk, "lender", "acc0", 0, 16 << 20, 0);
                if (x)
                        fdid = x->fdid;
        }
        if (write(out, &fdid, sizeof(fdid)) != sizeof(fdid) || !fdid)
                _exit(1);
        for (;;)
                pause();
}

static uint32_t copy(void *regs, uint64_t src, uint64_t dst, uint32_t len)
{
        uint32_t tail = *reg32(regs, NTBF_ACCEL_REG_TAIL);
        uint32_t done = *reg32(regs, NTBF_ACCEL_REG_COMPLETED);
        unsigned d = NTBF_ACCEL_RING_OFF + 32 * tail;
        *(volatile uint64_t *)((uint8_t *)regs + d) = src;
        *(volatile uint64_t *)((uint8_t *)regs + d + 8) = dst;
        *reg32(regs, d + 16) = len;
        *reg32(regs, d + 20) = 0;
        *reg32(regs, d + 24) = 0;
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        *reg32(regs, NTBF_ACCEL_REG_TAIL) = (tail + 1) % NTBF_ACCEL_RING_SIZE;
        for (uint64_t end = now_ms() + 5000; now_ms() < end;) {
                if (*reg32(regs, NTBF_ACCEL_REG_COMPLETED) != done)
                        return *reg32(regs, d + 24);
                usleep(500);
        }
        return 0;
}

/* What a failed test leaves: the daemon child and the instance (teardown removes them). */
static pid_t child = -1;
static struct fk_fabric f;

static int teardown(void **state)
{
        (void)state;
        if (child > 0) {
                kill(child, SIGKILL);
                waitpid(child, NULL, 0);
                child = -1;
        }
        if (f.t)
                fk_fabric_down(&f);
        return 0;
}

static void test_daemon_sigkilled(void **state)
{
        (void)state;
        unsetenv("NTBFAB_CONFIG");
        assert_int_equal(fk_fabric_create(&f, yaml), 0);
        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t pid = child = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                close(p[0]);
                daemon_child(&f, p[1]);
        }
        close(p[1]);
        uint32_t fdid = 0;
        struct pollfd pf = {p[0], POLLIN, 0};
        assert_int_equal(poll(&pf, 1, 10000), 1);
        assert_int_equal(read(p[0], &fdid, sizeof(fdid)), sizeof(fdid));
        close(p[0]);
        assert_int_equal(fdid, 4u << 12);
        assert_int_equal(fk_fabric_attach(&f, true), 0);

        struct ntbf_ctx *ctx;
        if (ntbf_ctx_open(f.dir, "borrower", &ctx))
                fail_msg("%s", ntbf_ctx_error(NULL));
        struct ntbf_dev *dev;
        if (ntbf_dev_open(ctx, fdid, &dev))
                fail_msg("%s", ntbf_ctx_error(ctx));
        void *regs, *mem;
        size_t size;
        assert_int_equal(ntbf_dev_map_bar(dev, 0, &regs, &size), 0);
        assert_int_equal(ntbf_dev_map_bar(dev, 2, &mem, &size), 0);
        assert_int_equal(
            ntbf_dev_cfg_write(dev, NTBF_PCI_COMMAND, 2, NTBF_PCI_CMD_MEMORY | NTBF_PCI_CMD_MASTER),
            0);
        *reg32(regs, NTBF_ACCEL_REG_CTRL) = NTBF_ACCEL_CTRL_ENABLE;
        uint8_t *buf;
        assert_int_equal(ntbf_dma_alloc(ctx, 16384, 0, (void **)&buf), 0);

        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        child = -1;
        uint64_t t0 = now_ms();
        uint32_t v;
        assert_int_equal(ntbf_dev_cfg_read(dev, 0, 4, &v), -EPIPE);
        assert_non_null(strstr(ntbf_ctx_error(ctx), "went away"));
        struct ntbf_dev *other;
        assert_int_equal(ntbf_dev_open(ctx, fdid, &other), NTBF_ENOTFOUND);
        assert_true(now_ms() - t0 < 1000); /* at once, not after a timeout */

        /* The data path: BAR registers, DMA mapping, the device's DMA into our memory. */
        assert_int_equal(*reg32(regs, NTBF_ACCEL_REG_ID), NTBF_ACCEL_ID);
        for (unsigned i = 0; i < 16384; i++)
                ((uint8_t *)mem)[i] = (uint8_t)(i * 7 + 1);
        uint64_t io;
        assert_int_equal(ntbf_dev_dma_map(dev, buf, 16384, &io), 0);
        uint64_t dev_mem = *(volatile uint64_t *)((uint8_t *)regs + NTBF_ACCEL_REG_MEM_ADDR);
        assert_int_equal(copy(regs, dev_mem, io, 16384), NTBF_ACCEL_ST_DONE);
        assert_memory_equal(buf, mem, 16384);
        assert_int_equal(ntbf_dev_dma_unmap(dev, io, 16384), 0);
        ntbf_dev_close(dev);
        ntbf_dma_free(ctx, buf);
        ntbf_ctx_close(ctx);
        fk_fabric_down(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_daemon_sigkilled, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
