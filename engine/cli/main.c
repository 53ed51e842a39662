/* main.c - `trainwatch <command> ...`: dispatch to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "trainwatch/plugin.h"

static const tw_command commands[] = {
    {"eval", tw_cmd_eval,
     "evaluate rules offline over a profiler-output folder"},
    {"synth", tw_cmd_synth,
     "write a generated profiler-output folder with planted problems"},
    {"broker", tw_cmd_broker,
     "run a Kafka-protocol broker (librdkafka mock cluster) for dev/tests"},
    {"replay", tw_cmd_replay,
     "publish a profiler-output folder to Kafka, optionally following it"},
    {"agent", tw_cmd_agent,
     "sample this host (CPU, memory, network, disk, GPUs) to Kafka"},
    {"run", tw_cmd_run,
     "the streaming engine: consume metrics from Kafka, publish alerts"},
    {"config", tw_cmd_config,
     "describe every configuration key, or print a sample configuration"},
    {"explain", tw_cmd_explain,
     "what a rule checks, its parameters, what its findings mean"},
    {"rules", tw_cmd_rules,
     "list built-in rules, check a plugin, run rule unit tests"},
    {"stats", tw_cmd_stats,
     "job, step, utilization and training-phase statistics of a folder"},
    {"timeline", tw_cmd_timeline,
     "merge a folder's traces and system metrics into one Chrome trace"},
    {"pystats", tw_cmd_pystats,
     "top Python functions of the hook's cProfile statistics"},
    {"report", tw_cmd_report,
     "one self-contained HTML page about a job: findings, usage, charts"},
    {"debug-dump", tw_cmd_debug_dump,
     "print the tensors and reductions of a legacy debug-output folder"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: trainwatch <command> [options]\n\n"
                 "trainwatch evaluates profiler rules over ML training jobs' "
                 "metrics.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'trainwatch <command> --help' describes each command.\n"
                 "'trainwatch --version' prints the version.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("trainwatch %s (plugin ABI %u)\n", TW_VERSION,
               TW_PLUGIN_ABI_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "trainwatch: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
