/* tests/unit/fake_ntbdev.c: two ntbfab_ntb devices cabled to each other, in this process
 * (fake_ntbdev.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_ntbdev.h"

#define NDEV   2
#define QLEN   64
#define MAXF   32
#define MAXBUF 32
#define PAGE   UINT64_C(4096)

struct fbuf {
        bool used;
        int dev;
        ino_t ino;
        int fd; /* the descriptor BUF_ALLOC returned (the backend may dup it) */
        uint64_t dma, size;
};

enum fkind { F_DEV = 1, F_WIN };

struct ffile {
        enum fkind kind;
        int fd; /* an eventfd: what the backend polls */
        int dev;
        bool owner;
        uint32_t widx;
        uint64_t woff, wsize;
        unsigned gen;
        struct ntbfab_event q[QLEN];
        unsigned head, count;
};

struct ftrans {
        int buf; /* -1: none */
        uint64_t off, size;
};

struct fdev {
        bool owned, link_en;
        unsigned gen; /* the owner generation: window descriptors of older owners are dead */
        uint64_t db_pending, db_mask;
        uint32_t spad[FAKE_SPADS];
        uint32_t msg[FAKE_MSGS];
        uint64_t msg_sts, msg_mask;
        struct ftrans trans[FAKE_NMW_MAX];
        uint64_t next_dma;
        uint64_t seq;
};

static const struct fake_layout lay_default = {FAKE_NMW, FAKE_WIN_SIZE, UINT64_C(0x1000000),
                                               FAKE_NMW *UINT64_C(0x1000000), FAKE_BAR};
static struct fake_layout lay = {FAKE_NMW, FAKE_WIN_SIZE, UINT64_C(0x1000000),
                                 FAKE_NMW *UINT64_C(0x1000000), FAKE_BAR};

void fake_ntb_layout(const struct fake_layout *l)
{
        lay = l ? *l : lay_default;
        if (!lay.nmw || lay.nmw > FAKE_NMW_MAX)
                abort();
}

static char root[256];
static struct fdev dev[NDEV];
static struct ffile *files[MAXF];
static struct fbuf bufs[MAXBUF];
static bool hw_link = true;
static unsigned long fail_req;
static int fail_err;
static unsigned fail_count;

static bool up_now(void)
{
        return hw_link && dev[0].link_en && dev[1].link_en;
}

/* ---- files and events ---------------------------------------------------------------------- */

static struct ffile *file_of(int fd)
{
        for (int i = 0; i < MAXF; i++)
                if (files[i] && files[i]->fd == fd)
                        return files[i];
        return NULL;
}

static void deliver(int d, uint32_t type, uint32_t vector, uint64_t bits)
{
        uint64_t seq = ++dev[d].seq;
        for (int i = 0; i < MAXF; i++) {
                struct ffile *f = files[i];
                if (!f || f->kind != F_DEV || f->dev != d || f->count == QLEN)
                        continue;
                f->q[(f->head + f->count++) % QLEN] =
                    (struct ntbfab_event){.type = type, .vector = vector, .bits = bits, .seq = seq};
                uint64_t one = 1;
                if (write(f->fd, &one, sizeof(one)) < 0)
                        abort();
        }
}

static void remap_all(void);

static void link_changed(bool was)
{
        bool now = up_now();
        if (now != was)
                remap_all();
        if (now != was)
                for (int d = 0; d < NDEV; d++)
                        deliver(d, NTBFAB_EVENT_LINK, 0, now ? 1 : 0);
}

static struct ffile *new_file(enum fkind kind, int d)
{
        for (int i = 0; i < MAXF; i++)
                if (!files[i]) {
                        struct ffile *f = calloc(1, sizeof(*f));
                        f->kind = kind;
                        f->dev = d;
                        f->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                        files[i] = f;
                        return f;
                }
        abort();
}

/* ---- the owner's departure, as the module undoes it ------------------------------------------ */

static void undo_owner(int d)
{
        bool was = up_now();
        struct fdev *v = &dev[d];
        v->link_en = false;
        for (int w = 0; w < (int)lay.nmw; w++)
                v->trans[w].buf = -1;
        v->db_mask = FAKE_DB_VALID;
        v->msg_mask = UINT64_C(0xff);
        memset(v->spad, 0, sizeof(v->spad));
        v->gen++;
        v->owned = false;
        remap_all();
        link_changed(was);
}

/* ---- the system calls -------------------------------------------------------------------- */

