/* interp_loop.h: one interpreter loop over struct vm_inst, instantiated by interp.c with
 * INTERP_NAME, INTERP_PARAMS and the macros the op bodies use. Starts at frame->pc of `base`
 * with the value-stack pointer `sp`; returns a VM_EXIT_* status with frame->pc/sp set. */
int64_t INTERP_NAME(struct cpjit_frame *frame, uint64_t *sp,
                    struct vm_inst *base INTERP_PARAMS) {
  struct vm_inst *inst = base + frame->pc;
dispatch:
  BEFORE_DISPATCH();
  switch (inst->op) {
#define OP(NAME, KINDS, POP, PUSH, ...) case VM_OP_##NAME: __VA_ARGS__
#include "ops.def"
#undef OP
  default:
    break;
  }
  frame->error_code = VM_ERR_INTERNAL;
  frame->error_a = inst->op;
  frame->error_b = 0;
  frame->pc = inst - base;
  frame->sp = sp;
  return VM_EXIT_ERROR;
}
