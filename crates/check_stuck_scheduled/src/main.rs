fn main() {
    plugin::main::<check_stuck_scheduled::Opts>()
}
