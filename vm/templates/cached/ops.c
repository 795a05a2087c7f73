/* cached/ops.c: the register-cached stencils of the VM's ops (manifest.toml, the families
 * `vm_*`; cpjit.h's "Register-cached stack values"). Compiled once per family member: the
 * op VM_OP (a list element) with IN stack values cached in registers on entry and OUT on
 * exit; the one stencil is renamed to op_<VM_OP>_<IN>_<OUT>.
 *
 * The op's body is the one in ../ops.def, expanded here with its stack macros on the
 * cpjit_stack view: PEEK/POKE reach a register or memory, DROP pops registers first and
 * PUSH fills registers (spilling the bottom one when all are full). Only VM_OP's entry of
 * ops.def is expanded (behind a label the function jumps to): the families pass
 * -DVM_OP_IS_<VM_OP>=1 as well (manifest.toml, `list_flag`), and every other op's body, a
 * macro argument, expands to nothing, so clang never parses it (it did, once per member,
 * before: two thirds of a member's compile time).
 *
 * A member may leave only through
 *   NEXT()   continuing in state OUT, which must be the state the body's pops and pushes
 *            leave (the family's stack effect; a body that ends elsewhere references the
 *            undefined `cached_op_ends_in_a_state_other_than_OUT`, an error naming the
 *            stencil), and
 *   DEOPT()  jumping to the exit stub (an EXIT_TRACE, uncached) with every cached value
 *            stored first, so the memory stack is what the `sp` expansion of the op has at
 *            that point (the exit target is declared spilled; the toolchain checks it).
 * A body that uses `sp` directly needs the memory stack and cannot be cached: here `sp`
 * names an undefined external, so a member of such an op fails to build, naming `sp`.
 *
 * SPILL (not an op of ops.def) stores the IN cached values: the trace compiler puts it
 * before every uncached op, exit and trace boundary.
 *
 * Pinned locals. Every member passes two pinned registers on (cpjit.h's CPJIT_PIN_REGS),
 * in which a loop trace keeps up to two of its locals for the whole loop body (vm/src/jit.rs
 * decides which, and where they are written back). A member compiled with -DPINNED=k (the
 * families `vm_pinned_*`) is an op whose local LOCAL0 is pinned register k instead of the
 * frame's slot: the same body of ops.def, so LOAD, STORE and INCREMENT_LOCAL_INT of a pinned
 * local are written once. PIN and UNPIN (family `vm_pin`, not ops of ops.def) copy local
 * LOCAL0 from the frame into pinned register k and back: at the loop body's entry, and at the
 * start of every exit stub the body leaves through, so the interpreter always finds its
 * locals in the frame. With PINNED_OPERAND=1 (families `vm_pinned_index_*`) the pinned local
 * is the op's second, LOCAL1: the index of a list item on locals, which vm/src/pinning.rs
 * (`pinned_operand`) says of the same ops, and the VM checks the two agree.
 *
 * Scaled ints. A member compiled with SCALED=1 (the families `vm_scaled_*`) keeps every
 * cached register as an int times 2**16 (vm_int_scaled) instead of its boxed value, and one
 * compiled with PINNED_SCALED=1 keeps its pinned local so: the overflow flag of an add or
 * multiply is then the int range check, and a compare is one instruction, with no tag to
 * extract or re-box between ops. The bodies are still those of ops.def: PEEK of a scaled
 * register boxes it (vm_unscale, which tells the compiler the low 16 bits are zero, so the
 * body's own vm_int_scaled folds the box away again), and PUSH, POKE and SET_LOCAL0 into a
 * scaled register scale the value (vm_scale), which must then be an int the compiler can
 * prove (an int op's result, a scaled register's value): a member that would scale anything
 * else references the undefined `cached_op_scales_a_value_not_proved_an_int`, an error
 * naming the stencil, so no member checks a tag at run time or trusts a value it cannot
 * prove. PUSH_INT (LOAD_INT, CONST_INT) is the one exception: the trace proved the value an
 * int. Everything that stores registers to memory (DEOPT, FAIL, SPILL, a push that spills
 * the bottom register) boxes them first, so memory and the interpreter only ever see boxed
 * values; BOX converts the cached registers in place (a scaled state into the boxed one of
 * the same depth), and PIN and UNPIN of a scaled pinned register scale and box.
 *
 * Pinned float locals (PINNED_FLOAT=k, pinned_float.h): LOCAL0 is pinned float register
 * q<k> (cpjit.h's CPJIT_PIN_FLOAT_REGS 4), holding the local's bits; PIN_FLOAT and
 * UNPIN_FLOAT (family `vm_pin_float`) copy it as PIN and UNPIN do.
 *
 * Wide locals (PINNED_SCALED=2): a pinned register holding its local as a raw 64-bit int,
 * for an accumulator whose sum may leave the tagged range; see wide.h. Wide stack values
 * (SCALED=2): cached registers holding raw 64-bit ints, for int arithmetic whose values may
 * leave the tagged range inside an expression; see wide_stack.h.
 *
 * Float slots. A member compiled with FLOATS=1 (the families `vm_float_*`, with
 * CPJIT_FLOAT_CACHE=1) keeps every cached value in a float slot (float.h): states 2, 6 and
 * 14 in cpjit.h's numbering (one, two, three floats). SPILL stores the slots' bits (a boxed
 * float is its bits), BOX moves them into the general registers of the boxed state of the
 * same depth (3, 7: cpjit_settle, in CPJIT_CONTINUE_CACHED).
 */
