/* tools/cmd_device.c: device verbs: lend, unlend, available, unavailable, devices, borrow, return,
 * lspci. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"
#include "ntbfab/error.h"
#include "ntbfab/units.h"

static const struct verb *find(const char *name);

/*
 * The node a verb acts for: the one named, else the node of the host's daemon the CLI talks
 * to; without either, a usage error (the cluster is closed).
 */
static const char *this_node(const struct verb *v, struct fab *f, const char *node,
                             const char *usage)
{
        if (node)
                return node;
        if (f->local != NTBF_NONE)
                return f->t->nodes[f->local].name;
        fab_close(f);
        cli_usage(v, "%s", usage);
        return NULL;
}

/* Exit status of a failed call: the message was printed. */
static int failed(struct fab *f)
{
        fab_close(f);
        return EXIT_FAIL;
}

/* ---- lend, unlend, available, unavailable -------------------------------------------------- */

struct lend_opts {
        bool force, unavailable;
};

static int lend_opt(int c, const char *arg, void *ctx)
{
        (void)arg;
        struct lend_opts *l = ctx;
        if (c == 'f')
                l->force = true;
        else if (c == 'u')
                l->unavailable = true;
        return EXIT_OK;
}

static void print_device(struct json_object *d)
{
        printf("0x%04" PRIx64 " %s.%s (%s): %s\n", ju(d, "fdid"), js(d, "node"), js(d, "name"),
               js(d, "bdf"), js(d, "state"));
}

static int lend_like(const char *verb, const char *method, int argc, char **argv)
{
        const struct verb *v = find(verb);
        struct fab_opts o = {0};
        struct lend_opts lo = {0};
        static const struct option force[] = {{"force", no_argument, NULL, 'f'}},
                                   lendopts[] = {{"unavailable", no_argument, NULL, 'u'},
                                                 {"force", no_argument, NULL, 'f'}};
        bool lend = !strcmp(verb, "lend"), unlend = !strcmp(verb, "unlend");
        int r = fab_parse(v, argc, argv, lend ? lendopts : force,
                          lend     ? 2
                          : unlend ? 1
                                   : 0,
                          &o, lend_opt, &lo);
        if (r)
                return r;
        if (optind + 2 != argc && optind + 1 != argc)
                return cli_usage(v, "give the node and the device's PCI address");
        struct fab f;
        if (fab_find(&o, &f))
                return EXIT_FAIL;
        /* On a host, BDF alone is a device of the host's own node. */
        const char *node = optind + 2 == argc ? argv[optind] : NULL, *bdf = argv[argc - 1];
        if (!(node = this_node(v, &f, node, "give the node and the device's PCI address")))
                return EXIT_USAGE;
        if (fab_node(&f, node) == NTBF_NONE) {
                fab_close(&f);
                return EXIT_USAGE;
        }
        struct json_object *p = json_object_new_object(), *res;
        json_object_object_add(p, "bdf", json_str(bdf));
        if (lend)
                json_object_object_add(p, "available", json_object_new_boolean(!lo.unavailable));
        if (lend && lo.force)
                json_object_object_add(p, "force", json_object_new_boolean(true));
        if (!strcmp(verb, "unlend"))
                json_object_object_add(p, "force", json_object_new_boolean(lo.force));
        if (fab_call(&f, node, method, p, &res))
                return failed(&f);
        if (o.json) {
                json_print(res);
        } else if (!strcmp(verb, "unlend")) {
                printf("%s %s is no longer lent\n", node, bdf);
                json_object_put(res);
        } else {
                print_device(res);
                json_object_put(res);
        }
        fab_close(&f);
        return EXIT_OK;
}

static int run_lend(int argc, char **argv)
{
        return lend_like("lend", "device.lend", argc, argv);
}

static int run_unlend(int argc, char **argv)
{
        return lend_like("unlend", "device.unlend", argc, argv);
}

static int run_available(int argc, char **argv)
{
        return lend_like("available", "device.available", argc, argv);
}

static int run_unavailable(int argc, char **argv)
{
        return lend_like("unavailable", "device.unavailable", argc, argv);
}

/* ---- devices ------------------------------------------------------------------------------- */

struct list_opts {
        const char *node, *state, *bad, *cls_text;
        uint64_t cls;
        bool has_cls;
};

static int list_opt(int c, const char *arg, void *ctx)
{
        struct list_opts *l = ctx;
        if (c == 'n')
                l->node = arg;
        else if (c == 's')
                l->state = arg;
        else if (c == 'c' && !ntbf_uint_parse(arg, &l->cls) && l->cls <= 0xffffff)
                l->has_cls = true, l->cls_text = arg;
        else if (c == 'c')
                l->bad = arg;
        return EXIT_OK;
}

/* A class filter matches the whole code (0x010802) or its base class and subclass
 * (0x0108: mass storage, NVM) or base class (0x01). */
