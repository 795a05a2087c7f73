#include "cpjit.h"

/* Not an op: the name does not match `op_*`. */
CPJIT_CC int64_t not_an_op(struct cpjit_frame *frame, uint64_t *sp) {
  CPJIT_CONTINUE(frame, sp);
}
