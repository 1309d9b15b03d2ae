/* SPDX-License-Identifier: ((GPL-2.0-only WITH Linux-syscall-note) OR MIT) */
/*
 * ntbfab_ntb.h - the user-space interface of ntbfab_ntb, the NTB client that
 * gives each NTB device of the Linux NTB framework a character device,
 * /dev/ntbfab-ntbN (docs/linux-ntb.md).
 *
 * This header is the contract between the kernel module (kernel/ntbfab_ntb.c)
 * and user space (ntbfabd's linux-ntb backend, the tests).  Rules:
 *
 * - Every structure has fixed-size fields, explicit padding and a size that is
 *   a multiple of 8 bytes, so it has the same layout for 32- and 64-bit user
 *   space.  The ioctl number encodes the structure's size: a structure that
 *   changes size is a new ioctl.  tests/unit/test_ntbfab_uapi.c checks the
 *   size and offset of every field.
 * - Every "flags" field that is an input accepts only the flags defined here,
 *   and every "reserved" field must be zero: anything else is -EINVAL, so that
 *   a later version can give them a meaning.
 * - NTBFAB_IOC_VERSION says which version of this interface the module
 *   implements.  An incompatible change increases NTBFAB_NTB_VERSION;
 *   additions are announced in ntbfab_version.features.
 *
 * Indexes follow include/linux/ntb.h: "pidx" is a peer index (0 .. peer_count
 * - 1, not a port number), "widx" a memory window index, "sidx" a scratchpad
 * index, "midx" a message register index.
 *
 * Who may do what: one open file of a device at a time may be opened for
 * writing (O_RDWR or O_WRONLY); it is the owner (ntbfabd), and a second open
 * for writing fails with EBUSY.  Any number of read-only opens may coexist
 * with it (tools, monitors): they may use every ioctl that only reads, read()
 * events and register eventfds; an ioctl that changes the device returns
 * EPERM on them, and they cannot mmap().
 *
 * When the owner's file is released (close of the last descriptor, which
 * includes the exit of a killed process), the module undoes everything the
 * owner set, in this order: the link, if the owner enabled it, is disabled
 * (the peer sees the link go down); every inbound and outbound translation is
 * cleared; every mapping of the peer's windows made through the owner's file
 * or its window descriptors (NTBFAB_IOC_PEER_MW_FD) is torn down; every
 * doorbell and message status bit is masked again; every local scratchpad is
 * set to 0 (those the peer wrote for the owner too).  Buffers (NTBFAB_IOC_BUF_ALLOC) are not the
 * owner's: each lives until its last descriptor and its last mapping are gone
 * and no translation uses it, so a buffer passed to another process stays
 * valid (without a translation, the peer cannot reach it).
 *
 * With no owner, every doorbell bit and every message status bit is masked
 * and the module programs no translation.
 *
 * When the NTB device goes away (its hardware driver is unbound), all of the
 * above is undone too, every mapping of a buffer or window is torn down
 * (later accesses raise SIGBUS), the buffers' memory is freed, ioctls return
 * ENODEV, poll() reports EPOLLHUP and read() returns an NTBFAB_EVENT_REMOVED
 * record, then 0.
 */
#ifndef _UAPI_NTBFAB_NTB_H
#define _UAPI_NTBFAB_NTB_H

#include <linux/ioctl.h>
#include <linux/types.h>

/* The version of this interface (ntbfab_version.version). */
#define NTBFAB_NTB_VERSION		1

#define NTBFAB_IOC_MAGIC		0xB8

/*
 * mmap() of a peer memory window on the device file: the offset is the
 * window's ntbfab_peer_mw_info.mmap_offset plus a page-aligned offset inside
 * the window.  The window's index is in the bits at and above
 * NTBFAB_MMAP_MW_SHIFT.
 */
#define NTBFAB_MMAP_MW_SHIFT		40

/* Open files of a device may register this many eventfds each. */
#define NTBFAB_EVENTFD_MAX		64

/**
 * NTBFAB_IOC_VERSION - which interface the module implements.  Any opener.
 * @version:	out: NTBFAB_NTB_VERSION of the module.
 * @features:	out: NTBFAB_FEAT_* bits (none are defined by version 1).
 * @event_size:	out: the size of the records read() returns,
 *		sizeof(struct ntbfab_event).
 * @reserved:	out: 0.
 */
