/*
 * dis_types.h: basic types shared by SISCI-compatible headers (ntbfab's libsisci).
 * Also reachable as dis/dis_types.h. Written from shared/spec/sisci.md; see docs/sisci.md.
 */
#ifndef _DIS_TYPES_H_
#define _DIS_TYPES_H_

#include <stddef.h>
#include <stdint.h>

/* Node id used as nodeId with SCI_FLAG_BROADCAST: every node of the multicast group. */
#define DIS_BROADCAST_NODEID_GROUP_ALL 252

/* ntbfab: the most elements SCIStartDmaTransferVec takes in one call. */
#define DIS_DMA_MAX_VECLEN 256

typedef uint32_t dis_nodeId_t;
typedef uint32_t dis_adapter_no_t;

/* One element of a vectored DMA transfer: size bytes between the two segment offsets. */
typedef struct {
        size_t size;
        size_t local_offset;
        size_t remote_offset;
        uint32_t flags; /* ntbfab: per-element flags, 0 (reserved) */
} dis_dma_vec_t;

/* ntbfab: the answer of SCIGetNodeIdByAdapterName. */
#define DIS_MAX_NODEIDS 16
typedef struct {
        unsigned int count;
        unsigned int nodeid[DIS_MAX_NODEIDS];
} dis_nodeId_list_t;

typedef struct {
        unsigned int adapter_no;
} dis_virt_adapter_t;

#endif
