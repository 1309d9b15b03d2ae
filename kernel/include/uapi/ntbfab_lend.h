/* SPDX-License-Identifier: ((GPL-2.0-only WITH Linux-syscall-note) OR MIT) */
/*
 * ntbfab_lend.h - the interface between ntbfabd and ntbfab's kernel modules:
 * ntbfab_shadow, which puts borrowed devices into the borrower's kernel as
 * hot-added "shadow devices", and ntbfab_mdev, which passes them through to
 * virtual machines as mediated devices (docs/kernel.md).  The character device
 * is /dev/ntbfab-lend (ntbfab_shadow's); ntbfab_mdev adds its requests to it.
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
 *   shadow device's driver then returns it.  NTBFAB_LEND_IOC_PEER_DEL takes it
 *   back when the target goes; the shadow device's own go with it.  The
 *   module's debugfs file ntbfab_shadow/peers lists them (read-only).
 * - VM pass-through (article section 5, ntbfab_mdev loaded: the feature
 *   NTBFAB_LEND_FEAT_MDEV): a borrower's daemon tells the module the pool
 *   (NTBFAB_LEND_IOC_MDEV_POOL) and the module offers one mdev type per device
 *   of it.  Creating an instance borrows nothing.  The module asks the daemon
 *   with records: DESCRIBE when a VMM opens an instance (the daemon answers
 *   with the device's config space, NTBFAB_LEND_IOC_MDEV_CONFIG), BORROW when
 *   the guest enables bus mastering (the daemon borrows and answers with
 *   NTBFAB_LEND_IOC_MDEV_GRANT), CFG_WRITE for each config write of the guest
 *   while the device is borrowed, RETURN when the guest releases the device,
 *   the VMM resets it or the VM stops (the last three answered with
 *   NTBFAB_LEND_IOC_MDEV_DONE).  The guest's vCPU waits for the answer, so
 *   everything the device does follows what the guest did, in order.
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

#define NTBFAB_LEND_VERSION		2
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
/* ntbfab_mdev is loaded: the NTBFAB_LEND_IOC_MDEV_* requests are served. */
#define NTBFAB_LEND_FEAT_MDEV		_BITUL(1)

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

/*
 * NTBFAB_LEND_IOC_PEER_DEL takes the same structure: the range PEER_ADD gave
 * the shadow device with these @phys and @size (@dev_addr is not compared) is
 * withdrawn; -ENOENT if it has none.  A dma_map_resource() of it then fails.
 */

/* ntbfab_lend_msg.kind */
#define NTBFAB_LEND_MSG_CFG_WRITE	1 /* the driver wrote config space */
#define NTBFAB_LEND_MSG_REMOVED		2 /* the shadow device is gone (@value: why) */
#define NTBFAB_LEND_MSG_OVERFLOW	3 /* records were lost: resend what the lender has */
/*
 * mdev requests (@shadow_id is the instance; each is answered once, by the
 * ioctl named, with the record's @seq; the module waits for the answer).
 */
#define NTBFAB_LEND_MSG_MDEV_DESCRIBE	4 /* @value: fdid; answer: MDEV_CONFIG */
#define NTBFAB_LEND_MSG_MDEV_BORROW	5 /* @value: fdid; answer: MDEV_GRANT */
#define NTBFAB_LEND_MSG_MDEV_CFG_WRITE	6 /* as CFG_WRITE; answer: MDEV_DONE (@value: dword) */
#define NTBFAB_LEND_MSG_MDEV_RETURN	7 /* @value: NTBFAB_LEND_MDEV_WHY_*; answer: MDEV_DONE */

/* ntbfab_lend_msg.value for NTBFAB_LEND_MSG_REMOVED */
#define NTBFAB_LEND_GONE_EXPORT		1 /* its export was withdrawn */

/* ntbfab_lend_msg.value for NTBFAB_LEND_MSG_MDEV_RETURN: why the device goes back */
#define NTBFAB_LEND_MDEV_WHY_RELEASED	1 /* the guest cleared Bus Master */
#define NTBFAB_LEND_MDEV_WHY_RESET	2 /* the VMM reset the device (VFIO_DEVICE_RESET) */
#define NTBFAB_LEND_MDEV_WHY_CLOSED	3 /* the VMM closed it: the VM stopped */
#define NTBFAB_LEND_MDEV_WHY_LOST	4 /* the lender withdrew it: already torn down here */
#define NTBFAB_LEND_MDEV_WHY_REMOVED	5 /* the instance was removed */

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

