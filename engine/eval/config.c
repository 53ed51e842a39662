/* config.c - loading the rule configuration with libyaml (config.h). */
#include "config.h"

#include "config_schema.h"
#include "secret_file.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

int tw_parse_duration_us(const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno != 0 || v < 0 || isnan(v))
        return TW_ERR;
    double mult = 1e6;
    if (*end == '\0' || strcmp(end, "s") == 0)
        mult = 1e6;
    else if (strcmp(end, "ms") == 0)
        mult = 1e3;
    else if (strcmp(end, "us") == 0)
        mult = 1;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        mult = 60e6;
    else if (strcmp(end, "h") == 0)
        mult = 3600e6;
    else if (strcmp(end, "d") == 0)
        mult = 86400e6;
    else
        return TW_ERR;
    /* Checked before the conversion: a double past INT64_MAX (1e300s,
     * inf) has no int64 value, and llround of it is undefined. */
    double us = v * mult;
    if (!(us <= (double)TW_DURATION_MAX_US))
        return TW_ERR;
    *out = (int64_t)llround(us);
    return TW_OK;
}

void tw_config_free(tw_config *c)
{
    if (c == NULL)
        return;
    tw_arena_free(&c->arena);
    free(c);
}

static tw_config *config_new(void)
{
    tw_config *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    tw_arena_init(&c->arena);
    tw_job_config_default(&c->job);
    /* The schema's defaults (a test ties them to tw_job_config_default). */
    c->job.tick_us = tw_schema_duration_us(NULL, TW_SECTION_TOP, "tick");
    c->job.lateness_us =
        tw_schema_duration_us(NULL, TW_SECTION_TOP, "lateness");
    c->job.idle_node_us =
        tw_schema_duration_us(NULL, TW_SECTION_TOP, "idle_node");
    return c;
}

/* The order ProfilerReport runs its sub-rules (RULES.md §3.12). */
static const char *const profiler_rules[] = {
    "CPUBottleneck",           "IOBottleneck",
    "LowGPUUtilization",       "StepOutlier",
    "GPUMemoryIncrease",       "BatchSize",
    "MaxInitializationTime",   "LoadBalancing",
    "OverallSystemUsage",      "Dataloader",
    "OverallFrameworkMetrics",
};

int tw_config_default_rules(tw_config *c, tw_registry *reg, char *err,
                            size_t errlen)
{
    const tw_plugin *p;
    char why[512];
    size_t n = sizeof(profiler_rules) / sizeof(profiler_rules[0]);
    tw_rule_spec *rules = tw_arena_alloc(&c->arena, (n + 1) * sizeof(*rules));
    tw_rule_actions *acts = tw_arena_alloc(&c->arena, (n + 1) * sizeof(*acts));
    if (rules == NULL || acts == NULL) {
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    memset(rules, 0, (n + 1) * sizeof(*rules));
    memset(acts, 0, (n + 1) * sizeof(*acts));
    size_t nrules = 0;
    if (tw_registry_find(reg, "ProfilerReport", &p, why, sizeof(why)) ==
        TW_OK) {
        rules[nrules++].rule = "ProfilerReport";
    } else {
        for (size_t i = 0; i < n; i++)
            if (tw_registry_find(reg, profiler_rules[i], &p, why,
                                 sizeof(why)) == TW_OK)
                rules[nrules++].rule = profiler_rules[i];
    }
    if (nrules == 0) {
        snprintf(err, errlen,
                 "no built-in rules found (looked in $TRAINWATCH_RULES_DIR, "
                 "%s and %s)",
                 TW_RULES_BUILD_DIR, TW_RULES_INSTALL_DIR);
        return TW_ERR;
    }
    c->rules = rules;
    c->actions = acts;
    c->nrules = nrules;
    return TW_OK;
}

int tw_config_default(tw_registry *reg, tw_config **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    tw_config *c = config_new();
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    if (tw_config_default_rules(c, reg, err, errlen) != TW_OK) {
        tw_config_free(c);
        return TW_ERR;
    }
    *out = c;
    return TW_OK;
}

/* ---- settings sections ------------------------------------------------- */

const tw_setting *tw_settings_find(const tw_settings *s, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->items[i].key, key) == 0)
            return &s->items[i];
    return NULL;
}

