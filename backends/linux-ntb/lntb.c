/* backends/linux-ntb/lntb.c: an NTB of the Linux NTB framework through ntbfab_ntb's character
 * device: opening it, capabilities, link, events, translations, windows, doorbells,
 * scratchpads and messages (lntb.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lntb.h"
#include "ntbfab/error.h"

#define MISC_DIR   "/sys/class/misc"
#define DEV_PREFIX "ntbfab-ntb"
#define EV_BATCH   16

int lntb_say(char *why, size_t len, int rc, const char *fmt, ...)
{
        if (why && len) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(why, len, fmt, ap);
                va_end(ap);
        }
        return rc;
}

int lntb_ioctl(const struct lntb *l, unsigned long req, void *arg)
{
        for (;;) {
                if (l->sys->ioctl(l->fd, req, arg) == 0)
                        return 0;
                if (errno != EINTR)
                        return -errno;
        }
}

void lntb_wake(struct lntb *l)
{
        uint64_t one = 1;
        if (write(l->efd, &one, sizeof(one)) < 0) {
                /* A full counter is still readable: nothing is lost. */
        }
}

const struct ntbf_topo *lntb_topo(const struct lntb_backend *b)
{
        return b->t;
}

/* ---- the backend ------------------------------------------------------------------------- */

int lntb_open(const struct ntbf_backend_env *env, const struct lntb_sys *sys, const char *name,
              struct lntb_backend **out, char *why, size_t whylen)
{
        if (!env || !env->topo || !out || !name)
                return lntb_say(why, whylen, -EINVAL, "no topology");
        struct lntb_backend *b = calloc(1, sizeof(*b));
        if (!b)
                return lntb_say(why, whylen, -ENOMEM, "out of memory");
        b->t = env->topo;
        b->node = env->node;
        b->relay = env->relay;
        b->sys = sys ? sys : lntb_sys_current;
        ntbf__pollirq_init(&b->irq, &lntb_irq_mem, LNTB_IRQ_DATA);
        const struct ntbf_topo *t = env->topo;
        for (uint32_t a = 0; a < t->nadapters; a++) {
                const struct ntbf_adapter *ad = &t->adapters[a];
                if (env->node != NTBF_NONE && ad->node != env->node)
                        continue;
                char w[512] = "";
                int r = lntb_check(b, a, w, sizeof(w));
                if (r == NTBF_ENOTFOUND && env->node == NTBF_NONE)
                        continue; /* with no node given: an adapter of another host */
                if (r) {
                        lntb_say(why, whylen, r, "%s", w);
                        lntb_close(b);
                        return r;
                }
        }
        *out = b;
        return 0;
}

void lntb_close(struct lntb_backend *b)
{
        if (!b)
                return;
        ntbf__pollirq_fini(&b->irq);
        free(b);
}

/* ---- finding and opening the NTB ----------------------------------------------------------- */

/* A sysfs attribute of /sys/class/misc/NAME, without its newline. */
static int read_attr(const struct lntb_sys *sys, const char *name, const char *attr, char *buf,
                     size_t len)
{
        char path[512];
        snprintf(path, sizeof(path), "%s%s/%s/%s", sys->root, MISC_DIR, name, attr);
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        bool ok = fgets(buf, (int)len, f) != NULL;
        fclose(f);
        if (!ok)
                return -EIO;
        buf[strcspn(buf, "\n")] = 0;
        return 0;
}

static bool same_bdf(const char *a, const char *b)
{
        uint16_t d1, d2;
        uint8_t b1, b2, s1, s2, f1, f2;
        return !ntbf_bdf_parse(a, &d1, &b1, &s1, &f1) && !ntbf_bdf_parse(b, &d2, &b2, &s2, &f2) &&
               d1 == d2 && b1 == b2 && s1 == s2 && f1 == f2;
}

/* The ntbfab-ntbN of the adapter: its bdf, or the host's only NTB when it has none. */
static int find_dev(const struct lntb_sys *sys, const struct ntbf_adapter *ad, const char *node,
                    char *name, size_t len, char *why, size_t whylen)
{
        char dir[512];
        snprintf(dir, sizeof(dir), "%s%s", sys->root, MISC_DIR);
        DIR *d = opendir(dir);
        if (!d)
                return lntb_say(why, whylen, NTBF_ENOTFOUND, "cannot list %s: %s", MISC_DIR,
                                strerror(errno));
        char seen[512] = "";
        size_t o = 0;
        unsigned n = 0, hit = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
                if (strncmp(e->d_name, DEV_PREFIX, strlen(DEV_PREFIX)))
                        continue;
                char pci[64] = "?";
                read_attr(sys, e->d_name, "pci_dev", pci, sizeof(pci));
                n++;
                if (o < sizeof(seen))
                        o += (size_t)snprintf(seen + o, sizeof(seen) - o, "%s%s (%s)",
                                              o ? ", " : "", e->d_name, pci);
                if ((ad->bdf[0] && same_bdf(pci, ad->bdf)) || (!ad->bdf[0] && !hit)) {
                        snprintf(name, len, "%.63s", e->d_name);
                        hit++;
                }
        }
        closedir(d);
        if (!n)
                return lntb_say(
                    why, whylen, NTBF_ENOTFOUND,
                    "this host has no NTB of ntbfab_ntb (no %s* in %s): load the NTB's "
                    "hardware driver and ntbfab_ntb (modprobe ntbfab_ntb; docs/linux-ntb.md)",
                    DEV_PREFIX, MISC_DIR);
        if (ad->bdf[0] && !hit)
                return lntb_say(
                    why, whylen, NTBF_ENOTFOUND,
                    "adapter %s.%s has bdf %s in the cluster file, but this host's NTBs are "
                    "%s: correct its bdf",
                    node, ad->name, ad->bdf, seen);
        if (!ad->bdf[0] && n > 1)
                return lntb_say(why, whylen, NTBF_ENOTFOUND,
                                "adapter %s.%s has no bdf in the cluster file and this host has %u "
                                "NTBs (%s): give it the bdf of its NTB",
                                node, ad->name, n, seen);
        return 0;
}

/* Why the NTB cannot be opened for writing: who holds it. */
static int busy(struct lntb *l, const char *name, char *why, size_t whylen)
{
        char pid[32] = "?", comm[64] = "?";
        read_attr(l->sys, name, "owner_pid", pid, sizeof(pid));
        char path[96];
        snprintf(path, sizeof(path), "/proc/%s/comm", pid);
        FILE *f = fopen(path, "re");
        if (f) {
                if (fgets(comm, sizeof(comm), f))
                        comm[strcspn(comm, "\n")] = 0;
                fclose(f);
        }
        return lntb_say(
            why, whylen, NTBF_EBUSY,
            "%s is owned by process %s (%s): one process of a node owns its NTB, the node "
            "daemon; stop that process, or go through the daemon",
            l->dev, pid, comm);
}

