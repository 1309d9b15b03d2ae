/* intlat.c: interrupt and data-interrupt round trips between two SISCI nodes. */
/*
 * Usage: intlat -rn NODE_ID [-server] [-data] [-size BYTES] [-a ADAPTER] [-loops N] [-json]
 *
 * Each side creates an interrupt (or a data interrupt) with a fixed number and connects to
 * the other's. The client triggers the server's, the server waits for it and triggers the
 * client's back; the client times the round trip. With -data every trigger carries BYTES
 * of payload, which the receiver checks.
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

#define SERVER_INTNO 0x20
#define CLIENT_INTNO 0x21

static sci_error_t error;

static void check(const char *what)
{
        if (error != SCI_ERR_OK) {
                fprintf(stderr, "intlat: %s failed: %s (0x%x)\n", what, SCIGetErrorString(error),
                        error);
                exit(1);
        }
}

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
        unsigned int remote_node = 0, adapter = 0, loops = 1000, size = 4;
        int server = 0, data = 0, json = 0;
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "-rn") && i + 1 < argc)
                        remote_node = (unsigned)strtoul(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-a") && i + 1 < argc)
                        adapter = (unsigned)strtoul(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-loops") && i + 1 < argc)
                        loops = (unsigned)strtoul(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-size") && i + 1 < argc)
                        size = (unsigned)strtoul(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-server"))
                        server = 1;
                else if (!strcmp(argv[i], "-data"))
                        data = 1;
                else if (!strcmp(argv[i], "-json"))
                        json = 1;
                else {
                        fprintf(stderr, "usage: intlat -rn NODE_ID [-server] [-data] [-size "
                                        "BYTES] [-a ADAPTER] [-loops N] [-json]\n");
                        return 2;
                }
        }
        if (!loops)
                loops = 1;
        if (size < 4)
                size = 4;
        sci_desc_t sd;
        sci_local_interrupt_t lint = NULL;
        sci_remote_interrupt_t rint = NULL;
        sci_local_data_interrupt_t ldint = NULL;
        sci_remote_data_interrupt_t rdint = NULL;
        unsigned int mine = server ? SERVER_INTNO : CLIENT_INTNO;
        unsigned int theirs = server ? CLIENT_INTNO : SERVER_INTNO;

        SCIInitialize(NO_FLAGS, &error);
        check("SCIInitialize");
        SCIOpen(&sd, NO_FLAGS, &error);
        check("SCIOpen");
        if (data) {
                SCICreateDataInterrupt(sd, &ldint, adapter, &mine, NO_CALLBACK, NO_ARG,
                                       SCI_FLAG_FIXED_INTNO, &error);
                check("SCICreateDataInterrupt");
                SCIConnectDataInterrupt(sd, &rdint, remote_node, adapter, theirs, 20000, NO_FLAGS,
                                        &error);
                check("SCIConnectDataInterrupt");
        } else {
                SCICreateInterrupt(sd, &lint, adapter, &mine, NO_CALLBACK, NO_ARG,
                                   SCI_FLAG_FIXED_INTNO, &error);
                check("SCICreateInterrupt");
                SCIConnectInterrupt(sd, &rint, remote_node, adapter, theirs, 20000, NO_FLAGS,
                                    &error);
                check("SCIConnectInterrupt");
        }
        uint8_t *out = calloc(1, size), *in = calloc(1, size);
        double *rtt = calloc(loops, sizeof(*rtt));
        if (!out || !in || !rtt)
                return 1;

        for (uint32_t i = 0; i < loops + 1; i++) {
                /* Round 0 is a handshake: both sides are connected before the clock runs. */
                double t0 = now_us();
                for (unsigned k = 0; k < size; k++)
                        out[k] = (uint8_t)(i * 7 + k);
                if (!server) {
                        if (data)
                                SCITriggerDataInterrupt(rdint, out, size, NO_FLAGS, &error);
                        else
                                SCITriggerInterrupt(rint, NO_FLAGS, &error);
                        check("trigger");
                }
                if (data) {
                        unsigned int len = size;
                        SCIWaitForDataInterrupt(ldint, in, &len, 20000, NO_FLAGS, &error);
                        check("SCIWaitForDataInterrupt");
                        if (len != size || memcmp(in, out, size)) {
                                fprintf(stderr, "intlat: round %u: the payload arrived wrong\n", i);
                                return 1;
                        }
                } else {
                        SCIWaitForInterrupt(lint, 20000, NO_FLAGS, &error);
                        check("SCIWaitForInterrupt");
                }
                if (server) {
                        if (data)
                                SCITriggerDataInterrupt(rdint, out, size, NO_FLAGS, &error);
                        else
                                SCITriggerInterrupt(rint, NO_FLAGS, &error);
                        check("trigger");
                } else if (i) {
                        rtt[i - 1] = now_us() - t0;
                }
        }
        if (!server) {
                qsort(rtt, loops, sizeof(*rtt), cmp);
                double med = rtt[loops / 2], p99 = rtt[(size_t)(loops * 0.99)];
                if (json)
                        printf("{\"kind\": \"%s\", \"bytes\": %u, \"loops\": %u, \"median_us\": "
                               "%.3f, \"p99_us\": %.3f}\n",
                               data ? "data-interrupt" : "interrupt", data ? size : 0, loops, med,
                               p99);
                else
                        printf("intlat: %s round trips with node %u: %u of them%s: median %.2f "
                               "us, p99 %.2f us\n",
                               data ? "data-interrupt" : "interrupt", remote_node, loops,
                               data ? " (payload checked)" : "", med, p99);
        }
        /* Neither side leaves before the other has connected and finished (a last round). */
        if (data) {
                if (server) {
                        unsigned int len = size;
                        SCIWaitForDataInterrupt(ldint, in, &len, 20000, NO_FLAGS, &error);
                } else {
                        SCITriggerDataInterrupt(rdint, out, size, NO_FLAGS, &error);
                }
                SCIDisconnectDataInterrupt(rdint, NO_FLAGS, &error);
                check("SCIDisconnectDataInterrupt");
                SCIRemoveDataInterrupt(ldint, NO_FLAGS, &error);
                check("SCIRemoveDataInterrupt");
        } else {
                if (server)
                        SCIWaitForInterrupt(lint, 20000, NO_FLAGS, &error);
                else
                        SCITriggerInterrupt(rint, NO_FLAGS, &error);
                SCIDisconnectInterrupt(rint, NO_FLAGS, &error);
                check("SCIDisconnectInterrupt");
                SCIRemoveInterrupt(lint, NO_FLAGS, &error);
                check("SCIRemoveInterrupt");
        }
        free(out);
        free(in);
        free(rtt);
        SCIClose(sd, NO_FLAGS, &error);
        check("SCIClose");
        SCITerminate();
        return 0;
}
