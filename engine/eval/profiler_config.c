/*
 * profiler_config.c - see profiler_config.h. One table of the fields of
 * each level; the checks mirror hooks/python/trainwatch/profiler_config.py
 * and the messages name the same dotted paths.
 */
#include "profiler_config.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef enum pc_kind {
    PC_INTERVAL,   /* one of the agent's sampling intervals              */
    PC_START_STEP, /* integer >= 0                                       */
    PC_NUM_STEPS,  /* integer >= 1                                       */
    PC_UNIX_TIME,  /* number >= 0 (seconds)                              */
    PC_DURATION,   /* number > 0 (seconds)                               */
    PC_REGEX,      /* string, an extended regular expression             */
    PC_PROFILER,   /* cprofile | pyinstrument                            */
    PC_TIMER,      /* total_time | cpu_time | off_cpu_time               */
    PC_FRAMEWORK,  /* the FrameworkProfile object                        */
    PC_FEATURE     /* a feature config object (its own table)            */
} pc_kind;

typedef struct pc_field {
    const char *key;
    pc_kind kind;
    const struct pc_table *table; /* PC_FEATURE, PC_FRAMEWORK */
} pc_field;

typedef struct pc_table {
    const char *path; /* prefix of its fields in messages ("" = top) */
    const pc_field *fields;
    size_t nfields;
} pc_table;

#define PC_RANGE                                                               \
    {"start_step", PC_START_STEP, NULL}, {"num_steps", PC_NUM_STEPS, NULL},    \
        {"start_unix_time", PC_UNIX_TIME, NULL},                               \
    {                                                                          \
        "duration", PC_DURATION, NULL                                          \
    }
#define PC_TABLE(name, path, fields)                                           \
    static const pc_table name = {path, fields,                                \
                                  sizeof(fields) / sizeof(fields[0])}

static const pc_field pc_detailed_fields[] = {PC_RANGE};
PC_TABLE(pc_detailed, "detailed_profiling_config", pc_detailed_fields);
static const pc_field pc_dataloader_fields[] = {
    PC_RANGE, {"metrics_regex", PC_REGEX, NULL}};
PC_TABLE(pc_dataloader, "dataloader_profiling_config", pc_dataloader_fields);
static const pc_field pc_python_fields[] = {
    PC_RANGE,
    {"python_profiler", PC_PROFILER, NULL},
    {"cprofile_timer", PC_TIMER, NULL}};
PC_TABLE(pc_python, "python_profiling_config", pc_python_fields);
static const pc_field pc_framework_fields[] = {
    PC_RANGE,
    {"detailed_profiling_config", PC_FEATURE, &pc_detailed},
    {"dataloader_profiling_config", PC_FEATURE, &pc_dataloader},
    {"python_profiling_config", PC_FEATURE, &pc_python}};
PC_TABLE(pc_framework, "framework_profile_params", pc_framework_fields);
static const pc_field pc_top_fields[] = {
    {"system_monitor_interval_millis", PC_INTERVAL, NULL},
    {"framework_profile_params", PC_FRAMEWORK, &pc_framework}};
PC_TABLE(pc_top, "", pc_top_fields);

static const long long pc_intervals[] = {100, 200, 500, 1000, 5000, 60000};

static void pc_path(char *out, size_t n, const pc_table *t, const char *key)
{
    if (t->path[0] == '\0')
        snprintf(out, n, "%s", key);
    else
        snprintf(out, n, "%s.%s", t->path, key);
}

static int pc_fail(char *err, size_t errlen, const char *fmt, const char *a,
                   const char *b)
{
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, fmt, a, b);
    return -1;
}

static int pc_value(const pc_field *f, const char *path, json_t *v, char *err,
                    size_t errlen);

static int pc_object(const pc_table *t, json_t *obj, const char *where,
                     char *err, size_t errlen)
{
    if (!json_is_object(obj))
        return pc_fail(err, errlen, "%s%s must be an object", where, "");
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        const pc_field *f = NULL;
        for (size_t i = 0; i < t->nfields && f == NULL; i++)
            if (strcmp(t->fields[i].key, key) == 0)
                f = &t->fields[i];
        char path[160];
        pc_path(path, sizeof(path), t, key);
        if (f == NULL)
            return pc_fail(err, errlen, "unknown key %s%s", path, "");
        if (json_is_null(v))
            continue; /* None: unset, as the keyword arguments */
        if (pc_value(f, path, v, err, errlen) != 0)
            return -1;
    }
    /* A range is steps or time, never both. */
    static const char *steps[] = {"start_step", "num_steps"};
    static const char *times[] = {"start_unix_time", "duration"};
    const char *s = NULL, *tm = NULL;
    for (size_t i = 0; i < 2; i++) {
        json_t *a = json_object_get(obj, steps[i]);
        json_t *b = json_object_get(obj, times[i]);
        if (s == NULL && a != NULL && !json_is_null(a))
            s = steps[i];
        if (tm == NULL && b != NULL && !json_is_null(b))
            tm = times[i];
    }
    if (s != NULL && tm != NULL && t != &pc_top) {
        char a[160], b[160];
        pc_path(a, sizeof(a), t, s);
        pc_path(b, sizeof(b), t, tm);
        return pc_fail(err, errlen,
                       "%s and %s cannot both be set: a range is either "
                       "steps or time",
                       a, b);
    }
    return 0;
}

