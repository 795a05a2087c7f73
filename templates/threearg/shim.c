/* The C-ABI entry of the three-argument set: native code calls it with the platform's
 * calling convention and three arguments; it calls the first op (its continuation) with the
 * ops' convention. Not a tail call: the trace returns here with its exit status. */
#include "t3.h"

int64_t t3_entry(struct t3_frame *frame, uint64_t *sp, struct t3_state *ts) {
  return _JIT_CONTINUE(frame, sp, ts);
}
