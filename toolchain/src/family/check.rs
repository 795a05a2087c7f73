//! Checking one `[[family]]` as written ([`RawFamily`]) into a [`Family`]: its list and
//! its macros, its parameters and their values, the naming rule, `skip`, and the cache
//! parameters with their stack effects, pruning and glue. Every error names the manifest,
//! the entry's position and name, and what to write instead.

use super::{CacheParams, Elements, Family, StackEffect};
use crate::error::{Error, Result};
use crate::set::is_identifier;
use serde::Deserialize;
use std::collections::BTreeMap;

/// `[[family]]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFamily {
    name: String,
    source: String,
    stencil: String,
    #[serde(default)]
    list: Option<Vec<String>>,
    #[serde(default)]
    list_file: Option<String>,
    #[serde(default)]
    list_define: Option<String>,
    #[serde(default)]
    list_flag: Option<String>,
    #[serde(default)]
    defines: Vec<String>,
    #[serde(default)]
    params: BTreeMap<String, ParamValues>,
    #[serde(default)]
    skip: Vec<BTreeMap<String, toml::Value>>,
    #[serde(default)]
    cached: Option<RawCacheParams>,
}

/// `cached = { entry = "IN", exit = "OUT" }` as written: which parameters are the cache state.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCacheParams {
    entry: String,
    exit: String,
    #[serde(default)]
    pop: Option<u8>,
    #[serde(default)]
    push: Option<u8>,
    /// Per element: `[pop, push]` (for families whose ops differ; no members are left out).
    #[serde(default)]
    effects: Option<BTreeMap<String, [u8; 2]>>,
    /// The element whose members move between states (spill/fill), used as glue.
    #[serde(default)]
    glue: Option<String>,
    /// Compile only the members the selection tables pick, the glue element's and `keep`'s.
    #[serde(default)]
    prune: bool,
    /// With `prune`: members to compile all the same (partial assignments, as in `skip`).
    #[serde(default)]
    keep: Vec<BTreeMap<String, toml::Value>>,
    /// Float cache slots: states number each slot's class (`CPJIT_FLOAT_CACHE`).
    #[serde(default)]
    float: bool,
    /// With `float`: the elements whose pushed values are floats.
    #[serde(default)]
    float_results: Vec<String>,
}

/// A parameter's values: a list (`[0, 1, 2]`, `["a", "b"]`) or an integer range
/// (`"0..3"`, `"0..=3"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum ParamValues {
    List(Vec<toml::Value>),
    Range(String),
}

fn value_text(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Boolean(b) => Some(u8::from(*b).to_string()),
        _ => None,
    }
}

/// `"a..b"` or `"a..=b"` as its integers.
fn range_values(text: &str) -> Option<Vec<String>> {
    let (lo, hi, inclusive) = match text.split_once("..=") {
        Some((lo, hi)) => (lo, hi, true),
        None => {
            let (lo, hi) = text.split_once("..")?;
            (lo, hi, false)
        }
    };
    let lo: i64 = lo.trim().parse().ok()?;
    let hi: i64 = hi.trim().parse().ok()?;
    let hi = if inclusive { hi } else { hi - 1 };
    (lo <= hi && hi - lo < 4096).then(|| (lo..=hi).map(|v| v.to_string()).collect())
}

/// `skip` or `cached.keep` entries (`what`): partial assignments of `elem` and parameter
/// values, as text.
fn assignments(
    what: &str,
    entries: Vec<BTreeMap<String, toml::Value>>,
    params: &[(String, Vec<String>)],
) -> std::result::Result<Vec<BTreeMap<String, String>>, String> {
    let mut out = Vec::new();
    for entry in entries {
        let mut checked = BTreeMap::new();
        for (key, value) in entry {
            let known = key == "elem" || params.iter().any(|(p, _)| *p == key);
            let Some(text) = value_text(&value).filter(|_| known) else {
                return Err(format!(
                    "`{what}` entry key `{key}` is not `elem` or a parameter, or its value is \
                     not an integer or string"
                ));
            };
            checked.insert(key, text);
        }
        out.push(checked);
    }
    Ok(out)
}

fn is_macro_name(name: &str) -> bool {
    is_identifier(name)
}

