/* backends/ivshmem/ivshmem.c: an NTB backend over a memory region two kernels share (ivshmem). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ntbfab/backend.h"
#include "ntbfab/error.h"
#include "../hostmem.h"
#include "../pollirq.h"
#include "../polltimer.h"

/*
 * Two QEMU guests with an ivshmem-plain device each, backed by one host file, see the same
 * bytes in their BAR2: a shared region of R bytes. This backend presents it as one NTB link
 * between two adapters (docs/vm.md):
 *
 *   [0, R/2)   side 0: a control block (CTRL bytes), then memory side 0 exports
 *   [R/2, R)   side 1: the same
 *
 * Side 0 is the adapter with the lower index in the cluster file. An adapter's window leads
 * into the other side's exported memory through its translation slots. The slots are a
 * table in the owner's control block (software: ivshmem has no translation hardware); a
 * CPU mapping of the window (map_window) is built from them with mmap, page by page of the
 * shared region, so loads and stores then go straight to the shared memory, and a device
 * behind an IOMMU reaches it through the IOMMU's mapping of that CPU mapping. A mapping
 * follows the slots and the link: changes made in this process rebuild it at once, changes
 * made elsewhere (the other kernel) at this process's next process_events. Doorbells,
 * scratchpads and link state live in the control blocks; ivshmem-plain has no interrupts,
 * so the event fd is a timer and events are found by polling (every POLL_MS). Interrupt
 * vectors are words of exported memory that a thread of the allocating process watches
 * (backends/pollirq.h, every NTBF__POLLIRQ_US): the other side's write of the vector's data to its
 * address, through a window slot like any MSI write, signals the vector's eventfd.
 *
 * Addresses: exported memory and far-side slot addresses are given in the model's terms,
 * as the core expects of exported memory: the region stands at the top of the node's RAM in
 * the cluster file. Nothing on the data path uses these numbers (the CPU reaches the region
 * through mmap, a device through an IOMMU mapping of a CPU mapping), so the BAR's real
 * guest-physical address does not matter.
 *
 * The region: the adapter's `bdf` in the cluster file (or the only 1af4:1110 device) gives
 * /sys/bus/pci/devices/BDF/resource2; NTBFAB_IVSHMEM_FILE names a plain file instead, and
 * so does the file `ivshmem` of the instance directory that create makes (both sides on one
 * host: `ntbfab up`, the conformance suite).
 */

#define IVS_MAGIC     UINT64_C(0x314853564962544e) /* "NTbIVSH1" */
#define IVS_VERSION   2
#define IVS_CTRL      (UINT64_C(64) << 10)
#define IVS_MAX_SLOTS 1024
#define IVS_SPADS     16
#define IVS_ALLOCS    256
#define IVS_DOORBELLS 64
#define POLL_MS       10
#define IRQ_DATA      UINT32_C(0x49560000) /* "IV": vector data is this | its id */
#define SLOT_VALID    (UINT64_C(1) << 63)
#define SLOT_NOWHERE  (UINT64_C(1) << 62) /* leads outside the other side's memory for export */
#define SLOT_ADDR     (SLOT_NOWHERE - 1)
#define PAGE          UINT64_C(4096)
#define REGION_FILE   "ivshmem" /* the region in an instance directory (create) */

struct ivs_alloc {
        uint64_t off, size; /* in the region; size 0: free entry */
        int32_t pid;        /* the allocating process (reclaimed when it is gone) */
        uint32_t pad;
};

/* A side's control block, at the start of its half. Shared by both kernels. */
struct ivs_ctrl {
        _Atomic uint64_t magic;
        uint32_t version, node_id;
        _Atomic uint64_t epoch;    /* bumped by every probe of this side */
        _Atomic uint64_t bar_phys; /* this side's physical address of the region */
        _Atomic uint32_t link_on;  /* this side enabled its port */
        _Atomic uint32_t lock;     /* allocations of this side's processes */
        _Atomic uint64_t db, db_mask;
        _Atomic uint32_t spad[IVS_SPADS];
        _Atomic uint64_t resets;
        _Atomic uint64_t gen; /* bumped by every change of slots: mappings are rebuilt */
        struct ivs_alloc allocs[IVS_ALLOCS];
        /* SLOT_VALID | offset in the region, or SLOT_VALID | SLOT_NOWHERE | the far address */
        _Atomic uint64_t slots[IVS_MAX_SLOTS];
        /* Bytes each slot translates. A slot is set by storing 0, its size, then its entry;
         * readers take entry, size, entry and keep the pair only when the entries agree. */
        _Atomic uint64_t xsize[IVS_MAX_SLOTS];
};
_Static_assert(sizeof(struct ivs_ctrl) <= IVS_CTRL, "the control block outgrew its space");

/* A CPU mapping of a window, rebuilt when what it leads to changes. */
struct ivs_map {
        struct ivs_map *next;
        struct ntbf_adapter_h *h;
        uint8_t *va;
        uint64_t offset, size;
};

struct ntbf_backend {
        const struct ntbf_topo *t;
        uint32_t node;
        char dir[PATH_MAX - 16]; /* instance directory: its file `ivshmem` is the region */
        pthread_mutex_t lock;    /* maps */
        struct ivs_map *maps;
        struct ntbf__pollirq irq; /* interrupt vectors */
};

struct ntbf_adapter_h {
        struct ntbf_backend *b;
        uint32_t adapter, peer; /* topology indexes */
        unsigned side;          /* 0 or 1 */
        int fd;                 /* the region: resource2 or a file */
        uint8_t *base;          /* all of it, mapped */
        uint64_t size, half;
        uint64_t window, slot_size;
        uint32_t nslots;
        struct ntbf_window win; /* the model's window 0, with this backend's alignments */
        char where[PATH_MAX];   /* for messages */
        /* Events. */
        int tfd;
        const struct ntbf_event_ops *ops;
        void *ctx;
        bool seen_up;
        uint64_t seen_db, seen_resets, seen_gen[2];
};

