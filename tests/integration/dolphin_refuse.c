/* tests/integration/dolphin_refuse.c: what the dolphin backend refuses, and that a refusal
 * leaves nothing behind (dolphin.sh refuse). */
/*
 * Usage: dolphin_refuse CONFIG COUNTS
 *
 * CONFIG is tests/conformance/dolphin.yaml moved to the test's ports (nodes a and b, one
 * adapter each, cabled); the library is tests/integration/dolphin_shim.c in front of ntbfab's
 * libsisci, which writes each node's live segments and connections to COUNTS.<node>. The
 * program opens the backend as the adapters' owner, programs slot 0 of a's window onto b's
 * memory, checks that a DMA through it works, then asks for what SISCI cannot do or what
 * must fail: each call must return its error and leave both nodes' segments and connections
 * as they were. A DMA after the refusals must still work, and after the release nothing of
 * the process is left on either node.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ntbfab/backend.h"
#include "ntbfab/config.h"
#include "ntbfab/error.h"
#include "ntbfab/topology.h"

#define KiB 1024u

static const struct ntbf_backend_ops *o;
static const char *counts_base;
static int failures;

static void say(bool ok, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        printf("%s: ", ok ? "ok" : "FAIL");
        vprintf(fmt, ap);
        printf("\n");
        va_end(ap);
        failures += !ok;
}

/* "segments N connections M" of node n (what the shim last wrote). */
static void counts(const char *n, long *segs, long *conns)
{
        char p[4096];
        snprintf(p, sizeof(p), "%s.%s", counts_base, n);
        *segs = *conns = -1;
        FILE *f = fopen(p, "r");
        if (!f)
                return;
        if (fscanf(f, "segments %ld connections %ld", segs, conns) != 2)
                *segs = *conns = -1;
        fclose(f);
}

struct snap {
        long as, ac, bs, bc;
};

static struct snap snap(void)
{
        struct snap s;
        counts("a", &s.as, &s.ac);
        counts("b", &s.bs, &s.bc);
        return s;
}

/* A refused call: it returned want, and neither node's segments or connections changed. */
static void refused(const char *what, int got, int want, struct snap before)
{
        struct snap now = snap();
        char g[64], w[64];
        snprintf(g, sizeof(g), "%d (%s)", got, ntbf_strerror(got));
        snprintf(w, sizeof(w), "%d (%s)", want, ntbf_strerror(want));
        say(got == want, "%s: returned %s, expected %s", what, g, w);
        say(!memcmp(&now, &before, sizeof(now)),
            "%s: left a: %ld segments %ld connections, b: %ld segments %ld connections "
            "(before: a %ld %ld, b %ld %ld)",
            what, now.as, now.ac, now.bs, now.bc, before.as, before.ac, before.bs, before.bc);
}

/* One DMA on channel 0 of h, waited for; its status. */
static int dma(struct ntbf_adapter_h *h, uint64_t src, uint64_t dst, uint64_t len, uint64_t cookie)
{
        int r = o->dma_submit(h, 0, src, dst, len, cookie);
        if (r)
                return r;
        for (int i = 0; i < 100000; i++) {
                uint64_t c;
                int st;
                int n = o->dma_poll(h, 0, &c, &st, 1);
                if (n < 0)
                        return n;
                if (n == 1)
                        return c == cookie ? st : -EPROTO;
                struct timespec ts = {0, 100000};
                nanosleep(&ts, NULL);
        }
        return -ETIMEDOUT;
}

