/*
 * tw_assert.h - assertions for internal invariants (Redis's serverAssert
 * habit): a broken one means a bug in trainwatch, never bad input (bad
 * input gets an error with context instead). It logs the condition, file,
 * line and function and aborts, so a core dump or a supervisor restart
 * follows. Unlike assert(), TW_ASSERT stays enabled in release builds:
 * use it where the check is cheap next to the work around it.
 */
#ifndef TW_ASSERT_H
#define TW_ASSERT_H

_Noreturn void tw_assert_fail(const char *cond, const char *file, int line,
                              const char *func);

#define TW_ASSERT(cond)                                                        \
    ((cond) ? (void)0 : tw_assert_fail(#cond, __FILE__, __LINE__, __func__))

#endif /* TW_ASSERT_H */
