/* smartio: the SmartIO calls as programs of both generations make them: a zeroed filter with
 * only pci_class set, device segments placed by their access hints, and the older generation's
 * sci_device_t, SCIConnectDeviceMemory (both argument orders) and short *ForDevice calls.
 * Usage: smartio   (on a node that is not the NVMe drive's lender) */
#include <string.h>

#include "sxc.h"

int main(void)
{
        sci_desc_t sd;
        sci_error_t err;
        TRY(SCIInitialize, NO_FLAGS);
        TRY(SCIOpen, &sd, NO_FLAGS);

        /* As Dolphin's NVMe example finds its drive. */
        sci_smartio_device_info_t filter;
        memset(&filter, 0, sizeof(filter));
        filter.pci_class = 0x010802;
        uint32_t fdids[8];
        size_t n = SCIGetDeviceList(sd, fdids, 8, &filter, NO_FLAGS, &err);
        CHECK(err == SCI_ERR_OK && n >= 1, "a zeroed filter with pci_class found %zu devices (%s)",
              n, SCIGetErrorString(err));
        sci_smartio_device_info_t info;
        sci_smartio_query_device_t q = {.fdid = fdids[0], .subcommand = SCI_Q_DEVICE_INFO,
                                        .data = &info};
        TRY(SCIQuery, SCI_Q_DEVICE, &q, NO_FLAGS);
        unsigned self;
        TRY(SCIGetLocalNodeId, ADAPTER_NO, &self, NO_FLAGS);
        printf("found 0x%x (class 0x%06x) on node %u\n", fdids[0], info.pci_class, info.nodeid);

        /* The older generation's handle and calls. */
        sci_device_t dev;
        TRY(SCIBorrowDevice, sd, &dev, fdids[0], NO_FLAGS);
        sci_remote_segment_t bar;
        sci_map_t map;
        TRY(SCIConnectDeviceMemory, sd, &bar, ADAPTER_NO, dev, 0, 0, SCI_FLAG_BAR);
        volatile uint32_t *regs =
            SCIMapRemoteSegment(bar, &map, 0, 0x2000, NULL, SCI_FLAG_IO_MAP_IOSPACE, &err);
        CHECK(err == SCI_ERR_OK, "SCIMapRemoteSegment of BAR0: %s", SCIGetErrorString(err));
        uint32_t vs = regs[2]; /* NVMe version register */
        CHECK(vs >= 0x10000 && vs != 0xffffffffu, "BAR0 reads version 0x%x", vs);
        TRY(SCIUnmapSegment, map, NO_FLAGS);
        TRY(SCIDisconnectSegment, bar, NO_FLAGS);
        TRY(SCIConnectDeviceMemory, sd, &bar, dev, ADAPTER_NO, 0, 0, 0); /* the older order */
        regs = SCIMapRemoteSegment(bar, &map, 0, 0x2000, NULL, SCI_FLAG_IO_MAP_IOSPACE, &err);
        CHECK(err == SCI_ERR_OK && regs[2] == vs, "BAR0 by the older order");
        TRY(SCIUnmapSegment, map, NO_FLAGS);
        TRY(SCIDisconnectSegment, bar, NO_FLAGS);

        sci_local_segment_t ls;
        sci_ioaddr_t io = 0;
        TRY(SCICreateSegment, sd, &ls, 0x5c50, 8192, NO_CALLBACK, NO_ARG, NO_FLAGS);
        TRY(SCIPrepareSegment, ls, ADAPTER_NO, NO_FLAGS);
        TRY(SCISetSegmentAvailable, ls, ADAPTER_NO, NO_FLAGS);
        TRY(SCIMapLocalSegmentForDevice, ls, ADAPTER_NO, dev, &io, 0, 0); /* 7 arguments */
        CHECK(io, "no device address for the local segment");
        TRY(SCIUnmapLocalSegmentForDevice, ls, ADAPTER_NO, dev, NO_FLAGS);

        /* Placement by hints: where each device segment's memory is (docs/sisci.md). */
        static const struct {
                unsigned hints;
                int near_device;
        } table[] = {
            {SCI_MEMACCESS_HOST_WRITE | SCI_MEMACCESS_DEVICE_READ, 1},      /* a submission queue */
            {SCI_MEMACCESS_HOST_READ | SCI_MEMACCESS_DEVICE_WRITE, 0},      /* a completion queue */
            {SCI_MEMACCESS_MULTIHOST_WRITE | SCI_MEMACCESS_DEVICE_READ, 1}, /* a shared SQ */
            {SCI_MEMACCESS_MULTIHOST_READ | SCI_MEMACCESS_DEVICE_WRITE, 0}, /* a shared CQ */
            {SCI_MEMACCESS_HOST_WRITE | SCI_MEMACCESS_MULTIHOST_READ, 0},   /* an RPC handle */
            {SCI_MEMACCESS_P2P_READ | SCI_MEMACCESS_HOST_WRITE, 1},
            {SCI_MEMACCESS_P2P_WRITE | SCI_MEMACCESS_HOST_READ, 1},
            {SCI_MEMACCESS_DEVICE_WRITE, 0},
            {0, 0},
        };
        for (unsigned i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
                sci_remote_segment_t s;
                unsigned memtype = i == 4 ? SCI_MEMTYPE_SHARED : SCI_MEMTYPE_PRIVATE;
                TRY(SCICreateDeviceSegment, dev, 10 + i, 4096, memtype, table[i].hints, NO_FLAGS);
                TRY(SCIConnectDeviceSegment, dev, &s, 10 + i, memtype, NO_CALLBACK, NO_ARG,
                    NO_FLAGS);
                unsigned where = SCIGetRemoteSegmentNodeId(s);
                unsigned want = table[i].near_device ? info.nodeid : self;
                CHECK(where == want, "hints 0x%x: memory on node %u, not %u", table[i].hints,
                      where, want);
                if (i == 0) {
                        TRY(SCIMapRemoteSegmentForDevice, s, dev, &io, 0, 0); /* 6 arguments */
                        CHECK(io, "no device address for a device segment");
                        TRY(SCIUnmapRemoteSegmentForDevice, s, dev, NO_FLAGS);
                }
                TRY(SCIDisconnectSegment, s, NO_FLAGS);
        }
        printf("device segments placed by %zu hint combinations\n",
               sizeof(table) / sizeof(table[0]));
        TRY(SCIRemoveSegment, ls, NO_FLAGS);
        TRY(SCIReturnDevice, dev, NO_FLAGS);
        TRY(SCIClose, sd, NO_FLAGS);
        SCITerminate();
        return 0;
}
