/* backends/sim/fabric.c: creating, attaching to and destroying a simulated fabric instance. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "say.h"
#include "ntbfab/units.h"
#include "cfgspace.h"
#include "devmodel.h"
#include "sim.h"
#include "../hostmem.h"

/* ---- helpers every part of the sim uses ---------------------------------------------------- */

uint64_t ntbf__sim_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ntbf__sim_futex_bump(struct sim_futex *f)
{
        /* seq_cst on both sides (here and in the waiter) so a waker sees the sleeper or
         * the sleeper sees the new value: no lost wake-up, and no syscall when idle. */
        atomic_fetch_add(&f->seq, 1);
        if (atomic_load(&f->waiters))
                syscall(SYS_futex, &f->seq, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

void ntbf__sim_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t timeout_ns, bool private)
{
        struct timespec ts = {(time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u)};
        syscall(SYS_futex, word, private ? FUTEX_WAIT_PRIVATE : FUTEX_WAIT, val,
                timeout_ns ? &ts : NULL, NULL, 0);
}

uint64_t ntbf__sim_proc_start(int pid)
{
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return 0;
        buf[n] = 0;
        /* The command name may hold spaces and parentheses: fields restart after the last ')'. */
        char *p = strrchr(buf, ')');
        if (!p || p[1] != ' ')
                return 0;
        p += 2;
        if (*p == 'Z' || *p == 'X') /* a zombie owns nothing any more */
                return 0;
        /* p is field 3 (state); starttime is field 22. */
        for (int field = 3; field < 22; field++) {
                p = strchr(p, ' ');
                if (!p)
                        return 0;
                p++;
        }
        return strtoull(p, NULL, 10);
}

bool ntbf__sim_owner_alive(int pid, uint64_t start)
{
        if (pid <= 0)
                return false;
        uint64_t st = ntbf__sim_proc_start(pid);
        return st && st == start;
}

int ntbf__sim_mutex_init(pthread_mutex_t *m)
{
        pthread_mutexattr_t a;
        int r = pthread_mutexattr_init(&a);
        if (!r)
                r = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        if (!r)
                r = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        if (!r)
                r = pthread_mutex_init(m, &a);
        pthread_mutexattr_destroy(&a);
        return -r;
}

void ntbf__sim_lock(struct ntbf_sim *s, pthread_mutex_t *m, void (*recover)(void *), void *arg)
{
        int r = pthread_mutex_lock(m);
        if (r == EOWNERDEAD) {
                atomic_fetch_add(&s->hdr->recoveries, 1);
                /* The previous owner died inside: records are whole (state words are
                 * written last), only derived data may be stale. */
                if (recover)
                        recover(arg);
                pthread_mutex_consistent(m);
        } else if (r) {
                /* ENOTRECOVERABLE only happens if a recoverer failed to mark it; never here. */
                fprintf(stderr, "ntbfab-sim: shared mutex unusable: %s\n", strerror(r));
                abort();
        }
}

void ntbf__sim_unlock(pthread_mutex_t *m)
{
        pthread_mutex_unlock(m);
}

/* ---- the topology hash --------------------------------------------------------------------- */

struct hasher {
        uint64_t h;
};

static void hbytes(struct hasher *hs, const void *p, size_t n)
{
        const uint8_t *b = p;
        for (size_t i = 0; i < n; i++) {
                hs->h ^= b[i];
                hs->h *= UINT64_C(0x100000001b3);
        }
}
static void hu64(struct hasher *hs, uint64_t v)
{
        hbytes(hs, &v, sizeof(v));
}
static void hstr(struct hasher *hs, const char *s)
{
        hbytes(hs, s, strlen(s) + 1);
}

/*
 * A hash of everything in the topology the instance's files depend on. Fields are hashed
 * one by one (never whole structs: padding and pointers differ between processes).
 */
static uint64_t topo_hash(const struct ntbf_topo *t)
{
        struct hasher hs = {UINT64_C(0xcbf29ce484222325)};
        hu64(&hs, SIM_VERSION);
        hstr(&hs, t->name);
        hu64(&hs, t->nnodes);
        for (uint32_t i = 0; i < t->nnodes; i++) {
                const struct ntbf_node *n = &t->nodes[i];
                hstr(&hs, n->name);
                hu64(&hs, n->id);
                hu64(&hs, n->ram);
                hu64(&hs, n->cpu_rids);
                hu64(&hs, n->iommu);
                hu64(&hs, n->mmio_low_base);
                hu64(&hs, n->mmio_low_end);
                hu64(&hs, n->mmio_high_base);
                hu64(&hs, n->root_ns);
        }
        hu64(&hs, t->nchassis);
        for (uint32_t i = 0; i < t->nchassis; i++) {
                hstr(&hs, t->chassis[i].name);
                hu64(&hs, t->chassis[i].node);
                hu64(&hs, t->chassis[i].hop_ns);
                hu64(&hs, t->chassis[i].uplink_ns);
        }
        hu64(&hs, t->nadapters);
        for (uint32_t i = 0; i < t->nadapters; i++) {
                const struct ntbf_adapter *a = &t->adapters[i];
                const struct ntbf_adapter_params *p = &a->p;
                hstr(&hs, a->name);
                hu64(&hs, a->node);
                hstr(&hs, p->model);
                uint64_t f[] = {p->ports,        p->window,         p->lut_entries, p->rid_table,
                                p->rid_reserved, p->addr_bits,      p->doorbells,   p->scratchpads,
                                p->messages,     p->dma_channels,   p->hop_ns,      p->xlat,
                                a->window_base,  a->lut_entry_size, a->nwin,        p->rid_proxy};
                for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++)
                        hu64(&hs, f[k]);
                for (uint32_t w = 0; w < a->nwin; w++) {
                        const struct ntbf_window *x = &a->win[w];
                        uint64_t g[] = {x->base,       x->size,     x->first_slot, x->slots,
                                        x->slot_size,  x->reserved, x->flags,      x->addr_align,
                                        x->size_align, x->size_max};
                        for (size_t k = 0; k < sizeof(g) / sizeof(g[0]); k++)
                                hu64(&hs, g[k]);
                }
        }
        hu64(&hs, t->nswitches);
        for (uint32_t i = 0; i < t->nswitches; i++) {
                const struct ntbf_switch *s = &t->switches[i];
                hstr(&hs, s->name);
                hu64(&hs, s->p.ports);
                hu64(&hs, s->p.rid_table);
                hu64(&hs, s->p.mcast_groups);
                hu64(&hs, s->p.hop_ns);
        }
        hu64(&hs, t->nlinks);
        for (uint32_t i = 0; i < t->nlinks; i++) {
                const struct ntbf_link *l = &t->links[i];
                for (int e = 0; e < 2; e++) {
                        hu64(&hs, l->end[e].kind);
                        hu64(&hs, l->end[e].obj);
                        hu64(&hs, l->end[e].port);
                }
                hu64(&hs, l->latency_ns);
        }
        hu64(&hs, t->ndevices);
        for (uint32_t i = 0; i < t->ndevices; i++) {
                const struct ntbf_device *d = &t->devices[i];
                hstr(&hs, d->name);
                uint64_t f[] = {d->node,         d->domain,     d->bus,          d->dev,
                                d->fn,           d->class_code, d->vendor_id,    d->device_id,
                                d->functions,    d->vfs,        d->dma_bits,     d->hop_ns,
                                d->chassis,      d->sim.model,  d->sim.capacity, d->sim.queues,
                                d->sim.lba_size, d->sim.mdts,   d->sim.cmb,      d->sim.memory,
                                d->sim.msix};
                for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++)
                        hu64(&hs, f[k]);
                for (int b = 0; b < NTBF_MAX_BARS; b++) {
                        hu64(&hs, d->bars[b].size);
                        hu64(&hs, d->bars[b].flags);
                        hu64(&hs, d->bars[b].addr);
                        hu64(&hs, d->vf_bars[b]);
                        hu64(&hs, d->vf_bar_addr[b]);
                }
        }
        return hs.h;
}

