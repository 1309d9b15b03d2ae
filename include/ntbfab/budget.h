/* ntbfab/budget.h: the state of a fabric's budgets, and admission of requests against it. */
#ifndef NTBFAB_BUDGET_H
#define NTBFAB_BUDGET_H

#include "path.h"
#include "topology.h"

NTBF_BEGIN_DECLS

/*
 * The state records what is allocated on every adapter and switch: LUT slots, requester
 * IDs, multicast groups, and address ranges reserved in nodes' domains. It starts with
 * the baseline (CPU requester IDs) and changes only by ntbf_commit() and ntbf_release().
 * The rules are in docs/model.md. The state refers to the topology, which must outlive it.
 */
struct ntbf_state;

/* A requester: a device function, or a node's CPU (device == NTBF_NONE). */
struct ntbf_requester {
        uint32_t node;
        uint32_t device;
        uint32_t function;
};

enum ntbf_target_kind {
        NTBF_TARGET_MEM,   /* [addr, addr + size) in node's physical address space */
        NTBF_TARGET_MCAST, /* multicast group (size bytes of its range) */
};

struct ntbf_target {
        enum ntbf_target_kind kind;
        uint32_t node;
        uint64_t addr, size;
        uint32_t group;
};

enum ntbf_req_kind {
        NTBF_REQ_BORROW,     /* borrow a device function */
        NTBF_REQ_MAP_DEVICE, /* make a target reachable by a device's DMA */
        NTBF_REQ_CONNECT,    /* make a target reachable by a node's CPU */
        NTBF_REQ_MCAST_JOIN, /* receive a multicast group into a buffer */
        NTBF_REQ_REQUESTER,  /* a device of a node reaches that node's NTB mappings */
};

/* Default DMA window of a borrow (docs/model.md). */
#define NTBF_DEFAULT_DMA_WINDOW (16 * NTBF_MiB)

/*
 * Inbound domains (docs/model.md): a node with an IOMMU hands out IOVA ranges from
 * [NTBF_IOVA_BASE, NTBF_PHYS_LIMIT); a node without one reserves DMA windows in a RAM pool
 * made of its RAM from NTBF_POOL_BASE up. Both are allocated first fit from the bottom.
 */
#define NTBF_IOVA_BASE (1 * NTBF_MiB)
#define NTBF_POOL_BASE (16 * NTBF_MiB)

struct ntbf_request {
        enum ntbf_req_kind kind;
        /* BORROW: device/function of its node, borrowed by node `by`. */
        uint32_t device, function;
        uint32_t by;
        uint64_t dma_window; /* BORROW; 0 means NTBF_DEFAULT_DMA_WINDOW */
        bool exclusive;      /* BORROW; recorded, the registry enforces it */
        /* MAP_DEVICE, REQUESTER: requester is the device function; CONNECT: requester.node's
         * CPU. REQUESTER: via_adapter is the adapter whose mappings the device uses. */
        struct ntbf_requester requester;
        struct ntbf_target target; /* MAP_DEVICE, CONNECT, MCAST_JOIN (node, addr, size, group) */
        /* Optional: leave the requester's host through this adapter / enter the target's. */
        uint32_t via_adapter, to_adapter; /* NTBF_NONE: least latency */
};

/* Initialize a request with no optional constraints. */
NTBF_EXPORT void ntbf_request_init(struct ntbf_request *r, enum ntbf_req_kind kind);

enum ntbf_res_kind {
        NTBF_RES_LUT,        /* adapter obj: slots [first, first + count) */
        NTBF_RES_RID,        /* adapter obj: one requester-ID entry for req (all its functions) */
        NTBF_RES_SWITCH_RID, /* switch obj: req registered (one entry on each connected port) */
        NTBF_RES_MCAST,      /* switch obj: multicast group slot `first` for group (size bytes) */
        NTBF_RES_RANGE,      /* node obj: [addr, addr + size) reserved in its inbound domain */
};

