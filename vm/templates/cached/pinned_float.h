/* cached/pinned_float.h: members whose local LOCAL0 is pinned float register
 * q<PINNED_FLOAT> (cpjit.h's CPJIT_PIN_FLOAT_REGS; the families `vm_*pinned_float*` and
 * `vm_pin_float` of manifest.toml; vm/src/pinning/float.rs decides which locals). cached/ops.c
 * includes it for a member compiled with -DPINNED_FLOAT=k.
 *
 * The register holds the local's 64 bits, as the frame's slot would (a boxed float is its
 * double's bits, vm_values.h): LOAD pushes them (into a float slot without a move between
 * register files), STORE and the float ops on a local read and write the register, and
 * PIN_FLOAT and UNPIN_FLOAT copy the local from the frame into the register and back, at the
 * loop body's entry and at the start of every exit stub it leaves through (the GPR pins'
 * protocol, vm/src/pinning.rs). A loop-carried float (mandelbrot's zr, zi, zr2, zi2) then
 * never makes a store-to-load round trip through the frame.
 */
#ifdef PINNED
#error "a member runs on one pinned local: PINNED or PINNED_FLOAT, not both"
#endif
#define VM_PINNED_FLOAT_REG VM_CAT(s.q, PINNED_FLOAT)
#undef LOCAL0
#define LOCAL0 cpjit_float_bits(VM_PINNED_FLOAT_REG)
#define SET_LOCAL0(v) (VM_PINNED_FLOAT_REG = cpjit_bits_float(v))
