//! Fuzzes the runtime's trace API with the host's generated stencil set: the input chooses
//! stencils, operands, jump targets and the continuation; every trace that `finish` accepts is
//! verified byte by byte by an independent checker that decodes each patched hole
//! ([`cpjit_fuzz_harness::trace::check`]). Rejected traces must be rejected with an error, not a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    cpjit_fuzz_harness::trace::run(bytes);
});
