//! [`ObjectError`]: why an object file could not be turned into stencils, and where.
//!
//! Every error carries the target and template it came from plus whatever is known of the
//! place (stencil, section, offset, relocation type, symbol), so a message always points at
//! the exact relocation or section that was rejected.

use std::fmt;

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectErrorKind {
    /// A relocation type outside the format's table (or one that cannot hold a 64-bit value).
    UnknownRelocation,
    /// A section kind the readers do not know how to place (e.g. `.init_array`, `.eh_frame`).
    UnsupportedSection,
    /// A thread-local variable: stencils have no thread-local storage.
    ThreadLocal,
    /// A stack-protector canary or check: the runtime provides none.
    StackProtector,
    /// The bytes are not a valid object of the expected format.
    Corrupt,
    /// A table or section runs past the end of the file.
    Truncated,
    /// A Mach-O `ARM64_RELOC_ADDEND` without the relocation it modifies.
    DanglingAddend,
    /// A relocation names a symbol that does not exist, or a stencil function is missing.
    MissingSymbol,
    /// An instruction at a relocation does not have the form its relocation type implies.
    UnexpectedInstruction,
    /// A named, configurable limit of the manifest (`[limits]`) was exceeded.
    LimitExceeded,
    /// A construct the stencil model cannot express (e.g. a GOT reference to a symbol
    /// defined in the object).
    Unsupported,
}

impl ObjectErrorKind {
    pub const fn name(self) -> &'static str {
        match self {
            ObjectErrorKind::UnknownRelocation => "unknown relocation",
            ObjectErrorKind::UnsupportedSection => "unsupported section",
            ObjectErrorKind::ThreadLocal => "thread-local storage",
            ObjectErrorKind::StackProtector => "stack protector",
            ObjectErrorKind::Corrupt => "corrupt object",
            ObjectErrorKind::Truncated => "truncated object",
            ObjectErrorKind::DanglingAddend => "dangling ARM64_RELOC_ADDEND",
            ObjectErrorKind::MissingSymbol => "missing symbol",
            ObjectErrorKind::UnexpectedInstruction => "unexpected instruction",
            ObjectErrorKind::Unsupported => "unsupported construct",
            ObjectErrorKind::LimitExceeded => "limit exceeded",
        }
    }
}

/// An object file was rejected. `Display` gives one line: kind, location, message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectError {
    pub kind: ObjectErrorKind,
    pub target: String,
    pub template: String,
    pub stencil: Option<String>,
    pub section: Option<String>,
    pub offset: Option<u64>,
    /// Relocation type by name when known, else its number.
    pub relocation: Option<String>,
    pub symbol: Option<String>,
    /// What exactly was wrong, and a hint how to fix it when there is one.
    pub message: String,
}

impl ObjectError {
    pub(crate) fn new(kind: ObjectErrorKind, message: impl Into<String>) -> ObjectError {
        ObjectError {
            kind,
            target: String::new(),
            template: String::new(),
            stencil: None,
            section: None,
            offset: None,
            relocation: None,
            symbol: None,
            message: message.into(),
        }
    }

    pub(crate) fn corrupt(message: impl Into<String>) -> ObjectError {
        ObjectError::new(ObjectErrorKind::Corrupt, message)
    }

    pub(crate) fn truncated(message: impl Into<String>) -> ObjectError {
        ObjectError::new(ObjectErrorKind::Truncated, message)
    }

    pub(crate) fn stencil(mut self, name: &str) -> ObjectError {
        self.stencil.get_or_insert_with(|| name.to_string());
        self
    }

    pub(crate) fn section(mut self, name: &str) -> ObjectError {
        self.section.get_or_insert_with(|| name.to_string());
        self
    }

    pub(crate) fn offset(mut self, offset: u64) -> ObjectError {
        self.offset.get_or_insert(offset);
        self
    }

    pub(crate) fn relocation(mut self, name: &str) -> ObjectError {
        self.relocation.get_or_insert_with(|| name.to_string());
        self
    }

    pub(crate) fn symbol(mut self, name: &str) -> ObjectError {
        self.symbol.get_or_insert_with(|| name.to_string());
        self
    }

    /// Fills in the target and template (done once, by [`super::read_stencils`]).
    pub(crate) fn origin(mut self, target: &str, template: &str) -> ObjectError {
        self.target = target.to_string();
        self.template = template.to_string();
        self
    }
}

impl fmt::Display for ObjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {}",
            self.target,
            self.template,
            self.kind.name()
        )?;
        if let Some(s) = &self.stencil {
            write!(f, " in stencil `{s}`")?;
        }
        if let Some(s) = &self.section {
            write!(f, " in section `{s}`")?;
        }
        if let Some(o) = self.offset {
            write!(f, " at offset {o:#x}")?;
        }
        if let Some(r) = &self.relocation {
            write!(f, " (relocation {r})")?;
        }
        if let Some(s) = &self.symbol {
            write!(f, " (symbol `{s}`)")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ObjectError {}

impl From<goblin::error::Error> for ObjectError {
    /// goblin reports bad offsets and sizes (mostly truncation) as scroll or "malformed"
    /// errors; they all mean the header tables do not describe a valid object.
    fn from(e: goblin::error::Error) -> ObjectError {
        ObjectError::corrupt(format!("goblin: {e}"))
    }
}