struct ntbfab_version {
	__u32 version;
	__u32 features;
	__u32 event_size;
	__u32 reserved;
};

/* ntbfab_info.flags */
#define NTBFAB_INFO_MW_SET_TRANS	(1U << 0) /* inbound translation: NTBFAB_IOC_MW_SET_TRANS */
#define NTBFAB_INFO_PEER_MW_SET_TRANS	(1U << 1) /* outbound: NTBFAB_IOC_PEER_MW_SET_TRANS */
#define NTBFAB_INFO_DB_UNSAFE		(1U << 2) /* ntb_db_is_unsafe(): doorbells may be lost */
#define NTBFAB_INFO_SPAD_UNSAFE		(1U << 3) /* ntb_spad_is_unsafe() */
#define NTBFAB_INFO_PEER_SPAD_READ	(1U << 4) /* the peer's scratchpads can be read */
#define NTBFAB_INFO_DB_SET		(1U << 5) /* NTBFAB_IOC_DB_SET (set local bits) works */
#define NTBFAB_INFO_MSG_MASK		(1U << 6) /* NTBFAB_IOC_MSG_MASK and _UNMASK work */

/* ntbfab_info.topology: include/linux/ntb.h's enum ntb_topo */
#define NTBFAB_TOPO_NONE		0
#define NTBFAB_TOPO_PRI			1
#define NTBFAB_TOPO_SEC			2
#define NTBFAB_TOPO_B2B_USD		3
#define NTBFAB_TOPO_B2B_DSD		4
#define NTBFAB_TOPO_SWITCH		5
#define NTBFAB_TOPO_CROSSLINK		6

/**
 * NTBFAB_IOC_INFO - what the NTB device has.  Any opener.
 * @flags:		out: NTBFAB_INFO_* bits.
 * @port:		out: the local port number (ntb_port_number()).
 * @peer_count:		out: number of peers (ntb_peer_port_count()); per peer
 *			see NTBFAB_IOC_PEER_INFO.
 * @topology:		out: NTBFAB_TOPO_*.
 * @peer_mw_count:	out: outbound memory windows, the local BARs that reach
 *			the peers (ntb_peer_mw_count()); see
 *			NTBFAB_IOC_PEER_MW_INFO.
 * @db_vector_count:	out: doorbell interrupt vectors (ntb_db_vector_count()).
 * @db_valid_mask:	out: the doorbell bits that exist (ntb_db_valid_mask()).
 * @spad_count:		out: scratchpads (ntb_spad_count()), 0 if none.
 * @msg_count:		out: message registers (ntb_msg_count()), 0 if none.
 * @msg_inbits:		out: the inbound bits of the message status
 *			(ntb_msg_inbits()).
 * @msg_outbits:	out: its outbound (failure) bits (ntb_msg_outbits()).
 * @minor:		out: N of /dev/ntbfab-ntbN.
 * @reserved:		out: 0.
 * @ntb_name:		out: the NTB device's name on the ntb bus (the PCI
 *			function's name, "0000:03:00.1"), NUL-terminated.
 * @driver:		out: the name of the hardware driver bound to the PCI
 *			function ("ntb_hw_intel"), NUL-terminated.
 */
struct ntbfab_info {
	__u32 flags;
	__s32 port;
	__u32 peer_count;
	__u32 topology;
	__u32 peer_mw_count;
	__u32 db_vector_count;
	__u64 db_valid_mask;
	__u32 spad_count;
	__u32 msg_count;
	__u64 msg_inbits;
	__u64 msg_outbits;
	__u32 minor;
	__u32 reserved;
	char ntb_name[32];
	char driver[32];
};

/* ntbfab_peer_info.flags (out) */
#define NTBFAB_PEER_LINK_UP		(1U << 0)

/**
 * NTBFAB_IOC_PEER_INFO - one peer.  Any opener.
 * @pidx:	in: the peer index.
 * @flags:	in: 0; out: NTBFAB_PEER_LINK_UP when the link to it is up.
 * @port:	out: its port number (ntb_peer_port_number()).
 * @mw_count:	out: inbound memory windows for this peer (ntb_mw_count()):
 *		the windows through which the peer reaches local memory, see
 *		NTBFAB_IOC_MW_INFO.
 */
