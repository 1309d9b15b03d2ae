/* ntbfab/topology.h: the fabric model: nodes, adapters, switches, links, devices, address maps. */
#ifndef NTBFAB_TOPOLOGY_H
#define NTBFAB_TOPOLOGY_H

#include "common.h"
#include "diag.h"

NTBF_BEGIN_DECLS

/*
 * A topology is plain data: arrays of objects that refer to each other by index.
 * It is built with the ntbf_topo_add_* functions (the YAML loader is one user),
 * then ntbf_topo_finalize() applies defaults, assigns addresses, builds the
 * indexes and checks every rule that does not depend on the YAML syntax.
 * After finalize the topology is read-only and may be shared by threads.
 */

#define NTBF_MAX_BARS          6
#define NTBF_MAX_ADAPTER_PORTS 8
#define NTBF_MAX_SWITCH_PORTS  256
#define NTBF_MAX_FUNCTIONS     8
#define NTBF_MAX_VFS           4096
#define NTBF_MAX_NODE_DEVICES  1024 /* devices modeled per node */
#define NTBF_MAX_NODE_ADAPTERS 64
#define NTBF_MAX_NODE_CHASSIS  16  /* expansion chassis per node */
#define NTBF_RESERVED_NODE_ID  252 /* DIS_BROADCAST_NODEID_GROUP_ALL */
#define NTBF_MAX_NODE_ID       65535

/* x86 interrupt address range: MSI/MSI-X writes of devices target it. */
#define NTBF_MSI_BASE UINT64_C(0xfee00000)
#define NTBF_MSI_SIZE UINT64_C(0x100000)

/* Which side's driver programs a translation entry (article 3.3; spec ntb-hardware 0). */
enum ntbf_xlat_side {
        NTBF_XLAT_OUTBOUND = 1, /* the window owner programs it (PLX A-LUT, IDT, Dolphin) */
        NTBF_XLAT_INBOUND = 2,  /* the buffer owner programs it (Intel, AMD, Switchtec) */
};

/*
 * One window of an adapter: a range of its host's physical address space (all or part of
 * an NTB BAR) through which accesses leave for other hosts, split into `slots` equal
 * translation slots (one for a direct window). Slots are numbered per adapter across its
 * windows: window w holds slots first_slot .. first_slot + slots - 1. Slot k of the window
 * translates [base + k * slot_size, + the translation's size) to a far-side range whose
 * address is a multiple of addr_align (and of the translation's size rounded up to a power
 * of two with NTBF_WIN_NATURAL_ALIGN) and whose size is a multiple of size_align, at most
 * size_max. The backend vtable reports the same figures (ntbf_caps.windows).
 */
#define NTBF_MAX_WINDOWS 8
enum ntbf_win_flags {
        NTBF_WIN_NATURAL_ALIGN = 1u << 0, /* Switchtec direct windows */
};
struct ntbf_window {
        uint64_t base;       /* physical address in the host */
        uint64_t size;       /* bytes */
        uint32_t first_slot; /* adapter-wide number of the window's first slot */
        uint32_t slots;      /* 1 for a direct window */
        uint64_t slot_size;  /* size / slots */
        uint32_t reserved;   /* leading slots the hardware keeps (Switchtec's LUT 0) */
        uint32_t flags;      /* enum ntbf_win_flags */
        uint64_t addr_align; /* a translation's far-side address is a multiple of this */
        uint64_t size_align; /* a translation's size is a multiple of this */
        uint64_t size_max;   /* largest translation of one slot (<= slot_size) */
};

/*
 * A window as a model or the cluster file describes it (`windows:` of an adapter). Windows
 * with the same `bar` share one BAR, laid out one after the other in the order given; a
 * BAR is a power of two of at least 4 KiB, aligned to its size. 0 in an alignment field
 * means the slot size.
 */
struct ntbf_window_params {
        uint64_t size;       /* bytes */
        uint32_t slots;      /* translation slots; 0 means 1 (a direct window) */
        uint32_t reserved;   /* leading slots the hardware keeps */
        uint32_t bar;        /* BAR number (0..5) the window is in */
        uint32_t flags;      /* enum ntbf_win_flags */
        uint64_t addr_align; /* 0: the slot size */
        uint64_t size_align; /* 0: the slot size */
        uint64_t size_max;   /* 0: the slot size */
        uint64_t base;       /* fixed address of its BAR (on the BAR's first window); 0: assigned */
};

