//! The format of generated stencil crates: which one this `cpjit-model` reads.
//!
//! A generated crate is Rust source written against the model's types, so a crate generated
//! by an older (or newer) toolchain meets this model at compile time, where rustc would
//! answer with a hundred errors about fields and none about the cause. So every generated
//! crate's first item names [`regenerate_with_cpjit_build_stencils`]`::FORMAT_<n>` for the
//! format it was written in: with another model, that line fails first, and its path says
//! what to do. A crate that still compiles (the types kept their shape, their meaning did
//! not) carries the number in [`crate::StencilSet::format_version`], and `Jit::new`
//! refuses a set of another format with the same advice.

/// The format of generated crates this model reads. Raised whenever a crate written in the
/// previous format would not compile against the model or would mean something else.
pub const VERSION: u32 = 3;

/// Named by the first item of every generated crate. If that line does not compile, the
/// crate was generated for another `cpjit-model`: regenerate it with `cpjit build-stencils`
/// (in the kit, `cargo xtask build-stencils`).
pub mod regenerate_with_cpjit_build_stencils {
    /// Format 3 (format 2 wrote the family tables' stencil indices as arrays, not
    /// [`crate::StencilIndices`] over byte strings; format 1 had no `StencilSet::pruned` and
    /// no cold parts: `Stencil::cold_len`, `HoleValue::Cold`). When [`super::VERSION`] is raised, this item is renamed with it
    /// (the test below fails until it is), so that crates of the old format stop compiling
    /// here.
    pub const FORMAT_3: u32 = 3;
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_item_generated_crates_name_is_the_current_format() {
        assert_eq!(
            super::regenerate_with_cpjit_build_stencils::FORMAT_3,
            super::VERSION
        );
    }
}
