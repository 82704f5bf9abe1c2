fn main() {
    multicall::main()
}
