/* tests/switchtec/test_switchtec.c: backends/switchtec against the register model: the
 * register writes of a borrow and a return, the switch's refusals, a status that never
 * settles, full tables, crashes and the read-back, MRPC, crosslink proxy IDs. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "model.h"
#include "switchtec.h"

/* A switch: the model over a GAS file, in a thread, serving MRPC on a socket. */
struct fx {
        char dir[64], gas[96], sock[96], rec[96];
        int fd, lfd;
        uint8_t *map; /* the test's own view of the file (for faults and checks) */
        struct stxm *m;
        pthread_t th;
};

static void *model_main(void *arg)
{
        struct fx *f = arg;
        stxm_run(f->m, f->lfd, 500);
        return NULL;
}

static void fx_start(struct fx *f, const struct stxm_params *p)
{
        memset(f, 0, sizeof(*f));
        snprintf(f->dir, sizeof(f->dir), "/tmp/stxtest.XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        snprintf(f->gas, sizeof(f->gas), "%s/gas", f->dir);
        snprintf(f->sock, sizeof(f->sock), "%s/mrpc", f->dir);
        snprintf(f->rec, sizeof(f->rec), "%s/records", f->dir);
        f->fd = open(f->gas, O_RDWR | O_CREAT, 0600);
        assert_true(f->fd >= 0);
        assert_int_equal(ftruncate(f->fd, STXM_FILE_SIZE), 0);
        f->map = mmap(NULL, STXM_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
        assert_true(f->map != MAP_FAILED);
        stxm_format(f->map, p);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", f->sock);
        f->lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(listen(f->lfd, 4), 0);
        f->m = stxm_new(f->map);
        assert_non_null(f->m);
        assert_int_equal(pthread_create(&f->th, NULL, model_main, f), 0);
}

static void fx_stop(struct fx *f)
{
        __atomic_store_n((uint32_t *)(f->map + STXM_STOP), 1, __ATOMIC_RELEASE);
        pthread_join(f->th, NULL);
        stxm_free(f->m);
        close(f->lfd);
        munmap(f->map, STXM_FILE_SIZE);
        close(f->fd);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
        assert_int_equal(system(cmd), 0);
}

static void ctl32(struct fx *f, uint64_t off, uint32_t v)
{
        __atomic_store_n((uint32_t *)(f->map + off), v, __ATOMIC_RELEASE);
}

static uint32_t reg32(struct fx *f, uint64_t off)
{
        return __atomic_load_n((uint32_t *)(f->map + off), __ATOMIC_ACQUIRE);
}

static uint64_t reg64(struct fx *f, uint64_t off)
{
        return __atomic_load_n((uint64_t *)(f->map + off), __ATOMIC_ACQUIRE);
}

static const struct stxm_params two_parts = {.ep_map = 0x3,
                                             .partition_id = 0,
                                             .lut_entries = 512,
                                             .rid_size = 256,
                                             .host_rid = 0x0008,
                                             .bar_size = 64ull << 20};

/* Quick polls: the model ticks every 0.5 ms; 60000 polls of 1 ms bound the wait only (a
 * loaded machine may not run the model thread for seconds). */
static const struct stx_timing quick = {1000, 60000};

static void dev_open(struct fx *f, struct stx_dev *d, bool mrpc, bool records)
{
        char why[512] = "";
        struct stx_dev_cfg c = {.gas = f->gas,
                                .mrpc = mrpc ? f->sock : NULL,
                                .partition = 0,
                                .records = records ? f->rec : NULL,
                                .lut_reserved = 1,
                                .rid_reserved = 2,
                                .tm = quick};
        int r = stx_dev_open(d, &c, why, sizeof(why));
        if (r)
                fail_msg("stx_dev_open: %s", why);
}

/* BAR 2 as the switchtec-pfx preset has it: 512 LUT entries of 64 KiB, a 32 MiB direct
 * window. */
static void bar2(struct stx_dev *d)
{
        char why[512] = "";
        if (stx_bar_setup(d, 2, 512, 16, 32u << 20, why, sizeof(why)))
                fail_msg("BAR setup: %s", why);
}

/* ---- the writes of a borrow and a return --------------------------------------------- */

struct wlog {
        uint64_t off[64], val[64];
        unsigned bytes[64];
        size_t n;
};

static void log_write(void *ctx, struct stx_gas *g, uint64_t off, uint64_t val, unsigned bytes)
{
        (void)g;
        struct wlog *l = ctx;
        if (l->n < 64) {
                l->off[l->n] = off;
                l->val[l->n] = val;
                l->bytes[l->n++] = bytes;
        }
}

static void expect_writes(struct wlog *l, const uint64_t (*w)[3], size_t n)
{
        if (l->n != n) {
                for (size_t i = 0; i < l->n; i++)
                        print_message("write %zu: 0x%llx = 0x%llx (%u bytes)\n", i,
                                      (unsigned long long)l->off[i], (unsigned long long)l->val[i],
                                      l->bytes[i]);
        }
        assert_int_equal(l->n, n);
        for (size_t i = 0; i < n; i++) {
                assert_int_equal(l->off[i], w[i][0]);
                assert_int_equal(l->val[i], w[i][1]);
                assert_int_equal(l->bytes[i], w[i][2]);
        }
        l->n = 0;
}

#define C0 UINT64_C(0x14000) /* partition 0's control block: NTB 0x10000 + 0x4000 */

static void test_borrow_and_return_writes(void **state)
{
        (void)state;
        struct fx f;
        fx_start(&f, &two_parts);
        struct stx_dev d;
        dev_open(&f, &d, false, true);
        char why[512];
        struct wlog l = {0};
        d.g.hook = log_write;
        d.g.hook_ctx = &l;

        /* BAR 2: 512 LUT entries of 64 KiB (32 MiB), then a 32 MiB direct window. */
        assert_int_equal(stx_bar_setup(&d, 2, 512, 16, 32u << 20, why, sizeof(why)), 0);
        const uint64_t bar[][3] = {
            {C0 + 0x04, 1, 4},                                          /* partition_op LOCK */
            {C0 + 0x60, 1 | 1 << 4 | 1 << 5 | 16 << 8 | 511u << 14, 4}, /* bar_entry[2].ctl */
            {C0 + 0x64, (32u << 20) | 25, 4},                           /* win_size */
            {C0 + 0xa8, 0, 4},                                          /* bar_ext_entry[2] */
            {C0 + 0x04, 2, 4},                                          /* partition_op CFG */
        };
        expect_writes(&l, bar, 5);

        /* A borrow: LUT entry 5 to 0x80010000 in partition 1, the device's requester. */
        assert_int_equal(stx_lut_set(&d, 5, 0x80010000, 1, why, sizeof(why)), 0);
        uint32_t proxy = 0;
        assert_int_equal(stx_rid_add(&d, 0x0300, &proxy, why, sizeof(why)), 0);
        const uint64_t borrow[][3] = {
            {C0 + 0x04, 1, 4},
            {C0 + 0x1000 + 8 * 5, 0x80010000 | 1 << 1 | 1, 8}, /* lut_entry[5] */
            {C0 + 0x04, 2, 4},
            {C0 + 0x04, 1, 4},
            {C0 + 0x400 + 4 * 2, 0x0300u << 16 | 1, 4}, /* req_id_table[2] */
            {C0 + 0x04, 2, 4},
        };
        expect_writes(&l, borrow, 6);
        /* The model's proxies: devfn 1 and 2 are the host's two entries. */
        assert_int_equal(proxy, 3);
        assert_int_equal(reg32(&f, C0 + 0x400 + 8), 0x0300u << 16 | 3 << 1 | 1);
        assert_int_equal(reg64(&f, C0 + 0x1000 + 40), 0x80010003);
        assert_int_equal(reg32(&f, C0 + STX_PART_STATUS), STX_ST_NORMAL);

        /* The return: the entries cleared the same way. */
        assert_int_equal(stx_rid_del(&d, 0x0300, why, sizeof(why)), 0);
        assert_int_equal(stx_lut_clear(&d, 5, why, sizeof(why)), 0);
        const uint64_t ret[][3] = {
            {C0 + 0x04, 1, 4}, {C0 + 0x400 + 8, 0, 4},   {C0 + 0x04, 2, 4},
            {C0 + 0x04, 1, 4}, {C0 + 0x1000 + 40, 0, 8}, {C0 + 0x04, 2, 4},
        };
        expect_writes(&l, ret, 6);
        assert_int_equal(reg32(&f, C0 + 0x400 + 8), 0);
        assert_int_equal(reg64(&f, C0 + 0x1000 + 40), 0);
        /* The host's entries were never touched. */
        assert_int_equal(stx_rid_of(reg32(&f, C0 + 0x404)), 0x0008);
        assert_int_equal(stx_lut_set(&d, 0, 0x1000, 1, why, sizeof(why)), -EPERM);
        assert_non_null(strstr(why, "lower layer keeps them"));
        stx_dev_close(&d);
        fx_stop(&f);
}

/* ---- refusals --------------------------------------------------------------------------- */

static void test_switch_refuses(void **state)
{
        (void)state;
        struct fx f;
        fx_start(&f, &two_parts);
        struct stx_dev d;
        dev_open(&f, &d, false, true);
        char why[1024];
        /* The documented bar_error: a LUT window larger than the BAR (64 MiB here). */
        assert_int_equal(stx_bar_setup(&d, 2, 512, 20, 0, why, sizeof(why)), -EIO);
        assert_non_null(strstr(why, "bar_error 0x00030002: the LUT window exceeds the size of "
                                    "BAR 2 (documented)"));
        assert_int_equal(reg32(&f, C0 + STX_BAR_CTL(2)), 0); /* rolled back */
        assert_int_equal(reg32(&f, C0 + STX_BAR_ERROR), 0);  /* and configured clean again */
        assert_int_equal(stx_bar_setup(&d, 2, 512, 16, 32u << 20, why, sizeof(why)), 0);

        /* A LUT entry to a partition with no NT endpoint. */
        assert_int_equal(stx_lut_set(&d, 7, 0x80000000, 5, why, sizeof(why)), -EIO);
        assert_non_null(strstr(why, "lut_error 0x00020007: its destination partition has no NT "
                                    "endpoint, in LUT entry 7"));
        assert_int_equal(reg64(&f, C0 + STX_LUT_ENTRY(7)), 0);
        /* A code the switch sets that this backend cannot explain, and one it can. */
        ctl32(&f, STXM_INJECT_LUT, 0x00ff0009);
        assert_int_equal(stx_lut_set(&d, 9, 0x80000000, 1, why, sizeof(why)), -EIO);
        assert_non_null(strstr(why, "lut_error 0x00ff0009: a code this backend cannot explain"));
        assert_int_equal(reg64(&f, C0 + STX_LUT_ENTRY(9)), 0);
        /* Nothing refused was recorded. */
        assert_int_equal(d.nrecs, 0);
        stx_dev_close(&d);
        fx_stop(&f);
}

static void test_full_tables(void **state)
{
        (void)state;
        struct stxm_params p = two_parts;
        p.rid_size = 5;
        struct fx f;
        fx_start(&f, &p);
        struct stx_dev d;
        dev_open(&f, &d, false, true);
        char why[1024];
        uint32_t proxy;
        /* The switch gives 4 proxies: 2 are the host's, 2 left. */
        ctl32(&f, STXM_PROXIES, 4);
        assert_int_equal(stx_rid_add(&d, 0x0100, &proxy, why, sizeof(why)), 0);
        assert_int_equal(stx_rid_add(&d, 0x0101, &proxy, why, sizeof(why)), 0);
        assert_int_equal(stx_rid_add(&d, 0x0102, &proxy, why, sizeof(why)), -EIO);
        assert_non_null(strstr(why, "req_id_error 0x00020004: the switch has no proxy ID left "
                                    "for entry 4"));
        assert_int_equal(reg32(&f, C0 + STX_RID_ENTRY(4)), 0);
        /* The table itself: 5 entries, all taken once the proxies allow. */
        ctl32(&f, STXM_PROXIES, 32);
        assert_int_equal(stx_rid_add(&d, 0x0102, &proxy, why, sizeof(why)), 0);
        assert_int_equal(stx_rid_add(&d, 0x0103, &proxy, why, sizeof(why)), -ENOSPC);
        assert_non_null(strstr(why, "requester-ID table is full (5 entries, 2 the host's)"));
        stx_dev_close(&d);
        fx_stop(&f);
}

static void test_status_never_settles(void **state)
{
        (void)state;
        struct fx f;
        fx_start(&f, &two_parts);
        struct stx_dev d;
        dev_open(&f, &d, false, true);
        bar2(&d);
        d.p.tm = (struct stx_timing){1000, 30};
        char why[1024];
        ctl32(&f, STXM_STUCK, STXM_STUCK_CFG);
        assert_int_equal(stx_lut_set(&d, 3, 0x40000000, 1, why, sizeof(why)), -ETIMEDOUT);
        assert_non_null(strstr(why, "partition 0 did not configure: its status is still "
                                    "CONFIGURING after 30 polls"));
        assert_int_equal(d.nrecs, 0);
        /* The edit was taken back in the registers before the switch settles. */
        assert_int_equal(reg64(&f, C0 + STX_LUT_ENTRY(3)), 0);
        ctl32(&f, STXM_STUCK, 0);
        d.p.tm = quick;
        assert_int_equal(stx_lut_set(&d, 3, 0x40000000, 1, why, sizeof(why)), 0);
        /* A lock that never settles changes nothing. */
        ctl32(&f, STXM_STUCK, STXM_STUCK_LOCK);
        d.p.tm = (struct stx_timing){1000, 30};
        assert_int_equal(stx_lut_clear(&d, 3, why, sizeof(why)), -ETIMEDOUT);
        assert_non_null(strstr(why, "did not lock: its status is still LOCKING"));
        stx_dev_close(&d);
        fx_stop(&f);
}

/* ---- crashes and the read-back ---------------------------------------------------------- */

static void crash_child(struct fx *f, const char *at, void (*what)(struct stx_dev *d))
{
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (!pid) {
                setenv("NTBFAB_STX_CRASH_AT", at, 1);
                struct stx_dev d;
                dev_open(f, &d, false, true);
                what(&d);
                _exit(0); /* not reached: the crash point exits with 86 */
        }
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 86);
}

static void lut_9(struct stx_dev *d)
{
        char why[512];
        stx_lut_set(d, 9, 0x90000000, 1, why, sizeof(why));
}

static void rid_0400(struct stx_dev *d)
{
        char why[512];
        uint32_t proxy;
        stx_rid_add(d, 0x0400, &proxy, why, sizeof(why));
}

static void lut_clear_4(struct stx_dev *d)
{
        char why[512];
        stx_lut_clear(d, 4, why, sizeof(why));
}

static void test_crash_and_read_back(void **state)
{
        (void)state;
        struct fx f;
        fx_start(&f, &two_parts);
        char why[1024];
        uint32_t proxy;
        struct stx_dev d;
        /* One entry this host owns, recorded. */
        dev_open(&f, &d, false, true);
        bar2(&d);
        assert_int_equal(stx_lut_set(&d, 4, 0x70000000, 1, why, sizeof(why)), 0);
        assert_int_equal(stx_rid_add(&d, 0x0200, &proxy, why, sizeof(why)), 0);
        stx_dev_close(&d);

        /* Crashes after the switch took an entry, before it was recorded. */
        crash_child(&f, "lut-programmed", lut_9);
        crash_child(&f, "rid-programmed", rid_0400);
        assert_true(reg64(&f, C0 + STX_LUT_ENTRY(9)) & STX_LUT_EN);
        assert_int_equal(stx_rid_of(reg32(&f, C0 + STX_RID_ENTRY(3))), 0x0400);
        /* And one with the partition locked, its register edited, never configured. */
        crash_child(&f, "edited", lut_9);
        assert_int_equal(reg32(&f, C0 + STX_PART_STATUS), STX_ST_LOCKED);
        /* The switch lost a recorded entry meanwhile (say, a reset). */
        ctl32(&f, C0 + STX_LUT_ENTRY(4), 0);
        ctl32(&f, C0 + STX_LUT_ENTRY(4) + 4, 0);

        dev_open(&f, &d, false, true);
        struct stx_recon rc;
        int r = stx_reconcile(&d, &rc, why, sizeof(why));
        if (r)
                fail_msg("reconcile: %s", why);
        assert_int_equal(rc.stale_lut, 1);
        assert_int_equal(rc.stale_rid, 1);
        assert_int_equal(rc.restored_lut, 1);
        assert_int_equal(rc.kept, 1);
        assert_int_equal(reg64(&f, C0 + STX_LUT_ENTRY(9)), 0);
        assert_int_equal(reg32(&f, C0 + STX_RID_ENTRY(3)), 0);
        assert_int_equal(reg64(&f, C0 + STX_LUT_ENTRY(4)), 0x70000003);
        assert_int_equal(reg32(&f, C0 + STX_PART_STATUS), STX_ST_NORMAL);
        assert_int_equal(stx_rid_of(reg32(&f, C0 + STX_RID_ENTRY(0))), 0x0000); /* host's */
        assert_int_equal(stx_rid_of(reg32(&f, C0 + STX_RID_ENTRY(1))), 0x0008);
        stx_dev_close(&d);

        /* A crash after a return was recorded, before the switch dropped the entry. */
        pid_t pid = fork();
        if (!pid) {
                setenv("NTBFAB_STX_CRASH_AT", "rid-unrecorded", 1);
                struct stx_dev c;
                dev_open(&f, &c, false, true);
                char w[512];
                stx_rid_del(&c, 0x0200, w, sizeof(w));
                _exit(0);
        }
        int st;
        waitpid(pid, &st, 0);
        assert_int_equal(WEXITSTATUS(st), 86);
        assert_int_equal(stx_rid_of(reg32(&f, C0 + STX_RID_ENTRY(2))), 0x0200);
        dev_open(&f, &d, false, true);
        assert_int_equal(stx_reconcile(&d, &rc, why, sizeof(why)), 0);
        assert_int_equal(rc.stale_rid, 1);
        assert_int_equal(reg32(&f, C0 + STX_RID_ENTRY(2)), 0);
        stx_dev_close(&d);

        /* The same for a LUT entry. */
        crash_child(&f, "lut-unrecorded", lut_clear_4);
        assert_int_equal(reg64(&f, C0 + STX_LUT_ENTRY(4)), 0x70000003);
        dev_open(&f, &d, false, true);
        assert_int_equal(stx_reconcile(&d, &rc, why, sizeof(why)), 0);
        assert_int_equal(rc.stale_lut, 1);
        assert_int_equal(rc.kept, 0);
        assert_int_equal(reg64(&f, C0 + STX_LUT_ENTRY(4)), 0);
        stx_dev_close(&d);
        fx_stop(&f);
}

/* ---- MRPC and crosslink ----------------------------------------------------------------- */

static void test_mrpc_and_crosslink(void **state)
{
        (void)state;
        struct stxm_params p = two_parts;
        p.ep_map = 0x7;
        p.xlink_part = 2;
        struct fx f;
        fx_start(&f, &p);
        struct stx_dev d;
        dev_open(&f, &d, true, true);
        assert_true(d.g.mrpc);
        assert_int_equal(d.xlink, 2);
        char why[1024];
        uint32_t proxy = 0;
        assert_int_equal(stx_rid_add(&d, 0x0a00, &proxy, why, sizeof(why)), 0);
        assert_int_equal(proxy, 3);
        /* The crosslink partition's table lets the proxy ID through. */
        uint64_t c2 = STX_CTRL(2);
        assert_int_equal(stx_rid_of(reg32(&f, c2 + STX_RID_ENTRY(2))), 3);
        assert_int_equal(reg32(&f, c2 + STX_PART_STATUS), STX_ST_NORMAL);
        assert_int_equal(stx_rid_del(&d, 0x0a00, why, sizeof(why)), 0);
        assert_int_equal(reg32(&f, c2 + STX_RID_ENTRY(2)), 0);
        assert_int_equal(reg32(&f, C0 + STX_RID_ENTRY(2)), 0);
        /* An MRPC read beyond the GAS is refused by the firmware: the access reports it. */
        uint8_t buf[8];
        uint32_t in[2] = {(uint32_t)STX_GAS_SIZE, 8}, ret = 0;
        assert_int_equal(stx_mrpc_cmd(d.g.fd, STX_MRPC_GAS_READ, in, 8, buf, 0, &ret), 0);
        assert_int_not_equal(ret, 0);
        stx_dev_close(&d);
        fx_stop(&f);
}

/* ---- refusals at open ------------------------------------------------------------------- */

static void test_open_refusals(void **state)
{
        (void)state;
        struct fx f;
        fx_start(&f, &two_parts);
        struct stx_dev d;
        char why[512];
        struct stx_dev_cfg c = {.partition = -1, .tm = quick};
        assert_int_equal(stx_dev_open(&d, &c, why, sizeof(why)), -EINVAL);
        assert_non_null(strstr(why, "where is the switch?"));
        c.gas = f.gas;
        c.partition = 3;
        assert_int_equal(stx_dev_open(&d, &c, why, sizeof(why)), -ENODEV);
        assert_non_null(strstr(why, "partition 3 has no NT endpoint"));
        /* Records that are not the backend's: refused, nothing read half. */
        FILE *r = fopen(f.rec, "w");
        assert_non_null(r);
        fputs("L 5 0x80010003 0\nlut five\n", r);
        fclose(r);
        c.partition = -1;
        c.records = f.rec;
        assert_int_equal(stx_dev_open(&d, &c, why, sizeof(why)), -EINVAL);
        assert_non_null(strstr(why, "records:2: not a switchtec record"));
        /* Without a partition, the GAS's own (partition_id). */
        unlink(f.rec);
        assert_int_equal(stx_dev_open(&d, &c, why, sizeof(why)), 0);
        assert_int_equal(d.partition, 0);
        assert_int_equal(d.lut_entries, 512);
        assert_int_equal(d.rid_size, 256);
        stx_dev_close(&d);
        fx_stop(&f);
}

/* ---- finding the switch in sysfs ----------------------------------------------------------------
 */

/* A fresh fake sysfs root (removed by ft_done). */
static void ft_root(char *root, size_t len)
{
        snprintf(root, len, "/tmp/stxfind.XXXXXX");
        assert_non_null(mkdtemp(root));
}

static void ft_done(const char *root)
{
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        assert_int_equal(system(cmd), 0);
}

/* One switch. Its management function is the NT function itself (ntb_hw_switchtec's way),
 * or another function of the same device: found either way, with the paths under the root
 * and the class device's partition. */
static void test_find_one_switch(void **state)
{
        (void)state;
        char root[64], why[512], want[256];
        struct stx_found fs;
        ft_root(root, sizeof(root));
        stxm_fake_sysfs(root, "switchtec0", "0000:03:00.1", 2, NULL);
        assert_int_equal(stx_find_switch(root, "0000:03:00.1", &fs, why, sizeof(why)), 0);
        assert_string_equal(fs.name, "switchtec0");
        assert_string_equal(fs.function, "0000:03:00.1");
        snprintf(want, sizeof(want), "%s/sys/bus/pci/devices/0000:03:00.1/resource0", root);
        assert_string_equal(fs.gas, want);
        snprintf(want, sizeof(want), "%s/dev/switchtec0", root);
        assert_string_equal(fs.device, want);
        assert_int_equal(fs.partition, 2);
        /* A function of another bus, device or domain is not the switch's. */
        assert_int_equal(stx_find_switch(root, "0000:04:00.1", &fs, why, sizeof(why)), -ENOENT);
        assert_int_equal(stx_find_switch(root, "0000:03:01.1", &fs, why, sizeof(why)), -ENOENT);
        assert_int_equal(stx_find_switch(root, "0001:03:00.1", &fs, why, sizeof(why)), -ENOENT);
        assert_non_null(strstr(why, "/sys/class/switchtec has switchtec0 (0000:03:00.1)"));
        ft_done(root);

        ft_root(root, sizeof(root));
        stxm_fake_sysfs(root, "switchtec3", "0000:03:00.0", -1, NULL);
        assert_int_equal(stx_find_switch(root, "0000:03:00.1", &fs, why, sizeof(why)), 0);
        assert_string_equal(fs.name, "switchtec3");
        snprintf(want, sizeof(want), "%s/sys/bus/pci/devices/0000:03:00.0/resource0", root);
        assert_string_equal(fs.gas, want);
        assert_int_equal(fs.partition, -1); /* no attribute */
        ft_done(root);
}

/* Two switches: each NT function gets the switch that owns it; the management function that
 * is the NT function wins over a sibling function; two siblings are ambiguous. */
static void test_find_two_switches(void **state)
{
        (void)state;
        char root[64], why[512];
        struct stx_found fs;
        ft_root(root, sizeof(root));
        stxm_fake_sysfs(root, "switchtec0", "0000:03:00.0", 0, NULL);
        stxm_fake_sysfs(root, "switchtec1", "0000:85:00.0", 1, NULL);
        assert_int_equal(stx_find_switch(root, "0000:85:00.1", &fs, why, sizeof(why)), 0);
        assert_string_equal(fs.name, "switchtec1");
        assert_int_equal(fs.partition, 1);
        assert_int_equal(stx_find_switch(root, "0000:03:00.1", &fs, why, sizeof(why)), 0);
        assert_string_equal(fs.name, "switchtec0");
        assert_int_equal(fs.partition, 0);
        /* The NT function is itself a management endpoint: that one, not its sibling. */
        stxm_fake_sysfs(root, "switchtec2", "0000:85:00.1", 5, NULL);
        assert_int_equal(stx_find_switch(root, "0000:85:00.1", &fs, why, sizeof(why)), 0);
        assert_string_equal(fs.name, "switchtec2");
        /* Two siblings and no exact one: ambiguous, both named, gas asked for. */
        assert_int_equal(stx_find_switch(root, "0000:85:00.3", &fs, why, sizeof(why)), -EEXIST);
        assert_non_null(strstr(why, "2 Switchtec management functions could own NT function "
                                    "0000:85:00.3"));
        assert_non_null(strstr(why, "switchtec1 (0000:85:00.0)"));
        assert_non_null(strstr(why, "switchtec2 (0000:85:00.1)"));
        assert_non_null(strstr(why, "switchtec: {gas: ...}"));
        ft_done(root);
}

/* No switch: no class directory (driver not loaded), an empty one, no usable bdf. Each
 * sentence names what was looked at and says to set gas. */
static void test_find_none(void **state)
{
        (void)state;
        char root[64], why[512], p[128];
        struct stx_found fs;
        ft_root(root, sizeof(root));
        assert_int_equal(stx_find_switch(root, "0000:03:00.1", &fs, why, sizeof(why)), -ENOENT);
        assert_non_null(strstr(why, "cannot list /sys/class/switchtec to find the switch of NT "
                                    "function 0000:03:00.1: No such file or directory (is the "
                                    "switchtec driver loaded?)"));
        assert_non_null(strstr(why, "switchtec: {gas: ...}"));
        static const char *const dirs[] = {"sys", "sys/class", "sys/class/switchtec"};
        for (size_t i = 0; i < 3; i++) {
                snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
                assert_int_equal(mkdir(p, 0700), 0);
        }
        assert_int_equal(stx_find_switch(root, "0000:03:00.1", &fs, why, sizeof(why)), -ENOENT);
        assert_non_null(strstr(why, "no Switchtec management function is NT function "
                                    "0000:03:00.1 or another function of its device: "
                                    "/sys/class/switchtec has no switchtecN"));
        assert_non_null(strstr(why, "switchtec: {gas: ...}"));
        assert_int_equal(stx_find_switch(root, "", &fs, why, sizeof(why)), -EINVAL);
        assert_non_null(strstr(why, "(the adapter's bdf), and the adapter has none: give the "
                                    "adapter its bdf"));
        assert_int_equal(stx_find_switch(root, NULL, &fs, why, sizeof(why)), -EINVAL);
        assert_int_equal(stx_find_switch(root, "03:00", &fs, why, sizeof(why)), -EINVAL);
        assert_non_null(strstr(why, "and '03:00' is not one: give the adapter its bdf"));
        ft_done(root);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_borrow_and_return_writes),
            cmocka_unit_test(test_switch_refuses),
            cmocka_unit_test(test_full_tables),
            cmocka_unit_test(test_status_never_settles),
            cmocka_unit_test(test_crash_and_read_back),
            cmocka_unit_test(test_mrpc_and_crosslink),
            cmocka_unit_test(test_open_refusals),
            cmocka_unit_test(test_find_one_switch),
            cmocka_unit_test(test_find_two_switches),
            cmocka_unit_test(test_find_none),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
