/* tests/unit/test_sim_cfgspace.c: config space contents and PCI write semantics of sim functions.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cfgspace.h"
#include "fake_dma.h"

#define BAR0_ADDR   UINT64_C(0xfe000000)
#define BAR2_ADDR   UINT64_C(0x38000000000)
#define VFBAR0_ADDR UINT64_C(0x38100000000)

static struct ntbf_device nvme_dev(uint32_t msix, uint32_t vfs)
{
        struct ntbf_device d;
        memset(&d, 0, sizeof(d));
        snprintf(d.name, sizeof(d.name), "nvme0");
        d.bus = 3;
        d.functions = 1;
        ntbf_sim_defaults(&d.sim, NTBF_SIM_NVME);
        d.sim.msix = msix;
        ntbf_device_apply_sim(&d);
        d.bars[0].addr = BAR0_ADDR;
        if (vfs) {
                d.vfs = vfs;
                d.vf_bars[0] = 16 * 1024;
                d.vf_bar_addr[0] = VFBAR0_ADDR;
        }
        return d;
}

static const struct ntbf_sim_cfg_layout nvme_layout = {
    .msix_vectors = 4,
    .msix_table_bar = 0,
    .msix_table_off = 0x3000,
    .msix_pba_bar = 0,
    .msix_pba_off = 0x3800,
    .link_width = 4,
};

static uint8_t *region(void)
{
        uint8_t *r = aligned_alloc(4096, NTBF_SIM_CFG_REGION);
        assert_non_null(r);
        return r;
}

static uint32_t rd(const uint8_t *r, uint32_t off, uint32_t len)
{
        return ntbf_sim_cfg_read(r, off, len);
}

static void wr(uint8_t *r, uint32_t off, uint32_t val, uint32_t len)
{
        assert_int_equal(ntbf_sim_cfg_write(r, off, val, len), 0);
}

static void test_header(void **state)
{
        (void)state;
        struct ntbf_device d = nvme_dev(4, 0);
        uint8_t *r = region();
        assert_int_equal(ntbf_sim_cfg_build(r, &d, 0, &nvme_layout), 0);
        assert_int_equal(rd(r, NTBF_PCI_VENDOR_ID, 2), NTBF_SIM_VENDOR_ID);
        assert_int_equal(rd(r, NTBF_PCI_DEVICE_ID, 2), NTBF_SIM_NVME_DEVICE_ID);
        assert_int_equal(rd(r, 0, 4), NTBF_SIM_NVME_DEVICE_ID << 16 | NTBF_SIM_VENDOR_ID);
        assert_int_equal(rd(r, NTBF_PCI_REVISION, 4), NTBF_CLASS_NVME << 8 | 0x01);
        assert_int_equal(rd(r, NTBF_PCI_HEADER_TYPE, 1), 0x00);
        assert_int_equal(rd(r, NTBF_PCI_STATUS, 2), NTBF_PCI_STS_CAP_LIST);
        assert_int_equal(rd(r, NTBF_PCI_COMMAND, 2), 0);
        assert_int_equal(rd(r, NTBF_PCI_SUBSYS_VENDOR, 2), NTBF_SIM_VENDOR_ID);
        assert_int_equal(rd(r, NTBF_PCI_SUBSYS_ID, 2), NTBF_SIM_NVME_DEVICE_ID);
        assert_int_equal(rd(r, NTBF_PCI_CAP_PTR, 1), NTBF_SIM_CFG_CAP_PM);
        assert_int_equal(rd(r, NTBF_PCI_INTERRUPT_PIN, 1), 1);
        assert_int_equal(rd(r, NTBF_PCI_ROM, 4), 0);
        /* BAR0: 64-bit non-prefetchable memory at the topology's address. */
        assert_int_equal(rd(r, NTBF_PCI_BAR0, 4), (uint32_t)BAR0_ADDR | NTBF_PCI_BAR_MEM_64);
        assert_int_equal(rd(r, NTBF_PCI_BAR0 + 4, 4), 0);
        assert_int_equal(rd(r, NTBF_PCI_BAR0 + 8, 4), 0);
        /* Read-only fields ignore writes. */
        wr(r, NTBF_PCI_VENDOR_ID, 0x1234, 2);
        wr(r, NTBF_PCI_REVISION, 0xffffffff, 4);
        wr(r, NTBF_PCI_INTERRUPT_PIN, 4, 1);
        assert_int_equal(rd(r, NTBF_PCI_VENDOR_ID, 2), NTBF_SIM_VENDOR_ID);
        assert_int_equal(rd(r, NTBF_PCI_REVISION, 4), NTBF_CLASS_NVME << 8 | 0x01);
        assert_int_equal(rd(r, NTBF_PCI_INTERRUPT_PIN, 1), 1);
        /* Command: only memory, bus master, parity, SERR and INTx disable are writable. */
        wr(r, NTBF_PCI_COMMAND, 0xffff, 2);
        assert_int_equal(rd(r, NTBF_PCI_COMMAND, 2), 0x0546);
        assert_true(ntbf_sim_cfg_bus_master(r));
        assert_true(ntbf_sim_cfg_mem_enabled(r));
        wr(r, NTBF_PCI_COMMAND, 0, 2);
        assert_false(ntbf_sim_cfg_bus_master(r));
        wr(r, NTBF_PCI_INTERRUPT_LINE, 0x0b, 1);
        assert_int_equal(rd(r, NTBF_PCI_INTERRUPT_LINE, 1), 0x0b);
        wr(r, NTBF_PCI_CACHE_LINE, 0x10, 1);
        assert_int_equal(rd(r, NTBF_PCI_CACHE_LINE, 1), 0x10);
        free(r);
}

