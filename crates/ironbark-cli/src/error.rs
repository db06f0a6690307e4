//! The CLI's error: one line of text for the user and an exit status.

use std::fmt;
use std::io;
use std::path::Path;

/// Exit status of a failed command.
pub const EXIT_FAILURE: i32 = 1;
/// Exit status of `check` when it could not run at all.
pub const EXIT_CANNOT_CHECK: i32 = 2;
/// Exit status when stdout was closed early (`ironbark dump db | head`):
/// the shell's status of a process killed by SIGPIPE.
pub const EXIT_BROKEN_PIPE: i32 = 141;

/// An error: its message (one line, shown after `ironbark: `) and the exit
/// status. A message of `None` exits silently.
#[derive(Debug)]
pub struct CliError {
    pub message: Option<String>,
    pub code: i32,
}

pub type Result<T> = std::result::Result<T, CliError>;

impl CliError {
    pub fn new(message: impl Into<String>) -> CliError {
        CliError {
            message: Some(message.into()),
            code: EXIT_FAILURE,
        }
    }

    pub fn with_code(mut self, code: i32) -> CliError {
        self.code = code;
        self
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message.as_deref().unwrap_or(""))
    }
}

/// An I/O error on stdout: a closed pipe ends the program quietly.
pub fn output_error(e: io::Error) -> CliError {
    if e.kind() == io::ErrorKind::BrokenPipe {
        CliError {
            message: None,
            code: EXIT_BROKEN_PIPE,
        }
    } else {
        CliError::new(format!("cannot write the output: {}", io_message(&e)))
    }
}

/// An I/O error's text without Rust's " (os error N)" suffix.
pub fn io_message(e: &io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) if s.ends_with(')') => s[..i].to_string(),
        _ => s,
    }
}

/// `db_error` of an open for writing: a permission error says what the
/// command needs.
pub fn db_write_error(path: &Path, e: ironbark::Error) -> CliError {
    let denied =
        matches!(&e, ironbark::Error::Io(io) if io.kind() == io::ErrorKind::PermissionDenied);
    let mut e = db_error(path, e);
    if denied {
        e.message = e.message.map(|m| {
            format!(
                "{m} (this command writes the database: it needs write access to the file, \
                 its lock file and redo log beside it; stat, dump, copy, check and readers \
                 only read)"
            )
        });
    }
    e
}

/// An engine error about the database at `path`, as one line.
pub fn db_error(path: &Path, e: ironbark::Error) -> CliError {
    let p = path.display();
    let message = match e {
        ironbark::Error::Io(io) if io.kind() == io::ErrorKind::NotFound => {
            format!("{p}: no such file or directory")
        }
        ironbark::Error::Io(io) if io.raw_os_error() == Some(21) => {
            format!(
                "{p}: is a directory, not an ironbark database file \
                 (an LMDB environment? migrate its named databases with: mdb_dump -a {p} | \
                 ironbark load NEW.ib; one with only a main database with: mdb_dump {p} | \
                 ironbark load NEW.ib)"
            )
        }
        ironbark::Error::Io(io) if io.kind() == io::ErrorKind::PermissionDenied => {
            // The engine's hint is for programs ("open it with
            // Options::read_only"): the read commands open read-only
            // already, and the writing ones say what they need.
            let text = io.to_string();
            let text = match text.find("Options::read_only") {
                Some(at) => text[..at].rfind("; ").map_or(&text[..], |cut| &text[..cut]),
                None => &text[..],
            };
            format!("{p}: {}", text.replace(" (os error 13)", ""))
        }
        ironbark::Error::Io(io) => format!("{p}: {}", io_message(&io)),
        ironbark::Error::NotAnIronbarkFile => format!("{p}: not an ironbark database file"),
        ironbark::Error::Locked => format!(
            "{p}: the database is locked for writing: another process has a write \
             transaction open"
        ),
        ironbark::Error::Busy => format!("{p}: another write transaction is in progress"),
        ironbark::Error::ReadOnly => format!(
            "{p}: the database is open read-only here (no write permission on the \
             file or its lock file?)"
        ),
        e => format!("{p}: {e}"),
    };
    CliError::new(message)
}
