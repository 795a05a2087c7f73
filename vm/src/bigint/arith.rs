//! The big-int slow path's arithmetic, on plain numbers (no heap, no VM): Python's results for
//! every int operation the VM has, with a big int or a tagged int whose result left the
//! tagged range, and the mixed int/float operations where the int is big. Comparisons with
//! floats are exact, as Python's; conversions to float are correctly rounded and raise
//! `OverflowError` past the largest float, as Python's.

use crate::abi::{ERR_OVERFLOW, ERR_TYPE, ERR_ZERO_DIVISION};
use num_bigint::{BigInt, Sign};
use num_integer::Integer;
use num_traits::{FromPrimitive, ToPrimitive, Zero};
use std::borrow::Cow;
use std::cmp::Ordering;

/// An operand: an int (tagged or big) or a float; anything else is `Other`.
#[derive(Clone, Debug)]
pub enum Num<'a> {
    Int(Cow<'a, BigInt>),
    Float(f64),
    Other,
}

/// A result.
#[derive(Clone, Debug, PartialEq)]
pub enum Out {
    Int(BigInt),
    Float(f64),
    Bool(bool),
}

/// The operations (`VM_BIG_*` in vm/templates/vm_abi.h, in that order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BigOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    Neg,
    ToFloat,
    ToInt,
}

impl BigOp {
    /// How many operations there are.
    pub const COUNT: usize = Self::ALL.len();

    const ALL: [BigOp; 15] = [
        BigOp::Add,
        BigOp::Sub,
        BigOp::Mul,
        BigOp::Div,
        BigOp::FloorDiv,
        BigOp::Mod,
        BigOp::Lt,
        BigOp::Le,
        BigOp::Gt,
        BigOp::Ge,
        BigOp::Eq,
        BigOp::Ne,
        BigOp::Neg,
        BigOp::ToFloat,
        BigOp::ToInt,
    ];

    /// The operation a `VM_BIG_*` code names.
    pub fn from_code(code: u64) -> Option<BigOp> {
        Self::ALL.get(usize::try_from(code).ok()?).copied()
    }
}

/// `float(x)` for an int: correctly rounded (num-bigint rounds to nearest, ties to even), or
/// `OverflowError` where Python raises "int too large to convert to float".
pub fn int_to_float(x: &BigInt) -> Result<f64, i64> {
    match x.to_f64() {
        Some(f) if f.is_finite() => Ok(f),
        _ => Err(ERR_OVERFLOW),
    }
}

/// Python's `a / b` on ints: the correctly rounded quotient (to nearest, ties to even; a
/// subnormal quotient may be rounded twice), `ZeroDivisionError`, or `OverflowError`
/// ("integer division result too large for a float").
pub fn true_div(a: &BigInt, b: &BigInt) -> Result<f64, i64> {
    if b.is_zero() {
        return Err(ERR_ZERO_DIVISION);
    }
    let negative = (a.sign() == Sign::Minus) != (b.sign() == Sign::Minus);
    let (na, nb) = (a.magnitude(), b.magnitude());
    let magnitude = if na.bits() <= 53 && nb.bits() <= 53 {
        // Both exact as floats: IEEE division rounds the exact quotient once.
        na.to_f64().unwrap_or(0.0) / nb.to_f64().unwrap_or(1.0)
    } else if na.is_zero() {
        0.0
    } else {
        // An integer quotient of 55 or 56 bits, its last bit set when the division was
        // inexact (a sticky bit below the rounding bit), rounds to 53 bits exactly as the
        // exact quotient does; the power of two is applied after.
        let shift = 55 + nb.bits() as i64 - na.bits() as i64;
        let (num, den) = if shift >= 0 {
            (na << shift as u64, Cow::Borrowed(nb))
        } else {
            (na.clone(), Cow::Owned(nb << (-shift) as u64))
        };
        let (q, r) = num.div_rem(&den);
        let q = q.to_u64().unwrap_or(u64::MAX) | u64::from(!r.is_zero());
        scale(q as f64, -shift)
    };
    if magnitude.is_infinite() {
        return Err(ERR_OVERFLOW);
    }
    Ok(if negative { -magnitude } else { magnitude })
}

/// `x * 2**e`, in steps that cannot overflow or underflow on the way.
fn scale(mut x: f64, mut e: i64) -> f64 {
    while e > 1000 {
        x *= 2f64.powi(1000);
        e -= 1000;
    }
    while e < -1000 {
        x *= 2f64.powi(-1000);
        e += 1000;
    }
    x * 2f64.powi(e as i32)
}

/// How int `x` compares with float `y` exactly (`None`: `y` is NaN).
pub fn compare_int_float(x: &BigInt, y: f64) -> Option<Ordering> {
    if y.is_nan() {
        return None;
    }
    if y.is_infinite() {
        return Some(if y > 0.0 {
            Ordering::Less
        } else {
            Ordering::Greater
        });
    }
    let floor = y.floor();
    // `floor` is an integral finite float, so exact as a BigInt.
    let whole = BigInt::from_f64(floor)?;
    Some(match x.cmp(&whole) {
        Ordering::Equal if floor != y => Ordering::Less,
        o => o,
    })
}

