// SPDX-License-Identifier: GPL-2.0-only
/*
 * ntb_hw_ivshmem: an emulated NTB between two QEMU guests, so that the
 * kernel's own NTB clients and ntbfab_ntb run on something they did not
 * write (docs/linux-ntb.md, "The emulated NTB").
 *
 * Each guest's RAM is a shared file.  Each guest has one ivshmem-doorbell
 * device whose server (tests/kernel/ivshmem-server.c) hands it the *peer's*
 * RAM file as its shared memory, so BAR2 offset X is the peer's physical
 * address X, and gives it the peer's interrupt vectors:
 *
 * - memory windows: both guests reserve the same carve-out of their RAM at
 *   boot (memmap=SIZE$BASE, module parameters carve_base and carve_size).
 *   Inbound window k is a fixed slice of it, and the peer's outbound window
 *   k is that slice seen through its BAR2.  The slices are what
 *   dma_alloc_coherent() on this PCI device returns (the device's
 *   dma_map_ops), which is where every NTB client allocates its inbound
 *   buffers; mw_set_trans() accepts exactly the slice of the window and
 *   refuses anything else with -EINVAL and a message.  A buffer gets the
 *   smallest free slice that holds it.
 * - doorbells: bit b rings MSI-X vector b of the peer.
 * - scratchpads, link flags and message registers live in a control page at
 *   the end of each side's carve-out; the peer reaches it through BAR2.
 *   Every word of it has one writer, so that no atomic operation has to work
 *   between two QEMU processes.
 *
 * One guest can hold both ends (the loopback that ntbfab-conformance needs,
 * which opens both adapters of a pair in one process): two ivshmem-doorbell
 * devices whose shared memory is that guest's own RAM file, with peer ids
 * 2 * pair and 2 * pair + 1 (module parameter pair), and a carve-out per
 * side (carve_base1: side 1's), so that each side's windows and control page
 * land in its own.
 *
 * It cannot model a real LUT's arbitrary remapping (a translation can point
 * only at its slice), requester-ID tables, the peer's device registers, or
 * DMA engines; the peer's BAR2 covers all of this guest's RAM, not only the
 * translated slices.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/dma-map-ops.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/ioport.h>
#include <linux/module.h>
#include <linux/ntb.h>
#include <linux/pci.h>
#include <linux/seq_file.h>
#include <linux/timer.h>

#define IVN_MAGIC		0x4e54424956534831ULL	/* "NTBIVSH1" */
#define IVN_VERSION		1
#define IVN_MWS			2
#define IVN_DBS			4	/* doorbell bits = MSI-X vectors 0..3 */
#define IVN_VEC_MSG		4	/* a message arrived */
#define IVN_VEC_LINK		5	/* the peer changed its link flag */
#define IVN_VECTORS		6
#define IVN_SPADS		16
#define IVN_MSGS		4
#define IVN_CTRL_SIZE		PAGE_SIZE
#define IVN_LINK_POLL_MS	50

/* ivshmem's BAR0 registers (QEMU's docs/specs/ivshmem-spec.txt) */
#define IVSHMEM_IVPOSITION	0x08
#define IVSHMEM_DOORBELL	0x0c

static unsigned long carve_base = 0x1c000000;
module_param(carve_base, ulong, 0444);
MODULE_PARM_DESC(carve_base, "Physical address of the RAM both guests reserve with memmap=SIZE$BASE");
static unsigned long carve_size = SZ_32M;
module_param(carve_size, ulong, 0444);
MODULE_PARM_DESC(carve_size, "Its size: the windows and a control page fit in it");
static unsigned long carve_base1;
module_param(carve_base1, ulong, 0444);
MODULE_PARM_DESC(carve_base1, "Side 1's carve-out when one guest holds both ends (0: carve_base, each side a guest of its own)");
static unsigned int pair;
module_param(pair, uint, 0444);
MODULE_PARM_DESC(pair, "The ivshmem-doorbell devices to bind: peer ids 2 * pair (side 0) and 2 * pair + 1 (side 1)");
static unsigned long mw0_size = SZ_4M;
module_param(mw0_size, ulong, 0444);
MODULE_PARM_DESC(mw0_size, "Size of memory window 0 (a power of two)");
static unsigned long mw1_size = SZ_16M;
module_param(mw1_size, ulong, 0444);
MODULE_PARM_DESC(mw1_size, "Size of memory window 1 (a power of two)");
static bool same_port;
module_param(same_port, bool, 0444);
MODULE_PARM_DESC(same_port, "Both ends report port 0 (ntb_perf's two-port case: both use window 0)");
static unsigned int msgs = IVN_MSGS;
module_param(msgs, uint, 0444);
MODULE_PARM_DESC(msgs, "Message registers (0 or 4)");

/*
 * A side's control page, in its own carve-out.  Each field has one writer:
 * "own" fields this side, "peer" fields the other side.  Both sides are the
 * same architecture.
 */
