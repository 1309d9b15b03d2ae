/* frontends/lending/frontend.c: read access to a context for frontends built on it (libsisci). */
#include <errno.h>

#include "lending.h"

const struct ntbf_topo *ntbf_ctx_topo(const struct ntbf_ctx *ctx)
{
        return ctx ? ctx->topo : NULL;
}

uint32_t ntbf_ctx_node(const struct ntbf_ctx *ctx)
{
        return ctx ? ctx->node_idx : NTBF_NONE;
}

const char *ntbf_ctx_dir(const struct ntbf_ctx *ctx)
{
        return ctx ? ctx->dir : NULL;
}

int ntbf_ctx_backend(struct ntbf_ctx *ctx, const struct ntbf_backend_ops **ops,
                     struct ntbf_backend **b)
{
        if (!ctx || !ops || !b)
                return -EINVAL;
        *ops = ctx->ops;
        *b = ctx->b;
        return 0;
}

struct ntbf_adapter_h *ntbf_ctx_adapter(struct ntbf_ctx *ctx, uint32_t adapter)
{
        if (!ctx || !ctx->ah || adapter >= ctx->topo->nadapters)
                return NULL;
        return ctx->ah[adapter];
}

int ntbf_dma_bus(struct ntbf_ctx *ctx, const void *ptr, size_t len, uint64_t *bus)
{
        if (!ctx || !bus)
                return -EINVAL;
        return ntbf__dmamem_bus(&ctx->mem, ptr, len ? len : 1, bus);
}
