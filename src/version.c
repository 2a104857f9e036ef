#include "config.h"
#include "src/git-version.h"
#include "src/padrone.h"
#include "src/version.h"

const char *padrone_version(void)
{
	return PACKAGE_VERSION;
}

const char *padrone_version_text(void)
{
	return *PADRONE_GIT_DESCRIBE ? PACKAGE_VERSION " (git " PADRONE_GIT_DESCRIBE ")" :
				       PACKAGE_VERSION;
}
