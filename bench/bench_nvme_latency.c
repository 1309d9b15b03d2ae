/* bench/bench_nvme_latency.c: QD1 reads: local vs remote vs an NVMe-oF-like relay (7.4.3). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ntbf_nvme_sisci.h"
#include "ntbf_nvme_work.h"
#include "ntbfab/config.h"
#include "ntbfab/path.h"
#include "nvmefx.h"

/*
 * config/examples/expansion.yaml (ports 7760-7761): the lender's NVMe sits in an expansion
 * chassis; the borrower reaches it through two PXH830s and an MXS824. A manager runs on the
 * lender. Side by side, round after round:
 *   - local: ntbfab-nvme bench on the lender (the driver next to the drive);
 *   - remote: the same on the borrower (its own queue pair, no software of the lender on the
 *     data path: article Fig. 38 finds the two alike);
 *   - relay: the way NVMe-oF targets work, built here: a target process on the lender (a
 *     client of the manager with its own queue pair) receives each command from the borrower
 *     over a TCP socket, submits it locally, and copies the data back over the socket.
 * Printed and written to --json FILE; nothing is asserted. The modeled one-way latency
 * between each host's CPU and the drive says what the fabric adds; the simulated fabric maps
 * remote memory directly, so the measured difference is software and the machine.
 */

#define FDID 0x4000u
#define PORT 17805 /* the relay's socket (tests/README.md) */

/* ---- the relay: target on the lender, initiator here ---------------------------------------- */

struct req {
        uint64_t lba;
        uint32_t nlb, op;
};

static int relay_target(int port)
{
        static struct ntbf_nvmx_client c;
        struct ntbf_nvmx_client_opts o = {.npaths = 1, .entries = 16, .data_bytes = 1 << 20};
        if (ntbf_nvmx_client_open(&c, &o)) {
                fprintf(stderr, "relay target: %s\n", c.x.why);
                return 1;
        }
        int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1)) {
                perror("relay target: bind");
                return 1;
        }
        printf("relay target ready\n");
        fflush(stdout);
        int s = accept(ls, NULL, NULL);
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct ntbf_nvme_wait w;
        ntbf_nvme_wait_default(&w);
        w.nap_ns = 0; /* the target polls, as an SPDK target does */
        struct req r;
        while (recv(s, &r, sizeof(r), MSG_WAITALL) == (ssize_t)sizeof(r)) {
                uint32_t len = r.nlb << c.cl.ns.lba_shift;
                int st = ntbf_nvme_qp_rw_sync(&c.q[0].qp, &w, &c.cl.ns, NTBF_NVME_CMD_READ, r.lba,
                                              r.nlb, c.data.m.io);
                /* The data the drive put in the target's memory, then the status. */
                if (send(s, c.data.m.va, len, 0) != (ssize_t)len ||
                    send(s, &st, sizeof(st), 0) != (ssize_t)sizeof(st))
                        break;
        }
        close(s);
        close(ls);
        ntbf_nvmx_client_close(&c);
        return 0;
}

/* The initiator: one command at a time over the socket for time_ns. */
static int relay_run(uint64_t time_ns, uint64_t blocks, struct ntbf_nvme_hist *h, uint64_t *ios)
{
        int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons(PORT),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (connect(s, (struct sockaddr *)&a, sizeof(a))) {
                perror("relay: connect");
                return -1;
        }
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        static uint8_t buf[4096];
        uint64_t rng = 88172645463325252u, t0 = ntbf_nvme_now_ns();
        *ios = 0;
        while (ntbf_nvme_now_ns() - t0 < time_ns) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                struct req r = {(rng % (blocks / 8)) * 8, 8, 0};
                uint64_t t = ntbf_nvme_now_ns();
                int st;
                if (send(s, &r, sizeof(r), 0) != (ssize_t)sizeof(r) ||
                    recv(s, buf, sizeof(buf), MSG_WAITALL) != (ssize_t)sizeof(buf) ||
                    recv(s, &st, sizeof(st), MSG_WAITALL) != (ssize_t)sizeof(st) || st) {
                        close(s);
                        return -1;
                }
                ntbf_nvme_hist_add(h, ntbf_nvme_now_ns() - t);
                (*ios)++;
        }
        close(s);
        return 0;
}

/* ---- the benchmark -------------------------------------------------------------------------- */

struct fig {
        double p50, mean, p99, iops;
        unsigned n;
};

