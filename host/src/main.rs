fn main() {
    if let Err(error) = capwasm::cli::main() {
        // One line saying what is wrong (each cause once), no backtrace.
        let causes: Vec<String> = error.chain().map(ToString::to_string).collect();
        eprintln!("error: {}", causes.join(": "));
        std::process::exit(1);
    }
}
