/* The op families: one member per op (OP, with OP_IS_<op> set) and place of its
 * destination D and source S (a pinned slot 0..4, or 5: the frame; see ops.h). Family
 * `rr` has both, family `r` only D (its ops name no source register). Family `x` has
 * neither: its ops are rare in hot code (legacy packet loads, division, arithmetic shifts
 * by a register), so each has one member, which works on the frame with the pinned
 * registers stored there before and loaded back after (SYNCED), whatever the places of its
 * registers: 18 stencils instead of 408. */
#include "ops.h"

#ifndef D
#define D 5
#define SYNCED 1
#endif
#ifndef S
#define S 5
#endif

/* Family `ri` (SMALL_IMM): the compiler passes only immediates in 0..2^31, for which
 * sign- and zero-extending agree, so on x86-64 ELF the operand's symbol address is the
 * value as any instruction reads it (LLVM folds it into compares' imm32 and lea's disp32
 * sign-extended, into `movl` zero-extended) and the general member's `mov`, `cltq` (or
 * `mov %eax, %eax`) pair goes. Elsewhere the same value, read as the general members do. */
#ifdef SMALL_IMM
#undef IMM64
#undef IMM32
#undef IMM32X
#if defined(__x86_64__) && !defined(__APPLE__) && !defined(_WIN32)
#define IMM64 ((uint64_t)AT(IMM))
#else
#define IMM64 ((uint64_t)(uint32_t)CPJIT_NARROW(IMM, s32))
#endif
#define IMM32 ((uint32_t)IMM64)
#define IMM32X IMM64
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define SLOT_0 s.v0
#define SLOT_1 s.v1
#define SLOT_2 s.v2
#define SLOT_3 s.p0
#define SLOT_4 s.p1
#if D == 5
#define DREG FRAME_AT(DST_AT)
#else
#define DREG CAT(SLOT_, D)
#endif
#if S == 5
#define SREG FRAME_AT(SRC_AT)
#else
#define SREG CAT(SLOT_, S)
#endif

