#include "cpjit.h"

#define STEP(i) sp[(i) % 8] = sp[(i) % 8] * 31 + sp[((i) + 3) % 8] + (i);
#define STEP10(i) STEP(i) STEP(i + 1) STEP(i + 2) STEP(i + 3) STEP(i + 4) \
  STEP(i + 5) STEP(i + 6) STEP(i + 7) STEP(i + 8) STEP(i + 9)

CPJIT_CC int64_t op_huge(struct cpjit_frame *frame, uint64_t *sp) {
  STEP10(0) STEP10(10) STEP10(20)
  CPJIT_CONTINUE(frame, sp);
}

CPJIT_CC int64_t op_small(struct cpjit_frame *frame, uint64_t *sp) {
  CPJIT_CONTINUE(frame, sp + 1);
}
