//! The whole exit stubs of bodies with pinned locals (family `vm_exit_pinned`,
//! vm/templates/cached/exit.c): `LINK`, the `UNPIN`s and `EXIT_TRACE` in one stencil, one
//! member per way the pinned registers hold their locals without a wide one, and one for
//! the others.

use super::CachedOps;
use crate::pinning::Held;

/// [`CachedOps::exit_pinned`]'s slots: `EXIT_PINNED_<r0><r1>` at 3 times register 0's
/// code plus register 1's (B 0, S 1, none 2), `EXIT_PINNED_WIDE` last.
pub(super) const SLOTS: usize = 7;
const WIDE: usize = 6;

/// The slot of whole exit stub `element` ([`SLOTS`]), `None` for another name.
pub(super) fn slot(element: &str) -> Option<usize> {
    match element.strip_prefix("EXIT_PINNED_")? {
        "WIDE" => Some(WIDE),
        letters => slot_of(letters.as_bytes()),
    }
}

/// The slot of the member whose registers hold their locals as `letters` say, one letter
/// per register (B boxed, S scaled).
fn slot_of(letters: &[u8]) -> Option<usize> {
    let code = |c: &u8| match c {
        b'B' => Some(0),
        b'S' => Some(1),
        _ => None,
    };
    match letters {
        [a] => Some(code(a)? * 3 + 2),
        [a, b] => Some(code(a)? * 3 + code(b)?),
        _ => None,
    }
}

impl CachedOps {
    /// The stencil that is a whole exit stub of a body whose pinned registers hold their
    /// locals as `held` says (`LINK`, the `UNPIN`s, `EXIT_TRACE`).
    pub fn exit_pinned(&self, held: &[Held]) -> Option<usize> {
        if held.contains(&Held::Wide) {
            return self.exit_pinned[WIDE];
        }
        let mut letters = [0u8; 2];
        for (letter, h) in letters.iter_mut().zip(held) {
            *letter = match h {
                Held::Boxed => b'B',
                Held::Scaled => b'S',
                _ => return None,
            };
        }
        let slot = slot_of(letters.get(..held.len())?)?;
        self.exit_pinned[slot]
    }

    /// Whether `stencil` is a whole exit stub of a body with pinned locals.
    pub fn is_exit_pinned(&self, stencil: usize) -> bool {
        self.exit_pinned.contains(&Some(stencil))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jit::selected_set;

    /// Each pinning finds the member named for how its registers hold their locals, and any
    /// with a wide register the one that reads it from its operand.
    #[test]
    fn each_pinning_finds_the_member_named_for_it() {
        let set = selected_set().expect("the host's set");
        let cached = CachedOps::of_set(set).expect("the set's cached ops");
        let (b, s, w) = (Held::Boxed, Held::Scaled, Held::Wide);
        let cases: [(&[Held], &str); 8] = [
            (&[b], "B"),
            (&[s], "S"),
            (&[b, b], "BB"),
            (&[b, s], "BS"),
            (&[s, b], "SB"),
            (&[s, s], "SS"),
            (&[s, w], "WIDE"),
            (&[w], "WIDE"),
        ];
        for (held, name) in cases {
            let stencil = cached.exit_pinned(held).expect("a member");
            assert_eq!(
                set.stencils[stencil].name,
                format!("op_VM_EXIT_PINNED_{name}_0_0")
            );
            assert!(cached.is_exit_pinned(stencil));
        }
        assert_eq!(cached.exit_pinned(&[]), None);
        assert_eq!(slot("EXIT_PINNED_BX"), None);
    }
}
