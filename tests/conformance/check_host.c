/* tests/conformance/check_host.c: this host's memory and interrupts as a process of the host
 * reaches them: host_map, host_bus and irq_trigger, the calls libsisci and the device API make
 * instead of reaching into a backend. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"

#define OFF UINT64_C(0x140) /* inside the first page: host_map takes any byte address */
#define LEN UINT64_C(0x200)

/* B's memory behind A's first slot, and a way to read it from A (the peer's view). */
static int peer_view(struct cf_run *r, struct cf_target *tg, struct cf_win *w)
{
        struct cf_pair *p = r->p;
        uint32_t slot = cf_slot(p->a, 0);
        if (slot == NTBF_NONE)
                CF_SKIP(r, "%s: no slot the suite may program", p->a->name);
        if (!(p->b->caps.flags & NTBF_CAP_MEM))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_MEM", p->b->name);
        if (cf_xsize(p->a, slot) < 4096)
                CF_SKIP(r, "%s: slot %u translates less than a page", p->a->name, slot);
        CF_TRY(cf_target(r, p, slot, 1, tg));
        return cf_win_open(r, p, slot, 1, w);
}

/* What A reads at offset off of B's block: 8 bytes. */
static int peer_read(struct cf_run *r, struct cf_win *w, const struct cf_target *tg, uint64_t off,
                     uint64_t *v)
{
        int st = 0;
        CF_TRY(cf_win_read(r, w, tg->addr + off, v, &st));
        CF_OK(r, st, "%s: reading offset %#llx of %s's block through slot %u (%s)", r->p->a->name,
              (unsigned long long)off, r->p->b->name, tg->slot, cf_win_how(w));
        return 0;
}

/*
 * host_map maps this host's memory by its bus address: bytes stored through the mapping are
 * what a peer reads through its slot onto that bus address, and the peer's stores show in
 * the mapping. A range that is no RAM or BAR of the host is refused (-EFAULT).
 */
int cf_check_host_map(struct cf_run *r)
{
        struct cf_ad *b = r->p->b;
        const struct ntbf_backend_ops *o = r->cx->ops;
        if (!o->host_map)
                CF_SKIP(r, "the %s backend has no host_map", o->name);
        struct cf_target tg;
        struct cf_win w;
        CF_TRY(peer_view(r, &tg, &w));
        memset(tg.mem.addr, 0, 4096);
        void *q = NULL;
        CF_OK(r, o->host_map(b->h, tg.mem.bus_addr + OFF, LEN, &q),
              "%s: host_map(%#llx, %llu bytes) of its own memory for export", b->name,
              (unsigned long long)(tg.mem.bus_addr + OFF), (unsigned long long)LEN);
        CF_TRUE(r, q != NULL, "%s: host_map returned a NULL address", b->name);
        cf_undo_host_map(r, b, q, LEN);
        uint8_t *m = q;
        uint64_t v0 = cf_pattern(tg.slot, 70), v1 = cf_pattern(tg.slot, 71), got = 0;
        cf_store64(m, v0);
        cf_store64(m + LEN - 8, v1);
        CF_TRY(peer_read(r, &w, &tg, OFF, &got));
        CF_EQ(r, got, v0,
              "%s: what %s reads at bus address %#llx after a store through %s's host_map of it",
              r->p->a->name, b->name, (unsigned long long)(tg.mem.bus_addr + OFF), b->name);
        CF_TRY(peer_read(r, &w, &tg, OFF + LEN - 8, &got));
        CF_EQ(r, got, v1, "%s: the last 8 bytes of %s's host_map, read at %#llx", r->p->a->name,
              b->name, (unsigned long long)(tg.mem.bus_addr + OFF + LEN - 8));
        CF_EQ(r, cf_load64(tg.mem.addr + OFF), v0,
              "%s: its own mapping of the memory (mem_alloc's) after a store through host_map",
              b->name);
        /* The other way: a peer's store through the slot shows in the mapping. */
        uint64_t v2 = cf_pattern(tg.slot, 72);
        int st = 0;
        CF_TRY(cf_win_write(r, &w, tg.addr + OFF + 8, v2, &st));
        CF_OK(r, st, "%s: writing through slot %u", r->p->a->name, tg.slot);
        bool seen = false;
        for (double t0 = cf_now_ms(); !seen && cf_now_ms() - t0 < r->cx->timeout_ms;
             cf_sleep_us(100))
                seen = cf_load64(m + 8) == v2;
        CF_TRUE(r, seen,
                "%s: a store of %s through slot %u did not show in host_map's mapping of %#llx "
                "within %u ms (it holds %#llx)",
                b->name, r->p->a->name, tg.slot, (unsigned long long)(tg.mem.bus_addr + OFF + 8),
                r->cx->timeout_ms, (unsigned long long)cf_load64(m + 8));
        CF_OK(r, cf_host_unmap(r, b, q, LEN), "%s: host_unmap", b->name);
        /* The host's interrupt address range is neither RAM nor a BAR. */
        void *bad = NULL;
        int rc = o->host_map(b->h, NTBF_MSI_BASE, 4096, &bad);
        if (!rc)
                o->host_unmap(b->h, bad, 4096);
        CF_TRUE(r, rc < 0,
                "%s: host_map of its interrupt range at %#llx succeeded (it is no RAM and no "
                "BAR: expected a refusal, -EFAULT)",
                b->name, (unsigned long long)NTBF_MSI_BASE);
        return 0;
}

