/* The member op_fam_xor_1 written by hand: its stencil must equal the member's. */
#include "cpjit.h"
#define ELEM xor
#define N 1
#include "body.h"
CPJIT_CC int64_t op_plain_xor_1(struct cpjit_frame *frame, uint64_t *sp) { FAM_BODY(frame, sp) }
