//! Seeded random programs, run through rbpf's interpreter, the JIT and this crate's
//! interpreter (tests/common), which must agree on r0, memory and error kind.
//!
//! A program is main's segments, then EXIT, then up to two local functions. A segment is
//! straight-line code whose jumps go forward within it (to the start of any later
//! instruction group or to the segment's end), or a bounded loop (`mov r8, K` ... body ...
//! `sub r8, 1; jcc r8, 0, back`) whose body is such a segment. r8 is written only by loop
//! heads and tails, so every loop terminates. Pointers stay out of the data: r1 (mem or
//! mbuff), r10 (the stack) and r9 (an address computed from them and data) are only bases
//! of loads and stores; r0 and r2..r7 hold data, and the helpers never read r1. Memory
//! traffic aims at the edges of the regions.
//!
//! `EBPF_JIT_PROGRAMS` (default 10,000; 2,000 under qemu, where `../outside-crate-ci.sh` sets
//! `CPJIT_EXAMPLE_QEMU`: the same first seeds, which the native run also checks, so the
//! emulated rows stay within CI's budget) and `EBPF_JIT_SEED` change the run.

mod common;
// The same programs compiled in batches (`EbpfVm::jit_compile_batch`).
#[path = "generated/batched.rs"]
mod batched;

use common::*;
use ebpf_jit::{AluOp, Cond, ErrorKind, Insn, Kind, Width};

const DATA: [u8; 7] = [0, 2, 3, 4, 5, 6, 7];

/// An atomic group of instructions (never jumped into), or a forward jump whose target is
/// picked at layout.
enum Item {
    Code(Vec<Insn>),
    Jump(Insn),
    /// A local call of function k (patched at layout).
    CallFn(usize),
}

struct Gen {
    rng: Rng,
    /// The length of the region r1 points to (0: r1 is 0).
    r1_len: i64,
    mem_len: i64,
    /// How many local functions the program has.
    functions: usize,
}

fn code(insns: Vec<Insn>) -> Item {
    Item::Code(insns)
}

fn op(kind: Kind, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    raw(ebpf_jit::encode_kind(kind), dst, src, off, imm)
}

impl Gen {
    fn data(&mut self) -> u8 {
        self.rng.pick(&DATA)
    }

    fn imm(&mut self) -> i32 {
        if self.rng.chance(60) {
            self.rng.pick(&EDGE32)
        } else {
            self.rng.next() as i32 >> self.rng.below(32)
        }
    }

    fn width(&mut self) -> Width {
        self.rng.pick(&WIDTHS)
    }

    /// A base register and an offset: mostly inside its region, sometimes at an edge
    /// (one byte inside or outside), so that most programs run on past their accesses.
    fn address(&mut self, w: Width, fun: Option<usize>) -> (u8, i16) {
        let n = w.bytes() as i64;
        let edge = self.rng.chance(6);
        let pick = self.rng.below(10);
        if pick < 5 && self.r1_len >= n {
            let l = self.r1_len;
            let off = if edge {
                self.rng.pick(&[-1, 0, l - n, l - n + 1])
            } else {
                self.rng.range(0, l - n)
            };
            (1, off as i16)
        } else if pick < 9 {
            // Inside a function r10 is 256 bytes lower.
            let bottom = if fun.is_some() { -256 } else { -512 };
            let off = if edge {
                self.rng.pick(&[bottom - 1, bottom, -n, -n + 1])
            } else {
                self.rng.range(bottom, -n)
            };
            (10, off as i16)
        } else {
            (9, self.rng.range(-8, 8) as i16)
        }
    }

