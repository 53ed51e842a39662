/* config_schema_doc.c - the configuration schema as documentation:
 * `trainwatch config --describe`, `--markdown` (the README's table) and
 * `--sample` (config_schema.h). */
#include "config_schema.h"

#include <string.h>

/* The key as the README and --describe name it: "kafka.group",
 * "rules[].name", "rules[].actions[].url", "tick". */
static void full_name(const tw_key_spec *k, char *out, size_t len)
{
    static const char *const prefix[TW_SECTION_COUNT] = {
        "",       "rules[].",           "kafka.", "engine.",
        "state.", "rules[].actions[].", "http.",  "alertmanager."};
    snprintf(out, len, "%s%s", prefix[k->section], k->path);
}

/* "duration >= 1ms", "integer 1..65535", "one of memory|redis", ... */
static void type_text(const tw_key_spec *k, char *out, size_t len)
{
    char lo[32];
    switch (k->type) {
    case TW_TYPE_STRING:
        snprintf(out, len, "%s", k->min > 0 ? "string, not empty" : "string");
        break;
    case TW_TYPE_PATH:
        snprintf(out, len, "path");
        break;
    case TW_TYPE_INT:
        snprintf(out, len, "integer %lld..%lld", (long long)k->min,
                 (long long)k->max);
        break;
    case TW_TYPE_DURATION:
        tw_schema_format_duration(k->min, lo, sizeof(lo));
        snprintf(out, len, "duration %s..36525d%s%s", lo, k->word ? " or " : "",
                 k->word ? k->word : "");
        break;
    case TW_TYPE_BOOL:
        snprintf(out, len, "true|false");
        break;
    case TW_TYPE_ENUM:
        snprintf(out, len, "%s", k->word);
        break;
    case TW_TYPE_LIST:
        snprintf(out, len, "list of strings");
        break;
    case TW_TYPE_MAPPING:
        snprintf(out, len, "mapping");
        break;
    case TW_TYPE_SECTION:
        snprintf(out, len, "section");
        break;
    case TW_TYPE_ENTRIES:
        snprintf(out, len, "list of mappings");
        break;
    }
}

static const char *const section_titles[TW_SECTION_COUNT] = {
    "Top level (eval and run)",
    "rules: each entry (eval and run)",
    "kafka: (run)",
    "engine: (run)",
    "state: (run)",
    "rules[].actions: each entry (run)",
    "http: (run)",
    "alertmanager: (run)",
};

void tw_schema_describe(FILE *out)
{
    size_t nkeys;
    const tw_key_spec *table = tw_schema_table(&nkeys);
    fprintf(out, "trainwatch configuration keys (YAML, or JSON). Durations: a "
                 "number with\nus, ms, s, m, h or d (plain: seconds), at most "
                 "36525d. Nested mappings\nname dotted keys (state: {redis: "
                 "{port: 6379}} is state.redis.port).\n");
    for (int s = 0; s < TW_SECTION_COUNT; s++) {
        fprintf(out, "\n%s\n", section_titles[s]);
        for (size_t i = 0; i < nkeys; i++) {
            const tw_key_spec *k = &table[i];
            if ((int)k->section != s)
                continue;
            char type[96];
            type_text(k, type, sizeof(type));
            fprintf(out, "  %-22s %s", k->path, type);
            if (k->def != NULL)
                fprintf(out, ", default %s", k->def);
            fprintf(out, "\n      %s", k->doc);
            if (k->actions != NULL)
                fprintf(out, " [%s]", k->actions);
            fputc('\n', out);
        }
    }
}

void tw_schema_describe_markdown(FILE *out)
{
    size_t nkeys;
    const tw_key_spec *table = tw_schema_table(&nkeys);
    fprintf(out, "| key | type | default | what |\n| --- | --- | --- | --- "
                 "|\n");
    for (size_t i = 0; i < nkeys; i++) {
        const tw_key_spec *k = &table[i];
        char name[128], type[96];
        full_name(k, name, sizeof(name));
        type_text(k, type, sizeof(type));
        for (char *p = type; *p; p++)
            if (*p == '|')
                *p = '/';
        fprintf(out, "| `%s` | %s | %s%s%s | %s%s%s%s |\n", name, type,
                k->def ? "`" : "", k->def ? k->def : "", k->def ? "`" : "",
                k->doc, k->actions ? " (" : "", k->actions ? k->actions : "",
                k->actions ? ")" : "");
    }
}

/* A YAML scalar: quoted when plain would not read back the same. */
static void put_scalar(FILE *out, const char *v)
{
    int plain =
        *v != '\0' && v[0] != '"' && v[0] != '[' && v[0] != '{' && v[0] != '~';
    for (const char *p = v; plain && *p; p++)
        plain = strchr(":#,&*!|>'%@`", *p) == NULL;
    fprintf(out,
            plain || v[0] == '"' || v[0] == '[' || v[0] == '{' ? "%s"
                                                               : "\"%s\"",
            v);
}

/* One key of a section at `indent`: live with its default, commented
 * with an example when it has none. `open` is the dotted group printed
 * last ("redis"), so each group's header is printed once. */
