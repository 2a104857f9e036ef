/* padroned: attach to one process and serve padrone's commands on a control
 * socket until told to detach (or SIGTERM/SIGINT), or run one profile and
 * print its report. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "src/version.h"
#include "src/client.h"
#include "src/cmd.h"
#include "src/continuous.h"
#include "src/export.h"
#include "src/server.h"

static struct padrone_ctl ctl;
static volatile sig_atomic_t got_signal;
static int signal_pipe[2] = { -1, -1 };

static const char usage_text[] =
	"usage: padroned --pid PID | --pidof NAME [--idle-timeout SECONDS]\n"
	"                [--every SECONDS --out DIR [--keep N] [--freq HZ] [--backend ring|bpf]]\n"
	"       padroned --pid PID --profile SECONDS [--freq HZ] [--backend ring|bpf]\n"
	"                [--force] [--json]\n"
	"       padroned --pid PID --cfg FUNC|0xADDR [--json | --dot]\n"
	"       padroned --pid PID --instrument FUNC[,FUNC...] --for SECONDS\n"
	"                [--mode exhaustive|sample] [--analyses LIST]\n"
	"                [--I1 S,A,L] [--D1 S,A,L] [--LL S,A,L]\n"
	"                [--duty ON_MS/OFF_MS | --max-overhead PCT] [--json | --output FILE]\n"
	"       padroned --help | --version\n"
	"Attaches to process PID and serves padrone's commands on a control socket\n"
	"until a 'detach' or SIGTERM/SIGINT; with --profile, samples it for SECONDS,\n"
	"prints the report and detaches; with --cfg, prints the control-flow graph\n"
	"of one function, read from the process's memory, and detaches; with\n"
	"--instrument, runs those functions instrumented for SECONDS, prints what\n"
	"they did (Cachegrind's events; --output FILE: a cachegrind.out), puts the\n"
	"originals back and detaches (--analyses as instrument's -a: blocks, record,\n"
	"refs, cache, edges, loops); --duty switches them on for ON_MS and off for\n"
	"OFF_MS in turn meanwhile, and the report estimates the whole time;\n"
	"--max-overhead chooses that cycle so the process loses about PCT% of its time.\n"
	"--pidof NAME serves the oldest process of that name, and the next one when\n"
	"it exits (a service restarted). --every writes a pprof file of each period\n"
	"of SECONDS into DIR while serving, keeping the newest N (default 100).\n"
	"--idle-timeout closes connections idle for SECONDS (default 600).\n";

struct options {
	unsigned long pid;
	const char *pidof;	/* --pidof NAME */
	const char *every, *out, *keep;	/* continuous profiling */
	struct padrone_continuous_opts cont;
	const char *profile, *freq, *backend;
	const char *cfg;	/* --cfg FUNC|0xADDR */
	/* --instrument FUNC[,FUNC...] --for SECONDS and its modifiers */
	const char *instrument, *seconds, *mode, *geometry[3], *output, *duty;
	const char *max_overhead;	/* --max-overhead PCT */
	const char *analyses;		/* --analyses LIST */
	double idle_timeout;	/* --idle-timeout SECONDS, or 0 */
	bool force, json, dot;
};

static void on_signal(int sig)
{
	int saved = errno;
	char c = (char)sig;

	got_signal = sig;
	padrone_ctl_interrupt(&ctl, true);	/* every signal we take means leave */
	if (write(signal_pipe[1], &c, 1) < 0) {
		/* the pipe is full: a wake-up is already pending */
	}
	errno = saved;
}

static int setup_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	padrone_prepare_signals();
	if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	return 0;
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "padroned: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'padroned --help'.\n");
	return PADRONE_EXIT_USAGE;
}

