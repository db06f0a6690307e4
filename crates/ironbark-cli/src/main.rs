//! `ironbark`: the command-line tool of the ironbark key-value store.
//!
//! What LMDB users have in `mdb_stat`, `mdb_dump`, `mdb_load` and
//! `mdb_copy`, plus `check` and `readers`. Dumps use the text format of
//! `mdb_dump`/`mdb_load`, so `mdb_dump -a ENV | ironbark load NEW.ib`
//! migrates an LMDB environment with named databases (`mdb_dump ENV`, one
//! with only a main database), and `ironbark dump -a --lmdb DB | mdb_load
//! ENV` goes back. See `docs/cli.md`.

mod commands;
mod dumpfile;
mod error;
mod progress;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// The tree that stands for LMDB's main (unnamed) database.
pub const MAIN_TREE: &str = "main";

#[derive(Parser, Debug)]
#[command(
    name = "ironbark",
    version,
    about = "Inspect, dump, load, copy and check ironbark databases",
    long_about = "Inspect, dump, load, copy and check ironbark databases.\n\n\
        Dumps use the text format of LMDB's mdb_dump/mdb_load, so an LMDB \
        environment with named databases migrates with `mdb_dump -a ENV | \
        ironbark load NEW.ib` (one with only a main database: `mdb_dump ENV | \
        ironbark load NEW.ib`, without -a, for which mdb_dump -a writes nothing) \
        and back with `ironbark dump -a --lmdb DB | mdb_load ENV`. LMDB's main \
        (unnamed) database is the tree named `main`.",
    after_help = "Examples:\n  \
        ironbark stat data.ib\n  \
        mdb_dump -a ./lmdb-env | ironbark load data.ib     # named databases\n  \
        mdb_dump ./lmdb-env | ironbark load data.ib        # only a main database\n  \
        ironbark dump --all --lmdb data.ib | mdb_load ./new-env\n  \
        ironbark copy --compact data.ib backup.ib\n  \
        ironbark check data.ib"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show page size, file size, used and free pages, transaction ids,
    /// readers, and the shape of each tree (like mdb_stat)
    #[command(after_help = "Examples:\n  \
        ironbark stat data.ib\n  \
        ironbark stat data.ib --tree users\n  \
        ironbark stat data.ib --json | jq .trees")]
    Stat {
        /// The database file
        db: PathBuf,
        /// Show only this tree
        #[arg(long, short = 's', value_name = "NAME")]
        tree: Option<String>,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },

    /// Write trees as text in the format of LMDB's mdb_dump
    ///
    /// Without --tree or --all, dumps the tree `main`, which stands for
    /// LMDB's main (unnamed) database and is written without a `database=`
    /// line. Every other tree is written with `database=NAME`. With --all,
    /// `main` (when not empty) comes first, then every other tree in name
    /// order, as consecutive sections.
    ///
    /// Every page is verified against its checksum as it is read, and
    /// everything is checked before the first byte is written: a damaged
    /// page, or a tree name that cannot be written (a newline), fails the
    /// dump with nothing written. With --lmdb it also checks for what
    /// LMDB's mdb_load cannot take.
    #[command(after_help = "Examples:\n  \
        ironbark dump data.ib                      # the tree `main`, to stdout\n  \
        ironbark dump data.ib --tree users -p      # printable text\n  \
        ironbark dump data.ib --all -f data.txt    # every tree, to a file\n  \
        ironbark dump data.ib --all --lmdb | mdb_load ./lmdb-env")]
    Dump {
        /// The database file
        db: PathBuf,
        /// Dump this tree (default: main)
        #[arg(long, short = 's', value_name = "NAME", conflicts_with = "all")]
        tree: Option<String>,
        /// Dump every tree
        #[arg(long, short = 'a')]
        all: bool,
        /// Printable format: printable bytes as themselves, others as \xx
        /// (default: hex pairs, format=bytevalue)
        #[arg(short = 'p', long = "print")]
        print: bool,
        /// Check, before writing anything, that LMDB's mdb_load can take the
        /// dump: no empty key, no key over 511 bytes, no NUL in a tree name,
        /// no key of `main` equal to a tree's name, no backslash with -p
        #[arg(long)]
        lmdb: bool,
        /// Write to FILE instead of stdout
        #[arg(short = 'f', long = "file", value_name = "FILE")]
        file: Option<PathBuf>,
    },

    /// Load text in the format of LMDB's mdb_dump into a database (created
    /// if missing), all in one transaction
    ///
    /// Each section goes to the tree named by its `database=` line, or to
    /// the tree `main` when it has none (LMDB's main database). Existing
    /// entries with the same key are overwritten; other entries stay. A
    /// malformed or truncated input (a section without DATA=END) is reported
    /// with its line number and nothing is loaded. An empty input is an
    /// error too, and a database that did not exist is not created: it is
    /// what a failed dump upstream sends, and what `mdb_dump -a` writes for
    /// an LMDB environment with only a main database (dump that one with
    /// `mdb_dump ENV`, without -a).
    ///
    /// One process writes at a time: when another process has a write
    /// transaction open, load tries for a second and then fails (nothing
    /// loaded), unless --wait is given.
    #[command(after_help = "Examples:\n  \
        mdb_dump -a ./lmdb-env | ironbark load data.ib     # named databases\n  \
        mdb_dump ./lmdb-env | ironbark load data.ib        # only a main database\n  \
        ironbark load data.ib -f users.txt --tree users\n  \
        ironbark dump old.ib --all | ironbark load new.ib")]
    Load {
        /// The database file (created if missing)
        db: PathBuf,
        /// Read from FILE instead of stdin
        #[arg(short = 'f', long = "file", value_name = "FILE")]
        file: Option<PathBuf>,
        /// Load every section into this tree, whatever its `database=` line says
        #[arg(long, short = 's', value_name = "NAME")]
        tree: Option<String>,
        /// Like mdb_load -a: keys must come in ascending order, after the
        /// keys already in the tree; a key out of order is an error
        #[arg(long, short = 'a')]
        append: bool,
        /// Wait for another process's write transaction to end instead of
        /// failing when the database is locked for writing
        #[arg(long)]
        wait: bool,
    },

    /// Copy a database to a new file, consistently, from one snapshot
    /// (like mdb_copy)
    ///
    /// A hot backup: writers in other processes go on committing meanwhile,
    /// and the copy holds exactly one commit. Without --compact the copy is
    /// page for page, free pages included. With --compact only live data is
    /// written, tree by tree in key order with full pages, so the copy is
    /// about the size of the live data. DST must not exist.
    ///
    /// Every page of the snapshot is verified against its checksum: a
    /// damaged page fails the copy, naming the page, and no file is created.
    #[command(after_help = "Examples:\n  \
        ironbark copy data.ib backup.ib\n  \
        ironbark copy --compact data.ib compacted.ib")]
    Copy {
        /// The database to copy
        src: PathBuf,
        /// The new file (must not exist)
        dst: PathBuf,
        /// Write only live data, in key order (like mdb_copy -c)
        #[arg(long, short = 'c')]
        compact: bool,
        /// When the source's redo log proves a durable commit damaged (no
        /// crash leaves that: the medium or a misdirected write did), copy
        /// the last commit before the damage instead of failing
        #[arg(long)]
        salvage_damaged_log: bool,
    },

    /// Verify the whole database: every page's checksum and structure, key
    /// order, tree shape, counters, and that every page is used or free
    /// exactly once
    ///
    /// Runs on a read snapshot, beside writers in other processes. A
    /// damaged page is reported and its subtree skipped; the check goes on
    /// with the rest and reports every problem it finds (up to 1000).
    ///
    /// Exit status: 0 when clean (with a summary line), 1 when problems are
    /// found (one line per problem on stdout), 2 when the check could not
    /// run (no such file, not an ironbark file).
    #[command(after_help = "Examples:\n  \
        ironbark check data.ib\n  \
        ironbark check data.ib --json")]
    Check {
        /// The database file
        db: PathBuf,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },

    /// Show the live read transactions of every process that has the
    /// database open: pid, snapshot, whether the process still runs, and
    /// the free pages each keeps from reuse
    ///
    /// A reader whose process died without ending it (killed, crashed)
    /// holds a stale slot, shown as `dead`: it pins pages until cleared.
    /// --clear-stale clears such slots and says how many it cleared; it
    /// needs the write lock, so it fails (after a second of trying) while
    /// another process has a write transaction open. Writers also clear
    /// stale slots by themselves when they need the space.
    #[command(after_help = "Examples:\n  \
        ironbark readers data.ib\n  \
        ironbark readers data.ib --clear-stale\n  \
        ironbark readers data.ib --json")]
    Readers {
        /// The database file
        db: PathBuf,
        /// Clear the reader slots of dead processes, and say how many
        #[arg(long)]
        clear_stale: bool,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
}

