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

/* scdoc(5) text: every character scdoc would read as markup is escaped. */
static void scdoc_text(const char *s)
{
        for (; *s; s++) {
                if (*s == '*' || *s == '_' || *s == '\\')
                        putchar('\\');
                putchar(*s);
        }
}

/*
 * The manual page of a verb, ntbfab-VERB(8), in scdoc's format: made at build time from the
 * table every `ntbfab VERB --help` prints, so the page says what the program does.
 */
static int print_scdoc(const struct verb *v)
{
        printf("ntbfab-%s(8)\n\n# NAME\n\nntbfab-%s - ", v->name, v->name);
        scdoc_text(v->summary);
        printf("\n\n# SYNOPSIS\n\n*ntbfab %s* ", v->name);
        scdoc_text(v->args);
        printf("\n\n# DESCRIPTION\n\n");
        scdoc_text(v->summary);
        printf("\n");
        if (v->help[0]) {
                printf("\n```\n");
                const char *h = v->help[0] == '\n' ? v->help + 1 : v->help;
                fputs(h, stdout);
                printf("%s```\n", h[0] && h[strlen(h) - 1] == '\n' ? "" : "\n");
        }
        printf("\nEvery verb takes *--json* for machine-readable output and *--help*.\n\n"
               "# EXIT STATUS\n\n0 success, 1 operational failure, 2 usage error.\n\n"
               "# SEE ALSO\n\n*ntbfab*(8), *ntbfabd*(8), *ntbfab-cluster*(5). docs/cli.md in "
               "the source tree describes every verb and its JSON output.\n");
        return EXIT_OK;
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
        /* Build time: `ntbfab --scdoc VERB` prints the verb's manual page (man/meson.build). */
        if (!strcmp(argv[1], "--scdoc") && argc == 3 && lookup(argv[2]))
                return print_scdoc(lookup(argv[2]));
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
