/*
 * commands.h - the subcommands of the `trainwatch` executable. Each lives in
 * its own cmd_<name>.c, takes argc/argv starting at the subcommand's name,
 * and returns the process exit status (0 ok, 1 failure, 2 usage error).
 */
#ifndef TW_COMMANDS_H
#define TW_COMMANDS_H

typedef struct tw_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} tw_command;

int tw_cmd_eval(int argc, char **argv);
int tw_cmd_synth(int argc, char **argv);
int tw_cmd_broker(int argc, char **argv);
int tw_cmd_replay(int argc, char **argv);
int tw_cmd_agent(int argc, char **argv);
int tw_cmd_run(int argc, char **argv);
int tw_cmd_config(int argc, char **argv);
int tw_cmd_explain(int argc, char **argv);
int tw_cmd_rules(int argc, char **argv);
int tw_cmd_stats(int argc, char **argv);
int tw_cmd_timeline(int argc, char **argv);
int tw_cmd_pystats(int argc, char **argv);
int tw_cmd_report(int argc, char **argv);
int tw_cmd_debug_dump(int argc, char **argv);

#endif /* TW_COMMANDS_H */
