// SPDX-License-Identifier: GPL-2.0-only
/*
 * ntbfab_ntb: an NTB client that gives every NTB device of the Linux NTB
 * framework a character device, /dev/ntbfab-ntbN, for ntbfabd.
 *
 * It uses only include/linux/ntb.h, so it runs on every ntb_hw driver.  The
 * interface (ioctls, mmap, read, poll) and its rules are in
 * include/uapi/ntbfab_ntb.h; docs/linux-ntb.md describes its use.
 *
 * Objects and lifetimes:
 * - struct ntbfab_dev, one per NTB device, from probe to the release of the
 *   last file that refers to it (kref).  Its mutex serialises every call into
 *   the NTB device; the NTB's event callbacks (atomic context) take only
 *   ev_lock, which guards the open files' event queues and eventfds.
 * - struct ntbfab_file, one per open of the character device.  The one open
 *   for writing is the owner: what it set is undone when it is released.
 * - struct ntbfab_buf, DMA memory of the NTB's PCI function with a file of
 *   its own (an inode of this module's pseudo file system, so that its
 *   mappings can be torn down).  A translation holds a reference, as does
 *   its file; mappings hold the file.
 * - struct ntbfab_mwfd, a descriptor limited to one range of a peer window.
 *   Its mappings, like the owner's, live in the device's inode's address
 *   space, which is emptied when the owner goes.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/anon_inodes.h>
#include <linux/bitmap.h>
#include <linux/dma-mapping.h>
#include <linux/eventfd.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/kref.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mount.h>
#include <linux/mutex.h>
#include <linux/ntb.h>
#include <linux/pci.h>
#include <linux/poll.h>
#include <linux/pseudo_fs.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

#include "ntbfab_ntb.h"

#define NTBFAB_FS_MAGIC		0x4e544246	/* "NTBF" */
#define NTBFAB_MAX_DEVS		256
#define NTBFAB_MAX_PEERS	64
#define NTBFAB_QUEUE_LEN	256
#define NTBFAB_MW_OFF_MASK	((1ULL << NTBFAB_MMAP_MW_SHIFT) - 1)

static unsigned long max_buf_size = SZ_256M;
module_param(max_buf_size, ulong, 0644);
MODULE_PARM_DESC(max_buf_size, "Largest buffer NTBFAB_IOC_BUF_ALLOC allocates, in bytes (default 256 MiB)");

struct ntbfab_buf;

/* An inbound translation the module programmed. */
struct ntbfab_trans {
	struct ntbfab_buf *buf;		/* NULL: none */
	u64 offset;
	u64 size;
	struct pid *pid;
};

/* An outbound translation the module programmed. */
struct ntbfab_otrans {
	bool set;
	u32 pidx;
	u64 addr;
	u64 size;
};

struct ntbfab_dev {
	struct kref ref;
	struct miscdevice misc;
	char name[32];
	int index;
	struct ntb_dev *ntb;
	struct inode *inode;		/* the window mappings' address space */

	struct mutex lock;		/* all below, and every call into ntb */
	bool removed;
	struct ntbfab_file *owner;
	struct pid *owner_pid;
	unsigned int owner_gen;		/* window descriptors of older owners are dead */
	bool link_enabled;
	int peer_count;
	int mw_count[NTBFAB_MAX_PEERS];
	int mw_base[NTBFAB_MAX_PEERS];	/* of each peer's windows in trans[] */
	struct ntbfab_trans *trans;
	int trans_total;
	int peer_mw_count;
	struct ntbfab_otrans *otrans;
	int spad_count;
	unsigned long *spad_written;
	u64 db_valid;
	u64 msg_bits;
	u64 msg_mask;
	struct list_head bufs;
	u32 next_buf_id;

	spinlock_t ev_lock;		/* taken in the NTB's event callbacks */
	struct list_head files;
	unsigned int opens;
	u64 db_mask;			/* written under lock too, read in db_event */
	u64 db_pending;
	u64 ev_seq;
};

struct ntbfab_evfd {
	struct eventfd_ctx *ctx;
	u32 events;
	u64 db_bits;
};

struct ntbfab_file {
	struct ntbfab_dev *nd;
	struct list_head node;		/* nd->files, under ev_lock */
	bool owner;
	wait_queue_head_t wq;
	unsigned int head;
	unsigned int count;
	bool ended;			/* the REMOVED record was read */
	struct ntbfab_evfd evfd[NTBFAB_EVENTFD_MAX];
	/* one more slot than events may take: for NTBFAB_EVENT_REMOVED */
	struct ntbfab_event q[NTBFAB_QUEUE_LEN + 1];
};

struct ntbfab_buf {
	struct kref ref;		/* its file and each translation to it */
	struct ntbfab_dev *nd;
	struct list_head node;		/* nd->bufs */
	struct address_space *mapping;	/* while its file exists */
	void *cpu;
	dma_addr_t dma;
	size_t size;
	u32 id;
	unsigned int trans_count;
	bool revoked;			/* the NTB device went away: memory freed */
};

struct ntbfab_mwfd {
	struct ntbfab_dev *nd;
	int widx;
	u64 offset;
	u64 size;
	unsigned int gen;
};

/* Every ioctl's argument, copied in before nd->lock is taken and out after. */
union ntbfab_ioc_arg {
	struct ntbfab_version version;
	struct ntbfab_info info;
	struct ntbfab_peer_info peer_info;
	struct ntbfab_mw_info mw_info;
	struct ntbfab_peer_mw_info peer_mw_info;
	struct ntbfab_state state;
	struct ntbfab_link link;
	struct ntbfab_buf_alloc buf_alloc;
	struct ntbfab_mw_trans mw_trans;
	struct ntbfab_mw_ref mw_ref;
	struct ntbfab_peer_mw_trans peer_mw_trans;
	struct ntbfab_peer_mw_fd peer_mw_fd;
	struct ntbfab_bits bits;
	struct ntbfab_spad spad;
	struct ntbfab_msg msg;
	struct ntbfab_eventfd eventfd;
};

static struct vfsmount *ntbfab_mnt;
static DEFINE_IDA(ntbfab_ida);
static const struct file_operations ntbfab_buf_fops;

static void ntbfab_dev_free(struct kref *ref)
{
	struct ntbfab_dev *nd = container_of(ref, struct ntbfab_dev, ref);

	iput(nd->inode);
	bitmap_free(nd->spad_written);
	kfree(nd->otrans);
	kfree(nd->trans);
	ida_free(&ntbfab_ida, nd->index);
	kfree(nd);
}

static void ntbfab_dev_put(struct ntbfab_dev *nd)
{
	kref_put(&nd->ref, ntbfab_dev_free);
}

static struct device *ntbfab_dma_dev(struct ntbfab_dev *nd)
{
	/* where every in-kernel client allocates its inbound buffers */
	return &nd->ntb->pdev->dev;
}

/* ---- events (atomic context: the NTB's callbacks hold its ctx_lock) ---- */

static void ntbfab_queue(struct ntbfab_file *nf, const struct ntbfab_event *ev)
{
	unsigned int tail = (nf->head + nf->count) % ARRAY_SIZE(nf->q);
	struct ntbfab_event *last;

	if (ev->type == NTBFAB_EVENT_REMOVED || nf->count < NTBFAB_QUEUE_LEN - 1) {
		nf->q[tail] = *ev;
		nf->count++;
		return;
	}
	/* full: the last slot counts what did not fit */
	last = &nf->q[(nf->head + nf->count - 1) % ARRAY_SIZE(nf->q)];
	if (nf->count == NTBFAB_QUEUE_LEN && last->type == NTBFAB_EVENT_LOST) {
		last->bits++;
		return;
	}
	nf->q[tail] = (struct ntbfab_event){
		.type = NTBFAB_EVENT_LOST, .bits = 1, .seq = ev->seq,
	};
	nf->count++;
}

