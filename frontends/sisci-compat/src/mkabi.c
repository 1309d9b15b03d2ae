/* frontends/sisci-compat/src/mkabi.c: writes libsisci's version script and aliases from abi.h. */
#include <stdio.h>
#include <string.h>

#include "abi.h"

/*
 * mkabi map FILE    the version script: every MT and ST name, every constant and the plain
 *                   exports, nothing else
 * mkabi alias FILE  an implicit linker script: each ST name is the MT name's address
 *
 * Both come from the same two lists, so what is exported and what is aliased cannot differ;
 * the library links with --no-undefined-version, so a listed name without a definition (or
 * an alias whose target is missing) fails the link instead of silently disappearing.
 */

#define MAP_FUNC(name)                                                                             \
        fprintf(f, "    _SISCI_PUBLIC_FUNC_MT_%s;\n    _SISCI_PUBLIC_FUNC_ST_%s;\n", #name, #name);
#define MAP_CONST(name) fprintf(f, "    _SISCI_PUBLIC_CONST_%s;\n", #name);
#define MAP_PLAIN(name) fprintf(f, "    %s;\n", #name);
#define ALIAS(name)                                                                                \
        fprintf(f, "_SISCI_PUBLIC_FUNC_ST_%s = _SISCI_PUBLIC_FUNC_MT_%s;\n", #name, #name);

int main(int argc, char **argv)
{
        if (argc != 3 || (strcmp(argv[1], "map") && strcmp(argv[1], "alias"))) {
                fprintf(stderr, "usage: mkabi map|alias FILE\n");
                return 2;
        }
        FILE *f = fopen(argv[2], "w");
        if (!f) {
                perror(argv[2]);
                return 1;
        }
        if (!strcmp(argv[1], "map")) {
                fprintf(f, "/* libsisci's exports, generated from src/abi.h by mkabi. */\n");
                fprintf(f, "SISCI_5.11 {\n  global:\n");
                SX_FUNCS(MAP_FUNC)
                SX_CONSTS(MAP_CONST)
                SX_PLAIN(MAP_PLAIN)
                fprintf(f, "  local:\n    *;\n};\n");
        } else {
                fprintf(f, "/* The single-threaded names of libsisci, generated from src/abi.h by "
                           "mkabi. */\n");
                SX_FUNCS(ALIAS)
        }
        if (fclose(f)) {
                perror(argv[2]);
                return 1;
        }
        return 0;
}
