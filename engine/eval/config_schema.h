/*
 * config_schema.h - the one table of every configuration key: its section,
 * dotted path, type, default, bounds and one line of documentation. It
 * drives validation (config.c for the top level and rules, and each
 * section's owner: run_settings in cmd_run.c, state_store.c, action_config.c),
 * the defaults those owners read, `trainwatch config --describe` and
 * `trainwatch config --sample`. A key missing here is an unknown key.
 * Adding a key: a row in config_schema.c, read through tw_schema_*() by
 * its owner, then README's "Configuration keys" table replaced by the
 * output of `trainwatch config --markdown` (tests/integration/
 * config_schema.sh fails until they agree).
 *
 * Durations have one grammar everywhere (tw_parse_duration_us: a number
 * with us, ms, s, m, min, h or d; plain = seconds; at most
 * TW_DURATION_MAX_TEXT).
 *
 * Ownership: the table is static and constant; nothing here allocates.
 */
#ifndef TW_CONFIG_SCHEMA_H
#define TW_CONFIG_SCHEMA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"

/* Where a key lives. */
typedef enum {
    TW_SECTION_TOP,    /* the file's top level */
    TW_SECTION_RULE,   /* one entry of `rules:` */
    TW_SECTION_KAFKA,  /* `kafka:` (run) */
    TW_SECTION_ENGINE, /* `engine:` (run) */
    TW_SECTION_STATE,  /* `state:` (run) */
    TW_SECTION_ACTION, /* one entry of a rule's `actions:` (run) */
    TW_SECTION_HTTP,   /* `http:` (run) */
    TW_SECTION_AM,     /* `alertmanager:` (run): the engine-wide sink */
    TW_SECTION_COUNT
} tw_section;

typedef enum {
    TW_TYPE_STRING,   /* min/max: length bounds (min 1 = not empty) */
    TW_TYPE_PATH,     /* a file or folder name (not empty) */
    TW_TYPE_INT,      /* min/max: value bounds */
    TW_TYPE_DURATION, /* min/max in µs; `word` also accepted */
    TW_TYPE_BOOL,     /* true/false, yes/no, on/off, 1/0 */
    TW_TYPE_ENUM,     /* one of `word` ("a|b|c") */
    TW_TYPE_LIST,     /* a list of plain values (or one value) */
    TW_TYPE_MAPPING,  /* free keys: rule parameters, librdkafka properties */
    TW_TYPE_SECTION,  /* a mapping of this table's keys */
    TW_TYPE_ENTRIES,  /* a list of mappings of this table's keys */
} tw_key_type;

typedef struct tw_key_spec {
    tw_section section;
    const char *path; /* dotted; "properties.*" = any key below properties */
    tw_key_type type;
    const char *def; /* the default as written in YAML; NULL: none */
    int64_t min, max;
    const char *word;    /* ENUM: "a|b"; DURATION: a word also accepted */
    const char *actions; /* ACTION keys: "webhook|email" or NULL for all */
    const char *example; /* sample value for a key without default */
    const char *doc;     /* one line; may name a computed default */
} tw_key_spec;

/* The whole table, in documentation order. */
const tw_key_spec *tw_schema_table(size_t *n);

/* "", "rules[]", "kafka", "engine", "state", "actions[]". */
const char *tw_section_name(tw_section s);

/* The spec of `path` in `section` (a "x.*" spec matches any "x.<k>"),
 * NULL when unknown. */
const tw_key_spec *tw_schema_find(tw_section section, const char *path);

/* Whether spec applies to the action type `type` (non-ACTION keys: 1). */
int tw_schema_applies(const tw_key_spec *k, const char *type);

/* The known key of `section` (for `action_type` when given) closest to
 * `path` by edit distance, NULL when none is close enough to suggest. */
const char *tw_schema_closest(tw_section section, const char *path,
                              const char *action_type);

/* Checks one scalar value against spec's type and bounds. TW_ERR with a
 * sentence in msg (no location: the caller adds file, line and key). */
int tw_schema_check_value(const tw_key_spec *k, const char *value, char *msg,
                          size_t msglen);

/* Checks every setting of s: an unknown key (or one that does not apply
 * to `action_type`) -> "unknown key" with the closest valid one; a bad
 * value -> its type and bounds. Errors name FILE:LINE and the key. */
int tw_schema_check_settings(const tw_settings *s, tw_section section,
                             const char *action_type, char *err, size_t errlen);

/* Typed values of a section checked by tw_schema_check_settings: the
 * setting when present, else the table's default (NULL / 0 when the key
 * has none). The key must be in the table (assert). */
const char *tw_schema_str(const tw_settings *s, tw_section section,
                          const char *path);
int64_t tw_schema_int(const tw_settings *s, tw_section section,
                      const char *path);
int64_t tw_schema_duration_us(const tw_settings *s, tw_section section,
                              const char *path);
int tw_schema_bool(const tw_settings *s, tw_section section, const char *path);
/* A boolean value that tw_schema_check_value accepted, as 0 or 1. */
int tw_schema_bool_value(const char *v);

/* "90s", "1500ms", "2h": the shortest exact way to write `us`. */
void tw_schema_format_duration(int64_t us, char *out, size_t len);

/* ---- config_schema_doc.c ---------------------------------------------- */

/* `trainwatch config --describe`: every key as readable text. */
void tw_schema_describe(FILE *out);
/* The same as a Markdown table (the README's "Configuration keys"). */
void tw_schema_describe_markdown(FILE *out);
/* The keys of one section with their defaults, "key (default), key, ...",
 * wrapped at 76 columns, each line indented by `indent` (--help texts). */
void tw_schema_print_keys(FILE *out, tw_section section, int indent);
/* `trainwatch config --sample`: a complete commented YAML file that
 * `run` and `eval` load as it is. */
void tw_schema_sample(FILE *out);

#endif /* TW_CONFIG_SCHEMA_H */
