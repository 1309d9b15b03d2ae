/* tests/unit/test_linux_ntb.c: the linux-ntb backend (backends/linux-ntb) over a fake
 * ntbfab_ntb device pair (fake_ntbdev.c): what it asks of the module and what it reports. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../backends/hostmem.h"
#include "fake_ntbdev.h"
#include "lntb.h"
#include "ntbfab/config.h"
#include "ntbfab/error.h"

/* Two nodes, one NTB each (the fake's two devices), cabled; window bases as the fake's. */
static const char cluster_fmt[] =
    "cluster: {name: lntb-unit, backend: linux-ntb}\n"
    "nodes:\n"
    "  - name: a\n"
    "    id: 4\n"
    "    address: 127.0.0.1:1\n"
    "    iommu: false\n"
    "    ram: 1GiB\n"
    "    mmio_high: 0x800000000\n"
    "    adapters:\n"
    "      - name: ntb0\n"
    "        model: intel-gen4\n"
    "        bdf: \"0000:00:03.0\"\n"
    "        doorbells: 4\n"
    "        scratchpads: 16\n"
    "        messages: 4\n"
    "        windows:\n"
    "          - {size: 1MiB, bar: 2, base: %s, addr_align: 1MiB, size_align: 1MiB}\n"
    "          - {size: 1MiB, bar: 4, base: 0x801000000, addr_align: 1MiB, size_align: 1MiB}\n"
    "    devices:\n"
    "      - {name: nvme0, bdf: \"00:05.0\", class: 0x010802, bars: [16KiB]}\n"
    "  - name: b\n"
    "    id: 8\n"
    "    address: 127.0.0.1:2\n"
    "    iommu: false\n"
    "    ram: 1GiB\n"
    "    mmio_high: 0x800000000\n"
    "    adapters:\n"
    "      - name: ntb0\n"
    "        model: intel-gen4\n"
    "        bdf: \"%s\"\n"
    "        doorbells: 4\n"
    "        scratchpads: 16\n"
    "        messages: 4\n"
    "        windows:\n"
    "          - {size: 1MiB, bar: 2, base: 0x802000000, addr_align: 1MiB, size_align: 1MiB}\n"
    "          - {size: 1MiB, bar: 4, base: 0x803000000, addr_align: 1MiB, size_align: 1MiB}\n"
    "links:\n"
    "  - [a.ntb0, b.ntb0]\n";

#define MiB (UINT64_C(1) << 20)

struct fx {
        const struct lntb_sys *sys;
        struct ntbf_topo *t;
        uint32_t a, b; /* topology adapters */
        struct lntb_backend *be;
        struct lntb *la, *lb; /* owners */
};

static struct ntbf_topo *topo(const char *base_a, const char *bdf_b)
{
        char y[4096];
        snprintf(y, sizeof(y), cluster_fmt, base_a, bdf_b);
        struct ntbf_topo *t = NULL;
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        int r = ntbf_config_load_mem("lntb-unit.yaml", y, strlen(y), &t, &d);
        if (r)
                fprintf(stderr, "%s\n", d.n ? d.v[0].msg : ntbf_strerror(r));
        ntbf_diags_free(&d);
        assert_int_equal(r, 0);
        return t;
}

static int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));
        f->sys = fake_ntb_init();
        f->t = topo("0x800000000", "0000:00:04.0");
        f->a = ntbf_topo_find_adapter(f->t, ntbf_topo_find_node(f->t, "a"), "ntb0");
        f->b = ntbf_topo_find_adapter(f->t, ntbf_topo_find_node(f->t, "b"), "ntb0");
        struct ntbf_backend_env env = {f->t, NULL, NTBF_NONE, NULL};
        char why[512] = "";
        int r = lntb_open(&env, f->sys, "linux-ntb", &f->be, why, sizeof(why));
        if (r)
                fprintf(stderr, "%s\n", why);
        assert_int_equal(r, 0);
        assert_int_equal(lntb_probe(f->be, f->a, &f->la, why, sizeof(why)), 0);
        assert_int_equal(lntb_probe(f->be, f->b, &f->lb, why, sizeof(why)), 0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;
        lntb_release(f->la);
        lntb_release(f->lb);
        lntb_close(f->be);
        /* The owners' descriptors are closed: the module took back what they set. */
        for (unsigned d = 0; d < 2; d++) {
                struct fake_counts c;
                fake_ntb_counts(d, &c);
                assert_int_equal(c.opens, 0);
                assert_int_equal(c.trans, 0);
        }
        ntbf_topo_free(f->t);
        fake_ntb_fini();
        free(f);
        return 0;
}

/* ---- events: what one process_events dispatched ------------------------------------------ */

struct seen {
        unsigned links, dbs, msgs;
        bool up;
        uint32_t port, vector, peer, midx, value;
        uint64_t bits;
};

static void on_link(void *ctx, uint32_t port, bool up)
{
        struct seen *s = ctx;
        s->links++;
        s->port = port;
        s->up = up;
}

static void on_db(void *ctx, uint32_t vector, uint64_t bits)
{
        struct seen *s = ctx;
        s->dbs++;
        s->vector = vector;
        s->bits |= bits;
}

static void on_msg(void *ctx, uint32_t peer, uint32_t midx, uint32_t value)
{
        struct seen *s = ctx;
        s->msgs++;
        s->peer = peer;
        s->midx = midx;
        s->value = value;
}