struct ivn_ctrl {
	u64 magic;			/* own: IVN_MAGIC while the driver is loaded */
	u32 version;			/* own */
	u32 link;			/* own: link enabled */
	u64 carve_base;			/* own: the layout, which must match (its side's) */
	u64 carve_size;
	u64 mw_size[IVN_MWS];
	u64 trans_addr[IVN_MWS];	/* own: inbound translations (0: none) */
	u64 trans_size[IVN_MWS];
	u32 spad[IVN_SPADS];		/* both: scratchpads, as on hardware */
	u32 msg[IVN_MSGS];		/* peer: inbound message registers */
	u32 msg_seq[IVN_MSGS];		/* peer: bumped after msg[] is written */
	u32 msg_ack[IVN_MSGS];		/* own: msg_seq when the message was taken */
};

struct ivn_slice {
	u64 off;			/* in the carve-out */
	u64 size;
	bool busy;			/* handed out by ivn_dma_alloc() */
};

struct ivn {
	struct ntb_dev ntb;
	struct ntb_dev_ops ops;
	struct pci_dev *pdev;
	void __iomem *regs;
	phys_addr_t bar2;
	phys_addr_t base;		/* this side's carve-out */
	phys_addr_t peer_base;		/* the peer's, in its RAM (through BAR2) */
	void *carve;
	struct ivn_ctrl *own;
	struct ivn_ctrl *peer;		/* the peer's control page, through BAR2 */
	int side;
	int peer_id;
	struct ivn_slice mw[IVN_MWS];
	spinlock_t lock;		/* mw[].busy, db_mask, msg_mask, msg_out */
	atomic64_t db_pending;
	u64 db_mask;
	u64 msg_mask;
	u64 msg_out;			/* outbound message failures */
	u64 link_up;			/* as last reported */
	bool layout_warned;
	struct timer_list timer;
	struct dentry *dbgfs;
	atomic_t irqs[IVN_VECTORS];
	atomic_t rings[IVN_DBS];
};

static struct dentry *ivn_dbgfs_root;

static struct ivn *to_ivn(struct ntb_dev *ntb)
{
	return container_of(ntb, struct ivn, ntb);
}

/* ---- link ---- */

static bool ivn_layout_matches(struct ivn *v)
{
	struct ivn_ctrl *p = v->peer;
	int i;

	if (READ_ONCE(p->magic) != IVN_MAGIC)
		return false;
	if (READ_ONCE(p->version) == IVN_VERSION && READ_ONCE(p->carve_base) == v->peer_base &&
	    READ_ONCE(p->carve_size) == carve_size) {
		for (i = 0; i < IVN_MWS; i++)
			if (READ_ONCE(p->mw_size[i]) != v->mw[i].size)
				break;
		if (i == IVN_MWS)
			return true;
	}
	if (!v->layout_warned)
		dev_err(&v->pdev->dev, "the peer's emulated NTB differs (version %u, carve-out %#llx + %#llx, windows %#llx, %#llx): load ntb_hw_ivshmem with the same parameters on both guests\n",
			READ_ONCE(p->version), READ_ONCE(p->carve_base),
			READ_ONCE(p->carve_size), READ_ONCE(p->mw_size[0]),
			READ_ONCE(p->mw_size[1]));
	v->layout_warned = true;
	return false;
}

static u64 ivn_link_state(struct ivn *v)
{
	return READ_ONCE(v->own->link) && READ_ONCE(v->peer->link) && ivn_layout_matches(v);
}

static void ivn_link_check(struct ivn *v)
{
	u64 up = ivn_link_state(v);

	if (up != xchg(&v->link_up, up))
		ntb_link_event(&v->ntb);
}

static void ivn_timer(struct timer_list *t)
{
	struct ivn *v = from_timer(v, t, timer);

	ivn_link_check(v);
	mod_timer(&v->timer, jiffies + msecs_to_jiffies(IVN_LINK_POLL_MS));
}

static void ivn_ring(struct ivn *v, int vector)
{
	writel(((u32)v->peer_id << 16) | vector, v->regs + IVSHMEM_DOORBELL);
}

static u64 ivn_link_is_up(struct ntb_dev *ntb, enum ntb_speed *speed, enum ntb_width *width)
{
	u64 up = ivn_link_state(to_ivn(ntb));

	/* ivshmem has no lanes: a made-up Gen3 x4, reported while up */
	if (speed)
		*speed = up ? NTB_SPEED_GEN3 : NTB_SPEED_NONE;
	if (width)
		*width = up ? NTB_WIDTH_4 : NTB_WIDTH_NONE;
	return up;
}

static int ivn_link_set(struct ntb_dev *ntb, u32 on)
{
	struct ivn *v = to_ivn(ntb);

	WRITE_ONCE(v->own->link, on);
	ivn_ring(v, IVN_VEC_LINK);
	ivn_link_check(v);
	return 0;
}

