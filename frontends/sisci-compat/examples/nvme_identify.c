/* nvme_identify.c: borrow an NVMe drive with SISCI SmartIO, set up admin queues, identify it. */
/*
 * Usage: nvme_identify [-fdid FDID] [-a ADAPTER] [-hints]
 *
 * Like the article's NVMe manager (6.2): find a drive in the pool (SCIGetDeviceList with an
 * NVMe class filter), borrow it exclusively, map its registers (BAR0, a device segment),
 * reset the controller, put the admin queues in memory mapped for the device, and send
 * Identify Controller. Prints the model and serial number. Then, as the manager does, it
 * lets other borrowers in (SCIReleaseExclusiveBorrow) before it returns the device.
 *
 * Without -hints the queues and the identify buffer are one local segment mapped for the
 * device (SCIMapLocalSegmentForDevice). With -hints the submission queue is a device
 * segment the device reads and the host writes (placed near the device), the completion
 * queue one the device writes and the host reads (placed near the host), as in 7.4.1.
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

#define NVME_CLASS 0x010802
#define PAGE       4096

/* NVMe controller registers and the commands used here (NVMe 1.4). */
#define REG_CAP        0x00
#define REG_CC         0x14
#define REG_CSTS       0x1c
#define REG_AQA        0x24
#define REG_ASQ        0x28
#define REG_ACQ        0x30
#define SQ0_TDBL       0x1000
#define CQ0_HDBL       0x1004
#define CC_EN          0x1u
#define CC_IOSQES      (6u << 16)
#define CC_IOCQES      (4u << 20)
#define CSTS_RDY       0x1u
#define CSTS_CFS       0x2u
#define OPC_IDENTIFY   0x06
#define CNS_CONTROLLER 1
#define QUEUE_ENTRIES  16

struct sqe {
        uint32_t cdw0; /* opcode, CID << 16 */
        uint32_t nsid;
        uint64_t rsvd;
        uint64_t mptr;
        uint64_t prp1, prp2;
        uint32_t cdw10, cdw11, cdw12, cdw13, cdw14, cdw15;
};

struct cqe {
        uint32_t dw0, dw1, dw2, dw3; /* dw3: SQ head, SQ id; CID, phase, status */
};

static sci_error_t error;

static void check(const char *what)
{
        if (error != SCI_ERR_OK) {
                fprintf(stderr, "nvme_identify: %s failed: %s (0x%x)\n", what,
                        SCIGetErrorString(error), error);
                exit(1);
        }
}

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

static volatile uint32_t *reg32(volatile uint8_t *bar, unsigned off)
{
        return (volatile uint32_t *)(bar + off);
}

static volatile uint64_t *reg64(volatile uint8_t *bar, unsigned off)
{
        return (volatile uint64_t *)(bar + off);
}

/* Wait until (CSTS & mask) == want, up to CAP.TO (500 ms units). */
static int wait_csts(volatile uint8_t *bar, uint32_t mask, uint32_t want, double limit)
{
        for (double end = now_s() + limit; now_s() < end;) {
                uint32_t v = *reg32(bar, REG_CSTS);
                if (v == 0xffffffffu)
                        return -1; /* all ones: the device is gone */
                if (v & CSTS_CFS)
                        return -1;
                if ((v & mask) == want)
                        return 0;
                struct timespec ts = {0, 100000};
                nanosleep(&ts, NULL);
        }
        return -1;
}

static void copy_field(char *out, const volatile uint8_t *in, size_t n)
{
        for (size_t i = 0; i < n; i++)
                out[i] = (char)in[i];
        out[n] = 0;
        for (size_t i = n; i > 0 && out[i - 1] == ' '; i--)
                out[i - 1] = 0; /* NVMe pads strings with spaces */
}

