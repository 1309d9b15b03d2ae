/* tests/conformance/conformance.h: the backend conformance suite: its context, checks and helpers.
 */
#ifndef NTBF_CONFORMANCE_H
#define NTBF_CONFORMANCE_H

#include "ntbfab/backend.h"
#include "ntbfab/error.h"
#include "ntbfab/path.h"

/*
 * ntbfab-conformance runs in one process that opens both adapters of a pair (two adapters
 * of one machine cabled together, or the simulated fabric). A check is a function over a
 * subject (the backend, one adapter, or a pair of adapters); it stops at its first broken
 * expectation and says what was expected and what happened. Everything a check programs
 * is recorded as an undo entry and taken back when the check ends, pass or fail, so one
 * failure does not cascade into the next checks.
 */

enum cf_status { CF_PASS, CF_FAIL, CF_SKIP };

/* Events an adapter handle has dispatched since the last cf_ev_reset. */
#define CF_EV_LOG 64
struct cf_events {
        unsigned links, dbs, msgs, resets; /* callbacks seen */
        unsigned calls;                    /* callbacks during the current process_events */
        struct {
                uint32_t port;
                bool up;
        } link[CF_EV_LOG];
        struct {
                uint32_t vector;
                uint64_t bits;
        } db[CF_EV_LOG];
        struct {
                uint32_t peer, midx, value;
        } msg[CF_EV_LOG];
};

/* An adapter under test: probed once; its events are recorded for the whole run. */
struct cf_ad {
        uint32_t idx, node;
        char name[2 * 32 + 2]; /* "node.adapter" */
        struct ntbf_adapter_h *h;
        struct ntbf_caps caps;
        struct cf_events ev;
        uint32_t partner;      /* an adapter this one reaches, for probes of peer callbacks */
        struct ntbf_mem stage; /* DMA staging memory (cf_tx through the DMA engine) */
        bool staged;
};

#define CF_MAX_SWITCHES 16
#define CF_MAX_MEMBERS  8

/* Two adapters whose hosts reach each other: A issues, B receives. */
struct cf_pair {
        struct cf_ad *a, *b;
        bool via_switch;
        uint32_t a_port, b_port;           /* cable ports of the route at each end */
        uint32_t sw[CF_MAX_SWITCHES], nsw; /* switches on the route */
        struct cf_ad *members[CF_MAX_MEMBERS];
        unsigned nmembers; /* other adapters A reaches through switches (multicast) */
        char label[256];
};

enum cf_scope { CF_ONCE, CF_ADAPTER, CF_PAIR, CF_SWITCH_PAIR };

struct cf_run;
struct cf_check {
        const char *name;
        enum cf_scope scope;
        int (*fn)(struct cf_run *r);
        const char *proves;
};

struct cf_ctx {
        const struct ntbf_backend_ops *ops;
        struct ntbf_backend *b;
        struct ntbf_backend_env env; /* what b was opened with (a second process opens it too) */
        const struct ntbf_topo *t;
        bool sim;      /* the simulated fabric: transactions as any requester */
        bool dma_only; /* --access dma: data and counted accesses through the DMA engine */
        /* --fixed-windows: each window translates only to one fixed address, and every
         * access through it reaches that memory, translated or not, link up or down (the
         * kernel tier's emulated NTB): no dropped access is expected, none asserted. */
        bool fixed_windows;
        unsigned timeout_ms, quiet_ms;
        struct cf_ad *ads;
        unsigned nads;
        struct cf_pair *pairs;
        unsigned npairs;
        uint32_t *sw_held; /* per switch: entries the suite keeps there (the CPU baselines) */
        struct ntbf_sim_devhost *devhost;
        uint64_t cookie;
};

struct cf_undo;
struct cf_run {
        struct cf_ctx *cx;
        const struct cf_check *chk;
        struct cf_ad *ad;  /* CF_ADAPTER */
        struct cf_pair *p; /* CF_PAIR, CF_SWITCH_PAIR */
        char subject[256];
        enum cf_status status;
        char reason[1024];
        bool uncounted; /* counters were compared for nothing: an adapter counts nothing */
        bool undropped; /* --fixed-windows: drops this check expects were not asserted */
        double ms;
        struct cf_undo *undo;
        size_t nundo, capundo;
};

/* ---- reporting: each returns -1 so that `return cf_fail(...)` stops the check -------------- */