static int f_open(const char *path, int flags)
{
        char want[300];
        for (int d = 0; d < NDEV; d++) {
                snprintf(want, sizeof(want), "%s/dev/ntbfab-ntb%d", root, d);
                if (strcmp(path, want))
                        continue;
                bool w = (flags & O_ACCMODE) != O_RDONLY;
                if (w && dev[d].owned) {
                        errno = EBUSY;
                        return -1;
                }
                struct ffile *f = new_file(F_DEV, d);
                f->owner = w;
                if (w) {
                        dev[d].owned = true;
                        char p[300];
                        snprintf(p, sizeof(p), "%s/sys/class/misc/ntbfab-ntb%d/owner_pid", root, d);
                        FILE *o = fopen(p, "w");
                        fprintf(o, "%d\n", (int)getpid());
                        fclose(o);
                }
                return f->fd;
        }
        errno = ENOENT;
        return -1;
}

static int f_close(int fd)
{
        for (int i = 0; i < MAXF; i++)
                if (files[i] && files[i]->fd == fd) {
                        struct ffile *f = files[i];
                        files[i] = NULL;
                        if (f->kind == F_DEV && f->owner)
                                undo_owner(f->dev);
                        close(f->fd);
                        free(f);
                        return 0;
                }
        return close(fd);
}

static ssize_t f_read(int fd, void *buf, size_t len)
{
        struct ffile *f = file_of(fd);
        if (!f || f->kind != F_DEV || len < sizeof(struct ntbfab_event)) {
                errno = EINVAL;
                return -1;
        }
        if (!f->count) {
                errno = EAGAIN;
                return -1;
        }
        size_t n = 0, max = len / sizeof(struct ntbfab_event);
        struct ntbfab_event *ev = buf;
        while (n < max && f->count) {
                ev[n++] = f->q[f->head];
                f->head = (f->head + 1) % QLEN;
                f->count--;
        }
        if (!f->count) {
                uint64_t c;
                if (read(f->fd, &c, sizeof(c)) < 0 && errno != EAGAIN)
                        abort();
        }
        return (ssize_t)(n * sizeof(*ev));
}

static struct fbuf *buf_of(int fd)
{
        struct stat st;
        if (fstat(fd, &st))
                return NULL;
        for (int i = 0; i < MAXBUF; i++)
                if (bufs[i].used && bufs[i].ino == st.st_ino)
                        return &bufs[i];
        return NULL;
}

/* What a CPU reaches through device d's outbound window widx at woff: the peer's buffer. */
static void *map_window(int d, uint32_t widx, uint64_t woff, void *addr, size_t len, int prot,
                        int flags)
{
        const struct ftrans *t = &dev[d ^ 1].trans[widx];
        int fixed = flags & MAP_FIXED;
        /* Nothing translated, the link down, or past the translation's size: reads all
         * ones (writes land in a private page, lost). */
        uint8_t *p =
            mmap(addr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | fixed, -1, 0);
        if (p == MAP_FAILED)
                return p;
        memset(p, 0xff, len);
        mprotect(p, len, prot);
        /* The translated part: the buffer. */
        if (up_now() && t->buf >= 0 && woff < t->size) {
                size_t n = t->size - woff < len ? (size_t)(t->size - woff) : len;
                if (mmap(p, n, prot, MAP_SHARED | MAP_FIXED, bufs[t->buf].fd,
                         (off_t)(t->off + woff)) == MAP_FAILED) {
                        munmap(p, len);
                        return MAP_FAILED;
                }
        }
        return p;
}

/*
 * The window mappings made, so that they follow their windows as a mapping of a real BAR
 * does: a translation set or cleared, or the link going down or up, maps each again in place
 * (what a store or load through it reaches then).
 */
struct fmap {
        void *va;
        size_t len;
        int prot, dev;
        uint32_t widx;
        uint64_t woff;
};
#define MAXMAP 512
static struct fmap maps[MAXMAP];

static void *mapped(void *va, int d, uint32_t widx, uint64_t woff, size_t len, int prot)
{
        if (va == MAP_FAILED)
                return va;
        for (int i = 0; i < MAXMAP; i++)
                if (!maps[i].va) {
                        maps[i] = (struct fmap){va, len, prot, d, widx, woff};
                        return va;
                }
        abort();
}

static void remap_all(void)
{
        for (int i = 0; i < MAXMAP; i++)
                if (maps[i].va && map_window(maps[i].dev, maps[i].widx, maps[i].woff, maps[i].va,
                                             maps[i].len, maps[i].prot, MAP_FIXED) == MAP_FAILED)
                        abort();
}

