/* tests/unit/fakedaemon.c: a fake node daemon (JSON-RPC) over a simulated fabric. */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ntbfab/config.h"
#include "ntbfab/error.h"
#include "cfgspace.h"
#include "fakedaemon.h"

/* ---- the fabric --------------------------------------------------------------------------- */

int fk_fabric_up(struct fk_fabric *f, const char *yaml, bool models)
{
        int r = fk_fabric_create(f, yaml);
        return r ? r : fk_fabric_attach(f, models);
}

int fk_fabric_create(struct fk_fabric *f, const char *yaml)
{
        memset(f, 0, sizeof(*f));
        snprintf(f->dir, sizeof(f->dir), "/dev/shm/ntbfab-devapi-XXXXXX");
        if (!mkdtemp(f->dir))
                return -errno;
        char path[512];
        snprintf(path, sizeof(path), "%s/cluster.yaml", f->dir);
        FILE *fp = fopen(path, "w");
        if (!fp || fputs(yaml, fp) < 0 || fclose(fp)) {
                fprintf(stderr, "cannot write %s\n", path);
                return -EIO;
        }
        snprintf(path, sizeof(path), "%s/run", f->dir);
        mkdir(path, 0700);
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        snprintf(path, sizeof(path), "%s/cluster.yaml", f->dir);
        int r = ntbf_config_load(path, &f->t, &d);
        if (r) {
                ntbf_diags_print(&d, stderr);
                ntbf_diags_free(&d);
                return r;
        }
        ntbf_diags_free(&d);
        char why[512];
        r = ntbf_sim_fabric_create(f->t, f->dir, why, sizeof(why));
        if (r)
                fprintf(stderr, "create: %s\n", why);
        return r;
}

int fk_fabric_attach(struct fk_fabric *f, bool models)
{
        char why[512];
        int r;
        f->ops = ntbf_backend_find("sim");
        struct ntbf_backend_env env = {f->t, f->dir, NTBF_NONE};
        r = ntbf_sim_attach(&env, &f->b, why, sizeof(why));
        if (r) {
                fprintf(stderr, "attach: %s\n", why);
                return r;
        }
        for (uint32_t a = 0; a < f->t->nadapters && a < 16; a++) {
                r = f->ops->probe(f->b, a, &f->h[a]);
                if (r)
                        return r;
        }
        if (models) {
                struct ntbf_sim_devhost_opts o = {.model_for = ntbf_sim_builtin_model};
                r = ntbf_sim_devhost_start(f->b, &o, &f->dh, why, sizeof(why));
                if (r) {
                        fprintf(stderr, "devhost: %s\n", why);
                        return r;
                }
        }
        return 0;
}

void fk_fabric_down(struct fk_fabric *f)
{
        if (f->dh)
                ntbf_sim_devhost_stop(f->dh);
        for (uint32_t a = 0; a < 16; a++)
                if (f->h[a])
                        f->ops->release(f->h[a]);
        if (f->b)
                f->ops->close(f->b);
        ntbf_sim_fabric_destroy(f->dir);
        char path[512];
        if (f->t) {
                for (uint32_t d = 0; d < f->t->ndevices; d++) {
                        snprintf(path, sizeof(path), "%s/images/%s-%s.img", f->dir,
                                 f->t->nodes[f->t->devices[d].node].name, f->t->devices[d].name);
                        unlink(path);
                }
        }
        snprintf(path, sizeof(path), "%s/images", f->dir);
        rmdir(path);
        snprintf(path, sizeof(path), "%s/cluster.yaml", f->dir);
        unlink(path);
        /* A daemon that was killed leaves its socket behind. */
        if (f->t)
                for (uint32_t n = 0; n < f->t->nnodes; n++) {
                        snprintf(path, sizeof(path), "%s/run/%s.sock", f->dir, f->t->nodes[n].name);
                        unlink(path);
                }
        snprintf(path, sizeof(path), "%s/run", f->dir);
        rmdir(path);
        rmdir(f->dir);
        ntbf_topo_free(f->t);
        memset(f, 0, sizeof(*f));
}

