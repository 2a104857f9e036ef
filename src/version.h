/* version.h: what --version prints (private to libpadrone's programs). */
#ifndef PADRONE_SRC_VERSION_H
#define PADRONE_SRC_VERSION_H

#include "src/report.h"	/* PADRONE_HIDDEN */

/* "0.1.0 (git v0.1-12-gabcdef0-dirty)": the package version and the git
 * describe of the tree built ("0.1.0" outside a git checkout). */
PADRONE_HIDDEN const char *padrone_version_text(void);

#endif
