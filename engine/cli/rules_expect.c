/* rules_expect.c - a rule unit test's expectation (rules_expect.h). */
#include "rules_expect.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

/* Key in the tests file, key in eval's results. */
static const char *const counter_keys[TW_EXPECT_NCOUNTERS][2] = {
    {"violations", "violations"},
    {"datapoints", "datapoints"},
    {"triggered", "rule_triggered"}};

static const char *const expect_keys[] = {
    "rule", "status", "violations", "datapoints", "triggered", "finding", NULL};

int tw_expect_whole_number(const char *text, uint64_t *out)
{
    char *end;
    if (text == NULL || text[0] < '0' || text[0] > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

int tw_rule_expect_parse(json_t *obj, const char *where, tw_rule_expect *out,
                         char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (!json_is_object(obj)) {
        snprintf(err, errlen, "%s must be a mapping (rule, status, ...)",
                 where);
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        size_t i = 0;
        while (expect_keys[i] != NULL && strcmp(expect_keys[i], key) != 0)
            i++;
        if (expect_keys[i] == NULL) {
            snprintf(err, errlen,
                     "%s: unknown key '%s' (known: rule status violations "
                     "datapoints triggered finding)",
                     where, key);
            return -1;
        }
        if (strcmp(key, "finding") != 0 && !json_is_string(v)) {
            snprintf(err, errlen, "%s: '%s' must be a plain value", where, key);
            return -1;
        }
    }
    out->rule = json_string_value(json_object_get(obj, "rule"));
    out->status = json_string_value(json_object_get(obj, "status"));
    if (out->rule == NULL) {
        snprintf(err, errlen, "%s: needs 'rule' (the rule's name)", where);
        return -1;
    }
    for (size_t i = 0; i < TW_EXPECT_NCOUNTERS; i++) {
        const char *t =
            json_string_value(json_object_get(obj, counter_keys[i][0]));
        if (t == NULL)
            continue;
        if (tw_expect_whole_number(t, &out->want[i]) != 0) {
            snprintf(err, errlen, "%s: '%s' must be a whole number, not '%s'",
                     where, counter_keys[i][0], t);
            return -1;
        }
        out->has[i] = 1;
    }
    json_t *texts = json_object_get(obj, "finding");
    if (texts == NULL)
        return 0;
    size_t i;
    json_t *t;
    if (json_is_array(texts)) {
        json_array_foreach(texts, i, t)
        {
            if (!json_is_string(t)) {
                snprintf(err, errlen, "%s: finding[%zu] must be a text", where,
                         i);
                return -1;
            }
        }
    } else if (!json_is_string(texts)) {
        snprintf(err, errlen, "%s: 'finding' must be a text or a list of texts",
                 where);
        return -1;
    }
    out->texts = texts;
    return 0;
}

/* The finding's texts, one per line: summary, recommendation, parameters,
 * magnitude, then the nodes listed. A C string in b. */
static int finding_text(json_t *finding, tw_buf *b)
{
    static const char *const parts[] = {"summary", "recommendation",
                                        "parameters", NULL};
    const char *lines[8];
    size_t n = 0;
    for (size_t i = 0; parts[i] != NULL; i++)
        lines[n++] = json_string_value(json_object_get(finding, parts[i]));
    lines[n++] = json_string_value(
        json_object_get(json_object_get(finding, "magnitude"), "text"));
    for (size_t i = 0; i < n; i++)
        if (lines[i] != NULL && (tw_buf_append(b, lines[i], strlen(lines[i])) ||
                                 tw_buf_append(b, "\n", 1)))
            return -1;
    size_t i;
    json_t *node;
    json_array_foreach(
        json_object_get(json_object_get(finding, "nodes"), "listed"), i, node)
    {
        const char *s = json_string_value(node);
        if (s != NULL &&
            (tw_buf_append(b, s, strlen(s)) || tw_buf_append(b, "\n", 1)))
            return -1;
    }
    return tw_buf_append(b, "", 1);
}

/* The result named `rule` in eval's rules array (sub-rules are listed
 * there too, with "parent"). */
static json_t *find_rule(json_t *results, const char *rule)
{
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(results, "rules"), i, r)
    {
        const char *name = json_string_value(json_object_get(r, "name"));
        if (name != NULL && strcmp(name, rule) == 0)
            return r;
    }
    return NULL;
}

static int compare_finding(const tw_rule_expect *e, json_t *got, FILE *diff)
{
    json_t *finding = json_object_get(got, "finding");
    tw_buf *b = tw_buf_new();
    if (b == NULL || (finding != NULL && finding_text(finding, b) != 0)) {
        fprintf(diff, "  %s: finding: out of memory\n", e->rule);
        tw_buf_free(b);
        return 1;
    }
    const char *have = tw_buf_len(b) > 0 ? (const char *)tw_buf_data(b) : "";
    size_t n = json_is_array(e->texts) ? json_array_size(e->texts) : 1;
    int missing = 0;
    for (size_t i = 0; i < n; i++) {
        const char *want = json_string_value(
            json_is_array(e->texts) ? json_array_get(e->texts, i) : e->texts);
        if (strstr(have, want) != NULL)
            continue;
        if (missing++ == 0)
            fprintf(diff, "  %s: finding:\n", e->rule);
        fprintf(diff, "  -  contains \"%s\"\n", want);
    }
    if (missing > 0 && finding == NULL)
        fprintf(diff, "  +  (no finding: the rule's status is not "
                      "IssuesFound)\n");
    for (const char *line = have; missing > 0 && *line != '\0';) {
        size_t len = strcspn(line, "\n");
        fprintf(diff, "  +  %.*s\n", (int)len, line);
        line += len + (line[len] == '\n');
    }
    tw_buf_free(b);
    return missing > 0;
}

int tw_rule_expect_compare(const tw_rule_expect *e, json_t *results, FILE *diff)
{
    json_t *got = find_rule(results, e->rule);
    if (got == NULL) {
        fprintf(diff, "  %s: not in the results\n  -  rule: %s\n", e->rule,
                e->rule);
        return 1;
    }
    int differ = 0;
    const char *status = json_string_value(json_object_get(got, "status"));
    if (e->status != NULL &&
        (status == NULL || strcmp(e->status, status) != 0)) {
        fprintf(diff, "  %s:\n  -  status: %s\n  +  status: %s\n", e->rule,
                e->status, status != NULL ? status : "(none)");
        differ++;
    }
    for (size_t i = 0; i < TW_EXPECT_NCOUNTERS; i++) {
        if (!e->has[i])
            continue;
        json_t *g = json_object_get(got, counter_keys[i][1]);
        if (json_is_integer(g) && json_integer_value(g) >= 0 &&
            (uint64_t)json_integer_value(g) == e->want[i])
            continue;
        fprintf(diff, "  %s:\n  -  %s: %llu\n  +  %s: ", e->rule,
                counter_keys[i][0], (unsigned long long)e->want[i],
                counter_keys[i][0]);
        if (json_is_integer(g))
            fprintf(diff, "%lld\n", (long long)json_integer_value(g));
        else
            fprintf(diff, "(none)\n");
        differ++;
    }
    if (e->texts != NULL)
        differ += compare_finding(e, got, diff);
    return differ;
}
