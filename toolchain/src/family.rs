//! Stencil families: one template compiled into many stencils (`[[family]]` in the
//! manifest, format in `templates/README.md`).
//!
//! A family compiles its `source` once per *member*: per element of a list (inline `list`
//! or one per line of `list_file`, passed as `-D<list_define>=<element>`, the way CPython
//! compiles its template once per micro-op) and/or per combination of declared variant
//! parameters (`[family.params] CACHED_IN = "0..=3"`, passed as `-DCACHED_IN=<value>`),
//! minus the combinations `skip` names. A list may also name a macro prefix (`list_flag =
//! "OP_IS_"`): each member then gets `-D<list_flag><element>=1` as well, a macro the
//! preprocessor can test per name (`-DOP=add` names the element but cannot be compared with
//! a name in `#if` or a macro), so that a template expands only its element's code (the VM's
//! cached ops leave the other ops' bodies unparsed). Each member's unit must define exactly
//! one stencil function, which is renamed by the `stencil` rule
//! (`"op_add_{elem}_{CACHED_IN}"`). The generated crate exposes the family as a table indexed
//! by element and parameter values (`cpjit_model::Family`), so a runtime user finds a
//! variant without formatting names.
//!
//! A family of register-cached ops (`CPJIT_CACHED_OP`) names the parameters that hold its
//! members' cache state (`cached = { entry = "IN", exit = "OUT" }`); after validation, each
//! member's annotated state must be exactly its values of those parameters, so the state a
//! runtime looks a member up by is the state its code keeps. A cached op in a family without
//! `cached` is refused as well: its state would be a fact the manifest does not state and the
//! toolchain could not check against the parameters.
//!
//! A cached family may also state its ops' stack effect (`cached = { ..., pop = 2, push = 1 }`):
//! it then has only the members whose exit state is the *canonical* one for their entry
//! state, `OUT = min(R, max(IN - pop, 0) + push)` with `R` the largest exit value declared
//! (pop registers first, push into registers, spill the bottom when full, never fill), so an
//! op has one member per entry state instead of one per (entry, exit) pair.
//!
//! A family with float cache slots (`cached.float = true`, members compiled with
//! `CPJIT_FLOAT_CACHE 1`) numbers its states `2**count - 1 + floats` (`FloatState`): each
//! cached slot is an int or a float, an op's pushes are floats where `cached.float_results`
//! names it, and the canonical exit keeps each slot's class.

use crate::error::{Error, Result};
use crate::set::is_identifier;
use crate::stencil::StencilBuf;
use crate::validate::IrFacts;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod check;
pub use check::RawFamily;

/// Which of a family's parameters hold its members' cache state (`CPJIT_CACHED_OP(NAME, IN,
/// OUT)`): indices into [`Family::params`]. Both may name the same parameter (ops that keep
/// the state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheParams {
    /// The parameter holding the values cached on entry.
    pub entry: usize,
    /// The parameter holding the values cached on exit.
    pub exit: usize,
    /// `pop`, `push`: the members' stack effect; only canonical exit states are members.
    pub effect: Option<StackEffect>,
    /// `cached.float`: the members have float cache slots (`CPJIT_FLOAT_CACHE`), and a
    /// state is a number naming each cached slot's class (`cpjit_model::FloatState`).
    pub float: bool,
}

impl CacheParams {
    /// How many values state `state` caches.
    pub fn count(&self, state: usize) -> usize {
        match self.float {
            true => cpjit_model::FloatState::from_number(state as u8).count as usize,
            false => state,
        }
    }

    /// The canonical exit state of an op of stack effect `effect` from state `entry`, with
    /// `registers` cache slots: the pops take registers first, the pushes fill registers
    /// (spilling the bottom one when all are full; with float slots, each pushed value in
    /// its class's register), and nothing is loaded back from memory.
    pub fn canonical_exit(&self, effect: StackEffect, entry: usize, registers: usize) -> usize {
        let (pop, push) = (effect.pop as usize, effect.push as usize);
        if !self.float {
            return (entry.saturating_sub(pop) + push).min(registers);
        }
        let s = cpjit_model::FloatState::from_number(entry as u8);
        let mut count = (s.count as usize).saturating_sub(pop);
        let mut floats = s.floats as usize & ((1 << count) - 1);
        for _ in 0..push {
            if count == registers {
                (count, floats) = (count - 1, floats >> 1);
            }
            floats |= usize::from(effect.float) << count;
            count += 1;
        }
        (1 << count) - 1 + floats
    }
}