struct ntbfab_peer_info {
	__u32 pidx;
	__u32 flags;
	__s32 port;
	__u32 mw_count;
};

/* ntbfab_mw_info.flags (out) */
#define NTBFAB_MW_ALIGN_VALID		(1U << 0) /* the three limits below are known */
#define NTBFAB_MW_TRANS_SET		(1U << 1) /* the module has a translation programmed */

/**
 * NTBFAB_IOC_MW_INFO - one inbound memory window and its translation.  Any
 * opener.
 * @pidx:		in: the peer index.
 * @widx:		in: the window index (< ntbfab_peer_info.mw_count).
 * @flags:		in: 0; out: NTBFAB_MW_* bits.
 * @buf_id:		out: with NTBFAB_MW_TRANS_SET, the id of the buffer the
 *			window translates to.
 * @addr_align:		out: with NTBFAB_MW_ALIGN_VALID, the alignment the
 *			translated address needs (ntb_mw_get_align()).
 * @size_align:		out: the alignment the translated size needs.
 * @size_max:		out: the largest size the window translates.
 * @trans_addr:		out: with NTBFAB_MW_TRANS_SET, the DMA address the
 *			window translates to.
 * @trans_size:		out: and the size it translates.
 * @trans_pid:		out: the process (thread group id, in the caller's pid
 *			namespace) whose open file set the translation, 0 if
 *			it is not visible there.
 * @reserved:		out: 0.
 *
 * The Linux NTB framework reports the alignment limits only while the link
 * to the peer is up (on some hardware they are the peer's): before that,
 * NTBFAB_MW_ALIGN_VALID is clear and the three limits are 0.  Ask again after
 * a link event.
 *
 * The translation fields are what the module programmed and has not cleared:
 * the NTB framework has no way to read a translation back from the hardware.
 */
struct ntbfab_mw_info {
	__u32 pidx;
	__u32 widx;
	__u32 flags;
	__u32 buf_id;
	__u64 addr_align;
	__u64 size_align;
	__u64 size_max;
	__u64 trans_addr;
	__u64 trans_size;
	__u32 trans_pid;
	__u32 reserved;
};

/* ntbfab_peer_mw_info.flags (out) */
#define NTBFAB_PEER_MW_TRANS_SET	(1U << 0)

/**
 * NTBFAB_IOC_PEER_MW_INFO - one outbound memory window (a region of a local
 * BAR whose stores and loads reach a peer).  Any opener.
 * @widx:		in: the window index (< ntbfab_info.peer_mw_count).
 * @flags:		in: 0; out: NTBFAB_PEER_MW_TRANS_SET.
 * @phys_addr:		out: the window's physical (bus) address, what a device
 *			of this host DMAs to in order to reach the peer
 *			(ntb_peer_mw_get_addr()).
 * @size:		out: the window's size.
 * @mmap_offset:	out: the mmap() offset of the window's first byte on the
 *			device file.
 * @trans_addr:		out: with NTBFAB_PEER_MW_TRANS_SET, the peer address the
 *			window is translated to (NTBFAB_IOC_PEER_MW_SET_TRANS).
 * @trans_size:		out: and the size.
 * @trans_pidx:		out: and the peer it was set for.
 * @reserved:		out: 0.
 */
struct ntbfab_peer_mw_info {
	__u32 widx;
	__u32 flags;
	__u64 phys_addr;
	__u64 size;
	__u64 mmap_offset;
	__u64 trans_addr;
	__u64 trans_size;
	__u32 trans_pidx;
	__u32 reserved;
};

/**
 * NTBFAB_IOC_LINK_STATUS - the link.  Any opener.
 * @up:		out: bit p is set when the link to peer index p is up
 *		(ntb_link_is_up()).
 * @speed:	out: the PCIe generation of the link (1 = 2.5 GT/s ... 4 =
 *		16 GT/s), 0 when down.
 * @width:	out: the number of lanes, 0 when down.
 * @flags:	out: NTBFAB_LINK_ENABLED when the owner enabled the link through
 *		the module and has not disabled it.
 * @reserved:	out: 0.
 *
 * NTBFAB_IOC_LINK_ENABLE - enable the link (ntb_link_enable()).  Owner only.
 * @speed and @width are in: the largest speed and width to train to, -1 for
 * no limit (most hardware ignores both); @up, @flags and @reserved must be 0.
 * The link comes up when both sides have enabled it: wait for an
 * NTBFAB_EVENT_LINK event.
 *
 * NTBFAB_IOC_LINK_DISABLE - disable the link (ntb_link_disable()).  Owner
 * only.  The argument must be 0.
 */
