/* include/nvme/nvme_defs.h: NVMe 1.4 definitions (registers, commands, status codes, queue
 * entries, Identify and log page layouts) shared by the simulated controller
 * (backends/sim/nvme.c) and the distributed NVMe driver (apps/nvme). Facts of the
 * specification only: what a particular controller chooses lives with it. Not installed.
 */
#ifndef NTBF_NVME_DEFS_H
#define NTBF_NVME_DEFS_H

#include <stdint.h>

#define NTBF_NVME_PAGE 4096u

/* Controller registers (offsets in BAR0). */
#define NTBF_NVME_REG_CAP    0x00 /* 64-bit */
#define NTBF_NVME_REG_VS     0x08
#define NTBF_NVME_REG_INTMS  0x0c
#define NTBF_NVME_REG_INTMC  0x10
#define NTBF_NVME_REG_CC     0x14
#define NTBF_NVME_REG_CSTS   0x1c
#define NTBF_NVME_REG_NSSR   0x20
#define NTBF_NVME_REG_AQA    0x24
#define NTBF_NVME_REG_ASQ    0x28 /* 64-bit */
#define NTBF_NVME_REG_ACQ    0x30 /* 64-bit */
#define NTBF_NVME_REG_CMBLOC 0x38
#define NTBF_NVME_REG_CMBSZ  0x3c
#define NTBF_NVME_REG_CMBMSC 0x50 /* 64-bit */
#define NTBF_NVME_REG_CMBSTS 0x58
#define NTBF_NVME_REG_DBS    0x1000
#define NTBF_NVME_SQ_TDBL(y) (NTBF_NVME_REG_DBS + 8 * (y))
#define NTBF_NVME_CQ_HDBL(y) (NTBF_NVME_REG_DBS + 8 * (y) + 4)

#define NTBF_NVME_CAP_MQES(c)   ((uint32_t)((c)&0xffff))
#define NTBF_NVME_CAP_CQR       (UINT64_C(1) << 16)
#define NTBF_NVME_CAP_TO(c)     ((uint32_t)(((c) >> 24) & 0xff))
#define NTBF_NVME_CAP_DSTRD(c)  ((uint32_t)(((c) >> 32) & 0xf))
#define NTBF_NVME_CAP_CSS_NVM   (UINT64_C(1) << 37)
#define NTBF_NVME_CAP_MPSMIN(c) ((uint32_t)(((c) >> 48) & 0xf))
#define NTBF_NVME_CAP_MPSMAX(c) ((uint32_t)(((c) >> 52) & 0xf))
#define NTBF_NVME_CAP_CMBS      (UINT64_C(1) << 57)

#define NTBF_NVME_CC_EN          0x1u
#define NTBF_NVME_CC_CSS(c)      (((c) >> 4) & 0x7)
#define NTBF_NVME_CC_MPS(c)      (((c) >> 7) & 0xf)
#define NTBF_NVME_CC_AMS(c)      (((c) >> 11) & 0x7)
#define NTBF_NVME_CC_SHN(c)      (((c) >> 14) & 0x3)
#define NTBF_NVME_CC_IOSQES(c)   (((c) >> 16) & 0xf)
#define NTBF_NVME_CC_IOCQES(c)   (((c) >> 20) & 0xf)
#define NTBF_NVME_CC_SHN_NORMAL  (1u << 14)
#define NTBF_NVME_CC_SHN_ABRUPT  (2u << 14)
#define NTBF_NVME_CC_IOSQES_64   (6u << 16)
#define NTBF_NVME_CC_IOCQES_16   (4u << 20)
#define NTBF_NVME_CSTS_RDY       0x1u
#define NTBF_NVME_CSTS_CFS       0x2u
#define NTBF_NVME_CSTS_SHST_MASK 0xcu
#define NTBF_NVME_CSTS_SHST_DONE 0x8u
#define NTBF_NVME_CMBMSC_CRE     0x1u
#define NTBF_NVME_CMBMSC_CMSE    0x2u
#define NTBF_NVME_CMBSTS_CBAI    0x1u