/*
 * How an adapter's requester-ID table holds a device that has several functions (docs/model.md,
 * "Requester IDs"). The core's model gives a device one entry (a mask: 0xfff8 for its
 * functions, 0xff00 for its bus when it has SR-IOV VFs); this rule says what that entry costs
 * the hardware and what the daemon programs.
 */
enum ntbf_rid_mask {
        NTBF_RID_MASK_NATIVE = 0, /* entries match with a mask: one entry per device (PLX, sim) */
        NTBF_RID_MASK_EXPAND = 1, /* entries hold one ID each: one per function and VF
                                     (Switchtec: an entry is (RID << 16) | enable) */
        NTBF_RID_MASK_REFUSE = 2, /* entries hold one ID each and the driver programs one per
                                     device: a device of several functions cannot pass */
};

/* Figures of an adapter (an NTB endpoint in a host). Presets fill these; YAML overrides. */
struct ntbf_adapter_params {
        char model[NTBF_NAME_MAX + 1];
        uint32_t ports;        /* cable ports on the adapter (links it can take) */
        uint64_t window;       /* bytes of the prefetchable window BAR */
        uint32_t lut_entries;  /* translation entries; the window is split into equal slots */
        uint32_t rid_table;    /* requester-ID table entries; 0: no table (not enforced) */
        uint32_t rid_reserved; /* entries taken by the host's CPU (root complex) */
        uint32_t addr_bits;    /* width of translated (far-side) addresses */
        uint32_t doorbells;    /* doorbell bits usable by clients */
        uint32_t scratchpads;  /* 32-bit scratchpad registers */
        uint32_t messages;     /* message registers */
        uint32_t dma_channels; /* DMA engine channels; 0: none */
        uint32_t hop_ns;       /* modeled latency of one pass through the adapter */
        uint32_t xlat;         /* enum ntbf_xlat_side bits */
        bool window_below_4g;  /* place the window(s) in 32-bit MMIO space */
        bool rid_proxy;        /* the hardware gives requesters proxy IDs (Switchtec) */
        uint32_t rid_mask;     /* enum ntbf_rid_mask */
        /* Bytes at the start of window 0 the driver keeps for a shared window holding its
         * software scratchpads (Switchtec: 64 KiB in LUT 0); 0: scratchpads are registers.
         * Window 0's reserved slots must cover it. */
        uint64_t spad_window;
        /* A managed fabric (Dolphin through SISCI, backend NTBF_CAP_DEV_MAP): the fabric's
         * software maps devices' DMA and interrupts itself, so a borrow through the adapter
         * takes no DMA window and no MSI window of it (docs/model.md). */
        bool managed;
        /* 0: one window of `window` bytes split into `lut_entries` slots (the single-window
         * keys); else these windows, and `window`, `lut_entries` are unused. */
        uint32_t nwindows;
        struct ntbf_window_params windows[NTBF_MAX_WINDOWS];
};

/* Figures of a cluster switch with NTB-capable ports. */
struct ntbf_switch_params {
        char model[NTBF_NAME_MAX + 1];
        uint32_t ports;        /* logical ports (after x4/x8/x16 grouping) */
        uint32_t rid_table;    /* requester-ID entries per port */
        uint32_t mcast_groups; /* multicast groups the switch supports; 0: no multicast */
        uint32_t hop_ns;       /* modeled latency of one pass through the switch */
};

enum ntbf_bar_flags {
        NTBF_BAR_64 = 1,   /* 64-bit BAR */
        NTBF_BAR_PREF = 2, /* prefetchable */
};

struct ntbf_bar {
        uint64_t size; /* 0: BAR not implemented; else a power of two >= 4 KiB (memory BARs) */
        uint32_t flags;
        uint64_t addr; /* assigned by finalize, in the owning host's physical address space */
};

enum ntbf_sim_model {
        NTBF_SIM_NONE = 0,
        NTBF_SIM_NVME,
        NTBF_SIM_ACCEL,
};

