/*
 * sisci_types.h: types and constants of the SISCI-compatible API (ntbfab's libsisci).
 *
 * The SISCI 5.11 interface with the SmartIO device extension, and the names of the older
 * SmartIO generation. Constants are plain compile-time values, a compatible superset of
 * headers that declare them as extern constants; the library also exports them as
 * _SISCI_PUBLIC_CONST_<name>. Values marked "ntbfab" were not public and are chosen by
 * ntbfab; they will not change. docs/sisci.md lists every name with its status.
 *
 * This header does not define the helper macros clients define themselves (NO_FLAGS,
 * NO_CALLBACK, NO_ARG, SCI_NO_FLAGS, SCI_NO_CALLBACK).
 */
#ifndef _SISCI_TYPES_H_
#define _SISCI_TYPES_H_

#include <stddef.h>
#include <stdint.h>

#include "dis_types.h"
#include "sisci_error.h"

/* ---- handles ------------------------------------------------------------------------------ */

typedef struct sci_desc *sci_desc_t;
typedef struct sci_local_segment *sci_local_segment_t;
typedef struct sci_remote_segment *sci_remote_segment_t;
typedef struct sci_map *sci_map_t;
typedef struct sci_sequence *sci_sequence_t;
typedef struct sci_dma_queue *sci_dma_queue_t;
typedef struct sci_dma_channel *sci_dma_channel_t;
typedef struct sci_local_interrupt *sci_local_interrupt_t;
typedef struct sci_remote_interrupt *sci_remote_interrupt_t;
typedef struct sci_local_data_interrupt *sci_local_data_interrupt_t;
typedef struct sci_remote_data_interrupt *sci_remote_data_interrupt_t;
typedef struct sci_block_transfer *sci_block_transfer_t;
typedef struct sci_smartio_device *sci_smartio_device_t;
/* The older SmartIO generation's name of the same handle. */
typedef sci_smartio_device_t sci_device_t;

/* I/O addresses are 64-bit (a device-side or physical bus address). */
typedef uint64_t sci_ioaddr_t;

/* ---- enumerations ------------------------------------------------------------------------- */

typedef enum {
        SCI_CB_CONNECT = 1,
        SCI_CB_DISCONNECT,
        SCI_CB_NOT_OPERATIONAL,
        SCI_CB_OPERATIONAL,
        SCI_CB_LOST
} sci_segment_cb_reason_t;

typedef enum {
        SCI_DMAQUEUE_IDLE = 0,
        SCI_DMAQUEUE_GATHER,
        SCI_DMAQUEUE_POSTED,
        SCI_DMAQUEUE_DONE,
        SCI_DMAQUEUE_ABORTED,
        SCI_DMAQUEUE_ERROR
} sci_dma_queue_state_t;

typedef enum {
        SCI_SEQ_OK = 0,
        SCI_SEQ_RETRIABLE,
        SCI_SEQ_NOT_RETRIABLE,
        SCI_SEQ_PENDING
} sci_sequence_status_t;

typedef enum { SCI_CALLBACK_CANCEL = 1, SCI_CALLBACK_CONTINUE } sci_callback_action_t;

/* ---- callbacks ---------------------------------------------------------------------------- */

typedef sci_callback_action_t (*sci_cb_local_segment_t)(void *arg, sci_local_segment_t segment,
                                                        sci_segment_cb_reason_t reason,
                                                        unsigned int nodeId,
                                                        unsigned int localAdapterNo,
                                                        sci_error_t error);
typedef sci_callback_action_t (*sci_cb_remote_segment_t)(void *arg, sci_remote_segment_t segment,
                                                         sci_segment_cb_reason_t reason,
                                                         sci_error_t error);
typedef sci_callback_action_t (*sci_cb_dma_t)(void *arg, sci_dma_queue_t queue, sci_error_t error);
typedef sci_callback_action_t (*sci_cb_interrupt_t)(void *arg, sci_local_interrupt_t interrupt,
                                                    sci_error_t error);
typedef sci_callback_action_t (*sci_cb_data_interrupt_t)(void *arg,
                                                         sci_local_data_interrupt_t interrupt,
                                                         void *data, unsigned int length,
                                                         sci_error_t error);
/* ntbfab: SCIConnectDeviceSegment's callback (every public use passes NULL). */
typedef sci_cb_remote_segment_t sci_cb_device_segment_t;

/* ---- general ------------------------------------------------------------------------------ */

#define SCI_INFINITE_TIMEOUT 0xffffffffu

/* ---- segment creation, connection and removal --------------------------------------------- */

