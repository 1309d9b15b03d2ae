/* backends/sim/simd.c: ntbfab-simd: create or attach a simulated fabric and run its device host. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntbfab/config.h"
#include "ntbfab/error.h"
#include "ntbfab/sim.h"

/*
 * Exit status follows the project's CLI conventions: 0 after a clean stop (SIGTERM or
 * SIGINT), 1 when the fabric cannot be created, attached or served, 2 on a usage error.
 * Errors are one line on stderr saying what failed and what to do.
 */

static void usage(FILE *f)
{
        fprintf(f, "usage: ntbfab-simd --config FILE [--dir DIR] [--quiet]\n"
                   "Create (or attach to) the simulated fabric of the cluster FILE describes and\n"
                   "run its device host (device models, adapter DMA engines, the reaper of dead\n"
                   "processes' resources) until SIGTERM or SIGINT.\n"
                   "  --dir DIR  instance directory (default /dev/shm/ntbfab-<uid>-<cluster>)\n");
}

int main(int argc, char **argv)
{
        const char *config = NULL, *dir = NULL;
        bool quiet = false;
        static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                                 {"dir", required_argument, NULL, 'd'},
                                                 {"quiet", no_argument, NULL, 'q'},
                                                 {"help", no_argument, NULL, 'h'},
                                                 {NULL, 0, NULL, 0}};
        for (int c; (c = getopt_long(argc, argv, "c:d:qh", longopts, NULL)) != -1;) {
                switch (c) {
                case 'c':
                        config = optarg;
                        break;
                case 'd':
                        dir = optarg;
                        break;
                case 'q':
                        quiet = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (!config || optind != argc) {
                usage(stderr);
                return 2;
        }
        struct ntbf_diags diags;
        ntbf_diags_init(&diags);
        struct ntbf_topo *t = NULL;
        int r = ntbf_config_load(config, &t, &diags);
        ntbf_diags_sort(&diags);
        ntbf_diags_print(&diags, stderr);
        ntbf_diags_free(&diags);
        if (r) {
                if (r != NTBF_ECONFIG)
                        fprintf(stderr, "ntbfab-simd: cannot load %s: %s\n", config,
                                ntbf_strerror(r));
                return 1;
        }
        char defdir[512], why[1024];
        if (!dir)
                dir = ntbf_instance_dir_default(t, defdir, sizeof(defdir));
        r = ntbf_sim_fabric_create(t, dir, why, sizeof(why));
        if (r) {
                fprintf(stderr, "ntbfab-simd: %s\n", why);
                ntbf_topo_free(t);
                return 1;
        }
        struct ntbf_backend *b;
        struct ntbf_backend_env env = {t, dir, NTBF_NONE};
        r = ntbf_sim_attach(&env, &b, why, sizeof(why));
        if (r) {
                fprintf(stderr, "ntbfab-simd: %s\n", why);
                ntbf_topo_free(t);
                return 1;
        }
        /* Signals are taken synchronously by sigwait, so every thread must block them. */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        struct ntbf_sim_devhost_opts opts = {.model_for = ntbf_sim_builtin_model};
        struct ntbf_sim_devhost *dh;
        r = ntbf_sim_devhost_start(b, &opts, &dh, why, sizeof(why));
        if (r) {
                fprintf(stderr, "ntbfab-simd: %s\n", why);
                ntbf_backend_find("sim")->close(b);
                ntbf_topo_free(t);
                return 1;
        }
        if (!quiet) {
                struct ntbf_sim_devhost_stats st;
                ntbf_sim_devhost_stats(dh, &st);
                printf("ntbfab-simd: serving cluster '%s' in %s (pid %d): %u device model%s, %u "
                       "DMA engine%s\n",
                       t->name, dir, (int)getpid(), st.models, st.models == 1 ? "" : "s",
                       st.dma_engines, st.dma_engines == 1 ? "" : "s");
                fflush(stdout);
        }
        int sig = 0;
        sigwait(&set, &sig);
        ntbf_sim_devhost_stop(dh);
        ntbf_backend_find("sim")->close(b);
        ntbf_topo_free(t);
        if (!quiet)
                printf("ntbfab-simd: stopped by %s\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
        return 0;
}
