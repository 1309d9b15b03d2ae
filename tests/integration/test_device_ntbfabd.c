/* tests/integration/test_device_ntbfabd.c: the device API against real daemons (ntbfab up). */
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
#include "nvme.h"

/*
 * A simulated cluster brought up with the built tools (NTBFAB, NTBFAB_DAEMON, NTBFAB_SIMD),
 * devices borrowed with `ntbfab borrow`, then driven through libntbfab's public API as any
 * driver would: the daemons answer device.open and config space, the device host runs the
 * models, and the test's process maps BARs, DMA buffers and interrupts itself.
 */
static const char *yaml = "cluster: {name: devapi-daemon, backend: sim}\n"
                          "nodes:\n"
                          "  - name: lender\n"
                          "    id: 4\n"
                          "    address: 127.0.0.1:7741\n"
                          "    ram: 512MiB\n"
                          "    adapters:\n"
                          "      - {name: ntb0, model: pxh830, window: 1GiB}\n"
                          "    devices:\n"
                          "      - {name: nvme0, bdf: \"0000:03:00.0\", lend: true,\n"
                          "         sim: {model: nvme, capacity: 16MiB, queues: 4, msix: 4}}\n"
                          "      - {name: acc0, bdf: \"0000:04:00.0\", lend: true,\n"
                          "         sim: {model: accel, memory: 16MiB, msix: 4}}\n"
                          "  - name: borrower\n"
                          "    id: 8\n"
                          "    address: 127.0.0.1:7742\n"
                          "    ram: 512MiB\n"
                          "    adapters:\n"
                          "      - {name: ntb0, model: pxh830, window: 1GiB}\n"
                          "links:\n"
                          "  - [lender.ntb0, borrower.ntb0]\n";

