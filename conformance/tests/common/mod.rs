//! What the conformance test binaries share: every generated stencil set.

use cpjit_model::StencilSet;

/// Every generated set (the facade lists them): each test binary runs the ones its own
/// process can run.
pub fn all_sets() -> Vec<&'static StencilSet<'static>> {
    cpjit_stencils::all().to_vec()
}