static const struct ntbf_event_ops ev_ops = {on_link, on_db, on_msg, NULL};
static const struct ntbf_event_ops ev_nomsg = {on_link, on_db, NULL, NULL};

/* Whether l's event fd is readable now (the fake delivers at once). */
static bool readable(struct lntb *l)
{
        int ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event e = {.events = EPOLLIN}, out;
        epoll_ctl(ep, EPOLL_CTL_ADD, lntb_event_fd(l), &e);
        int n = epoll_wait(ep, &out, 1, 0);
        close(ep);
        return n == 1;
}

static void drain(struct lntb *l, struct seen *s)
{
        memset(s, 0, sizeof(*s));
        lntb_set_events(l, &ev_ops, s);
        lntb_process_events(l);
        memset(s, 0, sizeof(*s));
}

/* ---- opening ----------------------------------------------------------------------------- */

static void expect_open_fails(struct ntbf_topo *t, const char *node, int rc, const char *part)
{
        const struct lntb_sys *sys = fake_ntb_init();
        struct ntbf_backend_env env = {t, NULL, ntbf_topo_find_node(t, node), NULL};
        struct lntb_backend *b = NULL;
        char why[512] = "";
        assert_int_equal(lntb_open(&env, sys, "linux-ntb", &b, why, sizeof(why)), rc);
        assert_null(b);
        if (!strstr(why, part))
                fail_msg("'%s' does not say '%s'", why, part);
        fake_ntb_fini();
}

static void test_open_says_why(void **state)
{
        (void)state;
        /* A window base that is not the NTB's. */
        struct ntbf_topo *t = topo("0x840000000", "0000:00:04.0");
        expect_open_fails(t, "a", NTBF_ECONFIG,
                          "window 0 slot 0 is 0x100000 bytes at 0x840000000 in the cluster file, "
                          "but the NTB's memory window 0 is 0x100000 bytes at 0x800000000");
        ntbf_topo_free(t);
        /* A bdf no NTB of the host has. */
        t = topo("0x800000000", "0000:00:09.0");
        expect_open_fails(t, "b", NTBF_ENOTFOUND,
                          "adapter b.ntb0 has bdf 0000:00:09.0 in the cluster file, but this "
                          "host's NTBs are");
        ntbf_topo_free(t);
        /* Another process owns the NTB. */
        t = topo("0x800000000", "0000:00:04.0");
        const struct lntb_sys *sys = fake_ntb_init();
        char path[512];
        snprintf(path, sizeof(path), "%s/dev/ntbfab-ntb0", sys->root);
        int fd = sys->open(path, O_RDWR);
        assert_true(fd >= 0);
        struct ntbf_backend_env env = {t, NULL, ntbf_topo_find_node(t, "a"), NULL};
        struct lntb_backend *b = NULL;
        char why[512] = "";
        assert_int_equal(lntb_open(&env, sys, "linux-ntb", &b, why, sizeof(why)), NTBF_EBUSY);
        char want[96];
        snprintf(want, sizeof(want), "/dev/ntbfab-ntb0 is owned by process %d", (int)getpid());
        if (!strstr(why, want))
                fail_msg("'%s' does not say '%s'", why, want);
        /* A relayed process opens it beside its owner. */
        struct ntbf_backend_relay rl = {NULL, NULL};
        env.relay = &rl;
        assert_int_equal(lntb_open(&env, sys, "linux-ntb", &b, why, sizeof(why)), 0);
        lntb_close(b);
        sys->close(fd);
        fake_ntb_fini();
        ntbf_topo_free(t);
}

/* ---- capabilities and link ----------------------------------------------------------------- */

static void test_caps(void **state)
{
        struct fx *f = *state;
        struct ntbf_caps c;
        assert_int_equal(lntb_caps(f->la, &c), 0);
        uint32_t want = NTBF_CAP_XLAT_INBOUND | NTBF_CAP_CPU_MAP | NTBF_CAP_MAP_LIVE |
                        NTBF_CAP_MEM | NTBF_CAP_IRQ | NTBF_CAP_DOORBELL | NTBF_CAP_SCRATCHPAD |
                        NTBF_CAP_MESSAGE | NTBF_CAP_LINK_CTRL | NTBF_CAP_NO_RID_TABLE;
        assert_int_equal(c.flags, want);
        char why[256];
        if (!ntbf_caps_valid(&ntbf__linux_ntb_ops, &c, why, sizeof(why)))
                fail_msg("%s", why);
        assert_int_equal(c.peers, 1);
        assert_int_equal(c.nwindows, 2);
        assert_int_equal(c.slots, 2);
        assert_int_equal(c.windows[0].base, UINT64_C(0x800000000));
        assert_int_equal(c.windows[1].base, UINT64_C(0x801000000));
        /* The link is up (both owners enabled it): the hardware's limits, finer than the
         * file's size_align of a whole window. */
        assert_int_equal(c.windows[0].addr_align, MiB);
        assert_int_equal(c.windows[0].size_align, 4096);
        assert_int_equal(c.windows[0].size_max, MiB);
        assert_int_equal(c.db_valid_mask, FAKE_DB_VALID);
        assert_int_equal(c.db_vectors, 4);
        assert_int_equal(c.scratchpads, FAKE_SPADS);
        assert_int_equal(c.messages, FAKE_MSGS);
        /* Unclaimed: refused. */
        struct ntbf_xlat x = {f->t->adapters[f->b].node, f->b, 0, NTBF_NONE, MiB};
        assert_int_equal(lntb_xlat_set(f->la, 0, &x), NTBF_EUNSUPPORTED);
        assert_int_equal(lntb_xlat_clear(f->la, 0), NTBF_EUNSUPPORTED);
        void *p;
        assert_int_equal(lntb_map_window(f->la, 0, 0, 4096, NTBF_MAP_UNCACHED, &p),
                         NTBF_EUNSUPPORTED);
}

