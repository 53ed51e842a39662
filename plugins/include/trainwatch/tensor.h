/*
 * trainwatch/tensor.h - helpers for rules that read debugging tensors
 * (tw_scan.tensors, plugin.h): find a reduction by op, test collection
 * membership, select tensors by collection names and Python-compatible
 * regular expressions, and the per-rule step range and mode filter of the
 * reference's rule driver (DEBUG_RULES.md §2.2, §2.4).
 *
 * Header-only like the other trainwatch/ headers. Regexes are compiled
 * with PCRE2 (Debian libpcre2-dev), so a rule that includes this header
 * links -lpcre2-8 (pkg-config libpcre2-8). Why PCRE2 in the plugin rather
 * than a host function: the rule owns its compiled patterns for its whole
 * life (no handles to free across the ABI, no change to tw_host), and
 * Python's `re` syntax the reference's collections use (look-ahead such as
 * `^(?!gradient).*weight`) is PCRE syntax; POSIX regcomp has none of it.
 *
 * Matching is Python's re.search: the pattern may match anywhere in the
 * name. Lists (collection names, regexes) are comma-separated strings,
 * split on "," and stripped of blanks, as the reference parses its string
 * parameters (a regex cannot hold a comma, as in the reference).
 *
 * Ownership: a tw_tensor_select owns its copies of the names and its
 * compiled patterns; tw_tensor_select_free releases them.
 */
#ifndef TRAINWATCH_TENSOR_H
#define TRAINWATCH_TENSOR_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include "trainwatch/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The hook's per-step heartbeat record (no reductions, no values). */
#define TW_TENSOR_HEARTBEAT "heartbeat"

static inline int tw_tensor_is_heartbeat(const tw_tensor *t)
{
    return strcmp(t->name, TW_TENSOR_HEARTBEAT) == 0;
}

/* The reduction `op` of t, or NULL. The last one wins when a hook wrote
 * the same op twice (as the reference reader keeps the last entry). */
static inline const tw_tensor_reduction *
tw_tensor_reduction_find(const tw_tensor *t, const char *op)
{
    const tw_tensor_reduction *found = NULL;
    for (uint32_t i = 0; i < t->nreductions; i++)
        if (strcmp(t->reductions[i].op, op) == 0)
            found = &t->reductions[i];
    return found;
}

/* *out = the reduction `op`; also "value" from a one-element raw tensor.
 * Returns 1 when found, 0 otherwise (*out untouched). */
static inline int tw_tensor_get(const tw_tensor *t, const char *op, double *out)
{
    const tw_tensor_reduction *r = tw_tensor_reduction_find(t, op);
    if (r != NULL) {
        *out = r->value;
        return 1;
    }
    if (strcmp(op, "value") == 0 && t->nraw == 1) {
        *out = t->raw[0];
        return 1;
    }
    return 0;
}

/* 1 when the hook saved t for collection `name`. */
static inline int tw_tensor_in_collection(const tw_tensor *t, const char *name)
{
    for (uint32_t i = 0; i < t->ncollections; i++)
        if (strcmp(t->collections[i], name) == 0)
            return 1;
    return 0;
}

/* ---- regexes ----------------------------------------------------------- */

/* Compiles a Python `re` pattern (UTF-8; \xhh and \uhhhh as Python reads
 * them). NULL on error, with the reason and offset in err. */
static inline pcre2_code *tw_tensor_regex_compile(const char *pattern,
                                                  char *err, size_t errlen)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | PCRE2_ALT_BSUX, &code, &off, NULL);
    if (re == NULL) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof(msg));
        /* a cut message is still a message: the length is not needed */
        if (snprintf(err, errlen, "regex '%s': %s at offset %zu", pattern,
                     (const char *)msg, (size_t)off) < 0 &&
            errlen > 0)
            err[0] = '\0';
    }
    return re;
}

