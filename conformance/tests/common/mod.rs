//! What the conformance test binaries share: every generated stencil set.

use cpjit_model::StencilSet;

/// Every generated set (the facade lists them): each test binary runs the ones its own
/// process can run.
pub fn all_sets() -> Vec<&'static StencilSet<'static>> {
    cpjit_stencils::all().to_vec()
}

/// Runs `check` on every set this process can execute and fails naming every set that
/// failed (all of them, not only the first); `what` names the checks in each set's count.
pub fn check_every_executable_set(
    what: &str,
    check: impl Fn(&'static StencilSet<'static>) -> Result<usize, String>,
) {
    let sets = cpjit_conformance::select::selected(&all_sets());
    assert!(!sets.is_empty(), "no stencil set this process can execute");
    let mut failures = Vec::new();
    for set in sets {
        match check(set) {
            Ok(n) => eprintln!("{}: {n} {what} checks passed", set.target),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
