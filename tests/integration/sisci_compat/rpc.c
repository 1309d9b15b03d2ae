/* rpc: an RPC server over a device's shared segment run by a borrower, as a userspace NVMe
 * library's manager does: it creates the shared device segment (HOST_WRITE | MULTIHOST_READ),
 * finds itself its owner (the segment's node is its own), and publishes a data interrupt there;
 * clients on other nodes read it and send requests. Usage: rpc -server REQUESTS | rpc -client */
#include <string.h>
#include <unistd.h>

#include <dis/dis_types.h>

#include "sxc.h"

#define MAGIC 0xdeadbeefu

struct handle_info {
        uint32_t magic, node_id, intr_no;
};

struct request {
        uint32_t node_id, intr_no;
        unsigned char cmd[64];
};

static volatile unsigned served;

static uint32_t nvme_fdid(sci_desc_t sd)
{
        sci_smartio_device_info_t filter;
        memset(&filter, 0, sizeof(filter));
        filter.pci_class = 0x010802;
        uint32_t fdid = 0;
        sci_error_t err;
        size_t n = SCIGetDeviceList(sd, &fdid, 1, &filter, NO_FLAGS, &err);
        CHECK(err == SCI_ERR_OK && n >= 1, "no NVMe drive in the pool");
        return fdid;
}

/* The server's interrupt: answer each request with its command, every byte plus one. */
static sci_callback_action_t on_request(void *arg, sci_local_data_interrupt_t intr, void *data,
                                        unsigned length, sci_error_t status)
{
        (void)intr;
        sci_desc_t sd = arg;
        struct request *rq = data;
        if (status != SCI_ERR_OK || length != sizeof(*rq))
                return SCI_CALLBACK_CONTINUE;
        unsigned char reply[64];
        for (int i = 0; i < 64; i++)
                reply[i] = (unsigned char)(rq->cmd[i] + 1);
        sci_remote_data_interrupt_t ri;
        TRY(SCIConnectDataInterrupt, sd, &ri, rq->node_id, ADAPTER_NO, rq->intr_no,
            SCI_INFINITE_TIMEOUT, NO_FLAGS);
        TRY(SCITriggerDataInterrupt, ri, reply, sizeof(reply), NO_FLAGS);
        TRY(SCIDisconnectDataInterrupt, ri, NO_FLAGS);
        served++;
        return SCI_CALLBACK_CONTINUE;
}

/* Whether this process owns the shared segment: its memory is on this node. */
static int owner(sci_remote_segment_t seg)
{
        for (unsigned a = 0; a < DIS_MAX_NSCIS; ++a) {
                sci_error_t err;
                unsigned id = 0;
                SCIGetLocalNodeId(a, &id, NO_FLAGS, &err);
                if (err == SCI_ERR_OK && SCIGetRemoteSegmentNodeId(seg) == id)
                        return 1;
        }
        return 0;
}

