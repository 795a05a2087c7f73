#include "cpjit.h"

int64_t entry(struct cpjit_frame *frame, uint64_t *sp) { return _JIT_CONTINUE(frame, sp); }

/* Correct: states 6 (two floats) -> 2 (one float): one FP add. */
CPJIT_CACHED_OP(op_fine_fadd, 6, 2) {
  CPJIT_STACK(s, 6);
  double b = cpjit_pop_f(&s), a = cpjit_pop_f(&s);
  cpjit_push_f(&s, a + b);
  CPJIT_CONTINUE_CACHED(frame, s, 2);
}

/* Correct: an int slot moved to a float one (state 1 -> 2) and back (5 -> 3). */
CPJIT_CACHED_OP(op_fine_to_float, 1, 2) {
  CPJIT_STACK(s, 1);
  CPJIT_CONTINUE_CACHED(frame, s, 2);
}
CPJIT_CACHED_OP(op_fine_to_int, 5, 3) {
  CPJIT_STACK(s, 5);
  CPJIT_CONTINUE_CACHED(frame, s, 3);
}

/* Wrong: state 2 caches one float (f0), but the op reads f1. */
CPJIT_CACHED_OP(op_reads_float_past_in, 2, 2) {
  CPJIT_STACK(s, 2);
  s.d0 += cpjit_f1;
  CPJIT_CONTINUE_CACHED(frame, s, 2);
}

/* Wrong: state 2 caches a float, so its int register c0 holds nothing. */
CPJIT_CACHED_OP(op_reads_int_of_float_slot, 2, 2) {
  CPJIT_STACK(s, 2);
  s.d0 += (double)cpjit_c0;
  CPJIT_CONTINUE_CACHED(frame, s, 2);
}

/* Wrong: leaves an int computed in c0 where state 2 has a float: hand-made call. */
CPJIT_CACHED_OP(op_int_in_float_state, 2, 2) {
  CPJIT_STACK(s, 2);
  CPJIT_MUSTTAIL return ((cpjit_cached_op *)&_JIT_CONTINUE)(
      frame, CPJIT_CACHED_CALL_ARGS_(s.sp, cpjit_c1 + 1, cpjit_c1, cpjit_c2, s.d0, s.d1,
                                     s.d2, s));
}