/* Parameters of a simulated device model (YAML "sim:" mapping). */
struct ntbf_sim_params {
        enum ntbf_sim_model model;
        uint64_t capacity; /* nvme: namespace bytes */
        uint32_t queues;   /* nvme: I/O queue pairs (the article's drive: 32 incl. admin) */
        uint32_t lba_size; /* nvme: 512 or 4096 */
        uint32_t mdts;     /* nvme: max data transfer, log2 of pages (0: unlimited) */
        uint64_t cmb;      /* nvme: controller memory buffer bytes (0: none) */
        uint64_t memory;   /* accel: device memory bytes (BAR2) */
        uint32_t msix;     /* MSI-X vectors (0: none) */
};

/* The vendor ID the simulated device models report (not registered with PCI-SIG). */
#define NTBF_SIM_VENDOR_ID       0xfab0
#define NTBF_SIM_NVME_DEVICE_ID  0x0001
#define NTBF_SIM_ACCEL_DEVICE_ID 0x0002
#define NTBF_CLASS_NVME          0x010802
#define NTBF_CLASS_ACCEL         0x120000

/*
 * Modeled latencies inside a host (docs/model.md "Inside a host"). The root complex joins
 * the CPU, RAM, the root ports of the host's slots and its adapters; a pass through it
 * costs the node's root_ns. An expansion chassis is a transparent PCIe switch (the
 * article's PEX8796) on a root port: its devices reach each other through that switch
 * alone (PCIe routes peer-to-peer at the lowest common switch, article 3.2), and reach
 * everything else through the switch, the chassis uplink and the root complex.
 */
#define NTBF_CHASSIS_HOP_NS    150 /* PEX8796 worst case (article 7.1.5) */
#define NTBF_CHASSIS_UPLINK_NS 264 /* two PEX8733 (HIB68-16 host and target cards, 7.4.1) */

struct ntbf_chassis {
        char name[NTBF_NAME_MAX + 1];
        uint32_t node;      /* the host whose root port the chassis hangs from */
        uint32_t hop_ns;    /* one pass through the chassis switch */
        uint32_t uplink_ns; /* between the chassis switch and the root complex, one way */
        struct ntbf_loc loc;
};

struct ntbf_node {
        char name[NTBF_NAME_MAX + 1];
        uint32_t id;       /* SISCI node id */
        char address[64];  /* management address "host:port" */
        uint64_t ram;      /* bytes of RAM */
        uint32_t cpu_rids; /* requester IDs the CPU uses (root complex + host bridge) */
        uint32_t root_ns;  /* one pass through the root complex; 0 by default (docs/models.md) */
        bool iommu;        /* inbound NTB traffic goes through this host's IOMMU */
        uint64_t mmio_low_base, mmio_low_end; /* 32-bit MMIO hole */
        uint64_t mmio_high_base;              /* 64-bit MMIO starts here */
        struct ntbf_loc loc, loc_id;
        /* Filled by finalize: this node's adapters and devices (indexes into the topology). */
        uint32_t *adapters, nadapters;
        uint32_t *devices, ndevices;
};

/*
 * Where the switchtec backend reaches the switch an NT partition belongs to (an adapter's
 * `switchtec:` in the cluster file; docs/switchtec.md). A relative path is taken in the
 * instance directory (the register model's files).
 */
#define NTBF_STX_PATH_MAX 128
struct ntbf_stx_params {
        char device[NTBF_STX_PATH_MAX]; /* the switch's management device (/dev/switchtecN, its
                                           MRPC); "": found from the adapter's bdf */
        char gas[NTBF_STX_PATH_MAX];    /* the file mapped as the switch's GAS (sysfs resource0
                                           of the management function); "mrpc": GAS reads and
                                           writes through the device's MRPC; "": from bdf */
        int32_t partition;              /* the NT partition; -1: found in the GAS */
        struct ntbf_loc loc;
};

/*
 * What the dolphin backend takes from an adapter's `dolphin:` in the cluster file
 * (docs/dolphin.md, "Figures come from SCIQuery").
 */
struct ntbf_dol_params {
        bool file_figures; /* plan with the file's window where SCIQuery does not give it */
        struct ntbf_loc loc;
};

