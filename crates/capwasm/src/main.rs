fn main() -> std::process::ExitCode {
    capwasm::cli::main()
}