    /// Sets r9 to an address: near the edges of mem/mbuff or the stack, or computed from
    /// data.
    fn set_r9(&mut self) -> Item {
        let d = self.data();
        let mov = |src| {
            op(
                Kind::Alu {
                    op: AluOp::Mov,
                    wide: true,
                    reg: true,
                },
                9,
                src,
                0,
                0,
            )
        };
        let add_imm = |imm| {
            op(
                Kind::Alu {
                    op: AluOp::Add,
                    wide: true,
                    reg: false,
                },
                9,
                0,
                0,
                imm,
            )
        };
        let add_reg = |src| {
            op(
                Kind::Alu {
                    op: AluOp::Add,
                    wide: true,
                    reg: true,
                },
                9,
                src,
                0,
                0,
            )
        };
        let and = |imm| {
            op(
                Kind::Alu {
                    op: AluOp::And,
                    wide: true,
                    reg: false,
                },
                9,
                0,
                0,
                imm,
            )
        };
        code(match self.rng.below(4) {
            0 => {
                let imm = self.r1_len as i32 - self.rng.range(-2, 9) as i32;
                vec![mov(1), add_imm(imm)]
            }
            1 => vec![mov(10), add_imm(-(self.rng.range(1, 520) as i32))],
            2 => vec![mov(d), and(self.rng.pick(&[7, 15, 31, 63])), add_reg(1)],
            _ => vec![mov(d), and(511), add_reg(10), add_imm(-512)],
        })
    }

    /// One item of straight-line code (`fun`: the function it is in, if any).
    fn item(&mut self, fun: Option<usize>) -> Item {
        let dst = self.data();
        let src = self.data();
        match self.rng.below(100) {
            0..=29 => self.alu_item(dst, src),
            30..=32 => {
                let wide = self.rng.chance(50);
                code(vec![op(
                    Kind::Alu {
                        op: AluOp::Neg,
                        wide,
                        reg: false,
                    },
                    dst,
                    0,
                    0,
                    0,
                )])
            }
            33..=35 => {
                let to_be = self.rng.chance(50);
                let width = self.rng.pick(&[16, 32, 64]);
                code(vec![op(Kind::End { to_be }, dst, 0, 0, width)])
            }
            36..=40 => {
                let v = if self.rng.chance(50) {
                    self.rng.pick(&EDGE64)
                } else {
                    self.rng.next()
                };
                code(vec![
                    raw(0x18, dst, 0, 0, v as u32 as i32),
                    raw(0, 0, 0, 0, (v >> 32) as i32),
                ])
            }
            41..=53 => {
                let w = self.width();
                let (base, off) = self.address(w, fun);
                code(vec![op(Kind::Ldx(w), dst, base, off, 0)])
            }
            54..=66 => {
                let w = self.width();
                let (base, off) = self.address(w, fun);
                if self.rng.chance(50) {
                    code(vec![op(Kind::Stx(w), base, src, off, 0)])
                } else {
                    let imm = self.imm();
                    code(vec![op(Kind::St(w), base, 0, off, imm)])
                }
            }
            67..=71 => self.set_r9(),
            72..=76 => {
                let id = if self.rng.chance(3) {
                    UNKNOWN_HELPER
                } else {
                    self.rng.pick(&HELPERS).0
                };
                code(vec![op(Kind::Call, 0, 0, 0, id as i32)])
            }
            77..=79 => self.packet_load_item(src),
            80..=82 => {
                // A call of a later function (so that calls never recurse).
                let next = fun.map_or(0, |k| k + 1);
                if next < self.functions {
                    Item::CallFn(self.rng.range(next as i64, self.functions as i64 - 1) as usize)
                } else {
                    self.item(fun)
                }
            }
            _ => self.jump_item(dst, src),
        }
    }

    /// An ALU operation on `dst` with `src` or an immediate.
    fn alu_item(&mut self, dst: u8, src: u8) -> Item {
        let op_ = self.rng.pick(&ALU_OPS);
        let wide = self.rng.chance(50);
        if self.rng.chance(50) {
            code(vec![op(
                Kind::Alu {
                    op: op_,
                    wide,
                    reg: true,
                },
                dst,
                src,
                0,
                0,
            )])
        } else {
            let imm = self.imm();
            code(vec![op(
                Kind::Alu {
                    op: op_,
                    wide,
                    reg: false,
                },
                dst,
                0,
                0,
                imm,
            )])
        }
    }

