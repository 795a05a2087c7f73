#include "cpjit.h"

/* A global register variable: clang reads and writes x18 without inline assembly (legal
 * where x18 is reserved; the Linux row passes -ffixed-x18 to allow it). */
register uint64_t x18 __asm__("x18");

CPJIT_CC int64_t op_clobbers_x18(struct cpjit_frame *frame, uint64_t *sp) {
  sp[0] = x18;
  x18 = 1;
  CPJIT_CONTINUE(frame, sp + 1);
}
