//! The family tables of a generated crate: `FAMILIES`, `mod family` and `mod op`.
//!
//! Spelt for rustc's cost: each table of stencil indices is one byte-string literal read
//! through `cpjit_model::StencilIndices`, not an array of one expression per cell (the
//! VM's x86-64 crate: 44,000 cells, 0.69 G of rustc's 7.52 G instructions as arrays; issue
//! 40 wave 33), with its rows in decimal in a comment above it, for the reader. The
//! transitions stay arrays (the runtime reads them as a slice in its per-op loop), their
//! absent entries through crate-level constants ([`absence_constants`]).

use super::{ident, string_literal};
use crate::error::Result;
use crate::set::BuiltSet;
use std::fmt::Write as _;

/// Cells a comment line shows at most (a longer row continues on the next line).
const CELLS_PER_LINE: usize = 16;
/// Bytes a literal line holds at most (a row starts on a new line).
const BYTES_PER_LINE: usize = 32;

/// The family tables (`FAMILIES`, `mod family`, `mod op`), written only when the set has
/// families, so a set without them generates exactly what it did before families existed.
pub(super) fn families(o: &mut String, set: &BuiltSet) -> Result<()> {
    if set.families.is_empty() {
        return Ok(());
    }
    let list = |items: &[String]| {
        items
            .iter()
            .map(|i| string_literal(i))
            .collect::<Vec<_>>()
            .join(", ")
    };
    o.push_str("/// Index of each stencil family in [`FAMILIES`], by name.\n#[rustfmt::skip]\npub mod family {\n");
    for (i, f) in set.families.iter().enumerate() {
        let _ = writeln!(o, "    pub const {}: usize = {i};", ident(&f.name)?);
    }
    o.push_str("}\n\n");
    absence_constants(o, set);
    let _ = writeln!(
        o,
        "/// The stencil families: stencil indices by element and parameter values.\n#[rustfmt::skip]\npub static FAMILIES: [Family<'static>; {}] = [",
        set.families.len()
    );
    for f in &set.families {
        let _ = writeln!(
            o,
            "    Family {{\n        name: {},",
            string_literal(&f.name)
        );
        let _ = writeln!(o, "        elements: &[{}],", list(&f.elements));
        o.push_str("        params: &[\n");
        for (name, values) in &f.params {
            let _ = writeln!(
                o,
                "            FamilyParam {{ name: {}, values: &[{}] }},",
                string_literal(name),
                list(values)
            );
        }
        o.push_str("        ],\n");
        let row = f.params.iter().map(|(_, values)| values.len()).product();
        indices_field(o, "        ", "stencils", &f.stencils, row);
        cache_select(o, f);
        o.push_str("    },\n");
    }
    o.push_str("];\n\n");
    op_constants(o, set)
}

/// A family's `cached` field: its selection tables (`crate::select`), or `None`.
fn cache_select(o: &mut String, f: &crate::family::Table) {
    let Some(s) = &f.select else {
        o.push_str("        cached: None,\n");
        return;
    };
    let id = |m: Option<u16>| m.map_or("NONE".to_string(), |i| i.to_string());
    let _ = writeln!(
        o,
        "        cached: Some(CacheSelect {{\n            entry_param: {},\n            exit_param: {},\n            states: {},\n            combos: {},\n            glue: {},",
        s.entry_param,
        s.exit_param,
        s.states,
        s.combos,
        id(s.glue.map(|g| g as u16))
    );
    let effects: Vec<String> = s
        .effects
        .iter()
        .map(|e| {
            e.map_or("CacheSelect::NO_EFFECT".to_string(), |e| {
                format!("[{}, {}]", e.pop, e.push)
            })
        })
        .collect();
    let _ = writeln!(o, "            effects: &[{}],", effects.join(", "));
    let states = s.states.max(1);
    indices_field(o, "            ", "members", &s.members, states * states);
    transitions_field(o, "            ", &s.transitions, states);
    o.push_str("        }),\n");
}

/// `field: StencilIndices::from_le_bytes(b"..."),` with the cells in decimal above it,
/// `row` cells a row (`-` for an empty cell).
fn indices_field(o: &mut String, indent: &str, field: &str, cells: &[Option<u16>], row: usize) {
    let shown = |c: &Option<u16>| c.map_or("-".to_string(), |i| i.to_string());
    let rows: Vec<Vec<String>> = cells
        .chunks(row.max(1))
        .map(|r| r.iter().map(shown).collect())
        .collect();
    comment_rows(o, indent, &rows);
    let bytes: Vec<Vec<u8>> = cells
        .chunks(row.max(1))
        .map(|r| {
            r.iter()
                .flat_map(|c| c.unwrap_or(cpjit_model::Family::NONE).to_le_bytes())
                .collect()
        })
        .collect();
    let _ = writeln!(
        o,
        "{indent}{field}: StencilIndices::from_le_bytes({}),",
        rows_literal(&bytes, indent)
    );
}