static void test_link(void **state)
{
        struct fx *f = *state;
        struct seen sa, sb;
        drain(f->la, &sa);
        drain(f->lb, &sb);
        bool up = false;
        assert_int_equal(lntb_link_state(f->la, 0, &up), 0);
        assert_true(up);
        assert_int_equal(lntb_link_state(f->la, 1, &up), -EINVAL);
        assert_false(readable(f->lb));
        /* Disabling one end takes the link down for both; the other end hears of it. */
        assert_int_equal(lntb_link_disable(f->la, 0), 0);
        assert_true(readable(f->lb));
        assert_int_equal(lntb_process_events(f->lb), 1);
        assert_int_equal(sb.links, 1);
        assert_int_equal(sb.port, 0);
        assert_false(sb.up);
        assert_false(readable(f->lb));
        uint32_t v;
        assert_int_equal(lntb_peer_spad_write(f->la, f->b, 0, 1), -ENOTCONN);
        assert_int_equal(lntb_peer_spad_read(f->lb, f->a, 0, &v), -ENOTCONN);
        assert_int_equal(lntb_peer_db_set(f->la, f->b, 1), -ENOTCONN);
        /* Hardware without a link reports no alignment: the file's figures stand. */
        struct ntbf_caps c;
        lntb_caps(f->la, &c);
        assert_int_equal(c.windows[0].size_align, MiB);
        assert_int_equal(lntb_process_events(f->la), 1);
        assert_false(sa.up);
        assert_int_equal(lntb_link_enable(f->la, 0), 0);
        assert_int_equal(lntb_process_events(f->la), 1);
        assert_int_equal(sa.links, 2);
        assert_true(sa.up);
        /* The cable pulled: both ends see the link go, and come back. */
        memset(&sb, 0, sizeof(sb));
        fake_ntb_link(false);
        lntb_process_events(f->lb);
        assert_int_equal(sb.links, 2); /* up (enable), then down */
        assert_false(sb.up);
        fake_ntb_link(true);
        lntb_process_events(f->lb);
        assert_true(sb.up);
}

/* ---- memory for export ------------------------------------------------------------------------
 */

static bool zero(const void *p, size_t n)
{
        const uint8_t *b = p;
        for (size_t i = 0; i < n; i++)
                if (b[i])
                        return false;
        return true;
}

static void test_mem(void **state)
{
        struct fx *f = *state;
        struct ntbf_mem m1, m2, m3;
        assert_int_equal(lntb_mem_alloc(f->lb, 100, 0, &m1), 0);
        assert_int_equal(m1.size, 4096);
        assert_int_equal(lntb_mem_alloc(f->lb, 64 << 10, 64 << 10, &m2), 0);
        assert_int_equal(m2.bus_addr % (64 << 10), 0);
        assert_true(m2.bus_addr >= m1.bus_addr + m1.size);
        assert_true(zero(m1.addr, m1.size) && zero(m2.addr, m2.size));
        /* The descriptor maps the same memory, at the allocation's offset. */
        uint8_t *p =
            mmap(NULL, m2.size, PROT_READ | PROT_WRITE, MAP_SHARED, m2.fd, (off_t)m2.offset);
        assert_true(p != MAP_FAILED);
        memset(m2.addr, 0x5a, m2.size);
        assert_int_equal(p[0], 0x5a);
        assert_int_equal(p[m2.size - 1], 0x5a);
        munmap(p, m2.size);
        /* By bus address, inside a live allocation; not outside one. */
        void *q;
        assert_int_equal(lntb_mem_map(f->lb, m2.bus_addr + 4096, 8192, &q), 0);
        assert_int_equal(((uint8_t *)q)[0], 0x5a);
        assert_int_equal(lntb_mem_unmap(f->lb, q, 8192), 0);
        assert_int_equal(lntb_mem_unmap(f->lb, q, 8192), -EINVAL);
        assert_int_equal(lntb_mem_map(f->lb, m2.bus_addr + m2.size, 4096, &q), -EFAULT);
        assert_int_equal(lntb_mem_map(f->lb, m2.bus_addr + 4096, m2.size, &q), -EFAULT);
        /* Freed memory comes back zeroed to the next allocation. */
        uint64_t bus2 = m2.bus_addr;
        assert_int_equal(lntb_mem_free(f->lb, &m2), 0);
        assert_int_equal(m2.fd, -1);
        assert_int_equal(lntb_mem_alloc(f->lb, 64 << 10, 64 << 10, &m3), 0);
        assert_int_equal(m3.bus_addr, bus2);
        assert_true(zero(m3.addr, m3.size));
        /* Bad arguments, and more than a pool holds. */
        struct ntbf_mem x;
        assert_int_equal(lntb_mem_alloc(f->lb, 0, 0, &x), -EINVAL);
        assert_int_equal(lntb_mem_alloc(f->lb, 4096, 3000, &x), -EINVAL);
        assert_int_equal(lntb_mem_alloc(f->lb, 2 * MiB, 0, &x), -ENOMEM);
        assert_int_equal(lntb_mem_free(f->lb, &x), -EINVAL);
        /* A failed allocation of the module's buffer leaves nothing behind. */
        assert_int_equal(lntb_mem_alloc(f->la, 4096, 0, &x), 0);
        assert_int_equal(lntb_mem_free(f->la, &x), 0);
        lntb_mem_free(f->lb, &m1);
        lntb_mem_free(f->lb, &m3);
}

