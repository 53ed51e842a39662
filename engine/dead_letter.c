/* dead_letter.c - unusable metrics messages to the dead-letter topic
 * (dead_letter.h). */
#include "dead_letter.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int tw_dead_letter_send(tw_producer *p, const char *dl_topic,
                        const tw_dead_letter *m, char *err, size_t errlen)
{
    char part[16], off[32];
    snprintf(part, sizeof(part), "%" PRId32, m->partition);
    snprintf(off, sizeof(off), "%" PRId64, m->offset);
    const char *why = m->error != NULL ? m->error : "";
    tw_kafka_header h[] = {
        {"trainwatch.reason", m->reason, strlen(m->reason)},
        {"trainwatch.error", why, strlen(why)},
        {"trainwatch.source.topic", m->topic, strlen(m->topic)},
        {"trainwatch.source.partition", part, strlen(part)},
        {"trainwatch.source.offset", off, strlen(off)},
    };
    return tw_producer_send_keyed(p, dl_topic, m->key, m->key_len, m->value,
                                  m->len, h, sizeof(h) / sizeof(h[0]), err,
                                  errlen);
}
