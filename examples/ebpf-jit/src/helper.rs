//! Helpers as the trace calls them. rbpf's helpers are Rust `fn(r1, .., r5) -> r0`s, whose
//! ABI C cannot call; a trace's call op calls a C-ABI function directly instead, made here
//! once per helper *type* ([`Helper::new`], a generic function): for a `fn` item or a closure
//! the helper's body is inlined into it, so a call from the trace is one direct `call`
//! (rbpf's JIT: `movabs`, indirect `call` of the Rust `fn`). Before, one C-ABI trampoline
//! jumped to the `fn` pointer: a call and an indirect jump per helper call.

use std::any::Any;
use std::collections::HashMap;
use std::ffi::c_void;
use std::hash::BuildHasher;
use std::sync::Arc;

/// The helpers an `EbpfVm` holds: the first registered inline, the others sorted by id,
/// found by binary search. A program registers a few: a map's insert (hashing, its first
/// allocation of control bytes and buckets, a rehash) cost about 320 instructions of a
/// 10-instruction program's compile, a `Vec`'s first push and its free about 190 (one
/// allocation per compile); the one helper most programs register now takes none.
#[derive(Default)]
pub(crate) struct Helpers {
    first: Option<(u32, Helper)>,
    rest: Vec<(u32, Helper)>,
}

impl Helpers {
    /// Registers `helper` as `id`, replacing one of the same id.
    pub fn insert(&mut self, id: u32, helper: Helper) {
        match &mut self.first {
            None => self.first = Some((id, helper)),
            Some((k, h)) if *k == id => *h = helper,
            Some(_) => match self.rest.binary_search_by_key(&id, |&(k, _)| k) {
                Ok(at) => self.rest[at].1 = helper,
                Err(at) => self.rest.insert(at, (id, helper)),
            },
        }
    }
}

/// Helpers by id, as a compile and the interpreter look them up: [`Helpers`], or the map
/// [`crate::Compiler::compile`] takes.
pub(crate) trait HelperMap {
    fn helper(&self, id: u32) -> Option<&Helper>;
}

impl HelperMap for Helpers {
    fn helper(&self, id: u32) -> Option<&Helper> {
        match &self.first {
            Some((k, h)) if *k == id => Some(h),
            _ => {
                let at = self.rest.binary_search_by_key(&id, |&(k, _)| k).ok()?;
                Some(&self.rest[at].1)
            }
        }
    }
}

impl<S: BuildHasher> HelperMap for HashMap<u32, Helper, S> {
    fn helper(&self, id: u32) -> Option<&Helper> {
        self.get(&id)
    }
}

/// `ebpf_helper_fn` of templates/include/ebpf.h: r0 = helper(r1, .., r5), with the helper's
/// state last.
pub(crate) type HelperCall = extern "C" fn(u64, u64, u64, u64, u64, *const c_void) -> u64;

/// A helper: rbpf's `fn(r1, r2, r3, r4, r5) -> r0`, or any closure of that shape
/// ([`Helper::new`]; [`crate::EbpfVm::register_helper`] makes one).
#[derive(Clone)]
pub struct Helper {
    pub(crate) call: HelperCall,
    /// The helper's state, as `call` reads it.
    pub(crate) data: *const c_void,
    /// Keeps a helper with state alive (a `fn` pointer, a closure that captures); `None` for
    /// a zero-sized one (a `fn` item, a closure that captures nothing): no allocation.
    owner: Option<Arc<dyn Any + Send + Sync>>,
}

// SAFETY: `data` points into `owner` (which is Send + Sync) or at a zero-sized helper, which
// has no bytes to share; `Helper::new` requires the helper itself to be Send + Sync.
unsafe impl Send for Helper {}
// SAFETY: as for Send; `call` only reads through `data` (`Fn` takes `&self`).
unsafe impl Sync for Helper {}

impl Helper {
    /// The helper `f`.
    pub fn new<F>(f: F) -> Helper
    where
        F: Fn(u64, u64, u64, u64, u64) -> u64 + Send + Sync + 'static,
    {
        extern "C" fn call<F: Fn(u64, u64, u64, u64, u64) -> u64>(
            r1: u64,
            r2: u64,
            r3: u64,
            r4: u64,
            r5: u64,
            data: *const c_void,
        ) -> u64 {
            // SAFETY: `data` is the `F` that `Helper::new::<F>` paired with this function,
            // alive as long as any `Helper` (and so any trace) holds it.
            let f = unsafe { &*data.cast::<F>() };
            f(r1, r2, r3, r4, r5)
        }
        if std::mem::size_of::<F>() == 0 {
            // A box of a zero-sized value allocates nothing; leaking it gives a pointer that
            // stays valid (for zero bytes) forever.
            let f: &'static F = Box::leak(Box::new(f));
            Helper {
                call: call::<F>,
                data: (f as *const F).cast(),
                owner: None,
            }
        } else {
            let owner = Arc::new(f);
            Helper {
                call: call::<F>,
                data: Arc::as_ptr(&owner).cast(),
                owner: Some(owner),
            }
        }
    }

    /// r0 = the helper of r1..r5 (the interpreter's call).
    pub fn call(&self, r1: u64, r2: u64, r3: u64, r4: u64, r5: u64) -> u64 {
        (self.call)(r1, r2, r3, r4, r5, self.data)
    }

    /// What keeps the helper alive while a trace may call it, if it needs keeping.
    pub(crate) fn owner(&self) -> Option<&Arc<dyn Any + Send + Sync>> {
        self.owner.as_ref()
    }
}

impl std::fmt::Debug for Helper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Helper({:p})", self.call as *const ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A helper returning `k`, capturing it (so each has its own state).
    fn returns(k: u64) -> Helper {
        Helper::new(move |_, _, _, _, _| k)
    }

    fn found(helpers: &Helpers, id: u32) -> Option<u64> {
        helpers.helper(id).map(|h| h.call(0, 0, 0, 0, 0))
    }

    #[test]
    fn helpers_are_found_by_id_and_replaced_inline_and_in_the_rest() {
        let mut helpers = Helpers::default();
        assert_eq!(found(&helpers, 1), None);
        // The first registered stays inline; later ones are kept sorted, in any order.
        for (id, k) in [(7, 70), (3, 30), (9, 90), (1, 10)] {
            helpers.insert(id, returns(k));
        }
        for (id, k) in [(7, 70), (3, 30), (9, 90), (1, 10)] {
            assert_eq!(found(&helpers, id), Some(k), "helper {id}");
        }
        assert_eq!(found(&helpers, 5), None);
        assert_eq!(found(&helpers, 0), None);
        // Replacing the inline one and one of the rest changes only them.
        helpers.insert(7, returns(71));
        helpers.insert(3, returns(31));
        let now: Vec<_> = [7, 3, 9, 1].map(|id| found(&helpers, id)).into();
        assert_eq!(now, [Some(71), Some(31), Some(90), Some(10)]);
        assert_eq!(helpers.rest.len(), 3);
    }
}