/// How many values every op of a cached family pops, then pushes (`cached.pop`,
/// `cached.push`), and whether it pushes floats (`cached.float_results`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackEffect {
    pub pop: u8,
    pub push: u8,
    pub float: bool,
}

/// Where a family's list of elements comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Elements {
    /// No list: one member per parameter combination.
    None,
    Inline(Vec<String>),
    /// A file relative to the manifest: one element per line, `#` comments and blank lines
    /// ignored.
    File(String),
}

/// A checked family declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    /// The manifest that declares it, as errors name it.
    pub manifest: String,
    pub name: String,
    /// The template, relative to the manifest.
    pub source: String,
    /// The naming rule: `{elem}` and `{PARAM}` placeholders.
    pub stencil: String,
    pub elements: Elements,
    /// The macro an element is passed in (`-D<list_define>=<element>`).
    pub list_define: Option<String>,
    /// The prefix of the flag macro an element also gets (`-D<list_flag><element>=1`).
    pub list_flag: Option<String>,
    /// Defines of every member.
    pub defines: Vec<String>,
    /// Parameters (sorted by name) and their values, in declaration order.
    pub params: Vec<(String, Vec<String>)>,
    /// Combinations to leave out: each a partial assignment of parameter values (and
    /// optionally `elem`); a member matching every key of one entry is skipped.
    pub skip: Vec<BTreeMap<String, String>>,
    /// `cached`: the parameters every member's `CPJIT_CACHED_OP` annotation must state as
    /// its entry and exit state; `None`: the members must not be cached ops.
    pub cached: Option<CacheParams>,
    /// `cached.effects`: each listed element's stack effect (selection only: every member
    /// stays), checked against the elements when the table is made.
    pub effects: BTreeMap<String, StackEffect>,
    /// `cached.glue`: the element whose members move the cache state (spill or fill).
    pub glue: Option<String>,
    /// `cached.float_results`: the elements whose pushed values are floats (float slots).
    pub float_results: Vec<String>,
    /// `cached.prune = true`: only the members the selection tables pick are compiled (and
    /// the glue element's, and those matching an entry of `cached.keep`, given here);
    /// `None`: every member (`crate::select::prune`).
    pub prune: Option<Vec<BTreeMap<String, String>>>,
}

/// One stencil of a family: what to compile and what to call it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Index of the family in the manifest.
    pub family: usize,
    pub source: PathBuf,
    /// The stencil's name after the naming rule.
    pub stencil: String,
    /// `NAME=VALUE` defines of this member (without `-D`).
    pub defines: Vec<String>,
    /// Index into the family's elements (0 when it has none), then one value index per
    /// parameter: the member's place in the family's table.
    pub coords: Vec<usize>,
    /// Its list element, if the family has a list.
    pub element: Option<String>,
}

/// A family's table in a built set: the stencil index of every (element, values...)
/// combination, row-major, `None` where skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub name: String,
    pub elements: Vec<String>,
    pub params: Vec<(String, Vec<String>)>,
    pub stencils: Vec<Option<u16>>,
    /// What a runtime needs to select members itself (cached families only).
    pub select: Option<crate::select::Select>,
    /// The members `cached.prune` left out, by name.
    pub pruned: Vec<String>,
}

impl Family {
    /// `member`'s cache state as the manifest declares it: the values of the `cached`
    /// parameters (entry, exit), `None` when the family declares none.
    pub fn member_cache_state(&self, member: &Member) -> Option<(usize, usize)> {
        let c = self.cached?;
        // coords[0] is the element; parameters follow in `params` order. `check` admitted
        // only integers as their values.
        let value = |p: usize| self.params[p].1[member.coords[p + 1]].parse().ok();
        Some((value(c.entry)?, value(c.exit)?))
    }

