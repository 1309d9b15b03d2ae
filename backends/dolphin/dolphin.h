/* backends/dolphin/dolphin.h: the Dolphin backend's internals (a managed fabric over SISCI). */
#ifndef NTBF_DOLPHIN_H
#define NTBF_DOLPHIN_H

/* The thread-safe names of the library (what SISCI programs are built with). */
#ifndef _REENTRANT
#define _REENTRANT 1
#endif

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntbfab/backend.h"
#include "ntbfab/error.h"
#include "sisci_api.h"

/*
 * The SISCI library is loaded at run time (dlmopen, docs/dolphin.md): its functions are
 * called through a table resolved by name, and the constants its headers declare as
 * `extern const unsigned int _SISCI_PUBLIC_CONST_<name>` are read from the library itself,
 * so that no number of ntbfab's headers is assumed to be Dolphin's. The headers give the
 * types only.
 *
 * The names are those of abi.h (frontends/sisci-compat/src), the one list of the SISCI ABI
 * that ntbfab's libsisci exports: the table has a place for each. Which of them the backend
 * needs is recorded by the calls themselves: SCI() and SC() put the name they use into the
 * section dol_need, and loading a library requires every name there (lib.c). SCO() reads a
 * constant the backend asks about first (has_<name>), which a library may lack.
 */
#include "abi.h"

struct dol_need {
        const char *name; /* the library's symbol */
        size_t off;       /* in struct dol_lib: f_<name> (a function), or has_<name> */
        bool func;
};

#define DOL_NEED(sym, field, isfn)                                                                 \
        ({                                                                                         \
                static const struct dol_need dol_need_                                             \
                    __attribute__((section("dol_need"), used, aligned(sizeof(void *)))) = {        \
                        sym, offsetof(struct dol_lib, field), isfn};                               \
                (void)0;                                                                           \
        })

/* One loaded library: a link-map namespace of its own with its own environment. */
struct dol_lib {
        struct dol_lib *next;
        unsigned refs;
        char env[1024]; /* the environment given to it (expanded NTBFAB_SISCI_ENV) */
        void *dl;
        sci_desc_t sd; /* the process's descriptor: every resource is opened under it */
#define DOL_FN(name) __typeof__(&name) f_##name;
        SX_FUNCS(DOL_FN)
#undef DOL_FN
#define DOL_C(name)                                                                                \
        unsigned c_##name;                                                                         \
        bool has_##name;
        SX_CONSTS(DOL_C)
#undef DOL_C
};