/* The hook applies the regex with Python's re; POSIX regcomp would
 * refuse valid Python syntax ((?i), \d), so C checks only what every
 * dialect shares: escapes, balanced parentheses, closed brackets. */
static int pc_regex_balanced(const char *re)
{
    int depth = 0;
    for (const char *p = re; *p != '\0'; p++) {
        if (*p == '\\') {
            if (*++p == '\0')
                return 0;
        } else if (*p == '[') {
            p++;
            if (*p == '^')
                p++;
            if (*p == ']')
                p++; /* a leading ] is a member */
            while (*p != '\0' && *p != ']') {
                if (*p == '\\' && p[1] != '\0')
                    p++;
                p++;
            }
            if (*p == '\0')
                return 0;
        } else if (*p == '(') {
            depth++;
        } else if (*p == ')' && --depth < 0) {
            return 0;
        }
    }
    return depth == 0;
}

static int pc_value(const pc_field *f, const char *path, json_t *v, char *err,
                    size_t errlen)
{
    switch (f->kind) {
    case PC_INTERVAL:
        if (json_is_integer(v))
            for (size_t i = 0; i < sizeof(pc_intervals) / sizeof(*pc_intervals);
                 i++)
                if (json_integer_value(v) == pc_intervals[i])
                    return 0;
        return pc_fail(err, errlen,
                       "%s must be one of 100, 200, 500, 1000, 5000, "
                       "60000%s",
                       path, "");
    case PC_START_STEP:
        if (json_is_integer(v) && json_integer_value(v) >= 0)
            return 0;
        return pc_fail(err, errlen, "%s must be an integer >= 0%s", path, "");
    case PC_NUM_STEPS:
        if (json_is_integer(v) && json_integer_value(v) >= 1)
            return 0;
        return pc_fail(err, errlen, "%s must be an integer >= 1%s", path, "");
    case PC_UNIX_TIME:
        if (json_is_number(v) && json_number_value(v) >= 0)
            return 0;
        return pc_fail(err, errlen,
                       "%s must be seconds since the epoch (>= 0)%s", path, "");
    case PC_DURATION:
        if (json_is_number(v) && json_number_value(v) > 0)
            return 0;
        return pc_fail(err, errlen, "%s must be seconds > 0%s", path, "");
    case PC_REGEX:
        if (!json_is_string(v))
            return pc_fail(err, errlen, "%s must be a string%s", path, "");
        if (!pc_regex_balanced(json_string_value(v)))
            return pc_fail(err, errlen,
                           "%s '%s' is not a regular expression (unbalanced "
                           "parentheses or brackets)",
                           path, json_string_value(v));
        return 0;
    case PC_PROFILER:
        if (json_is_string(v) &&
            (strcasecmp(json_string_value(v), "cprofile") == 0 ||
             strcasecmp(json_string_value(v), "pyinstrument") == 0))
            return 0;
        return pc_fail(err, errlen,
                       "%s must be one of cprofile, pyinstrument%s", path, "");
    case PC_TIMER:
        if (json_is_string(v) &&
            (strcasecmp(json_string_value(v), "total_time") == 0 ||
             strcasecmp(json_string_value(v), "cpu_time") == 0 ||
             strcasecmp(json_string_value(v), "off_cpu_time") == 0))
            return 0;
        return pc_fail(err, errlen,
                       "%s must be one of total_time, cpu_time, "
                       "off_cpu_time%s",
                       path, "");
    case PC_FRAMEWORK:
    case PC_FEATURE:
        return pc_object(f->table, v, path, err, errlen);
    }
    return pc_fail(err, errlen, "%s: unknown field kind%s", path, "");
}

int tw_profiler_config_check(const char *json, size_t len, char *err,
                             size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        char where[96];
        snprintf(where, sizeof(where), "line %d column %d", je.line, je.column);
        return pc_fail(err, errlen, "profiler config is not JSON (%s): %s",
                       where, je.text);
    }
    int rc = pc_object(&pc_top, root, "profiler config", err, errlen);
    json_decref(root);
    return rc;
}

int tw_profiler_config_interval(const char *json, size_t len, uint32_t *ms)
{
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
    if (root == NULL || !json_is_object(root)) {
        json_decref(root);
        return -1;
    }
    json_t *v = json_object_get(root, "system_monitor_interval_millis");
    int rc = 1;
    if (json_is_integer(v) && json_integer_value(v) > 0 &&
        json_integer_value(v) <= UINT32_MAX) {
        *ms = (uint32_t)json_integer_value(v);
        rc = 0;
    }
    json_decref(root);
    return rc;
}
