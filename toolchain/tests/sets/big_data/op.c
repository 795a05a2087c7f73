#include "cpjit.h"

#define BIG (32 << 20)
static CPJIT_INSTANCE_DATA unsigned char histogram[BIG];

CPJIT_CC int64_t op_histogram(struct cpjit_frame *frame, uint64_t *sp) {
  histogram[sp[-1] & (BIG - 1)] += 1;
  sp[-1] = histogram[sp[-1] & (BIG - 1)];
  CPJIT_CONTINUE(frame, sp);
}
