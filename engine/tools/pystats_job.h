/*
 * pystats_job.h - `trainwatch pystats --job J`: job J's Python profiles
 * (PythonProfile tables, schemas/metrics.fbs) read from the metrics topic
 * as it is now (topic_read.h: every partition up to its high watermark,
 * no consumer group), then the analysis of pystats.h over them.
 *
 * Messages are matched by their key (the hook keys each message with its
 * job id) and then by Batch.job. A message of J that does not decode, or
 * a profile with a phase pystats does not know, is named on stderr with
 * its partition and offset, counted in "skipped", and left out.
 */
#ifndef TW_PYSTATS_JOB_H
#define TW_PYSTATS_JOB_H

#include <stddef.h>
#include <stdio.h>

#include "kafka_source.h"
#include "pystats.h"

typedef struct tw_pystats_job_opts {
    const char *job;
    const char *brokers;
    const char *topic;
    const tw_source_prop
        *props; /* librdkafka properties (kafka.properties.*) */
    size_t nprops;
    int timeout_ms; /* for the brokers' answers (topic_read.h) */
    FILE *progress; /* progress lines on long reads; NULL: none */
} tw_pystats_job_opts;

/* TW_OK, or TW_ERR with a sentence in err (no profile of the job on the
 * topic: the topic, partitions and messages read are named). */
int tw_pystats_job_run(const tw_pystats_job_opts *jo, const tw_pystats_opts *o,
                       FILE *out, char *err, size_t errlen);

#endif /* TW_PYSTATS_JOB_H */