static struct ivs_ctrl *ctrl(const struct ntbf_adapter_h *h, unsigned side)
{
        return (struct ivs_ctrl *)(void *)(h->base + side * h->half);
}

static struct ivs_ctrl *mine(const struct ntbf_adapter_h *h)
{
        return ctrl(h, h->side);
}

static struct ivs_ctrl *theirs(const struct ntbf_adapter_h *h)
{
        return ctrl(h, h->side ^ 1);
}

static bool ready(const struct ivs_ctrl *c)
{
        return atomic_load(&c->magic) == IVS_MAGIC;
}

/* ---- instance and adapters --------------------------------------------------------------------
 */

/*
 * An instance on one machine: a plain file standing for the region, large enough that each
 * half holds a control block and leads the other side's window into its memory.
 */
static int region_size(const struct ntbf_topo *t, uint64_t *size, char *why, size_t whylen)
{
        uint64_t half = 2 * IVS_CTRL;
        unsigned links = 0;
        for (uint32_t l = 0; l < t->nlinks; l++) {
                const struct ntbf_link *k = &t->links[l];
                if (k->end[0].kind != NTBF_PORT_ADAPTER || k->end[1].kind != NTBF_PORT_ADAPTER) {
                        snprintf(why, whylen,
                                 "the ivshmem backend joins two adapters by one region: it has "
                                 "no switches (link %u)",
                                 l);
                        return NTBF_ECONFIG;
                }
                links++;
                for (int e = 0; e < 2; e++)
                        while (half < t->adapters[k->end[e].obj].win[0].size)
                                half <<= 1;
        }
        if (links != 1) {
                snprintf(why, whylen,
                         "the ivshmem backend joins two adapters by one region: the cluster has "
                         "%u links, not 1",
                         links);
                return NTBF_ECONFIG;
        }
        *size = 2 * half;
        return 0;
}

static int ivs_create(const struct ntbf_topo *t, const char *dir, char *why, size_t whylen)
{
        uint64_t size;
        int r = region_size(t, &size, why, whylen);
        if (r)
                return r;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/" REGION_FILE, dir);
        if (mkdir(dir, 0700) && errno != EEXIST) {
                r = -errno;
                snprintf(why, whylen, "cannot create %s: %s", dir, strerror(errno));
                return r;
        }
        struct stat st;
        if (!stat(path, &st)) {
                if ((uint64_t)st.st_size == size)
                        return 0; /* the same instance: nothing to do */
                snprintf(why, whylen,
                         "%s holds a region of %lld bytes, not the %" PRIu64 " this cluster "
                         "needs; destroy that instance first (ntbfab down)",
                         path, (long long)st.st_size, size);
                return NTBF_EEXISTS;
        }
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)size)) {
                r = -errno;
                snprintf(why, whylen, "cannot create %s: %s", path, strerror(errno));
                if (fd >= 0) {
                        close(fd);
                        unlink(path);
                }
                return r;
        }
        close(fd);
        return 0;
}

static int ivs_destroy(const struct ntbf_topo *t, const char *dir)
{
        (void)t;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/" REGION_FILE, dir);
        if (unlink(path) && errno != ENOENT)
                return -errno;
        rmdir(dir); /* when nothing else is left in it */
        return 0;
}

static const struct ntbf__pollirq_mem irq_mem;

static int ivs_open(const struct ntbf_backend_env *env, struct ntbf_backend **out, char *why,
                    size_t whylen)
{
        if (!env || !env->topo || !out) {
                snprintf(why, whylen, "opening needs a finalized topology");
                return -EINVAL;
        }
        struct ntbf_backend *b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->t = env->topo;
        b->node = env->node;
        if (env->dir)
                snprintf(b->dir, sizeof(b->dir), "%s", env->dir);
        pthread_mutex_init(&b->lock, NULL);
        ntbf__pollirq_init(&b->irq, &irq_mem, IRQ_DATA);
        *out = b;
        return 0;
}

static void ivs_close(struct ntbf_backend *b)
{
        ntbf__pollirq_fini(&b->irq);
        while (b->maps) {
                struct ivs_map *m = b->maps;
                b->maps = m->next;
                munmap(m->va, m->size);
                free(m);
        }
        pthread_mutex_destroy(&b->lock);
        free(b);
}

static int read_line(const char *path, char *buf, size_t len)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        char *r = fgets(buf, (int)len, f);
        fclose(f);
        return r ? 0 : -EIO;
}

/* The PCI address of the ivshmem device: the adapter's bdf, or the only one there is. */
static int find_device(const struct ntbf_adapter *a, char *bdf, int len)
{
        if (a->bdf[0]) {
                snprintf(bdf, (size_t)len, "%s", a->bdf);
                return 0;
        }
        DIR *d = opendir("/sys/bus/pci/devices");
        if (!d)
                return -ENOENT;
        unsigned n = 0;
        for (struct dirent *e; (e = readdir(d));) {
                char p[PATH_MAX], v[32], dv[32];
                if (e->d_name[0] == '.')
                        continue;
                snprintf(p, sizeof(p), "/sys/bus/pci/devices/%s/vendor", e->d_name);
                if (read_line(p, v, sizeof(v)) || strncmp(v, "0x1af4", 6))
                        continue;
                snprintf(p, sizeof(p), "/sys/bus/pci/devices/%s/device", e->d_name);
                if (read_line(p, dv, sizeof(dv)) || strncmp(dv, "0x1110", 6))
                        continue;
                if (!n++)
                        snprintf(bdf, (size_t)len, "%.*s", len - 1, e->d_name);
        }
        closedir(d);
        return n == 1 ? 0 : n ? -EEXIST : -ENOENT;
}

