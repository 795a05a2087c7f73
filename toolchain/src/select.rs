//! Selection tables of register-cached families: what a runtime needs to pick each op's
//! member itself (`cpjit_model::CacheSelect` in the generated crates), worked out once per
//! target from the family's table of stencil indices and its `cached` declaration.
//!
//! An *op* is an element together with one value of each parameter that is not a state
//! parameter (row-major, element first); ops are numbered the same on every target, since
//! the manifest is shared. For each op and state the tables give:
//!
//! - `members`: the member from entry state `s` to exit state `x`, if the family has it;
//! - `transitions`: the member to pick when the op is pushed in state `s`: the one whose
//!   exit is the op's *canonical* exit (pops take registers first, pushes fill registers,
//!   spilling the bottom one when full, nothing is loaded back), else the one from `s` with
//!   the lowest exit; if the family has no member from `s`, the glue element's member
//!   (`cached.glue`, a spill or fill) from `s` to the nearest state `t` that has one, then
//!   the member picked from `t`. Ops with no way from `s` have no transition (a runtime
//!   refuses them), and so has the glue element itself (it is pushed towards a state).
//!
//! With float cache slots (`cached.float`) a state is a number naming each cached slot's
//! class (`cpjit_model::FloatState`); the canonical exit keeps every class (pushes take the
//! class `cached.float_results` gives the op), and glue goes to the nearest state by values
//! spilled or filled, then by values moved between register files.

use crate::error::{Error, Result};
use crate::family::{CacheParams, Family, Member, StackEffect, Table};
use cpjit_model::FloatState;
use std::path::Path;

/// States a selection table covers at most (state values 0 to 15).
pub const MAX_STATES: usize = 16;

/// One cached family's selection tables (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Select {
    /// Indices into the family's parameters of the entry and exit state.
    pub entry_param: usize,
    pub exit_param: usize,
    /// State values are `0..states`.
    pub states: usize,
    /// Ops per element: the combinations of the parameters that are not state parameters.
    pub combos: usize,
    /// Element index of the glue element.
    pub glue: Option<usize>,
    /// Each element's stack effect, where declared.
    pub effects: Vec<Option<StackEffect>>,
    /// `(op * states + entry) * states + exit` → stencil index.
    pub members: Vec<Option<u16>>,
    /// `op * states + entry` → what to push.
    pub transitions: Vec<Option<Transition>>,
}

/// What to push for an op in a state: `glue` (if any) from the state to `via`, then
/// `member` from `via` to `exit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    pub member: u16,
    pub exit: u8,
    pub glue: Option<u16>,
    pub via: u8,
}