#define CPJIT_PIN_REGS 2
/* Four pinned float registers, q0..q3 (pinned_float.h): every member passes them on. */
#define CPJIT_PIN_FLOAT_REGS 4
#include "../stencil.h"

#ifndef SCALED
#define SCALED 0
#endif
/* SCALED=2: registers holding raw 64-bit ints (wide_stack.h), none of the scaled view's
 * conversions below. */
#if SCALED == 2
#undef SCALED
#define SCALED 0
#define VM_WIDE_STACK 1
#else
#define VM_WIDE_STACK 0
#endif
/* A member for one depth of COPY (families `vm_*copy_at`): the slot is known when it is
 * compiled, so it reads its register or memory directly instead of testing the depth. */
#ifdef DEPTH
#undef DEPTH0
#define DEPTH0 (DEPTH)
#endif
#ifndef PINNED_SCALED
#define PINNED_SCALED 0
#endif

/* Referenced only by a member that scales a value it has not proved an int. */
extern void cached_op_scales_a_value_not_proved_an_int(void);

/* The boxed int of scaled register value r (whose low 16 bits are zero). */
CPJIT_CACHE_INLINE uint64_t vm_unscale(uint64_t r) {
  VM_ASSUME((r & 0xffff) == 0);
  return vm_box_int_scaled((int64_t)r);
}
/* The scaled register value of v, which the compiler must prove an int. */
CPJIT_CACHE_INLINE uint64_t vm_scale(uint64_t v) {
  if (!vm_is_int(v)) cached_op_scales_a_value_not_proved_an_int();
  return (uint64_t)vm_int_scaled(v);
}

#ifndef PINNED_OPERAND
#define PINNED_OPERAND 0
#endif

#ifdef PINNED
#define VM_PINNED_REG VM_CAT(s.p, PINNED)
#if PINNED_OPERAND == 1
/* The op's second local is the pinned one (the index of GETITEM_LOCALS and
 * SETITEM_LOCALS), which it only reads; the first stays in the frame. */
#undef LOCAL1
#define LOCAL1 (PINNED_SCALED ? vm_unscale(VM_PINNED_REG) : VM_PINNED_REG)
#else
#undef LOCAL0
#if PINNED_SCALED == 2
#include "wide.h"
#elif PINNED_SCALED
#define LOCAL0 vm_unscale(VM_PINNED_REG)
#define SET_LOCAL0(v) (VM_PINNED_REG = vm_scale(v))
#define SET_LOCAL0_SCALED(scaled) (VM_PINNED_REG = (uint64_t)(scaled))
#define UNDO_LOCAL0_SCALED(scaled) SET_LOCAL0_SCALED(scaled)
#define UNDO_ADD_TO_LOCAL0(sum) (VM_PINNED_REG = (uint64_t)(sum) - (uint64_t)VM_INT_AT(0))
#else
#define LOCAL0 VM_PINNED_REG
#endif
#endif
#endif

#ifdef PINNED_FLOAT
#include "pinned_float.h"
#endif

CPJIT_DECLARE_SPILLED_TARGET(EXIT);