/* ---- layout ---------------------------------------------------------------------------------- */

struct layout {
        uint64_t size;
        uint32_t nfuncs, nhops;
        uint64_t off_node, off_adapter, off_switch, off_link, off_route, off_hop, off_func;
        uint64_t *adapter_off; /* per adapter: slots, rids, spads, msgs, dma, mcast (6 each) */
        uint64_t *switch_off;
        uint64_t off_cfg;
};

static uint64_t take(uint64_t *at, uint64_t bytes, uint64_t align)
{
        uint64_t off = ntbf_align_up(*at, align);
        *at = off + bytes;
        return off;
}

uint32_t ntbf__sim_mcast_groups(const struct ntbf_topo *t, uint32_t a)
{
        /* Multicast needs every switch on the adapter's switch network to replicate the group:
         * the figure is the least of theirs (0 when the adapter reaches no switch). */
        uint32_t groups = UINT32_MAX;
        uint32_t ns = t->nswitches;
        if (!ns)
                return 0;
        bool *seen = calloc(ns, sizeof(*seen));
        uint32_t *stack = calloc(ns, sizeof(*stack));
        uint32_t sp = 0;
        if (!seen || !stack) {
                free(seen);
                free(stack);
                return 0;
        }
        const struct ntbf_adapter *ad = &t->adapters[a];
        for (uint32_t p = 0; p < NTBF_MAX_ADAPTER_PORTS; p++) {
                if (ad->link[p] == NTBF_NONE)
                        continue;
                struct ntbf_port_ref o = ntbf_link_peer(
                    &t->links[ad->link[p]], (struct ntbf_port_ref){NTBF_PORT_ADAPTER, a, p});
                if (o.kind == NTBF_PORT_SWITCH && !seen[o.obj]) {
                        seen[o.obj] = true;
                        stack[sp++] = o.obj;
                }
        }
        bool any = sp > 0;
        while (sp) {
                uint32_t s = stack[--sp];
                if (t->switches[s].p.mcast_groups < groups)
                        groups = t->switches[s].p.mcast_groups;
                for (uint32_t p = 0; p < t->switches[s].p.ports; p++) {
                        uint32_t l = t->switches[s].link[p];
                        if (l == NTBF_NONE)
                                continue;
                        struct ntbf_port_ref o = ntbf_link_peer(
                            &t->links[l], (struct ntbf_port_ref){NTBF_PORT_SWITCH, s, p});
                        if (o.kind == NTBF_PORT_SWITCH && !seen[o.obj]) {
                                seen[o.obj] = true;
                                stack[sp++] = o.obj;
                        }
                }
        }
        free(seen);
        free(stack);
        if (!any)
                return 0;
        return groups > SIM_MCAST_MAX ? SIM_MCAST_MAX : groups;
}

static int layout_compute(const struct ntbf_topo *t, uint32_t nhops, struct layout *L)
{
        memset(L, 0, sizeof(*L));
        uint64_t at = ntbf_align_up(sizeof(struct sim_hdr), 64);
        for (uint32_t i = 0; i < t->ndevices; i++)
                L->nfuncs += ntbf_device_nfuncs(&t->devices[i]);
        L->nhops = nhops;
        L->off_node = take(&at, (uint64_t)t->nnodes * sizeof(struct sim_node), 4096);
        L->off_adapter = take(&at, (uint64_t)t->nadapters * sizeof(struct sim_adapter), 64);
        L->off_switch = take(&at, (uint64_t)t->nswitches * sizeof(struct sim_switch), 64);
        L->off_link = take(&at, (uint64_t)t->nlinks * sizeof(struct sim_link), 64);
        L->off_route =
            take(&at, (uint64_t)t->nadapters * t->nadapters * sizeof(struct sim_route), 64);
        L->off_hop = take(&at, (uint64_t)L->nhops * sizeof(struct ntbf_hop), 64);
        L->off_func = take(&at, (uint64_t)L->nfuncs * sizeof(struct sim_func), 64);
        L->adapter_off = calloc((size_t)t->nadapters * 7 + 1, sizeof(uint64_t));
        L->switch_off = calloc((size_t)t->nswitches + 1, sizeof(uint64_t));
        if (!L->adapter_off || !L->switch_off)
                return -ENOMEM;
        for (uint32_t i = 0; i < t->nadapters; i++) {
                const struct ntbf_adapter_params *p = &t->adapters[i].p;
                uint64_t *o = &L->adapter_off[i * 7];
                o[0] = take(&at, (uint64_t)t->adapters[i].nslots * 8, 64);
                o[1] = take(&at, (uint64_t)p->rid_table * 8, 64);
                o[2] = take(&at, (uint64_t)p->scratchpads * 4, 64);
                o[3] = take(&at, (uint64_t)p->messages * 8, 64);
                o[4] = take(&at, (uint64_t)p->dma_channels * sizeof(struct sim_dmachan), 64);
                o[5] = take(&at, (uint64_t)ntbf__sim_mcast_groups(t, i) * sizeof(struct sim_mcrec),
                            64);
                o[6] = take(&at, (uint64_t)t->adapters[i].nslots * 8, 64);
        }
        for (uint32_t i = 0; i < t->nswitches; i++)
                L->switch_off[i] = take(
                    &at, (uint64_t)t->switches[i].p.ports * t->switches[i].p.rid_table * 8, 64);
        L->off_cfg = take(&at, (uint64_t)L->nfuncs * NTBF_SIM_CFG_REGION, 4096);
        L->size = ntbf_align_up(at, 4096);
        return 0;
}

