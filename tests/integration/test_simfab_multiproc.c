/* tests/integration/test_simfab_multiproc.c: the simulated fabric shared by separate processes. */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "ntbfab/error.h"
#include "ntbfab/sim.h"
#include "simfab_mirror.h"
#include "simfab_topos.h"

#define MiB NTBF_MiB

/* ---- other processes ----------------------------------------------------------------------- */

struct proc {
        pid_t pid;
        FILE *in, *out;
        char line[512];
};

static const char *helper(void)
{
        const char *p = getenv("SIMFAB_PROC");
        return p ? p : "./simfab_proc";
}

/* fork + exec a simfab_proc attached to dir as node; its first line is returned in p->line. */
static void spawn(struct proc *p, const char *dir, const char *topo, const char *node)
{
        int to[2], from[2];
        assert_int_equal(pipe(to), 0);
        assert_int_equal(pipe(from), 0);
        p->pid = fork();
        assert_true(p->pid >= 0);
        if (p->pid == 0) {
                dup2(to[0], 0);
                dup2(from[1], 1);
                close(to[1]);
                close(from[0]);
                execl(helper(), "simfab_proc", dir, topo, node, (char *)NULL);
                _exit(127);
        }
        close(to[0]);
        close(from[1]);
        p->in = fdopen(to[1], "w");
        p->out = fdopen(from[0], "r");
        if (!fgets(p->line, sizeof(p->line), p->out))
                snprintf(p->line, sizeof(p->line), "eof");
        p->line[strcspn(p->line, "\n")] = 0;
}

static const char *cmd(struct proc *p, const char *fmt, ...) NTBF_PRINTF(2, 3);
static const char *cmd(struct proc *p, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vfprintf(p->in, fmt, ap);
        va_end(ap);
        fputc('\n', p->in);
        fflush(p->in);
        if (!fgets(p->line, sizeof(p->line), p->out))
                snprintf(p->line, sizeof(p->line), "eof");
        p->line[strcspn(p->line, "\n")] = 0;
        return p->line;
}