/* Where the region stands in the model: the top of the node's RAM (see the top of the file). */
static int model_base(struct ntbf_adapter_h *h, uint64_t *base)
{
        const struct ntbf_topo *t = h->b->t;
        const struct ntbf_addrmap *m = &t->maps[t->adapters[h->adapter].node];
        for (uint32_t i = m->n; i-- > 0;) {
                const struct ntbf_region *r = &m->v[i];
                if (r->kind != NTBF_REGION_RAM)
                        continue;
                if (r->size < h->size)
                        return NTBF_ECONFIG;
                *base = r->base + r->size - h->size;
                return 0;
        }
        return NTBF_ECONFIG;
}

/* Open the region: fd and size. */
static int open_region(struct ntbf_adapter_h *h)
{
        const struct ntbf_adapter *a = &h->b->t->adapters[h->adapter];
        const char *file = getenv("NTBFAB_IVSHMEM_FILE");
        struct stat st;
        char inst[PATH_MAX];
        snprintf(inst, sizeof(inst), "%s/" REGION_FILE, h->b->dir);
        if ((!file || !*file) && h->b->dir[0] && !access(inst, F_OK))
                file = inst;
        if (file && *file) {
                snprintf(h->where, sizeof(h->where), "%s", file);
                h->fd = open(file, O_RDWR | O_CLOEXEC);
                if (h->fd < 0 || fstat(h->fd, &st))
                        return -errno;
                h->size = (uint64_t)st.st_size;
                return 0;
        }
        char bdf[64], p[PATH_MAX];
        int r = find_device(a, bdf, (int)sizeof(bdf));
        if (r)
                return r;
        snprintf(p, sizeof(p), "/sys/bus/pci/devices/%s/enable", bdf);
        int fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
                ssize_t w = write(fd, "1", 1); /* memory decoding on: BAR2 answers */
                (void)w;
                close(fd);
        }
        snprintf(h->where, sizeof(h->where), "/sys/bus/pci/devices/%s/resource2", bdf);
        h->fd = open(h->where, O_RDWR | O_CLOEXEC);
        if (h->fd < 0 || fstat(h->fd, &st))
                return -errno;
        h->size = (uint64_t)st.st_size;
        return 0;
}

static int ivs_probe(struct ntbf_backend *b, uint32_t adapter, struct ntbf_adapter_h **out)
{
        const struct ntbf_topo *t = b->t;
        if (!out || adapter >= t->nadapters)
                return -EINVAL;
        if (b->node != NTBF_NONE && t->adapters[adapter].node != b->node)
                return -EPERM;
        uint32_t l = t->adapters[adapter].link[0];
        if (l == NTBF_NONE)
                return NTBF_ENOPATH; /* a shared region needs the other side */
        struct ntbf_port_ref o =
            ntbf_link_peer(&t->links[l], (struct ntbf_port_ref){NTBF_PORT_ADAPTER, adapter, 0});
        if (o.kind != NTBF_PORT_ADAPTER)
                return NTBF_EUNSUPPORTED; /* no switches between two shared-memory ends */
        struct ntbf_adapter_h *h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->b = b;
        h->adapter = adapter;
        h->peer = o.obj;
        h->side = adapter < o.obj ? 0 : 1;
        h->fd = h->tfd = -1;
        const struct ntbf_adapter *a = &t->adapters[adapter];
        if (a->nwin != 1) {
                free(h);
                return NTBF_ECONFIG; /* the region is one window */
        }
        h->win = a->win[0];
        h->window = h->win.size;
        h->nslots = h->win.slots;
        h->slot_size = h->win.slot_size;
        /* Page-granular: any page of exported memory, any number of pages of a slot. */
        h->win.addr_align = h->win.size_align = PAGE;
        h->win.size_max = h->slot_size;
        uint64_t phys = 0;
        int r = open_region(h);
        if (!r)
                r = model_base(h, &phys);
        if (r)
                goto fail;
        h->half = h->size / 2;
        /* The window leads into the other half; both halves must hold a control block. */
        if (h->size & (h->size - 1) || h->half <= IVS_CTRL || h->window > h->half ||
            h->nslots > IVS_MAX_SLOTS || !h->slot_size || h->slot_size % PAGE) {
                r = NTBF_ECONFIG;
                goto fail;
        }
        h->base = mmap(NULL, h->size, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, 0);
        if (h->base == MAP_FAILED) {
                h->base = NULL;
                r = -errno;
                goto fail;
        }
        struct ivs_ctrl *c = mine(h);
        if (!ready(c)) {
                /* First attach of this side since the region was made: its block is ours. */
                memset(c, 0, sizeof(*c));
                c->version = IVS_VERSION;
                c->node_id = t->nodes[t->adapters[adapter].node].id;
                atomic_store(&c->link_on, 1);
                atomic_store(&c->magic, IVS_MAGIC);
        } else if (c->version != IVS_VERSION) {
                r = NTBF_EPROTO;
                goto fail;
        }
        atomic_store(&c->bar_phys, phys);
        atomic_fetch_add(&c->epoch, 1);
        h->seen_up =
            atomic_load(&c->link_on) && ready(theirs(h)) && atomic_load(&theirs(h)->link_on);
        h->seen_resets = atomic_load(&c->resets);
        h->seen_gen[0] = atomic_load(&ctrl(h, 0)->gen);
        h->seen_gen[1] = atomic_load(&ctrl(h, 1)->gen);
        *out = h;
        return 0;
fail:
        if (h->base)
                munmap(h->base, h->size);
        if (h->fd >= 0)
                close(h->fd);
        free(h);
        return r;
}