/// Python's float floor division and modulo on the floats of a mixed operation.
fn float_arith(op: BigOp, x: f64, y: f64) -> Result<Out, i64> {
    Ok(Out::Float(match op {
        BigOp::Add => x + y,
        BigOp::Sub => x - y,
        BigOp::Mul => x * y,
        BigOp::Div | BigOp::FloorDiv | BigOp::Mod if y == 0.0 => return Err(ERR_ZERO_DIVISION),
        BigOp::Div => x / y,
        BigOp::FloorDiv => crate::helpers::vm_float_floordiv(x, y),
        BigOp::Mod => crate::helpers::vm_float_mod(x, y),
        _ => return Err(ERR_TYPE),
    }))
}

fn ordering_holds(op: BigOp, o: Option<Ordering>) -> bool {
    match (op, o) {
        (BigOp::Ne, None) => true,
        (_, None) => false,
        (BigOp::Lt, Some(o)) => o == Ordering::Less,
        (BigOp::Le, Some(o)) => o != Ordering::Greater,
        (BigOp::Gt, Some(o)) => o == Ordering::Greater,
        (BigOp::Ge, Some(o)) => o != Ordering::Less,
        (BigOp::Eq, Some(o)) => o == Ordering::Equal,
        (BigOp::Ne, Some(o)) => o != Ordering::Equal,
        _ => false,
    }
}

/// A comparison: exact between numbers; `==` and `!=` with a value that is no number are
/// false and true (identity: an int is never that value), the orderings a `TypeError`.
fn compare(op: BigOp, a: &Num, b: &Num) -> Result<Out, i64> {
    let o = match (a, b) {
        (Num::Int(x), Num::Int(y)) => Some(x.as_ref().cmp(y.as_ref())),
        (Num::Int(x), Num::Float(y)) => compare_int_float(x, *y),
        (Num::Float(x), Num::Int(y)) => compare_int_float(y, *x).map(Ordering::reverse),
        (Num::Float(x), Num::Float(y)) => x.partial_cmp(y),
        _ => match op {
            BigOp::Eq => return Ok(Out::Bool(false)),
            BigOp::Ne => return Ok(Out::Bool(true)),
            _ => return Err(ERR_TYPE),
        },
    };
    Ok(Out::Bool(ordering_holds(op, o)))
}

/// The float of a number (an int converted, `OverflowError` if too large).
fn as_float(n: &Num) -> Result<f64, i64> {
    match n {
        Num::Int(x) => int_to_float(x),
        Num::Float(f) => Ok(*f),
        Num::Other => Err(ERR_TYPE),
    }
}

/// `op` on `a` and `b` (`b` unused by the unary ops) with Python's result, or the
/// `VM_ERR_*` code Python's error maps to.
pub fn eval(op: BigOp, a: &Num, b: &Num) -> Result<Out, i64> {
    match op {
        BigOp::Lt | BigOp::Le | BigOp::Gt | BigOp::Ge | BigOp::Eq | BigOp::Ne => {
            return compare(op, a, b)
        }
        BigOp::Neg => {
            return match a {
                Num::Int(x) => Ok(Out::Int(-x.as_ref())),
                Num::Float(f) => Ok(Out::Float(-f)),
                Num::Other => Err(ERR_TYPE),
            }
        }
        BigOp::ToFloat => return as_float(a).map(Out::Float),
        BigOp::ToInt => {
            return match a {
                Num::Int(x) => Ok(Out::Int(x.clone().into_owned())),
                Num::Float(f) => BigInt::from_f64(f.trunc())
                    .map(Out::Int)
                    .ok_or(ERR_OVERFLOW),
                Num::Other => Err(ERR_TYPE),
            }
        }
        _ => {}
    }
    let (x, y) = match (a, b) {
        (Num::Int(x), Num::Int(y)) => (x.as_ref(), y.as_ref()),
        _ => return float_arith(op, as_float(a)?, as_float(b)?),
    };
    Ok(match op {
        BigOp::Add => Out::Int(x + y),
        BigOp::Sub => Out::Int(x - y),
        BigOp::Mul => Out::Int(x * y),
        BigOp::Div => Out::Float(true_div(x, y)?),
        BigOp::FloorDiv | BigOp::Mod if y.is_zero() => return Err(ERR_ZERO_DIVISION),
        BigOp::FloorDiv => Out::Int(x.div_floor(y)),
        BigOp::Mod => Out::Int(x.mod_floor(y)),
        _ => return Err(ERR_TYPE),
    })
}

#[cfg(test)]
#[path = "arith_tests.rs"]
mod tests;
