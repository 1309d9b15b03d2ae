/* tools/cmd_switchtec.c: `ntbfab switchtec status|lut|rid`: what a Switchtec NT partition has
 * programmed, read from the switch's GAS (docs/switchtec.md). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "switchtec.h"

static const struct verb *self(void);

struct stx_opts {
        const char *gas, *mrpc, *cluster, *adapter;
        int partition;
        bool json;
};

/* Where the switch is: the options, or the adapter's `switchtec:` in a cluster file. */
static int locate(struct stx_opts *o, struct ntbf_topo **tp, char *gas, char *mrpc, size_t len)
{
        gas[0] = mrpc[0] = 0;
        if (o->gas)
                snprintf(gas, len, "%s", o->gas);
        if (o->mrpc)
                snprintf(mrpc, len, "%s", o->mrpc);
        if (!o->cluster)
                return EXIT_OK;
        if (cli_load(o->cluster, tp, NULL, false))
                return EXIT_FAIL;
        const struct ntbf_topo *t = *tp;
        const char *dot = strchr(o->adapter, '.');
        char node[NTBF_NAME_MAX + 1];
        snprintf(node, sizeof(node), "%.*s", dot ? (int)(dot - o->adapter) : 0, o->adapter);
        uint32_t n = dot ? ntbf_topo_find_node(t, node) : NTBF_NONE;
        uint32_t a = n == NTBF_NONE ? NTBF_NONE : ntbf_topo_find_adapter(t, n, dot + 1);
        if (a == NTBF_NONE) {
                cli_error("%s: no adapter '%s'; name it NODE.ADAPTER as in the file's links",
                          o->cluster, o->adapter);
                return EXIT_FAIL;
        }
        const struct ntbf_stx_params *s = &t->adapters[a].stx;
        if (o->partition < 0)
                o->partition = s->partition;
        if (!gas[0] && !mrpc[0]) {
                bool use_mrpc = !strcmp(s->gas, "mrpc");
                const char *file = use_mrpc ? s->device : s->gas;
                char *dst = use_mrpc ? mrpc : gas;
                struct stx_found fs;
                char why[512];
                if (file[0])
                        snprintf(dst, len, "%s", file);
                else if (stx_find_switch("", t->adapters[a].bdf, &fs, why, sizeof(why))) {
                        cli_error("%s: adapter %s: %s", o->cluster, o->adapter, why);
                        return EXIT_FAIL;
                } else
                        snprintf(dst, len, "%s", use_mrpc ? fs.device : fs.gas);
        }
        return EXIT_OK;
}

static const char *bdf(uint16_t rid, char *buf, size_t len)
{
        snprintf(buf, len, "%02x:%02x.%x", rid >> 8, rid >> 3 & 0x1f, rid & 7);
        return buf;
}

