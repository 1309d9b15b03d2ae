/* ntbfab/config.h: loading the cluster YAML file into a checked topology. */
#ifndef NTBFAB_CONFIG_H
#define NTBFAB_CONFIG_H

#include "diag.h"
#include "topology.h"

NTBF_BEGIN_DECLS

/*
 * Load a cluster file: parse it, build the topology and finalize it. Every mistake of
 * the file is reported to diags as "FILE:LINE:COL: error: what is wrong; what would fix
 * it", all of them in one run. Returns 0 with *out set, or NTBF_ECONFIG (mistakes were
 * reported, *out is NULL), or -errno when the file cannot be read (also reported).
 */
NTBF_EXPORT int ntbf_config_load(const char *path, struct ntbf_topo **out,
                                 struct ntbf_diags *diags);

/* The same from memory; name is the file name used in diagnostics. */
NTBF_EXPORT int ntbf_config_load_mem(const char *name, const char *buf, size_t len,
                                     struct ntbf_topo **out, struct ntbf_diags *diags);

NTBF_END_DECLS

#endif
