/* backends/switchtec/gas.c: the GAS through a mapping or MRPC, the partition op protocol and
 * its error registers. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "gas.h"

/* ---- opening ------------------------------------------------------------------------------ */

/* The model's MRPC end is a Unix seqpacket socket: connect instead of open. */
static int open_mrpc(const char *path)
{
        struct stat st;
        if (stat(path, &st))
                return -errno;
        if (!S_ISSOCK(st.st_mode)) {
                int fd = open(path, O_RDWR | O_CLOEXEC);
                return fd < 0 ? -errno : fd;
        }
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof(a.sun_path))
                return -ENAMETOOLONG;
        strcpy(a.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
                int e = -errno;
                close(fd);
                return e;
        }
        return fd;
}

int stx_gas_open(struct stx_gas *g, const char *path, bool mrpc, char *why, size_t whylen)
{
        memset(g, 0, sizeof(*g));
        g->fd = -1;
        snprintf(g->path, sizeof(g->path), "%s", path);
        if (mrpc) {
                int fd = open_mrpc(path);
                if (fd < 0) {
                        snprintf(why, whylen,
                                 "cannot open the switch's management device %s: %s (is the "
                                 "switchtec driver loaded, and is this process root? MRPC GAS "
                                 "access needs CAP_SYS_ADMIN)",
                                 path, strerror(-fd));
                        return fd;
                }
                g->fd = fd;
                g->mrpc = true;
                g->size = STX_GAS_SIZE;
                return 0;
        }
        int fd = open(path, O_RDWR | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st)) {
                int e = -errno;
                snprintf(why, whylen,
                         "cannot open the switch's register space %s: %s (sysfs resource0 of the "
                         "management function needs root; or set gas: mrpc in the adapter's "
                         "switchtec: to go through /dev/switchtecN)",
                         path, strerror(-e));
                if (fd >= 0)
                        close(fd);
                return e;
        }
        if ((uint64_t)st.st_size < STX_GAS_SIZE) {
                snprintf(why, whylen,
                         "%s holds %lld bytes, less than the %llu of a Switchtec GAS up to its "
                         "NTB registers; is it BAR0 (resource0) of the switch's management "
                         "function?",
                         path, (long long)st.st_size, (unsigned long long)STX_GAS_SIZE);
                close(fd);
                return -EINVAL;
        }
        void *m = mmap(NULL, STX_GAS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
                int e = -errno;
                snprintf(why, whylen, "cannot map %s: %s", path, strerror(-e));
                close(fd);
                return e;
        }
        g->fd = fd;
        g->map = m;
        g->size = STX_GAS_SIZE;
        return 0;
}

void stx_gas_over(struct stx_gas *g, void *mem, uint64_t size)
{
        memset(g, 0, sizeof(*g));
        g->fd = -1;
        g->map = mem;
        g->size = size;
        snprintf(g->path, sizeof(g->path), "(memory)");
}

void stx_gas_close(struct stx_gas *g)
{
        if (g->map && g->fd >= 0)
                munmap((void *)g->map, g->size);
        if (g->fd >= 0)
                close(g->fd);
        g->map = NULL;
        g->fd = -1;
}

/* ---- MRPC --------------------------------------------------------------------------------- */

int stx_mrpc_cmd(int fd, uint32_t cmd, const void *in, size_t inlen, void *out, size_t outlen,
                 uint32_t *ret)
{
        uint8_t buf[4 + STX_MRPC_PAYLOAD];
        if (inlen > STX_MRPC_PAYLOAD || outlen > STX_MRPC_PAYLOAD)
                return -EINVAL;
        buf[0] = (uint8_t)cmd;
        buf[1] = (uint8_t)(cmd >> 8);
        buf[2] = (uint8_t)(cmd >> 16);
        buf[3] = (uint8_t)(cmd >> 24);
        if (inlen)
                memcpy(buf + 4, in, inlen);
        ssize_t n;
        do
                n = write(fd, buf, 4 + inlen);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        if ((size_t)n != 4 + inlen)
                return -EIO;
        do
                n = read(fd, buf, 4 + outlen);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        if ((size_t)n < 4 + outlen)
                return -EIO;
        *ret = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 |
               (uint32_t)buf[3] << 24;
        if (outlen)
                memcpy(out, buf + 4, outlen);
        return 0;
}

static void put32(uint8_t *p, uint32_t v)
{
        for (int i = 0; i < 4; i++)
                p[i] = (uint8_t)(v >> 8 * i);
}

static void mrpc_read(struct stx_gas *g, uint64_t off, void *out, uint32_t len)
{
        uint8_t in[8];
        uint32_t ret = 0;
        put32(in, (uint32_t)off);
        put32(in + 4, len);
        int r = stx_mrpc_cmd(g->fd, STX_MRPC_GAS_READ, in, sizeof(in), out, len, &ret);
        if (!r && ret)
                r = -EIO;
        if (r) {
                memset(out, 0xff, len); /* what a failed read of a device returns */
                if (!g->err)
                        g->err = r;
        }
}