/// A panic is a bug; say so in one line instead of Rust's panic message.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!(
            "ironbark: internal error (a bug, please report it): {}{at}",
            msg.replace('\n', " ")
        );
    }));
}

fn main() {
    install_panic_hook();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
                _ => {
                    // clap's message as one line: its first paragraph, and
                    // the usage line.
                    let text = e.render().to_string();
                    let message: Vec<&str> = text
                        .lines()
                        .take_while(|l| !l.trim().is_empty())
                        .map(str::trim)
                        .collect();
                    let message = message.join(" ");
                    let message = message.strip_prefix("error: ").unwrap_or(&message);
                    let usage = text
                        .lines()
                        .find_map(|l| l.strip_prefix("Usage: "))
                        .unwrap_or("ironbark --help");
                    eprintln!("ironbark: {message} (usage: {usage})");
                    std::process::exit(2);
                }
            }
        }
    };
    let result = match cli.command {
        Command::Stat { db, tree, json } => commands::stat(&db, tree.as_deref(), json),
        Command::Dump {
            db,
            tree,
            all,
            print,
            lmdb,
            file,
        } => commands::dump(&db, tree.as_deref(), all, print, lmdb, file.as_deref()),
        Command::Load {
            db,
            file,
            tree,
            append,
            wait,
        } => commands::load(&db, file.as_deref(), tree.as_deref(), append, wait),
        Command::Copy {
            src,
            dst,
            compact,
            salvage_damaged_log,
        } => commands::copy(&src, &dst, compact, salvage_damaged_log),
        Command::Check { db, json } => commands::check(&db, json),
        Command::Readers {
            db,
            clear_stale,
            json,
        } => commands::readers(&db, clear_stale, json),
    };
    if let Err(e) = result {
        if let Some(message) = &e.message {
            eprintln!("ironbark: {message}");
        }
        std::process::exit(e.code);
    }
}
