/* tests/unit/fake_ntbdev.h: two ntbfab_ntb devices cabled to each other, in this process, for
 * the linux-ntb backend's unit tests (its struct lntb_sys). */
#ifndef NTBF_TEST_FAKE_NTBDEV_H
#define NTBF_TEST_FAKE_NTBDEV_H

#include <stdbool.h>
#include <stdint.h>

#include "lntb.h"

/*
 * What ntbfab_ntb (kernel/ntbfab_ntb.c, its uapi header) does, as far as the backend sees
 * it: one owner per device (a second O_RDWR open is EBUSY), read-only opens, buffers
 * (memfds at made-up DMA addresses aligned to their size), inbound translation (the peer's
 * window maps the translated buffer; an untranslated window maps a page of all ones),
 * window descriptors, doorbells with masks (unmasking a pending bit raises nothing: the
 * backend must), scratchpads, messages, link, and event records on every open file (each
 * a real eventfd, so that epoll works). The owner's close undoes what it set, as the
 * module does.
 *
 * The devices are /dev/ntbfab-ntb0 (PCI 0000:00:03.0) and /dev/ntbfab-ntb1 (0000:00:04.0)
 * under a temporary root with their sysfs attributes; each has one peer (the other), NMW
 * outbound windows of WIN_SIZE at FAKE_BAR + 0x1000000 * (device * NMW + widx), or as
 * fake_ntb_layout says.
 */
#define FAKE_NMW      2
#define FAKE_WIN_SIZE (UINT64_C(1) << 20)
#define FAKE_BAR      UINT64_C(0x800000000)
#define FAKE_DB_VALID UINT64_C(0xf)
#define FAKE_SPADS    16
#define FAKE_MSGS     4

#define FAKE_NMW_MAX 8

/* Where the devices' outbound windows are: window w of device d is win_size bytes at
 * base + d * dev_stride + w * stride (addresses and sizes aligned to win_size). */
struct fake_layout {
        unsigned nmw; /* 1 .. FAKE_NMW_MAX */
        uint64_t win_size, stride, dev_stride, base;
};
/* Before fake_ntb_init; NULL: the default above. */
void fake_ntb_layout(const struct fake_layout *l);

struct fake_counts {
        unsigned opens, owners, bufs, trans;
};

/* Make the devices under a fresh temporary root; the sys table to give the backend. */
const struct lntb_sys *fake_ntb_init(void);
/* Remove the root; every file must be closed. */
void fake_ntb_fini(void);
/* Take the link down or up as the hardware would (both devices see it). */
void fake_ntb_link(bool up);
/* What device d holds now (the module's NTBFAB_IOC_STATE, and what is mapped). */
void fake_ntb_counts(unsigned d, struct fake_counts *c);
/* The translation of device d's inbound window widx: its DMA address (0: none). */
uint64_t fake_ntb_trans(unsigned d, unsigned widx, uint64_t *size);
/* Fail the next count ioctls number req (of any device) with err. */
void fake_ntb_fail(unsigned long req, int err, unsigned count);

#endif
