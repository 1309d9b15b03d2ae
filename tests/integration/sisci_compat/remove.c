/* remove: a segment removed while another node is connected to it (the connector is told:
 * SCI_CB_DISCONNECT), a map unmapped while its sequence lives, SCI_FLAG_DMA_GLOBAL on create.
 * Usage: remove -server | remove -client NODEID */
#include <string.h>
#include <unistd.h>

#include "sxc.h"

#define SEG_ID 0x5c20

int main(int argc, char **argv)
{
        CHECK(argc >= 2, "usage: remove -server | -client NODEID");
        sci_desc_t sd;
        sci_error_t err;
        TRY(SCIInitialize, NO_FLAGS);
        TRY(SCIOpen, &sd, NO_FLAGS);
        if (!strcmp(argv[1], "-server")) {
                sci_local_segment_t seg;
                TRY(SCICreateSegment, sd, &seg, SEG_ID, 8192, NO_CALLBACK, NO_ARG,
                    SCI_FLAG_DMA_GLOBAL);
                TRY(SCIPrepareSegment, seg, ADAPTER_NO, NO_FLAGS);
                TRY(SCISetSegmentAvailable, seg, ADAPTER_NO, NO_FLAGS);
                unsigned node, adapter;
                sci_segment_cb_reason_t why = SCIWaitForLocalSegmentEvent(
                    seg, &node, &adapter, SCI_INFINITE_TIMEOUT, NO_FLAGS, &err);
                CHECK(err == SCI_ERR_OK && why == SCI_CB_CONNECT, "no connection (%d)", why);
                sci_map_t lm;
                volatile unsigned *p = SCIMapLocalSegment(seg, &lm, 0, 8192, NULL, NO_FLAGS, &err);
                CHECK(err == SCI_ERR_OK, "SCIMapLocalSegment: %s", SCIGetErrorString(err));
                while (p[0] != 1) /* the client has mapped it and stored */
                        usleep(1000);
                TRY(SCIUnmapSegment, lm, NO_FLAGS);
                TRY(SCIRemoveSegment, seg, NO_FLAGS); /* connected: it goes all the same */
                printf("removed segment 0x%x while node %u was connected\n", SEG_ID, node);
        } else {
                CHECK(argc == 3, "usage: remove -client NODEID");
                sci_remote_segment_t rs;
                sci_map_t map;
                sci_sequence_t seq;
                TRY(SCIConnectSegment, sd, &rs, (unsigned)strtoul(argv[2], NULL, 0), SEG_ID,
                    ADAPTER_NO, NO_CALLBACK, NO_ARG, SCI_INFINITE_TIMEOUT, NO_FLAGS);
                volatile unsigned *p = SCIMapRemoteSegment(rs, &map, 0, 8192, NULL, NO_FLAGS, &err);
                CHECK(err == SCI_ERR_OK, "SCIMapRemoteSegment: %s", SCIGetErrorString(err));
                TRY(SCICreateMapSequence, map, &seq, NO_FLAGS);
                p[0] = 1;
                sci_error_t status;
                sci_segment_cb_reason_t why = SCIWaitForRemoteSegmentEvent(
                    rs, &status, 60000, NO_FLAGS, &err);
                CHECK(err == SCI_ERR_OK, "SCIWaitForRemoteSegmentEvent: %s",
                      SCIGetErrorString(err));
                CHECK(why == SCI_CB_DISCONNECT, "the removal was reported as %d, not %d", why,
                      SCI_CB_DISCONNECT);
                TRY(SCIUnmapSegment, map, NO_FLAGS); /* its sequence is still alive */
                TRY(SCIRemoveSequence, seq, NO_FLAGS);
                TRY(SCIDisconnectSegment, rs, NO_FLAGS);
                printf("told of the removal (SCI_CB_DISCONNECT)\n");
        }
        TRY(SCIClose, sd, NO_FLAGS);
        SCITerminate();
        return 0;
}
