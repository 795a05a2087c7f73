//! What the conformance test binaries share: the six generated stencil sets.

use cpjit_model::StencilSet;

/// All six sets: each test binary runs the ones compatible with its own process.
pub fn all_sets() -> [&'static StencilSet<'static>; 6] {
    [
        &cpjit_stencils_x86_64_unknown_linux_gnu::SET,
        &cpjit_stencils_x86_64_apple_darwin::SET,
        &cpjit_stencils_x86_64_pc_windows_msvc::SET,
        &cpjit_stencils_aarch64_unknown_linux_gnu::SET,
        &cpjit_stencils_aarch64_apple_darwin::SET,
        &cpjit_stencils_aarch64_pc_windows_msvc::SET,
    ]
}