    /// An LD_ABS or LD_IND of the packet (mostly in bounds, sometimes just past its end).
    fn packet_load_item(&mut self, src: u8) -> Item {
        let w = self.width();
        // rbpf checks 8 bytes from the address whatever the width.
        let imm = if self.mem_len >= 8 && self.rng.chance(85) {
            self.rng.range(0, self.mem_len - 8)
        } else {
            self.mem_len - self.rng.range(-1, 10)
        } as i32;
        if self.rng.chance(50) {
            code(vec![op(Kind::LdAbs(w), 0, 0, 0, imm)])
        } else {
            let and = op(
                Kind::Alu {
                    op: AluOp::And,
                    wide: true,
                    reg: false,
                },
                src,
                0,
                0,
                15,
            );
            code(vec![and, op(Kind::LdInd(w), 0, src, 0, imm.max(0) / 2)])
        }
    }

    /// A conditional jump on `dst` against `src` or an immediate.
    fn jump_item(&mut self, dst: u8, src: u8) -> Item {
        let cond = self.rng.pick(&CONDS);
        let wide = self.rng.chance(50);
        if self.rng.chance(50) {
            Item::Jump(op(
                Kind::Jmp {
                    cond,
                    wide,
                    reg: true,
                },
                dst,
                src,
                0,
                0,
            ))
        } else {
            let imm = self.imm();
            Item::Jump(op(
                Kind::Jmp {
                    cond,
                    wide,
                    reg: false,
                },
                dst,
                0,
                0,
                imm,
            ))
        }
    }

    /// A loop moving r9 by a constant step towards the bound r8 (`jlt r9, r8, head`, or
    /// `jgt r8, r9`), every access at r9 plus an offset: the loops whose checks the compiler
    /// proves once at the entry (src/emit/loops.rs), mostly over the region r1 points to,
    /// else over the stack. Start, bound and offsets aim at the region's edges, so that a
    /// guard that proved too much would let an access through that rbpf faults on. A tenth
    /// of them the compiler does not guard.
    fn pointer_loop(&mut self, out: &mut Vec<Insn>) {
        let (base, lo, hi) = if self.r1_len > 0 && self.rng.chance(75) {
            (1, 0, self.r1_len)
        } else {
            (10, -512, 0)
        };
        let step = self.rng.pick(&[1, 1, 2, 3, 4, 8]);
        let add = |dst, imm| raw(0x07, dst, 0, 0, imm as i32);
        // Groups of instructions (an LD_DW is two), the `add` between two of them; and the
        // accesses' extent from r9 at the iteration's start (past the `add`, `step` more).
        let mut body: Vec<Vec<Insn>> = Vec::new();
        for _ in 0..self.rng.range(1, 3) {
            let w = self.width();
            let off = if self.rng.chance(70) {
                0
            } else {
                self.rng.range(-2, 2) as i16
            };
            let (dst, src) = (self.data(), self.data());
            body.push(vec![match self.rng.below(3) {
                0 => op(Kind::Ldx(w), dst, 9, off, 0),
                1 => op(Kind::Stx(w), 9, src, off, 0),
                _ => op(Kind::St(w), 9, 0, off, self.imm()),
            }]);
        }
        for _ in 0..self.rng.below(3) {
            let (dst, src) = (self.data(), self.data());
            if let Item::Code(v) = self.alu_item(dst, src) {
                body.push(v);
            }
        }
        if self.rng.chance(10) {
            // What the compiler does not guard: a jump (to the next instruction) or a
            // second `add`. (No random item: one that sets r9 from the stack would compare
            // addresses of two regions, which differ between the engines.)
            let (dst, src) = (self.data(), self.data());
            body.push(vec![match self.jump_item(dst, src) {
                Item::Jump(j) if self.rng.chance(50) => j,
                _ => add(9, step),
            }]);
        }
        let at = self.rng.range(0, body.len() as i64) as usize;
        body.insert(at, vec![add(9, step)]);
        let (mut first, mut last) = (i64::MAX, i64::MIN);
        for (k, group) in body.iter().enumerate() {
            for i in group
                .iter()
                .filter(|i| matches!(i.opc & 7, 1..=3) && i.opc != 0x18)
            {
                let from = i64::from(i.off) + if k > at { step } else { 0 };
                // The size field: W, H, B, DW.
                let width = [4, 2, 1, 8][usize::from(i.opc >> 3 & 3)];
                first = first.min(from);
                last = last.max(from + width);
            }
        }
        // The start and bound that keep every access inside, with its first access at the
        // region's start and its last ending at its end; mostly those, else one byte
        // outside, inside, or anywhere.
        let (inside_start, inside_bound) = (lo - first, hi - last + 1);
        let start = match self.rng.below(20) {
            0..=9 => inside_start,
            10..=12 => inside_start - 1,
            13..=15 => inside_start + step * self.rng.range(1, 4),
            _ => self.rng.range(lo, hi),
        };
        let bound = match self.rng.below(20) {
            0..=9 => inside_bound,
            10..=12 => inside_bound + 1,
            13..=15 => inside_bound - self.rng.range(1, 8),
            _ => start + step * self.rng.range(0, 4),
        };
        out.extend([raw(0xbf, 9, base, 0, 0), add(9, start)]);
        out.extend([raw(0xbf, 8, base, 0, 0), add(8, bound)]);
        let head = out.len();
        out.extend(body.into_iter().flatten());
        let off = (head as i64 - (out.len() as i64 + 1)) as i16;
        out.push(if self.rng.chance(80) {
            raw(0xad, 9, 8, off, 0)
        } else {
            raw(0x2d, 8, 9, off, 0)
        });
    }

