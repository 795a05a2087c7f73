#include "cpjit.h"

/* A `ret` in the middle of an op: the toolchain must name op_asm_ret. */
CPJIT_CC int64_t op_asm_ret(struct cpjit_frame *frame, uint64_t *sp) {
  __asm__ volatile("ret");
  CPJIT_CONTINUE(frame, sp);
}

CPJIT_CC int64_t op_fine(struct cpjit_frame *frame, uint64_t *sp) {
  CPJIT_CONTINUE(frame, sp);
}