/* ---- devices --------------------------------------------------------------------------------- */

static uint32_t fdid_of(const struct ntbf_topo *t, uint32_t dev, uint32_t func)
{
        const struct ntbf_node *n = &t->nodes[t->devices[dev].node];
        uint32_t index = 0;
        for (uint32_t i = 0; i < n->ndevices && n->devices[i] != dev; i++)
                index += ntbf_device_nfuncs(&t->devices[n->devices[i]]);
        return n->id << 12 | (index + func);
}

static uint32_t take_slots(struct fk_fabric *f, uint32_t a, uint32_t n)
{
        uint32_t s = f->next_slot[a];
        if (s + n > f->t->adapters[a].nslots)
                return NTBF_NONE;
        f->next_slot[a] += n;
        return s;
}

static int program(struct fk_fabric *f, uint32_t a, uint32_t slot, uint32_t dst, uint64_t addr)
{
        struct ntbf_xlat x = {f->t->adapters[dst].node, dst, addr, NTBF_NONE,
                              f->t->adapters[a].lut_entry_size};
        int r = f->ops->xlat_set(f->h[a], slot, &x);
        if (r)
                fprintf(stderr, "xlat_set(%u, %u -> 0x%llx): %s\n", a, slot,
                        (unsigned long long)addr, ntbf_strerror(r));
        return r;
}

static struct fk_dev *new_dev(struct fakedaemon *fk, const char *node, const char *dev,
                              uint32_t func)
{
        const struct ntbf_topo *t = fk->f->t;
        uint32_t n = ntbf_topo_find_node(t, node);
        uint32_t d = n == NTBF_NONE ? NTBF_NONE : ntbf_topo_find_device(t, n, dev);
        if (d == NTBF_NONE || func >= ntbf_device_nfuncs(&t->devices[d]) ||
            fk->ndevs == FK_MAX_DEVS) {
                fprintf(stderr, "fake daemon: no device %s.%s function %u\n", node, dev, func);
                return NULL;
        }
        struct fk_dev *x = &fk->devs[fk->ndevs];
        memset(x, 0, sizeof(*x));
        x->tdev = d;
        x->func = func;
        x->fdid = fdid_of(t, d, func);
        const struct ntbf_device *D = &t->devices[d];
        for (unsigned b = 0; b < 6; b++)
                x->bar_addr[b] = ntbf_device_bar_addr(D, func, b);
        return x;
}

struct fk_dev *fk_local(struct fakedaemon *fk, const char *dev, uint32_t func)
{
        pthread_mutex_lock(&fk->lock);
        struct fk_dev *x = new_dev(fk, fk->f->t->nodes[fk->node].name, dev, func);
        if (x) {
                const struct ntbf_device *D = &fk->f->t->devices[x->tdev];
                uint32_t rid = ntbf_device_rid(D, func);
                ntbf_bdf_fmt(D->domain, (uint8_t)(rid >> 8), (uint8_t)(rid >> 3 & 31),
                             (uint8_t)(rid & 7), x->bdf, sizeof(x->bdf));
                x->local = true;
                fk->ndevs++;
        }
        pthread_mutex_unlock(&fk->lock);
        return x;
}

struct fk_dev *fk_local_isolated(struct fakedaemon *fk, const char *dev, uint32_t func)
{
        struct fk_fabric *f = fk->f;
        if (!f->ops->dev_isolate)
                return NULL;
        struct fk_dev *x = fk_local(fk, dev, func);
        if (!x)
                return NULL;
        const struct ntbf_device *D = &f->t->devices[x->tdev];
        struct ntbf_rid rid = {D->node, (uint16_t)ntbf_device_rid(D, func), 0xffff};
        int r = f->ops->dev_isolate(f->h[f->t->nodes[D->node].adapters[0]], &rid, true);
        if (r) {
                fprintf(stderr, "dev_isolate: %s\n", ntbf_strerror(r));
                return NULL;
        }
        x->isolated = true;
        return x;
}

