/* tests/integration/test_sriov.c: one SR-IOV device shared by two hosts, a virtual function
 * each (article 7.1.6, docs/model.md "Requester IDs"), on the simulated fabric. */
#include <errno.h>
#include <pthread.h>
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

#include "ntbfab/device.h"
#include "ntbfab/error.h"
#include "accel.h"
#include "accel_drv.h"
#include "cfgspace.h"

/*
 * The lender's accelerator has two VFs, each a copy engine of its own with its own device
 * memory (BAR2). Its PF stays with the lender. Borrowers b1 and b2 borrow VF 1 and VF 2 and
 * drive them at the same time: each copies its own pattern from its memory into its VF's
 * memory and back, through its own DMA window, and checks every byte.
 */
static const char *yaml = "cluster: {name: sriov, backend: sim}\n"
                          "nodes:\n"
                          "  - name: lender\n"
                          "    id: 4\n"
                          "    address: 127.0.0.1:18460\n"
                          "    ram: 512MiB\n"
                          "    adapters:\n"
                          "      - {name: ntb0, model: pxh830, window: 1GiB}\n"
                          "      - {name: ntb1, model: pxh830, window: 1GiB}\n"
                          "    devices:\n"
                          "      - {name: acc0, bdf: \"0000:04:00.0\", lend: true, vfs: 2,\n"
                          "         vf_bars: [64KiB, null, 16MiB],\n"
                          "         sim: {model: accel, memory: 16MiB, msix: 4}}\n"
                          "  - name: b1\n"
                          "    id: 8\n"
                          "    address: 127.0.0.1:18461\n"
                          "    ram: 512MiB\n"
                          "    adapters:\n"
                          "      - {name: ntb0, model: pxh830, window: 1GiB}\n"
                          "      - {name: ntb1, model: pxh830, window: 1GiB}\n"
                          "  - name: b2\n"
                          "    id: 9\n"
                          "    address: 127.0.0.1:18462\n"
                          "    ram: 512MiB\n"
                          "    adapters:\n"
                          "      - {name: ntb0, model: pxh830, window: 1GiB}\n"
                          "      - {name: ntb1, model: pxh830, window: 1GiB}\n"
                          "links:\n"
                          "  - [lender.ntb0, b1.ntb0]\n"
                          "  - [lender.ntb1, b2.ntb0]\n"
                          "  - [b1.ntb1, b2.ntb1]\n";

#define PF  0x4000
#define VF1 0x4001
#define VF2 0x4002

static char top[256], inst[300], src[320];
static bool up;

