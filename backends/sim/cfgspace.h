/* backends/sim/cfgspace.h: PCI/PCIe config space of a simulated function, with PCI write semantics.
 */
#ifndef NTBF_SIM_CFGSPACE_H
#define NTBF_SIM_CFGSPACE_H

#include <stdbool.h>
#include <stdint.h>

#include "devmodel.h"

/*
 * The config region (NTBF_SIM_CFG_REGION bytes of shared memory, 4-byte aligned) is three
 * pages of NTBF_SIM_CFG_SIZE bytes:
 *   values  [0x0000, 0x1000): the registers, little endian, as a config read returns them
 *   wmask   [0x1000, 0x2000): bits a config write may change
 *   w1cmask [0x2000, 0x3000): bits a config write of 1 clears (RW1C status bits)
 * A bit set in both masks is a command bit: writing 1 latches it in the values page, it
 * always reads as 0, and the device side consumes and clears it. The only one is Device
 * Control "Initiate FLR", which is how an FLR request stays pending for the runner.
 *
 * Every change of the values page is a compare-and-swap of the aligned dword holding it, so
 * config writes from different processes (a borrower's interception, the runner clearing
 * the FLR flag, a model setting a status bit) never undo each other, and a process killed
 * mid-write leaves every register either old or new.
 *
 * Layout chosen by ntbf_sim_cfg_build (fixed, so the interception code and tests can rely
 * on it; the capability walk finds the same offsets):
 *   0x00  type 0 header
 *   0x40  Power Management (version 3, D0 and D3hot only, No_Soft_Reset = 1)
 *   0x50  MSI-X (only when the layout has vectors)
 *   0x60  PCI Express capability v2, endpoint, FLR capable, Gen3 (8 GT/s) link
 *   0x100 SR-IOV extended capability (function 0 only, when desc->vfs > 0: the topology
 *         places all VFs behind PF0, VF i at PF0's routing ID + NTBF_VF_OFFSET + i);
 *         InitialVFs = TotalVFs = desc->vfs, VF Device ID = the PF's device ID, VF BARs
 *         64-bit prefetchable of desc->vf_bars sizes, supported pages 4K..4M (0x553)
 * Header choices: revision ID 0x01; subsystem vendor ID = NTBF_SIM_VENDOR_ID, subsystem ID =
 * the device ID; header type 0x80 (multi-function) when desc->functions > 1; interrupt pin
 * INTA on PFs (advertised, never delivered across an NTB; the borrower masks it), none on
 * VFs. VFs read vendor and device ID 0xffff, have no BARs in their own header (VF BARs are in
 * PF0's SR-IOV capability); in a VF's header only Bus Master Enable is writable, in its
 * Device Control only Initiate FLR (SR-IOV makes the rest RsvdP or PF-controlled).
 * Config space is little endian; the code assumes a little-endian host.
 */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "config space code assumes little endian");

#define NTBF_SIM_CFG_WMASK 0x1000 /* offset of the writable-bits page in the region */
#define NTBF_SIM_CFG_W1C   0x2000 /* offset of the write-1-to-clear page */

/* Where ntbf_sim_cfg_build places the capabilities. */
#define NTBF_SIM_CFG_CAP_PM    0x40
#define NTBF_SIM_CFG_CAP_MSIX  0x50
#define NTBF_SIM_CFG_CAP_PCIE  0x60
#define NTBF_SIM_CFG_EXT_SRIOV 0x100