static void mrpc_write(struct stx_gas *g, uint64_t off, const void *data, uint32_t len)
{
        uint8_t in[8 + 8];
        uint32_t ret = 0;
        put32(in, (uint32_t)off);
        put32(in + 4, len);
        memcpy(in + 8, data, len);
        int r = stx_mrpc_cmd(g->fd, STX_MRPC_GAS_WRITE, in, 8 + len, NULL, 0, &ret);
        if (!r && ret)
                r = -EIO;
        if (r && !g->err)
                g->err = r;
}

int stx_gas_take_err(struct stx_gas *g)
{
        int e = g->err;
        g->err = 0;
        return e;
}

/* ---- loads and stores --------------------------------------------------------------------- */

/* Little-endian hosts only (x86, arm64 as Linux runs them): registers are stored as is. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the GAS is little-endian");

#define LOAD(T, g, off)                                                                            \
        do {                                                                                       \
                T v;                                                                               \
                if ((g)->mrpc) {                                                                   \
                        mrpc_read((g), (off), &v, sizeof(v));                                      \
                        return v;                                                                  \
                }                                                                                  \
                atomic_thread_fence(memory_order_seq_cst);                                         \
                v = *(volatile T *)((g)->map + (off));                                             \
                return v;                                                                          \
        } while (0)

uint8_t stx_rd8(struct stx_gas *g, uint64_t off)
{
        LOAD(uint8_t, g, off);
}

uint16_t stx_rd16(struct stx_gas *g, uint64_t off)
{
        LOAD(uint16_t, g, off);
}

uint32_t stx_rd32(struct stx_gas *g, uint64_t off)
{
        LOAD(uint32_t, g, off);
}

/* A 64-bit register at an offset that is not a multiple of 8 (ep_map, in the packed NTB info
 * block) is read as two 32-bit loads, low half first, as ioread64 does on such registers. */
uint64_t stx_rd64(struct stx_gas *g, uint64_t off)
{
        if (off & 7)
                return stx_rd32(g, off) | (uint64_t)stx_rd32(g, off + 4) << 32;
        LOAD(uint64_t, g, off);
}

void stx_wr32(struct stx_gas *g, uint64_t off, uint32_t v)
{
        if (g->mrpc) {
                mrpc_write(g, off, &v, sizeof(v));
        } else {
                *(volatile uint32_t *)(g->map + off) = v;
                atomic_thread_fence(memory_order_seq_cst);
        }
        if (g->hook)
                g->hook(g->hook_ctx, g, off, v, 4);
}

void stx_wr64(struct stx_gas *g, uint64_t off, uint64_t v)
{
        if (g->mrpc) {
                mrpc_write(g, off, &v, sizeof(v));
        } else if (off & 7) {
                *(volatile uint32_t *)(g->map + off) = (uint32_t)v;
                *(volatile uint32_t *)(g->map + off + 4) = (uint32_t)(v >> 32);
                atomic_thread_fence(memory_order_seq_cst);
        } else {
                *(volatile uint64_t *)(g->map + off) = v;
                atomic_thread_fence(memory_order_seq_cst);
        }
        if (g->hook)
                g->hook(g->hook_ctx, g, off, v, 8);
}

/* ---- the partition op protocol ------------------------------------------------------------ */

const char *stx_status_name(uint32_t st, char *buf, size_t len)
{
        static const char *const names[] = {NULL,      "NORMAL",      "LOCKED",
                                            "LOCKING", "CONFIGURING", "RESETTING"};
        if (st < sizeof(names) / sizeof(names[0]) && names[st])
                snprintf(buf, len, "%s", names[st]);
        else
                snprintf(buf, len, "0x%x", st);
        return buf;
}

static void sleep_us(uint32_t us)
{
        struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
        while (nanosleep(&ts, &ts) && errno == EINTR)
                ;
}

int stx_part_op(struct stx_gas *g, uint32_t part, enum stx_part_op op, const struct stx_timing *tm,
                char *why, size_t whylen)
{
        static const char *const verbs[] = {NULL, "lock", "configure", "reset"};
        /* The status the op leaves from, passes through and arrives at. */
        uint32_t from = op == STX_OP_LOCK ? STX_ST_NORMAL : STX_ST_LOCKED;
        uint32_t through = op == STX_OP_LOCK  ? STX_ST_LOCKING
                           : op == STX_OP_CFG ? STX_ST_CONFIGURING
                                              : STX_ST_RESETTING;
        uint32_t to = op == STX_OP_LOCK ? STX_ST_LOCKED : STX_ST_NORMAL;
        uint64_t base = STX_CTRL(part);
        char s1[16], s2[16];
        stx_gas_take_err(g);
        stx_wr32(g, base + STX_PART_OP, op);
        uint32_t st = 0;
        for (uint32_t i = 0; i <= tm->polls; i++) {
                st = stx_rd32(g, base + STX_PART_STATUS);
                int e = stx_gas_take_err(g);
                if (e) {
                        snprintf(why, whylen,
                                 "partition %u: cannot %s it: the MRPC access to the switch "
                                 "failed: %s",
                                 part, verbs[op], strerror(-e));
                        return e;
                }
                if (st == to)
                        return 0;
                if (st != from && st != through)
                        break;
                if (i < tm->polls)
                        sleep_us(tm->poll_us);
        }
        if (st == from || st == through) {
                unsigned long long ms = (unsigned long long)tm->polls * tm->poll_us / 1000;
                snprintf(why, whylen,
                         "partition %u did not %s: its status is still %s after %u polls "
                         "(%llu ms); %s",
                         part, verbs[op], stx_status_name(st, s1, sizeof(s1)), tm->polls, ms,
                         op == STX_OP_LOCK
                             ? "another program may be configuring it, or the switch's "
                               "firmware is busy; nothing was changed, try again"
                             : "the edits were taken back in the registers; check the "
                               "partition with `ntbfab switchtec status` once it settles");
                return -ETIMEDOUT;
        }
        snprintf(why, whylen,
                 "partition %u: status %s while waiting for %s after a %s; another program is "
                 "configuring it, or it was reset",
                 part, stx_status_name(st, s1, sizeof(s1)), stx_status_name(to, s2, sizeof(s2)),
                 verbs[op]);
        return -EIO;
}