/* Whether the NTB's PCI function sits in a translating IOMMU domain (the kernel owns it). */
static bool kernel_iommu(const struct lntb *l)
{
        char path[512], type[32] = "";
        snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s/iommu_group/type", l->sys->root,
                 l->pci_dev);
        FILE *f = fopen(path, "re");
        if (!f)
                return false;
        bool ok = fgets(type, sizeof(type), f) != NULL;
        fclose(f);
        return ok && !strncmp(type, "DMA", 3);
}

/* Peers: Linux's pidx p is the adapter at the other end of port p's cable. */
static int map_peers(struct lntb *l, char *why, size_t whylen)
{
        const struct ntbf_topo *t = l->b->t;
        const struct ntbf_adapter *ad = &t->adapters[l->adapter];
        const char *nn = t->nodes[l->node].name;
        l->npeers = 0;
        for (uint32_t p = 0; p < ad->p.ports && p < NTBF_MAX_ADAPTER_PORTS; p++) {
                uint32_t k = ad->link[p];
                if (k == NTBF_NONE)
                        continue;
                struct ntbf_port_ref o = ntbf_link_peer(
                    &t->links[k], (struct ntbf_port_ref){NTBF_PORT_ADAPTER, l->adapter, p});
                if (o.kind != NTBF_PORT_ADAPTER)
                        return lntb_say(
                            why, whylen, NTBF_ECONFIG,
                            "adapter %s.%s: port %u is cabled to a switch; the linux-ntb "
                            "backend maps Linux's peers to cables between adapters "
                            "(docs/linux-ntb.md)",
                            nn, ad->name, p);
                if (p >= l->info.peer_count || p >= LNTB_MAX_PEERS)
                        return lntb_say(why, whylen, NTBF_ECONFIG,
                                        "adapter %s.%s: port %u is cabled, but its NTB (%s) has %u "
                                        "peer%s: port p is Linux's peer index p; cable ports 0..%u "
                                        "only",
                                        nn, ad->name, p, l->dev, l->info.peer_count,
                                        l->info.peer_count == 1 ? "" : "s",
                                        l->info.peer_count ? l->info.peer_count - 1 : 0);
                while (l->npeers < p)
                        l->peer[l->npeers++] = NTBF_NONE;
                l->peer[l->npeers++] = o.obj;
        }
        if (!l->npeers)
                return lntb_say(why, whylen, NTBF_ECONFIG, "adapter %s.%s has no cable", nn,
                                ad->name);
        return 0;
}

/* Linux's window index of each usable slot of adapter ad, in slot order. */
static uint32_t slot_widx(const struct ntbf_adapter *ad, uint32_t slot)
{
        uint32_t widx = 0;
        for (uint32_t w = 0; w < ad->nwin; w++) {
                const struct ntbf_window *W = &ad->win[w];
                for (uint32_t k = 0; k < W->slots; k++) {
                        if (W->first_slot + k == slot)
                                return k < W->reserved ? NTBF_NONE : widx;
                        if (k >= W->reserved)
                                widx++;
                }
        }
        return NTBF_NONE;
}

/* The file's windows, each slot checked against the NTB's outbound window of its index. */
static int map_windows(struct lntb *l, char *why, size_t whylen)
{
        const struct ntbf_topo *t = l->b->t;
        const struct ntbf_adapter *ad = &t->adapters[l->adapter];
        const char *nn = t->nodes[l->node].name;
        if (ad->nslots > LNTB_MAX_MW)
                return lntb_say(
                    why, whylen, NTBF_ECONFIG,
                    "adapter %s.%s has %u slots; the linux-ntb backend takes at most %u "
                    "(Linux memory windows)",
                    nn, ad->name, ad->nslots, LNTB_MAX_MW);
        l->nwin = ad->nwin;
        l->nslots = ad->nslots;
        for (uint32_t w = 0; w < ad->nwin; w++) {
                const struct ntbf_window *W = &ad->win[w];
                l->win[w] = *W;
                for (uint32_t k = 0; k < W->slots; k++) {
                        uint32_t s = W->first_slot + k, widx = slot_widx(ad, s);
                        l->slot_widx[s] = widx;
                        if (widx == NTBF_NONE)
                                continue;
                        struct ntbfab_peer_mw_info mi = {.widx = widx};
                        uint64_t base = W->base + (uint64_t)k * W->slot_size;
                        if (widx >= l->info.peer_mw_count)
                                return lntb_say(
                                    why, whylen, NTBF_ECONFIG,
                                    "adapter %s.%s: slot %u would be the NTB's memory "
                                    "window %u, but %s has %u: list at most its windows, "
                                    "in Linux's order (docs/linux-ntb.md)",
                                    nn, ad->name, s, widx, l->dev, l->info.peer_mw_count);
                        int r = lntb_ioctl(l, NTBFAB_IOC_PEER_MW_INFO, &mi);
                        if (r)
                                return lntb_say(why, whylen, r,
                                                "%s: NTBFAB_IOC_PEER_MW_INFO(%u): %s", l->dev, widx,
                                                strerror(-r));
                        if (mi.phys_addr != base || mi.size != W->slot_size)
                                return lntb_say(
                                    why, whylen, NTBF_ECONFIG,
                                    "adapter %s.%s: window %u slot %u is %#" PRIx64
                                    " bytes at %#" PRIx64 " in the cluster file, but the "
                                    "NTB's memory window %u is %#" PRIx64 " bytes at "
                                    "%#" PRIx64 ": set the window's size and base to the "
                                    "NTB's (windows: [{size, base, ...}], "
                                    "docs/linux-ntb.md)",
                                    nn, ad->name, w, s, W->slot_size, base, widx, (uint64_t)mi.size,
                                    (uint64_t)mi.phys_addr);
                }
        }
        return 0;
}

/* Pools: one per window index of the peers, as large as the largest such window. */
static void plan_pools(struct lntb *l)
{
        const struct ntbf_topo *t = l->b->t;
        l->npools = 0;
        for (uint32_t p = 0; p < l->npeers; p++) {
                if (l->peer[p] == NTBF_NONE)
                        continue;
                const struct ntbf_adapter *pa = &t->adapters[l->peer[p]];
                for (uint32_t w = 0; w < pa->nwin && w < NTBF_MAX_WINDOWS; w++) {
                        struct lntb_pool *pl = &l->pool[w];
                        if (pa->win[w].size > pl->size)
                                pl->size = pa->win[w].size;
                        uint64_t a =
                            pa->win[w].addr_align > LNTB_PAGE ? pa->win[w].addr_align : LNTB_PAGE;
                        if (a > pl->align)
                                pl->align = a;
                        if (w + 1 > l->npools)
                                l->npools = w + 1;
                }
        }
}

