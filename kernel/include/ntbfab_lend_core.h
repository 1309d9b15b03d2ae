/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * ntbfab_lend_core.h - what ntbfab_shadow gives ntbfab's other kernel
 * frontends (ntbfab_mdev): the daemon's device file /dev/ntbfab-lend (its
 * records and ioctls), the exports of lent devices, and the loopback window.
 * docs/kernel.md describes the design; ntbfab_lend.h the user-space contract.
 *
 * Locking: ntbfab_lend_lock() is the one mutex over exports and their users.
 * A frontend claims and releases an export under it, and the export calls its
 * user's ->gone() under it when it is withdrawn (the lender's daemon withdrew
 * it or died): ->gone() must undo everything the user made in the export's
 * IOMMU domain before it returns, and must not wait for any daemon.
 */
#ifndef _NTBFAB_LEND_CORE_H
#define _NTBFAB_LEND_CORE_H

#include <linux/iommu.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/types.h>

struct ntbfab_lend_file;
struct ntbfab_export;

/**
 * struct ntbfab_lend_frontend - a frontend serving ioctls of /dev/ntbfab-lend.
 * @owner:	its module (held while one of its ioctls runs).
 * @feature:	the NTBFAB_LEND_FEAT_* bit VERSION reports while it is there.
 * @first_nr:	the first ioctl number (_IOC_NR) it serves; numbers from
 *		@first_nr to @last_nr go to @ioctl.
 * @last_nr:	the last.
 * @ioctl:	called without ntbfab_lend_lock(), for a writable file only.
 * @release:	the file is being released (its daemon exited or died); called
 *		before the file's shadows and exports go.
 */
struct ntbfab_lend_frontend {
	struct module *owner;
	u32 feature;
	unsigned int first_nr, last_nr;
	long (*ioctl)(struct ntbfab_lend_file *f, unsigned int cmd, void __user *arg);
	void (*release)(struct ntbfab_lend_file *f);
};

int ntbfab_lend_frontend_register(const struct ntbfab_lend_frontend *fe);
void ntbfab_lend_frontend_unregister(const struct ntbfab_lend_frontend *fe);

/* Queue a record (struct ntbfab_lend_msg) for the file's reader; any context. */
u64 ntbfab_lend_post(struct ntbfab_lend_file *f, u32 kind, u32 id, u32 off, u32 size, u32 val);

void ntbfab_lend_lock(void);
void ntbfab_lend_unlock(void);

/**
 * struct ntbfab_lend_user_ops - what an export's user is told.
 * @irq:	the lender's MSI-X vector @vector fired (process context, from
 *		an irq_work: never inside another eventfd's wakeup).
 * @gone:	the export is withdrawn (ntbfab_lend_lock() held).
 */
struct ntbfab_lend_user_ops {
	void (*irq)(void *ctx, u32 vector);
	void (*gone)(void *ctx);
};

/*
 * With ntbfab_lend_lock() held: take export @id for one user (a shadow device
 * or an mdev instance).  -ENOENT: no such export; -EBUSY: it has a user.
 */
struct ntbfab_export *ntbfab_lend_export_claim(u64 id, const struct ntbfab_lend_user_ops *ops,
					       void *ctx);
/* With ntbfab_lend_lock() held: the user lets go (no ->irq() runs after it). */
void ntbfab_lend_export_release(struct ntbfab_export *ex);
struct pci_dev *ntbfab_lend_export_pdev(struct ntbfab_export *ex);
u32 ntbfab_lend_export_irqs(struct ntbfab_export *ex);
/* The lent device's IOMMU domain (VFIO's, kept alive by the export). */
struct iommu_domain *ntbfab_lend_export_domain(struct ntbfab_export *ex);

/*
 * The loopback window: a BAR through which this host's own RAM is reached
 * (byte at phys + X is RAM byte X); checked once per call.
 */
int ntbfab_lend_window(phys_addr_t *phys, resource_size_t *size);

#endif /* _NTBFAB_LEND_CORE_H */