static void ntbfab_signal(struct eventfd_ctx *ctx)
{
#ifdef NTBFAB_EVENTFD_SIGNAL_ONE_ARG
	eventfd_signal(ctx);
#else
	eventfd_signal(ctx, 1);
#endif
}

/* Called with ev_lock held. */
static void ntbfab_deliver(struct ntbfab_dev *nd, struct ntbfab_event *ev, u32 kind)
{
	struct ntbfab_file *nf;
	int i;

	ev->seq = ++nd->ev_seq;
	list_for_each_entry(nf, &nd->files, node) {
		ntbfab_queue(nf, ev);
		for (i = 0; i < NTBFAB_EVENTFD_MAX; i++) {
			struct ntbfab_evfd *e = &nf->evfd[i];

			if (!e->ctx || !(e->events & kind))
				continue;
			if (kind == NTBFAB_EV_DB && !(e->db_bits & ev->bits))
				continue;
			ntbfab_signal(e->ctx);
		}
		wake_up_interruptible(&nf->wq);
	}
}

static void ntbfab_link_event(void *ctx)
{
	struct ntbfab_dev *nd = ctx;
	struct ntbfab_event ev = { .type = NTBFAB_EVENT_LINK };
	enum ntb_speed speed = NTB_SPEED_NONE;
	enum ntb_width width = NTB_WIDTH_NONE;
	unsigned long flags;

	ev.bits = ntb_link_is_up(nd->ntb, &speed, &width);
	if (ev.bits) {
		ev.speed = speed;
		ev.width = width;
	}
	spin_lock_irqsave(&nd->ev_lock, flags);
	ntbfab_deliver(nd, &ev, NTBFAB_EV_LINK);
	spin_unlock_irqrestore(&nd->ev_lock, flags);
}

static void ntbfab_db_event(void *ctx, int vector)
{
	struct ntbfab_dev *nd = ctx;
	struct ntbfab_event ev = { .type = NTBFAB_EVENT_DB, .vector = vector };
	unsigned long flags;

	spin_lock_irqsave(&nd->ev_lock, flags);
	/*
	 * Move the vector's bits out of the hardware, so that no hardware keeps
	 * interrupting for them, into the pending word user space clears.
	 */
	ev.bits = ntb_db_read(nd->ntb) & ntb_db_vector_mask(nd->ntb, vector) &
		  ~READ_ONCE(nd->db_mask);
	if (ev.bits) {
		ntb_db_clear(nd->ntb, ev.bits);
		nd->db_pending |= ev.bits;
		ntbfab_deliver(nd, &ev, NTBFAB_EV_DB);
	}
	spin_unlock_irqrestore(&nd->ev_lock, flags);
}

static void ntbfab_msg_event(void *ctx)
{
	struct ntbfab_dev *nd = ctx;
	struct ntbfab_event ev = { .type = NTBFAB_EVENT_MSG };
	unsigned long flags;

	ev.bits = ntb_msg_read_sts(nd->ntb);
	spin_lock_irqsave(&nd->ev_lock, flags);
	ntbfab_deliver(nd, &ev, NTBFAB_EV_MSG);
	spin_unlock_irqrestore(&nd->ev_lock, flags);
}

static const struct ntb_ctx_ops ntbfab_ctx_ops = {
	.link_event = ntbfab_link_event,
	.db_event = ntbfab_db_event,
	.msg_event = ntbfab_msg_event,
};

/* ---- buffers ---- */

/* Called with nd->lock held. */
static void ntbfab_buf_free(struct kref *ref)
{
	struct ntbfab_buf *buf = container_of(ref, struct ntbfab_buf, ref);

	list_del(&buf->node);
	if (!buf->revoked)
		dma_free_coherent(ntbfab_dma_dev(buf->nd), buf->size, buf->cpu, buf->dma);
	kfree(buf);
}

static void ntbfab_buf_put(struct ntbfab_buf *buf)
{
	kref_put(&buf->ref, ntbfab_buf_free);
}

/* The device is going away: no mapping of the buffer may outlive its memory. */
static void ntbfab_buf_revoke(struct ntbfab_buf *buf)
{
	if (buf->revoked)
		return;
	if (buf->mapping)
		unmap_mapping_range(buf->mapping, 0, 0, 1);
	dma_free_coherent(ntbfab_dma_dev(buf->nd), buf->size, buf->cpu, buf->dma);
	buf->cpu = NULL;
	buf->revoked = true;
}

static int ntbfab_buf_release(struct inode *inode, struct file *file)
{
	struct ntbfab_buf *buf = file->private_data;
	struct ntbfab_dev *nd = buf->nd;

	mutex_lock(&nd->lock);
	buf->mapping = NULL;
	ntbfab_buf_put(buf);
	mutex_unlock(&nd->lock);
	ntbfab_dev_put(nd);
	return 0;
}

static int ntbfab_buf_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct ntbfab_buf *buf = file->private_data;
	struct ntbfab_dev *nd = buf->nd;
	int ret;

	/* a private mapping would be copied on write: not the buffer any more */
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	mutex_lock(&nd->lock);
	if (buf->revoked)
		ret = -ENODEV;
	else
		ret = dma_mmap_coherent(ntbfab_dma_dev(nd), vma, buf->cpu, buf->dma,
					buf->size);
	mutex_unlock(&nd->lock);
	return ret;
}

static long ntbfab_buf_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct ntbfab_buf *buf = file->private_data;
	struct ntbfab_dev *nd = buf->nd;
	struct ntbfab_buf_info info = {};

	if (cmd != NTBFAB_IOC_BUF_INFO)
		return -ENOTTY;
	mutex_lock(&nd->lock);
	info.size = buf->size;
	info.dma_addr = buf->dma;
	info.id = buf->id;
	info.minor = nd->index;
	info.flags = buf->revoked ? NTBFAB_BUF_REVOKED : 0;
	info.trans_count = buf->trans_count;
	mutex_unlock(&nd->lock);
	return copy_to_user((void __user *)arg, &info, sizeof(info)) ? -EFAULT : 0;
}

