/*
 * rules_test.c - `trainwatch rules test TESTS.yaml ...` (rules_test.h).
 *
 * Each test's input is evaluated by running this executable's own `eval
 * DIR --json` in the tests file's folder (so relative paths in the test
 * and in its rule configuration are relative to the tests file): the
 * results compared are exactly those of `eval --json` and of the
 * daemon's results files. A synth input is generated into a temporary
 * folder first and removed afterwards.
 */
#include "rules_test.h"

#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "cli_options.h"
#include "rules_expect.h"
#include "synth.h"
#include "yaml_json.h"

enum { OPT_RUN = 1 };

static const tw_cli_option test_options[] = {
    {"run", 0, "TEXT", "run only the tests whose name contains TEXT", OPT_RUN},
    {NULL, 0, NULL, NULL, 0}};

static void test_format(FILE *out)
{
    fputs("\nA tests file:\n\n"
          "  tests:\n"
          "    - name: ceiling fires on a full GPU\n"
          "      input:\n"
          "        folder: jobs/full      # a profiler-output folder, or:\n"
          "        # synth: {preset: low_gpu, seed: 3, duration: 720,\n"
          "        #         nodes: 1, gpus: 1, framework: false}\n"
          "      rules: ceiling.yaml      # a rule configuration (eval "
          "--rules);\n"
          "                               # default: eval's default rules\n"
          "      semantics: fixed         # optional: fixed or reference\n"
          "      expect:\n"
          "        - rule: GPUMemoryCeiling\n"
          "          status: IssuesFound  # InProgress NoIssuesFound "
          "IssuesFound Error NoData\n"
          "          violations: 1        # optional, like the three below\n"
          "          datapoints: 1400\n"
          "          triggered: 1\n"
          "          finding: [\"above 75 %\", \"algo-1/gpu0\"]  # texts the "
          "finding\n"
          "                               # (summary, magnitude, advice, "
          "nodes) contains\n"
          "\nPaths are relative to the tests file's folder, and so is a "
          "relative 'source'\nin the rule configuration. A rule named in "
          "expect must be in the results;\nrules not named are not "
          "checked.\n",
          out);
}

static const tw_cli_command test_command = {
    .name = "rules test",
    .synopsis = "TESTS.yaml... [--run TEXT]",
    .description =
        "Runs rule unit tests: each test evaluates an input (a "
        "profiler-output folder\nor a generated job) with a rule "
        "configuration, as 'trainwatch eval --json'\ndoes, and compares "
        "each named rule's status, counters and finding texts with\nthe "
        "expected ones. Every disagreement is printed as a diff (- "
        "expected,\n+ got).\n",
    .options = test_options,
    .more = test_format,
    .epilogue = "Exit status: 0 every test passed, 1 a test failed or a "
                "tests file is invalid,\n2 bad usage.\n",
};

/* One tests file being run. */
typedef struct test_file {
    const char *path;
    char dir[4096]; /* its folder: the evaluations' working directory */
    const char *filter;
    unsigned passed, failed, skipped;
} test_file;

