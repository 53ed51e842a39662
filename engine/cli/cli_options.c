/*
 * cli_options.c - option tables (cli_options.h): getopt_long's arrays built
 * from the table, errors that name the command and the option, and the
 * --help text with the options aligned and wrapped.
 */
#include "cli_options.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "event_time.h"
#include "tw_assert.h"

/* getopt_long's value for an option without a letter: past every char. */
#define TW_CLI_LONG_BASE 256
/* -h/--help, added to every table. */
#define TW_CLI_HELP_VAL 'h'

/* --help layout: options' help starts at this column, lines end by 78. */
#define TW_CLI_HELP_COL 22
#define TW_CLI_WIDTH 78

static const tw_cli_option tw_cli_help_option = {"help", 'h', NULL, "this text",
                                                 TW_CLI_HELP};

void tw_cli_begin(tw_cli_parser *p, const tw_cli_command *cmd, int argc,
                  char **argv)
{
    memset(p, 0, sizeof(*p));
    p->cmd = cmd;
    p->argc = argc;
    p->argv = argv;
    /* ':' first: a missing argument returns ':' (told apart from '?') */
    size_t ns = 0, nl = 0;
    p->shortopts[ns++] = ':';
    p->shortopts[ns++] = TW_CLI_HELP_VAL;
    size_t i = 0;
    for (; cmd->options[i].id != 0; i++) {
        const tw_cli_option *o = &cmd->options[i];
        TW_ASSERT(i < TW_CLI_MAX_OPTIONS && o->id > 0);
        TW_ASSERT(o->name != NULL || o->letter != 0);
        TW_ASSERT(o->letter != TW_CLI_HELP_VAL);
        int val = o->letter != 0 ? o->letter : TW_CLI_LONG_BASE + (int)i;
        if (o->letter != 0) {
            p->shortopts[ns++] = (char)o->letter;
            if (o->arg != NULL)
                p->shortopts[ns++] = ':';
        }
        if (o->name != NULL)
            p->longopts[nl++] = (struct option){
                o->name, o->arg != NULL ? required_argument : no_argument, NULL,
                val};
    }
    p->shortopts[ns] = '\0';
    p->longopts[nl++] =
        (struct option){"help", no_argument, NULL, TW_CLI_HELP_VAL};
    p->longopts[nl] = (struct option){NULL, 0, NULL, 0};
    optind = 0; /* glibc: a full re-initialisation, for a second parse */
    opterr = 0; /* the errors are ours (they name the command) */
}

/* The table entry getopt_long's value stands for; NULL: none. */
static const tw_cli_option *tw_cli_find(const tw_cli_command *cmd, int val)
{
    if (val == TW_CLI_HELP_VAL)
        return &tw_cli_help_option;
    for (size_t i = 0; cmd->options[i].id != 0; i++) {
        const tw_cli_option *o = &cmd->options[i];
        if (o->letter != 0 ? o->letter == val
                           : TW_CLI_LONG_BASE + (int)i == val)
            return o;
    }
    return NULL;
}

/* "--name" or "-x" as the user could have written it. */
static void tw_cli_spelling(const tw_cli_option *o, char *buf, size_t n)
{
    if (o->name != NULL)
        snprintf(buf, n, "--%s", o->name);
    else
        snprintf(buf, n, "-%c", o->letter);
}