static const struct file_operations ntbfab_buf_fops = {
	.owner = THIS_MODULE,
	.release = ntbfab_buf_release,
	.mmap = ntbfab_buf_mmap,
	.unlocked_ioctl = ntbfab_buf_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static int ntbfab_ioc_buf_alloc(struct ntbfab_dev *nd, struct ntbfab_buf_alloc *req,
				struct file **filep)
{
	struct ntbfab_buf *buf;
	struct inode *inode;
	struct file *file;
	int ret;

	if (req->flags || req->reserved || !req->size || req->size > max_buf_size)
		return -EINVAL;
	buf = kzalloc(sizeof(*buf), GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	buf->size = PAGE_ALIGN(req->size);
	buf->cpu = dma_alloc_coherent(ntbfab_dma_dev(nd), buf->size, &buf->dma, GFP_KERNEL);
	if (!buf->cpu) {
		dev_dbg(&nd->ntb->dev, "no DMA memory for a buffer of %zu bytes\n", buf->size);
		kfree(buf);
		return -ENOMEM;
	}
	kref_init(&buf->ref);
	buf->nd = nd;
	buf->id = ++nd->next_buf_id;
	list_add_tail(&buf->node, &nd->bufs);

	inode = alloc_anon_inode(ntbfab_mnt->mnt_sb);
	if (IS_ERR(inode)) {
		ret = PTR_ERR(inode);
		goto err_buf;
	}
	if (!try_module_get(THIS_MODULE)) {
		ret = -ENODEV;
		goto err_inode;
	}
	file = alloc_file_pseudo(inode, ntbfab_mnt, "ntbfab-buf", O_RDWR, &ntbfab_buf_fops);
	if (IS_ERR(file)) {
		ret = PTR_ERR(file);
		module_put(THIS_MODULE);
		goto err_inode;
	}
	/* from here the file owns the buffer's first reference */
	file->private_data = buf;
	buf->mapping = file->f_mapping;
	kref_get(&nd->ref);

	req->size = buf->size;
	req->dma_addr = buf->dma;
	req->id = buf->id;
	*filep = file;
	return 0;

err_inode:
	iput(inode);
err_buf:
	ntbfab_buf_put(buf);
	return ret;
}

/* ---- windows ---- */

static int ntbfab_map_window(struct ntbfab_dev *nd, struct vm_area_struct *vma, int widx,
			     u64 woff)
{
	u64 len = vma->vm_end - vma->vm_start;
	phys_addr_t base;
	resource_size_t size;
	int ret;

	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (widx < 0 || widx >= nd->peer_mw_count)
		return -EINVAL;
	ret = ntb_peer_mw_get_addr(nd->ntb, widx, &base, &size);
	if (ret)
		return ret;
	if (woff > size || len > size - woff || !PAGE_ALIGNED(base))
		return -EINVAL;
	/*
	 * The mapping is indexed by its place in the device's address space,
	 * where the owner's departure finds it (see ntbfab_undo_owner()).
	 */
	vma->vm_pgoff = (((u64)widx << NTBFAB_MMAP_MW_SHIFT) + woff) >> PAGE_SHIFT;
	vma->vm_page_prot = pgprot_writecombine(vma->vm_page_prot);
	return io_remap_pfn_range(vma, vma->vm_start, PHYS_PFN(base + woff), len,
				  vma->vm_page_prot);
}

static int ntbfab_mwfd_release(struct inode *inode, struct file *file)
{
	struct ntbfab_mwfd *mf = file->private_data;

	ntbfab_dev_put(mf->nd);
	kfree(mf);
	return 0;
}

static int ntbfab_mwfd_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct ntbfab_mwfd *mf = file->private_data;
	struct ntbfab_dev *nd = mf->nd;
	u64 off = (u64)vma->vm_pgoff << PAGE_SHIFT;
	u64 len = vma->vm_end - vma->vm_start;
	int ret;

	if (off > mf->size || len > mf->size - off)
		return -EINVAL;
	mutex_lock(&nd->lock);
	if (nd->removed || !nd->owner || mf->gen != nd->owner_gen)
		ret = -ENODEV;
	else
		ret = ntbfab_map_window(nd, vma, mf->widx, mf->offset + off);
	mutex_unlock(&nd->lock);
	return ret;
}

static const struct file_operations ntbfab_mwfd_fops = {
	.owner = THIS_MODULE,
	.release = ntbfab_mwfd_release,
	.mmap = ntbfab_mwfd_mmap,
};

static int ntbfab_ioc_peer_mw_fd(struct ntbfab_dev *nd, struct ntbfab_peer_mw_fd *req,
				 struct file **filep)
{
	struct ntbfab_mwfd *mf;
	struct file *file;
	phys_addr_t base;
	resource_size_t size;
	int ret;

	if (req->flags || req->reserved || req->widx >= nd->peer_mw_count || !req->size ||
	    !PAGE_ALIGNED(req->offset) || !PAGE_ALIGNED(req->size))
		return -EINVAL;
	ret = ntb_peer_mw_get_addr(nd->ntb, req->widx, &base, &size);
	if (ret)
		return ret;
	if (req->offset > size || req->size > size - req->offset)
		return -EINVAL;
	mf = kzalloc(sizeof(*mf), GFP_KERNEL);
	if (!mf)
		return -ENOMEM;
	mf->nd = nd;
	mf->widx = req->widx;
	mf->offset = req->offset;
	mf->size = req->size;
	mf->gen = nd->owner_gen;
	file = anon_inode_getfile("ntbfab-window", &ntbfab_mwfd_fops, mf, O_RDWR);
	if (IS_ERR(file)) {
		kfree(mf);
		return PTR_ERR(file);
	}
	file->f_mapping = nd->inode->i_mapping;
	kref_get(&nd->ref);
	*filep = file;
	return 0;
}

/* ---- what the owner set, and undoing it ---- */

static struct ntbfab_trans *ntbfab_trans(struct ntbfab_dev *nd, u32 pidx, u32 widx)
{
	if (pidx >= nd->peer_count || widx >= nd->mw_count[pidx])
		return NULL;
	return &nd->trans[nd->mw_base[pidx] + widx];
}

static void ntbfab_trans_drop(struct ntbfab_trans *t)
{
	t->buf->trans_count--;
	ntbfab_buf_put(t->buf);
	put_pid(t->pid);
	memset(t, 0, sizeof(*t));
}

static void ntbfab_mask_all(struct ntbfab_dev *nd)
{
	ntb_db_set_mask(nd->ntb, nd->db_valid);
	WRITE_ONCE(nd->db_mask, nd->db_valid);
	if (nd->msg_bits && nd->ntb->ops->msg_set_mask) {
		ntb_msg_set_mask(nd->ntb, nd->msg_bits);
		nd->msg_mask = nd->msg_bits;
	}
}

/* Called with nd->lock held, while the NTB device is there. */
static void ntbfab_undo_owner(struct ntbfab_dev *nd)
{
	int pidx, widx, sidx;

	if (nd->link_enabled) {
		ntb_link_disable(nd->ntb);
		nd->link_enabled = false;
	}
	for (pidx = 0; pidx < nd->peer_count; pidx++) {
		for (widx = 0; widx < nd->mw_count[pidx]; widx++) {
			struct ntbfab_trans *t = ntbfab_trans(nd, pidx, widx);

			if (!t->buf)
				continue;
			ntb_mw_clear_trans(nd->ntb, pidx, widx);
			ntbfab_trans_drop(t);
		}
	}
	for (widx = 0; widx < nd->peer_mw_count; widx++) {
		struct ntbfab_otrans *o = &nd->otrans[widx];

		if (!o->set)
			continue;
		ntb_peer_mw_clear_trans(nd->ntb, o->pidx, widx);
		memset(o, 0, sizeof(*o));
	}
	ntbfab_mask_all(nd);
	/*
	 * All of them, the peer's messages to this owner too: a handshake value
	 * left there would mislead the next client (ntb_transport, for one,
	 * assumes zeros).
	 */
	for (sidx = 0; sidx < nd->spad_count; sidx++)
		ntb_spad_write(nd->ntb, sidx, 0);
	bitmap_zero(nd->spad_written, nd->spad_count);
	/* the owner's window mappings and its window descriptors' */
	nd->owner_gen++;
	unmap_mapping_range(nd->inode->i_mapping, 0, 0, 1);
}

/* ---- the character device ---- */

static int ntbfab_open(struct inode *inode, struct file *file)
{
	struct miscdevice *misc = file->private_data;
	struct ntbfab_dev *nd = container_of(misc, struct ntbfab_dev, misc);
	struct ntbfab_file *nf;
	int ret = 0;

	nf = kzalloc(sizeof(*nf), GFP_KERNEL);
	if (!nf)
		return -ENOMEM;
	nf->nd = nd;
	init_waitqueue_head(&nf->wq);

	mutex_lock(&nd->lock);
	if (nd->removed) {
		ret = -ENODEV;
	} else if (file->f_mode & FMODE_WRITE) {
		if (nd->owner) {
			ret = -EBUSY;
		} else {
			nd->owner = nf;
			nd->owner_pid = get_pid(task_tgid(current));
			nf->owner = true;
		}
	}
	if (!ret) {
		kref_get(&nd->ref);
		spin_lock_irq(&nd->ev_lock);
		list_add_tail(&nf->node, &nd->files);
		nd->opens++;
		spin_unlock_irq(&nd->ev_lock);
	}
	mutex_unlock(&nd->lock);
	if (ret) {
		kfree(nf);
		return ret;
	}
	file->private_data = nf;
	file->f_mapping = nd->inode->i_mapping;
	return stream_open(inode, file);
}

static int ntbfab_release(struct inode *inode, struct file *file)
{
	struct ntbfab_file *nf = file->private_data;
	struct ntbfab_dev *nd = nf->nd;
	int i;

	mutex_lock(&nd->lock);
	if (nf->owner) {
		if (!nd->removed)
			ntbfab_undo_owner(nd);
		nd->owner = NULL;
		put_pid(nd->owner_pid);
		nd->owner_pid = NULL;
	}
	spin_lock_irq(&nd->ev_lock);
	list_del(&nf->node);
	nd->opens--;
	spin_unlock_irq(&nd->ev_lock);
	mutex_unlock(&nd->lock);

	for (i = 0; i < NTBFAB_EVENTFD_MAX; i++)
		if (nf->evfd[i].ctx)
			eventfd_ctx_put(nf->evfd[i].ctx);
	kfree(nf);
	ntbfab_dev_put(nd);
	return 0;
}

static ssize_t ntbfab_read(struct file *file, char __user *ubuf, size_t len, loff_t *ppos)
{
	struct ntbfab_file *nf = file->private_data;
	struct ntbfab_dev *nd = nf->nd;
	struct ntbfab_event ev[8];
	size_t n = 0, max = min_t(size_t, len / sizeof(ev[0]), ARRAY_SIZE(ev));
	int ret;

	if (!max)
		return -EINVAL;
	for (;;) {
		spin_lock_irq(&nd->ev_lock);
		while (n < max && nf->count && !nf->ended) {
			ev[n] = nf->q[nf->head];
			nf->head = (nf->head + 1) % ARRAY_SIZE(nf->q);
			nf->count--;
			if (ev[n++].type == NTBFAB_EVENT_REMOVED)
				nf->ended = true;
		}
		spin_unlock_irq(&nd->ev_lock);
		if (n || nf->ended)
			break;
		if (file->f_flags & O_NONBLOCK)
			return -EAGAIN;
		ret = wait_event_interruptible(nf->wq, READ_ONCE(nf->count));
		if (ret)
			return ret;
	}
	if (copy_to_user(ubuf, ev, n * sizeof(ev[0])))
		return -EFAULT;
	return n * sizeof(ev[0]);
}

static __poll_t ntbfab_poll(struct file *file, struct poll_table_struct *wait)
{
	struct ntbfab_file *nf = file->private_data;
	struct ntbfab_dev *nd = nf->nd;
	__poll_t mask = 0;

	poll_wait(file, &nf->wq, wait);
	spin_lock_irq(&nd->ev_lock);
	if (nf->count)
		mask |= EPOLLIN | EPOLLRDNORM;
	if (READ_ONCE(nd->removed))
		mask |= EPOLLHUP;
	spin_unlock_irq(&nd->ev_lock);
	return mask;
}

static int ntbfab_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct ntbfab_file *nf = file->private_data;
	struct ntbfab_dev *nd = nf->nd;
	u64 off = (u64)vma->vm_pgoff << PAGE_SHIFT;
	int ret;

	if (!nf->owner)
		return -EACCES;
	mutex_lock(&nd->lock);
	if (nd->removed)
		ret = -ENODEV;
	else
		ret = ntbfab_map_window(nd, vma, off >> NTBFAB_MMAP_MW_SHIFT,
					off & NTBFAB_MW_OFF_MASK);
	mutex_unlock(&nd->lock);
	return ret;
}

