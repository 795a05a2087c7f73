/* ops.c: every op of the stack machine, written once. The kit compiles this file once per
 * list element OP and cache state (manifest.toml, [[family]] `stack`): IN top-of-stack
 * values cached in registers on entry, OUT on exit, 0..=3 each, so `op_add_2_1` adds the
 * two cached values into one register and `op_add_0_0` is the plain op working on memory.
 * Each body works on the view `s` of the logical stack (memory below `sp`, then the cached
 * registers): cpjit_pop takes registers first, cpjit_push fills them, and
 * CPJIT_CONTINUE_CACHED spills or fills to OUT. Nothing here knows which member runs where:
 * the generated selection tables choose (src/jit.rs pushes ops by id).
 *
 * Values are 64-bit two's complement; arithmetic wraps, as in src/interp.rs. */
#include "stack.h"

CPJIT_DECLARE_OPERAND(VALUE); /* const: the value; load/store: the local's index */
CPJIT_DECLARE_TARGET(JUMP);   /* jump, jz, jnz: where to go */

#define STACK_CAT(a, b) a##b
#define STACK_BODY(op) STACK_CAT(body_, op)

#define BINARY(expr)                                                                \
  uint64_t b = cpjit_pop(&s), a = cpjit_pop(&s);                                   \
  cpjit_push(&s, (uint64_t)(expr));                                                 \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_const                                                                  \
  cpjit_push(&s, CPJIT_OPERAND(VALUE));                                             \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_load                                                                   \
  cpjit_push(&s, (uint64_t)frame->locals[CPJIT_OPERAND(VALUE)]);                    \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_store                                                                  \
  frame->locals[CPJIT_OPERAND(VALUE)] = (int64_t)cpjit_pop(&s);                     \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_add BINARY(a + b)
#define body_sub BINARY(a - b)
#define body_mul BINARY(a * b)
#define body_and BINARY(a & b)
#define body_shr BINARY(a >> (b & 63))
#define body_lt BINARY((int64_t)a < (int64_t)b)
#define body_eq BINARY(a == b)
#define body_mix BINARY(stack_mix((int64_t)a, (int64_t)b))

#define body_dup                                                                    \
  uint64_t top = cpjit_pop(&s);                                                     \
  cpjit_push(&s, top);                                                              \
  cpjit_push(&s, top);                                                              \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_drop                                                                   \
  (void)cpjit_pop(&s);                                                              \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_swap                                                                   \
  uint64_t b = cpjit_pop(&s), a = cpjit_pop(&s);                                   \
  cpjit_push(&s, b);                                                                \
  cpjit_push(&s, a);                                                                \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_print                                                                  \
  stack_print(frame, (int64_t)cpjit_pop(&s));                                       \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_jump CPJIT_JUMP_CACHED(JUMP, frame, s, OUT);

/* Both paths leave in state OUT: settle once, then branch. */
#define CONDITIONAL(taken)                                                          \
  uint64_t c = cpjit_pop(&s);                                                       \
  cpjit_settle(&s, OUT);                                                            \
  if (taken) CPJIT_JUMP_CACHED(JUMP, frame, s, OUT);                                \
  CPJIT_CONTINUE_CACHED(frame, s, OUT);

#define body_jz CONDITIONAL(c == 0)
#define body_jnz CONDITIONAL(c != 0)

/* The program's result, back through the entry shim. */
#define body_ret                                                                    \
  (void)frame;                                                                      \
  return (int64_t)cpjit_pop(&s);

/* The glue: no pops or pushes, a spill (IN > OUT) or a fill (IN < OUT). */
#define body_move CPJIT_CONTINUE_CACHED(frame, s, OUT);

CPJIT_CACHED_OP(op_stack, IN, OUT) {
  CPJIT_STACK(s, IN);
  STACK_BODY(OP)
}
