/* apps/nvme/sisci.c: BAR0, DMA memory, the mailbox and multicast groups through libsisci. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ntbf_nvme_sisci.h"

#define PG         4096u
#define ACCEL_BAR  2u /* the simulated accelerator's device memory (docs/sim.md) */
#define NVME_CLASS 0x010802u

static int fail(struct ntbf_nvmx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct ntbf_nvmx *x, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(x->why, sizeof(x->why), fmt, ap);
        va_end(ap);
        return -1;
}

/* "SCIxxx: <libsisci's sentence> (0x...)" for a failed call. */
#define SCIFAIL(x, what, e) fail((x), "%s: %s (0x%x)", (what), SCIGetErrorString(e), (unsigned)(e))

const char *ntbf_nvmx_where_name(enum ntbf_nvmx_where w)
{
        switch (w) {
        case NTBF_NVMX_HINTS:
                return "hints";
        case NTBF_NVMX_HOST:
                return "host";
        case NTBF_NVMX_LENDER:
                return "lender";
        case NTBF_NVMX_DEVMEM:
                return "device-memory";
        }
        return "?";
}

int ntbf_nvmx_init(struct ntbf_nvmx *x)
{
        memset(x, 0, sizeof(*x));
        sci_error_t e;
        SCIInitialize(0, &e);
        if (e != SCI_ERR_OK)
                return SCIFAIL(x, "SCIInitialize", e);
        SCIOpen(&x->sd, 0, &e);
        if (e != SCI_ERR_OK) {
                SCITerminate();
                x->sd = NULL;
                return SCIFAIL(x, "SCIOpen", e);
        }
        unsigned node = 0;
        SCIGetLocalNodeId(0, &node, 0, &e);
        if (e != SCI_ERR_OK)
                return SCIFAIL(x, "SCIGetLocalNodeId", e);
        x->node_id = node;
        return 0;
}

uint32_t ntbf_nvmx_find_nvme(struct ntbf_nvmx *x)
{
        sci_smartio_device_info_t filter;
        memset(&filter, 0, sizeof(filter));
        filter.fdid = 0xffffffffu;
        filter.nodeid = 0xffffffffu;
        filter.pci_class = NVME_CLASS;
        uint32_t fdids[4];
        sci_error_t e;
        size_t n = SCIGetDeviceList(x->sd, fdids, 4, &filter, 0, &e);
        if (e != SCI_ERR_OK) {
                SCIFAIL(x, "SCIGetDeviceList", e);
                return 0;
        }
        if (!n) {
                fail(x, "no NVMe controller in the pool (SCIGetDeviceList found none of class "
                        "0x010802); is one lent ('ntbfab devices')?");
                return 0;
        }
        return fdids[0];
}

