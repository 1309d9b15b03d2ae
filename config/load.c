/* config/load.c: the cluster file schema: YAML values into a finalized topology. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ntbfab/backend.h"
#include "ntbfab/config.h"
#include "ntbfab/error.h"
#include "ntbfab/units.h"
#include "strmap.h"
#include "suggest.h"
#include "yamltree.h"

#define NONE         NTBF__YT_NONE
#define MAX_FILE     (64 * NTBF_MiB)
#define MAX_KEYS     24
#define SHOW_MAX     40 /* characters of a value quoted in a message */
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Texts of the finalize diagnostics that depend on the whole fabric (core/topology.c:
 * check_reach and check_device_fit). When a mistake made the loader leave out a node,
 * adapter, switch or link (or keep an adapter with stand-in figures), these would report
 * consequences of that mistake rather than new ones, so they are held back.
 */
#define REACH_TEXT "cannot reach"
#define FIT_TEXT   "of window but the largest window"

enum { ABSENT = 0, GOT = 1, BROKEN = -1 };

struct key {
        const char *name;
        const char *need; /* required keys: what to add */
};

struct schema {
        const char *where; /* "in adapter" */
        const struct key *keys;
        size_t n;
        const struct schema *alt; /* keys that belong to a sibling schema (the other sim model) */
        const char *self, *other;
};

struct chunk {
        struct chunk *next;
        size_t used, cap;
        char data[];
};

struct ld {
        const char *file;
        struct ntbf_diags *d;
        const struct ntbf__yt_doc *doc;
        struct ntbf_topo *t;
        struct ntbf_topo *sink; /* gives the core's defaults to objects that are only checked */
        int err;                /* -ENOMEM */
        bool lost_links;        /* something links may refer to was left out */
        bool lost_windows;      /* an adapter was left out or kept with stand-in figures */
        struct ntbf__strmap nodes, switches, adapters; /* name -> index; adapters "node.name" */
        struct ntbf__strmap addrs; /* a node's address, host lowercased ("host.port") -> node */
        uint32_t suggested; /* keys of the last take_map() a misspelling was reported for */
        bool *incomplete;   /* per node: an adapter of it was left out, links to it are moot */
        uint32_t nincomplete;
        struct chunk *keys;          /* storage of the composite keys */
        uint32_t *standin, nstandin; /* nodes whose id was unusable */
        bool chassis_lost;           /* a chassis of the node being loaded was left out */
};

/* ---- diagnostics ------------------------------------------------------------------------ */

static void err(struct ld *ld, struct ntbf_loc loc, const char *fmt, ...) NTBF_PRINTF(3, 4);

static void err(struct ld *ld, struct ntbf_loc loc, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        if (ntbf_diag_vadd(ld->d, NTBF_SEV_ERROR, ld->file, loc, fmt, ap))
                ld->err = -ENOMEM;
        va_end(ap);
}

static const struct ntbf__yt_node *nd(const struct ld *ld, uint32_t v)
{
        return ntbf__yt_at(ld->doc, v);
}

static struct ntbf_loc at(const struct ld *ld, uint32_t v)
{
        return nd(ld, v)->loc;
}

static const char *text(const struct ld *ld, uint32_t v)
{
        return ntbf__yt_str(ld->doc, v);
}

/* s quoted for a message: at most SHOW_MAX characters, control characters escaped. */
static const char *show(const char *s, char *buf, size_t len)
{
        size_t o = 0, chars = 0;
        buf[o++] = '\'';
        for (; *s && o + 8 < len; s++) {
                unsigned char c = (unsigned char)*s;
                if ((c & 0xc0) != 0x80 && ++chars > SHOW_MAX) {
                        memcpy(buf + o, "...", 3);
                        o += 3;
                        break;
                }
                if (c < 0x20 || c == 0x7f)
                        o += (size_t)snprintf(buf + o, len - o, "\\x%02x", c);
                else
                        buf[o++] = (char)c;
        }
        buf[o++] = '\'';
        buf[o] = 0;
        return buf;
}

#define SHOWBUF 200

/* What a value is, for "must be X, not Y". */
static const char *desc(const struct ld *ld, uint32_t v, char *buf, size_t len)
{
        switch (nd(ld, v)->kind) {
        case NTBF__YT_SEQ:
                return "a list";
        case NTBF__YT_MAP:
                return "a mapping";
        case NTBF__YT_SCALAR:
                if (*text(ld, v))
                        return show(text(ld, v), buf, len);
                return "empty";
        default:
                return "empty";
        }
}

static void wrong_type(struct ld *ld, uint32_t v, const char *label, const char *want)
{
        char b[SHOWBUF];
        err(ld, at(ld, v), "%s must be %s, not %s", label, want, desc(ld, v, b, sizeof(b)));
}

/* ---- typed values ----------------------------------------------------------------------- */

static int get_text(struct ld *ld, uint32_t v, const char *label, const char *want,
                    const char **out)
{
        if (v == NONE)
                return ABSENT;
        const struct ntbf__yt_node *n = nd(ld, v);
        if (n->kind == NTBF__YT_BAD)
                return BROKEN;
        if (n->kind != NTBF__YT_SCALAR || !n->len) {
                wrong_type(ld, v, label, want);
                return BROKEN;
        }
        if (n->has_nul) {
                err(ld, n->loc, "%s holds a NUL character (\\0); remove it", label);
                return BROKEN;
        }
        *out = text(ld, v);
        return GOT;
}

static int get_size(struct ld *ld, uint32_t v, const char *label, uint64_t *out)
{
        const char *s, *why = NULL;
        char b[SHOWBUF];
        int r = get_text(ld, v, label, "a size like 1GiB", &s);
        if (r != GOT)
                return r;
        int e = ntbf_size_parse(s, out, &why);
        if (e == -ERANGE) {
                err(ld, at(ld, v), "%s value %s is too large; sizes must be below 16 EiB", label,
                    show(s, b, sizeof(b)));
                return BROKEN;
        }
        if (e && isdigit((unsigned char)s[0]) && strchr(s, '.'))
                why = "sizes are whole numbers; use a smaller unit (1536MiB, not 1.5GiB)";
        if (e) {
                err(ld, at(ld, v), "%s value %s is not a size: %s", label, show(s, b, sizeof(b)),
                    why);
                return BROKEN;
        }
        return GOT;
}

static int get_uint(struct ld *ld, uint32_t v, const char *label, uint64_t min, uint64_t max,
                    const char *hint, uint64_t *out)
{
        const char *s;
        char b[SHOWBUF];
        int r = get_text(ld, v, label, "an integer", &s);
        if (r != GOT)
                return r;
        uint64_t x = 0;
        int e = ntbf_uint_parse(s, &x);
        if (e == -EINVAL) {
                err(ld, at(ld, v),
                    "%s value %s is not an integer; write it in decimal (like 12) or hex (like "
                    "0xc)",
                    label, show(s, b, sizeof(b)));
                return BROKEN;
        }
        if (e || x < min || x > max) {
                /* A number, if too large: shown bare, as written. */
                show(s, b, sizeof(b));
                b[strlen(b) - 1] = 0;
                err(ld, at(ld, v), "%s value %s is out of range %" PRIu64 "..%" PRIu64 "; %s",
                    label, b + 1, min, max, hint ? hint : "use a value in that range");
                return BROKEN;
        }
        *out = x;
        return GOT;
}

static int get_u32(struct ld *ld, uint32_t v, const char *label, uint32_t min, uint32_t max,
                   const char *hint, uint32_t *out)
{
        uint64_t x;
        int r = get_uint(ld, v, label, min, max, hint, &x);
        if (r == GOT)
                *out = (uint32_t)x;
        return r;
}

static int get_addr(struct ld *ld, uint32_t v, const char *label, uint64_t *out)
{
        const char *s;
        char b[SHOWBUF];
        int r = get_text(ld, v, label, "an address like 0x80000000", &s);
        if (r != GOT)
                return r;
        int e = ntbf_uint_parse(s, out);
        if (e == -ERANGE) {
                err(ld, at(ld, v), "%s value %s is too large; addresses are 64-bit", label,
                    show(s, b, sizeof(b)));
                return BROKEN;
        }
        if (e) {
                err(ld, at(ld, v),
                    "%s value %s is not an address; write it in decimal or hex, like 0x80000000",
                    label, show(s, b, sizeof(b)));
                return BROKEN;
        }
        return GOT;
}

static int get_bool(struct ld *ld, uint32_t v, const char *label, bool *out)
{
        const char *s;
        char b[SHOWBUF];
        int r = get_text(ld, v, label, "true or false", &s);
        if (r != GOT)
                return r;
        if (!strcmp(s, "true") || !strcmp(s, "false")) {
                *out = s[0] == 't';
                return GOT;
        }
        err(ld, at(ld, v), "%s value %s is not a boolean; write true or false", label,
            show(s, b, sizeof(b)));
        return BROKEN;
}

/* One of names (case-insensitive); *idx gets its position. what: "adapter model". */
static int get_choice(struct ld *ld, uint32_t v, const char *label, const char *what,
                      const char *const *names, size_t n, size_t *idx)
{
        const char *s;
        char b[SHOWBUF], low[65], list[256], want[272];
        size_t o = 0;
        list[0] = 0;
        for (size_t i = 0; i < n && o < sizeof(list); i++)
                o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "", names[i]);
        snprintf(want, sizeof(want), "one of %s", list);
        int r = get_text(ld, v, label, want, &s);
        if (r != GOT)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (!strcasecmp(s, names[i])) {
                        *idx = i;
                        return GOT;
                }
        }
        size_t k = 0;
        for (; s[k] && k < sizeof(low) - 1; k++)
                low[k] = (char)tolower((unsigned char)s[k]);
        low[k] = 0;
        struct ntbf__suggest sg;
        ntbf__suggest_init(&sg, low);
        for (size_t i = 0; i < n; i++)
                ntbf__suggest_add(&sg, names[i]);
        const char *best = ntbf__suggest_result(&sg);
        if (best) {
                err(ld, at(ld, v), "unknown %s %s; did you mean '%s'?", what, show(s, b, sizeof(b)),
                    best);
                return BROKEN;
        }
        err(ld, at(ld, v), "unknown %s %s; use one of %s", what, show(s, b, sizeof(b)), list);
        return BROKEN;
}

static bool name_char(char c)
{
        return isalnum((unsigned char)c) || c == '_' || c == '-';
}

/*
 * An object name: [A-Za-z][A-Za-z0-9_-]*, at most max characters. An invalid name is
 * reported but still returned (GOT): the object keeps it so that its other mistakes and
 * the links to it are still checked.
 */
static int get_name(struct ld *ld, uint32_t v, const char *what, size_t max, const char **out)
{
        char label[64], b[SHOWBUF];
        snprintf(label, sizeof(label), "%s name", what);
        int r =
            get_text(ld, v, "'name'", "a name (a letter, then letters, digits, '_' or '-')", out);
        if (r != GOT)
                return r;
        const char *s = *out;
        bool ok = isalpha((unsigned char)s[0]);
        for (const char *p = s; ok && *p; p++)
                ok = name_char(*p);
        if (!ok)
                err(ld, at(ld, v),
                    "%s %s is not valid; a name starts with a letter and holds only letters, "
                    "digits, '_' and '-' (dots separate the parts of link ends)",
                    label, show(s, b, sizeof(b)));
        else if (strlen(s) > max)
                err(ld, at(ld, v), "%s %s is %zu characters long; shorten it to at most %zu", label,
                    show(s, b, sizeof(b)), strlen(s), max);
        return GOT;
}

/*
 * An invalid name is kept so that links to it still resolve, but control characters in it
 * would reach terminals through finalize's messages: those become '?'.
 */
static void tidy_name(char *name)
{
        for (; *name; name++)
                if ((unsigned char)*name < 0x20 || *name == 0x7f)
                        *name = '?';
}

/* ---- mappings --------------------------------------------------------------------------- */

static const char *key_list(const struct schema *s, char *buf, size_t len)
{
        size_t o = 0;
        buf[0] = 0;
        for (size_t i = 0; i < s->n && o < len; i++)
                o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "", s->keys[i].name);
        return buf;
}