/* Referenced only by a member whose body does not end in its declared exit state. */
extern void cached_op_ends_in_a_state_other_than_OUT(void);

#define VM_CAT_(a, b) a##b
#define VM_CAT(a, b) VM_CAT_(a, b)

/* VM_SELECTED_(VM_OP_IS_<NAME>) is 1 when the flag is defined (as 1), 0 when it is not (an
 * undefined name stays a name, which no VM_PROBE_ macro matches). */
#define VM_PROBE_1 ~, 1
#define VM_SECOND_(a, b, ...) b
#define VM_SECOND(...) VM_SECOND_(__VA_ARGS__, )
#define VM_SELECTED_(flag) VM_SECOND(VM_CAT(VM_PROBE_, flag), 0)
/* An op's entry: its body behind its label if it is VM_OP, nothing otherwise. */
#define VM_EXPAND_0(label, ...)
#define VM_EXPAND_1(label, ...) label: __VA_ARGS__

/* The view's slot for the value k below the top: a register while k < s->n, else memory. */
CPJIT_CACHE_INLINE uint64_t *vm_cached_slot(struct cpjit_stack *s, int k) {
  switch (s->n - 1 - k) {
  case 0: return &s->v0;
  case 1: return &s->v1;
  case 2: return &s->v2;
  default: return &s->sp[-1 - (k - s->n)];
  }
}
CPJIT_CACHE_INLINE void vm_cached_drop(struct cpjit_stack *s, int n) {
  for (int i = 0; i < n; i++) (void)cpjit_pop(s);
}
/* Pushes register value r (scaled in a scaled member). */
CPJIT_CACHE_INLINE void vm_cached_push_register(struct cpjit_stack *s, uint64_t r) {
  if (SCALED && s->n == CPJIT_CACHE_REGS) s->v0 = vm_unscale(s->v0); /* spilled by the push */
  cpjit_push(s, r);
}
/* Pushes v; `proved`: the trace proved it an int (PUSH_INT). */
CPJIT_CACHE_INLINE void vm_cached_push(struct cpjit_stack *s, uint64_t v, int proved) {
  if (SCALED) v = proved ? (uint64_t)vm_int_scaled(v) : vm_scale(v);
  vm_cached_push_register(s, v);
}
/* Boxes every scaled register in place (before they are stored or the state is boxed). */
CPJIT_CACHE_INLINE void vm_cached_box(struct cpjit_stack *s) {
  if (!SCALED) return;
  if (s->n > 0) s->v0 = vm_unscale(s->v0);
  if (s->n > 1) s->v1 = vm_unscale(s->v1);
  if (s->n > 2) s->v2 = vm_unscale(s->v2);
}

/* Whether the value k below the top is a register (else memory). */
#define VM_IN_REGISTER(k) ((k) < s.n)
#define PEEK(k)                                                                 \
  (SCALED && VM_IN_REGISTER(k) ? vm_unscale(*vm_cached_slot(&s, (k)))          \
                               : *vm_cached_slot(&s, (k)))
#define POKE(k, v)                                                              \
  do {                                                                          \
    uint64_t poked_ = (v);                                                      \
    *vm_cached_slot(&s, (k)) = SCALED && VM_IN_REGISTER(k) ? vm_scale(poked_) : poked_; \
  } while (0)
#define DROP(n) vm_cached_drop(&s, (n))
#define PUSH(v) vm_cached_push(&s, (v), 0)
#define PUSH_INT(v) vm_cached_push(&s, (v), 1)
#define PUSH_INT_CONST(boxed, scaled) vm_cached_push_register(&s, SCALED ? (scaled) : (boxed))
#ifndef FLOATS
#define FLOATS 0
#endif
#if FLOATS
#include "float.h"
#else
#define VM_SLOT_CLASSES_DIFFER(OUT) 0
#endif
#define NEXT()                                                                  \
  do {                                                                          \
    if (s.n != CPJIT_STATE_COUNT(OUT) || VM_SLOT_CLASSES_DIFFER(OUT))            \
      cached_op_ends_in_a_state_other_than_OUT();                               \
    CPJIT_CONTINUE_CACHED(frame, s, OUT);                                       \
  } while (0)
#define JUMP() CPJIT_JUMP_CACHED(JUMP, frame, s, OUT)
#define DEOPT()                                                                 \
  do {                                                                          \
    vm_cached_box(&s);                                                          \
    CPJIT_JUMP_SPILLED(EXIT, frame, s);                                         \
  } while (0)
