#include "cpjit.h"

CPJIT_CC int64_t _JIT_ENTRY(struct cpjit_frame *frame, uint64_t *sp) {
  CPJIT_CONTINUE(frame, sp - 1);
}