/* Type 0 header registers (PCI Local Bus 3.0, PCIe Base 4.0 7.5.1). */
#define NTBF_PCI_VENDOR_ID      0x00
#define NTBF_PCI_DEVICE_ID      0x02
#define NTBF_PCI_COMMAND        0x04
#define NTBF_PCI_STATUS         0x06
#define NTBF_PCI_REVISION       0x08
#define NTBF_PCI_CLASS_PROG     0x09
#define NTBF_PCI_CACHE_LINE     0x0c
#define NTBF_PCI_HEADER_TYPE    0x0e
#define NTBF_PCI_BAR0           0x10
#define NTBF_PCI_SUBSYS_VENDOR  0x2c
#define NTBF_PCI_SUBSYS_ID      0x2e
#define NTBF_PCI_ROM            0x30
#define NTBF_PCI_CAP_PTR        0x34
#define NTBF_PCI_INTERRUPT_LINE 0x3c
#define NTBF_PCI_INTERRUPT_PIN  0x3d

#define NTBF_PCI_CMD_MEMORY   0x0002
#define NTBF_PCI_CMD_MASTER   0x0004
#define NTBF_PCI_CMD_PARITY   0x0040
#define NTBF_PCI_CMD_SERR     0x0100
#define NTBF_PCI_CMD_INTX_DIS 0x0400
#define NTBF_PCI_STS_INTX     0x0008
#define NTBF_PCI_STS_CAP_LIST 0x0010
#define NTBF_PCI_STS_MDPE     0x0100 /* master data parity error (RW1C) */
#define NTBF_PCI_STS_STA      0x0800 /* signaled target abort (RW1C) */
#define NTBF_PCI_STS_RTA      0x1000 /* received target abort (RW1C) */
#define NTBF_PCI_STS_RMA      0x2000 /* received master abort (RW1C): a DMA read got UR */
#define NTBF_PCI_STS_SSE      0x4000 /* signaled system error (RW1C) */
#define NTBF_PCI_STS_DPE      0x8000 /* detected parity error (RW1C) */
#define NTBF_PCI_BAR_MEM_64   0x4
#define NTBF_PCI_BAR_PREFETCH 0x8

/* Capability IDs. */
#define NTBF_PCI_CAP_ID_PM        0x01
#define NTBF_PCI_CAP_ID_MSIX      0x11
#define NTBF_PCI_CAP_ID_EXP       0x10
#define NTBF_PCI_EXT_CAP_ID_SRIOV 0x0010

/* Power Management capability registers (offsets in the capability). */
#define NTBF_PCI_PM_PMC        0x02
#define NTBF_PCI_PM_PMCSR      0x04
#define NTBF_PCI_PM_STATE_MASK 0x0003 /* 0 = D0, 3 = D3hot */

/* MSI-X capability registers and table entries. */
#define NTBF_PCI_MSIX_FLAGS        0x02
#define NTBF_PCI_MSIX_TABLE        0x04
#define NTBF_PCI_MSIX_PBA          0x08
#define NTBF_PCI_MSIX_QSIZE        0x07ff
#define NTBF_PCI_MSIX_MASKALL      0x4000
#define NTBF_PCI_MSIX_ENABLE       0x8000
#define NTBF_PCI_MSIX_ENTRY_SIZE   16
#define NTBF_PCI_MSIX_ENTRY_ADDR   0x0
#define NTBF_PCI_MSIX_ENTRY_UADDR  0x4
#define NTBF_PCI_MSIX_ENTRY_DATA   0x8
#define NTBF_PCI_MSIX_ENTRY_CTRL   0xc
#define NTBF_PCI_MSIX_ENTRY_MASKED 0x1

/* PCI Express capability registers (offsets in the capability). */
#define NTBF_PCI_EXP_FLAGS      0x02
#define NTBF_PCI_EXP_DEVCAP     0x04
#define NTBF_PCI_EXP_DEVCTL     0x08
#define NTBF_PCI_EXP_DEVSTA     0x0a
#define NTBF_PCI_EXP_LNKCAP     0x0c
#define NTBF_PCI_EXP_LNKCTL     0x10
#define NTBF_PCI_EXP_LNKSTA     0x12
#define NTBF_PCI_EXP_DEVCAP2    0x24
#define NTBF_PCI_EXP_DEVCTL2    0x28
#define NTBF_PCI_EXP_LNKCAP2    0x2c
#define NTBF_PCI_EXP_LNKCTL2    0x30
#define NTBF_PCI_EXP_SIZE       0x3c
#define NTBF_PCI_EXP_DEVCAP_FLR (1u << 28)
#define NTBF_PCI_EXP_DEVCTL_FLR 0x8000 /* Initiate Function Level Reset */
#define NTBF_PCI_EXP_DEVSTA_CED 0x0001 /* correctable error detected (RW1C) */
#define NTBF_PCI_EXP_DEVSTA_URD 0x0008 /* unsupported request detected (RW1C) */

