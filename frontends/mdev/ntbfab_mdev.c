// SPDX-License-Identifier: GPL-2.0-only
/*
 * ntbfab_mdev: devices of ntbfab's pool passed through to virtual machines as
 * mediated devices (SmartIO's MDEV, article section 5; docs/kernel.md).
 *
 * ntbfabd decides, this module executes.  A borrower's daemon tells the module
 * its pool through /dev/ntbfab-lend (ntbfab_shadow's device file, whose
 * ioctls this module extends: include/uapi/ntbfab_lend.h), and the module
 * registers an mdev parent "ntbfab-NODE" with one type per device.  An
 * instance is a vfio_device on VFIO's emulated IOMMU, given to a VMM with
 * -device vfio-pci,sysfsdev=...  Then:
 *
 * - creating and opening an instance borrows nothing: config space is a copy
 *   the daemon sends (DESCRIBE), the BARs map a page of all ones;
 * - the borrow happens when the guest enables bus mastering (5.1): the module
 *   pins the guest RAM the VMM mapped for DMA, discovering the layout by
 *   probing from the low (0) and high (4 GiB) starts (5.2), asks the daemon to
 *   borrow (BORROW, answered with MDEV_GRANT: the low and high DMA windows and
 *   the lender's export), maps the guest RAM inside the windows for the
 *   device at its guest-physical addresses, maps the peers' BARs at the
 *   addresses the guest gave them (5.3), relays the lender's vectors to the
 *   eventfds the VMM registered (5.4), and lets the BAR mappings reach the
 *   device;
 * - the return happens when the guest clears bus mastering, the VMM resets
 *   the device or the VM stops: everything above is undone first;
 * - cold migration (5.5) is the VM stopping on one host and starting on
 *   another with an instance of the same device there: nothing here survives
 *   a VM's stop, so nothing is in the way.
 *
 * While borrowed, the guest's config writes go to the lender through the
 * daemon and the guest's vCPU waits for them: the device sees them in order.
 *
 * Version 1 implements loopback lending only (docs/kernel.md): the lender is a
 * device of this kernel held through vfio-pci, and one IOMMU stage (the
 * lender's domain) maps each guest-physical page to the loopback window onto
 * this host's RAM, where the pinned page is.
 *
 * Locks, outermost first: inst->lock (an instance's VMM accesses and borrow
 * transitions; held while the daemon is asked), ntbfab_lend_lock() (the export
 * and what is mapped in its domain), mdev_lock (parents, instances, owners of
 * parents; held while a record is posted), then the VMM's mmap_lock and
 * inst->vma_lock (BAR mappings), and the spinlocks.  The export's ->gone()
 * runs under ntbfab_lend_lock() and takes nothing above it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ctype.h>
#include <linux/device.h>
#include <linux/eventfd.h>
#include <linux/file.h>
#include <linux/idr.h>
#include <linux/iommu.h>
#include <linux/mdev.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/uuid.h>
#include <linux/vfio.h>
#include <linux/wait.h>

#include "ntbfab_lend.h"
#include "ntbfab_lend_core.h"

#ifdef NTBFAB_EVENTFD_SIGNAL_ONE_ARG
#define mdev_eventfd_signal(ctx) eventfd_signal(ctx)
#else
#define mdev_eventfd_signal(ctx) eventfd_signal(ctx, 1)
#endif

#define MDEV_CFG_SIZE		NTBFAB_LEND_CFG_SIZE
#define MDEV_INDEX_SHIFT	40
#define MDEV_OFF(index)		((u64)(index) << MDEV_INDEX_SHIFT)
#define MDEV_INDEX(off)		((off) >> MDEV_INDEX_SHIFT)
#define MDEV_OFF_MASK		(MDEV_OFF(1) - 1)
#define MDEV_HIGH		(4ULL << 30)	/* where x86 guests' high memory starts */
#define MDEV_PIN_MAX		VFIO_PIN_PAGES_MAX_ENTRIES
#define MDEV_GPA_LIMIT		BIT_ULL(48)
#define MDEV_GAPS		16	/* guest ranges the VMM unmapped, waiting to come back */
#define MDEV_REPIN_TRIES	12	/* from 100 ms, doubling up to 2 s: about 20 s */

static uint timeout_s = 60;
module_param(timeout_s, uint, 0644);
MODULE_PARM_DESC(timeout_s, "Seconds a guest's access waits for ntbfabd's answer (default 60)");

/* A run of pinned guest pages, contiguous in guest-physical and host-physical memory. */
struct mdev_run {
	u64 gpa;
	unsigned long pfn;
	unsigned long npages;
	bool mapped;			/* in the lender's IOMMU domain */
};

struct mdev_ntype {
	struct mdev_type type;
	struct ntbfab_lend_mdev_type info;
	char sysfs_name[16];
	char pretty[96];
};

struct mdev_parent_dev {
	struct list_head node;		/* mdev_parents */
	struct device dev;		/* class ntbfab, "ntbfab-NODE" */
	struct mdev_parent parent;
	bool registered;
	char nodename[32];
	struct ntbfab_lend_file *owner;	/* the daemon serving it; NULL: none now */
	struct mdev_ntype *ntypes;
	struct mdev_type **types;
	u32 nr_types;
	struct list_head insts;
	struct list_head retired;	/* type sets replaced while kobjects may hold them */
};

struct mdev_retired {
	struct list_head node;
	struct mdev_ntype *ntypes;
	struct mdev_type **types;
};

struct mdev_tracked_vma {
	struct list_head node;
	struct vm_area_struct *vma;
};

/* What the daemon answered, copied in by its ioctl. */
struct mdev_answer {
	s32 status;
	u32 value;
	u64 export_id;
	u32 config_size;
	u8 config[MDEV_CFG_SIZE];
	u64 bar_sizes[PCI_STD_NUM_BARS];
	struct ntbfab_lend_mdev_window windows[2];
	u32 nr_peers;
	struct ntbfab_lend_mdev_peer peers[NTBFAB_LEND_MDEV_MAX_PEERS];
	char why[NTBFAB_LEND_MDEV_WHY_LEN];
};

struct mdev_inst {
	struct vfio_device vdev;	/* first: vfio_alloc_device() */
	struct mdev_parent_dev *par;
	struct mdev_ntype *nt;
	struct list_head node;		/* par->insts, mdev_lock */
	u32 id, fdid;
	struct mutex lock;		/* see the top of this file */
	u32 state;			/* NTBFAB_LEND_MDEV_*: written under lock and state_lock */
	spinlock_t state_lock;
	const void *mm;			/* the VMM's, while open: compared, never followed */
	u64 vm;

	/* config space: the copy the guest sees */
	u8 cfg[MDEV_CFG_SIZE];
	u32 cfg_size;
	u64 bar_size[PCI_STD_NUM_BARS];
	bool bar_upper[PCI_STD_NUM_BARS];
	bool bar_probing[PCI_STD_NUM_BARS];
	u32 msix_cap;			/* 0: none */
	u32 msix_vectors;
	DECLARE_BITMAP(dirty, MDEV_CFG_SIZE / 4);	/* dwords written before the borrow */

	/* interrupts */
	spinlock_t irq_lock;
	struct eventfd_ctx **trig;	/* per MSI-X vector */
	struct eventfd_ctx *req_trig;

	/* the borrow */
	struct mdev_run *runs;
	u32 nr_runs, cap_runs;
	u64 pinned;
	struct ntbfab_lend_mdev_range gaps[MDEV_GAPS];	/* unmapped by the VMM meanwhile */
	bool gap_back[MDEV_GAPS];	/* part of it came back: the rest may never */
	u32 nr_gaps, repin_tries;
	u32 merge_from;			/* runs_add() extends runs from this index on only */
	struct delayed_work repin;
	struct ntbfab_export *ex;	/* ntbfab_lend_lock() */
	struct iommu_domain *dom;
	phys_addr_t win_phys;
	resource_size_t win_size;
	struct ntbfab_lend_mdev_window win[2];
	struct ntbfab_lend_mdev_peer peers[NTBFAB_LEND_MDEV_MAX_PEERS];
	u32 nr_peers;
	u64 bar_phys[PCI_STD_NUM_BARS];	/* the device's BARs while borrowed (state_lock) */
	void __iomem *bar_io[PCI_STD_NUM_BARS];

	/* BAR mappings of the VMM */
	struct mutex vma_lock;
	struct list_head vmas;
	struct page *dead;		/* what the BARs show with no device: all ones */

	/* the request the daemon is asked */
	spinlock_t req_lock;
	wait_queue_head_t req_wait;
	u64 req_seq;			/* 0: none outstanding */
	bool req_done;
	struct mdev_answer *ans;
};

static DEFINE_MUTEX(mdev_pool_lock);	/* parents' registration (outside mdev_lock: it removes) */
static DEFINE_MUTEX(mdev_lock);
static LIST_HEAD(mdev_parents);
static DEFINE_IDA(mdev_ida);
static struct class *mdev_class;
static u64 mdev_next_vm = 1;
static struct mdev_driver ntbfab_mdev_driver;
static const struct vfio_device_ops mdev_vfio_ops;

static const char *const mdev_state_names[] = {
	[NTBFAB_LEND_MDEV_IDLE] = "idle",
	[NTBFAB_LEND_MDEV_OPEN] = "open",
	[NTBFAB_LEND_MDEV_BORROWING] = "borrowing",
	[NTBFAB_LEND_MDEV_BORROWED] = "borrowed",
	[NTBFAB_LEND_MDEV_LOST] = "lost",
};

static void inst_set_state(struct mdev_inst *inst, u32 state)
{
	spin_lock(&inst->state_lock);
	inst->state = state;
	spin_unlock(&inst->state_lock);
}

static u32 inst_state(struct mdev_inst *inst)
{
	u32 s;

	spin_lock(&inst->state_lock);
	s = inst->state;
	spin_unlock(&inst->state_lock);
	return s;
}

/* ---- asking the daemon ----------------------------------------------------------------- */

/*
 * Post a request for inst and wait for its answer (inst->lock held).  Returns
 * the daemon's status, -ENOTCONN when no daemon serves the parent (or it went
 * away meanwhile), -ETIMEDOUT, or -EINTR for a fatal signal.  The answer is in
 * inst->ans.  A late answer finds no request and is refused (-ESTALE), so the
 * daemon undoes what it did for it.
 */
static int inst_ask(struct mdev_inst *inst, u32 kind, u32 off, u32 size, u32 val)
{
	long left;
	u64 seq;
	int ret;

	memset(inst->ans, 0, sizeof(*inst->ans));
	mutex_lock(&mdev_lock);
	if (!inst->par->owner) {
		mutex_unlock(&mdev_lock);
		return -ENOTCONN;
	}
	spin_lock(&inst->req_lock);
	inst->req_done = false;
	inst->req_seq = U64_MAX;	/* an answer cannot match before the seq is known */
	spin_unlock(&inst->req_lock);
	seq = ntbfab_lend_post(inst->par->owner, kind, inst->id, off, size, val);
	spin_lock(&inst->req_lock);
	inst->req_seq = seq;
	spin_unlock(&inst->req_lock);
	mutex_unlock(&mdev_lock);

	left = wait_event_killable_timeout(inst->req_wait, READ_ONCE(inst->req_done),
					   (long)timeout_s * HZ);
	spin_lock(&inst->req_lock);
	if (inst->req_done)
		ret = inst->ans->status;
	else
		ret = left < 0 ? -EINTR : -ETIMEDOUT;
	inst->req_seq = 0;
	inst->req_done = false;
	spin_unlock(&inst->req_lock);
	return ret;
}

/* The daemon's answer arrives: take it if it is the one waited for. */
static int inst_answer(struct mdev_inst *inst, u64 seq, const struct mdev_answer *a)
{
	int ret = -ESTALE;

	spin_lock(&inst->req_lock);
	if (inst->req_seq == seq && !inst->req_done) {
		memcpy(inst->ans, a, sizeof(*a));
		inst->req_done = true;
		ret = 0;
	}
	spin_unlock(&inst->req_lock);
	if (!ret)
		wake_up(&inst->req_wait);
	return ret;
}

/* The parent lost its daemon (mdev_lock held): whoever waits stops waiting. */
static void inst_abandon(struct mdev_inst *inst)
{
	spin_lock(&inst->req_lock);
	if (inst->req_seq && !inst->req_done) {
		inst->ans->status = -ENOTCONN;
		strscpy(inst->ans->why, "ntbfabd went away", sizeof(inst->ans->why));
		inst->req_done = true;
	}
	spin_unlock(&inst->req_lock);
	wake_up(&inst->req_wait);
}

