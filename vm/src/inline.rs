//! Which calls a trace inlines, decided once per program from the bytecode alone.
//!
//! A callee is inlined when running it again from its start is indistinguishable from
//! resuming it in the middle: its code is one straight line ending in its only `RETURN`
//! (no jumps, so no loops), it has no effect outside its own locals (no global stores,
//! printing, list allocation or mutation), it never stores into a parameter (the caller's
//! arguments stay intact under it), and every call it makes is itself inlined, at most
//! [`MAX_NESTING`] calls deep. Such a body can then leave the trace anywhere (a failing
//! guard, an overflow, an error) by resuming the interpreter at the caller's `CALL` with the
//! value stack cut back to the arguments: the interpreter makes the call itself and raises
//! (or not) exactly as it would have. The trace keeps the callee's locals on the caller's
//! value stack above the arguments; [`Inlining::stack_words`] sizes every frame for it.
//! Inside a statement `s = s + e` whose exits all resume at its start (`crate::trace`,
//! `accumulation`: e a pure expression, which such a call is), arguments that are loads of
//! locals are not pushed at all: the callee's parameters read those locals, which nothing
//! in the statement writes.

use crate::ops::{self, op};
use crate::parser::{Function, Program};

/// How many calls deep inlined callees may nest (a callee inlined into a caller that is
/// itself inlined counts 2).
pub const MAX_NESTING: u32 = 3;

/// The most value-stack words an inlined callee's locals and values may take (a local is
/// then at most that many values below the top: `COPY`'s and `PUT`'s depth).
pub const MAX_FRAME_WORDS: usize = 48;

/// What inlining a callee costs the trace that does it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inlinable {
    /// Calls deep, this one included: 1 for a callee that calls nothing.
    pub nesting: u32,
    /// Value-stack words the inlined body needs above its arguments: its other locals,
    /// its own values and those of the callees inlined into it.
    pub extra: usize,
}

/// The program's inlining facts.
#[derive(Clone, Debug, Default)]
pub struct Inlining {
    /// By function: whether calls to it are inlined, and what that costs.
    pub callees: Vec<Option<Inlinable>>,
    /// By function: the value-stack words its frame needs, room for inlined calls included.
    pub stack_words: Vec<usize>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Unvisited,
    Visiting,
    Done(Option<Inlinable>),
}

impl Inlining {
    pub fn of(program: &Program) -> Inlining {
        let n = program.functions.len();
        let mut states = vec![State::Unvisited; n];
        for f in 0..n {
            visit(program, f, &mut states);
        }
        let callees: Vec<Option<Inlinable>> = states
            .iter()
            .map(|s| match s {
                State::Done(i) => *i,
                _ => None,
            })
            .collect();
        let stack_words = program
            .functions
            .iter()
            .map(|f| {
                calls(f)
                    .filter_map(|(pc, g)| callees[g].map(|i| f.depths[pc] as usize + i.extra))
                    .fold(f.max_stack, usize::max)
            })
            .collect();
        Inlining {
            callees,
            stack_words,
        }
    }

    /// Whether calls to function `f` are inlined, and at what cost.
    pub fn callee(&self, f: usize) -> Option<Inlinable> {
        self.callees.get(f).copied().flatten()
    }
}

/// The `CALL`s of `f`: (pc, callee).
fn calls(f: &Function) -> impl Iterator<Item = (usize, usize)> + '_ {
    f.code
        .iter()
        .enumerate()
        .filter(|(_, i)| i.op == op::CALL)
        .map(|(pc, i)| (pc, i.arg0 as usize))
}

/// The bytecodes an inlined body may hold besides `CALL` and its final `RETURN`: those that
/// only read (see [`reads_only`]), and stores into its own locals.
fn pure(bytecode: u32) -> bool {
    reads_only(bytecode) || bytecode == op::STORE
}

/// The bytecodes that only read their operands, locals, globals and list items and push a
/// result (raising at worst): running one again from the start of a run of them is
/// indistinguishable from resuming it (`crate::trace`'s `accumulation` relies on it too).
pub fn reads_only(bytecode: u32) -> bool {
    matches!(
        bytecode,
        op::NOP
            | op::CONST
            | op::LOAD
            | op::LOAD_GLOBAL
            | op::POP
            | op::DUP
            | op::SWAP
            | op::ADD
            | op::SUB
            | op::MUL
            | op::DIV
            | op::FLOORDIV
            | op::MOD
            | op::LT
            | op::LE
            | op::GT
            | op::GE
            | op::EQ
            | op::NE
            | op::NEG
            | op::FLOAT
            | op::INT
            | op::SQRT
            | op::LEN
            | op::NOT
            | op::GETITEM
    )
}