/* Admin opcodes. */
#define NTBF_NVME_ADM_DELETE_SQ    0x00
#define NTBF_NVME_ADM_CREATE_SQ    0x01
#define NTBF_NVME_ADM_GET_LOG_PAGE 0x02
#define NTBF_NVME_ADM_DELETE_CQ    0x04
#define NTBF_NVME_ADM_CREATE_CQ    0x05
#define NTBF_NVME_ADM_IDENTIFY     0x06
#define NTBF_NVME_ADM_ABORT        0x08
#define NTBF_NVME_ADM_SET_FEATURES 0x09
#define NTBF_NVME_ADM_GET_FEATURES 0x0a
#define NTBF_NVME_ADM_ASYNC_EVENT  0x0c
/* NVM command set opcodes. */
#define NTBF_NVME_CMD_FLUSH        0x00
#define NTBF_NVME_CMD_WRITE        0x01
#define NTBF_NVME_CMD_READ         0x02
#define NTBF_NVME_CMD_WRITE_ZEROES 0x08
#define NTBF_NVME_RW_FUA           (1u << 30) /* CDW12 */

/* Identify CNS values. */
#define NTBF_NVME_CNS_NS        0x00
#define NTBF_NVME_CNS_CTRL      0x01
#define NTBF_NVME_CNS_ACTIVE_NS 0x02
#define NTBF_NVME_CNS_NS_DESC   0x03

/* Feature identifiers. */
#define NTBF_NVME_FEAT_ARBITRATION  0x01
#define NTBF_NVME_FEAT_POWER_MGMT   0x02
#define NTBF_NVME_FEAT_TEMP_THRESH  0x04
#define NTBF_NVME_FEAT_ERR_RECOVERY 0x05
#define NTBF_NVME_FEAT_VOLATILE_WC  0x06
#define NTBF_NVME_FEAT_NUM_QUEUES   0x07
#define NTBF_NVME_FEAT_IRQ_COALESCE 0x08
#define NTBF_NVME_FEAT_IRQ_CONFIG   0x09
#define NTBF_NVME_FEAT_WRITE_ATOMIC 0x0a
#define NTBF_NVME_FEAT_ASYNC_EVENT  0x0b

/* Log page identifiers and sizes. */
#define NTBF_NVME_LOG_ERROR    0x01
#define NTBF_NVME_LOG_SMART    0x02
#define NTBF_NVME_LOG_FW_SLOT  0x03
#define NTBF_NVME_ERROR_ENTRY  64
#define NTBF_NVME_SMART_SIZE   512
#define NTBF_NVME_FW_SLOT_SIZE 512

/*
 * Status codes as (SCT << 8 | SC). In a completion the status field is
 * SC << 1 | SCT << 9 | DNR << 15 (bit 0 is the phase tag).
 */
#define NTBF_NVME_SCT(s) (((s) >> 8) & 0x7)
#define NTBF_NVME_SC(s)  ((s)&0xff)
enum ntbf_nvme_status {
        NTBF_NVME_SC_SUCCESS = 0x000,
        NTBF_NVME_SC_INVALID_OPCODE = 0x001,
        NTBF_NVME_SC_INVALID_FIELD = 0x002,
        NTBF_NVME_SC_DATA_XFER_ERROR = 0x004,
        NTBF_NVME_SC_INTERNAL = 0x006,
        NTBF_NVME_SC_INVALID_NS = 0x00b,
        NTBF_NVME_SC_CMD_SEQ_ERROR = 0x00c,
        NTBF_NVME_SC_INVALID_PRP_OFFSET = 0x013,
        NTBF_NVME_SC_LBA_RANGE = 0x080,
        /* command specific (SCT 1) */
        NTBF_NVME_SC_CQ_INVALID = 0x100,
        NTBF_NVME_SC_INVALID_QID = 0x101,
        NTBF_NVME_SC_INVALID_QSIZE = 0x102,
        NTBF_NVME_SC_AER_LIMIT = 0x105,
        NTBF_NVME_SC_INVALID_IV = 0x108,
        NTBF_NVME_SC_INVALID_LOG_PAGE = 0x109,
        NTBF_NVME_SC_INVALID_QUEUE_DELETION = 0x10c,
        NTBF_NVME_SC_FEATURE_NOT_SAVEABLE = 0x10d,
        /* media and data integrity errors (SCT 2) */
        NTBF_NVME_SC_WRITE_FAULT = 0x280,
        NTBF_NVME_SC_UNRECOVERED_READ = 0x281,
};
#define NTBF_NVME_STATUS_DNR 0x8000u /* in the completion's status field */

/* Submission queue entry (64 bytes). */
struct ntbf_nvme_sqe {
        uint8_t opc;
        uint8_t flags; /* FUSE 1:0, PSDT 7:6 */
        uint16_t cid;
        uint32_t nsid;
        uint32_t cdw2, cdw3;
        uint64_t mptr;
        uint64_t prp1, prp2;
        uint32_t cdw10, cdw11, cdw12, cdw13, cdw14, cdw15;
};
_Static_assert(sizeof(struct ntbf_nvme_sqe) == 64, "SQE is 64 bytes");

