/* Halves (CPJIT_DECLARE_OPERAND_HALVES) folded into one operand each, one half alone, an
 * operand read both as halves and whole, and plain operands that merely end in _HI/_LO. */
#include "cpjit.h"

CPJIT_DECLARE_OPERAND_HALVES(VALUE);
CPJIT_CC int64_t op_push_halves(struct cpjit_frame *frame, uint64_t *sp) {
  sp[0] = CPJIT_OPERAND_HALVES(VALUE);
  CPJIT_CONTINUE(frame, sp + 1);
}

CPJIT_CC int64_t op_push_low_half(struct cpjit_frame *frame, uint64_t *sp) {
  sp[0] = CPJIT_OPERAND_LO(VALUE);
  CPJIT_CONTINUE(frame, sp + 1);
}

CPJIT_DECLARE_OPERAND_HALVES(WHOLE);
CPJIT_DECLARE_OPERAND(WHOLE);
CPJIT_DECLARE_OPERAND(OTHER);
CPJIT_CC int64_t op_halves_and_whole(struct cpjit_frame *frame, uint64_t *sp) {
  sp[0] = CPJIT_OPERAND_HALVES(WHOLE) ^ (CPJIT_OPERAND(WHOLE) * 3) ^ CPJIT_OPERAND(OTHER);
  CPJIT_CONTINUE(frame, sp + 1);
}

CPJIT_DECLARE_OPERAND(FOO_HI);
CPJIT_DECLARE_OPERAND(FOO_LO);
CPJIT_CC int64_t op_plain_hi_lo(struct cpjit_frame *frame, uint64_t *sp) {
  sp[0] = CPJIT_OPERAND(FOO_HI) - CPJIT_OPERAND(FOO_LO);
  CPJIT_CONTINUE(frame, sp + 1);
}