int ntbf_nvmx_borrow(struct ntbf_nvmx *x, uint32_t fdid, bool exclusive, const unsigned *adapters,
                     unsigned npaths)
{
        sci_error_t e;
        if (!npaths || npaths > NTBF_NVMX_PATHS)
                return fail(x, "1 or %u paths, not %u", NTBF_NVMX_PATHS, npaths);
        sci_smartio_device_info_t info;
        sci_smartio_query_device_t q = {fdid, SCI_Q_DEVICE_INFO, &info};
        SCIQuery(SCI_Q_DEVICE, &q, 0, &e);
        if (e != SCI_ERR_OK)
                return SCIFAIL(x, "SCIQuery(SCI_Q_DEVICE)", e);
        x->fdid = fdid;
        x->lender_id = info.nodeid;
        snprintf(x->name, sizeof(x->name), "%s", info.user_name);
        SCIBorrowDevice(x->sd, &x->dev, fdid, exclusive ? SCI_FLAG_EXCLUSIVE : 0, &e);
        if (e != SCI_ERR_OK) {
                x->dev = NULL;
                if (e == SCI_ERR_NOT_AVAILABLE)
                        return fail(x,
                                    "SCIBorrowDevice(0x%x, %s): %s; another process holds it "
                                    "exclusively (a manager resetting it?) or its lender is "
                                    "down",
                                    fdid, exclusive ? "exclusive" : "shared", SCIGetErrorString(e));
                return SCIFAIL(x, "SCIBorrowDevice", e);
        }
        x->exclusive = exclusive;
        for (unsigned p = 0; p < npaths; p++) {
                x->path[p].adapter = adapters ? adapters[p] : 0;
                sci_remote_segment_t seg;
                /* BAR0 through this path's adapter (its own connection, article 6.3). */
                SCIConnectDeviceSegmentPath(x->dev, &seg, 0, SCI_MEMTYPE_BAR, x->path[p].adapter,
                                            NULL, NULL, 0, &e);
                if (e != SCI_ERR_OK)
                        return SCIFAIL(x, "SCIConnectDeviceSegmentPath(BAR0)", e);
                x->path[p].seg = seg;
                x->npaths = p + 1;
                x->path[p].size = SCIGetRemoteSegmentSize(seg);
                volatile void *bar = SCIMapRemoteSegment(seg, &x->path[p].map, 0, x->path[p].size,
                                                         NULL, SCI_FLAG_IO_MAP_IOSPACE, &e);
                if (e != SCI_ERR_OK)
                        return SCIFAIL(x, "SCIMapRemoteSegment(BAR0)", e);
                x->path[p].bar0 = bar;
                x->path[p].phys = SCIGetMapPhysAddr(x->path[p].map);
        }
        return 0;
}

bool ntbf_nvmx_paths_distinct(const struct ntbf_nvmx *x)
{
        for (unsigned p = 1; p < x->npaths; p++)
                if (x->path[p].phys == x->path[0].phys)
                        return false;
        return true;
}

int ntbf_nvmx_release_exclusive(struct ntbf_nvmx *x)
{
        sci_error_t e;
        SCIReleaseExclusiveBorrow(x->dev, 0, &e);
        if (e != SCI_ERR_OK)
                return SCIFAIL(x, "SCIReleaseExclusiveBorrow", e);
        x->exclusive = false;
        return 0;
}

void ntbf_nvmx_close(struct ntbf_nvmx *x)
{
        sci_error_t e;
        for (unsigned p = 0; p < x->npaths; p++) {
                if (x->path[p].map)
                        SCIUnmapSegment(x->path[p].map, 0, &e);
                if (x->path[p].seg)
                        SCIDisconnectSegment(x->path[p].seg, 0, &e);
        }
        x->npaths = 0;
        if (x->dev)
                SCIReturnDevice(x->dev, 0, &e);
        x->dev = NULL;
        if (x->sd) {
                SCIClose(x->sd, 0, &e);
                SCITerminate();
        }
        x->sd = NULL;
}

/* ---- DMA memory ----------------------------------------------------------------------------- */

/* This host's memory, mapped for the controller through the adapters of the paths in mask. */
static int map_local(struct ntbf_nvmx *x, size_t size, unsigned mask, struct ntbf_nvmx_mem *m)
{
        sci_error_t e;
        SCICreateSegment(x->sd, &m->lseg, 0, size, NULL, NULL, SCI_FLAG_AUTO_ID | SCI_FLAG_PRIVATE,
                         &e);
        if (e != SCI_ERR_OK) {
                m->lseg = NULL;
                return SCIFAIL(x, "SCICreateSegment", e);
        }
        for (unsigned p = 0; p < x->npaths; p++) {
                if (!(mask >> p & 1))
                        continue;
                SCIPrepareSegment(m->lseg, x->path[p].adapter, 0, &e);
                if (e != SCI_ERR_OK)
                        return SCIFAIL(x, "SCIPrepareSegment", e);
        }
        m->m.va = SCIMapLocalSegment(m->lseg, &m->map, 0, size, NULL, 0, &e);
        if (e != SCI_ERR_OK)
                return SCIFAIL(x, "SCIMapLocalSegment", e);
        for (unsigned p = 0; p < x->npaths; p++) {
                if (!(mask >> p & 1))
                        continue;
                /* The controller's DMA enters this host through path p's adapter. */
                sci_ioaddr_t io;
                SCIMapLocalSegmentForDevice(m->lseg, x->path[p].adapter, x->dev, &io, 0, size, 0,
                                            &e);
                if (e != SCI_ERR_OK)
                        return SCIFAIL(x, "SCIMapLocalSegmentForDevice", e);
                m->io[p] = io;
                m->mapped |= 1u << p;
        }
        m->node_id = x->node_id;
        return 0;
}