/* ---- ioctls: each runs with nd->lock held on a present device ---- */

static u32 ntbfab_topo(enum ntb_topo topo)
{
	switch (topo) {
	case NTB_TOPO_PRI:
		return NTBFAB_TOPO_PRI;
	case NTB_TOPO_SEC:
		return NTBFAB_TOPO_SEC;
	case NTB_TOPO_B2B_USD:
		return NTBFAB_TOPO_B2B_USD;
	case NTB_TOPO_B2B_DSD:
		return NTBFAB_TOPO_B2B_DSD;
	case NTB_TOPO_SWITCH:
		return NTBFAB_TOPO_SWITCH;
	case NTB_TOPO_CROSSLINK:
		return NTBFAB_TOPO_CROSSLINK;
	default:
		return NTBFAB_TOPO_NONE;
	}
}

static int ntbfab_ioc_info(struct ntbfab_dev *nd, struct ntbfab_info *info)
{
	struct ntb_dev *ntb = nd->ntb;
	const struct ntb_dev_ops *ops = ntb->ops;

	if (ops->mw_set_trans)
		info->flags |= NTBFAB_INFO_MW_SET_TRANS;
	if (ops->peer_mw_set_trans)
		info->flags |= NTBFAB_INFO_PEER_MW_SET_TRANS;
	if (ntb_db_is_unsafe(ntb))
		info->flags |= NTBFAB_INFO_DB_UNSAFE;
	if (ntb_spad_is_unsafe(ntb))
		info->flags |= NTBFAB_INFO_SPAD_UNSAFE;
	if (nd->spad_count && ops->peer_spad_read)
		info->flags |= NTBFAB_INFO_PEER_SPAD_READ;
	if (ops->db_set)
		info->flags |= NTBFAB_INFO_DB_SET;
	if (nd->msg_bits && ops->msg_set_mask && ops->msg_clear_mask)
		info->flags |= NTBFAB_INFO_MSG_MASK;
	info->port = ntb_port_number(ntb);
	info->peer_count = nd->peer_count;
	info->topology = ntbfab_topo(ntb->topo);
	info->peer_mw_count = nd->peer_mw_count;
	info->db_vector_count = ntb_db_vector_count(ntb);
	info->db_valid_mask = nd->db_valid;
	info->spad_count = nd->spad_count;
	if (nd->msg_bits) {
		info->msg_count = ntb_msg_count(ntb);
		info->msg_inbits = ntb_msg_inbits(ntb);
		info->msg_outbits = ntb_msg_outbits(ntb);
	}
	info->minor = nd->index;
	strscpy(info->ntb_name, dev_name(&ntb->dev), sizeof(info->ntb_name));
	strscpy(info->driver, dev_driver_string(&ntb->pdev->dev), sizeof(info->driver));
	return 0;
}

static int ntbfab_ioc_peer_info(struct ntbfab_dev *nd, struct ntbfab_peer_info *pi)
{
	if (pi->flags || pi->pidx >= nd->peer_count)
		return -EINVAL;
	pi->port = ntb_peer_port_number(nd->ntb, pi->pidx);
	pi->mw_count = nd->mw_count[pi->pidx];
	if (ntb_link_is_up(nd->ntb, NULL, NULL) & BIT_ULL(pi->pidx))
		pi->flags |= NTBFAB_PEER_LINK_UP;
	return 0;
}