static uint32_t compute_flags(const struct lntb *l)
{
        const struct ntbfab_info *i = &l->info;
        uint32_t f = NTBF_CAP_CPU_MAP | NTBF_CAP_MAP_LIVE | NTBF_CAP_MEM | NTBF_CAP_IRQ;
        if (i->flags & NTBFAB_INFO_MW_SET_TRANS)
                f |= NTBF_CAP_XLAT_INBOUND;
        if (i->flags & NTBFAB_INFO_PEER_MW_SET_TRANS)
                f |= NTBF_CAP_XLAT_OUTBOUND;
        if (i->db_valid_mask)
                f |= NTBF_CAP_DOORBELL;
        /* The group needs the peer's scratchpads both ways. */
        if (i->spad_count && (i->flags & NTBFAB_INFO_PEER_SPAD_READ))
                f |= NTBF_CAP_SCRATCHPAD;
        if (i->msg_count)
                f |= NTBF_CAP_MESSAGE;
        f |= NTBF_CAP_LINK_CTRL;
        /* Switchtec and IDT NTBs have requester-ID tables their drivers program themselves
         * (so neither flag); the other drivers' hardware has none. */
        if (strcmp(i->driver, "ntb_hw_switchtec") && strcmp(i->driver, "ntb_hw_idt"))
                f |= NTBF_CAP_NO_RID_TABLE;
        if (kernel_iommu(l))
                f |= NTBF_CAP_KERNEL_IOMMU;
        return f;
}

/* As the owner: the link up, stale doorbells and messages cleared, their masks opened. */
static int own(struct lntb *l, char *why, size_t whylen)
{
        struct ntbfab_link lk = {.speed = -1, .width = -1};
        int r = lntb_ioctl(l, NTBFAB_IOC_LINK_ENABLE, &lk);
        if (r)
                return lntb_say(why, whylen, r, "%s: NTBFAB_IOC_LINK_ENABLE: %s", l->dev,
                                strerror(-r));
        if (l->info.db_valid_mask) {
                struct ntbfab_bits b = {.bits = l->info.db_valid_mask};
                if ((r = lntb_ioctl(l, NTBFAB_IOC_DB_CLEAR, &b)) ||
                    (r = lntb_ioctl(l, NTBFAB_IOC_DB_UNMASK, &b)))
                        return lntb_say(why, whylen, r, "%s: clearing and unmasking doorbells: %s",
                                        l->dev, strerror(-r));
        }
        if (l->info.msg_count) {
                struct ntbfab_bits b = {.bits = l->info.msg_inbits | l->info.msg_outbits};
                r = lntb_ioctl(l, NTBFAB_IOC_MSG_CLEAR, &b);
                if (!r && (l->info.flags & NTBFAB_INFO_MSG_MASK))
                        r = lntb_ioctl(l, NTBFAB_IOC_MSG_UNMASK, &b);
                if (r)
                        return lntb_say(why, whylen, r, "%s: clearing and unmasking messages: %s",
                                        l->dev, strerror(-r));
        }
        return 0;
}

static int open_dev(struct lntb *l, const char *name, char *why, size_t whylen)
{
        snprintf(l->dev, sizeof(l->dev), "/dev/%.58s", name);
        char path[512];
        snprintf(path, sizeof(path), "%s%s", l->sys->root, l->dev);
        int flags = (l->owner ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK;
        l->fd = l->sys->open(path, flags);
        if (l->fd < 0) {
                if (errno == EBUSY)
                        return busy(l, name, why, whylen);
                if (errno == EACCES || errno == EPERM)
                        return lntb_say(why, whylen, -errno,
                                        "cannot open %s: %s; the node daemon runs as root, or give "
                                        "its group the device (udev rule, docs/linux-ntb.md)",
                                        l->dev, strerror(errno));
                return lntb_say(why, whylen, -errno, "cannot open %s: %s", l->dev, strerror(errno));
        }
        struct ntbfab_version v = {0};
        int r = lntb_ioctl(l, NTBFAB_IOC_VERSION, &v);
        if (r)
                return lntb_say(why, whylen, r, "%s: NTBFAB_IOC_VERSION: %s", l->dev, strerror(-r));
        if (v.version != NTBFAB_NTB_VERSION || v.event_size != sizeof(struct ntbfab_event))
                return lntb_say(
                    why, whylen, NTBF_EUNSUPPORTED,
                    "%s speaks ntbfab_ntb interface version %u (events of %u bytes), this "
                    "library version %u (%zu): install the ntbfab_ntb module of this "
                    "release",
                    l->dev, v.version, v.event_size, NTBFAB_NTB_VERSION,
                    sizeof(struct ntbfab_event));
        r = lntb_ioctl(l, NTBFAB_IOC_INFO, &l->info);
        if (r)
                return lntb_say(why, whylen, r, "%s: NTBFAB_IOC_INFO: %s", l->dev, strerror(-r));
        l->info.ntb_name[sizeof(l->info.ntb_name) - 1] = 0;
        l->info.driver[sizeof(l->info.driver) - 1] = 0;
        if (read_attr(l->sys, name, "pci_dev", l->pci_dev, sizeof(l->pci_dev)))
                snprintf(l->pci_dev, sizeof(l->pci_dev), "%s", l->info.ntb_name);
        return 0;
}

static int events_init(struct lntb *l, char *why, size_t whylen)
{
        l->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (l->efd < 0 || l->epfd < 0)
                return lntb_say(why, whylen, -errno, "eventfd/epoll: %s", strerror(errno));
        struct epoll_event e = {.events = EPOLLIN};
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->fd, &e) ||
            epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->efd, &e))
                return lntb_say(why, whylen, -errno, "epoll_ctl: %s", strerror(errno));
        return 0;
}

