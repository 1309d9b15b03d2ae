/* core/topology.c: building the fabric model, assigning addresses and checking its rules. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntbfab/error.h"
#include "ntbfab/topology.h"
#include "ntbfab/units.h"
#include "graph.h"
#include "strmap.h"

/* x86-like defaults for a node's physical address map (docs/model.md). */
#define DEFAULT_RAM            (4 * NTBF_GiB)
#define DEFAULT_MMIO_LOW_BASE  UINT64_C(0x80000000)
#define DEFAULT_MMIO_LOW_END   UINT64_C(0xfec00000)
#define DEFAULT_MMIO_HIGH_BASE UINT64_C(0x38000000000)
#define FOUR_GIB               (4 * NTBF_GiB)
#define MIN_SLOT               (4 * NTBF_KiB)

struct ntbf_topo *ntbf_topo_new(const char *name, const char *file)
{
        struct ntbf_topo *t = calloc(1, sizeof(*t));
        if (!t)
                return NULL;
        snprintf(t->name, sizeof(t->name), "%s", name ? name : "");
        snprintf(t->backend, sizeof(t->backend), "sim");
        t->opts.lease_ms = NTBF_DEFAULT_LEASE_MS;
        if (file && !(t->file = strdup(file))) {
                free(t);
                return NULL;
        }
        return t;
}

void ntbf_topo_free(struct ntbf_topo *t)
{
        if (!t)
                return;
        for (uint32_t i = 0; t->nodes && i < t->nnodes; i++) {
                free(t->nodes[i].adapters);
                free(t->nodes[i].devices);
        }
        for (uint32_t i = 0; t->switches && i < t->nswitches; i++)
                free(t->switches[i].link);
        if (t->maps)
                for (uint32_t i = 0; i < t->nnodes; i++)
                        free(t->maps[i].v);
        free(t->maps);
        ntbf__graph_free(t->graph);
        free(t->nodes);
        free(t->adapters);
        free(t->switches);
        free(t->links);
        free(t->devices);
        free(t->chassis);
        free(t->file);
        free(t->key_file);
        free(t);
}

static void *dup_array(const void *v, uint32_t n, size_t sz)
{
        void *p = malloc((n ? n : 1) * sz);
        if (p && n)
                memcpy(p, v, n * sz);
        return p;
}

struct ntbf_topo *ntbf_topo_clone(const struct ntbf_topo *t)
{
        struct ntbf_topo *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        memcpy(c->name, t->name, sizeof(c->name));
        memcpy(c->backend, t->backend, sizeof(c->backend));
        c->nodes = dup_array(t->nodes, t->nnodes, sizeof(*t->nodes));
        c->adapters = dup_array(t->adapters, t->nadapters, sizeof(*t->adapters));
        c->switches = dup_array(t->switches, t->nswitches, sizeof(*t->switches));
        c->links = dup_array(t->links, t->nlinks, sizeof(*t->links));
        c->devices = dup_array(t->devices, t->ndevices, sizeof(*t->devices));
        c->chassis = dup_array(t->chassis, t->nchassis, sizeof(*t->chassis));
        c->nnodes = c->cap_nodes = t->nnodes;
        c->nadapters = c->cap_adapters = t->nadapters;
        c->nswitches = c->cap_switches = t->nswitches;
        c->nlinks = c->cap_links = t->nlinks;
        c->ndevices = c->cap_devices = t->ndevices;
        c->nchassis = c->cap_chassis = t->nchassis;
        c->file = t->file ? strdup(t->file) : NULL;
        c->key_file = t->key_file ? strdup(t->key_file) : NULL;
        c->opts = t->opts;
        bool ok = c->nodes && c->adapters && c->switches && c->links && c->devices && c->chassis &&
                  (!t->file || c->file) && (!t->key_file || c->key_file);
        /* Derived data belongs to the original: finalize rebuilds it for the copy. */
        for (uint32_t i = 0; c->nodes && i < c->nnodes; i++) {
                c->nodes[i].adapters = c->nodes[i].devices = NULL;
                c->nodes[i].nadapters = c->nodes[i].ndevices = 0;
        }
        for (uint32_t i = 0; c->switches && i < c->nswitches; i++)
                c->switches[i].link = NULL;
        if (!ok) {
                ntbf_topo_free(c);
                return NULL;
        }
        return c;
}

/* Grow *v (of *cap elements of size sz) to hold n + 1. */
static int reserve(void **v, uint32_t *cap, uint32_t n, size_t sz)
{
        if (n < *cap)
                return 0;
        uint32_t c = *cap ? *cap * 2 : 8;
        void *p = realloc(*v, (size_t)c * sz);
        if (!p)
                return -ENOMEM;
        memset((char *)p + (size_t)*cap * sz, 0, (size_t)(c - *cap) * sz);
        *v = p;
        *cap = c;
        return 0;
}

#define RESERVE(t, arr, n, cap) reserve((void **)&(t)->arr, &(t)->cap, (t)->n, sizeof(*(t)->arr))

static void set_name(char *dst, const char *src)
{
        snprintf(dst, NTBF_NAME_MAX + 1, "%s", src ? src : "");
}

uint32_t ntbf_topo_add_node(struct ntbf_topo *t, const char *name, uint32_t id)
{
        if (RESERVE(t, nodes, nnodes, cap_nodes))
                return NTBF_NONE;
        struct ntbf_node *n = &t->nodes[t->nnodes];
        memset(n, 0, sizeof(*n));
        set_name(n->name, name);
        n->id = id;
        n->ram = DEFAULT_RAM;
        n->cpu_rids = 2;
        n->iommu = true;
        n->mmio_low_base = DEFAULT_MMIO_LOW_BASE;
        n->mmio_low_end = DEFAULT_MMIO_LOW_END;
        n->mmio_high_base = DEFAULT_MMIO_HIGH_BASE;
        t->finalized = false;
        return t->nnodes++;
}

uint32_t ntbf_topo_add_adapter(struct ntbf_topo *t, uint32_t node, const char *name,
                               const struct ntbf_adapter_params *model)
{
        if (node >= t->nnodes || !model || RESERVE(t, adapters, nadapters, cap_adapters))
                return NTBF_NONE;
        struct ntbf_adapter *a = &t->adapters[t->nadapters];
        memset(a, 0, sizeof(*a));
        set_name(a->name, name);
        a->node = node;
        a->p = *model;
        a->stx.partition = -1;
        for (uint32_t i = 0; i < NTBF_MAX_ADAPTER_PORTS; i++)
                a->link[i] = NTBF_NONE;
        t->finalized = false;
        return t->nadapters++;
}

uint32_t ntbf_topo_add_switch(struct ntbf_topo *t, const char *name,
                              const struct ntbf_switch_params *model)
{
        if (!model || RESERVE(t, switches, nswitches, cap_switches))
                return NTBF_NONE;
        struct ntbf_switch *s = &t->switches[t->nswitches];
        memset(s, 0, sizeof(*s));
        set_name(s->name, name);
        s->p = *model;
        t->finalized = false;
        return t->nswitches++;
}

uint32_t ntbf_topo_add_link(struct ntbf_topo *t, struct ntbf_port_ref a, struct ntbf_port_ref b)
{
        if (RESERVE(t, links, nlinks, cap_links))
                return NTBF_NONE;
        struct ntbf_link *l = &t->links[t->nlinks];
        memset(l, 0, sizeof(*l));
        l->end[0] = a;
        l->end[1] = b;
        t->finalized = false;
        return t->nlinks++;
}

uint32_t ntbf_topo_add_device(struct ntbf_topo *t, uint32_t node, const char *name)
{
        if (node >= t->nnodes || RESERVE(t, devices, ndevices, cap_devices))
                return NTBF_NONE;
        struct ntbf_device *d = &t->devices[t->ndevices];
        memset(d, 0, sizeof(*d));
        set_name(d->name, name);
        d->node = node;
        d->functions = 1;
        d->dma_bits = 64;
        d->chassis = NTBF_NONE;
        t->finalized = false;
        return t->ndevices++;
}

uint32_t ntbf_topo_add_chassis(struct ntbf_topo *t, uint32_t node, const char *name)
{
        if (node >= t->nnodes || RESERVE(t, chassis, nchassis, cap_chassis))
                return NTBF_NONE;
        struct ntbf_chassis *c = &t->chassis[t->nchassis];
        memset(c, 0, sizeof(*c));
        set_name(c->name, name);
        c->node = node;
        c->hop_ns = NTBF_CHASSIS_HOP_NS;
        c->uplink_ns = NTBF_CHASSIS_UPLINK_NS;
        t->finalized = false;
        return t->nchassis++;
}

void ntbf_sim_defaults(struct ntbf_sim_params *sim, enum ntbf_sim_model model)
{
        memset(sim, 0, sizeof(*sim));
        sim->model = model;
        if (model == NTBF_SIM_NVME) {
                sim->capacity = 1 * NTBF_GiB;
                sim->queues = 32;
                sim->lba_size = 512;
                sim->mdts = 5; /* 32 pages: 128 KiB */
        } else if (model == NTBF_SIM_ACCEL) {
                sim->memory = 256 * NTBF_MiB;
        }
}

void ntbf_device_apply_sim(struct ntbf_device *d)
{
        memset(d->bars, 0, sizeof(d->bars));
        d->vendor_id = NTBF_SIM_VENDOR_ID;
        switch (d->sim.model) {
        case NTBF_SIM_NVME:
                d->class_code = NTBF_CLASS_NVME;
                d->device_id = NTBF_SIM_NVME_DEVICE_ID;
                /* Registers, doorbells for up to 1024 queue pairs (DSTRD 0) and the MSI-X table. */
                d->bars[0] = (struct ntbf_bar){.size = 16 * NTBF_KiB, .flags = NTBF_BAR_64};
                if (d->sim.cmb)
                        d->bars[2] = (struct ntbf_bar){.size = d->sim.cmb,
                                                       .flags = NTBF_BAR_64 | NTBF_BAR_PREF};
                break;
        case NTBF_SIM_ACCEL:
                d->class_code = NTBF_CLASS_ACCEL;
                d->device_id = NTBF_SIM_ACCEL_DEVICE_ID;
                d->bars[0] = (struct ntbf_bar){.size = 64 * NTBF_KiB, .flags = NTBF_BAR_64};
                d->bars[2] =
                    (struct ntbf_bar){.size = d->sim.memory, .flags = NTBF_BAR_64 | NTBF_BAR_PREF};
                break;
        case NTBF_SIM_NONE:
                break;
        }
}