static int f_munmap(void *addr, size_t len)
{
        uint8_t *a = addr;
        for (int i = 0; i < MAXMAP; i++)
                if (maps[i].va && (uint8_t *)maps[i].va >= a && (uint8_t *)maps[i].va < a + len)
                        maps[i].va = NULL;
        return munmap(addr, len);
}

static void *f_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
        struct ffile *f = fd >= 0 ? file_of(fd) : NULL;
        if (!f)
                return mmap(addr, len, prot, flags, fd, off); /* anonymous, or a buffer */
        uint64_t o = (uint64_t)off;
        if (f->kind == F_DEV) {
                if (!f->owner) {
                        errno = EACCES;
                        return MAP_FAILED;
                }
                uint32_t widx = (uint32_t)(o >> NTBFAB_MMAP_MW_SHIFT);
                uint64_t woff = o & ((UINT64_C(1) << NTBFAB_MMAP_MW_SHIFT) - 1);
                if (widx >= lay.nmw || woff + len > lay.win_size) {
                        errno = EINVAL;
                        return MAP_FAILED;
                }
                return mapped(map_window(f->dev, widx, woff, addr, len, prot, flags), f->dev, widx,
                              woff, len, prot);
        }
        if (f->gen != dev[f->dev].gen || !dev[f->dev].owned) {
                errno = ENODEV;
                return MAP_FAILED;
        }
        if (o + len > f->wsize) {
                errno = EINVAL;
                return MAP_FAILED;
        }
        return mapped(map_window(f->dev, f->widx, f->woff + o, addr, len, prot, flags), f->dev,
                      f->widx, f->woff + o, len, prot);
}

static int f_dup(int fd)
{
        if (file_of(fd))
                abort(); /* the backend never duplicates a device's descriptor */
        return dup(fd);
}

/* ---- ioctls ---------------------------------------------------------------------------------- */

static int ioc_owner(struct ffile *f, unsigned long req)
{
        switch (req) {
        case NTBFAB_IOC_VERSION:
        case NTBFAB_IOC_INFO:
        case NTBFAB_IOC_PEER_INFO:
        case NTBFAB_IOC_MW_INFO:
        case NTBFAB_IOC_PEER_MW_INFO:
        case NTBFAB_IOC_STATE:
        case NTBFAB_IOC_LINK_STATUS:
        case NTBFAB_IOC_DB_READ:
        case NTBFAB_IOC_DB_READ_MASK:
        case NTBFAB_IOC_SPAD_READ:
        case NTBFAB_IOC_MSG_STATUS:
        case NTBFAB_IOC_MSG_READ:
                return 0;
        }
        return f->owner ? 0 : -EPERM;
}

static int ioc_buf_alloc(int d, struct ntbfab_buf_alloc *a)
{
        uint64_t size = (a->size + PAGE - 1) & ~(PAGE - 1), al = PAGE;
        while (al < size)
                al <<= 1;
        for (int i = 0; i < MAXBUF; i++) {
                if (bufs[i].used)
                        continue;
                int fd = memfd_create("fake-ntb-buf", MFD_CLOEXEC);
                if (fd < 0 || ftruncate(fd, (off_t)size))
                        abort();
                struct stat st;
                fstat(fd, &st);
                uint64_t dma = (dev[d].next_dma + al - 1) & ~(al - 1);
                dev[d].next_dma = dma + size;
                /* The fake keeps its own descriptor: the caller may close its own. */
                bufs[i] = (struct fbuf){true, d, st.st_ino, dup(fd), dma, size};
                a->fd = fd;
                a->size = size;
                a->dma_addr = dma;
                a->id = (uint32_t)i + 1;
                return 0;
        }
        return -ENOMEM;
}

static int ioc_trans(int d, struct ntbfab_mw_trans *t)
{
        if (t->flags || t->pidx || t->widx >= lay.nmw || !t->size)
                return -EINVAL;
        struct fbuf *b = buf_of(t->buf_fd);
        if (!b || b->dev != d)
                return -EINVAL;
        uint64_t addr = b->dma + t->offset;
        if (t->offset > b->size || t->size > b->size - t->offset || addr % lay.win_size ||
            t->size % PAGE || t->size > lay.win_size)
                return -EINVAL;
        dev[d].trans[t->widx] = (struct ftrans){(int)(b - bufs), t->offset, t->size};
        return 0;
}