static int ntbfab_ioc_mw_info(struct ntbfab_dev *nd, struct ntbfab_mw_info *mi)
{
	resource_size_t addr_align, size_align, size_max;
	struct ntbfab_trans *t = ntbfab_trans(nd, mi->pidx, mi->widx);
	int ret;

	if (mi->flags || !t)
		return -EINVAL;
	*mi = (struct ntbfab_mw_info){ .pidx = mi->pidx, .widx = mi->widx };
	ret = ntb_mw_get_align(nd->ntb, mi->pidx, mi->widx, &addr_align, &size_align, &size_max);
	if (!ret) {
		mi->flags |= NTBFAB_MW_ALIGN_VALID;
		mi->addr_align = addr_align;
		mi->size_align = size_align;
		mi->size_max = size_max;
	} else if (ret != -ENOTCONN) {
		return ret;
	}
	if (t->buf) {
		mi->flags |= NTBFAB_MW_TRANS_SET;
		mi->buf_id = t->buf->id;
		mi->trans_addr = t->buf->dma + t->offset;
		mi->trans_size = t->size;
		mi->trans_pid = pid_vnr(t->pid);
	}
	return 0;
}

static int ntbfab_ioc_peer_mw_info(struct ntbfab_dev *nd, struct ntbfab_peer_mw_info *pi)
{
	struct ntbfab_otrans *o;
	phys_addr_t base;
	resource_size_t size;
	int ret;

	if (pi->flags || pi->widx >= nd->peer_mw_count)
		return -EINVAL;
	ret = ntb_peer_mw_get_addr(nd->ntb, pi->widx, &base, &size);
	if (ret)
		return ret;
	*pi = (struct ntbfab_peer_mw_info){ .widx = pi->widx };
	pi->phys_addr = base;
	pi->size = size;
	pi->mmap_offset = (u64)pi->widx << NTBFAB_MMAP_MW_SHIFT;
	o = &nd->otrans[pi->widx];
	if (o->set) {
		pi->flags |= NTBFAB_PEER_MW_TRANS_SET;
		pi->trans_addr = o->addr;
		pi->trans_size = o->size;
		pi->trans_pidx = o->pidx;
	}
	return 0;
}

static int ntbfab_ioc_state(struct ntbfab_dev *nd, struct ntbfab_state *st)
{
	struct ntbfab_buf *buf;
	int i;

	if (nd->owner)
		st->flags |= NTBFAB_STATE_OWNED;
	if (nd->link_enabled)
		st->flags |= NTBFAB_STATE_LINK_ENABLED;
	if (nd->removed)
		st->flags |= NTBFAB_STATE_REMOVED;
	st->owner_pid = nd->owner_pid ? pid_vnr(nd->owner_pid) : 0;
	for (i = 0; i < nd->trans_total; i++)
		st->mw_trans += !!nd->trans[i].buf;
	for (i = 0; i < nd->peer_mw_count; i++)
		st->peer_mw_trans += nd->otrans[i].set;
	list_for_each_entry(buf, &nd->bufs, node)
		st->bufs += !buf->revoked;
	st->opens = nd->opens;
	st->db_mask = nd->db_mask;
	st->spads_written = bitmap_weight(nd->spad_written, nd->spad_count);
	return 0;
}

static int ntbfab_ioc_link(struct ntbfab_dev *nd, unsigned int cmd, struct ntbfab_link *l,
			   unsigned long arg)
{
	enum ntb_speed speed = NTB_SPEED_NONE;
	enum ntb_width width = NTB_WIDTH_NONE;
	int ret;

	switch (cmd) {
	case NTBFAB_IOC_LINK_STATUS:
		l->up = ntb_link_is_up(nd->ntb, &speed, &width);
		if (l->up) {
			l->speed = speed;
			l->width = width;
		}
		l->flags = nd->link_enabled ? NTBFAB_LINK_ENABLED : 0;
		return 0;
	case NTBFAB_IOC_LINK_ENABLE:
		if (l->up || l->flags || l->reserved || l->speed < NTB_SPEED_AUTO ||
		    l->width < NTB_WIDTH_AUTO)
			return -EINVAL;
		ret = ntb_link_enable(nd->ntb, l->speed, l->width);
		if (!ret)
			nd->link_enabled = true;
		return ret;
	default: /* NTBFAB_IOC_LINK_DISABLE */
		if (arg)
			return -EINVAL;
		ret = ntb_link_disable(nd->ntb);
		if (!ret)
			nd->link_enabled = false;
		return ret;
	}
}

/* Whether the window's limits, as far as they are known, allow the range. */
static bool ntbfab_trans_fits(struct ntbfab_dev *nd, u32 pidx, u32 widx, dma_addr_t addr,
			      u64 size)
{
	resource_size_t addr_align, size_align, size_max;

	if (ntb_mw_get_align(nd->ntb, pidx, widx, &addr_align, &size_align, &size_max))
		return true;	/* not known before link-up: the hardware driver checks */
	if ((!addr_align || IS_ALIGNED(addr, addr_align)) &&
	    (!size_align || IS_ALIGNED(size, size_align)) && size <= size_max)
		return true;
	dev_info_ratelimited(&nd->ntb->dev,
			     "peer %u window %u cannot translate %llu bytes at %pad: it needs the address aligned to %pa, the size to %pa and at most %pa bytes\n",
			     pidx, widx, size, &addr, &addr_align, &size_align, &size_max);
	return false;
}

static int ntbfab_ioc_mw_set_trans(struct ntbfab_dev *nd, struct ntbfab_mw_trans *req)
{
	struct ntbfab_trans *t = ntbfab_trans(nd, req->pidx, req->widx);
	struct ntbfab_trans old;
	struct ntbfab_buf *buf;
	struct file *file;
	dma_addr_t addr;
	int ret;

	if (req->flags || !t || !req->size)
		return -EINVAL;
	if (!nd->ntb->ops->mw_set_trans)
		return -EOPNOTSUPP;
	file = fget(req->buf_fd);
	if (!file)
		return -EBADF;
	ret = -EINVAL;
	buf = file->private_data;
	if (file->f_op != &ntbfab_buf_fops || buf->nd != nd)
		goto out;
	ret = -ENODEV;
	if (buf->revoked)
		goto out;
	ret = -EINVAL;
	addr = buf->dma + req->offset;
	if (req->offset > buf->size || req->size > buf->size - req->offset ||
	    !ntbfab_trans_fits(nd, req->pidx, req->widx, addr, req->size))
		goto out;
	ret = ntb_mw_set_trans(nd->ntb, req->pidx, req->widx, addr, req->size);
	if (ret)
		goto out;
	old = *t;
	kref_get(&buf->ref);
	buf->trans_count++;
	t->buf = buf;
	t->offset = req->offset;
	t->size = req->size;
	t->pid = get_pid(task_tgid(current));
	if (old.buf)
		ntbfab_trans_drop(&old);
out:
	fput(file);	/* never the last reference: the caller's descriptor holds one */
	return ret;
}

static int ntbfab_ioc_mw_clear_trans(struct ntbfab_dev *nd, unsigned int cmd,
				     struct ntbfab_mw_ref *ref)
{
	struct ntbfab_otrans *o;
	struct ntbfab_trans *t;
	int ret;

	if (ref->flags || ref->reserved)
		return -EINVAL;
	if (cmd == NTBFAB_IOC_MW_CLEAR_TRANS) {
		t = ntbfab_trans(nd, ref->pidx, ref->widx);
		if (!t)
			return -EINVAL;
		if (!t->buf)
			return 0;
		ret = ntb_mw_clear_trans(nd->ntb, ref->pidx, ref->widx);
		if (!ret)
			ntbfab_trans_drop(t);
		return ret;
	}
	if (ref->pidx >= nd->peer_count || ref->widx >= nd->peer_mw_count)
		return -EINVAL;
	o = &nd->otrans[ref->widx];
	if (!o->set || o->pidx != ref->pidx)
		return 0;
	ret = ntb_peer_mw_clear_trans(nd->ntb, ref->pidx, ref->widx);
	if (!ret)
		memset(o, 0, sizeof(*o));
	return ret;
}

