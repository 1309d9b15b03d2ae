/* ntbfab/resolve.h: where an address in a domain lands, hop by hop through windows and LUTs. */
#ifndef NTBFAB_RESOLVE_H
#define NTBFAB_RESOLVE_H

#include "budget.h"

NTBF_BEGIN_DECLS

enum ntbf_domain_kind {
        NTBF_DOM_HOST, /* a node's physical address space */
        NTBF_DOM_IOVA, /* a node's IOMMU domain for inbound NTB traffic */
};

struct ntbf_domain {
        enum ntbf_domain_kind kind;
        uint32_t node;
};

enum ntbf_landing {
        NTBF_LAND_RAM,    /* node's RAM */
        NTBF_LAND_BAR,    /* a BAR (or VF BAR) of device, function, bar */
        NTBF_LAND_MSI,    /* node's MSI range: an interrupt */
        NTBF_LAND_WINDOW, /* an adapter window (only as an intermediate step) */
        NTBF_LAND_NONE,   /* nothing claims the address: master abort */
};

#define NTBF_ROUTE_MAX_STEPS 16
#define NTBF_ROUTE_MAX_DESTS 64

/* One address space the transaction passes through. */
struct ntbf_route_step {
        struct ntbf_domain dom;
        uint64_t addr;
        enum ntbf_landing land;
        uint32_t adapter, slot; /* WINDOW: the adapter and LUT slot used */
};

struct ntbf_route_dest {
        uint32_t node;
        enum ntbf_landing land;
        uint32_t device, function, bar; /* BAR */
        uint64_t addr;                  /* physical address in node */
        uint64_t offset;                /* offset into the RAM region / BAR */
};

/* A requester-ID table the transaction needs, and whether the requester is in it. */
struct ntbf_route_rid {
        bool is_switch;
        uint32_t obj;
        bool present;
};

struct ntbf_route {
        /* 0 delivered; NTBF_EUNPROGRAMMED, NTBF_ENORID, NTBF_EUNREACHABLE, NTBF_EIOMMU_FAULT,
         * NTBF_EADDRLIMIT, -EINVAL (the requester or domain names nothing). */
        int result;
        /* The address spaces passed: the requester's host (land WINDOW with adapter and slot
         * when it goes through a window), the far node's IOVA domain if the slot targets it,
         * the far host (its final landing). A multicast write lists only the sender's step. */
        struct ntbf_route_step steps[NTBF_ROUTE_MAX_STEPS];
        uint32_t nsteps;
        struct ntbf_route_dest dests[NTBF_ROUTE_MAX_DESTS]; /* more than one: multicast */
        uint32_t ndests;                                    /* 0 unless result is 0 */
        struct ntbf_route_rid rids[NTBF_PATH_MAX];
        uint32_t nrids;
        uint32_t latency_ns; /* one way, modeled */
        char why[512];       /* when result != 0: where and why it is dropped */
};

/*
 * Resolve a transaction by requester at addr in domain dom against the state: follow
 * windows and LUT slots across hosts to where it lands, listing the LUT slots and the
 * requester-ID tables it needs. A write that would be dropped on hardware gives a
 * non-zero result and a why naming the adapter, slot or table (article 8.6: missing
 * requester IDs drop TLPs; unprogrammed slots and unclaimed addresses master-abort).
 * dom is the requester's host, or (to ask what an inbound IOVA reaches) a node's IOVA
 * domain, which is translated and landed without requester checks. Returns out->result.
 */
NTBF_EXPORT int ntbf_resolve(const struct ntbf_state *s, const struct ntbf_requester *req,
                             struct ntbf_domain dom, uint64_t addr, struct ntbf_route *out);

NTBF_EXPORT const char *ntbf_landing_name(enum ntbf_landing l);

NTBF_END_DECLS

#endif
