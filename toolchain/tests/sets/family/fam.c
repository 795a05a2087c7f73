/* The family template: ELEM and N come from the member's -D defines. */
#include "cpjit.h"
#include "body.h"
CPJIT_CC int64_t op_fam(struct cpjit_frame *frame, uint64_t *sp) { FAM_BODY(frame, sp) }
