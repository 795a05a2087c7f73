/* Compiled for x86_64 ELF with -fno-pic -mcmodel=small: the table address becomes an
 * R_X86_64_32S, which cannot hold a 64-bit address; the reader must reject it with a hint. */
#include "cpjit.h"

static const int64_t table[4] = {2, 3, 5, 7};

CPJIT_CC int64_t op_table32(struct cpjit_frame *frame, uint64_t *sp) {
  sp[-1] = (uint64_t)table[sp[-1] & 3];
  CPJIT_CONTINUE(frame, sp);
}
