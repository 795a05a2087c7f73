/* Family template of the listed_ops test set: one member per element of ops.def and WIDTH.
 * OP_NAME is the element; OP_IS_<element> is defined (as 1) for it alone, and every other
 * element's body expands to nothing, so clang never parses it. */
#include "cpjit.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
/* SELECTED(OP_IS_<NAME>) is 1 when the flag is defined as 1, 0 when it is not (an
 * undefined name stays a name, which no PROBE_ macro matches). */
#define PROBE_1 ~, 1
#define SECOND_(a, b, ...) b
#define SECOND(...) SECOND_(__VA_ARGS__, )
#define SELECTED(flag) SECOND(CAT(PROBE_, flag), 0)
/* An element's entry: its body behind its label if it is OP_NAME, nothing otherwise. */
#define EXPAND_0(label, ...)
#define EXPAND_1(label, ...) label: __VA_ARGS__ goto done;

/* Referenced by UNDEFINED's body: neither a hole nor an allowed symbol. */
extern int64_t listed_ops_undefined_counter;

CPJIT_CC int64_t op_member(struct cpjit_frame *frame, uint64_t *sp) {
  CAT(int, CAT(WIDTH, _t)) x = (CAT(int, CAT(WIDTH, _t)))sp[-1];
  /* A member whose element was not expanded (no `list_flag`, or an element not in
   * ops.def) leaves this label undeclared: clang refuses it. */
  goto CAT(case_, OP_NAME);
#define OP(NAME, ...) CAT(EXPAND_, SELECTED(OP_IS_##NAME))(case_##NAME, __VA_ARGS__)
#include "ops.def"
#undef OP
done:
  sp[-1] = (uint64_t)(int64_t)x;
  CPJIT_CONTINUE(frame, sp);
}