static void test_bar_sizing(void **state)
{
        (void)state;
        struct ntbf_device d = nvme_dev(0, 0);
        d.sim.cmb = 1 << 20;
        ntbf_device_apply_sim(&d);
        d.bars[0].addr = BAR0_ADDR;
        d.bars[2].addr = BAR2_ADDR;
        uint8_t *r = region();
        struct ntbf_sim_cfg_layout l = {.link_width = 4};
        assert_int_equal(ntbf_sim_cfg_build(r, &d, 0, &l), 0);
        /* Sizing BAR0 (16 KiB, 64-bit): all ones reads back the size mask and the type. */
        wr(r, NTBF_PCI_BAR0, 0xffffffff, 4);
        wr(r, NTBF_PCI_BAR0 + 4, 0xffffffff, 4);
        assert_int_equal(rd(r, NTBF_PCI_BAR0, 4), 0xffffc000u | NTBF_PCI_BAR_MEM_64);
        assert_int_equal(rd(r, NTBF_PCI_BAR0 + 4, 4), 0xffffffff);
        wr(r, NTBF_PCI_BAR0, (uint32_t)BAR0_ADDR, 4);
        wr(r, NTBF_PCI_BAR0 + 4, 0, 4);
        assert_int_equal(rd(r, NTBF_PCI_BAR0, 4), (uint32_t)BAR0_ADDR | NTBF_PCI_BAR_MEM_64);
        /* BAR2 (CMB, 1 MiB, 64-bit prefetchable) holds its 64-bit address. */
        assert_int_equal(rd(r, NTBF_PCI_BAR0 + 8, 4),
                         (uint32_t)BAR2_ADDR | NTBF_PCI_BAR_MEM_64 | NTBF_PCI_BAR_PREFETCH);
        assert_int_equal(rd(r, NTBF_PCI_BAR0 + 12, 4), (uint32_t)(BAR2_ADDR >> 32));
        wr(r, NTBF_PCI_BAR0 + 8, 0xffffffff, 4);
        assert_int_equal(rd(r, NTBF_PCI_BAR0 + 8, 4), 0xfff00000u | 0xc);
        /* Unimplemented BARs stay zero. */
        wr(r, NTBF_PCI_BAR0 + 16, 0xffffffff, 4);
        assert_int_equal(rd(r, NTBF_PCI_BAR0 + 16, 4), 0);
        /* A 2-byte write touches only its half of the register. */
        wr(r, NTBF_PCI_BAR0 + 10, 0x1234, 2);
        assert_int_equal(rd(r, NTBF_PCI_BAR0 + 8, 4), 0x1230000cu);
        free(r);
}

