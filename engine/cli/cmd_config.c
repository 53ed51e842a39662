/*
 * cmd_config.c - `trainwatch config --describe | --markdown | --sample`:
 * print the configuration schema (config_schema.h) as text, as the
 * README's Markdown table, or as a complete commented YAML file.
 *
 * Exit status: 0 printed, 2 usage error.
 */
#include <stdio.h>

#include "cli_options.h"
#include "commands.h"
#include "config_schema.h"

enum { OPT_DESCRIBE = 1, OPT_MARKDOWN, OPT_SAMPLE };

static const tw_cli_option tw_config_options[] = {
    {"describe", 0, NULL, "each key with its type, bounds, default and meaning",
     OPT_DESCRIBE},
    {"markdown", 0, NULL, "the same as a Markdown table (README)",
     OPT_MARKDOWN},
    {"sample", 0, NULL,
     "a complete commented YAML file with every default; `run --config` and "
     "`eval --rules` load it as it is",
     OPT_SAMPLE},
    {NULL, 0, NULL, NULL, 0}};

static const tw_cli_command tw_config_command = {
    .name = "config",
    .synopsis = "--describe | --markdown | --sample",
    .description =
        "The configuration file's keys, from the one table that validates\n"
        "them (every section: top level, rules, kafka, engine, state,\n"
        "actions).\n",
    .options = tw_config_options,
};

int tw_cmd_config(int argc, char **argv)
{
    tw_cli_parser p;
    tw_cli_begin(&p, &tw_config_command, argc, argv);
    int what = 0;
    for (int id; (id = tw_cli_next(&p)) != TW_CLI_END;) {
        if (id == TW_CLI_HELP)
            return 0;
        if (id == TW_CLI_USAGE)
            return 2;
        if (what != 0 && what != id)
            return tw_cli_usage_error(&tw_config_command,
                                      "give one of --describe, --markdown, "
                                      "--sample");
        what = id;
    }
    if (p.optind != argc)
        return tw_cli_usage_error(&tw_config_command,
                                  "unexpected argument '%s'", argv[p.optind]);
    if (what == 0)
        return tw_cli_usage_error(&tw_config_command,
                                  "give one of --describe, --markdown, "
                                  "--sample");
    if (what == OPT_DESCRIBE)
        tw_schema_describe(stdout);
    else if (what == OPT_MARKDOWN)
        tw_schema_describe_markdown(stdout);
    else
        tw_schema_sample(stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}