static bool class_matches(uint64_t cls, uint64_t want, const char *text)
{
        size_t digits = strlen(text) - (strncmp(text, "0x", 2) ? 0 : 2);
        if (digits <= 2)
                return cls >> 16 == want;
        if (digits <= 4)
                return cls >> 8 == want;
        return cls == want;
}

static void device_row(struct table *tb, struct json_object *d)
{
        struct json_object *bs = jo(d, "borrowers");
        char who[256] = "";
        size_t ow = 0;
        for (size_t k = 0; bs && k < json_object_array_length(bs) && ow < sizeof(who); k++)
                ow += (size_t)snprintf(who + ow, sizeof(who) - ow, "%s%s", k ? ", " : "",
                                       json_object_get_string(json_object_array_get_idx(bs, k)));
        table_cell(tb, "0x%04" PRIx64, ju(d, "fdid"));
        table_cell(tb, "%s", js(d, "node"));
        table_cell(tb, "%s", js(d, "bdf"));
        table_cell(tb, "%s", js(d, "name"));
        table_cell(tb, "0x%06" PRIx64, ju(d, "class"));
        table_cell(tb, "%04" PRIx64 ":%04" PRIx64, ju(d, "vendor"), ju(d, "device"));
        table_cell(tb, "%s", js(d, "state"));
        table_cell(tb, "%s", who[0] ? who : "-");
}

static int run_devices(int argc, char **argv)
{
        const struct verb *v = find("devices");
        struct fab_opts o = {0};
        struct list_opts lo = {0};
        static const struct option ex[] = {{"node", required_argument, NULL, 'n'},
                                           {"class", required_argument, NULL, 'c'},
                                           {"state", required_argument, NULL, 's'}};
        int r = fab_parse(v, argc, argv, ex, 3, &o, list_opt, &lo);
        if (r)
                return r;
        static const char *const states[] = {"available", "unavailable", "exclusive", "shared",
                                             "lost",      "borrowed",    NULL};
        bool state_ok = !lo.state;
        for (size_t i = 0; lo.state && states[i]; i++)
                state_ok |= !strcmp(lo.state, states[i]);
        if (!state_ok)
                return cli_usage(v,
                                 "--state takes available, unavailable, exclusive, shared, "
                                 "borrowed (exclusive or shared) or lost, not '%s'",
                                 lo.state);
        if (lo.bad)
                return cli_usage(
                    v, "--class takes a PCI class code like 0x010802 or 0x01, not '%s'", lo.bad);
        if (optind != argc)
                return cli_usage(v, "devices takes no arguments (filter with --node, --class, "
                                    "--state)");
        struct fab f;
        if (fab_find(&o, &f))
                return EXIT_FAIL;
        if (lo.node && fab_node(&f, lo.node) == NTBF_NONE) {
                fab_close(&f);
                return EXIT_USAGE;
        }
        struct json_object *res;
        if (fab_call_any(&f, "device.list", NULL, &res))
                return failed(&f);
        struct json_object *keep = json_object_new_array();
        for (size_t i = 0; i < json_object_array_length(res); i++) {
                struct json_object *d = json_object_array_get_idx(res, i);
                const char *st = js(d, "state");
                bool borrowed = !strcmp(st, "exclusive") || !strcmp(st, "shared");
                if ((lo.node && strcmp(js(d, "node"), lo.node)) ||
                    (lo.has_cls && !class_matches(ju(d, "class"), lo.cls, lo.cls_text)) ||
                    (lo.state && strcmp(lo.state, "borrowed") && strcmp(st, lo.state)) ||
                    (lo.state && !strcmp(lo.state, "borrowed") && !borrowed))
                        continue;
                json_object_array_add(keep, json_object_get(d));
        }
        json_object_put(res);
        if (o.json) {
                struct json_object *out = json_object_new_object();
                json_object_object_add(out, "devices", keep);
                json_print(out);
                fab_close(&f);
                return EXIT_OK;
        }
        static const char *const h[] = {"fdid",  "node",          "bdf",   "name",
                                        "class", "vendor:device", "state", "borrowers"};
        struct table tb;
        table_init(&tb, h, 8);
        for (size_t i = 0; i < json_object_array_length(keep); i++)
                device_row(&tb, json_object_array_get_idx(keep, i));
        if (json_object_array_length(keep))
                table_print(&tb, stdout, 0);
        else
                printf("no device matches\n");
        table_free(&tb);
        json_object_put(keep);
        fab_close(&f);
        return EXIT_OK;
}

/* ---- borrow, return ------------------------------------------------------------------------ */

struct borrow_opts {
        const char *node;
        bool shared, exclusive, attach, detach;
        uint64_t window;
        const char *bad;
};

