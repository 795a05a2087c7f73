/* The C-ABI entry: Rust calls it with its default calling convention; it calls the first
 * instruction's op with preserve_none (which Rust cannot), in cache state 3 with the pinned
 * registers loaded from their homes in the frame (ops.h, PIN_HOME: c0, c1, c2, p0, p1 hold
 * slots 0..4), and returns the trace's exit status. Loading them here rather than in an op
 * of their own saves every compile an instance. */
#include "ops.h"

int64_t ebpf_entry(struct cpjit_frame *frame, uint64_t *sp) {
  struct cpjit_frame *f = frame;
  /* cpjit_cached_op's order: frame, sp, c0, c1, then the pinned p0, p1, then c2. */
  return ((cpjit_cached_op *)&_JIT_CONTINUE)(frame, sp, PIN_HOME(0), PIN_HOME(1),
                                             PIN_HOME(3), PIN_HOME(4), PIN_HOME(2));
}
