/*
 * c_locale.h - text that people and parsers read is formatted in the C
 * locale whatever the process's locale is. The engine itself never calls
 * setlocale(), but a rule plugin (or a library it pulls in) may; printf's
 * decimal point would then become a comma in findings and JSON. A scope
 * switches the calling thread to the C locale (POSIX uselocale()) and
 * back; other threads are unaffected.
 *
 * Ownership: the scope owns the locale object it created until
 * tw_c_locale_leave().
 */
#ifndef TW_C_LOCALE_H
#define TW_C_LOCALE_H

#include <locale.h>

typedef struct tw_c_locale {
    locale_t c;   /* (locale_t)0 when newlocale failed: nothing switched */
    locale_t old; /* the thread's locale before the scope */
} tw_c_locale;

/* Enters the C locale for this thread. Never fails: without memory for a
 * locale object the thread keeps its locale (and the output its commas). */
void tw_c_locale_enter(tw_c_locale *s);
void tw_c_locale_leave(tw_c_locale *s);

#endif /* TW_C_LOCALE_H */
