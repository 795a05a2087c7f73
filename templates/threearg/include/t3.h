/* t3.h: the conventions of the three-argument set (templates/threearg/), spelt out
 * without cpjit.h, whose continuation takes two arguments: every op and the shim take
 * (frame, value stack pointer, thread state) and return the exit status.
 *
 * Keep the structs in step with conformance/tests/three_arguments.rs (#[repr(C)] mirrors).
 */
#ifndef T3_H
#define T3_H
#include <stdint.h>

/* The ops' calling convention: preserve_none (no callee-saved registers), except on
 * RISC-V, where clang-19 has none (the target file's op_calling_convention says `c`). */
#if defined(__riscv)
#define T3_CC
#else
#define T3_CC __attribute__((preserve_none))
#endif

/* Windows x64 reaches holes through `__imp_` slots (the target file defines this). */
#if defined(CPJIT_DLLIMPORT_HOLES)
#define T3_HOLE extern __declspec(dllimport)
#else
#define T3_HOLE extern
#endif

struct t3_frame {
  uint64_t scale;
  uint64_t base;
};

struct t3_state {
  uint64_t bias;
  uint64_t counter;
  uint64_t steps;
};

typedef T3_CC int64_t t3_op(struct t3_frame *frame, uint64_t *sp, struct t3_state *ts);

/* The next instance; a jump target (`_JIT_<NAME>_TARGET`). */
extern t3_op _JIT_CONTINUE;
extern t3_op _JIT_LOOP_TARGET;

#define T3_CONTINUE(frame, sp, ts) __attribute__((musttail)) return _JIT_CONTINUE((frame), (sp), (ts))
#define T3_JUMP(frame, sp, ts) __attribute__((musttail)) return _JIT_LOOP_TARGET((frame), (sp), (ts))

#endif
