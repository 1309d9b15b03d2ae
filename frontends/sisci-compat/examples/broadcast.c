/* broadcast.c: one node writes a broadcast (multicast) segment, every member receives it. */
/*
 * Usage: broadcast -receiver [-size BYTES] [-a ADAPTER]
 *        broadcast -sender [-size BYTES] [-dma] [-a ADAPTER]
 *
 * Receivers create a segment with SCI_FLAG_BROADCAST and make it available: that joins the
 * multicast group of its segment id. The sender connects to DIS_BROADCAST_NODEID_GROUP_ALL
 * with the same id and SCI_FLAG_BROADCAST, and one write (SCIMemCpy, or a DMA transfer with
 * -dma) reaches every member's memory: the switches replicate it (article 6.5). The last
 * word is written last: a receiver that sees it has the whole pattern.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sisci_api.h"

#define NO_FLAGS    0
#define NO_CALLBACK NULL
#define NO_ARG      NULL

#define GROUP_SEGMENT 0x500
#define MAGIC         0x600df00du

static sci_error_t error;

static void check(const char *what)
{
        if (error != SCI_ERR_OK) {
                fprintf(stderr, "broadcast: %s failed: %s (0x%x)\n", what, SCIGetErrorString(error),
                        error);
                exit(1);
        }
}

static uint8_t pattern(size_t k)
{
        return (uint8_t)(k * 31 + k / 4096);
}

int main(int argc, char **argv)
{
        int sender = -1, dma = 0;
        unsigned adapter = 0;
        size_t size = 65536;
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "-sender"))
                        sender = 1;
                else if (!strcmp(argv[i], "-receiver"))
                        sender = 0;
                else if (!strcmp(argv[i], "-dma"))
                        dma = 1;
                else if (!strcmp(argv[i], "-size") && i + 1 < argc)
                        size = strtoull(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-a") && i + 1 < argc)
                        adapter = (unsigned)strtoul(argv[++i], NULL, 0);
                else
                        sender = -2;
        }
        if (sender < 0 || size < 8 || size % 4) {
                fprintf(stderr, "usage: broadcast -receiver|-sender [-size BYTES] [-dma] [-a "
                                "ADAPTER]\n");
                return 2;
        }
        sci_desc_t sd;
        SCIInitialize(NO_FLAGS, &error);
        check("SCIInitialize");
        SCIOpen(&sd, NO_FLAGS, &error);
        check("SCIOpen");
        unsigned node;
        SCIGetLocalNodeId(adapter, &node, NO_FLAGS, &error);
        check("SCIGetLocalNodeId");

        if (!sender) {
                sci_local_segment_t seg;
                sci_map_t map;
                SCICreateSegment(sd, &seg, GROUP_SEGMENT, size, NO_CALLBACK, NO_ARG,
                                 SCI_FLAG_BROADCAST, &error);
                check("SCICreateSegment");
                SCIPrepareSegment(seg, adapter, NO_FLAGS, &error);
                check("SCIPrepareSegment");
                volatile uint8_t *mem =
                    SCIMapLocalSegment(seg, &map, 0, size, NULL, NO_FLAGS, &error);
                check("SCIMapLocalSegment");
                SCISetSegmentAvailable(seg, adapter, NO_FLAGS, &error);
                check("SCISetSegmentAvailable");
                printf("node %u: member of group %#x\n", node, GROUP_SEGMENT);
                fflush(stdout);
                volatile uint32_t *last = (volatile uint32_t *)(mem + size - 4);
                struct timespec start, now;
                clock_gettime(CLOCK_MONOTONIC, &start);
                while (*last != MAGIC) {
                        clock_gettime(CLOCK_MONOTONIC, &now);
                        if (now.tv_sec - start.tv_sec > 30) {
                                fprintf(stderr, "broadcast: node %u received nothing\n", node);
                                return 1;
                        }
                        struct timespec ts = {0, 100000};
                        nanosleep(&ts, NULL);
                }
                for (size_t k = 0; k < size - 4; k++)
                        if (mem[k] != pattern(k)) {
                                fprintf(stderr, "broadcast: node %u: byte %zu is %#x, not %#x\n",
                                        node, k, mem[k], pattern(k));
                                return 1;
                        }
                printf("node %u: received %zu bytes\n", node, size);
                SCIUnmapSegment(map, NO_FLAGS, &error);
                check("SCIUnmapSegment");
                SCIRemoveSegment(seg, NO_FLAGS, &error);
                check("SCIRemoveSegment");
        } else {
                sci_remote_segment_t group;
                sci_map_t map;
                SCIConnectSegment(sd, &group, DIS_BROADCAST_NODEID_GROUP_ALL, GROUP_SEGMENT,
                                  adapter, NO_CALLBACK, NO_ARG, 20000, SCI_FLAG_BROADCAST, &error);
                check("SCIConnectSegment(broadcast)");
                if (SCIGetRemoteSegmentSize(group) < size) {
                        fprintf(stderr, "broadcast: the group holds only %zu bytes\n",
                                SCIGetRemoteSegmentSize(group));
                        return 1;
                }
                SCIMapRemoteSegment(group, &map, 0, size, NULL, NO_FLAGS, &error);
                check("SCIMapRemoteSegment");
                uint8_t *buf = malloc(size);
                if (!buf)
                        return 1;
                for (size_t k = 0; k < size - 4; k++)
                        buf[k] = pattern(k);
                uint32_t magic = MAGIC;
                if (dma) {
                        sci_local_segment_t src;
                        sci_map_t smap;
                        sci_dma_queue_t dq;
                        SCICreateSegment(sd, &src, 0x501, size, NO_CALLBACK, NO_ARG, NO_FLAGS,
                                         &error);
                        check("SCICreateSegment(source)");
                        SCIPrepareSegment(src, adapter, NO_FLAGS, &error);
                        check("SCIPrepareSegment");
                        uint8_t *s =
                            SCIMapLocalSegment(src, &smap, 0, size, NULL, NO_FLAGS, &error);
                        check("SCIMapLocalSegment");
                        memcpy(s, buf, size - 4);
                        SCICreateDMAQueue(sd, &dq, adapter, 1, NO_FLAGS, &error);
                        check("SCICreateDMAQueue");
                        SCIStartDmaTransfer(dq, src, group, 0, size - 4, 0, NO_CALLBACK, NO_ARG,
                                            SCI_FLAG_DMA_WAIT, &error);
                        check("SCIStartDmaTransfer(broadcast)");
                        SCIRemoveDMAQueue(dq, NO_FLAGS, &error);
                        check("SCIRemoveDMAQueue");
                        SCIUnmapSegment(smap, NO_FLAGS, &error);
                        check("SCIUnmapSegment");
                        SCIRemoveSegment(src, NO_FLAGS, &error);
                        check("SCIRemoveSegment");
                } else {
                        SCIMemCpy(NULL, buf, map, 0, size - 4, NO_FLAGS, &error);
                        check("SCIMemCpy(broadcast)");
                }
                SCIMemCpy(NULL, &magic, map, size - 4, 4, NO_FLAGS, &error);
                check("SCIMemCpy(broadcast, last word)");
                printf("node %u: sent %zu bytes to every member of group %#x%s\n", node, size,
                       GROUP_SEGMENT, dma ? " by DMA" : "");
                free(buf);
                SCIUnmapSegment(map, NO_FLAGS, &error);
                check("SCIUnmapSegment");
                SCIDisconnectSegment(group, NO_FLAGS, &error);
                check("SCIDisconnectSegment");
        }
        SCIClose(sd, NO_FLAGS, &error);
        check("SCIClose");
        SCITerminate();
        return 0;
}
