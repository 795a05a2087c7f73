#include "cpjit.h"

extern void allowed_fill(char *buffer);

CPJIT_CC int64_t op_guarded(struct cpjit_frame *frame, uint64_t *sp) {
  char buffer[64];
  allowed_fill(buffer);
  sp[0] = (uint64_t)buffer[3];
  CPJIT_CONTINUE(frame, sp + 1);
}