struct fk_dev *fk_borrow(struct fakedaemon *fk, const char *lender, const char *dev, uint32_t func,
                         uint64_t dma_window, uint64_t share)
{
        struct fk_fabric *f = fk->f;
        const struct ntbf_topo *t = f->t;
        pthread_mutex_lock(&fk->lock);
        struct fk_dev *x = new_dev(fk, lender, dev, func);
        if (!x)
                goto fail;
        const struct ntbf_device *D = &t->devices[x->tdev];
        uint32_t L = D->node, la = t->nodes[L].adapters[0], ba = t->nodes[fk->node].adapters[0];
        const struct ntbf_adapter *LA = &t->adapters[la], *BA = &t->adapters[ba];
        /* 1. The BARs: slots of the borrower's window onto the lender's BAR addresses. */
        x->bar_adapter = ba;
        for (unsigned b = 0; b < 6; b++) {
                uint64_t size = ntbf_device_bar_size(D, func, b), E = BA->lut_entry_size;
                if (!size)
                        continue;
                uint64_t far = x->bar_addr[b] & ~(E - 1);
                uint64_t end = (x->bar_addr[b] + size + E - 1) & ~(E - 1);
                uint32_t n = (uint32_t)((end - far) / E), s = take_slots(f, ba, n);
                if (s == NTBF_NONE)
                        goto fail;
                for (uint32_t k = 0; k < n; k++)
                        if (program(f, ba, s + k, la, far + k * E))
                                goto fail;
                x->bar_off[b] = (uint64_t)s * E + (x->bar_addr[b] - far);
        }
        /* 2. The DMA window: slots of the lender's window onto a fresh IOVA range of ours. */
        uint64_t E = LA->lut_entry_size;
        uint32_t n = (uint32_t)((dma_window + E - 1) / E), s = take_slots(f, la, n);
        if (s == NTBF_NONE)
                goto fail;
        /* A borrower without an IOMMU: the window maps its RAM from physical 0 (article
         * 7.1.1's setting); with one, a fresh IOVA range, 256 GiB apart, below 2^48. */
        x->dma_iova = t->nodes[fk->node].iommu ? (uint64_t)(2 + f->nborrows++) << 38 : 0;
        for (uint32_t k = 0; k < n; k++)
                if (program(f, la, s + k, ba, x->dma_iova + k * E))
                        goto fail;
        x->dma_dev = LA->window_base + (uint64_t)s * E;
        x->dma_size = (uint64_t)n * E;
        x->dma_adapter = ba;
        /* 3. The MSI window: one slot onto our interrupt range. */
        uint64_t far = NTBF_MSI_BASE & ~(E - 1);
        s = take_slots(f, la, 1);
        if (s == NTBF_NONE || program(f, la, s, ba, far))
                goto fail;
        x->msi_dev = LA->window_base + (uint64_t)s * E + (NTBF_MSI_BASE - far);
        x->msi_host = NTBF_MSI_BASE;
        x->msi_size =
            E - (NTBF_MSI_BASE - far) < NTBF_MSI_SIZE ? E - (NTBF_MSI_BASE - far) : NTBF_MSI_SIZE;
        /* 4. The device may leave its host through the lender's adapter. */
        struct ntbf_rid rid = {L, (uint16_t)ntbf_device_rid(D, func), 0xffff};
        int r = f->ops->rid_add(f->h[la], &rid, NULL);
        if (r && r != -EEXIST) {
                fprintf(stderr, "rid_add: %s\n", ntbf_strerror(r));
                goto fail;
        }
        x->share = share;
        snprintf(x->bdf, sizeof(x->bdf), "0000:%02x:00.0", 0x80 + fk->ndevs);
        fk->ndevs++;
        pthread_mutex_unlock(&fk->lock);
        return x;
fail:
        pthread_mutex_unlock(&fk->lock);
        fprintf(stderr, "fake daemon: cannot program the borrow of %s.%s\n", lender, dev);
        return NULL;
}

/* ---- JSON-RPC ----------------------------------------------------------------------------- */

