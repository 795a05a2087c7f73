/* The three-argument ops: each reads or writes the frame, the value stack and the thread
 * state, so a result is right only if all three arguments arrive (and are passed on) in
 * their registers. The operand is declared as data and read through its address, as
 * CPython's templates declare theirs; on x86-64 Linux (medium code model) its address is
 * a `movabs` imm64 hole.
 *
 * Keep names and semantics stable: conformance/tests/three_arguments.rs mirrors them.
 */
#include "t3.h"

T3_HOLE char _JIT_VALUE[];

/* push VALUE; ts->steps += 1 */
T3_CC int64_t op_t3_push(struct t3_frame *frame, uint64_t *sp, struct t3_state *ts) {
  sp[0] = (uint64_t)(uintptr_t)_JIT_VALUE;
  ts->steps += 1;
  T3_CONTINUE(frame, sp + 1, ts);
}

/* top = top * frame->scale + ts->bias; ts->steps += 1 */
T3_CC int64_t op_t3_mix(struct t3_frame *frame, uint64_t *sp, struct t3_state *ts) {
  sp[-1] = sp[-1] * frame->scale + ts->bias;
  ts->steps += 1;
  T3_CONTINUE(frame, sp, ts);
}

/* if --ts->counter != 0 jump to LOOP_TARGET, else continue */
T3_CC int64_t op_t3_loop(struct t3_frame *frame, uint64_t *sp, struct t3_state *ts) {
  ts->counter -= 1;
  if (ts->counter != 0) {
    T3_JUMP(frame, sp, ts);
  }
  T3_CONTINUE(frame, sp, ts);
}

/* exit with top + frame->base + ts->steps (pops nothing) */
T3_CC int64_t op_t3_exit(struct t3_frame *frame, uint64_t *sp, struct t3_state *ts) {
  return (int64_t)(sp[-1] + frame->base + ts->steps);
}
