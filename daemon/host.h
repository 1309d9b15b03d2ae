/* daemon/host.h: what a daemon on a real host needs from it: which node it is, systemd's
 * readiness and inherited socket, and dropping root (docs/daemon.md, "Running on a host"). */
#ifndef NTBF_DAEMON_HOST_H
#define NTBF_DAEMON_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ntbfab/topology.h"

/*
 * Which node of t this host is, from its addresses (numeric strings, as getnameinfo
 * prints them) and host name. A node matches when the host part of its address is one of
 * addrs, or is a name that resolve() turns into one of them (resolve may be NULL); failing
 * any such node, when its address's host or its name equals the host name (or the host
 * name's first label). Exactly one node must match at the first of these two levels that
 * has any: 0 and *node, or -ENOENT (none) / -EEXIST (several) with why saying what to do.
 */
typedef size_t (*ntbf__resolve_fn)(const char *host, char out[][64], size_t max);
int ntbf__host_match(const struct ntbf_topo *t, const char *file, const char *const *addrs,
                     size_t naddrs, const char *hostname, ntbf__resolve_fn resolve, uint32_t *node,
                     char *why, size_t whylen);
/* The same with this host's interface addresses (getifaddrs), host name and resolver. */
int ntbf__host_find_node(const struct ntbf_topo *t, const char *file, uint32_t *node, char *why,
                         size_t whylen);

/* systemd: readiness, status and stopping (no-ops without NOTIFY_SOCKET or libsystemd). */
void ntbf__host_notify_ready(const char *status);
void ntbf__host_notify_status(const char *status);
void ntbf__host_notify_stopping(void);
void ntbf__host_notify_reloading(void);
/* A listening Unix socket systemd passed (socket activation), or -1. */
int ntbf__host_inherited_socket(void);

/* The account --user names: "USER" or "USER:GROUP"; 0 or -ENOENT with why. */
int ntbf__host_lookup_user(const char *spec, uid_t *uid, gid_t *gid, char *why, size_t whylen);
/*
 * Become uid:gid (supplementary groups dropped), keeping only CAP_DAC_OVERRIDE when
 * keep_dac (real devices behind vfio-pci: sysfs driver binding, /dev/vfio/N) and no other
 * capability; nothing to do when not root. 0 or -errno with why.
 */
int ntbf__host_drop(uid_t uid, gid_t gid, bool keep_dac, char *why, size_t whylen);

#endif