static void send_obj(struct fakedaemon *fk, uint32_t c, struct json_object *o)
{
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        size_t n = strlen(s);
        char *msg = malloc(n + 1);
        memcpy(msg, s, n);
        msg[n] = '\n';
        if (fk->conns[c].fd >= 0) {
                ssize_t w = send(fk->conns[c].fd, msg, n + 1, MSG_NOSIGNAL);
                (void)w;
        }
        free(msg);
        json_object_put(o);
}

static struct json_object *answer(struct json_object *id)
{
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
        json_object_object_add(o, "id", json_object_get(id));
        return o;
}

static void reply(struct fakedaemon *fk, uint32_t c, struct json_object *id,
                  struct json_object *result)
{
        struct json_object *o = answer(id);
        json_object_object_add(o, "result", result ? result : json_object_new_object());
        send_obj(fk, c, o);
}

static void fail(struct fakedaemon *fk, uint32_t c, struct json_object *id, int code, int err,
                 const char *msg)
{
        struct json_object *o = answer(id), *e = json_object_new_object();
        json_object_object_add(e, "code", json_object_new_int(code));
        json_object_object_add(e, "message", json_object_new_string(msg));
        if (err) {
                struct json_object *data = json_object_new_object();
                json_object_object_add(data, "error", json_object_new_string(ntbf_err_name(err)));
                json_object_object_add(data, "errno", json_object_new_int(err));
                json_object_object_add(e, "data", data);
        }
        json_object_object_add(o, "error", e);
        send_obj(fk, c, o);
}

static bool param_u64(struct json_object *p, const char *k, uint64_t *v)
{
        struct json_object *x;
        if (!p || !json_object_object_get_ex(p, k, &x) || !json_object_is_type(x, json_type_int) ||
            json_object_get_int64(x) < 0)
                return false;
        *v = json_object_get_uint64(x);
        return true;
}

static struct json_object *u64(uint64_t v)
{
        return json_object_new_uint64(v);
}

static struct json_object *open_result(struct fakedaemon *fk, uint32_t h, struct fk_dev *x,
                                       uint64_t share_base, uint64_t share_size)
{
        const struct ntbf_topo *t = fk->f->t;
        const struct ntbf_device *D = &t->devices[x->tdev];
        struct json_object *o = json_object_new_object(), *info = json_object_new_object();
        json_object_object_add(o, "handle", u64(h));
        json_object_object_add(info, "fdid", u64(x->fdid));
        json_object_object_add(info, "local", json_object_new_boolean(x->local));
        json_object_object_add(info, "bdf", json_object_new_string(x->bdf));
        char bdf[16];
        uint32_t rid = ntbf_device_rid(D, x->func);
        ntbf_bdf_fmt(D->domain, (uint8_t)(rid >> 8), (uint8_t)(rid >> 3 & 31), (uint8_t)(rid & 7),
                     bdf, sizeof(bdf));
        json_object_object_add(info, "lender_bdf", json_object_new_string(bdf));
        json_object_object_add(info, "lender", json_object_new_string(t->nodes[D->node].name));
        json_object_object_add(info, "vendor_id", u64(D->vendor_id));
        json_object_object_add(info, "device_id", u64(D->device_id));
        json_object_object_add(info, "class_code", u64(D->class_code));
        json_object_object_add(info, "msix_vectors", u64(D->sim.msix));
        json_object_object_add(info, "hops", u64(x->local ? 0 : 1));
        json_object_object_add(info, "latency_ns", u64(x->local ? 0 : 2 * 132));
        if (!x->local)
                json_object_object_add(info, "dma_window", u64(x->dma_size));
        json_object_object_add(o, "info", info);
        struct json_object *bars = json_object_new_array();
        for (unsigned b = 0; b < 6; b++) {
                uint64_t size = ntbf_device_bar_size(D, x->func, b);
                if (!size)
                        continue;
                struct json_object *e = json_object_new_object();
                json_object_object_add(e, "bar", u64(b));
                json_object_object_add(e, "size", u64(size));
                if (x->local) {
                        json_object_object_add(e, "addr", u64(x->bar_addr[b]));
                } else {
                        const struct ntbf_adapter *A = &t->adapters[x->bar_adapter];
                        json_object_object_add(e, "addr", u64(A->window_base + x->bar_off[b]));
                        /* By name here, by index in "dma": the client takes both forms. */
                        json_object_object_add(e, "adapter", json_object_new_string(A->name));
                        json_object_object_add(e, "offset", u64(x->bar_off[b]));
                }
                json_object_array_add(bars, e);
        }
        json_object_object_add(o, "bars", bars);
        if (x->isolated)
                json_object_object_add(o, "isolated", json_object_new_boolean(true));
        if (x->local)
                return o;
        struct json_object *dma = json_object_new_object(), *msi = json_object_new_object();
        json_object_object_add(dma, "device_addr", u64(x->dma_dev));
        json_object_object_add(dma, "iova", u64(x->dma_iova));
        json_object_object_add(dma, "size", u64(x->dma_size));
        json_object_object_add(dma, "adapter", u64(x->dma_adapter));
        json_object_object_add(o, "dma", dma);
        json_object_object_add(msi, "device_addr", u64(x->msi_dev));
        json_object_object_add(msi, "host_addr", u64(x->msi_host));
        json_object_object_add(msi, "size", u64(x->msi_size));
        json_object_object_add(o, "msi", msi);
        struct json_object *iova = json_object_new_object();
        json_object_object_add(iova, "base", u64(share_base));
        json_object_object_add(iova, "size", u64(share_size));
        json_object_object_add(o, "iova", iova);
        return o;
}

