//! `cargo xtask test-matrix`: runs each target's suites with that target's stencils.

pub fn run(_args: &[String]) -> Result<(), String> {
    Err("test-matrix is not implemented yet".into())
}
