/* tests/integration/simfab_proc.c: one process of a multi-process sim test, driven line by line on
 * stdin. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ntbfab/error.h"
#include "ntbfab/sim.h"
#include "simfab_mirror.h"
#include "simfab_topos.h"

/*
 * Usage: simfab_proc DIR TOPOLOGY NODE ("a", "b" or "any"). The process attaches as that
 * node and answers each command line with one line: "ok [values]", or an error. The
 * commands are the few things a test needs another process to do; see the table below.
 */

static const struct ntbf_backend_ops *ops;
static struct ntbf_backend *be;
static struct ntbf_topo *topo;
static struct ntbf_adapter_h *h[8];
static struct ntbf_mem mem;
static uint8_t *map;
static uint64_t map_size;
static struct ntbf_irq irq;
static struct ntbf_sim_devhost *dh;
static uint64_t db_bits;

static void reply(const char *fmt, ...) NTBF_PRINTF(1, 2);
static void reply(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
        fflush(stdout);
}

static uint8_t pat(uint64_t seed, uint64_t i)
{
        return (uint8_t)(seed + i * 7 + (i >> 8));
}

static uint64_t now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static bool is_ones(const volatile uint8_t *p, uint64_t n)
{
        for (uint64_t i = 0; i < n; i++)
                if (p[i] != 0xff)
                        return false;
        return true;
}

static bool is_pat(const volatile uint8_t *p, uint64_t n, uint64_t seed)
{
        for (uint64_t i = 0; i < n; i++)
                if (p[i] != pat(seed, i))
                        return false;
        return true;
}

static void on_db(void *ctx, uint32_t vector, uint64_t bits)
{
        (void)ctx;
        (void)vector;
        db_bits |= bits;
}

static const struct ntbf_event_ops evops = {NULL, on_db, NULL, NULL};

static bool wait_fd(int fd, int ms)
{
        struct pollfd p = {fd, POLLIN, 0};
        return poll(&p, 1, ms) == 1;
}

/* Hammer the tables until killed: every operation that takes a lock or writes an entry. */
static void hammer(uint32_t a)
{
        reply("started");
        unsigned seed = (unsigned)getpid();
        struct ntbf_mem ms[8] = {0};
        struct ntbf_irq is[8] = {0};
        bool mu[8] = {0}, iu[8] = {0};
        uint32_t peer = a ^ 1;
        for (;;) {
                unsigned r = (unsigned)rand_r(&seed);
                unsigned k = r % 8;
                switch ((r >> 8) % 4) {
                case 0: {
                        struct ntbf_xlat x = {topo->adapters[peer].node, peer,
                                              (uint64_t)(r % 64) << 20, NTBF_NONE,
                                              topo->adapters[a].lut_entry_size};
                        ops->xlat_set(h[a], (r >> 12) % 256, &x);
                        ops->xlat_clear(h[a], (r >> 16) % 256);
                        break;
                }
                case 1: {
                        struct ntbf_rid rid = {topo->adapters[a].node, (uint16_t)((k + 1) << 8),
                                               0xfff8};
                        if (ops->rid_add(h[a], &rid, NULL))
                                ops->rid_del(h[a], &rid);
                        break;
                }
                case 2:
                        if (mu[k]) {
                                ops->mem_free(h[a], &ms[k]);
                                mu[k] = false;
                        } else {
                                mu[k] = !ops->mem_alloc(h[a], (uint64_t)(1 + k) << 16, 0, &ms[k]);
                        }
                        break;
                case 3:
                        if (iu[k]) {
                                ops->irq_free(h[a], &is[k]);
                                iu[k] = false;
                        } else {
                                iu[k] = !ops->irq_alloc(h[a], &is[k]);
                        }
                        break;
                }
        }
}

