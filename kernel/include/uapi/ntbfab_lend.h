/* SPDX-License-Identifier: ((GPL-2.0-only WITH Linux-syscall-note) OR MIT) */
/*
 * ntbfab_lend.h - the interface between ntbfabd and ntbfab_shadow, the module
 * that puts borrowed devices into the borrower's kernel as hot-added "shadow
 * devices" (docs/kernel.md).  The character device is /dev/ntbfab-lend.
 *
 * Rules of the contract (checked by tests/unit/test_ntbfab_lend_uapi.c):
 *
 * - Every structure has fixed-size fields, explicit padding and a size that
 *   is a multiple of 8 bytes, so 32- and 64-bit user space see one layout.
 *   The ioctl number encodes the size: a structure that changes size is a new
 *   ioctl.  Pointers travel as __u64.
 * - Input "flags" accept only the flags defined here and "reserved" fields
 *   must be zero; anything else is -EINVAL, so later versions can use them.
 * - NTBFAB_LEND_IOC_VERSION tells the interface version.  An incompatible
 *   change increases NTBFAB_LEND_VERSION.
 *
 * Roles.  Who opens the device decides nothing; the daemon (ntbfabd) decides
 * and the module executes:
 *
 * - A borrower's daemon ATTACHes a device it borrowed: the module creates a
 *   PCI host bridge in a PCI domain of its own with the device on it, and the
 *   kernel's driver for it probes.  DETACH removes it (the driver unbinds
 *   first).  Config writes the driver makes are sent to the daemon as
 *   records read() returns (struct ntbfab_lend_msg), because config requests
 *   do not cross an NTB: the daemon forwards them to the lender and may give
 *   the module the register's new value (NTBFAB_LEND_IOC_CFG_SET).
 * - In loopback lending (a device lent by this kernel to this kernel, the
 *   kernel tier's vehicle, docs/kernel.md) the lender's daemon first EXPORTs
 *   the device it holds through VFIO, so that the module can reach its IOMMU
 *   domain and its interrupts; the borrower's ATTACH names that export.
 * - Mapping peer-to-peer targets (article section 4.4): the daemon resolves
 *   the device-side address of another device's BAR and gives it to the
 *   module (NTBFAB_LEND_IOC_PEER_ADD); dma_map_resource() of that BAR by the
 *   shadow device's driver then returns it.
 *
 * Lifetime: everything an open file created belongs to that file.  When it is
 * released (the daemon exits or dies), its shadow devices are surprise-removed
 * (marked disconnected, then removed: the driver sees a dead device) and a
 * NTBFAB_LEND_MSG_REMOVED record is not needed since nobody reads; its exports
 * are withdrawn, which surprise-removes every shadow device using them first,
 * whichever file attached them (that file then reads a REMOVED record).
 */
#ifndef _UAPI_NTBFAB_LEND_H
#define _UAPI_NTBFAB_LEND_H

#include <linux/const.h>
#include <linux/ioctl.h>
#include <linux/types.h>

#define NTBFAB_LEND_VERSION		1
#define NTBFAB_LEND_IOC_MAGIC		0xB9

/*
 * A PCI function's address is a domain (32 bits: shadow devices' domains start at 0x10000)
 * and a routing id, bus << 8 | device << 3 | function.
 */
#define NTBFAB_LEND_RID(bus, devfn)	((__u32)(bus) << 8 | (__u32)(devfn))

/* Config space as the lender read it: 4096 bytes (256 for conventional PCI). */
#define NTBFAB_LEND_CFG_SIZE		4096

/* MSI-X vectors an export can relay. */
#define NTBFAB_LEND_MAX_IRQS		2048

/**
 * NTBFAB_LEND_IOC_VERSION - which interface the module implements.
 * @version:	out: NTBFAB_LEND_VERSION.
 * @msg_size:	out: sizeof(struct ntbfab_lend_msg), the size of a record.
 * @features:	out: NTBFAB_LEND_FEAT_* bits.
 * @reserved:	out: 0.
 */
struct ntbfab_lend_version {
	__u32 version;
	__u32 msg_size;
	__u32 features;
	__u32 reserved;
};

/* The module was loaded with a loopback window (loopback lending possible). */
#define NTBFAB_LEND_FEAT_LOOPBACK	_BITUL(0)

