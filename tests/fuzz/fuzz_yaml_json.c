/*
 * fuzz_yaml_json.c - the YAML reader of rules test files
 * (engine/eval/yaml_json.c) on arbitrary bytes. The tree it returns must
 * hold only objects, arrays and strings; an error must come with a
 * message. Nothing may crash, leak or trip a sanitizer.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "yaml_json.h"

static void check_tree(json_t *v, int depth)
{
    if (depth > 100000)
        abort();
    if (json_is_object(v)) {
        const char *k;
        json_t *m;
        json_object_foreach(v, k, m) check_tree(m, depth + 1);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *m;
        json_array_foreach(v, i, m) check_tree(m, depth + 1);
    } else if (!json_is_string(v)) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/tw_fuzz_XXXXXX.yaml";
    if (fuzz_write_file(path, 5, data, size) != 0)
        return 0;
    char err[512];
    err[0] = '\0';
    json_t *t = tw_yaml_json_load(path, err, sizeof(err));
    unlink(path);
    if (t == NULL) {
        if (err[0] == '\0')
            abort();
        return 0;
    }
    check_tree(t, 0);
    json_decref(t);
    return 0;
}
