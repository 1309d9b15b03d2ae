/* backends/linux-ntb/ops.c: the linux-ntb backend's vtable, over the functions of lntb.h. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>

#include "../hostmem.h"
#include "lntb.h"
#include "ntbfab/error.h"

/* The vtable's opaque types are lntb's own objects. */
#define L(h)  ((struct lntb *)(void *)(h))
#define LB(b) ((struct lntb_backend *)(void *)(b))

static int ln_open(const struct ntbf_backend_env *env, struct ntbf_backend **out, char *why,
                   size_t whylen)
{
        struct lntb_backend *b;
        int r = lntb_open(env, NULL, ntbf__linux_ntb_ops.name, &b, why, whylen);
        if (!r)
                *out = (struct ntbf_backend *)(void *)b;
        return r;
}

static void ln_close(struct ntbf_backend *b)
{
        lntb_close(LB(b));
}

static int ln_probe(struct ntbf_backend *b, uint32_t adapter, struct ntbf_adapter_h **out)
{
        struct lntb *l = NULL;
        int r = lntb_probe(LB(b), adapter, &l, NULL, 0);
        if (!r)
                *out = (struct ntbf_adapter_h *)(void *)l;
        return r;
}

static void ln_release(struct ntbf_adapter_h *h)
{
        lntb_release(L(h));
}

static int ln_caps(struct ntbf_adapter_h *h, struct ntbf_caps *out)
{
        return lntb_caps(L(h), out);
}

int lntb_op_link_state(struct ntbf_adapter_h *h, uint32_t port, bool *up)
{
        return lntb_link_state(L(h), port, up);
}

int lntb_op_link_enable(struct ntbf_adapter_h *h, uint32_t port)
{
        return lntb_link_enable(L(h), port);
}

int lntb_op_link_disable(struct ntbf_adapter_h *h, uint32_t port)
{
        return lntb_link_disable(L(h), port);
}

int lntb_op_set_events(struct ntbf_adapter_h *h, const struct ntbf_event_ops *ops, void *ctx)
{
        return lntb_set_events(L(h), ops, ctx);
}

int lntb_op_event_fd(struct ntbf_adapter_h *h)
{
        return lntb_event_fd(L(h));
}

int lntb_op_process_events(struct ntbf_adapter_h *h)
{
        return lntb_process_events(L(h));
}

static int ln_xlat_set(struct ntbf_adapter_h *h, uint32_t slot, const struct ntbf_xlat *x)
{
        return lntb_xlat_set(L(h), slot, x);
}

static int ln_xlat_clear(struct ntbf_adapter_h *h, uint32_t slot)
{
        return lntb_xlat_clear(L(h), slot);
}

static int ln_peer_xlat_set(struct ntbf_adapter_h *h, uint32_t peer, uint32_t slot,
                            uint64_t local_addr, uint64_t size)
{
        return lntb_peer_xlat_set(L(h), peer, slot, local_addr, size);
}

static int ln_peer_xlat_clear(struct ntbf_adapter_h *h, uint32_t peer, uint32_t slot)
{
        return lntb_peer_xlat_clear(L(h), peer, slot);
}

int lntb_op_map_window(struct ntbf_adapter_h *h, uint32_t win, uint64_t offset, uint64_t size,
                       unsigned flags, void **addr)
{
        return lntb_map_window(L(h), win, offset, size, flags, addr);
}

int lntb_op_unmap_window(struct ntbf_adapter_h *h, void *addr, uint64_t size)
{
        return lntb_unmap_window(L(h), addr, size);
}

int lntb_op_window_write(struct ntbf_adapter_h *h, uint32_t win, uint64_t offset, const void *buf,
                         uint64_t len)
{
        return lntb_window_write(L(h), win, offset, buf, len);
}

int lntb_op_mem_alloc(struct ntbf_adapter_h *h, uint64_t size, uint64_t align, struct ntbf_mem *out)
{
        return lntb_mem_alloc(L(h), size, align, out);
}

