/* A plain op of the listed_ops test set, so the set has a unit of its own. */
#include "cpjit.h"

CPJIT_CC int64_t op_nothing(struct cpjit_frame *frame, uint64_t *sp) {
  CPJIT_CONTINUE(frame, sp);
}