int main(int argc, char **argv)
{
        unsigned int adapter = 0;
        uint32_t fdid = 0;
        int have_fdid = 0, hints = 0;
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "-fdid") && i + 1 < argc) {
                        fdid = (uint32_t)strtoul(argv[++i], NULL, 0);
                        have_fdid = 1;
                } else if (!strcmp(argv[i], "-a") && i + 1 < argc) {
                        adapter = (unsigned)strtoul(argv[++i], NULL, 0);
                } else if (!strcmp(argv[i], "-hints")) {
                        hints = 1;
                } else {
                        fprintf(stderr, "usage: nvme_identify [-fdid FDID] [-a ADAPTER] "
                                        "[-hints]\n");
                        return 2;
                }
        }
        sci_desc_t sd;
        SCIInitialize(NO_FLAGS, &error);
        check("SCIInitialize");
        SCIOpen(&sd, NO_FLAGS, &error);
        check("SCIOpen");

        if (!have_fdid) {
                sci_smartio_device_info_t filter;
                memset(&filter, 0, sizeof(filter));
                filter.fdid = 0xffffffffu;
                filter.nodeid = 0xffffffffu;
                filter.pci_class = NVME_CLASS;
                uint32_t fdids[8];
                size_t n = SCIGetDeviceList(sd, fdids, 8, &filter, NO_FLAGS, &error);
                check("SCIGetDeviceList");
                if (!n) {
                        fprintf(stderr, "nvme_identify: no NVMe drive in the pool\n");
                        return 1;
                }
                fdid = fdids[0];
        }
        sci_smartio_device_info_t info;
        sci_smartio_query_device_t q = {fdid, SCI_Q_DEVICE_INFO, &info};
        SCIQuery(SCI_Q_DEVICE, &q, NO_FLAGS, &error);
        check("SCIQuery(SCI_Q_DEVICE)");
        printf("device 0x%x: %s, class %06x, vendor %04x, device %04x, on node %u\n", fdid,
               info.user_name, info.pci_class, info.pci_vendor_id, info.pci_device_id, info.nodeid);

        /* The manager resets the drive: nobody else may use it meanwhile. */
        sci_smartio_device_t dev;
        SCIBorrowDevice(sd, &dev, fdid, SCI_FLAG_EXCLUSIVE, &error);
        check("SCIBorrowDevice");

        sci_remote_segment_t bar;
        sci_map_t barmap;
        SCIConnectDeviceSegment(dev, &bar, 0, SCI_MEMTYPE_BAR, NO_CALLBACK, NO_ARG, NO_FLAGS,
                                &error);
        check("SCIConnectDeviceSegment(BAR0)");
        size_t barsize = SCIGetRemoteSegmentSize(bar);
        volatile uint8_t *regs =
            SCIMapRemoteSegment(bar, &barmap, 0, barsize, NULL, SCI_FLAG_IO_MAP_IOSPACE, &error);
        check("SCIMapRemoteSegment(BAR0)");
        uint64_t cap = *reg64(regs, REG_CAP);
        double timeout = ((cap >> 24) & 0xff) * 0.5 + 1;

        /* Queue memory, and the addresses the drive uses for it. */
        volatile uint8_t *sq, *cq, *data;
        sci_ioaddr_t sq_io, cq_io, data_io;
        sci_local_segment_t seg = NULL;
        sci_map_t segmap = NULL, sqmap = NULL, cqmap = NULL;
        sci_remote_segment_t sqseg = NULL, cqseg = NULL;
        if (!hints) {
                SCICreateSegment(sd, &seg, 0x4e56, 3 * PAGE, NO_CALLBACK, NO_ARG, SCI_FLAG_PRIVATE,
                                 &error);
                check("SCICreateSegment");
                SCIPrepareSegment(seg, adapter, NO_FLAGS, &error);
                check("SCIPrepareSegment");
                SCISetSegmentAvailable(seg, adapter, NO_FLAGS, &error);
                check("SCISetSegmentAvailable");
                volatile uint8_t *mem =
                    SCIMapLocalSegment(seg, &segmap, 0, 3 * PAGE, NULL, NO_FLAGS, &error);
                check("SCIMapLocalSegment");
                sci_ioaddr_t io;
                SCIMapLocalSegmentForDevice(seg, adapter, dev, &io, 0, 3 * PAGE, NO_FLAGS, &error);
                check("SCIMapLocalSegmentForDevice");
                sq = mem;
                cq = mem + PAGE;
                data = mem + 2 * PAGE;
                sq_io = io;
                cq_io = io + PAGE;
                data_io = io + 2 * PAGE;
        } else {
                /* The article's placement: SQ near the device, CQ (and data) near the host. */
                SCICreateDeviceSegment(dev, 1, PAGE, SCI_MEMTYPE_PRIVATE,
                                       SCI_MEMACCESS_HOST_WRITE | SCI_MEMACCESS_DEVICE_READ,
                                       NO_FLAGS, &error);
                check("SCICreateDeviceSegment(SQ)");
                SCICreateDeviceSegment(dev, 2, 2 * PAGE, SCI_MEMTYPE_PRIVATE,
                                       SCI_MEMACCESS_HOST_READ | SCI_MEMACCESS_DEVICE_WRITE,
                                       NO_FLAGS, &error);
                check("SCICreateDeviceSegment(CQ)");
                SCIConnectDeviceSegment(dev, &sqseg, 1, SCI_MEMTYPE_PRIVATE, NO_CALLBACK, NO_ARG,
                                        NO_FLAGS, &error);
                check("SCIConnectDeviceSegment(SQ)");
                SCIConnectDeviceSegment(dev, &cqseg, 2, SCI_MEMTYPE_PRIVATE, NO_CALLBACK, NO_ARG,
                                        NO_FLAGS, &error);
                check("SCIConnectDeviceSegment(CQ)");
                sq = SCIMapRemoteSegment(sqseg, &sqmap, 0, PAGE, NULL, NO_FLAGS, &error);
                check("SCIMapRemoteSegment(SQ)");
                cq = SCIMapRemoteSegment(cqseg, &cqmap, 0, 2 * PAGE, NULL, NO_FLAGS, &error);
                check("SCIMapRemoteSegment(CQ)");
                data = cq + PAGE;
                SCIMapRemoteSegmentForDevice(sqseg, dev, &sq_io, 0, PAGE, NO_FLAGS, &error);
                check("SCIMapRemoteSegmentForDevice(SQ)");
                SCIMapRemoteSegmentForDevice(cqseg, dev, &cq_io, 0, 2 * PAGE, NO_FLAGS, &error);
                check("SCIMapRemoteSegmentForDevice(CQ)");
                data_io = cq_io + PAGE;
                sci_query_remote_segment_t rq = {sqseg, SCI_Q_REMOTE_SEGMENT_IOADDR, {0}};
                SCIQuery(SCI_Q_REMOTE_SEGMENT, &rq, NO_FLAGS, &error);
                check("SCIQuery(SCI_Q_REMOTE_SEGMENT)");
                printf("SQ on node %u, CQ on node %u\n", SCIGetRemoteSegmentNodeId(sqseg),
                       SCIGetRemoteSegmentNodeId(cqseg));
        }
        memset((void *)sq, 0, PAGE);
        memset((void *)cq, 0, PAGE);
        memset((void *)data, 0xee, PAGE);

        /* Reset, admin queues, enable. */
        *reg32(regs, REG_CC) = 0;
        if (wait_csts(regs, CSTS_RDY, 0, timeout)) {
                fprintf(stderr, "nvme_identify: the controller does not go idle\n");
                return 1;
        }
        *reg32(regs, REG_AQA) = (QUEUE_ENTRIES - 1) << 16 | (QUEUE_ENTRIES - 1);
        *reg64(regs, REG_ASQ) = sq_io;
        *reg64(regs, REG_ACQ) = cq_io;
        *reg32(regs, REG_CC) = CC_EN | CC_IOSQES | CC_IOCQES;
        if (wait_csts(regs, CSTS_RDY, CSTS_RDY, timeout)) {
                fprintf(stderr, "nvme_identify: the controller does not become ready (CSTS %#x)\n",
                        *reg32(regs, REG_CSTS));
                return 1;
        }

        /* Identify Controller into the data page; the command, then the doorbell. */
        volatile struct sqe *cmd = (volatile struct sqe *)sq;
        cmd->cdw0 = OPC_IDENTIFY | (1u << 16);
        cmd->nsid = 0;
        cmd->prp1 = data_io;
        cmd->prp2 = 0;
        cmd->cdw10 = CNS_CONTROLLER;
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        *reg32(regs, SQ0_TDBL) = 1;
        volatile struct cqe *c = (volatile struct cqe *)cq;
        double end = now_s() + timeout;
        while (!(c->dw3 >> 16 & 1)) {
                if (now_s() > end) {
                        fprintf(stderr, "nvme_identify: no completion for Identify\n");
                        return 1;
                }
        }
        uint32_t status = c->dw3 >> 17;
        *reg32(regs, CQ0_HDBL) = 1;
        if (status) {
                fprintf(stderr, "nvme_identify: Identify failed with status %#x\n", status);
                return 1;
        }
        char sn[21], mn[41], fr[9];
        copy_field(sn, data + 4, 20);
        copy_field(mn, data + 24, 40);
        copy_field(fr, data + 64, 8);
        printf("model: %s\nserial: %s\nfirmware: %s\n", mn, sn, fr);

        /* Other borrowers may come now (the manager would keep relaying admin commands). */
        SCIReleaseExclusiveBorrow(dev, NO_FLAGS, &error);
        check("SCIReleaseExclusiveBorrow");

        *reg32(regs, REG_CC) = 0;
        wait_csts(regs, CSTS_RDY, 0, timeout);
        if (!hints) {
                SCIUnmapLocalSegmentForDevice(seg, adapter, dev, NO_FLAGS, &error);
                check("SCIUnmapLocalSegmentForDevice");
                SCIUnmapSegment(segmap, NO_FLAGS, &error);
                check("SCIUnmapSegment");
                SCIRemoveSegment(seg, NO_FLAGS, &error);
                check("SCIRemoveSegment");
        } else {
                SCIUnmapRemoteSegmentForDevice(sqseg, dev, NO_FLAGS, &error);
                check("SCIUnmapRemoteSegmentForDevice(SQ)");
                SCIUnmapRemoteSegmentForDevice(cqseg, dev, NO_FLAGS, &error);
                check("SCIUnmapRemoteSegmentForDevice(CQ)");
                SCIUnmapSegment(sqmap, NO_FLAGS, &error);
                check("SCIUnmapSegment(SQ)");
                SCIUnmapSegment(cqmap, NO_FLAGS, &error);
                check("SCIUnmapSegment(CQ)");
                SCIDisconnectSegment(sqseg, NO_FLAGS, &error);
                check("SCIDisconnectSegment(SQ)");
                SCIDisconnectSegment(cqseg, NO_FLAGS, &error);
                check("SCIDisconnectSegment(CQ)");
        }
        SCIUnmapSegment(barmap, NO_FLAGS, &error);
        check("SCIUnmapSegment(BAR0)");
        SCIDisconnectSegment(bar, NO_FLAGS, &error);
        check("SCIDisconnectSegment(BAR0)");
        SCIReturnDevice(dev, NO_FLAGS, &error);
        check("SCIReturnDevice");
        SCIClose(sd, NO_FLAGS, &error);
        check("SCIClose");
        SCITerminate();
        return 0;
}