static size_t key_index(const struct schema *s, const char *k)
{
        for (size_t i = 0; i < s->n; i++)
                if (!strcmp(s->keys[i].name, k))
                        return i;
        return SIZE_MAX;
}

static void unknown_key(struct ld *ld, uint32_t k, const struct schema *s)
{
        char b[SHOWBUF], list[512];
        const char *name = text(ld, k);
        if (s->alt && key_index(s->alt, name) != SIZE_MAX) {
                err(ld, at(ld, k),
                    "key %s is a setting of %s, not of %s; remove it or change 'model'",
                    show(name, b, sizeof(b)), s->other, s->self);
                return;
        }
        struct ntbf__suggest sg;
        ntbf__suggest_init(&sg, name);
        for (size_t i = 0; i < s->n; i++)
                ntbf__suggest_add(&sg, s->keys[i].name);
        const char *best = ntbf__suggest_result(&sg);
        if (best)
                ld->suggested |= UINT32_C(1) << key_index(s, best);
        if (best)
                err(ld, at(ld, k), "unknown key %s %s; did you mean '%s'?",
                    show(name, b, sizeof(b)), s->where, best);
        else
                err(ld, at(ld, k), "unknown key %s %s; known keys: %s", show(name, b, sizeof(b)),
                    s->where, key_list(s, list, sizeof(list)));
}

/*
 * Collect the values of a mapping by key: vals[i] is the value of s->keys[i] or NONE.
 * Unknown, duplicate and non-word keys are reported. Returns false when v is not a
 * mapping (reported, as "LABEL must be WANT, not ...").
 */
static bool take_map(struct ld *ld, uint32_t v, const char *label, const char *want,
                     const struct schema *s, uint32_t *vals)
{
        uint32_t keyn[MAX_KEYS];
        char b[SHOWBUF];
        for (size_t i = 0; i < s->n; i++)
                vals[i] = keyn[i] = NONE;
        ld->suggested = 0;
        if (v == NONE || nd(ld, v)->kind == NTBF__YT_BAD)
                return false;
        if (nd(ld, v)->kind != NTBF__YT_MAP) {
                wrong_type(ld, v, label, want);
                return false;
        }
        for (uint32_t k = nd(ld, v)->first; k != NONE;) {
                uint32_t val = nd(ld, k)->next;
                if (val == NONE)
                        break;
                const struct ntbf__yt_node *kn = nd(ld, k);
                if (kn->kind == NTBF__YT_SCALAR && kn->len && !kn->has_nul) {
                        size_t i = key_index(s, text(ld, k));
                        if (i == SIZE_MAX) {
                                unknown_key(ld, k, s);
                        } else if (vals[i] != NONE) {
                                err(ld, kn->loc,
                                    "duplicate key %s %s (first at line %u, column %u); "
                                    "remove one of them",
                                    show(text(ld, k), b, sizeof(b)), s->where, at(ld, keyn[i]).line,
                                    at(ld, keyn[i]).col);
                        } else {
                                vals[i] = val;
                                keyn[i] = k;
                        }
                } else if (kn->kind != NTBF__YT_BAD) {
                        err(ld, kn->loc, "a key %s must be a word like '%s', not %s", s->where,
                            s->keys[0].name,
                            kn->kind == NTBF__YT_SCALAR && kn->len ? "text with a NUL character"
                                                                   : desc(ld, k, b, sizeof(b)));
                }
                k = nd(ld, val)->next;
        }
        return true;
}

/*
 * Report the required keys of s missing from mapping v; obj names the object ("node 'a'").
 * A key whose misspelling take_map() just reported is not reported again as missing.
 */
static void need(struct ld *ld, uint32_t v, const struct schema *s, const uint32_t *vals,
                 const char *obj)
{
        for (size_t i = 0; i < s->n; i++)
                if (s->keys[i].need && vals[i] == NONE && !(ld->suggested & (UINT32_C(1) << i)))
                        err(ld, at(ld, v), "%s has no '%s'; add %s", obj, s->keys[i].name,
                            s->keys[i].need);
}

/* A list value: the first item, or NONE when it is empty, null or not a list (reported). */
static bool take_list(struct ld *ld, uint32_t v, const char *label, const char *want,
                      uint32_t *first)
{
        *first = NONE;
        if (v == NONE || nd(ld, v)->kind == NTBF__YT_NULL)
                return true; /* an empty value is an empty list */
        if (nd(ld, v)->kind == NTBF__YT_BAD)
                return false;
        if (nd(ld, v)->kind != NTBF__YT_SEQ) {
                wrong_type(ld, v, label, want);
                return false;
        }
        *first = nd(ld, v)->first;
        return true;
}

static uint32_t next(const struct ld *ld, uint32_t v)
{
        return nd(ld, v)->next;
}

/* ---- composite keys --------------------------------------------------------------------- */

static const char *keep_key(struct ld *ld, const char *a, const char *b);

/*
 * Two nodes with one address: their daemons cannot both listen there, and a daemon that
 * finds its node by its host's addresses (docs/daemon.md) could not tell them apart. Host
 * names compare without regard to case; the port as a number.
 */
