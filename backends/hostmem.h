/* backends/hostmem.h: this host's memory as a backend reaches it from user space (host_map,
 * host_bus): a local PCI device's BAR through its sysfs resource file, and the file offset of
 * a process mapping; and a local device's config space and BAR placement through sysfs
 * (cfg_read/cfg_write, dev_bars).
 * Shared by the hardware backends (ivshmem, linux-ntb, dolphin) and the sim. */
#ifndef NTBF_BACKENDS_HOSTMEM_H
#define NTBF_BACKENDS_HOSTMEM_H

#include <stdbool.h>
#include <stdint.h>

struct ntbf_topo;

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

/*
 * Config space of function f of topology device `device`, a device of this host (node; any
 * with NTBF_NONE), through its file DIR/DDDD:BB:DD.F/config (dir "/sys/bus/pci/devices" on a
 * real host), the way Linux offers it to root without going through the driver bound to the
 * function: size 1, 2 or 4 bytes at a naturally aligned offset below 4096, *val read or
 * written. -ENODEV for a function of another node, of no such device, or with no such file;
 * -EINVAL for a bad size or offset; -EIO for a short access (beyond 64 bytes, an
 * unprivileged reader gets none); -errno when the file cannot be opened.
 */
int ntbf__pci_cfg(const char *dir, const struct ntbf_topo *t, uint32_t node, uint32_t device,
                  uint32_t f, bool write, uint32_t off, uint32_t size, uint32_t *val);

/*
 * Where this host's kernel placed the memory BARs of function f of topology device `device`
 * (as ntbf__pci_cfg finds it), from DIR/DDDD:BB:DD.F/resource: addr[b] and size[b] of each
 * memory BAR b, both 0 for an I/O BAR or none. -ENODEV as ntbf__pci_cfg; -errno when the
 * file cannot be read.
 */
int ntbf__pci_bars(const char *dir, const struct ntbf_topo *t, uint32_t node, uint32_t device,
                   uint32_t f, uint64_t addr[6], uint64_t size[6]);

#endif
