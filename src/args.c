/* args.c: the shared parser of command words (see args.h). */
#include "src/args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct padrone_args {
	const char *values[128];	/* per short letter: its value, or "" for a switch */
	bool given[128];
	int npos;
	char **pos;
	char **owned;		/* copies of every string handed out */
	int nowned;
};

int padrone_errf(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}


static const struct padrone_opt *find_short(const struct padrone_opt *opts, char c)
{
	for (; opts && opts->name; opts++)
		if (opts->name == c)
			return opts;
	return NULL;
}

/* A long option by exact name or unique prefix. */
static const struct padrone_opt *find_long(const struct padrone_opt *opts, const char *name,
					   size_t len, bool *ambiguous)
{
	const struct padrone_opt *found = NULL;

	*ambiguous = false;
	for (; opts && opts->name; opts++) {
		if (!opts->long_name || strncmp(opts->long_name, name, len) != 0)
			continue;
		if (opts->long_name[len] == '\0')
			return opts;
		if (found)
			*ambiguous = true;
		found = opts;
	}
	return *ambiguous ? NULL : found;
}

static char *keep(struct padrone_args *a, const char *s, size_t len)
{
	char *copy = strndup(s, len);
	if (copy)
		a->owned[a->nowned++] = copy;
	return copy;
}

/* value NULL: a switch; a value that is NULL after keep() failed is -ENOMEM. */
static int set_opt(struct padrone_args *a, const struct padrone_opt *o, const char *value)
{
	unsigned char k = (unsigned char)o->name & 127;

	if (o->value && !value)
		return -ENOMEM;

	a->given[k] = true;
	a->values[k] = value ? value : "";
	return 0;
}

/* One word starting with "--": a long option, its value maybe in the next word. */
static int parse_long(struct padrone_args *a, const struct padrone_opt *opts, char *const words[],
		      int count, int *i, char *err, size_t errlen)
{
	const char *name = words[*i] + 2;
	const char *eq = strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	bool ambiguous;
	const struct padrone_opt *o = find_long(opts, name, len, &ambiguous);

	if (!o)
		return padrone_errf(err, errlen, -EINVAL, ambiguous ? "ambiguous option: --%.*s" :
			    "unknown option: --%.*s", (int)len, name);
	if (!o->value) {
		if (eq)
			return padrone_errf(err, errlen, -EINVAL, "option --%s takes no value", o->long_name);
		return set_opt(a, o, NULL);
	}
	if (eq)
		return set_opt(a, o, keep(a, eq + 1, strlen(eq + 1)));
	if (*i + 1 >= count)
		return padrone_errf(err, errlen, -EINVAL, "option --%s needs a value (%s)",
				    o->long_name, o->value);
	++*i;
	return set_opt(a, o, words[*i]);
}

/* One word starting with "-": a cluster of short switches, the last of which
 * may take a value (attached, or the next word). */
static int parse_short(struct padrone_args *a, const struct padrone_opt *opts, char *const words[],
		       int count, int *i, char *err, size_t errlen)
{
	const char *w = words[*i];

	for (size_t j = 1; w[j]; j++) {
		const struct padrone_opt *o = find_short(opts, w[j]);
		if (!o)
			return padrone_errf(err, errlen, -EINVAL, "unknown option: -%c", w[j]);
		if (!o->value) {
			set_opt(a, o, NULL);
			continue;
		}
		if (w[j + 1])
			return set_opt(a, o, keep(a, w + j + 1, strlen(w + j + 1)));
		if (*i + 1 >= count)
			return padrone_errf(err, errlen, -EINVAL, "option -%c needs a value (%s)", o->name, o->value);
		++*i;
		return set_opt(a, o, words[*i]);
	}
	return 0;
}

/* "-5" and "-0x10" are positional numbers, not options, when no option is a digit. */
static bool is_option(const char *w, const struct padrone_opt *opts)
{
	if (w[0] != '-' || w[1] == '\0')
		return false;
	if (w[1] >= '0' && w[1] <= '9')
		return find_short(opts, w[1]) != NULL;
	return true;
}

static int parse_words(struct padrone_args *a, const struct padrone_opt *opts, int count,
		       char *const words[], char *err, size_t errlen)
{
	bool options_done = false;

	for (int i = 0; i < count; i++) {
		const char *w = words[i];
		int r = 0;

		if (!options_done && strcmp(w, "--") == 0)
			options_done = true;
		else if (!options_done && w[0] == '-' && w[1] == '-')
			r = parse_long(a, opts, words, count, &i, err, errlen);
		else if (!options_done && is_option(w, opts))
			r = parse_short(a, opts, words, count, &i, err, errlen);
		else
			a->pos[a->npos++] = (char *)w;
		if (r < 0)
			return r;
	}
	return 0;
}