static void check_address(struct ld *ld, uint32_t idx, struct ntbf_loc loc)
{
        const char *a = ld->t->nodes[idx].address, *colon = strrchr(a, ':');
        char host[64];
        snprintf(host, sizeof(host), "%.*s", (int)(colon - a), a);
        for (char *p = host; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        char port[8];
        snprintf(port, sizeof(port), "%lu", strtoul(colon + 1, NULL, 10));
        const char *key = keep_key(ld, host, port);
        uint32_t old;
        int r = key ? ntbf__strmap_put(&ld->addrs, key, idx, &old) : -ENOMEM;
        if (r < 0)
                ld->err = -ENOMEM;
        else if (r == 1)
                err(ld, loc,
                    "address %s is already the address of node '%s' (line %u); give each node "
                    "the HOST:PORT its own daemon listens on",
                    a, ld->t->nodes[old].name, ld->t->nodes[old].loc.line);
}

static const char *keep_key(struct ld *ld, const char *a, const char *b)
{
        size_t need = strlen(a) + strlen(b) + 2;
        struct chunk *c = ld->keys;
        if (!c || c->cap - c->used < need) {
                size_t cap = need > 65536 ? need : 65536;
                c = malloc(sizeof(*c) + cap);
                if (!c) {
                        ld->err = -ENOMEM;
                        return NULL;
                }
                c->next = ld->keys;
                c->used = 0;
                c->cap = cap;
                ld->keys = c;
        }
        char *p = c->data + c->used;
        snprintf(p, need, "%s.%s", a, b);
        c->used += need;
        return p;
}

static void put(struct ld *ld, struct ntbf__strmap *m, const char *key, uint32_t val)
{
        uint32_t old;
        int r = key ? ntbf__strmap_put(m, key, val, &old) : 0;
        if (r < 0)
                ld->err = -ENOMEM;
        /* Finalize reports the duplicate; links can only name the first, not this one. */
        if (r == 1)
                ld->lost_links = true;
}

static void mark_incomplete(struct ld *ld, uint32_t node)
{
        if (node >= ld->nincomplete) {
                uint32_t n = ld->t->nnodes;
                bool *v = realloc(ld->incomplete, n * sizeof(*v));
                if (!v) {
                        ld->err = -ENOMEM;
                        return;
                }
                memset(v + ld->nincomplete, 0, (n - ld->nincomplete) * sizeof(*v));
                ld->incomplete = v;
                ld->nincomplete = n;
        }
        ld->incomplete[node] = true;
}

/* ---- schemas ---------------------------------------------------------------------------- */

enum { T_CLUSTER, T_NODES, T_SWITCHES, T_LINKS, T_N };
static const struct key top_keys[] = {
    {"cluster", "'cluster: {name: NAME}'"},
    {"nodes", "'nodes:' with a list of the cluster's nodes"},
    {"switches", NULL},
    {"links", NULL},
};
static const struct schema top_schema = {"at the top level", top_keys, T_N, NULL, NULL, NULL};

enum {
        C_NAME,
        C_BACKEND,
        C_KEY_FILE,
        C_MANAGER,
        C_LEASE,
        C_ALLOW_USERS,
        C_ALLOW_GROUPS,
        C_SOCKET_GROUP,
        C_N
};
static const struct key cluster_keys[] = {
    {"name", "'name: NAME'"}, {"backend", NULL},     {"key_file", NULL},     {"manager", NULL},
    {"lease", NULL},          {"allow_users", NULL}, {"allow_groups", NULL}, {"socket_group", NULL},
};
static const struct schema cluster_schema = {"in cluster", cluster_keys, C_N, NULL, NULL, NULL};

enum {
        N_NAME,
        N_ID,
        N_ADDRESS,
        N_RAM,
        N_CPU_RIDS,
        N_IOMMU,
        N_MMIO_LOW,
        N_MMIO_LOW_END,
        N_MMIO_HIGH,
        N_ROOT_NS,
        N_CHASSIS,
        N_ADAPTERS,
        N_DEVICES,
        N_N
};
static const struct key node_keys[] = {
    {"name", "'name: NAME'"},
    {"id", "'id: N' with its SISCI node id"},
    {"address", "'address: HOST:PORT' where its daemon listens"},
    {"ram", NULL},
    {"cpu_rids", NULL},
    {"iommu", NULL},
    {"mmio_low", NULL},
    {"mmio_low_end", NULL},
    {"mmio_high", NULL},
    {"root_ns", NULL},
    {"chassis", NULL},
    {"adapters", NULL},
    {"devices", NULL},
};
static const struct schema node_schema = {"in node", node_keys, N_N, NULL, NULL, NULL};

enum { X_NAME, X_HOP_NS, X_UPLINK_NS, X_N };
static const struct key chassis_keys[] = {
    {"name", "'name: NAME'"},
    {"hop_ns", NULL},
    {"uplink_ns", NULL},
};
static const struct schema chassis_schema = {"in chassis", chassis_keys, X_N, NULL, NULL, NULL};

enum {
        A_NAME,
        A_MODEL,
        A_PORTS,
        A_WINDOW,
        A_WINDOW_BASE,
        A_WINDOW_BELOW_4G,
        A_LUT_ENTRIES,
        A_RID_TABLE,
        A_RID_RESERVED,
        A_ADDR_BITS,
        A_DOORBELLS,
        A_SCRATCHPADS,
        A_MESSAGES,
        A_DMA_CHANNELS,
        A_HOP_NS,
        A_XLAT,
        A_BACKEND,
        A_BDF,
        A_WINDOWS,
        A_RID_PROXY,
        A_RID_MASK,
        A_SPAD_WINDOW,
        A_SWITCHTEC,
        A_DOLPHIN,
        A_N
};
static const struct key adapter_keys[] = {
    {"name", "'name: NAME'"},
    {"model", "'model: MODEL' (pxh830, mxh930, intel-gen3, intel-gen4, amd-ntb, "
              "switchtec-pfx, switchtec-pfx-linux or ivshmem)"},
    {"ports", NULL},
    {"window", NULL},
    {"window_base", NULL},
    {"window_below_4g", NULL},
    {"lut_entries", NULL},
    {"rid_table", NULL},
    {"rid_reserved", NULL},
    {"addr_bits", NULL},
    {"doorbells", NULL},
    {"scratchpads", NULL},
    {"messages", NULL},
    {"dma_channels", NULL},
    {"hop_ns", NULL},
    {"xlat", NULL},
    {"backend", NULL},
    {"bdf", NULL},
    {"windows", NULL},
    {"rid_proxy", NULL},
    {"rid_mask", NULL},
    {"spad_window", NULL},
    {"switchtec", NULL},
    {"dolphin", NULL},
};
static const struct schema adapter_schema = {"in adapter", adapter_keys, A_N, NULL, NULL, NULL};

enum {
        D_NAME,
        D_BDF,
        D_LEND,
        D_CLASS,
        D_VENDOR,
        D_DEVICE,
        D_BARS,
        D_FUNCTIONS,
        D_VFS,
        D_VF_BARS,
        D_DMA_BITS,
        D_HOP_NS,
        D_CHASSIS,
        D_SIM,
        D_ISOLATE,
        D_VFIO,
        D_N
};
static const struct key device_keys[] = {
    {"name", "'name: NAME'"},
    {"bdf", "'bdf: \"0000:03:00.0\"' with its PCI address"},
    {"lend", NULL},
    {"class", NULL},
    {"vendor", NULL},
    {"device", NULL},
    {"bars", NULL},
    {"functions", NULL},
    {"vfs", NULL},
    {"vf_bars", NULL},
    {"dma_bits", NULL},
    {"hop_ns", NULL},
    {"chassis", NULL},
    {"sim", NULL},
    {"isolate", NULL},
    {"vfio", NULL},
};
static const struct schema device_schema = {"in device", device_keys, D_N, NULL, NULL, NULL};

/* An adapter's `switchtec:` (docs/switchtec.md): where the switchtec backend reaches it. */
enum { SX_DEVICE, SX_GAS, SX_PARTITION, SX_N };
static const struct key stx_keys[] = {
    {"device", NULL},
    {"gas", NULL},
    {"partition", NULL},
};
static const struct schema stx_schema = {"in switchtec", stx_keys, SX_N, NULL, NULL, NULL};

/* An adapter's `dolphin:` (docs/dolphin.md): what the dolphin backend takes from the file. */
enum { DL_FILE_FIGURES, DL_N };
static const struct key dol_keys[] = {
    {"file_figures", NULL},
};
static const struct schema dol_schema = {"in dolphin", dol_keys, DL_N, NULL, NULL, NULL};

/* One entry of an adapter's `windows:` list (docs/config.md, "Windows"). */
enum {
        WN_SIZE,
        WN_SLOTS,
        WN_RESERVED,
        WN_BAR,
        WN_ADDR_ALIGN,
        WN_SIZE_ALIGN,
        WN_SIZE_MAX,
        WN_BASE,
        WN_N
};
static const struct key window_keys[] = {
    {"size", "'size: SIZE' (the window's bytes)"},
    {"slots", NULL},
    {"reserved", NULL},
    {"bar", NULL},
    {"addr_align", NULL},
    {"size_align", NULL},
    {"size_max", NULL},
    {"base", NULL},
};
static const struct schema window_schema = {"in window", window_keys, WN_N, NULL, NULL, NULL};

enum { B_SIZE, B_PREFETCHABLE, B_BITS, B_N };
static const struct key bar_keys[] = {
    {"size", "'size: SIZE' (a power of two of at least 4KiB)"},
    {"prefetchable", NULL},
    {"bits", NULL},
};
static const struct schema bar_schema = {"in BAR", bar_keys, B_N, NULL, NULL, NULL};

/* Sim keys: one table; each model uses the keys it names. */
enum { S_MODEL, S_CAPACITY, S_QUEUES, S_LBA, S_MDTS, S_CMB, S_MEMORY, S_MSIX, S_N };
static const struct key sim_keys_all[] = {
    {"model", "'model: nvme' or 'model: accel'"},
    {"capacity", NULL},
    {"queues", NULL},
    {"lba", NULL},
    {"mdts", NULL},
    {"cmb", NULL},
    {"memory", NULL},
    {"msix", NULL},
};
static const struct key sim_keys_nvme[] = {
    {"model", NULL}, {"capacity", NULL}, {"queues", NULL}, {"lba", NULL},
    {"mdts", NULL},  {"cmb", NULL},      {"msix", NULL},
};
static const struct key sim_keys_accel[] = {
    {"model", NULL},
    {"memory", NULL},
    {"msix", NULL},
};
static const struct schema sim_schema_all = {"in sim", sim_keys_all, S_N, NULL, NULL, NULL};
static const struct schema sim_schema_accel;
static const struct schema sim_schema_nvme = {"in sim (nvme)",          sim_keys_nvme,
                                              ARRAY_LEN(sim_keys_nvme), &sim_schema_accel,
                                              "the nvme model",         "the accel model"};
static const struct schema sim_schema_accel = {"in sim (accel)",          sim_keys_accel,
                                               ARRAY_LEN(sim_keys_accel), &sim_schema_nvme,
                                               "the accel model",         "the nvme model"};

enum { W_NAME, W_MODEL, W_PORTS, W_RID_TABLE, W_MCAST_GROUPS, W_HOP_NS, W_N };
static const struct key switch_keys[] = {
    {"name", "'name: NAME'"}, {"model", "'model: mxs824'"}, {"ports", NULL},
    {"rid_table", NULL},      {"mcast_groups", NULL},       {"hop_ns", NULL},
};
static const struct schema switch_schema = {"in switch", switch_keys, W_N, NULL, NULL, NULL};

enum { L_ENDS, L_LATENCY_NS, L_N };
static const struct key link_keys[] = {
    {"ends", "'ends: [NODE.ADAPTER, NODE.ADAPTER]'"},
    {"latency_ns", NULL},
};
static const struct schema link_schema = {"in link", link_keys, L_N, NULL, NULL, NULL};

/* The backends' names: every entry of the registry (backends/registry.c), built or not. */
#define MAX_BACKENDS 32
static size_t backend_names(const char **names)
{
        size_t n = 0;
        for (const struct ntbf_backend_entry *e;
             n < MAX_BACKENDS && (e = ntbf_backend_entry_at(n));)
                names[n++] = e->name;
        return n;
}
static const char *const xlats[] = {"outbound", "inbound", "both"};
static const uint32_t xlat_bits[] = {NTBF_XLAT_OUTBOUND, NTBF_XLAT_INBOUND,
                                     NTBF_XLAT_OUTBOUND | NTBF_XLAT_INBOUND};
static const char *const sim_models[] = {"nvme", "accel"};
static const char *const rid_masks[] = {"native", "expand", "refuse"}; /* enum ntbf_rid_mask */

_Static_assert(ARRAY_LEN(top_keys) == T_N && ARRAY_LEN(cluster_keys) == C_N &&
                   ARRAY_LEN(node_keys) == N_N && ARRAY_LEN(adapter_keys) == A_N &&
                   ARRAY_LEN(device_keys) == D_N && ARRAY_LEN(bar_keys) == B_N &&
                   ARRAY_LEN(sim_keys_all) == S_N && ARRAY_LEN(switch_keys) == W_N &&
                   ARRAY_LEN(link_keys) == L_N && ARRAY_LEN(chassis_keys) == X_N &&
                   ARRAY_LEN(window_keys) == WN_N && ARRAY_LEN(stx_keys) == SX_N &&
                   ARRAY_LEN(dol_keys) == DL_N,
               "key tables and their enums must match");
_Static_assert(A_N <= MAX_KEYS && D_N <= MAX_KEYS && N_N <= MAX_KEYS, "raise MAX_KEYS");

/* Stand-in figures for an adapter or switch of unknown model: they accept any link. */
static const struct ntbf_adapter_params standin_adapter = {
    .ports = NTBF_MAX_ADAPTER_PORTS,
    .window = 256 * NTBF_MiB,
    .lut_entries = 256,
    .addr_bits = 64,
    .xlat = NTBF_XLAT_OUTBOUND | NTBF_XLAT_INBOUND,
};
static const struct ntbf_switch_params standin_switch = {
    .ports = NTBF_MAX_SWITCH_PORTS,
    .rid_table = 256,
};

/* ---- cluster ---------------------------------------------------------------------------- */

/*
 * A duration: a whole number with a unit ms, s, m or h ("10s", "500ms"). Bare numbers are
 * refused: a lease of "10" could mean seconds or milliseconds.
 */
static int get_duration_ms(struct ld *ld, uint32_t v, const char *label, uint64_t min_ms,
                           uint64_t max_ms, uint32_t *out)
{
        const char *s;
        char b[SHOWBUF];
        int r = get_text(ld, v, label, "a duration like 10s", &s);
        if (r != GOT)
                return r;
        static const struct {
                const char *unit;
                uint64_t ms;
        } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
        const char *p = s;
        uint64_t x = 0;
        bool digits = false, over = false;
        for (; isdigit((unsigned char)*p); p++) {
                digits = true;
                over |= x > (UINT64_MAX - 9) / 10;
                x = x * 10 + (uint64_t)(*p - '0');
        }
        while (*p == ' ')
                p++;
        uint64_t mult = 0;
        for (size_t i = 0; i < ARRAY_LEN(units); i++)
                if (!strcmp(p, units[i].unit))
                        mult = units[i].ms;
        if (!digits || !mult) {
                err(ld, at(ld, v),
                    "%s value %s is not a duration; write a whole number with a unit ms, s, m or "
                    "h, like 10s or 500ms",
                    label, show(s, b, sizeof(b)));
                return BROKEN;
        }
        over |= x > UINT64_MAX / mult;
        uint64_t ms = x * mult;
        if (over || ms < min_ms || ms > max_ms) {
                err(ld, at(ld, v), "%s value %s is out of range %" PRIu64 "s..%" PRIu64 "s; %s",
                    label, show(s, b, sizeof(b)), min_ms / 1000, max_ms / 1000,
                    "a lease must outlast a few one-second heartbeats and be at most an hour");
                return BROKEN;
        }
        *out = (uint32_t)ms;
        return GOT;
}

/* A user or group name as the system writes them, or a numeric id. */
static bool account_ok(const char *s)
{
        if (!*s || strlen(s) > NTBF_ACCOUNT_MAX || *s == '-')
                return false;
        for (; *s; s++)
                if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.')
                        return false;
        return true;
}

static int get_account(struct ld *ld, uint32_t v, const char *label, const char *want, char *out)
{
        const char *s;
        char b[SHOWBUF];
        int r = get_text(ld, v, label, want, &s);
        if (r != GOT)
                return r;
        if (!account_ok(s)) {
                err(ld, at(ld, v),
                    "%s value %s is not a user or group name; write a name like 'ops' or a "
                    "numeric id, at most %d characters of letters, digits, '_', '-' and '.'",
                    label, show(s, b, sizeof(b)), NTBF_ACCOUNT_MAX);
                return BROKEN;
        }
        snprintf(out, NTBF_ACCOUNT_MAX + 1, "%s", s);
        return GOT;
}

static void get_accounts(struct ld *ld, uint32_t v, const char *key, const char *what,
                         char (*out)[NTBF_ACCOUNT_MAX + 1], uint32_t *n)
{
        char label[48];
        uint32_t item;
        snprintf(label, sizeof(label), "'%s'", key);
        if (!take_list(ld, v, label, what, &item))
                return;
        for (; item != NONE; item = next(ld, item)) {
                if (*n == NTBF_MAX_ALLOW) {
                        err(ld, at(ld, item),
                            "%s lists more than %d entries; use a group (allow_groups) for the "
                            "rest",
                            label, NTBF_MAX_ALLOW);
                        return;
                }
                if (get_account(ld, item, label, what + strlen("a list of "), out[*n]) == GOT)
                        (*n)++;
        }
}

static void load_cluster(struct ld *ld, uint32_t v)
{
        uint32_t vals[C_N];
        const char *s;
        size_t i;
        struct ntbf_cluster_opts *o = &ld->t->opts;
        if (!take_map(ld, v, "'cluster'", "a mapping with name and backend", &cluster_schema, vals))
                return;
        need(ld, v, &cluster_schema, vals, "'cluster'");
        if (get_name(ld, vals[C_NAME], "cluster", sizeof(ld->t->name) - 1, &s) == GOT)
                snprintf(ld->t->name, sizeof(ld->t->name), "%s", s);
        const char *backends[MAX_BACKENDS];
        size_t nb = backend_names(backends);
        if (get_choice(ld, vals[C_BACKEND], "'backend'", "backend", backends, nb, &i) == GOT)
                snprintf(ld->t->backend, sizeof(ld->t->backend), "%s", backends[i]);
        if (get_text(ld, vals[C_KEY_FILE], "'key_file'", "a file path", &s) == GOT) {
                free(ld->t->key_file);
                if (!(ld->t->key_file = strdup(s)))
                        ld->err = -ENOMEM;
        }
        /* The manager must name a node: checked once the nodes are read (check_manager). */
        if (get_text(ld, vals[C_MANAGER], "'manager'", "a node name", &s) == GOT) {
                snprintf(o->manager, sizeof(o->manager), "%s", s);
                o->loc_manager = at(ld, vals[C_MANAGER]);
        }
        get_duration_ms(ld, vals[C_LEASE], "'lease'", 2000, 3600000, &o->lease_ms);
        get_accounts(ld, vals[C_ALLOW_USERS], "allow_users", "a list of user names", o->allow_users,
                     &o->nallow_users);
        get_accounts(ld, vals[C_ALLOW_GROUPS], "allow_groups", "a list of group names",
                     o->allow_groups, &o->nallow_groups);
        get_account(ld, vals[C_SOCKET_GROUP], "'socket_group'", "a group name", o->socket_group);
}

/*
 * With backend switchtec, every adapter says where its switch is (docs/switchtec.md): the GAS
 * (a file to map, or mrpc with the management device), or its bdf, from which the backend
 * finds the switch in sysfs; and its NT partition, which its peers need too (they write the
 * LUT entries of its partition that lead into their memory).
 */
static void check_switchtec(struct ld *ld)
{
        if (strcmp(ld->t->backend, "switchtec"))
                return;
        for (uint32_t i = 0; i < ld->t->nadapters; i++) {
                const struct ntbf_adapter *a = &ld->t->adapters[i];
                const char *nn = ld->t->nodes[a->node].name;
                const struct ntbf_stx_params *x = &a->stx;
                struct ntbf_loc l = x->loc.line ? x->loc : a->loc;
                bool found = x->gas[0] || a->bdf[0];
                if (!found)
                        err(ld, l,
                            "adapter %s.%s: the switchtec backend needs its switch: add bdf: "
                            "with the NT function's PCI address (the switch is found from it in "
                            "/sys/class/switchtec) and switchtec: {partition: N}, or switchtec: "
                            "{gas: /sys/bus/pci/devices/BDF/resource0, partition: N} (the switch "
                            "management function's BAR0), or {gas: mrpc, device: "
                            "/dev/switchtecN, partition: N}",
                            nn, a->name);
                else if (!strcmp(x->gas, "mrpc") && !x->device[0] && !a->bdf[0])
                        err(ld, l,
                            "adapter %s.%s: switchtec: {gas: mrpc} reaches the switch through "
                            "its management device: add device: /dev/switchtecN, or the "
                            "adapter's bdf (the device is then found from it)",
                            nn, a->name);
                if (found && x->partition < 0)
                        err(ld, l,
                            "adapter %s.%s: the switchtec backend needs the NT partition in the "
                            "file (its peers program its LUT entries): add partition: N to its "
                            "switchtec: (ntbfab switchtec status shows the partition)",
                            nn, a->name);
        }
}

/* cluster.manager names a node of the file. */
static void check_manager(struct ld *ld)
{
        struct ntbf_cluster_opts *o = &ld->t->opts;
        if (!o->manager[0] || ntbf__strmap_get(&ld->nodes, o->manager) != NTBF_NONE)
                return;
        char b[SHOWBUF];
        struct ntbf__suggest sg;
        ntbf__suggest_init(&sg, o->manager);
        for (uint32_t i = 0; i < ld->t->nnodes; i++)
                ntbf__suggest_add(&sg, ld->t->nodes[i].name);
        const char *best = ntbf__suggest_result(&sg);
        if (best)
                err(ld, o->loc_manager, "'manager' names no node: %s; did you mean '%s'?",
                    show(o->manager, b, sizeof(b)), best);
        else
                err(ld, o->loc_manager,
                    "'manager' names no node: %s; name one of the nodes of this file, or remove "
                    "'manager' to let the node with the lowest id manage the fabric",
                    show(o->manager, b, sizeof(b)));
}

/* ---- nodes ------------------------------------------------------------------------------ */

/* "host:port" with port 1..65535; IPv6 hosts in brackets. NULL if valid, else why not. */
static const char *address_problem(const char *s)
{
        const char *colon;
        if (strlen(s) >= sizeof(((struct ntbf_node *)0)->address))
                return "it is longer than 63 characters";
        if (s[0] == '[') {
                const char *close = strchr(s, ']');
                if (!close)
                        return "an IPv6 address needs its closing ']', like [fe80::1]:7700";
                if (close == s + 1)
                        return "the host is empty";
                for (const char *p = s + 1; p < close; p++)
                        if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
                                return "the IPv6 address holds a character other than hex "
                                       "digits, ':' and '.'";
                if (close[1] != ':')
                        return "the port is missing; write [HOST]:PORT, like [fe80::1]:7700";
                colon = close + 1;
        } else {
                colon = strrchr(s, ':');
                if (!colon)
                        return "the port is missing; write HOST:PORT, like 10.0.0.1:7700";
                if (colon == s)
                        return "the host is empty; write HOST:PORT, like 10.0.0.1:7700";
                if (memchr(s, ':', (size_t)(colon - s)))
                        return "an IPv6 address goes in brackets, like [fe80::1]:7700";
                for (const char *p = s; p < colon; p++)
                        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
                                return "the host holds a character other than letters, digits, "
                                       "'.', '-' and '_'";
        }
        const char *port = colon + 1;
        unsigned long n = 0;
        if (!*port)
                return "the port is empty; write a port number from 1 to 65535 after ':'";
        for (const char *p = port; *p; p++) {
                if (!isdigit((unsigned char)*p))
                        return "the port is not a number; write a port from 1 to 65535 after ':'";
                n = n * 10 + (unsigned long)(*p - '0');
                if (n > 65535)
                        break;
        }
        if (n < 1 || n > 65535)
                return "the port is out of range; use a port from 1 to 65535";
        return NULL;
}

static bool load_adapter(struct ld *ld, uint32_t v, uint32_t node, const char *node_name);
static void load_device(struct ld *ld, uint32_t v, uint32_t node);

/* One expansion chassis of a node: {name, hop_ns, uplink_ns}. */
static void load_chassis(struct ld *ld, uint32_t v, uint32_t node)
{
        uint32_t vals[X_N];
        const char *name = NULL;
        size_t e0 = ld->d->errors;
        if (!take_map(ld, v, "a chassis", "a mapping with name", &chassis_schema, vals)) {
                ld->chassis_lost = true;
                return;
        }
        need(ld, v, &chassis_schema, vals, "chassis");
        get_name(ld, vals[X_NAME], "chassis", NTBF_NAME_MAX, &name);
        uint32_t hop = NTBF_CHASSIS_HOP_NS, uplink = NTBF_CHASSIS_UPLINK_NS;
        get_u32(ld, vals[X_HOP_NS], "'hop_ns'", 0, UINT32_MAX, NULL, &hop);
        get_u32(ld, vals[X_UPLINK_NS], "'uplink_ns'", 0, UINT32_MAX, NULL, &uplink);
        if (ld->d->errors != e0 || !name)
                ld->chassis_lost = true;
        if (node == NTBF_NONE || !name || ld->err || ld->d->errors != e0)
                return;
        uint32_t idx = ntbf_topo_add_chassis(ld->t, node, name);
        if (idx == NTBF_NONE) {
                ld->err = -ENOMEM;
                return;
        }
        struct ntbf_chassis *c = &ld->t->chassis[idx];
        tidy_name(c->name);
        c->hop_ns = hop;
        c->uplink_ns = uplink;
        c->loc = at(ld, vals[X_NAME]);
}

/* Defaults of a node or device as the core gives them, without adding one to the topology. */
static struct ntbf_node node_defaults(struct ld *ld)
{
        struct ntbf_node n = {0};
        uint32_t k = ntbf_topo_add_node(ld->sink, "", 0);
        if (k == NTBF_NONE) {
                ld->err = -ENOMEM;
                return n;
        }
        n = ld->sink->nodes[k];
        ld->sink->nnodes = k;
        return n;
}

static void load_node(struct ld *ld, uint32_t v)
{
        uint32_t vals[N_N];
        const char *name = NULL, *s;
        char obj[64];
        if (!take_map(ld, v, "a node", "a mapping with name, id and address", &node_schema, vals)) {
                ld->lost_links = ld->lost_windows = true;
                return;
        }
        struct ntbf_node n = node_defaults(ld);
        uint64_t x;
        bool id_ok = false;
        char b[SHOWBUF];
        if (get_name(ld, vals[N_NAME], "node", NTBF_NAME_MAX, &name) == GOT)
                snprintf(obj, sizeof(obj), "node %s", show(name, b, 48));
        else
                snprintf(obj, sizeof(obj), "node");
        need(ld, v, &node_schema, vals, obj);
        if (get_uint(ld, vals[N_ID], "'id'", 1, NTBF_MAX_NODE_ID,
                     "SISCI node ids are 1..65535 (252 is reserved)", &x) == GOT) {
                n.id = (uint32_t)x;
                n.loc_id = at(ld, vals[N_ID]);
                id_ok = true;
        }
        if (get_text(ld, vals[N_ADDRESS], "'address'", "HOST:PORT like 10.0.0.1:7700", &s) == GOT) {
                const char *why = address_problem(s);
                if (why)
                        err(ld, at(ld, vals[N_ADDRESS]), "'address' value %s is not HOST:PORT: %s",
                            show(s, b, sizeof(b)), why);
                else
                        snprintf(n.address, sizeof(n.address), "%s", s);
        }
        struct ntbf_loc addr_loc = n.address[0] ? at(ld, vals[N_ADDRESS]) : (struct ntbf_loc){0};
        get_size(ld, vals[N_RAM], "'ram'", &n.ram);
        get_u32(ld, vals[N_CPU_RIDS], "'cpu_rids'", 0, 64,
                "a CPU uses 1 or 2 requester IDs (root complex and host bridge)", &n.cpu_rids);
        get_bool(ld, vals[N_IOMMU], "'iommu'", &n.iommu);
        get_addr(ld, vals[N_MMIO_LOW], "'mmio_low'", &n.mmio_low_base);
        get_addr(ld, vals[N_MMIO_LOW_END], "'mmio_low_end'", &n.mmio_low_end);
        get_addr(ld, vals[N_MMIO_HIGH], "'mmio_high'", &n.mmio_high_base);
        get_u32(ld, vals[N_ROOT_NS], "'root_ns'", 0, UINT32_MAX, NULL, &n.root_ns);

        uint32_t idx = NTBF_NONE;
        if (name && ld->err == 0) {
                idx = ntbf_topo_add_node(ld->t, name, n.id);
                if (idx == NTBF_NONE) {
                        ld->err = -ENOMEM;
                        return;
                }
                n.loc = at(ld, vals[N_NAME]);
                snprintf(n.name, sizeof(n.name), "%s", ld->t->nodes[idx].name);
                tidy_name(n.name);
                ld->t->nodes[idx] = n;
                put(ld, &ld->nodes, name, idx);
                if (n.address[0])
                        check_address(ld, idx, addr_loc);
                if (!id_ok) {
                        uint32_t *p = realloc(ld->standin, (ld->nstandin + 1) * sizeof(*p));
                        if (!p) {
                                ld->err = -ENOMEM;
                                return;
                        }
                        ld->standin = p;
                        ld->standin[ld->nstandin++] = idx;
                }
        } else {
                ld->lost_links = ld->lost_windows = true;
        }
        uint32_t item;
        bool all = take_list(ld, vals[N_ADAPTERS], "'adapters'", "a list of adapters", &item);
        for (; item != NONE; item = next(ld, item))
                all &= load_adapter(ld, item, idx, name);
        if (!all) {
                ld->lost_links = ld->lost_windows = true;
                if (idx != NTBF_NONE)
                        mark_incomplete(ld, idx);
        }
        /* Chassis first: devices name them, in whatever order the keys were written. */
        ld->chassis_lost = false;
        if (take_list(ld, vals[N_CHASSIS], "'chassis'", "a list of chassis", &item))
                for (; item != NONE; item = next(ld, item))
                        load_chassis(ld, item, idx);
        else
                ld->chassis_lost = true;
        if (take_list(ld, vals[N_DEVICES], "'devices'", "a list of devices", &item))
                for (; item != NONE; item = next(ld, item))
                        load_device(ld, item, idx);
}

/* Ids for nodes whose id was unusable: unused ones, so that no duplicate is reported. */
static void assign_standin_ids(struct ld *ld)
{
        if (!ld->nstandin)
                return;
        uint8_t *used = calloc(NTBF_MAX_NODE_ID + 1, 1);
        if (!used) {
                ld->err = -ENOMEM;
                return;
        }
        for (uint32_t i = 0; i < ld->t->nnodes; i++)
                if (ld->t->nodes[i].id <= NTBF_MAX_NODE_ID)
                        used[ld->t->nodes[i].id] = 1;
        uint32_t id = NTBF_MAX_NODE_ID;
        for (uint32_t k = 0; k < ld->nstandin; k++) {
                while (id > 0 && (used[id] || id == NTBF_RESERVED_NODE_ID))
                        id--;
                ld->t->nodes[ld->standin[k]].id = id;
                if (id)
                        used[id] = 1;
        }
        free(used);
}

/* ---- adapters --------------------------------------------------------------------------- */

static int get_adapter_model(struct ld *ld, uint32_t v, struct ntbf_adapter_params *p)
{
        const char *names[16];
        size_t n = 0, i;
        for (const struct ntbf_adapter_params *q;
             n < ARRAY_LEN(names) && (q = ntbf_adapter_preset_at(n)) != NULL;)
                names[n++] = q->model;
        int r = get_choice(ld, v, "'model'", "adapter model", names, n, &i);
        if (r == GOT)
                *p = *ntbf_adapter_preset(names[i]);
        return r;
}

/* One window of a `windows:` list; false when it is unusable (reported). */
static bool load_window(struct ld *ld, uint32_t v, uint32_t i, struct ntbf_window_params *w)
{
        uint32_t vals[WN_N];
        char label[32];
        size_t e0 = ld->d->errors;
        snprintf(label, sizeof(label), "window %u", i);
        if (!take_map(ld, v, label, "a mapping with size", &window_schema, vals))
                return false;
        need(ld, v, &window_schema, vals, label);
        memset(w, 0, sizeof(*w));
        w->bar = i; /* a BAR of its own unless told */
        get_size(ld, vals[WN_SIZE], "'size'", &w->size);
        get_u32(ld, vals[WN_SLOTS], "'slots'", 1, 1u << 20,
                "a window has 1 (direct) to 1048576 translation slots", &w->slots);
        get_u32(ld, vals[WN_RESERVED], "'reserved'", 0, UINT32_MAX, NULL, &w->reserved);
        get_u32(ld, vals[WN_BAR], "'bar'", 0, NTBF_MAX_BARS - 1, "a PCI function has BAR0 to BAR5",
                &w->bar);
        /* A size, or natural: aligned to the translation's size rounded up (Switchtec). */
        uint32_t av = vals[WN_ADDR_ALIGN];
        const char *s, *why;
        char b[SHOWBUF];
        if (av != NONE && nd(ld, av)->kind == NTBF__YT_SCALAR && nd(ld, av)->len) {
                s = text(ld, av);
                if (!strcmp(s, "natural")) {
                        w->flags |= NTBF_WIN_NATURAL_ALIGN;
                        w->addr_align = 4 * NTBF_KiB;
                } else if (ntbf_size_parse(s, &w->addr_align, &why)) {
                        err(ld, at(ld, av),
                            "'addr_align' value %s is neither a size nor 'natural'; write a power "
                            "of two like 64KiB, or natural (aligned to the translation's size)",
                            show(s, b, sizeof(b)));
                }
        } else {
                get_size(ld, av, "'addr_align'", &w->addr_align);
        }
        get_size(ld, vals[WN_SIZE_ALIGN], "'size_align'", &w->size_align);
        get_size(ld, vals[WN_SIZE_MAX], "'size_max'", &w->size_max);
        get_addr(ld, vals[WN_BASE], "'base'", &w->base);
        return ld->d->errors == e0;
}

/* `windows:` of an adapter: 1 to NTBF_MAX_WINDOWS windows replacing the single-window keys. */
static void load_windows(struct ld *ld, uint32_t v, struct ntbf_adapter_params *p,
                         struct ntbf_loc *locs)
{
        uint32_t item, n = 0;
        if (!take_list(ld, v, "'windows'", "a list of windows", &item))
                return;
        if (item == NONE) {
                err(ld, at(ld, v),
                    "'windows' is empty; list the adapter's windows, or drop the key to keep "
                    "the model's");
                return;
        }
        bool ok = true;
        for (; item != NONE; item = next(ld, item), n++) {
                if (n == NTBF_MAX_WINDOWS) {
                        err(ld, at(ld, item),
                            "'windows' lists more than %u windows; an adapter has at most %u, "
                            "remove this entry and the ones after it",
                            NTBF_MAX_WINDOWS, NTBF_MAX_WINDOWS);
                        return;
                }
                locs[n] = at(ld, item);
                ok = load_window(ld, item, n, &p->windows[n]) && ok;
        }
        if (ok)
                p->nwindows = n;
}

/* `switchtec:` of an adapter: paths up to NTBF_STX_PATH_MAX - 1 bytes, a partition 0..47. */
static void load_stx(struct ld *ld, uint32_t v, struct ntbf_stx_params *x)
{
        uint32_t vals[SX_N];
        static const char *const label[] = {"'device'", "'gas'"};
        char *dst[] = {x->device, x->gas};
        const char *s;
        char b[SHOWBUF];
        x->loc = at(ld, v);
        if (!take_map(ld, v, "'switchtec'", "a mapping with device, gas or partition", &stx_schema,
                      vals))
                return;
        for (int k = SX_DEVICE; k <= SX_GAS; k++) {
                if (get_text(ld, vals[k], label[k], "a path", &s) != GOT)
                        continue;
                if (strlen(s) >= NTBF_STX_PATH_MAX)
                        err(ld, at(ld, vals[k]),
                            "%s value %s is longer than %d bytes; use a shorter path (a link)",
                            label[k], show(s, b, sizeof(b)), NTBF_STX_PATH_MAX - 1);
                else
                        snprintf(dst[k], NTBF_STX_PATH_MAX, "%s", s);
        }
        uint32_t part = 0;
        if (get_u32(ld, vals[SX_PARTITION], "'partition'", 0, 47,
                    "a Switchtec switch has NT partitions 0 to 47", &part) == GOT)
                x->partition = (int32_t)part;
}

/* `dolphin:` of an adapter: file_figures, a boolean. */
static void load_dol(struct ld *ld, uint32_t v, struct ntbf_dol_params *x)
{
        uint32_t vals[DL_N];
        x->loc = at(ld, v);
        if (take_map(ld, v, "'dolphin'", "a mapping with file_figures", &dol_schema, vals))
                get_bool(ld, vals[DL_FILE_FIGURES], "'file_figures'", &x->file_figures);
}

/* Returns false when the adapter could not be added (its node or its name is unusable). */
static bool load_adapter(struct ld *ld, uint32_t v, uint32_t node, const char *node_name)
{
        uint32_t vals[A_N];
        const char *name = NULL, *s;
        char obj[96], b[SHOWBUF];
        size_t e0 = ld->d->errors, i;
        if (!take_map(ld, v, "an adapter", "a mapping with name and model", &adapter_schema, vals))
                return false;
        if (get_name(ld, vals[A_NAME], "adapter", NTBF_NAME_MAX, &name) == GOT)
                snprintf(obj, sizeof(obj), "adapter %s", show(name, b, 48));
        else
                snprintf(obj, sizeof(obj), "adapter");
        need(ld, v, &adapter_schema, vals, obj);
        struct ntbf_adapter_params p = standin_adapter;
        get_adapter_model(ld, vals[A_MODEL], &p);
        get_u32(ld, vals[A_PORTS], "'ports'", 1, NTBF_MAX_ADAPTER_PORTS,
                "an adapter has 1 to 8 cable ports", &p.ports);
        get_size(ld, vals[A_WINDOW], "'window'", &p.window);
        get_bool(ld, vals[A_WINDOW_BELOW_4G], "'window_below_4g'", &p.window_below_4g);
        get_u32(ld, vals[A_LUT_ENTRIES], "'lut_entries'", 0, UINT32_MAX, NULL, &p.lut_entries);
        /* The single-window keys describe one window: they replace a model's windows, and
         * `windows:` replaces them (both at once would disagree). */
        struct ntbf_loc wlocs[NTBF_MAX_WINDOWS] = {{0}};
        if (vals[A_WINDOW] != NONE || vals[A_LUT_ENTRIES] != NONE)
                p.nwindows = 0;
        if (vals[A_WINDOWS] != NONE) {
                static const int clash[] = {A_WINDOW, A_LUT_ENTRIES, A_WINDOW_BASE};
                for (size_t k = 0; k < ARRAY_LEN(clash); k++)
                        if (vals[clash[k]] != NONE)
                                err(ld, at(ld, vals[clash[k]]),
                                    "'%s' cannot be combined with 'windows': it describes a "
                                    "single window; give the windows' sizes, slots and bases in "
                                    "'windows' and remove '%s'",
                                    adapter_keys[clash[k]].name, adapter_keys[clash[k]].name);
                p.nwindows = 0;
                load_windows(ld, vals[A_WINDOWS], &p, wlocs);
        }
        get_bool(ld, vals[A_RID_PROXY], "'rid_proxy'", &p.rid_proxy);
        if (get_choice(ld, vals[A_RID_MASK], "'rid_mask'", "requester-ID mask rule", rid_masks,
                       ARRAY_LEN(rid_masks), &i) == GOT)
                p.rid_mask = (uint32_t)i;
        get_u32(ld, vals[A_RID_TABLE], "'rid_table'", 0, UINT32_MAX, NULL, &p.rid_table);
        get_u32(ld, vals[A_RID_RESERVED], "'rid_reserved'", 0, UINT32_MAX, NULL, &p.rid_reserved);
        get_u32(ld, vals[A_ADDR_BITS], "'addr_bits'", 32, 64,
                "translated addresses are 32 to 64 bits wide", &p.addr_bits);
        get_u32(ld, vals[A_DOORBELLS], "'doorbells'", 0, UINT32_MAX, NULL, &p.doorbells);
        get_u32(ld, vals[A_SCRATCHPADS], "'scratchpads'", 0, UINT32_MAX, NULL, &p.scratchpads);
        get_size(ld, vals[A_SPAD_WINDOW], "'spad_window'", &p.spad_window);
        get_u32(ld, vals[A_MESSAGES], "'messages'", 0, UINT32_MAX, NULL, &p.messages);
        get_u32(ld, vals[A_DMA_CHANNELS], "'dma_channels'", 0, UINT32_MAX, NULL, &p.dma_channels);
        get_u32(ld, vals[A_HOP_NS], "'hop_ns'", 0, UINT32_MAX, NULL, &p.hop_ns);
        if (get_choice(ld, vals[A_XLAT], "'xlat'", "translation side", xlats, ARRAY_LEN(xlats),
                       &i) == GOT)
                p.xlat = xlat_bits[i];
        uint64_t base = 0;
        get_addr(ld, vals[A_WINDOW_BASE], "'window_base'", &base);
        if (p.nwindows && vals[A_WINDOWS] == NONE) {
                p.windows[0].base = base; /* a model's windows: window_base is its first BAR's */
                base = 0;
        }
        char bdf[16] = "";
        struct ntbf_stx_params stx = {.partition = -1};
        if (vals[A_SWITCHTEC] != NONE)
                load_stx(ld, vals[A_SWITCHTEC], &stx);
        struct ntbf_dol_params dol = {0};
        if (vals[A_DOLPHIN] != NONE)
                load_dol(ld, vals[A_DOLPHIN], &dol);
        /* One backend drives every adapter of a cluster (docs/config.md, cluster.backend). */
        if (vals[A_BACKEND] != NONE)
                err(ld, at(ld, vals[A_BACKEND]),
                    "'backend' is a key of 'cluster', not of an adapter: one backend drives "
                    "every adapter of the cluster; remove it here (and set cluster.backend)");
        if (get_text(ld, vals[A_BDF], "'bdf'", "a PCI address like 0000:03:00.0", &s) == GOT) {
                uint16_t dom;
                uint8_t bus, dev, fn;
                if (ntbf_bdf_parse(s, &dom, &bus, &dev, &fn))
                        err(ld, at(ld, vals[A_BDF]),
                            "'bdf' value %s is not a PCI address; write DDDD:BB:DD.F or BB:DD.F "
                            "in hex, like 0000:03:00.0",
                            show(s, b, sizeof(b)));
                else
                        ntbf_bdf_fmt(dom, bus, dev, fn, bdf, sizeof(bdf));
        }
        if (ld->d->errors != e0)
                ld->lost_windows = true;
        if (node == NTBF_NONE || !name || ld->err)
                return false;
        uint32_t idx = ntbf_topo_add_adapter(ld->t, node, name, &p);
        if (idx == NTBF_NONE) {
                ld->err = -ENOMEM;
                return false;
        }
        struct ntbf_adapter *a = &ld->t->adapters[idx];
        tidy_name(a->name);
        a->window_base = base;
        snprintf(a->bdf, sizeof(a->bdf), "%s", bdf);
        a->stx = stx;
        a->dol = dol;
        a->loc = at(ld, vals[A_NAME]);
        if (vals[A_WINDOW] != NONE)
                a->loc_window = at(ld, vals[A_WINDOW]);
        if (vals[A_WINDOW_BASE] != NONE)
                a->loc_window_base = at(ld, vals[A_WINDOW_BASE]);
        if (vals[A_LUT_ENTRIES] != NONE)
                a->loc_lut = at(ld, vals[A_LUT_ENTRIES]);
        memcpy(a->loc_win, wlocs, sizeof(a->loc_win));
        put(ld, &ld->adapters, keep_key(ld, node_name, name), idx);
        return true;
}

/* ---- devices ---------------------------------------------------------------------------- */

/* One BAR of a 'bars' list: null, a size, or {size, prefetchable, bits}. */
static void load_bar(struct ld *ld, uint32_t v, unsigned i, struct ntbf_bar *bar)
{
        char label[32];
        uint32_t vals[B_N];
        snprintf(label, sizeof(label), "BAR%u", i);
        switch (nd(ld, v)->kind) {
        case NTBF__YT_NULL:
        case NTBF__YT_BAD:
                return;
        case NTBF__YT_SCALAR:
                if (get_size(ld, v, label, &bar->size) == GOT)
                        bar->flags = NTBF_BAR_64;
                return;
        case NTBF__YT_SEQ:
                wrong_type(ld, v, label, "a size, a mapping with size, or null");
                return;
        }
        take_map(ld, v, label, "a size, a mapping with size, or null", &bar_schema, vals);
        need(ld, v, &bar_schema, vals, label);
        bool pref = false;
        uint32_t bits = 64;
        get_bool(ld, vals[B_PREFETCHABLE], "'prefetchable'", &pref);
        if (get_u32(ld, vals[B_BITS], "'bits'", 32, 64, "a memory BAR is 32 or 64 bits wide",
                    &bits) == GOT &&
            bits != 32 && bits != 64)
                err(ld, at(ld, vals[B_BITS]),
                    "'bits' value %u is neither 32 nor 64; a memory BAR is 32 or 64 bits wide",
                    bits);
        if (get_size(ld, vals[B_SIZE], "'size'", &bar->size) == GOT)
                bar->flags = (bits == 32 ? 0 : NTBF_BAR_64) | (pref ? NTBF_BAR_PREF : 0);
}

static void load_bar_list(struct ld *ld, uint32_t v, const char *key, bool vf,
                          struct ntbf_device *d)
{
        uint32_t item;
        char label[40];
        snprintf(label, sizeof(label), "'%s'", key);
        if (!take_list(ld, v, label, "a list of BAR sizes indexed by BAR number", &item))
                return;
        for (unsigned i = 0; item != NONE; item = next(ld, item), i++) {
                if (i == NTBF_MAX_BARS) {
                        err(ld, at(ld, item),
                            "%s lists more than 6 BARs; a PCI function has BAR0 to BAR5, remove "
                            "this entry and the ones after it",
                            label);
                        return;
                }
                if (!vf) {
                        load_bar(ld, item, i, &d->bars[i]);
                        continue;
                }
                char l[32];
                snprintf(l, sizeof(l), "VF BAR%u", i);
                if (nd(ld, item)->kind != NTBF__YT_NULL)
                        get_size(ld, item, l, &d->vf_bars[i]);
        }
}

static int get_pow2_size(struct ld *ld, uint32_t v, const char *label, bool zero_ok, uint64_t *out)
{
        char sz[32];
        int r = get_size(ld, v, label, out);
        if (r != GOT || (zero_ok && *out == 0))
                return r;
        if (!ntbf_is_pow2(*out) || *out < 4 * NTBF_KiB) {
                err(ld, at(ld, v),
                    "%s value %s is not a power of two of at least 4 KiB; it becomes a BAR, and "
                    "BARs are powers of two",
                    label, ntbf_size_fmt(*out, sz, sizeof(sz)));
                return BROKEN;
        }
        return GOT;
}

/* The sim: mapping of a device: the model's defaults, then the file's overrides. */
static void load_sim(struct ld *ld, uint32_t v, struct ntbf_device *d)
{
        uint32_t vals[S_N], mv = NONE;
        size_t m;
        if (nd(ld, v)->kind == NTBF__YT_MAP) {
                /* The key set depends on the model, so find the model first. */
                for (uint32_t k = nd(ld, v)->first; k != NONE && next(ld, k) != NONE;
                     k = next(ld, next(ld, k)))
                        if (nd(ld, k)->kind == NTBF__YT_SCALAR && !strcmp(text(ld, k), "model"))
                                mv = next(ld, k);
        }
        int r = ABSENT;
        if (mv != NONE)
                r = get_choice(ld, mv, "'model'", "sim model", sim_models, ARRAY_LEN(sim_models),
                               &m);
        const struct schema *s = r != GOT ? &sim_schema_all
                                 : m == 0 ? &sim_schema_nvme
                                          : &sim_schema_accel;
        uint32_t sv[S_N];
        if (!take_map(ld, v, "'sim'", "a mapping with model", s, sv))
                return;
        /* need() and the readers below use the full key set, whichever model was named. */
        for (size_t i = 0; i < S_N; i++) {
                size_t k = key_index(s, sim_keys_all[i].name);
                vals[i] = k == SIZE_MAX ? NONE : sv[k];
        }
        need(ld, v, &sim_schema_all, vals, "'sim'");
        if (r != GOT)
                return;
        struct ntbf_sim_params p;
        ntbf_sim_defaults(&p, m == 0 ? NTBF_SIM_NVME : NTBF_SIM_ACCEL);
        uint64_t x;
        char sz[32];
        if (p.model == NTBF_SIM_NVME) {
                get_u32(ld, vals[S_LBA], "'lba'", 512, 4096, "the simulated NVMe uses 512 or 4096",
                        &p.lba_size);
                if (vals[S_LBA] != NONE && p.lba_size != 512 && p.lba_size != 4096) {
                        err(ld, at(ld, vals[S_LBA]),
                            "'lba' value %u is neither 512 nor 4096; the simulated NVMe uses "
                            "512-byte or 4096-byte blocks",
                            p.lba_size);
                        p.lba_size = 512;
                }
                if (get_size(ld, vals[S_CAPACITY], "'capacity'", &x) == GOT) {
                        if (!x || x % p.lba_size)
                                err(ld, at(ld, vals[S_CAPACITY]),
                                    "'capacity' value %s is not a non-zero multiple of the "
                                    "%u-byte block; round it to whole blocks",
                                    ntbf_size_fmt(x, sz, sizeof(sz)), p.lba_size);
                        else
                                p.capacity = x;
                }
                get_u32(ld, vals[S_QUEUES], "'queues'", 2, 1024,
                        "queue pairs, the admin pair included, are 2..1024", &p.queues);
                get_u32(ld, vals[S_MDTS], "'mdts'", 0, 12,
                        "mdts is log2 of the largest transfer in pages (0: no limit)", &p.mdts);
                get_pow2_size(ld, vals[S_CMB], "'cmb'", true, &p.cmb);
        } else {
                get_pow2_size(ld, vals[S_MEMORY], "'memory'", false, &p.memory);
        }
        get_u32(ld, vals[S_MSIX], "'msix'", 0, 2048, "MSI-X allows at most 2048 vectors", &p.msix);
        d->sim = p;
        ntbf_device_apply_sim(d);
        d->loc_bars = at(ld, v);
}

/* A device names a chassis its node does not have. */
static void unknown_chassis(struct ld *ld, uint32_t v, uint32_t node, const char *name)
{
        char b[SHOWBUF];
        const struct ntbf_topo *t = ld->t;
        struct ntbf__suggest sg;
        ntbf__suggest_init(&sg, name);
        uint32_t n = 0;
        for (uint32_t i = 0; i < t->nchassis; i++) {
                if (t->chassis[i].node != node)
                        continue;
                ntbf__suggest_add(&sg, t->chassis[i].name);
                n++;
        }
        const char *best = ntbf__suggest_result(&sg);
        if (!n)
                err(ld, at(ld, v),
                    "'chassis' value %s names no chassis: node '%s' has none; list it under "
                    "the node's 'chassis' ([{name: NAME}]) or remove 'chassis' from the device",
                    show(name, b, sizeof(b)), t->nodes[node].name);
        else if (best)
                err(ld, at(ld, v),
                    "'chassis' value %s is not a chassis of node '%s'; did you mean '%s'?",
                    show(name, b, sizeof(b)), t->nodes[node].name, best);
        else
                err(ld, at(ld, v),
                    "'chassis' value %s is not a chassis of node '%s'; name one listed under "
                    "the node's 'chassis'",
                    show(name, b, sizeof(b)), t->nodes[node].name);
}

static struct ntbf_device device_defaults(struct ld *ld)
{
        struct ntbf_device d = {0};
        uint32_t k = ntbf_topo_add_device(ld->sink, 0, "");
        if (k == NTBF_NONE) {
                ld->err = -ENOMEM;
                return d;
        }
        d = ld->sink->devices[k];
        ld->sink->ndevices = k;
        return d;
}

static void load_device(struct ld *ld, uint32_t v, uint32_t node)
{
        uint32_t vals[D_N];
        const char *name = NULL, *s;
        char obj[96], b[SHOWBUF];
        size_t e0 = ld->d->errors;
        uint64_t x;
        if (!take_map(ld, v, "a device", "a mapping with name and bdf", &device_schema, vals))
                return;
        struct ntbf_device d = device_defaults(ld);
        if (get_name(ld, vals[D_NAME], "device", NTBF_NAME_MAX, &name) == GOT)
                snprintf(obj, sizeof(obj), "device %s", show(name, b, 48));
        else
                snprintf(obj, sizeof(obj), "device");
        need(ld, v, &device_schema, vals, obj);
        if (get_text(ld, vals[D_BDF], "'bdf'", "a PCI address like 0000:03:00.0", &s) == GOT &&
            ntbf_bdf_parse(s, &d.domain, &d.bus, &d.dev, &d.fn))
                err(ld, at(ld, vals[D_BDF]),
                    "'bdf' value %s is not a PCI address; write DDDD:BB:DD.F or BB:DD.F in hex, "
                    "like 0000:03:00.0",
                    show(s, b, sizeof(b)));
        get_bool(ld, vals[D_LEND], "'lend'", &d.lend);
        get_bool(ld, vals[D_ISOLATE], "'isolate'", &d.isolate);
        get_bool(ld, vals[D_VFIO], "'vfio'", &d.vfio);
        if (d.vfio && vals[D_SIM] != NONE)
                err(ld, at(ld, vals[D_VFIO]),
                    "'vfio: true' cannot be combined with 'sim': a simulated device is not a real "
                    "PCIe device that vfio-pci could drive; remove 'vfio' or 'sim'");
        if (vals[D_SIM] != NONE) {
                /* The model defines identity and BARs; a second source would disagree. */
                static const int clash[] = {D_CLASS, D_VENDOR, D_DEVICE, D_BARS};
                for (size_t i = 0; i < ARRAY_LEN(clash); i++) {
                        uint32_t k = vals[clash[i]];
                        if (k != NONE)
                                err(ld, at(ld, k),
                                    "'%s' cannot be combined with 'sim': the simulated model "
                                    "defines it; remove '%s' or 'sim'",
                                    device_keys[clash[i]].name, device_keys[clash[i]].name);
                }
                load_sim(ld, vals[D_SIM], &d);
        } else {
                if (get_uint(ld, vals[D_CLASS], "'class'", 0, 0xffffff,
                             "a class code has 24 bits, like 0x010802 for NVMe", &x) == GOT)
                        d.class_code = (uint32_t)x;
                if (get_uint(ld, vals[D_VENDOR], "'vendor'", 0, 0xffff,
                             "a PCI vendor ID has 16 bits", &x) == GOT)
                        d.vendor_id = (uint16_t)x;
                if (get_uint(ld, vals[D_DEVICE], "'device'", 0, 0xffff,
                             "a PCI device ID has 16 bits", &x) == GOT)
                        d.device_id = (uint16_t)x;
                if (vals[D_BARS] != NONE) {
                        load_bar_list(ld, vals[D_BARS], "bars", false, &d);
                        d.loc_bars = at(ld, vals[D_BARS]);
                }
        }
        get_u32(ld, vals[D_FUNCTIONS], "'functions'", 1, NTBF_MAX_FUNCTIONS,
                "a PCI device has 1 to 8 physical functions", &d.functions);
        get_u32(ld, vals[D_VFS], "'vfs'", 0, NTBF_MAX_VFS, NULL, &d.vfs);
        load_bar_list(ld, vals[D_VF_BARS], "vf_bars", true, &d);
        get_u32(ld, vals[D_DMA_BITS], "'dma_bits'", 32, 64, "a device drives 32 to 64 address bits",
                &d.dma_bits);
        get_u32(ld, vals[D_HOP_NS], "'hop_ns'", 0, UINT32_MAX, NULL, &d.hop_ns);
        if (get_text(ld, vals[D_CHASSIS], "'chassis'", "the name of a chassis of its node", &s) ==
                GOT &&
            node != NTBF_NONE) {
                d.chassis = ntbf_topo_find_chassis(ld->t, node, s);
                if (d.chassis == NTBF_NONE && !ld->chassis_lost)
                        unknown_chassis(ld, vals[D_CHASSIS], node, s);
        }
        /* A device with a mistake is left out: nothing refers to it, so nothing else is lost. */
        if (node == NTBF_NONE || !name || ld->d->errors != e0 || ld->err)
                return;
        uint32_t idx = ntbf_topo_add_device(ld->t, node, name);
        if (idx == NTBF_NONE) {
                ld->err = -ENOMEM;
                return;
        }
        d.node = node;
        d.loc = at(ld, vals[D_NAME]);
        memcpy(d.name, ld->t->devices[idx].name, sizeof(d.name));
        tidy_name(d.name);
        ld->t->devices[idx] = d;
}

/* ---- switches --------------------------------------------------------------------------- */

static void load_switch(struct ld *ld, uint32_t v)
{
        uint32_t vals[W_N];
        const char *name = NULL;
        char obj[96], b[SHOWBUF];
        size_t i;
        if (!take_map(ld, v, "a switch", "a mapping with name and model", &switch_schema, vals)) {
                ld->lost_links = true;
                return;
        }
        if (get_name(ld, vals[W_NAME], "switch", NTBF_NAME_MAX, &name) == GOT)
                snprintf(obj, sizeof(obj), "switch %s", show(name, b, 48));
        else
                snprintf(obj, sizeof(obj), "switch");
        need(ld, v, &switch_schema, vals, obj);
        struct ntbf_switch_params p = standin_switch;
        const char *names[16];
        size_t n = 0;
        for (const struct ntbf_switch_params *q;
             n < ARRAY_LEN(names) && (q = ntbf_switch_preset_at(n)) != NULL;)
                names[n++] = q->model;
        if (get_choice(ld, vals[W_MODEL], "'model'", "switch model", names, n, &i) == GOT)
                p = *ntbf_switch_preset(names[i]);
        get_u32(ld, vals[W_PORTS], "'ports'", 1, NTBF_MAX_SWITCH_PORTS,
                "a switch has 1 to 256 logical ports", &p.ports);
        get_u32(ld, vals[W_RID_TABLE], "'rid_table'", 0, UINT32_MAX, NULL, &p.rid_table);
        get_u32(ld, vals[W_MCAST_GROUPS], "'mcast_groups'", 0, UINT32_MAX, NULL, &p.mcast_groups);
        get_u32(ld, vals[W_HOP_NS], "'hop_ns'", 0, UINT32_MAX, NULL, &p.hop_ns);
        if (!name || ld->err) {
                ld->lost_links = true;
                return;
        }
        uint32_t idx = ntbf_topo_add_switch(ld->t, name, &p);
        if (idx == NTBF_NONE) {
                ld->err = -ENOMEM;
                return;
        }
        ld->t->switches[idx].loc = at(ld, vals[W_NAME]);
        tidy_name(ld->t->switches[idx].name);
        put(ld, &ld->switches, name, idx);
}

/* ---- links ------------------------------------------------------------------------------ */

#define END_FORMS "write NODE.ADAPTER, NODE.ADAPTER.PORT or SWITCH.PORT"

static bool parse_port(struct ld *ld, uint32_t v, const char *end, const char *s, uint32_t *port)
{
        uint64_t x;
        char b[SHOWBUF], c[SHOWBUF];
        bool digits = *s != 0;
        for (const char *p = s; *p; p++)
                digits &= isdigit((unsigned char)*p) != 0;
        if (!digits || ntbf_uint_parse(s, &x) || x > UINT32_MAX) {
                err(ld, at(ld, v), "link end %s: port %s is not a port number; %s",
                    show(end, b, sizeof(b)), show(s, c, sizeof(c)),
                    digits ? "ports are numbered from 0" : "write it as a decimal number");
                return false;
        }
        *port = (uint32_t)x;
        return true;
}

/* "did you mean" over the adapters of node n, or the list of them. */
static void no_adapter(struct ld *ld, uint32_t v, const char *end, uint32_t n, const char *aname)
{
        const struct ntbf_topo *t = ld->t;
        char b[SHOWBUF], c[SHOWBUF], list[256];
        struct ntbf__suggest sg;
        size_t o = 0, count = 0;
        list[0] = 0;
        ntbf__suggest_init(&sg, aname);
        for (uint32_t i = 0; i < t->nadapters; i++) {
                if (t->adapters[i].node != n)
                        continue;
                ntbf__suggest_add(&sg, t->adapters[i].name);
                if (o < sizeof(list))
                        o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", count ? ", " : "",
                                              t->adapters[i].name);
                count++;
        }
        const char *best = ntbf__suggest_result(&sg);
        const char *node = t->nodes[n].name;
        if (n < ld->nincomplete && ld->incomplete[n])
                return; /* the adapter may be the one left out: already reported */
        if (best)
                err(ld, at(ld, v), "link end %s: node '%s' has no adapter %s; did you mean '%s'?",
                    show(end, b, sizeof(b)), node, show(aname, c, sizeof(c)), best);
        else if (count)
                err(ld, at(ld, v), "link end %s: node '%s' has no adapter %s; its adapters are %s",
                    show(end, b, sizeof(b)), node, show(aname, c, sizeof(c)), list);
        else
                err(ld, at(ld, v),
                    "link end %s: node '%s' has no adapters; add one under its 'adapters:'",
                    show(end, b, sizeof(b)), node);
}

