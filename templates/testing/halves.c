/* halves.c: the hi/lo halves of a 64-bit operand (CPJIT_DECLARE_OPERAND_HALVES), the form
 * CPython's templates give an operand (`_JIT_OPERAND0_HI`/`_LO`): two u32 narrow holes
 * patched in place, from which the op rebuilds the 64-bit value. Each op below has ONE
 * operand per halves declaration, passed as one 64-bit value. Run on every target by
 * conformance/tests/halves.rs, which also compares the code bytes with the plain 64-bit
 * operand forms (op_test_push in holes.c, op_test_add_operand64 here). Keep names and
 * semantics stable: that test is their reference.
 */
#include "cpjit.h"

CPJIT_DECLARE_OPERAND_HALVES(VALUE);
CPJIT_DECLARE_OPERAND(VALUE64);

/* push VALUE (rebuilt from its halves) */
CPJIT_CC int64_t op_test_push_halves(struct cpjit_frame *frame, uint64_t *sp) {
  sp[0] = CPJIT_OPERAND_HALVES(VALUE);
  CPJIT_CONTINUE(frame, sp + 1);
}

/* top += VALUE (rebuilt from its halves) */
CPJIT_CC int64_t op_test_add_halves(struct cpjit_frame *frame, uint64_t *sp) {
  sp[-1] += CPJIT_OPERAND_HALVES(VALUE);
  CPJIT_CONTINUE(frame, sp);
}

/* top += VALUE64, a plain 64-bit operand: op_test_add_halves's reference */
CPJIT_CC int64_t op_test_add_operand64(struct cpjit_frame *frame, uint64_t *sp) {
  sp[-1] += CPJIT_OPERAND(VALUE64);
  CPJIT_CONTINUE(frame, sp);
}

/* push VALUE >> 32: a stencil with only the high half (valid, if unusual) */
CPJIT_CC int64_t op_test_push_high_half(struct cpjit_frame *frame, uint64_t *sp) {
  sp[0] = CPJIT_OPERAND_HI(VALUE);
  CPJIT_CONTINUE(frame, sp + 1);
}

/* push VALUE & 0xffffffff: only the low half */
CPJIT_CC int64_t op_test_push_low_half(struct cpjit_frame *frame, uint64_t *sp) {
  sp[0] = CPJIT_OPERAND_LO(VALUE);
  CPJIT_CONTINUE(frame, sp + 1);
}

/* top = VALUE ^ (WHOLE * 3): one operand read both as halves and whole (the same value) */
CPJIT_DECLARE_OPERAND_HALVES(WHOLE);
CPJIT_DECLARE_OPERAND(WHOLE);
CPJIT_CC int64_t op_test_halves_and_whole(struct cpjit_frame *frame, uint64_t *sp) {
  sp[-1] = CPJIT_OPERAND_HALVES(WHOLE) ^ (CPJIT_OPERAND(WHOLE) * 3);
  CPJIT_CONTINUE(frame, sp);
}

/* push PAIR_HI - PAIR_LO: plain 64-bit operands whose names merely end in _HI/_LO (no
 * halves declaration): two operands, read whole */
CPJIT_DECLARE_OPERAND(PAIR_HI);
CPJIT_DECLARE_OPERAND(PAIR_LO);
CPJIT_CC int64_t op_test_plain_hi_lo(struct cpjit_frame *frame, uint64_t *sp) {
  sp[0] = CPJIT_OPERAND(PAIR_HI) - CPJIT_OPERAND(PAIR_LO);
  CPJIT_CONTINUE(frame, sp + 1);
}
