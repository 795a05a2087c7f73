#include "cpjit.h"

int64_t entry(struct cpjit_frame *frame, uint64_t *sp) { return _JIT_CONTINUE(frame, sp); }

CPJIT_CACHED_OP(op_fadd, 6, 2) {
  CPJIT_STACK(s, 6);
  double b = cpjit_pop_f(&s), a = cpjit_pop_f(&s);
  cpjit_push_f(&s, a + b);
  CPJIT_CONTINUE_CACHED(frame, s, 2);
}
