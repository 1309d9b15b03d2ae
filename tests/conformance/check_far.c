/* tests/conformance/check_far.c: what happens on the far side: its IOMMU, interrupts, multicast. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "ntbfab/error.h"
#include "ntbfab/units.h"
#include "checks.h"

/* ---- IOMMU --------------------------------------------------------------------------------------
 */

/* One access to the IOVA behind A's first slot at offset off: by transaction, else by a
 * fresh map. */
static int iommu_access(struct cf_run *r, uint64_t off, uint64_t v, bool expect_ok,
                        const char *when)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a;
        uint32_t s0 = cf_slot(a, 0);
        uint64_t at = cf_slot_addr(a, s0) + off;
        int st;
        if (cf_tx_mode(r->cx, a, NULL) != CF_TX_NONE) {
                CF_TRY(cf_tx(r, a, 0, true, at, &v, 8, &st));
                if (expect_ok)
                        CF_OK(r, st, "write to the IOVA %s", when);
                else
                        CF_TRUE(r, st != 0, "a write to the IOVA %s succeeded", when);
                if (!expect_ok && r->cx->sim && !r->cx->dma_only)
                        CF_RC(r, NTBF_EIOMMU_FAULT, st, "status of a write to the IOVA %s", when);
                return 0;
        }
        /* A CPU mapping resolves translations when it is made (docs/sim.md): map afresh. */
        struct cf_win w;
        CF_TRY(cf_win_open(r, p, s0, 1, &w));
        if (!expect_ok)
                CF_TRY(cf_win_expect_dropped(r, &w, at, when));
        return cf_win_write(r, &w, at, v, &st);
}

int cf_check_iommu(struct cf_run *r)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        const struct ntbf_backend_ops *o = r->cx->ops;
        if (!(b->caps.flags & NTBF_CAP_IOMMU))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_IOMMU", b->name);
        bool inbound = false;
        CF_TRY(cf_slot_how(r, p, &inbound));
        uint32_t s0 = cf_slot(a, 0);
        uint64_t xs = cf_xsize(a, s0), align = cf_xalign(a, s0, xs);
        uint64_t iova = cf_free_iova(r->cx->t, b->node, align);
        CF_TRUE(r, iova != UINT64_MAX, "no free IOVA in %s's address map", b->name);
        struct ntbf_mem m;
        CF_TRY(cf_mem(r, b, 4096, 4096, &m));
        struct ntbf_xlat x = {b->node, b->idx, iova, NTBF_NONE, xs};
        CF_TRY(cf_slot_set(r, p, inbound, s0, &x));
        const uint64_t off = 0x100;
        bool counted = cf_tx_mode(r->cx, a, NULL) != CF_TX_NONE;
        struct ntbf_counters c0, c1;
        CF_TRY(cf_counters(r, b, &c0));

        CF_TRY(iommu_access(r, off, cf_pattern(90, 0), false, "before it is mapped"));
        CF_EQ(r, cf_load64((uint8_t *)m.addr + off), 0,
              "%s: memory after a write to an unmapped "
              "IOVA",
              b->name);
        CF_OK(r, o->iommu_map(b->h, iova, m.bus_addr, 4096), "%s: iommu_map(%#llx -> %#llx)",
              b->name, (unsigned long long)iova, (unsigned long long)m.bus_addr);
        cf_undo_iommu(r, b, iova, 4096);
        CF_TRY(iommu_access(r, off, cf_pattern(90, 1), true, "once mapped"));
        CF_EQ(r, cf_load64((uint8_t *)m.addr + off), cf_pattern(90, 1),
              "%s: memory at the mapped physical address + %#llx", b->name,
              (unsigned long long)off);
        CF_OK(r, o->iommu_unmap(b->h, iova, 4096), "%s: iommu_unmap(%#llx)", b->name,
              (unsigned long long)iova);
        CF_TRY(iommu_access(r, off, cf_pattern(90, 2), false, "after it is unmapped"));
        CF_EQ(r, cf_load64((uint8_t *)m.addr + off), cf_pattern(90, 1),
              "%s: memory after a write to an unmapped IOVA", b->name);
        if (!counted || !(b->caps.flags & NTBF_CAP_COUNTERS)) {
                snprintf(r->reason, sizeof(r->reason), "iommu_fault not checked: %s",
                         counted ? "not claimed (no NTBF_CAP_COUNTERS)"
                                 : "no counted transactions");
                return 0;
        }
        CF_TRY(cf_counters(r, b, &c1));
        CF_EQ(r, c1.iommu_fault - c0.iommu_fault, 2,
              "%s: iommu_fault after two writes to an unmapped IOVA (counted where the fault "
              "happened)",
              b->name);
        return 0;
}