static struct fk_handle *handle_of(struct fakedaemon *fk, uint32_t c, struct json_object *p,
                                   const char *key)
{
        uint64_t h;
        if (!param_u64(p, key, &h) || h >= FK_MAX_HANDLES || !fk->handles[h].used ||
            fk->handles[h].conn != c)
                return NULL;
        return &fk->handles[h];
}

static void close_handle(struct fk_handle *h, struct fk_dev *x)
{
        x->shares_used &= ~(1u << h->share);
        h->used = false;
}

static void do_open(struct fakedaemon *fk, uint32_t c, struct json_object *id,
                    struct json_object *p)
{
        uint64_t fdid = UINT64_MAX;
        struct json_object *bdf = NULL;
        bool by_fdid = param_u64(p, "fdid", &fdid);
        if (!by_fdid && !(p && json_object_object_get_ex(p, "bdf", &bdf))) {
                fail(fk, c, id, -32602, 0, "device.open: give 'fdid' or 'bdf'");
                return;
        }
        struct fk_dev *x = NULL;
        for (uint32_t i = 0; i < fk->ndevs; i++)
                if (by_fdid ? fk->devs[i].fdid == fdid
                            : !strcmp(fk->devs[i].bdf, json_object_get_string(bdf)))
                        x = &fk->devs[i];
        if (!x) {
                fail(fk, c, id, -32000, NTBF_ENOTFOUND,
                     "device.open: no such device on this node (neither local nor borrowed)");
                return;
        }
        uint64_t size = x->local ? 0 : (x->share ? x->share : x->dma_size);
        uint32_t nshares = x->local ? 1 : (uint32_t)(x->dma_size / size), s = 0;
        while (s < nshares && s < 32 && (x->shares_used >> s & 1))
                s++;
        uint32_t h = 0;
        while (h < FK_MAX_HANDLES && fk->handles[h].used)
                h++;
        if (s >= nshares || s >= 32 || h == FK_MAX_HANDLES) {
                fail(fk, c, id, -32000, NTBF_ENOSPC_BUDGET,
                     "device.open: every share of the device's DMA window is taken");
                return;
        }
        if (!x->local)
                x->shares_used |= 1u << s;
        fk->handles[h] = (struct fk_handle){true, (uint32_t)(x - fk->devs), c, s, {0}};
        struct json_object *res = open_result(fk, h, x, x->dma_iova + s * size, size);
        if (fk->drop_key)
                json_object_object_del(res, fk->drop_key);
        reply(fk, c, id, res);
}