/* ---- config space ------------------------------------------------------------------------- */

static u32 cfg_dword(const u8 *cfg, u32 off)
{
	return (u32)cfg[off] | (u32)cfg[off + 1] << 8 | (u32)cfg[off + 2] << 16 |
	       (u32)cfg[off + 3] << 24;
}

static void cfg_set_dword(u8 *cfg, u32 off, u32 v)
{
	int i;

	for (i = 0; i < 4; i++)
		cfg[off + i] = v >> 8 * i;
}

/* Offset of capability id in the standard list of cfg (0: none); *prev: its link byte. */
static u32 cfg_find_cap(const u8 *cfg, u8 id, u32 *prev)
{
	u32 pos = cfg[PCI_CAPABILITY_LIST] & ~3, link = PCI_CAPABILITY_LIST;
	int n;

	if (!(cfg[PCI_STATUS] & PCI_STATUS_CAP_LIST))
		return 0;
	for (n = 0; n < 48 && pos >= 0x40 && pos < 0x100; n++) {
		if (cfg[pos] == id) {
			if (prev)
				*prev = link;
			return pos;
		}
		link = pos + 1;
		pos = cfg[pos + 1] & ~3;
	}
	return 0;
}

/* Unlink extended capability id from the list cfg shows. */
static void cfg_hide_ext_cap(u8 *cfg, u32 size, u16 id)
{
	u32 pos = PCI_CFG_SPACE_SIZE, prev = 0, hdr, next;
	int n;

	for (n = 0; n < 480 && pos >= PCI_CFG_SPACE_SIZE && pos + 4 <= size; n++) {
		hdr = cfg_dword(cfg, pos);
		if (!hdr || hdr == ~0U)
			return;
		next = PCI_EXT_CAP_NEXT(hdr);
		if (PCI_EXT_CAP_ID(hdr) == id) {
			if (prev)
				cfg_set_dword(cfg, prev,
					      (cfg_dword(cfg, prev) & 0x000fffff) | next << 20);
			else
				cfg_set_dword(cfg, pos, (hdr & 0xfff00000) | 0);
			return;
		}
		prev = pos;
		pos = next;
	}
}

/*
 * What the guest is shown of a device's config space: plain MSI and SR-IOV
 * hidden (MSI-X vectors are relayed; the lender enables VFs), one function,
 * no INTx, no expansion ROM.
 */
static void cfg_shape(u8 *cfg, u32 size)
{
	u32 msi, prev;

	msi = cfg_find_cap(cfg, PCI_CAP_ID_MSI, &prev);
	if (msi)
		cfg[prev] = cfg[msi + 1];
	if (size > PCI_CFG_SPACE_SIZE)
		cfg_hide_ext_cap(cfg, size, PCI_EXT_CAP_ID_SRIOV);
	cfg[PCI_HEADER_TYPE] &= ~0x80;
	cfg[PCI_INTERRUPT_PIN] = 0;
	cfg_set_dword(cfg, PCI_ROM_ADDRESS, 0);
}

/* Registers that stay in the copy (emulated) and never reach the device. */
static bool cfg_emulated(struct mdev_inst *inst, u32 off)
{
	if (off >= PCI_BASE_ADDRESS_0 && off <= PCI_BASE_ADDRESS_5)
		return true;	/* the guest's BAR addresses: captured (5.3) */
	if (off == PCI_ROM_ADDRESS || off == PCI_INTERRUPT_LINE)
		return true;
	/* MSI-X Message Control: the lender's VFIO owns the vectors; the VMM the guest's view */
	return inst->msix_cap && off == inst->msix_cap;
}

/* The emulated value of the dword at off. */
static u32 cfg_read_dword(struct mdev_inst *inst, u32 off)
{
	u32 i, v;

	if (off >= PCI_BASE_ADDRESS_0 && off <= PCI_BASE_ADDRESS_5) {
		i = (off - PCI_BASE_ADDRESS_0) / 4;
		v = cfg_dword(inst->cfg, off);
		if (inst->bar_upper[i] && inst->bar_probing[i - 1])
			return upper_32_bits(~(inst->bar_size[i - 1] - 1));
		if (inst->bar_upper[i])
			return v;
		if (!inst->bar_size[i])
			return 0;
		if (inst->bar_probing[i])
			v = lower_32_bits(~(inst->bar_size[i] - 1));
		return (v & PCI_BASE_ADDRESS_MEM_MASK) | (cfg_dword(inst->cfg, off) & 0xf);
	}
	return cfg_dword(inst->cfg, off);
}

/* A guest write of a BAR: sizing or its address (kept: the guest's address, article 5.3). */
static void cfg_write_bar(struct mdev_inst *inst, u32 off, u32 mask, u32 val)
{
	u32 i = (off - PCI_BASE_ADDRESS_0) / 4, lo = inst->bar_upper[i] ? i - 1 : i;
	u32 flags = inst->bar_upper[i] ? 0 : cfg_dword(inst->cfg, off) & 0xf;
	u32 v = (cfg_dword(inst->cfg, off) & ~mask) | (val & mask);

	if (!inst->bar_size[lo])
		return;
	inst->bar_probing[lo] = mask == ~0U && val == ~0U;
	if (inst->bar_probing[lo])
		return;
	if (!inst->bar_upper[i])
		v = (v & ~(u32)(inst->bar_size[lo] - 1) & PCI_BASE_ADDRESS_MEM_MASK) | flags;
	cfg_set_dword(inst->cfg, off, v);
}

/* The guest's address of BAR i (0: none, or an upper half). */
static u64 inst_guest_bar(struct mdev_inst *inst, u32 i)
{
	u32 lo = cfg_dword(inst->cfg, PCI_BASE_ADDRESS_0 + 4 * i);
	u64 a = lo & PCI_BASE_ADDRESS_MEM_MASK;

	if (!inst->bar_size[i] || inst->bar_upper[i])
		return 0;
	if ((lo & PCI_BASE_ADDRESS_MEM_TYPE_MASK) == PCI_BASE_ADDRESS_MEM_TYPE_64 &&
	    i + 1 < PCI_STD_NUM_BARS)
		a |= (u64)cfg_dword(inst->cfg, PCI_BASE_ADDRESS_0 + 4 * (i + 1)) << 32;
	return a;
}

/* Take the daemon's description: the copy, the BARs, the MSI-X table size. */
static int inst_describe(struct mdev_inst *inst, const struct mdev_answer *a)
{
	u32 i, reg, pos;

	if (a->config_size != 256 && a->config_size != MDEV_CFG_SIZE)
		return -EINVAL;
	if ((cfg_dword(a->config, 0) & 0xffff) != inst->nt->info.vendor ||
	    cfg_dword(a->config, 0) >> 16 != inst->nt->info.device) {
		dev_err(inst->vdev.dev, "the daemon described %04x:%04x, but type %s is %04x:%04x\n",
			cfg_dword(a->config, 0) & 0xffff, cfg_dword(a->config, 0) >> 16,
			inst->nt->sysfs_name, inst->nt->info.vendor, inst->nt->info.device);
		return -EINVAL;
	}
	memset(inst->cfg, 0, sizeof(inst->cfg));
	memcpy(inst->cfg, a->config, a->config_size);
	inst->cfg_size = a->config_size;
	memset(inst->bar_upper, 0, sizeof(inst->bar_upper));
	memset(inst->bar_probing, 0, sizeof(inst->bar_probing));
	for (i = 0; i < PCI_STD_NUM_BARS; i++) {
		reg = cfg_dword(inst->cfg, PCI_BASE_ADDRESS_0 + 4 * i);
		inst->bar_size[i] = 0;
		if (inst->bar_upper[i])
			continue;
		if (reg & PCI_BASE_ADDRESS_SPACE_IO) {
			/* I/O ports do not cross an NTB: hidden. */
			cfg_set_dword(inst->cfg, PCI_BASE_ADDRESS_0 + 4 * i, 0);
			continue;
		}
		if (a->bar_sizes[i] && !is_power_of_2(a->bar_sizes[i]))
			return -EINVAL;
		inst->bar_size[i] = a->bar_sizes[i];
		/* The guest has not placed it yet: its address starts at 0. */
		cfg_set_dword(inst->cfg, PCI_BASE_ADDRESS_0 + 4 * i, reg & 0xf);
		if ((reg & PCI_BASE_ADDRESS_MEM_TYPE_MASK) == PCI_BASE_ADDRESS_MEM_TYPE_64 &&
		    i + 1 < PCI_STD_NUM_BARS) {
			inst->bar_upper[i + 1] = true;
			cfg_set_dword(inst->cfg, PCI_BASE_ADDRESS_0 + 4 * (i + 1), 0);
			i++;
		}
	}
	cfg_shape(inst->cfg, inst->cfg_size);
	inst->msix_cap = 0;
	inst->msix_vectors = 0;
	pos = cfg_find_cap(inst->cfg, PCI_CAP_ID_MSIX, NULL);
	if (pos) {
		inst->msix_cap = pos;
		inst->msix_vectors = (cfg_dword(inst->cfg, pos) >> 16 & PCI_MSIX_FLAGS_QSIZE) + 1;
		/* A fresh device: MSI-X off. */
		inst->cfg[pos + 3] &= ~((PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL) >> 8);
	}
	/* A fresh device: it decodes nothing and masters nothing until the guest says. */
	inst->cfg[PCI_COMMAND] &= ~(PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER | PCI_COMMAND_IO);
	bitmap_zero(inst->dirty, MDEV_CFG_SIZE / 4);
	return 0;
}

/* ---- BAR mappings of the VMM: all ones without a device, the device's BAR with one ------- */

static vm_fault_t inst_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct mdev_inst *inst = vma->vm_private_data;
	u64 off = ((u64)vma->vm_pgoff << PAGE_SHIFT) + (vmf->address - vma->vm_start);
	u32 index = MDEV_INDEX(off);
	struct mdev_tracked_vma *t;
	bool tracked = false;
	unsigned long pfn;
	vm_fault_t ret;

	if (index >= PCI_STD_NUM_BARS)
		return VM_FAULT_SIGBUS;
	mutex_lock(&inst->vma_lock);
	list_for_each_entry(t, &inst->vmas, node)
		tracked |= t->vma == vma;
	if (!tracked) {
		t = kzalloc(sizeof(*t), GFP_KERNEL);
		if (!t) {
			mutex_unlock(&inst->vma_lock);
			return VM_FAULT_OOM;
		}
		t->vma = vma;
		list_add(&t->node, &inst->vmas);
	}
	spin_lock(&inst->state_lock);
	pfn = inst->bar_phys[index] ? PHYS_PFN(inst->bar_phys[index] + (off & MDEV_OFF_MASK)) : 0;
	spin_unlock(&inst->state_lock);
	if (pfn)
		ret = vmf_insert_pfn_prot(vma, vmf->address, pfn,
					  pgprot_noncached(vma->vm_page_prot));
	else
		ret = vmf_insert_pfn(vma, vmf->address, page_to_pfn(inst->dead));
	mutex_unlock(&inst->vma_lock);
	return ret;
}

static void inst_vma_open(struct vm_area_struct *vma)
{
	/* A copy or a split: it faults again and is tracked then. */
	zap_vma_ptes(vma, vma->vm_start, vma->vm_end - vma->vm_start);
}

static void inst_vma_close(struct vm_area_struct *vma)
{
	struct mdev_inst *inst = vma->vm_private_data;
	struct mdev_tracked_vma *t, *n;

	mutex_lock(&inst->vma_lock);
	list_for_each_entry_safe(t, n, &inst->vmas, node)
		if (t->vma == vma) {
			list_del(&t->node);
			kfree(t);
		}
	mutex_unlock(&inst->vma_lock);
}

static const struct vm_operations_struct inst_vm_ops = {
	.open = inst_vma_open,
	.close = inst_vma_close,
	.fault = inst_fault,
};

/*
 * Remove every page the VMM has of the BARs, and return with vma_lock held so
 * that no fault maps one again until the caller changed what they lead to.
 * mmap_lock comes before vma_lock (faults hold it), so each mm's lock is taken
 * with vma_lock dropped.
 */
