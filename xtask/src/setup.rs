//! `cargo xtask setup`: runs `ci/setup.sh`, which installs (as root) or names (otherwise)
//! the missing system packages, rustup targets and the wine prefix. Idempotent and fast
//! when everything is present.

use crate::util::{root, run};
use std::process::Command;

pub fn ensure() -> Result<(), String> {
    run(Command::new("bash").arg(root().join("ci/setup.sh")))
        .map_err(|e| format!("set-up incomplete: {e}"))
}