int main(int argc, char **argv)
{
        CHECK(argc >= 2, "usage: rpc -server REQUESTS | rpc -client");
        sci_desc_t sd;
        sci_error_t err;
        TRY(SCIInitialize, NO_FLAGS);
        TRY(SCIOpen, &sd, NO_FLAGS);
        sci_smartio_device_t dev;
        TRY(SCIBorrowDevice, sd, &dev, nvme_fdid(sd), NO_FLAGS);
        const size_t size = sizeof(struct handle_info) * DIS_MAX_NSCIS;
        sci_remote_segment_t seg;
        sci_map_t map;
        unsigned self;
        TRY(SCIGetLocalNodeId, ADAPTER_NO, &self, NO_FLAGS);
        if (!strcmp(argv[1], "-server")) {
                CHECK(argc == 3, "usage: rpc -server REQUESTS");
                unsigned want = (unsigned)atoi(argv[2]);
                SCICreateDeviceSegment(dev, 0, size, SCI_MEMTYPE_SHARED,
                                       SCI_MEMACCESS_HOST_WRITE | SCI_MEMACCESS_MULTIHOST_READ,
                                       NO_FLAGS, &err);
                CHECK(err == SCI_ERR_OK || err == SCI_ERR_SEGMENTID_USED,
                      "SCICreateDeviceSegment: %s", SCIGetErrorString(err));
                TRY(SCIConnectDeviceSegment, dev, &seg, 0, SCI_MEMTYPE_SHARED, NO_CALLBACK,
                    NO_ARG, NO_FLAGS);
                CHECK(owner(seg), "not the owner of the shared segment (it is on node %u)",
                      SCIGetRemoteSegmentNodeId(seg));
                sci_local_data_interrupt_t li;
                unsigned no = 0;
                TRY(SCICreateDataInterrupt, sd, &li, ADAPTER_NO, &no, on_request, sd,
                    SCI_FLAG_USE_CALLBACK);
                volatile struct handle_info *infos =
                    SCIMapRemoteSegment(seg, &map, 0, size, NULL, NO_FLAGS, &err);
                CHECK(err == SCI_ERR_OK, "SCIMapRemoteSegment: %s", SCIGetErrorString(err));
                infos[ADAPTER_NO].node_id = self;
                infos[ADAPTER_NO].intr_no = no;
                SCIFlush(NULL, NO_FLAGS);
                infos[ADAPTER_NO].magic = MAGIC;
                SCIFlush(NULL, NO_FLAGS);
                printf("serving on node %u, interrupt %u\n", self, no);
                fflush(stdout);
                while (served < want)
                        usleep(1000);
                infos[ADAPTER_NO].magic = 0;
                TRY(SCIUnmapSegment, map, NO_FLAGS);
                TRY(SCIRemoveDataInterrupt, li, NO_FLAGS);
                printf("served %u requests\n", want);
        } else {
                do { /* the manager creates it */
                        SCIConnectDeviceSegment(dev, &seg, 0, SCI_MEMTYPE_SHARED, NO_CALLBACK,
                                                NO_ARG, NO_FLAGS, &err);
                        if (err != SCI_ERR_OK)
                                usleep(10000);
                } while (err != SCI_ERR_OK);
                CHECK(!owner(seg), "a client found itself the owner");
                volatile const struct handle_info *info =
                    SCIMapRemoteSegment(seg, &map, 0, size, NULL, SCI_FLAG_READONLY_MAP, &err);
                CHECK(err == SCI_ERR_OK, "SCIMapRemoteSegment: %s", SCIGetErrorString(err));
                while (info[ADAPTER_NO].magic != MAGIC)
                        usleep(1000);
                sci_local_data_interrupt_t li;
                unsigned no = 0;
                TRY(SCICreateDataInterrupt, sd, &li, ADAPTER_NO, &no, NO_CALLBACK, NO_ARG,
                    NO_FLAGS);
                sci_remote_data_interrupt_t ri;
                TRY(SCIConnectDataInterrupt, sd, &ri, info[ADAPTER_NO].node_id, ADAPTER_NO,
                    info[ADAPTER_NO].intr_no, SCI_INFINITE_TIMEOUT, NO_FLAGS);
                for (int k = 0; k < 3; k++) {
                        struct request rq = {self, no, {0}};
                        for (int i = 0; i < 64; i++)
                                rq.cmd[i] = (unsigned char)(i * 3 + k);
                        TRY(SCITriggerDataInterrupt, ri, &rq, sizeof(rq), NO_FLAGS);
                        unsigned char reply[64];
                        unsigned len = sizeof(reply);
                        TRY(SCIWaitForDataInterrupt, li, reply, &len, 10000, NO_FLAGS);
                        CHECK(len == 64, "a reply of %u bytes", len);
                        for (int i = 0; i < 64; i++)
                                CHECK(reply[i] == (unsigned char)(i * 3 + k + 1),
                                      "reply %d byte %d is %u", k, i, reply[i]);
                }
                printf("3 requests answered by node %u\n", info[ADAPTER_NO].node_id);
                TRY(SCIDisconnectDataInterrupt, ri, NO_FLAGS);
                TRY(SCIRemoveDataInterrupt, li, NO_FLAGS);
                TRY(SCIUnmapSegment, map, NO_FLAGS);
        }
        TRY(SCIDisconnectSegment, seg, NO_FLAGS);
        TRY(SCIReturnDevice, dev, NO_FLAGS);
        TRY(SCIClose, sd, NO_FLAGS);
        SCITerminate();
        return 0;
}
