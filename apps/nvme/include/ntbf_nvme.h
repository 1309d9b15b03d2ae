/* ntbf_nvme.h: a polling NVMe driver core, whatever maps BAR0 and provides DMA memory. */
#ifndef NTBF_NVME_DRIVER_H
#define NTBF_NVME_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvme/nvme_defs.h" /* registers, opcodes, status codes and queue entries */

/*
 * The driver core of the distributed NVMe driver (docs/nvme.md; article 6.2). It is given a
 * pointer to the controller's BAR0, wherever that is mapped (through an NTB window by
 * libsisci, a borrowed device's BAR through the device API, a VFIO region in a guest, the
 * simulated controller's shared memory in a test), and regions of DMA memory: ranges that
 * are contiguous both for this process (va) and for the controller (io, the address the
 * controller uses). Where a region lives (this host's RAM, the lender's RAM, an
 * accelerator's memory next to the controller) is the caller's choice; the core never
 * allocates memory the controller reaches, so the same code runs over every transport.
 *
 * Completions are polled (no interrupts), as the article's driver does. A controller's
 * admin queue is used by one thread; each I/O queue pair by one thread. Queue memory may be
 * remote or device memory: entries are written with aligned 8-byte stores, and the
 * doorbell after them, so PCIe ordering delivers the entry before the doorbell (article
 * 7.4.1).
 *
 * Functions return 0 (or a non-negative value they document), a positive NVMe status
 * (SCT << 8 | SC, enum ntbf_nvme_status) when the controller completed a command with an
 * error, or a negative errno: -ETIMEDOUT when no completion came in time, -EIO when the
 * controller is fatal or nothing answers behind the BAR (reads of all ones: a dead path),
 * -EBUSY when a queue is full, -EINVAL for requests the driver cannot express.
 * ntbf_nvme_strstatus() names any of them.
 */

#define NTBF_NVME_PAGE_SHIFT 12

/* A region of DMA memory: va[0, size) is io[0, size) for the controller. */
struct ntbf_nvme_mem {
        void *va;
        uint64_t io;
        size_t size;
};

/* How a waiter waits: spin spin_ns, then nap nap_ns between looks, give up after timeout_ms. */
struct ntbf_nvme_wait {
        uint32_t timeout_ms;
        uint32_t spin_ns;
        uint32_t nap_ns;
        /* Called on every look while waiting, if set (a test polls a device model here). */
        void (*idle)(void *arg);
        void *idle_arg;
};
/* 2 s, spin 50 us, then 20 us naps: many drivers may share few CPUs. */
void ntbf_nvme_wait_default(struct ntbf_nvme_wait *w);
/* One look of a waiter that started at t0_ns (idle hook, nap): 0, or -ETIMEDOUT when over. */
int ntbf_nvme_wait_step(const struct ntbf_nvme_wait *w, uint64_t t0_ns);

/* Bytes of DMA memory a queue pair of sq_entries / cq_entries needs, each rounded to pages. */
size_t ntbf_nvme_sq_bytes(uint32_t sq_entries);
size_t ntbf_nvme_cq_bytes(uint32_t cq_entries);
/* PRP list pages: one per command that can be outstanding (sq_entries - 1). */
size_t ntbf_nvme_prp_bytes(uint32_t sq_entries);

/* A command of a queue pair, from submission to completion. */
struct ntbf_nvme_slot {
        uint64_t t_submit; /* CLOCK_MONOTONIC ns */
        void *tag;
        uint8_t busy;      /* submitted, no completion reaped yet */
        uint8_t timed_out; /* reported as timed out; a late completion only frees it */
};

/* What a completed (or expired) command reports. */
struct ntbf_nvme_done {
        uint16_t cid;
        int status;   /* 0, NVMe status (> 0) or -ETIMEDOUT */
        uint32_t dw0; /* command specific result */
        uint64_t latency_ns;
        void *tag;
};

/* An I/O or admin queue pair: one SQ paired with one CQ. */
struct ntbf_nvme_qp {
        uint16_t qid;
        uint32_t sq_entries, cq_entries;
        volatile uint64_t *sq; /* sq_entries * 8 qwords */
        volatile struct ntbf_nvme_cqe *cq;
        uint64_t sq_io, cq_io;
        volatile uint32_t *sq_db, *cq_db;
        uint32_t sq_tail, sq_head, cq_head;
        uint16_t phase;
        uint16_t ncids; /* commands that can be outstanding */
        struct ntbf_nvme_slot *slots;
        uint16_t *free_cids, nfree;
        uint8_t *prp; /* one list page per CID, or NULL (then at most two pages) */
        uint64_t prp_io;
        /* Counters. */
        uint64_t submitted, completed, expired, late, stray;
};

