/* dintfull: data interrupts to a receiver whose queue is full fail at once with SCI_ERR_NOSPC
 * (a sender that triggers as fast as it can is not slowed down), and go through again once the
 * receiver has read. Usage: dintfull -recv | dintfull -send NODEID */
#include <string.h>
#include <unistd.h>

#include "sxc.h"

#define INTNO  0x5c40
#define SEG_ID 0x5c41
#define TRIES  2000

int main(int argc, char **argv)
{
        CHECK(argc >= 2, "usage: dintfull -recv | -send NODEID");
        sci_desc_t sd;
        sci_error_t err;
        TRY(SCIInitialize, NO_FLAGS);
        TRY(SCIOpen, &sd, NO_FLAGS);
        if (!strcmp(argv[1], "-recv")) {
                sci_local_data_interrupt_t li;
                sci_local_segment_t go;
                unsigned no = INTNO;
                TRY(SCICreateDataInterrupt, sd, &li, ADAPTER_NO, &no, NO_CALLBACK, NO_ARG,
                    SCI_FLAG_FIXED_INTNO);
                /* The sender connects to this segment when it is done with the full queue. */
                TRY(SCICreateSegment, sd, &go, SEG_ID, 4096, NO_CALLBACK, NO_ARG, NO_FLAGS);
                TRY(SCIPrepareSegment, go, ADAPTER_NO, NO_FLAGS);
                TRY(SCISetSegmentAvailable, go, ADAPTER_NO, NO_FLAGS);
                unsigned node, adapter;
                SCIWaitForLocalSegmentEvent(go, &node, &adapter, SCI_INFINITE_TIMEOUT, NO_FLAGS,
                                            &err);
                CHECK(err == SCI_ERR_OK, "SCIWaitForLocalSegmentEvent: %s", SCIGetErrorString(err));
                unsigned got = 0;
                for (;;) {
                        unsigned char msg[64];
                        unsigned len = sizeof(msg);
                        SCIWaitForDataInterrupt(li, msg, &len, 5000, NO_FLAGS, &err);
                        if (err == SCI_ERR_TIMEOUT)
                                break;
                        CHECK(err == SCI_ERR_OK, "SCIWaitForDataInterrupt: %s",
                              SCIGetErrorString(err));
                        CHECK(len == 1 && msg[0] == got, "message %u is %u bytes, 0x%02x", got,
                              len, msg[0]);
                        got++;
                }
                printf("received %u messages\n", got);
                TRY(SCIRemoveSegment, go, NO_FLAGS);
                TRY(SCIRemoveDataInterrupt, li, NO_FLAGS);
        } else {
                CHECK(argc == 3, "usage: dintfull -send NODEID");
                unsigned node = (unsigned)strtoul(argv[2], NULL, 0);
                sci_remote_data_interrupt_t ri;
                TRY(SCIConnectDataInterrupt, sd, &ri, node, ADAPTER_NO, INTNO,
                    SCI_INFINITE_TIMEOUT, NO_FLAGS);
                unsigned char n = 0, x = 0xee;
                unsigned sent = 0, full = 0;
                for (unsigned i = 0; i < TRIES; i++) {
                        SCITriggerDataInterrupt(ri, sent ? (full ? &x : &n) : &n, 1, NO_FLAGS, &err);
                        if (err == SCI_ERR_OK) {
                                CHECK(!full, "a trigger went through after the queue was full");
                                sent++;
                                n++;
                        } else {
                                CHECK(err == SCI_ERR_NOSPC, "trigger %u: %s, not SCI_ERR_NOSPC",
                                      i, SCIGetErrorString(err));
                                full++;
                        }
                }
                CHECK(sent > 0 && full == TRIES - sent, "%u sent, %u refused", sent, full);
                printf("%u sent, then %u triggers refused at once (SCI_ERR_NOSPC)\n", sent, full);
                sci_remote_segment_t go;
                TRY(SCIConnectSegment, sd, &go, node, SEG_ID, ADAPTER_NO, NO_CALLBACK, NO_ARG,
                    SCI_INFINITE_TIMEOUT, NO_FLAGS);
                /* The receiver reads: there is room again. */
                do {
                        usleep(1000);
                        SCITriggerDataInterrupt(ri, &n, 1, NO_FLAGS, &err);
                } while (err == SCI_ERR_NOSPC);
                CHECK(err == SCI_ERR_OK, "after the reader: %s", SCIGetErrorString(err));
                printf("sent one more after the receiver read\n");
                TRY(SCIDisconnectSegment, go, NO_FLAGS);
                TRY(SCIDisconnectDataInterrupt, ri, NO_FLAGS);
        }
        TRY(SCIClose, sd, NO_FLAGS);
        SCITerminate();
        return 0;
}
