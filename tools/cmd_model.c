/* tools/cmd_model.c: verbs that answer questions about a cluster file before anything runs. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "draw.h"
#include "ntbfab/config.h"
#include "ntbfab/error.h"
#include "ntbfab/units.h"

static const struct verb *find_verb(const char *name);

int cli_load(const char *path, struct ntbf_topo **t, struct ntbf_state **s, bool quiet)
{
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        *t = NULL;
        if (s)
                *s = NULL;
        int r = ntbf_config_load(path, t, &d);
        if (!r && s) {
                r = ntbf_state_new(*t, s, &d);
                if (r) {
                        ntbf_topo_free(*t);
                        *t = NULL;
                }
        }
        if (!quiet) {
                ntbf_diags_sort(&d);
                ntbf_diags_print(&d, stderr);
        }
        ntbf_diags_free(&d);
        return r;
}

/* Parse the common options of a verb: --json, plus the verb's own long options. */
static int parse(const struct verb *v, int argc, char **argv, const struct option *extra,
                 size_t nextra, bool *json, int (*opt)(int c, const char *arg, void *ctx),
                 void *ctx)
{
        struct option longs[16];
        size_t n = 0;
        longs[n++] = (struct option){"json", no_argument, NULL, 'j'};
        for (size_t i = 0; i < nextra && n < 15; i++)
                longs[n++] = extra[i];
        longs[n] = (struct option){0};
        optind = 1;
        opterr = 0;
        int c;
        while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
                if (c == 'j') {
                        *json = true;
                        continue;
                }
                if (c == '?' || c == ':') {
                        const char *bad = argv[optind - 1];
                        if (optopt && c == ':')
                                return cli_usage(v, "option '%s' needs a value", bad);
                        return cli_usage(v, "unknown option '%s'", bad);
                }
                int r = opt ? opt(c, optarg, ctx) : EXIT_USAGE;
                if (r)
                        return r;
        }
        return EXIT_OK;
}

/* ---- validate --------------------------------------------------------------------------- */

/* "1 node", "2 nodes", "3 switches". */
static const char *count(uint32_t n, const char *noun, char *buf)
{
        size_t l = strlen(noun);
        const char *plural =
            n == 1 ? "" : (l && (noun[l - 1] == 'h' || noun[l - 1] == 's') ? "es" : "s");
        snprintf(buf, 48, "%u %s%s", n, noun, plural);
        return buf;
}

static int run_validate(int argc, char **argv)
{
        const struct verb *v = find_verb("validate");
        bool json = false;
        int r = parse(v, argc, argv, NULL, 0, &json, NULL, NULL);
        if (r)
                return r;
        if (optind >= argc)
                return cli_usage(v, "no file given");
        struct json_object *files = json_object_new_array();
        int status = EXIT_OK;
        char cn[5][48];
        for (int i = optind; i < argc; i++) {
                struct ntbf_diags d;
                ntbf_diags_init(&d);
                struct ntbf_topo *t = NULL;
                struct ntbf_state *s = NULL;
                int lr = ntbf_config_load(argv[i], &t, &d);
                if (!lr)
                        lr = ntbf_state_new(t, &s, &d);
                ntbf_diags_sort(&d);
                if (lr)
                        status = EXIT_FAIL;
                if (json) {
                        struct json_object *f = json_object_new_object(),
                                           *ds = json_object_new_array();
                        json_object_object_add(f, "file", json_str(argv[i]));
                        json_object_object_add(f, "valid", json_object_new_boolean(!lr));
                        json_object_object_add(f, "errors", json_u64(d.errors));
                        json_object_object_add(f, "warnings",
                                               json_u64(d.n - (d.errors < d.n ? d.errors : d.n)));
                        for (size_t k = 0; k < d.n; k++)
                                json_object_array_add(ds, json_diag(&d.v[k]));
                        json_object_object_add(f, "diagnostics", ds);
                        if (!lr) {
                                struct json_object *sum = json_object_new_object();
                                json_object_object_add(sum, "cluster", json_str(t->name));
                                json_object_object_add(sum, "nodes", json_u64(t->nnodes));
                                json_object_object_add(sum, "adapters", json_u64(t->nadapters));
                                json_object_object_add(sum, "switches", json_u64(t->nswitches));
                                json_object_object_add(sum, "links", json_u64(t->nlinks));
                                json_object_object_add(sum, "devices", json_u64(t->ndevices));
                                json_object_object_add(f, "summary", sum);
                        }
                        json_object_array_add(files, f);
                } else {
                        ntbf_diags_print(&d, stderr);
                        if (!lr)
                                printf("%s: valid: cluster '%s', %s, %s, %s, %s, %s\n", argv[i],
                                       t->name, count(t->nnodes, "node", cn[0]),
                                       count(t->nadapters, "adapter", cn[1]),
                                       count(t->nswitches, "switch", cn[2]),
                                       count(t->nlinks, "link", cn[3]),
                                       count(t->ndevices, "device", cn[4]));
                        else if (lr == NTBF_ECONFIG)
                                printf("%s: invalid: %zu error%s\n", argv[i], d.errors,
                                       d.errors == 1 ? "" : "s");
                        else
                                printf("%s: invalid: %s\n", argv[i], ntbf_strerror(lr));
                }
                ntbf_state_free(s);
                ntbf_topo_free(t);
                ntbf_diags_free(&d);
        }
        if (json) {
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "files", files);
                json_print(o);
        } else {
                json_object_put(files);
        }
        return status;
}

/* ---- topology --------------------------------------------------------------------------- */

static const char *xlat_name(uint32_t x)
{
        if (x == (NTBF_XLAT_OUTBOUND | NTBF_XLAT_INBOUND))
                return "both";
        return x == NTBF_XLAT_INBOUND ? "inbound" : "outbound";
}

static void port_peer(const struct ntbf_topo *t, struct ntbf_port_ref p, char *buf, size_t len)
{
        uint32_t l = ntbf_topo_port_link(t, p);
        if (l == NTBF_NONE)
                snprintf(buf, len, "-");
        else
                ntbf_port_name(t, ntbf_link_peer(&t->links[l], p), buf, len);
}

#define DRAW_PATHS_MAX 8

struct topo_opts {
        bool dot, budgets;
        const char *svg;
        const char *paths[DRAW_PATHS_MAX];
        unsigned npaths;
        bool too_many;
};

static int topo_opt(int c, const char *arg, void *ctx)
{
        struct topo_opts *o = ctx;
        if (c == 'd')
                o->dot = true;
        else if (c == 's')
                o->svg = arg;
        else if (c == 'b')
                o->budgets = true;
        else if (c == 'p' && o->npaths < DRAW_PATHS_MAX)
                o->paths[o->npaths++] = arg;
        else if (c == 'p')
                o->too_many = true;
        return EXIT_OK;
}