static int borrow_opt(int c, const char *arg, void *ctx)
{
        struct borrow_opts *b = ctx;
        switch (c) {
        case 'n':
                b->node = arg;
                break;
        case 's':
                b->shared = true;
                break;
        case 'x':
                b->exclusive = true;
                break;
        case 'a':
                b->attach = true;
                break;
        case 'R':
                b->detach = true;
                break;
        case 'w':
                if (ntbf_size_parse(arg, &b->window, NULL) || b->window < 4096)
                        b->bad = arg;
                break;
        }
        return EXIT_OK;
}

/* FDID as a number (0x4001, 16385) or NODE.DEVICE[.FUNCTION] of the cluster file. */
static int parse_fdid(const struct fab *f, const char *s, uint32_t *fdid)
{
        uint64_t v;
        if (!ntbf_uint_parse(s, &v) && v <= UINT32_MAX) {
                *fdid = (uint32_t)v;
                return 0;
        }
        char buf[96], *dot, *dot2;
        snprintf(buf, sizeof(buf), "%s", s);
        if (!(dot = strchr(buf, '.')))
                return -EINVAL;
        *dot = 0;
        uint64_t fn = 0;
        if ((dot2 = strchr(dot + 1, '.'))) {
                *dot2 = 0;
                if (ntbf_uint_parse(dot2 + 1, &fn))
                        return -EINVAL;
        }
        uint32_t n = ntbf_topo_find_node(f->t, buf);
        uint32_t d = n == NTBF_NONE ? NTBF_NONE : ntbf_topo_find_device(f->t, n, dot + 1);
        if (d == NTBF_NONE || fn >= ntbf_device_nfuncs(&f->t->devices[d]))
                return -EINVAL;
        /* The fdid rule of docs/daemon.md: node id, then the function's index in the node. */
        uint32_t index = 0;
        for (uint32_t i = 0; i < f->t->nodes[n].ndevices && f->t->nodes[n].devices[i] != d; i++)
                index += ntbf_device_nfuncs(&f->t->devices[f->t->nodes[n].devices[i]]);
        *fdid = f->t->nodes[n].id << 12 | (index + (uint32_t)fn);
        return 0;
}

static int run_return(int argc, char **argv);

/* An attached device's peer-to-peer mappings (attached.peers) and the ones refused
 * (attached.refused, with the sentence of who refused), as lspci and borrow show them. */
static void print_peers(struct json_object *att, const char *indent)
{
        struct json_object *peers = jo(att, "peers"), *refused = jo(att, "refused");
        for (size_t k = 0; peers && k < json_object_array_length(peers); k++) {
                struct json_object *pe = json_object_array_get_idx(peers, k);
                printf("%sreaches BAR%" PRIu64 " of 0x%04" PRIx64 " (0x%" PRIx64
                       " here) at device address 0x%" PRIx64 " (%s)\n",
                       indent, ju(pe, "bar"), ju(pe, "target"), ju(pe, "phys"),
                       ju(pe, "device_addr"), js(pe, "route") ? js(pe, "route") : "?");
        }
        for (size_t k = 0; refused && k < json_object_array_length(refused); k++) {
                struct json_object *pe = json_object_array_get_idx(refused, k);
                printf("%scannot reach BAR%" PRIu64 " of 0x%04" PRIx64 " peer-to-peer: %s\n",
                       indent, ju(pe, "bar"), ju(pe, "target"), js(pe, "error"));
        }
}

