/* tests/integration/nvme_drv.h: a small polling NVMe driver for tests and benchmarks: controller
 * bring-up, admin commands, I/O queue pairs, PRP lists. */
#ifndef NTBF_TEST_NVME_DRV_H
#define NTBF_TEST_NVME_DRV_H

#include <stdbool.h>
#include <stdint.h>

#include "nvme.h"

/*
 * The project's NVMe driver is apps/nvme (docs/nvme.md); this one stays for the device model's
 * tests, which do what a driver must not (more commands in flight than the CQ holds, to see the
 * controller wait for room).
 *
 * The driver knows nothing of fabrics: it is given a pointer to the controller's BAR0
 * (wherever it is mapped: through an NTB window or locally) and DMA memory: one range that
 * is contiguous both in this process and in the controller's address space (an IOMMU or the
 * allocator makes it so). Everything the controller reads or writes (queues, PRP lists,
 * data) is carved out of that range. Completions are polled (no interrupts), as the
 * article's userspace driver does (section 6.2). One thread per queue; the admin queue is
 * used by one thread at a time.
 *
 * Functions return 0, a positive NVMe status (SCT << 8 | SC, enum ntbf_nvme_status) when
 * the controller completed the command with an error, or a negative errno: -ETIMEDOUT when
 * no completion arrived in time, -EIO for a controller that reports a fatal status,
 * -EINVAL for requests the driver cannot express (e.g. more than one PRP list page).
 */

/* DMA memory: va[0, size) is dev[0, size) for the controller; carved by a bump allocator. */
struct nvme_dma {
        uint8_t *va;
        uint64_t dev;
        uint64_t size, used;
};

/* Take size bytes aligned to align (a power of two) from d: zeroed, or -ENOMEM. */
int nvme_dma_alloc(struct nvme_dma *d, uint64_t size, uint64_t align, void **va, uint64_t *dev);
/* The controller's address of a pointer inside d. */
uint64_t nvme_dma_addr(const struct nvme_dma *d, const void *va);

/* How a waiter waits: spin for spin_ns, then sleep nap_ns between looks (0: never sleep). */
struct nvme_wait {
        uint32_t timeout_ms;
        uint32_t spin_ns;
        uint32_t nap_ns;
};

struct nvme_queue {
        uint16_t qid;
        uint32_t entries;    /* SQ entries */
        uint32_t cq_entries; /* CQ entries (equal unless nvme_queue_alloc_cq chose) */
        struct ntbf_nvme_sqe *sq;
        volatile struct ntbf_nvme_cqe *cq;
        uint64_t sq_dev, cq_dev;
        uint64_t *prp; /* one PRP list page per SQ slot */
        uint64_t prp_dev;
        volatile uint32_t *sq_db, *cq_db;
        uint32_t sq_tail, sq_head, cq_head;
        uint16_t phase;
        uint16_t next_cid;
        uint64_t stray; /* completions for no command waited on (e.g. CID 0xffff) */
};

struct nvme_ctrl {
        volatile uint8_t *regs;
        struct nvme_dma *dma;
        uint64_t cap;
        struct nvme_wait wait;
        struct nvme_queue admin;
        uint8_t *id; /* a 4 KiB Identify buffer in DMA memory */
        uint64_t id_dev;
        /* From Identify (nvme_ctrl_identify): namespace 1 and the transfer limit. */
        uint64_t nsze;
        uint32_t lba_shift;
        uint64_t max_xfer; /* bytes per command (MDTS, and one PRP list page) */
};

/* Default waiting: 2 s timeout, spin 20 us, then 20 us naps (several drivers can share CPUs). */
void nvme_wait_default(struct nvme_wait *w);

/*
 * Reset the controller (CC.EN = 0, wait for CSTS.RDY = 0), place admin queues of
 * admin_entries in dma, enable it (NVM command set, 4 KiB pages, 64/16-byte entries)
 * and wait for CSTS.RDY. c->wait must be set (nvme_wait_default).
 */
int nvme_ctrl_enable(struct nvme_ctrl *c, volatile void *bar0, struct nvme_dma *dma,
                     uint32_t admin_entries);