/* --dot / --svg: the fabric as a picture, with budgets and paths when asked. */
static int draw_topology(const struct verb *v, const struct topo_opts *o, const char *file)
{
        struct ntbf_topo *t;
        struct ntbf_state *s = NULL;
        if (cli_load(file, &t, o->budgets ? &s : NULL, false))
                return EXIT_FAIL;
        struct ntbf_path paths[DRAW_PATHS_MAX];
        int r = EXIT_OK;
        for (unsigned i = 0; i < o->npaths && !r; i++) {
                char buf[128], why[768], *colon;
                snprintf(buf, sizeof(buf), "%s", o->paths[i]);
                struct ntbf_endpoint a, b;
                if (!(colon = strchr(buf, ','))) {
                        r = cli_usage(v,
                                      "--path takes FROM,TO (two endpoints like borrower and "
                                      "lender.nvme0), not '%s'",
                                      o->paths[i]);
                        break;
                }
                *colon = 0;
                if (ntbf_endpoint_parse(t, buf, &a, why, sizeof(why)) ||
                    ntbf_endpoint_parse(t, colon + 1, &b, why, sizeof(why)) ||
                    ntbf_path_find(t, NULL, a, b, &paths[i], why, sizeof(why))) {
                        cli_error("--path %s: %s", o->paths[i], why);
                        r = EXIT_FAIL;
                }
        }
        char *text = NULL;
        size_t len = 0;
        if (!r) {
                FILE *m = open_memstream(&text, &len);
                if (!m) {
                        cli_error("out of memory");
                        r = EXIT_FAIL;
                } else {
                        draw_dot(m, t, s, paths, o->npaths);
                        fclose(m);
                }
        }
        if (!r && o->dot)
                fwrite(text, 1, len, stdout);
        char why[512];
        if (!r && o->svg && draw_svg(text, len, o->svg, why, sizeof(why))) {
                cli_error("%s", why);
                r = EXIT_FAIL;
        }
        free(text);
        ntbf_state_free(s);
        ntbf_topo_free(t);
        return r;
}