static void ivs_release(struct ntbf_adapter_h *h)
{
        if (!h)
                return;
        ntbf__pollirq_drop(&h->b->irq, h);
        /* Mappings outlive nothing they lead to: the region is unmapped below. */
        pthread_mutex_lock(&h->b->lock);
        for (struct ivs_map **pp = &h->b->maps; *pp;) {
                struct ivs_map *m = *pp;
                if (m->h == h) {
                        *pp = m->next;
                        munmap(m->va, m->size);
                        free(m);
                } else {
                        pp = &m->next;
                }
        }
        pthread_mutex_unlock(&h->b->lock);
        if (h->tfd >= 0)
                close(h->tfd);
        munmap(h->base, h->size);
        close(h->fd);
        free(h);
}

static int ivs_caps(struct ntbf_adapter_h *h, struct ntbf_caps *c)
{
        if (!c)
                return -EINVAL;
        const struct ntbf_adapter *a = &h->b->t->adapters[h->adapter];
        *c = (struct ntbf_caps){
            .flags = NTBF_CAP_XLAT_OUTBOUND | NTBF_CAP_XLAT_INBOUND | NTBF_CAP_CPU_MAP |
                     NTBF_CAP_MAP_LIVE | NTBF_CAP_MEM | NTBF_CAP_DOORBELL | NTBF_CAP_SCRATCHPAD |
                     NTBF_CAP_IRQ | NTBF_CAP_NO_RID_TABLE | NTBF_CAP_LINK_CTRL | NTBF_CAP_RESET,
            .ports = 1,
            .peers = 1,
            /* The window has no fixed physical range (its slots are applied by map_window):
             * the model's address is reported (docs/vm.md). */
            .nwindows = 1,
            .windows = {h->win},
            .slots = h->nslots,
            .addr_bits = 64,
            .db_valid_mask =
                a->p.doorbells >= 64 ? UINT64_MAX : (UINT64_C(1) << a->p.doorbells) - 1,
            .db_vectors = 1,
            .scratchpads = a->p.scratchpads < IVS_SPADS ? a->p.scratchpads : IVS_SPADS,
        };
        return 0;
}

/* ---- link and events ------------------------------------------------------------------------ */

static bool link_up(struct ntbf_adapter_h *h)
{
        return atomic_load(&mine(h)->link_on) && ready(theirs(h)) &&
               atomic_load(&theirs(h)->link_on);
}

static int ivs_link_state(struct ntbf_adapter_h *h, uint32_t port, bool *up)
{
        if (port != 0 || !up)
                return -EINVAL;
        *up = link_up(h);
        return 0;
}

static void remap(struct ntbf_backend *b);

static int ivs_link_enable(struct ntbf_adapter_h *h, uint32_t port)
{
        if (port != 0)
                return -EINVAL;
        atomic_store(&mine(h)->link_on, 1);
        remap(h->b);
        return 0;
}

static int ivs_link_disable(struct ntbf_adapter_h *h, uint32_t port)
{
        if (port != 0)
                return -EINVAL;
        atomic_store(&mine(h)->link_on, 0);
        remap(h->b);
        return 0;
}

static int ivs_set_events(struct ntbf_adapter_h *h, const struct ntbf_event_ops *ops, void *ctx)
{
        h->ops = ops;
        h->ctx = ctx;
        return 0;
}

static int ivs_event_fd(struct ntbf_adapter_h *h)
{
        /* No interrupts on ivshmem-plain: a timer makes the owner look. */
        return ntbf__polltimer_fd(&h->tfd, POLL_MS);
}

static int ivs_process_events(struct ntbf_adapter_h *h)
{
        ntbf__polltimer_drain(h->tfd);
        struct ivs_ctrl *c = mine(h);
        const struct ntbf_event_ops *ops = h->ops;
        int n = 0;
        uint64_t resets = atomic_load(&c->resets);
        if (resets != h->seen_resets) {
                h->seen_resets = resets;
                if (ops && ops->reset_event)
                        ops->reset_event(h->ctx);
                n++;
        }
        bool up = link_up(h);
        uint64_t g0 = atomic_load(&ctrl(h, 0)->gen), g1 = atomic_load(&ctrl(h, 1)->gen);
        if (up != h->seen_up || g0 != h->seen_gen[0] || g1 != h->seen_gen[1]) {
                /* The other kernel changed what windows lead to: follow it. */
                h->seen_gen[0] = g0;
                h->seen_gen[1] = g1;
                remap(h->b);
        }
        if (up != h->seen_up) {
                h->seen_up = up;
                if (ops && ops->link_event)
                        ops->link_event(h->ctx, 0, up);
                n++;
        }
        /* Bits that are newly set (and unmasked): a rung doorbell is reported once. */
        uint64_t db = atomic_load(&c->db) & ~atomic_load(&c->db_mask);
        uint64_t fresh = db & ~h->seen_db;
        h->seen_db = db;
        if (fresh) {
                if (ops && ops->db_event)
                        ops->db_event(h->ctx, 0, fresh);
                n++;
        }
        return n;
}

/* ---- translation ---------------------------------------------------------------------------- */

/*
 * Where this side's memory for export starts in the region: after the control block, at a
 * slot boundary. The core translates whole slots (a slot's start is the address it leads to
 * rounded down to the slot size), so memory sharing a slot with the control block could not
 * be reached through a window without exposing the block.
 */
static uint64_t export_lo(const struct ntbf_adapter_h *h, unsigned side)
{
        uint64_t lo = side * h->half + IVS_CTRL, s = h->slot_size;
        return (lo + s - 1) / s * s;
}