/* Open adapter's NTB; with check, only to see that probe would succeed (read-only). */
static int probe(struct lntb_backend *b, uint32_t adapter, bool check, struct lntb **out, char *why,
                 size_t whylen)
{
        const struct ntbf_topo *t = b->t;
        if (adapter >= t->nadapters)
                return lntb_say(why, whylen, -EINVAL, "no adapter %u", adapter);
        const struct ntbf_adapter *ad = &t->adapters[adapter];
        if (b->node != NTBF_NONE && ad->node != b->node)
                return lntb_say(why, whylen, -EPERM, "adapter %s.%s is not of node %s",
                                t->nodes[ad->node].name, ad->name, t->nodes[b->node].name);
        struct lntb *l = calloc(1, sizeof(*l));
        if (!l)
                return lntb_say(why, whylen, -ENOMEM, "out of memory");
        l->b = b;
        l->sys = b->sys;
        l->adapter = adapter;
        l->node = ad->node;
        l->owner = !check && b->relay == NULL;
        l->fd = l->epfd = l->efd = -1;
        for (uint32_t i = 0; i < LNTB_MAX_MW; i++)
                l->wfd[i] = -1;
        for (uint32_t i = 0; i < NTBF_MAX_WINDOWS; i++)
                l->pool[i].fd = -1;
        pthread_mutex_init(&l->lock, NULL);
        char name[64];
        int r = find_dev(b->sys, ad, t->nodes[ad->node].name, name, sizeof(name), why, whylen);
        if (!r)
                r = open_dev(l, name, why, whylen);
        if (!r && check && !b->relay) {
                /* This process means to own it: is another one its owner? */
                struct ntbfab_state st = {0};
                if (!lntb_ioctl(l, NTBFAB_IOC_STATE, &st) && (st.flags & NTBFAB_STATE_OWNED))
                        r = busy(l, name, why, whylen);
        }
        if (!r)
                r = map_peers(l, why, whylen);
        if (!r)
                r = map_windows(l, why, whylen);
        if (!r && !check)
                r = events_init(l, why, whylen);
        if (!r && l->owner)
                r = own(l, why, whylen);
        if (r || check) {
                lntb_release(l);
                return r;
        }
        plan_pools(l);
        l->caps_flags = compute_flags(l);
        struct ntbfab_link lk = {0};
        if (!lntb_ioctl(l, NTBFAB_IOC_LINK_STATUS, &lk))
                l->link_seen = lk.up;
        *out = l;
        return 0;
}

int lntb_probe(struct lntb_backend *b, uint32_t adapter, struct lntb **out, char *why,
               size_t whylen)
{
        if (!out)
                return lntb_say(why, whylen, -EINVAL, "no handle to fill");
        return probe(b, adapter, false, out, why, whylen);
}

int lntb_check(struct lntb_backend *b, uint32_t adapter, char *why, size_t whylen)
{
        return probe(b, adapter, true, NULL, why, whylen);
}

void lntb_release(struct lntb *l)
{
        if (!l)
                return;
        /* Vectors of this adapter go first: the watcher reads their pages. */
        ntbf__pollirq_drop(&l->b->irq, (struct ntbf_adapter_h *)l);
        while (l->maps) {
                struct lntb_map *m = l->maps;
                l->maps = m->next;
                l->sys->munmap(m->va, m->size);
                free(m);
        }
        for (uint32_t w = 0; w < NTBF_MAX_WINDOWS; w++)
                if (l->wmap[w])
                        l->sys->munmap(l->wmap[w], l->win[w].size);
        for (uint32_t i = 0; i < NTBF_MAX_WINDOWS; i++) {
                struct lntb_pool *p = &l->pool[i];
                if (p->va)
                        l->sys->munmap(p->va, p->size);
                if (p->fd >= 0)
                        l->sys->close(p->fd);
                free(p->a);
        }
        for (uint32_t i = 0; i < LNTB_MAX_MW; i++)
                if (l->wfd[i] >= 0)
                        l->sys->close(l->wfd[i]);
        if (l->epfd >= 0)
                close(l->epfd);
        if (l->efd >= 0)
                close(l->efd);
        /* The owner's close makes the module undo its link, translations and masks. */
        if (l->fd >= 0)
                l->sys->close(l->fd);
        pthread_mutex_destroy(&l->lock);
        free(l);
}

int lntb_pidx(const struct lntb *l, uint32_t peer)
{
        for (uint32_t p = 0; p < l->npeers; p++)
                if (l->peer[p] == peer && peer != NTBF_NONE)
                        return (int)p;
        return -1;
}

/* The first cabled peer index (whose link the alignments are asked of). */
static int first_pidx(const struct lntb *l)
{
        for (uint32_t p = 0; p < l->npeers; p++)
                if (l->peer[p] != NTBF_NONE)
                        return (int)p;
        return -1;
}

/*
 * The limits of Linux window widx for translations toward this host, as ntb_mw_get_align
 * reports them while the link is up (NTB hardware is symmetric: the same figures hold for
 * the peer's window of that index). false while they are unknown.
 */
static bool hw_align(struct lntb *l, int pidx, uint32_t widx, struct ntbf_window *w)
{
        struct ntbfab_mw_info mi = {.pidx = (uint32_t)pidx, .widx = widx};
        if (pidx < 0 || lntb_ioctl(l, NTBFAB_IOC_MW_INFO, &mi) ||
            !(mi.flags & NTBFAB_MW_ALIGN_VALID))
                return false;
        if (mi.addr_align)
                w->addr_align = mi.addr_align;
        if (mi.size_align)
                w->size_align = mi.size_align;
        if (mi.size_max && mi.size_max < w->slot_size)
                w->size_max = mi.size_max;
        else
                w->size_max = w->slot_size;
        return true;
}

int lntb_caps(struct lntb *l, struct ntbf_caps *c)
{
        if (!l || !c)
                return -EINVAL;
        const struct ntbf_adapter *ad = &l->b->t->adapters[l->adapter];
        memset(c, 0, sizeof(*c));
        c->flags = l->caps_flags;
        c->ports = ad->p.ports;
        for (uint32_t p = 0; p < l->npeers; p++)
                c->peers += l->peer[p] != NTBF_NONE;
        c->nwindows = l->nwin;
        int pidx = first_pidx(l);
        for (uint32_t w = 0; w < l->nwin; w++) {
                c->windows[w] = l->win[w];
                uint32_t widx = l->slot_widx[l->win[w].first_slot + l->win[w].reserved];
                hw_align(l, pidx, widx, &c->windows[w]);
        }
        c->slots = l->nslots;
        c->addr_bits = 64;
        c->db_valid_mask = l->info.db_valid_mask;
        c->db_vectors = l->info.db_vector_count;
        c->scratchpads = (c->flags & NTBF_CAP_SCRATCHPAD) ? l->info.spad_count : 0;
        c->messages = l->info.msg_count;
        return 0;
}

/* ---- link ---------------------------------------------------------------------------------- */