/* re.search(pattern, name) is not None; md is match data made for re
 * (pcre2_match_data_create_from_pattern). A name that is not valid UTF-8
 * does not match. */
static inline int tw_tensor_regex_search(const pcre2_code *re,
                                         pcre2_match_data *md, const char *name)
{
    return pcre2_match(re, (PCRE2_SPTR)name, strlen(name), 0, 0, md, NULL) >= 0;
}

/* ---- selection (DEBUG_RULES.md §2.4) ----------------------------------- */

typedef struct tw_tensor_select {
    char **collections;
    size_t ncollections;
    pcre2_code **regexes;
    size_t nregexes;
    pcre2_match_data *md;
} tw_tensor_select;

/* Calls fn(ud, item) for each comma-separated, blank-stripped, non-empty
 * item of csv (NULL or "" = none). Stops at the first TW_ERR. */
static inline int tw_tensor_csv_each(const char *csv,
                                     int (*fn)(void *ud, const char *item),
                                     void *ud)
{
    if (csv == NULL)
        return TW_OK;
    const char *p = csv;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        const char *a = p, *b = p + n;
        while (a < b && (*a == ' ' || *a == '\t' || *a == '\n' || *a == '\r'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\n' ||
                         b[-1] == '\r'))
            b--;
        if (b > a) {
            char *item = (char *)malloc((size_t)(b - a) + 1);
            if (item == NULL)
                return TW_ERR;
            memcpy(item, a, (size_t)(b - a));
            item[b - a] = '\0';
            int rc = fn(ud, item);
            free(item);
            if (rc != TW_OK)
                return TW_ERR;
        }
        if (end == NULL)
            return TW_OK;
        p = end + 1;
    }
}

typedef struct tw_tensor_select_build_ {
    tw_tensor_select *s;
    char *err;
    size_t errlen;
} tw_tensor_select_build_;

static inline int tw_tensor_select_add_coll_(void *ud, const char *item)
{
    tw_tensor_select_build_ *b = (tw_tensor_select_build_ *)ud;
    tw_tensor_select *s = b->s;
    char **v = (char **)realloc(s->collections,
                                (s->ncollections + 1) * sizeof(char *));
    size_t len = strlen(item) + 1;
    char *copy = (char *)malloc(len);
    if (copy != NULL)
        memcpy(copy, item, len);
    if (v != NULL)
        s->collections = v;
    if (v == NULL || copy == NULL) {
        free(copy);
        snprintf(b->err, b->errlen, "out of memory");
        return TW_ERR;
    }
    s->collections[s->ncollections++] = copy;
    return TW_OK;
}

static inline int tw_tensor_select_add_regex_(void *ud, const char *item)
{
    tw_tensor_select_build_ *b = (tw_tensor_select_build_ *)ud;
    tw_tensor_select *s = b->s;
    pcre2_code *re = tw_tensor_regex_compile(item, b->err, b->errlen);
    if (re == NULL)
        return TW_ERR;
    pcre2_code **v = (pcre2_code **)realloc(
        s->regexes, (s->nregexes + 1) * sizeof(pcre2_code *));
    if (v == NULL) {
        pcre2_code_free(re);
        snprintf(b->err, b->errlen, "out of memory");
        return TW_ERR;
    }
    s->regexes = v;
    s->regexes[s->nregexes++] = re;
    return TW_OK;
}

static inline void tw_tensor_select_free(tw_tensor_select *s)
{
    for (size_t i = 0; i < s->ncollections; i++)
        free(s->collections[i]);
    free(s->collections);
    for (size_t i = 0; i < s->nregexes; i++)
        pcre2_code_free(s->regexes[i]);
    free(s->regexes);
    pcre2_match_data_free(s->md);
    memset(s, 0, sizeof(*s));
}

/* Builds a selection from comma-separated collection names and regexes
 * (either may be NULL or empty). TW_ERR names the bad regex in err. */