static void sample_key(FILE *out, const tw_key_spec *k, int indent,
                       const char *prefix, char *group, size_t grouplen)
{
    size_t nkeys;
    const tw_key_spec *table = tw_schema_table(&nkeys);
    const char *path = k->path;
    const char *dot = strchr(path, '.');
    int depth = indent;
    if (dot != NULL) {
        size_t n = (size_t)(dot - path);
        if (strlen(group) != n || strncmp(group, path, n) != 0) {
            snprintf(group, grouplen, "%.*s", (int)n, path);
            /* a group whose keys all lack defaults is commented out */
            int live = 0;
            for (const tw_key_spec *o = k;
                 o < table + nkeys && o->section == k->section &&
                 strncmp(o->path, path, n + 1) == 0;
                 o++)
                live |= o->def != NULL;
            fprintf(out, "%*s%s%s:\n", indent, "", live ? "" : "# ", group);
        }
        path = dot + 1;
        depth += 2;
    } else {
        group[0] = '\0';
    }
    const char *v = k->def != NULL ? k->def : k->example;
    if (strcmp(path, "*") == 0)
        path = "security.protocol";
    fprintf(out, "%*s%s%s%s: ", depth, "", prefix, k->def ? "" : "# ", path);
    put_scalar(out, v != NULL ? v : "");
    fprintf(out, "   # %s\n", k->doc);
}

static void sample_section(FILE *out, tw_section s, int indent,
                           const char *prefix)
{
    size_t nkeys;
    const tw_key_spec *table = tw_schema_table(&nkeys);
    char group[64] = "";
    for (size_t i = 0; i < nkeys; i++)
        if (table[i].section == s)
            sample_key(out, &table[i], indent, prefix, group, sizeof(group));
}

void tw_schema_sample(FILE *out)
{
    size_t nkeys;
    const tw_key_spec *table = tw_schema_table(&nkeys);
    fprintf(out,
            "# trainwatch configuration: every key, with its default when it "
            "has one\n# (written by `trainwatch config --sample`; `trainwatch "
            "config --describe`\n# explains each). Commented keys have no "
            "default: remove the '# ' to set one.\n# `eval --rules FILE` reads "
            "the top level and rules; `run --config FILE` all of it.\n\n");
    for (size_t i = 0; i < nkeys; i++) {
        const tw_key_spec *k = &table[i];
        if (k->section != TW_SECTION_TOP || k->type == TW_TYPE_SECTION ||
            k->type == TW_TYPE_ENTRIES)
            continue;
        fprintf(out, "# %s\n%s%s: %s\n\n", k->doc, k->def ? "" : "# ", k->path,
                k->def ? k->def : k->example);
    }
    fprintf(out, "# %s\nrules:\n  - name: ProfilerReport\n",
            tw_schema_find(TW_SECTION_TOP, "rules")->doc);
    for (size_t i = 0; i < nkeys; i++) {
        const tw_key_spec *k = &table[i];
        if (k->section != TW_SECTION_RULE || strcmp(k->path, "name") == 0 ||
            k->type == TW_TYPE_ENTRIES)
            continue;
        fprintf(out, "    # %s: %s   # %s\n", k->path,
                k->example ? k->example : "", k->doc);
    }
    /* Every action type with the keys that apply to it. */
    const tw_key_spec *type = tw_schema_find(TW_SECTION_ACTION, "type");
    fprintf(out, "    # actions:   # %s\n",
            tw_schema_find(TW_SECTION_RULE, "actions")->doc);
    for (const char *t = type->word; *t;) {
        size_t n = strcspn(t, "|");
        char name[32];
        snprintf(name, sizeof(name), "%.*s", (int)n, t);
        fprintf(out, "    #   - type: %s\n", name);
        for (size_t i = 0; i < nkeys; i++) {
            const tw_key_spec *k = &table[i];
            if (k->section != TW_SECTION_ACTION || k == type ||
                !tw_schema_applies(k, name) ||
                (k->actions == NULL && strcmp(name, "webhook") != 0))
                continue; /* the common keys shown once, under webhook */
            const char *v = k->def ? k->def : k->example;
            fprintf(out, "    #     %s: %s   # %s\n", k->path, v ? v : "",
                    k->doc);
        }
        t += n + (t[n] == '|');
    }
    static const tw_section run_sections[] = {
        TW_SECTION_KAFKA, TW_SECTION_ENGINE, TW_SECTION_STATE, TW_SECTION_HTTP};
    for (size_t i = 0; i < 4; i++) {
        const char *name = tw_section_name(run_sections[i]);
        fprintf(out, "\n# %s\n%s:\n", tw_schema_find(TW_SECTION_TOP, name)->doc,
                name);
        sample_section(out, run_sections[i], 2, "");
    }
    /* The sink needs a URL: all of it commented, so the sample posts
     * nothing when run. */
    fprintf(out, "\n# %s\n# alertmanager:\n",
            tw_schema_find(TW_SECTION_TOP, "alertmanager")->doc);
    size_t nk;
    const tw_key_spec *t = tw_schema_table(&nk);
    for (size_t i = 0; i < nk; i++)
        if (t[i].section == TW_SECTION_AM)
            fprintf(out, "#   %s: %s   # %s\n", t[i].path,
                    t[i].def ? t[i].def : t[i].example, t[i].doc);
}

void tw_schema_print_keys(FILE *out, tw_section section, int indent)
{
    size_t nkeys;
    const tw_key_spec *table = tw_schema_table(&nkeys);
    int col = indent, first = 1;
    fprintf(out, "%*s", indent, "");
    for (size_t i = 0; i < nkeys; i++) {
        const tw_key_spec *k = &table[i];
        if (k->section != section)
            continue;
        char item[160];
        int n = snprintf(item, sizeof(item), "%s%s%s%s", k->path,
                         k->def ? " (" : "", k->def ? k->def : "",
                         k->def ? ")" : "");
        if (!first && col + 2 + n > 76) {
            fprintf(out, ",\n%*s", indent, "");
            col = indent;
        } else if (!first) {
            fputs(", ", out);
            col += 2;
        }
        fputs(item, out);
        col += n;
        first = 0;
    }
    fputc('\n', out);
}
