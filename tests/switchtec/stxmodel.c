/* tests/switchtec/stxmodel.c: the register model as a process, over a GAS file and an MRPC
 * socket (docs/switchtec.md, "The register model"). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "model.h"

static void usage(FILE *f)
{
        fprintf(f,
                "usage: ntbfab-stxmodel --gas FILE [--format] [--mrpc SOCKET] [--ep-map MASK]\n"
                "         [--partition N] [--lut-entries N] [--rid-size N] [--xlink N]\n"
                "         [--bar-size BYTES] [--bar-lut BAR,COUNT,LOG2[,DIRSIZE]] [--tick-us US]\n"
                "Model a Switchtec switch's NT partitions in FILE (created and laid out with\n"
                "--format), serving MRPC GAS_READ/GAS_WRITE on SOCKET; runs until the file's\n"
                "stop register is set or SIGTERM. --bar-lut sets BAR up in every NT partition\n"
                "at format, as a switch's configuration file would: COUNT LUT entries of\n"
                "2^LOG2 bytes at its start, then a direct window of DIRSIZE bytes.\n");
}

static volatile sig_atomic_t stop;
static uint8_t *gas_map;

static void on_term(int sig)
{
        (void)sig;
        __atomic_store_n((uint32_t *)(gas_map + STXM_STOP), 1, __ATOMIC_RELEASE);
        stop = 1;
}

int main(int argc, char **argv)
{
        const char *gas = NULL, *sock = NULL;
        bool format = false;
        struct stxm_params p = {.ep_map = 0x3,
                                .partition_id = 0,
                                .lut_entries = 512,
                                .rid_size = 256,
                                .host_rid = 0x0008,
                                .bar_size = 64ull << 20};
        uint32_t tick_us = 1000;
        static const struct option opts[] = {{"gas", 1, 0, 'g'},
                                             {"format", 0, 0, 'f'},
                                             {"mrpc", 1, 0, 'm'},
                                             {"ep-map", 1, 0, 'e'},
                                             {"partition", 1, 0, 'p'},
                                             {"lut-entries", 1, 0, 'l'},
                                             {"rid-size", 1, 0, 'r'},
                                             {"xlink", 1, 0, 'x'},
                                             {"bar-size", 1, 0, 'b'},
                                             {"tick-us", 1, 0, 't'},
                                             {"help", 0, 0, 'h'},
                                             {"bar-lut", 1, 0, 'L'},
                                             {0, 0, 0, 0}};
        int c;
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 'g':
                        gas = optarg;
                        break;
                case 'f':
                        format = true;
                        break;
                case 'm':
                        sock = optarg;
                        break;
                case 'e':
                        p.ep_map = strtoull(optarg, NULL, 0);
                        break;
                case 'p':
                        p.partition_id = (uint32_t)strtoul(optarg, NULL, 0);
                        break;
                case 'l':
                        p.lut_entries = (uint16_t)strtoul(optarg, NULL, 0);
                        break;
                case 'r':
                        p.rid_size = (uint16_t)strtoul(optarg, NULL, 0);
                        break;
                case 'x':
                        p.xlink_part = (uint32_t)strtoul(optarg, NULL, 0);
                        break;
                case 'b':
                        p.bar_size = strtoull(optarg, NULL, 0);
                        break;
                case 't':
                        tick_us = (uint32_t)strtoul(optarg, NULL, 0);
                        break;
                case 'L': {
                        unsigned long long dir = 0;
                        if (sscanf(optarg, "%u,%u,%u,%lli", &p.lut_bar, &p.lut_count, &p.lut_log2,
                                   (long long *)&dir) < 3 ||
                            p.lut_bar > 5 || !p.lut_count || p.lut_count > STX_LUT_MAX ||
                            p.lut_log2 < 12 || p.lut_log2 > 63) {
                                fprintf(stderr,
                                        "ntbfab-stxmodel: --bar-lut takes BAR (0..5),COUNT "
                                        "(1..512),LOG2 (12..63)[,DIRSIZE], not '%s'\n",
                                        optarg);
                                return 2;
                        }
                        p.dir_size = dir;
                        break;
                }
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (!gas || optind != argc) {
                usage(stderr);
                return 2;
        }
        int fd = open(gas, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0 || (format && ftruncate(fd, 0)) || ftruncate(fd, STXM_FILE_SIZE)) {
                fprintf(stderr, "ntbfab-stxmodel: %s: %s\n", gas, strerror(errno));
                return 1;
        }
        gas_map = mmap(NULL, STXM_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (gas_map == MAP_FAILED) {
                fprintf(stderr, "ntbfab-stxmodel: cannot map %s: %s\n", gas, strerror(errno));
                return 1;
        }
        uint64_t magic;
        memcpy(&magic, gas_map + STXM_MAGIC, 8);
        if (format || magic != STXM_MAGIC_VAL)
                stxm_format(gas_map, &p);
        __atomic_store_n((uint32_t *)(gas_map + STXM_STOP), 0, __ATOMIC_RELEASE);
        int lfd = -1;
        if (sock) {
                struct sockaddr_un a = {.sun_family = AF_UNIX};
                if (strlen(sock) >= sizeof(a.sun_path)) {
                        fprintf(stderr, "ntbfab-stxmodel: socket path too long: %s\n", sock);
                        return 1;
                }
                strcpy(a.sun_path, sock);
                unlink(sock);
                lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
                if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 8)) {
                        fprintf(stderr, "ntbfab-stxmodel: %s: %s\n", sock, strerror(errno));
                        return 1;
                }
        }
        struct sigaction sa = {.sa_handler = on_term};
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        struct stxm *m = stxm_new(gas_map);
        if (!m)
                return 1;
        /* Ready: the file is laid out and the socket listens. */
        printf("ready\n");
        fflush(stdout);
        stxm_run(m, lfd, tick_us);
        stxm_free(m);
        if (sock)
                unlink(sock);
        return 0;
}