static int ivn_link_enable(struct ntb_dev *ntb, enum ntb_speed speed, enum ntb_width width)
{
	return ivn_link_set(ntb, 1);
}

static int ivn_link_disable(struct ntb_dev *ntb)
{
	return ivn_link_set(ntb, 0);
}

/* ---- ports: the default ones (by topology) unless same_port ---- */

static int ivn_port_number(struct ntb_dev *ntb)
{
	return 0;
}

static int ivn_peer_port_count(struct ntb_dev *ntb)
{
	return 1;
}

static int ivn_peer_port_number(struct ntb_dev *ntb, int pidx)
{
	return 0;
}

static int ivn_peer_port_idx(struct ntb_dev *ntb, int port)
{
	return port ? -EINVAL : 0;
}

/* ---- memory windows ---- */

static int ivn_mw_count(struct ntb_dev *ntb, int pidx)
{
	return pidx ? -EINVAL : IVN_MWS;
}

static int ivn_mw_get_align(struct ntb_dev *ntb, int pidx, int widx, resource_size_t *addr_align,
			    resource_size_t *size_align, resource_size_t *size_max)
{
	struct ivn *v = to_ivn(ntb);

	if (pidx || widx < 0 || widx >= IVN_MWS)
		return -EINVAL;
	/* the one address it takes is aligned to the window's size */
	if (addr_align)
		*addr_align = v->mw[widx].size;
	if (size_align)
		*size_align = PAGE_SIZE;
	if (size_max)
		*size_max = v->mw[widx].size;
	return 0;
}

static int ivn_mw_set_trans(struct ntb_dev *ntb, int pidx, int widx, dma_addr_t addr,
			    resource_size_t size)
{
	struct ivn *v = to_ivn(ntb);
	dma_addr_t slice;

	if (pidx || widx < 0 || widx >= IVN_MWS)
		return -EINVAL;
	slice = v->base + v->mw[widx].off;
	if (addr != slice || !size || size > v->mw[widx].size) {
		dev_err(&v->pdev->dev, "mw_set_trans(window %d, %pad, %pa bytes) refused: the emulated NTB translates window %d only to its fixed slice %pad (at most %llu bytes), the buffer dma_alloc_coherent() on this device returns for it\n",
			widx, &addr, &size, widx, &slice, v->mw[widx].size);
		return -EINVAL;
	}
	WRITE_ONCE(v->own->trans_size[widx], size);
	WRITE_ONCE(v->own->trans_addr[widx], addr);
	return 0;
}

static int ivn_mw_clear_trans(struct ntb_dev *ntb, int pidx, int widx)
{
	struct ivn *v = to_ivn(ntb);

	if (pidx || widx < 0 || widx >= IVN_MWS)
		return -EINVAL;
	WRITE_ONCE(v->own->trans_addr[widx], 0);
	WRITE_ONCE(v->own->trans_size[widx], 0);
	return 0;
}

static int ivn_peer_mw_count(struct ntb_dev *ntb)
{
	return IVN_MWS;
}

static int ivn_peer_mw_get_addr(struct ntb_dev *ntb, int widx, phys_addr_t *base,
				resource_size_t *size)
{
	struct ivn *v = to_ivn(ntb);

	if (widx < 0 || widx >= IVN_MWS)
		return -EINVAL;
	if (base)
		*base = v->bar2 + v->peer_base + v->mw[widx].off;
	if (size)
		*size = v->mw[widx].size;
	return 0;
}

/* ---- doorbells ---- */

static u64 ivn_db_valid_mask(struct ntb_dev *ntb)
{
	return BIT_ULL(IVN_DBS) - 1;
}

static int ivn_db_vector_count(struct ntb_dev *ntb)
{
	return IVN_DBS;
}

static u64 ivn_db_vector_mask(struct ntb_dev *ntb, int vector)
{
	return vector >= 0 && vector < IVN_DBS ? BIT_ULL(vector) : 0;
}

static u64 ivn_db_read(struct ntb_dev *ntb)
{
	return atomic64_read(&to_ivn(ntb)->db_pending);
}

static int ivn_db_clear(struct ntb_dev *ntb, u64 bits)
{
	atomic64_andnot(bits, &to_ivn(ntb)->db_pending);
	return 0;
}

/* Raise the events of the pending, unmasked bits among @bits. */
static void ivn_db_fire(struct ivn *v, u64 bits)
{
	unsigned long flags;
	u64 fire;
	int b;

	spin_lock_irqsave(&v->lock, flags);
	fire = bits & atomic64_read(&v->db_pending) & ~v->db_mask;
	spin_unlock_irqrestore(&v->lock, flags);
	for (b = 0; b < IVN_DBS; b++)
		if (fire & BIT_ULL(b))
			ntb_db_event(&v->ntb, b);
}

