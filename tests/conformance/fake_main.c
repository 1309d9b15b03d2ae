/* tests/conformance/fake_main.c: ntbfab-conformance-fake: the suite on the linux-ntb backend, or
 * the switchtec backend composed on it, over the unit tier's fake ntbfab_ntb device pair
 * (tests/unit/fake_ntbdev.c) and, for switchtec, the register model of a Switchtec switch
 * (tests/switchtec/model.c) running in a thread of this process. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_ntbdev.h"
#include "model.h"

/*
 * The suite itself is main.c, compiled in as ntbf_conformance_main. This program links the
 * backends statically (not the shared library) so that it can point the linux-ntb backend's
 * system calls at the fake devices (lntb_sys_current) before the suite opens it.
 *
 *   ntbfab-conformance-fake [--lut | --wide] [--stx-model] -- SUITE OPTIONS...
 *
 * --lut lays the fake's windows out as a Switchtec partition's LUT window of four 1 MiB
 * entries: three Linux windows one after the other, after the reserved LUT 0, the window of
 * device 0 at 0x800000000 and of device 1 at 0x800800000. --wide gives each device two
 * windows of 4 MiB (device 0 at 0x800000000 and 0x801000000, device 1 at 0x802000000 and
 * 0x803000000). The linux-ntb backend's memory for export comes from pools as large as the
 * peer's windows, and the suite's mem check holds 1 MiB and a 2 MiB-aligned page at once:
 * the fake's default 1 MiB windows are too small for it. --stx-model formats a model switch
 * (NT partitions 0 and 1, 16 requester entries each, BARs of 8 MiB) in stx.gas of a fresh
 * instance directory, runs it, and gives the suite that directory (--dir); the cluster
 * file's `switchtec: {gas: stx.gas}` is taken there.
 */
int ntbf_conformance_main(int argc, char **argv);

static uint8_t *gas;
static struct stxm *model;

static void *model_thread(void *arg)
{
        (void)arg;
        stxm_run(model, -1, 200);
        return NULL;
}

static void rm_dir(const char *dir)
{
        DIR *d = opendir(dir);
        if (!d)
                return;
        struct dirent *e;
        char p[512];
        while ((e = readdir(d)))
                if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
                        unlink(p);
                }
        closedir(d);
        rmdir(dir);
}

int main(int argc, char **argv)
{
        bool lut = false, wide = false, stx = false;
        int i = 1;
        for (; i < argc && strcmp(argv[i], "--"); i++) {
                if (!strcmp(argv[i], "--lut"))
                        lut = true;
                else if (!strcmp(argv[i], "--wide"))
                        wide = true;
                else if (!strcmp(argv[i], "--stx-model"))
                        stx = true;
                else {
                        fprintf(stderr, "usage: ntbfab-conformance-fake [--lut] [--stx-model] -- "
                                        "SUITE OPTIONS...\n");
                        return 2;
                }
        }
        if (i == argc) {
                fprintf(stderr, "ntbfab-conformance-fake: no -- before the suite's options\n");
                return 2;
        }
        const uint64_t mib = UINT64_C(1) << 20;
        if (lut) {
                struct fake_layout l = {3, mib, mib, 8 * mib, FAKE_BAR + mib};
                fake_ntb_layout(&l);
        } else if (wide) {
                struct fake_layout l = {2, 4 * mib, 16 * mib, 32 * mib, FAKE_BAR};
                fake_ntb_layout(&l);
        }
        lntb_sys_current = fake_ntb_init();

        char dir[] = "/tmp/ntbfab-cf-stx-XXXXXX";
        pthread_t th;
        if (stx) {
                if (!mkdtemp(dir)) {
                        perror("ntbfab-conformance-fake: mkdtemp");
                        return 1;
                }
                char path[512];
                snprintf(path, sizeof(path), "%s/stx.gas", dir);
                struct stxm_params p = {.ep_map = 0x3,
                                        .partition_id = 0,
                                        .lut_entries = 512,
                                        .rid_size = 16,
                                        .host_rid = 0x0008,
                                        .bar_size = 8 * mib};
                if (!(gas = stxm_create(path, &p))) {
                        perror("ntbfab-conformance-fake: the model's file");
                        return 1;
                }
                model = stxm_new(gas);
                if (!model || pthread_create(&th, NULL, model_thread, NULL)) {
                        fprintf(stderr, "ntbfab-conformance-fake: cannot start the model\n");
                        return 1;
                }
                /* The model ticks every 200 us: poll every ms; 60000 polls bound the wait only (a
                 * loaded machine may not run the model thread for seconds). */
                setenv("NTBFAB_STX_POLL", "1000,60000", 0);
        }

        /* The suite's arguments: argv[0], what follows --, and --dir with the model. */
        char **av = calloc((size_t)argc + 3, sizeof(*av));
        int n = 0;
        av[n++] = argv[0];
        for (int k = i + 1; k < argc; k++)
                av[n++] = argv[k];
        if (stx) {
                av[n++] = "--dir";
                av[n++] = dir;
        }
        av[n] = NULL;
        int rc = ntbf_conformance_main(n, av);
        free(av);

        if (stx) {
                __atomic_store_n((uint32_t *)(gas + STXM_STOP), 1, __ATOMIC_RELEASE);
                pthread_join(th, NULL);
                stxm_free(model);
                munmap(gas, STXM_FILE_SIZE);
                rm_dir(dir);
        }
        fake_ntb_fini();
        return rc;
}
