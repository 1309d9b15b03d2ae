/* frontends/sisci-compat/src/consts.c: the constants as _SISCI_PUBLIC_CONST_<name> symbols. */
#include "abi.h"
#include "sx.h"

/*
 * Headers of the original API declare SCI_FLAG_*, SCI_Q_* and SCI_INFINITE_TIMEOUT as
 * `extern const unsigned int _SISCI_PUBLIC_CONST_<name>`; programs built against them read
 * these symbols. ntbfab's headers define the same names as plain numbers (a compatible
 * superset), and here the symbols carry exactly those numbers.
 */
#define SX_CONST(name)                                                                             \
        __attribute__((                                                                            \
            visibility("default"))) extern const unsigned int _SISCI_PUBLIC_CONST_##name;          \
        const unsigned int _SISCI_PUBLIC_CONST_##name = (name);
SX_CONSTS(SX_CONST)