int tw_settings_error(const tw_settings *s, const tw_setting *at, char *err,
                      size_t errlen, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *path = s->path ? s->path : "(default)";
    const char *what = s->what ? s->what : "settings";
    if (at != NULL)
        snprintf(err, errlen, "%s:%d: %s: key '%s': %s", path, at->line, what,
                 at->key, msg);
    else
        snprintf(err, errlen, "%s:%d: %s: %s", path, s->line, what, msg);
    return TW_ERR;
}

int tw_settings_get_str(const tw_settings *s, const char *key, const char **out)
{
    const tw_setting *v = tw_settings_find(s, key);
    if (v != NULL)
        *out = v->value;
    return TW_OK;
}

/* ---- a small YAML document tree -------------------------------------- */

typedef enum { NODE_SCALAR, NODE_MAP, NODE_SEQ } node_kind;

typedef struct ynode {
    node_kind kind;
    int line;
    char *text;           /* scalar */
    struct ynode **items; /* map: key, value, key, value...; seq: items */
    size_t n;
} ynode;

/* Mappings and lists nest at most this deep: the tree is built
 * recursively, and a hostile file ("[[[[..." 100 000 deep) would otherwise
 * overflow the stack. Real configurations use fewer than 6 levels. */
#define TW_CONFIG_MAX_DEPTH 64

typedef struct loader {
    yaml_parser_t parser;
    tw_arena *arena;
    const char *path;
    char *err;
    size_t errlen;
    int depth; /* mappings and lists open around the current event */
} loader;

static ynode *node_new(loader *l, node_kind k, int line)
{
    ynode *n = tw_arena_alloc(l->arena, sizeof(*n));
    if (n != NULL) {
        n->kind = k;
        n->line = line;
    }
    return n;
}

static int node_push(loader *l, ynode *parent, ynode *child, size_t *cap)
{
    if (parent->n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        ynode **ni = tw_arena_alloc(l->arena, ncap * sizeof(ynode *));
        if (ni == NULL)
            return TW_ERR;
        if (parent->n)
            memcpy(ni, parent->items, parent->n * sizeof(ynode *));
        parent->items = ni;
        *cap = ncap;
    }
    parent->items[parent->n++] = child;
    return TW_OK;
}

static int parse_node(loader *l, yaml_event_t *ev, ynode **out);

/* A key of one mapping, for the duplicate check: its text and position. */
typedef struct map_key {
    const char *text;
    size_t index;
    int line;
} map_key;

