/* The ops outside the families: JA, calls, EXIT and the error exits (shim.c loads the
 * pinned registers). They move the whole register file through the frame's pin_at (see
 * ops.h, SYNC_OUT), so they have no holes for it. */
#include "ops.h"

/* Nothing: LE64 and the second half of an LD_DW (so that every instruction is one
 * instance, and instruction i is instance i + 1). Its continuation jump is elided: no
 * code. */
CPJIT_CACHED_OP(op_nop, 3, 3) {
  CPJIT_STACK(s, 3);
  CPJIT_CONTINUE_CACHED(frame, s, 3);
}

CPJIT_CACHED_OP(op_ja, 3, 3) {
  CPJIT_STACK(s, 3);
  EBPF_JUMP();
}

/* A helper id nobody registered: rbpf fails when the call is executed (the id goes where
 * a fault's address goes). */
CPJIT_CACHED_OP(op_unknown_helper, 3, 3) {
  struct cpjit_frame *f = frame;
  FAULT(EBPF_UNKNOWN_HELPER, IMM32X, 0);
}

/* An eBPF-to-eBPF call: save r6..r9 and the return site, move r10 down, jump. */
CPJIT_CACHED_OP(op_call_local, 3, 3) {
  CPJIT_STACK(s, 3);
  struct cpjit_frame *f = frame;
  if (f->depth >= EBPF_MAX_CALL_DEPTH) FAULT(EBPF_CALL_DEPTH, 0, 0);
  SYNC_OUT();
  struct ebpf_call *c = &f->calls[f->depth++];
  c->regs[0] = f->r[6];
  c->regs[1] = f->r[7];
  c->regs[2] = f->r[8];
  c->regs[3] = f->r[9];
  c->site = (uint64_t)CPJIT_NARROW(SITE, u32);
  f->r[10] -= EBPF_LOCAL_STACK;
  SYNC_IN();
  EBPF_JUMP();
}

/* EXIT in a program with local calls: leave the trace from the outermost function (r0 in
 * the frame), else return to the caller's site through the chain of op_ret_case (JUMP
 * names its first instance). Without local calls EXIT is family `r`'s `ret`. */
CPJIT_CACHED_OP(op_exit, 3, 3) {
  CPJIT_STACK(s, 3);
  struct cpjit_frame *f = frame;
  SYNC_OUT();
  if (f->depth == 0) return EBPF_OK;
  struct ebpf_call *c = &f->calls[--f->depth];
  f->r[6] = c->regs[0];
  f->r[7] = c->regs[1];
  f->r[8] = c->regs[2];
  f->r[9] = c->regs[3];
  f->r[10] += EBPF_LOCAL_STACK;
  f->ret_site = c->site;
  SYNC_IN();
  EBPF_JUMP();
}

/* One return site: jump there when it is the one an EXIT popped. */
CPJIT_CACHED_OP(op_ret_case, 3, 3) {
  CPJIT_STACK(s, 3);
  struct cpjit_frame *f = frame;
  if (f->ret_site == (uint64_t)CPJIT_NARROW(SITE, u32)) EBPF_JUMP();
  CPJIT_CONTINUE_CACHED(frame, s, 3);
}

/* Execution ran past the last instruction (rbpf's interpreter panics there). */
CPJIT_CACHED_OP(op_fell_off, 3, 3) {
  struct cpjit_frame *f = frame;
  FAULT(EBPF_FELL_OFF, 0, 0);
}

/* An instruction rbpf's interpreter cannot execute (the second half of an LD_DW reached by
 * a local call; rbpf panics there). */
CPJIT_CACHED_OP(op_invalid, 3, 3) {
  struct cpjit_frame *f = frame;
  FAULT(EBPF_INVALID, 0, 0);
}