struct ntbf_adapter {
        char name[NTBF_NAME_MAX + 1];
        uint32_t node;
        struct ntbf_adapter_params p;
        uint64_t window_base;       /* 0 means assign automatically; filled by finalize */
        uint64_t lut_entry_size;    /* window / lut_entries; filled by finalize */
        char bdf[16];               /* PCI address of the adapter, "" if unknown */
        struct ntbf_stx_params stx; /* `switchtec:` (backends/switchtec) */
        struct ntbf_dol_params dol; /* `dolphin:` (backends/dolphin) */
        struct ntbf_loc loc, loc_window, loc_window_base, loc_lut;
        /* Filled by finalize: link index per port, NTBF_NONE where unconnected. */
        uint32_t link[NTBF_MAX_ADAPTER_PORTS];
        /* Filled by finalize: the windows (from p.windows, or window 0 of window_base,
         * p.window, lut_entries) and the number of slots of all of them. 0 windows while the
         * adapter has a mistake. window_base and lut_entry_size are then window 0's. */
        uint32_t nwin, nslots;
        struct ntbf_window win[NTBF_MAX_WINDOWS];
        struct ntbf_loc loc_win[NTBF_MAX_WINDOWS]; /* of each `windows:` entry */
        uint8_t win_bar[NTBF_MAX_WINDOWS];         /* the BAR each window is in */
};

struct ntbf_switch {
        char name[NTBF_NAME_MAX + 1];
        struct ntbf_switch_params p;
        struct ntbf_loc loc;
        uint32_t *link; /* filled by finalize: link index per port, NTBF_NONE where unconnected */
};

enum ntbf_port_kind { NTBF_PORT_ADAPTER, NTBF_PORT_SWITCH };

struct ntbf_port_ref {
        enum ntbf_port_kind kind;
        uint32_t obj; /* adapter or switch index */
        uint32_t port;
};

struct ntbf_link {
        struct ntbf_port_ref end[2];
        uint32_t latency_ns; /* cable latency; 0 by default */
        struct ntbf_loc loc;
};

struct ntbf_device {
        char name[NTBF_NAME_MAX + 1];
        uint32_t node;
        uint16_t domain;
        uint8_t bus, dev, fn; /* function 0's address */
        uint32_t class_code;  /* 24-bit class code, e.g. 0x010802 for NVMe */
        uint16_t vendor_id, device_id;
        struct ntbf_bar bars[NTBF_MAX_BARS]; /* BARs of each physical function */
        uint32_t functions;                  /* physical functions, 1..8 */
        uint32_t vfs;                        /* SR-IOV virtual functions */
        uint64_t vf_bars[NTBF_MAX_BARS];     /* sizes of each VF's BARs (64-bit prefetchable) */
        uint32_t dma_bits;                   /* addressing limit of the device's DMA */
        uint32_t hop_ns;  /* the device's own latency to its slot's port, one way */
        uint32_t chassis; /* the expansion chassis it sits in (index), NTBF_NONE: a host slot */
        bool lend;        /* lent at start */
        bool isolate;     /* lender-side IOMMU isolation while borrowed (docs/daemon.md) */
        bool vfio;        /* a real device of its host, driven through vfio-pci (docs/vm.md) */
        struct ntbf_sim_params sim;
        struct ntbf_loc loc, loc_bars;
        /* Filled by finalize: VF BARs are placed as arrays (VF BAR n of VF i at vf_bar_addr[n] +
         * i*size). */
        uint64_t vf_bar_addr[NTBF_MAX_BARS];
};

/* What occupies a range of a host's physical address space. */
enum ntbf_region_kind {
        NTBF_REGION_RAM,
        NTBF_REGION_BAR,    /* obj = device, index = BAR number */
        NTBF_REGION_VF_BAR, /* obj = device, index = VF BAR number (array over all VFs) */
        NTBF_REGION_WINDOW, /* obj = adapter */
        NTBF_REGION_MSI,    /* interrupt address range */
};

struct ntbf_region {
        uint64_t base, size;
        enum ntbf_region_kind kind;
        uint32_t obj, index;
};