static void no_object(struct ld *ld, uint32_t v, const char *end, const char *name)
{
        const struct ntbf_topo *t = ld->t;
        char b[SHOWBUF], c[SHOWBUF];
        struct ntbf__suggest sg;
        ntbf__suggest_init(&sg, name);
        for (uint32_t i = 0; i < t->nnodes; i++)
                ntbf__suggest_add(&sg, t->nodes[i].name);
        for (uint32_t i = 0; i < t->nswitches; i++)
                ntbf__suggest_add(&sg, t->switches[i].name);
        const char *best = ntbf__suggest_result(&sg);
        if (best)
                err(ld, at(ld, v), "link end %s: no node or switch is named %s; did you mean '%s'?",
                    show(end, b, sizeof(b)), show(name, c, sizeof(c)), best);
        else
                err(ld, at(ld, v),
                    "link end %s: no node or switch is named %s; use a name from 'nodes:' or "
                    "'switches:'",
                    show(end, b, sizeof(b)), show(name, c, sizeof(c)));
}

static bool resolve_end(struct ld *ld, uint32_t v, struct ntbf_port_ref *out)
{
        const char *s;
        char b[SHOWBUF];
        if (get_text(ld, v, "a link end", "text like node.adapter", &s) != GOT)
                return false;
        size_t len = strlen(s);
        if (len > 3 * (NTBF_NAME_MAX + 1) + 10) {
                err(ld, at(ld, v), "link end %s is too long to name a port; %s",
                    show(s, b, sizeof(b)), END_FORMS);
                return false;
        }
        char buf[3 * (NTBF_NAME_MAX + 1) + 11];
        memcpy(buf, s, len + 1);
        char *part[3];
        unsigned np = 0;
        for (char *p = buf;; p++) {
                if (np == 3) {
                        err(ld, at(ld, v), "link end %s has more than three parts; %s",
                            show(s, b, sizeof(b)), END_FORMS);
                        return false;
                }
                part[np++] = p;
                p = strchr(p, '.');
                if (!p)
                        break;
                *p = 0;
        }
        for (unsigned i = 0; i < np; i++) {
                if (!*part[i]) {
                        err(ld, at(ld, v), "link end %s has an empty part; %s",
                            show(s, b, sizeof(b)), END_FORMS);
                        return false;
                }
        }
        if (np == 1) {
                err(ld, at(ld, v), "link end %s names no port; %s", show(s, b, sizeof(b)),
                    END_FORMS);
                return false;
        }
        uint32_t node = ntbf__strmap_get(&ld->nodes, part[0]);
        uint32_t sw = ntbf__strmap_get(&ld->switches, part[0]);
        bool numeric = isdigit((unsigned char)part[1][0]);
        if (sw != UINT32_MAX && (node == UINT32_MAX || (np == 2 && numeric))) {
                if (np == 3) {
                        err(ld, at(ld, v),
                            "link end %s: '%s' is a switch; write SWITCH.PORT, like %s.1",
                            show(s, b, sizeof(b)), part[0], part[0]);
                        return false;
                }
                uint32_t port;
                if (!parse_port(ld, v, s, part[1], &port))
                        return false;
                const struct ntbf_switch *w = &ld->t->switches[sw];
                if (port >= w->p.ports) {
                        err(ld, at(ld, v),
                            "link end %s: switch '%s' has ports 0..%u; use one of them",
                            show(s, b, sizeof(b)), w->name, w->p.ports - 1);
                        return false;
                }
                *out = (struct ntbf_port_ref){NTBF_PORT_SWITCH, sw, port};
                return true;
        }
        if (node == UINT32_MAX) {
                no_object(ld, v, s, part[0]);
                return false;
        }
        if (numeric && np == 2) {
                err(ld, at(ld, v),
                    "link end %s: '%s' is a node, so the end names one of its adapters; write "
                    "%s.ADAPTER or %s.ADAPTER.%s",
                    show(s, b, sizeof(b)), part[0], part[0], part[0], part[1]);
                return false;
        }
        /* "node.adapter" is the first two parts joined again. */
        part[1][-1] = '.';
        uint32_t a = ntbf__strmap_get(&ld->adapters, buf);
        part[1][-1] = 0;
        if (a == UINT32_MAX) {
                no_adapter(ld, v, s, node, part[1]);
                return false;
        }
        uint32_t port = 0;
        if (np == 3 && !parse_port(ld, v, s, part[2], &port))
                return false;
        const struct ntbf_adapter *ad = &ld->t->adapters[a];
        if (port >= ad->p.ports) {
                const char *nn = ld->t->nodes[ad->node].name;
                if (ad->p.ports == 1)
                        err(ld, at(ld, v),
                            "link end %s: adapter %s.%s has one port; write %s.%s or %s.%s.0",
                            show(s, b, sizeof(b)), nn, ad->name, nn, ad->name, nn, ad->name);
                else
                        err(ld, at(ld, v),
                            "link end %s: adapter %s.%s has ports 0..%u; use one of them",
                            show(s, b, sizeof(b)), nn, ad->name, ad->p.ports - 1);
                return false;
        }
        *out = (struct ntbf_port_ref){NTBF_PORT_ADAPTER, a, port};
        return true;
}

