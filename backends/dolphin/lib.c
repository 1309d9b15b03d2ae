/* backends/dolphin/lib.c: finding and loading the SISCI library, each in a namespace of its own. */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dolphin.h"

/*
 * Where Dolphin's library is looked for (docs/dolphin.md): NTBFAB_SISCI_LIB names it; else
 * eXpressWare's install directory, then the system's library path (ld.so's search, as for any
 * shared library). The library goes into a link-map namespace of its own (dlmopen with
 * LM_ID_NEWLM): a program that itself uses a library named libsisci (ntbfab's libsisci runs
 * its data path on this backend) would otherwise have its names resolve to that one. Each
 * namespace has its own copy of the C library, hence its own environment: NTBFAB_SISCI_ENV
 * sets variables in it alone, with %n the name of the node the process acts as and %i its
 * id (how the tests tell ntbfab's libsisci, standing in for Dolphin's, which node of a
 * simulated cluster each daemon is). One library is loaded per distinct environment and
 * shared by the process; it stays loaded until the process exits (its threads may outlive
 * SCITerminate).
 */
static const char *const places[] = {
    "/opt/DIS/lib64/libsisci.so",
    "/opt/DIS/lib64/libsisci.so.0",
    "/opt/DIS/lib/libsisci.so",
};
static const char *const sonames[] = {"libsisci.so.0", "libsisci.so"};

static pthread_mutex_t libs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct dol_lib *libs; /* every library this process loaded (never unloaded) */

int ntbf__dol_find(char *path, size_t len, char *why, size_t whylen)
{
        const char *env = getenv("NTBFAB_SISCI_LIB");
        if (env && *env) {
                if (access(env, R_OK)) {
                        snprintf(why, whylen,
                                 "NTBFAB_SISCI_LIB names %s, which cannot be read (%s): set it to "
                                 "the path of Dolphin's libsisci.so",
                                 env, strerror(errno));
                        return NTBF_ENOTFOUND;
                }
                snprintf(path, len, "%s", env);
                return 0;
        }
        for (size_t i = 0; i < sizeof(places) / sizeof(places[0]); i++)
                if (!access(places[i], R_OK)) {
                        snprintf(path, len, "%s", places[i]);
                        return 0;
                }
        /* The system's path: whatever ld.so finds by name, tried in a namespace of its own. */
        for (size_t i = 0; i < sizeof(sonames) / sizeof(sonames[0]); i++) {
                void *dl = dlmopen(LM_ID_NEWLM, sonames[i], RTLD_LAZY | RTLD_LOCAL);
                if (dl) {
                        dlclose(dl);
                        snprintf(path, len, "%s", sonames[i]);
                        return 0;
                }
        }
        snprintf(why, whylen,
                 "Dolphin's libsisci not found in /opt/DIS/lib64, /opt/DIS/lib or the system's "
                 "library path: install eXpressWare (its SISCI library), or set NTBFAB_SISCI_LIB "
                 "to the library's path");
        return NTBF_ENOTFOUND;
}

/* NTBFAB_SISCI_ENV for node n: "NAME=VALUE ..." with %n, %i and %% replaced. */
static int expand_env(const struct ntbf_topo *t, uint32_t n, char *out, size_t len, char *why,
                      size_t whylen)
{
        const char *s = getenv("NTBFAB_SISCI_ENV");
        size_t k = 0;
        out[0] = 0;
        for (; s && *s; s++) {
                char c = *s, add[80] = {c, 0};
                if (c == '%') {
                        if (s[1] == 'n')
                                snprintf(add, sizeof(add), "%s", t->nodes[n].name);
                        else if (s[1] == 'i')
                                snprintf(add, sizeof(add), "%u", t->nodes[n].id);
                        else if (s[1] == '%')
                                snprintf(add, sizeof(add), "%%");
                        else {
                                snprintf(why, whylen,
                                         "NTBFAB_SISCI_ENV: '%%%c' is not %%n (the node's name), "
                                         "%%i (its id) or %%%%",
                                         s[1] ? s[1] : ' ');
                                return -EINVAL;
                        }
                        s++;
                }
                size_t l = strlen(add);
                if (k + l + 1 > len) {
                        snprintf(why, whylen, "NTBFAB_SISCI_ENV is longer than %zu bytes", len - 1);
                        return -EINVAL;
                }
                memcpy(out + k, add, l + 1);
                k += l;
        }
        return 0;
}

