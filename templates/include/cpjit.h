/* cpjit.h: conventions shared by every stencil of a template set.
 *
 * A stencil is a `preserve_none` function (the standard convention on RISC-V) with the
 * signature `cpjit_op`. Its holes are
 * extern symbols with the `_JIT_` prefix:
 *   - `_JIT_CONTINUE`            the next instance in the trace (musttail call);
 *   - `_JIT_<NAME>_TARGET`       a jump target named by the caller (musttail call);
 *   - any other `_JIT_<NAME>`    a 64-bit operand, read as the *address* of an extern.
 * Any other undefined symbol is an external helper resolved by the runtime's caller.
 *
 * Operands are read through CPJIT_OPERAND(NAME). On Windows the toolchain passes
 * -DCPJIT_DLLIMPORT_HOLES so that the address is loaded from an `__imp_` slot (a GOT slot the
 * runtime fills with the 64-bit value) instead of a 32-bit PC-relative `lea`.
 */
#ifndef CPJIT_H
#define CPJIT_H

#include <stdint.h>

#if defined(CPJIT_DLLIMPORT_HOLES)
#define CPJIT_HOLE extern __declspec(dllimport)
#else
#define CPJIT_HOLE extern
#endif

/* clang-19 has no preserve_none for RISC-V (it warns and ignores the attribute): there the
 * stencils use the standard convention, which musttail supports as well. */
#if defined(__riscv)
#define CPJIT_CC
#else
#define CPJIT_CC __attribute__((preserve_none))
#endif

/* Marks a writable static as deliberate per-instance data: every instance of every stencil
 * that references it gets its own private copy, initialised from the template. Writable
 * statics without this mark are rejected by the toolchain (naming the op and the variable),
 * because that private copy is rarely what C's `static` is meant to say. Shared state
 * belongs behind the frame pointer. Usage: `static CPJIT_INSTANCE_DATA int64_t counter;` */
#define CPJIT_INSTANCE_DATA __attribute__((annotate("cpjit.instance_data")))
#define CPJIT_MUSTTAIL __attribute__((musttail))

struct cpjit_frame;

/* Every op: the frame pointer and the value-stack pointer; returns an exit status. */
typedef CPJIT_CC int64_t cpjit_op(struct cpjit_frame *frame, uint64_t *sp);

/* Declares operand NAME (symbol _JIT_NAME); use CPJIT_OPERAND(NAME) to read it. */
#define CPJIT_DECLARE_OPERAND(NAME) CPJIT_HOLE char _JIT_##NAME
#define CPJIT_OPERAND(NAME) ((uint64_t)(uintptr_t)&_JIT_##NAME)

/* Narrow operands: NAME holds a value of a declared range RANGE, one of u8, s8, u16, s16,
 * u32, s32 (symbol _JIT_NAME, passed like any operand as a 64-bit value; signed values in
 * two's complement). The compiler may then use it as an immediate: on x86-64 ELF and COFF
 * the toolchain tells LLVM the symbol is an absolute value in that range, so it is folded
 * into instructions (imm32/disp32, hole kind X86Abs32); elsewhere it is a GOT load the
 * runtime relaxes into an immediate when it can (AArch64 movz/movk, Mach-O x86-64 mov imm32).
 * On every target the runtime refuses a value outside the range when it patches (the
 * stencil gets an Operand<RANGE> check hole). The declaration is an opaque struct type the
 * toolchain recognises by name; never dllimport on x86-64 (an absolute value has no
 * `__imp_` slot), always on Windows AArch64 (no absolute form, like 64-bit operands). */
#if defined(CPJIT_DLLIMPORT_HOLES) && !defined(__x86_64__)
#define CPJIT_NARROW_HOLE extern __declspec(dllimport)
#else
#define CPJIT_NARROW_HOLE extern
#endif
typedef uint8_t cpjit_narrow_u8;
typedef int8_t cpjit_narrow_s8;
typedef uint16_t cpjit_narrow_u16;
typedef int16_t cpjit_narrow_s16;
typedef uint32_t cpjit_narrow_u32;
typedef int32_t cpjit_narrow_s32;
#define CPJIT_DECLARE_NARROW(NAME, RANGE) \
  CPJIT_NARROW_HOLE const struct cpjit_narrow_##RANGE _JIT_##NAME
/* The operand's value, of the C type of RANGE (uint16_t for u16, int8_t for s8, ...). */
#define CPJIT_NARROW(NAME, RANGE) ((cpjit_narrow_##RANGE)(intptr_t)&_JIT_##NAME)

/* Continuations and jump targets are functions of type cpjit_op. */
extern cpjit_op _JIT_CONTINUE;
#define CPJIT_DECLARE_TARGET(NAME) extern cpjit_op _JIT_##NAME##_TARGET
#define CPJIT_CONTINUE(frame, sp) CPJIT_MUSTTAIL return _JIT_CONTINUE((frame), (sp))
#define CPJIT_JUMP(NAME, frame, sp) CPJIT_MUSTTAIL return _JIT_##NAME##_TARGET((frame), (sp))

#endif /* CPJIT_H */
