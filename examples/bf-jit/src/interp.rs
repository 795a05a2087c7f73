//! The reference interpreter: the same ops and the same statuses as the JIT, one `match`
//! per op.

use crate::{Op, Outcome, Status, TAPE_CELLS};

/// Runs `ops` on a fresh tape, reading `input` (at its end `,` leaves the cell unchanged).
pub fn interpret(ops: &[Op], input: &[u8]) -> Outcome {
    let mut tape = vec![0u8; TAPE_CELLS];
    let (mut p, mut pc) = (0usize, 0usize);
    let mut input = input.iter();
    let mut output = Vec::new();
    while let Some(&op) = ops.get(pc) {
        pc += 1;
        match op {
            Op::Add(n) => tape[p] = tape[p].wrapping_add(n),
            Op::Move(d) => match p.checked_add_signed(d).filter(|&q| q < TAPE_CELLS) {
                Some(q) => p = q,
                None => {
                    return Outcome {
                        output,
                        status: Status::TapeOverflow,
                    }
                }
            },
            Op::Clear => tape[p] = 0,
            Op::LoopStart { end } if tape[p] == 0 => pc = end + 1,
            Op::LoopEnd { start } if tape[p] != 0 => pc = start + 1,
            Op::LoopStart { .. } | Op::LoopEnd { .. } => {}
            Op::Output => output.push(tape[p]),
            Op::Input => {
                if let Some(&b) = input.next() {
                    tape[p] = b;
                }
            }
        }
    }
    Outcome {
        output,
        status: Status::Ok,
    }
}