/* SR-IOV extended capability registers (offsets in the capability). */
#define NTBF_PCI_SRIOV_CAP        0x04
#define NTBF_PCI_SRIOV_CTRL       0x08
#define NTBF_PCI_SRIOV_STATUS     0x0a
#define NTBF_PCI_SRIOV_INITIAL_VF 0x0c
#define NTBF_PCI_SRIOV_TOTAL_VF   0x0e
#define NTBF_PCI_SRIOV_NUM_VF     0x10
#define NTBF_PCI_SRIOV_FUNC_LINK  0x12
#define NTBF_PCI_SRIOV_VF_OFFSET  0x14
#define NTBF_PCI_SRIOV_VF_STRIDE  0x16
#define NTBF_PCI_SRIOV_VF_DID     0x1a
#define NTBF_PCI_SRIOV_SUP_PGSIZE 0x1c
#define NTBF_PCI_SRIOV_SYS_PGSIZE 0x20
#define NTBF_PCI_SRIOV_BAR        0x24
#define NTBF_PCI_SRIOV_VFM        0x3c
#define NTBF_PCI_SRIOV_SIZE       0x40
#define NTBF_PCI_SRIOV_CTRL_VFE   0x0001 /* VF Enable */
#define NTBF_PCI_SRIOV_CTRL_MSE   0x0008 /* VF Memory Space Enable */
#define NTBF_PCI_SRIOV_CTRL_ARI   0x0010 /* ARI Capable Hierarchy (PF0 only) */

/* What a model puts in config space beyond what the topology entry says. */
struct ntbf_sim_cfg_layout {
        uint32_t msix_vectors; /* table size; 0: no MSI-X capability */
        uint32_t msix_table_bar, msix_table_off;
        uint32_t msix_pba_bar, msix_pba_off;
        uint32_t link_width; /* lanes reported in Link Capabilities/Status (1..32) */
};

/*
 * Fill the config region of function `function` of desc (PFs first, then VFs, as
 * ntbf_device_bar_addr counts them) with its power-on contents: BARs hold the addresses the
 * topology assigned (as firmware would have programmed them). Returns 0, or -EINVAL for a
 * function that does not exist or a layout that does not fit (MSI-X table outside its BAR,
 * more than 2048 vectors).
 */
int ntbf_sim_cfg_build(uint8_t *region, const struct ntbf_device *desc, uint32_t function,
                       const struct ntbf_sim_cfg_layout *layout);
/*
 * True if region already holds a config space built for this function and layout (ids,
 * class, capability layout): a restarted device host keeps the registers a driver programmed.
 */
bool ntbf_sim_cfg_matches(const uint8_t *region, const struct ntbf_device *desc, uint32_t function,
                          const struct ntbf_sim_cfg_layout *layout);

/*
 * A config read or write of len 1, 2 or 4 bytes at a naturally aligned offset below
 * NTBF_SIM_CFG_SIZE. A read outside those rules returns all ones (as an unsupported request
 * does); a write outside them is dropped and returns -EINVAL. Writes honor the masks: read-only
 * and reserved bits keep their value, RW1C bits clear where 1 is written, BAR sizing works by
 * writing all ones. Writing an unsupported power state (D1, D2) to PMCSR is ignored.
 */
uint32_t ntbf_sim_cfg_read(const uint8_t *region, uint32_t off, uint32_t len);
int ntbf_sim_cfg_write(uint8_t *region, uint32_t off, uint32_t val, uint32_t len);

