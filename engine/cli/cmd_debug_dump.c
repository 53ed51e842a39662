/*
 * cmd_debug_dump.c - `trainwatch debug-dump DIR`: every tensor of a legacy
 * debug-output folder (engine/io/reader_debug.h) with its reductions, one
 * line each, as text or JSON lines.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "commands.h"
#include "debug_index.h"
#include "debug_reduce.h"
#include "json_writer.h"
#include "reader_debug.h"
#include "trainwatch/plugin.h"

enum { OPT_JSON = 1, OPT_INACTIVITY, OPT_RAW_MAX, OPT_QUIET };

static const tw_cli_option debug_dump_options[] = {
    {"json", 0, NULL,
     "one JSON object per line: worker, step, mode, mode_step, name, "
     "collections, wall_us, dtype, shape, numel, prev_step, reductions "
     "(op -> value; NaN and Infinity as Python's json writes them), raw",
     OPT_JSON},
    {"threshold-inactivity", 0, "PCT",
     "DeadRelu's threshold_inactivity for dead_fraction, percent (default "
     "1.0)",
     OPT_INACTIVITY},
    {"raw-max", 0, "N",
     "also print the values of tensors with at most N elements (default 0)",
     OPT_RAW_MAX},
    {"quiet", 0, NULL, "no bad-input messages and no summary on stderr",
     OPT_QUIET},
    {NULL, 0, NULL, NULL, 0}};

static const tw_cli_command debug_dump_command = {
    .name = "debug-dump",
    .synopsis = "DIR [--json] [options]",
    .description =
        "Reads a legacy debug-output folder (index/, events/, collections/, "
        "as the\nreference's hook writes them) and prints each saved "
        "tensor, per (worker, step,\nmode, mode_step, name), with the "
        "reductions the debugging rules use, derived\nfrom full tensors, "
        "and those the writer stored. Bad records are reported on\nstderr "
        "with file and offset, counted, and skipped. README.md (\"Legacy\n"
        "debug-output folders\").\n",
    .options = debug_dump_options,
    .epilogue = "Exit status: 0 read (bad records counted in the summary), "
                "1 when DIR is not a\ndebug-output folder or cannot be "
                "read, 2 on bad usage.\n",
};

typedef struct dump_ctx {
    int json;
    int quiet;
    tw_json *j;
} dump_ctx;

static void on_error(void *ctx, const char *msg)
{
    const dump_ctx *d = ctx;
    if (!d->quiet)
        fprintf(stderr, "trainwatch debug-dump: %s\n", msg);
}

static int print_json(dump_ctx *d, const tw_tensor *t)
{
    tw_json *j = d->j;
    tw_json_reset(j);
    tw_json_object_begin(j);
    tw_json_key(j, "worker");
    tw_json_string(j, t->node);
    tw_json_key(j, "step");
    tw_json_int(j, t->step);
    tw_json_key(j, "mode");
    tw_json_string(j, tw_debug_mode_name(t->mode));
    tw_json_key(j, "mode_step");
    tw_json_int(j, t->mode_step);
    tw_json_key(j, "name");
    tw_json_string(j, t->name);
    tw_json_key(j, "collections");
    tw_json_array_begin(j);
    for (uint32_t i = 0; i < t->ncollections; i++)
        tw_json_string(j, t->collections[i]);
    tw_json_array_end(j);
    tw_json_key(j, "wall_us");
    tw_json_int(j, t->wall_us);
    tw_json_key(j, "dtype");
    tw_json_string(j, t->dtype);
    tw_json_key(j, "shape");
    tw_json_array_begin(j);
    for (uint32_t i = 0; i < t->nshape; i++)
        tw_json_int(j, t->shape[i]);
    tw_json_array_end(j);
    tw_json_key(j, "numel");
    tw_json_int(j, t->numel);
    tw_json_key(j, "prev_step");
    tw_json_int(j, t->prev_step);
    tw_json_key(j, "reductions");
    tw_json_object_begin(j);
    for (uint32_t i = 0; i < t->nreductions; i++) {
        tw_json_key(j, t->reductions[i].op);
        tw_json_double(j, t->reductions[i].value);
    }
    tw_json_object_end(j);
    if (t->raw != NULL) {
        tw_json_key(j, "raw");
        tw_json_array_begin(j);
        for (uint32_t i = 0; i < t->nraw; i++)
            tw_json_double(j, t->raw[i]);
        tw_json_array_end(j);
    }
    tw_json_object_end(j);
    if (tw_json_failed(j))
        return -1;
    return printf("%s\n", tw_json_str(j)) < 0 ? -1 : 0;
}

static int print_text(const tw_tensor *t)
{
    printf("%s step %" PRId64 " %s:%" PRId64 " %s %s [", t->node, t->step,
           tw_debug_mode_name(t->mode), t->mode_step, t->name,
           t->dtype[0] ? t->dtype : "-");
    for (uint32_t i = 0; i < t->nshape; i++)
        printf("%s%" PRId64, i ? "," : "", t->shape[i]);
    printf("]");
    for (uint32_t i = 0; i < t->nreductions; i++) {
        char v[32];
        tw_py_float_repr(t->reductions[i].value, v, sizeof(v));
        printf(" %s=%s", t->reductions[i].op, v);
    }
    return printf("\n") < 0 ? -1 : 0;
}

static int on_tensor(void *ctx, const tw_tensor *t)
{
    dump_ctx *d = ctx;
    return d->json ? print_json(d, t) : print_text(t);
}

int tw_cmd_debug_dump(int argc, char **argv)
{
    dump_ctx d = {0, 0, NULL};
    tw_debug_opts o = {TW_DEBUG_DEFAULT_INACTIVITY, 0};
    tw_cli_parser p;
    tw_cli_begin(&p, &debug_dump_command, argc, argv);
    for (int id; (id = tw_cli_next(&p)) != TW_CLI_END;) {
        char *end;
        switch (id) {
        case TW_CLI_HELP:
            return 0;
        case TW_CLI_USAGE:
            return 2;
        case OPT_JSON:
            d.json = 1;
            break;
        case OPT_INACTIVITY:
            o.threshold_inactivity = strtod(p.arg, &end);
            if (end == p.arg || *end != '\0' ||
                !(o.threshold_inactivity > 0 && o.threshold_inactivity <= 100))
                return tw_cli_usage_error(&debug_dump_command,
                                          "--threshold-inactivity: '%s' is "
                                          "not a percentage in (0, 100]",
                                          p.arg);
            break;
        case OPT_RAW_MAX: {
            long long n = strtoll(p.arg, &end, 10);
            if (end == p.arg || *end != '\0' || n < 0)
                return tw_cli_usage_error(&debug_dump_command,
                                          "--raw-max: '%s' is not a count",
                                          p.arg);
            o.raw_max = (size_t)n;
            break;
        }
        case OPT_QUIET:
            d.quiet = 1;
            break;
        }
    }
    if (argc - p.optind != 1)
        return tw_cli_usage_error(&debug_dump_command,
                                  "expects one debug-output folder DIR");
    const char *dir = argv[p.optind];
    if (!tw_debug_folder_detect(dir)) {
        fprintf(stderr,
                "trainwatch debug-dump: %s: not a debug-output folder (no "
                "index/ beside events/ or collections/)\n",
                dir);
        return 1;
    }
    d.j = tw_json_new();
    if (d.j == NULL) {
        fprintf(stderr, "trainwatch debug-dump: out of memory\n");
        return 1;
    }
    tw_json_set_compact(d.j, 1);
    tw_debug_counts c;
    char err[512] = "";
    int rc = tw_debug_folder_read(dir, &o, on_tensor, on_error, &d, &c, err,
                                  sizeof(err));
    tw_json_free(d.j);
    if (rc != TW_OK || fflush(stdout) != 0) {
        fprintf(stderr, "trainwatch debug-dump: %s: %s\n", dir,
                err[0] && rc != TW_OK ? err : "writing the output failed");
        return 1;
    }
    if (!d.quiet)
        fprintf(stderr,
                "trainwatch debug-dump: %" PRIu64 " tensors from %" PRIu64
                " index files (%" PRIu64 " records); bad: %" PRIu64
                " files, %" PRIu64 " records; %" PRIu64
                " of unsupported dtypes; footers: %" PRIu64
                " constant, %" PRIu64 " payload CRC\n",
                c.tensors, c.index_files, c.records, c.bad_files, c.bad_records,
                c.unsupported, c.constant_footers, c.crc_footers);
    return 0;
}
