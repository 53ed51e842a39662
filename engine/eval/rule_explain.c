/* rule_explain.c - a rule described from its descriptor (rule_explain.h). */
#include "rule_explain.h"

#include <string.h>

static const char *type_word(tw_param_type t)
{
    switch (t) {
    case TW_PARAM_INT:
        return "integer";
    case TW_PARAM_DOUBLE:
        return "number";
    case TW_PARAM_STRING:
        return "string";
    case TW_PARAM_BOOL:
        return "true/false";
    }
    return "value";
}

/* A paragraph wrapped at 76 columns under `indent` spaces. */
static void wrap(FILE *out, const char *text, int indent)
{
    int col = indent;
    fprintf(out, "%*s", indent, "");
    for (const char *p = text; *p != '\0';) {
        while (*p == ' ')
            p++;
        size_t w = strcspn(p, " ");
        if (w == 0)
            break;
        if (col > indent && col + 1 + (int)w > 76) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
        }
        col += fprintf(out, "%s%.*s", col > indent ? " " : "", (int)w, p);
        p += w;
    }
    fputc('\n', out);
}

void tw_rule_explain_param(FILE *out, const tw_param_spec *p)
{
    fprintf(out, "  %-24s %s, default %s", p->name, type_word(p->type),
            p->default_value != NULL ? p->default_value : "None");
    if ((p->type == TW_PARAM_INT || p->type == TW_PARAM_DOUBLE) &&
        p->min <= p->max) {
        fprintf(out, ", from %g to %g", p->min, p->max);
    }
}

void tw_rule_explain(FILE *out, const tw_rule_descriptor *d)
{
    fprintf(out, "%s\n\n", d->name);
    fprintf(out, "What it checks:\n");
    wrap(out, d->description != NULL ? d->description : "(not described)", 2);
    fprintf(out, "\nParameters (%zu):\n", d->nparams);
    for (size_t i = 0; i < d->nparams; i++) {
        tw_rule_explain_param(out, &d->params[i]);
        fputc('\n', out);
        if (d->params[i].help != NULL)
            wrap(out, d->params[i].help, 27);
    }
    if (d->nparams == 0)
        fprintf(out, "  (none)\n");
    fprintf(out, "\nA finding, and what to try:\n");
    const char *help = d->abi_version >= 2 ? d->finding_help : NULL;
    wrap(out,
         help != NULL ? help
                      : "(the rule gives no advice of its own; its findings "
                        "are described from its counters)",
         2);
}