static int map_devseg(struct ntbf_nvmx *x, unsigned path, size_t size, unsigned hints,
                      unsigned flags, struct ntbf_nvmx_mem *m)
{
        static unsigned next_id = 1; /* device segment ids are per process (private) */
        sci_error_t e;
        unsigned id = next_id++;
        SCICreateDeviceSegment(x->dev, id, size, SCI_MEMTYPE_PRIVATE, hints, flags, &e);
        if (e != SCI_ERR_OK)
                return SCIFAIL(x, "SCICreateDeviceSegment", e);
        SCIConnectDeviceSegmentPath(x->dev, &m->rseg, id, SCI_MEMTYPE_PRIVATE,
                                    x->path[path].adapter, NULL, NULL, 0, &e);
        if (e != SCI_ERR_OK) {
                m->rseg = NULL;
                return SCIFAIL(x, "SCIConnectDeviceSegment", e);
        }
        m->m.va = (void *)SCIMapRemoteSegment(m->rseg, &m->map, 0, size, NULL, 0, &e);
        if (e != SCI_ERR_OK)
                return SCIFAIL(x, "SCIMapRemoteSegment", e);
        sci_ioaddr_t io;
        SCIMapRemoteSegmentForDevice(m->rseg, x->dev, &io, 0, size, 0, &e);
        if (e != SCI_ERR_OK)
                return SCIFAIL(x, "SCIMapRemoteSegmentForDevice", e);
        for (unsigned p = 0; p < x->npaths; p++)
                m->io[p] = io; /* placed next to the device or here: one address for it */
        m->mapped = 1;
        m->node_id = SCIGetRemoteSegmentNodeId(m->rseg);
        return 0;
}

int ntbf_nvmx_alloc(struct ntbf_nvmx *x, size_t size, enum ntbf_nvmx_where where, unsigned hints,
                    struct ntbf_nvmx_devmem *dm, struct ntbf_nvmx_mem *out)
{
        return ntbf_nvmx_alloc_on(x, 0, size, where, hints, dm, out);
}

int ntbf_nvmx_alloc_on(struct ntbf_nvmx *x, unsigned p, size_t size, enum ntbf_nvmx_where where,
                       unsigned hints, struct ntbf_nvmx_devmem *dm, struct ntbf_nvmx_mem *out)
{
        memset(out, 0, sizeof(*out));
        out->where = where;
        size = (size + PG - 1) & ~(size_t)(PG - 1);
        int r;
        switch (where) {
        case NTBF_NVMX_HOST:
                /* Memory of a backup path is reached through that path only (article 6.3);
                 * path 0's through every path. */
                r = map_local(x, size, p ? 1u << p : ~0u, out);
                break;
        case NTBF_NVMX_HINTS:
                r = map_devseg(x, p, size, hints, 0, out);
                break;
        case NTBF_NVMX_LENDER:
                r = map_devseg(x, p, size, hints, SCI_FLAG_DEVICE_SIDE_ONLY, out);
                break;
        case NTBF_NVMX_DEVMEM:
                if (!dm || !dm->va)
                        return fail(x, "device memory needs an accelerator (--devmem FDID)");
                if (size > dm->size - dm->used)
                        return fail(x,
                                    "the accelerator's memory has %zu bytes left; %zu are needed",
                                    dm->size - dm->used, size);
                out->m.va = (void *)(dm->va + dm->used);
                for (unsigned k = 0; k < x->npaths; k++)
                        out->io[k] = dm->io + dm->used;
                out->node_id = dm->node_id;
                dm->used += size;
                r = 0;
                break;
        default:
                return fail(x, "no such placement");
        }
        if (r) {
                ntbf_nvmx_free(x, out);
                return r;
        }
        out->m.io = out->io[p];
        out->m.size = size;
        memset(out->m.va, 0, size);
        return 0;
}