static int show_status(struct stx_dev *d, bool json)
{
        struct stx_gas *g = &d->g;
        uint64_t c = STX_CTRL((uint32_t)d->partition);
        char product[STX_SYS_PRODUCT_LEN + 1] = "", st[16], errs[1024];
        for (int i = 0; i < STX_SYS_PRODUCT_LEN; i++)
                product[i] = (char)stx_rd8(g, STX_SYS_PRODUCT_ID + (uint64_t)i);
        for (int i = STX_SYS_PRODUCT_LEN - 1; i >= 0 && (product[i] == ' ' || !product[i]); i--)
                product[i] = 0;
        uint64_t ep = stx_rd64(g, STX_NTB_EP_MAP);
        uint32_t status = stx_rd32(g, c + STX_PART_STATUS);
        bool any = stx_part_errors(g, (uint32_t)d->partition, errs, sizeof(errs));
        struct json_object *j = json ? json_object_new_object() : NULL, *bars = NULL;
        if (json) {
                json_object_object_add(j, "gas", json_str(g->path));
                json_object_object_add(j, "mrpc", json_object_new_boolean(g->mrpc));
                json_object_object_add(j, "product", json_str(product));
                json_object_object_add(j, "partition", json_u64((uint64_t)d->partition));
                json_object_object_add(j, "own_partition", json_u64(stx_rd8(g, STX_NTB_PART_ID)));
                json_object_object_add(j, "ep_map", json_u64(ep));
                json_object_object_add(j, "status", json_str(stx_status_name(status, st, 16)));
                json_object_object_add(j, "lut_entries", json_u64(d->lut_entries));
                json_object_object_add(j, "req_id_table_size", json_u64(d->rid_size));
                json_object_object_add(j, "crosslink_partition",
                                       d->xlink >= 0 ? json_u64((uint64_t)d->xlink) : NULL);
                json_object_object_add(j, "bar_error", json_u64(stx_rd32(g, c + STX_BAR_ERROR)));
                json_object_object_add(j, "lut_error", json_u64(stx_rd32(g, c + STX_LUT_ERROR)));
                json_object_object_add(j, "req_id_error", json_u64(stx_rd32(g, c + STX_RID_ERROR)));
                json_object_object_add(j, "errors", any ? json_str(errs) : NULL);
                bars = json_object_new_array();
        } else {
                printf("switch %s (%s%s), partition %d of NT partitions 0x%" PRIx64 ": %s\n",
                       product[0] ? product : "?", g->mrpc ? "MRPC " : "", g->path, d->partition,
                       ep, stx_status_name(status, st, sizeof(st)));
                printf("  LUT entries %u, requester-ID table %u", d->lut_entries, d->rid_size);
                if (d->xlink >= 0)
                        printf(", crosslink partition %d", d->xlink);
                printf("\n  errors: %s\n", any ? errs : "none");
        }
        for (uint32_t b = 0; b < 6; b++) {
                uint32_t ctl = stx_rd32(g, c + STX_BAR_CTL(b));
                if (!(ctl & STX_BAR_VALID))
                        continue;
                uint32_t n = stx_bar_lut_count(ctl);
                uint64_t lsz = n ? UINT64_C(1) << stx_bar_lut_log2(ctl) : 0;
                uint64_t dir = ctl & STX_BAR_DIR_WIN_EN
                                   ? stx_win_size(stx_rd32(g, c + STX_BAR_WIN_SIZE(b)),
                                                  stx_rd32(g, c + STX_BAR_EXT_SIZE(b)))
                                   : 0;
                uint64_t xl = stx_rd64(g, c + STX_BAR_XLATE(b));
                if (json) {
                        struct json_object *o = json_object_new_object();
                        json_object_object_add(o, "bar", json_u64(b));
                        json_object_object_add(o, "lut_count", json_u64(n));
                        json_object_object_add(o, "lut_size", json_u64(lsz));
                        json_object_object_add(o, "direct_size", json_u64(dir));
                        json_object_object_add(o, "direct_xlate", json_u64(xl));
                        json_object_array_add(bars, o);
                } else {
                        char s1[32], s2[32];
                        printf("  BAR %u: %u LUT entries of %s, direct window %s", b, n,
                               fmt_size(lsz, s1, sizeof(s1)), fmt_size(dir, s2, sizeof(s2)));
                        if (dir)
                                printf(" to 0x%" PRIx64 " in partition %" PRIu64,
                                       xl & ~UINT64_C(0xfff), xl & 0x3f);
                        printf("\n");
                }
        }
        if (json) {
                json_object_object_add(j, "bars", bars);
                json_print(j); /* and frees it */
        }
        return stx_gas_take_err(g) ? EXIT_FAIL : EXIT_OK;
}

/* Print a list view (JSON array a, or table t) and free it. */
static int finish(struct stx_dev *d, struct table *t, struct json_object *a, const char *what)
{
        if (a) {
                json_print(a); /* and frees it */
        } else if (!t->nrows) {
                printf("no %s enabled in partition %d\n", what, d->partition);
        } else {
                table_print(t, stdout, 0);
        }
        table_free(t);
        return stx_gas_take_err(&d->g) ? EXIT_FAIL : EXIT_OK;
}

static int show_lut(struct stx_dev *d, bool json)
{
        uint64_t c = STX_CTRL((uint32_t)d->partition);
        struct json_object *a = json ? json_object_new_array() : NULL;
        struct table t;
        static const char *const hdr[] = {"entry", "partition", "address"};
        table_init(&t, hdr, 3);
        table_right(&t, 0);
        for (uint32_t i = 0; i < d->lut_entries; i++) {
                uint64_t e = stx_rd64(&d->g, c + STX_LUT_ENTRY(i));
                if (!(e & STX_LUT_EN))
                        continue;
                if (json) {
                        struct json_object *o = json_object_new_object();
                        json_object_object_add(o, "entry", json_u64(i));
                        json_object_object_add(o, "partition", json_u64(stx_lut_part(e)));
                        json_object_object_add(o, "address", json_u64(stx_lut_addr(e)));
                        json_object_array_add(a, o);
                } else {
                        table_cell(&t, "%u", i);
                        table_cell(&t, "%u", stx_lut_part(e));
                        table_cell(&t, "0x%" PRIx64, stx_lut_addr(e));
                }
        }
        return finish(d, &t, a, "LUT entry");
}

static int show_rid(struct stx_dev *d, bool json)
{
        uint64_t c = STX_CTRL((uint32_t)d->partition);
        struct json_object *a = json ? json_object_new_array() : NULL;
        struct table t;
        static const char *const hdr[] = {"entry", "requester", "proxy"};
        table_init(&t, hdr, 3);
        table_right(&t, 0);
        for (uint32_t i = 0; i < d->rid_size; i++) {
                uint32_t e = stx_rd32(&d->g, c + STX_RID_ENTRY(i));
                if (!(e & STX_RID_EN))
                        continue;
                char b[16];
                uint32_t px = stx_rid_proxy(e);
                if (json) {
                        struct json_object *o = json_object_new_object();
                        json_object_object_add(o, "entry", json_u64(i));
                        json_object_object_add(o, "requester", json_str(bdf(stx_rid_of(e), b, 16)));
                        json_object_object_add(o, "proxy_devfn", json_u64(px));
                        json_object_array_add(a, o);
                } else {
                        table_cell(&t, "%u", i);
                        table_cell(&t, "%s", bdf(stx_rid_of(e), b, sizeof(b)));
                        table_cell(&t, "%02x.%x", px >> 3, px & 7);
                }
        }
        return finish(d, &t, a, "requester entry");
}

