/* args.h: the one argument parser of padrone's commands (private to src/).
 *
 * A command declares its options (short letter, optional long name, whether
 * it takes a value) and how many positional arguments it accepts; the parser
 * turns a command's words into an opaque padrone_args read through
 * accessors, so no command ever walks argv itself. Options may come before,
 * between or after positional words; "--" ends them. Short options combine
 * ("-jf"), values attach or follow ("-bbpf", "-b bpf", "--backend=bpf",
 * "--backend bpf"); a repeated option keeps its last value.
 */
#ifndef PADRONE_SRC_ARGS_H
#define PADRONE_SRC_ARGS_H

#include <stdbool.h>
#include <stddef.h>

struct padrone_opt {
	char name;		/* the short letter, also the key for lookups */
	const char *long_name;	/* or NULL */
	const char *value;	/* the value's name in usage ("HZ"), NULL: a switch */
};

struct padrone_args;

/* Parse words[0..count) (without the command name) against opts (terminated
 * by an entry whose name is 0; NULL for none) and the positional bounds
 * [lower, upper] (upper < 0: no limit). Returns 0 and *out (free with
 * padrone_args_free), or -EINVAL with the reason in err, or -ENOMEM. */
int padrone_args_parse(const struct padrone_opt *opts, int lower, int upper,
		       int count, char *const words[], struct padrone_args **out,
		       char *err, size_t errlen);
void padrone_args_free(struct padrone_args *a);

/* Was option `name` given? Its value (the last one given), or NULL. */
bool padrone_args_has(const struct padrone_args *a, char name);
const char *padrone_args_get(const struct padrone_args *a, char name);
/* Positional arguments. */
int padrone_args_count(const struct padrone_args *a);
const char *padrone_args_value(const struct padrone_args *a, int i);

/* Write the message into err (if any) and return ret: the error helper of
 * the command layer. */
int padrone_errf(char *err, size_t errlen, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Number conversion with a ready error message ("HZ must be an integer
 * from 1 to 10000, not 'x'"). 0 or -EINVAL / -ERANGE. */
int padrone_parse_ulong(const char *what, const char *s, unsigned long min, unsigned long max,
			unsigned long *out, char *err, size_t errlen);
int padrone_parse_double(const char *what, const char *s, double min, double max,
			 double *out, char *err, size_t errlen);

/* Split a line into words as a shell would (quotes, backslash); ';' separates
 * commands, '#' starts a comment. Returns the number of words and a
 * malloc'd NULL-terminated vector in *words (free with padrone_free_words),
 * or -EINVAL with err (unterminated quote) or -ENOMEM. An unquoted ';'
 * (alone or ending a word) comes out as the word ";". */
int padrone_split_line(const char *line, char ***words, char *err, size_t errlen);
void padrone_free_words(char **words);

#endif
