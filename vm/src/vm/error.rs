//! Runtime errors: turning an op's error code into a located, Python-style message.

use super::{FrameInfo, Vm};
use crate::abi::*;
use crate::ops::{self, op};
use crate::value::{type_name, Value};
use std::fmt;

/// A runtime error, with the location of the instruction that raised it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeError {
    pub message: String,
    pub function: String,
    pub line: u32,
    pub col: u32,
    /// The frames live when it was raised ([`Vm::frames`]), outermost first: each at its
    /// call, the raising frame (last) where it raised; a RecursionError is raised before the
    /// callee has a frame. The same in every mode.
    pub traceback: Vec<FrameInfo>,
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}:{} in {}: {}",
            self.line, self.col, self.function, self.message
        )
    }
}

impl std::error::Error for RuntimeError {}

impl Vm {
    /// The running call chain's frames, for an error being raised.
    pub(super) fn traceback(&self) -> Vec<FrameInfo> {
        self.frames()
    }

    /// Turns the frame's pending error into a [`RuntimeError`] (kept in `pending_error`) and
    /// returns `Err(())`.
    pub(super) fn raise<T>(&self, f: usize, frame: *mut Frame) -> Result<T, ()> {
        // SAFETY: live frame.
        let (code, a, b, pc) = unsafe {
            (
                (*frame).error_code,
                Value((*frame).error_a),
                Value((*frame).error_b),
                (*frame).pc,
            )
        };
        if code == ERR_PROPAGATED {
            return Err(());
        }
        let func = &self.program.functions[f];
        let (line, col) = func.lines[pc as usize];
        let bytecode = func.code[pc as usize].op;
        let traceback = self.traceback();
        *self.pending_error.borrow_mut() = Some(RuntimeError {
            message: error_message(code, bytecode, a, b),
            function: func.name.clone(),
            line,
            col,
            traceback,
        });
        Err(())
    }
}

fn operator(bytecode: u32) -> &'static str {
    match bytecode {
        op::ADD => "+",
        op::SUB => "-",
        op::MUL => "*",
        op::DIV => "/",
        op::FLOORDIV => "//",
        op::MOD => "%",
        op::LT => "<",
        op::LE => "<=",
        op::GT => ">",
        op::GE => ">=",
        op::EQ => "==",
        op::NE => "!=",
        _ => "?",
    }
}

/// Whether `v` is an int to Python (bools are).
fn is_int(v: Value) -> bool {
    matches!(v.type_code(), TYPE_INT | TYPE_BIGINT | TYPE_BOOL)
}

/// The message of error `code` raised by `bytecode` with details `a`, `b`.
fn error_message(code: i64, bytecode: u32, a: Value, b: Value) -> String {
    let (ta, tb) = (type_name(a.type_code()), type_name(b.type_code()));
    match code {
        ERR_TYPE => match bytecode {
            op::LT | op::LE | op::GT | op::GE => format!(
                "TypeError: '{}' not supported between instances of '{ta}' and '{tb}'",
                operator(bytecode)
            ),
            op::NEG => format!("TypeError: bad operand type for unary -: '{ta}'"),
            op::FLOAT | op::INT | op::SQRT => format!(
                "TypeError: {}() argument must be a number, not '{ta}'",
                ops::info(bytecode).name.to_ascii_lowercase()
            ),
            op::LEN => format!("TypeError: object of type '{ta}' has no len()"),
            op::GETITEM | op::SETITEM if a.type_code() != TYPE_LIST => {
                format!("TypeError: '{ta}' object is not subscriptable")
            }
            op::GETITEM | op::SETITEM => {
                format!("TypeError: list indices must be integers, not '{tb}'")
            }
            op::APPEND => format!("TypeError: '{ta}' object has no attribute 'append'"),
            op::NEWLIST => format!("TypeError: list size must be an int, not '{ta}'"),
            _ => format!(
                "TypeError: unsupported operand type(s) for {}: '{ta}' and '{tb}'",
                operator(bytecode)
            ),
        },
        ERR_ZERO_DIVISION => "ZeroDivisionError: division by zero".into(),
        ERR_OVERFLOW if bytecode == op::INT => {
            "OverflowError: cannot convert float infinity to integer".into()
        }
        ERR_OVERFLOW if bytecode == op::DIV && is_int(a) && is_int(b) => {
            "OverflowError: integer division result too large for a float".into()
        }
        ERR_OVERFLOW
            if matches!(
                bytecode,
                op::ADD | op::SUB | op::MUL | op::FLOORDIV | op::MOD | op::NEG
            ) && is_int(a)
                && is_int(b) =>
        {
            format!(
                "OverflowError: int result of more than {} bits (the VM's limit)",
                crate::bigint::MAX_BITS
            )
        }
        ERR_OVERFLOW => "OverflowError: int too large to convert to float".into(),
        ERR_INDEX => "IndexError: list index out of range".into(),
        ERR_VALUE => match bytecode {
            op::INT => "ValueError: cannot convert float NaN to integer".into(),
            op::SQRT => "ValueError: math domain error".into(),
            _ => "ValueError: list size out of range".into(),
        },
        _ => format!(
            "InternalError: op {} cannot run here",
            ops::info(a.0 as u32).name
        ),
    }
}