static void test_mem_buf_failure(void **state)
{
        struct fx *f = *state;
        struct ntbf_mem x, y;
        /* The module has no memory for either pool: nothing is left behind. */
        fake_ntb_fail(NTBFAB_IOC_BUF_ALLOC, ENOMEM, 2);
        assert_int_equal(lntb_mem_alloc(f->la, 4096, 0, &x), -ENOMEM);
        struct fake_counts c;
        fake_ntb_counts(0, &c);
        assert_int_equal(c.bufs, 0);
        /* None for the first pool: the second serves. */
        fake_ntb_fail(NTBFAB_IOC_BUF_ALLOC, ENOMEM, 1);
        assert_int_equal(lntb_mem_alloc(f->la, 4096, 0, &x), 0);
        fake_ntb_counts(0, &c);
        assert_int_equal(c.bufs, 1);
        assert_int_equal(lntb_mem_alloc(f->la, 4096, 0, &y), 0);
        assert_int_equal(y.bus_addr, x.bus_addr + 4096);
        assert_int_equal(lntb_mem_free(f->la, &x), 0);
        assert_int_equal(lntb_mem_free(f->la, &y), 0);
}

/* ---- translation and windows ---------------------------------------------------------------- */

static void test_xlat_window(void **state)
{
        struct fx *f = *state;
        struct ntbf_mem m;
        /* B's memory: the whole pool behind window 0 (1 MiB, aligned to it). */
        assert_int_equal(lntb_mem_alloc(f->lb, MiB, MiB, &m), 0);
        assert_int_equal(lntb_peer_xlat_set(f->lb, f->a, 0, m.bus_addr + 4096, MiB), -EINVAL);
        assert_int_equal(lntb_peer_xlat_set(f->lb, f->a, 0, m.bus_addr, MiB + 4096), -EINVAL);
        assert_int_equal(lntb_peer_xlat_set(f->lb, f->a, 9, m.bus_addr, MiB), -EINVAL);
        assert_int_equal(lntb_peer_xlat_set(f->lb, f->b, 0, m.bus_addr, MiB), -EINVAL);
        assert_int_equal(lntb_peer_xlat_set(f->lb, f->a, 0, 0x40000000, MiB), -EFAULT);
        assert_int_equal(fake_ntb_trans(1, 0, NULL), 0);
        assert_int_equal(lntb_peer_xlat_set(f->lb, f->a, 0, m.bus_addr, MiB), 0);
        uint64_t size;
        assert_int_equal(fake_ntb_trans(1, 0, &size), m.bus_addr);
        assert_int_equal(size, MiB);
        /* A's CPU writes through its window; the bytes are in B's memory. */
        uint8_t *w;
        assert_int_equal(lntb_map_window(f->la, 0, 64 << 10, 128 << 10, 0, (void **)&w), 0);
        memset(w, 0x77, 128 << 10);
        uint8_t *mb = m.addr;
        assert_int_equal(mb[64 << 10], 0x77);
        assert_int_equal(mb[(192 << 10) - 1], 0x77);
        assert_int_equal(mb[(64 << 10) - 1], 0);
        assert_int_equal(mb[192 << 10], 0);
        uint32_t data = 0x4c4e0001;
        assert_int_equal(lntb_window_write(f->la, 0, 0x100, &data, 4), 0);
        uint32_t got;
        memcpy(&got, mb + 0x100, 4);
        assert_int_equal(got, data);
        assert_int_equal(lntb_unmap_window(f->la, w, 128 << 10), 0);
        assert_int_equal(lntb_unmap_window(f->la, w, 128 << 10), -EINVAL);
        /* Bad window arguments. */
        void *p;
        assert_int_equal(lntb_map_window(f->la, 2, 0, 4096, 0, &p), -EINVAL);
        assert_int_equal(lntb_map_window(f->la, 0, 100, 4096, 0, &p), -EINVAL);
        assert_int_equal(lntb_map_window(f->la, 0, 0, 2 * MiB, 0, &p), -EINVAL);
        assert_int_equal(lntb_window_write(f->la, 0, MiB - 2, &data, 4), -EINVAL);
        /* Cleared: a new mapping reaches nothing (the fake reads all ones). */
        assert_int_equal(lntb_peer_xlat_clear(f->lb, f->a, 0), 0);
        assert_int_equal(fake_ntb_trans(1, 0, NULL), 0);
        assert_int_equal(lntb_map_window(f->la, 0, 0, 4096, NTBF_MAP_READONLY, &p), 0);
        assert_int_equal(((uint8_t *)p)[0], 0xff);
        assert_int_equal(lntb_unmap_window(f->la, p, 4096), 0);
        lntb_mem_free(f->lb, &m);
}

