#![forbid(unsafe_code)]
fn main() {
    multicall::main()
}
