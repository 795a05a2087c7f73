/* positions.c: operands and external symbols in every instruction position where a
 * compiler puts a RIP-relative (x86-64) or adrp/ldr (AArch64) reference to a hole: ALU,
 * compare, store address, call and jump. The runtime relaxes such a reference into an
 * immediate or direct form where the instruction set allows it, and otherwise loads the
 * value through a GOT slot. Run on every target by conformance/tests/positions.rs.
 *
 * The multiplications keep the value in a register, so that the compiler folds the hole's
 * load into the ALU or compare instruction itself (`add r, [rip+G]`, `cmp r, [rip+G]`).
 * Keep names and semantics stable: conformance/src/positions.rs is their reference.
 */
#include "cpjit.h"

CPJIT_DECLARE_OPERAND(OPERAND0);
CPJIT_DECLARE_OPERAND(OPERAND1);
CPJIT_DECLARE_OPERAND(OPERAND2);
CPJIT_DECLARE_OPERAND(OPERAND3);

/* Provided by the caller: four writable words (a data symbol, read through an import slot
 * on Windows like the operands) and a stencil-convention function to jump to. */
CPJIT_HOLE int64_t cpjit_test_cell[4];
extern cpjit_op cpjit_test_jump_dest;

typedef int64_t cpjit_test_helper_fn(int64_t a, int64_t b, int64_t c);

/* top = ((((top * 3 + O0) * 5 ^ O1) * 7 - O2) * 9 & O3) * 11 */
CPJIT_CC int64_t op_test_operand_alu(struct cpjit_frame *frame, uint64_t *sp) {
  uint64_t x = sp[-1] * 3;
  x += CPJIT_OPERAND(OPERAND0);
  x *= 5;
  x ^= CPJIT_OPERAND(OPERAND1);
  x *= 7;
  x -= CPJIT_OPERAND(OPERAND2);
  x *= 9;
  x &= CPJIT_OPERAND(OPERAND3);
  sp[-1] = x * 11;
  CPJIT_CONTINUE(frame, sp);
}

/* x = top * 3; top = (x == O0) | (x < O1) << 1 | ((x & O2) != 0) << 2 | (x | O3) << 3 */
CPJIT_CC int64_t op_test_operand_compare(struct cpjit_frame *frame, uint64_t *sp) {
  uint64_t x = sp[-1] * 3;
  uint64_t r = (uint64_t)(x == CPJIT_OPERAND(OPERAND0));
  r |= (uint64_t)(x < CPJIT_OPERAND(OPERAND1)) << 1;
  r |= (uint64_t)((x & CPJIT_OPERAND(OPERAND2)) != 0) << 2;
  r |= (x | CPJIT_OPERAND(OPERAND3)) << 3;
  sp[-1] = r;
  CPJIT_CONTINUE(frame, sp);
}

/* *(uint64_t *)O0 = top * 3 (the operand is the address stored to) */
CPJIT_CC int64_t op_test_operand_store(struct cpjit_frame *frame, uint64_t *sp) {
  *(volatile uint64_t *)CPJIT_OPERAND(OPERAND0) = sp[-1] * 3;
  CPJIT_CONTINUE(frame, sp);
}

/* pop c, b, a; push O0(a, b, c) (the operand is the address of a C-ABI function) */
CPJIT_CC int64_t op_test_operand_call(struct cpjit_frame *frame, uint64_t *sp) {
  int64_t c = (int64_t)sp[-1];
  int64_t b = (int64_t)sp[-2];
  int64_t a = (int64_t)sp[-3];
  sp[-3] = (uint64_t)((cpjit_test_helper_fn *)CPJIT_OPERAND(OPERAND0))(a, b, c);
  sp -= 2;
  CPJIT_CONTINUE(frame, sp);
}

/* top = top * 3; jump to the address O0 (a stencil-convention function) */
CPJIT_CC int64_t op_test_operand_jump(struct cpjit_frame *frame, uint64_t *sp) {
  sp[-1] *= 3;
  CPJIT_MUSTTAIL return ((cpjit_op *)CPJIT_OPERAND(OPERAND0))(frame, sp);
}

/* top = (top * 3 + &cpjit_test_cell) * 5 */
CPJIT_CC int64_t op_test_symbol_alu(struct cpjit_frame *frame, uint64_t *sp) {
  uint64_t x = sp[-1] * 3;
  x += (uint64_t)(uintptr_t)cpjit_test_cell;
  sp[-1] = x * 5;
  CPJIT_CONTINUE(frame, sp);
}

/* top = top * 3 == &cpjit_test_cell ? 7 : 9 */
CPJIT_CC int64_t op_test_symbol_compare(struct cpjit_frame *frame, uint64_t *sp) {
  uint64_t x = sp[-1] * 3;
  sp[-1] = x == (uint64_t)(uintptr_t)cpjit_test_cell ? 7 : 9;
  CPJIT_CONTINUE(frame, sp);
}

/* cpjit_test_cell[1] = top * 3 + cpjit_test_cell[0] */
CPJIT_CC int64_t op_test_symbol_store(struct cpjit_frame *frame, uint64_t *sp) {
  cpjit_test_cell[1] = (int64_t)(sp[-1] * 3) + cpjit_test_cell[0];
  CPJIT_CONTINUE(frame, sp);
}

/* top = top * 3; jump to cpjit_test_jump_dest */
CPJIT_CC int64_t op_test_symbol_jump(struct cpjit_frame *frame, uint64_t *sp) {
  sp[-1] *= 3;
  CPJIT_MUSTTAIL return cpjit_test_jump_dest(frame, sp);
}
