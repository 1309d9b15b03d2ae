/* tests/unit/test_vfio_sysfs.c: VFIO host checks, group viability and binding on a fake sysfs. */
#include <errno.h>
#include <fcntl.h>
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

#include "ntbfab/error.h"
#include "hostvfio.h"

/*
 * A temporary directory holds sys/ and dev/ as a host with an IOMMU and vfio loaded would
 * have them; a fake kernel (the hook of struct ntbf__vfio_sys) reacts to the writes the
 * binding logic makes, as Linux does: unbind drops the driver link, drivers_probe binds the
 * driver named by driver_override (or the device's own driver when it is empty), bind binds.
 */

#define NV  "0000:03:00.0"
#define AUD "0000:03:00.1"

struct fake {
        struct ntbf__vfio_sys sys;
        char home[64];    /* the device's own driver (what drivers_probe picks by default) */
        bool refuse_vfio; /* vfio-pci will not bind (a probe failure) */
        bool refuse_bind; /* drivers/X/bind fails (X went away) */
        unsigned writes;  /* sysfs writes seen */
        char log[2048];   /* "path=value;" of each write, root stripped */
};

static char *at(struct fake *f, const char *fmt, ...) NTBF_PRINTF(2, 3);
static char *at(struct fake *f, const char *fmt, ...)
{
        static char buf[4][PATH_MAX];
        static int k;
        char *p = buf[k++ % 4];
        int n = snprintf(p, PATH_MAX, "%s/", f->sys.root);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p + n, PATH_MAX - (size_t)n, fmt, ap);
        va_end(ap);
        return p;
}

static void mkdirs(const char *p)
{
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof(tmp), "%s", p);
        for (char *s = tmp + 1; *s; s++)
                if (*s == '/') {
                        *s = 0;
                        mkdir(tmp, 0755);
                        *s = '/';
                }
        mkdir(tmp, 0755);
}

static void put(const char *p, const char *text)
{
        FILE *fp = fopen(p, "w");
        assert_non_null(fp);
        fputs(text, fp);
        fclose(fp);
}

static void set_driver(struct fake *f, const char *bdf, const char *drv)
{
        char *l = at(f, "sys/bus/pci/devices/%s/driver", bdf);
        unlink(l);
        if (drv && *drv) {
                char target[PATH_MAX];
                snprintf(target, sizeof(target), "../../../bus/pci/drivers/%s", drv);
                assert_int_equal(symlink(target, l), 0);
        }
}

static void read_file(const char *p, char *buf, size_t len)
{
        buf[0] = 0;
        FILE *fp = fopen(p, "r");
        if (!fp)
                return;
        size_t n = fread(buf, 1, len - 1, fp);
        buf[n] = 0;
        fclose(fp);
}

/* The fake kernel: what Linux does on each write. */
static void kernel(void *arg, const char *path, const char *value)
{
        struct fake *f = arg;
        const char *rel = path + strlen(f->sys.root) + 1;
        f->writes++;
        size_t n = strlen(f->log);
        snprintf(f->log + n, sizeof(f->log) - n, "%s=%s;", rel, value);
        char drv[64], what[16];
        /* sys/bus/pci/drivers/DRIVER/(un)bind */
        int k = sscanf(rel, "sys/bus/pci/drivers/%63[^/]/%15s", drv, what);
        if (k == 2 && !strcmp(what, "unbind")) {
                set_driver(f, value, NULL);
        } else if (k == 2 && !strcmp(what, "bind")) {
                if (!f->refuse_bind)
                        set_driver(f, value, drv);
        } else if (!strcmp(rel, "sys/bus/pci/drivers_probe")) {
                char ov[64];
                read_file(at(f, "sys/bus/pci/devices/%s/driver_override", value), ov, sizeof(ov));
                ov[strcspn(ov, "\n")] = 0;
                if (!strcmp(ov, "vfio-pci")) {
                        if (!f->refuse_vfio)
                                set_driver(f, value, "vfio-pci");
                } else if (!ov[0] && !f->refuse_bind) {
                        set_driver(f, value, f->home);
                }
        }
}