static int run_borrow(int argc, char **argv)
{
        const struct verb *v = find("borrow");
        struct fab_opts o = {0};
        struct borrow_opts bo = {0};
        static const struct option ex[] = {
            {"node", required_argument, NULL, 'n'}, {"shared", no_argument, NULL, 's'},
            {"exclusive", no_argument, NULL, 'x'},  {"dma-window", required_argument, NULL, 'w'},
            {"attach", no_argument, NULL, 'a'},     {"detach", no_argument, NULL, 'R'}};
        int r = fab_parse(v, argc, argv, ex, 6, &o, borrow_opt, &bo);
        if (r)
                return r;
        if (bo.detach && (bo.attach || bo.shared || bo.exclusive || bo.window))
                return cli_usage(v, "--detach takes no other borrow option");
        if (bo.detach)
                return run_return(argc, argv);
        if (bo.attach && bo.shared)
                return cli_usage(v, "--attach borrows exclusively: a kernel driver owns the "
                                    "device; drop --shared");
        if (bo.bad)
                return cli_usage(
                    v, "--dma-window takes a size of at least 4KiB, like 16MiB, not '%s'", bo.bad);
        if (bo.shared && bo.exclusive)
                return cli_usage(v, "--shared and --exclusive exclude each other");
        if (optind + 1 != argc)
                return cli_usage(v, "give one FDID (see 'ntbfab devices')");
        struct fab f;
        if (fab_find(&o, &f))
                return EXIT_FAIL;
        if (!(bo.node = this_node(v, &f, bo.node, "say which node borrows with --node NODE")))
                return EXIT_USAGE;
        uint32_t fdid;
        if (fab_node(&f, bo.node) == NTBF_NONE) {
                fab_close(&f);
                return EXIT_USAGE;
        }
        if (parse_fdid(&f, argv[optind], &fdid)) {
                fab_close(&f);
                return cli_usage(v, "'%s' is not an fdid (like 0x4001) nor NODE.DEVICE",
                                 argv[optind]);
        }
        struct json_object *p = json_object_new_object(), *res;
        json_object_object_add(p, "fdid", json_u64(fdid));
        json_object_object_add(p, "mode", json_str(bo.shared ? "shared" : "exclusive"));
        if (bo.window)
                json_object_object_add(p, "dma_window", json_u64(bo.window));
        if (bo.attach)
                json_object_object_add(p, "attach", json_object_new_boolean(true));
        if (fab_call(&f, bo.node, "device.borrow", p, &res))
                return failed(&f);
        if (o.json) {
                json_print(res);
                fab_close(&f);
                return EXIT_OK;
        }
        char a[32];
        struct json_object *dma = jo(res, "dma"), *bars = jo(res, "bars"), *path = jo(res, "path");
        printf("%s borrowed 0x%04" PRIx64 " (%s.%s %s, %s) as %s\n", bo.node, ju(res, "fdid"),
               js(res, "lender"), js(res, "name"), js(res, "lender_bdf"), js(res, "mode"),
               js(res, "local_bdf"));
        for (size_t i = 0; bars && i < json_object_array_length(bars); i++) {
                struct json_object *b = json_object_array_get_idx(bars, i);
                printf("  BAR%" PRIu64 ": %s at 0x%" PRIx64 " of %s\n", ju(b, "bar"),
                       fmt_size(ju(b, "size"), a, sizeof(a)), ju(b, "addr"), bo.node);
        }
        struct json_object *managed = jo(dma, "managed");
        if (managed && json_object_get_boolean(managed))
                printf("  DMA and interrupts: mapped by the fabric's own software as the "
                       "device uses memory (a managed fabric: no DMA window)\n");
        else
                printf("  DMA window: %s, device address 0x%" PRIx64 ", %s IOVA 0x%" PRIx64 "\n",
                       fmt_size(ju(dma, "size"), a, sizeof(a)), ju(dma, "device_addr"), bo.node,
                       ju(dma, "iova"));
        printf("  modeled latency %" PRIu64 " ns one way; lease %" PRIu64
               " ms, renewed by heartbeats\n",
               ju(path, "latency_ns"), ju(res, "lease_ms"));
        struct json_object *att = jo(res, "attached");
        if (att)
                printf("  attached to %s's kernel as PCI device %s: its driver binds to it; "
                       "'ntbfab return' detaches it\n",
                       bo.node, js(att, "pci"));
        print_peers(att, "  ");
        json_object_put(res);
        fab_close(&f);
        return EXIT_OK;
}

static int run_return(int argc, char **argv)
{
        const struct verb *v = find("return");
        struct fab_opts o = {0};
        struct borrow_opts bo = {0};
        static const struct option ex[] = {{"node", required_argument, NULL, 'n'},
                                           {"detach", no_argument, NULL, 'R'}};
        int r = fab_parse(v, argc, argv, ex, 2, &o, borrow_opt, &bo);
        if (r)
                return r;
        if (optind + 1 != argc)
                return cli_usage(v, "give one FDID");
        struct fab f;
        if (fab_find(&o, &f))
                return EXIT_FAIL;
        if (!(bo.node = this_node(v, &f, bo.node, "say which node returns it with --node NODE")))
                return EXIT_USAGE;
        uint32_t fdid;
        if (fab_node(&f, bo.node) == NTBF_NONE) {
                fab_close(&f);
                return EXIT_USAGE;
        }
        if (parse_fdid(&f, argv[optind], &fdid)) {
                fab_close(&f);
                return cli_usage(v, "'%s' is not an fdid (like 0x4001) nor NODE.DEVICE",
                                 argv[optind]);
        }
        struct json_object *p = json_object_new_object(), *res;
        json_object_object_add(p, "fdid", json_u64(fdid));
        if (fab_call(&f, bo.node, "device.return", p, &res))
                return failed(&f);
        if (o.json) {
                struct json_object *out = json_object_new_object();
                json_object_object_add(out, "fdid", json_u64(fdid));
                json_object_object_add(out, "node", json_str(bo.node));
                json_object_object_add(out, "returned", json_object_new_boolean(true));
                json_print(out);
        } else {
                printf("%s returned 0x%04x\n", bo.node, fdid);
        }
        json_object_put(res);
        fab_close(&f);
        return EXIT_OK;
}

/* ---- mdev: VM pass-through instances ------------------------------------------------------- */

struct mdev_opts {
        const char *node, *uuid;
};

static int mdev_opt(int c, const char *arg, void *ctx)
{
        struct mdev_opts *m = ctx;
        if (c == 'n')
                m->node = arg;
        else if (c == 'u')
                m->uuid = arg;
        return EXIT_OK;
}