impl Family {
    /// Checks one `[[family]]`; `file` and the family's position name it in errors.
    pub fn check(file: &str, index: usize, raw: RawFamily) -> Result<Family> {
        let at = format!("{file}: [[family]] #{} (`{}`)", index + 1, raw.name);
        Family::checked(file, raw).map_err(|what| Error(format!("{at}: {what}")))
    }

    /// [`Family::check`]'s checks, each error without its place.
    fn checked(file: &str, raw: RawFamily) -> std::result::Result<Family, String> {
        if !is_identifier(&raw.name) {
            return Err("`name` must be a C/Rust identifier".into());
        }
        let elements = elements(raw.list, raw.list_file, &raw.list_define, &raw.list_flag)?;
        let params = params(raw.params)?;
        if elements == Elements::None && params.is_empty() {
            return Err("a family needs a list, parameters, or both".into());
        }
        // The naming rule must tell every member apart: every dimension appears in it.
        if elements != Elements::None && !raw.stencil.contains("{elem}") {
            return Err(format!("`stencil` `{}` does not use {{elem}}", raw.stencil));
        }
        for (name, _) in &params {
            if !raw.stencil.contains(&format!("{{{name}}}")) {
                return Err(format!(
                    "`stencil` `{}` does not use {{{name}}}",
                    raw.stencil
                ));
            }
        }
        let skip = assignments("skip", raw.skip, &params)?;
        for d in &raw.defines {
            if d.is_empty() || d.starts_with('-') {
                return Err(format!("`defines`: `{d}` must be NAME or NAME=VALUE"));
            }
        }
        let cache = raw.cached.map(|c| cache(c, &params)).transpose()?;
        let (cached, effects, glue, prune, float_results) = match cache {
            Some(c) => (Some(c.params), c.effects, c.glue, c.prune, c.float_results),
            None => (None, BTreeMap::new(), None, None, Vec::new()),
        };
        Ok(Family {
            manifest: file.to_string(),
            name: raw.name,
            source: raw.source,
            stencil: raw.stencil,
            elements,
            list_define: raw.list_define,
            list_flag: raw.list_flag,
            defines: raw.defines,
            params,
            skip,
            cached,
            effects,
            glue,
            prune,
            float_results,
        })
    }
}

/// Where the list of elements comes from (`list` or `list_file`), with the macros that pass
/// an element (`list_define`, `list_flag`) checked against it.
fn elements(
    list: Option<Vec<String>>,
    list_file: Option<String>,
    list_define: &Option<String>,
    list_flag: &Option<String>,
) -> std::result::Result<Elements, String> {
    let elements = match (list, list_file) {
        (Some(_), Some(_)) => return Err("give `list` or `list_file`, not both".into()),
        (Some(list), None) => Elements::Inline(list),
        (None, Some(file)) => Elements::File(file),
        (None, None) => Elements::None,
    };
    if let Elements::Inline(list) = &elements {
        if let Some(bad) = list.iter().find(|e| !is_identifier(e)) {
            return Err(format!("list element `{bad}` is not an identifier"));
        }
    }
    match (&elements, list_define) {
        (Elements::None, Some(_)) => {
            return Err("`list_define` without `list` or `list_file`".into())
        }
        (Elements::Inline(_) | Elements::File(_), None) => {
            return Err("a list needs `list_define` (the macro each element is passed in)".into())
        }
        (_, Some(d)) if !is_macro_name(d) => {
            return Err(format!("`list_define` `{d}` is not a macro name"))
        }
        _ => {}
    }
    if let Some(flag) = list_flag {
        if elements == Elements::None {
            return Err("`list_flag` without `list` or `list_file`".into());
        }
        // Prefix and element (an identifier) make a macro name.
        if !is_macro_name(flag) {
            return Err(format!(
                "`list_flag` `{flag}` is not a macro name prefix (each element gets \
                 -D{flag}<element>=1)"
            ));
        }
    }
    Ok(elements)
}

