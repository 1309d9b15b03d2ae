/* tests/conformance/checks.c: the list of checks, in the order they run, and what each proves. */
#include "checks.h"

/* Cheap and fundamental first: a broken vtable or capability makes later failures noise. */
const struct cf_check cf_checks[] = {
    {"vtable", CF_ONCE, cf_check_vtable,
     "ntbf_backend_ops_valid accepts the vtable and the registry finds it by name"},
    {"caps.flags", CF_ADAPTER, cf_check_caps_flags,
     "each claimed capability has its callbacks, agrees with the figures and the cluster "
     "file, and every unclaimed one is refused"},
    {"caps.figures", CF_ADAPTER, cf_check_caps_figures,
     "window, slots, alignments, tables, doorbells, scratchpads, DMA figures are sane and "
     "match the cluster file and the host's address map"},
    {"events.idle", CF_ADAPTER, cf_check_events_idle,
     "event_fd is a stable, epoll-able descriptor, idle when nothing is pending; "
     "process_events returns 0 at once"},
    {"events.fd", CF_PAIR, cf_check_events_fd,
     "an event from A makes B's event_fd readable, process_events dispatches it and the fd "
     "is idle again"},
    {"mem", CF_ADAPTER, cf_check_mem,
     "mem_alloc honours size and alignment, returns zeroed, disjoint memory inside the host's "
     "RAM that keeps its bytes; its fd maps it, and so does mem_map by its bus address (only "
     "while it is allocated); bad arguments are refused; memory freed and allocated again "
     "reads zero"},
    {"xlat.outbound", CF_PAIR, cf_check_xlat_outbound,
     "every slot of A programmed by A reaches exactly its far-side block at both ends, reads "
     "back, and once cleared reads all ones and loses writes; bad addresses and slots are "
     "refused"},
    {"xlat.inbound", CF_PAIR, cf_check_xlat_inbound,
     "the same for every slot of A programmed by B (peer_xlat_set)"},
    {"xlat.size", CF_PAIR, cf_check_xlat_size,
     "a translation smaller than its slot carries its bytes and drops the rest of the slot; a "
     "size that is not a multiple of size_align is refused"},
    {"map.offset", CF_PAIR, cf_check_map_offset,
     "a mapping of one page in the middle of a slot reaches the far-side block at that "
     "offset, and nothing at the slot's start"},
    {"map.live", CF_PAIR, cf_check_map_live,
     "a mapping made before a slot is programmed onto another block follows it: stores and "
     "loads reach the new block, the old one is left alone"},
    {"map.process", CF_PAIR, cf_check_map_process,
     "a second process that opens the backend itself maps and uses a slot this process "
     "programmed, and its exit leaves the slot programmed"},
    {"rid.table", CF_ADAPTER, cf_check_rid_table,
     "the requester table holds exactly rid_table - rid_reserved entries; -ENOSPC, -EEXIST, "
     "-ENOENT, -EPERM for the CPU's entries; a delete frees one"},
    {"rid.drop", CF_PAIR, cf_check_rid_drop,
     "a requester missing from A's table is dropped (writes lost, reads all ones, "
     "drop_no_rid on A); once added it passes; deleted, it is dropped again"},
    {"rid.mask", CF_PAIR, cf_check_rid_mask,
     "a 0xfff8 entry admits all eight functions of a device and no other device; 0xff00 a "
     "whole bus"},
    {"rid.switch", CF_SWITCH_PAIR, cf_check_rid_switch,
     "each switch table on the route holds exactly its entries; -ENOSPC, -EEXIST, -ENOENT; "
     "a delete frees one"},
    {"rid.switch.drop", CF_SWITCH_PAIR, cf_check_rid_switch_drop,
     "a requester missing from a switch on the route is dropped and counted on A; present on "
     "every switch it passes; masks apply on switches too"},
    {"link.state", CF_PAIR, cf_check_link_state,
     "link_state says up on the route's cable and down on ports without one"},
    {"link.cycle", CF_PAIR, cf_check_link_cycle,
     "link_disable: both ends see down (link_event), the window drops accesses and counts "
     "drop_link_down, peer registers say -ENOTCONN; link_enable restores all of it"},
    {"doorbell", CF_PAIR, cf_check_doorbell,
     "every valid doorbell bit rung by A reaches B as a db_event with that bit; db_read shows "
     "it, db_clear clears it"},
    {"doorbell.mask", CF_PAIR, cf_check_doorbell_mask,
     "masked bits raise no event but stay pending; unmasking a pending bit raises it; a bit "
     "cleared while masked raises nothing"},
    {"spad", CF_PAIR, cf_check_spad,
     "every scratchpad written by one side reads back on the other, in both directions and "
     "through both read paths"},
    {"msg", CF_PAIR, cf_check_msg,
     "every message register carries A's value to B as a msg_event naming A; without "
     "msg_event it waits for msg_read, once"},
    {"iommu", CF_PAIR, cf_check_iommu,
     "an inbound access to an unmapped IOVA of B is dropped and counted (iommu_fault on B); "
     "mapped it lands at the physical address; unmapped it is dropped again"},
    {"dev_iommu", CF_ADAPTER, cf_check_dev_iommu,
     "an isolated device (every function of its entry) reaches only what is mapped in its "
     "own domain: unmapped addresses fault and leave memory untouched, other devices are not "
     "affected, and isolation off restores host-physical DMA"},
    {"irq", CF_PAIR, cf_check_irq,
     "irq_alloc gives distinct vectors; the data written to the address from A through a slot "
     "signals that vector's eventfd and no other"},
    {"irq.trigger", CF_ADAPTER, cf_check_irq_trigger,
     "irq_trigger of a vector's address and data (a local MSI write) signals that vector's "
     "eventfd and no other; an address that holds no vector is refused"},
    {"host_map", CF_PAIR, cf_check_host_map,
     "bytes stored through host_map of B's memory by bus address arrive where A reads that bus "
     "address through a slot, and A's stores show in the mapping; B's interrupt range is "
     "refused"},
    {"host_bus", CF_PAIR, cf_check_host_bus,
     "host_bus of memory B holds (mem_alloc's, host_map's) is its bus address, the one at "
     "which A reads what was stored there; heap memory is -EFAULT"},
    {"window_write", CF_PAIR, cf_check_window_write,
     "a posted write through A's window lands exactly at B (any alignment), into an "
     "unprogrammed slot is dropped and counted, into B's MSI range signals the vector; "
     "empty and out-of-window writes are refused"},
    {"mcast", CF_SWITCH_PAIR, cf_check_mcast,
     "a write to a group slot of A reaches every member's overlay at the offset; a member "
     "that left receives nothing"},
    {"dma.copy", CF_PAIR, cf_check_dma_copy,
     "copies of 1 byte to 1 MiB local->local, local->remote and remote->local land exactly, "
     "nothing past their end"},
    {"dma.order", CF_PAIR, cf_check_dma_order,
     "16 copies in a row complete in submission order with status 0; every channel works"},
    {"dma.error", CF_PAIR, cf_check_dma_error,
     "a copy into or out of an unprogrammed slot completes with an error status; the engine "
     "goes on"},
    {"reset", CF_PAIR, cf_check_reset,
     "reset delivers reset_event and clears slots, requester entries (not the CPU's), "
     "doorbell bits and masks, scratchpads; the CPU's accesses pass again afterwards"},
    {"counters", CF_PAIR, cf_check_counters,
     "each drop kind moves exactly the counter docs/sim.md names, on the adapter it names, "
     "and nothing else"},
    {"args", CF_PAIR, cf_check_args,
     "out-of-range slots, scratchpads, ports, peers, groups, channels, switches and nodes are "
     "refused with -EINVAL and change nothing"},
};

const size_t cf_nchecks = sizeof(cf_checks) / sizeof(cf_checks[0]);
