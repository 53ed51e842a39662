/* debug_collections.c - collections files (debug_collections.h). */
#include "debug_collections.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "trainwatch/plugin.h"

void tw_debug_collections_init(tw_debug_collections *c)
{
    memset(c, 0, sizeof(*c));
    tw_strmap_init(&c->tensors);
    tw_arena_init(&c->strings);
}

void tw_debug_collections_free(tw_debug_collections *c)
{
    for (size_t i = 0; i < c->nlists; i++)
        free(c->lists[i].names);
    free(c->lists);
    tw_strmap_free(&c->tensors);
    tw_arena_free(&c->strings);
    memset(c, 0, sizeof(*c));
}

/* Inserts coll into the tensor's sorted list, once. */
static int add_member(tw_debug_collections *c, const char *tensor,
                      const char *coll)
{
    uint32_t idx;
    if (!tw_strmap_get(&c->tensors, tensor, strlen(tensor), &idx)) {
        if (tw_grow((void **)&c->lists, &c->cap, c->nlists + 1,
                    sizeof(*c->lists), 16) != TW_OK ||
            c->nlists >= UINT32_MAX)
            return TW_ERR;
        idx = (uint32_t)c->nlists;
        c->lists[c->nlists++] = (tw_debug_name_list){NULL, 0, 0};
        if (tw_strmap_put(&c->tensors, tensor, strlen(tensor), idx) != TW_OK)
            return TW_ERR;
    }
    tw_debug_name_list *l = &c->lists[idx];
    uint32_t at = 0;
    while (at < l->n && strcmp(l->names[at], coll) < 0)
        at++;
    if (at < l->n && strcmp(l->names[at], coll) == 0)
        return TW_OK;
    size_t cap = l->cap;
    if (tw_grow((void **)&l->names, &cap, (size_t)l->n + 1, sizeof(*l->names),
                4) != TW_OK)
        return TW_ERR;
    l->cap = (uint32_t)cap;
    const char *copy = tw_arena_strdup(&c->strings, coll);
    if (copy == NULL)
        return TW_ERR;
    memmove(l->names + at + 1, l->names + at, (l->n - at) * sizeof(*l->names));
    l->names[at] = copy;
    l->n++;
    return TW_OK;
}

int tw_debug_collections_add(tw_debug_collections *c, const char *text,
                             size_t len, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (root == NULL) {
        snprintf(err, errlen, "not JSON: %s (line %d, column %d)", je.text,
                 je.line, je.column);
        return TW_ERR;
    }
    int rc = TW_ERR;
    json_t *colls = json_object_get(root, "collections");
    json_t *nw = json_object_get(json_object_get(root, "_meta"), "num_workers");
    if (!json_is_object(colls)) {
        snprintf(err, errlen, "no \"collections\" object");
        goto out;
    }
    if (nw != NULL && (!json_is_integer(nw) || json_integer_value(nw) < 1)) {
        snprintf(err, errlen, "_meta.num_workers is not a positive integer");
        goto out;
    }
    const char *name;
    json_t *coll;
    json_object_foreach(colls, name, coll)
    {
        json_t *names = json_object_get(coll, "tensor_names");
        if (names != NULL && !json_is_array(names)) {
            snprintf(err, errlen,
                     "collection '%s': tensor_names is not an array", name);
            goto out;
        }
        size_t i;
        json_t *t;
        json_array_foreach(names, i, t)
        {
            if (!json_is_string(t)) {
                snprintf(err, errlen,
                         "collection '%s': tensor_names[%zu] is not a string",
                         name, i);
                goto out;
            }
            if (add_member(c, json_string_value(t), name) != TW_OK) {
                snprintf(err, errlen, "out of memory for collection '%s'",
                         name);
                goto out;
            }
        }
    }
    if (nw != NULL && json_integer_value(nw) > c->num_workers)
        c->num_workers = json_integer_value(nw);
    c->files++;
    rc = TW_OK;
out:
    json_decref(root);
    return rc;
}

const char *const *tw_debug_collections_of(const tw_debug_collections *c,
                                           const char *tensor, uint32_t *n)
{
    uint32_t idx;
    if (!tw_strmap_get(&c->tensors, tensor, strlen(tensor), &idx)) {
        *n = 0;
        return NULL;
    }
    *n = c->lists[idx].n;
    return c->lists[idx].names;
}
