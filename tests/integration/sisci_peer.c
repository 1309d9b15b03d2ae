/* tests/integration/sisci_peer.c: a SISCI process on another node, driven line by line by a test.
 */
/*
 * The libsisci tests run as one node; what other nodes do (own a segment, connect, trigger,
 * borrow, die) is done by this program, started with NTBFAB_NODE set to that node. It reads
 * one command per line on stdin and answers one line on stdout: "ok [values]" or
 * "err 0xCODE". It keeps at most one object of each kind, by number where it matters.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sisci_api.h"

#define MAXSEG 8

static sci_desc_t sd;
static struct {
        unsigned id;
        sci_local_segment_t seg;
        sci_map_t map;
        volatile uint8_t *mem;
        size_t size;
} segs[MAXSEG];
static sci_remote_segment_t rseg;
static sci_map_t rmap;
static volatile uint8_t *rmem;
static sci_local_interrupt_t lint;
static sci_remote_interrupt_t remint;
static sci_local_data_interrupt_t ldint;
static sci_remote_data_interrupt_t remdint;
static sci_smartio_device_t dev;

static int seg_of(unsigned id)
{
        for (int i = 0; i < MAXSEG; i++)
                if (segs[i].seg && segs[i].id == id)
                        return i;
        return -1;
}

static void answer(sci_error_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void answer(sci_error_t e, const char *fmt, ...)
{
        if (e != SCI_ERR_OK) {
                printf("err 0x%x\n", (unsigned)e);
        } else {
                char buf[512] = "";
                if (fmt) {
                        va_list ap;
                        va_start(ap, fmt);
                        vsnprintf(buf, sizeof(buf), fmt, ap);
                        va_end(ap);
                }
                printf("ok%s%s\n", buf[0] ? " " : "", buf);
        }
        fflush(stdout);
}

static unsigned long num(const char *s)
{
        return s ? strtoul(s, NULL, 0) : 0;
}

int main(void)
{
        sci_error_t e;
        SCIInitialize(0, &e);
        if (e == SCI_ERR_OK)
                SCIOpen(&sd, 0, &e);
        answer(e, "up");
        static char line[16384];
        while (fgets(line, sizeof(line), stdin)) {
                char *argv[8] = {0};
                int argc = 0;
                for (char *t = strtok(line, " \t\n"); t && argc < 8; t = strtok(NULL, " \t\n"))
                        argv[argc++] = t;
                if (!argc)
                        continue;
                const char *c = argv[0];
                e = SCI_ERR_OK;
                if (!strcmp(c, "seg_create")) {
                        int i = 0;
                        while (i < MAXSEG && segs[i].seg)
                                i++;
                        if (i == MAXSEG) {
                                answer(SCI_ERR_NOSPC, NULL);
                                continue;
                        }
                        SCICreateSegment(sd, &segs[i].seg, (unsigned)num(argv[1]), num(argv[2]),
                                         NULL, NULL, (unsigned)num(argv[3]), &e);
                        if (e != SCI_ERR_OK) {
                                segs[i].seg = NULL;
                                answer(e, NULL);
                                continue;
                        }
                        segs[i].id = SCIGetLocalSegmentId(segs[i].seg);
                        segs[i].size = num(argv[2]);
                        SCIPrepareSegment(segs[i].seg, 0, 0, &e);
                        if (e == SCI_ERR_OK)
                                segs[i].mem = SCIMapLocalSegment(segs[i].seg, &segs[i].map, 0,
                                                                 segs[i].size, NULL, 0, &e);
                        answer(e, "%u", segs[i].id);
                } else if (!strcmp(c, "seg_fill")) {
                        int i = seg_of((unsigned)num(argv[1]));
                        uint32_t seed = (uint32_t)num(argv[2]);
                        if (i < 0) {
                                answer(SCI_ERR_NO_SUCH_SEGMENT, NULL);
                                continue;
                        }
                        for (size_t k = 0; k + 4 <= segs[i].size; k += 4)
                                *(volatile uint32_t *)(segs[i].mem + k) = seed + (uint32_t)k;
                        answer(e, NULL);
                } else if (!strcmp(c, "seg_available") || !strcmp(c, "seg_unavailable")) {
                        /* seg_available ID [ADAPTER]: prepared on that adapter first. */
                        int i = seg_of((unsigned)num(argv[1]));
                        unsigned ad = (unsigned)num(argv[2]);
                        if (i < 0)
                                e = SCI_ERR_NO_SUCH_SEGMENT;
                        else if (!strcmp(c, "seg_available"))
                                SCIPrepareSegment(segs[i].seg, ad, 0, &e);
                        if (i >= 0 && e == SCI_ERR_OK && !strcmp(c, "seg_available"))
                                SCISetSegmentAvailable(segs[i].seg, ad, 0, &e);
                        else if (i >= 0 && e == SCI_ERR_OK)
                                SCISetSegmentUnavailable(segs[i].seg, ad, 0, &e);
                        answer(e, NULL);
                } else if (!strcmp(c, "seg_wait")) {
                        int i = seg_of((unsigned)num(argv[1]));
                        unsigned node = 0, ad = 0;
                        sci_segment_cb_reason_t r = 0;
                        if (i < 0)
                                e = SCI_ERR_NO_SUCH_SEGMENT;
                        else
                                r = SCIWaitForLocalSegmentEvent(segs[i].seg, &node, &ad,
                                                                (unsigned)num(argv[2]), 0, &e);
                        answer(e, "%d %u %u", (int)r, node, ad);
                } else if (!strcmp(c, "seg_read")) {
                        int i = seg_of((unsigned)num(argv[1]));
                        size_t off = num(argv[2]);
                        if (i < 0 || off + 4 > segs[i].size)
                                answer(SCI_ERR_OUT_OF_RANGE, NULL);
                        else
                                answer(e, "%u", *(volatile uint32_t *)(segs[i].mem + off));
                } else if (!strcmp(c, "seg_remove")) {
                        int i = seg_of((unsigned)num(argv[1]));
                        if (i < 0) {
                                answer(SCI_ERR_NO_SUCH_SEGMENT, NULL);
                                continue;
                        }
                        if (segs[i].map)
                                SCIUnmapSegment(segs[i].map, 0, &e);
                        segs[i].map = NULL;
                        SCIRemoveSegment(segs[i].seg, (unsigned)num(argv[2]), &e);
                        if (e == SCI_ERR_OK)
                                segs[i].seg = NULL;
                        answer(e, NULL);
                } else if (!strcmp(c, "connect")) {
                        unsigned flags = (unsigned)num(argv[4]);
                        SCIConnectSegment(sd, &rseg, (unsigned)num(argv[1]), (unsigned)num(argv[2]),
                                          0, NULL, NULL, (unsigned)num(argv[3]), flags, &e);
                        if (e == SCI_ERR_OK)
                                rmem = SCIMapRemoteSegment(
                                    rseg, &rmap, 0, SCIGetRemoteSegmentSize(rseg), NULL, 0, &e);
                        answer(e, "%zu", e == SCI_ERR_OK ? SCIGetRemoteSegmentSize(rseg) : 0);
                } else if (!strcmp(c, "rwrite")) {
                        uint32_t v = (uint32_t)num(argv[2]);
                        SCIMemCpy(NULL, &v, rmap, num(argv[1]), 4, 0, &e);
                        answer(e, NULL);
                } else if (!strcmp(c, "rread")) {
                        answer(rmem ? SCI_ERR_OK : SCI_ERR_NOT_CONNECTED, "%u",
                               rmem ? *(volatile uint32_t *)(rmem + num(argv[1])) : 0);
                } else if (!strcmp(c, "disconnect")) {
                        if (rmap)
                                SCIUnmapSegment(rmap, 0, &e);
                        rmap = NULL;
                        rmem = NULL;
                        SCIDisconnectSegment(rseg, 0, &e);
                        answer(e, NULL);
                } else if (!strcmp(c, "int_create") || !strcmp(c, "dint_create")) {
                        unsigned no = (unsigned)num(argv[1]);
                        if (c[0] == 'd')
                                SCICreateDataInterrupt(sd, &ldint, 0, &no, NULL, NULL,
                                                       SCI_FLAG_FIXED_INTNO, &e);
                        else
                                SCICreateInterrupt(sd, &lint, 0, &no, NULL, NULL,
                                                   SCI_FLAG_FIXED_INTNO, &e);
                        answer(e, "%u", no);
                } else if (!strcmp(c, "int_wait")) {
                        SCIWaitForInterrupt(lint, (unsigned)num(argv[1]), 0, &e);
                        answer(e, NULL);
                } else if (!strcmp(c, "dint_wait")) {
                        char buf[2048];
                        unsigned len = sizeof(buf);
                        SCIWaitForDataInterrupt(ldint, buf, &len, (unsigned)num(argv[1]), 0, &e);
                        char hex[4100] = "";
                        for (unsigned k = 0; e == SCI_ERR_OK && k < len && k < 2048; k++)
                                sprintf(hex + 2 * k, "%02x", (uint8_t)buf[k]);
                        answer(e, "%u %s", len, hex[0] ? hex : "-");
                } else if (!strcmp(c, "int_remove")) {
                        SCIRemoveInterrupt(lint, 0, &e);
                        answer(e, NULL);
                } else if (!strcmp(c, "int_connect") || !strcmp(c, "dint_connect")) {
                        if (c[0] == 'd')
                                SCIConnectDataInterrupt(sd, &remdint, (unsigned)num(argv[1]), 0,
                                                        (unsigned)num(argv[2]), 10000, 0, &e);
                        else
                                SCIConnectInterrupt(sd, &remint, (unsigned)num(argv[1]), 0,
                                                    (unsigned)num(argv[2]), 10000, 0, &e);
                        answer(e, NULL);
                } else if (!strcmp(c, "int_trigger")) {
                        SCITriggerInterrupt(remint, 0, &e);
                        answer(e, NULL);
                } else if (!strcmp(c, "dint_trigger")) {
                        /* argv[1]: the payload in hex */
                        const char *h = argv[1] ? argv[1] : "";
                        uint8_t buf[2048];
                        unsigned len = 0;
                        for (; h[0] && h[1] && len < sizeof(buf); h += 2) {
                                unsigned v;
                                sscanf(h, "%2x", &v);
                                buf[len++] = (uint8_t)v;
                        }
                        SCITriggerDataInterrupt(remdint, buf, len, 0, &e);
                        answer(e, NULL);
                } else if (!strcmp(c, "borrow")) {
                        SCIBorrowDevice(sd, &dev, (uint32_t)num(argv[1]),
                                        num(argv[2]) ? SCI_FLAG_EXCLUSIVE : 0, &e);
                        answer(e, NULL);
                } else if (!strcmp(c, "release_exclusive")) {
                        SCIReleaseExclusiveBorrow(dev, 0, &e);
                        answer(e, NULL);
                } else if (!strcmp(c, "return")) {
                        SCIReturnDevice(dev, 0, &e);
                        answer(e, NULL);
                } else if (!strcmp(c, "devseg")) {
                        /* devseg ID SIZE MEMTYPE HINTS: create (SEGMENTID_USED is fine), connect */
                        SCICreateDeviceSegment(dev, (unsigned)num(argv[1]), num(argv[2]),
                                               (unsigned)num(argv[3]), (unsigned)num(argv[4]), 0,
                                               &e);
                        if (e == SCI_ERR_SEGMENTID_USED)
                                e = SCI_ERR_OK;
                        if (e == SCI_ERR_OK)
                                SCIConnectDeviceSegment(dev, &rseg, (unsigned)num(argv[1]),
                                                        (unsigned)num(argv[3]), NULL, NULL, 0, &e);
                        if (e == SCI_ERR_OK)
                                rmem = SCIMapRemoteSegment(
                                    rseg, &rmap, 0, SCIGetRemoteSegmentSize(rseg), NULL, 0, &e);
                        answer(e, "%u", e == SCI_ERR_OK ? SCIGetRemoteSegmentNodeId(rseg) : 0);
                } else if (!strcmp(c, "quit")) {
                        answer(e, NULL);
                        break;
                } else {
                        answer(SCI_ERR_ILLEGAL_PARAMETER, NULL);
                }
        }
        SCITerminate(); /* whatever is left goes with the session */
        return 0;
}
