#include "cpjit.h"

#define BIG (512 << 10)
static CPJIT_INSTANCE_DATA unsigned char seen[BIG];

CPJIT_CC int64_t op_mark(struct cpjit_frame *frame, uint64_t *sp) {
  seen[sp[-1] & (BIG - 1)] = 1;
  CPJIT_CONTINUE(frame, sp);
}

CPJIT_CC int64_t op_test(struct cpjit_frame *frame, uint64_t *sp) {
  sp[-1] = seen[sp[-1] & (BIG - 1)];
  CPJIT_CONTINUE(frame, sp);
}

CPJIT_CC int64_t op_clear(struct cpjit_frame *frame, uint64_t *sp) {
  seen[sp[-1] & (BIG - 1)] = 0;
  CPJIT_CONTINUE(frame, sp);
}
