/*
 * reader_json.h - the C face of the simdjson-based parsers behind the
 * agent-file readers (reader.h). One call parses one JSON text: a system
 * metrics line, or one element of a trace file's event array.
 *
 * The input buffer must stay readable for TW_JSON_PADDING bytes past the
 * end of the text (`cap` >= `len` + TW_JSON_PADDING): simdjson reads ahead.
 * The contents of the padding do not matter.
 *
 * Ownership: a tw_json_parser is owned by its creator (tw_json_parser_free).
 * Every tw_json_str and tw_json_arg a parse call returns points into the
 * input buffer or into the parser's own scratch memory; both stay valid
 * until the next parse call on the same parser or until the input buffer
 * changes. Callers copy what they keep.
 */
#ifndef TW_READER_JSON_H
#define TW_READER_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "trainwatch/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes past the end of a text that the parser may read (simdjson's). */
#define TW_JSON_PADDING 64u

/* A string slice. ptr == NULL: absent or JSON null. Not NUL-terminated. */
typedef struct tw_json_str {
    const char *ptr;
    size_t len;
} tw_json_str;

/* A JSON number as written. */
typedef struct tw_json_num {
    int present;  /* the field exists and is a number */
    int integral; /* written without '.', 'e' or 'E' */
    int is_i64;   /* integral and within int64: i holds it exactly */
    int64_t i;
    double d; /* the correctly rounded double of the text */
} tw_json_num;

/* Returned (instead of TW_ERR) by the parse calls on out-of-memory. */
#define TW_JSON_NOMEM (-2)

typedef struct tw_json_parser tw_json_parser;

/* NULL on out-of-memory. */
tw_json_parser *tw_json_parser_new(void);
void tw_json_parser_free(tw_json_parser *p);

/* Tests: nonzero turns the plain fast paths off (tw_json_parse_sysline's
 * and tw_json_parse_event_array's), so that simdjson reads everything. */
void tw_json_parser_set_general_only(tw_json_parser *p, int on);
/* How many lines / array elements the plain fast paths read. */
uint64_t tw_json_parser_plain_lines(const tw_json_parser *p);
uint64_t tw_json_parser_plain_events(const tw_json_parser *p);

/* One system metrics line, RULES.md §1.2. */
typedef struct tw_json_sysline {
    tw_json_str type;
    tw_json_str name; /* ptr NULL when missing or null */
    tw_json_str dimension;
    tw_json_str node;
    tw_json_num value; /* Value (integral: TW_SAMPLE_INTEGRAL)    */
    double timestamp;  /* the exact double the text denotes       */
} tw_json_sysline;

/* Parses one line (without its newline). Returns TW_OK and fills *out, or
 * TW_ERR with a static sentence in *reason (not JSON, not an object,
 * missing field, wrong type, trailing content). */
int tw_json_parse_sysline(tw_json_parser *p, const char *buf, size_t len,
                          size_t cap, tw_json_sysline *out,
                          const char **reason);

/* One Chrome trace event (RULES.md §1.3), with what the reader needs
 * decoded and every key of `args` kept as a tw_arg-shaped pair. */
typedef struct tw_json_arg {
    tw_json_str key;   /* unescaped */
    tw_json_str value; /* see tw_arg_kind in plugin.h */
    tw_arg_kind kind;
} tw_json_arg;

typedef struct tw_json_event {
    tw_json_str ph;   /* ptr NULL when missing or not a string */
    tw_json_str name; /* NULL when missing/null; else string or JSON text */
    int has_pid;      /* pid: an integer, or a string holding one */
    int64_t pid;
    tw_json_str pid_str; /* pid when a string (also a numeric one) */
    tw_json_str cat;     /* "cat" when a string (torch/Kineto category) */
    int has_tid;         /* tid: likewise; other values leave it unset */
    int64_t tid;
    tw_json_num ts;
    tw_json_num dur;
    int has_args;            /* args is an object (null counts as absent) */
    const tw_json_arg *args; /* nargs pairs in file order */
    size_t nargs;
    int args_has_name;     /* args contains the key "name"        */
    tw_json_str args_name; /* its string, or its raw JSON text     */
    int has_start_time;    /* args.start_time_since_epoch_in_micros
                              is a number                          */
    tw_json_num start_time;
} tw_json_event;

/* Parses one array element. Returns TW_OK and fills *out, or TW_ERR with a
 * static sentence in *reason (not JSON, not an object, args not an object,
 * ts/dur/pid of the wrong type). Whether the event has the fields its
 * phase needs is for the caller to decide. */
int tw_json_parse_event(tw_json_parser *p, const char *buf, size_t len,
                        size_t cap, tw_json_event *out, const char **reason);

/* Called with each event of tw_json_parse_event_array: pos is the offset
 * of its '{' from buf. A return other than TW_OK stops the walk and is
 * returned. */
typedef int (*tw_json_event_fn)(void *ud, size_t pos, const tw_json_event *ev);

/* Where the walk stopped: the caller's element-by-element scan goes on at
 * buf[at], before an element (TW_JSON_AT_ELEMENT: right after the '[')
 * or after one (TW_JSON_AFTER_ELEMENT: at the ',' or ']' that follows
 * the last element handed over). */
typedef enum { TW_JSON_AT_ELEMENT, TW_JSON_AFTER_ELEMENT } tw_json_array_state;

typedef struct tw_json_array_stop {
    tw_json_array_state state;
    size_t at;
} tw_json_array_stop;

/* The events of a whole array at once (buf[0] == '['; buf[0, len) may
 * hold more after the array): one simdjson pass over the text instead of
 * one per event and no scan for each event's end. Each element that
 * parses as tw_json_parse_event would (an object, members of the right
 * types) and is followed by ',' or ']' goes to fn in order; at the first
 * one that does not, or when the text as a whole is not valid JSON (then
 * before the first element), the walk stops and *stop says where, so
 * that the caller's scan reads and reports the rest exactly as it would
 * have. TW_OK, TW_JSON_NOMEM, or what fn returned. */
int tw_json_parse_event_array(tw_json_parser *p, const char *buf, size_t len,
                              size_t cap, tw_json_event_fn fn, void *ud,
                              tw_json_array_stop *stop);

/* The integer member `key` of the JSON object buf[0, len) (the first one
 * in file order). 1 and *out set when there is one; 0 when the text is not
 * an object or the member is missing or not an int64. */
int tw_json_object_int(tw_json_parser *p, const char *buf, size_t len,
                       size_t cap, const char *key, int64_t *out);

#ifdef __cplusplus
}
#endif

#endif /* TW_READER_JSON_H */
