fn main() -> anyhow::Result<()> {
    capwasm::cli::main()
}