struct ntbfab_link {
	__u64 up;
	__s32 speed;
	__s32 width;
	__u32 flags;
	__u32 reserved;
};

/* ntbfab_link.flags (out) */
#define NTBFAB_LINK_ENABLED		(1U << 0)

/**
 * NTBFAB_IOC_BUF_ALLOC - allocate a buffer for inbound translation.  Owner
 * only.
 * @size:	in: bytes, rounded up to the page size; out: the rounded size.
 *		At most the module parameter max_buf_size.
 * @flags:	in: 0.
 * @fd:		out: a new file descriptor of the buffer (O_RDWR, close-on-exec).
 * @dma_addr:	out: the buffer's address for the NTB's PCI function, the
 *		address a translation points at.  An NTB that translates on
 *		the outbound side (NTBFAB_INFO_PEER_MW_SET_TRANS) needs the
 *		peer to know it.
 * @id:		out: the buffer's id on this device (never reused while the
 *		module is loaded).
 * @reserved:	in: 0.
 *
 * The memory is physically contiguous DMA memory of the NTB's PCI function
 * (dma_alloc_coherent()), zeroed.  The descriptor can be mmap()ed
 * (MAP_SHARED, at page-aligned offsets inside the buffer), passed to other
 * processes (SCM_RIGHTS) and given to NTBFAB_IOC_MW_SET_TRANS.  On the
 * buffer's descriptor NTBFAB_IOC_BUF_INFO describes it.  The memory is freed
 * when the last descriptor is closed, the last mapping is gone and no
 * translation uses it.
 */
struct ntbfab_buf_alloc {
	__u64 size;
	__u32 flags;
	__s32 fd;
	__u64 dma_addr;
	__u32 id;
	__u32 reserved;
};

/* ntbfab_buf_info.flags (out) */
#define NTBFAB_BUF_REVOKED		(1U << 0) /* its NTB device is gone: memory freed */

/**
 * NTBFAB_IOC_BUF_INFO - on a buffer's file descriptor: what it is.
 * @size:	out: its size in bytes.
 * @dma_addr:	out: its DMA address on the NTB's PCI function.
 * @id:		out: its id.
 * @minor:	out: N of the /dev/ntbfab-ntbN it belongs to.
 * @flags:	out: NTBFAB_BUF_REVOKED.
 * @trans_count: out: how many inbound windows translate to it now.
 */
struct ntbfab_buf_info {
	__u64 size;
	__u64 dma_addr;
	__u32 id;
	__u32 minor;
	__u32 flags;
	__u32 trans_count;
};

/**
 * NTBFAB_IOC_MW_SET_TRANS - point inbound window @widx of peer @pidx at a
 * range of a buffer (ntb_mw_set_trans()): the peer's stores into its
 * outbound window land there.  Owner only; needs NTBFAB_INFO_MW_SET_TRANS
 * (else EOPNOTSUPP).
 * @pidx:	in: the peer index.
 * @widx:	in: the window index.
 * @flags:	in: 0.
 * @buf_fd:	in: a buffer descriptor of the same device.
 * @offset:	in: the range's offset in the buffer.
 * @size:	in: the range's size (> 0).
 *
 * The range must lie inside the buffer; while the link is up, the address
 * and size must meet the window's limits (NTBFAB_IOC_MW_INFO), and the
 * hardware driver may refuse others (EINVAL).  A window that already
 * translates is pointed at the new range.  The translation keeps the buffer
 * alive until it is cleared.
 */
struct ntbfab_mw_trans {
	__u32 pidx;
	__u32 widx;
	__u32 flags;
	__s32 buf_fd;
	__u64 offset;
	__u64 size;
};