static int ntbfab_ioc_peer_mw_set_trans(struct ntbfab_dev *nd, struct ntbfab_peer_mw_trans *req)
{
	struct ntbfab_otrans *o;
	int ret;

	if (req->flags || req->reserved || req->pidx >= nd->peer_count ||
	    req->widx >= nd->peer_mw_count || !req->size)
		return -EINVAL;
	if (!nd->ntb->ops->peer_mw_set_trans)
		return -EOPNOTSUPP;
	ret = ntb_peer_mw_set_trans(nd->ntb, req->pidx, req->widx, req->addr, req->size);
	if (ret)
		return ret;
	o = &nd->otrans[req->widx];
	o->set = true;
	o->pidx = req->pidx;
	o->addr = req->addr;
	o->size = req->size;
	return 0;
}

static int ntbfab_ioc_db(struct ntbfab_dev *nd, unsigned int cmd, struct ntbfab_bits *b)
{
	struct ntb_dev *ntb = nd->ntb;
	unsigned long flags;
	int ret;

	if (cmd == NTBFAB_IOC_DB_READ || cmd == NTBFAB_IOC_DB_READ_MASK) {
		spin_lock_irqsave(&nd->ev_lock, flags);
		if (cmd == NTBFAB_IOC_DB_READ)
			b->bits = (nd->db_pending | ntb_db_read(ntb)) & nd->db_valid;
		else
			b->bits = nd->db_mask;
		spin_unlock_irqrestore(&nd->ev_lock, flags);
		return 0;
	}
	if (b->flags || b->reserved || (b->bits & ~nd->db_valid))
		return -EINVAL;
	switch (cmd) {
	case NTBFAB_IOC_DB_CLEAR:
		spin_lock_irqsave(&nd->ev_lock, flags);
		nd->db_pending &= ~b->bits;
		ret = ntb_db_clear(ntb, b->bits);
		spin_unlock_irqrestore(&nd->ev_lock, flags);
		return ret;
	case NTBFAB_IOC_DB_SET:
		if (!ntb->ops->db_set)
			return -EOPNOTSUPP;
		return ntb_db_set(ntb, b->bits);
	case NTBFAB_IOC_DB_MASK:
		ret = ntb_db_set_mask(ntb, b->bits);
		if (!ret)
			WRITE_ONCE(nd->db_mask, nd->db_mask | b->bits);
		return ret;
	case NTBFAB_IOC_DB_UNMASK:
		/*
		 * Not under ev_lock: unmasking a pending bit may raise its event at
		 * once, and the event must not be filtered as masked.
		 */
		WRITE_ONCE(nd->db_mask, nd->db_mask & ~b->bits);
		ret = ntb_db_clear_mask(ntb, b->bits);
		if (ret)
			WRITE_ONCE(nd->db_mask, nd->db_mask | b->bits);
		return ret;
	default: /* NTBFAB_IOC_PEER_DB_SET */
		return ntb_peer_db_set(ntb, b->bits);
	}
}

static int ntbfab_ioc_spad(struct ntbfab_dev *nd, unsigned int cmd, struct ntbfab_spad *s)
{
	struct ntb_dev *ntb = nd->ntb;
	bool peer = s->flags & NTBFAB_SPAD_PEER;
	int ret;

	if ((s->flags & ~NTBFAB_SPAD_PEER) || s->sidx >= nd->spad_count ||
	    (peer ? s->pidx >= nd->peer_count : s->pidx))
		return -EINVAL;
	if (cmd == NTBFAB_IOC_SPAD_WRITE) {
		if (peer)
			return ntb_peer_spad_write(ntb, s->pidx, s->sidx, s->value);
		ret = ntb_spad_write(ntb, s->sidx, s->value);
		if (!ret)
			assign_bit(s->sidx, nd->spad_written, s->value);
		return ret;
	}
	if (peer && !ntb->ops->peer_spad_read)
		return -EOPNOTSUPP;
	s->value = peer ? ntb_peer_spad_read(ntb, s->pidx, s->sidx) : ntb_spad_read(ntb, s->sidx);
	return 0;
}

static int ntbfab_ioc_msg(struct ntbfab_dev *nd, unsigned int cmd, union ntbfab_ioc_arg *u)
{
	struct ntb_dev *ntb = nd->ntb;
	struct ntbfab_msg *m = &u->msg;
	struct ntbfab_bits *b = &u->bits;
	int pidx = 0, ret;

	if (!nd->msg_bits)
		return -EOPNOTSUPP;
	switch (cmd) {
	case NTBFAB_IOC_MSG_READ:
	case NTBFAB_IOC_MSG_WRITE:
		if (m->flags || m->midx >= ntb_msg_count(ntb) ||
		    (cmd == NTBFAB_IOC_MSG_READ ? m->pidx : m->pidx >= nd->peer_count))
			return -EINVAL;
		if (cmd == NTBFAB_IOC_MSG_WRITE)
			return ntb_peer_msg_write(ntb, m->pidx, m->midx, m->value);
		m->value = ntb_msg_read(ntb, &pidx, m->midx);
		m->pidx = pidx;
		return 0;
	case NTBFAB_IOC_MSG_STATUS:
		b->bits = ntb_msg_read_sts(ntb);
		return 0;
	}
	if (b->flags || b->reserved || (b->bits & ~nd->msg_bits))
		return -EINVAL;
	switch (cmd) {
	case NTBFAB_IOC_MSG_CLEAR:
		return ntb_msg_clear_sts(ntb, b->bits);
	case NTBFAB_IOC_MSG_MASK:
		if (!ntb->ops->msg_set_mask)
			return -EOPNOTSUPP;
		ret = ntb_msg_set_mask(ntb, b->bits);
		if (!ret)
			nd->msg_mask |= b->bits;
		return ret;
	default: /* NTBFAB_IOC_MSG_UNMASK */
		if (!ntb->ops->msg_clear_mask)
			return -EOPNOTSUPP;
		ret = ntb_msg_clear_mask(ntb, b->bits);
		if (!ret)
			nd->msg_mask &= ~b->bits;
		return ret;
	}
}

static int ntbfab_ioc_eventfd(struct ntbfab_file *nf, unsigned int cmd,
			      struct ntbfab_eventfd *req, unsigned long arg)
{
	const u32 kinds = NTBFAB_EV_LINK | NTBFAB_EV_DB | NTBFAB_EV_MSG;
	struct ntbfab_dev *nd = nf->nd;
	struct eventfd_ctx *ctx;
	int i;

	if (cmd == NTBFAB_IOC_EVENTFD_DEL) {
		if (arg >= NTBFAB_EVENTFD_MAX)
			return -EINVAL;
		spin_lock_irq(&nd->ev_lock);
		ctx = nf->evfd[arg].ctx;
		nf->evfd[arg].ctx = NULL;
		spin_unlock_irq(&nd->ev_lock);
		if (!ctx)
			return -ENOENT;
		eventfd_ctx_put(ctx);
		return 0;
	}
	if (req->flags || req->id || !req->events || (req->events & ~kinds))
		return -EINVAL;
	if ((req->events & NTBFAB_EV_DB) ?
	    !(req->db_bits & nd->db_valid) || (req->db_bits & ~nd->db_valid) : req->db_bits)
		return -EINVAL;
	ctx = eventfd_ctx_fdget(req->fd);
	if (IS_ERR(ctx))
		return PTR_ERR(ctx);
	spin_lock_irq(&nd->ev_lock);
	for (i = 0; i < NTBFAB_EVENTFD_MAX && nf->evfd[i].ctx; i++)
		;
	if (i < NTBFAB_EVENTFD_MAX) {
		nf->evfd[i].events = req->events;
		nf->evfd[i].db_bits = req->db_bits;
		nf->evfd[i].ctx = ctx;
	}
	spin_unlock_irq(&nd->ev_lock);
	if (i == NTBFAB_EVENTFD_MAX) {
		eventfd_ctx_put(ctx);
		return -ENOSPC;
	}
	req->id = i;
	return 0;
}