static int run_topology(int argc, char **argv)
{
        const struct verb *v = find_verb("topology");
        bool json = false;
        struct topo_opts to = {0};
        static const struct option topo_longs[] = {{"dot", no_argument, NULL, 'd'},
                                                   {"svg", required_argument, NULL, 's'},
                                                   {"budgets", no_argument, NULL, 'b'},
                                                   {"path", required_argument, NULL, 'p'}};
        int r = parse(v, argc, argv, topo_longs, 4, &json, topo_opt, &to);
        if (r)
                return r;
        if (optind + 1 != argc)
                return cli_usage(v, optind >= argc ? "no file given" : "one file at a time");
        if (to.too_many)
                return cli_usage(v, "at most %d --path options", DRAW_PATHS_MAX);
        if ((to.budgets || to.npaths) && !to.dot && !to.svg)
                return cli_usage(v,
                                 "--budgets and --path draw on a picture: add --dot or --svg FILE");
        if (json && (to.dot || to.svg))
                return cli_usage(v, "--json and a picture exclude each other");
        if (to.dot || to.svg)
                return draw_topology(v, &to, argv[optind]);
        struct ntbf_topo *t;
        if (cli_load(argv[optind], &t, NULL, false))
                return EXIT_FAIL;
        char a[64], b[64], c[96];
        if (json) {
                struct json_object *o = json_object_new_object(), *cl = json_object_new_object();
                json_object_object_add(cl, "name", json_str(t->name));
                json_object_object_add(cl, "backend", json_str(t->backend));
                json_object_object_add(o, "cluster", cl);
                struct json_object *ns = json_object_new_array();
                for (uint32_t i = 0; i < t->nnodes; i++) {
                        const struct ntbf_node *n = &t->nodes[i];
                        struct json_object *j = json_object_new_object();
                        json_object_object_add(j, "name", json_str(n->name));
                        json_object_object_add(j, "id", json_u64(n->id));
                        json_object_object_add(j, "address", json_str(n->address));
                        json_object_object_add(j, "ram", json_u64(n->ram));
                        json_object_object_add(j, "iommu", json_object_new_boolean(n->iommu));
                        json_object_object_add(j, "cpu_rids", json_u64(n->cpu_rids));
                        json_object_object_add(j, "root_ns", json_u64(n->root_ns));
                        json_object_array_add(ns, j);
                }
                json_object_object_add(o, "nodes", ns);
                struct json_object *cs = json_object_new_array();
                for (uint32_t i = 0; i < t->nchassis; i++) {
                        const struct ntbf_chassis *ch = &t->chassis[i];
                        struct json_object *j = json_object_new_object(),
                                           *devs = json_object_new_array();
                        json_object_object_add(j, "node", json_str(t->nodes[ch->node].name));
                        json_object_object_add(j, "name", json_str(ch->name));
                        json_object_object_add(j, "hop_ns", json_u64(ch->hop_ns));
                        json_object_object_add(j, "uplink_ns", json_u64(ch->uplink_ns));
                        for (uint32_t k = 0; k < t->ndevices; k++)
                                if (t->devices[k].chassis == i)
                                        json_object_array_add(devs, json_str(t->devices[k].name));
                        json_object_object_add(j, "devices", devs);
                        json_object_array_add(cs, j);
                }
                json_object_object_add(o, "chassis", cs);
                struct json_object *as = json_object_new_array();
                for (uint32_t i = 0; i < t->nadapters; i++) {
                        const struct ntbf_adapter *ad = &t->adapters[i];
                        struct json_object *j = json_object_new_object(),
                                           *ports = json_object_new_array();
                        json_object_object_add(j, "node", json_str(t->nodes[ad->node].name));
                        json_object_object_add(j, "name", json_str(ad->name));
                        json_object_object_add(j, "model", json_str(ad->p.model));
                        /* Window 0 in the single-window keys' terms, then every window. */
                        const struct ntbf_window *w0 = ad->nwin ? &ad->win[0] : NULL;
                        json_object_object_add(j, "window_base", json_u64(ad->window_base));
                        json_object_object_add(j, "window", json_u64(w0 ? w0->size : 0));
                        json_object_object_add(j, "lut_entries", json_u64(w0 ? w0->slots : 0));
                        json_object_object_add(j, "lut_entry_size", json_u64(ad->lut_entry_size));
                        json_object_object_add(j, "slots", json_u64(ad->nslots));
                        struct json_object *ws = json_object_new_array();
                        for (uint32_t w = 0; w < ad->nwin; w++) {
                                const struct ntbf_window *x = &ad->win[w];
                                struct json_object *wj = json_object_new_object();
                                json_object_object_add(wj, "base", json_u64(x->base));
                                json_object_object_add(wj, "size", json_u64(x->size));
                                json_object_object_add(wj, "bar", json_u64(ad->win_bar[w]));
                                json_object_object_add(wj, "first_slot", json_u64(x->first_slot));
                                json_object_object_add(wj, "slots", json_u64(x->slots));
                                json_object_object_add(wj, "slot_size", json_u64(x->slot_size));
                                json_object_object_add(wj, "reserved", json_u64(x->reserved));
                                json_object_object_add(wj, "addr_align", json_u64(x->addr_align));
                                json_object_object_add(
                                    wj, "natural_align",
                                    json_object_new_boolean(x->flags & NTBF_WIN_NATURAL_ALIGN));
                                json_object_object_add(wj, "size_align", json_u64(x->size_align));
                                json_object_object_add(wj, "size_max", json_u64(x->size_max));
                                json_object_array_add(ws, wj);
                        }
                        json_object_object_add(j, "windows", ws);
                        json_object_object_add(j, "rid_table", json_u64(ad->p.rid_table));
                        json_object_object_add(j, "rid_reserved", json_u64(ad->p.rid_reserved));
                        json_object_object_add(j, "rid_proxy",
                                               json_object_new_boolean(ad->p.rid_proxy));
                        json_object_object_add(j, "rid_mask",
                                               json_str(ntbf_rid_mask_name(ad->p.rid_mask)));
                        json_object_object_add(j, "addr_bits", json_u64(ad->p.addr_bits));
                        json_object_object_add(j, "doorbells", json_u64(ad->p.doorbells));
                        json_object_object_add(j, "scratchpads", json_u64(ad->p.scratchpads));
                        json_object_object_add(j, "dma_channels", json_u64(ad->p.dma_channels));
                        json_object_object_add(j, "hop_ns", json_u64(ad->p.hop_ns));
                        json_object_object_add(j, "xlat", json_str(xlat_name(ad->p.xlat)));
                        for (uint32_t p = 0; p < ad->p.ports; p++) {
                                struct json_object *pj = json_object_new_object();
                                struct ntbf_port_ref ref = {NTBF_PORT_ADAPTER, i, p};
                                port_peer(t, ref, a, sizeof(a));
                                json_object_object_add(pj, "port", json_u64(p));
                                json_object_object_add(pj, "peer",
                                                       strcmp(a, "-") ? json_str(a) : NULL);
                                json_object_array_add(ports, pj);
                        }
                        json_object_object_add(j, "ports", ports);
                        json_object_array_add(as, j);
                }
                json_object_object_add(o, "adapters", as);
                struct json_object *ss = json_object_new_array();
                for (uint32_t i = 0; i < t->nswitches; i++) {
                        const struct ntbf_switch *s = &t->switches[i];
                        struct json_object *j = json_object_new_object();
                        uint32_t used = 0;
                        for (uint32_t p = 0; p < s->p.ports; p++)
                                used += s->link[p] != NTBF_NONE;
                        json_object_object_add(j, "name", json_str(s->name));
                        json_object_object_add(j, "model", json_str(s->p.model));
                        json_object_object_add(j, "ports", json_u64(s->p.ports));
                        json_object_object_add(j, "ports_used", json_u64(used));
                        json_object_object_add(j, "rid_table", json_u64(s->p.rid_table));
                        json_object_object_add(j, "mcast_groups", json_u64(s->p.mcast_groups));
                        json_object_object_add(j, "hop_ns", json_u64(s->p.hop_ns));
                        json_object_array_add(ss, j);
                }
                json_object_object_add(o, "switches", ss);
                struct json_object *ls = json_object_new_array();
                for (uint32_t i = 0; i < t->nlinks; i++) {
                        struct json_object *j = json_object_new_object(),
                                           *ends = json_object_new_array();
                        json_object_array_add(
                            ends, json_str(ntbf_port_name(t, t->links[i].end[0], a, sizeof(a))));
                        json_object_array_add(
                            ends, json_str(ntbf_port_name(t, t->links[i].end[1], b, sizeof(b))));
                        json_object_object_add(j, "ends", ends);
                        json_object_object_add(j, "latency_ns", json_u64(t->links[i].latency_ns));
                        json_object_array_add(ls, j);
                }
                json_object_object_add(o, "links", ls);
                struct json_object *ds = json_object_new_array();
                for (uint32_t i = 0; i < t->ndevices; i++) {
                        const struct ntbf_device *d = &t->devices[i];
                        struct json_object *j = json_object_new_object(),
                                           *bars = json_object_new_array();
                        json_object_object_add(j, "node", json_str(t->nodes[d->node].name));
                        json_object_object_add(j, "name", json_str(d->name));
                        json_object_object_add(
                            j, "bdf",
                            json_str(ntbf_bdf_fmt(d->domain, d->bus, d->dev, d->fn, a, sizeof(a))));
                        json_object_object_add(j, "class", json_u64(d->class_code));
                        json_object_object_add(j, "vendor", json_u64(d->vendor_id));
                        json_object_object_add(j, "device", json_u64(d->device_id));
                        json_object_object_add(j, "functions", json_u64(d->functions));
                        json_object_object_add(j, "vfs", json_u64(d->vfs));
                        json_object_object_add(j, "dma_bits", json_u64(d->dma_bits));
                        json_object_object_add(j, "hop_ns", json_u64(d->hop_ns));
                        json_object_object_add(j, "chassis",
                                               d->chassis < t->nchassis
                                                   ? json_str(t->chassis[d->chassis].name)
                                                   : NULL);
                        json_object_object_add(j, "lend", json_object_new_boolean(d->lend));
                        json_object_object_add(j, "sim",
                                               d->sim.model == NTBF_SIM_NVME    ? json_str("nvme")
                                               : d->sim.model == NTBF_SIM_ACCEL ? json_str("accel")
                                                                                : NULL);
                        for (int k = 0; k < NTBF_MAX_BARS; k++) {
                                if (!d->bars[k].size)
                                        continue;
                                struct json_object *bj = json_object_new_object();
                                json_object_object_add(bj, "bar", json_u64((uint64_t)k));
                                json_object_object_add(bj, "size", json_u64(d->bars[k].size));
                                json_object_object_add(bj, "address", json_u64(d->bars[k].addr));
                                json_object_object_add(
                                    bj, "prefetchable",
                                    json_object_new_boolean(d->bars[k].flags & NTBF_BAR_PREF));
                                json_object_object_add(
                                    bj, "bits", json_u64(d->bars[k].flags & NTBF_BAR_64 ? 64 : 32));
                                json_object_array_add(bars, bj);
                        }
                        json_object_object_add(j, "bars", bars);
                        json_object_array_add(ds, j);
                }
                json_object_object_add(o, "devices", ds);
                json_print(o);
                ntbf_topo_free(t);
                return EXIT_OK;
        }

        printf("cluster %s (backend %s)\n\nnodes\n", t->name, t->backend);
        static const char *const nh[] = {"node",  "id",       "address", "ram",
                                         "iommu", "adapters", "devices"};
        struct table tb;
        table_init(&tb, nh, 7);
        table_right(&tb, 1);
        table_right(&tb, 3);
        for (uint32_t i = 0; i < t->nnodes; i++) {
                const struct ntbf_node *n = &t->nodes[i];
                table_cell(&tb, "%s", n->name);
                table_cell(&tb, "%u", n->id);
                table_cell(&tb, "%s", n->address);
                table_cell(&tb, "%s", fmt_size(n->ram, a, sizeof(a)));
                table_cell(&tb, "%s", n->iommu ? "on" : "off");
                table_cell(&tb, "%u", n->nadapters);
                table_cell(&tb, "%u", n->ndevices);
        }
        table_print(&tb, stdout, 2);
        table_free(&tb);

        printf("\nadapters\n");
        static const char *const ah[] = {"adapter", "model",     "window", "at",
                                         "LUT",     "RID table", "hop",    "ports -> peer"};
        table_init(&tb, ah, 8);
        table_right(&tb, 2);
        table_right(&tb, 6);
        for (uint32_t i = 0; i < t->nadapters; i++) {
                const struct ntbf_adapter *ad = &t->adapters[i];
                table_cell(&tb, "%s.%s", t->nodes[ad->node].name, ad->name);
                table_cell(&tb, "%s", ad->p.model);
                uint64_t bytes = 0;
                size_t lo = 0;
                c[0] = 0;
                for (uint32_t w = 0; w < ad->nwin && lo < sizeof(c); w++) {
                        bytes += ad->win[w].size;
                        int k = snprintf(c + lo, sizeof(c) - lo, "%s%u x %s", w ? " + " : "",
                                         ad->win[w].slots,
                                         fmt_size(ad->win[w].slot_size, b, sizeof(b)));
                        lo += k > 0 ? (size_t)k : 0;
                }
                table_cell(&tb, "%s", fmt_size(bytes, a, sizeof(a)));
                table_cell(&tb, "0x%" PRIx64, ad->window_base);
                table_cell(&tb, "%s", c);
                if (ad->p.rid_table)
                        table_cell(&tb, "%u (%u CPU)", ad->p.rid_table, ad->p.rid_reserved);
                else
                        table_cell(&tb, "none");
                table_cell(&tb, "%u ns", ad->p.hop_ns);
                size_t used = 0;
                c[0] = 0;
                for (uint32_t p = 0; p < ad->p.ports; p++) {
                        struct ntbf_port_ref ref = {NTBF_PORT_ADAPTER, i, p};
                        port_peer(t, ref, a, sizeof(a));
                        int w = snprintf(c + used, sizeof(c) - used, "%s%u:%s", p ? " " : "", p, a);
                        if (w > 0 && (size_t)w < sizeof(c) - used)
                                used += (size_t)w;
                }
                table_cell(&tb, "%s", c);
        }
        table_print(&tb, stdout, 2);
        table_free(&tb);

        if (t->nswitches) {
                printf("\nswitches\n");
                static const char *const sh[] = {"switch",   "model",        "ports used",
                                                 "RID/port", "mcast groups", "hop"};
                table_init(&tb, sh, 6);
                table_right(&tb, 2);
                table_right(&tb, 3);
                table_right(&tb, 4);
                table_right(&tb, 5);
                for (uint32_t i = 0; i < t->nswitches; i++) {
                        const struct ntbf_switch *s = &t->switches[i];
                        uint32_t used = 0;
                        for (uint32_t p = 0; p < s->p.ports; p++)
                                used += s->link[p] != NTBF_NONE;
                        table_cell(&tb, "%s", s->name);
                        table_cell(&tb, "%s", s->p.model);
                        table_cell(&tb, "%u/%u", used, s->p.ports);
                        table_cell(&tb, "%u", s->p.rid_table);
                        table_cell(&tb, "%u", s->p.mcast_groups);
                        table_cell(&tb, "%u ns", s->p.hop_ns);
                }
                table_print(&tb, stdout, 2);
                table_free(&tb);
        }

        printf("\nlinks\n");
        static const char *const lh[] = {"end", "end", "latency"};
        table_init(&tb, lh, 3);
        table_right(&tb, 2);
        for (uint32_t i = 0; i < t->nlinks; i++) {
                table_cell(&tb, "%s", ntbf_port_name(t, t->links[i].end[0], a, sizeof(a)));
                table_cell(&tb, "%s", ntbf_port_name(t, t->links[i].end[1], b, sizeof(b)));
                table_cell(&tb, "%u ns", t->links[i].latency_ns);
        }
        table_print(&tb, stdout, 2);
        table_free(&tb);

        bool any_root = false;
        for (uint32_t i = 0; i < t->nnodes; i++)
                any_root |= t->nodes[i].root_ns != 0;
        if (t->nchassis || any_root) {
                /* Latencies inside hosts: what peer-to-peer and RAM access cost there. */
                printf("\nroot complexes and expansion chassis\n");
                static const char *const ch[] = {"where", "hop", "uplink", "devices"};
                table_init(&tb, ch, 4);
                table_right(&tb, 1);
                table_right(&tb, 2);
                for (uint32_t i = 0; i < t->nnodes; i++) {
                        table_cell(&tb, "%s (root complex)", t->nodes[i].name);
                        table_cell(&tb, "%u ns", t->nodes[i].root_ns);
                        table_cell(&tb, "-");
                        table_cell(&tb, "-");
                }
                for (uint32_t i = 0; i < t->nchassis; i++) {
                        const struct ntbf_chassis *x = &t->chassis[i];
                        size_t used = 0;
                        c[0] = 0;
                        for (uint32_t k = 0; k < t->ndevices; k++) {
                                if (t->devices[k].chassis != i)
                                        continue;
                                int w = snprintf(c + used, sizeof(c) - used, "%s%s",
                                                 used ? " " : "", t->devices[k].name);
                                if (w > 0 && (size_t)w < sizeof(c) - used)
                                        used += (size_t)w;
                        }
                        table_cell(&tb, "%s.%s", t->nodes[x->node].name, x->name);
                        table_cell(&tb, "%u ns", x->hop_ns);
                        table_cell(&tb, "%u ns", x->uplink_ns);
                        table_cell(&tb, "%s", used ? c : "-");
                }
                table_print(&tb, stdout, 2);
                table_free(&tb);
        }

        if (t->ndevices) {
                printf("\ndevices\n");
                static const char *const dh[] = {"device", "bdf",       "class", "vendor:device",
                                                 "BARs",   "functions", "lend"};
                table_init(&tb, dh, 7);
                for (uint32_t i = 0; i < t->ndevices; i++) {
                        const struct ntbf_device *d = &t->devices[i];
                        table_cell(&tb, "%s.%s", t->nodes[d->node].name, d->name);
                        table_cell(&tb, "%s",
                                   ntbf_bdf_fmt(d->domain, d->bus, d->dev, d->fn, a, sizeof(a)));
                        table_cell(&tb, "%06x", d->class_code);
                        table_cell(&tb, "%04x:%04x", d->vendor_id, d->device_id);
                        size_t used = 0;
                        c[0] = 0;
                        for (int k = 0; k < NTBF_MAX_BARS; k++) {
                                if (!d->bars[k].size)
                                        continue;
                                int w = snprintf(c + used, sizeof(c) - used, "%s%d:%s@0x%" PRIx64,
                                                 used ? " " : "", k,
                                                 fmt_size(d->bars[k].size, b, sizeof(b)),
                                                 d->bars[k].addr);
                                if (w > 0 && (size_t)w < sizeof(c) - used)
                                        used += (size_t)w;
                        }
                        table_cell(&tb, "%s", used ? c : "-");
                        if (d->vfs)
                                table_cell(&tb, "%u + %u VFs", d->functions, d->vfs);
                        else
                                table_cell(&tb, "%u", d->functions);
                        table_cell(&tb, "%s", d->lend ? "yes" : "no");
                }
                table_print(&tb, stdout, 2);
                table_free(&tb);
        }
        ntbf_topo_free(t);
        return EXIT_OK;
}

