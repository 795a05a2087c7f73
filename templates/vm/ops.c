/* ops.c: expands every op of ops.def into a stencil `op_NAME` (preserve_none, musttail
 * continuation). Jumps go to the hole `_JIT_JUMP_TARGET`; guards and raising ops leave the
 * trace through `_JIT_EXIT_TARGET`, an EXIT_TRACE instance that resumes the interpreter at
 * the current bytecode (so errors are raised by the interpreter, identically in all modes).
 */
#include "cpjit.h"
#include "vm_values.h"

#if defined(_WIN32) && defined(__x86_64__)
/* clang references _fltused from any MSVC-target object that uses floating point, to pull in
 * the CRT's float support; stencils have no CRT, so the symbol is defined (and unused) here. */
int _fltused = 0;
#endif

CPJIT_DECLARE_OPERAND(ARG0);
CPJIT_DECLARE_OPERAND(ARG1);
CPJIT_DECLARE_TARGET(JUMP);
CPJIT_DECLARE_TARGET(EXIT);

#define ARG0 CPJIT_OPERAND(ARG0)
#define ARG1 CPJIT_OPERAND(ARG1)
#define NEXT() CPJIT_CONTINUE(frame, sp)
#define JUMP() CPJIT_JUMP(JUMP, frame, sp)
#define DEOPT() CPJIT_JUMP(EXIT, frame, sp)
#define RAISE(e, a, b) DEOPT()
#define INVALIDATED() DEOPT()
#define FAIL()                                                                  \
  do {                                                                          \
    frame->sp = sp;                                                             \
    return VM_EXIT_ERROR;                                                       \
  } while (0)
#define BACKEDGE() ((void)0)
#define FOLLOW_LINK(slot)                                                       \
  do {                                                                          \
    cpjit_op *next_ = *(cpjit_op *const *)(uintptr_t)(slot);                    \
    if (next_) {                                                                \
      CPJIT_MUSTTAIL return next_(frame, sp);                                   \
    }                                                                           \
  } while (0)

/* Stencils run traces, which call through CALL_JIT (its call site names the pc). */
#define SAVE_CALL_PC() ((void)0)
/* A callee's compiled entry takes the ops' convention; a plain call returns its status. */
#define CALLEE_CODE(callee) ((callee)->code)
#define CALL_COMPILED(code, f, s) (((cpjit_op *)(code))((f), (s)))

#define OP(NAME, KINDS, POP, PUSH)                                              \
  CPJIT_CC int64_t op_##NAME(struct cpjit_frame *frame, uint64_t *sp)
#include "ops.def"
