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
 * two's complement). CPJIT_NARROW(NAME, RANGE) reads it as the C type of RANGE, patched
 * straight into the instructions that produce it:
 *   - x86-64 ELF and COFF: the toolchain tells LLVM the symbol is an absolute value in that
 *     range, so the compiler folds it into any instruction (imm32/disp32, hole X86Abs32);
 *   - x86-64 Mach-O (no sign-extended 32-bit absolute relocation in 64-bit code, so LLVM
 *     keeps GOT loads there): `mov r32, imm32` (X86_64_RELOC_UNSIGNED of 4 bytes, X86Abs32);
 *   - AArch64 ELF: `movz` of the low 16 bits, or `movz` lsl 16 + `movk` of the two halves
 *     of a 32-bit range (R_AARCH64_MOVW_UABS_G0_NC/G1_NC, Aarch64MovwG0/G1);
 *   - RISC-V: `addi rd, zero, lo12` for 8-bit ranges, `lui` + `addiw` of the hi20/lo12
 *     halves otherwise (R_RISCV_HI20/LO12_I, RiscvHi20/RiscvLo12I);
 *   - AArch64 Mach-O and COFF have no relocation for a `movz`/`movk` immediate (llvm-mc-19:
 *     "unknown AArch64 fixup kind!" / ":abs_g0_nc: unsupported on COFF targets"): a GOT
 *     load there, which the runtime relaxes into `movz`/`movk` when it patches.
 * On every target the runtime refuses a value outside the range when it patches (the
 * stencil gets an Operand<RANGE> check hole). The declaration is an opaque struct type the
 * toolchain recognises by name; never dllimport on x86-64 (an absolute value has no
 * `__imp_` slot), always on Windows AArch64 (no absolute form, like 64-bit operands);
 * hidden on Mach-O x86-64, which lets the `i` constraint name it in position-independent
 * code. */
#if defined(CPJIT_DLLIMPORT_HOLES) && !defined(__x86_64__)
#define CPJIT_NARROW_HOLE extern __declspec(dllimport)
#elif defined(__x86_64__) && defined(__APPLE__)
#define CPJIT_NARROW_HOLE extern __attribute__((visibility("hidden")))
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

/* Per target, where the operand is an immediate written by inline assembly: the
 * instructions per range (%0 the result of type cpjit_narrow_raw, %1 the symbol) and the
 * constraint that names the symbol. */
#if defined(__aarch64__) && defined(__ELF__)
#define CPJIT_NARROW_ASM_16 "movz %w0, #:abs_g0_nc:%c1"
#define CPJIT_NARROW_ASM_32 "movz %w0, #:abs_g1_nc:%c1\n\tmovk %w0, #:abs_g0_nc:%c1"
#define CPJIT_NARROW_ASM_u8 CPJIT_NARROW_ASM_16
#define CPJIT_NARROW_ASM_s8 CPJIT_NARROW_ASM_16
#define CPJIT_NARROW_ASM_u16 CPJIT_NARROW_ASM_16
#define CPJIT_NARROW_ASM_s16 CPJIT_NARROW_ASM_16
#define CPJIT_NARROW_ASM_u32 CPJIT_NARROW_ASM_32
#define CPJIT_NARROW_ASM_s32 CPJIT_NARROW_ASM_32
#define CPJIT_NARROW_SYMBOL "S"
typedef uint64_t cpjit_narrow_raw; /* the low 16 or 32 bits, zero-extended */
#elif defined(__riscv)
#define CPJIT_NARROW_ASM_12 "addi %0, zero, %%lo(%1)"
#define CPJIT_NARROW_ASM_32 "lui %0, %%hi(%1)\n\taddiw %0, %0, %%lo(%1)"
#define CPJIT_NARROW_ASM_u8 CPJIT_NARROW_ASM_12
#define CPJIT_NARROW_ASM_s8 CPJIT_NARROW_ASM_12
#define CPJIT_NARROW_ASM_u16 CPJIT_NARROW_ASM_32
#define CPJIT_NARROW_ASM_s16 CPJIT_NARROW_ASM_32
#define CPJIT_NARROW_ASM_u32 CPJIT_NARROW_ASM_32
#define CPJIT_NARROW_ASM_s32 CPJIT_NARROW_ASM_32
#define CPJIT_NARROW_SYMBOL "S"
typedef int64_t cpjit_narrow_raw; /* the low 12 or 32 bits, sign-extended */
#elif defined(__x86_64__) && defined(__APPLE__)
#define CPJIT_NARROW_ASM_u8 "movl %1, %k0"
#define CPJIT_NARROW_ASM_s8 CPJIT_NARROW_ASM_u8
#define CPJIT_NARROW_ASM_u16 CPJIT_NARROW_ASM_u8
#define CPJIT_NARROW_ASM_s16 CPJIT_NARROW_ASM_u8
#define CPJIT_NARROW_ASM_u32 CPJIT_NARROW_ASM_u8
#define CPJIT_NARROW_ASM_s32 CPJIT_NARROW_ASM_u8
#define CPJIT_NARROW_SYMBOL "i"
typedef uint64_t cpjit_narrow_raw; /* the low 32 bits, zero-extended */
#endif

