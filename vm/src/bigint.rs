//! Ints beyond the tagged 48-bit range: Python's arbitrary precision, as a slow path.
//!
//! An int is a tagged value while it fits `[INT_MIN, INT_MAX]` and a *big int* only when it
//! does not (every result is normalised, so equal ints have equal forms): a word tagged
//! `TAG_BIGINT` whose payload is the address of a [`Cell`] of the VM's [`BigHeap`]. The
//! generic ops of vm/templates/vm_values.h call [`vm_bigint`] when a tagged result overflows
//! or an operand is big, in the interpreters and in traces alike; the specialised int ops of
//! traces never make one (they leave the trace, and the interpreter runs the generic op),
//! and their type guards reject a big int (its tag is not `TAG_INT`), so a trace recorded
//! with a big int uses the generic op there (`Ty::Unknown`).
//!
//! Memory. Cells are reclaimed by a mark-and-sweep collection that runs inside `vm_bigint`
//! before it allocates, once the live cells have doubled since the last one. Its roots are
//! every word that can hold a value while a generic op runs: each frame on the VM's frame
//! stack, whole (the generic ops are never register-cached, so the compiled caller's values
//! are in its frame, and pinned registers hold only tagged ints), the globals and every
//! list's items; a pinned register holding an int wide is boxed by [`vm_box_wide`], which may
//! collect too, once the others are written back. The scan is conservative (a dead slot may
//! keep a cell alive one more round), and a cell is never deallocated before the heap, only
//! reused, so a stale word always names a cell. A collection runs after the op's result is
//! computed, so its operands need not be roots.

use crate::abi::{Frame, PAYLOAD_MASK, TAG_BIGINT, TAG_SHIFT};
#[cfg(test)]
use crate::abi::{INT_MAX, INT_MIN};
use crate::value::Value;
use num_bigint::{BigInt, Sign};
use num_traits::ToPrimitive;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

pub mod arith;

pub use arith::{BigOp, Num, Out};

/// Collections start once this many cells are live: few enough that a loop whose value
/// stays big reuses cells still in the cache (`sum` at 40,000,000, 2**16: 38 ns a big round, 2**12: 27 ns).
const FIRST_COLLECTION: usize = 1 << 12;

/// The most bits an int may have: past it an op raises `OverflowError` instead of going on
/// (a limit of the VM's, like the longest list, that keeps a program squaring a value in a
/// loop from taking the host's memory and time: 2**65536 has 19,729 digits).
pub const MAX_BITS: u64 = 1 << 16;

/// One big int of the heap.
struct Cell {
    value: BigInt,
    live: bool,
}

/// Addresses of every cell that exists, of every heap (and of tracebacks' copies): what
/// lets [`big_of`] read a word that merely claims to be a big int without dereferencing a
/// dangling pointer. Written only when a cell is created or its heap dropped.
static CELLS: Mutex<Option<HashSet<u64>>> = Mutex::new(None);

fn register(addresses: impl IntoIterator<Item = u64>, add: bool) {
    let mut cells = CELLS.lock().unwrap_or_else(|e| e.into_inner());
    let set = cells.get_or_insert_with(HashSet::new);
    for a in addresses {
        if add {
            set.insert(a);
        } else {
            set.remove(&a);
        }
    }
}

/// The big ints of one VM.
#[derive(Default)]
pub struct BigHeap {
    /// Every cell made, by index; boxed, so addresses stay put.
    #[allow(clippy::vec_box)]
    cells: Vec<Box<Cell>>,
    /// Cell address -> index.
    index: HashMap<u64, usize>,
    /// Indexes of free cells.
    free: Vec<usize>,
    live: usize,
    /// Collect before an allocation when `live` reaches this (0: not yet set).
    next_collection: usize,
    collections: u64,
}

impl BigHeap {
    /// Cells in use.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Collections run so far.
    pub fn collections(&self) -> u64 {
        self.collections
    }

    /// Whether the next allocation should collect first.
    pub fn wants_collection(&self) -> bool {
        self.live >= self.next_collection.max(FIRST_COLLECTION)
    }

    /// A value for `x`: tagged when it fits, else a new cell.
    pub fn int(&mut self, x: BigInt) -> Value {
        if let Some(v) = x.to_i64().and_then(Value::int) {
            return v;
        }
        let i = self.cell();
        self.cells[i].value = x;
        Value(self.address(i) | (TAG_BIGINT << TAG_SHIFT))
    }