static void test_rw1c_status(void **state)
{
        (void)state;
        struct ntbf_device d = nvme_dev(4, 0);
        uint8_t *r = region();
        assert_int_equal(ntbf_sim_cfg_build(r, &d, 0, &nvme_layout), 0);
        ntbf_sim_cfg_set_status(r, NTBF_PCI_STS_RMA | NTBF_PCI_STS_SSE);
        assert_int_equal(rd(r, NTBF_PCI_STATUS, 2),
                         NTBF_PCI_STS_CAP_LIST | NTBF_PCI_STS_RMA | NTBF_PCI_STS_SSE);
        /* Writing 0 leaves RW1C bits; writing 1 clears exactly those bits. */
        wr(r, NTBF_PCI_STATUS, 0, 2);
        assert_int_equal(rd(r, NTBF_PCI_STATUS, 2),
                         NTBF_PCI_STS_CAP_LIST | NTBF_PCI_STS_RMA | NTBF_PCI_STS_SSE);
        wr(r, NTBF_PCI_STATUS, NTBF_PCI_STS_RMA | NTBF_PCI_STS_CAP_LIST, 2);
        assert_int_equal(rd(r, NTBF_PCI_STATUS, 2), NTBF_PCI_STS_CAP_LIST | NTBF_PCI_STS_SSE);
        /* A dword write to Command with status bits set clears them too, and sets Command. */
        wr(r, NTBF_PCI_COMMAND, (uint32_t)NTBF_PCI_STS_SSE << 16 | NTBF_PCI_CMD_MASTER, 4);
        assert_int_equal(rd(r, NTBF_PCI_STATUS, 2), NTBF_PCI_STS_CAP_LIST);
        assert_int_equal(rd(r, NTBF_PCI_COMMAND, 2), NTBF_PCI_CMD_MASTER);
        /* Device Status RW1C. */
        uint32_t e = ntbf_sim_cfg_find_cap(r, NTBF_PCI_CAP_ID_EXP);
        assert_int_equal(rd(r, e + NTBF_PCI_EXP_DEVSTA, 2), 0);
        free(r);
}

static void test_capability_walk(void **state)
{
        (void)state;
        struct ntbf_device d = nvme_dev(4, 0);
        uint8_t *r = region();
        assert_int_equal(ntbf_sim_cfg_build(r, &d, 0, &nvme_layout), 0);
        assert_int_equal(ntbf_sim_cfg_find_cap(r, NTBF_PCI_CAP_ID_PM), 0x40);
        assert_int_equal(ntbf_sim_cfg_find_cap(r, NTBF_PCI_CAP_ID_MSIX), 0x50);
        assert_int_equal(ntbf_sim_cfg_find_cap(r, NTBF_PCI_CAP_ID_EXP), 0x60);
        assert_int_equal(ntbf_sim_cfg_find_cap(r, 0x05 /* MSI */), 0);
        assert_int_equal(ntbf_sim_cfg_find_ext_cap(r, NTBF_PCI_EXT_CAP_ID_SRIOV), 0);
        /* The chain as a driver walks it. */
        assert_int_equal(rd(r, 0x40, 2), 0x5001);
        assert_int_equal(rd(r, 0x50, 2), 0x6011);
        assert_int_equal(rd(r, 0x60, 2), 0x0010);
        /* PM: version 3, D0, No_Soft_Reset; D1/D2 writes are ignored. */
        assert_int_equal(rd(r, 0x42, 2), 0x0003);
        assert_int_equal(rd(r, 0x44, 2), 0x0008);
        wr(r, 0x44, 3, 2);
        assert_int_equal(rd(r, 0x44, 2), 0x000b);
        wr(r, 0x44, 1, 2);
        assert_int_equal(rd(r, 0x44, 2), 0x000b);
        wr(r, 0x44, 0, 2);
        assert_int_equal(rd(r, 0x44, 2), 0x0008);
        /* PCIe capability: v2 endpoint, FLR capable, Gen3 x4. */
        assert_int_equal(rd(r, 0x62, 2), 0x0002);
        assert_true(rd(r, 0x64, 4) & NTBF_PCI_EXP_DEVCAP_FLR);
        assert_int_equal(rd(r, 0x64, 4) & 7, 1); /* MPS 256 */
        assert_int_equal(rd(r, 0x68, 2), 0x2810);
        assert_int_equal(rd(r, 0x6c, 4), 0x43);
        assert_int_equal(rd(r, 0x72, 2), 0x1043);
        /* Without MSI-X the list skips it. */
        struct ntbf_sim_cfg_layout l = {.link_width = 4};
        assert_int_equal(ntbf_sim_cfg_build(r, &d, 0, &l), 0);
        assert_int_equal(ntbf_sim_cfg_find_cap(r, NTBF_PCI_CAP_ID_MSIX), 0);
        assert_int_equal(rd(r, 0x41, 1), 0x60);
        assert_int_equal(ntbf_sim_cfg_find_cap(r, NTBF_PCI_CAP_ID_EXP), 0x60);
        /* A list that loops (as garbage would) ends the walk. */
        r[0x61] = 0x40;
        assert_int_equal(ntbf_sim_cfg_find_cap(r, 0x05), 0);
        free(r);
}