static int ivn_db_set(struct ntb_dev *ntb, u64 bits)
{
	struct ivn *v = to_ivn(ntb);

	atomic64_or(bits & ivn_db_valid_mask(ntb), &v->db_pending);
	ivn_db_fire(v, bits);
	return 0;
}

static u64 ivn_db_read_mask(struct ntb_dev *ntb)
{
	return READ_ONCE(to_ivn(ntb)->db_mask);
}

/* Set and clear bits of a mask or status word, under the lock the interrupt handler takes. */
static void ivn_update_bits(struct ivn *v, u64 *word, u64 set, u64 clear)
{
	unsigned long flags;

	spin_lock_irqsave(&v->lock, flags);
	*word = (*word | set) & ~clear;
	spin_unlock_irqrestore(&v->lock, flags);
}

static int ivn_db_set_mask(struct ntb_dev *ntb, u64 bits)
{
	struct ivn *v = to_ivn(ntb);

	ivn_update_bits(v, &v->db_mask, bits & ivn_db_valid_mask(ntb), 0);
	return 0;
}

static int ivn_db_clear_mask(struct ntb_dev *ntb, u64 bits)
{
	struct ivn *v = to_ivn(ntb);

	ivn_update_bits(v, &v->db_mask, 0, bits);
	/* like a hardware interrupt that was held back by the mask */
	ivn_db_fire(v, bits);
	return 0;
}

static int ivn_peer_db_set(struct ntb_dev *ntb, u64 bits)
{
	struct ivn *v = to_ivn(ntb);
	int b;

	if (bits & ~ivn_db_valid_mask(ntb))
		return -EINVAL;
	for (b = 0; b < IVN_DBS; b++) {
		if (bits & BIT_ULL(b)) {
			atomic_inc(&v->rings[b]);
			ivn_ring(v, b);
		}
	}
	return 0;
}

/* ---- scratchpads ---- */

static int ivn_spad_count(struct ntb_dev *ntb)
{
	return IVN_SPADS;
}

static u32 ivn_spad_read(struct ntb_dev *ntb, int sidx)
{
	if (sidx < 0 || sidx >= IVN_SPADS)
		return ~0U;
	return READ_ONCE(to_ivn(ntb)->own->spad[sidx]);
}

static int ivn_spad_write(struct ntb_dev *ntb, int sidx, u32 val)
{
	if (sidx < 0 || sidx >= IVN_SPADS)
		return -EINVAL;
	WRITE_ONCE(to_ivn(ntb)->own->spad[sidx], val);
	return 0;
}

static u32 ivn_peer_spad_read(struct ntb_dev *ntb, int pidx, int sidx)
{
	if (pidx || sidx < 0 || sidx >= IVN_SPADS)
		return ~0U;
	return READ_ONCE(to_ivn(ntb)->peer->spad[sidx]);
}

static int ivn_peer_spad_write(struct ntb_dev *ntb, int pidx, int sidx, u32 val)
{
	if (pidx || sidx < 0 || sidx >= IVN_SPADS)
		return -EINVAL;
	WRITE_ONCE(to_ivn(ntb)->peer->spad[sidx], val);
	return 0;
}

/* ---- messages: inbound status bits 0..3, outbound failure bits 4..7 ---- */

#define IVN_MSG_IN	(BIT_ULL(IVN_MSGS) - 1)
#define IVN_MSG_OUT	(IVN_MSG_IN << IVN_MSGS)

static int ivn_msg_count(struct ntb_dev *ntb)
{
	return IVN_MSGS;
}

static u64 ivn_msg_inbits(struct ntb_dev *ntb)
{
	return IVN_MSG_IN;
}

static u64 ivn_msg_outbits(struct ntb_dev *ntb)
{
	return IVN_MSG_OUT;
}

static u64 ivn_msg_read_sts(struct ntb_dev *ntb)
{
	struct ivn *v = to_ivn(ntb);
	u64 sts = READ_ONCE(v->msg_out);
	int i;

	for (i = 0; i < IVN_MSGS; i++)
		if (READ_ONCE(v->own->msg_seq[i]) != READ_ONCE(v->own->msg_ack[i]))
			sts |= BIT_ULL(i);
	return sts;
}

static int ivn_msg_clear_sts(struct ntb_dev *ntb, u64 bits)
{
	struct ivn *v = to_ivn(ntb);
	int i;

	for (i = 0; i < IVN_MSGS; i++)
		if (bits & BIT_ULL(i))
			WRITE_ONCE(v->own->msg_ack[i], READ_ONCE(v->own->msg_seq[i]));
	ivn_update_bits(v, &v->msg_out, 0, bits);
	return 0;
}

static void ivn_msg_fire(struct ivn *v)
{
	if (ivn_msg_read_sts(&v->ntb) & ~READ_ONCE(v->msg_mask))
		ntb_msg_event(&v->ntb);
}

