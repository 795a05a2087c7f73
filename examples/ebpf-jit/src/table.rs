//! The tables the compiler reads per instruction, built once per [`Compiler`] from the
//! set's stencil names (templates/manifest.toml): per stencil where each of its operands
//! comes from and whether it jumps; per opcode what the compiler does with it and its
//! member for every place of its registers. With them, compiling an instruction is a few
//! table reads and one `push`: no names, no decoding into enums.
//!
//! [`Compiler`]: crate::Compiler

use crate::canon;
use crate::emit::{unchecked_index, value_at, value_index, UNCHECKED, VALUES};
use crate::insn::{decode, AluOp, Cond, Kind, Width};
use crate::shape::SHAPES;
pub(crate) use crate::shape::{Action, DRole, Regs, Role, SRole};
use crate::Error;
use cpjit_runtime::model::StencilSet;
use std::collections::HashMap;

/// How many eBPF registers live in machine registers (templates/include/ops.h: slots 0..4;
/// place 5 is the frame).
pub const PINS: usize = 5;
/// The place of a register that lives in the frame.
pub(crate) const FRAME: usize = PINS;
/// Places: the pinned slots and the frame.
pub(crate) const PLACES: usize = PINS + 1;
/// No stencil.
pub(crate) const NONE: u16 = u16::MAX;

/// One opcode's row.
#[derive(Clone, Copy)]
pub(crate) struct Row {
    pub action: Action,
    /// The member's D and S registers.
    pub d: DRole,
    pub s: SRole,
    /// Both, as the compiler reads them.
    pub regs: Regs,
    /// `[place of D][place of S]` → stencil, [`NONE`] where no member (or by another table);
    /// 8 × 8, so that an index masked with 7 needs no bounds check (places 6, 7 are none).
    /// An op with an immediate and no S register may also have, at S = [`SMALL_IMM`], the
    /// member for an immediate in `0..2^31` (family `ri`).
    pub members: [[Member; 8]; 8],
    /// Whether it has those members.
    pub small_imm: bool,
    /// What `canon::rewrite` may rewrite (`canon::flags`): the set has no member for it.
    pub canon: u8,
}

impl Row {
    const UNKNOWN: Row = Row {
        action: Action::Invalid,
        d: DRole::NONE,
        s: SRole::NONE,
        regs: Regs::of_roles(DRole::NONE, SRole::NONE),
        members: [[Member::NONE; 8]; 8],
        small_imm: false,
        canon: 0,
    };
}

/// A member as the compiler pushes it: its stencil and what it reads of the stencil's
/// [`Operands`] (so that a push reads one word of the row for all of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    pub stencil: u16,
    /// The operands' count, and [`Member::JUMPS`] if the stencil has its jump target.
    pub len: u8,
    /// `Operands::window`.
    pub window: u8,
}

impl Member {
    const NONE: Member = Member::of(NONE);
    /// The bit of [`Member::len`] that says the stencil has its jump target.
    pub const JUMPS: u8 = 0x80;

    /// Stencil `stencil`, its operands not yet known (`Table::new` fills them in).
    const fn of(stencil: u16) -> Member {
        Member {
            stencil,
            len: 0,
            window: NO_WINDOW,
        }
    }

    /// [`Member::len`] of a member whose operands are not consecutive values (no
    /// `Operands::window`): pushed with its operands picked one by one.
    pub const PICKED: u8 = 0x7f;

    /// Stencil `stencil` with `ops`: `len` is [`Member::PICKED`] unless the operands are a
    /// window, so that a push by window needs no test of it (a window's values end at
    /// `VALUES` at the latest).
    pub fn with(stencil: u16, ops: &Operands) -> Member {
        let len = if ops.window == NO_WINDOW {
            Member::PICKED
        } else {
            ops.len
        };
        Member {
            stencil,
            len: len | if ops.jumps { Member::JUMPS } else { 0 },
            window: ops.window,
        }
    }
}

/// The S place of a member for a non-negative immediate (family `ri`, whose ops have no S
/// register: their general members are at S = [`FRAME`]).
pub(crate) const SMALL_IMM: usize = 0;

/// The most operands a stencil of the set may have (13: [`Operands`] takes 16 bytes).
pub(crate) const MAX_OPERANDS: usize = 13;