/* A string member, or NULL with a message when present but not a string. */
static int get_string(json_t *obj, const char *key, const char **out,
                      const char *where, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (v == NULL)
        return 0;
    if (!json_is_string(v)) {
        snprintf(err, errlen, "%s: '%s' must be a plain value", where, key);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

/* Keys of obj not in allowed (NULL-terminated) are an error: a typo
 * would otherwise silently check nothing. */
static int only_keys(json_t *obj, const char *const *allowed, const char *where,
                     char *err, size_t errlen)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        size_t i = 0;
        while (allowed[i] != NULL && strcmp(allowed[i], key) != 0)
            i++;
        if (allowed[i] == NULL) {
            size_t o = (size_t)snprintf(
                err, errlen, "%s: unknown key '%s' (known:", where, key);
            for (i = 0; allowed[i] != NULL && o < errlen; i++)
                o += (size_t)snprintf(err + o, errlen - o, " %s", allowed[i]);
            if (o < errlen)
                snprintf(err + o, errlen - o, ")");
            return -1;
        }
    }
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* The synth input into a new temporary folder: *tmp (to remove) and
 * *job_dir (tmp/job) on success. */
static int make_synth(json_t *spec, const char *where, char *tmp, size_t tmplen,
                      char *job_dir, size_t joblen, char *err, size_t errlen)
{
    static const char *const keys[] = {"preset",      "seed",      "duration",
                                       "nodes",       "gpus",      "cores",
                                       "interval_ms", "framework", NULL};
    char w[600];
    snprintf(w, sizeof(w), "%s: input.synth", where);
    if (!json_is_object(spec)) {
        snprintf(err, errlen, "%s must be a mapping (preset, seed, ...)", w);
        return -1;
    }
    if (only_keys(spec, keys, w, err, errlen) != 0)
        return -1;
    tw_synth_opts o;
    tw_synth_opts_default(&o);
    const char *v;
    uint64_t n;
    if (get_string(spec, "preset", &o.preset, w, err, errlen) != 0)
        return -1;
    if (o.preset == NULL) {
        snprintf(err, errlen, "%s: needs 'preset'", w);
        return -1;
    }
    static const char *const num_keys[] = {
        "seed", "duration", "nodes", "gpus", "cores", "interval_ms", NULL};
    for (size_t i = 0; num_keys[i] != NULL; i++) {
        if (get_string(spec, num_keys[i], &v, w, err, errlen) != 0)
            return -1;
        if (v == NULL)
            continue;
        if (tw_expect_whole_number(v, &n) != 0 || (i > 0 && n > UINT32_MAX)) {
            snprintf(err, errlen, "%s: '%s' must be a whole number, not '%s'",
                     w, num_keys[i], v);
            return -1;
        }
        switch (i) {
        case 0:
            o.seed = n;
            break;
        case 1:
            o.duration_s = (double)n;
            break;
        case 2:
            o.nodes = (uint32_t)n;
            break;
        case 3:
            o.gpus = (uint32_t)n;
            break;
        case 4:
            o.cores = (uint32_t)n;
            break;
        default:
            o.interval_ms = (uint32_t)n;
        }
    }
    if (get_string(spec, "framework", &v, w, err, errlen) != 0)
        return -1;
    if (v != NULL) {
        if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0) {
            snprintf(err, errlen, "%s: 'framework' must be true or false", w);
            return -1;
        }
        o.framework = strcmp(v, "true") == 0;
    }
    char why[512];
    if (tw_synth_opts_resolve(&o, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "%s: %s", w, why);
        return -1;
    }
    const char *base = getenv("TMPDIR");
    snprintf(tmp, tmplen, "%s/trainwatch-rules-test.XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    if (mkdtemp(tmp) == NULL) {
        snprintf(err, errlen, "%s: cannot create a temporary folder %s: %s", w,
                 tmp, strerror(errno));
        tmp[0] = '\0';
        return -1;
    }
    snprintf(job_dir, joblen, "%s/job", tmp);
    o.out_dir = job_dir;
    if (tw_synth_write(&o, NULL, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "%s: %s", w, why);
        return -1;
    }
    return 0;
}

/* Runs `<this executable> eval ARGS` in dir; its standard output into
 * out. 0 when it exited 0. */