static void layout_free(struct layout *L)
{
        free(L->adapter_off);
        free(L->switch_off);
}

/* ---- file names ---------------------------------------------------------------------------- */

const char *ntbf__sim_file_name(const struct ntbf_sim *s, enum sim_file_kind kind, uint32_t obj,
                                char *buf, size_t len)
{
        const struct ntbf_topo *t = s->t;
        switch (kind) {
        case SF_RAM:
                snprintf(buf, len, "%s/ram-%s", s->dir, t->nodes[obj].name);
                break;
        case SF_BAR:
        case SF_VFBAR: {
                const struct ntbf_device *d = &t->devices[obj / NTBF_MAX_BARS];
                snprintf(buf, len, "%s/%s-%s-%s-%u", s->dir, kind == SF_BAR ? "bar" : "vfbar",
                         t->nodes[d->node].name, d->name, obj % NTBF_MAX_BARS);
                break;
        }
        case SF_ONES:
                snprintf(buf, len, "(all ones)");
                break;
        case SF_MCPOST: {
                const struct ntbf_adapter *a = &t->adapters[obj];
                snprintf(buf, len, "%s/mcpost-%s-%s", s->dir, t->nodes[a->node].name, a->name);
                break;
        }
        }
        return buf;
}

static uint64_t file_size(const struct ntbf_topo *t, enum sim_file_kind kind, uint32_t obj)
{
        if (kind == SF_RAM)
                return t->nodes[obj].ram;
        if (kind == SF_MCPOST)
                return sim_post_size(&t->adapters[obj]);
        const struct ntbf_device *d = &t->devices[obj / NTBF_MAX_BARS];
        uint32_t b = obj % NTBF_MAX_BARS;
        if (kind == SF_BAR)
                return d->bars[b].size * d->functions;
        return d->vf_bars[b] * d->vfs;
}

uint64_t ntbf__sim_ram_off(const struct ntbf_sim *s, uint32_t node, const struct ntbf_region *r,
                           uint64_t addr)
{
        /* RAM file: low RAM [0, ram_low) first, then the RAM placed from 4 GiB. */
        return (addr - r->base) + (r->index ? s->nodes[node].ram_low : 0);
}

uint8_t *ntbf__sim_file_slow(struct ntbf_sim *s, enum sim_file_kind kind, uint32_t obj)
{
        struct sim_file *f = sim_file_rec(s, kind, obj);
        pthread_mutex_lock(&s->file_lock);
        uint8_t *p = atomic_load(&f->base);
        if (!p) {
                char path[PATH_MAX + 64];
                ntbf__sim_file_name(s, kind, obj, path, sizeof(path));
                uint64_t size = file_size(s->t, kind, obj);
                int fd = open(path, O_RDWR | O_CLOEXEC);
                if (fd >= 0 && size) {
                        void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                        if (m != MAP_FAILED) {
                                f->fd = fd;
                                f->size = size;
                                p = m;
                                atomic_store_explicit(&f->base, p, memory_order_release);
                        } else {
                                close(fd);
                        }
                } else if (fd >= 0) {
                        close(fd);
                }
        }
        pthread_mutex_unlock(&s->file_lock);
        return p;
}

int ntbf__sim_file_fd(struct ntbf_sim *s, enum sim_file_kind kind, uint32_t obj)
{
        if (kind == SF_ONES)
                return s->ones_fd;
        if (!sim_file(s, kind, obj))
                return -1;
        return sim_file_rec(s, kind, obj)->fd;
}

void ntbf__sim_mcpost_forget(struct ntbf_sim *s, uint32_t a, uint64_t off, uint64_t len)
{
        if (!sim_file(s, SF_MCPOST, a))
                return;
        fallocate(s->mcpost[a].fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
                  (off_t)len);
}

int ntbf__sim_ones_fd(struct ntbf_sim *s, uint64_t need)
{
        (void)need;
        pthread_mutex_lock(&s->file_lock);
        if (s->ones_fd < 0) {
                /* One shared chunk of 0xff bytes, mapped privately as many times as needed:
                 * broken window ranges cost 2 MiB of page cache per process, whatever their
                 * size. */
                int fd = memfd_create("ntbfab-sim-ones", MFD_CLOEXEC);
                if (fd >= 0) {
                        uint64_t size = 2 * NTBF_MiB;
                        uint8_t *m = NULL;
                        if (!ftruncate(fd, (off_t)size))
                                m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                        if (m && m != MAP_FAILED) {
                                memset(m, 0xff, size);
                                munmap(m, size);
                                s->ones_fd = fd;
                                s->ones_size = size;
                        } else {
                                close(fd);
                        }
                }
        }
        int fd = s->ones_fd;
        pthread_mutex_unlock(&s->file_lock);
        return fd;
}

/* ---- creation -------------------------------------------------------------------------------- */

