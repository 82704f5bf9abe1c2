fn main() {
    std::process::exit(textfile::main())
}
