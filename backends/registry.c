/*
 * backends/registry.c: the one table of backends, by name (include/ntbfab/backend.h,
 * "The registry of backends"; docs/writing-a-backend.md, "Registering the backend").
 *
 * Every backend the project knows is listed here and nowhere else: the cluster file's
 * loader, its "did you mean", `ntbfab up`, the daemon, the conformance suite and the tests
 * take the names from this table. A backend not built on this platform keeps its entry with
 * ops NULL and a sentence saying why; its meson.build, when it builds it, passes
 * -DNTBF_HAVE_<NAME> to this file alone, and the single #if below picks its vtable.
 */
#include <stdio.h>
#include <string.h>

#include "ntbfab/backend.h"

extern const struct ntbf_backend_ops ntbf__sim_ops;
extern const struct ntbf_backend_ops ntbf__ivshmem_ops;
extern const struct ntbf_backend_ops ntbf__linux_ntb_ops;
extern const struct ntbf_backend_ops ntbf__dolphin_ops;
extern const struct ntbf_backend_ops ntbf__switchtec_ops;

#define PLANNED "planned (issue 11): no such backend is built into this libntbfab yet"

/* The simulated fabric is the default and first. */
static const struct ntbf_backend_entry entries[] = {
    {.name = "sim",
     .ops = &ntbf__sim_ops,
     .about = "the simulated fabric, in shared memory on one host (docs/sim.md)",
     .helper = "ntbfab-simd"},
    {.name = "linux-ntb",
     .ops = &ntbf__linux_ntb_ops,
     .about = "Linux's NTB framework (Intel, AMD, IDT, Switchtec and EPF NTBs) through "
              "ntbfab_ntb.ko (docs/linux-ntb.md)"},
    {.name = "switchtec",
     .ops = &ntbf__switchtec_ops,
     .about = "Microchip Switchtec NT partitions: linux-ntb for the data path, the switch's "
              "registers for LUT and requester-ID entries (docs/switchtec.md)"},
    {.name = "dolphin",
     .ops = &ntbf__dolphin_ops,
     .about = "Dolphin PXH and MXH adapters, through Dolphin's SISCI library (docs/dolphin.md)"},
    {.name = "ivshmem",
     .ops = &ntbf__ivshmem_ops,
     .about = "a region two QEMU guests share (ivshmem-plain), or a file (docs/vm.md)"},
};
#define NENTRIES (sizeof(entries) / sizeof(entries[0]))

const struct ntbf_backend_entry *ntbf_backend_entry_at(size_t i)
{
        return i < NENTRIES ? &entries[i] : NULL;
}

const struct ntbf_backend_entry *ntbf_backend_entry(const char *name)
{
        for (size_t i = 0; name && i < NENTRIES; i++)
                if (!strcmp(entries[i].name, name))
                        return &entries[i];
        return NULL;
}

const struct ntbf_backend_ops *ntbf_backend_at(size_t i)
{
        for (size_t k = 0; k < NENTRIES; k++)
                if (entries[k].ops && !i--)
                        return entries[k].ops;
        return NULL;
}

const struct ntbf_backend_ops *ntbf_backend_find(const char *name)
{
        const struct ntbf_backend_entry *e = ntbf_backend_entry(name);
        return e ? e->ops : NULL;
}

const struct ntbf_backend_ops *ntbf_backend_open_ops(const char *name, char *why, size_t whylen)
{
        const struct ntbf_backend_entry *e = ntbf_backend_entry(name);
        if (e && e->ops)
                return e->ops;
        if (!whylen)
                return NULL;
        if (e) {
                snprintf(why, whylen, "backend '%s' is registered but not built: %s", e->name,
                         e->unbuilt);
                return NULL;
        }
        size_t o = (size_t)snprintf(why, whylen,
                                    "no backend '%s' is registered; the registered "
                                    "ones are",
                                    name ? name : "");
        for (size_t i = 0; i < NENTRIES && o < whylen; i++)
                o += (size_t)snprintf(why + o, whylen - o, "%s %s%s", i ? "," : "", entries[i].name,
                                      entries[i].ops ? "" : " (not built)");
        return NULL;
}
