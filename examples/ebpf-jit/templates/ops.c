/* The eBPF ops: one stencil per opcode (and per source kind), with rbpf 0.4's semantics.
 *
 * Operands (all narrow, so they become immediates or displacements):
 *   DST_AT, SRC_AT  byte offsets of the destination and source registers in the frame (8 n)
 *   IMM             the instruction's 32-bit immediate (sign-extended where rbpf does)
 *   OFF             the instruction's 16-bit offset of a load or store
 *   IDX             the instruction's index, reported when it faults
 *   SITE            a local call's return site (see op_call_local, op_exit, op_ret_case)
 * and VALUE (LD_DW's 64-bit value) and FN (a helper's address), 64-bit.
 * Every op that jumps names its destination JUMP. */
#include "ebpf.h"

CPJIT_DECLARE_NARROW(DST_AT, u16);
CPJIT_DECLARE_NARROW(SRC_AT, u16);
CPJIT_DECLARE_NARROW(IMM, s32);
CPJIT_DECLARE_NARROW(OFF, s16);
CPJIT_DECLARE_NARROW(IDX, u32);
CPJIT_DECLARE_NARROW(SITE, u32);
CPJIT_DECLARE_OPERAND(VALUE);
CPJIT_DECLARE_OPERAND(FN);
CPJIT_DECLARE_TARGET(JUMP);

/* A register by its byte offset in the frame. On x86-64 ELF the operand's symbol address
 * is the offset itself, which LLVM folds into the access's displacement. */
#if defined(__x86_64__) && !defined(__APPLE__) && !defined(_WIN32)
#define AT(NAME) ((uintptr_t)&_JIT_##NAME)
#else
#define AT(NAME) ((uintptr_t)CPJIT_NARROW(NAME, u16))
#endif
#define REG(NAME) (*(uint64_t *)((char *)f + AT(NAME)))
#define DST REG(DST_AT)
#define SRC REG(SRC_AT)
/* The immediate as rbpf's `insn.imm as u64` (sign-extended) and `insn.imm as u32`. */
#define IMM64 ((uint64_t)(int64_t)CPJIT_NARROW(IMM, s32))
#define IMM32 ((uint32_t)CPJIT_NARROW(IMM, s32))
#define OFF64 ((uint64_t)(int64_t)CPJIT_NARROW(OFF, s16))
#define INSN ((uint64_t)CPJIT_NARROW(IDX, u32))

typedef uint16_t u16u __attribute__((aligned(1), may_alias));
typedef uint32_t u32u __attribute__((aligned(1), may_alias));
typedef uint64_t u64u __attribute__((aligned(1), may_alias));

#define OP(name, ...)                                                        \
  CPJIT_CC int64_t op_##name(struct cpjit_frame *f, uint64_t *sp) {          \
    __VA_ARGS__;                                                             \
    CPJIT_CONTINUE(f, sp);                                                   \
  }