    /// A loop `head: jge r8, N, out; ... ja head` whose accesses are at `r9 = base + r8`
    /// plus an offset, base r1 (mostly) or r10: the other loops the compiler guards once at
    /// the entry (src/emit/loops.rs). N and the offsets aim at the region's edges; r8 starts
    /// below N and moves up by a step (before the address, in a tenth of them, which the
    /// compiler then does not guard).
    fn index_loop(&mut self, out: &mut Vec<Insn>) {
        let (base, lo, hi) = if self.r1_len > 0 && self.rng.chance(75) {
            (1, 0, self.r1_len)
        } else {
            (10, -512, 0)
        };
        let step = self.rng.pick(&[1, 1, 2, 3]);
        let add = |dst, imm| raw(0x07, dst, 0, 0, imm);
        let (accesses, n) = self.edge_accesses(lo, hi, &DATA);
        let early = self.rng.chance(10);
        out.push(raw(0xb7, 8, 0, 0, self.rng.range(0, 3) as i32));
        let head = out.len();
        let mut body = Vec::new();
        if early {
            body.push(add(8, step));
        }
        body.extend([raw(0xbf, 9, base, 0, 0), raw(0x0f, 9, 8, 0, 0)]);
        body.extend(accesses);
        for _ in 0..self.rng.below(3) {
            let (dst, src) = (self.data(), self.data());
            if let Item::Code(v) = self.alu_item(dst, src) {
                body.extend(v);
            }
        }
        if !early {
            body.push(add(8, step));
        }
        out.push(raw(0x35, 8, 0, body.len() as i16 + 1, n as i32));
        out.extend(body);
        out.push(raw(
            0x05,
            0,
            0,
            (head as i64 - (out.len() as i64 + 1)) as i16,
            0,
        ));
    }

