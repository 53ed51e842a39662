/*
 * replay.h - publishes a profiler-output
 * folder (reader.h) to Kafka as metric batches (wire.h) keyed by the job id,
 * optionally following a folder the agent is still writing.
 *
 * Order and numbering: files in the listing's feed order, each file's
 * batches in the reader's order. Sequence numbers count 1, 2, ... per
 * (job, node). A batch whose encoding exceeds TW_REPLAY_MAX_MESSAGE is
 * split in halves (samples, events and debugging tensors, each record in
 * exactly one part) until each part fits; every part
 * is a batch of its own with its own sequence number, and its series
 * dictionary holds only the series its samples use (a part of one record
 * never carries the whole file's dictionary). A single record that alone
 * encodes to more than TW_REPLAY_MAX_MESSAGE (a huge name or argument,
 * which eval accepts) goes in a message of its own, up to
 * TW_REPLAY_MAX_RECORD_MESSAGE, with a warning: the broker must accept
 * it (the embedded broker does; Kafka's default limit is 1 MB).
 *
 * Flow control (--group, replay_flow.h): before each message, replay
 * waits while the consumer group (default the engine's, "trainwatch")
 * has not read more than --max-lag bytes of what this replay published,
 * so a broker that keeps little (the embedded broker: 5 MiB per
 * partition) never deletes a message the engine has not read yet.
 *
 * Markers: JOB_START goes first and JOB_END last, each in a batch of its
 * own from node "replay" (the replaying process, not a training node), so
 * they take sequence numbers of that node only. JOB_START's time is the
 * job's first timestamp (RULES.md §1.4) and its sampling interval is
 * inferred from the first batch of samples (the smallest step between two
 * samples of one series, rounded to an interval the agent supports; 0 when
 * there is none). JOB_END's time is the newest event time published;
 * its latest_us is the listing's L (RULES.md §1.4: the newest system
 * file's timestamp, or the newest framework file's when smaller), the
 * scan limit offline evaluation uses, so the engine evaluates the same
 * scans.
 *
 * Following (--follow): every second the folder is listed again.
 *  - A system file (one per node per UTC minute, JSON lines the agent
 *    appends to) is published in pieces: each poll publishes the complete
 *    lines ('\n'-terminated) appended since the last one; a line still
 *    being written waits for the next poll. The file is finished when a
 *    newer system file of the same node exists or the job has ended; then
 *    its remaining bytes are published and it is never read again.
 *    Pieces are read by copying them into a private temporary folder under
 *    the same base name and reading that copy; their batches keep the
 *    original path, bad lines are reported with their line in the
 *    original file.
 *  - A framework trace file is published whole, once its size was the same
 *    at two polls in a row (the agent renames closed traces into place;
 *    this also guards writers that write in place), or at the job's end.
 *  - The job has ended when training_job_end.ts appears (system/ or
 *    framework/): a last pass publishes everything left, then JOB_END.
 *    SIGINT/SIGTERM stop following without JOB_END (the job has not
 *    ended); what was published stays published.
 *
 * Exit status: 0 every batch delivered (also when stopped by a signal),
 * 1 a failure (folder, Kafka), 2 usage error.
 *
 * Ownership: tw_replay_open gives the replay its producer, flow control,
 * trace state and maps; tw_replay_close frees them. The option fields
 * (dir, job, topic, rate, ...) are borrowed strings the caller keeps.
 * One replay is used from one thread.
 */
#ifndef TW_REPLAY_H
#define TW_REPLAY_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kafka_broker.h"
#include "kafka_producer.h"
#include "reader.h"
#include "replay_flow.h"
#include "strmap.h"

/* Largest message value: below librdkafka's and Kafka's 1 MB defaults. */
#define TW_REPLAY_MAX_MESSAGE 900000u
/* Largest message of one record that cannot be split: the readers take
 * records up to 64 MiB (TW_READER_MAX_RECORD), plus the encoding's
 * overhead; below the engine's consumer limit (librdkafka's
 * receive.message.max.bytes, 100 MB). */
#define TW_REPLAY_MAX_RECORD_MESSAGE (65u << 20)
#define TW_REPLAY_MAX_PROPS 64
/* Flow control: the engine's default group, the defaults' share of the
 * embedded broker's retention, and how often a wait asks the group. */