/* ---- lender-side isolation --------------------------------------------------------------------
 */

/* A DMA write of v by requester rid at addr in ad's host; returns the transaction's status. */
static int dev_write(struct cf_run *r, struct cf_ad *ad, uint16_t rid, uint64_t addr, uint64_t v,
                     int *st)
{
        return cf_tx(r, ad, rid, true, addr, &v, 8, st);
}

int cf_check_dev_iommu(struct cf_run *r)
{
        struct cf_ad *ad = r->ad;
        const struct ntbf_backend_ops *o = r->cx->ops;
        if (!(ad->caps.flags & NTBF_CAP_DEV_IOMMU))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_DEV_IOMMU", ad->name);
        if (cf_tx_mode(r->cx, ad, NULL) != CF_TX_SIM)
                CF_SKIP(r, "needs transactions issued as a device (the simulated fabric)");
        /* The host's first device, isolated as a whole by one entry covering its functions. */
        const struct ntbf_topo *t = r->cx->t;
        const struct ntbf_node *n = &t->nodes[ad->node];
        if (!n->ndevices)
                CF_SKIP(r, "host %s has no device to isolate", n->name);
        const struct ntbf_device *d = &t->devices[n->devices[0]];
        uint16_t rid0 = (uint16_t)ntbf_device_rid(d, 0);
        uint16_t rid_last = (uint16_t)ntbf_device_rid(d, d->functions - 1);
        uint16_t other = (uint16_t)((d->bus + 1u) << 8); /* a requester of no device here */
        struct ntbf_rid dev = {ad->node, rid0, 0xfff8};
        struct ntbf_mem m;
        CF_TRY(cf_mem(r, ad, 4096, 4096, &m));
        const uint64_t off = 0x80, iova = NTBF_GiB;
        uint8_t *at = (uint8_t *)m.addr + off;
        int st;

        CF_TRY(dev_write(r, ad, rid_last, m.bus_addr + off, cf_pattern(95, 0), &st));
        CF_OK(r, st, "%s: DMA to host-physical memory before isolation", ad->name);
        CF_EQ(r, cf_load64(at), cf_pattern(95, 0), "%s: memory after DMA before isolation",
              ad->name);

        CF_OK(r, o->dev_isolate(ad->h, &dev, true), "%s: dev_isolate(%s)", ad->name, d->name);
        cf_undo_isolate(r, ad, &dev);
        CF_TRY(dev_write(r, ad, rid_last, m.bus_addr + off, cf_pattern(95, 1), &st));
        CF_RC(r, NTBF_EIOMMU_FAULT, st, "%s: isolated %s writing unmapped memory", ad->name,
              d->name);
        CF_EQ(r, cf_load64(at), cf_pattern(95, 0),
              "%s: memory after an isolated device wrote an unmapped address", ad->name);
        /* Another requester of the host is not affected. */
        CF_TRY(dev_write(r, ad, other, m.bus_addr + off, cf_pattern(95, 2), &st));
        CF_OK(r, st, "%s: DMA by requester %#x, which is not isolated", ad->name, other);

        CF_OK(r, o->dev_iommu_map(ad->h, &dev, iova, m.bus_addr, 4096),
              "%s: dev_iommu_map(%#llx -> %#llx)", ad->name, (unsigned long long)iova,
              (unsigned long long)m.bus_addr);
        CF_TRY(dev_write(r, ad, rid0, iova + off, cf_pattern(95, 3), &st));
        CF_OK(r, st, "%s: isolated %s writing its mapped IOVA", ad->name, d->name);
        CF_EQ(r, cf_load64(at), cf_pattern(95, 3), "%s: memory behind the mapped IOVA", ad->name);
        CF_OK(r, o->dev_iommu_unmap(ad->h, &dev, iova, 4096), "%s: dev_iommu_unmap", ad->name);
        CF_TRY(dev_write(r, ad, rid_last, iova + off, cf_pattern(95, 4), &st));
        CF_RC(r, NTBF_EIOMMU_FAULT, st, "%s: writing an unmapped IOVA", ad->name);
        CF_EQ(r, cf_load64(at), cf_pattern(95, 3), "%s: memory after a write to an unmapped IOVA",
              ad->name);

        CF_OK(r, o->dev_isolate(ad->h, &dev, false), "%s: dev_isolate off", ad->name);
        CF_TRY(dev_write(r, ad, rid_last, m.bus_addr + off, cf_pattern(95, 5), &st));
        CF_OK(r, st, "%s: DMA to host-physical memory once isolation is off", ad->name);
        CF_EQ(r, cf_load64(at), cf_pattern(95, 5), "%s: memory once isolation is off", ad->name);
        return 0;
}

