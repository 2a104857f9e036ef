/* cfg [-dj] FUNC|ADDR: a function's control-flow graph, from the process's
 * memory. */
#include <stdlib.h>

#include "src/cmd.h"
#include "src/progress.h"

/* The command a format is printed for, as the progress line names it. */
static const char *command_of(enum padrone_cfg_format fmt)
{
	return fmt == PADRONE_CFG_DISAS ? "disas" : fmt == PADRONE_CFG_LOOPS ? "loops" : "cfg";
}

static const struct padrone_opt cfg_opts[] = {
	{ 'j', "json", NULL },
	{ 'd', "dot", NULL },
	{ 0 },
};

/* Shared by cfg, loops and disas: build the CFG of the function named by
 * the first argument and print it in fmt. */
int padrone_cmd_print_cfg(struct padrone_cmd_ctx *ctx, const char *what,
			  enum padrone_cfg_format fmt)
{
	struct padrone_cfg *c;
	struct padrone_ticker ticker;
	/* the first look at a big module (its symbols, then the code) can
	 * take seconds: a terminal is told it goes on */
	padrone_ticker_start(&ticker, ctx->err, command_of(fmt));
	int r = padrone_session__cfg(ctx->ctl->session, what, &c);
	padrone_ticker_stop(&ticker);
	if (r < 0)
		return padrone_cmd_session_error(ctx);
	char *text = padrone_cfg__format(c, fmt);
	int status = PADRONE_EXIT_OK;
	if (text)
		fputs(text, ctx->out);
	else
		status = padrone_cmd_error(ctx, PADRONE_EXIT_FAILURE, "out of memory");
	if (*padrone_cfg__error(c) && fmt != PADRONE_CFG_JSON && fmt != PADRONE_CFG_DOT)
		fprintf(ctx->err, "%s: warning: incomplete: %s\n", ctx->ctl->prog,
			padrone_cfg__error(c));
	free(text);
	padrone_cfg__free(c);
	return status;
}

static int cfg_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	bool json = padrone_args_has(args, 'j'), dot = padrone_args_has(args, 'd');
	if (json && dot)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "cfg: -j and -d exclude each other");
	return padrone_cmd_print_cfg(ctx, padrone_args_value(args, 0),
				     json ? PADRONE_CFG_JSON : dot ? PADRONE_CFG_DOT : PADRONE_CFG_TEXT);
}

const struct padrone_cmd_entry padrone_cmd_cfg_entry = {
	.name = "cfg",
	.usage = "[-dj] FUNC|ADDR",
	.summary = "show a function's control-flow graph, rebuilt from the process's memory",
	.help = "FUNC is a symbol name, or the sub_ADDR name reports give code without\n"
		"symbols; ADDR (0x...) may be anywhere inside the function.\n"
		"Lists blocks with their instructions, edges, jump tables, calls and loops;\n"
		"-j (--json) prints JSON, -d (--dot) Graphviz with loops as clusters and,\n"
		"after a profile, hot blocks shaded.",
	.opts = cfg_opts,
	.lower = 1,
	.upper = 1,
	.flags = PADRONE_CMD_TARGET | PADRONE_CMD_READ_ONLY,
	.exec = cfg_exec,
};
