/* bt [-j] [TID]: a thread's call stack, and where and why its walk ended. */
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>

#include "src/cmd.h"
#include "src/report.h"

static const struct padrone_opt bt_opts[] = {
	{ 'j', "json", NULL },
	{ 0 },
};

static json_object *hex(uint64_t v)
{
	char buf[24];
	snprintf(buf, sizeof buf, "0x%" PRIx64, v);
	return json_object_new_string(buf);
}

/* {"frames":[{"pc","name","offset","module"}],"end":{"complete","reason",
 * "frame","pc","sp","why"}} */
static void print_json(struct padrone_cmd_ctx *ctx, const struct padrone_frame_list *l)
{
	const struct padrone_frame *f = l->items;
	const struct padrone_backtrace_end *end = &l->end;
	size_t n = l->count;
	json_object *top = json_object_new_object(), *frames = json_object_new_array();
	json_object *e = json_object_new_object();

	for (size_t i = 0; i < n; i++) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "pc", hex(f[i].pc));
		json_object_object_add(o, "name", *f[i].name ? json_object_new_string(f[i].name) : NULL);
		json_object_object_add(o, "offset", hex(f[i].offset));
		json_object_object_add(o, "module", *f[i].module ?
				       json_object_new_string(f[i].module) : NULL);
		json_object_array_add(frames, o);
	}
	json_object_object_add(top, "frames", frames);
	json_object_object_add(e, "complete", json_object_new_boolean(end->complete));
	json_object_object_add(e, "reason", json_object_new_string(end->reason));
	json_object_object_add(e, "frame", json_object_new_int64((int64_t)end->frame));
	json_object_object_add(e, "pc", hex(end->pc));
	json_object_object_add(e, "sp", hex(end->sp));
	json_object_object_add(e, "why", end->complete ? NULL : json_object_new_string(end->why));
	json_object_object_add(top, "end", e);
	fprintf(ctx->out, "%s\n", json_object_to_json_string_ext(top, JSON_C_TO_STRING_PLAIN));
	json_object_put(top);
}

static void print_text(struct padrone_cmd_ctx *ctx, const struct padrone_frame_list *l)
{
	const struct padrone_frame *f = l->items;

	for (size_t i = 0; i < l->count; i++) {
		char plain[512];
		fprintf(ctx->out, "#%-3zu 0x%016llx in %s", i, (unsigned long long)f[i].pc,
			*f[i].name ? padrone_demangle(f[i].name, plain, sizeof plain) : "??");
		if (*f[i].name && f[i].offset)
			fprintf(ctx->out, "+0x%llx", (unsigned long long)f[i].offset);
		fprintf(ctx->out, *f[i].module ? " (%s)\n" : "\n", f[i].module);
	}
	if (!l->end.complete)
		fprintf(ctx->out, "the walk stopped at #%zu: %s\n", l->end.frame, l->end.why);
}

static int bt_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	const char *arg = padrone_args_value(args, 0);
	struct padrone_frame_list *l;
	unsigned long tid = 0;
	char why[160];

	if (arg && padrone_parse_ulong("TID", arg, 1, INT_MAX, &tid, why, sizeof(why)) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	if (padrone_session__backtrace(ctx->ctl->session, (pid_t)tid, &l) < 0)
		return padrone_cmd_session_error(ctx);
	if (padrone_args_has(args, 'j'))
		print_json(ctx, l);
	else
		print_text(ctx, l);
	padrone_frame_list__free(l);
	return PADRONE_EXIT_OK;
}

const struct padrone_cmd_entry padrone_cmd_bt_entry = {
	.name = "bt",
	.alias = "backtrace",
	.usage = "[-j] [TID]",
	.summary = "show a thread's call stack (default: the main thread)",
	.help = "Stops the process for the time of the walk. Frames come from unwind\n"
		"information (.eh_frame) read from the process and the files it maps;\n"
		"where it ends before the outermost frame (code without it: JIT code,\n"
		"the code cache, hand-written assembly) the last line says where and\n"
		"why. Code of the code cache is named for what it is (\"replacement of\n"
		"mid\"). -j (--json) prints {\"frames\":[{\"pc\",\"name\",\"offset\",\"module\"}],\n"
		"\"end\":{\"complete\",\"reason\",\"frame\",\"pc\",\"sp\",\"why\"}}.",
	.opts = bt_opts,
	.lower = 0,
	.upper = 1,
	.flags = PADRONE_CMD_TARGET | PADRONE_CMD_READ_ONLY,
	.exec = bt_exec,
};
