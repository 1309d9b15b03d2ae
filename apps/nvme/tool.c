/* apps/nvme/tool.c: ntbfab-nvme, the distributed NVMe driver's manager and clients as one tool. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "ntbf_nvme_sisci.h"
#include "ntbf_nvme_work.h"
#include "ntbfab/units.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

static const char usage_text[] =
    "usage: ntbfab-nvme VERB [OPTIONS]\n"
    "\n"
    "The distributed NVMe driver (docs/nvme.md): one manager owns a controller's admin queues;\n"
    "clients on any host own I/O queue pairs and do I/O with no other process involved.\n"
    "\n"
    "verbs:\n"
    "  manager    borrow the controller, reset it, serve clients' admin requests\n"
    "  identify   Identify Controller and Namespace through the manager\n"
    "  read       read blocks (hexdump, or --output FILE)\n"
    "  write      write blocks with a verifiable pattern\n"
    "  verify     read blocks and check the pattern\n"
    "  bench      a workload: IOPS, bandwidth, latency percentiles and histogram\n"
    "  listen     join a multicast group and wait for what the controller sends to it\n"
    "\n"
    "common options:\n"
    "  --fdid FDID          the controller (default: the first NVMe in the pool)\n"
    "  --dir DIR, --node N  the cluster and node (else NTBFAB_DIR, NTBFAB_NODE)\n"
    "  --adapter A[,B]      local adapter(s); a second one keeps a backup queue pair on it\n"
    "  --manager NODEID     where the manager runs (default: the controller's host)\n"
    "  --json               one JSON document on stdout\n"
    "  --timeout DURATION   a command not complete by then has failed (default 2s)\n"
    "  --nap DURATION       sleep when a poll finds nothing (default: spin, as the article)\n"
    "  --together N         start I/O once N queue pairs were in use at once (a barrier)\n"
    "\n"
    "placement (clients):\n"
    "  --sq-placement P     hints (default: near the device), host, lender, device-memory\n"
    "  --cq-placement P     hints (default: near this host), host, lender, device-memory\n"
    "  --data P             host (default) or device-memory\n"
    "  --devmem FDID        the accelerator whose memory device-memory means\n"
    "  --entries N          queue entries (default 64)\n"
    "\n"
    "manager:   [--entries N] [--lease DURATION] [--max-qp-per-client N] [--time DURATION]\n"
    "identify:  [--multicast GROUP]\n"
    "read:      --lba L --blocks N [--output FILE]\n"
    "write:     --lba L --blocks N [--seed S] [--gen G] [--bs SIZE] [--qd N] [--random]\n"
    "           [--log FILE]\n"
    "verify:    --lba L --blocks N [--seed S] [--gen G] [--bs SIZE] [--qd N] [--random]\n"
    "bench:     [--rw randread|randwrite|randrw|read|write|rw] [--mix READ%] [--bs SIZE]\n"
    "           [--qd N] [--time DURATION | --ios N] [--lba L] [--blocks N] [--seed S]\n"
    "           [--histogram]\n"
    "listen:    --group GROUP [--size SIZE] [--timeout DURATION]\n"
    "\n"
    "exit status: 0 success, 1 failure, 2 usage error\n";

struct opts {
        const char *verb;
        uint32_t fdid;
        struct ntbf_nvmx_client_opts c;
        bool json, histogram, have_lba;
        uint64_t lba, blocks, seed, ios, time_ns, lease_ns, timeout_ns, nap_ns;
        uint32_t gen, bs, qd, mix, max_qp, group, mgr_entries, together;
        uint64_t size;
        const char *rw, *output, *log;
        bool multicast;
        bool random; /* write, verify: the range's commands in a random order (seeded) */
};

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
        (void)sig;
        stop_flag = 1;
}

static void err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void err(const char *fmt, ...)
{
        char line[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        /* One write: processes of a test share one terminal or file. */
        fprintf(stderr, "ntbfab-nvme: error: %s\n", line);
}

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "ntbfab-nvme: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "; see 'ntbfab-nvme --help'\n");
        va_end(ap);
        return EXIT_USAGE;
}

/* "10s", "500ms", "2m": a duration with a unit. */
static int parse_duration(const char *s, uint64_t *ns)
{
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s || v < 0)
                return -1;
        double mul = !strcmp(end, "ns")   ? 1
                     : !strcmp(end, "us") ? 1e3
                     : !strcmp(end, "ms") ? 1e6
                     : !strcmp(end, "s")  ? 1e9
                     : !strcmp(end, "m")  ? 60e9
                                          : -1;
        if (mul < 0)
                return -1;
        *ns = (uint64_t)(v * mul);
        return 0;
}

static int parse_where(const char *s, enum ntbf_nvmx_where *w)
{
        static const struct {
                const char *name;
                enum ntbf_nvmx_where w;
        } t[] = {{"hints", NTBF_NVMX_HINTS},
                 {"host", NTBF_NVMX_HOST},
                 {"lender", NTBF_NVMX_LENDER},
                 {"device-memory", NTBF_NVMX_DEVMEM},
                 {"devmem", NTBF_NVMX_DEVMEM}};
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
                if (!strcmp(s, t[i].name)) {
                        *w = t[i].w;
                        return 0;
                }
        return -1;
}

