# Hand-written test stencils, RISC-V LP64D (see gen.py). Frame in s2, stack in s3 (both
# callee-saved, so they survive helper calls). Frame slots: [0] accumulator, [8] loop
# counter, [16] data counter copy, [24] helper calls (written by the helper), [32] non-zero
# count. No compressed instructions and no relaxation, as the stencils are built; the
# R_RISCV_BRANCH cases are written out because llvm-mc turns a conditional branch to an
# undefined symbol into an inverted branch over a `jal`.
        .option norvc

.section .text.cpjit_entry,"ax",@progbits
        addi    sp, sp, -32
        sd      ra, 24(sp)
        sd      s2, 16(sp)
        sd      s3, 8(sp)
        mv      s2, a0
        mv      s3, a1
        call    CONTINUE
        ld      ra, 24(sp)
        ld      s2, 16(sp)
        ld      s3, 8(sp)
        addi    sp, sp, 32
        ret

.section .text.op_load_got,"ax",@progbits
load_got_hi:
        auipc   t0, %got_pcrel_hi(OPERAND0)
        ld      t0, %pcrel_lo(load_got_hi)(t0)
        sd      t0, 0(s2)

.section .text.op_add_got,"ax",@progbits
        ld      t1, 0(s2)
add_got_hi0:
        auipc   t0, %got_pcrel_hi(OPERAND0)
        ld      t0, %pcrel_lo(add_got_hi0)(t0)
        add     t1, t1, t0
add_got_hi1:
        auipc   t0, %got_pcrel_hi(OPERAND1)
        nop
        ld      t2, %pcrel_lo(add_got_hi1)(t0)
        add     t1, t1, t2
        sd      t1, 0(s2)

# The operand as a 64-bit literal in the code itself (R_RISCV_64 in the code section).
.section .text.op_load_abs,"ax",@progbits
        auipc   t0, 0
        ld      t0, 16(t0)
        j       1f
        nop
        .quad   OPERAND0
1:      sd      t0, 0(s2)

.section .text.op_load_data_abs,"ax",@progbits
load_data_hi:
        auipc   t0, %pcrel_hi(.Lliteral)
        ld      t0, %pcrel_lo(load_data_hi)(t0)
        sd      t0, 0(s2)
.section .data.op_load_data_abs,"aw",@progbits
.Lliteral:
        .quad   OPERAND0

.section .text.op_call_helper,"ax",@progbits
        addi    sp, sp, -16
        sd      ra, 8(sp)
        mv      a0, s2
        call    cpjit_test_helper
        ld      ra, 8(sp)
        addi    sp, sp, 16
        ld      t0, 0(s2)
        add     t0, t0, a0
        sd      t0, 0(s2)

.section .text.op_call_got,"ax",@progbits
        addi    sp, sp, -16
        sd      ra, 8(sp)
        mv      a0, s2
call_got_hi:
        auipc   t1, %got_pcrel_hi(cpjit_test_helper)
        ld      t1, %pcrel_lo(call_got_hi)(t1)
        jalr    t1
        ld      ra, 8(sp)
        addi    sp, sp, 16
        ld      t0, 0(s2)
        add     t0, t0, a0
        sd      t0, 0(s2)

.section .text.op_dec_jump_nz,"ax",@progbits
        ld      t0, 8(s2)
        addi    t0, t0, -1
        sd      t0, 8(s2)
        .reloc  ., R_RISCV_BRANCH, JUMP_TARGET
        .word   0x00029063                      # bnez t0, .

.section .text.op_data_counter,"ax",@progbits
counter_hi:
        auipc   t0, %pcrel_hi(.Lcounter)
        ld      t1, %pcrel_lo(counter_hi)(t0)
        addi    t1, t1, 1
        sd      t1, %pcrel_lo(counter_hi)(t0)
        sd      t1, 16(s2)
.section .data.op_data_counter,"aw",@progbits
.Lcounter:
        .quad   100

.section .text.op_skip_if_zero,"ax",@progbits
        ld      t0, 0(s2)
        .reloc  ., R_RISCV_BRANCH, CONTINUE
        .word   0x00028063                      # beqz t0, .
        ld      t1, 32(s2)
        addi    t1, t1, 1
        sd      t1, 32(s2)

# `beqz t1, CONTINUE`, which llvm-mc writes as `bnez t1, +8; j CONTINUE` (R_RISCV_JAL).
.section .text.op_skip_if_even,"ax",@progbits
        ld      t0, 0(s2)
        andi    t1, t0, 1
        beqz    t1, CONTINUE
        addi    t0, t0, 1
        sd      t0, 0(s2)

.section .text.op_exit_to,"ax",@progbits
        mv      a0, s2
        tail    EXIT_TARGET

.section .text.op_return,"ax",@progbits
        ld      a0, 0(s2)
        ret
