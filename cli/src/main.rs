//! The `honker` binary: everything is in the library (`honker_cli`), which
//! the Python and Node packages' `honker` commands run too.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(honker_cli::main_from(std::env::args_os()))
}
