//! Typed entries: a trace's entry shim as the C function type its set declares.
//!
//! The shim of a set takes as many pointer-sized arguments as the set's manifest declares
//! (`[stencils] parameters`, two by default: `(struct cpjit_frame *frame, uint64_t *sp)`),
//! and returns `int64_t`. The toolchain records a count other than two in the shim stencil
//! ([`HoleKind::EntryParameters`](cpjit_model::HoleKind::EntryParameters), read by
//! [`Stencil::entry_parameters`](cpjit_model::Stencil::entry_parameters)), so the runtime can
//! refuse a Rust function type of another arity instead of calling the shim with arguments
//! missing or left over:
//!
//! ```no_run
//! use cpjit_runtime::{Entry, Jit};
//! # fn demo(jit: &Jit<'_>) -> Result<(), cpjit_runtime::Error> {
//! type Shim = unsafe extern "C" fn(*mut u64, *mut u64, *mut u8) -> i64;
//! let mut trace = jit.trace();
//! let entry: Entry<Shim> = trace.push_shim_as::<Shim>()?; // EntrySignature if not 3
//! trace.push_named("op_t3_exit", &[], &[])?;
//! let trace = trace.finish()?;
//! let (mut frame, mut stack, mut state) = ([0u64; 4], [0u64; 16], [0u8; 64]);
//! // SAFETY: the trace's ops expect a frame, a value stack and a thread state.
//! let status = unsafe {
//!     trace.entry_typed(entry)?(frame.as_mut_ptr(), stack.as_mut_ptr(), state.as_mut_ptr())
//! };
//! # let _ = status; Ok(()) }
//! ```
//!
//! [`EntrySignature`] is implemented for `unsafe extern "C" fn(A, B, ...) -> i64` (or
//! `-> u64`) with up to six [`EntryArgument`]s: raw pointers and 64-bit integers, which the
//! C ABIs of every target pass exactly like the pointers the shim declares.

use crate::trace::InstanceId;
use std::marker::PhantomData;

mod sealed {
    pub trait Signature {}
    pub trait Argument {}
    pub trait Return {}
}

/// A C function type a trace's entry shim can be called as: `unsafe extern "C" fn` of
/// [`EntryArgument`]s returning `i64` or `u64`. Sealed: implemented for 0 to 6 arguments.
pub trait EntrySignature: Copy + sealed::Signature {
    /// How many arguments the function type takes.
    const PARAMETERS: usize;

    /// The function at `code`.
    ///
    /// # Safety
    /// `code` must be the address of an instance of an entry shim that takes
    /// [`Self::PARAMETERS`] arguments.
    #[doc(hidden)]
    unsafe fn from_code(code: *const u8) -> Self;
}

/// An argument type of an [`EntrySignature`]: a raw pointer, or a 64-bit integer
/// (`u64`, `i64`, `usize`, `isize`), each passed in one integer register or stack slot
/// like the pointer the shim declares.
pub trait EntryArgument: sealed::Argument {}

/// A return type of an [`EntrySignature`]: the shim's `int64_t`, as `i64` or `u64`.
pub trait EntryReturn: sealed::Return {}

macro_rules! arguments {
    ($($t:ty),*) => {$(
        impl sealed::Argument for $t {}
        impl EntryArgument for $t {}
    )*};
}
arguments!(u64, i64, usize, isize);

impl<T> sealed::Argument for *mut T {}
impl<T> EntryArgument for *mut T {}
impl<T> sealed::Argument for *const T {}
impl<T> EntryArgument for *const T {}

impl sealed::Return for i64 {}
impl EntryReturn for i64 {}
impl sealed::Return for u64 {}
impl EntryReturn for u64 {}

macro_rules! signatures {
    ($($n:literal => ($($a:ident),*);)*) => {$(
        impl<R: EntryReturn, $($a: EntryArgument),*> sealed::Signature
            for unsafe extern "C" fn($($a),*) -> R {}

        impl<R: EntryReturn, $($a: EntryArgument),*> EntrySignature
            for unsafe extern "C" fn($($a),*) -> R
        {
            const PARAMETERS: usize = $n;

            unsafe fn from_code(code: *const u8) -> Self {
                // SAFETY: a function pointer is a code address of the same size; the caller
                // vouches for the code's signature.
                unsafe { std::mem::transmute_copy::<*const u8, Self>(&code) }
            }
        }
    )*};
}
signatures! {
    0 => ();
    1 => (A);
    2 => (A, B);
    3 => (A, B, C);
    4 => (A, B, C, D);
    5 => (A, B, C, D, E);
    6 => (A, B, C, D, E, G);
}

/// An entry-shim instance pushed by
/// [`TraceBuilder::push_shim_as`](crate::TraceBuilder::push_shim_as), whose arity was
/// checked against the set's shim: [`Trace::entry_typed`](crate::Trace::entry_typed) turns
/// it into `F` once the trace is finished.
pub struct Entry<F> {
    id: InstanceId,
    signature: PhantomData<F>,
}

impl<F> Entry<F> {
    pub(crate) fn new(id: InstanceId) -> Entry<F> {
        Entry {
            id,
            signature: PhantomData,
        }
    }

    /// The instance (always the trace's first).
    pub fn id(&self) -> InstanceId {
        self.id
    }
}

impl<F> Clone for Entry<F> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<F> Copy for Entry<F> {}

impl<F> std::fmt::Debug for Entry<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("id", &self.id)
            .field("signature", &std::any::type_name::<F>())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arity_is_the_function_types() {
        type Two = unsafe extern "C" fn(*mut u8, *mut u64) -> i64;
        type Three = unsafe extern "C" fn(*mut u8, *const u64, usize) -> u64;
        type Six = unsafe extern "C" fn(u64, i64, usize, isize, *mut u8, *const u8) -> i64;
        assert_eq!(<Two as EntrySignature>::PARAMETERS, 2);
        assert_eq!(<Three as EntrySignature>::PARAMETERS, 3);
        assert_eq!(<Six as EntrySignature>::PARAMETERS, 6);
        assert_eq!(<crate::EntryFn as EntrySignature>::PARAMETERS, 2);
    }
}