int lntb_op_mem_free(struct ntbf_adapter_h *h, struct ntbf_mem *m)
{
        return lntb_mem_free(L(h), m);
}

int lntb_op_mem_map(struct ntbf_adapter_h *h, uint64_t bus_addr, uint64_t size, void **addr)
{
        return lntb_mem_map(L(h), bus_addr, size, addr);
}

int lntb_op_mem_unmap(struct ntbf_adapter_h *h, void *addr, uint64_t size)
{
        return lntb_mem_unmap(L(h), addr, size);
}

int lntb_op_db_read(struct ntbf_adapter_h *h, uint64_t *bits)
{
        return lntb_db_read(L(h), bits);
}

int lntb_op_db_clear(struct ntbf_adapter_h *h, uint64_t bits)
{
        return lntb_db_clear(L(h), bits);
}

int lntb_op_db_set_mask(struct ntbf_adapter_h *h, uint64_t bits)
{
        return lntb_db_set_mask(L(h), bits);
}

int lntb_op_db_clear_mask(struct ntbf_adapter_h *h, uint64_t bits)
{
        return lntb_db_clear_mask(L(h), bits);
}

int lntb_op_peer_db_set(struct ntbf_adapter_h *h, uint32_t peer, uint64_t bits)
{
        return lntb_peer_db_set(L(h), peer, bits);
}

int lntb_op_spad_read(struct ntbf_adapter_h *h, uint32_t idx, uint32_t *val)
{
        return lntb_spad_read(L(h), idx, val);
}

int lntb_op_spad_write(struct ntbf_adapter_h *h, uint32_t idx, uint32_t val)
{
        return lntb_spad_write(L(h), idx, val);
}

int lntb_op_peer_spad_read(struct ntbf_adapter_h *h, uint32_t peer, uint32_t idx, uint32_t *val)
{
        return lntb_peer_spad_read(L(h), peer, idx, val);
}

int lntb_op_peer_spad_write(struct ntbf_adapter_h *h, uint32_t peer, uint32_t idx, uint32_t val)
{
        return lntb_peer_spad_write(L(h), peer, idx, val);
}

int lntb_op_peer_msg_write(struct ntbf_adapter_h *h, uint32_t peer, uint32_t midx, uint32_t val)
{
        return lntb_peer_msg_write(L(h), peer, midx, val);
}

int lntb_op_msg_read(struct ntbf_adapter_h *h, uint32_t midx, uint32_t *peer, uint32_t *val)
{
        return lntb_msg_read(L(h), midx, peer, val);
}

int lntb_op_irq_alloc(struct ntbf_adapter_h *h, struct ntbf_irq *out)
{
        return lntb_irq_alloc(L(h), out);
}

int lntb_op_irq_free(struct ntbf_adapter_h *h, struct ntbf_irq *irq)
{
        return lntb_irq_free(L(h), irq);
}

int lntb_op_irq_trigger(struct ntbf_adapter_h *h, uint64_t addr, uint32_t data)
{
        return lntb_irq_trigger(L(h), addr, data);
}

int lntb_op_host_map(struct ntbf_adapter_h *h, uint64_t addr, uint64_t size, void **out)
{
        return lntb_host_map(L(h), addr, size, out);
}

int lntb_op_host_unmap(struct ntbf_adapter_h *h, void *addr, uint64_t size)
{
        return lntb_host_unmap(L(h), addr, size);
}

int lntb_op_host_bus(struct ntbf_adapter_h *h, const void *addr, uint64_t size, uint64_t *bus)
{
        return lntb_host_bus(L(h), addr, size, bus);
}

int lntb_op_serve(struct ntbf_adapter_h *h, uint64_t client, const void *req, size_t reqlen,
                  void *ans, size_t anslen, size_t *got, int *fds, unsigned maxfds, unsigned *nfds)
{
        return lntb_serve(L(h), client, req, reqlen, ans, anslen, got, fds, maxfds, nfds);
}