    /// Checks that the one stencil of `member`'s unit states in its `CPJIT_CACHED_OP`
    /// annotation (`facts.cache_states`, after [`rename_member`]) exactly the cache state the
    /// family's `cached` parameters give the member; a cached op in a family that declares
    /// no cache state, and an uncached one in a family that does, are errors too.
    pub fn check_cache_state(&self, member: &Member, facts: &IrFacts, triple: &str) -> Result<()> {
        let declared = self.member_cache_state(member);
        let annotated = facts.cache_states.get(&member.stencil).copied();
        let at = format!(
            "{}: [[family]] `{}`: member `{}` on {triple}",
            self.manifest, self.name, member.stencil
        );
        // The declared state with the names of the parameters it comes from.
        let declared = declared.zip(self.cached).map(|((entry, exit), c)| {
            let (ep, xp) = (&self.params[c.entry].0, &self.params[c.exit].0);
            (
                (entry, exit),
                format!("(entry, exit) = ({ep} = {entry}, {xp} = {exit})"),
                format!("CPJIT_CACHED_OP(NAME, {ep}, {xp})"),
            )
        });
        let float = self.cached.is_some_and(|c| c.float);
        let what = match (annotated, declared) {
            (Some((_, _, f)), Some(_)) if f != float => match float {
                true => "its CPJIT_CACHED_OP has no float cache slots, but the family declares \
                         `cached.float = true`: add \"CPJIT_FLOAT_CACHE=1\" to its `defines`"
                    .to_string(),
                false => "its CPJIT_CACHED_OP has float cache slots (CPJIT_FLOAT_CACHE 1), but \
                          the family does not declare them: add `float = true` to `cached`, so \
                          that its states are read as (count, classes)"
                    .to_string(),
            },
            (Some((i, o, _)), Some((d, _, _))) if (i, o) == d => return Ok(()),
            (None, None) => return Ok(()),
            (Some((i, o, _)), Some((_, state, call))) => format!(
                "its CPJIT_CACHED_OP annotation states (entry, exit) = ({i}, {o}), but the \
                 family's `cached` parameters give {state}: pass the parameters to the macro \
                 (`{call}`)"
            ),
            (None, Some((_, state, _))) => format!(
                "has no CPJIT_CACHED_OP annotation (it is not a cached op), but the family's \
                 `cached` parameters give {state}: declare the op with CPJIT_CACHED_OP"
            ),
            (Some((i, o, _)), None) => format!(
                "its CPJIT_CACHED_OP annotation states (entry, exit) = ({i}, {o}), but the \
                 family declares no cache state: add `cached = {{ entry = \"<parameter>\", \
                 exit = \"<parameter>\" }}` naming the parameters that hold it, so that the \
                 state a runtime looks members up by is the one their code keeps"
            ),
        };
        Err(Error(format!("{at}: {what}")))
    }

    /// Whether the parameter values `combo` (value indices) of `element`'s member have the
    /// canonical exit state for their entry state, when the family states one stack effect
    /// for all (always, otherwise).
    fn canonical(&self, element: Option<&str>, combo: &[usize]) -> bool {
        let Some(c) = self.cached.filter(|c| c.effect.is_some()) else {
            return true;
        };
        let Some(effect) = self.effect(element) else {
            return true;
        };
        // `check` admitted only integers as the state parameters' values.
        let state = |p: usize, i: usize| self.params[p].1[i].parse::<usize>().unwrap_or(0);
        let entry = state(c.entry, combo[c.entry]);
        state(c.exit, combo[c.exit]) == c.canonical_exit(effect, entry, self.cache_registers())
    }

    /// The stack effect the family declares for `element`'s members (its `effects` entry,
    /// else `pop`/`push`), pushing floats if `float_results` names it.
    pub fn effect(&self, element: Option<&str>) -> Option<StackEffect> {
        let named = element.and_then(|e| self.effects.get(e)).copied();
        let effect = named.or(self.cached?.effect)?;
        let float = element.is_some_and(|e| self.float_results.iter().any(|f| f == e));
        Some(StackEffect { float, ..effect })
    }

    /// The cache slots a cached family's states use: the most values any exit state caches.
    pub fn cache_registers(&self) -> usize {
        let Some(c) = self.cached else { return 0 };
        let values = &self.params[c.exit].1;
        values
            .iter()
            .map(|v| c.count(v.parse::<usize>().unwrap_or(0)))
            .max()
            .unwrap_or(0)
    }