static void load_link(struct ld *ld, uint32_t v)
{
        uint32_t vals[L_N], ends = v, latency = 0;
        size_t e0 = ld->d->errors;
        char b[SHOWBUF];
        const struct ntbf__yt_node *n = nd(ld, v);
        if (n->kind == NTBF__YT_MAP) {
                take_map(ld, v, "a link", "a list of two ends", &link_schema, vals);
                need(ld, v, &link_schema, vals, "link");
                get_u32(ld, vals[L_LATENCY_NS], "'latency_ns'", 0, UINT32_MAX, NULL, &latency);
                ends = vals[L_ENDS];
        } else if (n->kind != NTBF__YT_SEQ) {
                if (n->kind != NTBF__YT_BAD)
                        err(ld, n->loc,
                            "a link must be a list of two ends like [a.ntb0, b.ntb0] or a "
                            "mapping with 'ends', not %s",
                            desc(ld, v, b, sizeof(b)));
                ld->lost_links = true;
                return;
        }
        struct ntbf_port_ref ref[2];
        bool ok = false;
        if (ends != NONE && nd(ld, ends)->kind == NTBF__YT_SEQ) {
                const struct ntbf__yt_node *e = nd(ld, ends);
                if (e->len != 2) {
                        err(ld, e->loc,
                            "a link has two ends, not %u; write [NODE.ADAPTER, NODE.ADAPTER] or "
                            "use SWITCH.PORT for a switch",
                            e->len);
                } else {
                        uint32_t e1 = e->first, e2 = next(ld, e1);
                        bool r1 = resolve_end(ld, e1, &ref[0]);
                        bool r2 = resolve_end(ld, e2, &ref[1]);
                        ok = r1 && r2;
                }
        } else if (ends != NONE && nd(ld, ends)->kind != NTBF__YT_BAD) {
                wrong_type(ld, ends, "'ends'", "a list of two link ends");
        }
        if (!ok || ld->d->errors != e0 || ld->err) {
                ld->lost_links = true;
                return;
        }
        uint32_t idx = ntbf_topo_add_link(ld->t, ref[0], ref[1]);
        if (idx == NTBF_NONE) {
                ld->err = -ENOMEM;
                return;
        }
        ld->t->links[idx].latency_ns = latency;
        ld->t->links[idx].loc = at(ld, v);
}

