/* report.c: a profile's ranked functions, and their JSON and text forms. */
#include "src/report.h"

#include <dlfcn.h>
#include <errno.h>
#include <json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct padrone_report {
	pid_t pid;
	struct prof_totals tot;	/* samples, lost, event, backend, sampling... */
	struct prof_hot *hot;	/* the ranking: what is counted is printed */
	struct padrone_function *fn;	/* the public view of hot's functions */
	size_t n;
	enum padrone_why ended;
	bool user_only;
	uint64_t cpu_user_ns, cpu_system_ns, start_ns;
};

/* How the threads were covered: "per-cpu", "per-thread" (ring) or
 * "in-kernel" (bpf, per CPU too). */
static const char *sampling_name(const struct prof_totals *t)
{
	if (t->backend == PROF_BACKEND_BPF)
		return "in-kernel";
	return t->ring_mode == PROF_RING_AUTO ? "" : prof_ring_mode_name(t->ring_mode);
}

/* The public rows point into hot's functions: nothing is copied but the
 * bounds' name. */
static int view_functions(struct padrone_report *r)
{
	size_t n = r->hot ? prof_hot__count(r->hot) : 0;

	r->fn = calloc(n ? n : 1, sizeof(*r->fn));
	if (!r->fn)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct prof_func *f = prof_hot__at(r->hot, i);
		r->fn[i] = (struct padrone_function){
			.name = f->name, .module = f->module, .start = f->start, .end = f->end,
			.self = f->self, .inclusive = f->inclusive, .self_pct = f->self_pct,
			.bounds = prof_bounds_name(f->bounds),
		};
	}
	r->n = n;
	return 0;
}

struct padrone_report *padrone_report_new(pid_t pid, const struct prof_totals *t,
					  struct prof_hot *hot)
{
	struct padrone_report *r = calloc(1, sizeof(*r));

	if (!r) {
		prof_hot__free(hot);
		return NULL;
	}
	r->pid = pid;
	r->hot = hot;
	r->tot = hot ? *prof_hot__totals(hot) : *t;
	if (view_functions(r) < 0) {
		padrone_report_free(r);
		return NULL;
	}
	return r;
}

void padrone_report_set_ended(struct padrone_report *r, enum padrone_why ended)
{
	r->ended = ended;
}

void padrone_report_free(struct padrone_report *r)
{
	if (!r)
		return;
	prof_hot__free(r->hot);
	free(r->fn);
	free(r);
}

void padrone_report_set_kernel(struct padrone_report *r, bool user_only, uint64_t cpu_user_ns,
			       uint64_t cpu_system_ns)
{
	r->user_only = user_only || !r->tot.kernel;
	r->cpu_user_ns = cpu_user_ns;
	r->cpu_system_ns = cpu_system_ns;
}

void padrone_report_set_start(struct padrone_report *r, uint64_t start_ns)
{
	r->start_ns = start_ns;
}

const struct prof_hot *padrone_report_hot(const struct padrone_report *r)
{
	return r ? r->hot : NULL;
}

pid_t padrone_report__pid(const struct padrone_report *r) { return r->pid; }
const char *padrone_report__event(const struct padrone_report *r) { return r->tot.event; }
unsigned padrone_report__frequency_hz(const struct padrone_report *r) { return r->tot.freq_hz; }
double padrone_report__duration_s(const struct padrone_report *r) { return (double)r->tot.duration_ns / 1e9; }
uint64_t padrone_report__samples(const struct padrone_report *r) { return r->tot.samples; }
uint64_t padrone_report__lost(const struct padrone_report *r) { return r->tot.lost; }
uint64_t padrone_report__throttled(const struct padrone_report *r) { return r->tot.throttled; }
bool padrone_report__user_only(const struct padrone_report *r) { return r->user_only; }
uint64_t padrone_report__kernel_samples(const struct padrone_report *r) { return r->tot.kernel_samples; }
double padrone_report__cpu_user_s(const struct padrone_report *r) { return (double)r->cpu_user_ns / 1e9; }
double padrone_report__cpu_system_s(const struct padrone_report *r) { return (double)r->cpu_system_ns / 1e9; }
uint64_t padrone_report__start_ns(const struct padrone_report *r) { return r->start_ns; }
const char *padrone_report__backend(const struct padrone_report *r) { return prof_backend_name(r->tot.backend); }
const char *padrone_report__fallback(const struct padrone_report *r) { return r->tot.fell_back ? r->tot.fallback_reason : ""; }
const char *padrone_report__sampling(const struct padrone_report *r) { return sampling_name(&r->tot); }
const char *padrone_report__sampling_why(const struct padrone_report *r) { return r->tot.ring_mode_reason; }
enum padrone_why padrone_report__ended(const struct padrone_report *r) { return r->ended; }
size_t padrone_report__count(const struct padrone_report *r) { return r->n; }

const struct padrone_function *padrone_report__function(const struct padrone_report *r, size_t i)
{
	return i < r->n ? &r->fn[i] : NULL;
}

