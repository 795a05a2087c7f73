#include "cpjit.h"

static int64_t hits;                          /* writable, unmarked: rejected */
static CPJIT_INSTANCE_DATA int64_t per_instance; /* deliberate: accepted */
static const int64_t table[4] = {1, 2, 3, 4};   /* read-only: accepted */

CPJIT_CC int64_t op_count_hits(struct cpjit_frame *frame, uint64_t *sp) {
  hits += 1;
  sp[-1] = (uint64_t)hits;
  CPJIT_CONTINUE(frame, sp);
}

CPJIT_CC int64_t op_local_static(struct cpjit_frame *frame, uint64_t *sp) {
  static int64_t last;                          /* function-local, writable: rejected */
  int64_t previous = last;
  last = (int64_t)sp[-1];
  sp[-1] = (uint64_t)previous;
  CPJIT_CONTINUE(frame, sp);
}

CPJIT_CC int64_t op_instance(struct cpjit_frame *frame, uint64_t *sp) {
  per_instance += (int64_t)sp[-1];
  sp[-1] = (uint64_t)(per_instance + table[sp[-1] & 3]);
  CPJIT_CONTINUE(frame, sp);
}
