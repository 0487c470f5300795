//! `replay TARGET FILE...`: runs a fuzz target on files (a finding from
//! `fuzz/artifacts/`, or a whole corpus directory) on a stable compiler,
//! without libFuzzer. Panics, with the target's message, on the first input
//! that still finds something; prints how many inputs ran otherwise.

use std::path::Path;

fn inputs(p: &Path, out: &mut Vec<std::path::PathBuf>) {
    if p.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(p)
            .expect("read the directory")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for e in entries {
            inputs(&e, out);
        }
    } else {
        out.push(p.to_path_buf());
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 || !inca_fuzz::TARGETS.contains(&args[1].as_str()) {
        eprintln!(
            "usage: replay TARGET FILE|DIR...   targets: {}",
            inca_fuzz::TARGETS.join(" ")
        );
        std::process::exit(2);
    }
    let mut files = Vec::new();
    for a in &args[2..] {
        inputs(Path::new(a), &mut files);
    }
    for f in &files {
        let data = std::fs::read(f).expect("read the input");
        eprintln!("{}", f.display());
        inca_fuzz::run(&args[1], &data);
    }
    println!("{}: {} inputs, no findings", args[1], files.len());
}