/// A stencil's operands, as indices into an instruction's values (`emit::Values`).
#[derive(Clone, Copy)]
pub(crate) struct Operands {
    pub at: [u8; MAX_OPERANDS],
    pub len: u8,
    /// Where they are consecutive values, the first's index, else [`NO_WINDOW`].
    pub window: u8,
    /// Whether it has its jump target (a compare of a register with itself folds to always
    /// or never).
    pub jumps: bool,
}

/// Everything the compiler looks up.
pub(crate) struct Table {
    pub rows: Box<[Row; 256]>,
    pub operands: Vec<Operands>,
    /// `[BE][width 16, 32, 64][place of dst]`; LE64 is `nop`.
    pub end: [[[u16; PLACES]; 3]; 2],
    /// `[place of r0][place of r1]`.
    pub call_helper: [[u16; PLACES]; PLACES],
    /// `[ARGS]` the same storing and loading nothing (family `call`, see
    /// `emit::Emit::lean_call`).
    pub call_lean: [[[u16; PLACES]; PLACES]; LEAN_ARGS],
    /// EXIT without local calls, by the place of r0.
    pub ret: [u16; PLACES],
    /// A guarded loop's guard by the places of its pointer and bound (`emit/loops.rs`).
    pub loop_guard: [[u16; PLACES]; PLACES],
    /// An index loop's guard by the place of its base.
    pub index_guard: [u16; PLACES],
    /// The unchecked LDX, ST and STX (`<op>_u`) by `loops::unchecked_index` and the places
    /// of D and S (as `Row::members`), for the copies of guarded loops.
    pub unchecked: [[[Member; 8]; 8]; UNCHECKED],
    pub ja: u16,
    pub nop: u16,
    pub exit: u16,
    pub call_local: u16,
    pub unknown_helper: u16,
    pub ret_case: u16,
    pub fell_off: u16,
    pub invalid: u16,
}

fn alu_name(op: AluOp) -> &'static str {
    match op {
        AluOp::Add => "add",
        AluOp::Sub => "sub",
        AluOp::Mul => "mul",
        AluOp::Div => "div",
        AluOp::Or => "or",
        AluOp::And => "and",
        AluOp::Lsh => "lsh",
        AluOp::Rsh => "rsh",
        AluOp::Neg => "neg",
        AluOp::Mod => "mod",
        AluOp::Xor => "xor",
        AluOp::Mov => "mov",
        AluOp::Arsh => "arsh",
    }
}

fn cond_name(c: Cond) -> &'static str {
    match c {
        Cond::Eq => "jeq",
        Cond::Gt => "jgt",
        Cond::Ge => "jge",
        Cond::Set => "jset",
        Cond::Ne => "jne",
        Cond::Sgt => "jsgt",
        Cond::Sge => "jsge",
        Cond::Lt => "jlt",
        Cond::Le => "jle",
        Cond::Slt => "jslt",
        Cond::Sle => "jsle",
    }
}

fn width_name(w: Width) -> &'static str {
    match w {
        Width::B => "b",
        Width::H => "h",
        Width::W => "w",
        Width::Dw => "dw",
    }
}

/// The element of the family an opcode's members are named by (`op_<element>_3_<D>[_<S>]`),
/// if it has any (the others have tables of their own).
fn element_of(kind: Kind) -> Option<String> {
    let bits = |wide: bool| if wide { 64 } else { 32 };
    let src = |r: bool| if r { "reg" } else { "imm" };
    Some(match kind {
        Kind::Alu {
            op: AluOp::Neg,
            wide,
            ..
        } => format!("neg{}", bits(wide)),
        Kind::Alu { op, wide, reg } => format!("{}{}_{}", alu_name(op), bits(wide), src(reg)),
        Kind::Jmp { cond, wide, reg } => {
            let width = if wide { "" } else { "32" };
            format!("{}{width}_{}", cond_name(cond), src(reg))
        }
        Kind::LdDw => "lddw".into(),
        Kind::LdAbs(w) => format!("ldabs{}", width_name(w)),
        Kind::LdInd(w) => format!("ldind{}", width_name(w)),
        Kind::Ldx(w) => format!("ldx{}", width_name(w)),
        Kind::St(w) => format!("st{}", width_name(w)),
        Kind::Stx(w) => format!("stx{}", width_name(w)),
        Kind::End { .. } | Kind::Ja | Kind::Call | Kind::Exit | Kind::Xadd | Kind::TailCall => {
            return None
        }
    })
}

