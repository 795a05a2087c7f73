//! Splitting a batch's bitcode into one module per unit that is the module the unit alone
//! gives (issue 43): the batch is compiled by clang's front end only
//! (`-disable-llvm-passes`), so no optimisation sees two units at once (an inliner that
//! counts a shared helper's callers over the whole batch, constants merged across units);
//! each unit's part is then made what clang's front end gives for the unit alone, and
//! optimised on its own by the same `clang -cc1` job a unit alone runs (`cc1::Optimizer`).
//!
//! What one translation unit shares between its units, and how each part undoes it:
//!
//! - **The entry's name.** The batch renames each unit's entry with a macro, so its
//!   `__func__`, `__FUNCTION__` and `__PRETTY_FUNCTION__` strings name the alias: the part's
//!   strings that contain the alias get the entry's name back (and their length).
//! - **Creation order.** Clang creates a module's globals and functions in the order it
//!   meets them, and a string literal, a header's static table or inline helper or an
//!   external declaration is created once per translation unit: by the first unit of the
//!   batch that uses it. A marker defined before each unit's `#include`
//!   ([`marker_source`]) tells which definitions a unit found already created; each is
//!   moved to where the unit itself first uses it, among the definitions the unit created
//!   (whose order is kept), which is where clang creates it when compiling the unit alone.
//! - **Everything else** (other units' entries and what only they use) is deleted.

use crate::batch_reach::Graph;
use crate::error::{Error, Result};
use crate::llvm;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use std::collections::{HashMap, HashSet};

/// The name unit `index` of a batch gives its entry function `entry`.
pub fn entry_alias(entry: &str, index: usize) -> String {
    format!("{entry}__cpjit_batch_{index}")
}

/// The marker variable and function defined before unit `index` (see [`marker_source`]).
fn markers(index: usize) -> (String, String) {
    (
        format!("__cpjit_batch_data_{index}"),
        format!("__cpjit_batch_code_{index}"),
    )
}

/// C text defining unit `index`'s markers: an external variable and function, which clang
/// emits (creates) where they are defined, so everything created before them in the
/// batch's module was created by an earlier unit. Declared first, so that no warning
/// about a definition without a prototype fires.
pub fn marker_source(index: usize) -> String {
    let (data, code) = markers(index);
    format!("extern char {data};\nchar {data} = 0;\nvoid {code}(void);\nvoid {code}(void) {{}}\n")
}

