/* stencil.h: what both stencil expansions of ops.def share -- ops.c (uncached, `sp` based)
 * and cached/ops.c (the register-cached family members): the operand and jump holes, the
 * macros whose meaning does not depend on where stack values live, and the call macros the
 * bodies of CALL and CALL_JIT need. Each includer then defines the stack macros, NEXT, JUMP,
 * DEOPT, FAIL and FOLLOW_LINK, and declares the exit hole (plain or spilled).
 */
#ifndef VM_STENCIL_H
#define VM_STENCIL_H

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

#define ARG0 CPJIT_OPERAND(ARG0)
#define ARG1 CPJIT_OPERAND(ARG1)

/* The locals an op's ARG0 and ARG1 name, read where the trace compiler passes their byte
 * offsets from the frame (LOCAL0_AT, LOCAL1_AT: the frame header plus 8 per local) as
 * narrow operands. On x86-64 ELF and COFF the symbol's address is the offset itself, which
 * LLVM then folds into the load's or store's displacement (no register holds an index;
 * reading it through CPJIT_NARROW's 16-bit cast would keep a zero extension); elsewhere
 * CPJIT_NARROW's immediate forms. */
CPJIT_DECLARE_NARROW(LOCAL0_AT, u16);
CPJIT_DECLARE_NARROW(LOCAL1_AT, u16);
#if defined(__x86_64__) && !defined(__APPLE__)
#define VM_LOCAL_AT(NAME) ((uintptr_t)&_JIT_##NAME)
#else
#define VM_LOCAL_AT(NAME) ((uintptr_t)CPJIT_NARROW(NAME, u16))
#endif
#define VM_FRAME_LOCAL(NAME) (*(uint64_t *)((char *)frame + VM_LOCAL_AT(NAME)))
#define LOCAL0 VM_FRAME_LOCAL(LOCAL0_AT)
#define LOCAL1 VM_FRAME_LOCAL(LOCAL1_AT)
/* COPY's and PUT's depth (ARG0, at most 65535): a narrow operand, so a cached member's
 * compiler knows its range. */
CPJIT_DECLARE_NARROW(STACK_DEPTH, u16);
#define DEPTH0 ((int)CPJIT_NARROW(STACK_DEPTH, u16))
/* FLOORDIV_INT_POW2's shift count (ARG0, 0 to 46): a narrow operand, an immediate on the
 * targets that have one (a GOT slot read as a byte is no hole kind the kit tests). */
CPJIT_DECLARE_NARROW(SHIFT_COUNT, u8);
#define SHIFT0 ((int)CPJIT_NARROW(SHIFT_COUNT, u8))
/* MUL_INT_CONST's factor (ARG0, 0 to 2**31 - 1): a narrow operand, so that the multiply
 * takes it as an immediate where the target has one. */
CPJIT_DECLARE_NARROW(MUL_FACTOR, s32);
#if defined(__x86_64__) && !defined(__APPLE__)
/* The symbol's address is the factor (as VM_LOCAL_AT's): CPJIT_NARROW's 32-bit read would
 * be sign-extended by a `cdqe` after a `mov r32, imm32`, not folded into the multiply. */
#define FACTOR0 ((int64_t)(intptr_t)&_JIT_MUL_FACTOR)
#else
#define FACTOR0 ((int64_t)CPJIT_NARROW(MUL_FACTOR, s32))
#endif
/* The operands of a division by a constant (ops.def, VM_DIV_BIAS and the rest), worked out
 * by the trace compiler (vm/src/trace/divide.rs). The shift is a narrow operand, as
 * SHIFT_COUNT. */
CPJIT_DECLARE_OPERAND(DIV_ABS);
CPJIT_DECLARE_OPERAND(DIV_BIAS);
CPJIT_DECLARE_OPERAND(DIV_BIAS_QUOTIENT);
CPJIT_DECLARE_NARROW(DIV_SHIFT, u8);
#define VM_DIV_ABS(d) CPJIT_OPERAND(DIV_ABS)
#define VM_DIV_SHIFT(d) ((int)CPJIT_NARROW(DIV_SHIFT, u8) & 63)
#define VM_DIV_BIAS(d) CPJIT_OPERAND(DIV_BIAS)
#define VM_DIV_BIAS_QUOTIENT(d) CPJIT_OPERAND(DIV_BIAS_QUOTIENT)
/* EXIT_TRACE's link slot (ARG1, ops.def) as halves: LINK_SLOT, the link slot's address
 * rebuilt from two 32-bit immediates rather than a 64-bit operand loaded from a GOT slot,
 * which cost an exit about 390 instructions to stitch. Its pc and exit (ARG0) are no
 * operands of the stencils: the VM keeps them in the exit's link block, VM_LINK_EXIT_AT
 * bytes past the link slot (vm_abi.h), where a stub reads them when it leaves to the
 * interpreter; as halves of an operand they were two holes more in every exit stub. */
CPJIT_DECLARE_OPERAND_HALVES(LINK_SLOT);
#define VM_EXIT_AT_OF(link) (*(const uint64_t *)(uintptr_t)((link) + VM_LINK_EXIT_AT))
#define VM_EXIT_PC_OF(link) ((int64_t)(VM_EXIT_AT_OF(link) >> 32))
#define VM_EXIT_AUX_OF(link) ((int64_t)(VM_EXIT_AT_OF(link) & 0xffffffffu))
#define EXIT_LINK CPJIT_OPERAND_HALVES(LINK_SLOT)
#define EXIT_PC VM_EXIT_PC_OF(EXIT_LINK)
#define EXIT_AUX VM_EXIT_AUX_OF(EXIT_LINK)
/* Errors and invalidation leave through the exit: the interpreter raises, identically in
 * every mode. */
#define RAISE(e, a, b) DEOPT()
#define INVALIDATED() DEOPT()
#define BACKEDGE() ((void)0)

/* Stencils run traces, which call through CALL_JIT (its call site names the pc). */
#define SAVE_CALL_PC() ((void)0)
/* A callee's compiled entry takes the ops' convention; a plain call returns its status. */
#define CALLEE_CODE(callee) ((callee)->code)
#define CALL_COMPILED(code, f, s) (((cpjit_op *)(code))((f), (s)))

#endif
