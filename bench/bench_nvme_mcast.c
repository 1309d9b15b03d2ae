/* bench/bench_nvme_mcast.c: one multicast Identify to the 59 other nodes of cluster-60. */
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntbfab/config.h"
#include "ntbfab/sim.h"
#include "nvmefx.h"

/*
 * config/examples/cluster-60.yaml as the article built it (seven MXS824s in cascade), its
 * management addresses moved to loopback (10.1.X.Y:7700 -> 127.1.X.Y:17900). A manager runs
 * on the lender; the 59 other nodes each run a listener that joins multicast group GROUP
 * with a 4 KiB buffer of its own memory; then node01 asks the manager for one Identify whose
 * data buffer is the group. Reported: how many members received the same 4 KiB, how many
 * transactions left the lender's adapter for it and entered the members', and when each
 * member saw the data after the command was submitted (its poll is every 200 us).
 */

#define FDID  0x4000u
#define GROUP 9u
#define N     59u

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
        const char *json_path = NULL, *build = "build", *src = ".";
        static const struct option lo[] = {{"json", 1, NULL, 'j'},
                                           {"build", 1, NULL, 'b'},
                                           {"src", 1, NULL, 's'},
                                           {NULL, 0, NULL, 0}};
        for (int c; (c = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
                if (c == 'j')
                        json_path = optarg;
                else if (c == 'b')
                        build = optarg;
                else if (c == 's')
                        src = optarg;
                else {
                        fprintf(stderr, "usage: bench_nvme_mcast [--json FILE] [--build DIR] "
                                        "[--src DIR]\n");
                        return 2;
                }
        }
        char path[1024];
        snprintf(path, sizeof(path), "%s/config/examples/cluster-60.yaml", src);
        static const char *const from[] = {"10.1.", ":7700"};
        static const char *const to[] = {"127.1.", ":17900"};
        char *text = nb_rewrite(path, from, to, 2);
        static struct nb b;
        if (!text || nb_up(&b, build, text))
                return 1;
        free(text);
        int ret = 1;
        pid_t m = -1, l[N] = {0};
        struct ntbf_topo *t = NULL;
        struct ntbf_backend *be = NULL;
        const struct ntbf_backend_ops *ops = ntbf_backend_find("sim");
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        if (ntbf_config_load(b.yaml, &t, &d)) {
                ntbf_diags_print(&d, stderr);
                goto out;
        }
        struct ntbf_backend_env env = {t, b.dir, NTBF_NONE};
        char why[512];
        if (ntbf_sim_attach(&env, &be, why, sizeof(why))) {
                fprintf(stderr, "bench_nvme_mcast: %s\n", why);
                goto out;
        }
        m = nb_manager(&b, "lender", FDID);
        if (m < 0)
                goto out;
        for (unsigned i = 0; i < N; i++) {
                char node[16], name[32];
                snprintf(node, sizeof(node), "node%02u", i + 1);
                snprintf(name, sizeof(name), "listen-%s", node);
                l[i] = nb_start(&b, node, name, "listen --group %u --timeout 120s --json", GROUP);
        }
        /* A JSON listener says nothing until it receives; it has joined once its segment is
         * available, which the daemons make known within moments of its start. */
        nb_nap(5000);
        /* Transactions before: the lender's adapter and every member's. */
        uint64_t tx0 = 0, rx0 = 0, tx1 = 0, rx1 = 0;
        for (uint32_t a = 0; a < t->nadapters; a++) {
                struct ntbf_adapter_h *h;
                struct ntbf_counters c;
                if (ops->probe(be, a, &h))
                        continue;
                if (!ops->counters(h, &c)) {
                        if (t->adapters[a].node == ntbf_topo_find_node(t, "lender"))
                                tx0 += c.tx;
                        else
                                rx0 += c.rx;
                }
                ops->release(h);
        }
        pid_t id = nb_start(&b, "node01", "identify", "identify --fdid 0x%x --multicast %u --json",
                            FDID, GROUP);
        if (nb_wait(id, 120000)) {
                fprintf(stderr, "bench_nvme_mcast: the Identify failed (%s/identify.out)\n", b.dir);
                goto out;
        }
        struct json_object *ij = nb_json(&b, "identify");
        double sub = nb_num(ij, "submitted_ns");
        json_object_put(ij);
        unsigned got = 0, same = 0;
        uint64_t first_hash = 0, lat[N];
        for (unsigned i = 0; i < N; i++) {
                char name[32];
                snprintf(name, sizeof(name), "listen-node%02u", i + 1);
                int st = nb_wait(l[i], 120000);
                l[i] = 0;
                struct json_object *j = st ? NULL : nb_json(&b, name);
                if (!j)
                        continue;
                uint64_t h = (uint64_t)nb_num(j, "fnv1a");
                double rcv = nb_num(j, "received_ns");
                json_object_put(j);
                if (!got)
                        first_hash = h;
                same += h == first_hash;
                lat[got++] = rcv > sub ? (uint64_t)(rcv - sub) : 0;
        }
        for (uint32_t a = 0; a < t->nadapters; a++) {
                struct ntbf_adapter_h *h;
                struct ntbf_counters c;
                if (ops->probe(be, a, &h))
                        continue;
                if (!ops->counters(h, &c)) {
                        if (t->adapters[a].node == ntbf_topo_find_node(t, "lender"))
                                tx1 += c.tx;
                        else
                                rx1 += c.rx;
                }
                ops->release(h);
        }
        qsort(lat, got, sizeof(lat[0]), cmp_u64);
        printf("multicast Identify on cluster-60: one command, group %u, 4096 bytes\n", GROUP);
        printf("  members that received it   %u of %u (%u identical)\n", got, N, same);
        printf("  transactions               %" PRIu64 " out of the lender's adapter, %" PRIu64
               " into the members' adapters\n",
               tx1 - tx0, rx1 - rx0);
        if (got)
                printf("  seen by the members after  median %.2f ms, last %.2f ms (polled every "
                       "200 us)\n",
                       (double)lat[got / 2] / 1e6, (double)lat[got - 1] / 1e6);
        if (json_path) {
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "benchmark", json_object_new_string("nvme_mcast"));
                json_object_object_add(o, "members", json_object_new_int((int)N));
                json_object_object_add(o, "received", json_object_new_int((int)got));
                json_object_object_add(o, "identical", json_object_new_int((int)same));
                json_object_object_add(o, "lender_tx", json_object_new_int64((int64_t)(tx1 - tx0)));
                json_object_object_add(o, "members_rx",
                                       json_object_new_int64((int64_t)(rx1 - rx0)));
                json_object_object_add(o, "median_seen_ns",
                                       json_object_new_int64(got ? (int64_t)lat[got / 2] : -1));
                json_object_object_add(o, "last_seen_ns",
                                       json_object_new_int64(got ? (int64_t)lat[got - 1] : -1));
                json_object_to_file_ext(json_path, o, JSON_C_TO_STRING_PRETTY);
                json_object_put(o);
        }
        ret = got == N && same == N ? 0 : 1;
out:
        for (unsigned i = 0; i < N; i++)
                if (l[i] > 0)
                        nb_wait(l[i], 0);
        if (m > 0) {
                kill(m, SIGTERM);
                nb_wait(m, 15000);
        }
        if (be)
                ops->close(be);
        ntbf_topo_free(t);
        ntbf_diags_free(&d);
        nb_down(&b);
        return ret;
}