/* Offset of a capability (standard list / extended list), 0 if absent. Bounded walks. */
uint32_t ntbf_sim_cfg_find_cap(const uint8_t *region, uint8_t id);
uint32_t ntbf_sim_cfg_find_ext_cap(const uint8_t *region, uint16_t id);

/* Command register Bus Master Enable: the function may issue DMA (and MSI-X writes). */
bool ntbf_sim_cfg_bus_master(const uint8_t *region);
/* Command register Memory Space Enable. */
bool ntbf_sim_cfg_mem_enabled(const uint8_t *region);
/* Device-side status reporting: set RW1C bits of the Status register (e.g. NTBF_PCI_STS_RMA). */
void ntbf_sim_cfg_set_status(uint8_t *region, uint16_t bits);

/*
 * FLR: a driver's write of Initiate FLR leaves this pending (the bit reads as 0). The runner
 * sees it, calls the model's reset, then clears it.
 */
bool ntbf_sim_cfg_flr_pending(const uint8_t *region);
void ntbf_sim_cfg_flr_clear(uint8_t *region);

/* ---- MSI-X -------------------------------------------------------------------------------- */

/* MSI-X state of the function, read from its capability. */
struct ntbf_sim_msix {
        bool present, enabled, masked; /* masked: Function Mask */
        uint32_t vectors;
        uint32_t table_bar, table_off, pba_bar, pba_off;
};
void ntbf_sim_cfg_msix(const uint8_t *region, struct ntbf_sim_msix *m);

/* One table entry, read from BAR memory with atomic loads (drivers write it). */
struct ntbf_sim_msix_vec {
        uint64_t addr;
        uint32_t data;
        bool masked; /* the entry's Vector Control mask bit */
};
/* Returns 0, or -EINVAL if vec is out of range or the table is not inside its BAR. */
int ntbf_sim_msix_vector(const struct ntbf_sim_msix *m, void *const bar[],
                         const uint64_t bar_size[], uint32_t vec, struct ntbf_sim_msix_vec *v);

/*
 * Interrupt delivery of a model. The model owns the pending state (the PBA in BAR memory is
 * a published copy: drivers cannot change it); a message is a 4-byte DMA write of the entry's
 * data to its address, issued only with Bus Master Enable set.
 */
#define NTBF_SIM_MSIX_MAX 2048
struct ntbf_sim_msix_pending {
        uint64_t bits[NTBF_SIM_MSIX_MAX / 64];
        uint32_t count;
};
/* Power-on state of the table (every vector masked, data 0) and PBA (clear). */
void ntbf_sim_msix_reset(const struct ntbf_sim_devenv *env, struct ntbf_sim_msix_pending *p);
/*
 * Signal vector vec: deliver it, or set its pending bit if the function or the vector is
 * masked. Returns 1 delivered, 0 left pending, -ENODEV when MSI-X is disabled (the function
 * would use INTx, which is never delivered), -EINVAL for a bad vector, -EIO when the message
 * write failed (lost, as a posted write would be).
 */
int ntbf_sim_msix_signal(const struct ntbf_sim_devenv *env, struct ntbf_sim_msix_pending *p,
                         uint32_t vec);
/* Deliver pending vectors that are no longer masked. Returns the number delivered. */
int ntbf_sim_msix_flush(const struct ntbf_sim_devenv *env, struct ntbf_sim_msix_pending *p);

/*
 * DMA of a model as its function: refused (-EIO, nothing leaves the function) without Bus
 * Master Enable; a failed read sets Status "Received Master Abort" as a UR completion would,
 * and fills buf with all ones.
 */
int ntbf_sim_dma_read(const struct ntbf_sim_devenv *env, uint64_t addr, void *buf, size_t len);
int ntbf_sim_dma_write(const struct ntbf_sim_devenv *env, uint64_t addr, const void *buf,
                       size_t len);

#endif