/// The places of family `x`'s members (one for every place of the registers).
const ANY: usize = PLACES;
/// What [`member`] gives as S for a member of family `ri`.
const RI: usize = PLACES + 1;

/// A family member's name split into its element and places: `op_<element>_3_<D>` (family
/// `r`; S is `FRAME`), `op_<element>_3_<D>_<S>` (family `rr`) or `op_<element>_3_x`
/// (family `x`: D and S are `ANY`) or `op_<element>_3_<D>_i1` (family `ri`: S is `RI`).
fn member(name: &str) -> Option<(&str, usize, usize)> {
    let place = |t: &str| t.parse::<usize>().ok().filter(|&p| p < PLACES);
    let rest = name.strip_prefix("op_")?;
    if let Some(elem) = rest.strip_suffix("_3_x") {
        return Some((elem, ANY, ANY));
    }
    if let Some(rest) = rest.strip_suffix("_i1") {
        let (elem, d) = rest.rsplit_once('_')?;
        return Some((elem.strip_suffix("_3")?, place(d)?, RI));
    }
    let mut parts = rest.rsplitn(4, '_');
    let (last, second, third, elem) = (parts.next()?, parts.next()?, parts.next(), parts.next());
    match (third, elem) {
        (Some("3"), Some(elem)) => Some((elem, place(second)?, place(last)?)),
        _ if second == "3" => {
            let elem = rest.strip_suffix(last)?.strip_suffix("_3_")?;
            Some((elem, place(last)?, FRAME))
        }
        _ => None,
    }
}

/// How many lean helper-call members per place of r0 and r1 (family `call`'s ARGS).
pub(crate) const LEAN_ARGS: usize = 4;

/// A member of family `call`, `op_call_helper_3_<D>_<S>_args<ARGS>`: ARGS and the member.
fn lean_member(name: &str) -> Option<(usize, (&str, usize, usize))> {
    let (rest, args) = name.rsplit_once("_args")?;
    let args = args.parse::<usize>().ok().filter(|&a| a < LEAN_ARGS)?;
    Some((args, member(rest)?))
}

fn missing(name: impl Into<String>) -> Error {
    Error::Jit(cpjit_runtime::Error::UnknownStencilName { name: name.into() })
}

impl Table {
    /// The tables of `set`; an error names a stencil the compiler needs that the set lacks,
    /// or an operand it does not know.
    pub fn new(set: &StencilSet<'_>) -> Result<Table, Error> {
        let mut t = Table::singles(set)?;
        // Which opcodes each element's members serve.
        let mut by_element: HashMap<String, Vec<u8>> = HashMap::new();
        for opc in 0..=255u8 {
            let shape = SHAPES[usize::from(opc)];
            t.rows[usize::from(opc)] = Row {
                action: shape.action,
                d: shape.d,
                s: shape.s,
                regs: shape.regs,
                canon: canon::flags(opc),
                ..Row::UNKNOWN
            };
            if let Some(e) = decode(opc).and_then(element_of) {
                by_element.entry(e).or_default().push(opc);
            }
        }
        t.rows[0x05].members = [[Member::of(t.ja); 8]; 8];
        t.operands.reserve_exact(set.stencils.len());
        for (i, s) in set.stencils.iter().enumerate() {
            t.operands
                .push(operands(s.name, s.operands, !s.targets.is_empty())?);
            if let Some((args, (_, d, p))) = lean_member(s.name) {
                t.call_lean[args][d][p] = i as u16;
                continue;
            }
            let Some((elem, d, p)) = member(s.name) else {
                continue;
            };
            let i = i as u16;
            match elem {
                "le16" | "le32" | "be16" | "be32" | "be64" => {
                    let w = match &elem[2..] {
                        "16" => 0,
                        "32" => 1,
                        _ => 2,
                    };
                    t.end[usize::from(elem.starts_with("be"))][w][d] = i;
                }
                "call_helper" => t.call_helper[d][p] = i,
                "ret" => t.ret[d] = i,
                "loop_guard" => t.loop_guard[d][p] = i,
                "index_guard" => t.index_guard[d] = i,
                _ if elem.ends_with("_u") => {
                    let checked = &elem[..elem.len() - 2];
                    for &opc in by_element.get(checked).map_or(&[][..], Vec::as_slice) {
                        t.unchecked[unchecked_index(opc)][d][p] = Member::of(i);
                    }
                }
                _ => {
                    for &opc in by_element.get(elem).map_or(&[][..], Vec::as_slice) {
                        let row = &mut t.rows[usize::from(opc)];
                        if d == ANY {
                            row.members = [[Member::of(i); 8]; 8];
                        } else if p == RI && row.s == SRole::NONE {
                            row.members[d][SMALL_IMM] = Member::of(i);
                            row.small_imm = true;
                        } else if p < PLACES {
                            row.members[d][p] = Member::of(i);
                        }
                    }
                }
            }
        }
        t.end[0][2] = [t.nop; PLACES];
        // EXIT's member where the program has no local calls, by the place of r0, pushed
        // as a plain instruction's (`Emit::instruction`).
        for (d, members) in t.rows[0x95].members.iter_mut().enumerate().take(PLACES) {
            *members = [Member::of(t.ret[d]); 8];
        }
        // Each member with its operands' count and window, read with it.
        let unchecked = t.unchecked.as_flattened_mut().as_flattened_mut();
        for m in t
            .rows
            .iter_mut()
            .flat_map(|r| r.members.as_flattened_mut())
            .chain(unchecked)
        {
            {
                if let Some(ops) = t.operands.get(usize::from(m.stencil)) {
                    *m = Member::with(m.stencil, ops);
                }
            }
        }
        t.check()?;
        Ok(t)
    }

