#include "cpjit.h"

CPJIT_CC int64_t op_fine(struct cpjit_frame *frame, uint64_t *sp) {
  CPJIT_CONTINUE(frame, sp);
}
