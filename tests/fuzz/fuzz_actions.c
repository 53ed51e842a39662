/*
 * fuzz_actions.c - the alert/action configuration (engine/actions/
 * action_config.c) on arbitrary bytes: the input is loaded as a
 * configuration file the way run loads it (tw_config_load_or_default adds
 * the `alertmanager:` sink to every rule) and its rules' actions are built
 * by tw_actions_new, which validates them all. Nothing is fired. Nothing
 * may crash, leak or trip a sanitizer; an error must come with a message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "actions.h"
#include "config.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/tw_fuzz_XXXXXX.yaml";
    if (fuzz_write_file(path, 5, data, size) != 0)
        return 0;
    tw_config *c = NULL;
    char err[512];
    /* No registry: a file that names no rules is left at that. */
    int rc = tw_config_load(path, &c, err, sizeof(err));
    unlink(path);
    if (rc != TW_OK)
        return 0;
    tw_actions *a = NULL;
    err[0] = '\0';
    if (tw_actions_new(c, NULL, &a, err, sizeof(err)) == TW_OK) {
        for (size_t i = 0; i < c->nrules; i++)
            if (tw_actions_count(a, i) != c->actions[i].n)
                abort();
        tw_actions_free(a);
    } else if (err[0] == '\0') {
        abort();
    }
    tw_config_free(c);
    return 0;
}