static int mkdir_p(const char *dir)
{
        char buf[PATH_MAX];
        if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf))
                return -ENAMETOOLONG;
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = 0;
                if (mkdir(buf, 0700) && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(buf, 0700) && errno != EEXIST)
                return -errno;
        return 0;
}

/* Create (or keep) a sparse file of exactly size bytes; fresh files read as zeros. */
static int make_file(const char *path, uint64_t size, bool keep, char *why, size_t whylen)
{
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) {
                int e = errno;
                ntbf__say(why, whylen, "cannot create %s: %s", path, strerror(e));
                return -e;
        }
        struct stat st;
        int r = fstat(fd, &st);
        /* Leftovers of a crashed creation are not trusted: start from zeros. */
        if (!r && !keep && st.st_size)
                r = ftruncate(fd, 0);
        if (!r && (uint64_t)st.st_size != size && (!keep || (uint64_t)st.st_size < size))
                r = ftruncate(fd, (off_t)size);
        int e = errno;
        close(fd);
        if (r) {
                ntbf__say(why, whylen, "cannot size %s to %" PRIu64 " bytes: %s", path, size,
                          strerror(e));
                return -e;
        }
        return 0;
}

/* Compare an existing control file with topology t: 0 if it is the same fabric. */
static int check_existing(const char *dir, int fd, const struct ntbf_topo *t, uint64_t hash,
                          char *why, size_t whylen)
{
        struct sim_hdr h;
        ssize_t n = pread(fd, &h, sizeof(h), 0);
        if (n != (ssize_t)sizeof(h) || h.magic != SIM_MAGIC) {
                ntbf__say(why, whylen,
                          "%s/fabric is not a simulated fabric control file; remove the directory "
                          "or use another --dir",
                          dir);
                return NTBF_ECONFIG;
        }
        if (h.version != SIM_VERSION) {
                ntbf__say(why, whylen,
                          "the fabric in %s was made by another ntbfab version (layout %u, this is "
                          "%u); destroy it (ntbfab down) and create it again",
                          dir, h.version, SIM_VERSION);
                return NTBF_ECONFIG;
        }
        if (h.topo_hash != hash) {
                h.cluster[sizeof(h.cluster) - 1] = 0;
                ntbf__say(
                    why, whylen,
                    "the fabric in %s was created from a different topology (cluster '%s', hash "
                    "%016" PRIx64 "; this configuration of cluster '%s' has hash %016" PRIx64
                    "); destroy it (ntbfab down) or use another directory",
                    dir, h.cluster, h.topo_hash, t->name, hash);
                return NTBF_ECONFIG;
        }
        if (!atomic_load(&((struct sim_hdr *)&h)->ready)) {
                ntbf__say(why, whylen, "the fabric in %s is not completely created", dir);
                return NTBF_ECONFIG;
        }
        return 0;
}

static void init_control(const struct ntbf_topo *t, const struct layout *L, uint8_t *ctl,
                         uint64_t hash, const struct sim_route *routes, const struct ntbf_hop *hops)
{
        struct sim_hdr *h = (struct sim_hdr *)ctl;
        h->magic = SIM_MAGIC;
        h->version = SIM_VERSION;
        h->hdr_size = sizeof(*h);
        h->topo_hash = hash;
        h->size = L->size;
        snprintf(h->cluster, sizeof(h->cluster), "%s", t->name);
        h->nnodes = t->nnodes;
        h->nadapters = t->nadapters;
        h->nswitches = t->nswitches;
        h->nlinks = t->nlinks;
        h->ndevices = t->ndevices;
        h->nfuncs = L->nfuncs;
        h->nhops = L->nhops;
        h->off_node = L->off_node;
        h->off_adapter = L->off_adapter;
        h->off_switch = L->off_switch;
        h->off_link = L->off_link;
        h->off_route = L->off_route;
        h->off_hop = L->off_hop;
        h->off_func = L->off_func;
        h->creator_pid = getpid();
        ntbf__sim_mutex_init(&h->mcast_lock);

        struct sim_node *nodes = (struct sim_node *)(ctl + L->off_node);
        for (uint32_t i = 0; i < t->nnodes; i++) {
                const struct ntbf_node *n = &t->nodes[i];
                nodes[i].ram_size = n->ram;
                nodes[i].ram_low = n->ram < n->mmio_low_base ? n->ram : n->mmio_low_base;
                nodes[i].iommu = n->iommu;
                atomic_store(&nodes[i].alive, 1);
                nodes[i].mem_next_id = 1;
                ntbf__sim_mutex_init(&nodes[i].mem_lock);
                ntbf__sim_mutex_init(&nodes[i].irq_lock);
        }
        struct sim_adapter *ad = (struct sim_adapter *)(ctl + L->off_adapter);
        for (uint32_t i = 0; i < t->nadapters; i++) {
                const struct ntbf_adapter *a = &t->adapters[i];
                struct sim_adapter *x = &ad[i];
                x->node = a->node;
                x->nslots = a->nslots;
                x->nrids = a->p.rid_table;
                x->rid_reserved = a->p.rid_table ? a->p.rid_reserved : 0;
                x->nspads = a->p.scratchpads;
                x->nmsgs = a->p.messages;
                x->ndb = a->p.doorbells > 64 ? 64 : a->p.doorbells;
                x->nchan = a->p.dma_channels;
                x->ngroups = ntbf__sim_mcast_groups(t, i);
                x->ports = a->p.ports;
                const uint64_t *o = &L->adapter_off[i * 7];
                x->off_slots = o[0];
                x->off_xsize = o[6];
                x->off_rids = o[1];
                x->off_spads = o[2];
                x->off_msgs = o[3];
                x->off_dma = o[4];
                x->off_mcast = o[5];
                /* The host's CPU holds its reserved entries, as the driver programs at probe:
                 * 00:00.0 (root complex: CPU and the adapter's DMA engine), 00:01.0, ... */
                _Atomic uint64_t *rids = (_Atomic uint64_t *)(ctl + x->off_rids);
                for (uint32_t k = 0; k < x->rid_reserved; k++)
                        atomic_store(&rids[k], rid_entry(a->node, (uint16_t)(k << 3), 0xffff));
                struct sim_dmachan *ch = (struct sim_dmachan *)(ctl + x->off_dma);
                for (uint32_t c = 0; c < x->nchan; c++)
                        ntbf__sim_mutex_init(&ch[c].lock);
        }
        struct sim_switch *sw = (struct sim_switch *)(ctl + L->off_switch);
        for (uint32_t i = 0; i < t->nswitches; i++) {
                sw[i].ports = t->switches[i].p.ports;
                sw[i].nrids = t->switches[i].p.rid_table;
                sw[i].ngroups = t->switches[i].p.mcast_groups;
                sw[i].off_rids = L->switch_off[i];
        }
        memcpy(ctl + L->off_route, routes,
               (size_t)t->nadapters * t->nadapters * sizeof(struct sim_route));
        memcpy(ctl + L->off_hop, hops, (size_t)L->nhops * sizeof(struct ntbf_hop));
        struct sim_func *f = (struct sim_func *)(ctl + L->off_func);
        uint32_t k = 0;
        for (uint32_t d = 0; d < t->ndevices; d++) {
                const struct ntbf_device *dev = &t->devices[d];
                for (uint32_t fn = 0; fn < ntbf_device_nfuncs(dev); fn++, k++) {
                        f[k].device = d;
                        f[k].function = fn;
                        f[k].rid = (uint16_t)ntbf_device_rid(dev, fn);
                        f[k].off_cfg = L->off_cfg + (uint64_t)k * NTBF_SIM_CFG_REGION;
                }
        }
}