/* ---- error registers ---------------------------------------------------------------------- */

/*
 * A code is read as (reason << 16) | index: the one public example, bar_error 0x00030002
 * ("LUT window exceeds BAR size" for the driver's BAR 2, switchtec-kernel#109), reads so.
 * Reasons other than that one are the register model's (docs/switchtec.md): the sentences
 * say so, and the first run on real hardware checks them.
 */
const char *stx_error_sentence(int kind, uint32_t code, char *buf, size_t len)
{
        uint32_t reason = code >> 16, idx = code & 0xffff;
        const char *what = NULL, *fix = NULL;
        bool doc = false;
        switch (kind) {
        case STX_ERR_BAR:
                switch (reason) {
                case 1:
                        what = "its direct window does not sit at an offset of its size in BAR";
                        fix = "make the direct window at most as large as the LUT window before "
                              "it";
                        break;
                case 2:
                        what = "its LUT entry size is not a power of two of 4 KiB or more "
                               "fitting BAR";
                        fix = "use LUT entries of 4 KiB to the BAR's size";
                        break;
                case 3:
                        what = "the LUT window exceeds the size of BAR";
                        fix = "use fewer or smaller LUT entries, or give the BAR more space in "
                              "the switch's configuration file";
                        doc = true;
                        break;
                case 4:
                        what = "it asks for more LUT entries than the partition has, in BAR";
                        fix = "use at most lut_table_entries (ntbfab switchtec status)";
                        break;
                case 5:
                        what = "the LUT and direct windows together exceed the size of BAR";
                        fix = "shrink the direct window";
                        break;
                }
                break;
        case STX_ERR_LUT:
                switch (reason) {
                case 1:
                        what = "its target address is not aligned to the entry size, in LUT "
                               "entry";
                        fix = "align the target to the LUT entry size";
                        break;
                case 2:
                        what = "its destination partition has no NT endpoint, in LUT entry";
                        fix = "check the partition numbers in the cluster file's switchtec: "
                              "against ep_map (ntbfab switchtec status)";
                        break;
                case 3:
                        what = "it lies beyond the LUT entries the BAR setup gives, LUT entry";
                        fix = "program entries below the BAR's LUT count";
                        break;
                }
                break;
        case STX_ERR_RID:
                switch (reason) {
                case 1:
                        what = "the same requester ID is enabled twice, in entry";
                        fix = "delete the duplicate entry";
                        break;
                case 2:
                        what = "the switch has no proxy ID left for entry";
                        fix = "delete requester entries of this partition";
                        break;
                case 3:
                        what = "it lies beyond req_id_table_size, entry";
                        fix = "use entries below req_id_table_size (ntbfab switchtec status)";
                        break;
                }
                break;
        }
        static const char *const reg[] = {"bar_error", "lut_error", "req_id_error"};
        if (!what)
                snprintf(buf, len,
                         "%s 0x%08x: a code this backend cannot explain (Microchip does not "
                         "publish them; read as reason %u for index %u); see the switch's event "
                         "log (switchtec log-dump)",
                         reg[kind], code, reason, idx);
        else
                snprintf(buf, len, "%s 0x%08x: %s %u (%s); %s", reg[kind], code, what, idx,
                         doc ? "documented" : "as the register model defines it", fix);
        return buf;
}

bool stx_part_errors(struct stx_gas *g, uint32_t part, char *why, size_t whylen)
{
        static const uint64_t regs[] = {STX_BAR_ERROR, STX_LUT_ERROR, STX_RID_ERROR};
        size_t o = 0;
        bool any = false;
        why[0] = 0;
        for (int k = 0; k < 3; k++) {
                uint32_t code = stx_rd32(g, STX_CTRL(part) + regs[k]);
                if (!code)
                        continue;
                char s[400];
                stx_error_sentence(k, code, s, sizeof(s));
                if (o < whylen)
                        o += (size_t)snprintf(why + o, whylen - o, "%s%s", any ? "; " : "", s);
                any = true;
        }
        return any;
}
