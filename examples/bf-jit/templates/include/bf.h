/* bf.h: the state the bf-jit ops share with the Rust side (src/jit.rs mirrors it).
 *
 * The data pointer travels in the ops' second argument (`sp` in cpjit.h terms; here a
 * `uint8_t *` cast to `uint64_t *`), so it stays in a register across the whole trace. */
#ifndef BF_H
#define BF_H

#include "cpjit.h"

/* The frame: the tape bounds and the I/O state; `#[repr(C)] struct Frame` in Rust. */
struct cpjit_frame {
  uint8_t *tape_lo; /* first cell */
  uint8_t *tape_hi; /* one past the last cell */
  void *io;         /* the Rust-side I/O state, only read by the helpers */
};

/* Exit statuses of a trace (and of the reference interpreter). */
#define BF_OK 0
#define BF_TAPE_OVERFLOW 1

/* Helpers, called with the platform's C calling convention. */
extern void bf_putc(struct cpjit_frame *frame, uint8_t byte);
/* The next input byte, or -1 at the end of the input (the cell is then left unchanged). */
extern int32_t bf_getc(struct cpjit_frame *frame);

#define BF_CELL(sp) ((uint8_t *)(sp))
#define BF_SP(cell) ((uint64_t *)(cell))

#endif /* BF_H */