/// Splits a batch's front-end bitcode into one module per unit (the bitcode of each, in
/// unit order): unit `i` keeps its entry, named `entry` again, and what it reaches, in the
/// order and with the names the unit alone gives (see the module documentation);
/// `templates` (the units' names) become the modules' names.
///
/// One pass over the batch: its bitcode is parsed and printed once, and what each unit
/// reaches is read once as a graph (`batch_reach`); each part is then the printed lines of
/// what it keeps, so a part costs what it keeps, not the whole batch.
///
/// `require_entries`: a unit without its entry is an error (a family member's template
/// included once only). `right_to_left`: whether clang evaluates call arguments right to
/// left for the target (the Microsoft ABI's order, `*-windows-msvc`), the order it creates
/// what they name in. `stencil`: which functions are stencils; one defined in the batch
/// under any name but a unit's alias is an error (a unit that defines a stencil the batch
/// did not rename apart: alone, only that unit would have it).
pub fn split(
    bitcode: &[u8],
    templates: &[String],
    entry: &str,
    right_to_left: bool,
    require_entries: bool,
    stencil: &dyn Fn(&str) -> bool,
) -> Result<Vec<Vec<u8>>> {
    let context = Context::create();
    let aliases: Vec<String> = (0..templates.len())
        .map(|i| entry_alias(entry, i))
        .collect();
    let (graph, text) = {
        let module = llvm::parse_bitcode(&context, bitcode, "batch")?;
        let never_roots: HashSet<String> = (0..templates.len())
            .flat_map(|i| {
                let (data, code) = markers(i);
                [data, code]
            })
            .chain(aliases.iter().cloned())
            .chain([ANNOTATIONS.to_string()])
            .collect();
        // SAFETY: the module is alive and only this thread uses it.
        let graph = unsafe { Graph::of(module.as_mut_ptr(), &never_roots) };
        (graph, module.print_to_string().to_string())
    };
    let segments = segments(&text);
    let stray = segments.iter().find_map(|(name, lines)| {
        let name = name.as_deref()?;
        (lines.starts_with("define ") && stencil(name) && !aliases.iter().any(|a| a == name))
            .then_some(name)
    });
    if let Some(name) = stray {
        return Err(Error(format!(
            "error: the batch defines the stencil `{name}`, which it did not rename apart as \
             `{entry}` (a unit that defines another stencil than `{entry}`): compiled alone"
        )));
    }
    // The batch's annotations read once (every unit's entry has its own): each part's
    // are picked from them.
    let all_annotations = segments
        .iter()
        .find(|(n, _)| n.as_deref() == Some(ANNOTATIONS))
        .and_then(|(_, line)| Annotations::read(line));
    let mut out = Vec::with_capacity(templates.len());
    for (i, template) in templates.iter().enumerate() {
        let alias = &aliases[i];
        let own = graph.node(alias);
        if own.is_some() && graph.has_function(entry) {
            return Err(Error(format!(
                "{template}: cannot be batched: `{entry}` is still defined after the \
                 batch renamed it (a unit that names it through another macro?)"
            )));
        }
        if own.is_none() && require_entries {
            return Err(Error(format!(
                "{template}: defines no `{entry}` where the batch includes it (an include \
                 guard or `#pragma once` in the template?)"
            )));
        }
        let mut kept: HashSet<String> = graph.reach(own).into_iter().map(String::from).collect();
        if let Some(other) = aliases.iter().find(|a| *a != alias && kept.contains(*a)) {
            return Err(Error(format!(
                "error: {template}: its part of the batch reaches `{other}`, another unit's \
                 `{entry}`: compiled alone"
            )));
        }
        // The annotations of what the part keeps (a cached op's state), and their strings.
        let annotations = all_annotations.as_ref().and_then(|a| a.own(&kept));
        if let Some((_, names)) = &annotations {
            kept.extend(names.iter().cloned());
        }
        let mut part = String::new();
        for (name, lines) in &segments {
            if name.as_deref() == Some(ANNOTATIONS) {
                if let Some((line, _)) = &annotations {
                    part.push_str(line);
                    part.push('\n');
                }
            } else if name.as_ref().is_none_or(|n| kept.contains(n.as_str())) {
                part.push_str(lines);
                part.push('\n');
            }
        }
        if own.is_some() {
            part = replace_name(&part, alias, entry);
        }
        let part = rename_in_strings(&part, alias, entry);
        let (data, code) = markers(i);
        let foreign: HashSet<String> = kept
            .iter()
            .filter(|n| graph.created_before(n, &data, &code))
            .map(|n| n.to_string())
            .collect();
        let part = reorder(&part, &foreign, right_to_left);
        let buffer = MemoryBuffer::create_from_memory_range_copy(part.as_bytes(), template);
        let module = context.create_module_from_ir(buffer).map_err(|e| {
            Error(format!(
                "{template}: batch split: the unit's module does not parse back: {}",
                e.to_string()
            ))
        })?;
        module.set_name(template);
        module.set_source_file_name(template);
        out.push(module.write_bitcode_to_memory().as_slice().to_vec());
    }
    Ok(out)
}

/// The global listing every `annotate` attribute's function, string and place (a cached
/// op's state is one): it names every unit's entry, so each part keeps only its own.
const ANNOTATIONS: &str = "llvm.global.annotations";

/// The [`ANNOTATIONS`] global's line cut into its entries, each with the names it refers
/// to (the annotated value first), so that each part picks its own without reading the
/// whole line again.
struct Annotations<'a> {
    /// The line up to its entry count, and from after the count to the first entry.
    head: (&'a str, &'a str),
    /// What follows the last entry.
    tail: &'a str,
    entries: Vec<(&'a str, Vec<String>)>,
}

impl<'a> Annotations<'a> {
    const ENTRY: &'static str = "{ ptr, ptr, ptr, i32, ptr } {";

    /// `None` if the line has an unknown shape (then no part has annotations, which its
    /// checks report).
    fn read(line: &'a str) -> Option<Self> {
        let first = line.find(Self::ENTRY)?;
        let end = line.rfind("}]")? + 1;
        let head = &line[..first];
        let count = head.find(" global [")? + " global [".len();
        let digits = head[count..].find(' ')? + count;
        let entries = line[first..end]
            .split(Self::ENTRY)
            .map(|e| e.trim().trim_end_matches(','))
            .filter(|e| !e.is_empty())
            .map(|e| (e, references(e)))
            .collect();
        Some(Annotations {
            head: (&head[..count], &head[digits..]),
            tail: &line[end..],
            entries,
        })
    }

