/* wide.h: pinned locals held *wide* (cached/ops.c with PINNED_SCALED=2, the families
 * `vm_pinned_wide_*` and `vm_pin`).
 *
 * Wide locals. A pinned register may hold its local as a raw 64-bit int instead of a boxed
 * or scaled one: the accumulator of `s = s + e` (ADD_TO_LOCAL_INT; vm/src/pinning.rs picks a
 * local wide when that is all the body does with it), and a loop counter the body only
 * loads and increments (LOAD_INT onto raw 64-bit registers, cached/wide_stack.h, and
 * INCREMENT_LOCAL_INT_KNOWN), which the body bounds by a compare with a constant so that it
 * stays in the tagged range (vm/src/pinning/wide.rs): a scaled counter cost a shift at
 * every use as an operand, and a loop bound past 2**15 a GOT load (no imm32 holds it
 * scaled). The adds are checked at 64 bits, so a sum that leaves the tagged 48-bit range
 * stays in its register at machine speed until it leaves 64 bits (then the op leaves the
 * trace, and the interpreter's big-int path goes on exactly). PIN unboxes the local (the
 * body proves it a tagged int where it starts) and UNPIN boxes it by the helper vm_box_wide:
 * a tagged int while it fits, else a big int. The lowering writes wide registers
 * back after every other one (vm/src/jit/lower.rs), so when vm_box_wide collects big ints
 * every other pinned local is already in the frame, where the collection finds it.
 */
#ifndef VM_CACHED_WIDE_H
#define VM_CACHED_WIDE_H

/* Referenced only by a member that reads a wide local as a value (a boxed one: no op but
 * those above has members on a wide register). */
extern uint64_t cached_op_reads_a_wide_local_as_a_value;

#define LOCAL0 cached_op_reads_a_wide_local_as_a_value

/* The ints' view (ops.def): the local and the scaled operand ARG1 as raw ints. ARG1_RAW is
 * ARG1's int, which the VM passes (vm/src/jit/plan.rs): a whole operand, an imm32 where it
 * fits, where shifting ARG1 back would cost an instruction per use. */
CPJIT_DECLARE_OPERAND(ARG1_RAW);
#define VM_INT_ARG1 ((int64_t)CPJIT_OPERAND(ARG1_RAW))
#define VM_LOCAL0_INT ((int64_t)VM_PINNED_REG)
/* The sum in place, and the local put back from it before an overflow leaves (none here;
 * ADD_TO_LOCAL_INT's below). */
#define SET_LOCAL0_SCALED(sum) (VM_PINNED_REG = (uint64_t)(sum))
#define UNDO_LOCAL0_SCALED(value) (VM_PINNED_REG = (uint64_t)(value))
#if VM_WIDE_STACK
/* LOAD_INT onto raw 64-bit registers: the raw int as it is. (Onto boxed or scaled ones it
 * would have to be range-checked, with no exit to leave by: no such member.) */
#define PUSH_LOCAL0_INT() VM_PUSH_INT_RAW((int64_t)VM_PINNED_REG)
#endif
#define ADD_TO_LOCAL0_OVERFLOWS(sum)                                            \
  __builtin_add_overflow((int64_t)VM_PINNED_REG, VM_INT_RAW(0), (sum))
#define SET_LOCAL0_SUM(sum) (VM_PINNED_REG = (uint64_t)(sum))
/* Puts the local back before an overflow leaves (ops.def, UNDO_ADD_TO_LOCAL0): the add is
 * then in place. */
#define UNDO_ADD_TO_LOCAL0(sum) (VM_PINNED_REG = (uint64_t)(sum) - (uint64_t)VM_INT_RAW(0))

/* The register value of boxed local v, a tagged int. */
#define VM_WIDE_PIN(v) ((uint64_t)vm_int_of(v))

/* The boxed value of wide register value r, by the helper: a branch to a cold call would
 * leave the cold part ending in the continuation jump, which the toolchain refuses; an UNPIN
 * runs once per exit, where a call is cheap beside the exit itself. */
#define VM_WIDE_UNPIN(r) vm_box_wide(frame, (int64_t)(r))

#endif