/**
 * NTBFAB_IOC_MW_CLEAR_TRANS, NTBFAB_IOC_PEER_MW_CLEAR_TRANS - clear the
 * translation of inbound window @widx of peer @pidx (ntb_mw_clear_trans()),
 * or of outbound window @widx set for peer @pidx
 * (ntb_peer_mw_clear_trans()).  Owner only.  Clearing a window that does not
 * translate is not an error.
 * @pidx:	in: the peer index.
 * @widx:	in: the window index.
 * @flags:	in: 0.
 * @reserved:	in: 0.
 */
struct ntbfab_mw_ref {
	__u32 pidx;
	__u32 widx;
	__u32 flags;
	__u32 reserved;
};

/**
 * NTBFAB_IOC_PEER_MW_SET_TRANS - point outbound window @widx at an address
 * of peer @pidx (ntb_peer_mw_set_trans()), on hardware that translates on
 * the outbound side (IDT).  Owner only; needs NTBFAB_INFO_PEER_MW_SET_TRANS
 * (else EOPNOTSUPP).
 * @pidx:	in: the peer index.
 * @widx:	in: the outbound window index.
 * @flags:	in: 0.
 * @reserved:	in: 0.
 * @addr:	in: the address in the peer (its buffer's dma_addr).
 * @size:	in: bytes (> 0, at most the window's size).
 */
struct ntbfab_peer_mw_trans {
	__u32 pidx;
	__u32 widx;
	__u32 flags;
	__u32 reserved;
	__u64 addr;
	__u64 size;
};

/**
 * NTBFAB_IOC_PEER_MW_FD - a file descriptor that maps one page-aligned range
 * of outbound window @widx and nothing else, to give a process access to a
 * part of a peer's memory without the owner's descriptor.  Owner only.
 * @widx:	in: the outbound window index.
 * @flags:	in: 0.
 * @offset:	in: the range's offset in the window (page-aligned).
 * @size:	in: its size (page-aligned, > 0).
 * @fd:		out: the new descriptor (O_RDWR, close-on-exec).  mmap() it
 *		MAP_SHARED at page-aligned offsets 0 .. @size; it can be passed
 *		to other processes.
 * @reserved:	in: 0.
 *
 * The descriptor's mappings are write-combined like the owner's, and end
 * with the owner: when the owner's file is released they are torn down, and
 * later mmap() calls fail with ENODEV.
 */
struct ntbfab_peer_mw_fd {
	__u32 widx;
	__u32 flags;
	__u64 offset;
	__u64 size;
	__s32 fd;
	__u32 reserved;
};

/**
 * Doorbells and message status bits: struct ntbfab_bits.
 * @bits:	the bits (in or out, see each ioctl).
 * @flags:	in: 0.
 * @reserved:	in: 0.
 *
 * Local doorbells.  When a doorbell interrupt arrives, the module reads the
 * bits of that vector, clears them in the hardware (so that no hardware keeps
 * interrupting) and keeps them in a pending word until user space clears
 * them; an NTBFAB_EVENT_DB event carries the bits of that interrupt.
 *
 * NTBFAB_IOC_DB_READ - out: the pending bits, including bits that arrived
 *	while masked (ntb_db_read()).  Any opener.
 * NTBFAB_IOC_DB_CLEAR - in: clear these pending bits.  Owner only.
 * NTBFAB_IOC_DB_SET - in: set these local bits as if the peer had rung them
 *	(ntb_db_set()); needs NTBFAB_INFO_DB_SET.  Owner only.
 * NTBFAB_IOC_DB_READ_MASK - out: the masked bits.  Any opener.
 * NTBFAB_IOC_DB_MASK, NTBFAB_IOC_DB_UNMASK - in: mask or unmask these bits
 *	(ntb_db_set_mask(), ntb_db_clear_mask()).  A masked bit still becomes
 *	pending but raises no interrupt; whether unmasking a pending bit raises
 *	one depends on the hardware.  Owner only.
 * NTBFAB_IOC_PEER_DB_SET - in: ring these bits of the peer
 *	(ntb_peer_db_set()).  Owner only.
 *
 * Every bit must be in ntbfab_info.db_valid_mask (else EINVAL).  Bits rung for an
 * earlier owner or another NTB client may still be pending when an owner opens
 * the device: clear them before unmasking.
 *
 * Messages (hardware with message registers, ntbfab_info.msg_count > 0,
 * else EOPNOTSUPP):
 * NTBFAB_IOC_MSG_STATUS - out: the message status (ntb_msg_read_sts()): the
 *	bits of msg_inbits are set for inbound registers holding a message,
 *	those of msg_outbits for outbound messages that failed.  Any opener.
 * NTBFAB_IOC_MSG_CLEAR - in: clear these status bits (ntb_msg_clear_sts()):
 *	clearing an inbound bit frees its register for the peer's next message.
 *	Owner only.
 * NTBFAB_IOC_MSG_MASK, NTBFAB_IOC_MSG_UNMASK - in: mask or unmask status bits
 *	(ntb_msg_set_mask(), ntb_msg_clear_mask()); needs NTBFAB_INFO_MSG_MASK.
 *	Owner only.
 *
 * Every bit must be in msg_inbits | msg_outbits (else EINVAL).  A message sent
 * for an earlier client may still hold an inbound register (and so refuse the
 * peer's next one) when an owner opens the device: clear the status bits
 * before unmasking.
 */