#define FAIL()                                                                  \
  do {                                                                          \
    vm_cached_box(&s);                                                          \
    cpjit_spill_all(&s);                                                        \
    frame->sp = s.sp;                                                           \
    return VM_EXIT_ERROR;                                                       \
  } while (0)
#if VM_WIDE_STACK
#include "wide_stack.h"
#endif
#define FOLLOW_LINK(slot) ((void)(slot))
/* CALL and CALL_JIT hand the stack to helpers and are never cached (a member of theirs
 * would fail on `sp`); stencil.h's call macros let their bodies compile here all the same. */

CPJIT_CACHED_OP(op_vm_cached, IN, OUT) {
  CPJIT_STACK(s, IN);
  /* An element that is neither an op of ops.def nor SPILL (or a family without `list_flag`)
   * leaves this label undeclared. */
  goto VM_CAT(vm_case_, VM_OP);
  {
    /* Hides the parameter `sp` from the bodies (see above). */
    extern uint64_t *sp;
/* `, ## __VA_ARGS__` (clang's GNU extension: the comma stays, the body is not pasted)
 * passes the body on unexpanded: a plain __VA_ARGS__ would have the preprocessor expand the
 * macros of every op's body before VM_EXPAND_0 drops it (a third of what is left of a
 * member's compile). */
#define OP(NAME, KINDS, POP, PUSH, ...)                                         \
  VM_CAT(VM_EXPAND_, VM_SELECTED_(VM_OP_IS_##NAME))(vm_case_##NAME, ##__VA_ARGS__)
#include "../ops.def"
#undef OP
  }
vm_case_SPILL:
vm_case_BOX:
  vm_cached_box(&s);
  CPJIT_CONTINUE_CACHED(frame, s, OUT);
#if defined(PINNED) && PINNED_OPERAND == 0
vm_case_PIN:
  /* A scaled (wide) pinned local is one the trace proved an int where the body starts. */
#if PINNED_SCALED == 2
  VM_PINNED_REG = VM_WIDE_PIN(VM_FRAME_LOCAL(LOCAL0_AT));
#else
  VM_PINNED_REG = PINNED_SCALED ? (uint64_t)vm_int_scaled(VM_FRAME_LOCAL(LOCAL0_AT))
                                : VM_FRAME_LOCAL(LOCAL0_AT);
#endif
  CPJIT_CONTINUE_CACHED(frame, s, OUT);
vm_case_UNPIN:
#if PINNED_SCALED == 2
  VM_FRAME_LOCAL(LOCAL0_AT) = VM_WIDE_UNPIN(VM_PINNED_REG);
#else
  VM_FRAME_LOCAL(LOCAL0_AT) = LOCAL0;
#endif
  CPJIT_CONTINUE_CACHED(frame, s, OUT);
#endif
#ifdef PINNED_FLOAT
vm_case_PIN_FLOAT:
  VM_PINNED_FLOAT_REG = cpjit_bits_float(VM_FRAME_LOCAL(LOCAL0_AT));
  CPJIT_CONTINUE_CACHED(frame, s, OUT);
vm_case_UNPIN_FLOAT:
  VM_FRAME_LOCAL(LOCAL0_AT) = LOCAL0;
  CPJIT_CONTINUE_CACHED(frame, s, OUT);
#endif
vm_case_LINK:
  /* The start of an exit stub whose pinned registers are still live: if the exit's second
   * link slot (ARG0) names code, that code was compiled to be entered with the same locals
   * pinned the same way (a side trace that inherits them, or a loop body past its PINs), so
   * it is entered with the registers as they are, and nothing is written back. */
  {
    cpjit_cached_op *linked_ = *(cpjit_cached_op *const *)(uintptr_t)ARG0;
    /* Nothing is cached (OUT = 0): the cache registers are passed on as they came, which
     * costs nothing and is all the callee (entered with nothing cached) assumes of them. */
    if (__builtin_expect(linked_ != 0, 0))
      CPJIT_MUSTTAIL return linked_(frame,
                                    CPJIT_CACHED_CALL_ARGS(s.sp, cpjit_c0, cpjit_c1, cpjit_c2, s));
  }
  CPJIT_CONTINUE_CACHED(frame, s, OUT);
}