    /// [`BigHeap::int`] of an i128: a reused cell takes it in the digits it already has, so
    /// that a loop whose value stays big allocates nothing.
    pub fn wide(&mut self, x: i128) -> Value {
        if let Some(v) = i64::try_from(x).ok().and_then(Value::int) {
            return v;
        }
        let i = self.cell();
        let m = x.unsigned_abs();
        let digits = [
            m as u32,
            (m >> 32) as u32,
            (m >> 64) as u32,
            (m >> 96) as u32,
        ];
        let sign = if x < 0 { Sign::Minus } else { Sign::Plus };
        self.cells[i].value.assign_from_slice(sign, &digits);
        Value(self.address(i) | (TAG_BIGINT << TAG_SHIFT))
    }

    /// A live cell for a new value: a free one, or a new one.
    fn cell(&mut self) -> usize {
        self.live += 1;
        match self.free.pop() {
            Some(i) => {
                self.cells[i].live = true;
                i
            }
            None => {
                let cell = Box::new(Cell {
                    value: BigInt::default(),
                    live: true,
                });
                let address = &*cell as *const Cell as u64;
                assert_eq!(
                    address & !PAYLOAD_MASK,
                    0,
                    "a big int's address needs 48 bits"
                );
                register([address], true);
                self.index.insert(address, self.cells.len());
                self.cells.push(cell);
                self.cells.len() - 1
            }
        }
    }

    fn address(&self, i: usize) -> u64 {
        &*self.cells[i] as *const Cell as u64
    }

    /// Frees every cell that no word of `roots` names; the next collection waits until the
    /// live cells have doubled, and at least [`FIRST_COLLECTION`] cells or a quarter of the
    /// root words scanned (so that scanning a large list costs at most 4 words a cell).
    pub fn collect<'r>(&mut self, roots: impl IntoIterator<Item = &'r [u64]>) {
        let mut marked = vec![false; self.cells.len()];
        let mut scanned = 0;
        for words in roots {
            scanned += words.len();
            for &w in words {
                if w >> TAG_SHIFT == TAG_BIGINT {
                    if let Some(&i) = self.index.get(&(w & PAYLOAD_MASK)) {
                        marked[i] = true;
                    }
                }
            }
        }
        for (i, cell) in self.cells.iter_mut().enumerate() {
            if cell.live && !marked[i] {
                cell.live = false;
                // A small value's digits stay for the cell's next value (`wide`).
                if cell.value.bits() > 128 {
                    cell.value = BigInt::default();
                }
                self.free.push(i);
                self.live -= 1;
            }
        }
        self.next_collection = (2 * self.live).max(FIRST_COLLECTION).max(scanned / 4);
        self.collections += 1;
    }
}

impl Drop for BigHeap {
    fn drop(&mut self) {
        register(self.index.keys().copied(), false);
    }
}

/// The number a big-int word names, if it names an existing cell (a clone: only printing,
/// equality and tracebacks read big ints this way, never the ops).
pub fn big_of(v: Value) -> Option<BigInt> {
    if v.tag() != TAG_BIGINT {
        return None;
    }
    let address = v.0 & PAYLOAD_MASK;
    let cells = CELLS.lock().unwrap_or_else(|e| e.into_inner());
    if !cells.as_ref()?.contains(&address) {
        return None;
    }
    // SAFETY: the address is a registered cell, which lives until its heap unregisters it
    // under this lock; a free cell holds 0, never read as a live value by the VM.
    Some(unsafe { (*(address as *const Cell)).value.clone() })
}

/// A copy of big int `v` that outlives every heap (leaked): what a traceback holds, so that
/// it can be shown after its VM is gone. Other values are returned as they are.
pub fn immortal(v: Value) -> Value {
    match big_of(v) {
        Some(x) => {
            let cell: &'static Cell = Box::leak(Box::new(Cell {
                value: x,
                live: true,
            }));
            let address = cell as *const Cell as u64;
            register([address], true);
            Value(address | (TAG_BIGINT << TAG_SHIFT))
        }
        None => v,
    }
}

/// An int operand as an i64, if it is one: tagged, or a big int that fits (an int beyond the
/// tagged range that stays near it, the common case).
///
/// # Safety
/// As [`operand`].
unsafe fn narrow(v: Value) -> Option<i64> {
    if v.tag() == TAG_BIGINT {
        // SAFETY: the caller upholds this function's # Safety contract.
        return unsafe { (*((v.0 & PAYLOAD_MASK) as *const Cell)).value.to_i64() };
    }
    v.as_int()
}