/* A host with an IOMMU and vfio loaded; the NVMe alone in group 5, bound to nvme. */
static int setup(void **state)
{
        struct fake *f = calloc(1, sizeof(*f));
        snprintf(f->sys.root, sizeof(f->sys.root), "/tmp/ntbfab-vfio-XXXXXX");
        assert_non_null(mkdtemp(f->sys.root));
        f->sys.kernel = kernel;
        f->sys.arg = f;
        snprintf(f->home, sizeof(f->home), "nvme");
        mkdirs(at(f, "sys/kernel/iommu_groups/5/devices/%s", NV));
        mkdirs(at(f, "sys/kernel/iommu_groups/6/devices"));
        for (const char *m = "vfio\0vfio_iommu_type1\0vfio_pci\0"; *m; m += strlen(m) + 1)
                mkdirs(at(f, "sys/module/%s", m));
        for (const char *d = "nvme\0vfio-pci\0snd_hda_intel\0pcieport\0"; *d; d += strlen(d) + 1) {
                mkdirs(at(f, "sys/bus/pci/drivers/%s", d));
                put(at(f, "sys/bus/pci/drivers/%s/bind", d), "");
                put(at(f, "sys/bus/pci/drivers/%s/unbind", d), "");
        }
        put(at(f, "sys/bus/pci/drivers_probe"), "");
        mkdirs(at(f, "sys/bus/pci/devices/%s", NV));
        assert_int_equal(symlink("../../../../kernel/iommu_groups/5",
                                 at(f, "sys/bus/pci/devices/%s/iommu_group", NV)),
                         0);
        put(at(f, "sys/bus/pci/devices/%s/driver_override", NV), "(null)\n");
        put(at(f, "sys/bus/pci/devices/%s/vendor", NV), "0x1b36\n");
        put(at(f, "sys/bus/pci/devices/%s/device", NV), "0x0010\n");
        put(at(f, "sys/bus/pci/devices/%s/class", NV), "0x010802\n");
        put(at(f, "sys/bus/pci/devices/%s/resource", NV),
            "0x00000000febf0000 0x00000000febf3fff 0x0000000000140204\n"
            "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
            "0x0000000000000000 0x0000000000000000 0x0000000000000000\n");
        set_driver(f, NV, "nvme");
        mkdirs(at(f, "dev/vfio"));
        put(at(f, "dev/vfio/vfio"), "");
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fake *f = *state;
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->sys.root);
        assert_int_equal(system(cmd), 0);
        free(f);
        return 0;
}

/* A second function in the group, bound to drv. */
static void add_sibling(struct fake *f, const char *drv)
{
        mkdirs(at(f, "sys/kernel/iommu_groups/5/devices/%s", AUD));
        mkdirs(at(f, "sys/bus/pci/devices/%s", AUD));
        set_driver(f, AUD, drv);
}

static void driver_is(struct fake *f, const char *want)
{
        char drv[64];
        assert_int_equal(ntbf__vfio_sys_driver(&f->sys, NV, drv, sizeof(drv)), 0);
        assert_string_equal(drv, want);
}

/* ---- host checks -------------------------------------------------------------------------- */

static void test_host_ok(void **state)
{
        struct fake *f = *state;
        char why[512] = "";
        assert_int_equal(ntbf__vfio_sys_check(&f->sys, why, sizeof(why)), 0);
        int g = -1;
        assert_int_equal(ntbf__vfio_sys_group(&f->sys, NV, &g, why, sizeof(why)), 0);
        assert_int_equal(g, 5);
        uint16_t v, d;
        uint32_t c;
        assert_int_equal(ntbf__vfio_sys_ids(&f->sys, NV, &v, &d, &c), 0);
        assert_int_equal(v, 0x1b36);
        assert_int_equal(d, 0x0010);
        assert_int_equal(c, 0x010802);
        uint64_t addr[6], size[6];
        memset(addr, 0xa5, sizeof(addr));
        memset(size, 0xa5, sizeof(size));
        put(at(f, "sys/bus/pci/devices/%s/resource", NV),
            "0x00000000febf0000 0x00000000febf3fff 0x0000000000140204\n"
            "0x000000000000c000 0x000000000000c07f 0x0000000000040101\n"
            "0x0000000000000000 0x0000000000000000 0x0000000000000000\n");
        assert_int_equal(ntbf__vfio_sys_bars(&f->sys, NV, addr, size), 0);
        assert_int_equal(addr[0], 0xfebf0000);
        assert_int_equal(size[0], 0x4000);
        /* An I/O BAR is not lent; a file shorter than six lines leaves the rest unimplemented. */
        for (int b = 1; b < 6; b++) {
                assert_int_equal(addr[b], 0);
                assert_int_equal(size[b], 0);
        }
}

static void test_no_iommu(void **state)
{
        struct fake *f = *state;
        char why[512];
        /* An IOMMU that is off has no groups at all. */
        char cmd[PATH_MAX];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s/sys/kernel/iommu_groups'/*", f->sys.root);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(ntbf__vfio_sys_check(&f->sys, why, sizeof(why)), NTBF_EUNSUPPORTED);
        assert_non_null(strstr(why, "no IOMMU"));
        assert_non_null(strstr(why, "intel_iommu=on"));
        /* The binding refuses for the same reason, before touching anything. */
        struct ntbf__vfio_prev prev;
        assert_int_equal(ntbf__vfio_sys_bind(&f->sys, NV, true, &prev, why, sizeof(why)),
                         NTBF_EUNSUPPORTED);
        assert_int_equal(f->writes, 0);
        driver_is(f, "nvme");
}