    /// The elements, reading `list_file` relative to `root`.
    pub fn element_list(&self, root: &Path) -> Result<Vec<String>> {
        match &self.elements {
            Elements::None => Ok(Vec::new()),
            Elements::Inline(list) => Ok(list.clone()),
            Elements::File(file) => {
                let path = root.join(file);
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    Error(format!(
                        "family `{}`: cannot read list_file {}: {e}",
                        self.name,
                        path.display()
                    ))
                })?;
                let mut out = Vec::new();
                for (n, line) in text.lines().enumerate() {
                    let line = line.split('#').next().unwrap_or("").trim();
                    if line.is_empty() {
                        continue;
                    }
                    if !is_identifier(line) {
                        return Err(Error(format!(
                            "{}:{}: family `{}`: element `{line}` is not an identifier",
                            path.display(),
                            n + 1,
                            self.name
                        )));
                    }
                    out.push(line.to_string());
                }
                Ok(out)
            }
        }
    }

    /// Every member, in table order (element, then parameters by name, each in value
    /// order), skipped combinations and pruned members (`cached.prune`) left out.
    pub fn members(&self, index: usize, root: &Path) -> Result<Vec<Member>> {
        Ok(self.split(index, root)?.0)
    }

    /// The members compiled, and the names of those `cached.prune` leaves out.
    fn split(&self, index: usize, root: &Path) -> Result<(Vec<Member>, Vec<String>)> {
        let candidates = self.candidates(index, root)?;
        if self.prune.is_none() {
            return Ok((candidates, Vec::new()));
        }
        let keep = crate::select::prune(self, &candidates, root)?;
        let (mut kept, mut pruned) = (Vec::new(), Vec::new());
        for (member, keep) in candidates.into_iter().zip(keep) {
            if keep {
                kept.push(member);
            } else {
                pruned.push(member.stencil);
            }
        }
        Ok((kept, pruned))
    }

    /// Whether the member of element `element` (none without a list) with parameter value
    /// indices `combo` matches every key of `entry` (a `skip` or `keep` entry).
    pub fn matches(
        &self,
        entry: &BTreeMap<String, String>,
        element: Option<&str>,
        combo: &[usize],
    ) -> bool {
        entry.iter().all(|(key, value)| match key.as_str() {
            "elem" => element == Some(value.as_str()),
            _ => self
                .params
                .iter()
                .zip(combo)
                .any(|((p, values), &i)| p == key && values[i] == *value),
        })
    }

    /// Every member before pruning.
    fn candidates(&self, index: usize, root: &Path) -> Result<Vec<Member>> {
        let elements = self.element_list(root)?;
        self.check_flags(&elements)?;
        let rows: Vec<Option<&str>> = if elements.is_empty() {
            vec![None]
        } else {
            elements.iter().map(|e| Some(e.as_str())).collect()
        };
        let mut members = Vec::new();
        for (e, element) in rows.iter().enumerate() {
            for combo in combinations(&self.params) {
                let skipped = self
                    .skip
                    .iter()
                    .any(|entry| self.matches(entry, *element, &combo));
                if skipped || !self.canonical(*element, &combo) {
                    continue;
                }
                let mut name = self.stencil.clone();
                let mut defines = self.defines.clone();
                if let (Some(element), Some(define)) = (element, &self.list_define) {
                    name = name.replace("{elem}", element);
                    defines.push(format!("{define}={element}"));
                    if let Some(flag) = &self.list_flag {
                        defines.push(format!("{flag}{element}=1"));
                    }
                }
                for ((p, values), &i) in self.params.iter().zip(&combo) {
                    name = name.replace(&format!("{{{p}}}"), &values[i]);
                    defines.push(format!("{p}={}", values[i]));
                }
                if !is_identifier(&name) {
                    return Err(Error(format!(
                        "family `{}`: the naming rule `{}` gives `{name}`, not an identifier",
                        self.name, self.stencil
                    )));
                }
                let mut coords = vec![e];
                coords.extend(&combo);
                members.push(Member {
                    family: index,
                    source: PathBuf::from(&self.source),
                    stencil: name,
                    defines,
                    coords,
                    element: element.map(str::to_string),
                });
            }
        }
        Ok(members)
    }

    /// A `list_flag` macro must not be another macro the members get (the list macro, a
    /// parameter, a `defines` entry): one `-D` would silently override the other.
    fn check_flags(&self, elements: &[String]) -> Result<()> {
        let Some(flag) = &self.list_flag else {
            return Ok(());
        };
        for element in elements {
            let name = format!("{flag}{element}");
            let clash = self.list_define.as_deref() == Some(name.as_str())
                || self.params.iter().any(|(p, _)| *p == name)
                || self
                    .defines
                    .iter()
                    .any(|d| d.split('=').next() == Some(name.as_str()));
            if clash {
                return Err(Error(format!(
                    "{}: [[family]] `{}`: element `{element}`'s flag `{name}` (`list_flag` \
                     `{flag}`) is also the list macro, a parameter or a `defines` entry of the \
                     family",
                    self.manifest, self.name
                )));
            }
        }
        Ok(())
    }

    /// The table of this family given the stencil index of each member's name.
    pub fn table(
        &self,
        members: &[&Member],
        root: &Path,
        index_of: impl Fn(&str) -> Option<u16>,
    ) -> Result<Table> {
        let mut table = self.grid(members, root, index_of)?;
        if self.prune.is_some() {
            table.pruned = self.split(0, root)?.1;
        }
        Ok(table)
    }

    /// [`Family::table`] without the names of pruned members.
    pub fn grid(
        &self,
        members: &[&Member],
        root: &Path,
        index_of: impl Fn(&str) -> Option<u16>,
    ) -> Result<Table> {
        let elements = self.element_list(root)?;
        let rows = elements.len().max(1);
        let size = rows * self.params.iter().map(|(_, v)| v.len()).product::<usize>();
        let mut stencils = vec![None; size];
        for m in members {
            let mut at = 0;
            for (axis, &c) in m.coords.iter().enumerate() {
                let len = if axis == 0 {
                    rows
                } else {
                    self.params[axis - 1].1.len()
                };
                at = at * len + c;
            }
            stencils[at] = index_of(&m.stencil);
        }
        let mut table = Table {
            name: self.name.clone(),
            elements,
            params: self.params.clone(),
            stencils,
            select: None,
            pruned: Vec::new(),
        };
        table.select = crate::select::Select::of(self, &table)?;
        Ok(table)
    }
}

