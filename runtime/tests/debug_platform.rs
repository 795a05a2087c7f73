//! Where a debugging option is not implemented, asking for it is an error that says so
//! (never a silently missing registration); the listing works everywhere. Unwinding is
//! implemented on Windows x64 (`debug_unwind_generated.rs`), and a frame list that misses a
//! stencil is refused naming it.
#![cfg(windows)]

use crate::common;
use common::{resolve, SET};
use cpjit_runtime::debug::unwind::StencilFrame;
use cpjit_runtime::{Error, Jit, JitOptions};

#[test]
fn perf_map_and_jitdump_are_refused_on_windows_and_unwind_needs_every_layout() {
    let refused =
        |options: JitOptions| Jit::with_options(SET, resolve, options).expect_err("refused");
    let off = JitOptions::default();
    for options in [
        JitOptions {
            perf_map: true,
            ..off
        },
        JitOptions {
            jitdump: true,
            ..off
        },
    ] {
        match refused(options) {
            Error::Debug { source, .. } => {
                assert_eq!(source.kind(), std::io::ErrorKind::Unsupported)
            }
            e => panic!("{e}"),
        }
    }
    static NONE: [StencilFrame<'static>; 0] = [];
    let e = refused(JitOptions {
        unwind: Some(&NONE),
        ..off
    })
    .to_string();
    if cfg!(target_arch = "x86_64") {
        assert!(e.contains("no frame layout"), "{e}");
    } else {
        assert!(e.contains("implemented for Linux"), "{e}");
    }
}
