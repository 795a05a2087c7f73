#include "cpjit.h"

/* No CPJIT_CC: the C calling convention. */
int64_t op_no_cc(struct cpjit_frame *frame, uint64_t *sp) {
  (void)frame;
  return (int64_t)sp[-1];
}

/* preserve_none, but a third parameter and a 32-bit result. */
CPJIT_CC int32_t op_three_args(struct cpjit_frame *frame, uint64_t *sp, uint64_t extra) {
  (void)frame;
  return (int32_t)(sp[-1] + extra);
}

CPJIT_CC int64_t op_fine(struct cpjit_frame *frame, uint64_t *sp) {
  CPJIT_CONTINUE(frame, sp);
}

/* The shim must use the C convention: preserve_none here is wrong. */
CPJIT_CC int64_t entry(struct cpjit_frame *frame, uint64_t *sp) {
  return _JIT_CONTINUE(frame, sp);
}
