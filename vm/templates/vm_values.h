/* vm_values.h: value semantics shared by every op (boxing, arithmetic, comparison, truth).
 *
 * Each rule is written once here as an always-inline function returning a VM_ERR_* code
 * (0 = success); the ops in ops.def combine them. Nothing here may compile to a call of a
 * libc or libm function: stencils may only call the vm_* helpers.
 */
#ifndef VM_VALUES_H
#define VM_VALUES_H

#include "vm_abi.h"

#define VM_INLINE static inline __attribute__((always_inline))

/* Before a short copy loop (a call's arguments): one plain loop, not unrolled or vectorized
 * into hundreds of bytes of stencil code. */
#if defined(__clang__)
#define VM_SHORT_LOOP _Pragma("clang loop vectorize(disable) unroll(disable)")
#else
#define VM_SHORT_LOOP
#endif

/* A fact the compiler may use (a known-zero bit pattern); nothing where it cannot. */
#if defined(__clang__)
#define VM_ASSUME(c) __builtin_assume(c)
#else
#define VM_ASSUME(c) ((void)0)
#endif

#if defined(__clang__)
#define VM_SQRT(x) __builtin_elementwise_sqrt(x)
#else
#define VM_SQRT(x) __builtin_sqrt(x) /* host build passes -fno-math-errno */
#endif

VM_INLINE uint64_t vm_tag(uint64_t v) { return v >> VM_TAG_SHIFT; }
VM_INLINE int vm_is_int(uint64_t v) { return vm_tag(v) == VM_TAG_INT; }
VM_INLINE int vm_is_float(uint64_t v) { return vm_tag(v) < VM_TAG_INT; }
VM_INLINE int vm_is_list(uint64_t v) { return vm_tag(v) == VM_TAG_LIST; }
VM_INLINE int vm_is_bigint(uint64_t v) { return vm_tag(v) == VM_TAG_BIGINT; }
/* Whether an operation on a and b takes the big-int slow path (vm_bigint) at once. */
VM_INLINE int vm_either_big(uint64_t a, uint64_t b) {
  return vm_is_bigint(a) | vm_is_bigint(b);
}

VM_INLINE uint8_t vm_type_of(uint64_t v) {
  switch (vm_tag(v)) {
  case VM_TAG_INT: return VM_TYPE_INT;
  case VM_TAG_BOOL: return VM_TYPE_BOOL;
  case VM_TAG_NONE: return VM_TYPE_NONE;
  case VM_TAG_LIST: return VM_TYPE_LIST;
  case VM_TAG_BIGINT: return VM_TYPE_BIGINT;
  default: return VM_TYPE_FLOAT;
  }
}

VM_INLINE int64_t vm_int_of(uint64_t v) { return ((int64_t)(v << 16)) >> 16; }
VM_INLINE uint64_t vm_box_int(int64_t i) {
  return ((uint64_t)i & VM_PAYLOAD_MASK) | ((uint64_t)VM_TAG_INT << VM_TAG_SHIFT);
}
VM_INLINE int vm_int_fits(int64_t i) { return i >= VM_INT_MIN && i <= VM_INT_MAX; }

/* Division by a constant divisor d (vm/src/trace/divide.rs picks the op and computes the
 * operands): a multiplication in place of a division, with Python's floor semantics.
 *
 * The bias. With a = |d| and L = floor(log2 a), B = a * 2**(47 - L) is a multiple of a in
 * [2**47, 2**48); added to a tagged int y (|y| <= 2**47) it makes n = y + B non-negative
 * and below 3 * 2**47, and y's floor quotient and remainder by a are n's less K = 2**(47 - L)
 * and the same: no sign to correct, for every dividend. Both are operands of the stencils;
 * the interpreters work them out from d here. */
VM_INLINE int vm_div_log2(uint64_t a) { return 63 - __builtin_clzll(a); }
VM_INLINE uint64_t vm_div_bias(uint64_t a) { return a << (47 - vm_div_log2(a)); }
VM_INLINE uint64_t vm_div_bias_quotient(uint64_t a) {
  return (uint64_t)1 << (47 - vm_div_log2(a));
}
/* vm_div_any_quotient's shift for a (below). */
VM_INLINE int vm_div_shift(uint64_t a) {
  return vm_div_log2(a) - ((a & (a - 1)) == 0);
}

