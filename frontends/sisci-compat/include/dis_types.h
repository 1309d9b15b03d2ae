/*
 * dis_types.h: basic types shared by the SISCI-compatible headers (ntbfab's libsisci).
 * Also reachable as dis/dis_types.h. Every name, its value and its status are in
 * docs/sisci.md ("Every name of the headers").
 */
#ifndef _DIS_TYPES_H_
#define _DIS_TYPES_H_

#include <stddef.h>
#include <stdint.h>

/* Node id used as nodeId with SCI_FLAG_BROADCAST: every node of the multicast group. */
#define DIS_BROADCAST_NODEID_GROUP_ALL 252

/* The most adapters of one node the API describes (per-adapter lists are this long). */
#define DIS_MAX_NSCIS 4

/* ntbfab: the most elements SCIStartDmaTransferVec takes in one call. */
#define DIS_DMA_MAX_VECLEN 256

typedef uint32_t dis_nodeId_t;
typedef uint32_t dis_adapter_no_t;

/* One element of a vectored DMA transfer: size bytes between the two segment offsets. */
typedef struct {
        size_t size;
        size_t local_offset;
        size_t remote_offset;
        uint32_t flags; /* not read: programs leave it uninitialized */
} dis_dma_vec_t;

/*
 * The node ids of a host, one per adapter number (0 where the host has no such adapter):
 * an array, indexed as list[0] (SCIGetNodeIdByAdapterName, SCIGetNodeInfoByAdapterName).
 */
typedef unsigned int dis_nodeId_list_t[DIS_MAX_NSCIS];

/* The kind of an adapter (SCIGetNodeIdByAdapterName), and one per adapter number. */
typedef unsigned int dis_virt_adapter_t;
typedef unsigned int dis_adapter_type_t[DIS_MAX_NSCIS];
#define DIS_ADAPTER_TYPE_NONE 0u /* no adapter with that number */
#define DIS_ADAPTER_TYPE_NTB  1u /* ntbfab: an NTB adapter of any backend */

#endif
