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
 * locals in the frame.
 */
#define CPJIT_PIN_REGS 2
#include "../stencil.h"

#ifdef PINNED
#undef LOCAL0
#define LOCAL0 VM_CAT(s.p, PINNED)
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

#define PEEK(k) (*vm_cached_slot(&s, (k)))
#define POKE(k, v) (*vm_cached_slot(&s, (k)) = (v))
#define DROP(n) vm_cached_drop(&s, (n))
#define PUSH(v) cpjit_push(&s, (v))
#define NEXT()                                                                  \
  do {                                                                          \
    if (s.n != OUT) cached_op_ends_in_a_state_other_than_OUT();              \
    CPJIT_CONTINUE_CACHED(frame, s, OUT);                                       \
  } while (0)
#define JUMP() CPJIT_JUMP_CACHED(JUMP, frame, s, OUT)
#define DEOPT() CPJIT_JUMP_SPILLED(EXIT, frame, s)
#define FAIL()                                                                  \
  do {                                                                          \
    cpjit_spill_all(&s);                                                        \
    frame->sp = s.sp;                                                           \
    return VM_EXIT_ERROR;                                                       \
  } while (0)
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
  CPJIT_CONTINUE_CACHED(frame, s, OUT);
#ifdef PINNED
vm_case_PIN:
  LOCAL0 = VM_FRAME_LOCAL(LOCAL0_AT);
  CPJIT_CONTINUE_CACHED(frame, s, OUT);
vm_case_UNPIN:
  VM_FRAME_LOCAL(LOCAL0_AT) = LOCAL0;
  CPJIT_CONTINUE_CACHED(frame, s, OUT);
#endif
}
