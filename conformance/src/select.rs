//! Which stencil sets this process runs: those the one host rule
//! ([`Host::runs_set`]: same architecture and calling convention, and every register the
//! OS reserves left alone) lets it run, narrowed by `CPJIT_STENCILS=<triple>` (how a matrix
//! row picks its set). `CPJIT_BREAK=<triple>` replaces that set by a deliberately corrupted
//! copy, to prove that its row fails.

use cpjit_model::{Hole, HoleValue, Host, Stencil, StencilSet};

/// Environment variable naming the one stencil set to run.
pub const SELECT_VAR: &str = "CPJIT_STENCILS";
/// Environment variable naming a set to corrupt before running it.
pub const BREAK_VAR: &str = "CPJIT_BREAK";

/// Can this process execute `set`'s machine code?
pub fn compatible(set: &StencilSet<'_>) -> bool {
    Host::current().is_some_and(|h| h.runs_set(set))
}

/// The sets to run out of `all`, per [`SELECT_VAR`] and [`BREAK_VAR`] from the environment.
///
/// # Panics
/// When nothing is selected: a run that tests no stencils must fail, not pass.
pub fn selected(all: &[&'static StencilSet<'static>]) -> Vec<&'static StencilSet<'static>> {
    let only = std::env::var(SELECT_VAR).ok().filter(|v| !v.is_empty());
    let broken = std::env::var(BREAK_VAR).ok().filter(|v| !v.is_empty());
    match select(all, only.as_deref(), broken.as_deref()) {
        Ok(sets) => sets,
        Err(e) => panic!("{e}"),
    }
}

/// [`selected`] with explicit values, for testing.
pub fn select(
    all: &[&'static StencilSet<'static>],
    only: Option<&str>,
    broken: Option<&str>,
) -> Result<Vec<&'static StencilSet<'static>>, String> {
    let compatible_sets: Vec<_> = all.iter().copied().filter(|s| compatible(s)).collect();
    let names =
        |sets: &[&StencilSet<'_>]| sets.iter().map(|s| s.target).collect::<Vec<_>>().join(", ");
    let mut sets = compatible_sets.clone();
    if let Some(only) = only {
        if !all.iter().any(|s| s.target == only) {
            return Err(format!(
                "{SELECT_VAR}={only}: no such stencil set (known: {})",
                names(all)
            ));
        }
        sets.retain(|s| s.target == only);
        if sets.is_empty() {
            return Err(format!(
                "{SELECT_VAR}={only}: this {} {} process cannot run that set (compatible: {})",
                std::env::consts::ARCH,
                std::env::consts::OS,
                names(&compatible_sets)
            ));
        }
    }
    if sets.is_empty() {
        return Err(format!(
            "no stencil set is compatible with this {} {} process: nothing would be tested",
            std::env::consts::ARCH,
            std::env::consts::OS
        ));
    }
    if let Some(broken) = broken {
        for s in sets.iter_mut().filter(|s| s.target == broken) {
            *s = corrupted(s)?;
            eprintln!("conformance: {BREAK_VAR}={broken}: running a corrupted copy of the set");
        }
    }
    Ok(sets)
}

/// A copy of `set` whose `op_test_push2` fills its `OPERAND0` holes with `OPERAND1` (every
/// hole, so that a page/offset pair stays consistent): the trace then pushes `b, b` instead
/// of `a, b`. Leaked: a test process makes at most a few.
pub fn corrupted(set: &StencilSet<'static>) -> Result<&'static StencilSet<'static>, String> {
    let name = "op_test_push2";
    let index = set
        .index_of(name)
        .ok_or_else(|| format!("{}: no `{name}` to corrupt", set.target))?;
    let original = &set.stencils[index];
    let (Some(a), Some(b)) = (
        original.operand_index("OPERAND0"),
        original.operand_index("OPERAND1"),
    ) else {
        return Err(format!(
            "{}: `{name}` lacks OPERAND0 or OPERAND1",
            set.target
        ));
    };
    let mut changed = 0;
    let holes: Vec<Hole> = original
        .holes
        .iter()
        .map(|h| match h.value {
            HoleValue::Operand(i) if i as usize == a => {
                changed += 1;
                Hole {
                    value: HoleValue::Operand(b as u16),
                    ..*h
                }
            }
            _ => *h,
        })
        .collect();
    if changed == 0 {
        return Err(format!("{}: `{name}` has no OPERAND0 hole", set.target));
    }
    let mut stencils: Vec<Stencil<'static>> = set.stencils.to_vec();
    stencils[index] = Stencil {
        holes: Box::leak(holes.into_boxed_slice()),
        ..*original
    };
    Ok(Box::leak(Box::new(StencilSet {
        stencils: Box::leak(stencils.into_boxed_slice()),
        ..*set
    })))
}