static void inst_zap_lock(struct mdev_inst *inst)
{
	struct mdev_tracked_vma *t, *n;
	struct mm_struct *mm;

	for (;;) {
		mutex_lock(&inst->vma_lock);
		mm = NULL;
		while (!list_empty(&inst->vmas)) {
			t = list_first_entry(&inst->vmas, struct mdev_tracked_vma, node);
			mm = t->vma->vm_mm;
			if (mmget_not_zero(mm))
				break;
			list_del(&t->node);
			kfree(t);
			mm = NULL;
		}
		if (!mm)
			return;
		mutex_unlock(&inst->vma_lock);
		mmap_read_lock(mm);
		mutex_lock(&inst->vma_lock);
		list_for_each_entry_safe(t, n, &inst->vmas, node) {
			if (t->vma->vm_mm != mm)
				continue;
			zap_vma_ptes(t->vma, t->vma->vm_start, t->vma->vm_end - t->vma->vm_start);
			list_del(&t->node);
			kfree(t);
		}
		mutex_unlock(&inst->vma_lock);
		mmap_read_unlock(mm);
		mmput(mm);
	}
}

/* Point the BARs at the device (phys[i]) or at nothing (NULL). */
static void inst_bars_to(struct mdev_inst *inst, const u64 *phys)
{
	int i;

	inst_zap_lock(inst);
	spin_lock(&inst->state_lock);
	for (i = 0; i < PCI_STD_NUM_BARS; i++)
		inst->bar_phys[i] = phys ? phys[i] : 0;
	spin_unlock(&inst->state_lock);
	mutex_unlock(&inst->vma_lock);
}

/* ---- interrupts: the lender's vectors relayed to the VMM's eventfds (5.4) --------------- */

static void inst_irq(void *ctx, u32 vector)
{
	struct mdev_inst *inst = ctx;
	unsigned long flags;

	spin_lock_irqsave(&inst->irq_lock, flags);
	if (inst->trig && vector < inst->msix_vectors && inst->trig[vector])
		mdev_eventfd_signal(inst->trig[vector]);
	spin_unlock_irqrestore(&inst->irq_lock, flags);
}

static void inst_irqs_off(struct mdev_inst *inst)
{
	struct eventfd_ctx **old;
	unsigned long flags;
	u32 i;

	spin_lock_irqsave(&inst->irq_lock, flags);
	old = inst->trig;
	inst->trig = NULL;
	spin_unlock_irqrestore(&inst->irq_lock, flags);
	for (i = 0; old && i < inst->msix_vectors; i++)
		if (old[i])
			eventfd_ctx_put(old[i]);
	kfree(old);
}

/* ---- the borrow: guest RAM, peers, BARs and vectors --------------------------------------- */

static int runs_add(struct mdev_inst *inst, u64 gpa, unsigned long pfn)
{
	struct mdev_run *r = inst->nr_runs ? &inst->runs[inst->nr_runs - 1] : NULL;
	struct mdev_run *n;

	/* A run mapped before (a scan of a gap) is not extended: its mapping would not be. */
	if (r && inst->nr_runs > inst->merge_from &&
	    r->gpa + (r->npages << PAGE_SHIFT) == gpa && r->pfn + r->npages == pfn) {
		r->npages++;
		return 0;
	}
	if (inst->nr_runs == inst->cap_runs) {
		n = kvrealloc(inst->runs, inst->cap_runs * sizeof(*n),
			      (inst->cap_runs * 2 + 64) * sizeof(*n), GFP_KERNEL);
		if (!n)
			return -ENOMEM;
		inst->runs = n;
		inst->cap_runs = inst->cap_runs * 2 + 64;
	}
	inst->runs[inst->nr_runs++] = (struct mdev_run){ .gpa = gpa, .pfn = pfn, .npages = 1 };
	return 0;
}

static void unpin_range(struct mdev_inst *inst, u64 gpa, unsigned long npages)
{
	unsigned long n;

	while (npages) {
		n = min_t(unsigned long, npages, MDEV_PIN_MAX);
		vfio_unpin_pages(&inst->vdev, gpa, n);
		gpa += n << PAGE_SHIFT;
		npages -= n;
	}
}

/* Unmap (if mapped) and unpin run r (ntbfab_lend_lock() held once an export is claimed). */
static void run_drop(struct mdev_inst *inst, struct mdev_run *r)
{
	if (r->mapped && inst->dom)
		iommu_unmap(inst->dom, r->gpa, r->npages << PAGE_SHIFT);
	r->mapped = false;
	unpin_range(inst, r->gpa, r->npages);
	inst->pinned -= r->npages << PAGE_SHIFT;
}

static void runs_drop_all(struct mdev_inst *inst)
{
	u32 i;

	for (i = 0; i < inst->nr_runs; i++)
		run_drop(inst, &inst->runs[i]);
	kvfree(inst->runs);
	inst->runs = NULL;
	inst->nr_runs = 0;
	inst->cap_runs = 0;
	inst->pinned = 0;
}

/*
 * Pin what the VMM mapped writable for DMA in [start, end), page by page where
 * nothing is mapped and in growing chunks where something is; stop at the
 * first hole if stop_at_hole.  The VMM's DMA map requests are the layout: an
 * address is guest RAM for the device exactly when it pins.
 */
static int inst_pin_scan(struct mdev_inst *inst, u64 start, u64 end, bool stop_at_hole,
			 struct page **pages)
{
	u64 gpa = start;
	int n = 1, got, i, ret;
	bool in_ram = false;

	while (gpa < end) {
		n = min_t(u64, n, (end - gpa) >> PAGE_SHIFT);
		got = vfio_pin_pages(&inst->vdev, gpa, n, IOMMU_READ | IOMMU_WRITE, pages);
		if (got == n) {
			for (i = 0; i < n; i++) {
				ret = runs_add(inst, gpa + ((u64)i << PAGE_SHIFT),
					       page_to_pfn(pages[i]));
				if (ret) {
					unpin_range(inst, gpa + ((u64)i << PAGE_SHIFT), n - i);
					return ret;
				}
				inst->pinned += PAGE_SIZE;
			}
			gpa += (u64)n << PAGE_SHIFT;
			in_ram = true;
			n = min_t(int, n * 2, MDEV_PIN_MAX);
		} else if (got >= 0) {
			/* A partial pin: keep nothing, ask again in smaller pieces. */
			unpin_range(inst, gpa, got);
			n = max(n / 2, 1);
		} else if (got == -EINVAL || got == -EPERM || got == -EFAULT) {
			/* Not mapped there (or not writable, or not RAM) in some page. */
			if (n > 1) {
				n /= 2;
				continue;
			}
			if (in_ram && stop_at_hole)
				break;
			if (!in_ram && stop_at_hole && gpa == start)
				break;	/* no high memory */
			in_ram = false;
			gpa += PAGE_SIZE;
		} else {
			return got;
		}
		if (fatal_signal_pending(current))
			return -EINTR;
		cond_resched();
	}
	return 0;
}

/* The ranges of guest-physical addresses pinned (runs merged across host pages). */
static u32 inst_ranges(struct mdev_inst *inst, struct ntbfab_lend_mdev_range *out, u32 max)
{
	u64 gpa = 0, end = 0;
	u32 i, n = 0;

	for (i = 0; i <= inst->nr_runs; i++) {
		struct mdev_run *r = i < inst->nr_runs ? &inst->runs[i] : NULL;

		if (r && end && r->gpa == end) {
			end += r->npages << PAGE_SHIFT;
			continue;
		}
		if (end) {
			if (n < max)
				out[n] = (struct ntbfab_lend_mdev_range){ gpa, end - gpa };
			n++;
		}
		if (r) {
			gpa = r->gpa;
			end = r->gpa + (r->npages << PAGE_SHIFT);
		}
	}
	return n;
}

static bool in_window(const struct ntbfab_lend_mdev_window *w, u64 gpa, u64 size)
{
	return w->size && gpa >= w->gpa && gpa + size <= w->gpa + w->size;
}

/* Nothing of the lender's domain may be mapped where the guest's addresses go. */
static int dom_free(struct mdev_inst *inst, u64 iova, u64 size)
{
	if (iommu_iova_to_phys(inst->dom, iova) || iommu_iova_to_phys(inst->dom, iova + size - 1)) {
		dev_err(inst->vdev.dev,
			"the lender's IOMMU domain already maps 0x%llx+0x%llx: the device's guest-physical addresses must be free there\n",
			iova, size);
		return -EEXIST;
	}
	return 0;
}

/* Tear the borrow down here (ntbfab_lend_lock() held): nothing reaches the device after. */
static void inst_unborrow_locked(struct mdev_inst *inst)
{
	u32 i;

	if (!inst->ex)
		return;
	ntbfab_lend_export_release(inst->ex);
	for (i = 0; i < PCI_STD_NUM_BARS; i++) {
		if (inst->bar_io[i])
			iounmap(inst->bar_io[i]);
		inst->bar_io[i] = NULL;
	}
	for (i = 0; i < inst->nr_peers; i++)
		iommu_unmap(inst->dom, inst->peers[i].gpa, inst->peers[i].size);
	inst->nr_peers = 0;
	runs_drop_all(inst);
	inst->nr_gaps = 0;
	inst->ex = NULL;
	inst->dom = NULL;
	memset(inst->win, 0, sizeof(inst->win));
}

/* The lender withdrew the device (ntbfab_lend_lock() held): a surprise removal. */
static void inst_gone(void *ctx)
{
	struct mdev_inst *inst = ctx;

	if (!inst->ex)
		return;
	inst_bars_to(inst, NULL);
	inst_unborrow_locked(inst);
	inst_set_state(inst, NTBFAB_LEND_MDEV_LOST);
	dev_warn(inst->vdev.dev, "fdid 0x%04x: the lender withdrew the device; the guest sees it removed\n",
		 inst->fdid);
	mutex_lock(&mdev_lock);
	if (inst->par->owner)
		ntbfab_lend_post(inst->par->owner, NTBFAB_LEND_MSG_MDEV_RETURN, inst->id, 0, 0,
				 NTBFAB_LEND_MDEV_WHY_LOST);
	mutex_unlock(&mdev_lock);
}

static const struct ntbfab_lend_user_ops inst_user_ops = {
	.irq = inst_irq,
	.gone = inst_gone,
};

/* Map the grant (inst->ans): RAM inside the windows, the peers, the BARs, the vectors. */
static int inst_map_grant(struct mdev_inst *inst)
{
	struct mdev_answer *a = inst->ans;
	struct ntbfab_export *ex;
	struct pci_dev *real;
	u64 phys[PCI_STD_NUM_BARS] = { 0 };
	u32 i, w;
	int ret;

	ntbfab_lend_lock();
	ex = ntbfab_lend_export_claim(a->export_id, &inst_user_ops, inst);
	if (IS_ERR(ex)) {
		ntbfab_lend_unlock();
		dev_err(inst->vdev.dev, "fdid 0x%04x: export %llu of the grant: %ld\n", inst->fdid,
			a->export_id, PTR_ERR(ex));
		return PTR_ERR(ex);
	}
	inst->ex = ex;
	real = ntbfab_lend_export_pdev(ex);
	inst->dom = ntbfab_lend_export_domain(ex);
	ret = -ENXIO;
	if (!inst->dom) {
		pci_err(real, "not in an IOMMU domain of VFIO's: lend it through vfio-pci with an IOMMU\n");
		goto fail;
	}
	ret = ntbfab_lend_window(&inst->win_phys, &inst->win_size);
	if (ret)
		goto fail;
	for (i = 0; i < PCI_STD_NUM_BARS; i++) {
		if (!inst->bar_size[i])
			continue;
		ret = -EINVAL;
		if (pci_resource_len(real, i) != inst->bar_size[i] ||
		    !(pci_resource_flags(real, i) & IORESOURCE_MEM)) {
			pci_err(real, "BAR%u is %llu bytes, the guest's %llu\n", i,
				(u64)pci_resource_len(real, i), inst->bar_size[i]);
			goto fail;
		}
		phys[i] = pci_resource_start(real, i);
		inst->bar_io[i] = ioremap(phys[i], inst->bar_size[i]);
		ret = -ENOMEM;
		if (!inst->bar_io[i])
			goto fail;
	}
	memcpy(inst->win, a->windows, sizeof(inst->win));
	/* Guest RAM: inside a window mapped at its guest-physical address, else unpinned. */
	for (i = 0; i < inst->nr_runs; i++) {
		struct mdev_run *r = &inst->runs[i];
		u64 size = r->npages << PAGE_SHIFT, hpa = (u64)r->pfn << PAGE_SHIFT;

		if (!in_window(&inst->win[0], r->gpa, size) &&
		    !in_window(&inst->win[1], r->gpa, size)) {
			run_drop(inst, r);
			r->npages = 0;
			continue;
		}
		ret = -ERANGE;
		if (hpa + size > inst->win_size) {
			pci_err(real, "guest page 0x%llx is at 0x%llx, outside the window onto this host's RAM\n",
				r->gpa, hpa);
			goto fail;
		}
		ret = dom_free(inst, r->gpa, size);
		if (!ret)
			ret = iommu_map(inst->dom, r->gpa, inst->win_phys + hpa, size,
					IOMMU_READ | IOMMU_WRITE | IOMMU_CACHE);
		if (ret)
			goto fail;
		r->mapped = true;
	}
	/* Other devices of the VM at their guest BAR addresses (5.3), as the daemon resolved. */
	for (i = 0; i < a->nr_peers; i++) {
		struct ntbfab_lend_mdev_peer *p = &a->peers[i];

		ret = dom_free(inst, p->gpa, p->size);
		if (!ret)
			ret = iommu_map(inst->dom, p->gpa, p->dev_addr, p->size,
					IOMMU_READ | IOMMU_WRITE | IOMMU_MMIO);
		if (ret)
			goto fail;
		inst->peers[inst->nr_peers++] = *p;
	}
	ntbfab_lend_unlock();
	inst_bars_to(inst, phys);
	w = 0;
	for (i = 0; i < inst->nr_runs; i++)
		w += inst->runs[i].mapped;
	dev_info(inst->vdev.dev,
		 "fdid 0x%04x borrowed from %s: %llu MiB of guest RAM in %u runs through windows 0x%llx+0x%llx and 0x%llx+0x%llx, %u peer BARs\n",
		 inst->fdid, pci_name(real), inst->pinned >> 20, w, inst->win[0].gpa,
		 inst->win[0].size, inst->win[1].gpa, inst->win[1].size, inst->nr_peers);
	return 0;
fail:
	inst_unborrow_locked(inst);
	ntbfab_lend_unlock();
	return ret;
}

