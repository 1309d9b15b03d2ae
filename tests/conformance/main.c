/* tests/conformance/main.c: ntbfab-conformance: open a backend, pick adapters, run checks, report.
 */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <json-c/json.h>

#include "ntbfab/config.h"
#include "ntbfab/sim.h"
#include "conformance.h"

/*
 * The suite runs in one process that opens both adapters of every pair it tests: the
 * simulated fabric (whose instance it creates), or two adapters one machine can open that
 * are cabled to each other or joined by a switch (docs/writing-a-backend.md).
 *
 * Exit status follows the project's CLI conventions: 0 when no check failed (passes and
 * skips only), 1 when a check failed or the backend could not be opened, 2 on a usage
 * error. The report goes to stdout (TAP, or a table with --table); --json FILE writes the
 * same results for machines.
 */

struct opts {
        const char *backend, *config, *dir, *a, *b, *json;
        const char *only[32];
        unsigned nonly;
        const char *skip[8]; /* NAME=REASON */
        unsigned nskip;
        bool table, list, keep, dma_only, fixed_windows;
        unsigned timeout_ms;
};

static void usage(FILE *f)
{
        fprintf(
            f, "usage: ntbfab-conformance --backend NAME --config CLUSTER.yaml [--dir DIR]\n"
               "                          [--a NODE.ADAPTER --b NODE.ADAPTER] [--only PATTERN]...\n"
               "                          [--json FILE] [--table] [--access auto|dma]\n"
               "                          [--timeout-ms N] [--fixed-windows] [--keep] [--list]\n"
               "Hold an NTB backend to the behaviour of the reference (the simulated fabric).\n"
               "  --backend NAME     a backend of the registry (default: the cluster's)\n"
               "  --config FILE      the cluster file describing the hardware under test\n"
               "  --dir DIR          the instance directory (a backend that runs on one\n"
               "                     machine, like sim: created there and kept;\n"
               "                     default: a fresh temporary directory, removed after)\n"
               "  --a, --b           the adapter pair (A issues, B receives); default: the first\n"
               "                     cabled pair and the first pair joined by a switch\n"
               "  --only PATTERN     run the checks whose name matches (fnmatch, repeatable)\n"
               "  --skip NAME=REASON report check NAME skipped with REASON, not run: what the\n"
               "                     test vehicle cannot do (repeatable)\n"
               "  --json FILE        write the results as JSON\n"
               "  --table            a human table instead of TAP\n"
               "  --access dma       reach windows and count transactions only through the DMA\n"
               "                     engine, as for a backend without CPU maps\n"
               "  --timeout-ms N     longest wait for an event or a DMA completion (2000)\n"
               "  --fixed-windows    the hardware translates each window only to one fixed\n"
               "                     address and drops no access through it (the kernel\n"
               "                     tier's emulated NTB): drops are not asserted, and the\n"
               "                     results say so\n"
               "  --keep             keep the temporary instance directory\n"
               "  --list             list the checks and what each proves, then exit\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
        static const struct option longopts[] = {{"backend", required_argument, NULL, 'B'},
                                                 {"config", required_argument, NULL, 'c'},
                                                 {"dir", required_argument, NULL, 'd'},
                                                 {"a", required_argument, NULL, 'a'},
                                                 {"b", required_argument, NULL, 'b'},
                                                 {"only", required_argument, NULL, 'o'},
                                                 {"skip", required_argument, NULL, 'S'},
                                                 {"json", required_argument, NULL, 'j'},
                                                 {"table", no_argument, NULL, 't'},
                                                 {"access", required_argument, NULL, 'x'},
                                                 {"timeout-ms", required_argument, NULL, 'T'},
                                                 {"keep", no_argument, NULL, 'k'},
                                                 {"list", no_argument, NULL, 'l'},
                                                 {"fixed-windows", no_argument, NULL, 'F'},
                                                 {"help", no_argument, NULL, 'h'},
                                                 {NULL, 0, NULL, 0}};
        memset(o, 0, sizeof(*o));
        o->timeout_ms = 2000;
        for (int c; (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1;) {
                switch (c) {
                case 'B':
                        o->backend = optarg;
                        break;
                case 'c':
                        o->config = optarg;
                        break;
                case 'd':
                        o->dir = optarg;
                        break;
                case 'a':
                        o->a = optarg;
                        break;
                case 'b':
                        o->b = optarg;
                        break;
                case 'o':
                        if (o->nonly == sizeof(o->only) / sizeof(o->only[0])) {
                                fprintf(stderr, "ntbfab-conformance: too many --only\n");
                                return 2;
                        }
                        o->only[o->nonly++] = optarg;
                        break;
                case 'S':
                        if (!strchr(optarg, '=') || strchr(optarg, '=') == optarg ||
                            !strchr(optarg, '=')[1] ||
                            o->nskip == sizeof(o->skip) / sizeof(o->skip[0])) {
                                fprintf(stderr,
                                        "ntbfab-conformance: --skip takes NAME=REASON (at most "
                                        "%zu), not '%s'\n",
                                        sizeof(o->skip) / sizeof(o->skip[0]), optarg);
                                return 2;
                        }
                        o->skip[o->nskip++] = optarg;
                        break;
                case 'j':
                        o->json = optarg;
                        break;
                case 't':
                        o->table = true;
                        break;
                case 'x':
                        if (!strcmp(optarg, "dma"))
                                o->dma_only = true;
                        else if (strcmp(optarg, "auto")) {
                                fprintf(stderr,
                                        "ntbfab-conformance: --access takes auto or dma, "
                                        "not '%s'\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case 'T': {
                        char *end;
                        unsigned long v = strtoul(optarg, &end, 10);
                        if (*end || !v || v > 600000) {
                                fprintf(stderr,
                                        "ntbfab-conformance: --timeout-ms takes 1..600000, "
                                        "not '%s'\n",
                                        optarg);
                                return 2;
                        }
                        o->timeout_ms = (unsigned)v;
                        break;
                }
                case 'k':
                        o->keep = true;
                        break;
                case 'F':
                        o->fixed_windows = true;
                        break;
                case 'l':
                        o->list = true;
                        break;
                case 'h':
                        usage(stdout);
                        exit(0);
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (optind != argc || (!o->list && !o->config) || (!o->a != !o->b)) {
                usage(stderr);
                return 2;
        }
        return 0;
}

/* ---- choosing adapters ------------------------------------------------------------------------
 */

static struct ntbf_path path_buf;

/* The route from adapter a's host through a to b's host through b; false if none. */
static bool route(const struct ntbf_topo *t, uint32_t a, uint32_t b, struct ntbf_path *p)
{
        if (t->adapters[a].node == t->adapters[b].node)
                return false;
        struct ntbf_path_opts o = NTBF_PATH_OPTS_INIT;
        o.first_adapter = a;
        o.last_adapter = b;
        struct ntbf_endpoint from = {NTBF_EP_CPU, t->adapters[a].node, NTBF_NONE};
        struct ntbf_endpoint to = {NTBF_EP_RAM, t->adapters[b].node, NTBF_NONE};
        return !ntbf_path_find(t, &o, from, to, p, NULL, 0) && p->first_adapter == a &&
               p->last_adapter == b;
}

static bool via_switch(const struct ntbf_path *p)
{
        for (uint32_t i = 0; i < p->nhops; i++)
                if (p->hops[i].kind == NTBF_HOP_SWITCH)
                        return true;
        return false;
}

static bool has_switch_cable(const struct ntbf_topo *t, uint32_t a)
{
        for (uint32_t p = 0; p < NTBF_MAX_ADAPTER_PORTS; p++) {
                uint32_t l = t->adapters[a].link[p];
                if (l == NTBF_NONE)
                        continue;
                struct ntbf_port_ref o =
                    ntbf_link_peer(&t->links[l], (struct ntbf_port_ref){NTBF_PORT_ADAPTER, a, p});
                if (o.kind == NTBF_PORT_SWITCH)
                        return true;
        }
        return false;
}

static int parse_adapter(const struct ntbf_topo *t, const char *s, uint32_t *out)
{
        char node[64];
        const char *dot = strchr(s, '.');
        if (!dot || (size_t)(dot - s) >= sizeof(node)) {
                fprintf(stderr, "ntbfab-conformance: '%s' is not NODE.ADAPTER\n", s);
                return 2;
        }
        memcpy(node, s, (size_t)(dot - s));
        node[dot - s] = 0;
        uint32_t n = ntbf_topo_find_node(t, node);
        uint32_t a = n == NTBF_NONE ? NTBF_NONE : ntbf_topo_find_adapter(t, n, dot + 1);
        if (a == NTBF_NONE) {
                fprintf(stderr, "ntbfab-conformance: the cluster has no adapter '%s'\n", s);
                return 2;
        }
        *out = a;
        return 0;
}

struct pick {
        uint32_t a, b;
};

/* The pairs to test: the given one, or the first cabled pair and the first switched pair. */
static int pick_pairs(const struct ntbf_topo *t, const struct opts *o, struct pick *out,
                      unsigned *n)
{
        *n = 0;
        if (o->a) {
                struct pick p;
                int r = parse_adapter(t, o->a, &p.a);
                if (!r)
                        r = parse_adapter(t, o->b, &p.b);
                if (r)
                        return r;
                if (!route(t, p.a, p.b, &path_buf)) {
                        fprintf(stderr,
                                "ntbfab-conformance: %s cannot reach %s (no route between "
                                "these adapters in %s)\n",
                                o->a, o->b, o->config);
                        return 2;
                }
                out[(*n)++] = p;
                return 0;
        }
        for (uint32_t l = 0; l < t->nlinks; l++) {
                const struct ntbf_link *k = &t->links[l];
                if (k->end[0].kind != NTBF_PORT_ADAPTER || k->end[1].kind != NTBF_PORT_ADAPTER)
                        continue;
                uint32_t a = k->end[0].obj, b = k->end[1].obj;
                if (route(t, a, b, &path_buf) && !via_switch(&path_buf)) {
                        out[(*n)++] = (struct pick){a, b};
                        break;
                }
        }
        for (uint32_t a = 0; a < t->nadapters; a++) {
                if (!has_switch_cable(t, a))
                        continue;
                for (uint32_t b = 0; b < t->nadapters; b++) {
                        if (b != a && has_switch_cable(t, b) && route(t, a, b, &path_buf) &&
                            via_switch(&path_buf)) {
                                out[(*n)++] = (struct pick){a, b};
                                return 0;
                        }
                }
        }
        if (!*n) {
                fprintf(stderr,
                        "ntbfab-conformance: %s has no two adapters that reach each other\n",
                        o->config);
                return 2;
        }
        return 0;
}

static struct cf_ad *ad_get(struct cf_ctx *cx, uint32_t idx)
{
        for (unsigned i = 0; i < cx->nads; i++)
                if (cx->ads[i].idx == idx)
                        return &cx->ads[i];
        struct cf_ad *ad = &cx->ads[cx->nads++];
        memset(ad, 0, sizeof(*ad));
        ad->idx = idx;
        ad->node = cx->t->adapters[idx].node;
        ad->partner = NTBF_NONE;
        ad->stage.fd = -1;
        snprintf(ad->name, sizeof(ad->name), "%s.%s", cx->t->nodes[ad->node].name,
                 cx->t->adapters[idx].name);
        return ad;
}

static void fill_pair(struct cf_ctx *cx, struct cf_pair *p, uint32_t a, uint32_t b)
{
        const struct ntbf_topo *t = cx->t;
        memset(p, 0, sizeof(*p));
        p->a = ad_get(cx, a);
        p->b = ad_get(cx, b);
        if (p->a->partner == NTBF_NONE)
                p->a->partner = b;
        if (p->b->partner == NTBF_NONE)
                p->b->partner = a;
        route(t, a, b, &path_buf);
        p->via_switch = via_switch(&path_buf);
        p->a_port = p->b_port = NTBF_NONE;
        for (uint32_t i = 0; i < path_buf.nhops; i++) {
                const struct ntbf_hop *h = &path_buf.hops[i];
                if (h->kind == NTBF_HOP_ADAPTER && h->obj == a)
                        p->a_port = h->out_port;
                if (h->kind == NTBF_HOP_ADAPTER && h->obj == b)
                        p->b_port = h->in_port;
                if (h->kind == NTBF_HOP_SWITCH && p->nsw < CF_MAX_SWITCHES)
                        p->sw[p->nsw++] = h->obj;
        }
        snprintf(p->label, sizeof(p->label), "%s -> %s%s%s", p->a->name, p->b->name,
                 p->via_switch ? " via " : "", p->via_switch ? t->switches[p->sw[0]].name : "");
        if (!p->via_switch)
                return;
        /* Multicast members: B, then every other adapter A reaches through the switches. */
        p->members[p->nmembers++] = p->b;
        for (uint32_t x = 0; x < t->nadapters && p->nmembers < CF_MAX_MEMBERS; x++) {
                if (x == a || x == b || t->adapters[x].node == t->adapters[a].node)
                        continue;
                struct ntbf_path q;
                if (!route(t, a, x, &q) || !via_switch(&q))
                        continue;
                struct cf_ad *m = ad_get(cx, x);
                if (m->partner == NTBF_NONE)
                        m->partner = a;
                p->members[p->nmembers++] = m;
        }
}

/* ---- the switch baseline ----------------------------------------------------------------------
 */

/*
 * A's CPU must be in every switch table its traffic crosses (docs/model.md, "CPU baseline"),
 * as the core registers it when a cluster starts. The suite does the same for the switches
 * on its routes and takes the entries back at the end.
 */
static int switch_baseline(struct cf_ctx *cx, bool add)
{
        for (unsigned i = 0; i < cx->npairs; i++) {
                struct cf_pair *p = &cx->pairs[i];
                if (!p->via_switch || !(p->a->caps.flags & NTBF_CAP_SWITCH_RID))
                        continue;
                struct ntbf_rid cpu = {p->a->node, 0x0000, 0xffff};
                uint32_t sws[CF_MAX_SWITCHES * (CF_MAX_MEMBERS + 1)], n = 0;
                for (unsigned m = 0; m < p->nmembers; m++) {
                        struct ntbf_path q;
                        if (!route(cx->t, p->a->idx, p->members[m]->idx, &q))
                                continue;
                        for (uint32_t h = 0; h < q.nhops; h++)
                                if (q.hops[h].kind == NTBF_HOP_SWITCH && n < sizeof(sws) / 4)
                                        sws[n++] = q.hops[h].obj;
                }
                for (uint32_t k = 0; k < n; k++) {
                        uint32_t sw = sws[k];
                        if (!cx->t->switches[sw].p.rid_table)
                                continue;
                        if (!add) {
                                if (cx->sw_held[sw] && !cx->ops->switch_rid_del(p->a->h, sw, &cpu))
                                        cx->sw_held[sw]--;
                                continue;
                        }
                        int r = cx->ops->switch_rid_add(p->a->h, sw, &cpu);
                        if (r == -EEXIST)
                                continue;
                        if (r) {
                                char e[64];
                                fprintf(stderr,
                                        "ntbfab-conformance: cannot register the CPU of %s on "
                                        "switch %s: switch_rid_add returned %s\n",
                                        cx->t->nodes[p->a->node].name, cx->t->switches[sw].name,
                                        cf_err(r, e, sizeof(e)));
                                return 1;
                        }
                        cx->sw_held[sw]++;
                }
        }
        return 0;
}

/* ---- running ----------------------------------------------------------------------------------
 */

static bool selected(const struct opts *o, const char *name)
{
        if (!o->nonly)
                return true;
        for (unsigned i = 0; i < o->nonly; i++)
                if (!fnmatch(o->only[i], name, 0))
                        return true;
        return false;
}

/* --skip NAME=REASON: the reason, or NULL. */
static const char *skipped(const struct opts *o, const char *name)
{
        for (unsigned i = 0; i < o->nskip; i++) {
                const char *eq = strchr(o->skip[i], '=');
                if ((size_t)(eq - o->skip[i]) == strlen(name) &&
                    !strncmp(o->skip[i], name, strlen(name)))
                        return eq + 1;
        }
        return NULL;
}

static const char *status_name(enum cf_status s)
{
        return s == CF_PASS ? "PASS" : s == CF_FAIL ? "FAIL" : "SKIP";
}

/* Put the adapters back in the state every check starts from. */
static void settle(struct cf_ctx *cx)
{
        for (unsigned i = 0; i < cx->nads; i++) {
                struct cf_ad *ad = &cx->ads[i];
                cx->ops->set_events(ad->h, &cf_event_ops, ad);
                cx->ops->process_events(ad->h);
                cf_ev_reset(ad);
                cf_dma_drain(cx, ad);
        }
}

static void run_one(struct cf_ctx *cx, struct cf_run *r)
{
        settle(cx);
        double t0 = cf_now_ms();
        r->status = CF_PASS;
        r->reason[0] = 0;
        r->uncounted = false;
        r->undropped = false;
        r->chk->fn(r);
        cf_undo_all(r);
        if (r->status == CF_PASS && r->uncounted) {
                size_t n = strlen(r->reason);
                snprintf(r->reason + n, sizeof(r->reason) - n,
                         "%scounters not checked: not claimed (no NTBF_CAP_COUNTERS)",
                         n ? "; " : "");
        }
        if (r->status == CF_PASS && r->undropped) {
                size_t n = strlen(r->reason);
                snprintf(r->reason + n, sizeof(r->reason) - n,
                         "%sdropped accesses not checked: the hardware under test drops none "
                         "(--fixed-windows)",
                         n ? "; " : "");
        }
        settle(cx);
        r->ms = cf_now_ms() - t0;
        free(r->undo);
        r->undo = NULL;
        r->nundo = r->capundo = 0;
}

static void build_runs(struct cf_ctx *cx, const struct opts *o, struct cf_run **out, size_t *n)
{
        size_t cap = 64;
        struct cf_run *v = calloc(cap, sizeof(*v));
        *n = 0;
        for (size_t c = 0; c < cf_nchecks; c++) {
                const struct cf_check *k = &cf_checks[c];
                if (!selected(o, k->name))
                        continue;
                unsigned subjects = k->scope == CF_ONCE      ? 1
                                    : k->scope == CF_ADAPTER ? cx->nads
                                                             : cx->npairs;
                for (unsigned s = 0; s < subjects; s++) {
                        if (k->scope == CF_SWITCH_PAIR && !cx->pairs[s].via_switch)
                                continue;
                        if (*n == cap) {
                                cap *= 2;
                                v = realloc(v, cap * sizeof(*v));
                        }
                        if (!v) {
                                fprintf(stderr, "ntbfab-conformance: out of memory\n");
                                exit(1);
                        }
                        struct cf_run *r = &v[(*n)++];
                        memset(r, 0, sizeof(*r));
                        r->cx = cx;
                        r->chk = k;
                        if (k->scope == CF_ONCE) {
                                snprintf(r->subject, sizeof(r->subject), "backend %s",
                                         cx->ops->name);
                        } else if (k->scope == CF_ADAPTER) {
                                r->ad = &cx->ads[s];
                                snprintf(r->subject, sizeof(r->subject), "%s", r->ad->name);
                        } else {
                                r->p = &cx->pairs[s];
                                snprintf(r->subject, sizeof(r->subject), "%s", r->p->label);
                        }
                }
        }
        *out = v;
}

static void print_tap(const struct cf_run *r, size_t i)
{
        if (r->status == CF_SKIP)
                printf("ok %zu - %s [%s] # SKIP %s\n", i + 1, r->chk->name, r->subject, r->reason);
        else
                printf("%s %zu - %s [%s] (%.0f ms)\n", r->status == CF_PASS ? "ok" : "not ok",
                       i + 1, r->chk->name, r->subject, r->ms);
        if (r->status != CF_SKIP && r->reason[0])
                printf("  # %s\n", r->reason); /* why it failed, or what a pass covered */
        fflush(stdout);
}

/* What was not checked and why, in one place: features not claimed, then the rest. */
static void print_skips(const struct cf_run *runs, size_t n, const char *p)
{
        static const char nc[] = "not claimed: ";
        for (int pass = 0; pass < 2; pass++) {
                bool head = false;
                for (size_t i = 0; i < n; i++) {
                        const struct cf_run *r = &runs[i];
                        bool claimed = strncmp(r->reason, nc, sizeof(nc) - 1) != 0;
                        if (r->status != CF_SKIP || claimed != (pass == 1))
                                continue;
                        if (!head)
                                printf("%sskipped, %s:\n", p,
                                       pass ? "for other reasons" : "not claimed");
                        head = true;
                        printf("%s  %s [%s]: %s\n", p, r->chk->name, r->subject,
                               pass ? r->reason : r->reason + sizeof(nc) - 1);
                }
        }
}

static void print_row(const struct cf_run *r)
{
        printf("%-4s  %-16s  %-34s  %6.0f  %s\n", status_name(r->status), r->chk->name, r->subject,
               r->ms, r->reason);
        fflush(stdout);
}

/* Microseconds are all a timing here can mean. */
static double ms3(double ms)
{
        return (double)(int64_t)(ms * 1000 + 0.5) / 1000;
}

static int write_json(const char *file, const struct cf_ctx *cx, const struct opts *o,
                      const struct cf_run *runs, size_t n, const unsigned *count, double ms)
{
        json_object *root = json_object_new_object();
        json_object_object_add(root, "backend", json_object_new_string(cx->ops->name));
        json_object_object_add(root, "config", json_object_new_string(o->config));
        json_object_object_add(root, "access",
                               json_object_new_string(o->dma_only ? "dma" : "auto"));
        json_object *pairs = json_object_new_array();
        for (unsigned i = 0; i < cx->npairs; i++) {
                json_object *p = json_object_new_object();
                json_object_object_add(p, "a", json_object_new_string(cx->pairs[i].a->name));
                json_object_object_add(p, "b", json_object_new_string(cx->pairs[i].b->name));
                json_object_object_add(p, "via_switch",
                                       json_object_new_boolean(cx->pairs[i].via_switch));
                json_object_array_add(pairs, p);
        }
        json_object_object_add(root, "pairs", pairs);
        json_object *checks = json_object_new_array();
        for (size_t i = 0; i < n; i++) {
                json_object *c = json_object_new_object();
                json_object_object_add(c, "name", json_object_new_string(runs[i].chk->name));
                json_object_object_add(c, "subject", json_object_new_string(runs[i].subject));
                char st[8];
                snprintf(st, sizeof(st), "%s", status_name(runs[i].status));
                for (char *s = st; *s; s++)
                        *s = (char)(*s - 'A' + 'a');
                json_object_object_add(c, "status", json_object_new_string(st));
                json_object_object_add(c, "reason", json_object_new_string(runs[i].reason));
                json_object_object_add(c, "ms", json_object_new_double(ms3(runs[i].ms)));
                json_object_array_add(checks, c);
        }
        json_object_object_add(root, "checks", checks);
        json_object *sum = json_object_new_object();
        json_object_object_add(sum, "pass", json_object_new_int((int)count[CF_PASS]));
        json_object_object_add(sum, "fail", json_object_new_int((int)count[CF_FAIL]));
        json_object_object_add(sum, "skip", json_object_new_int((int)count[CF_SKIP]));
        json_object_object_add(sum, "ms", json_object_new_double(ms3(ms)));
        json_object_object_add(root, "summary", sum);
        int r = json_object_to_file_ext(file, root, JSON_C_TO_STRING_PRETTY);
        json_object_put(root);
        if (r) {
                fprintf(stderr, "ntbfab-conformance: cannot write %s: %s\n", file, strerror(errno));
                return 1;
        }
        return 0;
}

static void list_checks(void)
{
        static const char *scope[] = {"backend", "adapter", "pair", "switched pair"};
        for (size_t i = 0; i < cf_nchecks; i++)
                printf("%-16s  %-13s  %s\n", cf_checks[i].name, scope[cf_checks[i].scope],
                       cf_checks[i].proves);
}

/* ---- setup and teardown ------------------------------------------------------------------------
 */

struct instance {
        char dir[512];
        bool created; /* a temporary instance: destroyed at the end */
};

/* A backend that runs on one machine (create/destroy) gets a fresh instance. */
static int make_instance(const struct ntbf_backend_ops *ops, const struct ntbf_topo *t,
                         const struct opts *o, struct instance *in)
{
        char why[1024];
        if (o->dir) {
                snprintf(in->dir, sizeof(in->dir), "%s", o->dir);
        } else {
                const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
                snprintf(in->dir, sizeof(in->dir), "%s/ntbfab-conformance-XXXXXX",
                         base ? base : "/tmp");
                if (!mkdtemp(in->dir)) {
                        fprintf(stderr, "ntbfab-conformance: cannot create %s: %s\n", in->dir,
                                strerror(errno));
                        return 1;
                }
                in->created = !o->keep;
        }
        int r = ops->create(t, in->dir, why, sizeof(why));
        if (r) {
                fprintf(stderr, "ntbfab-conformance: %s\n", why);
                if (in->created)
                        rmdir(in->dir);
                return 1;
        }
        return 0;
}

/* A temporary instance goes whole: the sim's destroy keeps NVMe images (docs/sim.md), but
 * these were made for this run only. */
static void remove_instance(const struct ntbf_backend_ops *ops, const struct ntbf_topo *t,
                            const char *dir)
{
        ops->destroy(t, dir);
        char path[1024];
        snprintf(path, sizeof(path), "%s/images", dir);
        DIR *d = opendir(path);
        for (struct dirent *e; d && (e = readdir(d));) {
                if (e->d_name[0] == '.')
                        continue;
                char f[1024 + 256];
                snprintf(f, sizeof(f), "%s/%s", path, e->d_name);
                unlink(f);
        }
        if (d)
                closedir(d);
        rmdir(path);
        if (rmdir(dir) && errno != ENOENT) /* destroy removes it when nothing is left */
                fprintf(stderr, "ntbfab-conformance: could not remove %s: %s\n", dir,
                        strerror(errno));
}

static void print_header(const struct cf_ctx *cx, const struct opts *o, const char *dir)
{
        const char *p = o->table ? "" : "# ";
        printf("%sntbfab-conformance: backend %s, cluster %s (%s)%s\n", p, cx->ops->name,
               cx->t->name, o->config, o->dma_only ? ", access through DMA engines only" : "");
        if (dir)
                printf("%sinstance directory %s\n", p, dir);
        for (unsigned i = 0; i < cx->npairs; i++) {
                const struct cf_pair *q = &cx->pairs[i];
                printf("%spair %u: %s", p, i + 1, q->label);
                if (q->nmembers) {
                        printf(", multicast members");
                        for (unsigned m = 0; m < q->nmembers; m++)
                                printf(" %s", q->members[m]->name);
                }
                printf("\n");
        }
        for (unsigned i = 0; i < cx->nads; i++) {
                const struct cf_ad *a = &cx->ads[i];
                printf("%s%s claims:", p, a->name);
                for (uint32_t f = 1; f <= NTBF_CAP_LAST; f <<= 1)
                        if (a->caps.flags & f)
                                printf(" %s", cf_cap_name(f) + 9);
                printf("\n");
        }
}

int main(int argc, char **argv)
{
        struct opts o;
        int rc = parse(argc, argv, &o);
        if (rc)
                return rc;
        if (o.list) {
                list_checks();
                return 0;
        }
        struct ntbf_diags diags;
        ntbf_diags_init(&diags);
        struct ntbf_topo *t = NULL;
        rc = ntbf_config_load(o.config, &t, &diags);
        ntbf_diags_sort(&diags);
        ntbf_diags_print(&diags, stderr);
        ntbf_diags_free(&diags);
        if (rc) {
                if (rc != NTBF_ECONFIG)
                        fprintf(stderr, "ntbfab-conformance: cannot load %s: %s\n", o.config,
                                ntbf_strerror(rc));
                return 1;
        }
        const char *name = o.backend ? o.backend : t->backend;
        struct cf_ctx cx = {.t = t, .timeout_ms = o.timeout_ms, .quiet_ms = 50};
        char no[512];
        cx.ops = ntbf_backend_open_ops(name, no, sizeof(no));
        if (!cx.ops) {
                fprintf(stderr, "ntbfab-conformance: %s\n", no);
                ntbf_topo_free(t);
                return 2;
        }
        /* Nothing else can run against a broken vtable: a missing mandatory callback would
         * be called through a NULL pointer. */
        char why[256] = "";
        if (!ntbf_backend_ops_valid(cx.ops, why, sizeof(why))) {
                printf("%s1..1\nnot ok 1 - vtable [backend %s]\n  # ntbf_backend_ops_valid refuses "
                       "the vtable: %s\n# no other check can run against an invalid vtable\n",
                       o.table ? "" : "TAP version 13\n", cx.ops->name, why);
                ntbf_topo_free(t);
                return 1;
        }
        cx.sim = !strcmp(cx.ops->name, "sim");
        cx.dma_only = o.dma_only;
        cx.fixed_windows = o.fixed_windows;

        struct pick picks[2];
        unsigned npicks;
        rc = pick_pairs(t, &o, picks, &npicks);
        if (rc) {
                ntbf_topo_free(t);
                return rc;
        }
        cx.ads = calloc(t->nadapters, sizeof(*cx.ads));
        cx.pairs = calloc(npicks, sizeof(*cx.pairs));
        cx.sw_held = calloc(t->nswitches + 1, sizeof(*cx.sw_held));
        if (!cx.ads || !cx.pairs || !cx.sw_held) {
                fprintf(stderr, "ntbfab-conformance: out of memory\n");
                return 1;
        }
        for (unsigned i = 0; i < npicks; i++)
                fill_pair(&cx, &cx.pairs[cx.npairs++], picks[i].a, picks[i].b);

        struct instance in = {0};
        if (cx.ops->create && make_instance(cx.ops, t, &o, &in)) {
                ntbf_topo_free(t);
                return 1;
        }
        const char *dir = cx.ops->create ? in.dir : o.dir;
        cx.env = (struct ntbf_backend_env){t, dir, NTBF_NONE};
        char e[64], owhy[512] = "";
        rc = cx.ops->open(&cx.env, &cx.b, owhy, sizeof(owhy));
        if (rc) {
                fprintf(stderr, "ntbfab-conformance: %s: open(%s) returned %s: %s\n", cx.ops->name,
                        dir ? dir : "no directory", cf_err(rc, e, sizeof(e)),
                        owhy[0] ? owhy : ntbf_strerror(rc));
                rc = 1;
                goto destroy;
        }
        for (unsigned i = 0; i < cx.nads; i++) {
                struct cf_ad *ad = &cx.ads[i];
                rc = cx.ops->probe(cx.b, ad->idx, &ad->h);
                if (!rc)
                        rc = cx.ops->caps(ad->h, &ad->caps);
                if (!rc)
                        rc = cx.ops->set_events(ad->h, &cf_event_ops, ad);
                if (rc) {
                        fprintf(stderr,
                                "ntbfab-conformance: %s: probe, caps or set_events returned "
                                "%s: %s\n",
                                ad->name, cf_err(rc, e, sizeof(e)), ntbf_strerror(rc));
                        rc = 1;
                        goto release;
                }
        }
        rc = switch_baseline(&cx, true);
        if (rc)
                goto release;

        /* A capability claimed without its callbacks fails caps.flags; the checks that would
         * call through the missing pointer are skipped. */
        char gate[320] = "";
        for (unsigned i = 0; i < cx.nads && !gate[0]; i++) {
                for (uint32_t f = 1; f <= NTBF_CAP_LAST && !gate[0]; f <<= 1) {
                        const char *missing = ntbf_cap_missing(cx.ops, f);
                        if ((cx.ads[i].caps.flags & f) && missing)
                                snprintf(gate, sizeof(gate),
                                         "%s claims %s without %s (see caps.flags): nothing "
                                         "else runs",
                                         cx.ads[i].name, cf_cap_name(f), missing);
                }
        }
        struct cf_run *runs;
        size_t n;
        build_runs(&cx, &o, &runs, &n);
        if (!o.table) {
                printf("TAP version 13\n");
                print_header(&cx, &o, cx.ops->create ? in.dir : NULL);
                printf("1..%zu\n", n);
        } else {
                print_header(&cx, &o, cx.ops->create ? in.dir : NULL);
                printf("%-4s  %-16s  %-34s  %6s  %s\n", "", "CHECK", "SUBJECT", "MS", "REASON");
        }
        fflush(stdout);
        unsigned count[3] = {0};
        double t0 = cf_now_ms();
        for (size_t i = 0; i < n; i++) {
                if (gate[0] && strcmp(runs[i].chk->name, "vtable") &&
                    strcmp(runs[i].chk->name, "caps.flags")) {
                        runs[i].status = CF_SKIP;
                        snprintf(runs[i].reason, sizeof(runs[i].reason), "%s", gate);
                } else if (skipped(&o, runs[i].chk->name)) {
                        runs[i].status = CF_SKIP;
                        snprintf(runs[i].reason, sizeof(runs[i].reason),
                                 "skipped on the command line: %s", skipped(&o, runs[i].chk->name));
                } else {
                        run_one(&cx, &runs[i]);
                }
                count[runs[i].status]++;
                if (o.table)
                        print_row(&runs[i]);
                else
                        print_tap(&runs[i], i);
        }
        double total = cf_now_ms() - t0;
        print_skips(runs, n, o.table ? "" : "# ");
        printf("%s%zu checks: %u passed, %u failed, %u skipped (%.2f s)\n", o.table ? "" : "# ", n,
               count[CF_PASS], count[CF_FAIL], count[CF_SKIP], total / 1000);
        rc = count[CF_FAIL] ? 1 : 0;
        if (o.json && write_json(o.json, &cx, &o, runs, n, count, total))
                rc = 1;
        free(runs);
        switch_baseline(&cx, false);
release:
        if (cx.devhost)
                ntbf_sim_devhost_stop(cx.devhost);
        for (unsigned i = 0; i < cx.nads; i++) {
                struct cf_ad *ad = &cx.ads[i];
                if (ad->staged)
                        cx.ops->mem_free(ad->h, &ad->stage);
                if (ad->h)
                        cx.ops->release(ad->h);
        }
        cx.ops->close(cx.b);
destroy:
        if (in.created)
                remove_instance(cx.ops, t, in.dir);
        free(cx.ads);
        free(cx.pairs);
        free(cx.sw_held);
        ntbf_topo_free(t);
        return rc;
}
