/*
 * cmd_explain.c - `trainwatch explain [RULE]`: without RULE, the built-in
 * rules with one line each; with RULE (a built-in name, or a plugin file
 * with --entry), what it checks, its parameters with defaults and bounds,
 * and what a finding means and what to try (rule_explain.h).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "plugin_host.h"
#include "rule_explain.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: trainwatch explain [RULE | --plugin FILE [--entry NAME]]\n"
            "\n"
            "Without RULE lists the built-in rules. With RULE (a built-in "
            "rule's name) or\n--plugin (a custom rule's shared object; "
            "--entry: its entry symbol, default\ntrainwatch_rule) prints "
            "what it checks, its parameters with type, default\nand bounds, "
            "and what a finding means and what to try.\n"
            "\n"
            "Exit status: 0 described, 1 unknown rule or bad plugin, 2 bad "
            "usage.\n");
}

int tw_cmd_explain(int argc, char **argv)
{
    static const struct option opts[] = {
        {"plugin", required_argument, NULL, 'p'},
        {"entry", required_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *plugin = NULL, *entry = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            plugin = optarg;
            break;
        case 'e':
            entry = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (argc - optind > 1 || (plugin != NULL && argc - optind > 0)) {
        usage(stderr);
        return 2;
    }
    tw_registry *reg = tw_registry_new();
    if (reg == NULL) {
        fprintf(stderr, "trainwatch explain: out of memory\n");
        return 1;
    }
    int status = 1;
    char err[1024];
    const tw_plugin *p = NULL;
    if (plugin != NULL) {
        if (tw_registry_load(reg, plugin, entry, &p, err, sizeof(err)) !=
            TW_OK) {
            fprintf(stderr, "trainwatch explain: %s\n", err);
            goto out;
        }
    } else if (optind < argc) {
        if (tw_registry_find(reg, argv[optind], &p, err, sizeof(err)) !=
            TW_OK) {
            fprintf(stderr, "trainwatch explain: %s\n", err);
            goto out;
        }
    } else {
        const char *const *names;
        size_t n = tw_registry_list(reg, &names);
        printf("built-in rules ('trainwatch explain RULE' for one):\n");
        for (size_t i = 0; i < n; i++) {
            if (tw_registry_find(reg, names[i], &p, err, sizeof(err)) != TW_OK)
                continue;
            const char *dsc = tw_plugin_descriptor(p)->description;
            printf("  %-26s %.*s%s\n", names[i], 50, dsc ? dsc : "",
                   dsc && strlen(dsc) > 50 ? "..." : "");
        }
        status = 0;
        goto out;
    }
    tw_rule_explain(stdout, tw_plugin_descriptor(p));
    status = 0;
out:
    tw_registry_free(reg);
    return status;
}
