//! A family batch whose front end is not cached, rebuilt member by member (issue 43): one
//! family's members share one template, so any change to it (one op's code, one define)
//! changes the input of every batch of the family, and compiling every batch again costs
//! as much as a clean build of the family's front end.
//!
//! Instead, the batch is preprocessed once (`clang -E`, a fraction of a front end's cost)
//! and each member gets a key from what it compiles ([`member_keys`]): its own part of the
//! preprocessed batch, verbatim, and every other member's part *without the body of that
//! member's entry function* ([`without_entry_body`]), which nothing but that member can
//! reach (its name is the batch's alias for that member alone). So a change inside one
//! op's function changes only that member's key; a change anywhere else (a header, a
//! declaration, a macro, a pragma: pragma lines are kept even from bodies) changes every
//! member's. Line markers and blank lines are left out of the keys unless the code can
//! depend on locations ([`location_free`]: debug information, sanitizers, profiling or
//! `__builtin_LINE`-style builtins), so an op that grows by a line does not move the others.
//!
//! A key's entry (`ppm`) holds the member's optimised bitcode, the part the batch's split
//! gives, which is the member alone's (`batch_split`): members whose entries exist skip
//! the front end; the others are compiled alone (a few) or as a smaller batch.

use crate::batch::{source_of, Item, FRONT_END_ONLY};
use crate::c_scan::CodeBytes;
use crate::cc1::{GroupInput, Preprocessor};
use crate::error::Error;
use crate::error::Result;
use crate::pipeline::template_name;
use crate::pipeline::{Attempt, Job, Pipeline, PreparedPch, Source, Work};
use crate::target::Target;
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The cache kind of a member's optimised bitcode by its preprocessed text.
pub(crate) const MEMBER_KIND: &str = "ppm";

/// Misses compiled alone (one clang run each) rather than as a smaller batch (a front-end
/// run, the optimiser's driver query and its run).
pub(crate) const ALONE_AT_MOST: usize = 2;

/// The line of the batch's marker source that starts member `index`'s part.
fn marker_line(index: usize) -> String {
    format!("extern char __cpjit_batch_data_{index};")
}

/// The preprocessed batch `pp` cut at its members' markers: the text before the first
/// member, then each member's part; `None` if a marker is missing or out of order.
pub fn member_parts(pp: &str, members: usize) -> Option<(&str, Vec<&str>)> {
    let mut starts = Vec::with_capacity(members);
    let mut from = 0;
    for i in 0..members {
        let line = marker_line(i);
        let at = pp[from..]
            .match_indices(line.as_str())
            .map(|(at, _)| from + at)
            .find(|&at| at == 0 || pp.as_bytes()[at - 1] == b'\n')?;
        starts.push(at);
        from = at + line.len();
    }
    let head = &pp[..*starts.first().unwrap_or(&pp.len())];
    let parts = starts
        .iter()
        .enumerate()
        .map(|(i, &s)| &pp[s..starts.get(i + 1).copied().unwrap_or(pp.len())])
        .collect();
    Some((head, parts))
}

/// Whether the code compiled from preprocessed `text` with `flags` cannot depend on where
/// its lines are (so line markers and blank lines can be left out of a key): no debug
/// information, sanitizer, profiling or coverage, and no builtin that yields a location.
pub fn location_free(flags: &[String], text: &str) -> bool {
    let flag_ok = |f: &String| {
        let debug = f.starts_with("-g") && f != "-g0";
        !(debug
            || f.starts_with("-fsanitize")
            || f.starts_with("-fprofile")
            || f.starts_with("-fcoverage")
            || f.starts_with("-finstrument"))
    };
    const LOCATION_BUILTINS: [&str; 4] = [
        "__builtin_LINE",
        "__builtin_COLUMN",
        "__builtin_FILE",
        "__builtin_source_location",
    ];
    flags.iter().all(flag_ok) && !LOCATION_BUILTINS.iter().any(|b| text.contains(b))
}

