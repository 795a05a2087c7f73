/* ops.c: expands every op of ops.def into a stencil `op_NAME` (preserve_none, musttail
 * continuation). Jumps go to the hole `_JIT_JUMP_TARGET`; guards and raising ops leave the
 * trace through `_JIT_EXIT_TARGET`, an EXIT_TRACE instance that resumes the interpreter at
 * the current bytecode (so errors are raised by the interpreter, identically in all modes).
 */
#include "stencil.h"

CPJIT_DECLARE_TARGET(EXIT);

#define NEXT() CPJIT_CONTINUE(frame, sp)
#define JUMP() CPJIT_JUMP(JUMP, frame, sp)
#define DEOPT() CPJIT_JUMP(EXIT, frame, sp)
#define FAIL()                                                                  \
  do {                                                                          \
    frame->sp = sp;                                                             \
    return VM_EXIT_ERROR;                                                       \
  } while (0)
#define FOLLOW_LINK(slot)                                                       \
  do {                                                                          \
    cpjit_op *next_ = *(cpjit_op *const *)(uintptr_t)(slot);                    \
    if (next_) {                                                                \
      CPJIT_MUSTTAIL return next_(frame, sp);                                   \
    }                                                                           \
  } while (0)

#define OP(NAME, KINDS, POP, PUSH, ...)                                         \
  CPJIT_CC int64_t op_##NAME(struct cpjit_frame *frame, uint64_t *sp) __VA_ARGS__
#include "ops.def"