/*
 * host_bus names the bus address of memory the process holds: the one mem_alloc reported for
 * its memory, the one host_map mapped, and the address at which a peer reads what was stored
 * there. Process memory the backend does not map (the heap) is -EFAULT.
 */
int cf_check_host_bus(struct cf_run *r)
{
        struct cf_ad *b = r->p->b;
        const struct ntbf_backend_ops *o = r->cx->ops;
        if (!o->host_bus)
                CF_SKIP(r, "the %s backend has no host_bus", o->name);
        struct cf_target tg;
        struct cf_win w;
        CF_TRY(peer_view(r, &tg, &w));
        uint64_t bus = 0;
        CF_OK(r, o->host_bus(b->h, tg.mem.addr + OFF, 8, &bus), "%s: host_bus of mem_alloc's %p",
              b->name, (void *)(tg.mem.addr + OFF));
        CF_EQ(r, bus, tg.mem.bus_addr + OFF,
              "%s: host_bus of byte %#llx of memory mem_alloc placed at bus address %#llx", b->name,
              (unsigned long long)OFF, (unsigned long long)tg.mem.bus_addr);
        /* The peer reads, at what host_bus said, what was stored there. */
        uint64_t v = cf_pattern(tg.slot, 73), got = 0;
        cf_store64(tg.mem.addr + OFF, v);
        CF_TRY(peer_read(r, &w, &tg, bus - tg.far, &got));
        CF_EQ(r, got, v, "%s: what %s reads at the bus address host_bus gave (%#llx)",
              r->p->a->name, b->name, (unsigned long long)bus);
        if (o->host_map) {
                void *q = NULL;
                CF_OK(r, o->host_map(b->h, tg.mem.bus_addr + 4096 - LEN, LEN, &q),
                      "%s: host_map(%#llx, %llu bytes)", b->name,
                      (unsigned long long)(tg.mem.bus_addr + 4096 - LEN), (unsigned long long)LEN);
                cf_undo_host_map(r, b, q, LEN);
                CF_OK(r, o->host_bus(b->h, (uint8_t *)q + 8, LEN - 8, &bus),
                      "%s: host_bus of a host_map mapping", b->name);
                CF_EQ(r, bus, tg.mem.bus_addr + 4096 - LEN + 8,
                      "%s: host_bus of byte 8 of host_map's mapping of %#llx", b->name,
                      (unsigned long long)(tg.mem.bus_addr + 4096 - LEN));
        }
        uint8_t *heap = malloc(4096);
        CF_TRUE(r, heap != NULL, "out of memory");
        int rc = o->host_bus(b->h, heap, 64, &bus);
        free(heap);
        CF_RC(r, -EFAULT, rc, "%s: host_bus of malloc'd memory", b->name);
        return 0;
}

/*
 * irq_trigger raises a vector of this host as a local MSI write would: that vector's eventfd
 * is signalled and no other. An address that is no vector is refused.
 */
int cf_check_irq_trigger(struct cf_run *r)
{
        struct cf_ad *b = r->ad;
        struct cf_ctx *cx = r->cx;
        const struct ntbf_backend_ops *o = cx->ops;
        if (!(b->caps.flags & NTBF_CAP_IRQ))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_IRQ", b->name);
        if (!o->irq_trigger)
                CF_SKIP(r, "the %s backend has no irq_trigger", o->name);
        struct ntbf_irq v[2];
        CF_TRY(cf_irq_two(r, b, v));
        for (int i = 0; i < 2; i++) {
                CF_OK(r, o->irq_trigger(b->h, v[i].addr, v[i].data),
                      "%s: irq_trigger(%#llx, %#x) of vector %d", b->name,
                      (unsigned long long)v[i].addr, v[i].data, i + 1);
                CF_TRY(cf_irq_expect(r, b, v, i, "irq_trigger"));
        }
        /* The host's NTB window holds no vector. */
        uint64_t bad = b->caps.windows[0].base;
        int rc = o->irq_trigger(b->h, bad, v[0].data);
        CF_TRUE(r, rc < 0, "%s: irq_trigger at %#llx, its window, returned %d (no vector is there)",
                b->name, (unsigned long long)bad, rc);
        CF_TRUE(r, !cf_poll_readable(v[0].fd, cx->quiet_ms) && !cf_poll_readable(v[1].fd, 0),
                "%s: a refused irq_trigger signalled a vector", b->name);
        return 0;
}