int padrone_args_parse(const struct padrone_opt *opts, int lower, int upper,
		       int count, char *const words[], struct padrone_args **out,
		       char *err, size_t errlen)
{
	struct padrone_args *a = calloc(1, sizeof(*a));
	int r = -ENOMEM;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	if (!a)
		return -ENOMEM;
	a->pos = calloc((size_t)count + 1, sizeof(*a->pos));
	a->owned = calloc((size_t)count + 1, sizeof(*a->owned));
	if (!a->pos || !a->owned)
		goto err;
	r = parse_words(a, opts, count, words, err, errlen);
	if (r < 0)
		goto err;
	if (a->npos < lower) {
		r = padrone_errf(err, errlen, -EINVAL, "too few arguments");
		goto err;
	}
	if (upper >= 0 && a->npos > upper) {
		r = padrone_errf(err, errlen, -EINVAL, "too many arguments");
		goto err;
	}
	/* Positional values and detached option values point into words,
	 * which the caller keeps for the life of *out; attached ones are copies. */
	*out = a;
	return 0;
err:
	padrone_args_free(a);
	return r;
}

void padrone_args_free(struct padrone_args *a)
{
	if (!a)
		return;
	for (int i = 0; i < a->nowned; i++)
		free(a->owned[i]);
	free(a->owned);
	free(a->pos);
	free(a);
}

bool padrone_args_has(const struct padrone_args *a, char name)
{
	return a->given[(unsigned char)name & 127];
}

const char *padrone_args_get(const struct padrone_args *a, char name)
{
	unsigned char k = (unsigned char)name & 127;
	return a->given[k] ? a->values[k] : NULL;
}

int padrone_args_count(const struct padrone_args *a)
{
	return a->npos;
}

const char *padrone_args_value(const struct padrone_args *a, int i)
{
	return i >= 0 && i < a->npos ? a->pos[i] : NULL;
}

int padrone_parse_ulong(const char *what, const char *s, unsigned long min, unsigned long max,
			unsigned long *out, char *err, size_t errlen)
{
	char *end;
	unsigned long v;

	errno = 0;
	/* Decimal, or hexadecimal with 0x (addresses); never octal ("010" is ten). */
	v = strtoul(s, &end, s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 : 10);
	if (!*s || *end || s[0] == '-' || s[0] == '+' || errno == ERANGE || v < min || v > max)
		return padrone_errf(err, errlen, -EINVAL, "%s must be an integer from %lu to %lu, not '%s'",
			    what, min, max, s);
	*out = v;
	return 0;
}

int padrone_parse_double(const char *what, const char *s, double min, double max,
			 double *out, char *err, size_t errlen)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (!*s || *end || errno == ERANGE || !isfinite(v) || v < min || v > max)
		return padrone_errf(err, errlen, -EINVAL, "%s must be a number from %g to %g, not '%s'",
			    what, min, max, s);
	*out = v;
	return 0;
}

/* ------------------------------------------------------------ line input */

struct wordvec {
	char **v;
	int n, cap;
};

static int push_word(struct wordvec *w, const char *s, size_t len)
{
	if (w->n + 2 > w->cap) {
		int cap = w->cap ? w->cap * 2 : 8;
		char **v = realloc(w->v, (size_t)cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		w->v = v;
		w->cap = cap;
	}
	w->v[w->n] = strndup(s, len);
	if (!w->v[w->n])
		return -ENOMEM;
	w->v[++w->n] = NULL;
	return 0;
}

void padrone_free_words(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

/* Scan one word starting at *pp into buf (unquoting); stops at unquoted
 * blank, ';' or '#' at the start of a word. Returns 0, -EINVAL on an open
 * quote. *ends_cmd is set when an unquoted ';' ended it. */
static int scan_word(const char **pp, char *buf, size_t *len, bool *ends_cmd,
		     char *err, size_t errlen)
{
	const char *p = *pp;
	char quote = 0;

	*len = 0;
	*ends_cmd = false;
	for (; *p; p++) {
		if (quote) {
			if (*p == quote)
				quote = 0;
			else if (quote == '"' && *p == '\\' && (p[1] == '"' || p[1] == '\\'))
				buf[(*len)++] = *++p;
			else
				buf[(*len)++] = *p;
			continue;
		}
		if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			break;
		if (*p == ';') {
			*ends_cmd = true;
			p++;
			break;
		}
		if (*p == '\'' || *p == '"')
			quote = *p;
		else if (*p == '\\' && p[1])
			buf[(*len)++] = *++p;
		else
			buf[(*len)++] = *p;
	}
	*pp = p;
	if (quote) {
		snprintf(err, errlen, "unterminated %c quote", quote);
		return -EINVAL;
	}
	return 0;
}

int padrone_split_line(const char *line, char ***words, char *err, size_t errlen)
{
	struct wordvec w = { .v = calloc(8, sizeof(char *)), .cap = 8 };
	char *buf = malloc(strlen(line) + 1);
	const char *p = line;
	int r = 0;

	*words = NULL;
	if (!buf || !w.v) {
		free(buf);
		free(w.v);
		return -ENOMEM;
	}
	while (r == 0) {
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			p++;
		if (!*p || *p == '#')
			break;
		const char *start = p;
		size_t len;
		bool ends_cmd;
		r = scan_word(&p, buf, &len, &ends_cmd, err, errlen);
		if (r == 0 && (len || p - start > 1 || !ends_cmd))
			r = push_word(&w, buf, len);
		if (r == 0 && ends_cmd)
			r = push_word(&w, ";", 1);
	}
	free(buf);
	if (r < 0) {
		padrone_free_words(w.v);
		return r;
	}
	*words = w.v;
	return w.n;
}