static int num(const char *opt, const char *s, uint64_t *v)
{
        if (ntbf_uint_parse(s, v))
                return usage("%s takes a number, not '%s'", opt, s);
        return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
        enum {
                O_FDID = 256,
                O_DIR,
                O_NODE,
                O_ADAPTER,
                O_MANAGER,
                O_JSON,
                O_SQ,
                O_CQ,
                O_DATA,
                O_DEVMEM,
                O_ENTRIES,
                O_LEASE,
                O_MAXQP,
                O_TIME,
                O_MCAST,
                O_LBA,
                O_BLOCKS,
                O_OUTPUT,
                O_SEED,
                O_GEN,
                O_BS,
                O_QD,
                O_LOG,
                O_RW,
                O_MIX,
                O_IOS,
                O_HIST,
                O_GROUP,
                O_SIZE,
                O_TIMEOUT,
                O_NAP,
                O_TOGETHER,
                O_RANDOM,
                O_HELP
        };
        static const struct option lo[] = {{"fdid", 1, 0, O_FDID},
                                           {"dir", 1, 0, O_DIR},
                                           {"node", 1, 0, O_NODE},
                                           {"adapter", 1, 0, O_ADAPTER},
                                           {"manager", 1, 0, O_MANAGER},
                                           {"json", 0, 0, O_JSON},
                                           {"sq-placement", 1, 0, O_SQ},
                                           {"cq-placement", 1, 0, O_CQ},
                                           {"data", 1, 0, O_DATA},
                                           {"devmem", 1, 0, O_DEVMEM},
                                           {"entries", 1, 0, O_ENTRIES},
                                           {"lease", 1, 0, O_LEASE},
                                           {"max-qp-per-client", 1, 0, O_MAXQP},
                                           {"time", 1, 0, O_TIME},
                                           {"multicast", 1, 0, O_MCAST},
                                           {"lba", 1, 0, O_LBA},
                                           {"blocks", 1, 0, O_BLOCKS},
                                           {"output", 1, 0, O_OUTPUT},
                                           {"seed", 1, 0, O_SEED},
                                           {"gen", 1, 0, O_GEN},
                                           {"bs", 1, 0, O_BS},
                                           {"qd", 1, 0, O_QD},
                                           {"log", 1, 0, O_LOG},
                                           {"rw", 1, 0, O_RW},
                                           {"mix", 1, 0, O_MIX},
                                           {"ios", 1, 0, O_IOS},
                                           {"histogram", 0, 0, O_HIST},
                                           {"group", 1, 0, O_GROUP},
                                           {"size", 1, 0, O_SIZE},
                                           {"nap", 1, 0, O_NAP},
                                           {"together", 1, 0, O_TOGETHER},
                                           {"random", 0, 0, O_RANDOM},
                                           {"timeout", 1, 0, O_TIMEOUT},
                                           {"help", 0, 0, O_HELP},
                                           {0, 0, 0, 0}};
        uint64_t v;
        const char *why;
        optind = 2;
        opterr = 0; /* unknown options are said once, below */
        int c;
        while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
                switch (c) {
                case 'h':
                case O_HELP:
                        fputs(usage_text, stdout);
                        exit(EXIT_OK);
                case O_FDID:
                        if (num("--fdid", optarg, &v) || !v || v > UINT32_MAX)
                                return usage("--fdid takes a fabric device id like 0x4000");
                        o->c.fdid = (uint32_t)v;
                        break;
                case O_DIR:
                        setenv("NTBFAB_DIR", optarg, 1);
                        break;
                case O_NODE:
                        setenv("NTBFAB_NODE", optarg, 1);
                        break;
                case O_ADAPTER: {
                        char *end;
                        unsigned long a = strtoul(optarg, &end, 0);
                        o->c.adapters[0] = (unsigned)a;
                        o->c.npaths = 1;
                        if (*end == ',') {
                                o->c.adapters[1] = (unsigned)strtoul(end + 1, &end, 0);
                                o->c.npaths = 2;
                        }
                        if (*end || a > 63)
                                return usage("--adapter takes A or A,B (adapter numbers)");
                        break;
                }
                case O_MANAGER:
                        if (num("--manager", optarg, &v))
                                return EXIT_USAGE;
                        o->c.manager_id = (uint32_t)v;
                        break;
                case O_JSON:
                        o->json = true;
                        break;
                case O_SQ:
                case O_CQ:
                case O_DATA:
                        if (parse_where(optarg, c == O_SQ   ? &o->c.sq_where
                                                : c == O_CQ ? &o->c.cq_where
                                                            : &o->c.data_where))
                                return usage("placement '%s' is none of hints, host, lender, "
                                             "device-memory",
                                             optarg);
                        break;
                case O_DEVMEM:
                        if (num("--devmem", optarg, &v))
                                return EXIT_USAGE;
                        o->c.devmem_fdid = (uint32_t)v;
                        break;
                case O_ENTRIES:
                        if (num("--entries", optarg, &v) || v < 2 || v > 4096)
                                return usage("--entries takes 2..4096");
                        o->c.entries = o->mgr_entries = (uint32_t)v;
                        break;
                case O_LEASE:
                case O_TIME:
                case O_TIMEOUT:
                case O_NAP:
                        if (parse_duration(optarg, &v))
                                return usage("'%s' is not a duration like 10s or 500ms", optarg);
                        *(c == O_LEASE     ? &o->lease_ns
                          : c == O_TIME    ? &o->time_ns
                          : c == O_TIMEOUT ? &o->timeout_ns
                                           : &o->nap_ns) = v;
                        break;
                case O_MAXQP:
                        if (num("--max-qp-per-client", optarg, &v) || !v || v > 16)
                                return usage("--max-qp-per-client takes 1..16");
                        o->max_qp = (uint32_t)v;
                        break;
                case O_MCAST:
                case O_GROUP:
                        if (num(c == O_MCAST ? "--multicast" : "--group", optarg, &v) ||
                            v > UINT32_MAX)
                                return EXIT_USAGE;
                        o->group = (uint32_t)v;
                        o->multicast = true;
                        break;
                case O_LBA:
                        if (num("--lba", optarg, &o->lba))
                                return EXIT_USAGE;
                        o->have_lba = true;
                        break;
                case O_BLOCKS:
                        if (num("--blocks", optarg, &o->blocks))
                                return EXIT_USAGE;
                        break;
                case O_OUTPUT:
                        o->output = optarg;
                        break;
                case O_LOG:
                        o->log = optarg;
                        break;
                case O_SEED:
                        if (num("--seed", optarg, &o->seed))
                                return EXIT_USAGE;
                        break;
                case O_GEN:
                        if (num("--gen", optarg, &v) || v > UINT32_MAX)
                                return EXIT_USAGE;
                        o->gen = (uint32_t)v;
                        break;
                case O_BS:
                case O_SIZE:
                        if (ntbf_size_parse(optarg, &v, &why))
                                return usage("'%s' is not a size: %s", optarg, why);
                        if (c == O_BS) {
                                if (!v || v > (1u << 24))
                                        return usage("--bs is 1 byte to 16 MiB");
                                o->bs = (uint32_t)v;
                        } else {
                                o->size = v;
                        }
                        break;
                case O_QD:
                        if (num("--qd", optarg, &v) || !v || v > 4095)
                                return usage("--qd takes 1..4095");
                        o->qd = (uint32_t)v;
                        break;
                case O_RW:
                        o->rw = optarg;
                        break;
                case O_TOGETHER:
                        if (num("--together", optarg, &v) || !v || v > 65535)
                                return usage("--together takes a number of queue pairs");
                        o->together = (uint32_t)v;
                        break;
                case O_MIX:
                        if (num("--mix", optarg, &v) || v > 100)
                                return usage("--mix takes the read percentage, 0..100");
                        o->mix = (uint32_t)v;
                        break;
                case O_IOS:
                        if (num("--ios", optarg, &o->ios))
                                return EXIT_USAGE;
                        break;
                case O_HIST:
                        o->histogram = true;
                        break;
                case O_RANDOM:
                        o->random = true;
                        break;
                default:
                        return usage("unknown option '%s' for %s", argv[optind - 1], o->verb);
                }
        }
        if (optind < argc)
                return usage("unexpected argument '%s'", argv[optind]);
        if (o->random && strcmp(o->verb, "write") && strcmp(o->verb, "verify"))
                return usage("--random is an option of write and verify (bench: --rw randread "
                             "and the like)");
        return 0;
}