#define SCI_FLAG_USE_CALLBACK    0x1u
#define SCI_FLAG_EMPTY           0x2u
#define SCI_FLAG_PRIVATE         0x4u
#define SCI_FLAG_DMA_SOURCE_ONLY 0x8u
#define SCI_FLAG_FORCE_REMOVE    0x20u
#define SCI_FLAG_LOCK_USER_MEM   0x400u
#define SCI_FLAG_PHYSICAL        0x1000u
#define SCI_FLAG_CUDA_BUFFER     0x2000u
#define SCI_FLAG_SCIF_BUFFER     0x4000u
#define SCI_FLAG_BROADCAST       0x40000u
#define SCI_FLAG_AUTO_ID         0x20000000u

/* ---- DMA ---------------------------------------------------------------------------------- */

#define SCI_FLAG_DMA_WAIT      0x4u
#define SCI_FLAG_DMA_READ      0x10u
#define SCI_FLAG_DMA_PHDMA     0x20u
#define SCI_FLAG_DMA_GLOBAL    0x40u
#define SCI_FLAG_ALLOW_UNICAST 0x80u
#define SCI_FLAG_DMA_SYSDMA    0x100u
#define SCI_FLAG_DMA_USER_MEM  0x200u
#define SCI_FLAG_DMA_ADAPTER   0x800u

typedef unsigned int sci_dma_type_t; /* SCIRequestDMAChannel's kind of engine */
#define SCI_DMA_TYPE_DONTCARE       1u
#define SCI_DMA_TYPE_ADAPTER        2u
#define SCI_DMA_TYPE_GLOBAL         3u
#define SCI_DMA_TYPE_SYSTEM         4u
#define SCI_DMA_TYPE_TRANSPARENT    5u
#define SCI_DMA_CHANNEL_ID_DONTCARE 0xffffffffu

/* ---- interrupts --------------------------------------------------------------------------- */

#define SCI_FLAG_FIXED_INTNO           0x2u
#define SCI_FLAG_SHARED_INT            0x4u
#define SCI_FLAG_CONDITIONAL_INTERRUPT 0x8u
#define SCI_FLAG_COUNTING_INT          0x20u
#define SCI_FLAG_SHARE_EXTERNAL        0x40u

/* ---- mapping ------------------------------------------------------------------------------ */

#define SCI_FLAG_FIXED_MAP_ADDR                   0x1u
#define SCI_FLAG_READONLY_MAP                     0x2u
#define SCI_FLAG_LOCK_OPERATION                   0x4u
#define SCI_FLAG_CONDITIONAL_INTERRUPT_MAP        0x8u
#define SCI_FLAG_UNCONDITIONAL_DATA_INTERRUPT_MAP 0x10u
#define SCI_FLAG_IO_MAP_IOSPACE                   0x80u
#define SCI_FLAG_NO_MEMORY_LOOPBACK               0x800u
#define SCI_FLAG_SHARED_MAP                       0x2000u
#define SCI_FLAG_WRITE_BACK_CACHE_MAP             0x08000000u

/* ---- sequences, copies, cache ------------------------------------------------------------- */

#define SCI_FLAG_BLOCK_READ             0x40u /* ntbfab: SCIMemCpy reads remote -> local */
#define SCI_FLAG_ERROR_CHECK            0x80u /* ntbfab: SCIMemCpy checks the sequence after copying */
#define SCI_FLAG_THREAD_SAFE            0x100u /* ntbfab: accepted; the library is always thread safe */
#define SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY 0x1u /* ntbfab: SCIFlush, SCIStoreBarrier */
#define SCI_FLAG_CACHE_FLUSH            0x100000u
#define SCI_FLAG_CACHE_INVALIDATE       0x200000u

/* ---- SmartIO ------------------------------------------------------------------------------ */

#define SCI_FLAG_EXCLUSIVE               0x01000000u
#define SCI_FLAG_DEVICE_SIDE_ONLY        0x02001000u
#define SCI_FLAG_LOCAL_ONLY              0x02002000u
#define SCI_FLAG_DEVICE_PREFER_BANDWIDTH 0x04000001u
#define SCI_FLAG_HOST_PREFER_BANDWIDTH   0x04000002u
#define SCI_FLAG_SPECIFY_PATH            0x10000000u
#define SCI_FLAG_SPECIFY_SLOT            0x20000000u
#define SCI_FLAG_PCIE_REQUESTER_GLOBAL   0x1u

/* The older SmartIO generation: SCIConnectDeviceMemory's kind of segment (ntbfab values;
 * SCI_FLAG_PRIVATE, the segment flag, is its third kind). */