/* Namespace geometry a client needs for reads and writes. */
struct ntbf_nvme_ns {
        uint32_t nsid;
        uint64_t nsze;      /* blocks */
        uint32_t lba_shift; /* log2 of the block size */
        uint64_t max_xfer;  /* bytes per command: MDTS and one PRP list page */
};

/* Identify Controller, the fields a tool shows. */
struct ntbf_nvme_ident {
        uint16_t vid, ssvid, cntlid;
        char sn[21], mn[41], fr[9];
        uint8_t mdts;
        uint32_t ver, nn;
        uint8_t sqes, cqes;
        uint16_t oncs;
        uint8_t vwc;
};

struct ntbf_nvme_ctrl {
        volatile uint8_t *regs;
        size_t regs_size;
        uint64_t cap;
        uint32_t vs;
        uint32_t db_stride; /* bytes between doorbells: 4 << CAP.DSTRD */
        uint32_t mqes;      /* entries a queue may have: CAP.MQES + 1 */
        uint64_t ready_ns;  /* how long CSTS.RDY may take to change: CAP.TO */
        struct ntbf_nvme_wait wait;
        struct ntbf_nvme_qp admin; /* when this process owns the admin queues */
        bool admin_up;
        uint8_t *idbuf; /* a 4 KiB page of the admin region for Identify data */
        uint64_t idbuf_io;
        uint32_t io_queues; /* I/O queue pairs the controller granted (Number of Queues) */
        struct ntbf_nvme_ident id;
        struct ntbf_nvme_ns ns;
};

/* ---- the controller ---------------------------------------------------------------------- */

/*
 * Attach to the controller behind bar0 (at least the registers and the doorbells of every
 * queue used): read CAP and VS; change nothing. -EIO if BAR0 reads all ones.
 */
int ntbf_nvme_ctrl_open(struct ntbf_nvme_ctrl *c, volatile void *bar0, size_t bar0_size);
/* Free what the driver holds for the controller (its admin queue state); changes nothing on it. */
void ntbf_nvme_ctrl_close(struct ntbf_nvme_ctrl *c);
/* True unless CSTS reads all ones (the path to the controller is gone) or is fatal. */
bool ntbf_nvme_ctrl_alive(const struct ntbf_nvme_ctrl *c);
/* Bytes of the admin region ntbf_nvme_ctrl_reset needs for admin queues of entries. */
size_t ntbf_nvme_admin_bytes(uint32_t entries);
/*
 * Reset the controller and take its admin queues (the manager, article 6.2): CC.EN = 0 and
 * wait for CSTS.RDY = 0; place admin queues of entries in admin (ntbf_nvme_admin_bytes);
 * enable (NVM command set, 4 KiB pages, round robin, 64/16-byte entries) and wait for
 * CSTS.RDY; Identify the controller and namespace 1; ask for as many I/O queue pairs as
 * the controller has (Number of Queues). Every I/O queue of any host is gone afterwards.
 */
int ntbf_nvme_ctrl_reset(struct ntbf_nvme_ctrl *c, const struct ntbf_nvme_mem *admin,
                         uint32_t entries);
/* CC.EN = 0 and wait for CSTS.RDY = 0. */
int ntbf_nvme_ctrl_disable(struct ntbf_nvme_ctrl *c);
/* Normal shutdown (CC.SHN = 1) and wait for CSTS.SHST = complete. */
int ntbf_nvme_ctrl_shutdown(struct ntbf_nvme_ctrl *c);

/* ---- admin commands (the admin queue's owner only) ---------------------------------------- */

/* Run one admin command and wait for it; its completion in *out (may be NULL). */
int ntbf_nvme_admin(struct ntbf_nvme_ctrl *c, struct ntbf_nvme_sqe *cmd, struct ntbf_nvme_cqe *out);
/* Identify with 4 KiB of data at controller address buf_io (anywhere it can write). */
int ntbf_nvme_identify(struct ntbf_nvme_ctrl *c, uint8_t cns, uint32_t nsid, uint64_t buf_io);
int ntbf_nvme_get_features(struct ntbf_nvme_ctrl *c, uint8_t fid, uint32_t cdw11, uint64_t buf_io,
                           uint32_t *dw0);
int ntbf_nvme_set_features(struct ntbf_nvme_ctrl *c, uint8_t fid, uint32_t cdw11, uint32_t cdw12,
                           uint32_t *dw0);
/* Get Log Page of len bytes (a multiple of 4, at most a page) into buf_io. */
int ntbf_nvme_get_log_page(struct ntbf_nvme_ctrl *c, uint8_t lid, uint32_t nsid, uint32_t len,
                           uint64_t buf_io);
/*
 * Create I/O queue pair qid: the CQ (polled, physically contiguous) at cq_io, then the SQ at
 * sq_io; on a failure of the SQ the CQ is deleted again.
 */