/* The ioctls that change the device: the owner's. */
static bool ntbfab_ioc_writes(unsigned int cmd)
{
	switch (cmd) {
	case NTBFAB_IOC_LINK_ENABLE:
	case NTBFAB_IOC_LINK_DISABLE:
	case NTBFAB_IOC_BUF_ALLOC:
	case NTBFAB_IOC_MW_SET_TRANS:
	case NTBFAB_IOC_MW_CLEAR_TRANS:
	case NTBFAB_IOC_PEER_MW_SET_TRANS:
	case NTBFAB_IOC_PEER_MW_CLEAR_TRANS:
	case NTBFAB_IOC_PEER_MW_FD:
	case NTBFAB_IOC_DB_CLEAR:
	case NTBFAB_IOC_DB_SET:
	case NTBFAB_IOC_DB_MASK:
	case NTBFAB_IOC_DB_UNMASK:
	case NTBFAB_IOC_PEER_DB_SET:
	case NTBFAB_IOC_SPAD_WRITE:
	case NTBFAB_IOC_MSG_CLEAR:
	case NTBFAB_IOC_MSG_MASK:
	case NTBFAB_IOC_MSG_UNMASK:
	case NTBFAB_IOC_MSG_WRITE:
		return true;
	default:
		return false;
	}
}

/*
 * Called with nd->lock held on a present device, with the argument copied in;
 * it is copied out when the lock is dropped.  @filep receives a file whose
 * descriptor the caller installs.
 */
static long ntbfab_ioctl_locked(struct ntbfab_file *nf, unsigned int cmd,
				union ntbfab_ioc_arg *u, unsigned long arg, struct file **filep)
{
	struct ntbfab_dev *nd = nf->nd;

	switch (cmd) {
	case NTBFAB_IOC_INFO:
		return ntbfab_ioc_info(nd, &u->info);
	case NTBFAB_IOC_PEER_INFO:
		return ntbfab_ioc_peer_info(nd, &u->peer_info);
	case NTBFAB_IOC_MW_INFO:
		return ntbfab_ioc_mw_info(nd, &u->mw_info);
	case NTBFAB_IOC_PEER_MW_INFO:
		return ntbfab_ioc_peer_mw_info(nd, &u->peer_mw_info);
	case NTBFAB_IOC_LINK_STATUS:
	case NTBFAB_IOC_LINK_ENABLE:
	case NTBFAB_IOC_LINK_DISABLE:
		return ntbfab_ioc_link(nd, cmd, &u->link, arg);
	case NTBFAB_IOC_BUF_ALLOC:
		return ntbfab_ioc_buf_alloc(nd, &u->buf_alloc, filep);
	case NTBFAB_IOC_MW_SET_TRANS:
		return ntbfab_ioc_mw_set_trans(nd, &u->mw_trans);
	case NTBFAB_IOC_MW_CLEAR_TRANS:
	case NTBFAB_IOC_PEER_MW_CLEAR_TRANS:
		return ntbfab_ioc_mw_clear_trans(nd, cmd, &u->mw_ref);
	case NTBFAB_IOC_PEER_MW_SET_TRANS:
		return ntbfab_ioc_peer_mw_set_trans(nd, &u->peer_mw_trans);
	case NTBFAB_IOC_PEER_MW_FD:
		return ntbfab_ioc_peer_mw_fd(nd, &u->peer_mw_fd, filep);
	case NTBFAB_IOC_DB_READ:
	case NTBFAB_IOC_DB_CLEAR:
	case NTBFAB_IOC_DB_SET:
	case NTBFAB_IOC_DB_READ_MASK:
	case NTBFAB_IOC_DB_MASK:
	case NTBFAB_IOC_DB_UNMASK:
	case NTBFAB_IOC_PEER_DB_SET:
		return ntbfab_ioc_db(nd, cmd, &u->bits);
	case NTBFAB_IOC_SPAD_READ:
	case NTBFAB_IOC_SPAD_WRITE:
		return ntbfab_ioc_spad(nd, cmd, &u->spad);
	case NTBFAB_IOC_MSG_STATUS:
	case NTBFAB_IOC_MSG_CLEAR:
	case NTBFAB_IOC_MSG_MASK:
	case NTBFAB_IOC_MSG_UNMASK:
	case NTBFAB_IOC_MSG_READ:
	case NTBFAB_IOC_MSG_WRITE:
		return ntbfab_ioc_msg(nd, cmd, u);
	case NTBFAB_IOC_EVENTFD_ADD:
	case NTBFAB_IOC_EVENTFD_DEL:
		return ntbfab_ioc_eventfd(nf, cmd, &u->eventfd, arg);
	default:
		return -ENOTTY;
	}
}

/*
 * No user memory is touched under nd->lock: .mmap runs under mmap_lock and
 * takes nd->lock, so a fault under nd->lock would invert that order.
 */
static long ntbfab_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct ntbfab_file *nf = file->private_data;
	struct ntbfab_dev *nd = nf->nd;
	void __user *up = (void __user *)arg;
	size_t size = _IOC_SIZE(cmd);
	struct file *newfile = NULL;
	union ntbfab_ioc_arg u;
	s32 *fd;
	long ret;

	if (_IOC_TYPE(cmd) != NTBFAB_IOC_MAGIC || size > sizeof(u))
		return -ENOTTY;
	memset(&u, 0, sizeof(u));
	if ((_IOC_DIR(cmd) & _IOC_WRITE) && copy_from_user(&u, up, size))
		return -EFAULT;
	if (cmd == NTBFAB_IOC_VERSION) {
		u.version.version = NTBFAB_NTB_VERSION;
		u.version.event_size = sizeof(struct ntbfab_event);
		ret = 0;
	} else {
		mutex_lock(&nd->lock);
		if (cmd == NTBFAB_IOC_STATE)
			ret = ntbfab_ioc_state(nd, &u.state);
		else if (nd->removed)
			ret = -ENODEV;
		else if (ntbfab_ioc_writes(cmd) && !nf->owner)
			ret = -EPERM;
		else
			ret = ntbfab_ioctl_locked(nf, cmd, &u, arg, &newfile);
		mutex_unlock(&nd->lock);
	}
	if (ret)
		return ret;
	if (newfile) {
		fd = cmd == NTBFAB_IOC_BUF_ALLOC ? &u.buf_alloc.fd : &u.peer_mw_fd.fd;
		ret = get_unused_fd_flags(O_CLOEXEC);
		if (ret < 0) {
			fput(newfile);
			return ret;
		}
		*fd = ret;
		if (copy_to_user(up, &u, size)) {
			put_unused_fd(*fd);
			fput(newfile);
			return -EFAULT;
		}
		fd_install(*fd, newfile);
		return 0;
	}
	if ((_IOC_DIR(cmd) & _IOC_READ) && copy_to_user(up, &u, size))
		return -EFAULT;
	return 0;
}

static const struct file_operations ntbfab_fops = {
	.owner = THIS_MODULE,
	.open = ntbfab_open,
	.release = ntbfab_release,
	.read = ntbfab_read,
	.poll = ntbfab_poll,
	.mmap = ntbfab_mmap,
	.unlocked_ioctl = ntbfab_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

/* ---- sysfs: what udev rules and operators match on ---- */

static struct ntbfab_dev *ntbfab_from_dev(struct device *dev)
{
	struct miscdevice *misc = dev_get_drvdata(dev);

	return container_of(misc, struct ntbfab_dev, misc);
}

static ssize_t ntb_dev_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n", dev_name(&ntbfab_from_dev(dev)->ntb->dev));
}
static DEVICE_ATTR_RO(ntb_dev);