static uint8_t *cfg_of(struct fakedaemon *fk, struct fk_dev *x)
{
        return ntbf_sim_cfg(fk->f->b, x->tdev, x->func);
}

static void do_config(struct fakedaemon *fk, uint32_t c, struct json_object *id,
                      struct json_object *p, bool write)
{
        struct fk_handle *h = handle_of(fk, c, p, "handle");
        uint64_t off, size, val = 0;
        if (!h || !param_u64(p, "offset", &off) || !param_u64(p, "size", &size) ||
            (write && !param_u64(p, "value", &val)) || off >= 4096 ||
            (size != 1 && size != 2 && size != 4) || off % size) {
                fail(fk, c, id, -32602, 0, "device.config_*: bad handle, offset, size or value");
                return;
        }
        struct fk_dev *x = &fk->devs[h->dev];
        uint8_t *cfg = cfg_of(fk, x);
        if (!write) {
                uint32_t v = ntbf_sim_cfg_read(cfg, (uint32_t)off, (uint32_t)size);
                /* Interception (article 4.2): the Interrupt Pin of a borrowed device reads 0. */
                if (!x->local && off <= NTBF_PCI_INTERRUPT_PIN &&
                    off + size > NTBF_PCI_INTERRUPT_PIN)
                        v &= ~(0xffu << 8 * (NTBF_PCI_INTERRUPT_PIN - off));
                struct json_object *r = json_object_new_object();
                json_object_object_add(r, "value", u64(v));
                reply(fk, c, id, r);
                return;
        }
        /* ... and INTx stays disabled: Interrupt Disable is forced on in Command writes. */
        if (!x->local && off <= NTBF_PCI_COMMAND + 1 && off + size > NTBF_PCI_COMMAND + 1)
                val |= (uint64_t)(NTBF_PCI_CMD_INTX_DIS >> 8) << 8 * (NTBF_PCI_COMMAND + 1 - off);
        ntbf_sim_cfg_write(cfg, (uint32_t)off, (uint32_t)val, (uint32_t)size);
        reply(fk, c, id, NULL);
}

static void do_map_peer(struct fakedaemon *fk, uint32_t c, struct json_object *id,
                        struct json_object *p)
{
        struct fk_handle *h = handle_of(fk, c, p, "handle"), *th = handle_of(fk, c, p, "target");
        uint64_t bar;
        if (!h || !th || !param_u64(p, "bar", &bar) || bar > 5) {
                fail(fk, c, id, -32602, 0, "device.map_peer: bad handle, target or bar");
                return;
        }
        struct fk_dev *x = &fk->devs[h->dev], *y = &fk->devs[th->dev];
        const struct ntbf_topo *t = fk->f->t;
        /* Same lender (or both local), no isolation: the target's BAR at its own address. */
        if (t->devices[x->tdev].node != t->devices[y->tdev].node) {
                fail(fk, c, id, -32000, NTBF_EUNSUPPORTED,
                     "device.map_peer: the fake daemon maps peers of the same lender only");
                return;
        }
        uint64_t addr = y->bar_addr[bar];
        unsigned k = 0;
        while (k < 4 && h->peers[k])
                k++;
        if (k < 4)
                h->peers[k] = addr;
        struct json_object *r = json_object_new_object();
        json_object_object_add(r, "device_addr", u64(addr));
        json_object_object_add(
            r, "size", u64(ntbf_device_bar_size(&t->devices[y->tdev], y->func, (uint32_t)bar)));
        json_object_object_add(r, "path", json_object_new_object());
        reply(fk, c, id, r);
}