/* ---- doorbells, scratchpads, messages ------------------------------------------------------ */

static void test_doorbells(void **state)
{
        struct fx *f = *state;
        struct seen s;
        drain(f->lb, &s);
        assert_int_equal(lntb_peer_db_set(f->la, f->b, 0x2), 0);
        assert_true(readable(f->lb));
        assert_int_equal(lntb_process_events(f->lb), 1);
        assert_int_equal(s.dbs, 1);
        assert_int_equal(s.vector, 1);
        assert_int_equal(s.bits, 0x2);
        uint64_t bits;
        assert_int_equal(lntb_db_read(f->lb, &bits), 0);
        assert_int_equal(bits, 0x2);
        assert_int_equal(lntb_db_clear(f->lb, 0x2), 0);
        assert_int_equal(lntb_db_read(f->lb, &bits), 0);
        assert_int_equal(bits, 0);
        /* A masked bit is held back; the fake raises nothing when it is unmasked, so the
         * backend raises it. */
        memset(&s, 0, sizeof(s));
        assert_int_equal(lntb_db_set_mask(f->lb, 0x1), 0);
        assert_int_equal(lntb_peer_db_set(f->la, f->b, 0x1), 0);
        lntb_process_events(f->lb);
        assert_int_equal(s.dbs, 0);
        assert_int_equal(lntb_db_clear_mask(f->lb, 0x1), 0);
        assert_true(readable(f->lb));
        assert_int_equal(lntb_process_events(f->lb), 1);
        assert_int_equal(s.bits, 0x1);
        lntb_db_clear(f->lb, 0x1);
        /* Cleared while masked: nothing to raise. */
        memset(&s, 0, sizeof(s));
        lntb_db_set_mask(f->lb, 0x1);
        lntb_peer_db_set(f->la, f->b, 0x1);
        lntb_db_clear(f->lb, 0x1);
        lntb_db_clear_mask(f->lb, 0x1);
        lntb_process_events(f->lb);
        assert_int_equal(s.dbs, 0);
        /* Bits that do not exist, here or at the peer. */
        assert_int_equal(lntb_peer_db_set(f->la, f->b, 0x10), -EINVAL);
        assert_int_equal(lntb_db_clear(f->lb, 0x100), -EINVAL);
        assert_int_equal(lntb_peer_db_set(f->la, f->a, 0x1), -EINVAL);
}

static void test_spads(void **state)
{
        struct fx *f = *state;
        uint32_t v;
        assert_int_equal(lntb_peer_spad_write(f->la, f->b, 15, 0xcafe), 0);
        assert_int_equal(lntb_spad_read(f->lb, 15, &v), 0);
        assert_int_equal(v, 0xcafe);
        assert_int_equal(lntb_spad_write(f->lb, 3, 0xbeef), 0);
        assert_int_equal(lntb_peer_spad_read(f->la, f->b, 3, &v), 0);
        assert_int_equal(v, 0xbeef);
        assert_int_equal(lntb_spad_read(f->lb, 16, &v), -EINVAL);
        assert_int_equal(lntb_peer_spad_write(f->la, f->b, 16, 0), -EINVAL);
}

static void test_msgs(void **state)
{
        struct fx *f = *state;
        struct seen s;
        drain(f->lb, &s);
        assert_int_equal(lntb_peer_msg_write(f->la, f->b, 2, 0x1234), 0);
        assert_int_equal(lntb_process_events(f->lb), 1);
        assert_int_equal(s.msgs, 1);
        assert_int_equal(s.peer, f->a);
        assert_int_equal(s.midx, 2);
        assert_int_equal(s.value, 0x1234);
        /* Taken by the event: the register is free for the next one. */
        assert_int_equal(lntb_peer_msg_write(f->la, f->b, 2, 0x5678), 0);
        lntb_set_events(f->lb, &ev_nomsg, &s);
        assert_int_equal(lntb_peer_msg_write(f->la, f->b, 1, 0x9), 0);
        lntb_process_events(f->lb);
        uint32_t peer, v;
        assert_int_equal(lntb_msg_read(f->lb, 2, &peer, &v), 0);
        assert_int_equal(v, 0x5678);
        assert_int_equal(peer, f->a);
        assert_int_equal(lntb_msg_read(f->lb, 1, &peer, &v), 0);
        assert_int_equal(v, 0x9);
        assert_int_equal(lntb_msg_read(f->lb, 1, &peer, &v), -EAGAIN);
        assert_int_equal(lntb_msg_read(f->lb, 4, &peer, &v), -EINVAL);
        assert_int_equal(lntb_peer_msg_write(f->la, f->b, 4, 0), -EINVAL);
}

/* ---- the relay: a process that does not own the NTB ------------------------------------------ */

struct relay_to {
        struct lntb *owner;
        uint64_t client;
        unsigned calls;
};

static int relay_call(void *ctx, uint32_t adapter, const void *req, size_t reqlen, void *ans,
                      size_t anslen, size_t *got, int *fds, unsigned maxfds, unsigned *nfds)
{
        struct relay_to *to = ctx;
        to->calls++;
        assert_int_equal(adapter, to->owner->adapter);
        return lntb_serve(to->owner, to->client, req, reqlen, ans, anslen, got, fds, maxfds, nfds);
}

