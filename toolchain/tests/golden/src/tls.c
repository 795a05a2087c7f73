/* A thread-local access: the readers must reject it (stencils cannot hold TLS). */
#include "cpjit.h"

static _Thread_local int64_t per_thread;

CPJIT_CC int64_t op_tls(struct cpjit_frame *frame, uint64_t *sp) {
  per_thread += (int64_t)sp[-1];
  sp[-1] = (uint64_t)per_thread;
  CPJIT_CONTINUE(frame, sp);
}
