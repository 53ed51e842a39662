/* test_cli_options.c - option tables (cli_options.h): parsing from the
 * table, usage errors naming the command and the option, and --help
 * listing every option. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_options.h"

enum { OPT_TOPIC = 1, OPT_FOLLOW, OPT_PROP, OPT_QUIET, OPT_LONGEST };

static const tw_cli_option options[] = {
    {"topic", 0, "T", "topic (default trainwatch.metrics)", OPT_TOPIC},
    {"follow", 0, NULL,
     "keep following DIR while the agent writes it: list it every second, "
     "publish new files and the complete lines appended to system files",
     OPT_FOLLOW},
    {NULL, 'X', "KEY=VALUE", "librdkafka property (repeatable)", OPT_PROP},
    {"quiet", 'q', NULL, "no log lines below warnings", OPT_QUIET},
    {"bootstrap-file", 0, "FILE", "also write the address to FILE",
     OPT_LONGEST},
    {NULL, 0, NULL, NULL, 0}};

static const tw_cli_command cmd = {
    .name = "demo",
    .synopsis = "DIR [options]",
    .description = "Demonstrates option tables.\n",
    .options = options,
    .epilogue = "Exit status: 0, 1 or 2.\n",
};

/* Runs the parser over args, the ids returned (END excluded) into ids;
 * returns the last result (TW_CLI_END unless help or an error stopped
 * it). stdout and stderr go to files whose text is kept in out/err. */
typedef struct parse_result {
    int ids[16];
    const char *args[16];
    size_t n;
    int last;
    int optind;
    char out[8192], err[8192];
} parse_result;

static void slurp(FILE *f, char *buf, size_t n)
{
    fflush(f);
    rewind(f);
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

static void parse(parse_result *r, int argc, const char **argv_in)
{
    memset(r, 0, sizeof(*r));
    char *argv[16];
    for (int i = 0; i < argc; i++)
        argv[i] = (char *)argv_in[i];
    FILE *fo = tmpfile(), *fe = tmpfile();
    assert_non_null(fo);
    assert_non_null(fe);
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    dup2(fileno(fo), 1);
    dup2(fileno(fe), 2);
    tw_cli_parser p;
    tw_cli_begin(&p, &cmd, argc, argv);
    int id;
    while ((id = tw_cli_next(&p)) > 0) {
        r->ids[r->n] = id;
        r->args[r->n++] = p.arg;
    }
    r->last = id;
    r->optind = p.optind;
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    slurp(fo, r->out, sizeof(r->out));
    slurp(fe, r->err, sizeof(r->err));
}

static void test_parses_from_the_table(void **state)
{
    (void)state;
    parse_result r;
    const char *argv[] = {"demo", "--topic", "t1",       "dir",   "-X",
                          "a=b",  "-q",      "--follow", "-Xc=d", "--topic=t2"};
    parse(&r, 10, argv);
    assert_int_equal(r.last, TW_CLI_END);
    assert_int_equal(r.n, 6);
    int want[] = {OPT_TOPIC,  OPT_PROP, OPT_QUIET,
                  OPT_FOLLOW, OPT_PROP, OPT_TOPIC};
    const char *args[] = {"t1", "a=b", NULL, NULL, "c=d", "t2"};
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(r.ids[i], want[i]);
        if (args[i] == NULL)
            assert_null(r.args[i]);
        else
            assert_string_equal(r.args[i], args[i]);
    }
    /* the operand moved after the options */
    assert_int_equal(r.optind, 9);
    assert_string_equal(r.err, "");
}

static void test_second_parse_starts_afresh(void **state)
{
    (void)state;
    parse_result r;
    const char *a1[] = {"demo", "-q", "x"};
    parse(&r, 3, a1);
    const char *a2[] = {"demo", "--quiet"};
    parse(&r, 2, a2);
    assert_int_equal(r.last, TW_CLI_END);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.ids[0], OPT_QUIET);
    assert_int_equal(r.optind, 2);
}

