/* tests/integration/test_vfio_lend.c: what an operator hears when lending a real device fails. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon_fx.h"
#include "ntbfab/device.h"
#include "ntbfab/error.h"

/*
 * Real daemons (ntbfab up) whose node 'lender' has a vfio: true device, with every sysfs
 * and /dev path under a fake tree (NTBFAB_VFIO_ROOT). Nothing can bind in a fake tree, so
 * this is about the refusals, end to end: daemon hook, RPC error, CLI line, device API
 * sentence. tests/unit/test_vfio_sysfs.c covers the binding; tests/vm the real thing.
 */

#define NV  "0000:03:00.0"
#define AUD "0000:03:00.1"

static char root[64];
static struct dfx f; /* file scope: teardown cleans up after a failed assert too */

static void at(char *buf, size_t len, const char *rel)
{
        snprintf(buf, len, "%s/%s", root, rel);
}

static void mkdirs(const char *rel)
{
        char p[PATH_MAX];
        at(p, sizeof(p), rel);
        for (char *s = p + strlen(root) + 1; *s; s++)
                if (*s == '/') {
                        *s = 0;
                        mkdir(p, 0755);
                        *s = '/';
                }
        mkdir(p, 0755);
}

static void touch(const char *rel)
{
        char p[PATH_MAX];
        at(p, sizeof(p), rel);
        FILE *fp = fopen(p, "w");
        assert_non_null(fp);
        fclose(fp);
}

static void put(const char *rel, const char *text)
{
        char p[PATH_MAX];
        at(p, sizeof(p), rel);
        FILE *fp = fopen(p, "w");
        assert_non_null(fp);
        fputs(text, fp);
        fclose(fp);
}

static void link_to(const char *rel, const char *target)
{
        char p[PATH_MAX];
        at(p, sizeof(p), rel);
        unlink(p);
        assert_int_equal(symlink(target, p), 0);
}

static void sh(const char *fmt, ...)
{
        char cmd[PATH_MAX + 64];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        assert_int_equal(system(cmd), 0);
}

static void expect(struct dfx *fx, const char *args, const char *want)
{
        char out[4096];
        int st = dfx_cli(fx, out, sizeof(out), "%s", args);
        if (st != 1 || !strstr(out, want))
                fail_msg("ntbfab %s: exit %d, wanted 1 and '%s' in: %s", args, st, want, out);
}

static void test_refusals(void **state)
{
        (void)state;
        snprintf(root, sizeof(root), "/tmp/ntbfab-vfio-lend-XXXXXX");
        assert_non_null(mkdtemp(root));
        setenv("NTBFAB_VFIO_ROOT", root, 1); /* the daemons inherit it */
        mkdirs("sys/kernel/iommu_groups");
        mkdirs("sys/bus/pci/devices/" NV);
        dfx_up(&f, "vfio-lend.yaml");
        assert_true(dfx_wait_ready(&f, "lender", 10000));

        /* An IOMMU that is off: no groups. */
        expect(&f, "lend lender " NV, "no IOMMU");
        /* The IOMMU on, vfio not loaded. */
        mkdirs("sys/kernel/iommu_groups/5/devices/" NV);
        link_to("sys/bus/pci/devices/" NV "/iommu_group", "../../../../kernel/iommu_groups/5");
        mkdirs("sys/module/vfio");
        expect(&f, "lend lender " NV, "the vfio modules vfio_iommu_type1, vfio_pci are not loaded");
        mkdirs("sys/module/vfio_iommu_type1");
        mkdirs("sys/module/vfio_pci");
        mkdirs("sys/bus/pci/drivers/vfio-pci");
        mkdirs("sys/bus/pci/drivers/nvme");
        mkdirs("dev/vfio");
        touch("dev/vfio/vfio");
        /* The manager programs a real device's BARs where the kernel placed them: the lender
         * must be able to read them, and they must be as big as the cluster file says. */
        expect(&f, "lend lender " NV,
               "cannot read where the kernel placed the BARs of " NV " (/sys/bus/pci/devices/" NV
               "/resource");
        put("sys/bus/pci/devices/" NV "/resource",
            "0x00000000febf0000 0x00000000febfffff 0x0000000000140204\n"
            "0x0000000000000000 0x0000000000000000 0x0000000000000000\n");
        expect(&f, "lend lender " NV,
               "cluster.yaml:14: BAR0 of nvme0 (" NV ") is 64 KiB on the hardware but 16 KiB "
               "in the cluster file; make the device's bars the hardware's");
        put("sys/bus/pci/devices/" NV "/resource",
            "0x00000000febf0000 0x00000000febf3fff 0x0000000000140204\n"
            "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
            "0x000000000000c000 0x000000000000c07f 0x0000000000040101\n");
        /* The kernel's nvme driver has it. */
        link_to("sys/bus/pci/devices/" NV "/driver", "../../../bus/pci/drivers/nvme");
        expect(&f, "lend lender " NV, "is in use by the kernel driver 'nvme'");
        expect(&f, "lend lender " NV, "or lend it with --force");
        /* Another function of the group on a driver of its own: even --force stops. */
        mkdirs("sys/kernel/iommu_groups/5/devices/" AUD);
        mkdirs("sys/bus/pci/devices/" AUD);
        link_to("sys/bus/pci/devices/" AUD "/driver", "../../../bus/pci/drivers/snd_hda_intel");
        expect(&f, "lend --force lender " NV,
               "IOMMU group 5 of " NV " is not viable: it also holds " AUD
               " (bound to snd_hda_intel)");
        /* Nothing was touched, and nothing is lent. */
        char drv[PATH_MAX], p[PATH_MAX];
        at(p, sizeof(p), "sys/bus/pci/devices/" NV "/driver");
        ssize_t n = readlink(p, drv, sizeof(drv) - 1);
        assert_true(n > 0);
        drv[n] = 0;
        assert_non_null(strstr(drv, "/nvme"));
        at(p, sizeof(p), "sys/bus/pci/devices/" NV "/driver_override");
        assert_int_equal(access(p, F_OK), -1);
        char out[4096];
        assert_int_equal(dfx_cli(&f, out, sizeof(out), "devices"), 0);
        assert_null(strstr(out, "nvme0"));

        /* Opening it through the device API says the same, in the API's sentence. */
        struct ntbf_ctx *ctx;
        assert_int_equal(ntbf_ctx_open(f.dir, "lender", &ctx), 0);
        struct ntbf_dev *dev;
        int r = ntbf_dev_open_bdf(ctx, NV, &dev);
        assert_int_equal(r, NTBF_EBUSY);
        assert_non_null(strstr(ntbf_ctx_error(ctx), "IOMMU group 5 of " NV " is not viable"));
        ntbf_ctx_close(ctx);

        dfx_down(&f);
}

static int teardown(void **state)
{
        (void)state;
        if (f.t) {
                /* The test failed half way: stop its cluster (it started it) and go. */
                char out[1024];
                dfx_cli(&f, out, sizeof(out), "down");
                sh("rm -rf '%s'", f.dir);
                ntbf_topo_free(f.t);
                f.t = NULL;
        }
        if (root[0])
                sh("rm -rf '%s'", root);
        unsetenv("NTBFAB_VFIO_ROOT");
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_refusals, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
