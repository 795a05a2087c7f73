#include "cpjit.h"

/* A `ret` in the middle of an op: the toolchain must name op_asm_ret. */
CPJIT_CC int64_t op_asm_ret(struct cpjit_frame *frame, uint64_t *sp) {
  __asm__ volatile("ret");
  CPJIT_CONTINUE(frame, sp);
}

/* CPJIT_OPAQUE's form made volatile: not cpjit.h's barrier, refused like any asm. */
CPJIT_CC int64_t op_asm_volatile_empty(struct cpjit_frame *frame, uint64_t *sp) {
  uint64_t x = sp[0];
  __asm__ volatile("" : "+r"(x));
  sp[0] = x;
  CPJIT_CONTINUE(frame, sp);
}

/* An empty template with a memory operand: refused. */
CPJIT_CC int64_t op_asm_memory_operand(struct cpjit_frame *frame, uint64_t *sp) {
  uint64_t x = sp[0];
  __asm__("" : "+m"(x));
  sp[0] = x;
  CPJIT_CONTINUE(frame, sp);
}

/* cpjit.h's opaque-value barrier, of a 64-bit value, a byte and a pointer: admitted. */
CPJIT_CC int64_t op_opaque(struct cpjit_frame *frame, uint64_t *sp) {
  uint64_t x = sp[0];
  uint8_t b = (uint8_t)sp[1];
  uint64_t *p = sp;
  CPJIT_OPAQUE(x);
  CPJIT_OPAQUE(b);
  CPJIT_OPAQUE(p);
  p[0] = x + b;
  CPJIT_CONTINUE(frame, sp);
}

CPJIT_CC int64_t op_fine(struct cpjit_frame *frame, uint64_t *sp) {
  CPJIT_CONTINUE(frame, sp);
}
