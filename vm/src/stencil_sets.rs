//! The generated stencil crates linked into this binary, and which of them this process can
//! run: stencil machine code is OS-agnostic as long as the entry and helper calling
//! conventions match. An x86-64 process runs System V sets (Linux, macOS) unless it is a
//! Windows process, which runs the Win64 set; an AArch64 process runs every AAPCS64 set
//! except that Linux stencils (free to use `x18`) are not run on Apple or Windows hosts.

use cpjit_model::StencilSet;

#[cfg(target_arch = "x86_64")]
fn all() -> Vec<&'static StencilSet<'static>> {
    if cfg!(windows) {
        vec![&cpjit_stencils_x86_64_pc_windows_msvc::SET]
    } else {
        vec![
            &cpjit_stencils_x86_64_unknown_linux_gnu::SET,
            &cpjit_stencils_x86_64_apple_darwin::SET,
        ]
    }
}

#[cfg(target_arch = "aarch64")]
fn all() -> Vec<&'static StencilSet<'static>> {
    let mut sets: Vec<&'static StencilSet<'static>> = vec![
        &cpjit_stencils_aarch64_apple_darwin::SET,
        &cpjit_stencils_aarch64_pc_windows_msvc::SET,
    ];
    if !cfg!(any(windows, target_vendor = "apple")) {
        sets.insert(0, &cpjit_stencils_aarch64_unknown_linux_gnu::SET);
    }
    sets
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn all() -> Vec<&'static StencilSet<'static>> {
    Vec::new()
}

/// Every set this process can run.
pub fn linked() -> Vec<&'static StencilSet<'static>> {
    all()
}

/// The set built for the host's own target.
pub fn host() -> Option<&'static StencilSet<'static>> {
    let os = if cfg!(windows) {
        "windows"
    } else if cfg!(target_vendor = "apple") {
        "apple"
    } else {
        "linux"
    };
    all().into_iter().find(|s| s.target.contains(os))
}
