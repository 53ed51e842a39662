/*
 * cmd_config.c - `trainwatch config --describe | --markdown | --sample`:
 * print the configuration schema (config_schema.h) as text, as the
 * README's Markdown table, or as a complete commented YAML file.
 *
 * Exit status: 0 printed, 2 usage error.
 */
#include <getopt.h>
#include <stdio.h>

#include "commands.h"
#include "config_schema.h"

static void tw_config_usage(FILE *out)
{
    fprintf(
        out,
        "usage: trainwatch config --describe | --markdown | --sample\n"
        "\n"
        "The configuration file's keys, from the one table that validates\n"
        "them (every section: top level, rules, kafka, engine, state,\n"
        "actions):\n"
        "  --describe   each key with its type, bounds, default and meaning\n"
        "  --markdown   the same as a Markdown table (README)\n"
        "  --sample     a complete commented YAML file with every default;\n"
        "               `run --config` and `eval --rules` load it as it is\n"
        "  -h, --help   this text\n");
}

int tw_cmd_config(int argc, char **argv)
{
    static const struct option opts[] = {{"describe", no_argument, NULL, 'd'},
                                         {"markdown", no_argument, NULL, 'm'},
                                         {"sample", no_argument, NULL, 's'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int what = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
        case 'm':
        case 's':
            if (what != 0 && what != c) {
                fprintf(stderr, "trainwatch config: give one of --describe, "
                                "--markdown, --sample\n");
                return 2;
            }
            what = c;
            break;
        case 'h':
            tw_config_usage(stdout);
            return 0;
        default:
            tw_config_usage(stderr);
            return 2;
        }
    }
    if (optind != argc || what == 0) {
        tw_config_usage(stderr);
        return 2;
    }
    if (what == 'd')
        tw_schema_describe(stdout);
    else if (what == 'm')
        tw_schema_describe_markdown(stdout);
    else
        tw_schema_sample(stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}
