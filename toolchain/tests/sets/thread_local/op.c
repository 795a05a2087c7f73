#include "cpjit.h"

static _Thread_local int64_t tls_counter;

CPJIT_CC int64_t op_tls(struct cpjit_frame *frame, uint64_t *sp) {
  tls_counter += 1;
  sp[0] = (uint64_t)tls_counter;
  CPJIT_CONTINUE(frame, sp + 1);
}