static void test_modules_missing(void **state)
{
        struct fake *f = *state;
        char why[512];
        rmdir(at(f, "sys/module/vfio_pci"));
        assert_int_equal(ntbf__vfio_sys_check(&f->sys, why, sizeof(why)), NTBF_EUNSUPPORTED);
        assert_non_null(strstr(why, "the vfio module vfio_pci is not loaded"));
        assert_non_null(strstr(why, "modprobe vfio-pci"));
        rmdir(at(f, "sys/module/vfio_iommu_type1"));
        assert_int_equal(ntbf__vfio_sys_check(&f->sys, why, sizeof(why)), NTBF_EUNSUPPORTED);
        assert_non_null(strstr(why, "modules vfio_iommu_type1, vfio_pci are not loaded"));
        mkdirs(at(f, "sys/module/vfio_pci"));
        mkdirs(at(f, "sys/module/vfio_iommu_type1"));
        unlink(at(f, "dev/vfio/vfio"));
        assert_int_equal(ntbf__vfio_sys_check(&f->sys, why, sizeof(why)), NTBF_EUNSUPPORTED);
        assert_non_null(strstr(why, "/dev/vfio/vfio is missing"));
}

static void test_no_such_device(void **state)
{
        struct fake *f = *state;
        char why[512];
        int g;
        assert_int_equal(ntbf__vfio_sys_group(&f->sys, "0000:09:00.0", &g, why, sizeof(why)),
                         NTBF_ENOTFOUND);
        assert_non_null(strstr(why, "no PCI device 0000:09:00.0"));
        /* A device outside every group: the IOMMU does not cover it. */
        mkdirs(at(f, "sys/bus/pci/devices/0000:09:00.0"));
        assert_int_equal(ntbf__vfio_sys_group(&f->sys, "0000:09:00.0", &g, why, sizeof(why)),
                         NTBF_EUNSUPPORTED);
        assert_non_null(strstr(why, "in no IOMMU group"));
}

/* ---- viability ------------------------------------------------------------------------------ */

static void test_group_not_viable(void **state)
{
        struct fake *f = *state;
        char why[1024];
        add_sibling(f, "snd_hda_intel");
        assert_int_equal(ntbf__vfio_sys_viable(&f->sys, NV, 5, why, sizeof(why)), NTBF_EBUSY);
        assert_non_null(strstr(why, "IOMMU group 5 of " NV " is not viable"));
        assert_non_null(strstr(why, AUD " (bound to snd_hda_intel)"));
        assert_non_null(strstr(why, "echo " AUD " > /sys/bus/pci/drivers/snd_hda_intel/unbind"));
        /* Binding checks it first and changes nothing, even with force. */
        struct ntbf__vfio_prev prev;
        assert_int_equal(ntbf__vfio_sys_bind(&f->sys, NV, true, &prev, why, sizeof(why)),
                         NTBF_EBUSY);
        assert_int_equal(f->writes, 0);
        driver_is(f, "nvme");
        /* Unbound, or on a driver that leaves DMA to the group's owner: viable. */
        set_driver(f, AUD, "pcieport");
        assert_int_equal(ntbf__vfio_sys_viable(&f->sys, NV, 5, why, sizeof(why)), 0);
        set_driver(f, AUD, NULL);
        assert_int_equal(ntbf__vfio_sys_viable(&f->sys, NV, 5, why, sizeof(why)), 0);
}

/* ---- binding ------------------------------------------------------------------------------- */

static void test_in_use_without_force(void **state)
{
        struct fake *f = *state;
        char why[1024];
        struct ntbf__vfio_prev prev;
        assert_int_equal(ntbf__vfio_sys_bind(&f->sys, NV, false, &prev, why, sizeof(why)),
                         NTBF_EBUSY);
        assert_non_null(strstr(why, NV " is in use by the kernel driver 'nvme'"));
        assert_non_null(strstr(why, "echo " NV " > /sys/bus/pci/drivers/nvme/unbind"));
        assert_non_null(strstr(why, "--force"));
        assert_int_equal(f->writes, 0);
        assert_false(prev.taken);
        driver_is(f, "nvme");
}