    /// The line with only the entries that annotate a value in `kept`, and the names those
    /// entries refer to (their strings); `None` if none is left.
    fn own(&self, kept: &HashSet<String>) -> Option<(String, Vec<String>)> {
        let entries: Vec<&(&str, Vec<String>)> = self
            .entries
            .iter()
            .filter(|(_, refs)| refs.first().is_some_and(|f| kept.contains(f)))
            .collect();
        if entries.is_empty() {
            return None;
        }
        let names = entries
            .iter()
            .flat_map(|(_, r)| r.iter().cloned())
            .collect();
        let body: Vec<String> = entries
            .iter()
            .map(|(e, _)| format!("{} {e}", Self::ENTRY))
            .collect();
        let line = format!(
            "{}{}{}{}{}",
            self.head.0,
            entries.len(),
            self.head.1,
            body.join(", "),
            self.tail
        );
        Some((line, names))
    }
}

/// A function definition's whole text: its `define` line `first` and the lines after it
/// up to and including its closing `}` (taken from `lines`).
fn define_block<'a>(first: &str, lines: &mut impl Iterator<Item = &'a str>) -> String {
    let mut block = first.to_string();
    for body in lines {
        block.push('\n');
        block.push_str(body);
        if body == "}" {
            break;
        }
    }
    block
}

/// A module's printed IR cut into segments: a global's line, a function's definition
/// (`define` to its closing `}`) or declaration, each with the value's name ([`raw_name`]);
/// any other line (header, comdat, attributes, metadata) with none, which every part keeps
/// (the parser drops attribute groups and metadata nothing uses).
fn segments(text: &str) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some(name) = global_name(line) {
            out.push((Some(raw_name(&name)), line.to_string()));
        } else if line.starts_with("define ") {
            let name = function_name(line).map(|n| raw_name(&n));
            let block = define_block(line, &mut lines);
            out.push((name, block));
        } else if line.starts_with("declare ") {
            out.push((function_name(line).map(|n| raw_name(&n)), line.to_string()));
        } else {
            out.push((None, line.to_string()));
        }
    }
    out
}

/// `text` (a module's IR) with `alias` replaced by `entry` in every global whose initializer
/// is a string holding it (`__func__` and its kin), its array length adjusted, and in the
/// names of those globals.
pub fn rename_in_strings(text: &str, alias: &str, entry: &str) -> String {
    let mut renames: Vec<(String, String, usize, usize)> = Vec::new();
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines() {
        let Some(name) = global_name(line) else {
            lines.push(line.to_string());
            continue;
        };
        let Some(start) = line.find(" c\"") else {
            lines.push(line.to_string());
            continue;
        };
        let body_end = line[start + 3..].find('"').map(|e| start + 3 + e);
        let Some(end) = body_end else {
            lines.push(line.to_string());
            continue;
        };
        let count = line[start + 3..end].matches(alias).count();
        if count == 0 {
            lines.push(line.to_string());
            continue;
        }
        let shrink = (alias.len() - entry.len().min(alias.len())) * count;
        let Some((old_len, new_line)) = resize_array(line, shrink) else {
            lines.push(line.to_string());
            continue;
        };
        // The length's digits may be fewer now: find the string again.
        let start = new_line.find(" c\"").unwrap_or(new_line.len());
        let body = new_line[start..].replace(alias, entry);
        let mut new_line = format!("{}{body}", &new_line[..start]);
        // A plain name (`__func__.<alias>`) is renamed as the unit alone names it; a quoted
        // one (MSVC's `??_C@...`, which encodes a checksum) keeps its name.
        let new_name = if name.starts_with('"') {
            name.clone()
        } else {
            name.replace(alias, entry)
        };
        new_line = new_line.replacen(&format!("@{name} "), &format!("@{new_name} "), 1);
        renames.push((name, new_name, old_len, old_len - shrink));
        lines.push(new_line);
    }
    let mut out = lines.join("\n");
    out.push('\n');
    for (old, new, old_len, new_len) in renames {
        out = out.replace(
            &format!("[{old_len} x i8], ptr @{old}"),
            &format!("[{new_len} x i8], ptr @{new}"),
        );
        if old != new {
            out = replace_name(&out, &old, &new);
        }
    }
    out
}