#define TW_REPLAY_DEFAULT_GROUP "trainwatch"
#define TW_REPLAY_DEFAULT_MAX_LAG (TW_BROKER_RETENTION_BYTES / 5 * 3)
#define TW_REPLAY_MAX_LAG_MESSAGES (TW_BROKER_RETENTION_BATCHES / 2)
#define TW_REPLAY_FLOW_POLL_MS 100
#define TW_REPLAY_FLUSH_MS 30000
#define TW_REPLAY_POLL_MS 1000
#define TW_REPLAY_MARKER_NODE "replay"
/* Bad lines logged one by one; the rest are only counted. */
#define TW_REPLAY_LOGGED_BAD_LINES 20

typedef enum tw_rate_mode {
    TW_RATE_NONE = 0,
    TW_RATE_RECORDS, /* samples + events per second of wall time */
    TW_RATE_SPEED    /* multiple of the data's own event time    */
} tw_rate_mode;

/* What follow mode remembers of each file of the listing. */
typedef struct tw_replay_file {
    int done;          /* published completely          */
    uint64_t offset;   /* system files: bytes published */
    uint64_t lines;    /* system files: lines published */
    int64_t last_size; /* framework files: size at the previous poll */
} tw_replay_file;

typedef struct tw_replay {
    const char *dir;
    const char *job;
    const char *topic;
    tw_producer *producer;
    tw_replay_flow *flow; /* NULL: --group none */
    tw_trace_state *trace;
    sigset_t sigs;
    int follow;
    int end_marker;
    int quiet;
    /* --trace-start: ts 0 of relative PyTorch traces (reader.h) */
    int has_trace_start;
    int64_t trace_start_us;

    tw_rate_mode rate_mode;
    double rate;
    int64_t start_mono_us;
    double first_event_s; /* TW_RATE_SPEED: event time of the first batch */
    int have_first_event;

    int64_t first_ts_us;  /* of the listing, for JOB_START */
    int64_t latest_ts_us; /* L of the last listing, for JOB_END */
    int64_t newest_event_us;
    int start_sent;

    tw_strmap seq_index; /* node -> index into seqs */
    uint64_t *seqs;      /* next sequence number per node */
    size_t nseqs, capseqs;

    tw_strmap file_index; /* path -> index into files */
    tw_replay_file *files;
    size_t nfiles, capfiles;

    char *tmpdir; /* follow mode's pieces; NULL until needed */

    /* the file being read: for batches' file_path and error reports */
    const char *cur_path;
    uint64_t cur_line_offset;

    /* Test options for the engine's ordering guarantees: messages are
     * published in blocks of `reorder`, newest first (each one at most
     * reorder-1 places from its slot), and every `duplicate_every`-th
     * message is published twice. Markers are never held back. */
    size_t reorder;
    uint64_t duplicate_every;
    struct tw_replay_held {
        uint8_t *buf;
        size_t len;
    } * held;
    size_t nheld;
    uint64_t published, duplicates;
    /* --drop-every / --key: losses and mis-keyed producers, for the
     * engine's regression tests */
    uint64_t drop_every, data_emitted, dropped;
    const char *key; /* NULL: the job id; "": no key */
    int key_set;

    uint64_t batches, markers, samples, events, bytes, files_read;
    uint64_t oversized; /* single records sent alone past MAX_MESSAGE */
    uint64_t bad_reported;
    tw_reader_stats rstats;
    uint64_t unreadable_dirs, skipped_dirs; /* of the latest listing */
    int interrupted;
    int failed;
} tw_replay;

/* The caller zeroes a tw_replay, sets the options (dir, job, topic,
 * follow, end_marker, quiet, rate, test options) and `sigs` (the signals
 * it blocked, tw_signals_block), then: */

/* Connects the producer and, with group != NULL, flow control over that
 * consumer group (max_lag bytes unread at most). props: librdkafka
 * "key=value" strings, the first one reserved for the caller's own use
 * (nprops includes it). 0, or -1 with err. */
int tw_replay_open(tw_replay *r, const char *brokers, const char *const *props,
                   size_t nprops, const char *group, uint64_t max_lag,
                   char *err, size_t errlen);
/* Publishes the folder (following it with r->follow), JOB_START first and
 * JOB_END last, and waits for delivery. 0, or -1 (logged). A signal stops
 * it with r->interrupted set (0 when everything sent was delivered). */
int tw_replay_run(tw_replay *r);
/* The one summary line (replay --help). */
void tw_replay_summary(const tw_replay *r, FILE *out);
void tw_replay_close(tw_replay *r);

#endif /* TW_REPLAY_H */
