#include "cpjit.h"

/* Calls the continuation without musttail: the toolchain must name op_plain_call. */
CPJIT_CC int64_t op_plain_call(struct cpjit_frame *frame, uint64_t *sp) {
  sp += 1;
  return _JIT_CONTINUE(frame, sp);
}

CPJIT_CC int64_t op_fine(struct cpjit_frame *frame, uint64_t *sp) {
  CPJIT_CONTINUE(frame, sp);
}
