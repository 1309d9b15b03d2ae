/* core/backend.c: the rules of a backend vtable and of its capabilities (backend.h). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "ntbfab/backend.h"
#include "say.h"

/* Say why the vtable is refused; the caller returns false with it. */
#define fail(why, len, ...) (ntbf__say((why), (len), __VA_ARGS__), false)

#define CB(field)                                                                                  \
        {                                                                                          \
#field, ops->field != NULL                                                         \
        }
/* The same as a value, for passing to a function. */
#define CBV(field) ((struct cb){#field, ops->field != NULL})
#define NELEM(a)   (sizeof(a) / sizeof((a)[0]))

struct cb {
        const char *name;
        bool set;
};

/* Every member of a pair or group is present, or none: name the first missing one. */
static bool all_or_none(const struct cb *v, size_t n, const char *group, char *why, size_t len)
{
        size_t set = 0;
        for (size_t i = 0; i < n; i++)
                set += v[i].set;
        if (set == 0 || set == n)
                return true;
        const char *have = NULL, *miss = NULL;
        for (size_t i = 0; i < n; i++) {
                if (v[i].set && !have)
                        have = v[i].name;
                if (!v[i].set && !miss)
                        miss = v[i].name;
        }
        if (n == 2)
                return fail(why, len, "%s without %s", have, miss);
        return fail(why, len, "%s group incomplete: %s without %s (all or none)", group, have,
                    miss);
}

/* A callback that is useless without another: "window_write without map_window". */
static bool needs(struct cb a, struct cb b, char *why, size_t len)
{
        return !a.set || b.set || fail(why, len, "%s without %s", a.name, b.name);
}

/*
 * The rules of backend.h, checked in the order it lists the callbacks, so that the first
 * broken one is reported: a name; the mandatory callbacks; at least one complete
 * translation pair; every pair and group complete; the callbacks that need another.
 * xlat_get, reset, counters and fault are optional on their own.
 */
bool ntbf_backend_ops_valid(const struct ntbf_backend_ops *ops, char *why, size_t whylen)
{
        if (!ops)
                return fail(why, whylen, "no vtable");
        if (!ops->name || !ops->name[0])
                return fail(why, whylen, "the backend has no name");
        const struct cb inst[] = {CB(create), CB(destroy)};
        if (!all_or_none(inst, 2, NULL, why, whylen))
                return false;
        const struct cb mandatory[] = {
            CB(open),       CB(close),      CB(probe),    CB(release),        CB(caps),
            CB(link_state), CB(set_events), CB(event_fd), CB(process_events),
        };
        for (size_t i = 0; i < NELEM(mandatory); i++)
                if (!mandatory[i].set)
                        return fail(why, whylen, "mandatory callback %s is missing",
                                    mandatory[i].name);
        const struct cb link[] = {CB(link_enable), CB(link_disable)};
        if (!all_or_none(link, 2, NULL, why, whylen))
                return false;

        const struct cb out[] = {CB(xlat_set), CB(xlat_clear)};
        const struct cb in[] = {CB(peer_xlat_set), CB(peer_xlat_clear)};
        if (!all_or_none(out, 2, "outbound translation", why, whylen) ||
            !all_or_none(in, 2, "inbound translation", why, whylen))
                return false;
        if (!out[0].set && !in[0].set)
                return fail(why, whylen,
                            "no translation: neither xlat_set/xlat_clear nor "
                            "peer_xlat_set/peer_xlat_clear");

        const struct cb pairs[][2] = {
            {CB(rid_add), CB(rid_del)},         {CB(switch_rid_add), CB(switch_rid_del)},
            {CB(map_window), CB(unmap_window)}, {CB(mem_alloc), CB(mem_free)},
            {CB(mem_map), CB(mem_unmap)},       {CB(host_map), CB(host_unmap)},
        };
        for (size_t i = 0; i < NELEM(pairs); i++)
                if (!all_or_none(pairs[i], 2, NULL, why, whylen))
                        return false;
        /* A write through the window is what a CPU mapping would do: it needs the pair. */
        if (!needs(CBV(window_write), CBV(map_window), why, whylen) ||
            !needs(CBV(mem_map), CBV(mem_alloc), why, whylen))
                return false;
        const struct cb db[] = {CB(db_read), CB(db_clear), CB(db_set_mask), CB(db_clear_mask),
                                CB(peer_db_set)};
        if (!all_or_none(db, NELEM(db), "doorbell", why, whylen))
                return false;
        const struct cb spad[] = {CB(spad_read), CB(spad_write), CB(peer_spad_read),
                                  CB(peer_spad_write)};
        if (!all_or_none(spad, NELEM(spad), "scratchpad", why, whylen))
                return false;
        const struct cb more[][2] = {
            {CB(peer_msg_write), CB(msg_read)},
            {CB(mcast_join), CB(mcast_leave)},
            {CB(dma_submit), CB(dma_poll)},
            {CB(iommu_map), CB(iommu_unmap)},
        };
        for (size_t i = 0; i < NELEM(more); i++)
                if (!all_or_none(more[i], 2, NULL, why, whylen))
                        return false;
        /* Isolating a device without a way to map its windows (or the reverse) is useless. */
        const struct cb iso[] = {CB(dev_isolate), CB(dev_iommu_map), CB(dev_iommu_unmap)};
        if (!all_or_none(iso, NELEM(iso), "device isolation", why, whylen) ||
            !needs(CBV(dev_iommu_faults), CBV(dev_isolate), why, whylen))
                return false;
        const struct cb last[][2] = {
            {CB(cfg_read), CB(cfg_write)},
            {CB(dev_map), CB(dev_unmap)},
            {CB(irq_alloc), CB(irq_free)},
            {CB(serve), CB(client_gone)},
        };
        for (size_t i = 0; i < NELEM(last); i++)
                if (!all_or_none(last[i], 2, NULL, why, whylen))
                        return false;
        if (!needs(CBV(irq_trigger), CBV(irq_alloc), why, whylen) ||
            !needs(CBV(host_bus), CBV(host_map), why, whylen))
                return false;
        if (why && whylen)
                snprintf(why, whylen, "valid");
        return true;
}