/* ---- lookups ---------------------------------------------------------------------------- */

uint32_t ntbf_topo_find_node(const struct ntbf_topo *t, const char *name)
{
        for (uint32_t i = 0; name && i < t->nnodes; i++)
                if (!strcmp(t->nodes[i].name, name))
                        return i;
        return NTBF_NONE;
}

uint32_t ntbf_topo_find_node_id(const struct ntbf_topo *t, uint32_t id)
{
        for (uint32_t i = 0; i < t->nnodes; i++)
                if (t->nodes[i].id == id)
                        return i;
        return NTBF_NONE;
}

uint32_t ntbf_topo_find_chassis(const struct ntbf_topo *t, uint32_t node, const char *name)
{
        for (uint32_t i = 0; name && i < t->nchassis; i++)
                if (t->chassis[i].node == node && !strcmp(t->chassis[i].name, name))
                        return i;
        return NTBF_NONE;
}

static const struct ntbf_chassis *chassis_of(const struct ntbf_topo *t, uint32_t device)
{
        uint32_t c = t->devices[device].chassis;
        return c < t->nchassis ? &t->chassis[c] : NULL;
}

uint32_t ntbf_device_root_ns(const struct ntbf_topo *t, uint32_t device)
{
        if (device >= t->ndevices)
                return 0;
        const struct ntbf_chassis *c = chassis_of(t, device);
        return t->devices[device].hop_ns + (c ? c->hop_ns + c->uplink_ns : 0);
}

uint32_t ntbf_topo_local_ns(const struct ntbf_topo *t, uint32_t node, uint32_t from_device,
                            uint32_t to_device)
{
        if (node >= t->nnodes)
                return 0;
        if (from_device < t->ndevices && to_device < t->ndevices) {
                const struct ntbf_chassis *a = chassis_of(t, from_device);
                /* PCIe turns peer-to-peer around at the lowest switch both sit under. */
                if (a && a == chassis_of(t, to_device))
                        return t->devices[from_device].hop_ns + a->hop_ns +
                               t->devices[to_device].hop_ns;
        }
        return ntbf_device_root_ns(t, from_device) + t->nodes[node].root_ns +
               ntbf_device_root_ns(t, to_device);
}

uint32_t ntbf_topo_find_switch(const struct ntbf_topo *t, const char *name)
{
        for (uint32_t i = 0; name && i < t->nswitches; i++)
                if (!strcmp(t->switches[i].name, name))
                        return i;
        return NTBF_NONE;
}

uint32_t ntbf_topo_find_adapter(const struct ntbf_topo *t, uint32_t node, const char *name)
{
        for (uint32_t i = 0; name && i < t->nadapters; i++)
                if (t->adapters[i].node == node && !strcmp(t->adapters[i].name, name))
                        return i;
        return NTBF_NONE;
}

uint32_t ntbf_topo_find_device(const struct ntbf_topo *t, uint32_t node, const char *name)
{
        for (uint32_t i = 0; name && i < t->ndevices; i++)
                if (t->devices[i].node == node && !strcmp(t->devices[i].name, name))
                        return i;
        return NTBF_NONE;
}

bool ntbf_port_eq(struct ntbf_port_ref a, struct ntbf_port_ref b)
{
        return a.kind == b.kind && a.obj == b.obj && a.port == b.port;
}

uint32_t ntbf_topo_port_link(const struct ntbf_topo *t, struct ntbf_port_ref p)
{
        if (p.kind == NTBF_PORT_ADAPTER) {
                if (p.obj >= t->nadapters || p.port >= NTBF_MAX_ADAPTER_PORTS)
                        return NTBF_NONE;
                return t->adapters[p.obj].link[p.port];
        }
        if (p.obj >= t->nswitches || p.port >= t->switches[p.obj].p.ports ||
            !t->switches[p.obj].link)
                return NTBF_NONE;
        return t->switches[p.obj].link[p.port];
}

struct ntbf_port_ref ntbf_link_peer(const struct ntbf_link *l, struct ntbf_port_ref p)
{
        return ntbf_port_eq(l->end[0], p) ? l->end[1] : l->end[0];
}

const char *ntbf_port_name(const struct ntbf_topo *t, struct ntbf_port_ref p, char *buf, size_t len)
{
        if (p.kind == NTBF_PORT_ADAPTER && p.obj < t->nadapters) {
                const struct ntbf_adapter *a = &t->adapters[p.obj];
                if (p.port)
                        snprintf(buf, len, "%s.%s.%u", t->nodes[a->node].name, a->name, p.port);
                else
                        snprintf(buf, len, "%s.%s", t->nodes[a->node].name, a->name);
        } else if (p.kind == NTBF_PORT_SWITCH && p.obj < t->nswitches) {
                snprintf(buf, len, "%s.%u", t->switches[p.obj].name, p.port);
        } else {
                snprintf(buf, len, "?");
        }
        return buf;
}

const char *ntbf_bdf_fmt(uint16_t domain, uint8_t bus, uint8_t dev, uint8_t fn, char *buf,
                         size_t len)
{
        snprintf(buf, len, "%04x:%02x:%02x.%u", domain, bus, dev, fn);
        return buf;
}

int ntbf_bdf_parse(const char *s, uint16_t *domain, uint8_t *bus, uint8_t *dev, uint8_t *fn)
{
        unsigned d = 0, b, v, f;
        int used = 0;
        if (!s)
                return -EINVAL;
        if (sscanf(s, "%4x:%2x:%2x.%1u%n", &d, &b, &v, &f, &used) == 4 && !s[used] && used == 12) {
                /* DDDD:BB:DD.F */
        } else if (d = 0, used = 0,
                   sscanf(s, "%2x:%2x.%1u%n", &b, &v, &f, &used) == 3 && !s[used] && used == 7) {
                /* BB:DD.F */
        } else {
                return -EINVAL;
        }
        if (v > 31 || f > 7)
                return -EINVAL;
        *domain = (uint16_t)d;
        *bus = (uint8_t)b;
        *dev = (uint8_t)v;
        *fn = (uint8_t)f;
        return 0;
}

const char *ntbf_region_kind_name(enum ntbf_region_kind k)
{
        switch (k) {
        case NTBF_REGION_RAM:
                return "ram";
        case NTBF_REGION_BAR:
                return "bar";
        case NTBF_REGION_VF_BAR:
                return "vf-bar";
        case NTBF_REGION_WINDOW:
                return "window";
        case NTBF_REGION_MSI:
                return "msi";
        }
        return "?";
}

uint64_t ntbf_device_bar_size(const struct ntbf_device *d, uint32_t f, uint32_t b)
{
        if (b >= NTBF_MAX_BARS || f >= ntbf_device_nfuncs(d))
                return 0;
        return f < d->functions ? d->bars[b].size : d->vf_bars[b];
}

uint64_t ntbf_device_bar_addr(const struct ntbf_device *d, uint32_t f, uint32_t b)
{
        uint64_t size = ntbf_device_bar_size(d, f, b);
        if (!size)
                return 0;
        if (f < d->functions)
                return d->bars[b].addr + (uint64_t)f * size;
        return d->vf_bar_addr[b] + (uint64_t)(f - d->functions) * size;
}

uint32_t ntbf_device_rid(const struct ntbf_device *d, uint32_t f)
{
        uint32_t rid0 = (uint32_t)d->bus << 8 | (uint32_t)d->dev << 3 | d->fn;
        if (f < d->functions)
                return rid0 + f;
        return (rid0 + NTBF_VF_OFFSET + (f - d->functions)) & 0xffff;
}

void ntbf_device_rid_entry(const struct ntbf_device *d, uint16_t *rid, uint16_t *mask)
{
        uint32_t rid0 = ntbf_device_rid(d, 0);
        *mask = d->vfs ? 0xff00 : 0xfff8;
        *rid = (uint16_t)(rid0 & *mask);
}

uint32_t ntbf_adapter_rid_cost(const struct ntbf_adapter *a, const struct ntbf_device *d)
{
        switch (a->p.rid_mask) {
        case NTBF_RID_MASK_EXPAND:
                return ntbf_device_nfuncs(d);
        case NTBF_RID_MASK_REFUSE:
                return ntbf_device_nfuncs(d) == 1;
        default:
                return 1;
        }
}

void ntbf_adapter_rid_at(const struct ntbf_adapter *a, const struct ntbf_device *d, uint32_t k,
                         uint16_t *rid, uint16_t *mask)
{
        if (a->p.rid_mask == NTBF_RID_MASK_NATIVE) {
                ntbf_device_rid_entry(d, rid, mask);
                return;
        }
        *rid = (uint16_t)ntbf_device_rid(d, k);
        *mask = 0xffff;
}

const char *ntbf_rid_mask_name(uint32_t rule)
{
        static const char *const names[] = {"native", "expand", "refuse"};
        return rule < sizeof(names) / sizeof(names[0]) ? names[rule] : "?";
}

const struct ntbf_region *ntbf_addrmap_lookup(const struct ntbf_topo *t, uint32_t node,
                                              uint64_t addr)
{
        if (!t->maps || node >= t->nnodes)
                return NULL;
        const struct ntbf_addrmap *m = &t->maps[node];
        uint32_t lo = 0, hi = m->n;
        while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                const struct ntbf_region *r = &m->v[mid];
                if (addr < r->base)
                        hi = mid;
                else if (addr - r->base >= r->size)
                        lo = mid + 1;
                else
                        return r;
        }
        return NULL;
}

/* ---- finalize: checks ------------------------------------------------------------------- */

static const struct ntbf_loc no_loc;

struct fin {
        struct ntbf_topo *t;
        struct ntbf_diags *d;
        int err;                        /* -ENOMEM if an allocation failed */
        struct ntbf__strmap node_names; /* node name -> index, built by check_nodes */
};

/*
 * For each of n keys, the index of the first earlier equal key, or NTBF_NONE: duplicate
 * checks in linear time, whatever the size of the file.
 */
static int first_equal(char *const *keys, uint32_t n, uint32_t *first)
{
        struct ntbf__strmap m;
        ntbf__strmap_init(&m);
        for (uint32_t i = 0; i < n; i++) {
                uint32_t old;
                int r = ntbf__strmap_put(&m, keys[i], i, &old);
                if (r < 0) {
                        ntbf__strmap_free(&m);
                        return r;
                }
                first[i] = r == 1 ? old : NTBF_NONE;
        }
        ntbf__strmap_free(&m);
        return 0;
}

