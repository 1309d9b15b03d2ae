/* backends/sim/cfgspace.c: building, reading and writing a simulated function's config space. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cfgspace.h"

/* ---- aligned dword access to shared memory ------------------------------------------------ */

static uint32_t ld32(const uint8_t *p)
{
        return __atomic_load_n((const uint32_t *)(const void *)p, __ATOMIC_ACQUIRE);
}

static void st32(uint8_t *p, uint32_t v)
{
        __atomic_store_n((uint32_t *)(void *)p, v, __ATOMIC_RELEASE);
}

static void st64(uint8_t *p, uint64_t v)
{
        __atomic_store_n((uint64_t *)(void *)p, v, __ATOMIC_RELEASE);
}

/* Byte/word reads of the values page without the command-bit filter (device side). */
static uint32_t raw(const uint8_t *region, uint32_t off, uint32_t len)
{
        uint32_t d = ld32(region + (off & ~3u)) >> (8 * (off & 3));
        return len == 4 ? d : d & ((1u << (8 * len)) - 1);
}

/* Atomically replace the bits of mask (of the register at off) with val. */
static void update(uint8_t *region, uint32_t off, uint32_t mask, uint32_t val)
{
        uint32_t *p = (uint32_t *)(void *)(region + (off & ~3u));
        mask <<= 8 * (off & 3);
        val <<= 8 * (off & 3);
        uint32_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(p, &old, (old & ~mask) | (val & mask), true,
                                            __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                ;
}

/* ---- building ----------------------------------------------------------------------------- */

struct build {
        uint8_t *v, *w, *c;
};

static void put(uint8_t *page, uint32_t off, uint64_t val, uint32_t len)
{
        for (uint32_t i = 0; i < len; i++)
                page[off + i] = (uint8_t)(val >> (8 * i));
}

/* A register: value, writable bits, write-1-to-clear bits. */
static void reg(struct build *b, uint32_t off, uint32_t len, uint64_t val, uint64_t wmask,
                uint64_t w1c)
{
        put(b->v, off, val, len);
        put(b->w, off, wmask, len);
        put(b->c, off, w1c, len);
}

/*
 * A memory BAR (or VF BAR) at config offset off: bits 3:0 are the read-only type, the
 * address bits below the size are read-only zero, so writing all ones reads back the size
 * mask as PCI sizing expects. A 64-bit BAR takes the next dword for the upper half.
 */
static void bar(struct build *b, uint32_t off, uint64_t size, uint32_t flags, uint64_t addr)
{
        uint64_t mask = ~(size - 1);
        uint32_t type = (flags & NTBF_BAR_64 ? NTBF_PCI_BAR_MEM_64 : 0) |
                        (flags & NTBF_BAR_PREF ? NTBF_PCI_BAR_PREFETCH : 0);
        reg(b, off, 4, ((uint32_t)addr & (uint32_t)mask) | type, (uint32_t)mask & ~0xfu, 0);
        if (flags & NTBF_BAR_64)
                reg(b, off + 4, 4, (addr & mask) >> 32, mask >> 32, 0);
}

/* BAR registers at base (6 dwords) from sizes/flags/addresses; -EINVAL if a 64-bit BAR has no
 * room for its upper half or collides with another BAR. */
static int bars(struct build *b, uint32_t base, const uint64_t size[], const uint32_t flags[],
                const uint64_t addr[])
{
        for (uint32_t i = 0; i < NTBF_MAX_BARS; i++) {
                if (!size[i])
                        continue;
                if (size[i] & (size[i] - 1))
                        return -EINVAL;
                if (flags[i] & NTBF_BAR_64) {
                        if (i + 1 >= NTBF_MAX_BARS || size[i + 1])
                                return -EINVAL;
                        bar(b, base + 4 * i, size[i], flags[i], addr[i]);
                        i++;
                } else {
                        if (size[i] > UINT32_MAX)
                                return -EINVAL;
                        bar(b, base + 4 * i, size[i], flags[i], addr[i]);
                }
        }
        return 0;
}

static int check_layout(const struct ntbf_device *d, uint32_t f,
                        const struct ntbf_sim_cfg_layout *l)
{
        if (f >= ntbf_device_nfuncs(d) || l->link_width > 32)
                return -EINVAL;
        if (!l->msix_vectors)
                return 0;
        if (l->msix_vectors > NTBF_SIM_MSIX_MAX || l->msix_table_bar >= NTBF_MAX_BARS ||
            l->msix_pba_bar >= NTBF_MAX_BARS || (l->msix_table_off & 7) || (l->msix_pba_off & 7))
                return -EINVAL;
        uint64_t tsz = ntbf_device_bar_size(d, f, l->msix_table_bar);
        uint64_t psz = ntbf_device_bar_size(d, f, l->msix_pba_bar);
        uint64_t tend = (uint64_t)l->msix_table_off + (uint64_t)l->msix_vectors * 16;
        uint64_t pend = (uint64_t)l->msix_pba_off + ((l->msix_vectors + 63) / 64) * 8;
        if (tend > tsz || pend > psz)
                return -EINVAL;
        return 0;
}

static int build_into(uint8_t *region, const struct ntbf_device *d, uint32_t f,
                      const struct ntbf_sim_cfg_layout *l)
{
        int r = check_layout(d, f, l);
        if (r)
                return r;
        memset(region, 0, NTBF_SIM_CFG_REGION);
        struct build b = {region, region + NTBF_SIM_CFG_WMASK, region + NTBF_SIM_CFG_W1C};
        bool vf = f >= d->functions;
        uint32_t width = l->link_width ? l->link_width : 1;

        reg(&b, NTBF_PCI_VENDOR_ID, 2, vf ? 0xffff : d->vendor_id, 0, 0);
        reg(&b, NTBF_PCI_DEVICE_ID, 2, vf ? 0xffff : d->device_id, 0, 0);
        /* No I/O BARs, so I/O Space Enable is hardwired 0; a VF's memory space is enabled in
         * PF0's SR-IOV control, and it has no INTx. */
        reg(&b, NTBF_PCI_COMMAND, 2, 0,
            vf ? NTBF_PCI_CMD_MASTER
               : NTBF_PCI_CMD_MEMORY | NTBF_PCI_CMD_MASTER | NTBF_PCI_CMD_PARITY |
                     NTBF_PCI_CMD_SERR | NTBF_PCI_CMD_INTX_DIS,
            0);
        reg(&b, NTBF_PCI_STATUS, 2, NTBF_PCI_STS_CAP_LIST, 0,
            NTBF_PCI_STS_MDPE | NTBF_PCI_STS_STA | NTBF_PCI_STS_RTA | NTBF_PCI_STS_RMA |
                NTBF_PCI_STS_SSE | NTBF_PCI_STS_DPE);
        reg(&b, NTBF_PCI_REVISION, 1, 0x01, 0, 0);
        reg(&b, NTBF_PCI_CLASS_PROG, 3, d->class_code & 0xffffff, 0, 0);
        /* Cache Line Size has no effect on PCIe but stays writable for legacy software. */
        reg(&b, NTBF_PCI_CACHE_LINE, 1, 0, vf ? 0 : 0xff, 0);
        reg(&b, NTBF_PCI_HEADER_TYPE, 1, !vf && d->functions > 1 ? 0x80 : 0x00, 0, 0);
        if (!vf) {
                uint64_t size[NTBF_MAX_BARS], addr[NTBF_MAX_BARS];
                uint32_t flags[NTBF_MAX_BARS];
                for (uint32_t i = 0; i < NTBF_MAX_BARS; i++) {
                        size[i] = ntbf_device_bar_size(d, f, i);
                        flags[i] = d->bars[i].flags;
                        addr[i] = ntbf_device_bar_addr(d, f, i);
                }
                r = bars(&b, NTBF_PCI_BAR0, size, flags, addr);
                if (r)
                        return r;
        }
        reg(&b, NTBF_PCI_SUBSYS_VENDOR, 2, NTBF_SIM_VENDOR_ID, 0, 0);
        reg(&b, NTBF_PCI_SUBSYS_ID, 2, d->device_id, 0, 0);
        reg(&b, NTBF_PCI_CAP_PTR, 1, NTBF_SIM_CFG_CAP_PM, 0, 0);
        reg(&b, NTBF_PCI_INTERRUPT_LINE, 1, 0, vf ? 0 : 0xff, 0);
        reg(&b, NTBF_PCI_INTERRUPT_PIN, 1, vf ? 0 : 1, 0, 0);

        /* Power Management v3 (PMC version 011b), D0/D3hot only, no PME, No_Soft_Reset so a
         * D3hot->D0 transition keeps the function's state. */
        uint32_t pm = NTBF_SIM_CFG_CAP_PM;
        uint32_t next = l->msix_vectors ? NTBF_SIM_CFG_CAP_MSIX : NTBF_SIM_CFG_CAP_PCIE;
        reg(&b, pm, 2, NTBF_PCI_CAP_ID_PM | next << 8, 0, 0);
        reg(&b, pm + NTBF_PCI_PM_PMC, 2, 0x0003, 0, 0);
        reg(&b, pm + NTBF_PCI_PM_PMCSR, 2, 0x0008, NTBF_PCI_PM_STATE_MASK, 0);

        if (l->msix_vectors) {
                uint32_t x = NTBF_SIM_CFG_CAP_MSIX;
                reg(&b, x, 2, NTBF_PCI_CAP_ID_MSIX | NTBF_SIM_CFG_CAP_PCIE << 8, 0, 0);
                reg(&b, x + NTBF_PCI_MSIX_FLAGS, 2, l->msix_vectors - 1,
                    NTBF_PCI_MSIX_MASKALL | NTBF_PCI_MSIX_ENABLE, 0);
                reg(&b, x + NTBF_PCI_MSIX_TABLE, 4, l->msix_table_off | l->msix_table_bar, 0, 0);
                reg(&b, x + NTBF_PCI_MSIX_PBA, 4, l->msix_pba_off | l->msix_pba_bar, 0, 0);
        }

        /* PCI Express capability version 2, PCI Express Endpoint. */
        uint32_t e = NTBF_SIM_CFG_CAP_PCIE;
        reg(&b, e, 2, NTBF_PCI_CAP_ID_EXP, 0, 0);
        reg(&b, e + NTBF_PCI_EXP_FLAGS, 2, 0x0002, 0, 0);
        /* MPS 256 B, extended tags, unlimited L0s/L1 acceptable latency, role-based error
         * reporting (required since PCIe 1.1), FLR. */
        reg(&b, e + NTBF_PCI_EXP_DEVCAP, 4,
            0x1u | 1u << 5 | 7u << 6 | 7u << 9 | 1u << 15 | NTBF_PCI_EXP_DEVCAP_FLR, 0, 0);
        if (vf) {
                /* A VF's Device Control is RsvdP except Initiate FLR (SR-IOV 1.1, 3.5.5). */
                reg(&b, e + NTBF_PCI_EXP_DEVCTL, 2, 0, NTBF_PCI_EXP_DEVCTL_FLR,
                    NTBF_PCI_EXP_DEVCTL_FLR);
        } else {
                /* Defaults: relaxed ordering and no snoop enabled, MPS 128 B, MRRS 512 B.
                 * Writable: error reporting enables, relaxed ordering, MPS, extended tag,
                 * no snoop, MRRS, and Initiate FLR (a command bit). */
                reg(&b, e + NTBF_PCI_EXP_DEVCTL, 2, 0x2810, 0xf9ff, NTBF_PCI_EXP_DEVCTL_FLR);
        }
        reg(&b, e + NTBF_PCI_EXP_DEVSTA, 2, 0, 0, 0x000f);
        /* Gen3 (8 GT/s) link, no ASPM, port 0. */
        reg(&b, e + NTBF_PCI_EXP_LNKCAP, 4, 0x3u | width << 4, 0, 0);
        reg(&b, e + NTBF_PCI_EXP_LNKCTL, 2, 0, vf ? 0 : 0x00cb, 0);
        reg(&b, e + NTBF_PCI_EXP_LNKSTA, 2, 0x3u | width << 4 | 1u << 12, 0, 0);
        reg(&b, e + NTBF_PCI_EXP_LNKCAP2, 4, 0x0e, 0, 0); /* 2.5, 5 and 8 GT/s */
        reg(&b, e + NTBF_PCI_EXP_LNKCTL2, 2, vf ? 0 : 0x3, vf ? 0 : 0xf, 0);

        if (f == 0 && d->vfs > 0) {
                uint32_t s = NTBF_SIM_CFG_EXT_SRIOV;
                reg(&b, s, 4, NTBF_PCI_EXT_CAP_ID_SRIOV | 1u << 16, 0, 0);
                reg(&b, s + NTBF_PCI_SRIOV_CTRL, 2, 0,
                    NTBF_PCI_SRIOV_CTRL_VFE | NTBF_PCI_SRIOV_CTRL_MSE | NTBF_PCI_SRIOV_CTRL_ARI, 0);
                reg(&b, s + NTBF_PCI_SRIOV_INITIAL_VF, 2, d->vfs, 0, 0);
                reg(&b, s + NTBF_PCI_SRIOV_TOTAL_VF, 2, d->vfs, 0, 0);
                reg(&b, s + NTBF_PCI_SRIOV_NUM_VF, 2, 0, 0xffff, 0);
                reg(&b, s + NTBF_PCI_SRIOV_FUNC_LINK, 2, d->fn, 0, 0);
                reg(&b, s + NTBF_PCI_SRIOV_VF_OFFSET, 2, NTBF_VF_OFFSET, 0, 0);
                reg(&b, s + NTBF_PCI_SRIOV_VF_STRIDE, 2, 1, 0, 0);
                reg(&b, s + NTBF_PCI_SRIOV_VF_DID, 2, d->device_id, 0, 0);
                /* PFs must support 4K, 8K, 64K, 256K, 1M and 4M system pages. */
                reg(&b, s + NTBF_PCI_SRIOV_SUP_PGSIZE, 4, 0x553, 0, 0);
                reg(&b, s + NTBF_PCI_SRIOV_SYS_PGSIZE, 4, 0x1, 0x553, 0);
                uint32_t flags[NTBF_MAX_BARS];
                for (uint32_t i = 0; i < NTBF_MAX_BARS; i++)
                        flags[i] = NTBF_BAR_64 | NTBF_BAR_PREF;
                r = bars(&b, s + NTBF_PCI_SRIOV_BAR, d->vf_bars, flags, d->vf_bar_addr);
                if (r)
                        return r;
        }
        return 0;
}

int ntbf_sim_cfg_build(uint8_t *region, const struct ntbf_device *desc, uint32_t function,
                       const struct ntbf_sim_cfg_layout *layout)
{
        return build_into(region, desc, function, layout);
}

bool ntbf_sim_cfg_matches(const uint8_t *region, const struct ntbf_device *desc, uint32_t function,
                          const struct ntbf_sim_cfg_layout *layout)
{
        uint8_t *ref = malloc(NTBF_SIM_CFG_REGION);
        if (!ref || build_into(ref, desc, function, layout)) {
                free(ref);
                return false;
        }
        bool same =
            memcmp(ref + NTBF_SIM_CFG_SIZE, region + NTBF_SIM_CFG_SIZE, 2 * NTBF_SIM_CFG_SIZE) == 0;
        for (uint32_t off = 0; same && off < NTBF_SIM_CFG_SIZE; off += 4) {
                uint32_t ro =
                    ~(ld32(ref + NTBF_SIM_CFG_WMASK + off) | ld32(ref + NTBF_SIM_CFG_W1C + off));
                same = (ld32(ref + off) & ro) == (ld32(region + off) & ro);
        }
        free(ref);
        return same;
}

/* ---- config cycles ------------------------------------------------------------------------ */

static bool access_ok(uint32_t off, uint32_t len)
{
        return (len == 1 || len == 2 || len == 4) && off % len == 0 && off < NTBF_SIM_CFG_SIZE;
}

uint32_t ntbf_sim_cfg_read(const uint8_t *region, uint32_t off, uint32_t len)
{
        if (!access_ok(off, len))
                return len == 1 ? 0xff : len == 2 ? 0xffff : UINT32_MAX;
        uint32_t dw = off & ~3u;
        uint32_t cmd =
            ld32(region + NTBF_SIM_CFG_WMASK + dw) & ld32(region + NTBF_SIM_CFG_W1C + dw);
        uint32_t d = (ld32(region + dw) & ~cmd) >> (8 * (off & 3));
        return len == 4 ? d : d & ((1u << (8 * len)) - 1);
}

int ntbf_sim_cfg_write(uint8_t *region, uint32_t off, uint32_t val, uint32_t len)
{
        if (!access_ok(off, len))
                return -EINVAL;
        uint32_t dw = off & ~3u, shift = 8 * (off & 3);
        uint32_t lm = (len == 4 ? UINT32_MAX : (1u << (8 * len)) - 1) << shift;
        uint32_t v = val << shift;
        uint32_t w = ld32(region + NTBF_SIM_CFG_WMASK + dw);
        uint32_t c = ld32(region + NTBF_SIM_CFG_W1C + dw);
        uint32_t rw = w & ~c & lm, rw1c = c & ~w & lm, cmd = w & c & lm;
        if (!(rw | rw1c | cmd))
                return 0;
        /* PMCSR ignores a write of a power state the function does not support (D1, D2). */
        bool pmcsr = dw == NTBF_SIM_CFG_CAP_PM + NTBF_PCI_PM_PMCSR &&
                     raw(region, NTBF_SIM_CFG_CAP_PM, 1) == NTBF_PCI_CAP_ID_PM;
        uint32_t *p = (uint32_t *)(void *)(region + dw);
        uint32_t old = __atomic_load_n(p, __ATOMIC_RELAXED), nv;
        do {
                nv = (old & ~rw) | (v & rw);
                nv &= ~(v & rw1c);
                nv |= v & cmd;
                if (pmcsr && ((nv & 3) == 1 || (nv & 3) == 2))
                        nv = (nv & ~3u) | (old & 3u);
        } while (
            !__atomic_compare_exchange_n(p, &old, nv, true, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
        return 0;
}

uint32_t ntbf_sim_cfg_find_cap(const uint8_t *region, uint8_t id)
{
        if (!(raw(region, NTBF_PCI_STATUS, 2) & NTBF_PCI_STS_CAP_LIST))
                return 0;
        uint32_t ptr = raw(region, NTBF_PCI_CAP_PTR, 1) & 0xfc;
        /* At most 48 capabilities fit in 192 bytes: a longer walk is a loop. */
        for (int n = 0; n < 48 && ptr >= 0x40; n++) {
                if (raw(region, ptr, 1) == id)
                        return ptr;
                ptr = raw(region, ptr + 1, 1) & 0xfc;
        }
        return 0;
}

uint32_t ntbf_sim_cfg_find_ext_cap(const uint8_t *region, uint16_t id)
{
        uint32_t off = 0x100;
        for (int n = 0; n < (NTBF_SIM_CFG_SIZE - 0x100) / 4; n++) {
                uint32_t h = ld32(region + off);
                if (h == 0 || h == UINT32_MAX)
                        return 0;
                if ((h & 0xffff) == id)
                        return off;
                off = (h >> 20) & 0xffc;
                if (off < 0x100)
                        return 0;
        }
        return 0;
}

bool ntbf_sim_cfg_bus_master(const uint8_t *region)
{
        return raw(region, NTBF_PCI_COMMAND, 2) & NTBF_PCI_CMD_MASTER;
}

bool ntbf_sim_cfg_mem_enabled(const uint8_t *region)
{
        return raw(region, NTBF_PCI_COMMAND, 2) & NTBF_PCI_CMD_MEMORY;
}

void ntbf_sim_cfg_set_status(uint8_t *region, uint16_t bits)
{
        update(region, NTBF_PCI_STATUS, bits, bits);
}

bool ntbf_sim_cfg_flr_pending(const uint8_t *region)
{
        uint32_t e = ntbf_sim_cfg_find_cap(region, NTBF_PCI_CAP_ID_EXP);
        return e && (raw(region, e + NTBF_PCI_EXP_DEVCTL, 2) & NTBF_PCI_EXP_DEVCTL_FLR);
}

void ntbf_sim_cfg_flr_clear(uint8_t *region)
{
        uint32_t e = ntbf_sim_cfg_find_cap(region, NTBF_PCI_CAP_ID_EXP);
        if (e)
                update(region, e + NTBF_PCI_EXP_DEVCTL, NTBF_PCI_EXP_DEVCTL_FLR, 0);
}

/* ---- MSI-X -------------------------------------------------------------------------------- */

void ntbf_sim_cfg_msix(const uint8_t *region, struct ntbf_sim_msix *m)
{
        memset(m, 0, sizeof(*m));
        uint32_t x = ntbf_sim_cfg_find_cap(region, NTBF_PCI_CAP_ID_MSIX);
        if (!x)
                return;
        uint32_t flags = raw(region, x + NTBF_PCI_MSIX_FLAGS, 2);
        uint32_t t = raw(region, x + NTBF_PCI_MSIX_TABLE, 4);
        uint32_t p = raw(region, x + NTBF_PCI_MSIX_PBA, 4);
        m->present = true;
        m->enabled = flags & NTBF_PCI_MSIX_ENABLE;
        m->masked = flags & NTBF_PCI_MSIX_MASKALL;
        m->vectors = (flags & NTBF_PCI_MSIX_QSIZE) + 1;
        m->table_bar = t & 7;
        m->table_off = t & ~7u;
        m->pba_bar = p & 7;
        m->pba_off = p & ~7u;
}

static uint8_t *msix_entry(const struct ntbf_sim_msix *m, void *const bar[],
                           const uint64_t bar_size[], uint32_t vec)
{
        if (!m->present || vec >= m->vectors || m->table_bar >= NTBF_MAX_BARS ||
            !bar[m->table_bar] ||
            (uint64_t)m->table_off + (uint64_t)(vec + 1) * NTBF_PCI_MSIX_ENTRY_SIZE >
                bar_size[m->table_bar])
                return NULL;
        return (uint8_t *)bar[m->table_bar] + m->table_off + vec * NTBF_PCI_MSIX_ENTRY_SIZE;
}

int ntbf_sim_msix_vector(const struct ntbf_sim_msix *m, void *const bar[],
                         const uint64_t bar_size[], uint32_t vec, struct ntbf_sim_msix_vec *v)
{
        uint8_t *e = msix_entry(m, bar, bar_size, vec);
        if (!e)
                return -EINVAL;
        v->addr = ld32(e + NTBF_PCI_MSIX_ENTRY_ADDR) | (uint64_t)ld32(e + NTBF_PCI_MSIX_ENTRY_UADDR)
                                                           << 32;
        v->data = ld32(e + NTBF_PCI_MSIX_ENTRY_DATA);
        v->masked = ld32(e + NTBF_PCI_MSIX_ENTRY_CTRL) & NTBF_PCI_MSIX_ENTRY_MASKED;
        return 0;
}

/* The PBA qword holding vec, or NULL if it lies outside the BAR. */
static uint8_t *pba_word(const struct ntbf_sim_msix *m, const struct ntbf_sim_devenv *env,
                         uint32_t vec)
{
        uint64_t off = m->pba_off + (uint64_t)(vec / 64) * 8;
        if (m->pba_bar >= NTBF_MAX_BARS || !env->bar[m->pba_bar] ||
            off + 8 > env->bar_size[m->pba_bar])
                return NULL;
        return (uint8_t *)env->bar[m->pba_bar] + off;
}

static void publish_pba(const struct ntbf_sim_msix *m, const struct ntbf_sim_devenv *env,
                        const struct ntbf_sim_msix_pending *p, uint32_t vec)
{
        uint8_t *w = pba_word(m, env, vec);
        if (w)
                st64(w, p->bits[vec / 64]);
}

void ntbf_sim_msix_reset(const struct ntbf_sim_devenv *env, struct ntbf_sim_msix_pending *p)
{
        memset(p, 0, sizeof(*p));
        struct ntbf_sim_msix m;
        ntbf_sim_cfg_msix(env->cfg, &m);
        for (uint32_t vec = 0; vec < m.vectors; vec++) {
                uint8_t *e = msix_entry(&m, env->bar, env->bar_size, vec);
                if (e) {
                        st32(e + NTBF_PCI_MSIX_ENTRY_ADDR, 0);
                        st32(e + NTBF_PCI_MSIX_ENTRY_UADDR, 0);
                        st32(e + NTBF_PCI_MSIX_ENTRY_DATA, 0);
                        st32(e + NTBF_PCI_MSIX_ENTRY_CTRL, NTBF_PCI_MSIX_ENTRY_MASKED);
                }
                if (vec % 64 == 0)
                        publish_pba(&m, env, p, vec);
        }
}

static int deliver(const struct ntbf_sim_devenv *env, const struct ntbf_sim_msix_vec *v)
{
        /* Everything the interrupt announces (completion entries) is written before it. */
        __atomic_thread_fence(__ATOMIC_RELEASE);
        uint32_t data = v->data;
        return ntbf_sim_dma_write(env, v->addr, &data, sizeof(data)) < 0 ? -EIO : 1;
}

int ntbf_sim_msix_signal(const struct ntbf_sim_devenv *env, struct ntbf_sim_msix_pending *p,
                         uint32_t vec)
{
        struct ntbf_sim_msix m;
        struct ntbf_sim_msix_vec v;
        ntbf_sim_cfg_msix(env->cfg, &m);
        if (!m.present || !m.enabled)
                return -ENODEV;
        if (vec >= NTBF_SIM_MSIX_MAX || ntbf_sim_msix_vector(&m, env->bar, env->bar_size, vec, &v))
                return -EINVAL;
        if (m.masked || v.masked) {
                uint64_t bit = UINT64_C(1) << (vec % 64);
                if (!(p->bits[vec / 64] & bit)) {
                        p->bits[vec / 64] |= bit;
                        p->count++;
                }
                publish_pba(&m, env, p, vec);
                return 0;
        }
        return deliver(env, &v);
}

int ntbf_sim_msix_flush(const struct ntbf_sim_devenv *env, struct ntbf_sim_msix_pending *p)
{
        if (!p->count)
                return 0;
        struct ntbf_sim_msix m;
        ntbf_sim_cfg_msix(env->cfg, &m);
        if (!m.present || !m.enabled || m.masked)
                return 0;
        int n = 0;
        for (uint32_t w = 0; w < NTBF_SIM_MSIX_MAX / 64 && p->count; w++) {
                uint64_t bits = p->bits[w];
                while (bits) {
                        uint32_t vec = w * 64 + (uint32_t)__builtin_ctzll(bits);
                        bits &= bits - 1;
                        struct ntbf_sim_msix_vec v;
                        bool gone = ntbf_sim_msix_vector(&m, env->bar, env->bar_size, vec, &v);
                        if (!gone && v.masked)
                                continue;
                        /* A vector beyond the table (it shrank after a rebuild) is dropped. */
                        p->bits[w] &= ~(UINT64_C(1) << (vec % 64));
                        p->count--;
                        publish_pba(&m, env, p, vec);
                        if (!gone && deliver(env, &v) == 1)
                                n++;
                }
        }
        return n;
}

/* ---- DMA as the function ------------------------------------------------------------------ */

int ntbf_sim_dma_read(const struct ntbf_sim_devenv *env, uint64_t addr, void *buf, size_t len)
{
        if (!ntbf_sim_cfg_bus_master(env->cfg)) {
                memset(buf, 0xff, len);
                return -EIO;
        }
        int r = env->dma.read(env->dma.opaque, addr, buf, len);
        if (r < 0) {
                memset(buf, 0xff, len);
                ntbf_sim_cfg_set_status(env->cfg, NTBF_PCI_STS_RMA);
        }
        return r < 0 ? r : 0;
}

int ntbf_sim_dma_write(const struct ntbf_sim_devenv *env, uint64_t addr, const void *buf,
                       size_t len)
{
        if (!ntbf_sim_cfg_bus_master(env->cfg))
                return -EIO;
        int r = env->dma.write(env->dma.opaque, addr, buf, len);
        return r < 0 ? r : 0;
}