/* ---- ALU64: d, s are the 64-bit operands; the result replaces dst. ---- */
#define ALU64(name, EXPR)                                                    \
  OP(name##64_imm, uint64_t d = DST; uint64_t s = IMM64; DST = (EXPR))      \
  OP(name##64_reg, uint64_t d = DST; uint64_t s = SRC; DST = (EXPR))

ALU64(add, d + s)
ALU64(sub, d - s)
ALU64(mul, d * s)
ALU64(div, s == 0 ? 0 : d / s)
ALU64(or, d | s)
ALU64(and, d & s)
ALU64(lsh, d << (s & 63))
ALU64(rsh, d >> (s & 63))
ALU64(mod, s == 0 ? d : d % s)
ALU64(xor, d ^ s)
ALU64(mov, ((void)d, s))
ALU64(arsh, (uint64_t)((int64_t)d >> (s & 63)))
OP(neg64, DST = -DST)

/* ---- ALU32: d, s are the low halves; the result is zero-extended. ---- */
#define ALU32(name, EXPR)                                                    \
  OP(name##32_imm, uint32_t d = (uint32_t)DST; uint32_t s = IMM32;          \
     DST = (uint64_t)(uint32_t)(EXPR))                                       \
  OP(name##32_reg, uint32_t d = (uint32_t)DST; uint32_t s = (uint32_t)SRC;  \
     DST = (uint64_t)(uint32_t)(EXPR))

ALU32(add, d + s)
ALU32(sub, d - s)
ALU32(mul, d * s)
ALU32(div, s == 0 ? 0 : d / s)
ALU32(or, d | s)
ALU32(and, d & s)
ALU32(lsh, d << (s & 31))
ALU32(rsh, d >> (s & 31))
ALU32(xor, d ^ s)
ALU32(mov, ((void)d, s))
ALU32(arsh, (uint32_t)((int32_t)d >> (s & 31)))
OP(neg32, DST = (uint64_t)(uint32_t)(0u - (uint32_t)DST))
/* MOD32 by zero leaves the whole 64-bit register unchanged (rbpf). */
OP(mod32_imm, uint64_t d = DST; uint32_t s = IMM32;
   if (s != 0) DST = (uint64_t)((uint32_t)d % s))
OP(mod32_reg, uint64_t d = DST; uint32_t s = (uint32_t)SRC;
   if (s != 0) DST = (uint64_t)((uint32_t)d % s))

/* ---- Byte order (little-endian hosts: LE truncates, BE swaps). ---- */
OP(le16, DST = (uint16_t)DST)
OP(le32, DST = (uint32_t)DST)
OP(be16, DST = __builtin_bswap16((uint16_t)DST))
OP(be32, DST = __builtin_bswap32((uint32_t)DST))
OP(be64, DST = __builtin_bswap64(DST))

/* ---- LD_DW: a 64-bit immediate. ---- */
OP(lddw, DST = CPJIT_OPERAND(VALUE))

/* ---- Memory. Every access is checked against the three regions first. ---- */
/* K: log2 of the width (see lim in ebpf.h). Branch-free over the three regions. */
static inline __attribute__((always_inline)) int ebpf_in_bounds(struct cpjit_frame *f,
                                                                uint64_t addr, int k) {
  return (addr - f->lo[0] < f->lim[0][k]) | (addr - f->lo[1] < f->lim[1][k]) |
         (addr - f->lo[2] < f->lim[2][k]);
}

#define FAULT(STATUS, ADDR, LEN)                                             \
  do {                                                                       \
    f->fault_insn = INSN;                                                    \
    f->fault_addr = (ADDR);                                                  \
    f->fault_len = (LEN);                                                    \
    return (STATUS);                                                         \
  } while (0)

#define LDX(name, T, K)                                                      \
  OP(name, uint64_t a = SRC + OFF64;                                         \
     if (!ebpf_in_bounds(f, a, K)) FAULT(EBPF_OOB_LOAD, a, 1 << K);          \
     DST = (uint64_t)*(const T *)a)
LDX(ldxb, uint8_t, 0)
LDX(ldxh, u16u, 1)
LDX(ldxw, u32u, 2)
LDX(ldxdw, u64u, 3)

#define STORE(name, T, K, VAL)                                               \
  OP(name, uint64_t a = DST + OFF64;                                         \
     if (!ebpf_in_bounds(f, a, K)) FAULT(EBPF_OOB_STORE, a, 1 << K);         \
     *(T *)a = (T)(VAL))
STORE(stb, uint8_t, 0, IMM32)
STORE(sth, u16u, 1, IMM32)
STORE(stw, u32u, 2, IMM32)
STORE(stdw, u64u, 3, IMM64)
STORE(stxb, uint8_t, 0, SRC)
STORE(stxh, u16u, 1, SRC)
STORE(stxw, u32u, 2, SRC)
STORE(stxdw, u64u, 3, SRC)

/* LD_ABS / LD_IND: r0 = the mem region's byte at imm (plus src). rbpf checks 8 bytes
 * whatever the width. */
#define LDABS(name, T, ADDR)                                                 \
  OP(name, uint64_t a = (ADDR);                                              \
     if (!ebpf_in_bounds(f, a, 3)) FAULT(EBPF_OOB_LOAD, a, 8);               \
     f->r[0] = (uint64_t)*(const T *)a)
LDABS(ldabsb, uint8_t, f->lo[1] + IMM32)
LDABS(ldabsh, u16u, f->lo[1] + IMM32)
LDABS(ldabsw, u32u, f->lo[1] + IMM32)
LDABS(ldabsdw, u64u, f->lo[1] + IMM32)
LDABS(ldindb, uint8_t, f->lo[1] + SRC + IMM32)
LDABS(ldindh, u16u, f->lo[1] + SRC + IMM32)
LDABS(ldindw, u32u, f->lo[1] + SRC + IMM32)
LDABS(ldinddw, u64u, f->lo[1] + SRC + IMM32)

/* ---- Jumps: JUMP when the condition holds. ---- */
#define JCOND(name, INIT, COND)                                              \
  CPJIT_CC int64_t op_##name(struct cpjit_frame *f, uint64_t *sp) {          \
    INIT;                                                                    \
    if (COND) CPJIT_JUMP(JUMP, f, sp);                                       \
    CPJIT_CONTINUE(f, sp);                                                   \
  }
/* JMP: immediates zero-extended for the unsigned compares, sign-extended otherwise. */
#define J64(name, SIMM, COND)                                                \
  JCOND(name##_imm, uint64_t d = DST; uint64_t s = (SIMM), COND)             \
  JCOND(name##_reg, uint64_t d = DST; uint64_t s = SRC, COND)
J64(jeq, (uint64_t)IMM32, d == s)
J64(jgt, (uint64_t)IMM32, d > s)
J64(jge, (uint64_t)IMM32, d >= s)
J64(jlt, (uint64_t)IMM32, d < s)
J64(jle, (uint64_t)IMM32, d <= s)
J64(jset, IMM64, (d & s) != 0)
J64(jne, (uint64_t)IMM32, d != s)
J64(jsgt, IMM64, (int64_t)d > (int64_t)s)
J64(jsge, IMM64, (int64_t)d >= (int64_t)s)
J64(jslt, IMM64, (int64_t)d < (int64_t)s)
J64(jsle, IMM64, (int64_t)d <= (int64_t)s)
/* JMP32: the low halves. */
#define J32(name, COND)                                                      \
  JCOND(name##32_imm, uint32_t d = (uint32_t)DST; uint32_t s = IMM32, COND)  \
  JCOND(name##32_reg, uint32_t d = (uint32_t)DST; uint32_t s = (uint32_t)SRC, COND)
J32(jeq, d == s)
J32(jgt, d > s)
J32(jge, d >= s)
J32(jlt, d < s)
J32(jle, d <= s)
J32(jset, (d & s) != 0)
J32(jne, d != s)
J32(jsgt, (int32_t)d > (int32_t)s)
J32(jsge, (int32_t)d >= (int32_t)s)
J32(jslt, (int32_t)d < (int32_t)s)
J32(jsle, (int32_t)d <= (int32_t)s)

CPJIT_CC int64_t op_ja(struct cpjit_frame *f, uint64_t *sp) { CPJIT_JUMP(JUMP, f, sp); }

/* ---- Calls. ---- */
/* A helper: r0 = fn(r1, r2, r3, r4, r5), through the Rust trampoline. */
OP(call_helper, ebpf_call_helper(f, CPJIT_OPERAND(FN)))

/* A helper id nobody registered: rbpf fails when the call is executed. */
CPJIT_CC int64_t op_unknown_helper(struct cpjit_frame *f, uint64_t *sp) {
  (void)sp;
  FAULT(EBPF_UNKNOWN_HELPER, 0, 0);
}

/* An eBPF-to-eBPF call: save r6..r9 and the return site, move r10 down, jump. */
CPJIT_CC int64_t op_call_local(struct cpjit_frame *f, uint64_t *sp) {
  if (f->depth >= EBPF_MAX_CALL_DEPTH) FAULT(EBPF_CALL_DEPTH, 0, 0);
  struct ebpf_call *c = &f->calls[f->depth++];
  c->regs[0] = f->r[6];
  c->regs[1] = f->r[7];
  c->regs[2] = f->r[8];
  c->regs[3] = f->r[9];
  c->site = (uint64_t)CPJIT_NARROW(SITE, u32);
  f->r[10] -= EBPF_LOCAL_STACK;
  CPJIT_JUMP(JUMP, f, sp);
}

/* EXIT: leave the trace from the outermost function, else return to the caller's site
 * through the chain of op_ret_case (JUMP names its first instance). */
CPJIT_CC int64_t op_exit(struct cpjit_frame *f, uint64_t *sp) {
  if (f->depth == 0) return EBPF_OK;
  struct ebpf_call *c = &f->calls[--f->depth];
  f->r[6] = c->regs[0];
  f->r[7] = c->regs[1];
  f->r[8] = c->regs[2];
  f->r[9] = c->regs[3];
  f->r[10] += EBPF_LOCAL_STACK;
  f->ret_site = c->site;
  CPJIT_JUMP(JUMP, f, sp);
}

/* One return site: jump there when it is the one an EXIT popped. */
CPJIT_CC int64_t op_ret_case(struct cpjit_frame *f, uint64_t *sp) {
  if (f->ret_site == (uint64_t)CPJIT_NARROW(SITE, u32)) CPJIT_JUMP(JUMP, f, sp);
  CPJIT_CONTINUE(f, sp);
}

/* Execution ran past the last instruction (rbpf's interpreter panics there). */
CPJIT_CC int64_t op_fell_off(struct cpjit_frame *f, uint64_t *sp) {
  (void)sp;
  FAULT(EBPF_FELL_OFF, 0, 0);
}

/* An instruction rbpf's interpreter cannot execute (the second half of an LD_DW reached by
 * a local call; rbpf panics there). */
CPJIT_CC int64_t op_invalid(struct cpjit_frame *f, uint64_t *sp) {
  (void)sp;
  FAULT(EBPF_INVALID, 0, 0);
}