/// The parameters with their values as text, in name order.
fn params(
    raw: BTreeMap<String, ParamValues>,
) -> std::result::Result<Vec<(String, Vec<String>)>, String> {
    let mut params = Vec::new();
    for (name, values) in raw {
        if !is_macro_name(&name) || name == "elem" {
            return Err(format!(
                "parameter `{name}` is not a macro name (or is `elem`)"
            ));
        }
        let values = match values {
            ParamValues::List(list) => list.iter().map(value_text).collect::<Option<Vec<_>>>(),
            ParamValues::Range(text) => range_values(&text),
        };
        match values {
            Some(v) if !v.is_empty() => params.push((name, v)),
            _ => {
                return Err(format!(
                    "parameter `{name}` needs a non-empty list of integers or strings, or \
                     a range such as \"0..=3\""
                ))
            }
        }
    }
    Ok(params)
}

/// A checked `cached` table: the state parameters and what goes with them.
struct Cache {
    params: CacheParams,
    effects: BTreeMap<String, StackEffect>,
    glue: Option<String>,
    prune: Option<Vec<BTreeMap<String, String>>>,
    float_results: Vec<String>,
}

/// Checks `cached` against the family's parameters.
fn cache(
    c: RawCacheParams,
    params: &[(String, Vec<String>)],
) -> std::result::Result<Cache, String> {
    if !c.prune && !c.keep.is_empty() {
        return Err(
            "`cached.keep` names members to compile although pruned, but \
             `cached.prune` is not set: add `prune = true`, or remove `keep`"
                .into(),
        );
    }
    let prune = match c.prune {
        true => Some(assignments("cached.keep", c.keep, params)?),
        false => None,
    };
    if c.effects.is_some() && (c.pop.is_some() || c.push.is_some()) {
        return Err(
            "`cached` takes either `pop`/`push` (one stack effect for every op) or \
             `effects` (one per element), not both"
                .into(),
        );
    }
    let effects = c
        .effects
        .unwrap_or_default()
        .into_iter()
        .map(|(element, [pop, push])| {
            let float = false; // Family::effect sets it from `float_results`.
            (element, StackEffect { pop, push, float })
        })
        .collect();
    if !c.float && !c.float_results.is_empty() {
        return Err(
            "`cached.float_results` names ops pushing floats, but the family has no float \
             cache slots: add `float = true` (and CPJIT_FLOAT_CACHE=1 to `defines`)"
                .into(),
        );
    }
    let effect = match (c.pop, c.push) {
        (Some(pop), Some(push)) => Some(StackEffect {
            pop,
            push,
            float: false,
        }),
        (None, None) => None,
        _ => {
            return Err(
                "`cached` needs both `pop` and `push` (the members' stack effect) or neither"
                    .into(),
            )
        }
    };
    let (entry, exit) = (
        state_param("entry", &c.entry, params),
        state_param("exit", &c.exit, params),
    );
    let params = match (entry, exit) {
        (Ok(entry), Ok(exit)) if effect.is_some() && entry == exit => {
            return Err(
                "`cached.pop`/`push` need distinct entry and exit parameters (the exit state \
                 is derived from the entry state)"
                    .into(),
            )
        }
        (Ok(entry), Ok(exit)) => CacheParams {
            entry,
            exit,
            effect,
            float: c.float,
        },
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    Ok(Cache {
        params,
        effects,
        glue: c.glue,
        prune,
        float_results: c.float_results,
    })
}

/// The index of the parameter `cached.<role>` names. A state parameter's values are what
/// the annotation states: integers, written as the annotation's numbers are (so "2"
/// matches and "02" cannot be meant).
fn state_param(
    role: &str,
    name: &str,
    params: &[(String, Vec<String>)],
) -> std::result::Result<usize, String> {
    let Some(at) = params.iter().position(|(p, _)| p == name) else {
        return Err(format!(
            "`cached.{role}` names `{name}`, which is not a parameter of the family (its \
             parameters: {})",
            names(params)
        ));
    };
    if let Some(bad) = params[at]
        .1
        .iter()
        .find(|v| v.parse::<u8>().map(|n| n.to_string()).as_deref() != Ok(v.as_str()))
    {
        return Err(format!(
            "`cached.{role}` names parameter `{name}`, whose value `{bad}` is not a cache \
             state (an integer from 0 to 255 without leading zeros)"
        ));
    }
    Ok(at)
}

/// The parameters' names, for errors: `IN, OUT`.
fn names(params: &[(String, Vec<String>)]) -> String {
    let names: Vec<&str> = params.iter().map(|(p, _)| p.as_str()).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}