/// `+`, `-`, `*`, `//` and `%` of two i64s, exact in an i128 (Python's floor division and
/// modulo: the remainder takes the divisor's sign); `None` for a zero divisor (the error is
/// the arithmetic's) and other ops. `%` of a product beyond the tagged range by a small int
/// (`calls` at real sizes) no longer divides big ints.
fn wide_op(op: BigOp, x: i64, y: i64) -> Option<i128> {
    let (x, y) = (i128::from(x), i128::from(y));
    let floor = |q: i128| q - i128::from(x % y != 0 && ((x < 0) != (y < 0)));
    match op {
        BigOp::Add => Some(x + y),
        BigOp::Sub => Some(x - y),
        BigOp::Mul => Some(x * y),
        BigOp::FloorDiv if y != 0 => Some(floor(x / y)),
        BigOp::Mod if y != 0 => Some(x - floor(x / y) * y),
        _ => None,
    }
}

/// An operand as the arithmetic sees it.
///
/// # Safety
/// A big-int word must name a live cell (an operand of a running op does).
unsafe fn operand<'a>(v: Value) -> Num<'a> {
    if let Some(i) = v.as_int() {
        return Num::Int(Cow::Owned(BigInt::from(i)));
    }
    if v.tag() == TAG_BIGINT {
        // SAFETY: the caller upholds this function's # Safety contract.
        return Num::Int(Cow::Borrowed(unsafe {
            &(*((v.0 & PAYLOAD_MASK) as *const Cell)).value
        }));
    }
    match v.as_float() {
        Some(f) => Num::Float(f),
        None => Num::Other,
    }
}

/// The slow path of the generic int ops (`vm_bigint` in vm/templates/vm_abi.h): `op` on `a`
/// and `b`, the result in `*r`; returns 0 or a `VM_ERR_*` code.
///
/// # Safety
/// Called only by ops, with the arguments `vm_abi.h` describes (a frame of a running VM,
/// live values, `r` writable).
#[no_mangle]
pub unsafe extern "C" fn vm_bigint(frame: *mut Frame, op: u64, a: u64, b: u64, r: *mut u64) -> i64 {
    let Some(op) = BigOp::from_code(op) else {
        return crate::abi::ERR_INTERNAL;
    };
    // SAFETY: the caller upholds this function's # Safety contract: a and b are live values.
    let (x, y) = unsafe { (narrow(Value(a)), narrow(Value(b))) };
    if let Some(w) = x.zip(y).and_then(|(x, y)| wide_op(op, x, y)) {
        // SAFETY: as above; the frame's VM is running; `r` is writable.
        unsafe { *r = crate::helpers::vm_of(frame).box_wide(w).0 };
        return 0;
    }
    // SAFETY: as above.
    let result = unsafe { arith::eval(op, &operand(Value(a)), &operand(Value(b))) };
    let value = match result {
        Ok(Out::Int(x)) if x.bits() > MAX_BITS => return crate::abi::ERR_OVERFLOW,
        Ok(Out::Int(x)) => {
            // SAFETY: as above; the frame's VM is running.
            let vm = unsafe { crate::helpers::vm_of(frame) };
            vm.box_big(x)
        }
        Ok(Out::Float(f)) => Value::float(f),
        Ok(Out::Bool(b)) => Value::bool(b),
        Err(code) => return code,
    };
    // SAFETY: `r` is writable (the contract).
    unsafe { *r = value.0 };
    0
}

/// A pinned register's wide int written back (`vm_box_wide` in vm/templates/vm_abi.h): `x`
/// boxed, a big int where it leaves the tagged range. May collect first, like [`vm_bigint`]:
/// the lowering writes wide registers back after every other pinned one, so every value of
/// the frame is in it.
///
/// # Safety
/// Called only by `UNPIN` stencils, with a frame of a running VM.
#[no_mangle]
pub unsafe extern "C" fn vm_box_wide(frame: *mut Frame, x: i64) -> u64 {
    if let Some(v) = Value::int(x) {
        return v.0;
    }
    // SAFETY: the caller upholds this function's # Safety contract: the frame's VM is running.
    unsafe { crate::helpers::vm_of(frame).box_wide(i128::from(x)).0 }
}