static void test_msix_cap(void **state)
{
        (void)state;
        struct ntbf_device d = nvme_dev(4, 0);
        uint8_t *r = region();
        assert_int_equal(ntbf_sim_cfg_build(r, &d, 0, &nvme_layout), 0);
        assert_int_equal(rd(r, 0x52, 2), 3); /* table size 4 */
        assert_int_equal(rd(r, 0x54, 4), 0x3000);
        assert_int_equal(rd(r, 0x58, 4), 0x3800);
        struct ntbf_sim_msix m;
        ntbf_sim_cfg_msix(r, &m);
        assert_true(m.present);
        assert_false(m.enabled);
        assert_false(m.masked);
        assert_int_equal(m.vectors, 4);
        assert_int_equal(m.table_off, 0x3000);
        assert_int_equal(m.pba_off, 0x3800);
        /* Enable and function mask are writable, the table size is not. */
        wr(r, 0x52, 0xffff, 2);
        assert_int_equal(rd(r, 0x52, 2), 0xc003);
        ntbf_sim_cfg_msix(r, &m);
        assert_true(m.enabled);
        assert_true(m.masked);
        /* Entries are read from BAR memory. */
        uint8_t *bar0 = calloc(1, 16384);
        void *bars[NTBF_MAX_BARS] = {bar0};
        uint64_t sizes[NTBF_MAX_BARS] = {16384};
        uint32_t e[4] = {0xfee01000, 0x1, 0x42, 0};
        memcpy(bar0 + 0x3000 + 16 * 2, e, sizeof(e));
        struct ntbf_sim_msix_vec v;
        assert_int_equal(ntbf_sim_msix_vector(&m, bars, sizes, 2, &v), 0);
        assert_int_equal(v.addr, UINT64_C(0x1fee01000));
        assert_int_equal(v.data, 0x42);
        assert_false(v.masked);
        assert_int_equal(ntbf_sim_msix_vector(&m, bars, sizes, 4, &v), -EINVAL);
        free(bar0);
        /* A table that does not fit its BAR is refused at build. */
        struct ntbf_sim_cfg_layout bad = nvme_layout;
        bad.msix_vectors = 1024;
        assert_int_equal(ntbf_sim_cfg_build(r, &d, 0, &bad), -EINVAL);
        free(r);
}

