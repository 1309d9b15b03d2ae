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
        if (optind + 2 != argc)
                return cli_usage(v, "give the node and the device's PCI address");
        struct fab f;
        if (fab_find(&o, &f))
                return EXIT_FAIL;
        const char *node = argv[optind], *bdf = argv[optind + 1];
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

static int run_devices(int argc, char **argv)
{
        const struct verb *v = find("devices");
        struct fab_opts o = {0};
        int r = fab_parse(v, argc, argv, NULL, 0, &o, NULL, NULL);
        if (r)
                return r;
        if (optind != argc)
                return cli_usage(v, "devices takes no arguments");
        struct fab f;
        if (fab_find(&o, &f))
                return EXIT_FAIL;
        struct json_object *res;
        if (fab_call_any(&f, "device.list", NULL, &res))
                return failed(&f);
        if (o.json) {
                struct json_object *out = json_object_new_object();
                json_object_object_add(out, "devices", res);
                json_print(out);
                fab_close(&f);
                return EXIT_OK;
        }
        static const char *const h[] = {"fdid",  "node",          "bdf",   "name",
                                        "class", "vendor:device", "state", "borrowers"};
        struct table tb;
        table_init(&tb, h, 8);
        for (size_t i = 0; i < json_object_array_length(res); i++) {
                struct json_object *d = json_object_array_get_idx(res, i), *bs = jo(d, "borrowers");
                char who[256] = "";
                size_t ow = 0;
                for (size_t k = 0; bs && k < json_object_array_length(bs) && ow < sizeof(who); k++)
                        ow += (size_t)snprintf(
                            who + ow, sizeof(who) - ow, "%s%s", k ? ", " : "",
                            json_object_get_string(json_object_array_get_idx(bs, k)));
                table_cell(&tb, "0x%04" PRIx64, ju(d, "fdid"));
                table_cell(&tb, "%s", js(d, "node"));
                table_cell(&tb, "%s", js(d, "bdf"));
                table_cell(&tb, "%s", js(d, "name"));
                table_cell(&tb, "0x%06" PRIx64, ju(d, "class"));
                table_cell(&tb, "%04" PRIx64 ":%04" PRIx64, ju(d, "vendor"), ju(d, "device"));
                table_cell(&tb, "%s", js(d, "state"));
                table_cell(&tb, "%s", who[0] ? who : "-");
        }
        table_print(&tb, stdout, 0);
        table_free(&tb);
        json_object_put(res);
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
        if (!bo.node)
                return cli_usage(v, "say which node borrows with --node NODE");
        if (optind + 1 != argc)
                return cli_usage(v, "give one FDID (see 'ntbfab devices')");
        struct fab f;
        if (fab_find(&o, &f))
                return EXIT_FAIL;
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
        if (!bo.node)
                return cli_usage(v, "say which node returns it with --node NODE");
        if (optind + 1 != argc)
                return cli_usage(v, "give one FDID");
        struct fab f;
        if (fab_find(&o, &f))
                return EXIT_FAIL;
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
        if (!bo.node)
                return cli_usage(v, "say whose devices with --node NODE");
        if (optind != argc)
                return cli_usage(v, "lspci takes no arguments");
        struct fab f;
        if (fab_find(&o, &f))
                return EXIT_FAIL;
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
        }
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
    {"devices", "[--json] [--dir DIR]", "List the lent devices of the cluster.",
     "\nfdid, node, PCI address, name, class, ids, state (available, unavailable, exclusive,\n"
     "shared, lost) and borrowers, from the fabric manager.\n",
     run_devices},
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