static void test_relay(void **state)
{
        struct fx *f = *state;
        struct relay_to to_b = {f->lb, 7, 0}, to_a = {f->la, 7, 0};
        struct ntbf_backend_relay rb = {relay_call, &to_b}, ra = {relay_call, &to_a};
        struct ntbf_backend_env eb = {f->t, NULL, f->t->adapters[f->b].node, &rb};
        struct ntbf_backend_env ea = {f->t, NULL, f->t->adapters[f->a].node, &ra};
        struct lntb_backend *bb, *ba;
        struct lntb *rlb, *rla;
        char why[512];
        assert_int_equal(lntb_open(&eb, f->sys, "linux-ntb", &bb, why, sizeof(why)), 0);
        assert_int_equal(lntb_open(&ea, f->sys, "linux-ntb", &ba, why, sizeof(why)), 0);
        assert_int_equal(lntb_probe(bb, f->b, &rlb, why, sizeof(why)), 0);
        assert_int_equal(lntb_probe(ba, f->a, &rla, why, sizeof(why)), 0);
        struct ntbf_caps c;
        assert_int_equal(lntb_caps(rlb, &c), 0);
        assert_true(c.flags & NTBF_CAP_MEM);
        /* Memory for export, from the owner's pool: the owner sees the same bytes. */
        struct ntbf_mem m;
        assert_int_equal(lntb_mem_alloc(rlb, 8192, 0, &m), 0);
        assert_int_equal(to_b.calls, 1);
        memset(m.addr, 0x3c, 8192);
        void *q;
        assert_int_equal(lntb_mem_map(f->lb, m.bus_addr, 8192, &q), 0);
        assert_int_equal(((uint8_t *)q)[8191], 0x3c);
        lntb_mem_unmap(f->lb, q, 8192);
        /* The owner's memory, mapped by bus address in the relayed process. */
        struct ntbf_mem om;
        assert_int_equal(lntb_mem_alloc(f->lb, 4096, 0, &om), 0);
        ((uint8_t *)om.addr)[5] = 0x42;
        assert_int_equal(lntb_mem_map(rlb, om.bus_addr, 4096, &q), 0);
        assert_int_equal(((uint8_t *)q)[5], 0x42);
        assert_int_equal(lntb_mem_unmap(rlb, q, 4096), 0);
        assert_int_equal(lntb_mem_map(rlb, om.bus_addr + 4096, 4096, &q), -EFAULT);
        /* A window through the owner's descriptor: A's relayed process writes into B. */
        assert_int_equal(lntb_peer_xlat_set(f->lb, f->a, 0, m.bus_addr & ~(MiB - 1), MiB), 0);
        uint8_t *w;
        uint64_t off = m.bus_addr & (MiB - 1);
        assert_int_equal(lntb_map_window(rla, 0, off, 4096, 0, (void **)&w), 0);
        w[1] = 0x99;
        assert_int_equal(((uint8_t *)m.addr)[1], 0x99);
        assert_int_equal(lntb_unmap_window(rla, w, 4096), 0);
        /* An interrupt vector of the relayed process: a page of the owner's pool. */
        struct ntbf_irq irq;
        assert_int_equal(lntb_irq_alloc(rlb, &irq), 0);
        assert_int_equal(irq.data & 0xffff0000, LNTB_IRQ_DATA);
        assert_int_equal(
            lntb_window_write(rla, 0, irq.addr - (m.bus_addr & ~(MiB - 1)), &irq.data, 4), 0);
        struct pollfd pf = {irq.fd, POLLIN, 0};
        assert_int_equal(poll(&pf, 1, 5000), 1);
        assert_int_equal(lntb_irq_free(rlb, &irq), 0);
        /* What changes the NTB is the owner's. */
        assert_int_equal(lntb_peer_xlat_set(rlb, f->a, 0, m.bus_addr & ~(MiB - 1), MiB), -EPERM);
        assert_int_equal(lntb_peer_db_set(rla, f->b, 1), -EPERM);
        assert_int_equal(lntb_spad_write(rla, 0, 1), -EPERM);
        assert_int_equal(lntb_link_disable(rla, 0), -EPERM);
        /* The relayed process goes away: its memory goes back to the pool. */
        uint64_t bus = m.bus_addr;
        lntb_release(rlb);
        lntb_release(rla);
        lntb_close(bb);
        lntb_close(ba);
        assert_int_equal(lntb_mem_map(f->lb, bus, 4096, &q), 0);
        lntb_mem_unmap(f->lb, q, 4096);
        lntb_client_gone(f->lb, 7);
        assert_int_equal(lntb_mem_map(f->lb, bus, 4096, &q), -EFAULT);
        /* Malformed requests. */
        struct lntb_relay_req bad = {0x1234, LNTB_RELAY_MEM_ALLOC, 4096, 0};
        struct lntb_relay_ans ans;
        size_t got;
        int fds[1];
        unsigned nfds;
        assert_int_equal(
            lntb_serve(f->lb, 7, &bad, sizeof(bad), &ans, sizeof(ans), &got, fds, 1, &nfds),
            NTBF_EPROTO);
        bad.magic = LNTB_RELAY_MAGIC;
        assert_int_equal(
            lntb_serve(f->lb, 7, &bad, sizeof(bad) - 1, &ans, sizeof(ans), &got, fds, 1, &nfds),
            -EINVAL);
        bad.op = 99;
        assert_int_equal(
            lntb_serve(f->lb, 7, &bad, sizeof(bad), &ans, sizeof(ans), &got, fds, 1, &nfds),
            -EINVAL);
        lntb_peer_xlat_clear(f->lb, f->a, 0);
        lntb_mem_free(f->lb, &om);
}