struct ntbfab_bits {
	__u64 bits;
	__u32 flags;
	__u32 reserved;
};

/* ntbfab_spad.flags (in) */
#define NTBFAB_SPAD_PEER		(1U << 0) /* the scratchpad of peer @pidx */

/**
 * NTBFAB_IOC_SPAD_READ, NTBFAB_IOC_SPAD_WRITE - a scratchpad: a local one
 * (ntb_spad_read(), ntb_spad_write()) or, with NTBFAB_SPAD_PEER, one of peer
 * @pidx (ntb_peer_spad_read(), ntb_peer_spad_write(); reading needs
 * NTBFAB_INFO_PEER_SPAD_READ).  Reading: any opener; writing: owner only.
 * @flags:	in: NTBFAB_SPAD_PEER or 0.
 * @pidx:	in: the peer index with NTBFAB_SPAD_PEER, else 0.
 * @sidx:	in: the scratchpad index (< ntbfab_info.spad_count).
 * @value:	out for READ, in for WRITE.
 */
struct ntbfab_spad {
	__u32 flags;
	__u32 pidx;
	__u32 sidx;
	__u32 value;
};

/**
 * NTBFAB_IOC_MSG_READ - read inbound message register @midx (ntb_msg_read()).
 * Any opener.  The register's status bit stays set until NTBFAB_IOC_MSG_CLEAR.
 * NTBFAB_IOC_MSG_WRITE - send @value to message register @midx of peer @pidx
 * (ntb_peer_msg_write()).  Owner only.  The hardware reports a message the
 * peer had no room for with the outbound status bits, or with an error.
 * @flags:	in: 0.
 * @pidx:	in for WRITE: the peer index; out for READ: the peer that sent
 *		the message; READ needs 0 in.
 * @midx:	in: the message register index (< ntbfab_info.msg_count).
 * @value:	out for READ, in for WRITE.
 */
struct ntbfab_msg {
	__u32 flags;
	__u32 pidx;
	__u32 midx;
	__u32 value;
};

/* Event kinds: ntbfab_eventfd.events */
#define NTBFAB_EV_LINK			(1U << 0)
#define NTBFAB_EV_DB			(1U << 1)
#define NTBFAB_EV_MSG			(1U << 2)

/**
 * NTBFAB_IOC_EVENTFD_ADD - signal an eventfd on events.  Any opener.
 * @fd:		in: an eventfd (eventfd(2)).
 * @events:	in: NTBFAB_EV_* bits, at least one.
 * @db_bits:	in: with NTBFAB_EV_DB, the doorbell bits whose interrupts signal
 *		it (at least one valid bit); 0 without NTBFAB_EV_DB.
 * @id:		out: the registration's id, for NTBFAB_IOC_EVENTFD_DEL.
 * @flags:	in: 0.
 *
 * The eventfd's counter grows by one per event (its reader sees how many
 * arrived since it last read); what happened is in NTBFAB_IOC_LINK_STATUS,
 * NTBFAB_IOC_DB_READ and NTBFAB_IOC_MSG_STATUS, or in the records read()
 * returns.  One eventfd per doorbell bit lets ntbfabd hand each bit's
 * eventfd to the process waiting for it.  Registrations belong to the open
 * file (at most NTBFAB_EVENTFD_MAX) and end when it is released.
 *
 * NTBFAB_IOC_EVENTFD_DEL - the argument is the id: end that registration.
 */
