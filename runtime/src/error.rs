//! The runtime's error type: every bad request and every failure names what was wrong and
//! where (stencil, instance, hole, symbol).

use crate::patch::PatchError;
use cpjit_model::Hole;
use std::fmt;
use std::io;

/// Why a [`Jit`](crate::Jit) could not be created or a trace could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// This process cannot run the stencil set: another architecture, calling convention,
    /// or a register the process's OS reserves that the stencils may use. `who` names the
    /// processes that can.
    HostCannotRun {
        target: String,
        host: String,
        who: String,
    },
    /// The stencil set was generated in another crate format than this runtime's
    /// `cpjit-model` reads (`cpjit_model::format`): its tables may mean something else.
    StencilFormat {
        target: String,
        found: u32,
        expected: u32,
    },
    /// The stencil set itself is malformed (checked once, by [`Jit::new`](crate::Jit::new)).
    InvalidStencil { stencil: String, reason: String },
    /// `push` with a stencil index past the end of the set.
    UnknownStencilIndex { index: usize, count: usize },
    /// `push_named` with a name the set does not have.
    UnknownStencilName { name: String },
    /// `push_named` with the name of a member of cached family `family` that the manifest
    /// pruned (`prune = true` in its `[family.cached]`), so the set does not have it.
    PrunedMember { name: String, family: String },
    /// A request to a cached family's selection ([`Selector`](crate::Selector),
    /// [`TraceBuilder::push_op`](crate::TraceBuilder::push_op),
    /// [`TraceBuilder::bind`](crate::TraceBuilder::bind)) it cannot meet: `reason` says
    /// which op, state or label, and what would.
    Selection { family: String, reason: String },
    /// `finish` of a trace with `jumps` jumps to labels never bound
    /// ([`TraceBuilder::bind`](crate::TraceBuilder::bind)).
    UnboundLabel { jumps: usize },
    /// [`TraceBuilder::place`](crate::TraceBuilder::place) of a label bound already, of
    /// another trace, or whose state a jump fixed to another than the fall-through's.
    Label { label: u32, reason: String },
    /// `push` with the wrong number of operand values.
    OperandCount {
        stencil: String,
        expected: usize,
        got: usize,
    },
    /// `push` with the wrong number of jump targets.
    TargetCount {
        stencil: String,
        expected: usize,
        got: usize,
    },
    /// A target names an instance that the trace does not have.
    MissingInstance {
        stencil: String,
        instance: usize,
        target: usize,
        count: usize,
    },
    /// The caller's symbol table does not know a symbol that an instance needs.
    UnknownSymbol {
        symbol: String,
        stencil: String,
        instance: usize,
    },
    /// The last instance continues to a next instance, and no continuation was given
    /// ([`TraceBuilder::continue_at`](crate::TraceBuilder::continue_at)).
    TraceEndsWithContinue { stencil: String, instance: usize },
    /// `push_shim` with a set that has no entry shim.
    NoShim { target: String },
    /// The entry shim pushed after other instances: it can only be a trace's first
    /// instance (it is entered from native code, never reached from another op).
    ShimNotFirst { stencil: String, instance: usize },
    /// A jump target (or the continuation) names the entry shim, which is never a jump
    /// target: it sets up a native frame.
    ShimAsTarget {
        shim: String,
        stencil: String,
        instance: usize,
    },
    /// A typed entry ([`TraceBuilder::push_shim_as`](crate::TraceBuilder::push_shim_as),
    /// [`Trace::entry_as`](crate::Trace::entry_as)) or `push_shim` (whose
    /// [`EntryFn`](crate::EntryFn) takes two) with a function type of `declared`
    /// parameters, for a shim stencil that takes `expected`.
    EntrySignature {
        stencil: String,
        expected: usize,
        declared: usize,
        signature: &'static str,
    },
    /// [`Trace::entry_fn`](crate::Trace::entry_fn) or
    /// [`Trace::entry_as`](crate::Trace::entry_as) of an instance that is not an entry
    /// shim: only instance 0, when it is the shim, can be called from native code.
    NotAnEntry { instance: usize },
    /// `finish` on a trace without instances.
    EmptyTrace,
    /// The trace's code or data would exceed 4 GiB.
    TraceTooLarge { code_bytes: u64, data_bytes: u64 },
    /// Reserving another arena chunk would exceed
    /// [`JitOptions::reserve_bytes`](crate::JitOptions).
    OutOfMemory {
        requested: usize,
        reserved: usize,
        limit: usize,
    },
    /// The process's heap could not supply memory a trace needs, in proportion to its size
    /// (its instance records, operands and targets in the builder, its offset table, the
    /// buffer its code is staged in): `bytes` were asked for `what`. Nothing is left half
    /// done; the builder or JIT can be used for smaller traces.
    AllocationFailed { what: &'static str, bytes: usize },
    /// The operating system refused to map memory.
    Map(io::Error),
    /// A [`JitOptions`](crate::JitOptions) size outside the range it may take: `option`
    /// names it, `value` is what was given, `min..=max` what is allowed, `why` the reason.
    InvalidOption {
        option: &'static str,
        value: usize,
        min: usize,
        max: usize,
        why: &'static str,
    },
    /// A [`JitOptions`](crate::JitOptions) setting this platform does not offer.
    Unsupported {
        option: &'static str,
        reason: String,
    },
    /// A debugging or profiling output (perf map, jitdump) could not be written.
    Debug {
        what: &'static str,
        path: String,
        source: io::Error,
    },
    /// A hole's value cannot be encoded (out of range, wrong instruction, ...).
    Patch {
        stencil: String,
        instance: usize,
        hole: Hole,
        source: PatchError,
    },
    /// Trace `trace` (0-based, in the order started) of a
    /// [`TraceBatch`](crate::TraceBatch) could not be finished; no trace of the batch was.
    InBatch { trace: usize, source: Box<Error> },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One helper per kind of error keeps each message next to its kind's others; a new
        // variant gets its message in the helper of its kind (until then, its fields).
        self.fmt_set(f)
            .or_else(|| self.fmt_request(f))
            .or_else(|| self.fmt_resource(f))
            .unwrap_or_else(|| write!(f, "{self:?}"))
    }
}

