/* datahole/ops.c: ops whose holes are declared as data and reached through their
 * addresses, the way real interpreters' templates often declare them (CPython's
 * `extern char _JIT_OPARG[]` and `extern void _JIT_CONTINUE`), instead of through cpjit.h.
 * The toolchain recognises holes by symbol, so a tail call through `&_JIT_CONTINUE` is the
 * continuation (musttail rule, elision, layout) and one through `&_JIT_<NAME>_TARGET` a
 * jump; conformance/tests/data_holes.rs runs these ops on every matrix row.
 *
 * This unit does not include cpjit.h: cpjit.h declares _JIT_CONTINUE as a function, and a
 * declaration of another type in the same unit would conflict. The few conventions it
 * needs are spelt out below with the same meaning as cpjit.h's.
 *
 * Keep names and semantics stable: conformance tests depend on them.
 */
#include <stdint.h>

#if defined(__riscv)
#define DATA_CC
#else
#define DATA_CC __attribute__((preserve_none))
#endif
#if defined(CPJIT_DLLIMPORT_HOLES)
#define DATA_HOLE extern __declspec(dllimport)
#else
#define DATA_HOLE extern
#endif

struct cpjit_frame;
typedef DATA_CC int64_t data_op(struct cpjit_frame *frame, uint64_t *sp);

DATA_HOLE char _JIT_DATA_OPERAND[];
extern void _JIT_CONTINUE;
extern void _JIT_DATA_ZERO_TARGET;

#define DATA_TAIL(hole) \
  __attribute__((musttail)) return ((data_op *)&(hole))(frame, sp)

/* top += DATA_OPERAND (an operand declared as an array, read through its address) */
DATA_CC int64_t op_test_data_add(struct cpjit_frame *frame, uint64_t *sp) {
  sp[-1] += (uint64_t)(uintptr_t)_JIT_DATA_OPERAND;
  DATA_TAIL(_JIT_CONTINUE);
}

/* if top == 0 jump to DATA_ZERO_TARGET (top stays), else --top and continue */
DATA_CC int64_t op_test_data_branch(struct cpjit_frame *frame, uint64_t *sp) {
  if (sp[-1] == 0) {
    DATA_TAIL(_JIT_DATA_ZERO_TARGET);
  }
  sp[-1] -= 1;
  DATA_TAIL(_JIT_CONTINUE);
}