/* ---- path ------------------------------------------------------------------------------- */

struct path_opts {
        unsigned disjoint;
};

static int path_opt(int c, const char *arg, void *ctx)
{
        struct path_opts *o = ctx;
        if (c == 'k') {
                uint64_t v;
                if (ntbf_uint_parse(arg, &v) || v < 1 || v > 16) {
                        cli_usage(find_verb("path"),
                                  "--disjoint takes a count from 1 to 16, "
                                  "not '%s'",
                                  arg);
                        return EXIT_USAGE;
                }
                o->disjoint = (unsigned)v;
        }
        return EXIT_OK;
}

static int run_path(int argc, char **argv)
{
        const struct verb *v = find_verb("path");
        bool json = false;
        struct path_opts po = {0};
        static const struct option lo[] = {{"disjoint", required_argument, NULL, 'k'}};
        int r = parse(v, argc, argv, lo, 1, &json, path_opt, &po);
        if (r)
                return r;
        if (argc - optind != 3)
                return cli_usage(v, "expected FILE FROM TO");
        struct ntbf_topo *t;
        if (cli_load(argv[optind], &t, NULL, false))
                return EXIT_FAIL;
        struct ntbf_endpoint ea, eb;
        char why[768];
        for (int k = 0; k < 2; k++) {
                if (ntbf_endpoint_parse(t, argv[optind + 1 + k], k ? &eb : &ea, why, sizeof(why))) {
                        cli_error("%s", why);
                        ntbf_topo_free(t);
                        return EXIT_FAIL;
                }
        }
        unsigned k = po.disjoint ? po.disjoint : 1, found = 0;
        struct ntbf_path *paths = calloc(k, sizeof(*paths));
        if (!paths) {
                cli_error("out of memory");
                ntbf_topo_free(t);
                return EXIT_FAIL;
        }
        why[0] = 0;
        if (po.disjoint) {
                r = ntbf_path_disjoint(t, NULL, ea, eb, k, paths, &found, why, sizeof(why));
        } else {
                r = ntbf_path_find(t, NULL, ea, eb, paths, why, sizeof(why));
                found = r ? 0 : 1;
        }
        if (json) {
                struct json_object *o = json_object_new_object(), *ps = json_object_new_array();
                char name[160];
                json_object_object_add(o, "from",
                                       json_str(ntbf_endpoint_name(t, ea, name, sizeof(name))));
                json_object_object_add(o, "to",
                                       json_str(ntbf_endpoint_name(t, eb, name, sizeof(name))));
                for (unsigned i = 0; i < found; i++)
                        json_object_array_add(ps, json_path(t, &paths[i]));
                json_object_object_add(o, "paths", ps);
                json_object_object_add(o, "error", r ? json_str(why) : NULL);
                json_print(o);
        } else {
                for (unsigned i = 0; i < found; i++) {
                        char x[160], y[160];
                        if (po.disjoint)
                                printf("%spath %u of %u (link-disjoint): %s -> %s\n", i ? "\n" : "",
                                       i + 1, found, ntbf_endpoint_name(t, ea, x, sizeof(x)),
                                       ntbf_endpoint_name(t, eb, y, sizeof(y)));
                        else
                                printf("path %s -> %s\n", ntbf_endpoint_name(t, ea, x, sizeof(x)),
                                       ntbf_endpoint_name(t, eb, y, sizeof(y)));
                        print_path(t, &paths[i], 2);
                }
                if (r)
                        cli_error("%s", why);
        }
        free(paths);
        ntbf_topo_free(t);
        return r ? EXIT_FAIL : EXIT_OK;
}

