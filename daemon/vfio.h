/* daemon/vfio.h: the daemon's real devices (vfio: true): binding, holding, lending to clients. */
#ifndef NTBF_DAEMON_VFIO_H
#define NTBF_DAEMON_VFIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ntbf__d;
struct ntbf__handle;
struct ntbf__rpc_call;
struct ntbf_topo;
struct json_object;

/*
 * A device with `vfio: true` in the cluster file is a real PCIe device of its node. The
 * daemon takes it (binds it to vfio-pci and opens its container, group and device fds)
 * when it is lent or opened, holds it as long as it is lent or has open handles, and gives
 * it back to its previous driver when neither is left (docs/vm.md, docs/device-api.md).
 *
 * Each device.open handle gets the container and device fds (SCM_RIGHTS, docs/rpc.md) and
 * a share of the IOVA space of the device's container; when the handle closes (or its
 * connection does: the process died), the daemon unmaps everything in that share, so a
 * client that dies loses its DMA mappings and nothing else.
 *
 * Paths are under $NTBFAB_VFIO_ROOT when it is set (tests run the daemon against a fake
 * sysfs tree; the fds themselves need the real /dev/vfio).
 */

/* Whether topology device dev is a real device (vfio: true). */
bool ntbf__vfiod_is(const struct ntbf__d *d, uint32_t dev);
/* Whether the host's kernel, not the cluster file, places the BARs of topology device dev: a
 * device driven through VFIO, or any device of a backend that reaches its hosts' own PCI
 * functions (dev_bars: linux-ntb, switchtec). Its lender then tells the manager where they are
 * (ntbf__vfiod_bars), and the manager programs those addresses. */
bool ntbf__bars_host_placed(const struct ntbf_topo *t, uint32_t dev);

/* Start: take the devices this node lends (from the cluster file or its database). */
void ntbf__vfiod_start(struct ntbf__d *d);
/* Stop: close every fd; devices that are not lent go back to their drivers. */
void ntbf__vfiod_stop(struct ntbf__d *d);

/* device.lend of a real device: take it (force: unbind its kernel driver first). */
int ntbf__vfiod_lend(struct ntbf__d *d, uint32_t dev, uint32_t fn, bool force, char *why,
                     size_t whylen);
/* The lent function's memory BARs for the manager, where the kernel placed them (a device
 * whose BARs its host places, above; through the backend's dev_bars when it is not VFIO's):
 * [{bar, addr, size}] (sizes as the cluster file gives them, which they must match); NULL with
 * a sentence in why if sysfs cannot tell or disagrees with the file. */
struct json_object *ntbf__vfiod_bars(struct ntbf__d *d, uint32_t dev, uint32_t fn, char *why,
                                     size_t whylen);
/* The lend failed or was undone: give the device back unless handles hold it. */
void ntbf__vfiod_unlend(struct ntbf__d *d, uint32_t dev, uint32_t fn);

/* device.open of a real device: take it if needed and give handle h an IOVA share. */
int ntbf__vfiod_open(struct ntbf__d *d, struct ntbf__handle *h, char *why, size_t whylen);
/* Answer device.open for h with the fds (answer is open_json's; taken). */
void ntbf__vfiod_answer(struct ntbf__d *d, struct ntbf__rpc_call *call, struct ntbf__handle *h,
                        struct json_object *answer);
/* h closes (or its connection went away): unmap its share, give the device back if unused. */
void ntbf__vfiod_close(struct ntbf__d *d, struct ntbf__handle *h);

/* Config space of a held real device through the daemon's fd (NTBF_ENOTFOUND: not held). */
int ntbf__vfiod_cfg(struct ntbf__d *d, uint32_t dev, uint32_t fn, bool write, uint32_t off,
                    uint32_t size, uint32_t *val);

/*
 * Loopback lending (daemon/kern.c): the device is borrowed by a shadow device of this very
 * kernel. kexport holds an IOVA share of the device's domain for the borrow's DMA window and
 * makes every MSI-X vector signal an eventfd of its own, and fills what the module's
 * NTBFAB_LEND_IOC_EXPORT takes (kx.fds is the device's until kexport_set, which records the
 * module's export id and closes them: VFIO and the module hold the eventfds). If the device
 * is exported already, only kx.export_id is filled. kunexport undoes it (vectors signal
 * nothing again, the share is free, the device is reset).
 */
struct ntbf__vfiod_kx {
        char bdf[16];
        int group_fd;
        uint32_t nirqs;
        int *fds;
        uint64_t iova_base, iova_size;
        uint64_t export_id;
};
int ntbf__vfiod_kexport(struct ntbf__d *d, uint32_t dev, uint32_t fn, struct ntbf__vfiod_kx *kx,
                        char *why, size_t whylen);
void ntbf__vfiod_kexport_set(struct ntbf__d *d, uint32_t dev, uint32_t fn, uint64_t id);
uint64_t ntbf__vfiod_kexport_id(struct ntbf__d *d, uint32_t dev, uint32_t fn);
/* The sizes of a held device's six BARs, as VFIO reports them; false: not held. */
bool ntbf__vfiod_bar_sizes(struct ntbf__d *d, uint32_t dev, uint32_t fn, uint64_t sizes[6]);
void ntbf__vfiod_kunexport(struct ntbf__d *d, uint32_t dev, uint32_t fn);

#endif