/// `line` (`@g = ... [N x i8] c"..."`) with its first array length made `N - shrink`, and N.
fn resize_array(line: &str, shrink: usize) -> Option<(usize, String)> {
    let open = line.find(" [")? + 2;
    let x = line[open..].find(" x i8]")? + open;
    let old: usize = line[open..x].parse().ok()?;
    let new = old.checked_sub(shrink)?;
    Some((old, format!("{}{new}{}", &line[..open], &line[x..])))
}

/// `text` with every reference `@old` (a whole name) replaced by `@new`.
fn replace_name(text: &str, old: &str, new: &str) -> String {
    let pattern = format!("@{old}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&pattern) {
        let after = &rest[at + pattern.len()..];
        out.push_str(&rest[..at]);
        if after.starts_with(is_name_char) {
            out.push_str(&pattern);
        } else {
            out.push('@');
            out.push_str(new);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '$' | '.' | '_')
}

/// The length of the name token at the start of `s` (what follows an `@`): a quoted name
/// with its quotes, or a plain one.
fn name_len(s: &str) -> usize {
    match s.strip_prefix('"') {
        Some(rest) => rest.find('"').map_or(0, |e| e + 2),
        None => s.find(|c: char| !is_name_char(c)).unwrap_or(s.len()),
    }
}

/// A name token without its quotes (how LLVM names the value).
fn unquoted(token: &str) -> String {
    token.trim_matches('"').to_string()
}

/// The value's name a name token spells: a quoted token without its quotes and with its
/// `\XX` escapes (LLVM's for `"`, `\` and unprintable bytes) decoded.
fn raw_name(token: &str) -> String {
    let Some(inner) = token.strip_prefix('"').and_then(|t| t.strip_suffix('"')) else {
        return token.to_string();
    };
    let mut bytes = Vec::with_capacity(inner.len());
    let mut rest = inner.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        let hex = tail.get(..2).and_then(|h| std::str::from_utf8(h).ok());
        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(byte) if b == b'\\' => {
                bytes.push(byte);
                rest = &tail[2..];
            }
            _ => {
                bytes.push(b);
                rest = tail;
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The name token a global variable's definition line defines (`@name = ...`).
fn global_name(line: &str) -> Option<String> {
    let rest = line.strip_prefix('@')?;
    let end = name_len(rest);
    (end > 0 && rest[end..].starts_with(" =")).then(|| rest[..end].to_string())
}

/// The name token a `define` line defines.
fn function_name(line: &str) -> Option<String> {
    let at = line.find(" @")? + 2;
    let end = name_len(&line[at..]);
    (end > 0).then(|| line[at..at + end].to_string())
}

/// Every `@name` in `text`, in order, unquoted.
fn references(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('@') {
        let after = &rest[at + 1..];
        let end = name_len(after);
        if end > 0 {
            out.push(unquoted(&after[..end]));
        }
        rest = &after[end..];
    }
    out
}

/// The names `line` (an instruction) refers to, in the order clang met them: a call's
/// callee, then its arguments, in reverse when they are evaluated right to left.
fn line_references(line: &str, right_to_left: bool) -> Vec<String> {
    let mut refs = references(line);
    if right_to_left && line.contains("call ") && refs.len() > 1 {
        let callee = line.find('@').is_some_and(|at| {
            let rest = &line[at + 1..];
            rest[name_len(rest)..].starts_with('(')
        });
        let first_argument = usize::from(callee);
        refs[first_argument..].reverse();
    }
    refs
}

/// A module's IR with the definitions created by earlier units of the batch (`foreign`)
/// moved to where the unit first uses them (see the module documentation): globals among
/// globals, functions among functions; everything else in place.
pub fn reorder(text: &str, foreign: &HashSet<String>, right_to_left: bool) -> String {
    // The module's lines as items: a global's line, a function's block, or any other line.
    enum Item {
        Global(String, String),
        Function(String, String),
        Other(String),
    }
    let mut items = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some(name) = global_name(line) {
            items.push(Item::Global(unquoted(&name), line.to_string()));
        } else if line.starts_with("define ") {
            let name = unquoted(&function_name(line).unwrap_or_default());
            let block = define_block(line, &mut lines);
            items.push(Item::Function(name, block));
        } else {
            items.push(Item::Other(line.to_string()));
        }
    }
    // First uses: the unit's own functions in order, then the others in order of first use.
    let functions: Vec<(&String, &String)> = items
        .iter()
        .filter_map(|i| match i {
            Item::Function(n, b) => Some((n, b)),
            _ => None,
        })
        .collect();
    let body_of: HashMap<&str, &str> = functions
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_str()))
        .collect();
    let mut rank: HashMap<String, usize> = HashMap::new();
    let mut queue: Vec<&str> = functions
        .iter()
        .filter(|(n, _)| !foreign.contains(*n))
        .map(|(n, _)| n.as_str())
        .collect();
    let mut walked: HashSet<&str> = queue.iter().copied().collect();
    let mut next = 0;
    while next < queue.len() {
        let len = rank.len();
        rank.entry(queue[next].to_string()).or_insert(len);
        let body = body_of[queue[next]];
        // The define line names the function itself: skip it.
        let body = body.split_once('\n').map_or("", |(_, b)| b);
        for name in body.lines().flat_map(|l| line_references(l, right_to_left)) {
            let len = rank.len();
            rank.entry(name.clone()).or_insert(len);
            if let Some((key, _)) = body_of.get_key_value(name.as_str()) {
                if walked.insert(key) {
                    queue.push(key);
                }
            }
        }
        next += 1;
    }
    let merge = |list: Vec<(String, String)>| -> Vec<String> {
        let (mut theirs, own): (Vec<_>, Vec<_>) =
            list.into_iter().partition(|(n, _)| foreign.contains(n));
        let rank_of = |n: &str| rank.get(n).copied().unwrap_or(usize::MAX);
        theirs.sort_by_key(|(n, _)| rank_of(n));
        let mut theirs = theirs.into_iter().peekable();
        let mut out = Vec::new();
        for (name, text) in own {
            let r = rank_of(&name);
            while let Some((_, t)) = theirs.next_if(|(n, _)| rank_of(n) < r) {
                out.push(t);
            }
            out.push(text);
        }
        out.extend(theirs.map(|(_, t)| t));
        out
    };
    let mut globals = Vec::new();
    let mut funcs = Vec::new();
    for item in &items {
        match item {
            Item::Global(n, t) => globals.push((n.clone(), t.clone())),
            Item::Function(n, t) => funcs.push((n.clone(), t.clone())),
            Item::Other(_) => {}
        }
    }
    let mut globals = merge(globals).into_iter();
    let mut funcs = merge(funcs).into_iter();
    let mut out = String::with_capacity(text.len());
    for item in items {
        let line = match item {
            Item::Global(..) => globals.next().unwrap_or_default(),
            Item::Function(..) => funcs.next().unwrap_or_default(),
            Item::Other(t) => t,
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `files` (name, text) written to a temporary directory, batched with entry `E`,
    /// compiled by clang at -O0 and split back into one module per file.
    pub(crate) fn split_at_o0(files: &[(&str, &str)]) -> Vec<Vec<u8>> {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let units: Vec<std::path::PathBuf> = files.iter().map(|(n, _)| n.into()).collect();
        let text = crate::batch::source(dir.path(), &units, "E");
        let bitcode = crate::clang::compile_text_within(
            &["-O0".into()],
            "batch",
            text.as_bytes(),
            None,
            std::time::Duration::from_secs(120),
        )
        .unwrap()
        .bitcode;
        let templates: Vec<String> = files.iter().map(|(n, _)| n.to_string()).collect();
        split(&bitcode, &templates, "E", false, true, &|n| n == "E").unwrap()
    }

    /// The sorted names of `bitcode`'s functions, and with `globals` of its globals too.
    pub(crate) fn defined_names(bitcode: &[u8], globals: bool) -> Vec<String> {
        let context = Context::create();
        let m = llvm::parse_bitcode(&context, bitcode, "t").unwrap();
        let mut names: Vec<String> = m
            .get_functions()
            .map(|f| f.get_name().to_string_lossy().into_owned())
            .collect();
        if globals {
            names.extend(
                m.get_globals()
                    .map(|g| g.get_name().to_string_lossy().into_owned()),
            );
        }
        names.sort();
        names
    }

    #[test]
    fn func_strings_get_the_entry_name_back_with_their_length() {
        let ir = "@__func__.E__cpjit_batch_3 = private unnamed_addr constant [17 x i8] \
                  c\"E__cpjit_batch_3\\00\", align 1\n\
                  @.str = private unnamed_addr constant [3 x i8] c\"ab\\00\", align 1\n\
                  define i32 @E() {\n  %1 = getelementptr [17 x i8], ptr @__func__.E__cpjit_batch_3, i64 0, i64 1\n  ret i32 0\n}\n";
        let out = rename_in_strings(ir, "E__cpjit_batch_3", "E");
        assert!(
            out.contains("@__func__.E = private unnamed_addr constant [2 x i8] c\"E\\00\""),
            "{out}"
        );
        assert!(
            out.contains("getelementptr [2 x i8], ptr @__func__.E, i64"),
            "{out}"
        );
        assert!(out.contains("@.str = private unnamed_addr constant [3 x i8] c\"ab\\00\""));
    }

    #[test]
    fn definitions_an_earlier_unit_created_move_to_their_first_use() {
        let ir = "@.shared = private constant i8 1\n@.own1 = private constant i8 2\n\
                  @.own2 = private constant i8 3\n\
                  define internal void @helper() {\n  ret void\n}\n\
                  define void @E() {\n  load i8, ptr @.own1\n  load i8, ptr @.shared\n  \
                  call void @helper()\n  load i8, ptr @.own2\n  ret void\n}\n";
        let foreign: HashSet<String> = [".shared".to_string(), "helper".to_string()].into();
        let out = reorder(ir, &foreign, false);
        let order: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with('@') || l.starts_with("define"))
            .map(|l| l.split_whitespace().find(|w| w.starts_with('@')).unwrap())
            .collect();
        assert_eq!(
            order,
            ["@.own1", "@.shared", "@.own2", "@E()", "@helper()"],
            "{out}"
        );
    }

    #[test]
    fn a_part_keeps_the_annotations_of_its_own_entry_only() {
        let line = "@llvm.global.annotations = appending global [2 x { ptr, ptr, ptr, i32, ptr }] \
                    [{ ptr, ptr, ptr, i32, ptr } { ptr @E__b_0, ptr @.str, ptr @.str.1, i32 9, ptr null }, \
                    { ptr, ptr, ptr, i32, ptr } { ptr @E__b_1, ptr @.str, ptr @.str.1, i32 9, ptr null }], \
                    section \"llvm.metadata\"";
        let kept: HashSet<String> = ["E__b_1".to_string()].into();
        let annotations = Annotations::read(line).unwrap();
        let (own, names) = annotations.own(&kept).unwrap();
        assert_eq!(
            own,
            "@llvm.global.annotations = appending global [1 x { ptr, ptr, ptr, i32, ptr }] \
             [{ ptr, ptr, ptr, i32, ptr } { ptr @E__b_1, ptr @.str, ptr @.str.1, i32 9, ptr null }], \
             section \"llvm.metadata\""
        );
        assert_eq!(names, ["E__b_1", ".str", ".str.1"]);
        assert!(annotations.own(&HashSet::new()).is_none());
    }

    #[test]
    fn quoted_names_are_read_as_llvm_names_them() {
        assert_eq!(raw_name("plain.1"), "plain.1");
        assert_eq!(raw_name("\"??_C@_02A@ab?$AA@\""), "??_C@_02A@ab?$AA@");
        assert_eq!(raw_name("\"a\\22b\\5Cc\""), "a\"b\\c");
    }

    #[test]
    fn a_part_drops_helpers_only_another_unit_reaches_even_when_they_call_each_other() {
        // Unit 0's entry reaches two static functions that call each other; unit 1 alone
        // defines neither, so its part must not keep them (each still uses the other).
        let parts = split_at_o0(&[
            (
                "a.c",
                "static int odd(int);\nstatic int even(int n) { return n ? odd(n - 1) : 1; }\n\
                 static int odd(int n) { return n ? even(n - 1) : 0; }\n\
                 int E(int x) { return even(x); }\n",
            ),
            ("b.c", "int E(int x) { return x + 1; }\n"),
        ]);
        let functions = |bc: &[u8]| defined_names(bc, false);
        assert_eq!(functions(&parts[0]), ["E", "even", "odd"]);
        assert_eq!(functions(&parts[1]), ["E"]);
    }
}
