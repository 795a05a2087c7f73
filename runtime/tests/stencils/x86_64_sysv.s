# Hand-written test stencils, x86-64 System V (see gen.py). Frame in r12, stack in r13.
# Frame slots: [0] accumulator, [8] loop counter, [16] data counter copy,
# [24] helper calls (written by the helper), [32] non-zero count.
.intel_syntax noprefix

.section .text.cpjit_entry,"ax",@progbits
    push r12
    push r13
    push rax                     # keeps rsp 16-aligned at the call
    mov r12, rdi
    mov r13, rsi
    call CONTINUE
    pop rcx
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
    sub rsp, 8
    mov rdi, r12
    call cpjit_test_helper@PLT
    add rsp, 8
    add qword ptr [r12], rax

.section .text.op_call_got,"ax",@progbits
    sub rsp, 8
    mov rdi, r12
    call qword ptr [rip + cpjit_test_helper@GOTPCREL]
    add rsp, 8
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
    mov rdi, r12
    jmp EXIT_TARGET

.section .text.op_return,"ax",@progbits
    mov rax, qword ptr [r12]
    ret
