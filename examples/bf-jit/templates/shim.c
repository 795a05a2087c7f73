/* The C-ABI entry: Rust calls this with its default calling convention; it calls the first
 * op with preserve_none (which Rust cannot) and returns the trace's exit status. */
#include "bf.h"

int64_t bf_entry(struct cpjit_frame *frame, uint64_t *cell) {
  return _JIT_CONTINUE(frame, cell);
}