int cf_fail_at(struct cf_run *r, const char *file, int line, const char *fmt, ...)
    NTBF_PRINTF(4, 5);
int cf_skip(struct cf_run *r, const char *fmt, ...) NTBF_PRINTF(2, 3);
int cf_fail_rc(struct cf_run *r, const char *file, int line, int want, int got, const char *fmt,
               ...) NTBF_PRINTF(6, 7);
int cf_fail_u64(struct cf_run *r, const char *file, int line, uint64_t want, uint64_t got,
                const char *fmt, ...) NTBF_PRINTF(6, 7);
/* "0 (OK)", "-EINVAL (Invalid argument)", "NTBF_EUNSUPPORTED (...)". */
const char *cf_err(int e, char *buf, size_t len);

#define CF_FAIL(r, ...) return cf_fail_at((r), __FILE__, __LINE__, __VA_ARGS__)
#define CF_SKIP(r, ...) return cf_skip((r), __VA_ARGS__)
/* Propagate a helper's failure (it already recorded why). */
#define CF_TRY(x)                                                                                  \
        do {                                                                                       \
                if ((x) < 0)                                                                       \
                        return -1;                                                                 \
        } while (0)
/* call must return want; the message names the call. */
#define CF_RC(r, want, call, ...)                                                                  \
        do {                                                                                       \
                int rc_ = (call);                                                                  \
                if (rc_ != (want))                                                                 \
                        return cf_fail_rc((r), __FILE__, __LINE__, (want), rc_, __VA_ARGS__);      \
        } while (0)
#define CF_OK(r, call, ...) CF_RC(r, 0, call, __VA_ARGS__)
/* Two unsigned figures must be equal. */
#define CF_EQ(r, got, want, ...)                                                                   \
        do {                                                                                       \
                uint64_t g_ = (uint64_t)(got), w_ = (uint64_t)(want);                              \
                if (g_ != w_)                                                                      \
                        return cf_fail_u64((r), __FILE__, __LINE__, w_, g_, __VA_ARGS__);          \
        } while (0)
#define CF_TRUE(r, cond, ...)                                                                      \
        do {                                                                                       \
                if (!(cond))                                                                       \
                        CF_FAIL(r, __VA_ARGS__);                                                   \
        } while (0)

/* ---- undo: what a check programmed, taken back LIFO when it ends ----------------------------- */

/* Each returns 0 or -1 after recording a failure. */
int cf_slot_set(struct cf_run *r, struct cf_pair *p, bool inbound, uint32_t slot,
                const struct ntbf_xlat *x);
int cf_slot_clear(struct cf_run *r, struct cf_pair *p, bool inbound, uint32_t slot);
/* Whether A's slots can be programmed, and how: outbound by A, else inbound by B. */
int cf_slot_how(struct cf_run *r, struct cf_pair *p, bool *inbound);
int cf_mem(struct cf_run *r, struct cf_ad *ad, uint64_t size, uint64_t align, struct ntbf_mem *m);
/* mem_alloc that may fail (returns its code); registers the undo on success. */
int cf_mem_try(struct cf_run *r, struct cf_ad *ad, uint64_t size, uint64_t align,
               struct ntbf_mem *m);
/* Free m now (its undo is dropped); returns mem_free's code. */
int cf_mem_free(struct cf_run *r, struct cf_ad *ad, struct ntbf_mem *m);
void cf_undo_rid(struct cf_run *r, struct cf_ad *ad, const struct ntbf_rid *rid);
void cf_undo_swrid(struct cf_run *r, struct cf_ad *ad, uint32_t sw, const struct ntbf_rid *rid);
void cf_undo_map(struct cf_run *r, struct cf_ad *ad, void *addr, uint64_t size);
void cf_undo_host_map(struct cf_run *r, struct cf_ad *ad, void *addr, uint64_t size);
/* Two distinct vectors of ad (irq_alloc, freed when the check ends), eventfds idle. */
int cf_irq_two(struct cf_run *r, struct cf_ad *ad, struct ntbf_irq v[2]);
/* Vector i's eventfd is signalled within the timeout of `how` (read, once) and the other
 * vector's stays idle. */
int cf_irq_expect(struct cf_run *r, struct cf_ad *ad, const struct ntbf_irq v[2], int i,
                  const char *how);