/* Forward a config write to the device (borrowed; inst->lock held); the copy takes its dword. */
static int inst_forward(struct mdev_inst *inst, u32 where, u32 size, u32 val)
{
	int ret = inst_ask(inst, NTBFAB_LEND_MSG_MDEV_CFG_WRITE, where, size, val);

	if (ret) {
		dev_warn_ratelimited(inst->vdev.dev, "config write 0x%x <- 0x%x did not reach the device: %d %s\n",
				     where, val, ret, inst->ans->why);
		return ret;
	}
	cfg_set_dword(inst->cfg, where & ~3, inst->ans->value);
	return 0;
}

static void inst_return(struct mdev_inst *inst, u32 why);

/*
 * The guest enabled bus mastering (inst->lock held): borrow.  On failure the
 * device stays absent to the guest and the reason is logged.
 */
static int inst_borrow(struct mdev_inst *inst)
{
	struct page **pages;
	u8 *guest = NULL;
	DECLARE_BITMAP(dirty, MDEV_CFG_SIZE / 4);
	u32 off, msix_ctl;
	unsigned long i;
	ktime_t t0 = ktime_get();
	int ret;

	inst_set_state(inst, NTBFAB_LEND_MDEV_BORROWING);
	pages = kmalloc_array(MDEV_PIN_MAX, sizeof(*pages), GFP_KERNEL);
	if (!pages) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = inst_pin_scan(inst, 0, MDEV_HIGH, false, pages);
	if (!ret)
		ret = inst_pin_scan(inst, MDEV_HIGH, MDEV_GPA_LIMIT, true, pages);
	kfree(pages);
	if (ret)
		goto fail_pinned;
	if (!inst->pinned) {
		dev_err(inst->vdev.dev, "fdid 0x%04x: the VMM mapped no guest RAM for DMA\n",
			inst->fdid);
		ret = -ENOMEM;
		goto fail;
	}
	dev_dbg(inst->vdev.dev, "pinned %llu MiB of guest RAM in %lld ms\n", inst->pinned >> 20,
		ktime_ms_delta(ktime_get(), t0));
	ret = inst_ask(inst, NTBFAB_LEND_MSG_MDEV_BORROW, 0, 0, inst->fdid);
	if (ret) {
		dev_err(inst->vdev.dev, "fdid 0x%04x was not borrowed: %d %s\n", inst->fdid, ret,
			inst->ans->why[0] ? inst->ans->why : "(no daemon answered)");
		goto fail_pinned;
	}
	ret = -EINVAL;
	if (inst->ans->config_size != inst->cfg_size ||
	    memcmp(inst->ans->config, inst->cfg, 4)) {
		dev_err(inst->vdev.dev, "fdid 0x%04x: the grant's config space is not the device's\n",
			inst->fdid);
		goto fail_granted;
	}
	ret = inst_map_grant(inst);
	if (ret)
		goto fail_granted;
	inst_set_state(inst, NTBFAB_LEND_MDEV_BORROWED);
	/*
	 * The copy becomes the device's config space as it is now, with what the
	 * guest wrote on top; then those writes reach the device, in offset order.
	 */
	guest = kmemdup(inst->cfg, MDEV_CFG_SIZE, GFP_KERNEL);
	if (!guest) {
		inst_return(inst, NTBFAB_LEND_MDEV_WHY_RELEASED);
		return -ENOMEM;
	}
	bitmap_copy(dirty, inst->dirty, MDEV_CFG_SIZE / 4);
	msix_ctl = inst->msix_cap ? cfg_dword(inst->cfg, inst->msix_cap) : 0;
	memcpy(inst->cfg, inst->ans->config, inst->cfg_size);
	cfg_shape(inst->cfg, inst->cfg_size);
	for (off = 0; off < inst->cfg_size; off += 4)
		if (cfg_emulated(inst, off) || test_bit(off / 4, dirty))
			cfg_set_dword(inst->cfg, off, cfg_dword(guest, off));
	if (inst->msix_cap)
		cfg_set_dword(inst->cfg, inst->msix_cap, msix_ctl);
	bitmap_zero(inst->dirty, MDEV_CFG_SIZE / 4);
	for_each_set_bit(i, dirty, MDEV_CFG_SIZE / 4) {
		off = i * 4;
		if (cfg_emulated(inst, off))
			continue;
		/* Command without Status: those are the device's write-one-to-clear bits. */
		if (off == PCI_COMMAND)
			ret = inst_forward(inst, off, 2, cfg_dword(guest, off) & 0xffff);
		else
			ret = inst_forward(inst, off, 4, cfg_dword(guest, off));
		if (ret) {
			kfree(guest);
			inst_return(inst, NTBFAB_LEND_MDEV_WHY_RELEASED);
			return ret;
		}
		if (off == PCI_COMMAND)
			cfg_set_dword(inst->cfg, off, cfg_dword(guest, off));
	}
	kfree(guest);
	dev_info(inst->vdev.dev, "fdid 0x%04x: the guest has the device (%lld ms)\n", inst->fdid,
		 ktime_ms_delta(ktime_get(), t0));
	return 0;

fail_granted:
	/* The daemon borrowed for nothing: give it back. */
	inst_ask(inst, NTBFAB_LEND_MSG_MDEV_RETURN, 0, 0, NTBFAB_LEND_MDEV_WHY_RELEASED);
fail_pinned:
	ntbfab_lend_lock();
	runs_drop_all(inst);
	ntbfab_lend_unlock();
fail:
	inst_set_state(inst, NTBFAB_LEND_MDEV_OPEN);
	return ret;
}

/* Give the device back (inst->lock held): undo everything here, then tell the daemon. */
static void inst_return(struct mdev_inst *inst, u32 why)
{
	u32 state = inst_state(inst);
	int ret;

	if (state != NTBFAB_LEND_MDEV_BORROWED && state != NTBFAB_LEND_MDEV_LOST)
		return;
	inst_bars_to(inst, NULL);
	ntbfab_lend_lock();
	inst_unborrow_locked(inst);
	ntbfab_lend_unlock();
	inst_set_state(inst, NTBFAB_LEND_MDEV_OPEN);
	if (state == NTBFAB_LEND_MDEV_LOST)
		return;	/* the daemon was told when the lender withdrew it */
	ret = inst_ask(inst, NTBFAB_LEND_MSG_MDEV_RETURN, 0, 0, why);
	if (ret)
		dev_warn(inst->vdev.dev, "fdid 0x%04x: the daemon did not confirm the return: %d %s\n",
			 inst->fdid, ret, inst->ans->why);
	else
		dev_info(inst->vdev.dev, "fdid 0x%04x returned (%s)\n", inst->fdid,
			 why == NTBFAB_LEND_MDEV_WHY_RELEASED ? "the guest released it" :
			 why == NTBFAB_LEND_MDEV_WHY_RESET ? "the VMM reset it" : "the VM stopped");
}

/* ---- the VFIO regions: config space and BARs ------------------------------------------ */

/* One aligned access of 1, 2 or 4 bytes to config space (inst->lock held). */
static int cfg_access(struct mdev_inst *inst, u32 where, u32 size, u32 *val, bool write)
{
	u32 off = where & ~3, shift = 8 * (where & 3), mask, dw, cmd, v;
	bool was_master, master;
	int ret;

	mask = size == 4 ? ~0U : ((1U << 8 * size) - 1) << shift;
	if (!write) {
		*val = (cfg_read_dword(inst, off) & mask) >> shift;
		return 0;
	}
	if (inst_state(inst) == NTBFAB_LEND_MDEV_LOST)
		return 0;	/* the device is gone: writes go nowhere */
	v = *val << shift;
	if (off >= PCI_BASE_ADDRESS_0 && off <= PCI_BASE_ADDRESS_5) {
		cfg_write_bar(inst, off, mask, v);
		return 0;
	}
	if (off == PCI_ROM_ADDRESS)
		return 0;
	if (off == PCI_INTERRUPT_LINE) {
		/* The line is the guest's (no INTx is relayed); the pin stays 0. */
		if (mask & 0xff)
			inst->cfg[PCI_INTERRUPT_LINE] = v & 0xff;
		return 0;
	}
	if (cfg_emulated(inst, off)) {
		/* MSI-X Message Control: only its Enable and Function Mask bits are the guest's. */
		u32 rw = (u32)(PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL) << 16;

		dw = cfg_dword(inst->cfg, off);
		cfg_set_dword(inst->cfg, off, (dw & ~(mask & rw)) | (v & mask & rw));
		return 0;
	}
	dw = cfg_dword(inst->cfg, off);
	was_master = dw & PCI_COMMAND_MASTER && off == PCI_COMMAND;
	if (off == PCI_COMMAND && (mask & PCI_COMMAND_INTX_DISABLE))
		v |= PCI_COMMAND_INTX_DISABLE;	/* no INTx reaches a VM through the fabric */
	if (off == PCI_COMMAND)
		mask &= 0xffff;			/* Status is read-only or write-one-to-clear */
	dw = (dw & ~mask) | (v & mask);
	master = off == PCI_COMMAND && (dw & PCI_COMMAND_MASTER);

	if (inst_state(inst) != NTBFAB_LEND_MDEV_BORROWED) {
		cfg_set_dword(inst->cfg, off, dw);
		set_bit(off / 4, inst->dirty);
		if (master && !was_master) {
			/* Article 5.1: the guest is about to DMA, its RAM is allocated now. */
			ret = inst_borrow(inst);
			if (ret)
				dev_warn(inst->vdev.dev, "the guest enabled bus mastering, but the device is not there (%d)\n",
					 ret);
		}
		return 0;
	}
	if (off == PCI_COMMAND && was_master && !master) {
		/* The guest released the device: its driver stopped it. */
		cmd = dw;
		ret = inst_forward(inst, where, size, (v & mask) >> shift);
		inst_return(inst, NTBFAB_LEND_MDEV_WHY_RELEASED);
		cfg_set_dword(inst->cfg, off, cmd);
		return 0;
	}
	ret = inst_forward(inst, where, size, (v & mask) >> shift);
	if (off == PCI_COMMAND)
		cfg_set_dword(inst->cfg, off, dw);	/* the guest's view of Command */
	return 0;
}

static ssize_t cfg_rw(struct mdev_inst *inst, char __user *buf, size_t count, u64 pos,
		      bool write)
{
	size_t done = 0;
	u32 size, val = 0;
	int ret;

	if (pos >= inst->cfg_size)
		return -EINVAL;
	count = min_t(size_t, count, inst->cfg_size - pos);
	while (done < count) {
		size = (pos % 4 == 0 && count - done >= 4) ? 4 :
		       (pos % 2 == 0 && count - done >= 2) ? 2 : 1;
		if (write && copy_from_user(&val, buf + done, size))
			return -EFAULT;
		ret = cfg_access(inst, pos, size, &val, write);
		if (ret)
			return ret;
		if (!write && copy_to_user(buf + done, &val, size))
			return -EFAULT;
		pos += size;
		done += size;
	}
	return done;
}

