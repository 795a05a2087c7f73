//! Where a debugging option is not implemented, asking for it is an error that says so
//! (never a silently missing registration); the listing works everywhere.
#![cfg(windows)]

mod common;
use common::{resolve, SET};
use cpjit_runtime::debug::unwind::StencilFrame;
use cpjit_runtime::{Error, Jit, JitOptions};

#[test]
fn perf_map_jitdump_and_unwind_are_refused_on_windows() {
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
    assert!(e.contains("implemented for Linux"), "{e}");
}
