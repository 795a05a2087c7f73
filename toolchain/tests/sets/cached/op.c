#include "cpjit.h"

CPJIT_DECLARE_SPILLED_TARGET(SIDE);

int64_t entry(struct cpjit_frame *frame, uint64_t *sp) { return _JIT_CONTINUE(frame, sp); }

/* Correct: add with two values cached on entry, one on exit. */
CPJIT_CACHED_OP(op_fine_add, 2, 1) {
  CPJIT_STACK(s, 2);
  uint64_t b = cpjit_pop(&s), a = cpjit_pop(&s);
  cpjit_push(&s, a + b);
  CPJIT_CONTINUE_CACHED(frame, s, 1);
}

/* Correct: a fill from memory into all three registers. */
CPJIT_CACHED_OP(op_fine_fill, 0, 3) {
  CPJIT_STACK(s, 0);
  CPJIT_CONTINUE_CACHED(frame, s, 3);
}

/* Correct: pops two values and leaves unless they are equal. On the equal path the compiler
 * knows c1 holds what c0 does and passes c0 in c1's place, past OUT: an incoming register,
 * not a computed value. */
CPJIT_CACHED_OP(op_fine_equal_pops, 2, 0) {
  CPJIT_STACK(s, 2);
  uint64_t b = cpjit_pop(&s), a = cpjit_pop(&s);
  if (a != b) CPJIT_JUMP_SPILLED(SIDE, frame, s);
  CPJIT_CONTINUE_CACHED(frame, s, 0);
}

CPJIT_DECLARE_OPERAND(LIMIT);

/* Correct: pops a value and leaves when it equals an operand. On that path the compiler
 * passes the operand (a constant expression, the hole's address) in c0's place to the
 * spilled target: a constant, not a computed value. */
CPJIT_CACHED_OP(op_fine_equal_operand, 1, 0) {
  CPJIT_STACK(s, 1);
  uint64_t a = cpjit_pop(&s);
  if (a == CPJIT_OPERAND(LIMIT)) CPJIT_JUMP_SPILLED(SIDE, frame, s);
  CPJIT_CONTINUE_CACHED(frame, s, 0);
}

/* Correct: with nothing cached, enters code a slot (an operand) names, passing the cache
 * registers on as they came, each in its own position (a link into another trace). */
CPJIT_CACHED_OP(op_fine_link, 0, 0) {
  CPJIT_STACK(s, 0);
  cpjit_cached_op *linked = *(cpjit_cached_op *const *)(uintptr_t)CPJIT_OPERAND(LIMIT);
  if (linked) CPJIT_MUSTTAIL return linked(frame, s.sp, cpjit_c0, cpjit_c1, cpjit_c2);
  CPJIT_CONTINUE_CACHED(frame, s, 0);
}

/* Enters linked code with c1 in c0's position: it reads c1, which holds nothing. */
CPJIT_CACHED_OP(op_link_reads_past_in, 0, 0) {
  CPJIT_STACK(s, 0);
  cpjit_cached_op *linked = *(cpjit_cached_op *const *)(uintptr_t)CPJIT_OPERAND(LIMIT);
  if (linked) CPJIT_MUSTTAIL return linked(frame, s.sp, cpjit_c1, cpjit_c1, cpjit_c2);
  CPJIT_CONTINUE_CACHED(frame, s, 0);
}

/* Reads c2, but declares only one cached value on entry. */
CPJIT_CACHED_OP(op_reads_past_in, 1, 1) {
  CPJIT_STACK(s, 1);
  s.v0 += cpjit_c2;
  CPJIT_CONTINUE_CACHED(frame, s, 1);
}

/* Declares two values on exit but continues with one. */
CPJIT_CACHED_OP(op_short_exit, 1, 2) {
  CPJIT_STACK(s, 1);
  CPJIT_CONTINUE_CACHED(frame, s, 1);
}

/* Declares nothing cached on exit but passes a value in c0. */
CPJIT_CACHED_OP(op_value_past_out, 0, 0) {
  CPJIT_STACK(s, 0);
  cpjit_push(&s, 7);
  CPJIT_CONTINUE_CACHED(frame, s, 1);
}

/* Declared cached but with the uncached signature. */
CPJIT_CC CPJIT_CACHED_NOTE(1, 1, 3, 0, 0, 0) int64_t op_uncached_signature(struct cpjit_frame *f,
                                                                   uint64_t *sp) {
  CPJIT_CONTINUE(f, sp);
}

/* A cache state that is not a pair of integer literals. */
CPJIT_CC CPJIT_CACHED_NOTE(1 + 1, 2, 3, 0, 0, 0) int64_t op_state_expression(
    struct cpjit_frame *frame, uint64_t *sp, uint64_t cpjit_c0, uint64_t cpjit_c1,
    uint64_t cpjit_c2) {
  CPJIT_STACK(s, 2);
  CPJIT_CONTINUE_CACHED(frame, s, 2);
}

/* Correct: two values cached on exit, but a side exit to a spilled target spills them. */
CPJIT_CACHED_OP(op_fine_spilled_exit, 1, 2) {
  CPJIT_STACK(s, 1);
  cpjit_push(&s, s.v0 * 3);
  if (s.v1 & 1) CPJIT_JUMP_SPILLED(SIDE, frame, s);
  CPJIT_CONTINUE_CACHED(frame, s, 2);
}

/* Jumps to a spilled target with a computed value still cached. */
CPJIT_CACHED_OP(op_cached_into_spilled, 1, 2) {
  CPJIT_STACK(s, 1);
  cpjit_push(&s, s.v0 * 3);
  if (s.v1 & 1) CPJIT_JUMP_CACHED(SIDE, frame, s, 2);
  CPJIT_CONTINUE_CACHED(frame, s, 2);
}