/* ---- capabilities ------------------------------------------------------------------------ */

#define CAP_NAMES(X)                                                                               \
        X(XLAT_OUTBOUND)                                                                           \
        X(XLAT_INBOUND)                                                                            \
        X(RID_TABLE)                                                                               \
        X(CPU_MAP)                                                                                 \
        X(MEM)                                                                                     \
        X(DOORBELL)                                                                                \
        X(SCRATCHPAD)                                                                              \
        X(MESSAGE)                                                                                 \
        X(MCAST)                                                                                   \
        X(DMA)                                                                                     \
        X(SWITCH_RID)                                                                              \
        X(IRQ)                                                                                     \
        X(FAULT)                                                                                   \
        X(IOMMU)                                                                                   \
        X(DEV_IOMMU)                                                                               \
        X(NO_RID_TABLE)                                                                            \
        X(KERNEL_IOMMU)                                                                            \
        X(LINK_CTRL)                                                                               \
        X(RESET)                                                                                   \
        X(COUNTERS)                                                                                \
        X(DEV_MAP)                                                                                 \
        X(MAP_LIVE)                                                                                \
        X(MEM_PHYS)

const char *ntbf_cap_name(uint32_t flag)
{
        switch (flag) {
#define CAP_CASE(n)                                                                                \
        case NTBF_CAP_##n:                                                                         \
                return "NTBF_CAP_" #n;
                CAP_NAMES(CAP_CASE)
#undef CAP_CASE
        }
        return "?";
}

