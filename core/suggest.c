/* core/suggest.c: edit distance and closest-match suggestions for misspelled names. */
#include <string.h>

#include "suggest.h"

#define MAXLEN 64

unsigned ntbf__edit_distance(const char *a, const char *b)
{
        size_t n = strnlen(a, MAXLEN), m = strnlen(b, MAXLEN);
        unsigned d[MAXLEN + 1][MAXLEN + 1];
        for (size_t i = 0; i <= n; i++)
                d[i][0] = (unsigned)i;
        for (size_t j = 0; j <= m; j++)
                d[0][j] = (unsigned)j;
        for (size_t i = 1; i <= n; i++) {
                for (size_t j = 1; j <= m; j++) {
                        unsigned cost = a[i - 1] != b[j - 1];
                        unsigned v = d[i - 1][j] + 1;
                        if (d[i][j - 1] + 1 < v)
                                v = d[i][j - 1] + 1;
                        if (d[i - 1][j - 1] + cost < v)
                                v = d[i - 1][j - 1] + cost;
                        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                            d[i - 2][j - 2] + 1 < v)
                                v = d[i - 2][j - 2] + 1;
                        d[i][j] = v;
                }
        }
        return d[n][m];
}

void ntbf__suggest_init(struct ntbf__suggest *s, const char *word)
{
        s->word = word;
        s->best = NULL;
        s->best_d = ~0u;
}

void ntbf__suggest_add(struct ntbf__suggest *s, const char *candidate)
{
        unsigned d = ntbf__edit_distance(s->word, candidate);
        if (d < s->best_d) {
                s->best_d = d;
                s->best = candidate;
        }
}

const char *ntbf__suggest_result(const struct ntbf__suggest *s)
{
        size_t len = strlen(s->word);
        unsigned limit = len <= 3 ? 1 : (unsigned)(len / 3 + 1);
        if (!s->best || s->best_d == 0 || s->best_d > limit)
                return NULL;
        return s->best;
}