/* The ntbfab tool with up to four arguments; its exit status and its output in out. */
static int tool(char *out, size_t len, const char *a1, const char *a2, const char *a3,
                const char *a4)
{
        char cmd[1200];
        snprintf(cmd, sizeof(cmd), "'%s' %s --dir '%s' %s %s %s 2>&1", getenv("NTBFAB"), a1, inst,
                 a2 ? a2 : "", a3 ? a3 : "", a4 ? a4 : "");
        FILE *p = popen(cmd, "r");
        size_t n = p ? fread(out, 1, len - 1, p) : 0;
        out[n] = 0;
        int st = p ? pclose(p) : -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static int teardown(void **state)
{
        (void)state;
        char out[4096];
        if (up)
                tool(out, sizeof(out), "down", NULL, NULL, NULL);
        up = false;
        if (*top) {
                char cmd[600];
                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
                if (system(cmd))
                        fprintf(stderr, "cannot remove %s\n", top);
                *top = 0;
        }
        return 0;
}

struct driver {
        const char *node;
        uint32_t fdid;
        uint8_t seed;
        int rounds;
        char err[512];
        uint64_t bytes;
        uint64_t mem_addr; /* the VF's BAR2 in the lender, as its engine reports it */
        void *mem;         /* the borrower's mapping of it */
};

#define FAIL(drv, ...) (snprintf((drv)->err, sizeof((drv)->err), __VA_ARGS__), (void *)0)

/* A borrower's driver of its VF: rounds of copies out to the VF's memory and back. */
static void *drive(void *arg)
{
        struct driver *v = arg;
        struct ntbf_ctx *ctx;
        struct ntbf_dev *dev;
        void *regs, *mem, *buf;
        size_t size;
        uint64_t io;
        const uint32_t N = 256 << 10;
        if (ntbf_ctx_open(inst, v->node, &ctx))
                return FAIL(v, "%s: context: %s", v->node, ntbf_ctx_error(NULL));
        if (ntbf_dev_open(ctx, v->fdid, &dev) || ntbf_dev_map_bar(dev, 0, &regs, &size) ||
            ntbf_dev_map_bar(dev, 2, &mem, &size) || ntbf_dma_alloc(ctx, N, 0, &buf) ||
            ntbf_dev_dma_map(dev, buf, N, &io) ||
            ntbf_dev_cfg_write(dev, NTBF_PCI_COMMAND, 2, NTBF_PCI_CMD_MEMORY | NTBF_PCI_CMD_MASTER))
                return FAIL(v, "%s: 0x%04x: %s", v->node, v->fdid, ntbf_ctx_error(ctx));
        struct accel_drv a;
        if (accel_open(&a, regs))
                return FAIL(v, "%s: BAR0 of 0x%04x is no working accelerator", v->node, v->fdid);
        v->mem_addr = accel_mem_addr(&a);
        v->mem = mem;
        uint8_t *b = buf;
        for (int r = 0; r < v->rounds; r++) {
                for (uint32_t i = 0; i < N; i++)
                        b[i] = (uint8_t)(i * 7 + v->seed * 31 + r);
                /* Out: borrower memory -> the VF's memory, checked through BAR2. */
                if (accel_copy(&a, io, v->mem_addr, N, 5000, NULL))
                        return FAIL(v, "%s: copy out, round %d, did not complete", v->node, r);
                if (memcmp(mem, b, N))
                        return FAIL(v,
                                    "%s: round %d: the VF's memory differs from what was "
                                    "copied",
                                    v->node, r);
                /* Back: the VF's memory -> borrower memory (cleared first). */
                memset(b, 0, N);
                if (accel_copy(&a, v->mem_addr, io, N, 5000, NULL))
                        return FAIL(v, "%s: copy back, round %d, did not complete", v->node, r);
                for (uint32_t i = 0; i < N; i++)
                        if (b[i] != (uint8_t)(i * 7 + v->seed * 31 + r))
                                return FAIL(v, "%s: round %d: byte %u came back as 0x%02x", v->node,
                                            r, i, b[i]);
                v->bytes += 2 * (uint64_t)N;
        }
        ntbf_dev_dma_unmap(dev, io, N);
        ntbf_dev_close(dev);
        ntbf_ctx_close(ctx);
        return NULL;
}

static void test_two_borrowers_own_vfs(void **state)
{
        (void)state;
        if (!getenv("NTBFAB") || !getenv("NTBFAB_DAEMON") || !getenv("NTBFAB_SIMD"))
                skip();
        snprintf(top, sizeof(top), "/dev/shm/ntbfab-sriov-XXXXXX");
        assert_non_null(mkdtemp(top));
        snprintf(inst, sizeof(inst), "%s/inst", top);
        snprintf(src, sizeof(src), "%s/cluster-src.yaml", top);
        FILE *f = fopen(src, "w");
        assert_non_null(f);
        fputs(yaml, f);
        fclose(f);
        char out[4096];
        up = true;
        /* The daemons look for ntbfab_shadow's device here: not there, whatever this host has. */
        setenv("NTBFAB_LEND_DEV", "/nonexistent/ntbfab-lend", 1);
        if (tool(out, sizeof(out), "up", src, NULL, NULL))
                fail_msg("ntbfab up: %s", out);
        unsetenv("NTBFAB_CONFIG");

        /* The PF stays with its lender, which enables the VFs. */
        assert_int_equal(tool(out, sizeof(out), "borrow", "0x4000", "--node", "b1"), 1);
        if (!strstr(out, "is the physical function of an SR-IOV device; it stays with its "
                         "lender, which enables its 2 VFs: borrow one of them (0x4001-0x4002)"))
                fail_msg("PF borrow: %s", out);
        /* --attach without the kernel module: refused before anything is taken, saying what
         * to load; --attach --shared is a usage error. */
        assert_int_equal(tool(out, sizeof(out), "borrow", "0x4001", "--node b1", "--attach"), 1);
        if (!strstr(out, "cannot open /nonexistent/ntbfab-lend (No such file or directory): "
                         "load the kernel module ntbfab_shadow (modprobe ntbfab_shadow"))
                fail_msg("attach without the module: %s", out);
        assert_int_equal(
            tool(out, sizeof(out), "borrow", "0x4001", "--node b1", "--attach --shared"), 2);
        assert_non_null(strstr(out, "--attach borrows exclusively"));
        if (tool(out, sizeof(out), "borrow", "0x4001", "--node", "b1") ||
            tool(out, sizeof(out), "borrow", "0x4002", "--node", "b2"))
                fail_msg("VF borrow: %s", out);
        /* A VF is one borrower's: the other is refused, told who has it. */
        assert_int_equal(tool(out, sizeof(out), "borrow", "0x4001", "--node", "b2"), 1);
        assert_non_null(strstr(out, "is borrowed exclusively by 'b1'"));

        struct driver d1 = {"b1", VF1, 1, 8, "", 0, 0, NULL},
                      d2 = {"b2", VF2, 2, 8, "", 0, 0, NULL};
        pthread_t t1, t2;
        assert_int_equal(pthread_create(&t1, NULL, drive, &d1), 0);
        assert_int_equal(pthread_create(&t2, NULL, drive, &d2), 0);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        if (d1.err[0] || d2.err[0])
                fail_msg("%s %s", d1.err, d2.err);
        assert_int_equal(d1.bytes, 8 * 2 * (256 << 10));
        assert_int_equal(d2.bytes, 8 * 2 * (256 << 10));
        /* Each VF has its own memory: two BAR2s, one apart from the other in the lender. */
        assert_int_not_equal(d1.mem_addr, d2.mem_addr);

        assert_int_equal(tool(out, sizeof(out), "return", "0x4001", "--node", "b1"), 0);
        assert_int_equal(tool(out, sizeof(out), "return", "0x4002", "--node", "b2"), 0);
        assert_int_equal(tool(out, sizeof(out), "devices", "--json", NULL, NULL), 0);
        assert_null(strstr(out, "\"exclusive\""));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_two_borrowers_own_vfs, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
