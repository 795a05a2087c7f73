//! The parameters of the VM's cached families (vm/templates/manifest.toml), by name: the
//! cache states `IN` and `OUT` and the optional ones each member's combination of values
//! says something about ([`super::CachedOps::of_set`]).

/// How many optional parameters there are ([`value_combinations`]).
pub(super) const OPTIONAL: usize = 7;

/// A family's parameter indices, by name.
pub(super) struct Params {
    pub(super) entry: usize,
    pub(super) exit: usize,
    pub(super) pinned: Option<usize>,
    pub(super) scaled: Option<usize>,
    pub(super) pinned_scaled: Option<usize>,
    pub(super) depth: Option<usize>,
    pub(super) pinned_operand: Option<usize>,
    pub(super) floats: Option<usize>,
    /// The pinned float register a member's local is in (`PINNED_FLOAT`,
    /// [`super::pinned_float`]).
    pub(super) pinned_float: Option<usize>,
}

impl Params {
    pub(super) fn of(family: &cpjit_model::Family<'_>, at: &str) -> Result<Params, String> {
        let names: Vec<&str> = family.params.iter().map(|p| p.name).collect();
        let find = |name: &str| names.iter().position(|&n| n == name);
        let known = [
            "IN",
            "OUT",
            "PINNED",
            "SCALED",
            "PINNED_SCALED",
            "DEPTH",
            "PINNED_OPERAND",
            "FLOATS",
            "PINNED_FLOAT",
        ];
        if let Some(other) = names.iter().find(|n| !known.contains(n)) {
            return Err(format!(
                "{at}: parameter `{other}` is none of the cache-state parameters {known:?}"
            ));
        }
        let (Some(entry), Some(exit)) = (find("IN"), find("OUT")) else {
            return Err(format!(
                "{at}: parameters {names:?}, expected the cache states \"IN\" and \"OUT\""
            ));
        };
        Ok(Params {
            entry,
            exit,
            pinned: find("PINNED"),
            scaled: find("SCALED"),
            pinned_scaled: find("PINNED_SCALED"),
            depth: find("DEPTH"),
            pinned_operand: find("PINNED_OPERAND"),
            floats: find("FLOATS"),
            pinned_float: find("PINNED_FLOAT"),
        })
    }
}

impl Params {
    /// The value index of each parameter of `family` that is not a state parameter, in the
    /// family's order (what names the kit's op), for the combination `combo` of the
    /// `optional` parameters' values; and how many there are.
    pub(super) fn kit_values(
        &self,
        family: &cpjit_model::Family<'_>,
        optional: &[Option<usize>; OPTIONAL],
        combo: &[usize; OPTIONAL],
    ) -> ([usize; OPTIONAL], usize) {
        let mut values = [0usize; OPTIONAL];
        let mut n = 0;
        for k in (0..family.params.len()).filter(|&k| k != self.entry && k != self.exit) {
            let at = optional.iter().position(|&o| o == Some(k));
            values[n] = at.map_or(0, |at| combo[at]);
            n += 1;
        }
        (values, n)
    }
}

/// Every combination of the values of a family's `optional` parameters (one index per
/// parameter, 0 where the family lacks it).
pub(super) fn value_combinations(
    family: &cpjit_model::Family<'_>,
    optional: &[Option<usize>; OPTIONAL],
) -> Vec<[usize; OPTIONAL]> {
    let mut combos: Vec<[usize; OPTIONAL]> = vec![[0; OPTIONAL]];
    for (k, param) in optional.iter().enumerate() {
        let n = param.map_or(1, |i| family.params[i].values.len());
        combos = combos
            .iter()
            .flat_map(|c| {
                (0..n).map(move |v| {
                    let mut c = *c;
                    c[k] = v;
                    c
                })
            })
            .collect();
    }
    combos
}