enum ntbf_dest_kind {
        NTBF_DEST_MEM,   /* a memory range of dst_node (RAM, a BAR) */
        NTBF_DEST_IOVA,  /* an IOVA range of dst_node's IOMMU domain */
        NTBF_DEST_MSI,   /* dst_node's MSI range */
        NTBF_DEST_MCAST, /* a multicast group */
};

struct ntbf_res {
        enum ntbf_res_kind kind;
        uint32_t obj;
        uint32_t first, count;     /* LUT slots */
        bool shared;               /* an existing entry/slot gains a reference */
        struct ntbf_requester req; /* RID, SWITCH_RID */
        uint32_t group;            /* MCAST, and LUT with dest MCAST */
        /* LUT: where the slots translate to (entry-aligned), and the near-side address. */
        enum ntbf_dest_kind dest;
        uint32_t dst_node, dst_adapter;
        uint64_t dst_addr;
        uint64_t addr, size; /* LUT: window address of the first slot and bytes; RANGE */
        /* RANGE: in a node with an IOMMU the range is IOVA and maps_to the physical address it
         * maps (0: pages are mapped later by the driver, as in a DMA window); in a node without
         * one it is RAM of the pool (maps_to 0). */
        uint64_t maps_to;
        uint32_t programmer; /* LUT: the node whose driver programs it (xlat side) */
        char what[48];       /* what it is for: "BAR0", "DMA window", "MSI window", ... */
};

enum ntbf_budget_kind {
        NTBF_BUDGET_LUT,        /* adapter LUT slots */
        NTBF_BUDGET_WINDOW,     /* adapter window bytes (whole slots) */
        NTBF_BUDGET_RID,        /* adapter requester-ID table */
        NTBF_BUDGET_SWITCH_RID, /* switch requester-ID entries per port */
        NTBF_BUDGET_MCAST,      /* switch multicast groups */
        NTBF_BUDGET_ADDR,       /* an addressing limit (not a count) */
        NTBF_BUDGET_RANGE,      /* bytes of a node's inbound domain (IOVA space or RAM pool) */
};

struct ntbf_plan {
        struct ntbf_request req;
        /* 0: admitted; NTBF_ENOSPC_BUDGET, NTBF_ENOPATH, NTBF_EADDRLIMIT, NTBF_EEXISTS (already a
         * member of the group), -EINVAL (the request names nothing valid), -E2BIG, -ENOMEM. */
        int result;
        /* requester -> target (borrow: borrower CPU -> device; join: no hops, first_adapter
         * and last_adapter are the member's adapter) */
        struct ntbf_path path;
        struct ntbf_path dma_path; /* borrow: device -> borrower RAM */
        struct ntbf_res *res;
        uint32_t nres, cap;
        /* Addresses the requester uses (0 where not applicable). */
        uint64_t bar_addr[NTBF_MAX_BARS]; /* borrow: BARs in the borrower's address space */
        uint64_t dma_addr; /* borrow: device-side DMA window base; map/connect: target address */
        uint64_t dma_iova; /* borrow: IOVA range in the borrower behind the DMA window (its RAM
                            * pool range if the borrower has no IOMMU) */
        uint64_t msi_addr; /* borrow: device-side address of the borrower's MSI range */
        /* Refusal details (result != 0; res is then empty). For NTBF_BUDGET_ADDR, used is the
         * highest address needed and total the limit (the first address out of reach). */
        enum ntbf_budget_kind refused_kind;
        uint32_t refused_obj; /* adapter, switch, or node (RANGE) index; NTBF_NONE if none */
        uint64_t refused_used, refused_total, refused_need;
        char why[512]; /* "b.ntb0: requester-ID table is full (32 of 32 used: ...); ..." */
};

NTBF_EXPORT void ntbf_plan_init(struct ntbf_plan *p);
NTBF_EXPORT void ntbf_plan_free(struct ntbf_plan *p);
/* Deep copy of a plan (its own res array); 0 or -ENOMEM. */
NTBF_EXPORT int ntbf_plan_copy(struct ntbf_plan *dst, const struct ntbf_plan *src);

