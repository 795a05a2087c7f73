/* cached/exit.c: the exit stub of a body with pinned locals in one stencil (family
 * `vm_exit_pinned`, manifest.toml; vm/src/jit/lower.rs). It does what LINK, one UNPIN per
 * pinned register and EXIT_TRACE (cached/ops.c, ops.def) did as 2 + n instances: the
 * stitching cost of an exit is per instance, and those were a quarter of nbody's instances.
 *
 * Its own file, not a case of cached/ops.c: every member of the cached families depends on
 * that file, and an edit there rebuilds them all.
 *
 * Operand EXIT_PINS names the trace's pinned locals, 16 bits per register (register 0 in the
 * low half), each the byte offset of its local in the frame (a multiple of 8, past the
 * 88-byte header) plus how the register holds it in the low bits (vm/src/pinning.rs, `Held`:
 * 0 boxed, 1 scaled, 2 wide); 0 where register 1 holds nothing. The members of pinnings
 * without a wide register know how each register holds its local (6 members): decoding it
 * at run time cost an exit into linked code 18 instructions more than the 3 + n stencils,
 * 2.8 % of nbody.vm's run.
 */
#define CPJIT_PIN_REGS 2
#define CPJIT_PIN_FLOAT_REGS 4 /* as cached/ops.c: the members' one signature */
#include "../stencil.h"

/* A whole operand, not a narrow one: on x86-64 a narrow operand is a constant address, which
 * the compiler materializes again (a hole to patch) wherever it uses it; a whole one is a
 * load (patched into an immediate where the value fits), done once. */
CPJIT_DECLARE_OPERAND(EXIT_PINS);

/* A register's half of EXIT_PINS: its local's offset and how it holds it. */
#define VM_PIN_AT(pin) ((pin) & ~7u)
#define VM_PIN_HELD(pin) ((pin) & 7u)
#define VM_HELD_SCALED 1u
#define VM_HELD_WIDE 2u

/* How each register holds its local: known to each member of a pinning without a wide
 * register (EXIT_PINNED_<register 0><register 1>, B boxed, S scaled, register 1 absent if
 * not pinned), whose write-back is then one box and store; read from EXIT_PINS by the member
 * for pinnings with a wide register (EXIT_PINNED_WIDE), which boxes it by a helper call. */
#define VM_HELD_NONE 3u
#if defined(VM_OP_IS_EXIT_PINNED_WIDE)
#define VM_EXIT_WIDE 1
#else
#define VM_EXIT_WIDE 0
#if defined(VM_OP_IS_EXIT_PINNED_B) || defined(VM_OP_IS_EXIT_PINNED_BB) ||                 \
    defined(VM_OP_IS_EXIT_PINNED_BS)
#define VM_HELD0 0u
#else
#define VM_HELD0 VM_HELD_SCALED
#endif
#if defined(VM_OP_IS_EXIT_PINNED_B) || defined(VM_OP_IS_EXIT_PINNED_S)
#define VM_HELD1 VM_HELD_NONE
#elif defined(VM_OP_IS_EXIT_PINNED_BB) || defined(VM_OP_IS_EXIT_PINNED_SB)
#define VM_HELD1 0u
#else
#define VM_HELD1 VM_HELD_SCALED
#endif
#endif
#if VM_EXIT_WIDE
#define VM_EXIT_HELD(pin, k) ((pin) ? VM_PIN_HELD(pin) : VM_HELD_NONE)
#else
#define VM_EXIT_HELD(pin, k) ((k) == 0 ? VM_HELD0 : VM_HELD1)
#endif

/* Writes register value r back to its local, unless it holds none or holds its local wide
 * (written back last: see below). */
CPJIT_CACHE_INLINE void vm_exit_write_back(struct cpjit_frame *frame, uint32_t pin, uint64_t r,
                                           uint32_t held) {
  if (held == VM_HELD_NONE || held == VM_HELD_WIDE) return;
  *(uint64_t *)((char *)frame + VM_PIN_AT(pin)) =
      held == VM_HELD_SCALED ? vm_box_int_scaled((int64_t)r) : r;
}

/* Writes a wide register back: boxing it may make a big int, and collect, which finds
 * every other pinned local in the frame by then. */
CPJIT_CACHE_INLINE void vm_exit_write_back_wide(struct cpjit_frame *frame, uint32_t pin,
                                                uint64_t r) {
  if (VM_EXIT_WIDE && VM_PIN_HELD(pin) == VM_HELD_WIDE)
    *(uint64_t *)((char *)frame + VM_PIN_AT(pin)) = vm_box_wide(frame, (int64_t)r);
}

CPJIT_CACHED_OP(op_vm_exit_pinned, IN, OUT) {
  CPJIT_STACK(s, IN);
  /* The link slot's address (ARG1) whole, not as EXIT_TRACE's halves (EXIT_LINK): on
   * x86-64 a load from the GOT, where rebuilding it from halves took the way into linked
   * code (taken on every iteration of a loop whose hot branch is a side trace) from 4
   * instructions to 8, 9 % more of collatz.vm's run. */
  uint64_t link = ARG1;
  /* LINK: the exit's pinned link slot, the word after its link slot (vm_abi.h,
   * VM_LINK_PINNED), names code entered with the registers live, nothing written back. */
  cpjit_cached_op *pinned = *(cpjit_cached_op *const *)(uintptr_t)(link + VM_LINK_PINNED);
  if (__builtin_expect(pinned != 0, 0))
    CPJIT_MUSTTAIL return pinned(frame,
                                 CPJIT_CACHED_CALL_ARGS(s.sp, cpjit_c0, cpjit_c1, cpjit_c2, s));
  /* The UNPINs. */
  uint32_t pins = (uint32_t)CPJIT_OPERAND(EXIT_PINS);
  uint32_t pin0 = pins & 0xffff, pin1 = pins >> 16;
  vm_exit_write_back(frame, pin0, s.p0, VM_EXIT_HELD(pin0, 0));
  vm_exit_write_back(frame, pin1, s.p1, VM_EXIT_HELD(pin1, 1));
  vm_exit_write_back_wide(frame, pin0, s.p0);
  vm_exit_write_back_wide(frame, pin1, s.p1);
  /* EXIT_TRACE: the link slot's code takes the ops' convention with nothing cached (the
   * cached convention's first two arguments; the others are passed as nothing, so that no
   * register is kept across the calls above), else back to the interpreter. */
  cpjit_cached_op *next = *(cpjit_cached_op *const *)(uintptr_t)link;
  if (next) {
    if (VM_EXIT_WIDE) {
      s.p0 = s.p1 = 0;
      CPJIT_MUSTTAIL return next(frame, CPJIT_CACHED_CALL_ARGS(s.sp, 0, 0, 0, s));
    }
    CPJIT_MUSTTAIL return next(frame,
                               CPJIT_CACHED_CALL_ARGS(s.sp, cpjit_c0, cpjit_c1, cpjit_c2, s));
  }
  frame->pc = VM_EXIT_PC_OF(link);
  frame->aux = VM_EXIT_AUX_OF(link);
  frame->sp = s.sp;
  return VM_EXIT_SIDE;
}