static char top[256], inst[300];
static bool up;

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Run the ntbfab tool with the given arguments; its exit status. */
static int tool(const char *a1, const char *a2, const char *a3, const char *a4, const char *a5)
{
        const char *ntbfab = getenv("NTBFAB");
        pid_t pid = fork();
        if (pid == 0) {
                execl(ntbfab, "ntbfab", a1, "--dir", inst, a2, a3, a4, a5, (char *)NULL);
                _exit(127);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void down(void)
{
        if (up)
                tool("down", NULL, NULL, NULL, NULL);
        up = false;
        if (*top) {
                char cmd[600];
                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
                if (system(cmd))
                        fprintf(stderr, "cannot remove %s\n", top);
                *top = 0;
        }
}

static int teardown(void **state)
{
        (void)state;
        down();
        return 0;
}

/* The pid of node's daemon, from DIR/run/NODE.pid. */
static int daemon_pid(const char *node)
{
        char path[400];
        snprintf(path, sizeof(path), "%s/run/%s.pid", inst, node);
        FILE *f = fopen(path, "r");
        int pid = 0;
        if (!f || fscanf(f, "%d", &pid) != 1)
                fail_msg("no pid in %s", path);
        fclose(f);
        return pid;
}

static volatile uint32_t *reg32(void *bar, unsigned off)
{
        return (volatile uint32_t *)((uint8_t *)bar + off);
}

static uint32_t copy(void *regs, uint64_t src, uint64_t dst, uint32_t len, uint32_t flags)
{
        uint32_t tail = *reg32(regs, NTBF_ACCEL_REG_TAIL);
        uint32_t done = *reg32(regs, NTBF_ACCEL_REG_COMPLETED);
        unsigned d = NTBF_ACCEL_RING_OFF + 32 * tail;
        *(volatile uint64_t *)((uint8_t *)regs + d) = src;
        *(volatile uint64_t *)((uint8_t *)regs + d + 8) = dst;
        *reg32(regs, d + 16) = len;
        *reg32(regs, d + 20) = flags;
        *reg32(regs, d + 24) = 0;
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        *reg32(regs, NTBF_ACCEL_REG_TAIL) = (tail + 1) % NTBF_ACCEL_RING_SIZE;
        for (uint64_t end = now_ms() + 5000; now_ms() < end;) {
                if (*reg32(regs, NTBF_ACCEL_REG_COMPLETED) != done)
                        return *reg32(regs, d + 24);
                usleep(200);
        }
        return 0;
}

#define OK(ctx, call)                                                                              \
        do {                                                                                       \
                int r_ = (call);                                                                   \
                if (r_)                                                                            \
                        fail_msg("%s: %s (%s)", #call, ntbf_strerror(r_), ntbf_ctx_error(ctx));    \
        } while (0)

static void test_borrowed_devices(void **state)
{
        (void)state;
        if (!getenv("NTBFAB") || !getenv("NTBFAB_DAEMON") || !getenv("NTBFAB_SIMD"))
                skip();
        snprintf(top, sizeof(top), "/dev/shm/ntbfab-devapi-d-XXXXXX");
        assert_non_null(mkdtemp(top));
        snprintf(inst, sizeof(inst), "%s/inst", top);
        char src[300];
        snprintf(src, sizeof(src), "%s/cluster-src.yaml", top);
        FILE *f = fopen(src, "w");
        assert_non_null(f);
        fputs(yaml, f);
        fclose(f);
        up = true;
        assert_int_equal(tool("up", src, NULL, NULL, NULL), 0);
        assert_int_equal(tool("borrow", "--node", "borrower", "0x4001", NULL), 0);
        assert_int_equal(tool("borrow", "--node", "borrower", "0x4000", NULL), 0);

        /* The cluster file is where ntbfab up left it: DIR/cluster.yaml. */
        unsetenv("NTBFAB_CONFIG");
        setenv("NTBFAB_RPC_TIMEOUT_MS", "500", 1);
        struct ntbf_ctx *ctx;
        if (ntbf_ctx_open(inst, "borrower", &ctx))
                fail_msg("%s", ntbf_ctx_error(NULL));
        struct ntbf_dev *acc, *nvme;
        OK(ctx, ntbf_dev_open(ctx, 0x4001, &acc));
        OK(ctx, ntbf_dev_open(ctx, 0x4000, &nvme));
        struct ntbf_dev_info in;
        OK(ctx, ntbf_dev_info(acc, &in));
        assert_false(in.local);
        assert_string_equal(in.lender, "lender");
        assert_string_equal(in.lender_bdf, "0000:04:00.0");
        assert_int_equal(in.device_id, NTBF_SIM_ACCEL_DEVICE_ID);
        assert_int_equal(in.bars[2].size, 16 << 20);
        assert_true(in.dma_window > 0);

        uint32_t v;
        OK(ctx, ntbf_dev_cfg_read(acc, 0, 4, &v));
        assert_int_equal(v, (uint32_t)NTBF_SIM_ACCEL_DEVICE_ID << 16 | NTBF_SIM_VENDOR_ID);
        OK(ctx, ntbf_dev_cfg_read(acc, NTBF_PCI_INTERRUPT_PIN, 1, &v));
        assert_int_equal(v, 0); /* the borrower's daemon intercepts */
        void *nregs, *regs, *mem;
        size_t size;
        OK(ctx, ntbf_dev_map_bar(nvme, 0, &nregs, &size));
        assert_int_equal(*reg32(nregs, NTBF_NVME_REG_VS), NTBF_NVME_VS);
        assert_int_equal(NTBF_NVME_CAP_MQES(*(volatile uint64_t *)nregs), NTBF_NVME_MQES);
        OK(ctx, ntbf_dev_map_bar(acc, 0, &regs, &size));
        OK(ctx, ntbf_dev_map_bar(acc, 2, &mem, &size));
        assert_int_equal(*reg32(regs, NTBF_ACCEL_REG_ID), NTBF_ACCEL_ID);

        /* DMA both ways and an interrupt, through the daemon's DMA and MSI windows. */
        OK(ctx,
           ntbf_dev_cfg_write(acc, NTBF_PCI_COMMAND, 2, NTBF_PCI_CMD_MEMORY | NTBF_PCI_CMD_MASTER));
        int efd;
        OK(ctx, ntbf_dev_irq_enable(acc, 0, &efd));
        *reg32(regs, NTBF_ACCEL_REG_MSIX_VECTOR) = 0;
        *reg32(regs, NTBF_ACCEL_REG_CTRL) = NTBF_ACCEL_CTRL_ENABLE | NTBF_ACCEL_CTRL_IRQ_ENABLE;
        uint64_t dev_mem = *(volatile uint64_t *)((uint8_t *)regs + NTBF_ACCEL_REG_MEM_ADDR);
        const uint32_t N = 64 << 10;
        uint8_t *buf;
        OK(ctx, ntbf_dma_alloc(ctx, N, 0, (void **)&buf));
        for (uint32_t i = 0; i < N; i++)
                buf[i] = (uint8_t)(i * 13 + 5);
        uint64_t io;
        OK(ctx, ntbf_dev_dma_map(acc, buf, N, &io));
        assert_int_equal(copy(regs, io, dev_mem, N, 0), NTBF_ACCEL_ST_DONE);
        assert_memory_equal(mem, buf, N);
        memset((uint8_t *)mem + N, 0x5a, N);
        assert_int_equal(copy(regs, dev_mem + N, io, N, NTBF_ACCEL_F_IRQ), NTBF_ACCEL_ST_DONE);
        assert_memory_equal(buf, (uint8_t *)mem + N, N);
        struct pollfd p = {efd, POLLIN, 0};
        assert_int_equal(poll(&p, 1, 5000), 1);
        OK(ctx, ntbf_dev_dma_unmap(acc, io, N));
        uint64_t peer;
        OK(ctx, ntbf_dev_map_peer(acc, nvme, 0, &peer));
        OK(ctx, ntbf_dev_unmap_peer(acc, peer));

        /* The borrower's daemon stops answering (SIGSTOP): calls time out, then recover. */
        int pid = daemon_pid("borrower");
        assert_int_equal(kill(pid, SIGSTOP), 0);
        uint64_t t0 = now_ms();
        assert_int_equal(ntbf_dev_cfg_read(acc, 0, 4, &v), -ETIMEDOUT);
        assert_true(now_ms() - t0 >= 400 && now_ms() - t0 < 3000);
        assert_non_null(strstr(ntbf_ctx_error(ctx), "did not answer"));
        assert_int_equal(*reg32(regs, NTBF_ACCEL_REG_ID), NTBF_ACCEL_ID);
        assert_int_equal(kill(pid, SIGCONT), 0);
        OK(ctx, ntbf_dev_cfg_read(acc, 0, 2, &v));
        assert_int_equal(v, NTBF_SIM_VENDOR_ID);

        /* The NVMe drive is taken back by force: its event fd says so. */
        assert_int_equal(tool("unlend", "--force", "lender", "0000:03:00.0", NULL), 0);
        p = (struct pollfd){ntbf_dev_event_fd(nvme), POLLIN, 0};
        assert_int_equal(poll(&p, 1, 5000), 1);
        enum ntbf_dev_event_kind kind;
        OK(ctx, ntbf_dev_event(nvme, &kind));
        assert_int_equal(kind, NTBF_DEV_EVENT_LOST);
        assert_int_not_equal(ntbf_dev_cfg_read(nvme, 0, 4, &v), 0);
        ntbf_dev_close(nvme);

        /* The borrower's daemon is SIGKILLed: control fails at once, the data path works. */
        assert_int_equal(kill(pid, SIGKILL), 0);
        for (uint64_t end = now_ms() + 3000; !kill(pid, 0) && now_ms() < end;)
                usleep(1000);
        t0 = now_ms();
        assert_int_equal(ntbf_dev_cfg_read(acc, 0, 4, &v), -EPIPE);
        assert_true(now_ms() - t0 < 1000);
        assert_non_null(strstr(ntbf_ctx_error(ctx), "went away"));
        assert_int_equal(*reg32(regs, NTBF_ACCEL_REG_ID), NTBF_ACCEL_ID);
        OK(ctx, ntbf_dev_dma_map(acc, buf, N, &io));
        memset((uint8_t *)mem + 2 * N, 0xa5, N);
        assert_int_equal(copy(regs, dev_mem + 2 * N, io, N, 0), NTBF_ACCEL_ST_DONE);
        assert_memory_equal(buf, (uint8_t *)mem + 2 * N, N);
        OK(ctx, ntbf_dev_dma_unmap(acc, io, N));

        /* Back within the lease (ntbfab up starts what is not running): the borrow is intact,
         * a new open works, the old handle is void and says so. */
        assert_int_equal(tool("up", src, NULL, NULL, NULL), 0);
        struct ntbf_dev *again;
        OK(ctx, ntbf_dev_open(ctx, 0x4001, &again));
        OK(ctx, ntbf_dev_cfg_read(again, 0, 2, &v));
        assert_int_equal(v, NTBF_SIM_VENDOR_ID);
        assert_int_equal(ntbf_dev_cfg_read(acc, 0, 2, &v), -EPIPE);
        assert_non_null(strstr(ntbf_ctx_error(ctx), "restarted"));
        ntbf_dev_close(acc); /* its BAR mappings go with it */
        OK(ctx, ntbf_dev_map_bar(again, 0, &regs, &size));
        OK(ctx, ntbf_dev_map_bar(again, 2, &mem, &size));
        OK(ctx, ntbf_dev_dma_map(again, buf, N, &io));
        memset((uint8_t *)mem + 3 * N, 0x3c, N);
        assert_int_equal(copy(regs, dev_mem + 3 * N, io, N, 0), NTBF_ACCEL_ST_DONE);
        assert_memory_equal(buf, (uint8_t *)mem + 3 * N, N);
        OK(ctx, ntbf_dev_dma_unmap(again, io, N));
        ntbf_dev_close(again);
        ntbf_dma_free(ctx, buf);
        ntbf_ctx_close(ctx);
        unsetenv("NTBFAB_RPC_TIMEOUT_MS");
        down();
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_borrowed_devices, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