impl Select {
    /// The tables of `family` (already checked) from its `table`; `None` for a family
    /// without `cached`.
    pub fn of(family: &Family, table: &Table) -> Result<Option<Select>> {
        let Some(c) = family.cached else {
            return Ok(None);
        };
        let at = format!("{}: [[family]] `{}`", family.manifest, family.name);
        let params = &table.params;
        let value = |p: usize, i: usize| params[p].1[i].parse::<usize>().unwrap_or(usize::MAX);
        let states = [c.entry, c.exit]
            .iter()
            .flat_map(|&p| (0..params[p].1.len()).map(move |i| (p, i)))
            .map(|(p, i)| value(p, i))
            .max()
            .map_or(0, |m| m + 1);
        if states > MAX_STATES {
            return Err(Error(format!(
                "{at}: `cached`: state values go up to {}, but selection tables cover states 0 \
                 to {}: use fewer cache states",
                states - 1,
                MAX_STATES - 1
            )));
        }
        let elements = table.elements.len().max(1);
        let element_index = |name: &str, what: &str| {
            table
                .elements
                .iter()
                .position(|e| e == name)
                .ok_or_else(|| {
                    Error(format!(
                        "{at}: `cached.{what}` names `{name}`, which is not an element of the \
                     family's list (its elements: {})",
                        table.elements.join(", ")
                    ))
                })
        };
        for name in family.effects.keys() {
            element_index(name, "effects")?;
        }
        for name in &family.float_results {
            element_index(name, "float_results")?;
        }
        let effects: Vec<Option<StackEffect>> = match table.elements.is_empty() {
            true => vec![family.effect(None)],
            false => table
                .elements
                .iter()
                .map(|e| family.effect(Some(e)))
                .collect(),
        };
        let glue = match &family.glue {
            Some(name) => Some(element_index(name, "glue")?),
            None => None,
        };
        // The other parameters, in order: an op's combination is row-major over them.
        let others: Vec<usize> = (0..params.len())
            .filter(|&p| p != c.entry && p != c.exit)
            .collect();
        let combos: usize = others.iter().map(|&p| params[p].1.len()).product();
        let ops = elements * combos;
        let state_index = |p: usize, s: usize| params[p].1.iter().position(|v| *v == s.to_string());
        let mut members = vec![None; ops * states * states];
        for op in 0..ops {
            let (element, mut combo) = (op / combos, op % combos);
            let mut values = vec![0; params.len()];
            for &p in others.iter().rev() {
                values[p] = combo % params[p].1.len();
                combo /= params[p].1.len();
            }
            for s in 0..states {
                for x in 0..states {
                    let (Some(i), Some(o)) = (state_index(c.entry, s), state_index(c.exit, x))
                    else {
                        continue;
                    };
                    if c.entry == c.exit && i != o {
                        continue;
                    }
                    values[c.entry] = i;
                    values[c.exit] = o;
                    let mut at = element;
                    for (p, &v) in values.iter().enumerate() {
                        at = at * params[p].1.len() + v;
                    }
                    members[(op * states + s) * states + x] = table.stencils[at];
                }
            }
        }
        let registers = family.cache_registers();
        let member = |op: usize, s: usize, x: usize| members[(op * states + s) * states + x];
        // The member picked from state `s`: the canonical exit's, else the lowest exit's.
        let pick = |op: usize, s: usize| -> Option<(u16, usize)> {
            let canonical = effects[op / combos].map(|e| c.canonical_exit(e, s, registers));
            if let Some(x) = canonical.filter(|&x| x < states) {
                if let Some(m) = member(op, s, x) {
                    return Some((m, x));
                }
            }
            (0..states).find_map(|x| member(op, s, x).map(|m| (m, x)))
        };
        let mut transitions = vec![None; ops * states];
        for op in 0..ops {
            if glue == Some(op / combos) {
                continue;
            }
            let glue_op = glue.map(|g| g * combos + op % combos);
            for s in 0..states {
                let t = pick(op, s).map(|(m, x)| (m, x, None, s)).or_else(|| {
                    let mut near: Vec<usize> = (0..states).filter(|&t| t != s).collect();
                    near.sort_by_key(|&t| (distance(&c, s, t), t));
                    near.into_iter().find_map(|t| {
                        let moved = member(glue_op?, s, t)?;
                        pick(op, t).map(|(m, x)| (m, x, Some(moved), t))
                    })
                });
                transitions[op * states + s] = t.map(|(member, exit, glue, via)| Transition {
                    member,
                    exit: exit as u8,
                    glue,
                    via: via as u8,
                });
            }
        }
        Ok(Some(Select {
            entry_param: c.entry,
            exit_param: c.exit,
            states,
            combos,
            glue,
            effects,
            members,
            transitions,
        }))
    }
}

/// How far glue moves from state `s` to state `t`: values spilled or filled, then (with
/// float slots) values moved between register files.
fn distance(c: &CacheParams, s: usize, t: usize) -> (usize, usize) {
    let moved = c.count(s).abs_diff(c.count(t));
    if !c.float {
        return (moved, 0);
    }
    let (a, b) = (
        FloatState::from_number(s as u8),
        FloatState::from_number(t as u8),
    );
    let classes = (0..a.count.min(b.count))
        .filter(|&k| a.is_float(k) != b.is_float(k))
        .count();
    (moved, classes)
}

