/*
 * rules_test.h - `trainwatch rules test TESTS.yaml ...`: rule unit tests,
 * like `promtool test rules`. Each test names an input (a profiler-output
 * folder, or a generated job: synth preset and seed), a rule configuration
 * and, per rule, the expected status, counters and finding texts; the
 * input is evaluated exactly as `trainwatch eval --json` does (it runs
 * that command) and every disagreement is printed as a diff.
 */
#ifndef TW_RULES_TEST_H
#define TW_RULES_TEST_H

/* argv[0] = "test". Returns 0 when every test passed, 1 when one failed or
 * a tests file is invalid, 2 on bad usage. */
int tw_rules_test(int argc, char **argv);

#endif /* TW_RULES_TEST_H */
