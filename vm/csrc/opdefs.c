/* opdefs.c: preprocessed (never compiled) by vm/build.rs to read ops.def. Each op becomes
 * `VM_OP_BEGIN(NAME, "kinds", POP, PUSH) { body }` with the body's macros left unexpanded. */
#define OP(NAME, KINDS, POP, PUSH, ...) VM_OP_BEGIN(NAME, KINDS, POP, PUSH) __VA_ARGS__
#include "ops.def"