int ntbf_nvme_create_qp(struct ntbf_nvme_ctrl *c, uint16_t qid, uint32_t sq_entries,
                        uint32_t cq_entries, uint64_t sq_io, uint64_t cq_io);
/* Delete the SQ, then the CQ, of pair qid (the controller aborts what the SQ still held). */
int ntbf_nvme_delete_qp(struct ntbf_nvme_ctrl *c, uint16_t qid);

/* Decode Identify data. */
void ntbf_nvme_parse_ident(const uint8_t id[4096], struct ntbf_nvme_ident *out);
/* Namespace geometry from Identify Namespace data and the controller's MDTS. -EIO if odd. */
int ntbf_nvme_parse_ns(const uint8_t id[4096], uint32_t nsid, uint8_t mdts,
                       struct ntbf_nvme_ns *out);

/* ---- queue pairs -------------------------------------------------------------------------- */

/*
 * Use sq (ntbf_nvme_sq_bytes) and cq (ntbf_nvme_cq_bytes) as queue pair qid of the
 * controller with BAR0 bar0 and doorbell stride db_stride; prp (ntbf_nvme_prp_bytes) holds
 * PRP lists, or has va NULL for commands of at most two pages. The memory is zeroed. The
 * controller must be told (ntbf_nvme_create_qp, by whoever owns the admin queue).
 */
int ntbf_nvme_qp_init(struct ntbf_nvme_qp *q, volatile void *bar0, uint32_t db_stride, uint16_t qid,
                      uint32_t sq_entries, const struct ntbf_nvme_mem *sq, uint32_t cq_entries,
                      const struct ntbf_nvme_mem *cq, const struct ntbf_nvme_mem *prp);
void ntbf_nvme_qp_fini(struct ntbf_nvme_qp *q);
/* Forget every outstanding command and start the rings afresh (after the pair is recreated). */
void ntbf_nvme_qp_reset(struct ntbf_nvme_qp *q);
/* Commands submitted and not yet completed or expired. */
unsigned ntbf_nvme_qp_outstanding(const struct ntbf_nvme_qp *q);

/*
 * Submit cmd (its CID is assigned) and ring the SQ doorbell. Returns the CID, or -EBUSY when
 * ncids commands are outstanding.
 */
int ntbf_nvme_qp_submit(struct ntbf_nvme_qp *q, struct ntbf_nvme_sqe *cmd, void *tag);
/*
 * Submit a Read or Write (opc) of nlb blocks at slba of namespace ns, data at controller
 * address buf_io (dword aligned, contiguous for the controller), with a PRP list when it
 * spans more than two pages. cdw12_flags: e.g. NTBF_NVME_RW_FUA. Returns the CID.
 */
int ntbf_nvme_qp_rw(struct ntbf_nvme_qp *q, const struct ntbf_nvme_ns *ns, uint8_t opc,
                    uint64_t slba, uint32_t nlb, uint64_t buf_io, uint32_t cdw12_flags, void *tag);
/* Reap up to max completions into out; returns how many. Never waits. */
int ntbf_nvme_qp_poll(struct ntbf_nvme_qp *q, struct ntbf_nvme_done *out, unsigned max);
/*
 * Report commands outstanding for more than timeout_ns at now_ns as -ETIMEDOUT (up to max).
 * Their CIDs stay taken until a late completion arrives or the pair is reset, so a command
 * the controller might still run is never confused with a new one.
 */
int ntbf_nvme_qp_expire(struct ntbf_nvme_qp *q, uint64_t now_ns, uint64_t timeout_ns,
                        struct ntbf_nvme_done *out, unsigned max);
/* Wait for the completion of cid (completions of other commands are dropped as strays). */
int ntbf_nvme_qp_wait(struct ntbf_nvme_qp *q, const struct ntbf_nvme_wait *w, uint16_t cid,
                      struct ntbf_nvme_done *out);
/* Submit and wait: 0, NVMe status, or -errno. */
int ntbf_nvme_qp_rw_sync(struct ntbf_nvme_qp *q, const struct ntbf_nvme_wait *w,
                         const struct ntbf_nvme_ns *ns, uint8_t opc, uint64_t slba, uint32_t nlb,
                         uint64_t buf_io);
int ntbf_nvme_qp_flush_sync(struct ntbf_nvme_qp *q, const struct ntbf_nvme_wait *w, uint32_t nsid);

/* ---- helpers ------------------------------------------------------------------------------ */

/* SCT << 8 | SC of a completion (0: success). */
static inline int ntbf_nvme_cqe_status(const struct ntbf_nvme_cqe *e)
{
        return ((e->status >> 9) & 7) << 8 | ((e->status >> 1) & 0xff);
}
/* A sentence for 0, an NVMe status (> 0) or a negative errno. */
const char *ntbf_nvme_strstatus(int status);
/* CLOCK_MONOTONIC in ns. */
uint64_t ntbf_nvme_now_ns(void);

#endif
