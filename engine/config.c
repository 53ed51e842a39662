/* config.c - loading the rule configuration with libyaml (config.h). */
#include "config.h"

#include <errno.h>
#include <math.h>
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
    else
        return TW_ERR;
    *out = (int64_t)llround(v * mult);
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
    return c;
}

/* The order ProfilerReport runs its sub-rules (RULES.md §3.12). */
static const char *const profiler_rules[] = {
    "CPUBottleneck",     "IOBottleneck",          "LowGPUUtilization",
    "StepOutlier",       "GPUMemoryIncrease",     "BatchSize",
    "MaxInitializationTime", "LoadBalancing",     "OverallSystemUsage",
    "Dataloader",        "OverallFrameworkMetrics",
};

int tw_config_default(tw_registry *reg, tw_config **out, char *err,
                      size_t errlen)
{
    tw_config *c = config_new();
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    const tw_plugin *p;
    char why[512];
    size_t n = sizeof(profiler_rules) / sizeof(profiler_rules[0]);
    c->rules = tw_arena_alloc(&c->arena, (n + 1) * sizeof(tw_rule_spec));
    if (c->rules == NULL) {
        tw_config_free(c);
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    if (tw_registry_find(reg, "ProfilerReport", &p, why, sizeof(why)) == TW_OK) {
        c->rules[0].rule = "ProfilerReport";
        c->nrules = 1;
    } else {
        for (size_t i = 0; i < n; i++)
            if (tw_registry_find(reg, profiler_rules[i], &p, why,
                                 sizeof(why)) == TW_OK)
                c->rules[c->nrules++].rule = profiler_rules[i];
    }
    if (c->nrules == 0) {
        snprintf(err, errlen,
                 "no built-in rules found (looked in $TRAINWATCH_RULES_DIR, "
                 "%s and %s)",
                 TW_RULES_BUILD_DIR, TW_RULES_INSTALL_DIR);
        tw_config_free(c);
        return TW_ERR;
    }
    *out = c;
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

typedef struct loader {
    yaml_parser_t parser;
    tw_arena *arena;
    const char *path;
    char *err;
    size_t errlen;
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

static int parse_children(loader *l, ynode *parent, yaml_event_type_t end)
{
    size_t cap = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&l->parser, &ev)) {
            snprintf(l->err, l->errlen, "%s:%zu: %s", l->path,
                     l->parser.problem_mark.line + 1,
                     l->parser.problem ? l->parser.problem : "YAML error");
            return TW_ERR;
        }
        if (ev.type == end) {
            yaml_event_delete(&ev);
            return TW_OK;
        }
        ynode *child;
        int rc = parse_node(l, &ev, &child);
        yaml_event_delete(&ev);
        if (rc != TW_OK || node_push(l, parent, child, &cap) != TW_OK)
            return TW_ERR;
    }
}

