fn main() {
    plugin::main::<check_stuck_terminating::Opts>()
}
