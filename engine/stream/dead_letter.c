/* dead_letter.c - unusable metrics messages to the dead-letter topic
 * (dead_letter.h). */
#include "dead_letter.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Longer keys are cut (a job id is at most TW_WIRE_ID_MAX bytes). */
#define TW_DEAD_LETTER_MAX_KEY 4096

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
    size_t nh = sizeof(h) / sizeof(h[0]);
    /* A message the consumer could fetch may still be larger than the
     * producer may send (message.max.bytes): its value is cut to fit, and
     * a sixth header says how long it was. */
    char full[32], kfull[32];
    tw_kafka_header all[7];
    memcpy(all, h, sizeof(h));
    size_t klen = m->key != NULL ? m->key_len : 0;
    if (klen > TW_DEAD_LETTER_MAX_KEY) {
        /* a key as absurd as the id inside (id_too_long) */
        snprintf(kfull, sizeof(kfull), "%zu", klen);
        all[nh++] =
            (tw_kafka_header){"trainwatch.key_truncated", kfull, strlen(kfull)};
        klen = TW_DEAD_LETTER_MAX_KEY;
    }
    snprintf(full, sizeof(full), "%zu", m->len);
    all[nh] = (tw_kafka_header){"trainwatch.truncated", full, strlen(full)};
    size_t room = tw_producer_value_room(p, klen, all, nh + 1);
    if (m->len <= room)
        return tw_producer_send_keyed(p, dl_topic, m->key, klen, m->value,
                                      m->len, all, nh, err, errlen);
    return tw_producer_send_keyed(p, dl_topic, m->key, klen, m->value, room,
                                  all, nh + 1, err, errlen);
}
