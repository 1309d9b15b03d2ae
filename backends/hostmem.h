/* backends/hostmem.h: this host's memory as a backend reaches it from user space (host_map,
 * host_bus): a local PCI device's BAR through its sysfs resource file, and the file offset of
 * a process mapping. Shared by the hardware backends (ivshmem, linux-ntb) and the sim. */
#ifndef NTBF_BACKENDS_HOSTMEM_H
#define NTBF_BACKENDS_HOSTMEM_H

#include <stdint.h>

/*
 * Map [addr, addr + size) of this host's physical address space when it lies in one memory
 * BAR of a PCI device: the BAR is found in ROOT/sys/bus/pci/devices/ * /resource (root ""
 * on a real host, a directory of the same shape in tests) and mapped through its resourceN
 * file. Returns 0 with *out the first byte; -EFAULT when no memory BAR holds the whole range;
 * -EACCES (and others) when the file cannot be opened or mapped (resource files are root's).
 * Undo with ntbf__pci_bar_unmap(*out, size).
 */
int ntbf__pci_bar_map(const char *root, uint64_t addr, uint64_t size, void **out);
int ntbf__pci_bar_unmap(void *addr, uint64_t size);

/*
 * The offset in the file open as fd of [addr, addr + size) of this process, when one mapping
 * of that file (same device and inode, by /proc/self/maps) holds the whole range: *off is
 * the file offset of addr as the kernel reports it (mmap's offset plus addr's distance from
 * the mapping's start). -EFAULT when no mapping of the file holds the range.
 */
int ntbf__maps_file_off(int fd, const void *addr, uint64_t size, uint64_t *off);

#endif