/// `text` without line markers (`# 12 "file" 1`) and blank lines.
fn without_locations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let trimmed = line.trim();
        let marker = trimmed
            .strip_prefix('#')
            .map(str::trim_start)
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
        if !trimmed.is_empty() && !marker {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Preprocessed `text` with the body of the function `name` replaced by `{}` and the
/// `#pragma` lines it held (a pragma's state, e.g. `pack`, outlives the function); `None`
/// if `name` defines no function there (then the whole text counts).
pub fn without_entry_body(text: &str, name: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut search = 0;
    while let Some(found) = text[search..].find(name) {
        let at = search + found;
        search = at + name.len();
        let word = |i: usize| bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_';
        if (at > 0 && word(at - 1)) || (search < bytes.len() && word(search)) {
            continue;
        }
        // The declarator's parameters, then `{` (a definition) or `;` (a declaration).
        let mut depth = 0i32;
        let mut i = search;
        while i < bytes.len() {
            match bytes[i] {
                b'(' => depth += 1,
                b')' => depth -= 1,
                b';' if depth == 0 => break,
                b'{' if depth == 0 => {
                    let end = body_end(text, i)?;
                    let pragmas: String = text[i..end]
                        .lines()
                        .filter(|l| l.trim_start().starts_with("#pragma"))
                        .map(|l| format!("\n{l}"))
                        .collect();
                    return Some(format!("{}{{{pragmas}\n}}{}", &text[..i], &text[end..]));
                }
                _ => {}
            }
            i += 1;
        }
    }
    None
}

/// The end (one past its `}`) of the block that opens at `open`, skipping string and
/// character literals and directive lines.
fn body_end(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in CodeBytes::new(text, open, false) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Each member's key part from the preprocessed batch `pp` (see the module documentation):
/// member `i`'s own part verbatim and every other part without its entry body (`aliases`:
/// each member's entry alias), the text before the first member, all with the set's root
/// spelt portably by `portable` and, if `location_free`, without locations. `None` if the
/// text cannot be cut at the members' markers.
pub fn member_keys(
    pp: &str,
    aliases: &[String],
    location_free: bool,
    portable: impl Fn(&str) -> String,
) -> Option<Vec<String>> {
    let (head, parts) = member_parts(pp, aliases.len())?;
    let norm = |t: &str| {
        let t = portable(t);
        if location_free {
            without_locations(&t)
        } else {
            t
        }
    };
    let head = crate::cache::key(&[norm(head).as_bytes()]);
    // Each part normalised once; its entry body cut from the normalised text, which gives
    // the text normalising the cut part would (the body holds the only lines that differ).
    let normed: Vec<String> = parts.iter().map(|p| norm(p)).collect();
    let own: Vec<String> = normed
        .iter()
        .map(|p| crate::cache::key(&[p.as_bytes()]))
        .collect();
    let others: Vec<String> = normed
        .iter()
        .zip(aliases)
        .map(|(p, alias)| match without_entry_body(p, alias) {
            Some(stripped) => crate::cache::key(&[b"stripped", stripped.as_bytes()]),
            None => crate::cache::key(&[b"whole", p.as_bytes()]),
        })
        .collect();
    Some(
        (0..parts.len())
            .map(|i| {
                let mut fields: Vec<&[u8]> = vec![head.as_bytes(), own[i].as_bytes()];
                fields.extend(
                    others
                        .iter()
                        .enumerate()
                        .filter(|&(j, _)| j != i)
                        .map(|(_, k)| k.as_bytes()),
                );
                crate::cache::key(&fields)
            })
            .collect(),
    )
}

/// The files a preprocessed text's line markers name that exist (what it read).
pub fn files_read(pp: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = pp
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .filter_map(|rest| rest.split_once(" \"").map(|(_, r)| r))
        .filter_map(|r| r.split_once('"').map(|(name, _)| PathBuf::from(name)))
        .filter(|p| p.is_absolute() && p.is_file())
        .collect();
    files.sort();
    files.dedup();
    files
}

/// A batch's generated text and what compiling it takes (see [`Pipeline::batch_of`]).
pub(crate) struct BatchText {
    pub(crate) text: String,
    pub(crate) entry: String,
    /// The units' names in stencils and errors, in batch order.
    pub(crate) templates: Vec<String>,
    /// Whether the batch holds family members.
    pub(crate) members: bool,
    pub(crate) units: Vec<PathBuf>,
    pub(crate) defines: Vec<Vec<String>>,
    /// The units' flags (without a member's defines).
    pub(crate) flags: Vec<String>,
    /// `flags` stopping after the front end.
    pub(crate) front_end: Vec<String>,
}

impl Pipeline<'_> {
    /// What a batch of `items` compiles: its text, flags and the units' names.
    pub(crate) fn batch_of(&self, target: &Target, items: &[Item]) -> Result<BatchText> {
        // The function each unit defines: the set's entry, or the one a `functions`
        // member defines (`batch_names`), the same for every member of the batch.
        let entry = match (&self.manifest.naming, items.first()) {
            (crate::manifest::Naming::TranslationUnitEntry(entry), _) => entry.clone(),
            (crate::manifest::Naming::Functions(_), Some((_, Some(member)))) => {
                self.member_function(target, member)?
            }
            (crate::manifest::Naming::Functions(_), _) => {
                return Err(Error(
                    "with `functions` naming only family members are batched".into(),
                ))
            }
        };
        let entry = &entry;
        let units: Vec<PathBuf> = items.iter().map(|(u, _)| u.clone()).collect();
        let defines: Vec<Vec<String>> = items
            .iter()
            .map(|(_, m)| m.map(|m| m.defines.clone()).unwrap_or_default())
            .collect();
        let flags = self.unit_flags(target, None);
        // The front end only: each unit is optimised on its own after the split.
        let mut front_end = flags.clone();
        front_end.extend(FRONT_END_ONLY.iter().map(|f| f.to_string()));
        Ok(BatchText {
            text: source_of(&self.manifest.root, &units, &defines, entry, &[]),
            entry: entry.clone(),
            templates: items.iter().map(|(u, m)| template_name(u, *m)).collect(),
            members: items.iter().any(|(_, m)| m.is_some()),
            units,
            defines,
            flags,
            front_end,
        })
    }
}

/// What a build learns about its batches once: the preprocessed text of family batches by
/// their text, made before any job runs ([`Pipeline::preprocess_member_batches`]), and the
/// code identifiers of each header a batch read (every batch of a family reads the same
/// ones: `Pipeline::defines_reach_headers`).
#[derive(Debug, Default)]
pub struct Preprocessed {
    texts: Mutex<HashMap<String, Arc<String>>>,
    words: Mutex<HashMap<PathBuf, Arc<HashSet<String>>>>,
}

impl Preprocessed {
    pub(crate) fn get(&self, text: &str) -> Option<Arc<String>> {
        let map = self.texts.lock().ok()?;
        map.get(&crate::cache::key(&[text.as_bytes()])).cloned()
    }

    pub(crate) fn insert(&self, text: &str, pp: String) {
        if let Ok(mut map) = self.texts.lock() {
            map.insert(crate::cache::key(&[text.as_bytes()]), Arc::new(pp));
        }
    }

    /// The identifiers the code of `file` uses (`batch_names::code_identifiers`), read
    /// once per build; `None` if it cannot be read.
    pub(crate) fn code_identifiers(&self, file: &Path) -> Option<Arc<HashSet<String>>> {
        if let Some(words) = self.words.lock().ok()?.get(file) {
            return Some(words.clone());
        }
        let text = std::fs::read_to_string(file).ok()?;
        let words = Arc::new(crate::batch_names::code_identifiers(&text));
        self.words
            .lock()
            .ok()?
            .insert(file.to_path_buf(), words.clone());
        Some(words)
    }
}

impl Pipeline<'_> {
    /// Preprocesses every family batch of `jobs` whose front end is not cached, in one
    /// `clang -cc1 -E` process per target (a process start costs about as much as
    /// preprocessing a batch), for [`Pipeline::member_batch_parts`]. A batch that cannot be
    /// preprocessed is left out: it is then compiled whole, which reports what is wrong.
    pub(crate) fn preprocess_member_batches<'p>(
        &self,
        jobs: &[Job],
        pch_of: impl Fn(&str) -> Option<&'p PreparedPch> + Sync,
    ) {
        let mut by_target: Vec<(&Target, Vec<BatchText>)> = Vec::new();
        for job in jobs {
            let Work::MemberBatch(members) = &job.work else {
                continue;
            };
            let items: Vec<Item> = members
                .iter()
                .map(|m| (m.source.clone(), Some(*m)))
                .collect();
            let Ok(batch) = self.batch_of(job.target, &items) else {
                continue;
            };
            if self.front_end_cached(&batch, pch_of(&job.target.triple)) {
                continue;
            }
            match by_target
                .iter_mut()
                .find(|(t, _)| t.triple == job.target.triple)
            {
                Some((_, list)) => list.push(batch),
                None => by_target.push((job.target, vec![batch])),
            }
        }
        by_target.par_iter().for_each(|(target, batches)| {
            let limit = self.manifest.limits.clang_time();
            let pch = pch_of(&target.triple).map(|p| p.path.as_path());
            let Ok(preprocessor) = Preprocessor::from_driver(&batches[0].front_end, pch, limit)
            else {
                return;
            };
            let inputs: Vec<GroupInput> = batches
                .iter()
                .map(|b| GroupInput {
                    // Named by its members, the same in every build (a line marker).
                    name: format!(
                        "batch-{}.c",
                        &crate::cache::key(&[b.templates.join("\n").as_bytes()])[..16]
                    ),
                    text: b.text.clone(),
                })
                .collect();
            if let Ok(texts) = preprocessor.run(&inputs, limit * inputs.len() as u32) {
                for (batch, pp) in batches.iter().zip(texts) {
                    self.preprocessed.insert(&batch.text, pp);
                }
            }
        });
    }

    /// Each member's optimised bitcode for a family batch whose front end is not cached
    /// (see the module documentation): `None` when the batch is to be compiled whole (it
    /// cannot be cut into members, a header names a member's define, or a member missing
    /// from the cache does not compile apart; the whole batch then decides, as without
    /// the cache).
    pub(crate) fn member_batch_parts(
        &self,
        target: &Target,
        items: &[Item],
        batch: &BatchText,
        pch: Option<&PreparedPch>,
        attempt: &mut Attempt,
    ) -> Result<Option<Vec<Vec<u8>>>> {
        let member_flags: Vec<Vec<String>> = items
            .iter()
            .map(|(_, m)| self.unit_flags(target, *m))
            .collect();
        let Some((keys, read)) = self.member_cache_keys(target, batch, pch, &member_flags)? else {
            return Ok(None);
        };
        if self.defines_reach_headers(items, &read).is_some() {
            return Ok(None);
        }
        let mut parts: Vec<Option<Vec<u8>>> = keys
            .iter()
            .map(|k| attempt.get(self.cache, MEMBER_KIND, k))
            .collect();
        let missing: Vec<usize> = (0..items.len()).filter(|&i| parts[i].is_none()).collect();
        if missing.is_empty() {
            return Ok(Some(parts.into_iter().flatten().collect()));
        }
        let compiled = if missing.len() <= ALONE_AT_MOST {
            // Alone: the bitcode a member alone gives, which its batch's part equals.
            let mut alone = Vec::with_capacity(missing.len());
            for &i in &missing {
                let (unit, _) = &items[i];
                let source = Source::File(unit);
                match self.bitcode(source, &member_flags[i], pch, None, attempt) {
                    Ok(bitcode) => alone.push(bitcode),
                    Err(_) => return Ok(None),
                }
            }
            alone
        } else {
            let sub: Vec<Item> = missing.iter().map(|&i| items[i].clone()).collect();
            let sub_batch = self.batch_of(target, &sub)?;
            match self.batch_parts(target, &sub, &sub_batch, pch, attempt)? {
                Ok(p) => p,
                Err(_) => return Ok(None),
            }
        };
        for (i, part) in missing.into_iter().zip(compiled) {
            attempt.put(MEMBER_KIND, &keys[i], &part);
            parts[i] = Some(part);
        }
        Ok(Some(parts.into_iter().flatten().collect()))
    }

    /// The `ppm` cache keys of a member batch's members (their full flags
    /// `member_flags`), and the files the preprocessor read: `None` when the batch cannot
    /// be cut into members.
    fn member_cache_keys(
        &self,
        target: &Target,
        batch: &BatchText,
        pch: Option<&PreparedPch>,
        member_flags: &[Vec<String>],
    ) -> Result<Option<(Vec<String>, Vec<PathBuf>)>> {
        let Some(pp) = self.preprocessed.get(&batch.text) else {
            return Ok(None);
        };
        let aliases: Vec<String> = (0..batch.templates.len())
            .map(|i| crate::batch::entry_alias(&batch.entry, i))
            .collect();
        let free = location_free(&batch.front_end, &pp);
        let Some(parts) = member_keys(&pp, &aliases, free, |t| self.portable(t)) else {
            return Ok(None);
        };
        let common = [
            MEMBER_KIND,
            self.clang_version,
            &self.portable(&batch.front_end.join("\0")),
            &pch.map_or(String::new(), |p| p.portable.clone()),
            &batch.entry,
            target.llvm_triple(),
        ]
        .join("\0");
        let keys = parts
            .iter()
            .zip(&batch.templates)
            .zip(member_flags)
            .map(|((part, template), flags)| {
                crate::cache::key(&[
                    common.as_bytes(),
                    template.as_bytes(),
                    self.portable(&flags.join("\0")).as_bytes(),
                    &[u8::from(free)],
                    part.as_bytes(),
                ])
            })
            .collect();
        Ok(Some((keys, files_read(&pp))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PP: &str = "# 1 \"batch.c\"\n# 1 \"/set/h.h\" 1\nstatic inline int h(int x) { return x; }\n\
        # 2 \"batch.c\" 2\nextern char __cpjit_batch_data_0;\nchar __cpjit_batch_data_0 = 0;\n\
        # 1 \"/set/ops.c\" 1\nint E__b_0(int *sp) {\n  const char *s = \"}\";\n#pragma pack(1)\n  return h(sp[0]) + 1;\n}\n\
        extern char __cpjit_batch_data_1;\nchar __cpjit_batch_data_1 = 0;\n\
        # 1 \"/set/ops.c\" 1\n\n\nint E__b_1(int *sp) {\n  return h(sp[0]) + 2;\n}\n";

    fn keys(pp: &str, free: bool) -> Vec<String> {
        member_keys(
            pp,
            &["E__b_0".into(), "E__b_1".into()],
            free,
            str::to_string,
        )
        .unwrap()
    }

    #[test]
    fn a_batch_is_cut_at_its_members_markers() {
        let (head, parts) = member_parts(PP, 2).unwrap();
        assert!(head.ends_with("# 2 \"batch.c\" 2\n"), "{head}");
        assert!(parts[0].starts_with("extern char __cpjit_batch_data_0;"));
        assert!(parts[1].contains("E__b_1") && !parts[1].contains("E__b_0"));
        assert!(member_parts(PP, 3).is_none());
    }

    #[test]
    fn an_entry_body_goes_but_its_pragmas_and_the_declarations_stay() {
        let (_, parts) = member_parts(PP, 2).unwrap();
        let stripped = without_entry_body(parts[0], "E__b_0").unwrap();
        assert!(
            stripped.contains("int E__b_0(int *sp) {\n#pragma pack(1)\n}\n"),
            "{stripped}"
        );
        assert!(!stripped.contains("return"));
        assert!(without_entry_body("int E__b_00(void);\nint f(void) {}\n", "E__b_0").is_none());
        assert!(without_entry_body("int E__b_0(void);\n", "E__b_0").is_none());
    }

    #[test]
    fn one_members_body_changes_only_its_own_key() {
        let before = keys(PP, true);
        let body = keys(&PP.replace("+ 2;", "+ 3;"), true);
        assert_eq!(before[0], body[0]);
        assert_ne!(before[1], body[1]);
        // A header's change, or a declaration outside the bodies, changes every key.
        for edit in [
            PP.replace("return x;", "return -x;"),
            PP.replace("int E__b_1(int *sp)", "int E__b_1(int *restrict sp)"),
            PP.replace("#pragma pack(1)", "#pragma pack(2)"),
        ] {
            let after = keys(&edit, true);
            assert!(after.iter().zip(&before).all(|(a, b)| a != b), "{edit}");
        }
        // Lines moved: the same keys where locations cannot matter, else not.
        let moved = PP.replace("\n\n\nint E__b_1", "\n\n\n\n\nint E__b_1");
        assert_eq!(keys(&moved, true), before);
        assert_ne!(keys(&moved, false)[1], keys(PP, false)[1]);
    }

    #[test]
    fn cutting_an_entry_body_commutes_with_normalising() {
        let (_, parts) = member_parts(PP, 2).unwrap();
        let portable = |t: &str| t.replace("/set/", "$SET/");
        for (part, alias) in parts.iter().zip(["E__b_0", "E__b_1"]) {
            let normed = without_locations(&portable(part));
            let cut_then_normed =
                without_locations(&portable(&without_entry_body(part, alias).unwrap()));
            assert_eq!(without_entry_body(&normed, alias).unwrap(), cut_then_normed);
            let cut_then_portable = portable(&without_entry_body(part, alias).unwrap());
            assert_eq!(
                without_entry_body(&portable(part), alias).unwrap(),
                cut_then_portable
            );
        }
    }

    #[test]
    fn locations_matter_with_debug_information_or_location_builtins() {
        assert!(location_free(&["-O2".into(), "-g0".into()], "int x;"));
        assert!(!location_free(&["-gline-tables-only".into()], "int x;"));
        assert!(!location_free(&["-fsanitize=address".into()], "int x;"));
        assert!(!location_free(&[], "int l = __builtin_LINE();"));
    }

    #[test]
    fn the_files_read_are_the_markers_existing_absolute_paths() {
        let dir = tempfile::tempdir().unwrap();
        let h = dir.path().join("h.h");
        std::fs::write(&h, "").unwrap();
        let pp = format!(
            "# 1 \"batch.c\"\n# 1 \"{}\" 1\n# 1 \"/no/such.h\" 1\n",
            h.display()
        );
        assert_eq!(files_read(&pp), [h]);
    }
}
