/*
 * fuzz_profiler_config.c - the ProfilerConfig JSON of a JOB_START marker
 * (engine/eval/profiler_config.c) on arbitrary bytes: checked, and its
 * sampling interval read. A rejected configuration must come with a
 * message, an accepted one's interval must be one the agent samples at.
 * Nothing may crash, leak or trip a sanitizer.
 */
#include <stdint.h>
#include <stdlib.h>

#include "profiler_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *json = (const char *)data;
    char err[512];
    err[0] = '\0';
    int ok = tw_profiler_config_check(json, size, err, sizeof(err));
    if (ok != 0 && err[0] == '\0')
        abort();
    uint32_t ms = 0;
    int rc = tw_profiler_config_interval(json, size, &ms);
    if (ok == 0 && rc == 0 && ms != 100 && ms != 200 && ms != 500 &&
        ms != 1000 && ms != 5000 && ms != 60000)
        abort();
    return 0;
}
