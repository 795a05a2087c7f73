#include "cpjit.h"

CPJIT_CC int64_t op_clobbers_x18(struct cpjit_frame *frame, uint64_t *sp) {
  __asm__ volatile("mov x18, #1");
  CPJIT_CONTINUE(frame, sp);
}
