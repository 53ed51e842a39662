/*
 * fuzz_config.c - the configuration file (engine/eval/config.c) on
 * arbitrary bytes: loaded as run and eval load it, then every section it
 * keeps is checked against the schema (config_schema.h) as run does,
 * including each rule action. Nothing may crash, leak or trip a sanitizer;
 * an error must come with a message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "config.h"
#include "config_schema.h"
#include "fuzz_file.h"

static void check_section(const tw_settings *s, tw_section section,
                          const char *action_type)
{
    char err[512];
    err[0] = '\0';
    if (tw_schema_check_settings(s, section, action_type, err, sizeof(err)) !=
            0 &&
        err[0] == '\0')
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/tw_fuzz_XXXXXX.yaml";
    if (fuzz_write_file(path, 5, data, size) != 0)
        return 0;
    tw_config *c = NULL;
    char err[512];
    err[0] = '\0';
    if (tw_config_load(path, &c, err, sizeof(err)) != TW_OK) {
        unlink(path);
        if (c != NULL || err[0] == '\0')
            abort();
        return 0;
    }
    unlink(path);
    check_section(&c->kafka, TW_SECTION_KAFKA, NULL);
    check_section(&c->engine, TW_SECTION_ENGINE, NULL);
    check_section(&c->state, TW_SECTION_STATE, NULL);
    check_section(&c->http, TW_SECTION_HTTP, NULL);
    check_section(&c->alertmanager, TW_SECTION_AM, NULL);
    for (size_t i = 0; i < c->nrules; i++)
        for (size_t k = 0; k < c->actions[i].n; k++) {
            const char *type = NULL;
            tw_settings_get_str(&c->actions[i].items[k], "type", &type);
            check_section(&c->actions[i].items[k], TW_SECTION_ACTION, type);
        }
    tw_config_free(c);
    return 0;
}