/* Keys "prefix/name" for n objects, in one allocation; free the returned array. */
static char **make_keys(uint32_t n, uint32_t (*prefix)(const void *obj, uint32_t i, char *buf),
                        const void *obj)
{
        char **keys = malloc((size_t)(n ? n : 1) * (sizeof(char *) + 64));
        if (!keys)
                return NULL;
        char *store = (char *)(keys + (n ? n : 1));
        for (uint32_t i = 0; i < n; i++) {
                keys[i] = store + (size_t)i * 64;
                prefix(obj, i, keys[i]);
        }
        return keys;
}

static uint32_t adapter_key(const void *obj, uint32_t i, char *buf)
{
        const struct ntbf_adapter *a = &((const struct ntbf_topo *)obj)->adapters[i];
        return (uint32_t)snprintf(buf, 64, "%u/%s", a->node, a->name);
}

static uint32_t switch_key(const void *obj, uint32_t i, char *buf)
{
        return (uint32_t)snprintf(buf, 64, "%s", ((const struct ntbf_topo *)obj)->switches[i].name);
}

static uint32_t device_name_key(const void *obj, uint32_t i, char *buf)
{
        const struct ntbf_device *d = &((const struct ntbf_topo *)obj)->devices[i];
        return (uint32_t)snprintf(buf, 64, "%u/%s", d->node, d->name);
}

static uint32_t device_bdf_key(const void *obj, uint32_t i, char *buf)
{
        const struct ntbf_device *d = &((const struct ntbf_topo *)obj)->devices[i];
        return (uint32_t)snprintf(buf, 64, "%u/%x:%x:%x", d->node, d->domain, d->bus, d->dev);
}

static uint32_t device_bus_key(const void *obj, uint32_t i, char *buf)
{
        const struct ntbf_device *d = &((const struct ntbf_topo *)obj)->devices[i];
        return (uint32_t)snprintf(buf, 64, "%u/%x:%x", d->node, d->domain, d->bus);
}

static uint32_t chassis_key(const void *obj, uint32_t i, char *buf)
{
        const struct ntbf_chassis *c = &((const struct ntbf_topo *)obj)->chassis[i];
        return (uint32_t)snprintf(buf, 64, "%u/%s", c->node, c->name);
}

/* first[i] for keys built by fn; NULL (and f->err) on allocation failure. */
static uint32_t *duplicates(struct fin *f, uint32_t n,
                            uint32_t (*fn)(const void *obj, uint32_t i, char *buf))
{
        char **keys = make_keys(n, fn, f->t);
        uint32_t *first = malloc((size_t)(n ? n : 1) * sizeof(*first));
        if (!keys || !first || first_equal(keys, n, first)) {
                free(keys);
                free(first);
                f->err = -ENOMEM;
                return NULL;
        }
        free(keys);
        return first;
}

#define ERR(f, loc, ...) ntbf_diag_add((f)->d, NTBF_SEV_ERROR, (f)->t->file, (loc), __VA_ARGS__)

static void check_nodes(struct fin *f)
{
        struct ntbf_topo *t = f->t;
        struct ntbf__strmap *names = &f->node_names;
        uint32_t *by_id = NULL; /* node index + 1 per id, lazily sized */
        by_id = calloc(NTBF_MAX_NODE_ID + 1, sizeof(*by_id));
        if (!by_id) {
                f->err = -ENOMEM;
                return;
        }
        if (t->nnodes == 0)
                ERR(f, no_loc,
                    "the cluster has no nodes; add at least two "
                    "under 'nodes:'");
        for (uint32_t i = 0; i < t->nnodes; i++) {
                struct ntbf_node *n = &t->nodes[i];
                uint32_t old;
                int r = ntbf__strmap_put(names, n->name, i, &old);
                if (r < 0) {
                        f->err = r;
                        break;
                }
                if (r == 1)
                        ERR(f, n->loc,
                            "duplicate node name '%s' (first at line %u); give each "
                            "node a unique name",
                            n->name, t->nodes[old].loc.line);
                struct ntbf_loc idloc = n->loc_id.line ? n->loc_id : n->loc;
                if (n->id == 0 || n->id > NTBF_MAX_NODE_ID) {
                        ERR(f, idloc, "node '%s' has id %u; node ids are 1..%u", n->name, n->id,
                            NTBF_MAX_NODE_ID);
                } else if (n->id == NTBF_RESERVED_NODE_ID) {
                        ERR(f, idloc,
                            "node id %u is reserved for broadcast "
                            "(DIS_BROADCAST_NODEID_GROUP_ALL); choose another id",
                            n->id);
                } else if (by_id[n->id]) {
                        ERR(f, idloc,
                            "node id %u is already used by node '%s' (line %u); give "
                            "each node a unique id",
                            n->id, t->nodes[by_id[n->id] - 1].name,
                            t->nodes[by_id[n->id] - 1].loc.line);
                } else {
                        by_id[n->id] = i + 1;
                }
                if (n->ndevices > NTBF_MAX_NODE_DEVICES)
                        ERR(f, n->loc,
                            "node '%s' has %u devices; ntbfab models at most %u per node", n->name,
                            n->ndevices, NTBF_MAX_NODE_DEVICES);
                if (n->nadapters > NTBF_MAX_NODE_ADAPTERS)
                        ERR(f, n->loc,
                            "node '%s' has %u adapters; ntbfab models at most %u per node", n->name,
                            n->nadapters, NTBF_MAX_NODE_ADAPTERS);
                if (n->cpu_rids > 64)
                        ERR(f, n->loc,
                            "node '%s': cpu_rids %u is implausible; a CPU uses 1 or 2 "
                            "requester IDs",
                            n->name, n->cpu_rids);
                if (n->mmio_low_base >= n->mmio_low_end || n->mmio_low_end > FOUR_GIB)
                        ERR(f, n->loc,
                            "node '%s': the 32-bit MMIO hole must lie below 4 GiB "
                            "and be non-empty",
                            n->name);
                uint64_t low_ram = n->ram < n->mmio_low_base ? n->ram : n->mmio_low_base;
                uint64_t high_ram = n->ram - low_ram;
                if (high_ram &&
                    (high_ram > UINT64_MAX - FOUR_GIB || FOUR_GIB + high_ram > n->mmio_high_base))
                        ERR(f, n->loc,
                            "node '%s': %" PRIu64 " GiB of RAM overlaps the 64-bit MMIO "
                            "space at 0x%" PRIx64 "; raise mmio_high or lower ram",
                            n->name, n->ram >> 30, n->mmio_high_base);
                if (n->mmio_high_base >= NTBF_PHYS_LIMIT)
                        ERR(f, n->loc,
                            "node '%s': mmio_high 0x%" PRIx64 " is beyond 48-bit "
                            "physical addressing",
                            n->name, n->mmio_high_base);
        }
        free(by_id);
}

/* Where the cluster file describes window w of a (its entry, window_base, or the adapter). */
static struct ntbf_loc win_loc(const struct ntbf_adapter *a, uint32_t w)
{
        if (a->loc_win[w].line)
                return a->loc_win[w];
        return a->loc_window_base.line ? a->loc_window_base : a->loc;
}

/* Bytes of the BAR that window w of a starts (its windows one after the other). */
static uint64_t bar_bytes(const struct ntbf_adapter *a, uint32_t w)
{
        uint64_t n = 0;
        for (uint32_t k = w; k < a->nwin && a->win_bar[k] == a->win_bar[w]; k++)
                n += a->win[k].size;
        return n;
}

/*
 * The `windows:` of an adapter (docs/config.md, "Windows"): each window's slots and rules,
 * then the BARs they make. On success a->win[], nwin, nslots are set (bases of BARs with a
 * fixed address only; build_map assigns the others) and lut_entry_size is window 0's.
 */