const char *ntbf_cap_missing(const struct ntbf_backend_ops *ops, uint32_t flag)
{
        struct cb v[5] = {{NULL, true}};
        size_t n = 0;
#define NEED(...)                                                                                  \
        do {                                                                                       \
                const struct cb w_[] = {__VA_ARGS__};                                              \
                for (n = 0; n < NELEM(w_); n++)                                                    \
                        v[n] = w_[n];                                                              \
        } while (0)
        switch (flag) {
        case NTBF_CAP_XLAT_OUTBOUND:
                NEED(CB(xlat_set), CB(xlat_clear));
                break;
        case NTBF_CAP_XLAT_INBOUND:
                NEED(CB(peer_xlat_set), CB(peer_xlat_clear));
                break;
        case NTBF_CAP_RID_TABLE:
                NEED(CB(rid_add), CB(rid_del));
                break;
        case NTBF_CAP_CPU_MAP:
                NEED(CB(map_window), CB(unmap_window));
                break;
        case NTBF_CAP_MEM:
                NEED(CB(mem_alloc), CB(mem_free));
                break;
        case NTBF_CAP_DOORBELL:
                NEED(CB(db_read), CB(db_clear), CB(db_set_mask), CB(db_clear_mask),
                     CB(peer_db_set));
                break;
        case NTBF_CAP_SCRATCHPAD:
                NEED(CB(spad_read), CB(spad_write), CB(peer_spad_read), CB(peer_spad_write));
                break;
        case NTBF_CAP_MESSAGE:
                NEED(CB(peer_msg_write), CB(msg_read));
                break;
        case NTBF_CAP_MCAST:
                NEED(CB(mcast_join), CB(mcast_leave));
                break;
        case NTBF_CAP_DMA:
                NEED(CB(dma_submit), CB(dma_poll));
                break;
        case NTBF_CAP_SWITCH_RID:
                NEED(CB(switch_rid_add), CB(switch_rid_del));
                break;
        case NTBF_CAP_IRQ:
                NEED(CB(irq_alloc), CB(irq_free));
                break;
        case NTBF_CAP_FAULT:
                NEED(CB(fault));
                break;
        case NTBF_CAP_IOMMU:
                NEED(CB(iommu_map), CB(iommu_unmap));
                break;
        case NTBF_CAP_DEV_IOMMU:
                NEED(CB(dev_isolate), CB(dev_iommu_map), CB(dev_iommu_unmap));
                break;
        case NTBF_CAP_LINK_CTRL:
                NEED(CB(link_enable), CB(link_disable));
                break;
        case NTBF_CAP_RESET:
                NEED(CB(reset));
                break;
        case NTBF_CAP_COUNTERS:
                NEED(CB(counters));
                break;
        case NTBF_CAP_DEV_MAP:
                NEED(CB(dev_map), CB(dev_unmap));
                break;
        case NTBF_CAP_MEM_PHYS:
                NEED(CB(mem_alloc), CB(mem_free), CB(host_map), CB(host_unmap));
                break;
        default: /* NO_RID_TABLE, KERNEL_IOMMU, MAP_LIVE: facts, no callbacks */
                break;
        }
#undef NEED
        for (size_t i = 0; i < n; i++)
                if (!v[i].set)
                        return v[i].name;
        return NULL;
}

static bool is_pow2(uint64_t v)
{
        return v && !(v & (v - 1));
}

static bool window_valid(const struct ntbf_window *w, uint32_t i, uint32_t first, char *why,
                         size_t len)
{
        if (!w->slots || !w->size)
                return fail(why, len, "window %u has no slots or no size", i);
        if (w->first_slot != first)
                return fail(why, len,
                            "window %u: first_slot %u, but the windows before it have %u slots", i,
                            w->first_slot, first);
        if (w->slot_size * w->slots != w->size)
                return fail(why, len,
                            "window %u: %u slots of %#" PRIx64 " bytes do not make its %#" PRIx64
                            " bytes",
                            i, w->slots, w->slot_size, w->size);
        if (w->reserved >= w->slots)
                return fail(why, len, "window %u: %u reserved slots leave none of its %u", i,
                            w->reserved, w->slots);
        if (!is_pow2(w->addr_align) || !is_pow2(w->size_align))
                return fail(why, len,
                            "window %u: addr_align %#" PRIx64 " and size_align %#" PRIx64
                            " must be powers of two",
                            i, w->addr_align, w->size_align);
        if (w->size_align > w->size_max || w->size_max > w->slot_size)
                return fail(why, len,
                            "window %u: size_align %#" PRIx64 " <= size_max %#" PRIx64
                            " <= slot_size %#" PRIx64 " does not hold",
                            i, w->size_align, w->size_max, w->slot_size);
        if (w->base + w->size < w->base)
                return fail(why, len, "window %u wraps the address space", i);
        return true;
}

/* A flag and the figure that counts what it claims agree: both zero or both not. */
static bool agree(uint32_t flags, uint32_t flag, uint64_t figure, const char *what, char *why,
                  size_t len)
{
        if (!(flags & flag) == !figure)
                return true;
        return fail(why, len, "%s %s but %s is %" PRIu64, ntbf_cap_name(flag),
                    flags & flag ? "claimed" : "not claimed", what, figure);
}