static int ivn_msg_set_mask(struct ntb_dev *ntb, u64 bits)
{
	struct ivn *v = to_ivn(ntb);

	ivn_update_bits(v, &v->msg_mask, bits & (IVN_MSG_IN | IVN_MSG_OUT), 0);
	return 0;
}

static int ivn_msg_clear_mask(struct ntb_dev *ntb, u64 bits)
{
	struct ivn *v = to_ivn(ntb);

	ivn_update_bits(v, &v->msg_mask, 0, bits);
	ivn_msg_fire(v);
	return 0;
}

static u32 ivn_msg_read(struct ntb_dev *ntb, int *pidx, int midx)
{
	struct ivn *v = to_ivn(ntb);

	if (midx < 0 || midx >= IVN_MSGS)
		return ~0U;
	if (pidx)
		*pidx = 0;
	smp_rmb();	/* the status (msg_seq) was read before the message */
	return READ_ONCE(v->own->msg[midx]);
}

static int ivn_peer_msg_write(struct ntb_dev *ntb, int pidx, int midx, u32 msg)
{
	struct ivn *v = to_ivn(ntb);
	struct ivn_ctrl *p = v->peer;

	if (pidx || midx < 0 || midx >= IVN_MSGS)
		return -EINVAL;
	if (READ_ONCE(p->msg_seq[midx]) != READ_ONCE(p->msg_ack[midx])) {
		/* the peer has not taken the last one: an outbound failure */
		ivn_update_bits(v, &v->msg_out, BIT_ULL(IVN_MSGS + midx), 0);
		return -EBUSY;
	}
	WRITE_ONCE(p->msg[midx], msg);
	smp_wmb();	/* the message before its sequence number */
	WRITE_ONCE(p->msg_seq[midx], READ_ONCE(p->msg_seq[midx]) + 1);
	ivn_ring(v, IVN_VEC_MSG);
	return 0;
}

static const struct ntb_dev_ops ivn_ops = {
	.link_is_up = ivn_link_is_up,
	.link_enable = ivn_link_enable,
	.link_disable = ivn_link_disable,
	.mw_count = ivn_mw_count,
	.mw_get_align = ivn_mw_get_align,
	.mw_set_trans = ivn_mw_set_trans,
	.mw_clear_trans = ivn_mw_clear_trans,
	.peer_mw_count = ivn_peer_mw_count,
	.peer_mw_get_addr = ivn_peer_mw_get_addr,
	.db_valid_mask = ivn_db_valid_mask,
	.db_vector_count = ivn_db_vector_count,
	.db_vector_mask = ivn_db_vector_mask,
	.db_read = ivn_db_read,
	.db_set = ivn_db_set,
	.db_clear = ivn_db_clear,
	.db_read_mask = ivn_db_read_mask,
	.db_set_mask = ivn_db_set_mask,
	.db_clear_mask = ivn_db_clear_mask,
	.peer_db_set = ivn_peer_db_set,
	.spad_count = ivn_spad_count,
	.spad_read = ivn_spad_read,
	.spad_write = ivn_spad_write,
	.peer_spad_read = ivn_peer_spad_read,
	.peer_spad_write = ivn_peer_spad_write,
};

static const struct ntb_dev_ops ivn_msg_ops = {
	.msg_count = ivn_msg_count,
	.msg_inbits = ivn_msg_inbits,
	.msg_outbits = ivn_msg_outbits,
	.msg_read_sts = ivn_msg_read_sts,
	.msg_clear_sts = ivn_msg_clear_sts,
	.msg_set_mask = ivn_msg_set_mask,
	.msg_clear_mask = ivn_msg_clear_mask,
	.msg_read = ivn_msg_read,
	.peer_msg_write = ivn_peer_msg_write,
};

/* ---- the inbound buffers: the device's DMA API serves the slices ---- */

static struct ivn *ivn_from_dev(struct device *dev)
{
	return pci_get_drvdata(to_pci_dev(dev));
}

static void *ivn_dma_alloc(struct device *dev, size_t size, dma_addr_t *dma, gfp_t gfp,
			   unsigned long attrs)
{
	struct ivn *v = ivn_from_dev(dev);
	struct ivn_slice *best = NULL;
	unsigned long flags;
	int i;

	spin_lock_irqsave(&v->lock, flags);
	for (i = 0; i < IVN_MWS; i++)
		if (!v->mw[i].busy && v->mw[i].size >= size &&
		    (!best || v->mw[i].size < best->size))
			best = &v->mw[i];
	if (best)
		best->busy = true;
	spin_unlock_irqrestore(&v->lock, flags);
	if (!best) {
		dev_warn_ratelimited(dev, "no free window slice of %zu bytes: the emulated NTB's DMA memory is one buffer per memory window (%#llx and %#llx bytes)\n",
				     size, v->mw[0].size, v->mw[1].size);
		return NULL;
	}
	memset(v->carve + best->off, 0, best->size);
	*dma = v->base + best->off;
	return v->carve + best->off;
}

