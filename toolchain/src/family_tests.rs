//! Unit tests of `family.rs`: members, tables, flags, cache parameters and stack effects
//! of checked `[[family]]` entries (a module of its own to keep `family.rs` short).

use super::*;
use serde::Deserialize;

fn family(text: &str) -> Result<Family> {
    #[derive(Deserialize)]
    struct One {
        family: RawFamily,
    }
    let raw: One = toml::from_str(text).map_err(|e| Error(e.to_string()))?;
    Family::check("m.toml", 0, raw.family)
}

const BASE: &str = "[family]\nname = \"push\"\nsource = \"f.c\"\n";

#[test]
fn list_times_params_minus_skips_in_table_order() {
    let f = family(&format!(
        "{BASE}stencil = \"op_{{elem}}_{{IN}}_{{OUT}}\"\nlist = [\"A\", \"B\"]\n\
         list_define = \"OP\"\nskip = [{{ IN = 1, OUT = 0 }}, {{ elem = \"B\", IN = 0 }}]\n\
         [family.params]\nOUT = [0, 1]\nIN = \"0..2\"\n"
    ))
    .unwrap();
    let members = f.members(0, Path::new("/")).unwrap();
    let names: Vec<&str> = members.iter().map(|m| m.stencil.as_str()).collect();
    assert_eq!(names, ["op_A_0_0", "op_A_0_1", "op_A_1_1", "op_B_1_1"]);
    assert_eq!(members[2].defines, ["OP=A", "IN=1", "OUT=1"]);
    assert_eq!(members[3].coords, [1, 1, 1]);
    let refs: Vec<&Member> = members.iter().collect();
    let t = f
        .table(&refs, Path::new("/"), |n| {
            names.iter().position(|m| *m == n).map(|i| i as u16 + 10)
        })
        .unwrap();
    assert_eq!(
        t.stencils,
        [
            Some(10),
            Some(11),
            None,
            Some(12),
            None,
            None,
            None,
            Some(13)
        ]
    );
}

#[test]
fn list_flag_gives_each_member_its_elements_flag() {
    let f = family(&format!(
        "{BASE}stencil = \"op_{{elem}}_{{IN}}\"\nlist = [\"ADD\", \"SUB\"]\n\
         list_define = \"OP\"\nlist_flag = \"OP_IS_\"\ndefines = [\"X=1\"]\n\
         [family.params]\nIN = [0]\n"
    ))
    .unwrap();
    let members = f.members(0, Path::new("/")).unwrap();
    assert_eq!(members[0].defines, ["X=1", "OP=ADD", "OP_IS_ADD=1", "IN=0"]);
    assert_eq!(members[1].defines, ["X=1", "OP=SUB", "OP_IS_SUB=1", "IN=0"]);
    for (text, says) in [
        (
            "stencil = \"op_{IN}\"\nlist_flag = \"OP_IS_\"\n[family.params]\nIN = [0]\n",
            "`list_flag` without `list` or `list_file`",
        ),
        (
            "stencil = \"op_{elem}\"\nlist = [\"A\"]\nlist_define = \"OP\"\n\
             list_flag = \"OP-\"\n",
            "`list_flag` `OP-` is not a macro name prefix",
        ),
    ] {
        let err = family(&format!("{BASE}{text}")).unwrap_err().0;
        assert!(err.contains("(`push`)") && err.contains(says), "{err}");
    }
    // A flag that is another macro of the members would override it (or be overridden).
    for (text, clash) in [
        (
            "list_define = \"OP_IS_A\"\nlist_flag = \"OP_IS_\"\n",
            "OP_IS_A",
        ),
        (
            "list_define = \"OP\"\nlist_flag = \"I\"\nlist = [\"N\"]\n",
            "IN",
        ),
        (
            "list_define = \"OP\"\nlist_flag = \"OP_\"\ndefines = [\"OP_A=2\"]\n",
            "OP_A",
        ),
    ] {
        let list = if text.contains("list =") {
            ""
        } else {
            "list = [\"A\"]\n"
        };
        let f = family(&format!(
            "{BASE}stencil = \"op_{{elem}}_{{IN}}\"\n{list}{text}[family.params]\nIN = [0]\n"
        ))
        .unwrap();
        let err = f.members(0, Path::new("/")).unwrap_err().0;
        assert!(
            err.contains("`push`") && err.contains(&format!("flag `{clash}`")),
            "{err}"
        );
    }
}

