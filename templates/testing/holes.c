/* holes.c: the hole-kind exerciser. One small op per hole kind (64-bit operands, an external
 * helper call, a .rodata read, writable static data, symbol+addend, a jump target and the
 * musttail continuation), run on every target by the runtime's and the matrix's tests.
 *
 * `sp` is a value stack of uint64_t growing upward (sp[-1] is the top); `frame` is unused.
 * Keep names and semantics stable: other crates' tests depend on them.
 */
#include "cpjit.h"

CPJIT_DECLARE_OPERAND(OPERAND0);
CPJIT_DECLARE_OPERAND(OPERAND1);
CPJIT_DECLARE_TARGET(JUMP);

/* Provided by the caller (resolved as an external symbol hole). */
extern int64_t cpjit_test_mul_add(int64_t a, int64_t b, int64_t c);

/* push OPERAND0 */
CPJIT_CC int64_t op_test_push(struct cpjit_frame *frame, uint64_t *sp) {
  sp[0] = CPJIT_OPERAND(OPERAND0);
  sp += 1;
  CPJIT_CONTINUE(frame, sp);
}

/* push OPERAND0, then OPERAND1 (two operand holes) */
CPJIT_CC int64_t op_test_push2(struct cpjit_frame *frame, uint64_t *sp) {
  sp[0] = CPJIT_OPERAND(OPERAND0);
  sp[1] = CPJIT_OPERAND(OPERAND1);
  sp += 2;
  CPJIT_CONTINUE(frame, sp);
}

/* pop b, a; push a + b */
CPJIT_CC int64_t op_test_add(struct cpjit_frame *frame, uint64_t *sp) {
  uint64_t b = sp[-1];
  uint64_t a = sp[-2];
  sp[-2] = a + b;
  sp -= 1;
  CPJIT_CONTINUE(frame, sp);
}

/* pop c, b, a; push cpjit_test_mul_add(a, b, c) (a call to an external helper) */
CPJIT_CC int64_t op_test_helper(struct cpjit_frame *frame, uint64_t *sp) {
  int64_t c = (int64_t)sp[-1];
  int64_t b = (int64_t)sp[-2];
  int64_t a = (int64_t)sp[-3];
  sp[-3] = (uint64_t)cpjit_test_mul_add(a, b, c);
  sp -= 2;
  CPJIT_CONTINUE(frame, sp);
}

/* replace top x by table[x & 7] (a read of a read-only table) */
static const int64_t table[8] = {
    3 * 1000003, 1 * 1000003, 4 * 1000003, 1 * 1000003,
    5 * 1000003, 9 * 1000003, 2 * 1000003, 6 * 1000003,
};

CPJIT_CC int64_t op_test_table(struct cpjit_frame *frame, uint64_t *sp) {
  sp[-1] = (uint64_t)table[sp[-1] & 7];
  CPJIT_CONTINUE(frame, sp);
}

/* counter += top; replace top by counter (writable static data, per instance) */
static CPJIT_INSTANCE_DATA int64_t counter;

CPJIT_CC int64_t op_test_counter(struct cpjit_frame *frame, uint64_t *sp) {
  counter += (int64_t)sp[-1];
  sp[-1] = (uint64_t)counter;
  CPJIT_CONTINUE(frame, sp);
}

/* slots[2] = top; push *(&slots[0] + 2) + ((char *)&slots[3] - (char *)&slots[1])
 * (references to a symbol plus an addend; the pushed value is top + 16) */
static CPJIT_INSTANCE_DATA int64_t slots[4];

CPJIT_CC int64_t op_test_addr_addend(struct cpjit_frame *frame, uint64_t *sp) {
  /* volatile keeps the compiler from folding the store and reload into one value. */
  volatile int64_t *base = &slots[0];
  slots[2] = (int64_t)sp[-1];
  int64_t distance = (char *)&slots[3] - (char *)&slots[1];
  sp[0] = (uint64_t)(*(base + 2) + distance);
  sp += 1;
  CPJIT_CONTINUE(frame, sp);
}

/* --top; if top != 0 jump to JUMP_TARGET, else continue (top stays on the stack) */
CPJIT_CC int64_t op_test_dec_jump_nz(struct cpjit_frame *frame, uint64_t *sp) {
  sp[-1] -= 1;
  if (sp[-1] != 0) {
    CPJIT_JUMP(JUMP, frame, sp);
  }
  CPJIT_CONTINUE(frame, sp);
}

/* drop top */
CPJIT_CC int64_t op_test_pop(struct cpjit_frame *frame, uint64_t *sp) {
  sp -= 1;
  CPJIT_CONTINUE(frame, sp);
}

/* return top as the exit status (back through the entry shim) */
CPJIT_CC int64_t op_test_exit(struct cpjit_frame *frame, uint64_t *sp) {
  (void)frame;
  return (int64_t)sp[-1];
}