/* ---- budget ----------------------------------------------------------------------------- */

struct budget_opts {
        const char *node;
};

static int budget_opt(int c, const char *arg, void *ctx)
{
        struct budget_opts *o = ctx;
        if (c == 'n')
                o->node = arg;
        return EXIT_OK;
}

static void row_object(const struct ntbf_topo *t, const struct ntbf_budget_row *row, char *buf,
                       size_t len)
{
        if (row->kind == NTBF_BUDGET_SWITCH_RID || row->kind == NTBF_BUDGET_MCAST)
                snprintf(buf, len, "%s", t->switches[row->obj].name);
        else if (row->kind == NTBF_BUDGET_RANGE)
                snprintf(buf, len, "%s", t->nodes[row->obj].name);
        else
                snprintf(buf, len, "%s.%s", t->nodes[t->adapters[row->obj].node].name,
                         t->adapters[row->obj].name);
}

/* Whether a switch is part of the node's fabric: one of its adapters is cabled to it. */
static bool node_uses_switch(const struct ntbf_topo *t, uint32_t node, uint32_t sw)
{
        const struct ntbf_switch *s = &t->switches[sw];
        for (uint32_t p = 0; p < s->p.ports; p++) {
                uint32_t l = s->link[p];
                if (l == NTBF_NONE)
                        continue;
                struct ntbf_port_ref o =
                    ntbf_link_peer(&t->links[l], (struct ntbf_port_ref){NTBF_PORT_SWITCH, sw, p});
                if (o.kind == NTBF_PORT_ADAPTER && t->adapters[o.obj].node == node)
                        return true;
        }
        return false;
}

static int run_budget(int argc, char **argv)
{
        const struct verb *v = find_verb("budget");
        bool json = false;
        struct budget_opts bo = {0};
        static const struct option lo[] = {{"node", required_argument, NULL, 'n'}};
        int r = parse(v, argc, argv, lo, 1, &json, budget_opt, &bo);
        if (r)
                return r;
        if (optind + 1 != argc)
                return cli_usage(v, optind >= argc ? "no file given" : "one file at a time");
        struct ntbf_topo *t;
        struct ntbf_state *s;
        if (cli_load(argv[optind], &t, &s, false))
                return EXIT_FAIL;
        uint32_t node = NTBF_NONE;
        if (bo.node) {
                struct ntbf_endpoint e;
                char why[256];
                if (ntbf_endpoint_parse(t, bo.node, &e, why, sizeof(why)) ||
                    e.kind != NTBF_EP_CPU) {
                        cli_error("%s", ntbf_endpoint_parse(t, bo.node, &e, why, sizeof(why))
                                            ? why
                                            : "--node takes a node name");
                        ntbf_state_free(s);
                        ntbf_topo_free(t);
                        return EXIT_FAIL;
                }
                node = e.node;
        }
        size_t n = ntbf_budget_rows(s, NULL, 0);
        struct ntbf_budget_row *rows = calloc(n ? n : 1, sizeof(*rows));
        if (!rows) {
                cli_error("out of memory");
                return EXIT_FAIL;
        }
        ntbf_budget_rows(s, rows, n);
        struct json_object *jr = json_object_new_array();
        static const char *const hdr[] = {"object", "budget", "used", "total", "at start", "free"};
        struct table tb;
        table_init(&tb, hdr, 6);
        for (unsigned c = 2; c < 6; c++)
                table_right(&tb, c);
        for (size_t i = 0; i < n; i++) {
                const struct ntbf_budget_row *row = &rows[i];
                bool sw = row->kind == NTBF_BUDGET_SWITCH_RID || row->kind == NTBF_BUDGET_MCAST;
                bool nd = row->kind == NTBF_BUDGET_RANGE;
                if (node != NTBF_NONE && (sw   ? !node_uses_switch(t, node, row->obj)
                                          : nd ? row->obj != node
                                               : t->adapters[row->obj].node != node))
                        continue;
                char obj[96], u[32], tot[32], base[32], fr[32];
                row_object(t, row, obj, sizeof(obj));
                uint64_t free_ = row->total > row->used ? row->total - row->used : 0;
                if (json) {
                        struct json_object *j = json_object_new_object();
                        json_object_object_add(j, "object", json_str(obj));
                        json_object_object_add(j, "kind",
                                               json_str(sw   ? "switch"
                                                        : nd ? "node"
                                                             : "adapter"));
                        json_object_object_add(j, "budget",
                                               json_str(ntbf_budget_kind_name(row->kind)));
                        json_object_object_add(j, "used", json_u64(row->used));
                        json_object_object_add(j, "total", json_u64(row->total));
                        json_object_object_add(j, "baseline", json_u64(row->baseline));
                        json_object_object_add(j, "free", json_u64(free_));
                        json_object_array_add(jr, j);
                        continue;
                }
                if (row->kind == NTBF_BUDGET_WINDOW) {
                        fmt_size(row->used, u, sizeof(u));
                        fmt_size(row->total, tot, sizeof(tot));
                        fmt_size(row->baseline, base, sizeof(base));
                        fmt_size(free_, fr, sizeof(fr));
                } else if (nd) {
                        /* An address space, not a table: its size is not a round number. */
                        fmt_size_approx(row->used, u, sizeof(u));
                        fmt_size_approx(row->total, tot, sizeof(tot));
                        fmt_size_approx(row->baseline, base, sizeof(base));
                        fmt_size_approx(free_, fr, sizeof(fr));
                } else {
                        snprintf(u, sizeof(u), "%" PRIu64, row->used);
                        snprintf(tot, sizeof(tot), "%" PRIu64, row->total);
                        snprintf(base, sizeof(base), "%" PRIu64, row->baseline);
                        snprintf(fr, sizeof(fr), "%" PRIu64, free_);
                }
                table_cell(&tb, "%s", obj);
                table_cell(&tb, "%s%s", ntbf_budget_kind_name(row->kind),
                           row->kind == NTBF_BUDGET_SWITCH_RID ? " (each port)"
                           : nd ? (t->nodes[row->obj].iommu ? " (IOVA)" : " (RAM pool)")
                                : "");
                table_cell(&tb, "%s", u);
                table_cell(&tb, "%s", tot);
                table_cell(&tb, "%s", base);
                table_cell(&tb, "%s", fr);
        }
        if (json) {
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "cluster", json_str(t->name));
                json_object_object_add(o, "node", bo.node ? json_str(bo.node) : NULL);
                json_object_object_add(o, "rows", jr);
                json_print(o);
        } else {
                json_object_put(jr);
                printf("budgets of cluster %s%s%s (at start: taken by the hosts' CPUs and the "
                       "slots the hardware keeps)\n",
                       t->name, bo.node ? " seen from node " : "", bo.node ? bo.node : "");
                table_print(&tb, stdout, 2);
        }
        table_free(&tb);
        free(rows);
        ntbf_state_free(s);
        ntbf_topo_free(t);
        return EXIT_OK;
}

