/* loops FUNC|ADDR: a function's loop forest. */
#include <stdlib.h>

#include "src/cmd.h"
#include "src/report.h"

static void json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', out);
		if ((unsigned char)*s >= 0x20)
			fputc(*s, out);
	}
	fputc('"', out);
}

int padrone_cmd_print_hot_loops(struct padrone_cmd_ctx *ctx, bool json, size_t max)
{
	struct padrone_hot_loop_list *l;

	if (padrone_session__hot_loops(ctx->ctl->session, max, &l) < 0)
		return padrone_cmd_session_error(ctx);
	if (json)
		fputc('[', ctx->out);
	for (size_t i = 0; i < l->count; i++) {
		const struct padrone_hot_loop *h = &l->items[i];
		if (json) {
			fprintf(ctx->out, "%s{\"function\":", i ? "," : "");
			json_string(ctx->out, h->function);
			fprintf(ctx->out, ",\"entry\":\"%#lx\",\"samples\":%lu,\"loop\":",
				(unsigned long)h->entry, (unsigned long)h->function_samples);
			if (h->header)
				fprintf(ctx->out, "{\"header\":\"%#lx\",\"depth\":%u,\"blocks\":%u,"
					"\"irreducible\":%s,\"samples\":%lu}",
					(unsigned long)h->header, h->depth, h->blocks,
					h->irreducible ? "true" : "false", (unsigned long)h->samples);
			else
				fputs("null", ctx->out);
			fputc('}', ctx->out);
			continue;
		}
		char plain[512];
		fprintf(ctx->out, "%8lu  %-32s ", (unsigned long)h->function_samples,
			padrone_demangle(h->function, plain, sizeof plain));
		if (h->header)
			fprintf(ctx->out, "loop %#lx depth %u, %u blocks%s: %lu samples (%.0f%%)\n",
				(unsigned long)h->header, h->depth, h->blocks,
				h->irreducible ? ", irreducible" : "", (unsigned long)h->samples,
				h->function_samples ? 100.0 * (double)h->samples /
							      (double)h->function_samples : 0.0);
		else
			fprintf(ctx->out, "no loop\n");
	}
	if (json)
		fputs("]\n", ctx->out);
	padrone_hot_loop_list__free(l);
	return PADRONE_EXIT_OK;
}

static int loops_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	return padrone_cmd_print_cfg(ctx, padrone_args_value(args, 0), PADRONE_CFG_LOOPS);
}

const struct padrone_cmd_entry padrone_cmd_loops_entry = {
	.name = "loops",
	.usage = "FUNC|ADDR",
	.summary = "show a function's loops: nesting, irreducible ones, samples",
	.help = "One line per loop, nested loops indented under their parent; after a\n"
		"profile, the samples in each loop (nested loops included).",
	.lower = 1,
	.upper = 1,
	.flags = PADRONE_CMD_TARGET | PADRONE_CMD_READ_ONLY,
	.exec = loops_exec,
};