static void check_windows(struct fin *f, struct ntbf_adapter *a)
{
        const char *node = f->t->nodes[a->node].name;
        char s1[32], s2[32];
        uint32_t first = 0;
        size_t e0 = f->d->errors;
        for (uint32_t i = 0; i < a->p.nwindows && i < NTBF_MAX_WINDOWS; i++) {
                const struct ntbf_window_params *wp = &a->p.windows[i];
                struct ntbf_loc l = a->loc_win[i].line ? a->loc_win[i] : a->loc;
                uint32_t slots = wp->slots ? wp->slots : 1;
                uint64_t E = wp->size && wp->size % slots == 0 ? wp->size / slots : 0;
                uint64_t aa = wp->addr_align ? wp->addr_align : E;
                uint64_t za = wp->size_align ? wp->size_align : E;
                uint64_t zm = wp->size_max ? wp->size_max : E;
                if (!wp->size || wp->size % MIN_SLOT) {
                        ERR(f, l,
                            "adapter %s.%s: window %u of %s is not a multiple of 4 KiB; give "
                            "its size in pages",
                            node, a->name, i, ntbf_size_fmt(wp->size, s1, sizeof(s1)));
                        continue;
                }
                if (E < MIN_SLOT || E % MIN_SLOT) {
                        ERR(f, l,
                            "adapter %s.%s: window %u: %u slots do not split its %s into equal "
                            "slots of whole pages; use at most %" PRIu64 " slots that divide it",
                            node, a->name, i, slots, ntbf_size_fmt(wp->size, s1, sizeof(s1)),
                            wp->size / MIN_SLOT);
                        continue;
                }
                if (slots > 1 && !ntbf_is_pow2(E)) {
                        ERR(f, l,
                            "adapter %s.%s: window %u: slots of %s are not a power of two; a "
                            "look-up table splits its window into power-of-two entries",
                            node, a->name, i, ntbf_size_fmt(E, s1, sizeof(s1)));
                        continue;
                }
                if (wp->reserved >= slots) {
                        ERR(f, l,
                            "adapter %s.%s: window %u: reserved %u leaves none of its %u slots; "
                            "lower reserved",
                            node, a->name, i, wp->reserved, slots);
                        continue;
                }
                if (!ntbf_is_pow2(aa) || aa < MIN_SLOT || aa > E || !ntbf_is_pow2(za) ||
                    za < MIN_SLOT || za > E) {
                        ERR(f, l,
                            "adapter %s.%s: window %u: addr_align %s and size_align %s must be "
                            "powers of two from 4 KiB to the slot size (%s)",
                            node, a->name, i, ntbf_size_fmt(aa, s1, sizeof(s1)),
                            ntbf_size_fmt(za, s2, sizeof(s2)), ntbf_size_fmt(E, (char[32]){0}, 32));
                        continue;
                }
                if (zm < za || zm > E) {
                        ERR(f, l,
                            "adapter %s.%s: window %u: size_max %s must lie between size_align "
                            "(%s) and the slot size (%s)",
                            node, a->name, i, ntbf_size_fmt(zm, s1, sizeof(s1)),
                            ntbf_size_fmt(za, s2, sizeof(s2)), ntbf_size_fmt(E, (char[32]){0}, 32));
                        continue;
                }
                if (i && wp->bar != a->p.windows[i - 1].bar) {
                        for (uint32_t k = 0; k + 1 < i; k++)
                                if (a->p.windows[k].bar == wp->bar) {
                                        ERR(f, l,
                                            "adapter %s.%s: window %u is in BAR %u, but window "
                                            "%u of that BAR is not just before it; list the "
                                            "windows of a BAR one after the other, in the "
                                            "order they sit in it",
                                            node, a->name, i, wp->bar, k);
                                        break;
                                }
                }
                if (wp->base && i && wp->bar == a->p.windows[i - 1].bar)
                        ERR(f, l,
                            "adapter %s.%s: window %u has a base, but it follows window %u in "
                            "BAR %u; give the base of the BAR on its first window only",
                            node, a->name, i, i - 1, wp->bar);
                a->win[i] = (struct ntbf_window){.base = wp->base,
                                                 .size = wp->size,
                                                 .first_slot = first,
                                                 .slots = slots,
                                                 .slot_size = E,
                                                 .reserved = wp->reserved,
                                                 .flags = wp->flags,
                                                 .addr_align = aa,
                                                 .size_align = za,
                                                 .size_max = zm};
                a->win_bar[i] = (uint8_t)wp->bar;
                first += slots;
        }
        if (f->d->errors != e0)
                return;
        a->nwin = a->p.nwindows;
        a->nslots = first;
        /* The BARs: each a power of two, aligned to its size, windows one after the other. */
        for (uint32_t i = 0; i < a->nwin; i++) {
                if (i && a->win_bar[i] == a->win_bar[i - 1]) {
                        if (a->win[i - 1].base)
                                a->win[i].base = a->win[i - 1].base + a->win[i - 1].size;
                        continue;
                }
                uint64_t bytes = bar_bytes(a, i);
                struct ntbf_loc l = win_loc(a, i);
                if (!ntbf_is_pow2(bytes))
                        ERR(f, l,
                            "adapter %s.%s: the windows of BAR %u add up to %s, not a power of "
                            "two; a PCI BAR is (make them %s)",
                            node, a->name, a->win_bar[i], ntbf_size_fmt(bytes, s1, sizeof(s1)),
                            ntbf_size_fmt(UINT64_C(1) << (64 - __builtin_clzll(bytes)), s2,
                                          sizeof(s2)));
                else if (a->win[i].base % bytes)
                        ERR(f, l,
                            "adapter %s.%s: BAR %u at 0x%" PRIx64 " is not aligned to its size "
                            "%s; a BAR is aligned to its size (try 0x%" PRIx64 ")",
                            node, a->name, a->win_bar[i], a->win[i].base,
                            ntbf_size_fmt(bytes, s1, sizeof(s1)),
                            ntbf_align_up(a->win[i].base, bytes));
        }
        /* A window translates by replacing an address's high bits: its slots sit at offsets
         * of their size in the BAR (a Switchtec direct window after N LUT entries of E bytes
         * is at most N x E, the figure behind ntb_hw_switchtec's 2 MiB). */
        for (uint32_t i = 1; i < a->nwin && f->d->errors == e0; i++) {
                uint64_t off = 0;
                for (uint32_t k = i; k > 0 && a->win_bar[k - 1] == a->win_bar[i]; k--)
                        off += a->win[k - 1].size;
                if (off % a->win[i].slot_size)
                        ERR(f, win_loc(a, i),
                            "adapter %s.%s: window %u starts %s into BAR %u, not at a multiple "
                            "of its %s slots; a window translates by replacing the high bits of "
                            "an address, so its slots lie at offsets of their size (a Switchtec "
                            "direct window after the LUT is at most the LUT's size): make window "
                            "%u at most %s or the windows before it larger",
                            node, a->name, i, ntbf_size_fmt(off, s1, sizeof(s1)), a->win_bar[i],
                            ntbf_size_fmt(a->win[i].slot_size, s2, sizeof(s2)), i,
                            ntbf_size_fmt(off & -off, (char[32]){0}, 32));
        }
        if (f->d->errors != e0) {
                a->nwin = a->nslots = 0;
                return;
        }
        a->window_base = a->win[0].base;
        a->lut_entry_size = a->win[0].slot_size;
}

static void check_adapters(struct fin *f)
{
        struct ntbf_topo *t = f->t;
        char sz[32];
        uint32_t *dup = duplicates(f, t->nadapters, adapter_key);
        if (!dup)
                return;
        for (uint32_t i = 0; i < t->nadapters; i++) {
                struct ntbf_adapter *a = &t->adapters[i];
                const char *node = t->nodes[a->node].name;
                struct ntbf_loc wl = a->loc_window.line ? a->loc_window : a->loc;
                struct ntbf_loc ll = a->loc_lut.line ? a->loc_lut : a->loc;
                if (dup[i] != NTBF_NONE)
                        ERR(f, a->loc,
                            "duplicate adapter name '%s' in node '%s' (first "
                            "at line %u); give each adapter a unique name",
                            a->name, node, t->adapters[dup[i]].loc.line);
                a->lut_entry_size = 0;
                memset(a->win, 0, sizeof(a->win));
                a->nwin = a->nslots = 0;
                if (a->p.nwindows) {
                        check_windows(f, a);
                } else if (!ntbf_is_pow2(a->p.window) || a->p.window < MIN_SLOT) {
                        ERR(f, wl,
                            "adapter %s.%s: window %s is not a power of two of at least "
                            "4 KiB; PCI BARs are powers of two (try %s)",
                            node, a->name, ntbf_size_fmt(a->p.window, sz, sizeof(sz)),
                            ntbf_size_fmt(a->p.window < MIN_SLOT
                                              ? MIN_SLOT
                                              : UINT64_C(1) << (63 - __builtin_clzll(a->p.window)),
                                          (char[32]){0}, 32));
                } else if (!ntbf_is_pow2(a->p.lut_entries)) {
                        ERR(f, ll,
                            "adapter %s.%s: lut_entries %u is not a power of two; the "
                            "window is split into equal power-of-two slots",
                            node, a->name, a->p.lut_entries);
                } else if (a->p.window / a->p.lut_entries < MIN_SLOT) {
                        ERR(f, ll,
                            "adapter %s.%s: %u LUT entries split the %s window into "
                            "slots smaller than 4 KiB; use at most %" PRIu64 " entries "
                            "or a larger window",
                            node, a->name, a->p.lut_entries,
                            ntbf_size_fmt(a->p.window, sz, sizeof(sz)), a->p.window / MIN_SLOT);
                } else {
                        a->lut_entry_size = a->p.window / a->p.lut_entries;
                }
                if (!a->p.nwindows && a->window_base && ntbf_is_pow2(a->p.window) &&
                    (a->window_base & (a->p.window - 1))) {
                        struct ntbf_loc bl = a->loc_window_base.line ? a->loc_window_base : a->loc;
                        ERR(f, bl,
                            "adapter %s.%s: window_base 0x%" PRIx64 " is not aligned to "
                            "the window size %s; a BAR is aligned to its size (try 0x%" PRIx64 ")",
                            node, a->name, a->window_base,
                            ntbf_size_fmt(a->p.window, sz, sizeof(sz)),
                            ntbf_align_up(a->window_base, a->p.window));
                        a->window_base = 0;
                        a->lut_entry_size = 0; /* no address: keep it out of the map */
                }
                if (!a->p.nwindows && a->lut_entry_size) {
                        /* The single-window keys: window 0, whole-slot translations at
                         * slot-aligned addresses. */
                        uint64_t E = a->lut_entry_size;
                        a->win[0] = (struct ntbf_window){.base = a->window_base,
                                                         .size = a->p.window,
                                                         .slots = a->p.lut_entries,
                                                         .slot_size = E,
                                                         .addr_align = E,
                                                         .size_align = E,
                                                         .size_max = E};
                        a->win_bar[0] = 0;
                        a->nwin = 1;
                        a->nslots = a->p.lut_entries;
                }
                if (a->nwin && a->p.scratchpads && a->p.spad_window &&
                    (uint64_t)a->win[0].reserved * a->win[0].slot_size < a->p.spad_window) {
                        struct ntbf_loc l = win_loc(a, 0);
                        ERR(f, a->p.nwindows ? l : a->loc,
                            "adapter %s.%s: its %u scratchpads live in a %s shared window at the "
                            "start of window 0 (spad_window), but window 0 keeps %u slot%s of "
                            "%s for it; reserve %" PRIu64 " slot%s of window 0 (reserved: "
                            "%" PRIu64 "), or set scratchpads: 0",
                            node, a->name, a->p.scratchpads,
                            ntbf_size_fmt(a->p.spad_window, sz, sizeof(sz)), a->win[0].reserved,
                            a->win[0].reserved == 1 ? "" : "s",
                            ntbf_size_fmt(a->win[0].slot_size, (char[32]){0}, 32),
                            ntbf_div_ceil(a->p.spad_window, a->win[0].slot_size),
                            ntbf_div_ceil(a->p.spad_window, a->win[0].slot_size) == 1 ? "" : "s",
                            ntbf_div_ceil(a->p.spad_window, a->win[0].slot_size));
                }
                if (a->p.ports == 0 || a->p.ports > NTBF_MAX_ADAPTER_PORTS)
                        ERR(f, a->loc, "adapter %s.%s: ports %u is out of range 1..%u", node,
                            a->name, a->p.ports, NTBF_MAX_ADAPTER_PORTS);
                if (a->p.rid_table && a->p.rid_reserved >= a->p.rid_table)
                        ERR(f, a->loc,
                            "adapter %s.%s: rid_reserved %u leaves no entry of the "
                            "%u-entry requester-ID table for devices; lower "
                            "rid_reserved",
                            node, a->name, a->p.rid_reserved, a->p.rid_table);
                if (a->p.addr_bits < 32 || a->p.addr_bits > 64)
                        ERR(f, a->loc, "adapter %s.%s: addr_bits %u is out of range 32..64", node,
                            a->name, a->p.addr_bits);
                if (a->p.window_below_4g && !a->p.nwindows && ntbf_is_pow2(a->p.window) &&
                    a->p.window > t->nodes[a->node].mmio_low_end - t->nodes[a->node].mmio_low_base)
                        ERR(f, wl,
                            "adapter %s.%s: a %s window cannot be placed below 4 GiB; "
                            "shrink the window or drop window_below_4g",
                            node, a->name, ntbf_size_fmt(a->p.window, sz, sizeof(sz)));
        }
        free(dup);
}

