//! A family's `cached` key (which parameters hold its members' cache state): on every target,
//! the toolchain checks each member's `CPJIT_CACHED_OP` annotation against the member's
//! parameter values and refuses a mismatch, an uncached member of a family with a cache
//! state, and a cached member of a family without one, naming the manifest, family, member,
//! target and both states. The kit's own `test_cached` family declares its state; the
//! default set's build on every target (`pipeline.rs`) passes the same check for its 193
//! members.

use crate::common;

use common::{compiled_targets, set, workspace};
use cpjit_toolchain::family::CacheParams;
use cpjit_toolchain::manifest::Manifest;

#[test]
fn members_must_state_the_cache_state_of_their_parameters_on_every_target() {
    let manifest = set("cached_family").join("manifest.toml");
    let manifest = manifest.display();
    for target in compiled_targets() {
        let err = common::build_error(&set("cached_family"), &target);
        let at = |family: &str, member: &str| {
            format!("{manifest}: [[family]] `{family}`: member `{member}` on {target}: ")
        };
        for (family, member, says) in [
            (
                "swapped",
                "op_swapped_0_1",
                "its CPJIT_CACHED_OP annotation states (entry, exit) = (1, 0), but the family's \
                 `cached` parameters give (entry, exit) = (IN = 0, OUT = 1): pass the parameters \
                 to the macro (`CPJIT_CACHED_OP(NAME, IN, OUT)`)",
            ),
            (
                "plain",
                "op_plain_1_2",
                "has no CPJIT_CACHED_OP annotation (it is not a cached op), but the family's \
                 `cached` parameters give (entry, exit) = (IN = 1, OUT = 2): declare the op with \
                 CPJIT_CACHED_OP",
            ),
            (
                "undeclared",
                "op_undeclared_2_1",
                "its CPJIT_CACHED_OP annotation states (entry, exit) = (2, 1), but the family \
                 declares no cache state: add `cached = { entry = \"<parameter>\", exit = \
                 \"<parameter>\" }` naming the parameters that hold it",
            ),
        ] {
            let want = format!("{}{says}", at(family, member));
            assert!(err.contains(&want), "{target}: missing `{want}` in:\n{err}");
        }
        // The member whose parameters agree (IN = OUT = 1), the correct families and the
        // plain op are not named.
        for fine in [
            "op_swapped_1_1",
            "op_states_",
            "op_keep_",
            "op_nothing",
            "`states`",
            "`keep`",
        ] {
            assert!(
                !err.contains(fine),
                "{target}: `{fine}` is accepted:\n{err}"
            );
        }
        assert_eq!(
            err.matches("[[family]]").count(),
            3,
            "{target}: one error per refused member:\n{err}"
        );
    }
    // A target compiled as its twin (same_code_as): the errors name the twin, and a note
    // says they are the target's.
    let twins = common::target_files();
    let t = twins.iter().find(|t| t.same_code_as.is_some()).unwrap();
    let twin = t.same_code_as.as_deref().unwrap();
    let err = common::build_error(&set("cached_family"), &t.triple);
    let note = format!(
        "note: {} is compiled as {twin} (`same_code_as` in its target file): the errors \
         naming {twin} are its errors too",
        t.triple
    );
    assert!(
        err.contains(&format!("member `op_swapped_0_1` on {twin}: ")) && err.ends_with(&note),
        "{err}"
    );
}

#[test]
fn the_kits_cached_family_declares_its_state_parameters() {
    let manifest = Manifest::load(&workspace().join("templates")).unwrap();
    let family = manifest
        .families
        .iter()
        .find(|f| f.name == "test_cached")
        .expect("the kit's test_cached family");
    let param = |i: usize| family.params[i].0.as_str();
    let CacheParams {
        entry,
        exit,
        effect,
        float,
    } = family.cached.expect("a `cached` key");
    assert_eq!((param(entry), param(exit)), ("IN", "OUT"));
    // States are counts: its slots hold ints only.
    assert!(!float);
    // Every (IN, OUT) pair: the test family states no stack effect.
    assert_eq!(effect, None);
    // The family without cached ops declares none (its members would be refused otherwise).
    let arith = manifest.families.iter().find(|f| f.name == "test_arith");
    assert_eq!(arith.expect("test_arith").cached, None);
}
/// A family's declared stack effects are checked against its members' code on every target:
/// a pop deeper than the op reaches (seen on its member entered and left with nothing
/// cached) and a net change it does not make (seen on every member) are refused naming the
/// op, the declared and the found effect and the fix; ops declared right are not named,
/// also when the stack pointer escapes into a helper (then only the net change is checked)
/// or when the op reads deeper than it pops (`peek`, declared [0, 0]).
#[test]
fn declared_stack_effects_must_be_the_members_own() {
    let manifest = set("stack_effects").join("manifest.toml");
    let manifest = manifest.display();
    for target in compiled_targets() {
        let err = common::build_error(&set("stack_effects"), &target);
        let at = |op: &str, declared: &str, member: &str| {
            format!(
                "{manifest}: [[family]] `ops`: op `{op}` declares the stack effect {declared} \
                 ([pop, push] in `[family.cached.effects]` or `cached.pop`/`push`), but its \
                 member `{member}` on {target} does "
            )
        };
        for want in [
            format!(
                "{}[1, 2] at most: it moves `sp` by +1 slot(s) with nothing cached on entry or \
                 exit and touches no slot below the top 1; fix the declared effect",
                at("dup", "[2, 3]", "op_dup_0_0")
            ),
            format!(
                "{}a net change of -1 (push - pop), not +0: entered with 0 cached value(s) and \
                 leaving 0, it moves `sp` by -1 slot(s)",
                at("add", "[2, 2]", "op_add_0_0")
            ),
            format!(
                "{}a net change of -1 (push - pop), not +0: entered with 1 cached value(s) and \
                 leaving 0, it moves `sp` by +0 slot(s)",
                at("add", "[2, 2]", "op_add_1_0")
            ),
        ] {
            assert!(err.contains(&want), "{target}: missing `{want}` in:\n{err}");
        }
        for fine in ["op `drop`", "op `helper`", "op `peek`", "op_dup_1_0"] {
            assert!(!err.contains(fine), "{target}: `{fine}` is named:\n{err}");
        }
    }
}
