/*
 * cli_options.h - a command's options declared once, in a table that drives
 * both parsing (getopt_long underneath) and `--help`.
 *
 * A command describes itself in a tw_cli_command: its synopsis, a
 * description and an epilogue (preformatted paragraphs, printed as they
 * are) and its options. Each option has a long name and/or a short letter,
 * the name of its argument (NULL: it takes none), a help paragraph (wrapped
 * by the printer) and an id that the parser returns for it. -h/--help is
 * added to every command.
 *
 *     tw_cli_parser p;
 *     tw_cli_begin(&p, &cmd, argc, argv);
 *     for (int id; (id = tw_cli_next(&p)) != TW_CLI_END;) {
 *         switch (id) {
 *         case TW_CLI_HELP:  return 0;  (help printed on stdout)
 *         case TW_CLI_USAGE: return 2;  (error printed on stderr)
 *         case OPT_TOPIC: topic = p.arg; break;
 *         }
 *     }
 *     operands: argv[p.optind .. argc-1]
 */
#ifndef TW_CLI_OPTIONS_H
#define TW_CLI_OPTIONS_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

typedef struct tw_cli_option {
    const char *name; /* long name without "--"; NULL: short letter only */
    int letter;       /* short option letter; 0: long name only */
    const char *arg;  /* the argument's name in --help; NULL: takes none */
    const char *help; /* one paragraph, wrapped in --help */
    int id;           /* > 0: what tw_cli_next returns for it */
} tw_cli_option;

typedef struct tw_cli_command {
    const char *name;        /* "replay": errors start "trainwatch replay: " */
    const char *synopsis;    /* after "usage: trainwatch <name> " */
    const char *description; /* before the options; NULL: none */
    const tw_cli_option *options; /* ended by an entry whose id is 0 */
    void (*more)(FILE *out);      /* optional: printed after the options */
    const char *epilogue;         /* after the options; NULL: none */
} tw_cli_command;

#define TW_CLI_MAX_OPTIONS 32

/* What tw_cli_next returns besides an option's id. */
enum {
    TW_CLI_END = 0,    /* no more options: operands from optind */
    TW_CLI_HELP = -1,  /* -h/--help: the help was printed on stdout */
    TW_CLI_USAGE = -2, /* bad usage: the error was printed on stderr */
};

typedef struct tw_cli_parser {
    const tw_cli_command *cmd;
    int argc;
    char **argv;
    struct option longopts[TW_CLI_MAX_OPTIONS + 2];
    char shortopts[4 + 2 * (TW_CLI_MAX_OPTIONS + 1)];
    const char *arg; /* the argument of the option just returned */
    int optind;      /* after TW_CLI_END: argv's first operand */
} tw_cli_parser;

/* Prepares a parse of argv (argv[0] = the command's name). A table with
 * more than TW_CLI_MAX_OPTIONS options is a programming error (asserted). */
void tw_cli_begin(tw_cli_parser *p, const tw_cli_command *cmd, int argc,
                  char **argv);

/* The next option's id (its argument in p->arg), TW_CLI_END, TW_CLI_HELP
 * or TW_CLI_USAGE (unknown option, missing or unexpected argument: the
 * message names the command and the option). Operands may come anywhere:
 * getopt_long moves them after the options. */
int tw_cli_next(tw_cli_parser *p);

/* The whole help: usage line, description, options, more(), epilogue. */
void tw_cli_help(const tw_cli_command *cmd, FILE *out);

/* "trainwatch <name>: <message>" and a pointer to --help on stderr;
 * returns 2, the exit status of a usage error. */
int tw_cli_usage_error(const tw_cli_command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* "1700000000.25" (seconds since the epoch, fraction allowed) as µs in
 * *out; -1 when the text is not such a time. */
int tw_cli_parse_epoch_us(const char *text, int64_t *out);

#endif /* TW_CLI_OPTIONS_H */
