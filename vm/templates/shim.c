/* The VM's C-ABI entry: native code (Rust) calls it with the default calling convention; it
 * calls the first op of the trace (its continuation) with preserve_none, which Rust cannot
 * do itself. Not a tail call: the trace returns here with its exit status. */
#include "cpjit.h"

int64_t vm_entry(struct cpjit_frame *frame, uint64_t *sp) {
  return _JIT_CONTINUE(frame, sp);
}
