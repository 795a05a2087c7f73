/* ebpf.h: the state the ebpf-jit ops share with the Rust side (src/jit.rs mirrors it as
 * `#[repr(C)] struct Frame`). */
#ifndef EBPF_H
#define EBPF_H

/* Two pinned registers besides the three cache registers (cpjit.h, "Pinned registers"):
 * five eBPF registers live in machine registers (ops.h). */
#define CPJIT_PIN_REGS 2
#include "cpjit.h"

/* eBPF-to-eBPF calls nest at most this deep (rbpf's MAX_CALL_DEPTH). */
#define EBPF_MAX_CALL_DEPTH 8
/* Each local call moves r10 down by this much (rbpf's LOCAL_FUNCTION_STACK_SIZE). */
#define EBPF_LOCAL_STACK 256

/* What a local call saves: r6..r9 and the call site to return to. */
struct ebpf_call {
  uint64_t regs[4];
  uint64_t site;
};

/* The frame. Registers first, so that register n is at byte offset 8 n; r[11] is scratch
 * (the home of an unused pinned slot). */
struct cpjit_frame {
  uint64_t r[12];
  /* The regions a load or store may touch: stack, mem, mbuff (i = 0, 1, 2). An access of
   * width 1 << k at addr lies wholly inside region i exactly when, with rel = addr - mem_lo
   * (mod 2^64), rel - from_mem[i] < lim[i][k] (unsigned), where from_mem[i] is the region's
   * start minus mem_lo (0 for the memory) and lim[i][k] the region's size minus the width
   * plus one, or 0 if the width does not fit: no address that wraps around passes. So the
   * memory's check, the hot one, is one subtraction and one compare (ops.h,
   * ebpf_in_bounds), and mem_biased, mem_lo plus OFF's bias (ops.h, OFF_BIAS), lets the
   * bias fold into the address's computation. */
  uint64_t mem_lo;
  uint64_t mem_biased;
  uint64_t from_mem[3];
  uint64_t lim[3][4];
  /* Local calls: how deep, and the site an EXIT returns to. */
  uint64_t depth;
  uint64_t ret_site;
  /* Set on an error exit: the instruction index, the address and the access width. */
  uint64_t fault_insn;
  uint64_t fault_addr;
  uint64_t fault_len;
  struct ebpf_call calls[EBPF_MAX_CALL_DEPTH];
  /* Where pinned slot k's eBPF register lives in the frame (its byte offset; r[11] for an
   * unused slot), for the ops that move the whole register file (entry, EXIT, local calls):
   * read here rather than patched in, they cost no holes to stitch. */
  uint64_t pin_at[5];
};

/* Exit statuses of a trace (src/jit.rs turns them into errors). */
#define EBPF_OK 0
#define EBPF_OOB_LOAD 1
#define EBPF_OOB_STORE 2
#define EBPF_UNKNOWN_HELPER 3
#define EBPF_CALL_DEPTH 4
#define EBPF_FELL_OFF 5
#define EBPF_INVALID 6

/* A helper as the trace calls it (src/lib.rs, `Helper`): a C-ABI function, one per Rust
 * helper type with the helper's body inlined, taking r1..r5 in the registers a C call passes
 * them in (x86-64: rdi, rsi, rdx, rcx, r8) and the helper's state, returning r0. Called
 * directly: r1 pinned in p0 (rdi) and r2 in p1 (rsi) need no move, and there is no
 * trampoline between the trace and the helper. */
typedef uint64_t ebpf_helper_fn(uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
                                uint64_t r5, const void *data);

#endif /* EBPF_H */