/* ---- the file --------------------------------------------------------------------------- */

/* Is loc the position of a link? Links were added in file order, so their positions are sorted. */
static bool is_link_loc(const struct ntbf_topo *t, struct ntbf_loc loc)
{
        uint32_t lo = 0, hi = t->nlinks;
        while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                struct ntbf_loc m = t->links[mid].loc;
                if (m.line == loc.line && m.col == loc.col)
                        return true;
                if (m.line < loc.line || (m.line == loc.line && m.col < loc.col))
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return false;
}

/* Finalize, holding back the fabric-wide findings that mistakes already reported imply. */
static int finalize(struct ld *ld)
{
        struct ntbf_diags fd;
        ntbf_diags_init(&fd);
        fd.limit = ld->d->limit;
        int r = ntbf_topo_finalize(ld->t, &fd);
        /* A link finalize refused (a port used twice, ...) is lost to reachability as well. */
        for (size_t i = 0; i < fd.n; i++)
                if (is_link_loc(ld->t, fd.v[i].loc))
                        ld->lost_links = true;
        for (size_t i = 0; i < fd.n && !ld->err; i++) {
                const struct ntbf_diag *g = &fd.v[i];
                if (ld->lost_links && strstr(g->msg, REACH_TEXT))
                        continue;
                if (ld->lost_windows && strstr(g->msg, FIT_TEXT))
                        continue;
                if (ntbf_diag_add(ld->d, g->severity, g->file, g->loc, "%s", g->msg))
                        ld->err = -ENOMEM;
        }
        ld->d->errors += fd.dropped;
        ld->d->dropped += fd.dropped;
        ntbf_diags_free(&fd);
        return r == -ENOMEM ? r : 0;
}

