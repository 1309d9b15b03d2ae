/* core/strmap.h: a small string -> uint32 hash map (open addressing), internal to ntbfab. */
#ifndef NTBF_CORE_STRMAP_H
#define NTBF_CORE_STRMAP_H

#include <stddef.h>
#include <stdint.h>

struct ntbf__strmap {
        struct ntbf__strmap_slot {
                const char *key; /* borrowed: must outlive the map */
                uint32_t val;
        } * v;
        size_t n, cap;
};

void ntbf__strmap_init(struct ntbf__strmap *m);
void ntbf__strmap_free(struct ntbf__strmap *m);
/* Insert key -> val. Returns 0, 1 if the key was present (*old gets its value), -ENOMEM. */
int ntbf__strmap_put(struct ntbf__strmap *m, const char *key, uint32_t val, uint32_t *old);
/* Value of key, or UINT32_MAX. */
uint32_t ntbf__strmap_get(const struct ntbf__strmap *m, const char *key);

#endif