/*
 * Create the state with its baseline (adapter entries reserved for CPUs, CPU requester
 * IDs on switches). If the baseline alone exceeds a budget, each overflow is reported to
 * diags at the object's location and NTBF_ECONFIG is returned (no state).
 */
NTBF_EXPORT int ntbf_state_new(const struct ntbf_topo *t, struct ntbf_state **out,
                               struct ntbf_diags *diags);
NTBF_EXPORT void ntbf_state_free(struct ntbf_state *s);
NTBF_EXPORT struct ntbf_state *ntbf_state_clone(const struct ntbf_state *s);
NTBF_EXPORT const struct ntbf_topo *ntbf_state_topo(const struct ntbf_state *s);

/*
 * A real device's BARs where its host's hardware placed them (the lender reads them from
 * sysfs when it lends; docs/daemon.md, "Where its BARs are"). Admission keeps reasoning in
 * the model's address map (which region, which path, which budget) but programs and answers
 * these addresses for function f's BARs: a LUT entry onto BAR b targets addr[b], a device of
 * the same host reaches it at addr[b]. addr[b] must be 0 exactly for the BARs the model does
 * not have, and a nonzero multiple of the BAR's size below NTBF_PHYS_LIMIT for the others.
 * NULL forgets them (the model's addresses again). Allocations already made keep what they
 * programmed. 0, or -EINVAL (nothing changed) with a sentence in why.
 */
NTBF_EXPORT int ntbf_state_set_bars(struct ntbf_state *s, uint32_t device, uint32_t f,
                                    const uint64_t addr[NTBF_MAX_BARS], char *why, size_t whylen);
/* Where function f of device's BAR b is programmed: the hardware's address if set, else the
 * model's (ntbf_device_bar_addr); 0 if there is no such BAR. */
NTBF_EXPORT uint64_t ntbf_state_bar_addr(const struct ntbf_state *s, uint32_t device, uint32_t f,
                                         uint32_t b);

/*
 * Decide a request against the state without changing it. Fills plan (which the caller
 * frees with ntbf_plan_free; the previous content of plan is not read, so free it before
 * reusing it) and returns plan->result.
 */
NTBF_EXPORT int ntbf_admit(const struct ntbf_state *s, const struct ntbf_request *req,
                           struct ntbf_plan *plan);

/*
 * Apply an admitted plan and return its allocation id. Fails with -ESTALE (changing
 * nothing) if the state changed since the plan was made so that it no longer applies.
 */
NTBF_EXPORT int ntbf_commit(struct ntbf_state *s, const struct ntbf_plan *plan, uint32_t *id);
/* Give back exactly what allocation id took. NTBF_ENOTFOUND if there is no such id. */
NTBF_EXPORT int ntbf_release(struct ntbf_state *s, uint32_t id);
/* The plan an allocation was made from, or NULL. */
NTBF_EXPORT const struct ntbf_plan *ntbf_alloc_plan(const struct ntbf_state *s, uint32_t id);
/* Fill up to max ids of live allocations (ascending) and return how many exist. */
NTBF_EXPORT size_t ntbf_state_allocs(const struct ntbf_state *s, uint32_t *ids, size_t max);

struct ntbf_budget_row {
        enum ntbf_budget_kind kind;
        uint32_t obj;  /* adapter, switch or node index */
        uint64_t used; /* including the baseline */
        uint64_t total;
        uint64_t baseline; /* taken at start (CPUs) */
};

/*
 * Fill up to max rows and return how many rows exist: per adapter LUT (slots), WINDOW
 * (bytes) and RID (entries; only if it has a table); per switch SWITCH_RID (entries on each
 * connected port; only if rid_table is set) and MCAST (groups; only if it has any); per node
 * RANGE (bytes of its inbound domain). Adapters first, then switches, then nodes.
 */
NTBF_EXPORT size_t ntbf_budget_rows(const struct ntbf_state *s, struct ntbf_budget_row *rows,
                                    size_t max);
NTBF_EXPORT const char *ntbf_budget_kind_name(enum ntbf_budget_kind k);
NTBF_EXPORT const char *ntbf_res_kind_name(enum ntbf_res_kind k);

NTBF_END_DECLS

#endif
