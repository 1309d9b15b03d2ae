/* tests/switchtec/model.c: the register model of a Switchtec switch's NT partitions. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model.h"

struct stxm {
        uint8_t *gas;
        /* Per partition: the transition under way (its final status, 0: none), ticks left. */
        uint32_t to[STX_MAX_PARTS], left[STX_MAX_PARTS];
        uint8_t op[STX_MAX_PARTS];
        int conns[8];
};

static uint32_t r32(struct stxm *m, uint64_t off)
{
        return __atomic_load_n((uint32_t *)(m->gas + off), __ATOMIC_ACQUIRE);
}

static uint64_t r64(struct stxm *m, uint64_t off)
{
        if (off & 7) /* ep_map: the packed info block */
                return r32(m, off) | (uint64_t)r32(m, off + 4) << 32;
        return __atomic_load_n((uint64_t *)(m->gas + off), __ATOMIC_ACQUIRE);
}

static void w32(struct stxm *m, uint64_t off, uint32_t v)
{
        __atomic_store_n((uint32_t *)(m->gas + off), v, __ATOMIC_RELEASE);
}

static void w16(uint8_t *gas, uint64_t off, uint16_t v)
{
        memcpy(gas + off, &v, 2);
}

void stxm_format(uint8_t *gas, const struct stxm_params *p)
{
        uint64_t magic = STXM_MAGIC_VAL;
        memcpy(gas + STXM_MAGIC, &magic, 8);
        uint32_t one = 1, proxies = 32;
        memcpy(gas + STXM_OP_TICKS, &one, 4);
        memcpy(gas + STXM_PROXIES, &proxies, 4);
        for (int b = 0; b < 6; b++)
                memcpy(gas + STXM_BAR_SIZE(b), &p->bar_size, 8);
        memcpy(gas + STX_SYS_PRODUCT_ID, "PFX-MODEL       ", STX_SYS_PRODUCT_LEN);
        gas[STX_NTB_PART_COUNT] = (uint8_t)__builtin_popcountll(p->ep_map);
        gas[STX_NTB_PART_ID] = (uint8_t)p->partition_id;
        memcpy(gas + STX_NTB_EP_MAP, &p->ep_map, 8);
        w16(gas, STX_NTB_REQ_ID, p->host_rid);
        if (p->xlink_part) {
                uint32_t lo = (uint32_t)(UINT64_C(1) << p->xlink_part),
                         hi = (uint32_t)((UINT64_C(1) << p->xlink_part) >> 32);
                memcpy(gas + STX_NTB_XLINK(p->partition_id), &one, 4);
                memcpy(gas + STX_NTB_XLINK_LOW(p->partition_id), &lo, 4);
                memcpy(gas + STX_NTB_XLINK_HIGH(p->partition_id), &hi, 4);
        }
        for (uint32_t q = 0; q < STX_MAX_PARTS; q++) {
                if (!(p->ep_map >> q & 1))
                        continue;
                uint64_t c = STX_CTRL(q);
                uint32_t st = STX_ST_NORMAL;
                memcpy(gas + c + STX_PART_STATUS, &st, 4);
                w16(gas, c + STX_LUT_ENTRIES, p->lut_entries);
                w16(gas, c + STX_RID_SIZE, p->rid_size);
                /* What ntb_hw_switchtec registers at probe: 00:00.0 and the host bridge. */
                uint32_t e0 = stx_rid_entry(0) | 1u << 1, e1 = stx_rid_entry(p->host_rid) | 2u << 1;
                memcpy(gas + c + STX_RID_ENTRY(0), &e0, 4);
                memcpy(gas + c + STX_RID_ENTRY(1), &e1, 4);
                if (p->lut_count && p->lut_bar < 6) {
                        uint32_t ctl = stx_bar_ctl(p->dir_size != 0, p->lut_count, p->lut_log2),
                                 lo = stx_win_size_lo(p->dir_size),
                                 hi = (uint32_t)(p->dir_size >> 32);
                        memcpy(gas + c + STX_BAR_CTL(p->lut_bar), &ctl, 4);
                        memcpy(gas + c + STX_BAR_WIN_SIZE(p->lut_bar), &lo, 4);
                        memcpy(gas + c + STX_BAR_EXT_SIZE(p->lut_bar), &hi, 4);
                }
        }
}