/* floor(x / d) for a tagged int x and a constant 3 <= d < 2**15 that is not a power of two,
 * given m = ceil(2**64 / d): the high word of n * m less K, for n = x + B as above. Exact:
 * with e = m * d - 2**64 in (0, d) and n = q * d + r, n * m / 2**64 = q + (r + n * e / 2**64)
 * / d, and n * e < 3 * 2**47 * 2**15 < 2**64, so the excess stays below 1 / d. One
 * multiplication, no sign fix-ups: the bias made n non-negative. */
VM_INLINE int64_t vm_floordiv_by(int64_t x, uint64_t m, uint64_t bias, uint64_t quotient) {
  uint64_t n = (uint64_t)x + bias;
  return (int64_t)((uint64_t)(((unsigned __int128)n * m) >> 64) - quotient);
}

/* x mod d for the same x, d and m (Python's: never negative), without the quotient (Lemire,
 * Kaser and Kurz, "Faster remainder by direct computation", 2019): the low word of n * m is
 * the fraction n / d in 64 bits, and that fraction times d has the remainder as its high
 * word, exactly when n * e < 2**64, as above. Two multiplications and an add. */
VM_INLINE int64_t vm_mod_by(int64_t x, uint64_t d, uint64_t m, uint64_t bias) {
  uint64_t fraction = ((uint64_t)x + bias) * m;
  return (int64_t)(uint64_t)(((unsigned __int128)fraction * d) >> 64);
}

/* floor(y / a) for 0 <= y < 2**63 and any a >= 2: the high word of y * m shifted right by
 * s, with s = floor(log2 a) and m = ceil(2**(64 + s) / a) when a is no power of two (below
 * 2**64 since a > 2**s; e = m * a - 2**(64 + s) < a <= 2**(s + 1), so y * e / 2**(64 + s) < 1
 * and the excess over y / a stays below 1 / a), s = k - 1 and m = 2**63 when a = 2**k. */
VM_INLINE uint64_t vm_div_any_quotient(uint64_t y, uint64_t m, int s) {
  return (uint64_t)(((unsigned __int128)y * m) >> 64) >> s;
}
/* x as the dividend of a division by a = |d|: x, or -x for a negative d (sign = -1), plus
 * the bias (|x| <= 2**47: never negative, below 2**63). floor(x / d) = floor(-x / a) for
 * d < 0, and x mod d = -((-x) mod a). */
VM_INLINE uint64_t vm_div_any_dividend(int64_t x, int64_t sign, uint64_t bias) {
  return (uint64_t)((x ^ sign) - sign) + bias;
}
/* floor(x / d) and x mod d (the divisor's sign) for a tagged int x and any constant d with
 * |d| >= 2 (vm_div_any_quotient's m and s for a = |d|; sign = -1 when d < 0, else 0, a
 * constant of the op): the divisors from 2**15 on and the negative ones, one
 * multiplication and a shift. */
VM_INLINE int64_t vm_floordiv_by_any(int64_t x, int64_t sign, uint64_t m, int s,
                                     uint64_t bias, uint64_t quotient) {
  uint64_t n = vm_div_any_dividend(x, sign, bias);
  return (int64_t)(vm_div_any_quotient(n, m, s) - quotient);
}
VM_INLINE int64_t vm_mod_by_any(int64_t x, int64_t sign, uint64_t a, uint64_t m, int s,
                                uint64_t bias) {
  uint64_t n = vm_div_any_dividend(x, sign, bias);
  int64_t r = (int64_t)(n - vm_div_any_quotient(n, m, s) * a);
  return (r ^ sign) - sign;
}

