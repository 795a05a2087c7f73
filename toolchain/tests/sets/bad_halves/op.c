/* Halves whose operand would be a jump target, and a half declared by hand without the
 * `_HI` suffix: both refused naming target, template, stencil and symbol. */
#include "cpjit.h"

CPJIT_DECLARE_OPERAND_HALVES(NEXT_TARGET);
CPJIT_CC int64_t op_halves_of_a_target(struct cpjit_frame *frame, uint64_t *sp) {
  sp[0] = CPJIT_OPERAND_HALVES(NEXT_TARGET);
  CPJIT_CONTINUE(frame, sp + 1);
}

CPJIT_NARROW_HOLE const struct cpjit_operand_hi _JIT_MISNAMED;
CPJIT_CC int64_t op_misnamed_half(struct cpjit_frame *frame, uint64_t *sp) {
  sp[0] = CPJIT_NARROW(MISNAMED, u32);
  CPJIT_CONTINUE(frame, sp + 1);
}