/* ---- plan ------------------------------------------------------------------------------- */

struct plan_opts {
        const char *borrow, *by;
        uint64_t dma_window;
        unsigned count;
        bool shared;
};

static int plan_opt(int c, const char *arg, void *ctx)
{
        struct plan_opts *o = ctx;
        const struct verb *v = find_verb("plan");
        const char *why = NULL;
        uint64_t x;
        switch (c) {
        case 'b':
                o->borrow = arg;
                break;
        case 'y':
                o->by = arg;
                break;
        case 'w':
                if (ntbf_size_parse(arg, &o->dma_window, &why) || !o->dma_window)
                        return cli_usage(v, "--dma-window '%s': %s", arg,
                                         why ? why : "must not be 0");
                break;
        case 'c':
                if (ntbf_uint_parse(arg, &x) || x < 1 || x > 4096)
                        return cli_usage(v, "--count takes a number from 1 to 4096, not '%s'", arg);
                o->count = (unsigned)x;
                break;
        case 's':
                o->shared = true;
                break;
        case 'e':
                o->shared = false;
                break;
        }
        return EXIT_OK;
}

static const char *res_object(const struct ntbf_topo *t, const struct ntbf_res *r, char *buf,
                              size_t len)
{
        switch (r->kind) {
        case NTBF_RES_LUT:
        case NTBF_RES_RID:
                snprintf(buf, len, "%s.%s", t->nodes[t->adapters[r->obj].node].name,
                         t->adapters[r->obj].name);
                break;
        case NTBF_RES_SWITCH_RID:
        case NTBF_RES_MCAST:
                snprintf(buf, len, "%s", t->switches[r->obj].name);
                break;
        case NTBF_RES_RANGE:
                snprintf(buf, len, "%s", t->nodes[r->obj].name);
                break;
        }
        return buf;
}

static const char *req_name(const struct ntbf_topo *t, const struct ntbf_requester *q, char *buf,
                            size_t len)
{
        if (q->device == NTBF_NONE)
                snprintf(buf, len, "%s CPU", t->nodes[q->node].name);
        else
                snprintf(buf, len, "%s.%s", t->nodes[q->node].name, t->devices[q->device].name);
        return buf;
}

static void res_detail(const struct ntbf_topo *t, const struct ntbf_res *r, char *buf, size_t len)
{
        char a[48], b[48];
        switch (r->kind) {
        case NTBF_RES_LUT: {
                const char *dest = r->dest == NTBF_DEST_MCAST  ? "multicast group"
                                   : r->dest == NTBF_DEST_IOVA ? "IOVA"
                                   : r->dest == NTBF_DEST_MSI  ? "MSI range"
                                                               : "address";
                if (r->dest == NTBF_DEST_MCAST)
                        snprintf(buf, len, "slots %u-%u (%s at 0x%" PRIx64 ") -> %s %u", r->first,
                                 r->first + r->count - 1, fmt_size(r->size, a, sizeof(a)), r->addr,
                                 dest, r->group);
                else
                        snprintf(buf, len,
                                 "slot%s %u%s%s (%s at 0x%" PRIx64 ") -> %s %s 0x%" PRIx64,
                                 r->count > 1 ? "s" : "", r->first, r->count > 1 ? "-" : "",
                                 r->count > 1
                                     ? (snprintf(b, sizeof(b), "%u", r->first + r->count - 1), b)
                                     : "",
                                 fmt_size(r->size, a, sizeof(a)), r->addr,
                                 t->nodes[r->dst_node].name, dest, r->dst_addr);
                break;
        }
        case NTBF_RES_RID:
        case NTBF_RES_SWITCH_RID:
                snprintf(buf, len, "requester %s", req_name(t, &r->req, a, sizeof(a)));
                break;
        case NTBF_RES_MCAST:
                snprintf(buf, len, "group %u", r->group);
                break;
        case NTBF_RES_RANGE:
                snprintf(buf, len, "%s at 0x%" PRIx64 "%s", fmt_size(r->size, a, sizeof(a)),
                         r->addr, t->nodes[r->obj].iommu ? " (IOVA)" : " (RAM)");
                break;
        }
}