/* ---- VM pass-through: ntbfab_mdev ----------------------------------------------------- */

#define NTBFAB_LEND_MDEV_MAX_TYPES	256	/* devices a pool offers */
#define NTBFAB_LEND_MDEV_MAX_RANGES	64	/* guest memory ranges an instance reports */
#define NTBFAB_LEND_MDEV_MAX_PEERS	16	/* peer BARs a grant maps */
#define NTBFAB_LEND_MDEV_WHY_LEN	160

/**
 * struct ntbfab_lend_mdev_type - one device of the pool, offered as an mdev
 * type ("ntbfab-" and the fdid in four hex digits).
 * @fdid:	its fabric-wide id.
 * @vendor:	PCI vendor id (shown in the type's description).
 * @device:	PCI device id.
 * @class_code: PCI class (24 bits).
 * @reserved:	0.
 * @name:	NUL-terminated: the lender and the device ("lender.nvme0").
 */
struct ntbfab_lend_mdev_type {
	__u32 fdid;
	__u16 vendor;
	__u16 device;
	__u32 class_code;
	__u32 reserved;
	char name[48];
};

/**
 * NTBFAB_LEND_IOC_MDEV_POOL - the devices this daemon may borrow for VMs.  The
 * file's mdev parent (the device "ntbfab-@node" of class ntbfab, under
 * /sys/class/mdev_bus) is created at the first call and offers one type per
 * entry.  A parent outlives the file: the next daemon of that node names it
 * again and takes over its instances (their borrows continue).  While any
 * instance exists, a different pool is -EBUSY: types cannot change under an
 * instance.
 * @flags:	in: 0.
 * @count:	in: entries of @types, at most NTBFAB_LEND_MDEV_MAX_TYPES.
 * @types:	in: user pointer to struct ntbfab_lend_mdev_type[@count].
 * @node:	in: NUL-terminated node name: letters, digits, '-', '_', '.'.
 * @reserved:	in: 0.
 */
struct ntbfab_lend_mdev_pool {
	__u32 flags;
	__u32 count;
	__u64 types;
	char node[32];
	__u64 reserved[2];
};

/* ntbfab_lend_mdev_entry.state */
#define NTBFAB_LEND_MDEV_IDLE		0 /* no VMM has it open */
#define NTBFAB_LEND_MDEV_OPEN		1 /* a VMM has it open; nothing borrowed */
#define NTBFAB_LEND_MDEV_BORROWING	2 /* a BORROW request waits for the daemon */
#define NTBFAB_LEND_MDEV_BORROWED	3 /* the guest has the device */
#define NTBFAB_LEND_MDEV_LOST		4 /* the lender withdrew it; the guest sees it removed */

/**
 * struct ntbfab_lend_mdev_entry - one instance (NTBFAB_LEND_IOC_MDEV_LIST).
 * @instance:	the module's id of it (records name it in @shadow_id).
 * @fdid:	the device of its type.
 * @uuid:	the instance's UUID (its name under /sys/bus/mdev/devices).
 * @state:	NTBFAB_LEND_MDEV_*.
 * @reserved:	0.
 */
struct ntbfab_lend_mdev_entry {
	__u32 instance;
	__u32 fdid;
	__u8 uuid[16];
	__u32 state;
	__u32 reserved;
};

/**
 * NTBFAB_LEND_IOC_MDEV_LIST - the instances of this file's parent.
 * @count:	in: entries @entries holds; out: instances there are (may be
 *		more than were written).
 * @reserved:	in: 0.
 * @entries:	in: user pointer to struct ntbfab_lend_mdev_entry[@count].
 */
struct ntbfab_lend_mdev_list {
	__u32 count;
	__u32 reserved;
	__u64 entries;
};

/* A range of guest-physical addresses: where the VMM mapped guest RAM. */
struct ntbfab_lend_mdev_range {
	__u64 gpa;
	__u64 size;
};

