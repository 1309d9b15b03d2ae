/* core/graph.h: the fabric as a graph (CSR arrays), built once per finalized topology. */
#ifndef NTBF_CORE_GRAPH_H
#define NTBF_CORE_GRAPH_H

#include "ntbfab/topology.h"

struct ntbf__arc {
        uint32_t from, to;
        uint32_t link;               /* cable, or NTBF_NONE for a host <-> adapter arc */
        uint32_t port_from, port_to; /* cable ports at each end */
        uint32_t cost;               /* cable latency */
};

/* Vertices: hosts [0, nnodes), adapters, then switches. */
struct ntbf__graph {
        uint32_t nv, nnodes, nadapters, nswitches, narcs;
        uint32_t *first; /* arcs of vertex v: arcs[first[v] .. first[v + 1]) */
        struct ntbf__arc *arcs;
        uint32_t *vcost; /* latency of passing through the vertex */
        uint32_t *anode; /* host (node index) of each adapter */
        uint32_t *rev;   /* the arc going back along the same cable (or host-adapter pair) */
};

struct ntbf__graph *ntbf__graph_build(const struct ntbf_topo *t);
void ntbf__graph_free(struct ntbf__graph *g);

/*
 * The least-latency tree from vertex src to every vertex, under the rules of
 * ntbf_path_find (hosts are leaves, no transit through another host's adapter): prev[v] is
 * the arc that reaches v (NTBF_NONE for src and unreached vertices), dist[v] its latency.
 * From a host, every host's tree path is the one ntbf_path_find returns. From a switch
 * (src >= nnodes + nadapters) no adapter carries traffic between cables, so the tree is that
 * of any host whose only cable goes to that switch, beyond the switch (distances shifted by
 * a constant, which keeps the tie-breaking order). dist and prev hold g->nv
 * entries; heap is caller-provided scratch of ntbf__sssp_heap_bytes(g) bytes, so a caller
 * computing many trees allocates once.
 */
size_t ntbf__sssp_heap_bytes(const struct ntbf__graph *g);
void ntbf__sssp_tree(const struct ntbf__graph *g, uint32_t src, uint64_t *dist, uint32_t *prev,
                     void *heap);

#endif