/* One host's physical address map, sorted by base, non-overlapping. */
struct ntbf_addrmap {
        struct ntbf_region *v;
        uint32_t n;
};

struct ntbf__graph;

/* What the daemons need beyond the fabric (YAML `cluster:` keys; docs/daemon.md, docs/rpc.md). */
#define NTBF_MAX_ALLOW        32
#define NTBF_ACCOUNT_MAX      32 /* user and group names (useradd's limit) */
#define NTBF_DEFAULT_LEASE_MS 10000
struct ntbf_cluster_opts {
        char manager[NTBF_NAME_MAX + 1]; /* fabric manager node; "" = lowest node id */
        uint32_t lease_ms;               /* borrow lease; NTBF_DEFAULT_LEASE_MS by default */
        char socket_group[NTBF_ACCOUNT_MAX + 1];                /* "" = the daemon's own group */
        char allow_users[NTBF_MAX_ALLOW][NTBF_ACCOUNT_MAX + 1]; /* names or numeric uids */
        char allow_groups[NTBF_MAX_ALLOW][NTBF_ACCOUNT_MAX + 1];
        uint32_t nallow_users, nallow_groups;
        struct ntbf_loc loc_manager;
};

struct ntbf_topo {
        char name[64];
        char backend[NTBF_NAME_MAX + 1]; /* cluster default backend: "sim", "linux-ntb", ... */
        char *file;                      /* source file for diagnostics (owned), may be NULL */
        char *key_file;                  /* cluster key file (owned), may be NULL */
        struct ntbf_cluster_opts opts;   /* daemon settings of the cluster file */
        struct ntbf_node *nodes;
        struct ntbf_adapter *adapters;
        struct ntbf_switch *switches;
        struct ntbf_link *links;
        struct ntbf_device *devices;
        struct ntbf_chassis *chassis;
        uint32_t nnodes, nadapters, nswitches, nlinks, ndevices, nchassis;
        uint32_t cap_nodes, cap_adapters, cap_switches, cap_links, cap_devices, cap_chassis;
        struct ntbf_addrmap *maps; /* per node, filled by finalize */
        struct ntbf__graph *graph; /* the fabric as a graph, built by finalize (internal) */
        bool finalized;
};

/* ---- presets ---------------------------------------------------------------------------- */

/* Look up an adapter or switch model by name (case-insensitive). NULL if unknown. */
NTBF_EXPORT const struct ntbf_adapter_params *ntbf_adapter_preset(const char *model);
NTBF_EXPORT const struct ntbf_switch_params *ntbf_switch_preset(const char *model);
/* Iterate the preset tables: returns NULL past the end. */
NTBF_EXPORT const struct ntbf_adapter_params *ntbf_adapter_preset_at(size_t i);
NTBF_EXPORT const struct ntbf_switch_params *ntbf_switch_preset_at(size_t i);

/* ---- building --------------------------------------------------------------------------- */

NTBF_EXPORT struct ntbf_topo *ntbf_topo_new(const char *name, const char *file);
NTBF_EXPORT void ntbf_topo_free(struct ntbf_topo *t);
/*
 * A deep copy of the objects (not finalized: call ntbf_topo_finalize on it). Used for
 * what-if questions ("what if the lender had 30 more such devices?"). NULL on ENOMEM.
 */
NTBF_EXPORT struct ntbf_topo *ntbf_topo_clone(const struct ntbf_topo *t);

/*
 * Add objects. Each returns the new object's index, or NTBF_NONE on allocation failure.
 * The returned pointer of ntbf_topo_*_at() is valid until the next add.
 * Nodes get defaults (4 GiB RAM, 2 CPU requester IDs, IOMMU on, x86-like MMIO holes).
 * Adapters start from the preset of their model (which must exist) and may be edited after.
 */
NTBF_EXPORT uint32_t ntbf_topo_add_node(struct ntbf_topo *t, const char *name, uint32_t id);
NTBF_EXPORT uint32_t ntbf_topo_add_adapter(struct ntbf_topo *t, uint32_t node, const char *name,
                                           const struct ntbf_adapter_params *model);
