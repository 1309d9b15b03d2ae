/* core/suggest.h: "did you mean" by edit distance, internal to ntbfab. */
#ifndef NTBF_CORE_SUGGEST_H
#define NTBF_CORE_SUGGEST_H

struct ntbf__suggest {
        const char *word;
        const char *best;
        unsigned best_d;
};

void ntbf__suggest_init(struct ntbf__suggest *s, const char *word);
void ntbf__suggest_add(struct ntbf__suggest *s, const char *candidate);
/* The closest candidate if it is close enough to be a likely typo, else NULL. */
const char *ntbf__suggest_result(const struct ntbf__suggest *s);
/* Damerau-Levenshtein distance (adjacent transpositions count 1), capped at 64 characters. */
unsigned ntbf__edit_distance(const char *a, const char *b);

#endif
