//! The VM's register-cached families (`vm/templates/manifest.toml`, `vm_*`) as generated
//! for every target: each op has at most one member per entry state (the lowering and the
//! kit's tables assume the state an op leaves is a function of the state it is entered
//! in), and where a family declares its stack effect, that member's exit is the canonical
//! one (pops take registers first, pushes fill registers, at most `states - 1` cached; in
//! the float-slot families, `FLOATS`, every cached value in a float slot).

use cpjit_model::{Family, FloatState, StencilSet};

/// Every `vm_*` family of `set` that has selection tables.
fn cached_families<'a>(set: &'a StencilSet<'a>) -> Vec<&'a Family<'a>> {
    cpjit_vm_stencils::families(set)
        .iter()
        .filter(|f| f.name.starts_with("vm_") && f.cached.is_some())
        .collect()
}

#[test]
fn every_cached_vm_op_has_one_member_per_entry_state_on_every_target() {
    let sets = cpjit_vm::jit::available_sets();
    assert!(!sets.is_empty(), "no stencil set linked");
    for set in sets {
        let families = cached_families(set);
        assert!(
            families.len() >= 2,
            "{}: the VM's families vm_*",
            set.target
        );
        for family in families {
            let cached = family.cached.as_ref().expect("filtered");
            // The float-slot families (`FLOATS`) keep every cached value in a float slot.
            let floats = family.params.iter().any(|p| p.name == "FLOATS");
            let ops = cached.transitions.len() / cached.states as usize;
            for op in 0..ops as u16 {
                let element = family.elements[op as usize / cached.combos.max(1) as usize];
                for entry in 0..cached.states {
                    let exits: Vec<u8> = (0..cached.states)
                        .filter(|&exit| cached.member(op, entry, exit) != Family::NONE)
                        .collect();
                    let at = format!(
                        "{}: {} op {op} ({element}) from {entry}",
                        set.target, family.name
                    );
                    assert!(exits.len() <= 1, "{at}: members exit in {exits:?}");
                    let (Some(&exit), Some([pop, push])) = (exits.first(), cached.effect(op))
                    else {
                        continue;
                    };
                    let canonical = if floats {
                        // Every slot a float (states 2**count - 1 + floats, 3 registers).
                        let count = FloatState::from_number(entry).count;
                        let count = (count.saturating_sub(pop) + push).min(3);
                        FloatState {
                            count,
                            floats: (1 << count) - 1,
                        }
                        .number()
                    } else {
                        let registers = cached.states - 1;
                        (entry.saturating_sub(pop) + push).min(registers)
                    };
                    assert_eq!(exit, canonical, "{at}: pop {pop}, push {push}");
                }
            }
        }
    }
}
