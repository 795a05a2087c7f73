/* vm_abi.h: the C ABI shared by the reference VM's ops, its host interpreters and Rust.
 *
 * Declared once here; vm/src/abi.rs mirrors every type with #[repr(C)] and checks sizes and
 * offsets at compile time, as the _Static_asserts below do on the C side.
 *
 * Values are NaN-boxed 64-bit words:
 *   - a float is any word whose top 16 bits are below VM_TAG_INT (IEEE f64 as is; the only
 *     NaNs the VM can produce are quiet NaNs with a zero payload top, 0x7ff8... or 0xfff8...,
 *     so no float ever collides with a tag);
 *   - otherwise the top 16 bits are the tag and the low 48 bits the payload:
 *     int (48-bit two's complement), bool (0/1), None, list (pointer to struct vm_list),
 *     big int (an opaque pointer to an arbitrary-precision int owned by Rust).
 * An int is tagged when it fits [VM_INT_MIN, VM_INT_MAX] and a big int only when it does
 * not (one value, one form: equal ints have equal words when tagged). An int op whose result
 * leaves the tagged range, or with a big int operand, takes the slow path vm_bigint (Rust,
 * vm/src/bigint.rs), which gives Python's result and tags it again when it fits. Specialised
 * int ops in traces never make a big int: they leave the trace, and the interpreter runs
 * the generic op.
 */
#ifndef VM_ABI_H
#define VM_ABI_H

#include <stdint.h>

#define VM_TAG_SHIFT 48
#define VM_TAG_INT 0xFFF9u
#define VM_TAG_BOOL 0xFFFAu
#define VM_TAG_NONE 0xFFFBu
#define VM_TAG_LIST 0xFFFCu
#define VM_TAG_BIGINT 0xFFFDu
#define VM_PAYLOAD_MASK 0x0000FFFFFFFFFFFFull
#define VM_INT_MIN (-(((int64_t)1) << 47))
#define VM_INT_MAX ((((int64_t)1) << 47) - 1)

#define VM_NONE (((uint64_t)VM_TAG_NONE) << VM_TAG_SHIFT)
#define VM_FALSE (((uint64_t)VM_TAG_BOOL) << VM_TAG_SHIFT)
#define VM_TRUE (VM_FALSE | 1u)

/* Type codes, as recorded by the trace recorder and used in error messages. */
#define VM_TYPE_FLOAT 0
#define VM_TYPE_INT 1
#define VM_TYPE_BOOL 2
#define VM_TYPE_NONE 3
#define VM_TYPE_LIST 4
#define VM_TYPE_BIGINT 5 /* an int outside the tagged range: Python's type is int */

/* Exit statuses: what an interpreter or a trace returns to Rust. */
#define VM_EXIT_RETURN 0         /* the function returned; frame->ret holds the value */
#define VM_EXIT_ERROR 1          /* an error is pending (frame->error_*) */
#define VM_EXIT_HOT_LOOP 2       /* a back-edge counter hit the threshold; aux = its pc */
#define VM_EXIT_ENTER_EXECUTOR 3 /* ENTER_EXECUTOR reached; aux = executor index */
#define VM_EXIT_SIDE 4           /* a trace left at frame->pc; aux = exit index */
#define VM_EXIT_RECORDED 5       /* the recorder stopped before frame->pc */
#define VM_EXIT_RECORD_FULL 6    /* the recorder's buffer is full; resume at frame->pc */

/* Error codes (frame->error_code). */
#define VM_ERR_NONE 0
#define VM_ERR_TYPE 1          /* unsupported operand types: error_a/error_b are the operands */
#define VM_ERR_ZERO_DIVISION 2 /* division or modulo by zero */
#define VM_ERR_OVERFLOW 3      /* a big int too large for a float (float(), mixed ops) */
#define VM_ERR_INDEX 4         /* list index out of range: error_a index, error_b length */
#define VM_ERR_VALUE 5         /* e.g. int(nan), negative list size, sqrt of a negative */
#define VM_ERR_PROPAGATED 6    /* a callee failed; the error is already recorded by Rust */
#define VM_ERR_INTERNAL 7      /* an op that cannot occur here (a guard in bytecode) */