/**
 * NTBFAB_LEND_IOC_EXPORT - loopback lending, lender side: a device of this
 * kernel that the caller holds through vfio-pci, offered to shadow devices of
 * this same kernel.
 * @flags:	in: 0.
 * @group_fd:	in: the device's VFIO group file; the module keeps a
 *		reference until the export is withdrawn, which keeps the
 *		group's IOMMU domain alive while shadow devices map into it.
 * @pci_domain: in: the device's PCI domain.
 * @pci_rid:	in: its routing id (NTBFAB_LEND_RID).  It must be in that
 *		group, bound to vfio-pci, with MSI-X enabled through VFIO for
 *		at least @nr_irqs vectors.
 * @nr_irqs:	in: entries of @irq_fds.
 * @irq_fds:	in: user pointer to __s32[@nr_irqs]: the eventfd the caller
 *		gave VFIO for MSI-X vector i (VFIO_DEVICE_SET_IRQS), or -1.
 *		The module relays a signal of fd i to the shadow device's
 *		vector i.
 * @iova_base:	in: start of the range of the device's IOMMU domain that the
 *		caller keeps free for shadow devices' DMA windows (its own
 *		VFIO mappings stay outside); page aligned.
 * @iova_size:	in: its size; page aligned, not 0.
 * @export_id:	out: what an ATTACH names.
 * @reserved:	in: 0.
 */
struct ntbfab_lend_export {
	__u32 flags;
	__s32 group_fd;
	__u32 pci_domain;
	__u32 pci_rid;
	__u32 nr_irqs;
	__u32 reserved0;
	__u64 irq_fds;
	__u64 iova_base;
	__u64 iova_size;
	__u64 export_id;
	__u64 reserved;
};

/**
 * NTBFAB_LEND_IOC_UNEXPORT - withdraw an export of this file.  Shadow devices
 * using it are surprise-removed first.
 * @export_id:	in.
 * @reserved:	in: 0.
 */
struct ntbfab_lend_unexport {
	__u64 export_id;
	__u64 reserved;
};

/* ntbfab_lend_attach.flags */
#define NTBFAB_LEND_ATTACH_LOOPBACK	_BITUL(0) /* the device is @export_id */

/**
 * NTBFAB_LEND_IOC_ATTACH - put a borrowed device into this kernel.
 * @flags:	in: NTBFAB_LEND_ATTACH_LOOPBACK (version 1 knows no other
 *		kind; docs/kernel.md says what cross-host attach needs).
 * @fdid:	in: the device's fabric-wide id (named in the kernel log and
 *		in sysfs).
 * @export_id:	in: loopback: the export of the lent device.
 * @config:	in: user pointer to @config_size bytes: the device's config
 *		space as the lender read it.  Reads of the shadow device's
 *		config space are answered from this copy.
 * @config_size: in: 256 or NTBFAB_LEND_CFG_SIZE.
 * @dma_size:	in: the DMA window: bytes of device-side addresses the
 *		driver's mappings may use at one time; page aligned, not 0,
 *		at most the export's @iova_size.
 * @shadow_id:	out: the shadow device's id in this module.
 * @pci_domain: out: the shadow device's PCI domain (one of its own).
 * @pci_rid:	out: its routing id (NTBFAB_LEND_RID).
 * @reserved:	in: 0.
 */
struct ntbfab_lend_attach {
	__u32 flags;
	__u32 fdid;
	__u64 export_id;
	__u64 config;
	__u32 config_size;
	__u32 shadow_id;
	__u64 dma_size;
	__u32 pci_domain;
	__u32 pci_rid;
	__u64 reserved[2];
};

/* ntbfab_lend_detach.flags */
#define NTBFAB_LEND_DETACH_SURPRISE	_BITUL(0) /* the device is gone (lease lost) */

/**
 * NTBFAB_LEND_IOC_DETACH - remove a shadow device of this file.  Without
 * NTBFAB_LEND_DETACH_SURPRISE the driver unbinds from a working device (it
 * may still write config space: those records arrive before the ioctl
 * returns); with it the device is marked disconnected first, its config space
 * reads all ones and writes are dropped, as after a surprise removal.  When
 * the ioctl returns, the device, its driver's mappings and its interrupts
 * are gone.
 * @shadow_id:	in.
 * @flags:	in: NTBFAB_LEND_DETACH_*.
 * @mappings:	out: DMA mappings the driver still held, now unmapped.
 */