/* The region offset a far address of side `side` stands for, if it is that side's memory. */
static int far_offset(struct ntbf_adapter_h *h, unsigned side, uint64_t addr, uint64_t len,
                      uint64_t *off)
{
        struct ivs_ctrl *c = ctrl(h, side);
        if (!ready(c))
                return -ENOTCONN; /* the other kernel has not attached yet */
        uint64_t phys = atomic_load(&c->bar_phys), lo = export_lo(h, side),
                 hi = (side + 1) * h->half;
        if (addr < phys || addr - phys < lo || addr - phys > hi || len > hi - (addr - phys))
                return NTBF_EUNREACHABLE; /* not memory that side exports */
        *off = addr - phys;
        return 0;
}

/* Slot k of a control block as one consistent (entry, size) pair. */
static uint64_t slot_read(struct ivs_ctrl *c, uint32_t k, uint64_t *size)
{
        for (;;) {
                uint64_t e = atomic_load(&c->slots[k]), n = atomic_load(&c->xsize[k]);
                if (atomic_load(&c->slots[k]) == e) {
                        *size = n;
                        return e;
                }
        }
}

static int set_slot(struct ntbf_adapter_h *h, unsigned side, uint32_t slot, uint64_t addr,
                    uint64_t size)
{
        if (slot >= h->nslots || !ntbf_window_xlat_ok(&h->win, addr, size))
                return -EINVAL;
        uint64_t off;
        int r = far_offset(h, side ^ 1, addr, size, &off);
        /*
         * An address the other side does not export (a device's BAR, its MSI range, RAM
         * outside the region): programmed as on any NTB, but nothing is there for this
         * backend to reach, so accesses through the slot are dropped, as a master abort
         * would drop them. What the kernel tier's shadow device does with such a borrow's
         * data path is docs/kernel.md's.
         */
        if (r == NTBF_EUNREACHABLE && addr <= SLOT_ADDR)
                off = SLOT_NOWHERE | addr;
        else if (r)
                return r;
        struct ivs_ctrl *c = ctrl(h, side);
        atomic_store(&c->slots[slot], 0);
        atomic_store(&c->xsize[slot], size);
        atomic_store(&c->slots[slot], SLOT_VALID | off);
        atomic_fetch_add(&ctrl(h, side)->gen, 1);
        remap(h->b);
        return 0;
}

static int clear_slot(struct ntbf_adapter_h *h, unsigned side, uint32_t slot)
{
        if (slot >= h->nslots)
                return -EINVAL;
        atomic_store(&ctrl(h, side)->slots[slot], 0);
        atomic_fetch_add(&ctrl(h, side)->gen, 1);
        remap(h->b);
        return 0;
}

static int ivs_xlat_set(struct ntbf_adapter_h *h, uint32_t slot, const struct ntbf_xlat *x)
{
        if (!x || x->mcast_group != NTBF_NONE || x->dst_adapter != h->peer)
                return -EINVAL; /* one link, to one peer */
        return set_slot(h, h->side, slot, x->addr, x->size);
}

static int ivs_xlat_clear(struct ntbf_adapter_h *h, uint32_t slot)
{
        return clear_slot(h, h->side, slot);
}

static int ivs_peer_xlat_set(struct ntbf_adapter_h *h, uint32_t peer, uint32_t slot,
                             uint64_t local_addr, uint64_t size)
{
        if (peer != h->peer)
                return -EINVAL;
        if (!ready(theirs(h)))
                return -ENOTCONN;
        return set_slot(h, h->side ^ 1, slot, local_addr, size);
}

static int ivs_peer_xlat_clear(struct ntbf_adapter_h *h, uint32_t peer, uint32_t slot)
{
        if (peer != h->peer)
                return -EINVAL;
        return clear_slot(h, h->side ^ 1, slot);
}

static int ivs_xlat_get(struct ntbf_adapter_h *h, uint32_t slot, struct ntbf_xlat *x, bool *valid)
{
        if (slot >= h->nslots || !x || !valid)
                return -EINVAL;
        uint64_t size, e = slot_read(mine(h), slot, &size);
        *valid = e & SLOT_VALID;
        const struct ntbf_adapter *p = &h->b->t->adapters[h->peer];
        uint64_t addr = !*valid              ? 0
                        : (e & SLOT_NOWHERE) ? e & SLOT_ADDR
                                             : atomic_load(&theirs(h)->bar_phys) + (e & SLOT_ADDR);
        *x = (struct ntbf_xlat){p->node, h->peer, addr, NTBF_NONE, *valid ? size : 0};
        return 0;
}

/* ---- CPU maps ---------------------------------------------------------------------------------
 */

/*
 * Lay [offset, offset + size) of h's window over va: each slot's part maps the shared memory
 * its translation leads to, or, when the slot is unprogrammed or the link is down, a private
 * page of all ones (reads return all ones, writes are lost: what a dropped access does).
 */
