/*
 * cmd_rules.c - `trainwatch rules list|check|test`: for rule authors and
 * operators. `list` prints the built-in rules with their parameters,
 * defaults and bounds (from the descriptors, rendered as `explain` does);
 * `check FILE.so` loads a plugin and validates it without calling any of
 * its callbacks; `test TESTS.yaml` is in rules_test.c.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_options.h"
#include "commands.h"
#include "plugin_host.h"
#include "rule_explain.h"
#include "rules_test.h"

enum { OPT_ENTRY = 1 };

static const tw_cli_option no_options[] = {{NULL, 0, NULL, NULL, 0}};

static const tw_cli_command list_command = {
    .name = "rules list",
    .synopsis = "",
    .description =
        "Prints every built-in rule found on the rules search path "
        "($TRAINWATCH_RULES_DIR,\n<bin>/../lib/trainwatch/rules, the build "
        "tree, the install prefix): its file,\nwhat it checks, and each "
        "parameter with type, default and bounds.\n",
    .options = no_options,
    .epilogue = "Exit status: 0 listed, 1 no rule found, 2 bad usage.\n",
};

static const tw_cli_option check_options[] = {
    {"entry", 0, "NAME",
     "the plugin's entry symbol (the configuration's rule_to_invoke); "
     "default trainwatch_rule",
     OPT_ENTRY},
    {NULL, 0, NULL, NULL, 0}};

static const tw_cli_command check_command = {
    .name = "rules check",
    .synopsis = "FILE.so [--entry NAME]",
    .description =
        "Loads a rule plugin and validates it without running it: the file "
        "loads\n(all its symbols resolve), the entry symbol exists, its ABI "
        "version is one this\nengine reads, the descriptor has a name and "
        "every mandatory callback, parameter\nnames are unique and every "
        "default parses and lies within its bounds. Then\nprints what "
        "the engine will see: name, ABI, parameters, inputs, and whether "
        "it\ncan be checkpointed (needed with state.store: redis).\n",
    .options = check_options,
    .epilogue = "Exit status: 0 valid, 1 invalid (the reason is printed), "
                "2 bad usage.\n",
};

static int rules_list(int argc, char **argv)
{
    tw_cli_parser p;
    tw_cli_begin(&p, &list_command, argc, argv);
    for (int id; (id = tw_cli_next(&p)) != TW_CLI_END;)
        return id == TW_CLI_HELP ? 0 : 2;
    if (p.optind != argc)
        return tw_cli_usage_error(&list_command, "takes no operand");
    tw_registry *reg = tw_registry_new();
    if (reg == NULL) {
        fprintf(stderr, "trainwatch rules list: out of memory\n");
        return 1;
    }
    const char *const *names;
    size_t n = tw_registry_list(reg, &names);
    for (size_t i = 0; i < n; i++) {
        const tw_plugin *pl;
        char err[1024];
        if (tw_registry_find(reg, names[i], &pl, err, sizeof(err)) != TW_OK)
            continue;
        const tw_rule_descriptor *d = tw_plugin_descriptor(pl);
        printf("%s%s  (%s)\n", i > 0 ? "\n" : "", d->name, tw_plugin_path(pl));
        printf("  %s\n", d->description != NULL ? d->description : "");
        for (size_t k = 0; k < d->nparams; k++) {
            tw_rule_explain_param(stdout, &d->params[k]);
            fputc('\n', stdout);
        }
        if (d->nparams == 0)
            printf("  (no parameters)\n");
    }
    tw_registry_free(reg);
    if (n == 0) {
        fprintf(stderr, "trainwatch rules list: no built-in rule found; set "
                        "TRAINWATCH_RULES_DIR to the folder of the rules' "
                        ".so files\n");
        return 1;
    }
    return 0;
}

static const char *inputs_word(uint32_t in)
{
    if (in == TW_INPUT_TENSOR)
        return "debugging tensors";
    if ((in & TW_INPUT_SYSTEM) && (in & TW_INPUT_FRAMEWORK))
        return "system metrics and framework events";
    return (in & TW_INPUT_SYSTEM) ? "system metrics" : "framework events";
}

static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

static int rules_check(int argc, char **argv)
{
    const char *entry = NULL;
    tw_cli_parser p;
    tw_cli_begin(&p, &check_command, argc, argv);
    for (int id; (id = tw_cli_next(&p)) != TW_CLI_END;) {
        if (id == TW_CLI_HELP)
            return 0;
        if (id == TW_CLI_USAGE)
            return 2;
        if (id == OPT_ENTRY)
            entry = p.arg;
    }
    if (p.optind != argc - 1)
        return tw_cli_usage_error(&check_command,
                                  "expected exactly one plugin file");
    const char *path = argv[p.optind];
    tw_registry *reg = tw_registry_new();
    if (reg == NULL) {
        fprintf(stderr, "trainwatch rules check: out of memory\n");
        return 1;
    }
    char err[1024];
    const tw_plugin *pl = NULL;
    int status = 1;
    if (tw_registry_load(reg, path, entry, &pl, err, sizeof(err)) != TW_OK ||
        tw_plugin_check_params(pl, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "trainwatch rules check: %s\n", err);
        goto out;
    }
    const tw_rule_descriptor *d = tw_plugin_descriptor(pl);
    int stateless = d->abi_version >= 2 && (d->flags & TW_RULE_STATELESS);
    int saves = d->save != NULL && d->restore != NULL;
    printf("ok: %s: rule %s, plugin ABI %u (this engine reads %u to %u)\n",
           path, d->name, d->abi_version, TW_PLUGIN_ABI_MIN_VERSION,
           TW_PLUGIN_ABI_VERSION);
    printf("  reads: %s\n", inputs_word(tw_plugin_inputs(pl)));
    printf("  checkpoints: %s\n",
           stateless ? "stateless (TW_RULE_STATELESS)"
           : saves   ? "save/restore"
                     : "NONE: refused by run with a persistent state store "
                       "(add save/restore or declare TW_RULE_STATELESS)");
    printf("  finding(): %s\n",
           d->abi_version >= 2 && d->finding != NULL
               ? "yes"
               : "no (findings are described from the counters)");
    const tw_plugin *builtin;
    if (tw_registry_find(reg, d->name, &builtin, err, sizeof(err)) == TW_OK &&
        !same_file(path, tw_plugin_path(builtin)))
        printf("  note: a built-in rule is also named %s (%s); give this "
               "one another 'name' in the configuration to tell them "
               "apart\n",
               d->name, tw_plugin_path(builtin));
    printf("  parameters (%zu):\n", d->nparams);
    for (size_t k = 0; k < d->nparams; k++) {
        fputs("  ", stdout);
        tw_rule_explain_param(stdout, &d->params[k]);
        fputc('\n', stdout);
    }
    status = 0;
out:
    tw_registry_free(reg);
    return status;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: trainwatch rules list | check FILE.so | test TESTS.yaml\n"
            "\n"
            "  list    the built-in rules with parameters, defaults and "
            "bounds\n"
            "  check   load a rule plugin and validate it, running nothing\n"
            "  test    run rule unit tests: inputs, rule configuration, "
            "expected results\n"
            "\n'trainwatch rules <subcommand> --help' describes each.\n");
}

int tw_cmd_rules(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(sub, "list") == 0)
        return rules_list(argc - 1, argv + 1);
    if (strcmp(sub, "check") == 0)
        return rules_check(argc - 1, argv + 1);
    if (strcmp(sub, "test") == 0)
        return tw_rules_test(argc - 1, argv + 1);
    fprintf(stderr, "trainwatch rules: unknown subcommand '%s'\n\n", sub);
    usage(stderr);
    return 2;
}
