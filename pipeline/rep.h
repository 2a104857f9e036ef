/* rep.h: placeholder holding only the types agreed with the rep engineer
 * (issue 4). Replaced by the real rep.h when it lands on main. */
#ifndef PADRONE_REP_H
#define PADRONE_REP_H

#include <stdint.h>

enum rep_ref_type { REP_REF_READ = 1, REP_REF_WRITE = 2, REP_REF_MODIFY = 3, REP_REF_INSTR = 4 };

/* One recovered memory reference: 24 bytes. */
struct rep_ref {
	uint64_t pc;
	uint64_t addr;
	uint32_t size;
	uint8_t type;		/* enum rep_ref_type */
	uint8_t pad[3];
};

#endif
