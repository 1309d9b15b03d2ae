/* daemon/host.c: which node this host is, systemd's readiness and socket, dropping root. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cap-ng.h>

#include "host.h"

/* ---- which node ---------------------------------------------------------------------------- */

/* The host part of "host:port" or "[v6]:port", into out. */
static void host_of(const char *address, char *out, size_t len)
{
        const char *a = address, *end = strrchr(address, ':');
        if (a[0] == '[') {
                a++;
                end = strchr(a, ']');
        }
        size_t n = end ? (size_t)(end - a) : strlen(a);
        snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), a);
}

/* A numeric address in the form getnameinfo prints ("10.0.0.1", "fe80::1"); false if s is
 * not numeric. */
static bool canonical(const char *s, char *out, size_t len)
{
        unsigned char buf[16];
        if (inet_pton(AF_INET, s, buf) == 1)
                return inet_ntop(AF_INET, buf, out, (socklen_t)len) != NULL;
        if (inet_pton(AF_INET6, s, buf) == 1)
                return inet_ntop(AF_INET6, buf, out, (socklen_t)len) != NULL;
        return false;
}

static bool name_eq(const char *a, const char *b, bool first_label)
{
        size_t la = strlen(a), lb = strlen(b);
        if (first_label) {
                const char *d = strchr(b, '.');
                if (d)
                        lb = (size_t)(d - b);
        }
        return la == lb && !strncasecmp(a, b, la);
}

static bool is_local(const char *addr, const char *const *addrs, size_t naddrs)
{
        char c[64];
        if (!canonical(addr, c, sizeof(c)))
                return false;
        for (size_t i = 0; i < naddrs; i++) {
                char l[64];
                if (canonical(addrs[i], l, sizeof(l)) && !strcmp(c, l))
                        return true;
        }
        return false;
}

static bool by_address(const struct ntbf_node *n, const char *const *addrs, size_t naddrs,
                       ntbf__resolve_fn resolve)
{
        char host[64], c[64];
        host_of(n->address, host, sizeof(host));
        if (canonical(host, c, sizeof(c)))
                return is_local(c, addrs, naddrs);
        char res[16][64];
        size_t k = resolve ? resolve(host, res, 16) : 0;
        for (size_t i = 0; i < k; i++)
                if (is_local(res[i], addrs, naddrs))
                        return true;
        return false;
}

static bool by_name(const struct ntbf_node *n, const char *hostname)
{
        char host[64];
        if (!hostname || !hostname[0])
                return false;
        host_of(n->address, host, sizeof(host));
        return name_eq(host, hostname, false) || name_eq(n->name, hostname, false) ||
               name_eq(n->name, hostname, true);
}

int ntbf__host_match(const struct ntbf_topo *t, const char *file, const char *const *addrs,
                     size_t naddrs, const char *hostname, ntbf__resolve_fn resolve, uint32_t *node,
                     char *why, size_t whylen)
{
        for (int level = 0; level < 2; level++) {
                uint32_t found = 0, first = 0, second = 0;
                for (uint32_t i = 0; i < t->nnodes; i++) {
                        bool m = level == 0 ? by_address(&t->nodes[i], addrs, naddrs, resolve)
                                            : by_name(&t->nodes[i], hostname);
                        if (!m)
                                continue;
                        if (found == 0)
                                first = i;
                        else if (found == 1)
                                second = i;
                        found++;
                }
                if (found == 1) {
                        *node = first;
                        return 0;
                }
                if (found > 1) {
                        snprintf(why, whylen,
                                 "%u nodes of %s match this host by %s ('%s' at %s, '%s' at %s%s); "
                                 "name this host's node with --node NAME",
                                 found, file, level == 0 ? "address" : "host name",
                                 t->nodes[first].name, t->nodes[first].address,
                                 t->nodes[second].name, t->nodes[second].address,
                                 found > 2 ? ", ..." : "");
                        return -EEXIST;
                }
        }
        char list[256] = "";
        size_t o = 0;
        for (size_t i = 0; i < naddrs && o < sizeof(list); i++)
                o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "", addrs[i]);
        snprintf(why, whylen,
                 "no node of %s has an address of this host (%s) or its host name '%s'; name "
                 "this host's node with --node NAME, or give it one of these addresses in the "
                 "cluster file",
                 file, list[0] ? list : "none", hostname ? hostname : "");
        return -ENOENT;
}