static void do_unmap_peer(struct fakedaemon *fk, uint32_t c, struct json_object *id,
                          struct json_object *p)
{
        struct fk_handle *h = handle_of(fk, c, p, "handle");
        uint64_t addr;
        if (!h || !param_u64(p, "device_addr", &addr)) {
                fail(fk, c, id, -32602, 0, "device.unmap_peer: bad handle or device_addr");
                return;
        }
        for (unsigned k = 0; k < 4; k++) {
                if (h->peers[k] == addr) {
                        h->peers[k] = 0;
                        reply(fk, c, id, NULL);
                        return;
                }
        }
        fail(fk, c, id, -32000, NTBF_ENOTFOUND, "device.unmap_peer: no such peer mapping");
}

static void handle_line(struct fakedaemon *fk, uint32_t c, const char *line)
{
        atomic_fetch_add(&fk->requests, 1);
        if (atomic_load(&fk->silent))
                return;
        struct json_object *req = json_tokener_parse(line), *id = NULL, *m = NULL, *p = NULL;
        if (!req || !json_object_object_get_ex(req, "method", &m)) {
                json_object_put(req);
                return;
        }
        json_object_object_get_ex(req, "id", &id);
        json_object_object_get_ex(req, "params", &p);
        const char *method = json_object_get_string(m);
        pthread_mutex_lock(&fk->lock);
        if (!strcmp(method, "events.subscribe") && fk->no_events) {
                atomic_fetch_add(&fk->subscribe_calls, 1);
                fail(fk, c, id, -32601, 0, "method not found");
        } else if (!strcmp(method, "events.subscribe")) {
                atomic_fetch_add(&fk->subscribe_calls, 1);
                fk->conns[c].sub = true;
                atomic_fetch_add(&fk->subscribed, 1);
                reply(fk, c, id, NULL);
        } else if (!strcmp(method, "device.open")) {
                do_open(fk, c, id, p);
        } else if (!strcmp(method, "device.close")) {
                struct fk_handle *h = handle_of(fk, c, p, "handle");
                atomic_fetch_add(&fk->closes, 1);
                if (h) {
                        close_handle(h, &fk->devs[h->dev]);
                        reply(fk, c, id, NULL);
                } else {
                        fail(fk, c, id, -32602, 0, "device.close: bad handle");
                }
        } else if (!strcmp(method, "device.config_read")) {
                do_config(fk, c, id, p, false);
        } else if (!strcmp(method, "device.config_write")) {
                do_config(fk, c, id, p, true);
        } else if (!strcmp(method, "device.map_peer")) {
                do_map_peer(fk, c, id, p);
        } else if (!strcmp(method, "device.unmap_peer")) {
                do_unmap_peer(fk, c, id, p);
        } else {
                fail(fk, c, id, -32601, 0, "method not found");
        }
        pthread_mutex_unlock(&fk->lock);
        json_object_put(req);
}

/* A connection closed: its handles close with it (docs/rpc.md). */
static void drop_conn(struct fakedaemon *fk, uint32_t c)
{
        pthread_mutex_lock(&fk->lock);
        for (uint32_t h = 0; h < FK_MAX_HANDLES; h++)
                if (fk->handles[h].used && fk->handles[h].conn == c)
                        close_handle(&fk->handles[h], &fk->devs[fk->handles[h].dev]);
        if (fk->conns[c].sub)
                atomic_fetch_sub(&fk->subscribed, 1);
        close(fk->conns[c].fd);
        fk->conns[c].fd = -1;
        fk->conns[c].sub = false;
        fk->conns[c].len = 0;
        pthread_mutex_unlock(&fk->lock);
}

