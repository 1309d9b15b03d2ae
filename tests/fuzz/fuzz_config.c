/* tests/fuzz/fuzz_config.c: libFuzzer target: any bytes through the config loader. */
#include <stddef.h>
#include <stdint.h>

#include "ntbfab/config.h"
#include "ntbfab/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct ntbf_diags d;
        struct ntbf_topo *t = NULL;
        ntbf_diags_init(&d);
        int r = ntbf_config_load_mem("fuzz.yaml", (const char *)data, size, &t, &d);
        /* The contract of config.h: a topology exactly when nothing was reported. */
        if ((r == 0) != (t != NULL) || (r == 0 && d.errors) || (r == NTBF_ECONFIG && !d.errors))
                __builtin_trap();
        ntbf_topo_free(t);
        ntbf_diags_free(&d);
        return 0;
}
