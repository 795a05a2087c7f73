# Hand-written test stencils, x86-64 (see gen.py): assembled twice, with WIN64=0 for System V
# and WIN64=1 for Microsoft x64, which differ only in the argument registers and in the stack
# a call needs (Microsoft x64 callees own 32 bytes above the return address). Frame in r12,
# stack in r13.
# Frame slots: [0] accumulator, [8] loop counter, [16] data counter copy,
# [24] helper calls (written by the helper), [32] non-zero count.
.intel_syntax noprefix

# Calls `target` with the frame as its argument, rsp 16-aligned at the call.
.macro call_with_frame target:vararg
.if WIN64
    sub rsp, 40
    mov rcx, r12
.else
    sub rsp, 8
    mov rdi, r12
.endif
    call \target
.if WIN64
    add rsp, 40
.else
    add rsp, 8
.endif
.endm

.section .text.cpjit_entry,"ax",@progbits
    push r12
    push r13
.if WIN64
    sub rsp, 40                  # shadow space for helpers reached by a tail jump; 16-aligned
    mov r12, rcx
    mov r13, rdx
.else
    push rax                     # keeps rsp 16-aligned at the call
    mov r12, rdi
    mov r13, rsi
.endif
    call CONTINUE
.if WIN64
    add rsp, 40
.else
    pop rcx
.endif
    pop r13
    pop r12
    ret

.section .text.op_load_got,"ax",@progbits
    mov rax, qword ptr [rip + OPERAND0@GOTPCREL]
    mov qword ptr [r12], rax

.section .text.op_add_got,"ax",@progbits
    mov rax, qword ptr [r12]
    add rax, qword ptr [rip + OPERAND0@GOTPCREL]
    add rax, qword ptr [rip + OPERAND1@GOTPCREL]
    mov qword ptr [r12], rax

.section .text.op_load_abs,"ax",@progbits
    movabs rax, offset OPERAND0
    mov qword ptr [r12], rax

.section .text.op_load_data_abs,"ax",@progbits
    mov rax, qword ptr [rip + .Lliteral]
    mov qword ptr [r12], rax
.section .data.op_load_data_abs,"aw",@progbits
.Lliteral:
    .quad OPERAND0

.section .text.op_call_helper,"ax",@progbits
    call_with_frame cpjit_test_helper@PLT
    add qword ptr [r12], rax

.section .text.op_call_got,"ax",@progbits
    call_with_frame qword ptr [rip + cpjit_test_helper@GOTPCREL]
    add qword ptr [r12], rax

.section .text.op_dec_jump_nz,"ax",@progbits
    dec qword ptr [r12 + 8]
    jne JUMP_TARGET

.section .text.op_data_counter,"ax",@progbits
    lea rax, [rip + .Lcounter]
    inc qword ptr [rax]
    mov rcx, qword ptr [rax]
    mov qword ptr [r12 + 16], rcx
.section .data.op_data_counter,"aw",@progbits
.Lcounter:
    .quad 100

.section .text.op_skip_if_zero,"ax",@progbits
    cmp qword ptr [r12], 0
    je CONTINUE
    inc qword ptr [r12 + 32]

.section .text.op_exit_to,"ax",@progbits
.if WIN64
    mov rcx, r12
.else
    mov rdi, r12
.endif
    jmp EXIT_TARGET

.section .text.op_return,"ax",@progbits
    mov rax, qword ptr [r12]
    ret