static int ioc_bits(int d, unsigned long req, struct ntbfab_bits *b)
{
        struct fdev *v = &dev[d], *p = &dev[d ^ 1];
        switch (req) {
        case NTBFAB_IOC_DB_READ:
                b->bits = v->db_pending;
                return 0;
        case NTBFAB_IOC_DB_READ_MASK:
                b->bits = v->db_mask;
                return 0;
        case NTBFAB_IOC_MSG_STATUS:
                b->bits = v->msg_sts;
                return 0;
        }
        bool msg = req == NTBFAB_IOC_MSG_CLEAR || req == NTBFAB_IOC_MSG_MASK ||
                   req == NTBFAB_IOC_MSG_UNMASK;
        if (b->flags || b->reserved || (b->bits & ~(msg ? UINT64_C(0xff) : FAKE_DB_VALID)))
                return -EINVAL;
        switch (req) {
        case NTBFAB_IOC_DB_CLEAR:
                v->db_pending &= ~b->bits;
                return 0;
        case NTBFAB_IOC_DB_MASK:
                v->db_mask |= b->bits;
                return 0;
        case NTBFAB_IOC_DB_UNMASK:
                v->db_mask &= ~b->bits; /* raises nothing: the backend must */
                return 0;
        case NTBFAB_IOC_PEER_DB_SET:
                if (!up_now())
                        return 0; /* lost, as on a down link */
                p->db_pending |= b->bits;
                for (unsigned i = 0; i < 4; i++)
                        if ((b->bits >> i) & 1 && !((p->db_mask >> i) & 1))
                                deliver(d ^ 1, NTBFAB_EVENT_DB, i, UINT64_C(1) << i);
                return 0;
        case NTBFAB_IOC_MSG_CLEAR:
                v->msg_sts &= ~b->bits;
                return 0;
        case NTBFAB_IOC_MSG_MASK:
                v->msg_mask |= b->bits;
                return 0;
        case NTBFAB_IOC_MSG_UNMASK:
                v->msg_mask &= ~b->bits;
                return 0;
        }
        return -ENOTTY;
}