static int run_eval(const char *dir, char *const *args, tw_buf *out, char *err,
                    size_t errlen)
{
    /* The path, not /proc/self/exe itself: under valgrind that link is
     * valgrind's, while readlink() is answered with the program's. */
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0 || (size_t)n >= sizeof(exe) - 1) {
        snprintf(err, errlen, "cannot find this executable: %s",
                 n < 0 ? strerror(errno) : "path too long");
        return -1;
    }
    exe[n] = '\0';
    int fd[2];
    if (pipe(fd) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        if (dup2(fd[1], STDOUT_FILENO) < 0 || chdir(dir) != 0) {
            fprintf(stderr, "trainwatch rules test: cannot enter %s: %s\n", dir,
                    strerror(errno));
            _exit(127);
        }
        execv(exe, args);
        fprintf(stderr, "trainwatch rules test: cannot run eval: %s\n",
                strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    char chunk[65536];
    int failed = 0;
    while ((n = read(fd[0], chunk, sizeof(chunk))) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || tw_buf_append(out, chunk, (size_t)n) != 0) {
            failed = 1;
            break;
        }
    }
    close(fd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (failed) {
        snprintf(err, errlen, "reading eval's output failed");
        return -1;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(err, errlen,
                 "eval failed (exit status %d; its message is "
                 "above)",
                 WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        return -1;
    }
    return 0;
}

/* The eval arguments for one test, after its input is ready. */
typedef struct test_args {
    const char *input_dir, *rules, *semantics;
} test_args;

/* Evaluates one test's input into *results (eval --json). 0, or -1 (err). */
static int evaluate(const test_file *tf, const char *where, const test_args *ta,
                    json_t **results, char *err, size_t errlen)
{
    char *args[12];
    size_t na = 0;
    args[na++] = "trainwatch";
    args[na++] = "eval";
    args[na++] = (char *)ta->input_dir;
    args[na++] = "--json";
    args[na++] = "--quiet";
    if (ta->rules != NULL) {
        args[na++] = "--rules";
        args[na++] = (char *)ta->rules;
    }
    if (ta->semantics != NULL) {
        args[na++] = "--semantics";
        args[na++] = (char *)ta->semantics;
    }
    args[na] = NULL;
    tw_buf *out = tw_buf_new();
    if (out == NULL) {
        snprintf(err, errlen, "%s: out of memory", where);
        return -1;
    }
    char why[1024];
    if (run_eval(tf->dir, args, out, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "%s: %s", where, why);
        tw_buf_free(out);
        return -1;
    }
    json_error_t je;
    *results =
        json_loadb((const char *)tw_buf_data(out), tw_buf_len(out), 0, &je);
    tw_buf_free(out);
    if (*results == NULL) {
        snprintf(err, errlen, "%s: eval's output is not JSON: %s", where,
                 je.text);
        return -1;
    }
    return 0;
}

/* Every expectation compared; the verdict, then the diff. 0 pass, 1 fail,
 * -1 (err). */
static int judge(const char *name, const tw_rule_expect *ex, size_t nex,
                 json_t *results, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    FILE *diff = open_memstream(&text, &len);
    if (diff == NULL) {
        snprintf(err, errlen, "test '%s': out of memory", name);
        return -1;
    }
    int differ = 0;
    for (size_t i = 0; i < nex; i++)
        differ += tw_rule_expect_compare(&ex[i], results, diff);
    if (fclose(diff) != 0) {
        free(text);
        snprintf(err, errlen, "test '%s': out of memory", name);
        return -1;
    }
    if (differ == 0)
        printf("test '%s': ok\n", name);
    else
        printf("test '%s': FAILED (- expected, + got)\n%s", name, text);
    free(text);
    return differ > 0;
}

/* The test's keys and its expectations (*ex: to free). 0, or -1 (err). */
static int read_test(const test_file *tf, json_t *test, size_t index,
                     const char **name, test_args *ta, tw_rule_expect **ex,
                     char *err, size_t errlen)
{
    static const char *const keys[] = {"name",      "input",  "rules",
                                       "semantics", "expect", NULL};
    static const char *const input_keys[] = {"folder", "synth", NULL};
    char where[512];
    snprintf(where, sizeof(where), "%s: tests[%zu]", tf->path, index);
    *ex = NULL;
    if (!json_is_object(test)) {
        snprintf(err, errlen, "%s must be a mapping (name, input, ...)", where);
        return -1;
    }
    if (only_keys(test, keys, where, err, errlen) != 0 ||
        get_string(test, "name", name, where, err, errlen) != 0 ||
        get_string(test, "rules", &ta->rules, where, err, errlen) != 0 ||
        get_string(test, "semantics", &ta->semantics, where, err, errlen) != 0)
        return -1;
    if (*name == NULL) {
        snprintf(err, errlen, "%s: needs 'name'", where);
        return -1;
    }
    snprintf(where, sizeof(where), "%s: test '%s'", tf->path, *name);
    json_t *input = json_object_get(test, "input");
    if (!json_is_object(input) ||
        only_keys(input, input_keys, where, err, errlen) != 0 ||
        get_string(input, "folder", &ta->input_dir, where, err, errlen) != 0 ||
        (ta->input_dir != NULL) == (json_object_get(input, "synth") != NULL)) {
        if (err[0] == '\0')
            snprintf(err, errlen,
                     "%s: 'input' needs one of 'folder' or 'synth'", where);
        return -1;
    }
    json_t *expect = json_object_get(test, "expect");
    size_t n = json_array_size(expect);
    if (!json_is_array(expect) || n == 0) {
        snprintf(err, errlen,
                 "%s: 'expect' must list at least one rule's expected "
                 "results",
                 where);
        return -1;
    }
    if ((*ex = calloc(n, sizeof(**ex))) == NULL) {
        snprintf(err, errlen, "%s: out of memory", where);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        char w[600];
        snprintf(w, sizeof(w), "%s: expect[%zu]", where, i);
        if (tw_rule_expect_parse(json_array_get(expect, i), w, &(*ex)[i], err,
                                 errlen) != 0)
            return -1;
    }
    return 0;
}

/* Validates one test, prepares its input, runs it, prints the verdict.
 * 0 pass, 1 fail, 2 skipped (--run), -1 invalid (err). */
static int run_test(test_file *tf, json_t *test, size_t index, char *err,
                    size_t errlen)
{
    const char *name = NULL;
    test_args ta = {0};
    tw_rule_expect *ex = NULL;
    char tmp[4096] = "", job_dir[4200], where[512];
    json_t *results = NULL;
    int rc = -1;
    if (read_test(tf, test, index, &name, &ta, &ex, err, errlen) != 0)
        goto out;
    rc = 2;
    if (tf->filter != NULL && strstr(name, tf->filter) == NULL)
        goto out;
    rc = -1;
    snprintf(where, sizeof(where), "%s: test '%s'", tf->path, name);
    if (ta.input_dir == NULL) {
        json_t *synth =
            json_object_get(json_object_get(test, "input"), "synth");
        if (make_synth(synth, where, tmp, sizeof(tmp), job_dir, sizeof(job_dir),
                       err, errlen) != 0)
            goto out;
        ta.input_dir = job_dir;
    }
    if (evaluate(tf, where, &ta, &results, err, errlen) == 0)
        rc = judge(name, ex, json_array_size(json_object_get(test, "expect")),
                   results, err, errlen);
out:
    json_decref(results);
    free(ex);
    if (tmp[0] != '\0' &&
        nftw(tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr,
                "trainwatch rules test: could not remove the temporary "
                "folder %s: %s\n",
                tmp, strerror(errno));
    return rc;
}

static int run_file(test_file *tf)
{
    char err[2048] = "";
    json_t *root = tw_yaml_json_load(tf->path, err, sizeof(err));
    if (root == NULL) {
        fprintf(stderr, "trainwatch rules test: %s\n", err);
        return -1;
    }
    json_t *tests = json_object_get(root, "tests");
    int rc = 0;
    if (!json_is_object(root) || !json_is_array(tests) ||
        json_object_size(root) != 1) {
        fprintf(stderr,
                "trainwatch rules test: %s: expected one top-level key, "
                "'tests', holding a list of tests (see --help)\n",
                tf->path);
        rc = -1;
    }
    char copy[sizeof(tf->dir)];
    snprintf(copy, sizeof(copy), "%s", tf->path); /* dirname edits it */
    snprintf(tf->dir, sizeof(tf->dir), "%s", dirname(copy));
    for (size_t i = 0; rc == 0 && i < json_array_size(tests); i++) {
        err[0] = '\0';
        int r = run_test(tf, json_array_get(tests, i), i, err, sizeof(err));
        if (r < 0) {
            fprintf(stderr, "trainwatch rules test: %s\n", err);
            rc = -1;
        } else if (r == 0) {
            tf->passed++;
        } else if (r == 1) {
            tf->failed++;
        } else {
            tf->skipped++;
        }
    }
    json_decref(root);
    return rc;
}

int tw_rules_test(int argc, char **argv)
{
    const char *filter = NULL;
    tw_cli_parser p;
    tw_cli_begin(&p, &test_command, argc, argv);
    for (int id; (id = tw_cli_next(&p)) != TW_CLI_END;) {
        if (id == TW_CLI_HELP)
            return 0;
        if (id == TW_CLI_USAGE)
            return 2;
        if (id == OPT_RUN)
            filter = p.arg;
    }
    if (p.optind >= argc)
        return tw_cli_usage_error(&test_command, "expected a tests file");
    unsigned passed = 0, failed = 0, skipped = 0;
    int invalid = 0;
    for (int i = p.optind; i < argc; i++) {
        test_file tf = {.path = argv[i], .filter = filter};
        if (run_file(&tf) != 0)
            invalid = 1;
        passed += tf.passed;
        failed += tf.failed;
        skipped += tf.skipped;
    }
    printf("rules test: %u passed, %u failed, %u skipped%s\n", passed, failed,
           skipped, invalid ? "; a tests file is invalid (see above)" : "");
    return failed > 0 || invalid ? 1 : 0;
}