/* A local PCI device with one 64 KiB memory BAR at 0xfe000000, in the fake sysfs. */
static void fake_bar(const char *root, char *file, size_t len)
{
        char d[512];
        snprintf(d, sizeof(d), "%s/sys/bus/pci/devices/0000:00:05.0", root);
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", d);
        assert_int_equal(system(cmd), 0);
        char p[600];
        snprintf(p, sizeof(p), "%s/resource", d);
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fprintf(f, "0x00000000fe000000 0x00000000fe00ffff 0x0000000000040200\n");
        for (int i = 1; i < 7; i++)
                fprintf(f, "0x0000000000000000 0x0000000000000000 0x0000000000000000\n");
        fclose(f);
        snprintf(file, len, "%s/resource0", d);
        int fd = open(file, O_RDWR | O_CREAT, 0600);
        assert_true(fd >= 0 && ftruncate(fd, 64 << 10) == 0);
        close(fd);
}

/* host_map, host_bus and irq_trigger: this host's memory and vectors through the vtable. */
static void test_host(void **state)
{
        struct fx *f = *state;
        struct ntbf_mem m;
        assert_int_equal(lntb_mem_alloc(f->lb, 8192, 0, &m), 0);
        /* Memory for export by its bus address: the same bytes, and host_bus names it. */
        void *q;
        assert_int_equal(lntb_host_map(f->lb, m.bus_addr + 64, 128, &q), 0);
        memset(q, 0x6d, 128);
        assert_int_equal(((uint8_t *)m.addr)[64], 0x6d);
        assert_int_equal(((uint8_t *)m.addr)[63], 0);
        uint64_t bus = 0;
        assert_int_equal(lntb_host_bus(f->lb, (uint8_t *)q + 8, 16, &bus), 0);
        assert_int_equal(bus, m.bus_addr + 72);
        assert_int_equal(lntb_host_bus(f->lb, (uint8_t *)m.addr + 4096, 4096, &bus), 0);
        assert_int_equal(bus, m.bus_addr + 4096);
        assert_int_equal(lntb_host_bus(f->lb, (uint8_t *)m.addr + 4096, 8192, &bus), -EFAULT);
        char heap[64];
        assert_int_equal(lntb_host_bus(f->lb, heap, sizeof(heap), &bus), -EFAULT);
        assert_int_equal(lntb_host_unmap(f->lb, q, 128), 0);
        assert_int_equal(lntb_host_unmap(f->lb, q, 128), -EINVAL);
        /* A local device's BAR through sysfs; other RAM is out of reach. */
        char file[700];
        fake_bar(f->sys->root, file, sizeof(file));
        assert_int_equal(lntb_host_map(f->lb, 0xfe000100, 256, &q), 0);
        memcpy(q, "bar!", 4);
        char got[4] = "";
        int fd = open(file, O_RDONLY);
        assert_true(fd >= 0 && pread(fd, got, 4, 0x100) == 4);
        close(fd);
        assert_memory_equal(got, "bar!", 4);
        assert_int_equal(lntb_host_bus(f->lb, q, 256, &bus), 0);
        assert_int_equal(bus, 0xfe000100);
        assert_int_equal(lntb_host_unmap(f->lb, q, 256), 0);
        assert_int_equal(lntb_host_map(f->lb, 0xfe00ff00, 512, &q), -EFAULT); /* past the BAR */
        assert_int_equal(lntb_host_map(f->lb, 0x10000, 4096, &q), -EFAULT);   /* plain RAM */
        /* A local interrupt: the vector's eventfd, and only for a vector's address. */
        struct ntbf_irq irq;
        assert_int_equal(lntb_irq_alloc(f->lb, &irq), 0);
        assert_int_equal(lntb_irq_trigger(f->lb, irq.addr, irq.data), 0);
        struct pollfd pf = {irq.fd, POLLIN, 0};
        assert_int_equal(poll(&pf, 1, 5000), 1);
        assert_int_equal(lntb_irq_trigger(f->lb, irq.addr + 2, irq.data), -EINVAL);
        assert_int_equal(lntb_irq_trigger(f->lb, 0x10000, irq.data), -EINVAL);
        assert_int_equal(lntb_irq_free(f->lb, &irq), 0);
        lntb_mem_free(f->lb, &m);
}