VM_INLINE double vm_float_of(uint64_t v) {
  union { uint64_t u; double d; } c;
  c.u = v;
  return c.d;
}
VM_INLINE uint64_t vm_box_float(double d) {
  union { uint64_t u; double d; } c;
  c.d = d;
  return c.u;
}
VM_INLINE uint64_t vm_box_bool(int b) { return b ? VM_TRUE : VM_FALSE; }
VM_INLINE struct vm_list *vm_list_of(uint64_t v) {
  return (struct vm_list *)(uintptr_t)(v & VM_PAYLOAD_MASK);
}

/* Python truthiness. */
VM_INLINE int vm_truthy(uint64_t v) {
  if (v == VM_TRUE) return 1;
  if (v == VM_FALSE || v == VM_NONE) return 0;
  if (vm_is_int(v)) return vm_int_of(v) != 0;
  if (vm_is_list(v)) return vm_list_of(v)->len != 0;
  if (vm_is_bigint(v)) return 1; /* never 0: 0 is tagged */
  return vm_float_of(v) != 0.0; /* NaN is true, as in Python */
}

/* As in Python, bools are the ints 0 and 1 in arithmetic, comparisons and indexing. */
VM_INLINE uint64_t vm_unbool(uint64_t v) {
  return vm_tag(v) == VM_TAG_BOOL ? vm_box_int((int64_t)(v & 1)) : v;
}

/* A float or a tagged int as a double (a tagged int is exact). Returns 0 otherwise (a big
 * int takes the slow path before any caller gets here). */
VM_INLINE int vm_as_double(uint64_t v, double *out) {
  if (vm_is_float(v)) { *out = vm_float_of(v); return 1; }
  if (vm_is_int(v)) { *out = (double)vm_int_of(v); return 1; }
  return 0;
}

/* ---- int arithmetic (both operands ints) ---- */

/* An int's value times 2**16, in a whole word (its payload moved to the top 48 bits). Sums,
 * differences and products of these (one factor scaled, the other not) overflow 64 bits
 * exactly when the 48-bit result leaves [VM_INT_MIN, VM_INT_MAX], so the CPU's overflow
 * flag is the range check, and a logical shift right boxes the result: no sign extension
 * of the operands, no separate range compare, no mask. */
VM_INLINE int64_t vm_int_scaled(uint64_t v) { return (int64_t)(v << 16); }
VM_INLINE uint64_t vm_box_int_scaled(int64_t scaled) {
  return ((uint64_t)scaled >> 16) | ((uint64_t)VM_TAG_INT << VM_TAG_SHIFT);
}

/* An operand the trace passes scaled (an int times 2**16: OperandKind::ScaledInt), whose low
 * 16 bits are zero, which a compiler may use. */
VM_INLINE int64_t vm_scaled_operand(uint64_t a) {
  VM_ASSUME((a & 0xffff) == 0);
  return (int64_t)a;
}

VM_INLINE int vm_int_add(uint64_t a, uint64_t b, uint64_t *r) {
  int64_t s;
  if (__builtin_add_overflow(vm_int_scaled(a), vm_int_scaled(b), &s)) return VM_ERR_OVERFLOW;
  *r = vm_box_int_scaled(s);
  return 0;
}
VM_INLINE int vm_int_sub(uint64_t a, uint64_t b, uint64_t *r) {
  int64_t s;
  if (__builtin_sub_overflow(vm_int_scaled(a), vm_int_scaled(b), &s)) return VM_ERR_OVERFLOW;
  *r = vm_box_int_scaled(s);
  return 0;
}
VM_INLINE int vm_int_mul(uint64_t a, uint64_t b, uint64_t *r) {
  int64_t p;
  if (__builtin_mul_overflow(vm_int_scaled(a), vm_int_of(b), &p)) return VM_ERR_OVERFLOW;
  *r = vm_box_int_scaled(p);
  return 0;
}
/* Python floor division and modulo: the remainder has the divisor's sign. */
VM_INLINE int vm_int_floordiv(uint64_t a, uint64_t b, uint64_t *r) {
  int64_t x = vm_int_of(a), y = vm_int_of(b);
  if (y == 0) return VM_ERR_ZERO_DIVISION;
  int64_t q = x / y;
  if ((x % y != 0) && ((x < 0) != (y < 0))) q -= 1;
  if (!vm_int_fits(q)) return VM_ERR_OVERFLOW;
  *r = vm_box_int(q);
  return 0;
}
VM_INLINE int vm_int_mod(uint64_t a, uint64_t b, uint64_t *r) {
  int64_t x = vm_int_of(a), y = vm_int_of(b);
  if (y == 0) return VM_ERR_ZERO_DIVISION;
  int64_t m = x % y;
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  *r = vm_box_int(m);
  return 0;
}