static void load_root(struct ld *ld)
{
        uint32_t root = ld->doc->root, vals[T_N], item;
        char b[SHOWBUF];
        if (root == NONE || nd(ld, root)->kind == NTBF__YT_NULL) {
                err(ld, root == NONE ? (struct ntbf_loc){1, 1} : at(ld, root),
                    "the file is empty; a cluster file is a mapping with 'cluster:' and 'nodes:' "
                    "(see config/examples/quickstart.yaml)");
                return;
        }
        if (nd(ld, root)->kind != NTBF__YT_MAP) {
                if (nd(ld, root)->kind != NTBF__YT_BAD)
                        err(ld, at(ld, root),
                            "the file must be a mapping with the keys cluster, nodes, switches "
                            "and links, not %s",
                            desc(ld, root, b, sizeof(b)));
                return;
        }
        take_map(ld, root, "the file", "a mapping", &top_schema, vals);
        need(ld, root, &top_schema, vals, "the file");
        load_cluster(ld, vals[T_CLUSTER]);
        if (take_list(ld, vals[T_NODES], "'nodes'", "a list of nodes", &item)) {
                if (vals[T_NODES] != NONE && item == NONE)
                        err(ld, at(ld, vals[T_NODES]),
                            "'nodes' is empty; list the cluster's nodes (at least two)");
                for (; item != NONE; item = next(ld, item))
                        load_node(ld, item);
        }
        check_manager(ld);
        check_switchtec(ld);
        if (take_list(ld, vals[T_SWITCHES], "'switches'", "a list of switches", &item)) {
                for (; item != NONE; item = next(ld, item))
                        load_switch(ld, item);
        } else {
                ld->lost_links = true;
        }
        if (take_list(ld, vals[T_LINKS], "'links'", "a list of links", &item)) {
                for (; item != NONE; item = next(ld, item))
                        load_link(ld, item);
        } else {
                ld->lost_links = true;
        }
        if (ld->err)
                return;
        assign_standin_ids(ld);
        /* With no node, finalize would only repeat that 'nodes' is missing or empty. */
        if (ld->t->nnodes && !ld->err)
                ld->err = finalize(ld);
}

