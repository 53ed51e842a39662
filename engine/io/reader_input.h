/*
 * reader_input.h - a growable, padded read buffer over one agent file
 * (plain or gzip, told apart by zlib itself), shared by the system-lines
 * and trace readers (reader.h).
 *
 * The unconsumed bytes are buf[start, end). tw_input_fill() moves them to
 * the front, grows the buffer when it is full, and reads more. There are
 * always TW_JSON_PADDING zero bytes after `end`, as simdjson needs.
 *
 * Ownership: the tw_input (a caller-owned struct) owns buf and the zlib
 * handle; tw_input_close() releases both.
 */
#ifndef TW_READER_INPUT_H
#define TW_READER_INPUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct tw_input {
    void *gz;  /* gzFile */
    char *buf; /* cap + TW_JSON_PADDING bytes */
    size_t cap;
    size_t start;   /* first unconsumed byte */
    size_t end;     /* one past the last byte read */
    size_t max_cap; /* growth limit: a record longer than this is an error */
    int eof;
    uint64_t bytes;      /* bytes delivered (after decompression) */
    uint64_t dropped_nl; /* newlines in the bytes already dropped */
} tw_input;

/* Opens path. TW_ERR with a sentence in err (naming the path) on failure. */
int tw_input_open(tw_input *in, const char *path, char *err, size_t errlen);

/* Keeps buf[start, end), reads more. Returns 1 when bytes were added, 0 at
 * end of file, TW_ERR on a read error (err filled) or when the buffer would
 * have to grow past max_cap (err says so; *too_long set). */
int tw_input_fill(tw_input *in, int *too_long, char *err, size_t errlen);

void tw_input_close(tw_input *in);

/* Number of '\n' bytes in p[0, n). */
uint64_t tw_input_count_newlines(const char *p, size_t n);

#endif /* TW_READER_INPUT_H */
