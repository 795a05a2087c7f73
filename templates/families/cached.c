/* cached.c: the test ops of testing/holes.c with register-cached stack values (manifest.toml,
 * [[family]] `test_cached`; the convention is cpjit.h's "Register-cached stack values").
 * Compiled once per list element CPJIT_TEST_OP and cache state: IN values cached in
 * registers on entry, OUT on exit (0..=3 each); the one stencil is renamed to
 * op_test_cached_<op>_<IN>_<OUT>. Every member computes what the uncached op of the same name
 * computes on the logical stack (memory below sp, then the cached registers), so a trace may
 * choose any variant whose IN is the state the previous instance left. Besides those ops:
 *   move       no pops or pushes: a spill (IN > OUT) or a fill (IN < OUT);
 *   side_exit  spills every cached value and returns the stack pointer, as a side exit
 *              leaving the whole stack in memory for an interpreter would;
 *   digest     spills every cached value, then calls a helper that reads the top three
 *              values from memory (cpjit_test_stack_digest), and replaces them by its result.
 * Run on every target by conformance/tests/cached.rs; the bench lowers its traces onto them.
 */
#include "cpjit.h"

CPJIT_DECLARE_OPERAND(OPERAND0);
CPJIT_DECLARE_OPERAND(OPERAND1);
CPJIT_DECLARE_TARGET(JUMP);

extern int64_t cpjit_test_mul_add(int64_t a, int64_t b, int64_t c);
extern uint64_t cpjit_test_stack_digest(const uint64_t *sp);

#define CPJIT_TEST_CAT(a, b) a##b
#define CPJIT_TEST_BODY(op) CPJIT_TEST_CAT(body_, op)

/* Each body works on view s and ends by continuing, jumping or returning. */
#define body_push                                                                  \
  cpjit_push(&s, CPJIT_OPERAND(OPERAND0));                                         \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_push2                                                                 \
  cpjit_push(&s, CPJIT_OPERAND(OPERAND0));                                         \
  cpjit_push(&s, CPJIT_OPERAND(OPERAND1));                                         \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_add                                                                   \
  uint64_t b = cpjit_pop(&s), a = cpjit_pop(&s);                                   \
  cpjit_push(&s, a + b);                                                           \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_helper                                                                \
  int64_t c = (int64_t)cpjit_pop(&s), b = (int64_t)cpjit_pop(&s);                  \
  int64_t a = (int64_t)cpjit_pop(&s);                                              \
  cpjit_push(&s, (uint64_t)cpjit_test_mul_add(a, b, c));                           \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

static const int64_t table[8] = {
    3 * 1000003, 1 * 1000003, 4 * 1000003, 1 * 1000003,
    5 * 1000003, 9 * 1000003, 2 * 1000003, 6 * 1000003,
};
#define body_table                                                                 \
  cpjit_push(&s, (uint64_t)table[cpjit_pop(&s) & 7]);                              \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

static CPJIT_INSTANCE_DATA int64_t counter;
#define body_counter                                                               \
  counter += (int64_t)cpjit_pop(&s);                                               \
  cpjit_push(&s, (uint64_t)counter);                                               \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

/* pushes top + 16 through a symbol-plus-addend reference, as op_test_addr_addend */
static CPJIT_INSTANCE_DATA int64_t slots[4];
#define body_addr_addend                                                           \
  volatile int64_t *base = &slots[0];                                              \
  uint64_t top = cpjit_pop(&s);                                                    \
  cpjit_push(&s, top);                                                             \
  slots[2] = (int64_t)top;                                                         \
  int64_t distance = (char *)&slots[3] - (char *)&slots[1];                        \
  cpjit_push(&s, (uint64_t)(*(base + 2) + distance));                              \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

/* --top; jump to JUMP_TARGET if it is not 0, else continue (top stays) */
#define body_dec_jump_nz                                                           \
  uint64_t top = cpjit_pop(&s) - 1;                                                \
  cpjit_push(&s, top);                                                             \
  cpjit_settle(&s, OUT);                                                           \
  if (top != 0) CPJIT_JUMP_CACHED(JUMP, frame, s, OUT);                            \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_pop                                                                   \
  (void)cpjit_pop(&s);                                                             \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_move CPJIT_CONTINUE_CACHED(frame, s, OUT);

/* return top as the exit status (back through the entry shim) */
#define body_exit                                                                  \
  (void)frame;                                                                     \
  return (int64_t)cpjit_pop(&s);

#define body_side_exit                                                             \
  (void)frame;                                                                     \
  cpjit_spill_all(&s);                                                             \
  return (int64_t)(uintptr_t)s.sp;

#define body_digest                                                                \
  cpjit_spill_all(&s);                                                             \
  uint64_t digest = cpjit_test_stack_digest(s.sp);                                 \
  s.sp -= 3;                                                                       \
  cpjit_push(&s, digest);                                                          \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

CPJIT_CACHED_OP(op_test_cached, IN, OUT) {
  CPJIT_STACK(s, IN);
  CPJIT_TEST_BODY(CPJIT_TEST_OP)
}