void ntbf_nvmx_free(struct ntbf_nvmx *x, struct ntbf_nvmx_mem *m)
{
        sci_error_t e;
        if (m->lseg) {
                for (unsigned p = 0; p < x->npaths; p++)
                        if (m->mapped >> p & 1)
                                SCIUnmapLocalSegmentForDevice(m->lseg, x->path[p].adapter, x->dev,
                                                              0, &e);
                if (m->map)
                        SCIUnmapSegment(m->map, 0, &e);
                SCIRemoveSegment(m->lseg, 0, &e);
        } else if (m->rseg) {
                if (m->mapped)
                        SCIUnmapRemoteSegmentForDevice(m->rseg, x->dev, 0, &e);
                if (m->map)
                        SCIUnmapSegment(m->map, 0, &e);
                SCIDisconnectSegment(m->rseg, 0, &e);
        }
        memset(m, 0, sizeof(*m));
}

int ntbf_nvmx_devmem_open(struct ntbf_nvmx *x, uint32_t acc_fdid, struct ntbf_nvmx_devmem *dm)
{
        memset(dm, 0, sizeof(*dm));
        sci_error_t e;
        sci_smartio_device_info_t info;
        sci_smartio_query_device_t q = {acc_fdid, SCI_Q_DEVICE_INFO, &info};
        SCIQuery(SCI_Q_DEVICE, &q, 0, &e);
        if (e != SCI_ERR_OK)
                return SCIFAIL(x, "SCIQuery(SCI_Q_DEVICE) of the accelerator", e);
        dm->fdid = acc_fdid;
        dm->node_id = info.nodeid;
        SCIBorrowDevice(x->sd, &dm->acc, acc_fdid, 0, &e);
        if (e != SCI_ERR_OK) {
                dm->acc = NULL;
                return SCIFAIL(x, "SCIBorrowDevice(accelerator)", e);
        }
        SCIConnectDeviceSegment(dm->acc, &dm->seg, ACCEL_BAR, SCI_MEMTYPE_BAR, NULL, NULL, 0, &e);
        if (e != SCI_ERR_OK) {
                dm->seg = NULL;
                ntbf_nvmx_devmem_close(x, dm);
                return SCIFAIL(x, "SCIConnectDeviceSegment(accelerator BAR2)", e);
        }
        dm->size = SCIGetRemoteSegmentSize(dm->seg);
        dm->va = SCIMapRemoteSegment(dm->seg, &dm->map, 0, dm->size, NULL, 0, &e);
        if (e != SCI_ERR_OK) {
                dm->map = NULL;
                ntbf_nvmx_devmem_close(x, dm);
                return SCIFAIL(x, "SCIMapRemoteSegment(accelerator BAR2)", e);
        }
        sci_ioaddr_t io;
        SCIMapRemoteSegmentForDevice(dm->seg, x->dev, &io, 0, dm->size, 0, &e);
        if (e != SCI_ERR_OK) {
                ntbf_nvmx_devmem_close(x, dm);
                return SCIFAIL(x, "SCIMapRemoteSegmentForDevice(accelerator BAR2 for the NVMe)", e);
        }
        dm->io = io;
        return 0;
}