int tw_cli_next(tw_cli_parser *p)
{
    int c = getopt_long(p->argc, p->argv, p->shortopts, p->longopts, NULL);
    p->optind = optind;
    p->arg = optarg;
    if (c == -1)
        return TW_CLI_END;
    const tw_cli_option *o = NULL;
    char name[128];
    if (c == ':' || c == '?') {
        o = optopt != 0 ? tw_cli_find(p->cmd, optopt) : NULL;
        if (o != NULL)
            tw_cli_spelling(o, name, sizeof(name));
        if (c == ':' && o != NULL)
            tw_cli_usage_error(p->cmd, "option '%s' needs an argument (%s)",
                               name, o->arg);
        else if (o != NULL) /* a known option refused: "--flag=value" */
            tw_cli_usage_error(p->cmd, "option '%s' takes no argument", name);
        if (o != NULL)
            return TW_CLI_USAGE;
        if (optopt > 0 && optopt < TW_CLI_LONG_BASE)
            snprintf(name, sizeof(name), "-%c", optopt);
        else
            snprintf(name, sizeof(name), "%s", p->argv[optind - 1]);
        tw_cli_usage_error(p->cmd, "unknown option '%s'", name);
        return TW_CLI_USAGE;
    }
    if (c == TW_CLI_HELP_VAL) {
        tw_cli_help(p->cmd, stdout);
        return TW_CLI_HELP;
    }
    o = tw_cli_find(p->cmd, c);
    TW_ASSERT(o != NULL); /* getopt_long returns only what we gave it */
    return o->id;
}

int tw_cli_usage_error(const tw_cli_command *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "trainwatch %s: ", cmd->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr,
            "\nusage: trainwatch %s %s\n"
            "'trainwatch %s --help' describes the options.\n",
            cmd->name, cmd->synopsis, cmd->name);
    return 2;
}

/* Writes text's words from column col, wrapped at TW_CLI_WIDTH with
 * continuation lines indented to indent; ends the line. */
static void tw_cli_wrap(FILE *out, const char *text, size_t col, size_t indent)
{
    const char *s = text;
    int first = 1;
    while (*s != '\0') {
        while (*s == ' ' || *s == '\n')
            s++;
        size_t len = strcspn(s, " \n");
        if (len == 0)
            break;
        if (!first && col + 1 + len > TW_CLI_WIDTH) {
            fprintf(out, "\n%*s", (int)indent, "");
            col = indent;
        } else if (!first) {
            fputc(' ', out);
            col++;
        }
        fwrite(s, 1, len, out);
        col += len;
        s += len;
        first = 0;
    }
    fputc('\n', out);
}

static void tw_cli_help_option_line(FILE *out, const tw_cli_option *o)
{
    char left[128];
    int n = snprintf(left, sizeof(left), "  ");
    if (o->letter != 0)
        n += snprintf(left + n, sizeof(left) - (size_t)n, "-%c%s", o->letter,
                      o->name != NULL ? ", " : "");
    if (o->name != NULL)
        n += snprintf(left + n, sizeof(left) - (size_t)n, "--%s", o->name);
    if (o->arg != NULL)
        n += snprintf(left + n, sizeof(left) - (size_t)n, " %s", o->arg);
    fputs(left, out);
    /* a left column too wide for one space before the help: next line */
    if ((size_t)n + 1 > TW_CLI_HELP_COL)
        fprintf(out, "\n%*s", TW_CLI_HELP_COL, "");
    else
        fprintf(out, "%*s", TW_CLI_HELP_COL - n, "");
    tw_cli_wrap(out, o->help, TW_CLI_HELP_COL, TW_CLI_HELP_COL);
}

void tw_cli_help(const tw_cli_command *cmd, FILE *out)
{
    fprintf(out, "usage: trainwatch %s %s\n", cmd->name, cmd->synopsis);
    if (cmd->description != NULL)
        fprintf(out, "\n%s", cmd->description);
    fprintf(out, "\noptions:\n");
    for (size_t i = 0; cmd->options[i].id != 0; i++)
        tw_cli_help_option_line(out, &cmd->options[i]);
    tw_cli_help_option_line(out, &tw_cli_help_option);
    if (cmd->more != NULL)
        cmd->more(out);
    if (cmd->epilogue != NULL)
        fprintf(out, "\n%s", cmd->epilogue);
}

int tw_cli_parse_epoch_us(const char *text, int64_t *out)
{
    char *end = NULL;
    double s = strtod(text, &end);
    if (end == text || *end != '\0' || !(s >= 0.0) || !tw_time_s_to_us(s, out))
        return -1;
    return 0;
}
