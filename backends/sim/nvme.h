/* backends/sim/nvme.h: the simulated NVMe controller: its BAR0 layout, its own choices of
 * CAP, VS and Identify values, and the behaviour a driver writer should know. The
 * specification's registers, commands and queue entries: include/nvme/nvme_defs.h.
 */
#ifndef NTBF_SIM_NVME_H
#define NTBF_SIM_NVME_H

#include <stdint.h>

#include "nvme/nvme_defs.h" /* the specification's definitions */

/*
 * BAR0 of the simulated controller (16 KiB, 64-bit, non-prefetchable):
 *   0x0000 controller registers (below)
 *   0x1000 doorbells, CAP.DSTRD = 0: SQ y tail at 0x1000 + 8y, CQ y head at 0x1000 + 8y + 4
 *          (1024 queue pairs fit below 0x3000; sim.queues of them exist)
 *   0x3000 MSI-X table (when sim.msix > 0; at most NTBF_NVME_MSIX_MAX vectors, more are clamped)
 *   0x3800 MSI-X PBA
 * BAR2 (when sim.cmb > 0): the Controller Memory Buffer, usable for SQs, CQs, PRP lists and
 * data (CMBSZ SQS/CQS/LISTS/RDS/WDS). CAP.CMBS = 1 as NVMe 1.4 defines it: CMBLOC and CMBSZ
 * read 0 until the host sets CMBMSC.CRE. The controller recognizes addresses in its own BAR2
 * range (or [CMBMSC.CBA, +size) once CMBMSC.CMSE is set) and accesses them directly, which is
 * what a peer-to-peer request routed back to its own BAR would reach.
 *
 * Behaviour a driver writer should know (decisions not dictated by the specification):
 * - CAP: MQES 4095 (4096 entries), CQR 1, AMS round robin only, TO 10 s, DSTRD 0, CSS NVM,
 *   MPSMIN = MPSMAX = 4 KiB, NSSRS 0 (no NVM subsystem reset). VS 1.4.0.
 * - Enabling with CC.CSS != NVM, CC.MPS != 0, CC.AMS != 0 or an admin queue of fewer than 2
 *   entries sets CSTS.CFS (controller fatal) instead of CSTS.RDY; so does a restart of the
 *   device host process while the controller was enabled (queue state is lost). CC.EN = 0
 *   recovers. CSS, MPS and AMS are taken when EN goes to 1; IOSQES/IOCQES are checked when
 *   an I/O queue is created.
 * - The controller fetches no commands while the function's Bus Master Enable is clear or
 *   while a shutdown is complete (CSTS.SHST = 2); commands wait in their queues.
 * - Arbitration: round robin over the admin SQ and then the I/O SQs (the start rotates), at
 *   most 2^AB commands per SQ per round (Arbitration feature; default AB = RAB = 3, i.e. 8);
 *   one round per poll. A command is fetched only when its CQ has a free slot.
 * - Completions: dwords 0-2 are written first, then dword 3 (CID, phase, status) alone.
 *   MSI-X: one message per CQ per poll round in which entries were posted, subject to the
 *   Interrupt Coalescing feature for I/O CQs (THR/TIME, Interrupt Vector Configuration CD).
 *   Without MSI-X (sim.msix 0, or MSI-X disabled) nothing is delivered: INTx and MSI never
 *   cross an NTB. INTMS/INTMC: INTMS reads the mask; INTMC reads 0 once the controller has
 *   applied a write (a register in plain shared memory cannot be written and keep the mask).
 * - Queue creation: PRP1 must be 4 KiB aligned (else Invalid PRP Offset); CC.IOSQES must be
 *   6 and CC.IOCQES 4 (else Invalid Field in Command); the interrupt vector is checked
 *   against the MSI-X table size (0 only without MSI-X) whether IEN is set or not.
 * - Data: PRPs only (PSDT != 0 and fused commands: Invalid Field). A PRP entry with a non-zero
 *   offset where one must be page aligned, or PRP1/PRP2 not dword aligned: Invalid PRP Offset.
 *   A chained PRP list pointer (last entry of a list page) must be page aligned.
 * - A failed SQE fetch completes with CID 0xffff and Data Transfer Error (and an error log
 *   entry); a failed data transfer completes with Data Transfer Error; a failed backing-file
 *   access with Unrecovered Read Error / Write Fault (counted as media errors).
 * - Flush and shutdown fdatasync the namespace file; with the volatile write cache disabled
 *   (feature 0x06) or FUA set, a write is fdatasync'ed before it completes.
 * - Admin data transfers (Identify, Get Log Page) are limited to MDTS, or to 1 MiB with
 *   MDTS 0. Get Log Page returns zeros past the end of a log; an offset past the end or not
 *   dword aligned is Invalid Field. Supported logs: Error Information (64 entries, newest
 *   first), SMART / Health (controller-wide: NSID must be 0 or 0xffffffff), Firmware Slot.
 * - Asynchronous Event Requests are accepted (up to AERL + 1 = 4) and held; the model raises
 *   no asynchronous events. Abort always answers "not aborted" (commands complete in one poll).
 * - Features: Arbitration, Power Management (PS 0 only), Temperature Threshold (composite
 *   sensor), Error Recovery, Volatile Write Cache, Number of Queues, Interrupt Coalescing,
 *   Interrupt Vector Configuration, Write Atomicity Normal, Async Event Configuration. None
 *   is saveable (SV: Feature Identifier Not Saveable); SEL 2 returns the default.
 * - Identify: SN is "NTBF" + 16 hex digits of a hash of node name, device name and function;
 *   MN "ntbfab simulated NVMe"; FR NTBF_NVME_FR; CNTLID = function index; one namespace
 *   (NN 1) with one LBA format; NGUID from the same hash; CNS 0, 1, 2, 3 supported.
 * - SMART: temperature a constant 313 K; power cycles = creations + resets of the model;
 *   unsafe shutdowns = resets while enabled without a completed shutdown; busy time counts
 *   polls that processed I/O commands. Counters live in the model (lost with the process).
 */

/* The model's own choices (BAR0 layout beyond the registers, CAP, VS and Identify values). */
#define NTBF_NVME_MSIX_TABLE 0x3000
#define NTBF_NVME_MSIX_PBA   0x3800
#define NTBF_NVME_MSIX_MAX   128
#define NTBF_NVME_BAR0_SIZE  0x4000
#define NTBF_NVME_MAX_QUEUES 1024 /* queue pairs that fit the doorbell area */

#define NTBF_NVME_MQES 4095u /* CAP.MQES, 0's based */
#define NTBF_NVME_TO   20u   /* CAP.TO in 500 ms units */
#define NTBF_NVME_VS   0x00010400u
#define NTBF_NVME_RAB  3u /* recommended arbitration burst: 2^3 commands */
#define NTBF_NVME_ELPE 63u
#define NTBF_NVME_AERL 3u
#define NTBF_NVME_ACL  3u
#define NTBF_NVME_FR   "0.1.0"
#define NTBF_NVME_MN   "ntbfab simulated NVMe"

#endif
