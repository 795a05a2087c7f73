/* stack.h: the state the stack-jit ops share with the Rust side (src/jit.rs mirrors it).
 *
 * The value stack lives in memory the Rust side allocates; `sp` (the ops' second argument)
 * points one past its top value, and cached ops keep up to three top values in registers
 * (cpjit.h, "Register-cached stack values"). */
#ifndef STACK_H
#define STACK_H

#include "cpjit.h"

/* The number of local variables (`load`/`store` operands are below it). */
#define STACK_LOCALS 16

/* The frame: the locals and the output, only read by the helper; `#[repr(C)] struct
 * Frame` in Rust. */
struct cpjit_frame {
  int64_t locals[STACK_LOCALS];
  void *out;
};

/* Helpers, defined in Rust and called with the platform's C calling convention. */
extern void stack_print(struct cpjit_frame *frame, int64_t value);
extern int64_t stack_mix(int64_t a, int64_t b);

#endif /* STACK_H */