static void check_switches(struct fin *f)
{
        struct ntbf_topo *t = f->t;
        uint32_t *dup = duplicates(f, t->nswitches, switch_key);
        if (!dup)
                return;
        for (uint32_t i = 0; i < t->nswitches; i++) {
                struct ntbf_switch *s = &t->switches[i];
                if (dup[i] != NTBF_NONE)
                        ERR(f, s->loc,
                            "duplicate switch name '%s' (first at line %u); "
                            "give each switch a unique name",
                            s->name, t->switches[dup[i]].loc.line);
                if (ntbf__strmap_get(&f->node_names, s->name) != UINT32_MAX)
                        ERR(f, s->loc,
                            "switch '%s' has the name of a node; link ends like "
                            "'%s.1' would be ambiguous, rename one",
                            s->name, s->name);
                if (s->p.ports == 0 || s->p.ports > NTBF_MAX_SWITCH_PORTS) {
                        ERR(f, s->loc, "switch '%s': ports %u is out of range 1..%u", s->name,
                            s->p.ports, NTBF_MAX_SWITCH_PORTS);
                        s->p.ports = s->p.ports ? NTBF_MAX_SWITCH_PORTS : 1;
                }
                free(s->link);
                s->link = malloc(s->p.ports * sizeof(*s->link));
                if (!s->link) {
                        f->err = -ENOMEM;
                        break;
                }
                for (uint32_t p = 0; p < s->p.ports; p++)
                        s->link[p] = NTBF_NONE;
        }
        free(dup);
}

static bool port_valid(const struct ntbf_topo *t, struct ntbf_port_ref p)
{
        if (p.kind == NTBF_PORT_ADAPTER)
                return p.obj < t->nadapters && p.port < t->adapters[p.obj].p.ports &&
                       p.port < NTBF_MAX_ADAPTER_PORTS;
        return p.obj < t->nswitches && p.port < t->switches[p.obj].p.ports;
}

static uint32_t *port_slot(struct ntbf_topo *t, struct ntbf_port_ref p)
{
        if (p.kind == NTBF_PORT_ADAPTER)
                return &t->adapters[p.obj].link[p.port];
        return &t->switches[p.obj].link[p.port];
}

static void check_links(struct fin *f)
{
        struct ntbf_topo *t = f->t;
        char a[80], b[80];
        for (uint32_t i = 0; i < t->nadapters; i++)
                for (uint32_t p = 0; p < NTBF_MAX_ADAPTER_PORTS; p++)
                        t->adapters[i].link[p] = NTBF_NONE;
        for (uint32_t i = 0; i < t->nlinks; i++) {
                struct ntbf_link *l = &t->links[i];
                bool ok = true;
                for (int e = 0; e < 2; e++) {
                        struct ntbf_port_ref p = l->end[e];
                        if (port_valid(t, p))
                                continue;
                        ok = false;
                        if (p.kind == NTBF_PORT_ADAPTER && p.obj < t->nadapters)
                                ERR(f, l->loc,
                                    "link end %s: adapter %s.%s has %u port%s "
                                    "(0..%u)",
                                    ntbf_port_name(t, p, a, sizeof(a)),
                                    t->nodes[t->adapters[p.obj].node].name, t->adapters[p.obj].name,
                                    t->adapters[p.obj].p.ports,
                                    t->adapters[p.obj].p.ports == 1 ? "" : "s",
                                    t->adapters[p.obj].p.ports - 1);
                        else if (p.kind == NTBF_PORT_SWITCH && p.obj < t->nswitches)
                                ERR(f, l->loc, "link end %s: switch '%s' has ports 0..%u",
                                    ntbf_port_name(t, p, a, sizeof(a)), t->switches[p.obj].name,
                                    t->switches[p.obj].p.ports - 1);
                        else
                                ERR(f, l->loc, "link end refers to no adapter or switch");
                }
                if (!ok)
                        continue;
                if (l->end[0].kind == NTBF_PORT_ADAPTER && l->end[1].kind == NTBF_PORT_ADAPTER &&
                    t->adapters[l->end[0].obj].node == t->adapters[l->end[1].obj].node) {
                        ERR(f, l->loc,
                            "link %s - %s connects node '%s' to itself; link "
                            "adapters of different nodes",
                            ntbf_port_name(t, l->end[0], a, sizeof(a)),
                            ntbf_port_name(t, l->end[1], b, sizeof(b)),
                            t->nodes[t->adapters[l->end[0].obj].node].name);
                        continue;
                }
                if (ntbf_port_eq(l->end[0], l->end[1])) {
                        ERR(f, l->loc, "link connects port %s to itself",
                            ntbf_port_name(t, l->end[0], a, sizeof(a)));
                        continue;
                }
                for (int e = 0; e < 2; e++) {
                        uint32_t *slot = port_slot(t, l->end[e]);
                        if (*slot != NTBF_NONE) {
                                ERR(f, l->loc,
                                    "port %s is already used by the link at line %u; "
                                    "a port takes one cable, use another port",
                                    ntbf_port_name(t, l->end[e], a, sizeof(a)),
                                    t->links[*slot].loc.line);
                                ok = false;
                        }
                }
                if (!ok)
                        continue;
                *port_slot(t, l->end[0]) = i;
                *port_slot(t, l->end[1]) = i;
        }
}

/* Chassis: unique names per node, a bounded number, and devices only in their own host's. */
static void check_chassis(struct fin *f)
{
        struct ntbf_topo *t = f->t;
        uint32_t *dup = duplicates(f, t->nchassis, chassis_key);
        if (!dup)
                return;
        uint32_t *count = calloc(t->nnodes ? t->nnodes : 1, sizeof(*count));
        if (!count) {
                free(dup);
                f->err = -ENOMEM;
                return;
        }
        for (uint32_t i = 0; i < t->nchassis; i++) {
                const struct ntbf_chassis *c = &t->chassis[i];
                if (c->node >= t->nnodes) {
                        ERR(f, c->loc, "chassis '%s' belongs to no node", c->name);
                        continue;
                }
                const char *node = t->nodes[c->node].name;
                if (dup[i] != NTBF_NONE)
                        ERR(f, c->loc,
                            "duplicate chassis name '%s' in node '%s' (first at line %u); give "
                            "each chassis a unique name",
                            c->name, node, t->chassis[dup[i]].loc.line);
                if (++count[c->node] == NTBF_MAX_NODE_CHASSIS + 1)
                        ERR(f, c->loc,
                            "node '%s' has more than %u expansion chassis; cable fewer or model "
                            "several as one",
                            node, NTBF_MAX_NODE_CHASSIS);
        }
        for (uint32_t i = 0; i < t->ndevices; i++) {
                const struct ntbf_device *d = &t->devices[i];
                if (d->chassis == NTBF_NONE)
                        continue;
                if (d->chassis >= t->nchassis)
                        ERR(f, d->loc, "device %s.%s: chassis %u does not exist",
                            t->nodes[d->node].name, d->name, d->chassis);
                else if (t->chassis[d->chassis].node != d->node)
                        ERR(f, d->loc,
                            "device %s.%s: chassis '%s' hangs from node '%s', not from the "
                            "device's node; a device sits in a chassis of its own host",
                            t->nodes[d->node].name, d->name, t->chassis[d->chassis].name,
                            t->nodes[t->chassis[d->chassis].node].name);
        }
        free(count);
        free(dup);
}