/* CC.EN = 0 and wait for CSTS.RDY = 0. */
int nvme_ctrl_disable(struct nvme_ctrl *c);
/* Normal shutdown (CC.SHN = 1) and wait for CSTS.SHST = complete. */
int nvme_ctrl_shutdown(struct nvme_ctrl *c);
/* Identify Controller and Namespace 1, copied to ctrl and ns unless NULL (c->id holds the
 * namespace's data afterwards); fills nsze, lba_shift and max_xfer. */
int nvme_ctrl_identify(struct nvme_ctrl *c, uint8_t ctrl[4096], uint8_t ns[4096]);

/* One Identify command with data into c->id. */
int nvme_identify(struct nvme_ctrl *c, uint8_t cns, uint32_t nsid);

/* Run one admin command and wait for it; its completion in *out (may be NULL). */
int nvme_admin(struct nvme_ctrl *c, struct ntbf_nvme_sqe *cmd, struct ntbf_nvme_cqe *out);

/* Memory of a queue pair of entries entries (SQ, CQ, PRP list pages) from dma. */
int nvme_queue_alloc(struct nvme_dma *dma, uint32_t entries, struct nvme_queue *q);
/* The same with a CQ of its own size. */
int nvme_queue_alloc_cq(struct nvme_dma *dma, uint32_t entries, uint32_t cq_entries,
                        struct nvme_queue *q);
/* Use q as queue pair qid of the controller whose BAR0 is bar0: doorbells, fresh indices. */
void nvme_queue_bind(struct nvme_queue *q, volatile void *bar0, uint16_t qid);
/* Zero the queue memory and indices (before the queue pair is created again). */
void nvme_queue_clear(struct nvme_queue *q);
/* Admin: create the CQ then the SQ of pair qid on memory at sq_dev / cq_dev (polled CQ). */
int nvme_create_qpair(struct nvme_ctrl *c, uint16_t qid, uint32_t entries, uint64_t sq_dev,
                      uint64_t cq_dev);
/* The same with a CQ of cq_entries. */
int nvme_create_qpair_cq(struct nvme_ctrl *c, uint16_t qid, uint32_t entries, uint32_t cq_entries,
                         uint64_t sq_dev, uint64_t cq_dev);
/* Admin: delete the SQ then the CQ of pair qid. */
int nvme_delete_qpair(struct nvme_ctrl *c, uint16_t qid);

/*
 * Fill *cmd for a Read or Write of nlb blocks at slba into the buffer whose controller
 * address is dev (dword aligned; its pages contiguous for the controller), building a PRP
 * list in q's list page for the slot the command will be submitted to. The next
 * nvme_submit on q must submit it.
 */
int nvme_rw_prep(const struct nvme_ctrl *c, struct nvme_queue *q, struct ntbf_nvme_sqe *cmd,
                 uint8_t opc, uint64_t slba, uint32_t nlb, uint64_t dev, uint32_t cdw12_flags);
/* Copy cmd into the SQ with a fresh CID and ring the doorbell. Returns the CID, or -EBUSY. */
int nvme_submit(struct nvme_queue *q, struct ntbf_nvme_sqe *cmd);
/* Wait for the completion of cid (others are consumed and counted as strays). */
int nvme_wait_cid(struct nvme_queue *q, const struct nvme_wait *w, uint16_t cid,
                  struct ntbf_nvme_cqe *out);
/* Take one completion if there is one: 1 with *out filled, 0 if the CQ is empty. */
int nvme_reap(struct nvme_queue *q, struct ntbf_nvme_cqe *out);

/* Read / Write len bytes (a multiple of the block size) at byte pos of namespace 1 through
 * q, data at controller address dev. Submit and wait. */
int nvme_rw(struct nvme_ctrl *c, struct nvme_queue *q, uint8_t opc, uint64_t pos, uint64_t len,
            uint64_t dev);
int nvme_flush(struct nvme_ctrl *c, struct nvme_queue *q);

/* SCT << 8 | SC of a completion (0: success). */
static inline uint16_t nvme_cqe_status(const struct ntbf_nvme_cqe *e)
{
        return (uint16_t)(((e->status >> 9) & 7) << 8 | ((e->status >> 1) & 0xff));
}

#endif
