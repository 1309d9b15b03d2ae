/* tests/switchtec/model.h: a register-level model of a Switchtec switch's NT partitions. */
#ifndef NTBF_STX_MODEL_H
#define NTBF_STX_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "regs.h"

/*
 * The model acts on a GAS in memory (a file both it and the backend map, MAP_SHARED) the way
 * docs/switchtec.md describes the switch: it watches each NT partition's partition_op,
 * steps the status through LOCKING, CONFIGURING or RESETTING for op_ticks of its ticks,
 * checks a configure's BAR setup, LUT and requester entries, sets bar_error, lut_error and
 * req_id_error, and gives enabled requester entries proxy devfns. It answers MRPC GAS_READ
 * and GAS_WRITE on a Unix seqpacket socket, the shape of /dev/switchtecN.
 *
 * After the GAS (STX_GAS_SIZE) comes the model's own control page: no switch has it. Tests
 * set its faults there, through the file, as a second process would.
 */
#define STXM_CTL         STX_GAS_SIZE
#define STXM_FILE_SIZE   (STX_GAS_SIZE + 4096)
#define STXM_MAGIC       (STXM_CTL + 0x00) /* u64 "STXMODEL" */
#define STXM_OP_TICKS    (STXM_CTL + 0x08) /* ticks a status transition takes (>= 1) */
#define STXM_STUCK       (STXM_CTL + 0x0c) /* STXM_STUCK_*: statuses that never settle */
#define STXM_INJECT_BAR  (STXM_CTL + 0x10) /* a code the next configure sets in bar_error */
#define STXM_INJECT_LUT  (STXM_CTL + 0x14) /* ... lut_error */
#define STXM_INJECT_RID  (STXM_CTL + 0x18) /* ... req_id_error */
#define STXM_PROXIES     (STXM_CTL + 0x1c) /* proxy devfns the switch can give per partition */
#define STXM_BAR_SIZE(b) (STXM_CTL + 0x20 + 8 * (uint64_t)(b)) /* each partition's BAR sizes */
#define STXM_CONFIGS     (STXM_CTL + 0x50) /* configures done (all partitions) */
#define STXM_STOP        (STXM_CTL + 0x54) /* the model's loop returns when set */
#define STXM_OPS_LOG     (STXM_CTL + 0x58) /* the last 8 ops, one per byte (low: newest) */

#define STXM_MAGIC_VAL  UINT64_C(0x4c45444f4d585453) /* "STXMODEL" */
#define STXM_STUCK_CFG  1u
#define STXM_STUCK_LOCK 2u

/* The switch as the model lays it out. */
struct stxm_params {
        uint64_t ep_map;       /* NT partitions */
        uint32_t partition_id; /* the partition of the function the GAS is reached through */
        uint16_t lut_entries;  /* per partition */
        uint16_t rid_size;     /* per partition */
        uint16_t host_rid;     /* the host bridge's requester ID (entry 1; entry 0: 00:00.0) */
        uint32_t xlink_part;   /* a crosslink pair: partition_id's crosslink target (0: none) */
        uint64_t bar_size;     /* each BAR's size */
        /* A BAR set up at format in every NT partition, as a switch's configuration file may
         * set it (lut_count 0: none): LUT entries of 2^lut_log2 bytes at the start of BAR
         * lut_bar, then a direct window of dir_size (0: none). */
        uint32_t lut_bar, lut_count, lut_log2;
        uint64_t dir_size;
};

struct stxm;

/* Lay out a switch in gas (STXM_FILE_SIZE bytes, zeroed). */
void stxm_format(uint8_t *gas, const struct stxm_params *p);
/* Create (or truncate) the file path, map it (MAP_SHARED) and lay a switch out in it: the
 * mapping (STXM_FILE_SIZE bytes), or NULL with errno. */
uint8_t *stxm_create(const char *path, const struct stxm_params *p);
/* A model over gas; NULL when out of memory. */
struct stxm *stxm_new(uint8_t *gas);
void stxm_free(struct stxm *m);
/* One tick: act on each partition's partition_op and advance its transitions. */
void stxm_tick(struct stxm *m);
/* Answer one MRPC command (cmd, in) into out (the return value, then the data): its length. */
size_t stxm_mrpc(struct stxm *m, const uint8_t *in, size_t inlen, uint8_t *out, size_t outcap);
/* Tick every tick_us and serve MRPC on listen_fd (-1: none) until STXM_STOP is set. */
void stxm_run(struct stxm *m, int listen_fd, uint32_t tick_us);

/*
 * A switch's management endpoint in a fake sysfs under root, as the switchtec driver shows
 * it: ROOT/sys/class/switchtec/NAME, its `device` link to the PCI function fn
 * (ROOT/sys/devices/pci0000:00/FN, also listed in ROOT/sys/bus/pci/devices), its `partition`
 * attribute (partition < 0: none), and the function's resource0 a link to gas (NULL: none).
 * Aborts if the tree cannot be made.
 */
void stxm_fake_sysfs(const char *root, const char *name, const char *fn, int partition,
                     const char *gas);

#endif