/* ---- interrupts ---------------------------------------------------------------------------------
 */

/* Write the vector's data to its address from A's side, through slot `slot` mapping far. */
static int msi(struct cf_run *r, uint32_t slot, uint64_t far, const struct ntbf_irq *v)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a;
        uint64_t at = cf_slot_addr(a, slot) + (v->addr - far);
        uint32_t data = v->data;
        int st;
        if (cf_tx_mode(r->cx, a, NULL) != CF_TX_NONE) {
                CF_TRY(cf_tx(r, a, 0, true, at, &data, 4, &st));
                CF_OK(r, st, "MSI write of data %#x to %#llx through %s", data,
                      (unsigned long long)v->addr, a->name);
                return 0;
        }
        struct cf_win w;
        CF_TRY(cf_win_open(r, p, slot, 1, &w));
        if (!w.cpu)
                CF_FAIL(r, "internal: no CPU mapping for the MSI write");
        *(volatile uint32_t *)(w.cpu + (at - w.base)) = data;
        return 0;
}

int cf_check_irq(struct cf_run *r)
{
        struct cf_ctx *cx = r->cx;
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        const struct ntbf_backend_ops *o = cx->ops;
        if (!(b->caps.flags & NTBF_CAP_IRQ))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_IRQ", b->name);
        bool inbound = false;
        CF_TRY(cf_slot_how(r, p, &inbound));
        if (cf_tx_mode(cx, a, NULL) == CF_TX_NONE && !(a->caps.flags & NTBF_CAP_CPU_MAP))
                CF_SKIP(r, "%s can neither issue transactions nor map its window", a->name);
        struct ntbf_irq v[2];
        CF_TRY(cf_irq_two(r, b, v));
        uint64_t far[2];
        uint32_t slot[2];
        for (int i = 0; i < 2; i++) {
                slot[i] = cf_slot(a, (uint32_t)i);
                uint64_t xs = cf_xsize(a, slot[i]), al = cf_xalign(a, slot[i], xs);
                far[i] = v[i].addr & ~(al - 1);
                if (i == 1 && v[1].addr >= far[0] && v[1].addr - far[0] < cf_xsize(a, slot[0])) {
                        far[1] = far[0]; /* the same slot reaches both */
                        slot[1] = slot[0];
                        continue;
                }
                if (slot[i] == NTBF_NONE)
                        CF_SKIP(r, "%s has one usable slot and the two vectors are far apart",
                                a->name);
                struct ntbf_xlat x = {b->node, b->idx, far[i], NTBF_NONE, xs};
                CF_TRY(cf_slot_set(r, p, inbound, slot[i], &x));
        }
        char how[96];
        snprintf(how, sizeof(how), "the MSI write from %s", a->name);
        for (int i = 0; i < 2; i++) {
                CF_TRY(msi(r, slot[i], far[i], &v[i]));
                CF_TRY(cf_irq_expect(r, b, v, i, how));
        }
        for (int i = 0; i < 2; i++)
                CF_OK(r, o->irq_free(b->h, &v[i]), "%s: irq_free (vector %d)", b->name, i + 1);
        return 0;
}

/* ---- multicast ----------------------------------------------------------------------------------
 */

static int mc_write(struct cf_run *r, uint64_t off, uint64_t v)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a;
        uint32_t s0 = cf_slot(a, 0);
        uint64_t at = cf_slot_addr(a, s0) + off;
        int st;
        if (cf_tx_mode(r->cx, a, NULL) != CF_TX_NONE) {
                CF_TRY(cf_tx(r, a, 0, true, at, &v, 8, &st));
                CF_OK(r, st, "write to the multicast slot at offset %#llx",
                      (unsigned long long)off);
                return 0;
        }
        struct cf_win w;
        CF_TRY(cf_win_open(r, p, s0, 1, &w));
        return cf_win_write(r, &w, at, v, &st);
}

