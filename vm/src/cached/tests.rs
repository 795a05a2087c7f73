//! Tests of the cache states' encoding and of reading the VM's families.

use super::*;

#[test]
fn a_cache_state_is_its_depth_plus_4_when_scaled() {
    for depth in 0..4 {
        for scaled in [false, true] {
            let s = CacheState::new(depth, scaled);
            assert_eq!(s.depth(), depth);
            assert_eq!(
                s.is_scaled(),
                scaled && depth > 0,
                "nothing cached is one state"
            );
            let bits = if depth == 0 {
                0
            } else {
                depth + 4 * scaled as u8
            };
            assert_eq!(s.bits(), bits);
            assert_eq!(CacheState::from_bits(bits), s);
        }
    }
    assert_eq!(CacheState::new(0, true), CacheState::EMPTY);
    assert_eq!(CacheState::boxed(2).describe(), "2");
    assert_eq!(CacheState::scaled(3).describe(), "3s");
    assert_eq!(CacheState::EMPTY.describe(), "0");
    assert!(CacheState::EMPTY.fits(Kind::Scaled) && CacheState::EMPTY.fits(Kind::Float));
    assert!(CacheState::scaled(1).fits(Kind::Scaled));
    assert!(!CacheState::scaled(1).fits(Kind::Boxed));
    assert!(!CacheState::boxed(1).fits(Kind::Scaled) && !CacheState::boxed(1).fits(Kind::Float));
    assert!(CacheState::float(2).fits(Kind::Float) && !CacheState::float(2).fits(Kind::Boxed));
}

#[test]
fn a_family_pinning_another_operand_than_the_vm_is_refused() {
    let at = "stencil set t: family f";
    assert_eq!(pinned_op(at, "LOAD", 0), Ok(ops::op::LOAD));
    assert_eq!(
        pinned_op(at, "SETITEM_LOCALS_KNOWN", 1),
        Ok(ops::op::SETITEM_LOCALS_KNOWN)
    );
    let e = pinned_op(at, "GETITEM_LOCALS", 0).unwrap_err();
    assert!(
        e.contains("family f: GETITEM_LOCALS is compiled with its operand 0"),
        "{e}"
    );
    assert!(e.contains("pins its operand 1"), "{e}");
    let e = pinned_op(at, "ADD_INT", 0).unwrap_err();
    assert!(
        e.contains("ADD_INT is not a VM op that runs on a pinned local"),
        "{e}"
    );
}