static int run_mdev(int argc, char **argv)
{
        const struct verb *v = find("mdev");
        struct fab_opts o = {0};
        struct mdev_opts mo = {0};
        static const struct option ex[] = {{"node", required_argument, NULL, 'n'},
                                           {"uuid", required_argument, NULL, 'u'}};
        int r = fab_parse(v, argc, argv, ex, 2, &o, mdev_opt, &mo);
        if (r)
                return r;
        if (!mo.node)
                return cli_usage(v, "say whose VMs with --node NODE");
        const char *sub = optind < argc ? argv[optind] : "";
        bool list = !strcmp(sub, "list"), create = !strcmp(sub, "create"),
             remove = !strcmp(sub, "remove");
        if (!list && !create && !remove)
                return cli_usage(v, "say list, create FDID or remove UUID");
        if (optind + (list ? 1 : 2) != argc)
                return cli_usage(v, list     ? "list takes no arguments"
                                    : create ? "give one FDID"
                                             : "give one UUID (see 'ntbfab mdev list')");
        if (mo.uuid && !create)
                return cli_usage(v, "--uuid is for create");
        struct fab f;
        if (fab_find(&o, &f))
                return EXIT_FAIL;
        if (fab_node(&f, mo.node) == NTBF_NONE) {
                fab_close(&f);
                return EXIT_USAGE;
        }
        struct json_object *p = json_object_new_object(), *res;
        uint32_t fdid = 0;
        if (create && parse_fdid(&f, argv[optind + 1], &fdid)) {
                json_object_put(p);
                fab_close(&f);
                return cli_usage(v, "'%s' is not an fdid (like 0x4001) nor NODE.DEVICE",
                                 argv[optind + 1]);
        }
        if (create)
                json_object_object_add(p, "fdid", json_u64(fdid));
        if (mo.uuid)
                json_object_object_add(p, "uuid", json_str(mo.uuid));
        if (remove)
                json_object_object_add(p, "uuid", json_str(argv[optind + 1]));
        if (fab_call(&f, mo.node,
                     list     ? "mdev.list"
                     : create ? "mdev.create"
                              : "mdev.remove",
                     p, &res))
                return failed(&f);
        if (o.json) {
                json_print(json_object_get(res));
        } else if (list) {
                for (size_t i = 0; i < json_object_array_length(res); i++) {
                        struct json_object *e = json_object_array_get_idx(res, i);
                        printf("%s 0x%04" PRIx64 " %s %s\n", js(e, "uuid"), ju(e, "fdid"),
                               js(e, "state"), js(e, "sysfsdev"));
                }
        } else if (create) {
                printf("%s created instance %s of 0x%04x; give it to a VM with\n"
                       "  -device vfio-pci,sysfsdev=%s\n"
                       "(borrowed when the guest enables the device, returned when it lets go)\n",
                       mo.node, js(res, "uuid"), fdid, js(res, "sysfsdev"));
        } else {
                printf("%s removed instance %s\n", mo.node, argv[optind + 1]);
        }
        json_object_put(res);
        fab_close(&f);
        return EXIT_OK;
}

/* ---- lspci --------------------------------------------------------------------------------- */

static int run_lspci(int argc, char **argv)
{
        const struct verb *v = find("lspci");
        struct fab_opts o = {0};
        struct borrow_opts bo = {0};
        static const struct option ex[] = {{"node", required_argument, NULL, 'n'}};
        int r = fab_parse(v, argc, argv, ex, 1, &o, borrow_opt, &bo);
        if (r)
                return r;
        if (optind != argc)
                return cli_usage(v, "lspci takes no arguments");
        struct fab f;
        if (fab_find(&o, &f))
                return EXIT_FAIL;
        if (!(bo.node = this_node(v, &f, bo.node, "say whose devices with --node NODE")))
                return EXIT_USAGE;
        if (fab_node(&f, bo.node) == NTBF_NONE) {
                fab_close(&f);
                return EXIT_USAGE;
        }
        struct json_object *res;
        if (fab_call(&f, bo.node, "device.lspci", NULL, &res))
                return failed(&f);
        if (o.json) {
                struct json_object *out = json_object_new_object();
                json_object_object_add(out, "node", json_str(bo.node));
                json_object_object_add(out, "devices", res);
                json_print(out);
                fab_close(&f);
                return EXIT_OK;
        }
        for (size_t i = 0; i < json_object_array_length(res); i++) {
                struct json_object *d = json_object_array_get_idx(res, i), *bars = jo(d, "bars");
                printf("%s %04" PRIx64 ":%04" PRIx64 " class %06" PRIx64 " %s (fdid 0x%04" PRIx64
                       ")",
                       js(d, "bdf"), ju(d, "vendor"), ju(d, "device"), ju(d, "class"),
                       js(d, "name"), ju(d, "fdid"));
                if (jb(d, "borrowed"))
                        printf(", borrowed from %s %s", js(d, "lender"), js(d, "lender_bdf"));
                printf("\n");
                for (size_t k = 0; bars && k < json_object_array_length(bars); k++) {
                        struct json_object *b = json_object_array_get_idx(bars, k);
                        char a[32];
                        printf("    BAR%" PRIu64 ": %s at 0x%" PRIx64 "\n", ju(b, "bar"),
                               fmt_size(ju(b, "size"), a, sizeof(a)), ju(b, "addr"));
                }
                struct json_object *att = jo(d, "attached");
                if (att && js(att, "pci"))
                        printf("    attached to this kernel as %s\n", js(att, "pci"));
                if (jo(d, "mdev"))
                        printf("    held for a VM by mdev instance %" PRIu64
                               " (ntbfab mdev list)\n",
                               ju(jo(d, "mdev"), "instance"));
                print_peers(att, "    ");
        }
        json_object_put(res);
        fab_close(&f);
        return EXIT_OK;
}