int cf_check_mcast(struct cf_run *r)
{
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a;
        const struct ntbf_backend_ops *o = r->cx->ops;
        if (!(a->caps.flags & NTBF_CAP_MCAST))
                CF_SKIP(r, "not claimed: %s does not claim NTBF_CAP_MCAST", a->name);
        if (!(a->caps.flags & NTBF_CAP_XLAT_OUTBOUND))
                CF_SKIP(r,
                        "%s does not claim NTBF_CAP_XLAT_OUTBOUND: a slot onto a multicast "
                        "group is programmed by the window owner",
                        a->name);
        const uint64_t S = 65536;
        uint32_t s0 = cf_slot(a, 0);
        if (cf_xsize(a, s0) < S)
                CF_SKIP(r,
                        "%s's translations (%llu bytes) are smaller than the test's group (64 KiB)",
                        a->name, (unsigned long long)cf_xsize(a, s0));
        struct cf_ad *mem[CF_MAX_MEMBERS];
        struct ntbf_mem buf[CF_MAX_MEMBERS];
        unsigned n = 0;
        const uint32_t g = 0;
        for (unsigned i = 0; i < p->nmembers; i++) {
                struct cf_ad *m = p->members[i];
                uint32_t need = NTBF_CAP_MCAST | NTBF_CAP_MEM;
                if ((m->caps.flags & need) != need)
                        continue;
                CF_TRY(cf_far_mem(r, m, S, 4096, &buf[n]));
                CF_OK(r, o->mcast_join(m->h, g, buf[n].bus_addr, S),
                      "%s: mcast_join(group %u, %#llx, %llu bytes)", m->name, g,
                      (unsigned long long)buf[n].bus_addr, (unsigned long long)S);
                cf_undo_mcast(r, m, g);
                mem[n++] = m;
        }
        if (!n)
                CF_SKIP(r, "no adapter A reaches through the switches claims NTBF_CAP_MCAST and "
                           "NTBF_CAP_MEM");
        struct ntbf_xlat x = {NTBF_NONE, NTBF_NONE, 0, g, cf_xsize(a, s0)};
        CF_TRY(cf_slot_set(r, p, false, s0, &x));
        if (o->xlat_get) {
                struct ntbf_xlat y;
                bool valid = false;
                CF_OK(r, o->xlat_get(a->h, s0, &y, &valid), "%s: xlat_get(%u)", a->name, s0);
                CF_TRUE(r, valid && y.mcast_group == g,
                        "%s: xlat_get(%u) does not read back the multicast group %u", a->name, s0,
                        g);
        }
        CF_TRY(mc_write(r, 0, cf_pattern(100, 0)));
        CF_TRY(mc_write(r, S - 8, cf_pattern(100, 1)));
        for (unsigned i = 0; i < n; i++) {
                CF_EQ(r, cf_load64(buf[i].addr), cf_pattern(100, 0),
                      "%s: first 8 bytes of its overlay after a write to the group", mem[i]->name);
                CF_EQ(r, cf_load64((uint8_t *)buf[i].addr + S - 8), cf_pattern(100, 1),
                      "%s: last 8 bytes of its overlay after a write to the group", mem[i]->name);
        }
        if (n >= 2) {
                CF_OK(r, o->mcast_leave(mem[n - 1]->h, g), "%s: mcast_leave(%u)", mem[n - 1]->name,
                      g);
                CF_TRY(mc_write(r, 0, cf_pattern(100, 2)));
                for (unsigned i = 0; i + 1 < n; i++)
                        CF_EQ(r, cf_load64(buf[i].addr), cf_pattern(100, 2),
                              "%s: overlay after a member left", mem[i]->name);
                CF_EQ(r, cf_load64(buf[n - 1].addr), cf_pattern(100, 0),
                      "%s: overlay after it left the group (it must receive nothing)",
                      mem[n - 1]->name);
        }
        snprintf(r->reason, sizeof(r->reason), "group %u, %u members", g, n);
        return 0;
}

/* ---- posted writes through the window ---------------------------------------------------------
 */