/* The share of the process's CPU time the kernel accounted as system time
 * during the profile, in percent (0 when it used none). */
static double system_pct(const struct padrone_report *r)
{
	uint64_t cpu = r->cpu_user_ns + r->cpu_system_ns;
	return cpu ? 100.0 * (double)r->cpu_system_ns / (double)cpu : 0.0;
}

/* ------------------------------------------------------------------ JSON */

static int put(struct json_object *o, const char *key, struct json_object *v)
{
	if (!v)
		return -ENOMEM;
	if (json_object_object_add(o, key, v) < 0) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

static struct json_object *hex(uint64_t v)
{
	char buf[24];
	snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)v);
	return json_object_new_string(buf);
}

/* A double printed with a fixed number of decimals, not %.17g noise. */
static struct json_object *fixed(double v, int decimals)
{
	char buf[48];
	snprintf(buf, sizeof(buf), "%.*f", decimals, v);
	return json_object_new_double_s(v, buf);
}

static struct json_object *function_json(const struct padrone_function *f)
{
	struct json_object *o = json_object_new_object();
	int r = 0;

	if (!o)
		return NULL;
	r |= put(o, "name", json_object_new_string(f->name));
	r |= put(o, "module", json_object_new_string(f->module));
	r |= put(o, "start", hex(f->start));
	r |= put(o, "end", hex(f->end));
	r |= put(o, "self", json_object_new_uint64(f->self));
	r |= put(o, "self_pct", fixed(f->self_pct, 2));
	r |= put(o, "inclusive", json_object_new_uint64(f->inclusive));
	r |= put(o, "bounds", json_object_new_string(f->bounds));
	if (r) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static struct json_object *report_json(const struct padrone_report *r, size_t max)
{
	struct json_object *o = json_object_new_object();
	struct json_object *fns = json_object_new_array();
	int e = 0;

	if (!o || !fns) {
		json_object_put(o);
		json_object_put(fns);
		return NULL;
	}
	e |= put(o, "pid", json_object_new_int(r->pid));
	e |= put(o, "event", json_object_new_string(r->tot.event));
	e |= put(o, "frequency_hz", json_object_new_uint64(r->tot.freq_hz));
	e |= put(o, "duration_s", fixed(padrone_report__duration_s(r), 3));
	e |= put(o, "samples", json_object_new_uint64(r->tot.samples));
	e |= put(o, "lost", json_object_new_uint64(r->tot.lost));
	e |= put(o, "throttled", json_object_new_uint64(r->tot.throttled));
	e |= put(o, "user_only", json_object_new_boolean(r->user_only));
	e |= put(o, "kernel_samples", json_object_new_uint64(r->tot.kernel_samples));
	e |= put(o, "cpu_user_s", fixed((double)r->cpu_user_ns / 1e9, 3));
	e |= put(o, "cpu_system_s", fixed((double)r->cpu_system_ns / 1e9, 3));
	e |= put(o, "backend", json_object_new_string(padrone_report__backend(r)));
	e |= put(o, "sampling", json_object_new_string(padrone_report__sampling(r)));
	if (r->ended == PADRONE_OK)
		e |= json_object_object_add(o, "ended", NULL) < 0 ? -ENOMEM : 0;
	else
		e |= put(o, "ended", json_object_new_string(padrone_why_name(r->ended)));
	size_t n = max && max < r->n ? max : r->n;
	for (size_t i = 0; i < n && !e; i++) {
		struct json_object *f = function_json(&r->fn[i]);
		if (!f || json_object_array_add(fns, f) < 0) {
			json_object_put(f);
			e = -ENOMEM;
		}
	}
	e |= put(o, "functions", fns);
	if (e) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

char *padrone_report__json(const struct padrone_report *r, size_t max)
{
	struct json_object *o = report_json(r, max);
	char *s;

	if (!o) {
		errno = ENOMEM;
		return NULL;
	}
	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
						  JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	if (!s)
		errno = ENOMEM;
	return s;
}

/* -------------------------------------------------------------- demangle */

typedef char *(*cxa_demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);
static cxa_demangle_fn cxa_demangle;

/* libstdc++'s demangler, loaded at first use: padrone is C, and a process
 * without libstdc++ just shows mangled names. The handle stays open. */
static void find_demangler(void)
{
	void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);

	if (h)
		cxa_demangle = (cxa_demangle_fn)dlsym(h, "__cxa_demangle");
}

const char *padrone_demangle(const char *name, char *buf, size_t size)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	char mangled[1024];

	if (strncmp(name, "_Z", 2) != 0 || !size)
		return name;
	pthread_once(&once, find_demangler);
	const char *at = strchr(name, '@');
	size_t len = at ? (size_t)(at - name) : strlen(name);
	if (!cxa_demangle || len >= sizeof mangled)
		return name;
	memcpy(mangled, name, len);
	mangled[len] = '\0';
	int status = -1;
	char *plain = cxa_demangle(mangled, NULL, NULL, &status);
	if (status != 0 || !plain) {
		free(plain);
		return name;
	}
	snprintf(buf, size, "%s%s", plain, at ? at : "");
	free(plain);
	return buf;
}