/* host_unmap now (its undo is dropped); returns host_unmap's code. */
int cf_host_unmap(struct cf_run *r, struct cf_ad *ad, void *addr, uint64_t size);
void cf_undo_iommu(struct cf_run *r, struct cf_ad *ad, uint64_t iova, uint64_t len);
/* Undo isolation of a requester (dev_isolate off) at the end of the check. */
void cf_undo_isolate(struct cf_run *r, struct cf_ad *ad, const struct ntbf_rid *rid);
void cf_undo_irq(struct cf_run *r, struct cf_ad *ad, const struct ntbf_irq *irq);
void cf_undo_mcast(struct cf_run *r, struct cf_ad *ad, uint32_t group);
void cf_undo_link(struct cf_run *r, struct cf_ad *ad, uint32_t port);
void cf_undo_dbmask(struct cf_run *r, struct cf_ad *ad, uint64_t bits);
void cf_undo_events(struct cf_run *r, struct cf_ad *ad);
void cf_undo_spads(struct cf_run *r, struct cf_ad *ad);
/* Run every undo entry, newest first. */
void cf_undo_all(struct cf_run *r);

/* ---- events ------------------------------------------------------------------------------ */

extern const struct ntbf_event_ops cf_event_ops;
/* The same without msg_event: messages then wait in their registers for msg_read. */
extern const struct ntbf_event_ops cf_event_ops_nomsg;
void cf_ev_reset(struct cf_ad *ad);
/* One process_events call; its return value must count the callbacks it made. */
int cf_process(struct cf_run *r, struct cf_ad *ad);
/* Dispatch whatever is pending now (no wait) and forget it. */
int cf_drain(struct cf_run *r, struct cf_ad *ad);
/* Wait until *counter >= want: poll event_fd, process_events. -1 (recorded) on timeout. */
int cf_wait_ev(struct cf_run *r, struct cf_ad *ad, const unsigned *counter, unsigned want,
               const char *what);
/* Pump events for the quiet period; returns 0 or -1 (recorded: process_events failed). */
int cf_quiet(struct cf_run *r, struct cf_ad *ad);

/* ---- accesses ---------------------------------------------------------------------------- */

/* ---- slots and windows ------------------------------------------------------------------- */

/* The window of ad holding adapter slot `slot` (its index in *win), or NULL. */
const struct ntbf_window *cf_slot_window(const struct cf_ad *ad, uint32_t slot, uint32_t *win);
/* Physical address of slot's first byte in ad's host (0 if there is no such slot). */
uint64_t cf_slot_addr(const struct cf_ad *ad, uint32_t slot);
uint64_t cf_slot_size(const struct cf_ad *ad, uint32_t slot);
/* The size the suite programs a whole slot with: size_max, down to a multiple of size_align. */
uint64_t cf_xsize(const struct cf_ad *ad, uint32_t slot);
/* The alignment of a far address for a translation of `size` bytes in slot's window. */
uint64_t cf_xalign(const struct cf_ad *ad, uint32_t slot, uint64_t size);
/* The n-th slot of ad the suite may program (not reserved), in slot order; NTBF_NONE past the
 * last. Checks use slot cf_slot(ad, 0), and cf_slot(ad, 1) where they need two. */
uint32_t cf_slot(const struct cf_ad *ad, uint32_t n);

/* A window of A for data checks: a direct CPU mapping, or A's DMA engine. */
struct cf_win {
        struct cf_pair *p;
        uint32_t win;        /* A's window */
        uint8_t *cpu;        /* mapping from `base`, or NULL: DMA */
        uint64_t off;        /* offset of the mapping in the window */
        uint64_t base, size; /* physical address of the mapping's first byte; its bytes */
};
/* Map slots [first, first+n) of A, all of one window (or prepare the DMA route). Skips when
 * neither exists. */
int cf_win_open(struct cf_run *r, struct cf_pair *p, uint32_t first, uint32_t n, struct cf_win *w);
/* Unmap a CPU window now (nothing for DMA). */
int cf_win_close(struct cf_run *r, struct cf_win *w);
/* 8-byte write / read at physical address at of A's host, inside the mapped range.
 * *status: 0 or the DMA completion status (CPU accesses have none: 0). */
int cf_win_write(struct cf_run *r, struct cf_win *w, uint64_t at, uint64_t v, int *status);
int cf_win_read(struct cf_run *r, struct cf_win *w, uint64_t at, uint64_t *v, int *status);
/* A read that must have been dropped: all ones, or a failed DMA completion. */
int cf_win_expect_dropped(struct cf_run *r, struct cf_win *w, uint64_t at, const char *what);
/* Whether the hardware under test drops accesses through untranslated windows and windows
 * whose link is down; false with --fixed-windows, and the check's result then says that its
 * drops were not checked. */