static void test_sriov_and_vf(void **state)
{
        (void)state;
        struct ntbf_device d = nvme_dev(4, 8);
        uint8_t *r = region();
        assert_int_equal(ntbf_sim_cfg_build(r, &d, 0, &nvme_layout), 0);
        uint32_t s = ntbf_sim_cfg_find_ext_cap(r, NTBF_PCI_EXT_CAP_ID_SRIOV);
        assert_int_equal(s, 0x100);
        assert_int_equal(rd(r, s, 4), 0x00010010);
        assert_int_equal(rd(r, s + NTBF_PCI_SRIOV_INITIAL_VF, 2), 8);
        assert_int_equal(rd(r, s + NTBF_PCI_SRIOV_TOTAL_VF, 2), 8);
        assert_int_equal(rd(r, s + NTBF_PCI_SRIOV_VF_OFFSET, 2), NTBF_VF_OFFSET);
        assert_int_equal(rd(r, s + NTBF_PCI_SRIOV_VF_STRIDE, 2), 1);
        assert_int_equal(rd(r, s + NTBF_PCI_SRIOV_VF_DID, 2), NTBF_SIM_NVME_DEVICE_ID);
        assert_int_equal(rd(r, s + NTBF_PCI_SRIOV_SUP_PGSIZE, 4), 0x553);
        assert_int_equal(rd(r, s + NTBF_PCI_SRIOV_SYS_PGSIZE, 4), 1);
        /* NumVFs and the control bits are writable, TotalVFs is not. */
        wr(r, s + NTBF_PCI_SRIOV_NUM_VF, 4, 2);
        wr(r, s + NTBF_PCI_SRIOV_TOTAL_VF, 99, 2);
        wr(r, s + NTBF_PCI_SRIOV_CTRL, 0xffff, 2);
        assert_int_equal(rd(r, s + NTBF_PCI_SRIOV_NUM_VF, 2), 4);
        assert_int_equal(rd(r, s + NTBF_PCI_SRIOV_TOTAL_VF, 2), 8);
        assert_int_equal(rd(r, s + NTBF_PCI_SRIOV_CTRL, 2), 0x19);
        /* VF BAR0: 64-bit prefetchable, sized like a BAR. */
        uint32_t vb = s + NTBF_PCI_SRIOV_BAR;
        assert_int_equal(rd(r, vb, 4), (uint32_t)VFBAR0_ADDR | 0xc);
        assert_int_equal(rd(r, vb + 4, 4), (uint32_t)(VFBAR0_ADDR >> 32));
        wr(r, vb, 0xffffffff, 4);
        assert_int_equal(rd(r, vb, 4), 0xffffc00cu);

        /* VF 0 (function index 1): vendor/device read 0xffff, no BARs, no INTx. */
        uint8_t *v = region();
        assert_int_equal(ntbf_sim_cfg_build(v, &d, 1, &nvme_layout), 0);
        assert_int_equal(rd(v, NTBF_PCI_VENDOR_ID, 2), 0xffff);
        assert_int_equal(rd(v, NTBF_PCI_DEVICE_ID, 2), 0xffff);
        assert_int_equal(rd(v, NTBF_PCI_REVISION, 4), NTBF_CLASS_NVME << 8 | 0x01);
        assert_int_equal(rd(v, NTBF_PCI_INTERRUPT_PIN, 1), 0);
        for (uint32_t b = 0; b < 6; b++) {
                wr(v, NTBF_PCI_BAR0 + 4 * b, 0xffffffff, 4);
                assert_int_equal(rd(v, NTBF_PCI_BAR0 + 4 * b, 4), 0);
        }
        wr(v, NTBF_PCI_COMMAND, 0xffff, 2);
        assert_int_equal(rd(v, NTBF_PCI_COMMAND, 2), NTBF_PCI_CMD_MASTER);
        assert_int_equal(ntbf_sim_cfg_find_ext_cap(v, NTBF_PCI_EXT_CAP_ID_SRIOV), 0);
        uint32_t e = ntbf_sim_cfg_find_cap(v, NTBF_PCI_CAP_ID_EXP);
        assert_int_not_equal(e, 0);
        assert_true(rd(v, e + NTBF_PCI_EXP_DEVCAP, 4) & NTBF_PCI_EXP_DEVCAP_FLR);
        /* A VF's Device Control is reserved except Initiate FLR. */
        wr(v, e + NTBF_PCI_EXP_DEVCTL, 0x7fff, 2);
        assert_int_equal(rd(v, e + NTBF_PCI_EXP_DEVCTL, 2), 0);
        assert_int_equal(ntbf_sim_cfg_find_cap(v, NTBF_PCI_CAP_ID_MSIX), 0x50);
        /* A function past the VFs does not exist. */
        assert_int_equal(ntbf_sim_cfg_build(v, &d, 9, &nvme_layout), -EINVAL);
        free(v);
        free(r);
}

