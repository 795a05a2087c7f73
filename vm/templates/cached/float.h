/* cached/float.h: the stack view of a member whose cached values are all in float slots
 * (FLOATS=1: the families `vm_float_*` of manifest.toml, "Float slots"; cpjit.h's "Float
 * cache slots"). cached/ops.c includes it after its own view, whose value macros it
 * replaces; the bodies are still those of ops.def.
 *
 * A float slot holds a value's 64 bits in an FP register (xmm, d, fa). The VM boxes a float
 * as its double's bits (vm_values.h, vm_box_float), so a slot may hold any value: a float op
 * reads its operands and writes its result there with no move between register files (the
 * compiler folds vm_float_of(PEEK(k)) and PUSH(vm_box_float(x)) to the register itself), and
 * whatever stores a slot (a spill, STORE, an exit, the bottom slot spilled by a push) stores
 * the boxed value. Only a body that needs a value's bits as an int (a tag test, a store to
 * a general register) moves it. Every slot of every state these members enter or leave is a
 * float one: the families list all their elements in `float_results`.
 */
#if !CPJIT_FLOAT_CACHE
#error "a FLOATS member needs CPJIT_FLOAT_CACHE=1 (the family's `defines`)"
#endif
/* (LOAD_INT_FLOAT reads a scaled pinned local as the int it converts, never as a value.) */
#if SCALED || PINNED_SCALED && PINNED_OPERAND == 0 && !defined(VM_OP_IS_LOAD_INT_FLOAT)
#error "a FLOATS member keeps no scaled int in a register it reads as a value"
#endif

/* The float register of the value k below the top (k < s->n). */
CPJIT_CACHE_INLINE double *vm_float_slot(struct cpjit_stack *s, int k) {
  switch (s->n - 1 - k) {
  case 0: return &s->d0;
  case 1: return &s->d1;
  default: return &s->d2;
  }
}

#undef PEEK
#undef POKE
#undef PUSH
#undef PUSH_INT
#undef PUSH_INT_CONST
#define PEEK(k)                                                                 \
  (VM_IN_REGISTER(k) ? cpjit_float_bits(*vm_float_slot(&s, (k))) : s.sp[-1 - ((k) - s.n)])
#define POKE(k, v)                                                              \
  do {                                                                          \
    uint64_t poked_ = (v);                                                      \
    if (VM_IN_REGISTER(k))                                                      \
      *vm_float_slot(&s, (k)) = cpjit_bits_float(poked_);                       \
    else                                                                        \
      s.sp[-1 - ((k) - s.n)] = poked_;                                          \
  } while (0)
#define PUSH(v) cpjit_push_f(&s, cpjit_bits_float(v))
#define PUSH_INT(v) PUSH(v)
#define PUSH_INT_CONST(boxed, scaled) PUSH(boxed)
/* Whether the view's slots are not of the classes state OUT gives them (NEXT's check). */
#define VM_SLOT_CLASSES_DIFFER(OUT) (s.floats != CPJIT_STATE_FLOATS(OUT))