impl Error {
    /// The messages about the stencil set itself (its format, host, stencils and names);
    /// `None` for the other variants.
    fn fmt_set(&self, f: &mut fmt::Formatter<'_>) -> Option<fmt::Result> {
        match self {
            Error::StencilFormat {
                target,
                found,
                expected,
            } => Some(write!(
                f,
                "the stencil set for {target} was generated in crate format {found}, but this \
                 cpjit-runtime reads format {expected}: regenerate the stencil crates with \
                 `cpjit build-stencils` (in the kit, `cargo xtask build-stencils`)"
            )),
            Error::HostCannotRun { target, host, who } => Some(write!(
                f,
                "stencil set for target `{target}` cannot run in this {host} process ({who})"
            )),
            Error::InvalidStencil { stencil, reason } => {
                Some(write!(f, "invalid stencil `{stencil}`: {reason}"))
            }
            Error::UnknownStencilIndex { index, count } => Some(write!(
                f,
                "unknown stencil index {index} (the set has {count} stencils)"
            )),
            Error::UnknownStencilName { name } => Some(write!(f, "unknown stencil `{name}`")),
            Error::PrunedMember { name, family } => Some(write!(
                f,
                "stencil `{name}` is a member of cached family `{family}` that was pruned: \
                 the family's manifest entry says `prune = true` in `[family.cached]`, so only \
                 the members its selection tables pick (and the glue) were compiled, and they \
                 never pick this one; push the op with `TraceBuilder::push_op`, or compile the \
                 member all the same by naming it in `cached.keep` (e.g. `keep = [{{ IN = 0, \
                 OUT = 0 }}]`, with the family's own parameters)"
            )),
            _ => None,
        }
    }