bool ntbf_caps_valid(const struct ntbf_backend_ops *ops, const struct ntbf_caps *c, char *why,
                     size_t whylen)
{
        if (!ops || !c)
                return fail(why, whylen, "no vtable or no capabilities");
        for (uint32_t f = 1; f && f <= NTBF_CAP_LAST; f <<= 1) {
                const char *miss = (c->flags & f) ? ntbf_cap_missing(ops, f) : NULL;
                if (miss)
                        return fail(why, whylen, "%s claimed without %s", ntbf_cap_name(f), miss);
        }
        if (c->flags & ~((NTBF_CAP_LAST << 1) - 1))
                return fail(why, whylen, "unknown capability flags %#x",
                            c->flags & ~((NTBF_CAP_LAST << 1) - 1));
        if ((c->flags & NTBF_CAP_RID_TABLE) && (c->flags & NTBF_CAP_NO_RID_TABLE))
                return fail(why, whylen,
                            "NTBF_CAP_RID_TABLE and NTBF_CAP_NO_RID_TABLE both claimed");
        if ((c->flags & NTBF_CAP_IOMMU) && (c->flags & NTBF_CAP_KERNEL_IOMMU))
                return fail(why, whylen, "NTBF_CAP_IOMMU and NTBF_CAP_KERNEL_IOMMU both claimed");
        if ((c->flags & NTBF_CAP_MAP_LIVE) && !(c->flags & NTBF_CAP_CPU_MAP))
                return fail(why, whylen, "NTBF_CAP_MAP_LIVE claimed without NTBF_CAP_CPU_MAP");
        if (!(c->flags & (NTBF_CAP_XLAT_OUTBOUND | NTBF_CAP_XLAT_INBOUND)))
                return fail(why, whylen,
                            "neither NTBF_CAP_XLAT_OUTBOUND nor NTBF_CAP_XLAT_INBOUND claimed");
        if (!agree(c->flags, NTBF_CAP_DOORBELL, c->db_valid_mask, "db_valid_mask", why, whylen) ||
            !agree(c->flags, NTBF_CAP_SCRATCHPAD, c->scratchpads, "scratchpads", why, whylen) ||
            !agree(c->flags, NTBF_CAP_MESSAGE, c->messages, "messages", why, whylen) ||
            !agree(c->flags, NTBF_CAP_MCAST, c->mcast_groups, "mcast_groups", why, whylen) ||
            !agree(c->flags, NTBF_CAP_DMA, c->dma_channels, "dma_channels", why, whylen))
                return false;
        if ((c->flags & NTBF_CAP_RID_TABLE) && !c->rid_table)
                return fail(why, whylen, "NTBF_CAP_RID_TABLE claimed with rid_table 0");
        if ((c->flags & NTBF_CAP_NO_RID_TABLE) && (c->rid_table || c->rid_reserved))
                return fail(why, whylen,
                            "NTBF_CAP_NO_RID_TABLE claimed with rid_table %u, rid_reserved %u",
                            c->rid_table, c->rid_reserved);
        if (c->rid_table && c->rid_reserved > c->rid_table)
                return fail(why, whylen, "rid_reserved %u exceeds rid_table %u", c->rid_reserved,
                            c->rid_table);
        if ((c->flags & NTBF_CAP_RID_TABLE) && c->rid_reserved >= c->rid_table)
                return fail(why, whylen,
                            "NTBF_CAP_RID_TABLE claimed but rid_reserved %u leaves no entry of "
                            "rid_table %u",
                            c->rid_reserved, c->rid_table);
        if (!c->nwindows || c->nwindows > NTBF_MAX_WINDOWS)
                return fail(why, whylen, "%u windows; an adapter has 1 to %u", c->nwindows,
                            NTBF_MAX_WINDOWS);
        uint32_t slots = 0;
        for (uint32_t i = 0; i < c->nwindows; i++) {
                const struct ntbf_window *w = &c->windows[i];
                if (!window_valid(w, i, slots, why, whylen))
                        return false;
                slots += w->slots;
                for (uint32_t k = 0; k < i; k++)
                        if (w->base < c->windows[k].base + c->windows[k].size &&
                            c->windows[k].base < w->base + w->size)
                                return fail(why, whylen, "windows %u and %u overlap", k, i);
        }
        if (c->slots != slots)
                return fail(why, whylen, "slots is %u but the windows have %u", c->slots, slots);
        if (why && whylen)
                snprintf(why, whylen, "valid");
        return true;
}

