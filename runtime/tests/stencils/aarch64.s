// Hand-written test stencils, AArch64 AAPCS64 (see gen.py). Frame in x20, stack in x21.
// Frame slots: [0] accumulator, [8] loop counter, [16] data counter copy,
// [24] helper calls (written by the helper), [32] non-zero count.

// Around a helper call: the frame as its argument, then what it returns added to the
// accumulator.
.macro helper_call_begin
    stp x29, x30, [sp, #-16]!
    mov x0, x20
.endm
.macro helper_call_end
    ldp x29, x30, [sp], #16
    ldr x8, [x20]
    add x8, x8, x0
    str x8, [x20]
.endm

.section .text.cpjit_entry,"ax",@progbits
    stp x29, x30, [sp, #-32]!
    mov x29, sp
    stp x20, x21, [sp, #16]
    mov x20, x0
    mov x21, x1
    bl CONTINUE
    ldp x20, x21, [sp, #16]
    ldp x29, x30, [sp], #32
    ret

.section .text.op_load_got,"ax",@progbits
    adrp x8, :got:OPERAND0
    ldr x8, [x8, :got_lo12:OPERAND0]
    str x8, [x20]

.section .text.op_add_got,"ax",@progbits
    ldr x9, [x20]
    adrp x8, :got:OPERAND0
    ldr x8, [x8, :got_lo12:OPERAND0]
    add x9, x9, x8
    adrp x8, :got:OPERAND1
    ldr x8, [x8, :got_lo12:OPERAND1]
    add x9, x9, x8
    str x9, [x20]

.section .text.op_load_abs,"ax",@progbits
    movz x8, #:abs_g3:OPERAND0
    movk x8, #:abs_g2_nc:OPERAND0
    movk x8, #:abs_g1_nc:OPERAND0
    movk x8, #:abs_g0_nc:OPERAND0
    str x8, [x20]

.section .text.op_load_data_abs,"ax",@progbits
    adrp x8, .Lliteral
    ldr x8, [x8, :lo12:.Lliteral]
    str x8, [x20]
.section .data.op_load_data_abs,"aw",@progbits
.Lliteral:
    .quad OPERAND0

.section .text.op_call_helper,"ax",@progbits
    helper_call_begin
    bl cpjit_test_helper
    helper_call_end

.section .text.op_call_got,"ax",@progbits
    helper_call_begin
    adrp x16, :got:cpjit_test_helper
    ldr x16, [x16, :got_lo12:cpjit_test_helper]
    blr x16
    helper_call_end

.section .text.op_dec_jump_nz,"ax",@progbits
    ldr x8, [x20, #8]
    subs x8, x8, #1
    str x8, [x20, #8]
    b.ne JUMP_TARGET

.section .text.op_data_counter,"ax",@progbits
    adrp x8, .Lcounter
    add x8, x8, :lo12:.Lcounter
    ldr x9, [x8]
    add x9, x9, #1
    str x9, [x8]
    str x9, [x20, #16]
.section .data.op_data_counter,"aw",@progbits
.Lcounter:
    .quad 100

.section .text.op_skip_if_zero,"ax",@progbits
    ldr x8, [x20]
    cbz x8, CONTINUE
    ldr x9, [x20, #32]
    add x9, x9, #1
    str x9, [x20, #32]

.section .text.op_skip_if_even,"ax",@progbits
    ldr x8, [x20]
    tbz x8, #0, CONTINUE
    add x8, x8, #1
    str x8, [x20]

.section .text.op_exit_to,"ax",@progbits
    mov x0, x20
    b EXIT_TARGET

.section .text.op_return,"ax",@progbits
    ldr x0, [x20]
    ret