/* ---- float arithmetic (both operands floats) ---- */
VM_INLINE int vm_float_add(uint64_t a, uint64_t b, uint64_t *r) {
  *r = vm_box_float(vm_float_of(a) + vm_float_of(b));
  return 0;
}
VM_INLINE int vm_float_sub(uint64_t a, uint64_t b, uint64_t *r) {
  *r = vm_box_float(vm_float_of(a) - vm_float_of(b));
  return 0;
}
VM_INLINE int vm_float_mul(uint64_t a, uint64_t b, uint64_t *r) {
  *r = vm_box_float(vm_float_of(a) * vm_float_of(b));
  return 0;
}
VM_INLINE int vm_float_div(uint64_t a, uint64_t b, uint64_t *r) {
  if (vm_float_of(b) == 0.0) return VM_ERR_ZERO_DIVISION;
  *r = vm_box_float(vm_float_of(a) / vm_float_of(b));
  return 0;
}

/* ---- generic arithmetic: int op int stays int, any float makes a float ----
 * The generic ops take the frame for the big-int slow path (vm_bigint): a tagged result
 * that overflows and any big int operand go there, off the fast path. */
#define VM_BIG(op, a, b, r) ((int)vm_bigint(frame, (op), (a), (b), (r)))
#define VM_GENERIC_ARITH(NAME, BIG)                                             \
  VM_INLINE int vm_##NAME(struct cpjit_frame *frame, uint64_t a, uint64_t b,    \
                          uint64_t *r) {                                        \
    a = vm_unbool(a);                                                           \
    b = vm_unbool(b);                                                           \
    if (vm_is_int(a) && vm_is_int(b)) {                                         \
      if (__builtin_expect(vm_int_##NAME(a, b, r) == 0, 1)) return 0;           \
      return VM_BIG(BIG, a, b, r);                                              \
    }                                                                           \
    if (__builtin_expect(vm_either_big(a, b), 0)) return VM_BIG(BIG, a, b, r);  \
    double x, y;                                                                \
    if (!vm_as_double(a, &x) || !vm_as_double(b, &y)) return VM_ERR_TYPE;       \
    return vm_float_##NAME(vm_box_float(x), vm_box_float(y), r);                \
  }
VM_GENERIC_ARITH(add, VM_BIG_ADD)
VM_GENERIC_ARITH(sub, VM_BIG_SUB)
VM_GENERIC_ARITH(mul, VM_BIG_MUL)

/* True division always gives a float. */
VM_INLINE int vm_div(struct cpjit_frame *frame, uint64_t a, uint64_t b, uint64_t *r) {
  a = vm_unbool(a);
  b = vm_unbool(b);
  if (__builtin_expect(vm_either_big(a, b), 0)) return VM_BIG(VM_BIG_DIV, a, b, r);
  double x, y;
  if (!vm_as_double(a, &x) || !vm_as_double(b, &y)) return VM_ERR_TYPE;
  return vm_float_div(vm_box_float(x), vm_box_float(y), r);
}
VM_INLINE int vm_floordiv(struct cpjit_frame *frame, uint64_t a, uint64_t b,
                          uint64_t *r) {
  a = vm_unbool(a);
  b = vm_unbool(b);
  if (vm_is_int(a) && vm_is_int(b)) {
    int e = vm_int_floordiv(a, b, r);
    /* Only VM_INT_MIN // -1 leaves the tagged range. */
    return __builtin_expect(e == VM_ERR_OVERFLOW, 0) ? VM_BIG(VM_BIG_FLOORDIV, a, b, r) : e;
  }
  if (__builtin_expect(vm_either_big(a, b), 0)) return VM_BIG(VM_BIG_FLOORDIV, a, b, r);
  double x, y;
  if (!vm_as_double(a, &x) || !vm_as_double(b, &y)) return VM_ERR_TYPE;
  if (y == 0.0) return VM_ERR_ZERO_DIVISION;
  *r = vm_box_float(vm_float_floordiv(x, y));
  return 0;
}
VM_INLINE int vm_mod(struct cpjit_frame *frame, uint64_t a, uint64_t b, uint64_t *r) {
  a = vm_unbool(a);
  b = vm_unbool(b);
  if (vm_is_int(a) && vm_is_int(b)) return vm_int_mod(a, b, r);
  if (__builtin_expect(vm_either_big(a, b), 0)) return VM_BIG(VM_BIG_MOD, a, b, r);
  double x, y;
  if (!vm_as_double(a, &x) || !vm_as_double(b, &y)) return VM_ERR_TYPE;
  if (y == 0.0) return VM_ERR_ZERO_DIVISION;
  *r = vm_box_float(vm_float_mod(x, y));
  return 0;
}
VM_INLINE int vm_neg(struct cpjit_frame *frame, uint64_t a, uint64_t *r) {
  a = vm_unbool(a);
  if (vm_is_int(a)) {
    int64_t n = -vm_int_of(a);
    if (__builtin_expect(!vm_int_fits(n), 0)) return VM_BIG(VM_BIG_NEG, a, a, r);
    *r = vm_box_int(n);
    return 0;
  }
  if (vm_is_float(a)) { *r = vm_box_float(-vm_float_of(a)); return 0; }
  if (vm_is_bigint(a)) return VM_BIG(VM_BIG_NEG, a, a, r);
  return VM_ERR_TYPE;
}

/* ---- comparisons: numbers by value (NaN unordered), other values by identity; a big int
 * is compared exactly by the slow path (with a float too, as Python does) ---- */
#define VM_CMP_LT(x, y) ((x) < (y))
#define VM_CMP_LE(x, y) ((x) <= (y))
#define VM_CMP_GT(x, y) ((x) > (y))
#define VM_CMP_GE(x, y) ((x) >= (y))
#define VM_CMP_EQ(x, y) ((x) == (y))
#define VM_CMP_NE(x, y) ((x) != (y))
#define VM_COMPARE(NAME, CMP, ORDERED, BIG)                                     \
  VM_INLINE int vm_int_##NAME(uint64_t a, uint64_t b, uint64_t *r) {            \
    *r = vm_box_bool(CMP(vm_int_of(a), vm_int_of(b)));                          \
    return 0;                                                                   \
  }                                                                             \
  VM_INLINE int vm_float_##NAME(uint64_t a, uint64_t b, uint64_t *r) {          \
    *r = vm_box_bool(CMP(vm_float_of(a), vm_float_of(b)));                      \
    return 0;                                                                   \
  }                                                                             \
  VM_INLINE int vm_##NAME(struct cpjit_frame *frame, uint64_t a, uint64_t b,    \
                          uint64_t *r) {                                        \
    if (vm_is_int(a) && vm_is_int(b)) return vm_int_##NAME(a, b, r);            \
    if (__builtin_expect(vm_either_big(a, b), 0))                               \
      return VM_BIG(BIG, vm_unbool(a), vm_unbool(b), r);                        \
    double x, y;                                                                \
    if (vm_as_double(vm_unbool(a), &x) && vm_as_double(vm_unbool(b), &y)) {     \
      *r = vm_box_bool(CMP(x, y));                                              \
      return 0;                                                                 \
    }                                                                           \
    if (ORDERED) return VM_ERR_TYPE;                                            \
    *r = vm_box_bool(CMP(a, b));                                                \
    return 0;                                                                   \
  }