/* ---- powering device functions on -------------------------------------------------------- */

static int no_dma_read(void *opaque, uint64_t addr, void *buf, size_t len)
{
        (void)opaque;
        (void)addr;
        memset(buf, 0xff, len);
        return NTBF_EUNREACHABLE; /* no fabric yet: nothing answers */
}

static int no_dma_write(void *opaque, uint64_t addr, const void *buf, size_t len)
{
        (void)opaque;
        (void)addr;
        (void)buf;
        (void)len;
        return NTBF_EUNREACHABLE;
}

/* Map a whole backing file for the creator (NULL if it has no size). */
static uint8_t *map_whole(const char *path, uint64_t size)
{
        if (!size)
                return NULL;
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        return p == MAP_FAILED ? NULL : p;
}

/*
 * Every device function as firmware finds it at boot: its config space, and for a function
 * with a built-in model (models.c) the model's power-on registers. The model builds its own
 * config space (it knows its MSI-X layout), so it is created and destroyed once here; the
 * device host creates it again later and continues from this state. A function without a
 * model gets cfgspace's config space with no MSI-X.
 */
static int power_on(const struct ntbf_topo *t, const char *dir, uint8_t *ctl, uint64_t off_cfg,
                    char *why, size_t whylen)
{
        struct ntbf_sim names = {.t = t};
        snprintf(names.dir, sizeof(names.dir), "%s", dir);
        uint32_t k = 0;
        int r = 0;
        for (uint32_t d = 0; d < t->ndevices && !r; d++) {
                const struct ntbf_device *dev = &t->devices[d];
                const struct ntbf_sim_model_ops *ops = ntbf_sim_model_for(dev);
                uint8_t *bar[NTBF_MAX_BARS] = {0}, *vfbar[NTBF_MAX_BARS] = {0};
                char path[PATH_MAX];
                for (uint32_t b = 0; b < NTBF_MAX_BARS; b++) {
                        uint32_t obj = d * NTBF_MAX_BARS + b;
                        bar[b] =
                            map_whole(ntbf__sim_file_name(&names, SF_BAR, obj, path, sizeof(path)),
                                      file_size(t, SF_BAR, obj));
                        if (dev->vfs)
                                vfbar[b] = map_whole(
                                    ntbf__sim_file_name(&names, SF_VFBAR, obj, path, sizeof(path)),
                                    file_size(t, SF_VFBAR, obj));
                }
                int img = -1;
                if (dev->sim.model == NTBF_SIM_NVME) {
                        snprintf(path, sizeof(path), "%s/images/%s-%s.img", dir,
                                 t->nodes[dev->node].name, dev->name);
                        img = open(path, O_RDWR | O_CLOEXEC);
                }
                for (uint32_t f = 0; f < ntbf_device_nfuncs(dev) && !r; f++, k++) {
                        struct ntbf_sim_devenv env = {
                            .desc = dev,
                            .function = f,
                            .node_name = t->nodes[dev->node].name,
                            .node_id = t->nodes[dev->node].id,
                            .cfg = ctl + off_cfg + (uint64_t)k * NTBF_SIM_CFG_REGION,
                            .backing_fd = img,
                            .dma = {no_dma_read, no_dma_write, NULL},
                        };
                        bool pf = f < dev->functions;
                        for (uint32_t b = 0; b < NTBF_MAX_BARS; b++) {
                                uint64_t size = ntbf_device_bar_size(dev, f, b);
                                uint8_t *base = pf ? bar[b] : vfbar[b];
                                if (!size || !base)
                                        continue;
                                env.bar[b] = base + (pf ? f : f - dev->functions) * size;
                                env.bar_size[b] = size;
                        }
                        if (ops) {
                                void *st = NULL;
                                r = ops->create(&env, &st);
                                if (!r)
                                        ops->destroy(st);
                        } else {
                                struct ntbf_sim_cfg_layout l = {.link_width = 4};
                                r = ntbf_sim_cfg_build(env.cfg, dev, f, &l);
                        }
                        if (r)
                                ntbf__say(why, whylen,
                                          "device %s.%s function %u cannot power on (%s model): %s",
                                          t->nodes[dev->node].name, dev->name, f,
                                          ops ? ops->name : "no", ntbf_strerror(r));
                }
                if (img >= 0)
                        close(img);
                for (uint32_t b = 0; b < NTBF_MAX_BARS; b++) {
                        uint32_t obj = d * NTBF_MAX_BARS + b;
                        if (bar[b])
                                munmap(bar[b], file_size(t, SF_BAR, obj));
                        if (vfbar[b])
                                munmap(vfbar[b], file_size(t, SF_VFBAR, obj));
                }
        }
        return r;
}

