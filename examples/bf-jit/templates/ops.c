/* The Brainfuck ops. Runs of `+`/`-` and `<`/`>` are folded by the Rust parser into one
 * op with an operand; `[-]` and `[+]` become op_clear. Loops use jump targets: `[` jumps
 * past its `]` when the cell is zero, `]` jumps back to the first op of the body when it is
 * not. */
#include "bf.h"

CPJIT_DECLARE_OPERAND(DELTA);   /* the amount to add (mod 256) or the cells to move */
CPJIT_DECLARE_TARGET(EXIT);     /* `[`: the op after the matching `]` */
CPJIT_DECLARE_TARGET(BODY);     /* `]`: the first op of the loop body */

/* `+`/`-` run: cell += DELTA (mod 256). */
CPJIT_CC int64_t op_add(struct cpjit_frame *f, uint64_t *sp) {
  uint8_t *p = BF_CELL(sp);
  *p = (uint8_t)(*p + (uint8_t)CPJIT_OPERAND(DELTA));
  CPJIT_CONTINUE(f, sp);
}

/* `<`/`>` run: move by DELTA cells (two's complement), leaving with BF_TAPE_OVERFLOW when
 * the pointer would leave the tape. Checked before moving: forming a pointer outside the
 * tape would be undefined behaviour in C. */
CPJIT_CC int64_t op_move(struct cpjit_frame *f, uint64_t *sp) {
  uint8_t *p = BF_CELL(sp);
  intptr_t delta = (intptr_t)CPJIT_OPERAND(DELTA);
  if (delta < f->tape_lo - p || delta >= f->tape_hi - p) return BF_TAPE_OVERFLOW;
  CPJIT_CONTINUE(f, BF_SP(p + delta));
}

/* `[-]`: cell = 0. */
CPJIT_CC int64_t op_clear(struct cpjit_frame *f, uint64_t *sp) {
  *BF_CELL(sp) = 0;
  CPJIT_CONTINUE(f, sp);
}

/* `[`: skip the loop when the cell is zero. */
CPJIT_CC int64_t op_loop_start(struct cpjit_frame *f, uint64_t *sp) {
  if (*BF_CELL(sp) == 0) CPJIT_JUMP(EXIT, f, sp);
  CPJIT_CONTINUE(f, sp);
}

/* `]`: repeat the body while the cell is not zero. */
CPJIT_CC int64_t op_loop_end(struct cpjit_frame *f, uint64_t *sp) {
  if (*BF_CELL(sp) != 0) CPJIT_JUMP(BODY, f, sp);
  CPJIT_CONTINUE(f, sp);
}

/* `.`: write the cell. */
CPJIT_CC int64_t op_output(struct cpjit_frame *f, uint64_t *sp) {
  bf_putc(f, *BF_CELL(sp));
  CPJIT_CONTINUE(f, sp);
}

/* `,`: read into the cell; at the end of the input the cell keeps its value. */
CPJIT_CC int64_t op_input(struct cpjit_frame *f, uint64_t *sp) {
  int32_t c = bf_getc(f);
  if (c >= 0) *BF_CELL(sp) = (uint8_t)c;
  CPJIT_CONTINUE(f, sp);
}

/* The end of the program. */
CPJIT_CC int64_t op_exit(struct cpjit_frame *f, uint64_t *sp) {
  (void)f;
  (void)sp;
  return BF_OK;
}