static void jput(struct json_object *o, const char *k, struct json_object *v)
{
        json_object_object_add(o, k, v);
}

static struct json_object *ju(uint64_t v)
{
        return json_object_new_int64((int64_t)v);
}

static void jprint(struct json_object *o)
{
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
}

/* ---- manager -------------------------------------------------------------------------------- */

static void manager_log(void *arg, const char *msg)
{
        const struct opts *o = arg;
        if (o->json) {
                struct json_object *j = json_object_new_object();
                jput(j, "event", json_object_new_string("log"));
                jput(j, "message", json_object_new_string(msg));
                puts(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
                json_object_put(j);
        } else {
                printf("manager: %s\n", msg);
        }
        fflush(stdout);
}

static int run_manager(struct opts *o)
{
        static struct ntbf_nvmx x;
        if (ntbf_nvmx_init(&x)) {
                err("%s", x.why);
                return EXIT_FAIL;
        }
        uint32_t fdid = o->c.fdid ? o->c.fdid : ntbf_nvmx_find_nvme(&x);
        int ret = EXIT_FAIL;
        struct ntbf_nvme_ctrl c = {0};
        struct ntbf_nvmx_mem admin = {0};
        struct ntbf_nvmx_mbox mb = {0};
        struct ntbf_nvms_manager m = {0};
        bool m_up = false;
        if (!fdid)
                goto fail;
        /* Article 6.1: take the device exclusively to reset it, then let the others in. */
        if (ntbf_nvmx_borrow(&x, fdid, true, o->c.adapters, 1))
                goto fail;
        int r = ntbf_nvme_ctrl_open(&c, x.path[0].bar0, x.path[0].size);
        if (r) {
                snprintf(x.why, sizeof(x.why), "BAR0 of %s reads all ones", x.name);
                goto fail;
        }
        uint32_t entries = o->mgr_entries ? o->mgr_entries : 32;
        if (ntbf_nvmx_alloc(&x, ntbf_nvme_admin_bytes(entries), NTBF_NVMX_HOST, 0, NULL, &admin))
                goto fail;
        /* A reset waits for the controller (up to its CAP.TO): say so on a terminal. */
        bool tty = !o->json && isatty(STDOUT_FILENO);
        if (tty) {
                printf("resetting %s: waiting for the controller to be ready", x.name);
                fflush(stdout);
        }
        r = ntbf_nvme_ctrl_reset(&c, &admin.m, entries);
        if (tty) {
                printf("\r\033[K");
                fflush(stdout);
        }
        if (r) {
                snprintf(x.why, sizeof(x.why), "resetting %s: %s", x.name, ntbf_nvme_strstatus(r));
                goto fail;
        }
        if (ntbf_nvmx_release_exclusive(&x))
                goto fail;
        if (ntbf_nvmx_mbox_create(&x, ntbf_nvms_mbox_bytes(c.io_queues), &mb))
                goto fail;
        uint64_t lease = o->lease_ns ? o->lease_ns : UINT64_C(10000000000);
        r = ntbf_nvms_manager_init(&m, &c, (void *)mb.va[0], mb.size, fdid,
                                   (uint32_t)(lease / 1000000), o->max_qp);
        if (r) {
                snprintf(x.why, sizeof(x.why), "the mailbox: %s", strerror(-r));
                goto fail;
        }
        m_up = true;
        m.log = manager_log;
        m.log_arg = o;
        if (o->json) {
                struct json_object *j = json_object_new_object();
                jput(j, "event", json_object_new_string("ready"));
                jput(j, "fdid", ju(fdid));
                jput(j, "device", json_object_new_string(x.name));
                jput(j, "node", ju(x.node_id));
                jput(j, "io_queues", ju(c.io_queues));
                jput(j, "mailbox_segment", ju(NTBF_NVMS_SEGID(fdid)));
                jput(j, "model", json_object_new_string(c.id.mn));
                jput(j, "serial", json_object_new_string(c.id.sn));
                jput(j, "blocks", ju(c.ns.nsze));
                jput(j, "block_size", ju(1u << c.ns.lba_shift));
                puts(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
                json_object_put(j);
        } else {
                printf("manager ready: %s (fdid 0x%x) reset by node %u: %s, serial %s, "
                       "firmware %s; %u I/O queue pairs for clients; %" PRIu64
                       " blocks of %u bytes; mailbox segment 0x%x, lease %" PRIu64 " ms\n",
                       x.name, fdid, x.node_id, c.id.mn, c.id.sn, c.id.fr, c.io_queues, c.ns.nsze,
                       1u << c.ns.lba_shift, NTBF_NVMS_SEGID(fdid), lease / 1000000);
        }
        fflush(stdout);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        uint64_t t0 = ntbf_nvme_now_ns(), last_work = t0;
        while (!stop_flag && (!o->time_ns || ntbf_nvme_now_ns() - t0 < o->time_ns)) {
                uint64_t now = ntbf_nvme_now_ns();
                if (ntbf_nvms_manager_step(&m, now))
                        last_work = now;
                /* Spin a little after work (a client's next request follows), then nap: 200 us at
                 * first, 1 ms after 10 ms of nothing, so an idle manager costs little CPU and a
                 * request waits at most that long. */
                if (now - last_work > 200000) {
                        struct timespec ts = {0, now - last_work > 10000000 ? 1000000 : 200000};
                        nanosleep(&ts, NULL);
                }
        }
        ret = EXIT_OK;
fail:
        if (ret != EXIT_OK)
                err("%s", x.why);
        if (m_up)
                ntbf_nvms_manager_fini(&m);
        ntbf_nvmx_mbox_close(&x, &mb);
        ntbf_nvmx_free(&x, &admin);
        ntbf_nvme_ctrl_close(&c);
        ntbf_nvmx_close(&x);
        if (ret == EXIT_OK && !o->json)
                printf("manager stopped\n");
        return ret;
}

/* ---- clients -------------------------------------------------------------------------------- */

static const char *where_desc(const struct ntbf_nvmx_client *c, const struct ntbf_nvmx_mem *m,
                              char *buf, size_t len);

static int client_open(struct opts *o, struct ntbf_nvmx_client *c, bool queues, size_t data)
{
        o->c.no_queues = !queues;
        o->c.data_bytes = data;
        if (ntbf_nvmx_client_open(c, &o->c)) {
                err("%s", c->x.why);
                ntbf_nvmx_client_close(c);
                return -1;
        }
        if (c->npaths > 1 && !ntbf_nvmx_paths_distinct(&c->x))
                fprintf(stderr,
                        "ntbfab-nvme: warning: libsisci reaches %s through adapter %u the same way "
                        "as through adapter %u: the backup queue pair shares the primary's route, "
                        "so a failed link takes both\n",
                        c->x.name, c->x.path[1].adapter, c->x.path[0].adapter);
        /* Where the backup pairs are, as the controller addresses them (article 6.3). */
        for (unsigned p = 1; queues && !o->json && p < c->npaths; p++) {
                const struct ntbf_nvmx_qpair *q = &c->q[p];
                char w[96];
                printf("backup pair: path %u through adapter %u, queue pair %u: SQ at 0x%" PRIx64
                       ", CQ at 0x%" PRIx64 ", PRP lists at 0x%" PRIx64 ", data at 0x%" PRIx64
                       " for the controller, in %s\n",
                       p, c->x.path[p].adapter, q->qid, q->sq.io[p], q->cq.io[p], q->prp.io[p],
                       c->backup.io[p], where_desc(c, &q->sq, w, sizeof(w)));
                fflush(stdout);
        }
        if (queues && o->together) {
                /* A barrier for clients on many hosts: the manager counts the pairs. */
                uint64_t t0 = ntbf_nvme_now_ns();
                uint32_t clients, pairs;
                for (;;) {
                        ntbf_nvms_client_counts(&c->cl, &clients, &pairs);
                        if (ntbf_nvms_client_peak(&c->cl) >= o->together)
                                break;
                        if (ntbf_nvme_now_ns() - t0 > UINT64_C(120000000000)) {
                                err("only %u of the %u queue pairs of --together came in 120 s",
                                    pairs, o->together);
                                ntbf_nvmx_client_close(c);
                                return -1;
                        }
                        struct timespec ts = {0, 1000000};
                        nanosleep(&ts, NULL);
                }
        }
        return 0;
}

/* Where memory ended up, in the reader's terms: "lender RAM (node 4, by hints)". */
static const char *where_desc(const struct ntbf_nvmx_client *c, const struct ntbf_nvmx_mem *m,
                              char *buf, size_t len)
{
        const char *what = m->where == NTBF_NVMX_DEVMEM   ? "accelerator memory"
                           : m->node_id == c->x.node_id   ? "this host's RAM"
                           : m->node_id == c->x.lender_id ? "lender RAM"
                                                          : "RAM";
        snprintf(buf, len, "%s (node %u%s)", what, m->node_id,
                 m->where == NTBF_NVMX_HINTS ? ", by hints" : "");
        return buf;
}

static struct json_object *where_json(const struct ntbf_nvmx_mem *m)
{
        struct json_object *j = json_object_new_object();
        jput(j, "where", json_object_new_string(ntbf_nvmx_where_name(m->where)));
        jput(j, "node", ju(m->node_id));
        jput(j, "io", ju(m->m.io));
        return j;
}

static int run_identify(struct opts *o)
{
        static struct ntbf_nvmx_client c;
        if (client_open(o, &c, false, 0))
                return EXIT_FAIL;
        int ret = EXIT_FAIL;
        struct ntbf_nvmx_mem buf = {0};
        struct ntbf_nvmx_group g = {0};
        char why[NTBF_NVMS_MSG];
        if (o->multicast) {
                /* Article 6.5: the controller writes the data once, to the group; the switches
                 * deliver it to every member's memory. */
                if (ntbf_nvmx_group_connect(&c.x, o->group, 20000, &g)) {
                        err("%s", c.x.why);
                        goto out;
                }
                uint64_t t0 = ntbf_nvme_now_ns();
                int r = ntbf_nvms_identify(&c.cl, NTBF_NVME_CNS_CTRL, 0, g.io, why, sizeof(why));
                uint64_t t1 = ntbf_nvme_now_ns();
                if (r) {
                        err("Identify to group %u: %s", o->group, why);
                        goto out;
                }
                if (o->json) {
                        struct json_object *j = json_object_new_object();
                        /* CLOCK_MONOTONIC, comparable with the listeners' on one machine. */
                        jput(j, "submitted_ns", ju(t0));
                        jput(j, "completed_ns", ju(t1));
                        jput(j, "multicast_group", ju(o->group));
                        jput(j, "bytes", ju(4096));
                        jput(j, "device_address", ju(g.io));
                        jprint(j);
                } else {
                        printf(
                            "Identify Controller of %s sent to multicast group %u: 4096 bytes in "
                            "one write of the controller (device address 0x%" PRIx64 ")\n",
                            c.x.name, o->group, g.io);
                }
                ret = EXIT_OK;
                goto out;
        }
        if (ntbf_nvmx_alloc(&c.x, 4096, NTBF_NVMX_HOST, SCI_MEMACCESS_DEVICE_WRITE, NULL, &buf)) {
                err("%s", c.x.why);
                goto out;
        }
        int r = ntbf_nvms_identify(&c.cl, NTBF_NVME_CNS_CTRL, 0, buf.m.io, why, sizeof(why));
        struct ntbf_nvme_ident id;
        if (!r)
                ntbf_nvme_parse_ident(buf.m.va, &id);
        struct ntbf_nvme_ns ns = {0};
        if (!r) {
                r = ntbf_nvms_identify(&c.cl, NTBF_NVME_CNS_NS, 1, buf.m.io, why, sizeof(why));
                if (!r && ntbf_nvme_parse_ns(buf.m.va, 1, id.mdts, &ns))
                        snprintf(why, sizeof(why), "namespace 1 reports an odd format"), r = -EIO;
        }
        if (r) {
                err("Identify through the manager: %s", why);
                goto out;
        }
        uint32_t clients, pairs;
        ntbf_nvms_client_counts(&c.cl, &clients, &pairs);
        if (o->json) {
                struct json_object *j = json_object_new_object();
                jput(j, "fdid", ju(c.x.fdid));
                jput(j, "device", json_object_new_string(c.x.name));
                jput(j, "node", ju(c.x.node_id));
                jput(j, "lender", ju(c.x.lender_id));
                jput(j, "vendor", ju(id.vid));
                jput(j, "model", json_object_new_string(id.mn));
                jput(j, "serial", json_object_new_string(id.sn));
                jput(j, "firmware", json_object_new_string(id.fr));
                jput(j, "controller_id", ju(id.cntlid));
                jput(j, "version", ju(id.ver));
                jput(j, "mdts", ju(id.mdts));
                jput(j, "namespaces", ju(id.nn));
                jput(j, "io_queues", ju(c.cl.hdr.io_queues));
                jput(j, "clients", ju(clients));
                jput(j, "pairs_in_use", ju(pairs));
                jput(j, "blocks", ju(ns.nsze));
                jput(j, "block_size", ju(1u << ns.lba_shift));
                jput(j, "max_transfer", ju(ns.max_xfer));
                jprint(j);
        } else {
                printf("%s (fdid 0x%x) on node %u, seen from node %u through its manager\n",
                       c.x.name, c.x.fdid, c.x.lender_id, c.x.node_id);
                printf("  model        %s\n  serial       %s\n  firmware     %s\n", id.mn, id.sn,
                       id.fr);
                printf("  vendor       0x%04x\n  controller   %u\n  version      %u.%u.%u\n",
                       id.vid, id.cntlid, id.ver >> 16, (id.ver >> 8) & 0xff, id.ver & 0xff);
                printf("  namespace 1  %" PRIu64 " blocks of %u bytes (%" PRIu64 " MiB)\n", ns.nsze,
                       1u << ns.lba_shift, (ns.nsze << ns.lba_shift) >> 20);
                printf("  transfers    up to %" PRIu64 " KiB per command\n", ns.max_xfer >> 10);
                printf("  queue pairs  %u for I/O, %u in use; %u client%s joined (this one "
                       "included)\n",
                       c.cl.hdr.io_queues, pairs, clients, clients == 1 ? "" : "s");
        }
        ret = EXIT_OK;
out:
        ntbf_nvmx_group_close(&c.x, &g);
        ntbf_nvmx_free(&c.x, &buf);
        ntbf_nvmx_client_close(&c);
        return ret;
}

/* The log of commands reported complete (--log): what a test checks afterwards. */
static void log_done(void *arg, bool write, uint64_t slba, uint32_t nlb, int status)
{
        FILE *f = arg;
        fprintf(f, "%c %" PRIu64 " %u %d\n", write ? 'W' : 'R', slba, nlb, status);
        fflush(f);
}

/*
 * Progress of a run that can take seconds (write, verify, bench): one line on the terminal,
 * rewritten at most five times a second and erased at the end; nothing with --json or when
 * stdout is not a terminal. Chains to --log's callback.
 */
struct io_progress {
        const char *verb;
        FILE *log;
        uint64_t done, total, t_start, t_last, time_ns;
        bool on, shown;
};

static void progress_done(void *arg, bool write, uint64_t slba, uint32_t nlb, int status)
{
        struct io_progress *p = arg;
        if (p->log)
                log_done(p->log, write, slba, nlb, status);
        p->done++;
        uint64_t now = ntbf_nvme_now_ns();
        if (!p->on || now - p->t_last < 200000000)
                return;
        p->t_last = now;
        if (p->total)
                printf("\r\033[K%s: %" PRIu64 " of %" PRIu64 " commands (%" PRIu64 "%%)", p->verb,
                       p->done, p->total, p->done * 100 / p->total);
        else
                printf("\r\033[K%s: %" PRIu64 " commands, %.1f of %.1f s", p->verb, p->done,
                       (double)(now - p->t_start) / 1e9, (double)p->time_ns / 1e9);
        fflush(stdout);
        p->shown = true;
}

/* Route j's completions through p (keeping --log's file). */
static void progress_attach(struct io_progress *p, const struct opts *o, struct ntbf_nvme_job *j)
{
        p->verb = o->verb;
        p->log = j->done == log_done ? j->done_arg : NULL;
        p->total = j->ios;
        p->time_ns = j->time_ns;
        p->t_start = ntbf_nvme_now_ns();
        p->t_last = 0; /* the first completion shows at once */
        p->on = !o->json && isatty(STDOUT_FILENO);
        if (p->on || p->log) {
                j->done = progress_done;
                j->done_arg = p;
        }
}

static void progress_clear(struct io_progress *p)
{
        if (p->shown) {
                printf("\r\033[K");
                fflush(stdout);
        }
        p->shown = false;
}

static void print_stats(const struct opts *o, const struct ntbf_nvmx_client *c,
                        const struct ntbf_nvme_job *j, const struct ntbf_nvme_stats *st,
                        const char *what, int r)
{
        double secs = (double)st->elapsed_ns / 1e9;
        double iops = secs > 0 ? (double)st->ios / secs : 0;
        double bw = secs > 0 ? (double)st->bytes / secs : 0;
        const struct ntbf_nvme_hist *h = &st->lat;
        static const double qs[] = {0.5, 0.9, 0.99, 0.999, 0.9999};
        static const char *const qn[] = {"p50", "p90", "p99", "p99.9", "p99.99"};
        char a[64], b[64], d[64];
        if (o->json) {
                struct json_object *jo = json_object_new_object(), *jj = json_object_new_object(),
                                   *jr = json_object_new_object(), *jl = json_object_new_object(),
                                   *jp = json_object_new_object();
                jput(jo, "verb", json_object_new_string(o->verb));
                jput(jo, "fdid", ju(c->x.fdid));
                jput(jo, "device", json_object_new_string(c->x.name));
                jput(jo, "node", ju(c->x.node_id));
                jput(jo, "lender", ju(c->x.lender_id));
                jput(jo, "local", json_object_new_boolean(c->x.node_id == c->x.lender_id));
                jput(jp, "sq", where_json(&c->q[0].sq));
                jput(jp, "cq", where_json(&c->q[0].cq));
                jput(jp, "data", where_json(&c->data));
                jput(jo, "placement", jp);
                jput(jj, "workload", json_object_new_string(what));
                jput(jj, "bs", ju(j->bs));
                jput(jj, "qd", ju(j->qd));
                jput(jj, "read_pct", ju(j->read_pct));
                jput(jj, "ios", ju(j->ios));
                jput(jj, "time_ns", ju(j->time_ns));
                jput(jj, "paths", ju(c->npaths));
                jput(jo, "job", jj);
                jput(jr, "status", json_object_new_string(r ? ntbf_nvme_strstatus(r) : "ok"));
                jput(jr, "ios", ju(st->ios));
                jput(jr, "reads", ju(st->reads));
                jput(jr, "writes", ju(st->writes));
                jput(jr, "bytes", ju(st->bytes));
                jput(jr, "errors", ju(st->errors));
                jput(jr, "mismatches", ju(st->mismatches));
                jput(jr, "failovers", ju(st->failovers));
                jput(jr, "resubmitted", ju(st->resubmitted));
                jput(jr, "elapsed_ns", ju(st->elapsed_ns));
                jput(jr, "iops", json_object_new_double(iops));
                jput(jr, "bandwidth_bps", json_object_new_double(bw));
                jput(jl, "min", ju(h->min_ns));
                jput(jl, "mean", ju(h->n ? h->sum_ns / h->n : 0));
                for (size_t i = 0; i < 5; i++)
                        jput(jl, qn[i], ju(ntbf_nvme_hist_quantile(h, qs[i])));
                jput(jl, "max", ju(h->max_ns));
                jput(jr, "latency_ns", jl);
                struct json_object *ph = json_object_new_array();
                for (unsigned p = 0; p < c->npaths; p++) {
                        struct json_object *x = json_object_new_object();
                        jput(x, "adapter", ju(c->x.path[p].adapter));
                        jput(x, "qid", ju(c->q[p].qid));
                        jput(x, "ios", ju(c->paths[p].ios));
                        jput(x, "failed", json_object_new_boolean(c->paths[p].failed));
                        json_object_array_add(ph, x);
                }
                jput(jr, "paths", ph);
                if (o->histogram) {
                        uint64_t cnt[64];
                        ntbf_nvme_hist_pow2(h, cnt);
                        struct json_object *hb = json_object_new_array();
                        for (unsigned e = 0; e < 64; e++) {
                                if (!cnt[e])
                                        continue;
                                struct json_object *x = json_object_new_object();
                                jput(x, "from_ns", ju(e ? UINT64_C(1) << e : 0));
                                jput(x, "to_ns", ju((UINT64_C(1) << (e + 1)) - 1));
                                jput(x, "count", ju(cnt[e]));
                                json_object_array_add(hb, x);
                        }
                        jput(jr, "histogram", hb);
                }
                jput(jo, "result", jr);
                jprint(jo);
                return;
        }
        printf("%s: %s, %u bytes per command, queue depth %u, %u path%s, on %s from node %u "
               "(%s)\n",
               o->verb, what, j->bs, j->qd, c->npaths, c->npaths == 1 ? "" : "s", c->x.name,
               c->x.node_id, c->x.node_id == c->x.lender_id ? "local" : "remote");
        printf("  placement   SQ in %s, CQ in %s, data in %s\n",
               where_desc(c, &c->q[0].sq, a, sizeof(a)), where_desc(c, &c->q[0].cq, b, sizeof(b)),
               where_desc(c, &c->data, d, sizeof(d)));
        printf("  result      %" PRIu64 " commands (%" PRIu64 " reads, %" PRIu64
               " writes) in %.3f s: %.0f IOPS, %.2f MiB/s%s%s\n",
               st->ios, st->reads, st->writes, secs, iops, bw / (1 << 20), r ? "; " : "",
               r ? ntbf_nvme_strstatus(r) : "");
        if (st->errors || st->mismatches)
                printf("  errors      %" PRIu64 " failed, %" PRIu64 " with wrong data\n",
                       st->errors, st->mismatches);
        if (st->failovers)
                printf("  failover    %" PRIu64 " path%s given up, %" PRIu64
                       " commands resubmitted on the next\n",
                       st->failovers, st->failovers == 1 ? "" : "s", st->resubmitted);
        for (unsigned p = 0; c->npaths > 1 && p < c->npaths; p++)
                printf("  path %u      adapter %u, queue pair %u: %" PRIu64 " commands%s\n", p,
                       c->x.path[p].adapter, c->q[p].qid, c->paths[p].ios,
                       c->paths[p].failed ? " (failed)" : "");
        if (h->n) {
                printf("  latency ns  min %" PRIu64 "  mean %" PRIu64, h->min_ns, h->sum_ns / h->n);
                for (size_t i = 0; i < 5; i++)
                        printf("  %s %" PRIu64, qn[i], ntbf_nvme_hist_quantile(h, qs[i]));
                printf("  max %" PRIu64 "\n", h->max_ns);
        }
}

static struct ntbf_nvme_job base_job(const struct opts *o, const struct ntbf_nvmx_client *c)
{
        struct ntbf_nvme_job j = {0};
        uint32_t bsz = 1u << c->cl.ns.lba_shift;
        j.bs = o->bs ? o->bs : 4096;
        if (j.bs < bsz)
                j.bs = bsz;
        j.qd = o->qd ? o->qd : 1;
        j.first = o->lba;
        j.blocks = o->blocks;
        j.seed = o->seed ? o->seed : 1;
        j.gen = o->gen ? o->gen : 1;
        j.timeout_ns = o->timeout_ns ? o->timeout_ns : UINT64_C(2000000000);
        j.nap_ns = (uint32_t)(o->nap_ns < 1000000000 ? o->nap_ns : 999999999);
        return j;
}

static int run_io(struct opts *o)
{
        bool write = !strcmp(o->verb, "write"), verify = !strcmp(o->verb, "verify");
        if (!o->have_lba || !o->blocks)
                return usage("%s needs --lba and --blocks", o->verb);
        static struct ntbf_nvmx_client c;
        uint32_t bs = o->bs ? o->bs : 4096, qd = o->qd ? o->qd : 1;
        if (client_open(o, &c, true, (size_t)bs * qd))
                return EXIT_FAIL;
        int ret = EXIT_FAIL;
        struct ntbf_nvme_job j = base_job(o, &c);
        uint32_t bsz = 1u << c.cl.ns.lba_shift;
        FILE *logf = NULL;
        if (j.bs % bsz || (o->blocks * bsz) % j.bs) {
                err("--blocks %" PRIu64 " of %u bytes is not a whole number of --bs %u commands",
                    o->blocks, bsz, j.bs);
                goto out;
        }
        if (!strcmp(o->verb, "read")) {
                /* Plain reads: the data goes out as it is. */
                FILE *f = o->output ? fopen(o->output, "wb") : NULL;
                if (o->output && !f) {
                        err("%s: %s", o->output, strerror(errno));
                        goto out;
                }
                uint64_t units = o->blocks * bsz / j.bs, t0 = ntbf_nvme_now_ns();
                for (uint64_t u = 0; u < units; u++) {
                        uint64_t lba = o->lba + u * (j.bs / bsz);
                        struct ntbf_nvme_wait w;
                        ntbf_nvme_wait_default(&w);
                        int r = ntbf_nvme_qp_rw_sync(&c.q[0].qp, &w, &c.cl.ns, NTBF_NVME_CMD_READ,
                                                     lba, j.bs / bsz, c.data.io[0]);
                        if (r) {
                                err("read of block %" PRIu64 ": %s", lba, ntbf_nvme_strstatus(r));
                                if (f)
                                        fclose(f);
                                goto out;
                        }
                        if (f) {
                                fwrite(c.data.m.va, 1, j.bs, f);
                        } else if (u == 0 && !o->json) {
                                const uint8_t *p = c.data.m.va;
                                for (unsigned i = 0; i < 256 && i < j.bs; i += 16) {
                                        printf("%08" PRIx64 ":", lba * bsz + i);
                                        for (unsigned k = 0; k < 16; k++)
                                                printf(" %02x", p[i + k]);
                                        printf("\n");
                                }
                        }
                }
                if (f)
                        fclose(f);
                uint64_t dt = ntbf_nvme_now_ns() - t0;
                if (o->json) {
                        struct json_object *jo = json_object_new_object();
                        jput(jo, "verb", json_object_new_string("read"));
                        jput(jo, "lba", ju(o->lba));
                        jput(jo, "blocks", ju(o->blocks));
                        jput(jo, "bytes", ju(o->blocks * bsz));
                        jput(jo, "elapsed_ns", ju(dt));
                        jprint(jo);
                } else {
                        printf("read %" PRIu64 " blocks at %" PRIu64 " (%" PRIu64
                               " bytes) in %.3f ms\n",
                               o->blocks, o->lba, o->blocks * bsz, (double)dt / 1e6);
                }
                ret = EXIT_OK;
                goto out;
        }
        j.read_pct = write ? 0 : 100;
        j.ios = o->blocks * bsz / j.bs;
        j.pattern = NTBF_NVME_PAT_STREAM;
        j.shuffle = o->random; /* the same order for the same seed: a verify retraces a write */
        if (o->log) {
                logf = fopen(o->log, "w");
                if (!logf) {
                        err("%s: %s", o->log, strerror(errno));
                        goto out;
                }
                j.done = log_done;
                j.done_arg = logf;
        }
        struct ntbf_nvme_stats *st = calloc(1, sizeof(*st));
        if (!st)
                goto out;
        struct io_progress pg = {0};
        progress_attach(&pg, o, &j);
        int r = ntbf_nvme_job_run(c.paths, c.npaths, &c.cl.ns, c.data.m.va, &j, st);
        progress_clear(&pg);
        /* After a failover, admin requests (deleting the pairs) go through the path that works. */
        for (unsigned p = 0; p < c.npaths; p++)
                if (!c.paths[p].failed) {
                        ntbf_nvmx_client_use_path(&c, p);
                        break;
                }
        print_stats(o, &c, &j, st, write ? "sequential writes" : "sequential reads, verified", r);
        if (r == -EBADMSG || st->mismatches)
                err("%" PRIu64 " of %" PRIu64
                    " commands read data other than the pattern of seed %" PRIu64 " generation %u",
                    st->mismatches, j.ios, j.seed, j.gen);
        else if (r)
                err("%s: %s", o->verb, ntbf_nvme_strstatus(r));
        (void)verify;
        ret = r ? EXIT_FAIL : EXIT_OK;
        free(st);
out:
        if (logf)
                fclose(logf);
        ntbf_nvmx_client_close(&c);
        return ret;
}

static int run_bench(struct opts *o)
{
        const char *rw = o->rw ? o->rw : "randread";
        uint32_t read_pct;
        bool random;
        if (!strcmp(rw, "randread") || !strcmp(rw, "read"))
                read_pct = 100;
        else if (!strcmp(rw, "randwrite") || !strcmp(rw, "write"))
                read_pct = 0;
        else if (!strcmp(rw, "randrw") || !strcmp(rw, "rw"))
                read_pct = o->mix ? o->mix : 50;
        else
                return usage("--rw is randread, randwrite, randrw, read, write or rw, not '%s'",
                             rw);
        random = !strncmp(rw, "rand", 4);
        static struct ntbf_nvmx_client c;
        uint32_t bs = o->bs ? o->bs : 4096, qd = o->qd ? o->qd : 1;
        if (client_open(o, &c, true, (size_t)bs * qd))
                return EXIT_FAIL;
        struct ntbf_nvme_job j = base_job(o, &c);
        j.random = random;
        j.read_pct = read_pct;
        j.ios = o->ios;
        j.time_ns = o->ios ? 0 : o->time_ns ? o->time_ns : UINT64_C(5000000000);
        struct ntbf_nvme_stats *st = calloc(1, sizeof(*st));
        int ret = EXIT_FAIL;
        if (st) {
                struct io_progress pg = {0};
                progress_attach(&pg, o, &j);
                int r = ntbf_nvme_job_run(c.paths, c.npaths, &c.cl.ns, c.data.m.va, &j, st);
                progress_clear(&pg);
                for (unsigned p = 0; p < c.npaths; p++)
                        if (!c.paths[p].failed) {
                                ntbf_nvmx_client_use_path(&c, p);
                                break;
                        }
                char what[64];
                snprintf(what, sizeof(what), "%s%s", rw,
                         read_pct > 0 && read_pct < 100 ? " (mixed)" : "");
                print_stats(o, &c, &j, st, what, r);
                if (o->histogram && !o->json && st->lat.n) {
                        /* Powers of two of ns, bars scaled to the fullest. */
                        uint64_t cnt[64], top = 0;
                        ntbf_nvme_hist_pow2(&st->lat, cnt);
                        for (unsigned e = 0; e < 64; e++)
                                top = cnt[e] > top ? cnt[e] : top;
                        printf("  histogram   (ns, powers of two)\n");
                        for (unsigned e = 0; e < 64; e++) {
                                if (!cnt[e])
                                        continue;
                                unsigned w = (unsigned)(cnt[e] * 50 / top);
                                printf("  %10" PRIu64 " .. %-10" PRIu64 " %9" PRIu64 " ",
                                       UINT64_C(1) << e, (UINT64_C(1) << (e + 1)) - 1, cnt[e]);
                                for (unsigned k = 0; k < (w ? w : 1); k++)
                                        putchar('#');
                                putchar('\n');
                        }
                }
                if (r)
                        err("bench: %s", ntbf_nvme_strstatus(r));
                ret = r ? EXIT_FAIL : EXIT_OK;
                free(st);
        }
        ntbf_nvmx_client_close(&c);
        return ret;
}

/* A member of a multicast group: the controller's one write lands here too (article 6.5). */
static int run_listen(struct opts *o)
{
        if (!o->multicast)
                return usage("listen needs --group GROUP");
        static struct ntbf_nvmx x;
        if (ntbf_nvmx_init(&x)) {
                err("%s", x.why);
                return EXIT_FAIL;
        }
        struct ntbf_nvmx_group g;
        size_t size = o->size ? o->size : 4096;
        int ret = EXIT_FAIL;
        if (ntbf_nvmx_group_join(&x, o->group, size, &g)) {
                err("%s", x.why);
                ntbf_nvmx_close(&x);
                return EXIT_FAIL;
        }
        if (!o->json)
                printf("node %u: member of multicast group %u (%zu bytes)\n", x.node_id, o->group,
                       size);
        fflush(stdout);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        uint64_t t0 = ntbf_nvme_now_ns(),
                 limit = o->timeout_ns ? o->timeout_ns : UINT64_C(60000000000);
        /* Identify data starts with the PCI vendor ID: non-zero once it arrived. Wait for the
         * rest of the page to settle: one write, but not one store. */
        bool got = false;
        uint64_t seen = 0;
        while (!stop_flag && ntbf_nvme_now_ns() - t0 < limit) {
                if (g.va[0] | g.va[1]) {
                        seen = ntbf_nvme_now_ns();
                        struct timespec ts = {0, 2000000};
                        nanosleep(&ts, NULL);
                        got = true;
                        break;
                }
                struct timespec ts = {0, 200000};
                nanosleep(&ts, NULL);
        }
        if (!got) {
                err("node %u: nothing arrived in group %u", x.node_id, o->group);
        } else {
                uint8_t page[4096];
                for (size_t i = 0; i < sizeof(page) && i < size; i++)
                        page[i] = g.va[i];
                struct ntbf_nvme_ident id;
                ntbf_nvme_parse_ident(page, &id);
                uint64_t h = 1469598103934665603u;
                for (size_t i = 0; i < sizeof(page); i++)
                        h = (h ^ page[i]) * 1099511628211u;
                if (o->json) {
                        struct json_object *j = json_object_new_object();
                        jput(j, "node", ju(x.node_id));
                        jput(j, "group", ju(o->group));
                        jput(j, "model", json_object_new_string(id.mn));
                        jput(j, "serial", json_object_new_string(id.sn));
                        jput(j, "fnv1a", ju(h));
                        jput(j, "received_ns", ju(seen));
                        jprint(j);
                } else {
                        printf("node %u: received Identify Controller: model %s, serial %s, "
                               "fnv1a %016" PRIx64 "\n",
                               x.node_id, id.mn, id.sn, h);
                }
                ret = EXIT_OK;
        }
        ntbf_nvmx_group_close(&x, &g);
        ntbf_nvmx_close(&x);
        return ret;
}

int main(int argc, char **argv)
{
        if (argc < 2)
                return usage("a verb is needed");
        if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
                fputs(usage_text, stdout);
                return EXIT_OK;
        }
        if (!strcmp(argv[1], "--version")) {
                printf("ntbfab-nvme 0.1.0\n");
                return EXIT_OK;
        }
        static struct opts o;
        o.verb = argv[1];
        int r = parse(argc, argv, &o);
        if (r)
                return r;
        setvbuf(stdout, NULL, _IOLBF, 0);
        if (!strcmp(o.verb, "manager"))
                return run_manager(&o);
        if (!strcmp(o.verb, "identify"))
                return run_identify(&o);
        if (!strcmp(o.verb, "read") || !strcmp(o.verb, "write") || !strcmp(o.verb, "verify"))
                return run_io(&o);
        if (!strcmp(o.verb, "bench"))
                return run_bench(&o);
        if (!strcmp(o.verb, "listen"))
                return run_listen(&o);
        return usage("unknown verb '%s'", o.verb);
}
