/* daemon/kern.h: the kernel frontend: borrowed devices as shadow devices in this kernel. */
#ifndef NTBF_DAEMON_KERN_H
#define NTBF_DAEMON_KERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc.h"

struct ntbf__d;
struct ntbf__borrow;
struct json_object;

/*
 * `ntbfab borrow --attach` hands a borrow to the kernel module ntbfab_shadow through
 * /dev/ntbfab-lend (kernel/include/uapi/ntbfab_lend.h, docs/kernel.md): the module hot-adds
 * a shadow device that the kernel's own driver binds to. The borrow itself is the ordinary
 * one (the manager admits and programs it); this file adds what the kernel needs:
 *
 *  - attach: the device's config space from the lender (peer `cfg` op `dump`), the lender's
 *    export of the device (peer `kexport`: loopback lending, where lender and borrower are
 *    one kernel, the only kind version 1 of the module knows), then NTBFAB_LEND_IOC_ATTACH;
 *  - config writes the driver makes arrive as records on the device file and are forwarded
 *    to the lender (peer `cfg` op `w`), whose answer (the dword after the write) goes back
 *    into the module's copy;
 *  - detach (return, or the daemon stopping): NTBFAB_LEND_IOC_DETACH, which unbinds the
 *    driver, then the lender's export is withdrawn (peer `kunexport`) and the borrow ends;
 *    a lost device is detached as a surprise removal.
 *
 * The file stays open for the daemon's life: when the daemon dies, the kernel closes it and
 * the module surprise-removes every shadow device of it (nobody would forward its config
 * writes). The borrow records keep `attached`; a restarted daemon attaches them again.
 */

/* Whether the module is there: opens /dev/ntbfab-lend once; why says what to do if not. */
int ntbf__kern_open(struct ntbf__d *d, char *why, size_t whylen);
/* At exit, after the loop: closing the file surprise-removes what is still attached. */
void ntbf__kern_close(struct ntbf__d *d);

/* Attach borrow b (recorded, not attached); cb once: 0, or the error and a sentence. */
void ntbf__kern_attach(struct ntbf__d *d, struct ntbf__borrow *b, ntbf__done_fn cb, void *arg);
/* Detach b if attached (surprise: the device is gone); the lender's export is withdrawn. */
void ntbf__kern_detach(struct ntbf__d *d, struct ntbf__borrow *b, bool surprise);
/* After a restart: attach again the borrows recorded as attached. */
void ntbf__kern_resume(struct ntbf__d *d);

/* The lender's side (peer requests kexport, kunexport). */
void ntbf__kern_export(struct ntbf__d *d, uint32_t from, struct json_object *p, ntbf__done_fn cb,
                       void *arg);
void ntbf__kern_unexport(struct ntbf__d *d, uint32_t from, struct json_object *p, ntbf__done_fn cb,
                         void *arg);

/* The device file (-1: not open) and this kernel's boot id, for kmdev.c. */
int ntbf__kern_fd(struct ntbf__d *d);
const char *ntbf__kern_boot_id(struct ntbf__d *d);
/* A lender's `cfg` dump answer into cfg (n: 256 or 4096 bytes); else an error and msg. */
int ntbf__kern_cfg_parse(struct json_object *res, uint8_t cfg[4096], uint32_t *n, const char **msg);

/*
 * VM pass-through (kmdev.c, ntbfab_mdev, docs/kernel.md): the module offers one mdev type per
 * device of this node's pool (the devices of the other nodes) and asks the daemon with
 * records: DESCRIBE when a VMM opens an instance (the lender's config space, read before any
 * borrow), BORROW when the guest enables bus mastering (an ordinary exclusive borrow, the
 * lender's export, the low and high DMA windows of the guest's memory as the module found
 * it), CFG_WRITE while borrowed (to the lender, as a shadow device's), RETURN when the guest
 * or the VM lets go (the export withdrawn, the borrow returned).
 */
struct ntbfab_lend_msg;
struct ntbfab_lend_mdev_range;
struct ntbfab_lend_mdev_window;
void ntbf__kmdev_msg(struct ntbf__d *d, const struct ntbfab_lend_msg *m);
/* Borrow b of an instance is gone here (lost lease, daemon stopping): the export goes, and
 * the module removes the device from the guest. */
void ntbf__kmdev_lost(struct ntbf__d *d, struct ntbf__borrow *b);
/* At start: the pool is named again if the module serves VMs (a restart takes over its
 * instances). */
void ntbf__kmdev_start(struct ntbf__d *d);
/* Operators (RPC mdev.*): 0 and *out, or an error and why. */
int ntbf__kmdev_list(struct ntbf__d *d, struct json_object **out, char *why, size_t whylen);
int ntbf__kmdev_create(struct ntbf__d *d, uint32_t fdid, const char *uuid, struct json_object **out,
                       char *why, size_t whylen);
int ntbf__kmdev_remove(struct ntbf__d *d, const char *uuid, char *why, size_t whylen);
/* Name this node's pool to the module (creating its mdev parent); why says what failed. */
int ntbf__kmdev_pool(struct ntbf__d *d, char *why, size_t whylen);

/*
 * The DMA windows of a guest's memory (article 5.2): the ranges the module pinned (ascending,
 * disjoint, page aligned) split at 4 GiB, each window spanning its side's ranges, aligned out
 * to align (a power of two). 0, or -EINVAL (ranges out of order or overlapping, none at all),
 * -ERANGE (a window would pass limit, the device's reach).
 */
int ntbf__kmdev_windows(const struct ntbfab_lend_mdev_range *r, uint32_t n, uint64_t align,
                        uint64_t limit, struct ntbfab_lend_mdev_window *w);

#endif
