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

#endif