static struct json_object *json_plan(const struct ntbf_topo *t, const struct ntbf_plan *p)
{
        struct json_object *o = json_object_new_object();
        char a[160];
        json_object_object_add(o, "admitted", json_object_new_boolean(p->result == 0));
        if (p->result) {
                struct json_object *rf = json_object_new_object();
                json_object_object_add(rf, "error", json_str(ntbf_err_name(p->result)));
                if (p->result == NTBF_ENOSPC_BUDGET || p->result == NTBF_EADDRLIMIT) {
                        json_object_object_add(rf, "budget",
                                               json_str(ntbf_budget_kind_name(p->refused_kind)));
                        bool sw = p->refused_kind == NTBF_BUDGET_SWITCH_RID ||
                                  p->refused_kind == NTBF_BUDGET_MCAST;
                        if (p->refused_obj != NTBF_NONE) {
                                if (sw)
                                        snprintf(a, sizeof(a), "%s",
                                                 t->switches[p->refused_obj].name);
                                else
                                        snprintf(a, sizeof(a), "%s.%s",
                                                 t->nodes[t->adapters[p->refused_obj].node].name,
                                                 t->adapters[p->refused_obj].name);
                                json_object_object_add(rf, "object", json_str(a));
                        }
                        json_object_object_add(rf, "used", json_u64(p->refused_used));
                        json_object_object_add(rf, "total", json_u64(p->refused_total));
                        json_object_object_add(rf, "need", json_u64(p->refused_need));
                }
                json_object_object_add(rf, "message", json_str(p->why));
                json_object_object_add(o, "refusal", rf);
                return o;
        }
        json_object_object_add(o, "refusal", NULL);
        json_object_object_add(o, "path", json_path(t, &p->path));
        if (p->req.kind == NTBF_REQ_BORROW)
                json_object_object_add(o, "dma_path", json_path(t, &p->dma_path));
        struct json_object *rs = json_object_new_array();
        for (uint32_t i = 0; i < p->nres; i++) {
                const struct ntbf_res *r = &p->res[i];
                struct json_object *j = json_object_new_object();
                json_object_object_add(j, "kind", json_str(ntbf_res_kind_name(r->kind)));
                json_object_object_add(j, "object", json_str(res_object(t, r, a, sizeof(a))));
                json_object_object_add(j, "shared", json_object_new_boolean(r->shared));
                json_object_object_add(j, "for", json_str(r->what));
                if (r->kind == NTBF_RES_LUT) {
                        json_object_object_add(j, "first_slot", json_u64(r->first));
                        json_object_object_add(j, "slots", json_u64(r->count));
                        json_object_object_add(j, "window_address", json_u64(r->addr));
                        json_object_object_add(j, "bytes", json_u64(r->size));
                        json_object_object_add(j, "dst_node",
                                               r->dest == NTBF_DEST_MCAST
                                                   ? NULL
                                                   : json_str(t->nodes[r->dst_node].name));
                        json_object_object_add(j, "dst_address", json_u64(r->dst_addr));
                        json_object_object_add(j, "programmed_by",
                                               json_str(t->nodes[r->programmer].name));
                } else if (r->kind == NTBF_RES_RID || r->kind == NTBF_RES_SWITCH_RID) {
                        json_object_object_add(j, "requester",
                                               json_str(req_name(t, &r->req, a, sizeof(a))));
                } else if (r->kind == NTBF_RES_RANGE) {
                        json_object_object_add(j, "address", json_u64(r->addr));
                        json_object_object_add(j, "bytes", json_u64(r->size));
                } else if (r->kind == NTBF_RES_MCAST) {
                        json_object_object_add(j, "group", json_u64(r->group));
                }
                json_object_array_add(rs, j);
        }
        json_object_object_add(o, "resources", rs);
        struct json_object *ad = json_object_new_object(), *bars = json_object_new_array();
        for (int k = 0; k < NTBF_MAX_BARS; k++) {
                if (!p->bar_addr[k])
                        continue;
                struct json_object *b = json_object_new_object();
                json_object_object_add(b, "bar", json_u64((uint64_t)k));
                json_object_object_add(b, "address", json_u64(p->bar_addr[k]));
                json_object_array_add(bars, b);
        }
        json_object_object_add(ad, "bars", bars);
        json_object_object_add(ad, "dma_window", json_u64(p->dma_addr));
        json_object_object_add(ad, "dma_iova", json_u64(p->dma_iova));
        json_object_object_add(ad, "msi", json_u64(p->msi_addr));
        json_object_object_add(o, "addresses", ad);
        return o;
}

static void print_plan(const struct ntbf_topo *t, const struct ntbf_plan *p)
{
        if (p->result) {
                printf("refused: %s\n", p->why);
                return;
        }
        printf("admitted\n\npath (borrower CPU to device)\n");
        print_path(t, &p->path, 2);
        if (p->req.kind == NTBF_REQ_BORROW) {
                printf("\nDMA path (device to borrower memory)\n");
                print_path(t, &p->dma_path, 2);
        }
        printf("\nresources it takes\n");
        static const char *const hdr[] = {"object", "resource", "new", "for", "detail"};
        struct table tb;
        table_init(&tb, hdr, 5);
        for (uint32_t i = 0; i < p->nres; i++) {
                const struct ntbf_res *r = &p->res[i];
                char obj[96], det[256];
                res_detail(t, r, det, sizeof(det));
                table_cell(&tb, "%s", res_object(t, r, obj, sizeof(obj)));
                table_cell(&tb, "%s", ntbf_res_kind_name(r->kind));
                table_cell(&tb, "%s", r->shared ? "shared" : "yes");
                table_cell(&tb, "%s", r->what);
                table_cell(&tb, "%s", det);
        }
        table_print(&tb, stdout, 2);
        table_free(&tb);
        printf("\naddresses\n");
        for (int k = 0; k < NTBF_MAX_BARS; k++)
                if (p->bar_addr[k])
                        printf("  BAR%d, as the borrower's CPU sees it:  0x%" PRIx64 "\n", k,
                               p->bar_addr[k]);
        if (p->dma_addr)
                printf("  DMA window, as the device sees it:    0x%" PRIx64 "\n", p->dma_addr);
        if (p->dma_iova)
                printf("  DMA window, as the borrower IOMMU's:  0x%" PRIx64 " (IOVA)\n",
                       p->dma_iova);
        if (p->msi_addr)
                printf("  MSI window, as the device sees it:    0x%" PRIx64 "\n", p->msi_addr);
}

/*
 * For --count: a copy of the topology with count - 1 more devices like d on d's node
 * (on the next free bus numbers), so each what-if borrow needs its own resources.
 */
static struct ntbf_topo *what_if(const struct ntbf_topo *t, uint32_t d, unsigned count,
                                 uint32_t **copies, struct ntbf_diags *diags)
{
        struct ntbf_topo *c = ntbf_topo_clone(t);
        uint32_t *idx = calloc(count, sizeof(*idx));
        if (!c || !idx) {
                ntbf_topo_free(c);
                free(idx);
                return NULL;
        }
        idx[0] = d;
        uint32_t bus = t->devices[d].bus;
        for (unsigned i = 1; i < count; i++) {
                bool clash;
                do {
                        bus = (bus + 1) & 0xff;
                        clash = false;
                        for (uint32_t k = 0; k < c->ndevices; k++)
                                if (c->devices[k].node == t->devices[d].node &&
                                    c->devices[k].bus == bus)
                                        clash = true;
                } while (clash && bus != t->devices[d].bus);
                uint32_t n = ntbf_topo_add_device(c, t->devices[d].node, "x");
                if (n == NTBF_NONE || clash) {
                        ntbf_topo_free(c);
                        free(idx);
                        return NULL;
                }
                c->devices[n] = t->devices[d];
                snprintf(c->devices[n].name, sizeof(c->devices[n].name), "%.20s#%u",
                         t->devices[d].name, i + 1);
                c->devices[n].bus = (uint8_t)bus;
                idx[i] = n;
        }
        if (ntbf_topo_finalize(c, diags)) {
                ntbf_topo_free(c);
                free(idx);
                return NULL;
        }
        *copies = idx;
        return c;
}

