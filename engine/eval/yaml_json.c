/* yaml_json.c - a YAML file as a jansson tree (yaml_json.h). */
#include "yaml_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* Nesting deeper than this is refused: test files are a few levels deep,
 * and the conversion recurses. */
#define TW_YAML_JSON_MAX_DEPTH 64

static json_t *convert(yaml_document_t *doc, yaml_node_t *node, int depth,
                       const char *path, char *err, size_t errlen)
{
    unsigned long line = (unsigned long)node->start_mark.line + 1;
    if (depth > TW_YAML_JSON_MAX_DEPTH) {
        snprintf(err, errlen, "%s:%lu: nested more than %d levels", path, line,
                 TW_YAML_JSON_MAX_DEPTH);
        return NULL;
    }
    switch (node->type) {
    case YAML_SCALAR_NODE:
        return json_stringn((const char *)node->data.scalar.value,
                            node->data.scalar.length);
    case YAML_SEQUENCE_NODE: {
        json_t *a = json_array();
        for (yaml_node_item_t *it = node->data.sequence.items.start;
             a != NULL && it < node->data.sequence.items.top; it++) {
            json_t *v = convert(doc, yaml_document_get_node(doc, *it),
                                depth + 1, path, err, errlen);
            if (v == NULL || json_array_append_new(a, v) != 0) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    case YAML_MAPPING_NODE: {
        json_t *o = json_object();
        for (yaml_node_pair_t *pr = node->data.mapping.pairs.start;
             o != NULL && pr < node->data.mapping.pairs.top; pr++) {
            yaml_node_t *k = yaml_document_get_node(doc, pr->key);
            if (k->type != YAML_SCALAR_NODE) {
                snprintf(err, errlen, "%s:%lu: a key must be a plain value",
                         path, (unsigned long)k->start_mark.line + 1);
                json_decref(o);
                return NULL;
            }
            const char *key = (const char *)k->data.scalar.value;
            if (json_object_get(o, key) != NULL) {
                snprintf(err, errlen, "%s:%lu: key '%s' appears twice", path,
                         (unsigned long)k->start_mark.line + 1, key);
                json_decref(o);
                return NULL;
            }
            json_t *v = convert(doc, yaml_document_get_node(doc, pr->value),
                                depth + 1, path, err, errlen);
            if (v == NULL || json_object_set_new(o, key, v) != 0) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    case YAML_NO_NODE:
        break;
    }
    snprintf(err, errlen, "%s:%lu: empty node", path, line);
    return NULL;
}

/* libyaml resolves an alias to the node its anchor names, so a node
 * referenced twice is an alias (1; -1 out of memory). Refused: a test file has
 * no use for them, and aliases of aliases would multiply the converted tree's
 * size. */
static int has_alias(yaml_document_t *doc)
{
    size_t n = (size_t)(doc->nodes.top - doc->nodes.start);
    unsigned char *seen = calloc(n + 1, 1); /* node ids start at 1 */
    if (seen == NULL)
        return -1;
    int alias = 0;
    for (yaml_node_t *node = doc->nodes.start; !alias && node < doc->nodes.top;
         node++) {
        if (node->type == YAML_SEQUENCE_NODE) {
            for (yaml_node_item_t *it = node->data.sequence.items.start;
                 !alias && it < node->data.sequence.items.top; it++)
                alias = seen[*it]++ > 0;
        } else if (node->type == YAML_MAPPING_NODE) {
            for (yaml_node_pair_t *pr = node->data.mapping.pairs.start;
                 !alias && pr < node->data.mapping.pairs.top; pr++)
                alias = seen[pr->key]++ > 0 || seen[pr->value]++ > 0;
        }
    }
    free(seen);
    return alias;
}

json_t *tw_yaml_json_load(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    json_t *root = NULL;
    if (!yaml_parser_initialize(&parser)) {
        snprintf(err, errlen, "%s: out of memory", path);
        fclose(f);
        return NULL;
    }
    yaml_parser_set_input_file(&parser, f);
    if (!yaml_parser_load(&parser, &doc)) {
        snprintf(err, errlen, "%s:%lu: %s", path,
                 (unsigned long)parser.problem_mark.line + 1,
                 parser.problem != NULL ? parser.problem : "YAML error");
        goto out_parser;
    }
    yaml_node_t *top = yaml_document_get_root_node(&doc);
    if (top == NULL) {
        snprintf(err, errlen, "%s: empty file", path);
        goto out_doc;
    }
    int alias = has_alias(&doc);
    if (alias != 0) {
        snprintf(err, errlen,
                 alias < 0 ? "%s: out of memory"
                           : "%s: anchors and aliases (&, *) are not "
                             "supported here; write the value out",
                 path);
        goto out_doc;
    }
    root = convert(&doc, top, 0, path, err, errlen);
    if (root != NULL) {
        yaml_document_t next;
        if (!yaml_parser_load(&parser, &next)) {
            snprintf(err, errlen, "%s:%lu: %s", path,
                     (unsigned long)parser.problem_mark.line + 1,
                     parser.problem != NULL ? parser.problem : "YAML error");
            json_decref(root);
            root = NULL;
        } else {
            if (yaml_document_get_root_node(&next) != NULL) {
                snprintf(err, errlen, "%s: more than one YAML document", path);
                json_decref(root);
                root = NULL;
            }
            yaml_document_delete(&next);
        }
    }
out_doc:
    yaml_document_delete(&doc);
out_parser:
    yaml_parser_delete(&parser);
    fclose(f);
    return root;
}