struct ntbfab_eventfd {
	__s32 fd;
	__u32 events;
	__u64 db_bits;
	__u32 id;
	__u32 flags;
};

/* ntbfab_event.type */
#define NTBFAB_EVENT_LINK		1 /* the link changed: @bits, @speed, @width */
#define NTBFAB_EVENT_DB			2 /* a doorbell interrupt: @vector, @bits */
#define NTBFAB_EVENT_MSG		3 /* a message interrupt: @bits = status */
#define NTBFAB_EVENT_LOST		4 /* @bits events did not fit in the queue */
#define NTBFAB_EVENT_REMOVED		5 /* the NTB device is gone */

/**
 * struct ntbfab_event - what read() on the device file returns, whole records
 * only (a buffer shorter than one record is EINVAL).  Each open file has its
 * own queue of 256 records; events that find it full are counted and
 * reported by an NTBFAB_EVENT_LOST record.  read() blocks until a record is
 * there unless the file is O_NONBLOCK (EAGAIN); poll() reports EPOLLIN.
 * @type:	NTBFAB_EVENT_*.
 * @vector:	NTBFAB_EVENT_DB: the interrupt vector.
 * @bits:	NTBFAB_EVENT_LINK: the peers whose link is up (as
 *		ntbfab_link.up); _DB: the doorbell bits this interrupt made
 *		pending; _MSG: the message status; _LOST: how many events were
 *		lost.
 * @seq:	the device's event sequence number (1, 2, ...): every event of
 *		the device has one, whichever files receive it.
 * @speed:	NTBFAB_EVENT_LINK: as ntbfab_link.speed.
 * @width:	NTBFAB_EVENT_LINK: as ntbfab_link.width.
 */
struct ntbfab_event {
	__u32 type;
	__u32 vector;
	__u64 bits;
	__u64 seq;
	__s32 speed;
	__s32 width;
};

/* ntbfab_state.flags (out) */
#define NTBFAB_STATE_OWNED		(1U << 0) /* a file is open for writing */
#define NTBFAB_STATE_LINK_ENABLED	(1U << 1) /* the owner enabled the link */
#define NTBFAB_STATE_REMOVED		(1U << 2) /* the NTB device is gone */

/**
 * NTBFAB_IOC_STATE - what the module holds on the device now, to check that
 * an owner left nothing behind.  Any opener.
 * @flags:		out: NTBFAB_STATE_* bits.
 * @owner_pid:		out: the thread group id (in the caller's pid namespace)
 *			of the process that opened the owner's file, 0 if none
 *			or not visible.
 * @mw_trans:		out: inbound translations programmed.
 * @peer_mw_trans:	out: outbound translations programmed.
 * @bufs:		out: buffers whose memory is not freed yet.
 * @opens:		out: open files of the device.
 * @db_mask:		out: the doorbell bits the module has masked.
 * @spads_written:	out: local scratchpads the owner wrote and has not
 *			written 0 to.
 * @reserved:		out: 0.
 */
struct ntbfab_state {
	__u32 flags;
	__u32 owner_pid;
	__u32 mw_trans;
	__u32 peer_mw_trans;
	__u32 bufs;
	__u32 opens;
	__u64 db_mask;
	__u32 spads_written;
	__u32 reserved;
};

#define NTBFAB_IOC_VERSION		_IOR(NTBFAB_IOC_MAGIC, 0x00, struct ntbfab_version)
#define NTBFAB_IOC_INFO			_IOR(NTBFAB_IOC_MAGIC, 0x01, struct ntbfab_info)
#define NTBFAB_IOC_PEER_INFO		_IOWR(NTBFAB_IOC_MAGIC, 0x02, struct ntbfab_peer_info)
#define NTBFAB_IOC_MW_INFO		_IOWR(NTBFAB_IOC_MAGIC, 0x03, struct ntbfab_mw_info)
#define NTBFAB_IOC_PEER_MW_INFO		_IOWR(NTBFAB_IOC_MAGIC, 0x04, struct ntbfab_peer_mw_info)
#define NTBFAB_IOC_STATE		_IOR(NTBFAB_IOC_MAGIC, 0x05, struct ntbfab_state)