static int link_bits(struct lntb *l, uint64_t *up)
{
        struct ntbfab_link lk = {0};
        int r = lntb_ioctl(l, NTBFAB_IOC_LINK_STATUS, &lk);
        *up = r ? 0 : lk.up;
        return r == -ENODEV ? -ENODEV : r;
}

int lntb_link_state(struct lntb *l, uint32_t port, bool *up)
{
        const struct ntbf_adapter *ad = &l->b->t->adapters[l->adapter];
        if (!up || port >= ad->p.ports)
                return -EINVAL;
        *up = false;
        if (port >= l->npeers || l->peer[port] == NTBF_NONE)
                return 0;
        uint64_t bits;
        int r = link_bits(l, &bits);
        if (r)
                return r;
        *up = (bits >> port) & 1;
        return 0;
}

/* Whether the link to peer pidx is up (the peer's registers answer). */
static int peer_up(struct lntb *l, int pidx)
{
        uint64_t bits;
        int r = link_bits(l, &bits);
        if (r)
                return r;
        return (bits >> pidx) & 1 ? 0 : -ENOTCONN;
}

/* Linux enables and disables an NTB's link as a whole, every port at once. */
static int link_set(struct lntb *l, uint32_t port, bool on)
{
        const struct ntbf_adapter *ad = &l->b->t->adapters[l->adapter];
        if (port >= ad->p.ports)
                return -EINVAL;
        if (!l->owner)
                return -EPERM;
        struct ntbfab_link lk = {.speed = -1, .width = -1};
        return on ? lntb_ioctl(l, NTBFAB_IOC_LINK_ENABLE, &lk)
                  : lntb_ioctl(l, NTBFAB_IOC_LINK_DISABLE, NULL);
}

int lntb_link_enable(struct lntb *l, uint32_t port)
{
        return link_set(l, port, true);
}

int lntb_link_disable(struct lntb *l, uint32_t port)
{
        return link_set(l, port, false);
}

/* ---- events -------------------------------------------------------------------------------- */

int lntb_set_events(struct lntb *l, const struct ntbf_event_ops *ops, void *ctx)
{
        pthread_mutex_lock(&l->lock);
        l->ops = ops;
        l->ctx = ctx;
        pthread_mutex_unlock(&l->lock);
        return 0;
}

int lntb_event_fd(struct lntb *l)
{
        return l->epfd;
}

/* Ports whose link changed since last reported. */
static int dispatch_link(struct lntb *l, uint64_t up)
{
        int n = 0;
        uint64_t changed = up ^ l->link_seen;
        l->link_seen = up;
        for (uint32_t p = 0; p < l->npeers && p < 64; p++) {
                if (l->peer[p] == NTBF_NONE || !((changed >> p) & 1))
                        continue;
                if (l->ops && l->ops->link_event) {
                        l->ops->link_event(l->ctx, p, (up >> p) & 1);
                        n++;
                }
        }
        return n;
}

/* Messages in the inbound registers, to msg_event (and cleared): the owner's. */
static int dispatch_msgs(struct lntb *l)
{
        if (!l->owner || !l->info.msg_count || !l->ops || !l->ops->msg_event)
                return 0;
        struct ntbfab_bits st = {0};
        if (lntb_ioctl(l, NTBFAB_IOC_MSG_STATUS, &st))
                return 0;
        int n = 0;
        uint32_t midx = 0;
        for (unsigned bit = 0; bit < 64 && midx < l->info.msg_count; bit++) {
                uint64_t m = UINT64_C(1) << bit;
                if (!(l->info.msg_inbits & m))
                        continue;
                if (st.bits & m) {
                        struct ntbfab_msg msg = {.midx = midx};
                        if (!lntb_ioctl(l, NTBFAB_IOC_MSG_READ, &msg)) {
                                struct ntbfab_bits c = {.bits = m};
                                lntb_ioctl(l, NTBFAB_IOC_MSG_CLEAR, &c);
                                uint32_t peer =
                                    msg.pidx < l->npeers ? l->peer[msg.pidx] : NTBF_NONE;
                                l->ops->msg_event(l->ctx, peer, midx, msg.value);
                                n++;
                        }
                }
                midx++;
        }
        return n;
}

int lntb_process_events(struct lntb *l)
{
        uint64_t cnt;
        while (read(l->efd, &cnt, sizeof(cnt)) == (ssize_t)sizeof(cnt))
                ;
        struct ntbfab_event ev[EV_BATCH];
        int n = 0;
        bool msgs = false, resync = false;
        uint64_t raised = 0;
        pthread_mutex_lock(&l->lock);
        for (;;) {
                ssize_t got = l->sys->read(l->fd, ev, sizeof(ev));
                if (got < 0 && errno == EINTR)
                        continue;
                if (got <= 0)
                        break;
                for (size_t i = 0; i < (size_t)got / sizeof(ev[0]); i++) {
                        switch (ev[i].type) {
                        case NTBFAB_EVENT_LINK:
                                n += dispatch_link(l, ev[i].bits);
                                break;
                        case NTBFAB_EVENT_DB: {
                                uint64_t bits = ev[i].bits & ~l->db_mask;
                                raised |= bits;
                                if (l->owner && bits && l->ops && l->ops->db_event) {
                                        l->ops->db_event(l->ctx, ev[i].vector, bits);
                                        n++;
                                }
                                break;
                        }
                        case NTBFAB_EVENT_MSG:
                                msgs = true;
                                break;
                        case NTBFAB_EVENT_LOST:
                                resync = true;
                                break;
                        case NTBFAB_EVENT_REMOVED:
                                l->removed = true;
                                n += dispatch_link(l, 0);
                                break;
                        }
                }
                if ((size_t)got < sizeof(ev))
                        break;
        }
        if (resync && !l->removed) {
                uint64_t up;
                if (!link_bits(l, &up))
                        n += dispatch_link(l, up);
                msgs = true;
                struct ntbfab_bits p = {0};
                if (!lntb_ioctl(l, NTBFAB_IOC_DB_READ, &p))
                        l->db_raise |= p.bits;
        }
        /* Pending bits this process unmasked that the hardware did not raise again. */
        if (l->db_raise && l->owner) {
                struct ntbfab_bits p = {0};
                uint64_t want = l->db_raise & ~raised & ~l->db_mask;
                l->db_raise = 0;
                if (want && !lntb_ioctl(l, NTBFAB_IOC_DB_READ, &p) && (p.bits & want) && l->ops &&
                    l->ops->db_event) {
                        l->ops->db_event(l->ctx, 0, p.bits & want);
                        n++;
                }
        }
        if (msgs)
                n += dispatch_msgs(l);
        pthread_mutex_unlock(&l->lock);
        return n;
}