/// Which of a `cached.prune` family's `candidates` (every member, in table order) to
/// compile: those the selection tables pick (each op's member per entry state, and the glue
/// it needs), every member of the glue element (a label's state is reached through glue
/// from any state), and those matching an entry of `cached.keep`. The tables of the members
/// kept are the tables of all of them: a pick is the canonical or lowest exit among the
/// members from a state, which is kept, and a state without a member has none either way.
/// A `keep` entry that matches no candidate is refused (a typo would otherwise compile
/// nothing more, silently).
pub fn prune(family: &Family, candidates: &[Member], root: &Path) -> Result<Vec<bool>> {
    let Some(keep) = &family.prune else {
        return Ok(vec![true; candidates.len()]);
    };
    let refs: Vec<&Member> = candidates.iter().collect();
    // Number the candidates by position: the tables then name them by index.
    let table = family.grid(&refs, root, |name| {
        candidates
            .iter()
            .position(|m| m.stencil == name)
            .map(|i| i as u16)
    })?;
    let mut kept = vec![false; candidates.len()];
    if let Some(select) = &table.select {
        for t in select.transitions.iter().flatten() {
            kept[t.member as usize] = true;
            if let Some(g) = t.glue {
                kept[g as usize] = true;
            }
        }
    }
    let glue = family
        .glue
        .as_ref()
        .and_then(|g| table.elements.iter().position(|e| e == g));
    let element = |m: &Member| table.elements.get(m.coords[0]).map(String::as_str);
    for (k, m) in candidates.iter().enumerate() {
        if glue == Some(m.coords[0]) {
            kept[k] = true;
        }
    }
    for entry in keep {
        let mut any = false;
        for (k, m) in candidates.iter().enumerate() {
            if family.matches(entry, element(m), &m.coords[1..]) {
                kept[k] = true;
                any = true;
            }
        }
        if !any {
            let text: Vec<String> = entry.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            return Err(Error(format!(
                "{}: [[family]] `{}`: `cached.keep` entry {{ {} }} matches no member of the \
                 family (its elements and parameter values, less `skip`): fix or remove it",
                family.manifest,
                family.name,
                text.join(", ")
            )));
        }
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::RawFamily;
    use serde::Deserialize;
    use std::path::Path;

    /// A family from its manifest entry, and its table with every member numbered in order.
    fn select(entry: &str) -> Result<(Table, Option<Select>)> {
        #[derive(Deserialize)]
        struct One {
            family: RawFamily,
        }
        let raw: One = toml::from_str(entry).map_err(|e| Error(e.to_string()))?;
        let f = Family::check("m.toml", 0, raw.family)?;
        let members = f.members(0, Path::new("/"))?;
        let names: Vec<String> = members.iter().map(|m| m.stencil.clone()).collect();
        let refs: Vec<_> = members.iter().collect();
        let table = f.table(&refs, Path::new("/"), |n| {
            names.iter().position(|m| m == n).map(|i| i as u16)
        })?;
        let select = table.select.clone();
        Ok((table, select))
    }

    const POP: &str =
        "[family]\nname = \"f\"\nsource = \"f.c\"\nstencil = \"op_{elem}_{IN}_{OUT}\"\n\
        list = [\"pop1\", \"mv\"]\nlist_define = \"OP\"\n\
        skip = [{ elem = \"pop1\", IN = 0 }, { elem = \"mv\", IN = 0, OUT = 0 }, \
        { elem = \"mv\", IN = 1, OUT = 1 }, { elem = \"mv\", IN = 2, OUT = 2 }]\n\
        [family.params]\nIN = \"0..=2\"\nOUT = \"0..=2\"\n";

    #[test]
    fn canonical_members_and_glue_where_a_state_has_none() {
        let entry = format!(
            "{POP}[family.cached]\nentry = \"IN\"\nexit = \"OUT\"\nglue = \"mv\"\n\
             [family.cached.effects]\npop1 = [1, 0]\n"
        );
        let (table, s) = select(&entry).unwrap();
        let s = s.unwrap();
        let name = |i: u16| -> String {
            // Members are numbered in member order: recover the name from the table.
            let at = table.stencils.iter().position(|&m| m == Some(i)).unwrap();
            let (e, rest) = (at / 9, at % 9);
            format!("{}_{}_{}", table.elements[e], rest / 3, rest % 3)
        };
        assert_eq!((s.states, s.combos, s.glue), (3, 1, Some(1)));
        // pop1 from 2: the canonical exit 1, no glue.
        let t = s.transitions[2].unwrap();
        assert_eq!(
            (name(t.member), t.exit, t.glue, t.via),
            ("pop1_2_1".into(), 1, None, 2)
        );
        // pop1 from 0: no member; fill to 1 first, then pop1 1 -> 0.
        let t = s.transitions[0].unwrap();
        assert_eq!((name(t.member), t.exit, t.via), ("pop1_1_0".into(), 0, 1));
        assert_eq!(name(t.glue.unwrap()), "mv_0_1");
        // The glue element is not selected by op.
        assert!(s.transitions[3..6].iter().all(Option::is_none));
        // members: (op * 3 + entry) * 3 + exit; 5 is (pop1, 1, 2).
        assert_eq!(s.members[5].map(name), Some("pop1_1_2".into()));
        assert_eq!(s.members[0], None);
    }

    #[test]
    fn without_glue_a_state_with_no_member_has_no_transition() {
        let entry = format!(
            "{POP}[family.cached]\nentry = \"IN\"\nexit = \"OUT\"\n\
             [family.cached.effects]\npop1 = [1, 0]\n"
        );
        let (_, s) = select(&entry).unwrap();
        let s = s.unwrap();
        assert_eq!(s.transitions[0], None);
        assert!(s.transitions[1].is_some());
        // No effect stated (mv): the lowest exit kept.
        assert_eq!(s.effects[1], None);
        assert_eq!(s.transitions[3].unwrap().exit, 1);
    }

    #[test]
    fn unknown_elements_and_both_kinds_of_effect_are_refused() {
        for (cached, says) in [
            (
                "glue = \"nope\"\n",
                "`cached.glue` names `nope`, which is not an element",
            ),
            (
                "[family.cached.effects]\nnope = [1, 0]\n",
                "`cached.effects` names `nope`",
            ),
            (
                "pop = 1\npush = 0\n[family.cached.effects]\npop1 = [1, 0]\n",
                "either `pop`/`push`",
            ),
        ] {
            let entry = format!("{POP}[family.cached]\nentry = \"IN\"\nexit = \"OUT\"\n{cached}");
            let err = select(&entry).unwrap_err().to_string();
            assert!(err.contains(says), "{err}");
        }
    }

    /// A transition by member names: `(member, glue, exit)`.
    type Pick = Option<(String, Option<String>, u8)>;

    /// Each (op, state)'s transition by names, and the members compiled.
    fn picks(entry: &str) -> (Vec<Pick>, Vec<String>) {
        let (_, s) = select(entry).unwrap();
        let names: Vec<String> = {
            #[derive(Deserialize)]
            struct One {
                family: RawFamily,
            }
            let raw: One = toml::from_str(entry).unwrap();
            let f = Family::check("m.toml", 0, raw.family).unwrap();
            let members = f.members(0, Path::new("/")).unwrap();
            members.into_iter().map(|m| m.stencil).collect()
        };
        let name = |i: u16| names[i as usize].clone();
        let picks = s
            .unwrap()
            .transitions
            .iter()
            .map(|t| t.map(|t| (name(t.member), t.glue.map(name), t.exit)))
            .collect();
        (picks, names)
    }

    #[test]
    fn prune_compiles_only_what_the_tables_pick_and_keeps_the_tables() {
        let cached = "[family.cached]\nentry = \"IN\"\nexit = \"OUT\"\nglue = \"mv\"\n";
        let effects = "[family.cached.effects]\npop1 = [1, 0]\n";
        let (all, every) = picks(&format!("{POP}{cached}{effects}"));
        let (pruned, kept) = picks(&format!("{POP}{cached}prune = true\n{effects}"));
        assert_eq!(pruned, all, "the same picks from fewer members");
        assert_eq!(every.len(), 12);
        // pop1's picks (1 -> 0, 2 -> 1) and every glue member (labels reach states by glue).
        assert_eq!(
            kept,
            [
                "op_pop1_1_0",
                "op_pop1_2_1",
                "op_mv_0_1",
                "op_mv_0_2",
                "op_mv_1_0",
                "op_mv_1_2",
                "op_mv_2_0",
                "op_mv_2_1"
            ]
        );
        // The table names the pruned members for the generated crate.
        let (table, _) = select(&format!("{POP}{cached}prune = true\n{effects}")).unwrap();
        assert_eq!(
            table.pruned,
            ["op_pop1_1_1", "op_pop1_1_2", "op_pop1_2_0", "op_pop1_2_2"]
        );
        // `keep` adds members by partial assignment, as `skip` names them.
        let keep = "prune = true\nkeep = [{ elem = \"pop1\", OUT = 2 }]\n";
        let (again, kept) = picks(&format!("{POP}{cached}{keep}{effects}"));
        assert_eq!(again, all);
        assert_eq!(kept.len(), 10);
        assert!(kept.contains(&"op_pop1_1_2".to_string()));
    }

    #[test]
    fn prune_and_keep_mistakes_are_refused_with_the_fix() {
        for (cached, says) in [
            (
                "keep = [{ IN = 1 }]\n",
                "`cached.keep` names members to compile although pruned, but `cached.prune` \
                 is not set: add `prune = true`, or remove `keep`",
            ),
            (
                "prune = true\nkeep = [{ elem = \"pop1\", IN = 0 }]\n",
                "`cached.keep` entry { IN = 0, elem = pop1 } matches no member of the family",
            ),
            (
                "prune = true\nkeep = [{ DEPTH = 1 }]\n",
                "`cached.keep` entry key `DEPTH` is not `elem` or a parameter",
            ),
        ] {
            let entry = format!("{POP}[family.cached]\nentry = \"IN\"\nexit = \"OUT\"\n{cached}");
            let err = select(&entry).unwrap_err().to_string();
            assert!(err.contains(says) && err.contains("`f`"), "{err}");
        }
    }

    #[test]
    fn a_family_without_cached_has_no_tables() {
        assert_eq!(select(POP).unwrap().1, None);
    }
}