uint8_t *stxm_create(const char *path, const struct stxm_params *p)
{
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                return NULL;
        uint8_t *gas = MAP_FAILED;
        if (!ftruncate(fd, STXM_FILE_SIZE))
                gas = mmap(NULL, STXM_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (gas == MAP_FAILED)
                return NULL;
        stxm_format(gas, p);
        return gas;
}

struct stxm *stxm_new(uint8_t *gas)
{
        struct stxm *m = calloc(1, sizeof(*m));
        if (!m)
                return NULL;
        m->gas = gas;
        for (size_t i = 0; i < sizeof(m->conns) / sizeof(m->conns[0]); i++)
                m->conns[i] = -1;
        return m;
}

void stxm_free(struct stxm *m)
{
        if (!m)
                return;
        for (size_t i = 0; i < sizeof(m->conns) / sizeof(m->conns[0]); i++)
                if (m->conns[i] >= 0)
                        close(m->conns[i]);
        free(m);
}

/* ---- a configure ----------------------------------------------------------------------- */

static void set_err(struct stxm *m, uint64_t c, uint64_t reg, uint32_t reason, uint32_t idx)
{
        if (!r32(m, c + reg))
                w32(m, c + reg, reason << 16 | idx);
}

static void configure(struct stxm *m, uint32_t p)
{
        uint64_t c = STX_CTRL(p), ep = r64(m, STX_NTB_EP_MAP);
        uint16_t lut_entries, rid_size;
        memcpy(&lut_entries, m->gas + c + STX_LUT_ENTRIES, 2);
        memcpy(&rid_size, m->gas + c + STX_RID_SIZE, 2);
        w32(m, c + STX_BAR_ERROR, 0);
        w32(m, c + STX_LUT_ERROR, 0);
        w32(m, c + STX_RID_ERROR, 0);
        /* BAR setup: LUT windows at the BAR's start, the direct window after them. */
        uint32_t luts = 0;
        uint64_t lut_size = 0;
        for (uint32_t b = 0; b < 6; b++) {
                uint32_t ctl = r32(m, c + STX_BAR_CTL(b));
                if (!(ctl & STX_BAR_VALID))
                        continue;
                uint64_t bar = r64(m, STXM_BAR_SIZE(b));
                uint64_t lut_win = 0;
                uint32_t n = stx_bar_lut_count(ctl);
                unsigned lg = stx_bar_lut_log2(ctl);
                if (n) {
                        if (lg < 12 || lg > 40)
                                set_err(m, c, STX_BAR_ERROR, 2, b);
                        else if (luts + n > lut_entries)
                                set_err(m, c, STX_BAR_ERROR, 4, b);
                        else if ((lut_win = (uint64_t)n << lg) > bar)
                                set_err(m, c, STX_BAR_ERROR, 3, b);
                        if (!luts) {
                                lut_size = lg >= 12 && lg <= 40 ? UINT64_C(1) << lg : 0;
                                luts = n;
                        }
                }
                if (ctl & STX_BAR_DIR_WIN_EN) {
                        uint64_t dir = stx_win_size(r32(m, c + STX_BAR_WIN_SIZE(b)),
                                                    r32(m, c + STX_BAR_EXT_SIZE(b)));
                        if (lut_win && dir > lut_win)
                                set_err(m, c, STX_BAR_ERROR, 1, b);
                        else if (lut_win + dir > bar)
                                set_err(m, c, STX_BAR_ERROR, 5, b);
                }
        }
        for (uint32_t i = 0; i < lut_entries && i < STX_LUT_MAX; i++) {
                uint64_t e = r64(m, c + STX_LUT_ENTRY(i));
                if (!(e & STX_LUT_EN))
                        continue;
                if (i >= luts)
                        set_err(m, c, STX_LUT_ERROR, 3, i);
                else if (lut_size && stx_lut_addr(e) & (lut_size - 1))
                        set_err(m, c, STX_LUT_ERROR, 1, i);
                else if (!(ep >> stx_lut_part(e) & 1))
                        set_err(m, c, STX_LUT_ERROR, 2, i);
        }
        /* Requester entries: proxies are devfns 1 .. proxies, the lowest free first; an
         * entry keeps its proxy while its RID stays. */
        uint32_t proxies = r32(m, STXM_PROXIES);
        uint8_t used[256] = {0};
        for (uint32_t i = 0; i < STX_RID_MAX; i++) {
                uint32_t e = r32(m, c + STX_RID_ENTRY(i));
                if (!(e & STX_RID_EN))
                        continue;
                if (i >= rid_size) {
                        set_err(m, c, STX_RID_ERROR, 3, i);
                        continue;
                }
                for (uint32_t j = 0; j < i; j++) {
                        uint32_t f = r32(m, c + STX_RID_ENTRY(j));
                        if (f & STX_RID_EN && stx_rid_of(f) == stx_rid_of(e))
                                set_err(m, c, STX_RID_ERROR, 1, i);
                }
                if (stx_rid_proxy(e))
                        used[stx_rid_proxy(e)] = 1;
        }
        for (uint32_t i = 0; i < rid_size && i < STX_RID_MAX; i++) {
                uint32_t e = r32(m, c + STX_RID_ENTRY(i));
                if (!(e & STX_RID_EN) || stx_rid_proxy(e))
                        continue;
                uint32_t d = 1;
                while (d <= proxies && d < 256 && used[d])
                        d++;
                if (d > proxies || d >= 256) {
                        set_err(m, c, STX_RID_ERROR, 2, i);
                        continue;
                }
                used[d] = 1;
                w32(m, c + STX_RID_ENTRY(i), e | d << 1);
        }
        static const uint64_t inj[] = {STXM_INJECT_BAR, STXM_INJECT_LUT, STXM_INJECT_RID};
        static const uint64_t reg[] = {STX_BAR_ERROR, STX_LUT_ERROR, STX_RID_ERROR};
        for (int k = 0; k < 3; k++) {
                uint32_t code = r32(m, inj[k]);
                if (code) {
                        w32(m, c + reg[k], code);
                        w32(m, inj[k], 0);
                }
        }
        w32(m, STXM_CONFIGS, r32(m, STXM_CONFIGS) + 1);
}

static void reset(struct stxm *m, uint32_t p)
{
        uint64_t c = STX_CTRL(p);
        for (uint32_t b = 0; b < 6; b++) {
                w32(m, c + STX_BAR_CTL(b), 0);
                w32(m, c + STX_BAR_WIN_SIZE(b), 0);
                w32(m, c + STX_BAR_EXT_SIZE(b), 0);
        }
        memset(m->gas + c + STX_LUT_ENTRY(0), 0, 8 * STX_LUT_MAX);
        memset(m->gas + c + STX_RID_ENTRY(2), 0, 4 * (STX_RID_MAX - 2));
        w32(m, c + STX_BAR_ERROR, 0);
        w32(m, c + STX_LUT_ERROR, 0);
        w32(m, c + STX_RID_ERROR, 0);
}

/* ---- the op state machine -------------------------------------------------------------- */

void stxm_tick(struct stxm *m)
{
        uint64_t ep = r64(m, STX_NTB_EP_MAP);
        uint32_t stuck = r32(m, STXM_STUCK), ticks = r32(m, STXM_OP_TICKS);
        if (!ticks)
                ticks = 1;
        for (uint32_t p = 0; p < STX_MAX_PARTS; p++) {
                if (!(ep >> p & 1))
                        continue;
                uint64_t c = STX_CTRL(p);
                if (m->to[p]) {
                        uint32_t st = r32(m, c + STX_PART_STATUS);
                        if ((st == STX_ST_CONFIGURING && stuck & STXM_STUCK_CFG) ||
                            (st == STX_ST_LOCKING && stuck & STXM_STUCK_LOCK))
                                continue;
                        if (--m->left[p])
                                continue;
                        if (m->op[p] == STX_OP_CFG)
                                configure(m, p);
                        else if (m->op[p] == STX_OP_RESET)
                                reset(m, p);
                        w32(m, c + STX_PART_STATUS, m->to[p]);
                        m->to[p] = 0;
                        continue;
                }
                uint32_t op = r32(m, c + STX_PART_OP);
                if (!op)
                        continue;
                w32(m, c + STX_PART_OP, 0);
                w32(m, STXM_OPS_LOG, r32(m, STXM_OPS_LOG) << 8 | (op & 0xff));
                uint32_t st = r32(m, c + STX_PART_STATUS), through = 0, to = 0;
                /* An op from a status it does not leave is ignored, as the model's choice. */
                if (op == STX_OP_LOCK && st == STX_ST_NORMAL)
                        through = STX_ST_LOCKING, to = STX_ST_LOCKED;
                else if (op == STX_OP_CFG && st == STX_ST_LOCKED)
                        through = STX_ST_CONFIGURING, to = STX_ST_NORMAL;
                else if (op == STX_OP_RESET && st == STX_ST_LOCKED)
                        through = STX_ST_RESETTING, to = STX_ST_NORMAL;
                if (!to)
                        continue;
                m->op[p] = (uint8_t)op;
                m->to[p] = to;
                m->left[p] = ticks;
                w32(m, c + STX_PART_STATUS, through);
        }
}

/* ---- MRPC ------------------------------------------------------------------------------ */

static uint32_t get32(const uint8_t *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t stxm_mrpc(struct stxm *m, const uint8_t *in, size_t inlen, uint8_t *out, size_t outcap)
{
        uint32_t ret = 0;
        size_t n = 4;
        if (inlen < 12) {
                ret = EINVAL;
        } else {
                uint32_t cmd = get32(in), off = get32(in + 4), len = get32(in + 8);
                bool ok = len <= STX_MRPC_GAS_MAX && (uint64_t)off + len <= STX_GAS_SIZE;
                if (cmd == STX_MRPC_GAS_READ && ok && 4 + len <= outcap) {
                        memcpy(out + 4, m->gas + off, len);
                        n += len;
                } else if (cmd == STX_MRPC_GAS_WRITE && ok && inlen == 12 + len) {
                        memcpy(m->gas + off, in + 12, len);
                        __atomic_thread_fence(__ATOMIC_SEQ_CST);
                } else {
                        ret =
                            cmd == STX_MRPC_GAS_READ || cmd == STX_MRPC_GAS_WRITE ? EINVAL : ENOSYS;
                }
        }
        memcpy(out, &ret, 4);
        return n;
}

static void serve(struct stxm *m, int listen_fd, int timeout_ms)
{
        enum { NC = sizeof(m->conns) / sizeof(m->conns[0]) };
        struct pollfd pf[1 + NC];
        int n = 0;
        if (listen_fd >= 0)
                pf[n++] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
        for (int i = 0; i < NC; i++)
                if (m->conns[i] >= 0)
                        pf[n++] = (struct pollfd){.fd = m->conns[i], .events = POLLIN};
        if (poll(pf, (nfds_t)n, timeout_ms) <= 0)
                return;
        for (int k = 0; k < n; k++) {
                if (!pf[k].revents)
                        continue;
                if (pf[k].fd == listen_fd) {
                        int fd = accept(listen_fd, NULL, NULL);
                        int slot = -1;
                        for (int i = 0; i < NC && fd >= 0; i++)
                                if (m->conns[i] < 0) {
                                        slot = i;
                                        break;
                                }
                        if (slot < 0) {
                                if (fd >= 0)
                                        close(fd);
                        } else {
                                m->conns[slot] = fd;
                        }
                        continue;
                }
                uint8_t in[4 + STX_MRPC_PAYLOAD + 8], out[4 + STX_MRPC_PAYLOAD];
                ssize_t got = recv(pf[k].fd, in, sizeof(in), 0);
                if (got > 0) {
                        size_t len = stxm_mrpc(m, in, (size_t)got, out, sizeof(out));
                        if (send(pf[k].fd, out, len, MSG_NOSIGNAL) == (ssize_t)len)
                                continue;
                }
                for (int i = 0; i < NC; i++)
                        if (m->conns[i] == pf[k].fd) {
                                close(m->conns[i]);
                                m->conns[i] = -1;
                        }
        }
}

void stxm_run(struct stxm *m, int listen_fd, uint32_t tick_us)
{
        while (!r32(m, STXM_STOP)) {
                stxm_tick(m);
                serve(m, listen_fd, (int)(tick_us / 1000 ? tick_us / 1000 : 1));
        }
}

/* ---- a fake sysfs ------------------------------------------------------------------------- */

static void fs_mkdirs(char *p)
{
        for (char *s = p + 1; *s; s++)
                if (*s == '/') {
                        *s = 0;
                        if (mkdir(p, 0700) && errno != EEXIST)
                                abort();
                        *s = '/';
                }
        if (mkdir(p, 0700) && errno != EEXIST)
                abort();
}

static void fs_link(const char *target, const char *path)
{
        if (symlink(target, path) && errno != EEXIST)
                abort();
}

void stxm_fake_sysfs(const char *root, const char *name, const char *fn, int partition,
                     const char *gas)
{
        char p[512], t[512];
        snprintf(p, sizeof(p), "%s/sys/devices/pci0000:00/%s", root, fn);
        fs_mkdirs(p);
        if (gas) {
                snprintf(p, sizeof(p), "%s/sys/devices/pci0000:00/%s/resource0", root, fn);
                fs_link(gas, p);
        }
        snprintf(p, sizeof(p), "%s/sys/bus/pci/devices", root);
        fs_mkdirs(p);
        snprintf(p, sizeof(p), "%s/sys/bus/pci/devices/%s", root, fn);
        snprintf(t, sizeof(t), "../../../devices/pci0000:00/%s", fn);
        fs_link(t, p);
        snprintf(p, sizeof(p), "%s/sys/class/switchtec/%s", root, name);
        fs_mkdirs(p);
        snprintf(p, sizeof(p), "%s/sys/class/switchtec/%s/device", root, name);
        snprintf(t, sizeof(t), "../../../devices/pci0000:00/%s", fn);
        fs_link(t, p);
        if (partition >= 0) {
                snprintf(p, sizeof(p), "%s/sys/class/switchtec/%s/partition", root, name);
                FILE *f = fopen(p, "w");
                if (!f)
                        abort();
                fprintf(f, "%d\n", partition);
                fclose(f);
        }
}
