/* tools/ntbfab.c: the ntbfab command-line tool: `ntbfab VERB [OPTIONS] ...`. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fabric.h"
#include "../core/suggest.h"

static const struct {
        const struct verb *v;
        const size_t *n;
} groups[] = {
    {verbs_model, &verbs_model_count},
    {verbs_cluster, &verbs_cluster_count},
    {verbs_device, &verbs_device_count},
    {verbs_switchtec, &verbs_switchtec_count},
};

static const struct verb *lookup(const char *name)
{
        for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++)
                for (size_t i = 0; i < *groups[g].n; i++)
                        if (!strcmp(groups[g].v[i].name, name))
                                return &groups[g].v[i];
        return NULL;
}

static void usage(FILE *f)
{
        fprintf(f, "usage: ntbfab [--version] [--help] VERB [OPTIONS] [ARGS]\n\n"
                   "Share PCIe devices and memory between hosts over non-transparent bridges.\n\n"
                   "verbs:\n");
        for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++)
                for (size_t i = 0; i < *groups[g].n; i++)
                        fprintf(f, "  %-10s %s\n", groups[g].v[i].name, groups[g].v[i].summary);
        fprintf(f, "\nEvery verb takes --json for machine-readable output (docs/cli.md) and "
                   "--help.\nExit status: 0 success, 1 operational failure, 2 usage error.\n");
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                usage(stderr);
                return EXIT_USAGE;
        }
        if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
                if (argc > 2 && lookup(argv[2]))
                        return cli_help(lookup(argv[2]));
                usage(stdout);
                return EXIT_OK;
        }
        if (!strcmp(argv[1], "--version")) {
                printf("ntbfab %s\n", NTBF_VERSION);
                return EXIT_OK;
        }
        const struct verb *v = lookup(argv[1]);
        if (!v) {
                struct ntbf__suggest s;
                ntbf__suggest_init(&s, argv[1]);
                for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++)
                        for (size_t i = 0; i < *groups[g].n; i++)
                                ntbf__suggest_add(&s, groups[g].v[i].name);
                const char *best = ntbf__suggest_result(&s);
                if (best)
                        cli_error("unknown verb '%s'; did you mean '%s'? (see 'ntbfab --help')",
                                  argv[1], best);
                else
                        cli_error("unknown verb '%s' (see 'ntbfab --help')", argv[1]);
                return EXIT_USAGE;
        }
        if (cli_wants_help(argc - 1, argv + 1))
                return cli_help(v);
        return v->run(argc - 1, argv + 1);
}
