/* tests/integration/devtest_rig.c: the two-host fabric of the device tests and its borrower
 * processes (devtest_rig.h). */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "ntbfab/config.h"
#include "ntbfab/error.h"
#include "devtest_rig.h"
#include "lendhand.h"

static const char *yaml =
    "# The device tests' cluster (tests/integration/devtest_rig.h).\n"
    "cluster: {name: devtests, backend: sim}\n"
    "nodes:\n"
    "  - name: lender\n"
    "    id: 4\n"
    "    address: 127.0.0.1:7700\n"
    "    ram: 256MiB\n"
    "    iommu: false\n"
    "    adapters:\n"
    "      - {name: ntb0, model: pxh830}\n"
    "    devices:\n"
    "      - {name: nvme0, bdf: \"0000:03:00.0\", lend: true,\n"
    "         sim: {model: nvme, capacity: 64MiB, queues: 16}}\n"
    "      - {name: acc0, bdf: \"0000:04:00.0\", lend: true, sim: {model: accel, memory: 32MiB}}\n"
    "  - name: borrower\n"
    "    id: 8\n"
    "    address: 127.0.0.2:7700\n"
    "    ram: 512MiB\n"
    "    iommu: true\n"
    "    adapters:\n"
    "      - {name: ntb0, model: pxh830}\n"
    "links:\n"
    "  - [lender.ntb0, borrower.ntb0]\n";

/* What a failed test leaves behind, for rig_teardown: the rig and the live borrowers. */
static struct rig *current;
static struct live_proc {
        pid_t pid;
        FILE *in, *out;
} live[32];
static unsigned nlive;

static void load(struct rig *g)
{
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        int r = ntbf_config_load(g->yaml, &g->t, &d);
        if (r)
                ntbf_diags_print(&d, stderr);
        ntbf_diags_free(&d);
        assert_int_equal(r, 0);
        g->ln = ntbf_topo_find_node(g->t, "lender");
        g->bn = ntbf_topo_find_node(g->t, "borrower");
        assert_int_not_equal(g->ln, NTBF_NONE);
        assert_int_not_equal(g->bn, NTBF_NONE);
        g->la = g->t->nodes[g->ln].adapters[0];
        g->ba = g->t->nodes[g->bn].adapters[0];
        g->nvme = ntbf_topo_find_device(g->t, g->ln, "nvme0");
        g->acc = ntbf_topo_find_device(g->t, g->ln, "acc0");
        assert_int_not_equal(g->nvme, NTBF_NONE);
        assert_int_not_equal(g->acc, NTBF_NONE);
}

static void attach(struct rig *g)
{
        char why[512];
        int r = ntbf_sim_fabric_create(g->t, g->dir, why, sizeof(why));
        if (r)
                fail_msg("create: %s", why);
        g->ops = ntbf_backend_find("sim");
        assert_non_null(g->ops);
        struct ntbf_backend_env env = {g->t, g->dir, NTBF_NONE};
        r = ntbf_sim_attach(&env, &g->b, why, sizeof(why));
        if (r)
                fail_msg("attach: %s", why);
        assert_int_equal(g->ops->probe(g->b, g->la, &g->hl), 0);
        assert_int_equal(g->ops->probe(g->b, g->ba, &g->hb), 0);
        rig_lend(g);
        struct ntbf_sim_devhost_opts o = {.model_for = ntbf_sim_builtin_model};
        r = ntbf_sim_devhost_start(g->b, &o, &g->dh, why, sizeof(why));
        if (r)
                fail_msg("device host: %s", why);
}

static void detach(struct rig *g)
{
        ntbf_sim_devhost_stop(g->dh);
        g->dh = NULL;
        if (g->hl)
                g->ops->release(g->hl);
        if (g->hb)
                g->ops->release(g->hb);
        if (g->b)
                g->ops->close(g->b);
        g->hl = g->hb = NULL;
        g->b = NULL;
}

/* Everything of the instance directory, whatever state it is in. */
static void remove_all(struct rig *g)
{
        ntbf_sim_fabric_destroy(g->dir);
        char p[256];
        rig_image_path(g, p, sizeof(p));
        unlink(p);
        snprintf(p, sizeof(p), "%s/images", g->dir);
        rmdir(p);
        snprintf(p, sizeof(p), "%s/barrier", g->dir);
        unlink(p);
        rmdir(g->dir);
        unlink(g->yaml);
}

void rig_up(struct rig *g)
{
        memset(g, 0, sizeof(*g));
        current = g;
        snprintf(g->dir, sizeof(g->dir), "/dev/shm/ntbfab-devtests-XXXXXX");
        assert_non_null(mkdtemp(g->dir));
        /* The cluster file lives next to the instance so every process reads the same. */
        snprintf(g->yaml, sizeof(g->yaml), "%s.yaml", g->dir);
        FILE *f = fopen(g->yaml, "w");
        assert_non_null(f);
        fputs(yaml, f);
        fclose(f);
        load(g);
        attach(g);
}

void rig_lend(struct rig *g)
{
        assert_int_equal(lh_rid_add(g->ops, g->hl, g->t, g->nvme), 0);
        assert_int_equal(lh_rid_add(g->ops, g->hl, g->t, g->acc), 0);
        assert_int_equal(lh_dma_window(g->ops, g->hl, g->t, g->la, RIG_WSLOT, RIG_WSLOTS, g->ba,
                                       RIG_IOVA, &g->win_dev),
                         0);
}

void rig_image_path(const struct rig *g, char *buf, size_t len)
{
        snprintf(buf, len, "%s/images/lender-nvme0.img", g->dir);
}