int cf_check_window_write(struct cf_run *r)
{
        struct cf_ctx *cx = r->cx;
        struct cf_pair *p = r->p;
        struct cf_ad *a = p->a, *b = p->b;
        const struct ntbf_backend_ops *o = cx->ops;
        if (!o->window_write)
                CF_SKIP(r, "not claimed: the backend has no window_write");
        bool inbound = false;
        CF_TRY(cf_slot_how(r, p, &inbound));
        uint32_t s0 = cf_slot(a, 0), s1 = cf_slot(a, 1), w0, w1 = NTBF_NONE;
        const struct ntbf_window *W = cf_slot_window(a, s0, &w0);
        uint64_t o0 = cf_slot_addr(a, s0) - W->base; /* s0's offset in window w0 */
        if (s1 != NTBF_NONE)
                cf_slot_window(a, s1, &w1);
        uint64_t o1 = s1 != NTBF_NONE ? cf_slot_addr(a, s1) - a->caps.windows[w1].base : 0;

        /* Bytes land exactly, whatever their alignment, and nothing around them. */
        struct cf_target tg;
        CF_TRY(cf_target(r, p, s0, 1, &tg));
        uint8_t *mem = tg.mem.addr;
        uint8_t buf[64];
        for (unsigned i = 0; i < sizeof(buf); i++)
                buf[i] = (uint8_t)(0xa0 + i);
        CF_OK(r, o->window_write(a->h, w0, o0 + 0x100, buf, sizeof(buf)),
              "%s: window_write(window %u, %#llx, 64)", a->name, w0,
              (unsigned long long)(o0 + 0x100));
        CF_TRUE(r, !memcmp(mem + 0x100, buf, sizeof(buf)),
                "%s: the 64 bytes written through %s's window at offset 0x100 are not there",
                b->name, a->name);
        CF_OK(r, o->window_write(a->h, w0, o0 + 0x201, buf, 3), "%s: window_write(%#llx, 3)",
              a->name, (unsigned long long)(o0 + 0x201));
        CF_TRUE(r, mem[0x200] == 0 && mem[0x201] == 0xa0 && mem[0x203] == 0xa2 && mem[0x204] == 0,
                "%s: a 3-byte write at offset 0x201 did not land exactly (%02x %02x %02x %02x "
                "%02x)",
                b->name, mem[0x200], mem[0x201], mem[0x202], mem[0x203], mem[0x204]);

        /* Into an unprogrammed slot: posted and lost, counted where it was dropped. */
        if (s1 != NTBF_NONE) {
                struct ntbf_counters c0, c1;
                CF_TRY(cf_counters(r, a, &c0));
                int rc = o->window_write(a->h, w1, o1 + 0x100, buf, 8);
                CF_TRUE(r, rc == 0 || rc == NTBF_EUNPROGRAMMED,
                        "%s: window_write into an unprogrammed slot returned %d (%s); a posted "
                        "write returns 0 or its drop reason",
                        a->name, rc, ntbf_strerror(rc));
                if (cx->sim && (a->caps.flags & NTBF_CAP_COUNTERS)) {
                        CF_TRY(cf_counters(r, a, &c1));
                        CF_EQ(r, c1.drop_unprogrammed - c0.drop_unprogrammed, 1,
                              "%s: drop_unprogrammed after a write into an unprogrammed slot",
                              a->name);
                }
        }

        /* The far host's MSI range: the write is an interrupt (what a CPU mapping cannot do). */
        if ((b->caps.flags & NTBF_CAP_IRQ) && s1 != NTBF_NONE) {
                struct ntbf_irq v;
                memset(&v, 0, sizeof(v));
                v.fd = -1;
                CF_OK(r, o->irq_alloc(b->h, &v), "%s: irq_alloc", b->name);
                cf_undo_irq(r, b, &v);
                uint64_t xs = cf_xsize(a, s1), al = cf_xalign(a, s1, xs);
                uint64_t far = v.addr & ~(al - 1);
                struct ntbf_xlat x = {b->node, b->idx, far, NTBF_NONE, xs};
                CF_TRY(cf_slot_set(r, p, inbound, s1, &x));
                uint32_t data = v.data;
                CF_OK(r, o->window_write(a->h, w1, o1 + (v.addr - far), &data, 4),
                      "%s: window_write of MSI data %#x", a->name, data);
                CF_TRUE(r, cf_poll_readable(v.fd, cx->timeout_ms),
                        "%s: the MSI written through %s's window did not signal the vector's "
                        "eventfd within %u ms",
                        b->name, a->name, cx->timeout_ms);
                uint64_t cnt = 0;
                CF_TRUE(r, read(v.fd, &cnt, sizeof(cnt)) == sizeof(cnt) && cnt >= 1,
                        "%s: reading the vector's eventfd", b->name);
        }

        /* Outside the window, or nothing to write. */
        CF_RC(r, -EINVAL, o->window_write(a->h, w0, o0, buf, 0), "%s: window_write of 0 bytes",
              a->name);
        CF_RC(r, -EINVAL, o->window_write(a->h, w0, W->size, buf, 1),
              "%s: window_write at the window's end", a->name);
        CF_RC(r, -EINVAL, o->window_write(a->h, w0, W->size - 4, buf, 8),
              "%s: window_write running past the window's end", a->name);
        CF_RC(r, -EINVAL, o->window_write(a->h, a->caps.nwindows, 0, buf, 8),
              "%s: window_write to window %u, past the last", a->name, a->caps.nwindows);
        return 0;
}