static int map_key_cmp(const void *a, const void *b)
{
    const map_key *x = a, *y = b;
    int c = strcmp(x->text, y->text);
    if (c != 0)
        return c;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Sorts keys and returns the repeat that comes first in the file (NULL
 * when every key is distinct), with *first its earlier occurrence. */
static const map_key *first_repeat(map_key *keys, size_t n,
                                   const map_key **first)
{
    qsort(keys, n, sizeof(*keys), map_key_cmp);
    const map_key *dup = NULL;
    for (size_t i = 1; i < n; i++)
        if (strcmp(keys[i - 1].text, keys[i].text) == 0 &&
            (dup == NULL || keys[i].index < dup->index)) {
            *first = &keys[i - 1];
            dup = &keys[i];
        }
    return dup;
}

/* TW_ERR naming both lines when a key of mapping m appears twice: YAML
 * forbids it, and silently keeping one of the values hides a mistake.
 * Sorted rather than compared pairwise, so a huge mapping stays cheap. */
static int check_duplicate_keys(loader *l, const ynode *m)
{
    size_t n = m->n / 2;
    if (n < 2)
        return TW_OK;
    map_key *keys = malloc(n * sizeof(*keys));
    if (keys == NULL) {
        snprintf(l->err, l->errlen, "%s:%d: out of memory", l->path, m->line);
        return TW_ERR;
    }
    size_t nk = 0;
    for (size_t i = 0; i < n; i++) {
        const ynode *k = m->items[2 * i];
        if (k->kind == NODE_SCALAR)
            keys[nk++] = (map_key){k->text, i, k->line};
    }
    const map_key *first = NULL, *dup = first_repeat(keys, nk, &first);
    int rc = TW_OK;
    if (dup != NULL) {
        snprintf(l->err, l->errlen,
                 "%s:%d: duplicate key '%.100s' (first on line %d)", l->path,
                 dup->line, dup->text, first->line);
        rc = TW_ERR;
    }
    free(keys);
    return rc;
}

/* The parser's next event; a YAML syntax error is named with file:line. */
static int next_event(loader *l, yaml_event_t *ev)
{
    if (yaml_parser_parse(&l->parser, ev))
        return TW_OK;
    snprintf(l->err, l->errlen, "%s:%zu: %s", l->path,
             l->parser.problem_mark.line + 1,
             l->parser.problem ? l->parser.problem : "YAML error");
    return TW_ERR;
}

static int parse_children(loader *l, ynode *parent, yaml_event_type_t end)
{
    size_t cap = 0;
    for (;;) {
        yaml_event_t ev;
        if (next_event(l, &ev) != TW_OK)
            return TW_ERR;
        if (ev.type == end) {
            yaml_event_delete(&ev);
            return parent->kind == NODE_MAP ? check_duplicate_keys(l, parent)
                                            : TW_OK;
        }
        ynode *child;
        int rc = parse_node(l, &ev, &child);
        yaml_event_delete(&ev);
        if (rc != TW_OK || node_push(l, parent, child, &cap) != TW_OK)
            return TW_ERR;
    }
}

/* A mapping or list: its children, one level deeper. */
static int parse_container(loader *l, node_kind kind, int line,
                           yaml_event_type_t end, ynode **out)
{
    if (l->depth >= TW_CONFIG_MAX_DEPTH) {
        snprintf(l->err, l->errlen,
                 "%s:%d: mappings and lists nested more than %d deep", l->path,
                 line, TW_CONFIG_MAX_DEPTH);
        return TW_ERR;
    }
    ynode *n = node_new(l, kind, line);
    if (n == NULL)
        return TW_ERR;
    *out = n;
    l->depth++;
    int rc = parse_children(l, n, end);
    l->depth--;
    return rc;
}

static int parse_node(loader *l, yaml_event_t *ev, ynode **out)
{
    int line = (int)ev->start_mark.line + 1;
    switch (ev->type) {
    case YAML_SCALAR_EVENT: {
        ynode *n = node_new(l, NODE_SCALAR, line);
        if (n == NULL)
            return TW_ERR;
        n->text =
            tw_arena_strndup(l->arena, (const char *)ev->data.scalar.value,
                             ev->data.scalar.length);
        *out = n;
        return n->text ? TW_OK : TW_ERR;
    }
    case YAML_MAPPING_START_EVENT:
        return parse_container(l, NODE_MAP, line, YAML_MAPPING_END_EVENT, out);
    case YAML_SEQUENCE_START_EVENT:
        return parse_container(l, NODE_SEQ, line, YAML_SEQUENCE_END_EVENT, out);
    case YAML_ALIAS_EVENT:
        snprintf(l->err, l->errlen, "%s:%d: YAML aliases are not supported",
                 l->path, line);
        return TW_ERR;
    default:
        snprintf(l->err, l->errlen, "%s:%d: unexpected YAML event", l->path,
                 line);
        return TW_ERR;
    }
}

static int load_tree(loader *l, FILE *f, ynode **root)
{
    yaml_parser_set_input_file(&l->parser, f);
    *root = NULL;
    for (;;) {
        yaml_event_t ev;
        if (next_event(l, &ev) != TW_OK)
            return TW_ERR;
        yaml_event_type_t t = ev.type;
        int rc = TW_OK;
        if (t == YAML_MAPPING_START_EVENT || t == YAML_SEQUENCE_START_EVENT ||
            t == YAML_SCALAR_EVENT) {
            if (*root == NULL)
                rc = parse_node(l, &ev, root);
        }
        yaml_event_delete(&ev);
        if (rc != TW_OK)
            return TW_ERR;
        if (t == YAML_STREAM_END_EVENT)
            return TW_OK;
    }
}

/* ---- interpretation ---------------------------------------------------- */

static int bad(loader *l, const ynode *n, const char *fmt, const char *a)
{
    char msg[256];
    snprintf(msg, sizeof(msg), fmt, a);
    snprintf(l->err, l->errlen, "%s:%d: %s", l->path, n ? n->line : 0, msg);
    return TW_ERR;
}

static int bad2(loader *l, const ynode *n, const char *fmt, const char *a,
                const char *b)
{
    char msg[384];
    snprintf(msg, sizeof(msg), fmt, a, b);
    snprintf(l->err, l->errlen, "%s:%d: %s", l->path, n ? n->line : 0, msg);
    return TW_ERR;
}

/* An unknown key of a section handled here, with the closest known one. */
static int unknown_key(loader *l, const ynode *k, tw_section section,
                       const char *where)
{
    const char *key = k->kind == NODE_SCALAR ? k->text : "(not a scalar)";
    const char *near = tw_schema_closest(section, key, NULL);
    char hint[64] = "";
    if (near != NULL)
        snprintf(hint, sizeof(hint), " (did you mean '%.30s'?)", near);
    char msg[200];
    snprintf(msg, sizeof(msg), "unknown key '%.60s' %s%s", key, where, hint);
    return bad(l, k, "%s; trainwatch config --describe lists the keys", msg);
}

/* plugin_isolation, plugin_timeout, plugin_memory_mb (top level). */
static int parse_isolation_key(loader *l, const char *key, const ynode *v,
                               tw_isolation *iso)
{
    if (v->kind != NODE_SCALAR)
        return bad(l, v, "key '%s' must be a plain value", key);
    const tw_key_spec *spec = tw_schema_find(TW_SECTION_TOP, key);
    char msg[256];
    if (tw_schema_check_value(spec, v->text, msg, sizeof(msg)) != TW_OK)
        return bad2(l, v, "key '%s': %s", key, msg);
    if (strcmp(key, "plugin_isolation") == 0) {
        iso->mode = strcmp(v->text, "all") == 0   ? TW_ISOLATE_ALL
                    : strcmp(v->text, "off") == 0 ? TW_ISOLATE_OFF
                                                  : TW_ISOLATE_CUSTOM;
    } else if (strcmp(key, "plugin_timeout") == 0) {
        int64_t us = 0; /* off */
        if (strcmp(v->text, "off") != 0 &&
            tw_parse_duration_us(v->text, &us) != TW_OK)
            return bad(l, v, "key '%s': not a duration", key);
        int64_t ms = us / 1000;
        iso->timeout_ms = ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
    } else {
        iso->memory_mb = (uint32_t)strtoul(v->text, NULL, 10);
    }
    return TW_OK;
}

static int parse_semantics(loader *l, const ynode *v, tw_semantics *out)
{
    if (v->kind == NODE_SCALAR && strcmp(v->text, "fixed") == 0)
        *out = TW_SEMANTICS_FIXED;
    else if (v->kind == NODE_SCALAR && (strcmp(v->text, "reference") == 0 ||
                                        strcmp(v->text, "compat") == 0))
        *out = TW_SEMANTICS_REFERENCE;
    else
        return bad(l, v, "key 'semantics': '%s' is not 'fixed' or 'reference'",
                   v->kind == NODE_SCALAR ? v->text : "(not a scalar)");
    return TW_OK;
}

/* Count the settings a mapping flattens into. */
static size_t flat_count(const ynode *m)
{
    size_t n = 0;
    for (size_t i = 0; i + 1 < m->n; i += 2)
        n +=
            m->items[i + 1]->kind == NODE_MAP ? flat_count(m->items[i + 1]) : 1;
    return n;
}

static int flatten_into(loader *l, tw_config *c, const ynode *m,
                        const char *prefix, tw_settings *s)
{
    for (size_t i = 0; i + 1 < m->n; i += 2) {
        const ynode *k = m->items[i], *v = m->items[i + 1];
        if (k->kind != NODE_SCALAR)
            return bad(l, k, "keys must be plain values%s", "");
        size_t klen = strlen(prefix) + strlen(k->text) + 2;
        char *key = tw_arena_alloc(&c->arena, klen);
        if (key == NULL)
            return bad(l, k, "out of memory%s", "");
        snprintf(key, klen, "%s%s%s", prefix, *prefix ? "." : "", k->text);
        if (v->kind == NODE_MAP) {
            if (flatten_into(l, c, v, key, s) != TW_OK)
                return TW_ERR;
            continue;
        }
        const char *value;
        if (v->kind == NODE_SCALAR) {
            value = v->text;
        } else { /* a list of plain values -> "a,b,c" */
            size_t len = 1;
            for (size_t j = 0; j < v->n; j++) {
                if (v->items[j]->kind != NODE_SCALAR)
                    return bad(l, v->items[j],
                               "key '%s' must be a list of plain values", key);
                len += strlen(v->items[j]->text) + 1;
            }
            char *joined = tw_arena_alloc(&c->arena, len);
            if (joined == NULL)
                return bad(l, v, "out of memory%s", "");
            joined[0] = '\0';
            for (size_t j = 0; j < v->n; j++) {
                if (j)
                    strcat(joined, ",");
                strcat(joined, v->items[j]->text);
            }
            value = joined;
        }
        tw_setting *st = &s->items[s->n++];
        st->key = key;
        st->value = value;
        st->line = v->line;
    }
    return TW_OK;
}

/* `a.b: 1` next to `a: {b: 2}` flattens to the key "a.b" twice: the same
 * mistake as a duplicate key, named with both lines. */
static int check_duplicate_settings(loader *l, const tw_settings *s)
{
    if (s->n < 2)
        return TW_OK;
    map_key *keys = malloc(s->n * sizeof(*keys));
    if (keys == NULL) {
        snprintf(l->err, l->errlen, "%s:%d: out of memory", l->path, s->line);
        return TW_ERR;
    }
    for (size_t i = 0; i < s->n; i++)
        keys[i] = (map_key){s->items[i].key, i, s->items[i].line};
    const map_key *first = NULL, *dup = first_repeat(keys, s->n, &first);
    int rc = TW_OK;
    if (dup != NULL) {
        snprintf(l->err, l->errlen,
                 "%s:%d: %s: key '%.100s' is given twice (first on line %d)",
                 l->path, dup->line, s->what, dup->text, first->line);
        rc = TW_ERR;
    }
    free(keys);
    return rc;
}

/* A mapping -> a flat settings section labelled `what`. */
static int parse_settings(loader *l, tw_config *c, const ynode *m,
                          const char *what, tw_settings *s)
{
    if (m->kind != NODE_MAP)
        return bad(l, m, "'%s' must be a mapping", what);
    s->path = c->path ? c->path : l->path;
    s->what = tw_arena_strdup(&c->arena, what);
    s->line = m->line;
    size_t n = flat_count(m);
    s->items = tw_arena_alloc(&c->arena, (n + 1) * sizeof(tw_setting));
    if (s->what == NULL || s->items == NULL)
        return bad(l, m, "out of memory%s", "");
    s->n = 0;
    if (flatten_into(l, c, m, "", s) != TW_OK)
        return TW_ERR;
    return check_duplicate_settings(l, s);
}

static int parse_actions(loader *l, tw_config *c, const ynode *v,
                         const char *rule_name, tw_rule_actions *a)
{
    if (v->kind != NODE_SEQ)
        return bad(l, v, "key 'actions' of rule '%s' must be a list",
                   rule_name);
    a->items = tw_arena_alloc(&c->arena, (v->n + 1) * sizeof(tw_settings));
    if (a->items == NULL)
        return bad(l, v, "out of memory%s", "");
    for (size_t i = 0; i < v->n; i++) {
        char what[200];
        snprintf(what, sizeof(what), "rule '%s' action %zu", rule_name, i + 1);
        if (parse_settings(l, c, v->items[i], what, &a->items[i]) != TW_OK)
            return TW_ERR;
        a->n++;
    }
    return TW_OK;
}

static int parse_rule(loader *l, tw_config *c, const ynode *m, tw_rule_spec *r,
                      tw_rule_actions *a)
{
    const ynode *actions = NULL;
    if (m->kind != NODE_MAP)
        return bad(l, m, "each entry of 'rules' must be a mapping%s", "");
    for (size_t i = 0; i + 1 < m->n; i += 2) {
        const ynode *k = m->items[i], *v = m->items[i + 1];
        const char *key = k->kind == NODE_SCALAR ? k->text : "";
        if (strcmp(key, "parameters") == 0) {
            if (v->kind != NODE_MAP)
                return bad(l, v, "key 'parameters' must be a mapping%s", "");
            size_t n = v->n / 2;
            const char **keys =
                tw_arena_alloc(&c->arena, (n + 1) * sizeof(char *));
            const char **vals =
                tw_arena_alloc(&c->arena, (n + 1) * sizeof(char *));
            if (keys == NULL || vals == NULL)
                return bad(l, v, "out of memory%s", "");
            for (size_t p = 0; p < n; p++) {
                const ynode *pk = v->items[2 * p], *pv = v->items[2 * p + 1];
                if (pk->kind != NODE_SCALAR || pv->kind != NODE_SCALAR)
                    return bad(l, pv, "parameter '%s' must be a plain value",
                               pk->kind == NODE_SCALAR ? pk->text : "?");
                keys[p] = pk->text;
                vals[p] = pv->text;
            }
            r->keys = keys;
            r->values = vals;
            r->nparams = n;
            continue;
        }
        if (strcmp(key, "actions") == 0) {
            actions = v;
            continue;
        }
        if (strcmp(key, "semantics") == 0) {
            if (parse_semantics(l, v, &r->semantics) != TW_OK)
                return TW_ERR;
            r->has_semantics = 1;
            continue;
        }
        const tw_key_spec *spec = tw_schema_find(TW_SECTION_RULE, key);
        if (spec == NULL)
            return unknown_key(l, k, TW_SECTION_RULE, "in a rule");
        if (v->kind != NODE_SCALAR)
            return bad(l, v, "key '%s' must be a plain value", key);
        char msg[256];
        if (tw_schema_check_value(spec, v->text, msg, sizeof(msg)) != TW_OK)
            return bad2(l, v, "key '%s': %s", key, msg);
        if (strcmp(key, "name") == 0)
            r->name = v->text;
        else if (strcmp(key, "rule") == 0)
            r->rule = v->text;
        else if (strcmp(key, "source") == 0)
            r->source = v->text;
        else if (strcmp(key, "act_on_consequences") == 0)
            r->act_on_consequences = tw_schema_bool_value(v->text);
        else
            r->entry = v->text;
    }
    if (r->name == NULL && r->rule == NULL && r->source == NULL)
        return bad(l, m, "a rule needs 'name' (a built-in rule) or 'source'%s",
                   "");
    /* A rule with only a name is the built-in of that name. */
    if (r->source == NULL && r->rule == NULL)
        r->rule = r->name;
    if (r->source != NULL && r->rule != NULL)
        return bad(l, m, "a rule has either 'rule' or 'source', not both%s",
                   "");
    if (actions != NULL &&
        parse_actions(l, c, actions, r->name ? r->name : r->rule, a) != TW_OK)
        return TW_ERR;
    return TW_OK;
}

static int interpret(loader *l, tw_config *c, const ynode *root)
{
    if (root == NULL)
        return bad(l, NULL, "the file is empty%s", "");
    if (root->kind != NODE_MAP)
        return bad(l, root, "the top level must be a mapping%s", "");
    const ynode *rules = NULL;
    for (size_t i = 0; i + 1 < root->n; i += 2) {
        const ynode *k = root->items[i], *v = root->items[i + 1];
        const char *key = k->kind == NODE_SCALAR ? k->text : "";
        if (strcmp(key, "rules") == 0) {
            rules = v;
        } else if (strcmp(key, "kafka") == 0 || strcmp(key, "state") == 0 ||
                   strcmp(key, "engine") == 0 || strcmp(key, "http") == 0 ||
                   strcmp(key, "alertmanager") == 0) {
            tw_settings *s = strcmp(key, "kafka") == 0   ? &c->kafka
                             : strcmp(key, "state") == 0 ? &c->state
                             : strcmp(key, "http") == 0  ? &c->http
                             : strcmp(key, "alertmanager") == 0
                                 ? &c->alertmanager
                                 : &c->engine;
            if (parse_settings(l, c, v, key, s) != TW_OK)
                return TW_ERR;
        } else if (strcmp(key, "semantics") == 0) {
            if (parse_semantics(l, v, &c->job.semantics) != TW_OK)
                return TW_ERR;
        } else if (strcmp(key, "plugin_isolation") == 0 ||
                   strcmp(key, "plugin_timeout") == 0 ||
                   strcmp(key, "plugin_memory_mb") == 0) {
            if (parse_isolation_key(l, key, v, &c->job.isolation) != TW_OK)
                return TW_ERR;
        } else if (strcmp(key, "tick") == 0 || strcmp(key, "lateness") == 0 ||
                   strcmp(key, "idle_node") == 0 ||
                   strcmp(key, "clock_skew") == 0) {
            if (v->kind != NODE_SCALAR)
                return bad(l, v, "key '%s' must be a duration", key);
            const tw_key_spec *spec = tw_schema_find(TW_SECTION_TOP, key);
            char msg[256];
            if (tw_schema_check_value(spec, v->text, msg, sizeof(msg)) != TW_OK)
                return bad2(l, v, "key '%s': %s", key, msg);
            int64_t us = 0; /* tick: continuous; clock_skew: off */
            if (spec->word == NULL || strcmp(v->text, spec->word) != 0)
                if (tw_parse_duration_us(v->text, &us) != TW_OK)
                    return bad(l, v, "key '%s': not a duration", key);
            if (strcmp(key, "tick") == 0)
                c->job.tick_us = us;
            else if (strcmp(key, "lateness") == 0)
                c->job.lateness_us = us;
            else if (strcmp(key, "idle_node") == 0)
                c->job.idle_node_us = us;
            else
                c->job.clock_skew_us = us;
        } else {
            return unknown_key(l, k, TW_SECTION_TOP, "at the top level");
        }
    }
    if (rules == NULL)
        return TW_OK; /* the caller uses the default rule set */
    if (rules->kind != NODE_SEQ)
        return bad(l, rules, "key 'rules' must be a list%s", "");
    if (rules->n == 0)
        return bad(l, rules, "key 'rules' is empty%s", "");
    c->rules = tw_arena_alloc(&c->arena, rules->n * sizeof(tw_rule_spec));
    c->actions = tw_arena_alloc(&c->arena, rules->n * sizeof(tw_rule_actions));
    if (c->rules == NULL || c->actions == NULL)
        return bad(l, rules, "out of memory%s", "");
    memset(c->rules, 0, rules->n * sizeof(tw_rule_spec));
    memset(c->actions, 0, rules->n * sizeof(tw_rule_actions));
    for (size_t i = 0; i < rules->n; i++) {
        if (parse_rule(l, c, rules->items[i], &c->rules[i], &c->actions[i]) !=
            TW_OK)
            return TW_ERR;
        c->nrules++;
        /* Results, alert ids and action ledgers are keyed by rule name. */
        const tw_rule_spec *r = &c->rules[i];
        const char *name = r->name != NULL ? r->name : r->rule;
        for (size_t j = 0; name != NULL && j < i; j++) {
            const tw_rule_spec *o = &c->rules[j];
            const char *other = o->name != NULL ? o->name : o->rule;
            if (other == NULL || strcmp(name, other) != 0)
                continue;
            char msg[200];
            snprintf(msg, sizeof(msg),
                     "rule name '%.80s' is already used by the rule on line "
                     "%d; give one of them its own 'name'",
                     name, rules->items[j]->line);
            return bad(l, rules->items[i], "%s", msg);
        }
    }
    return TW_OK;
}

/* The first setting of s that holds a secret, NULL when none does. */
static const tw_setting *settings_secret(const tw_settings *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (tw_secret_key(s->items[i].key))
            return &s->items[i];
    return NULL;
}

/* Refuses a file every user can read when a setting holds a secret
 * (secret_file.h); f is the file the settings were read from. */
static int check_secret_settings(const tw_config *c, FILE *f, char *err,
                                 size_t errlen)
{
    const tw_settings *sections[] = {&c->kafka, &c->state, &c->engine,
                                     &c->http};
    const tw_settings *in = NULL;
    const tw_setting *at = NULL;
    for (size_t i = 0; at == NULL && i < 4; i++)
        at = settings_secret(in = sections[i]);
    for (size_t r = 0; at == NULL && r < c->nrules; r++)
        for (size_t a = 0; at == NULL && a < c->actions[r].n; a++)
            at = settings_secret(in = &c->actions[r].items[a]);
    char why[320];
    if (at == NULL ||
        tw_secret_file_check(f, c->path, why, sizeof(why)) == TW_OK)
        return TW_OK;
    return tw_settings_error(in, at, err, errlen, "holds a secret, and %s",
                             why);
}

int tw_config_load(const char *path, tw_config **out, char *err, size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return TW_ERR;
    }
    tw_config *c = config_new();
    if (c == NULL) {
        fclose(f);
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    c->path = tw_arena_strdup(&c->arena, path);
    loader l = {.arena = &c->arena, .path = path, .err = err, .errlen = errlen};
    if (!yaml_parser_initialize(&l.parser)) {
        fclose(f);
        tw_config_free(c);
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    ynode *root = NULL;
    int rc = load_tree(&l, f, &root);
    if (rc == TW_OK)
        rc = interpret(&l, c, root);
    if (rc == TW_OK)
        rc = check_secret_settings(c, f, err, errlen);
    yaml_parser_delete(&l.parser);
    fclose(f);
    if (rc != TW_OK) {
        tw_config_free(c);
        return TW_ERR;
    }
    *out = c;
    return TW_OK;
}

/* The `alertmanager:` sink as one more action of every rule: its keys
 * plus type: alertmanager (validated with the other actions). */
static int add_alertmanager_sink(tw_config *c, char *err, size_t errlen)
{
    const tw_settings *am = &c->alertmanager;
    if (am->line == 0)
        return TW_OK;
    if (tw_schema_check_settings(am, TW_SECTION_AM, NULL, err, errlen) != TW_OK)
        return TW_ERR;
    if (tw_settings_find(am, "url") == NULL)
        return tw_settings_error(am, NULL, err, errlen,
                                 "key 'url' is required");
    tw_setting *items = tw_arena_alloc(&c->arena, (am->n + 1) * sizeof(*items));
    if (items == NULL)
        goto oom;
    memcpy(items, am->items, am->n * sizeof(*items));
    items[am->n] =
        (tw_setting){.key = "type", .value = "alertmanager", .line = am->line};
    for (size_t r = 0; r < c->nrules; r++) {
        tw_rule_actions *a = &c->actions[r];
        tw_settings *list =
            tw_arena_alloc(&c->arena, (a->n + 1) * sizeof(*list));
        if (list == NULL)
            goto oom;
        if (a->n > 0)
            memcpy(list, a->items, a->n * sizeof(*list));
        list[a->n] = (tw_settings){.path = am->path,
                                   .what = "alertmanager",
                                   .line = am->line,
                                   .items = items,
                                   .n = am->n + 1};
        a->items = list;
        a->n++;
    }
    return TW_OK;
oom:
    snprintf(err, errlen, "out of memory");
    return TW_ERR;
}

int tw_config_load_or_default(const char *path, tw_registry *reg,
                              tw_config **out, char *err, size_t errlen)
{
    int rc = path != NULL ? tw_config_load(path, out, err, errlen)
                          : tw_config_default(reg, out, err, errlen);
    if (rc != TW_OK)
        return rc;
    if ((*out)->nrules == 0)
        rc = tw_config_default_rules(*out, reg, err, errlen);
    if (rc == TW_OK)
        rc = add_alertmanager_sink(*out, err, errlen);
    if (rc != TW_OK) {
        tw_config_free(*out);
        *out = NULL;
    }
    return rc;
}