/* An exit's link block (vm/src/vm.rs, `Executor::links`), VM_LINK_WORDS words per exit from
 * the link slot EXIT_TRACE's ARG1 points to: the link slot (0 or the code the exit continues
 * in), the pinned link slot VM_LINK_PINNED bytes past it (code entered with the pinned
 * registers live), and VM_LINK_EXIT_AT bytes past it the exit's pc << 32 | exit (EXIT_TRACE's
 * ARG0), which the stencils read when they leave to the interpreter. */
#define VM_LINK_WORDS 3
#define VM_LINK_PINNED 8
#define VM_LINK_EXIT_AT 16

/* The operations of the big-int slow path (vm_bigint's `op`). */
#define VM_BIG_ADD 0
#define VM_BIG_SUB 1
#define VM_BIG_MUL 2
#define VM_BIG_DIV 3
#define VM_BIG_FLOORDIV 4
#define VM_BIG_MOD 5
#define VM_BIG_LT 6
#define VM_BIG_LE 7
#define VM_BIG_GT 8
#define VM_BIG_GE 9
#define VM_BIG_EQ 10
#define VM_BIG_NE 11
#define VM_BIG_NEG 12      /* b unused */
#define VM_BIG_TO_FLOAT 13 /* float(a), a an int; b unused */
#define VM_BIG_TO_INT 14   /* int(a), a a finite float; b unused */

/* A list object; created and grown only by Rust helpers (vm_list_*). */
struct vm_list {
  int64_t len;
  int64_t cap;
  uint64_t *items;
};

/* One instruction: a bytecode in a code object or a micro-op in a trace. `target` is a
 * bytecode index (jumps in bytecode) or a trace index (jumps and exits in a trace). */
struct vm_inst {
  uint32_t op;
  uint32_t target;
  uint64_t arg0;
  uint64_t arg1;
};

/* One recorded bytecode: its index and the types of the top three stack slots before it ran. */
struct vm_record {
  int64_t pc;
  uint8_t types[3]; /* types[0] = top of stack */
  uint8_t pad[5];
};

/* The VM frame, passed to every op. Locals, then the value stack, follow the header. */
struct cpjit_frame {
  void *vm;                   /* the Rust VM running this frame (opaque to C) */
  int64_t pc;                 /* resume pc when leaving an interpreter or trace */
  uint64_t *sp;               /* value-stack pointer when leaving */
  int64_t aux;                /* exit index / back-edge pc / executor index */
  int64_t error_code;         /* VM_ERR_* */
  uint64_t error_a, error_b;  /* error details (see VM_ERR_*) */
  uint64_t ret;               /* return value of the function or of the last call */
  int64_t backedge_threshold; /* JUMP_BACKWARD reports VM_EXIT_HOT_LOOP at this count */
  int64_t nlocals;
  uint64_t *globals;          /* the program's global variables */
  uint64_t locals[];          /* nlocals locals, then the value stack */
};

#define VM_FRAME_HEADER_BYTES 88

/* The VM's frame stack. Every frame, interpreted or compiled, is pushed here (or, past
 * `limit`, in memory of its own) right after a link that chains it to the frame below, so
 * the VM can list the frames of a running call chain (function, pc, locals, stack). Compiled
 * calls (CALL_JIT) push and pop frames here without calling Rust. */
struct vm_frame_link {
  struct vm_frame_link *prev; /* the link of the frame below, or null */
  int64_t func;               /* the function the frame runs */
};

struct vm_frame_stack {
  uint64_t *top;              /* first free word */
  uint64_t *limit;            /* one past the last word */
  struct vm_frame_link *last; /* the newest frame's link */
  int64_t depth;              /* frames pushed; a call at max_depth raises RecursionError */
  int64_t max_depth;
  uint64_t epoch;             /* bumped whenever executors are invalidated */
  uint64_t direct_calls;      /* calls CALL_JIT made into compiled code (statistics) */
};

/* A function as a call site in compiled code sees it; one per function, owned by the VM. */
struct vm_callee {
  void *code;                  /* the entry trace's first op (a cpjit_op), or null */
  struct vm_frame_stack *stack;
  int64_t func;
  int64_t nlocals;
  int64_t frame_words;         /* link + frame header + locals + value stack */
};

/* One CALL_JIT of a trace; owned by the trace's executor. */
struct vm_call_site {
  const struct vm_callee *callee;
  int64_t pc;   /* the CALL bytecode: the caller's pc while the callee runs */
  int64_t argc; /* the op's ARG1, read from here where a loop runs over it */
};

