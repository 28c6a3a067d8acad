//! wordcount - an infernet job in Rust (std only, no crates): counts the words
//! of stdin and prints the most frequent ones.
//!
//! A word is a maximal run of alphanumeric characters (Unicode), compared in
//! lower case; everything else separates words. Invalid UTF-8 is replaced by
//! U+FFFD, which is a separator.
//!
//! Output (stdout): the top N words, one "count word" line each, sorted by
//! count (highest first) and then by word (byte order). N is the first
//! command-line argument, 10 by default. Then a last line
//! "total <words> distinct <distinct words>".
//!
//! Build: rustc --edition 2021 --target wasm32-wasip1 -O -o wordcount.wasm wordcount.rs
//! (Rust 1.78 and later, after `rustup target add wasm32-wasip1`; before,
//! `--target wasm32-wasi`, as testdata/Makefile's pinned rustc does).

use std::collections::HashMap;
use std::io::{self, BufWriter, Read, Write};
use std::process;

fn main() {
    let top = match std::env::args().nth(1) {
        None => 10,
        Some(arg) => match arg.parse::<usize>() {
            Ok(n) => n,
            Err(_) => {
                eprintln!("wordcount: N must be a non-negative integer, got {:?}", arg);
                process::exit(2);
            }
        },
    };

    let mut input = Vec::new();
    if let Err(err) = io::stdin().read_to_end(&mut input) {
        eprintln!("wordcount: reading stdin: {}", err);
        process::exit(1);
    }
    let text = String::from_utf8_lossy(&input);

    // Count the words, lower-cased.
    let mut counts: HashMap<String, u64> = HashMap::new();
    let mut total: u64 = 0;
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        *counts.entry(word.to_lowercase()).or_insert(0) += 1;
        total += 1;
    }

    // Sort by count descending, then word ascending, so the output does not
    // depend on the hash map's (randomly seeded) iteration order.
    let mut sorted: Vec<(&String, &u64)> = counts.iter().collect();
    sorted.sort_unstable_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));

    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let result = (|| -> io::Result<()> {
        for (word, count) in sorted.iter().take(top) {
            writeln!(out, "{} {}", count, word)?;
        }
        writeln!(out, "total {} distinct {}", total, counts.len())?;
        out.flush()
    })();
    if let Err(err) = result {
        eprintln!("wordcount: writing stdout: {}", err);
        process::exit(1);
    }
}