static int build_control(const struct ntbf_topo *t, const char *dir, const char *path,
                         uint64_t hash, char *why, size_t whylen)
{
        struct layout L = {0};
        struct sim_route *routes = NULL;
        struct ntbf_hop *hops = NULL;
        uint8_t *ctl = MAP_FAILED;
        int fd = -1;
        uint32_t nhops = 0;
        int r = ntbf__sim_routes_build(t, &routes, &hops, &nhops);
        if (r) {
                ntbf__say(why, whylen, "cannot compute the static routes: %s", ntbf_strerror(r));
                goto out;
        }
        r = layout_compute(t, nhops, &L);
        if (r)
                goto out;
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)L.size)) {
                r = -errno;
                ntbf__say(why, whylen, "cannot create %s: %s", path, strerror(errno));
                goto out;
        }
        ctl = mmap(NULL, L.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (ctl == MAP_FAILED) {
                r = -errno;
                ntbf__say(why, whylen, "cannot map %s: %s", path, strerror(errno));
                goto out;
        }
        init_control(t, &L, ctl, hash, routes, hops);
        r = power_on(t, dir, ctl, L.off_cfg, why, whylen);
        if (r)
                goto out;
        atomic_store_explicit(&((struct sim_hdr *)ctl)->ready, 1, memory_order_release);
out:
        if (ctl != MAP_FAILED)
                munmap(ctl, L.size);
        if (fd >= 0)
                close(fd);
        free(routes);
        free(hops);
        layout_free(&L);
        if (r == -ENOMEM)
                ntbf__say(why, whylen, "out of memory creating the fabric");
        return r;
}

int ntbf_sim_fabric_create(const struct ntbf_topo *t, const char *dir, char *why, size_t whylen)
{
        if (!t || !t->finalized || !dir) {
                ntbf__say(why, whylen, "the topology must be finalized before creating a fabric");
                return -EINVAL;
        }
        if (t->nadapters > SIM_MAX_ADAPTERS || t->nnodes > SIM_MAX_NODES) {
                ntbf__say(why, whylen,
                          "the simulated fabric holds at most %u nodes and %u adapters",
                          SIM_MAX_NODES, SIM_MAX_ADAPTERS);
                return -EINVAL;
        }
        if (strlen(dir) >= SIM_DIR_MAX) {
                ntbf__say(why, whylen, "the instance directory name is too long");
                return -ENAMETOOLONG;
        }
        int r = mkdir_p(dir);
        if (r) {
                ntbf__say(why, whylen, "cannot create directory %s: %s", dir, strerror(-r));
                return r;
        }
        char path[PATH_MAX + 64], tmp[PATH_MAX + 64];
        /* Creators are serialized by a lock file (released by the kernel if one dies). */
        snprintf(path, sizeof(path), "%s/lock", dir);
        int lfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lfd < 0 || flock(lfd, LOCK_EX)) {
                r = -errno;
                ntbf__say(why, whylen, "cannot lock %s: %s", path, strerror(errno));
                if (lfd >= 0)
                        close(lfd);
                return r;
        }
        uint64_t hash = topo_hash(t);
        snprintf(path, sizeof(path), "%s/fabric", dir);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                r = check_existing(dir, fd, t, hash, why, whylen);
                close(fd);
                if (r == NTBF_ECONFIG)
                        r = NTBF_EEXISTS;
                goto out;
        }
        /* Backing memory: RAM and BAR files start zeroed, images are kept. */
        struct ntbf_sim tmp_s = {.t = t};
        snprintf(tmp_s.dir, sizeof(tmp_s.dir), "%s", dir);
        for (uint32_t i = 0; i < t->nnodes && !r; i++) {
                ntbf__sim_file_name(&tmp_s, SF_RAM, i, tmp, sizeof(tmp));
                r = make_file(tmp, t->nodes[i].ram, false, why, whylen);
        }
        /* Multicast post buffers: sparse, window-sized, zero (docs/sim.md). */
        for (uint32_t a = 0; a < t->nadapters && !r; a++) {
                ntbf__sim_file_name(&tmp_s, SF_MCPOST, a, tmp, sizeof(tmp));
                r = make_file(tmp, file_size(t, SF_MCPOST, a), false, why, whylen);
        }
        bool images = false;
        for (uint32_t d = 0; d < t->ndevices && !r; d++) {
                const struct ntbf_device *dev = &t->devices[d];
                for (uint32_t b = 0; b < NTBF_MAX_BARS && !r; b++) {
                        uint32_t obj = d * NTBF_MAX_BARS + b;
                        if (dev->bars[b].size) {
                                ntbf__sim_file_name(&tmp_s, SF_BAR, obj, tmp, sizeof(tmp));
                                r = make_file(tmp, file_size(t, SF_BAR, obj), false, why, whylen);
                        }
                        if (!r && dev->vfs && dev->vf_bars[b]) {
                                ntbf__sim_file_name(&tmp_s, SF_VFBAR, obj, tmp, sizeof(tmp));
                                r = make_file(tmp, file_size(t, SF_VFBAR, obj), false, why, whylen);
                        }
                }
                if (!r && dev->sim.model == NTBF_SIM_NVME) {
                        if (!images) {
                                snprintf(tmp, sizeof(tmp), "%s/images", dir);
                                if (mkdir(tmp, 0700) && errno != EEXIST) {
                                        r = -errno;
                                        ntbf__say(why, whylen, "cannot create %s: %s", tmp,
                                                  strerror(errno));
                                        break;
                                }
                                images = true;
                        }
                        snprintf(tmp, sizeof(tmp), "%s/images/%s-%s.img", dir,
                                 t->nodes[dev->node].name, dev->name);
                        r = make_file(tmp, dev->sim.capacity, true, why, whylen);
                }
        }
        if (r)
                goto out;
        snprintf(tmp, sizeof(tmp), "%s/fabric.tmp", dir);
        r = build_control(t, dir, tmp, hash, why, whylen);
        /* The control file appears whole or not at all: attachers never see it half built. */
        if (!r && rename(tmp, path)) {
                r = -errno;
                ntbf__say(why, whylen, "cannot rename %s: %s", tmp, strerror(errno));
        }
        if (r)
                unlink(tmp);
