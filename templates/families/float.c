/* float.c: test ops with float cache slots (manifest.toml, [[family]] `test_float`; the
 * convention is cpjit.h's "Float cache slots", templates/README.md "Float cache slots").
 * Compiled with CPJIT_FLOAT_CACHE 1 and CPJIT_PIN_FLOAT_REGS 4 once per list element
 * CPJIT_TEST_OP and cache state: IN on entry, OUT on exit, each a state number 0..=6 (up to
 * two slots, each an int or a float: 2**count - 1 + floats). Every member computes what the
 * op computes on the logical stack of 64-bit values (memory below sp, then the slots; a
 * float is its bits), so any member whose IN is the state the previous instance left may
 * follow it. The ops:
 *   push       pushes OPERAND0 as an int;
 *   fpush      pushes OPERAND0's bits as a float;
 *   add        pops b, a (ints), pushes a + b;
 *   fadd, fmul pop b, a (floats), push a + b, a * b (floats);
 *   i2f        pops an int, pushes it converted to a float;
 *   fhelper    pops a float x, pushes cpjit_test_fscale(x) (a helper: the C ABI keeps no
 *              float register but Win64's xmm6-xmm15 and AArch64's d8-d15 across it);
 *   facc       pops a float and adds it to pinned float register q0;
 *   fget       pushes q0 as a float;
 *   fswap      swaps q0 and q3 (q3, the last pinned float register, sits just before the
 *              float slots' registers: every op, the helper call's too, passes it on);
 *   fzero      sets q0 to q3 to 0.0 (a trace's first float op: pinned registers start
 *              undefined);
 *   fjump_lt   pops b, a (floats); jumps to JUMP_TARGET if a < b, else continues;
 *   move       no pops or pushes: a spill, fill or class change between states (the glue);
 *   side_exit  spills every cached value and returns the stack pointer.
 * Run on every target by conformance/tests/float_cache.rs.
 */
#include "cpjit.h"

CPJIT_DECLARE_OPERAND(OPERAND0);
CPJIT_DECLARE_TARGET(JUMP);

extern double cpjit_test_fscale(double x);

#define CPJIT_TEST_CAT(a, b) a##b
#define CPJIT_TEST_BODY(op) CPJIT_TEST_CAT(body_, op)

#define body_push                                                                  \
  cpjit_push(&s, CPJIT_OPERAND(OPERAND0));                                         \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_fpush                                                                 \
  cpjit_push_f(&s, cpjit_bits_float(CPJIT_OPERAND(OPERAND0)));                     \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_add                                                                   \
  uint64_t b = cpjit_pop(&s), a = cpjit_pop(&s);                                   \
  cpjit_push(&s, a + b);                                                           \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_fadd                                                                  \
  double b = cpjit_pop_f(&s), a = cpjit_pop_f(&s);                                 \
  cpjit_push_f(&s, a + b);                                                         \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_fmul                                                                  \
  double b = cpjit_pop_f(&s), a = cpjit_pop_f(&s);                                 \
  cpjit_push_f(&s, a * b);                                                         \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_i2f                                                                   \
  cpjit_push_f(&s, (double)(int64_t)cpjit_pop(&s));                                \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_fhelper                                                               \
  cpjit_push_f(&s, cpjit_test_fscale(cpjit_pop_f(&s)));                            \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_facc                                                                  \
  s.q0 += cpjit_pop_f(&s);                                                         \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_fget                                                                  \
  cpjit_push_f(&s, s.q0);                                                          \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_fswap                                                                 \
  double q0 = s.q0;                                                                \
  s.q0 = s.q3;                                                                     \
  s.q3 = q0;                                                                       \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_fzero                                                                 \
  s.q0 = s.q1 = s.q2 = s.q3 = 0.0;                                                 \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_fjump_lt                                                              \
  double b = cpjit_pop_f(&s), a = cpjit_pop_f(&s);                                 \
  cpjit_settle(&s, OUT);                                                           \
  if (a < b) CPJIT_JUMP_CACHED(JUMP, frame, s, OUT);                               \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_move CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_side_exit                                                             \
  (void)frame;                                                                     \
  cpjit_spill_all(&s);                                                             \
  return (int64_t)(uintptr_t)s.sp;

CPJIT_CACHED_OP(op_test_float, IN, OUT) {
  CPJIT_STACK(s, IN);
  CPJIT_TEST_BODY(CPJIT_TEST_OP)
}
