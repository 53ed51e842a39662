/*
 * kafka_log.h - librdkafka's log lines into the engine's log (log.h), for
 * the consumer and the producer alike: syslog levels 0..3 as errors, 4 as
 * warnings, the rest as debug; connection failures ("FAIL") as debug, as
 * the error callback reports those once.
 */
#ifndef TW_KAFKA_LOG_H
#define TW_KAFKA_LOG_H

#include <librdkafka/rdkafka.h>

/* For rd_kafka_conf_set_log_cb. */
void tw_kafka_on_log(const rd_kafka_t *rk, int level, const char *fac,
                     const char *buf);

#endif /* TW_KAFKA_LOG_H */