    /// The messages about a trace as requested (its instances, operands, targets, labels
    /// and entry); `None` for the other variants.
    fn fmt_request(&self, f: &mut fmt::Formatter<'_>) -> Option<fmt::Result> {
        match self {
            Error::Selection { family, reason } => {
                Some(write!(f, "selection in cached family `{family}`: {reason}"))
            }
            Error::Label { label, reason } => Some(write!(f, "label {label}: {reason}")),
            Error::UnboundLabel { jumps } => Some(write!(
                f,
                "{jumps} jump(s) go to labels never bound: bind every label a jump uses \
                 (TraceBuilder::bind) before finishing the trace"
            )),
            Error::OperandCount {
                stencil,
                expected,
                got,
            } => Some(write!(
                f,
                "stencil `{stencil}` takes {expected} operand(s), {got} given"
            )),
            Error::TargetCount {
                stencil,
                expected,
                got,
            } => Some(write!(
                f,
                "stencil `{stencil}` takes {expected} jump target(s), {got} given"
            )),
            Error::MissingInstance {
                stencil,
                instance,
                target,
                count,
            } => Some(write!(
                f,
                "instance {instance} (`{stencil}`) jumps to instance {target}, \
                 but the trace has {count} instances"
            )),
            Error::UnknownSymbol {
                symbol,
                stencil,
                instance,
            } => Some(write!(
                f,
                "unknown symbol `{symbol}` needed by instance {instance} (`{stencil}`)"
            )),
            Error::TraceEndsWithContinue { stencil, instance } => Some(write!(
                f,
                "trace ends with an instance that continues: instance {instance} (`{stencil}`) \
                 falls through or has a continue hole, and no continuation was given"
            )),
            Error::NoShim { target } => Some(write!(
                f,
                "the stencil set for `{target}` has no entry shim"
            )),
            Error::ShimNotFirst { stencil, instance } => Some(write!(
                f,
                "the entry shim `{stencil}` pushed as instance {instance}: it can only be \
                 instance 0, the trace's entry from native code"
            )),
            Error::ShimAsTarget {
                shim,
                stencil,
                instance,
            } => Some(write!(
                f,
                "instance {instance} (`{stencil}`) jumps to the entry shim `{shim}` \
                 (instance 0): the shim is only an entry from native code, jump to the \
                 instance after it instead"
            )),
            Error::EntrySignature {
                stencil,
                expected,
                declared,
                signature,
            } => Some(write!(
                f,
                "the entry shim `{stencil}` takes {expected} parameter(s) ([stencils] \
                 parameters of its set), but it was asked for as `{signature}`, which takes \
                 {declared}"
            )),
            Error::NotAnEntry { instance } => Some(write!(
                f,
                "instance {instance} is not an entry shim: only instance 0, when it is the \
                 set's shim, can be called from native code; fix: push the shim first \
                 (`TraceBuilder::push_shim`) and call the trace through the id it returns"
            )),
            Error::EmptyTrace => Some(f.write_str("a trace needs at least one instance")),
            _ => None,
        }
    }

    /// The messages about resources and options, and of errors that wrap another; `None`
    /// for the other variants.
    fn fmt_resource(&self, f: &mut fmt::Formatter<'_>) -> Option<fmt::Result> {
        match self {
            Error::TraceTooLarge {
                code_bytes,
                data_bytes,
            } => Some(write!(
                f,
                "trace too large: {code_bytes} bytes of code, {data_bytes} bytes of data \
                 (at most 4 GiB each)"
            )),
            Error::OutOfMemory {
                requested,
                reserved,
                limit,
            } => Some(write!(
                f,
                "out of JIT memory: a chunk of {requested} more bytes is needed, and \
                 {reserved} of the {limit} bytes allowed (JitOptions::reserve_bytes) are \
                 already reserved"
            )),
            Error::AllocationFailed { what, bytes } => Some(write!(
                f,
                "out of memory: allocating {bytes} bytes for {what} failed (the process may \
                 use no more memory: see `ulimit -v`, RLIMIT_AS or its cgroup's limit); build \
                 smaller traces or raise the limit"
            )),
            Error::Map(e) => Some(write!(f, "mapping JIT memory failed: {e}")),
            Error::InvalidOption {
                option,
                value,
                min,
                max,
                why,
            } => Some(write!(
                f,
                "{option} = {value} is out of range: give a value from {min} to {max} \
                 ({why})"
            )),
            Error::Unsupported { option, reason } => Some(write!(f, "{option}: {reason}")),
            Error::Debug { what, path, source } => Some(write!(f, "{what} `{path}`: {source}")),
            Error::Patch {
                stencil,
                instance,
                hole,
                source,
            } => Some(write!(
                f,
                "instance {instance} (`{stencil}`): {} hole at {}+{:#x} = {}{:+}: {source}",
                hole.kind,
                hole.section.name(),
                hole.offset,
                hole.value,
                hole.addend
            )),
            Error::InBatch { trace, source } => {
                Some(write!(f, "trace {trace} of the batch: {source}"))
            }
            _ => None,
        }
    }
}

/// [`Error::AllocationFailed`] unless `v` can take `additional` more elements: the memory a
/// trace needs is allocated fallibly, so that a trace too large for the process is an error,
/// not an abort. Out of line: callers check the capacity first.
#[cold]
#[inline(never)]
pub(crate) fn try_grow<T>(
    v: &mut Vec<T>,
    additional: usize,
    what: &'static str,
) -> Result<(), Error> {
    v.try_reserve(additional)
        .map_err(|_| Error::AllocationFailed {
            what,
            // What `try_reserve` asks for: at least twice the capacity (amortized growth).
            bytes: v
                .len()
                .saturating_add(additional)
                .max(v.capacity().saturating_mul(2))
                .saturating_mul(size_of::<T>()),
        })
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Map(e) => Some(e),
            Error::Debug { source, .. } => Some(source),
            Error::Patch { source, .. } => Some(source),
            Error::InBatch { source, .. } => Some(source),
            _ => None,
        }
    }
}
