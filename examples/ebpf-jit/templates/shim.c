/* The C-ABI entry: Rust calls it with its default calling convention; it calls the first
 * op with preserve_none (which Rust cannot) and returns the trace's exit status. */
#include "ebpf.h"

int64_t ebpf_entry(struct cpjit_frame *frame, uint64_t *sp) {
  return _JIT_CONTINUE(frame, sp);
}
