/* padrone.h: the client API of libpadrone. */
#ifndef PADRONE_H
#define PADRONE_H

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, "MAJOR.MINOR.PATCH". */
const char *padrone_version(void);

#ifdef __cplusplus
}
#endif
#endif
