//! Hand-written programs, assembled with [`Asm`] (labels resolved at the end): the loop-heavy
//! ones the bench times and the README quotes.

use crate::Op;

/// A tiny assembler: ops with symbolic jump targets.
#[derive(Default)]
pub struct Asm {
    ops: Vec<Op>,
    /// Per label, the op it names (`u32::MAX` until placed).
    labels: Vec<u32>,
}

impl Asm {
    /// A new label, placed later with [`Asm::place`].
    pub fn label(&mut self) -> u32 {
        self.labels.push(u32::MAX);
        self.labels.len() as u32 - 1
    }

    /// Places `label` at the next op.
    pub fn place(&mut self, label: u32) {
        self.labels[label as usize] = self.ops.len() as u32;
    }

    /// Appends ops; jump operands are labels.
    pub fn ops(&mut self, ops: &[Op]) -> &mut Self {
        self.ops.extend_from_slice(ops);
        self
    }

    /// The program, jump operands replaced by the ops their labels name.
    pub fn finish(mut self) -> Vec<Op> {
        for op in &mut self.ops {
            if let Op::Jump(t) | Op::Jz(t) | Op::Jnz(t) = op {
                let at = self.labels[*t as usize];
                assert!(at != u32::MAX, "label {t} was never placed");
                *t = at;
            }
        }
        self.ops
    }
}

/// The total number of Collatz steps of the starting values 1 to `n`: two nested loops, an
/// `if` with a shift, multiply-add and compare; returns the total, prints nothing.
pub fn collatz(n: i64) -> Vec<Op> {
    use Op::*;
    // Locals: 0 the start value, 1 the current value, 2 the total steps.
    let mut a = Asm::default();
    let (outer, inner, even, next) = (a.label(), a.label(), a.label(), a.label());
    a.ops(&[Const(1), Store(0)]);
    a.place(outer);
    a.ops(&[Load(0), Store(1)]);
    a.place(inner);
    a.ops(&[Load(1), Const(1), Eq, Jnz(next)]);
    a.ops(&[Load(1), Const(1), And, Jz(even)]);
    a.ops(&[Load(1), Const(3), Mul, Const(1), Add, Store(1)]);
    a.ops(&[Load(2), Const(1), Add, Store(2), Jump(inner)]);
    a.place(even);
    a.ops(&[Load(1), Const(1), Shr, Store(1)]);
    a.ops(&[Load(2), Const(1), Add, Store(2), Jump(inner)]);
    a.place(next);
    a.ops(&[
        Load(0),
        Const(1),
        Add,
        Dup,
        Store(0),
        Const(n + 1),
        Lt,
        Jnz(outer),
    ]);
    a.ops(&[Load(2), Ret]);
    a.finish()
}

/// The sum of `((i * i) & 0xffff) + i` for `i` in 0..`n`, kept on the stack: the loop body
/// works on stack values (dup, swap, arithmetic) rather than locals.
pub fn series(n: i64) -> Vec<Op> {
    use Op::*;
    // Stack: [sum, i]; loop while i < n.
    let mut a = Asm::default();
    let (head, end) = (a.label(), a.label());
    a.ops(&[Const(0), Const(0)]);
    a.place(head);
    a.ops(&[Dup, Const(n), Lt, Jz(end)]);
    // sum += ((i * i) & 0xffff) + i; i += 1 (through local 3)
    a.ops(&[
        Dup,
        Dup,
        Mul,
        Const(0xffff),
        And,
        Swap,
        Dup,
        Const(1),
        Add,
        Store(3),
    ]);
    a.ops(&[Add, Add, Load(3), Jump(head)]);
    a.place(end);
    a.ops(&[Drop, Ret]);
    a.finish()
}

/// Prints the first `n` Fibonacci numbers and a checksum through the helper; returns the
/// last.
pub fn fib_mix(n: i64) -> Vec<Op> {
    use Op::*;
    let mut a = Asm::default();
    let (head, end) = (a.label(), a.label());
    // Locals: 0 a, 1 b, 2 counter, 3 checksum.
    a.ops(&[Const(0), Store(0), Const(1), Store(1), Const(n), Store(2)]);
    a.place(head);
    a.ops(&[Load(2), Jz(end)]);
    a.ops(&[Load(0), Dup, Print, Load(1), Dup, Store(0), Add, Store(1)]);
    a.ops(&[Load(3), Load(0), Mix, Store(3)]);
    a.ops(&[Load(2), Const(1), Sub, Store(2), Jump(head)]);
    a.place(end);
    a.ops(&[Load(3), Print, Load(0), Ret]);
    a.finish()
}
