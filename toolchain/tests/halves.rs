//! Halves of a 64-bit operand (`CPJIT_DECLARE_OPERAND_HALVES` in `cpjit.h`): recognised by
//! their declared type on every target, folded into one operand of the stencil whose holes
//! are `operand-hi:`/`operand-lo:` values, with no check hole (no value is refused) and, where
//! the format has 32-bit immediates, no GOT load; plain operands that merely end in
//! `_HI`/`_LO` stay plain; bad declarations are refused naming target, template, stencil
//! and symbol.

use crate::common;

use common::{options, set, workspace};
use cpjit_model::{Arch, ObjectFormat};
use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::driver;
use serde_json::Value;

/// The values (`operand:X`, `operand-hi:X`, ...) and kinds of a stencil's holes.
fn holes(s: &Value) -> Vec<(String, String)> {
    s["holes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["value"].as_str().unwrap().to_string(),
                h["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn operands(s: &Value) -> Vec<&str> {
    s["operands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect()
}

#[test]
fn halves_fold_into_one_operand_and_plain_hi_lo_names_stay_plain_on_every_target() {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("stencils.json");
    let mut opts = options(
        set("halves"),
        &[],
        out.path(),
        Cache::new(Cache::default_dir(&workspace())),
    );
    opts.json = Some(json.clone());
    driver::build_stencils(&opts).unwrap_or_else(|e| panic!("{e}"));
    let all: Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    assert_eq!(all.as_object().unwrap().len(), common::all_targets().len());
    for (target, built) in all.as_object().unwrap() {
        let (arch, format) = common::arch_and_format(target);
        // AArch64 Mach-O and COFF have no relocation for a movz/movk immediate: GOT loads
        // there, which the runtime relaxes; everywhere else the halves are immediates.
        let got_allowed = arch == Arch::Aarch64 && format != ObjectFormat::Elf;
        let stencil = |name: &str| common::json_stencil(built, target, name);
        let check_halves = |name: &str, operand: &str, want: &[&str]| {
            let s = stencil(name);
            let holes = holes(&s);
            for w in want {
                let value = format!("{w}:{operand}");
                assert!(
                    holes.iter().any(|(v, _)| *v == value),
                    "{target}: {name} has no {value} hole: {holes:?}"
                );
            }
            for (value, kind) in &holes {
                assert!(
                    !kind.starts_with("Operand"),
                    "{target}: {name}: a check hole {kind} for {value} (no value of a \
                     halves operand may be refused)"
                );
                if value.starts_with("operand-") {
                    let got = kind.contains("Got");
                    assert!(
                        got_allowed || !got,
                        "{target}: {name}: {value} through a GOT ({kind})"
                    );
                }
            }
            s
        };
        let push = check_halves("op_push_halves", "VALUE", &["operand-hi", "operand-lo"]);
        assert_eq!(operands(&push), ["VALUE"], "{target}: {push}");
        let low = check_halves("op_push_low_half", "VALUE", &["operand-lo"]);
        assert_eq!(operands(&low), ["VALUE"], "{target}: {low}");
        assert!(
            !holes(&low).iter().any(|(v, _)| v.starts_with("operand-hi")),
            "{target}: {low}"
        );
        let both = check_halves(
            "op_halves_and_whole",
            "WHOLE",
            &["operand-hi", "operand-lo", "operand"],
        );
        assert_eq!(operands(&both), ["OTHER", "WHOLE"], "{target}: {both}");
        assert!(
            holes(&both).iter().any(|(v, _)| v == "operand:OTHER"),
            "{target}: {both}"
        );
        let plain = stencil("op_plain_hi_lo");
        assert_eq!(operands(&plain), ["FOO_HI", "FOO_LO"], "{target}: {plain}");
        for (value, kind) in holes(&plain) {
            assert!(
                !value.starts_with("operand-") && !kind.starts_with("Operand"),
                "{target}: {plain}"
            );
        }
        assert!(
            holes(&plain).iter().any(|(v, _)| v == "operand:FOO_HI")
                && holes(&plain).iter().any(|(v, _)| v == "operand:FOO_LO"),
            "{target}: {plain}"
        );
    }
}

#[test]
fn halves_of_a_jump_target_and_a_half_without_its_suffix_are_refused_by_name() {
    for target in [
        common::target(Arch::X86_64, ObjectFormat::Elf),
        common::target(Arch::Aarch64, ObjectFormat::MachO),
    ] {
        let err = common::build_error(&set("bad_halves"), &target);
        assert!(
            err.contains(&format!(
                "{target}: op.c: stencil `op_halves_of_a_target`: symbol `_JIT_NEXT_TARGET_HI` \
                 is a half of `_JIT_NEXT_TARGET`, which names the continuation or a jump \
                 target, not an operand"
            )),
            "{err}"
        );
        assert!(
            err.contains(&format!(
                "{target}: op.c: stencil `op_misnamed_half`: symbol `_JIT_MISNAMED` is \
                 declared as the high half of an operand but its name is not an operand name \
                 followed by `_HI`"
            )),
            "{err}"
        );
    }
}