#define NTBFAB_IOC_LINK_STATUS		_IOR(NTBFAB_IOC_MAGIC, 0x10, struct ntbfab_link)
#define NTBFAB_IOC_LINK_ENABLE		_IOW(NTBFAB_IOC_MAGIC, 0x11, struct ntbfab_link)
#define NTBFAB_IOC_LINK_DISABLE		_IO(NTBFAB_IOC_MAGIC, 0x12)

#define NTBFAB_IOC_BUF_ALLOC		_IOWR(NTBFAB_IOC_MAGIC, 0x20, struct ntbfab_buf_alloc)
#define NTBFAB_IOC_BUF_INFO		_IOR(NTBFAB_IOC_MAGIC, 0x21, struct ntbfab_buf_info)
#define NTBFAB_IOC_MW_SET_TRANS		_IOW(NTBFAB_IOC_MAGIC, 0x22, struct ntbfab_mw_trans)
#define NTBFAB_IOC_MW_CLEAR_TRANS	_IOW(NTBFAB_IOC_MAGIC, 0x23, struct ntbfab_mw_ref)
#define NTBFAB_IOC_PEER_MW_SET_TRANS	_IOW(NTBFAB_IOC_MAGIC, 0x24, struct ntbfab_peer_mw_trans)
#define NTBFAB_IOC_PEER_MW_CLEAR_TRANS	_IOW(NTBFAB_IOC_MAGIC, 0x25, struct ntbfab_mw_ref)
#define NTBFAB_IOC_PEER_MW_FD		_IOWR(NTBFAB_IOC_MAGIC, 0x26, struct ntbfab_peer_mw_fd)

#define NTBFAB_IOC_DB_READ		_IOR(NTBFAB_IOC_MAGIC, 0x30, struct ntbfab_bits)
#define NTBFAB_IOC_DB_CLEAR		_IOW(NTBFAB_IOC_MAGIC, 0x31, struct ntbfab_bits)
#define NTBFAB_IOC_DB_SET		_IOW(NTBFAB_IOC_MAGIC, 0x32, struct ntbfab_bits)
#define NTBFAB_IOC_DB_READ_MASK		_IOR(NTBFAB_IOC_MAGIC, 0x33, struct ntbfab_bits)
#define NTBFAB_IOC_DB_MASK		_IOW(NTBFAB_IOC_MAGIC, 0x34, struct ntbfab_bits)
#define NTBFAB_IOC_DB_UNMASK		_IOW(NTBFAB_IOC_MAGIC, 0x35, struct ntbfab_bits)
#define NTBFAB_IOC_PEER_DB_SET		_IOW(NTBFAB_IOC_MAGIC, 0x36, struct ntbfab_bits)

#define NTBFAB_IOC_SPAD_READ		_IOWR(NTBFAB_IOC_MAGIC, 0x40, struct ntbfab_spad)
#define NTBFAB_IOC_SPAD_WRITE		_IOW(NTBFAB_IOC_MAGIC, 0x41, struct ntbfab_spad)

#define NTBFAB_IOC_MSG_STATUS		_IOR(NTBFAB_IOC_MAGIC, 0x50, struct ntbfab_bits)
#define NTBFAB_IOC_MSG_CLEAR		_IOW(NTBFAB_IOC_MAGIC, 0x51, struct ntbfab_bits)
#define NTBFAB_IOC_MSG_MASK		_IOW(NTBFAB_IOC_MAGIC, 0x52, struct ntbfab_bits)
#define NTBFAB_IOC_MSG_UNMASK		_IOW(NTBFAB_IOC_MAGIC, 0x53, struct ntbfab_bits)
#define NTBFAB_IOC_MSG_READ		_IOWR(NTBFAB_IOC_MAGIC, 0x54, struct ntbfab_msg)
#define NTBFAB_IOC_MSG_WRITE		_IOW(NTBFAB_IOC_MAGIC, 0x55, struct ntbfab_msg)

#define NTBFAB_IOC_EVENTFD_ADD		_IOWR(NTBFAB_IOC_MAGIC, 0x60, struct ntbfab_eventfd)
#define NTBFAB_IOC_EVENTFD_DEL		_IO(NTBFAB_IOC_MAGIC, 0x61)

#endif /* _UAPI_NTBFAB_NTB_H */
