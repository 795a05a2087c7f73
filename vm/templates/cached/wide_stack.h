/* cached/wide_stack.h: the stack view of a member whose cached registers hold *raw 64-bit
 * ints* (SCALED=2: the families `vm_wide_*` of manifest.toml, "Wide stack values").
 * cached/ops.c includes it after its own view, whose macros it replaces; the bodies are still
 * those of ops.def, through its ints' view (VM_INT_AT and the rest), which here is the raw int.
 *
 * Why. A scaled register (an int times 2**16) makes the CPU's overflow flag the 48-bit range
 * check, so a product like x * x with x above 11.86 M leaves the trace, and the interpreter's
 * big-int path runs it (`calls` at real sizes: three exits and about 2,000 instructions a
 * round). A raw register overflows at 64 bits: the product stays in its register, and a `%`
 * or `//` by a constant brings it back (vm_floordiv_by_wide, exact for every int64).
 *
 * Where. A wide value never reaches memory inside a trace: the lowering keeps a run of
 * micro-ops wide only from nothing cached back to nothing cached, every micro-op of it with a
 * wide member (vm/src/jit/lower/wide.rs), so the memory slots below the registers hold the
 * boxed ints the trace proved (tagged: a specialised int op never makes a big int), and no
 * member spills, boxes in place or pushes past the registers (which would store a raw int:
 * the undefined symbols below name such a member, which then fails to build). Only an exit
 * stores them: DEOPT and FAIL box each register first, a tagged int while it fits 48 bits,
 * else a big int (vm_box_wide_exit, which never collects: the other registers still hold
 * values no frame does).
 */
#ifndef VM_CACHED_WIDE_STACK_H
#define VM_CACHED_WIDE_STACK_H

#if SCALED || FLOATS
#error "a wide member keeps neither scaled ints nor floats in its registers"
#endif

/* Referenced only by a member that reads or writes a wide register as a boxed value, pushes
 * past the registers (spilling a raw int) or adds a wide value into a local not held wide. */
extern void cached_op_reads_a_wide_register_boxed(void);
extern void cached_op_spills_a_wide_register(void);
extern void cached_op_narrows_a_wide_value(void);

/* The divisions by a constant d (3 <= d < 2**16, not a power of two) of a wide member take
 * their own operands, which the VM computes from d (vm/src/cached/wide.rs, `wide_magic`):
 * WIDE_SHIFT s = floor(log2 d) and WIDE_MAGIC m = ceil(2**(64 + s) / d), below 2**64 since
 * d > 2**s. (The scaled members' reciprocal, ARG1, is exact only below 2**48.) */
CPJIT_DECLARE_OPERAND(WIDE_MAGIC);
CPJIT_DECLARE_NARROW(WIDE_SHIFT, u8);
#define VM_WIDE_MAGIC CPJIT_OPERAND(WIDE_MAGIC)
#define VM_WIDE_SHIFT ((int)CPJIT_NARROW(WIDE_SHIFT, u8) & 63)

/* floor(x / d) for every int64 x. With t = x >> 63, n = x ^ t is x or -1 - x, below 2**63,
 * and floor(x / d) = q ^ t for q = floor(n / d) (-1 - x over d rounds down as much as x
 * over d rounds up). q is the high word of n * m shifted right by s, exactly: n * m / 2**(64
 * + s) = n / d + n * e / (d * 2**(64 + s)) with e = m * d - 2**(64 + s) < d <= 2**(s + 1),
 * so the excess is below 1 / d and never reaches the next integer. No correction step: the
 * reciprocal floor(2**64 / d) of wave 26 needed one (a multiply, a subtract, a compare),
 * and n plus or minus d around it: 17 instructions per `// 7` in calls.vm's loop, now 8. */
CPJIT_CACHE_INLINE int64_t vm_floordiv_by_wide(int64_t x) {
  uint64_t t = (uint64_t)(x >> 63);
  uint64_t n = (uint64_t)x ^ t;
  uint64_t q = (uint64_t)(((unsigned __int128)n * VM_WIDE_MAGIC) >> 64) >> VM_WIDE_SHIFT;
  return (int64_t)(q ^ t);
}

/* x mod d for the same x and d (Python's: never negative): x less d times the floor above,
 * in wrapping arithmetic (the true result lies in [0, d)). */
CPJIT_CACHE_INLINE int64_t vm_mod_by_wide(int64_t x, uint64_t d) {
  return (int64_t)((uint64_t)x - (uint64_t)vm_floordiv_by_wide(x) * d);
}

