// SPDX-License-Identifier: GPL-2.0-only
/*
 * ntbfab_shadow: borrowed PCIe devices as hot-added "shadow devices" on the
 * borrower, so that the kernel's own driver binds to them (SmartIO's Device
 * Lending, docs/kernel.md).
 *
 * ntbfabd decides, this module executes.  Through /dev/ntbfab-lend (the
 * contract is include/uapi/ntbfab_lend.h) the daemon attaches a device it
 * borrowed; the module gives it a virtual PCI host bridge in a PCI domain of
 * its own, scans it and adds it, and the stock driver probes:
 *
 * - config space: reads are answered from the copy the lender sent (config
 *   accessors run under the PCI core's raw spinlock, so nothing here may
 *   wait for the daemon); writes update the copy and are queued to the
 *   daemon, which forwards them to the lender and sends back the value the
 *   device then holds.  The BARs are emulated (fixed at the window
 *   addresses), the Interrupt Pin reads 0 and INTx stays disabled, the MSI
 *   capability is hidden behind MSI-X;
 * - interrupts: the bridge has an MSI irq domain of its own.  The message it
 *   composes for the device's MSI-X table is the lender-side one; the
 *   interrupt that message raises is relayed to the shadow vector;
 * - DMA: the device's dma_map_ops map the driver's pages into the borrow's
 *   DMA window through the IOMMU and return device-side addresses; nothing
 *   is asked of the lender when a page is mapped.  dma_map_resource() of a
 *   peer's BAR returns the address the daemon resolved (article 4.4).
 *
 * Version 1 implements loopback lending, where lender and borrower are one
 * kernel and the device's DMA leaves through an NTB window onto this host's
 * own RAM (module parameter loopback_window) and comes back: the kernel tier's
 * vehicle, in which no guest can reach another guest's device registers.
 * There the BARs are the device's own, the IOMMU mapping that the DMA window
 * needs is made in the device's IOMMU domain (the lender's VFIO container,
 * kept alive by the exported group file) and points into the window, and the
 * interrupt is the lender's VFIO vector, relayed from its eventfd.
 *
 * Objects: struct ntbfab_lend_file per open file (its records, its shadows and
 * exports); struct ntbfab_export per device offered by a lender's daemon;
 * struct lend_shadow per attached device.  lend_lock (a mutex) guards the
 * lists and every attach and removal.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/dma-map-ops.h>
#include <linux/eventfd.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/iommu.h>
#include <linux/iova.h>
#include <linux/irq.h>
#include <linux/irq_work.h>
#include <linux/irqdomain.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/msi.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/poll.h>
#include <linux/random.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vfio.h>
#include <linux/vfio_pci_core.h>
#include <linux/wait.h>

#include "ntbfab_lend.h"
#include "ntbfab_lend_core.h"

#define LEND_RING		1024	/* records a file holds before OVERFLOW */
#define LEND_CFG_MAX		(LEND_RING - 128) /* then config writes merge (lend_merge) */
#define LEND_DOMAIN_BASE	0x10000	/* first PCI domain tried for a bridge */
#define LEND_COOKIE_WORDS	8
#define LEND_IOVA_CACHE_ORDER	6	/* the IOVA range caches hold sizes below 2^(6-1) pages */

static char *loopback_window;
module_param(loopback_window, charp, 0444);
MODULE_PARM_DESC(loopback_window,
		 "PCI address (DDDD:BB:DD.F) of the device whose BAR is an NTB window onto this host's own RAM (loopback lending); empty: none");

static uint loopback_window_bar = 2;
module_param(loopback_window_bar, uint, 0444);
MODULE_PARM_DESC(loopback_window_bar, "Which BAR of loopback_window is the window (default 2)");

struct ntbfab_lend_file {
	raw_spinlock_t lock;		/* the ring */
	struct ntbfab_lend_msg ring[LEND_RING];
	unsigned int head, count;
	bool overflow;
	u64 seq;
	wait_queue_head_t wait;
	struct irq_work wake;		/* wakes readers outside raw locks */
};

struct ntbfab_export;

struct lend_relay {
	struct ntbfab_export *ex;
	u32 index;
	struct eventfd_ctx *ctx;
	wait_queue_entry_t wait;
	poll_table pt;
	wait_queue_head_t *wqh;
	struct irq_work fire;		/* runs the shadow's handler after the eventfd's wakeup */
};

struct ntbfab_export {
	struct list_head node;
	struct ntbfab_lend_file *owner;
	u64 id;
	struct pci_dev *pdev;
	struct file *group;
	u64 iova_base, iova_size;
	u32 nr_irqs;
	struct msi_msg *msgs;		/* the lender-side message of each vector */
	struct lend_relay *relays;
	raw_spinlock_t irq_lock;	/* uops, uctx as the relays read them */
	const struct ntbfab_lend_user_ops *uops;	/* its user: a shadow or an mdev instance */
	void *uctx;
};

struct lend_peer {
	struct list_head node;
	u64 phys, size, dev_addr;
};

struct lend_bar {
	u64 phys, size;
	u32 flags;			/* the BAR register's low bits */
	bool upper;			/* the upper half of a 64-bit BAR */
	bool probing;			/* all ones was written: reads return the size */
};

struct lend_shadow {
	struct pci_sysdata sysdata;	/* first: bus->sysdata leads here */
	struct list_head node;
	struct ntbfab_lend_file *owner;
	struct ntbfab_export *ex;
	u32 id, fdid;
	int domain;

	raw_spinlock_t virq_lock;	/* virq[] */
	unsigned int *virq;		/* the interrupt of the lender's vector i, 0: none */

	raw_spinlock_t cfg_lock;	/* cfg, dw_seq, bars, dead */
	u8 cfg[NTBFAB_LEND_CFG_SIZE];
	u32 cfg_size;
	u64 dw_seq[NTBFAB_LEND_CFG_SIZE / 4];
	struct lend_bar bars[PCI_STD_NUM_BARS];
	bool dead;

	struct resource busn;
	struct resource win[PCI_STD_NUM_BARS];
	struct fwnode_handle *fwnode;
	struct irq_domain *irqdom;
	struct msi_domain_info msi_info;
	struct pci_bus *bus;
	struct pci_dev *pdev;

	struct iommu_domain *dom;
	struct iova_domain iovad;
	bool iovad_ready;
	unsigned long limit_pfn;
	u64 dma_base, dma_size;
	phys_addr_t win_phys;
	resource_size_t win_size;
	atomic_long_t mappings;

	spinlock_t peer_lock;		/* peers */
	struct list_head peers;
};

static DEFINE_MUTEX(lend_lock);
static DECLARE_RWSEM(lend_fe_sem);	/* lend_fe[], held while a frontend runs */
static const struct ntbfab_lend_frontend *lend_fe[2];
static LIST_HEAD(lend_exports);
static LIST_HEAD(lend_shadows);
static DEFINE_IDA(lend_ida);
static u64 lend_next_export = 1;
static struct pci_dev *lend_window;	/* loopback_window, enabled */
static struct miscdevice lend_misc;
static struct dentry *lend_debugfs;

/* ---- records for the daemon ---------------------------------------------------------- */

static void lend_wake(struct irq_work *w)
{
	struct ntbfab_lend_file *f = container_of(w, struct ntbfab_lend_file, wake);

	wake_up_interruptible(&f->wait);
}

/*
 * A ring with LEND_CFG_MAX records or more (its reader, the daemon, is stopped or
 * slow): a driver's config write replaces the newest queued write of the same bytes
 * of the same device, which moves to the tail, instead of taking a record.  The
 * lender then gets the last value of each register, in the order of the last
 * writes; only a write to bytes with nothing queued is lost (an OVERFLOW).  The
 * records that cannot merge (a removal, mdev requests) keep the ring's last 128.
 * Under f->lock.
 */
static bool lend_merge(struct ntbfab_lend_file *f, const struct ntbfab_lend_msg *n)
{
	unsigned int i, j;
	struct ntbfab_lend_msg *m;

	for (i = f->count; i-- > 0;) {
		m = &f->ring[(f->head + i) % LEND_RING];
		if (m->kind != NTBFAB_LEND_MSG_CFG_WRITE || m->shadow_id != n->shadow_id ||
		    m->offset != n->offset || m->size != n->size)
			continue;
		for (j = i; j + 1 < f->count; j++)
			f->ring[(f->head + j) % LEND_RING] =
				f->ring[(f->head + j + 1) % LEND_RING];
		f->ring[(f->head + f->count - 1) % LEND_RING] = *n;
		return true;
	}
	return false;
}