static void add(struct fig *f, double p50, double mean, double p99, double iops)
{
        /* Medians over rounds come later; keep every round. */
        f->p50 += p50;
        f->mean += mean;
        f->p99 += p99;
        f->iops += iops;
        f->n++;
}

static struct json_object *fig_json(const struct fig *f)
{
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "median_ns", json_object_new_double(f->p50 / f->n));
        json_object_object_add(o, "mean_ns", json_object_new_double(f->mean / f->n));
        json_object_object_add(o, "p99_ns", json_object_new_double(f->p99 / f->n));
        json_object_object_add(o, "iops", json_object_new_double(f->iops / f->n));
        json_object_object_add(o, "rounds", json_object_new_int((int)f->n));
        return o;
}

int main(int argc, char **argv)
{
        const char *json_path = NULL, *build = "build", *src = ".";
        unsigned rounds = 3;
        uint64_t secs = 2;
        int target_port = 0;
        static const struct option lo[] = {
            {"json", 1, NULL, 'j'},   {"build", 1, NULL, 'b'},   {"src", 1, NULL, 's'},
            {"rounds", 1, NULL, 'r'}, {"seconds", 1, NULL, 't'}, {"relay-target", 1, NULL, 'T'},
            {NULL, 0, NULL, 0}};
        for (int c; (c = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
                if (c == 'j')
                        json_path = optarg;
                else if (c == 'b')
                        build = optarg;
                else if (c == 's')
                        src = optarg;
                else if (c == 'r')
                        rounds = (unsigned)strtoul(optarg, NULL, 0);
                else if (c == 't')
                        secs = strtoull(optarg, NULL, 0);
                else if (c == 'T')
                        target_port = atoi(optarg);
                else {
                        fprintf(stderr, "usage: bench_nvme_latency [--json FILE] [--build DIR] "
                                        "[--src DIR] [--rounds N] [--seconds S]\n");
                        return 2;
                }
        }
        if (target_port)
                return relay_target(target_port);
        char path[1024];
        snprintf(path, sizeof(path), "%s/config/examples/expansion.yaml", src);
        char *text = nb_rewrite(path, NULL, NULL, 0);
        struct ntbf_topo *t = NULL;
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        if (!text || ntbf_config_load(path, &t, &d)) {
                ntbf_diags_print(&d, stderr);
                return 1;
        }
        ntbf_diags_free(&d);
        /* What the fabric adds, one way, between each CPU and the drive. */
        uint32_t ln = ntbf_topo_find_node(t, "lender"), bn = ntbf_topo_find_node(t, "borrower");
        uint32_t dev = ntbf_topo_find_device(t, ln, "nvme0");
        struct ntbf_path pl, pr;
        ntbf_path_find(t, NULL, (struct ntbf_endpoint){NTBF_EP_CPU, ln, 0},
                       (struct ntbf_endpoint){NTBF_EP_DEVICE, ln, dev}, &pl, NULL, 0);
        ntbf_path_find(t, NULL, (struct ntbf_endpoint){NTBF_EP_CPU, bn, 0},
                       (struct ntbf_endpoint){NTBF_EP_DEVICE, ln, dev}, &pr, NULL, 0);
        uint64_t blocks = t->devices[dev].sim.capacity >> 9;
        ntbf_topo_free(t);
        static struct nb b;
        if (nb_up(&b, build, text))
                return 1;
        free(text);
        int ret = 1;
        pid_t m = nb_manager(&b, "lender", FDID);
        if (m < 0)
                goto out;
        struct fig local = {0}, remote = {0}, relay = {0};
        static const char *const who[] = {"lender", "borrower"};
        for (unsigned r = 0; r < rounds; r++) {
                for (int k = 0; k < 2; k++) {
                        char name[32];
                        snprintf(name, sizeof(name), "bench-%s-%u", who[k], r);
                        pid_t p = nb_start(&b, who[k], name,
                                           "bench --fdid 0x%x --rw randread --bs 4KiB --qd 1 "
                                           "--time %" PRIu64 "s --json",
                                           FDID, secs);
                        if (nb_wait(p, (int)(secs * 1000 + 60000))) {
                                fprintf(stderr, "bench_nvme_latency: %s/%s.out\n", b.dir, name);
                                goto out;
                        }
                        struct json_object *j = nb_json(&b, name);
                        add(k ? &remote : &local, nb_num(j, "result.latency_ns.p50"),
                            nb_num(j, "result.latency_ns.mean"), nb_num(j, "result.latency_ns.p99"),
                            nb_num(j, "result.iops"));
                        json_object_put(j);
                }
                /* The relay: the target on the lender, this process as the initiator. */
                char self[1200];
                snprintf(self, sizeof(self), "%s/bench/bench_nvme_latency", build);
                char name[32];
                snprintf(name, sizeof(name), "relay-target-%u", r);
                char out[600];
                snprintf(out, sizeof(out), "%s/%s.out", b.dir, name);
                pid_t tp = fork();
                if (tp == 0) {
                        if (!freopen(out, "w", stdout))
                                _exit(127);
                        setenv("NTBFAB_DIR", b.dir, 1);
                        setenv("NTBFAB_NODE", "lender", 1);
                        char port[16];
                        snprintf(port, sizeof(port), "%d", PORT);
                        execl(self, self, "--relay-target", port, (char *)NULL);
                        _exit(127);
                }
                if (!nb_wait_for(&b, name, "relay target ready", 30000)) {
                        fprintf(stderr, "bench_nvme_latency: the relay target did not start\n");
                        kill(tp, SIGKILL);
                        nb_wait(tp, 5000);
                        goto out;
                }
                static struct ntbf_nvme_hist h;
                memset(&h, 0, sizeof(h));
                uint64_t ios = 0;
                int rr = relay_run(secs * UINT64_C(1000000000), blocks, &h, &ios);
                nb_wait(tp, 30000);
                if (rr) {
                        fprintf(stderr, "bench_nvme_latency: the relay failed\n");
                        goto out;
                }
                add(&relay, (double)ntbf_nvme_hist_quantile(&h, 0.5),
                    (double)h.sum_ns / (double)h.n, (double)ntbf_nvme_hist_quantile(&h, 0.99),
                    (double)ios / (double)secs);
        }
        double lm = local.p50 / local.n, rm = remote.p50 / remote.n, xm = relay.p50 / relay.n;
        double hop = (double)pr.latency_ns - (double)pl.latency_ns;
        printf("4 KiB random reads at queue depth 1, %u rounds of %" PRIu64 " s, side by side\n",
               rounds, secs);
        printf("  %-34s %10s %10s %10s %10s\n", "", "median", "mean", "p99", "IOPS");
        const struct {
                const char *name;
                const struct fig *f;
        } rows[] = {{"local (driver on the lender)", &local},
                    {"remote (driver on the borrower)", &remote},
                    {"relay (NVMe-oF-like target)", &relay}};
        for (int i = 0; i < 3; i++)
                printf("  %-34s %8.0f ns %8.0f ns %8.0f ns %10.0f\n", rows[i].name,
                       rows[i].f->p50 / rows[i].f->n, rows[i].f->mean / rows[i].f->n,
                       rows[i].f->p99 / rows[i].f->n, rows[i].f->iops / rows[i].f->n);
        printf(
            "  modeled one way CPU -> drive: local %u ns, remote %u ns (the fabric adds %.0f ns)\n",
            pl.latency_ns, pr.latency_ns, hop);
        printf("  remote - local median: %.0f ns (%s the modeled hop latency)\n", rm - lm,
               rm - lm <= hop && lm - rm <= hop ? "within" : "beyond");
        printf("  relay / remote median: %.2fx (%s)\n", xm / rm,
               xm >= 2 * rm ? "the direct path is at least 2x lower" : "less than 2x");
        if (json_path) {
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "benchmark", json_object_new_string("nvme_latency"));
                json_object_object_add(o, "cluster", json_object_new_string("expansion.yaml"));
                json_object_object_add(o, "rounds", json_object_new_int((int)rounds));
                json_object_object_add(o, "seconds", json_object_new_int((int)secs));
                json_object_object_add(o, "local", fig_json(&local));
                json_object_object_add(o, "remote", fig_json(&remote));
                json_object_object_add(o, "relay", fig_json(&relay));
                json_object_object_add(o, "modeled_local_ns",
                                       json_object_new_int((int)pl.latency_ns));
                json_object_object_add(o, "modeled_remote_ns",
                                       json_object_new_int((int)pr.latency_ns));
                json_object_object_add(o, "remote_minus_local_median_ns",
                                       json_object_new_double(rm - lm));
                json_object_object_add(o, "relay_over_remote_median",
                                       json_object_new_double(xm / rm));
                json_object_to_file_ext(json_path, o, JSON_C_TO_STRING_PRETTY);
                json_object_put(o);
        }
        ret = 0;
out:
        if (m > 0) {
                kill(m, SIGTERM);
                nb_wait(m, 15000);
        }
        nb_down(&b);
        return ret;
}