/* A BAR through read()/write() (the VMM's slow path): the device, or all ones. */
static ssize_t bar_rw(struct mdev_inst *inst, u32 index, char __user *buf, size_t count,
		      u64 pos, bool write)
{
	size_t done = 0;
	u32 size, val;

	if (pos >= inst->bar_size[index])
		return -EINVAL;
	count = min_t(size_t, count, inst->bar_size[index] - pos);
	while (done < count) {
		size = (pos % 4 == 0 && count - done >= 4) ? 4 :
		       (pos % 2 == 0 && count - done >= 2) ? 2 : 1;
		val = ~0U;
		if (write && copy_from_user(&val, buf + done, size))
			return -EFAULT;
		if (inst->bar_io[index]) {
			void __iomem *p = inst->bar_io[index] + pos;

			if (write && size == 4)
				iowrite32(val, p);
			else if (write && size == 2)
				iowrite16(val, p);
			else if (write)
				iowrite8(val, p);
			else
				val = size == 4 ? ioread32(p) :
				      size == 2 ? ioread16(p) : ioread8(p);
		}
		if (!write && copy_to_user(buf + done, &val, size))
			return -EFAULT;
		pos += size;
		done += size;
	}
	return done;
}

static ssize_t inst_rw(struct vfio_device *vdev, char __user *buf, size_t count, loff_t *ppos,
		       bool write)
{
	struct mdev_inst *inst = container_of(vdev, struct mdev_inst, vdev);
	u32 index = MDEV_INDEX((u64)*ppos);
	u64 pos = (u64)*ppos & MDEV_OFF_MASK;
	ssize_t ret;

	mutex_lock(&inst->lock);
	if (index == VFIO_PCI_CONFIG_REGION_INDEX)
		ret = cfg_rw(inst, buf, count, pos, write);
	else if (index <= VFIO_PCI_BAR5_REGION_INDEX && inst->bar_size[index])
		ret = bar_rw(inst, index, buf, count, pos, write);
	else
		ret = -EINVAL;
	mutex_unlock(&inst->lock);
	if (ret > 0)
		*ppos += ret;
	return ret;
}

static ssize_t inst_read(struct vfio_device *vdev, char __user *buf, size_t count, loff_t *ppos)
{
	return inst_rw(vdev, buf, count, ppos, false);
}

static ssize_t inst_write(struct vfio_device *vdev, const char __user *buf, size_t count,
			  loff_t *ppos)
{
	return inst_rw(vdev, (char __user *)buf, count, ppos, true);
}