#define SCI_FLAG_BAR    0x00010000u
#define SCI_FLAG_SHARED 0x00020000u

#define SCI_MEMTYPE_BAR     1u
#define SCI_MEMTYPE_PRIVATE 2u
#define SCI_MEMTYPE_SHARED  4u

#define SCI_MEMACCESS_DEVICE_READ     0x1u
#define SCI_MEMACCESS_DEVICE_WRITE    0x2u
#define SCI_MEMACCESS_HOST_READ       0x4u
#define SCI_MEMACCESS_HOST_WRITE      0x8u
#define SCI_MEMACCESS_MULTIHOST_READ  (0x10u | SCI_MEMACCESS_HOST_READ)
#define SCI_MEMACCESS_MULTIHOST_WRITE (0x10u | SCI_MEMACCESS_HOST_WRITE)
#define SCI_MEMACCESS_P2P_READ        (0x20u | SCI_MEMACCESS_DEVICE_READ)
#define SCI_MEMACCESS_P2P_WRITE       (0x20u | SCI_MEMACCESS_DEVICE_WRITE)

/* ntbfab: the longest user_name of a device. */
#define SCI_SMARTIO_USER_NAME_LEN 64

/*
 * A device as SCIQuery(SCI_Q_DEVICE) reports it, and the filter of SCIGetDeviceList: a
 * filter field at 0 ("" for the name) matches every device, the ids included (0xffffffff
 * also does for fdid and nodeid): a zeroed filter with only pci_class set.
 */
typedef struct {
        uint32_t fdid;
        uint32_t adapter; /* a local adapter that reaches the device */
        uint32_t nodeid;  /* the lender's node id */
        uint32_t pci_class;
        uint16_t pci_vendor_id;
        uint16_t pci_device_id;
        uint16_t pci_subsystem_vendor_id;
        uint16_t pci_subsystem_id;
        uint32_t bdf; /* bus << 8 | device << 3 | function, in the lender */
        char user_name[SCI_SMARTIO_USER_NAME_LEN];
} sci_smartio_device_info_t;

/* ---- queries ------------------------------------------------------------------------------ */

/* ntbfab: command and subcommand values of SCIQuery. */
#define SCI_Q_VENDORID       1u
#define SCI_Q_API            2u
#define SCI_Q_ADAPTER        3u
#define SCI_Q_LOCAL_SEGMENT  4u
#define SCI_Q_REMOTE_SEGMENT 5u
#define SCI_Q_DEVICE         6u
#define SCI_Q_MAP            7u

#define SCI_Q_ADAPTER_NODEID                1u
#define SCI_Q_ADAPTER_BDF                   2u
#define SCI_Q_ADAPTER_SERIAL_NUMBER         3u
#define SCI_Q_ADAPTER_NUMBER_OF_PORTS       4u
#define SCI_Q_ADAPTER_DMA_MTU               5u
#define SCI_Q_ADAPTER_LINK_OPERATIONAL      6u
#define SCI_Q_ADAPTER_CONFIGURED            7u
/* The adapter's DMA alignments, and its address translation table (ATT): how many
 * translations it holds and the bytes each maps (ntbfab: its first window's slots). */
#define SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT    8u
#define SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT  9u
#define SCI_Q_ADAPTER_ATT_PAGE_SIZE         10u
#define SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES 11u

#define SCI_Q_LOCAL_SEGMENT_IOADDR    1u
#define SCI_Q_LOCAL_SEGMENT_PHYS_ADDR 2u
#define SCI_Q_REMOTE_SEGMENT_IOADDR   1u

#define SCI_Q_DEVICE_INFO 1u

typedef struct {
        unsigned int localAdapterNo;
        unsigned int portNo;
        unsigned int subcommand;
        void *data; /* NODEID, NUMBER_OF_PORTS, LINK_OPERATIONAL, CONFIGURED: unsigned int;
                       BDF: unsigned int (bus << 8 | devfn); SERIAL_NUMBER: char[64];
                       DMA_MTU, DMA_*_ALIGNMENT, ATT_*: unsigned int */
} sci_query_adapter_t;

typedef struct {
        sci_local_segment_t segment;
        unsigned int subcommand;
        union {
                sci_ioaddr_t ioaddr;
        } data;
} sci_query_local_segment_t;

typedef struct {
        sci_remote_segment_t segment;
        unsigned int subcommand;
        union {
                sci_ioaddr_t ioaddr;
        } data;
} sci_query_remote_segment_t;

typedef struct {
        uint32_t fdid;
        unsigned int subcommand;
        sci_smartio_device_info_t *data;
} sci_smartio_query_device_t;

#endif