fn visit(program: &Program, f: usize, states: &mut [State]) -> Option<Inlinable> {
    match states[f] {
        State::Done(i) => return i,
        // A call back into a function being examined: recursion is never inlined.
        State::Visiting => return None,
        State::Unvisited => {}
    }
    states[f] = State::Visiting;
    let result = examine(program, f, states);
    states[f] = State::Done(result);
    result
}

fn examine(program: &Program, f: usize, states: &mut [State]) -> Option<Inlinable> {
    let func = &program.functions[f];
    let (last, body) = func.code.split_last()?;
    if last.op != op::RETURN {
        return None;
    }
    let mut nesting = 1;
    let mut peak = func.max_stack;
    for (pc, inst) in body.iter().enumerate() {
        match inst.op {
            op::STORE if (inst.arg0 as usize) < func.params => return None,
            op::CALL => {
                let callee = visit(program, inst.arg0 as usize, states)?;
                nesting = nesting.max(callee.nesting + 1);
                peak = peak.max(func.depths[pc] as usize + callee.extra);
            }
            bytecode if pure(bytecode) => {
                debug_assert!(!ops::info(bytecode).jumps);
            }
            _ => return None,
        }
    }
    let extra = func.locals.len() - func.params + peak;
    (nesting <= MAX_NESTING && func.params + extra <= MAX_FRAME_WORDS)
        .then_some(Inlinable { nesting, extra })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inlining(text: &str) -> (Program, Inlining) {
        let p = crate::parse(text).unwrap();
        let i = Inlining::of(&p);
        (p, i)
    }

    fn index(p: &Program, name: &str) -> usize {
        p.functions.iter().position(|f| f.name == name).unwrap()
    }

    #[test]
    fn straight_line_pure_callees_are_inlined_with_their_nesting_and_room() {
        let (p, i) = inlining(
            "func g(x)\n  load x; const 7; floordiv; return\nend\n\
             func f(x)\n  locals t\n  load x; load x; mul; store t\n  load t; load x; call g; add; return\nend\n\
             func main()\n  const 1; const 2; call f; add; print\n  const none; return\nend\n",
        );
        let g = i.callee(index(&p, "g")).unwrap();
        assert_eq!(
            g,
            Inlinable {
                nesting: 1,
                extra: 2
            }
        );
        // f: t (1) + its deepest point: t's value and x under g's room (2 + 2).
        let f = i.callee(index(&p, "f")).unwrap();
        assert_eq!(
            f,
            Inlinable {
                nesting: 2,
                extra: 1 + 4
            }
        );
        // main calls f with 1 and f's argument on the stack: 2 + f's extra.
        assert_eq!(i.stack_words[index(&p, "main")], 2 + 5);
        // main has a loop-free body too, but prints: never inlined.
        assert_eq!(i.callee(index(&p, "main")), None);
    }

    #[test]
    fn effects_jumps_recursion_parameter_stores_and_deep_nesting_are_not_inlined() {
        let (p, i) = inlining(
            "global G\n\
             func stores_global(x)\n  load x; store_global G; const 0; return\nend\n\
             func prints(x)\n  load x; print; const 0; return\nend\n\
             func branches(x)\n  load x; jump_if_false z\n  const 1; return\nz:\n  const 0; return\nend\n\
             func recurses(x)\n  load x; call recurses; return\nend\n\
             func stores_param(x)\n  const 1; store x; load x; return\nend\n\
             func d1(x)\n  load x; return\nend\n\
             func d2(x)\n  load x; call d1; return\nend\n\
             func d3(x)\n  load x; call d2; return\nend\n\
             func d4(x)\n  load x; call d3; return\nend\n\
             func main()\n  const none; return\nend\n",
        );
        for name in [
            "stores_global",
            "prints",
            "branches",
            "recurses",
            "stores_param",
            "d4",
        ] {
            assert_eq!(i.callee(index(&p, name)), None, "{name}");
        }
        assert_eq!(i.callee(index(&p, "d3")).unwrap().nesting, 3);
        // d4 is not inlined, but its call of d3 is: its frame has the room.
        assert_eq!(i.stack_words[index(&p, "d4")], 1 + 3);
    }
}