/* Set each NAME=VALUE of env in the library's own environment. */
static int apply_env(void *dl, const char *env, char *why, size_t whylen)
{
        char buf[1024];
        snprintf(buf, sizeof(buf), "%s", env);
        int (*set)(const char *, const char *, int) = NULL;
        for (char *save, *tok = strtok_r(buf, " \t\n", &save); tok;
             tok = strtok_r(NULL, " \t\n", &save)) {
                char *eq = strchr(tok, '=');
                bool ok = eq && eq != tok && (isalpha((unsigned char)tok[0]) || tok[0] == '_');
                for (char *p = tok; ok && p < eq; p++)
                        ok = isalnum((unsigned char)*p) || *p == '_';
                if (!ok) {
                        snprintf(why, whylen, "NTBFAB_SISCI_ENV: '%s' is not NAME=VALUE", tok);
                        return -EINVAL;
                }
                if (!set)
                        *(void **)&set = dlsym(dl, "setenv");
                if (!set) {
                        snprintf(why, whylen,
                                 "NTBFAB_SISCI_ENV is set, but the SISCI library's namespace has "
                                 "no C library to hold it");
                        return NTBF_EUNSUPPORTED;
                }
                *eq = 0;
                set(tok, eq + 1, 1);
        }
        return 0;
}

/* What the backend's calls recorded (dolphin.h): the section's bounds, made by the linker. */
extern const struct dol_need __start_dol_need[], __stop_dol_need[];

/*
 * Resolve every name of the ABI the library has (abi.h); a name the backend calls or reads
 * (the section dol_need) that it lacks is the error, the first one named.
 */