/* Completion queue entry (16 bytes). */
struct ntbf_nvme_cqe {
        uint32_t dw0, dw1;
        uint16_t sqhd, sqid;
        uint16_t cid;
        uint16_t status; /* bit 0: phase tag */
};
_Static_assert(sizeof(struct ntbf_nvme_cqe) == 16, "CQE is 16 bytes");

/* Identify Controller fields (byte offsets). */
#define NTBF_NVME_IDC_VID           0
#define NTBF_NVME_IDC_SSVID         2
#define NTBF_NVME_IDC_SN            4
#define NTBF_NVME_IDC_MN            24
#define NTBF_NVME_IDC_FR            64
#define NTBF_NVME_IDC_RAB           72
#define NTBF_NVME_IDC_MDTS          77
#define NTBF_NVME_IDC_CNTLID        78
#define NTBF_NVME_IDC_VER           80
#define NTBF_NVME_IDC_CNTRLTYPE     111
#define NTBF_NVME_IDC_OACS          256
#define NTBF_NVME_IDC_ACL           258
#define NTBF_NVME_IDC_AERL          259
#define NTBF_NVME_IDC_FRMW          260
#define NTBF_NVME_IDC_LPA           261
#define NTBF_NVME_IDC_ELPE          262
#define NTBF_NVME_IDC_NPSS          263
#define NTBF_NVME_IDC_WCTEMP        266
#define NTBF_NVME_IDC_CCTEMP        268
#define NTBF_NVME_IDC_SQES          512
#define NTBF_NVME_IDC_CQES          513
#define NTBF_NVME_IDC_NN            516
#define NTBF_NVME_IDC_ONCS          520
#define NTBF_NVME_IDC_VWC           525
#define NTBF_NVME_IDC_NVSCC         530
#define NTBF_NVME_IDC_SGLS          536
#define NTBF_NVME_IDC_SUBNQN        768
#define NTBF_NVME_IDC_PSD0          2048
#define NTBF_NVME_ONCS_WRITE_ZEROES 0x0008

/* Identify Namespace fields (byte offsets). */
#define NTBF_NVME_IDNS_NSZE   0
#define NTBF_NVME_IDNS_NCAP   8
#define NTBF_NVME_IDNS_NUSE   16
#define NTBF_NVME_IDNS_NSFEAT 24
#define NTBF_NVME_IDNS_NLBAF  25
#define NTBF_NVME_IDNS_FLBAS  26
#define NTBF_NVME_IDNS_DLFEAT 33
#define NTBF_NVME_IDNS_NVMCAP 48
#define NTBF_NVME_IDNS_NGUID  104
#define NTBF_NVME_IDNS_LBAF0  128

/* SMART / Health log fields (byte offsets; counters are 128-bit little endian). */
#define NTBF_NVME_SMART_CRIT_WARN        0
#define NTBF_NVME_SMART_TEMP             1
#define NTBF_NVME_SMART_AVAIL_SPARE      3
#define NTBF_NVME_SMART_SPARE_THRESH     4
#define NTBF_NVME_SMART_PCT_USED         5
#define NTBF_NVME_SMART_DATA_READ        32
#define NTBF_NVME_SMART_DATA_WRITTEN     48
#define NTBF_NVME_SMART_HOST_READS       64
#define NTBF_NVME_SMART_HOST_WRITES      80
#define NTBF_NVME_SMART_BUSY_TIME        96
#define NTBF_NVME_SMART_POWER_CYCLES     112
#define NTBF_NVME_SMART_POWER_ON_HOURS   128
#define NTBF_NVME_SMART_UNSAFE_SHUTDOWNS 144
#define NTBF_NVME_SMART_MEDIA_ERRORS     160
#define NTBF_NVME_SMART_ERROR_ENTRIES    176

/* Error Information log entry fields (byte offsets in a 64-byte entry). */
#define NTBF_NVME_ERR_COUNT  0
#define NTBF_NVME_ERR_SQID   8
#define NTBF_NVME_ERR_CID    10
#define NTBF_NVME_ERR_STATUS 12 /* status field as in the completion, bit 0 = phase */
#define NTBF_NVME_ERR_PARAM  14 /* byte (7:0) and bit (10:8) of the faulty field, 0xffff: n/a */
#define NTBF_NVME_ERR_LBA    16
#define NTBF_NVME_ERR_NSID   24

#endif
