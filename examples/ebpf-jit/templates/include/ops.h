/* ops.h: what the ops (ops.c) and the op families (families/ops.c) share.
 *
 * Every op is a cached op (cpjit.h, "Register-cached stack values") in state 3 on entry and
 * exit, with two pinned registers (CPJIT_PIN_REGS, ebpf.h): the three cache registers c0,
 * c1, c2 and the pinned p0, p1 hold the five eBPF registers the compiler pinned for the
 * program (slots 0..4: the view's s.v0, s.v1, s.v2, s.p0, s.p1; x86-64 r14, r15, rdx, rdi,
 * rsi); every other eBPF register lives in the frame. An op in a family is compiled once per
 * place of its destination (D) and source (S): a slot 0..4, or 5 for the frame, where
 * DST_AT/SRC_AT give its byte offset. */
#ifndef EBPF_OPS_H
#define EBPF_OPS_H

#include "ebpf.h"

CPJIT_DECLARE_NARROW(DST_AT, u16);
CPJIT_DECLARE_NARROW(SRC_AT, u16);
CPJIT_DECLARE_NARROW(IMM, s32);
CPJIT_DECLARE_NARROW(OFF, u16); /* the offset + OFF_BIAS */
CPJIT_DECLARE_NARROW(IDX, u32);
CPJIT_DECLARE_NARROW(SITE, u32);
/* A loop guard's extent of the accesses past the lowest one (src/loops.rs). */
CPJIT_DECLARE_NARROW(SPAN, u32);
/* Where slot k's eBPF register lives in the frame (the scratch word r[11] if unused), as
 * operands for the helper call (hot: no load of the frame's pin_at). */
CPJIT_DECLARE_NARROW(PIN0_AT, u16);
CPJIT_DECLARE_NARROW(PIN1_AT, u16);
CPJIT_DECLARE_NARROW(PIN2_AT, u16);
CPJIT_DECLARE_NARROW(PIN3_AT, u16);
CPJIT_DECLARE_NARROW(PIN4_AT, u16);
CPJIT_DECLARE_OPERAND(VALUE);
CPJIT_DECLARE_OPERAND(FN);
CPJIT_DECLARE_OPERAND(DATA);
CPJIT_DECLARE_TARGET(JUMP);

/* A byte offset in the frame. On x86-64 ELF the operand's symbol address is the offset
 * itself, which LLVM folds into the access's displacement. */
#if defined(__x86_64__) && !defined(__APPLE__) && !defined(_WIN32)
#define AT(NAME) ((uintptr_t)&_JIT_##NAME)
#else
#define AT(NAME) ((uintptr_t)CPJIT_NARROW(NAME, u16))
#endif
#define FRAME_AT(NAME) (*(uint64_t *)((char *)f + AT(NAME)))
/* The immediate as rbpf's `insn.imm as u64` (sign-extended) and `insn.imm as u32`, and
 * the latter zero-extended. (On x86-64 ELF the narrow operand's address is its low 32
 * bits, but not to be used as a 64-bit value: LLVM then folds it into sign-extending
 * imm32 fields as well as zero-extending moves, so its meaning would depend on the
 * instruction chosen; CPJIT_NARROW's casts keep it exact.) */
#define IMM64 ((uint64_t)(int64_t)CPJIT_NARROW(IMM, s32))
#define IMM32 ((uint32_t)CPJIT_NARROW(IMM, s32))
#define IMM32X ((uint64_t)IMM32)
/* The offset, sign-extended. OFF holds it plus OFF_BIAS as a u16 (src/emit.rs): a signed
 * narrow operand is given to LLVM as its low 32 bits and extended by a cast, which costs
 * `mov $off, %eax; movswq %ax, %rax` per access on x86-64, while AT(OFF) - OFF_BIAS folds
 * into the access's displacement (the hole holds the low 32 bits of off, which the CPU
 * sign-extends). */
#define OFF_BIAS 0x8000
#define OFF64 ((uint64_t)((int64_t)AT(OFF) - OFF_BIAS))
#define INSN ((uint64_t)CPJIT_NARROW(IDX, u32))

typedef uint16_t u16u __attribute__((aligned(1), may_alias));
typedef uint32_t u32u __attribute__((aligned(1), may_alias));
typedef uint64_t u64u __attribute__((aligned(1), may_alias));