static void test_flr_flag(void **state)
{
        (void)state;
        struct ntbf_device d = nvme_dev(4, 0);
        uint8_t *r = region();
        assert_int_equal(ntbf_sim_cfg_build(r, &d, 0, &nvme_layout), 0);
        uint32_t ctl = 0x60 + NTBF_PCI_EXP_DEVCTL;
        assert_false(ntbf_sim_cfg_flr_pending(r));
        /* A read-modify-write that initiates FLR and changes MPS. */
        uint32_t v = rd(r, ctl, 2);
        wr(r, ctl, v | NTBF_PCI_EXP_DEVCTL_FLR | 1u << 5, 2);
        assert_true(ntbf_sim_cfg_flr_pending(r));
        /* Initiate FLR always reads 0; the other bits took the write. */
        assert_int_equal(rd(r, ctl, 2), 0x2810 | 1u << 5);
        /* Writing 0 does not cancel a pending FLR. */
        wr(r, ctl, 0x2810, 2);
        assert_true(ntbf_sim_cfg_flr_pending(r));
        ntbf_sim_cfg_flr_clear(r);
        assert_false(ntbf_sim_cfg_flr_pending(r));
        assert_int_equal(rd(r, ctl, 2), 0x2810);
        free(r);
}

static void test_access_rules(void **state)
{
        (void)state;
        struct ntbf_device d = nvme_dev(4, 0);
        uint8_t *r = region();
        assert_int_equal(ntbf_sim_cfg_build(r, &d, 0, &nvme_layout), 0);
        assert_int_equal(rd(r, 1, 2), 0xffff);
        assert_int_equal(rd(r, 2, 4), 0xffffffff);
        assert_int_equal(rd(r, 4096, 1), 0xff);
        assert_int_equal(rd(r, 0, 3), 0xffffffff);
        assert_int_equal(ntbf_sim_cfg_write(r, 4096, 0, 4), -EINVAL);
        assert_int_equal(ntbf_sim_cfg_write(r, 5, 0, 2), -EINVAL);
        /* Extended space without capabilities reads 0. */
        assert_int_equal(rd(r, 0x100, 4), 0);
        /* Byte reads of a dword. */
        assert_int_equal(rd(r, 0, 1), NTBF_SIM_VENDOR_ID & 0xff);
        assert_int_equal(rd(r, 1, 1), NTBF_SIM_VENDOR_ID >> 8);
        free(r);
}

static void test_matches_and_multifunction(void **state)
{
        (void)state;
        struct ntbf_device d = nvme_dev(4, 0);
        uint8_t *r = region();
        memset(r, 0, NTBF_SIM_CFG_REGION);
        assert_false(ntbf_sim_cfg_matches(r, &d, 0, &nvme_layout));
        assert_int_equal(ntbf_sim_cfg_build(r, &d, 0, &nvme_layout), 0);
        assert_true(ntbf_sim_cfg_matches(r, &d, 0, &nvme_layout));
        /* Driver-programmed state does not make it a different function. */
        wr(r, NTBF_PCI_COMMAND, NTBF_PCI_CMD_MASTER | NTBF_PCI_CMD_MEMORY, 2);
        wr(r, 0x52, NTBF_PCI_MSIX_ENABLE, 2);
        assert_true(ntbf_sim_cfg_matches(r, &d, 0, &nvme_layout));
        /* A different layout or device does. */
        struct ntbf_sim_cfg_layout l = nvme_layout;
        l.msix_vectors = 2;
        assert_false(ntbf_sim_cfg_matches(r, &d, 0, &l));
        r[NTBF_PCI_REVISION] = 7;
        assert_false(ntbf_sim_cfg_matches(r, &d, 0, &nvme_layout));

        d.functions = 2;
        assert_int_equal(ntbf_sim_cfg_build(r, &d, 1, &nvme_layout), 0);
        assert_int_equal(rd(r, NTBF_PCI_HEADER_TYPE, 1), 0x80);
        /* Function 1's BAR0 follows function 0's in the BAR array. */
        assert_int_equal(rd(r, NTBF_PCI_BAR0, 4), (uint32_t)(BAR0_ADDR + 16384) | 4);
        free(r);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_header),
            cmocka_unit_test(test_bar_sizing),
            cmocka_unit_test(test_rw1c_status),
            cmocka_unit_test(test_capability_walk),
            cmocka_unit_test(test_msix_cap),
            cmocka_unit_test(test_sriov_and_vf),
            cmocka_unit_test(test_flr_flag),
            cmocka_unit_test(test_access_rules),
            cmocka_unit_test(test_matches_and_multifunction),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