/* Queue a record; callable under raw spinlocks.  Returns its seq. */
u64 ntbfab_lend_post(struct ntbfab_lend_file *f, u32 kind, u32 shadow_id, u32 off, u32 size,
		     u32 val)
{
	struct ntbfab_lend_msg n;
	unsigned long flags;
	u64 seq;

	raw_spin_lock_irqsave(&f->lock, flags);
	seq = ++f->seq;
	n = (struct ntbfab_lend_msg){ .kind = kind, .shadow_id = shadow_id, .seq = seq,
				      .offset = off, .size = size, .value = val };
	if (kind == NTBFAB_LEND_MSG_CFG_WRITE && f->count >= LEND_CFG_MAX) {
		if (!lend_merge(f, &n))
			f->overflow = true;
	} else if (f->count == LEND_RING) {
		f->overflow = true;
	} else {
		f->ring[(f->head + f->count++) % LEND_RING] = n;
	}
	raw_spin_unlock_irqrestore(&f->lock, flags);
	irq_work_queue(&f->wake);
	return seq;
}
EXPORT_SYMBOL_GPL(ntbfab_lend_post);

/* ---- config space -------------------------------------------------------------------- */

static struct lend_shadow *bus_shadow(struct pci_bus *bus)
{
	return container_of(bus->sysdata, struct lend_shadow, sysdata);
}

static u32 cfg_dword(struct lend_shadow *s, u32 off)
{
	return (u32)s->cfg[off] | (u32)s->cfg[off + 1] << 8 | (u32)s->cfg[off + 2] << 16 |
	       (u32)s->cfg[off + 3] << 24;
}

/* The emulated value of the dword at off (a multiple of 4). */
static u32 cfg_read_dword(struct lend_shadow *s, u32 off)
{
	struct lend_bar *b;
	u32 v;

	if (off >= PCI_BASE_ADDRESS_0 && off <= PCI_BASE_ADDRESS_5) {
		b = &s->bars[(off - PCI_BASE_ADDRESS_0) / 4];
		if (b->upper) {
			struct lend_bar *lo = b - 1;

			return upper_32_bits(lo->probing ? ~(lo->size - 1) : lo->phys);
		}
		if (!b->size)
			return 0;
		v = lower_32_bits(b->probing ? ~(b->size - 1) : b->phys);
		return (v & PCI_BASE_ADDRESS_MEM_MASK) | b->flags;
	}
	if (off == PCI_ROM_ADDRESS)
		return 0;
	v = cfg_dword(s, off);
	if (off == PCI_INTERRUPT_LINE)
		v &= ~0xffffU;	/* no INTx: Interrupt Line and Pin read 0 */
	return v;
}

static int lend_cfg_read(struct pci_bus *bus, unsigned int devfn, int where, int size, u32 *val)
{
	struct lend_shadow *s = bus_shadow(bus);
	unsigned long flags;
	u32 v;

	if (devfn || where < 0 || where + size > s->cfg_size || where % size) {
		*val = ~0U;
		return devfn ? PCIBIOS_DEVICE_NOT_FOUND : PCIBIOS_BAD_REGISTER_NUMBER;
	}
	raw_spin_lock_irqsave(&s->cfg_lock, flags);
	v = s->dead ? ~0U : cfg_read_dword(s, where & ~3);
	raw_spin_unlock_irqrestore(&s->cfg_lock, flags);
	v >>= 8 * (where & 3);
	*val = size == 4 ? v : v & ((1U << 8 * size) - 1);
	return PCIBIOS_SUCCESSFUL;
}

/* A write of a BAR: sizing (all ones) or the address it has; nothing reaches the device. */
static void cfg_write_bar(struct lend_shadow *s, u32 off, u32 val)
{
	struct lend_bar *b = &s->bars[(off - PCI_BASE_ADDRESS_0) / 4];
	struct lend_bar *lo = b->upper ? b - 1 : b;
	u32 keep = b->upper ? ~0U : (u32)PCI_BASE_ADDRESS_MEM_MASK;
	u32 want = b->upper ? upper_32_bits(lo->phys) : lower_32_bits(lo->phys);

	lo->probing = val == ~0U;
	if (!lo->probing && lo->size && (val & keep) != (want & keep))
		pr_warn_ratelimited("shadow %u: BAR at 0x%x stays at the window (0x%llx), not 0x%x\n",
				    s->id, off, lo->phys, val);
}

static int lend_cfg_write(struct pci_bus *bus, unsigned int devfn, int where, int size, u32 val)
{
	struct lend_shadow *s = bus_shadow(bus);
	u32 off = where & ~3, shift = 8 * (where & 3), mask, keep, wval, fwd, dw;
	unsigned long flags;
	int i;

	if (devfn)
		return PCIBIOS_DEVICE_NOT_FOUND;
	if (where < 0 || where + size > s->cfg_size || where % size)
		return PCIBIOS_BAD_REGISTER_NUMBER;
	mask = size == 4 ? ~0U : ((1U << 8 * size) - 1) << shift;
	wval = val << shift;
	raw_spin_lock_irqsave(&s->cfg_lock, flags);
	if (s->dead)
		goto out;
	if (off >= PCI_BASE_ADDRESS_0 && off <= PCI_BASE_ADDRESS_5) {
		if (size == 4)
			cfg_write_bar(s, off, val);
		goto out;
	}
	if (off == PCI_ROM_ADDRESS || off == PCI_INTERRUPT_LINE)
		goto out;
	keep = mask;
	fwd = wval;
	if (off == PCI_COMMAND) {
		/* INTx cannot cross an NTB: Interrupt Disable stays set on the device. */
		if (mask & PCI_COMMAND_INTX_DISABLE)
			wval |= PCI_COMMAND_INTX_DISABLE;
		/*
		 * Memory Space and Bus Master stay set on the device while it is attached
		 * (the lender set them): config writes arrive after the MMIO the driver
		 * makes next, so a clear (around BAR sizing, or on a reset before the
		 * driver enables the device again) would make the device drop that MMIO
		 * or its DMA.  The copy keeps the driver's values; the lender resets the
		 * device when it comes back (docs/kernel.md, "Limits").
		 */
		fwd = wval | (mask & (PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER));
		/* Status bits are write-one-to-clear: the copy keeps what the device said. */
		keep &= 0xffff;
	}
	dw = (cfg_dword(s, off) & ~keep) | (wval & keep);
	for (i = 0; i < 4; i++)
		s->cfg[off + i] = dw >> 8 * i;
	s->dw_seq[off / 4] = ntbfab_lend_post(s->owner, NTBFAB_LEND_MSG_CFG_WRITE, s->id, where,
					      size, (fwd & mask) >> shift);
out:
	raw_spin_unlock_irqrestore(&s->cfg_lock, flags);
	return PCIBIOS_SUCCESSFUL;
}

static struct pci_ops lend_pci_ops = {
	.read = lend_cfg_read,
	.write = lend_cfg_write,
};

/* Offset of capability id in the standard list (0: none). */
static u32 cfg_find_cap(struct lend_shadow *s, u8 id, u32 *prev)
{
	u32 pos = s->cfg[PCI_CAPABILITY_LIST] & ~3, link = PCI_CAPABILITY_LIST;
	int n;

	if (!(s->cfg[PCI_STATUS] & PCI_STATUS_CAP_LIST))
		return 0;
	for (n = 0; n < 48 && pos >= 0x40 && pos < 0x100; n++) {
		if (s->cfg[pos] == id) {
			if (prev)
				*prev = link;
			return pos;
		}
		link = pos + 1;
		pos = s->cfg[pos + 1] & ~3;
	}
	return 0;
}