/// A raw 64-bit stack value written back by an exit (`vm_box_wide_exit` in
/// vm/templates/vm_abi.h, the `DEOPT` of vm/templates/cached/wide_stack.h): `x` boxed, a big
/// int where it leaves the tagged range, *without* collecting. The exit boxes its registers
/// one by one while the others, and the pinned registers, still hold values no frame does
/// (a big int boxed a moment before, a boxed pinned local): a collection then could free
/// what they name. The next helper that collects runs with every value in a frame.
///
/// # Safety
/// Called only by stencils, with a frame of a running VM.
#[no_mangle]
pub unsafe extern "C" fn vm_box_wide_exit(frame: *mut Frame, x: i64) -> u64 {
    if let Some(v) = Value::int(x) {
        return v.0;
    }
    // SAFETY: the caller upholds this function's # Safety contract: the frame's VM is running.
    unsafe {
        crate::helpers::vm_of(frame)
            .box_wide_uncollected(i128::from(x))
            .0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_that_fit_are_tagged_and_others_are_cells() {
        let mut heap = BigHeap::default();
        let small = heap.int(BigInt::from(INT_MAX));
        assert_eq!(small.as_int(), Some(INT_MAX));
        let big = heap.int(BigInt::from(INT_MAX) + 1);
        assert_eq!(big.tag(), TAG_BIGINT);
        assert_eq!(big_of(big), Some(BigInt::from(INT_MAX) + 1));
        assert_eq!(heap.live(), 1);
        assert_eq!(heap.int(BigInt::from(INT_MIN)).as_int(), Some(INT_MIN));
        assert_eq!(heap.int(BigInt::from(INT_MIN) - 1).tag(), TAG_BIGINT);
    }

    #[test]
    fn a_collection_frees_what_no_root_names_and_reuses_it() {
        let mut heap = BigHeap::default();
        let kept = heap.int(BigInt::from(1u64 << 50));
        let dropped = heap.int(BigInt::from(1u64 << 51));
        let roots = [Value::NONE.0, kept.0, Value::int(3).unwrap().0];
        heap.collect([&roots[..]]);
        assert_eq!((heap.live(), heap.collections()), (1, 1));
        assert_eq!(big_of(kept), Some(BigInt::from(1u64 << 50)));
        // The freed cell is reused by the next allocation, in its digits.
        let again = heap.wide(-(1i128 << 100));
        assert_eq!(again.0, dropped.0);
        assert_eq!(big_of(again), Some(-(BigInt::from(1) << 100u32)));
        assert_eq!(heap.wide(-(1 << 47)).as_int(), Some(-(1 << 47)));
        assert_eq!(heap.live(), 2);
    }

    #[test]
    fn the_i64_shortcut_agrees_with_the_big_int_arithmetic() {
        let edges = [
            i64::MIN,
            i64::MIN + 1,
            -(1 << 47) - 1,
            -7,
            -1,
            0,
            1,
            3,
            1000,
            1 << 47,
        ];
        let values = edges.iter().chain(&[i64::MAX, 400_000_000_000_003]);
        for &x in values.clone() {
            for &y in values.clone() {
                for op in [
                    BigOp::Add,
                    BigOp::Sub,
                    BigOp::Mul,
                    BigOp::FloorDiv,
                    BigOp::Mod,
                ] {
                    let num = |v: i64| Num::Int(Cow::Owned(BigInt::from(v)));
                    let want = match arith::eval(op, &num(x), &num(y)) {
                        Ok(Out::Int(r)) => Some(r),
                        _ => None,
                    };
                    let got = wide_op(op, x, y).map(BigInt::from);
                    assert_eq!(got, want, "{op:?} of {x} and {y}");
                }
            }
        }
    }

    #[test]
    fn words_that_name_no_cell_are_not_read() {
        let forged = Value((TAG_BIGINT << TAG_SHIFT) | 0x1000);
        assert_eq!(big_of(forged), None);
        assert_ne!(forged, Value(forged.0 + 8), "unread words are their bits");
        let mut heap = BigHeap::default();
        let (a, b) = (heap.wide(1 << 50), heap.wide(1 << 50));
        assert!(a.0 != b.0 && a == b, "two cells, one number");
        let copy = {
            let mut heap = BigHeap::default();
            let v = heap.int(BigInt::from(1u64 << 60));
            let copy = immortal(v);
            drop(heap);
            copy
        };
        assert_eq!(big_of(copy), Some(BigInt::from(1u64 << 60)));
    }
}