static void test_force_bind_and_release(void **state)
{
        struct fake *f = *state;
        char why[1024] = "", ov[64];
        struct ntbf__vfio_prev prev;
        assert_int_equal(ntbf__vfio_sys_bind(&f->sys, NV, true, &prev, why, sizeof(why)), 0);
        driver_is(f, "vfio-pci");
        assert_true(prev.taken);
        assert_string_equal(prev.driver, "nvme");
        /* The order Linux needs: unbind, override, probe. */
        assert_string_equal(f->log, "sys/bus/pci/drivers/nvme/unbind=" NV ";"
                                    "sys/bus/pci/devices/" NV "/driver_override=vfio-pci;"
                                    "sys/bus/pci/drivers_probe=" NV ";");
        f->log[0] = 0;
        assert_int_equal(ntbf__vfio_sys_release(&f->sys, NV, &prev, why, sizeof(why)), 0);
        driver_is(f, "nvme");
        read_file(at(f, "sys/bus/pci/devices/%s/driver_override", NV), ov, sizeof(ov));
        assert_string_equal(ov, "\n"); /* cleared */
        assert_string_equal(f->log, "sys/bus/pci/drivers/vfio-pci/unbind=" NV ";"
                                    "sys/bus/pci/devices/" NV "/driver_override=\n;"
                                    "sys/bus/pci/drivers/nvme/bind=" NV ";");
}

static void test_unbound_device(void **state)
{
        struct fake *f = *state;
        char why[512];
        struct ntbf__vfio_prev prev;
        set_driver(f, NV, NULL);
        /* No driver: nothing to refuse, nothing to give back but the override. */
        assert_int_equal(ntbf__vfio_sys_bind(&f->sys, NV, false, &prev, why, sizeof(why)), 0);
        driver_is(f, "vfio-pci");
        assert_true(prev.taken);
        assert_string_equal(prev.driver, "");
        snprintf(f->home, sizeof(f->home), "%s", "");
        assert_int_equal(ntbf__vfio_sys_release(&f->sys, NV, &prev, why, sizeof(why)), 0);
        driver_is(f, "");
}

static void test_already_vfio(void **state)
{
        struct fake *f = *state;
        char why[512];
        struct ntbf__vfio_prev prev;
        set_driver(f, NV, "vfio-pci");
        /* Bound by someone else: left as it is, and not given away at release. */
        assert_int_equal(ntbf__vfio_sys_bind(&f->sys, NV, false, &prev, why, sizeof(why)), 0);
        assert_false(prev.taken);
        assert_int_equal(f->writes, 0);
        assert_int_equal(ntbf__vfio_sys_release(&f->sys, NV, &prev, why, sizeof(why)), 0);
        assert_int_equal(f->writes, 0);
        driver_is(f, "vfio-pci");
}

static void test_vfio_refuses(void **state)
{
        struct fake *f = *state;
        char why[512], ov[64];
        struct ntbf__vfio_prev prev;
        f->refuse_vfio = true;
        assert_int_equal(ntbf__vfio_sys_bind(&f->sys, NV, true, &prev, why, sizeof(why)), -EIO);
        assert_non_null(strstr(why, "did not bind to vfio-pci"));
        assert_non_null(strstr(why, "dmesg"));
        /* Undone: the override is cleared and nvme has the device again. */
        driver_is(f, "nvme");
        read_file(at(f, "sys/bus/pci/devices/%s/driver_override", NV), ov, sizeof(ov));
        assert_string_equal(ov, "\n");
        assert_false(prev.taken);
}

static void test_previous_driver_gone(void **state)
{
        struct fake *f = *state;
        char why[512];
        struct ntbf__vfio_prev prev;
        assert_int_equal(ntbf__vfio_sys_bind(&f->sys, NV, true, &prev, why, sizeof(why)), 0);
        f->refuse_bind = true; /* nvme was unloaded meanwhile */
        assert_int_equal(ntbf__vfio_sys_release(&f->sys, NV, &prev, why, sizeof(why)), -EIO);
        assert_non_null(strstr(why, "did not bind to 'nvme' again"));
        assert_non_null(strstr(why, "echo " NV " > /sys/bus/pci/drivers/nvme/bind"));
        assert_non_null(strstr(f->log, "sys/bus/pci/drivers_probe=" NV ";"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_host_ok, setup, teardown),
            cmocka_unit_test_setup_teardown(test_no_iommu, setup, teardown),
            cmocka_unit_test_setup_teardown(test_modules_missing, setup, teardown),
            cmocka_unit_test_setup_teardown(test_no_such_device, setup, teardown),
            cmocka_unit_test_setup_teardown(test_group_not_viable, setup, teardown),
            cmocka_unit_test_setup_teardown(test_in_use_without_force, setup, teardown),
            cmocka_unit_test_setup_teardown(test_force_bind_and_release, setup, teardown),
            cmocka_unit_test_setup_teardown(test_unbound_device, setup, teardown),
            cmocka_unit_test_setup_teardown(test_already_vfio, setup, teardown),
            cmocka_unit_test_setup_teardown(test_vfio_refuses, setup, teardown),
            cmocka_unit_test_setup_teardown(test_previous_driver_gone, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