static void command(char *line)
{
        char cmd[32] = "";
        unsigned long long v[6] = {0};
        int n = sscanf(line, "%31s %lli %lli %lli %lli %lli %lli", cmd, &v[0], &v[1], &v[2], &v[3],
                       &v[4], &v[5]);
        int r = 0;
        if (n < 1)
                return;
        if (!strcmp(cmd, "probe")) {
                r = ops->probe(be, (uint32_t)v[0], &h[v[0]]);
        } else if (!strcmp(cmd, "alloc")) {
                r = ops->mem_alloc(h[v[0]], v[1], 0, &mem);
                if (!r) {
                        reply("ok 0x%llx", (unsigned long long)mem.bus_addr);
                        return;
                }
        } else if (!strcmp(cmd, "fill")) {
                for (uint64_t i = 0; i < v[1]; i++)
                        ((uint8_t *)mem.addr)[v[0] + i] = pat(v[2], i);
        } else if (!strcmp(cmd, "check")) {
                if (!is_pat((uint8_t *)mem.addr + v[0], v[1], v[2])) {
                        reply("bad");
                        return;
                }
        } else if (!strcmp(cmd, "iommu")) {
                r = ops->iommu_map(h[v[0]], v[1], v[2], v[3]);
        } else if (!strcmp(cmd, "slot")) {
                struct ntbf_xlat x = {topo->adapters[v[2]].node, (uint32_t)v[2], v[3], NTBF_NONE,
                                      topo->adapters[v[0]].lut_entry_size};
                r = ops->xlat_set(h[v[0]], (uint32_t)v[1], &x);
        } else if (!strcmp(cmd, "rid")) {
                struct ntbf_rid rid = {topo->adapters[v[0]].node, (uint16_t)v[1], (uint16_t)v[2]};
                r = ops->rid_add(h[v[0]], &rid, NULL);
        } else if (!strcmp(cmd, "map")) {
                void *p;
                r = ops->map_window(h[v[0]], 0, v[1], v[2], 0, &p);
                map = p;
                map_size = v[2];
        } else if (!strcmp(cmd, "write")) {
                for (uint64_t i = 0; i < v[1]; i++)
                        map[v[0] + i] = pat(v[2], i);
        } else if (!strcmp(cmd, "readcheck")) {
                reply(is_pat(map + v[0], v[1], v[2]) ? "ok"
                      : is_ones(map + v[0], v[1])    ? "ones"
                                                     : "bad");
                return;
        } else if (!strcmp(cmd, "waitones") || !strcmp(cmd, "waitpattern")) {
                bool ones = !strcmp(cmd, "waitones");
                uint64_t t0 = now_us(), limit = (ones ? v[2] : v[3]) * 1000;
                for (;;) {
                        bool hit =
                            ones ? is_ones(map + v[0], v[1]) : is_pat(map + v[0], v[1], v[2]);
                        uint64_t dt = now_us() - t0;
                        if (hit) {
                                reply("ok %llu", (unsigned long long)dt);
                                return;
                        }
                        if (dt > limit) {
                                reply("timeout");
                                return;
                        }
                }
        } else if (!strcmp(cmd, "events")) {
                r = ops->set_events(h[v[0]], &evops, NULL);
        } else if (!strcmp(cmd, "waitdb")) {
                uint64_t t0 = now_us();
                while (!db_bits && now_us() - t0 < v[1] * 1000)
                        if (wait_fd(ops->event_fd(h[v[0]]), 10))
                                ops->process_events(h[v[0]]);
                if (!db_bits) {
                        reply("timeout");
                        return;
                }
                reply("ok 0x%llx %llu", (unsigned long long)db_bits,
                      (unsigned long long)(now_us() - t0));
                return;
        } else if (!strcmp(cmd, "ringdb")) {
                r = ops->peer_db_set(h[v[0]], (uint32_t)v[1], v[2]);
        } else if (!strcmp(cmd, "irq")) {
                r = ops->irq_alloc(h[v[0]], &irq);
                if (!r) {
                        reply("ok %u", irq.data);
                        return;
                }
        } else if (!strcmp(cmd, "waitirq")) {
                uint64_t cnt = 0;
                if (!wait_fd(irq.fd, (int)v[0]) || read(irq.fd, &cnt, 8) != 8) {
                        reply("timeout");
                        return;
                }
                reply("ok %llu", (unsigned long long)cnt);
                return;
        } else if (!strcmp(cmd, "fault")) {
                struct ntbf_fault f = {(enum ntbf_fault_kind)v[0], (uint32_t)v[1]};
                r = ops->fault(be, &f);
        } else if (!strcmp(cmd, "devhost")) {
                struct ntbf_sim_devhost_opts o = {.model_for = simfab_mirror_for};
                char why[256];
                r = ntbf_sim_devhost_start(be, &o, &dh, why, sizeof(why));
                if (r) {
                        reply("err %s", why);
                        return;
                }
        } else if (!strcmp(cmd, "hammer")) {
                hammer((uint32_t)v[0]);
        } else if (!strcmp(cmd, "checkfabric")) {
                char why[512];
                if (ntbf_sim_check(be, why, sizeof(why))) {
                        reply("bad %s", why);
                        return;
                }
        } else if (!strcmp(cmd, "owned")) {
                struct ntbf_sim_owned o;
                r = ntbf_sim_owned(be, (uint32_t)v[0], (int)v[1], &o);
                if (!r) {
                        reply("ok %u %u", o.mem, o.irqs);
                        return;
                }
        } else if (!strcmp(cmd, "quit")) {
                if (dh)
                        ntbf_sim_devhost_stop(dh);
                for (int i = 0; i < 8; i++)
                        if (h[i])
                                ops->release(h[i]);
                ops->close(be);
                ntbf_topo_free(topo);
                reply("ok");
                exit(0);
        } else {
                reply("err unknown command %s", cmd);
                return;
        }
        if (r)
                reply("err %d %s", r, ntbf_strerror(r));
        else
                reply("ok");
}

int main(int argc, char **argv)
{
        if (argc != 4) {
                fprintf(stderr, "usage: simfab_proc DIR TOPOLOGY NODE\n");
                return 2;
        }
        topo = itopo(argv[2]);
        ops = ntbf_backend_find("sim");
        if (!topo || !ops)
                return 1;
        uint32_t node = strcmp(argv[3], "any") ? ntbf_topo_find_node(topo, argv[3]) : NTBF_NONE;
        struct ntbf_backend_env env = {topo, argv[1], node};
        char why[512];
        int r = ntbf_sim_attach(&env, &be, why, sizeof(why));
        if (r) {
                reply("err %s", why);
                return 1;
        }
        reply("ready %d", (int)getpid());
        char line[512];
        while (fgets(line, sizeof(line), stdin))
                command(line);
        return 0;
}
