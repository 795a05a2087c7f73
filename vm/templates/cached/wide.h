/* wide.h: pinned locals held *wide* (cached/ops.c with PINNED_SCALED=2, the families
 * `vm_pinned_wide_*` and `vm_pin`).
 *
 * Wide locals. A pinned register may hold its local as a raw 64-bit int instead of a boxed
 * or scaled one: the accumulator of `s = s + e` (ADD_TO_LOCAL_INT, the only op with members
 * on a wide register; vm/src/pinning.rs picks a local wide only when that is all the body
 * does with it). Its add is checked at 64 bits, so a sum that leaves the tagged 48-bit range
 * stays in its register at machine speed until it leaves 64 bits (then the op leaves the
 * trace, and the interpreter's big-int path goes on exactly). PIN unboxes the local (the
 * body proves it a tagged int where it starts) and UNPIN boxes it by the helper vm_box_wide:
 * a tagged int while it fits, else a big int. The lowering writes wide registers
 * back after every other one (vm/src/jit/lower.rs), so when vm_box_wide collects big ints
 * every other pinned local is already in the frame, where the collection finds it.
 */
#ifndef VM_CACHED_WIDE_H
#define VM_CACHED_WIDE_H

/* Referenced only by a member that reads a wide local as a value (no op but ADD_TO_LOCAL_INT
 * has members on a wide register). */
extern uint64_t cached_op_reads_a_wide_local_as_a_value;

#define LOCAL0 cached_op_reads_a_wide_local_as_a_value
#define ADD_TO_LOCAL0_OVERFLOWS(sum)                                            \
  __builtin_add_overflow((int64_t)VM_PINNED_REG, VM_INT_RAW(0), (sum))
#define SET_LOCAL0_SUM(sum) (VM_PINNED_REG = (uint64_t)(sum))
/* Puts the local back before an overflow leaves (ops.def, UNDO_LOCAL0_SCALED): the add is
 * then in place. */
#define UNDO_ADD_TO_LOCAL0(sum) (VM_PINNED_REG = (uint64_t)(sum) - (uint64_t)VM_INT_RAW(0))
#define UNDO_LOCAL0_SCALED(scaled) ((void)(scaled))

/* The register value of boxed local v, a tagged int. */
#define VM_WIDE_PIN(v) ((uint64_t)vm_int_of(v))

/* The boxed value of wide register value r, by the helper: a branch to a cold call would
 * leave the cold part ending in the continuation jump, which the toolchain refuses; an UNPIN
 * runs once per exit, where a call is cheap beside the exit itself. */
#define VM_WIDE_UNPIN(r) vm_box_wide(frame, (int64_t)(r))

#endif