/**
 * NTBFAB_LEND_IOC_MDEV_INFO - what the daemon needs to decide a BORROW: the
 * guest's memory layout, discovered when the guest enabled bus mastering (the
 * ranges the VMM mapped for DMA, writable, probed by pinning them: article 5.2)
 * and the BAR addresses the guest wrote into config space (article 5.3).
 * @instance:	in.
 * @fdid:	out: the device of its type.
 * @uuid:	out.
 * @state:	out: NTBFAB_LEND_MDEV_*.
 * @nr_ranges:	in: entries @ranges holds; out: ranges of the layout (may be
 *		more than were written).
 * @ranges:	in: user pointer to struct ntbfab_lend_mdev_range[@nr_ranges],
 *		ascending.
 * @pinned:	out: bytes of guest RAM pinned.
 * @bars:	out: the guest-physical address of each BAR (0: none or not
 *		written yet; the upper half of a 64-bit BAR reads 0).
 * @bar_sizes:	out: each BAR's size.
 * @vm:		out: the VM's id: instances opened by one VMM share it
 *		(peer-to-peer between a VM's devices, article 5.3).
 * @reserved:	out: 0.
 */
struct ntbfab_lend_mdev_info {
	__u32 instance;
	__u32 fdid;
	__u8 uuid[16];
	__u32 state;
	__u32 nr_ranges;
	__u64 ranges;
	__u64 pinned;
	__u64 bars[6];
	__u64 bar_sizes[6];
	__u64 vm;
	__u64 reserved[2];
};

/**
 * NTBFAB_LEND_IOC_MDEV_CONFIG - the answer to DESCRIBE: the device as the
 * guest first sees it.  Reads of the instance's config space are answered from
 * this copy until the device is borrowed.
 * @instance:	in.
 * @status:	in: 0, or a negative errno: the VMM's open fails, and @why is
 *		logged.
 * @seq:	in: the DESCRIBE record's seq.
 * @config:	in: user pointer to @config_size bytes.
 * @config_size: in: 256 or NTBFAB_LEND_CFG_SIZE.
 * @reserved0:	in: 0.
 * @bar_sizes:	in: the size of each BAR (0: none; the upper half of a 64-bit
 *		BAR: 0).  Powers of two.
 * @why:	in: NUL-terminated, when @status is not 0.
 * @reserved:	in: 0.
 */
struct ntbfab_lend_mdev_config {
	__u32 instance;
	__s32 status;
	__u64 seq;
	__u64 config;
	__u32 config_size;
	__u32 reserved0;
	__u64 bar_sizes[6];
	char why[NTBFAB_LEND_MDEV_WHY_LEN];
	__u64 reserved[2];
};

/**
 * struct ntbfab_lend_mdev_window - a DMA window of guest-physical addresses:
 * every page of guest RAM inside it is mapped for the device at its
 * guest-physical address (article 5.2: a low and a high one).
 */
struct ntbfab_lend_mdev_window {
	__u64 gpa;
	__u64 size;
};

/**
 * struct ntbfab_lend_mdev_peer - another device's BAR, reached by this device
 * at the guest-physical address the guest gave that BAR (article 5.3).
 * @gpa:	the guest's address of the target BAR (page aligned).
 * @size:	page aligned, not 0.
 * @dev_addr:	the address the device uses to reach it, as the daemon
 *		resolved it (article 4.4).
 */
struct ntbfab_lend_mdev_peer {
	__u64 gpa;
	__u64 size;
	__u64 dev_addr;
};

/**
 * NTBFAB_LEND_IOC_MDEV_GRANT - the answer to BORROW.
 * @instance:	in.
 * @status:	in: 0: borrowed; a negative errno: refused (the guest's device
 *		stays absent: its registers read all ones, and @why is logged).
 * @seq:	in: the BORROW record's seq.
 * @flags:	in: NTBFAB_LEND_ATTACH_LOOPBACK when borrowed.
 * @nr_peers:	in: entries of @peers.
 * @export_id:	in: loopback: the lender's export of the device.
 * @config:	in: user pointer to @config_size bytes: the device's config
 *		space now.  After the grant, the module sends the registers the
 *		guest wrote before the borrow as CFG_WRITE requests (in offset
 *		order), before the guest's write that enabled bus mastering
 *		completes.
 * @config_size: in: 256 or NTBFAB_LEND_CFG_SIZE.
 * @reserved0:	in: 0.
 * @windows:	in: the low and the high window (size 0: none); inside them
 *		the pinned guest RAM is mapped, the rest is unpinned.
 * @peers:	in: user pointer to struct ntbfab_lend_mdev_peer[@nr_peers].
 * @why:	in: NUL-terminated, when @status is not 0.
 * @reserved:	in: 0.
 */