NTBF_EXPORT uint32_t ntbf_topo_add_switch(struct ntbf_topo *t, const char *name,
                                          const struct ntbf_switch_params *model);
NTBF_EXPORT uint32_t ntbf_topo_add_link(struct ntbf_topo *t, struct ntbf_port_ref a,
                                        struct ntbf_port_ref b);
/* A device with no BARs, one function, 64-bit DMA, in a slot of the host (no chassis).
 * Use ntbf_device_apply_sim() for sim models. */
NTBF_EXPORT uint32_t ntbf_topo_add_device(struct ntbf_topo *t, uint32_t node, const char *name);
/* An expansion chassis of node with the PEX8796 / HIB68-16 figures; put devices in it by
 * setting their chassis to the returned index. */
NTBF_EXPORT uint32_t ntbf_topo_add_chassis(struct ntbf_topo *t, uint32_t node, const char *name);
/* Fill class, ids and BARs from dev->sim (NVMe: BAR0 16 KiB + CMB; accel: BAR0 64 KiB + memory). */
NTBF_EXPORT void ntbf_device_apply_sim(struct ntbf_device *dev);
/* Defaults of a sim model's parameters (queues 32, lba 512, ...). */
NTBF_EXPORT void ntbf_sim_defaults(struct ntbf_sim_params *sim, enum ntbf_sim_model model);

/*
 * Apply defaults, assign addresses, index links, and check every semantic rule:
 * node ids, window alignment, LUT slot sizes, ports used twice, address overlaps,
 * BARs that fit no borrower window, nodes that cannot reach each other.
 * Each mistake becomes one diagnostic at the object's location. Returns 0 if there
 * was no error, NTBF_ECONFIG if there were, -ENOMEM.
 */
NTBF_EXPORT int ntbf_topo_finalize(struct ntbf_topo *t, struct ntbf_diags *diags);

/* ---- lookups ---------------------------------------------------------------------------- */

NTBF_EXPORT uint32_t ntbf_topo_find_node(const struct ntbf_topo *t, const char *name);
NTBF_EXPORT uint32_t ntbf_topo_find_node_id(const struct ntbf_topo *t, uint32_t id);
NTBF_EXPORT uint32_t ntbf_topo_find_switch(const struct ntbf_topo *t, const char *name);
/* Adapter or device "NAME" of node n. */
NTBF_EXPORT uint32_t ntbf_topo_find_adapter(const struct ntbf_topo *t, uint32_t node,
                                            const char *name);
NTBF_EXPORT uint32_t ntbf_topo_find_device(const struct ntbf_topo *t, uint32_t node,
                                           const char *name);
NTBF_EXPORT uint32_t ntbf_topo_find_chassis(const struct ntbf_topo *t, uint32_t node,
                                            const char *name);
/*
 * Modeled one-way latency between two points of one host: device indexes, or NTBF_NONE for
 * the root complex itself (the CPU, RAM, an adapter). Two devices of one chassis meet in its
 * switch (their hop_ns and the chassis hop_ns); anything else goes through the root complex
 * (root_ns) and, for a device, its slot or its chassis switch and uplink.
 */
NTBF_EXPORT uint32_t ntbf_topo_local_ns(const struct ntbf_topo *t, uint32_t node,
                                        uint32_t from_device, uint32_t to_device);
/* A device's one-way latency up to (not through) its host's root complex. */
NTBF_EXPORT uint32_t ntbf_device_root_ns(const struct ntbf_topo *t, uint32_t device);
/* The window of adapter a holding adapter slot `slot`, or NULL. */
NTBF_EXPORT const struct ntbf_window *ntbf_adapter_slot_window(const struct ntbf_adapter *a,
                                                               uint32_t slot);
/* The window of adapter a holding physical address addr (its index; *off the offset in it),
 * or -1. */
NTBF_EXPORT int ntbf_adapter_addr_window(const struct ntbf_adapter *a, uint64_t addr,
                                         uint64_t *off);
/* Whether a translation of [addr, addr + size) fits window w's rules (addr_align,
 * NTBF_WIN_NATURAL_ALIGN, size_align, size_max); size 0 never does. */
