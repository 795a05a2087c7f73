/* narrow.c: narrow operands (CPJIT_DECLARE_NARROW), one op per declared range. Each reads
 * its operand as the C type of the range and folds it into an ALU operation, where the
 * compiler can use it as an immediate. Run on every target by conformance/tests/narrow.rs,
 * with values at both edges of each range and one past (which the runtime must refuse).
 * Keep names and semantics stable: that test is their reference.
 */
#include "cpjit.h"

CPJIT_DECLARE_NARROW(IMM_U8, u8);
CPJIT_DECLARE_NARROW(IMM_S8, s8);
CPJIT_DECLARE_NARROW(IMM_U16, u16);
CPJIT_DECLARE_NARROW(IMM_S16, s16);
CPJIT_DECLARE_NARROW(IMM_U32, u32);
CPJIT_DECLARE_NARROW(IMM_S32, s32);

/* top = top * 3 + (int64_t)IMM (the operand sign- or zero-extended by its C type) */
#define NARROW_OP(RANGE, NAME)                                                     \
  CPJIT_CC int64_t op_test_narrow_##RANGE(struct cpjit_frame *frame, uint64_t *sp) { \
    sp[-1] = sp[-1] * 3 + (uint64_t)(int64_t)CPJIT_NARROW(NAME, RANGE);            \
    CPJIT_CONTINUE(frame, sp);                                                     \
  }

NARROW_OP(u8, IMM_U8)
NARROW_OP(s8, IMM_S8)
NARROW_OP(u16, IMM_U16)
NARROW_OP(s16, IMM_S16)
NARROW_OP(u32, IMM_U32)
NARROW_OP(s32, IMM_S32)

/* Two narrow operands and a 64-bit one in one op: top = (top ^ U16) * S8 + OPERAND0 */
CPJIT_DECLARE_OPERAND(OPERAND0);
CPJIT_CC int64_t op_test_narrow_mixed(struct cpjit_frame *frame, uint64_t *sp) {
  uint64_t x = sp[-1] ^ CPJIT_NARROW(IMM_U16, u16);
  x *= (uint64_t)(int64_t)CPJIT_NARROW(IMM_S8, s8);
  sp[-1] = x + CPJIT_OPERAND(OPERAND0);
  CPJIT_CONTINUE(frame, sp);
}
