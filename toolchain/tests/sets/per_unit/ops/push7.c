#include "cpjit.h"

CPJIT_CC int64_t _JIT_ENTRY(struct cpjit_frame *frame, uint64_t *sp) {
  sp[0] = 7;
  CPJIT_CONTINUE(frame, sp + 1);
}