/* Drop extended capability id from the list the copy shows. */
static void cfg_hide_ext_cap(struct lend_shadow *s, u16 id)
{
	u32 pos = PCI_CFG_SPACE_SIZE, prev = 0, hdr, next;
	int n;

	for (n = 0; n < 480 && pos >= PCI_CFG_SPACE_SIZE && pos + 4 <= s->cfg_size; n++) {
		hdr = cfg_dword(s, pos);
		if (!hdr || hdr == ~0U)
			return;
		next = PCI_EXT_CAP_NEXT(hdr);
		if (PCI_EXT_CAP_ID(hdr) == id) {
			if (prev) {
				u32 ph = cfg_dword(s, prev);

				ph = (ph & 0x000fffff) | next << 20;
				s->cfg[prev + 2] = ph >> 16;
				s->cfg[prev + 3] = ph >> 24;
			} else {
				/* The first one: keep a header that leads on, with a null id. */
				s->cfg[pos] = 0;
				s->cfg[pos + 1] = 0;
				s->cfg[pos + 2] &= 0x0f;
			}
			return;
		}
		prev = pos;
		pos = next;
	}
}

/* ---- interrupts: the bridge's MSI domain --------------------------------------------- */

static void lend_compose_msi_msg(struct irq_data *d, struct msi_msg *msg)
{
	struct lend_shadow *s = irq_data_get_irq_chip_data(d);
	u32 i = irqd_to_hwirq(d) & 0x7ff;	/* the MSI-X table entry */

	if (i < s->ex->nr_irqs) {
		*msg = s->ex->msgs[i];
	} else {
		/* A vector the lender does not relay: a message that reaches nothing. */
		memset(msg, 0, sizeof(*msg));
	}
}

static int lend_irq_set_affinity(struct irq_data *d, const struct cpumask *dest, bool force)
{
	return -EINVAL;		/* the lender's vector decides where it fires */
}

static struct irq_chip lend_msi_chip = {
	.name			= "NTBFAB-MSI",
	.irq_compose_msi_msg	= lend_compose_msi_msg,
	.irq_set_affinity	= lend_irq_set_affinity,
};

static int lend_msi_init(struct irq_domain *domain, struct msi_domain_info *info,
			 unsigned int virq, irq_hw_number_t hwirq, msi_alloc_info_t *arg)
{
	struct lend_shadow *s = info->data;
	u32 i = hwirq & 0x7ff;
	unsigned long flags;

	irq_domain_set_info(domain, virq, hwirq, info->chip, s, handle_simple_irq, NULL, NULL);
	if (i < s->ex->nr_irqs) {
		raw_spin_lock_irqsave(&s->virq_lock, flags);
		s->virq[i] = virq;
		raw_spin_unlock_irqrestore(&s->virq_lock, flags);
	}
	return 0;
}

static void lend_msi_free(struct irq_domain *domain, struct msi_domain_info *info,
			  unsigned int virq)
{
	struct lend_shadow *s = info->data;
	unsigned long flags;
	u32 i;

	raw_spin_lock_irqsave(&s->virq_lock, flags);
	for (i = 0; i < s->ex->nr_irqs; i++)
		if (s->virq[i] == virq)
			s->virq[i] = 0;
	raw_spin_unlock_irqrestore(&s->virq_lock, flags);
}

static int lend_msi_check(struct irq_domain *domain, struct msi_domain_info *info,
			  struct device *dev)
{
	struct msi_desc *desc = msi_first_desc(dev, MSI_DESC_ALL);

	/* Plain MSI is hidden: only MSI-X vectors are relayed. */
	return desc && desc->pci.msi_attrib.is_msix ? 0 : -EOPNOTSUPP;
}

static struct msi_domain_ops lend_msi_ops = {
	.msi_init	= lend_msi_init,
	.msi_free	= lend_msi_free,
	.msi_check	= lend_msi_check,
};

/* The lender's vector fired: a shadow runs its vector's handler. */
static void shadow_irq(void *ctx, u32 vector)
{
	struct lend_shadow *s = ctx;
	unsigned int virq;

	raw_spin_lock(&s->virq_lock);
	virq = s->virq[vector];
	if (virq)
		generic_handle_irq_safe(virq);
	raw_spin_unlock(&s->virq_lock);
}

/*
 * The export's user hears of its vector.  ntbfab_lend_export_release() clears
 * the user, then waits for every relay's irq_work: no call reaches a user that
 * let go.
 */
static void relay_fire(struct irq_work *w)
{
	struct lend_relay *r = container_of(w, struct lend_relay, fire);
	struct ntbfab_export *ex = r->ex;
	const struct ntbfab_lend_user_ops *ops;
	void *ctx;

	raw_spin_lock(&ex->irq_lock);
	ops = ex->uops;
	ctx = ex->uctx;
	raw_spin_unlock(&ex->irq_lock);
	if (ops && ops->irq)
		ops->irq(ctx, r->index);
}

/* The eventfd was signalled (the lender's vector fired): run the shadow's handler. */
static int relay_wake(wait_queue_entry_t *wait, unsigned int mode, int sync, void *key)
{
	struct lend_relay *r = container_of(wait, struct lend_relay, wait);
	u64 cnt;

	if (key_to_poll(key) & EPOLLIN) {
		eventfd_ctx_do_read(r->ctx, &cnt);
		/*
		 * Not from here: the handler may signal eventfds itself, which
		 * eventfd_signal() refuses while one is being signalled.
		 */
		irq_work_queue(&r->fire);
	}
	return 0;
}

static void relay_queue(struct file *file, wait_queue_head_t *wqh, poll_table *pt)
{
	struct lend_relay *r = container_of(pt, struct lend_relay, pt);

	r->wqh = wqh;
	add_wait_queue(wqh, &r->wait);
}

static int relay_start(struct lend_relay *r, int fd)
{
	struct file *file = fget(fd);
	int ret = 0;

	if (!file)
		return -EBADF;
	r->ctx = eventfd_ctx_fileget(file);
	if (IS_ERR(r->ctx)) {
		ret = PTR_ERR(r->ctx);
		r->ctx = NULL;
		goto out;
	}
	init_waitqueue_func_entry(&r->wait, relay_wake);
	init_poll_funcptr(&r->pt, relay_queue);
	init_irq_work(&r->fire, relay_fire);
	vfs_poll(file, &r->pt);
	if (!r->wqh) {
		eventfd_ctx_put(r->ctx);
		r->ctx = NULL;
		ret = -EINVAL;
	}
out:
	fput(file);
	return ret;
}

static void relay_stop(struct lend_relay *r)
{
	u64 cnt;

	if (!r->ctx)
		return;
	eventfd_ctx_remove_wait_queue(r->ctx, &r->wait, &cnt);
	irq_work_sync(&r->fire);
	eventfd_ctx_put(r->ctx);
	r->ctx = NULL;
}

/* ---- DMA: the shadow device's dma_map_ops -------------------------------------------- */

static struct lend_shadow *dev_shadow(struct device *dev)
{
	return bus_shadow(to_pci_dev(dev)->bus);
}

static int dir_prot(enum dma_data_direction dir)
{
	switch (dir) {
	case DMA_TO_DEVICE:
		return IOMMU_READ | IOMMU_CACHE;
	case DMA_FROM_DEVICE:
		return IOMMU_WRITE | IOMMU_CACHE;
	default:
		return IOMMU_READ | IOMMU_WRITE | IOMMU_CACHE;
	}
}

static unsigned long iova_pages(size_t len)
{
	unsigned long n = len >> PAGE_SHIFT;

	/* As dma-iommu does: small sizes in powers of two, so the range caches serve them. */
	if (n < (1UL << (LEND_IOVA_CACHE_ORDER - 1)))
		n = roundup_pow_of_two(n);
	return n;
}

/*
 * Map [phys, phys + size) of this host's memory: an IOVA range of the DMA window
 * whose pages lead into the window onto this RAM.  Local work only.
 */
static dma_addr_t lend_map(struct lend_shadow *s, phys_addr_t phys, size_t size, int prot,
			   bool atomic)
{
	phys_addr_t start = phys & PAGE_MASK;
	size_t len = PAGE_ALIGN(phys + size) - start;
	unsigned long pfn, n = iova_pages(len);
	dma_addr_t iova;
	int ret;

	if (!size || start + len > s->win_size || start + len < start) {
		dev_err_ratelimited(&s->pdev->dev,
				    "cannot map 0x%llx+0x%zx: outside the window onto this host's RAM (%pa bytes)\n",
				    (u64)phys, size, &s->win_size);
		return DMA_MAPPING_ERROR;
	}
	pfn = alloc_iova_fast(&s->iovad, n, s->limit_pfn, true);
	if (!pfn) {
		dev_err_ratelimited(&s->pdev->dev,
				    "DMA window of %llu MiB is full: borrow with a larger --dma-window\n",
				    s->dma_size >> 20);
		return DMA_MAPPING_ERROR;
	}
	iova = (dma_addr_t)pfn << PAGE_SHIFT;
	if (atomic)
		ret = iommu_map_atomic(s->dom, iova, s->win_phys + start, len, prot);
	else
		ret = iommu_map(s->dom, iova, s->win_phys + start, len, prot);
	if (ret) {
		free_iova_fast(&s->iovad, pfn, n);
		dev_err_ratelimited(&s->pdev->dev, "IOMMU map of %zu bytes failed: %d\n", len, ret);
		return DMA_MAPPING_ERROR;
	}
	atomic_long_inc(&s->mappings);
	return iova + (phys - start);
}