static void check_devices(struct fin *f)
{
        struct ntbf_topo *t = f->t;
        char sz[32];
        uint32_t *dup_name = duplicates(f, t->ndevices, device_name_key);
        uint32_t *dup_bdf = dup_name ? duplicates(f, t->ndevices, device_bdf_key) : NULL;
        uint32_t *dup_bus = dup_bdf ? duplicates(f, t->ndevices, device_bus_key) : NULL;
        if (!dup_bus) {
                free(dup_name);
                free(dup_bdf);
                return;
        }
        for (uint32_t i = 0; i < t->ndevices; i++) {
                struct ntbf_device *d = &t->devices[i];
                const char *node = t->nodes[d->node].name;
                struct ntbf_loc bl = d->loc_bars.line ? d->loc_bars : d->loc;
                if (dup_name[i] != NTBF_NONE) {
                        ERR(f, d->loc,
                            "duplicate device name '%s' in node '%s' (first "
                            "at line %u); give each device a unique name",
                            d->name, node, t->devices[dup_name[i]].loc.line);
                } else if (dup_bdf[i] != NTBF_NONE) {
                        const struct ntbf_device *o = &t->devices[dup_bdf[i]];
                        ERR(f, d->loc,
                            "device '%s' has the PCI address of device '%s' "
                            "(line %u) in node '%s'; each device needs its "
                            "own bus:device",
                            d->name, o->name, o->loc.line, node);
                }
                if (d->vfs && d->vfs <= NTBF_MAX_VFS &&
                    (ntbf_device_rid(d, 0) & 0xff) + NTBF_VF_OFFSET + d->vfs > 0x100)
                        ERR(f, d->loc,
                            "device %s.%s: %u VFs from routing ID %02x:%02x.%u run past bus "
                            "%02x (%u fit); VFs stay on their device's bus, so use fewer VFs "
                            "or put the device at device number 0",
                            node, d->name, d->vfs, d->bus,
                            ((ntbf_device_rid(d, 0) + NTBF_VF_OFFSET) & 0xff) >> 3,
                            (ntbf_device_rid(d, 0) + NTBF_VF_OFFSET) & 7, d->bus,
                            0x100 - NTBF_VF_OFFSET - (ntbf_device_rid(d, 0) & 0xff));
                if (dup_bus[i] != NTBF_NONE && (d->vfs || t->devices[dup_bus[i]].vfs)) {
                        const struct ntbf_device *o = &t->devices[dup_bus[i]];
                        const struct ntbf_device *v = d->vfs ? d : o;
                        ERR(f, d->loc,
                            "device '%s' is on bus %02x with device '%s' (line %u), whose "
                            "SR-IOV VFs occupy that bus; give '%s' a bus of its own",
                            d->name, d->bus, o->name, o->loc.line, v->name);
                }
                if (d->functions < 1 || d->functions > NTBF_MAX_FUNCTIONS)
                        ERR(f, d->loc, "device %s.%s: functions %u is out of range 1..%u", node,
                            d->name, d->functions, NTBF_MAX_FUNCTIONS);
                else if (d->fn + d->functions > 8)
                        ERR(f, d->loc,
                            "device %s.%s: %u functions from function %u run past "
                            "function 7",
                            node, d->name, d->functions, d->fn);
                if (d->vfs > NTBF_MAX_VFS)
                        ERR(f, d->loc,
                            "device %s.%s: %u virtual functions is more than SR-IOV's "
                            "practical %u",
                            node, d->name, d->vfs, NTBF_MAX_VFS);
                if (d->dma_bits < 32 || d->dma_bits > 64)
                        ERR(f, d->loc, "device %s.%s: dma_bits %u is out of range 32..64", node,
                            d->name, d->dma_bits);
                bool any = false;
                for (int b = 0; b < NTBF_MAX_BARS; b++) {
                        uint64_t s = d->bars[b].size;
                        any |= s != 0;
                        if (s && (!ntbf_is_pow2(s) || s < MIN_SLOT))
                                ERR(f, bl,
                                    "device %s.%s: BAR%d size %s is not a power of two of "
                                    "at least 4 KiB",
                                    node, d->name, b, ntbf_size_fmt(s, sz, sizeof(sz)));
                        if (s && (d->bars[b].flags & NTBF_BAR_64) && b % 2 == 1)
                                ERR(f, bl,
                                    "device %s.%s: BAR%d is 64-bit but a 64-bit BAR uses "
                                    "two slots and must start at an even number",
                                    node, d->name, b);
                        if (s && (d->bars[b].flags & NTBF_BAR_64) && b + 1 < NTBF_MAX_BARS &&
                            d->bars[b + 1].size)
                                ERR(f, bl,
                                    "device %s.%s: BAR%d overlaps the upper half of "
                                    "64-bit BAR%d",
                                    node, d->name, b + 1, b);
                        uint64_t v = d->vf_bars[b];
                        if (v && (!ntbf_is_pow2(v) || v < MIN_SLOT))
                                ERR(f, bl,
                                    "device %s.%s: VF BAR%d size %s is not a power of two "
                                    "of at least 4 KiB",
                                    node, d->name, b, ntbf_size_fmt(v, sz, sizeof(sz)));
                }
                if (d->lend && !any)
                        ERR(f, bl,
                            "device %s.%s is lent but has no BARs; a borrower needs at "
                            "least one BAR to reach it (add bars: or a sim: model)",
                            node, d->name);
                if (d->sim.model == NTBF_SIM_NVME) {
                        const struct ntbf_sim_params *s = &d->sim;
                        if (s->lba_size != 512 && s->lba_size != 4096)
                                ERR(f, d->loc,
                                    "device %s.%s: lba %u; the simulated NVMe "
                                    "supports 512 or 4096",
                                    node, d->name, s->lba_size);
                        else if (!s->capacity || s->capacity % s->lba_size)
                                ERR(f, d->loc,
                                    "device %s.%s: capacity must be a non-zero "
                                    "multiple of the %u-byte LBA",
                                    node, d->name, s->lba_size);
                        if (s->queues < 2 || s->queues > 1024)
                                ERR(f, d->loc,
                                    "device %s.%s: queues %u is out of range 2..1024 "
                                    "(queue pairs including the admin pair)",
                                    node, d->name, s->queues);
                        if (s->mdts > 12)
                                ERR(f, d->loc, "device %s.%s: mdts %u is out of range 0..12", node,
                                    d->name, s->mdts);
                        if (s->cmb && (!ntbf_is_pow2(s->cmb) || s->cmb < MIN_SLOT))
                                ERR(f, d->loc,
                                    "device %s.%s: cmb %s is not a power of two of at "
                                    "least 4 KiB",
                                    node, d->name, ntbf_size_fmt(s->cmb, sz, sizeof(sz)));
                        if (s->msix > 2048)
                                ERR(f, d->loc,
                                    "device %s.%s: msix %u; MSI-X allows at most 2048 "
                                    "vectors",
                                    node, d->name, s->msix);
                }
        }
        free(dup_name);
        free(dup_bdf);
        free(dup_bus);
}

/* ---- finalize: address maps ------------------------------------------------------------- */

struct placement {
        uint64_t size, align;
        bool low;
        enum ntbf_region_kind kind;
        uint32_t obj, index;
        uint64_t *out;
        struct ntbf_loc loc;
};