void ntbf_nvmx_devmem_close(struct ntbf_nvmx *x, struct ntbf_nvmx_devmem *dm)
{
        sci_error_t e;
        if (dm->io)
                SCIUnmapRemoteSegmentForDevice(dm->seg, x->dev, 0, &e);
        if (dm->map)
                SCIUnmapSegment(dm->map, 0, &e);
        if (dm->seg)
                SCIDisconnectSegment(dm->seg, 0, &e);
        if (dm->acc)
                SCIReturnDevice(dm->acc, 0, &e);
        memset(dm, 0, sizeof(*dm));
}

/* ---- the mailbox ---------------------------------------------------------------------------- */

int ntbf_nvmx_mbox_create(struct ntbf_nvmx *x, size_t size, struct ntbf_nvmx_mbox *mb)
{
        memset(mb, 0, sizeof(*mb));
        sci_error_t e;
        SCICreateSegment(x->sd, &mb->lseg, NTBF_NVMS_SEGID(x->fdid), size, NULL, NULL, 0, &e);
        if (e != SCI_ERR_OK) {
                mb->lseg = NULL;
                if (e == SCI_ERR_SEGMENTID_USED)
                        return fail(x,
                                    "SCICreateSegment(0x%x): another manager of 0x%x runs on this "
                                    "node",
                                    NTBF_NVMS_SEGID(x->fdid), x->fdid);
                return SCIFAIL(x, "SCICreateSegment(mailbox)", e);
        }
        mb->va[0] = SCIMapLocalSegment(mb->lseg, &mb->map[0], 0, size, NULL, 0, &e);
        if (e != SCI_ERR_OK) {
                mb->map[0] = NULL;
                return SCIFAIL(x, "SCIMapLocalSegment(mailbox)", e);
        }
        mb->n = 1;
        mb->size = size;
        memset((void *)mb->va[0], 0, size);
        /* Every adapter of the host, so clients reach it on any of their paths. */
        unsigned prepared = 0;
        for (unsigned a = 0; a < 8; a++) {
                SCIPrepareSegment(mb->lseg, a, 0, &e);
                if (e != SCI_ERR_OK)
                        continue;
                SCISetSegmentAvailable(mb->lseg, a, 0, &e);
                if (e != SCI_ERR_OK)
                        return SCIFAIL(x, "SCISetSegmentAvailable(mailbox)", e);
                prepared++;
        }
        if (!prepared)
                return fail(x, "SCIPrepareSegment(mailbox): no adapter of this host takes it");
        return 0;
}

int ntbf_nvmx_mbox_connect(struct ntbf_nvmx *x, uint32_t manager_id, unsigned timeout_ms,
                           struct ntbf_nvmx_mbox *mb)
{
        memset(mb, 0, sizeof(*mb));
        sci_error_t e;
        for (unsigned p = 0; p < (x->npaths ? x->npaths : 1); p++) {
                SCIConnectSegment(x->sd, &mb->rseg[p], manager_id, NTBF_NVMS_SEGID(x->fdid),
                                  x->path[p].adapter, NULL, NULL, timeout_ms, 0, &e);
                if (e != SCI_ERR_OK) {
                        mb->rseg[p] = NULL;
                        if (e == SCI_ERR_NO_SUCH_SEGMENT || e == SCI_ERR_TIMEOUT ||
                            e == SCI_ERR_CONNECTION_REFUSED)
                                return fail(x,
                                            "no NVMe manager of 0x%x on node %u (segment 0x%x: "
                                            "%s); start 'ntbfab-nvme manager' there, or name "
                                            "its node with --manager",
                                            x->fdid, manager_id, NTBF_NVMS_SEGID(x->fdid),
                                            SCIGetErrorString(e));
                        return SCIFAIL(x, "SCIConnectSegment(mailbox)", e);
                }
                mb->n = p + 1;
                mb->size = SCIGetRemoteSegmentSize(mb->rseg[p]);
                mb->va[p] = SCIMapRemoteSegment(mb->rseg[p], &mb->map[p], 0, mb->size, NULL, 0, &e);
                if (e != SCI_ERR_OK) {
                        mb->map[p] = NULL;
                        return SCIFAIL(x, "SCIMapRemoteSegment(mailbox)", e);
                }
        }
        return 0;
}