/* ------------------------------------------------------------------ text */

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* How the threads were sampled, and what that misses. */
static void say_sampling(FILE *f, const struct padrone_report *r)
{
	const char *sampling = padrone_report__sampling(r), *backend = padrone_report__backend(r);

	if (!strcmp(sampling, "per-cpu"))
		fprintf(f, "# sampled per CPU (%s backend): every thread, however short-lived\n",
			backend);
	else if (!strcmp(sampling, "per-thread"))
		fprintf(f, "# sampled per thread (%s backend): threads that live less than a "
			"sampling period are missed%s%s\n", backend, *r->tot.ring_mode_reason ? "; " : "",
			r->tot.ring_mode_reason);
	else if (*sampling)
		fprintf(f, "# sampled per CPU in the kernel (%s backend)\n", backend);
}

/* Samples expected from the process's CPU time at the rate (what a timer
 * that runs while it does would take). */
static double expected_samples(const struct padrone_report *r)
{
	uint64_t cpu = r->cpu_user_ns + (r->user_only ? 0 : r->cpu_system_ns);

	return (double)cpu / 1e9 * (double)r->tot.freq_hz;
}

/* No samples, or far fewer than its CPU time gives: say why it may be. The
 * kernel accounts CPU time in ticks, so only a clear gap is told. */
static void explain_few_samples(FILE *f, const struct padrone_report *r)
{
	double want = expected_samples(r);
	bool per_thread = !strcmp(padrone_report__sampling(r), "per-thread");

	if (!r->tot.samples && want < 20)
		fprintf(f, "# no samples: no thread of process %d ran on a CPU while it was sampled "
			"(sleeping, blocked or stopped); is the busy process a child of it?\n",
			(int)r->pid);
	else if (per_thread && want >= 20 && (double)r->tot.samples * 4 < want)
		fprintf(f, "# only %llu samples for ~%.2f s of CPU time (~%.0f at %u Hz): threads "
			"that live less than a sampling period are not seen by per-thread events "
			"(each fires only after a whole period of its own thread's time); per-CPU "
			"events (CAP_PERFMON) or -b bpf sample them\n",
			(unsigned long long)r->tot.samples, want / (double)r->tot.freq_hz, want, r->tot.freq_hz);
	else if (!r->tot.samples)
		fprintf(f, "# no samples, though process %d used ~%.2f s of CPU time meanwhile "
			"(samples lost, or the kernel throttled sampling?)\n", (int)r->pid,
			want / (double)r->tot.freq_hz);
}

static void say_ended(FILE *f, const struct padrone_report *r)
{
	if (r->ended == PADRONE_TARGET_EXITED)
		fprintf(f, "# process %d exited during the profile: this is what was sampled "
			"until then\n", (int)r->pid);
	else if (r->ended == PADRONE_TARGET_EXECED)
		fprintf(f, "# process %d exec'd another program during the profile: this is "
			"what was sampled until then\n", (int)r->pid);
}

char *padrone_report__text(const struct padrone_report *r, size_t max)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fprintf(f, "# pid %d: %llu samples of %s at %u Hz in %.2f s, %llu lost", (int)r->pid,
		(unsigned long long)r->tot.samples, r->tot.event, r->tot.freq_hz, padrone_report__duration_s(r),
		(unsigned long long)r->tot.lost);
	if (r->tot.throttled)	/* perf's words: the kernel cut the rate */
		fprintf(f, ", throttled %llu times (the kernel lowered the rate)",
			(unsigned long long)r->tot.throttled);
	fputc('\n', f);
	if (r->user_only)
		fprintf(f, "# kernel: not sampled (user code only)");
	else
		fprintf(f, "# kernel: %.1f%% of the samples",
			r->tot.samples ? 100.0 * (double)r->tot.kernel_samples / (double)r->tot.samples : 0.0);
	fprintf(f, "; CPU time %.2f s user, %.2f s system (%.1f%% in the kernel)\n",
		(double)r->cpu_user_ns / 1e9, (double)r->cpu_system_ns / 1e9, system_pct(r));
	say_sampling(f, r);
	fprintf(f, "#\n# %8s  %8s  %9s  %-32s  %-20s  %s\n", "Overhead", "Samples", "Inclusive",
		"Function", "Module", "Bounds");
	size_t n = max && max < r->n ? max : r->n;
	for (size_t i = 0; i < n; i++) {
		const struct padrone_function *fn = &r->fn[i];
		char plain[512];
		fprintf(f, "  %8.2f%%  %8llu  %9llu  %-32s  %-20s  %s\n", fn->self_pct,
			(unsigned long long)fn->self, (unsigned long long)fn->inclusive,
			padrone_demangle(fn->name, plain, sizeof plain), base_name(fn->module),
			fn->bounds);
	}
	if (n < r->n)
		fprintf(f, "# ... %zu more functions\n", r->n - n);
	explain_few_samples(f, r);
	say_ended(f, r);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