/// Renames the one stencil of a member's unit after the member (in the stencils and the
/// IR facts alike); a unit with no stencil function or several is an error.
pub fn rename_member(
    member: &Member,
    stencils: &mut [StencilBuf],
    facts: &mut IrFacts,
    triple: &str,
    template: &str,
) -> Result<()> {
    let [stencil] = stencils else {
        let names: Vec<&str> = stencils.iter().map(|s| s.name.as_str()).collect();
        return Err(Error(format!(
            "{triple}: {template}: a family template must define exactly one stencil \
             function, found {} ({})",
            names.len(),
            names.join(", ")
        )));
    };
    let old = crate::frame::rename(stencil, member.stencil.clone());
    if facts.stencils.remove(&old) {
        facts.stencils.insert(member.stencil.clone());
    }
    if facts.continues.remove(&old) {
        facts.continues.insert(member.stencil.clone());
    }
    if let Some(state) = facts.cache_states.remove(&old) {
        facts.cache_states.insert(member.stencil.clone(), state);
    }
    if let Some(seen) = facts.stack_uses.remove(&old) {
        facts.stack_uses.insert(member.stencil.clone(), seen);
    }
    Ok(())
}

/// Every combination of value indices, the last parameter fastest.
fn combinations(params: &[(String, Vec<String>)]) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for (_, values) in params {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                (0..values.len()).map(move |i| {
                    let mut c = prefix.clone();
                    c.push(i);
                    c
                })
            })
            .collect();
    }
    out
}

/// Every member of every family of a manifest, in manifest order.
pub fn all_members(families: &[Family], root: &Path) -> Result<Vec<Member>> {
    let mut all = Vec::new();
    let mut errors = Vec::new();
    for (i, f) in families.iter().enumerate() {
        match f.members(i, root) {
            Ok(m) => all.extend(m),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(all)
    } else {
        Err(Error::many(errors))
    }
}

#[cfg(test)]
#[path = "family_tests.rs"]
mod tests;