static void ld_free(struct ld *ld)
{
        ntbf__strmap_free(&ld->nodes);
        ntbf__strmap_free(&ld->switches);
        ntbf__strmap_free(&ld->adapters);
        ntbf__strmap_free(&ld->addrs);
        while (ld->keys) {
                struct chunk *c = ld->keys;
                ld->keys = c->next;
                free(c);
        }
        free(ld->standin);
        free(ld->incomplete);
        ntbf_topo_free(ld->sink);
}

int ntbf_config_load_mem(const char *name, const char *buf, size_t len, struct ntbf_topo **out,
                         struct ntbf_diags *diags)
{
        *out = NULL;
        size_t errors0 = diags->errors;
        if (len > MAX_FILE) {
                ntbf_diag_add(diags, NTBF_SEV_ERROR, name, (struct ntbf_loc){1, 1},
                              "the file is %zu bytes; cluster files are limited to 64 MiB, check "
                              "that this is the right file",
                              len);
                return NTBF_ECONFIG;
        }
        struct ntbf__yt_doc doc;
        int r = ntbf__yt_parse(&doc, name, buf, len, diags);
        if (r) {
                ntbf__yt_free(&doc);
                ntbf_diags_sort(diags);
                return r;
        }
        struct ld ld = {.file = name, .d = diags, .doc = &doc};
        ntbf__strmap_init(&ld.nodes);
        ntbf__strmap_init(&ld.switches);
        ntbf__strmap_init(&ld.adapters);
        ntbf__strmap_init(&ld.addrs);
        ld.t = ntbf_topo_new("", name);
        ld.sink = ntbf_topo_new("", NULL);
        if (!ld.t || !ld.sink || ntbf_topo_add_node(ld.sink, "", 0) == NTBF_NONE)
                ld.err = -ENOMEM;
        else
                load_root(&ld);
        ld_free(&ld);
        ntbf__yt_free(&doc);
        ntbf_diags_sort(diags);
        if (ld.err) {
                ntbf_topo_free(ld.t);
                return ld.err;
        }
        if (diags->errors != errors0) {
                ntbf_topo_free(ld.t);
                return NTBF_ECONFIG;
        }
        *out = ld.t;
        return 0;
}

int ntbf_config_load(const char *path, struct ntbf_topo **out, struct ntbf_diags *diags)
{
        *out = NULL;
        /* O_NONBLOCK: opening a FIFO nobody writes to must not wait for a writer. */
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat st;
        int e = 0;
        if (fd < 0 || fstat(fd, &st) < 0) {
                e = errno;
        } else if (S_ISDIR(st.st_mode)) {
                e = EISDIR;
        }
        if (e) {
                if (fd >= 0)
                        close(fd);
                ntbf_diag_add(diags, NTBF_SEV_ERROR, path, (struct ntbf_loc){0, 0},
                              "cannot read the cluster file: %s; check the path and its "
                              "permissions",
                              strerror(e));
                return -e;
        }
        if (!S_ISREG(st.st_mode)) {
                close(fd);
                ntbf_diag_add(diags, NTBF_SEV_ERROR, path, (struct ntbf_loc){0, 0},
                              "cannot read the cluster file: it is not a regular file (a %s); "
                              "name the YAML file itself",
                              S_ISFIFO(st.st_mode)   ? "FIFO"
                              : S_ISSOCK(st.st_mode) ? "socket"
                              : S_ISCHR(st.st_mode)  ? "character device"
                                                     : "block device");
                return -EINVAL;
        }
        if ((uint64_t)st.st_size > MAX_FILE) {
                close(fd);
                ntbf_diag_add(diags, NTBF_SEV_ERROR, path, (struct ntbf_loc){1, 1},
                              "the file is %llu bytes; cluster files are limited to 64 MiB, "
                              "check that this is the right file",
                              (unsigned long long)st.st_size);
                return NTBF_ECONFIG;
        }
        /* Regular: read back to blocking reads. One byte past the size the file had is read
         * too, so a file that grew past the limit meanwhile is still caught below. */
        fcntl(fd, F_SETFL, 0);
        size_t cap = (size_t)st.st_size + 1;
        size_t len = 0;
        char *buf = malloc(cap);
        while (buf) {
                if (len == cap) {
                        if (cap > MAX_FILE)
                                break;
                        size_t ncap = cap * 2 > MAX_FILE + 1 ? MAX_FILE + 1 : cap * 2;
                        char *nb = realloc(buf, ncap);
                        if (!nb) {
                                free(buf);
                                buf = NULL;
                                break;
                        }
                        buf = nb;
                        cap = ncap;
                }
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        e = errno;
                        break;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        close(fd);
        if (!buf)
                return -ENOMEM;
        if (e) {
                free(buf);
                ntbf_diag_add(diags, NTBF_SEV_ERROR, path, (struct ntbf_loc){0, 0},
                              "cannot read the cluster file: %s; check the path and its "
                              "permissions",
                              strerror(e));
                return -e;
        }
        int r = ntbf_config_load_mem(path, buf, len, out, diags);
        free(buf);
        return r;
}
