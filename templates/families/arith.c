/* arith.c: the kit's test family (manifest.toml, [[family]] `test_arith`). Compiled once per
 * member: CPJIT_TEST_OP is the list element (add, sub, xor), SCALE and SHIFT the variant
 * parameters, each a -D define. The one stencil function is renamed by the family's rule
 * to op_test_family_<op>_<SCALE>_<SHIFT>:
 *   top = ((top OP OPERAND0) * SCALE) << SHIFT
 * Run on every target by conformance/tests/families.rs, which looks members up by name.
 */
#include "cpjit.h"

#define CPJIT_TEST_OP_add(a, b) ((a) + (b))
#define CPJIT_TEST_OP_sub(a, b) ((a) - (b))
#define CPJIT_TEST_OP_xor(a, b) ((a) ^ (b))
#define CPJIT_TEST_CAT(a, b) a##b
#define CPJIT_TEST_APPLY(op, a, b) CPJIT_TEST_CAT(CPJIT_TEST_OP_, op)(a, b)

CPJIT_DECLARE_OPERAND(OPERAND0);

CPJIT_CC int64_t op_test_family(struct cpjit_frame *frame, uint64_t *sp) {
  uint64_t x = CPJIT_TEST_APPLY(CPJIT_TEST_OP, sp[-1], CPJIT_OPERAND(OPERAND0));
  sp[-1] = (x * SCALE) << SHIFT;
  CPJIT_CONTINUE(frame, sp);
}
