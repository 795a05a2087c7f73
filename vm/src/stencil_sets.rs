//! The stencil sets this binary can use, from the generated facade `cpjit-vm-stencils`: the
//! sets of this process's architecture that the one host rule
//! ([`cpjit_model::Host::runs_set`]) lets it run, and among them the one built for a
//! process like this one.

use cpjit_model::StencilSet;

/// Every set this process can run.
pub fn linked() -> Vec<&'static StencilSet<'static>> {
    cpjit_vm_stencils::runnable().collect()
}

/// The set built for the host's own target.
pub fn host() -> Option<&'static StencilSet<'static>> {
    cpjit_vm_stencils::native()
}
