//! The package's `honker` command (`honker._cli`): the operator's command
//! of the `honker-cli` crate, run inside this module, so that installing
//! the package installs the command with no other binary.

use std::ffi::OsString;

use pyo3::prelude::*;

/// Runs the command line `argv` (the program's name first) without the GIL
/// and returns its exit status; it prints to this process's stdout and
/// stderr itself.
#[pyfunction]
pub(crate) fn cli_main(py: Python<'_>, argv: Vec<OsString>) -> u8 {
    py.detach(|| honker_cli::main_from(argv))
}