#[test]
fn cached_names_the_state_parameters_and_gives_each_members_state() {
    let f = family(&format!(
        "{BASE}stencil = \"op_{{elem}}_{{IN}}_{{OUT}}\"\nlist = [\"A\"]\n\
         list_define = \"OP\"\ncached = {{ entry = \"IN\", exit = \"OUT\" }}\n\
         [family.params]\nOUT = [2, 0]\nIN = \"0..2\"\n"
    ))
    .unwrap();
    // Parameters are sorted by name: IN is parameter 0, OUT parameter 1.
    assert_eq!(
        f.cached,
        Some(CacheParams {
            entry: 0,
            exit: 1,
            effect: None,
            float: false,
        })
    );
    let states: Vec<_> = f
        .members(0, Path::new("/"))
        .unwrap()
        .iter()
        .map(|m| f.member_cache_state(m))
        .collect();
    assert_eq!(
        states,
        [Some((0, 2)), Some((0, 0)), Some((1, 2)), Some((1, 0))]
    );
    // An unknown key inside `cached` is refused by name.
    let err = family(&format!(
        "{BASE}stencil = \"op_{{IN}}\"\ncached = {{ entry = \"IN\", exit = \"IN\", \
         in = \"IN\" }}\n[family.params]\nIN = [0]\n"
    ))
    .unwrap_err()
    .0;
    assert!(err.contains("unknown field `in`"), "{err}");
}

#[test]
fn a_stack_effect_keeps_only_canonical_exit_states() {
    // pop 2, push 1 with up to 3 registers: IN 0 -> 1, 1 -> 1, 2 -> 1, 3 -> 2.
    let f = family(&format!(
        "{BASE}stencil = \"op_{{elem}}_{{IN}}_{{OUT}}\"\nlist = [\"ADD\"]\n\
         list_define = \"OP\"\ncached = {{ entry = \"IN\", exit = \"OUT\", pop = 2, \
         push = 1 }}\n[family.params]\nIN = \"0..=3\"\nOUT = \"0..=3\"\n"
    ))
    .unwrap();
    let members = f.members(0, Path::new("/")).unwrap();
    let names: Vec<&str> = members.iter().map(|m| m.stencil.as_str()).collect();
    assert_eq!(
        names,
        ["op_ADD_0_1", "op_ADD_1_1", "op_ADD_2_1", "op_ADD_3_2"]
    );
    // push 2 from 3 registers' worth: capped at the largest exit value (spills).
    let effect = StackEffect {
        pop: 0,
        push: 2,
        float: false,
    };
    let c = f.cached.unwrap();
    assert_eq!(
        (0..4)
            .map(|i| c.canonical_exit(effect, i, 3))
            .collect::<Vec<_>>(),
        [2, 3, 3, 3]
    );
    // A `skip` still applies on top of the rule.
    let f = family(&format!(
        "{BASE}stencil = \"op_{{IN}}_{{OUT}}\"\ncached = {{ entry = \"IN\", exit = \
         \"OUT\", pop = 0, push = 0 }}\nskip = [{{ IN = 0 }}]\n[family.params]\n\
         IN = \"0..=2\"\nOUT = \"0..=2\"\n"
    ))
    .unwrap();
    let names: Vec<String> = f
        .members(0, Path::new("/"))
        .unwrap()
        .into_iter()
        .map(|m| m.stencil)
        .collect();
    assert_eq!(names, ["op_1_1", "op_2_2"]);
    for (text, says) in [
        (
            "cached = { entry = \"IN\", exit = \"OUT\", pop = 1 }\n",
            "needs both `pop` and `push`",
        ),
        (
            "cached = { entry = \"IN\", exit = \"IN\", pop = 1, push = 0 }\n",
            "distinct entry and exit parameters",
        ),
    ] {
        let err = family(&format!(
            "{BASE}stencil = \"op_{{IN}}_{{OUT}}\"\n{text}[family.params]\nIN = [0]\n\
             OUT = [0]\n"
        ))
        .unwrap_err()
        .0;
        assert!(err.contains("`push`") && err.contains(says), "{err}");
    }
}

