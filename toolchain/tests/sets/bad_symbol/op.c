#include "cpjit.h"

extern int64_t allowed_helper(int64_t);
extern int64_t forbidden_global;

CPJIT_CC int64_t op_reads_global(struct cpjit_frame *frame, uint64_t *sp) {
  sp[0] = (uint64_t)(allowed_helper(1) + forbidden_global);
  CPJIT_CONTINUE(frame, sp + 1);
}