int main(int argc, char **argv)
{
        if (argc != 3) {
                fprintf(stderr, "usage: dolphin_refuse CONFIG COUNTS\n");
                return 2;
        }
        counts_base = argv[2];
        struct ntbf_topo *t = NULL;
        struct ntbf_diags dg;
        ntbf_diags_init(&dg);
        int r = ntbf_config_load(argv[1], &t, &dg);
        ntbf_diags_print(&dg, stderr);
        ntbf_diags_free(&dg);
        char why[512] = "";
        if (r || !(o = ntbf_backend_open_ops("dolphin", why, sizeof(why)))) {
                fprintf(stderr, "dolphin_refuse: cannot load %s or the backend: %s\n", argv[1],
                        why);
                return 1;
        }
        uint32_t na = ntbf_topo_find_node(t, "a"), nb = ntbf_topo_find_node(t, "b");
        uint32_t aa = ntbf_topo_find_adapter(t, na, "ntb0"),
                 ab = ntbf_topo_find_adapter(t, nb, "ntb0");
        struct ntbf_backend_env env = {t, NULL, NTBF_NONE, NULL};
        struct ntbf_backend *b = NULL;
        struct ntbf_adapter_h *ha = NULL, *hb = NULL, *hb2 = NULL;
        if ((r = o->open(&env, &b, why, sizeof(why))) || (r = o->probe(b, aa, &ha)) ||
            (r = o->probe(b, ab, &hb)) || (r = o->probe(b, ab, &hb2))) {
                fprintf(stderr, "dolphin_refuse: open or probe: %s %s\n", ntbf_strerror(r), why);
                return 1;
        }
        struct ntbf_caps ca;
        o->caps(ha, &ca);
        const struct ntbf_window *W = &ca.windows[0];
        struct ntbf_mem ma, mb;
        if (o->mem_alloc(ha, 64 * KiB, 4096, &ma) || o->mem_alloc(hb, 64 * KiB, 4096, &mb)) {
                fprintf(stderr, "dolphin_refuse: mem_alloc failed\n");
                return 1;
        }
        for (uint32_t i = 0; i < 64 * KiB; i++)
                ((uint8_t *)mb.addr)[i] = (uint8_t)(i * 7 + 1);
        memset(ma.addr, 0, 64 * KiB);
        r = o->peer_xlat_set(hb, aa, W->first_slot, mb.bus_addr, 64 * KiB);
        say(!r, "b programs slot %u of a's window onto its memory (%s)", W->first_slot,
            ntbf_strerror(r));
        /* A DMA through the slot: the queue, the connection and the slot work. */
        r = dma(ha, W->base, ma.bus_addr, 4 * KiB, 1);
        say(!r && !memcmp(ma.addr, mb.addr, 4 * KiB),
            "DMA of 4 KiB from the window (b's memory) into a's memory: %s, data %s",
            ntbf_strerror(r), memcmp(ma.addr, mb.addr, 4 * KiB) ? "differs" : "arrived");
        struct snap s0 = snap();
        say(s0.as >= 0 && s0.bs >= 1, "counts: a %ld segments %ld connections, b %ld segments",
            s0.as, s0.ac, s0.bs);

        /* Window to window: SISCI moves data between a local segment and a remote one. */
        refused("DMA window to window (slot 0 to slot 0)",
                o->dma_submit(ha, 0, W->base, W->base + 8 * KiB, 4 * KiB, 2), NTBF_EUNSUPPORTED,
                s0);
        refused("DMA window to window (slot 0 to slot 1)",
                o->dma_submit(ha, 0, W->base, W->base + W->slot_size, 4 * KiB, 3),
                NTBF_EUNSUPPORTED, s0);
        uint64_t c;
        int st;
        say(o->dma_poll(ha, 0, &c, &st, 1) == 0, "the refused transfers queued nothing");
        /* Memory of a's host that SISCI makes no segment of (no RAM there). */
        uint64_t nowhere = UINT64_C(1) << 40;
        refused("DMA from memory that is not the host's into the window",
                o->dma_submit(ha, 0, nowhere, W->base, 4 * KiB, 4), -EFAULT, s0);
        /* One programmer per slot: another handle of b finds the slot's segment taken. */
        refused("a second programmer of slot 0",
                o->peer_xlat_set(hb2, aa, W->first_slot, mb.bus_addr, 64 * KiB), -EBUSY, s0);
        refused("a slot onto memory that is not the host's",
                o->peer_xlat_set(hb, aa, W->first_slot + 1, nowhere, 64 * KiB), NTBF_EUNREACHABLE,
                s0);
        refused("irq_trigger of a word that is no interrupt vector",
                o->irq_trigger(hb, mb.bus_addr + 128, 1), -EINVAL, s0);
        uint32_t v = 0x12345678;
        refused("window_write onto an unprogrammed slot",
                o->window_write(ha, 0, W->slot_size * 2, &v, sizeof(v)), NTBF_EUNPROGRAMMED, s0);
        /* What SISCI cannot express is not in the vtable: the core says unsupported. */
        say(!o->xlat_set && !o->mcast_join && !o->rid_add && !o->db_read && !o->link_enable &&
                !(ca.flags & (NTBF_CAP_MCAST | NTBF_CAP_XLAT_OUTBOUND | NTBF_CAP_LINK_CTRL)),
            "no outbound translation, multicast, requester IDs, doorbells or link control in "
            "the vtable or the capabilities");

        /* After the refusals: a DMA into the window still works, and the slot still leads to
         * b's memory. */
        for (uint32_t i = 0; i < 4 * KiB; i++)
                ((uint8_t *)ma.addr)[i] = (uint8_t)(i ^ 0x5a);
        r = dma(ha, ma.bus_addr, W->base + 16 * KiB, 4 * KiB, 5);
        say(!r && !memcmp((uint8_t *)mb.addr + 16 * KiB, ma.addr, 4 * KiB),
            "DMA of 4 KiB into the window after the refusals: %s, data %s", ntbf_strerror(r),
            memcmp((uint8_t *)mb.addr + 16 * KiB, ma.addr, 4 * KiB) ? "differs" : "arrived");

        o->peer_xlat_clear(hb, aa, W->first_slot);
        o->mem_free(ha, &ma);
        o->mem_free(hb, &mb);
        o->release(hb2);
        o->release(hb);
        o->release(ha);
        struct snap end = snap();
        say(end.as == 0 && end.ac == 0 && end.bs == 0 && end.bc == 0,
            "after the release: a %ld segments %ld connections, b %ld segments %ld connections",
            end.as, end.ac, end.bs, end.bc);
        o->close(b);
        ntbf_topo_free(t);
        printf("%s\n", failures ? "dolphin refusals: FAILED" : "dolphin refusals: all as expected");
        return failures ? 1 : 0;
}
