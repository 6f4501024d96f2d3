//! `honker.import_honker`: core's importer (`honker::import`), its report
//! as JSON text that the package turns into a dict.

use pyo3::prelude::*;

use crate::errors::IntoPyResult;

/// Imports the Honker file at `path` in place; returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (path, *, dry_run = false, time_zone = None, skip_process_check = false))]
pub(crate) fn import_honker(
    py: Python<'_>,
    path: std::path::PathBuf,
    dry_run: bool,
    time_zone: Option<String>,
    skip_process_check: bool,
) -> PyResult<String> {
    let options = honker::import::ImportOptions {
        dry_run,
        time_zone,
        skip_process_check,
    };
    let report = py
        .detach(|| honker::import::import_honker(&path, &options))
        .py()?;
    Ok(report.to_json().to_string())
}
