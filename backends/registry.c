/* backends/registry.c: the one table of backends compiled into libntbfab, by name. */
#include <string.h>

#include "ntbfab/backend.h"

extern const struct ntbf_backend_ops ntbf__sim_ops;
extern const struct ntbf_backend_ops ntbf__ivshmem_ops;

/* Add a backend here (and nowhere else): the simulated fabric is the default and first. */
static const struct ntbf_backend_ops *const backends[] = {
    &ntbf__sim_ops,
    &ntbf__ivshmem_ops,
};

const struct ntbf_backend_ops *ntbf_backend_at(size_t i)
{
        return i < sizeof(backends) / sizeof(backends[0]) ? backends[i] : NULL;
}

const struct ntbf_backend_ops *ntbf_backend_find(const char *name)
{
        for (size_t i = 0; name && i < sizeof(backends) / sizeof(backends[0]); i++)
                if (!strcmp(backends[i]->name, name))
                        return backends[i];
        return NULL;
}