#[test]
fn list_file_and_errors_name_the_family() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ops.txt"), "# ops\nADD\n\nSUB # minus\n").unwrap();
    let f = family(&format!(
        "{BASE}stencil = \"op_{{elem}}\"\nlist_file = \"ops.txt\"\nlist_define = \"OP\"\n"
    ))
    .unwrap();
    let names: Vec<String> = f
        .members(0, dir.path())
        .unwrap()
        .into_iter()
        .map(|m| m.stencil)
        .collect();
    assert_eq!(names, ["op_ADD", "op_SUB"]);
    for (text, says) in [
        (
            "stencil = \"op_x\"\nlist = [\"A\"]\nlist_define = \"OP\"\n",
            "{elem}",
        ),
        ("stencil = \"op_{elem}\"\nlist = [\"A\"]\n", "list_define"),
        (
            "stencil = \"op_{IN}\"\n[family.params]\nIN = \"3..1\"\n",
            "range",
        ),
        ("stencil = \"op\"\n[family.params]\nIN = [0]\n", "{IN}"),
        (
            "stencil = \"op_{IN}\"\nskip = [{ OUT = 1 }]\n[family.params]\nIN = [0]\n",
            "OUT",
        ),
        ("stencil = \"op\"\n", "needs a list"),
        (
            "stencil = \"op_{IN}\"\ncached = { entry = \"IN\", exit = \"OUT\" }\n\
             [family.params]\nIN = [0]\n",
            "`cached.exit` names `OUT`, which is not a parameter of the family (its \
             parameters: IN)",
        ),
        (
            "stencil = \"op_{IN}\"\ncached = { entry = \"IN\", exit = \"IN\" }\n\
             [family.params]\nIN = [\"0\", \"01\"]\n",
            "`cached.entry` names parameter `IN`, whose value `01` is not a cache state (an \
             integer from 0 to 255 without leading zeros)",
        ),
    ] {
        let err = family(&format!("{BASE}{text}")).unwrap_err().0;
        assert!(err.contains("`push`") && err.contains(says), "{err}");
    }
}

/// With float slots (`cached.float`), states number (count, floats) as cpjit.h does, and
/// the canonical exit keeps each slot's class: pops take the top slots, pushes add slots of
/// the op's class (`float_results`), a full set spills its bottom slot.
#[test]
fn float_slots_keep_each_values_class_in_the_canonical_exit() {
    let f = family(&format!(
        "{BASE}stencil = \"op_{{elem}}_{{IN}}_{{OUT}}\"\nlist = [\"fadd\", \"add\"]\n\
         list_define = \"OP\"\ncached = {{ entry = \"IN\", exit = \"OUT\", pop = 2, \
         push = 1, float = true, float_results = [\"fadd\"] }}\n[family.params]\n\
         IN = \"0..=6\"\nOUT = \"0..=6\"\n"
    ))
    .unwrap();
    assert_eq!(f.cache_registers(), 2);
    let names: Vec<String> = f
        .members(0, Path::new("/"))
        .unwrap()
        .into_iter()
        .map(|m| m.stencil)
        .collect();
    // States: 0 | 1 = int, 2 = float | 3 = int int, 4 = float int, 5 = int float, 6 = two
    // floats (bit k: slot k, slot 0 the deeper one). fadd from (int, float): one float.
    assert_eq!(
        names,
        [
            "op_fadd_0_2",
            "op_fadd_1_2",
            "op_fadd_2_2",
            "op_fadd_3_2",
            "op_fadd_4_2",
            "op_fadd_5_2",
            "op_fadd_6_2",
            "op_add_0_1",
            "op_add_1_1",
            "op_add_2_1",
            "op_add_3_1",
            "op_add_4_1",
            "op_add_5_1",
            "op_add_6_1",
        ]
    );
    let c = f.cached.unwrap();
    let push = |float| StackEffect {
        pop: 0,
        push: 1,
        float,
    };
    // A push onto two slots spills the bottom one: (float, int) + float = (int, float).
    assert_eq!(c.canonical_exit(push(true), 4, 2), 6 - 1);
    assert_eq!(c.canonical_exit(push(false), 2, 2), 4);
    assert_eq!(c.canonical_exit(push(true), 1, 2), 5);
    assert_eq!(c.count(5), 2);
    let err = family(&format!(
        "{BASE}stencil = \"op_{{IN}}_{{OUT}}\"\ncached = {{ entry = \"IN\", exit = \
         \"OUT\", float_results = [\"x\"] }}\n[family.params]\nIN = \"0..=2\"\nOUT = \"0..=2\"\n"
    ))
    .unwrap_err()
    .0;
    assert!(err.contains("add `float = true`"), "{err}");
}