const char *ntbf_instance_dir_default(const struct ntbf_topo *t, char *buf, size_t len)
{
        snprintf(buf, len, "/dev/shm/ntbfab-%u-%s", (unsigned)getuid(),
                 t && t->name[0] ? t->name : "cluster");
        return buf;
}

/* ---- capabilities against the cluster file ----------------------------------------------- */

static unsigned popcount64(uint64_t v)
{
        unsigned n = 0;
        for (; v; v &= v - 1)
                n++;
        return n;
}

/* "adapter NODE.ADAPTER: " in front of a mismatch. */
#define MISMATCH(fmt, ...)                                                                         \
        fail(why, whylen, "adapter %s.%s: " fmt, t->nodes[a->node].name, a->name, __VA_ARGS__)

static bool window_match(const struct ntbf_topo *t, const struct ntbf_adapter *a, uint32_t i,
                         const struct ntbf_window *hw, char *why, size_t whylen)
{
        const struct ntbf_window *m = &a->win[i];
        if (hw->size != m->size)
                return MISMATCH("the backend reports window %u of %#" PRIx64
                                " bytes, the cluster file %#" PRIx64 "; set window: %#" PRIx64
                                " (or size: in windows:)",
                                i, hw->size, m->size, hw->size);
        if (hw->slots != m->slots)
                return MISMATCH("the backend reports %u slots in window %u, the cluster file %u; "
                                "set lut_entries: %u (or slots: %u in windows:)",
                                hw->slots, i, m->slots, hw->slots, hw->slots);
        if (hw->base != m->base)
                return MISMATCH("the backend reports window %u at %#" PRIx64
                                ", the cluster file at %#" PRIx64 "; set window_base: %#" PRIx64,
                                i, hw->base, m->base, hw->base);
        if (hw->slot_size != m->slot_size || hw->first_slot != m->first_slot ||
            hw->reserved != m->reserved)
                return MISMATCH("window %u: the backend reports slots of %#" PRIx64
                                " bytes from %u (%u reserved), the cluster file of %#" PRIx64
                                " bytes from %u (%u reserved)",
                                i, hw->slot_size, hw->first_slot, hw->reserved, m->slot_size,
                                m->first_slot, m->reserved);
        if (!hw->addr_align || m->addr_align % hw->addr_align || !hw->size_align ||
            m->size_align % hw->size_align || hw->size_max < m->size_max)
                return MISMATCH("window %u: the core plans translations aligned to %#" PRIx64
                                ", in multiples of %#" PRIx64 ", of up to %#" PRIx64
                                " bytes, but the backend takes addresses aligned to %#" PRIx64
                                ", sizes in multiples of %#" PRIx64 ", up to %#" PRIx64,
                                i, m->addr_align, m->size_align, m->size_max, hw->addr_align,
                                hw->size_align, hw->size_max);
        if ((hw->flags & NTBF_WIN_NATURAL_ALIGN) && !(m->flags & NTBF_WIN_NATURAL_ALIGN))
                return MISMATCH("window %u needs naturally aligned far addresses, which the "
                                "cluster file does not say",
                                i);
        return true;
}

/* A figure of the file and of the backend that must be equal: name the key that fixes it. */
static bool same(const struct ntbf_topo *t, const struct ntbf_adapter *a, uint64_t hw,
                 uint64_t file, const char *what, const char *key, char *why, size_t whylen)
{
        if (hw == file)
                return true;
        return MISMATCH("the backend reports %" PRIu64 " %s, the cluster file %" PRIu64
                        "; set %s: %" PRIu64,
                        hw, what, file, key, hw);
}

