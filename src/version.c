#include "config.h"
#include "src/padrone.h"

const char *padrone_version(void)
{
	return PACKAGE_VERSION;
}
