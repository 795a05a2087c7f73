//! A seeded random program generator for differential testing: loops long enough to tier
//! up, branches, ints near the overflow limits, divisions of known ints by constants
//! (shifts, masks and multiplications in traces), floats with NaN, infinities and -0.0, lists
//! (with indices that go out of range), calls, globals that change (invalidating traces),
//! and locals whose type changes mid-loop (so guards fail inside traces). A recursive
//! function `h` makes call chains: once hot, compiled code calls compiled code, whose guards
//! fail when argument types change and whose errors are raised deep in the chain; now and
//! then a chain is deeper than the recursion limit. `f` is pure and straight-line, so traces
//! inline it (`cpjit_vm::inline`); its overflows, errors and type changes leave the trace
//! inside the inlined body, and `h` may call it at the recursion limit.

use std::fmt::Write as _;

/// xorshift64*: small, deterministic, good enough for test cases.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const SCALARS: usize = 5;
const INT_MAX: i64 = (1 << 47) - 1;

struct Gen {
    rng: Rng,
    out: String,
    labels: usize,
    /// Nesting of loops (only two levels).
    loop_depth: usize,
}

impl Gen {
    fn label(&mut self) -> String {
        self.labels += 1;
        format!("L{}", self.labels)
    }

    fn line(&mut self, s: &str) {
        self.out.push_str("  ");
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn constant(&mut self) -> String {
        let r = &mut self.rng;
        match r.below(40) {
            0..=17 => format!("{}", r.below(21) as i64 - 10),
            18 => format!("{}", INT_MAX - r.below(4) as i64),
            19 => format!("{}", -INT_MAX - 1 + r.below(4) as i64),
            20 => format!("{}", (r.below(1 << 24) as i64) << 20),
            21..=28 => r
                .pick(&[
                    "0.0", "-0.0", "1.5", "-2.25", "0.1", "3.0", "1e300", "-7.5e-3",
                ])
                .into(),
            29 => r.pick(&["nan", "inf", "-inf"]).into(),
            30 => r.pick(&["true", "false", "none"]).into(),
            _ => format!("{}", r.below(1000)),
        }
    }

    fn operand(&mut self) {
        let s = match self.rng.below(10) {
            0..=4 => format!("load v{}", self.rng.below(SCALARS as u64)),
            5 | 6 => "load k".to_string(),
            7 | 8 => format!("load_global G{}", self.rng.below(2)),
            _ => format!("const {}", self.constant()),
        };
        self.line(&s);
    }

    fn expr(&mut self, depth: u32) {
        if depth == 0 || self.rng.chance(35) {
            self.operand();
            return;
        }
        if self.rng.chance(15) {
            self.expr(depth - 1);
            let op = self.rng.pick(&["neg", "not", "float", "int", "sqrt"]);
            self.line(op);
            return;
        }
        self.expr(depth - 1);
        self.expr(depth - 1);
        let op = self.rng.pick(&[
            "add", "add", "sub", "sub", "mul", "div", "floordiv", "mod", "lt", "le", "gt", "ge",
            "eq", "ne",
        ]);
        self.line(op);
    }

    /// An index: the counter (so a trace may keep it in a pinned register and store items
    /// on locals, `SETITEM_LOCALS`), the counter plus one (`SETITEM_LOCALS_NEXT`; true), a
    /// small constant (negative ones count from the end) or the counter's remainder.
    fn index(&mut self) -> bool {
        match self.rng.below(10) {
            0 => self.line("load k"),
            3 => {
                self.line("load k; const 1; add");
                return true;
            }
            1 | 2 => {
                let c = format!("const {}", self.rng.below(12) as i64 - 6);
                self.line(&c)
            }
            _ => {
                self.line("load k");
                let c = format!("const {}", 1 + self.rng.below(6));
                self.line(&c);
                self.line("mod");
            }
        }
        false
    }

    /// `//` and `%` of an int the trace knows (the loop counter, shifted to either
    /// sign, scaled or moved to the limits) by a constant: in traces, a shift or a
    /// mask by a power of two, multiplications by another constant but 0 and -1.
    fn constant_division(&mut self, v: u64) {
        let scaled = self.rng.pick(&[
            "const 5; sub",
            "const 9; mul",
            "const 3518437208883; mul",
            "const -70368744177000; add",
            "const -140737488355300; add",
            "const 140737488355300; add",
        ]);
        let divisor = self.rng.pick(&[
            "1",
            "2",
            "4",
            "64",
            "1024",
            "70368744177664",
            "3",
            "7",
            "1000",
            "140737488355327",
            "-2",
            "0",
            "-1",
            "-7",
            "-1024",
            "32767",
            "32769",
            "1000000007",
            "-1000000007",
            "-140737488355328",
        ]);
        let op = self.rng.pick(&["floordiv", "mod"]);
        self.line(&format!(
            "load k; {scaled}; const {divisor}; {op}; store v{v}"
        ));
    }

    /// A statement (stack-neutral).
    fn statement(&mut self, depth: u32) {
        let v = self.rng.below(SCALARS as u64);
        match self.rng.below(12) {
            0 | 1 => {
                self.expr(2);
                self.line(&format!("store v{v}"));
            }
            2 => {
                // An accumulation `s = s + e` or `s = t + s`: where a trace has proved s an
                // int and e (a pure expression) or t recorded as one, the value is pushed and
                // added into s in place (`ADD_TO_LOCAL_INT`), and every exit in e resumes at
                // the statement's start; on a float s, also `s = s * e` (`ADD_FLOAT_LOCAL`,
                // `MUL_FLOAT_LOCAL`: e + s for s + e, NaNs and -0.0 among the constants).
                if self.rng.chance(50) {
                    self.line(&format!("load v{v}"));
                    self.expr(1);
                    let op = if self.rng.chance(25) { "mul" } else { "add" };
                    self.line(&format!("{op}; store v{v}"));
                } else {
                    let w = self.rng.below(SCALARS as u64);
                    self.line(&format!("load v{w}; load v{v}; add; store v{v}"));
                }
            }
            3 => self.constant_division(v),
            4 if depth > 0 => {
                let (els, end) = (self.label(), self.label());
                self.expr(2);
                self.line(&format!("jump_if_false {els}"));
                self.statements(depth - 1, 2);
                self.line(&format!("jump {end}"));
                self.out.push_str(&format!("{els}:\n"));
                self.statements(depth - 1, 2);
                self.out.push_str(&format!("{end}:\n"));
            }
            5 => {
                // A type change after the loop has been traced: a guard fails mid-trace.
                let skip = self.label();
                let at = 3 + self.rng.below(40);
                self.line(&format!("load k; const {at}; eq; jump_if_false {skip}"));
                let c = self.constant();
                self.line(&format!("const {c}; store v{v}"));
                self.out.push_str(&format!("{skip}:\n"));
            }
            6 => {
                self.line("load lst");
                if self.index() {
                    // `lst[k + 1] = lst[k]`: the shift of an insertion sort, one micro-op.
                    self.line("load lst; load k; getitem");
                } else {
                    self.expr(1);
                }
                self.line("setitem");
            }
            7 => {
                self.line("load lst");
                let _ = self.index();
                self.line(&format!("getitem; store v{v}"));
            }
            8 => {
                // A remainder tested against 0: by a power of two, one low-bit guard.
                let skip = self.label();
                let m = self.rng.pick(&["13", "2", "4", "8"]);
                let (cmp, jump) = if self.rng.chance(50) {
                    ("eq", "jump_if_false")
                } else {
                    ("ne", "jump_if_true")
                };
                self.line(&format!(
                    "load k; const {m}; mod; const 0; {cmp}; {jump} {skip}"
                ));
                let w = self.rng.below(SCALARS as u64);
                self.line(&format!("load v{v}; load v{w}; load k; print 3"));
                self.out.push_str(&format!("{skip}:\n"));
            }
            9 if self.rng.chance(50) => {
                self.expr(1);
                self.expr(1);
                self.line(&format!("call f; store v{v}"));
            }
            9 => {
                // h(x, depth): a chain of depth + 1 calls; at one iteration (maybe) deeper
                // than the recursion limit.
                self.expr(1);
                let m = 2 + self.rng.below(5);
                self.line(&format!("load k; const {m}; mod"));
                if self.rng.chance(30) {
                    let at = 8 + self.rng.below(40);
                    self.line(&format!("load k; const {at}; eq; const 300; mul; add"));
                }
                self.line(&format!("call h; store v{v}"));
            }
            10 => {
                // Changing a global invalidates traces that folded it.
                let skip = self.label();
                let at = 2 + self.rng.below(60);
                self.line(&format!("load k; const {at}; eq; jump_if_false {skip}"));
                self.expr(1);
                let g = self.rng.below(2);
                self.line(&format!("store_global G{g}"));
                self.out.push_str(&format!("{skip}:\n"));
            }
            _ if self.loop_depth < 2 && depth > 0 => {
                let n = 2 + self.rng.below(20);
                self.counted_loop("j", n, depth - 1)
            }
            _ => {
                let skip = self.label();
                self.line(&format!("load k; const 4; lt; jump_if_false {skip}"));
                self.line("load lst");
                self.expr(1);
                self.line("append");
                self.out.push_str(&format!("{skip}:\n"));
            }
        }
    }

    fn statements(&mut self, depth: u32, max: u64) {
        for _ in 0..1 + self.rng.below(max) {
            self.statement(depth);
        }
    }

    fn counted_loop(&mut self, var: &str, n: u64, depth: u32) {
        let (head, done) = (self.label(), self.label());
        self.loop_depth += 1;
        self.line(&format!("const 0; store {var}"));
        self.out.push_str(&format!("{head}:\n"));
        self.line(&format!("load {var}; const {n}; lt; jump_if_false {done}"));
        self.statements(depth, 4);
        self.line(&format!("load {var}; const 1; add; store {var}"));
        self.line(&format!("jump {head}"));
        self.out.push_str(&format!("{done}:\n"));
        self.loop_depth -= 1;
    }
}

/// The program for `seed`.
pub fn program(seed: u64) -> String {
    let mut g = Gen {
        rng: Rng::new(seed),
        out: String::new(),
        labels: 0,
        loop_depth: 0,
    };
    let _ = writeln!(g.out, "# generated, seed {seed}");
    for i in 0..2 {
        let c = g.constant();
        let _ = writeln!(g.out, "global G{i} {c}");
    }
    // f(a, b): a small expression over its parameters.
    g.out.push_str("func f(a, b)\n  locals k v0 v1 v2 v3 v4\n  load a; store v0; load b; store v1; const 1; store k\n");
    g.expr(2);
    g.line("return");
    // h(a, d): recursion to depth d, then an expression over a and d (which may raise, or
    // see another type than before); on the way back, an operation on each level's result.
    g.out.push_str("end\nfunc h(a, d)\n  locals k v0 v1 v2 v3 v4\n  load a; store v0; load d; const 1; add; store v1; const 2; store k\n  const 3; store v2; const 1; store v3; const 0.5; store v4\n");
    let recurse = g.label();
    g.line(&format!("load d; const 0; le; jump_if_false {recurse}"));
    g.expr(2);
    if g.rng.chance(50) {
        // f is pure and straight-line: h's traces inline it, at any recursion depth, up to
        // the limit (where the interpreter raises at the call of f).
        g.line("load a; load d; call f; add");
    }
    g.line("return");
    g.out.push_str(&format!("{recurse}:\n"));
    g.line("load a; load d; const 1; sub; call h; store v2");
    g.expr(1);
    g.line("return");
    g.out
        .push_str("end\nfunc main()\n  locals k j lst v0 v1 v2 v3 v4\n");
    for v in 0..SCALARS {
        let c = g.constant();
        g.line(&format!("const {c}; store v{v}"));
    }
    let n = 6 + g.rng.below(4);
    g.line(&format!("const {n}; const 0; newlist; store lst"));
    let iterations = 10 + g.rng.below(120);
    g.loop_depth = 1;
    let (head, done) = (g.label(), g.label());
    g.line("const 0; store k");
    g.out.push_str(&format!("{head}:\n"));
    g.line(&format!(
        "load k; const {iterations}; lt; jump_if_false {done}"
    ));
    g.statements(2, 6);
    g.line("load k; const 1; add; store k");
    g.line(&format!("jump {head}"));
    g.out.push_str(&format!("{done}:\n"));
    g.line("load v0; load v1; load v2; load v3; load v4; load lst; print 6");
    g.line("const none; return");
    g.out.push_str("end\n");
    g.out
}
