#include "cpjit.h"

__attribute__((noinline)) static int64_t twice(int64_t x) { return 2 * x; }
__attribute__((noinline)) static int64_t square(int64_t x) { return x * x; }
__attribute__((noinline)) static int64_t negate(int64_t x) { return -x; }

typedef int64_t (*unary)(int64_t);
static unary const table[4] = {twice, square, negate, twice};

/* pop k; replace top x by table[k & 3](x) (a jump table of static helpers) */
CPJIT_CC int64_t op_apply(struct cpjit_frame *frame, uint64_t *sp) {
  unary f = table[sp[-1] & 3];
  sp[-2] = (uint64_t)f((int64_t)sp[-2]);
  CPJIT_CONTINUE(frame, sp - 1);
}

/* replace top x by square(x) through a function pointer chosen at run time */
CPJIT_CC int64_t op_pick(struct cpjit_frame *frame, uint64_t *sp) {
  unary f = (sp[-1] & 1) ? square : negate;
  sp[-1] = (uint64_t)f((int64_t)sp[-1]);
  CPJIT_CONTINUE(frame, sp);
}