static int run_plan(int argc, char **argv)
{
        const struct verb *v = find_verb("plan");
        bool json = false;
        struct plan_opts po = {0};
        static const struct option lo[] = {
            {"borrow", required_argument, NULL, 'b'},     {"by", required_argument, NULL, 'y'},
            {"dma-window", required_argument, NULL, 'w'}, {"count", required_argument, NULL, 'c'},
            {"shared", no_argument, NULL, 's'},           {"exclusive", no_argument, NULL, 'e'},
        };
        int r = parse(v, argc, argv, lo, 6, &json, plan_opt, &po);
        if (r)
                return r;
        if (optind + 1 != argc)
                return cli_usage(v, optind >= argc ? "no file given" : "one file at a time");
        if (!po.borrow || !po.by)
                return cli_usage(v, "--borrow NODE:DEVICE and --by NODE are required");
        char node[64];
        const char *colon = strchr(po.borrow, ':');
        if (!colon || colon == po.borrow || !colon[1] || (size_t)(colon - po.borrow) >= 64)
                return cli_usage(v, "--borrow takes NODE:DEVICE (like lender:nvme0), not '%s'",
                                 po.borrow);
        memcpy(node, po.borrow, (size_t)(colon - po.borrow));
        node[colon - po.borrow] = 0;

        struct ntbf_topo *t;
        struct ntbf_state *s;
        if (cli_load(argv[optind], &t, &s, false))
                return EXIT_FAIL;
        int status = EXIT_FAIL;
        struct ntbf_topo *wt = NULL;
        struct ntbf_state *ws = NULL;
        uint32_t *copies = NULL;
        char why[512], spec[128];
        struct ntbf_endpoint dev, by;
        snprintf(spec, sizeof(spec), "%s.%s", node, colon + 1);
        if (ntbf_endpoint_parse(t, spec, &dev, why, sizeof(why)) || dev.kind != NTBF_EP_DEVICE) {
                cli_error("--borrow %s: %s", po.borrow,
                          dev.kind != NTBF_EP_DEVICE && !why[0] ? "not a device" : why);
                goto out;
        }
        if (ntbf_endpoint_parse(t, po.by, &by, why, sizeof(why)) || by.kind != NTBF_EP_CPU) {
                cli_error("--by %s: %s", po.by, why);
                goto out;
        }
        if (by.node == dev.node) {
                cli_error("--by %s: the device is in that node already; a node borrows from "
                          "another node",
                          po.by);
                goto out;
        }
        unsigned count = po.count ? po.count : 1;
        const struct ntbf_topo *pt = t;
        struct ntbf_state *ps = s;
        if (count > 1) {
                struct ntbf_diags d;
                ntbf_diags_init(&d);
                wt = what_if(t, dev.device, count, &copies, &d);
                if (wt && ntbf_state_new(wt, &ws, &d)) {
                        ntbf_topo_free(wt);
                        wt = NULL;
                }
                if (!wt) {
                        char msg[512] = "";
                        if (d.n)
                                snprintf(msg, sizeof(msg), ": %s", d.v[0].msg);
                        cli_error("node '%s' cannot hold %u devices like %s%s", node, count, spec,
                                  msg);
                        ntbf_diags_free(&d);
                        goto out;
                }
                ntbf_diags_free(&d);
                pt = wt;
                ps = ws;
        }
        struct json_object *jplans = json_object_new_array();
        unsigned fit = 0;
        struct ntbf_plan first_refusal;
        ntbf_plan_init(&first_refusal);
        bool refused = false;
        for (unsigned i = 0; i < count; i++) {
                struct ntbf_request rq;
                ntbf_request_init(&rq, NTBF_REQ_BORROW);
                rq.device = count > 1 ? copies[i] : dev.device;
                rq.function = 0;
                rq.by = by.node;
                rq.dma_window = po.dma_window;
                rq.exclusive = !po.shared;
                struct ntbf_plan p;
                ntbf_plan_init(&p);
                ntbf_admit(ps, &rq, &p);
                if (count == 1) {
                        if (json)
                                json_object_array_add(jplans, json_plan(pt, &p));
                        else
                                print_plan(pt, &p);
                        status = p.result ? EXIT_FAIL : EXIT_OK;
                        ntbf_plan_free(&p);
                        break;
                }
                if (p.result) {
                        first_refusal = p;
                        refused = true;
                        break;
                }
                uint32_t id;
                if (ntbf_commit(ps, &p, &id)) {
                        cli_error("internal error: an admitted plan did not commit");
                        ntbf_plan_free(&p);
                        break;
                }
                fit++;
                ntbf_plan_free(&p);
        }
        if (count > 1) {
                status = refused ? EXIT_FAIL : EXIT_OK;
                if (json) {
                        struct json_object *o = json_object_new_object(),
                                           *cj = json_object_new_object();
                        json_object_object_add(cj, "requested", json_u64(count));
                        json_object_object_add(cj, "fit", json_u64(fit));
                        json_object_object_add(cj, "first_refusal",
                                               refused ? json_plan(pt, &first_refusal) : NULL);
                        json_object_object_add(o, "count", cj);
                        json_object_put(jplans);
                        jplans = NULL;
                        json_print(o);
                } else if (refused) {
                        printf("%u of %u borrows like %s by %s fit; borrow %u is refused: %s\n",
                               fit, count, spec, po.by, fit + 1, first_refusal.why);
                } else {
                        printf("all %u borrows like %s by %s fit\n", count, spec, po.by);
                }
        } else if (json) {
                struct json_object *o = json_object_array_get_idx(jplans, 0);
                json_object_get(o);
                json_object_put(jplans);
                jplans = NULL;
                json_print(o);
        }
        if (jplans)
                json_object_put(jplans);
        ntbf_plan_free(&first_refusal);
out:
        free(copies);
        ntbf_state_free(ws);
        ntbf_topo_free(wt);
        ntbf_state_free(s);
        ntbf_topo_free(t);
        return status;
}

const struct verb verbs_model[] = {
    {"validate", "[--json] FILE...", "Check cluster files and report every mistake.",
     "\nEach mistake is reported as FILE:LINE:COL: error: what is wrong; what would fix it.\n"
     "A file is valid when it parses, its objects are consistent, every node reaches every\n"
     "other node, and the CPUs' requester IDs fit every switch.\n"
     "Exit status: 0 if every file is valid, 1 if any is not, 2 on a usage error.\n",
     run_validate},
    {"topology", "[--json] [--dot | --svg SVGFILE] [--budgets] [--path FROM,TO]... FILE",
     "Show nodes, adapters, switches, links and devices.",
     "\nAddresses are those the model assigns (docs/model.md), as a BIOS would.\n"
     "  --dot           print the fabric as a Graphviz graph instead\n"
     "  --svg SVGFILE   draw it into SVGFILE (with Graphviz's dot)\n"
     "  --budgets       show each adapter's and switch's budgets (used/total) on it\n"
     "  --path FROM,TO  draw the least-latency path between two endpoints bold (up to 8)\n",
     run_topology},
    {"path", "[--json] [--disjoint K] FILE FROM TO",
     "Show the least-latency path between two endpoints.",
     "\nAn endpoint is NODE (its CPU), NODE.ram, or NODE.DEVICE.\n"
     "  --disjoint K   the K paths of least total latency that share no cable (multipath)\n"
     "Exit status 1 when there is no path (or fewer than K); the message names the gap.\n",
     run_path},
    {"budget", "[--json] [--node NODE] FILE",
     "Show every hardware budget of the fabric: used, total, taken by CPUs.",
     "\nLUT slots, window bytes and requester-ID tables of adapters; requester-ID entries\n"
     "per port and multicast groups of switches.\n"
     "  --node NODE    only the adapters of NODE and the switches it is cabled to\n",
     run_budget},
    {"plan",
     "[--json] --borrow NODE:DEVICE --by NODE [--dma-window SIZE] [--count N] "
     "[--shared|--exclusive] FILE",
     "Dry-run a borrow: what it would take on every adapter and switch, or why not.",
     "\n  --borrow NODE:DEVICE  the device to borrow (its first function)\n"
     "  --by NODE             the borrower\n"
     "  --dma-window SIZE     bytes of borrower memory the device can reach at once "
     "(default 16MiB)\n"
     "  --count N             how many such borrows fit (as if the lender had N such "
     "devices),\n"
     "                        and what runs out first\n"
     "  --shared, --exclusive recorded in the plan (default exclusive)\n"
     "Exit status 1 when the borrow (or one of --count N) is refused.\n",
     run_plan},
};
const size_t verbs_model_count = sizeof(verbs_model) / sizeof(verbs_model[0]);

static const struct verb *find_verb(const char *name)
{
        for (size_t i = 0; i < verbs_model_count; i++)
                if (!strcmp(verbs_model[i].name, name))
                        return &verbs_model[i];
        return NULL;
}