/* ---- device show ------------------------------------------------------------------------- */

static int run_device(int argc, char **argv)
{
        const struct verb *v = find("device");
        struct fab_opts o = {0};
        int r = fab_parse(v, argc, argv, NULL, 0, &o, NULL, NULL);
        if (r)
                return r;
        if (optind + 2 != argc || strcmp(argv[optind], "show"))
                return cli_usage(v, "write 'ntbfab device show FDID'");
        struct fab f;
        if (fab_find(&o, &f))
                return EXIT_FAIL;
        uint32_t fdid;
        if (parse_fdid(&f, argv[optind + 1], &fdid)) {
                fab_close(&f);
                return cli_usage(v, "'%s' is not an fdid (like 0x4001) nor NODE.DEVICE",
                                 argv[optind + 1]);
        }
        struct json_object *cs, *dev = NULL, *borrows = json_object_new_array();
        if (fab_call_any(&f, "cluster.status", NULL, &cs)) {
                json_object_put(borrows);
                return failed(&f);
        }
        struct json_object *devs = jo(cs, "devices"), *bor = jo(cs, "borrows");
        for (size_t i = 0; devs && i < json_object_array_length(devs); i++)
                if (ju(json_object_array_get_idx(devs, i), "fdid") == fdid)
                        dev = json_object_get(json_object_array_get_idx(devs, i));
        for (size_t i = 0; bor && i < json_object_array_length(bor); i++)
                if (ju(json_object_array_get_idx(bor, i), "fdid") == fdid)
                        json_object_array_add(borrows,
                                              json_object_get(json_object_array_get_idx(bor, i)));
        json_object_put(cs);
        if (!dev) {
                cli_error("0x%04x is not lent to the cluster (see 'ntbfab devices'; a node lends "
                          "with 'ntbfab lend')",
                          fdid);
                json_object_put(borrows);
                fab_close(&f);
                return EXIT_FAIL;
        }
        /* The model's view: where the function sits and what its BARs are. */
        uint32_t n = ntbf_topo_find_node(f.t, js(dev, "node"));
        uint32_t d = n == NTBF_NONE ? NTBF_NONE : ntbf_topo_find_device(f.t, n, js(dev, "name"));
        const struct ntbf_device *td = d == NTBF_NONE ? NULL : &f.t->devices[d];
        struct json_object *bars = json_object_new_array(), *where = jo(dev, "bars");
        uint32_t fn = (uint32_t)ju(dev, "function");
        bool hw = js(dev, "bars_from") && !strcmp(js(dev, "bars_from"), "hardware");
        for (unsigned b = 0; td && b < NTBF_MAX_BARS; b++) {
                const struct ntbf_bar *bar = &td->bars[b];
                uint64_t size = ntbf_device_bar_size(td, fn, b), addr = 0;
                if (!size)
                        continue;
                /* The manager's answer: the hardware's address of a real device's BAR. */
                for (size_t k = 0; where && k < json_object_array_length(where); k++)
                        if (ju(json_object_array_get_idx(where, k), "bar") == b)
                                addr = ju(json_object_array_get_idx(where, k), "addr");
                struct json_object *x = json_object_new_object();
                json_object_object_add(x, "bar", json_u64(b));
                json_object_object_add(x, "size", json_u64(size));
                json_object_object_add(x, "address",
                                       json_u64(addr ? addr : ntbf_device_bar_addr(td, fn, b)));
                json_object_object_add(x, "placed_by",
                                       json_object_new_string(hw ? "hardware" : "model"));
                json_object_object_add(x, "prefetchable",
                                       json_object_new_boolean(bar->flags & NTBF_BAR_PREF));
                json_object_object_add(x, "bits", json_u64(bar->flags & NTBF_BAR_64 ? 64 : 32));
                json_object_array_add(bars, x);
        }
        if (o.json) {
                struct json_object *out = json_object_new_object();
                json_object_object_add(out, "device", dev);
                json_object_object_add(out, "bars", bars);
                json_object_object_add(out, "dma_bits", td ? json_u64(td->dma_bits) : NULL);
                json_object_object_add(out, "vfio", json_object_new_boolean(td && td->vfio));
                json_object_object_add(out, "borrows", borrows);
                json_print(out);
                fab_close(&f);
                return EXIT_OK;
        }
        printf("0x%04" PRIx64 " %s.%s\n", ju(dev, "fdid"), js(dev, "node"), js(dev, "name"));
        printf("  address      %s (function %" PRIu64 ") of %s\n", js(dev, "bdf"),
               ju(dev, "function"), js(dev, "node"));
        printf("  class        0x%06" PRIx64 ", vendor:device %04" PRIx64 ":%04" PRIx64 "%s\n",
               ju(dev, "class"), ju(dev, "vendor"), ju(dev, "device"),
               td && td->vfio ? ", a real device (vfio-pci)" : "");
        printf("  state        %s%s\n", js(dev, "state"),
               jb(dev, "isolate") ? ", isolated in its own IOMMU domain while borrowed" : "");
        if (td)
                printf("  DMA          %u address bits\n", td->dma_bits);
        for (size_t i = 0; i < json_object_array_length(bars); i++) {
                struct json_object *b = json_object_array_get_idx(bars, i);
                char a[32];
                printf("  BAR%" PRIu64 "         %s at 0x%" PRIx64 " (%" PRIu64 "-bit%s%s)\n",
                       ju(b, "bar"), fmt_size(ju(b, "size"), a, sizeof(a)), ju(b, "address"),
                       ju(b, "bits"), jb(b, "prefetchable") ? ", prefetchable" : "",
                       hw ? ", where its host placed it" : "");
        }
        if (!json_object_array_length(borrows))
                printf("  borrows      none\n");
        for (size_t i = 0; i < json_object_array_length(borrows); i++) {
                struct json_object *b = json_object_array_get_idx(borrows, i);
                char a[32];
                printf("  borrowed by  %s (%s, DMA window %s, lease %" PRIu64 " ms)\n",
                       js(b, "borrower"), js(b, "mode"),
                       fmt_size(ju(b, "dma_window"), a, sizeof(a)), ju(b, "lease_ms"));
        }
        json_object_put(dev);
        json_object_put(bars);
        json_object_put(borrows);
        fab_close(&f);
        return EXIT_OK;
}

