/*
 * bench_alerts.h - what the benchmarks that time alerts share: an alert's
 * integer header (the metrics message that completed its scan,
 * trainwatch.source.partition and .offset, cmd_run.c) and the sort of
 * latencies. Header-only: each benchmark is one program.
 */
#ifndef TW_BENCH_ALERTS_H
#define TW_BENCH_ALERTS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

/* The header's value as an integer; -1 when absent or not short. */
static inline int64_t bench_header_int(const rd_kafka_message_t *m,
                                       const char *name)
{
    rd_kafka_headers_t *h = NULL;
    const void *v;
    size_t len;
    if (rd_kafka_message_headers(m, &h) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        rd_kafka_header_get_last(h, name, &v, &len) !=
            RD_KAFKA_RESP_ERR_NO_ERROR ||
        len == 0 || len > 30)
        return -1;
    char buf[32];
    memcpy(buf, v, len);
    buf[len] = '\0';
    return strtoll(buf, NULL, 10);
}

/* qsort order of int64_t values. */
static inline int bench_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

#endif /* TW_BENCH_ALERTS_H */