struct ntbfab_lend_detach {
	__u32 shadow_id;
	__u32 flags;
	__u64 mappings;
};

/**
 * NTBFAB_LEND_IOC_CFG_SET - the daemon's answer to a config write record:
 * the register's value on the device after the write.
 * @shadow_id:	in.
 * @offset:	in: a multiple of 4, below the config size.
 * @value:	in: the dword at @offset.
 * @reserved:	in: 0.
 * @seq:	in: the record's seq; the value is taken only if no later write
 *		to that dword is still on its way (the driver's newer value
 *		stays).
 */
struct ntbfab_lend_cfg_set {
	__u32 shadow_id;
	__u32 offset;
	__u32 value;
	__u32 reserved;
	__u64 seq;
};

/**
 * NTBFAB_LEND_IOC_PEER_ADD - a range another device (the target) exposes to
 * the shadow device (peer-to-peer, article section 4.4), as the daemon
 * resolved it.  A dma_map_resource() by the driver of an address inside
 * [@phys, @phys + @size) returns @dev_addr plus the offset.
 * @shadow_id:	in: the shadow device (the source).
 * @flags:	in: 0.
 * @phys:	in: where this kernel sees the target's BAR (its own BAR for a
 *		local device, the shadow BAR of a borrowed one).
 * @size:	in: page aligned, not 0.
 * @dev_addr:	in: the address the source device uses to reach it.
 */
struct ntbfab_lend_peer {
	__u32 shadow_id;
	__u32 flags;
	__u64 phys;
	__u64 size;
	__u64 dev_addr;
};

/* ntbfab_lend_msg.kind */
#define NTBFAB_LEND_MSG_CFG_WRITE	1 /* the driver wrote config space */
#define NTBFAB_LEND_MSG_REMOVED		2 /* the shadow device is gone (@value: why) */
#define NTBFAB_LEND_MSG_OVERFLOW	3 /* records were lost: resend what the lender has */

/* ntbfab_lend_msg.value for NTBFAB_LEND_MSG_REMOVED */
#define NTBFAB_LEND_GONE_EXPORT		1 /* its export was withdrawn */

/**
 * struct ntbfab_lend_msg - one record of read().  read() returns whole
 * records (a buffer smaller than one is -EINVAL), blocks while there are none
 * unless O_NONBLOCK (-EAGAIN), and poll() reports EPOLLIN when there are.
 * @kind:	NTBFAB_LEND_MSG_*.
 * @shadow_id:	the shadow device.
 * @seq:	increases by one per record of this file.
 * @offset:	CFG_WRITE: config offset.
 * @size:	CFG_WRITE: 1, 2 or 4.
 * @value:	CFG_WRITE: the value to write on the device (intercepted: INTx
 *		stays disabled, the MSI address is the lender-side one);
 *		REMOVED: NTBFAB_LEND_GONE_*.
 * @reserved:	0.
 */
struct ntbfab_lend_msg {
	__u32 kind;
	__u32 shadow_id;
	__u64 seq;
	__u32 offset;
	__u32 size;
	__u32 value;
	__u32 reserved;
};

#define NTBFAB_LEND_IOC_VERSION	_IOR(NTBFAB_LEND_IOC_MAGIC, 0x00, struct ntbfab_lend_version)
#define NTBFAB_LEND_IOC_EXPORT	_IOWR(NTBFAB_LEND_IOC_MAGIC, 0x01, struct ntbfab_lend_export)
#define NTBFAB_LEND_IOC_UNEXPORT _IOW(NTBFAB_LEND_IOC_MAGIC, 0x02, struct ntbfab_lend_unexport)
#define NTBFAB_LEND_IOC_ATTACH	_IOWR(NTBFAB_LEND_IOC_MAGIC, 0x03, struct ntbfab_lend_attach)
#define NTBFAB_LEND_IOC_DETACH	_IOWR(NTBFAB_LEND_IOC_MAGIC, 0x04, struct ntbfab_lend_detach)
#define NTBFAB_LEND_IOC_CFG_SET	_IOW(NTBFAB_LEND_IOC_MAGIC, 0x05, struct ntbfab_lend_cfg_set)
#define NTBFAB_LEND_IOC_PEER_ADD _IOW(NTBFAB_LEND_IOC_MAGIC, 0x06, struct ntbfab_lend_peer)

#endif /* _UAPI_NTBFAB_LEND_H */
