/* Built with -fno-pic: absolute 32-bit addresses, which a code cache high in
 * the address space cannot satisfy. */
static const char msg[] = "absolute";
const char *cc_nopic(void) { return msg; }
