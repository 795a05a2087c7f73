/* A plain op beside the family of the stack_effects test set. */
#include "cpjit.h"

CPJIT_CC int64_t op_nothing(struct cpjit_frame *frame, uint64_t *sp) {
  CPJIT_CONTINUE(frame, sp);
}