bool ntbf_caps_match(const struct ntbf_topo *t, uint32_t adapter, const struct ntbf_caps *c,
                     char *why, size_t whylen)
{
        if (!t || !c || adapter >= t->nadapters)
                return fail(why, whylen, "no topology, no capabilities or no such adapter");
        const struct ntbf_adapter *a = &t->adapters[adapter];
        const struct ntbf_node *n = &t->nodes[a->node];
        if (!same(t, a, c->ports, a->p.ports, "ports", "ports", why, whylen) ||
            !same(t, a, c->nwindows, a->nwin, "windows", "windows", why, whylen))
                return false;
        for (uint32_t i = 0; i < c->nwindows && i < NTBF_MAX_WINDOWS; i++)
                if (!window_match(t, a, i, &c->windows[i], why, whylen))
                        return false;
        bool out = a->p.xlat & NTBF_XLAT_OUTBOUND, in = a->p.xlat & NTBF_XLAT_INBOUND;
        if (!(c->flags & NTBF_CAP_XLAT_OUTBOUND) != !out ||
            !(c->flags & NTBF_CAP_XLAT_INBOUND) != !in) {
                bool o = c->flags & NTBF_CAP_XLAT_OUTBOUND, i = c->flags & NTBF_CAP_XLAT_INBOUND;
                return MISMATCH("the backend programs translations %s, the cluster file says "
                                "xlat: %s; set xlat: %s",
                                o && i ? "both ways"
                                : o    ? "outbound"
                                       : "inbound",
                                out && in ? "both"
                                : out     ? "outbound"
                                          : "inbound",
                                o && i ? "both"
                                : o    ? "outbound"
                                       : "inbound");
        }
        if (!same(t, a, c->rid_table, a->p.rid_table, "requester-ID entries", "rid_table", why,
                  whylen))
                return false;
        if (a->p.rid_table && !(c->flags & NTBF_CAP_RID_TABLE))
                return MISMATCH("the cluster file gives a requester-ID table of %u entries, "
                                "which the backend cannot program; set rid_table: 0",
                                a->p.rid_table);
        if (!a->p.rid_table && (c->flags & NTBF_CAP_RID_TABLE))
                return MISMATCH("the backend programs a requester-ID table, which the cluster "
                                "file says the adapter has not; set rid_table: %u",
                                c->rid_table);
        if (a->p.rid_table &&
            !same(t, a, c->rid_reserved, a->p.rid_reserved, "requester-ID entries for the CPU",
                  "rid_reserved", why, whylen))
                return false;
        uint64_t dma = (c->flags & NTBF_CAP_DMA) ? c->dma_channels : 0;
        uint64_t db = (c->flags & NTBF_CAP_DOORBELL) ? popcount64(c->db_valid_mask) : 0;
        uint64_t sp = (c->flags & NTBF_CAP_SCRATCHPAD) ? c->scratchpads : 0;
        uint64_t msg = (c->flags & NTBF_CAP_MESSAGE) ? c->messages : 0;
        if (!same(t, a, dma, a->p.dma_channels, "DMA channels", "dma_channels", why, whylen) ||
            !same(t, a, db, a->p.doorbells, "doorbell bits", "doorbells", why, whylen) ||
            !same(t, a, sp, a->p.scratchpads, "scratchpads", "scratchpads", why, whylen) ||
            !same(t, a, msg, a->p.messages, "message registers", "messages", why, whylen))
                return false;
        if (!(c->flags & NTBF_CAP_DEV_MAP) != !a->p.managed)
                return MISMATCH("the backend %s devices' DMA itself, but the cluster file's model "
                                "'%s' says %s; use a model of this backend's (dolphin-sisci "
                                "for the dolphin backend)",
                                c->flags & NTBF_CAP_DEV_MAP ? "maps" : "does not map", a->p.model,
                                a->p.managed ? "it does" : "it does not");
        bool iommu = c->flags & (NTBF_CAP_IOMMU | NTBF_CAP_KERNEL_IOMMU);
        if (iommu != n->iommu)
                return MISMATCH("traffic into node %s goes through %s, but the cluster file "
                                "says iommu: %s; set iommu: %s",
                                n->name,
                                iommu ? "an IOMMU (the backend programs it, or the kernel owns it)"
                                      : "no IOMMU the backend knows of",
                                n->iommu ? "true" : "false", iommu ? "true" : "false");
        if (why && whylen)
                snprintf(why, whylen, "matches");
        return true;
}