static struct ivn_slice *ivn_slice_of(struct ivn *v, dma_addr_t dma)
{
	int i;

	for (i = 0; i < IVN_MWS; i++)
		if (dma == v->base + v->mw[i].off)
			return &v->mw[i];
	return NULL;
}

static void ivn_dma_free(struct device *dev, size_t size, void *cpu, dma_addr_t dma,
			 unsigned long attrs)
{
	struct ivn *v = ivn_from_dev(dev);
	struct ivn_slice *s = ivn_slice_of(v, dma);
	unsigned long flags;

	if (WARN_ON(!s))
		return;
	spin_lock_irqsave(&v->lock, flags);
	s->busy = false;
	spin_unlock_irqrestore(&v->lock, flags);
}

static int ivn_dma_mmap(struct device *dev, struct vm_area_struct *vma, void *cpu,
			dma_addr_t dma, size_t size, unsigned long attrs)
{
	unsigned long pages = PAGE_ALIGN(size) >> PAGE_SHIFT;
	unsigned long want = vma_pages(vma);

	if (!ivn_slice_of(ivn_from_dev(dev), dma) || vma->vm_pgoff >= pages ||
	    want > pages - vma->vm_pgoff)
		return -ENXIO;
	return remap_pfn_range(vma, vma->vm_start, PHYS_PFN(dma) + vma->vm_pgoff,
			       want << PAGE_SHIFT, vma->vm_page_prot);
}

/* Nothing on this device does DMA: streaming mappings have no meaning. */
static dma_addr_t ivn_dma_map_page(struct device *dev, struct page *page, unsigned long offset,
				   size_t size, enum dma_data_direction dir, unsigned long attrs)
{
	dev_warn_once(dev, "streaming DMA mappings are not supported by the emulated NTB\n");
	return DMA_MAPPING_ERROR;
}

static int ivn_dma_map_sg(struct device *dev, struct scatterlist *sg, int nents,
			  enum dma_data_direction dir, unsigned long attrs)
{
	dev_warn_once(dev, "streaming DMA mappings are not supported by the emulated NTB\n");
	return -EINVAL;
}

static const struct dma_map_ops ivn_dma_ops = {
	.alloc = ivn_dma_alloc,
	.free = ivn_dma_free,
	.mmap = ivn_dma_mmap,
	.map_page = ivn_dma_map_page,
	.map_sg = ivn_dma_map_sg,
};

/* ---- interrupts ---- */

static irqreturn_t ivn_irq(int irq, void *data)
{
	struct ivn *v = data;
	int vec = irq - pci_irq_vector(v->pdev, 0);
	u64 masked;

	if (vec < 0 || vec >= IVN_VECTORS)
		return IRQ_NONE;
	atomic_inc(&v->irqs[vec]);
	if (vec == IVN_VEC_LINK) {
		ivn_link_check(v);
	} else if (vec == IVN_VEC_MSG) {
		if (msgs)
			ivn_msg_fire(v);
	} else {
		atomic64_or(BIT_ULL(vec), &v->db_pending);
		spin_lock(&v->lock);
		masked = v->db_mask & BIT_ULL(vec);
		spin_unlock(&v->lock);
		if (!masked)
			ntb_db_event(&v->ntb, vec);
	}
	return IRQ_HANDLED;
}

/* ---- debugfs: the emulated hardware's own view, for tests ---- */

static int ivn_state_show(struct seq_file *s, void *unused)
{
	struct ivn *v = s->private;
	int i;

	seq_printf(s, "side %d peer %d link own %u peer %u up %llu\n", v->side, v->peer_id,
		   READ_ONCE(v->own->link), READ_ONCE(v->peer->link), ivn_link_state(v));
	for (i = 0; i < IVN_MWS; i++)
		seq_printf(s, "mw%d slice %#llx size %#llx busy %d trans %#llx size %#llx\n", i,
			   v->base + v->mw[i].off, v->mw[i].size, v->mw[i].busy,
			   READ_ONCE(v->own->trans_addr[i]), READ_ONCE(v->own->trans_size[i]));
	seq_printf(s, "db pending %#llx mask %#llx\n", (u64)atomic64_read(&v->db_pending),
		   READ_ONCE(v->db_mask));
	for (i = 0; i < IVN_VECTORS; i++)
		seq_printf(s, "vector%d irqs %d\n", i, atomic_read(&v->irqs[i]));
	for (i = 0; i < IVN_DBS; i++)
		seq_printf(s, "db%d rung %d\n", i, atomic_read(&v->rings[i]));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ivn_state);

/* ---- the PCI device ---- */

