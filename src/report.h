/* report.h: building a padrone_report (private to libpadrone).
 *
 * A report is a profile's ranking (profile/'s prof_hot, which counts and
 * ranks the samples) with what the session knows of the run; the session
 * makes it, clients read it through padrone.h. These constructors are hidden from
 * libpadrone.so's symbol table.
 */
#ifndef PADRONE_SRC_REPORT_H
#define PADRONE_SRC_REPORT_H

#include "profile/profile.h"
#include "src/padrone.h"

#define PADRONE_HIDDEN __attribute__((visibility("hidden")))

/* The report of a profile: hot's ranking (taken: freed with the report,
 * or at once on failure) with its totals, or, hot NULL (no samples), the
 * sampler's totals t. The report prints what hot counted and ranked.
 * NULL on failure. */
PADRONE_HIDDEN struct padrone_report *padrone_report_new(pid_t pid, const struct prof_totals *t,
							 struct prof_hot *hot);
/* The process exited (PADRONE_TARGET_EXITED) or exec'd during the profile:
 * the report holds what was sampled until then. PADRONE_OK: it did not. */
PADRONE_HIDDEN void padrone_report_set_ended(struct padrone_report *r, enum padrone_why ended);
/* Whether kernel code was left out of the samples (profile -u, or
 * perf_event_paranoid; also when the totals say the kernel was not
 * sampled), and the process's CPU time during the profile (user and
 * system, ns). */
PADRONE_HIDDEN void padrone_report_set_kernel(struct padrone_report *r, bool user_only,
					      uint64_t cpu_user_ns, uint64_t cpu_system_ns);
/* When the profile began (CLOCK_REALTIME, ns). */
PADRONE_HIDDEN void padrone_report_set_start(struct padrone_report *r, uint64_t start_ns);
PADRONE_HIDDEN void padrone_report_free(struct padrone_report *r);
/* The ranking with its symbolized chains (what the exports write, and
 * what cfg and replace -C read samples from), or NULL (r NULL, or no
 * samples). */
PADRONE_HIDDEN const struct prof_hot *padrone_report_hot(const struct padrone_report *r);

/* A symbol as C++ source spells it ("_ZN4node5StartEiPPc" is
 * "node::Start(int, char**)"; a suffix such as "@plt" is kept), for text
 * meant for people; JSON and commands keep symbol names. Returns buf, or
 * name itself when it is no mangled C++ name or cannot be demangled. */
PADRONE_HIDDEN const char *padrone_demangle(const char *name, char *buf, size_t size);

#endif
