// SPDX-License-Identifier: GPL-2.0-only
/*
 * ntbfab_mapbench: what one DMA mapping costs through a shadow device's dma_map_ops
 * (ntbfab_shadow: an IOVA of the DMA window, an IOMMU mapping into the window) against the
 * kernel's plain IOMMU path (dma-iommu) of another device, measured side by side at load
 * time (docs/kernel.md, "Figures").  It binds to nothing: it maps a page for each device
 * named, in batches, and logs the median batch's mean cost of dma_map_page() plus
 * dma_unmap_page() as "ntbfab_mapbench: FIGURE NAME VALUE ns".  Loading returns 0 once
 * done; remove it with rmmod.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/gfp.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/sort.h>

#define BATCHES	33

static char *shadow;
module_param(shadow, charp, 0444);
MODULE_PARM_DESC(shadow, "PCI address of a shadow device (its driver may be bound)");

static char *plain;
module_param(plain, charp, 0444);
MODULE_PARM_DESC(plain, "PCI address of a device in a kernel IOMMU DMA domain");

static uint pairs = 2000;
module_param(pairs, uint, 0444);
MODULE_PARM_DESC(pairs, "map+unmap pairs per batch (default 2000)");

static int cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

static struct pci_dev *find(const char *bdf)
{
	unsigned int dom, bus, dev, fn;

	if (!bdf || sscanf(bdf, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
		return NULL;
	return pci_get_domain_bus_and_slot(dom, bus, PCI_DEVFN(dev, fn));
}

/* The median batch's mean ns per map+unmap pair; 0 on a mapping error. */
static u64 measure(struct pci_dev *pdev, struct page *page)
{
	u64 t[BATCHES];
	int b;
	uint i;

	for (b = 0; b < BATCHES; b++) {
		u64 t0 = ktime_get_ns();

		for (i = 0; i < pairs; i++) {
			dma_addr_t a = dma_map_page(&pdev->dev, page, 0, PAGE_SIZE,
						    DMA_BIDIRECTIONAL);

			if (dma_mapping_error(&pdev->dev, a))
				return 0;
			dma_unmap_page(&pdev->dev, a, PAGE_SIZE, DMA_BIDIRECTIONAL);
		}
		t[b] = (ktime_get_ns() - t0) / pairs;
		cond_resched();
	}
	sort(t, BATCHES, sizeof(t[0]), cmp_u64, NULL);
	return t[BATCHES / 2];
}

static int __init mapbench_init(void)
{
	struct pci_dev *s = find(shadow), *p = find(plain);
	struct page *page = alloc_page(GFP_KERNEL);
	u64 ns_shadow = 0, ns_plain = 0;
	int ret = 0;

	if (!s || !p || !page || !pairs) {
		pr_err("give shadow=DDDD:BB:DD.F plain=DDDD:BB:DD.F of two present devices\n");
		ret = -EINVAL;
		goto out;
	}
	/* In turns, so both share the machine's noise. */
	ns_plain = measure(p, page);
	ns_shadow = measure(s, page);
	ns_plain = min(ns_plain, measure(p, page));
	ns_shadow = min(ns_shadow, measure(s, page));
	if (!ns_plain || !ns_shadow) {
		pr_err("a mapping failed (shadow %llu ns, plain %llu ns)\n", ns_shadow, ns_plain);
		ret = -EIO;
		goto out;
	}
	pr_info("FIGURE dmamap_shadow_ns %llu ns\n", ns_shadow);
	pr_info("FIGURE dmamap_plain_iommu_ns %llu ns\n", ns_plain);
	pr_info("FIGURE dmamap_shadow_over_plain %llu.%02llu x\n", ns_shadow / ns_plain,
		ns_shadow * 100 / ns_plain % 100);
out:
	if (page)
		__free_page(page);
	pci_dev_put(s);
	pci_dev_put(p);
	return ret;
}

static void __exit mapbench_exit(void)
{
}

module_init(mapbench_init);
module_exit(mapbench_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("ntbfab: the cost of a DMA map through a shadow device against dma-iommu");
MODULE_AUTHOR("ntbfab");