static void lend_unmap(struct lend_shadow *s, dma_addr_t addr, size_t size)
{
	dma_addr_t iova = addr & PAGE_MASK;
	size_t len = PAGE_ALIGN(addr + size) - iova;

	if (!size || iova < s->dma_base || iova + len > s->dma_base + s->dma_size) {
		dev_warn_ratelimited(&s->pdev->dev, "unmap of 0x%llx+0x%zx: not a mapping\n",
				     (u64)addr, size);
		return;
	}
	iommu_unmap(s->dom, iova, len);
	free_iova_fast(&s->iovad, iova >> PAGE_SHIFT, iova_pages(len));
	atomic_long_dec(&s->mappings);
}

static dma_addr_t lend_map_page(struct device *dev, struct page *page, unsigned long offset,
				size_t size, enum dma_data_direction dir, unsigned long attrs)
{
	return lend_map(dev_shadow(dev), page_to_phys(page) + offset, size, dir_prot(dir), true);
}

static void lend_unmap_page(struct device *dev, dma_addr_t addr, size_t size,
			    enum dma_data_direction dir, unsigned long attrs)
{
	lend_unmap(dev_shadow(dev), addr, size);
}

static void lend_unmap_sg(struct device *dev, struct scatterlist *sgl, int nents,
			  enum dma_data_direction dir, unsigned long attrs)
{
	struct lend_shadow *s = dev_shadow(dev);
	struct scatterlist *sg;
	int i;

	for_each_sg(sgl, sg, nents, i) {
		if (!sg_dma_len(sg))
			break;
		lend_unmap(s, sg_dma_address(sg), sg_dma_len(sg));
	}
}

static int lend_map_sg(struct device *dev, struct scatterlist *sgl, int nents,
		       enum dma_data_direction dir, unsigned long attrs)
{
	struct lend_shadow *s = dev_shadow(dev);
	struct scatterlist *sg;
	int i;

	for_each_sg(sgl, sg, nents, i) {
		sg_dma_address(sg) = lend_map(s, sg_phys(sg), sg->length, dir_prot(dir), true);
		if (sg_dma_address(sg) == DMA_MAPPING_ERROR) {
			sg_dma_len(sg) = 0;
			lend_unmap_sg(dev, sgl, i, dir, attrs);
			return -ENOMEM;
		}
		sg_dma_len(sg) = sg->length;
	}
	return nents;
}

static void *lend_alloc(struct device *dev, size_t size, dma_addr_t *handle, gfp_t gfp,
			unsigned long attrs)
{
	struct lend_shadow *s = dev_shadow(dev);
	struct page *page;

	size = PAGE_ALIGN(size);
	gfp &= ~(__GFP_DMA | __GFP_DMA32 | __GFP_HIGHMEM);
	page = alloc_pages(gfp | __GFP_ZERO, get_order(size));
	if (!page)
		return NULL;
	*handle = lend_map(s, page_to_phys(page), size, dir_prot(DMA_BIDIRECTIONAL),
			   !gfpflags_allow_blocking(gfp));
	if (*handle == DMA_MAPPING_ERROR) {
		__free_pages(page, get_order(size));
		return NULL;
	}
	return page_address(page);
}

static void lend_free(struct device *dev, size_t size, void *vaddr, dma_addr_t handle,
		      unsigned long attrs)
{
	size = PAGE_ALIGN(size);
	lend_unmap(dev_shadow(dev), handle, size);
	__free_pages(virt_to_page(vaddr), get_order(size));
}

/* A peer's BAR (article 4.4): the address the daemon resolved for this device. */
static dma_addr_t lend_map_resource(struct device *dev, phys_addr_t phys, size_t size,
				    enum dma_data_direction dir, unsigned long attrs)
{
	struct lend_shadow *s = dev_shadow(dev);
	dma_addr_t addr = DMA_MAPPING_ERROR;
	struct lend_peer *p;

	spin_lock(&s->peer_lock);
	list_for_each_entry(p, &s->peers, node)
		if (phys >= p->phys && size <= p->size && phys - p->phys <= p->size - size) {
			addr = p->dev_addr + (phys - p->phys);
			break;
		}
	spin_unlock(&s->peer_lock);
	if (addr == DMA_MAPPING_ERROR)
		dev_err_ratelimited(dev,
				    "no peer mapping for %pa: the daemon resolves peers when both devices are borrowed through it\n",
				    &phys);
	return addr;
}

static int lend_dma_supported(struct device *dev, u64 mask)
{
	struct lend_shadow *s = dev_shadow(dev);

	return mask >= s->dma_base + s->dma_size - 1;
}

static u64 lend_required_mask(struct device *dev)
{
	struct lend_shadow *s = dev_shadow(dev);

	return DMA_BIT_MASK(fls64(s->dma_base + s->dma_size - 1));
}

static const struct dma_map_ops lend_dma_ops = {
	.alloc			= lend_alloc,
	.free			= lend_free,
	.map_page		= lend_map_page,
	.unmap_page		= lend_unmap_page,
	.map_sg			= lend_map_sg,
	.unmap_sg		= lend_unmap_sg,
	.map_resource		= lend_map_resource,
	.dma_supported		= lend_dma_supported,
	.get_required_mask	= lend_required_mask,
};

/* ---- the loopback window ------------------------------------------------------------- */

/*
 * The window must lead back to this host's RAM, byte for byte: a page written
 * by the CPU is read through the window, and a word written through the
 * window is read from the page.
 */
static int window_check(phys_addr_t win, resource_size_t size)
{
	u64 *page = (u64 *)get_zeroed_page(GFP_KERNEL);
	u64 __iomem *io;
	int i, ret = 0;

	if (!page)
		return -ENOMEM;
	if (virt_to_phys(page) + PAGE_SIZE > size) {
		ret = -ERANGE;
		goto out;
	}
	get_random_bytes(page, LEND_COOKIE_WORDS * sizeof(u64));
	io = ioremap(win + virt_to_phys(page), PAGE_SIZE);
	if (!io) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < LEND_COOKIE_WORDS; i++)
		if (readq(io + i) != page[i])
			ret = -ENXIO;
	writeq(~page[0], io + LEND_COOKIE_WORDS);
	if (READ_ONCE(page[LEND_COOKIE_WORDS]) != ~page[0])
		ret = -ENXIO;
	iounmap(io);
out:
	free_page((unsigned long)page);
	return ret;
}

