/* rm: reflective memory across a multicast group, the way Dolphin's reflective-memory demo uses
 * it: a broadcast segment per node (SCI_FLAG_BROADCAST on create, prepare, connect and map), a
 * barrier over CPU stores through the group mapping, then rounds of values.
 * Usage: rm -rank R -nodes N [-loops L]   (rank 0 leads) */
#include <string.h>
#include <unistd.h>

#include "sxc.h"

#define GROUP     3
#define SIZE      16384
#define SYNC      0 /* word offsets */
#define VALUES    256
#define CMD_READY 0x5eadu

static unsigned rank, nodes, loops = 100;

/* Each rank announces itself at SYNC + rank until the leader answers at SYNC. */
static void barrier(sci_sequence_t seq, volatile unsigned *rd, volatile unsigned *wr)
{
        if (rank) {
                wr[SYNC + rank] = CMD_READY;
                SCIFlush(seq, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY);
                while (rd[SYNC] != CMD_READY)
                        usleep(100);
                return;
        }
        for (unsigned r = 1; r < nodes; r++)
                while (rd[SYNC + r] != CMD_READY)
                        usleep(100);
        wr[SYNC] = CMD_READY;
        SCIFlush(seq, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY);
}

int main(int argc, char **argv)
{
        for (int i = 1; i + 1 < argc; i += 2) {
                if (!strcmp(argv[i], "-rank"))
                        rank = (unsigned)atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "-nodes"))
                        nodes = (unsigned)atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "-loops"))
                        loops = (unsigned)atoi(argv[i + 1]);
        }
        CHECK(nodes >= 2 && rank < nodes, "usage: rm -rank R -nodes N [-loops L]");
        sci_desc_t sd;
        sci_local_segment_t local;
        sci_remote_segment_t remote;
        sci_map_t lmap, rmap;
        sci_sequence_t seq;
        sci_error_t err;
        TRY(SCIInitialize, NO_FLAGS);
        TRY(SCIOpen, &sd, NO_FLAGS);
        TRY(SCICreateSegment, sd, &local, GROUP, SIZE, NO_CALLBACK, NO_ARG, SCI_FLAG_BROADCAST);
        TRY(SCIPrepareSegment, local, ADAPTER_NO, SCI_FLAG_BROADCAST);
        volatile unsigned *rd = SCIMapLocalSegment(local, &lmap, 0, SIZE, NULL, NO_FLAGS, &err);
        CHECK(err == SCI_ERR_OK, "SCIMapLocalSegment: %s", SCIGetErrorString(err));
        TRY(SCISetSegmentAvailable, local, ADAPTER_NO, NO_FLAGS);
        do {
                SCIConnectSegment(sd, &remote, DIS_BROADCAST_NODEID_GROUP_ALL, GROUP, ADAPTER_NO,
                                  NO_CALLBACK, NULL, SCI_INFINITE_TIMEOUT, SCI_FLAG_BROADCAST,
                                  &err);
                if (err != SCI_ERR_OK)
                        usleep(10000);
        } while (err != SCI_ERR_OK);
        volatile unsigned *wr = (volatile unsigned *)SCIMapRemoteSegment(
            remote, &rmap, 0, SIZE, NULL, SCI_FLAG_BROADCAST, &err);
        CHECK(err == SCI_ERR_OK, "SCIMapRemoteSegment: %s", SCIGetErrorString(err));
        TRY(SCICreateMapSequence, rmap, &seq, NO_FLAGS);
        printf("rank %u: member of group %d\n", rank, GROUP);
        fflush(stdout);

        barrier(seq, rd, wr);
        printf("rank %u: passed the barrier\n", rank);
        fflush(stdout);
        /* Rounds: the leader stores v at VALUES, each rank answers v + 1 at VALUES + rank. */
        for (unsigned v = 1; v <= loops; v += 2) {
                if (!rank) {
                        wr[VALUES] = v;
                        SCIFlush(seq, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY);
                        for (unsigned r = 1; r < nodes; r++)
                                while (rd[VALUES + r] != v + 1)
                                        ;
                } else {
                        while (rd[VALUES] != v)
                                ;
                        wr[VALUES + rank] = v + 1;
                        SCIFlush(seq, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY);
                }
        }
        printf("rank %u: %u rounds\n", rank, loops / 2);
        /* A last barrier so that nobody leaves the group while another still waits. */
        barrier(seq, rd + 64, wr + 64);
        TRY(SCIRemoveSequence, seq, NO_FLAGS);
        TRY(SCIUnmapSegment, lmap, NO_FLAGS);
        TRY(SCIRemoveSegment, local, NO_FLAGS); /* the group connection is still there */
        TRY(SCIUnmapSegment, rmap, NO_FLAGS);
        TRY(SCIDisconnectSegment, remote, NO_FLAGS);
        TRY(SCIClose, sd, NO_FLAGS);
        SCITerminate();
        printf("rank %u: done\n", rank);
        return 0;
}