/* ---- rpc ------------------------------------------------------------------------------------ */

struct rpc_opts {
        const char *node;
};

static int rpc_opt(int c, const char *arg, void *ctx)
{
        if (c == 'n')
                ((struct rpc_opts *)ctx)->node = arg;
        return EXIT_OK;
}

/* Any method of a node's daemon, as SPDK's rpc.py does; rpc.list names them all. */
static int run_rpc(int argc, char **argv)
{
        const struct verb *v = find("rpc");
        struct fab_opts o = {0};
        struct rpc_opts ro = {0};
        static const struct option ex[] = {{"node", required_argument, NULL, 'n'}};
        int r = fab_parse(v, argc, argv, ex, 1, &o, rpc_opt, &ro);
        if (r)
                return r;
        if (optind >= argc || optind + 2 < argc)
                return cli_usage(v, "give a METHOD (see 'ntbfab rpc rpc.list') and its params as "
                                    "one JSON object");
        const char *method = argv[optind];
        struct json_object *params = NULL;
        if (optind + 1 < argc) {
                enum json_tokener_error e;
                params = json_tokener_parse_verbose(argv[optind + 1], &e);
                if (!params || !json_object_is_type(params, json_type_object)) {
                        json_object_put(params);
                        return cli_usage(
                            v,
                            "params must be one JSON object, like '{\"fdid\": 16385}'"
                            "%s%s",
                            params || e == json_tokener_success ? "" : ": ",
                            params || e == json_tokener_success ? "" : json_tokener_error_desc(e));
                }
        }
        struct fab f;
        if (fab_find(&o, &f)) {
                json_object_put(params);
                return EXIT_FAIL;
        }
        const char *node = ro.node                ? ro.node
                           : f.local != NTBF_NONE ? f.t->nodes[f.local].name
                                                  : f.t->nodes[f.manager].name;
        if (fab_node(&f, node) == NTBF_NONE) {
                json_object_put(params);
                fab_close(&f);
                return EXIT_USAGE;
        }
        struct json_object *res;
        if (fab_call(&f, node, method, params, &res))
                return failed(&f);
        if (o.json)
                puts(json_object_to_json_string_ext(res, JSON_C_TO_STRING_PLAIN |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE));
        else
                json_print(json_object_get(res));
        json_object_put(res);
        fab_close(&f);
        return EXIT_OK;
}