static int resolve(struct dol_lib *L, const char *path, char *why, size_t whylen)
{
        void *p;
#define DOL_RESOLVE(name) *(void **)&L->f_##name = dlsym(L->dl, "_SISCI_PUBLIC_FUNC_MT_" #name);
        SX_FUNCS(DOL_RESOLVE)
#undef DOL_RESOLVE
#define DOL_CONST(name)                                                                            \
        if ((p = dlsym(L->dl, "_SISCI_PUBLIC_CONST_" #name))) {                                    \
                L->c_##name = *(const unsigned *)p;                                                \
                L->has_##name = true;                                                              \
        }
        SX_CONSTS(DOL_CONST)
#undef DOL_CONST
        /* Functions first: a library that is not SISCI's is named by a function it lacks. */
        for (int pass = 0; pass < 2; pass++)
                for (const struct dol_need *n = __start_dol_need; n < __stop_dol_need; n++) {
                        if (n->func != !pass ||
                            (n->func ? *(void **)(void *)((char *)L + n->off) != NULL
                                     : *(bool *)((char *)L + n->off)))
                                continue;
                        if (n->func)
                                snprintf(why, whylen,
                                         "%s has no %s: not a SISCI 5 library with the SmartIO "
                                         "extension; point NTBFAB_SISCI_LIB at eXpressWare's",
                                         path, n->name);
                        else
                                snprintf(why, whylen,
                                         "%s has no constant %s: not a SISCI 5 library", path,
                                         n->name + strlen("_SISCI_PUBLIC_CONST_"));
                        return NTBF_EUNSUPPORTED;
                }
        return 0;
}

/* SCIInitialize and the process's descriptor. */
static int start(struct dol_lib *L, char *why, size_t whylen)
{
        sci_error_t e = SCI_ERR_OK;
        SCI(L, Initialize, 0, &e);
        if (e != SCI_ERR_OK) {
                snprintf(why, whylen,
                         "SCIInitialize failed: %s; is eXpressWare's driver loaded "
                         "(dis_services)?",
                         ntbf__dol_errstr(L, e));
                return ntbf__dol_err(e) ? ntbf__dol_err(e) : -EIO;
        }
        SCI(L, Open, &L->sd, 0, &e);
        if (e != SCI_ERR_OK) {
                snprintf(why, whylen, "SCIOpen failed: %s", ntbf__dol_errstr(L, e));
                SCI(L, Terminate);
                return ntbf__dol_err(e) ? ntbf__dol_err(e) : -EIO;
        }
        return 0;
}

int ntbf__dol_get(const struct ntbf_topo *t, uint32_t n, struct dol_lib **out, char *why,
                  size_t whylen)
{
        char env[sizeof(((struct dol_lib *)0)->env)], path[PATH_MAX];
        int r = expand_env(t, n, env, sizeof(env), why, whylen);
        if (r)
                return r;
        pthread_mutex_lock(&libs_lock);
        struct dol_lib *L = libs;
        while (L && strcmp(L->env, env))
                L = L->next;
        if (L && L->refs) {
                L->refs++;
                *out = L;
                pthread_mutex_unlock(&libs_lock);
                return 0;
        }
        if (!L) {
                r = ntbf__dol_find(path, sizeof(path), why, whylen);
                if (r)
                        goto out;
                L = calloc(1, sizeof(*L));
                if (!L) {
                        r = -ENOMEM;
                        goto out;
                }
                snprintf(L->env, sizeof(L->env), "%s", env);
                L->dl = dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL);
                if (!L->dl) {
                        snprintf(why, whylen, "cannot load %s: %s", path, dlerror());
                        free(L);
                        r = NTBF_ENOTFOUND;
                        goto out;
                }
                r = apply_env(L->dl, env, why, whylen);
                if (!r)
                        r = resolve(L, path, why, whylen);
                if (r) {
                        dlclose(L->dl); /* nothing of it ran yet */
                        free(L);
                        goto out;
                }
                L->next = libs;
                libs = L;
        }
        r = start(L, why, whylen);
        if (!r) {
                L->refs = 1;
                *out = L;
        }
out:
        pthread_mutex_unlock(&libs_lock);
        return r;
}

void ntbf__dol_put(struct dol_lib *L)
{
        if (!L)
                return;
        pthread_mutex_lock(&libs_lock);
        if (L->refs && --L->refs == 0) {
                sci_error_t e;
                SCI(L, Close, L->sd, 0, &e);
                SCI(L, Terminate);
        }
        pthread_mutex_unlock(&libs_lock);
}

void ntbf__dol_ref(struct dol_lib *L)
{
        pthread_mutex_lock(&libs_lock);
        L->refs++;
        pthread_mutex_unlock(&libs_lock);
}

int ntbf__dol_err(sci_error_t e)
{
        switch (e) {
        case SCI_ERR_OK:
                return 0;
        case SCI_ERR_BUSY:
        case SCI_ERR_MAX_ENTRIES:
        case SCI_ERR_NOT_AVAILABLE:
                return -EBUSY;
        case SCI_ERR_NOSPC:
        case SCI_ERR_API_NOSPC:
        case SCI_ERR_HW_NOSPC:
                return -ENOSPC;
        case SCI_ERR_NO_SUCH_SEGMENT:
        case SCI_ERR_NO_SUCH_FDID:
                return NTBF_ENOTFOUND;
        case SCI_ERR_SEGMENTID_USED:
                return -EEXIST;
        case SCI_ERR_ILLEGAL_ADDRESS:
                return -EFAULT;
        case SCI_ERR_ILLEGAL_PARAMETER:
        case SCI_ERR_OUT_OF_RANGE:
        case SCI_ERR_SIZE_ALIGNMENT:
        case SCI_ERR_OFFSET_ALIGNMENT:
        case SCI_ERR_ILLEGAL_FLAG:
                return -EINVAL;
        case SCI_ERR_TIMEOUT:
                return -ETIMEDOUT;
        case SCI_ERR_CONNECTION_REFUSED:
                return -ECONNREFUSED;
        case SCI_ERR_NO_LINK_ACCESS:
        case SCI_ERR_NO_REMOTE_LINK_ACCESS:
                return NTBF_ELINKDOWN;
        case SCI_ERR_NODE_NOT_RESPONDING:
                return NTBF_EUNREACHABLE;
        case SCI_ERR_NO_SUCH_NODEID:
        case SCI_ERR_ILLEGAL_NODEID:
                return NTBF_ENOPATH;
        case SCI_ERR_NOT_CONNECTED:
        case SCI_ERR_SEGMENT_NOT_CONNECTED:
                return -ENOTCONN;
        case SCI_ERR_ACCESS:
                return -EACCES;
        case SCI_ERR_NOT_SUPPORTED:
        case SCI_ERR_NOT_IMPLEMENTED:
        case SCI_ERR_FLAG_NOT_IMPLEMENTED:
        case SCI_ERR_ILLEGAL_QUERY:
                return NTBF_EUNSUPPORTED;
        case SCI_ERR_NO_SUCH_ADAPTERNO:
        case SCI_ERR_ILLEGAL_ADAPTERNO:
                return -ENODEV;
        default:
                return -EIO;
        }
}

const char *ntbf__dol_errstr(struct dol_lib *L, sci_error_t e)
{
        const char *s = L && L->f_SCIGetErrorString ? SCI(L, GetErrorString, e) : NULL;
        return s && *s ? s : "unknown SISCI error";
}

sci_error_t ntbf__dol_qadapter(struct dol_lib *L, unsigned ano, unsigned port, unsigned sub,
                               unsigned *out)
{
        sci_query_adapter_t q = {ano, port, sub, out};
        sci_error_t e = SCI_ERR_OK;
        SCI(L, Query, SC(L, SCI_Q_ADAPTER), &q, 0, &e);
        return e;
}