out:
        flock(lfd, LOCK_UN);
        close(lfd);
        return r;
}

static bool fabric_file(const char *name)
{
        static const char *const prefixes[] = {"ram-", "bar-", "vfbar-", "iommu-", "mcpost-"};
        if (!strcmp(name, "fabric") || !strcmp(name, "fabric.tmp") || !strcmp(name, "lock"))
                return true;
        for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
                if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
                        return true;
        return false;
}

int ntbf_sim_fabric_destroy(const char *dir)
{
        DIR *d = opendir(dir);
        if (!d)
                return -errno;
        /* The control file goes first, so nobody attaches to a half-removed instance. */
        char path[PATH_MAX + 300];
        snprintf(path, sizeof(path), "%s/fabric", dir);
        int r = 0;
        if (unlink(path) && errno != ENOENT)
                r = -errno;
        struct dirent *e;
        while ((e = readdir(d))) {
                if (!fabric_file(e->d_name))
                        continue;
                snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
                if (unlink(path) && errno != ENOENT && !r)
                        r = -errno;
        }
        closedir(d);
        rmdir(dir); /* fails, harmlessly, while images/ or foreign files remain */
        return r;
}

/* ---- attaching ------------------------------------------------------------------------------- */

struct ntbf_sim *ntbf__sim_of(struct ntbf_backend *b)
{
        struct ntbf_sim *s = (struct ntbf_sim *)b;
        return s && s->magic == SIM_OBJ_MAGIC ? s : NULL;
}

bool ntbf_sim_is(const struct ntbf_backend *b)
{
        return ntbf__sim_of((struct ntbf_backend *)b) != NULL;
}

static void files_close(struct sim_file *f, uint32_t n)
{
        for (uint32_t i = 0; f && i < n; i++) {
                uint8_t *p = atomic_load(&f[i].base);
                if (p) {
                        munmap(p, f[i].size);
                        close(f[i].fd);
                }
        }
        free(f);
}

void ntbf__sim_close(struct ntbf_sim *s)
{
        if (!s)
                return;
        ntbf__sim_watcher_stop(s);
        ntbf__sim_maps_close(s);
        ntbf__sim_irq_close(s);
        while (s->handles) {
                struct ntbf_adapter_h *h = s->handles;
                s->handles = h->next;
                close(h->efd);
                free(h);
        }
        files_close(s->ram, s->t->nnodes);
        files_close(s->bar, s->t->ndevices * NTBF_MAX_BARS);
        files_close(s->vfbar, s->t->ndevices * NTBF_MAX_BARS);
        files_close(s->mcpost, s->t->nadapters);
        files_close(s->iommu, s->t->nnodes + (s->hdr ? s->hdr->nfuncs : 0));
        if (s->ones_fd >= 0)
                close(s->ones_fd);
        if (s->ctl)
                munmap(s->ctl, s->ctl_size);
        if (s->ctl_fd >= 0)
                close(s->ctl_fd);
        free(s->func_first);
        pthread_mutex_destroy(&s->lock);
        pthread_mutex_destroy(&s->file_lock);
        s->magic = 0;
        free(s);
}

int ntbf_sim_attach(const struct ntbf_backend_env *env, struct ntbf_backend **out, char *why,
                    size_t whylen)
{
        if (!env || !env->topo || !env->topo->finalized || !env->dir || !out) {
                ntbf__say(why, whylen, "attaching needs a finalized topology and a directory");
                return -EINVAL;
        }
        const struct ntbf_topo *t = env->topo;
        if (strlen(env->dir) >= SIM_DIR_MAX) {
                ntbf__say(why, whylen, "the instance directory name is too long");
                return -ENAMETOOLONG;
        }
        if (env->node != NTBF_NONE && env->node >= t->nnodes) {
                ntbf__say(why, whylen, "node %u is not in cluster '%s'", env->node, t->name);
                return -EINVAL;
        }
        struct ntbf_sim *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->magic = SIM_OBJ_MAGIC;
        s->t = t;
        s->node = env->node;
        s->ctl_fd = -1;
        s->ones_fd = -1;
        s->pid = getpid();
        s->start = ntbf__sim_proc_start(s->pid);
        pthread_mutex_init(&s->lock, NULL);
        pthread_mutex_init(&s->file_lock, NULL);
        snprintf(s->dir, sizeof(s->dir), "%s", env->dir);
        int r = 0;
        char path[PATH_MAX + 64];
        snprintf(path, sizeof(path), "%s/fabric", env->dir);
        s->ctl_fd = open(path, O_RDWR | O_CLOEXEC);
        if (s->ctl_fd < 0) {
                r = errno == ENOENT ? NTBF_ENOTFOUND : -errno;
                ntbf__say(why, whylen,
                          "no simulated fabric in %s (%s); create it with 'ntbfab up FILE' "
                          "(or ntbfab-simd --config FILE --dir %s; a daemon started without "
                          "--dir looks where NTBFAB_SIM_DIR says)",
                          env->dir, strerror(errno), env->dir);
                goto fail;
        }
        r = check_existing(env->dir, s->ctl_fd, t, topo_hash(t), why, whylen);
        if (r)
                goto fail;
        struct stat st;
        if (fstat(s->ctl_fd, &st)) {
                r = -errno;
                goto fail;
        }
        s->ctl_size = (uint64_t)st.st_size;
        s->ctl = mmap(NULL, s->ctl_size, PROT_READ | PROT_WRITE, MAP_SHARED, s->ctl_fd, 0);
        if (s->ctl == MAP_FAILED) {
                s->ctl = NULL;
                r = -errno;
                ntbf__say(why, whylen, "cannot map %s: %s", path, strerror(errno));
                goto fail;
        }
        s->hdr = (struct sim_hdr *)s->ctl;
        if (s->hdr->size != s->ctl_size || s->hdr->nadapters != t->nadapters) {
                ntbf__say(why, whylen, "%s is truncated or corrupt; destroy the instance", path);
                r = NTBF_ECONFIG;
                goto fail;
        }
        s->nodes = sim_at(s, s->hdr->off_node);
        s->ad = sim_at(s, s->hdr->off_adapter);
        s->sw = sim_at(s, s->hdr->off_switch);
        s->links = sim_at(s, s->hdr->off_link);
        s->routes = sim_at(s, s->hdr->off_route);
        s->hops = sim_at(s, s->hdr->off_hop);
        s->funcs = sim_at(s, s->hdr->off_func);
        s->seen_change = atomic_load(&s->hdr->change.seq);
        s->ram = calloc(t->nnodes + 1, sizeof(*s->ram));
        s->bar = calloc((size_t)t->ndevices * NTBF_MAX_BARS + 1, sizeof(*s->bar));
        s->vfbar = calloc((size_t)t->ndevices * NTBF_MAX_BARS + 1, sizeof(*s->vfbar));
        s->mcpost = calloc((size_t)t->nadapters + 1, sizeof(*s->mcpost));
        s->func_first = calloc(t->ndevices + 1, sizeof(*s->func_first));
        /* Host domains, then one isolation domain per device function. */
        s->iommu = calloc((size_t)t->nnodes + s->hdr->nfuncs + 1, sizeof(*s->iommu));
        if (!s->ram || !s->iommu || !s->bar || !s->vfbar || !s->mcpost || !s->func_first) {
                r = -ENOMEM;
                goto fail;
        }
        uint32_t k = 0;
        for (uint32_t d = 0; d < t->ndevices; d++) {
                s->func_first[d] = k;
                k += ntbf_device_nfuncs(&t->devices[d]);
        }
        *out = (struct ntbf_backend *)s;
        return 0;
fail:
        ntbf__sim_close(s);
        return r;
}