static int run_switchtec(int argc, char **argv)
{
        const struct verb *v = self();
        struct stx_opts o = {.partition = -1};
        static const struct option opts[] = {{"gas", required_argument, NULL, 'g'},
                                             {"mrpc", required_argument, NULL, 'm'},
                                             {"partition", required_argument, NULL, 'p'},
                                             {"cluster", required_argument, NULL, 'c'},
                                             {"json", no_argument, NULL, 'j'},
                                             {0, 0, 0, 0}};
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
                char *end;
                switch (c) {
                case 'g':
                        o.gas = optarg;
                        break;
                case 'm':
                        o.mrpc = optarg;
                        break;
                case 'c':
                        o.cluster = optarg;
                        break;
                case 'j':
                        o.json = true;
                        break;
                case 'p':
                        o.partition = (int)strtol(optarg, &end, 0);
                        if (*end || o.partition < 0 || o.partition >= STX_MAX_PARTS)
                                return cli_usage(v, "--partition '%s': a number 0..47", optarg);
                        break;
                default:
                        return cli_usage(v, "unknown option '%s'", argv[optind - 1]);
                }
        }
        if (optind >= argc)
                return cli_usage(v, "what to show: status, lut or rid");
        const char *what = argv[optind++];
        int (*show)(struct stx_dev *, bool) = !strcmp(what, "status") ? show_status
                                              : !strcmp(what, "lut")  ? show_lut
                                              : !strcmp(what, "rid")  ? show_rid
                                                                      : NULL;
        if (!show)
                return cli_usage(v, "unknown switchtec view '%s'; use status, lut or rid", what);
        if (o.cluster && optind < argc)
                o.adapter = argv[optind++];
        if (optind != argc)
                return cli_usage(v, "unexpected argument '%s'", argv[optind]);
        if (o.cluster && !o.adapter)
                return cli_usage(v, "-c needs the adapter: NODE.ADAPTER");
        if (!o.cluster && !!o.gas == !!o.mrpc)
                return cli_usage(v, "say where the switch is: --gas FILE or --mrpc DEVICE (or "
                                    "-c CLUSTER NODE.ADAPTER)");
        char gas[256], mrpc[256], why[512]; /* as long as stx_found's paths */
        struct ntbf_topo *t = NULL;
        int r = locate(&o, &t, gas, mrpc, sizeof(gas));
        if (t)
                ntbf_topo_free(t);
        if (r)
                return r;
        struct stx_dev d;
        struct stx_dev_cfg cfg = {
            .gas = gas[0] ? gas : NULL, .mrpc = mrpc[0] ? mrpc : NULL, .partition = o.partition};
        if (stx_dev_open(&d, &cfg, why, sizeof(why))) {
                cli_error("%s", why);
                return EXIT_FAIL;
        }
        r = show(&d, o.json);
        if (r)
                cli_error("%s: reading the switch failed part way (MRPC); what was shown is not "
                          "all of it",
                          d.g.path);
        stx_dev_close(&d);
        return r;
}

const struct verb verbs_switchtec[] = {
    {"switchtec",
     "status|lut|rid (--gas FILE | --mrpc DEVICE | -c CLUSTER NODE.ADAPTER) "
     "[--partition N] [--json]",
     "show what a Switchtec NT partition has programmed, read from the switch",
     "\nReads the switch's register space (GAS): through a mapping of the management function's\n"
     "BAR0 (--gas, sysfs resource0) or the management device's MRPC (--mrpc /dev/switchtecN),\n"
     "or where the adapter's `switchtec:` in a cluster file says (-c; without gas there, the\n"
     "switch in /sys/class/switchtec that owns the adapter's bdf).\n\n"
     "  status  the partition's status, tables' sizes, error registers as sentences, BAR setup\n"
     "  lut     the enabled LUT entries: destination partition and address\n"
     "  rid     the enabled requester-ID entries and the proxy devfn the switch gave each\n\n"
     "  --partition N  the NT partition (default: the adapter's, or the GAS's own)\n"
     "  --json         machine-readable output\n\n"
     "Needs root on real hardware. docs/switchtec.md.\n",
     run_switchtec},
};
const size_t verbs_switchtec_count = sizeof(verbs_switchtec) / sizeof(verbs_switchtec[0]);

static const struct verb *self(void)
{
        return &verbs_switchtec[0];
}
