//! The toolchain's error type: one message that names what was wrong and where (file, key,
//! target, template, stencil, instruction, symbol). Errors from independent jobs are
//! collected and reported together rather than stopping at the first.

use std::fmt;

/// A toolchain failure with a complete, human-readable message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(msg: impl Into<String>) -> Error {
        Error(msg.into())
    }

    /// Several errors as one, one per line, in the given order.
    pub fn many(errors: Vec<Error>) -> Error {
        Error(
            errors
                .into_iter()
                .map(|e| e.0)
                .collect::<Vec<_>>()
                .join("\n"),
        )
    }

    /// Prefixes the message with a context (`"<triple>: vm/add.c"`).
    pub fn context(self, ctx: impl fmt::Display) -> Error {
        Error(format!("{ctx}: {}", self.0))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// `return Err(Error(format!(...)))`.
#[macro_export]
macro_rules! bail {
    ($($arg:tt)*) => { return Err($crate::error::Error(format!($($arg)*))) };
}
