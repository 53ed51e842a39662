/*
 * dead_letter.h - forwards a metrics message the engine cannot use (it
 * fails FlatBuffers verification or decoding) to the dead-letter topic:
 * key and value unchanged, and headers saying why and where it came from:
 *   trainwatch.reason            tw_wire_status_name() ("bad_identifier")
 *   trainwatch.error             the decoder's sentence
 *   trainwatch.source.topic      the topic it was read from
 *   trainwatch.source.partition  decimal
 *   trainwatch.source.offset     decimal
 *   trainwatch.truncated         only when the value was cut to the
 *                                producer's message.max.bytes: its
 *                                original length, decimal
 *   trainwatch.key_truncated     only when the key (longer than 4096
 *                                bytes) was cut to 4096: its length
 *
 * Ownership: the producer copies everything; the caller keeps its buffers.
 */
#ifndef TW_DEAD_LETTER_H
#define TW_DEAD_LETTER_H

#include <stddef.h>
#include <stdint.h>

#include "kafka_producer.h"

typedef struct tw_dead_letter {
    const char *topic; /* source topic */
    int32_t partition;
    int64_t offset;
    const void *key; /* may be NULL */
    size_t key_len;
    const void *value;
    size_t len;
    const char *reason; /* tw_wire_status_name() */
    const char *error;  /* a sentence; may be NULL */
} tw_dead_letter;

/* Queues the message on `dl_topic`. Returns 0, or -1 with err. */
int tw_dead_letter_send(tw_producer *p, const char *dl_topic,
                        const tw_dead_letter *m, char *err, size_t errlen);

#endif /* TW_DEAD_LETTER_H */