NTBF_EXPORT bool ntbf_window_xlat_ok(const struct ntbf_window *w, uint64_t addr, uint64_t size);
/* The link at a port, or NTBF_NONE. */
NTBF_EXPORT uint32_t ntbf_topo_port_link(const struct ntbf_topo *t, struct ntbf_port_ref p);
/* The other end of link l seen from port p. */
NTBF_EXPORT struct ntbf_port_ref ntbf_link_peer(const struct ntbf_link *l, struct ntbf_port_ref p);
NTBF_EXPORT bool ntbf_port_eq(struct ntbf_port_ref a, struct ntbf_port_ref b);
/* "node.adapter", "node.adapter.1", "switch.3" into buf. */
NTBF_EXPORT const char *ntbf_port_name(const struct ntbf_topo *t, struct ntbf_port_ref p, char *buf,
                                       size_t len);
/* The region holding a physical address of node n, or NULL (unclaimed space: master abort). */
NTBF_EXPORT const struct ntbf_region *ntbf_addrmap_lookup(const struct ntbf_topo *t, uint32_t node,
                                                          uint64_t addr);
/* "0000:03:00.0" form of a device function (fn counted from function 0's address). */
NTBF_EXPORT const char *ntbf_bdf_fmt(uint16_t domain, uint8_t bus, uint8_t dev, uint8_t fn,
                                     char *buf, size_t len);
/* Parse "DDDD:BB:DD.F" or "BB:DD.F". */
NTBF_EXPORT int ntbf_bdf_parse(const char *s, uint16_t *domain, uint8_t *bus, uint8_t *dev,
                               uint8_t *fn);
NTBF_EXPORT const char *ntbf_region_kind_name(enum ntbf_region_kind k);
/* Address and size of BAR b of borrowable function f (PFs first, then VFs); 0 if absent. */
NTBF_EXPORT uint64_t ntbf_device_bar_addr(const struct ntbf_device *d, uint32_t f, uint32_t b);
NTBF_EXPORT uint64_t ntbf_device_bar_size(const struct ntbf_device *d, uint32_t f, uint32_t b);
/*
 * Routing ID (bus << 8 | dev << 3 | fn) of function f. PFs are fn0 + f; VF i is at
 * PF0's routing ID + NTBF_VF_OFFSET + i (stride 1), which may spill into the next buses.
 */
#define NTBF_VF_OFFSET 0x80
NTBF_EXPORT uint32_t ntbf_device_rid(const struct ntbf_device *d, uint32_t f);
/*
 * The one requester-ID table entry that covers every function of d (docs/model.md: a
 * device counts once): its bus:device with any function (mask 0xfff8), or its whole bus
 * (mask 0xff00) when it has SR-IOV VFs, which finalize keeps on the device's own bus.
 */
NTBF_EXPORT void ntbf_device_rid_entry(const struct ntbf_device *d, uint16_t *rid, uint16_t *mask);
/*
 * Requester-ID table entries device d costs on adapter a's table under its rid_mask rule:
 * 1 (NATIVE), its functions and VFs (EXPAND), 1 for a single-function device (REFUSE), or 0
 * when the device cannot pass at all (REFUSE and several functions). The daemon programs
 * exactly that many entries: ntbf_adapter_rid_at() gives each.
 */
NTBF_EXPORT uint32_t ntbf_adapter_rid_cost(const struct ntbf_adapter *a,
                                           const struct ntbf_device *d);
/* Entry k (0 .. cost - 1) of device d on adapter a's table: its routing ID and mask. */
NTBF_EXPORT void ntbf_adapter_rid_at(const struct ntbf_adapter *a, const struct ntbf_device *d,
                                     uint32_t k, uint16_t *rid, uint16_t *mask);
/* "native", "expand", "refuse" (the cluster file's words), or "?". */
NTBF_EXPORT const char *ntbf_rid_mask_name(uint32_t rule);
/* Highest physical address plus one that the model assigns (48-bit physical addressing). */
#define NTBF_PHYS_LIMIT (UINT64_C(1) << 48)
/* Number of borrowable functions of a device: physical functions plus VFs. */
static inline uint32_t ntbf_device_nfuncs(const struct ntbf_device *d)
{
        return d->functions + d->vfs;
}

NTBF_END_DECLS

#endif
