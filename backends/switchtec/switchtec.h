/* backends/switchtec/switchtec.h: one NT partition programmed through the switch's GAS. */
#ifndef NTBF_STX_SWITCHTEC_H
#define NTBF_STX_SWITCHTEC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "part.h"

/*
 * The switchtec backend (docs/switchtec.md) programs what Linux's NTB framework does not: an
 * NT partition's BAR setup, its LUT entries, its requester-ID table and the crosslink
 * partition's copy of the proxy IDs, through the switch's GAS. Everything else (CPU maps of
 * the windows, memory for export, doorbells, scratchpads, link, events) belongs to the
 * backend below it: linux-ntb over the kernel's ntb_hw_switchtec, reached through its
 * struct ntbf_backend_ops like any backend. This file is the GAS-level part; the vtable that
 * composes the two is ops.c (peer_xlat_set and rid_add here, the rest passed down,
 * through backends/linux-ntb/lntb.h; docs/switchtec.md).
 *
 * Every change is a partition transaction (part.h): lock, edit, configure, check the error
 * registers, roll back on refusal. What this host programmed is recorded in a file
 * (records) after the switch took it and before it is taken away, so after a crash the
 * read-back at open (stx_reconcile) tells the entries nobody owns from the recorded ones.
 */

struct stx_dev_cfg {
        const char *gas;       /* a file to map (sysfs resource0, the model's file) */
        const char *mrpc;      /* or the management device (/dev/switchtecN, the model's socket) */
        int partition;         /* the NT partition to program; -1: the GAS's partition_id */
        const char *records;   /* the records file; NULL: none (read-only tools) */
        uint32_t lut_reserved; /* LUT entries the lower layer keeps (LUT 0: the shared window) */
        uint32_t rid_reserved; /* requester entries the host's driver keeps (2) */
        struct stx_timing tm;  /* zero: STX_TIMING_DEFAULT */
        /*
         * What stx_reconcile takes as this host's: by default every LUT and requester entry
         * of the partition. A host that programs another host's partition (the switchtec
         * backend writes the LUT entries of its peer's partition that lead into its own
         * memory) sets no_rid, and lut_to_only with lut_to its own partition: the LUT
         * entries to other partitions, and the requester table, are left to their owners.
         * no_lut leaves the whole LUT to others (its own partition's LUT entries, which
         * lead into the peers' memory, are the peers').
         */
        bool no_rid, no_lut;
        bool lut_to_only;
        uint32_t lut_to;
};

/* A recorded entry. */
struct stx_rec {
        char kind; /* 'L' a LUT entry, 'R' a requester entry, 'X' its crosslink copy */
        uint32_t idx;
        uint64_t val;   /* the entry as written (L: the u64, R and X: the RID) */
        uint32_t proxy; /* R: the proxy devfn the switch gave */
};

struct stx_dev {
        struct stx_gas g;
        struct stx_part p;
        pthread_mutex_t mu;
        int partition;
        int xlink; /* the crosslink partition whose table gets the proxy IDs, or -1 */
        uint32_t lut_entries, rid_size, lut_reserved, rid_reserved;
        bool no_rid, no_lut, lut_to_only;
        uint32_t lut_to;
        char records[512];
        struct stx_rec *recs;
        size_t nrecs, caprecs;
};

/* What stx_reconcile found and did. */
struct stx_recon {
        uint32_t stale_lut, stale_rid, restored_lut, restored_rid, kept;
};

/* Open the partition: reach the GAS, find the partition, read the records. why on failure. */
int stx_dev_open(struct stx_dev *d, const struct stx_dev_cfg *cfg, char *why, size_t whylen);
void stx_dev_close(struct stx_dev *d);

/* Read the partition back and make it equal the records: entries this host's records do not
 * name are cleared (what a crash left), recorded ones missing are written again. One
 * transaction. */
int stx_reconcile(struct stx_dev *d, struct stx_recon *out, char *why, size_t whylen);

/* BAR setup: lut_count LUT entries of 2^lut_log2 bytes at the BAR's start, then a direct
 * window of dir_size (0: none). */
int stx_bar_setup(struct stx_dev *d, uint32_t bar, uint32_t lut_count, unsigned lut_log2,
                  uint64_t dir_size, char *why, size_t whylen);
/* LUT entry idx translates to addr in partition dest. */
int stx_lut_set(struct stx_dev *d, uint32_t idx, uint64_t addr, uint32_t dest, char *why,
                size_t whylen);
int stx_lut_clear(struct stx_dev *d, uint32_t idx, char *why, size_t whylen);
/* Let requester rid through the partition: *proxy gets the devfn the switch gave it (the ID
 * the far side sees: its bus, this devfn). With a crosslink partition, its table gets the
 * proxy ID too. */
int stx_rid_add(struct stx_dev *d, uint16_t rid, uint32_t *proxy, char *why, size_t whylen);
int stx_rid_del(struct stx_dev *d, uint16_t rid, char *why, size_t whylen);
/* Whether this host's records name requester rid (*proxy its proxy devfn). */
bool stx_rid_recorded(struct stx_dev *d, uint16_t rid, uint32_t *proxy);

/*
 * Where the switch of an NT function is, from sysfs (find.c): the switchtec driver publishes
 * each management endpoint as /sys/class/switchtec/switchtecN, whose `device` link is its PCI
 * function. The one that is the NT function itself (Linux's ntb_hw_switchtec drives the NTB
 * through the management endpoint), else the one that is another function of the same device,
 * owns it. root prefixes every path ("" on a real host; a fake tree in tests). 0 with *out
 * filled, or -ENOENT (none), -EEXIST (more than one), -EINVAL (no usable bdf), with a
 * sentence naming what was looked at and saying to set gas.
 */
struct stx_found {
        char name[64];     /* switchtecN */
        char function[32]; /* the management function, DDDD:BB:DD.F */
        char gas[256];     /* ROOT/sys/bus/pci/devices/FUNCTION/resource0 */
        char device[256];  /* ROOT/dev/switchtecN */
        int partition;     /* its `partition` attribute; -1: not readable */
};
int stx_find_switch(const char *root, const char *ntb_bdf, struct stx_found *out, char *why,
                    size_t whylen);

/* Crash points (part.h, stx_crash_point): "lut-programmed" and "rid-programmed" (the switch
 * took the entry, the records do not name it yet), "lut-unrecorded" and "rid-unrecorded"
 * (the records dropped it, the switch still has it). */

#endif