/* The raw int k below the top: a register as it is, memory a boxed int the trace proved. */
CPJIT_CACHE_INLINE int64_t vm_wide_at(struct cpjit_stack *s, int k) {
  uint64_t v = *vm_cached_slot(s, k);
  return k < s->n ? (int64_t)v : vm_int_of(v);
}
/* Stores raw int x k below the top (memory boxes it: it was a tagged int there). */
CPJIT_CACHE_INLINE void vm_wide_poke(struct cpjit_stack *s, int k, int64_t x) {
  *vm_cached_slot(s, k) = k < s->n ? (uint64_t)x : vm_box_int(x);
}
CPJIT_CACHE_INLINE void vm_wide_push(struct cpjit_stack *s, int64_t x) {
  if (s->n == CPJIT_CACHE_REGS) cached_op_spills_a_wide_register();
  cpjit_push(s, (uint64_t)x);
}
/* Register value r boxed for an exit: tagged while it fits, else a big int, by the helper
 * either way. Why no inline fast path: its branch made the exit block one with successors,
 * and LLVM's branch folding then lays the continuation's tail call last and folds it into the
 * overflow check (`add; jno next`), with the whole exit between: every wide add took a jump
 * over about 100 bytes. An exit is rare (an overflow at 64 bits) and dear anyway. */
CPJIT_CACHE_INLINE uint64_t vm_wide_boxed(struct cpjit_frame *frame, uint64_t r) {
  return vm_box_wide_exit(frame, (int64_t)r);
}
CPJIT_CACHE_INLINE void vm_wide_box(struct cpjit_frame *frame, struct cpjit_stack *s) {
  if (s->n > 0) s->v0 = vm_wide_boxed(frame, s->v0);
  if (s->n > 1) s->v1 = vm_wide_boxed(frame, s->v1);
  if (s->n > 2) s->v2 = vm_wide_boxed(frame, s->v2);
}

#undef PEEK
#undef POKE
#undef PUSH
#undef PUSH_INT
#undef PUSH_INT_CONST
#define PEEK(k)                                                                 \
  (VM_IN_REGISTER(k) ? (cached_op_reads_a_wide_register_boxed(), (uint64_t)0)  \
                     : *vm_cached_slot(&s, (k)))
#define POKE(k, v)                                                              \
  do {                                                                          \
    if (VM_IN_REGISTER(k)) cached_op_reads_a_wide_register_boxed();            \
    *vm_cached_slot(&s, (k)) = (v);                                             \
  } while (0)
#define PUSH(v) (cached_op_reads_a_wide_register_boxed(), (void)(v))
#define PUSH_INT(v) vm_wide_push(&s, vm_int_of(v))
/* CONST_INT's int: the raw int the VM passes beside ARG1 (`scaled`), whose shift back cost
 * an instruction per push. */
#define PUSH_INT_CONST(boxed, scaled) vm_wide_push(&s, VM_INT_ARG1)

/* ARG1 (an int passed scaled) as its raw int, which the VM passes as ARG1_RAW (an imm32
 * where it fits): the compares with a constant and CONST_INT. cached/wide.h, for a pinned
 * local held wide, says the same. */
#ifndef VM_INT_ARG1
CPJIT_DECLARE_OPERAND(ARG1_RAW);
#define VM_INT_ARG1 ((int64_t)CPJIT_OPERAND(ARG1_RAW))
#endif
#define VM_INT_AT(k) vm_wide_at(&s, (k))
#define VM_INT_RAW(k) vm_wide_at(&s, (k))
#define VM_POKE_INT_AT(k, x) vm_wide_poke(&s, (k), (x))
#define VM_PUSH_INT_AT(x) vm_wide_push(&s, (x))
#define VM_PUSH_INT_RAW(x) vm_wide_push(&s, (x))
#define VM_FLOORDIV_BY(x, d, r) vm_floordiv_by_wide(x)
#define VM_MOD_BY(x, d, r) vm_mod_by_wide((x), (d))
#define VM_INT_SHR_AT(k, n) (VM_INT_RAW(k) >> (n))

/* `s = s + e` into a local held wide is wide.h's; into any other, e would have to narrow. */
#ifndef ADD_TO_LOCAL0_OVERFLOWS
#define ADD_TO_LOCAL0_OVERFLOWS(sum) (cached_op_narrows_a_wide_value(), *(sum) = 0, 0)
#define SET_LOCAL0_SUM(sum) ((void)(sum))
#endif

#undef DEOPT
#undef FAIL
#define DEOPT()                                                                 \
  do {                                                                          \
    vm_wide_box(frame, &s);                                                     \
    CPJIT_JUMP_SPILLED(EXIT, frame, s);                                         \
  } while (0)
#define FAIL()                                                                  \
  do {                                                                          \
    vm_wide_box(frame, &s);                                                     \
    cpjit_spill_all(&s);                                                        \
    frame->sp = s.sp;                                                           \
    return VM_EXIT_ERROR;                                                       \
  } while (0)

#endif