bool cf_drops(struct cf_run *r);
const char *cf_win_how(const struct cf_win *w);

enum cf_tx { CF_TX_NONE, CF_TX_SIM, CF_TX_DMA };
/* How counted transactions of ad are issued; why says why not when CF_TX_NONE. */
enum cf_tx cf_tx_mode(struct cf_ctx *cx, struct cf_ad *ad, const char **why);
/*
 * One transaction of len (<= 4096) bytes at physical address addr of ad's host, issued by
 * requester rid (the simulated fabric) or by ad's DMA engine (rid is then the engine's
 * own). *status: 0 or the drop reason. A failed read leaves buf all ones.
 */
int cf_tx(struct cf_run *r, struct cf_ad *ad, uint16_t rid, bool write, uint64_t addr, void *buf,
          size_t len, int *status);

/* Start the simulated fabric's device host if a DMA engine is about to be used. */
int cf_need_dma(struct cf_run *r);
/* Copy with ad's DMA engine and wait for the completion (0 after status was stored). */
int cf_dma(struct cf_run *r, struct cf_ad *ad, uint32_t chan, uint64_t src, uint64_t dst,
           uint64_t len, int *status);
/* Collect n completions of chan that must carry cookies[0..n) in that order. */
int cf_dma_wait(struct cf_run *r, struct cf_ad *ad, uint32_t chan, const uint64_t *cookies,
                int *status, unsigned n);
void cf_dma_drain(struct cf_ctx *cx, struct cf_ad *ad);

/* ---- targets: memory of B behind slots of A ---------------------------------------------- */

struct cf_target {
        struct ntbf_mem mem; /* on B */
        uint64_t far;        /* far-side address of the first slot's block (IOVA = bus address
                                when B claims an IOMMU: identity mapped) */
        uint32_t slot, nslots;
        uint64_t E;    /* A's slot size (block j of the memory sits behind slot + j) */
        uint64_t xs;   /* bytes each slot translates (cf_xsize) */
        uint64_t addr; /* physical address of the first slot in A's host */
};
/* Memory on B for nslots slots of A from slot, programmed onto it (outbound, else inbound). */
int cf_target(struct cf_run *r, struct cf_pair *p, uint32_t slot, uint32_t nslots,
              struct cf_target *tg);
/* Memory of B's inbound domain for len bytes (identity mapped in B's IOMMU when claimed). */
int cf_far_mem(struct cf_run *r, struct cf_ad *b, uint64_t len, uint64_t align, struct ntbf_mem *m);

/* An IOVA of node's inbound domain that nothing in its map claims ahead of its IOMMU. */
uint64_t cf_free_iova(const struct ntbf_topo *t, uint32_t node, uint64_t align);
/* An aligned range of node's physical address space that nothing claims (a master abort). */
uint64_t cf_unclaimed(const struct ntbf_topo *t, uint32_t node, uint64_t align);

/* ---- small things ------------------------------------------------------------------------ */

uint64_t cf_pattern(uint32_t seed, uint64_t k);
uint64_t cf_load64(const void *p);
void cf_store64(void *p, uint64_t v);
bool cf_poll_readable(int fd, unsigned ms);
#define cf_cap_name ntbf_cap_name
/* Skip with "not claimed: ..." unless every adapter given claims flag (an optional feature). */
int cf_need_cap(struct cf_run *r, uint32_t flag, struct cf_ad *a, struct cf_ad *b);
double cf_now_ms(void);
void cf_sleep_us(unsigned us);
/* Snapshot of counters (zeros when ad does not claim NTBF_CAP_COUNTERS). */
int cf_counters(struct cf_run *r, struct cf_ad *ad, struct ntbf_counters *c);
/* got - base must equal want field by field (nothing compared, and the run noted as
 * uncounted, when the adapter named does not claim NTBF_CAP_COUNTERS). */
int cf_counters_delta(struct cf_run *r, const struct cf_ad *ad, const char *what,
                      const struct ntbf_counters *base, const struct ntbf_counters *got,
                      const struct ntbf_counters *want);

/* ---- the checks ---------------------------------------------------------------------------- */

extern const struct cf_check cf_checks[];
extern const size_t cf_nchecks;

#endif
