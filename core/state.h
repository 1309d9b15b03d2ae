/* core/state.h: internals of the budget state, shared by budget.c, resolve.c and the unit tests. */
#ifndef NTBF_CORE_STATE_H
#define NTBF_CORE_STATE_H

#include "ntbfab/budget.h"

/* A set of requesters with reference counts: open addressing, linear probing. */
struct ntbf__rset {
        uint32_t *key; /* NTBF_NONE: empty */
        uint32_t *refs;
        uint32_t cap, n; /* cap is 0 or a power of two */
};

/* One LUT slot of an adapter. The destination fields are zero while refs is 0. */
struct ntbf__slot {
        uint64_t dst_addr; /* far-side address (MCAST: offset in the group) */
        uint64_t xsize;    /* bytes the slot translates (the whole slot but for a run's last) */
        uint32_t refs;
        uint32_t dest; /* enum ntbf_dest_kind */
        uint32_t dst_node, dst_adapter, group;
        uint32_t zero; /* explicit padding, always 0, so states compare with memcmp */
};

struct ntbf__adapter_st {
        struct ntbf__slot *slots; /* nslots, across the adapter's windows */
        uint32_t used;            /* slots with refs > 0 */
        uint64_t used_bytes;      /* their slot sizes */
        struct ntbf__rset rids;   /* device requesters; the CPU's entries are rid_reserved */
        uint64_t rid_entries;     /* hardware entries the requesters of rids cost (rid_mask) */
};

/* One multicast group slot of a switch. */
struct ntbf__mslot {
        uint32_t refs, group;
        uint64_t size; /* bytes of the group's range */
};

struct ntbf__switch_st {
        struct ntbf__rset reqs; /* requesters registered (CPUs and devices) */
        uint64_t entries;       /* entries used on each connected port (CPUs weigh cpu_rids) */
        uint64_t baseline;      /* of which the CPU baseline */
        uint32_t net;           /* switch network: switches joined by switch-switch cables */
        struct ntbf__mslot *mc; /* mcast_groups */
        uint32_t mc_used;
};

/* A range reserved in a node's inbound domain (IOVA with an IOMMU, else the RAM pool). */
struct ntbf__range {
        uint64_t addr, size, maps_to;
        uint32_t refs;
        uint32_t zero; /* explicit padding, always 0 */
};

struct ntbf__node_st {
        struct ntbf__range *v; /* sorted by addr, disjoint */
        uint32_t n, cap;
        uint64_t bytes; /* sum of sizes */
};

struct ntbf__alloc {
        uint32_t id;
        struct ntbf_plan plan; /* owns its res array */
};

struct ntbf__base {
        uint32_t sw, node; /* node's CPU registered on switch sw at start */
};

struct ntbf_state {
        const struct ntbf_topo *t;
        struct ntbf__adapter_st *ad;
        struct ntbf__switch_st *sw;
        struct ntbf__node_st *nd;
        /* Switch networks: switches of network i are net_sw[net_first[i] .. net_first[i+1]). */
        uint32_t nnets;
        uint32_t *net_first, *net_sw;
        uint32_t *adapter_net; /* network an adapter is cabled into, NTBF_NONE if none */
        struct ntbf__base *base;
        uint32_t nbase;
        struct ntbf__alloc **allocs; /* sorted by id */
        uint32_t nallocs, cap_allocs;
        uint32_t next_id;
        /* The hardware's BAR addresses of real devices (ntbf_state_set_bars): NTBF_MAX_BARS per
         * device function, function f of device d at (hw_first[d] + f) * NTBF_MAX_BARS, 0 where
         * none is set; both NULL until the first is set. */
        uint64_t *hw_bar;
        uint32_t *hw_first;
};

/* Requester keys: a device by index (one entry for all its functions), CPUs after devices. */
static inline uint32_t ntbf__key_cpu(const struct ntbf_topo *t, uint32_t node)
{
        return t->ndevices + node;
}

static inline uint32_t ntbf__req_key(const struct ntbf_topo *t, const struct ntbf_requester *r)
{
        return r->device == NTBF_NONE ? ntbf__key_cpu(t, r->node) : r->device;
}

/* References a set holds for key (0: absent). */
uint32_t ntbf__rset_refs(const struct ntbf__rset *s, uint32_t key);

/* The slot number of multicast group `group` in switch network net (size: its bytes), or
 * NTBF_NONE if the group has no member there. */
uint32_t ntbf__group_slot(const struct ntbf_state *s, uint32_t net, uint32_t group, uint64_t *size);

/* The range of node n's inbound domain holding addr, or NULL. */
const struct ntbf__range *ntbf__range_find(const struct ntbf_state *s, uint32_t n, uint64_t addr);

/*
 * Consistency checks for tests: recount every slot, entry, group and range from the
 * allocation records and the baseline and compare with the tables; check every budget
 * row has used <= total. 0 if consistent, else -EPROTO with the first difference in why.
 */
int ntbf__state_check(const struct ntbf_state *s, char *why, size_t len);
/* Whether two states hold the same tables (ignoring allocation ids); 0 or -EPROTO + why. */
int ntbf__state_equal(const struct ntbf_state *a, const struct ntbf_state *b, char *why,
                      size_t len);

#endif