/* OPDEF(name, body): the member's op if it is op `name` (OP_IS_name defined to 1). */
#define PROBE_1 ~, 1
#define SECOND_(a, b, ...) b
#define SECOND(...) SECOND_(__VA_ARGS__, 0, 0)
#define IS_ONE(x) SECOND(CAT(PROBE_, x))
#define WHEN_1(...) __VA_ARGS__
#define WHEN_0(...)
#ifdef SYNCED
#define BODY(...) SYNC_OUT(); __VA_ARGS__; SYNC_IN()
#else
#define BODY(...) __VA_ARGS__
#endif
#define OPDEF(name, ...)                                                     \
  CAT(WHEN_, IS_ONE(OP_IS_##name))(EBPF_OP(op_member, BODY(__VA_ARGS__)))
#define JDEF(name, INIT, COND)                                               \
  CAT(WHEN_, IS_ONE(OP_IS_##name))(                                         \
      CPJIT_CACHED_OP(op_member, 3, 3) {                                     \
        CPJIT_STACK(s, 3);                                                   \
        struct cpjit_frame *f = frame;                                       \
        (void)f;                                                             \
        INIT;                                                                \
        if (COND) EBPF_JUMP();                                               \
        CPJIT_CONTINUE_CACHED(frame, s, 3);                                  \
      })

/* XDEF(name, body): an op that leaves the trace (its body returns a status). */
#define XDEF(name, ...)                                                      \
  CAT(WHEN_, IS_ONE(OP_IS_##name))(                                         \
      CPJIT_CACHED_OP(op_member, 3, 3) {                                     \
        CPJIT_STACK(s, 3);                                                   \
        struct cpjit_frame *f = frame;                                       \
        (void)s;                                                             \
        (void)f;                                                             \
        __VA_ARGS__;                                                         \
      })

/* ---- ALU64: d, s are the 64-bit operands; the result replaces dst. ---- */
#define ALU64(name, EXPR)                                                    \
  OPDEF(name##64_imm, uint64_t d = DREG; uint64_t x = IMM64; DREG = (EXPR))  \
  OPDEF(name##64_reg, uint64_t d = DREG; uint64_t x = SREG; DREG = (EXPR))
ALU64(add, d + x)
ALU64(sub, d - x)
ALU64(mul, d * x)
ALU64(div, x == 0 ? 0 : d / x)
ALU64(or, d | x)
ALU64(and, d & x)
ALU64(lsh, d << (x & 63))
ALU64(rsh, d >> (x & 63))
ALU64(mod, x == 0 ? d : d % x)
ALU64(xor, d ^ x)
ALU64(mov, ((void)d, x))
ALU64(arsh, (uint64_t)((int64_t)d >> (x & 63)))
OPDEF(neg64, DREG = -DREG)

/* ---- ALU32: d, x are the low halves; the result is zero-extended. ---- */
#define ALU32(name, EXPR)                                                    \
  OPDEF(name##32_imm, uint32_t d = (uint32_t)DREG; uint32_t x = IMM32;       \
        DREG = (uint64_t)(uint32_t)(EXPR))                                   \
  OPDEF(name##32_reg, uint32_t d = (uint32_t)DREG; uint32_t x = (uint32_t)SREG; \
        DREG = (uint64_t)(uint32_t)(EXPR))
ALU32(add, d + x)
ALU32(sub, d - x)
ALU32(mul, d * x)
ALU32(div, x == 0 ? 0 : d / x)
ALU32(or, d | x)
ALU32(and, d & x)
ALU32(lsh, d << (x & 31))
ALU32(rsh, d >> (x & 31))
ALU32(xor, d ^ x)
ALU32(mov, ((void)d, x))
ALU32(arsh, (uint32_t)((int32_t)d >> (x & 31)))
OPDEF(neg32, DREG = (uint64_t)(uint32_t)(0u - (uint32_t)DREG))
/* MOD32 by zero leaves the whole 64-bit register unchanged (rbpf). */
OPDEF(mod32_imm, uint64_t d = DREG; uint32_t x = IMM32;
      if (x != 0) DREG = (uint64_t)((uint32_t)d % x))
OPDEF(mod32_reg, uint64_t d = DREG; uint32_t x = (uint32_t)SREG;
      if (x != 0) DREG = (uint64_t)((uint32_t)d % x))

/* ---- Byte order (little-endian hosts: LE truncates, BE swaps). ---- */
OPDEF(le16, DREG = (uint16_t)DREG)
OPDEF(le32, DREG = (uint32_t)DREG)
OPDEF(be16, DREG = __builtin_bswap16((uint16_t)DREG))
OPDEF(be32, DREG = __builtin_bswap32((uint32_t)DREG))
OPDEF(be64, DREG = __builtin_bswap64(DREG))

/* ---- LD_DW: a 64-bit immediate. ---- */
OPDEF(lddw, DREG = CPJIT_OPERAND(VALUE))

/* ---- Memory: every access checked against the three regions first. An access outside
 * them leaves the trace from the op's cold part (registers unchanged: the address is
 * recomputed from the base), with the instruction's index (IDX), the address and the
 * width. So the op's fault path is a single conditional branch, its continuation falls
 * through, and an access is one instance (a fault exit after the program was a second,
 * with its jump target). ---- */
/* An access's fault at BASE + OFF64 of 1 << K bytes. The base read again behind the
 * barrier: without it LLVM reshapes the hot check to share the address with this cold
 * code (on x86-64 `mov`, `neg`, `add`, `add` where `lea`, `sub` check it). */
#define ACCESS_FAULT(STATUS, BASE, K)                                        \
  do {                                                                       \
    uint64_t base = (BASE);                                                  \
    CPJIT_OPAQUE(base);                                                      \
    FAULT(STATUS, base + OFF64, 1u << (K));                                  \
  } while (0)
/* LDX: D the destination, S the base. */
#define LDX(name, T, K)                                                      \
  OPDEF(name, uint64_t a = SREG + OFF64;                                     \
        if (!ebpf_in_bounds(f, a, K))                                        \
            ACCESS_FAULT(EBPF_OOB_LOAD, SREG, K);                           \
        DREG = (uint64_t)*(const T *)a)
LDX(ldxb, uint8_t, 0)
LDX(ldxh, u16u, 1)
LDX(ldxw, u32u, 2)
LDX(ldxdw, u64u, 3)
/* ST / STX: D the base, S the value. */
#define STORE(name, T, K, VAL)                                               \
  OPDEF(name, uint64_t a = DREG + OFF64;                                     \
        if (!ebpf_in_bounds(f, a, K))                                        \
            ACCESS_FAULT(EBPF_OOB_STORE, DREG, K);                          \
        *(T *)a = (T)(VAL))
STORE(stb, uint8_t, 0, IMM32)
STORE(sth, u16u, 1, IMM32)
STORE(stw, u32u, 2, IMM32)
STORE(stdw, u64u, 3, IMM64)
STORE(stxb, uint8_t, 0, SREG)
STORE(stxh, u16u, 1, SREG)
STORE(stxw, u32u, 2, SREG)
STORE(stxdw, u64u, 3, SREG)
/* The same without the check (`<op>_u`), for the copy of a loop whose guard (below) proved
 * every access of the copy inside the memory (src/loops.rs). */
#define LDXU(name, T) OPDEF(name##_u, DREG = (uint64_t)*(const T *)(SREG + OFF64))
LDXU(ldxb, uint8_t)
LDXU(ldxh, u16u)
LDXU(ldxw, u32u)
LDXU(ldxdw, u64u)
#define STOREU(name, T, VAL) OPDEF(name##_u, *(T *)(DREG + OFF64) = (T)(VAL))
STOREU(stb, uint8_t, IMM32)
STOREU(sth, u16u, IMM32)
STOREU(stw, u32u, IMM32)
STOREU(stdw, u64u, IMM64)
STOREU(stxb, uint8_t, SREG)
STOREU(stxh, u16u, SREG)
STOREU(stxw, u32u, SREG)
STOREU(stxdw, u64u, SREG)

/* The guard of a loop `head: ... add p, STEP ... jlt p, q, head` whose accesses are all at
 * p plus a constant (src/emit/loops.rs): with p (D) and q (S) at the loop's entry, p at the
 * accesses takes the values p + k STEP below q, the last of them p + last, so the accesses
 * lie in [p + lo, p + last + lo + SPAN) (p + lo: OFF, biased as an access's offset). If
 * p < q, q + STEP does not wrap (p stays below q + STEP) and that range lies inside the
 * memory (size: lim[1][0]), it jumps to the loop's unchecked copy; else the loop runs as
 * written, every access checked. Each test keeps the next one's sum from wrapping:
 * n = q - p <= size and rel <= size, with size below 2^63 (a slice's). */
JDEF(loop_guard, uint64_t p = DREG; uint64_t q = SREG; uint64_t n = q - p;
     uint64_t step = IMM64; uint64_t size = f->lim[1][0];
     uint64_t rel = (p + AT(OFF)) - f->mem_biased;
     uint64_t span = (uint64_t)CPJIT_NARROW(SPAN, u32);
     /* (n - 1) rounded down to a multiple of the step, without a division for a power
      * of two. */
     uint64_t last = (step & (step - 1)) == 0 ? (n - 1) & (0 - step) : (n - 1) - (n - 1) % step,
     p < q && q <= 0 - step && n <= size && rel <= size && rel + last + span <= size)

/* The guard of a loop `head: jge i, N, out; ... ja head` whose accesses are all at b + i
 * plus a constant, with b (D) a register the loop never writes and b + i computed from i
 * as the head tested it (src/emit/loops.rs): i is below N at every access, so the accesses
 * lie in [b + lo, b + N - 1 + lo + SPAN) (b + lo: OFF, biased as an access's offset). If
 * that range lies inside the memory it jumps to the loop's unchecked copy; else the loop
 * runs as written. N - 1 < size and rel <= size keep the sum from wrapping. */
JDEF(index_guard, uint64_t n = IMM32X; uint64_t size = f->lim[1][0];
     uint64_t rel = (DREG + AT(OFF)) - f->mem_biased;
     uint64_t span = (uint64_t)CPJIT_NARROW(SPAN, u32),
     n - 1 < size && rel <= size && rel + (n - 1) + span <= size)

/* LD_ABS / LD_IND: D is where r0 lives, S the index register. rbpf checks 8 bytes. */
#define LDABS(name, T, ADDR)                                                 \
  OPDEF(name, uint64_t a = (ADDR);                                           \
        if (!ebpf_in_bounds(f, a, 3)) FAULT(EBPF_OOB_LOAD, a, 8);            \
        DREG = (uint64_t)*(const T *)a)
LDABS(ldabsb, uint8_t, f->mem_lo + IMM32)
LDABS(ldabsh, u16u, f->mem_lo + IMM32)
LDABS(ldabsw, u32u, f->mem_lo + IMM32)
LDABS(ldabsdw, u64u, f->mem_lo + IMM32)
LDABS(ldindb, uint8_t, f->mem_lo + SREG + IMM32)
LDABS(ldindh, u16u, f->mem_lo + SREG + IMM32)
LDABS(ldindw, u32u, f->mem_lo + SREG + IMM32)
LDABS(ldinddw, u64u, f->mem_lo + SREG + IMM32)

/* ---- EXIT in a program without local calls: r0 (D its place) into the frame, and leave. */
#if D == 5
#define R0_OUT() ((void)0)
#else
#define R0_OUT() (f->r[0] = DREG)
#endif
XDEF(ret, R0_OUT(); return EBPF_OK)

/* ---- A helper call: r0 = helper(r1, r2, r3, r4, r5), called directly (ops.h, CALL_HELPER); D
 * is where r0 lives, S where r1 lives (the registers a helper loop carries), r2..r5 are read
 * from their homes after SYNC_OUT. ---- */
#ifndef ARGS
OPDEF(call_helper, SYNC_OUT_OPERANDS();
      uint64_t r0 = CALL_HELPER(SREG, f->r[2], f->r[3], f->r[4], f->r[5]);
      SYNC_IN_CLOBBERED(); DREG = r0)
#else
/* Family `call` (ARGS): the compiler found (src/emit.rs, `lean_call`) that each of r2..r5
 * lives in the frame or in the slot of the register a C call passes it in on x86-64 (r2 in
 * slot 4, rsi: ARGS bit 0; r3 in slot 2, rdx: bit 1), and that the registers in the slots a
 * C call clobbers there (2, 3, 4) are not read after the call before they are written. So
 * nothing is stored or loaded back: the arguments come from their slots or homes, and the
 * slots' values afterwards are whatever the registers hold (LLVM zeroes them: a `xor` each,
 * which the CPU does not execute).
 * The bench's helper loop becomes the call and a move of r0. */
#if ARGS & 1
#define ARG2 s.p1
#else
#define ARG2 f->r[2]
#endif
#if ARGS & 2
#define ARG3 s.v2
#else
#define ARG3 f->r[3]
#endif
#define ANY_VALUE(x) __builtin_nondeterministic_value(x)
OPDEF(call_helper, uint64_t r0 = CALL_HELPER(SREG, ARG2, ARG3, f->r[4], f->r[5]);
      s.v2 = ANY_VALUE(s.v2); s.p0 = ANY_VALUE(s.p0); s.p1 = ANY_VALUE(s.p1); DREG = r0)
#endif

/* ---- Jumps: JUMP when the condition holds. ---- */
/* JMP: immediates zero-extended for the unsigned compares, sign-extended otherwise. */
#define J64(name, XIMM, COND)                                                \
  JDEF(name##_imm, uint64_t d = DREG; uint64_t x = (XIMM), COND)             \
  JDEF(name##_reg, uint64_t d = DREG; uint64_t x = SREG, COND)
J64(jeq, IMM32X, d == x)
J64(jgt, IMM32X, d > x)
J64(jge, IMM32X, d >= x)
J64(jlt, IMM32X, d < x)
J64(jle, IMM32X, d <= x)
J64(jset, IMM64, (d & x) != 0)
J64(jne, IMM32X, d != x)
J64(jsgt, IMM64, (int64_t)d > (int64_t)x)
J64(jsge, IMM64, (int64_t)d >= (int64_t)x)
J64(jslt, IMM64, (int64_t)d < (int64_t)x)
J64(jsle, IMM64, (int64_t)d <= (int64_t)x)
/* JMP32: the low halves. */
#define J32(name, COND)                                                      \
  JDEF(name##32_imm, uint32_t d = (uint32_t)DREG; uint32_t x = IMM32, COND)  \
  JDEF(name##32_reg, uint32_t d = (uint32_t)DREG; uint32_t x = (uint32_t)SREG, COND)
J32(jeq, d == x)
J32(jgt, d > x)
J32(jge, d >= x)
J32(jlt, d < x)
J32(jle, d <= x)
J32(jset, (d & x) != 0)
J32(jne, d != x)
J32(jsgt, (int32_t)d > (int32_t)x)
J32(jsge, (int32_t)d >= (int32_t)x)
J32(jslt, (int32_t)d < (int32_t)x)
J32(jsle, (int32_t)d <= (int32_t)x)