struct ntbfab_lend_mdev_grant {
	__u32 instance;
	__s32 status;
	__u64 seq;
	__u32 flags;
	__u32 nr_peers;
	__u64 export_id;
	__u64 config;
	__u32 config_size;
	__u32 reserved0;
	struct ntbfab_lend_mdev_window windows[2];
	__u64 peers;
	char why[NTBFAB_LEND_MDEV_WHY_LEN];
	__u64 reserved[2];
};

/**
 * NTBFAB_LEND_IOC_MDEV_DONE - the answer to CFG_WRITE or RETURN.
 * @instance:	in.
 * @status:	in: 0 or a negative errno (logged).
 * @seq:	in: the record's seq.
 * @value:	in: CFG_WRITE: the dword at the write's offset, as the device
 *		now has it.
 * @reserved:	in: 0.
 */
struct ntbfab_lend_mdev_done {
	__u32 instance;
	__s32 status;
	__u64 seq;
	__u32 value;
	__u32 reserved;
};

/**
 * NTBFAB_LEND_IOC_MDEV_PEER - a peer BAR for a borrowed instance, after its
 * grant (another device of the VM was borrowed later).
 * @instance:	in.
 * @reserved:	in: 0.
 * @peer:	in.
 */
struct ntbfab_lend_mdev_peer_add {
	__u32 instance;
	__u32 reserved;
	struct ntbfab_lend_mdev_peer peer;
};

#define NTBFAB_LEND_IOC_VERSION	_IOR(NTBFAB_LEND_IOC_MAGIC, 0x00, struct ntbfab_lend_version)
#define NTBFAB_LEND_IOC_EXPORT	_IOWR(NTBFAB_LEND_IOC_MAGIC, 0x01, struct ntbfab_lend_export)
#define NTBFAB_LEND_IOC_UNEXPORT _IOW(NTBFAB_LEND_IOC_MAGIC, 0x02, struct ntbfab_lend_unexport)
#define NTBFAB_LEND_IOC_ATTACH	_IOWR(NTBFAB_LEND_IOC_MAGIC, 0x03, struct ntbfab_lend_attach)
#define NTBFAB_LEND_IOC_DETACH	_IOWR(NTBFAB_LEND_IOC_MAGIC, 0x04, struct ntbfab_lend_detach)
#define NTBFAB_LEND_IOC_CFG_SET	_IOW(NTBFAB_LEND_IOC_MAGIC, 0x05, struct ntbfab_lend_cfg_set)
#define NTBFAB_LEND_IOC_PEER_ADD _IOW(NTBFAB_LEND_IOC_MAGIC, 0x06, struct ntbfab_lend_peer)
#define NTBFAB_LEND_IOC_PEER_DEL _IOW(NTBFAB_LEND_IOC_MAGIC, 0x07, struct ntbfab_lend_peer)

/* ntbfab_mdev's (-ENOTTY while it is not loaded) */
#define NTBFAB_LEND_IOC_MDEV_POOL \
	_IOW(NTBFAB_LEND_IOC_MAGIC, 0x10, struct ntbfab_lend_mdev_pool)
#define NTBFAB_LEND_IOC_MDEV_LIST \
	_IOWR(NTBFAB_LEND_IOC_MAGIC, 0x11, struct ntbfab_lend_mdev_list)
#define NTBFAB_LEND_IOC_MDEV_INFO \
	_IOWR(NTBFAB_LEND_IOC_MAGIC, 0x12, struct ntbfab_lend_mdev_info)
#define NTBFAB_LEND_IOC_MDEV_CONFIG \
	_IOW(NTBFAB_LEND_IOC_MAGIC, 0x13, struct ntbfab_lend_mdev_config)
#define NTBFAB_LEND_IOC_MDEV_GRANT \
	_IOW(NTBFAB_LEND_IOC_MAGIC, 0x14, struct ntbfab_lend_mdev_grant)
#define NTBFAB_LEND_IOC_MDEV_DONE \
	_IOW(NTBFAB_LEND_IOC_MAGIC, 0x15, struct ntbfab_lend_mdev_done)
#define NTBFAB_LEND_IOC_MDEV_PEER \
	_IOW(NTBFAB_LEND_IOC_MAGIC, 0x16, struct ntbfab_lend_mdev_peer_add)

#endif /* _UAPI_NTBFAB_LEND_H */