    /// The stencils outside the families (the family tables still empty).
    fn singles(set: &StencilSet<'_>) -> Result<Table, Error> {
        let get = |name: &str| {
            set.index_of(name)
                .map(|i| i as u16)
                .ok_or_else(|| missing(name))
        };
        Ok(Table {
            rows: Box::new([Row::UNKNOWN; 256]),
            operands: Vec::new(),
            end: [[[NONE; PLACES]; 3]; 2],
            call_helper: [[NONE; PLACES]; PLACES],
            call_lean: [[[NONE; PLACES]; PLACES]; LEAN_ARGS],
            ret: [NONE; PLACES],
            loop_guard: [[NONE; PLACES]; PLACES],
            index_guard: [NONE; PLACES],
            unchecked: [[[Member::NONE; 8]; 8]; UNCHECKED],
            ja: get("op_ja")?,
            nop: get("op_nop")?,
            exit: get("op_exit")?,
            call_local: get("op_call_local")?,
            unknown_helper: get("op_unknown_helper")?,
            ret_case: get("op_ret_case")?,
            fell_off: get("op_fell_off")?,
            invalid: get("op_invalid")?,
        })
    }

    /// Refuses a set without a member the compiler may push.
    fn check(&self) -> Result<(), Error> {
        for opc in 0..=255u8 {
            let row = &self.rows[usize::from(opc)];
            let (ds, ss) = (places(row.d), places(row.s));
            let needs = matches!(
                row.action,
                Action::Plain | Action::Jump | Action::Load | Action::Store | Action::LdDw
            );
            for d in ds.clone() {
                for s in ss.clone() {
                    if needs && canon::needed(row.canon, d, s) && row.members[d][s].stencil == NONE
                    {
                        return Err(missing(format!(
                            "the member of opcode {opc:#04x} for places {d}, {s}"
                        )));
                    }
                }
                if row.small_imm && row.members[d][SMALL_IMM].stencil == NONE {
                    return Err(missing(format!(
                        "the member of opcode {opc:#04x} for place {d} and an immediate \
                         in 0..2^31 (family ri)"
                    )));
                }
            }
        }
        for d in 0..PLACES {
            for s in 0..PLACES {
                let lean = (0..LEAN_ARGS).map(|a| (Some(a), self.call_lean[a][d][s]));
                for (args, member) in lean.chain([(None, self.call_helper[d][s])]) {
                    if canon::call_needed(args, d, s) && member == NONE {
                        return Err(missing(format!(
                            "the helper call for r0 in place {d}, r1 in place {s} and \
                             ARGS {args:?} (families rc and call)"
                        )));
                    }
                }
            }
        }
        let tables = [
            self.end.as_flattened().as_flattened(),
            &self.ret[..],
            self.loop_guard.as_flattened(),
            &self.index_guard[..],
        ];
        if tables.iter().any(|t| t.contains(&NONE)) {
            return Err(missing(
                "a member of le*/be*, ret, loop_guard or index_guard for \
                 some place",
            ));
        }
        // The unchecked accesses: every place of D and of S (an ST's S is the frame).
        for (k, by_place) in self.unchecked.iter().enumerate() {
            let ss = if k / 4 == 1 { FRAME..PLACES } else { 0..PLACES };
            for (d, by_s) in by_place.iter().enumerate().take(PLACES) {
                if ss.clone().any(|s| by_s[s].stencil == NONE) {
                    return Err(missing(format!(
                        "an unchecked access (`<op>_u`, {k}) for D in place {d}"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// The places a register of role `r` may have (the frame only if there is none).
fn places<const SHIFT: u32>(r: Role<SHIFT>) -> std::ops::Range<usize> {
    if r == Role::NONE {
        FRAME..PLACES
    } else {
        0..PLACES
    }
}

/// Stencil `name`'s operands as indices into an instruction's values.
fn operands(name: &str, names: &[&str], jumps: bool) -> Result<Operands, Error> {
    if names.len() > MAX_OPERANDS {
        return Err(missing(format!(
            "{name} (more than {MAX_OPERANDS} operands)"
        )));
    }
    let mut at = [0u8; MAX_OPERANDS];
    for (a, &o) in at.iter_mut().zip(names) {
        *a = value_index(o).ok_or_else(|| missing(format!("{name} (operand {o})")))?;
        debug_assert!(usize::from(*a) < VALUES);
    }
    let len = names.len();
    // The first run of values that are the operands in order (an empty list's is at 0).
    let window = (0..=VALUES - len)
        .find(|&k| (0..len).all(|j| value_at(k + j) == at[j]))
        .map_or(NO_WINDOW, |k| k as u8);
    Ok(Operands {
        at,
        len: len as u8,
        window,
        jumps,
    })
}

/// [`Operands::window`] of operands that are not consecutive values: past the end of them,
/// so that taking the window fails.
pub(crate) const NO_WINDOW: u8 = u8::MAX;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_names_split_into_element_and_places() {
        assert_eq!(member("op_add64_reg_3_2_0"), Some(("add64_reg", 2, 0)));
        assert_eq!(member("op_add64_imm_3_2"), Some(("add64_imm", 2, FRAME)));
        assert_eq!(member("op_le16_3_5"), Some(("le16", 5, FRAME)));
        assert_eq!(member("op_neg64_3_4"), Some(("neg64", 4, FRAME)));
        assert_eq!(member("op_ldxb_3_1_5"), Some(("ldxb", 1, 5)));
        assert_eq!(member("op_div64_reg_3_x"), Some(("div64_reg", ANY, ANY)));
        assert_eq!(member("op_ja"), None);
        assert_eq!(member("op_add64_imm_3_9"), None);
        assert_eq!(member("ebpf_entry"), None);
        assert_eq!(
            lean_member("op_call_helper_3_1_3_args2"),
            Some((2, ("call_helper", 1, 3)))
        );
        assert_eq!(lean_member("op_call_helper_3_1_3_args4"), None);
        assert_eq!(lean_member("op_call_helper_3_1_3"), None);
    }

    /// The set has every member the compiler may push (`Table::check`, which `Table::new`
    /// runs, fails otherwise) and none for places it rewrites away (`canon`): a member of
    /// an opcode's element whose places no opcode of that element needs is dead weight in
    /// every build of the set.
    #[test]
    fn the_host_set_has_exactly_the_members_the_compiler_may_push() {
        let set = crate::HOST_SET;
        Table::new(set).unwrap();
        let mut checked = 0;
        for s in set.stencils {
            if let Some((args, (_, d, p))) = lean_member(s.name) {
                assert!(
                    canon::call_needed(Some(args), d, p),
                    "{} is never pushed",
                    s.name
                );
                checked += 1;
            }
            let Some((elem, d, p)) = member(s.name) else {
                continue;
            };
            if elem == "call_helper" {
                assert!(canon::call_needed(None, d, p), "{} is never pushed", s.name);
            }
            let opcodes: Vec<u8> = (0..=255u8)
                .filter(|&opc| decode(opc).and_then(element_of).as_deref() == Some(elem))
                .collect();
            if opcodes.is_empty() || p >= PLACES {
                continue;
            }
            let needed = opcodes
                .iter()
                .any(|&opc| canon::needed(canon::flags(opc), d, p));
            assert!(needed, "{} is never pushed (src/canon.rs)", s.name);
            checked += 1;
        }
        assert!(checked > 1000, "{checked} members checked");
    }
}