static ssize_t pci_dev_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n", pci_name(ntbfab_from_dev(dev)->ntb->pdev));
}
static DEVICE_ATTR_RO(pci_dev);

static ssize_t hw_driver_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n", dev_driver_string(&ntbfab_from_dev(dev)->ntb->pdev->dev));
}
static DEVICE_ATTR_RO(hw_driver);

static ssize_t port_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", ntb_port_number(ntbfab_from_dev(dev)->ntb));
}
static DEVICE_ATTR_RO(port);

static ssize_t owner_pid_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct ntbfab_dev *nd = ntbfab_from_dev(dev);
	pid_t pid;

	mutex_lock(&nd->lock);
	pid = nd->owner_pid ? pid_vnr(nd->owner_pid) : 0;
	mutex_unlock(&nd->lock);
	return sysfs_emit(buf, "%d\n", pid);
}
static DEVICE_ATTR_RO(owner_pid);

static struct attribute *ntbfab_attrs[] = {
	&dev_attr_ntb_dev.attr,
	&dev_attr_pci_dev.attr,
	&dev_attr_hw_driver.attr,
	&dev_attr_port.attr,
	&dev_attr_owner_pid.attr,
	NULL,
};
ATTRIBUTE_GROUPS(ntbfab);

/* ---- the NTB client ---- */

static int ntbfab_probe(struct ntb_client *client, struct ntb_dev *ntb)
{
	struct ntbfab_dev *nd;
	int pidx, total = 0, ret;

	nd = kzalloc(sizeof(*nd), GFP_KERNEL);
	if (!nd)
		return -ENOMEM;
	ret = ida_alloc_max(&ntbfab_ida, NTBFAB_MAX_DEVS - 1, GFP_KERNEL);
	if (ret < 0) {
		kfree(nd);
		return ret;
	}
	/* from here ntbfab_dev_free() undoes what is set */
	nd->index = ret;
	kref_init(&nd->ref);
	mutex_init(&nd->lock);
	spin_lock_init(&nd->ev_lock);
	INIT_LIST_HEAD(&nd->files);
	INIT_LIST_HEAD(&nd->bufs);
	nd->ntb = ntb;
	nd->peer_count = ntb_peer_port_count(ntb);
	nd->peer_mw_count = ntb_peer_mw_count(ntb);
	nd->spad_count = ntb_spad_count(ntb);
	nd->db_valid = ntb_db_valid_mask(ntb);
	if (ntb_msg_count(ntb) > 0)
		nd->msg_bits = ntb_msg_inbits(ntb) | ntb_msg_outbits(ntb);
	ret = -EINVAL;
	if (nd->peer_count < 1 || nd->peer_count > NTBFAB_MAX_PEERS || nd->peer_mw_count < 0 ||
	    nd->spad_count < 0) {
		dev_err(&ntb->dev, "unsupported NTB: %d peers, %d outbound windows, %d scratchpads\n",
			nd->peer_count, nd->peer_mw_count, nd->spad_count);
		goto err;
	}
	for (pidx = 0; pidx < nd->peer_count; pidx++) {
		nd->mw_count[pidx] = ntb_mw_count(ntb, pidx);
		if (nd->mw_count[pidx] < 0) {
			ret = nd->mw_count[pidx];
			goto err;
		}
		nd->mw_base[pidx] = total;
		total += nd->mw_count[pidx];
	}
	ret = -ENOMEM;
	nd->trans_total = total;
	nd->trans = kcalloc(max(total, 1), sizeof(*nd->trans), GFP_KERNEL);
	nd->otrans = kcalloc(max(nd->peer_mw_count, 1), sizeof(*nd->otrans), GFP_KERNEL);
	nd->spad_written = bitmap_zalloc(max(nd->spad_count, 1), GFP_KERNEL);
	if (!nd->trans || !nd->otrans || !nd->spad_written)
		goto err;
	nd->inode = alloc_anon_inode(ntbfab_mnt->mnt_sb);
	if (IS_ERR(nd->inode)) {
		ret = PTR_ERR(nd->inode);
		nd->inode = NULL;
		goto err;
	}

	ret = ntb_set_ctx(ntb, nd, &ntbfab_ctx_ops);
	if (ret)
		goto err;
	ntbfab_mask_all(nd);

	snprintf(nd->name, sizeof(nd->name), "ntbfab-ntb%d", nd->index);
	nd->misc.minor = MISC_DYNAMIC_MINOR;
	nd->misc.name = nd->name;
	nd->misc.fops = &ntbfab_fops;
	nd->misc.parent = &ntb->dev;
	nd->misc.groups = ntbfab_groups;
	ret = misc_register(&nd->misc);
	if (ret)
		goto err_ctx;
	dev_info(&ntb->dev, "/dev/%s: port %d, %d peer(s), %d outbound window(s), %d scratchpad(s), doorbells %#llx\n",
		 nd->name, ntb_port_number(ntb), nd->peer_count, nd->peer_mw_count,
		 nd->spad_count, nd->db_valid);
	return 0;

err_ctx:
	ntb_clear_ctx(ntb);
err:
	ntbfab_dev_put(nd);
	return ret;
}

static void ntbfab_remove(struct ntb_client *client, struct ntb_dev *ntb)
{
	struct ntbfab_dev *nd = ntb->ctx;
	struct ntbfab_event ev = { .type = NTBFAB_EVENT_REMOVED };
	struct ntbfab_buf *buf;

	misc_deregister(&nd->misc);
	mutex_lock(&nd->lock);
	if (nd->owner)
		ntbfab_undo_owner(nd);
	ntb_clear_ctx(ntb);
	list_for_each_entry(buf, &nd->bufs, node)
		ntbfab_buf_revoke(buf);
	WRITE_ONCE(nd->removed, true);
	spin_lock_irq(&nd->ev_lock);
	ntbfab_deliver(nd, &ev, 0);
	spin_unlock_irq(&nd->ev_lock);
	mutex_unlock(&nd->lock);
	dev_info(&ntb->dev, "/dev/%s removed\n", nd->name);
	ntbfab_dev_put(nd);
}

static struct ntb_client ntbfab_client = {
	.ops = {
		.probe = ntbfab_probe,
		.remove = ntbfab_remove,
	},
};

/* ---- the pseudo file system that gives buffers and devices inodes ---- */

static int ntbfab_init_fs_context(struct fs_context *fc)
{
	return init_pseudo(fc, NTBFAB_FS_MAGIC) ? 0 : -ENOMEM;
}

static struct file_system_type ntbfab_fs_type = {
	.name = "ntbfab_ntb",
	.init_fs_context = ntbfab_init_fs_context,
	.kill_sb = kill_anon_super,
};

static int __init ntbfab_init(void)
{
	int ret;

	ntbfab_mnt = kern_mount(&ntbfab_fs_type);
	if (IS_ERR(ntbfab_mnt))
		return PTR_ERR(ntbfab_mnt);
	ret = ntb_register_client(&ntbfab_client);
	if (ret)
		kern_unmount(ntbfab_mnt);
	return ret;
}
module_init(ntbfab_init);

static void __exit ntbfab_exit(void)
{
	ntb_unregister_client(&ntbfab_client);
	kern_unmount(ntbfab_mnt);
	ida_destroy(&ntbfab_ida);
}
module_exit(ntbfab_exit);

MODULE_DESCRIPTION("ntbfab: NTB devices of the Linux NTB framework as character devices for ntbfabd");
MODULE_LICENSE("GPL");