/* ---- translation --------------------------------------------------------------------------- */

/* The window of adapter ad holding slot s (a copy), and Linux's index of the slot. */
static int slot_of(const struct ntbf_adapter *ad, uint32_t slot, struct ntbf_window *w,
                   uint32_t *widx)
{
        const struct ntbf_window *W = ntbf_adapter_slot_window(ad, slot);
        if (!W)
                return -EINVAL;
        if (slot - W->first_slot < W->reserved)
                return -EPERM;
        *w = *W;
        *widx = slot_widx(ad, slot);
        return *widx == NTBF_NONE ? -EINVAL : 0;
}

/* Slot of peer's window that this NTB translates inbound: its peer index, window, index. */
static int inbound_slot(struct lntb *l, uint32_t peer, uint32_t slot, int *pidx,
                        struct ntbf_window *w, uint32_t *widx)
{
        if (!(l->caps_flags & NTBF_CAP_XLAT_INBOUND))
                return NTBF_EUNSUPPORTED;
        *pidx = lntb_pidx(l, peer);
        if (*pidx < 0)
                return -EINVAL;
        return slot_of(&l->b->t->adapters[peer], slot, w, widx);
}

int lntb_peer_xlat_set(struct lntb *l, uint32_t peer, uint32_t slot, uint64_t local_addr,
                       uint64_t size)
{
        int pidx;
        struct ntbf_window w;
        uint32_t widx;
        int r = inbound_slot(l, peer, slot, &pidx, &w, &widx);
        if (r)
                return r;
        /* The peer's window of the file (whose rules the core plans with), and this NTB's
         * limits for it when known. */
        struct ntbf_window hw = w;
        hw_align(l, pidx, widx, &hw);
        if (!ntbf_window_xlat_ok(&w, local_addr, size) ||
            !ntbf_window_xlat_ok(&hw, local_addr, size))
                return -EINVAL;
        if (!l->owner)
                return -EPERM;
        pthread_mutex_lock(&l->lock);
        uint64_t off;
        struct lntb_pool *p = lntb_pool_find(l, local_addr, size, &off, false);
        struct ntbfab_mw_trans mt = {.pidx = (uint32_t)pidx,
                                     .widx = widx,
                                     .buf_fd = p ? p->fd : -1,
                                     .offset = off,
                                     .size = size};
        r = p ? lntb_ioctl(l, NTBFAB_IOC_MW_SET_TRANS, &mt) : -EFAULT;
        pthread_mutex_unlock(&l->lock);
        return r == -EOPNOTSUPP ? NTBF_EUNSUPPORTED : r;
}

int lntb_peer_xlat_clear(struct lntb *l, uint32_t peer, uint32_t slot)
{
        int pidx;
        struct ntbf_window w;
        uint32_t widx;
        int r = inbound_slot(l, peer, slot, &pidx, &w, &widx);
        if (r)
                return r;
        if (!l->owner)
                return -EPERM;
        struct ntbfab_mw_ref ref = {.pidx = (uint32_t)pidx, .widx = widx};
        return lntb_ioctl(l, NTBFAB_IOC_MW_CLEAR_TRANS, &ref);
}

int lntb_xlat_set(struct lntb *l, uint32_t slot, const struct ntbf_xlat *x)
{
        if (!(l->caps_flags & NTBF_CAP_XLAT_OUTBOUND))
                return NTBF_EUNSUPPORTED;
        if (!x)
                return -EINVAL;
        if (x->mcast_group != NTBF_NONE)
                return NTBF_EUNSUPPORTED;
        int pidx = lntb_pidx(l, x->dst_adapter);
        if (pidx < 0)
                return x->dst_adapter < l->b->t->nadapters ? NTBF_ENOPATH : -EINVAL;
        if (x->dst_node != l->b->t->adapters[x->dst_adapter].node)
                return -EINVAL;
        struct ntbf_window w;
        uint32_t widx;
        int r = slot_of(&l->b->t->adapters[l->adapter], slot, &w, &widx);
        if (r)
                return r;
        if (!ntbf_window_xlat_ok(&w, x->addr, x->size))
                return -EINVAL;
        if (!l->owner)
                return -EPERM;
        struct ntbfab_peer_mw_trans mt = {
            .pidx = (uint32_t)pidx, .widx = widx, .addr = x->addr, .size = x->size};
        r = lntb_ioctl(l, NTBFAB_IOC_PEER_MW_SET_TRANS, &mt);
        return r == -EOPNOTSUPP ? NTBF_EUNSUPPORTED : r;
}

int lntb_xlat_clear(struct lntb *l, uint32_t slot)
{
        if (!(l->caps_flags & NTBF_CAP_XLAT_OUTBOUND))
                return NTBF_EUNSUPPORTED;
        struct ntbf_window w;
        uint32_t widx;
        int r = slot_of(&l->b->t->adapters[l->adapter], slot, &w, &widx);
        if (r)
                return r;
        if (!l->owner)
                return -EPERM;
        /* Whichever peer it was set for: the module clears only a matching one. */
        for (uint32_t p = 0; p < l->npeers; p++) {
                if (l->peer[p] == NTBF_NONE)
                        continue;
                struct ntbfab_mw_ref ref = {.pidx = p, .widx = widx};
                if ((r = lntb_ioctl(l, NTBFAB_IOC_PEER_MW_CLEAR_TRANS, &ref)))
                        return r;
        }
        return 0;
}

/* ---- windows ------------------------------------------------------------------------------- */

/* The descriptor and file offset that map byte `off` of Linux window widx in this process. */
static int window_src(struct lntb *l, uint32_t widx, uint64_t off, int *fd, uint64_t *foff)
{
        if (l->owner) {
                *fd = l->fd;
                *foff = ((uint64_t)widx << NTBFAB_MMAP_MW_SHIFT) + off;
                return 0;
        }
        pthread_mutex_lock(&l->lock);
        int r = 0;
        if (l->wfd[widx] < 0) {
                struct lntb_relay_ans a;
                int wfd = -1;
                r = lntb_relay(l, LNTB_RELAY_WINDOW_FD, widx, 0, &a, &wfd);
                if (!r)
                        l->wfd[widx] = wfd;
        }
        *fd = l->wfd[widx];
        *foff = off;
        pthread_mutex_unlock(&l->lock);
        return r;
}