#define OK(p, ...)                                                                                 \
        do {                                                                                       \
                const char *r_ = cmd((p), __VA_ARGS__);                                            \
                if (strncmp(r_, "ok", 2))                                                          \
                        fail_msg("%s: %s", #__VA_ARGS__, r_);                                      \
        } while (0)

static void reap(struct proc *p)
{
        cmd(p, "quit");
        fclose(p->in);
        fclose(p->out);
        int st;
        assert_int_equal(waitpid(p->pid, &st, 0), p->pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
}

static uint64_t num(const char *line, int field)
{
        const char *s = line;
        for (int i = 0; i < field && s; i++) {
                s = strchr(s, ' ');
                if (s)
                        s++;
        }
        return s ? strtoull(s, NULL, 0) : 0;
}

static uint8_t pat(uint64_t seed, uint64_t i)
{
        return (uint8_t)(seed + i * 7 + (i >> 8));
}

/* ---- this process: creates the instance and acts as a tool ------------------------------------
 */

struct inst {
        char dir[128];
        struct ntbf_topo *t;
        const struct ntbf_backend_ops *ops;
        struct ntbf_backend *b;
};

static void inst_up(struct inst *in, const char *topo)
{
        snprintf(in->dir, sizeof(in->dir), "/dev/shm/ntbfab-itest-XXXXXX");
        assert_non_null(mkdtemp(in->dir));
        in->t = itopo(topo);
        assert_non_null(in->t);
        char why[512];
        int r = ntbf_sim_fabric_create(in->t, in->dir, why, sizeof(why));
        if (r)
                fail_msg("%s", why);
        in->ops = ntbf_backend_find("sim");
        struct ntbf_backend_env env = {in->t, in->dir, NTBF_NONE};
        assert_int_equal(in->ops->open(&env, &in->b, NULL, 0), 0);
}

static void inst_down(struct inst *in)
{
        in->ops->close(in->b);
        assert_int_equal(ntbf_sim_fabric_destroy(in->dir), 0);
        ntbf_topo_free(in->t);
}

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- tests ----------------------------------------------------------------------------------- */

static void window_pattern(const char *topo, bool iommu)
{
        struct inst in;
        inst_up(&in, topo);
        struct proc a, b;
        spawn(&b, in.dir, topo, "b");
        spawn(&a, in.dir, topo, "a");
        assert_string_equal(strtok(b.line, " "), "ready");
        OK(&b, "probe 1");
        uint64_t bus = num(cmd(&b, "alloc 1 65536"), 1);
        assert_true(bus >= MiB);
        /* With an IOMMU on b, the window targets an IOVA that b maps onto its buffer. */
        uint64_t far = bus;
        if (iommu) {
                far = UINT64_C(0x40000000) + (bus & (MiB - 1));
                OK(&b, "iommu 1 0x%llx 0x%llx 65536", (unsigned long long)far,
                   (unsigned long long)bus);
        }
        OK(&a, "probe 0");
        OK(&a, "slot 0 5 1 0x%llx", (unsigned long long)(far & ~(MiB - 1)));
        OK(&a, "map 0 0x%llx 0x%llx", (unsigned long long)(5 * MiB), (unsigned long long)MiB);
        OK(&a, "write 0x%llx 65536 77", (unsigned long long)(far & (MiB - 1)));
        /* b reads it in its own RAM, in the memory it allocated, at exactly that address. */
        OK(&b, "check 0 65536 77");
        void *p;
        assert_int_equal(ntbf_sim_phys_ptr(in.b, 1, bus, 65536, &p), 0);
        for (uint64_t i = 0; i < 65536; i++)
                if (((uint8_t *)p)[i] != pat(77, i))
                        fail_msg("byte %llu of b's RAM at 0x%llx", (unsigned long long)i,
                                 (unsigned long long)bus);
        /* And nothing around it. */
        assert_int_equal(ntbf_sim_phys_ptr(in.b, 1, bus + 65536, 4096, &p), 0);
        for (int i = 0; i < 4096; i++)
                assert_int_equal(((uint8_t *)p)[i], 0);
        reap(&a);
        reap(&b);
        inst_down(&in);
}

static void test_window_pattern(void **state)
{
        (void)state;
        window_pattern("b2b", false);
}

static void test_window_pattern_iommu(void **state)
{
        (void)state;
        window_pattern("b2b-iommu", true);
}

static void test_doorbell_eventfd(void **state)
{
        (void)state;
        struct inst in;
        inst_up(&in, "b2b");
        struct proc a, b;
        spawn(&b, in.dir, "b2b", "b");
        spawn(&a, in.dir, "b2b", "a");
        OK(&b, "probe 1");
        OK(&b, "events 1");
        OK(&a, "probe 0");
        OK(&a, "ringdb 0 1 0x5");
        const char *r = cmd(&b, "waitdb 1 2000");
        assert_int_equal(strncmp(r, "ok", 2), 0);
        assert_int_equal(num(r, 1), 0x5);
        print_message("doorbell seen by the other process after %llu us\n",
                      (unsigned long long)num(r, 2));
        reap(&a);
        reap(&b);
        inst_down(&in);
}

static void test_msi_from_device_model(void **state)
{
        (void)state;
        struct inst in;
        inst_up(&in, "b2b-mirror");
        struct proc dev, b;
        spawn(&dev, in.dir, "b2b-mirror", "any");
        OK(&dev, "devhost");
        spawn(&b, in.dir, "b2b-mirror", "b");
        OK(&b, "probe 1");
        uint32_t data = (uint32_t)num(cmd(&b, "irq 1"), 1);
        assert_true(data > 0);
        /* This process programs a's adapter: the device's requester ID and an MSI window. */
        struct ntbf_adapter_h *ha;
        assert_int_equal(in.ops->probe(in.b, 0, &ha), 0);
        struct ntbf_rid rid = {0, 0x0300, 0xffff};
        assert_int_equal(in.ops->rid_add(ha, &rid, NULL), 0);
        struct ntbf_xlat x = {1, 1, NTBF_MSI_BASE, NTBF_NONE, in.t->adapters[0].lut_entry_size};
        assert_int_equal(in.ops->xlat_set(ha, 1, &x), 0);
        const struct ntbf_adapter *ad = &in.t->adapters[0];
        uint64_t msi = ad->window_base + ad->lut_entry_size;
        /* ... and drives the mirror on a (its BAR0 registers) to copy and interrupt. */
        uint8_t *regs;
        uint64_t bar = ntbf_device_bar_addr(&in.t->devices[0], 0, 0);
        assert_int_equal(ntbf_sim_phys_ptr(in.b, 0, bar, 4096, (void **)&regs), 0);
        *(volatile uint64_t *)(regs + MIRROR_SRC) = 4 * MiB;
        *(volatile uint64_t *)(regs + MIRROR_DST) = 8 * MiB;
        *(volatile uint32_t *)(regs + MIRROR_LEN) = 4096;
        *(volatile uint64_t *)(regs + MIRROR_MSI_ADDR) = msi;
        *(volatile uint32_t *)(regs + MIRROR_MSI_DATA) = data;
        __atomic_store_n((uint32_t *)(regs + MIRROR_DOORBELL), 1, __ATOMIC_RELEASE);
        const char *r = cmd(&b, "waitirq 2000");
        assert_string_equal(r, "ok 1");
        assert_int_equal(*(volatile uint32_t *)(regs + MIRROR_STATUS), 1);
        in.ops->release(ha);
        reap(&b);
        reap(&dev);
        inst_down(&in);
}

static void test_link_down_remaps(void **state)
{
        (void)state;
        struct inst in;
        inst_up(&in, "b2b");
        struct proc a, b;
        spawn(&b, in.dir, "b2b", "b");
        spawn(&a, in.dir, "b2b", "a");
        OK(&b, "probe 1");
        uint64_t bus = num(cmd(&b, "alloc 1 65536"), 1);
        OK(&b, "fill 0 65536 31");
        OK(&a, "probe 0");
        OK(&a, "slot 0 9 1 0x%llx", (unsigned long long)(bus & ~(MiB - 1)));
        OK(&a, "map 0 0x%llx 0x%llx", (unsigned long long)(9 * MiB), (unsigned long long)MiB);
        unsigned long long off = bus & (MiB - 1);
        OK(&a, "readcheck 0x%llx 65536 31", off);
        /* This process takes the link down; a's mapping must read all ones soon. */
        struct ntbf_fault f = {NTBF_FAULT_LINK_DOWN, 0};
        uint64_t t0 = now_ms();
        assert_int_equal(in.ops->fault(in.b, &f), 0);
        const char *r = cmd(&a, "waitones 0x%llx 65536 2000", off);
        assert_int_equal(strncmp(r, "ok", 2), 0);
        print_message("link down: remote mapping reads all ones %llu us after the wait began "
                      "(%llu ms after the fault)\n",
                      (unsigned long long)num(r, 1), (unsigned long long)(now_ms() - t0));
        f.kind = NTBF_FAULT_LINK_UP;
        assert_int_equal(in.ops->fault(in.b, &f), 0);
        r = cmd(&a, "waitpattern 0x%llx 65536 31 2000", off);
        assert_int_equal(strncmp(r, "ok", 2), 0);
        print_message("link up: pattern back after %llu us\n", (unsigned long long)num(r, 1));
        reap(&a);
        reap(&b);
        inst_down(&in);
}

static void test_kill_while_hammering(void **state)
{
        (void)state;
        struct inst in;
        inst_up(&in, "b2b");
        struct proc dev;
        spawn(&dev, in.dir, "b2b", "any");
        OK(&dev, "devhost");
        srand((unsigned)getpid());
        uint64_t worst = 0;
        /* SIMFAB_KILL_ROUNDS makes a longer stress run; the suite does 8. */
        int rounds = getenv("SIMFAB_KILL_ROUNDS") ? atoi(getenv("SIMFAB_KILL_ROUNDS")) : 8;
        for (int round = 0; round < rounds; round++) {
                struct proc h;
                spawn(&h, in.dir, "b2b", "a");
                OK(&h, "probe 0");
                assert_string_equal(cmd(&h, "hammer 0"), "started");
                struct timespec ts = {0, (long)(20 + rand() % 180) * 1000000};
                nanosleep(&ts, NULL);
                assert_int_equal(kill(h.pid, SIGKILL), 0);
                int st;
                assert_int_equal(waitpid(h.pid, &st, 0), h.pid);
                assert_true(WIFSIGNALED(st));
                fclose(h.in);
                fclose(h.out);
                /* Consistent at once: every entry whole, locks recoverable. */
                char why[512];
                int r = ntbf_sim_check(in.b, why, sizeof(why));
                if (r)
                        fail_msg("round %d: %s", round, why);
                /* And its memory and vectors come back. */
                uint64_t t0 = now_ms();
                struct ntbf_sim_owned o;
                do {
                        assert_int_equal(ntbf_sim_owned(in.b, 0, h.pid, &o), 0);
                        if (!o.mem && !o.irqs)
                                break;
                        nanosleep(&(struct timespec){0, 1000000}, NULL);
                } while (now_ms() - t0 < 2000);
                assert_int_equal(o.mem, 0);
                assert_int_equal(o.irqs, 0);
                if (now_ms() - t0 > worst)
                        worst = now_ms() - t0;
        }
        print_message("%d kills: tables consistent, resources reclaimed within %llu ms; %llu "
                      "locks found held by the dead and repaired\n",
                      rounds, (unsigned long long)worst,
                      (unsigned long long)ntbf_sim_recoveries(in.b));
        /* All of a's RAM above the firmware floor is free again. */
        struct ntbf_adapter_h *ha;
        assert_int_equal(in.ops->probe(in.b, 0, &ha), 0);
        struct ntbf_mem m;
        assert_int_equal(in.ops->mem_alloc(ha, 255 * MiB, 0, &m), 0);
        assert_int_equal(in.ops->mem_free(ha, &m), 0);
        in.ops->release(ha);
        char why[512];
        assert_int_equal(ntbf_sim_check(in.b, why, sizeof(why)), 0);
        reap(&dev);
        inst_down(&in);
}

static void test_refuse_other_topology(void **state)
{
        (void)state;
        struct inst in;
        inst_up(&in, "b2b");
        struct proc p;
        spawn(&p, in.dir, "b2b-big", "a");
        print_message("%s\n", p.line);
        assert_int_equal(strncmp(p.line, "err ", 4), 0);
        assert_non_null(strstr(p.line, "was created from a different topology"));
        assert_non_null(strstr(p.line, in.dir));
        fclose(p.in);
        fclose(p.out);
        int st;
        assert_int_equal(waitpid(p.pid, &st, 0), p.pid);
        assert_int_equal(WEXITSTATUS(st), 1);
        inst_down(&in);
}

static int list(const char *dir, char names[][256], int max)
{
        DIR *d = opendir(dir);
        int n = 0;
        struct dirent *e;
        while (d && (e = readdir(d)))
                if (e->d_name[0] != '.' && n < max)
                        snprintf(names[n++], 256, "%s", e->d_name);
        if (d)
                closedir(d);
        return n;
}

static void test_create_destroy_files(void **state)
{
        (void)state;
        struct inst in;
        inst_up(&in, "nvme");
        char names[32][256];
        int n = list(in.dir, names, 32);
        /* fabric, lock, ram-a, ram-b, bar-a-nvme0-0, images, mcpost-a-*, mcpost-b-* */
        assert_int_equal(n, 8);
        char img[256];
        snprintf(img, sizeof(img), "%s/images/a-nvme0.img", in.dir);
        int fd = open(img, O_RDWR);
        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, "keep", 4, 4096), 4);
        close(fd);
        /* An IOMMU file appears on first use and goes with the rest. */
        inst_down(&in);
        n = list(in.dir, names, 32);
        assert_int_equal(n, 1);
        assert_string_equal(names[0], "images");
        /* Created again: the image is kept, its data intact. */
        struct ntbf_topo *t = itopo("nvme");
        char why[256];
        assert_int_equal(ntbf_sim_fabric_create(t, in.dir, why, sizeof(why)), 0);
        fd = open(img, O_RDONLY);
        char buf[4];
        assert_int_equal(pread(fd, buf, 4, 4096), 4);
        assert_memory_equal(buf, "keep", 4);
        close(fd);
        assert_int_equal(ntbf_sim_fabric_destroy(in.dir), 0);
        unlink(img);
        snprintf(img, sizeof(img), "%s/images", in.dir);
        assert_int_equal(rmdir(img), 0);
        assert_int_equal(rmdir(in.dir), 0);
        ntbf_topo_free(t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_window_pattern),
            cmocka_unit_test(test_window_pattern_iommu),
            cmocka_unit_test(test_doorbell_eventfd),
            cmocka_unit_test(test_msi_from_device_model),
            cmocka_unit_test(test_link_down_remaps),
            cmocka_unit_test(test_kill_while_hammering),
            cmocka_unit_test(test_refuse_other_topology),
            cmocka_unit_test(test_create_destroy_files),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
