/* pingpong.c: a SISCI shared-memory ping-pong: each side stores into the other's segment. */
/*
 * Usage: pingpong -rn NODE_ID [-server] [-a ADAPTER] [-loops N] [-json]
 *
 * Both sides create a local segment and connect to the other's. The client stores a
 * counter into the server's segment; the server sees it in its own memory (a local load)
 * and stores it back into the client's segment. Remote stores are posted, loads are local,
 * which is how SISCI programs get the lowest latency. Prints the round-trip times.
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

#define SERVER_SEGMENT 0x100
#define CLIENT_SEGMENT 0x101
#define SEGMENT_SIZE   4096

#define CHECK(call, what)                                                                          \
        do {                                                                                       \
                call;                                                                              \
                if (error != SCI_ERR_OK) {                                                         \
                        fprintf(stderr, "pingpong: %s failed: %s (0x%x)\n", what,                  \
                                SCIGetErrorString(error), error);                                  \
                        exit(1);                                                                   \
                }                                                                                  \
        } while (0)

static double now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
        unsigned int remote_node = 0, adapter = 0, loops = 1000;
        int server = 0, json = 0;
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "-rn") && i + 1 < argc)
                        remote_node = (unsigned)strtoul(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-a") && i + 1 < argc)
                        adapter = (unsigned)strtoul(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-loops") && i + 1 < argc)
                        loops = (unsigned)strtoul(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-server"))
                        server = 1;
                else if (!strcmp(argv[i], "-json"))
                        json = 1;
                else {
                        fprintf(stderr, "usage: pingpong -rn NODE_ID [-server] [-a ADAPTER] "
                                        "[-loops N] [-json]\n");
                        return 2;
                }
        }
        if (!loops)
                loops = 1;
        sci_error_t error;
        sci_desc_t sd;
        sci_local_segment_t local;
        sci_remote_segment_t remote;
        sci_map_t local_map, remote_map;
        unsigned int local_node;

        CHECK(SCIInitialize(NO_FLAGS, &error), "SCIInitialize");
        CHECK(SCIOpen(&sd, NO_FLAGS, &error), "SCIOpen");
        CHECK(SCIGetLocalNodeId(adapter, &local_node, NO_FLAGS, &error), "SCIGetLocalNodeId");

        unsigned int mine = server ? SERVER_SEGMENT : CLIENT_SEGMENT;
        unsigned int theirs = server ? CLIENT_SEGMENT : SERVER_SEGMENT;
        CHECK(
            SCICreateSegment(sd, &local, mine, SEGMENT_SIZE, NO_CALLBACK, NO_ARG, NO_FLAGS, &error),
            "SCICreateSegment");
        CHECK(SCIPrepareSegment(local, adapter, NO_FLAGS, &error), "SCIPrepareSegment");
        volatile uint32_t *in =
            SCIMapLocalSegment(local, &local_map, 0, SEGMENT_SIZE, NULL, NO_FLAGS, &error);
        if (error != SCI_ERR_OK) {
                fprintf(stderr, "pingpong: SCIMapLocalSegment: %s\n", SCIGetErrorString(error));
                return 1;
        }
        CHECK(SCISetSegmentAvailable(local, adapter, NO_FLAGS, &error), "SCISetSegmentAvailable");

        /* The other side may not have created its segment yet: wait for it. */
        CHECK(SCIConnectSegment(sd, &remote, remote_node, theirs, adapter, NO_CALLBACK, NO_ARG,
                                20000, NO_FLAGS, &error),
              "SCIConnectSegment");
        volatile uint32_t *out = (volatile uint32_t *)SCIMapRemoteSegment(
            remote, &remote_map, 0, SEGMENT_SIZE, NULL, NO_FLAGS, &error);
        if (error != SCI_ERR_OK) {
                fprintf(stderr, "pingpong: SCIMapRemoteSegment: %s\n", SCIGetErrorString(error));
                return 1;
        }

        double *rtt = calloc(loops, sizeof(*rtt));
        if (!rtt)
                return 1;
        /* A sentinel in word 1 tells that the peer is up before the first ping. */
        out[1] = 1;
        while (in[1] != 1)
                ;
        for (uint32_t i = 1; i <= loops; i++) {
                if (server) {
                        while (in[0] != i)
                                ;
                        out[0] = i;
                } else {
                        double t0 = now_us();
                        out[0] = i;
                        while (in[0] != i)
                                ;
                        rtt[i - 1] = now_us() - t0;
                }
        }
        if (!server) {
                qsort(rtt, loops, sizeof(*rtt), cmp);
                double med = rtt[loops / 2], p99 = rtt[(size_t)(loops * 0.99)];
                if (json)
                        printf("{\"node\": %u, \"peer\": %u, \"loops\": %u, \"median_us\": %.3f, "
                               "\"p99_us\": %.3f}\n",
                               local_node, remote_node, loops, med, p99);
                else
                        printf("pingpong: node %u <-> node %u: %u round trips of 4 bytes: median "
                               "%.3f us, p99 %.3f us\n",
                               local_node, remote_node, loops, med, p99);
        }
        /* The client waits for the server to see the last store before tearing down. */
        out[2] = 0xd0e;
        while (in[2] != 0xd0e)
                ;
        free(rtt);

        CHECK(SCIUnmapSegment(remote_map, NO_FLAGS, &error), "SCIUnmapSegment");
        CHECK(SCIDisconnectSegment(remote, NO_FLAGS, &error), "SCIDisconnectSegment");
        CHECK(SCIUnmapSegment(local_map, NO_FLAGS, &error), "SCIUnmapSegment");
        CHECK(SCISetSegmentUnavailable(local, adapter, NO_FLAGS, &error),
              "SCISetSegmentUnavailable");
        /* The peer may still be connected: wait for it to disconnect before removing. */
        for (int tries = 0;; tries++) {
                SCIRemoveSegment(local, NO_FLAGS, &error);
                if (error != SCI_ERR_BUSY || tries > 2000)
                        break;
                struct timespec ts = {0, 5 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        if (error != SCI_ERR_OK) {
                fprintf(stderr, "pingpong: SCIRemoveSegment: %s\n", SCIGetErrorString(error));
                return 1;
        }
        CHECK(SCIClose(sd, NO_FLAGS, &error), "SCIClose");
        SCITerminate();
        return 0;
}