/* Config space of a local device that is not VFIO's: its sysfs file (the fake's root). */
static void test_cfg(void **state)
{
        struct fx *f = *state;
        char d[512], p[600], cmd[600];
        snprintf(d, sizeof(d), "%s/sys/bus/pci/devices/0000:00:05.0", f->sys->root);
        snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", d);
        assert_int_equal(system(cmd), 0);
        snprintf(p, sizeof(p), "%s/config", d);
        uint8_t cfg[256] = {0x36, 0x1b, 0x10, 0x00, 0x00, 0x04};
        int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
        assert_true(fd >= 0 && write(fd, cfg, sizeof(cfg)) == (ssize_t)sizeof(cfg));
        close(fd);
        uint32_t dev = 0, v = 0;
        while (strcmp(f->t->devices[dev].name, "nvme0"))
                dev++;
        struct ntbf_backend *b = (struct ntbf_backend *)(void *)f->be;
        const struct ntbf_backend_ops *o = &ntbf__linux_ntb_ops;
        assert_int_equal(o->cfg_read(b, dev, 0, 0, 4, &v), 0);
        assert_int_equal(v, 0x00101b36);
        /* Memory Space and Bus Master on, Interrupt Disable kept: the file has it. */
        assert_int_equal(o->cfg_write(b, dev, 0, 4, 2, 0x0406), 0);
        fd = open(p, O_RDONLY);
        assert_true(fd >= 0 && pread(fd, cfg, 2, 4) == 2);
        close(fd);
        assert_int_equal(cfg[0] | cfg[1] << 8, 0x0406);
        assert_int_equal(o->cfg_read(b, dev, 0, 5, 1, &v), 0);
        assert_int_equal(v, 0x04);
        /* Bad sizes and offsets, no value, another function, a device of no such index. */
        assert_int_equal(o->cfg_read(b, dev, 0, 0, 3, &v), -EINVAL);
        assert_int_equal(o->cfg_read(b, dev, 0, 2, 4, &v), -EINVAL);
        assert_int_equal(o->cfg_write(b, dev, 0, 4096, 1, 0), -EINVAL);
        assert_int_equal(o->cfg_read(b, dev, 0, 0, 4, NULL), -EINVAL);
        assert_int_equal(o->cfg_read(b, dev, 1, 0, 4, &v), -ENODEV);
        assert_int_equal(o->cfg_read(b, f->t->ndevices, 0, 0, 4, &v), -ENODEV);
        /* Past the file's end: a short read. */
        assert_int_equal(o->cfg_read(b, dev, 0, 256, 4, &v), -EIO);
        /* Node b's daemon asking: another host's device (the helper under the vtable). */
        char dir[600];
        snprintf(dir, sizeof(dir), "%s/sys/bus/pci/devices", f->sys->root);
        uint32_t nb = ntbf_topo_find_node(f->t, "b"), na = ntbf_topo_find_node(f->t, "a");
        assert_int_equal(ntbf__pci_cfg(dir, f->t, nb, dev, 0, false, 0, 4, &v), -ENODEV);
        assert_int_equal(ntbf__pci_cfg(dir, f->t, na, dev, 0, false, 0, 4, &v), 0);
        /* No such function in sysfs. */
        assert_int_equal(unlink(p), 0);
        assert_int_equal(o->cfg_read(b, dev, 0, 0, 4, &v), -ENODEV);

        /* Where the kernel placed its BARs: memory BARs from the resource file, an I/O BAR
         * and empty lines as none. */
        uint64_t addr[6], size[6];
        assert_int_equal(o->dev_bars(b, dev, 0, addr, size), -ENODEV);
        snprintf(p, sizeof(p), "%s/resource", d);
        FILE *rf = fopen(p, "w");
        assert_non_null(rf);
        fprintf(rf, "0x00000000febd0000 0x00000000febd3fff 0x0000000000140204\n"
                    "0x000000000000c000 0x000000000000c07f 0x0000000000040101\n"
                    "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
                    "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
                    "0x0000008000000000 0x00000080000fffff 0x000000000014220c\n"
                    "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
                    "0x00000000fe000000 0x00000000fe03ffff 0x0000000000046200\n");
        fclose(rf);
        assert_int_equal(o->dev_bars(b, dev, 0, addr, size), 0);
        assert_int_equal(addr[0], 0xfebd0000);
        assert_int_equal(size[0], 0x4000);
        assert_int_equal(addr[1], 0); /* I/O */
        assert_int_equal(size[1], 0);
        assert_int_equal(addr[4], UINT64_C(0x8000000000));
        assert_int_equal(size[4], 0x100000);
        assert_int_equal(addr[2] | addr[3] | addr[5] | size[2] | size[3] | size[5], 0);
        assert_int_equal(ntbf__pci_bars(dir, f->t, nb, dev, 0, addr, size), -ENODEV);
        assert_int_equal(o->dev_bars(b, dev, 1, addr, size), -ENODEV);
        /* The BAR map of hostmem finds the same BAR by an address inside it. */
        void *m = NULL;
        assert_int_equal(ntbf__pci_bar_map(f->sys->root, 0xfebd2000, 0x2001, &m), -EFAULT);
        /* found (its resource0 file is then opened, which the fake tree has not) */
        assert_int_equal(ntbf__pci_bar_map(f->sys->root, 0xfebd2000, 0x2000, &m), -ENOENT);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_open_says_why),
            cmocka_unit_test_setup_teardown(test_caps, setup, teardown),
            cmocka_unit_test_setup_teardown(test_link, setup, teardown),
            cmocka_unit_test_setup_teardown(test_mem, setup, teardown),
            cmocka_unit_test_setup_teardown(test_mem_buf_failure, setup, teardown),
            cmocka_unit_test_setup_teardown(test_xlat_window, setup, teardown),
            cmocka_unit_test_setup_teardown(test_doorbells, setup, teardown),
            cmocka_unit_test_setup_teardown(test_spads, setup, teardown),
            cmocka_unit_test_setup_teardown(test_msgs, setup, teardown),
            cmocka_unit_test_setup_teardown(test_relay, setup, teardown),
            cmocka_unit_test_setup_teardown(test_host, setup, teardown),
            cmocka_unit_test_setup_teardown(test_cfg, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
