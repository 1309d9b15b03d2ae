/* names: the names of Dolphin's headers that programs use, used the way they use them: the node
 * list indexed as an array, DIS_MAX_NSCIS, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY, the undocumented
 * SetSciMemCopyFunction. Usage: names HOST NODEID */
#include <dis/dis_types.h>
#include <string.h>

#include "sxc.h"

int main(int argc, char **argv)
{
        CHECK(argc == 3, "usage: names HOST NODEID");
        unsigned want = (unsigned)strtoul(argv[2], NULL, 0);
        TRY(SCIInitialize, NO_FLAGS);
        sci_desc_t sd;
        TRY(SCIOpen, &sd, NO_FLAGS);

        dis_nodeId_list_t nodelist;
        dis_virt_adapter_t adapter_type;
        TRY(SCIGetNodeIdByAdapterName, argv[1], &nodelist, &adapter_type, NO_FLAGS);
        CHECK(nodelist[0] == want, "nodelist[0] is %u, not %u", nodelist[0], want);

        /* As a userspace NVMe library finds a node and an adapter reaching it. */
        uint32_t adapter_list[DIS_MAX_NSCIS];
        dis_nodeId_list_t node_id_list;
        dis_adapter_type_t adapter_type_list;
        TRY(SCIGetNodeInfoByAdapterName, argv[1], adapter_list, &node_id_list, &adapter_type_list,
            NO_FLAGS);
        size_t i;
        for (i = 0; i < DIS_MAX_NSCIS; ++i)
                if (node_id_list[i] != 0)
                        break;
        CHECK(i < DIS_MAX_NSCIS && node_id_list[i] == want && adapter_list[i] == i,
              "no adapter of %s found", argv[1]);

        sci_error_t err;
        SCIGetNodeIdByAdapterName("no-such-host", &nodelist, &adapter_type, NO_FLAGS, &err);
        CHECK(err != SCI_ERR_OK && nodelist[0] == 0, "an unknown host has node id %u", nodelist[0]);

        SetSciMemCopyFunction(5);
        CHECK(GetSciMemCopyFunction() == 5, "the copy function number was not kept");

        /* A segment of this node, written through a map and flushed as reflective-memory
         * programs flush their stores. */
        sci_local_segment_t seg;
        sci_map_t map;
        TRY(SCICreateSegment, sd, &seg, 0x5c01, 4096, NO_CALLBACK, NO_ARG, NO_FLAGS);
        TRY(SCIPrepareSegment, seg, ADAPTER_NO, NO_FLAGS);
        volatile unsigned *p = SCIMapLocalSegment(seg, &map, 0, 4096, NULL, NO_FLAGS, &err);
        CHECK(err == SCI_ERR_OK, "SCIMapLocalSegment: %s", SCIGetErrorString(err));
        p[0] = 42;
        SCIFlush(NULL, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY);
        SCIStoreBarrier(NULL, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY);
        TRY(SCIUnmapSegment, map, NO_FLAGS);
        TRY(SCIRemoveSegment, seg, NO_FLAGS);
        TRY(SCIClose, sd, NO_FLAGS);
        SCITerminate();
        printf("names: %s is node %u (adapter %zu), DIS_MAX_NSCIS %d\n", argv[1], want, i,
               DIS_MAX_NSCIS);
        return 0;
}