/* An op: `f` the frame, `s` the view whose v0..v2, p0, p1 are the pinned registers. */
#define EBPF_OP(NAME, ...)                                                   \
  CPJIT_CACHED_OP(NAME, 3, 3) {                                              \
    CPJIT_STACK(s, 3);                                                       \
    struct cpjit_frame *f = frame;                                           \
    __VA_ARGS__;                                                             \
    CPJIT_CONTINUE_CACHED(frame, s, 3);                                      \
  }
#define EBPF_JUMP() CPJIT_JUMP_CACHED(JUMP, frame, s, 3)

/* The pinned registers to and from their homes in the frame, through the frame's pin_at
 * (the ops run once per call or exit: no holes to patch). */
#define PIN_HOME(K) (*(uint64_t *)((char *)f + f->pin_at[K]))
#define SYNC_OUT()                                                           \
  do {                                                                       \
    PIN_HOME(0) = s.v0;                                                      \
    PIN_HOME(1) = s.v1;                                                      \
    PIN_HOME(2) = s.v2;                                                      \
    PIN_HOME(3) = s.p0;                                                      \
    PIN_HOME(4) = s.p1;                                                      \
  } while (0)
#define SYNC_IN()                                                            \
  do {                                                                       \
    s.v0 = PIN_HOME(0);                                                      \
    s.v1 = PIN_HOME(1);                                                      \
    s.v2 = PIN_HOME(2);                                                      \
    s.p0 = PIN_HOME(3);                                                      \
    s.p1 = PIN_HOME(4);                                                      \
  } while (0)
/* The same through operands, for the helper call (hot: no loads of pin_at). A helper
 * changes no eBPF register, so after the call only the slots in registers a C call
 * clobbers are read back (x86-64: c2, p0, p1 are rdx, rdi, rsi; c0, c1 are r14, r15, which
 * it preserves); elsewhere the compiler keeps v0 and v1 across the call itself. */
#define SYNC_OUT_OPERANDS()                                                  \
  do {                                                                       \
    FRAME_AT(PIN0_AT) = s.v0;                                                \
    FRAME_AT(PIN1_AT) = s.v1;                                                \
    FRAME_AT(PIN2_AT) = s.v2;                                                \
    FRAME_AT(PIN3_AT) = s.p0;                                                \
    FRAME_AT(PIN4_AT) = s.p1;                                                \
  } while (0)
#define SYNC_IN_CLOBBERED()                                                  \
  do {                                                                       \
    s.v2 = FRAME_AT(PIN2_AT);                                                \
    s.p0 = FRAME_AT(PIN3_AT);                                                \
    s.p1 = FRAME_AT(PIN4_AT);                                                \
  } while (0)

/* r0 = the helper (operands FN, its C-ABI function, and DATA, its state) of r1..r5. */
#define CALL_HELPER(R1, R2, R3, R4, R5)                                      \
  ((ebpf_helper_fn *)CPJIT_OPERAND(FN))(R1, R2, R3, R4, R5,                  \
                                        (const void *)CPJIT_OPERAND(DATA))

/* Leaves the trace with an error status (no register is needed afterwards). */
#define FAULT(STATUS, ADDR, LEN)                                             \
  do {                                                                       \
    f->fault_insn = INSN;                                                    \
    f->fault_addr = (ADDR);                                                  \
    f->fault_len = (LEN);                                                    \
    return (STATUS);                                                         \
  } while (0)

/* Whether an access of 1 << K bytes at addr lies inside a region (see from_mem and lim in
 * ebpf.h). The memory first, expected to hold: its check falls through to the access, and
 * the checks of the stack and then the metadata buffer go to the op's cold part (x86-64 and
 * riscv64 ELF split it off). addr - mem_lo is computed as (addr + OFF_BIAS) - mem_biased:
 * for an LDX, ST or STX addr is SREG or DREG + AT(OFF) - OFF_BIAS, so on x86-64 the hot
 * code is `lea` (of the register and AT(OFF)), a subtraction, a compare and a branch, and
 * the cold part needs only rel (not addr, which would take a copy in the hot code). */
static inline __attribute__((always_inline)) int ebpf_in_bounds(struct cpjit_frame *f,
                                                                uint64_t addr, int k) {
  uint64_t rel = (addr + OFF_BIAS) - f->mem_biased;
  if (__builtin_expect(rel < f->lim[1][k], 1)) return 1;
  return (rel - f->from_mem[0] < f->lim[0][k]) || (rel - f->from_mem[2] < f->lim[2][k]);
}

#endif /* EBPF_OPS_H */
