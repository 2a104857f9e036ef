/* Thread-local data: cannot go into a code cache. */
__thread int cc_tls_value;
int cc_tls_bump(void) { return ++cc_tls_value; }