VM_COMPARE(lt, VM_CMP_LT, 1, VM_BIG_LT)
VM_COMPARE(le, VM_CMP_LE, 1, VM_BIG_LE)
VM_COMPARE(gt, VM_CMP_GT, 1, VM_BIG_GT)
VM_COMPARE(ge, VM_CMP_GE, 1, VM_BIG_GE)
VM_COMPARE(eq, VM_CMP_EQ, 0, VM_BIG_EQ)
VM_COMPARE(ne, VM_CMP_NE, 0, VM_BIG_NE)

/* ---- conversions ---- */
VM_INLINE int vm_to_float(struct cpjit_frame *frame, uint64_t a, uint64_t *r) {
  a = vm_unbool(a);
  if (vm_is_bigint(a)) return VM_BIG(VM_BIG_TO_FLOAT, a, a, r);
  double x;
  if (!vm_as_double(a, &x)) return VM_ERR_TYPE;
  *r = vm_box_float(x);
  return 0;
}
/* int(x): truncation toward zero; NaN is a ValueError, an infinity an OverflowError, a
 * float beyond the tagged range a big int. */
VM_INLINE int vm_to_int(struct cpjit_frame *frame, uint64_t a, uint64_t *r) {
  a = vm_unbool(a);
  if (vm_is_int(a) || vm_is_bigint(a)) { *r = a; return 0; }
  if (!vm_is_float(a)) return VM_ERR_TYPE;
  double x = vm_float_of(a);
  if (x != x) return VM_ERR_VALUE;
  if (x == x + x && x != 0.0) return VM_ERR_OVERFLOW; /* an infinity */
  if (!(x > -140737488355329.0 && x < 140737488355328.0)) return VM_BIG(VM_BIG_TO_INT, a, a, r);
  *r = vm_box_int((int64_t)x);
  return 0;
}
VM_INLINE int vm_sqrt(struct cpjit_frame *frame, uint64_t a, uint64_t *r) {
  a = vm_unbool(a);
  if (vm_is_bigint(a)) {
    int e = VM_BIG(VM_BIG_TO_FLOAT, a, a, &a); /* math.sqrt converts to float first */
    if (e) return e;
  }
  double x;
  if (!vm_as_double(a, &x)) return VM_ERR_TYPE;
  if (x < 0.0) return VM_ERR_VALUE;
  *r = vm_box_float(VM_SQRT(x));
  return 0;
}