static int parse_node(loader *l, yaml_event_t *ev, ynode **out)
{
    int line = (int)ev->start_mark.line + 1;
    switch (ev->type) {
    case YAML_SCALAR_EVENT: {
        ynode *n = node_new(l, NODE_SCALAR, line);
        if (n == NULL)
            return TW_ERR;
        n->text = tw_arena_strndup(l->arena, (const char *)ev->data.scalar.value,
                                   ev->data.scalar.length);
        *out = n;
        return n->text ? TW_OK : TW_ERR;
    }
    case YAML_MAPPING_START_EVENT: {
        ynode *n = node_new(l, NODE_MAP, line);
        if (n == NULL)
            return TW_ERR;
        *out = n;
        return parse_children(l, n, YAML_MAPPING_END_EVENT);
    }
    case YAML_SEQUENCE_START_EVENT: {
        ynode *n = node_new(l, NODE_SEQ, line);
        if (n == NULL)
            return TW_ERR;
        *out = n;
        return parse_children(l, n, YAML_SEQUENCE_END_EVENT);
    }
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
        if (!yaml_parser_parse(&l->parser, &ev)) {
            snprintf(l->err, l->errlen, "%s:%zu: %s", l->path,
                     l->parser.problem_mark.line + 1,
                     l->parser.problem ? l->parser.problem : "YAML error");
            return TW_ERR;
        }
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

static int parse_rule(loader *l, tw_config *c, const ynode *m, tw_rule_spec *r)
{
    if (m->kind != NODE_MAP)
        return bad(l, m, "each entry of 'rules' must be a mapping%s", "");
    for (size_t i = 0; i + 1 < m->n; i += 2) {
        const ynode *k = m->items[i], *v = m->items[i + 1];
        const char *key = k->kind == NODE_SCALAR ? k->text : "";
        if (strcmp(key, "parameters") == 0) {
            if (v->kind != NODE_MAP)
                return bad(l, v, "key 'parameters' must be a mapping%s", "");
            size_t n = v->n / 2;
            const char **keys = tw_arena_alloc(&c->arena, (n + 1) * sizeof(char *));
            const char **vals = tw_arena_alloc(&c->arena, (n + 1) * sizeof(char *));
            if (keys == NULL || vals == NULL)
                return bad(l, v, "out of memory%s", "");
            for (size_t p = 0; p < n; p++) {
                const ynode *pk = v->items[2 * p], *pv = v->items[2 * p + 1];
                if (pk->kind != NODE_SCALAR || pv->kind != NODE_SCALAR)
                    return bad(l, pv,
                               "parameter '%s' must be a plain value",
                               pk->kind == NODE_SCALAR ? pk->text : "?");
                keys[p] = pk->text;
                vals[p] = pv->text;
            }
            r->keys = keys;
            r->values = vals;
            r->nparams = n;
            continue;
        }
        if (strcmp(key, "semantics") == 0) {
            if (parse_semantics(l, v, &r->semantics) != TW_OK)
                return TW_ERR;
            r->has_semantics = 1;
            continue;
        }
        if (strcmp(key, "name") != 0 && strcmp(key, "rule") != 0 &&
            strcmp(key, "source") != 0 && strcmp(key, "rule_to_invoke") != 0)
            return bad(l, k,
                       "unknown key '%s' in a rule (known: name, rule, "
                       "source, rule_to_invoke, parameters, semantics)",
                       key);
        if (v->kind != NODE_SCALAR)
            return bad(l, v, "key '%s' must be a plain value", key);
        if (strcmp(key, "name") == 0)
            r->name = v->text;
        else if (strcmp(key, "rule") == 0)
            r->rule = v->text;
        else if (strcmp(key, "source") == 0)
            r->source = v->text;
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
        return bad(l, m, "a rule has either 'rule' or 'source', not both%s", "");
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
        } else if (strcmp(key, "semantics") == 0) {
            if (parse_semantics(l, v, &c->job.semantics) != TW_OK)
                return TW_ERR;
        } else if (strcmp(key, "tick") == 0 || strcmp(key, "lateness") == 0 ||
                   strcmp(key, "idle_node") == 0) {
            if (v->kind != NODE_SCALAR)
                return bad(l, v, "key '%s' must be a duration", key);
            int64_t us;
            if (strcmp(key, "tick") == 0 && strcmp(v->text, "continuous") == 0)
                us = 0;
            else if (tw_parse_duration_us(v->text, &us) != TW_OK ||
                     (strcmp(key, "tick") == 0 && us == 0))
                return bad(l, v,
                           "'%s' is not a duration (examples: 60s, 500ms, 2m)",
                           v->text);
            if (strcmp(key, "tick") == 0)
                c->job.tick_us = us;
            else if (strcmp(key, "lateness") == 0)
                c->job.lateness_us = us;
            else
                c->job.idle_node_us = us;
        } else {
            return bad(l, k,
                       "unknown top-level key '%s' (known: semantics, tick, "
                       "lateness, idle_node, rules)",
                       key);
        }
    }
    if (rules == NULL)
        return bad(l, root, "missing key 'rules'%s", "");
    if (rules->kind != NODE_SEQ)
        return bad(l, rules, "key 'rules' must be a list%s", "");
    if (rules->n == 0)
        return bad(l, rules, "key 'rules' is empty%s", "");
    c->rules = tw_arena_alloc(&c->arena, rules->n * sizeof(tw_rule_spec));
    if (c->rules == NULL)
        return bad(l, rules, "out of memory%s", "");
    for (size_t i = 0; i < rules->n; i++) {
        if (parse_rule(l, c, rules->items[i], &c->rules[i]) != TW_OK)
            return TW_ERR;
        c->nrules++;
    }
    return TW_OK;
}

int tw_config_load(const char *path, tw_config **out, char *err,
                   size_t errlen)
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
    yaml_parser_delete(&l.parser);
    fclose(f);
    if (rc != TW_OK) {
        tw_config_free(c);
        return TW_ERR;
    }
    *out = c;
    return TW_OK;
}
