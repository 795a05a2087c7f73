/* Golden-test template set: one op per hole form the readers must normalize. */
#include "cpjit.h"

CPJIT_DECLARE_OPERAND(OPERAND0);
CPJIT_DECLARE_OPERAND(OPERAND1);
CPJIT_DECLARE_TARGET(JUMP);

extern int64_t cpjit_helper_mul_add(int64_t a, int64_t b, int64_t c);

static const int64_t table[8] = {3, 5, 7, 11, 13, 17, 19, 23}; /* read-only data */
static int64_t scratch[4] = {1, 2, 3, 4};                      /* writable data */
static int64_t counters[4];                                    /* zero-fill */
/* Data -> data relocations: a table of pointers, indexed at run time so it is not folded. */
static const int64_t *const pointers[2] = {&scratch[1], &table[3]};

/* A local helper the ops call without inlining: copied into each stencil that calls it. */
static __attribute__((noinline)) int64_t mix(int64_t x) {
  return (x ^ (x >> 7)) * 0x9e3779b97f4a7c15ll + counters[0];
}

/* 64-bit operand. */
CPJIT_CC int64_t op_load_const(struct cpjit_frame *frame, uint64_t *sp) {
  *sp++ = CPJIT_OPERAND(OPERAND0);
  CPJIT_CONTINUE(frame, sp);
}

/* Two operands, one external helper call. */
CPJIT_CC int64_t op_call_helper(struct cpjit_frame *frame, uint64_t *sp) {
  sp[-1] = (uint64_t)cpjit_helper_mul_add((int64_t)sp[-1], (int64_t)CPJIT_OPERAND(OPERAND0),
                                          (int64_t)CPJIT_OPERAND(OPERAND1));
  CPJIT_CONTINUE(frame, sp);
}

/* A read of a .rodata table. */
CPJIT_CC int64_t op_table(struct cpjit_frame *frame, uint64_t *sp) {
  sp[-1] = (uint64_t)table[sp[-1] & 7];
  CPJIT_CONTINUE(frame, sp);
}

/* A conditional jump to a target; falls through to the continuation otherwise. */
CPJIT_CC int64_t op_jump_nz(struct cpjit_frame *frame, uint64_t *sp) {
  uint64_t v = *--sp;
  if (v != 0) {
    CPJIT_JUMP(JUMP, frame, sp);
  }
  CPJIT_CONTINUE(frame, sp);
}

/* Writable static data and zero-fill. */
CPJIT_CC int64_t op_count(struct cpjit_frame *frame, uint64_t *sp) {
  counters[sp[-1] & 3] += 1;
  scratch[0] += (int64_t)sp[-1];
  CPJIT_CONTINUE(frame, sp);
}

/* Symbol + addend (&scratch[2]) and a data -> data reference. */
CPJIT_CC int64_t op_addr_addend(struct cpjit_frame *frame, uint64_t *sp) {
  *sp++ = (uint64_t)(uintptr_t)&scratch[2];
  sp[-3] = (uint64_t)*pointers[sp[-3] & 1];
  CPJIT_CONTINUE(frame, sp);
}

/* Calls the local helper. */
CPJIT_CC int64_t op_mix(struct cpjit_frame *frame, uint64_t *sp) {
  sp[-1] = (uint64_t)mix((int64_t)sp[-1]);
  CPJIT_CONTINUE(frame, sp);
}

/* Returns to the entry shim: no continuation at all. */
CPJIT_CC int64_t op_return(struct cpjit_frame *frame, uint64_t *sp) {
  (void)frame;
  return (int64_t)sp[-1];
}