int ntbf_sim_phys_ptr(struct ntbf_backend *b, uint32_t node, uint64_t addr, uint64_t len,
                      void **ptr)
{
        struct ntbf_sim *s = ntbf__sim_of(b);
        if (!s || node >= s->t->nnodes || !ptr)
                return -EINVAL;
        const struct ntbf_region *r = ntbf_addrmap_lookup(s->t, node, addr);
        if (!r || addr - r->base + len > r->size)
                return -EINVAL;
        uint8_t *base;
        uint64_t off;
        if (r->kind == NTBF_REGION_RAM) {
                base = sim_file(s, SF_RAM, node);
                off = ntbf__sim_ram_off(s, node, r, addr);
        } else if (r->kind == NTBF_REGION_BAR || r->kind == NTBF_REGION_VF_BAR) {
                base = sim_file(s, r->kind == NTBF_REGION_BAR ? SF_BAR : SF_VFBAR,
                                r->obj * NTBF_MAX_BARS + r->index);
                off = addr - r->base;
        } else {
                return -EINVAL;
        }
        if (!base)
                return -EIO;
        *ptr = base + off;
        return 0;
}

/* The region of node's map whose backing file this process maps at fbase, holding
 * [a, a + size): its bus address, or false. */
static bool in_file(const struct ntbf_region *r, const uint8_t *fbase, uint64_t foff,
                    const uint8_t *a, uint64_t size, uint64_t *bus)
{
        if (!fbase || a < fbase + foff || (uint64_t)(a - (fbase + foff)) >= r->size ||
            size > r->size - (uint64_t)(a - (fbase + foff)))
                return false;
        *bus = r->base + (uint64_t)(a - (fbase + foff));
        return true;
}

int ntbf__sim_host_bus(struct ntbf_sim *s, uint32_t node, const void *addr, uint64_t size,
                       uint64_t *bus)
{
        if (node >= s->t->nnodes || !addr || !size || !bus)
                return -EINVAL;
        const struct ntbf_addrmap *m = &s->t->maps[node];
        const uint8_t *a = addr;
        /* The backend's own mappings of the host's files (what host_map, mem_map and
         * mem_alloc return point into them). */
        for (uint32_t i = 0; i < m->n; i++) {
                const struct ntbf_region *r = &m->v[i];
                if (r->kind == NTBF_REGION_RAM) {
                        if (in_file(r, atomic_load(&s->ram[node].base),
                                    ntbf__sim_ram_off(s, node, r, r->base), a, size, bus))
                                return 0;
                } else if (r->kind == NTBF_REGION_BAR || r->kind == NTBF_REGION_VF_BAR) {
                        enum sim_file_kind k = r->kind == NTBF_REGION_BAR ? SF_BAR : SF_VFBAR;
                        uint32_t obj = r->obj * NTBF_MAX_BARS + r->index;
                        if (in_file(r, atomic_load(&sim_file_rec(s, k, obj)->base), 0, a, size,
                                    bus))
                                return 0;
                }
        }
        /* Another mapping of the RAM file in this process: one made from a descriptor that
         * came from elsewhere (ntbf_dma_fd). */
        int fd = ntbf__sim_file_fd(s, SF_RAM, node);
        uint64_t off;
        if (fd < 0 || ntbf__maps_file_off(fd, addr, size, &off))
                return -EFAULT;
        for (uint32_t i = 0; i < m->n; i++) {
                const struct ntbf_region *r = &m->v[i];
                uint64_t fo =
                    r->kind == NTBF_REGION_RAM ? ntbf__sim_ram_off(s, node, r, r->base) : 0;
                if (r->kind == NTBF_REGION_RAM && off >= fo && off - fo < r->size &&
                    size <= r->size - (off - fo)) {
                        *bus = r->base + (off - fo);
                        return 0;
                }
        }
        return -EFAULT;
}

uint64_t ntbf_sim_recoveries(struct ntbf_backend *b)
{
        struct ntbf_sim *s = ntbf__sim_of(b);
        return s ? atomic_load(&s->hdr->recoveries) : 0;
}

uint8_t *ntbf_sim_cfg(struct ntbf_backend *b, uint32_t device, uint32_t f)
{
        struct ntbf_sim *s = ntbf__sim_of(b);
        if (!s || device >= s->t->ndevices || f >= ntbf_device_nfuncs(&s->t->devices[device]))
                return NULL;
        return sim_at(s, s->funcs[s->func_first[device] + f].off_cfg);
}
