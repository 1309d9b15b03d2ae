/* bench/bench_devhost.c: the device host's idle CPU cost and how fast a model or DMA engine wakes.
 */
#include <getopt.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "ntbfab/diag.h"
#include "ntbfab/error.h"
#include "ntbfab/sim.h"
#include "simfab_mirror.h"

/*
 * docs/sim.md promises: a model polls while busy and 50 us after, then naps 1 us doubling
 * to 1 ms, so an idle model costs almost nothing and the first command after a long idle
 * waits up to about 1 ms; back-to-back commands are picked up within the spin window.
 * This measures those figures with the test mirror model (tests/unit/simfab_mirror.c).
 */

#define MiB (UINT64_C(1) << 20)

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

static double cpu_s(void)
{
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

struct dist {
        double median_us, p90_us, max_us;
};

static struct dist summarize(uint64_t *v, int n)
{
        qsort(v, (size_t)n, sizeof(*v), cmp_u64);
        return (struct dist){v[n / 2] / 1e3, v[n * 9 / 10] / 1e3, v[n - 1] / 1e3};
}

static volatile uint32_t *r32(uint8_t *regs, unsigned off)
{
        return (volatile uint32_t *)(regs + off);
}

/*
 * Ring the mirror; return ns from the ring to the model noticing it. yield: give the CPU
 * away while waiting (on a 2-CPU machine a spinning waiter can keep the model's thread
 * from running for a scheduler slice); back-to-back measurements spin.
 */
static uint64_t ring_and_wait(uint8_t *regs, bool yield)
{
        uint32_t done = *r32(regs, MIRROR_DONE);
        *(volatile uint64_t *)(regs + MIRROR_SRC) = 2 * MiB;
        *(volatile uint64_t *)(regs + MIRROR_DST) = 3 * MiB;
        *r32(regs, MIRROR_LEN) = 64;
        uint64_t t0 = now_ns();
        __atomic_store_n(r32(regs, MIRROR_DOORBELL), 1, __ATOMIC_RELEASE);
        while (__atomic_load_n(r32(regs, MIRROR_DONE), __ATOMIC_ACQUIRE) == done)
                if (yield)
                        sched_yield();
        return *(volatile uint64_t *)(regs + MIRROR_SEEN_NS) - t0;
}

static void add(json_object *o, const char *k, double v)
{
        json_object_object_add(o, k, json_object_new_double(v));
}

int main(int argc, char **argv)
{
        const char *json_path = NULL;
        int trials = 40;
        static const struct option longopts[] = {{"json", required_argument, NULL, 'j'},
                                                 {"trials", required_argument, NULL, 't'},
                                                 {NULL, 0, NULL, 0}};
        for (int c; (c = getopt_long(argc, argv, "j:t:", longopts, NULL)) != -1;) {
                if (c == 'j')
                        json_path = optarg;
                else if (c == 't')
                        trials = atoi(optarg);
                else
                        return 2;
        }
        if (trials < 5 || trials > 1000)
                trials = 40;
        struct ntbf_topo *t = ntbf_topo_new("bench-devhost", NULL);
        uint32_t a = ntbf_topo_add_node(t, "a", 4), b = ntbf_topo_add_node(t, "b", 8);
        uint32_t aa = ntbf_topo_add_adapter(t, a, "ntb0", ntbf_adapter_preset("pxh830"));
        uint32_t ba = ntbf_topo_add_adapter(t, b, "ntb0", ntbf_adapter_preset("pxh830"));
        ntbf_topo_add_link(t, (struct ntbf_port_ref){NTBF_PORT_ADAPTER, aa, 0},
                           (struct ntbf_port_ref){NTBF_PORT_ADAPTER, ba, 0});
        t->nodes[a].ram = t->nodes[b].ram = 64 * MiB;
        uint32_t d = ntbf_topo_add_device(t, a, "mirror0");
        t->devices[d].bus = 3;
        t->devices[d].bars[0] = (struct ntbf_bar){.size = 4096, .flags = NTBF_BAR_64};
        struct ntbf_diags dg;
        ntbf_diags_init(&dg);
        if (ntbf_topo_finalize(t, &dg))
                return 1;
        ntbf_diags_free(&dg);
        char dir[] = "/dev/shm/ntbfab-bench-XXXXXX", why[512];
        if (!mkdtemp(dir) || ntbf_sim_fabric_create(t, dir, why, sizeof(why)))
                return 1;
        const struct ntbf_backend_ops *ops = ntbf_backend_find("sim");
        struct ntbf_backend *be;
        struct ntbf_adapter_h *h;
        struct ntbf_backend_env env = {t, dir, NTBF_NONE};
        if (ops->open(&env, &be, NULL, 0) || ops->probe(be, 0, &h))
                return 1;
        uint8_t *regs;
        if (ntbf_sim_phys_ptr(be, 0, ntbf_device_bar_addr(&t->devices[d], 0, 0), 4096,
                              (void **)&regs))
                return 1;
        json_object *root = json_object_new_object();
        json_object_object_add(root, "bench", json_object_new_string("devhost"));
        json_object_object_add(root, "cpus",
                               json_object_new_int((int)sysconf(_SC_NPROCESSORS_ONLN)));

        /* 1. Idle cost: one model alone, then the whole host (model, 2 DMA engines, reaper). */
        for (int full = 0; full < 2; full++) {
                struct ntbf_sim_devhost_opts o = {
                    .model_for = simfab_mirror_for, .no_dma = !full, .no_reaper = !full};
                struct ntbf_sim_devhost *dh;
                if (ntbf_sim_devhost_start(be, &o, &dh, why, sizeof(why))) {
                        fprintf(stderr, "bench_devhost: %s\n", why);
                        return 1;
                }
                sleep_ms(500); /* past the spin window, naps grown to 1 ms */
                double c0 = cpu_s();
                uint64_t w0 = now_ns();
                sleep_ms(3000);
                double pct = 100.0 * (cpu_s() - c0) / ((double)(now_ns() - w0) / 1e9);
                struct ntbf_sim_devhost_stats st;
                ntbf_sim_devhost_stats(dh, &st);
                printf("idle device host, %s: %.3f%% of one CPU (%u model%s, %u DMA engine%s%s)\n",
                       full ? "everything" : "one model", pct, st.models, st.models == 1 ? "" : "s",
                       st.dma_engines, st.dma_engines == 1 ? "" : "s",
                       full ? ", reaper every 20 ms" : "");
                add(root, full ? "idle_cpu_pct_full" : "idle_cpu_pct_one_model", pct);

                if (!full) {
                        /* 2. The first command after a long idle: the model is napping. */
                        uint64_t *v = calloc((size_t)trials, sizeof(*v));
                        for (int i = 0; i < trials; i++) {
                                sleep_ms(50 + (unsigned)(i * 37) % 100);
                                v[i] = ring_and_wait(regs, true);
                        }
                        struct dist di = summarize(v, trials);
                        printf("wake after idle (50-150 ms): median %.1f us, p90 %.1f us, max %.1f "
                               "us (%d trials)\n",
                               di.median_us, di.p90_us, di.max_us, trials);
                        add(root, "wake_after_idle_median_us", di.median_us);
                        add(root, "wake_after_idle_p90_us", di.p90_us);
                        add(root, "wake_after_idle_max_us", di.max_us);
                        /* 3. Back to back: within the 50 us spin window. */
                        for (int i = 0; i < trials; i++)
                                v[i] = ring_and_wait(regs, false);
                        di = summarize(v, trials);
                        printf("back-to-back command: median %.2f us, p90 %.2f us, max %.1f us\n",
                               di.median_us, di.p90_us, di.max_us);
                        add(root, "back_to_back_median_us", di.median_us);
                        add(root, "back_to_back_max_us", di.max_us);
                        free(v);
                } else {
                        /* 4. A DMA engine after idle: a submission ends its nap (futex). */
                        uint64_t *v = calloc((size_t)trials, sizeof(*v));
                        for (int i = 0; i < trials; i++) {
                                sleep_ms(50 + (unsigned)(i * 37) % 100);
                                uint64_t t0 = now_ns(), ck;
                                int stt;
                                ops->dma_submit(h, 0, 2 * MiB, 3 * MiB, 64, (uint64_t)i);
                                while (ops->dma_poll(h, 0, &ck, &stt, 1) == 0)
                                        sched_yield();
                                v[i] = now_ns() - t0;
                        }
                        struct dist di = summarize(v, trials);
                        printf("DMA engine, submit after idle to completion: median %.1f us, p90 "
                               "%.1f us, max %.1f us\n",
                               di.median_us, di.p90_us, di.max_us);
                        add(root, "dma_after_idle_median_us", di.median_us);
                        add(root, "dma_after_idle_max_us", di.max_us);
                        free(v);
                }
                ntbf_sim_devhost_stop(dh);
        }
        if (json_path)
                json_object_to_file_ext(json_path, root, JSON_C_TO_STRING_PRETTY);
        json_object_put(root);
        ops->release(h);
        ops->close(be);
        ntbf_sim_fabric_destroy(dir);
        ntbf_topo_free(t);
        return 0;
}