/* Call a SISCI function of library L: SCI(L, Open, &sd, 0, &err). The library must have it. */
#define SCI(L, name, ...)                                                                          \
        (DOL_NEED("_SISCI_PUBLIC_FUNC_MT_SCI" #name, f_SCI##name, true),                           \
         (L)->f_SCI##name(__VA_ARGS__))
/* A constant of L the library must have; SCO: one whose has_<name> the caller checked. */
#define SC(L, name)  (DOL_NEED("_SISCI_PUBLIC_CONST_" #name, has_##name, false), (L)->c_##name)
#define SCO(L, name) ((L)->c_##name)

/* The library's file: NTBFAB_SISCI_LIB, else the first found of the default places. why gets
 * the sentence when there is none. */
int ntbf__dol_find(char *path, size_t len, char *why, size_t whylen);
/* The library loaded for node n of t (its environment expanded for it), referenced. */
int ntbf__dol_get(const struct ntbf_topo *t, uint32_t n, struct dol_lib **out, char *why,
                  size_t whylen);
void ntbf__dol_put(struct dol_lib *L);
void ntbf__dol_ref(struct dol_lib *L);
/* An ntbfab error for a SISCI one (what the vtable's callers expect), and its sentence. */
int ntbf__dol_err(sci_error_t e);
const char *ntbf__dol_errstr(struct dol_lib *L, sci_error_t e);
/* One unsigned-int answer of SCIQuery(SCI_Q_ADAPTER, sub) for adapter number ano, port. */
sci_error_t ntbf__dol_qadapter(struct dol_lib *L, unsigned ano, unsigned port, unsigned sub,
                               unsigned *out);

/* ---- the process's objects ------------------------------------------------------------------ */

#define DOL_PAGE             UINT64_C(4096)
/*
 * Segment ids the backend uses on every node (docs/dolphin.md): a slot of adapter A's window
 * programmed inbound (peer_xlat_set) is the segment 0x40000000 | A << 16 | slot on the node
 * whose memory it leads to. Everything else it creates has an automatic id.
 */
#define DOL_SLOT_ID(a, slot) (UINT32_C(0x40000000) | (uint32_t)(a) << 16 | (uint32_t)(slot))
#define DOL_MAX_ADAPTERS     0x4000u
#define DOL_MAX_SLOTS        0x10000u

/* A local segment this process made: memory for export, an attached range, a slot. */
struct dol_seg {
        struct dol_seg *next;
        sci_local_segment_t seg;
        sci_map_t map; /* mapped in this process (memory for export, host maps), or NULL */
        uint8_t *addr;
        uint64_t bus, size; /* its memory: physical address and bytes */
        uint32_t id;
        unsigned devmaps; /* mappings for devices of it */
};

/* A connection to a slot's segment on another node: shared by maps, writes and DMA. */
struct dol_conn {
        struct dol_conn *next;
        sci_remote_segment_t rseg;
        uint32_t slot, node_id, id;
        uint64_t size;  /* bytes the slot translates (the segment's size) */
        unsigned refs;  /* users; the handle's current connection of a slot holds one */
        bool stale;     /* the segment went away: no new users */
        sci_map_t imap; /* a mapping of all of it, for window_write (or NULL) */
        uint8_t *iaddr;
};

/* One part of a window mapping: a slot's translated bytes, mapped through SISCI. */
struct dol_part {
        sci_map_t map;
        struct dol_conn *c;
};

/* A window mapping (map_window): reserved addresses with each slot's part laid in place. */
struct dol_wmap {
        struct dol_wmap *next;
        uint8_t *va;
        uint64_t size;
        unsigned nparts;
        struct dol_part parts[];
};

struct dol_chan;
struct dol_irqs;
struct dol_dev;
struct dol_dmap;

struct ntbf_backend {
        const struct ntbf_topo *t;
        uint32_t node; /* the env's node, or NTBF_NONE */
        pthread_mutex_t lock;
        struct ntbf_adapter_h *hs; /* probed handles (memory for export is found across them) */
        struct dol_lib *keep;      /* the node's library, held from open to close */
};

struct ntbf_adapter_h {
        struct ntbf_adapter_h *next_h; /* in b->hs */
        struct ntbf_backend *b;
        struct dol_lib *L;
        uint32_t adapter, node; /* topology indexes */
        uint32_t node_id;       /* SISCI node id (the cluster file's id of the node) */
        unsigned ano;           /* SISCI adapter number */
        struct ntbf_caps caps;
        char figures[256];  /* which figures came from SCIQuery (for the daemon's log) */
        char warning[1024]; /* the cluster file's figures stand for SISCI's (the daemon says it) */
        pthread_mutex_t lock;
        /* Inbound slots this process programmed onto its host: segment per (adapter, slot). */
        struct dol_inslot {
                struct dol_inslot *next;
                uint32_t adapter, slot;
                struct dol_seg s;
        } * inslots;
        struct dol_conn **cur; /* per slot of this adapter's windows: its current connection */
        uint32_t *hint;        /* per slot: the node id it was last found on (0: none) */
        uint32_t peer_id[64];  /* node ids this adapter reaches, cabled ones first */
        unsigned npeer_ids;
        struct dol_conn *conns;
        struct dol_wmap *wmaps;
        struct dol_seg *mems;  /* mem_alloc's segments */
        struct dol_seg *hmaps; /* mem_map / host_map mappings */
        struct dol_freed {
                uint64_t bus, size;
        } freed[16]; /* memory for export this process freed last (mem_map refuses it) */
        unsigned nfreed;
        /* Events */
        int tfd;
        const struct ntbf_event_ops *ops;
        void *ctx;
        bool up[NTBF_MAX_ADAPTER_PORTS];
        /* DMA (dma.c), interrupts (irq.c) */
        struct dol_chan *chans;
        pthread_mutex_t irq_lock; /* making irqs (it allocates memory, under h->lock) */
        struct dol_irqs *irqs;
        struct dol_bell {
                uint32_t node_id, intno;
                sci_remote_interrupt_t ri;
        } bells[8]; /* doorbells of far vectors this handle rang, connected */
        unsigned nbells;
        /* Devices (dev.c): borrowed from the fabric through this handle, and their maps. */
        struct dol_dev *devs;
        struct dol_dmap *dmaps;
};

/* ---- shared by the files -------------------------------------------------------------------- */

/* The window of h holding address addr (a window address of this adapter) and its slot. */
int ntbf__dol_win_slot(struct ntbf_adapter_h *h, uint64_t addr, uint32_t *win, uint32_t *slot,
                       uint64_t *in_slot);
/* The current connection of h's slot, connected if need be (referenced), or NULL when the
 * slot is not programmed (*err says why). Lock held. */
struct dol_conn *ntbf__dol_conn_get(struct ntbf_adapter_h *h, uint32_t slot, int *err);
void ntbf__dol_conn_put(struct ntbf_adapter_h *h, struct dol_conn *c);
/* A mapping of all of c (lock held), or NULL. */
uint8_t *ntbf__dol_conn_imap(struct ntbf_adapter_h *h, struct dol_conn *c);
int ntbf__dol_mem_alloc(struct ntbf_adapter_h *h, uint64_t size, uint64_t align,
                        struct ntbf_mem *out);
int ntbf__dol_mem_free(struct ntbf_adapter_h *h, struct ntbf_mem *m);
/* This process's segment of memory for export holding [bus, + len) of h's host (made on any
 * of the process's handles of adapters of that host). */
struct dol_seg *ntbf__dol_mem_find(struct ntbf_adapter_h *h, uint64_t bus, uint64_t len,
                                   struct ntbf_adapter_h **owner);
/* A segment of this host's physical memory [addr, + size) (page aligned), not mapped unless
 * map; prepared and available on h's adapter (a DMA source or target, a device mapping). */
int ntbf__dol_attach(struct ntbf_adapter_h *h, uint64_t addr, uint64_t size, bool map,
                     struct dol_seg *s);
void ntbf__dol_detach(struct ntbf_adapter_h *h, struct dol_seg *s);

/* The handles of this process, for devices and vectors (dev.c, irq.c). */
int ntbf__dol_dma_submit(struct ntbf_adapter_h *h, uint32_t chan, uint64_t src, uint64_t dst,
                         uint64_t len, uint64_t cookie);
int ntbf__dol_dma_poll(struct ntbf_adapter_h *h, uint32_t chan, uint64_t *cookies, int *status,
                       unsigned max);
void ntbf__dol_dma_release(struct ntbf_adapter_h *h);

int ntbf__dol_irq_alloc(struct ntbf_adapter_h *h, struct ntbf_irq *out);
int ntbf__dol_irq_free(struct ntbf_adapter_h *h, struct ntbf_irq *irq);
int ntbf__dol_irq_trigger(struct ntbf_adapter_h *h, uint64_t addr, uint32_t data);
/* After a 4-byte write through c at offset off: ring the vector's doorbell if it is one. */
void ntbf__dol_irq_doorbell(struct ntbf_adapter_h *h, struct dol_conn *c, uint64_t off);
void ntbf__dol_irq_release(struct ntbf_adapter_h *h);

int ntbf__dol_dev_map(struct ntbf_adapter_h *h, uint32_t device, uint32_t f, uint64_t addr,
                      uint64_t size, uint64_t *ioaddr);
int ntbf__dol_dev_unmap(struct ntbf_adapter_h *h, uint32_t device, uint32_t f, uint64_t ioaddr);
void ntbf__dol_dev_release(struct ntbf_adapter_h *h);
int ntbf__dol_cfg_read(struct ntbf_backend *b, uint32_t device, uint32_t f, uint32_t off,
                       uint32_t size, uint32_t *val);
int ntbf__dol_cfg_write(struct ntbf_backend *b, uint32_t device, uint32_t f, uint32_t off,
                        uint32_t size, uint32_t val);

#endif