void lntb_op_client_gone(struct ntbf_adapter_h *h, uint64_t client)
{
        lntb_client_gone(L(h), client);
}

/*
 * Config space of this host's devices of the cluster file that are not driven through VFIO
 * (`vfio: false`: the daemon takes VFIO's path for the others): their sysfs config file, as
 * Linux offers it to root whatever driver is bound. The NTB framework has none of its own.
 */
static int ln_cfg(struct ntbf_backend *b, uint32_t device, uint32_t f, bool write, uint32_t off,
                  uint32_t size, uint32_t *val)
{
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/sys/bus/pci/devices", LB(b)->sys->root);
        return ntbf__pci_cfg(dir, LB(b)->t, LB(b)->node, device, f, write, off, size, val);
}

/* Where the kernel placed those devices' BARs: their sysfs resource file. */
int lntb_op_dev_bars(struct ntbf_backend *b, uint32_t device, uint32_t f, uint64_t addr[6],
                     uint64_t size[6])
{
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/sys/bus/pci/devices", LB(b)->sys->root);
        return ntbf__pci_bars(dir, LB(b)->t, LB(b)->node, device, f, addr, size);
}

int lntb_op_cfg_read(struct ntbf_backend *b, uint32_t device, uint32_t f, uint32_t off,
                     uint32_t size, uint32_t *val)
{
        return val ? ln_cfg(b, device, f, false, off, size, val) : -EINVAL;
}

int lntb_op_cfg_write(struct ntbf_backend *b, uint32_t device, uint32_t f, uint32_t off,
                      uint32_t size, uint32_t val)
{
        return ln_cfg(b, device, f, true, off, size, &val);
}

const struct ntbf_backend_ops ntbf__linux_ntb_ops = {
    .name = "linux-ntb",
    .open = ln_open,
    .close = ln_close,
    .probe = ln_probe,
    .release = ln_release,
    .caps = ln_caps,
    .link_state = lntb_op_link_state,
    .link_enable = lntb_op_link_enable,
    .link_disable = lntb_op_link_disable,
    .set_events = lntb_op_set_events,
    .event_fd = lntb_op_event_fd,
    .process_events = lntb_op_process_events,
    .xlat_set = ln_xlat_set,
    .xlat_clear = ln_xlat_clear,
    .peer_xlat_set = ln_peer_xlat_set,
    .peer_xlat_clear = ln_peer_xlat_clear,
    .map_window = lntb_op_map_window,
    .unmap_window = lntb_op_unmap_window,
    .window_write = lntb_op_window_write,
    .mem_alloc = lntb_op_mem_alloc,
    .mem_free = lntb_op_mem_free,
    .mem_map = lntb_op_mem_map,
    .mem_unmap = lntb_op_mem_unmap,
    .db_read = lntb_op_db_read,
    .db_clear = lntb_op_db_clear,
    .db_set_mask = lntb_op_db_set_mask,
    .db_clear_mask = lntb_op_db_clear_mask,
    .peer_db_set = lntb_op_peer_db_set,
    .spad_read = lntb_op_spad_read,
    .spad_write = lntb_op_spad_write,
    .peer_spad_read = lntb_op_peer_spad_read,
    .peer_spad_write = lntb_op_peer_spad_write,
    .peer_msg_write = lntb_op_peer_msg_write,
    .msg_read = lntb_op_msg_read,
    .irq_alloc = lntb_op_irq_alloc,
    .irq_free = lntb_op_irq_free,
    .irq_trigger = lntb_op_irq_trigger,
    .serve = lntb_op_serve,
    .client_gone = lntb_op_client_gone,
    .host_map = lntb_op_host_map,
    .host_unmap = lntb_op_host_unmap,
    .host_bus = lntb_op_host_bus,
    .cfg_read = lntb_op_cfg_read,
    .cfg_write = lntb_op_cfg_write,
    .dev_bars = lntb_op_dev_bars,
};
