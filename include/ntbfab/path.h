/* ntbfab/path.h: shortest and link-disjoint paths between CPUs, memory and devices of hosts. */
#ifndef NTBFAB_PATH_H
#define NTBFAB_PATH_H

#include "topology.h"

NTBF_BEGIN_DECLS

/* Longest path the model handles, in hops. */
#define NTBF_PATH_MAX 64

enum ntbf_ep_kind {
        NTBF_EP_CPU,    /* a host's CPU (root complex) */
        NTBF_EP_RAM,    /* a host's memory (at the root complex) */
        NTBF_EP_DEVICE, /* a device of a host */
};

struct ntbf_endpoint {
        enum ntbf_ep_kind kind;
        uint32_t node;
        uint32_t device; /* NTBF_EP_DEVICE only */
};

enum ntbf_hop_kind {
        NTBF_HOP_DEVICE,  /* between a device and its root complex (obj = device) */
        NTBF_HOP_ROOT,    /* a host's root complex (obj = node) */
        NTBF_HOP_ADAPTER, /* through an NTB adapter (obj = adapter) */
        NTBF_HOP_LINK,    /* along a cable (obj = link) */
        NTBF_HOP_SWITCH,  /* through a cluster switch (obj = switch) */
        NTBF_HOP_CHASSIS, /* through an expansion chassis switch (obj = chassis); leaving or
                             entering the chassis it includes the chassis uplink */
};

struct ntbf_hop {
        enum ntbf_hop_kind kind;
        uint32_t obj;
        uint32_t in_port, out_port; /* cable ports used (adapters, switches); NTBF_NONE if none */
        uint32_t latency_ns;        /* modeled latency of this hop, one way */
};

struct ntbf_path {
        struct ntbf_endpoint from, to;
        uint32_t nhops;
        struct ntbf_hop hops[NTBF_PATH_MAX];
        uint32_t latency_ns; /* one way: a posted write; a read's round trip is twice this */
        uint32_t first_adapter,
            last_adapter; /* NTB hops leaving from / entering to; NONE if local */
};

struct ntbf_path_opts {
        const uint64_t *down_links; /* bitmap (bit i = link i) of links to avoid; NULL: none */
        uint32_t first_adapter;     /* leave the source host through this adapter, or NTBF_NONE */
        uint32_t last_adapter;      /* enter the target host through this adapter, or NTBF_NONE */
};

#define NTBF_PATH_OPTS_INIT                                                                        \
        {                                                                                          \
                NULL, NTBF_NONE, NTBF_NONE                                                         \
        }

/*
 * Parse "NODE" or "NODE.cpu" (the CPU), "NODE.ram" (memory), "NODE.DEVICE".
 * On error returns NTBF_ENOTFOUND and writes a sentence (with a "did you mean") to why.
 */
NTBF_EXPORT int ntbf_endpoint_parse(const struct ntbf_topo *t, const char *s,
                                    struct ntbf_endpoint *ep, char *why, size_t whylen);
NTBF_EXPORT const char *ntbf_endpoint_name(const struct ntbf_topo *t, struct ntbf_endpoint ep,
                                           char *buf, size_t len);

/*
 * The path of least modeled latency from a to b. Paths never transit a third host, nor
 * loop back through the source host's adapters. When a and b are in the same host the
 * path is local (no adapter) and the adapter options are ignored.
 * Returns 0, or NTBF_ENOPATH with a sentence naming the gap in why, or -E2BIG.
 */
NTBF_EXPORT int ntbf_path_find(const struct ntbf_topo *t, const struct ntbf_path_opts *opts,
                               struct ntbf_endpoint a, struct ntbf_endpoint b,
                               struct ntbf_path *out, char *why, size_t whylen);

/*
 * Up to k paths from a to b that share no link, of least total latency, sorted by
 * latency. *found is how many exist (<= k). Returns 0 if k were found, else NTBF_ENOPATH
 * with why naming the links every further path would have to reuse.
 */
NTBF_EXPORT int ntbf_path_disjoint(const struct ntbf_topo *t, const struct ntbf_path_opts *opts,
                                   struct ntbf_endpoint a, struct ntbf_endpoint b, unsigned k,
                                   struct ntbf_path *out, unsigned *found, char *why,
                                   size_t whylen);

NTBF_EXPORT const char *ntbf_hop_kind_name(enum ntbf_hop_kind k);
/* A short label for a hop: "borrower.ntb0", "top (port 3 -> 5)", "link lender.ntb0 - top.3". */
NTBF_EXPORT const char *ntbf_hop_name(const struct ntbf_topo *t, const struct ntbf_hop *h,
                                      char *buf, size_t len);

NTBF_END_DECLS

#endif
