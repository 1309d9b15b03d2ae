/* bench/bench_sisci.c: libsisci's figures: remote-mapping memcpy, ping-pong, interrupts, DMA. */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * A two-node cluster (Dolphin PXH830 adapters back to back) brought up with the built
 * binaries in a fresh directory (ports 7780-7781), and the libsisci examples run as server
 * and client processes on the two nodes, each reporting JSON:
 *   - memcpy into a mapped remote segment by node b against memcpy into the same segment by
 *     node a, whose memory it is, in turns (memcpy_bw; 64 MiB, 21 rounds, medians): their
 *     ratio; and as a control the same with both processes on node a (no NTB on the way:
 *     what the machine's noise alone makes of the ratio);
 *   - 4-byte ping-pong through remote segments (pingpong): median round trip;
 *   - interrupt and data-interrupt round trips (intlat);
 *   - SCIStartDmaTransfer bandwidth by size, 4 KiB to 64 MiB (dma).
 * Figures are printed and written to --json FILE; nothing is asserted.
 */

static const char *yaml = "cluster: {name: bench-sisci, backend: sim}\n"
                          "nodes:\n"
                          "  - name: a\n"
                          "    id: 4\n"
                          "    address: 127.0.0.1:7780\n"
                          "    ram: 2GiB\n"
                          "    adapters:\n"
                          "      - {name: ntb0, model: pxh830, window: 1GiB}\n"
                          "  - name: b\n"
                          "    id: 8\n"
                          "    address: 127.0.0.1:7781\n"
                          "    ram: 2GiB\n"
                          "    adapters:\n"
                          "      - {name: ntb0, model: pxh830, window: 1GiB}\n"
                          "links:\n"
                          "  - [a.ntb0, b.ntb0]\n";

static char dir[64], inst[128], ex[1024];

static int sh(const char *cmd)
{
        int st = system(cmd);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The server in the background on node a. */
static pid_t server(const char *prog, const char *args)
{
        char cmd[2048];
        snprintf(cmd, sizeof(cmd), "exec %s/sisci-%s %s > %s/server.log 2>&1", ex, prog, args, dir);
        pid_t pid = fork();
        if (!pid) {
                setenv("NTBFAB_NODE", "a", 1);
                execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
                _exit(127);
        }
        return pid;
}

/* The client on node; its JSON output, parsed (NULL on failure). */
static struct json_object *client(const char *prog, const char *args, const char *node)
{
        char cmd[2048];
        snprintf(cmd, sizeof(cmd), "NTBFAB_NODE=%s timeout 300 %s/sisci-%s %s -json", node, ex,
                 prog, args);
        FILE *p = popen(cmd, "r");
        if (!p)
                return NULL;
        static char out[65536];
        size_t n = fread(out, 1, sizeof(out) - 1, p);
        out[n] = 0;
        int st = pclose(p);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) {
                fprintf(stderr, "bench_sisci: %s %s failed:\n%s", prog, args, out);
                return NULL;
        }
        return json_tokener_parse(out);
}

/* A server on node a and a client on node cnode. */
static struct json_object *pair_on(const char *prog, const char *sargs, const char *cargs,
                                   const char *cnode)
{
        pid_t s = server(prog, sargs);
        struct json_object *r = client(prog, cargs, cnode);
        int st;
        if (!r)
                kill(s, SIGKILL);
        waitpid(s, &st, 0);
        return r;
}

static struct json_object *pair(const char *prog, const char *sargs, const char *cargs)
{
        return pair_on(prog, sargs, cargs, "b");
}

static double num(struct json_object *o, const char *k)
{
        struct json_object *x;
        return o && json_object_object_get_ex(o, k, &x) ? json_object_get_double(x) : -1;
}

int main(int argc, char **argv)
{
        const char *json_path = NULL, *build = "build";
        static const struct option lo[] = {{"json", required_argument, NULL, 'j'},
                                           {"build", required_argument, NULL, 'b'},
                                           {NULL, 0, NULL, 0}};
        for (int c; (c = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
                if (c == 'j')
                        json_path = optarg;
                else if (c == 'b')
                        build = optarg;
                else {
                        fprintf(stderr, "usage: bench_sisci [--json FILE] [--build DIR]\n");
                        return 2;
                }
        }
        snprintf(dir, sizeof(dir), "/dev/shm/ntbfab-bench-sisci-XXXXXX");
        if (!mkdtemp(dir)) {
                perror("mkdtemp");
                return 1;
        }
        snprintf(inst, sizeof(inst), "%s/inst", dir);
        snprintf(ex, sizeof(ex), "%s/frontends/sisci-compat", build);
        char path[256], cmd[4096];
        snprintf(path, sizeof(path), "%s/cluster.yaml", dir);
        FILE *f = fopen(path, "w");
        if (!f)
                return 1;
        fputs(yaml, f);
        fclose(f);
        snprintf(cmd, sizeof(cmd),
                 "NTBFAB_DAEMON=%s/daemon/ntbfabd NTBFAB_SIMD=%s/ntbfab-simd %s/tools/ntbfab up %s "
                 "--dir %s > %s/up.log 2>&1",
                 build, build, build, path, inst, dir);
        if (sh(cmd)) {
                fprintf(stderr, "bench_sisci: cannot bring the cluster up (%s/up.log)\n", dir);
                return 1;
        }
        setenv("NTBFAB_DIR", inst, 1);

        struct json_object *bw = pair("memcpy_bw", "-rn 8 -server -size 67108864 -cpu 1",
                                      "-rn 4 -size 67108864 -rounds 21 -cpu 1");
        struct json_object *bw0 = pair_on("memcpy_bw", "-rn 4 -server -size 67108864 -cpu 1",
                                          "-rn 4 -size 67108864 -rounds 21 -cpu 1", "a");
        struct json_object *pp =
            pair("pingpong", "-rn 8 -server -loops 100000", "-rn 4 -loops 100000");
        struct json_object *in = pair("intlat", "-rn 8 -server -loops 2000", "-rn 4 -loops 2000");
        struct json_object *di = pair("intlat", "-rn 8 -server -data -size 4 -loops 2000",
                                      "-rn 4 -data -size 4 -loops 2000");
        struct json_object *dma =
            pair("dma", "-rn 8 -server -max 67108864", "-rn 4 -min 4096 -max 67108864");

        printf("libsisci on the simulated fabric (two nodes, PXH830 back to back)\n");
        printf("  memcpy into one 64 MiB segment of node a, in turns, median of 21 rounds:\n"
               "    from node b through the NTB %.0f MB/s, from node a %.0f MB/s, "
               "remote/local %.3f\n",
               num(bw, "remote_MBps"), num(bw, "local_MBps"), num(bw, "ratio"));
        printf("    control, two processes of node a: %.0f MB/s and %.0f MB/s, ratio %.3f\n",
               num(bw0, "remote_MBps"), num(bw0, "local_MBps"), num(bw0, "ratio"));
        printf("  4-byte ping-pong through remote segments: median %.3f us, p99 %.3f us "
               "(100000 round trips)\n",
               num(pp, "median_us"), num(pp, "p99_us"));
        printf("  interrupt round trip: median %.1f us, p99 %.1f us\n", num(in, "median_us"),
               num(in, "p99_us"));
        printf("  data-interrupt round trip (4 bytes): median %.1f us, p99 %.1f us\n",
               num(di, "median_us"), num(di, "p99_us"));
        printf("  SCIStartDmaTransfer + SCIWaitForDMAQueue (adapter DMA engine):\n");
        printf("  %12s %12s %12s\n", "bytes", "us", "MB/s");
        for (size_t i = 0; dma && i < json_object_array_length(dma); i++) {
                struct json_object *r = json_object_array_get_idx(dma, i);
                printf("  %12.0f %12.1f %12.1f\n", num(r, "bytes"), num(r, "us"), num(r, "MBps"));
        }
        if (json_path) {
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "memcpy", bw);
                json_object_object_add(o, "memcpy_control", bw0);
                json_object_object_add(o, "pingpong", pp);
                json_object_object_add(o, "interrupt", in);
                json_object_object_add(o, "data_interrupt", di);
                json_object_object_add(o, "dma", dma);
                FILE *j = fopen(json_path, "w");
                if (j) {
                        fprintf(j, "%s\n",
                                json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
                        fclose(j);
                }
                json_object_put(o);
        } else {
                json_object_put(bw);
                json_object_put(bw0);
                json_object_put(pp);
                json_object_put(in);
                json_object_put(di);
                json_object_put(dma);
        }
        snprintf(cmd, sizeof(cmd), "%s/tools/ntbfab down --dir %s > /dev/null 2>&1; rm -rf %s",
                 build, inst, dir);
        sh(cmd);
        return bw && bw0 && pp && in && di && dma ? 0 : 1;
}