/* Map [offset, offset + size) of window win: slot by slot, side by side. */
static int map_range(struct lntb *l, uint32_t win, uint64_t offset, uint64_t size, int prot,
                     bool holes, void **addr)
{
        const struct ntbf_window *W = &l->win[win];
        uint8_t *va = l->sys->mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (va == MAP_FAILED)
                return -errno;
        for (uint64_t at = offset; at < offset + size;) {
                uint32_t k = (uint32_t)(at / W->slot_size);
                uint64_t in = at % W->slot_size, len = W->slot_size - in;
                if (len > offset + size - at)
                        len = offset + size - at;
                uint32_t widx = l->slot_widx[W->first_slot + k];
                int fd, r;
                uint64_t foff;
                if (widx == NTBF_NONE && holes) {
                        at += len; /* left inaccessible (window_write refuses it) */
                        continue;
                }
                if (widx == NTBF_NONE)
                        r = -EPERM; /* a reserved slot is the hardware's */
                else
                        r = window_src(l, widx, in, &fd, &foff);
                if (!r && l->sys->mmap(va + (at - offset), len, prot, MAP_SHARED | MAP_FIXED, fd,
                                       (off_t)foff) == MAP_FAILED)
                        r = -errno;
                if (r) {
                        l->sys->munmap(va, size);
                        return r;
                }
                at += len;
        }
        *addr = va;
        return 0;
}

int lntb_map_window(struct lntb *l, uint32_t win, uint64_t offset, uint64_t size, unsigned flags,
                    void **addr)
{
        if (!addr || win >= l->nwin || !size || (offset | size) % LNTB_PAGE ||
            offset > l->win[win].size || size > l->win[win].size - offset ||
            (flags & ~(unsigned)(NTBF_MAP_READONLY | NTBF_MAP_UNCACHED)))
                return -EINVAL;
        /* ntbfab_ntb maps windows write-combined only. */
        if (flags & NTBF_MAP_UNCACHED)
                return NTBF_EUNSUPPORTED;
        struct lntb_map *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        int prot = PROT_READ | ((flags & NTBF_MAP_READONLY) ? 0 : PROT_WRITE);
        int r = map_range(l, win, offset, size, prot, false, &m->va);
        if (r) {
                free(m);
                return r;
        }
        m->size = m->ulen = size;
        m->user = m->va;
        m->window = true;
        pthread_mutex_lock(&l->lock);
        m->next = l->maps;
        l->maps = m;
        pthread_mutex_unlock(&l->lock);
        *addr = m->va;
        return 0;
}

/* Forget and unmap a mapping of the list (window or memory). */
int lntb_unmap(struct lntb *l, void *addr, uint64_t size, bool window)
{
        pthread_mutex_lock(&l->lock);
        struct lntb_map **pp = &l->maps;
        while (*pp && ((*pp)->user != addr || (*pp)->ulen != size || (*pp)->window != window))
                pp = &(*pp)->next;
        struct lntb_map *m = *pp;
        if (m)
                *pp = m->next;
        pthread_mutex_unlock(&l->lock);
        if (!m)
                return -EINVAL;
        l->sys->munmap(m->va, m->size);
        free(m);
        return 0;
}

int lntb_unmap_window(struct lntb *l, void *addr, uint64_t size)
{
        return lntb_unmap(l, addr, size, true);
}

int lntb_window_write(struct lntb *l, uint32_t win, uint64_t offset, const void *buf, uint64_t len)
{
        if (win >= l->nwin || !buf || !len || offset > l->win[win].size ||
            len > l->win[win].size - offset)
                return -EINVAL;
        const struct ntbf_window *W = &l->win[win];
        for (uint64_t k = offset / W->slot_size; k <= (offset + len - 1) / W->slot_size; k++)
                if (l->slot_widx[W->first_slot + k] == NTBF_NONE)
                        return -EPERM; /* a reserved slot is the hardware's */
        pthread_mutex_lock(&l->lock);
        uint8_t *w = l->wmap[win];
        pthread_mutex_unlock(&l->lock);
        if (!w) {
                void *va;
                int r = map_range(l, win, 0, l->win[win].size, PROT_READ | PROT_WRITE, true, &va);
                if (r)
                        return r;
                pthread_mutex_lock(&l->lock);
                if (l->wmap[win]) {
                        l->sys->munmap(va, l->win[win].size);
                } else {
                        l->wmap[win] = va;
                }
                w = l->wmap[win];
                pthread_mutex_unlock(&l->lock);
        }
        /* An aligned 4-byte write is one store, as an MSI write must be. */
        if (len == 4 && !(offset % 4)) {
                uint32_t v;
                memcpy(&v, buf, 4);
                *(volatile uint32_t *)(void *)(w + offset) = v;
        } else {
                memcpy(w + offset, buf, len);
        }
        /* Out of the write-combining buffers before this returns. */
        atomic_thread_fence(memory_order_seq_cst);
        return 0;
}

/* ---- doorbells ----------------------------------------------------------------------------- */

static int bits_op(struct lntb *l, unsigned long req, uint64_t bits, bool write)
{
        if (!(l->caps_flags & NTBF_CAP_DOORBELL))
                return NTBF_EUNSUPPORTED;
        if (bits & ~l->info.db_valid_mask)
                return -EINVAL;
        if (write && !l->owner)
                return -EPERM;
        struct ntbfab_bits b = {.bits = bits};
        return lntb_ioctl(l, req, &b);
}

int lntb_db_read(struct lntb *l, uint64_t *bits)
{
        if (!(l->caps_flags & NTBF_CAP_DOORBELL))
                return NTBF_EUNSUPPORTED;
        if (!bits)
                return -EINVAL;
        struct ntbfab_bits b = {0};
        int r = lntb_ioctl(l, NTBFAB_IOC_DB_READ, &b);
        *bits = r ? 0 : b.bits;
        return r;
}

int lntb_db_clear(struct lntb *l, uint64_t bits)
{
        return bits_op(l, NTBFAB_IOC_DB_CLEAR, bits, true);
}

int lntb_db_set_mask(struct lntb *l, uint64_t bits)
{
        int r = bits_op(l, NTBFAB_IOC_DB_MASK, bits, true);
        if (!r) {
                pthread_mutex_lock(&l->lock);
                l->db_mask |= bits;
                pthread_mutex_unlock(&l->lock);
        }
        return r;
}

int lntb_db_clear_mask(struct lntb *l, uint64_t bits)
{
        pthread_mutex_lock(&l->lock);
        uint64_t was = l->db_mask;
        l->db_mask &= ~bits;
        pthread_mutex_unlock(&l->lock);
        int r = bits_op(l, NTBFAB_IOC_DB_UNMASK, bits, true);
        pthread_mutex_lock(&l->lock);
        if (r) {
                l->db_mask = was;
        } else {
                /* Hardware that does not raise a pending bit when it is unmasked gets it
                 * raised here (process_events drops it if the hardware did). */
                struct ntbfab_bits p = {0};
                if (!lntb_ioctl(l, NTBFAB_IOC_DB_READ, &p) && (p.bits & bits & was)) {
                        l->db_raise |= p.bits & bits & was;
                        lntb_wake(l);
                }
        }
        pthread_mutex_unlock(&l->lock);
        return r;
}

