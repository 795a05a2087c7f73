//! Typed fast paths the trace compiler picks from what a trace proves: `x // 2**k` and
//! `x % 2**k` on an int it knows become a shift and a mask (`FLOORDIV_INT_POW2`,
//! `MOD_INT_POW2`), with Python's floor semantics for negative dividends and at the limits
//! of the int range; divisors that are not positive powers of two keep the division.

use crate::common;

use common::{eager, run_traced, MODES};
use cpjit_vm::jit::{Backend, CompiledTrace, TraceCompiler};
use cpjit_vm::ops::op;
use cpjit_vm::trace::Trace;
use cpjit_vm::{Config, Mode, Vm};
use std::cell::RefCell;
use std::rc::Rc;

/// Compiles with copy-and-patch and keeps every trace's micro-ops.
struct Recording {
    backend: Backend,
    ops: RefCell<Vec<u32>>,
}

impl TraceCompiler for Recording {
    fn name(&self) -> &str {
        "recording"
    }

    fn compile(&self, trace: &Trace) -> Result<CompiledTrace, String> {
        self.ops
            .borrow_mut()
            .extend(trace.uops[..trace.body_len].iter().map(|u| u.op));
        self.backend.compile(trace)
    }
}

/// The largest int (48-bit ints) over 20: `x * SCALE` for x in -20..20 reaches the limits.
const SCALE: i64 = 7_036_874_417_766;
const BIG: i64 = 1 << 46;

const PROGRAM: &str = "func main()
  locals i x y
  const 0; store i
loop:
  load i; const 40; lt; jump_if_false done
  load i; const 20; sub; store x
  load x; const 7036874417766; mul; store y
  load x; const 1; floordiv; load x; const 2; floordiv; load x; const 8; floordiv; load x; const 3; floordiv; print 4
  load x; const 1; mod; load x; const 2; mod; load x; const 16; mod; load x; const -4; mod; print 4
  load y; const 1024; floordiv; load y; const 70368744177664; floordiv; load y; const 1024; mod; load y; const 70368744177664; mod; print 4
  load i; const 1; add; store i
  jump loop
done:
  const none; return
end
";

/// Python's `//` and `%` (floor division; the remainder has the divisor's sign).
fn floor_div(x: i64, d: i64) -> i64 {
    let q = x / d;
    if x % d != 0 && ((x < 0) != (d < 0)) {
        q - 1
    } else {
        q
    }
}

fn floor_mod(x: i64, d: i64) -> i64 {
    x - d * floor_div(x, d)
}

fn expected() -> String {
    let mut out = String::new();
    for i in 0..40 {
        let x = i - 20;
        let y = x * SCALE;
        let line = |v: [i64; 4]| format!("{} {} {} {}\n", v[0], v[1], v[2], v[3]);
        out += &line([1, 2, 8, 3].map(|d| floor_div(x, d)));
        out += &line([1, 2, 16, -4].map(|d| floor_mod(x, d)));
        out += &line([
            floor_div(y, 1024),
            floor_div(y, BIG),
            floor_mod(y, 1024),
            floor_mod(y, BIG),
        ]);
    }
    out
}

#[test]
fn power_of_two_divisions_are_shifts_and_masks_with_floor_semantics_in_every_mode() {
    let want = expected();
    for mode in MODES {
        assert_eq!(run_traced(PROGRAM, eager(mode)), want, "{mode:?}");
    }
    let recording = Rc::new(Recording {
        backend: Backend::host().expect("host stencils are linked"),
        ops: RefCell::new(Vec::new()),
    });
    let vm = Vm::new(
        cpjit_vm::parse(PROGRAM).unwrap(),
        Config {
            compiler: Some(recording.clone() as Rc<dyn TraceCompiler>),
            ..eager(Mode::Jit)
        },
    )
    .unwrap();
    vm.run().unwrap();
    assert_eq!(vm.output(), want);
    let ops = recording.ops.borrow();
    let count = |id: u32| ops.iter().filter(|&&o| o == id).count();
    // Per loop trace: 1, 2, 8 and 2**10, 2**46 divide; 1, 2, 16 and 2**10, 2**46 take the
    // remainder; 3 and -4 keep the division.
    assert!(count(op::FLOORDIV_INT_POW2) >= 5, "{ops:?}");
    assert!(count(op::MOD_INT_POW2) >= 5, "{ops:?}");
    assert!(
        count(op::FLOORDIV_INT) >= 1 && count(op::MOD_INT) >= 1,
        "{ops:?}"
    );
}