/// `transitions: &[...],`, an op a row: each entry a `Transition` literal or
/// `NO_TRANSITION`.
fn transitions_field(
    o: &mut String,
    indent: &str,
    transitions: &[Option<crate::select::Transition>],
    states: usize,
) {
    let id = |m: Option<u16>| m.map_or("NONE".to_string(), |i| i.to_string());
    let _ = writeln!(o, "{indent}transitions: &[");
    for row in transitions.chunks(states.max(1)) {
        let cells: Vec<String> = row
            .iter()
            .map(|t| match t {
                None => "NO_TRANSITION".to_string(),
                Some(t) => format!(
                    "Transition {{ member: {}, glue: {}, via: {}, exit: {} }}",
                    t.member,
                    id(t.glue),
                    t.via,
                    t.exit
                ),
            })
            .collect();
        let _ = writeln!(o, "{indent}    {},", cells.join(", "));
    }
    let _ = writeln!(o, "{indent}],");
}

/// `NONE` and `NO_TRANSITION`, the transition tables' short names of
/// [`cpjit_model::Family::NONE`] and [`cpjit_model::Transition::NONE`], each written only if
/// the tables use it (an unused constant is a warning): rustc resolves a path through a type
/// while type checking, once per use (issue 38).
fn absence_constants(o: &mut String, set: &BuiltSet) {
    let selects = || set.families.iter().filter_map(|f| f.select.as_ref());
    let none = selects()
        .any(|s| s.glue.is_none() || s.transitions.iter().flatten().any(|t| t.glue.is_none()));
    let no_transition = selects().any(|s| s.transitions.iter().any(Option::is_none));
    if none {
        o.push_str("/// A table's cell with no stencil.\nconst NONE: u16 = Family::NONE;\n");
    }
    if no_transition {
        o.push_str(
            "/// An op's entry with no way from a state.\nconst NO_TRANSITION: Transition = Transition::NONE;\n",
        );
    }
    if none || no_transition {
        o.push('\n');
    }
}

/// One `// ` line per row (continued after [`CELLS_PER_LINE`] cells), cells separated by
/// `, `.
fn comment_rows(o: &mut String, indent: &str, rows: &[Vec<String>]) {
    for row in rows {
        for (k, part) in row.chunks(CELLS_PER_LINE).enumerate() {
            let lead = if k == 0 { "" } else { "  " };
            let _ = writeln!(o, "{indent}// {lead}{}", part.join(", "));
        }
    }
}

/// The rows as one byte-string literal of `\x` escapes: `b""` when empty, else each row
/// from a new line (up to [`BYTES_PER_LINE`] a line), every line after a `\` that ends
/// the previous one (so the new line and the indent are not in the string).
fn rows_literal(rows: &[Vec<u8>], indent: &str) -> String {
    let mut s = String::from("b\"");
    for row in rows {
        for chunk in row.chunks(BYTES_PER_LINE) {
            let _ = write!(s, "\\\n{indent}    ");
            for b in chunk {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
    }
    s.push('"');
    s
}

/// `mod op`: per cached family whose only parameters are its state parameters, one
/// constant per element naming its op (`op::test_cached::PUSH`), the same on every target.
fn op_constants(o: &mut String, set: &BuiltSet) -> Result<()> {
    let plain: Vec<_> = set
        .families
        .iter()
        .filter(|f| f.select.as_ref().is_some_and(|s| s.combos == 1) && !f.elements.is_empty())
        .collect();
    if plain.is_empty() {
        return Ok(());
    }
    o.push_str("/// The ops of the cached families, by element (`CacheSelect::op`).\n#[rustfmt::skip]\npub mod op {\n");
    for f in plain {
        let _ = writeln!(
            o,
            "    /// Family `{}`.\n    pub mod {} {{",
            f.name,
            ident(&f.name)?
        );
        for (i, e) in f.elements.iter().enumerate() {
            let name = e.to_ascii_uppercase();
            if crate::set::is_identifier(&name) {
                let _ = writeln!(o, "        pub const {}: u16 = {i};", ident(&name)?);
            }
        }
        o.push_str("    }\n");
    }
    o.push_str("}\n\n");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_start_lines_and_long_rows_continue() {
        assert_eq!(rows_literal(&[], "  "), "b\"\"");
        let rows = vec![vec![0xab; 2], vec![1; 33]];
        let text = rows_literal(&rows, "");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "b\"\\");
        assert_eq!(lines[1], "    \\xab\\xab\\");
        assert_eq!(lines[2].matches("\\x01").count(), BYTES_PER_LINE);
        assert_eq!(lines[3], "    \\x01\"");
    }

    #[test]
    fn index_cells_are_little_endian_with_none_for_empty() {
        let mut o = String::new();
        indices_field(&mut o, "", "stencils", &[Some(0x0102), None, Some(3)], 2);
        assert_eq!(
            o,
            "// 258, -\n// 3\nstencils: StencilIndices::from_le_bytes(b\"\\\n    \\x02\\x01\\xff\\xff\\\n    \\x03\\x00\"),\n"
        );
    }

    #[test]
    fn transitions_are_literals_an_op_a_row() {
        use crate::select::Transition;
        let mut o = String::new();
        let glued = Transition {
            member: 7,
            exit: 2,
            glue: Some(9),
            via: 1,
        };
        let plain = Transition {
            glue: None,
            ..glued
        };
        transitions_field(&mut o, "", &[Some(glued), Some(plain), None, None], 2);
        assert_eq!(
            o,
            "transitions: &[\n    Transition { member: 7, glue: 9, via: 1, exit: 2 }, \
             Transition { member: 7, glue: NONE, via: 1, exit: 2 },\n    NO_TRANSITION, NO_TRANSITION,\n],\n"
        );
    }
}