/* The peer's doorbell bits, from the cluster file (its `doorbells`). */
static uint64_t peer_db_mask(const struct lntb *l, uint32_t peer)
{
        uint32_t n = l->b->t->adapters[peer].p.doorbells;
        return n >= 64 ? UINT64_MAX : (UINT64_C(1) << n) - 1;
}

int lntb_peer_db_set(struct lntb *l, uint32_t peer, uint64_t bits)
{
        if (!(l->caps_flags & NTBF_CAP_DOORBELL))
                return NTBF_EUNSUPPORTED;
        int pidx = lntb_pidx(l, peer);
        if (pidx < 0 || !bits || (bits & ~peer_db_mask(l, peer)) || (bits & ~l->info.db_valid_mask))
                return -EINVAL;
        if (!l->owner)
                return -EPERM;
        int r = peer_up(l, pidx);
        if (r)
                return r;
        struct ntbfab_bits b = {.bits = bits};
        return lntb_ioctl(l, NTBFAB_IOC_PEER_DB_SET, &b);
}

/* ---- scratchpads --------------------------------------------------------------------------- */

static int spad(struct lntb *l, unsigned long req, int pidx, uint32_t idx, uint32_t *val)
{
        struct ntbfab_spad s = {.flags = pidx >= 0 ? NTBFAB_SPAD_PEER : 0,
                                .pidx = pidx >= 0 ? (uint32_t)pidx : 0,
                                .sidx = idx,
                                .value = *val};
        int r = lntb_ioctl(l, req, &s);
        if (!r)
                *val = s.value;
        return r;
}

int lntb_spad_read(struct lntb *l, uint32_t idx, uint32_t *val)
{
        if (!(l->caps_flags & NTBF_CAP_SCRATCHPAD))
                return NTBF_EUNSUPPORTED;
        if (!val || idx >= l->info.spad_count)
                return -EINVAL;
        *val = 0;
        return spad(l, NTBFAB_IOC_SPAD_READ, -1, idx, val);
}

int lntb_spad_write(struct lntb *l, uint32_t idx, uint32_t val)
{
        if (!(l->caps_flags & NTBF_CAP_SCRATCHPAD))
                return NTBF_EUNSUPPORTED;
        if (idx >= l->info.spad_count)
                return -EINVAL;
        if (!l->owner)
                return -EPERM;
        return spad(l, NTBFAB_IOC_SPAD_WRITE, -1, idx, &val);
}

/* A peer's scratchpad index is checked against its own count (the cluster file's). */
static int peer_spad_ok(struct lntb *l, uint32_t peer, uint32_t idx)
{
        if (!(l->caps_flags & NTBF_CAP_SCRATCHPAD))
                return NTBF_EUNSUPPORTED;
        int pidx = lntb_pidx(l, peer);
        if (pidx < 0 || idx >= l->b->t->adapters[peer].p.scratchpads || idx >= l->info.spad_count)
                return -EINVAL;
        return pidx;
}

int lntb_peer_spad_read(struct lntb *l, uint32_t peer, uint32_t idx, uint32_t *val)
{
        int pidx = peer_spad_ok(l, peer, idx);
        if (pidx < 0)
                return pidx;
        if (!val)
                return -EINVAL;
        int r = peer_up(l, pidx);
        if (r)
                return r;
        *val = 0;
        return spad(l, NTBFAB_IOC_SPAD_READ, pidx, idx, val);
}

int lntb_peer_spad_write(struct lntb *l, uint32_t peer, uint32_t idx, uint32_t val)
{
        int pidx = peer_spad_ok(l, peer, idx);
        if (pidx < 0)
                return pidx;
        if (!l->owner)
                return -EPERM;
        int r = peer_up(l, pidx);
        if (r)
                return r;
        return spad(l, NTBFAB_IOC_SPAD_WRITE, pidx, idx, &val);
}

/* ---- messages ------------------------------------------------------------------------------ */

/* The status bit of inbound message register midx: the midx-th bit of msg_inbits. */
static uint64_t msg_bit(const struct lntb *l, uint32_t midx)
{
        for (unsigned bit = 0, i = 0; bit < 64; bit++)
                if ((l->info.msg_inbits >> bit) & 1 && i++ == midx)
                        return UINT64_C(1) << bit;
        return 0;
}

int lntb_peer_msg_write(struct lntb *l, uint32_t peer, uint32_t midx, uint32_t val)
{
        if (!(l->caps_flags & NTBF_CAP_MESSAGE))
                return NTBF_EUNSUPPORTED;
        int pidx = lntb_pidx(l, peer);
        if (pidx < 0 || midx >= l->info.msg_count || midx >= l->b->t->adapters[peer].p.messages)
                return -EINVAL;
        if (!l->owner)
                return -EPERM;
        int r = peer_up(l, pidx);
        if (r)
                return r;
        struct ntbfab_msg m = {.pidx = (uint32_t)pidx, .midx = midx, .value = val};
        return lntb_ioctl(l, NTBFAB_IOC_MSG_WRITE, &m);
}

int lntb_msg_read(struct lntb *l, uint32_t midx, uint32_t *peer, uint32_t *val)
{
        if (!(l->caps_flags & NTBF_CAP_MESSAGE))
                return NTBF_EUNSUPPORTED;
        if (midx >= l->info.msg_count || !peer || !val)
                return -EINVAL;
        if (!l->owner)
                return -EPERM;
        uint64_t bit = msg_bit(l, midx);
        struct ntbfab_bits st = {0};
        int r = lntb_ioctl(l, NTBFAB_IOC_MSG_STATUS, &st);
        if (r)
                return r;
        if (!(st.bits & bit))
                return -EAGAIN; /* the register holds no message */
        struct ntbfab_msg m = {.midx = midx};
        if ((r = lntb_ioctl(l, NTBFAB_IOC_MSG_READ, &m)))
                return r;
        struct ntbfab_bits c = {.bits = bit};
        if ((r = lntb_ioctl(l, NTBFAB_IOC_MSG_CLEAR, &c)))
                return r;
        *peer = m.pidx < l->npeers ? l->peer[m.pidx] : NTBF_NONE;
        *val = m.value;
        return 0;
}