/* With lend_lock held. */
int ntbfab_lend_window(phys_addr_t *phys, resource_size_t *size)
{
	unsigned int dom, bus, dev, fn;
	struct pci_dev *pdev;
	int ret;

	if (!loopback_window || !*loopback_window) {
		pr_err("loopback lending needs the module parameter loopback_window (the PCI address of a window onto this host's RAM)\n");
		return -EOPNOTSUPP;
	}
	if (!lend_window) {
		if (sscanf(loopback_window, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4 ||
		    loopback_window_bar >= PCI_STD_NUM_BARS) {
			pr_err("loopback_window '%s' is not DDDD:BB:DD.F\n", loopback_window);
			return -EINVAL;
		}
		pdev = pci_get_domain_bus_and_slot(dom, bus, PCI_DEVFN(dev, fn));
		if (!pdev) {
			pr_err("loopback_window %s: no such PCI device\n", loopback_window);
			return -ENODEV;
		}
		ret = pci_enable_device_mem(pdev);
		if (ret) {
			pci_dev_put(pdev);
			return ret;
		}
		lend_window = pdev;
	}
	*phys = pci_resource_start(lend_window, loopback_window_bar);
	*size = pci_resource_len(lend_window, loopback_window_bar);
	if (!*size)
		return -ENODEV;
	ret = window_check(*phys, *size);
	if (ret)
		pci_err(lend_window,
			"BAR%u is not a window onto this host's RAM (%d): a page written here does not read back through it; is its memory this machine's RAM file, and its memory decoding on?\n",
			loopback_window_bar, ret);
	return ret;
}
EXPORT_SYMBOL_GPL(ntbfab_lend_window);

/* ---- shadow devices ------------------------------------------------------------------ */

static int shadow_domain(void)
{
	struct lend_shadow *s;
	int dom;

	for (dom = LEND_DOMAIN_BASE;; dom++) {
		bool used = !!pci_find_bus(dom, 0);

		list_for_each_entry(s, &lend_shadows, node)
			used |= s->domain == dom;
		if (!used)
			return dom;
	}
}

/* The BARs from the copy and the lender's device (their addresses: the window). */
static int shadow_bars(struct lend_shadow *s, struct pci_dev *real)
{
	int i;

	for (i = 0; i < PCI_STD_NUM_BARS; i++) {
		u32 reg = cfg_dword(s, PCI_BASE_ADDRESS_0 + 4 * i);
		struct lend_bar *b = &s->bars[i];

		if (reg & PCI_BASE_ADDRESS_SPACE_IO)
			continue;	/* I/O ports do not cross an NTB: hidden */
		b->size = pci_resource_len(real, i);
		b->phys = pci_resource_start(real, i);
		b->flags = reg & ~PCI_BASE_ADDRESS_MEM_MASK;
		if (b->size && !(pci_resource_flags(real, i) & IORESOURCE_MEM))
			return -EINVAL;
		if ((reg & PCI_BASE_ADDRESS_MEM_TYPE_MASK) == PCI_BASE_ADDRESS_MEM_TYPE_64) {
			if (i == PCI_STD_NUM_BARS - 1)
				return -EINVAL;
			s->bars[++i].upper = true;
		} else if (upper_32_bits(b->phys)) {
			return -EINVAL;
		}
	}
	return 0;
}

static void shadow_peers_free(struct lend_shadow *s)
{
	struct lend_peer *p, *n;

	spin_lock(&s->peer_lock);
	list_for_each_entry_safe(p, n, &s->peers, node) {
		list_del(&p->node);
		kfree(p);
	}
	spin_unlock(&s->peer_lock);
}

static void shadow_teardown(struct lend_shadow *s)
{
	long left;

	if (s->bus) {
		pci_lock_rescan_remove();
		pci_stop_root_bus(s->bus);
		pci_remove_root_bus(s->bus);
		pci_unlock_rescan_remove();
	}
	pci_dev_put(s->pdev);
	if (s->irqdom)
		irq_domain_remove(s->irqdom);
	if (s->fwnode)
		irq_domain_free_fwnode(s->fwnode);
	left = atomic_long_read(&s->mappings);
	if (left > 0 && s->dom)
		iommu_unmap(s->dom, s->dma_base, s->dma_size);
	if (s->iovad_ready) {
		put_iova_domain(&s->iovad);
		iova_cache_put();
	}
	if (left)
		pr_info("shadow %u (fdid 0x%04x): %ld DMA mappings its driver left were unmapped\n",
			s->id, s->fdid, left);
	shadow_peers_free(s);
}

/* Remove a shadow device (lend_lock held).  surprise: the device is gone. */
static u64 shadow_remove(struct lend_shadow *s, bool surprise, u32 why)
{
	unsigned long flags;
	u64 left;

	if (surprise) {
		raw_spin_lock_irqsave(&s->cfg_lock, flags);
		s->dead = true;
		raw_spin_unlock_irqrestore(&s->cfg_lock, flags);
		if (s->pdev) {
			device_lock(&s->pdev->dev);
			s->pdev->error_state = pci_channel_io_perm_failure;
			device_unlock(&s->pdev->dev);
		}
	}
	left = atomic_long_read(&s->mappings);
	shadow_teardown(s);
	pr_info("shadow %u (fdid 0x%04x) at %04x:00:00.0 removed%s\n", s->id, s->fdid, s->domain,
		surprise ? " (surprise: the device is gone)" : "");
	list_del(&s->node);
	ntbfab_lend_export_release(s->ex);
	if (why)
		ntbfab_lend_post(s->owner, NTBFAB_LEND_MSG_REMOVED, s->id, 0, 0, why);
	ida_free(&lend_ida, s->id);
	kfree(s->virq);
	kfree(s);
	return left;
}

static struct ntbfab_export *find_export(u64 id)
{
	struct ntbfab_export *ex;

	list_for_each_entry(ex, &lend_exports, node)
		if (ex->id == id)
			return ex;
	return NULL;
}

/* ---- exports for their users (a shadow device here, an mdev instance in ntbfab_mdev) -- */

void ntbfab_lend_lock(void)
{
	mutex_lock(&lend_lock);
}
EXPORT_SYMBOL_GPL(ntbfab_lend_lock);

void ntbfab_lend_unlock(void)
{
	mutex_unlock(&lend_lock);
}
EXPORT_SYMBOL_GPL(ntbfab_lend_unlock);

struct ntbfab_export *ntbfab_lend_export_claim(u64 id, const struct ntbfab_lend_user_ops *ops,
					       void *ctx)
{
	struct ntbfab_export *ex;
	unsigned long flags;

	lockdep_assert_held(&lend_lock);
	ex = find_export(id);
	if (!ex)
		return ERR_PTR(-ENOENT);
	if (ex->uops)
		return ERR_PTR(-EBUSY);
	raw_spin_lock_irqsave(&ex->irq_lock, flags);
	ex->uops = ops;
	ex->uctx = ctx;
	raw_spin_unlock_irqrestore(&ex->irq_lock, flags);
	return ex;
}
EXPORT_SYMBOL_GPL(ntbfab_lend_export_claim);

void ntbfab_lend_export_release(struct ntbfab_export *ex)
{
	unsigned long flags;
	u32 i;

	lockdep_assert_held(&lend_lock);
	raw_spin_lock_irqsave(&ex->irq_lock, flags);
	ex->uops = NULL;
	ex->uctx = NULL;
	raw_spin_unlock_irqrestore(&ex->irq_lock, flags);
	for (i = 0; i < ex->nr_irqs && ex->relays; i++)
		if (ex->relays[i].ctx)
			irq_work_sync(&ex->relays[i].fire);
}
EXPORT_SYMBOL_GPL(ntbfab_lend_export_release);

struct pci_dev *ntbfab_lend_export_pdev(struct ntbfab_export *ex)
{
	return ex->pdev;
}
EXPORT_SYMBOL_GPL(ntbfab_lend_export_pdev);

u32 ntbfab_lend_export_irqs(struct ntbfab_export *ex)
{
	return ex->nr_irqs;
}
EXPORT_SYMBOL_GPL(ntbfab_lend_export_irqs);

struct iommu_domain *ntbfab_lend_export_domain(struct ntbfab_export *ex)
{
	struct iommu_domain *dom = iommu_get_domain_for_dev(&ex->pdev->dev);

	return dom && dom->type == IOMMU_DOMAIN_UNMANAGED ? dom : NULL;
}
EXPORT_SYMBOL_GPL(ntbfab_lend_export_domain);

static void shadow_gone(void *ctx)
{
	shadow_remove(ctx, true, NTBFAB_LEND_GONE_EXPORT);
}

static const struct ntbfab_lend_user_ops shadow_user_ops = {
	.irq = shadow_irq,
	.gone = shadow_gone,
};

static int shadow_attach(struct ntbfab_lend_file *f, struct ntbfab_lend_attach *a)
{
	struct ntbfab_export *ex;
	struct lend_shadow *s;
	struct pci_dev *real;
	LIST_HEAD(resources);
	u32 msix, prev;
	int i, ret;

	if (a->flags != NTBFAB_LEND_ATTACH_LOOPBACK || a->reserved[0] ||
	    a->reserved[1] || (a->config_size != 256 && a->config_size != NTBFAB_LEND_CFG_SIZE) ||
	    !a->dma_size || !PAGE_ALIGNED(a->dma_size))
		return -EINVAL;
	ex = find_export(a->export_id);
	if (!ex)
		return -ENOENT;
	if (ex->uops)
		return -EBUSY;
	if (a->dma_size > ex->iova_size)
		return -ENOSPC;
	real = ex->pdev;
	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s)
		return -ENOMEM;
	ret = ida_alloc(&lend_ida, GFP_KERNEL);
	if (ret < 0) {
		kfree(s);
		return ret;
	}
	s->id = ret;
	s->owner = f;
	s->ex = ex;
	s->fdid = a->fdid;
	s->cfg_size = a->config_size;
	raw_spin_lock_init(&s->virq_lock);
	raw_spin_lock_init(&s->cfg_lock);
	spin_lock_init(&s->peer_lock);
	INIT_LIST_HEAD(&s->peers);
	atomic_long_set(&s->mappings, 0);
	s->virq = kcalloc(ex->nr_irqs ?: 1, sizeof(*s->virq), GFP_KERNEL);
	if (!s->virq) {
		ret = -ENOMEM;
		goto fail_id;
	}
	if (copy_from_user(s->cfg, u64_to_user_ptr(a->config), a->config_size)) {
		ret = -EFAULT;
		goto fail_id;
	}
	if (cfg_dword(s, PCI_VENDOR_ID) != ((u32)real->device << 16 | real->vendor)) {
		pci_err(real, "attach of fdid 0x%04x: the config space sent is of %04x:%04x, not of this device\n",
			a->fdid, cfg_dword(s, 0) & 0xffff, cfg_dword(s, 0) >> 16);
		ret = -EINVAL;
		goto fail_id;
	}
	ret = shadow_bars(s, real);
	if (ret)
		goto fail_id;
	msix = cfg_find_cap(s, PCI_CAP_ID_MSIX, NULL);
	if (!msix) {
		pci_err(real, "loopback lending relays MSI-X vectors only; this device has no MSI-X\n");
		ret = -EOPNOTSUPP;
		goto fail_id;
	}
	/* A fresh device to the driver: MSI-X off, plain MSI and SR-IOV hidden, one function. */
	msix += PCI_MSIX_FLAGS + 1;
	s->cfg[msix] &= ~((PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL) >> 8);
	if (cfg_find_cap(s, PCI_CAP_ID_MSI, &prev))
		s->cfg[prev] = s->cfg[cfg_find_cap(s, PCI_CAP_ID_MSI, NULL) + 1];
	cfg_hide_ext_cap(s, PCI_EXT_CAP_ID_SRIOV);
	s->cfg[PCI_HEADER_TYPE] &= ~0x80;

	ret = ntbfab_lend_window(&s->win_phys, &s->win_size);
	if (ret)
		goto fail_id;
	s->dom = ntbfab_lend_export_domain(ex);
	if (!s->dom) {
		pci_err(real, "not in an IOMMU domain of VFIO's: lend it through vfio-pci with an IOMMU\n");
		ret = -ENXIO;
		goto fail_id;
	}
	s->dma_base = ex->iova_base;
	s->dma_size = a->dma_size;
	ret = iova_cache_get();
	if (ret)
		goto fail_id;
	init_iova_domain(&s->iovad, PAGE_SIZE, s->dma_base >> PAGE_SHIFT);
	ret = iova_domain_init_rcaches(&s->iovad);
	if (ret) {
		put_iova_domain(&s->iovad);
		iova_cache_put();
		goto fail_id;
	}
	s->iovad_ready = true;
	s->limit_pfn = (s->dma_base + s->dma_size - 1) >> PAGE_SHIFT;

	s->domain = shadow_domain();
	s->sysdata.domain = s->domain;
	s->sysdata.node = NUMA_NO_NODE;
	s->fwnode = irq_domain_alloc_named_id_fwnode("NTBFAB-MSI", s->domain);
	if (!s->fwnode) {
		ret = -ENOMEM;
		goto fail;
	}
	s->msi_info = (struct msi_domain_info){
		.flags = MSI_FLAG_USE_DEF_DOM_OPS | MSI_FLAG_USE_DEF_CHIP_OPS | MSI_FLAG_PCI_MSIX,
		.ops = &lend_msi_ops,
		.chip = &lend_msi_chip,
		.data = s,
	};
	s->irqdom = pci_msi_create_irq_domain(s->fwnode, &s->msi_info, NULL);
	if (!s->irqdom) {
		ret = -ENOMEM;
		goto fail;
	}

	s->busn = (struct resource){ .name = "ntbfab shadow bus", .start = 0, .end = 0,
				     .flags = IORESOURCE_BUS };
	pci_add_resource(&resources, &s->busn);
	for (i = 0; i < PCI_STD_NUM_BARS; i++) {
		struct lend_bar *b = &s->bars[i];

		if (b->upper || !b->size)
			continue;
		s->win[i] = (struct resource){ .name = "ntbfab window", .start = b->phys,
					       .end = b->phys + b->size - 1,
					       .flags = IORESOURCE_MEM |
							(b->flags & PCI_BASE_ADDRESS_MEM_PREFETCH ?
							 IORESOURCE_PREFETCH : 0) };
		pci_add_resource(&resources, &s->win[i]);
	}
	ntbfab_lend_export_claim(ex->id, &shadow_user_ops, s);
	list_add(&s->node, &lend_shadows);
	s->bus = pci_create_root_bus(lend_misc.this_device, 0, &lend_pci_ops, &s->sysdata,
				     &resources);
	if (!s->bus) {
		pci_free_resource_list(&resources);
		ret = -ENODEV;
		goto fail_listed;
	}
	dev_set_msi_domain(&s->bus->dev, s->irqdom);
	pci_lock_rescan_remove();
	pci_scan_child_bus(s->bus);
	s->pdev = pci_get_slot(s->bus, 0);
	if (s->pdev) {
		set_dma_ops(&s->pdev->dev, &lend_dma_ops);
		for (i = 0; i < PCI_STD_NUM_BARS; i++)
			if (pci_resource_len(s->pdev, i) && pci_claim_resource(s->pdev, i))
				pci_warn(s->pdev, "BAR%d: cannot claim its window\n", i);
		pci_bus_add_devices(s->bus);
	}
	pci_unlock_rescan_remove();
	if (!s->pdev) {
		ret = -ENODEV;
		goto fail_listed;
	}
	a->shadow_id = s->id;
	a->pci_domain = s->domain;
	a->pci_rid = NTBFAB_LEND_RID(0, 0);
	pci_info(s->pdev, "shadow of fdid 0x%04x (lent by %s), DMA window %llu MiB at 0x%llx through %pa\n",
		 s->fdid, pci_name(real), s->dma_size >> 20, s->dma_base, &s->win_phys);
	return 0;

fail_listed:
	list_del(&s->node);
	ntbfab_lend_export_release(ex);
fail:
	shadow_teardown(s);
fail_id:
	ida_free(&lend_ida, s->id);
	kfree(s->virq);
	kfree(s);
	return ret;
}