static int inst_mmap(struct vfio_device *vdev, struct vm_area_struct *vma)
{
	struct mdev_inst *inst = container_of(vdev, struct mdev_inst, vdev);
	u64 off = (u64)vma->vm_pgoff << PAGE_SHIFT;
	u32 index = MDEV_INDEX(off);

	if (index > VFIO_PCI_BAR5_REGION_INDEX || !inst->bar_size[index] ||
	    inst->bar_size[index] < PAGE_SIZE || !(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if ((off & MDEV_OFF_MASK) + (vma->vm_end - vma->vm_start) > inst->bar_size[index])
		return -EINVAL;
	vma->vm_flags |= VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP;
	vma->vm_private_data = inst;
	vma->vm_ops = &inst_vm_ops;
	return 0;
}

/* ---- the VFIO ioctls ---------------------------------------------------------------------- */

static long inst_region_info(struct mdev_inst *inst, void __user *arg)
{
	struct vfio_region_info info;
	unsigned long minsz = offsetofend(struct vfio_region_info, offset);

	if (copy_from_user(&info, arg, minsz))
		return -EFAULT;
	if (info.argsz < minsz)
		return -EINVAL;
	info.cap_offset = 0;
	info.flags = 0;
	info.size = 0;
	if (info.index >= VFIO_PCI_NUM_REGIONS)
		return -EINVAL;
	info.offset = MDEV_OFF(info.index);
	if (info.index == VFIO_PCI_CONFIG_REGION_INDEX) {
		info.size = inst->cfg_size;
		info.flags = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
	} else if (info.index <= VFIO_PCI_BAR5_REGION_INDEX && inst->bar_size[info.index]) {
		info.size = inst->bar_size[info.index];
		info.flags = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
		if (info.size >= PAGE_SIZE)
			info.flags |= VFIO_REGION_INFO_FLAG_MMAP;
	}
	return copy_to_user(arg, &info, minsz) ? -EFAULT : 0;
}

static long inst_irq_info(struct mdev_inst *inst, void __user *arg)
{
	struct vfio_irq_info info;
	unsigned long minsz = offsetofend(struct vfio_irq_info, count);

	if (copy_from_user(&info, arg, minsz))
		return -EFAULT;
	if (info.argsz < minsz || info.index >= VFIO_PCI_NUM_IRQS)
		return -EINVAL;
	info.flags = VFIO_IRQ_INFO_EVENTFD;
	info.count = 0;
	if (info.index == VFIO_PCI_MSIX_IRQ_INDEX) {
		info.count = inst->msix_vectors;
		info.flags |= VFIO_IRQ_INFO_NORESIZE;
	} else if (info.index == VFIO_PCI_REQ_IRQ_INDEX) {
		info.count = 1;
	}
	return copy_to_user(arg, &info, minsz) ? -EFAULT : 0;
}

static int set_msix(struct mdev_inst *inst, struct vfio_irq_set *hdr, void *data)
{
	struct eventfd_ctx **ctxs = NULL, **table = NULL;
	unsigned long flags;
	s32 *fds = data;
	int ret = 0;
	u32 i;

	if (!(hdr->flags & VFIO_IRQ_SET_ACTION_TRIGGER))
		return -EINVAL;		/* masking MSI-X is the VMM's, in its table */
	if (hdr->flags & VFIO_IRQ_SET_DATA_NONE && !hdr->count) {
		inst_irqs_off(inst);
		return 0;
	}
	if (!(hdr->flags & VFIO_IRQ_SET_DATA_EVENTFD)) {
		/* A software trigger of vectors: as if the device had raised them. */
		for (i = 0; i < hdr->count; i++)
			if (!(hdr->flags & VFIO_IRQ_SET_DATA_BOOL) || ((u8 *)data)[i])
				inst_irq(inst, hdr->start + i);
		return 0;
	}
	/* The eventfds named (fd -1: none) replace those vectors' in the table. */
	ctxs = kcalloc(hdr->count, sizeof(*ctxs), GFP_KERNEL);
	table = kcalloc(inst->msix_vectors, sizeof(*table), GFP_KERNEL);
	if (!ctxs || !table) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < hdr->count; i++) {
		if (fds[i] < 0)
			continue;
		ctxs[i] = eventfd_ctx_fdget(fds[i]);
		if (IS_ERR(ctxs[i])) {
			ret = PTR_ERR(ctxs[i]);
			ctxs[i] = NULL;
			goto out;
		}
	}
	spin_lock_irqsave(&inst->irq_lock, flags);
	if (!inst->trig) {
		inst->trig = table;
		table = NULL;
	}
	for (i = 0; i < hdr->count; i++)
		swap(inst->trig[hdr->start + i], ctxs[i]);
	spin_unlock_irqrestore(&inst->irq_lock, flags);
out:
	/* What ctxs holds now: the replaced eventfds, or the new ones of a failed call. */
	for (i = 0; ctxs && i < hdr->count; i++)
		if (ctxs[i])
			eventfd_ctx_put(ctxs[i]);
	kfree(ctxs);
	kfree(table);
	return ret;
}

static int set_req(struct mdev_inst *inst, struct vfio_irq_set *hdr, void *data)
{
	struct eventfd_ctx *ctx = NULL, *old;
	s32 fd;

	if (!(hdr->flags & VFIO_IRQ_SET_ACTION_TRIGGER))
		return -EINVAL;
	if (hdr->count && hdr->flags & VFIO_IRQ_SET_DATA_EVENTFD) {
		fd = *(s32 *)data;
		if (fd >= 0) {
			ctx = eventfd_ctx_fdget(fd);
			if (IS_ERR(ctx))
				return PTR_ERR(ctx);
		}
	} else if (hdr->count) {
		return -EINVAL;
	}
	spin_lock_irq(&inst->irq_lock);
	old = inst->req_trig;
	inst->req_trig = ctx;
	spin_unlock_irq(&inst->irq_lock);
	if (old)
		eventfd_ctx_put(old);
	return 0;
}

static long inst_set_irqs(struct mdev_inst *inst, void __user *arg)
{
	unsigned long minsz = offsetofend(struct vfio_irq_set, count);
	struct vfio_irq_set hdr;
	size_t data_size = 0;
	void *data = NULL;
	int max, ret;

	if (copy_from_user(&hdr, arg, minsz))
		return -EFAULT;
	max = hdr.index == VFIO_PCI_MSIX_IRQ_INDEX ? inst->msix_vectors :
	      hdr.index == VFIO_PCI_REQ_IRQ_INDEX ? 1 : 0;
	ret = vfio_set_irqs_validate_and_prepare(&hdr, max, VFIO_PCI_NUM_IRQS, &data_size);
	if (ret)
		return ret;
	if (!max)
		return -EINVAL;
	if (data_size) {
		data = memdup_user(arg + minsz, data_size);
		if (IS_ERR(data))
			return PTR_ERR(data);
	}
	ret = hdr.index == VFIO_PCI_MSIX_IRQ_INDEX ? set_msix(inst, &hdr, data) :
						     set_req(inst, &hdr, data);
	kfree(data);
	return ret;
}

static long inst_ioctl(struct vfio_device *vdev, unsigned int cmd, unsigned long arg)
{
	struct mdev_inst *inst = container_of(vdev, struct mdev_inst, vdev);
	void __user *up = (void __user *)arg;
	struct vfio_device_info info;
	unsigned long minsz;
	long ret;

	switch (cmd) {
	case VFIO_DEVICE_GET_INFO:
		minsz = offsetofend(struct vfio_device_info, num_irqs);
		if (copy_from_user(&info, up, minsz))
			return -EFAULT;
		if (info.argsz < minsz)
			return -EINVAL;
		info.flags = VFIO_DEVICE_FLAGS_PCI | VFIO_DEVICE_FLAGS_RESET;
		info.num_regions = VFIO_PCI_NUM_REGIONS;
		info.num_irqs = VFIO_PCI_NUM_IRQS;
		return copy_to_user(up, &info, minsz) ? -EFAULT : 0;
	case VFIO_DEVICE_GET_REGION_INFO:
		return inst_region_info(inst, up);
	case VFIO_DEVICE_GET_IRQ_INFO:
		return inst_irq_info(inst, up);
	case VFIO_DEVICE_SET_IRQS:
		mutex_lock(&inst->lock);
		ret = inst_set_irqs(inst, up);
		mutex_unlock(&inst->lock);
		return ret;
	case VFIO_DEVICE_RESET:
		/* The VM resets: the device goes back (the lender resets it) until enabled. */
		mutex_lock(&inst->lock);
		inst_return(inst, NTBFAB_LEND_MDEV_WHY_RESET);
		inst->cfg[PCI_COMMAND] &= ~(PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
		if (inst->msix_cap)
			inst->cfg[inst->msix_cap + 3] &= ~((PCI_MSIX_FLAGS_ENABLE |
							    PCI_MSIX_FLAGS_MASKALL) >> 8);
		bitmap_zero(inst->dirty, MDEV_CFG_SIZE / 4);
		mutex_unlock(&inst->lock);
		return 0;
	}
	return -ENOTTY;
}

/* ---- instances ---------------------------------------------------------------------------- */

static int inst_open(struct vfio_device *vdev)
{
	struct mdev_inst *inst = container_of(vdev, struct mdev_inst, vdev);
	struct mdev_inst *o;
	int ret;

	mutex_lock(&inst->lock);
	ret = inst_ask(inst, NTBFAB_LEND_MSG_MDEV_DESCRIBE, 0, 0, inst->fdid);
	if (ret) {
		dev_err(vdev->dev, "fdid 0x%04x cannot be described for the VMM: %d %s\n",
			inst->fdid, ret, ret == -ENOTCONN ? "(no ntbfabd serves this parent)" :
			inst->ans->why);
		goto out;
	}
	ret = inst_describe(inst, inst->ans);
	if (ret)
		goto out;
	mutex_lock(&mdev_lock);
	inst->mm = current->mm;
	inst->vm = 0;
	list_for_each_entry(o, &inst->par->insts, node)
		if (o != inst && o->mm == inst->mm && o->vm)
			inst->vm = o->vm;
	if (!inst->vm)
		inst->vm = mdev_next_vm++;
	mutex_unlock(&mdev_lock);
	inst_set_state(inst, NTBFAB_LEND_MDEV_OPEN);
	dev_info(vdev->dev, "fdid 0x%04x opened by %s[%d] (VM %llu); nothing is borrowed until the guest enables it\n",
		 inst->fdid, current->comm, task_pid_nr(current), inst->vm);
out:
	mutex_unlock(&inst->lock);
	return ret;
}

static void inst_close(struct vfio_device *vdev)
{
	struct mdev_inst *inst = container_of(vdev, struct mdev_inst, vdev);

	mutex_lock(&inst->lock);
	inst_return(inst, NTBFAB_LEND_MDEV_WHY_CLOSED);
	inst_irqs_off(inst);
	spin_lock_irq(&inst->irq_lock);
	if (inst->req_trig)
		eventfd_ctx_put(inst->req_trig);
	inst->req_trig = NULL;
	spin_unlock_irq(&inst->irq_lock);
	mutex_lock(&mdev_lock);
	inst->mm = NULL;
	inst->vm = 0;
	mutex_unlock(&mdev_lock);
	inst_set_state(inst, NTBFAB_LEND_MDEV_IDLE);
	mutex_unlock(&inst->lock);
}

/* The VMM pinned pages are going away: unpin them, and unmap them from the device first. */
/* Map run r for the device at its guest-physical address, or leave it unpinned. */
static void run_remap(struct mdev_inst *inst, struct mdev_run *r)
{
	u64 size = r->npages << PAGE_SHIFT;

	r->mapped = false;
	if (!r->npages || !inst->dom)
		return;
	if (!iommu_map(inst->dom, r->gpa, inst->win_phys + ((u64)r->pfn << PAGE_SHIFT), size,
		       IOMMU_READ | IOMMU_WRITE | IOMMU_CACHE)) {
		r->mapped = true;
		return;
	}
	unpin_range(inst, r->gpa, r->npages);
	inst->pinned -= size;
	r->npages = 0;
}

/* The VMM unmapped [s, e) of mapped guest RAM: it is pinned again when it comes back. */
static void gap_add(struct mdev_inst *inst, u64 s, u64 e)
{
	u32 i;

	for (i = 0; i < inst->nr_gaps; i++) {
		struct ntbfab_lend_mdev_range *g = &inst->gaps[i];

		if (s <= g->gpa + g->size && e >= g->gpa) {
			u64 end = max(g->gpa + g->size, e);

			g->gpa = min(g->gpa, s);
			g->size = end - g->gpa;
			inst->gap_back[i] = false;
			return;
		}
	}
	if (inst->nr_gaps < MDEV_GAPS) {
		inst->gap_back[inst->nr_gaps] = false;
		inst->gaps[inst->nr_gaps++] = (struct ntbfab_lend_mdev_range){ s, e - s };
	} else {
		dev_warn(inst->vdev.dev, "the VMM unmapped too many ranges: 0x%llx+0x%llx stays out of the device's reach\n",
			 s, e - s);
	}
}

/*
 * Guest memory maps change under a running guest (q35's TSEG and the BIOS areas
 * are carved out of RAM, and QEMU then unmaps a whole RAM section and maps
 * what is left): VFIO tells an mdev of the unmap only.  So the ranges unmapped
 * while borrowed are pinned and mapped again once the VMM has mapped them
 * again, retried from 100 ms to about 20 s.  The VMM maps the pieces of a
 * section one by one, so a gap of which some came back keeps its holes: the
 * rest of the pieces may still come (or never, as TSEG).
 */
static void inst_repin(struct work_struct *work)
{
	struct mdev_inst *inst = container_of(to_delayed_work(work), struct mdev_inst, repin);
	struct page **pages = kmalloc_array(MDEV_PIN_MAX, sizeof(*pages), GFP_KERNEL);
	struct ntbfab_lend_mdev_range *next = kcalloc(MDEV_GAPS, sizeof(*next), GFP_KERNEL);
	bool back[MDEV_GAPS] = { false };
	u64 before, cur, end;
	u32 i, j, first, left = 0, unsure = 0, lost = 0;

	mutex_lock(&inst->lock);
	if (inst_state(inst) != NTBFAB_LEND_MDEV_BORROWED || !pages || !next) {
		inst->nr_gaps = 0;
		goto out;
	}
	ntbfab_lend_lock();
	for (i = 0; i < inst->nr_gaps; i++) {
		struct ntbfab_lend_mdev_range g = inst->gaps[i];

		before = inst->pinned;
		first = inst->nr_runs;
		inst->merge_from = first;
		if (inst_pin_scan(inst, g.gpa, g.gpa + g.size, false, pages) ||
		    inst->pinned == before) {
			if (left < MDEV_GAPS) {
				back[left] = inst->gap_back[i];
				next[left++] = g;
			} else {
				lost++;
			}
			continue;
		}
		/* What is still out of the scan's runs (in address order) waits on. */
		for (j = first, cur = g.gpa; j <= inst->nr_runs; j++) {
			end = j < inst->nr_runs ? inst->runs[j].gpa : g.gpa + g.size;
			if (end > cur && left < MDEV_GAPS) {
				back[left] = true;
				next[left++] = (struct ntbfab_lend_mdev_range){ cur, end - cur };
			} else if (end > cur) {
				lost++;
			}
			if (j < inst->nr_runs)
				cur = end + (inst->runs[j].npages << PAGE_SHIFT);
		}
		for (j = first; j < inst->nr_runs; j++) {
			struct mdev_run *r = &inst->runs[j];
			u64 size = r->npages << PAGE_SHIFT;

			if (in_window(&inst->win[0], r->gpa, size) ||
			    in_window(&inst->win[1], r->gpa, size)) {
				run_remap(inst, r);
			} else {
				run_drop(inst, r);
				r->npages = 0;
			}
		}
		dev_info(inst->vdev.dev, "0x%llx+0x%llx mapped for the device again (%llu KiB)\n",
			 g.gpa, g.size, (inst->pinned - before) >> 10);
	}
	inst->merge_from = 0;
	ntbfab_lend_unlock();
	if (lost)
		dev_warn(inst->vdev.dev, "%u range(s) the VMM unmapped are too many to wait for: out of the device's reach\n",
			 lost);
	memcpy(inst->gaps, next, left * sizeof(*next));
	memcpy(inst->gap_back, back, sizeof(back));
	inst->nr_gaps = left;
	if (left && ++inst->repin_tries < MDEV_REPIN_TRIES) {
		schedule_delayed_work(&inst->repin,
				      msecs_to_jiffies(min(100U << inst->repin_tries, 2000U)));
		goto out;
	}
	/* Holes in ranges that came back are the VMM's own (TSEG, ROMs): no news. */
	j = 0;
	for (i = left; i-- > 0;) {
		if (back[i])
			continue;
		unsure++;
		j = i;
	}
	if (unsure)
		dev_warn(inst->vdev.dev, "%u range(s) the VMM unmapped did not come back (first 0x%llx+0x%llx): out of the device's reach\n",
			 unsure, inst->gaps[j].gpa, inst->gaps[j].size);
	inst->nr_gaps = 0;
out:
	mutex_unlock(&inst->lock);
	kfree(next);
	kfree(pages);
}

/*
 * Pages [s, e) of run i go (the VMM unmapped them): the run is unmapped whole (its IOMMU
 * mapping may use large pages) and what is left of it on each side is mapped again.
 */
static void run_cut(struct mdev_inst *inst, u32 i, u64 s, u64 e)
{
	struct mdev_run *r = &inst->runs[i], tail, *n;
	u64 rend = r->gpa + (r->npages << PAGE_SHIFT);
	bool mapped = r->mapped;

	if (mapped && inst->dom)
		iommu_unmap(inst->dom, r->gpa, rend - r->gpa);
	unpin_range(inst, s, (e - s) >> PAGE_SHIFT);
	inst->pinned -= e - s;
	if (mapped)
		gap_add(inst, s, e);
	tail = (struct mdev_run){ .gpa = e, .pfn = r->pfn + ((e - r->gpa) >> PAGE_SHIFT),
				  .npages = (rend - e) >> PAGE_SHIFT };
	r->npages = (s - r->gpa) >> PAGE_SHIFT;
	if (mapped)
		run_remap(inst, r);
	if (!tail.npages)
		return;
	if (inst->nr_runs == inst->cap_runs) {
		n = kvrealloc(inst->runs, inst->cap_runs * sizeof(*n),
			      (inst->cap_runs * 2 + 64) * sizeof(*n), GFP_KERNEL);
		if (!n) {
			/* No room to keep it: the tail goes too. */
			unpin_range(inst, tail.gpa, tail.npages);
			inst->pinned -= tail.npages << PAGE_SHIFT;
			return;
		}
		inst->runs = n;
		inst->cap_runs = inst->cap_runs * 2 + 64;
	}
	memmove(&inst->runs[i + 2], &inst->runs[i + 1],
		(inst->nr_runs - i - 1) * sizeof(*inst->runs));
	inst->nr_runs++;
	inst->runs[i + 1] = tail;
	if (mapped)
		run_remap(inst, &inst->runs[i + 1]);
}

static void inst_dma_unmap(struct vfio_device *vdev, u64 iova, u64 length)
{
	struct mdev_inst *inst = container_of(vdev, struct mdev_inst, vdev);
	u64 end = iova + length;
	u32 i;

	mutex_lock(&inst->lock);
	ntbfab_lend_lock();
	for (i = 0; i < inst->nr_runs; i++) {
		struct mdev_run *r = &inst->runs[i];
		u64 rend = r->gpa + (r->npages << PAGE_SHIFT);

		if (!r->npages || rend <= iova || r->gpa >= end)
			continue;
		/*
		 * Only the pages unmapped go (QEMU remaps the BIOS areas as ROM while
		 * the device may hold the RAM around them): the device loses the
		 * range, as the guest's memory did.
		 */
		dev_dbg(vdev->dev, "the VMM unmapped 0x%llx+0x%llx while the device could reach it\n",
			iova, length);
		run_cut(inst, i, max(r->gpa, round_down(iova, PAGE_SIZE)),
			min(rend, round_up(end, PAGE_SIZE)));
	}
	ntbfab_lend_unlock();
	if (inst->nr_gaps) {
		inst->repin_tries = 0;
		mod_delayed_work(system_wq, &inst->repin, msecs_to_jiffies(100));
	}
	mutex_unlock(&inst->lock);
}

static void inst_request(struct vfio_device *vdev, unsigned int count)
{
	struct mdev_inst *inst = container_of(vdev, struct mdev_inst, vdev);

	spin_lock_irq(&inst->irq_lock);
	if (inst->req_trig) {
		if (!(count % 10))
			dev_notice_ratelimited(vdev->dev, "asking the VMM to release the instance (%u)\n",
					       count);
		mdev_eventfd_signal(inst->req_trig);
	}
	spin_unlock_irq(&inst->irq_lock);
}

static int inst_init(struct vfio_device *vdev)
{
	struct mdev_inst *inst = container_of(vdev, struct mdev_inst, vdev);
	struct mdev_device *mdev = to_mdev_device(vdev->dev);
	int ret;

	inst->nt = container_of(mdev->type, struct mdev_ntype, type);
	inst->par = container_of(mdev->type->parent, struct mdev_parent_dev, parent);
	inst->fdid = inst->nt->info.fdid;
	mutex_init(&inst->lock);
	mutex_init(&inst->vma_lock);
	spin_lock_init(&inst->state_lock);
	spin_lock_init(&inst->irq_lock);
	spin_lock_init(&inst->req_lock);
	init_waitqueue_head(&inst->req_wait);
	INIT_LIST_HEAD(&inst->vmas);
	INIT_LIST_HEAD(&inst->node);
	INIT_DELAYED_WORK(&inst->repin, inst_repin);
	inst->cfg_size = PCI_CFG_SPACE_SIZE;
	inst->ans = kzalloc(sizeof(*inst->ans), GFP_KERNEL);
	inst->dead = alloc_page(GFP_KERNEL);
	if (!inst->ans || !inst->dead) {
		ret = -ENOMEM;
		goto fail;
	}
	memset(page_address(inst->dead), 0xff, PAGE_SIZE);
	ret = ida_alloc(&mdev_ida, GFP_KERNEL);
	if (ret < 0)
		goto fail;
	inst->id = ret;
	return 0;
fail:
	kfree(inst->ans);
	if (inst->dead)
		__free_page(inst->dead);
	return ret;
}

static void inst_release(struct vfio_device *vdev)
{
	struct mdev_inst *inst = container_of(vdev, struct mdev_inst, vdev);

	cancel_delayed_work_sync(&inst->repin);
	ida_free(&mdev_ida, inst->id);
	kfree(inst->ans);
	__free_page(inst->dead);
	vfio_free_device(vdev);
}

static const struct vfio_device_ops mdev_vfio_ops = {
	.name = "ntbfab-mdev",
	.init = inst_init,
	.release = inst_release,
	.open_device = inst_open,
	.close_device = inst_close,
	.read = inst_read,
	.write = inst_write,
	.ioctl = inst_ioctl,
	.mmap = inst_mmap,
	.request = inst_request,
	.dma_unmap = inst_dma_unmap,
};

static int mdev_probe(struct mdev_device *mdev)
{
	struct mdev_inst *inst;
	int ret;

	inst = vfio_alloc_device(mdev_inst, vdev, &mdev->dev, &mdev_vfio_ops);
	if (IS_ERR(inst))
		return PTR_ERR(inst);
	ret = vfio_register_emulated_iommu_dev(&inst->vdev);
	if (ret) {
		vfio_put_device(&inst->vdev);
		return ret;
	}
	dev_set_drvdata(&mdev->dev, inst);
	mutex_lock(&mdev_lock);
	list_add_tail(&inst->node, &inst->par->insts);
	mutex_unlock(&mdev_lock);
	dev_info(&mdev->dev, "instance %u of fdid 0x%04x (%s): nothing borrowed\n", inst->id,
		 inst->fdid, inst->nt->info.name);
	return 0;
}

static void mdev_remove(struct mdev_device *mdev)
{
	struct mdev_inst *inst = dev_get_drvdata(&mdev->dev);

	/* Waits until the VMM has closed it (close_device returned the device). */
	vfio_unregister_group_dev(&inst->vdev);
	mutex_lock(&mdev_lock);
	list_del_init(&inst->node);
	mutex_unlock(&mdev_lock);
	dev_info(&mdev->dev, "instance %u of fdid 0x%04x removed\n", inst->id, inst->fdid);
	vfio_put_device(&inst->vdev);
}

static unsigned int mdev_get_available(struct mdev_type *mtype)
{
	struct mdev_parent_dev *par = container_of(mtype->parent, struct mdev_parent_dev, parent);
	struct mdev_inst *inst;
	unsigned int n = 1;

	/* A device is borrowed exclusively: one instance per device. */
	mutex_lock(&mdev_lock);
	list_for_each_entry(inst, &par->insts, node)
		if (&inst->nt->type == mtype)
			n = 0;
	mutex_unlock(&mdev_lock);
	return n;
}

static ssize_t mdev_show_description(struct mdev_type *mtype, char *buf)
{
	struct mdev_ntype *nt = container_of(mtype, struct mdev_ntype, type);

	return sysfs_emit(buf, "fdid 0x%04x: %s, %04x:%04x class %06x, %s\n", nt->info.fdid,
			  nt->info.name, nt->info.vendor, nt->info.device, nt->info.class_code,
			  "borrowed through ntbfab when the guest enables it");
}

static struct mdev_driver ntbfab_mdev_driver = {
	.device_api = VFIO_DEVICE_API_PCI_STRING,
	.driver = {
		.name = "ntbfab_mdev",
		.owner = THIS_MODULE,
		.mod_name = KBUILD_MODNAME,
	},
	.probe = mdev_probe,
	.remove = mdev_remove,
	.get_available = mdev_get_available,
	.show_description = mdev_show_description,
};

/* ---- parents and the daemon's ioctls ------------------------------------------------------ */

static void parent_release(struct device *dev)
{
	struct mdev_parent_dev *par = container_of(dev, struct mdev_parent_dev, dev);
	struct mdev_retired *r, *n;

	list_for_each_entry_safe(r, n, &par->retired, node) {
		kfree(r->types);
		kfree(r->ntypes);
		kfree(r);
	}
	kfree(par->types);
	kfree(par->ntypes);
	kfree(par);
}

static struct mdev_parent_dev *parent_of(struct ntbfab_lend_file *f)
{
	struct mdev_parent_dev *par;

	list_for_each_entry(par, &mdev_parents, node)
		if (par->owner == f)
			return par;
	return NULL;
}

static bool types_equal(struct mdev_parent_dev *par, const struct ntbfab_lend_mdev_type *t, u32 n)
{
	u32 i;

	if (n != par->nr_types)
		return false;
	for (i = 0; i < n; i++)
		if (memcmp(&par->ntypes[i].info, &t[i], sizeof(*t)))
			return false;
	return true;
}

/* Give par the types t[n] (mdev_pool_lock held; no instance exists). */
static int parent_set_types(struct mdev_parent_dev *par, const struct ntbfab_lend_mdev_type *t,
			    u32 n)
{
	struct mdev_ntype *ntypes;
	struct mdev_type **types;
	struct mdev_retired *r;
	u32 i;
	int ret;

	ntypes = kcalloc(n ?: 1, sizeof(*ntypes), GFP_KERNEL);
	types = kcalloc(n ?: 1, sizeof(*types), GFP_KERNEL);
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!ntypes || !types || !r) {
		ret = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < n; i++) {
		ntypes[i].info = t[i];
		ntypes[i].info.name[sizeof(t[i].name) - 1] = '\0';
		snprintf(ntypes[i].sysfs_name, sizeof(ntypes[i].sysfs_name), "%04x", t[i].fdid);
		snprintf(ntypes[i].pretty, sizeof(ntypes[i].pretty), "%s (fdid 0x%04x)",
			 ntypes[i].info.name, t[i].fdid);
		ntypes[i].type.sysfs_name = ntypes[i].sysfs_name;
		ntypes[i].type.pretty_name = ntypes[i].pretty;
		types[i] = &ntypes[i].type;
	}
	if (par->registered) {
		mdev_unregister_parent(&par->parent);
		par->registered = false;
		/* Their kobjects may outlive the unregistration: freed with the parent. */
		r->ntypes = par->ntypes;
		r->types = par->types;
		list_add(&r->node, &par->retired);
		r = NULL;
		par->ntypes = NULL;
		par->types = NULL;
	}
	ret = mdev_register_parent(&par->parent, &par->dev, &ntbfab_mdev_driver, types, n);
	if (ret)
		goto fail;
	par->registered = true;
	par->ntypes = ntypes;
	par->types = types;
	par->nr_types = n;
	kfree(r);
	return 0;
fail:
	kfree(r);
	kfree(types);
	kfree(ntypes);
	return ret;
}

static bool node_name_ok(const char *s)
{
	size_t i, n = strnlen(s, 32);

	if (!n || n == 32)
		return false;
	for (i = 0; i < n; i++)
		if (!isalnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

static struct mdev_parent_dev *parent_named(const char *node)
{
	struct mdev_parent_dev *par;

	list_for_each_entry(par, &mdev_parents, node)
		if (!strcmp(par->nodename, node))
			return par;
	return NULL;
}

static struct mdev_parent_dev *parent_new(const char *node)
{
	struct mdev_parent_dev *par = kzalloc(sizeof(*par), GFP_KERNEL);
	int ret;

	if (!par)
		return ERR_PTR(-ENOMEM);
	INIT_LIST_HEAD(&par->insts);
	INIT_LIST_HEAD(&par->retired);
	strscpy(par->nodename, node, sizeof(par->nodename));
	par->dev.class = mdev_class;
	par->dev.release = parent_release;
	dev_set_name(&par->dev, "ntbfab-%s", node);
	ret = device_register(&par->dev);
	if (ret) {
		put_device(&par->dev);
		return ERR_PTR(ret);
	}
	return par;
}

static long ioc_pool(struct ntbfab_lend_file *f, struct ntbfab_lend_mdev_pool *p)
{
	struct ntbfab_lend_mdev_type *t;
	struct mdev_parent_dev *par, *mine;
	bool busy, other;
	long ret;
	u32 i;

	if (p->flags || p->reserved[0] || p->reserved[1] || p->count > NTBFAB_LEND_MDEV_MAX_TYPES ||
	    !node_name_ok(p->node))
		return -EINVAL;
	t = memdup_user(u64_to_user_ptr(p->types), sizeof(*t) * (p->count ?: 1));
	if (IS_ERR(t))
		return PTR_ERR(t);
	for (i = 0; i < p->count; i++) {
		if (t[i].reserved || t[i].fdid > 0xffff ||
		    !memchr(t[i].name, 0, sizeof(t[i].name))) {
			kfree(t);
			return -EINVAL;
		}
	}
	mutex_lock(&mdev_pool_lock);
	mutex_lock(&mdev_lock);
	mine = parent_of(f);
	par = parent_named(p->node);
	busy = par && !list_empty(&par->insts);
	other = par && par->owner && par->owner != f;
	mutex_unlock(&mdev_lock);
	ret = -EINVAL;
	if (mine && mine != par)
		goto out;	/* one daemon, one node */
	ret = -EBUSY;
	if (other)
		goto out;	/* another daemon of this node serves it */
	if (!par) {
		par = parent_new(p->node);
		ret = PTR_ERR(par);
		if (IS_ERR(par))
			goto out;
		mutex_lock(&mdev_lock);
		list_add(&par->node, &mdev_parents);
		mutex_unlock(&mdev_lock);
	}
	if (!par->registered || !types_equal(par, t, p->count)) {
		ret = -EBUSY;
		if (busy) {
			dev_err(&par->dev, "the pool changed while instances exist: remove them first\n");
			goto out;
		}
		ret = parent_set_types(par, t, p->count);
		if (ret)
			goto out;
	}
	mutex_lock(&mdev_lock);
	if (par->owner != f)
		dev_info(&par->dev, "served by ntbfabd (%u devices in the pool)\n", par->nr_types);
	par->owner = f;
	mutex_unlock(&mdev_lock);
	ret = 0;
out:
	mutex_unlock(&mdev_pool_lock);
	kfree(t);
	return ret;
}

/*
 * The instance's UUID in the byte order of its name (the mdev core keeps a
 * little-endian GUID: the first three fields are swapped).
 */
static void inst_uuid(struct mdev_inst *inst, u8 out[16])
{
	const u8 *g = to_mdev_device(inst->vdev.dev)->uuid.b;
	static const u8 order[16] = { 3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15 };
	int i;

	for (i = 0; i < 16; i++)
		out[i] = g[order[i]];
}

/* An instance of f's parent by id (mdev_lock held). */
static struct mdev_inst *inst_of(struct ntbfab_lend_file *f, u32 id)
{
	struct mdev_parent_dev *par = parent_of(f);
	struct mdev_inst *inst;

	if (!par)
		return NULL;
	list_for_each_entry(inst, &par->insts, node)
		if (inst->id == id)
			return inst;
	return NULL;
}

static long ioc_list(struct ntbfab_lend_file *f, struct ntbfab_lend_mdev_list *l)
{
	struct ntbfab_lend_mdev_entry __user *out = u64_to_user_ptr(l->entries);
	struct ntbfab_lend_mdev_entry *e;
	struct mdev_parent_dev *par;
	struct mdev_inst *inst;
	u32 n = 0, max = l->count;
	long ret = 0;

	if (l->reserved || max > 4096)
		return -EINVAL;
	e = kcalloc(max ?: 1, sizeof(*e), GFP_KERNEL);
	if (!e)
		return -ENOMEM;
	mutex_lock(&mdev_lock);
	par = parent_of(f);
	if (par) {
		list_for_each_entry(inst, &par->insts, node) {
			if (n < max) {
				e[n].instance = inst->id;
				e[n].fdid = inst->fdid;
				inst_uuid(inst, e[n].uuid);
				e[n].state = inst_state(inst);
			}
			n++;
		}
	}
	mutex_unlock(&mdev_lock);
	if (!par)
		ret = -ENOENT;
	else if (copy_to_user(out, e, sizeof(*e) * min(n, max)))
		ret = -EFAULT;
	l->count = n;
	kfree(e);
	return ret;
}

static long ioc_info(struct ntbfab_lend_file *f, struct ntbfab_lend_mdev_info *in)
{
	struct ntbfab_lend_mdev_range *r;
	struct mdev_inst *inst;
	u32 max = in->nr_ranges, i;
	long ret = 0;

	if (max > NTBFAB_LEND_MDEV_MAX_RANGES)
		max = NTBFAB_LEND_MDEV_MAX_RANGES;
	r = kcalloc(max ?: 1, sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	/*
	 * The ranges and BARs change only under inst->lock, which the instance
	 * holds while it waits for this daemon's answer: a BORROW's INFO reads
	 * them settled.  ntbfab_lend_lock() keeps a lender's ->gone() out.
	 */
	ntbfab_lend_lock();
	mutex_lock(&mdev_lock);
	inst = inst_of(f, in->instance);
	if (!inst) {
		mutex_unlock(&mdev_lock);
		ntbfab_lend_unlock();
		kfree(r);
		return -ENOENT;
	}
	in->fdid = inst->fdid;
	inst_uuid(inst, in->uuid);
	in->state = inst_state(inst);
	in->nr_ranges = inst_ranges(inst, r, max);
	in->pinned = inst->pinned;
	for (i = 0; i < PCI_STD_NUM_BARS; i++) {
		in->bars[i] = inst_guest_bar(inst, i);
		in->bar_sizes[i] = inst->bar_upper[i] ? 0 : inst->bar_size[i];
	}
	in->vm = inst->vm;
	memset(in->reserved, 0, sizeof(in->reserved));
	mutex_unlock(&mdev_lock);
	ntbfab_lend_unlock();
	if (copy_to_user(u64_to_user_ptr(in->ranges), r, sizeof(*r) * min(in->nr_ranges, max)))
		ret = -EFAULT;
	kfree(r);
	return ret;
}

/* Hand an answer to the instance waiting for it. */
static long answer(struct ntbfab_lend_file *f, u32 id, u64 seq, struct mdev_answer *a)
{
	struct mdev_inst *inst;
	long ret;

	a->why[sizeof(a->why) - 1] = '\0';
	mutex_lock(&mdev_lock);
	inst = inst_of(f, id);
	ret = inst ? inst_answer(inst, seq, a) : -ENOENT;
	mutex_unlock(&mdev_lock);
	return ret;
}

static long ioc_config(struct ntbfab_lend_file *f, struct ntbfab_lend_mdev_config *c)
{
	struct mdev_answer *a;
	long ret;

	if (c->reserved0 || c->reserved[0] || c->reserved[1] || c->status > 0 ||
	    (!c->status && c->config_size != 256 && c->config_size != MDEV_CFG_SIZE))
		return -EINVAL;
	a = kzalloc(sizeof(*a), GFP_KERNEL);
	if (!a)
		return -ENOMEM;
	a->status = c->status;
	memcpy(a->why, c->why, sizeof(a->why));
	memcpy(a->bar_sizes, c->bar_sizes, sizeof(a->bar_sizes));
	a->config_size = c->status ? 0 : c->config_size;
	ret = 0;
	if (a->config_size && copy_from_user(a->config, u64_to_user_ptr(c->config), a->config_size))
		ret = -EFAULT;
	if (!ret)
		ret = answer(f, c->instance, c->seq, a);
	kfree(a);
	return ret;
}

static long ioc_grant(struct ntbfab_lend_file *f, struct ntbfab_lend_mdev_grant *g)
{
	struct mdev_answer *a;
	long ret = 0;
	u32 i;

	if (g->reserved0 || g->reserved[0] || g->reserved[1] || g->status > 0)
		return -EINVAL;
	if (!g->status && (g->flags != NTBFAB_LEND_ATTACH_LOOPBACK ||
			   g->nr_peers > NTBFAB_LEND_MDEV_MAX_PEERS ||
			   (g->config_size != 256 && g->config_size != MDEV_CFG_SIZE)))
		return -EINVAL;
	for (i = 0; !g->status && i < 2; i++)
		if (!PAGE_ALIGNED(g->windows[i].gpa) || !PAGE_ALIGNED(g->windows[i].size) ||
		    g->windows[i].gpa + g->windows[i].size < g->windows[i].gpa)
			return -EINVAL;
	a = kzalloc(sizeof(*a), GFP_KERNEL);
	if (!a)
		return -ENOMEM;
	a->status = g->status;
	memcpy(a->why, g->why, sizeof(a->why));
	if (!g->status) {
		a->export_id = g->export_id;
		a->config_size = g->config_size;
		memcpy(a->windows, g->windows, sizeof(a->windows));
		a->nr_peers = g->nr_peers;
		if (copy_from_user(a->config, u64_to_user_ptr(g->config), g->config_size) ||
		    copy_from_user(a->peers, u64_to_user_ptr(g->peers),
				   sizeof(a->peers[0]) * g->nr_peers))
			ret = -EFAULT;
		for (i = 0; !ret && i < a->nr_peers; i++)
			if (!a->peers[i].size || !PAGE_ALIGNED(a->peers[i].gpa) ||
			    !PAGE_ALIGNED(a->peers[i].size) || !PAGE_ALIGNED(a->peers[i].dev_addr))
				ret = -EINVAL;
	}
	if (!ret)
		ret = answer(f, g->instance, g->seq, a);
	kfree(a);
	return ret;
}

static long ioc_done(struct ntbfab_lend_file *f, struct ntbfab_lend_mdev_done *d)
{
	struct mdev_answer *a;
	long ret;

	if (d->reserved || d->status > 0)
		return -EINVAL;
	a = kzalloc(sizeof(*a), GFP_KERNEL);
	if (!a)
		return -ENOMEM;
	a->status = d->status;
	a->value = d->value;
	ret = answer(f, d->instance, d->seq, a);
	kfree(a);
	return ret;
}

/* A peer BAR for a borrowed instance (another device of its VM was borrowed after it). */
static long ioc_peer(struct ntbfab_lend_file *f, struct ntbfab_lend_mdev_peer_add *p)
{
	struct ntbfab_lend_mdev_peer *x = &p->peer;
	struct mdev_inst *inst;
	long ret;

	if (p->reserved || !x->size || !PAGE_ALIGNED(x->gpa) || !PAGE_ALIGNED(x->size) ||
	    !PAGE_ALIGNED(x->dev_addr) || x->gpa + x->size < x->gpa)
		return -EINVAL;
	ntbfab_lend_lock();
	mutex_lock(&mdev_lock);
	inst = inst_of(f, p->instance);
	ret = -ENOENT;
	if (inst) {
		ret = -EAGAIN;
		if (inst->ex && inst->nr_peers == NTBFAB_LEND_MDEV_MAX_PEERS)
			ret = -ENOSPC;
		else if (inst->ex)
			ret = dom_free(inst, x->gpa, x->size);
		if (!ret)
			ret = iommu_map(inst->dom, x->gpa, x->dev_addr, x->size,
					IOMMU_READ | IOMMU_WRITE | IOMMU_MMIO);
		if (!ret)
			inst->peers[inst->nr_peers++] = *x;
	}
	mutex_unlock(&mdev_lock);
	ntbfab_lend_unlock();
	return ret;
}

static long mdev_ioctl(struct ntbfab_lend_file *f, unsigned int cmd, void __user *arg)
{
	union {
		struct ntbfab_lend_mdev_pool pool;
		struct ntbfab_lend_mdev_list list;
		struct ntbfab_lend_mdev_info info;
		struct ntbfab_lend_mdev_config config;
		struct ntbfab_lend_mdev_grant grant;
		struct ntbfab_lend_mdev_done done;
		struct ntbfab_lend_mdev_peer_add peer;
	} *x;
	long ret;

	switch (cmd) {
	case NTBFAB_LEND_IOC_MDEV_POOL:
	case NTBFAB_LEND_IOC_MDEV_LIST:
	case NTBFAB_LEND_IOC_MDEV_INFO:
	case NTBFAB_LEND_IOC_MDEV_CONFIG:
	case NTBFAB_LEND_IOC_MDEV_GRANT:
	case NTBFAB_LEND_IOC_MDEV_DONE:
	case NTBFAB_LEND_IOC_MDEV_PEER:
		break;
	default:
		return -ENOTTY;
	}
	x = kmalloc(sizeof(*x), GFP_KERNEL);
	if (!x)
		return -ENOMEM;
	ret = -EFAULT;
	if (copy_from_user(x, arg, _IOC_SIZE(cmd)))
		goto out;
	switch (cmd) {
	case NTBFAB_LEND_IOC_MDEV_POOL:
		ret = ioc_pool(f, &x->pool);
		break;
	case NTBFAB_LEND_IOC_MDEV_LIST:
		ret = ioc_list(f, &x->list);
		if (!ret || ret == -EFAULT)
			ret = copy_to_user(arg, &x->list, sizeof(x->list)) ? -EFAULT : ret;
		break;
	case NTBFAB_LEND_IOC_MDEV_INFO:
		ret = ioc_info(f, &x->info);
		if (!ret)
			ret = copy_to_user(arg, &x->info, sizeof(x->info)) ? -EFAULT : 0;
		break;
	case NTBFAB_LEND_IOC_MDEV_CONFIG:
		ret = ioc_config(f, &x->config);
		break;
	case NTBFAB_LEND_IOC_MDEV_GRANT:
		ret = ioc_grant(f, &x->grant);
		break;
	case NTBFAB_LEND_IOC_MDEV_DONE:
		ret = ioc_done(f, &x->done);
		break;
	case NTBFAB_LEND_IOC_MDEV_PEER:
		ret = ioc_peer(f, &x->peer);
		break;
	}
out:
	kfree(x);
	return ret;
}

/* The daemon's file is released: its parent waits for the next daemon of its node. */
static void mdev_file_release(struct ntbfab_lend_file *f)
{
	struct mdev_parent_dev *par;
	struct mdev_inst *inst;

	mutex_lock(&mdev_lock);
	par = parent_of(f);
	if (par) {
		par->owner = NULL;
		list_for_each_entry(inst, &par->insts, node)
			inst_abandon(inst);
		dev_info(&par->dev, "ntbfabd went away; borrowed instances keep their device\n");
	}
	mutex_unlock(&mdev_lock);
}

static const struct ntbfab_lend_frontend mdev_frontend = {
	.owner = THIS_MODULE,
	.feature = NTBFAB_LEND_FEAT_MDEV,
	.first_nr = _IOC_NR(NTBFAB_LEND_IOC_MDEV_POOL),
	.last_nr = _IOC_NR(NTBFAB_LEND_IOC_MDEV_PEER),
	.ioctl = mdev_ioctl,
	.release = mdev_file_release,
};

static ssize_t state_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct mdev_inst *inst = dev_get_drvdata(dev);
	u32 s;

	if (!inst)
		return -ENODEV;
	s = inst_state(inst);
	return sysfs_emit(buf, "%s\n",
			  s < ARRAY_SIZE(mdev_state_names) ? mdev_state_names[s] : "?");
}
static DEVICE_ATTR_RO(state);

static ssize_t fdid_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct mdev_inst *inst = dev_get_drvdata(dev);

	return inst ? sysfs_emit(buf, "0x%04x\n", inst->fdid) : -ENODEV;
}
static DEVICE_ATTR_RO(fdid);

static struct attribute *inst_attrs[] = {
	&dev_attr_state.attr,
	&dev_attr_fdid.attr,
	NULL,
};

static const struct attribute_group inst_group = {
	.name = "ntbfab",
	.attrs = inst_attrs,
};

static const struct attribute_group *inst_groups[] = {
	&inst_group,
	NULL,
};

static int __init ntbfab_mdev_init(void)
{
	int ret;

	ntbfab_mdev_driver.driver.dev_groups = inst_groups;
	ret = mdev_register_driver(&ntbfab_mdev_driver);
	if (ret)
		return ret;
	mdev_class = class_create(THIS_MODULE, "ntbfab");
	if (IS_ERR(mdev_class)) {
		ret = PTR_ERR(mdev_class);
		goto fail_driver;
	}
	ret = ntbfab_lend_frontend_register(&mdev_frontend);
	if (ret)
		goto fail_class;
	pr_info("VM pass-through of ntbfab's pool: parents appear when ntbfabd names its pool\n");
	return 0;

fail_class:
	class_destroy(mdev_class);
fail_driver:
	mdev_unregister_driver(&ntbfab_mdev_driver);
	return ret;
}

static void __exit ntbfab_mdev_exit(void)
{
	struct mdev_parent_dev *par, *n;

	ntbfab_lend_frontend_unregister(&mdev_frontend);
	/* No VMM holds an instance (it would hold this module): they all go. */
	list_for_each_entry_safe(par, n, &mdev_parents, node) {
		list_del(&par->node);
		if (par->registered)
			mdev_unregister_parent(&par->parent);
		device_unregister(&par->dev);
	}
	class_destroy(mdev_class);
	mdev_unregister_driver(&ntbfab_mdev_driver);
	ida_destroy(&mdev_ida);
}

module_init(ntbfab_mdev_init);
module_exit(ntbfab_mdev_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("ntbfab mdev: pool devices passed through to VMs, borrowed when the guest enables them");
MODULE_AUTHOR("ntbfab");
MODULE_SOFTDEP("pre: ntbfab_shadow");
