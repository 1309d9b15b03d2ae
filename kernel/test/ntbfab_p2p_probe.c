// SPDX-License-Identifier: GPL-2.0-only
/*
 * ntbfab_p2p_probe: the kernel tier's probe of peer-to-peer mappings (tests/shadow,
 * docs/kernel.md "Peer-to-peer").  Loaded with dev=DOMAIN:BUS:DEV.FN phys=ADDR size=LEN,
 * it calls dma_map_resource() for that device as a driver would before pointing its DMA
 * at another device's BAR, and tells the address it got in the read-only parameter addr
 * (all ones: the mapping failed) and in the kernel log.  The mapping is undone at once.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/module.h>
#include <linux/pci.h>

static char *dev;
module_param(dev, charp, 0400);
MODULE_PARM_DESC(dev, "the device that maps (DOMAIN:BUS:DEV.FN)");

static unsigned long long phys;
module_param(phys, ullong, 0400);
MODULE_PARM_DESC(phys, "the physical address of the other device's BAR");

static unsigned long long size = PAGE_SIZE;
module_param(size, ullong, 0400);
MODULE_PARM_DESC(size, "the length mapped");

static unsigned long long addr = DMA_MAPPING_ERROR;
module_param(addr, ullong, 0444);
MODULE_PARM_DESC(addr, "out: the address dma_map_resource() returned (all ones: it failed)");

static int __init probe_init(void)
{
	unsigned int dom, bus, slot, fn;
	struct pci_dev *pdev;
	dma_addr_t a;

	if (!dev || sscanf(dev, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4) {
		pr_err("dev=DOMAIN:BUS:DEV.FN names the device\n");
		return -EINVAL;
	}
	pdev = pci_get_domain_bus_and_slot(dom, bus, PCI_DEVFN(slot, fn));
	if (!pdev) {
		pr_err("no PCI device %s\n", dev);
		return -ENODEV;
	}
	a = dma_map_resource(&pdev->dev, phys, size, DMA_BIDIRECTIONAL, 0);
	if (dma_mapping_error(&pdev->dev, a)) {
		addr = DMA_MAPPING_ERROR;
		pr_info("dma_map_resource(%s, 0x%llx, 0x%llx) failed\n", dev, phys, size);
	} else {
		addr = a;
		pr_info("dma_map_resource(%s, 0x%llx, 0x%llx) = 0x%llx\n", dev, phys, size, addr);
		dma_unmap_resource(&pdev->dev, a, size, DMA_BIDIRECTIONAL, 0);
	}
	pci_dev_put(pdev);
	return 0;
}

static void __exit probe_exit(void)
{
}

module_init(probe_init);
module_exit(probe_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("ntbfab test: dma_map_resource() of a device, for the kernel tier");
MODULE_AUTHOR("ntbfab");
