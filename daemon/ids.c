/* daemon/ids.c: fdids and function addresses, JSON helpers. */
#include <stdio.h>
#include <string.h>

#include "ids.h"
#include "ntbfab/error.h"

uint32_t ntbf__fdid_of(const struct ntbf_topo *t, uint32_t device, uint32_t function)
{
        const struct ntbf_node *n = &t->nodes[t->devices[device].node];
        uint32_t index = 0;
        for (uint32_t i = 0; i < n->ndevices && n->devices[i] != device; i++)
                index += ntbf_device_nfuncs(&t->devices[n->devices[i]]);
        return n->id << NTBF_FDID_INDEX_BITS | (index + function);
}

int ntbf__fdid_resolve(const struct ntbf_topo *t, uint32_t fdid, uint32_t *device,
                       uint32_t *function)
{
        uint32_t node = ntbf_topo_find_node_id(t, fdid >> NTBF_FDID_INDEX_BITS);
        if (node == NTBF_NONE)
                return NTBF_ENOTFOUND;
        uint32_t index = fdid & ((1u << NTBF_FDID_INDEX_BITS) - 1);
        const struct ntbf_node *n = &t->nodes[node];
        for (uint32_t i = 0; i < n->ndevices; i++) {
                uint32_t k = ntbf_device_nfuncs(&t->devices[n->devices[i]]);
                if (index < k) {
                        *device = n->devices[i];
                        *function = index;
                        return 0;
                }
                index -= k;
        }
        return NTBF_ENOTFOUND;
}

const char *ntbf__func_bdf(const struct ntbf_topo *t, uint32_t device, uint32_t function, char *buf,
                           size_t len)
{
        const struct ntbf_device *d = &t->devices[device];
        uint32_t rid = ntbf_device_rid(d, function);
        return ntbf_bdf_fmt(d->domain, (uint8_t)(rid >> 8), (uint8_t)((rid >> 3) & 0x1f),
                            (uint8_t)(rid & 7), buf, len);
}

int ntbf__func_by_bdf(const struct ntbf_topo *t, uint32_t node, const char *bdf, uint32_t *device,
                      uint32_t *function)
{
        uint16_t dom;
        uint8_t bus, dev, fn;
        if (ntbf_bdf_parse(bdf, &dom, &bus, &dev, &fn))
                return -EINVAL;
        uint32_t rid = (uint32_t)bus << 8 | (uint32_t)dev << 3 | fn;
        const struct ntbf_node *n = &t->nodes[node];
        for (uint32_t i = 0; i < n->ndevices; i++) {
                const struct ntbf_device *d = &t->devices[n->devices[i]];
                if (d->domain != dom)
                        continue;
                for (uint32_t f = 0; f < ntbf_device_nfuncs(d); f++)
                        if (ntbf_device_rid(d, f) == rid) {
                                *device = n->devices[i];
                                *function = f;
                                return 0;
                        }
        }
        return NTBF_ENOTFOUND;
}

const char *ntbf__fdid_str(uint32_t fdid, char *buf, size_t len)
{
        snprintf(buf, len, "0x%04x", fdid);
        return buf;
}

const char *ntbf__json_text(struct json_object *o)
{
        return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                     JSON_C_TO_STRING_NOSLASHESCAPE);
}

void ntbf__jput_u(struct json_object *o, const char *k, uint64_t v)
{
        json_object_object_add(o, k, json_object_new_uint64(v));
}

void ntbf__put_window(struct json_object *o, const struct ntbf_adapter *a, uint64_t addr)
{
        uint64_t off = 0;
        int w = ntbf_adapter_addr_window(a, addr, &off);
        ntbf__jput_u(o, "window", w < 0 ? 0 : (uint64_t)w);
        ntbf__jput_u(o, "offset", off);
}

void ntbf__jput_s(struct json_object *o, const char *k, const char *v)
{
        json_object_object_add(o, k, v ? json_object_new_string(v) : NULL);
}

void ntbf__jput_b(struct json_object *o, const char *k, bool v)
{
        json_object_object_add(o, k, json_object_new_boolean(v));
}

bool ntbf__jget_u(struct json_object *o, const char *k, uint64_t *v)
{
        struct json_object *x;
        if (!o || !json_object_object_get_ex(o, k, &x) || !json_object_is_type(x, json_type_int) ||
            json_object_get_int64(x) < 0)
                return false;
        *v = json_object_get_uint64(x);
        return true;
}

bool ntbf__jget_s(struct json_object *o, const char *k, const char **v)
{
        struct json_object *x;
        if (!o || !json_object_object_get_ex(o, k, &x) || !json_object_is_type(x, json_type_string))
                return false;
        *v = json_object_get_string(x);
        return true;
}

bool ntbf__jget_b(struct json_object *o, const char *k, bool *v)
{
        struct json_object *x;
        if (!o || !json_object_object_get_ex(o, k, &x) ||
            !json_object_is_type(x, json_type_boolean))
                return false;
        *v = json_object_get_boolean(x);
        return true;
}