static void test_unknown_option(void **state)
{
    (void)state;
    parse_result r;
    const char *a1[] = {"demo", "--frobnicate", "x"};
    parse(&r, 3, a1);
    assert_int_equal(r.last, TW_CLI_USAGE);
    assert_non_null(strstr(r.err, "trainwatch demo: unknown option "
                                  "'--frobnicate'"));
    assert_non_null(strstr(r.err, "usage: trainwatch demo DIR [options]"));
    assert_non_null(strstr(r.err, "'trainwatch demo --help'"));
    assert_string_equal(r.out, "");
    const char *a2[] = {"demo", "-qz"};
    parse(&r, 2, a2);
    assert_int_equal(r.last, TW_CLI_USAGE);
    assert_int_equal(r.n, 1); /* -q came first */
    assert_non_null(strstr(r.err, "trainwatch demo: unknown option '-z'"));
}

static void test_missing_or_unexpected_argument(void **state)
{
    (void)state;
    parse_result r;
    const char *a1[] = {"demo", "--topic"};
    parse(&r, 2, a1);
    assert_int_equal(r.last, TW_CLI_USAGE);
    assert_non_null(
        strstr(r.err, "trainwatch demo: option '--topic' needs an argument "
                      "(T)"));
    const char *a2[] = {"demo", "-X"};
    parse(&r, 2, a2);
    assert_int_equal(r.last, TW_CLI_USAGE);
    assert_non_null(strstr(r.err, "option '-X' needs an argument"));
    const char *a3[] = {"demo", "--follow=yes"};
    parse(&r, 2, a3);
    assert_int_equal(r.last, TW_CLI_USAGE);
    assert_non_null(strstr(r.err, "option '--follow' takes no argument"));
    const char *a4[] = {"demo", "--quiet=1"};
    parse(&r, 2, a4);
    assert_int_equal(r.last, TW_CLI_USAGE);
    assert_non_null(strstr(r.err, "option '--quiet' takes no argument"));
}

static void test_help_lists_every_option(void **state)
{
    (void)state;
    parse_result r;
    const char *a[] = {"demo", "--topic", "t", "--help", "--follow"};
    parse(&r, 5, a);
    assert_int_equal(r.last, TW_CLI_HELP);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.err, "");
    assert_true(strncmp(r.out,
                        "usage: trainwatch demo DIR [options]\n\n"
                        "Demonstrates option tables.\n\noptions:\n",
                        60) == 0);
    assert_non_null(strstr(r.out, "\n  --topic T           topic (default "
                                  "trainwatch.metrics)\n"));
    assert_non_null(strstr(r.out, "\n  -X KEY=VALUE        librdkafka"));
    assert_non_null(strstr(r.out, "\n  -q, --quiet         no log lines"));
    assert_non_null(strstr(r.out, "\n  -h, --help          this text\n"));
    /* too wide for the column: the help goes on the next line */
    assert_non_null(strstr(r.out, "\n  --bootstrap-file FILE\n"
                                  "                      also write"));
    /* wrapped: no line past 78 columns, continuation lines aligned */
    assert_non_null(strstr(r.out, "\n  --follow            keep following"));
    for (const char *l = r.out; *l != '\0';) {
        size_t len = strcspn(l, "\n");
        assert_true(len <= 78);
        l += len + (l[len] == '\n');
    }
    const char *cont = strstr(r.out, "it: list it\n");
    assert_non_null(cont);
    assert_true(strncmp(cont + 12, "                      every", 27) == 0);
    assert_non_null(strstr(r.out, "\n\nExit status: 0, 1 or 2.\n"));
    for (size_t i = 0; options[i].id != 0; i++) {
        char want[64];
        if (options[i].name != NULL)
            snprintf(want, sizeof(want), "--%s", options[i].name);
        else
            snprintf(want, sizeof(want), "-%c", options[i].letter);
        assert_non_null(strstr(r.out, want));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parses_from_the_table),
        cmocka_unit_test(test_second_parse_starts_afresh),
        cmocka_unit_test(test_unknown_option),
        cmocka_unit_test(test_missing_or_unexpected_argument),
        cmocka_unit_test(test_help_lists_every_option),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