static int place(struct ntbf_adapter_h *h, uint8_t *va, uint64_t offset, uint64_t size)
{
        bool up = link_up(h);
        for (uint64_t pos = offset; pos < offset + size;) {
                uint32_t slot = (uint32_t)(pos / h->slot_size);
                uint64_t xs, in = pos % h->slot_size, n = h->slot_size - in;
                uint64_t e = slot_read(mine(h), slot, &xs);
                bool valid = (e & SLOT_VALID) && up && in < xs;
                if (valid && n > xs - in)
                        n = xs - in; /* the translation ends inside the slot */
                if (n > offset + size - pos)
                        n = offset + size - pos;
                void *p;
                if (valid && !(e & SLOT_NOWHERE)) {
                        p = mmap(va + (pos - offset), n, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_FIXED, h->fd, (off_t)((e & SLOT_ADDR) + in));
                } else {
                        p = mmap(va + (pos - offset), n, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
                        if (p != MAP_FAILED)
                                memset(p, 0xff, n);
                }
                if (p == MAP_FAILED)
                        return -errno;
                pos += n;
        }
        return 0;
}

/* Rebuild every mapping of this process (after a change of slots or link). */
static void remap(struct ntbf_backend *b)
{
        pthread_mutex_lock(&b->lock);
        for (struct ivs_map *m = b->maps; m; m = m->next)
                place(m->h, m->va, m->offset, m->size);
        pthread_mutex_unlock(&b->lock);
}

static int ivs_map_window(struct ntbf_adapter_h *h, uint32_t win, uint64_t offset, uint64_t size,
                          unsigned flags, void **addr)
{
        /* Shared memory: cached either way. */
        bool fixed = flags & NTBF_MAP_FIXED;
        if (!addr || !size || win != 0 || offset % PAGE || size % PAGE || offset > h->window ||
            size > h->window - offset || (fixed && (!*addr || (uintptr_t)*addr % PAGE)))
                return -EINVAL;
        struct ivs_map *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        /* A range of address space (or the caller's), then each slot's part placed over it. */
        uint8_t *va =
            fixed ? *addr : mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (va == MAP_FAILED) {
                free(m);
                return -errno;
        }
        *m = (struct ivs_map){NULL, h, va, offset, size};
        pthread_mutex_lock(&h->b->lock);
        int r = place(h, va, offset, size);
        if (!r) {
                m->next = h->b->maps;
                h->b->maps = m;
        }
        pthread_mutex_unlock(&h->b->lock);
        if (r) {
                if (fixed) /* the caller's reservation, as it was */
                        mmap(va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
                else
                        munmap(va, size);
                free(m);
                return r;
        }
        *addr = va;
        return 0;
}

static int ivs_unmap_window(struct ntbf_adapter_h *h, void *addr, uint64_t size)
{
        struct ivs_map *found = NULL;
        pthread_mutex_lock(&h->b->lock);
        for (struct ivs_map **pp = &h->b->maps; *pp; pp = &(*pp)->next)
                if ((*pp)->va == addr && (*pp)->size == size) {
                        found = *pp;
                        *pp = found->next;
                        break;
                }
        pthread_mutex_unlock(&h->b->lock);
        if (!found)
                return -EINVAL;
        free(found);
        return munmap(addr, size) ? -errno : 0;
}

/*
 * A posted write through the window (an MSI write): stored into the shared memory the slots
 * lead to. A 4-byte aligned write is one store, so a vector's watcher never sees half of it.
 */
static int ivs_window_write(struct ntbf_adapter_h *h, uint32_t win, uint64_t offset,
                            const void *buf, uint64_t len)
{
        if (!buf || !len || win != 0 || offset >= h->window || len > h->window - offset)
                return -EINVAL;
        if (!link_up(h))
                return NTBF_ELINKDOWN; /* lost, as a posted write on a dead link */
        const uint8_t *src = buf;
        int r = 0;
        for (uint64_t pos = offset; pos < offset + len;) {
                uint32_t slot = (uint32_t)(pos / h->slot_size);
                uint64_t xs, in = pos % h->slot_size, n = h->slot_size - in;
                uint64_t e = slot_read(mine(h), slot, &xs);
                if ((e & SLOT_VALID) && in < xs && n > xs - in)
                        n = xs - in;
                if (n > offset + len - pos)
                        n = offset + len - pos;
                if (!(e & SLOT_VALID) || in >= xs) {
                        r = NTBF_EUNPROGRAMMED; /* this part is dropped */
                } else if (e & SLOT_NOWHERE) {
                        r = NTBF_EUNREACHABLE; /* so is this one */
                } else {
                        uint8_t *dst = h->base + (e & SLOT_ADDR) + in;
                        if (n == 4 && !((uintptr_t)dst % 4)) {
                                uint32_t v;
                                memcpy(&v, src + (pos - offset), 4);
                                atomic_store((_Atomic uint32_t *)(void *)dst, v);
                        } else {
                                memcpy(dst, src + (pos - offset), n);
                                atomic_thread_fence(memory_order_release);
                        }
                }
                pos += n;
        }
        return r;
}

/* ---- exported memory ----------------------------------------------------------------------------
 */

static void lock(struct ivs_ctrl *c)
{
        uint32_t zero = 0;
        for (unsigned n = 0; !atomic_compare_exchange_weak(&c->lock, &zero, 1); n++) {
                zero = 0;
                if (n > 1000)
                        usleep(50);
        }
}

static void unlock(struct ivs_ctrl *c)
{
        atomic_store(&c->lock, 0);
}

static int ivs_mem_alloc(struct ntbf_adapter_h *h, uint64_t size, uint64_t align,
                         struct ntbf_mem *out)
{
        if (!out || !size || (align & (align - 1)))
                return -EINVAL;
        if (align < PAGE)
                align = PAGE;
        size = (size + PAGE - 1) & ~(PAGE - 1);
        struct ivs_ctrl *c = mine(h);
        uint64_t lo = export_lo(h, h->side), hi = (h->side + 1) * h->half;
        lock(c);
        /* Entries of processes that died are free again. */
        for (int i = 0; i < IVS_ALLOCS; i++)
                if (c->allocs[i].size && kill(c->allocs[i].pid, 0) && errno == ESRCH)
                        c->allocs[i].size = 0;
        /* First fit: the lowest aligned start that overlaps no live allocation. */
        uint64_t at = (lo + align - 1) & ~(align - 1);
        int slot = -1;
        for (bool moved = true; moved && at + size <= hi;) {
                moved = false;
                for (int i = 0; i < IVS_ALLOCS; i++) {
                        const struct ivs_alloc *x = &c->allocs[i];
                        if (x->size && at < x->off + x->size && x->off < at + size) {
                                at = (x->off + x->size + align - 1) & ~(align - 1);
                                moved = true;
                        }
                }
        }
        for (int i = 0; i < IVS_ALLOCS && slot < 0; i++)
                if (!c->allocs[i].size)
                        slot = i;
        int r = 0;
        if (at + size > hi || slot < 0) {
                r = -ENOMEM;
        } else {
                c->allocs[slot] = (struct ivs_alloc){at, size, (int32_t)getpid(), 0};
        }
        unlock(c);
        if (r)
                return r;
        int fd = fcntl(h->fd, F_DUPFD_CLOEXEC, 0);
        *out = (struct ntbf_mem){h->base + at, size, atomic_load(&c->bar_phys) + at, fd, at};
        memset(out->addr, 0, size);
        return 0;
}

static int ivs_mem_free(struct ntbf_adapter_h *h, struct ntbf_mem *m)
{
        if (!m || (uint8_t *)m->addr < h->base || (uint8_t *)m->addr >= h->base + h->size)
                return -EINVAL;
        uint64_t off = (uint64_t)((uint8_t *)m->addr - h->base);
        struct ivs_ctrl *c = mine(h);
        int r = -EINVAL;
        lock(c);
        for (int i = 0; i < IVS_ALLOCS; i++)
                if (c->allocs[i].size && c->allocs[i].off == off) {
                        c->allocs[i].size = 0;
                        r = 0;
                }
        unlock(c);
        if (m->fd >= 0)
                close(m->fd);
        m->fd = -1;
        return r;
}

/* Whether [off, off + size) of the region lies inside one live allocation of this side. */
static bool allocated(struct ntbf_adapter_h *h, uint64_t off, uint64_t size)
{
        struct ivs_ctrl *c = mine(h);
        bool in = false;
        lock(c);
        for (int i = 0; i < IVS_ALLOCS && !in; i++) {
                const struct ivs_alloc *x = &c->allocs[i];
                in = x->size && off >= x->off && size <= x->size && off - x->off <= x->size - size;
        }
        unlock(c);
        return in;
}

/* Another process's allocation, by bus address: the same pages of the region, mapped here. */
static int ivs_mem_map(struct ntbf_adapter_h *h, uint64_t bus_addr, uint64_t size, void **addr)
{
        if (!addr || !size)
                return -EINVAL;
        uint64_t phys = atomic_load(&mine(h)->bar_phys);
        if (bus_addr < phys || bus_addr - phys > h->size || size > h->size - (bus_addr - phys) ||
            !allocated(h, bus_addr - phys, size))
                return -EFAULT;
        uint64_t off = bus_addr - phys, pg = off & ~(PAGE - 1);
        uint64_t len = ((off + size + PAGE - 1) & ~(PAGE - 1)) - pg;
        uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, (off_t)pg);
        if (p == MAP_FAILED)
                return -errno;
        *addr = p + (off - pg);
        return 0;
}

static int ivs_mem_unmap(struct ntbf_adapter_h *h, void *addr, uint64_t size)
{
        (void)h;
        if (!addr || !size)
                return -EINVAL;
        uintptr_t a = (uintptr_t)addr, pg = a & ~(uintptr_t)(PAGE - 1);
        return munmap((void *)pg, ((a + size + PAGE - 1) & ~(uintptr_t)(PAGE - 1)) - pg) ? -errno
                                                                                         : 0;
}

/*
 * This host's memory (host_map): this side's memory for export as mem_map maps it, or a BAR
 * of a local PCI device through its sysfs resource file (root only). The rest of the host's
 * RAM is out of this backend's reach: -EFAULT.
 */
static int ivs_host_map(struct ntbf_adapter_h *h, uint64_t addr, uint64_t size, void **out)
{
        if (!out || !size)
                return -EINVAL;
        uint64_t phys = atomic_load(&mine(h)->bar_phys);
        if (addr - phys < h->size)
                return ivs_mem_map(h, addr, size, out);
        return ntbf__pci_bar_map("", addr, size, out);
}

/*
 * The bus address of memory for export this process maps: in the backend's mapping of the
 * region, or in another mapping of the region's file (mem_map's, or the caller's own), whose
 * offset /proc/self/maps gives relative to the backend's mapping (a sysfs resource file
 * reports offsets from the BAR's address, a plain file from 0).
 */
static int ivs_host_bus(struct ntbf_adapter_h *h, const void *addr, uint64_t size, uint64_t *bus)
{
        if (!addr || !size || !bus)
                return -EINVAL;
        const uint8_t *a = addr;
        uint64_t off, at, base;
        if (a >= h->base && (uint64_t)(a - h->base) < h->size)
                off = (uint64_t)(a - h->base);
        else if (!ntbf__maps_file_off(h->fd, addr, size, &at) &&
                 !ntbf__maps_file_off(h->fd, h->base, 1, &base) && at >= base)
                off = at - base;
        else
                return -EFAULT;
        if (off >= h->size || size > h->size - off || !allocated(h, off, size))
                return -EFAULT;
        *bus = atomic_load(&mine(h)->bar_phys) + off;
        return 0;
}

/* ---- interrupt vectors --------------------------------------------------------------------------
 */

/* Vectors are pages of this side's memory for export (backends/pollirq.h). */
static const struct ntbf__pollirq_mem irq_mem = {ivs_mem_alloc, ivs_mem_free};

static int ivs_irq_alloc(struct ntbf_adapter_h *h, struct ntbf_irq *out)
{
        return ntbf__pollirq_alloc(&h->b->irq, h, out);
}

static int ivs_irq_free(struct ntbf_adapter_h *h, struct ntbf_irq *irq)
{
        return ntbf__pollirq_free(&h->b->irq, h, irq);
}

/* A local interrupt: the vector's data stored into its word, as a local writer would. */
static int ivs_irq_trigger(struct ntbf_adapter_h *h, uint64_t addr, uint32_t data)
{
        uint64_t phys = atomic_load(&mine(h)->bar_phys);
        if (addr % 4 || addr < phys || addr - phys > h->size - 4 || !allocated(h, addr - phys, 4))
                return -EINVAL;
        atomic_store((_Atomic uint32_t *)(void *)(h->base + (addr - phys)), data);
        return 0;
}

/* ---- doorbells and scratchpads ------------------------------------------------------------------
 */

static int ivs_db_read(struct ntbf_adapter_h *h, uint64_t *bits)
{
        *bits = atomic_load(&mine(h)->db);
        return 0;
}

static int ivs_db_clear(struct ntbf_adapter_h *h, uint64_t bits)
{
        atomic_fetch_and(&mine(h)->db, ~bits);
        return 0;
}

static int ivs_db_set_mask(struct ntbf_adapter_h *h, uint64_t bits)
{
        atomic_fetch_or(&mine(h)->db_mask, bits);
        return 0;
}

static int ivs_db_clear_mask(struct ntbf_adapter_h *h, uint64_t bits)
{
        atomic_fetch_and(&mine(h)->db_mask, ~bits);
        return 0;
}

static int ivs_peer_db_set(struct ntbf_adapter_h *h, uint32_t peer, uint64_t bits)
{
        if (peer != h->peer)
                return -EINVAL;
        if (!link_up(h))
                return -ENOTCONN;
        atomic_fetch_or(&theirs(h)->db, bits);
        return 0;
}

static int ivs_spad_read(struct ntbf_adapter_h *h, uint32_t idx, uint32_t *val)
{
        if (idx >= IVS_SPADS || !val)
                return -EINVAL;
        *val = atomic_load(&mine(h)->spad[idx]);
        return 0;
}

static int ivs_spad_write(struct ntbf_adapter_h *h, uint32_t idx, uint32_t val)
{
        if (idx >= IVS_SPADS)
                return -EINVAL;
        atomic_store(&mine(h)->spad[idx], val);
        return 0;
}

static int ivs_peer_spad_read(struct ntbf_adapter_h *h, uint32_t peer, uint32_t idx, uint32_t *val)
{
        if (peer != h->peer || idx >= IVS_SPADS || !val)
                return -EINVAL;
        if (!ready(theirs(h)))
                return -ENOTCONN;
        *val = atomic_load(&theirs(h)->spad[idx]);
        return 0;
}

static int ivs_peer_spad_write(struct ntbf_adapter_h *h, uint32_t peer, uint32_t idx, uint32_t val)
{
        if (peer != h->peer || idx >= IVS_SPADS)
                return -EINVAL;
        if (!link_up(h))
                return -ENOTCONN;
        atomic_store(&theirs(h)->spad[idx], val);
        return 0;
}

/* ---- reset and counters --------------------------------------------------------------------- */

static int ivs_reset(struct ntbf_adapter_h *h)
{
        struct ivs_ctrl *c = mine(h);
        for (uint32_t s = 0; s < h->nslots; s++)
                atomic_store(&c->slots[s], 0);
        atomic_store(&c->db, 0);
        atomic_store(&c->db_mask, 0);
        for (int i = 0; i < IVS_SPADS; i++)
                atomic_store(&c->spad[i], 0);
        atomic_fetch_add(&c->resets, 1);
        atomic_fetch_add(&c->gen, 1);
        remap(h->b);
        return 0;
}

/* No counters: loads and stores to shared memory are counted by nothing (no
 * NTBF_CAP_COUNTERS). */

const struct ntbf_backend_ops ntbf__ivshmem_ops = {
    .name = "ivshmem",
    .create = ivs_create,
    .destroy = ivs_destroy,
    .open = ivs_open,
    .close = ivs_close,
    .probe = ivs_probe,
    .release = ivs_release,
    .caps = ivs_caps,
    .link_state = ivs_link_state,
    .link_enable = ivs_link_enable,
    .link_disable = ivs_link_disable,
    .set_events = ivs_set_events,
    .event_fd = ivs_event_fd,
    .process_events = ivs_process_events,
    .xlat_set = ivs_xlat_set,
    .xlat_clear = ivs_xlat_clear,
    .peer_xlat_set = ivs_peer_xlat_set,
    .peer_xlat_clear = ivs_peer_xlat_clear,
    .xlat_get = ivs_xlat_get,
    .map_window = ivs_map_window,
    .unmap_window = ivs_unmap_window,
    .window_write = ivs_window_write,
    .mem_alloc = ivs_mem_alloc,
    .mem_free = ivs_mem_free,
    .mem_map = ivs_mem_map,
    .mem_unmap = ivs_mem_unmap,
    .db_read = ivs_db_read,
    .db_clear = ivs_db_clear,
    .db_set_mask = ivs_db_set_mask,
    .db_clear_mask = ivs_db_clear_mask,
    .peer_db_set = ivs_peer_db_set,
    .spad_read = ivs_spad_read,
    .spad_write = ivs_spad_write,
    .peer_spad_read = ivs_peer_spad_read,
    .peer_spad_write = ivs_peer_spad_write,
    .irq_alloc = ivs_irq_alloc,
    .irq_free = ivs_irq_free,
    .irq_trigger = ivs_irq_trigger,
    .reset = ivs_reset,
    .host_map = ivs_host_map,
    .host_unmap = ivs_mem_unmap,
    .host_bus = ivs_host_bus,
};
