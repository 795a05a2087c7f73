/* Family template of the cached_family test set: a cached push whose state comes from the
 * member's defines (IN and OUT, or S for both with KEEP), given to CPJIT_CACHED_OP swapped
 * with SWAPPED, or a plain op with UNCACHED. */
#include "cpjit.h"

#if defined(UNCACHED)
CPJIT_CC int64_t op_member(struct cpjit_frame *frame, uint64_t *sp) {
  CPJIT_CONTINUE(frame, sp);
}
#else
#if defined(KEEP)
#define ENTRY S
#define EXIT S
#elif defined(SWAPPED)
#define ENTRY OUT
#define EXIT IN
#else
#define ENTRY IN
#define EXIT OUT
#endif
CPJIT_CACHED_OP(op_member, ENTRY, EXIT) {
  CPJIT_STACK(s, ENTRY);
  cpjit_push(&s, cpjit_pop(&s) + 1);
  CPJIT_CONTINUE_CACHED(frame, s, EXIT);
}
#endif