static int ioc(struct ffile *f, unsigned long req, void *arg)
{
        int d = f->dev;
        struct fdev *v = &dev[d];
        if (f->kind != F_DEV)
                return -ENOTTY;
        int r = ioc_owner(f, req);
        if (r)
                return r;
        switch (req) {
        case NTBFAB_IOC_VERSION:
                *(struct ntbfab_version *)arg =
                    (struct ntbfab_version){NTBFAB_NTB_VERSION, 0, sizeof(struct ntbfab_event), 0};
                return 0;
        case NTBFAB_IOC_INFO: {
                struct ntbfab_info *i = arg;
                memset(i, 0, sizeof(*i));
                i->flags =
                    NTBFAB_INFO_MW_SET_TRANS | NTBFAB_INFO_PEER_SPAD_READ | NTBFAB_INFO_MSG_MASK;
                i->port = d;
                i->peer_count = 1;
                i->topology = d ? NTBFAB_TOPO_B2B_DSD : NTBFAB_TOPO_B2B_USD;
                i->peer_mw_count = lay.nmw;
                i->db_vector_count = 4;
                i->db_valid_mask = FAKE_DB_VALID;
                i->spad_count = FAKE_SPADS;
                i->msg_count = FAKE_MSGS;
                i->msg_inbits = 0xf;
                i->msg_outbits = 0xf0;
                i->minor = (uint32_t)d;
                snprintf(i->ntb_name, sizeof(i->ntb_name), "0000:00:0%d.0", 3 + d);
                snprintf(i->driver, sizeof(i->driver), "ntb_hw_fake");
                return 0;
        }
        case NTBFAB_IOC_MW_INFO: {
                struct ntbfab_mw_info *m = arg;
                if (m->pidx || m->widx >= lay.nmw || m->flags)
                        return -EINVAL;
                const struct ftrans *t = &v->trans[m->widx];
                *m = (struct ntbfab_mw_info){.pidx = 0, .widx = m->widx};
                if (up_now()) {
                        m->flags |= NTBFAB_MW_ALIGN_VALID;
                        m->addr_align = lay.win_size;
                        m->size_align = PAGE;
                        m->size_max = lay.win_size;
                }
                if (t->buf >= 0) {
                        m->flags |= NTBFAB_MW_TRANS_SET;
                        m->trans_addr = bufs[t->buf].dma + t->off;
                        m->trans_size = t->size;
                }
                return 0;
        }
        case NTBFAB_IOC_PEER_MW_INFO: {
                struct ntbfab_peer_mw_info *m = arg;
                if (m->widx >= lay.nmw)
                        return -EINVAL;
                uint32_t w = m->widx;
                *m = (struct ntbfab_peer_mw_info){
                    .widx = w,
                    .phys_addr = lay.base + lay.dev_stride * (uint64_t)d + lay.stride * w,
                    .size = lay.win_size,
                    .mmap_offset = (uint64_t)w << NTBFAB_MMAP_MW_SHIFT};
                return 0;
        }
        case NTBFAB_IOC_STATE: {
                struct ntbfab_state *s = arg;
                memset(s, 0, sizeof(*s));
                s->flags = (v->owned ? NTBFAB_STATE_OWNED : 0) |
                           (v->link_en ? NTBFAB_STATE_LINK_ENABLED : 0);
                s->owner_pid = v->owned ? (uint32_t)getpid() : 0;
                for (int w = 0; w < (int)lay.nmw; w++)
                        s->mw_trans += v->trans[w].buf >= 0;
                s->db_mask = v->db_mask;
                return 0;
        }
        case NTBFAB_IOC_LINK_STATUS: {
                struct ntbfab_link *l = arg;
                bool up = up_now();
                *l = (struct ntbfab_link){up ? 1 : 0, up ? 3 : 0, up ? 4 : 0,
                                          v->link_en ? NTBFAB_LINK_ENABLED : 0, 0};
                return 0;
        }
        case NTBFAB_IOC_LINK_ENABLE:
        case NTBFAB_IOC_LINK_DISABLE: {
                bool was = up_now();
                v->link_en = req == NTBFAB_IOC_LINK_ENABLE;
                link_changed(was);
                return 0;
        }
        case NTBFAB_IOC_BUF_ALLOC:
                return ioc_buf_alloc(d, arg);
        case NTBFAB_IOC_MW_SET_TRANS: {
                int rt = ioc_trans(d, arg);
                remap_all();
                return rt;
        }
        case NTBFAB_IOC_MW_CLEAR_TRANS: {
                struct ntbfab_mw_ref *m = arg;
                if (m->pidx || m->widx >= lay.nmw)
                        return -EINVAL;
                v->trans[m->widx].buf = -1;
                remap_all();
                return 0;
        }
        case NTBFAB_IOC_PEER_MW_SET_TRANS:
                return -EOPNOTSUPP;
        case NTBFAB_IOC_PEER_MW_FD: {
                struct ntbfab_peer_mw_fd *m = arg;
                if (m->widx >= lay.nmw || !m->size || (m->offset | m->size) % PAGE ||
                    m->offset + m->size > lay.win_size)
                        return -EINVAL;
                struct ffile *w = new_file(F_WIN, d);
                w->widx = m->widx;
                w->woff = m->offset;
                w->wsize = m->size;
                w->gen = v->gen;
                m->fd = w->fd;
                return 0;
        }
        case NTBFAB_IOC_SPAD_READ:
        case NTBFAB_IOC_SPAD_WRITE: {
                struct ntbfab_spad *s = arg;
                if ((s->flags & ~NTBFAB_SPAD_PEER) || s->sidx >= FAKE_SPADS || s->pidx)
                        return -EINVAL;
                uint32_t *reg = &dev[(s->flags & NTBFAB_SPAD_PEER) ? d ^ 1 : d].spad[s->sidx];
                if (req == NTBFAB_IOC_SPAD_READ)
                        s->value = *reg;
                else
                        *reg = s->value;
                return 0;
        }
        case NTBFAB_IOC_MSG_READ: {
                struct ntbfab_msg *m = arg;
                if (m->midx >= FAKE_MSGS || m->pidx || m->flags)
                        return -EINVAL;
                m->value = v->msg[m->midx];
                m->pidx = 0;
                return 0;
        }
        case NTBFAB_IOC_MSG_WRITE: {
                struct ntbfab_msg *m = arg;
                struct fdev *p = &dev[d ^ 1];
                if (m->midx >= FAKE_MSGS || m->pidx || m->flags)
                        return -EINVAL;
                if ((p->msg_sts >> m->midx) & 1)
                        return -EBUSY;
                p->msg[m->midx] = m->value;
                p->msg_sts |= UINT64_C(1) << m->midx;
                if (!((p->msg_mask >> m->midx) & 1))
                        deliver(d ^ 1, NTBFAB_EVENT_MSG, 0, p->msg_sts);
                return 0;
        }
        default:
                return ioc_bits(d, req, arg);
        }
}

