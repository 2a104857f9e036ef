/* report.h: building a padrone_report (private to libpadrone).
 *
 * Reports are built by the session from a profile's results and read by
 * clients through padrone.h. These constructors are hidden from
 * libpadrone.so's symbol table.
 */
#ifndef PADRONE_SRC_REPORT_H
#define PADRONE_SRC_REPORT_H

#include "src/padrone.h"

#define PADRONE_HIDDEN __attribute__((visibility("hidden")))

/* NULL + errno on failure. */
PADRONE_HIDDEN struct padrone_report *padrone_report_new(pid_t pid, const char *event,
							 unsigned hz, double duration_s,
							 uint64_t samples, uint64_t lost);
/* Copies the strings. self_pct is computed from the report's samples.
 * 0 or -ENOMEM. */
PADRONE_HIDDEN int padrone_report_add(struct padrone_report *r, const char *name,
				      const char *module, uint64_t start, uint64_t end,
				      uint64_t self, uint64_t inclusive, const char *bounds);
/* Which backend ran, and why not the one asked for (NULL/"": it was).
 * 0 or -ENOMEM. */
PADRONE_HIDDEN int padrone_report_set_backend(struct padrone_report *r, const char *backend,
					      const char *fallback);
/* How the threads were covered ("per-cpu", "per-thread", "in-kernel") and,
 * when per-thread ran for want of per-cpu, why. 0 or -ENOMEM. */
PADRONE_HIDDEN int padrone_report_set_sampling(struct padrone_report *r, const char *sampling,
					       const char *why);
/* The process exited (PADRONE_TARGET_EXITED) or exec'd during the profile:
 * the report holds what was sampled until then. PADRONE_OK: it did not. */
PADRONE_HIDDEN void padrone_report_set_ended(struct padrone_report *r, enum padrone_why ended);
/* How often the kernel throttled sampling during the profile. */
PADRONE_HIDDEN void padrone_report_set_throttled(struct padrone_report *r, uint64_t throttled);
/* Whether kernel code was left out of the samples (profile -u, or
 * perf_event_paranoid), how many samples were in the kernel, and the
 * process's CPU time during the profile (user and system, ns). */
PADRONE_HIDDEN void padrone_report_set_kernel(struct padrone_report *r, bool user_only,
					      uint64_t kernel_samples, uint64_t cpu_user_ns,
					      uint64_t cpu_system_ns);
/* When the profile began (CLOCK_REALTIME, ns). */
PADRONE_HIDDEN void padrone_report_set_start(struct padrone_report *r, uint64_t start_ns);
/* Order hottest first: self descending, then inclusive, then address. */
PADRONE_HIDDEN void padrone_report_sort(struct padrone_report *r);
PADRONE_HIDDEN void padrone_report_free(struct padrone_report *r);

/* A symbol as C++ source spells it ("_ZN4node5StartEiPPc" is
 * "node::Start(int, char**)"; a suffix such as "@plt" is kept), for text
 * meant for people; JSON and commands keep symbol names. Returns buf, or
 * name itself when it is no mangled C++ name or cannot be demangled. */
PADRONE_HIDDEN const char *padrone_demangle(const char *name, char *buf, size_t size);

#endif