    /// One to three accesses at r9 plus offsets around `lo` (loads into `data`), and the N
    /// whose last index's accesses end at the region's end `hi`: mostly it, else one more
    /// (one byte or more past it) or fewer.
    fn edge_accesses(&mut self, lo: i64, hi: i64, data: &[u8]) -> (Vec<Insn>, i64) {
        let mut accesses = Vec::new();
        let mut end = i64::MIN;
        for _ in 0..self.rng.range(1, 3) {
            let w = self.width();
            let off = lo + self.rng.range(-1, 2);
            end = end.max(off + w.bytes() as i64);
            let (dst, src) = (self.rng.pick(data), self.rng.pick(data));
            let off = off as i16;
            accesses.push(match self.rng.below(3) {
                0 => op(Kind::Ldx(w), dst, 9, off, 0),
                1 => op(Kind::Stx(w), 9, src, off, 0),
                _ => op(Kind::St(w), 9, 0, off, self.imm()),
            });
        }
        let inside = hi - end + 1;
        let n = match self.rng.below(20) {
            0..=11 => inside,
            12..=15 => inside + 1,
            _ => inside - self.rng.range(1, 8),
        };
        (accesses, n.max(0))
    }

    /// A nest like the sieve's outer loop (src/emit/loops.rs): `head: r9 = base + r8;
    /// accesses; jcc data, imm, next (JNE and others); r7 = r8; inner: jge r7, N', next; r9 = base + r7;
    /// accesses; add r7, step'; ja inner; next: add r8, step; jlt r8, N, head`, N and N'
    /// at the region's edges (N below N' in a third of them); r8 starts below N or (a fifth of them) at or past it, where
    /// the first iteration's accesses must fault as written. The loads keep off r7.
    fn nest(&mut self, out: &mut Vec<Insn>) {
        let (base, lo, hi) = if self.r1_len > 0 && self.rng.chance(75) {
            (1, 0, self.r1_len)
        } else {
            (10, -512, 0)
        };
        const NOT_R7: [u8; 6] = [0, 2, 3, 4, 5, 6];
        let (outer, mut n) = self.edge_accesses(lo, hi, &NOT_R7);
        let (inner, n_inner) = self.edge_accesses(lo, hi, &NOT_R7);
        if self.rng.chance(30) {
            // An outer bound below the inner one: a guard must take the larger.
            n = (n_inner - self.rng.range(2, 8)).max(0);
        }
        let start = match self.rng.below(10) {
            // (Over the stack, from near the top: the inner loop runs from r8 to N'.)
            0..=5 if base == 1 => self.rng.range(0, 2),
            0..=7 => (n - self.rng.range(1, 4)).max(0),
            _ => n + self.rng.pick(&[0, 1, 5]),
        };
        let address = |index| [raw(0xbf, 9, base, 0, 0), raw(0x0f, 9, index, 0, 0)];
        out.push(raw(0xb7, 8, 0, 0, start as i32));
        let head = out.len();
        out.extend(address(8));
        out.extend(outer);
        let skip = out.len();
        // (JNE as the sieve's; others the compiler inverts in the copy, JSET it cannot.)
        const SKIPS: [u8; 7] = [0x55, 0x55, 0x15, 0x25, 0xb5, 0x56, 0x45];
        out.push(raw(
            self.rng.pick(&SKIPS),
            self.rng.pick(&NOT_R7),
            0,
            0,
            self.rng.range(0, 3) as i32,
        ));
        out.push(raw(0xbf, 7, 8, 0, 0));
        let inner_head = out.len();
        out.push(raw(0x35, 7, 0, 0, n_inner as i32));
        out.extend(address(7));
        out.extend(inner);
        out.push(raw(0x07, 7, 0, 0, self.rng.pick(&[1, 1, 2])));
        out.push(raw(
            0x05,
            0,
            0,
            (inner_head as i64 - out.len() as i64 - 1) as i16,
            0,
        ));
        let next = out.len() as i64;
        out[skip].off = (next - skip as i64 - 1) as i16;
        out[inner_head].off = (next - inner_head as i64 - 1) as i16;
        out.push(raw(0x07, 8, 0, 0, self.rng.pick(&[1, 1, 2])));
        out.push(raw(
            0xa5,
            8,
            0,
            (head as i64 - out.len() as i64 - 1) as i16,
            n as i32,
        ));
    }

