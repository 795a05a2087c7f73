#define CPJIT_PIN_REGS 2
#include "cpjit.h"

CPJIT_DECLARE_SPILLED_TARGET(SIDE);

int64_t entry(struct cpjit_frame *frame, uint64_t *sp) { return _JIT_CONTINUE(frame, sp); }

/* Pushes pinned register p0 (nothing cached on entry, one value on exit). */
CPJIT_CACHED_OP(op_fine_load_p0, 0, 1) {
  CPJIT_STACK(s, 0);
  cpjit_push(&s, s.p0);
  CPJIT_CONTINUE_CACHED(frame, s, 1);
}

/* Adds the top of the stack to pinned register p1; a zero sum leaves, with p1 passed on. */
CPJIT_CACHED_OP(op_fine_add_to_p1, 1, 0) {
  CPJIT_STACK(s, 1);
  s.p1 += cpjit_pop(&s);
  if (s.p1 == 0) CPJIT_JUMP_SPILLED(SIDE, frame, s);
  CPJIT_CONTINUE_CACHED(frame, s, 0);
}

/* Passes p0 and p1 on untouched. */
CPJIT_CACHED_OP(op_fine_pass, 2, 2) {
  CPJIT_STACK(s, 2);
  CPJIT_CONTINUE_CACHED(frame, s, 2);
}

/* Declares two pinned registers but takes the cached values only. */
CPJIT_CC __attribute__((annotate("cpjit.cached 0,0,3,2"))) int64_t
op_no_pinned_parameters(struct cpjit_frame *frame, uint64_t *sp, uint64_t c0, uint64_t c1,
                        uint64_t c2) {
  return (int64_t)(c0 + c1 + c2) + (frame != 0) + (sp != 0);
}