static void *serve(void *arg)
{
        struct fakedaemon *fk = arg;
        for (;;) {
                struct pollfd p[FK_MAX_CONNS + 2];
                p[0] = (struct pollfd){fk->stopfd, POLLIN, 0};
                p[1] = (struct pollfd){fk->lfd, POLLIN, 0};
                for (uint32_t c = 0; c < FK_MAX_CONNS; c++)
                        p[c + 2] = (struct pollfd){fk->conns[c].fd, POLLIN, 0};
                if (poll(p, FK_MAX_CONNS + 2, -1) < 0)
                        continue;
                if (p[0].revents)
                        break;
                if (p[1].revents) {
                        int fd = accept4(fk->lfd, NULL, NULL, SOCK_CLOEXEC);
                        uint32_t c = 0;
                        while (c < FK_MAX_CONNS && fk->conns[c].fd >= 0)
                                c++;
                        if (fd >= 0 && c < FK_MAX_CONNS)
                                fk->conns[c].fd = fd;
                        else if (fd >= 0)
                                close(fd);
                }
                for (uint32_t c = 0; c < FK_MAX_CONNS; c++) {
                        struct fk_conn *k = &fk->conns[c];
                        if (k->fd < 0 || !p[c + 2].revents)
                                continue;
                        ssize_t n = recv(k->fd, k->buf + k->len, sizeof(k->buf) - 1 - k->len, 0);
                        if (n <= 0) {
                                drop_conn(fk, c);
                                continue;
                        }
                        k->len += (size_t)n;
                        char *nl;
                        while ((nl = memchr(k->buf, '\n', k->len))) {
                                *nl = 0;
                                handle_line(fk, c, k->buf);
                                size_t used = (size_t)(nl - k->buf) + 1;
                                memmove(k->buf, nl + 1, k->len - used);
                                k->len -= used;
                        }
                }
        }
        for (uint32_t c = 0; c < FK_MAX_CONNS; c++)
                if (fk->conns[c].fd >= 0)
                        drop_conn(fk, c);
        return NULL;
}

int fk_start(struct fakedaemon *fk, struct fk_fabric *f, const char *node)
{
        memset(fk, 0, sizeof(*fk));
        fk->f = f;
        fk->node = ntbf_topo_find_node(f->t, node);
        if (fk->node == NTBF_NONE)
                return NTBF_ENOTFOUND;
        pthread_mutex_init(&fk->lock, NULL);
        for (uint32_t c = 0; c < FK_MAX_CONNS; c++)
                fk->conns[c].fd = -1;
        snprintf(fk->sock, sizeof(fk->sock), "%s/run/%s.sock", f->dir, node);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(fk->sock) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, fk->sock, strlen(fk->sock) + 1);
        unlink(fk->sock);
        fk->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fk->lfd < 0 || bind(fk->lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fk->lfd, 16))
                return -errno;
        fk->stopfd = eventfd(0, EFD_CLOEXEC);
        if (pthread_create(&fk->th, NULL, serve, fk))
                return -EAGAIN;
        fk->running = true;
        return 0;
}

void fk_lost(struct fakedaemon *fk, uint32_t fdid)
{
        pthread_mutex_lock(&fk->lock);
        for (uint32_t c = 0; c < FK_MAX_CONNS; c++) {
                /* As the daemon does: subscribers, and every connection holding the device. */
                bool holds = false;
                for (uint32_t h = 0; h < FK_MAX_HANDLES; h++)
                        holds |= fk->handles[h].used && fk->handles[h].conn == c &&
                                 fk->devs[fk->handles[h].dev].fdid == fdid;
                if (fk->conns[c].fd < 0 || !(fk->conns[c].sub || holds))
                        continue;
                struct json_object *o = json_object_new_object(), *p = json_object_new_object();
                json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
                json_object_object_add(o, "method", json_object_new_string("event"));
                json_object_object_add(p, "kind", json_object_new_string("device.lost"));
                json_object_object_add(p, "fdid", u64(fdid));
                json_object_object_add(p, "reason", json_object_new_string("lender unreachable"));
                json_object_object_add(o, "params", p);
                send_obj(fk, c, o);
        }
        pthread_mutex_unlock(&fk->lock);
}

unsigned fk_subscribers(struct fakedaemon *fk)
{
        return atomic_load(&fk->subscribed);
}

void fk_kill(struct fakedaemon *fk)
{
        if (!fk->running)
                return;
        uint64_t one = 1;
        ssize_t w = write(fk->stopfd, &one, sizeof(one));
        (void)w;
        pthread_join(fk->th, NULL);
        close(fk->lfd);
        close(fk->stopfd);
        unlink(fk->sock);
        pthread_mutex_destroy(&fk->lock);
        fk->running = false;
}