    fn straight(&mut self, fun: Option<usize>, max: u64) -> Vec<Item> {
        let n = 1 + self.rng.below(max);
        (0..n).map(|_| self.item(fun)).collect()
    }
}

/// Lays out a segment's items at the end of `out`, resolving jumps to item starts or the
/// segment's end (the instruction after it). Returns (instruction, function) of its calls.
fn lay_out(items: Vec<Item>, out: &mut Vec<Insn>, rng: &mut Rng) -> Vec<(usize, usize)> {
    let base = out.len();
    let mut starts = Vec::with_capacity(items.len() + 1);
    let mut at = base;
    for item in &items {
        starts.push(at);
        at += match item {
            Item::Code(v) => v.len(),
            _ => 1,
        };
    }
    starts.push(at);
    let mut calls = Vec::new();
    for (k, item) in items.into_iter().enumerate() {
        match item {
            Item::Code(v) => out.extend(v),
            Item::Jump(mut j) => {
                let target = rng.range(k as i64 + 1, starts.len() as i64 - 1) as usize;
                j.off = (starts[target] - (starts[k] + 1)) as i16;
                out.push(j);
            }
            Item::CallFn(f) => {
                calls.push((out.len(), f));
                out.push(op(Kind::Call, 0, 1, 0, 0));
            }
        }
    }
    calls
}

