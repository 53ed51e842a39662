/* c_locale.c - see c_locale.h. */
#include "c_locale.h"

void tw_c_locale_enter(tw_c_locale *s)
{
    s->c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    s->old = s->c != (locale_t)0 ? uselocale(s->c) : (locale_t)0;
}

void tw_c_locale_leave(tw_c_locale *s)
{
    if (s->c == (locale_t)0)
        return;
    uselocale(s->old);
    freelocale(s->c);
    s->c = (locale_t)0;
}