static size_t resolve_host(const char *host, char out[][64], size_t max)
{
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res, *a;
        if (getaddrinfo(host, NULL, &hints, &res))
                return 0;
        size_t n = 0;
        for (a = res; a && n < max; a = a->ai_next)
                if (!getnameinfo(a->ai_addr, a->ai_addrlen, out[n], 64, NULL, 0, NI_NUMERICHOST))
                        n++;
        freeaddrinfo(res);
        return n;
}

int ntbf__host_find_node(const struct ntbf_topo *t, const char *file, uint32_t *node, char *why,
                         size_t whylen)
{
        struct ifaddrs *ifs = NULL;
        char(*buf)[64] = NULL;
        const char **addrs = NULL;
        size_t n = 0;
        if (getifaddrs(&ifs) == 0) {
                size_t cap = 0;
                for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
                        cap++;
                buf = calloc(cap + 1, sizeof(*buf));
                addrs = calloc(cap + 1, sizeof(*addrs));
                for (struct ifaddrs *i = ifs; buf && addrs && i; i = i->ifa_next) {
                        if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET &&
                                             i->ifa_addr->sa_family != AF_INET6))
                                continue;
                        socklen_t len = i->ifa_addr->sa_family == AF_INET
                                            ? sizeof(struct sockaddr_in)
                                            : sizeof(struct sockaddr_in6);
                        if (getnameinfo(i->ifa_addr, len, buf[n], 64, NULL, 0, NI_NUMERICHOST))
                                continue;
                        buf[n][strcspn(buf[n], "%")] = 0; /* fe80::1%eth0: the scope apart */
                        addrs[n] = buf[n];
                        n++;
                }
                freeifaddrs(ifs);
        }
        char hostname[256] = "";
        gethostname(hostname, sizeof(hostname) - 1);
        int r = ntbf__host_match(t, file, addrs, n, hostname, resolve_host, node, why, whylen);
        free(buf);
        free(addrs);
        return r;
}

/* ---- dropping root ------------------------------------------------------------------------- */

int ntbf__host_lookup_user(const char *spec, uid_t *uid, gid_t *gid, char *why, size_t whylen)
{
        char user[64], *colon;
        snprintf(user, sizeof(user), "%s", spec);
        if ((colon = strchr(user, ':')))
                *colon++ = 0;
        struct passwd *pw = getpwnam(user);
        if (!pw) {
                snprintf(why, whylen,
                         "--user %s: no user '%s' on this host; create it (the Debian package "
                         "does: adduser --system --group ntbfab) or name another",
                         spec, user);
                return -ENOENT;
        }
        *uid = pw->pw_uid;
        *gid = pw->pw_gid;
        if (colon && *colon) {
                struct group *gr = getgrnam(colon);
                if (!gr) {
                        snprintf(why, whylen, "--user %s: no group '%s' on this host", spec, colon);
                        return -ENOENT;
                }
                *gid = gr->gr_gid;
        }
        return 0;
}

int ntbf__host_drop(uid_t uid, gid_t gid, bool keep_dac, char *why, size_t whylen)
{
        if (geteuid() != 0)
                return 0;
        capng_clear(CAPNG_SELECT_BOTH);
        if (keep_dac)
                capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED, CAP_DAC_OVERRIDE);
        /* The bounding set goes too, so nothing this process runs can get root back. */
        int r = capng_change_id((int)uid, (int)gid, CAPNG_DROP_SUPP_GRP | CAPNG_CLEAR_BOUNDING);
        if (r) {
                snprintf(why, whylen, "cannot become uid %u gid %u (libcap-ng step %d): %s",
                         (unsigned)uid, (unsigned)gid, r, strerror(errno));
                return -EPERM;
        }
        return 0;
}