/* The carve-out of side @side: side 1's is carve_base1 when one guest holds both ends. */
static phys_addr_t ivn_carve_base(int side)
{
	return side && carve_base1 ? carve_base1 : carve_base;
}

/* Windows in decreasing size from the aligned carve-out base, then the control page. */
static int ivn_layout(struct ivn *v)
{
	u64 sizes[IVN_MWS] = { mw0_size, mw1_size };
	int order[IVN_MWS] = { 0, 1 };
	u64 off = 0;
	int i;

	if (sizes[1] > sizes[0])
		swap(order[0], order[1]);
	for (i = 0; i < IVN_MWS; i++) {
		if (!is_power_of_2(sizes[i]) || sizes[i] < PAGE_SIZE)
			return -EINVAL;
		v->mw[i].size = sizes[i];
	}
	if (!IS_ALIGNED(carve_base, sizes[order[0]]) || !IS_ALIGNED(carve_base1, sizes[order[0]]))
		return -EINVAL;
	for (i = 0; i < IVN_MWS; i++) {
		v->mw[order[i]].off = off;
		off += sizes[order[i]];
	}
	if (off + IVN_CTRL_SIZE > carve_size)
		return -EINVAL;
	return 0;
}

static int ivn_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	u64 ctrl_off = carve_size - IVN_CTRL_SIZE;
	struct device *dev = &pdev->dev;
	struct ivn *v;
	int i, ret;

	/* ivshmem-plain has no MSI-X BAR: it is not ours */
	if (!pci_resource_len(pdev, 1))
		return -ENODEV;
	v = devm_kzalloc(dev, sizeof(*v), GFP_KERNEL);
	if (!v)
		return -ENOMEM;
	v->pdev = pdev;
	spin_lock_init(&v->lock);
	ret = ivn_layout(v);
	if (ret) {
		dev_err(dev, "windows of %#lx and %#lx bytes (powers of two) and a control page do not fit a carve-out of %#lx bytes at %#lx (and %#lx) aligned to the larger window\n",
			mw0_size, mw1_size, carve_size, carve_base, carve_base1);
		return ret;
	}

	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	/* without bus mastering QEMU drops the device's MSI-X writes */
	pci_set_master(pdev);
	v->regs = pcim_iomap(pdev, 0, 0);
	if (!v->regs)
		return -ENOMEM;
	/* the server's peer ids: 2 * pair is side 0, 2 * pair + 1 side 1 */
	i = readl(v->regs + IVSHMEM_IVPOSITION);
	if (i / 2 != pair) {
		dev_dbg(dev, "ivshmem peer id %d is not of pair %u (ids %u and %u): not bound\n",
			i, pair, 2 * pair, 2 * pair + 1);
		return -ENODEV;
	}
	v->side = i & 1;
	v->peer_id = i ^ 1;
	v->base = ivn_carve_base(v->side);
	v->peer_base = ivn_carve_base(!v->side);
	if (region_intersects(v->base, carve_size, IORESOURCE_SYSTEM_RAM, IORES_DESC_NONE) !=
	    REGION_DISJOINT) {
		dev_err(dev, "%#lx bytes at %pa (side %d's carve-out) are System RAM: boot with memmap=%luM$%pa\n",
			carve_size, &v->base, v->side, carve_size >> 20, &v->base);
		return -EBUSY;
	}
	v->bar2 = pci_resource_start(pdev, 2);
	if (pci_resource_len(pdev, 2) < v->peer_base + carve_size) {
		dev_err(dev, "BAR2 (%pR) is smaller than the peer's carve-out's end %#llx: its shared memory must be the peer's RAM\n",
			&pdev->resource[2], (u64)v->peer_base + carve_size);
		return -ENODEV;
	}
	v->carve = devm_memremap(dev, v->base, carve_size, MEMREMAP_WB);
	if (IS_ERR(v->carve))
		return PTR_ERR(v->carve);
	v->peer = devm_memremap(dev, v->bar2 + v->peer_base + ctrl_off, IVN_CTRL_SIZE,
				MEMREMAP_WB);
	if (IS_ERR(v->peer))
		return PTR_ERR(v->peer);
	v->own = v->carve + ctrl_off;

	memset(v->own, 0, IVN_CTRL_SIZE);
	v->own->version = IVN_VERSION;
	v->own->carve_base = v->base;
	v->own->carve_size = carve_size;
	for (i = 0; i < IVN_MWS; i++)
		v->own->mw_size[i] = v->mw[i].size;
	v->db_mask = ivn_db_valid_mask(&v->ntb);
	v->msg_mask = IVN_MSG_IN | IVN_MSG_OUT;

	ret = pci_alloc_irq_vectors(pdev, IVN_VECTORS, IVN_VECTORS, PCI_IRQ_MSIX);
	if (ret < 0) {
		dev_err(dev, "%d MSI-X vectors needed (ivshmem-doorbell vectors=%d): %d\n",
			IVN_VECTORS, IVN_VECTORS, ret);
		return ret;
	}
	for (i = 0; i < IVN_VECTORS; i++) {
		ret = devm_request_irq(dev, pci_irq_vector(pdev, i), ivn_irq, 0, KBUILD_MODNAME, v);
		if (ret)
			return ret;
	}
	pci_set_drvdata(pdev, v);
	set_dma_ops(dev, &ivn_dma_ops);
	ret = dma_set_mask_and_coherent(dev, DMA_BIT_MASK(64));
	if (ret)
		goto err_dma;

	v->ops = ivn_ops;
	if (same_port) {
		v->ops.port_number = ivn_port_number;
		v->ops.peer_port_count = ivn_peer_port_count;
		v->ops.peer_port_number = ivn_peer_port_number;
		v->ops.peer_port_idx = ivn_peer_port_idx;
	}
	if (msgs) {
		v->ops.msg_count = ivn_msg_ops.msg_count;
		v->ops.msg_inbits = ivn_msg_ops.msg_inbits;
		v->ops.msg_outbits = ivn_msg_ops.msg_outbits;
		v->ops.msg_read_sts = ivn_msg_ops.msg_read_sts;
		v->ops.msg_clear_sts = ivn_msg_ops.msg_clear_sts;
		v->ops.msg_set_mask = ivn_msg_ops.msg_set_mask;
		v->ops.msg_clear_mask = ivn_msg_ops.msg_clear_mask;
		v->ops.msg_read = ivn_msg_ops.msg_read;
		v->ops.peer_msg_write = ivn_msg_ops.peer_msg_write;
	}
	v->ntb.pdev = pdev;
	v->ntb.topo = v->side ? NTB_TOPO_B2B_DSD : NTB_TOPO_B2B_USD;
	v->ntb.ops = &v->ops;

	/* the peer may look now */
	smp_wmb();
	WRITE_ONCE(v->own->magic, IVN_MAGIC);
	timer_setup(&v->timer, ivn_timer, 0);
	mod_timer(&v->timer, jiffies + msecs_to_jiffies(IVN_LINK_POLL_MS));
	ret = ntb_register_device(&v->ntb);
	if (ret)
		goto err_timer;
	v->dbgfs = debugfs_create_dir(pci_name(pdev), ivn_dbgfs_root);
	debugfs_create_file("state", 0400, v->dbgfs, v, &ivn_state_fops);
	dev_info(dev, "emulated NTB side %d (peer %d): windows %#llx at %#llx, %#llx at %#llx; the peer's through %pR\n",
		 v->side, v->peer_id, v->mw[0].size, v->base + v->mw[0].off, v->mw[1].size,
		 v->base + v->mw[1].off, &pdev->resource[2]);
	return 0;

