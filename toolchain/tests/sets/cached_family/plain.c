/* A plain op beside the families of the cached_family test set. */
#include "cpjit.h"

CPJIT_CC int64_t op_nothing(struct cpjit_frame *frame, uint64_t *sp) {
  CPJIT_CONTINUE(frame, sp);
}
