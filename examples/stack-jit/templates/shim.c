/* The C-ABI entry: Rust calls this with its default calling convention; it calls the first
 * op (entered with nothing cached) with preserve_none, which Rust cannot, and returns what
 * the program's `ret` returns. */
#include "stack.h"

int64_t stack_entry(struct cpjit_frame *frame, uint64_t *sp) {
  return _JIT_CONTINUE(frame, sp);
}