_Static_assert(sizeof(struct vm_list) == 24, "vm_list size");
_Static_assert(sizeof(struct vm_inst) == 24, "vm_inst size");
_Static_assert(sizeof(struct vm_record) == 16, "vm_record size");
_Static_assert(sizeof(struct cpjit_frame) == VM_FRAME_HEADER_BYTES, "frame header size");
_Static_assert(__builtin_offsetof(struct cpjit_frame, pc) == 8, "frame.pc");
_Static_assert(__builtin_offsetof(struct cpjit_frame, sp) == 16, "frame.sp");
_Static_assert(__builtin_offsetof(struct cpjit_frame, aux) == 24, "frame.aux");
_Static_assert(__builtin_offsetof(struct cpjit_frame, error_code) == 32, "frame.error_code");
_Static_assert(__builtin_offsetof(struct cpjit_frame, ret) == 56, "frame.ret");
_Static_assert(__builtin_offsetof(struct cpjit_frame, backedge_threshold) == 64,
               "frame.backedge_threshold");
_Static_assert(__builtin_offsetof(struct cpjit_frame, globals) == 80, "frame.globals");
_Static_assert(__builtin_offsetof(struct cpjit_frame, locals) == 88, "frame.locals");
_Static_assert(sizeof(struct vm_frame_link) == 16, "vm_frame_link size");
_Static_assert(sizeof(struct vm_frame_stack) == 56, "vm_frame_stack size");
_Static_assert(sizeof(struct vm_callee) == 40, "vm_callee size");
_Static_assert(sizeof(struct vm_call_site) == 24, "vm_call_site size");
_Static_assert(__builtin_offsetof(struct vm_frame_stack, epoch) == 40, "vm_frame_stack.epoch");
_Static_assert(__builtin_offsetof(struct vm_callee, frame_words) == 32, "vm_callee.frame_words");

/* Helpers implemented in Rust (vm/src/helpers.rs). Only the calls can fail: vm_call returns
 * 1 when the callee raised (the error is recorded), 2 when executors were invalidated
 * meanwhile, else 0; vm_call_finish (a compiled callee left its code with `status`, not
 * returning: Rust runs it to its end) returns 1 when it raised, else 0, the result in
 * frame->ret. vm_global_store returns 1 when the store invalidated executors. */
int64_t vm_global_store(struct cpjit_frame *frame, uint64_t index, uint64_t value);
int64_t vm_call(struct cpjit_frame *frame, uint64_t *args, uint64_t func, uint64_t argc);
int64_t vm_call_finish(struct cpjit_frame *frame, struct cpjit_frame *callee, int64_t status);
void vm_print(struct cpjit_frame *frame, uint64_t *values, uint64_t count);
uint64_t vm_list_new(struct cpjit_frame *frame, int64_t len, uint64_t fill);
uint64_t vm_list_from(struct cpjit_frame *frame, uint64_t *values, uint64_t count);
void vm_list_append(struct vm_list *list, uint64_t value);
double vm_float_floordiv(double a, double b);
/* The big-int slow path: op (VM_BIG_*) on a and b, ints (tagged or big; bools already
 * unboxed) or, for mixed arithmetic and comparisons, one int and one float. Stores the
 * result in *r and returns 0, or returns a VM_ERR_* code. Only the generic ops call it,
 * with every value of their frame in memory (they are never register-cached). */
int64_t vm_bigint(struct cpjit_frame *frame, uint64_t op, uint64_t a, uint64_t b, uint64_t *r);
double vm_float_mod(double a, double b);
/* The int x boxed where it does not fit the tagged range: a big int (a pinned register
 * holding an int wide, written back; cached/wide.h). May collect big ints first. */
uint64_t vm_box_wide(struct cpjit_frame *frame, int64_t x);
/* vm_box_wide for an exit of a member whose registers hold raw 64-bit ints (a DEOPT of
 * cached/wide_stack.h): never collects, since other such registers and pinned ones may
 * still hold values no frame does; the next helper that collects finds the result in the
 * frame. */
uint64_t vm_box_wide_exit(struct cpjit_frame *frame, int64_t x);

#endif /* VM_ABI_H */
