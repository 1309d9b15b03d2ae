/* core/backend.c: the rules a backend vtable must follow (ntbf_backend_ops_valid). */
#include <stdarg.h>
#include <stdio.h>

#include "ntbfab/backend.h"
#include "say.h"

/* Say why the vtable is refused; the caller returns false with it. */
#define fail(why, len, ...) (ntbf__say((why), (len), __VA_ARGS__), false)

#define CB(field)                                                                                  \
        {                                                                                          \
#field, ops->field != NULL                                                         \
        }

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

/*
 * The rules, checked in the order backend.h lists the callbacks, so the first broken one
 * is reported: a name; the mandatory callbacks (instance and adapters, link, events, reset
 * and counters); at least one complete translation pair; every pair complete; window_write
 * only with map_window; every group all or none. xlat_get and fault are optional on their
 * own.
 */
bool ntbf_backend_ops_valid(const struct ntbf_backend_ops *ops, char *why, size_t whylen)
{
        if (!ops)
                return fail(why, whylen, "no vtable");
        if (!ops->name || !ops->name[0])
                return fail(why, whylen, "the backend has no name");
        const struct cb mandatory[] = {
            CB(open),           CB(close),       CB(probe),        CB(release),    CB(caps),
            CB(link_state),     CB(link_enable), CB(link_disable), CB(set_events), CB(event_fd),
            CB(process_events), CB(reset),       CB(counters),
        };
        for (size_t i = 0; i < sizeof(mandatory) / sizeof(mandatory[0]); i++)
                if (!mandatory[i].set)
                        return fail(why, whylen, "mandatory callback %s is missing",
                                    mandatory[i].name);

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
            {CB(mem_map), CB(mem_unmap)},
        };
        for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
                if (!all_or_none(pairs[i], 2, NULL, why, whylen))
                        return false;
        /* Mapping memory for export by address needs memory for export. */
        if (ops->mem_map && !ops->mem_alloc)
                return fail(why, whylen, "mem_map without mem_alloc");
        /* A write through the window is what a CPU mapping would do: it needs the pair. */
        if (ops->window_write && !ops->map_window)
                return fail(why, whylen, "window_write without map_window");
        const struct cb db[] = {CB(db_read), CB(db_clear), CB(db_set_mask), CB(db_clear_mask),
                                CB(peer_db_set)};
        if (!all_or_none(db, 5, "doorbell", why, whylen))
                return false;
        const struct cb spad[] = {CB(spad_read), CB(spad_write), CB(peer_spad_read),
                                  CB(peer_spad_write)};
        if (!all_or_none(spad, 4, "scratchpad", why, whylen))
                return false;
        const struct cb more[][2] = {
            {CB(peer_msg_write), CB(msg_read)}, {CB(mcast_join), CB(mcast_leave)},
            {CB(dma_submit), CB(dma_poll)},     {CB(iommu_map), CB(iommu_unmap)},
            {CB(irq_alloc), CB(irq_free)},
        };
        for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++)
                if (!all_or_none(more[i], 2, NULL, why, whylen))
                        return false;
        /* Isolating a device without a way to map its windows (or the reverse) is useless. */
        const struct cb iso[] = {CB(dev_isolate), CB(dev_iommu_map), CB(dev_iommu_unmap)};
        if (!all_or_none(iso, 3, "device isolation", why, whylen))
                return false;
        if (why && whylen)
                snprintf(why, whylen, "valid");
        return true;
}
