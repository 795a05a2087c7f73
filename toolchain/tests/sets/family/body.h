/* The one op body of the family test set: top = (top ELEM OPERAND0) << N. */
#define FAM_add(a, b) ((a) + (b))
#define FAM_xor(a, b) ((a) ^ (b))
#define FAM_CAT(a, b) a##b
#define FAM_APPLY(op, a, b) FAM_CAT(FAM_, op)(a, b)
CPJIT_DECLARE_OPERAND(OPERAND0);
#define FAM_BODY(frame, sp)                                                  \
  sp[-1] = FAM_APPLY(ELEM, sp[-1], CPJIT_OPERAND(OPERAND0)) << N;            \
  CPJIT_CONTINUE(frame, sp);
