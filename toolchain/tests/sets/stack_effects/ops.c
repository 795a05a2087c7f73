/* Family template of the stack_effects test set: each element's body on the cached view;
 * `helper` hands the spilled stack to a C function (its memory use is not visible here). */
#include "cpjit.h"

extern void effects_helper(uint64_t *sp);

CPJIT_CACHED_OP(op_member, IN, OUT) {
  CPJIT_STACK(s, IN);
#if OP_IS_dup
  uint64_t top = cpjit_pop(&s);
  cpjit_push(&s, top);
  cpjit_push(&s, top);
#elif OP_IS_add
  uint64_t b = cpjit_pop(&s), a = cpjit_pop(&s);
  cpjit_push(&s, a + b);
#elif OP_IS_drop
  (void)cpjit_pop(&s);
#elif OP_IS_peek
  uint64_t b = cpjit_pop(&s), a = cpjit_pop(&s);
  if (a == b) effects_helper(0);
  cpjit_push(&s, a);
  cpjit_push(&s, b);
#elif OP_IS_helper
  uint64_t x = cpjit_pop(&s);
  cpjit_spill_all(&s);
  effects_helper(s.sp);
  cpjit_push(&s, x + 1);
#endif
  CPJIT_CONTINUE_CACHED(frame, s, OUT);
}