/* ---- exports (loopback: the lender's side in this kernel) ---------------------------- */

static void export_free(struct ntbfab_export *ex)
{
	u32 i;

	for (i = 0; i < ex->nr_irqs && ex->relays; i++)
		relay_stop(&ex->relays[i]);
	kfree(ex->relays);
	kfree(ex->msgs);
	if (ex->group)
		fput(ex->group);
	pci_dev_put(ex->pdev);
	kfree(ex);
}

static void export_withdraw(struct ntbfab_export *ex)
{
	const struct ntbfab_lend_user_ops *ops = ex->uops;
	void *ctx = ex->uctx;

	/* Its user undoes what it made in the device's IOMMU domain while that lives. */
	if (ops) {
		ntbfab_lend_export_release(ex);
		ops->gone(ctx);
	}
	list_del(&ex->node);
	pci_info(ex->pdev, "export %llu withdrawn\n", ex->id);
	export_free(ex);
}

/* Whether group is the VFIO group file of pdev, which vfio-pci drives. */
static bool export_group_ok(struct pci_dev *pdev, struct file *group)
{
	struct vfio_pci_core_device *core;
	bool ok = false;

	device_lock(&pdev->dev);
	if (pdev->dev.driver && !strcmp(pdev->dev.driver->name, "vfio-pci")) {
		core = dev_get_drvdata(&pdev->dev);
		ok = core && vfio_file_has_dev(group, &core->vdev);
	}
	device_unlock(&pdev->dev);
	return ok;
}