/* The operand's value, of the C type of RANGE (uint16_t for u16, int8_t for s8, ...). */
#if defined(CPJIT_NARROW_SYMBOL)
/* The raw result is the value itself (given the runtime's range check) when a
 * zero-extended result meets an unsigned range, or a sign-extended one a signed range or an
 * unsigned one narrower than 32 bits: telling the compiler so spares it re-extending. Not
 * volatile: uses of one operand may be merged. */
#define CPJIT_NARROW_EXACT(T) \
  ((cpjit_narrow_raw)-1 < 0 ? (T)-1 < 0 || sizeof(T) < 4 : !((T)-1 < 0))
#define CPJIT_NARROW(NAME, RANGE)                                                    \
  ({                                                                                 \
    cpjit_narrow_raw cpjit_raw_;                                                     \
    __asm__(CPJIT_NARROW_ASM_##RANGE                                                 \
            : "=r"(cpjit_raw_)                                                       \
            : CPJIT_NARROW_SYMBOL(&_JIT_##NAME));                                    \
    if (CPJIT_NARROW_EXACT(cpjit_narrow_##RANGE) &&                                  \
        cpjit_raw_ != (cpjit_narrow_raw)(cpjit_narrow_##RANGE)cpjit_raw_)            \
      __builtin_unreachable();                                                       \
    (cpjit_narrow_##RANGE)cpjit_raw_;                                                \
  })
#else
#define CPJIT_NARROW(NAME, RANGE) ((cpjit_narrow_##RANGE)(intptr_t)&_JIT_##NAME)
#endif

/* Halves of a 64-bit operand: CPJIT_DECLARE_OPERAND_HALVES(NAME) declares the holes
 * _JIT_NAME_HI and _JIT_NAME_LO, each a u32 narrow operand patched in place (the
 * instructions of CPJIT_NARROW(..., u32) above, no GOT slot where the target has 32-bit
 * immediates), and CPJIT_OPERAND_HALVES(NAME) rebuilds the uint64_t from them. Both halves
 * belong to ONE operand of the stencil, NAME, which the caller passes as one 64-bit value:
 * the runtime fills _HI with its high 32 bits and _LO with its low 32 bits, so no value is
 * refused. CPJIT_OPERAND_HI(NAME) / CPJIT_OPERAND_LO(NAME) read one half as a uint32_t (a
 * stencil may use only one). The declared types (struct cpjit_operand_hi / _lo) are what
 * the toolchain recognises, not the names: a plain operand called FOO_HI stays plain. */
#define CPJIT_DECLARE_OPERAND_HALVES(NAME)                            \
  CPJIT_NARROW_HOLE const struct cpjit_operand_hi _JIT_##NAME##_HI; \
  CPJIT_NARROW_HOLE const struct cpjit_operand_lo _JIT_##NAME##_LO
#define CPJIT_OPERAND_HI(NAME) CPJIT_NARROW(NAME##_HI, u32)
#define CPJIT_OPERAND_LO(NAME) CPJIT_NARROW(NAME##_LO, u32)

/* An opaque-value barrier: CPJIT_OPAQUE(x) leaves the variable x (an integer of at most 64
 * bits or a pointer) as it is and emits no instruction, but from there on the compiler knows
 * nothing of x's value. Use it where LLVM would otherwise rematerialise what it knows, e.g.
 * a compare of a copy `c = d; CPJIT_OPAQUE(c); if (c == K) ...` does not tell it d == K on
 * the taken path, so it passes d's register on as it is instead of loading K into it in a
 * cold stub (at the price of the copy, a register move on every path where d stays live).
 * It is the one inline assembly the toolchain admits besides CPJIT_NARROW's: an empty
 * template, x read and written in one register, not volatile (an unused result is
 * dropped). */
#define CPJIT_OPAQUE(x) __asm__("" : "+r"(x))
#if defined(CPJIT_NARROW_SYMBOL)
#define CPJIT_OPERAND_HALVES(NAME) \
  (((uint64_t)CPJIT_OPERAND_HI(NAME) << 32) | (uint64_t)CPJIT_OPERAND_LO(NAME))
#else
/* The address is the half itself, which the compiler knows lies in [0, 2^32) (the
 * toolchain's !absolute_symbol): read it whole, so no truncation is emitted. */
#define CPJIT_OPERAND_HALVES(NAME)                          \
  (((uint64_t)(uintptr_t)&_JIT_##NAME##_HI << 32) |         \
   (uint64_t)(uintptr_t)&_JIT_##NAME##_LO)
#endif

/* Continuations and jump targets are functions of type cpjit_op. */
extern cpjit_op _JIT_CONTINUE;
#define CPJIT_DECLARE_TARGET(NAME) extern cpjit_op _JIT_##NAME##_TARGET
#define CPJIT_CONTINUE(frame, sp) CPJIT_MUSTTAIL return _JIT_CONTINUE((frame), (sp))
#define CPJIT_JUMP(NAME, frame, sp) CPJIT_MUSTTAIL return _JIT_##NAME##_TARGET((frame), (sp))

/* Register-cached stack values (templates/README.md, "Register-cached stack values").
 *
 * A cached op keeps up to CPJIT_CACHE_REGS values of the top of a value stack in argument
 * registers instead of memory: it is a `preserve_none` function (the standard convention on
 * RISC-V) with the signature `cpjit_cached_op`, i.e. the op's two pointer arguments followed
 * by CPJIT_CACHE_REGS uint64_t values c0, c1, c2, which every target passes in registers. Its
 * cache state is how many of them hold stack values on entry (IN) and on exit (OUT): with k
 * cached values the logical stack is the memory below `sp` followed by c0..c(k-1), c(k-1) on
 * top. Registers past the state hold nothing. All cached ops share one signature (musttail
 * needs caller and callee to match), so any op may follow any other; frame and sp are in the
 * same registers as in uncached ops, so cached and uncached ops mix freely in one trace when
 * the state between them is 0.
 *
 * CPJIT_CACHED_OP(NAME, IN, OUT) declares one, recording (IN, OUT) for the toolchain, which
 * checks the IR against it: a register past IN must not be read (it may only be passed on,
 * unchanged, in its own position), every register below OUT must be given a value when the
 * op continues or jumps, and none past OUT but an incoming register (after comparing two
 * registers equal, a compiler passes one for the other: a move at most, no value lost; to
 * a spilled target, below, a constant may go too). IN and OUT must expand to
 * integer literals (in a family, its variant parameters: -DIN=2). The body works on a view
 * of the stack, `struct cpjit_stack`, whose pushes and pops use the registers first and
 * memory beyond them; the view's state is a compile-time constant in every member, so the
 * compiler keeps the values in registers and emits only the memory traffic the state needs:
 *
 *   CPJIT_CACHED_OP(op_add, IN, OUT) {
 *     CPJIT_STACK(s, IN);                       // the view of the entry state
 *     uint64_t b = cpjit_pop(&s), a = cpjit_pop(&s);
 *     cpjit_push(&s, a + b);
 *     CPJIT_CONTINUE_CACHED(frame, s, OUT);     // spill or fill to OUT, then continue
 *   }
 *
 * The same body compiled with IN != OUT and no pops or pushes is a spill (IN > OUT: the
 * bottom IN-OUT registers are stored below the others) or a fill (IN < OUT). Before anything
 * that needs the whole stack in memory (a side exit, a helper that reads the stack),
 * cpjit_spill_all(&s) stores every cached value; s.sp is then the stack pointer.
 *
 * Pinned registers. A template set may define CPJIT_PIN_REGS (0, the default, or 2) before
 * including this header: its cached ops then take CPJIT_PIN_REGS more uint64_t arguments,
 * p0 and p1, between c1 and c2 (c2, the deepest cache register, is live least often: it goes
 * last, into the argument register x86-64's `mul` and `div` clobber, rdx, so that a pinned
 * local never has to be saved around one). They hold whatever the JIT keeps in registers across
 * ops (e.g. a loop's hottest locals, so that a loop-carried value never makes a round trip
 * through memory). They are the view's s.p0 and s.p1: an op may read and assign them, and
 * every continuation and jump passes them on (an op that does not name them passes its
 * incoming registers, which costs no instruction). The toolchain does not check them: which
 * op may read which pinned register is the JIT's protocol (the VM's: vm/src/jit.rs). Every
 * cached op of a set must agree on CPJIT_PIN_REGS, and an uncached op between two cached ops
 * loses them. */
#define CPJIT_CACHE_REGS 3

#ifndef CPJIT_PIN_REGS
#define CPJIT_PIN_REGS 0
#endif
#if CPJIT_PIN_REGS == 0
#define CPJIT_PIN_PARAMS_
#define CPJIT_PIN_FIELDS_
#define CPJIT_PIN_INIT_
#define CPJIT_PIN_ARGS_(S)
#elif CPJIT_PIN_REGS == 2
#define CPJIT_PIN_PARAMS_ uint64_t cpjit_p0, uint64_t cpjit_p1,
#define CPJIT_PIN_FIELDS_ uint64_t p0, p1;
#define CPJIT_PIN_INIT_ , cpjit_p0, cpjit_p1
#define CPJIT_PIN_ARGS_(S) (S).p0, (S).p1,
#else
#error "CPJIT_PIN_REGS must be 0 or 2"
#endif

/* Float cache slots. A template set (or a family, through its `defines`) may define
 * CPJIT_FLOAT_CACHE 1 before including this header: every cache slot k then has a second
 * register, f<k>, a `double` argument in the target's FP argument registers (xmm0-xmm2 on
 * x86-64 with preserve_none, System V and Windows alike; d0-d2 on AArch64; fa0-fa2 on
 * RISC-V's LP64D; the next ones after pinned float registers, below), and a cache state says which slots hold a float: state s caches
 * CPJIT_STATE_COUNT(s) values, slot k in f<k> where bit k of CPJIT_STATE_FLOATS(s) is set,
 * else in c<k>. States are numbered (count, floats) -> 2**count - 1 + floats: 0 is
 * nothing, 1 and 2 one int or float, 3..6 two values, 7..14 three. The view converts a
 * value (the same 64 bits, moved between register files) only where its class changes:
 * cpjit_pop gives an int, cpjit_pop_f a double, cpjit_push and cpjit_push_f push one of
 * each class, memory holds a float's bits, and settling to a state moves each slot to the
 * state's class.
 *
 * Pinned float registers. With CPJIT_PIN_FLOAT_REGS 2 or 4 the ops take that many more
 * `double` arguments, the pinned float registers q0..q3 (the view's s.q0 .. s.q3), passed on
 * by every continuation and jump like p0 and p1: a JIT keeps float locals in them across ops,
 * so that a loop-carried float never makes a round trip through memory. They come before
 * the float cache registers, so that they are in the same argument registers whether or not
 * an op has float slots: a set whose families mix members with and without
 * CPJIT_FLOAT_CACHE then agrees on them (every target passes the first eight `double`
 * arguments in FP registers: 4 pinned + 3 cache registers fit). As with p0 and p1, the
 * toolchain does not check them, and a helper call costs their saves (the C ABI keeps no FP
 * register across a call but Win64's xmm6-xmm15 and AArch64's d8-d15). */
#ifndef CPJIT_FLOAT_CACHE
#define CPJIT_FLOAT_CACHE 0
#endif
#ifndef CPJIT_PIN_FLOAT_REGS
#define CPJIT_PIN_FLOAT_REGS 0
#endif
#if CPJIT_FLOAT_CACHE == 0
#define CPJIT_FLOAT_REGS_ 0
#define CPJIT_FLOAT_PARAMS_
#define CPJIT_FLOAT_ARGS_(f0, f1, f2)
#define CPJIT_FLOAT_FIELDS_
#define CPJIT_FLOAT_INIT_(IN)
#define CPJIT_STATE_COUNT(S) (S)
#define CPJIT_STATE_FLOATS(S) 0u
#define CPJIT_STATE_LAST_ CPJIT_CACHE_REGS
#elif CPJIT_FLOAT_CACHE == 1
#define CPJIT_FLOAT_REGS_ 3 /* one per cache register: CPJIT_CACHE_REGS */
#define CPJIT_FLOAT_PARAMS_ , double cpjit_f0, double cpjit_f1, double cpjit_f2
#define CPJIT_FLOAT_ARGS_(f0, f1, f2) , (f0), (f1), (f2)
#define CPJIT_FLOAT_FIELDS_ double d0, d1, d2; unsigned floats;
#define CPJIT_FLOAT_INIT_(IN) , cpjit_f0, cpjit_f1, cpjit_f2, CPJIT_STATE_FLOATS(IN)
#define CPJIT_STATE_COUNT(S) ((S) >= 7 ? 3 : (S) >= 3 ? 2 : (S) >= 1 ? 1 : 0)
#define CPJIT_STATE_FLOATS(S) ((unsigned)((S) + 1 - (1 << CPJIT_STATE_COUNT(S))))
#define CPJIT_STATE_LAST_ 14
#else
#error "CPJIT_FLOAT_CACHE must be 0 or 1"
#endif
#if CPJIT_PIN_FLOAT_REGS == 0
#define CPJIT_PIN_FLOAT_PARAMS_
#define CPJIT_PIN_FLOAT_FIELDS_
#define CPJIT_PIN_FLOAT_INIT_
#define CPJIT_PIN_FLOAT_ARGS_(S)
#elif CPJIT_PIN_FLOAT_REGS == 2
#define CPJIT_PIN_FLOAT_PARAMS_ , double cpjit_q0, double cpjit_q1
#define CPJIT_PIN_FLOAT_FIELDS_ double q0, q1;
#define CPJIT_PIN_FLOAT_INIT_ , cpjit_q0, cpjit_q1
#define CPJIT_PIN_FLOAT_ARGS_(S) , (S).q0, (S).q1
#elif CPJIT_PIN_FLOAT_REGS == 4
#define CPJIT_PIN_FLOAT_PARAMS_ \
  , double cpjit_q0, double cpjit_q1, double cpjit_q2, double cpjit_q3
#define CPJIT_PIN_FLOAT_FIELDS_ double q0, q1, q2, q3;
#define CPJIT_PIN_FLOAT_INIT_ , cpjit_q0, cpjit_q1, cpjit_q2, cpjit_q3
#define CPJIT_PIN_FLOAT_ARGS_(S) , (S).q0, (S).q1, (S).q2, (S).q3
#else
#error "CPJIT_PIN_FLOAT_REGS must be 0, 2 or 4"
#endif

/* Every cached op: the frame, the value-stack pointer and CPJIT_CACHE_REGS cached values
 * (the pinned registers, if any, before the last), then the pinned float registers and the
 * float cache registers, if any. */
typedef CPJIT_CC int64_t cpjit_cached_op(struct cpjit_frame *frame, uint64_t *sp, uint64_t c0,
                                         uint64_t c1, CPJIT_PIN_PARAMS_ uint64_t c2
                                         CPJIT_PIN_FLOAT_PARAMS_ CPJIT_FLOAT_PARAMS_);
/* The arguments of a cached op, in order: sp, the cache registers and the pinned ones, the
 * pinned float registers and the float cache registers. */
#define CPJIT_CACHED_CALL_ARGS_(sp, c0, c1, c2, f0, f1, f2, S)                    \
  (sp), (c0), (c1), CPJIT_PIN_ARGS_(S)(c2) CPJIT_PIN_FLOAT_ARGS_(S)               \
      CPJIT_FLOAT_ARGS_(f0, f1, f2)
/* The same, passing the view's float registers on as they are (S's own incoming ones). */
#define CPJIT_CACHED_CALL_ARGS(sp, c0, c1, c2, S)                                 \
  CPJIT_CACHED_CALL_ARGS_(sp, c0, c1, c2, (S).d0, (S).d1, (S).d2, S)

/* `cpjit.cached IN,OUT,N,P,F,Q`: the states, the cache registers, the pinned registers, the
 * float cache registers (0 or N) and the pinned float registers. */
#define CPJIT_CACHED_NOTE_(IN, OUT, N, P, F, Q) \
  __attribute__((annotate("cpjit.cached " #IN "," #OUT "," #N "," #P "," #F "," #Q)))
#define CPJIT_CACHED_NOTE(IN, OUT, N, P, F, Q) CPJIT_CACHED_NOTE_(IN, OUT, N, P, F, Q)
#define CPJIT_CACHED_OP(NAME, IN, OUT)                                                 \
  _Static_assert((IN) >= 0 && (IN) <= CPJIT_STATE_LAST_ && (OUT) >= 0 &&             \
                     (OUT) <= CPJIT_STATE_LAST_,                                      \
                 "cache states are 0 to CPJIT_CACHE_REGS (14 with CPJIT_FLOAT_CACHE)"); \
  CPJIT_CC CPJIT_CACHED_NOTE(IN, OUT, CPJIT_CACHE_REGS, CPJIT_PIN_REGS,                \
                             CPJIT_FLOAT_REGS_, CPJIT_PIN_FLOAT_REGS)                \
  int64_t NAME(struct cpjit_frame *frame, uint64_t *sp, uint64_t cpjit_c0,             \
               uint64_t cpjit_c1, CPJIT_PIN_PARAMS_ uint64_t cpjit_c2                 \
               CPJIT_PIN_FLOAT_PARAMS_ CPJIT_FLOAT_PARAMS_)

/* The view of the value stack inside a cached op: memory up to sp, then v0..v(n-1) (with
 * CPJIT_FLOAT_CACHE, slot k in v<k> or, where bit k of `floats` is set, in d<k>). */
struct cpjit_stack {
  uint64_t *sp;
  uint64_t v0, v1, v2;
  int n;
  CPJIT_PIN_FIELDS_
  CPJIT_FLOAT_FIELDS_
  CPJIT_PIN_FLOAT_FIELDS_
};
#define CPJIT_CACHE_INLINE static inline __attribute__((always_inline))

/* Declares view S of the op's entry state IN (inside CPJIT_CACHED_OP). */
#define CPJIT_STACK(S, IN)                                                          \
  struct cpjit_stack S = {sp, cpjit_c0, cpjit_c1, cpjit_c2, CPJIT_STATE_COUNT(IN)  \
                          CPJIT_PIN_INIT_ CPJIT_FLOAT_INIT_(IN) CPJIT_PIN_FLOAT_INIT_}

/* A float's 64 bits and back: a move between register files, never a conversion. */
CPJIT_CACHE_INLINE uint64_t cpjit_float_bits(double d) {
  union { double d; uint64_t u; } x = {.d = d};
  return x.u;
}
CPJIT_CACHE_INLINE double cpjit_bits_float(uint64_t u) {
  union { uint64_t u; double d; } x = {.u = u};
  return x.d;
}

#if CPJIT_FLOAT_CACHE
/* Slot k's value as an int (its bits, for a float) and as a float. */
CPJIT_CACHE_INLINE uint64_t cpjit_slot_int_(const struct cpjit_stack *s, int k) {
  double d = k == 0 ? s->d0 : k == 1 ? s->d1 : s->d2;
  uint64_t v = k == 0 ? s->v0 : k == 1 ? s->v1 : s->v2;
  return (s->floats >> k & 1u) ? cpjit_float_bits(d) : v;
}
CPJIT_CACHE_INLINE double cpjit_slot_float_(const struct cpjit_stack *s, int k) {
  double d = k == 0 ? s->d0 : k == 1 ? s->d1 : s->d2;
  uint64_t v = k == 0 ? s->v0 : k == 1 ? s->v1 : s->v2;
  return (s->floats >> k & 1u) ? d : cpjit_bits_float(v);
}
/* Puts x (an int, or a float's bits when `is_float`) in slot k, of that class. */
CPJIT_CACHE_INLINE void cpjit_slot_set_(struct cpjit_stack *s, int k, uint64_t v, double d,
                                        int is_float) {
  switch (k) {
  case 0: s->v0 = v; s->d0 = d; break;
  case 1: s->v1 = v; s->d1 = d; break;
  default: s->v2 = v; s->d2 = d; break;
  }
  s->floats = is_float ? s->floats | 1u << k : s->floats & ~(1u << k);
}

/* Stores the bottom cached value to memory (the others move down one register). */
CPJIT_CACHE_INLINE void cpjit_spill_bottom(struct cpjit_stack *s) {
  *s->sp++ = cpjit_slot_int_(s, 0);
  s->v0 = s->v1;
  s->v1 = s->v2;
  s->d0 = s->d1;
  s->d1 = s->d2;
  s->floats >>= 1;
  s->n -= 1;
}
/* Loads the memory top into the bottom register, as an int (the others move up one). */
CPJIT_CACHE_INLINE void cpjit_fill_bottom(struct cpjit_stack *s) {
  s->v2 = s->v1;
  s->v1 = s->v0;
  s->d2 = s->d1;
  s->d1 = s->d0;
  s->v0 = *--s->sp;
  s->floats = s->floats << 1 & 7u;
  s->n += 1;
}
CPJIT_CACHE_INLINE uint64_t cpjit_pop(struct cpjit_stack *s) {
  if (s->n == 0) return *--s->sp;
  s->n -= 1;
  uint64_t x = cpjit_slot_int_(s, s->n);
  s->floats &= ~(1u << s->n);
  return x;
}
/* Pops a float: a float slot's register as it is, an int slot's or memory's bits moved. */
CPJIT_CACHE_INLINE double cpjit_pop_f(struct cpjit_stack *s) {
  if (s->n == 0) return cpjit_bits_float(*--s->sp);
  s->n -= 1;
  double x = cpjit_slot_float_(s, s->n);
  s->floats &= ~(1u << s->n);
  return x;
}
/* Pushes x into a register; with all registers full the bottom one is spilled first. */
CPJIT_CACHE_INLINE void cpjit_push(struct cpjit_stack *s, uint64_t x) {
  if (s->n == CPJIT_CACHE_REGS) cpjit_spill_bottom(s);
  cpjit_slot_set_(s, s->n++, x, 0.0, 0);
}
/* Pushes float x into a float slot (without CPJIT_FLOAT_CACHE, its bits into an int one). */
CPJIT_CACHE_INLINE void cpjit_push_f(struct cpjit_stack *s, double x) {
  if (s->n == CPJIT_CACHE_REGS) cpjit_spill_bottom(s);
  cpjit_slot_set_(s, s->n++, 0, x, 1);
}
/* Spills or fills until state `out` holds: its count of values cached, each slot in the
 * class the state gives it (moved between register files where it changes). */
CPJIT_CACHE_INLINE void cpjit_settle(struct cpjit_stack *s, int out) {
  while (s->n > CPJIT_STATE_COUNT(out)) cpjit_spill_bottom(s);
  while (s->n < CPJIT_STATE_COUNT(out)) cpjit_fill_bottom(s);
  for (int k = 0; k < s->n; k++) {
    unsigned want = CPJIT_STATE_FLOATS(out) >> k & 1u;
    if (want == (s->floats >> k & 1u)) continue;
    uint64_t bits = cpjit_slot_int_(s, k);
    cpjit_slot_set_(s, k, bits, cpjit_bits_float(bits), (int)want);
  }
}
#else
/* Without float slots, the view of ints only that cached ops had before float slots. */
/* Stores the bottom cached value to memory (the others move down one register). */
CPJIT_CACHE_INLINE void cpjit_spill_bottom(struct cpjit_stack *s) {
  *s->sp++ = s->v0;
  s->v0 = s->v1;
  s->v1 = s->v2;
  s->n -= 1;
}
/* Loads the memory top into the bottom register (the others move up one register). */
CPJIT_CACHE_INLINE void cpjit_fill_bottom(struct cpjit_stack *s) {
  s->v2 = s->v1;
  s->v1 = s->v0;
  s->v0 = *--s->sp;
  s->n += 1;
}
CPJIT_CACHE_INLINE uint64_t cpjit_pop(struct cpjit_stack *s) {
  switch (s->n) {
  case 3: s->n = 2; return s->v2;
  case 2: s->n = 1; return s->v1;
  case 1: s->n = 0; return s->v0;
  default: s->sp -= 1; return *s->sp;
  }
}
/* Pushes x into a register; with all registers full the bottom one is spilled first. */
CPJIT_CACHE_INLINE void cpjit_push(struct cpjit_stack *s, uint64_t x) {
  if (s->n == CPJIT_CACHE_REGS) cpjit_spill_bottom(s);
  switch (s->n++) {
  case 0: s->v0 = x; break;
  case 1: s->v1 = x; break;
  default: s->v2 = x; break;
  }
}
/* Spills or fills until exactly `out` values are cached. */
CPJIT_CACHE_INLINE void cpjit_settle(struct cpjit_stack *s, int out) {
  while (s->n > out) cpjit_spill_bottom(s);
  while (s->n < out) cpjit_fill_bottom(s);
}
/* Pushes float x into a slot as its bits; pops a value as a float. */
CPJIT_CACHE_INLINE void cpjit_push_f(struct cpjit_stack *s, double x) {
  cpjit_push(s, cpjit_float_bits(x));
}
CPJIT_CACHE_INLINE double cpjit_pop_f(struct cpjit_stack *s) {
  return cpjit_bits_float(cpjit_pop(s));
}
#endif
CPJIT_CACHE_INLINE void cpjit_spill_all(struct cpjit_stack *s) { cpjit_settle(s, 0); }

/* The registers a cached op passes on in state OUT: values below OUT; past it, nothing (an
 * undefined value: no instruction, and the register is free inside the op, so that an
 * instruction that clobbers it, like x86-64's `mul` clobbering rdx, needs no save). */
#define CPJIT_NOTHING_                                                             \
  __extension__({                                                                 \
    _Pragma("clang diagnostic push")                                              \
    _Pragma("clang diagnostic ignored \"-Wuninitialized\"")                      \
    uint64_t cpjit_nothing_;                                                      \
    cpjit_nothing_;                                                               \
    _Pragma("clang diagnostic pop")                                               \
  })
#if CPJIT_FLOAT_CACHE
#define CPJIT_NOTHING_F_                                                           \
  __extension__({                                                                 \
    _Pragma("clang diagnostic push")                                              \
    _Pragma("clang diagnostic ignored \"-Wuninitialized\"")                      \
    double cpjit_nothing_;                                                        \
    cpjit_nothing_;                                                               \
    _Pragma("clang diagnostic pop")                                               \
  })
/* Whether state OUT caches slot K as an int (`floats` 0) or as a float (1). */
#define CPJIT_SLOT_IS_(OUT, K, floats)                                             \
  (CPJIT_STATE_COUNT(OUT) > (K) && (CPJIT_STATE_FLOATS(OUT) >> (K) & 1u) == (floats))
#define CPJIT_CACHED_ARGS_(S, OUT)                                                  \
  CPJIT_CACHED_CALL_ARGS_((S).sp, CPJIT_SLOT_IS_(OUT, 0, 0) ? (S).v0 : CPJIT_NOTHING_, \
                          CPJIT_SLOT_IS_(OUT, 1, 0) ? (S).v1 : CPJIT_NOTHING_,     \
                          CPJIT_SLOT_IS_(OUT, 2, 0) ? (S).v2 : CPJIT_NOTHING_,     \
                          CPJIT_SLOT_IS_(OUT, 0, 1) ? (S).d0 : CPJIT_NOTHING_F_,   \
                          CPJIT_SLOT_IS_(OUT, 1, 1) ? (S).d1 : CPJIT_NOTHING_F_,   \
                          CPJIT_SLOT_IS_(OUT, 2, 1) ? (S).d2 : CPJIT_NOTHING_F_, S)
#else
#define CPJIT_CACHED_ARGS_(S, OUT)                                                  \
  CPJIT_CACHED_CALL_ARGS((S).sp, (OUT) > 0 ? (S).v0 : CPJIT_NOTHING_,             \
                         (OUT) > 1 ? (S).v1 : CPJIT_NOTHING_,                     \
                         (OUT) > 2 ? (S).v2 : CPJIT_NOTHING_, S)
#endif
/* Continues (or jumps to target NAME) with view S settled to state OUT. Both settle first,
 * so an op that may jump or continue should settle once (cpjit_settle) before branching. */
#define CPJIT_CONTINUE_CACHED(frame, S, OUT)                                   \
  do {                                                                         \
    cpjit_settle(&(S), (OUT));                                                 \
    CPJIT_MUSTTAIL return ((cpjit_cached_op *)&_JIT_CONTINUE)(                 \
        (frame), CPJIT_CACHED_ARGS_(S, OUT));                                  \
  } while (0)
#define CPJIT_JUMP_CACHED(NAME, frame, S, OUT)                                 \
  do {                                                                         \
    cpjit_settle(&(S), (OUT));                                                 \
    CPJIT_MUSTTAIL return ((cpjit_cached_op *)&_JIT_##NAME##_TARGET)(          \
        (frame), CPJIT_CACHED_ARGS_(S, OUT));                                  \
  } while (0)

/* A jump target that cached ops enter with nothing cached, whatever their OUT: a side exit
 * into uncached code (e.g. a stub that hands the stack to an interpreter). Declare it with
 * CPJIT_DECLARE_SPILLED_TARGET (it is an ordinary target for uncached ops) and jump to it
 * with CPJIT_JUMP_SPILLED, which stores every cached value first; the toolchain checks that
 * no jump to it passes a cached value. */
#define CPJIT_DECLARE_SPILLED_TARGET(NAME)                                     \
  CPJIT_DECLARE_TARGET(NAME) __attribute__((annotate("cpjit.spilled_target")))
#define CPJIT_JUMP_SPILLED(NAME, frame, S) CPJIT_JUMP_CACHED(NAME, frame, S, 0)

#endif /* CPJIT_H */