err_timer:
	del_timer_sync(&v->timer);
	WRITE_ONCE(v->own->magic, 0);
err_dma:
	set_dma_ops(dev, NULL);
	return ret;
}

static void ivn_remove(struct pci_dev *pdev)
{
	struct ivn *v = pci_get_drvdata(pdev);

	debugfs_remove_recursive(v->dbgfs);
	ntb_unregister_device(&v->ntb);
	del_timer_sync(&v->timer);
	WRITE_ONCE(v->own->link, 0);
	WRITE_ONCE(v->own->magic, 0);
	ivn_ring(v, IVN_VEC_LINK);
	set_dma_ops(&pdev->dev, NULL);
}

static const struct pci_device_id ivn_ids[] = {
	{ PCI_DEVICE(PCI_VENDOR_ID_REDHAT_QUMRANET, 0x1110) },	/* ivshmem */
	{ }
};
MODULE_DEVICE_TABLE(pci, ivn_ids);

static struct pci_driver ivn_driver = {
	.name = KBUILD_MODNAME,
	.id_table = ivn_ids,
	.probe = ivn_probe,
	.remove = ivn_remove,
};

static int __init ivn_init(void)
{
	int ret;

	if (msgs != 0 && msgs != IVN_MSGS) {
		pr_err("msgs=%u: 0 or %d message registers\n", msgs, IVN_MSGS);
		return -EINVAL;
	}
	ivn_dbgfs_root = debugfs_create_dir(KBUILD_MODNAME, NULL);
	ret = pci_register_driver(&ivn_driver);
	if (ret)
		debugfs_remove_recursive(ivn_dbgfs_root);
	return ret;
}
module_init(ivn_init);

static void __exit ivn_exit(void)
{
	pci_unregister_driver(&ivn_driver);
	debugfs_remove_recursive(ivn_dbgfs_root);
}
module_exit(ivn_exit);

MODULE_DESCRIPTION("An emulated NTB between two QEMU guests over ivshmem-doorbell (ntbfab's tests)");
MODULE_LICENSE("GPL");