const struct verb verbs_device[] = {
    {"lend", "[--json] [--dir DIR] [--unavailable] [--force] NODE BDF",
     "Lend a device function of NODE to the cluster.",
     "\nRegisters the function at BDF (its address in NODE) with the fabric manager. With\n"
     "--unavailable it is registered but not borrowable yet. A real device (vfio: true in\n"
     "the cluster file) is bound to vfio-pci first; one in use by a kernel driver is refused\n"
     "unless --force, which unbinds that driver (it gets the device back when unlent).\n",
     run_lend},
    {"unlend", "[--json] [--dir DIR] [--force] NODE BDF", "Take a lent device back.",
     "\nRefused while it is borrowed, unless --force: its borrowers then lose it (they get a\n"
     "device.lost event).\n",
     run_unlend},
    {"available", "[--json] [--dir DIR] NODE BDF", "Let a lent device be borrowed again.", "",
     run_available},
    {"unavailable", "[--json] [--dir DIR] NODE BDF",
     "Stop new borrows of a lent device (current ones go on).", "", run_unavailable},
    {"devices", "[--json] [--dir DIR] [--node NODE] [--class CLASS] [--state STATE]",
     "List the lent devices of the cluster.",
     "\nfdid, node, PCI address, name, class, ids, state (available, unavailable, exclusive,\n"
     "shared, lost) and borrowers, from the fabric manager.\n"
     "  --node NODE     only NODE's devices\n"
     "  --class CLASS   only this PCI class: 0x010802 (the whole code), 0x0108 (base class\n"
     "                  and subclass), 0x01 (base class)\n"
     "  --state STATE   only devices in this state; 'borrowed' is exclusive or shared\n",
     run_devices},
    {"device", "[--json] [--dir DIR] show FDID", "Show one lent device: state, BARs, borrows.",
     "\nFDID is the fabric-wide id (0x4001) or NODE.DEVICE[.FUNCTION]. Shows its address,\n"
     "class and ids, its state, its BARs (a real device's where its host placed them), and\n"
     "who borrows it with which DMA window and lease.\n",
     run_device},
    {"rpc", "[--json] [--dir DIR] [--node NODE] METHOD [PARAMS]",
     "Call any method of a node daemon (rpc.list lists them).",
     "\nPARAMS is one JSON object. The answer's result is printed as JSON (compact with\n"
     "--json). NODE's daemon answers: by default the host's own daemon, or the fabric\n"
     "manager of a simulated cluster. 'ntbfab rpc rpc.list' lists every method with its\n"
     "parameters; through a host's daemon, another node answers the methods marked\n"
     "forwardable (docs/rpc.md).\n",
     run_rpc},
    {"borrow",
     "[--json] [--dir DIR] FDID --node NODE [--exclusive|--shared] [--dma-window SIZE] "
     "[--attach|--detach]",
     "Borrow a device for NODE.",
     "\nFDID is the fabric-wide device id (0x4001) or NODE.DEVICE[.FUNCTION].\n"
     "  --exclusive       one borrower only (default)\n"
     "  --shared          several borrowers (refused while it is borrowed exclusively)\n"
     "  --attach          hand the device to NODE's kernel as a hot-added PCI device, for its\n"
     "                    own driver (the ntbfab_shadow module; docs/kernel.md)\n"
     "  --detach          the kernel's driver lets go, then the borrow ends (as 'return')\n"
     "  --dma-window SIZE borrower memory the device reaches at once (default 16MiB)\n"
     "Prints the shadow device's PCI address and its BARs in NODE's address space.\n",
     run_borrow},
    {"return", "[--json] [--dir DIR] FDID --node NODE", "Return a borrowed device.", "",
     run_return},
    {"mdev", "[--json] [--dir DIR] --node NODE list|create FDID [--uuid UUID]|remove UUID",
     "Devices of the pool for NODE's virtual machines (mdev instances).",
     "\nNeeds the ntbfab_mdev module on NODE (docs/kernel.md). An instance borrows nothing\n"
     "until its VM's guest enables the device; it is returned when the guest lets go or the\n"
     "VM stops. Give it to QEMU with -device vfio-pci,sysfsdev=/sys/bus/mdev/devices/UUID.\n"
     "  list              the instances: UUID, fdid, state (idle, open, borrowing, borrowed,\n"
     "                    lost), sysfs path\n"
     "  create FDID       a new instance of a device of another node (--uuid: its UUID)\n"
     "  remove UUID       remove an instance no VM has open\n",
     run_mdev},
    {"lspci", "[--json] [--dir DIR] --node NODE",
     "List NODE's devices: local ones and borrowed ones at their local addresses.",
     "\nBorrowed devices appear at shadow addresses (0000:f0:..) with BARs at NODE's addresses\n"
     "(through its NTB window).\n",
     run_lspci},
};
const size_t verbs_device_count = sizeof(verbs_device) / sizeof(verbs_device[0]);

static const struct verb *find(const char *name)
{
        for (size_t i = 0; i < verbs_device_count; i++)
                if (!strcmp(verbs_device[i].name, name))
                        return &verbs_device[i];
        return NULL;
}