static int entries(const char *dir, char names[][256], int max)
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

void rig_restart(struct rig *g)
{
        detach(g);
        assert_int_equal(ntbf_sim_fabric_destroy(g->dir), 0);
        char names[8][256];
        int n = entries(g->dir, names, 8);
        assert_int_equal(n, 1);
        assert_string_equal(names[0], "images");
        attach(g);
}

void rig_down(struct rig *g)
{
        detach(g);
        remove_all(g);
        assert_int_equal(access(g->dir, F_OK), -1); /* nothing left */
        ntbf_topo_free(g->t);
        g->t = NULL;
        current = NULL;
}

int rig_teardown(void **state)
{
        (void)state;
        for (unsigned i = 0; i < nlive; i++) {
                kill(live[i].pid, SIGKILL);
                waitpid(live[i].pid, NULL, 0);
                fclose(live[i].in);
                fclose(live[i].out);
        }
        nlive = 0;
        if (current) {
                detach(current);
                remove_all(current);
                ntbf_topo_free(current->t);
                current->t = NULL;
                current = NULL;
        }
        return 0;
}

struct ntbf_counters rig_ctr(struct rig *g, struct ntbf_adapter_h *h)
{
        struct ntbf_counters c;
        assert_int_equal(g->ops->counters(h, &c), 0);
        return c;
}

uint64_t rig_region_dev(const struct rig *g, unsigned r)
{
        return g->win_dev + r * RIG_REGION;
}

uint64_t rig_region_iova(unsigned r)
{
        return RIG_IOVA + r * RIG_REGION;
}

uint32_t rig_lender_slot(const struct rig *g, uint64_t dev)
{
        const struct ntbf_adapter *a = &g->t->adapters[g->la];
        return (uint32_t)((dev - a->window_base) / a->lut_entry_size);
}

/* ---- borrower processes -------------------------------------------------------------------- */

static const char *helper(void)
{
        const char *p = getenv("DEVTEST_BORROWER");
        return p ? p : "./sim_borrower";
}

static void get_line(struct bproc *p)
{
        if (!fgets(p->line, sizeof(p->line), p->out))
                snprintf(p->line, sizeof(p->line), "eof");
        p->line[strcspn(p->line, "\n")] = 0;
}

void bp_spawn(struct bproc *p, const struct rig *g)
{
        int to[2], from[2];
        assert_int_equal(pipe(to), 0);
        assert_int_equal(pipe(from), 0);
        fflush(NULL);
        p->pid = fork();
        assert_true(p->pid >= 0);
        if (p->pid == 0) {
                dup2(to[0], 0);
                dup2(from[1], 1);
                close(to[0]);
                close(to[1]);
                close(from[0]);
                close(from[1]);
                execl(helper(), "sim_borrower", g->dir, g->yaml, (char *)NULL);
                _exit(127);
        }
        close(to[0]);
        close(from[1]);
        p->in = fdopen(to[1], "w");
        p->out = fdopen(from[0], "r");
        assert_non_null(p->in);
        assert_non_null(p->out);
        if (nlive < 32)
                live[nlive++] = (struct live_proc){p->pid, p->in, p->out};
        get_line(p);
        if (strncmp(p->line, "ready", 5))
                fail_msg("borrower process did not start: %s", p->line);
}

static void vsend(struct bproc *p, const char *fmt, va_list ap)
{
        vfprintf(p->in, fmt, ap);
        fputc('\n', p->in);
        fflush(p->in);
}

void bp_send(struct bproc *p, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsend(p, fmt, ap);
        va_end(ap);
}

const char *bp_recv(struct bproc *p)
{
        get_line(p);
        return p->line;
}

const char *bp_cmd(struct bproc *p, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsend(p, fmt, ap);
        va_end(ap);
        return bp_recv(p);
}

const char *bp_ok(struct bproc *p, const char *fmt, ...)
{
        char cmd[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        const char *r = bp_cmd(p, "%s", cmd);
        if (strncmp(r, "ok", 2))
                fail_msg("borrower %d: '%s' answered '%s'", (int)p->pid, cmd, r);
        return r;
}

uint64_t bp_num(const char *line, int i)
{
        const char *s = line;
        for (int k = 0; k < i && s; k++) {
                s = strchr(s, ' ');
                if (s)
                        s++;
        }
        return s ? strtoull(s, NULL, 0) : UINT64_MAX;
}

void bp_quit(struct bproc *p)
{
        const char *r = bp_cmd(p, "quit");
        assert_string_equal(r, "ok");
        for (unsigned i = 0; i < nlive; i++) {
                if (live[i].pid == p->pid) {
                        live[i] = live[--nlive];
                        break;
                }
        }
        fclose(p->in);
        fclose(p->out);
        int st;
        assert_int_equal(waitpid(p->pid, &st, 0), p->pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
}

void bp_setup(struct bproc *p, const struct rig *g, unsigned r, uint64_t size, uint64_t chunk)
{
        bp_ok(p, "pool %llu %llu 0x%llx 0x%llx", (unsigned long long)size,
              (unsigned long long)chunk, (unsigned long long)rig_region_iova(r),
              (unsigned long long)rig_region_dev(g, r));
        const struct ntbf_device *d = &g->t->devices[g->nvme];
        bp_ok(p, "mapbar 0 %u 0x%llx %llu", RIG_BSLOT_NVME,
              (unsigned long long)ntbf_device_bar_addr(d, 0, 0),
              (unsigned long long)ntbf_device_bar_size(d, 0, 0));
}