static int export_add(struct ntbfab_lend_file *f, struct ntbfab_lend_export *e)
{
	struct ntbfab_export *ex;
	s32 __user *ufds = u64_to_user_ptr(e->irq_fds);
	u32 i;
	int ret, virq, fd;

	if (e->flags || e->reserved0 || e->reserved ||
	    e->nr_irqs > NTBFAB_LEND_MAX_IRQS || e->pci_rid > 0xffff ||
	    !e->iova_size || !PAGE_ALIGNED(e->iova_base) || !PAGE_ALIGNED(e->iova_size) ||
	    e->iova_base + e->iova_size < e->iova_base || !e->iova_base)
		return -EINVAL;
	ex = kzalloc(sizeof(*ex), GFP_KERNEL);
	if (!ex)
		return -ENOMEM;
	ex->owner = f;
	ex->iova_base = e->iova_base;
	ex->iova_size = e->iova_size;
	raw_spin_lock_init(&ex->irq_lock);
	ex->pdev = pci_get_domain_bus_and_slot(e->pci_domain, e->pci_rid >> 8, e->pci_rid & 0xff);
	ret = -ENODEV;
	if (!ex->pdev)
		goto fail;
	ex->group = fget(e->group_fd);
	ret = -EBADF;
	if (!ex->group)
		goto fail;
	ret = -EINVAL;
	if (!export_group_ok(ex->pdev, ex->group)) {
		pci_err(ex->pdev, "export: fd %d is not the VFIO group of this device on vfio-pci\n",
			e->group_fd);
		goto fail;
	}
	if (!ex->pdev->msix_enabled || e->nr_irqs > pci_msix_vec_count(ex->pdev)) {
		pci_err(ex->pdev, "export: MSI-X must be enabled through VFIO for %u vectors\n",
			e->nr_irqs);
		goto fail;
	}
	ex->nr_irqs = e->nr_irqs;
	ex->msgs = kcalloc(ex->nr_irqs, sizeof(*ex->msgs), GFP_KERNEL);
	ex->relays = kcalloc(ex->nr_irqs, sizeof(*ex->relays), GFP_KERNEL);
	ret = -ENOMEM;
	if (ex->nr_irqs && (!ex->msgs || !ex->relays))
		goto fail;
	for (i = 0; i < ex->nr_irqs; i++) {
		ex->relays[i].ex = ex;
		ex->relays[i].index = i;
		ret = -EFAULT;
		if (get_user(fd, ufds + i))
			goto fail;
		if (fd < 0)
			continue;
		virq = pci_irq_vector(ex->pdev, i);
		ret = -EINVAL;
		if (virq <= 0)
			goto fail;
		get_cached_msi_msg(virq, &ex->msgs[i]);
		ret = relay_start(&ex->relays[i], fd);
		if (ret)
			goto fail;
	}
	ex->id = lend_next_export++;
	e->export_id = ex->id;
	list_add(&ex->node, &lend_exports);
	pci_info(ex->pdev, "export %llu: %u MSI-X vectors relayed, IOVA 0x%llx+0x%llx for DMA windows\n",
		 ex->id, ex->nr_irqs, ex->iova_base, ex->iova_size);
	return 0;
fail:
	export_free(ex);
	return ret;
}

/* ---- frontends: ioctls and files of /dev/ntbfab-lend they serve ---------------------- */

int ntbfab_lend_frontend_register(const struct ntbfab_lend_frontend *fe)
{
	int i, ret = -ENOSPC;

	if (fe->first_nr < 0x10 || fe->last_nr < fe->first_nr || fe->last_nr > 0xff)
		return -EINVAL;
	down_write(&lend_fe_sem);
	for (i = 0; i < ARRAY_SIZE(lend_fe) && ret; i++)
		if (lend_fe[i] && fe->first_nr <= lend_fe[i]->last_nr &&
		    lend_fe[i]->first_nr <= fe->last_nr)
			ret = -EBUSY;
	for (i = 0; i < ARRAY_SIZE(lend_fe) && ret == -ENOSPC; i++)
		if (!lend_fe[i]) {
			lend_fe[i] = fe;
			ret = 0;
		}
	up_write(&lend_fe_sem);
	return ret;
}
EXPORT_SYMBOL_GPL(ntbfab_lend_frontend_register);

/* Waits for the frontend's running ioctls. */
void ntbfab_lend_frontend_unregister(const struct ntbfab_lend_frontend *fe)
{
	int i;

	down_write(&lend_fe_sem);
	for (i = 0; i < ARRAY_SIZE(lend_fe); i++)
		if (lend_fe[i] == fe)
			lend_fe[i] = NULL;
	up_write(&lend_fe_sem);
}
EXPORT_SYMBOL_GPL(ntbfab_lend_frontend_unregister);

static u32 frontend_features(void)
{
	u32 feat = 0;
	int i;

	down_read(&lend_fe_sem);
	for (i = 0; i < ARRAY_SIZE(lend_fe); i++)
		if (lend_fe[i])
			feat |= lend_fe[i]->feature;
	up_read(&lend_fe_sem);
	return feat;
}

/* A frontend's ioctl: *handled says whether one took it. */
static long frontend_ioctl(struct ntbfab_lend_file *f, unsigned int cmd, void __user *arg,
			   bool *handled)
{
	long ret = -ENOTTY;
	int i;

	*handled = _IOC_NR(cmd) >= 0x10;
	if (!*handled)
		return 0;
	down_read(&lend_fe_sem);
	for (i = 0; i < ARRAY_SIZE(lend_fe); i++)
		if (lend_fe[i] && _IOC_NR(cmd) >= lend_fe[i]->first_nr &&
		    _IOC_NR(cmd) <= lend_fe[i]->last_nr)
			ret = lend_fe[i]->ioctl(f, cmd, arg);
	up_read(&lend_fe_sem);
	return ret;
}

static void frontend_release(struct ntbfab_lend_file *f)
{
	int i;

	down_read(&lend_fe_sem);
	for (i = 0; i < ARRAY_SIZE(lend_fe); i++)
		if (lend_fe[i] && lend_fe[i]->release)
			lend_fe[i]->release(f);
	up_read(&lend_fe_sem);
}

/* ---- the character device ------------------------------------------------------------ */

static int lend_open(struct inode *inode, struct file *file)
{
	struct ntbfab_lend_file *f = kzalloc(sizeof(*f), GFP_KERNEL);

	if (!f)
		return -ENOMEM;
	raw_spin_lock_init(&f->lock);
	init_waitqueue_head(&f->wait);
	init_irq_work(&f->wake, lend_wake);
	file->private_data = f;
	return nonseekable_open(inode, file);
}

static int lend_release(struct inode *inode, struct file *file)
{
	struct ntbfab_lend_file *f = file->private_data;
	struct lend_shadow *s, *sn;
	struct ntbfab_export *ex, *en;

	frontend_release(f);
	mutex_lock(&lend_lock);
	/* The daemon is gone: nobody forwards config writes or keeps the borrow. */
	list_for_each_entry_safe(s, sn, &lend_shadows, node)
		if (s->owner == f)
			shadow_remove(s, true, 0);
	list_for_each_entry_safe(ex, en, &lend_exports, node)
		if (ex->owner == f)
			export_withdraw(ex);
	mutex_unlock(&lend_lock);
	irq_work_sync(&f->wake);
	kfree(f);
	return 0;
}

static ssize_t lend_read(struct file *file, char __user *buf, size_t len, loff_t *ppos)
{
	struct ntbfab_lend_file *f = file->private_data;
	struct ntbfab_lend_msg m;
	size_t done = 0;
	unsigned long flags;
	int ret;

	if (len < sizeof(m))
		return -EINVAL;
	while (done + sizeof(m) <= len) {
		raw_spin_lock_irqsave(&f->lock, flags);
		if (f->overflow && f->count < LEND_RING) {
			f->overflow = false;
			m = (struct ntbfab_lend_msg){ .kind = NTBFAB_LEND_MSG_OVERFLOW,
						      .seq = ++f->seq };
		} else if (f->count) {
			m = f->ring[f->head];
			f->head = (f->head + 1) % LEND_RING;
			f->count--;
		} else {
			raw_spin_unlock_irqrestore(&f->lock, flags);
			if (done)
				break;
			if (file->f_flags & O_NONBLOCK)
				return -EAGAIN;
			ret = wait_event_interruptible(f->wait, READ_ONCE(f->count) ||
						       READ_ONCE(f->overflow));
			if (ret)
				return ret;
			continue;
		}
		raw_spin_unlock_irqrestore(&f->lock, flags);
		if (copy_to_user(buf + done, &m, sizeof(m)))
			return done ? done : -EFAULT;
		done += sizeof(m);
	}
	return done;
}