void ntbf_nvmx_mbox_close(struct ntbf_nvmx *x, struct ntbf_nvmx_mbox *mb)
{
        (void)x;
        sci_error_t e;
        for (unsigned p = 0; p < NTBF_NVMX_PATHS; p++) {
                if (mb->map[p])
                        SCIUnmapSegment(mb->map[p], 0, &e);
                if (mb->rseg[p])
                        SCIDisconnectSegment(mb->rseg[p], 0, &e);
        }
        if (mb->lseg)
                SCIRemoveSegment(mb->lseg, SCI_FLAG_FORCE_REMOVE, &e);
        memset(mb, 0, sizeof(*mb));
}

/* ---- multicast groups ----------------------------------------------------------------------- */

int ntbf_nvmx_group_join(struct ntbf_nvmx *x, uint32_t group, size_t size,
                         struct ntbf_nvmx_group *g)
{
        memset(g, 0, sizeof(*g));
        sci_error_t e;
        SCICreateSegment(x->sd, &g->lseg, group, size, NULL, NULL, SCI_FLAG_BROADCAST, &e);
        if (e != SCI_ERR_OK) {
                g->lseg = NULL;
                return SCIFAIL(x, "SCICreateSegment(broadcast)", e);
        }
        SCIPrepareSegment(g->lseg, x->npaths ? x->path[0].adapter : 0, 0, &e);
        if (e != SCI_ERR_OK)
                return SCIFAIL(x, "SCIPrepareSegment(broadcast)", e);
        g->va = SCIMapLocalSegment(g->lseg, &g->lmap, 0, size, NULL, 0, &e);
        if (e != SCI_ERR_OK) {
                g->lmap = NULL;
                return SCIFAIL(x, "SCIMapLocalSegment(broadcast)", e);
        }
        memset((void *)g->va, 0, size);
        SCISetSegmentAvailable(g->lseg, x->npaths ? x->path[0].adapter : 0, 0, &e);
        if (e != SCI_ERR_OK)
                return SCIFAIL(x, "SCISetSegmentAvailable(broadcast)", e);
        g->size = size;
        return 0;
}

int ntbf_nvmx_group_connect(struct ntbf_nvmx *x, uint32_t group, unsigned timeout_ms,
                            struct ntbf_nvmx_group *g)
{
        memset(g, 0, sizeof(*g));
        sci_error_t e;
        SCIConnectSegment(x->sd, &g->rseg, DIS_BROADCAST_NODEID_GROUP_ALL, group,
                          x->npaths ? x->path[0].adapter : 0, NULL, NULL, timeout_ms,
                          SCI_FLAG_BROADCAST, &e);
        if (e != SCI_ERR_OK) {
                g->rseg = NULL;
                return SCIFAIL(x, "SCIConnectSegment(broadcast group)", e);
        }
        g->size = SCIGetRemoteSegmentSize(g->rseg);
        sci_ioaddr_t io;
        SCIMapRemoteSegmentForDevice(g->rseg, x->dev, &io, 0, g->size, 0, &e);
        if (e != SCI_ERR_OK)
                return SCIFAIL(x, "SCIMapRemoteSegmentForDevice(broadcast group)", e);
        g->io = io;
        g->mapped = true;
        return 0;
}

void ntbf_nvmx_group_close(struct ntbf_nvmx *x, struct ntbf_nvmx_group *g)
{
        sci_error_t e;
        if (g->mapped)
                SCIUnmapRemoteSegmentForDevice(g->rseg, x->dev, 0, &e);
        if (g->rseg)
                SCIDisconnectSegment(g->rseg, 0, &e);
        if (g->lmap)
                SCIUnmapSegment(g->lmap, 0, &e);
        if (g->lseg)
                SCIRemoveSegment(g->lseg, 0, &e);
        memset(g, 0, sizeof(*g));
}