/// One random program, its memory and its mbuff (`None`: run as `EbpfVmRaw`).
fn program(seed: u64) -> (Vec<u8>, Vec<u8>, Option<Vec<u8>>) {
    let mut rng = Rng(seed);
    let mem_len = rng.pick(&[0usize, 1, 7, 8, 16, 33, 64]);
    let mem: Vec<u8> = (0..mem_len).map(|_| rng.next() as u8).collect();
    let mbuff = rng.chance(25).then(|| {
        let n = rng.pick(&[0usize, 8, 12, 24]);
        (0..n).map(|_| rng.next() as u8).collect::<Vec<u8>>()
    });
    let r1_len = match &mbuff {
        Some(m) if !m.is_empty() => m.len(),
        _ => mem_len,
    } as i64;
    let functions = rng.below(3) as usize;
    let mut g = Gen {
        rng,
        r1_len,
        mem_len: mem_len as i64,
        functions,
    };
    let mut out: Vec<Insn> = Vec::new();
    let mut calls = Vec::new();
    let mut lay = |items: Vec<Item>, out: &mut Vec<Insn>, g: &mut Gen| {
        calls.extend(lay_out(items, out, &mut g.rng));
    };
    // main: r9 is an address from the start.
    let r9 = g.set_r9();
    lay(vec![r9], &mut out, &mut g);
    let segments = 1 + g.rng.below(6);
    for _ in 0..segments {
        if g.rng.chance(35) {
            let k = g.rng.range(1, 12) as i32;
            out.push(op(
                Kind::Alu {
                    op: AluOp::Mov,
                    wide: true,
                    reg: false,
                },
                8,
                0,
                0,
                k,
            ));
            let body_start = out.len();
            let body = g.straight(None, 8);
            lay(body, &mut out, &mut g);
            out.push(op(
                Kind::Alu {
                    op: AluOp::Sub,
                    wide: true,
                    reg: false,
                },
                8,
                0,
                0,
                1,
            ));
            let (cond, wide) = g.rng.pick(&[
                (Cond::Ne, true),
                (Cond::Sgt, true),
                (Cond::Gt, true),
                (Cond::Ne, false),
            ]);
            let off = body_start as i64 - (out.len() as i64 + 1);
            out.push(op(
                Kind::Jmp {
                    cond,
                    wide,
                    reg: false,
                },
                8,
                0,
                off as i16,
                0,
            ));
        } else if g.rng.chance(15) {
            g.pointer_loop(&mut out);
        } else if g.rng.chance(12) {
            g.index_loop(&mut out);
        } else if g.rng.chance(5) {
            g.nest(&mut out);
        } else {
            let items = g.straight(None, 12);
            lay(items, &mut out, &mut g);
        }
    }
    out.push(op(Kind::Exit, 0, 0, 0, 0));
    // functions
    let mut starts = Vec::new();
    for f in 0..functions {
        starts.push(out.len());
        let items = g.straight(Some(f), 8);
        lay(items, &mut out, &mut g);
        out.push(op(Kind::Exit, 0, 0, 0, 0));
    }
    for (at, f) in calls {
        out[at].imm = (starts[f] as i64 - (at as i64 + 1)) as i32;
    }
    let prog = out.iter().flat_map(|i| i.encode()).collect();
    (prog, mem, mbuff)
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn generated_programs_agree_with_rbpf() {
    let under_qemu = std::env::var_os("CPJIT_EXAMPLE_QEMU").is_some();
    let count = env("EBPF_JIT_PROGRAMS", if under_qemu { 2_000 } else { 10_000 });
    let seed = env("EBPF_JIT_SEED", 0x0eb9_f00d);
    let mut ok = 0u64;
    let (mut insns, mut loops, mut local_calls, mut helper_calls, mut with_mbuff) = (0, 0, 0, 0, 0);
    // Programs with a pointer or index loop or a nest (`Gen::pointer_loop`, `Gen::index_loop`,
    // `Gen::nest`): how
    // many returned, how many faulted.
    let (mut pointer_ok, mut pointer_faults) = (0u64, 0u64);
    let mut kinds = std::collections::BTreeMap::new();
    for i in 0..count {
        let (prog, mem, mbuff) = program(seed.wrapping_add(i.wrapping_mul(0x9e37_79b9)));
        assert!(
            ebpf_jit::verify(&prog).is_ok(),
            "generated a refused program:\n{}",
            disasm(&prog)
        );
        let o = check(&prog, &mem, mbuff.as_deref());
        insns += prog.len() as u64 / 8;
        let has = |f: &dyn Fn(ebpf_jit::Insn) -> bool| {
            (0..prog.len() / 8).any(|k| f(ebpf_jit::insn(&prog, k)))
        };
        loops += u64::from(has(&|i| i.opc & 0x07 != 0x07 && i.dst == 8 && i.off < 0));
        local_calls += u64::from(has(&|i| i.opc == 0x85 && i.src == 1));
        helper_calls += u64::from(has(&|i| i.opc == 0x85 && i.src == 0));
        with_mbuff += u64::from(mbuff.is_some());
        if has(&|i| matches!(i.opc, 0xad | 0x2d | 0x05 | 0xa5) && i.off < 0) {
            match o.result {
                Ok(_) => pointer_ok += 1,
                Err(_) => pointer_faults += 1,
            }
        }
        match o.result {
            Ok(_) => ok += 1,
            Err((kind, _)) => *kinds.entry(format!("{kind:?}")).or_insert(0u64) += 1,
        }
    }
    println!(
        "{count} generated programs (seed {seed:#x}, {insns} instructions; {loops} with loops, \
         {local_calls} with local calls, {helper_calls} with helper calls, {with_mbuff} with an \
         mbuff; pointer and index loops and nests: {pointer_ok} returned, {pointer_faults} stopped): {ok} \
         returned r0, \
         errors {kinds:?}"
    );
    // The mix stays meaningful: most programs run to their end, and faults happen.
    assert!(ok * 2 >= count, "only {ok} of {count} returned");
    if count >= 1000 {
        assert!(kinds.get("OutOfBoundsLoad").is_some_and(|&n| n > 0));
        assert!(kinds.get("OutOfBoundsStore").is_some_and(|&n| n > 0));
        assert!(kinds.get("UnknownHelper").is_some_and(|&n| n > 0));
        assert!(!kinds.contains_key(&format!("{:?}", ErrorKind::Verifier)));
        assert!(pointer_ok * 10 >= count / 20 && pointer_faults * 10 >= count / 20);
    }
}
