/*
 * fuzz_snapshot.c - the memory state store's snapshot file
 * (engine/stream/state_memory.c), read back when `run` starts, on
 * arbitrary bytes: opened as a store with `snapshot:` naming it, then a
 * few reads. A corrupt file must give an error naming the file, never a
 * crash. Seeds: corpus_gen_snapshot.c.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fuzz_file.h"
#include "log.h"
#include "state_store.h"

static int count_member(void *ud, const char *member, size_t len)
{
    if (member == NULL || strlen(member) != len)
        abort();
    (*(size_t *)ud)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/tw_fuzz_XXXXXX.snap";
    if (fuzz_write_file(path, 5, data, size) != 0)
        return 0;
    tw_setting items[] = {{"store", "memory", 2}, {"snapshot", path, 3}};
    tw_settings state = {"fuzz.yaml", "state", 1, items, 2};
    tw_store *s = NULL;
    char err[1024];
    tw_log_set_level(TW_LOG_ERROR); /* not an INFO line per input */
    err[0] = '\0';
    if (tw_store_open(&state, &s, err, sizeof(err)) != TW_OK) {
        if (err[0] == '\0' || strstr(err, path) == NULL)
            abort();
    } else {
        /* the keys corpus_gen_snapshot.c writes, as run reads them */
        static const char *const keys[] = {"tw:job:j1:core", "tw:job:j1:rule.0",
                                           "tw:claim:x"};
        for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++) {
            uint8_t *v = NULL;
            size_t n = 0;
            if (tw_store_get(s, keys[i], &v, &n, err, sizeof(err)) == 1 &&
                (v == NULL || v[n] != 0))
                abort();
            free(v);
            int64_t ttl;
            tw_store_ttl(s, keys[i], &ttl, err, sizeof(err));
        }
        size_t members = 0;
        tw_store_smembers(s, "tw:jobs", count_member, &members, err,
                          sizeof(err));
        tw_store_close(s);
    }
    unlink(path);
    return 0;
}
