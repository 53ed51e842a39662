/* kafka_log.c - librdkafka's log lines (kafka_log.h). */
#include "kafka_log.h"

#include <string.h>

#include "log.h"

void tw_kafka_on_log(const rd_kafka_t *rk, int level, const char *fac,
                     const char *buf)
{
    (void)rk;
    tw_log_level lvl = level <= 3   ? TW_LOG_ERROR
                       : level == 4 ? TW_LOG_WARN
                                    : TW_LOG_DEBUG;
    if (strcmp(fac, "FAIL") == 0)
        lvl = TW_LOG_DEBUG;
    tw_log(lvl, "librdkafka %s: %s", fac, buf);
}