static inline int tw_tensor_select_init(tw_tensor_select *s,
                                        const char *collections_csv,
                                        const char *regex_csv, char *err,
                                        size_t errlen)
{
    memset(s, 0, sizeof(*s));
    tw_tensor_select_build_ b = {s, err, errlen};
    if (tw_tensor_csv_each(collections_csv, tw_tensor_select_add_coll_, &b) !=
            TW_OK ||
        tw_tensor_csv_each(regex_csv, tw_tensor_select_add_regex_, &b) !=
            TW_OK) {
        tw_tensor_select_free(s);
        return TW_ERR;
    }
    if (s->nregexes > 0) {
        /* one match block fits every pattern: size it for the largest */
        uint32_t most = 0;
        for (size_t i = 0; i < s->nregexes; i++) {
            uint32_t n = 0;
            pcre2_pattern_info(s->regexes[i], PCRE2_INFO_CAPTURECOUNT, &n);
            if (n > most)
                most = n;
        }
        s->md = pcre2_match_data_create(most + 1, NULL);
        if (s->md == NULL) {
            snprintf(err, errlen, "out of memory");
            tw_tensor_select_free(s);
            return TW_ERR;
        }
    }
    return TW_OK;
}

/* 1 when neither collections nor regexes were given. */
static inline int tw_tensor_select_empty(const tw_tensor_select *s)
{
    return s->ncollections == 0 && s->nregexes == 0;
}

/* The union of the named collections and the regexes; the heartbeat never.
 * An empty selection selects every tensor when all_if_empty, else none. */
static inline int tw_tensor_select_match(const tw_tensor_select *s,
                                         const tw_tensor *t, int all_if_empty)
{
    if (tw_tensor_is_heartbeat(t))
        return 0;
    if (tw_tensor_select_empty(s))
        return all_if_empty;
    for (size_t i = 0; i < s->ncollections; i++)
        if (tw_tensor_in_collection(t, s->collections[i]))
            return 1;
    for (size_t i = 0; i < s->nregexes; i++)
        if (tw_tensor_regex_search(s->regexes[i], s->md, t->name))
            return 1;
    return 0;
}

/* ---- which steps a rule evaluates (DEBUG_RULES.md §2.2) ---------------- */

typedef struct tw_tensor_steps {
    int64_t start_step; /* first global step evaluated                   */
    int64_t end_step;   /* exclusive; < 0 = until the job ends           */
    tw_mode mode;       /* TW_MODE_NONE = every mode, else only this one */
} tw_tensor_steps;

/* Parses a mode name as the reference's ModeKeys spell it (any case):
 * "" or NULL = every mode. Returns TW_ERR for anything else. */
static inline int tw_tensor_mode_parse(const char *s, tw_mode *out)
{
    static const struct {
        const char *name;
        tw_mode mode;
    } names[] = {{"TRAIN", TW_MODE_TRAIN},
                 {"EVAL", TW_MODE_EVAL},
                 {"PREDICT", TW_MODE_PREDICT},
                 {"GLOBAL", TW_MODE_GLOBAL}};
    if (s == NULL || s[0] == '\0') {
        *out = TW_MODE_NONE;
        return TW_OK;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *a = s, *b = names[i].name;
        while (*a != '\0' && *b != '\0' && (*a == *b || *a == *b + 32))
            a++, b++;
        if (*a == '\0' && *b == '\0') {
            *out = names[i].mode;
            return TW_OK;
        }
    }
    return TW_ERR;
}

/* 1 when a tensor at global `step` in `mode` is inside the range. */
static inline int tw_tensor_steps_admit(const tw_tensor_steps *r, int64_t step,
                                        tw_mode mode)
{
    if (step < r->start_step || (r->end_step >= 0 && step >= r->end_step))
        return 0;
    return r->mode == TW_MODE_NONE || r->mode == mode;
}

#ifdef __cplusplus
}
#endif

#endif /* TRAINWATCH_TENSOR_H */
