/* dma.c: SISCI DMA transfers into a remote segment, with their bandwidth by size. */
/*
 * Usage: dma -rn NODE_ID [-server] [-a ADAPTER] [-min BYTES] [-max BYTES] [-read] [-json]
 *
 * The server offers a segment of -max bytes. The client fills a local segment of the same
 * size, then moves 4 KiB, 8 KiB, ... up to -max with SCIStartDmaTransfer and
 * SCIWaitForDMAQueue, timing each size, and checks the bytes that arrived through a
 * mapping of the remote segment. With -read it copies from the remote segment instead.
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

#define SERVER_SEGMENT 0x300
#define CLIENT_SEGMENT 0x301
#define READY_SEGMENT  0x302

static sci_error_t error;

static void check(const char *what)
{
        if (error != SCI_ERR_OK) {
                fprintf(stderr, "dma: %s failed: %s (0x%x)\n", what, SCIGetErrorString(error),
                        error);
                exit(1);
        }
}

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
        unsigned int remote_node = 0, adapter = 0;
        size_t min = 4096, max = 64u << 20;
        int server = 0, json = 0, readmode = 0;
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "-rn") && i + 1 < argc)
                        remote_node = (unsigned)strtoul(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-a") && i + 1 < argc)
                        adapter = (unsigned)strtoul(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-min") && i + 1 < argc)
                        min = strtoull(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-max") && i + 1 < argc)
                        max = strtoull(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-server"))
                        server = 1;
                else if (!strcmp(argv[i], "-read"))
                        readmode = 1;
                else if (!strcmp(argv[i], "-json"))
                        json = 1;
                else {
                        fprintf(stderr, "usage: dma -rn NODE_ID [-server] [-a ADAPTER] [-min "
                                        "BYTES] [-max BYTES] [-read] [-json]\n");
                        return 2;
                }
        }
        if (min < 4 || min > max) {
                fprintf(stderr, "dma: need 4 <= -min <= -max\n");
                return 2;
        }
        sci_desc_t sd;
        sci_local_segment_t local;
        sci_remote_segment_t remote;
        sci_map_t map, rmap;
        SCIInitialize(NO_FLAGS, &error);
        check("SCIInitialize");
        SCIOpen(&sd, NO_FLAGS, &error);
        check("SCIOpen");

        if (server) {
                /* Offer the segment, then wait for the client's "done" (a disconnect). */
                SCICreateSegment(sd, &local, SERVER_SEGMENT, max, NO_CALLBACK, NO_ARG, NO_FLAGS,
                                 &error);
                check("SCICreateSegment");
                SCIPrepareSegment(local, adapter, NO_FLAGS, &error);
                check("SCIPrepareSegment");
                SCISetSegmentAvailable(local, adapter, NO_FLAGS, &error);
                check("SCISetSegmentAvailable");
                unsigned int node, ad;
                int connected = 0;
                for (;;) {
                        sci_segment_cb_reason_t r =
                            SCIWaitForLocalSegmentEvent(local, &node, &ad, 60000, NO_FLAGS, &error);
                        check("SCIWaitForLocalSegmentEvent");
                        if (r == SCI_CB_CONNECT)
                                connected = 1;
                        else if (r == SCI_CB_DISCONNECT && connected)
                                break;
                }
                SCISetSegmentUnavailable(local, adapter, NO_FLAGS, &error);
                check("SCISetSegmentUnavailable");
                SCIRemoveSegment(local, NO_FLAGS, &error);
                check("SCIRemoveSegment");
                SCIClose(sd, NO_FLAGS, &error);
                check("SCIClose");
                SCITerminate();
                return 0;
        }

        SCICreateSegment(sd, &local, CLIENT_SEGMENT, max, NO_CALLBACK, NO_ARG, NO_FLAGS, &error);
        check("SCICreateSegment");
        SCIPrepareSegment(local, adapter, NO_FLAGS, &error);
        check("SCIPrepareSegment");
        uint8_t *buf = SCIMapLocalSegment(local, &map, 0, max, NULL, NO_FLAGS, &error);
        check("SCIMapLocalSegment");
        SCIConnectSegment(sd, &remote, remote_node, SERVER_SEGMENT, adapter, NO_CALLBACK, NO_ARG,
                          20000, NO_FLAGS, &error);
        check("SCIConnectSegment");
        volatile uint8_t *rbuf = SCIMapRemoteSegment(remote, &rmap, 0, max, NULL, NO_FLAGS, &error);
        check("SCIMapRemoteSegment");
        sci_dma_queue_t dq;
        SCICreateDMAQueue(sd, &dq, adapter, 16, NO_FLAGS, &error);
        check("SCICreateDMAQueue");

        if (json)
                printf("[");
        else
                printf("%12s %12s %12s\n", "bytes", "us", "MB/s");
        unsigned rows = 0;
        for (size_t size = min; size <= max; size *= 2) {
                unsigned seed = (unsigned)size * 2654435761u;
                if (readmode)
                        for (size_t k = 0; k < size; k += 4096)
                                rbuf[k] = (uint8_t)(seed + k / 4096);
                else
                        for (size_t k = 0; k < size; k++)
                                buf[k] = (uint8_t)(seed + k / 4096 + k);
                /* Repeat small sizes so each figure covers some milliseconds. */
                unsigned reps = size < (1u << 20) ? (unsigned)((1u << 20) / size) : 1;
                if (reps > 64)
                        reps = 64;
                double t0 = now_s();
                for (unsigned r = 0; r < reps; r++) {
                        SCIStartDmaTransfer(dq, local, remote, 0, size, 0, NO_CALLBACK, NO_ARG,
                                            readmode ? SCI_FLAG_DMA_READ : NO_FLAGS, &error);
                        check("SCIStartDmaTransfer");
                        sci_dma_queue_state_t st =
                            SCIWaitForDMAQueue(dq, SCI_INFINITE_TIMEOUT, NO_FLAGS, &error);
                        check("SCIWaitForDMAQueue");
                        if (st != SCI_DMAQUEUE_DONE) {
                                fprintf(stderr, "dma: queue state %d after a transfer\n", st);
                                return 1;
                        }
                }
                double us = (now_s() - t0) * 1e6 / reps;
                int bad = 0;
                if (readmode) {
                        for (size_t k = 0; k < size; k += 4096)
                                bad |= buf[k] != (uint8_t)(seed + k / 4096);
                } else {
                        for (size_t k = 0; k < size; k += 997)
                                bad |= rbuf[k] != (uint8_t)(seed + k / 4096 + k);
                        bad |= rbuf[size - 1] != (uint8_t)(seed + (size - 1) / 4096 + size - 1);
                }
                if (bad) {
                        fprintf(stderr, "dma: %zu bytes arrived wrong\n", size);
                        return 1;
                }
                double mbs = size / us;
                if (json)
                        printf("%s{\"bytes\": %zu, \"us\": %.1f, \"MBps\": %.1f}", rows ? ", " : "",
                               size, us, mbs);
                else
                        printf("%12zu %12.1f %12.1f\n", size, us, mbs);
                rows++;
                if (size > max / 2)
                        break;
        }
        if (json)
                printf("]\n");
        SCIRemoveDMAQueue(dq, NO_FLAGS, &error);
        check("SCIRemoveDMAQueue");
        SCIUnmapSegment(rmap, NO_FLAGS, &error);
        check("SCIUnmapSegment");
        SCIDisconnectSegment(remote, NO_FLAGS, &error);
        check("SCIDisconnectSegment");
        SCIUnmapSegment(map, NO_FLAGS, &error);
        check("SCIUnmapSegment");
        SCIRemoveSegment(local, NO_FLAGS, &error);
        check("SCIRemoveSegment");
        SCIClose(sd, NO_FLAGS, &error);
        check("SCIClose");
        SCITerminate();
        return 0;
}