/* --every SECONDS --out DIR [--keep N]: serving mode only. */
static int continuous_options(struct options *o)
{
	char why[160];
	unsigned long v;

	if (!o->every && !o->out && !o->keep)
		return 0;
	if (!o->every || !o->out)
		return usage_error("%s", "--every SECONDS and --out DIR go together");
	if (o->profile || o->cfg)
		return usage_error("%s", "--every profiles while serving: not with --profile or --cfg");
	if (padrone_parse_double("--every SECONDS", o->every, 1, PADRONE_PROFILE_MAX_SECONDS,
				 &o->cont.every_s, why, sizeof(why)) < 0)
		return usage_error("%s", why);
	if (o->keep && padrone_parse_ulong("--keep N", o->keep, 1, 1000000, &v, why, sizeof(why)) < 0)
		return usage_error("%s", why);
	o->cont.keep = o->keep ? (unsigned)v : 0;
	if (o->freq && padrone_parse_ulong("--freq HZ", o->freq, 1, PADRONE_PROFILE_MAX_HZ, &v, why,
					   sizeof(why)) < 0)
		return usage_error("%s", why);
	o->cont.hz = o->freq ? (unsigned)v : 0;
	o->cont.dir = o->out;
	o->cont.force = o->force;
	if (o->backend && strcmp(o->backend, "bpf") == 0)
		o->cont.backend = PADRONE_BACKEND_BPF;
	return 0;
}

/* Long options without a letter. */
enum { OPT_I1 = 256, OPT_D1, OPT_LL, OPT_DUTY, OPT_MAX_OVERHEAD, OPT_ANALYSES };
/* --instrument's list: at most this many functions. */
#define PADRONED_MAX_FUNCS 64

/* --instrument FUNC[,FUNC...] --for SECONDS [--mode M] [--I1/--D1/--LL S,A,L]
 * [--json | --output FILE]: checked before the process is touched (the
 * geometries by the command, which refuses them before instrumenting). */
