/* daemon/entry.h: hardware entries (what one node programs) derived from the fabric manager's
 * plans. */
#ifndef NTBF_DAEMON_ENTRY_H
#define NTBF_DAEMON_ENTRY_H

#include <json-c/json.h>

#include "ntbfab/backend.h"
#include "ntbfab/budget.h"

/*
 * The fabric manager decides; nodes program. Between the two travel entries: one LUT
 * slot, one requester-ID table entry, one switch registration, one IOMMU range, one
 * isolation domain or one range in it, each naming the node that programs it. The set
 * of entries the fabric needs is a function of the budget state (every live plan plus the
 * CPU baseline), so a borrow programs exactly the entries its commit added to that set, a
 * return clears exactly those its release removed, and a restarted node makes its
 * hardware equal to its part of the set (docs/daemon.md).
 *
 * An entry's canonical form is one line of text (its key), used on the wire, in the
 * database and to compare sets:
 *   swrid  PROG SWITCH NODE RID MASK          requester on every connected port of a switch
 *   rid    PROG ADAPTER NODE RID MASK         requester in an adapter's table
 *   iommu  PROG NODE IOVA PHYS LEN            host IOMMU pages for inbound traffic
 *   deviso PROG DEVICE NODE RID MASK          the device in its own IOMMU domain
 *   devmap PROG DEVICE NODE RID MASK IOVA LEN identity pages of that domain
 *   mcast  PROG ADAPTER GROUP ADDR LEN        multicast membership: group writes land at ADDR
 *   slot   PROG ADAPTER SLOT DNODE DADAPTER GROUP ADDR   a LUT slot's translation
 * (numbers decimal, addresses 0x-hex, GROUP 4294967295 for none). The kinds are listed in
 * the order they are programmed: what a slot leads to exists before the slot does. A GROUP is
 * the group's slot number on the switches (what the hardware knows), not the core's label.
 */
enum ntbf__ent_kind {
        NTBF_ENT_SWRID,
        NTBF_ENT_RID,
        NTBF_ENT_IOMMU,
        NTBF_ENT_DEVISO,
        NTBF_ENT_DEVMAP,
        NTBF_ENT_MCAST,
        NTBF_ENT_SLOT,
        NTBF_ENT_KINDS
};

struct ntbf__ent {
        enum ntbf__ent_kind kind;
        uint32_t prog; /* node index of the programmer */
        uint32_t obj;  /* SLOT, RID, MCAST: adapter; SWRID: switch; IOMMU: node; DEVISO, DEVMAP:
                          device */
        uint32_t slot;
        uint32_t dst_node, dst_adapter, group; /* SLOT; MCAST: group */
        uint64_t addr; /* SLOT: far-side address; IOMMU, DEVMAP: iova; MCAST: overlay address */
        uint64_t phys, len;  /* IOMMU (phys, len), DEVMAP, MCAST (len) */
        struct ntbf_rid rid; /* RID, SWRID, DEVISO, DEVMAP */
};

#define NTBF_ENT_KEY_MAX 128
typedef char ntbf__entkey[NTBF_ENT_KEY_MAX + 1];

const char *ntbf__ent_key(const struct ntbf__ent *e, char *buf, size_t len);
/* Parse a key, checking every index against the topology. 0 or -EINVAL. */
int ntbf__ent_parse(const struct ntbf_topo *t, const char *key, struct ntbf__ent *e);
/* A sentence for logs: "slot 4 of lender.ntb0 -> borrower IOVA 0x400000". */
const char *ntbf__ent_describe(const struct ntbf_topo *t, const struct ntbf__ent *e, char *buf,
                               size_t len);

/* A sorted set of entry keys. */
struct ntbf__entset {
        char **v;
        size_t n, cap;
};
void ntbf__entset_free(struct ntbf__entset *s);
int ntbf__entset_add(struct ntbf__entset *s, const char *key); /* unsorted until _sort */
void ntbf__entset_sort(struct ntbf__entset *s);                /* sort and drop duplicates */
bool ntbf__entset_has(const struct ntbf__entset *s, const char *key);
/* out = a - b (both sorted). */
int ntbf__entset_diff(const struct ntbf__entset *a, const struct ntbf__entset *b,
                      struct ntbf__entset *out);
/* Keep only the entries programmed by node. */
void ntbf__entset_only(struct ntbf__entset *s, const struct ntbf_topo *t, uint32_t node);

/* Requester IDs as tables hold them (a device: all its functions; a CPU: its k-th ID). */
struct ntbf_rid ntbf__dev_rid(const struct ntbf_topo *t, uint32_t device);
struct ntbf_rid ntbf__cpu_rid(uint32_t node, uint32_t k);

/* Every entry the fabric needs for state s (its baseline and live plans), sorted. */
int ntbf__ents_of_state(const struct ntbf_state *s, struct ntbf__entset *out);
/* The baseline's entries (CPUs in switch requester tables), and one plan's (unsorted; a key
 * may repeat): the state's are theirs together. */
int ntbf__base_ents(const struct ntbf_state *s, struct ntbf__entset *out);
int ntbf__plan_ents(const struct ntbf_state *s, const struct ntbf_plan *p,
                    struct ntbf__entset *out);
/* Whether a plan's entries depend on other allocations too (a multicast group's slot is
 * numbered among the groups with members), not only on the plan. */
bool ntbf__plan_ents_shared(const struct ntbf_plan *p);

/* A sorted set of keys with how many holders need each (the manager's desired entries: the
 * baseline and every allocation hold theirs); a key is in keys while it has a holder. */
struct ntbf__entcount {
        struct ntbf__entset keys;
        uint32_t *n; /* holders of keys.v[i] */
        size_t cap;  /* of n */
};
void ntbf__entcount_free(struct ntbf__entcount *c);
/* One more holder of key (add), or one fewer: 0, -ENOMEM, or -ENOENT (held by none). */
int ntbf__entcount_step(struct ntbf__entcount *c, const char *key, bool add);
uint32_t ntbf__entcount_of(const struct ntbf__entcount *c, const char *key);

/* ---- plans as JSON (the fabric manager's database) ------------------------------------------ */

struct json_object *ntbf__plan_json(const struct ntbf_plan *p);
/* Rebuild a plan (ntbf_plan_init'ed by the caller); -EINVAL if o is not a plan of topology t. */
int ntbf__plan_from_json(const struct ntbf_topo *t, struct json_object *o, struct ntbf_plan *p);
/*
 * Replay: commit a stored plan into a state rebuilt from the plans before it. Whether each
 * resource finds its slot, entry or range already taken ("shared") depends on the plans
 * released in between, so the flags are set from the state as it is now.
 */
int ntbf__plan_replay(struct ntbf_state *s, struct ntbf_plan *p, uint32_t *id);

/* A path as docs/cli.md's PATH object. */
struct json_object *ntbf__path_json(const struct ntbf_topo *t, const struct ntbf_path *p);

#endif
