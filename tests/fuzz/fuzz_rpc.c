/* tests/fuzz/fuzz_rpc.c: libFuzzer target: any bytes into the daemon's JSON-RPC server (in memory).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The real method table's schemas with harmless handlers: every request the daemon would
 * hand to a method passes the same parsing, limits and parameter checks. Handlers answer
 * at once, with an error, or later (parked), so ordering and back pressure are exercised;
 * the input arrives in chunks whose sizes the first bytes choose.
 */
static struct ntbf__rpc_method table[64];
static struct ntbf__rpc_call *parked[8];
static int nparked;

static void handler(void *ctx, struct ntbf__rpc_call *call, struct json_object *params)
{
        (void)ctx;
        size_t n = strlen(ntbf__rpc_call_method(call));
        if (!params || !json_object_is_type(params, json_type_object))
                __builtin_trap(); /* the server promised an object */
        if (n % 3 == 0 && nparked < 8)
                parked[nparked++] = call;
        else if (n % 3 == 1)
                ntbf__rpc_fail(call, NTBF_RPC_FAILED, -4001, "refused: %zu", n);
        else
                ntbf__rpc_result(call, json_object_get(params));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!table[0].name) {
                for (size_t i = 0; i < ntbf__nmethods && i < 64; i++) {
                        table[i] = ntbf__methods[i];
                        table[i].fn = handler;
                }
        }
        struct ntbf__rpc_server srv = {table, ntbf__nmethods < 64 ? ntbf__nmethods : 64, NULL, NULL,
                                       NULL};
        struct ntbf__tran_mem mem = {0};
        struct ntbf__rpc_conn *c = ntbf__rpc_conn_new(&srv, &ntbf__tran_mem_ops, &mem);
        size_t chunk = size ? (size_t)data[0] * 7 + 1 : 1;
        uint32_t seed = size > 1 ? data[1] : 0;
        for (size_t off = 0; off < size && !mem.closed;) {
                size_t n = chunk < size - off ? chunk : size - off;
                ntbf__rpc_conn_input(c, (const char *)data + off, n);
                off += n;
                seed = seed * 1103515245u + 12345u;
                chunk = (seed >> 16) % 4096 + 1;
                /* Answer parked calls from time to time: the queue behind them moves on. */
                if (nparked && (seed & 3) == 0) {
                        struct ntbf__rpc_call *call = parked[--nparked];
                        ntbf__rpc_result(call, NULL);
                }
                if (mem.len > (1u << 20))
                        ntbf__tran_mem_reset(&mem);
        }
        /* Every answer the server wrote is one valid JSON line. */
        for (char *p = mem.out; p && *p;) {
                char *nl = strchr(p, '\n');
                if (!nl)
                        __builtin_trap();
                *nl = 0;
                struct json_object *o = json_tokener_parse(p);
                if (!o)
                        __builtin_trap();
                json_object_put(o);
                p = nl + 1;
        }
        ntbf__rpc_conn_eof(c);
        ntbf__rpc_conn_free(c);
        while (nparked)
                ntbf__rpc_result(parked[--nparked], NULL); /* detached: dropped */
        ntbf__tran_mem_free(&mem);
        return 0;
}
