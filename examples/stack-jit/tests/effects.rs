//! The manifest's stack effects against the verifier's: the kit's selection tables are
//! generated from `[family.cached.effects]`, the verifier's depth analysis from
//! `stack_jit::effect`, and nothing else ties the two. A member is correct whatever exit
//! state the table picks (it spills or fills to it), so an effect declared too small only
//! costs speed (no differential test notices), and one declared too large makes the kit fill
//! values the stack does not have. Here every op's table row must be the canonical exit of
//! the verifier's effect, with no glue.

#[cfg(all(target_arch = "aarch64", target_os = "linux"))]
use stack_stencils_aarch64_unknown_linux_gnu as host;
#[cfg(all(target_arch = "riscv64", target_os = "linux"))]
use stack_stencils_riscv64gc_unknown_linux_gnu as host;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use stack_stencils_x86_64_unknown_linux_gnu as host;

use cpjit_runtime::model::Family;
use cpjit_runtime::Selector;
use stack_jit::{effect, Op};
use Op::*;

const ALL: [Op; 19] = [
    Const(0),
    Load(0),
    Store(0),
    Add,
    Sub,
    Mul,
    And,
    Shr,
    Lt,
    Eq,
    Dup,
    Drop,
    Swap,
    Mix,
    Print,
    Jump(0),
    Jz(0),
    Jnz(0),
    Ret,
];

#[test]
fn the_manifest_declares_the_verifiers_stack_effects() {
    let family = &host::FAMILIES[host::family::stack];
    let selector = Selector::new(family).expect("the family is cached");
    let table = selector.table();
    assert_eq!(table.ops(), ALL.len() + 1, "one op per `Op` and the glue");
    for op in ALL {
        // `Jz(0)` -> `jz`: the element's name.
        let name = format!("{op:?}").to_lowercase();
        let name = name.split('(').next().unwrap();
        let id = selector.op(name).unwrap_or_else(|e| panic!("{e}"));
        let (pop, push) = effect(op);
        for state in 0..table.states {
            let t = table.transition(id, state);
            let s = usize::from(state);
            // `ret` returns: the family keeps only its members that leave nothing cached.
            let want = if op == Ret {
                0
            } else {
                (s.saturating_sub(pop) + push).min(3)
            };
            assert!(
                t.glue == Family::NONE && usize::from(t.exit) == want,
                "{name} entered with {s} cached: the table leaves {} (glue {}), the verifier's \
                 effect ({pop}, {push}) leaves {want}; fix `[family.cached.effects]`",
                t.exit,
                t.glue
            );
        }
    }
}

/// The manifest prunes the family (`prune = true`): a member the tables never pick is not
/// compiled, and asking for it by name says so, naming the family and the fix.
#[test]
fn a_pruned_member_is_refused_by_name_with_the_reason() {
    let set = &host::SET;
    // `add` from 0 cached values exits with its canonical 1: the 0 -> 3 member is pruned,
    // the plain member (0 -> 0) is kept for the uncached mode, and so is every member of
    // the jumping ops.
    assert_eq!(set.pruned_from("op_add_0_3"), Some("stack"));
    for kept in ["op_add_0_1", "op_add_0_0", "op_jz_3_0", "op_move_3_1"] {
        assert!(set.index_of(kept).is_some(), "{kept} was pruned");
    }
    let jit = cpjit_runtime::Jit::new(set, |_| Some(0)).expect("the host's set");
    let e = jit.trace().push_named("op_add_0_3", &[], &[]).unwrap_err();
    let text = e.to_string();
    for says in [
        "`op_add_0_3`",
        "family `stack`",
        "pruned",
        "push_op",
        "cached.keep",
    ] {
        assert!(text.contains(says), "{text}");
    }
}