static int f_ioctl(int fd, unsigned long req, void *arg)
{
        struct ffile *f = file_of(fd);
        int r;
        if (fail_count && req == fail_req) {
                r = -fail_err;
                fail_count--;
        } else {
                r = f ? ioc(f, req, arg) : -ENOTTY;
        }
        if (r) {
                errno = -r;
                return -1;
        }
        return 0;
}

static const struct lntb_sys fake_sys = {
    .root = root,
    .open = f_open,
    .close = f_close,
    .ioctl = f_ioctl,
    .mmap = f_mmap,
    .munmap = f_munmap,
    .read = f_read,
    .dup = f_dup,
};

/* ---- setup ------------------------------------------------------------------------------------
 */

static void put(const char *rel, const char *text)
{
        char p[400];
        snprintf(p, sizeof(p), "%s/%s", root, rel);
        FILE *f = fopen(p, "w");
        if (!f)
                abort();
        fputs(text, f);
        fclose(f);
}

static void mkdirs(const char *rel)
{
        char p[400];
        snprintf(p, sizeof(p), "%s/%s", root, rel);
        for (char *s = p + strlen(root) + 1; *s; s++)
                if (*s == '/') {
                        *s = 0;
                        mkdir(p, 0700);
                        *s = '/';
                }
        mkdir(p, 0700);
}

const struct lntb_sys *fake_ntb_init(void)
{
        snprintf(root, sizeof(root), "/tmp/fake-ntbdev-XXXXXX");
        if (!mkdtemp(root))
                abort();
        memset(dev, 0, sizeof(dev));
        memset(bufs, 0, sizeof(bufs));
        memset(maps, 0, sizeof(maps));
        hw_link = true;
        fail_count = 0;
        for (int d = 0; d < NDEV; d++) {
                char rel[128], text[32];
                snprintf(rel, sizeof(rel), "sys/class/misc/ntbfab-ntb%d", d);
                mkdirs(rel);
                snprintf(rel, sizeof(rel), "sys/class/misc/ntbfab-ntb%d/pci_dev", d);
                snprintf(text, sizeof(text), "0000:00:0%d.0\n", 3 + d);
                put(rel, text);
                snprintf(rel, sizeof(rel), "sys/class/misc/ntbfab-ntb%d/owner_pid", d);
                put(rel, "0\n");
                dev[d].db_mask = FAKE_DB_VALID;
                dev[d].msg_mask = 0xff;
                dev[d].next_dma = UINT64_C(0x10000000) * (uint64_t)(d + 1);
                for (int w = 0; w < (int)lay.nmw; w++)
                        dev[d].trans[w].buf = -1;
        }
        mkdirs("dev");
        return &fake_sys;
}

void fake_ntb_fini(void)
{
        for (int i = 0; i < MAXF; i++)
                if (files[i])
                        abort(); /* a descriptor the backend did not close */
        for (int i = 0; i < MAXBUF; i++)
                if (bufs[i].used)
                        close(bufs[i].fd);
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        if (system(cmd))
                abort();
}

void fake_ntb_link(bool up)
{
        bool was = up_now();
        hw_link = up;
        link_changed(was);
}

void fake_ntb_counts(unsigned d, struct fake_counts *c)
{
        memset(c, 0, sizeof(*c));
        for (int i = 0; i < MAXF; i++)
                if (files[i] && files[i]->dev == (int)d && files[i]->kind == F_DEV) {
                        c->opens++;
                        c->owners += files[i]->owner;
                }
        for (int i = 0; i < MAXBUF; i++)
                c->bufs += bufs[i].used && bufs[i].dev == (int)d;
        for (int w = 0; w < (int)lay.nmw; w++)
                c->trans += dev[d].trans[w].buf >= 0;
}

uint64_t fake_ntb_trans(unsigned d, unsigned widx, uint64_t *size)
{
        const struct ftrans *t = &dev[d].trans[widx];
        if (size)
                *size = t->buf >= 0 ? t->size : 0;
        return t->buf >= 0 ? bufs[t->buf].dma + t->off : 0;
}

void fake_ntb_fail(unsigned long req, int err, unsigned count)
{
        fail_req = req;
        fail_err = err;
        fail_count = count;
}