static int instrument_options(struct options *o)
{
	char why[160];
	double secs;

	if (!o->instrument)
		return usage_error("%s", "--for, --mode, --analyses, --I1, --D1, --LL, --duty, "
				   "--max-overhead and --output go with --instrument");
	if (o->profile || o->cfg || o->every)
		return usage_error("%s", "--instrument excludes --profile, --cfg and --every");
	if (o->freq || o->backend || o->force || o->dot)
		return usage_error("%s", "--freq, --backend, --force and --dot do not go with "
				   "--instrument");
	if (!o->seconds)
		return usage_error("%s", "--instrument needs --for SECONDS: how long to run "
				   "instrumented");
	if (padrone_parse_double("--for SECONDS", o->seconds, PADRONE_PROFILE_MIN_SECONDS,
				 PADRONE_PROFILE_MAX_SECONDS, &secs, why, sizeof why) < 0)
		return usage_error("%s", why);
	if (o->mode && strcmp(o->mode, "exhaustive") != 0 && strcmp(o->mode, "sample") != 0)
		return usage_error("--mode must be exhaustive or sample, not '%s'", o->mode);
	if (o->json && o->output)
		return usage_error("%s", "--output writes Cachegrind's format, not JSON: use "
				   "--json or --output");
	if (!*o->instrument || strstr(o->instrument, ",,") || *o->instrument == ',' ||
	    o->instrument[strlen(o->instrument) - 1] == ',')
		return usage_error("--instrument wants FUNC[,FUNC...], not '%s'", o->instrument);
	size_t commas = 0;
	for (const char *p = o->instrument; *p; p++)
		commas += *p == ',';
	if (commas >= PADRONED_MAX_FUNCS)
		return usage_error("--instrument takes at most %d functions", PADRONED_MAX_FUNCS);
	return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "profile", required_argument, NULL, 'P' },
		{ "freq", required_argument, NULL, 'F' },
		{ "backend", required_argument, NULL, 'b' },
		{ "force", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ "cfg", required_argument, NULL, 'C' },
		{ "dot", no_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "pidof", required_argument, NULL, 'N' },
		{ "every", required_argument, NULL, 'E' },
		{ "out", required_argument, NULL, 'O' },
		{ "keep", required_argument, NULL, 'K' },
		{ "idle-timeout", required_argument, NULL, 'I' },
		{ "instrument", required_argument, NULL, 'i' },
		{ "for", required_argument, NULL, 'T' },
		{ "mode", required_argument, NULL, 'm' },
		{ "I1", required_argument, NULL, OPT_I1 },
		{ "D1", required_argument, NULL, OPT_D1 },
		{ "LL", required_argument, NULL, OPT_LL },
		{ "output", required_argument, NULL, 'o' },
		{ "duty", required_argument, NULL, OPT_DUTY },
		{ "max-overhead", required_argument, NULL, OPT_MAX_OVERHEAD },
		{ "analyses", required_argument, NULL, OPT_ANALYSES },
		{ 0 },
	};
	char why[160];
	int c;

	while ((c = getopt_long(argc, argv, "p:P:F:b:fjC:DhVN:E:O:K:I:i:T:m:o:", longopts,
				NULL)) != -1) {
		switch (c) {
		case 'p':
			if (padrone_parse_ulong("PID", optarg, 1, INT_MAX, &o->pid, why, sizeof(why)) < 0)
				return usage_error("%s", why);
			break;
		case 'P': o->profile = optarg; break;
		case 'F': o->freq = optarg; break;
		case 'b': o->backend = optarg; break;
		case 'f': o->force = true; break;
		case 'j': o->json = true; break;
		case 'C': o->cfg = optarg; break;
		case 'D': o->dot = true; break;
		case 'N': o->pidof = optarg; break;
		case 'E': o->every = optarg; break;
		case 'O': o->out = optarg; break;
		case 'K': o->keep = optarg; break;
		case 'i': o->instrument = optarg; break;
		case 'T': o->seconds = optarg; break;
		case 'm': o->mode = optarg; break;
		case OPT_I1: case OPT_D1: case OPT_LL: o->geometry[c - OPT_I1] = optarg; break;
		case 'o': o->output = optarg; break;
		case OPT_DUTY: o->duty = optarg; break;
		case OPT_MAX_OVERHEAD: o->max_overhead = optarg; break;
		case OPT_ANALYSES: o->analyses = optarg; break;
		case 'I':
			if (padrone_parse_double("--idle-timeout SECONDS", optarg, 0.1, 86400 * 365,
						 &o->idle_timeout, why, sizeof(why)) < 0)
				return usage_error("%s", why);
			break;
		case 'h':
			fputs(usage_text, stdout);
			exit(PADRONE_EXIT_OK);
		case 'V':
			printf("padroned %s\n", padrone_version_text());
			exit(PADRONE_EXIT_OK);
		default:
			fputs(usage_text, stderr);
			return PADRONE_EXIT_USAGE;
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument: %s", argv[optind]);
	if (!o->pid && !o->pidof)
		return usage_error("%s", "--pid PID or --pidof NAME is required");
	if (o->pid && o->pidof)
		return usage_error("%s", "--pid and --pidof exclude each other");
	if (o->idle_timeout && (o->cfg || o->profile || o->instrument))
		return usage_error("%s", "--idle-timeout goes with serving, not --cfg, --profile "
				   "or --instrument");
	int st = continuous_options(o);
	if (st)
		return st;
	if (o->instrument || o->seconds || o->mode || o->output || o->duty || o->max_overhead ||
	    o->analyses || o->geometry[0] || o->geometry[1] || o->geometry[2])
		return instrument_options(o);
	if (o->cfg) {
		if (o->profile)
			return usage_error("%s", "--cfg and --profile exclude each other");
		if (o->freq || o->backend || o->force)
			return usage_error("%s", "--freq, --backend and --force go with --profile");
		if (o->json && o->dot)
			return usage_error("%s", "--json and --dot exclude each other");
		return 0;
	}
	if (o->dot)
		return usage_error("%s", "--dot goes with --cfg");
	if (!o->profile && !o->every && (o->freq || o->backend || o->force || o->json))
		return usage_error("%s", "--freq, --backend, --force and --json go with --profile");
	if (o->every && o->json)
		return usage_error("%s", "--json goes with --profile");
	/* Bad values are refused before the process is touched. */
	double secs;
	unsigned long hz;
	if (o->profile && padrone_parse_double("--profile SECONDS", o->profile,
					       PADRONE_PROFILE_MIN_SECONDS,
					       PADRONE_PROFILE_MAX_SECONDS, &secs, why, sizeof(why)) < 0)
		return usage_error("%s", why);
	if (o->freq && padrone_parse_ulong("--freq HZ", o->freq, 1, PADRONE_PROFILE_MAX_HZ, &hz,
					   why, sizeof(why)) < 0)
		return usage_error("%s", why);
	if (o->backend && strcmp(o->backend, "ring") != 0 && strcmp(o->backend, "bpf") != 0)
		return usage_error("unknown backend '%s': use ring or bpf", o->backend);
	return 0;
}

/* --cfg: the cfg command of padrone's table, run here. */
static int cfg_once(const struct options *o)
{
	char *words[] = { "cfg", o->json ? "--json" : o->dot ? "--dot" : "--", "--",
			  (char *)o->cfg, NULL };
	char **w = words;
	int n = 4;
	if (!o->json && !o->dot) {	/* no option: drop the placeholder */
		w = words + 1;
		w[0] = "cfg";
		n = 3;
	}
	int status = padrone_ctl_run(&ctl, n, w, stdout, stderr);
	fflush(stdout);
	return status;
}

/* --profile: the profile command of padrone's table, run here. A one-shot
 * mode is always a command of the table run once, with the modifiers turned
 * into its options. */
static int profile_once(const struct options *o)
{
	char *words[10];
	int n = 0;

	words[n++] = "profile";
	if (o->json)
		words[n++] = "--json";
	if (o->force)
		words[n++] = "--force";
	if (o->backend) {
		words[n++] = "--backend";
		words[n++] = (char *)o->backend;
	}
	words[n++] = "--";
	words[n++] = (char *)o->profile;
	if (o->freq)
		words[n++] = (char *)o->freq;
	words[n] = NULL;
	int status = padrone_ctl_run(&ctl, n, words, stdout, stderr);
	fflush(stdout);
	return status;
}

/* The instrument command of padrone's table with o's modifiers, output on
 * f. */
static int instrument_command(const struct options *o, FILE *f)
{
	static const char *const geometry_opts[] = { "--I1", "--D1", "--LL" };
	char *list = strdup(o->instrument), *save = NULL;
	char *words[24 + PADRONED_MAX_FUNCS];	/* 20 at most before the functions */
	int n = 0, status;

	if (!list) {
		fprintf(stderr, "padroned: out of memory\n");
		return PADRONE_EXIT_FAILURE;
	}
	words[n++] = "instrument";
	words[n++] = "--for";
	words[n++] = (char *)o->seconds;
	if (o->json)
		words[n++] = "--json";
	if (o->output) {	/* Cachegrind's format on f: instrument_once opened FILE */
		words[n++] = "--output";
		words[n++] = "-";
	}
	if (o->duty) {	/* checked by the command, before instrumenting */
		words[n++] = "--duty";
		words[n++] = (char *)o->duty;
	}
	if (o->max_overhead) {	/* checked by the command too */
		words[n++] = "--max-overhead";
		words[n++] = (char *)o->max_overhead;
	}
	if (o->mode) {
		words[n++] = "--mode";
		words[n++] = (char *)o->mode;
	}
	if (o->analyses) {	/* checked by the command, before instrumenting */
		words[n++] = "--analyses";
		words[n++] = (char *)o->analyses;
	}
	for (int i = 0; i < 3; i++)
		if (o->geometry[i]) {
			words[n++] = (char *)geometry_opts[i];
			words[n++] = (char *)o->geometry[i];
		}
	words[n++] = "--";
	for (char *fn = strtok_r(list, ",", &save); fn && n < (int)(sizeof words / sizeof *words) - 1;
	     fn = strtok_r(NULL, ",", &save))
		words[n++] = fn;
	words[n] = NULL;
	status = padrone_ctl_run(&ctl, n, words, f, stderr);
	free(list);
	return status;
}

struct instrument_run {
	const struct options *o;
	int status;
};

/* Into --output's file; a failure leaves no file, unless the process
 * ended during --for (its report is complete up to then, as profile's). */
static int write_instrument(FILE *f, void *arg, char *why, size_t len)
{
	struct instrument_run *x = arg;

	x->status = instrument_command(x->o, f);
	if (x->status && !((x->status == padrone_why_exit_status(PADRONE_TARGET_EXITED) ||
			    x->status == padrone_why_exit_status(PADRONE_TARGET_EXECED)) &&
			   ftell(f) > 0)) {
		snprintf(why, len, "the instrumentation failed");
		return -ECANCELED;
	}
	return 0;
}

/* --instrument: the instrument command with --for, its report on standard
 * output or, with --output, in FILE (renamed into place once complete, as
 * padrone's -o does). */
static int instrument_once(const struct options *o)
{
	struct instrument_run x = { o, PADRONE_EXIT_FAILURE };
	char why[512];
	int r;

	if (!o->output || strcmp(o->output, "-") == 0) {
		r = instrument_command(o, stdout);
		fflush(stdout);
		return r;
	}
	r = padrone_export_atomic(o->output, write_instrument, &x, why, sizeof why);
	if (r < 0 && r != -ECANCELED) {
		fprintf(stderr, "padroned: %s\n", why);
		return PADRONE_EXIT_FAILURE;
	}
	return x.status;
}

static bool one_shot_mode(const struct options *o)
{
	return o->profile || o->cfg || o->instrument;
}

/* --profile, --cfg or --instrument. A signal during the profile or
 * --for ends it early: the report of what it found is printed (and the
 * originals put back), and the signal named. */
static int one_shot(const struct options *o)
{
	int status = o->profile ? profile_once(o) : o->instrument ? instrument_once(o) :
		     cfg_once(o);

	if (got_signal)
		fprintf(stderr, "padroned: %s: detaching from process %d\n", strsignal(got_signal),
			(int)o->pid);
	return status;
}

/* A signal came while attaching: do nothing more (the one-shot modes
 * print nothing), detach and say so; 1 when the one-shot output is missing,
 * 0 in serving mode (as after a signal while serving). */
static int left_early(const struct options *o)
{
	if (!one_shot_mode(o))
		fprintf(stderr, "padroned: %s: detaching from process %d\n", strsignal(got_signal),
			(int)o->pid);
	else
		fprintf(stderr, "padroned: %s before the %s began: detaching from process %d\n",
			strsignal(got_signal), o->profile ? "profile" : o->cfg ? "cfg" :
			"instrumentation", (int)o->pid);
	return one_shot_mode(o) ? PADRONE_EXIT_FAILURE : PADRONE_EXIT_OK;
}

/* Serve until something other than the end of a profiling period wakes
 * the server; each period's file is written on the way. */
static int serve_profiling(struct padrone_server *srv, const struct options *o)
{
	struct padrone_continuous *cont = NULL;
	char why[512], path[4096];
	int r;

	if (o->every && padrone_continuous_start(ctl.session, &o->cont, &cont, why, sizeof(why)) < 0) {
		fprintf(stderr, "padroned: continuous profiling: %s\n", why);
		return -EINVAL;
	}
	int wake[] = { signal_pipe[0], padrone_session__event_fd(ctl.session),
		       cont ? padrone_continuous_fd(cont) : -1 };
	while ((r = padrone_server_run(srv, &ctl, wake, cont ? 3 : 2)) == 3) {
		if (padrone_continuous_rotate(cont, path, sizeof(path), why, sizeof(why)) < 0)
			fprintf(stderr, "padroned: continuous profiling: %s\n", why);
	}
	/* a signal (SIGTERM from systemd) keeps the period under way */
	padrone_continuous_stop(cont, r == 1);
	return r;
}

/* Serve the control socket until detach, a signal, or the target's end. */
static int serve(pid_t pid, const struct options *o)
{
	struct padrone_server *srv;
	char why[512];
	int r = padrone_server_open(pid, &srv, why, sizeof(why));

	if (r < 0) {
		fprintf(stderr, "padroned: %s\n", why);
		return PADRONE_EXIT_FAILURE;
	}
	if (o->idle_timeout)
		padrone_server_set_idle_timeout(srv, o->idle_timeout);
	int n = padrone_session__thread_count(ctl.session);
	printf("padroned: serving process %d (%d thread%s) on %s\n", (int)pid, n,
	       n == 1 ? "" : "s", padrone_server_path(srv));
	if (o->every)
		printf("padroned: a profile every %g s into %s\n", o->cont.every_s, o->cont.dir);
	fflush(stdout);
	r = serve_profiling(srv, o);
	padrone_server_close(srv);
	if (r == -EINVAL)
		return PADRONE_EXIT_USAGE;
	if (r == 1) {
		fprintf(stderr, "padroned: %s: detaching from process %d\n", strsignal(got_signal),
			(int)pid);
	} else if (r == 2) {
		/* the process's end or exec ends the service: its status, as in
		 * the one-shot modes (9, 10) */
		enum padrone_why end = padrone_session__target_state(ctl.session);
		fprintf(stderr, "padroned: process %d %s\n", (int)pid,
			end == PADRONE_TARGET_EXECED ? "exec'd another program" : "exited");
		return padrone_why_exit_status(end);
	} else if (r < 0) {
		fprintf(stderr, "padroned: %s\n", strerror(-r));
	}
	return r < 0 ? PADRONE_EXIT_FAILURE : PADRONE_EXIT_OK;
}

/* One padroned per process: a second one points at the first (which
 * holds the process: attaching would fail). 0 when none serves pid, else
 * an exit status. */
static int already_served(pid_t pid)
{
	pid_t server;
	int r = padrone_client_probe(&ctl, pid, &server, stderr);

	if (r == -ENOENT)
		return 0;
	if (r == 0)
		fprintf(stderr, "padroned: process %d is already served by padroned %d on %s: "
			"send it commands with 'padrone -p %d COMMAND' (stop it with "
			"'padrone -p %d detach')\n", (int)pid, (int)server, ctl.remote_path,
			(int)pid, (int)pid);
	return r == 0 ? PADRONE_EXIT_SERVED : r;
}

/* Attach to o->pid, do what was asked, detach. */
static int run_on(const struct options *o)
{
	int status = already_served((pid_t)o->pid);

	if (status == PADRONE_EXIT_OK)
		status = padrone_ctl_attach(&ctl, (pid_t)o->pid, stdout, stderr);

	if (status == PADRONE_EXIT_OK) {
		if (got_signal)
			status = left_early(o);
		else if (one_shot_mode(o))
			status = one_shot(o);
		else
			status = serve((pid_t)o->pid, o);
		if (padrone_session__attached(ctl.session) &&
		    padrone_session__detach(ctl.session) < 0) {
			fprintf(stderr, "padroned: %s\n", padrone_session__errmsg(ctl.session));
			status = padrone_session__exit_status(ctl.session);
		}
	}
	return status;
}

/* Wait (until a signal) for a process named name; 0 and its PID, or -EINTR. */
static int wait_for_name(const char *name, pid_t *pid, bool *said)
{
	while (!got_signal) {
		if (padrone_pidof(name, pid) == 0)
			return 0;
		if (!*said)
			fprintf(stderr, "padroned: waiting for a process named %s\n", name);
		*said = true;
		struct pollfd pfd = { .fd = signal_pipe[0], .events = POLLIN };
		poll(&pfd, 1, 500);
	}
	return -EINTR;
}

/* --pidof NAME: serve the process of that name, and after it exits or
 * exec's, the next one (a service restarted), until a signal or a detach. */
static int follow(struct options *o)
{
	int status = PADRONE_EXIT_OK;
	bool said = false;
	pid_t pid;

	while (wait_for_name(o->pidof, &pid, &said) == 0) {
		o->pid = (unsigned long)pid;
		said = false;
		status = run_on(o);
		bool ended = status == padrone_why_exit_status(PADRONE_TARGET_EXITED) ||
			     status == padrone_why_exit_status(PADRONE_TARGET_EXECED) ||
			     status == padrone_why_exit_status(PADRONE_NO_PROCESS) ||
			     status == padrone_why_exit_status(PADRONE_ZOMBIE);
		if (!ended || got_signal || one_shot_mode(o))
			return status;
		/* gone before it could be served, or after: the next one */
		status = PADRONE_EXIT_OK;
	}
	return got_signal ? PADRONE_EXIT_OK : status;
}

int main(int argc, char **argv)
{
	struct options o = { 0 };
	int status = parse_options(argc, argv, &o);

	if (status)
		return status;
	if (setup_signals() < 0 || padrone_ctl_init(&ctl, "padroned", true) < 0) {
		fprintf(stderr, "padroned: %s\n", strerror(errno));
		return PADRONE_EXIT_FAILURE;
	}
	status = o.pidof ? follow(&o) : run_on(&o);
	padrone_ctl_fini(&ctl);
	return status;
}
