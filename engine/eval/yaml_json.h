/*
 * yaml_json.h - a YAML file read into a jansson tree, for small
 * hand-written files whose shape is checked by the caller (rules test
 * files). Mappings become objects, sequences arrays and every scalar a
 * string (the caller parses numbers where it expects them, so "007" or
 * "yes" are never guessed at). Anchors and aliases are refused.
 *
 * Ownership: the returned tree belongs to the caller (json_decref).
 */
#ifndef TW_YAML_JSON_H
#define TW_YAML_JSON_H

#include <jansson.h>
#include <stddef.h>

/* NULL with a sentence naming the file and the line on a syntax error, a
 * duplicate key, an alias, an empty file or more than one document. */
json_t *tw_yaml_json_load(const char *path, char *err, size_t errlen);

#endif /* TW_YAML_JSON_H */