static int map_insert(struct ntbf_addrmap *m, uint32_t *cap, struct ntbf_region r)
{
        if (m->n == *cap) {
                uint32_t c = *cap ? *cap * 2 : 16;
                struct ntbf_region *v = realloc(m->v, c * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                m->v = v;
                *cap = c;
        }
        uint32_t i = m->n;
        while (i > 0 && m->v[i - 1].base > r.base) {
                m->v[i] = m->v[i - 1];
                i--;
        }
        m->v[i] = r;
        m->n++;
        return 0;
}

static const struct ntbf_region *map_overlap(const struct ntbf_addrmap *m, uint64_t base,
                                             uint64_t size)
{
        for (uint32_t i = 0; i < m->n; i++)
                if (base < m->v[i].base + m->v[i].size && m->v[i].base < base + size)
                        return &m->v[i];
        return NULL;
}

/* First fit of [size, align] in [lo, hi) around existing regions; 0 if it does not fit. */
static uint64_t map_place(const struct ntbf_addrmap *m, uint64_t lo, uint64_t hi, uint64_t size,
                          uint64_t align)
{
        uint64_t c = ntbf_align_up(lo, align);
        for (uint32_t i = 0; i < m->n; i++) {
                const struct ntbf_region *r = &m->v[i];
                if (r->base + r->size <= c)
                        continue;
                if (r->base >= c + size)
                        break;
                c = ntbf_align_up(r->base + r->size, align);
        }
        if (c < lo || c + size > hi || c + size < c)
                return 0;
        return c;
}

static int cmp_placement(const void *pa, const void *pb)
{
        const struct placement *a = pa, *b = pb;
        if (a->size != b->size)
                return a->size > b->size ? -1 : 1;
        if (a->kind != b->kind)
                return a->kind < b->kind ? -1 : 1;
        if (a->obj != b->obj)
                return a->obj < b->obj ? -1 : 1;
        return a->index < b->index ? -1 : a->index > b->index;
}

static const char *region_owner(const struct ntbf_topo *t, const struct ntbf_region *r, char *buf,
                                size_t len)
{
        switch (r->kind) {
        case NTBF_REGION_RAM:
                snprintf(buf, len, "RAM");
                break;
        case NTBF_REGION_MSI:
                snprintf(buf, len, "the MSI address range");
                break;
        case NTBF_REGION_WINDOW:
                snprintf(buf, len, "the window of adapter %s", t->adapters[r->obj].name);
                break;
        default:
                snprintf(buf, len, "BAR%u of device %s", r->index, t->devices[r->obj].name);
                break;
        }
        return buf;
}

/* a * b, or UINT64_MAX if that overflows: such an array of BARs fits nowhere. */
static uint64_t sat_mul(uint64_t a, uint64_t b)
{
        return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* The windows of the BAR adapter a's window w starts, at base: one region each. */
static int insert_bar(struct ntbf_addrmap *m, uint32_t *cap, struct ntbf_adapter *a, uint32_t ai,
                      uint32_t w, uint64_t base)
{
        for (uint32_t k = w; k < a->nwin && a->win_bar[k] == a->win_bar[w]; k++) {
                a->win[k].base = base;
                if (map_insert(
                        m, cap,
                        (struct ntbf_region){base, a->win[k].size, NTBF_REGION_WINDOW, ai, k}))
                        return -ENOMEM;
                base += a->win[k].size;
        }
        if (w == 0)
                a->window_base = a->win[0].base;
        return 0;
}

static void build_map(struct fin *f, uint32_t ni)
{
        struct ntbf_topo *t = f->t;
        struct ntbf_node *n = &t->nodes[ni];
        struct ntbf_addrmap *m = &t->maps[ni];
        uint32_t cap = 0;
        char sz[32], who[96];
        uint64_t low_ram = n->ram < n->mmio_low_base ? n->ram : n->mmio_low_base;
        if (low_ram && map_insert(m, &cap, (struct ntbf_region){0, low_ram, NTBF_REGION_RAM, 0, 0}))
                goto nomem;
        if (n->ram > low_ram &&
            map_insert(m, &cap,
                       (struct ntbf_region){FOUR_GIB, n->ram - low_ram, NTBF_REGION_RAM, 0, 1}))
                goto nomem;
        if (map_insert(m, &cap,
                       (struct ntbf_region){NTBF_MSI_BASE, NTBF_MSI_SIZE, NTBF_REGION_MSI, 0, 0}))
                goto nomem;

        /* BARs of windows with a fixed base first. */
        for (uint32_t k = 0; k < n->nadapters; k++) {
                struct ntbf_adapter *a = &t->adapters[n->adapters[k]];
                for (uint32_t w = 0; w < a->nwin; w++) {
                        if (!a->win[w].base || (w && a->win_bar[w] == a->win_bar[w - 1]))
                                continue;
                        uint64_t base = a->win[w].base, bytes = bar_bytes(a, w);
                        struct ntbf_loc bl = win_loc(a, w);
                        const struct ntbf_region *o = map_overlap(m, base, bytes);
                        if (o) {
                                ERR(f, bl,
                                    "adapter %s.%s: window at 0x%" PRIx64 " overlaps %s at "
                                    "0x%" PRIx64 "; choose a free window_base or leave it out",
                                    n->name, a->name, base, region_owner(t, o, who, sizeof(who)),
                                    o->base);
                                continue;
                        }
                        if (bytes > NTBF_PHYS_LIMIT || base > NTBF_PHYS_LIMIT - bytes) {
                                ERR(f, bl,
                                    "adapter %s.%s: window at 0x%" PRIx64 " ends beyond 48-bit "
                                    "physical addressing",
                                    n->name, a->name, base);
                                continue;
                        }
                        if (insert_bar(m, &cap, a, n->adapters[k], w, base))
                                goto nomem;
                }
        }

        /* Everything else, largest first, naturally aligned, like a BIOS/Linux assignment. */
        size_t np = 0, capp = (size_t)n->nadapters * NTBF_MAX_WINDOWS +
                              (size_t)n->ndevices * 2 * NTBF_MAX_BARS;
        struct placement *pl = calloc(capp ? capp : 1, sizeof(*pl));
        if (!pl)
                goto nomem;
        for (uint32_t k = 0; k < n->nadapters; k++) {
                struct ntbf_adapter *a = &t->adapters[n->adapters[k]];
                for (uint32_t w = 0; w < a->nwin; w++) {
                        if (a->win[w].base || (w && a->win_bar[w] == a->win_bar[w - 1]))
                                continue;
                        uint64_t bytes = bar_bytes(a, w);
                        pl[np++] = (struct placement){bytes,
                                                      bytes,
                                                      a->p.window_below_4g,
                                                      NTBF_REGION_WINDOW,
                                                      n->adapters[k],
                                                      w,
                                                      &a->win[w].base,
                                                      a->loc_win[w].line ? a->loc_win[w] : a->loc};
                }
        }
        for (uint32_t k = 0; k < n->ndevices; k++) {
                uint32_t di = n->devices[k];
                struct ntbf_device *d = &t->devices[di];
                if (d->functions < 1 || d->functions > NTBF_MAX_FUNCTIONS || d->vfs > NTBF_MAX_VFS)
                        continue;
                for (uint32_t b = 0; b < NTBF_MAX_BARS; b++) {
                        struct ntbf_bar *bar = &d->bars[b];
                        if (bar->size && ntbf_is_pow2(bar->size) && bar->size >= MIN_SLOT) {
                                /* Non-prefetchable and 32-bit BARs go below 4 GiB (bridge rule). */
                                bool low =
                                    !(bar->flags & NTBF_BAR_PREF) || !(bar->flags & NTBF_BAR_64);
                                pl[np++] =
                                    (struct placement){sat_mul(bar->size, d->functions),
                                                       bar->size,
                                                       low,
                                                       NTBF_REGION_BAR,
                                                       di,
                                                       b,
                                                       &bar->addr,
                                                       d->loc_bars.line ? d->loc_bars : d->loc};
                        }
                        uint64_t v = d->vf_bars[b];
                        if (d->vfs && v && ntbf_is_pow2(v) && v >= MIN_SLOT)
                                pl[np++] = (struct placement){sat_mul(v, d->vfs), v,     false,
                                                              NTBF_REGION_VF_BAR, di,    b,
                                                              &d->vf_bar_addr[b], d->loc};
                }
        }
        qsort(pl, np, sizeof(*pl), cmp_placement);
        for (size_t k = 0; k < np; k++) {
                struct placement *p = &pl[k];
                uint64_t at =
                    p->low ? map_place(m, n->mmio_low_base, n->mmio_low_end, p->size, p->align)
                           : map_place(m, n->mmio_high_base, NTBF_PHYS_LIMIT, p->size, p->align);
                if (!at) {
                        const char *what =
                            p->kind == NTBF_REGION_WINDOW ? "window of adapter" : "BARs of device";
                        const char *obj = p->kind == NTBF_REGION_WINDOW ? t->adapters[p->obj].name
                                                                        : t->devices[p->obj].name;
                        ERR(f, p->loc,
                            "node '%s': the %s %s (%s) do not fit in its %s MMIO "
                            "space; shrink them or enlarge the space (mmio_low/"
                            "mmio_high)",
                            n->name, what, obj, ntbf_size_fmt(p->size, sz, sizeof(sz)),
                            p->low ? "32-bit" : "64-bit");
                        continue;
                }
                *p->out = at;
                int r =
                    p->kind == NTBF_REGION_WINDOW
                        ? insert_bar(m, &cap, &t->adapters[p->obj], p->obj, p->index, at)
                        : map_insert(m, &cap,
                                     (struct ntbf_region){at, p->size, p->kind, p->obj, p->index});
                if (r) {
                        free(pl);
                        goto nomem;
                }
        }
        free(pl);
        return;
nomem:
        f->err = -ENOMEM;
}

static int build_indexes(struct ntbf_topo *t)
{
        for (uint32_t i = 0; i < t->nnodes; i++) {
                free(t->nodes[i].adapters);
                free(t->nodes[i].devices);
                t->nodes[i].adapters = t->nodes[i].devices = NULL;
                t->nodes[i].nadapters = t->nodes[i].ndevices = 0;
        }
        for (uint32_t i = 0; i < t->nadapters; i++)
                t->nodes[t->adapters[i].node].nadapters++;
        for (uint32_t i = 0; i < t->ndevices; i++)
                t->nodes[t->devices[i].node].ndevices++;
        for (uint32_t i = 0; i < t->nnodes; i++) {
                struct ntbf_node *n = &t->nodes[i];
                n->adapters = malloc((n->nadapters + 1) * sizeof(uint32_t));
                n->devices = malloc((n->ndevices + 1) * sizeof(uint32_t));
                if (!n->adapters || !n->devices)
                        return -ENOMEM;
                n->nadapters = n->ndevices = 0;
        }
        for (uint32_t i = 0; i < t->nadapters; i++) {
                struct ntbf_node *n = &t->nodes[t->adapters[i].node];
                n->adapters[n->nadapters++] = i;
        }
        for (uint32_t i = 0; i < t->ndevices; i++) {
                struct ntbf_node *n = &t->nodes[t->devices[i].node];
                n->devices[n->ndevices++] = i;
        }
        return 0;
}

/* ---- finalize: reachability ------------------------------------------------------------- */

/*
 * Two nodes reach each other when an adapter of one is cabled to an adapter of the
 * other, or both have adapters cabled into the same network of switches. Traffic does
 * not transit through a third host (docs/model.md).
 */
static uint32_t uf_find(uint32_t *p, uint32_t x)
{
        while (p[x] != x) {
                p[x] = p[p[x]];
                x = p[x];
        }
        return x;
}

struct attach {
        uint32_t *sw; /* switch components a node attaches to (sorted, unique) */
        uint32_t nsw;
        uint32_t *peer; /* nodes directly cabled to this node */
        uint32_t npeer;
        bool cut_off; /* reaches no node at all (already reported) */
};

static bool sorted_has(const uint32_t *v, uint32_t n, uint32_t x)
{
        uint32_t lo = 0, hi = n;
        while (lo < hi) {
                uint32_t mid = (lo + hi) / 2;
                if (v[mid] == x)
                        return true;
                if (v[mid] < x)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return false;
}

static int cmp_u32(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
        return x < y ? -1 : x > y;
}

static bool attach_reach(const struct attach *at, uint32_t a, uint32_t b)
{
        const struct attach *x = &at[a], *y = &at[b];
        for (uint32_t i = 0; i < x->nsw; i++)
                if (sorted_has(y->sw, y->nsw, x->sw[i]))
                        return true;
        return sorted_has(x->peer, x->npeer, b);
}

/*
 * What node n's adapters are cabled to: the switch networks (union-find roots in uf) when
 * kind is NTBF_PORT_SWITCH, the peer nodes when it is NTBF_PORT_ADAPTER. Returns the count.
 */
static uint32_t cabled_to(const struct ntbf_topo *t, uint32_t n, enum ntbf_port_kind kind,
                          uint32_t *uf, uint32_t *out)
{
        const struct ntbf_node *node = &t->nodes[n];
        uint32_t cnt = 0;
        for (uint32_t k = 0; k < node->nadapters; k++) {
                const struct ntbf_adapter *a = &t->adapters[node->adapters[k]];
                for (uint32_t p = 0; p < NTBF_MAX_ADAPTER_PORTS; p++) {
                        if (a->link[p] == NTBF_NONE)
                                continue;
                        struct ntbf_port_ref me = {NTBF_PORT_ADAPTER, node->adapters[k], p};
                        struct ntbf_port_ref o = ntbf_link_peer(&t->links[a->link[p]], me);
                        if (o.kind != kind)
                                continue;
                        out[cnt++] =
                            kind == NTBF_PORT_SWITCH ? uf_find(uf, o.obj) : t->adapters[o.obj].node;
                }
        }
        return cnt;
}

static void check_reach(struct fin *f)
{
        struct ntbf_topo *t = f->t;
        if (t->nnodes < 2)
                return;
        uint32_t *uf = malloc((t->nswitches + 1) * sizeof(*uf));
        struct attach *at = calloc(t->nnodes, sizeof(*at));
        uint32_t *buf = malloc((2 * (size_t)t->nlinks + 1) * 2 * sizeof(*buf));
        if (!uf || !at || !buf) {
                f->err = -ENOMEM;
                goto out;
        }
        for (uint32_t i = 0; i < t->nswitches; i++)
                uf[i] = i;
        for (uint32_t i = 0; i < t->nlinks; i++) {
                const struct ntbf_link *l = &t->links[i];
                if (l->end[0].kind == NTBF_PORT_SWITCH && l->end[1].kind == NTBF_PORT_SWITCH &&
                    t->switches[l->end[0].obj].link && t->switches[l->end[1].obj].link) {
                        uint32_t a = uf_find(uf, l->end[0].obj), b = uf_find(uf, l->end[1].obj);
                        uf[a] = b;
                }
        }
        /* Fill each node's switch components, then its direct peers. */
        uint32_t *cur = buf;
        for (uint32_t ni = 0; ni < t->nnodes; ni++) {
                struct attach *x = &at[ni];
                x->sw = cur;
                x->nsw = cabled_to(t, ni, NTBF_PORT_SWITCH, uf, x->sw);
                cur += x->nsw;
                x->peer = cur;
                x->npeer = cabled_to(t, ni, NTBF_PORT_ADAPTER, uf, x->peer);
                cur += x->npeer;
                qsort(x->sw, x->nsw, sizeof(uint32_t), cmp_u32);
                qsort(x->peer, x->npeer, sizeof(uint32_t), cmp_u32);
        }
        /* Common case: every node attaches to one switch network. */
        bool all = t->nswitches > 0;
        uint32_t c0 = at[0].nsw ? at[0].sw[0] : UINT32_MAX;
        for (uint32_t ni = 0; all && ni < t->nnodes; ni++)
                all = sorted_has(at[ni].sw, at[ni].nsw, c0);
        if (all)
                goto out;
        /* Nodes cut off entirely get one error naming why; then each missing pair once. */
        unsigned reported = 0;
        for (uint32_t a = 0; a < t->nnodes; a++) {
                const struct ntbf_node *n = &t->nodes[a];
                if (n->nadapters == 0)
                        ERR(f, n->loc,
                            "node '%s' has no adapter, so it cannot reach the other "
                            "nodes; add an adapter and cable it to the fabric",
                            n->name);
                else if (at[a].nsw == 0 && at[a].npeer == 0)
                        ERR(f, n->loc,
                            "node '%s' cannot reach the other nodes: none of its "
                            "adapters has a link; cable one to another node or a "
                            "switch",
                            n->name);
                else
                        continue;
                at[a].cut_off = true;
        }
        for (uint32_t a = 0; a < t->nnodes && reported < 20; a++) {
                if (at[a].cut_off)
                        continue;
                for (uint32_t b = 0; b < t->nnodes; b++) {
                        if (a == b || at[b].cut_off || attach_reach(at, a, b))
                                continue;
                        if (b < a)
                                break; /* reported from b's side */
                        ERR(f, t->nodes[a].loc,
                            "node '%s' cannot reach node '%s': no link or "
                            "switch connects them; cable an adapter of '%s' "
                            "to '%s' or to a switch both reach",
                            t->nodes[a].name, t->nodes[b].name, t->nodes[a].name, t->nodes[b].name);
                        reported++;
                        break;
                }
        }
out:
        free(uf);
        free(at);
        free(buf);
}

/*
 * Slots of window w one BAR of s bytes (naturally aligned) takes: one when a translation
 * covers it, else consecutive whole slots in a window of several; 0 when it cannot.
 */
static uint64_t bar_need(const struct ntbf_window *w, uint64_t s)
{
        if (s <= w->size_max && w->addr_align <= w->size_max)
                return 1;
        if (w->slots > 1 && w->size_max == w->slot_size)
                return ntbf_div_ceil(s, w->slot_size);
        return 0;
}

/*
 * Whether the BARs of function fn of d fit adapter a's windows at once: each BAR, largest
 * first, in the window of smallest slots that still has room for it. *bytes is the window
 * they take (or, when they do not fit, what they would take in a's largest window).
 */
static bool bars_fit(const struct ntbf_device *d, uint32_t fn, const struct ntbf_adapter *a,
                     uint64_t *bytes)
{
        uint64_t left[NTBF_MAX_WINDOWS], size[NTBF_MAX_BARS];
        uint32_t nb = 0;
        for (uint32_t w = 0; w < a->nwin; w++)
                left[w] = a->win[w].slots - a->win[w].reserved;
        for (uint32_t b = 0; b < NTBF_MAX_BARS; b++) {
                uint64_t v = ntbf_device_bar_size(d, fn, b), k = nb++;
                for (; k > 0 && size[k - 1] < v; k--)
                        size[k] = size[k - 1];
                size[k] = v;
        }
        bool fits = true;
        *bytes = 0;
        for (uint32_t b = 0; b < nb && size[b]; b++) {
                uint32_t best = NTBF_NONE;
                for (uint32_t w = 0; w < a->nwin; w++) {
                        uint64_t need = bar_need(&a->win[w], size[b]);
                        if (need && need <= left[w] &&
                            (best == NTBF_NONE || a->win[w].slot_size < a->win[best].slot_size))
                                best = w;
                }
                if (best == NTBF_NONE) {
                        /* Counted in the largest window, as if it fitted there. */
                        uint32_t big = 0;
                        for (uint32_t w = 1; w < a->nwin; w++)
                                if (a->win[w].size > a->win[big].size)
                                        big = w;
                        uint64_t need = bar_need(&a->win[big], size[b]);
                        *bytes += (need ? need : ntbf_div_ceil(size[b], a->win[big].slot_size)) *
                                  a->win[big].slot_size;
                        fits = false;
                        continue;
                }
                uint64_t need = bar_need(&a->win[best], size[b]);
                left[best] -= need;
                *bytes += need * a->win[best].slot_size;
        }
        return fits;
}

/* Bytes of all of an adapter's windows. */
static uint64_t windows_bytes(const struct ntbf_adapter *a)
{
        uint64_t n = 0;
        for (uint32_t w = 0; w < a->nwin; w++)
                n += a->win[w].size;
        return n;
}

/* Whether two adapters have the same windows for the fit check (slot counts and sizes). */
static bool same_geometry(const struct ntbf_adapter *a, const struct ntbf_adapter *b)
{
        if (a->nwin != b->nwin)
                return false;
        for (uint32_t w = 0; w < a->nwin; w++)
                if (a->win[w].slots != b->win[w].slots ||
                    a->win[w].reserved != b->win[w].reserved ||
                    a->win[w].slot_size != b->win[w].slot_size ||
                    a->win[w].size_max != b->win[w].size_max ||
                    a->win[w].addr_align != b->win[w].addr_align)
                        return false;
        return true;
}

/*
 * Window geometries present in the fabric, each with two distinct nodes that have it (a
 * device cannot be borrowed by its own node).
 */
struct geometry {
        uint32_t adapter; /* one adapter of that geometry */
        uint32_t node[2];
};

static void check_device_fit(struct fin *f)
{
        struct ntbf_topo *t = f->t;
        char sz[32], sz2[32];
        struct geometry *g = malloc((t->nadapters + 1) * sizeof(*g));
        uint32_t ng = 0;
        if (!g) {
                f->err = -ENOMEM;
                return;
        }
        for (uint32_t k = 0; k < t->nadapters; k++) {
                const struct ntbf_adapter *a = &t->adapters[k];
                if (!a->nwin)
                        continue;
                uint32_t i = 0;
                while (i < ng && !same_geometry(&t->adapters[g[i].adapter], a))
                        i++;
                if (i == ng)
                        g[ng++] = (struct geometry){k, {a->node, NTBF_NONE}};
                else if (g[i].node[1] == NTBF_NONE && g[i].node[0] != a->node)
                        g[i].node[1] = a->node;
        }
        for (uint32_t i = 0; i < t->ndevices; i++) {
                const struct ntbf_device *d = &t->devices[i];
                if (!d->lend)
                        continue;
                uint64_t best = 0, need_bytes = 0;
                bool fits = false;
                for (uint32_t k = 0; k < ng && !fits; k++) {
                        const struct geometry *x = &g[k];
                        if (x->node[0] == d->node && x->node[1] == NTBF_NONE)
                                continue;
                        const struct ntbf_adapter *a = &t->adapters[x->adapter];
                        uint64_t need, vneed = 0;
                        fits = bars_fit(d, 0, a, &need);
                        if (d->vfs) {
                                fits = bars_fit(d, d->functions, a, &vneed) && fits;
                                need = need > vneed ? need : vneed;
                        }
                        if (windows_bytes(a) > best) {
                                best = windows_bytes(a);
                                need_bytes = need;
                        }
                }
                if (!fits && best)
                        ERR(f, d->loc_bars.line ? d->loc_bars : d->loc,
                            "device %s.%s: its BARs need %s of window but the largest window of "
                            "another node is %s; enlarge a borrower's window or set lend: false",
                            t->nodes[d->node].name, d->name,
                            ntbf_size_fmt(need_bytes, sz, sizeof(sz)),
                            ntbf_size_fmt(best, sz2, sizeof(sz2)));
        }
        free(g);
}

const struct ntbf_window *ntbf_adapter_slot_window(const struct ntbf_adapter *a, uint32_t slot)
{
        for (uint32_t w = 0; w < a->nwin; w++)
                if (slot - a->win[w].first_slot < a->win[w].slots)
                        return &a->win[w];
        return NULL;
}

int ntbf_adapter_addr_window(const struct ntbf_adapter *a, uint64_t addr, uint64_t *off)
{
        for (uint32_t w = 0; w < a->nwin; w++)
                if (addr - a->win[w].base < a->win[w].size) {
                        if (off)
                                *off = addr - a->win[w].base;
                        return (int)w;
                }
        return -1;
}

bool ntbf_window_xlat_ok(const struct ntbf_window *w, uint64_t addr, uint64_t size)
{
        if (!w || !size || size > w->size_max || size % w->size_align || addr % w->addr_align)
                return false;
        if (w->flags & NTBF_WIN_NATURAL_ALIGN) {
                uint64_t nat = size <= 1 ? 1 : UINT64_C(1) << (64 - __builtin_clzll(size - 1));
                if (addr % nat)
                        return false;
        }
        return true;
}

int ntbf_topo_finalize(struct ntbf_topo *t, struct ntbf_diags *diags)
{
        struct fin f = {.t = t, .d = diags};
        ntbf__strmap_init(&f.node_names);
        size_t errors0 = diags->errors;
        int r = build_indexes(t);
        if (r)
                goto out;
        check_nodes(&f);
        check_adapters(&f);
        check_switches(&f);
        if (!f.err)
                check_links(&f);
        if (!f.err)
                check_devices(&f);
        if (!f.err)
                check_chassis(&f);
        if (f.err) {
                r = f.err;
                goto out;
        }
        if (t->maps)
                for (uint32_t i = 0; i < t->nnodes; i++)
                        free(t->maps[i].v);
        free(t->maps);
        t->maps = calloc(t->nnodes ? t->nnodes : 1, sizeof(*t->maps));
        if (!t->maps) {
                r = -ENOMEM;
                goto out;
        }
        for (uint32_t i = 0; i < t->nnodes && !f.err; i++)
                if (t->nodes[i].ndevices <= NTBF_MAX_NODE_DEVICES &&
                    t->nodes[i].nadapters <= NTBF_MAX_NODE_ADAPTERS)
                        build_map(&f, i);
        if (!f.err)
                check_reach(&f);
        if (!f.err)
                check_device_fit(&f);
        if (f.err) {
                r = f.err;
                goto out;
        }
        ntbf__graph_free(t->graph);
        t->graph = ntbf__graph_build(t);
        if (!t->graph) {
                r = -ENOMEM;
                goto out;
        }
        t->finalized = diags->errors == errors0;
        r = t->finalized ? 0 : NTBF_ECONFIG;
out:
        ntbf__strmap_free(&f.node_names);
        return r;
}
