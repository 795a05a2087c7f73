/* Compiled with -fstack-protector-all: the canary symbols must be rejected with a hint. */
#include "cpjit.h"

extern void cpjit_helper_fill(char *buf, int64_t n);

CPJIT_CC int64_t op_buffer(struct cpjit_frame *frame, uint64_t *sp) {
  char buf[64];
  cpjit_helper_fill(buf, (int64_t)sp[-1]);
  sp[-1] = (uint64_t)buf[sp[-1] & 63];
  CPJIT_CONTINUE(frame, sp);
}