static __poll_t lend_poll(struct file *file, poll_table *pt)
{
	struct ntbfab_lend_file *f = file->private_data;

	poll_wait(file, &f->wait, pt);
	return READ_ONCE(f->count) || READ_ONCE(f->overflow) ? EPOLLIN | EPOLLRDNORM : 0;
}

static struct lend_shadow *own_shadow(struct ntbfab_lend_file *f, u32 id)
{
	struct lend_shadow *s;

	list_for_each_entry(s, &lend_shadows, node)
		if (s->id == id && s->owner == f)
			return s;
	return NULL;
}

static int lend_cfg_set(struct ntbfab_lend_file *f, struct ntbfab_lend_cfg_set *c)
{
	struct lend_shadow *s = own_shadow(f, c->shadow_id);
	unsigned long flags;
	int i;

	if (!s)
		return -ENOENT;
	if (c->reserved || c->offset % 4 || c->offset >= s->cfg_size)
		return -EINVAL;
	raw_spin_lock_irqsave(&s->cfg_lock, flags);
	if (s->dw_seq[c->offset / 4] <= c->seq)
		for (i = 0; i < 4; i++)
			s->cfg[c->offset + i] = c->value >> 8 * i;
	raw_spin_unlock_irqrestore(&s->cfg_lock, flags);
	return 0;
}

static int lend_peer_add(struct ntbfab_lend_file *f, struct ntbfab_lend_peer *p)
{
	struct lend_shadow *s = own_shadow(f, p->shadow_id);
	struct lend_peer *e;

	if (!s)
		return -ENOENT;
	if (p->flags || !p->size || !PAGE_ALIGNED(p->size) || p->phys + p->size < p->phys)
		return -EINVAL;
	e = kzalloc(sizeof(*e), GFP_KERNEL);
	if (!e)
		return -ENOMEM;
	e->phys = p->phys;
	e->size = p->size;
	e->dev_addr = p->dev_addr;
	spin_lock(&s->peer_lock);
	list_add(&e->node, &s->peers);
	spin_unlock(&s->peer_lock);
	return 0;
}

static int lend_peer_del(struct ntbfab_lend_file *f, struct ntbfab_lend_peer *p)
{
	struct lend_shadow *s = own_shadow(f, p->shadow_id);
	struct lend_peer *e, *found = NULL;

	if (!s)
		return -ENOENT;
	if (p->flags)
		return -EINVAL;
	spin_lock(&s->peer_lock);
	list_for_each_entry(e, &s->peers, node)
		if (e->phys == p->phys && e->size == p->size) {
			list_del(&e->node);
			found = e;
			break;
		}
	spin_unlock(&s->peer_lock);
	kfree(found);
	return found ? 0 : -ENOENT;
}

/* debugfs ntbfab_shadow/peers: "shadow pci phys size dev_addr" per peer range. */
static int lend_peers_show(struct seq_file *m, void *unused)
{
	struct lend_shadow *s;
	struct lend_peer *p;

	mutex_lock(&lend_lock);
	list_for_each_entry(s, &lend_shadows, node) {
		spin_lock(&s->peer_lock);
		list_for_each_entry(p, &s->peers, node)
			seq_printf(m, "%u %s 0x%llx 0x%llx 0x%llx\n", s->id,
				   s->pdev ? pci_name(s->pdev) : "-", p->phys, p->size,
				   p->dev_addr);
		spin_unlock(&s->peer_lock);
	}
	mutex_unlock(&lend_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(lend_peers);

static long lend_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct ntbfab_lend_file *f = file->private_data;
	void __user *up = (void __user *)arg;
	union {
		struct ntbfab_lend_version v;
		struct ntbfab_lend_export e;
		struct ntbfab_lend_unexport u;
		struct ntbfab_lend_attach a;
		struct ntbfab_lend_detach d;
		struct ntbfab_lend_cfg_set c;
		struct ntbfab_lend_peer p;
	} x;
	struct ntbfab_export *ex;
	struct lend_shadow *s;
	bool handled;
	long ret;

	if (_IOC_TYPE(cmd) != NTBFAB_LEND_IOC_MAGIC)
		return -ENOTTY;
	if (cmd == NTBFAB_LEND_IOC_VERSION) {
		x.v = (struct ntbfab_lend_version){
			.version = NTBFAB_LEND_VERSION,
			.msg_size = sizeof(struct ntbfab_lend_msg),
			.features = (loopback_window && *loopback_window ?
				     NTBFAB_LEND_FEAT_LOOPBACK : 0) | frontend_features(),
		};
		return copy_to_user(up, &x.v, sizeof(x.v)) ? -EFAULT : 0;
	}
	if (_IOC_NR(cmd) < 0x10 && _IOC_SIZE(cmd) > sizeof(x))
		return -ENOTTY;
	if (!(file->f_mode & FMODE_WRITE))
		return _IOC_NR(cmd) < 0x10 || frontend_features() ? -EPERM : -ENOTTY;
	ret = frontend_ioctl(f, cmd, up, &handled);
	if (handled)
		return ret;
	if (copy_from_user(&x, up, _IOC_SIZE(cmd)))
		return -EFAULT;
	mutex_lock(&lend_lock);
	switch (cmd) {
	case NTBFAB_LEND_IOC_EXPORT:
		ret = export_add(f, &x.e);
		if (!ret && copy_to_user(up, &x.e, sizeof(x.e))) {
			export_withdraw(find_export(x.e.export_id));
			ret = -EFAULT;
		}
		break;
	case NTBFAB_LEND_IOC_UNEXPORT:
		ex = find_export(x.u.export_id);
		ret = x.u.reserved ? -EINVAL : !ex || ex->owner != f ? -ENOENT : 0;
		if (!ret)
			export_withdraw(ex);
		break;
	case NTBFAB_LEND_IOC_ATTACH:
		ret = shadow_attach(f, &x.a);
		if (!ret && copy_to_user(up, &x.a, sizeof(x.a))) {
			shadow_remove(own_shadow(f, x.a.shadow_id), false, 0);
			ret = -EFAULT;
		}
		break;
	case NTBFAB_LEND_IOC_DETACH:
		s = own_shadow(f, x.d.shadow_id);
		ret = x.d.flags & ~NTBFAB_LEND_DETACH_SURPRISE ? -EINVAL : !s ? -ENOENT : 0;
		if (!ret) {
			x.d.mappings = shadow_remove(s, x.d.flags & NTBFAB_LEND_DETACH_SURPRISE, 0);
			ret = copy_to_user(up, &x.d, sizeof(x.d)) ? -EFAULT : 0;
		}
		break;
	case NTBFAB_LEND_IOC_CFG_SET:
		ret = lend_cfg_set(f, &x.c);
		break;
	case NTBFAB_LEND_IOC_PEER_ADD:
		ret = lend_peer_add(f, &x.p);
		break;
	case NTBFAB_LEND_IOC_PEER_DEL:
		ret = lend_peer_del(f, &x.p);
		break;
	default:
		ret = -ENOTTY;
	}
	mutex_unlock(&lend_lock);
	return ret;
}

static const struct file_operations lend_fops = {
	.owner = THIS_MODULE,
	.open = lend_open,
	.release = lend_release,
	.read = lend_read,
	.poll = lend_poll,
	.unlocked_ioctl = lend_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = no_llseek,
};

static struct miscdevice lend_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "ntbfab-lend",
	.fops = &lend_fops,
	.mode = 0600,
};

static int __init lend_init(void)
{
	int ret = misc_register(&lend_misc);

	if (ret)
		return ret;
	lend_debugfs = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("peers", 0400, lend_debugfs, NULL, &lend_peers_fops);
	return 0;
}

static void __exit lend_exit(void)
{
	debugfs_remove_recursive(lend_debugfs);
	misc_deregister(&lend_misc);
	if (lend_window) {
		pci_disable_device(lend_window);
		pci_dev_put(lend_window);
	}
}

module_init(lend_init);
module_exit(lend_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("ntbfab shadow devices: borrowed PCIe devices hot-added for their own drivers");
MODULE_AUTHOR("ntbfab");