/* ---- lists ---- */
/* Python indexing: -len <= i < len. Stores the element's address in *slot. */
VM_INLINE int vm_list_slot(uint64_t list, uint64_t index, uint64_t **slot) {
  index = vm_unbool(index);
  if (vm_is_list(list) && vm_is_bigint(index)) return VM_ERR_INDEX; /* |index| > 2**47 */
  if (!vm_is_list(list) || !vm_is_int(index)) return VM_ERR_TYPE;
  struct vm_list *l = vm_list_of(list);
  int64_t i = vm_int_of(index);
  if (i < 0) i += l->len;
  if (i < 0 || i >= l->len) return VM_ERR_INDEX;
  *slot = &l->items[i];
  return 0;
}
VM_INLINE int vm_len(struct cpjit_frame *frame, uint64_t list, uint64_t *r) {
  (void)frame; /* the signature of the other unary ops' */
  if (!vm_is_list(list)) return VM_ERR_TYPE;
  *r = vm_box_int(vm_list_of(list)->len);
  return 0;
}
/* Whether the value at *slot is a float, from its tag's 16 bits alone, the word's top ones on
 * every target (all little-endian): x86-64 compares them in memory (`cmp word ptr`), where a
 * word loaded into a register is compared with a 64-bit immediate it first moves there. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "vm_item_is_float reads a tag's 16 bits");
typedef uint16_t __attribute__((may_alias)) vm_tag_bits;
VM_INLINE int vm_item_is_float(const uint64_t *slot) {
  return ((const vm_tag_bits *)slot)[3] < VM_TAG_INT;
}
/* Upper bound on the size of a list created by NEWLIST (protects the host from a typo). */
#define VM_LIST_MAX_LEN 100000000

#endif /* VM_VALUES_H */
